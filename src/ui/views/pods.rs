//! The pods view: one row per pod that asks for GPUs, MIG instances or DRA devices — what
//! it asks for, what it holds, and how busy that is.

use serde_json::{Map, json};

use super::cell::*;
use super::column::{Column, RowId, Value};
use super::tables::value_of;
use crate::model::*;
use crate::ui::json::{age_s, opt};

fn pod(f: &Fleet, r: RowId) -> Option<&Pod> {
    f.pod(r.pod()?)
}

fn on<'a>(f: &'a Fleet, r: RowId, v: impl FnOnce(&'a Pod) -> Value<'a>) -> Value<'a> {
    pod(f, r).map_or(Value::Absent, v)
}

fn draw(f: &Fleet, r: RowId, c: impl FnOnce(&Pod) -> Cell) -> Cell {
    pod(f, r).map_or_else(blank, c)
}

pub const COLUMNS: &[Column] = &[
    Column::new("NAMESPACE", 13).priority(3).filter().value(|f, r| on(f, r, |p| Value::text(f.str_of(p.namespace)))),
    Column::new("NAME", 26).min(20).grow(3).filter().value(|f, r| on(f, r, |p| Value::text(&p.name))),
    Column::new("TENANT", 13)
        .min(8)
        .grow(1)
        .priority(2)
        .filter()
        .value(|f, r| on(f, r, |p| f.tenant(p.tenant).map_or(Value::Absent, |t| Value::text(f.str_of(t.name)))))
        .cell(|f, r| draw(f, r, |p| text(tenant_name(f, p))))
        .text(|f, r| pod(f, r).map_or("", |p| tenant_name(f, p)).into()),
    Column::new("NODE", 10)
        .grow(1)
        .priority(1)
        .filter()
        .value(|f, r| {
            on(f, r, |p| p.node.and_then(|n| f.node(n)).map_or(Value::Absent, |n| Value::text(f.str_of(n.name))))
        })
        .cell(|f, r| {
            draw(f, r, |p| {
                p.node.and_then(|n| f.node(n)).map(|n| text(f.str_of(n.name))).unwrap_or_else(|| muted("<none>"))
            })
        })
        .text(|f, r| {
            pod(f, r).map_or("", |p| p.node.and_then(|n| f.node(n)).map_or("<none>", |n| f.str_of(n.name))).into()
        }),
    Column::new("PHASE", 11)
        .min(8)
        .filter()
        .value(|f, r| on(f, r, |p| Value::text(p.phase.as_str())))
        .cell(|f, r| {
            draw(f, r, |p| {
                let tok = match p.phase {
                    Phase::Running => "status.running",
                    Phase::Pending => "status.pending",
                    Phase::Succeeded => "status.succeeded",
                    Phase::Failed => "status.failed",
                    _ => "status.pending",
                };
                (p.phase.as_str().into(), tok)
            })
        })
        .text(|f, r| pod(f, r).map_or("", |p| p.phase.as_str()).into()),
    // Why a pending pod waits (the scheduler's reasons in words, starting, or queued), or what
    // keeps a running one from running (a container in CrashLoopBackOff), as kubectl's STATUS.
    Column::new("WAITING", 22)
        .min(7)
        .grow(2)
        .priority(2)
        .filter()
        .value(|f, r| on(f, r, |p| f.held_back(p).map_or(Value::Absent, |w| Value::Text(w.text().into()))))
        .cell(|f, r| {
            draw(f, r, |p| match f.held_back(p) {
                None => muted("-"),
                Some(w @ (Waiting::Starting | Waiting::Queued)) => muted(w.text()),
                // The kubelet cannot start it (an image it cannot pull) or keep it running (it
                // crash-loops): as kubectl, in red.
                Some(w @ Waiting::Container { .. }) => (w.text(), "status.failed"),
                Some(w) => (w.text(), "status.pending"),
            })
        })
        .text(|f, r| match pod(f, r) {
            None => "".into(),
            Some(p) => f.held_back(p).map_or("-".into(), |w| w.text().into()),
        }),
    // kubectl's RESTARTS: how often its containers were restarted, and when the last exited.
    Column::new("RESTARTS", 12)
        .right()
        .priority(5)
        .value(|f, r| on(f, r, |p| Value::Num(p.restarts.count.into())))
        .cell(|f, r| {
            draw(f, r, |p| match (p.restarts.count, p.restarts.last_exit()) {
                (0, _) => muted("0"),
                (n, None) => (n.to_string(), restarts_token(p)),
                (n, Some(at)) => (format!("{n} ({} ago)", kubectl_age(f.now, at)), restarts_token(p)),
            })
        }),
    Column::new("REQUEST", 13)
        .priority(4)
        .filter()
        .value(|f, r| Value::of_cell(draw(f, r, |p| text(pod_request(f, p)))))
        .write(|f, r, out| {
            if let Some(p) = pod(f, r) {
                write_request(f, p, out)
            }
        }),
    Column::new("DEVICES", 14)
        .min(9)
        .grow(1)
        .priority(3)
        .filter()
        .value(|f, r| Value::of_cell(draw(f, r, |p| text(pod_devices(f, p)))))
        .write(|f, r, out| {
            if let Some(p) = pod(f, r) {
                write_devices(f, p, out)
            }
        }),
    Column::new("UTIL", 8)
        .min(5)
        .right()
        .live()
        .value(|f, r| {
            on(f, r, |p| match pod_util_of(f, p) {
                Some((Some(u), ..)) => Value::Num(u.into()),
                Some((None, ..)) => Value::Unknown,
                None => Value::Absent,
            })
        })
        .cell(|f, r| {
            draw(f, r, |p| match pod_util_of(f, p) {
                Some((Some(u), _, measured, all)) => (format!("{u}%{}", of_measured(measured, all)), util_token(u)),
                Some((None, ..)) => muted("—"),
                None => muted("-"),
            })
        }),
    Column::new("IDLE", 5)
        .live()
        .value(|f, r| on(f, r, |p| Value::Num(matches!(pod_util(f, p), Some((_, true))).into())))
        .cell(|f, r| {
            draw(f, r, |p| match pod_util(f, p) {
                Some((_, true)) => ("idle".into(), "gpu.idle"),
                _ => muted("-"),
            })
        }),
    Column::new("OWNER", 11)
        .priority(5)
        .filter()
        .value(|f, r| on(f, r, |p| Value::text(p.owner.as_str())))
        .cell(|f, r| draw(f, r, |p| muted(p.owner.as_str())))
        .text(|f, r| pod(f, r).map_or("", |p| p.owner.as_str()).into()),
    Column::new("AGE", 4).right().priority(4).value(|f, r| on(f, r, |p| Value::Age(p.created))),
];

