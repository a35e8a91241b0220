//! The factory around the GPUs (issue 17) on the test control plane, with `fabrik sim` as
//! the GPU nodes, checked against what kubectl reads, in phases:
//!
//! - **GitOps ownership.** ResourceQuotas and a node carry the markers Argo CD and Flux put on
//!   what they apply (Argo CD's tracking annotation, Flux's Kustomization and HelmRelease
//!   labels, `reconcile: disabled`, the bare instance label). `managed_by` in `fabrik snapshot`
//!   equals what the test reads from the objects' metadata; every preview of a change to one
//!   of them warns (who owns it, that the next sync puts it back, or that Flux leaves it
//!   alone), the others do not; in a real terminal the quotas view shows the owner, the
//!   edit's preview warns, the confirmed change lands (kubectl) and the audit log keeps the
//!   warning with the plan; once the marker is removed (kubectl) the view and the previews
//!   stop warning.
//! - **Cluster API above the Machines** (`factory_e2e/capi.rs`): Cluster, control plane,
//!   MachineDeployment, MachineSet, MachineHealthCheck; the capi view against kubectl.
//! - **Many clusters** (`factory_e2e/clusters.rs`): a second control plane plays a workload
//!   cluster; `--context a --context b` and the clusters view against kubectl on each.
//!
//! There is no skip: without Go or the control plane this test fails and says why.

use std::path::Path;
use std::time::Duration;

use fabrik::model::{QuotaSourceSpec, Thresholds};
use fabrik::ops::{OpRequest, QuotaField, QuotaKey};
use serde_json::{Value, json};

#[path = "factory_e2e/capi.rs"]
mod capi;
#[path = "factory_e2e/capi_truth.rs"]
mod capi_truth;
#[path = "factory_e2e/cilium.rs"]
mod cilium;
#[path = "factory_e2e/clusters.rs"]
mod clusters;
mod common;
#[path = "factory_e2e/hosts.rs"]
mod hosts;
#[path = "crosscheck_e2e/isolation.rs"]
mod isolation;
use common::{BIN, Tmux, control_plane, eventually, gitops_owner, kubectl, session};
pub(crate) use common::{fabrik_view, settle};

const WAIT: Duration = Duration::from_secs(90);

/// The four tenants' namespaces and the markers on their quota: Argo CD (an Application in
/// another namespace), a Flux Kustomization, a Flux HelmRelease Flux leaves alone, nobody.
fn quotas() -> Value {
    let rq = |ns: &str, labels: Value, annotations: Value| {
        json!({"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "gpu-quota", "namespace": ns, "labels": labels, "annotations": annotations},
            "spec": {"hard": {"requests.nvidia.com/gpu": "8"}}})
    };
    let ns = |name: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"fabrik.io/tenant": name}}});
    json!({"apiVersion": "v1", "kind": "List", "items": [
        ns("fac-argo"), ns("fac-flux"), ns("fac-off"), ns("fac-none"),
        rq("fac-argo", json!({}), json!({"argocd.argoproj.io/tracking-id": "team-a_quotas:/ResourceQuota:fac-argo/gpu-quota"})),
        rq("fac-flux", json!({"kustomize.toolkit.fluxcd.io/name": "tenant-quotas", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}), json!({})),
        rq("fac-off", json!({"helm.toolkit.fluxcd.io/name": "quotas", "helm.toolkit.fluxcd.io/namespace": "fac-off"}),
            json!({"kustomize.toolkit.fluxcd.io/reconcile": "disabled"})),
        rq("fac-none", json!({"app": "quota"}), json!({})),
    ]})
}

pub(crate) fn apply(kubeconfig: &Path, dir: &Path, name: &str, body: &Value) {
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, body.to_string()).expect("write the manifest");
    kubectl(kubeconfig, &["apply", "-f", &file.to_string_lossy()]);
}

/// Who owns each quota (`namespace`) and node (`node/<name>`), from `kubectl get -o json`.
fn owners_truth(kubeconfig: &Path, nodes: &[String]) -> std::collections::BTreeMap<String, Value> {
    let mut out = std::collections::BTreeMap::new();
    let rqs: Value = serde_json::from_str(&kubectl(kubeconfig, &["get", "resourcequotas", "-A", "-o", "json"]))
        .expect("kubectl's JSON");
    for q in rqs["items"].as_array().into_iter().flatten() {
        let ns = q["metadata"]["namespace"].as_str().unwrap_or_default();
        if ns.starts_with("fac-") {
            out.insert(ns.to_string(), gitops_owner(&q["metadata"]));
        }
    }
    let ns: Value =
        serde_json::from_str(&kubectl(kubeconfig, &["get", "nodes", "-o", "json"])).expect("kubectl's JSON");
    for n in ns["items"].as_array().into_iter().flatten() {
        let name = n["metadata"]["name"].as_str().unwrap_or_default();
        if nodes.iter().any(|x| x == name) {
            out.insert(format!("node/{name}"), gitops_owner(&n["metadata"]));
        }
    }
    out
}

