//! `Ui`: what the person is looking at, by concern — navigation (the screen stack, per-view
//! selection, sort and filter), row caches, what is open (command line, dialog, help), the
//! session's settings, this cockpit's operations, leaving. Changed only by `App`; read by render.

use std::collections::{HashMap, HashSet};

use super::command::ViewKind;
use super::views::RowId;
use crate::model::{GpuId, NodeId, Severity};
use crate::ops::Plan;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Screen {
    Table(ViewKind),
    /// Node topology: tree and history charts.
    Node(NodeId),
    /// One GPU: MIG slice map, what fits, charts.
    Gpu(GpuId),
    /// One object as the API server holds it (`y`): `Navigation::inspect` says which.
    Inspect,
    /// A container's log (`L`): `Navigation::logs` says which.
    Logs,
    /// Every cluster this cockpit watches (`:clusters`): `Ui::clusters`.
    Clusters,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableState {
    pub selected: usize,
    pub offset: usize,
    /// The column sorted by, by name; `None`: the view's first.
    pub sort_col: Option<&'static str>,
    pub descending: bool,
    pub filter: String,
}

/// Rows of a table view, filtered and sorted; rebuilt only when its inputs change.
#[derive(Clone, Debug, Default)]
pub struct RowCache {
    pub key: (u64, u64, String, Option<&'static str>, bool),
    pub ids: Vec<RowId>,
    /// Rows before filtering, for the "[shown/total]" title.
    pub total: usize,
    /// When and how fast it was built: big views are rebuilt less often for data changes.
    pub built: Option<std::time::Instant>,
    pub cost: std::time::Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputKind {
    Command,
    Filter,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    pub kind: InputKind,
    pub text: String,
    /// The filter before this edit, restored by Esc.
    pub previous: String,
}

/// What an edit dialog edits.
#[derive(Clone, Debug, PartialEq)]
pub enum EditKind {
    Quota { tenant: String, key: crate::ops::QuotaKey, current: String },
    Reslice { node: String, gpus: Vec<u8>, model: crate::mig::GpuModel, current: String },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Dialog {
    /// Type a value (quota) or pick/type a layout (reslice); errors show in place.
    Edit { kind: EditKind, text: String, choices: Vec<String>, selected: Option<usize>, error: Option<String> },
    /// What the plan will do; y confirms (naming the target), n cancels. `id` is the
    /// operation's number from the moment it is previewed (the audit log's `planned`).
    Preview { id: u64, plan: Box<Plan>, scroll: u16, error: Option<String> },
}

/// Where the person is: the screen stack and the place on each screen.
#[derive(Clone, Debug)]
pub struct Navigation {
    pub stack: Vec<Screen>,
    /// Per table view: selection, scroll, sort and filter.
    pub tables: HashMap<ViewKind, TableState>,
    /// Node screen: selected row of the flattened topology tree, and collapsed items.
    pub node_sel: usize,
    pub node_closed: HashSet<String>,
    /// GPU screen: selected MIG instance row.
    pub gpu_row: usize,
    /// Inspect screen: the object asked for, and the first line shown.
    pub inspect: Option<crate::model::InspectTarget>,
    pub inspect_scroll: usize,
    /// The number of the last request: only its answer is shown.
    pub inspect_request: u64,
    /// `/` in the pane: the text found (case-insensitive), and the line of the current match.
    pub inspect_find: String,
    pub inspect_match: Option<usize>,
    /// The answer to the last request as the pane's lines, made once when it arrives (render,
    /// scrolling, `/` and `Y` read them; a kubectl output can run to 1 MiB).
    pub pane: Option<Pane>,
    /// Logs screen: the log asked for (the last request), whether its stream is open (so
    /// leaving the screen stops it), whether the pane sticks to the newest line (following),
    /// and whether long lines wrap. `/`, `n`, `N` and the scroll are the inspect pane's.
    pub logs: Option<crate::model::LogRequest>,
    pub logs_open: bool,
    pub logs_stick: bool,
    pub logs_wrap: bool,
}

/// An answer in the inspect pane: which request, whether it failed, its lines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pane {
    pub request: u64,
    pub failed: bool,
    pub lines: Vec<String>,
}

/// How this cockpit was started; set by the runner, read by render and the `:ctx` line.
#[derive(Clone, Debug, Default)]
pub struct Session {
    /// `--readonly`: operations are disabled up front (see `ui::permission`).
    pub readonly: bool,
    /// "demo · seed 42" or the kube context.
    pub source: String,
    /// Kube contexts of the kubeconfig, for `:ctx`; empty on the demo.
    pub contexts: Vec<String>,
    pub theme_name: String,
    pub keymap_name: String,
    /// kubectl's options for this cockpit's cluster (`--kubeconfig F --context C`), for the
    /// hand-offs; empty on the demo.
    pub kubectl: Vec<String>,
}

/// The operations this cockpit started.
#[derive(Clone, Debug)]
pub struct OpBook {
    /// Their numbers, newest last.
    pub mine: Vec<u64>,
    /// The number the next previewed operation gets.
    pub next: u64,
}

/// Leaving: asked for, and where to.
#[derive(Clone, Debug, Default)]
pub struct Exit {
    pub quit: bool,
    /// Quit was asked for while operations ran; the next quit quits.
    pub armed: bool,
    /// Set by `:ctx NAME`: the runner reconnects to that context.
    pub switch_context: Option<String>,
}

/// What the person is looking at, by concern. What is open over the screen (the line being
/// typed, a dialog, help, the status message) sits at the top, as render reads it most.
#[derive(Clone, Debug)]
pub struct Ui {
    pub nav: Navigation,
    /// Rows of each table view, filtered and sorted (see `RowCache`).
    pub caches: HashMap<ViewKind, RowCache>,
    pub input: Option<Input>,
    pub dialog: Option<Dialog>,
    pub help: bool,
    pub help_scroll: u16,
    /// Every column, however narrow the terminal (k9s's wide).
    pub wide: bool,
    pub message: Option<(Severity, String)>,
    /// Text for the terminal's clipboard (`Y`), taken by the terminal driver after the key.
    pub clipboard: Option<String>,
    /// A command to hand the terminal to (`x`: kubectl exec), taken by the terminal driver,
    /// which gives the terminal back to the cockpit when it exits.
    pub handoff: Option<Vec<String>>,
    /// The terminal's size.
    pub size: (u16, u16),
    pub session: Session,
    pub ops: OpBook,
    pub exit: Exit,
    /// One row per cluster this cockpit watches (one, unless started with several contexts),
    /// remade as their deltas arrive; `cluster` is the one on screen, `clusters_sel` the row
    /// selected in the clusters view.
    pub clusters: Vec<crate::ui::views::clusters::ClusterRow>,
    pub cluster: usize,
    pub clusters_sel: usize,
    /// The clusters view's `/` filter.
    pub clusters_filter: String,
    /// The clusters view's order; `None`: as the clusters were opened.
    pub clusters_sort: Option<crate::ui::views::clusters::Sort>,
}

impl Ui {
    pub fn new(source: String) -> Self {
        Self {
            nav: Navigation {
                stack: vec![Screen::Table(ViewKind::Fleet)],
                tables: HashMap::new(),
                node_sel: 0,
                node_closed: HashSet::new(),
                gpu_row: 0,
                inspect: None,
                inspect_scroll: 0,
                inspect_request: 0,
                inspect_find: String::new(),
                inspect_match: None,
                pane: None,
                logs: None,
                logs_open: false,
                logs_stick: true,
                logs_wrap: false,
            },
            caches: HashMap::new(),
            input: None,
            dialog: None,
            help: false,
            help_scroll: 0,
            wide: false,
            message: None,
            clipboard: None,
            handoff: None,
            size: (120, 40),
            session: Session { source, theme_name: "dark".into(), keymap_name: "default".into(), ..Session::default() },
            ops: OpBook { mine: Vec::new(), next: 1 },
            clusters: Vec::new(),
            cluster: 0,
            clusters_sel: 0,
            clusters_filter: String::new(),
            clusters_sort: None,
            exit: Exit::default(),
        }
    }

    pub fn screen(&self) -> Screen {
        self.nav.stack.last().copied().unwrap_or(Screen::Table(ViewKind::Fleet))
    }

    pub fn table(&self, v: ViewKind) -> TableState {
        self.nav.tables.get(&v).cloned().unwrap_or_default()
    }

    pub fn table_mut(&mut self, v: ViewKind) -> &mut TableState {
        self.nav.tables.entry(v).or_default()
    }

    pub fn rows(&self, v: ViewKind) -> &[RowId] {
        self.caches.get(&v).map(|c| c.ids.as_slice()).unwrap_or(&[])
    }

    /// The id under the selection of a table view.
    pub fn selected_id(&self, v: ViewKind) -> Option<RowId> {
        let t = self.table(v);
        self.rows(v).get(t.selected).copied()
    }

    pub fn info(&mut self, s: impl Into<String>) {
        self.message = Some((Severity::Info, s.into()));
    }
    pub fn warn(&mut self, s: impl Into<String>) {
        self.message = Some((Severity::Warning, s.into()));
    }
    pub fn error(&mut self, s: impl Into<String>) {
        self.message = Some((Severity::Error, s.into()));
    }
}
