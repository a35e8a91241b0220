//! Many clusters in one cockpit (`fabrik --context a --context b`, `--all-contexts`). Each
//! cluster keeps its own fleet, executor, API hooks and navigation: the one on screen lives
//! in `App`'s own fields, the others are parked in `App::clusters` and keep applying their
//! deltas. Opening another cluster swaps the two: no reconnect, no re-list, and coming back
//! finds the view, filter and selection as they were left.

use std::collections::BTreeSet;

use super::inspect::InspectFn;
use super::logs::LogsFn;
use super::{App, Executor, ViewNodes};
use crate::model::{Batch, Delta, FeedState, Fleet};
use crate::ui::state::{Navigation, OpBook, RowCache, Screen};
use crate::ui::views::clusters::ClusterRow;

/// What the runner hands over for each further cluster (see [`App::add_cluster`]).
pub struct ClusterParts {
    /// The kube context (the row's name).
    pub name: String,
    /// What the header says it is (`ctx NAME`, `demo seed 43 (24 nodes)`).
    pub source: String,
    pub fleet: Fleet,
    pub exec: Box<dyn Executor>,
    /// kubectl's options for this cluster (`--kubeconfig F --context C`).
    pub kubectl: Vec<String>,
    pub view_nodes: Option<ViewNodes>,
    pub inspector: Option<InspectFn>,
    pub logger: Option<LogsFn>,
}

/// Starts a cluster found while the cockpit runs, its batches tagged with the index given
/// (the row it gets), and hands over its parts.
pub type Starter = Box<dyn FnOnce(usize) -> ClusterParts + Send>;

/// What the management clusters say while the cockpit runs (`--workload-clusters`), by row
/// name.
pub enum FoundCluster {
    /// A Cluster listed: its starter, or why it cannot be opened (yet).
    Found(String, Result<Starter, String>),
    /// A Cluster no longer listed (deleted): why its row ends. Its feed is stopped already.
    Gone(String, String),
}

/// One cluster of the cockpit.
pub(super) struct Slot {
    pub name: String,
    /// It could not be opened (its kubeconfig entry): what to fix; or, with `gone`, why it
    /// ended.
    pub failed: Option<String>,
    /// Its Cluster is no longer on its management cluster.
    pub gone: bool,
    /// Its state while another cluster is on screen; `None` while it is the one on screen
    /// (or failed).
    pub parked: Option<Box<Parked>>,
}

/// Everything of a cluster that is not on screen.
pub(super) struct Parked {
    fleet: Fleet,
    exec: Box<dyn Executor>,
    view_nodes: Option<ViewNodes>,
    inspector: Option<InspectFn>,
    logger: Option<LogsFn>,
    nav: Navigation,
    caches: std::collections::HashMap<crate::ui::command::ViewKind, RowCache>,
    ops: OpBook,
    source: String,
    kubectl: Vec<String>,
}

impl Parked {
    /// A cluster handed over, off screen, on a fresh navigation.
    fn of(p: ClusterParts) -> Parked {
        let fresh = crate::ui::state::Ui::new(String::new());
        Parked {
            fleet: p.fleet,
            exec: p.exec,
            view_nodes: p.view_nodes,
            inspector: p.inspector,
            logger: p.logger,
            nav: fresh.nav,
            caches: Default::default(),
            ops: fresh.ops,
            source: p.source,
            kubectl: p.kubectl,
        }
    }
}

impl App {
    /// The first cluster's slot: the one the app is made with (named after its source
    /// until [`App::name_cluster`]).
    pub(super) fn name_cluster_first(&mut self, name: String) {
        self.clusters.push(Slot { name, failed: None, gone: false, parked: None });
        self.refresh_cluster(0);
    }

    /// Names the cluster the app was made with (the first row of the clusters view).
    pub fn name_cluster(&mut self, name: &str) {
        if let Some(s) = self.clusters.get_mut(self.ui.cluster) {
            s.name = name.to_string();
        }
        self.refresh_cluster(self.ui.cluster);
    }

