//! Cluster API above the Machines: the Cluster, KubeadmControlPlane, MachineDeployment,
//! MachineSet and MachineHealthCheck CRDs from Cluster API's module, one of each with the
//! status its controller would write (kubectl patch), and the Machines of the machines phase
//! labelled as the MachineSet's. `fabrik snapshot --view capi` equals, row by row, what the
//! test reads with kubectl — the tree's parents from the objects' labels and references,
//! every replica count, the health check's counts and targets, versions, phases, nodes —
//! and in tmux the view shows the tree and follows the health check into "remediation
//! blocked" live, with its alert, and out of it again.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::capi_truth::{fabrik_rows, truth};
use super::common::{Tmux, kubectl};
use super::{apply, condition, settle};

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

fn infra(name: &str) -> Value {
    json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "Metal3MachineTemplate", "name": name})
}

fn template() -> Value {
    json!({"metadata": {"labels": {"pool": "gpu-workers"}}, "spec": {"clusterName": "gpu-prod", "version": "v1.34.1",
        "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": "gpu-workers"}},
        "infrastructureRef": infra("gpu-workers")}})
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
            // A pool no controller has counted yet (no status): its READY is `?/2`, not 0/2.
            {"apiVersion": v2, "kind": "MachineDeployment", "metadata": meta("gpu-spare", json!({})),
                "spec": {"clusterName": "gpu-prod", "replicas": 2, "selector": {"matchLabels": {"pool": "gpu-spare"}}, "template": template()}},
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

    // Nine rows: the six objects and three Machines (eight once the set is deleted).
    let rows = |n: usize| {
        let want = truth(kubeconfig, NS);
        let (have, words) = fabrik_rows(kubeconfig, NS);
        if want.len() != n {
            return Err(format!("kubectl reads only {} rows: {want:#?}", want.len()));
        }
        if have == want { Ok(words) } else { Err(format!("fabrik {have:#?}\nkubectl {want:#?}")) }
    };
    let same = || rows(9);
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
    assert_eq!(w("MachineDeployment/gpu-spare").1, json!(1));

    // In the cockpit (started before these CRDs existed: it finds them within a minute).
    // Apart: Esc and M in one read are alt-M to the terminal.
    t.keys(&["Escape"]);
    std::thread::sleep(Duration::from_millis(700));
    t.keys(&["M"]);
    // Each kind is found on its own minute: wait for all nine rows.
    let s = t.wait_screen_for("the Cluster API tree", Duration::from_secs(100), |s| s.contains("Cluster API [9/9]"));
    let line = |s: &str, name: &str| {
        let cell = |l: &&str| l.split('│').nth(1).is_some_and(|c| c.trim_start().starts_with(&format!("{name} ")));
        s.lines().find(cell).unwrap_or_default().to_string()
    };
    assert!(line(&s, "gpu-prod").contains("Provisioned") && line(&s, "gpu-prod").contains("5/6"), "{s}");
    assert!(s.contains("│    gpu-workers-7c5d9 "), "the set under its deployment:\n{s}");
    assert!(s.contains("│      m-ok "), "the Machine under its set:\n{s}");
    assert!(line(&s, "gpu-workers-unhealthy").contains("2/3"), "{s}");
    assert!(line(&s, "gpu-spare").contains(" ?/2 "), "a pool no controller counted yet:\n{s}");
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
        let w = rows(8)?;
        if w.contains_key("MachineSet/gpu-workers-7c5d9") { Err("the set is still a row".into()) } else { Ok(w) }
    });
    assert!(words.contains_key("Machine/m-ok"));
    t.wait_screen("the set gone from the tree", |s| !s.contains("gpu-workers-7c5d9 "));
    // The Cluster deleted too (the clusters phase lists the Clusters with a kubeconfig
    // Secret as workload clusters): its row goes, what was under it stays.
    kubectl(kubeconfig, &["-n", NS, "delete", "cluster.cluster.x-k8s.io", "gpu-prod"]);
    settle("the Cluster gone", || rows(7));
    t.keys(&["Escape"]);
}
