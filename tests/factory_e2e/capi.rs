//! Cluster API above the Machines: the Cluster, KubeadmControlPlane, MachineDeployment,
//! MachineSet and MachineHealthCheck CRDs from Cluster API's module, one of each with the
//! status its controller would write (kubectl patch), and the Machines of the machines phase
//! labelled as the MachineSet's. `fabrik snapshot --view capi` equals, row by row, what the
//! test reads with kubectl — the tree's parents from the objects' labels and references,
//! every replica count, the health check's counts and targets, versions, phases, nodes —
//! and in tmux the view shows the tree and follows the health check into "remediation
//! blocked" live, with its alert, and out of it again.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::common::{Tmux, kubectl};
use super::{apply, condition, fabrik_view, settle};

const NS: &str = "capi-gpu";

fn crds_dir() -> String {
    let o = std::process::Command::new(super::common::repo().join("tests/capi/capi.sh"))
        .arg("crds")
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("tests/capi/capi.sh crds");
    assert!(o.status.success(), "tests/capi/capi.sh crds failed: it needs Go and the module proxy");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn status(kubeconfig: &Path, kind: &str, name: &str, body: &Value) {
    let b = json!({ "status": body }).to_string();
    kubectl(kubeconfig, &["-n", NS, "patch", kind, name, "--subresource=status", "--type=merge", "-p", &b]);
}

fn get(kubeconfig: &Path, what: &str) -> Vec<Value> {
    let v: Value =
        serde_json::from_str(&kubectl(kubeconfig, &["get", what, "-n", NS, "-o", "json"])).expect("kubectl's JSON");
    v["items"].as_array().cloned().unwrap_or_default()
}

fn infra(name: &str) -> Value {
    json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "Metal3MachineTemplate", "name": name})
}

