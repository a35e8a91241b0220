//! The real Kueue controller manager (built from Kueue's Go module by tests/kueue/kueue.sh,
//! its CRDs from the same module) on the test control plane, with `fabrik sim` as the GPU
//! nodes: Kueue admits what a ClusterQueue's quota allows and holds the rest, and fabrik's
//! figures and operations are checked against what kubectl reads, in phases: the quotas view
//! against Kueue's `status.flavorsUsage`; raising `nominalQuota` through fabrik's previewed
//! operation makes Kueue admit the Job it held; hold-and-drain and resume of the
//! ClusterQueue; the workloads view and the tenant's `queued` against `kubectl get
//! workloads` (states, places in line, flavors, conditions) before and after a higher
//! priority Job preempts two others; suspending and resuming a Workload through fabrik; and
//! a reclaim on a Kueue Job's pod, which suspends its Workload.
//!
//! Kueue runs without its webhooks (nothing in the API server calls them): the Jobs are
//! created suspended, as Kueue's Job webhook would make them. Its metrics server insists on
//! a certificate under /etc/kueue/metrics/certs, so this test (like the agents test) runs as
//! root; `.ci/run` does.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use fabrik::model::{Delta, OpProgress, QuotaSourceSpec};
use fabrik::ops::audit::Audit;
use fabrik::ops::kube::{ExecOptions, KubeExec};
use fabrik::ops::{OpRequest, QuotaField, QuotaKey, StopPolicy};
use serde_json::{Value, json};

mod common;
#[path = "kueue_e2e/workloads.rs"]
mod workloads;
use common::{BIN, Proc, Tmux, control_plane, eventually, kubectl, repo, session};

const NS: &str = "e2e-kueue";
const WAIT: Duration = Duration::from_secs(120);

fn kueue_sh(arg: &str) -> String {
    let o = Command::new(repo().join("tests/kueue/kueue.sh"))
        .arg(arg)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("tests/kueue/kueue.sh {arg}: {e}"));
    assert!(
        o.status.success(),
        "tests/kueue/kueue.sh {arg} failed: it needs Go and the module proxy (.ci/run installs Go)"
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A self-signed certificate and key as `tls.crt` / `tls.key` in `dir`.
fn certs(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    let c = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("a self-signed certificate");
    std::fs::write(dir.join("tls.crt"), c.cert.pem()).expect("write tls.crt");
    std::fs::write(dir.join("tls.key"), c.signing_key.serialize_pem()).expect("write tls.key");
}

/// Starts Kueue against `kubeconfig`; its log goes to `dir/kueue.log`.
fn start_kueue(kubeconfig: &Path, dir: &Path) -> Proc {
    let bin = PathBuf::from(kueue_sh("path"));
    certs(&dir.join("webhook-certs"));
    // Fixed by Kueue's main for a configuration without internal cert management.
    certs(Path::new("/etc/kueue/metrics/certs"));
    let config = dir.join("kueue-config.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nnamespace: kueue-system\n\
             health:\n  healthProbeBindAddress: \"0\"\nmetrics:\n  bindAddress: \"0\"\n\
             webhook:\n  port: 19443\n  host: 127.0.0.1\n  certDir: {}\n\
             leaderElection:\n  leaderElect: false\ninternalCertManagement:\n  enable: false\n\
             manageJobsWithoutQueueName: false\nintegrations:\n  frameworks:\n  - batch/job\n",
            dir.join("webhook-certs").display()
        ),
    )
    .expect("write Kueue's configuration");
    let log = std::fs::File::create(dir.join("kueue.log")).expect("kueue.log");
    let child = Command::new(&bin)
        .arg("--config")
        .arg(&config)
        // The on-demand visibility API is an aggregated API server of its own.
        .arg("--feature-gates=VisibilityOnDemand=false")
        .env("KUBECONFIG", kubeconfig)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
    Proc { child, what: "kueue" }
}

