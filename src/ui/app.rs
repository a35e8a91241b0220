//! `App`: the one owner of state. Deltas and input come in; `update` changes `Fleet` and
//! `Ui`; render reads them. Operations leave as `ExecRequest`s to the executor.

use std::collections::BTreeSet;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Rect;

use super::command::{Command, Mode, ViewKind};
use super::keymap::Keymap;
use super::render::{self, areas, table_height};
use super::state::{Dialog, EditKind, Input, InputKind, RowCache, Screen, Ui};
use super::theme::Theme;
use super::views::{RowId, detail, tables};
use crate::mig;
use crate::model::{Delta, Fleet, GpuId, NodeId};
use crate::ops::{self, OpRequest, Plan, PlanDetail, QuotaKey};

pub use crate::ops::ExecRequest;

pub trait Executor: Send {
    fn send(&mut self, req: ExecRequest);
}

impl Executor for std::sync::mpsc::Sender<ExecRequest> {
    fn send(&mut self, req: ExecRequest) {
        // A stopped executor (the feed ended) shows as an operation that never starts.
        let _ = std::sync::mpsc::Sender::send(self, req);
    }
}

/// Collects requests; for tests and for the headless paths.
#[derive(Default)]
pub struct Recorder(pub std::sync::Arc<std::sync::Mutex<Vec<ExecRequest>>>);

impl Executor for Recorder {
    fn send(&mut self, req: ExecRequest) {
        if let Ok(mut v) = self.0.lock() {
            v.push(req);
        }
    }
}

/// Told the names of the nodes on screen (the agent streams follow them).
type ViewNodes = Box<dyn FnMut(&BTreeSet<String>) + Send>;

pub struct App {
    pub fleet: Fleet,
    pub ui: Ui,
    pub theme: Theme,
    pub keymap: Keymap,
    exec: Box<dyn Executor>,
    /// Told the names of the nodes on screen whenever they change (agent streams follow).
    view_nodes: Option<ViewNodes>,
    last_view_nodes: BTreeSet<String>,
}

impl App {
    pub fn new(fleet: Fleet, ui: Ui, theme: Theme, keymap: Keymap, exec: Box<dyn Executor>) -> Self {
        let mut app = Self { fleet, ui, theme, keymap, exec, view_nodes: None, last_view_nodes: BTreeSet::new() };
        app.prepare();
        app
    }

    /// Calls `tell` with the nodes on screen now and whenever they change.
    pub fn on_view_nodes(&mut self, tell: impl FnMut(&BTreeSet<String>) + Send + 'static) {
        self.view_nodes = Some(Box::new(tell));
        self.last_view_nodes = BTreeSet::new();
        self.prepare();
    }

    /// Applies a batch of deltas; returns whether a redraw is needed.
    pub fn apply(&mut self, deltas: impl IntoIterator<Item = Delta>) -> bool {
        let mut dirty = false;
        let mut progress = false;
        for d in deltas {
            progress |= matches!(d, Delta::Op(_));
            dirty |= self.fleet.apply(d);
        }
        // Live progress replaces a passing note ("started: …") in the status line.
        if progress && matches!(self.ui.message, Some((crate::model::Severity::Info, _))) {
            self.ui.message = None;
        }
        if dirty {
            self.prepare();
        }
        dirty
    }

    pub fn resize(&mut self, w: u16, h: u16) {
        self.ui.size = (w, h);
        self.prepare();
    }

    fn body(&self) -> Rect {
        areas(Rect::new(0, 0, self.ui.size.0, self.ui.size.1)).body
    }

    /// Rebuilds the current view's rows if their inputs changed, keeps the selection on the
    /// same object and inside the window, and tells the agent streams which nodes are seen.
    pub fn prepare(&mut self) {
        self.prepare_rows();
        if self.view_nodes.is_some() {
            let seen = self.nodes_in_view();
            if seen != self.last_view_nodes {
                if let Some(tell) = self.view_nodes.as_mut() {
                    tell(&seen);
                }
                self.last_view_nodes = seen;
            }
        }
    }