/// What fabrik's snapshot says of the same objects.
fn owners_fabrik(kubeconfig: &Path, nodes: &[String]) -> std::collections::BTreeMap<String, Value> {
    let mut out = std::collections::BTreeMap::new();
    for r in fabrik_view(kubeconfig, "quotas")["rows"].as_array().into_iter().flatten() {
        let ns = r["source"]["namespace"].as_str().unwrap_or_default();
        if ns.starts_with("fac-") {
            out.insert(ns.to_string(), r["managed_by"].clone());
        }
    }
    for r in fabrik_view(kubeconfig, "fleet")["rows"].as_array().into_iter().flatten() {
        let name = r["name"].as_str().unwrap_or_default();
        if nodes.iter().any(|x| x == name) {
            out.insert(format!("node/{name}"), r["managed_by"].clone());
        }
    }
    out
}

/// The words a preview uses for an owner read by the test: "Argo CD application `x`".
fn owner_words(m: &Value) -> String {
    let what = match m["tool"].as_str().unwrap_or_default() {
        "argocd" => "Argo CD application",
        "argocd-or-helm" => "Argo CD application or Helm release",
        "flux-kustomization" => "Flux Kustomization",
        _ => "Flux HelmRelease",
    };
    format!("{what} `{}`", m["app"].as_str().unwrap_or_default())
}

fn set_quota(ns: &str, value: &str) -> OpRequest {
    OpRequest::SetQuota {
        tenant: ns.to_string(),
        quota: QuotaKey {
            source: QuotaSourceSpec::ResourceQuota { namespace: ns.into(), name: "gpu-quota".into() },
            resource: "requests.nvidia.com/gpu".into(),
            field: QuotaField::Hard,
        },
        value: value.into(),
    }
}

