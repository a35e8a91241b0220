//! The Workloads view and the tenants' `queued` figures, computed here from `kubectl get
//! workloads,localqueues -o json` alone (never with fabrik's code), the way Kueue's
//! conditions read (protocols.md §7).

use std::collections::BTreeMap;

use serde_json::{Value, json};

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn cond<'a>(w: &'a Value, kind: &str) -> Option<&'a Value> {
    w["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == kind)
}

fn is(w: &Value, kind: &str) -> bool {
    cond(w, kind).is_some_and(|c| c["status"] == "True")
}

/// Where a Workload stands, most decisive first.
pub fn state(w: &Value) -> &'static str {
    let active = w["spec"]["active"].as_bool().unwrap_or(true);
    if is(w, "Finished") {
        "Finished"
    } else if !active {
        "Inactive"
    } else if is(w, "Admitted") {
        "Admitted"
    } else if is(w, "QuotaReserved") {
        "QuotaReserved"
    } else if is(w, "Evicted") {
        "Evicted"
    } else if cond(w, "QuotaReserved").is_some_and(|c| c["reason"] == "Inadmissible") {
        "Inadmissible"
    } else {
        "Pending"
    }
}

/// GPUs its pod sets ask for: per pod set, count × the containers' `nvidia.com/gpu`.
fn gpus(w: &Value) -> i64 {
    let mut n = 0;
    for ps in w["spec"]["podSets"].as_array().into_iter().flatten() {
        let count = ps["count"].as_i64().unwrap_or(1);
        let per: i64 = ps["template"]["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let r = &c["resources"];
                let q = r["requests"]["nvidia.com/gpu"].as_str().or(r["limits"]["nvidia.com/gpu"].as_str());
                q.and_then(|q| q.parse::<i64>().ok()).unwrap_or(0)
            })
            .sum();
        n += count * per;
    }
    n
}

