//! Wiring for the commands that run the embedded simulator: the demo cockpit and the demo
//! snapshot, and the set-up (config, theme, keymap) the cockpit shares with `live`.

use std::io::Write;
use std::process::ExitCode;

use tokio::sync::mpsc;

use crate::cli::{SimArgs, SnapshotArgs, UiArgs, ViewArg};
use crate::config::{Config, ConfigWarning, Paths};
use crate::model::{EventSpec, Fleet, Severity, Thresholds};
use crate::sim::SimConfig;
use crate::ui::command::ViewKind;
use crate::ui::export;
use crate::ui::keymap::Keymap;
use crate::ui::theme::Theme;
use crate::ui::{App, Ui};

pub struct Setup {
    pub config: Config,
    pub theme: Theme,
    pub keymap: Keymap,
    pub warnings: Vec<ConfigWarning>,
}

impl Setup {
    /// Config, theme and keymap with user overrides; never fails, warnings are collected.
    pub fn load(args: &UiArgs) -> Setup {
        let paths = Paths::discover();
        let dir = paths.config_dir.as_deref();
        let (config, mut warnings) = Config::load(dir);
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let theme_name = args.theme.clone().unwrap_or_else(|| config.theme.clone());
        let (theme, w) = Theme::load(&theme_name, dir, no_color);
        warnings.extend(w);
        let keymap_name = args.keymap.clone().unwrap_or_else(|| config.keymap.clone());
        let (keymap, w) = Keymap::load(&keymap_name, dir);
        warnings.extend(w);
        Setup { config, theme, keymap, warnings }
    }

    pub fn thresholds(&self) -> Thresholds {
        Thresholds {
            idle_util_pct: self.config.idle_util_pct,
            idle_window_ms: self.config.idle_window_secs.saturating_mul(1000),
            busy_util_pct: self.config.busy_util_pct,
            mig_stuck_ms: self.config.mig_stuck_secs.saturating_mul(1000),
            ..Thresholds::default()
        }
    }
}

/// `fabrik demo`'s default `--sharing-every`: the snapshot shows the same factory.
pub const DEMO_SHARING_EVERY: u32 = 6;

fn sim_config(a: &SimArgs) -> SimConfig {
    SimConfig {
        seed: a.seed,
        nodes: a.nodes as usize,
        tick_ms: a.tick_ms,
        churn: true,
        sharing_every: a.sharing_every,
        dra_alpha: true,
        teams: 0,
    }
}

pub async fn run_demo(setup: Setup, sim: SimArgs, readonly: bool, clusters: u32) -> color_eyre::Result<()> {
    let (to, trx) = mpsc::channel(64);
    // Each simulated cluster: its own factory (the next seed), feed, executor and logs.
    let mut started = Vec::new();
    for i in 0..clusters.max(1) {
        let (tx, rx) = mpsc::channel(64);
        let (exec_tx, exec_rx) = std::sync::mpsc::channel();
        // Halving sizes (48, 24, 12, …), so the clusters' rows differ at a glance.
        let nodes = (sim.nodes as usize >> i).max(8.min(sim.nodes as usize));
        let cfg = SimConfig { seed: sim.seed + u64::from(i), nodes, ..sim_config(&sim) };
        let feed = crate::feed::sim::spawn(cfg, tx.clone(), exec_rx)?;
        let forward = crate::ui::run::forward(i as usize, rx, to.clone());
        let name = if clusters > 1 { format!("demo-{}", i + 1) } else { "demo".to_string() };
        let source = format!("demo seed {} ({nodes} nodes)", sim.seed + u64::from(i));
        started.push((name, source, exec_tx, tx, feed, forward));
    }
    drop(to);
    let mut parts = started.iter();
    let Some((_, source, exec_tx, log_tx, _, _)) = parts.next() else { return Ok(()) };
    let mut ui = Ui::new(source.clone());
    ui.session.readonly = readonly;
    ui.session.theme_name = setup.theme.name.clone();
    ui.session.keymap_name = setup.keymap.name.clone();
    let mut fleet = Fleet::new(setup.thresholds());
    config_warnings_into(&setup, &mut fleet, &mut ui);
    let thresholds = setup.thresholds();
    let mut app = App::new(fleet, ui, setup.theme, setup.keymap, Box::new(exec_tx.clone()));
    app.on_logs(demo_logs(log_tx.clone()));
    app.name_cluster(if clusters > 1 { "demo-1" } else { "demo" });
    for (name, source, exec_tx, log_tx, _, _) in parts {
        app.add_cluster(crate::ui::ClusterParts {
            name: name.clone(),
            source: source.clone(),
            fleet: Fleet::new(thresholds),
            exec: Box::new(exec_tx.clone()),
            kubectl: Vec::new(),
            view_nodes: None,
            inspector: None,
            logger: Some(Box::new(demo_logs(log_tx.clone()))),
        });
    }
    crate::ui::run::run(app, trx, None, setup.config.fps).await.map(|_| ())
}