async fn fleet(client: &kube::Client) -> fabrik::model::Fleet {
    fabrik::live::load_fleet(client.clone(), Default::default(), Thresholds::default(), WAIT)
        .await
        .unwrap_or_else(|e| panic!("the cockpit's model: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_factory_around_the_gpus_on_the_real_control_plane() {
    let dir = std::env::temp_dir().join(format!("fabrik-factory-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (_cp, kubeconfig) = control_plane(&dir);
    let _sim = common::sim(&kubeconfig, &dir, &["--nodes", "2", "--seed", "17", "--dra-every", "0"]);
    let conn = fabrik::cluster::connect(Some(&kubeconfig), None).await.unwrap_or_else(|e| panic!("{e}"));
    let nodes = common::sim_nodes(&conn.client).await;
    assert_eq!(nodes.len(), 2, "{nodes:?}");

    gitops(&kubeconfig, &conn.client, &dir, &nodes).await;
    clusters::clusters_phase(&kubeconfig, &dir);
}

async fn gitops(kubeconfig: &Path, client: &kube::Client, dir: &Path, nodes: &[String]) {
    apply(kubeconfig, dir, "quotas", &quotas());
    kubectl(kubeconfig, &["label", "node", &nodes[0], "app.kubernetes.io/instance=gpu-nodes", "--overwrite"]);

    // The snapshot's owners equal what the objects' metadata says.
    let truth = eventually("fabrik's managed_by equals the objects' markers", WAIT, || {
        let (kc, nodes) = (kubeconfig.to_path_buf(), nodes.to_vec());
        async move {
            let truth = owners_truth(&kc, &nodes);
            let have = owners_fabrik(&kc, &nodes);
            if truth.len() != 6 {
                return Err(format!("kubectl: {truth:#?}"));
            }
            if have != truth {
                return Err(format!("fabrik {have:#?}\nkubectl {truth:#?}"));
            }
            Ok(truth)
        }
    })
    .await;
    assert_eq!(truth["fac-argo"]["app"], "team-a/quotas", "{truth:#?}");
    assert_eq!(truth["fac-off"]["reverts"], false, "{truth:#?}");
    assert!(truth["fac-none"].is_null() && truth[&format!("node/{}", nodes[1])].is_null(), "{truth:#?}");

    // Every preview of a change to an owned object warns, with the owner kubectl shows.
    let f = fleet(client).await;
    for ns in ["fac-argo", "fac-flux", "fac-off", "fac-none"] {
        let p = fabrik::ops::plan(&f, &set_quota(ns, "12")).unwrap_or_else(|e| panic!("plan {ns}: {e}"));
        let owned: Vec<&String> = p.warnings.iter().filter(|w| w.contains("is managed by")).collect();
        let m = &truth[ns];
        if m.is_null() {
            assert!(owned.is_empty(), "{ns}: {:?}", p.warnings);
            continue;
        }
        let want = format!("ResourceQuota {ns}/gpu-quota is managed by {}", owner_words(m));
        assert!(owned.len() == 1 && owned[0].starts_with(&want), "{ns}: want {want:?} in {:?}", p.warnings);
        let tail = if m["reverts"] == false { "this change stays" } else { "next sync puts it back" };
        assert!(owned[0].contains(tail), "{ns}: {}", owned[0]);
        assert!(p.can_execute(), "{ns}: a warning, not a blocker");
    }
    for (i, node) in nodes.iter().enumerate() {
        let p = fabrik::ops::plan(&f, &OpRequest::Cordon { node: node.clone() }).expect("plan a cordon");
        let m = &truth[&format!("node/{node}")];
        let warned = p.warnings.iter().any(|w| w.contains(&format!("Node {node} is managed by {}", owner_words(m))));
        assert_eq!(warned, i == 0, "{node}: {:?}", p.warnings);
    }

    // In a real terminal: the owner in the quotas view, the warning in the edit's preview, the
    // change confirmed lands, and the audit log keeps the warning with the plan.
    let data = dir.join("data");
    let t = Tmux::start();
    let env = format!("HOME={}", t.home.display());
    let data_env = format!("FABRIK_DATA_DIR={}", data.display());
    let cmd = format!("{BIN} --kubeconfig {}", kubeconfig.display());
    t.ok(&session(&[&env, &data_env], &[&cmd]));
    t.wait_screen_for("the cockpit, live", WAIT, |s| s.contains("[live]"));
    t.keys(&["4", "/"]);
    t.literal("fac-");
    t.keys(&["Enter"]);
    let s = t.wait_screen("the quotas view with the owners", |s| s.contains("GITOPS") && s.contains("fac-none"));
    // SOURCE may be cut short at 140 columns: the row is the tenant's (named as its namespace).
    let row = |s: &str, ns: &str| {
        s.lines()
            .find(|l| l.contains(&format!("{ns}/gpu")) && l.contains("ResourceQuota"))
            .unwrap_or_default()
            .to_string()
    };
    assert!(row(&s, "fac-argo").contains("argo quotas"), "{s}");
    assert!(row(&s, "fac-flux").contains("flux tenant-quotas"), "{s}");
    assert!(row(&s, "fac-off").contains("flux quotas off"), "{s}");
    t.keys(&["Escape"]);
    t.wait_screen("the filter cleared", |s| !s.contains("/fac-"));
    t.keys(&["/"]);
    t.literal("fac-argo");
    t.keys(&["Enter"]);
    t.wait_screen("fac-argo alone", |s| s.contains("fac-argo/gpu") && !s.contains("fac-none"));
    t.keys(&["e", "BSpace", "BSpace", "BSpace"]);
    t.literal("12");
    t.keys(&["Enter"]);
    let s = t.wait_screen("the preview warns", |s| s.contains("Preview:") && s.contains("Argo CD application"));
    assert!(s.contains("team-a/quotas"), "the preview names the application:\n{s}");
    t.keys(&["y"]);
    eventually("kubectl reads the new quota", WAIT, || {
        let kc = kubeconfig.to_path_buf();
        async move {
            let hard = kubectl(
                &kc,
                &[
                    "get",
                    "resourcequota",
                    "gpu-quota",
                    "-n",
                    "fac-argo",
                    "-o",
                    "jsonpath={.spec.hard.requests\\.nvidia\\.com/gpu}",
                ],
            );
            if hard.trim() == "12" { Ok(()) } else { Err(format!("spec.hard is {hard:?}")) }
        }
    })
    .await;
    let recs = eventually("the audit log has the set-quota", WAIT, || {
        let data = data.clone();
        async move {
            let recs =
                fabrik::ops::audit::read(&data.join(fabrik::ops::audit::FILE_NAME)).map_err(|e| e.to_string())?.0;
            if recs.iter().any(|r| r.kind == "set-quota") { Ok(recs) } else { Err(format!("{recs:#?}")) }
        }
    })
    .await;
    assert!(
        recs.iter()
            .any(|r| r.kind == "set-quota"
                && r.warnings.iter().any(|w| w.contains("Argo CD application `team-a/quotas`"))),
        "the audit keeps the GitOps warning with the plan: {recs:#?}"
    );

    // The marker removed: the view and the previews stop warning.
    kubectl(
        kubeconfig,
        &["annotate", "resourcequota", "gpu-quota", "-n", "fac-argo", "argocd.argoproj.io/tracking-id-"],
    );
    t.wait_screen("the owner gone from the view", |s| {
        let r = s.lines().find(|l| l.contains("fac-argo/gpu") && l.contains("ResourceQuota")).unwrap_or_default();
        !r.is_empty() && !r.contains("argo quotas")
    });
    let f = fleet(client).await;
    let p = fabrik::ops::plan(&f, &set_quota("fac-argo", "10")).expect("plan");
    assert!(!p.warnings.iter().any(|w| w.contains("is managed by")), "{:?}", p.warnings);
    assert!(owners_fabrik(kubeconfig, nodes)["fac-argo"].is_null());
    isolation_phase(kubeconfig, dir, &t);
    machines_phase(kubeconfig, dir, &t, nodes);
    hosts::hosts_phase(kubeconfig, dir, &t, nodes);
    capi::capi_phase(kubeconfig, dir, &t);
    cilium::cilium_phase(kubeconfig, dir, &t);
    t.keys(&["q"]);
}

/// `kubectl patch --subresource=status` of Machine `name` (what its controller would write).
fn patch_status(kubeconfig: &Path, name: &str, patch: &str) {
    kubectl(
        kubeconfig,
        &["-n", "capi-gpu", "patch", "machine", name, "--subresource=status", "--type=merge", "-p", patch],
    );
}

/// A condition as metav1.Condition wants it (every field required by the CRD's schema).
pub(crate) fn condition(kind: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": "2026-12-06T09:00:00Z"})
}

/// The `machine` of each node as the test reads it from `kubectl get machines -o json`.
fn machines_truth(kubeconfig: &Path, nodes: &[String]) -> std::collections::BTreeMap<String, Value> {
    let list: Value =
        serde_json::from_str(&kubectl(kubeconfig, &["get", "machines.cluster.x-k8s.io", "-A", "-o", "json"]))
            .expect("kubectl's JSON");
    let mut out: std::collections::BTreeMap<String, Value> = nodes.iter().map(|n| (n.clone(), Value::Null)).collect();
    for m in list["items"].as_array().into_iter().flatten() {
        let Some(node) = m["status"]["nodeRef"]["name"].as_str() else { continue };
        let st = &m["status"];
        let cond = |k: &str| {
            st["conditions"].as_array()?.iter().find(|c| c["type"] == k && c["status"] == "False").map(|c| {
                let (r, msg) = (c["reason"].as_str().unwrap_or_default(), c["message"].as_str().unwrap_or_default());
                if msg.is_empty() { r.to_string() } else { format!("{r}: {msg}") }
            })
        };
        let old = &st["deprecated"]["v1beta1"];
        let failure = match (old["failureReason"].as_str(), old["failureMessage"].as_str()) {
            (Some(r), Some(m)) => Some(format!("{r}: {m}")),
            (r, m) => r.or(m).map(str::to_string),
        };
        let phase = st["phase"].as_str().unwrap_or_default();
        let (unhealthy, remediating) = (cond("HealthCheckSucceeded"), cond("OwnerRemediated"));
        let mut state = if phase.is_empty() { "Pending".to_string() } else { phase.to_string() };
        if remediating.is_some() {
            state.push_str(", remediating");
        } else if unhealthy.is_some() {
            state.push_str(", unhealthy");
        }
        if let Some(f) = &failure {
            state.push_str(&format!(": {f}"));
        }
        out.insert(
            node.to_string(),
            json!({"namespace": m["metadata"]["namespace"], "name": m["metadata"]["name"], "cluster": m["spec"]["clusterName"],
                "phase": phase, "failure": failure, "unhealthy": unhealthy, "remediating": remediating,
                "deleting": m["metadata"]["deletionTimestamp"].is_string(), "state": state}),
        );
    }
    out
}

/// Cluster API, from the management cluster: the Machine CRD from Cluster API's module,
/// a Machine per node (one that a MachineHealthCheck found unhealthy and its owner is
/// remediating) and one that failed before it had a node. The fleet's `machine` equals what
/// kubectl reads; in tmux the node says `remediating` and its screen names the Machine; the
/// remediation over (kubectl), the alert goes.
fn machines_phase(kubeconfig: &Path, dir: &Path, t: &Tmux, nodes: &[String]) {
    let o = std::process::Command::new(common::repo().join("tests/capi/capi.sh"))
        .arg("crds")
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("tests/capi/capi.sh crds");
    assert!(
        o.status.success(),
        "tests/capi/capi.sh crds failed: it needs Go and the module proxy (.ci/run installs Go)"
    );
    let crds = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let crd = format!("{crds}/cluster.x-k8s.io_machines.yaml");
    kubectl(kubeconfig, &["apply", "--server-side", "-f", &crd]);
    kubectl(kubeconfig, &["wait", "--for=condition=established", "--timeout=60s", "crd/machines.cluster.x-k8s.io"]);
    let machine = |name: &str| {
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": name, "namespace": "capi-gpu"},
            "spec": {"clusterName": "gpu-prod", "bootstrap": {"dataSecretName": format!("{name}-bootstrap")},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "Metal3Machine", "name": name}}})
    };
    apply(
        kubeconfig,
        dir,
        "capi-ns",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "capi-gpu"}}),
    );
    for (name, node) in [("m-ok", &nodes[0]), ("m-sick", &nodes[1])] {
        apply(kubeconfig, dir, name, &machine(name));
        let mut status = json!({"phase": "Running", "nodeRef": {"name": node}});
        if name == "m-sick" {
            status["conditions"] = json!([
                condition(
                    "HealthCheckSucceeded",
                    "False",
                    "UnhealthyNode",
                    "Condition Ready on node is reporting status False for more than 5m0s"
                ),
                condition("OwnerRemediated", "False", "WaitingForRemediation", "")
            ]);
        }
        let patch = json!({"status": status}).to_string();
        patch_status(kubeconfig, name, &patch);
    }
    apply(kubeconfig, dir, "m-failed", &machine("m-failed"));
    let failed = json!({"status": {"phase": "Failed", "deprecated": {"v1beta1": {"failureReason": "CreateError", "failureMessage": "no host matched"}}}});
    patch_status(kubeconfig, "m-failed", &failed.to_string());

    let same = || {
        let truth = machines_truth(kubeconfig, nodes);
        let have: std::collections::BTreeMap<String, Value> = fabrik_view(kubeconfig, "fleet")["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| Some((r["name"].as_str()?.to_string(), r["machine"].clone())))
            .filter(|(n, _)| nodes.contains(n))
            .collect();
        if have == truth { Ok(truth) } else { Err(format!("fabrik {have:#?}\nkubectl {truth:#?}")) }
    };
    let truth = settle("machines", same);
    assert_eq!(truth[&nodes[1]]["state"], "Running, remediating", "{truth:#?}");
    assert_eq!(truth[&nodes[0]]["state"], "Running", "{truth:#?}");

    // In the cockpit that was started before the CRD existed: it looks for a kind it was
    // not served again each minute, and watches Machines from then on.
    t.keys(&["Escape"]);
    t.wait_screen("the filter cleared", |s| !s.contains("/fac-"));
    t.keys(&["1", "/"]);
    t.literal(&nodes[1]);
    t.keys(&["Enter"]);
    t.wait_screen_for("the node remediating", Duration::from_secs(100), |s| {
        s.lines().any(|l| l.contains(&nodes[1]) && l.contains("remediati"))
    });
    t.keys(&["Enter"]);
    t.wait_screen("the node's Machine", |s| {
        s.contains("machine capi-gpu/m-sick · cluster gpu-prod") && s.contains("Running, remediating")
    });
    // The owner remediated it: the alert goes.
    let healed = json!({"status": {"conditions": [
        condition("HealthCheckSucceeded", "True", "HealthCheckSucceeded", ""),
        condition("OwnerRemediated", "True", "Remediated", "")]}});
    patch_status(kubeconfig, "m-sick", &healed.to_string());
    t.wait_screen("the Machine healthy", |s| s.contains("machine capi-gpu/m-sick") && !s.contains("remediating"));
    t.keys(&["Escape"]);
    t.wait_screen("no alert on the node", |s| s.lines().any(|l| l.contains(&nodes[1]) && !l.contains("remediati")));
}

