//! `y`: the selected object as the API server holds it. The request leaves through the
//! inspector the runner set (`on_inspect`); the answer comes back as a `Delta::Inspected` and
//! the pane shows it. Reading changes nothing, so it works in `--readonly` too.

use super::App;
use crate::model::{CapiRow, Delta, InspectTarget, Inspected, QuotaSource};
use crate::ui::command::ViewKind;
use crate::ui::state::{Pane, Screen};
use crate::ui::views::{RowId, capi, tables};

/// Told each object the person asks to inspect.
pub type InspectFn = Box<dyn FnMut(u64, &InspectTarget) + Send>;

impl App {
    /// Calls `ask` with each object the person inspects; without it (the demo) the pane says
    /// there is no API server to ask.
    pub fn on_inspect(&mut self, ask: impl FnMut(u64, &InspectTarget) + Send + 'static) {
        self.inspector = Some(Box::new(ask));
    }

    /// The object under the selection: a node (fleet and GPU rows, the node and GPU
    /// screens), a pod, a quota's ResourceQuota or ClusterQueue, a ComputeDomain, a tenant's
    /// first namespace.
    pub(super) fn selected_object(&self) -> Result<InspectTarget, &'static str> {
        let f = &self.fleet;
        let node = |n| f.node(n).map(|n| InspectTarget::new("Node", None, f.str_of(n.name)));
        let found = match self.ui.screen() {
            Screen::Node(n) => node(n),
            Screen::Gpu(g) => f.gpu(g).and_then(|g| node(g.node)),
            Screen::Inspect => return Err("this is the object; Esc goes back"),
            Screen::Clusters => return Err("a cluster is not one object; Enter opens it"),
            Screen::Logs => {
                let r = self.ui.nav.logs.as_ref().ok_or("no log is open")?;
                return Ok(InspectTarget::new("Pod", Some(&r.namespace), &r.pod));
            }
            Screen::Table(v) => match (v, self.ui.selected_id(v)) {
                (_, None) => return Err("no row is selected"),
                // An event: the object it is about (`kind/namespace/name`, `kind/name`).
                (ViewKind::Events, Some(RowId::Event(e))) => {
                    let object = tables::event_at(f, e).map(|e| e.object.as_str()).unwrap_or("");
                    match object.split('/').collect::<Vec<_>>().as_slice() {
                        [kind, ns, name] => Some(InspectTarget::new(kind, Some(ns), name)),
                        [kind, name] if *kind == "node" => Some(InspectTarget::new("Node", None, name)),
                        [kind, name] if !kind.is_empty() && f.node_by_name(kind).is_none() => {
                            Some(InspectTarget::new(kind, None, name))
                        }
                        // `node/gpuN` (a GPU's event) or a bare node name: the node.
                        [node, ..] if f.node_by_name(node).is_some() => Some(InspectTarget::new("Node", None, node)),
                        _ => return Err("this event names no object y can show"),
                    }
                }
                (ViewKind::Events | ViewKind::Ops, _) => {
                    return Err("y shows an object: select a node, GPU, pod, quota, tenant, domain or event");
                }
                (_, Some(RowId::Node(n))) => node(n),
                (_, Some(RowId::Gpu(g) | RowId::Mig(g, _))) => f.gpu(g).and_then(|g| node(g.node)),
                (_, Some(RowId::Pod(p))) => {
                    f.pod(p).map(|p| InspectTarget::new("Pod", Some(f.str_of(p.namespace)), &p.name))
                }
                (_, Some(RowId::Quota(q))) => f.quota(crate::model::QuotaId(q)).map(|q| match q.source {
                    QuotaSource::ResourceQuota { namespace, name } => {
                        InspectTarget::new("ResourceQuota", Some(f.str_of(namespace)), f.str_of(name))
                    }
                    QuotaSource::ClusterQueue { queue, .. } => {
                        InspectTarget::new("ClusterQueue", None, f.str_of(queue))
                    }
                }),
                (_, Some(RowId::Tenant(t))) => f
                    .tenant(t)
                    .and_then(|t| t.namespaces.first())
                    .map(|ns| InspectTarget::new("Namespace", None, f.str_of(*ns))),
                (_, Some(r @ RowId::Domain(_))) => tables::domain_of(f, r)
                    .map(|(_, d)| InspectTarget::new("ComputeDomain", Some(&d.namespace), &d.name)),
                (_, Some(r @ RowId::Capi(_))) => capi::capi_of(f, r).map(|row| {
                    let ns = match row {
                        CapiRow::Object(o) => &o.namespace,
                        CapiRow::Machine(m) => &m.namespace,
                    };
                    InspectTarget::new(capi::kind(row), Some(ns), capi::name(row))
                }),
                (_, Some(r @ RowId::Host(_))) => crate::ui::views::hosts::host_of(f, r)
                    .map(|h| InspectTarget::new("BareMetalHost", Some(&h.namespace), &h.name)),
                (_, Some(r @ RowId::Workload(_))) => {
                    tables::workload_of(f, r).map(|(_, w)| InspectTarget::new("Workload", Some(&w.namespace), &w.name))
                }
                (_, Some(_)) => None,
            },
        };
        found.ok_or("the selected row is gone")
    }

    pub(super) fn describe_selected(&mut self) {
        match self.selected_object() {
            Ok(t) => {
                self.ask(t, "the simulated factory has no API server to read objects from; `y` shows them on a cluster")
            }
            Err(why) => self.ui.warn(why),
        }
    }

    /// Opens the pane on `target` and asks the runner for it (a new request number, so only
    /// its answer shows); without a runner (the demo) the answer is `demo`.
    fn ask(&mut self, target: InspectTarget, demo: &str) {
        self.ui.nav.inspect = Some(target.clone());
        self.ui.nav.inspect_scroll = 0;
        self.ui.nav.inspect_match = None;
        self.ui.nav.inspect_request += 1;
        let request = self.ui.nav.inspect_request;
        self.push(Screen::Inspect);
        match self.inspector.as_mut() {
            Some(ask) => ask(request, &target),
            None => {
                let answer = Inspected { request, target, at: self.fleet.now, result: Err(demo.into()) };
                self.apply(vec![Delta::Inspected(Box::new(answer))]);
            }
        }
    }

    /// The pane's lines, made once when the answer to the last request arrives.
    pub(super) fn prepare_pane(&mut self) {
        let current = self.ui.nav.pane.as_ref().is_some_and(|p| p.request == self.ui.nav.inspect_request);
        if current {
            return;
        }
        self.ui.nav.pane = crate::ui::views::inspect::answer(&self.fleet, &self.ui.nav).map(|i| Pane {
            request: i.request,
            failed: i.result.is_err(),
            lines: crate::ui::views::inspect::lines(i),
        });
    }

    /// Lines of the pane on screen now (for scrolling): the inspect pane's or the log's.
    pub(super) fn pane_len(&self) -> usize {
        if self.ui.screen() == Screen::Logs {
            return self.log_line_count();
        }
        crate::ui::views::inspect::pane(&self.ui.nav).map_or(1, |p| p.lines.len())
    }
}

