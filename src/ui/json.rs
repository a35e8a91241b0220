//! `fabrik snapshot --format json`: every view as typed rows (schema `fabrik.snapshot/v1`,
//! documented in docs/snapshot.md). Numbers are numbers, what no source measured is `null`,
//! units are in the key names, allocations are `{used, total}`, MIG instances are rows under
//! their GPU. Rows, their order and the filter are the table's ([`tables::rows`]); texts that
//! are the same in both (status, devices, health) are the table's cells.

use serde_json::{Map, Value, json};

use crate::model::*;
use crate::quantity::Quantity;
use crate::ui::command::ViewKind;
use crate::ui::views::tables;

/// The schema name and version; a change that removes or retypes a key bumps it.
pub const SCHEMA: &str = "fabrik.snapshot/v1";

const MIB: u64 = 1024 * 1024;

/// The whole document of one view.
pub fn snapshot(f: &Fleet, v: ViewKind, filter: &str) -> Value {
    let (col, desc) = tables::default_sort(v);
    let ids = tables::rows(f, v, filter, col, desc);
    let rows: Vec<Value> = match v {
        // MIG instance rows travel inside their GPU's row.
        ViewKind::Gpus => ids.iter().filter(|id| *id & 7 == 0).filter_map(|id| gpu_row(f, *id)).collect(),
        _ => ids.iter().filter_map(|id| row(f, v, *id)).collect(),
    };
    json!({ "schema": SCHEMA, "view": v.name(), "generated_at_ms": f.now, "rows": rows })
}

fn row(f: &Fleet, v: ViewKind, id: u32) -> Option<Value> {
    match v {
        ViewKind::Fleet => node_row(f, id),
        ViewKind::Gpus => gpu_row(f, id),
        ViewKind::Tenants => tenant_row(f, id),
        ViewKind::Quotas => quota_row(f, id),
        ViewKind::Pods => pod_row(f, id),
        ViewKind::Events => event_row(f, id),
        ViewKind::Ops => op_row(f, id),
    }
}

/// The table's text of a cell, `null` where the table shows nothing or a dash.
fn cell_text(f: &Fleet, v: ViewKind, id: u32, col: usize) -> Value {
    let s = tables::cell(f, v, id, col).0;
    let s = s.trim();
    if s.is_empty() || s == "-" || s == "—" { Value::Null } else { Value::from(s) }
}

fn alloc(used: u32, total: u32) -> Value {
    json!({ "used": used, "total": total })
}

fn age_s(f: &Fleet, then: Ts) -> u64 {
    f.now.saturating_sub(then) / 1000
}

/// A quantity as a JSON number: whole numbers exactly, fractions as decimals.
pub fn quantity(q: Quantity) -> Value {
    if q.is_integer() { Value::from(q.value()) } else { Value::from(q.as_f64()) }
}

fn opt<T: Into<Value>>(v: Option<T>) -> Value {
    v.map(Into::into).unwrap_or(Value::Null)
}

fn measured(g: &Gpu) -> bool {
    g.last_sample_at.is_some()
}

fn node_row(f: &Fleet, id: u32) -> Option<Value> {
    let n = f.node(NodeId(id))?;
    let gpus: Vec<&Gpu> = n.gpus.iter().filter_map(|g| f.gpu(*g)).collect();
    // The table's own averages, so the two formats never disagree.
    let avg = tables::node_avg(f, n);
    let idle = (avg.sampled_of > 0).then(|| {
        gpus.iter()
            .map(|g| u32::from(g.idle_allocated) + g.instances.iter().filter(|i| i.idle_allocated).count() as u32)
            .sum::<u32>()
    });
    let instances: u32 = gpus.iter().map(|g| g.instances.len() as u32).sum();
    let bound: u32 = gpus.iter().map(|g| g.mig_in_use()).sum();
    let cfg = f.s(n.mig_config);
    let mig = if cfg.is_empty() || cfg == "all-disabled" {
        Value::Null
    } else {
        json!({ "config": cfg, "state": opt((n.mig_state != MigConfigState::None).then(|| n.mig_state.as_str())) })
    };
    let alerts: Vec<String> = match cell_text(f, ViewKind::Fleet, id, 11) {
        Value::String(s) => s.split(',').map(str::to_string).collect(),
        _ => Vec::new(),
    };
    Some(json!({
        "name": f.s(n.name),
        "status": tables::node_status(n).0,
        "ready": n.ready,
        "cordoned": n.cordoned,
        "model": opt(n.gpu_model.map(|m| m.name())),
        "gpus": n.gpu_count(),
        "alloc_gpus": alloc(f.node_allocated_gpus(n), n.gpu_count()),
        "alloc_gpus_lower_bound": f.node_allocation_is_estimate(n),
        "mig_alloc": alloc(n.mig_allocated, instances),
        "mig_held_instance_unknown": n.mig_allocated.saturating_sub(bound),
        "util_pct": opt(avg.util),
        "util_measured_gpus": avg.util_of,
        "mem_used_pct": opt(avg.mem_pct),
        "power_w": opt(avg.power_w),
        "telemetry_gpus": avg.sampled_of,
        "mig": mig,
        "idle_allocated": opt(idle),
        "pods": n.pods,
        "alerts": alerts,
        "created_ms": n.created,
        "age_s": age_s(f, n.created),
    }))
}

