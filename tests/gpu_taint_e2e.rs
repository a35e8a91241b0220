//! Tainting one GPU through DRA (issue 15 item 4) on a real control plane: kube-apiserver
//! with `DRADeviceTaints` and `resource.k8s.io/v1alpha3`, the real scheduler (which must keep
//! a new claim off a `NoSchedule`-tainted device) and the real kube-controller-manager (whose
//! device taint eviction controller deletes the pods using a `NoExecute`-tainted device), and
//! `fabrik sim` playing DRA nodes and their kubelets.
//!
//! Each operation is planned from the cockpit's model, run by the Kubernetes executor as the
//! cockpit runs it, and checked with an independent client (kubectl, raw API reads): the
//! rules exist as planned, the scheduler and the controller act on them, the cockpit's model
//! shows the taint and its alert, the untaint removes exactly fabrik's rules, and the audit
//! trail ends in `succeeded`.
//!
//! There is no skip: without Go, the control plane or kubectl this test fails and says why.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabrik::feed::kube::KubeFeedConfig;
use fabrik::model::{AlertKind, AlertTarget, Delta, Fleet, OpProgress, Thresholds};
use fabrik::ops::audit::{self, Audit, Phase};
use fabrik::ops::kube::{ExecOptions, KubeExec};
use fabrik::ops::{OpRequest, Plan, TaintEffect};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

mod common;
use common::{control_plane, eventually, kubectl, obj};

const NS: &str = "e2e-taint";

fn opts() -> ExecOptions {
    ExecOptions {
        drain_timeout: Duration::from_secs(120),
        poll: Duration::from_millis(300),
        call_timeout: Duration::from_secs(10),
        ..ExecOptions::default()
    }
}

async fn fleet(client: &kube::Client) -> Fleet {
    fabrik::live::load_fleet(client.clone(), KubeFeedConfig::default(), Thresholds::default(), Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("the cockpit's model: {e}"))
}

/// Runs a plan through the Kubernetes executor, as the cockpit does; returns its outcome.
async fn run(
    ex: &Arc<KubeExec>,
    rx: &mut mpsc::Receiver<Vec<Delta>>,
    id: u64,
    plan: Plan,
) -> (Result<String, String>, Vec<String>) {
    let (_tx, cancel) = watch::channel(false);
    let ex2 = ex.clone();
    tokio::spawn(async move { fabrik::ops::kube::execute(&ex2, id, plan, cancel).await });
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut lines = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let batch = tokio::time::timeout(left, rx.recv()).await.expect("the operation finishes").expect("progress");
        for d in batch {
            let Delta::Op(p) = d else { continue };
            match p {
                OpProgress::Step { step, .. } => lines.push(step),
                OpProgress::Blocked { reason, .. } => lines.push(format!("blocked: {reason}")),
                OpProgress::Finished { outcome, .. } => return (outcome, lines),
                _ => {}
            }
        }
    }
}

/// A bare pod on `node` with its own ResourceClaim for one GPU of class gpu.nvidia.com,
/// `selector` a CEL expression narrowing the device (or none).
async fn claim_pod(c: &kube::Client, name: &str, node: &str, selector: Option<String>) {
    let selectors = selector.map_or(json!([]), |s| json!([{"cel": {"expression": s}}]));
    let claims: Api<ResourceClaim> = Api::namespaced(c.clone(), NS);
    claims
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": name},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1,
                    "selectors": selectors}}]}}})),
        )
        .await
        .unwrap_or_else(|e| panic!("create claim {name}: {e}"));
    let pods: Api<Pod> = Api::namespaced(c.clone(), NS);
    pods.create(
        &PostParams::default(),
        &obj(json!({"metadata": {"name": name, "labels": {"app": name}},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 1,
                "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                "containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}]}})),
    )
    .await
    .unwrap_or_else(|e| panic!("create pod {name}: {e}"));
}

/// The (pool, device) a claim was allocated, once it is.
async fn allocated(c: &kube::Client, claim: &str) -> Option<(String, String)> {
    let claims: Api<ResourceClaim> = Api::namespaced(c.clone(), NS);
    let r = claims.get_opt(claim).await.ok()??.status?.allocation?.devices?.results?.into_iter().next()?;
    Some((r.pool, r.device))
}

async fn phase(c: &kube::Client, pod: &str) -> Option<String> {
    let pods: Api<Pod> = Api::namespaced(c.clone(), NS);
    pods.get_opt(pod).await.ok()?.and_then(|p| p.status).and_then(|s| s.phase)
}

