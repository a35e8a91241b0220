//! The hosts view (`:hosts`): every Metal3 BareMetalHost the management cluster holds, as the
//! baremetal-operator states it — provisioning state, power (what it is and what it is asked),
//! operational status and error, the inspected hardware — with the node and Machine it serves.
//! The node screen shows the host under one node; this view also shows the hosts under no
//! node (available spares, hosts still registering or inspecting, hosts that never came up),
//! which are the first place to look when a MachineDeployment cannot scale.

use std::borrow::Cow;

use serde_json::json;

use super::cell::*;
use super::column::{Column, RowId, Value};
use super::tables::value_of;
use crate::model::*;
use crate::ui::json::opt;

/// The host of a row.
pub fn host_of(f: &Fleet, r: RowId) -> Option<&BareMetalHost> {
    f.host_by_id(r.host()?)
}

/// Every host's row, in no order (the HOST sort orders them).
pub fn ids(f: &Fleet) -> Vec<RowId> {
    f.host_ids().map(RowId::Host).collect()
}

fn on<'a>(f: &'a Fleet, r: RowId, v: impl FnOnce(&'a BareMetalHost) -> Value<'a>) -> Value<'a> {
    host_of(f, r).map_or(Value::Absent, v)
}

fn draw(f: &Fleet, r: RowId, c: impl FnOnce(&BareMetalHost) -> Cell) -> Cell {
    host_of(f, r).map_or_else(blank, c)
}

fn words(s: String) -> Value<'static> {
    if s.is_empty() { Value::Absent } else { Value::Text(Cow::Owned(s)) }
}

/// `errorType: errorMessage` while the operator reports an error.
pub fn error_text(h: &BareMetalHost) -> String {
    match (h.error_type.as_str(), h.error_message.as_str()) {
        ("", "") => String::new(),
        (t, "") => t.to_string(),
        ("", m) => m.to_string(),
        (t, m) => format!("{t}: {m}"),
    }
}

/// The nodes its Machine became, joined.
fn nodes(f: &Fleet, h: &BareMetalHost) -> String {
    f.nodes_of_host(h).join(",")
}

pub const COLUMNS: &[Column] = &[
    // Sorted and filtered by `namespace/name`; drawn by name (the namespace has its column).
    Column::new("HOST", 20)
        .min(12)
        .grow(2)
        .filter()
        .value(|f, r| on(f, r, |h| Value::Text(Cow::Owned(h.key()))))
        .cell(|f, r| draw(f, r, |h| (h.name.clone(), "ui.text"))),
    Column::new("NAMESPACE", 14).min(9).priority(5).filter().value(|f, r| on(f, r, |h| Value::text(&h.namespace))),
    // status.provisioning.state; none yet: the operator has not reconciled it.
    Column::new("STATE", 13).min(9).filter().value(|f, r| on(f, r, |h| words(h.state.clone()))).cell(|f, r| {
        draw(f, r, |h| match h.state.as_str() {
            "" => muted("unknown"),
            "provisioned" | "externally provisioned" => (h.state.clone(), "ui.text"),
            "available" | "ready" => (h.state.clone(), "status.ready"),
            s => (s.to_string(), "status.cordoned"),
        })
    }),
    // What the operator last saw, and what it is asked where they differ.
    Column::new("POWER", 14).min(5).filter().value(|f, r| on(f, r, |h| words(h.power_text()))).cell(|f, r| {
        draw(f, r, |h| {
            let tok = match (h.powered_on, h.online) {
                _ if h.reboot_pending => "status.cordoned",
                (true, true) => "ui.text",
                (false, false) => "ui.text.muted",
                _ => "status.cordoned",
            };
            (h.power_text(), tok)
        })
    }),
    // status.operationalStatus: OK, discovered, error, delayed, detached, servicing.
    Column::new("STATUS", 10).min(6).filter().value(|f, r| on(f, r, |h| words(h.operational.clone()))).cell(|f, r| {
        draw(f, r, |h| match h.operational.as_str() {
            "" => muted("-"),
            "OK" => ("OK".into(), "status.ready"),
            "error" => ("error".into(), "status.notready"),
            s => (s.to_string(), "status.cordoned"),
        })
    }),
    Column::new("NODE", 12).min(8).grow(1).priority(2).filter().value(|f, r| on(f, r, |h| words(nodes(f, h)))),
    Column::new("MACHINE", 16)
        .min(8)
        .grow(1)
        .priority(4)
        .filter()
        .value(|f, r| on(f, r, |h| f.machine_of_host(h).map_or(Value::Absent, |m| Value::text(&m.name)))),
    Column::new("HARDWARE", 30)
        .min(10)
        .grow(2)
        .priority(5)
        .filter()
        .value(|f, r| on(f, r, |h| words(h.hardware.as_ref().map(Hardware::text).unwrap_or_default()))),
    Column::new("ERROR", 30)
        .min(10)
        .grow(3)
        .priority(1)
        .filter()
        .value(|f, r| on(f, r, |h| words(error_text(h))))
        .cell(|f, r| {
            draw(f, r, |h| match error_text(h) {
                e if e.is_empty() => muted("-"),
                e => (e, "status.notready"),
            })
        }),
];

/// The host as the fleet's JSON names it under a node (`host`).
pub fn host_json(f: &Fleet, h: &BareMetalHost) -> serde_json::Value {
    json!({
        "namespace": h.namespace,
        "name": h.name,
        "provisioning_state": h.state,
        "operational_status": h.operational,
        "error_type": h.error_type,
        "error_message": h.error_message,
        "powered_on": h.powered_on,
        "online": h.online,
        "reboot_pending": h.reboot_pending,
        "managed_by": crate::ui::json::managed_by(f, &crate::model::gitops::key("baremetalhost", Some(&h.namespace), &h.name)),
        "state": h.state_text(),
        "hardware": h.hardware.as_ref().map(|hw| json!({
            "system": opt((!hw.system.is_empty()).then_some(hw.system.as_str())),
            "cpu_model": opt((!hw.cpu_model.is_empty()).then_some(hw.cpu_model.as_str())),
            "cpus": hw.cpus,
            "ram_mib": hw.ram_mib,
            "nics": hw.nics,
            "nic_gbps": opt((hw.nic_gbps > 0).then_some(hw.nic_gbps)),
            "disks": hw.disks,
        })),
    })
}

/// The host's row of the JSON snapshot (docs/snapshot.md, `hosts`): what the fleet says of
/// it under a node, and the row's own columns.
pub fn json(f: &Fleet, r: RowId) -> Option<serde_json::Value> {
    let h = host_of(f, r)?;
    let col = |name| value_of(COLUMNS, name, f, r).to_json();
    let mut v = host_json(f, h);
    if let Some(o) = v.as_object_mut() {
        o.insert("host".into(), col("HOST"));
        o.insert("power".into(), col("POWER"));
        o.insert("inspect_pending".into(), h.inspect_pending.into());
        let at = |t: &str| opt((!t.is_empty()).then_some(t));
        o.insert("inspection".into(), json!({ "started": at(&h.inspect_start), "ended": at(&h.inspect_end) }));
        o.insert("consumer".into(), opt((!h.consumer.is_empty()).then_some(h.consumer.as_str())));
        o.insert("nodes".into(), json!(f.nodes_of_host(h)));
        o.insert("machine".into(), col("MACHINE"));
        o.insert("deleting".into(), h.deleting.into());
    }
    Some(v)
}
