//! The domains view: one row per ComputeDomain (the NVIDIA DRA driver's multi-node NVLink /
//! IMEX domains) — its tenant, whether it is Ready, how many of its nodes are, their
//! NVLink cliques, the claim template workloads join it by, and which nodes hold it back.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde_json::json;

use super::cell::*;
use super::column::{Column, RowId, Value};
use super::tables::value_of;
use crate::model::*;
use crate::ui::json::age_s;

/// The row id of the domain `namespace/name`: a hash of its key, so a row keeps its domain
/// (and the selection stays on it) while other domains come and go, as slab ids do for
/// nodes and pods. FNV-1a, folded to 32 bits: the same in every run.
pub fn row_id(key: &str) -> RowId {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    RowId::Domain((h ^ (h >> 32)) as u32)
}

/// The domain of a row, with its `namespace/name` key. A lookup walks the domains, which
/// are few (one per multi-node NVLink job).
pub fn domain_of(f: &Fleet, r: RowId) -> Option<(&str, &ComputeDomainSpec)> {
    r.domain()?;
    f.domains.iter().find(|(k, _)| row_id(k) == r).map(|(k, d)| (k.as_str(), d))
}

/// Every domain's row, in key order.
pub fn ids(f: &Fleet) -> Vec<RowId> {
    f.domains.keys().map(|k| row_id(k)).collect()
}

fn on<'a>(f: &'a Fleet, r: RowId, v: impl FnOnce(&'a str, &'a ComputeDomainSpec) -> Value<'a>) -> Value<'a> {
    domain_of(f, r).map_or(Value::Absent, |(k, d)| v(k, d))
}

fn draw(f: &Fleet, r: RowId, c: impl FnOnce(&ComputeDomainSpec) -> Cell) -> Cell {
    domain_of(f, r).map_or_else(blank, |(_, d)| c(d))
}

fn words(s: String) -> Value<'static> {
    if s.is_empty() { Value::Absent } else { Value::Text(Cow::Owned(s)) }
}

/// Its nodes' NVLink cliques, each once, in order.
fn cliques(d: &ComputeDomainSpec) -> String {
    let set: BTreeSet<&str> = d.nodes.iter().map(|n| n.clique.as_str()).filter(|c| !c.is_empty()).collect();
    set.into_iter().collect::<Vec<_>>().join(",")
}

