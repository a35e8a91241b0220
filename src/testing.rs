//! Test fixtures: the demo fleet at a seed and a headless cockpit over it. The unit tests,
//! the screenshots and the benches use them; they need only the simulator and the UI, never
//! the wiring.

use ratatui::Terminal;
use ratatui::backend::TestBackend;

use crate::model::{Fleet, Thresholds};
use crate::sim::{Sim, SimConfig};
use crate::ui::keymap::Keymap;
use crate::ui::theme::Theme;
use crate::ui::{App, Recorder, Ui};

/// A fleet from the simulator after `ticks` steps, without a terminal.
pub fn demo_fleet(seed: u64, nodes: usize, ticks: u32, thresholds: Thresholds) -> (Sim, Fleet) {
    demo_fleet_with(
        SimConfig { seed, nodes, tick_ms: 1000, churn: true, sharing_every: 0, dra_alpha: false, teams: 0 },
        ticks,
        thresholds,
    )
}

/// The demo as `fabrik demo` runs it: shared GPUs (every 6th node without MIG) and DRA's
/// alpha shapes; the screenshots show these.
pub fn full_demo_fleet(seed: u64, ticks: u32) -> (Sim, Fleet) {
    let cfg = SimConfig { seed, nodes: 48, tick_ms: 1000, churn: true, sharing_every: 6, dra_alpha: true, teams: 0 };
    demo_fleet_with(cfg, ticks, Thresholds::default())
}

pub fn demo_fleet_with(cfg: SimConfig, ticks: u32, thresholds: Thresholds) -> (Sim, Fleet) {
    let mut sim = Sim::new(cfg);
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
    app_over(sim, fleet, seed, theme)
}

/// [`demo_app`] over the demo as `fabrik demo` runs it ([`full_demo_fleet`]).
pub fn full_demo_app(seed: u64, ticks: u32, theme: Theme) -> (Sim, App) {
    let (sim, fleet) = full_demo_fleet(seed, ticks);
    app_over(sim, fleet, seed, theme)
}

/// An app over `fleet` (the demo's, of any size), as `fabrik demo` makes it.
pub fn app_over(sim: Sim, fleet: Fleet, seed: u64, theme: Theme) -> (Sim, App) {
    let mut ui = Ui::new(format!("demo seed {seed} ({} nodes)", fleet.totals.nodes));
    ui.session.theme_name = theme.name.clone();
    let keymap = Keymap::builtin("default").unwrap_or_else(|| Keymap::load("default", None).0);
    let app = App::new(fleet, ui, theme, keymap, Box::new(Recorder::default()));
    (sim, app)
}