fn tenant_name<'a>(f: &'a Fleet, p: &Pod) -> &'a str {
    f.tenant(p.tenant).map_or("", |t| f.str_of(t.name))
}

/// Appends `sep` (unless `out` is empty), then `part`: each cell's text is built in one
/// string, not joined from a vector of them (a filter formats every row's cells).
fn part(out: &mut String, sep: char, part: std::fmt::Arguments) {
    use std::fmt::Write;
    if !out.is_empty() {
        out.push(sep);
    }
    let _ = out.write_fmt(part);
}

fn pod_request(f: &Fleet, p: &Pod) -> String {
    let mut out = String::new();
    write_request(f, p, &mut out);
    out
}

/// The REQUEST cell's text, written into `out` (empty).
fn write_request(f: &Fleet, p: &Pod, out: &mut String) {
    if p.gpus > 0 {
        part(out, ' ', format_args!("gpu×{}", p.gpus));
    }
    for (r, n) in &p.mig {
        part(out, ' ', format_args!("{}×{n}", f.str_of(*r).trim_start_matches("nvidia.com/")));
    }
    for c in &p.dra {
        part(out, ' ', format_args!("dra:{}×{}", f.str_of(c.device_class), c.count));
    }
}

fn pod_devices(f: &Fleet, p: &Pod) -> String {
    let mut out = String::new();
    write_devices(f, p, &mut out);
    out
}

/// The DEVICES cell's text, written into `out` (empty): `-` when it holds none.
fn write_devices(f: &Fleet, p: &Pod, out: &mut String) {
    for g in p.bound_gpus.iter().filter_map(|g| f.gpu(*g)) {
        part(out, ',', format_args!("gpu{}", g.index));
    }
    for u in &p.bound_mig {
        let found = f.mig_instance(*u).and_then(|(gid, idx)| {
            let g = f.gpu(gid)?;
            Some((g, g.instances.get(idx as usize)?))
        });
        if let Some((g, i)) = found {
            let profile = crate::mig::profile(g.model, i.placement.profile).name;
            part(out, ',', format_args!("gpu{}/{profile}@{}", g.index, i.placement.start));
        }
    }
    for c in &p.dra {
        match c.allocated {
            // An allocated claim names its device: what came before is said by it.
            Some(a) => {
                let s = f.str_of(a);
                out.clear();
                out.push_str(s.rsplit('/').next().unwrap_or(s));
            }
            None => part(out, ',', format_args!("unallocated")),
        }
    }
    // Held all the same: the device plugin does not say which instance, and no node agent
    // told the fleet. The first words fit the column: `1g.18gb×1 held`.
    for (r, n) in &p.mig_unbound {
        let profile = f.str_of(*r).trim_start_matches("nvidia.com/mig-");
        part(out, ',', format_args!("{profile}×{n} held, instance unknown without an agent"));
    }
    if out.is_empty() {
        out.push('-');
    }
}

