//! The events view: the fleet's recent events, newest first in the row ids.

use serde_json::json;

use super::cell::*;
use super::column::{Column, RowId, Value};
use super::tables::value_of;
use crate::model::*;
use crate::ui::json::age_s;

/// The event `i` places from the newest.
pub fn event_at(f: &Fleet, i: u32) -> Option<&Event> {
    let n = f.events.len();
    f.events.get(n.checked_sub(1 + i as usize)?)
}

fn event(f: &Fleet, r: RowId) -> Option<&Event> {
    event_at(f, r.event()?)
}

fn on<'a>(f: &'a Fleet, r: RowId, v: impl FnOnce(&'a Event) -> Value<'a>) -> Value<'a> {
    event(f, r).map_or(Value::Absent, v)
}

pub const COLUMNS: &[Column] = &[
    Column::new("AGE", 5).right().value(|f, r| on(f, r, |e| Value::Time(e.ts))),
    Column::new("TYPE", 7).priority(1).filter().value(|f, r| on(f, r, |e| Value::text(e.severity.as_str()))).cell(
        |f, r| {
            event(f, r).map_or_else(blank, |e| {
                let tok = match e.severity {
                    Severity::Info => "severity.info",
                    Severity::Warning => "severity.warning",
                    Severity::Error => "severity.error",
                };
                (e.severity.as_str().into(), tok)
            })
        },
    ),
    Column::new("REASON", 20).min(12).priority(2).filter().value(|f, r| on(f, r, |e| Value::text(&e.reason))),
    Column::new("OBJECT", 28).min(16).grow(1).filter().value(|f, r| on(f, r, |e| Value::text(&e.object))),
    Column::new("MESSAGE", 80).min(20).grow(3).filter().value(|f, r| on(f, r, |e| Value::text(&e.message))),
];

/// The event's row of the JSON snapshot (docs/snapshot.md, `events`).
pub fn json(f: &Fleet, r: RowId) -> Option<serde_json::Value> {
    let e = event(f, r)?;
    let col = |name| value_of(COLUMNS, name, f, r).to_json();
    Some(json!({
        "ts_ms": col("AGE"),
        "age_s": age_s(f, e.ts),
        "type": col("TYPE"),
        "reason": col("REASON"),
        "object": col("OBJECT"),
        "message": col("MESSAGE"),
    }))
}
