//! Wiring for the commands that run on a real cluster: the cockpit on a kube context (the
//! feed is `feed::kube`, operations go to `ops::kube` after the access review) and
//! `fabrik snapshot` against it.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use crate::cli::SnapshotArgs;
use crate::cluster;
use crate::feed::kube::KubeFeedConfig;
use crate::model::{AccessSpec, Delta, EventSpec, Fleet, Severity, Thresholds};
use crate::ops::access;
use crate::ops::audit::{Audit, Phase};
use crate::ops::kube::{ExecOptions, KubeExec};
use crate::snapshot::{Setup, config_warnings_into, render_rows, view_kind};
use crate::ui::run::Exit;
use crate::ui::{App, ExecRequest, Executor, Ui};

/// Hands requests to [`serve_ops`] without blocking the cockpit.
struct KubeExecutor(mpsc::UnboundedSender<ExecRequest>);

impl Executor for KubeExecutor {
    fn send(&mut self, req: ExecRequest) {
        // A stopped executor shows as an operation that never starts.
        let _ = self.0.send(req);
    }
}

/// Read-only mode: the app refuses every operation before it gets here, and nothing it
/// might still send (a preview) reaches the cluster or the audit log.
struct Refuse;

impl Executor for Refuse {
    fn send(&mut self, _req: ExecRequest) {}
}

/// The cluster side of operations: asks the API server what this identity may do (the
/// answer goes to the cockpit as `Delta::Access`), then runs each confirmed plan on a task
/// of its own, audited, with a cancel switch. Previews are audited as `planned`.
pub async fn serve_ops(
    client: kube::Client,
    audit: Option<Audit>,
    opts: ExecOptions,
    out: mpsc::Sender<Vec<Delta>>,
    mut rx: mpsc::UnboundedReceiver<ExecRequest>,
    halt: watch::Receiver<Option<String>>,
) {
    let mut spec = match access::check(&client).await {
        Ok(spec) => spec,
        Err(e) => {
            // Unknown is not "allowed": operations stay possible, and each checks its own
            // permissions again before it sends anything.
            let _ = out
                .send(vec![Delta::Event(EventSpec {
                    ts: crate::now_ms(),
                    severity: Severity::Warning,
                    reason: "AccessReview".into(),
                    object: "selfsubjectaccessreviews".into(),
                    message: format!(
                        "could not ask the API server what you may do ({}); each operation checks before it starts",
                        cluster::describe(&e)
                    ),
                })])
                .await;
            AccessSpec::default()
        }
    };
    let Some(mut audit) = audit else {
        for k in access::KINDS {
            spec.denied.push((
                k.name().to_string(),
                "there is no data directory for the audit log (no home directory?): set FABRIK_DATA_DIR".into(),
            ));
        }
        let _ = out.send(vec![Delta::Access(spec)]).await;
        return;
    };
    audit.user = spec.user.clone();
    let _ = out.send(vec![Delta::Access(spec)]).await;
    let ex = Arc::new(KubeExec { client, audit, opts, out });
    let mut cancels: HashMap<u64, watch::Sender<bool>> = HashMap::new();
    let mut running: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    while let Some(req) = rx.recv().await {
        match req {
            ExecRequest::Preview { id, plan } => {
                // A preview that cannot be audited still shows; the confirmation will not run.
                let _ = ex.audit.record(id, &plan, Phase::Planned, &plan.title);
            }
            ExecRequest::Execute { id, plan } => {
                let (tx, cancel) = watch::channel(false);
                cancels.retain(|_, c| !c.is_closed());
                cancels.insert(id, tx);
                let ex = ex.clone();
                let halt = halt.clone();
                running.retain(|t| !t.is_finished());
                running.push(tokio::spawn(async move {
                    crate::ops::kube::execute_until(&ex, id, *plan, cancel, halt).await
                }));
            }
            ExecRequest::Cancel { id } => {
                if let Some(c) = cancels.get(&id) {
                    let _ = c.send(true);
                }
            }
        }
    }
    // The cockpit stopped serving operations (quit, `:ctx`, a signal): it has sent `halt`
    // with the reason, so each running operation records where it was interrupted and
    // stops; wait for those records (the caller bounds the wait).
    for t in running {
        let _ = t.await;
    }
    drop(cancels);
}

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
    /// `--prometheus URL` and how often to query it.
    pub prometheus: Option<(String, Duration)>,
}

