//! Wiring for the commands that run on a real cluster: the cockpit on a kube context (the
//! feed is `feed::kube`, operations go to `ops::serve_ops`, which runs them with `ops::kube`) and
//! `fabrik snapshot` against it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use crate::cli::{SnapshotArgs, ViewArg};
use crate::cluster;
use crate::demo::{Setup, config_warnings_into, view_kind};
use crate::feed::kube::KubeFeedConfig;
use crate::model::{Delta, Fleet, Thresholds};
use crate::ops::audit::Audit;
use crate::ops::exec::ExecOptions;
use crate::ops::{Executor, KubeExecutor, Refuse, serve_ops};
use crate::ui::export;
use crate::ui::run::Exit;
use crate::ui::views::clusters::ClusterRow;
use crate::ui::{App, Ui};

/// How long a stopping cockpit waits for running operations to record where they were
/// interrupted (one fsync'd line each) before it exits anyway.
const HALT_WAIT: Duration = Duration::from_secs(5);

/// Where GPU telemetry comes from on a cluster.
#[derive(Clone, Debug, Default)]
pub struct Telemetry {
    /// `--agent URL`: agents read directly.
    pub agents: Vec<String>,
    /// Agent DaemonSet pods, through the pod proxy, for the nodes on screen ("" = off).
    pub agent_selector: String,
    /// The namespace those pods must be in (`--agent-namespace`).
    pub agent_namespace: String,
    /// `--prometheus URL` and how often to query it.
    pub prometheus: Option<(String, Duration)>,
}

/// Which clusters the cockpit watches: `--context` (repeatable; none: the current context)
/// or `--all-contexts`.
#[derive(Clone, Debug, Default)]
pub struct Contexts {
    pub names: Vec<String>,
    pub all: bool,
    /// `--workload-clusters`: also each Cluster API workload cluster they manage.
    pub workloads: bool,
}

impl Contexts {
    /// The contexts to open, in order (the first is on screen); `None`: the current one.
    fn resolve(&self, kubeconfig: Option<&std::path::Path>) -> Result<Vec<Option<String>>, cluster::ConnectError> {
        if self.all {
            return Ok(cluster::all_contexts(kubeconfig)?.into_iter().map(Some).collect());
        }
        if self.names.is_empty() {
            return Ok(vec![None]);
        }
        let mut seen = std::collections::BTreeSet::new();
        Ok(self.names.iter().filter(|n| seen.insert(n.as_str())).cloned().map(Some).collect())
    }
}

/// Every cluster to open, by row name, and those that could not be: the contexts asked
/// for and, with `--workload-clusters`, after each the workload clusters it manages, named
/// `CONTEXT:NAMESPACE/NAME` (their kubeconfigs kept in `dir` while this lives).
struct Opened {
    conns: Vec<(String, cluster::Connection)>,
    failed: Vec<(String, String)>,
    /// With `--workload-clusters`: each management cluster, to list its Clusters again.
    managers: Vec<(String, kube::Client)>,
    _dir: Option<cluster::workloads::KubeconfigDir>,
}

/// How long a management cluster may take to list its Cluster API Clusters.
const DISCOVER_WAIT: Duration = Duration::from_secs(15);

