//! Many clusters at once (issue 17, item 1): a second test control plane plays a workload
//! cluster with its own `fabrik sim` nodes and a GPU pod; one kubeconfig names both (and a
//! third context whose API server is down).
//!
//! - `fabrik snapshot --context mgmt --context workload --context down --view clusters`:
//!   one row per context; each live row's nodes (ready/total), GPUs, allocated GPUs and GPU
//!   pods equal what kubectl reads on that control plane; the row of the server that is down
//!   says it failed, and the command exits 1.
//! - In a real terminal, `fabrik --context mgmt --context workload --context down`: the
//!   clusters view (`0`) shows the same rows, the down one reconnecting; Enter opens the
//!   workload cluster (its nodes in the header and the fleet view) and coming back to mgmt
//!   shows it live at once, on the view it was left on (no re-list).
//! - From the management cluster alone (`--context mgmt --workload-clusters`): Cluster API's
//!   Cluster CRD on mgmt, a Cluster `fleet/wl-1` whose kubeconfig Secret holds the workload
//!   cluster's kubeconfig, and `fleet/wl-2` still provisioning (no Secret): the snapshot's
//!   `mgmt:fleet/wl-1` row equals kubectl on the workload control plane, `mgmt:fleet/wl-2`
//!   says there is no Secret yet; in tmux Enter opens wl-1 and `:kubectl get nodes` there
//!   lists the workload cluster's nodes (the hand-off uses the Secret's kubeconfig).
//!   Clusters found while it runs open without a restart; a Cluster deleted while it runs
//!   turns its row `gone: …`, with no figures.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::common::{self, BIN, Tmux, control_plane, kubectl, session};

/// `kubectl config view --flatten` of `kubeconfig`, its one context, cluster and user renamed
/// `name`, pointed at `server` if given.
fn renamed(kubeconfig: &Path, name: &str, server: Option<&str>) -> Value {
    let text = kubectl(kubeconfig, &["config", "view", "--flatten", "-o", "json"]);
    let mut kc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("kubectl config view: {e}"));
    for list in ["clusters", "users", "contexts"] {
        for item in kc[list].as_array_mut().into_iter().flatten() {
            item["name"] = json!(name);
        }
    }
    for c in kc["contexts"].as_array_mut().into_iter().flatten() {
        c["context"]["cluster"] = json!(name);
        c["context"]["user"] = json!(name);
    }
    if let Some(server) = server {
        for c in kc["clusters"].as_array_mut().into_iter().flatten() {
            c["cluster"]["server"] = json!(server);
        }
    }
    kc
}

/// One kubeconfig with the contexts `mgmt`, `workload` and `down` (mgmt's credentials, a port
/// nothing listens on), current-context mgmt.
fn merged(dir: &Path, mgmt: &Path, workload: &Path) -> PathBuf {
    let parts = [
        renamed(mgmt, "mgmt", None),
        renamed(workload, "workload", None),
        renamed(mgmt, "down", Some("https://127.0.0.1:9")),
    ];
    let take = |key: &str| -> Vec<Value> {
        parts.iter().flat_map(|p| p[key].as_array().cloned().unwrap_or_default()).collect()
    };
    let kc = json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "mgmt", "preferences": {},
        "clusters": take("clusters"), "users": take("users"), "contexts": take("contexts"),
    });
    let file = dir.join("clusters.kubeconfig");
    std::fs::write(&file, kc.to_string()).expect("write the merged kubeconfig");
    file
}

