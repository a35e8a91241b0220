//! Operations on a real control plane (issue: Real Kubernetes, part 2): kube-apiserver with
//! etcd, kube-controller-manager (disruption, ReplicaSet and DaemonSet controllers) and
//! kube-scheduler from tests/controlplane, `fabrik sim` as the GPU nodes and mig-manager.
//!
//! Each operation is planned from the cockpit's model (the kube feed into a `Fleet`), run by
//! the Kubernetes executor exactly as the cockpit runs it, and checked with an independent
//! client (kubectl, or raw API reads): a drain evicts what `kubectl drain --ignore-daemonsets`
//! would and waits out a PodDisruptionBudget (429 first); a reslice ends in
//! `mig.config.state=success` with the capacity kubectl sees; a stuck `pending` is flagged; a
//! quota edit lands and a concurrent kubectl edit is a conflict, never overwritten; a node
//! that is gone is an error that changes nothing; the limited tenant identity is refused up
//! front. Then the real binary in tmux: a drain from the keyboard recorded in the audit log,
//! `--readonly` sending nothing, the tenant told why it may not drain.
//!
//! There is no skip: without Go, the control plane, kubectl or tmux this test fails and says
//! why (`.ci/run` installs them).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabrik::feed::kube::KubeFeedConfig;
use fabrik::model::{Delta, Fleet, OpProgress, QuotaSourceSpec, Thresholds};
use fabrik::ops::audit::{self, Audit, Phase};
use fabrik::ops::kube::{ExecOptions, KubeExec};
use fabrik::ops::{OpRequest, Plan, PlanDetail, PodAction, QuotaField, QuotaKey};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

mod common;
use common::{BIN, Tmux, control_plane, eventually, kubectl, obj, session};
#[path = "ops_e2e/crash.rs"]
mod crash;
#[path = "ops_e2e/etcd.rs"]
mod etcd;
#[path = "common/fault_proxy.rs"]
mod fault_proxy;
#[path = "ops_e2e/rbac.rs"]
mod rbac;
#[path = "ops_e2e/reclaim.rs"]
mod reclaim;
#[path = "ops_e2e/restart.rs"]
mod restart;

const NS: &str = "e2e-ops";

fn opts() -> ExecOptions {
    ExecOptions {
        evict_retry: Duration::from_secs(1),
        drain_timeout: Duration::from_secs(120),
        poll: Duration::from_millis(300),
        mig_stuck: Duration::from_secs(3),
        mig_timeout: Duration::from_secs(90),
        // Far above the simulated mig-manager's reaction delay (--mig-delay-ms).
        mig_ack_grace: Duration::from_secs(20),
        call_timeout: Duration::from_secs(10),
        backoff: fabrik::ops::retry::Backoff {
            base: Duration::from_millis(200),
            cap: Duration::from_secs(2),
            attempts: 6,
        },
    }
}

/// One executor and the progress it reports, as the cockpit's app task would see it.
struct Exec {
    ex: Arc<KubeExec>,
    rx: mpsc::Receiver<Vec<Delta>>,
    next: u64,
}

impl Exec {
    fn new(client: kube::Client, audit_dir: &Path, context: &str) -> Exec {
        Exec::with_opts(client, audit_dir, context, opts())
    }

    fn with_opts(client: kube::Client, audit_dir: &Path, context: &str, opts: ExecOptions) -> Exec {
        let (out, rx) = mpsc::channel(1024);
        let audit = Audit::new(audit_dir, context);
        Exec { ex: Arc::new(KubeExec { client, audit, opts, out }), rx, next: 1 }
    }

    /// Starts `plan`; returns its id and the cancel switch.
    fn start(&mut self, plan: Plan) -> (u64, watch::Sender<bool>) {
        let id = self.next;
        self.next += 1;
        let (tx, cancel) = watch::channel(false);
        let ex = self.ex.clone();
        tokio::spawn(async move { fabrik::ops::kube::execute(&ex, id, plan, cancel).await });
        (id, tx)
    }

    /// Starts `plan` on a task of its own; returns its id and the task, for a test to abort
    /// it as a SIGKILL would end it (nothing more is written or sent).
    fn start_task(&mut self, plan: Plan) -> (u64, tokio::task::JoinHandle<()>) {
        let id = self.next;
        self.next += 1;
        let (_tx, cancel) = watch::channel(false);
        let ex = self.ex.clone();
        let task = tokio::spawn(async move {
            let _keep = _tx;
            fabrik::ops::kube::execute(&ex, id, plan, cancel).await;
        });
        (id, task)
    }

    /// Progress of `id` until `stop` holds on one of them (that one included).
    async fn until(
        &mut self,
        id: u64,
        what: &str,
        timeout: Duration,
        stop: impl Fn(&OpProgress) -> bool,
    ) -> Vec<OpProgress> {
        let deadline = Instant::now() + timeout;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.rx.recv()).await {
                Ok(Some(batch)) => {
                    for d in batch {
                        if let Delta::Op(p) = d
                            && p.id() == id
                        {
                            let done = stop(&p);
                            seen.push(p);
                            if done {
                                return seen;
                            }
                        }
                    }
                }
                Ok(None) => panic!("{what}: the executor's channel closed; progress so far: {seen:#?}"),
                Err(_) => panic!("{what}: not seen within {timeout:?}; progress so far: {seen:#?}"),
            }
        }
    }

    /// Runs `plan` to its outcome.
    async fn run(&mut self, plan: Plan, timeout: Duration) -> (Result<String, String>, Vec<OpProgress>) {
        let what = plan.title.clone();
        let (id, _cancel) = self.start(plan);
        let seen = self.until(id, &what, timeout, |p| matches!(p, OpProgress::Finished { .. })).await;
        match seen.last() {
            Some(OpProgress::Finished { outcome, .. }) => (outcome.clone(), seen),
            _ => unreachable!("until returns on Finished"),
        }
    }
}

fn steps(seen: &[OpProgress]) -> Vec<String> {
    seen.iter()
        .filter_map(|p| match p {
            OpProgress::Step { step, .. } => Some(step.clone()),
            _ => None,
        })
        .collect()
}

async fn fleet(client: &kube::Client) -> Fleet {
    fabrik::live::load_fleet(client.clone(), KubeFeedConfig::default(), Thresholds::default(), Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("the cockpit's model: {e}"))
}

fn plan(f: &Fleet, req: OpRequest) -> Plan {
    fabrik::ops::plan(f, &req).unwrap_or_else(|e| panic!("plan {req:?}: {e}"))
}

/// A whole-node reslice plan whose mig-manager config is `config` (a name the planner would
/// not produce, to drive mig-manager into its stuck and failed states).
fn reslice_to(f: &Fleet, node: &str, config: &str) -> Plan {
    let mut p = plan(f, OpRequest::Reslice { node: node.into(), gpus: vec![], layout: "all-balanced".into() });
    if let PlanDetail::Reslice(r) = &mut p.detail {
        r.config_name = config.into();
        r.custom_config = None;
    }
    p
}

async fn unschedulable(c: &kube::Client, node: &str) -> bool {
    Api::<Node>::all(c.clone()).get(node).await.ok().and_then(|n| n.spec).and_then(|s| s.unschedulable).unwrap_or(false)
}

