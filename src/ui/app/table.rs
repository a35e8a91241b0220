//! Browsing: keys through the keymap's normal mode to commands, and what each command does
//! to the screen stack, the selection, sorting and trees; the `?` overlay's own keys.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::App;
use crate::ops::ExecRequest;
use crate::ui::command::{Command, Mode, ViewKind};
use crate::ui::render::{self, table_height};
use crate::ui::state::{Input, InputKind, Screen};
use crate::ui::views::{detail, tables};

impl App {
    /// Browsing: the keymap's normal mode decides; an unbound letter says so.
    pub(super) fn key_table(&mut self, key: KeyEvent) {
        if let Some(c) = self.keymap.lookup(Mode::Normal, &key) {
            self.ui.message = None;
            self.dispatch(c);
        } else if let KeyCode::Char(ch) = key.code
            && !key.modifiers.contains(KeyModifiers::CONTROL)
        {
            self.ui.warn(format!("{ch:?} is not bound in the {} keymap; press ? for the keys", self.keymap.name));
        }
    }

    pub fn dispatch(&mut self, c: Command) {
        match c {
            Command::Quit => self.request_quit(),
            Command::Help => {
                self.ui.help = true;
                self.ui.help_scroll = 0;
            }
            Command::CommandLine => {
                self.ui.input = Some(Input { kind: InputKind::Command, text: String::new(), previous: String::new() })
            }
            Command::Filter if matches!(self.ui.screen(), Screen::Inspect | Screen::Logs) => {
                // A new search starts empty, as vim's; Esc puts the last one back.
                let prev = self.ui.nav.inspect_find.clone();
                self.ui.input = Some(Input { kind: InputKind::Filter, text: String::new(), previous: prev });
            }
            Command::FindNext => self.find_in_pane(true),
            Command::FindPrev => self.find_in_pane(false),
            Command::Filter if self.ui.screen() == Screen::Clusters => {
                let prev = self.ui.clusters_filter.clone();
                self.ui.input = Some(Input { kind: InputKind::Filter, text: prev.clone(), previous: prev });
            }
            Command::Filter => {
                if let Screen::Table(v) = self.ui.screen() {
                    let prev = self.ui.table(v).filter;
                    self.ui.input = Some(Input { kind: InputKind::Filter, text: prev.clone(), previous: prev });
                } else {
                    self.ui.warn("filters work in the table views; Esc goes back to one");
                }
            }
            Command::Back | Command::Cancel => {
                if let (Command::Cancel, Screen::Table(ViewKind::Ops)) = (c, self.ui.screen()) {
                    self.cancel_selected_op();
                    return;
                }
                if let Screen::Table(v) = self.ui.screen()
                    && !self.ui.table(v).filter.is_empty()
                {
                    self.ui.table_mut(v).filter.clear();
                    return;
                }
                if self.ui.screen() == Screen::Clusters && !self.ui.clusters_filter.is_empty() {
                    self.ui.clusters_filter.clear();
                    return;
                }
                if self.ui.nav.stack.len() > 1 {
                    self.ui.nav.stack.pop();
                } else if self.ui.screen() != Screen::Table(ViewKind::Fleet) {
                    self.open_view(ViewKind::Fleet);
                }
            }
            Command::Up => self.move_sel(-1),
            Command::Down => self.move_sel(1),
            Command::PageUp => self.move_sel(-self.page()),
            Command::PageDown => self.move_sel(self.page()),
            Command::Top => self.move_sel(isize::MIN),
            Command::Bottom => self.move_sel(isize::MAX),
            Command::Open => self.open_selected(),
            Command::Collapse | Command::Expand => self.tree_toggle(c == Command::Expand),
            Command::SortNext | Command::SortPrev | Command::SortReverse if self.ui.screen() == Screen::Clusters => {
                use crate::ui::views::clusters::{HEADERS, Sort};
                let now = self.ui.clusters_sort;
                let sort = match c {
                    Command::SortNext => Sort::step(now, 1),
                    Command::SortPrev => Sort::step(now, -1),
                    _ => Sort {
                        descending: !now.is_some_and(|s| s.descending),
                        ..now.unwrap_or(Sort { col: 0, descending: false })
                    },
                };
                self.ui.clusters_sort = Some(sort);
                let dir = if sort.descending { "descending" } else { "ascending" };
                self.ui.info(format!("clusters sorted by {} {dir}", HEADERS[sort.col]));
            }
            Command::SortNext | Command::SortPrev | Command::SortReverse => {
                if let Screen::Table(v) = self.ui.screen() {
                    let cols = tables::columns(v);
                    let (n, i) = (cols.len(), tables::sort_index(v, self.ui.table(v).sort_col));
                    let t = self.ui.table_mut(v);
                    match c {
                        Command::SortNext => t.sort_col = Some(cols[(i + 1) % n].name),
                        Command::SortPrev => t.sort_col = Some(cols[(i + n - 1) % n].name),
                        _ => t.descending = !t.descending,
                    }
                    let (col, desc) = (tables::sort_index(v, t.sort_col), t.descending);
                    self.ui.info(format!(
                        "sorted by {} {}",
                        cols[col].name,
                        if desc { "descending" } else { "ascending" }
                    ));
                }
            }
            Command::ToggleWide => {
                self.ui.wide = !self.ui.wide;
                self.ui.info(if self.ui.wide { "wide: every column" } else { "columns that fit the terminal" });
            }
            Command::NextView | Command::PrevView => {
                let cur = match self.ui.screen() {
                    Screen::Table(v) => v,
                    _ => ViewKind::Fleet,
                };
                let i = ViewKind::ALL.iter().position(|v| *v == cur).unwrap_or(0);
                let n = ViewKind::ALL.len();
                let j = if c == Command::NextView { (i + 1) % n } else { (i + n - 1) % n };
                self.open_view(ViewKind::ALL[j]);
            }
            Command::ViewFleet => self.open_view(ViewKind::Fleet),
            Command::ViewGpus => self.open_view(ViewKind::Gpus),
            Command::ViewTenants => self.open_view(ViewKind::Tenants),
            Command::ViewQuotas => self.open_view(ViewKind::Quotas),
            Command::ViewPods => self.open_view(ViewKind::Pods),
            Command::ViewEvents => self.open_view(ViewKind::Events),
            Command::ViewOps => self.open_view(ViewKind::Ops),
            Command::ViewDomains => self.open_view(ViewKind::Domains),
            Command::ViewWorkloads => self.open_view(ViewKind::Workloads),
            Command::ViewCapi => self.open_view(ViewKind::Capi),
            Command::ViewHosts => self.open_view(ViewKind::Hosts),
            Command::ViewClusters => self.open_clusters(),
            Command::Cordon | Command::Uncordon | Command::Drain | Command::Reslice | Command::EditQuota => {
                self.start_op(c)
            }
            Command::TaintGpu => self.start_taint(""),
            Command::UntaintGpu => self.start_op(c),
            Command::Reclaim => self.start_reclaim(""),
            Command::HostPower => self.start_host(""),
            Command::HoldQueue | Command::ResumeQueue => self.start_queue_stop(c, ""),
            Command::SuspendWorkload | Command::ResumeWorkload => self.start_workload_active(c, ""),
            Command::QuitNow => self.request_exit(None, true),
            Command::Context => self.switch_context(""),
            // Dialog commands, and those that need a name from the `:` line.
            Command::Describe => self.describe_selected(),
            Command::Copy => self.copy_selected(),
            Command::Shell => self.shell_selected(),
            Command::Edit => self.edit_selected(),
            Command::Logs => self.logs_selected(),
            Command::LogFollow
            | Command::LogPrevious
            | Command::LogContainer
            | Command::LogWrap
            | Command::LogTimestamps => self.log_key(c),
            Command::Confirm | Command::ToggleForce | Command::OpenNode | Command::OpenGpu | Command::Kubectl => {}
        }
    }

