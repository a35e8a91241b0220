//! What the table views share: each view's column table and rows, the `/` filter, sorting
//! by typed values, and all rows as text for `fabrik snapshot`. The TUI draws only the
//! visible rows; the snapshot formats all of them with the same cells.

use super::column::{Column, RowId, SortKey, Value, find};
use super::{capi, domains, events, fleet, gpus, hosts, ops, pods, quotas, tenants, workloads};
use crate::model::*;
use crate::ui::command::ViewKind;

pub use super::cell::{Cell, age, pct, util_token};
pub use super::domains::domain_of;
pub use super::events::event_at;
pub use super::ops::{op_at, op_state};
pub use super::workloads::workload_of;

pub fn columns(v: ViewKind) -> &'static [Column] {
    match v {
        ViewKind::Fleet => fleet::COLUMNS,
        ViewKind::Gpus => gpus::COLUMNS,
        ViewKind::Tenants => tenants::COLUMNS,
        ViewKind::Quotas => quotas::COLUMNS,
        ViewKind::Pods => pods::COLUMNS,
        ViewKind::Events => events::COLUMNS,
        ViewKind::Ops => ops::COLUMNS,
        ViewKind::Domains => domains::COLUMNS,
        ViewKind::Workloads => workloads::COLUMNS,
        ViewKind::Capi => capi::COLUMNS,
        ViewKind::Hosts => hosts::COLUMNS,
    }
}

/// The value of the column `name` of a table (`Unknown` if it has none by that name).
pub fn value_of<'a>(cols: &[Column], name: &str, f: &'a Fleet, row: RowId) -> Value<'a> {
    find(cols, name).map_or(Value::Unknown, |c| (c.value)(f, row))
}

/// The drawn cell of the column `name` of a view's row (blank if it has none by that name).
pub fn cell(f: &Fleet, v: ViewKind, row: RowId, name: &str) -> Cell {
    find(columns(v), name).map_or_else(super::cell::blank, |c| c.cell_of(f, row))
}

/// The index of the sort column: the one named, else the first (every view's default).
pub fn sort_index(v: ViewKind, sort: Option<&str>) -> usize {
    sort.and_then(|s| columns(v).iter().position(|c| c.name == s)).unwrap_or(0)
}

/// Whether a sort by this column follows live telemetry (and so re-sorts as it arrives).
pub fn sort_is_live(v: ViewKind, sort: Option<&str>) -> bool {
    columns(v)[sort_index(v, sort)].live
}

/// Which objects are rows, unsorted and unfiltered: nodes, GPUs (their MIG instances
/// follow them, see `children`), tenants with GPU demand or a quota, quotas, pods that ask
/// for devices, events and operations (newest first), ComputeDomains, Kueue Workloads,
/// Cluster API objects and Machines.
pub fn ids(f: &Fleet, v: ViewKind) -> Vec<RowId> {
    match v {
        ViewKind::Fleet => f.node_ids().map(RowId::Node).collect(),
        ViewKind::Gpus => f.gpu_ids().map(RowId::Gpu).collect(),
        ViewKind::Tenants => f
            .tenant_ids()
            .filter(|t| {
                f.tenant(*t).is_some_and(|t| {
                    t.usage.requested_gpus + t.usage.requested_mig + t.usage.allocated_gpus + t.usage.allocated_mig > 0
                        || !t.quotas.is_empty()
                })
            })
            .map(RowId::Tenant)
            .collect(),
        ViewKind::Quotas => f.quota_ids().map(|q| RowId::Quota(q.0)).collect(),
        ViewKind::Pods => {
            f.pod_ids().filter(|p| f.pod(*p).is_some_and(|p| p.requests_devices())).map(RowId::Pod).collect()
        }
        ViewKind::Events => (0..f.events.len() as u32).map(RowId::Event).collect(),
        ViewKind::Ops => (0..f.ops.len() as u32).map(RowId::Op).collect(),
        ViewKind::Domains => domains::ids(f),
        ViewKind::Workloads => workloads::ids(f),
        ViewKind::Capi => capi::ids(f),
        ViewKind::Hosts => hosts::ids(f),
    }
}

