//! `fabrik screenshots`: the README's pictures, rendered headless from the demo at a seed.

use std::path::Path;
use std::process::ExitCode;

use crate::testing::{full_demo_app, render_app};
use crate::ui::command::Command;
use crate::ui::export;
use crate::ui::theme::Theme;

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
        // GPU sharing (issue 15): a time-sliced node's GPUs, DRA's alpha shapes, domains.
        ("shared-gpus", vec![], Some("gpus h100-0006")),
        ("dra-gpus", vec![], Some("gpus h100-001")),
        ("domains", vec![], Some("domains")),
        // On call (issue 16): a pod's log, as `L` streams it (the demo's generated text).
        ("logs", vec![Command::Down, Command::Down, Command::Logs], Some("pods vllm")),
        // ...and reclaiming an idle notebook's GPU through its owner (R).
        ("reclaim-preview", vec![Command::Reclaim], Some("pods ft-debug-75bf4")),
        // ...and Kueue's Workloads: the queued ones first (namespace, then name).
        ("workloads", vec![], Some("workloads")),
        // The factory (issue 17): a change to a ClusterQueue Flux applies from Git, previewed.
        ("gitops-preview", vec![], Some("hold cq-inference-prod")),
        // ...and down to the metal: the NotReady node's Machine and BareMetalHost, and the
        // reboot of its host previewed (B; the host's BMC does not answer: a warning).
        ("host-chain", vec![], Some("node a100-0007")),
        ("host-reboot-preview", vec![Command::HostPower], Some("fleet a100-0007")),
        // ...and Cluster API from the management cluster: the tree, the remediating Machine.
        ("capi", vec![], Some("capi")),
        // ...and the hosts in error: under the NotReady node, and a spare that never registered.
        ("hosts", vec![], Some("hosts error")),
        // ...and many clusters in one cockpit, as `fabrik demo --clusters 3` runs them.
        ("clusters", vec![Command::ViewClusters], None),
    ];
    for (name, keys, cmdline) in shots {
        let (_, mut app) = full_demo_app(seed, 20, theme.clone());
        app.resize(140, 40);
        if name == "clusters" {
            add_demo_clusters(&mut app, seed);
        }
        if let Some(c) = cmdline {
            app.dispatch(Command::CommandLine);
            for ch in c.chars() {
                app.handle_key(crossterm::event::KeyEvent::from(crossterm::event::KeyCode::Char(ch)));
            }
            app.handle_key(crossterm::event::KeyEvent::from(crossterm::event::KeyCode::Enter));
        }
        app.on_logs(|_| {});
        for k in keys {
            app.dispatch(k);
            app.prepare();
        }
        if let Some(req) = app.ui.nav.logs.clone() {
            let now = app.fleet.now as i64;
            let request = req.id;
            let events = crate::demo::demo_log(&req, now, now);
            app.apply(events.into_iter().map(|event| crate::model::Delta::Log { request, event }));
        }
        let buf = render_app(&mut app, 140, 40);
        std::fs::write(out.join(format!("{name}.txt")), export::to_text(&buf))?;
        std::fs::write(out.join(format!("{name}.svg")), export::to_svg(&buf, &fg, &bg))?;
        println!("wrote {}/{name}.svg and .txt", out.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The clusters of `fabrik demo --clusters 3` beside the first: the next seeds, 24 and 12 nodes.
fn add_demo_clusters(app: &mut crate::ui::App, seed: u64) {
    app.name_cluster("demo-1");
    for (i, nodes) in [(1u64, 24usize), (2, 12)] {
        let cfg = crate::sim::SimConfig {
            seed: seed + i,
            nodes,
            tick_ms: 1000,
            churn: true,
            sharing_every: crate::demo::DEMO_SHARING_EVERY,
            dra_alpha: true,
            teams: 0,
        };
        let (_, fleet) = crate::testing::demo_fleet_with(cfg, 20, crate::model::Thresholds::default());
        app.add_cluster(crate::ui::ClusterParts {
            name: format!("demo-{}", i + 1),
            source: format!("demo seed {} ({nodes} nodes)", seed + i),
            fleet,
            exec: Box::new(crate::ops::Recorder::default()),
            kubectl: Vec::new(),
            view_nodes: None,
            inspector: None,
            logger: None,
        });
    }
}

fn color_hex(c: Option<ratatui::style::Color>, default: &str) -> String {
    match c {
        Some(ratatui::style::Color::Rgb(r, g, b)) => format!("#{r:02x}{g:02x}{b:02x}"),
        _ => default.to_string(),
    }
}