    fn move_sel(&mut self, delta: isize) {
        match self.ui.screen() {
            Screen::Table(v) => {
                let n = self.ui.rows(v).len();
                let t = self.ui.table_mut(v);
                t.selected = if delta == isize::MIN {
                    0
                } else if delta == isize::MAX {
                    n.saturating_sub(1)
                } else {
                    (t.selected as isize + delta).clamp(0, n.saturating_sub(1) as isize) as usize
                };
            }
            Screen::Node(node) => {
                let n = detail::tree_rows(&self.fleet, node, &self.ui.nav.node_closed).len();
                self.ui.nav.node_sel = match delta {
                    isize::MIN => 0,
                    isize::MAX => n.saturating_sub(1),
                    d => (self.ui.nav.node_sel as isize + d).clamp(0, n.saturating_sub(1) as isize) as usize,
                };
            }
            Screen::Inspect | Screen::Logs => {
                // The first line shown: at most where the last line meets the bottom.
                let last = self.pane_len().saturating_sub(self.body().height.saturating_sub(2) as usize);
                let logs = self.ui.screen() == Screen::Logs;
                let nav = &mut self.ui.nav;
                // A following log scrolled from its stuck bottom starts from there.
                if nav.logs_stick && logs {
                    nav.inspect_scroll = last;
                }
                let s = &mut nav.inspect_scroll;
                *s = match delta {
                    isize::MIN => 0,
                    isize::MAX => last,
                    d => (*s as isize + d).clamp(0, last as isize) as usize,
                };
                // At the bottom the log sticks to its newest line again (G, or scrolling down).
                nav.logs_stick = *s >= last;
            }
            Screen::Clusters => {
                // Through the rows the filter keeps; the selection is a cluster's index.
                let shown = crate::ui::views::clusters::shown(
                    &self.ui.clusters,
                    &self.ui.clusters_filter,
                    self.ui.clusters_sort,
                );
                let n = shown.len();
                let at = shown.iter().position(|i| *i == self.ui.clusters_sel).unwrap_or(0);
                let to = match delta {
                    isize::MIN => 0,
                    isize::MAX => n.saturating_sub(1),
                    d => (at as isize + d).clamp(0, n.saturating_sub(1) as isize) as usize,
                };
                if let Some(i) = shown.get(to) {
                    self.ui.clusters_sel = *i;
                }
            }
            Screen::Gpu(g) => {
                let n = self.fleet.gpu(g).map(|g| g.instances.len()).unwrap_or(0);
                self.ui.nav.gpu_row = match delta {
                    isize::MIN => 0,
                    isize::MAX => n.saturating_sub(1),
                    d => (self.ui.nav.gpu_row as isize + d).clamp(0, n.saturating_sub(1) as isize) as usize,
                };
            }
        }
    }