fn template() -> Value {
    json!({"metadata": {"labels": {"pool": "gpu-workers"}}, "spec": {"clusterName": "gpu-prod", "version": "v1.34.1",
        "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": "gpu-workers"}},
        "infrastructureRef": infra("gpu-workers")}})
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
fn truth(kubeconfig: &Path) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let base = |o: &Value, kind: &str| {
        let m = &o["metadata"];
        json!({"kind": kind, "namespace": m["namespace"], "name": m["name"], "paused": o["spec"]["paused"].as_bool().unwrap_or(false),
            "deleting": m["deletionTimestamp"].is_string(), "node": null, "health": null, "replicas": null,
            "control_plane": null, "workers": null, "phase": text(&o["status"]["phase"])})
    };
    let cluster_parent = |c: &Value| if c.is_string() { json!({"kind": "Cluster", "name": c}) } else { Value::Null };
    for o in get(kubeconfig, "clusters.cluster.x-k8s.io") {
        let (st, mut r) = (&o["status"], base(&o, "Cluster"));
        let (cp, w) = (group(&st["controlPlane"]), group(&st["workers"]));
        let sum = |k: &str| u(&cp[k]) + u(&w[k]);
        r["cluster"] = o["metadata"]["name"].clone();
        r["parent"] = Value::Null;
        r["control_plane"] = cp.clone();
        r["workers"] = w.clone();
        r["ready"] = sum("ready").into();
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
        for o in get(kubeconfig, what) {
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
    for o in get(kubeconfig, "machinehealthchecks.cluster.x-k8s.io") {
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
    for o in get(kubeconfig, "machines.cluster.x-k8s.io") {
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
fn fabrik_rows(kubeconfig: &Path) -> (BTreeMap<String, Value>, BTreeMap<String, (Value, Value)>) {
    let mut rows = BTreeMap::new();
    let mut words = BTreeMap::new();
    for r in fabrik_view(kubeconfig, "capi")["rows"].as_array().into_iter().flatten() {
        if r["namespace"] != NS {
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

pub(super) fn capi_phase(kubeconfig: &Path, dir: &Path, t: &Tmux) {
    let crds = crds_dir();
    for f in ["clusters", "machinedeployments", "machinesets", "machinehealthchecks"] {
        kubectl(kubeconfig, &["apply", "--server-side", "-f", &format!("{crds}/cluster.x-k8s.io_{f}.yaml")]);
    }
    let kcp = Path::new(&crds)
        .join("../../../controlplane/kubeadm/config/crd/bases/controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml");
    kubectl(kubeconfig, &["apply", "--server-side", "-f", &kcp.to_string_lossy()]);
    for crd in [
        "clusters.cluster.x-k8s.io",
        "machinedeployments.cluster.x-k8s.io",
        "machinesets.cluster.x-k8s.io",
        "machinehealthchecks.cluster.x-k8s.io",
        "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
    ] {
        kubectl(kubeconfig, &["wait", "--for=condition=established", "--timeout=60s", &format!("crd/{crd}")]);
    }
    let v2 = "cluster.x-k8s.io/v1beta2";
    let meta = |name: &str, labels: Value| json!({"name": name, "namespace": NS, "labels": labels});
    apply(
        kubeconfig,
        dir,
        "capi-objects",
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": v2, "kind": "Cluster", "metadata": meta("gpu-prod", json!({})),
                "spec": {"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": "gpu-prod-cp"},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "Metal3Cluster", "name": "gpu-prod"}}},
            {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
                "metadata": meta("gpu-prod-cp", json!({"cluster.x-k8s.io/cluster-name": "gpu-prod"})),
                "spec": {"replicas": 3, "version": "v1.34.2", "machineTemplate": {"spec": {"infrastructureRef": infra("gpu-prod-cp")}}}},
            {"apiVersion": v2, "kind": "MachineDeployment", "metadata": meta("gpu-workers", json!({})),
                "spec": {"clusterName": "gpu-prod", "replicas": 3, "selector": {"matchLabels": {"pool": "gpu-workers"}}, "template": template()}},
            {"apiVersion": v2, "kind": "MachineSet", "metadata": meta("gpu-workers-7c5d9", json!({"cluster.x-k8s.io/deployment-name": "gpu-workers"})),
                "spec": {"clusterName": "gpu-prod", "replicas": 3, "selector": {"matchLabels": {"pool": "gpu-workers"}}, "template": template()}},
            {"apiVersion": v2, "kind": "MachineHealthCheck", "metadata": meta("gpu-workers-unhealthy", json!({})),
                "spec": {"clusterName": "gpu-prod", "selector": {"matchLabels": {"pool": "gpu-workers"}}}},
        ]}),
    );
    // The Machines of the machines phase become the set's (m-failed stays on its own).
    for m in ["m-ok", "m-sick"] {
        kubectl(
            kubeconfig,
            &[
                "-n",
                NS,
                "label",
                "machine",
                m,
                "cluster.x-k8s.io/deployment-name=gpu-workers",
                "cluster.x-k8s.io/set-name=gpu-workers-7c5d9",
                "pool=gpu-workers",
                "--overwrite",
            ],
        );
    }
    let workers =
        json!({"desiredReplicas": 3, "replicas": 3, "readyReplicas": 2, "availableReplicas": 2, "upToDateReplicas": 3});
    status(
        kubeconfig,
        "clusters.cluster.x-k8s.io",
        "gpu-prod",
        &json!({"phase": "Provisioned",
            "controlPlane": {"desiredReplicas": 3, "replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "upToDateReplicas": 2},
            "workers": workers,
            "conditions": [condition("Available", "False", "NotAvailable", "1 of 3 workers not available")]}),
    );
    status(
        kubeconfig,
        "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
        "gpu-prod-cp",
        &json!({"version": "v1.34.1", "replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "upToDateReplicas": 2,
            "conditions": [condition("Available", "True", "Available", ""), condition("RollingOut", "True", "RollingOut", "Rolling out 1 not up-to-date replica")]}),
    );
    let pool = json!({"replicas": 3, "readyReplicas": 2, "availableReplicas": 2, "upToDateReplicas": 3,
        "conditions": [condition("Available", "False", "NotAvailable", "1 of 3 machines not available"),
                       condition("Remediating", "True", "Remediating", "Machine m-sick is being remediated")]});
    let mut md = pool.clone();
    md["phase"] = "Running".into();
    status(kubeconfig, "machinedeployments.cluster.x-k8s.io", "gpu-workers", &md);
    status(kubeconfig, "machinesets.cluster.x-k8s.io", "gpu-workers-7c5d9", &pool);
    let mhc = |healthy: u32, allowed: u32, ok: bool| {
        let cond = if ok {
            condition("RemediationAllowed", "True", "RemediationAllowed", "")
        } else {
            condition(
                "RemediationAllowed",
                "False",
                "TooManyUnhealthy",
                "Remediation is not allowed, the number of not started or unhealthy machines exceeds maxUnhealthy (total: 3, unhealthy: 3, maxUnhealthy: 40%)",
            )
        };
        json!({"expectedMachines": 3, "currentHealthy": healthy, "remediationsAllowed": allowed,
            "targets": ["m-ok", "m-sick", "m-gone"], "conditions": [cond]})
    };
    status(kubeconfig, "machinehealthchecks.cluster.x-k8s.io", "gpu-workers-unhealthy", &mhc(2, 1, true));

    // Eight rows: the five objects and three Machines (seven once the set is deleted).
    let rows = |n: usize| {
        let want = truth(kubeconfig);
        let (have, words) = fabrik_rows(kubeconfig);
        if want.len() != n {
            return Err(format!("kubectl reads only {} rows: {want:#?}", want.len()));
        }
        if have == want { Ok(words) } else { Err(format!("fabrik {have:#?}\nkubectl {want:#?}")) }
    };
    let same = || rows(8);
    let words = settle("the capi view against kubectl", same);
    // The words, from what was written: the tree's depth and each row's state.
    let w = |k: &str| words.get(k).cloned().unwrap_or_else(|| panic!("no row {k}: {words:#?}"));
    assert_eq!(w("Cluster/gpu-prod"), (json!("Provisioned"), json!(0)));
    assert_eq!(w("KubeadmControlPlane/gpu-prod-cp"), (json!("RollingOut"), json!(1)));
    assert_eq!(w("MachineDeployment/gpu-workers"), (json!("Running, Remediating"), json!(1)));
    assert_eq!(w("MachineSet/gpu-workers-7c5d9"), (json!("Remediating"), json!(2)));
    assert_eq!(w("Machine/m-ok"), (json!("Running"), json!(3)));
    assert_eq!(w("Machine/m-failed").1, json!(1));
    assert_eq!(w("MachineHealthCheck/gpu-workers-unhealthy"), (json!("1 unhealthy"), json!(1)));

    // In the cockpit (started before these CRDs existed: it finds them within a minute).
    // Apart: Esc and M in one read are alt-M to the terminal.
    t.keys(&["Escape"]);
    std::thread::sleep(Duration::from_millis(700));
    t.keys(&["M"]);
    // Each kind is found on its own minute: wait for all eight rows.
    let s = t.wait_screen_for("the Cluster API tree", Duration::from_secs(100), |s| s.contains("Cluster API [8/8]"));
    let line = |s: &str, name: &str| {
        let cell = |l: &&str| l.split('│').nth(1).is_some_and(|c| c.trim_start().starts_with(&format!("{name} ")));
        s.lines().find(cell).unwrap_or_default().to_string()
    };
    assert!(line(&s, "gpu-prod").contains("Provisioned") && line(&s, "gpu-prod").contains("5/6"), "{s}");
    assert!(s.contains("│    gpu-workers-7c5d9 "), "the set under its deployment:\n{s}");
    assert!(s.contains("│      m-ok "), "the Machine under its set:\n{s}");
    assert!(line(&s, "gpu-workers-unhealthy").contains("2/3"), "{s}");
    // Too many unhealthy: the health check stops remediating, and says so.
    status(kubeconfig, "machinehealthchecks.cluster.x-k8s.io", "gpu-workers-unhealthy", &mhc(0, 0, false));
    let s = t.wait_screen("remediation blocked", |s| line(s, "gpu-workers-unhealthy").contains("remediation blocked"));
    assert!(line(&s, "gpu-workers-unhealthy").contains("TooManyUnhealthy"), "{s}");
    let words = settle("the blocked health check against kubectl", same);
    assert_eq!(words["MachineHealthCheck/gpu-workers-unhealthy"].0, json!("remediation blocked"));
    // ...and raises an alert, which goes once it may remediate again.
    t.keys(&["6"]);
    let alert = |s: &str| s.lines().any(|l| l.contains("gpu-workers-unhealthy") && l.contains("stopped remediating"));
    t.wait_screen("the remediation-blocked alert", alert);
    status(kubeconfig, "machinehealthchecks.cluster.x-k8s.io", "gpu-workers-unhealthy", &mhc(2, 1, true));
    t.wait_screen("the alert gone", |s| !alert(s));
    t.keys(&["M"]);
    t.wait_screen("the tree again", |s| line(s, "gpu-workers-unhealthy").contains("1 unhealthy"));
    settle("the health check remediating again", same);
    // A MachineSet deleted: its row goes, its Machines stay under its name.
    kubectl(kubeconfig, &["-n", NS, "delete", "machineset.cluster.x-k8s.io", "gpu-workers-7c5d9"]);
    let words = settle("the MachineSet gone", || {
        let w = rows(7)?;
        if w.contains_key("MachineSet/gpu-workers-7c5d9") { Err("the set is still a row".into()) } else { Ok(w) }
    });
    assert!(words.contains_key("Machine/m-ok"));
    t.wait_screen("the set gone from the tree", |s| !s.contains("gpu-workers-7c5d9 "));
    // The Cluster deleted too (the clusters phase lists the Clusters with a kubeconfig
    // Secret as workload clusters): its row goes, what was under it stays.
    kubectl(kubeconfig, &["-n", NS, "delete", "cluster.cluster.x-k8s.io", "gpu-prod"]);
    settle("the Cluster gone", || rows(6));
    t.keys(&["Escape"]);
}
