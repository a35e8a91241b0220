//! `fabrik describe` (the inspect pane's text, `y`) against kubectl: the YAML, read back, is
//! the object `kubectl get -o json` returns without `metadata.managedFields`, and the heading
//! counts the entries folded; the events listed are those `kubectl get events` selects for
//! the object (its kind, name, namespace).

use std::path::Path;

use serde_json::Value;

use super::{common::kubectl, fabrik};

/// One object: the differences, one line each; `None` when the object changed while it was
/// read (the caller tries again).
pub fn compare(kubeconfig: &Path, kind: &str, ns: Option<&str>, name: &str) -> Option<Vec<String>> {
    let what = format!("describe {kind} {}{name}", ns.map(|n| format!("{n}/")).unwrap_or_default());
    let mut get = vec!["get", kind, name, "-o", "json"];
    let mut args = vec!["describe", kind, name];
    if let Some(ns) = ns {
        get.extend(["-n", ns]);
        args.extend(["-n", ns]);
    }
    let before: Value = serde_json::from_str(&kubectl(kubeconfig, &get)).expect("kubectl JSON");
    let text = fabrik(kubeconfig, &args);
    let after: Value = serde_json::from_str(&kubectl(kubeconfig, &get)).expect("kubectl JSON");
    if before != after {
        return None;
    }
    let mut diffs = Vec::new();
    let (yaml, events) = text.rsplit_once("\n\nEvents").unwrap_or((&text, ""));
    let (heading, yaml) = yaml.split_once('\n').unwrap_or((yaml, ""));
    let got: Value = match serde_saphyr::from_str(yaml) {
        Ok(v) => v,
        Err(e) => return Some(vec![format!("{what}: the YAML does not parse ({e}):\n{yaml}")]),
    };
    let mut want = before;
    let managed = want["metadata"].as_object_mut().and_then(|m| m.remove("managedFields"));
    let folded = managed.as_ref().and_then(Value::as_array).map_or(0, Vec::len);
    if got != want {
        diffs.push(format!("{what}: the YAML is not the object kubectl reads:\nfabrik {got}\nkubectl {want}"));
    }
    let says = if folded == 0 { String::new() } else { format!("managedFields: {folded} entries folded") };
    if !heading.starts_with('#') || !heading.contains(&says) {
        diffs.push(format!("{what}: heading {heading:?}, kubectl has {folded} managedFields entries"));
    }

    // The events kubectl selects for the object.
    let mut fields = format!("involvedObject.name={name},involvedObject.kind={}", s(&want["kind"]));
    if let Some(ns) = ns {
        fields.push_str(&format!(",involvedObject.namespace={ns}"));
    }
    let uid = s(&want["metadata"]["uid"]);
    let mut ev_args = vec!["get", "events", "--field-selector", &fields, "-o", "json"];
    match ns {
        Some(ns) => ev_args.extend(["-n", ns]),
        None => ev_args.push("-A"),
    }
    let listed: Value = serde_json::from_str(&kubectl(kubeconfig, &ev_args)).expect("kubectl JSON");
    let mine: Vec<&Value> = listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["involvedObject"]["uid"].as_str().is_none_or(|u| u == uid))
        .collect();
    let rows: Vec<&str> = events.lines().skip(2).filter(|l| !l.trim().is_empty()).collect();
    let head = events.lines().next().unwrap_or("");
    let want_head = if mine.is_empty() { ": <none>".to_string() } else { format!(" ({}):", mine.len()) };
    if head != want_head || rows.len() != mine.len() {
        diffs.push(format!("{what}: events {head:?} with {} rows; kubectl lists {}", rows.len(), mine.len()));
    }
    for e in &mine {
        let (reason, message) = (s(&e["reason"]), s(&e["message"]));
        let count = e["count"].as_u64().unwrap_or(1);
        if !rows.iter().any(|r| {
            r.contains(&format!(" {reason} ")) && r.ends_with(message.as_str()) && r.contains(&format!(" {count}  "))
        }) {
            diffs.push(format!("{what}: kubectl's event {reason} ×{count} {message:?} is not listed:\n{events}"));
        }
    }
    Some(diffs)
}

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}
