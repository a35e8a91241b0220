//! The tenants view: one row per tenant with GPU demand or a quota — its pods, its quota,
//! what it asks for, holds and keeps busy.

use serde_json::json;

use super::cell::*;
use super::column::{Column, RowId, Value};
use super::tables::value_of;
use crate::model::*;
use crate::ui::json::opt;

fn tenant(f: &Fleet, r: RowId) -> Option<&Tenant> {
    f.tenant(r.tenant()?)
}

fn on<'a>(f: &'a Fleet, r: RowId, v: impl FnOnce(&'a Tenant) -> Value<'a>) -> Value<'a> {
    tenant(f, r).map_or(Value::Absent, v)
}

fn draw(f: &Fleet, r: RowId, c: impl FnOnce(&Tenant) -> Cell) -> Cell {
    tenant(f, r).map_or_else(blank, c)
}

/// Busy and idle are counted among the measured devices only; with none measured while
/// something is allocated they are unknown, not 0.
fn unmeasured(u: &TenantUsage) -> bool {
    u.measured == 0 && u.allocated_gpus + u.allocated_mig + u.allocated_shares > 0
}

pub const COLUMNS: &[Column] = &[
    Column::new("TENANT", 15).grow(2).filter().value(|f, r| on(f, r, |t| Value::text(f.str_of(t.name)))),
    Column::new("SOURCE", 8)
        .priority(5)
        .filter()
        .value(|f, r| on(f, r, |t| Value::text(f.str_of(t.source))))
        .cell(|f, r| draw(f, r, |t| muted(f.str_of(t.source)))),
    Column::new("NAMESPACES", 24)
        .min(12)
        .grow(1)
        .priority(4)
        .filter()
        .value(|f, r| Value::of_cell(namespaces(f, r)))
        .cell(namespaces),
    Column::new("PODS", 5).right().priority(2).value(|f, r| on(f, r, |t| Value::Num(t.usage.pods.into()))),
    Column::new("PEND", 4)
        .right()
        .priority(3)
        .value(|f, r| on(f, r, |t| Value::Num(t.usage.pending_pods.into())))
        .cell(|f, r| {
            draw(f, r, |t| match t.usage.pending_pods {
                0 => muted("0"),
                n => (n.to_string(), "status.pending"),
            })
        }),
    // Pods of the tenant's Kueue Workloads that wait for quota or were deactivated: their
    // Jobs are suspended, so PEND cannot count them.
    Column::new("QUEUED", 6).right().priority(4).value(|f, r| on(f, r, |_| Value::Num(queued_pods(f, r).into()))).cell(
        |f, r| {
            draw(f, r, |_| match queued_pods(f, r) {
                0 => muted("0"),
                n => (n.to_string(), "status.pending"),
            })
        },
    ),
    Column::new("QUOTA", 5)
        .right()
        .priority(1)
        .value(|f, r| on(f, r, |t| f.tenant_gpu_quota(t).map_or(Value::Absent, Value::Num))),
    Column::new("REQ", 5).right().priority(1).value(|f, r| on(f, r, |t| Value::Num(t.usage.requested_gpus.into()))),
    Column::new("ALLOC", 5).right().priority(1).value(|f, r| on(f, r, |t| Value::Num(t.usage.allocated_gpus.into()))),
    // Replicas of shared GPUs held; the GPUs they come to are in the JSON and the detail.
    Column::new("SHARES", 6)
        .right()
        .priority(3)
        .value(|f, r| on(f, r, |t| Value::Num(t.usage.allocated_shares.into()))),
    // Share-hours: replicas × hours its current holders have held them (sorted by seconds).
    Column::new("SHARE-H", 7)
        .right()
        .priority(4)
        .live()
        .value(|f, r| on(f, r, |_| Value::Num(r.tenant().map_or(0, |id| f.tenant_share_seconds(id)) as i64)))
        .cell(|f, r| {
            draw(f, r, |t| match r.tenant().map_or(0, |id| f.tenant_share_seconds(id)) {
                0 if t.usage.allocated_shares == 0 => muted("-"),
                secs => (share_hours(secs), "ui.text"),
            })
        }),
    Column::new("MIG", 4).right().priority(3).value(|f, r| on(f, r, |t| Value::Num(t.usage.allocated_mig.into()))),
    Column::new("BUSY", 5).right().live().value(|f, r| {
        on(f, r, |t| if unmeasured(&t.usage) { Value::Unknown } else { Value::Num(t.usage.busy.into()) })
    }),
    Column::new("IDLE", 4)
        .right()
        .live()
        .value(|f, r| {
            on(f, r, |t| if unmeasured(&t.usage) { Value::Unknown } else { Value::Num(t.usage.idle_allocated.into()) })
        })
        .cell(|f, r| {
            draw(f, r, |t| match t.usage.idle_allocated {
                _ if unmeasured(&t.usage) => muted("—"),
                0 => muted("0"),
                n => (n.to_string(), "gpu.idle"),
            })
        }),
    Column::new("BUSY%", 10)
        .min(6)
        .right()
        .priority(2)
        .live()
        .value(|f, r| {
            // Nothing measured (or nothing allocated): a share of nothing is no figure.
            on(f, r, |t| match t.usage.measured {
                0 => Value::Unknown,
                m => Value::Num(pct(t.usage.busy, m).into()),
            })
        })
        .cell(|f, r| {
            draw(f, r, |t| {
                let u = &t.usage;
                if u.measured == 0 {
                    return muted("—");
                }
                let p = pct(u.busy, u.measured);
                let of = of_measured(u.measured, u.allocated_gpus + u.allocated_mig);
                (format!("{p}%{of}"), util_token(p as u8))
            })
        }),
    // Default-deny NetworkPolicies over the tenant's namespaces: `deny`, `deny in` (ingress
    // only), `open 1/3`; `?` while the policies are not known (not listed, not allowed).
    Column::new("NETPOL", 8)
        .priority(4)
        .filter()
        .value(|f, r| {
            on(f, r, |_| match isolation(f, r) {
                Some(i) => Value::Text(i.netpol_text().into()),
                None => Value::Unknown,
            })
        })
        .cell(|f, r| {
            draw(f, r, |_| match isolation(f, r) {
                Some(i) if !i.open.is_empty() => (i.netpol_text(), "tenant.over_quota"),
                Some(i) => (i.netpol_text(), "tenant.ok"),
                None => muted("?"),
            })
        }),
    Column::new("STATUS", 10).filter().value(|f, r| Value::of_cell(status(f, r))).cell(status),
];

