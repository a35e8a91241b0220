//! The GPUs view: one row per physical GPU, its MIG instances as rows under it.

use serde_json::json;

use super::cell::*;
use super::column::{Column, RowId, Value};
use super::tables::value_of;
use crate::model::*;
use crate::ui::json::{MIB, age_s, alloc, opt};

/// The row's GPU, and the MIG instance when it is an instance row.
enum Row<'a> {
    Gpu(GpuId, &'a Gpu),
    Mig(GpuId, &'a Gpu, usize, &'a MigInstance),
}

fn row(f: &Fleet, r: RowId) -> Option<Row<'_>> {
    match r {
        RowId::Gpu(g) => Some(Row::Gpu(g, f.gpu(g)?)),
        RowId::Mig(g, i) => {
            let gpu = f.gpu(g)?;
            Some(Row::Mig(g, gpu, i as usize, gpu.instances.get(i as usize)?))
        }
        _ => None,
    }
}

/// A GPU row's value; MIG instance rows follow their GPU and are never sorted by it.
fn on<'a>(f: &'a Fleet, r: RowId, v: impl FnOnce(GpuId, &'a Gpu) -> Value<'a>) -> Value<'a> {
    match row(f, r) {
        Some(Row::Gpu(g, gpu)) => v(g, gpu),
        _ => Value::Absent,
    }
}

/// A cell of a GPU row, muted-empty on an instance row.
fn gpu_only(f: &Fleet, r: RowId, c: impl FnOnce(GpuId, &Gpu) -> Cell) -> Cell {
    match row(f, r) {
        Some(Row::Gpu(g, gpu)) => c(g, gpu),
        Some(Row::Mig(..)) => muted(""),
        None => blank(),
    }
}

/// A measured figure of a GPU row: `Unknown` before its first sample.
fn sampled<'a>(f: &'a Fleet, r: RowId, v: impl FnOnce(&Gpu) -> Option<i64>) -> Value<'a> {
    on(f, r, |_, g| g.last_sample_at.and(v(g)).map_or(Value::Unknown, Value::Num))
}

