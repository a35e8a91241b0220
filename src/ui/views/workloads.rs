//! The workloads view: one row per Kueue Workload — the queue it waits in or was admitted
//! to, where it stands (Kueue's conditions), its place in the ClusterQueue, the GPUs and
//! pods it asks for, the flavor it got, and why: Kueue's last word on its quota, the
//! eviction, the Workload that preempted it. Its LocalQueue, pods, tenant, owner and timeline
//! are in its JSON row and in what Enter says.

use std::borrow::Cow;

use serde_json::json;

use super::cell::*;
use super::column::{Column, RowId, Value};
use super::tables::value_of;
use crate::model::*;
use crate::ui::json::{age_s, opt};

/// The Workload of a row, with its `namespace/name` key.
pub fn workload_of(f: &Fleet, r: RowId) -> Option<(&str, &KueueWorkload)> {
    f.workload_by_id(r.workload()?)
}

/// Every Workload's row, in key order.
pub fn ids(f: &Fleet) -> Vec<RowId> {
    f.workloads.keys().filter_map(|k| f.workload_id(k)).map(RowId::Workload).collect()
}

fn on<'a>(f: &'a Fleet, r: RowId, v: impl FnOnce(&'a str, &'a KueueWorkload) -> Value<'a>) -> Value<'a> {
    workload_of(f, r).map_or(Value::Absent, |(k, w)| v(k, w))
}

fn draw(f: &Fleet, r: RowId, c: impl FnOnce(&KueueWorkload) -> Cell) -> Cell {
    workload_of(f, r).map_or_else(blank, |(_, w)| c(w))
}

fn some(s: &str) -> Value<'_> {
    if s.is_empty() { Value::Absent } else { Value::text(s) }
}

/// Why it stands where it does, in words: who preempted it, else what Kueue said.
pub fn why(f: &Fleet, w: &KueueWorkload) -> String {
    let Some(c) = w.why() else { return String::new() };
    if w.state() == WorkloadState::Evicted && w.preempted_by_uid().is_some() {
        let by = match f.workload_preemptor(w) {
            Some(p) => p.key(),
            None => "a Workload not listed here".into(),
        };
        return format!("preempted by {by} ({}); back in the queue", c.reason);
    }
    c.message.clone()
}

/// The STATE word: Kueue's state, `Deactivating` while an inactive one still holds quota.
fn state_word(w: &KueueWorkload) -> &'static str {
    match w.state() {
        WorkloadState::Inactive if w.holds_quota() => "Deactivating",
        s => s.as_str(),
    }
}

fn state_cell(w: &KueueWorkload) -> Cell {
    let tok = match w.state() {
        WorkloadState::Admitted => "status.ready",
        // Deactivated while its pods still hold the quota: Kueue is stopping them.
        WorkloadState::Inactive if w.holds_quota() => "status.pending",
        WorkloadState::Pending | WorkloadState::Reserved => "status.pending",
        WorkloadState::Evicted | WorkloadState::Inadmissible => "status.notready",
        WorkloadState::Inactive | WorkloadState::Finished => "ui.text.muted",
    };
    (state_word(w).into(), tok)
}