    fn page(&self) -> isize {
        let v = match self.ui.screen() {
            Screen::Table(v) => v,
            _ => ViewKind::Fleet,
        };
        table_height(render::table_area(v, self.body()).0).max(1) as isize
    }

    pub(super) fn tree_toggle(&mut self, expand: bool) {
        let Screen::Node(n) = self.ui.screen() else {
            if !expand {
                self.dispatch(Command::Back);
            }
            return;
        };
        let rows = detail::tree_rows(&self.fleet, n, &self.ui.nav.node_closed);
        let Some(row) = rows.get(self.ui.nav.node_sel) else { return };
        let key = row.path.last().cloned().unwrap_or_default();
        if expand {
            self.ui.nav.node_closed.remove(&key);
        } else if !self.ui.nav.node_closed.contains(&key)
            && rows.get(self.ui.nav.node_sel + 1).is_some_and(|r| r.depth > row.depth)
        {
            self.ui.nav.node_closed.insert(key);
        } else if row.depth > 0 {
            // Already closed or a leaf: go to the parent, as file trees do.
            let parent = &row.path[..row.path.len() - 1];
            if let Some(p) = rows.iter().position(|r| r.path == parent) {
                self.ui.nav.node_sel = p;
            }
        }
    }

    pub(super) fn open_selected(&mut self) {
        match self.ui.screen() {
            Screen::Clusters => self.open_cluster(self.ui.clusters_sel),
            Screen::Table(v) => {
                let Some(id) = self.ui.selected_id(v) else { return };
                match v {
                    ViewKind::Fleet => {
                        if let Some(n) = id.node() {
                            self.push(Screen::Node(n))
                        }
                    }
                    ViewKind::Gpus => {
                        if let Some(g) = id.gpu() {
                            self.push(Screen::Gpu(g))
                        }
                    }
                    ViewKind::Tenants => {
                        if let Some(t) = id.tenant().and_then(|t| self.fleet.tenant(t)) {
                            let name = self.fleet.str_of(t.name).to_string();
                            self.open_view(ViewKind::Pods);
                            let t = self.ui.table_mut(ViewKind::Pods);
                            t.filter = name.clone();
                            t.selected = 0;
                            // Why its pending pods wait, rolled up (each pod's WAITING says more).
                            let by = id.tenant().map(|t| self.fleet.tenant_waiting(t)).unwrap_or_default();
                            let pending = match by.iter().map(|(_, n)| n).sum::<u32>() {
                                0 => String::new(),
                                n => {
                                    let why: Vec<String> = by.iter().map(|(w, k)| format!("{k} {w}")).collect();
                                    format!(" — {n} pending: {}", why.join(", "))
                                }
                            };
                            // Pods a quota refused never exist: their controllers say so.
                            let refused = id.tenant().map(|t| self.fleet.tenant_quota_refusals(t)).unwrap_or_default();
                            let refused = match refused.as_slice() {
                                [] => String::new(),
                                [(o, q)] => format!("; {o}: {}", q.text),
                                more => {
                                    let mut quotas: Vec<&str> = more.iter().map(|(_, q)| q.quota.as_str()).collect();
                                    quotas.sort_unstable();
                                    quotas.dedup();
                                    format!("; {} controllers refused by quota {}", more.len(), quotas.join(", "))
                                }
                            };
                            // Kueue's suspended Jobs have no pods yet: what it holds back, and why.
                            let queued = id.tenant().map(|t| self.fleet.tenant_queued(t)).unwrap_or_default();
                            let queued = match crate::model::queued_text(&queued) {
                                s if s.is_empty() => s,
                                s => format!("; Kueue holds {s}"),
                            };
                            let isolation = id.tenant().map(|t| self.isolation_text(t)).unwrap_or_default();
                            self.ui.info(format!(
                                "pods of tenant {name}{pending}{refused}{queued}{isolation}; Esc clears the filter"
                            ));
                        }
                    }
                    ViewKind::Pods => {
                        if let Some(n) = id.pod().and_then(|p| self.fleet.pod(p)).and_then(|p| p.node) {
                            self.push(Screen::Node(n));
                        } else {
                            let why = id.pod().and_then(|p| self.fleet.pod(p)).and_then(|p| self.fleet.waiting(p));
                            match why {
                                Some(w) => self.ui.warn(format!("not scheduled on a node yet: {}", w.text())),
                                None => self.ui.warn("this pod is not scheduled on a node yet"),
                            }
                        }
                    }
                    ViewKind::Quotas => self.start_op(Command::EditQuota),
                    ViewKind::Events => {
                        if let Some(e) = id.event().and_then(|e| tables::event_at(&self.fleet, e)) {
                            let obj = e.object.split('/').next().unwrap_or("").to_string();
                            match self.fleet.node_by_name(&obj) {
                                Some(n) => self.push(Screen::Node(n)),
                                None => self.ui.info(e.message.clone()),
                            }
                        }
                    }
                    ViewKind::Domains => self.open_domain_node(id),
                    ViewKind::Workloads => self.open_workload(id),
                    ViewKind::Capi => self.open_capi(id),
                    ViewKind::Hosts => self.open_host(id),
                    ViewKind::Ops => {
                        if let Some(o) = id.op().and_then(|o| tables::op_at(&self.fleet, o)) {
                            let tail: Vec<&str> = o.log.iter().rev().take(3).map(String::as_str).collect();
                            self.ui.info(format!(
                                "#{}: {}",
                                o.id,
                                tail.into_iter().rev().collect::<Vec<_>>().join(" → ")
                            ));
                        }
                    }
                }
            }
            Screen::Node(n) => {
                let rows = detail::tree_rows(&self.fleet, n, &self.ui.nav.node_closed);
                if let Some(r) = rows.get(self.ui.nav.node_sel) {
                    match (r.gpu, r.depth) {
                        (Some(g), _) => self.push(Screen::Gpu(g)),
                        (None, _) => self.tree_toggle(true),
                    }
                }
            }
            Screen::Gpu(_) | Screen::Inspect | Screen::Logs => {}
        }
    }