/// Rows listed under a row: a GPU's MIG instances.
pub fn children(f: &Fleet, row: RowId) -> impl Iterator<Item = RowId> {
    let (g, n) = match row {
        RowId::Gpu(g) => (g, f.gpu(g).map_or(0, |gpu| gpu.instances.len().min(u8::MAX as usize) as u8)),
        _ => (GpuId(0), 0),
    };
    (0..n).map(move |i| RowId::Mig(g, i))
}

/// A filter as typed: case-insensitive substring of any filterable cell; a leading `!`
/// inverts it. Lower-cased once, not once per row.
pub struct Filter {
    neg: bool,
    needle: String,
}

impl Filter {
    pub fn new(filter: &str) -> Filter {
        let (neg, needle) = match filter.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, filter),
        };
        Filter { neg, needle: needle.to_lowercase() }
    }

    /// Whether `hay` holds the needle, ignoring case. An ASCII needle (what people type) is
    /// compared byte by byte without lower-casing the cell: a filter over the GPUs view's
    /// million rows formats each cell once and allocates nothing more.
    pub fn found_in(&self, hay: &str) -> bool {
        let n = self.needle.as_bytes();
        if self.needle.is_ascii() {
            // The needle is lower-case: a window is compared further only where its first
            // byte matches (comparing each whole window was a quarter of a filter's time).
            let Some((&first, rest)) = n.split_first() else { return true };
            hay.as_bytes()
                .windows(n.len())
                .any(|w| w[0].to_ascii_lowercase() == first && w[1..].eq_ignore_ascii_case(rest))
        } else {
            hay.to_lowercase().contains(&self.needle)
        }
    }

    /// Whether a row whose filterable cells are `cells` is kept.
    pub fn keeps_cells<S: AsRef<str>>(&self, mut cells: impl Iterator<Item = S>) -> bool {
        self.keeps_if(|| cells.any(|c| self.found_in(c.as_ref())))
    }

    /// Whether a row is kept, given whether the needle is in one of its cells (not asked
    /// when there is no needle).
    fn keeps_if(&self, found: impl FnOnce() -> bool) -> bool {
        self.needle.is_empty() || found() != self.neg
    }

    /// Whether row `row` of view `v` is kept.
    pub fn keeps(&self, f: &Fleet, v: ViewKind, row: RowId) -> bool {
        self.keeps_if(|| {
            columns(v).iter().filter(|c| c.filter).any(|c| c.with_filter_text(f, row, |t| self.found_in(t)))
        })
    }

    /// The rows of `ids` it keeps, in order (on every core for a long list: see
    /// [`map_rows`]).
    fn kept(&self, f: &Fleet, v: ViewKind, ids: &[RowId]) -> Vec<RowId> {
        map_rows(ids, |id| self.keeps(f, v, id).then_some(id))
    }
}

/// Whether every row filter `new` keeps is among those `old` keeps — the filter typed
/// further — so that `new` can be applied to `old`'s rows alone ([`narrow`]): neither
/// inverted, both ASCII (what `found_in` compares byte by byte), the new needle holding the
/// old.
pub fn narrows(old: &str, new: &str) -> bool {
    let (o, n) = (Filter::new(old), Filter::new(new));
    !o.neg && !n.neg && o.needle.is_ascii() && n.needle.is_ascii() && n.needle.contains(&o.needle)
}

/// `rows` (as [`rows`] made them: filtered, sorted, children after their row) filtered by
/// `filter` too, in the same order: what [`rows`] gives for `filter` when the fleet is the
/// same and [`narrows`] holds, without reading the rows `rows` left out or sorting again.
pub fn narrow(f: &Fleet, v: ViewKind, rows: &[RowId], filter: &str) -> Vec<RowId> {
    let filter = Filter::new(filter);
    // A child (a GPU's MIG instance) goes with its row; the filter reads rows only.
    let kept = map_rows(rows, |id| Some(id.is_child() || filter.keeps(f, v, id)));
    let mut out = Vec::new();
    let mut row_kept = false;
    for (&id, keep) in rows.iter().zip(kept) {
        if !id.is_child() {
            row_kept = keep;
        }
        if row_kept {
            out.push(id);
        }
    }
    out
}

