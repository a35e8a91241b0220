//! Operations from key to preview: what the person points at, the editor dialog (quota
//! value, reslice layout), the plan preview and its confirmation. Whether an operation may
//! run at all is `ui::permission`'s answer, asked before a dialog opens and again on confirm.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::{App, describe_gpu};
use crate::mig;
use crate::model::{GpuId, NodeId};
use crate::ops::{self, ExecRequest, OpRequest, Plan, QuotaKey};
use crate::ui::command::{Command, Mode, ViewKind};
use crate::ui::state::{Dialog, EditKind, Screen};
use crate::ui::views::{RowId, detail, tables};

impl App {
    pub(super) fn key_editor(&mut self, key: KeyEvent) {
        let Some(Dialog::Edit { text, choices, selected, error, .. }) = self.ui.dialog.as_mut() else { return };
        match key.code {
            KeyCode::Esc => {
                self.ui.dialog = None;
                self.ui.info("cancelled: nothing was changed");
            }
            KeyCode::Enter => self.submit_edit(),
            KeyCode::Backspace => {
                text.pop();
                *error = None;
                *selected = None;
            }
            KeyCode::Down | KeyCode::Tab if !choices.is_empty() => {
                let i = selected.map(|s| (s + 1) % choices.len()).unwrap_or(0);
                *selected = Some(i);
                *text = choices[i].clone();
                *error = None;
            }
            KeyCode::Up | KeyCode::BackTab if !choices.is_empty() => {
                let i = selected.map(|s| (s + choices.len() - 1) % choices.len()).unwrap_or(choices.len() - 1);
                *selected = Some(i);
                *text = choices[i].clone();
                *error = None;
            }
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                if text.chars().count() < 200 {
                    text.push(c);
                }
                *error = None;
                *selected = None;
            }
            _ => {}
        }
    }

    fn submit_edit(&mut self) {
        let Some(Dialog::Edit { kind, text, .. }) = self.ui.dialog.clone() else { return };
        let req = match &kind {
            EditKind::Quota { tenant, key, .. } => {
                // A ClusterQueue's limits are picked by name: `borrowingLimit=4`, `lending 2`.
                let (field, value) = ops::QuotaField::split(&text);
                let quota = QuotaKey { field, ..key.clone() };
                OpRequest::SetQuota { tenant: tenant.clone(), quota, value: value.to_string() }
            }
            EditKind::Reslice { node, gpus, .. } => {
                OpRequest::Reslice { node: node.clone(), gpus: gpus.clone(), layout: text.clone() }
            }
        };
        match ops::plan(&self.fleet, &req) {
            Ok(plan) => self.open_preview(plan),
            Err(e) => {
                if let Some(Dialog::Edit { error, .. }) = self.ui.dialog.as_mut() {
                    *error = Some(e.to_string());
                }
            }
        }
    }

    /// A preview: the keymap's dialog mode decides.
    pub(super) fn key_preview(&mut self, key: KeyEvent) {
        if let Some(c) = self.keymap.lookup(Mode::Dialog, &key) {
            self.preview_command(c);
        }
    }

    fn preview_command(&mut self, c: Command) {
        let denied = match self.ui.dialog.as_ref() {
            Some(Dialog::Preview { plan, .. }) => self.may_run(plan.kind).err(),
            _ => None,
        };
        let Some(Dialog::Preview { id, plan, scroll, error }) = self.ui.dialog.as_mut() else { return };
        let id = *id;
        match c {
            Command::Quit => self.request_quit(),
            Command::Cancel | Command::Back => {
                self.ui.dialog = None;
                self.ui.info("cancelled: nothing was changed");
            }
            Command::Down | Command::PageDown => {
                *scroll = scroll.saturating_add(if c == Command::Down { 1 } else { 10 })
            }
            Command::Up | Command::PageUp => *scroll = scroll.saturating_sub(if c == Command::Up { 1 } else { 10 }),
            Command::ToggleForce => {
                if let OpRequest::Drain { node, force } = &plan.request {
                    let req = OpRequest::Drain { node: node.clone(), force: !force };
                    match ops::plan(&self.fleet, &req) {
                        Ok(p) => {
                            **plan = p;
                            *error = None;
                            self.exec.send(ExecRequest::Preview { id, plan: plan.clone() });
                        }
                        Err(e) => *error = Some(e.to_string()),
                    }
                }
            }
            Command::Confirm => {
                if let Some(denied) = denied {
                    *error = Some(denied.on_confirm());
                    return;
                }
                if !plan.can_execute() {
                    *error = Some("this plan is blocked; resolve the blockers above (or cancel)".into());
                    return;
                }
                let plan = plan.clone();
                self.ui.dialog = None;
                self.ui.ops.mine.push(id);
                self.ui.info(format!("started: {} — progress below and in :ops", plan.title));
                self.exec.send(ExecRequest::Execute { id, plan });
            }
            _ => {}
        }
    }

    /// The node and GPU the person is pointing at, wherever they are.
    fn target(&self) -> (Option<NodeId>, Option<GpuId>) {
        match self.ui.screen() {
            Screen::Table(ViewKind::Fleet) => (self.ui.selected_id(ViewKind::Fleet).and_then(RowId::node), None),
            Screen::Table(ViewKind::Gpus) => {
                let g = self.ui.selected_id(ViewKind::Gpus).and_then(RowId::gpu);
                (g.and_then(|g| self.fleet.gpu(g)).map(|g| g.node), g)
            }
            Screen::Table(ViewKind::Pods) => {
                let pod = self.ui.selected_id(ViewKind::Pods).and_then(RowId::pod);
                (pod.and_then(|p| self.fleet.pod(p)).and_then(|p| p.node), None)
            }
            Screen::Node(n) => {
                let rows = detail::tree_rows(&self.fleet, n, &self.ui.nav.node_closed);
                (Some(n), rows.get(self.ui.nav.node_sel).and_then(|r| r.gpu))
            }
            Screen::Gpu(g) => (self.fleet.gpu(g).map(|g| g.node), Some(g)),
            _ => (None, None),
        }
    }

    pub(super) fn start_op(&mut self, c: Command) {
        if let Some(op) = c.op()
            && let Err(denied) = self.may_run(op)
        {
            self.ui.error(denied.on_start(&c.name().replace('_', " ")));
            return;
        }
        if c == Command::EditQuota {
            self.start_quota_edit();
            return;
        }
        let (node, gpu) = self.target();
        if c == Command::UntaintGpu {
            match gpu.and_then(|g| self.fleet.gpu(g)).and_then(|g| Some((self.fleet.node(g.node)?, g.index))) {
                Some((n, index)) => {
                    let node = self.fleet.str_of(n.name).to_string();
                    self.preview(OpRequest::UntaintGpu { node, gpu: index });
                }
                None => self.ui.warn("select a GPU (GPUs view, or a GPU in a node's tree) to untaint it"),
            }
            return;
        }
        let Some(node) = node.and_then(|n| self.fleet.node(n)) else {
            self.ui.warn(format!("select a node (or a GPU) first to {}", c.name().replace('_', " ")));
            return;
        };
        let name = self.fleet.str_of(node.name).to_string();
        if c == Command::Reslice {
            let Some(model) = node.gpu_model else {
                self.ui.error(format!("{name} has no MIG-capable GPU model recorded"));
                return;
            };
            let picked: Vec<&crate::model::Gpu> = match gpu.and_then(|g| self.fleet.gpu(g)) {
                Some(g) => vec![g],
                None => node.gpus.iter().filter_map(|g| self.fleet.gpu(*g)).collect(),
            };
            if let Some(why) = ops::reslice_blocked_by_dra(&name, picked.into_iter()) {
                self.ui.error(why);
                return;
            }
            let (gpus, current) = match gpu.and_then(|g| self.fleet.gpu(g)) {
                Some(g) => (vec![g.index], describe_gpu(&self.fleet, g)),
                None => (Vec::new(), self.fleet.str_of(node.mig_config).to_string()),
            };
            let choices = mig::config_names(model);
            self.ui.dialog = Some(Dialog::Edit {
                kind: EditKind::Reslice { node: name, gpus, model, current },
                text: String::new(),
                choices,
                selected: None,
                error: None,
            });
            return;
        }
        let req = match c {
            Command::Cordon => OpRequest::Cordon { node: name },
            Command::Uncordon => OpRequest::Uncordon { node: name },
            _ => OpRequest::Drain { node: name, force: false },
        };
        self.preview(req);
    }

    /// `:taint [noschedule|noexec] [REASON]` on the selected GPU; `T` is `:taint`.
    pub(super) fn start_taint(&mut self, arg: &str) {
        if let Err(denied) = self.may_run(ops::OpKind::TaintGpu) {
            self.ui.error(denied.on_start("taint gpu"));
            return;
        }
        let (_, gpu) = self.target();
        let Some((node, index)) =
            gpu.and_then(|g| self.fleet.gpu(g)).and_then(|g| Some((self.fleet.node(g.node)?, g.index)))
        else {
            self.ui.warn("select a GPU (GPUs view, or a GPU in a node's tree) to taint it");
            return;
        };
        let node = self.fleet.str_of(node.name).to_string();
        let mut words = arg.split_whitespace().peekable();
        let effect = match words.peek().and_then(|w| ops::TaintEffect::parse(w)) {
            Some(e) => {
                words.next();
                e
            }
            None => ops::TaintEffect::NoSchedule,
        };
        let value = words.collect::<Vec<_>>().join("-");
        let value = if value.is_empty() { "maintenance".to_string() } else { value };
        self.preview(OpRequest::TaintGpu { node, gpu: index, effect, value });
    }

    /// `B` / `:host [reboot|off|on|inspect]`: the Metal3 host under the selected node.
    pub(super) fn start_host(&mut self, arg: &str) {
        let Some(action) = ops::HostAction::parse(arg) else {
            self.ui.error(format!("{arg:?} is no host action: use :host reboot, :host off, :host on or :host inspect"));
            return;
        };
        if let Err(denied) = self.may_run(action.kind()) {
            self.ui.error(denied.on_start(&format!("{} the host", action.as_str())));
            return;
        }
        // A host picked in the hosts view (a spare under no node included).
        if let Screen::Table(ViewKind::Hosts) = self.ui.screen() {
            let picked =
                self.ui.selected_id(ViewKind::Hosts).and_then(|r| crate::ui::views::hosts::host_of(&self.fleet, r));
            let Some(h) = picked else { return self.ui.warn("select a host first") };
            let host = Some(h.key());
            return self.preview(OpRequest::Host { node: String::new(), host, action });
        }
        let Some(node) = self.target().0.and_then(|n| self.fleet.node(n)) else {
            self.ui.warn("select a node (fleet view, a node's screen) or a host (hosts view, O) to act on a host");
            return;
        };
        let node = self.fleet.str_of(node.name).to_string();
        self.preview(OpRequest::Host { node, host: None, action });
    }

    /// `R` / `:reclaim [NAMESPACE/POD]`: frees the GPUs of the selected pod (or of the pod on
    /// the selected GPU or MIG instance, or the one an alert is about) by acting on its owner.
    pub(super) fn start_reclaim(&mut self, arg: &str) {
        if let Err(denied) = self.may_run(ops::OpKind::Reclaim) {
            self.ui.error(denied.on_start("reclaim"));
            return;
        }
        let f = &self.fleet;
        let arg = arg.trim();
        let pod = if arg.is_empty() {
            // A shared GPU's pods are several: the person picks one.
            let shared = match self.ui.screen() {
                Screen::Table(v) => match self.ui.selected_id(v) {
                    Some(RowId::Gpu(g)) => f.gpu(g),
                    _ => None,
                },
                Screen::Gpu(g) => {
                    f.gpu(g).filter(|g| g.instances.get(self.ui.nav.gpu_row).is_none_or(|i| i.pod.is_none()))
                }
                _ => None,
            };
            if let Some(g) = shared.filter(|g| g.pods.len() > 1) {
                let node = f.node(g.node).map(|n| f.str_of(n.name)).unwrap_or_default();
                return self.ui.warn(format!(
                    "GPU {} of {node} is shared by {} pods: pick one in the pods view (5), or :reclaim NAMESPACE/POD",
                    g.index,
                    g.pods.len()
                ));
            }
            match self.pod_under_selection() {
                Some(p) => p,
                None => {
                    return self.ui.warn(
                        "R frees a pod's GPUs: select a pod (5), a GPU or MIG instance a pod holds, or an alert about one",
                    );
                }
            }
        } else {
            let Some((ns, name)) = arg.split_once('/') else {
                return self.ui.error(format!(
                    "{arg:?}: name the pod as NAMESPACE/NAME (e.g. :reclaim ml/notebook-alice), or select it and press R"
                ));
            };
            match f.pod_by_name(ns, name) {
                Some(p) => p,
                None => return self.ui.error(format!("no pod {arg} in the fleet; the pods view (5) lists them")),
            }
        };
        let Some(p) = f.pod(pod) else { return self.ui.warn("the selected pod is gone") };
        let req = OpRequest::Reclaim { namespace: f.str_of(p.namespace).to_string(), pod: p.name.to_string() };
        self.preview(req);
    }

    /// `:hold [QUEUE] [drain]`, `:resume [QUEUE]`: a Kueue ClusterQueue's stopPolicy; the
    /// queue of the selected quota row when none is named.
    pub(super) fn start_queue_stop(&mut self, c: Command, arg: &str) {
        let kind = if c == Command::HoldQueue { ops::OpKind::HoldQueue } else { ops::OpKind::ResumeQueue };
        if let Err(denied) = self.may_run(kind) {
            self.ui.error(denied.on_start(if c == Command::HoldQueue { "hold" } else { "resume" }));
            return;
        }
        let mut words: Vec<&str> = arg.split_whitespace().collect();
        let drain = words.last().is_some_and(|w| w.eq_ignore_ascii_case("drain"));
        if drain {
            words.pop();
        }
        let on = self.ui.screen();
        let selected = match on {
            Screen::Table(v @ (ViewKind::Quotas | ViewKind::Workloads)) => self.ui.selected_id(v),
            _ => None,
        };
        let selected = match selected {
            Some(RowId::Quota(q)) => self.fleet.quota(crate::model::QuotaId(q)).and_then(|q| match q.source {
                crate::model::QuotaSource::ClusterQueue { queue, .. } => Some(self.fleet.str_of(queue).to_string()),
                crate::model::QuotaSource::ResourceQuota { .. } => None,
            }),
            // The queue a selected Workload waits in, or was admitted to.
            Some(r @ RowId::Workload(_)) => {
                tables::workload_of(&self.fleet, r).map(|(_, w)| w.cluster_queue.clone()).filter(|q| !q.is_empty())
            }
            _ => None,
        };
        let Some(queue) = words.first().map(|w| w.to_string()).or(selected) else {
            return self.ui.warn(
                "name the ClusterQueue (:hold cq-train, :hold cq-train drain, :resume cq-train), or select its row in the quotas view (4) or a Workload of it (9)",
            );
        };
        let policy = match (c, drain) {
            (Command::ResumeQueue, _) => ops::StopPolicy::None,
            (_, true) => ops::StopPolicy::HoldAndDrain,
            _ => ops::StopPolicy::Hold,
        };
        self.preview(OpRequest::QueueStop { queue, policy });
    }

    /// `:suspend [NS/NAME]`, `:unsuspend [NS/NAME]`: a Kueue Workload's `spec.active`; the
    /// selected Workload when none is named.
    pub(super) fn start_workload_active(&mut self, c: Command, arg: &str) {
        let active = c == Command::ResumeWorkload;
        let kind = if active { ops::OpKind::ResumeWorkload } else { ops::OpKind::SuspendWorkload };
        if let Err(denied) = self.may_run(kind) {
            self.ui.error(denied.on_start(if active { "resume" } else { "suspend" }));
            return;
        }
        let selected = match self.ui.selected_id(ViewKind::Workloads) {
            Some(r) if self.ui.screen() == Screen::Table(ViewKind::Workloads) => {
                tables::workload_of(&self.fleet, r).map(|(k, _)| k.to_string())
            }
            _ => None,
        };
        let named = arg.split_whitespace().next().map(str::to_string);
        let Some(workload) = named.or(selected) else {
            return self.ui.warn(
                "name the Workload (:suspend NAMESPACE/NAME, :unsuspend NAMESPACE/NAME), or select it in the workloads view (9)",
            );
        };
        if !workload.contains('/') {
            return self.ui.error(format!(
                "{workload:?}: name the Workload as NAMESPACE/NAME (the workloads view, 9, lists them so)"
            ));
        }
        self.preview(OpRequest::WorkloadActive { workload, active });
    }

    fn preview(&mut self, req: OpRequest) {
        match ops::plan(&self.fleet, &req) {
            Ok(plan) => self.open_preview(plan),
            Err(e) => self.ui.error(e.to_string()),
        }
    }

    /// Shows a plan for confirmation. The operation gets its number now, so the audit
    /// log's `planned` record and what follows a confirmation share it.
    fn open_preview(&mut self, mut plan: Plan) {
        let id = self.ui.ops.next;
        self.ui.ops.next += 1;
        for note in self.fleet.access.iter().flat_map(|a| a.limited(plan.kind.name())) {
            plan.warnings.push(format!("{note}; checked for the namespaces this touches when you confirm"));
        }
        self.exec.send(ExecRequest::Preview { id, plan: Box::new(plan.clone()) });
        self.ui.dialog = Some(Dialog::Preview { id, plan: Box::new(plan), scroll: 0, error: None });
    }

    fn start_quota_edit(&mut self) {
        let quota = match self.ui.screen() {
            Screen::Table(ViewKind::Quotas) => self.ui.selected_id(ViewKind::Quotas).and_then(RowId::quota),
            Screen::Table(ViewKind::Tenants) => self
                .ui
                .selected_id(ViewKind::Tenants)
                .and_then(RowId::tenant)
                .and_then(|t| self.fleet.tenant(t))
                .and_then(|t| {
                    t.quotas
                        .iter()
                        .copied()
                        .find(|q| self.fleet.quota(*q).is_some_and(|q| self.fleet.is_gpu_resource(q.resource)))
                        .or(t.quotas.first().copied())
                }),
            _ => None,
        };
        let Some(q) = quota.and_then(|q| self.fleet.quota(q)) else {
            self.ui.warn("select a quota (in :quotas) or a tenant with a quota (in :tenants) to edit it");
            return;
        };
        let Some(t) = self.fleet.tenant(q.tenant) else { return };
        let key = QuotaKey {
            source: ops::source_spec(&self.fleet, &q.source),
            resource: self.fleet.str_of(q.resource).to_string(),
            field: ops::QuotaField::Hard,
        };
        let current = q.hard.to_string();
        // A Kueue ClusterQueue has three limits per flavor resource: offer each, by name.
        let choices = match key.source {
            crate::model::QuotaSourceSpec::ClusterQueue { .. } => vec![
                format!("nominalQuota={}", q.hard),
                format!("borrowingLimit={}", q.borrowing_limit.map(|v| v.to_string()).unwrap_or_default()),
                format!("lendingLimit={}", q.lending_limit.map(|v| v.to_string()).unwrap_or_default()),
            ],
            crate::model::QuotaSourceSpec::ResourceQuota { .. } => Vec::new(),
        };
        self.ui.dialog = Some(Dialog::Edit {
            kind: EditKind::Quota { tenant: self.fleet.str_of(t.name).to_string(), key, current: current.clone() },
            text: current,
            choices,
            selected: None,
            error: None,
        });
    }
}