pub const COLUMNS: &[Column] = &[
    Column::new("NODE", 10)
        .grow(1)
        .filter()
        .value(|f, r| on(f, r, |_, g| f.node(g.node).map_or(Value::Absent, |n| Value::text(f.str_of(n.name)))))
        .cell(|f, r| gpu_only(f, r, |_, g| text(f.node(g.node).map(|n| f.str_of(n.name)).unwrap_or(""))))
        .text(|f, r| match row(f, r) {
            Some(Row::Gpu(_, g)) => f.node(g.node).map_or("", |n| f.str_of(n.name)).into(),
            _ => "".into(),
        }),
    Column::new("GPU", 15).min(6).grow(1).filter().value(|f, r| on(f, r, |_, g| Value::Num(g.index.into()))).cell(
        |f, r| match row(f, r) {
            Some(Row::Gpu(_, g)) => text(format!("gpu{}", g.index)),
            Some(Row::Mig(_, g, _, i)) => {
                let p = crate::mig::profile(g.model, i.placement.profile);
                (format!("  └ {} @{}", p.name, i.placement.start), "gpu.mig.used")
            }
            None => blank(),
        },
    ),
    Column::new("MODEL", 10)
        .min(6)
        .priority(3)
        .filter()
        .value(|f, r| on(f, r, |_, g| Value::text(g.model.name())))
        .cell(|f, r| gpu_only(f, r, |_, g| text(g.model.name())))
        .text(|f, r| match row(f, r) {
            Some(Row::Gpu(_, g)) => g.model.name().into(),
            _ => "".into(),
        }),
    Column::new("MODE", 4)
        .priority(4)
        .filter()
        .value(|f, r| {
            on(f, r, |_, g| match shared(f, g) {
                Some(s) => Value::text(s.mode.as_str()),
                None if partitionable(g) => Value::text("dynamic-mig"),
                None if g.dra.as_ref().is_some_and(|d| d.multi) => Value::text("capacity-shared"),
                None => Value::text(if g.mig_enabled { "mig" } else { "full" }),
            })
        })
        .cell(|f, r| match row(f, r) {
            // Partitions made per claim from the GPU's counters (DRA dynamic MIG).
            Some(Row::Gpu(_, g)) if partitionable(g) => ("dMIG".into(), "gpu.mig.used"),
            // Several claims share it by capacity (DRA consumable capacity).
            Some(Row::Gpu(_, g)) if g.dra.as_ref().is_some_and(|d| d.multi) => ("cap".into(), "gpu.mig.used"),
            Some(Row::Gpu(_, g)) if g.mig_enabled => ("MIG".into(), "gpu.mig.used"),
            Some(Row::Gpu(_, g)) if shared(f, g).is_some() => {
                (shared(f, g).map(|s| s.label()).unwrap_or_default(), "gpu.mig.used")
            }
            Some(Row::Gpu(..)) => muted("full"),
            // Sharing on top of MIG: the device plugin time-slices this profile's instances.
            Some(Row::Mig(_, g, _, i)) => match mig_sharing(f, g, i) {
                Some((strategy, replicas)) => (format!("{strategy}×{replicas}"), "gpu.mig.used"),
                None => muted("mig"),
            },
            None => blank(),
        }),
    Column::new("UTIL", 4).right().live().value(|f, r| sampled(f, r, |g| g.last.util.map(i64::from))).cell(|f, r| {
        match row(f, r) {
            Some(Row::Gpu(_, g)) if g.last_sample_at.is_none() => muted("—"),
            Some(Row::Gpu(_, g)) => gpu_util_cell(f, g),
            Some(Row::Mig(gid, _, idx, i)) => {
                // Pods on the node hold this many of its profile without a known instance:
                // this one may be among them.
                if i.pod.is_some() || f.instance_maybe_held(gid, idx) > 0 { util_cell(i.util) } else { muted("-") }
            }
            None => blank(),
        }
    }),
    Column::new("MEM", 8)
        .min(5)
        .right()
        .priority(5)
        .live()
        .value(|f, r| sampled(f, r, |g| Some((g.mem_used_mib() / 1024).into())))
        .cell(|f, r| match row(f, r) {
            Some(Row::Gpu(_, g)) if g.last_sample_at.is_none() => muted(format!("?/{}G", g.memory_mib / 1024)),
            Some(Row::Gpu(_, g)) => text(format!("{}/{}G", g.mem_used_mib() / 1024, g.memory_mib / 1024)),
            Some(Row::Mig(_, g, _, i)) => {
                let p = crate::mig::profile(g.model, i.placement.profile);
                text(format!("{}/{}G", i.mem_used_mib / 1024, p.memory_mib / 1024))
            }
            None => blank(),
        }),
    Column::new("POWER", 5)
        .right()
        .priority(4)
        .live()
        .value(|f, r| sampled(f, r, |g| Some(g.last.power_w.into())))
        .cell(|f, r| {
            gpu_only(
                f,
                r,
                |_, g| {
                    if g.last_sample_at.is_none() { muted("—") } else { text(format!("{}W", g.last.power_w)) }
                },
            )
        }),
    Column::new("TEMP", 4).right().priority(5).live().value(|f, r| sampled(f, r, |g| Some(g.last.temp_c.into()))).cell(
        |f, r| {
            gpu_only(
                f,
                r,
                |_, g| {
                    if g.last_sample_at.is_none() { muted("—") } else { text(format!("{}C", g.last.temp_c)) }
                },
            )
        },
    ),
    Column::new("TENANT", 13)
        .min(8)
        .grow(1)
        .priority(2)
        .filter()
        .value(|f, r| on(f, r, |_, g| tenant(f, g.pods.first().copied()).map_or(Value::Absent, Value::text)))
        .cell(|f, r| match row(f, r) {
            Some(_) => tenant(f, row_pod(f, r)).map(text).unwrap_or_else(|| muted("")),
            None => blank(),
        })
        .text(|f, r| tenant(f, row_pod(f, r)).unwrap_or("").into()),
    Column::new("POD", 22).min(12).grow(2).priority(1).filter().value(|f, r| Value::of_cell(pod(f, r))).cell(pod),
    Column::new("IDLE", 8)
        .priority(1)
        .live()
        .value(|f, r| on(f, r, |_, g| g.low_since.filter(|_| g.idle_allocated).map_or(Value::Absent, Value::Age)))
        .cell(|f, r| match row(f, r) {
            Some(Row::Gpu(_, g)) => idle_for(f, g.low_since, g.idle_allocated),
            Some(Row::Mig(.., i)) => idle_for(f, i.low_since, i.idle_allocated),
            None => blank(),
        }),
    Column::new("FITS", 12).priority(5).value(|f, r| Value::of_cell(fits(f, r))).cell(fits),
    Column::new("HEALTH", 12).min(7).filter().value(|f, r| Value::of_cell(health(f, r))).cell(health),
];