    /// Adds a cluster that waits off screen until opened; its deltas go to
    /// [`App::apply_to`] with the index returned.
    pub fn add_cluster(&mut self, p: ClusterParts) -> usize {
        let name = p.name.clone();
        self.clusters.push(Slot { name, failed: None, gone: false, parked: Some(Box::new(Parked::of(p))) });
        let i = self.clusters.len() - 1;
        self.refresh_cluster(i);
        i
    }

    /// A cluster found while the cockpit runs (`--workload-clusters`): a new row, or a row
    /// that could not be opened and now opens (or has a new reason). A row already open is
    /// left as it is: its starter is dropped, nothing is started. A cluster gone: see
    /// [`App::cluster_gone`].
    pub fn found_cluster(&mut self, found: FoundCluster) {
        let (name, found) = match found {
            FoundCluster::Found(name, found) => (name, found),
            FoundCluster::Gone(name, why) => return self.cluster_gone(&name, why),
        };
        let at = self.cluster_named(&name);
        if at.is_some_and(|i| self.clusters[i].failed.is_none()) {
            return;
        }
        let i = at.unwrap_or_else(|| {
            self.clusters.push(Slot { name: name.clone(), failed: Some(String::new()), gone: false, parked: None });
            self.clusters.len() - 1
        });
        match found {
            Ok(start) => {
                let parts = start(i);
                self.clusters[i].failed = None;
                self.clusters[i].gone = false;
                if i == self.ui.cluster {
                    // Back while its last state is on screen: the new feed replaces it there.
                    self.replace_on_screen(parts);
                    self.ui.info(format!("cluster {name} found again: listing it anew"));
                } else {
                    self.clusters[i].parked = Some(Box::new(Parked::of(parts)));
                    self.ui.info(format!("cluster {name} found: `0` lists it"));
                }
            }
            Err(why) => self.clusters[i].failed = Some(why),
        }
        self.refresh_cluster(i);
    }

    /// A workload cluster whose Cluster was deleted: its row says so and claims no figures,
    /// and what it kept off screen (fleet, executor) is dropped. On screen, its views stay as
    /// last seen, and the message says they are no longer fed.
    fn cluster_gone(&mut self, name: &str, why: String) {
        let Some(i) = self.cluster_named(name) else { return };
        let slot = &mut self.clusters[i];
        slot.parked = None;
        slot.gone = true;
        slot.failed = Some(why.clone());
        if i == self.ui.cluster {
            // The header says it too: its views are no longer fed, since now.
            let now = self.fleet.now;
            let stale = FeedState::Stale { since: now, reason: why.clone() };
            self.apply([Delta::Feed { source: "cluster".into(), state: stale }]);
            self.ui.error(format!("{name}: {why}; what is on screen is its last state, no longer fed"));
        } else {
            self.ui.info(format!("{name}: {why}"));
        }
        self.refresh_cluster(i);
    }

    /// A cluster's new parts in place of the ones on screen (its feed ended): a fresh fleet
    /// and executor under the same navigation; the rows are listed anew.
    fn replace_on_screen(&mut self, p: ClusterParts) {
        self.let_go_of_screen();
        self.fleet = p.fleet;
        self.exec = p.exec;
        self.view_nodes = p.view_nodes;
        self.inspector = p.inspector;
        self.logger = p.logger;
        self.ui.caches.clear();
        self.ui.ops = crate::ui::state::Ui::new(String::new()).ops;
        self.ui.session.source = p.source;
        self.ui.session.kubectl = p.kubectl;
    }

    /// Adds a cluster that could not be opened: its row says why.
    pub fn add_failed_cluster(&mut self, name: &str, why: &str) -> usize {
        self.clusters.push(Slot { name: name.to_string(), failed: Some(why.to_string()), gone: false, parked: None });
        let i = self.clusters.len() - 1;
        self.refresh_cluster(i);
        i
    }

    /// Applies a batch of cluster `i`'s deltas; returns whether a redraw is needed (for a
    /// cluster off screen: only while the clusters view shows its row).
    pub fn apply_to(&mut self, i: usize, batch: Batch) -> bool {
        if i == self.ui.cluster {
            let dirty = self.apply(batch);
            self.refresh_cluster(i);
            return dirty;
        }
        let Some(p) = self.clusters.get_mut(i).and_then(|s| s.parked.as_mut()) else { return false };
        let mut changed = false;
        for d in batch {
            changed |= p.fleet.apply(d);
        }
        self.refresh_cluster(i);
        changed && self.ui.screen() == Screen::Clusters
    }