fn gpu_row(f: &Fleet, id: u32) -> Option<Value> {
    let g = f.gpu(GpuId(id >> 3))?;
    let node = f.node(g.node);
    let m = measured(g);
    let tenant_of = |p: Option<PodId>| -> Value {
        opt(p.and_then(|p| f.pod(p)).and_then(|p| f.tenant(p.tenant)).map(|t| f.s(t.name).to_string()))
    };
    let instances: Vec<Value> = g
        .instances
        .iter()
        .map(|i| {
            let p = crate::mig::profile(g.model, i.placement.profile);
            let pod = i.pod.and_then(|p| f.pod(p));
            json!({
                "profile": p.name,
                "start": i.placement.start,
                "uuid": f.s(i.uuid),
                "util_pct": opt(i.util),
                "mem_used_bytes": opt(m.then(|| u64::from(i.mem_used_mib) * MIB)),
                "mem_total_bytes": u64::from(p.memory_mib) * MIB,
                "tenant": tenant_of(i.pod),
                "pod": opt(pod.map(|p| f.pod_display(p))),
                "idle_for_s": opt(i.low_since.filter(|_| i.idle_allocated).map(|t| age_s(f, t))),
            })
        })
        .collect();
    let used = g.mig_in_use();
    let stale = m && g.telemetry_stale(f.now, f.thresholds.stale_ms);
    Some(json!({
        "node": opt(node.map(|n| f.s(n.name))),
        "gpu": g.index,
        "uuid": f.s(g.uuid),
        "model": g.model.name(),
        "mode": if g.mig_enabled { "mig" } else { "full" },
        "util_pct": opt(g.last.util.filter(|_| m)),
        "telemetry_stale": stale,
        "mem_used_bytes": opt(m.then(|| u64::from(g.mem_used_mib()) * MIB)),
        "mem_total_bytes": u64::from(g.memory_mib) * MIB,
        "power_w": opt(m.then_some(g.last.power_w)),
        "temp_c": opt(m.then_some(g.last.temp_c)),
        "tenant": tenant_of(g.pods.first().copied()),
        "pods": g.pods.iter().filter_map(|p| f.pod(*p)).map(|p| f.pod_display(p)).collect::<Vec<_>>(),
        "mig_alloc": if g.mig_enabled { alloc(used, g.instances.len() as u32) } else { Value::Null },
        "idle_for_s": opt(g.low_since.filter(|_| g.idle_allocated).map(|t| age_s(f, t))),
        "fits": if g.mig_enabled { cell_text(f, ViewKind::Gpus, id & !7, 11) } else { Value::Null },
        "health": cell_text(f, ViewKind::Gpus, id & !7, 12),
        "xid": opt(g.xid.map(|(c, _)| c)),
        "ecc_uncorrected": g.ecc_uncorrected,
        "instances": instances,
    }))
}