/// A MIG instance the device plugin shares (`nvidia.com/mig-<profile>.replicas` > 1 on its
/// node): the short strategy and the replicas.
pub fn mig_sharing(f: &Fleet, g: &Gpu, i: &crate::model::MigInstance) -> Option<(&'static str, u16)> {
    let n = f.node(g.node)?;
    let resource =
        format!("nvidia.com/mig-{}", crate::mig::profile(g.model, i.placement.profile).name.replace('+', "."));
    let replicas = f.mig_replicas(n, f.interner.get(&resource)?);
    if replicas <= 1 {
        return None;
    }
    let strategy = match n.label(&f.interner, &format!("{resource}.sharing-strategy")) {
        Some("mps") => "MPS",
        _ => "TS",
    };
    Some((strategy, replicas))
}

fn partitionable(g: &Gpu) -> bool {
    g.dra.as_ref().is_some_and(|d| d.partitionable)
}

/// Bytes as people read capacity: `40Gi`, `512Mi`, or the plain number for other units.
fn amount(name: &str, v: i64) -> String {
    if name == "memory" && v >= 1 << 30 {
        format!("{}Gi", v >> 30)
    } else if name == "memory" && v >= 1 << 20 {
        format!("{}Mi", v >> 20)
    } else {
        v.to_string()
    }
}

/// A device shared by capacity: `3 claims · memory 40Gi left`.
fn capacity_cell(d: &crate::model::GpuDra) -> Cell {
    let left: Vec<String> =
        d.capacity.iter().filter_map(|(k, _)| Some(format!("{k} {} left", amount(k, d.left(k)?)))).collect();
    let claims = if d.shares.len() == 1 { "1 claim".to_string() } else { format!("{} claims", d.shares.len()) };
    let tok = if d.shares.is_empty() { "gpu.free" } else { "ui.text" };
    (format!("{claims} · {}", left.join(", ")), tok)
}

/// The sharing of a whole GPU the device plugin hands out as replicas.
fn shared(f: &Fleet, g: &Gpu) -> Option<crate::model::Sharing> {
    let s = f.node(g.node)?.sharing;
    (s.shared() && !g.mig_enabled).then_some(s)
}

