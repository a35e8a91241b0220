//! The truth for why pods are pending, from the API's pods and core/v1 Events alone: a pod
//! bound to a node waits for the container its status says waits for another reason than
//! being created (`reason: message`, init containers first), else for its devices when the
//! kubelet's latest FailedPrepareDynamicResources event for it says they were not prepared
//! (the driver's error, the words after the last `: `), else it is starting; else the scheduler's latest FailedScheduling event for it
//! (none: not scheduled yet), its reasons (the first sentence after `nodes are available:`) in the words the
//! README promises. Written apart from fabrik's parser.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{s, ts_ms};

/// When an Event last happened: lastTimestamp, else eventTime (events.k8s.io), else its
/// creation.
fn when(e: &Value) -> u64 {
    for k in ["lastTimestamp", "eventTime"] {
        if e[k].is_string() {
            return ts_ms(&e[k]);
        }
    }
    ts_ms(&e["metadata"]["creationTimestamp"])
}

/// The reason's words (README, Pods view: WAITING).
fn said(reason: &str) -> String {
    if let Some(r) = reason.strip_prefix("Insufficient ") {
        return format!("not enough free {r}");
    }
    if let Some(t) = reason.strip_prefix("node(s) had untolerated taint {") {
        return format!("tainted {}", t.split(':').next().unwrap_or(t));
    }
    match reason {
        "node(s) didn't match Pod's node affinity/selector" => "not matching its node selector/affinity".into(),
        "node(s) were unschedulable" => "cordoned".into(),
        "cannot allocate all claims" => "no devices for its DRA claims".into(),
        other => other.into(),
    }
}

/// `(why, text)` for a FailedScheduling message of the usual shape.
fn read(message: &str) -> (String, String) {
    let Some((head, list)) = message.split_once(" nodes are available: ") else {
        return (message.chars().take(60).collect(), message.to_string());
    };
    // The list ends with its sentence; post-filter plugins (DRA, preemption) follow it.
    let list = list.split(". ").next().unwrap_or(list);
    let total = head.split('/').nth(1).unwrap_or("?").trim().to_string();
    let mut lacking: Vec<(i64, String)> = Vec::new();
    let mut ruled_out: Vec<(i64, String)> = Vec::new();
    // Parts start with a count: `3 Insufficient x, 5 node(s) had untolerated taint {a: b}`.
    let mut parts: Vec<String> = Vec::new();
    for piece in list.trim_end_matches('.').split(", ") {
        match (piece.split(' ').next().and_then(|n| n.parse::<i64>().ok()), parts.last_mut()) {
            (None, Some(last)) => {
                last.push_str(", ");
                last.push_str(piece);
            }
            _ => parts.push(piece.to_string()),
        }
    }
    for p in parts {
        let (n, reason) = p.split_once(' ').unwrap_or(("0", &p));
        let n: i64 = n.parse().unwrap_or(0);
        let words = said(reason.trim_end_matches('.'));
        let list = if words.starts_with("not enough free ") || words == "no devices for its DRA claims" {
            &mut lacking
        } else {
            &mut ruled_out
        };
        match list.iter_mut().find(|(_, w)| *w == words) {
            Some(e) => e.0 += n,
            None => list.push((n, words)),
        }
    }
    lacking.sort_by_key(|(n, _)| -n);
    ruled_out.sort_by_key(|(n, _)| -n);
    let all: Vec<(i64, String)> = lacking.into_iter().chain(ruled_out).collect();
    let why = all.first().map_or_else(|| "no node fits".to_string(), |(_, w)| w.clone());
    let text =
        format!("no node of {total}: {}", all.iter().map(|(n, w)| format!("{n} {w}")).collect::<Vec<_>>().join(", "));
    (why, text)
}

/// Per pending pod (`namespace/name`), and per running pod with a container the kubelet is
/// restarting: `{why, text}`.
pub fn waiting(pods: &[Value], events: &[Value]) -> BTreeMap<String, Value> {
    // The latest FailedScheduling per pod; a later Scheduled ends it.
    let mut last: BTreeMap<String, (u64, &str, String)> = BTreeMap::new();
    let mut prepare: BTreeMap<String, (u64, String)> = BTreeMap::new();
    for e in events {
        let o = &e["involvedObject"];
        if o["kind"] != "Pod" {
            continue;
        }
        let reason = e["reason"].as_str().unwrap_or("");
        if reason == "FailedPrepareDynamicResources" {
            let key = format!("{}/{}", s(&o["namespace"]), s(&o["name"]));
            let m = s(&e["message"]);
            let cause = m.rsplit(": ").next().unwrap_or("").trim().to_string();
            if prepare.get(&key).is_none_or(|(t, _)| when(e) >= *t) {
                prepare.insert(key, (when(e), cause));
            }
            continue;
        }
        if reason != "FailedScheduling" && reason != "Scheduled" {
            continue;
        }
        let key = format!("{}/{}", s(&o["namespace"]), s(&o["name"]));
        let at = when(e);
        if last.get(&key).is_none_or(|(t, _, _)| at >= *t) {
            last.insert(key, (at, reason, s(&e["message"])));
        }
    }
    let mut out = BTreeMap::new();
    for p in pods {
        let phase = p["status"]["phase"].as_str().unwrap_or("Pending");
        if !matches!(phase, "Pending" | "Running") || p["metadata"]["deletionTimestamp"].is_string() {
            continue;
        }
        let key = format!("{}/{}", s(&p["metadata"]["namespace"]), s(&p["metadata"]["name"]));
        // A container waiting for another reason than being created (init containers first).
        let statuses = ["initContainerStatuses", "containerStatuses"].map(|k| p["status"][k].as_array().cloned());
        let container = statuses.into_iter().flatten().flatten().find_map(|c| {
            let w = &c["state"]["waiting"];
            let reason = w["reason"]
                .as_str()
                .filter(|r| !r.is_empty() && *r != "ContainerCreating" && *r != "PodInitializing")?;
            Some((reason.to_string(), s(&w["message"])))
        });
        if phase == "Running" {
            // Running with a container restarting (CrashLoopBackOff): kubectl's STATUS.
            if let Some((reason, m)) = container {
                let text = if m.is_empty() { reason.clone() } else { format!("{reason}: {m}") };
                out.insert(key, json!({ "why": reason, "text": text }));
            }
            continue;
        }
        let (why, text) = if p["spec"]["nodeName"].as_str().is_some_and(|n| !n.is_empty()) {
            match (container, prepare.get(&key)) {
                (Some((reason, m)), _) if m.is_empty() => (reason.clone(), reason),
                (Some((reason, m)), _) => (reason.clone(), format!("{reason}: {m}")),
                (None, Some((_, cause))) => {
                    ("devices not prepared".to_string(), format!("devices not prepared: {cause}"))
                }
                (None, None) => ("starting".to_string(), "starting".to_string()),
            }
        } else {
            match last.get(&key) {
                Some((_, "FailedScheduling", m)) => read(m),
                _ => ("not scheduled yet".to_string(), "not scheduled yet".to_string()),
            }
        };
        out.insert(key, json!({ "why": why, "text": text }));
    }
    out
}

