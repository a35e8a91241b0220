//! Wiring for the commands that run on a real cluster: the cockpit on a kube context and
//! `fabrik snapshot` against it. The feed is `feed::kube`; operations stay preview-only
//! until the cluster executor exists.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::cli::SnapshotArgs;
use crate::cluster;
use crate::feed::kube::KubeFeedConfig;
use crate::model::{Delta, Fleet, Thresholds};
use crate::snapshot::{Setup, config_warnings_into, render_rows, view_kind};
use crate::ui::{App, ExecRequest, Executor, Ui};

/// Why operations do not run on a cluster yet; shown in previews and the footer.
pub const OPS_UNAVAILABLE: &str =
    "operations on a live cluster are not available in this version (they run on `fabrik demo`)";

/// Accepts nothing: the app refuses to confirm while `ops_unavailable` is set, so this is
/// never asked; if it were, nothing would be sent.
struct NoExecutor;

impl Executor for NoExecutor {
    fn send(&mut self, _req: ExecRequest) {}
}

pub async fn run_cockpit(
    ui_args: &crate::cli::UiArgs,
    kubeconfig: Option<PathBuf>,
    mut context: Option<String>,
    agents: &[String],
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
        for a in agents {
            feeds.push(tokio::spawn(crate::feed::agent::run(a.clone(), Duration::from_secs(1), tx.clone())));
        }
        drop(tx);
        let mut ui = Ui::new(format!("ctx {}", conn.context));
        ui.readonly = ui_args.readonly;
        ui.ops_unavailable = Some(OPS_UNAVAILABLE.into());
        ui.contexts = conn.contexts.clone();
        ui.theme_name = setup.theme.name.clone();
        ui.keymap_name = setup.keymap.name.clone();
        let mut fleet = Fleet::new(setup.thresholds());
        config_warnings_into(&setup, &mut fleet, &mut ui);
        let fps = setup.config.fps;
        let app = App::new(fleet, ui, setup.theme, setup.keymap, Box::new(NoExecutor));
        let switch = crate::ui::run::run(app, rx, fps).await;
        for f in feeds {
            f.abort();
        }
        match switch? {
            Some(next) => context = Some(next),
            None => return Ok(ExitCode::SUCCESS),
        }
    }
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