/// The tenant's isolation, `None` while NetworkPolicies are not known.
fn isolation(f: &Fleet, r: RowId) -> Option<TenantIsolation> {
    f.netpol_known().then(|| r.tenant().and_then(|t| f.tenant_isolation(t))).flatten()
}

/// The `isolation` object of the tenant's JSON row (docs/snapshot.md).
fn isolation_json(f: &Fleet, tid: TenantId) -> serde_json::Value {
    let names = |ts: &[TenantId]| {
        let mut v: Vec<&str> = ts.iter().filter_map(|t| f.tenant(*t)).map(|t| f.str_of(t.name)).collect();
        v.sort_unstable();
        v
    };
    let (nodes, gpus) = f.tenant_neighbours(tid);
    let iso = f.netpol_known().then(|| f.tenant_isolation(tid)).flatten();
    let pod_security = f.tenant_pod_security(tid);
    json!({
        "netpol": opt(iso.as_ref().map(|i| i.netpol_text())),
        "open_namespaces": opt(iso.as_ref().map(|i| i.open.clone())),
        "egress_deny_namespaces": opt(iso.as_ref().map(|i| i.egress_deny)),
        "pod_security": opt(pod_security.as_ref().map(|p| p.text())),
        "pod_security_unset_namespaces": pod_security.map(|p| p.unset).unwrap_or_default(),
        "shared_nodes": nodes
            .iter()
            .map(|(n, ts)| json!({ "node": f.node(*n).map(|n| f.str_of(n.name)), "tenants": names(ts) }))
            .collect::<Vec<_>>(),
        "shared_gpus": gpus
            .iter()
            .filter_map(|(g, ts)| {
                let g = f.gpu(*g)?;
                Some(json!({
                    "node": f.node(g.node).map(|n| f.str_of(n.name)),
                    "gpu": g.index,
                    "uuid": f.str_of(g.uuid),
                    "tenants": names(ts),
                }))
            })
            .collect::<Vec<_>>(),
    })
}