/// `isolation` of the fac-* tenants as fabrik's snapshot has it, and as the test computes
/// it from `kubectl get networkpolicies` and the namespaces (no pods here: nobody shares a
/// node).
fn isolation_rows(kubeconfig: &Path) -> (Value, Value) {
    let nps: Value = serde_json::from_str(&kubectl(kubeconfig, &["get", "networkpolicies", "-A", "-o", "json"]))
        .expect("kubectl's JSON");
    let nss: Value =
        serde_json::from_str(&kubectl(kubeconfig, &["get", "namespaces", "-o", "json"])).expect("kubectl's JSON");
    let truth = isolation::Isolation::new(
        nss["items"].as_array().map_or(&[][..], Vec::as_slice),
        nps["items"].as_array().map_or(&[][..], Vec::as_slice),
        Vec::new(),
        &Default::default(),
    );
    let mut want = serde_json::Map::new();
    let mut have = serde_json::Map::new();
    for r in fabrik_view(kubeconfig, "tenants")["rows"].as_array().into_iter().flatten() {
        let tn = r["tenant"].as_str().unwrap_or_default();
        if tn.starts_with("fac-") {
            want.insert(tn.into(), truth.tenant(tn, &[tn.to_string()]));
            have.insert(tn.into(), r["isolation"].clone());
        }
    }
    (Value::Object(have), Value::Object(want))
}