/// fabrik's Workload rows as kubectl's JSON says they must read: by `namespace/name`, the
/// keys compared. `tenant_of_cq` names the tenant of a ClusterQueue's namespaces (fabrik's
/// tenant for a namespace Kueue serves is its ClusterQueue).
pub fn truth(workloads: &Value, local_queues: &Value) -> BTreeMap<String, Value> {
    let lq: BTreeMap<String, String> = local_queues["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|q| {
            (format!("{}/{}", s(&q["metadata"]["namespace"]), s(&q["metadata"]["name"])), s(&q["spec"]["clusterQueue"]))
        })
        .collect();
    let items: Vec<&Value> = workloads["items"].as_array().into_iter().flatten().collect();
    let key = |w: &Value| format!("{}/{}", s(&w["metadata"]["namespace"]), s(&w["metadata"]["name"]));
    let cq = |w: &Value| {
        let admitted = s(&w["status"]["admission"]["clusterQueue"]);
        if admitted.is_empty() {
            lq.get(&format!("{}/{}", s(&w["metadata"]["namespace"]), s(&w["spec"]["queueName"])))
                .cloned()
                .unwrap_or_default()
        } else {
            admitted
        }
    };
    // Queued (pending or evicted, active) per ClusterQueue: priority, then age, then name.
    let mut lines: BTreeMap<String, Vec<(i64, String, String)>> = BTreeMap::new();
    for w in &items {
        if matches!(state(w), "Pending" | "Evicted") {
            let prio = w["spec"]["priority"].as_i64().unwrap_or(0);
            lines.entry(cq(w)).or_default().push((-prio, s(&w["metadata"]["creationTimestamp"]), key(w)));
        }
    }
    let mut position: BTreeMap<String, usize> = BTreeMap::new();
    for (_, mut v) in lines {
        v.sort();
        for (i, (_, _, k)) in v.into_iter().enumerate() {
            position.insert(k, i + 1);
        }
    }
    let by_uid: BTreeMap<String, String> = items.iter().map(|w| (s(&w["metadata"]["uid"]), key(w))).collect();
    let mut out = BTreeMap::new();
    for w in &items {
        let k = key(w);
        let mut flavors: Vec<String> = w["status"]["admission"]["podSetAssignments"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|a| a["flavors"].as_object().into_iter().flatten().map(|(_, f)| s(f)))
            .collect();
        flavors.sort();
        flavors.dedup();
        // Kueue names the preemptor by uid in its Preempted condition's message.
        let preempted_by = cond(w, "Preempted")
            .filter(|c| c["status"] == "True" && state(w) == "Evicted")
            .and_then(|c| {
                s(&c["message"])
                    .split_once("(UID: ")
                    .map(|(_, r)| r.split([',', ')']).next().unwrap_or("").trim().to_string())
            })
            .and_then(|uid| by_uid.get(&uid).cloned());
        let owner = w["metadata"]["ownerReferences"]
            .as_array()
            .and_then(|o| o.first())
            .map(|o| format!("{}/{}", s(&o["kind"]), s(&o["name"])));
        // Every condition as Kueue wrote it: what the WHY column and the timeline read.
        let conditions: Vec<Value> = w["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let since = c["lastTransitionTime"]
                    .as_str()
                    .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
                    .map(|t| t.as_millisecond());
                json!({ "type": c["type"], "status": c["status"] == "True", "reason": c["reason"],
                        "message": c["message"], "since_ms": since })
            })
            .collect();
        out.insert(
            k.clone(),
            json!({
                "conditions": conditions,
                "workload": k,
                "uid": w["metadata"]["uid"],
                "queue": w["spec"]["queueName"],
                "cluster_queue": cq(w),
                "state": state(w),
                "active": w["spec"]["active"].as_bool().unwrap_or(true),
                "holds_quota": is(w, "QuotaReserved"),
                "position": position.get(&k),
                "priority": w["spec"]["priority"].as_i64().unwrap_or(0),
                "gpus": gpus(w),
                "pods": w["spec"]["podSets"].as_array().into_iter().flatten().map(|p| p["count"].as_i64().unwrap_or(1)).sum::<i64>(),
                "flavors": flavors,
                "owner": owner,
                "preempted_by": preempted_by,
            }),
        );
    }
    out
}

/// A tenant's `queued` as kubectl's Workloads say: per why (waiting for quota in its
/// ClusterQueue, deactivated and holding nothing), how many Workloads and their pods.
pub fn queued(truth: &BTreeMap<String, Value>, namespace: &str) -> Value {
    let mut by: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for r in truth.values().filter(|r| s(&r["workload"]).split('/').next() == Some(namespace)) {
        let why = match s(&r["state"]).as_str() {
            "Pending" | "Evicted" => format!("waiting for quota in {}", s(&r["cluster_queue"])),
            "QuotaReserved" => format!("waiting for admission checks in {}", s(&r["cluster_queue"])),
            "Inactive" if r["holds_quota"] == false => "deactivated".to_string(),
            _ => continue,
        };
        let e = by.entry(why).or_default();
        e.0 += 1;
        e.1 += r["pods"].as_i64().unwrap_or(0);
    }
    let mut v: Vec<(String, i64, i64)> = by.into_iter().map(|(k, (w, p))| (k, w, p)).collect();
    v.sort_by(|a, b| b.2.cmp(&a.2).then(b.1.cmp(&a.1)).then_with(|| a.0.cmp(&b.0)));
    json!(v.into_iter().map(|(why, w, p)| json!({ "why": why, "workloads": w, "pods": p })).collect::<Vec<_>>())
}

/// fabrik's row reduced to the keys [`truth`] computes.
pub fn fabrik_row(r: &Value) -> Value {
    let keys = [
        "workload",
        "uid",
        "queue",
        "cluster_queue",
        "state",
        "active",
        "holds_quota",
        "position",
        "priority",
        "gpus",
        "pods",
        "flavors",
        "owner",
        "preempted_by",
        "conditions",
    ];
    Value::Object(keys.iter().map(|k| (k.to_string(), r[*k].clone())).collect())
}