    /// Enter on a domain: the node that holds it back (its first node not Ready), else its
    /// first node.
    fn open_domain_node(&mut self, id: crate::ui::views::RowId) {
        let Some((key, d)) = tables::domain_of(&self.fleet, id) else { return };
        let node = d.nodes.iter().find(|n| n.status != "Ready").or(d.nodes.first());
        match node.and_then(|n| self.fleet.node_by_name(&n.name)) {
            Some(n) => self.push(Screen::Node(n)),
            None => {
                let msg = match node {
                    Some(n) => format!("ComputeDomain {key}: node {} is not known here", n.name),
                    None => format!("ComputeDomain {key} lists no nodes yet"),
                };
                self.ui.info(msg);
            }
        }
    }

    /// Enter on a Cluster API row: a Machine's node, else what the row says of itself.
    fn open_capi(&mut self, id: crate::ui::views::RowId) {
        use crate::ui::views::capi;
        let Some(row) = capi::capi_of(&self.fleet, id) else { return };
        let node = match row {
            crate::model::CapiRow::Machine(m) => m.node.clone(),
            crate::model::CapiRow::Object(_) => None,
        };
        if let Some(n) = node.as_deref().and_then(|n| self.fleet.node_by_name(n)) {
            return self.push(Screen::Node(n));
        }
        let f = &self.fleet;
        let cell = |c| tables::cell(f, ViewKind::Capi, id, c).0;
        let mut msg = format!("{} {}: {}", capi::kind(row), capi::name(row), cell("STATE"));
        let why = cell("WHY");
        if why != "-" && !why.is_empty() {
            msg.push_str(&format!(" — {why}"));
        }
        if let Some(n) = node {
            msg.push_str(&format!(" (node {n} is not a node of this cockpit)"));
        }
        self.ui.info(msg);
    }