/// Opens every cluster of `which`. With one context and nothing else, its error is returned
/// (the cockpit and the snapshot exit 2 with it); otherwise a context that cannot be opened
/// is a failed row.
async fn open_all(kubeconfig: Option<&std::path::Path>, which: &Contexts) -> Result<Opened, String> {
    let names = which.resolve(kubeconfig).map_err(|e| e.to_string())?;
    let alone = names.len() == 1 && !which.workloads;
    let dir = if which.workloads {
        Some(
            cluster::workloads::KubeconfigDir::create()
                .map_err(|e| format!("cannot keep workload kubeconfigs: {e}"))?,
        )
    } else {
        None
    };
    let mut opened = Opened { conns: Vec::new(), failed: Vec::new(), managers: Vec::new(), _dir: None };
    for name in &names {
        let conn = match cluster::connect(kubeconfig, name.as_deref()).await {
            Ok(c) => c,
            Err(e) if alone => return Err(e.to_string()),
            Err(e) => {
                opened.failed.push((name.clone().unwrap_or_else(|| "(current context)".into()), e.to_string()));
                continue;
            }
        };
        let mgmt = conn.context.clone();
        let found = match &dir {
            Some(_) => Some(tokio::time::timeout(DISCOVER_WAIT, cluster::workloads::discover(&conn.client)).await),
            None => None,
        };
        if dir.is_some() {
            opened.managers.push((mgmt.clone(), conn.client.clone()));
        }
        opened.conns.push((mgmt.clone(), conn));
        let (Some(found), Some(dir)) = (found, &dir) else { continue };
        let workloads = match found {
            Ok(Ok(w)) => w,
            Ok(Err(e)) => {
                opened.failed.push((format!("{mgmt}:*"), e));
                continue;
            }
            Err(_) => {
                let why = format!("its Cluster API Clusters were not listed within {}s", DISCOVER_WAIT.as_secs());
                opened.failed.push((format!("{mgmt}:*"), why));
                continue;
            }
        };
        for w in workloads {
            match dir.open(&mgmt, &w).await {
                (row, Ok(c)) => opened.conns.push((row, c)),
                (row, Err(why)) => opened.failed.push((row, why)),
            }
        }
    }
    opened._dir = dir;
    Ok(opened)
}

/// The tasks of every cluster, by its row name, to stop one whose Cluster went away, and all
/// of them (waiting for the operations servers) at the cockpit's end.
#[derive(Clone, Default)]
struct Later(std::sync::Arc<std::sync::Mutex<(Named, Tasks)>>);

type Tasks = Vec<tokio::task::JoinHandle<()>>;

/// Tasks by the row name of the cluster they serve.
type Named = Vec<(String, tokio::task::JoinHandle<()>)>;

impl Later {
    fn keep(&self, name: &str, s: &mut Started) {
        if let Ok(mut l) = self.0.lock() {
            l.0.extend(s.tasks.drain(..).map(|t| (name.to_string(), t)));
            l.1.extend(s.ops_task.take());
        }
    }

    /// Stops cluster `name`'s feed and readers (its operations server ends with its executor).
    fn stop(&self, name: &str) {
        if let Ok(mut l) = self.0.lock() {
            l.0.retain(|(n, t)| {
                if n == name {
                    t.abort();
                }
                n != name
            });
        }
    }

    /// Every task kept so far, and the operations servers among them.
    fn take(&self) -> (Tasks, Tasks) {
        let (tasks, ops) = self.0.lock().map(|mut l| std::mem::take(&mut *l)).unwrap_or_default();
        (tasks.into_iter().map(|(_, t)| t).collect(), ops)
    }
}