/// Rows of a long list from which a filter runs on every core at once (each thread takes a
/// run of them); below it, one thread: starting threads would cost more than they save.
const ROWS_FOR_THREADS: usize = 16_384;

/// `ids` mapped by `each`, in order, the `None`s left out: on every core (at most eight)
/// for a list of [`ROWS_FOR_THREADS`] rows or more, as a filter over the pods view's
/// 400,000 rows is; on this thread for a shorter one. `each` reads the fleet only. Used for
/// the filter alone: a sort key is cheaper to make than a thread's share of the rows is to
/// hand back (opening the GPUs view's million rows on two threads was slower).
fn map_rows<T: Send>(ids: &[RowId], each: impl Fn(RowId) -> Option<T> + Sync) -> Vec<T> {
    if ids.len() < ROWS_FOR_THREADS {
        return map_rows_on(ids, each, 1);
    }
    // Asked once: on Linux the answer reads the cgroup's CPU quota from files, and a filter
    // runs on every key typed.
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let cores = *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()).min(8));
    map_rows_on(ids, each, cores)
}

fn map_rows_on<T: Send>(ids: &[RowId], each: impl Fn(RowId) -> Option<T> + Sync, threads: usize) -> Vec<T> {
    if threads < 2 || ids.len() < 2 {
        return ids.iter().filter_map(|id| each(*id)).collect();
    }
    let each = &each;
    std::thread::scope(|s| {
        let runs: Vec<_> = ids
            .chunks(ids.len().div_ceil(threads))
            .map(|run| s.spawn(move || run.iter().filter_map(|id| each(*id)).collect::<Vec<T>>()))
            .collect();
        let mut out = Vec::with_capacity(ids.len());
        for run in runs {
            match run.join() {
                Ok(part) => out.extend(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        out
    })
}

/// Filtered, sorted rows of a view, by the typed values of the sort column (ties in row
/// order); children follow their row.
pub fn rows(f: &Fleet, v: ViewKind, filter: &str, sort: Option<&str>, descending: bool) -> Vec<RowId> {
    rows_of_all(f, v, filter, sort, descending).0
}

/// [`rows`], and how many rows the view has before the filter (its `[kept/total]`), from
/// the one listing.
pub fn rows_of_all(f: &Fleet, v: ViewKind, filter: &str, sort: Option<&str>, descending: bool) -> (Vec<RowId>, usize) {
    let col = &columns(v)[sort_index(v, sort)];
    let filter = Filter::new(filter);
    let all = ids(f, v);
    let total = all.len();
    let kept = if filter.needle.is_empty() { all } else { filter.kept(f, v, &all) };
    let keyed: Vec<(SortKey, RowId)> = kept.into_iter().map(|id| ((col.value)(f, id).sort_key(), id)).collect();
    let mut order = sort_keyed(keyed);
    if descending {
        order.reverse();
    }
    let mut out = Vec::with_capacity(order.len());
    for id in order {
        out.push(id);
        out.extend(children(f, id));
    }
    (out, total)
}

/// The rows of `keyed` by key, then by row. Keys that repeat in runs (a node's name on each
/// of its GPUs, which the fleet holds together) are compared once per run: the runs are
/// ranked by key, then the rows sorted by (rank, row), integers — the GPUs view's million
/// rows by node name. With few repeats, one sort of the keys.
fn sort_keyed(mut keyed: Vec<(SortKey<'_>, RowId)>) -> Vec<RowId> {
    let mut starts: Vec<usize> = Vec::new();
    for i in 0..keyed.len() {
        if i == 0 || keyed[i].0 != keyed[i - 1].0 {
            starts.push(i);
            if starts.len().saturating_mul(4) > keyed.len() {
                break;
            }
        }
    }
    if starts.len().saturating_mul(4) > keyed.len() {
        keyed.sort_unstable();
        return keyed.into_iter().map(|(_, id)| id).collect();
    }
    let key = |run: usize| &keyed[starts[run]].0;
    let mut by_key: Vec<usize> = (0..starts.len()).collect();
    by_key.sort_unstable_by(|a, b| key(*a).cmp(key(*b)));
    // Equal keys in different runs share a rank, so their rows still sort by row.
    let mut rank = vec![0u32; starts.len()];
    for k in 1..by_key.len() {
        let step = u32::from(key(by_key[k]) != key(by_key[k - 1]));
        rank[by_key[k]] = rank[by_key[k - 1]] + step;
    }
    let mut run = 0;
    let mut ranked: Vec<(u32, RowId)> = Vec::with_capacity(keyed.len());
    for (i, (_, id)) in keyed.iter().enumerate() {
        if starts.get(run + 1) == Some(&i) {
            run += 1;
        }
        ranked.push((rank[run], *id));
    }
    ranked.sort_unstable();
    ranked.into_iter().map(|(_, id)| id).collect()
}

/// All rows of a view as text, every column, for `fabrik snapshot --format table|markdown`.
pub fn text_rows(f: &Fleet, v: ViewKind, filter: &str) -> (Vec<&'static str>, Vec<Vec<String>>) {
    text_rows_of(f, v, &rows(f, v, filter, None, false))
}

/// These rows of a view as text, every column.
pub fn text_rows_of(f: &Fleet, v: ViewKind, ids: &[RowId]) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let cols = columns(v);
    let headers = cols.iter().map(|c| c.name).collect();
    let rows = ids.iter().map(|id| cols.iter().map(|c| c.cell_of(f, *id).0).collect()).collect();
    (headers, rows)
}

/// How a fleet's feeds stand, as the header and the clusters view say it, and its colour.
pub fn feed_state(f: &Fleet) -> (String, &'static str) {
    // Several feeds in trouble are counted, not listed; the worst one names the time.
    match f.feed_state() {
        FeedsState::Loading => ("loading".into(), "ui.stale"),
        FeedsState::Live => ("live".into(), "status.ready"),
        FeedsState::Trouble { source, stale, since, feeds, loading } => {
            let loading = if loading { "loading · " } else { "" };
            let what = if stale { "stale" } else { "reconnecting" };
            let age = age(f.now, since);
            if feeds == 1 {
                (format!("{loading}{source} {what} since {age}"), "ui.stale")
            } else {
                (format!("{loading}{what} since {age} ({feeds} feeds; :events)"), "ui.stale")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_ignores_case_and_inverts_with_a_bang() {
        let f = Filter::new("WhiSper");
        assert!(f.found_in("inference-prod/whisper-large-0"));
        assert!(f.found_in("WHISPER"));
        assert!(!f.found_in("whispe"));
        let f = Filter::new("größe");
        assert!(f.found_in("GRÖßE"), "a non-ASCII needle lower-cases the cell");
        // On the demo fleet: the kept rows and the inverted filter's rows partition the view.
        let fleet = crate::testing::demo_fleet(42, 48, 3, Default::default()).1;
        let all = rows(&fleet, ViewKind::Pods, "", None, false).len();
        let kept = rows(&fleet, ViewKind::Pods, "WHISPER", None, false).len();
        let rest = rows(&fleet, ViewKind::Pods, "!whisper", None, false).len();
        assert!(kept > 0 && rest > 0, "{kept} {rest}");
        assert_eq!(kept + rest, all);
    }

    /// A filter typed letter by letter narrows the rows it kept; each step must equal the
    /// filter applied to the whole view, order included.
    #[test]
    fn a_filter_typed_further_narrows_the_rows_it_kept_to_what_the_whole_view_gives() {
        let fleet = crate::testing::demo_fleet(42, 48, 3, Default::default()).1;
        assert!(narrows("", "w") && narrows("wh", "WHI") && narrows("isp", "whisper"));
        assert!(!narrows("whi", "wh"), "shorter: more rows");
        assert!(!narrows("wh", "!whi") && !narrows("!wh", "!whi"), "inverted");
        assert!(!narrows("h1", "h2") && !narrows("gr", "größe"), "not held; not ASCII");
        let mut steps = 0;
        for v in ViewKind::ALL {
            for (sort, descending) in [(None, false), (columns(v).get(1).map(|c| c.name), true)] {
                for word in ["h100-00", "running", "eval", "gpu"] {
                    let mut kept = rows(&fleet, v, "", sort, descending);
                    for end in 1..=word.len() {
                        let typed = &word[..end];
                        kept = narrow(&fleet, v, &kept, typed);
                        assert_eq!(kept, rows(&fleet, v, typed, sort, descending), "{v:?} {sort:?} {typed}");
                        steps += 1;
                    }
                }
            }
        }
        assert!(steps > 100, "{steps}");
        // The GPUs view keeps a GPU's MIG instances under it.
        let gpus = rows(&fleet, ViewKind::Gpus, "", None, false);
        let mig = narrow(&fleet, ViewKind::Gpus, &gpus, "h200");
        assert!(mig.iter().any(|r| matches!(r, RowId::Mig(..))), "MIG rows follow their GPU");
    }

    /// Rows mapped on several threads come back as one thread maps them: in order, the
    /// rows each leaves out left out, however the rows divide among the threads.
    #[test]
    fn rows_mapped_on_several_threads_come_back_in_order() {
        let fleet = crate::testing::demo_fleet(42, 48, 3, Default::default()).1;
        for v in [ViewKind::Gpus, ViewKind::Pods, ViewKind::Fleet] {
            let all = ids(&fleet, v);
            let filter = Filter::new("h1");
            let col = &columns(v)[1];
            let each = |id| filter.keeps(&fleet, v, id).then(|| ((col.value)(&fleet, id).sort_key(), id));
            let one = map_rows_on(&all, each, 1);
            assert!(!one.is_empty() && one.len() < all.len(), "{v:?}: the filter keeps some rows");
            for threads in [2, 3, 7, all.len() + 5] {
                assert_eq!(map_rows_on(&all, each, threads), one, "{v:?} on {threads} threads");
            }
        }
        assert!(map_rows_on(&[], Some, 4).is_empty());
    }

    /// Ranking runs of one key gives the order one sort of (key, row) gives.
    #[test]
    fn rows_sorted_by_runs_of_one_key_come_in_the_order_of_key_then_row() {
        use std::borrow::Cow;
        let names = ["h200-0001", "a100-0003", "h100-0000", "a100-0003", "h100-0000"];
        let mut keyed: Vec<(SortKey, RowId)> = Vec::new();
        for (n, name) in names.iter().enumerate() {
            // Eight GPUs a node, held together; the last two nodes repeat earlier names.
            for g in 0..8 {
                keyed.push((SortKey::Text(Cow::Borrowed(name)), RowId::Gpu(GpuId(((4 - n) * 8 + g) as u32))));
            }
        }
        keyed.push((SortKey::Num(7), RowId::Gpu(GpuId(99))));
        let mut plain = keyed.clone();
        plain.sort_unstable();
        let want: Vec<RowId> = plain.into_iter().map(|(_, id)| id).collect();
        assert_eq!(sort_keyed(keyed.clone()), want);
        // Few repeats take the plain sort; the same order.
        let few: Vec<(SortKey, RowId)> = keyed.iter().step_by(8).cloned().collect();
        let mut plain = few.clone();
        plain.sort_unstable();
        assert_eq!(sort_keyed(few), plain.into_iter().map(|(_, id)| id).collect::<Vec<_>>());
    }

    /// The filter reads a cell's text without drawing it; it must read what is drawn.
    #[test]
    fn the_filter_reads_what_every_filterable_cell_draws() {
        let fleet = crate::testing::demo_fleet(42, 48, 3, Default::default()).1;
        let mut checked = 0;
        for v in ViewKind::ALL {
            for id in ids(&fleet, v) {
                for row in std::iter::once(id).chain(children(&fleet, id)) {
                    for c in columns(v).iter().filter(|c| c.filter) {
                        assert_eq!(c.filter_text(&fleet, row), c.cell_of(&fleet, row).0, "{v:?} {} {row:?}", c.name);
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 5_000, "{checked} cells");
        // A row no longer there reads as its blank cell.
        for v in ViewKind::ALL {
            for c in columns(v).iter().filter(|c| c.filter) {
                let gone = RowId::Pod(PodId(u32::MAX));
                assert_eq!(c.filter_text(&fleet, gone), c.cell_of(&fleet, gone).0, "{v:?} {}", c.name);
            }
        }
    }
}
