//! `fabrik snapshot --format json`: every view as typed rows (schema `fabrik.snapshot/v1`,
//! documented in docs/snapshot.md). Numbers are numbers, what no source measured is `null`,
//! units are in the key names, allocations are `{used, total}`, MIG instances are rows under
//! their GPU. Rows, their order and the filter are the table's ([`tables::rows`]); each
//! view's module (`ui::views::*::json`) builds its row from its columns' typed values and
//! cells, so the two formats never disagree.

use serde_json::{Value, json};

use crate::model::*;
use crate::quantity::Quantity;
use crate::ui::command::ViewKind;
use crate::ui::views::{
    RowId, capi, domains, events, fleet, gpus, hosts, ops, pods, quotas, tables, tenants, workloads,
};

/// The schema name and version; a change that removes or retypes a key bumps it.
pub const SCHEMA: &str = "fabrik.snapshot/v1";

pub const MIB: u64 = 1024 * 1024;

/// The whole document of one view.
pub fn snapshot(f: &Fleet, v: ViewKind, filter: &str) -> Value {
    let ids = tables::rows(f, v, filter, None, false);
    // MIG instance rows travel inside their GPU's row.
    let rows: Vec<Value> = ids.iter().filter(|id| !id.is_child()).filter_map(|id| row(f, v, *id)).collect();
    json!({ "schema": SCHEMA, "view": v.name(), "generated_at_ms": f.now, "rows": rows })
}

fn row(f: &Fleet, v: ViewKind, id: RowId) -> Option<Value> {
    match v {
        ViewKind::Fleet => fleet::json(f, id),
        ViewKind::Gpus => gpus::json(f, id),
        ViewKind::Tenants => tenants::json(f, id),
        ViewKind::Quotas => quotas::json(f, id),
        ViewKind::Pods => pods::json(f, id),
        ViewKind::Events => events::json(f, id),
        ViewKind::Ops => ops::json(f, id),
        ViewKind::Domains => domains::json(f, id),
        ViewKind::Workloads => workloads::json(f, id),
        ViewKind::Capi => capi::json(f, id),
        ViewKind::Hosts => hosts::json(f, id),
    }
}

pub fn alloc(used: u32, total: u32) -> Value {
    json!({ "used": used, "total": total })
}

pub fn age_s(f: &Fleet, then: Ts) -> u64 {
    f.now.saturating_sub(then) / 1000
}

/// A quantity as a JSON number: whole numbers exactly, fractions as decimals.
pub fn quantity(q: Quantity) -> Value {
    if q.is_integer() { Value::from(q.value()) } else { Value::from(q.as_f64()) }
}

pub fn opt<T: Into<Value>>(v: Option<T>) -> Value {
    v.map(Into::into).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests;

/// Who puts an object back from Git (`managed_by`): `null`, or the tool, the Application /
/// Kustomization / HelmRelease, the label or annotation it was read from, and whether a
/// change made in place is put back on the next sync.
pub fn managed_by(f: &Fleet, key: &str) -> Value {
    match f.gitops.get(key) {
        None => Value::Null,
        Some(o) => json!({
            "tool": match o.tool {
                GitOpsTool::ArgoCd => "argocd",
                GitOpsTool::ArgoCdOrHelm => "argocd-or-helm",
                GitOpsTool::FluxKustomization => "flux-kustomization",
                GitOpsTool::FluxHelmRelease => "flux-helmrelease",
            },
            "app": o.app,
            "via": o.via,
            "reverts": o.reverts(),
        }),
    }
}