/// With `--workload-clusters`: each management cluster's Clusters listed again while the
/// cockpit runs ([`cluster::workloads::follow`]); what they find reaches the cockpit as rows,
/// each started (as the first ones were) when the cockpit gives it its index. Returns the
/// cockpit's end of that and the tasks to stop.
fn follow_workloads(
    managers: Vec<(String, kube::Client)>,
    dir: Option<cluster::workloads::KubeconfigDir>,
    rows: std::collections::BTreeSet<String>,
    failed: &[(String, String)],
    shared: Shared,
    later: &Later,
) -> (Option<mpsc::Receiver<crate::ui::FoundCluster>>, Tasks) {
    let Some(dir) = dir.filter(|_| !managers.is_empty()) else { return (None, Vec::new()) };
    let dir = std::sync::Arc::new(dir);
    let (ftx, mut frx) = mpsc::channel::<cluster::workloads::Found>(16);
    let (utx, urx) = mpsc::channel::<crate::ui::FoundCluster>(16);
    let told: std::collections::BTreeMap<String, String> = failed.iter().cloned().collect();
    let mut tasks: Vec<_> = managers
        .into_iter()
        .map(|(mgmt, client)| {
            let mine = |n: &String| n.starts_with(&format!("{mgmt}:"));
            let opened = rows.iter().filter(|n| mine(n)).cloned().collect();
            let told = told.iter().filter(|(n, _)| mine(n)).map(|(n, w)| (n.clone(), w.clone())).collect();
            tokio::spawn(cluster::workloads::follow(client, mgmt.clone(), dir.clone(), opened, told, ftx.clone()))
        })
        .collect();
    let later = later.clone();
    tasks.push(tokio::spawn(async move {
        while let Some(f) = frx.recv().await {
            let told = match f {
                cluster::workloads::Found::Open(row, result) => {
                    let found = result.map(|conn| {
                        let (sh, later, name) = (shared.clone(), later.clone(), row.clone());
                        Box::new(move |i: usize| {
                            let keep = name.clone();
                            let mut s = start_cluster(i, name, conn, false, &sh);
                            later.keep(&keep, &mut s);
                            s.parts
                        }) as crate::ui::Starter
                    });
                    crate::ui::FoundCluster::Found(row, found)
                }
                cluster::workloads::Found::Gone(row, why) => {
                    later.stop(&row);
                    crate::ui::FoundCluster::Gone(row, why)
                }
            };
            if utx.send(told).await.is_err() {
                return;
            }
        }
    }));
    (Some(urx), tasks)
}

/// One cluster's running parts: what the app gets, and the tasks to stop at the end.
struct Started {
    parts: crate::ui::ClusterParts,
    contexts: Vec<String>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    ops_task: Option<tokio::task::JoinHandle<()>>,
}

/// What every cluster of one cockpit shares (owned, so that a workload cluster found while
/// the cockpit runs starts the same way as the first ones).
#[derive(Clone)]
struct Shared {
    feed: KubeFeedConfig,
    thresholds: Thresholds,
    mig_stuck: Duration,
    telemetry: std::sync::Arc<Telemetry>,
    readonly: bool,
    /// Tells every operations server why the cockpit stopped.
    halt_rx: watch::Receiver<Option<String>>,
    /// The cockpit's one stream of tagged batches.
    to: mpsc::Sender<crate::ui::run::Tagged>,
}