/// Running, Ready pods of app `app` on `node`: (name, uid).
async fn running(c: &kube::Client, app: &str, node: &str) -> Vec<(String, String)> {
    let pods = Api::<Pod>::namespaced(c.clone(), NS)
        .list(&ListParams::default().labels(&format!("app={app}")).fields(&format!("spec.nodeName={node}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    pods.into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .map(|p| (p.metadata.name.unwrap_or_default(), p.metadata.uid.unwrap_or_default()))
        .collect()
}

fn audit_records(dir: &Path) -> Vec<audit::Record> {
    audit::read(&dir.join(audit::FILE_NAME)).expect("read the audit log").0
}

/// The phases recorded for the operation whose records name `target` and `kind`, last op first.
fn phases(dir: &Path, kind: &str, target: &str) -> Vec<Phase> {
    let recs = audit_records(dir);
    let Some(op) = recs.iter().rev().find(|r| r.kind == kind && r.target == target).map(|r| r.op.clone()) else {
        return Vec::new();
    };
    recs.iter().filter(|r| r.op == op).map(|r| r.phase).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_run_on_the_real_control_plane_with_preview_rbac_and_audit() {
    let dir = std::env::temp_dir().join(format!("fabrik-ops-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let audit_dir = dir.join("data");
    let (_cp, kubeconfig) = control_plane(&dir);
    // mig-manager reacts 1.5 s after a label change: until then the state label still says
    // what the previous config left (issue 12, item 6).
    let _sim = common::sim(
        &kubeconfig,
        &dir,
        &["--nodes", "4", "--seed", "11", "--dra-every", "0", "--mig-seconds", "2", "--mig-delay-ms", "1500"],
    );
    let conn = fabrik::cluster::connect(Some(&kubeconfig), None).await.unwrap_or_else(|e| panic!("{e}"));
    let c = conn.client.clone();
    let pp = PostParams::default();

    let names = common::sim_nodes(&c).await;
    assert_eq!(names.len(), 4, "{names:?}");
    let (drain_node, reslice_node, stuck_node, failed_node) =
        (names[0].clone(), names[1].clone(), names[2].clone(), names[3].clone());

    // ---------- a tenant's workload on the drain node ----------
    Api::<k8s_openapi::api::core::v1::Namespace>::all(c.clone())
        .create(&pp, &obj(json!({"metadata": {"name": NS, "labels": {"fabrik.io/tenant": "e2e"}}})))
        .await
        .expect("create the namespace");
    let gpu = json!({"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}});
    let deploy = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "trainer", "namespace": NS},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "trainer"}},
            "template": {"metadata": {"labels": {"app": "trainer"}},
                // No blanket toleration: that would tolerate the cordon's unschedulable taint too.
                "spec": {"nodeSelector": {"kubernetes.io/hostname": drain_node},
                    "containers": [{"name": "c", "image": "busybox", "resources": gpu}]}}}});
    let ds = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "exporter", "namespace": NS},
        "spec": {"selector": {"matchLabels": {"app": "exporter"}},
            "template": {"metadata": {"labels": {"app": "exporter"}},
                "spec": {"tolerations": [{"operator": "Exists"}], "containers": [{"name": "c", "image": "busybox"}]}}}});
    let dyn_api = |kind: &str, plural: &str| {
        let gvk = kube::api::GroupVersionKind::gvk("apps", "v1", kind);
        Api::<DynamicObject>::namespaced_with(
            c.clone(),
            NS,
            &kube::api::ApiResource::from_gvk_with_plural(&gvk, plural),
        )
    };
    // The namespace's default ServiceAccount comes from the controller manager: retry.
    eventually("create the Deployment", Duration::from_secs(30), || {
        let api = dyn_api("Deployment", "deployments");
        let d: DynamicObject = obj(deploy.clone());
        async move { api.create(&PostParams::default(), &d).await.map(|_| ()).map_err(|e| e.to_string()) }
    })
    .await;
    dyn_api("DaemonSet", "daemonsets").create(&pp, &obj(ds)).await.expect("create the DaemonSet");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(c.clone(), NS);
    pdbs.create(
        &pp,
        &obj(json!({"metadata": {"name": "trainer-pdb"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "trainer"}}}})),
    )
    .await
    .expect("create the PDB");
    let trainers = eventually("two trainer pods running on the drain node", Duration::from_secs(90), || {
        let (c, n) = (c.clone(), drain_node.clone());
        async move {
            let r = running(&c, "trainer", &n).await;
            let ds = running(&c, "exporter", &n).await;
            if r.len() == 2 && ds.len() == 1 {
                Ok(r)
            } else {
                Err(format!("{} trainers, {} exporters", r.len(), ds.len()))
            }
        }
    })
    .await;
    eventually("the PDB's status (2 healthy, 0 disruptions allowed)", Duration::from_secs(60), || {
        let pdbs = pdbs.clone();
        async move {
            let s = pdbs.get("trainer-pdb").await.map_err(|e| e.to_string())?.status;
            match s {
                Some(s) if s.current_healthy == 2 && s.disruptions_allowed == 0 => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;

    // ---------- drain: what kubectl would evict, a PDB that says 429, then allows ----------
    let f = fleet(&c).await;
    let p = plan(&f, OpRequest::Drain { node: drain_node.clone(), force: false });
    assert!(p.can_execute(), "{:?}", p.blockers);
    let PlanDetail::Drain(d) = &p.detail else { panic!("a drain plan") };
    let planned: BTreeSet<String> = d.to_evict().map(|p| format!("{}/{}", p.namespace, p.name)).collect();
    let skipped: Vec<String> =
        d.pods.iter().filter(|p| matches!(p.action, PodAction::Skip(_))).map(|p| p.name.clone()).collect();
    let dry = kubectl(&kubeconfig, &["drain", &drain_node, "--ignore-daemonsets", "--dry-run=client"]);
    let kubectl_evicts: BTreeSet<String> = dry
        .lines()
        .filter_map(|l| l.split("evicting pod ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect();
    assert_eq!(planned, kubectl_evicts, "the preview evicts what kubectl drain would:\n{dry}");
    assert_eq!(planned.len(), 2, "{planned:?}");
    assert!(skipped.iter().any(|n| n.starts_with("exporter-")), "the DaemonSet pod is skipped: {:?}", d.pods);
    assert!(p.warnings.iter().any(|w| w.contains("trainer-pdb")), "the preview names the PDB: {:?}", p.warnings);
    assert!(!unschedulable(&c, &drain_node).await, "a preview changes nothing");

    let mut admin = Exec::new(c.clone(), &audit_dir, "admin");
    let (id, _cancel) = admin.start(p);
    let blocked = admin
        .until(
            id,
            "the PDB blocking the drain",
            Duration::from_secs(60),
            |p| matches!(p, OpProgress::Blocked { reason, .. } if reason.contains("429")),
        )
        .await;
    let Some(OpProgress::Blocked { reason, .. }) = blocked.last() else { unreachable!() };
    assert!(
        reason
            .contains(&format!("PodDisruptionBudget {NS}/trainer-pdb allows 0 disruptions now (2 healthy, 2 needed)")),
        "{reason}"
    );
    assert!(unschedulable(&c, &drain_node).await, "cordoned before the first eviction");
    assert_eq!(running(&c, "trainer", &drain_node).await.len(), 2, "nothing was evicted while the PDB said no");
    pdbs.patch("trainer-pdb", &PatchParams::default(), &Patch::Merge(json!({"spec": {"minAvailable": 0}})))
        .await
        .expect("relax the PDB");
    let seen = admin
        .until(id, "the drain's outcome", Duration::from_secs(90), |p| matches!(p, OpProgress::Finished { .. }))
        .await;
    let Some(OpProgress::Finished { outcome, .. }) = seen.last() else { unreachable!() };
    assert!(outcome.as_ref().is_ok_and(|m| m.contains("2 pods evicted")), "{outcome:?}");
    let evicted: BTreeSet<String> =
        steps(&seen).iter().filter_map(|s| s.strip_prefix("evicted ").map(str::to_string)).collect();
    assert_eq!(evicted, kubectl_evicts, "evicted exactly what kubectl would");
    let pods_api: Api<Pod> = Api::namespaced(c.clone(), NS);
    for (name, uid) in &trainers {
        let now = pods_api.get_opt(name).await.expect("read pod");
        assert!(now.is_none_or(|p| p.metadata.uid.as_deref() != Some(uid)), "{name} is gone");
    }
    assert_eq!(running(&c, "exporter", &drain_node).await.len(), 1, "the DaemonSet pod stays");
    let ph = phases(&audit_dir, "drain", &drain_node);
    assert_eq!(ph.first(), Some(&Phase::Confirmed), "{ph:?}");
    assert!(ph.contains(&Phase::Blocked) && ph.contains(&Phase::Step), "{ph:?}");
    assert_eq!(ph.last(), Some(&Phase::Succeeded), "{ph:?}");

    // Pods already terminating hold the drain until they are gone (the node stays cordoned).
    drain_waits_for_terminating_pods(&c, &kubeconfig, &audit_dir, &mut admin, &drain_node).await;

    // Uncordon through the executor: the ReplicaSet's replacements come back to the node.
    let f = fleet(&c).await;
    let (outcome, _) =
        admin.run(plan(&f, OpRequest::Uncordon { node: drain_node.clone() }), Duration::from_secs(30)).await;
    assert!(outcome.is_ok(), "{outcome:?}");
    assert!(!unschedulable(&c, &drain_node).await);

    // ---------- reslice one GPU: a config added to mig-parted's ConfigMap, then success ----------
    Api::<k8s_openapi::api::core::v1::Namespace>::all(c.clone())
        .create(&pp, &obj(json!({"metadata": {"name": "gpu-operator"}})))
        .await
        .expect("create gpu-operator");
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "gpu-operator");
    cms.create(
        &pp,
        &obj(json!({"metadata": {"name": "default-mig-parted-config"}, "data": {"config.yaml":
            "version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n"}})),
    )
    .await
    .expect("create the mig-parted ConfigMap");
    let f = fleet(&c).await;
    let p = plan(&f, OpRequest::Reslice { node: reslice_node.clone(), gpus: vec![0], layout: "all-balanced".into() });
    assert!(p.can_execute(), "{:?}", p.blockers);
    let PlanDetail::Reslice(r) = &p.detail else { panic!("a reslice plan") };
    let (config, expected) = (r.config_name.clone(), r.capacity_after.clone());
    assert!(r.custom_config.is_some(), "one GPU of eight needs a config of its own");
    let (outcome, seen) = admin.run(p, Duration::from_secs(90)).await;
    assert!(outcome.is_ok(), "{outcome:?}\n{seen:#?}");
    let cm = cms.get("default-mig-parted-config").await.expect("read the ConfigMap");
    let text = cm.data.and_then(|d| d.get("config.yaml").cloned()).unwrap_or_default();
    assert!(text.contains(&format!("{config}:")) && text.contains("all-disabled:"), "added, nothing lost:\n{text}");
    let node: Value =
        serde_json::from_str(&kubectl(&kubeconfig, &["get", "node", &reslice_node, "-o", "json"])).expect("node json");
    assert_eq!(node["metadata"]["labels"]["nvidia.com/mig.config"], json!(config));
    assert_eq!(node["metadata"]["labels"]["nvidia.com/mig.config.state"], json!("success"));
    for (res, n) in expected.iter().filter(|(_, n)| *n > 0) {
        assert_eq!(
            node["status"]["capacity"][res.as_str()].as_str().and_then(|v| v.parse::<i64>().ok()),
            Some(*n),
            "kubectl sees {res}={n} after the reslice: {}",
            node["status"]["capacity"]
        );
    }
    assert!(!unschedulable(&c, &reslice_node).await, "uncordoned on success");
    assert_eq!(phases(&audit_dir, "reslice", &reslice_node).last(), Some(&Phase::Succeeded));

    // ---------- issue 12: mig-manager's answer, an interrupted reslice, transient API errors ----------
    // Each phase runs to its end and reports, so one run shows every phase that fails.
    let mut failed = Vec::new();
    let r = tokio::spawn(reslice_waits_for_mig_managers_answer(
        c.clone(),
        kubeconfig.clone(),
        audit_dir.clone(),
        reslice_node.clone(),
    ))
    .await;
    failed.extend(phase_failure("a reslice waits for mig-manager's answer", r));
    let r = tokio::spawn(interrupted_reslice_restores_the_cordon(
        c.clone(),
        kubeconfig.clone(),
        audit_dir.clone(),
        reslice_node.clone(),
    ))
    .await;
    failed.extend(phase_failure("an interrupted reslice, run again, uncordons", r));
    let r = tokio::spawn(transient_errors_are_retried(c.clone(), audit_dir.clone(), reslice_node.clone())).await;
    failed.extend(phase_failure("transient API errors during the mig-manager wait are retried", r));
    assert!(failed.is_empty(), "{} phase(s) failed:\n{}", failed.len(), failed.join("\n\n"));

    // ---------- a reslice mig-manager never finishes: flagged as stuck, then cancelled ----------
    // `fabrik sim`'s mig-manager accepts this name and stays pending for good.
    let p = reslice_to(&fleet(&c).await, &stuck_node, "fabrik-wedged");
    let (id, cancel) = admin.start(p);
    let seen = admin
        .until(
            id,
            "the stuck flag",
            Duration::from_secs(60),
            |p| matches!(p, OpProgress::Blocked { reason, .. } if reason.starts_with("stuck?")),
        )
        .await;
    let Some(OpProgress::Blocked { reason, .. }) = seen.last() else { unreachable!() };
    assert!(reason.contains("nvidia.com/mig.config.state=pending"), "{reason}");
    assert!(
        reason.contains("nvidia.com/gpu.deploy.device-plugin=paused-for-mig-change"),
        "paused clients shown: {reason}"
    );
    cancel.send(true).expect("cancel");
    admin.until(id, "the cancellation", Duration::from_secs(30), |p| matches!(p, OpProgress::Cancelled { .. })).await;
    assert!(unschedulable(&c, &stuck_node).await, "a cancelled reslice leaves the cordon for the person to judge");
    assert_eq!(phases(&audit_dir, "reslice", &stuck_node).last(), Some(&Phase::Cancelled));

    // ---------- a reslice mig-manager refuses: `failed`, reported with what it left ----------
    // A config name no GPU of this model can hold: mig-manager answers `failed`.
    let p = reslice_to(&fleet(&c).await, &failed_node, "all-9g.999gb");
    let (outcome, _) = admin.run(p, Duration::from_secs(60)).await;
    let e = outcome.expect_err("mig-manager failed the config");
    assert!(e.contains("nvidia.com/mig.config.state=failed for all-9g.999gb") && e.contains("stays cordoned"), "{e}");
    assert!(e.contains("left behind: capacity"), "what mig-manager left is named: {e}");
    let node: Value =
        serde_json::from_str(&kubectl(&kubeconfig, &["get", "node", &failed_node, "-o", "json"])).expect("node json");
    assert_eq!(node["metadata"]["labels"]["nvidia.com/mig.config.state"], json!("failed"));
    assert!(unschedulable(&c, &failed_node).await, "a failed reslice leaves the node cordoned for a person to look");
    assert_eq!(phases(&audit_dir, "reslice", &failed_node).last(), Some(&Phase::Failed));

    // ---------- quotas: a Quantity checked, an edit that lands, a concurrent edit detected ----------
    let quotas: Api<ResourceQuota> = Api::namespaced(c.clone(), NS);
    quotas
        .create(
            &pp,
            &obj(json!({"metadata": {"name": "gpu-quota"}, "spec": {"hard": {"requests.nvidia.com/gpu": "8"}}})),
        )
        .await
        .expect("create the quota");
    let key = QuotaKey {
        source: QuotaSourceSpec::ResourceQuota { namespace: NS.into(), name: "gpu-quota".into() },
        resource: "requests.nvidia.com/gpu".into(),
        field: Default::default(),
    };
    let set = |v: &str| OpRequest::SetQuota { tenant: "e2e".into(), quota: key.clone(), value: v.into() };
    let hard = |q: &Api<ResourceQuota>| {
        let q = q.clone();
        async move {
            q.get("gpu-quota")
                .await
                .ok()
                .and_then(|q| q.spec?.hard?.get("requests.nvidia.com/gpu").map(|v| v.0.clone()))
        }
    };
    let f = eventually("the quota in the model", Duration::from_secs(30), || {
        let c = c.clone();
        let req = set("10");
        async move {
            let f = fleet(&c).await;
            fabrik::ops::plan(&f, &req).map(|_| f).map_err(|e| e.to_string())
        }
    })
    .await;
    for bad in ["ten", "-1", "1.5", "10Q"] {
        let e = fabrik::ops::plan(&f, &set(bad)).map(|p| p.blockers).err().map(|e| e.to_string());
        assert!(e.is_some(), "{bad:?} is refused before anything is sent");
    }
    let (outcome, _) = admin.run(plan(&f, set("10")), Duration::from_secs(30)).await;
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(hard(&quotas).await.as_deref(), Some("10"), "the edit landed");
    let f = fleet(&c).await;
    let p = plan(&f, set("12"));
    // Someone else edits the same quota between the preview and the confirmation.
    kubectl(
        &kubeconfig,
        &[
            "-n",
            NS,
            "patch",
            "resourcequota",
            "gpu-quota",
            "--type=merge",
            "-p",
            r#"{"spec":{"hard":{"requests.nvidia.com/gpu":"9"}}}"#,
        ],
    );
    let (outcome, _) = admin.run(p, Duration::from_secs(30)).await;
    let e = outcome.expect_err("a concurrent edit is a conflict");
    assert!(e.contains("conflict") && e.contains("is now 9") && e.contains("Nothing was overwritten"), "{e}");
    assert_eq!(hard(&quotas).await.as_deref(), Some("9"), "the other edit stands");
    assert_eq!(phases(&audit_dir, "set-quota", "e2e requests.nvidia.com/gpu").last(), Some(&Phase::Failed));

    // ---------- Kueue: a ClusterQueue's borrowing limit set, a concurrent edit detected ----------
    // The ClusterQueue CRD as Kueue serves it (v1beta1), with an open schema: enough for
    // the API server to store, version and watch ClusterQueues as it does for Kueue.
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    Api::<CustomResourceDefinition>::all(c.clone())
        .create(
            &pp,
            &obj(json!({"metadata": {"name": "clusterqueues.kueue.x-k8s.io"},
                "spec": {"group": "kueue.x-k8s.io", "scope": "Cluster",
                    "names": {"plural": "clusterqueues", "singular": "clusterqueue", "kind": "ClusterQueue", "listKind": "ClusterQueueList"},
                    "versions": [{"name": "v1beta1", "served": true, "storage": true, "subresources": {"status": {}},
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})),
        )
        .await
        .expect("create the ClusterQueue CRD");
    // Kueue's Workload CRD (namespaced), so `kubectl auth can-i patch workloads.kueue.x-k8s.io`
    // can resolve the resource the Workload operations need (the rbac phase).
    Api::<CustomResourceDefinition>::all(c.clone())
        .create(
            &pp,
            &obj(json!({"metadata": {"name": "workloads.kueue.x-k8s.io"},
                "spec": {"group": "kueue.x-k8s.io", "scope": "Namespaced",
                    "names": {"plural": "workloads", "singular": "workload", "kind": "Workload", "listKind": "WorkloadList"},
                    "versions": [{"name": "v1beta1", "served": true, "storage": true, "subresources": {"status": {}},
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})),
        )
        .await
        .expect("create the Workload CRD");
    let cq = json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq-e2e"},
        "spec": {"cohort": "all", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "h100",
            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8, "lendingLimit": 2}]}]}]}});
    let cq_ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta1", "ClusterQueue"),
        "clusterqueues",
    );
    eventually("create a ClusterQueue once the CRD is established", Duration::from_secs(30), || {
        let api = Api::<DynamicObject>::all_with(c.clone(), &cq_ar);
        let o: DynamicObject = obj(cq.clone());
        async move { api.create(&PostParams::default(), &o).await.map(|_| ()).map_err(|e| e.to_string()) }
    })
    .await;
    let cq_key = |field: QuotaField| QuotaKey {
        source: QuotaSourceSpec::ClusterQueue { queue: "cq-e2e".into(), flavor: "h100".into() },
        resource: "nvidia.com/gpu".into(),
        field,
    };
    let cq_set = |field: QuotaField, v: &str| OpRequest::SetQuota {
        tenant: "cq-e2e".into(),
        quota: cq_key(field),
        value: v.into(),
    };
    let f = eventually("the ClusterQueue's quota in the model", Duration::from_secs(30), || {
        let c = c.clone();
        let req = cq_set(QuotaField::BorrowingLimit, "4");
        async move {
            let f = fleet(&c).await;
            fabrik::ops::plan(&f, &req).map(|_| f).map_err(|e| e.to_string())
        }
    })
    .await;
    let lend_too_much = plan(&f, cq_set(QuotaField::LendingLimit, "9"));
    assert!(
        !lend_too_much.can_execute(),
        "lending more than the nominal quota is blocked: {:?}",
        lend_too_much.blockers
    );
    let (outcome, _) = admin.run(plan(&f, cq_set(QuotaField::BorrowingLimit, "4")), Duration::from_secs(30)).await;
    assert!(
        outcome.as_ref().is_ok_and(|m| m.contains("borrowingLimit of cq-e2e (h100) is 4 (was unset)")),
        "{outcome:?}"
    );
    let slot = |kc: &Path| -> Value {
        let o: Value =
            serde_json::from_str(&kubectl(kc, &["get", "clusterqueue", "cq-e2e", "-o", "json"])).expect("json");
        o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].clone()
    };
    let r = slot(&kubeconfig);
    assert_eq!(r["borrowingLimit"], json!("4"), "{r}");
    assert_eq!((r["nominalQuota"].clone(), r["lendingLimit"].clone()), (json!(8), json!(2)), "the rest stays: {r}");
    let f = fleet(&c).await;
    let p = plan(&f, cq_set(QuotaField::Hard, "10"));
    kubectl(
        &kubeconfig,
        &[
            "patch",
            "clusterqueue",
            "cq-e2e",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota","value":"6"}]"#,
        ],
    );
    let (outcome, _) = admin.run(p, Duration::from_secs(30)).await;
    let e = outcome.expect_err("a concurrent ClusterQueue edit is a conflict");
    assert!(e.contains("conflict") && e.contains("is now 6"), "{e}");
    assert_eq!(slot(&kubeconfig)["nominalQuota"], json!("6"), "the other edit stands");

    // ---------- a node that is gone by the time the person confirms ----------
    let nodes: Api<Node> = Api::all(c.clone());
    nodes.create(&pp, &obj(json!({"metadata": {"name": "e2e-gone"}}))).await.expect("create a node");
    let f = eventually("the node in the model", Duration::from_secs(30), || {
        let c = c.clone();
        async move {
            let f = fleet(&c).await;
            if f.node_by_name("e2e-gone").is_some() { Ok(f) } else { Err("not listed yet".to_string()) }
        }
    })
    .await;
    let p = plan(&f, OpRequest::Drain { node: "e2e-gone".into(), force: false });
    nodes.delete("e2e-gone", &DeleteParams::default()).await.expect("delete the node");
    let (outcome, _) = admin.run(p, Duration::from_secs(30)).await;
    let e = outcome.expect_err("a drain of a node that is gone fails");
    assert!(e.contains("e2e-gone is gone from the cluster") && e.contains("nothing was changed"), "{e}");
    assert!(nodes.get_opt("e2e-gone").await.expect("read").is_none(), "nothing was recreated");

    // ---------- the tenant identity may not drain, and is told why, before anything is sent ----------
    let tenant = fabrik::cluster::connect(Some(&kubeconfig), Some("tenant")).await.unwrap_or_else(|e| panic!("{e}"));
    let access = fabrik::ops::access::check(&tenant.client).await.expect("access review");
    assert_eq!(access.user, "tenant-a");
    let why = access.denied("drain").expect("the tenant may not drain");
    assert!(why.contains("patch nodes") && why.contains("kubectl auth can-i patch nodes"), "{why}");
    assert!(access.denied("cordon").is_some() && access.denied("reslice").is_some());
    let f = fleet(&c).await;
    let mut as_tenant = Exec::new(tenant.client.clone(), &audit_dir, "tenant");
    let (outcome, _) = as_tenant
        .run(plan(&f, OpRequest::Drain { node: drain_node.clone(), force: false }), Duration::from_secs(30))
        .await;
    let e = outcome.expect_err("the tenant's drain is refused");
    assert!(e.contains("may not patch nodes") && e.contains("nothing was sent"), "{e}");
    assert!(!unschedulable(&c, &drain_node).await, "the tenant changed nothing");
    assert_eq!(phases(&audit_dir, "drain", &drain_node).last(), Some(&Phase::Refused));

    // ---------- the real binary in tmux ----------
    eventually("the trainers back on the drain node", Duration::from_secs(60), || {
        let (c, n) = (c.clone(), drain_node.clone());
        async move { if running(&c, "trainer", &n).await.len() == 2 { Ok(()) } else { Err("not yet".to_string()) } }
    })
    .await;
    let tui_data = dir.join("tui-data");
    readonly_sends_nothing(&kubeconfig, &tui_data, &drain_node);
    assert!(!unschedulable(&c, &drain_node).await, "--readonly changed nothing");
    tenant_is_told_why(&kubeconfig, &tui_data, &drain_node);
    drain_from_the_keyboard(&kubeconfig, &tui_data, &drain_node);
    assert!(unschedulable(&c, &drain_node).await, "the keyboard drain cordoned the node");
    let left = running(&c, "trainer", &drain_node).await;
    assert!(
        left.is_empty(),
        "and evicted the trainers, but {left:?} run there; the audit log:\n{}",
        audit_records(&tui_data).iter().map(|r| format!("{:?} {}", r.phase, r.message)).collect::<Vec<_>>().join("\n")
    );
    let ph = phases(&tui_data, "drain", &drain_node);
    assert_eq!(ph.first(), Some(&Phase::Planned), "the preview is recorded: {ph:?}");
    assert!(ph.contains(&Phase::Confirmed), "{ph:?}");
    assert_eq!(ph.last(), Some(&Phase::Succeeded), "{ph:?}");
    let recs = audit_records(&tui_data);
    assert!(recs.iter().all(|r| r.context == "admin"), "only the admin's drain is recorded: {recs:#?}");
    assert!(recs.iter().all(|r| r.user == "admin"), "the API server's name for the user is recorded: {recs:#?}");
    let out = Command::new(BIN).arg("audit").env("FABRIK_DATA_DIR", &tui_data).output().expect("fabrik audit");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains(&drain_node))
        .unwrap_or_else(|| panic!("fabrik audit lists the drain:\n{text}"));
    assert!(line.contains("drain") && line.contains("succeeded") && line.contains("admin"), "{line}");

    // ---------- an SSH hang-up mid-drain is recorded as interrupted, at its step ----------
    trainers_back_and_held(&c, &kubeconfig, &drain_node).await;
    let hup_data = dir.join("hup-data");
    hang_up_mid_drain(&kubeconfig, &hup_data, &drain_node);
    let recs = eventually("the interruption in the audit log", Duration::from_secs(20), || {
        let recs = audit_records(&hup_data);
        async move {
            if recs.iter().any(|r| r.phase == Phase::Interrupted) {
                Ok(recs)
            } else {
                Err(recs.iter().map(|r| format!("{:?} {}", r.phase, r.message)).collect::<Vec<_>>().join("\n"))
            }
        }
    })
    .await;
    let last = recs.iter().rfind(|r| r.kind == "drain").expect("drain records");
    assert_eq!(last.phase, Phase::Interrupted, "the hang-up is the drain's last record: {recs:#?}");
    assert!(
        last.message.contains("SIGHUP") && last.message.contains("waiting: eviction refused (429)"),
        "it says where the drain was and why it stopped: {}",
        last.message
    );
    let out = Command::new(BIN).arg("audit").env("FABRIK_DATA_DIR", &hup_data).output().expect("fabrik audit");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains(&drain_node)).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("INTERRUPTED") && line.contains("SIGHUP"), "{line}");
    assert!(unschedulable(&c, &drain_node).await, "what was done stays: the node is still cordoned");
    assert_eq!(running(&c, "trainer", &drain_node).await.len(), 2, "the PDB held both trainers");

    // ---------- item 7: an eviction answered 409 is not "already gone" ----------
    pdbs.patch("trainer-pdb", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"minAvailable": 0}})))
        .await
        .expect("let the trainers go");
    conflict_on_eviction_is_not_gone(&c, &audit_dir, &drain_node).await;

    // ---------- issue 14 item 1: the cockpit killed mid-drain and mid-reslice ----------
    crash::killed_mid_drain(&c, &kubeconfig, &dir, &drain_node).await;
    crash::killed_mid_reslice(&c, &kubeconfig, &audit_dir, &reslice_node).await;

    // ---------- issue 14 item 5: the shipped roles, applied; least privilege proven ----------
    rbac::least_privilege(&c, &kubeconfig, &audit_dir, &drain_node, &reslice_node).await;

    // ---------- issue 14 item 1: etcd paused under the API server ----------
    etcd::etcd_paused(&c, &kubeconfig, _cp.child.id(), &audit_dir, &reslice_node).await;

    // ---------- issue 14 item 1: the API server restarted mid-drain ----------
    let _cp = restart::restarted_mid_drain(&c, &kubeconfig, &dir, &audit_dir, _cp, &drain_node).await;
}

