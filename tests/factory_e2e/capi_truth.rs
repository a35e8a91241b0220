//! The Cluster API view's truth, as a second client reads it: every row of `fabrik snapshot
//! --view capi` in one namespace computed from `kubectl get -o json` alone (the tree's
//! parents from labels and references, replica counts, health counts, versions, why), and
//! fabrik's rows keyed alike. Shared by factory_e2e and sim_factory_e2e.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::common::{fabrik_view, kubectl};

fn get(kubeconfig: &Path, what: &str, ns: &str) -> Vec<Value> {
    let v: Value =
        serde_json::from_str(&kubectl(kubeconfig, &["get", what, "-n", ns, "-o", "json"])).expect("kubectl's JSON");
    v["items"].as_array().cloned().unwrap_or_default()
}

/// A status's replica count, as the API holds it (`null` when not set).
fn n(v: &Value) -> Value {
    if v.is_u64() { v.clone() } else { Value::Null }
}

fn replicas(spec: &Value, st: &Value) -> Value {
    json!({"desired": n(&spec["replicas"]), "current": n(&st["replicas"]), "ready": n(&st["readyReplicas"]),
        "available": n(&st["availableReplicas"]), "up_to_date": n(&st["upToDateReplicas"])})
}

fn group(g: &Value) -> Value {
    if !g.is_object() {
        return Value::Null;
    }
    json!({"desired": n(&g["desiredReplicas"]), "current": n(&g["replicas"]), "ready": n(&g["readyReplicas"]),
        "available": n(&g["availableReplicas"]), "up_to_date": n(&g["upToDateReplicas"])})
}

fn text(v: &Value) -> Value {
    match v.as_str() {
        Some(s) if !s.is_empty() => s.into(),
        _ => Value::Null,
    }
}