/// What the demo's containers have written by `now_ms` for `req` (`L` in the demo): the text
/// `fabrik sim`'s kubelets serve (see `kubesim::logs`), from runs made up from the pod's name
/// and `anchor_ms` (the demo's start: a run began up to two hours before it).
pub fn demo_log(req: &crate::model::LogRequest, anchor_ms: i64, now_ms: i64) -> Vec<crate::model::LogEvent> {
    use crate::model::LogEvent;
    let container = req.container.clone().unwrap_or_else(|| "main".to_string());
    let (current, previous) = crate::kubesim::logs::demo_runs(&req.pod, anchor_ms);
    let opened = LogEvent::Opened { containers: vec!["main".into()], container: container.clone() };
    if container != "main" {
        return vec![LogEvent::Ended(Some(format!(
            "pod {} has no container {container:?}; its containers: main",
            req.pod
        )))];
    }
    let run = if req.previous { previous } else { Some(current) };
    let Some(run) = run else {
        let why = format!("previous terminated container {container:?} in pod {:?} not found", req.pod);
        return vec![opened, LogEvent::Ended(Some(why))];
    };
    let q = crate::kubesim::logs::Query {
        timestamps: req.timestamps,
        tail_lines: req.tail,
        ..crate::kubesim::logs::Query::default()
    };
    let text = crate::kubesim::logs::initial(&q, &req.pod, &container, &run, now_ms);
    let lines = text.lines().map(str::to_string).collect();
    let mut out = vec![opened, LogEvent::Lines(lines)];
    if !req.follow || run.end.is_some() {
        out.push(LogEvent::Ended(None));
    }
    out
}

/// The demo's `L`: the log so far, then (following) each line as the container "writes" it.
fn demo_logs(tx: mpsc::Sender<crate::model::Batch>) -> impl FnMut(Option<&crate::model::LogRequest>) + Send {
    let mut current: Option<tokio::task::JoinHandle<()>> = None;
    // Runs are placed from the demo's start, so a log grows while it is watched and reads the
    // same when it is opened again.
    let anchor = jiff::Timestamp::now().as_millisecond();
    move |req| {
        if let Some(t) = current.take() {
            t.abort();
        }
        let Some(req) = req.cloned() else { return };
        let tx = tx.clone();
        current = Some(tokio::spawn(async move {
            let request = req.id;
            let send = |events: Vec<crate::model::LogEvent>| {
                let batch = events.into_iter().map(|event| crate::model::Delta::Log { request, event }).collect();
                tx.send(batch)
            };
            let mut seen = jiff::Timestamp::now().as_millisecond();
            let first = demo_log(&req, anchor, seen);
            let ended = first.iter().any(|e| matches!(e, crate::model::LogEvent::Ended(_)));
            if send(first).await.is_err() || ended {
                return;
            }
            // Following the current run: each line as it is written, as the sim's kubelet sends it.
            use crate::kubesim::logs;
            let run = logs::demo_runs(&req.pod, anchor).0;
            let container = req.container.clone().unwrap_or_else(|| "main".to_string());
            let q = logs::Query { timestamps: req.timestamps, ..logs::Query::default() };
            let mut done = logs::ticks(&run, seen);
            loop {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                seen = jiff::Timestamp::now().as_millisecond();
                let fresh = logs::ticks_since(&req.pod, &container, &run, done, seen);
                done += fresh.len() as i64;
                let text: Vec<String> = logs::render(&q, &fresh).lines().map(str::to_string).collect();
                if !text.is_empty() && send(vec![crate::model::LogEvent::Lines(text)]).await.is_err() {
                    return;
                }
            }
        }));
    }
}