    /// Names of the nodes whose rows (or detail) are on screen now.
    pub fn nodes_in_view(&self) -> BTreeSet<String> {
        let name = |n: NodeId| self.fleet.node(n).map(|n| self.fleet.s(n.name).to_string());
        let gpu_node = |g: GpuId| self.fleet.gpu(g).map(|g| g.node);
        let ids: Vec<NodeId> = match self.ui.screen() {
            Screen::Node(n) => vec![n],
            Screen::Gpu(g) => gpu_node(g).into_iter().collect(),
            Screen::Table(v) => {
                let t = self.ui.table(v);
                let h = table_height(render::table_area(v, self.body()).0).max(1);
                let rows = self.ui.rows(v);
                let window = rows.iter().skip(t.offset).take(h).copied();
                match v {
                    ViewKind::Fleet => window.filter_map(RowId::node).collect(),
                    ViewKind::Gpus => window.filter_map(RowId::gpu).filter_map(gpu_node).collect(),
                    ViewKind::Pods => {
                        window.filter_map(RowId::pod).filter_map(|p| self.fleet.pod(p).and_then(|p| p.node)).collect()
                    }
                    _ => Vec::new(),
                }
            }
        };
        ids.into_iter().filter_map(name).collect()
    }

    fn prepare_rows(&mut self) {
        let Screen::Table(v) = self.ui.screen() else {
            self.clamp_detail();
            return;
        };
        let t = self.ui.table(v);
        let data_gen = match v {
            ViewKind::Events => self.fleet.events_gen,
            ViewKind::Ops => self.fleet.structure_gen ^ (self.fleet.ops.len() as u64) << 40 ^ self.fleet.events_gen,
            _ => self.fleet.structure_gen,
        };
        let tele = if tables::sort_is_live(v, t.sort_col) { self.fleet.telemetry_gen } else { 0 };
        let key = (data_gen, tele, t.filter.clone(), t.sort_col, t.descending);
        let stale = match self.ui.caches.get(&v) {
            None => true,
            Some(c) if c.key == key => false,
            Some(c) => {
                // What the person changed applies at once; data changes to a view that is
                // expensive to rebuild (hundreds of thousands of rows) wait a little, so
                // the cockpit stays responsive while the fleet churns.
                let person = (&c.key.2, c.key.3, c.key.4) != (&key.2, key.3, key.4);
                let throttled =
                    c.cost > std::time::Duration::from_millis(20) && c.built.is_some_and(|b| b.elapsed() < c.cost * 10);
                person || !throttled
            }
        };
        if stale {
            let started = std::time::Instant::now();
            let old_id = self.ui.selected_id(v);
            let ids = tables::rows(&self.fleet, v, &t.filter, t.sort_col, t.descending);
            let sel = old_id.and_then(|id| ids.iter().position(|x| *x == id));
            let total = tables::ids(&self.fleet, v).len();
            let cost = started.elapsed();
            self.ui.caches.insert(v, RowCache { key, ids, total, built: Some(started), cost });
            if let Some(s) = sel {
                self.ui.table_mut(v).selected = s;
            }
        }
        let n = self.ui.rows(v).len();
        let h = table_height(render::table_area(v, self.body()).0).max(1);
        let t = self.ui.table_mut(v);
        t.selected = t.selected.min(n.saturating_sub(1));
        if t.selected < t.offset {
            t.offset = t.selected;
        }
        if t.selected >= t.offset + h {
            t.offset = t.selected + 1 - h;
        }
        t.offset = t.offset.min(n.saturating_sub(h.min(n)));
    }

