//! `App`: the one owner of state. Deltas and input come in; `update` changes `Fleet` and
//! `Ui`; render reads them. Operations leave as `ExecRequest`s to the executor.
//!
//! What a key means depends on what is open ([`KeyMode`]); each mode has its handler in its
//! own file: `table` (browsing, the keymap's normal commands), `line` (the filter and `:`
//! line being typed), `cmdline` (running a `:` line), `dialogs` (editor and preview, and
//! starting operations), `mouse`.

use std::collections::BTreeSet;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::Rect;

use super::command::{Command, ViewKind};
use super::keymap::Keymap;
use super::permission::{self, Denied};
use super::render::{self, areas, table_height};
use super::state::{Dialog, InputKind, RowCache, Screen, Ui};
use super::theme::Theme;
use super::views::{RowId, detail, tables};
use crate::mig;
use crate::model::{Delta, Fleet, GpuId, NodeId};
use crate::ops::{self, Plan, PlanDetail};

mod clusters;
mod cmdline;
mod dialogs;
mod inspect;
mod line;
mod logs;
mod mouse;
mod table;

pub use crate::ops::{ExecRequest, Executor, Recorder};
pub use clusters::{ClusterParts, FoundCluster, Starter};

/// What is open, and so what a key means. Each has its own key handling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyMode {
    /// Browsing a table or a detail screen: keys go through the keymap's normal mode.
    Table,
    /// The `?` help overlay.
    Help,
    /// Typing a `/` filter, applied as it is typed.
    Filter,
    /// Typing a `:` command line.
    CommandLine,
    /// An edit dialog (quota value, reslice layout): keys type into the field.
    Editor,
    /// An operation preview: keys go through the keymap's dialog mode.
    Preview,
}

/// Told the names of the nodes on screen (the agent streams follow them).
pub type ViewNodes = Box<dyn FnMut(&BTreeSet<String>) + Send>;

pub struct App {
    pub fleet: Fleet,
    pub ui: Ui,
    pub theme: Theme,
    pub keymap: Keymap,
    exec: Box<dyn Executor>,
    /// Told the names of the nodes on screen whenever they change (agent streams follow).
    view_nodes: Option<ViewNodes>,
    last_view_nodes: BTreeSet<String>,
    /// Where `y` sends the object to read (the runner's API client); none on the demo.
    inspector: Option<inspect::InspectFn>,
    /// Where `L` sends the log to stream (the runner's API client); none on the demo.
    logger: Option<logs::LogsFn>,
    /// The time the terminal driver last passed in (`set_clock`); rebuilds of expensive views
    /// are throttled against it. `None` (headless: snapshots, tests): never throttled.
    clock: Option<std::time::Instant>,
    /// Every cluster of this cockpit, the one on screen included (see `clusters`).
    clusters: Vec<clusters::Slot>,
}

impl App {
    pub fn new(fleet: Fleet, ui: Ui, theme: Theme, keymap: Keymap, exec: Box<dyn Executor>) -> Self {
        let mut app = Self {
            fleet,
            ui,
            theme,
            keymap,
            exec,
            view_nodes: None,
            last_view_nodes: BTreeSet::new(),
            inspector: None,
            logger: None,
            clock: None,
            clusters: Vec::new(),
        };
        let name = app.ui.session.source.clone();
        app.name_cluster_first(name);
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
        let dropped =
            |app: &Self| crate::ui::views::logs::buffer(&app.fleet, &app.ui.nav).map(|b| (b.request, b.dropped));
        let before = dropped(self);
        for d in deltas {
            progress |= matches!(d, Delta::Op(_));
            dirty |= self.fleet.apply(d);
        }
        // Lines that fell off the front of the log a person has scrolled in: the first line
        // shown (and the match found) keep pointing at the same text.
        if let (Some((req, was)), Some((now_req, now))) = (before, dropped(self))
            && req == now_req
            && now > was
            && !self.ui.nav.logs_stick
        {
            let gone = (now - was) as usize;
            self.ui.nav.inspect_scroll = self.ui.nav.inspect_scroll.saturating_sub(gone);
            self.ui.nav.inspect_match = self.ui.nav.inspect_match.and_then(|m| m.checked_sub(gone));
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

    pub(super) fn body(&self) -> Rect {
        areas(Rect::new(0, 0, self.ui.size.0, self.ui.size.1)).body
    }

    /// The driver's clock, passed in before each frame: update throttling never reads the
    /// wall clock itself.
    pub fn set_clock(&mut self, now: std::time::Instant) {
        self.clock = Some(now);
    }

    /// Rebuilds the current view's rows if their inputs changed, keeps the selection on the
    /// same object and inside the window, and tells the agent streams which nodes are seen.
    pub fn prepare(&mut self) {
        self.prepare_rows();
        self.prepare_pane();
        self.logs_left();
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
        let name = |n: NodeId| self.fleet.node(n).map(|n| self.fleet.str_of(n.name).to_string());
        let gpu_node = |g: GpuId| self.fleet.gpu(g).map(|g| g.node);
        let ids: Vec<NodeId> = match self.ui.screen() {
            Screen::Node(n) => vec![n],
            Screen::Gpu(g) => gpu_node(g).into_iter().collect(),
            Screen::Inspect | Screen::Logs | Screen::Clusters => Vec::new(),
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
                let since_built = match (self.clock, c.built) {
                    (Some(now), Some(b)) => Some(now.saturating_duration_since(b)),
                    _ => None,
                };
                let throttled =
                    c.cost > std::time::Duration::from_millis(20) && since_built.is_some_and(|d| d < c.cost * 10);
                person || !throttled
            }
        };
        if stale {
            let started = std::time::Instant::now();
            let old_id = self.ui.selected_id(v);
            // The filter typed further over the same rows: only the rows it kept are read
            // again, and they stay in their order (a key per letter at a million rows).
            let narrowed = self.ui.caches.get(&v).filter(|c| {
                (c.key.0, c.key.1, c.key.3, c.key.4) == (key.0, key.1, key.3, key.4)
                    && tables::narrows(&c.key.2, &key.2)
            });
            let (ids, total) = match narrowed {
                Some(c) => (tables::narrow(&self.fleet, v, &c.ids, &key.2), c.total),
                None => tables::rows_of_all(&self.fleet, v, &t.filter, t.sort_col, t.descending),
            };
            let sel = old_id.and_then(|id| ids.iter().position(|x| *x == id));
            // How long the rebuild took is a measurement of this work, not a decision.
            let cost = started.elapsed();
            self.ui.caches.insert(v, RowCache { key, ids, total, built: self.clock, cost });
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
                let len = detail::tree_rows(&self.fleet, n, &self.ui.nav.node_closed).len();
                self.ui.nav.node_sel = self.ui.nav.node_sel.min(len.saturating_sub(1));
            }
            Screen::Gpu(g) => {
                let len = self.fleet.gpu(g).map(|g| g.instances.len()).unwrap_or(0);
                self.ui.nav.gpu_row = self.ui.nav.gpu_row.min(len.saturating_sub(1));
            }
            Screen::Clusters => {
                // A selection the filter hides moves to the first row it keeps.
                let shown = crate::ui::views::clusters::shown(
                    &self.ui.clusters,
                    &self.ui.clusters_filter,
                    self.ui.clusters_sort,
                );
                if !shown.contains(&self.ui.clusters_sel)
                    && let Some(first) = shown.first()
                {
                    self.ui.clusters_sel = *first;
                }
            }
            Screen::Table(_) | Screen::Inspect | Screen::Logs => {}
        }
    }