/// Broken config files become events and one line in the status bar; defaults apply.
pub fn config_warnings_into(setup: &Setup, fleet: &mut Fleet, ui: &mut Ui) {
    if setup.warnings.is_empty() {
        return;
    }
    for w in &setup.warnings {
        fleet.push_event(EventSpec {
            ts: 0,
            severity: Severity::Warning,
            reason: "ConfigWarning".into(),
            object: w.file.clone(),
            message: w.to_string(),
        });
    }
    let first = setup.warnings[0].to_string();
    ui.warn(format!("{} config warning(s), defaults used — {first} (all in :events)", setup.warnings.len()));
}

/// The view of one cluster `--view` names; `None`: the clusters view (one row per cluster).
pub fn view_kind(v: ViewArg) -> Option<ViewKind> {
    Some(match v {
        ViewArg::Fleet => ViewKind::Fleet,
        ViewArg::Gpus => ViewKind::Gpus,
        ViewArg::Tenants => ViewKind::Tenants,
        ViewArg::Quotas => ViewKind::Quotas,
        ViewArg::Pods => ViewKind::Pods,
        ViewArg::Events => ViewKind::Events,
        ViewArg::Ops => ViewKind::Ops,
        ViewArg::Domains => ViewKind::Domains,
        ViewArg::Workloads => ViewKind::Workloads,
        ViewArg::Capi => ViewKind::Capi,
        ViewArg::Hosts => ViewKind::Hosts,
        ViewArg::Clusters => return None,
    })
}

/// The demo snapshot; `live::snapshot` takes one from a cluster.
pub fn snapshot(args: SnapshotArgs) -> color_eyre::Result<ExitCode> {
    // The factory `fabrik demo` shows, with the same flags.
    let cfg = SimConfig {
        seed: args.sim.seed,
        nodes: args.sim.nodes as usize,
        tick_ms: 1000,
        churn: true,
        sharing_every: DEMO_SHARING_EVERY,
        dra_alpha: true,
        teams: 0,
    };
    let (_, fleet) = crate::testing::demo_fleet_with(cfg, args.ticks, Thresholds::default());
    if let Some(file) = &args.bundle {
        return Ok(write_bundle(&fleet, &args, file, "demo", ""));
    }
    let out = match view_kind(args.view) {
        Some(v) => export::rows(&fleet, v, &args.filter, args.format.into()),
        // The demo is one cluster: one row.
        None => export::clusters(
            &[crate::ui::views::clusters::ClusterRow::of("demo", &fleet)],
            0,
            fleet.now,
            &args.filter,
            args.format.into(),
        ),
    };
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error worth a message.
    let _ = stdout.write_all(out.as_bytes());
    Ok(ExitCode::SUCCESS)
}