/// The isolation audit, live: fac-none has no default-deny, so the cockpit says `open 1/1`
/// and raises its alert; a default deny applied with kubectl turns it to `deny` and clears
/// the alert; the snapshot's `isolation` equals what the policies say, before and after.
fn isolation_phase(kubeconfig: &Path, dir: &Path, t: &Tmux) {
    let deny_in = |ns: &str, egress: bool| {
        let types = if egress { json!(["Ingress", "Egress"]) } else { json!(["Ingress"]) };
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "default-deny", "namespace": ns}, "spec": {"podSelector": {}, "policyTypes": types}})
    };
    // fac-argo denies in and out, fac-flux only in (and lets its own namespace in), fac-off
    // opens its door to every namespace: still open.
    apply(kubeconfig, dir, "np-argo", &deny_in("fac-argo", true));
    apply(kubeconfig, dir, "np-flux", &deny_in("fac-flux", false));
    apply(
        kubeconfig,
        dir,
        "np-off",
        &json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "allow-all-namespaces", "namespace": "fac-off"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": [{"namespaceSelector": {}}]}]}}),
    );
    let check = || {
        let (have, want) = isolation_rows(kubeconfig);
        if have == want { Ok(want) } else { Err(format!("fabrik {have:#}\nkubectl {want:#}")) }
    };
    let want = settle("isolation", check);
    assert_eq!(want["fac-argo"]["netpol"], "deny", "{want:#}");
    assert_eq!(want["fac-flux"]["netpol"], "deny in", "{want:#}");
    assert_eq!(want["fac-off"]["netpol"], "open 1/1", "{want:#}");
    assert_eq!(want["fac-none"]["netpol"], "open 1/1", "{want:#}");

    // In the cockpit: the tenants' NETPOL column and the alert, then the fix, live.
    t.keys(&["Escape"]);
    t.wait_screen("the filter cleared", |s| !s.contains("/fac-argo"));
    t.keys(&["3"]);
    t.wait_screen("the tenants view", |s| s.contains("NETPOL"));
    t.keys(&["/"]);
    t.literal("fac-");
    t.keys(&["Enter"]);
    let line = |s: &str, tn: &str| s.lines().find(|l| l.contains(&format!("│{tn} "))).unwrap_or_default().to_string();
    let s = t.wait_screen("the tenants' NETPOL", |s| s.contains("NETPOL") && line(s, "fac-none").contains("open 1/1"));
    assert!(line(&s, "fac-argo").contains("deny") && line(&s, "fac-flux").contains("deny in"), "{s}");
    t.keys(&["6"]);
    t.wait_screen("the alert", |s| s.contains("tenant fac-none has no default-deny ingress NetworkPolicy"));
    apply(kubeconfig, dir, "np-none", &deny_in("fac-none", true));
    t.wait_screen("the alert gone", |s| !s.contains("tenant fac-none has no default-deny"));
    t.keys(&["3"]);
    t.wait_screen("fac-none denied", |s| line(s, "fac-none").contains("deny"));
    let (have, want) = isolation_rows(kubeconfig);
    assert_eq!(have, want);
    assert_eq!(want["fac-none"]["netpol"], "deny");
}