    /// Cluster `i`'s fleet time.
    pub fn cluster_now(&self, i: usize) -> crate::model::Ts {
        match self.clusters.get(i).and_then(|s| s.parked.as_ref()) {
            Some(p) => p.fleet.now,
            None => self.fleet.now,
        }
    }

    /// Remakes cluster `i`'s row from its fleet.
    fn refresh_cluster(&mut self, i: usize) {
        let Some(s) = self.clusters.get(i) else { return };
        let row = match (&s.failed, &s.parked) {
            (Some(why), _) if s.gone => ClusterRow::gone(&s.name, why),
            (Some(why), _) => ClusterRow::failed(&s.name, why),
            (None, Some(p)) => ClusterRow::of(&s.name, &p.fleet),
            (None, None) => ClusterRow::of(&s.name, &self.fleet),
        };
        if self.ui.clusters.len() != self.clusters.len() {
            self.ui.clusters.resize(self.clusters.len(), row.clone());
        }
        self.ui.clusters[i] = row;
    }

    /// `:clusters`: the clusters view, the one on screen selected.
    pub(super) fn open_clusters(&mut self) {
        self.ui.clusters_sel = self.ui.cluster;
        self.push(Screen::Clusters);
    }

    /// Enter on the clusters view: that cluster in the views, as it was left.
    pub(super) fn open_cluster(&mut self, i: usize) {
        let Some(slot) = self.clusters.get(i) else { return };
        if let Some(why) = &slot.failed {
            return self.ui.error(format!("cannot open {}: {why}", slot.name));
        }
        let name = slot.name.clone();
        if i == self.ui.cluster {
            self.leave_clusters_screen();
            return self.ui.info(format!("{name} is on screen"));
        }
        let Some(mut p) = self.clusters[i].parked.take() else { return };
        self.leave_clusters_screen();
        self.let_go_of_screen();
        std::mem::swap(&mut self.fleet, &mut p.fleet);
        std::mem::swap(&mut self.exec, &mut p.exec);
        std::mem::swap(&mut self.view_nodes, &mut p.view_nodes);
        std::mem::swap(&mut self.inspector, &mut p.inspector);
        std::mem::swap(&mut self.logger, &mut p.logger);
        std::mem::swap(&mut self.ui.nav, &mut p.nav);
        std::mem::swap(&mut self.ui.caches, &mut p.caches);
        std::mem::swap(&mut self.ui.ops, &mut p.ops);
        std::mem::swap(&mut self.ui.session.source, &mut p.source);
        std::mem::swap(&mut self.ui.session.kubectl, &mut p.kubectl);
        let was = self.ui.cluster;
        self.clusters[was].parked = Some(p);
        self.ui.cluster = i;
        self.ui.clusters_sel = i;
        // A quit asked on the other cluster is not carried over.
        self.ui.exit.armed = false;
        self.refresh_cluster(was);
        self.refresh_cluster(i);
        self.ui.info(format!("cluster {name}"));
    }

    /// What is open belongs to the cluster leaving the screen (a dialog, a typed line), and
    /// its agent streams follow the nodes on screen: none now.
    fn let_go_of_screen(&mut self) {
        self.ui.dialog = None;
        self.ui.input = None;
        if let Some(tell) = self.view_nodes.as_mut() {
            tell(&BTreeSet::new());
        }
        self.last_view_nodes = BTreeSet::new();
    }

    /// Takes the clusters view off the stack (it is not part of a cluster's navigation).
    fn leave_clusters_screen(&mut self) {
        self.ui.nav.stack.retain(|s| *s != Screen::Clusters);
        if self.ui.nav.stack.is_empty() {
            self.ui.nav.stack.push(Screen::Table(crate::ui::command::ViewKind::Fleet));
        }
    }

    /// The index of the cluster named `name`, if this cockpit watches it.
    pub(super) fn cluster_named(&self, name: &str) -> Option<usize> {
        self.clusters.iter().position(|s| s.name == name)
    }

