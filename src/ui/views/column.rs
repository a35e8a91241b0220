//! What every table view is made of (k9s's header with attributes): a `Column` says its
//! name, how wide it is and may get, how it aligns, how important it is on a narrow screen,
//! its typed value (what it sorts by and what the JSON snapshot carries), whether that moves
//! with live telemetry, whether `/` looks at it, and how its cell is drawn. `RowId` says
//! which object a row is. `layout` fits the columns to the terminal's width.

use std::borrow::Cow;

use super::cell::{Cell, age, muted, text};
use crate::model::{Fleet, GpuId, NodeId, PodId, TenantId, Ts};

/// Which object a table row is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RowId {
    Node(NodeId),
    Gpu(GpuId),
    /// A MIG instance of a GPU (its index in `Gpu::instances`), listed under the GPU's row.
    Mig(GpuId, u8),
    Tenant(TenantId),
    /// An index of `Fleet::quotas`.
    Quota(u32),
    Pod(PodId),
    /// An event, counted from the newest (0).
    Event(u32),
    /// An operation, counted from the newest (0).
    Op(u32),
    /// A ComputeDomain, by a hash of its `namespace/name` (see `domains::row_id`): the row
    /// stays on its domain while others come and go.
    Domain(u32),
    /// A Kueue Workload, by the id the fleet gives it (see `Fleet::workload_by_id`).
    Workload(u32),
    /// A Cluster API object or Machine, by the id the fleet gives it (see `Fleet::capi_by_id`).
    Capi(u32),
    /// A Metal3 BareMetalHost, by the id the fleet gives it (see `Fleet::host_by_id`).
    Host(u32),
}

impl RowId {
    pub fn node(self) -> Option<NodeId> {
        if let RowId::Node(n) = self { Some(n) } else { None }
    }
    /// The GPU of a GPU row or of a MIG instance row.
    pub fn gpu(self) -> Option<GpuId> {
        match self {
            RowId::Gpu(g) | RowId::Mig(g, _) => Some(g),
            _ => None,
        }
    }
    pub fn tenant(self) -> Option<TenantId> {
        if let RowId::Tenant(t) = self { Some(t) } else { None }
    }
    pub fn quota(self) -> Option<crate::model::QuotaId> {
        if let RowId::Quota(q) = self { Some(crate::model::QuotaId(q)) } else { None }
    }
    pub fn pod(self) -> Option<PodId> {
        if let RowId::Pod(p) = self { Some(p) } else { None }
    }
    pub fn event(self) -> Option<u32> {
        if let RowId::Event(e) = self { Some(e) } else { None }
    }
    pub fn op(self) -> Option<u32> {
        if let RowId::Op(o) = self { Some(o) } else { None }
    }
    pub fn domain(self) -> Option<u32> {
        if let RowId::Domain(d) = self { Some(d) } else { None }
    }
    pub fn workload(self) -> Option<u32> {
        if let RowId::Workload(w) = self { Some(w) } else { None }
    }
    pub fn capi(self) -> Option<u32> {
        if let RowId::Capi(c) = self { Some(c) } else { None }
    }
    pub fn host(self) -> Option<u32> {
        if let RowId::Host(h) = self { Some(h) } else { None }
    }
    /// A row listed under another (a MIG instance under its GPU): it follows its parent
    /// rather than being sorted itself.
    pub fn is_child(self) -> bool {
        matches!(self, RowId::Mig(..))
    }
}

/// A cell's typed value: what a column sorts by, and what the JSON snapshot carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    Num(i64),
    Text(Cow<'a, str>),
    /// A moment, sorted oldest first (events and operations read as a log).
    Time(Ts),
    /// A moment shown as an age (`3d`): sorted youngest first.
    Age(Ts),
    /// Nothing applies (no quota, no device, not scheduled): a dash, `null` in JSON.
    Absent,
    /// Nothing measured it: `—`, `null` in JSON, never a made-up 0.
    Unknown,
}

impl<'a> Value<'a> {
    pub fn text(s: &'a str) -> Self {
        Value::Text(Cow::Borrowed(s))
    }