    /// Enter on a host: the node it serves; a host under no node says its state, power and
    /// error.
    fn open_host(&mut self, id: crate::ui::views::RowId) {
        use crate::ui::views::hosts;
        let Some(h) = hosts::host_of(&self.fleet, id) else { return };
        let nodes = self.fleet.nodes_of_host(h);
        if let Some(n) = nodes.first().and_then(|n| self.fleet.node_by_name(n)) {
            return self.push(Screen::Node(n));
        }
        let mut msg = format!("BareMetalHost {}: {}", h.key(), h.state_text());
        match nodes.first() {
            Some(n) => msg.push_str(&format!(" (node {n} is not a node of this cockpit)")),
            None => msg.push_str(" — no node runs on it"),
        }
        self.ui.info(msg);
    }

    /// Enter on a Workload: its Job's pods (the pods view filtered by the Job's name) when it
    /// has any, with its story; else its story alone.
    fn open_workload(&mut self, id: crate::ui::views::RowId) {
        let Some((key, w)) = tables::workload_of(&self.fleet, id) else { return };
        let story = crate::ui::views::workloads::timeline_text(&self.fleet, w);
        let why = crate::ui::views::workloads::why(&self.fleet, w);
        let why = if why.is_empty() { String::new() } else { format!(" — {why}") };
        let msg = format!("{key} ({}): {story}{why}", w.state().as_str());
        let job = w.owner.strip_prefix("Job/").map(str::to_string);
        match job.filter(|_| !self.fleet.workload_pods(w).is_empty()) {
            Some(job) => {
                self.open_view(ViewKind::Pods);
                let t = self.ui.table_mut(ViewKind::Pods);
                t.filter = job;
                t.selected = 0;
                self.ui.info(format!("{msg}; Esc clears the filter"));
            }
            None => self.ui.info(msg),
        }
    }