    fn clamp_detail(&mut self) {
        match self.ui.screen() {
            Screen::Node(n) => {
                let len = detail::tree_rows(&self.fleet, n, &self.ui.node_closed).len();
                self.ui.node_sel = self.ui.node_sel.min(len.saturating_sub(1));
            }
            Screen::Gpu(g) => {
                let len = self.fleet.gpu(g).map(|g| g.instances.len()).unwrap_or(0);
                self.ui.gpu_row = self.ui.gpu_row.min(len.saturating_sub(1));
            }
            Screen::Table(_) => {}
        }
    }

    pub fn draw(&self, frame: &mut ratatui::Frame) {
        render::render(&self.fleet, &self.ui, &self.theme, &self.keymap, frame);
    }

    // ---------- input ----------

    pub fn handle_key(&mut self, key: KeyEvent) {
        if key.kind == KeyEventKind::Release {
            return;
        }
        // ctrl-c leaves from anywhere, as terminal users expect (nothing pending is applied),
        // through the same guard as every other way out.
        if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
            self.request_exit(None, false);
            return;
        }
        if self.ui.input.is_some() {
            self.key_input(key);
        } else if self.ui.help {
            self.key_help(key);
        } else if matches!(self.ui.dialog, Some(Dialog::Edit { .. })) {
            self.key_edit(key);
        } else if self.ui.dialog.is_some() {
            if let Some(c) = self.keymap.lookup(Mode::Dialog, &key) {
                self.dialog_command(c);
            }
        } else if let Some(c) = self.keymap.lookup(Mode::Normal, &key) {
            self.ui.message = None;
            self.dispatch(c);
        } else if let KeyCode::Char(ch) = key.code
            && !key.modifiers.contains(KeyModifiers::CONTROL)
        {
            self.ui.warn(format!("{ch:?} is not bound in the {} keymap; press ? for the keys", self.keymap.name));
        }
        self.prepare();
    }

    pub fn handle_mouse(&mut self, m: MouseEvent) {
        let a = areas(Rect::new(0, 0, self.ui.size.0, self.ui.size.1));
        match m.kind {
            MouseEventKind::ScrollDown => self.dispatch(Command::Down),
            MouseEventKind::ScrollUp => self.dispatch(Command::Up),
            MouseEventKind::Down(MouseButton::Left) => {
                if self.ui.dialog.is_some() || self.ui.help {
                    return;
                }
                if m.row == a.tabs.y {
                    // Tabs are "N Title│": find which one the column falls in.
                    let mut x = a.tabs.x + 1;
                    for v in ViewKind::ALL {
                        let w = format!("{} {}", 1, v.title()).len() as u16 + 2;
                        if m.column >= x.saturating_sub(1) && m.column < x + w {
                            self.open_view(v);
                            break;
                        }
                        x += w + 1;
                    }
                } else if let Screen::Table(v) = self.ui.screen() {
                    let (table, _) = render::table_area(v, a.body);
                    let first = table.y + 2;
                    if m.row >= first && m.row < table.y + table.height.saturating_sub(1) {
                        let t = self.ui.table(v);
                        let idx = t.offset + (m.row - first) as usize;
                        if idx < self.ui.rows(v).len() {
                            if idx == t.selected {
                                self.dispatch(Command::Open);
                            } else {
                                self.ui.table_mut(v).selected = idx;
                            }
                        }
                    }
                } else if let Screen::Node(_) = self.ui.screen() {
                    let first = a.body.y + 1;
                    if m.row >= first {
                        self.ui.node_sel = (m.row - first) as usize;
                    }
                }
            }
            _ => {}
        }
        self.prepare();
    }

    fn key_help(&mut self, key: KeyEvent) {
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('?') | KeyCode::Enter => self.ui.help = false,
            KeyCode::Down | KeyCode::Char('j') => self.ui.help_scroll = self.ui.help_scroll.saturating_add(1),
            KeyCode::Up | KeyCode::Char('k') => self.ui.help_scroll = self.ui.help_scroll.saturating_sub(1),
            KeyCode::PageDown => self.ui.help_scroll = self.ui.help_scroll.saturating_add(10),
            KeyCode::PageUp => self.ui.help_scroll = self.ui.help_scroll.saturating_sub(10),
            _ => {}
        }
    }

    fn key_input(&mut self, key: KeyEvent) {
        let Some(input) = self.ui.input.as_mut() else { return };
        match key.code {
            KeyCode::Esc => {
                let input = self.ui.input.take();
                if let (Some(i), Screen::Table(v)) = (input, self.ui.screen())
                    && i.kind == InputKind::Filter
                {
                    self.ui.table_mut(v).filter = i.previous;
                }
            }
            KeyCode::Enter => {
                let Some(i) = self.ui.input.take() else { return };
                match i.kind {
                    InputKind::Command => self.run_command_line(&i.text),
                    InputKind::Filter => {
                        if let Screen::Table(v) = self.ui.screen() {
                            let n = self.ui.rows(v).len();
                            self.ui.info(format!("filter /{} — {n} rows; Esc clears it", i.text));
                        }
                    }
                }
            }
            KeyCode::Backspace => {
                input.text.pop();
                self.live_filter();
            }
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                if input.text.chars().count() < 200 {
                    input.text.push(c);
                }
                self.live_filter();
            }
            _ => {}
        }
    }

    fn live_filter(&mut self) {
        let Some(i) = &self.ui.input else { return };
        if i.kind != InputKind::Filter {
            return;
        }
        let text = i.text.clone();
        if let Screen::Table(v) = self.ui.screen() {
            let t = self.ui.table_mut(v);
            t.filter = text;
            t.selected = 0;
            t.offset = 0;
        }
    }

    fn key_edit(&mut self, key: KeyEvent) {
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
            Ok(plan) => self.open_preview(req, plan),
            Err(e) => {
                if let Some(Dialog::Edit { error, .. }) = self.ui.dialog.as_mut() {
                    *error = Some(e.to_string());
                }
            }
        }
    }

    fn dialog_command(&mut self, c: Command) {
        let denied = match self.ui.dialog.as_ref() {
            Some(Dialog::Preview { plan, .. }) => self.op_denied(plan.kind),
            _ => None,
        };
        let Some(Dialog::Preview { id, plan, scroll, error }) = self.ui.dialog.as_mut() else { return };
        let id = *id;
        match c {
            Command::Quit => self.request_quit(),
            Command::Cancel | Command::Back => {
                self.ui.dialog = None;
                self.ui.pending = None;
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
                if self.ui.readonly {
                    *error = Some("read-only mode (--readonly): nothing is sent to the cluster".into());
                    return;
                }
                if let Some(why) = denied {
                    *error = Some(format!("{why}; nothing was sent"));
                    return;
                }
                if !plan.can_execute() {
                    *error = Some("this plan is blocked; resolve the blockers above (or cancel)".into());
                    return;
                }
                let plan = plan.clone();
                self.ui.dialog = None;
                self.ui.pending = None;
                self.ui.my_ops.push(id);
                self.ui.info(format!("started: {} — progress below and in :ops", plan.title));
                self.exec.send(ExecRequest::Execute { id, plan });
            }
            _ => {}
        }
    }

    fn run_command_line(&mut self, text: &str) {
        let text = text.trim();
        let (cmd, arg) = match text.split_once(char::is_whitespace) {
            Some((c, a)) => (c, a.trim()),
            None => (text, ""),
        };
        match cmd {
            "" => {}
            "q" | "quit" | "exit" => self.request_exit(None, false),
            // vim's "quit anyway": running operations are recorded as interrupted.
            "q!" | "quit!" => self.request_exit(None, true),
            "help" | "h" | "?" => self.ui.help = true,
            "node" | "no" if !arg.is_empty() => match self.fleet.node_by_name(arg) {
                Some(n) => self.push(Screen::Node(n)),
                None => self.ui.error(format!("no node named {arg:?}; :fleet lists them")),
            },
            "gpu" if !arg.is_empty() => match self.find_gpu(arg) {
                Some(g) => self.push(Screen::Gpu(g)),
                None => self.ui.error(format!("no GPU {arg:?}: use NODE/INDEX (e.g. h100-0000/3) or a GPU uuid")),
            },
            "ctx" | "context" | "contexts" => self.switch_context(arg),
            _ => match ViewKind::from_alias(cmd) {
                Some(v) => {
                    self.open_view(v);
                    if !arg.is_empty() {
                        self.ui.table_mut(v).filter = arg.to_string();
                    }
                }
                None => self.ui.error(format!(
                    "unknown command {cmd:?}: try :fleet :gpus :tenants :quotas :pods :events :ops, :node NAME, :gpu NODE/INDEX, :help or :q"
                )),
            },
        }
    }

    fn find_gpu(&self, arg: &str) -> Option<GpuId> {
        if let Some(g) = self.fleet.gpu_by_uuid(arg) {
            return Some(g);
        }
        let (node, idx) = arg.rsplit_once('/')?;
        let idx: u8 = idx.trim_start_matches("gpu").parse().ok()?;
        let n = self.fleet.node(self.fleet.node_by_name(node)?)?;
        n.gpus.iter().copied().find(|g| self.fleet.gpu(*g).is_some_and(|g| g.index == idx))
    }

    fn push(&mut self, s: Screen) {
        if self.ui.screen() != s {
            self.ui.stack.push(s);
        }
        self.ui.node_sel = 0;
        self.ui.gpu_row = 0;
    }

    pub fn open_view(&mut self, v: ViewKind) {
        self.ui.stack = vec![Screen::Table(v)];
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
                let n = detail::tree_rows(&self.fleet, node, &self.ui.node_closed).len();
                self.ui.node_sel = match delta {
                    isize::MIN => 0,
                    isize::MAX => n.saturating_sub(1),
                    d => (self.ui.node_sel as isize + d).clamp(0, n.saturating_sub(1) as isize) as usize,
                };
            }
            Screen::Gpu(g) => {
                let n = self.fleet.gpu(g).map(|g| g.instances.len()).unwrap_or(0);
                self.ui.gpu_row = match delta {
                    isize::MIN => 0,
                    isize::MAX => n.saturating_sub(1),
                    d => (self.ui.gpu_row as isize + d).clamp(0, n.saturating_sub(1) as isize) as usize,
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

    fn request_quit(&mut self) {
        self.request_exit(None, false);
    }

    /// Every way out of the cockpit (`q`, `:q`, ctrl-c, `:ctx NAME`) comes here. With
    /// operations this cockpit started still running, the first request says what leaving
    /// does to them and the second leaves (`force`: at once, as `:q!`). Leaving records each
    /// running operation as interrupted at its step (on a cluster, in the audit log).
    fn request_exit(&mut self, switch: Option<String>, force: bool) {
        let running =
            self.ui.my_ops.iter().filter(|id| self.fleet.op(**id).is_some_and(|o| !o.state.finished())).count();
        if running == 0 || force || self.ui.quit_armed {
            self.ui.switch_context = switch;
            self.ui.quit = true;
            return;
        }
        self.ui.quit_armed = true;
        let (doing, again) = match &switch {
            Some(c) => (format!("switching to {c}"), format!(":ctx {c} again to switch")),
            None => ("quitting".to_string(), "quit again to quit, :q! quits at once".to_string()),
        };
        self.ui.warn(format!(
            "{} still running: {doing} stops it where it is (what was done stays; on a cluster `fabrik audit` shows where it was interrupted) — {again}",
            ops::count(running, "operation")
        ));
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
                if self.ui.stack.len() > 1 {
                    self.ui.stack.pop();
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
            Command::Cordon | Command::Uncordon | Command::Drain | Command::Reslice | Command::EditQuota => {
                self.start_op(c)
            }
            Command::Confirm | Command::ToggleForce => {}
        }
    }

    fn tree_toggle(&mut self, expand: bool) {
        let Screen::Node(n) = self.ui.screen() else {
            if !expand {
                self.dispatch(Command::Back);
            }
            return;
        };
        let rows = detail::tree_rows(&self.fleet, n, &self.ui.node_closed);
        let Some(row) = rows.get(self.ui.node_sel) else { return };
        let key = row.path.last().cloned().unwrap_or_default();
        if expand {
            self.ui.node_closed.remove(&key);
        } else if !self.ui.node_closed.contains(&key)
            && rows.get(self.ui.node_sel + 1).is_some_and(|r| r.depth > row.depth)
        {
            self.ui.node_closed.insert(key);
        } else if row.depth > 0 {
            // Already closed or a leaf: go to the parent, as file trees do.
            let parent = &row.path[..row.path.len() - 1];
            if let Some(p) = rows.iter().position(|r| r.path == parent) {
                self.ui.node_sel = p;
            }
        }
    }

    fn open_selected(&mut self) {
        match self.ui.screen() {
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
                            let name = self.fleet.s(t.name).to_string();
                            self.open_view(ViewKind::Pods);
                            let t = self.ui.table_mut(ViewKind::Pods);
                            t.filter = name.clone();
                            t.selected = 0;
                            self.ui.info(format!("pods of tenant {name}; Esc clears the filter"));
                        }
                    }
                    ViewKind::Pods => {
                        if let Some(n) = id.pod().and_then(|p| self.fleet.pod(p)).and_then(|p| p.node) {
                            self.push(Screen::Node(n));
                        } else {
                            self.ui.warn("this pod is not scheduled on a node yet");
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
                let rows = detail::tree_rows(&self.fleet, n, &self.ui.node_closed);
                if let Some(r) = rows.get(self.ui.node_sel) {
                    match (r.gpu, r.depth) {
                        (Some(g), _) => self.push(Screen::Gpu(g)),
                        (None, _) => self.tree_toggle(true),
                    }
                }
            }
            Screen::Gpu(_) => {}
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
                let rows = detail::tree_rows(&self.fleet, n, &self.ui.node_closed);
                (Some(n), rows.get(self.ui.node_sel).and_then(|r| r.gpu))
            }
            Screen::Gpu(g) => (self.fleet.gpu(g).map(|g| g.node), Some(g)),
            _ => (None, None),
        }
    }

    /// `:ctx` lists the kubeconfig's contexts; `:ctx NAME` asks the runner to reconnect.
    fn switch_context(&mut self, arg: &str) {
        if self.ui.contexts.is_empty() {
            self.ui.warn("this cockpit runs on the embedded demo; run `fabrik` (or --context NAME) for a cluster");
            return;
        }
        if arg.is_empty() {
            self.ui.info(format!("contexts: {} (:ctx NAME switches)", self.ui.contexts.join(", ")));
            return;
        }
        if !self.ui.contexts.iter().any(|c| c == arg) {
            self.ui.error(format!("no context {arg:?} in the kubeconfig; it has: {}", self.ui.contexts.join(", ")));
            return;
        }
        self.request_exit(Some(arg.to_string()), false);
    }

    fn start_op(&mut self, c: Command) {
        if self.ui.readonly {
            self.ui.error(format!("read-only mode (--readonly): {} is disabled", c.name().replace('_', " ")));
            return;
        }
        if let Some(why) = op_kind(c).and_then(|k| self.op_denied(k)) {
            self.ui.error(why);
            return;
        }
        if c == Command::EditQuota {
            self.start_quota_edit();
            return;
        }
        let (node, gpu) = self.target();
        let Some(node) = node.and_then(|n| self.fleet.node(n)) else {
            self.ui.warn(format!("select a node (or a GPU) first to {}", c.name().replace('_', " ")));
            return;
        };
        let name = self.fleet.s(node.name).to_string();
        if c == Command::Reslice {
            let Some(model) = node.gpu_model else {
                self.ui.error(format!("{name} has no MIG-capable GPU model recorded"));
                return;
            };
            let (gpus, current) = match gpu.and_then(|g| self.fleet.gpu(g)) {
                Some(g) => (vec![g.index], describe_gpu(&self.fleet, g)),
                None => (Vec::new(), self.fleet.s(node.mig_config).to_string()),
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

    fn preview(&mut self, req: OpRequest) {
        match ops::plan(&self.fleet, &req) {
            Ok(plan) => self.open_preview(req, plan),
            Err(e) => self.ui.error(e.to_string()),
        }
    }

    /// Shows a plan for confirmation. The operation gets its number now, so the audit
    /// log's `planned` record and what follows a confirmation share it.
    fn open_preview(&mut self, req: OpRequest, mut plan: Plan) {
        let id = self.ui.next_op;
        self.ui.next_op += 1;
        for note in self.fleet.access.iter().flat_map(|a| a.limited(plan.kind.name())) {
            plan.warnings.push(format!("{note}; checked for the namespaces this touches when you confirm"));
        }
        self.ui.pending = Some(req);
        self.exec.send(ExecRequest::Preview { id, plan: Box::new(plan.clone()) });
        self.ui.dialog = Some(Dialog::Preview { id, plan: Box::new(plan), scroll: 0, error: None });
    }

    /// Why the person may not run `kind` here, if they may not: read-only mode, or what
    /// the API server's access review said.
    fn op_denied(&self, kind: ops::OpKind) -> Option<String> {
        if self.ui.readonly {
            return Some(format!("read-only mode (--readonly): {} is disabled", kind.name()));
        }
        let why = self.fleet.access.as_ref()?.denied(kind.name())?;
        Some(format!("{} is disabled: {why}", kind.name()))
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
                        .find(|q| {
                            self.fleet
                                .quotas
                                .get(*q)
                                .and_then(Option::as_ref)
                                .is_some_and(|q| self.fleet.is_gpu_resource(q.resource))
                        })
                        .or(t.quotas.first().copied())
                }),
            _ => None,
        };
        let Some(q) = quota.and_then(|q| self.fleet.quotas.get(q)).and_then(Option::as_ref) else {
            self.ui.warn("select a quota (in :quotas) or a tenant with a quota (in :tenants) to edit it");
            return;
        };
        let Some(t) = self.fleet.tenant(q.tenant) else { return };
        let key = QuotaKey {
            source: ops::source_spec(&self.fleet, &q.source),
            resource: self.fleet.s(q.resource).to_string(),
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
            kind: EditKind::Quota { tenant: self.fleet.s(t.name).to_string(), key, current: current.clone() },
            text: current,
            choices,
            selected: None,
            error: None,
        });
    }
}

fn describe_gpu(f: &Fleet, g: &crate::model::Gpu) -> String {
    if !g.mig_enabled {
        return format!("gpu{}: MIG disabled", g.index);
    }
    let layout = mig::Layout::Enabled(g.instances.iter().map(|i| i.placement.profile).collect());
    let _ = f;
    format!("gpu{}: {}", g.index, ops::describe_layout(g.model, &layout))
}

/// The operation a command starts, if it starts one.
pub fn op_kind(c: Command) -> Option<ops::OpKind> {
    Some(match c {
        Command::Cordon => ops::OpKind::Cordon,
        Command::Uncordon => ops::OpKind::Uncordon,
        Command::Drain => ops::OpKind::Drain,
        Command::Reslice => ops::OpKind::Reslice,
        Command::EditQuota => ops::OpKind::SetQuota,
        _ => return None,
    })
}

/// Whether an executed plan's detail names this node (used by tests and the status bar).
pub fn plan_node(plan: &Plan) -> Option<&str> {
    match &plan.detail {
        PlanDetail::Cordon { node, .. } => Some(node),
        PlanDetail::Drain(d) => Some(&d.node),
        PlanDetail::Reslice(r) => Some(&r.node),
        PlanDetail::Quota(_) => None,
    }
}