/// Per namespace: its controllers whose latest pod creation a ResourceQuota refused — the
/// latest of their FailedCreate / SuccessfulCreate Events (a refusal of the same second as
/// a creation stands) is a FailedCreate saying `exceeded quota: Q, requested: …, used: …,
/// limited: …` — as `{object: kind/ns/name, quota, text}`, by object.
/// A pod's restarts as kubectl's RESTARTS column counts them, read from the pod's JSON, and
/// the latest `lastState.terminated.finishedAt` among the counted containers: while an init
/// container is not done (exit 0, or a started sidecar) and no Initialized condition is True,
/// the init containers' restarts up to that one; else the sidecars' (init containers with
/// restartPolicy Always) and every container's.
pub fn restarts(p: &Value) -> (u64, Option<u64>) {
    let st = &p["status"];
    let sidecars: Vec<&str> = p["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["restartPolicy"] == "Always")
        .filter_map(|c| c["name"].as_str())
        .collect();
    let exit = |c: &Value| {
        c["lastState"]["terminated"]["finishedAt"]
            .is_string()
            .then(|| ts_ms(&c["lastState"]["terminated"]["finishedAt"]))
    };
    let n = |c: &Value| c["restartCount"].as_u64().unwrap_or(0);
    let mut init = (0, None);
    let mut side = (0, None);
    let mut done = true;
    for c in st["initContainerStatuses"].as_array().into_iter().flatten() {
        init = (init.0 + n(c), init.1.max(exit(c)));
        let sidecar = c["name"].as_str().is_some_and(|name| sidecars.contains(&name));
        if sidecar {
            side = (side.0 + n(c), side.1.max(exit(c)));
        }
        let finished = c["state"]["terminated"]["exitCode"].as_i64() == Some(0);
        if !(finished || (sidecar && c["started"] == true)) {
            done = false;
            break;
        }
    }
    let initialized = st["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Initialized" && c["status"] == "True"));
    if !done && !initialized {
        return init;
    }
    st["containerStatuses"].as_array().into_iter().flatten().fold(side, |(k, t), c| (k + n(c), t.max(exit(c))))
}

pub fn refused_by_quota(events: &[Value]) -> BTreeMap<String, Vec<Value>> {
    let mut last: BTreeMap<String, (u64, bool, String)> = BTreeMap::new();
    for e in events {
        let reason = e["reason"].as_str().unwrap_or("");
        let failed = match reason {
            "FailedCreate" => true,
            "SuccessfulCreate" => false,
            _ => continue,
        };
        let o = &e["involvedObject"];
        let object = format!("{}/{}/{}", s(&o["kind"]).to_lowercase(), s(&o["namespace"]), s(&o["name"]));
        let at = when(e);
        let newer = match last.get(&object) {
            None => true,
            Some((t, was_failed, _)) => at > *t || (at == *t && failed && !was_failed),
        };
        if newer {
            last.insert(object, (at, failed, s(&e["message"])));
        }
    }
    let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (object, (_, failed, message)) in last {
        let Some(rest) = message.split("exceeded quota: ").nth(1).filter(|_| failed) else { continue };
        let mut fields = rest.split(", ");
        let quota = fields.next().unwrap_or("").to_string();
        let mut said = Vec::new();
        for f in fields {
            for (key, word) in [("requested: ", "requested"), ("used: ", "used"), ("limited: ", "limited")] {
                if let Some(v) = f.strip_prefix(key) {
                    said.push(format!("{word} {v}"));
                }
            }
        }
        let text = if said.is_empty() {
            format!("refused by quota {quota}")
        } else {
            format!("refused by quota {quota}: {}", said.join(", "))
        };
        let ns = object.split('/').nth(1).unwrap_or("").to_string();
        out.entry(ns).or_default().push(json!({ "object": object, "quota": quota, "text": text }));
    }
    out
}
