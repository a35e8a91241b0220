//! The fleet view: one row per node — its state, allocation, telemetry and alerts.

use serde_json::json;

use super::cell::*;
use super::column::{Column, RowId, Value};
use super::tables::value_of;
use crate::model::*;
use crate::ui::json::{age_s, alloc, opt};

fn node(f: &Fleet, r: RowId) -> Option<(NodeId, &Node)> {
    let id = r.node()?;
    Some((id, f.node(id)?))
}

/// A value of the row's node; `Absent` when the node is gone.
fn on<'a>(f: &'a Fleet, r: RowId, v: impl FnOnce(NodeId, &'a Node) -> Value<'a>) -> Value<'a> {
    node(f, r).map_or(Value::Absent, |(id, n)| v(id, n))
}

/// A cell of the row's node; blank when the node is gone.
fn draw(f: &Fleet, r: RowId, c: impl FnOnce(NodeId, &Node) -> Cell) -> Cell {
    node(f, r).map_or_else(blank, |(id, n)| c(id, n))
}

pub const COLUMNS: &[Column] = &[
    Column::new("NAME", 12).min(10).grow(2).filter().value(|f, r| on(f, r, |_, n| Value::text(f.str_of(n.name)))),
    Column::new("STATUS", 17)
        .min(8)
        .filter()
        .value(|f, r| on(f, r, |_, n| Value::text(node_status(n).0)))
        .cell(|f, r| draw(f, r, |_, n| (node_status(n).0.into(), node_status(n).1))),
    Column::new("MODEL", 10)
        .min(6)
        .priority(4)
        .filter()
        .value(|f, r| on(f, r, |_, n| n.gpu_model.map_or(Value::Absent, |m| Value::text(m.name()))))
        .cell(|f, r| draw(f, r, |_, n| text(n.gpu_model.map_or("-", |m| m.name())))),
    Column::new("GPUS", 4).right().priority(3).value(|f, r| on(f, r, |_, n| Value::Num(n.gpu_count().into()))),
    Column::new("ALLOC", 5).right().value(|f, r| on(f, r, |_, n| Value::Num(f.node_allocated_gpus(n).into()))).cell(
        |f, r| {
            draw(f, r, |_, n| {
                let a = f.node_allocated_gpus(n);
                // At least: some MIG instances are held on GPUs nobody named.
                let at_least = if f.node_allocation_is_estimate(n) { "≥" } else { "" };
                (format!("{at_least}{a}/{}", n.gpu_count()), if a == n.gpu_count() { "ui.text" } else { "gpu.free" })
            })
        },
    ),
    // Time-slicing / MPS: replicas held of those offered (`TS×4 5/32`); `-` when not shared.
    Column::new("SHARE", 11)
        .min(5)
        .right()
        .priority(2)
        .value(|f, r| {
            on(f, r, |_, n| if n.sharing.shared() { Value::Num(n.shares_held.into()) } else { Value::Absent })
        })
        .cell(|f, r| draw(f, r, |_, n| share_cell(f, n))),
    Column::new("UTIL", 8)
        .min(5)
        .right()
        .priority(1)
        .live()
        .value(|f, r| on(f, r, |_, n| node_avg(f, n).util.map_or(Value::Unknown, |u| Value::Num(u.into()))))
        .cell(|f, r| {
            draw(f, r, |_, n| {
                let stale = n
                    .gpus
                    .iter()
                    .filter_map(|g| f.gpu(*g))
                    .any(|g| g.last_sample_at.is_some() && g.telemetry_stale(f.now, f.thresholds.stale_ms));
                let a = node_avg(f, n);
                let of = of_measured(a.util_of, a.gpus);
                match a.util {
                    // No sample ever (a cluster without node agents): unknown, not zero.
                    None => muted("—"),
                    Some(u) if stale => (format!("{u}%?{of}"), "ui.stale"),
                    Some(u) => (format!("{u}%{of}"), util_token(u)),
                }
            })
        }),
    Column::new("MEM", 8)
        .min(5)
        .right()
        .priority(5)
        .live()
        .value(|f, r| on(f, r, |_, n| node_avg(f, n).mem_pct.map_or(Value::Unknown, |m| Value::Num(m.into()))))
        .cell(|f, r| {
            draw(f, r, |_, n| {
                let a = node_avg(f, n);
                a.mem_pct
                    .map(|m| text(format!("{m}%{}", of_measured(a.sampled_of, a.gpus))))
                    .unwrap_or_else(|| muted("—"))
            })
        }),
    Column::new("POWER", 10)
        .min(6)
        .right()
        .priority(5)
        .live()
        .value(|f, r| on(f, r, |_, n| node_avg(f, n).power_w.map_or(Value::Unknown, |w| Value::Num(w.into()))))
        .cell(|f, r| {
            draw(f, r, |_, n| {
                let a = node_avg(f, n);
                a.power_w
                    .map(|w| text(format!("{w}W{}", of_measured(a.sampled_of, a.gpus))))
                    .unwrap_or_else(|| muted("—"))
            })
        }),
    Column::new("MIG", 20).min(8).grow(1).priority(4).filter().value(|f, r| Value::of_cell(mig(f, r))).cell(mig),
    Column::new("IDLE", 4)
        .right()
        .live()
        .value(|f, r| {
            on(f, r, |_, n| match idle(f, n) {
                Idle::Unknown => Value::Unknown,
                Idle::Count(i) => Value::Num(i.into()),
            })
        })
        .cell(|f, r| {
            draw(f, r, |_, n| match idle(f, n) {
                Idle::Unknown => muted("—"),
                Idle::Count(0) => muted("0"),
                Idle::Count(i) => (i.to_string(), "gpu.idle"),
            })
        }),
    Column::new("PODS", 4).right().priority(2).value(|f, r| on(f, r, |_, n| Value::Num(n.pods.into()))),
    Column::new("ALERTS", 14).min(7).grow(1).filter().value(|f, r| Value::of_cell(alerts(f, r))).cell(alerts),
    Column::new("AGE", 4).right().priority(6).value(|f, r| on(f, r, |_, n| Value::Age(n.created))),
];