/// Starts cluster `i`'s feed, operations, `y` and `L` readers; its batches go to the
/// cockpit tagged `i`. `direct`: this cluster also takes `--agent` and `--prometheus` (the
/// first one).
fn start_cluster(i: usize, name: String, conn: cluster::Connection, direct: bool, sh: &Shared) -> Started {
    let telemetry = &*sh.telemetry;
    let (tx, rx) = mpsc::channel(256);
    let mut tasks = vec![
        crate::ui::run::forward(i, rx, sh.to.clone()),
        tokio::spawn(crate::feed::kube::run(conn.client.clone(), sh.feed.clone(), tx.clone())),
    ];
    if direct {
        for a in &telemetry.agents {
            tasks.push(tokio::spawn(crate::feed::agent_stream::run(a.clone(), Duration::from_secs(1), tx.clone())));
        }
        if let Some((url, every)) = &telemetry.prometheus {
            tasks.push(tokio::spawn(crate::feed::prometheus::run(url.clone(), *every, tx.clone())));
        }
    }
    // Agent pods stream through the pod proxy for the nodes on screen.
    let (view_tx, view_rx) = watch::channel(std::collections::BTreeSet::new());
    if !telemetry.agent_selector.trim().is_empty() {
        tasks.push(tokio::spawn(crate::feed::agent_discovery::run(
            conn.client.clone(),
            telemetry.agent_namespace.clone(),
            telemetry.agent_selector.clone(),
            Duration::from_secs(1),
            view_rx,
            tx.clone(),
        )));
    }
    let mut ops_task = None;
    let exec: Box<dyn Executor> = if sh.readonly {
        Box::new(Refuse)
    } else {
        let (etx, erx) = mpsc::unbounded_channel();
        let audit = crate::config::Paths::discover().data_dir.map(|d| Audit::new(&d, &name));
        let opts = ExecOptions { mig_stuck: sh.mig_stuck, ..Default::default() };
        ops_task = Some(tokio::spawn(serve_ops(conn.client.clone(), audit, opts, tx.clone(), erx, sh.halt_rx.clone())));
        Box::new(KubeExecutor(etx))
    };
    // `y`: one object read on request, answered into the same delta stream.
    let (itx, mut irx) = mpsc::unbounded_channel::<(u64, crate::model::InspectTarget)>();
    let (client, answers) = (conn.client.clone(), tx.clone());
    let flags = conn.kubectl_flags();
    tasks.push(tokio::spawn(async move {
        // Each request on its own: a slow `:kubectl` does not hold up the next `y` (answers
        // are numbered; the cockpit shows only the last request's).
        while let Some((request, target)) = irx.recv().await {
            let (client, answers, flags) = (client.clone(), answers.clone(), flags.clone());
            tokio::spawn(async move {
                let result = if target.is_kubectl() {
                    cluster::inspect::kubectl(&flags, &target.name).await
                } else {
                    cluster::inspect::inspect(&client, &target).await
                };
                let answer = crate::model::Inspected { request, target, at: crate::now_ms(), result };
                let _ = answers.send(vec![Delta::Inspected(Box::new(answer))]).await;
            });
        }
    }));
    // `L`: one log streamed at a time; a new request (or `None`, the pane closed) ends
    // the one before.
    let (ltx, mut lrx) = mpsc::unbounded_channel::<Option<crate::model::LogRequest>>();
    let (client, answers) = (conn.client.clone(), tx.clone());
    tasks.push(tokio::spawn(async move {
        // Dropped (a new request, the pane closed, this task aborted): the stream stops.
        let mut _current: Option<AbortOnDrop> = None;
        while let Some(ask) = lrx.recv().await {
            _current = None;
            let Some(req) = ask else { continue };
            let (client, answers) = (client.clone(), answers.clone());
            _current = Some(AbortOnDrop(tokio::spawn(async move {
                let (etx, mut erx) = mpsc::channel(4);
                let request = req.id;
                let forward = async move {
                    while let Some(event) = erx.recv().await {
                        if answers.send(vec![Delta::Log { request, event }]).await.is_err() {
                            return;
                        }
                    }
                };
                futures::future::join(cluster::logs::stream(client, req, etx), forward).await;
            })));
        }
    }));
    let parts = crate::ui::ClusterParts {
        source: format!("ctx {name}"),
        name,
        fleet: Fleet::new(sh.thresholds),
        exec,
        kubectl: conn.kubectl_flags(),
        view_nodes: Some(Box::new(move |nodes| {
            let _ = view_tx.send(nodes.clone());
        })),
        inspector: Some(Box::new(move |request, t| {
            let _ = itx.send((request, t.clone()));
        })),
        logger: Some(Box::new(move |r| {
            let _ = ltx.send(r.cloned());
        })),
    };
    Started { parts, contexts: conn.contexts, tasks, ops_task }
}

