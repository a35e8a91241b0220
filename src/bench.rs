//! The scale harness behind `fabrik bench`: builds a simulated factory of a given size and
//! measures what a person would feel — start-up, per-tick update cost, sort/filter cost,
//! frame render cost, cells written for an unchanged frame, and resident memory. It prints
//! medians; nothing here is asserted in tests (machines are shared and noisy).

use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::{Backend, ClearType, TestBackend, WindowSize};
use ratatui::buffer::Cell;
use ratatui::layout::{Position, Size};

use crate::model::{Fleet, Thresholds};
use crate::sim::{Sim, SimConfig};
use crate::ui::command::{Command, ViewKind};
use crate::ui::keymap::Keymap;
use crate::ui::theme::Theme;
use crate::ui::{App, Recorder, Ui};

/// A backend that counts the cells ratatui sends, to show that an unchanged frame writes
/// nothing.
pub struct CountingBackend {
    inner: TestBackend,
    pub cells: usize,
}

impl CountingBackend {
    pub fn new(w: u16, h: u16) -> Self {
        Self { inner: TestBackend::new(w, h), cells: 0 }
    }
}

impl Backend for CountingBackend {
    type Error = std::convert::Infallible;
    fn draw<'a, I>(&mut self, content: I) -> Result<(), Self::Error>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        let v: Vec<_> = content.collect();
        self.cells += v.len();
        self.inner.draw(v.into_iter())
    }
    fn hide_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.hide_cursor()
    }
    fn show_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.show_cursor()
    }
    fn get_cursor_position(&mut self) -> Result<Position, Self::Error> {
        self.inner.get_cursor_position()
    }
    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> Result<(), Self::Error> {
        self.inner.set_cursor_position(position)
    }
    fn clear(&mut self) -> Result<(), Self::Error> {
        self.inner.clear()
    }
    fn clear_region(&mut self, clear_type: ClearType) -> Result<(), Self::Error> {
        self.inner.clear_region(clear_type)
    }
    fn size(&self) -> Result<Size, Self::Error> {
        self.inner.size()
    }
    fn window_size(&mut self) -> Result<WindowSize, Self::Error> {
        self.inner.window_size()
    }
    fn flush(&mut self) -> Result<(), Self::Error> {
        self.inner.flush()
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// Resident and peak memory of this process from /proc (Linux), in MiB.
pub fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
            .unwrap_or(0.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

pub fn run(nodes: usize, frames: usize, ticks: usize) {
    println!("fabrik scale harness: {nodes} nodes, {frames} frames per view, {ticks} ticks");
    let t0 = Instant::now();
    let mut sim =
        Sim::new(SimConfig { seed: 42, nodes, tick_ms: 1000, churn: true, sharing_every: 0, dra_alpha: false });
    let initial = sim.initial_deltas();
    let built = t0.elapsed();
    let n_deltas = initial.len();
    let (rss_sim, _) = rss_mib();
    let t1 = Instant::now();
    let mut fleet = Fleet::new(Thresholds::default());
    let mut by_kind: std::collections::BTreeMap<&'static str, (usize, Duration)> = Default::default();
    for d in initial {
        let kind = delta_kind(&d);
        let t = Instant::now();
        fleet.apply(d);
        let e = by_kind.entry(kind).or_default();
        e.0 += 1;
        e.1 += t.elapsed();
    }
    let applied = t1.elapsed();
    for (k, (n, d)) in &by_kind {
        println!("  {k:<12} {n:>8} deltas {:>10}", ms(*d));
    }
    let (rss, _) = rss_mib();
    println!(
        "factory: {} nodes, {} GPUs, {} MIG instances, {} pods",
        fleet.totals.nodes, fleet.totals.gpus, fleet.totals.mig_instances, fleet.totals.pods
    );
    println!("simulator build + initial listing ({n_deltas} deltas): {}", ms(built));
    println!("fleet applies the initial listing: {}", ms(applied));
    println!(
        "RSS: {rss_sim:.0} MiB with the simulator and its initial listing, {rss:.0} MiB once the fleet holds it too"
    );

    let keymap = Keymap::builtin("default").unwrap_or_else(|| Keymap::load("default", None).0);
    let theme = Theme::builtin("dark").unwrap_or_else(Theme::no_color);
    let t2 = Instant::now();
    let mut app = App::new(fleet, Ui::new("bench".into()), theme, keymap, Box::new(Recorder::default()));
    app.resize(200, 50);
    let first_prepare = t2.elapsed();
    let mut term = match Terminal::new(CountingBackend::new(200, 50)) {
        Ok(t) => t,
        Err(e) => match e {},
    };
    let t3 = Instant::now();
    let _ = term.draw(|f| app.draw(f));
    println!("first frame (fleet view: rows built + sorted + drawn): {}", ms(first_prepare + t3.elapsed()));

    let mut tick_apply = Vec::new();
    let mut tick_sim = Vec::new();
    for _ in 0..ticks {
        let t = Instant::now();
        let deltas = sim.step();
        tick_sim.push(t.elapsed());
        let t = Instant::now();
        // As the terminal driver does: the clock goes in with the deltas, so an expensive
        // view's rebuild is throttled as it is in the cockpit.
        app.set_clock(t);
        app.apply(deltas);
        tick_apply.push(t.elapsed());
    }
    println!("one simulator tick computed (the simulator's own cost), median: {}", ms(median(tick_sim)));
    println!(
        "one simulator tick applied (telemetry for up to 20,000 GPUs + churn), median: {}",
        ms(median(tick_apply))
    );

    for (v, cmd) in [
        (ViewKind::Fleet, Command::ViewFleet),
        (ViewKind::Gpus, Command::ViewGpus),
        (ViewKind::Pods, Command::ViewPods),
        (ViewKind::Tenants, Command::ViewTenants),
    ] {
        let t = Instant::now();
        app.dispatch(cmd);
        app.prepare();
        let open = t.elapsed();
        // Re-sort: the next column, as a person pressing `s` would.
        let t = Instant::now();
        app.dispatch(Command::SortNext);
        app.prepare();
        let sort = t.elapsed();
        let mut times = Vec::new();
        for _ in 0..frames {
            let t = Instant::now();
            let _ = term.draw(|f| app.draw(f));
            times.push(t.elapsed());
        }
        term.backend_mut().cells = 0;
        let _ = term.draw(|f| app.draw(f));
        let unchanged = term.backend().cells;
        println!(
            "{:<8} rows {:>7}: open {}, re-sort {}, frame median {}, cells written for an unchanged frame: {unchanged}",
            v.name(),
            app.ui.rows(v).len(),
            ms(open),
            ms(sort),
            ms(median(times))
        );
    }
    let t = Instant::now();
    app.dispatch(Command::ViewPods);
    app.ui.table_mut(ViewKind::Pods).filter = "whisper".into();
    app.prepare();
    println!("filter pods by \"whisper\": {} ({} rows)", ms(t.elapsed()), app.ui.rows(ViewKind::Pods).len());
    let (rss, peak) = rss_mib();
    println!("RSS at the end: {rss:.0} MiB (peak {peak:.0} MiB)");
}

fn delta_kind(d: &crate::model::Delta) -> &'static str {
    use crate::model::Delta::*;
    match d {
        Clock(_) => "clock",
        NodeUpsert(_) | NodeRemove(_) => "node",
        GpuUpsert(_) | GpuRemove(_) | GpuDra { .. } => "gpu",
        DomainUpsert(_) | DomainRemove { .. } => "domain",
        WorkloadUpsert(_) | WorkloadRemove { .. } => "workload",
        Managed { .. } => "gitops",
        NetPolUpsert(_) | NetPolRemove { .. } => "netpol",
        MachineUpsert(_) | MachineRemove { .. } => "machine",
        HostUpsert(_) | HostRemove { .. } => "host",
        Telemetry(_) => "telemetry",
        GpuFault { .. } | GpuFaultClear { .. } => "fault",
        PodUpsert(_) | PodRemove { .. } => "pod",
        TenantUpsert(_) | TenantRemove(_) => "tenant",
        QuotaUpsert(_) | QuotaRemove { .. } => "quota",
        PdbUpsert(_) | PdbRemove { .. } => "pdb",
        Event(_) => "event",
        Op(_) | Access(_) => "op",
        Feed { .. } | FeedRemove(_) | Synced => "feed",
        Inspected(_) => "inspect",
        Log { .. } => "logs",
    }
}