    /// Operations started in this cockpit that still run, on every cluster.
    pub(super) fn running_ops(&self) -> usize {
        let running = |ops: &OpBook, f: &Fleet| {
            ops.mine.iter().filter(|id| f.op(**id).is_some_and(|o| !o.state.finished())).count()
        };
        let parked: usize =
            self.clusters.iter().filter_map(|s| s.parked.as_ref()).map(|p| running(&p.ops, &p.fleet)).sum();
        running(&self.ui.ops, &self.fleet) + parked
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    use super::*;
    use crate::model::Thresholds;
    use crate::ops::{ExecRequest, Recorder};
    use crate::sim::{Sim, SimConfig};
    use crate::ui::command::ViewKind;
    use crate::ui::keymap::Keymap;
    use crate::ui::{App, Ui};

    type Log = Arc<Mutex<Vec<ExecRequest>>>;

    fn sim(seed: u64, nodes: usize) -> Sim {
        Sim::new(SimConfig { seed, nodes, tick_ms: 1000, churn: false, sharing_every: 0, dra_alpha: false, teams: 0 })
    }

    fn press(app: &mut App, keys: &str) {
        for ch in keys.chars() {
            let code = if ch == '\n' { KeyCode::Enter } else { KeyCode::Char(ch) };
            app.handle_key(KeyEvent::new(code, KeyModifiers::NONE));
        }
    }

    /// Cluster "a" (12 nodes, on screen) and "b" (30 nodes, fed through `apply_to`).
    fn two() -> (App, Log, Log) {
        let (ra, rb): (Log, Log) = (Arc::default(), Arc::default());
        let mut a = sim(1, 12);
        let mut fa = Fleet::new(Thresholds::default());
        for d in a.initial_deltas() {
            fa.apply(d);
        }
        let keymap = Keymap::builtin("default").expect("the default keymap is builtin");
        let theme = crate::ui::theme::Theme::builtin("dark").expect("dark is builtin");
        let mut app = App::new(fa, Ui::new("ctx a".into()), theme, keymap, Box::new(Recorder(ra.clone())));
        app.resize(160, 40);
        app.name_cluster("a");
        let i = app.add_cluster(ClusterParts {
            name: "b".into(),
            source: "ctx b".into(),
            fleet: Fleet::new(Thresholds::default()),
            exec: Box::new(Recorder(rb.clone())),
            kubectl: vec!["--context".into(), "b".into()],
            view_nodes: None,
            inspector: None,
            logger: None,
        });
        assert_eq!(i, 1);
        let redraw = app.apply_to(i, sim(2, 30).initial_deltas());
        assert!(!redraw, "a parked cluster's deltas do not redraw the fleet view");
        (app, ra, rb)
    }

    #[test]
    fn deltas_go_to_their_own_cluster_and_rows_follow_each_fleet() {
        let (app, _, _) = two();
        assert_eq!(app.fleet.totals.nodes, 12, "cluster b's nodes did not land in a's fleet");
        let rows = &app.ui.clusters;
        assert_eq!(rows.iter().map(|r| (r.name.as_str(), r.nodes)).collect::<Vec<_>>(), [("a", 12), ("b", 30)]);
        assert_eq!(rows[0].gpus, app.fleet.totals.gpus);
        assert_eq!(rows[1].gpus, 30 * 8);
    }

    #[test]
    fn enter_opens_a_cluster_as_it_was_left_and_its_own_executor_runs_its_operations() {
        let (mut app, ra, rb) = two();
        press(&mut app, "2"); // a: the GPUs view
        press(&mut app, "0");
        assert_eq!(app.ui.screen(), Screen::Clusters);
        press(&mut app, "j\n");
        assert_eq!((app.ui.cluster, app.ui.session.source.as_str()), (1, "ctx b"));
        assert_eq!(app.fleet.totals.nodes, 30);
        assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Fleet), "b opens on its fleet view");
        assert_eq!(app.ui.session.kubectl, ["--context", "b"]);
        // An operation on b goes to b's executor.
        press(&mut app, "c");
        let plans = |log: &Log| log.lock().map(|l| l.len()).unwrap_or(0);
        assert!(plans(&rb) > 0, "cordon on b reached b's executor");
        assert_eq!(plans(&ra), 0, "nothing reached a's executor");
        // Back to a: its fleet and the GPUs view it was left on.
        app.handle_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
        press(&mut app, "0");
        assert_eq!(app.ui.clusters_sel, 1, "the clusters view opens on the cluster on screen");
        press(&mut app, "k\n");
        assert_eq!((app.ui.cluster, app.fleet.totals.nodes), (0, 12));
        assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Gpus));
        assert!(!app.ui.nav.stack.contains(&Screen::Clusters), "the clusters view is not part of a cluster's path");
    }

    #[test]
    fn ctx_opens_a_watched_cluster_at_once_and_a_failed_one_says_why() {
        let (mut app, _, _) = two();
        let f = app.add_failed_cluster("c", "context \"c\" is not in /k; it has: a, b");
        assert!(app.ui.clusters[f].failed && app.ui.clusters[f].state.starts_with("failed: context"));
        press(&mut app, ":ctx b\n");
        assert!(!app.ui.exit.quit, "no restart for a cluster already watched");
        assert_eq!(app.ui.cluster, 1);
        press(&mut app, "0G\n");
        assert_eq!(app.ui.cluster, 1, "a failed cluster does not open");
        let msg = app.ui.message.as_ref().map(|m| m.1.clone()).unwrap_or_default();
        assert!(msg.contains("cannot open c: context"), "{msg}");
    }

    #[test]
    fn slash_filters_the_clusters_and_the_selection_follows() {
        let (mut app, _, _) = two();
        app.add_failed_cluster("c-gone", "no such context");
        press(&mut app, "0/");
        press(&mut app, "b");
        assert_eq!(app.ui.clusters_filter, "b", "applied as it is typed");
        assert_eq!(app.ui.clusters_sel, 1, "a (hidden now) gave the selection to b");
        app.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
        let screen = crate::testing::render_app(&mut app, 160, 40);
        let text = crate::ui::export::to_text(&screen);
        assert!(text.contains("Clusters [1/3]") && text.contains("/b"), "{text}");
        assert!(!text.contains("c-gone"), "the filter hides c-gone:\n{text}");
        // Esc clears the filter first; then Enter opens the selected (b).
        app.handle_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
        assert!(app.ui.clusters_filter.is_empty() && app.ui.screen() == Screen::Clusters);
        press(&mut app, "/!a");
        app.handle_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
        assert!(app.ui.clusters_filter.is_empty(), "Esc while typing puts the filter before back");
        press(&mut app, "\n");
        assert_eq!(app.ui.cluster, 1);
    }

    #[test]
    fn s_and_r_sort_the_clusters_and_the_selection_follows_the_order_shown() {
        let (mut app, _, _) = two();
        // By NODES (the third column), most first: b (30) above a (12).
        press(&mut app, "0sssr");
        assert_eq!(app.ui.clusters_sort, Some(crate::ui::views::clusters::Sort { col: 2, descending: true }));
        let said = app.ui.message.as_ref().map(|(_, m)| m.clone()).unwrap_or_default();
        assert_eq!(said, "clusters sorted by NODES descending");
        let order = crate::ui::views::clusters::shown(&app.ui.clusters, "", app.ui.clusters_sort);
        assert_eq!(order, [1, 0]);
        // The top row is b: Enter on it opens b.
        press(&mut app, "g\n");
        assert_eq!(app.ui.cluster, 1);
    }

    /// A starter that records the index it was given and hands over a cluster of `nodes`.
    fn starter(name: &str, nodes: usize, given: Arc<Mutex<Vec<usize>>>) -> Starter {
        let name = name.to_string();
        Box::new(move |i| {
            given.lock().expect("log").push(i);
            let mut fleet = Fleet::new(Thresholds::default());
            for d in sim(7, nodes).initial_deltas() {
                fleet.apply(d);
            }
            ClusterParts {
                source: format!("ctx {name}"),
                name,
                fleet,
                exec: Box::new(Recorder(Log::default())),
                kubectl: Vec::new(),
                view_nodes: None,
                inspector: None,
                logger: None,
            }
        })
    }

    #[test]
    fn clusters_found_later_fill_their_failed_row_or_get_a_new_one_and_an_open_row_stays() {
        let (mut app, _, _) = two();
        app.add_failed_cluster("m:fleet/wl-2", "no Secret fleet/wl-2-kubeconfig yet");
        let given: Arc<Mutex<Vec<usize>>> = Arc::default();
        // A new reason for the failed row: said, nothing started.
        app.found_cluster(FoundCluster::Found("m:fleet/wl-2".into(), Err("cannot read Secret: forbidden".into())));
        assert_eq!(app.ui.clusters[2].state, "failed: cannot read Secret: forbidden");
        // Its Secret appeared: the row opens in place (index 2), with its own fleet.
        app.found_cluster(FoundCluster::Found("m:fleet/wl-2".into(), Ok(starter("m:fleet/wl-2", 5, given.clone()))));
        // A Cluster created later: a new row at the end.
        app.found_cluster(FoundCluster::Found("m:fleet/wl-3".into(), Ok(starter("m:fleet/wl-3", 9, given.clone()))));
        // Found again while open: left as it is, its starter never called.
        app.found_cluster(FoundCluster::Found("b".into(), Ok(starter("b", 1, given.clone()))));
        assert_eq!(*given.lock().expect("log"), [2, 3]);
        let rows: Vec<(&str, u32, bool)> =
            app.ui.clusters.iter().map(|r| (r.name.as_str(), r.nodes, r.failed)).collect();
        assert_eq!(rows, [("a", 12, false), ("b", 30, false), ("m:fleet/wl-2", 5, false), ("m:fleet/wl-3", 9, false)]);
        // Their deltas land in their own fleets, and the new row opens like the others.
        assert!(!app.apply_to(3, sim(8, 12).initial_deltas()));
        assert_eq!(app.ui.clusters[3].nodes, 12, "its 9 nodes listed again and 3 more");
        press(&mut app, "0G\n");
        assert_eq!((app.ui.cluster, app.fleet.totals.nodes), (3, 12));
        // wl-2's Cluster deleted: its row says so and claims no figures; opening it says why.
        let why = "Cluster fleet/wl-2 is no longer on m (deleted)";
        app.found_cluster(FoundCluster::Gone("m:fleet/wl-2".into(), why.into()));
        let r = &app.ui.clusters[2];
        assert_eq!(
            (r.state.as_str(), r.failed, r.nodes),
            ("gone: Cluster fleet/wl-2 is no longer on m (deleted)", true, 0)
        );
        assert!(r.cells().iter().skip(2).all(|c| c == "—"), "{:?}", r.cells());
        press(&mut app, "0gjj\n");
        assert_eq!(app.ui.cluster, 3, "not opened");
        // The one on screen (wl-3) gone: its views stay as last seen, and the message says so.
        app.found_cluster(FoundCluster::Gone("m:fleet/wl-3".into(), "deleted".into()));
        assert!(app.ui.clusters[3].state.starts_with("gone: ") && app.fleet.totals.nodes == 12);
        let (header, _) = crate::ui::views::tables::feed_state(&app.fleet);
        assert_eq!(header, "cluster stale since 0s", "the header no longer says live");
        // Created again while its last state is on screen: the new feed replaces it there.
        app.found_cluster(FoundCluster::Found("m:fleet/wl-3".into(), Ok(starter("m:fleet/wl-3", 3, given.clone()))));
        assert!(app.clusters[3].parked.is_none() && app.clusters[3].failed.is_none());
        let r = &app.ui.clusters[3];
        assert_eq!((app.ui.cluster, app.fleet.totals.nodes, r.nodes), (3, 3, 3), "its 3 nodes, none of the 12");
        assert_eq!((r.state.as_str(), app.ui.session.source.as_str()), ("live", "ctx m:fleet/wl-3"));
        // Created again: it opens in its row again.
        app.found_cluster(FoundCluster::Found("m:fleet/wl-2".into(), Ok(starter("m:fleet/wl-2", 4, given.clone()))));
        assert_eq!((app.ui.clusters[2].state.as_str(), app.ui.clusters[2].nodes), ("live", 4));
    }
}