fn share_cell(f: &Fleet, n: &Node) -> Cell {
    if !n.sharing.shared() {
        return muted("-");
    }
    let total = n.shares_total(&f.gpus);
    let tok = if n.shares_held >= total { "ui.text" } else { "gpu.free" };
    (format!("{} {}/{total}", n.sharing.label(), n.shares_held), tok)
}

/// A node's sharing for the JSON export; `null` when its GPUs are not shared.
pub fn sharing_json(f: &Fleet, n: &Node) -> serde_json::Value {
    if !n.sharing.shared() {
        return serde_json::Value::Null;
    }
    let config = n.label(&f.interner, crate::model::sharing::DEVICE_PLUGIN_CONFIG);
    json!({
        "strategy": n.sharing.mode.as_str(),
        "replicas": n.sharing.replicas,
        "renamed": n.sharing.renamed,
        "config": opt(config),
        "gpus": n.shares_total(&f.gpus) / u32::from(n.sharing.replicas),
        "shares": n.shares_total(&f.gpus),
        "shares_held": n.shares_held,
        "shares_placement_unknown": n.shares_unplaced,
    })
}

fn mig(f: &Fleet, r: RowId) -> Cell {
    draw(f, r, |_, n| {
        let cfg = f.str_of(n.mig_config);
        let state = n.mig_state;
        let tok = match state {
            MigConfigState::Pending | MigConfigState::Rebooting => "status.pending",
            MigConfigState::Failed => "status.failed",
            _ => "ui.text",
        };
        if cfg == "all-disabled" || cfg.is_empty() { muted("off") } else { (format!("{cfg} {}", state.as_str()), tok) }
    })
}

fn alerts(f: &Fleet, r: RowId) -> Cell {
    draw(f, r, |id, n| {
        let a = node_alerts(f, id, n);
        if a.is_empty() { muted("") } else { (a.join(","), "severity.error") }
    })
}

enum Idle {
    Count(u32),
    /// Allocated, but nothing measures it: not idle, not busy, unknown.
    Unknown,
}

fn idle(f: &Fleet, n: &Node) -> Idle {
    let (i, measured) = node_idle(f, n);
    // Replicas of shared GPUs held are allocated too: idle or not is unknown unmeasured.
    let allocated = n.gpus_allocated + n.mig_allocated + n.shares_held + f.node_allocated_gpus(n);
    if i == 0 && measured == 0 && allocated > 0 { Idle::Unknown } else { Idle::Count(i) }
}

/// A node's telemetry over what a source measured, never with the unmeasured as zeros:
/// mean utilisation over the GPUs whose utilisation is known, mean memory use and total
/// power over the GPUs with any sample; each `None` when nothing was measured, and with
/// over how many GPUs it was (`*_of`), out of `gpus`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeAvg {
    pub util: Option<u8>,
    pub util_of: u32,
    pub mem_pct: Option<u8>,
    pub power_w: Option<u32>,
    /// GPUs with any sample (the base of `mem_pct` and `power_w`).
    pub sampled_of: u32,
    pub gpus: u32,
}

/// One pass, no allocation: it runs for every visible fleet row on every frame.
pub fn node_avg(f: &Fleet, n: &Node) -> NodeAvg {
    let (mut gpus, mut k, mut util_sum, mut util_of, mut mem_sum, mut power) = (0u32, 0u32, 0u32, 0u32, 0u32, 0u32);
    for g in n.gpus.iter().filter_map(|g| f.gpu(*g)) {
        gpus += 1;
        if g.last_sample_at.is_none() {
            continue;
        }
        k += 1;
        mem_sum += u32::from(g.last.mem_pct);
        power += u32::from(g.last.power_w);
        if let Some(u) = g.last.util {
            util_sum += u32::from(u);
            util_of += 1;
        }
    }
    NodeAvg {
        util: (util_of > 0).then(|| (util_sum / util_of) as u8),
        util_of,
        mem_pct: (k > 0).then(|| (mem_sum / k) as u8),
        power_w: (k > 0).then_some(power),
        sampled_of: k,
        gpus,
    }
}

