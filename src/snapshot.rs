//! Wiring for the commands that run the simulator: the demo cockpit, one-shot snapshots,
//! and the README screenshots. Shared set-up (config, theme, keymap) lives here too.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use tokio::sync::mpsc;

use crate::cli::{Format, SimArgs, SnapshotArgs, UiArgs, ViewArg};
use crate::config::{Config, ConfigWarning, Paths};
use crate::model::{EventSpec, Fleet, Severity, Thresholds};
use crate::sim::{Sim, SimConfig};
use crate::ui::command::{Command, ViewKind};
use crate::ui::keymap::Keymap;
use crate::ui::theme::Theme;
use crate::ui::views::tables;
use crate::ui::{App, Recorder, Ui, export};

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
            idle_window_ms: self.config.idle_window_secs * 1000,
            busy_util_pct: self.config.busy_util_pct,
            mig_stuck_ms: self.config.mig_stuck_secs * 1000,
            ..Thresholds::default()
        }
    }
}

fn sim_config(a: &SimArgs) -> SimConfig {
    SimConfig { seed: a.seed, nodes: a.nodes as usize, tick_ms: a.tick_ms, churn: true }
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

/// A fleet from the simulator after `ticks` steps, without a terminal.
pub fn demo_fleet(seed: u64, nodes: usize, ticks: u32, thresholds: Thresholds) -> (Sim, Fleet) {
    let mut sim = Sim::new(SimConfig { seed, nodes, tick_ms: 1000, churn: true });
    let mut fleet = Fleet::new(thresholds);
    for d in sim.initial_deltas() {
        fleet.apply(d);
    }
    for _ in 0..ticks {
        for d in sim.step() {
            fleet.apply(d);
        }
    }
    (sim, fleet)
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
    }
}

/// The demo snapshot; `live::snapshot` takes one from a cluster.
pub fn snapshot(args: SnapshotArgs) -> color_eyre::Result<ExitCode> {
    let (_, fleet) = demo_fleet(args.sim.seed, args.sim.nodes as usize, args.ticks, Thresholds::default());
    let out = render_rows(&fleet, view_kind(args.view), &args.filter, args.format);
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error worth a message.
    let _ = stdout.write_all(out.as_bytes());
    Ok(ExitCode::SUCCESS)
}

/// One view in a format: the table and markdown are the screen's cells; JSON is typed
/// (`ui::json`, schema in docs/snapshot.md).
pub fn render_rows(f: &Fleet, v: ViewKind, filter: &str, format: Format) -> String {
    let text = || tables::text_rows(f, v, filter);
    match format {
        Format::Json => {
            let doc = crate::ui::json::snapshot(f, v, filter);
            serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
        }
        Format::Markdown => {
            let (headers, rows) = text();
            let mut s =
                format!("| {} |\n|{}\n", headers.join(" | "), headers.iter().map(|_| "---|").collect::<String>());
            for r in &rows {
                s.push_str(&format!(
                    "| {} |\n",
                    r.iter().map(|c| c.trim().replace('|', "\\|")).collect::<Vec<_>>().join(" | ")
                ));
            }
            s
        }
        Format::Table => {
            let (headers, rows) = text();
            let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
            for r in &rows {
                for (i, c) in r.iter().enumerate() {
                    widths[i] = widths[i].max(c.trim().chars().count());
                }
            }
            let line = |cells: Vec<String>| -> String {
                let mut s: String =
                    cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}", w = *w)).collect::<Vec<_>>().join("  ");
                s.truncate(s.trim_end().len());
                s + "\n"
            };
            let mut s = line(headers.iter().map(|h| h.to_string()).collect());
            for r in rows {
                s.push_str(&line(r.into_iter().map(|c| c.trim().to_string()).collect()));
            }
            s
        }
    }
}

/// Drives an `App` through keys and renders it, headless: the screenshots and the view
/// tests share this.
pub fn render_app(app: &mut App, w: u16, h: u16) -> ratatui::buffer::Buffer {
    app.resize(w, h);
    let mut term = match Terminal::new(TestBackend::new(w, h)) {
        Ok(t) => t,
        Err(e) => match e {},
    };
    let _ = term.draw(|f| app.draw(f));
    term.backend().buffer().clone()
}

pub fn demo_app(seed: u64, ticks: u32, theme: Theme) -> (Sim, App) {
    let (sim, fleet) = demo_fleet(seed, 48, ticks, Thresholds::default());
    let mut ui = Ui::new(format!("demo seed {seed} (48 nodes)"));
    ui.session.theme_name = theme.name.clone();
    let keymap = Keymap::builtin("default").unwrap_or_else(|| Keymap::load("default", None).0);
    let app = App::new(fleet, ui, theme, keymap, Box::new(Recorder::default()));
    (sim, app)
}

pub fn screenshots(out: &Path, seed: u64, theme: Option<&str>) -> color_eyre::Result<ExitCode> {
    std::fs::create_dir_all(out)?;
    // Builtin themes only: the README's pictures must not depend on a user's config.
    let theme = Theme::builtin(theme.unwrap_or("dark")).unwrap_or_else(Theme::no_color);
    let fg = color_hex(theme.style("ui.text").fg, "#c0caf5");
    let bg = color_hex(theme.style("ui.text").bg, "#1a1b26");
    let shots: Vec<(&str, Vec<Command>, Option<&str>)> = vec![
        ("fleet", vec![], None),
        ("node-topology", vec![Command::Down, Command::Down], Some("node h200-0005")),
        ("mig-map", vec![], Some("gpu h200-0005/1")),
        ("tenants", vec![Command::ViewTenants], None),
        ("gpus", vec![Command::ViewGpus], None),
        ("drain-preview", vec![Command::Drain], Some("fleet h100-0008")),
    ];
    for (name, keys, cmdline) in shots {
        let (_, mut app) = demo_app(seed, 20, theme.clone());
        app.resize(140, 40);
        if let Some(c) = cmdline {
            app.dispatch(Command::CommandLine);
            for ch in c.chars() {
                app.handle_key(crossterm::event::KeyEvent::from(crossterm::event::KeyCode::Char(ch)));
            }
            app.handle_key(crossterm::event::KeyEvent::from(crossterm::event::KeyCode::Enter));
        }
        for k in keys {
            app.dispatch(k);
            app.prepare();
        }
        let buf = render_app(&mut app, 140, 40);
        std::fs::write(out.join(format!("{name}.txt")), export::to_text(&buf))?;
        std::fs::write(out.join(format!("{name}.svg")), export::to_svg(&buf, &fg, &bg))?;
        println!("wrote {}/{name}.svg and .txt", out.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn color_hex(c: Option<ratatui::style::Color>, default: &str) -> String {
    match c {
        Some(ratatui::style::Color::Rgb(r, g, b)) => format!("#{r:02x}{g:02x}{b:02x}"),
        _ => default.to_string(),
    }
}