/// A shared GPU's replicas: `4 shares: 3 held · train-0 +2`, or, when the pods on the node
/// hold replicas nobody placed on a GPU, that this one may be among them.
fn shares_cell(f: &Fleet, gid: GpuId, g: &Gpu, s: crate::model::Sharing) -> Cell {
    let held = f.gpu_shares_held(g);
    let unplaced = f.node(g.node).map_or(0, |n| n.shares_unplaced);
    let first = g.pods.first().and_then(|p| f.pod(*p)).map(|p| &*p.name);
    let more = if g.pods.len() > 1 { format!(" +{}", g.pods.len() - 1) } else { String::new() };
    // How busy each holder keeps it (its processes' SM share), when the agent measures it.
    let mut b: Vec<u8> =
        g.pods.iter().filter_map(|p| f.pod(*p)).filter_map(|p| super::pods::share_util(f, gid, p)).collect();
    let busy = if b.is_empty() {
        String::new()
    } else {
        b.sort_unstable_by(|a, b| b.cmp(a));
        format!(" ({})", b.iter().map(|u| format!("{u}%")).collect::<Vec<_>>().join(" "))
    };
    // Held by a pod that keeps its share under the idle threshold for the window.
    let idle: u32 = f.idle_shares(gid).iter().map(|(_, _, k)| k).sum();
    let (held_idle, tok) =
        if idle > 0 { (format!("{held} held, {idle} idle"), "gpu.idle") } else { (format!("{held} held"), "ui.text") };
    match (held, first, unplaced) {
        (0, _, 0) => (format!("{} shares free", s.replicas), "gpu.free"),
        (0, _, k) => muted(format!("{} shares, placement unknown ({k} held on node)", s.replicas)),
        (_, Some(p), _) => (format!("{} shares: {held_idle}{busy} · {p}{more}", s.replicas), tok),
        (_, None, _) => (format!("{} shares: {held_idle}{busy}", s.replicas), tok),
    }
}

/// The pod a row shows: a GPU's first, an instance's own.
fn row_pod(f: &Fleet, r: RowId) -> Option<PodId> {
    match row(f, r)? {
        Row::Gpu(_, g) => g.pods.first().copied(),
        Row::Mig(.., i) => i.pod,
    }
}

fn tenant(f: &Fleet, pod: Option<PodId>) -> Option<&str> {
    pod.and_then(|p| f.pod(p)).and_then(|p| f.tenant(p.tenant)).map(|t| f.str_of(t.name))
}

fn pod(f: &Fleet, r: RowId) -> Cell {
    match row(f, r) {
        Some(Row::Gpu(gid, gpu)) if gpu.mig_enabled => {
            let used = gpu.mig_in_use() as usize;
            match f.gpu_mig_maybe_held(gid) {
                0 => text(format!("{used}/{} MIG in use", gpu.instances.len())),
                // Not known to be free: held on the node, which instance unknown.
                maybe => text(format!("{used}/{} in use, {maybe} unknown", gpu.instances.len())),
            }
        }
        Some(Row::Gpu(_, gpu)) if gpu.dra.as_ref().is_some_and(|d| d.multi) => {
            gpu.dra.as_deref().map_or_else(blank, capacity_cell)
        }
        Some(Row::Gpu(gid, gpu)) if shared(f, gpu).is_some() => match shared(f, gpu) {
            Some(s) => shares_cell(f, gid, gpu, s),
            None => blank(),
        },
        Some(Row::Gpu(_, gpu)) => match gpu.pods.first().and_then(|p| f.pod(*p)) {
            Some(p) => text(&*p.name),
            None => match f.node(gpu.node).map_or(0, |n| f.whole_gpus_unbound(n)) {
                0 => ("free".into(), "gpu.free"),
                // Pods hold GPUs here nobody named: this may be one.
                k => muted(format!("unknown: node holds {k}")),
            },
        },
        Some(Row::Mig(gid, _, idx, i)) => match i.pod.and_then(|p| f.pod(p)) {
            Some(p) => text(&*p.name),
            None => match f.instance_maybe_held(gid, idx) {
                0 => ("free".into(), "gpu.free"),
                maybe => muted(format!("unknown: node holds {maybe}")),
            },
        },
        None => blank(),
    }
}