/// The condition `kind` that is False, as `reason: message`.
fn false_condition(st: &Value, kind: &str) -> Value {
    let c = st["conditions"].as_array().and_then(|cs| cs.iter().find(|c| c["type"] == kind && c["status"] == "False"));
    match c {
        None => Value::Null,
        Some(c) => match (c["reason"].as_str().unwrap_or(""), c["message"].as_str().unwrap_or("")) {
            ("", m) => m.into(),
            (r, "") => r.into(),
            (r, m) => format!("{r}: {m}").into(),
        },
    }
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// Every row of the capi view as the test reads it from kubectl: `kind/name` → the row
/// without its words (`state`, `depth`, ages), which are checked on their own.
pub(crate) fn truth(kubeconfig: &Path, ns: &str) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let base = |o: &Value, kind: &str| {
        let m = &o["metadata"];
        json!({"kind": kind, "namespace": m["namespace"], "name": m["name"], "paused": o["spec"]["paused"].as_bool().unwrap_or(false),
            "deleting": m["deletionTimestamp"].is_string(), "node": null, "health": null, "replicas": null,
            "control_plane": null, "workers": null, "phase": text(&o["status"]["phase"])})
    };
    let cluster_parent = |c: &Value| if c.is_string() { json!({"kind": "Cluster", "name": c}) } else { Value::Null };
    for o in get(kubeconfig, "clusters.cluster.x-k8s.io", ns) {
        let (st, mut r) = (&o["status"], base(&o, "Cluster"));
        let (cp, w) = (group(&st["controlPlane"]), group(&st["workers"]));
        let sum = |k: &str| u(&cp[k]) + u(&w[k]);
        r["cluster"] = o["metadata"]["name"].clone();
        r["parent"] = Value::Null;
        r["control_plane"] = cp.clone();
        r["workers"] = w.clone();
        // Unknown while a group the Cluster reports does not count its ready replicas.
        let counted = |g: &Value| g.is_null() || g["ready"].is_u64();
        r["ready"] = if counted(&cp) && counted(&w) { sum("ready").into() } else { Value::Null };
        r["desired"] = sum("desired").into();
        r["version"] = text(&o["spec"]["topology"]["version"]);
        r["why"] = false_condition(st, "Available");
        out.insert(format!("Cluster/{}", o["metadata"]["name"].as_str().unwrap_or_default()), r);
    }
    for (what, kind) in [
        ("kubeadmcontrolplanes.controlplane.cluster.x-k8s.io", "KubeadmControlPlane"),
        ("machinedeployments.cluster.x-k8s.io", "MachineDeployment"),
        ("machinesets.cluster.x-k8s.io", "MachineSet"),
    ] {
        for o in get(kubeconfig, what, ns) {
            let (st, mut r) = (&o["status"], base(&o, kind));
            let labels = &o["metadata"]["labels"];
            let cluster = if kind == "KubeadmControlPlane" {
                labels["cluster.x-k8s.io/cluster-name"].clone()
            } else {
                o["spec"]["clusterName"].clone()
            };
            r["parent"] = match labels["cluster.x-k8s.io/deployment-name"].as_str() {
                Some(md) if kind == "MachineSet" => json!({"kind": "MachineDeployment", "name": md}),
                _ => cluster_parent(&cluster),
            };
            r["cluster"] = cluster;
            r["replicas"] = replicas(&o["spec"], st);
            r["ready"] = n(&st["readyReplicas"]);
            r["desired"] = n(&o["spec"]["replicas"]);
            r["version"] = if kind == "KubeadmControlPlane" {
                text(&st["version"])
            } else {
                text(&o["spec"]["template"]["spec"]["version"])
            };
            r["why"] = false_condition(st, "Available");
            out.insert(format!("{kind}/{}", o["metadata"]["name"].as_str().unwrap_or_default()), r);
        }
    }
    for o in get(kubeconfig, "machinehealthchecks.cluster.x-k8s.io", ns) {
        let (st, mut r) = (&o["status"], base(&o, "MachineHealthCheck"));
        r["cluster"] = o["spec"]["clusterName"].clone();
        r["parent"] = cluster_parent(&o["spec"]["clusterName"]);
        let blocked = !false_condition(st, "RemediationAllowed").is_null();
        r["health"] = json!({"expected": n(&st["expectedMachines"]), "healthy": n(&st["currentHealthy"]),
            "remediations_allowed": n(&st["remediationsAllowed"]), "targets": st["targets"].as_array().cloned().unwrap_or_default(),
            "blocked": blocked});
        r["ready"] = n(&st["currentHealthy"]);
        r["desired"] = n(&st["expectedMachines"]);
        r["version"] = Value::Null;
        r["why"] = false_condition(st, "RemediationAllowed");
        out.insert(format!("MachineHealthCheck/{}", o["metadata"]["name"].as_str().unwrap_or_default()), r);
    }
    for o in get(kubeconfig, "machines.cluster.x-k8s.io", ns) {
        let (st, mut r) = (&o["status"], base(&o, "Machine"));
        let labels = &o["metadata"]["labels"];
        r["cluster"] = o["spec"]["clusterName"].clone();
        r["parent"] = match (
            labels["cluster.x-k8s.io/set-name"].as_str(),
            labels["cluster.x-k8s.io/deployment-name"].as_str(),
            labels["cluster.x-k8s.io/control-plane-name"].as_str(),
        ) {
            (Some(ms), _, _) => json!({"kind": "MachineSet", "name": ms}),
            (None, Some(md), _) => json!({"kind": "MachineDeployment", "name": md}),
            (None, None, Some(cp)) => json!({"kind": "KubeadmControlPlane", "name": cp}),
            _ => cluster_parent(&o["spec"]["clusterName"]),
        };
        r["node"] = text(&st["nodeRef"]["name"]);
        r["ready"] = Value::Null;
        r["desired"] = Value::Null;
        r["version"] = text(&o["spec"]["version"]);
        let old = &st["deprecated"]["v1beta1"];
        let failure = match (text(&old["failureReason"]), text(&old["failureMessage"])) {
            (Value::String(a), Value::String(b)) => Value::String(format!("{a}: {b}")),
            (a, b) => {
                if a.is_null() {
                    b
                } else {
                    a
                }
            }
        };
        let cond = |k| false_condition(st, k);
        r["why"] = [failure, cond("OwnerRemediated"), cond("HealthCheckSucceeded")]
            .into_iter()
            .find(|v| !v.is_null())
            .unwrap_or(Value::Null);
        out.insert(format!("Machine/{}", o["metadata"]["name"].as_str().unwrap_or_default()), r);
    }
    out
}

/// fabrik's rows keyed as [`truth`]'s, with the words left out (and returned apart).
pub(crate) fn fabrik_rows(kubeconfig: &Path, ns: &str) -> (BTreeMap<String, Value>, BTreeMap<String, (Value, Value)>) {
    let mut rows = BTreeMap::new();
    let mut words = BTreeMap::new();
    for r in fabrik_view(kubeconfig, "capi")["rows"].as_array().into_iter().flatten() {
        if r["namespace"] != ns {
            continue;
        }
        let key = format!("{}/{}", r["kind"].as_str().unwrap_or_default(), r["name"].as_str().unwrap_or_default());
        let mut r = r.clone();
        let obj = r.as_object_mut().expect("a row is an object");
        let state = obj.remove("state").unwrap_or_default();
        let depth = obj.remove("depth").unwrap_or_default();
        assert!(
            obj.remove("age_s").is_some_and(|a| a.is_u64()) && obj.remove("created_ms").is_some_and(|c| c.is_u64())
        );
        words.insert(key.clone(), (state, depth));
        rows.insert(key, r);
    }
    (rows, words)
}