fn rules_json(kubeconfig: &Path) -> Value {
    serde_json::from_str(&kubectl(kubeconfig, &["get", "devicetaintrules", "-o", "json"])).expect("kubectl JSON")
}

fn gpu_index(device: &str) -> u8 {
    device.strip_prefix("gpu-").and_then(|d| d.split('-').next()).and_then(|i| i.parse().ok()).expect("gpu-<i>")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gpu_taint_is_a_device_taint_rule_the_scheduler_and_the_eviction_controller_obey() {
    let dir = std::env::temp_dir().join(format!("fabrik-taint-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (_cp, kubeconfig) = control_plane(&dir);
    // Two DRA nodes, no workload: the GPUs are ours.
    let _sim =
        common::sim(&kubeconfig, &dir, &["--nodes", "2", "--seed", "5", "--dra-every", "1", "--mig-seconds", "2"]);
    let conn = fabrik::cluster::connect(Some(&kubeconfig), None).await.unwrap_or_else(|e| panic!("{e}"));
    let c = conn.client.clone();
    let node = common::sim_nodes(&c).await.first().cloned().expect("a node");
    Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &obj(json!({"metadata": {"name": NS, "labels": {"fabrik.io/tenant": "e2e"}}})))
        .await
        .expect("create the namespace");

    // A pod holding one GPU of the node, found by its claim.
    eventually("the namespace's default ServiceAccount", Duration::from_secs(30), || {
        let c = c.clone();
        async move {
            let sa: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(c, NS);
            sa.get_opt("default").await.map_err(|e| e.to_string())?.map(|_| ()).ok_or_else(|| "not yet".to_string())
        }
    })
    .await;
    claim_pod(&c, "holder", &node, None).await;
    let (pool, held) = eventually("the holder's claim allocated and the pod running", Duration::from_secs(90), || {
        let c = c.clone();
        async move {
            let a = allocated(&c, "holder").await.ok_or("claim not allocated")?;
            match phase(&c, "holder").await.as_deref() {
                Some("Running") => Ok(a),
                p => Err(format!("pod {p:?}")),
            }
        }
    })
    .await;
    let held_gpu = gpu_index(&held);

    let audit_dir = dir.join("data");
    let (out, mut rx) = mpsc::channel(1024);
    let ex = Arc::new(KubeExec { client: c.clone(), audit: Audit::new(&audit_dir, "admin"), opts: opts(), out });

    // ---------- NoSchedule on another GPU: the scheduler keeps a new claim off it ----------
    let f = fleet(&c).await;
    let n = f.node(f.node_by_name(&node).expect("node in the model")).expect("node");
    let other = n
        .gpus
        .iter()
        .filter_map(|g| f.gpu(*g))
        .find(|g| g.index != held_gpu && !g.mig_enabled && g.pods.is_empty())
        .expect("a free whole GPU");
    let (other_gpu, other_uuid) = (other.index, f.str_of(other.uuid).to_string());
    let req = OpRequest::TaintGpu {
        node: node.clone(),
        gpu: other_gpu,
        effect: TaintEffect::NoSchedule,
        value: "e2e".into(),
    };
    let plan = fabrik::ops::plan(&f, &req).unwrap_or_else(|e| panic!("plan: {e}"));
    assert!(plan.can_execute(), "{plan:#?}");
    assert!(plan.effects.iter().any(|e| e.contains("DeviceTaintRule")), "{:?}", plan.effects);
    let (outcome, lines) = run(&ex, &mut rx, 1, plan).await;
    assert!(outcome.is_ok(), "{outcome:?}\n{lines:#?}");
    // kubectl: the rule, as planned.
    let rules = rules_json(&kubeconfig);
    let rule = rules["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["spec"]["deviceSelector"]["device"] == format!("gpu-{other_gpu}"))
        .unwrap_or_else(|| panic!("a rule on gpu-{other_gpu}: {rules}"));
    assert_eq!(rule["spec"]["deviceSelector"]["pool"], json!(pool));
    assert_eq!(rule["spec"]["deviceSelector"]["driver"], "gpu.nvidia.com");
    assert_eq!(rule["spec"]["taint"]["effect"], "NoSchedule");
    assert_eq!(rule["spec"]["taint"]["key"], "fabrik.io/gpu-taint");
    assert_eq!(rule["spec"]["taint"]["value"], "e2e");
    // The cockpit's model shows it, with its alert.
    let f = fleet(&c).await;
    let gid = f.gpu_by_uuid(&other_uuid).expect("gpu");
    let taints = f.gpu(gid).and_then(|g| g.dra.as_ref()).map(|d| d.taints.clone()).unwrap_or_default();
    assert!(taints.iter().any(|t| t.effect == "NoSchedule" && t.rule.is_some()), "{taints:?}");
    assert!(f.alerts.contains_key(&(AlertKind::DeviceTaint, AlertTarget::Gpu(gid))));
    // A claim that can only have that GPU stays unallocated.
    claim_pod(&c, "wants-tainted", &node, Some(format!("device.attributes['gpu.nvidia.com'].uuid == '{other_uuid}'")))
        .await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(allocated(&c, "wants-tainted").await, None, "the scheduler honours the NoSchedule taint");

    // ---------- NoExecute on the held GPU: the controller deletes the pod; done only then ----------
    let f = fleet(&c).await;
    let req = OpRequest::TaintGpu {
        node: node.clone(),
        gpu: held_gpu,
        effect: TaintEffect::NoExecute,
        value: "xid-79".into(),
    };
    let plan = fabrik::ops::plan(&f, &req).unwrap_or_else(|e| panic!("plan: {e}"));
    assert!(
        plan.effects.iter().any(|e| e.contains(&format!("{NS}/holder"))),
        "the preview names the pod: {:?}",
        plan.effects
    );
    let started = Instant::now();
    let (outcome, lines) = run(&ex, &mut rx, 2, plan).await;
    eprintln!("NoExecute taint done in {:?}: {lines:#?}", started.elapsed());
    assert!(outcome.is_ok(), "{outcome:?}\n{lines:#?}");
    assert!(lines.iter().any(|l| l.contains("no pod uses")), "it waited for the pod to go: {lines:#?}");
    // kubectl agrees: the pod is gone (or going, its claim no longer reserved for it).
    let pods = kubectl(&kubeconfig, &["get", "pods", "-n", NS, "-o", "json"]);
    let pods: Value = serde_json::from_str(&pods).expect("json");
    let holder = pods["items"].as_array().into_iter().flatten().find(|p| p["metadata"]["name"] == "holder");
    assert!(
        holder.is_none_or(|p| p["metadata"]["deletionTimestamp"].is_string()),
        "the device taint eviction controller deleted the holder: {holder:?}"
    );

    // ---------- untaint both: exactly fabrik's rules go; the waiting claim gets its GPU ----------
    for (id, gpu) in [(3, other_gpu), (4, held_gpu)] {
        let f = fleet(&c).await;
        let plan = fabrik::ops::plan(&f, &OpRequest::UntaintGpu { node: node.clone(), gpu })
            .unwrap_or_else(|e| panic!("plan untaint: {e}"));
        assert!(plan.can_execute(), "{plan:#?}");
        let (outcome, lines) = run(&ex, &mut rx, id, plan).await;
        assert!(outcome.is_ok(), "{outcome:?}\n{lines:#?}");
    }
    let rules = rules_json(&kubeconfig);
    assert_eq!(rules["items"].as_array().map(Vec::len), Some(0), "no rule is left: {rules}");
    eventually("the waiting claim allocated once the taint is gone", Duration::from_secs(60), || {
        let c = c.clone();
        async move { allocated(&c, "wants-tainted").await.ok_or_else(|| "not yet".to_string()) }
    })
    .await;
    // An untaint with nothing of fabrik's to remove is refused in the preview.
    let f = fleet(&c).await;
    let plan = fabrik::ops::plan(&f, &OpRequest::UntaintGpu { node: node.clone(), gpu: other_gpu }).expect("plan");
    assert!(!plan.can_execute(), "nothing to remove: {plan:#?}");

    // ---------- every change audited, each trail ending in succeeded ----------
    let recs = audit::read(&audit_dir.join(audit::FILE_NAME)).expect("audit log").0;
    for kind in ["taint-gpu", "untaint-gpu"] {
        let ops: std::collections::BTreeSet<&str> =
            recs.iter().filter(|r| r.kind == kind).map(|r| r.op.as_str()).collect();
        assert_eq!(ops.len(), 2, "two {kind} operations: {recs:#?}");
        for op in ops {
            let phases: Vec<Phase> = recs.iter().filter(|r| r.op == op).map(|r| r.phase).collect();
            assert_eq!(phases.first(), Some(&Phase::Confirmed), "{kind}: {phases:?}");
            assert_eq!(phases.last(), Some(&Phase::Succeeded), "{kind}: {phases:?}");
            assert!(phases.contains(&Phase::Sending), "the write is recorded before it goes out: {phases:?}");
        }
    }
}