fn jsonpath(kubeconfig: &Path, what: &[&str], path: &str) -> String {
    let mut args = what.to_vec();
    let p = format!("jsonpath={path}");
    args.extend(["-o", p.as_str()]);
    kubectl(kubeconfig, &args).trim().to_string()
}

fn job(name: &str, gpus: u32) -> String {
    job_with(name, gpus, json!({"kueue.x-k8s.io/queue-name": "lq-train"}))
}

fn job_with(name: &str, gpus: u32, labels: Value) -> String {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"suspend": true, "template": {"metadata": {"labels": {"app": name}}, "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "resources": {
                "requests": {"nvidia.com/gpu": gpus.to_string()}, "limits": {"nvidia.com/gpu": gpus.to_string()}}}]}}}})
    .to_string()
}

fn apply(kubeconfig: &Path, dir: &Path, name: &str, body: &str) {
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, body).expect("write the manifest");
    kubectl(kubeconfig, &["apply", "-f", &file.to_string_lossy()]);
}

/// Whether the Job's Workload is admitted, from the Workload's conditions (kubectl).
fn admitted(kubeconfig: &Path, job: &str) -> Result<bool, String> {
    let out = kubectl(kubeconfig, &["-n", NS, "get", "workloads", "-o", "json"]);
    let v: Value = serde_json::from_str(&out).map_err(|e| e.to_string())?;
    let wl = v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|w| w["metadata"]["ownerReferences"].as_array().is_some_and(|o| o.iter().any(|r| r["name"] == job)))
        .ok_or_else(|| format!("no Workload for Job {job} yet"))?;
    let cond = |t: &str| {
        wl["status"]["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == t && c["status"] == "True")
    };
    Ok(cond("Admitted"))
}

/// `fabrik snapshot --view VIEW --format json` against the test control plane.
fn fabrik_view(kubeconfig: &Path, view: &str) -> Value {
    let o = Command::new(common::BIN)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["snapshot", "--view", view, "--format", "json"])
        .env("HOME", std::env::temp_dir().join("fabrik-kueue-e2e-home"))
        .output()
        .expect("run fabrik");
    assert!(o.status.success(), "fabrik snapshot: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("snapshot json")
}

/// kubectl's Workloads as fabrik's workloads view must show them, by `namespace/name`.
fn workload_truth(kubeconfig: &Path) -> std::collections::BTreeMap<String, Value> {
    let get = |what: &str| -> Value {
        serde_json::from_str(&kubectl(kubeconfig, &["get", what, "-A", "-o", "json"])).expect("kubectl json")
    };
    workloads::truth(&get("workloads.kueue.x-k8s.io"), &get("localqueues.kueue.x-k8s.io"))
}

/// fabrik's workloads view and the tenant's `queued` equal what kubectl reads, at a moment
/// Kueue holds still (the truth read before and after the snapshot is the same). Returns it.
async fn same_workloads(kubeconfig: &Path, when: &str) -> std::collections::BTreeMap<String, Value> {
    eventually(&format!("fabrik's workloads = kubectl's ({when})"), WAIT, || {
        let kc = kubeconfig.to_path_buf();
        async move {
            let before = workload_truth(&kc);
            let view = fabrik_view(&kc, "workloads");
            let tenants = fabrik_view(&kc, "tenants");
            if workload_truth(&kc) != before {
                return Err("Kueue changed something meanwhile".to_string());
            }
            let rows: std::collections::BTreeMap<String, Value> = view["rows"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| (r["workload"].as_str().unwrap_or_default().to_string(), workloads::fabrik_row(r)))
                .collect();
            if rows != before {
                return Err(format!("fabrik {rows:#?}\nkubectl {before:#?}"));
            }
            let queued = tenants["rows"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| r["tenant"] == "cq-train")
                .map(|r| r["queued"].clone())
                .ok_or_else(|| format!("no cq-train tenant row: {tenants}"))?;
            let want = workloads::queued(&before, NS);
            if queued != want {
                return Err(format!("tenant cq-train queued: fabrik {queued} kubectl {want}"));
            }
            Ok(before)
        }
    })
    .await
}