/// What kubectl reads on one control plane, as the clusters row shows it.
fn truth(kubeconfig: &Path) -> Value {
    let nodes: Value = serde_json::from_str(&kubectl(kubeconfig, &["get", "nodes", "-o", "json"])).expect("nodes JSON");
    let pods: Value =
        serde_json::from_str(&kubectl(kubeconfig, &["get", "pods", "-A", "-o", "json"])).expect("pods JSON");
    let nodes = nodes["items"].as_array().cloned().unwrap_or_default();
    let ready = nodes
        .iter()
        .filter(|n| {
            n["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
        .count();
    let int = |v: &Value| v.as_str().and_then(|s| s.parse::<i64>().ok()).or_else(|| v.as_i64()).unwrap_or(0);
    // Physical GPUs: GFD's count label (these nodes share nothing).
    let gpus: i64 = nodes.iter().map(|n| int(&n["metadata"]["labels"]["nvidia.com/gpu.count"])).sum();
    let gpu_of = |p: &Value| -> i64 {
        p["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| int(&c["resources"]["limits"]["nvidia.com/gpu"]))
            .sum()
    };
    let gpu_pods: Vec<&Value> = pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| gpu_of(p) > 0 && !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
        .collect();
    // Whole GPUs held: the running pods' nvidia.com/gpu (one per GPU on an unshared node).
    let allocated: i64 = gpu_pods.iter().filter(|p| p["status"]["phase"] == "Running").map(|p| gpu_of(p)).sum();
    json!({
        "nodes": {"ready": ready, "total": nodes.len()},
        "gpus": gpus,
        "gpus_allocated": allocated,
        "pods": gpu_pods.len(),
        "pods_pending": gpu_pods.iter().filter(|p| p["status"]["phase"] == "Pending").count(),
    })
}

fn snapshot(kubeconfig: &Path, home: &Path) -> (Option<i32>, Value, String) {
    let o = std::process::Command::new(BIN)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["snapshot", "--context", "mgmt", "--context", "workload", "--context", "down"])
        .args(["--view", "clusters", "--format", "json", "--timeout-secs", "15"])
        .env("HOME", home)
        .output()
        .expect("run fabrik snapshot");
    let doc = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("clusters JSON: {e}"));
    (o.status.code(), doc, String::from_utf8_lossy(&o.stderr).into_owned())
}

pub fn clusters_phase(mgmt: &Path, dir: &Path) {
    let wdir = dir.join("workload");
    std::fs::create_dir_all(&wdir).expect("workload dir");
    let (_cp, workload) = control_plane(&wdir);
    let _sim = common::sim(&workload, &wdir, &["--nodes", "3", "--seed", "29", "--dra-every", "0"]);
    let pod = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "wl-team", "labels": {"fabrik.io/tenant": "wl-team"}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train", "namespace": "wl-team"},
         "spec": {"containers": [{"name": "train", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
             "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}},
    ]});
    super::apply(&workload, &wdir, "workload-pod", &pod);
    super::settle("the workload cluster's GPU pod runs", || {
        let phase = kubectl(&workload, &["get", "pod", "train", "-n", "wl-team", "-o", "jsonpath={.status.phase}"]);
        (phase.trim() == "Running").then_some(()).ok_or(phase)
    });
    let kc = merged(dir, mgmt, &workload);
    let home = dir.join("clusters-home");

    // Headless: one row per context, each equal to kubectl on its own control plane.
    let want = [("mgmt", truth(mgmt)), ("workload", truth(&workload))];
    assert_ne!(want[0].1["nodes"], want[1].1["nodes"], "the two clusters differ, so a mix-up shows");
    let (code, doc, stderr) = snapshot(&kc, &home);
    assert_eq!(code, Some(1), "a cluster that cannot be listed makes the exit status 1: {stderr}");
    let rows = doc["rows"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = rows.iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, ["mgmt", "workload", "down"], "{doc}");
    assert_eq!(rows[0]["current"], json!(true));
    for (i, (name, w)) in want.iter().enumerate() {
        let r = &rows[i];
        for key in ["nodes", "gpus", "gpus_allocated", "pods", "pods_pending"] {
            assert_eq!(r[key], w[key], "{name} {key}: fabrik {} vs kubectl {}", r[key], w[key]);
        }
        assert_eq!(
            (r["state"].as_str(), r["synced"].as_bool(), r["failed"].as_bool()),
            (Some("live"), Some(true), Some(false))
        );
        // Unknown stays unknown: no agent here.
        assert!(r["gpus_busy"].is_null() && r["idle_allocated"].is_null(), "{name}: {r}");
    }
    let down = &rows[2];
    assert_eq!(down["failed"], json!(true), "{down}");
    assert!(down["state"].as_str().is_some_and(|s| s.contains("not listed within 15s")), "{down}");

    // In a real terminal: the clusters view, opening the workload cluster, coming back.
    let t = Tmux::start();
    let env = format!("HOME={}", t.home.display());
    let cmd = format!("{BIN} --kubeconfig {} --context mgmt --context workload --context down", kc.display());
    t.ok(&session(&[&env], &[&cmd]));
    let mgmt_nodes = format!("nodes {}/{} ready", want[0].1["nodes"]["ready"], want[0].1["nodes"]["total"]);
    let wl_nodes = format!("nodes {}/{} ready", want[1].1["nodes"]["ready"], want[1].1["nodes"]["total"]);
    t.wait_screen_for("mgmt, live", Duration::from_secs(60), |s| s.contains("ctx mgmt") && s.contains(&mgmt_nodes));
    t.keys(&["2"]); // mgmt: the GPUs view, to come back to
    t.keys(&["0"]);
    // A row of the clusters table (the header line names the context too).
    let row = |s: &str, name: &str| {
        s.lines().find(|l| l.starts_with('│') && l.contains(&format!(" {name} "))).unwrap_or("").to_string()
    };
    let s = t.wait_screen_for("the clusters view with both clusters listed", Duration::from_secs(60), |s| {
        s.contains("Clusters [3]") && row(s, "workload").contains(" live ") && row(s, "mgmt").contains(" live ")
    });
    for (name, w) in &want {
        let r = row(&s, name);
        let nodes = format!(" {}/{} ", w["nodes"]["ready"], w["nodes"]["total"]);
        let gpus = format!(" {} ", w["gpus"]);
        assert!(r.contains(&nodes) && r.contains(&gpus), "{name}: want{nodes}and{gpus}in {r:?}\n{s}");
    }
    assert!(row(&s, "mgmt").contains('●'), "mgmt is on screen:\n{s}");
    let down = row(&s, "down");
    assert!(down.contains("reconnecting") || down.contains("loading"), "down:\n{s}");
    assert!(!down.contains(" 0/0 "), "nothing listed is not zero nodes: {down}");
    t.keys(&["j", "Enter"]);
    let s = t.wait_screen("the workload cluster opened", |s| s.contains("ctx workload") && s.contains(&wl_nodes));
    assert!(s.contains("cluster 2/3") && s.contains("[live]"), "opened live, no re-list:\n{s}");
    assert!(s.contains("Fleet ["), "it opens on its fleet view:\n{s}");
    t.keys(&["0"]);
    t.wait_screen("the clusters view again", |s| s.contains("Clusters [3]") && row(s, "workload").contains('●'));
    t.keys(&["k", "Enter"]);
    // Back at once: live, on the GPUs view it was left on.
    let s = t.wait_screen("mgmt again", |s| s.contains("ctx mgmt") && s.contains(&mgmt_nodes));
    assert!(s.contains("[live]") && s.contains("MIG instances]"), "mgmt as it was left, on its GPUs view:\n{s}");
    t.keys(&["q"]);
    drop(t);
    from_cluster_api(mgmt, &workload, dir, &want[1].1);
}

/// `--workload-clusters`: the workload cluster opened through its Cluster API Secret.
fn from_cluster_api(mgmt: &Path, workload: &Path, dir: &Path, want: &Value) {
    let o = std::process::Command::new(common::repo().join("tests/capi/capi.sh")).arg("crds").output();
    let crds = match o {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        other => panic!("tests/capi/capi.sh crds failed ({other:?}): it needs Go and the module proxy"),
    };
    kubectl(mgmt, &["apply", "--server-side", "-f", &format!("{crds}/cluster.x-k8s.io_clusters.yaml")]);
    kubectl(mgmt, &["wait", "--for=condition=established", "--timeout=60s", "crd/clusters.cluster.x-k8s.io"]);
    let cluster = |name: &str| {
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": name, "namespace": "fleet"},
        "spec": {"controlPlaneEndpoint": {"host": format!("{name}.fleet.example"), "port": 6443}}})
    };
    // The Secret as Cluster API writes it: type cluster.x-k8s.io/secret, the kubeconfig under `value`.
    let text = std::fs::read_to_string(workload).expect("the workload kubeconfig");
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "cluster.x-k8s.io/secret",
        "metadata": {"name": "wl-1-kubeconfig", "namespace": "fleet", "labels": {"cluster.x-k8s.io/cluster-name": "wl-1"}},
        "stringData": {"value": text}});
    let items = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fleet"}}, cluster("wl-1"), cluster("wl-2"), secret]});
    super::apply(mgmt, dir, "capi-clusters", &items);
    for (name, phase) in [("wl-1", "Provisioned"), ("wl-2", "Provisioning")] {
        let patch = json!({"status": {"phase": phase}}).to_string();
        kubectl(mgmt, &["patch", "cluster", name, "-n", "fleet", "--subresource=status", "--type=merge", "-p", &patch]);
    }

    let home = dir.join("capi-home");
    let o = std::process::Command::new(BIN)
        .arg("--kubeconfig")
        .arg(mgmt)
        .args(["snapshot", "--workload-clusters", "--view", "clusters", "--format", "json"])
        .env("HOME", &home)
        .output()
        .expect("run fabrik snapshot");
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("clusters JSON: {e}"));
    assert_eq!(o.status.code(), Some(1), "wl-2 has no kubeconfig yet: exit 1; {}", String::from_utf8_lossy(&o.stderr));
    let ctx = kubectl(mgmt, &["config", "current-context"]);
    let rows = doc["rows"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = rows.iter().filter_map(|r| r["name"].as_str()).collect();
    let (wl1, wl2) = (format!("{}:fleet/wl-1", ctx.trim()), format!("{}:fleet/wl-2", ctx.trim()));
    assert_eq!(names, [ctx.trim(), wl1.as_str(), wl2.as_str()], "{doc}");
    for key in ["nodes", "gpus", "gpus_allocated", "pods", "pods_pending"] {
        assert_eq!(
            rows[1][key], want[key],
            "{wl1} {key}: fabrik {} vs kubectl on the workload cluster {}",
            rows[1][key], want[key]
        );
    }
    assert_eq!(rows[1]["state"], "live");
    let why = rows[2]["state"].as_str().unwrap_or_default();
    assert!(
        rows[2]["failed"] == json!(true) && why.contains("no Secret fleet/wl-2-kubeconfig yet (Cluster Provisioning"),
        "{}",
        rows[2]
    );

    // In a real terminal: open wl-1 from the list; kubectl there reaches the workload cluster.
    let t = Tmux::start();
    let env = format!("HOME={}", t.home.display());
    let cmd = format!("{BIN} --kubeconfig {} --workload-clusters", mgmt.display());
    t.ok(&session(&[&env], &[&cmd]));
    t.wait_screen_for("the management cluster, live", Duration::from_secs(60), |s| s.contains("[live]"));
    t.keys(&["0"]);
    t.wait_screen("wl-1 listed and live", |s| {
        s.lines().any(|l| l.contains("fleet/wl-1") && l.contains(" live ")) && s.contains("fleet/wl-2")
    });
    t.keys(&["j", "Enter"]);
    let nodes = format!("nodes {}/{} ready", want["nodes"]["ready"], want["nodes"]["total"]);
    t.wait_screen("wl-1 opened", |s| s.contains(&format!("ctx {wl1}")) && s.contains(&nodes));
    t.keys(&[":"]);
    t.literal("kubectl get nodes -o name");
    t.keys(&["Enter"]);
    let names = kubectl(workload, &["get", "nodes", "-o", "name"]);
    let first = names.lines().next().unwrap_or("node/?").to_string();
    t.wait_screen("kubectl's answer from the workload cluster", |s| s.contains(&first));

    // While it runs: wl-2's Secret is written (its control plane came up), and a Cluster wl-3
    // is created with its Secret. Both open without a restart (listed again every 10 s): wl-2's
    // row turns live, wl-3's row appears, each equal to kubectl on the workload control plane.
    let secret = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "type": "cluster.x-k8s.io/secret",
            "metadata": {"name": format!("{name}-kubeconfig"), "namespace": "fleet",
                "labels": {"cluster.x-k8s.io/cluster-name": name}},
            "stringData": {"value": text}})
    };
    let later = json!({"apiVersion": "v1", "kind": "List", "items": [secret("wl-2"), cluster("wl-3"), secret("wl-3")]});
    super::apply(mgmt, dir, "capi-clusters-later", &later);
    t.keys(&["0"]);
    let row = |s: &str, name: &str| {
        s.lines().find(|l| l.starts_with('│') && l.contains(&format!("fleet/{name} "))).unwrap_or("").to_string()
    };
    let nodes = format!(" {}/{} ", want["nodes"]["ready"], want["nodes"]["total"]);
    let gpus = format!(" {} ", want["gpus"]);
    let s = t.wait_screen_for("wl-2 and wl-3 found and live", Duration::from_secs(60), |s| {
        s.contains("Clusters [4]")
            && ["wl-2", "wl-3"].iter().all(|n| row(s, n).contains(" live ") && row(s, n).contains(&nodes))
    });
    for name in ["wl-1", "wl-2", "wl-3"] {
        let r = row(&s, name);
        assert!(r.contains(&nodes) && r.contains(&gpus), "{name}: want{nodes}and{gpus}in {r:?}\n{s}");
    }
    // The new row opens like the others.
    let at = s.lines().filter(|l| l.starts_with('│')).position(|l| l.contains("fleet/wl-3 ")).expect("wl-3's row");
    let cur = s.lines().filter(|l| l.starts_with('│')).position(|l| l.contains('●')).expect("the row on screen");
    let moves: Vec<&str> = if at > cur { vec!["j"; at - cur] } else { vec!["k"; cur - at] };
    t.keys(&moves);
    t.keys(&["Enter"]);
    let wl3 = format!("{}:fleet/wl-3", ctx.trim());
    let want_nodes = format!("nodes {}/{} ready", want["nodes"]["ready"], want["nodes"]["total"]);
    t.wait_screen("wl-3 opened", |s| s.contains(&format!("ctx {wl3}")) && s.contains(&want_nodes));
    // wl-2's Cluster is deleted (its server, shared with the others, still answers): at the
    // next listing its row says it is gone and claims no figures, its feed stopped.
    kubectl(mgmt, &["delete", "cluster.cluster.x-k8s.io", "wl-2", "-n", "fleet", "--wait=false"]);
    t.keys(&["0"]);
    let s = t.wait_screen_for("wl-2's row gone", Duration::from_secs(60), |s| row(s, "wl-2").contains("gone: Cluster"));
    let r = row(&s, "wl-2");
    assert!(!r.contains(&nodes) && r.contains('—'), "no figures on a gone row: {r:?}\n{s}");
    assert!(row(&s, "wl-3").contains(" live "), "the others stay: {s}");
    // wl-3's Cluster deleted while it is on screen: its views stay as last seen and the header
    // no longer says live. Created again, its new feed replaces them where they are.
    t.keys(&["Escape"]);
    t.wait_screen("wl-3 on screen", |s| s.contains(&format!("ctx {wl3}")) && s.contains("[live]"));
    kubectl(mgmt, &["delete", "cluster.cluster.x-k8s.io", "wl-3", "-n", "fleet", "--wait=false"]);
    let s = t.wait_screen_for("wl-3's views stale", Duration::from_secs(60), |s| s.contains("[cluster stale since"));
    // Its rows stay (the header, longer now, is cut before its node count at 140 columns).
    let rows = format!("Fleet [{0}/{0}]", want["nodes"]["total"]);
    assert!(s.contains("no longer fed") && s.contains(&rows) && !s.contains("[live]"), "{s}");
    let again = json!({"apiVersion": "v1", "kind": "List", "items": [cluster("wl-3")]});
    super::apply(mgmt, dir, "capi-wl-3-again", &again);
    t.wait_screen_for("wl-3 listed anew", Duration::from_secs(60), |s| {
        s.contains(&format!("ctx {wl3}")) && s.contains("[live]") && s.contains(&want_nodes)
    });
    t.keys(&["q"]);
}
