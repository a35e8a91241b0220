//! The quotas view: one row per quota (a ResourceQuota's resource, or a Kueue
//! ClusterQueue's flavor and resource) — its limit, use and what its pods request.

use serde_json::json;

use super::cell::*;
use super::column::{Column, RowId, Value};
use super::tables::value_of;
use crate::model::*;
use crate::ui::json::{opt, quantity};

fn quota(f: &Fleet, r: RowId) -> Option<&Quota> {
    f.quota(r.quota()?)
}

fn on<'a>(f: &'a Fleet, r: RowId, v: impl FnOnce(&'a Quota) -> Value<'a>) -> Value<'a> {
    quota(f, r).map_or(Value::Absent, v)
}

fn draw(f: &Fleet, r: RowId, c: impl FnOnce(&Quota) -> Cell) -> Cell {
    quota(f, r).map_or_else(blank, c)
}

pub const COLUMNS: &[Column] = &[
    Column::new("TENANT", 15)
        .grow(1)
        .filter()
        .value(|f, r| on(f, r, |q| f.tenant(q.tenant).map_or(Value::Absent, |t| Value::text(f.str_of(t.name)))))
        .cell(|f, r| draw(f, r, |q| text(f.tenant(q.tenant).map(|t| f.str_of(t.name)).unwrap_or("")))),
    Column::new("SOURCE", 28)
        .min(16)
        .grow(1)
        .priority(3)
        .filter()
        .value(|f, r| on(f, r, |q| Value::Text(source(f, &q.source).into())))
        .cell(|f, r| draw(f, r, |q| muted(source(f, &q.source)))),
    Column::new("RESOURCE", 32)
        .min(16)
        .grow(1)
        .priority(1)
        .filter()
        .value(|f, r| on(f, r, |q| Value::text(f.str_of(q.resource)))),
    // Quantities sort by their amount (500m before 2), not by their digits.
    Column::new("HARD", 6)
        .right()
        .value(|f, r| on(f, r, |q| Value::Num(q.hard.milli_value())))
        .cell(|f, r| draw(f, r, |q| text(q.hard.to_string()))),
    Column::new("USED", 6)
        .right()
        .value(|f, r| on(f, r, |q| Value::Num(q.used.milli_value())))
        .cell(|f, r| draw(f, r, |q| text(q.used.to_string()))),
    // This quota's namespace and resource only; a tenant-wide total is the tenants view's.
    Column::new("REQ", 6)
        .right()
        .priority(2)
        .value(|f, r| on(f, r, |q| f.quota_requested(q).map_or(Value::Absent, Value::Num))),
    // What the quota's GPUs are in physical GPUs: a replica of a GPU time-sliced ×4 is 0.25.
    Column::new("PHYS", 5)
        .right()
        .priority(3)
        .value(|f, r| on(f, r, |q| f.quota_physical_milli(q).map_or(Value::Absent, |m| Value::Num(m as i64))))
        .cell(|f, r| {
            draw(f, r, |q| match f.quota_physical_milli(q) {
                Some(m) => text(gpus_text(m)),
                None => muted("-"),
            })
        }),
    Column::new("USE%", 5)
        .right()
        .value(|f, r| {
            on(f, r, |q| match quota_use_pct(q) {
                Some(p) => Value::Num(p),
                // Nothing allowed and something used: over, by no percentage.
                None if q.used.value() > 0 => Value::text("over"),
                None => Value::Absent,
            })
        })
        .cell(|f, r| {
            draw(f, r, |q| match quota_use_pct(q) {
                Some(p) => {
                    let (used, hard) = (q.used.milli_value(), q.hard.milli_value());
                    let tok = if used > hard {
                        "tenant.over_quota"
                    } else if i128::from(used) * 10 >= i128::from(hard) * 9 {
                        "tenant.near_quota"
                    } else {
                        "tenant.ok"
                    };
                    (format!("{p}%"), tok)
                }
                None if q.used.value() > 0 => ("over".into(), "tenant.over_quota"),
                None => muted("-"),
            })
        }),
    // Who puts the quota back from Git (Argo CD, Flux): a change made here lasts until the
    // next sync.
    Column::new("GITOPS", 18)
        .priority(4)
        .filter()
        .value(|f, r| {
            on(f, r, |q| {
                f.gitops.get(&gitops_key(f, &q.source)).map_or(Value::Absent, |o| Value::Text(gitops_short(o).into()))
            })
        })
        .cell(|f, r| {
            draw(f, r, |q| match f.gitops.get(&gitops_key(f, &q.source)) {
                Some(o) => text(gitops_short(o)),
                None => muted("-"),
            })
        }),
    Column::new("VERSION", 7)
        .priority(4)
        .value(|f, r| on(f, r, |q| Value::text(&q.version)))
        .cell(|f, r| draw(f, r, |q| muted(&*q.version))),
];