/// The workloads that joined it: its pods' apps (label `app`, `app.kubernetes.io/name` or
/// `job-name`), a pod without one by its name; each once, in order.
fn workloads<'a>(f: &'a Fleet, pods: &[&'a Pod]) -> Vec<&'a str> {
    let set: BTreeSet<&str> =
        pods.iter().map(|p| if p.app == Sym::default() { &*p.name } else { f.str_of(p.app) }).collect();
    set.into_iter().collect()
}

/// The nodes whose IMEX daemon is not Ready, as the domain lists them.
fn not_ready(d: &ComputeDomainSpec) -> String {
    d.nodes.iter().filter(|n| n.status != "Ready").map(|n| n.name.as_str()).collect::<Vec<_>>().join(",")
}

pub const COLUMNS: &[Column] = &[
    Column::new("DOMAIN", 24).min(16).grow(2).filter().value(|f, r| on(f, r, |k, _| Value::text(k))),
    Column::new("TENANT", 13)
        .min(8)
        .grow(1)
        .priority(2)
        .filter()
        .value(|f, r| on(f, r, |_, d| f.domain_tenant(d).map_or(Value::Absent, Value::text))),
    // Not Ready once the controller says so; no status yet is a domain still starting.
    Column::new("STATUS", 9)
        .filter()
        .value(|f, r| on(f, r, |_, d| if d.status.is_empty() { Value::Absent } else { Value::text(&d.status) }))
        .cell(|f, r| {
            draw(f, r, |d| match d.status.as_str() {
                "" => muted("starting"),
                "Ready" => ("Ready".into(), "status.ready"),
                s => (s.into(), "status.notready"),
            })
        }),
    // Sorted by the nodes ready; drawn `ready/numNodes`.
    Column::new("NODES", 5).right().value(|f, r| on(f, r, |_, d| Value::Num(i64::from(d.nodes_ready())))).cell(
        |f, r| {
            draw(f, r, |d| {
                let (ready, want) = (d.nodes_ready(), d.num_nodes);
                let tok = if d.status.is_empty() {
                    "ui.text.muted"
                } else if ready < want {
                    "status.notready"
                } else {
                    "ui.text"
                };
                (format!("{ready}/{want}"), tok)
            })
        },
    ),
    // The pods that joined it (a claim from its channel template) and have not finished;
    // sorted by their number, drawn `running/pods` (a worker waiting for its channel stands
    // out; Enter or the JSON says why it waits).
    Column::new("PODS", 5)
        .right()
        .priority(2)
        .value(|f, r| on(f, r, |_, d| Value::Num(f.domain_pods(d).len() as i64)))
        .cell(|f, r| {
            draw(f, r, |d| {
                let pods = f.domain_pods(d);
                let running = pods.iter().filter(|p| p.phase == crate::model::Phase::Running).count();
                let tok = if running < pods.len() { "status.notready" } else { "ui.text" };
                (format!("{running}/{}", pods.len()), tok)
            })
        }),
    Column::new("WORKLOADS", 17)
        .min(8)
        .grow(1)
        .priority(4)
        .filter()
        .value(|f, r| on(f, r, |_, d| words(workloads(f, &f.domain_pods(d)).join(",")))),
    Column::new("CLIQUES", 20).min(8).grow(1).priority(3).filter().value(|f, r| on(f, r, |_, d| words(cliques(d)))),
    Column::new("CLAIM TEMPLATE", 18).min(14).grow(1).priority(4).filter().value(|f, r| {
        on(f, r, |_, d| if d.claim_template.is_empty() { Value::Absent } else { Value::text(&d.claim_template) })
    }),
    Column::new("NOT READY", 18)
        .min(10)
        .grow(2)
        .priority(1)
        .filter()
        .value(|f, r| on(f, r, |_, d| words(not_ready(d))))
        .cell(|f, r| {
            draw(f, r, |d| match not_ready(d) {
                s if s.is_empty() => muted("-"),
                s if d.status.is_empty() => muted(s),
                s => (s, "status.notready"),
            })
        }),
    Column::new("AGE", 4).right().priority(5).value(|f, r| on(f, r, |_, d| Value::Age(d.created))),
];

/// The domain's row of the JSON snapshot (docs/snapshot.md, `domains`).
pub fn json(f: &Fleet, r: RowId) -> Option<serde_json::Value> {
    let (_, d) = domain_of(f, r)?;
    let col = |name| value_of(COLUMNS, name, f, r).to_json();
    let nodes: Vec<serde_json::Value> = d
        .nodes
        .iter()
        .map(|n| {
            let clique = if n.clique.is_empty() { serde_json::Value::Null } else { n.clique.as_str().into() };
            json!({ "name": &n.name, "status": &n.status, "clique": clique })
        })
        .collect();
    let pods = f.domain_pods(d);
    let members: Vec<serde_json::Value> = pods
        .iter()
        .map(|p| {
            let node = (p.node_name != Sym::default()).then(|| f.str_of(p.node_name));
            // Why it is pending (`devices not prepared: …` on a node whose IMEX daemon is
            // not ready) or, running, crash-loops; null otherwise.
            let waiting = f.held_back(p).map(|w| w.text());
            json!({ "name": &*p.name, "node": node, "phase": p.phase.as_str(), "waiting": waiting })
        })
        .collect();
    Some(json!({
        "domain": col("DOMAIN"),
        "namespace": &d.namespace,
        "name": &d.name,
        "tenant": col("TENANT"),
        "status": col("STATUS"),
        "num_nodes": d.num_nodes,
        "nodes_ready": d.nodes_ready(),
        "nodes": nodes,
        "claim_template": col("CLAIM TEMPLATE"),
        "pods": members,
        "workloads": workloads(f, &pods),
        "created_ms": col("AGE"),
        "age_s": age_s(f, d.created),
    }))
}