impl App {
    /// `:kubectl ARGS`: reading verbs only (see `model::inspect::kubectl_args`), run by the
    /// runner with this cockpit's context; the output shows in the inspect pane.
    pub(super) fn run_kubectl(&mut self, line: &str) {
        if let Err(e) = crate::model::inspect::kubectl_args(line) {
            return self.ui.error(e);
        }
        self.ask(
            InspectTarget::kubectl(line.trim()),
            "the simulated factory has no cluster for kubectl; :kubectl runs on a cluster",
        );
    }
}

/// The most a copy sends: terminals cap OSC 52 (xterm at 100,000 bytes of base64 by
/// default), so a long pane is cut rather than dropped by the terminal.
const COPY_MAX: usize = 72_000;

impl App {
    /// `Y`: the selected row's name (a node, a GPU's uuid, a pod, a quota, tenant or domain,
    /// an event's message, an operation's target), or in a pane all its text.
    pub(super) fn copy_selected(&mut self) {
        let f = &self.fleet;
        let text: Option<String> = match self.ui.screen() {
            Screen::Inspect => crate::ui::views::inspect::answer(f, &self.ui.nav)
                .map(|i| crate::ui::views::inspect::lines(i).join("\n")),
            // The log's newest lines, as many as a copy takes.
            Screen::Logs => crate::ui::views::logs::buffer(f, &self.ui.nav).map(|b| {
                let mut size = 0;
                let newest: Vec<&str> = b
                    .lines
                    .iter()
                    .rev()
                    .take_while(|l| {
                        size += l.len() + 1;
                        size <= COPY_MAX
                    })
                    .map(String::as_str)
                    .collect();
                newest.into_iter().rev().collect::<Vec<_>>().join("\n")
            }),
            Screen::Node(n) => f.node(n).map(|n| f.str_of(n.name).to_string()),
            Screen::Gpu(g) => f.gpu(g).map(|g| f.str_of(g.uuid).to_string()),
            Screen::Clusters => self.ui.clusters.get(self.ui.clusters_sel).map(|c| c.name.clone()),
            Screen::Table(v) => match self.ui.selected_id(v) {
                None => None,
                Some(RowId::Node(n)) => f.node(n).map(|n| f.str_of(n.name).to_string()),
                Some(RowId::Gpu(g)) => f.gpu(g).map(|g| f.str_of(g.uuid).to_string()),
                Some(RowId::Mig(g, i)) => f
                    .gpu(g)
                    .and_then(|g| g.instances.get(i as usize))
                    .map(|m| f.str_of(m.uuid).to_string())
                    .filter(|u| !u.is_empty()),
                Some(RowId::Pod(p)) => f.pod(p).map(|p| p.name.to_string()),
                Some(RowId::Tenant(t)) => f.tenant(t).map(|t| f.str_of(t.name).to_string()),
                Some(RowId::Quota(q)) => f.quota(crate::model::QuotaId(q)).map(|q| match q.source {
                    QuotaSource::ResourceQuota { name, .. } => f.str_of(name).to_string(),
                    QuotaSource::ClusterQueue { queue, .. } => f.str_of(queue).to_string(),
                }),
                Some(RowId::Event(e)) => tables::event_at(f, e).map(|e| e.message.clone()),
                Some(RowId::Op(o)) => tables::op_at(f, o).map(|o| o.target.clone()),
                Some(r @ RowId::Domain(_)) => tables::domain_of(f, r).map(|(_, d)| d.name.clone()),
                Some(r @ RowId::Workload(_)) => tables::workload_of(f, r).map(|(_, w)| w.name.clone()),
                Some(r @ RowId::Capi(_)) => capi::capi_of(f, r).map(|row| capi::name(row).to_string()),
                Some(r @ RowId::Host(_)) => crate::ui::views::hosts::host_of(f, r).map(|h| h.name.clone()),
            },
        };
        let Some(mut text) = text.filter(|t| !t.is_empty()) else {
            return self.ui.warn("nothing to copy here");
        };
        let cut = if text.len() > COPY_MAX {
            let at = (0..=COPY_MAX).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
            text.truncate(at);
            format!(" (the first {} KB: terminals take no more)", COPY_MAX / 1000)
        } else {
            String::new()
        };
        let shown: String = text.chars().take(60).collect::<String>().replace('\n', " ");
        let more = if text.chars().count() > 60 { "…" } else { "" };
        self.ui
            .info(format!("copied {}{more}{cut} to the terminal's clipboard (OSC 52)", crate::text::printable(&shown)));
        self.ui.clipboard = Some(text);
    }
}