pub async fn run_cockpit(
    ui_args: &crate::cli::UiArgs,
    kubeconfig: Option<PathBuf>,
    mut context: Option<String>,
    telemetry: &Telemetry,
) -> color_eyre::Result<ExitCode> {
    loop {
        let conn = match cluster::connect(kubeconfig.as_deref(), context.as_deref()).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("fabrik: {e}");
                return Ok(ExitCode::from(2));
            }
        };
        let setup = Setup::load(ui_args);
        let (tx, rx) = mpsc::channel(256);
        let mut feeds =
            vec![tokio::spawn(crate::feed::kube::run(conn.client.clone(), feed_config(&setup), tx.clone()))];
        for a in &telemetry.agents {
            feeds.push(tokio::spawn(crate::feed::agent::run(a.clone(), Duration::from_secs(1), tx.clone())));
        }
        // Agent pods stream through the pod proxy for the nodes on screen.
        let (view_tx, view_rx) = watch::channel(std::collections::BTreeSet::new());
        if !telemetry.agent_selector.trim().is_empty() {
            feeds.push(tokio::spawn(crate::feed::agents::run(
                conn.client.clone(),
                telemetry.agent_selector.clone(),
                Duration::from_secs(1),
                view_rx,
                tx.clone(),
            )));
        }
        if let Some((url, every)) = &telemetry.prometheus {
            feeds.push(tokio::spawn(crate::feed::prometheus::run(url.clone(), *every, tx.clone())));
        }
        let (halt_tx, halt_rx) = watch::channel(None);
        let mut ops_task = None;
        let exec: Box<dyn Executor> = if ui_args.readonly {
            Box::new(Refuse)
        } else {
            let (etx, erx) = mpsc::unbounded_channel();
            let audit = crate::config::Paths::discover().data_dir.map(|d| Audit::new(&d, &conn.context));
            let opts =
                ExecOptions { mig_stuck: Duration::from_secs(setup.config.mig_stuck_secs), ..Default::default() };
            ops_task = Some(tokio::spawn(serve_ops(conn.client.clone(), audit, opts, tx.clone(), erx, halt_rx)));
            Box::new(KubeExecutor(etx))
        };
        drop(tx);
        let mut ui = Ui::new(format!("ctx {}", conn.context));
        ui.session.readonly = ui_args.readonly;
        ui.session.contexts = conn.contexts.clone();
        ui.session.theme_name = setup.theme.name.clone();
        ui.session.keymap_name = setup.keymap.name.clone();
        let mut fleet = Fleet::new(setup.thresholds());
        config_warnings_into(&setup, &mut fleet, &mut ui);
        let fps = setup.config.fps;
        let mut app = App::new(fleet, ui, setup.theme, setup.keymap, exec);
        app.on_view_nodes(move |nodes| {
            let _ = view_tx.send(nodes.clone());
        });
        // `run` consumes the app, so its executor is gone when it returns: serve_ops stops
        // taking requests and waits for the operations that `halt` interrupts.
        let exit = crate::ui::run::run(app, rx, fps).await;
        let why = match &exit {
            Ok(e) => e.reason(),
            Err(e) => format!("the cockpit failed: {e}"),
        };
        let _ = halt_tx.send(Some(why));
        if let Some(t) = ops_task
            && tokio::time::timeout(HALT_WAIT, t).await.is_err()
        {
            say(&format!(
                "running operations did not record their interruption within {}s; `fabrik audit` shows them INTERRUPTED",
                HALT_WAIT.as_secs()
            ));
        }
        for f in feeds {
            f.abort();
        }
        match exit? {
            Exit::Switch(next) => context = Some(next),
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
    KubeFeedConfig { tenant_label: setup.config.tenant_label.clone() }
}

/// Lists the cluster into a fleet (every kind synced, or `timeout`), then prints one view.
pub async fn snapshot(
    args: &SnapshotArgs,
    kubeconfig: Option<PathBuf>,
    context: Option<String>,
    timeout: Duration,
) -> color_eyre::Result<ExitCode> {
    let conn = match cluster::connect(kubeconfig.as_deref(), context.as_deref()).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fabrik snapshot: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let setup = Setup::load(&crate::cli::UiArgs::default());
    let fleet = match load_fleet(conn.client, feed_config(&setup), setup.thresholds(), timeout).await {
        Ok(f) => f,
        Err(msg) => {
            eprintln!("fabrik snapshot: {msg}");
            return Ok(ExitCode::from(1));
        }
    };
    let out = render_rows(&fleet, view_kind(args.view), &args.filter, args.format);
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    Ok(ExitCode::SUCCESS)
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
