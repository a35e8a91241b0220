//! Criterion benches of the cockpit's hot paths on a simulated fleet of 2,000 nodes (the
//! demo's mix of models, MIG, churn): deltas applied (the initial listing, then live ticks), a view's rows
//! sorted and filtered (the GPUs view, the largest), and a frame rendered. `cargo bench
//! --bench hot`; the numbers are the measurement (issue 18), never asserted anywhere.
//! `fabrik bench` measures the same paths at 65,000 nodes end to end.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use fabrik::model::{Fleet, Thresholds};
use fabrik::sim::{Sim, SimConfig};
use fabrik::ui::command::ViewKind;
use fabrik::ui::views::tables;

const NODES: usize = 2_000;

fn sim() -> Sim {
    Sim::new(SimConfig {
        seed: 42,
        nodes: NODES,
        tick_ms: 1000,
        churn: true,
        sharing_every: 0,
        dra_alpha: false,
        teams: 0,
    })
}

/// The fleet after the initial listing and a few live ticks, and the simulator to go on.
fn fleet() -> (Sim, Fleet) {
    let mut s = sim();
    let mut f = Fleet::new(Thresholds::default());
    for d in s.initial_deltas() {
        f.apply(d);
    }
    for _ in 0..3 {
        for d in s.step() {
            f.apply(d);
        }
    }
    (s, f)
}

fn apply(c: &mut Criterion) {
    let initial = sim().initial_deltas();
    let mut g = c.benchmark_group("apply");
    g.sample_size(10);
    g.bench_function("initial listing, 2000 nodes", |b| {
        b.iter_batched(
            || initial.clone(),
            |deltas| {
                let mut f = Fleet::new(Thresholds::default());
                for d in deltas {
                    f.apply(d);
                }
                f
            },
            BatchSize::LargeInput,
        )
    });
    let (mut s, mut f) = fleet();
    g.bench_function("one live tick (telemetry, pods, events)", |b| {
        b.iter_batched(
            || s.step(),
            |deltas| {
                for d in deltas {
                    f.apply(d);
                }
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn rows(c: &mut Criterion) {
    let (_, f) = fleet();
    let mut g = c.benchmark_group("gpus view, 2000 nodes");
    g.bench_function("sorted by UTIL, descending", |b| {
        b.iter(|| black_box(tables::rows(&f, ViewKind::Gpus, "", Some("UTIL"), true)))
    });
    g.bench_function("filtered by 'h200'", |b| {
        b.iter(|| black_box(tables::rows(&f, ViewKind::Gpus, "h200", None, false)))
    });
    g.finish();
}

fn render(c: &mut Criterion) {
    let (s, f) = fleet();
    let theme = fabrik::ui::theme::Theme::builtin("dark").expect("dark is builtin");
    let (_, mut app) = fabrik::testing::app_over(s, f, 42, theme);
    let mut g = c.benchmark_group("render 200x50");
    g.bench_function("fleet view frame", |b| b.iter(|| black_box(fabrik::testing::render_app(&mut app, 200, 50))));
    g.finish();
}

criterion_group!(benches, apply, rows, render);
criterion_main!(benches);
