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
    }
}

pub async fn run_demo(setup: Setup, sim: SimArgs, readonly: bool) -> color_eyre::Result<()> {
    let (tx, rx) = mpsc::channel(64);
    let (exec_tx, exec_rx) = std::sync::mpsc::channel();
    let _feed = crate::feed::sim::spawn(sim_config(&sim), tx, exec_rx)?;
    let mut ui = Ui::new(format!("demo seed {} ({} nodes)", sim.seed, sim.nodes));
    ui.session.readonly = readonly;
    ui.session.theme_name = setup.theme.name.clone();
    ui.session.keymap_name = setup.keymap.name.clone();
    let mut fleet = Fleet::new(setup.thresholds());
    config_warnings_into(&setup, &mut fleet, &mut ui);
    let app = App::new(fleet, ui, setup.theme, setup.keymap, Box::new(exec_tx));
    crate::ui::run::run(app, rx, setup.config.fps).await.map(|_| ())
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

pub fn view_kind(v: ViewArg) -> ViewKind {
    match v {
        ViewArg::Fleet => ViewKind::Fleet,
        ViewArg::Gpus => ViewKind::Gpus,
        ViewArg::Tenants => ViewKind::Tenants,
        ViewArg::Quotas => ViewKind::Quotas,
        ViewArg::Pods => ViewKind::Pods,
        ViewArg::Events => ViewKind::Events,
        ViewArg::Ops => ViewKind::Ops,
        ViewArg::Domains => ViewKind::Domains,
    }
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
    };
    let (_, fleet) = crate::testing::demo_fleet_with(cfg, args.ticks, Thresholds::default());
    if let Some(file) = &args.bundle {
        return Ok(write_bundle(&fleet, &args, file, "demo", ""));
    }
    let out = export::rows(&fleet, view_kind(args.view), &args.filter, args.format.into());
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