/// The cockpit in a real terminal (tmux) after train-hi preempted train-a and train-b: the
/// workloads view says who preempted whom and who is next, Enter tells the story, the tenant
/// says what Kueue holds back, and `Z` previews a suspension (cancelled: nothing is sent).
fn tui_reads_the_preemption(kubeconfig: &Path, wa: &str, hi: &str) {
    let t = Tmux::start();
    let env = format!("HOME={}", t.home.display());
    let cmd = format!("{BIN} --kubeconfig {}", kubeconfig.display());
    t.ok(&session(&[&env], &[&cmd]));
    t.wait_screen_for("the cockpit, live", WAIT, |s| s.contains("[live]"));
    t.keys(&["9"]);
    t.wait_screen("the workloads view", |s| s.contains("CLUSTERQUEUE") && s.contains("job-train-hi"));
    let (_, a_name) = wa.split_once('/').expect("namespace/name");
    t.keys(&["/"]);
    t.literal(a_name);
    t.keys(&["Enter"]);
    // The row, not the title (which shows the filter, and so the name, too).
    let is_row = |l: &str| l.contains(a_name) && l.contains("Evicted");
    let s = t.wait_screen("train-a's row", |s| s.lines().any(|l| is_row(l) && l.contains("preempted by")));
    let row = s.lines().find(|l| is_row(l)).unwrap_or_default();
    assert!(row.contains("preempted by"), "WHY names the preemption: {row}");
    assert!(row.contains("cq-train") && row.contains(" 1 "), "first in line in cq-train: {row}");
    t.keys(&["Enter"]);
    t.wait_screen("its story", |s| s.contains(&format!("{wa} (Evicted): queued")));
    t.keys(&["Z"]);
    t.wait_screen("the suspend preview", |s| {
        s.contains(&format!("Suspend Kueue Workload {wa}")) && s.contains("set spec.active: false")
    });
    t.keys(&["n"]);
    t.wait_screen("the preview closed", |s| !s.contains("Suspend Kueue Workload"));
    // The tenant: Kueue holds two Workloads back, and says where.
    t.keys(&["Escape"]);
    t.wait_screen("the filter cleared", |s| s.contains(hi.split_once('/').map_or(hi, |(_, n)| n)));
    t.keys(&[":"]);
    t.literal("tenants cq-train");
    t.keys(&["Enter"]);
    t.wait_screen("the tenants view", |s| s.contains("QUEUED") && s.contains("cq-train"));
    t.keys(&["Enter"]);
    t.wait_screen("what Kueue holds back", |s| {
        s.contains("Kueue holds 2 workloads (2 pods): 2 waiting for quota in cq-train (2 pods)")
    });
}

/// The `namespace/name` of the Workload of Job `job`, from kubectl's truth.
fn workload_of(t: &std::collections::BTreeMap<String, Value>, job: &str) -> String {
    t.values()
        .find(|r| r["owner"] == format!("Job/{job}"))
        .and_then(|r| r["workload"].as_str())
        .unwrap_or_else(|| panic!("no Workload of Job {job}: {t:#?}"))
        .to_string()
}