/// Uncordons `node` (kubectl) and holds its trainers with their PDB (minAvailable 2) until
/// both run there again and the budget allows no disruption.
async fn trainers_back_and_held(c: &kube::Client, kubeconfig: &Path, node: &str) {
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(c.clone(), NS);
    kubectl(kubeconfig, &["uncordon", node]);
    pdbs.patch("trainer-pdb", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"minAvailable": 2}})))
        .await
        .expect("hold the trainers again");
    eventually("the trainers back, held by their PDB", Duration::from_secs(90), || {
        let (c, n, pdbs) = (c.clone(), node.to_string(), pdbs.clone());
        async move {
            let r = running(&c, "trainer", &n).await.len();
            let s = pdbs.get("trainer-pdb").await.map_err(|e| e.to_string())?.status;
            match s {
                Some(s) if r == 2 && s.current_healthy == 2 && s.disruptions_allowed == 0 => Ok(()),
                other => Err(format!("{r} trainers, {other:?}")),
            }
        }
    })
    .await;
}

/// Item 7: the first eviction of a trainer is answered 409 (injected at a proxy, with the pod
/// still there under the same uid). The drain must re-read the pod, retry, and end only when
/// both trainers are really gone — not report the first as "already gone" while it runs.
async fn conflict_on_eviction_is_not_gone(c: &kube::Client, audit_dir: &Path, node: &str) {
    use fault_proxy::Fault;
    let trainers = running(c, "trainer", node).await;
    assert_eq!(trainers.len(), 2, "{trainers:?}");
    let pods: Api<Pod> = Api::namespaced(c.clone(), NS);
    let uids = trainers;
    let (url, faults) = fault_proxy::start(c.clone()).await;
    let (first, _) = &uids[0];
    faults.arm(http::Method::POST, &format!("/api/v1/namespaces/{NS}/pods/{first}/eviction"), &[Fault::Conflict]);
    let f = fleet(c).await;
    let p = plan(&f, OpRequest::Drain { node: node.to_string(), force: false });
    let mut ex = Exec::new(fault_proxy::client(&url), audit_dir, "admin");
    let (outcome, seen) = ex.run(p, Duration::from_secs(90)).await;
    assert!(outcome.is_ok(), "{outcome:?}\n{seen:#?}");
    assert_eq!(faults.injected().len(), 1, "the conflict was met: {:?}", faults.injected());
    let st = steps(&seen);
    assert!(!st.iter().any(|s| s.contains(&format!("{first} was already gone"))), "a 409 is not gone: {st:#?}");
    assert!(st.iter().any(|s| s == &format!("evicted {NS}/{first}")), "it was evicted after all: {st:#?}");
    for (name, uid) in &uids {
        let now = pods.get_opt(name).await.expect("read the pod");
        assert!(
            now.as_ref().and_then(|p| p.metadata.uid.as_deref()) != Some(uid.as_str()),
            "{name} is gone when the drain says drained: {:?}",
            now.map(|p| p.status.and_then(|s| s.phase))
        );
    }
}

