//! The real Kueue controller manager (built from Kueue's Go module by tests/kueue/kueue.sh,
//! its CRDs from the same module) on the test control plane, with `fabrik sim` as the GPU
//! nodes: Kueue admits what a ClusterQueue's quota allows and holds the rest, and fabrik's
//! figures and its ClusterQueue quota edit are checked against what kubectl reads. This is the
//! ground the Kueue Workloads view (issue 16 items 3–4) will stand on; for now it proves the
//! quotas view against a real Kueue's `status.flavorsUsage`, and that raising `nominalQuota`
//! through fabrik's previewed operation makes Kueue admit the Job it held.
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
use common::{Proc, control_plane, eventually, kubectl, repo};

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
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq-train"}},
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

/// fabrik's quotas row of the ClusterQueue's h100 flavor: (hard, used).
fn fabrik_cq(kubeconfig: &Path) -> (Value, Value) {
    let o = Command::new(common::BIN)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["snapshot", "--view", "quotas", "--format", "json"])
        .env("HOME", std::env::temp_dir().join("fabrik-kueue-e2e-home"))
        .output()
        .expect("run fabrik");
    assert!(o.status.success(), "fabrik snapshot: {}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("snapshot json");
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
             "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
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
    let audit = std::fs::read_to_string(dir.join("audit").join(fabrik::ops::audit::FILE_NAME)).expect("the audit log");
    assert!(audit.contains("hold-queue") && audit.contains("resume-queue"), "both are in the audit log");
}