pub async fn run_cockpit(
    ui_args: &crate::cli::UiArgs,
    kubeconfig: Option<PathBuf>,
    mut which: Contexts,
    telemetry: &Telemetry,
) -> color_eyre::Result<ExitCode> {
    loop {
        let opened = match open_all(kubeconfig.as_deref(), &which).await {
            Ok(o) => o,
            Err(e) => {
                eprintln!("fabrik: {e}");
                return Ok(ExitCode::from(2));
            }
        };
        let Opened { conns, failed, managers, _dir } = opened;
        if conns.is_empty() {
            for (name, e) in &failed {
                eprintln!("fabrik: {name}: {e}");
            }
            if failed.is_empty() {
                eprintln!("fabrik: no cluster to open");
            }
            return Ok(ExitCode::from(2));
        }
        let setup = Setup::load(ui_args);
        let (to, rx) = mpsc::channel(256);
        let (halt_tx, halt_rx) = watch::channel(None);
        let shared = Shared {
            feed: feed_config(&setup),
            thresholds: setup.thresholds(),
            mig_stuck: Duration::from_secs(setup.config.mig_stuck_secs),
            telemetry: std::sync::Arc::new(telemetry.clone()),
            readonly: ui_args.readonly,
            halt_rx,
            to,
        };
        let rows: std::collections::BTreeSet<String> = conns.iter().map(|(n, _)| n.clone()).collect();
        let mut started: Vec<Started> =
            conns.into_iter().enumerate().map(|(i, (name, c))| start_cluster(i, name, c, i == 0, &shared)).collect();
        let later = Later::default();
        let (found, follow_tasks) = follow_workloads(managers, _dir, rows, &failed, shared, &later);
        let mut tasks = follow_tasks;
        let mut ops_tasks = Vec::new();
        let mut parts = Vec::new();
        for s in &mut started {
            let name = s.parts.name.clone();
            later.keep(&name, s);
        }
        let contexts = started.first().map(|s| s.contexts.clone()).unwrap_or_default();
        for s in started {
            parts.push(s.parts);
        }
        let mut parts = parts.into_iter();
        let Some(first) = parts.next() else { return Ok(ExitCode::from(2)) };
        let mut ui = Ui::new(first.source.clone());
        ui.session.readonly = ui_args.readonly;
        ui.session.contexts = contexts;
        ui.session.kubectl = first.kubectl.clone();
        ui.session.theme_name = setup.theme.name.clone();
        ui.session.keymap_name = setup.keymap.name.clone();
        let mut fleet = first.fleet;
        config_warnings_into(&setup, &mut fleet, &mut ui);
        let fps = setup.config.fps;
        let mut app = App::new(fleet, ui, setup.theme, setup.keymap, first.exec);
        app.name_cluster(&first.name);
        if let Some(tell) = first.view_nodes {
            app.on_view_nodes(tell);
        }
        if let Some(ask) = first.inspector {
            app.on_inspect(ask);
        }
        if let Some(ask) = first.logger {
            app.on_logs(ask);
        }
        for p in parts {
            app.add_cluster(p);
        }
        for (name, why) in &failed {
            app.add_failed_cluster(name, why);
        }
        // `run` consumes the app, so its executors are gone when it returns: serve_ops stops
        // taking requests and waits for the operations that `halt` interrupts.
        let exit = crate::ui::run::run(app, rx, found, fps).await;
        let (more_tasks, more_ops) = later.take();
        tasks.extend(more_tasks);
        ops_tasks.extend(more_ops);
        let why = match &exit {
            Ok(e) => e.reason(),
            Err(e) => format!("the cockpit failed: {e}"),
        };
        let _ = halt_tx.send(Some(why));
        if tokio::time::timeout(HALT_WAIT, futures::future::join_all(ops_tasks)).await.is_err() {
            say(&format!(
                "running operations did not record their interruption within {}s; `fabrik audit` shows them INTERRUPTED",
                HALT_WAIT.as_secs()
            ));
        }
        for t in tasks {
            t.abort();
        }
        match exit? {
            Exit::Switch(next) => which = Contexts { names: vec![next], ..Contexts::default() },
            Exit::Quit => return Ok(ExitCode::SUCCESS),
            Exit::Signal(s) => {
                say(&format!("stopped by {s}"));
                // The shell convention for death by signal: 128 + its number.
                let n = match s {
                    "SIGHUP" => 1,
                    "SIGINT" => 2,
                    _ => 15,
                };
                return Ok(ExitCode::from(128 + n));
            }
            Exit::TerminalLost(why) => {
                say(&format!("the terminal went away ({why})"));
                return Ok(ExitCode::from(1));
            }
        }
    }
}

/// One line on stderr that never panics: after a hang-up stderr may be a dead terminal.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "fabrik: {line}");
}

fn feed_config(setup: &Setup) -> KubeFeedConfig {
    KubeFeedConfig { tenant_label: setup.config.tenant_label.clone(), initial_list: setup.config.initial_list }
}