    /// A composed text column (MIG state, alerts, devices) is its cell's text.
    pub fn of_cell(c: Cell) -> Value<'static> {
        Value::Text(Cow::Owned(c.0))
    }

    /// The cell of a column that draws its value plainly: numbers and text as they are,
    /// ages muted, a muted dash for nothing and `—` for unknown.
    pub fn display(&self, f: &Fleet) -> Cell {
        match self {
            Value::Num(n) => text(n.to_string()),
            Value::Text(s) => text(s.as_ref()),
            Value::Time(t) | Value::Age(t) => muted(age(f.now, *t)),
            Value::Absent => muted("-"),
            Value::Unknown => muted("—"),
        }
    }

    /// As JSON: numbers, strings, moments as Unix ms, `null` for absent and unknown.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Num(n) => (*n).into(),
            Value::Text(s) => s.as_ref().into(),
            Value::Time(t) | Value::Age(t) => (*t).into(),
            Value::Absent | Value::Unknown => serde_json::Value::Null,
        }
    }

    /// What a sort compares: numbers (and moments) before text; text case-insensitively;
    /// nothing as an empty text, unknown as its dash, so both follow the numbers.
    pub fn sort_key(self) -> SortKey<'a> {
        match self {
            Value::Num(n) => SortKey::Num(n),
            Value::Time(t) => SortKey::Num(t as i64),
            Value::Age(t) => SortKey::Num(-(t as i64)),
            Value::Text(s) if s.chars().any(char::is_uppercase) => SortKey::Text(Cow::Owned(s.to_lowercase())),
            Value::Text(s) => SortKey::Text(s),
            Value::Absent => SortKey::Text(Cow::Borrowed("")),
            Value::Unknown => SortKey::Text(Cow::Borrowed("—")),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SortKey<'a> {
    Num(i64),
    Text(Cow<'a, str>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    /// Numbers.
    Right,
}

pub type ValueFn = for<'a> fn(&'a Fleet, RowId) -> Value<'a>;
pub type CellFn = fn(&Fleet, RowId) -> Cell;
pub type TextFn = for<'a> fn(&'a Fleet, RowId) -> Cow<'a, str>;
pub type WriteFn = fn(&Fleet, RowId, &mut String);

/// One column of a view. Build with `Column::new(name, width)` and the `const` setters.
#[derive(Clone, Copy)]
pub struct Column {
    pub name: &'static str,
    /// How wide it is when there is room.
    pub width: u16,
    /// How narrow it may get before it is dropped (names keep their width).
    pub min: u16,
    /// Its share of the width left over once every shown column has its width (names,
    /// messages); 0 stays at `width`.
    pub grow: u16,
    pub align: Align,
    /// 0: always shown; on a narrow screen the highest numbers go first.
    pub priority: u8,
    /// Its value moves with live telemetry: a sort by it follows every sample.
    pub live: bool,
    /// The `/` filter looks at it (names, states and kinds; not numbers that move).
    pub filter: bool,
    pub value: ValueFn,
    /// How the cell is drawn; `None` draws the text `write` writes, else the value
    /// (`Value::display`).
    pub cell: Option<CellFn>,
    /// The drawn cell's text, borrowed from the fleet where it can be, for the `/` filter:
    /// a filter reads every row, and drawing a cell allocates its text. `None`: the value's
    /// text when the cell draws the value, else the drawn cell's. Must equal the cell's text
    /// (`tables::tests` checks every view on the demo fleet).
    pub text: Option<TextFn>,
    /// A formatted cell's text, written into a buffer: the cell drawn (when `cell` is
    /// `None`), and the filter's text, which reuses one buffer from row to row (no
    /// allocation per row).
    pub write: Option<WriteFn>,
}