impl App {
    /// `E`: the selected object in the person's editor through `kubectl edit` (which saves
    /// it only if it changed, and refuses a stale version). It writes, so not with
    /// `--readonly`; the terminal driver runs it and takes the terminal back.
    pub(super) fn edit_selected(&mut self) {
        // In the `y` pane: the object it shows (not a `:kubectl` answer).
        let shown = self.ui.nav.inspect.clone().filter(|t| self.ui.screen() == Screen::Inspect && !t.is_kubectl());
        let target = match shown.map_or_else(|| self.selected_object(), Ok) {
            Ok(t) => t,
            Err(why) => return self.ui.warn(why),
        };
        if self.ui.session.readonly {
            return self.ui.warn("--readonly: kubectl edit writes the object, so E is off");
        }
        if self.ui.session.kubectl.is_empty() {
            return self.ui.warn("the simulated factory has no API server to edit objects on; E works on a cluster");
        }
        let mut cmd = self.ui.session.kubectl.clone();
        cmd.extend(["edit".to_string(), format!("{}/{}", target.kind.to_ascii_lowercase(), target.name)]);
        if let Some(ns) = &target.namespace {
            cmd.extend(["-n".to_string(), ns.clone()]);
        }
        self.ui.handoff = Some(cmd);
    }

    /// `x`: a shell in the selected pod. `kubectl exec` can change anything in the container,
    /// so not with `--readonly`; the terminal driver runs it and takes the terminal back.
    pub(super) fn shell_selected(&mut self) {
        // From the logs pane: its pod, in the container whose log is shown.
        let from_logs = self.ui.nav.logs.as_ref().filter(|_| self.ui.screen() == Screen::Logs);
        let container = from_logs
            .and_then(|_| crate::ui::views::logs::buffer(&self.fleet, &self.ui.nav))
            .map(|b| b.container.clone())
            .filter(|c| !c.is_empty());
        let pod = match self.ui.screen() {
            Screen::Table(ViewKind::Pods) => self.ui.selected_id(ViewKind::Pods).and_then(RowId::pod),
            Screen::Logs => from_logs.and_then(|r| self.fleet.pod_by_name(&r.namespace, &r.pod)),
            _ => None,
        };
        let Some(p) = pod.and_then(|p| self.fleet.pod(p)) else {
            return self
                .ui
                .warn("x opens a shell in a pod: select one in the pods view (5), or press it in a pod's log (L)");
        };
        if self.ui.session.readonly {
            return self.ui.warn("--readonly: a shell can change anything in the container, so x is off");
        }
        if self.ui.session.kubectl.is_empty() {
            return self.ui.warn("the simulated factory has no containers to open a shell in; x works on a cluster");
        }
        if p.phase != crate::model::Phase::Running {
            let phase = format!("{:?}", p.phase);
            return self.ui.warn(format!("{} is {phase}: a shell needs a running container", p.name));
        }
        let mut cmd = self.ui.session.kubectl.clone();
        cmd.extend(["exec", "-it", "-n", self.fleet.str_of(p.namespace), &p.name].map(String::from));
        if let Some(c) = container {
            cmd.extend(["-c".to_string(), c]);
        }
        cmd.push("--".to_string());
        // bash where the image has it, else sh.
        cmd.extend(["sh", "-c", "command -v bash >/dev/null 2>&1 && exec bash || exec sh"].map(String::from));
        self.ui.handoff = Some(cmd);
    }
}