pub const COLUMNS: &[Column] = &[
    Column::new("NAMESPACE", 14)
        .min(8)
        .grow(1)
        .priority(2)
        .filter()
        .value(|f, r| on(f, r, |_, w| Value::text(&w.namespace))),
    Column::new("NAME", 28).min(22).grow(2).filter().value(|f, r| on(f, r, |_, w| Value::text(&w.name))),
    Column::new("CLUSTERQUEUE", 17).min(8).filter().value(|f, r| on(f, r, |_, w| some(&w.cluster_queue))),
    Column::new("STATE", 12)
        .filter()
        .value(|f, r| on(f, r, |_, w| Value::text(state_word(w))))
        .cell(|f, r| draw(f, r, state_cell)),
    // Its place among the Workloads waiting in its ClusterQueue (Kueue's order: priority,
    // then age); none once it holds quota.
    Column::new("POS", 3)
        .right()
        .value(|f, r| on(f, r, |k, _| f.workload_position(k).map_or(Value::Absent, |p| Value::Num(p.into())))),
    Column::new("PRIO", 4).right().priority(3).value(|f, r| on(f, r, |_, w| Value::Num(w.priority.into()))),
    Column::new("GPUS", 4).right().value(|f, r| on(f, r, |_, w| Value::Num(w.gpus))),
    Column::new("FLAVOR", 8).min(6).priority(2).filter().value(|f, r| {
        on(f, r, |_, w| if w.flavors.is_empty() { Value::Absent } else { Value::Text(Cow::Owned(w.flavors.join(","))) })
    }),
    // How long it has been in its state (since Kueue last changed the condition that says so).
    Column::new("SINCE", 5)
        .right()
        .priority(2)
        .value(|f, r| on(f, r, |_, w| Value::Age(w.why().and_then(|c| c.since).unwrap_or(w.created)))),
    Column::new("WHY", 34)
        .min(24)
        .grow(3)
        .priority(1)
        .filter()
        .value(|f, r| on(f, r, |_, w| Value::Text(Cow::Owned(why(f, w)))))
        .cell(|f, r| {
            draw(f, r, |w| match why(f, w) {
                s if s.is_empty() => muted("-"),
                s if w.state() == WorkloadState::Admitted || w.state() == WorkloadState::Finished => muted(s),
                s => (s, "ui.text"),
            })
        }),
    Column::new("AGE", 4).right().priority(6).value(|f, r| on(f, r, |_, w| Value::Age(w.created))),
];

/// The Workload's story in one line: `queued 12m ago → quota reserved in cq-a 10m → …`.
pub fn timeline_text(f: &Fleet, w: &KueueWorkload) -> String {
    w.timeline().into_iter().map(|(at, what)| format!("{what} {} ago", age(f.now, at))).collect::<Vec<_>>().join(" → ")
}

/// The Workload's row of the JSON snapshot (docs/snapshot.md, `workloads`).
pub fn json(f: &Fleet, r: RowId) -> Option<serde_json::Value> {
    let (_, w) = workload_of(f, r)?;
    let col = |name| value_of(COLUMNS, name, f, r).to_json();
    let conditions: Vec<serde_json::Value> = w
        .conditions
        .iter()
        .map(|c| {
            json!({ "type": &c.kind, "status": c.status, "reason": &c.reason, "message": &c.message,
                    "since_ms": opt(c.since) })
        })
        .collect();
    let timeline: Vec<serde_json::Value> =
        w.timeline().into_iter().map(|(at, what)| json!({ "at_ms": at, "what": what })).collect();
    Some(json!({
        "workload": w.key(),
        "namespace": &w.namespace,
        "name": &w.name,
        "uid": &w.uid,
        "tenant": opt(f.workload_tenant(w)),
        "queue": if w.queue.is_empty() { serde_json::Value::Null } else { w.queue.as_str().into() },
        "cluster_queue": col("CLUSTERQUEUE"),
        "state": w.state().as_str(),
        "active": w.active,
        "holds_quota": w.holds_quota(),
        "position": col("POS"),
        "priority": w.priority,
        "priority_class": if w.priority_class.is_empty() { serde_json::Value::Null } else { w.priority_class.as_str().into() },
        "gpus": w.gpus,
        "pods": w.pods,
        "flavors": &w.flavors,
        "owner": if w.owner.is_empty() { serde_json::Value::Null } else { w.owner.as_str().into() },
        "why": col("WHY"),
        "preempted_by": opt(f.workload_preemptor(w).map(|p| p.key())),
        "conditions": conditions,
        "timeline": timeline,
        "created_ms": w.created,
        "age_s": age_s(f, w.created),
    }))
}