/// Utilisation of the devices a pod holds (the mean of those measured; `None` inside when
/// none is), and whether they are idle-but-allocated; `None` when it holds no device the
/// fleet knows of, nor one it holds without a known instance.
pub fn pod_util(f: &Fleet, p: &Pod) -> Option<(Option<u8>, bool)> {
    pod_util_of(f, p).map(|(u, idle, _, _)| (u, idle))
}

/// How busy pod `p` keeps shared GPU `gid` (see [`Fleet::share_util`]).
pub fn share_util(f: &Fleet, gid: crate::model::GpuId, p: &crate::model::Pod) -> Option<u8> {
    f.share_util(gid, p)
}

/// Whether pod `p` holds an idle share of shared GPU `gid`.
pub fn share_idle(f: &Fleet, gid: crate::model::GpuId, p: &crate::model::Pod) -> bool {
    let same = |q: &Pod| q.namespace == p.namespace && q.name == p.name;
    f.idle_shares(gid).iter().any(|(q, _, _)| f.pod(*q).is_some_and(same))
}

/// [`pod_util`] with over how many of how many devices the mean was measured.
fn pod_util_of(f: &Fleet, p: &Pod) -> Option<(Option<u8>, bool, u32, u32)> {
    let mut utils = Vec::new();
    let mut idle = false;
    let shared = p.node.and_then(|n| f.node(n)).is_some_and(|n| n.sharing.shared());
    for (gid, g) in p.bound_gpus.iter().filter_map(|g| Some((*g, f.gpu(*g)?))) {
        if shared {
            // A replica of a shared GPU: its own processes' share of the SMs, not the GPU's.
            utils.push(share_util(f, gid, p));
            idle |= share_idle(f, gid, p);
        } else {
            utils.push(g.last.util);
        }
        idle |= g.idle_allocated;
    }
    if let Some(node) = p.node.and_then(|n| f.node(n)) {
        for g in node.gpus.iter().filter_map(|g| f.gpu(*g)) {
            for i in &g.instances {
                if p.bound_mig.contains(&i.uuid) {
                    utils.push(i.util);
                    idle |= i.idle_allocated;
                }
            }
        }
    }
    // Instances it holds that nobody can name cannot be measured either.
    for (_, n) in &p.mig_unbound {
        utils.extend(std::iter::repeat_n(None, *n as usize));
    }
    if utils.is_empty() {
        return None;
    }
    let measured = utils.iter().flatten().count() as u32;
    let all = utils.len() as u32;
    Some((mean_util(utils.into_iter()), idle, measured, all))
}

/// The pod's row of the JSON snapshot (docs/snapshot.md, `pods`).
/// Restarts in red while a container crash-loops, else as a warning.
fn restarts_token(p: &Pod) -> &'static str {
    if p.crash_looping() { "status.failed" } else { "status.pending" }
}

pub fn json(f: &Fleet, r: RowId) -> Option<serde_json::Value> {
    let p = pod(f, r)?;
    let col = |name| value_of(COLUMNS, name, f, r).to_json();
    let mig: Map<String, serde_json::Value> =
        p.mig.iter().map(|(r, n)| (f.str_of(*r).to_string(), (*n).into())).collect();
    let dra: Vec<serde_json::Value> = p
        .dra
        .iter()
        .map(|c| {
            json!({ "claim": &*c.claim, "device_class": f.str_of(c.device_class), "count": c.count,
                "allocated": opt(c.allocated.map(|a| f.str_of(a))) })
        })
        .collect();
    let util = pod_util(f, p);
    let devices = pod_devices(f, p);
    let devices = devices.trim();
    Some(json!({
        "namespace": col("NAMESPACE"),
        "name": col("NAME"),
        "tenant": col("TENANT"),
        "node": col("NODE"),
        "phase": col("PHASE"),
        "request": { "gpus": p.gpus, "mig": mig, "dra": dra },
        "devices": if devices.is_empty() || devices == "-" { serde_json::Value::Null } else { devices.into() },
        "util_pct": col("UTIL"),
        "idle": opt(util.and_then(|(u, idle)| u.map(|_| idle))),
        "owner": col("OWNER"),
        "owner_name": Some(f.str_of(p.owner_name)).filter(|n| !n.is_empty()),
        "waiting": f.held_back(p).map(|w| json!({ "why": w.category(), "text": w.text() })),
        "restarts": col("RESTARTS"),
        "last_restart_ms": p.restarts.last_exit(),
        "created_ms": col("AGE"),
        "age_s": age_s(f, p.created),
    }))
}