fn fits(f: &Fleet, r: RowId) -> Cell {
    gpu_only(f, r, |gid, g| match g.dra.as_deref().filter(|d| d.partitionable) {
        Some(d) => text(counter_fits_text(d)),
        None if g.mig_enabled => text(fits_text(f, gid)),
        None => muted(""),
    })
}

/// What a new claim could get from a partitionable GPU's counters: `7g 1g×5 2g×2`, `full`
/// while nothing is taken, or `no room`.
pub fn counter_fits_text(d: &crate::model::GpuDra) -> String {
    let mut v: Vec<String> = Vec::new();
    if d.whole_fits {
        v.push("whole".into());
    }
    v.extend(
        d.fits
            .iter()
            .filter(|c| c.fits > 0)
            .map(|c| format!("{}×{}", c.profile.split('.').next().unwrap_or(&c.profile), c.fits)),
    );
    if v.is_empty() { "no room".into() } else { v.join(" ") }
}

fn health(f: &Fleet, r: RowId) -> Cell {
    gpu_only(f, r, |_, gpu| match (gpu.xid, gpu.ecc_uncorrected) {
        // A DRA taint is the cluster's word on the device, stale telemetry or not.
        _ if gpu.dra.as_ref().is_some_and(|d| !d.taints.is_empty()) => {
            let t = gpu.dra.as_ref().and_then(|d| d.worst_taint());
            let effect = t.map_or("", |t| if t.evicts() { "NoExec" } else { "NoSched" });
            (
                format!("taint {effect}"),
                if t.is_some_and(|t| t.evicts()) { "severity.error" } else { "severity.warning" },
            )
        }
        _ if gpu.telemetry_stale(f.now, f.thresholds.stale_ms) => (
            match gpu.last_sample_at {
                Some(t) => format!("stale {}", age(f.now, t)),
                None => "no data".into(),
            },
            "ui.stale",
        ),
        (Some((code, _)), _) => (format!("XID {code}"), "severity.error"),
        (None, n) if n > 0 => (format!("ECC {n}"), "severity.error"),
        _ => ("ok".into(), "status.ready"),
    })
}

/// The MIG profiles that still fit on a GPU: `1g×3 2g×1`, `no room`, or `-` before the
/// fleet has worked it out.
pub fn fits_text(f: &Fleet, g: GpuId) -> String {
    let Some(gpu) = f.gpu(g) else { return String::new() };
    let Some(frag) = f.fragmentation(g) else { return "-".into() };
    let mut v: Vec<String> = frag
        .fits
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(p, n)| format!("{}×{n}", crate::mig::profile(gpu.model, *p).name.split('.').next().unwrap_or("")))
        .collect();
    v.dedup();
    if v.is_empty() { "no room".into() } else { v.join(" ") }
}

/// The table's text of a cell, `null` where the table shows nothing or a dash.
fn cell_json(c: Cell) -> serde_json::Value {
    let s = c.0;
    let s = s.trim();
    if s.is_empty() || s == "-" || s == "—" { serde_json::Value::Null } else { s.into() }
}