    pub fn draw(&self, frame: &mut ratatui::Frame) {
        render::render(&self.fleet, &self.ui, &self.theme, &self.keymap, frame);
    }

    // ---------- input ----------

    /// What a key press means now: the innermost open thing decides.
    pub fn key_mode(&self) -> KeyMode {
        match (&self.ui.input, &self.ui.dialog) {
            (Some(i), _) if i.kind == InputKind::Command => KeyMode::CommandLine,
            (Some(_), _) => KeyMode::Filter,
            _ if self.ui.help => KeyMode::Help,
            (None, Some(Dialog::Edit { .. })) => KeyMode::Editor,
            (None, Some(Dialog::Preview { .. })) => KeyMode::Preview,
            (None, None) => KeyMode::Table,
        }
    }

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
        match self.key_mode() {
            KeyMode::CommandLine | KeyMode::Filter => self.key_line(key),
            KeyMode::Help => self.key_help(key),
            KeyMode::Editor => self.key_editor(key),
            KeyMode::Preview => self.key_preview(key),
            KeyMode::Table => self.key_table(key),
        }
        self.prepare();
    }

    /// Whether the person may run `op` here; see [`permission`].
    pub fn may_run(&self, op: ops::OpKind) -> Result<(), Denied> {
        permission::check(self.ui.session.readonly, &self.fleet, op)
    }

    pub(super) fn push(&mut self, s: Screen) {
        if self.ui.screen() != s {
            self.ui.nav.stack.push(s);
        }
        self.ui.nav.node_sel = 0;
        self.ui.nav.gpu_row = 0;
    }

    pub fn open_view(&mut self, v: ViewKind) {
        self.ui.nav.stack = vec![Screen::Table(v)];
    }

    pub(super) fn request_quit(&mut self) {
        self.request_exit(None, false);
    }

    /// Every way out of the cockpit (`q`, `:q`, ctrl-c, `:ctx NAME`) comes here. With
    /// operations this cockpit started still running, the first request says what leaving
    /// does to them and the second leaves (`force`: at once, as `:q!`). Leaving records each
    /// running operation as interrupted at its step (on a cluster, in the audit log).
    pub(super) fn request_exit(&mut self, switch: Option<String>, force: bool) {
        let running = self.running_ops();
        if running == 0 || force || self.ui.exit.armed {
            self.ui.exit.switch_context = switch;
            self.ui.exit.quit = true;
            return;
        }
        self.ui.exit.armed = true;
        let (doing, again) = match &switch {
            Some(c) => (format!("switching to {c}"), format!(":ctx {c} again to switch")),
            None => ("quitting".to_string(), "quit again to quit, :q! quits at once".to_string()),
        };
        self.ui.warn(format!(
            "{} still running: {doing} stops it where it is (what was done stays; on a cluster `fabrik audit` shows where it was interrupted) — {again}",
            ops::count(running, "operation")
        ));
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

/// The operation a command starts, if it starts one (the command table says).
pub fn op_kind(c: Command) -> Option<ops::OpKind> {
    c.op()
}

/// Whether an executed plan's detail names this node (used by tests and the status bar).
pub fn plan_node(plan: &Plan) -> Option<&str> {
    match &plan.detail {
        PlanDetail::Cordon { node, .. } => Some(node),
        PlanDetail::Drain(d) => Some(&d.node),
        PlanDetail::Reslice(r) => Some(&r.node),
        PlanDetail::Quota(_) => None,
        PlanDetail::Taint(t) => Some(&t.node),
        PlanDetail::Host(h) => Some(h.node.as_str()).filter(|n| !n.is_empty()),
        PlanDetail::Reclaim(_) | PlanDetail::Queue(_) | PlanDetail::Workload(_) => None,
    }
}