/// Lists the cluster into a fleet (every kind synced, or `timeout`), then prints one view;
/// `--view clusters` (or several contexts) lists each cluster and prints one row for each.
pub async fn snapshot(args: &SnapshotArgs, timeout: Duration) -> color_eyre::Result<ExitCode> {
    let several = args.cluster.several();
    if args.view == ViewArg::Clusters || several {
        if args.bundle.is_some() {
            eprintln!("fabrik snapshot: --bundle covers one cluster: give one --context and no --view clusters");
            return Ok(ExitCode::from(2));
        }
        if several && args.view != ViewArg::Clusters {
            eprintln!(
                "fabrik snapshot: --view {} shows one cluster; with several contexts (or --all-contexts) use --view clusters",
                view_kind(args.view).map_or("clusters", |v| v.name())
            );
            return Ok(ExitCode::from(2));
        }
        return snapshot_clusters(args, timeout).await;
    }
    let (kubeconfig, context) = (args.cluster.kubeconfig.clone(), args.cluster.context());
    let conn = match cluster::connect(kubeconfig.as_deref(), context.as_deref()).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fabrik snapshot: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let setup = Setup::load(&crate::cli::UiArgs::default());
    let fleet = match load_fleet(conn.client.clone(), feed_config(&setup), setup.thresholds(), timeout).await {
        Ok(f) => f,
        Err(msg) => {
            eprintln!("fabrik snapshot: {msg}");
            return Ok(ExitCode::from(1));
        }
    };
    if let Some(file) = &args.bundle {
        // A node's bundle on a cluster also holds the Node object and its events, as `y` shows.
        let extra = match args.node.as_deref().filter(|n| fleet.node_by_name(n).is_some()) {
            Some(node) => {
                let (_, text) = described(&conn.client, crate::model::InspectTarget::new("Node", None, node)).await;
                format!("\n## Node object\n\n```yaml\n{}```\n", text.replace("```", "'''"))
            }
            None => String::new(),
        };
        return Ok(crate::demo::write_bundle(&fleet, args, file, &conn.context, &extra));
    }
    let Some(view) = view_kind(args.view) else { return Ok(ExitCode::from(2)) };
    let out = export::rows(&fleet, view, &args.filter, args.format.into());
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    Ok(ExitCode::SUCCESS)
}

