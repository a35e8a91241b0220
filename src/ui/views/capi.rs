//! The Cluster API view (`:capi`): the management cluster's tree as `clusterctl describe`
//! draws it, for every cluster at once — each Cluster, its control plane, its
//! MachineDeployments with their MachineSets and Machines, its MachineHealthChecks — with the
//! replicas each wants and has ready, what it is doing (scaling, rolling out, remediating),
//! and what holds it back. Sorted by NAME it is the tree; any other column sorts the rows.

use std::borrow::Cow;

use serde_json::json;

use super::cell::*;
use super::column::{Column, RowId, Value};
use super::tables::value_of;
use crate::model::*;
use crate::ui::json::{age_s, opt};

/// The separator of the tree key's parts: below every printable character, so that a
/// parent sorts right before its children and `md` before `md-2`'s rows.
const SEP: &str = "\u{1}";

/// The object or Machine of a row.
pub fn capi_of(f: &Fleet, r: RowId) -> Option<CapiRow<'_>> {
    f.capi_by_id(r.capi()?)
}

/// Every Cluster API row (objects and Machines), in no order (the NAME sort makes the tree).
pub fn ids(f: &Fleet) -> Vec<RowId> {
    f.capi_ids().map(RowId::Capi).collect()
}

/// Who owns a row, read once for the tree, its depth and the JSON's `parent`: its control
/// plane, else its MachineSet (under its MachineDeployment when it names one), else its
/// MachineDeployment, else its Cluster.
enum Owner<'a> {
    Cluster,
    ControlPlane(&'a str),
    /// (its MachineDeployment, the set's name).
    Set(Option<&'a str>, &'a str),
    Deployment(&'a str),
}

fn owner(row: CapiRow<'_>) -> Owner<'_> {
    match row {
        CapiRow::Object(o) => match (o.kind, &o.owner) {
            (CapiKind::MachineSet, Some(md)) => Owner::Deployment(md),
            _ => Owner::Cluster,
        },
        CapiRow::Machine(m) => match (&m.control_plane, &m.set, &m.deployment) {
            (Some(cp), _, _) => Owner::ControlPlane(cp),
            (None, Some(ms), md) => Owner::Set(md.as_deref(), ms),
            (None, None, Some(md)) => Owner::Deployment(md),
            (None, None, None) => Owner::Cluster,
        },
    }
}

/// How far a row is indented: a Cluster 0, what hangs off it 1, a set 2, a set's Machine 3.
pub fn depth(row: CapiRow<'_>) -> usize {
    match (row, owner(row)) {
        (CapiRow::Object(o), _) if o.kind == CapiKind::Cluster => 0,
        (_, Owner::Cluster) => 1,
        (_, Owner::Set(Some(_), _)) => 3,
        _ => 2,
    }
}

/// The row's sort key in the tree: namespace, cluster, then the owners' names, so that the
/// NAME sort is the tree.
pub fn tree_key(row: CapiRow<'_>) -> String {
    let join = |parts: &[&str]| parts.join(SEP);
    match row {
        CapiRow::Object(o) => {
            let (ns, c, n) = (o.namespace.as_str(), o.cluster.as_str(), o.name.as_str());
            match (o.kind, owner(row)) {
                (CapiKind::Cluster, _) => join(&[ns, c, "0"]),
                (CapiKind::ControlPlane, _) => join(&[ns, c, "1", n]),
                (CapiKind::MachineDeployment, _) => join(&[ns, c, "2", n]),
                (CapiKind::MachineSet, Owner::Deployment(md)) => join(&[ns, c, "2", md, n]),
                (CapiKind::MachineSet, _) => join(&[ns, c, "3", n]),
                (CapiKind::MachineHealthCheck, _) => join(&[ns, c, "5", n]),
            }
        }
        CapiRow::Machine(m) => {
            let (ns, c, n) = (m.namespace.as_str(), m.cluster.as_str(), m.name.as_str());
            match owner(row) {
                Owner::ControlPlane(cp) => join(&[ns, c, "1", cp, n]),
                Owner::Set(Some(md), ms) => join(&[ns, c, "2", md, ms, n]),
                Owner::Deployment(md) => join(&[ns, c, "2", md, "", n]),
                Owner::Set(None, ms) => join(&[ns, c, "3", ms, n]),
                Owner::Cluster => join(&[ns, c, "4", n]),
            }
        }
    }
}

/// The row's owner in the tree: (kind, name), `None` for a Cluster (or a row without one).
pub fn parent(row: CapiRow<'_>) -> Option<(&'static str, &str)> {
    let cluster = match row {
        CapiRow::Object(o) if o.kind == CapiKind::Cluster => return None,
        CapiRow::Object(o) => o.cluster.as_str(),
        CapiRow::Machine(m) => m.cluster.as_str(),
    };
    match owner(row) {
        Owner::ControlPlane(cp) => Some((CapiKind::ControlPlane.name(), cp)),
        Owner::Set(_, ms) => Some(("MachineSet", ms)),
        Owner::Deployment(md) => Some(("MachineDeployment", md)),
        Owner::Cluster if cluster.is_empty() => None,
        Owner::Cluster => Some(("Cluster", cluster)),
    }
}

pub fn name(row: CapiRow<'_>) -> &str {
    match row {
        CapiRow::Object(o) => &o.name,
        CapiRow::Machine(m) => &m.name,
    }
}

pub fn kind(row: CapiRow) -> &'static str {
    match row {
        CapiRow::Object(o) => o.kind.name(),
        CapiRow::Machine(_) => "Machine",
    }
}

/// (ready, desired) of a row: an owner's replicas, a Cluster's control plane and workers
/// together, a MachineHealthCheck's healthy of expected; `None` for a Machine or where the
/// object says nothing yet. Ready is unknown (`None`) while the status does not give
/// `readyReplicas` (v1beta2 omits it until the controller counted; it is no 0).
pub fn ready_of(row: CapiRow) -> Option<(Option<u32>, u32)> {
    let CapiRow::Object(o) = row else { return None };
    if let Some(h) = &o.health {
        return Some((Some(h.healthy?), h.expected?));
    }
    let pair = |r: &Replicas| Some((r.ready, r.desired.or(r.current)?));
    match (o.replicas.as_ref().and_then(pair), o.workers.as_ref().and_then(pair)) {
        (Some(a), Some(b)) => Some((a.0.zip(b.0).map(|(x, y)| x + y), a.1 + b.1)),
        (a, b) => a.or(b),
    }
}

/// Up-to-date replicas (a Cluster: control plane and workers together).
fn up_to_date(row: CapiRow) -> Option<u32> {
    let CapiRow::Object(o) = row else { return None };
    match (o.replicas.and_then(|r| r.up_to_date), o.workers.and_then(|r| r.up_to_date)) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

fn state(row: CapiRow) -> String {
    match row {
        CapiRow::Object(o) => o.state_text(),
        // The failure's words are WHY's; a Machine that failed outside its phase says so.
        CapiRow::Machine(m) if m.failure.is_some() && m.phase != "Failed" => format!("{}, failed", m.phase_text()),
        CapiRow::Machine(m) => m.state_word(),
    }
}

/// What holds it back, in Cluster API's words: a Machine's failure, else why it is being
/// remediated or found unhealthy; an object's `Available`/`RemediationAllowed` False.
fn why(row: CapiRow<'_>) -> Option<&str> {
    match row {
        CapiRow::Object(o) => o.why.as_deref(),
        CapiRow::Machine(m) => m.failure.as_deref().or(m.remediating.as_deref()).or(m.unhealthy.as_deref()),
    }
}

fn state_cell(row: CapiRow) -> Cell {
    let s = state(row);
    let bad = match row {
        CapiRow::Object(o) => {
            o.phase == "Failed" || o.health.as_ref().is_some_and(|h| h.blocked) || (o.why.is_some() && s != "healthy")
        }
        CapiRow::Machine(m) => m.failed() || m.remediating.is_some() || m.unhealthy.is_some(),
    };
    let tok = if bad {
        "status.notready"
    } else if s.is_empty() {
        return muted("-");
    } else if matches!(row, CapiRow::Object(o) if !o.doing.is_empty()) || s.starts_with("Provisioning") {
        "status.pending"
    } else {
        "status.ready"
    };
    (s, tok)
}

fn on<'a>(f: &'a Fleet, r: RowId, v: impl FnOnce(CapiRow<'a>) -> Value<'a>) -> Value<'a> {
    capi_of(f, r).map_or(Value::Absent, v)
}

fn draw(f: &Fleet, r: RowId, c: impl FnOnce(CapiRow) -> Cell) -> Cell {
    capi_of(f, r).map_or_else(blank, c)
}

fn some(s: &str) -> Value<'_> {
    if s.is_empty() { Value::Absent } else { Value::text(s) }
}