thread_local! {
    /// The buffer [`Column::with_filter_text`] writes formatted cells into, one per thread
    /// (a filter runs on several).
    static SCRATCH: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

impl Column {
    pub const fn new(name: &'static str, width: u16) -> Self {
        Column {
            name,
            width,
            min: width,
            grow: 0,
            align: Align::Left,
            priority: 0,
            live: false,
            filter: false,
            value: |_, _| Value::Absent,
            cell: None,
            text: None,
            write: None,
        }
    }
    pub const fn right(mut self) -> Self {
        self.align = Align::Right;
        self
    }
    pub const fn min(mut self, min: u16) -> Self {
        self.min = min;
        self
    }
    pub const fn grow(mut self, share: u16) -> Self {
        self.grow = share;
        self
    }
    pub const fn priority(mut self, p: u8) -> Self {
        self.priority = p;
        self
    }
    pub const fn live(mut self) -> Self {
        self.live = true;
        self
    }
    pub const fn filter(mut self) -> Self {
        self.filter = true;
        self
    }
    pub const fn value(mut self, f: ValueFn) -> Self {
        self.value = f;
        self
    }
    pub const fn cell(mut self, f: CellFn) -> Self {
        self.cell = Some(f);
        self
    }
    pub const fn text(mut self, f: TextFn) -> Self {
        self.text = Some(f);
        self
    }
    pub const fn write(mut self, f: WriteFn) -> Self {
        self.write = Some(f);
        self
    }

    /// The drawn cell of a row.
    pub fn cell_of(&self, f: &Fleet, row: RowId) -> Cell {
        match (self.cell, self.write) {
            (Some(c), _) => c(f, row),
            (None, Some(w)) => {
                let mut out = String::new();
                w(f, row, &mut out);
                super::cell::text(out)
            }
            (None, None) => (self.value)(f, row).display(f),
        }
    }

    /// The text of a row's cell as the filter reads it, without drawing the cell where the
    /// text is there to borrow.
    pub fn filter_text<'a>(&self, f: &'a Fleet, row: RowId) -> Cow<'a, str> {
        if let Some(w) = self.write {
            let mut out = String::new();
            w(f, row, &mut out);
            return out.into();
        }
        match (self.text, self.cell) {
            (Some(t), _) => t(f, row),
            (None, None) => match (self.value)(f, row) {
                Value::Text(s) => s,
                v => v.display(f).0.into(),
            },
            (None, Some(c)) => c(f, row).0.into(),
        }
    }

    /// `read` of [`Column::filter_text`], a formatted cell written into this thread's buffer.
    pub fn with_filter_text<R>(&self, f: &Fleet, row: RowId, read: impl FnOnce(&str) -> R) -> R {
        match self.write {
            Some(w) => SCRATCH.with_borrow_mut(|out| {
                out.clear();
                w(f, row, out);
                read(out)
            }),
            None => read(&self.filter_text(f, row)),
        }
    }

    /// The header is never cut, with room for the sort arrow.
    fn header_width(&self) -> u16 {
        self.name.chars().count() as u16 + 1
    }
    fn want(&self) -> u16 {
        self.width.max(self.header_width())
    }
    fn least(&self) -> u16 {
        self.min.clamp(self.header_width(), self.want())
    }
}

/// `layout` for what is on screen (k9s sizes its columns the same way): a column that does
/// not grow is no wider than its header and its widest cell among `fit` (the widest cell of
/// each column over the rows drawn), so a `Ready` column does not hold the width of a
/// `NotReady,Cordoned` that is not there, and the width it frees shows more columns or goes
/// to the names.
pub fn layout_fitted(cols: &[Column], avail: u16, wide: bool, fit: &[u16]) -> Vec<(usize, u16)> {
    let fitted: Vec<Column> = cols
        .iter()
        .zip(fit)
        .map(|(c, f)| {
            if c.grow > 0 {
                return *c;
            }
            let w = c.want().min((*f).max(c.header_width()));
            Column { width: w, min: c.min.min(w), ..*c }
        })
        .collect();
    layout(&fitted, avail, wide)
}

/// The column named `name` of a table.
pub fn find<'c>(cols: &'c [Column], name: &str) -> Option<&'c Column> {
    cols.iter().find(|c| c.name == name)
}