/// `fabrik snapshot --view clusters`: every cluster listed at once, one row each; exit 1 when
/// one of them could not be opened or listed (its row says why), 2 on bad input.
async fn snapshot_clusters(args: &SnapshotArgs, timeout: Duration) -> color_eyre::Result<ExitCode> {
    let kubeconfig = args.cluster.kubeconfig.clone();
    let which = Contexts {
        names: args.cluster.contexts.clone(),
        all: args.cluster.all_contexts,
        workloads: args.cluster.workload_clusters,
    };
    let opened = match open_all(kubeconfig.as_deref(), &which).await {
        Ok(o) => o,
        Err(e) => {
            eprintln!("fabrik snapshot: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let setup = Setup::load(&crate::cli::UiArgs::default());
    let listed = opened.conns.iter().map(|(name, conn)| {
        let setup = &setup;
        async move {
            match load_fleet(conn.client.clone(), feed_config(setup), setup.thresholds(), timeout).await {
                Ok(f) => ClusterRow::of(name, &f),
                Err(msg) => ClusterRow::failed(name, &msg),
            }
        }
    });
    let mut rows = futures::future::join_all(listed).await;
    rows.extend(opened.failed.iter().map(|(name, why)| ClusterRow::failed(name, why)));
    let out = export::clusters(&rows, 0, crate::now_ms(), &args.filter, args.format.into());
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    Ok(if rows.iter().any(|r| r.failed) { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// `fabrik describe KIND NAME [-n NS]`: the inspect pane's text, once. Exit 1 when the API
/// server has no such object (or refuses it), 2 on bad input.
pub async fn describe(args: &crate::cli::DescribeArgs) -> color_eyre::Result<ExitCode> {
    let kind = match cluster::inspect::kind_of(&args.kind) {
        Ok(k) => k.kind,
        Err(e) => {
            eprintln!("fabrik describe: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let conn = match cluster::connect(args.cluster.kubeconfig.as_deref(), args.cluster.context().as_deref()).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fabrik describe: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let target = crate::model::InspectTarget::new(kind, args.namespace.as_deref(), &args.name);
    match described(&conn.client, target).await {
        (true, text) => {
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
            Ok(ExitCode::SUCCESS)
        }
        (false, text) => {
            eprint!("fabrik describe: {}", text.trim_start_matches("# "));
            Ok(ExitCode::from(1))
        }
    }
}

/// `fabrik logs POD`: the log the pane's `L` streams, printed as it arrives. Exit 1 when the
/// API server refuses it (no such pod or container, no previous run), 2 on bad input.
pub async fn logs(args: &crate::cli::LogsArgs) -> color_eyre::Result<ExitCode> {
    let conn = match cluster::connect(args.cluster.kubeconfig.as_deref(), args.cluster.context().as_deref()).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fabrik logs: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let req = crate::model::LogRequest {
        container: args.container.clone(),
        previous: args.previous,
        follow: args.follow,
        timestamps: args.timestamps,
        tail: args.tail.map(|n| n as usize),
        ..crate::model::LogRequest::new(1, &args.namespace, &args.pod)
    };
    let (tx, mut rx) = mpsc::channel(4);
    let reader = tokio::spawn(cluster::logs::stream(conn.client.clone(), req, tx));
    let mut code = ExitCode::SUCCESS;
    while let Some(event) = rx.recv().await {
        match event {
            crate::model::LogEvent::Lines(lines) => {
                let text: String = lines.into_iter().map(|l| l + "\n").collect();
                if std::io::stdout().lock().write_all(text.as_bytes()).is_err() {
                    break; // stdout closed (`| head`)
                }
            }
            crate::model::LogEvent::Ended(Some(e)) => {
                eprintln!("fabrik logs: {e}");
                code = ExitCode::from(1);
            }
            _ => {}
        }
    }
    reader.abort();
    Ok(code)
}

/// One object read now, as the inspect pane's text (one line per line, each ended); whether
/// it was read.
async fn described(client: &kube::Client, target: crate::model::InspectTarget) -> (bool, String) {
    let result = cluster::inspect::inspect(client, &target).await;
    let ok = result.is_ok();
    let answer = crate::model::Inspected { request: 0, target, at: crate::now_ms(), result };
    let text: String = crate::ui::views::inspect::lines(&answer).into_iter().map(|l| l + "\n").collect();
    (ok, text)
}

/// Runs the feed into a fresh fleet until the initial listing is complete. The error names
/// what was still missing and the feed's last complaints.
pub async fn load_fleet(
    client: kube::Client,
    cfg: KubeFeedConfig,
    thresholds: Thresholds,
    timeout: Duration,
) -> Result<Fleet, String> {
    let (tx, mut rx) = mpsc::channel(256);
    let feed = tokio::spawn(crate::feed::kube::run(client, cfg, tx));
    let mut fleet = Fleet::new(thresholds);
    let deadline = Instant::now() + timeout;
    let mut complaints: Vec<String> = Vec::new();
    let result = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(batch)) => {
                for d in batch {
                    if let Delta::Event(e) = &d
                        && e.reason == "FeedError"
                    {
                        complaints.push(e.message.clone());
                    }
                    fleet.apply(d);
                }
                if fleet.synced {
                    break Ok(());
                }
            }
            Ok(None) => break Err("the feed stopped before the cluster was listed".to_string()),
            Err(_) => {
                break Err(format!(
                    "the cluster was not listed within {}s{}",
                    timeout.as_secs(),
                    if complaints.is_empty() { String::new() } else { format!(": {}", complaints.join("; ")) }
                ));
            }
        }
    };
    feed.abort();
    result.map(|_| fleet)
}

/// A task that stops when its handle is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