/// A quota's use: its used over its hard, in percent rounded to the nearest (60 of 177 is
/// 34 %); `None` when the hard limit is 0.
pub fn quota_use_pct(q: &Quota) -> Option<i64> {
    let (used, hard) = (i128::from(q.used.milli_value()), i128::from(q.hard.milli_value()));
    (hard > 0).then(|| ((used * 200 + hard) / (hard * 2)) as i64)
}

/// The fleet's GitOps key of the object a quota lives in.
fn gitops_key(f: &Fleet, s: &QuotaSource) -> String {
    match s {
        QuotaSource::ResourceQuota { namespace, name } => {
            gitops::key("resourcequota", Some(f.str_of(*namespace)), f.str_of(*name))
        }
        QuotaSource::ClusterQueue { queue, .. } => gitops::key("clusterqueue", None, f.str_of(*queue)),
    }
}

/// `argo gpu-quotas`, `flux kueue-queues`: who owns the quota's object, short (the JSON
/// has the namespace and the marker it was read from).
fn gitops_short(o: &GitOpsOwner) -> String {
    let tool = match o.tool {
        GitOpsTool::ArgoCd => "argo",
        GitOpsTool::ArgoCdOrHelm => "argo/helm",
        GitOpsTool::FluxKustomization | GitOpsTool::FluxHelmRelease => "flux",
    };
    let app = o.app.rsplit('/').next().unwrap_or(&o.app);
    let off = if o.reverts() { "" } else { " off" };
    format!("{tool} {app}{off}")
}

fn source(f: &Fleet, s: &QuotaSource) -> String {
    match s {
        QuotaSource::ResourceQuota { namespace, name } => {
            format!("ResourceQuota {}/{}", f.str_of(*namespace), f.str_of(*name))
        }
        QuotaSource::ClusterQueue { queue, flavor } => {
            format!("ClusterQueue {}/{}", f.str_of(*queue), f.str_of(*flavor))
        }
    }
}

/// The quota's row of the JSON snapshot (docs/snapshot.md, `quotas`).
/// Thousandths of a GPU as people read them: `6`, `6.25`.
fn gpus_text(milli: u64) -> String {
    if milli.is_multiple_of(1000) {
        (milli / 1000).to_string()
    } else {
        format!("{:.2}", milli as f64 / 1000.0).trim_end_matches('0').to_string()
    }
}

pub fn json(f: &Fleet, r: RowId) -> Option<serde_json::Value> {
    let q = quota(f, r)?;
    let col = |name| value_of(COLUMNS, name, f, r).to_json();
    let source = match &q.source {
        QuotaSource::ResourceQuota { namespace, name } => {
            json!({ "kind": "ResourceQuota", "namespace": f.str_of(*namespace), "name": f.str_of(*name) })
        }
        QuotaSource::ClusterQueue { queue, flavor } => {
            json!({ "kind": "ClusterQueue", "queue": f.str_of(*queue), "flavor": f.str_of(*flavor) })
        }
    };
    Some(json!({
        "tenant": col("TENANT"),
        "source": source,
        "resource": col("RESOURCE"),
        "hard": quantity(q.hard),
        "used": quantity(q.used),
        "requested": col("REQ"),
        "use_pct": opt(quota_use_pct(q)),
        "physical_gpus_held": opt(f.quota_physical_milli(q).map(|m| m as f64 / 1000.0)),
        "version": col("VERSION"),
        "borrowing_limit": opt(q.borrowing_limit.map(quantity)),
        "lending_limit": opt(q.lending_limit.map(quantity)),
        "managed_by": crate::ui::json::managed_by(f, &gitops_key(f, &q.source)),
    }))
}
