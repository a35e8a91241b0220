//! Cilium's own policies in the isolation audit: Cilium's CRDs from its Go module
//! (`tests/cilium/cilium.sh`), installed under the running cockpit, and one namespace-tenant
//! per way Cilium reads a policy (its documented default enforcement mode): an empty rule each
//! way is a default deny both ways; an ingress section alone isolates ingress only; the `all`
//! entity lets everyone in; `enableDefaultDeny: false` isolates nothing; a clusterwide policy
//! covers the namespace its selector names. The verdicts the test expects are written here
//! from Cilium's documentation, not from fabrik's code; `fabrik snapshot --view tenants`
//! must say them, and the tenants view in tmux shows them.

use std::path::Path;

use serde_json::{Value, json};

use super::common::{Tmux, kubectl};
use super::{apply, fabrik_view, settle};

fn cnp(ns: &str, spec: Value) -> Value {
    json!({"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "tenant-policy", "namespace": ns}, "spec": spec})
}

pub fn cilium_phase(kubeconfig: &Path, dir: &Path, t: &Tmux) {
    let o = std::process::Command::new(super::common::repo().join("tests/cilium/cilium.sh"))
        .arg("crds")
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("tests/cilium/cilium.sh crds");
    assert!(o.status.success(), "tests/cilium/cilium.sh crds failed: it needs Go and the module proxy");
    let crds = String::from_utf8_lossy(&o.stdout).trim().to_string();
    for plural in ["ciliumnetworkpolicies", "ciliumclusterwidenetworkpolicies"] {
        kubectl(kubeconfig, &["apply", "--server-side", "-f", &format!("{crds}/{plural}.yaml")]);
        // Right after the create the CRD may have no status yet: `kubectl wait` refuses it then.
        settle("the CRD established", || {
            let o = std::process::Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(kubeconfig)
                .args(["wait", "--for=condition=established", "--timeout=30s", &format!("crd/{plural}.cilium.io")])
                .output()
                .map_err(|e| e.to_string())?;
            if o.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&o.stderr).to_string()) }
        });
    }
    // (tenant, its policy, the verdict: netpol text and open namespaces)
    let all = json!({});
    let cases: Vec<(&str, Option<Value>, &str, Vec<&str>)> = vec![
        ("fac-cil-deny", Some(json!({"endpointSelector": all, "ingress": [{}], "egress": [{}]})), "deny", vec![]),
        ("fac-cil-in", Some(json!({"endpointSelector": all, "ingress": [{"fromEndpoints": [{}]}]})), "deny in", vec![]),
        (
            "fac-cil-open",
            Some(json!({"endpointSelector": all, "ingress": [{"fromEntities": ["all"]}]})),
            "open 1/1",
            vec!["fac-cil-open"],
        ),
        (
            "fac-cil-off",
            Some(json!({"endpointSelector": all, "enableDefaultDeny": {"ingress": false, "egress": false},
                "ingress": [{"fromEndpoints": [{}]}]})),
            "open 1/1",
            vec!["fac-cil-off"],
        ),
        ("fac-cil-wide", None, "deny in", vec![]),
    ];
    for (ns, policy, _, _) in &cases {
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"fabrik.io/tenant": ns}}});
        apply(kubeconfig, dir, ns, &namespace);
        // The tenants view lists tenants with GPU work or a GPU quota.
        let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota", "namespace": ns},
            "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}});
        apply(kubeconfig, dir, &format!("{ns}-quota"), &quota);
        if let Some(spec) = policy {
            apply(kubeconfig, dir, &format!("{ns}-cnp"), &cnp(ns, spec.clone()));
        }
    }
    let ccnp = json!({"apiVersion": "cilium.io/v2", "kind": "CiliumClusterwideNetworkPolicy",
        "metadata": {"name": "fac-cil-wide-deny"},
        "spec": {"endpointSelector": {"matchLabels": {"k8s:io.kubernetes.pod.namespace": "fac-cil-wide"}}, "ingress": [{}]}});
    apply(kubeconfig, dir, "ccnp", &ccnp);
    let want: serde_json::Map<String, Value> = cases
        .iter()
        .map(|(ns, _, text, open)| (ns.to_string(), json!({"netpol": text, "open_namespaces": open})))
        .collect();
    settle("Cilium verdicts", || {
        let have: serde_json::Map<String, Value> = fabrik_view(kubeconfig, "tenants")["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["tenant"].as_str().is_some_and(|t| t.starts_with("fac-cil-")))
            .map(|r| {
                let i = &r["isolation"];
                (
                    r["tenant"].as_str().unwrap_or_default().to_string(),
                    json!({"netpol": i["netpol"], "open_namespaces": i["open_namespaces"]}),
                )
            })
            .collect();
        if have == want { Ok(()) } else { Err(format!("fabrik {have:#?}\nCilium's semantics {want:#?}")) }
    });
    // The running cockpit watches Cilium's policies once it finds the CRDs (within a minute).
    t.keys(&["Escape"]);
    t.wait_screen("back on a view", |s| s.contains("[live]"));
    t.keys(&["3", "/"]);
    t.literal("fac-cil-");
    t.keys(&["Enter"]);
    let row = |s: &str, tn: &str| s.lines().find(|l| l.contains(&format!("{tn} "))).unwrap_or_default().to_string();
    t.wait_screen_for("the Cilium verdicts in the tenants view", std::time::Duration::from_secs(100), |s| {
        row(s, "fac-cil-deny").contains("deny")
            && !row(s, "fac-cil-deny").contains("deny in")
            && row(s, "fac-cil-wide").contains("deny in")
            && row(s, "fac-cil-off").contains("open 1/1")
    });
    // The clusterwide policy removed: its namespace is open again.
    kubectl(kubeconfig, &["delete", "ciliumclusterwidenetworkpolicy", "fac-cil-wide-deny"]);
    t.wait_screen("fac-cil-wide open", |s| row(s, "fac-cil-wide").contains("open 1/1"));
    t.keys(&["Escape"]);
}