impl App {
    /// The pane's lines that hold the text found by `/` (case-insensitive).
    pub(super) fn pane_matches(&self) -> Vec<usize> {
        let find = self.ui.nav.inspect_find.to_ascii_lowercase();
        if find.is_empty() {
            return Vec::new();
        }
        let hit = |(n, l): (usize, &String)| l.to_ascii_lowercase().contains(&find).then_some(n);
        if self.ui.screen() == Screen::Logs {
            let b = crate::ui::views::logs::buffer(&self.fleet, &self.ui.nav);
            return b.map(|b| b.lines.iter().enumerate().filter_map(hit).collect()).unwrap_or_default();
        }
        let Some(p) = crate::ui::views::inspect::pane(&self.ui.nav) else { return Vec::new() };
        p.lines.iter().enumerate().filter_map(hit).collect()
    }

    /// `n` / `N`: the next (previous) matching line after (before) the current one, round
    /// the end; the pane scrolls it into view.
    pub(super) fn find_in_pane(&mut self, forward: bool) {
        if !matches!(self.ui.screen(), Screen::Inspect | Screen::Logs) {
            return self.ui.warn("n and N find in a pane (y, :kubectl, L) after a / search");
        }
        let hits = self.pane_matches();
        if hits.is_empty() {
            self.ui.nav.inspect_match = None;
            if !self.ui.nav.inspect_find.is_empty() {
                self.ui.warn(format!("{:?} is not in this pane", self.ui.nav.inspect_find));
            }
            return;
        }
        let at = self.ui.nav.inspect_match;
        let next = if forward {
            hits.iter().copied().find(|h| at.is_none_or(|a| *h > a)).unwrap_or(hits[0])
        } else {
            hits.iter().rev().copied().find(|h| at.is_none_or(|a| *h < a)).unwrap_or(hits[hits.len() - 1])
        };
        self.ui.nav.inspect_match = Some(next);
        let height = self.body().height.saturating_sub(2) as usize;
        let last = self.pane_len().saturating_sub(height);
        // A match above the newest line unsticks a following log, so it stays in view.
        self.ui.nav.logs_stick = false;
        let s = self.ui.nav.inspect_scroll;
        if next < s || next >= s + height {
            // A few lines of context above the match.
            self.ui.nav.inspect_scroll = next.saturating_sub(3).min(last);
        }
        let k = hits.iter().position(|h| *h == next).map_or(0, |p| p + 1);
        self.ui.info(format!("/{}: match {k} of {} (line {})", self.ui.nav.inspect_find, hits.len(), next + 1));
    }
}