/// The GPU's row of the JSON snapshot (docs/snapshot.md, `gpus`), its instances inside.
pub fn json(f: &Fleet, r: RowId) -> Option<serde_json::Value> {
    let Some(Row::Gpu(gid, g)) = row(f, r) else { return None };
    let col = |name| value_of(COLUMNS, name, f, r).to_json();
    let m = g.last_sample_at.is_some();
    let tenant_of = |p: Option<PodId>| opt(tenant(f, p));
    let instances: Vec<serde_json::Value> = g
        .instances
        .iter()
        .map(|i| {
            let p = crate::mig::profile(g.model, i.placement.profile);
            let pod = i.pod.and_then(|p| f.pod(p));
            json!({
                "profile": p.name,
                "start": i.placement.start,
                "uuid": f.str_of(i.uuid),
                "util_pct": opt(i.util),
                "mem_used_bytes": opt(m.then(|| u64::from(i.mem_used_mib) * MIB)),
                "mem_total_bytes": u64::from(p.memory_mib) * MIB,
                "tenant": tenant_of(i.pod),
                "pod": opt(pod.map(|p| f.pod_display(p))),
                "idle_for_s": opt(i.low_since.filter(|_| i.idle_allocated).map(|t| age_s(f, t))),
                "replicas": mig_sharing(f, g, i).map(|(_, r)| r),
            })
        })
        .collect();
    let used = g.mig_in_use();
    let stale = m && g.telemetry_stale(f.now, f.thresholds.stale_ms);
    Some(json!({
        "node": col("NODE"),
        "gpu": col("GPU"),
        "uuid": f.str_of(g.uuid),
        "model": col("MODEL"),
        "mode": col("MODE"),
        "util_pct": col("UTIL"),
        "telemetry_stale": stale,
        "mem_used_bytes": opt(m.then(|| u64::from(g.mem_used_mib()) * MIB)),
        "mem_total_bytes": u64::from(g.memory_mib) * MIB,
        "power_w": col("POWER"),
        "temp_c": col("TEMP"),
        "tenant": col("TENANT"),
        "pods": g.pods.iter().filter_map(|p| f.pod(*p)).map(|p| f.pod_display(p)).collect::<Vec<_>>(),
        "sharing": match shared(f, g) {
            Some(s) => json!({
                "strategy": s.mode.as_str(),
                "replicas": s.replicas,
                "shares_held": f.gpu_shares_held(g),
                // Unknown (null) unless the node agent samples its processes.
                "shares_idle": opt(f.gpu_procs.contains_key(&gid).then(|| {
                    f.idle_shares(gid).iter().map(|(_, _, k)| k).sum::<u32>()
                })),
                "shares_placement_unknown_on_node": f.node(g.node).map_or(0, |n| n.shares_unplaced),
            }),
            None => serde_json::Value::Null,
        },
        "dra": dra_json(g.dra.as_deref()),
        "mig_alloc": if g.mig_enabled { alloc(used, g.instances.len() as u32) } else { serde_json::Value::Null },
        "idle_for_s": opt(g.low_since.filter(|_| g.idle_allocated).map(|t| age_s(f, t))),
        "fits": if g.mig_enabled { cell_json(fits(f, r)) } else { serde_json::Value::Null },
        "health": cell_json(health(f, r)),
        "xid": opt(g.xid.map(|(c, _)| c)),
        "ecc_uncorrected": g.ecc_uncorrected,
        "instances": instances,
    }))
}

/// A GPU's DRA extras for the JSON snapshot; `null` when it has none.
fn dra_json(d: Option<&crate::model::GpuDra>) -> serde_json::Value {
    let Some(d) = d.filter(|d| d.has_alpha()) else { return serde_json::Value::Null };
    let map = |v: &[(String, i64)]| v.iter().map(|(k, n)| (k.clone(), json!(n))).collect::<serde_json::Map<_, _>>();
    json!({
        "partitionable": d.partitionable,
        "whole_fits": d.partitionable.then_some(d.whole_fits),
        "fits": d.fits.iter().map(|c| json!({ "profile": c.profile, "fits": c.fits, "offered": c.offered })).collect::<Vec<_>>(),
        "taints": d.taints.iter().map(|t| json!({
            "key": t.key, "value": t.value, "effect": t.effect, "device": t.device, "rule": t.rule,
        })).collect::<Vec<_>>(),
        "shared_by_capacity": d.multi.then(|| json!({
            "capacity": map(&d.capacity),
            "claims": d.shares.iter().map(|s| json!({ "claim": s.claim, "consumed": map(&s.consumed) })).collect::<Vec<_>>(),
            "left": d.capacity.iter().filter_map(|(k, _)| Some((k.clone(), json!(d.left(k)?)))).collect::<serde_json::Map<_, _>>(),
        })),
    })
}