/// Idle-but-allocated devices on a node, and how many of its allocated devices (whole
/// GPUs and MIG instances a pod is bound to) are measured: what the idle count is among.
fn node_idle(f: &Fleet, n: &Node) -> (u32, u32) {
    let mut idle = 0;
    let mut measured = 0;
    for g in n.gpus.iter().filter_map(|g| f.gpu(*g)) {
        if !g.mig_enabled && !g.pods.is_empty() {
            idle += g.idle_allocated as u32;
            measured += g.measured as u32;
        }
        for i in g.instances.iter().filter(|i| i.pod.is_some()) {
            idle += i.idle_allocated as u32;
            measured += i.util.is_some() as u32;
        }
    }
    (idle, measured)
}

fn node_alerts(f: &Fleet, id: NodeId, n: &Node) -> Vec<String> {
    let of = |t: AlertTarget| f.alerts.values().filter(move |a| a.target == t);
    let mut v: Vec<String> = of(AlertTarget::Node(id)).map(|a| a.kind.label()).collect();
    for g in &n.gpus {
        for a in of(AlertTarget::Gpu(*g)) {
            let l = a.kind.label();
            if !v.contains(&l) {
                v.push(l);
            }
        }
    }
    v
}

pub fn node_status(n: &Node) -> (&'static str, &'static str) {
    match (n.ready, n.cordoned) {
        (true, false) => ("Ready", "status.ready"),
        (true, true) => ("Ready,Cordoned", "status.cordoned"),
        (false, false) => ("NotReady", "status.notready"),
        (false, true) => ("NotReady,Cordoned", "status.notready"),
    }
}

/// The node's row of the JSON snapshot (docs/snapshot.md, `fleet`).
pub fn json(f: &Fleet, row: RowId) -> Option<serde_json::Value> {
    let (_, n) = node(f, row)?;
    let col = |name| value_of(COLUMNS, name, f, row).to_json();
    let gpus: Vec<&Gpu> = n.gpus.iter().filter_map(|g| f.gpu(*g)).collect();
    let avg = node_avg(f, n);
    let idle = (avg.sampled_of > 0).then(|| {
        gpus.iter()
            .map(|g| u32::from(g.idle_allocated) + g.instances.iter().filter(|i| i.idle_allocated).count() as u32)
            .sum::<u32>()
    });
    let instances: u32 = gpus.iter().map(|g| g.instances.len() as u32).sum();
    let bound: u32 = gpus.iter().map(|g| g.mig_in_use()).sum();
    let cfg = f.str_of(n.mig_config);
    let mig = if cfg.is_empty() || cfg == "all-disabled" {
        serde_json::Value::Null
    } else {
        json!({ "config": cfg, "state": opt((n.mig_state != MigConfigState::None).then(|| n.mig_state.as_str())) })
    };
    let alerts = alerts(f, row).0;
    let alerts: Vec<&str> = if alerts.is_empty() { Vec::new() } else { alerts.split(',').collect() };
    Some(json!({
        "name": col("NAME"),
        "status": col("STATUS"),
        "ready": n.ready,
        "cordoned": n.cordoned,
        "managed_by": crate::ui::json::managed_by(f, &gitops::key("node", None, f.str_of(n.name))),
        "machine": f.machine_of_node(f.str_of(n.name)).map_or(serde_json::Value::Null, |m| json!({
            "namespace": m.namespace,
            "name": m.name,
            "cluster": m.cluster,
            "phase": m.phase,
            "failure": m.failure,
            "unhealthy": m.unhealthy,
            "remediating": m.remediating,
            "deleting": m.deleting,
            "state": m.state_text(),
        })),
        "host": f.host_of_node(f.str_of(n.name)).map_or(serde_json::Value::Null, |h| super::hosts::host_json(f, h)),
        "model": col("MODEL"),
        "gpus": col("GPUS"),
        "alloc_gpus": alloc(f.node_allocated_gpus(n), n.gpu_count()),
        "alloc_gpus_lower_bound": f.node_allocation_is_estimate(n),
        "mig_alloc": alloc(n.mig_allocated, instances),
        "mig_held_instance_unknown": n.mig_allocated.saturating_sub(bound),
        "util_pct": col("UTIL"),
        "util_measured_gpus": avg.util_of,
        "mem_used_pct": col("MEM"),
        "power_w": col("POWER"),
        "telemetry_gpus": avg.sampled_of,
        "mig": mig,
        "sharing": sharing_json(f, n),
        "idle_allocated": opt(idle),
        "pods": col("PODS"),
        "alerts": alerts,
        "created_ms": col("AGE"),
        "age_s": age_s(f, n.created),
    }))
}