pub const COLUMNS: &[Column] = &[
    // Sorted by the tree key (the tree itself); drawn indented by depth.
    Column::new("NAME", 28)
        .min(16)
        .grow(1)
        .filter()
        .value(|f, r| on(f, r, |row| Value::Text(Cow::Owned(tree_key(row)))))
        .cell(|f, r| {
            draw(f, r, |row| {
                let depth = depth(row);
                (format!("{}{}", "  ".repeat(depth), name(row)), if depth == 0 { "ui.title" } else { "ui.text" })
            })
        }),
    Column::new("KIND", 19).min(7).filter().value(|f, r| on(f, r, |row| Value::text(kind(row)))),
    // Sorted by the replicas ready; drawn `ready/desired` (a MachineHealthCheck: healthy/expected).
    Column::new("READY", 7)
        .right()
        .value(|f, r| {
            on(f, r, |row| match ready_of(row) {
                None => Value::Absent,
                Some((None, _)) => Value::Unknown,
                Some((Some(ok), _)) => Value::Num(i64::from(ok)),
            })
        })
        .cell(|f, r| {
            draw(f, r, |row| match ready_of(row) {
                None => muted("-"),
                Some((None, want)) => (format!("?/{want}"), "ui.text.muted"),
                Some((Some(ok), want)) => {
                    (format!("{ok}/{want}"), if ok < want { "status.notready" } else { "ui.text" })
                }
            })
        }),
    Column::new("UP-TO-DATE", 10)
        .right()
        .priority(5)
        .value(|f, r| on(f, r, |row| up_to_date(row).map_or(Value::Absent, |n| Value::Num(i64::from(n))))),
    Column::new("STATE", 22)
        .min(9)
        .grow(1)
        .filter()
        .value(|f, r| on(f, r, |row| words(state(row))))
        .cell(|f, r| draw(f, r, state_cell)),
    Column::new("NODE", 12).min(10).grow(1).priority(2).filter().value(|f, r| {
        on(f, r, |row| match row {
            CapiRow::Machine(m) => m.node.as_deref().map_or(Value::Absent, Value::text),
            CapiRow::Object(_) => Value::Absent,
        })
    }),
    Column::new("VERSION", 8).priority(5).value(|f, r| {
        on(f, r, |row| match row {
            CapiRow::Object(o) => some(&o.version),
            CapiRow::Machine(m) => some(&m.version),
        })
    }),
    Column::new("WHY", 30)
        .min(10)
        .grow(3)
        .priority(1)
        .filter()
        .value(|f, r| on(f, r, |row| why(row).map_or(Value::Absent, Value::text)))
        .cell(|f, r| draw(f, r, |row| why(row).map_or_else(|| muted("-"), |w| (w.to_string(), "status.notready")))),
    Column::new("AGE", 4).right().priority(5).value(|f, r| {
        on(f, r, |row| {
            Value::Age(match row {
                CapiRow::Object(o) => o.created,
                CapiRow::Machine(m) => m.created,
            })
        })
    }),
];