/// fabrik's quotas row of the ClusterQueue's h100 flavor: (hard, used).
fn fabrik_cq(kubeconfig: &Path) -> (Value, Value) {
    let v = fabrik_view(kubeconfig, "quotas");
    let row = v["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["source"]["kind"] == "ClusterQueue" && r["source"]["queue"] == "cq-train")
        .cloned()
        .unwrap_or_else(|| panic!("no cq-train row in fabrik's quotas view: {v}"));
    (row["hard"].clone(), row["used"].clone())
}

/// Plans `req` on the cockpit's model of the cluster now and runs it as the cockpit does.
async fn run_op(c: &kube::Client, dir: &Path, req: OpRequest) -> Result<String, String> {
    let f = fabrik::live::load_fleet(
        c.clone(),
        Default::default(),
        fabrik::model::Thresholds::default(),
        Duration::from_secs(60),
    )
    .await
    .unwrap_or_else(|e| panic!("the cockpit's model: {e}"));
    let plan = fabrik::ops::plan(&f, &req).unwrap_or_else(|e| panic!("plan {req:?}: {e}"));
    let (out, mut rx) = tokio::sync::mpsc::channel(256);
    let ex =
        KubeExec { client: c.clone(), audit: Audit::new(&dir.join("audit"), "e2e"), opts: ExecOptions::default(), out };
    let (cancel_tx, cancel) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let _keep = cancel_tx;
        fabrik::ops::kube::execute(&ex, 1, plan, cancel).await
    });
    tokio::time::timeout(WAIT, async {
        while let Some(batch) = rx.recv().await {
            for d in batch {
                if let Delta::Op(OpProgress::Finished { outcome, .. }) = d {
                    return outcome;
                }
            }
        }
        Err("the executor's channel closed".to_string())
    })
    .await
    .unwrap_or_else(|_| panic!("{req:?} did not finish within {WAIT:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_admits_what_the_queue_allows_and_fabrik_reads_and_edits_it() {
    let dir = std::env::temp_dir().join(format!("fabrik-kueue-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    kueue_sh("build");
    let (_cp, kubeconfig) = control_plane(&dir);
    let _sim = common::sim(&kubeconfig, &dir, &["--nodes", "2", "--seed", "5", "--dra-every", "0"]);
    let crds = kueue_sh("crds");
    kubectl(&kubeconfig, &["apply", "--server-side", "-f", &crds]);
    for crd in ["clusterqueues", "localqueues", "resourceflavors", "workloads"] {
        kubectl(
            &kubeconfig,
            &["wait", "--for=condition=Established", "--timeout=60s", &format!("crd/{crd}.kueue.x-k8s.io")],
        );
    }
    kubectl(&kubeconfig, &["create", "namespace", "kueue-system"]);
    kubectl(&kubeconfig, &["create", "namespace", NS]);
    let _kueue = start_kueue(&kubeconfig, &dir);

    apply(
        &kubeconfig,
        &dir,
        "queues",
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "h100"}},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq-train"},
             "spec": {"namespaceSelector": {}, "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 2}]}]}]}},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": "lq-train", "namespace": NS}, "spec": {"clusterQueue": "cq-train"}}]})
        .to_string(),
    );
    // Two Jobs of 2 GPUs each into a queue of 2: Kueue admits one and holds the other.
    apply(&kubeconfig, &dir, "train-a", &job("train-a", 2));
    eventually("Kueue admits train-a", WAIT, || {
        let kc = kubeconfig.clone();
        async move { if admitted(&kc, "train-a")? { Ok(()) } else { Err("not admitted".into()) } }
    })
    .await;
    apply(&kubeconfig, &dir, "train-b", &job("train-b", 2));
    eventually("train-b's Workload, held for quota", WAIT, || {
        let kc = kubeconfig.clone();
        async move { if admitted(&kc, "train-b")? { Err("admitted".into()) } else { Ok(()) } }
    })
    .await;
    assert_eq!(jsonpath(&kubeconfig, &["-n", NS, "get", "job", "train-a"], "{.spec.suspend}"), "false");
    assert_eq!(jsonpath(&kubeconfig, &["-n", NS, "get", "job", "train-b"], "{.spec.suspend}"), "true");

    // fabrik's quotas view: nominalQuota and what Kueue counts in use, as kubectl reads them.
    let usage = |kc: PathBuf| {
        jsonpath(
            &kc,
            &["get", "clusterqueue", "cq-train"],
            "{.status.flavorsUsage[?(@.name==\"h100\")].resources[?(@.name==\"nvidia.com/gpu\")].total}",
        )
    };
    eventually("Kueue's usage of cq-train: 2", WAIT, || {
        let kc = kubeconfig.clone();
        async move { if usage(kc.clone()) == "2" { Ok(()) } else { Err(usage(kc)) } }
    })
    .await;
    assert_eq!(fabrik_cq(&kubeconfig), (json!(2), json!(2)), "fabrik reads nominalQuota 2, used 2, as kubectl");

    // Raise nominalQuota through fabrik's operation: Kueue then admits train-b.
    let conn = fabrik::cluster::connect(Some(&kubeconfig), None).await.unwrap_or_else(|e| panic!("{e}"));
    let c = conn.client.clone();
    let key = QuotaKey {
        source: QuotaSourceSpec::ClusterQueue { queue: "cq-train".into(), flavor: "h100".into() },
        resource: "nvidia.com/gpu".into(),
        field: QuotaField::Hard,
    };
    let req = OpRequest::SetQuota { tenant: "cq-train".into(), quota: key, value: "4".into() };
    let outcome = run_op(&c, &dir, req).await;
    assert!(outcome.is_ok(), "set nominalQuota: {outcome:?}");
    assert_eq!(
        jsonpath(
            &kubeconfig,
            &["get", "clusterqueue", "cq-train"],
            "{.spec.resourceGroups[0].flavors[0].resources[0].nominalQuota}"
        ),
        "4"
    );
    eventually("Kueue admits train-b once the quota allows it", WAIT, || {
        let kc = kubeconfig.clone();
        async move { if admitted(&kc, "train-b")? { Ok(()) } else { Err("still held".into()) } }
    })
    .await;
    eventually("Kueue's usage of cq-train: 4", WAIT, || {
        let kc = kubeconfig.clone();
        async move { if usage(kc.clone()) == "4" { Ok(()) } else { Err(usage(kc)) } }
    })
    .await;
    assert_eq!(fabrik_cq(&kubeconfig), (json!(4), json!(4)), "fabrik reads nominalQuota 4, used 4, as kubectl");
    assert_eq!(jsonpath(&kubeconfig, &["-n", NS, "get", "job", "train-b"], "{.spec.suspend}"), "false");

    // ---------- hold and drain the queue through fabrik, then resume it (issue 16 item 4) ----------
    let hold = |policy| OpRequest::QueueStop { queue: "cq-train".into(), policy };
    let outcome = run_op(&c, &dir, hold(StopPolicy::HoldAndDrain)).await;
    assert!(outcome.as_ref().is_ok_and(|m| m.contains("held and drained")), "{outcome:?}");
    let cq = |path: &str| jsonpath(&kubeconfig, &["get", "clusterqueue", "cq-train"], path);
    assert_eq!(cq("{.spec.stopPolicy}"), "HoldAndDrain");
    assert_eq!(cq("{.status.conditions[?(@.type==\"Active\")].reason}"), "Stopped", "Kueue reports it stopped");
    for j in ["train-a", "train-b"] {
        eventually(&format!("Kueue suspends {j} again"), WAIT, || {
            let kc = kubeconfig.clone();
            async move {
                let s = jsonpath(&kc, &["-n", NS, "get", "job", j], "{.spec.suspend}");
                if s == "true" { Ok(()) } else { Err(s) }
            }
        })
        .await;
    }
    eventually("Kueue's usage of cq-train: 0", WAIT, || {
        let kc = kubeconfig.clone();
        async move { if usage(kc.clone()) == "0" { Ok(()) } else { Err(usage(kc)) } }
    })
    .await;
    assert_eq!(fabrik_cq(&kubeconfig), (json!(4), json!(0)), "fabrik reads the drained queue as kubectl");
    // Held: nothing is admitted again meanwhile.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!admitted(&kubeconfig, "train-a").unwrap_or(true) && !admitted(&kubeconfig, "train-b").unwrap_or(true));

    let outcome = run_op(&c, &dir, hold(StopPolicy::None)).await;
    assert!(outcome.as_ref().is_ok_and(|m| m.contains("resumed")), "{outcome:?}");
    assert_eq!(cq("{.spec.stopPolicy}"), "None");
    assert_eq!(cq("{.status.conditions[?(@.type==\"Active\")].status}"), "True");
    for j in ["train-a", "train-b"] {
        eventually(&format!("Kueue admits {j} again"), WAIT, || {
            let kc = kubeconfig.clone();
            async move { if admitted(&kc, j)? { Ok(()) } else { Err("held".into()) } }
        })
        .await;
    }

    // ---------- the Workloads view against kubectl (issue 16 item 4) ----------
    let t = same_workloads(&kubeconfig, "both admitted").await;
    let (wa, wb) = (workload_of(&t, "train-a"), workload_of(&t, "train-b"));
    assert_eq!((t[&wa]["state"].as_str(), t[&wb]["state"].as_str()), (Some("Admitted"), Some("Admitted")));
    assert_eq!(t[&wa]["flavors"], json!(["h100"]), "Kueue assigned the h100 flavor");

    // A higher-priority Job preempts both: Kueue evicts them and names the preemptor.
    apply(
        &kubeconfig,
        &dir,
        "high",
        &json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"}, "value": 1000, "description": "e2e"})
        .to_string(),
    );
    let labels = json!({"kueue.x-k8s.io/queue-name": "lq-train", "kueue.x-k8s.io/priority-class": "high"});
    apply(&kubeconfig, &dir, "train-hi", &job_with("train-hi", 4, labels));
    eventually("Kueue admits train-hi over train-a and train-b", WAIT, || {
        let kc = kubeconfig.clone();
        async move {
            let ok = admitted(&kc, "train-hi")? && !admitted(&kc, "train-a")? && !admitted(&kc, "train-b")?;
            if ok { Ok(()) } else { Err("not yet".into()) }
        }
    })
    .await;
    let t = same_workloads(&kubeconfig, "after a preemption").await;
    let hi = workload_of(&t, "train-hi");
    for w in [&wa, &wb] {
        assert_eq!(t[w]["state"], "Evicted", "{w}: {:#?}", t[w]);
        assert_eq!(t[w]["preempted_by"], json!(hi), "Kueue names train-hi as the preemptor of {w}");
    }
    assert_eq!((t[&wa]["position"].clone(), t[&wb]["position"].clone()), (json!(1), json!(2)), "older first");
    assert_eq!(t[&hi]["priority"], 1000);
    tui_reads_the_preemption(&kubeconfig, &wa, &hi);

    // Suspend train-hi through fabrik: Kueue evicts it, its pods go, a and b are admitted again.
    let active = |workload: &str, active| OpRequest::WorkloadActive { workload: workload.to_string(), active };
    let outcome = run_op(&c, &dir, active(&hi, false)).await;
    assert!(outcome.as_ref().is_ok_and(|m| m.contains("suspended")), "{outcome:?}");
    let (hns, hname) = hi.split_once('/').expect("namespace/name");
    let hi_field = |path: &str| jsonpath(&kubeconfig, &["-n", hns, "get", "workloads.kueue.x-k8s.io", hname], path);
    assert_eq!(hi_field("{.spec.active}"), "false");
    assert_eq!(hi_field("{.status.conditions[?(@.type==\"QuotaReserved\")].status}"), "False", "its quota released");
    let hi_pods =
        || jsonpath(&kubeconfig, &["-n", NS, "get", "pods", "-l", "job-name=train-hi"], "{.items[*].metadata.name}");
    assert_eq!(hi_pods(), "", "done only once its pods are gone, terminating ones too");
    for j in ["train-a", "train-b"] {
        eventually(&format!("Kueue admits {j} once train-hi is suspended"), WAIT, || {
            let kc = kubeconfig.clone();
            async move { if admitted(&kc, j)? { Ok(()) } else { Err("held".into()) } }
        })
        .await;
    }
    let t = same_workloads(&kubeconfig, "train-hi suspended").await;
    assert_eq!(t[&hi]["state"], "Inactive");
    assert_eq!(workloads::queued(&t, NS), json!([{ "why": "deactivated", "workloads": 1, "pods": 1 }]));
    // Suspending it again is refused before anything is sent.
    let f = fabrik::live::load_fleet(c.clone(), Default::default(), Default::default(), Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("the cockpit's model: {e}"));
    let e = fabrik::ops::plan(&f, &active(&hi, false)).expect_err("already suspended");
    assert!(e.to_string().contains("deactivated already"), "{e}");

    // Resume it: Kueue requeues it (and, higher in priority, it preempts the others again).
    let outcome = run_op(&c, &dir, active(&hi, true)).await;
    assert!(outcome.as_ref().is_ok_and(|m| m.contains("resumed")), "{outcome:?}");
    assert_eq!(hi_field("{.spec.active}"), "true");
    eventually("Kueue admits train-hi again", WAIT, || {
        let kc = kubeconfig.clone();
        async move { if admitted(&kc, "train-hi")? { Ok(()) } else { Err("queued".into()) } }
    })
    .await;
    same_workloads(&kubeconfig, "train-hi resumed").await;

    // Reclaim on train-hi's running pod: its Job is Kueue's, so fabrik suspends the Workload
    // (suspending the Job itself would be undone by Kueue).
    let pod = eventually("train-hi's pod runs", WAIT, || {
        let kc = kubeconfig.clone();
        async move {
            let p = jsonpath(
                &kc,
                &["-n", NS, "get", "pods", "-l", "job-name=train-hi", "--field-selector=status.phase=Running"],
                // `[*]`: an empty list is no names (`[0]` of it is an error to kubectl).
                "{.items[*].metadata.name}",
            );
            match p.split_whitespace().next() {
                Some(first) => Ok(first.to_string()),
                None => Err("no running pod yet".to_string()),
            }
        }
    })
    .await;
    let req = OpRequest::Reclaim { namespace: NS.into(), pod: pod.clone() };
    // Planned on the cockpit's model as soon as it has the pod on its node.
    let plan = eventually(&format!("a reclaim plan for {pod}"), WAIT, || {
        let (c, req) = (c.clone(), req.clone());
        async move {
            let f = fabrik::live::load_fleet(c, Default::default(), Default::default(), Duration::from_secs(60))
                .await
                .map_err(|e| e.to_string())?;
            fabrik::ops::plan(&f, &req).map_err(|e| e.to_string())
        }
    })
    .await;
    assert_eq!(plan.kind, fabrik::ops::OpKind::SuspendWorkload, "{plan:#?}");
    assert!(plan.effects.iter().any(|e| e.contains("reclaim suspends its Workload")), "{:?}", plan.effects);
    let outcome = run_op(&c, &dir, req).await;
    assert!(outcome.as_ref().is_ok_and(|m| m.contains("suspended")), "{outcome:?}");
    assert_eq!(hi_field("{.spec.active}"), "false", "the Workload, not the Job, was suspended");
    assert_eq!(hi_pods(), "", "done only once its pods are gone");
    eventually("train-hi's pods are gone", WAIT, || {
        let kc = kubeconfig.clone();
        async move {
            let left =
                jsonpath(&kc, &["-n", NS, "get", "pods", "-l", "job-name=train-hi"], "{.items[*].metadata.name}");
            if left.is_empty() { Ok(()) } else { Err(left) }
        }
    })
    .await;

    let audit = std::fs::read_to_string(dir.join("audit").join(fabrik::ops::audit::FILE_NAME)).expect("the audit log");
    for kind in ["hold-queue", "resume-queue", "suspend-workload", "resume-workload"] {
        assert!(audit.contains(kind), "{kind} is in the audit log");
    }
}