/// `fabrik snapshot --bundle FILE`: the bundle of `args`' scope from this fleet, written to a
/// new file (never over an existing one) or to standard output for `-`. On bad input (an
/// unknown node or tenant, an existing file) it says what was wrong and writes nothing.
/// `extra`: sections to add at the end (on a cluster, the node object as the API holds it).
pub fn write_bundle(
    fleet: &crate::model::Fleet,
    args: &SnapshotArgs,
    file: &std::path::Path,
    context: &str,
    extra: &str,
) -> ExitCode {
    use crate::ops::audit;
    use crate::ui::bundle::{Scope, bundle};
    let scope = match (&args.node, &args.tenant) {
        (Some(n), _) => Scope::Node(n.clone()),
        (_, Some(t)) => Scope::Tenant(t.clone()),
        _ => Scope::Fleet,
    };
    let records = match crate::config::Paths::discover().data_dir {
        None => Ok(Vec::new()),
        Some(dir) => {
            let path = dir.join(audit::FILE_NAME);
            match audit::read(&path) {
                Ok((r, _)) => Ok(r),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
                Err(e) => Err(format!("{}: {e}", path.display())),
            }
        }
    };
    let text = match bundle(fleet, &scope, context, crate::cli::VERSION, records.as_deref().map_err(String::as_str)) {
        Ok(t) => t + extra,
        Err(e) => {
            eprintln!("fabrik snapshot --bundle: {e}");
            return ExitCode::from(2);
        }
    };
    if file.as_os_str() == "-" {
        let _ = std::io::stdout().lock().write_all(text.as_bytes());
        return ExitCode::SUCCESS;
    }
    let written = std::fs::OpenOptions::new().write(true).create_new(true).open(file).and_then(|mut out| {
        out.write_all(text.as_bytes())?;
        out.sync_all()
    });
    match written {
        Ok(()) => {
            println!("bundle written to {} ({} bytes)", file.display(), text.len());
            ExitCode::SUCCESS
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            eprintln!(
                "fabrik snapshot --bundle: {} exists; a bundle never overwrites a file: remove it or name another",
                file.display()
            );
            ExitCode::from(2)
        }
        Err(e) => {
            // A half-written bundle is worse than none.
            let _ = std::fs::remove_file(file);
            eprintln!("fabrik snapshot --bundle: cannot write {}: {e}", file.display());
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{LogEvent, LogRequest};

    fn lines(events: &[LogEvent]) -> Vec<String> {
        events
            .iter()
            .filter_map(|e| if let LogEvent::Lines(l) = e { Some(l.clone()) } else { None })
            .flatten()
            .collect()
    }

    #[test]
    fn demo_logs_follow_tail_and_refuse_as_a_kubelet_does() {
        let now = 1_800_000_000_000;
        let mut req = LogRequest::new(1, "ns", "llm-train-0");
        let all = demo_log(&req, now, now);
        assert!(matches!(&all[0], LogEvent::Opened { container, .. } if container == "main"));
        assert!(!all.iter().any(|e| matches!(e, LogEvent::Ended(_))), "following: the stream stays open");
        assert!(lines(&all)[0].contains("loading checkpoint"), "{:?}", lines(&all).first());
        // Watched for ten seconds, the log has five more lines and the same ones before them.
        let later = lines(&demo_log(&req, now, now + 10_000));
        assert_eq!(later.len(), lines(&all).len() + 5);
        assert_eq!(later[..lines(&all).len()], lines(&all)[..]);
        req.tail = Some(3);
        req.follow = false;
        let tail = demo_log(&req, now, now);
        assert_eq!(lines(&tail), lines(&all)[lines(&all).len() - 3..].to_vec());
        assert_eq!(tail.last(), Some(&LogEvent::Ended(None)));
        // Previous: the crashed run's last words, or the kubelet's refusal.
        let crashed = (0..100).map(|i| format!("p-{i}")).find(|p| crate::kubesim::logs::demo_runs(p, now).1.is_some());
        let clean = (0..100).map(|i| format!("p-{i}")).find(|p| crate::kubesim::logs::demo_runs(p, now).1.is_none());
        let previous = |pod: &str| demo_log(&LogRequest { previous: true, ..LogRequest::new(2, "ns", pod) }, now, now);
        let crash = previous(&crashed.expect("one pod in six crashed"));
        assert!(lines(&crash).last().is_some_and(|l| l.contains("exiting with code 1")), "{crash:?}");
        let refused = previous(&clean.expect("most did not"));
        assert!(
            matches!(refused.last(), Some(LogEvent::Ended(Some(e))) if e.contains("previous terminated container"))
        );
        let other = demo_log(&LogRequest { container: Some("x".into()), ..LogRequest::new(3, "ns", "p") }, now, now);
        assert!(matches!(other.last(), Some(LogEvent::Ended(Some(e))) if e.contains("no container \"x\"")));
    }
}