/// Which columns are shown in `avail` cells (one between columns), and how wide, in table
/// order. Columns go in by priority while they fit — a growing one at its `min`, the rest
/// at their width — and the first that does not fit ends the list (priority 0 always goes
/// in); `wide` takes every column. What is left over brings the growing columns to their
/// width, most important first, then is shared among them by `grow`. When even that is too
/// wide, the least important shrink to their `min`, and the table is cut at the right edge.
pub fn layout(cols: &[Column], avail: u16, wide: bool) -> Vec<(usize, u16)> {
    let mut order: Vec<usize> = (0..cols.len()).collect();
    order.sort_by_key(|i| (cols[*i].priority, *i));
    let start = |c: &Column| if c.grow > 0 { c.least() } else { c.want() };
    let mut shown: Vec<usize> = Vec::new();
    let mut used: u32 = 0;
    for &i in &order {
        let c = &cols[i];
        let need = u32::from(start(c)) + u32::from(!shown.is_empty());
        if wide || c.priority == 0 || used + need <= u32::from(avail) {
            shown.push(i);
            used += need;
        } else {
            break;
        }
    }
    // `shown` stays in priority order while widths are settled.
    let mut width: Vec<u16> = shown.iter().map(|i| start(&cols[*i])).collect();
    let avail = u32::from(avail);
    if used > avail {
        for k in (0..shown.len()).rev() {
            let c = &cols[shown[k]];
            let cut = (width[k] - c.least()).min((used - avail) as u16);
            width[k] -= cut;
            used -= u32::from(cut);
            if used <= avail {
                break;
            }
        }
    } else {
        let mut extra = avail - used;
        for (k, i) in shown.iter().enumerate() {
            let c = &cols[*i];
            if c.grow > 0 {
                let add = (c.want() - width[k]).min(extra as u16);
                width[k] += add;
                extra -= u32::from(add);
            }
        }
        let shares: u32 = shown.iter().map(|i| u32::from(cols[*i].grow)).sum();
        if shares > 0 && extra > 0 {
            let mut left = extra;
            for (k, i) in shown.iter().enumerate() {
                let add = extra * u32::from(cols[*i].grow) / shares;
                width[k] += add as u16;
                left -= add;
            }
            // The rounding remainder to the most important growing column.
            if let Some(k) = shown.iter().position(|i| cols[*i].grow > 0) {
                width[k] += left as u16;
            }
        }
    }
    let mut out: Vec<(usize, u16)> = shown.into_iter().zip(width).collect();
    out.sort_by_key(|(i, _)| *i);
    // Still too wide (a narrow screen, or wide): cut at the right edge; the first column
    // that does not fit gets what is left if its name fits in it.
    let mut placed = Vec::with_capacity(out.len());
    let mut x: u32 = 0;
    for (i, w) in out {
        let left = (avail + 1).saturating_sub(x);
        if u32::from(w) < left {
            placed.push((i, w));
            x += u32::from(w) + 1;
        } else {
            if left > u32::from(cols[i].header_width()) || placed.is_empty() {
                placed.push((i, (left.saturating_sub(1).max(1)) as u16));
            }
            break;
        }
    }
    placed
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLS: &[Column] = &[
        Column::new("NAME", 12).grow(2),
        Column::new("STATUS", 17).min(8),
        Column::new("MODEL", 10).priority(3),
        Column::new("UTIL", 8).right().priority(1),
        Column::new("ALERTS", 14).min(7).grow(1),
    ];

    fn names(l: &[(usize, u16)]) -> Vec<&'static str> {
        l.iter().map(|(i, _)| COLS[*i].name).collect()
    }

    #[test]
    fn the_least_important_go_first_and_names_take_what_is_left() {
        assert_eq!(names(&layout(COLS, 200, false)), ["NAME", "STATUS", "MODEL", "UTIL", "ALERTS"]);
        let l = layout(COLS, 50, false);
        assert_eq!(names(&l), ["NAME", "STATUS", "UTIL", "ALERTS"]);
        let total: u16 = l.iter().map(|(_, w)| w + 1).sum::<u16>() - 1;
        assert_eq!(total, 50, "{l:?}");
        // At 200 the spare width goes to the names, two shares to one.
        let wide = layout(COLS, 200, false);
        assert!(wide[0].1 > 60 && wide[4].1 > 30, "{wide:?}");
        // Wide: every column, shrunk where it may be.
        assert_eq!(names(&layout(COLS, 50, true)), ["NAME", "STATUS", "MODEL", "UTIL", "ALERTS"]);
    }

    #[test]
    fn columns_are_no_wider_than_what_is_on_screen() {
        // Every status on screen is `Ready`: STATUS takes 7 (its header and the sort mark),
        // not 17, and the width it frees brings MODEL back at 50 columns.
        let fit = [9, 5, 9, 3, 0];
        let l = layout_fitted(COLS, 50, false, &fit);
        assert_eq!(names(&l), ["NAME", "STATUS", "MODEL", "UTIL", "ALERTS"], "{l:?}");
        assert_eq!(l[1].1, 7, "{l:?}");
        // A cell wider than the column's width does not widen it; growing columns still grow.
        let l = layout_fitted(COLS, 200, false, &[9, 40, 9, 3, 0]);
        assert_eq!(l[1].1, 17, "{l:?}");
        assert!(l[0].1 > 60, "{l:?}");
    }

    #[test]
    fn values_sort_numbers_first_then_text_then_nothing() {
        let mut v = vec![
            Value::Unknown.sort_key(),
            Value::text("b").sort_key(),
            Value::Num(3).sort_key(),
            Value::Absent.sort_key(),
            Value::text("A").sort_key(),
            Value::Num(-1).sort_key(),
        ];
        v.sort();
        let expect = vec![
            SortKey::Num(-1),
            SortKey::Num(3),
            SortKey::Text("".into()),
            SortKey::Text("a".into()),
            SortKey::Text("b".into()),
            SortKey::Text("—".into()),
        ];
        assert_eq!(v, expect);
        assert!(Value::Age(10).sort_key() < Value::Age(5).sort_key(), "younger first");
        assert!(Value::Time(5).sort_key() < Value::Time(10).sort_key(), "older first");
    }
}