    fn cancel_selected_op(&mut self) {
        let Some(id) = self.ui.selected_id(ViewKind::Ops) else { return };
        let Some(o) = id.op().and_then(|o| tables::op_at(&self.fleet, o)) else { return };
        if o.state.finished() {
            self.ui.warn(format!("operation #{} has already finished", o.id));
            return;
        }
        let op = o.id;
        self.exec.send(ExecRequest::Cancel { id: op });
        self.ui.info(format!("cancelling operation #{op}; what was done stays done"));
    }

    pub(super) fn key_help(&mut self, key: KeyEvent) {
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('?') | KeyCode::Enter => self.ui.help = false,
            KeyCode::Down | KeyCode::Char('j') => self.ui.help_scroll = self.ui.help_scroll.saturating_add(1),
            KeyCode::Up | KeyCode::Char('k') => self.ui.help_scroll = self.ui.help_scroll.saturating_sub(1),
            KeyCode::PageDown => self.ui.help_scroll = self.ui.help_scroll.saturating_add(10),
            KeyCode::PageUp => self.ui.help_scroll = self.ui.help_scroll.saturating_sub(10),
            _ => {}
        }
    }
}

impl App {
    /// `; isolation: no default-deny in a, b; shares 2 GPUs with x` — nothing when the
    /// tenant is covered and alone on its GPUs.
    fn isolation_text(&self, tid: crate::model::TenantId) -> String {
        let f = &self.fleet;
        let mut parts = Vec::new();
        if let Some(i) = f.tenant_isolation(tid).filter(|_| f.netpol_known())
            && !i.open.is_empty()
        {
            parts.push(format!("no default-deny NetworkPolicy in {}", i.open.join(", ")));
        }
        // Privileged pods can reach the node (and its GPUs) around any policy.
        match f.tenant_pod_security(tid) {
            Some(p) if !p.unset.is_empty() => parts.push(format!("no Pod Security label in {}", p.unset.join(", "))),
            Some(p) if p.weakest == Some("privileged") => parts.push("Pod Security enforces only privileged".into()),
            _ => {}
        }
        let (nodes, gpus) = f.tenant_neighbours(tid);
        let with = |v: Vec<&Vec<crate::model::TenantId>>| {
            let mut ts: Vec<&str> =
                v.into_iter().flatten().filter_map(|t| f.tenant(*t)).map(|t| f.str_of(t.name)).collect();
            ts.sort_unstable();
            ts.dedup();
            ts.join(", ")
        };
        if !gpus.is_empty() {
            let n = gpus.len();
            parts.push(format!(
                "shares {n} GPU{} with {}",
                if n == 1 { "" } else { "s" },
                with(gpus.iter().map(|(_, t)| t).collect())
            ));
        } else if !nodes.is_empty() {
            let n = nodes.len();
            parts.push(format!(
                "shares {n} node{} with {}",
                if n == 1 { "" } else { "s" },
                with(nodes.iter().map(|(_, t)| t).collect())
            ));
        }
        if parts.is_empty() { String::new() } else { format!("; isolation: {}", parts.join("; ")) }
    }
}