/// Starts a drain the PDB holds back, then closes the terminal under it as an SSH hang-up
/// does (tmux kill-session: SIGHUP to the pane's processes).
fn hang_up_mid_drain(kubeconfig: &Path, data: &Path, node: &str) {
    let t = drain_blocked_in_tmux(kubeconfig, data, node);
    t.ok(&["kill-session", "-t", "fabrik"]);
}

/// The real cockpit in tmux, as the admin, with a drain of `node` confirmed from the keyboard
/// and shown blocked by the PDB on the operations view.
fn drain_blocked_in_tmux(kubeconfig: &Path, data: &Path, node: &str) -> Tmux {
    let t = Tmux::start();
    cockpit(&t, kubeconfig, data, &[]);
    t.wait_screen_for("the cockpit, live", SLOW, |s| s.contains("[live]") && s.contains("as admin"));
    select_node(&t, node);
    t.keys(&["D"]);
    t.wait_screen_for("the drain preview", SLOW, |s| s.contains(&format!("Preview: Drain node {node}")));
    t.keys(&["y"]);
    t.keys(&[":"]);
    t.literal("ops");
    t.keys(&["Enter"]);
    let title = format!("Drain node {node}");
    t.wait_screen_for("the drain blocked by the PDB", SLOW, |s| {
        s.lines().any(|l| l.contains(&title) && l.contains("blocked"))
    });
    t
}