fn queued_pods(f: &Fleet, r: RowId) -> u32 {
    r.tenant().map_or(0, |t| f.tenant_queued_pods(t))
}

/// Share-seconds as hours, cut (not rounded) to one decimal: `12.3`.
pub fn share_hours(secs: u64) -> String {
    format!("{}.{}", secs / 3600, secs % 3600 * 10 / 3600)
}

fn namespaces(f: &Fleet, r: RowId) -> Cell {
    draw(f, r, |t| text(t.namespaces.iter().map(|n| f.str_of(*n)).collect::<Vec<_>>().join(",")))
}

fn status(f: &Fleet, r: RowId) -> Cell {
    draw(f, r, |t| match f.tenant_gpu_quota(t) {
        Some(q) if t.usage.requested_gpus as i64 > q => ("over quota".into(), "tenant.over_quota"),
        Some(q) if q > 0 && t.usage.requested_gpus as i64 * 100 >= q.saturating_mul(90) => {
            ("near quota".into(), "tenant.near_quota")
        }
        Some(_) => ("ok".into(), "tenant.ok"),
        None => muted("no quota"),
    })
}

/// Whether a node agent samples the processes on a shared GPU one of tenant `name`'s pods
/// holds (so its idle shares are known).
fn shares_sampled(f: &Fleet, name: crate::model::Sym) -> bool {
    f.gpu_procs.keys().filter_map(|g| f.gpu(*g)).any(|g| {
        f.node(g.node).is_some_and(|n| n.sharing.shared())
            && g.pods.iter().filter_map(|p| f.pod(*p)).any(|p| f.tenant(p.tenant).is_some_and(|t| t.name == name))
    })
}

/// The tenant's row of the JSON snapshot (docs/snapshot.md, `tenants`).
pub fn json(f: &Fleet, r: RowId) -> Option<serde_json::Value> {
    let t = tenant(f, r)?;
    let col = |name| value_of(COLUMNS, name, f, r).to_json();
    let u = &t.usage;
    // Busy is counted among the allocated devices a source measures; with none measured,
    // busy and idle are unknown even when nothing is allocated.
    let known = u.measured > 0;
    Some(json!({
        "tenant": col("TENANT"),
        "source": col("SOURCE"),
        "namespaces": t.namespaces.iter().map(|n| f.str_of(*n)).collect::<Vec<_>>(),
        "pods": col("PODS"),
        "pending_pods": col("PEND"),
        "gpu_quota_hard": col("QUOTA"),
        "requested_gpus": col("REQ"),
        "allocated_gpus": col("ALLOC"),
        "allocated_mig": col("MIG"),
        "allocated_shares": col("SHARES"),
        "allocated_share_gpus": f64::from(u.share_milli) / 1000.0,
        // Held by pods whose processes a node agent samples under the threshold; unknown
        // (null) unless an agent samples the processes on a GPU the tenant shares.
        "shares_idle": opt(shares_sampled(f, t.name).then_some(u.shares_idle)),
        "share_seconds": f.tenant_share_seconds(r.tenant()?),
        "busy": opt(known.then_some(u.busy)),
        "busy_measured": u.measured,
        "busy_pct": col("BUSY%"),
        "idle_allocated": opt(known.then_some(u.idle_allocated)),
        "status": status(f, r).0,
        "waiting": f.tenant_waiting(r.tenant()?).into_iter().map(|(why, n)| json!({ "why": why, "pods": n })).collect::<Vec<_>>(),
        // Kueue Workloads held back (their Jobs suspended: no pods to count as pending).
        "queued": f
            .tenant_queued(r.tenant()?)
            .into_iter()
            .map(|(why, w, p)| json!({ "why": why, "workloads": w, "pods": p }))
            .collect::<Vec<_>>(),
        "isolation": isolation_json(f, r.tenant()?),
        "refused_by_quota": f
            .tenant_quota_refusals(r.tenant()?)
            .into_iter()
            .map(|(o, q)| json!({ "object": o, "quota": &q.quota, "text": &q.text }))
            .collect::<Vec<_>>(),
    }))
}
