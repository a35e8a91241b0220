//! The operations view: cordons, drains, reslices and quota edits, running or done,
//! newest first in the row ids.

use serde_json::json;

use super::cell::*;
use super::column::{Column, RowId, Value};
use super::tables::value_of;
use crate::model::*;
use crate::ui::json::age_s;

/// The operation `i` places from the newest.
pub fn op_at(f: &Fleet, i: u32) -> Option<&OpStatus> {
    let n = f.ops.len();
    f.ops.get(n.checked_sub(1 + i as usize)?)
}

fn op(f: &Fleet, r: RowId) -> Option<&OpStatus> {
    op_at(f, r.op()?)
}

fn on<'a>(f: &'a Fleet, r: RowId, v: impl FnOnce(&'a OpStatus) -> Value<'a>) -> Value<'a> {
    op(f, r).map_or(Value::Absent, v)
}

pub fn op_state(o: &OpStatus) -> (&'static str, &'static str) {
    match &o.state {
        OpState::Running => ("running", "op.running"),
        OpState::Blocked(_) => ("blocked", "op.blocked"),
        OpState::Succeeded => ("succeeded", "op.ok"),
        OpState::Failed(_) => ("failed", "op.failed"),
        OpState::Cancelled => ("cancelled", "op.blocked"),
    }
}

pub const COLUMNS: &[Column] = &[
    Column::new("ID", 3)
        .right()
        .value(|f, r| on(f, r, |o| Value::Num(o.id as i64)))
        .cell(|f, r| op(f, r).map_or_else(blank, |o| muted(o.id.to_string()))),
    Column::new("OPERATION", 44).min(20).grow(1).filter().value(|f, r| on(f, r, |o| Value::text(&o.title))),
    Column::new("TARGET", 16).priority(1).filter().value(|f, r| on(f, r, |o| Value::text(&o.target))),
    Column::new("STATE", 10)
        .filter()
        .value(|f, r| on(f, r, |o| Value::text(op_state(o).0)))
        .cell(|f, r| op(f, r).map_or_else(blank, |o| (op_state(o).0.into(), op_state(o).1))),
    // Steps done: how far it got (its total follows in the cell).
    Column::new("PROGRESS", 8)
        .priority(1)
        .value(|f, r| on(f, r, |o| Value::Num(o.done.into())))
        .cell(|f, r| op(f, r).map_or_else(blank, |o| text(format!("{}/{}", o.done, o.total)))),
    Column::new("AGE", 5).right().priority(2).value(|f, r| on(f, r, |o| Value::Time(o.started))),
    Column::new("STEP", 60).min(20).grow(2).filter().value(|f, r| Value::of_cell(step(f, r))).cell(step),
];

/// The step it is at, or why it stopped.
fn step(f: &Fleet, r: RowId) -> Cell {
    op(f, r).map_or_else(blank, |o| match &o.state {
        OpState::Blocked(why) | OpState::Failed(why) => (why.clone(), op_state(o).1),
        _ => text(&o.step),
    })
}

/// The operation's row of the JSON snapshot (docs/snapshot.md, `ops`).
pub fn json(f: &Fleet, r: RowId) -> Option<serde_json::Value> {
    let o = op(f, r)?;
    let col = |name| value_of(COLUMNS, name, f, r).to_json();
    let reason = match &o.state {
        OpState::Blocked(r) | OpState::Failed(r) => Some(r.as_str()),
        _ => None,
    };
    Some(json!({
        "id": col("ID"),
        "operation": col("OPERATION"),
        "target": col("TARGET"),
        "state": col("STATE"),
        "reason": crate::ui::json::opt(reason),
        "progress": { "done": o.done, "total": o.total },
        "started_ms": col("AGE"),
        "age_s": age_s(f, o.started),
        "step": o.step,
    }))
}