fn tenant_row(f: &Fleet, id: u32) -> Option<Value> {
    let t = f.tenant(TenantId(id))?;
    let u = &t.usage;
    // The model keeps these per tenant as devices change: busy is counted among the
    // allocated devices a source measures.
    let (measured_n, busy) = (u.measured, u.busy);
    let known = measured_n > 0;
    Some(json!({
        "tenant": f.s(t.name),
        "source": f.s(t.source),
        "namespaces": t.namespaces.iter().map(|n| f.s(*n)).collect::<Vec<_>>(),
        "pods": u.pods,
        "pending_pods": u.pending_pods,
        "gpu_quota_hard": opt(f.tenant_gpu_quota(t)),
        "requested_gpus": u.requested_gpus,
        "allocated_gpus": u.allocated_gpus,
        "allocated_mig": u.allocated_mig,
        "busy": opt(known.then_some(busy)),
        "busy_measured": measured_n,
        "busy_pct": opt(known.then(|| busy * 100 / measured_n)),
        "idle_allocated": opt(known.then_some(u.idle_allocated)),
        "status": tables::cell(f, ViewKind::Tenants, id, 12).0,
    }))
}

fn quota_row(f: &Fleet, id: u32) -> Option<Value> {
    let q = f.quota(QuotaId(id))?;
    let source = match &q.source {
        QuotaSource::ResourceQuota { namespace, name } => {
            json!({ "kind": "ResourceQuota", "namespace": f.s(*namespace), "name": f.s(*name) })
        }
        QuotaSource::ClusterQueue { queue, flavor } => {
            json!({ "kind": "ClusterQueue", "queue": f.s(*queue), "flavor": f.s(*flavor) })
        }
    };
    Some(json!({
        "tenant": opt(f.tenant(q.tenant).map(|t| f.s(t.name))),
        "source": source,
        "resource": f.s(q.resource),
        "hard": quantity(q.hard),
        "used": quantity(q.used),
        "requested": opt(f.quota_requested(q)),
        "use_pct": opt(tables::quota_use_pct(q)),
        "version": f.s(q.version),
        "borrowing_limit": opt(q.borrowing_limit.map(quantity)),
        "lending_limit": opt(q.lending_limit.map(quantity)),
    }))
}

fn pod_row(f: &Fleet, id: u32) -> Option<Value> {
    let p = f.pod(PodId(id))?;
    let mig: Map<String, Value> = p.mig.iter().map(|(r, n)| (f.s(*r).to_string(), Value::from(*n))).collect();
    let dra: Vec<Value> = p
        .dra
        .iter()
        .map(|c| {
            json!({ "claim": f.s(c.claim), "device_class": f.s(c.device_class), "count": c.count,
                "allocated": opt(c.allocated.map(|a| f.s(a))) })
        })
        .collect();
    let util = tables::pod_util(f, p);
    Some(json!({
        "namespace": f.s(p.namespace),
        "name": &*p.name,
        "tenant": opt(f.tenant(p.tenant).map(|t| f.s(t.name))),
        "node": opt(p.node.and_then(|n| f.node(n)).map(|n| f.s(n.name))),
        "phase": p.phase.as_str(),
        "request": { "gpus": p.gpus, "mig": mig, "dra": dra },
        "devices": cell_text(f, ViewKind::Pods, id, 6),
        "util_pct": opt(util.and_then(|(u, _)| u)),
        "idle": opt(util.and_then(|(u, idle)| u.map(|_| idle))),
        "owner": p.owner.as_str(),
        "created_ms": p.created,
        "age_s": age_s(f, p.created),
    }))
}

fn event_row(f: &Fleet, id: u32) -> Option<Value> {
    let e = tables::event_at(f, id)?;
    Some(json!({
        "ts_ms": e.ts,
        "age_s": age_s(f, e.ts),
        "type": e.severity.as_str(),
        "reason": f.s(e.reason),
        "object": e.object,
        "message": e.message,
    }))
}

fn op_row(f: &Fleet, id: u32) -> Option<Value> {
    let o = tables::op_at(f, id)?;
    let reason = match &o.state {
        OpState::Blocked(r) | OpState::Failed(r) => Some(r.as_str()),
        _ => None,
    };
    Some(json!({
        "id": o.id,
        "operation": o.title,
        "target": o.target,
        "state": tables::op_state(o).0,
        "reason": opt(reason),
        "progress": { "done": o.done, "total": o.total },
        "started_ms": o.started,
        "age_s": age_s(f, o.started),
        "step": o.step,
    }))
}

#[cfg(test)]
mod tests;