/// Progress of `id` for `how_long` (whatever it is), for checking what does *not* happen.
async fn progress_for(ex: &mut Exec, id: u64, how_long: Duration) -> Vec<OpProgress> {
    let deadline = Instant::now() + how_long;
    let mut seen = Vec::new();
    while let Ok(Some(batch)) =
        tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), ex.rx.recv()).await
    {
        seen.extend(batch.into_iter().filter_map(|d| match d {
            Delta::Op(p) if p.id() == id => Some(p),
            _ => None,
        }));
    }
    seen
}

/// A bare pod bound to `node` (no scheduler: a cordon does not keep it off) asking for a GPU.
fn bare_pod(name: &str, node: &str, grace: i64, meta: Value) -> Pod {
    let mut metadata = json!({"name": name, "namespace": NS});
    if let (Some(m), Some(extra)) = (metadata.as_object_mut(), meta.as_object()) {
        m.extend(extra.clone());
    }
    obj(json!({"metadata": metadata,
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": grace,
            "containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}))
}

/// The pod's `status.phase` and whether it has a deletionTimestamp, as the API has it now.
async fn pod_state(pods: &Api<Pod>, name: &str) -> Option<(String, bool)> {
    let p = pods.get_opt(name).await.expect("read the pod")?;
    let phase = p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
    Some((phase, p.metadata.deletion_timestamp.is_some()))
}

async fn running_pod(pods: &Api<Pod>, name: &str) {
    eventually(&format!("{name} running"), Duration::from_secs(60), || async move {
        match pod_state(pods, name).await {
            Some((phase, _)) if phase == "Running" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

/// Issue 12, item 5, on `node` (already drained and cordoned): a pod someone deleted before
/// the drain, held by the finalizer `example.com/hold`, is listed as terminating, holds the
/// drain (a short timeout names it and why; a normal drain stays blocked) until the test
/// removes the finalizer; a pod whose containers take their whole grace period is waited
/// for while it still runs.
async fn drain_waits_for_terminating_pods(
    c: &kube::Client,
    kubeconfig: &Path,
    audit_dir: &Path,
    admin: &mut Exec,
    node: &str,
) {
    let pods: Api<Pod> = Api::namespaced(c.clone(), NS);
    let pp = PostParams::default();
    let held = format!("{NS}/held");
    pods.create(&pp, &bare_pod("held", node, 2, json!({"finalizers": ["example.com/hold"]})))
        .await
        .expect("create the held pod");
    running_pod(&pods, "held").await;
    kubectl(kubeconfig, &["-n", NS, "delete", "pod", "held", "--wait=false"]);
    // The kubelet stops it within its grace period; the finalizer keeps the object.
    eventually("held stopped by its kubelet, kept by its finalizer", Duration::from_secs(30), || {
        let pods = pods.clone();
        async move {
            match pod_state(&pods, "held").await {
                Some((phase, true)) if phase == "Failed" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
    let is_wait = |p: &fabrik::ops::DrainPod| matches!(p.action, PodAction::Wait(_));
    let f = eventually("the model sees held terminating", Duration::from_secs(30), || {
        let c = c.clone();
        async move {
            let f = fleet(&c).await;
            let phase = f.pod_by_name(NS, "held").and_then(|p| f.pod(p)).map(|p| p.phase);
            if phase == Some(fabrik::model::Phase::Terminating) { Ok(f) } else { Err(format!("{phase:?}")) }
        }
    })
    .await;
    let p = plan(&f, OpRequest::Drain { node: node.into(), force: false });

    // A drain whose timeout passes names the pod left and why.
    let mut short = Exec::new(c.clone(), audit_dir, "admin");
    if let Some(ex) = Arc::get_mut(&mut short.ex) {
        ex.opts.drain_timeout = Duration::from_secs(3);
    }
    let (outcome, _) = short.run(p.clone(), Duration::from_secs(60)).await;
    let e = outcome.expect_err("a drain that times out on a held pod fails");
    assert!(
        e.contains("timed out")
            && e.contains(&held)
            && e.contains("finalizers: example.com/hold")
            && e.contains("stays cordoned"),
        "{e}"
    );
    assert!(pod_state(&pods, "held").await.is_some(), "the pod is still there, as the error says");

    // The preview lists it as terminating, and what must go is what kubectl drain would
    // evict or wait for.
    assert!(p.can_execute(), "{:?}", p.blockers);
    assert!(
        p.effects
            .iter()
            .any(|e| e.starts_with(&format!("  wait for {held}")) && e.contains("finalizers: example.com/hold")),
        "the preview lists it as terminating, with its finalizer: {:?}",
        p.effects
    );
    let PlanDetail::Drain(d) = &p.detail else { panic!("a drain plan") };
    let must_go: BTreeSet<String> = d
        .pods
        .iter()
        .filter(|p| p.action == PodAction::Evict || is_wait(p))
        .map(|p| format!("{}/{}", p.namespace, p.name))
        .collect();
    let dry = kubectl(kubeconfig, &["drain", node, "--ignore-daemonsets", "--dry-run=client"]);
    let kubectl_must_go: BTreeSet<String> = dry
        .lines()
        .filter_map(|l| l.split("evicting pod ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect();
    assert_eq!(must_go, kubectl_must_go, "{dry}");

    // A normal drain waits for it, and never says drained while it exists.
    let (id, _cancel) = admin.start(p);
    admin
        .until(id, "the drain waiting for held", Duration::from_secs(60), |p| {
            matches!(p, OpProgress::Blocked { reason, .. } if reason.contains(&held) && reason.contains("example.com/hold"))
        })
        .await;
    let meanwhile = progress_for(admin, id, Duration::from_secs(3)).await;
    assert!(
        !meanwhile.iter().any(|p| matches!(p, OpProgress::Finished { .. })),
        "nothing ends while the pod exists: {meanwhile:#?}"
    );
    assert!(pod_state(&pods, "held").await.is_some_and(|(_, deleting)| deleting), "held is still terminating");
    kubectl(
        kubeconfig,
        &["-n", NS, "patch", "pod", "held", "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#],
    );
    let seen = admin
        .until(id, "the drain's outcome", Duration::from_secs(60), |p| matches!(p, OpProgress::Finished { .. }))
        .await;
    let Some(OpProgress::Finished { outcome, .. }) = seen.last() else { unreachable!() };
    assert!(
        outcome.as_ref().is_ok_and(|m| m.contains("drained") && m.contains("1 pod already terminating waited for")),
        "{outcome:?}"
    );
    assert_eq!(pod_state(&pods, "held").await, None, "drained only once the pod is gone");

    // A pod whose containers ignore SIGTERM keeps running through its grace period; the
    // drain waits it out.
    let stop = json!({"annotations": {"fabrik.io/sim-stop-seconds": "600"}});
    pods.create(&pp, &bare_pod("graceful", node, 10, stop)).await.expect("create the graceful pod");
    running_pod(&pods, "graceful").await;
    kubectl(kubeconfig, &["-n", NS, "delete", "pod", "graceful", "--wait=false"]);
    let p = plan(&fleet(c).await, OpRequest::Drain { node: node.into(), force: false });
    assert!(
        p.effects.iter().any(|e| e.starts_with(&format!("  wait for {NS}/graceful")) && e.contains("grace period")),
        "{:?}",
        p.effects
    );
    let (id, _cancel) = admin.start(p);
    admin
        .until(
            id,
            "the drain waiting for graceful",
            Duration::from_secs(60),
            |p| matches!(p, OpProgress::Blocked { reason, .. } if reason.contains(&format!("{NS}/graceful"))),
        )
        .await;
    assert_eq!(
        pod_state(&pods, "graceful").await,
        Some(("Running".to_string(), true)),
        "deleted, still running within its grace period"
    );
    let seen = admin
        .until(id, "the drain's outcome", Duration::from_secs(60), |p| matches!(p, OpProgress::Finished { .. }))
        .await;
    let Some(OpProgress::Finished { outcome, .. }) = seen.last() else { unreachable!() };
    assert!(outcome.as_ref().is_ok_and(|m| m.contains("drained")), "{outcome:?}");
    assert_eq!(pod_state(&pods, "graceful").await, None, "drained only once the pod is gone");
}

fn cockpit(t: &Tmux, kubeconfig: &Path, data: &Path, extra: &[&str]) {
    let home = format!("HOME={}", t.home.display());
    let cfg = format!("XDG_CONFIG_HOME={}", t.home.join("config").display());
    let data = format!("FABRIK_DATA_DIR={}", data.display());
    let mut cmd = format!("{BIN} --kubeconfig {}", kubeconfig.display());
    for a in extra {
        cmd.push(' ');
        cmd.push_str(a);
    }
    t.ok(&session(&[&home, &cfg, &data], &[&cmd]));
}

const SLOW: Duration = Duration::from_secs(60);

/// Filters the fleet view to `node` and waits until it is the selected row.
fn select_node(t: &Tmux, node: &str) {
    t.wait_screen_for("the node in the fleet view", SLOW, |s| s.contains(node));
    t.keys(&["/"]);
    t.literal(node);
    t.keys(&["Enter"]);
    t.wait_screen_for("the filter applied", SLOW, |s| s.contains(&format!("/{node}")) || s.contains("1/1"));
}

fn readonly_sends_nothing(kubeconfig: &Path, data: &Path, node: &str) {
    let t = Tmux::start();
    cockpit(&t, kubeconfig, data, &["--readonly"]);
    t.wait_screen_for("the read-only cockpit", SLOW, |s| s.contains("[read-only]") && s.contains("[live]"));
    select_node(&t, node);
    t.keys(&["D"]);
    let s = t.wait_screen_for("the read-only refusal", SLOW, |s| s.contains("read-only mode (--readonly)"));
    assert!(!s.contains("Preview:"), "no preview opens in read-only mode:\n{s}");
    t.keys(&["q"]);
    assert!(audit_records(data).is_empty(), "read-only mode writes nothing, not even a preview");
}

fn tenant_is_told_why(kubeconfig: &Path, data: &Path, node: &str) {
    let t = Tmux::start();
    cockpit(&t, kubeconfig, data, &["--context", "tenant"]);
    t.wait_screen_for("the tenant's access review", SLOW, |s| s.contains("as tenant-a"));
    select_node(&t, node);
    let s = t.wait_screen_for("drain shown disabled", SLOW, |s| s.contains("(no RBAC)"));
    assert!(s.contains("drain (no RBAC)") || s.contains("cordon (no RBAC)"), "{s}");
    t.keys(&["D"]);
    let s = t.wait_screen_for("why the tenant may not drain", SLOW, |s| s.contains("drain is disabled"));
    assert!(s.contains("may not patch nodes"), "the missing permission is named:\n{s}");
    t.keys(&["q"]);
}

fn drain_from_the_keyboard(kubeconfig: &Path, data: &Path, node: &str) {
    let t = Tmux::start();
    cockpit(&t, kubeconfig, data, &[]);
    t.wait_screen_for("the cockpit, live", SLOW, |s| s.contains("[live]") && s.contains("as admin"));
    select_node(&t, node);
    t.keys(&["D"]);
    let s = t.wait_screen_for("the drain preview", SLOW, |s| s.contains(&format!("Preview: Drain node {node}")));
    assert!(s.contains("evict 2 pods"), "the preview says what will be evicted:\n{s}");
    t.keys(&["y"]);
    t.keys(&[":"]);
    t.literal("ops");
    t.keys(&["Enter"]);
    let title = format!("Drain node {node}");
    let s = t.wait_screen_for("the drain succeeded in :ops", SLOW, |s| {
        s.lines().any(|l| l.contains(&title) && l.contains("succeeded"))
    });
    assert!(!s.lines().any(|l| l.contains(&title) && l.contains("failed")), "{s}");
    t.keys(&["q"]);
}

fn phase_failure(name: &str, r: Result<(), tokio::task::JoinError>) -> Option<String> {
    let e = r.err()?;
    let why = match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic".into()),
        Err(e) => e.to_string(),
    };
    Some(format!("{name}: {why}"))
}

fn logs(seen: &[OpProgress]) -> Vec<String> {
    seen.iter()
        .filter_map(|p| match p {
            OpProgress::Log { line, .. } => Some(line.clone()),
            _ => None,
        })
        .collect()
}

fn node_json(kubeconfig: &Path, node: &str) -> Value {
    serde_json::from_str(&kubectl(kubeconfig, &["get", "node", node, "-o", "json"])).expect("node json")
}

/// A reslice of GPU `gpu` of `node` to the first of `layouts` that changes its devices (so
/// mig-manager has work to do, whatever earlier phases left there).
fn reslice_changing(f: &Fleet, node: &str, gpu: u8, layouts: &[&'static str]) -> (Plan, &'static str) {
    for layout in layouts {
        let req = OpRequest::Reslice { node: node.into(), gpus: vec![gpu], layout: (*layout).into() };
        let Ok(p) = fabrik::ops::plan(f, &req) else { continue };
        let PlanDetail::Reslice(r) = &p.detail else { continue };
        if p.can_execute() && r.capacity_before != r.capacity_after {
            return (p, layout);
        }
    }
    panic!("none of {layouts:?} changes GPU {gpu} of {node} (now {})", layout_of(f, node, gpu))
}

/// The layout the cockpit's model gives GPU `index` of `node`, as a layout argument.
fn layout_of(f: &Fleet, node: &str, index: u8) -> String {
    let id = f.node_by_name(node).expect("the node in the model");
    let n = f.node(id).expect("node");
    let g = n.gpus.iter().filter_map(|g| f.gpu(*g)).find(|g| g.index == index).expect("the GPU");
    if !g.mig_enabled {
        return "all-disabled".into();
    }
    let model = g.model;
    g.instances.iter().map(|i| fabrik::mig::profile(model, i.placement.profile).name).collect::<Vec<_>>().join(",")
}

/// Item 6: a reslice whose capacity does not change, on a node whose state already says
/// `success`: it is done only once mig-manager has acted on this config (pending → success),
/// never on the success the previous config left behind.
async fn reslice_waits_for_mig_managers_answer(
    c: kube::Client,
    kubeconfig: std::path::PathBuf,
    audit_dir: std::path::PathBuf,
    node: String,
) {
    let f = fleet(&c).await;
    let layout = layout_of(&f, &node, 1);
    let p = plan(&f, OpRequest::Reslice { node: node.clone(), gpus: vec![1], layout: layout.clone() });
    let PlanDetail::Reslice(r) = &p.detail else { panic!("a reslice plan") };
    let config = r.config_name.clone();
    let before = node_json(&kubeconfig, &node);
    assert_eq!(r.capacity_before, r.capacity_after, "the race needs a capacity that does not change ({layout})");
    assert_eq!(before["metadata"]["labels"]["nvidia.com/mig.config.state"], json!("success"));
    assert_ne!(before["metadata"]["labels"]["nvidia.com/mig.config"], json!(config), "a new config name");
    let mut ex = Exec::new(c.clone(), &audit_dir, "admin");
    let (outcome, seen) = ex.run(p, Duration::from_secs(90)).await;
    // Read at once, with kubectl: what mig-manager had done when the reslice said done.
    let after = node_json(&kubeconfig, &node);
    assert!(outcome.is_ok(), "{outcome:?}\n{seen:#?}");
    assert_eq!(
        after["metadata"]["annotations"]["fabrik.io/sim-mig-message"],
        json!(format!("applied {config}")),
        "mig-manager had applied {config} when the reslice reported success: {outcome:?}"
    );
    assert_eq!(after["metadata"]["labels"]["nvidia.com/mig.config.state"], json!("success"));
    assert!(
        logs(&seen).iter().any(|l| l.starts_with(&format!("mig-manager acknowledged {config}"))),
        "{:#?}",
        logs(&seen)
    );
    assert!(!unschedulable(&c, &node).await, "uncordoned at the end");
}

/// Item 8: a reslice cancelled after its cordon, run again, ends uncordoned and removes the
/// cordon's mark; the second preview says whose cordon it is.
async fn interrupted_reslice_restores_the_cordon(
    c: kube::Client,
    kubeconfig: std::path::PathBuf,
    audit_dir: std::path::PathBuf,
    node: String,
) {
    let f = fleet(&c).await;
    let layout = if layout_of(&f, &node, 1) == "all-disabled" { "all-balanced" } else { "all-disabled" };
    let p = plan(&f, OpRequest::Reslice { node: node.clone(), gpus: vec![1], layout: layout.into() });
    let PlanDetail::Reslice(r) = &p.detail else { panic!("a reslice plan") };
    let config = r.config_name.clone();
    assert!(!r.was_cordoned);
    let mut ex = Exec::new(c.clone(), &audit_dir, "admin");
    let (id, cancel) = ex.start(p);
    ex.until(
        id,
        "the cordon",
        Duration::from_secs(60),
        |p| matches!(p, OpProgress::Step { step, .. } if step.starts_with("cordoned")),
    )
    .await;
    cancel.send(true).expect("cancel");
    ex.until(id, "the cancellation", Duration::from_secs(60), |p| matches!(p, OpProgress::Cancelled { .. })).await;
    assert!(unschedulable(&c, &node).await, "the interrupted reslice left its cordon");
    let mark = node_json(&kubeconfig, &node)["metadata"]["annotations"]["fabrik.io/cordoned-by"].clone();
    assert!(
        mark.as_str().is_some_and(|m| m.split_whitespace().nth(1) == Some("reslice")),
        "the cordon is marked: {mark}"
    );
    // Whatever the first run got to, mig-manager may still be at work: let it settle.
    eventually("mig-manager idle on the node", Duration::from_secs(60), || {
        let kc = kubeconfig.clone();
        let node = node.clone();
        async move {
            let n = node_json(&kc, &node);
            let state = n["metadata"]["labels"]["nvidia.com/mig.config.state"].clone();
            if state == json!("success") { Ok(()) } else { Err(format!("state {state}")) }
        }
    })
    .await;
    let f = fleet(&c).await;
    let p = plan(&f, OpRequest::Reslice { node: node.clone(), gpus: vec![1], layout: layout.into() });
    let op = mark.as_str().and_then(|m| m.split_whitespace().next()).unwrap_or_default().to_string();
    assert!(
        p.effects.iter().any(|e| e
            == &format!("{node} is cordoned by fabrik op {op} (reslice, interrupted); will be uncordoned at the end")),
        "{:#?}",
        p.effects
    );
    let (outcome, seen) = ex.run(p, Duration::from_secs(90)).await;
    assert!(outcome.is_ok(), "{outcome:?}\n{seen:#?}");
    let n = node_json(&kubeconfig, &node);
    assert_eq!(n["spec"]["unschedulable"], Value::Null, "uncordoned at the end, as before the first run");
    assert_eq!(
        n["metadata"]["annotations"]["fabrik.io/cordoned-by"],
        Value::Null,
        "the mark is removed with the cordon"
    );
    assert_eq!(n["metadata"]["labels"]["nvidia.com/mig.config"], json!(config));
}

/// Item 9: 503s, a reset connection and an API Priority-and-Fairness 429 while the reslice
/// follows mig-manager are retried (and logged); the reslice succeeds.
async fn transient_errors_are_retried(c: kube::Client, audit_dir: std::path::PathBuf, node: String) {
    use fault_proxy::Fault;
    let (url, faults) = fault_proxy::start(c.clone()).await;
    let f = fleet(&c).await;
    let layout = "all-1g.10gb";
    let p = plan(&f, OpRequest::Reslice { node: node.clone(), gpus: vec![1], layout: layout.into() });
    let mut ex = Exec::new(fault_proxy::client(&url), &audit_dir, "admin");
    let (id, _cancel) = ex.start(p);
    ex.until(
        id,
        "the label write",
        Duration::from_secs(60),
        |p| matches!(p, OpProgress::Step { step, .. } if step.starts_with("set nvidia.com/mig.config=")),
    )
    .await;
    let path = format!("/api/v1/nodes/{node}");
    faults.arm(http::Method::GET, &path, &[Fault::Unavailable, Fault::Unavailable, Fault::Reset, Fault::Apf]);
    let seen =
        ex.until(id, "the outcome", Duration::from_secs(120), |p| matches!(p, OpProgress::Finished { .. })).await;
    let Some(OpProgress::Finished { outcome, .. }) = seen.last() else { unreachable!() };
    assert!(outcome.is_ok(), "{outcome:?}\n{seen:#?}");
    let injected = faults.injected();
    assert_eq!(injected.len(), 4, "every fault was met: {injected:?}");
    let retries: Vec<String> = logs(&seen).into_iter().filter(|l| l.contains("retrying in")).collect();
    assert!(retries.iter().filter(|l| l.contains("503")).count() >= 2, "{retries:#?}");
    assert!(retries.iter().any(|l| l.contains("connection")), "{retries:#?}");
    assert!(retries.iter().any(|l| l.contains("429")), "{retries:#?}");
    let recs = audit_records(&audit_dir);
    let op = recs.iter().rev().find(|r| r.kind == "reslice" && r.target == node).map(|r| r.op.clone()).expect("the op");
    let audited =
        recs.iter().filter(|r| r.op == op && r.phase == Phase::Log && r.message.contains("retrying in")).count();
    assert!(audited >= 4, "each retry is in the audit log ({audited})");
    assert!(!unschedulable(&c, &node).await, "uncordoned at the end");
}
