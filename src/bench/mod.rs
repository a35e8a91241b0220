//! The scale harness behind `fabrik bench`: builds a simulated factory of a given size and
//! measures what a person would feel — start-up, per-tick update cost, sort/filter cost,
//! frame render cost, cells written for an unchanged frame, and resident memory. It prints
//! medians; nothing here is asserted in tests (machines are shared and noisy).

pub mod decode;

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

fn median(v: &[Duration]) -> Duration {
    quantile(v, 0.5)
}

/// The `q` quantile (nearest rank) of `v`.
fn quantile(v: &[Duration], q: f64) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    let i = ((v.len() as f64 * q).ceil() as usize).saturating_sub(1).min(v.len().saturating_sub(1));
    v.get(i).copied().unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", msf(d))
}

fn msf(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
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

/// Heap in use, in MiB: glibc's `mallinfo2` (every arena's allocated chunks plus the
/// blocks it mmapped). `None` where the allocator is not glibc's (the musl release).
fn heap_mib() -> Option<f64> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 takes no arguments and returns a plain struct by value.
        let m = unsafe { libc::mallinfo2() };
        Some((m.uordblks + m.hblkhd) as f64 / (1024.0 * 1024.0))
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

/// Gives freed heap pages back to the system, so RSS afterwards is what is still in use.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; no pointer is handed over.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// What one run found: the lines a person reads (stdout, or stderr under `--json`) and
/// every figure by name, printed as one JSON object under `--json`.
struct Report {
    json: bool,
    figures: serde_json::Map<String, serde_json::Value>,
}

impl Report {
    fn say(&self, line: String) {
        if self.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }

    fn put(&mut self, key: &str, value: impl Into<serde_json::Value>) {
        self.figures.insert(key.to_string(), value.into());
    }
}

/// What to run: the factory's size, frames drawn per view, simulator ticks applied.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub nodes: usize,
    pub frames: usize,
    pub ticks: usize,
    /// Tenants: the simulator's eight and teams up to this many.
    pub tenants: u32,
    /// One JSON object on stdout with every figure (the readable lines go to stderr).
    pub json: bool,
}