fn words(s: String) -> Value<'static> {
    if s.is_empty() { Value::Absent } else { Value::Text(Cow::Owned(s)) }
}

fn replicas_json(r: Option<Replicas>) -> serde_json::Value {
    match r {
        None => serde_json::Value::Null,
        Some(r) => json!({
            "desired": opt(r.desired), "current": opt(r.current), "ready": opt(r.ready),
            "available": opt(r.available), "up_to_date": opt(r.up_to_date),
        }),
    }
}

/// The row's JSON (docs/snapshot.md, `capi`).
pub fn json(f: &Fleet, r: RowId) -> Option<serde_json::Value> {
    let row = capi_of(f, r)?;
    let col = |name| value_of(COLUMNS, name, f, r).to_json();
    let (namespace, cluster, created) = match row {
        CapiRow::Object(o) => (&o.namespace, &o.cluster, o.created),
        CapiRow::Machine(m) => (&m.namespace, &m.cluster, m.created),
    };
    let parent = parent(row).map(|(k, n)| json!({"kind": k, "name": n}));
    let (phase, replicas, control_plane, workers, health, node, version, paused, deleting) = match row {
        CapiRow::Object(o) => {
            let (replicas, control_plane) = match o.kind {
                CapiKind::Cluster => (None, o.replicas),
                _ => (o.replicas, None),
            };
            let health = o.health.as_ref().map(|h| {
                json!({"expected": opt(h.expected), "healthy": opt(h.healthy),
                    "remediations_allowed": opt(h.remediations_allowed), "targets": h.targets, "blocked": h.blocked})
            });
            (&o.phase, replicas, control_plane, o.workers, health, None, &o.version, o.paused, o.deleting)
        }
        CapiRow::Machine(m) => (&m.phase, None, None, None, None, m.node.as_deref(), &m.version, false, m.deleting),
    };
    let text = |s: &String| if s.is_empty() { serde_json::Value::Null } else { s.as_str().into() };
    Some(json!({
        "kind": kind(row),
        "namespace": namespace,
        "name": name(row),
        "cluster": if cluster.is_empty() { serde_json::Value::Null } else { cluster.as_str().into() },
        "parent": parent,
        "depth": depth(row),
        "phase": text(phase),
        "state": col("STATE"),
        "ready": col("READY"),
        "desired": ready_of(row).map(|r| r.1),
        "replicas": replicas_json(replicas),
        "control_plane": replicas_json(control_plane),
        "workers": replicas_json(workers),
        "health": health,
        "node": node,
        "version": text(version),
        "why": col("WHY"),
        "paused": paused,
        "deleting": deleting,
        "created_ms": created,
        "age_s": age_s(f, created),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_puts_each_row_under_its_owner() {
        let mut f = Fleet::default();
        let obj = |kind, name: &str, owner: Option<&str>| CapiObject {
            kind,
            namespace: "capi".into(),
            name: name.into(),
            cluster: "prod".into(),
            owner: owner.map(str::to_string),
            ..Default::default()
        };
        let machine = |name: &str, md: Option<&str>, ms: Option<&str>, cp: Option<&str>| Machine {
            namespace: "capi".into(),
            name: name.into(),
            cluster: "prod".into(),
            deployment: md.map(str::to_string),
            set: ms.map(str::to_string),
            control_plane: cp.map(str::to_string),
            ..Default::default()
        };
        for d in [
            Delta::CapiUpsert(obj(CapiKind::MachineHealthCheck, "mhc", None)),
            Delta::CapiUpsert(obj(CapiKind::MachineSet, "md-2-x", Some("md-2"))),
            Delta::CapiUpsert(obj(CapiKind::MachineDeployment, "md-2", None)),
            Delta::CapiUpsert(obj(CapiKind::MachineSet, "md-x", Some("md"))),
            Delta::CapiUpsert(obj(CapiKind::MachineDeployment, "md", None)),
            Delta::CapiUpsert(obj(CapiKind::ControlPlane, "cp", None)),
            Delta::CapiUpsert(obj(CapiKind::Cluster, "prod", Some("cp"))),
            Delta::MachineUpsert(machine("m-md", Some("md"), Some("md-x"), None)),
            Delta::MachineUpsert(machine("m-md2", Some("md-2"), Some("md-2-x"), None)),
            Delta::MachineUpsert(machine("m-cp", None, None, Some("cp"))),
            Delta::MachineUpsert(machine("m-alone", None, None, None)),
        ] {
            f.apply(d);
        }
        let rows = crate::ui::views::tables::rows(&f, crate::ui::command::ViewKind::Capi, "", None, false);
        let drawn: Vec<String> = rows
            .iter()
            .map(|r| crate::ui::views::tables::cell(&f, crate::ui::command::ViewKind::Capi, *r, "NAME").0)
            .collect();
        assert_eq!(
            drawn,
            [
                "prod",
                "  cp",
                "    m-cp",
                "  md",
                "    md-x",
                "      m-md",
                "  md-2",
                "    md-2-x",
                "      m-md2",
                "  m-alone",
                "  mhc"
            ]
        );
        let j = json(&f, rows[5]).expect("a row");
        assert_eq!(j["parent"], json!({"kind": "MachineSet", "name": "md-x"}));
        assert_eq!(j["kind"], "Machine");
    }

    #[test]
    fn ready_replicas_the_status_does_not_give_are_unknown_not_zero() {
        let mut f = Fleet::default();
        let md = |name: &str, ready: Option<u32>| CapiObject {
            kind: CapiKind::MachineDeployment,
            namespace: "capi".into(),
            name: name.into(),
            cluster: "prod".into(),
            replicas: Some(Replicas { desired: Some(3), current: Some(3), ready, ..Default::default() }),
            ..Default::default()
        };
        f.apply(Delta::CapiUpsert(md("counted", Some(0))));
        f.apply(Delta::CapiUpsert(md("uncounted", None)));
        let rows = crate::ui::views::tables::rows(&f, crate::ui::command::ViewKind::Capi, "", None, false);
        let of = |name: &str| {
            let r = rows.iter().copied().find(|r| capi_of(&f, *r).is_some_and(|row| super::name(row) == name));
            let r = r.expect("a row");
            (
                crate::ui::views::tables::cell(&f, crate::ui::command::ViewKind::Capi, r, "READY").0,
                json(&f, r).expect("json"),
            )
        };
        let (cell, j) = of("counted");
        assert_eq!((cell.as_str(), j["ready"].clone(), j["desired"].clone()), ("0/3", json!(0), json!(3)));
        let (cell, j) = of("uncounted");
        assert_eq!(
            (cell.as_str(), j["ready"].clone(), j["desired"].clone()),
            ("?/3", serde_json::Value::Null, json!(3))
        );
    }
}