/// Runs the harness and returns every figure (also printed as one JSON object with `json`).
pub fn run(o: Options) -> serde_json::Value {
    let Options { nodes, frames, ticks, tenants, json } = o;
    let mut r = Report { json, figures: Default::default() };
    r.say(format!("fabrik scale harness: {nodes} nodes, {frames} frames per view, {ticks} ticks"));
    r.put("nodes_asked", nodes);
    r.put("frames_per_view", frames);
    r.put("ticks", ticks);
    let teams = tenants.saturating_sub(8);
    let t0 = Instant::now();
    let mut sim =
        Sim::new(SimConfig { seed: 42, nodes, tick_ms: 1000, churn: true, sharing_every: 0, dra_alpha: false, teams });
    let initial = sim.initial_deltas();
    let built = t0.elapsed();
    let n_deltas = initial.len();
    let (rss_sim, _) = rss_mib();
    let heap_sim = heap_mib();
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
    let mut kinds = serde_json::Map::new();
    for (k, (n, d)) in &by_kind {
        r.say(format!("  {k:<12} {n:>8} deltas {:>10}", ms(*d)));
        kinds.insert(k.to_string(), serde_json::json!({"deltas": n, "apply_ms": msf(*d)}));
    }
    r.put("initial_by_kind", kinds);
    let (rss, _) = rss_mib();
    r.say(format!(
        "factory: {} nodes, {} GPUs, {} MIG instances, {} pods",
        fleet.totals.nodes, fleet.totals.gpus, fleet.totals.mig_instances, fleet.totals.pods
    ));
    r.put(
        "factory",
        serde_json::json!({"nodes": fleet.totals.nodes, "gpus": fleet.totals.gpus,
        "mig_instances": fleet.totals.mig_instances, "pods": fleet.totals.pods, "tenants": fleet.tenants.len()}),
    );
    r.say(format!("simulator build + initial listing ({n_deltas} deltas): {}", ms(built)));
    r.say(format!("fleet applies the initial listing: {}", ms(applied)));
    r.say(format!(
        "RSS: {rss_sim:.0} MiB with the simulator and its initial listing, {rss:.0} MiB once the fleet holds it too"
    ));
    r.put("initial_deltas", n_deltas);
    r.put("sim_build_ms", msf(built));
    r.put("initial_apply_ms", msf(applied));
    r.put("rss_with_sim_mib", round1(rss_sim));
    r.put("rss_with_sim_and_fleet_mib", round1(rss));
    r.put("heap_sim_mib", heap_sim.map(round1));

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
    let first = first_prepare + t3.elapsed();
    r.say(format!("first frame (fleet view: rows built + sorted + drawn): {}", ms(first)));
    r.put("first_frame_ms", msf(first));

    let mut tick_apply = Vec::new();
    let mut tick_sim = Vec::new();
    let mut key_frame = Vec::new();
    let mut tick_deltas = Vec::new();
    for _ in 0..ticks {
        let t = Instant::now();
        let deltas = sim.step();
        tick_sim.push(t.elapsed());
        tick_deltas.push(deltas.len());
        let t = Instant::now();
        // As the terminal driver does: the clock goes in with the deltas, so an expensive
        // view's rebuild is throttled as it is in the cockpit.
        app.set_clock(t);
        app.apply(deltas);
        tick_apply.push(t.elapsed());
        // Keys between batches, as the loop takes them: the key, the rows it needs, the frame.
        for _ in 0..10 {
            let t = Instant::now();
            app.dispatch(Command::Down);
            app.prepare();
            let _ = term.draw(|f| app.draw(f));
            key_frame.push(t.elapsed());
        }
    }
    let deltas_per_tick = tick_deltas.iter().sum::<usize>() / tick_deltas.len().max(1);
    r.say(format!("one simulator tick computed (the simulator's own cost), median: {}", ms(median(&tick_sim))));
    r.say(format!(
        "one simulator tick applied ({deltas_per_tick} deltas: telemetry for up to 20,000 GPUs + churn), median: {}",
        ms(median(&tick_apply))
    ));
    r.say(format!(
        "a key to its frame between ticks ({} keys, fleet view): median {}, p99 {}",
        key_frame.len(),
        ms(median(&key_frame)),
        ms(quantile(&key_frame, 0.99))
    ));
    r.put("tick_sim_ms", msf(median(&tick_sim)));
    r.put("tick_apply_ms", msf(median(&tick_apply)));
    r.put("tick_deltas", deltas_per_tick);
    r.put(
        "key_to_frame_ms",
        serde_json::json!({"keys": key_frame.len(), "median": msf(median(&key_frame)),
        "p99": msf(quantile(&key_frame, 0.99))}),
    );

    let mut views = serde_json::Map::new();
    for (v, cmd) in [
        (ViewKind::Fleet, Command::ViewFleet),
        (ViewKind::Gpus, Command::ViewGpus),
        (ViewKind::Pods, Command::ViewPods),
        (ViewKind::Tenants, Command::ViewTenants),
        (ViewKind::Quotas, Command::ViewQuotas),
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
        let rows = app.ui.rows(v).len();
        r.say(format!(
            "{:<8} rows {rows:>7}: open {}, re-sort {}, frame median {}, cells written for an unchanged frame: {unchanged}",
            v.name(),
            ms(open),
            ms(sort),
            ms(median(&times))
        ));
        views.insert(
            v.name().to_string(),
            serde_json::json!({"rows": rows, "open_ms": msf(open), "resort_ms": msf(sort),
                "frame_ms": msf(median(&times)), "unchanged_frame_cells": unchanged}),
        );
    }
    r.put("views", views);
    let t = Instant::now();
    app.dispatch(Command::ViewPods);
    app.ui.table_mut(ViewKind::Pods).filter = "whisper".into();
    app.prepare();
    let filter = t.elapsed();
    let kept = app.ui.rows(ViewKind::Pods).len();
    r.say(format!("filter pods by \"whisper\": {} ({kept} rows)", ms(filter)));
    r.put("filter_pods", serde_json::json!({"ms": msf(filter), "rows": kept}));
    // As a person types it: a letter at a time, each narrowing the rows the one before kept.
    app.ui.table_mut(ViewKind::Pods).filter.clear();
    app.prepare();
    let word = "whisper";
    let mut letters = Vec::new();
    for end in 1..=word.len() {
        app.ui.table_mut(ViewKind::Pods).filter = word[..end].into();
        let t = Instant::now();
        app.prepare();
        letters.push(t.elapsed());
    }
    let worst = letters.iter().max().copied().unwrap_or_default();
    r.say(format!(
        "filter pods typed a letter at a time (w, wh, … {word}): median {}, worst {} per letter",
        ms(median(&letters)),
        ms(worst)
    ));
    r.put("filter_pods_typed", serde_json::json!({"median_ms": msf(median(&letters)), "max_ms": msf(worst)}));
    let (rss, peak) = rss_mib();
    r.say(format!("RSS at the end: {rss:.0} MiB (peak {peak:.0} MiB)"));
    r.put("rss_end_mib", round1(rss));
    r.put("rss_peak_mib", round1(peak));
    // The cockpit alone: the simulator (the cluster's stand-in) goes, freed pages go back,
    // and what stays is the fleet, the views and their caches.
    drop(sim);
    trim_heap();
    let (rss_alone, _) = rss_mib();
    let heap_alone = heap_mib();
    r.say(format!(
        "the cockpit alone (simulator dropped, heap trimmed): RSS {rss_alone:.0} MiB, heap in use {}",
        heap_alone.map_or("unknown (not glibc)".to_string(), |h| format!("{h:.0} MiB"))
    ));
    r.put("cockpit_rss_mib", round1(rss_alone));
    r.put("cockpit_heap_mib", heap_alone.map(round1));
    // For a heap profiler: leave without freeing, so what the cockpit holds is reported as
    // still allocated at exit (`FABRIK_BENCH_EXIT_ALONE=1 heaptrack fabrik bench …`).
    if std::env::var_os("FABRIK_BENCH_EXIT_ALONE").is_some() {
        std::process::exit(0);
    }
    let out = serde_json::Value::Object(r.figures);
    if json {
        println!("{out}");
    }
    out
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
        PodSecurity { .. } => "pod-security",
        MachineUpsert(_) | MachineRemove { .. } | CapiUpsert(_) | CapiRemove { .. } => "machine",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_run_reports_every_figure_as_json() {
        let v = run(Options { nodes: 6, frames: 2, ticks: 2, tenants: 20, json: false });
        // What a comparison across commits reads: present, of the right type, and the
        // factory the size that was asked for.
        assert_eq!(v["factory"]["nodes"], 6, "{v}");
        assert!(v["factory"]["gpus"].as_u64().is_some_and(|g| g >= 6), "{v}");
        for key in
            ["sim_build_ms", "initial_apply_ms", "first_frame_ms", "tick_apply_ms", "rss_end_mib", "cockpit_rss_mib"]
        {
            assert!(v[key].as_f64().is_some_and(|x| x >= 0.0), "{key}: {v}");
        }
        assert_eq!(v["key_to_frame_ms"]["keys"], 20, "ten keys after each of two ticks");
        let (p99, median) = (v["key_to_frame_ms"]["p99"].as_f64(), v["key_to_frame_ms"]["median"].as_f64());
        assert!(p99.zip(median).is_some_and(|(p, m)| p >= m), "{v}");
        // The eight and twelve teams (and the fleet's own tenant for namespaces no tenant
        // claims), each team with a quota.
        assert_eq!(v["factory"]["tenants"], 21, "{v}");
        assert!(v["views"]["quotas"]["rows"].as_u64().is_some_and(|q| q >= 20), "{v}");
        for view in ["fleet", "gpus", "pods", "tenants", "quotas"] {
            assert!(v["views"][view]["rows"].as_u64().is_some(), "{view}: {v}");
            assert_eq!(v["views"][view]["unchanged_frame_cells"], 0, "{view}: an unchanged frame writes nothing");
        }
        assert_eq!(v["views"]["fleet"]["rows"], 6);
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        assert!(v["cockpit_heap_mib"].as_f64().is_some_and(|h| h > 0.0), "{v}");
        // The JSON line is one object that parses back to the same figures.
        let back: serde_json::Value = serde_json::from_str(&v.to_string()).expect("well formed");
        assert_eq!(back, v);
    }

    #[test]
    fn quantiles_take_the_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(quantile(&v, 0.99), Duration::from_millis(99));
        assert_eq!(median(&v), Duration::from_millis(50));
        assert_eq!(quantile(&[], 0.99), Duration::ZERO);
    }
}
