//! The node side of the simulated kubelets, GFD, device plugin, DRA driver and mig-manager:
//! registration, lease heartbeats, the `fabrik.io/sim-fault` hook and MIG reconfiguration.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};

use super::migparted::{self, Decision};
use super::model::{self, SimNode};
use super::{describe, is_status};
use crate::cluster::labels;

pub const LEASE_NS: &str = "kube-node-lease";
pub const FAULT_ANNOTATION: &str = "fabrik.io/sim-fault";
pub const MIG_MESSAGE_ANNOTATION: &str = labels::SIM_MIG_MESSAGE;
pub const MANAGER: &str = "fabrik-sim";
/// mig-manager's writes have their own field manager, as a real one's do (managedFields tell
/// its state writes from the cockpit's label write).
pub const MIG_MANAGER: &str = "fabrik-sim-mig-manager";
/// Taints the node lifecycle controller manages from the Ready condition.
const NODE_CONDITION_TAINTS: [&str; 2] = ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"];
const LEASE_SECONDS: i32 = 40;
const RENEW_EVERY: Duration = Duration::from_secs(10);
pub use crate::cluster::labels::{MIG_CONFIGMAP, MIG_CONFIGMAP_NS};

/// What mig-manager is doing on a node.
#[derive(Clone, Debug, Default)]
struct MigTrack {
    /// The config whose outcome (success or failed) the labels show.
    applied: String,
    /// A config being worked on (or wedged on), and its generation.
    target: Option<String>,
    generation: u64,
}

pub struct Shared {
    pub client: kube::Client,
    pub nodes: Mutex<HashMap<String, SimNode>>,
    pub uids: Mutex<HashMap<String, String>>,
    leased: Mutex<HashSet<String>>,
    pub faulted: Mutex<HashSet<String>>,
    /// Nodes whose BareMetalHost the simulated baremetal-operator powered off (`bmo`): their
    /// kubelet is stopped like a faulted one's until the host is on again.
    pub powered_off: Mutex<HashSet<String>>,
    mig: Mutex<HashMap<String, MigTrack>>,
    last_ready_fix: Mutex<HashMap<String, Instant>>,
    pub mig_seconds: u64,
    /// mig-manager's reaction time before `pending` (`--mig-delay-ms`).
    pub mig_delay_ms: std::sync::atomic::AtomicU64,
    /// The port the simulated kubelets' log endpoint listens on (see `logs`), which every
    /// node names as its kubelet's.
    pub kubelet_port: std::sync::atomic::AtomicU16,
    pub sem: Arc<Semaphore>,
    /// Lease renewals have their own budget, so a burst of pod starts cannot starve them.
    lease_sem: Arc<Semaphore>,
    /// Each ComputeDomain member whose IMEX daemon is not ready: a pod there joining that
    /// domain cannot have its channel prepared (`--dra-alpha`, set before the domains'
    /// workers are created).
    pub imex_not_ready: Mutex<Vec<ImexWait>>,
}

/// A ComputeDomain member whose IMEX daemon is not ready.
pub struct ImexWait {
    pub namespace: String,
    pub domain: String,
    /// The domain's channel ResourceClaimTemplate, which its workloads claim from.
    pub template: String,
    pub node: String,
}

impl Shared {
    pub fn new(client: kube::Client, nodes: &[SimNode], mig_seconds: u64) -> Arc<Self> {
        let mig = nodes
            .iter()
            .map(|n| (n.name.clone(), MigTrack { applied: n.mig_config.clone(), target: None, generation: 0 }))
            .collect();
        Arc::new(Shared {
            client,
            nodes: Mutex::new(nodes.iter().map(|n| (n.name.clone(), n.clone())).collect()),
            uids: Mutex::new(HashMap::new()),
            leased: Mutex::new(HashSet::new()),
            faulted: Mutex::new(HashSet::new()),
            powered_off: Mutex::new(HashSet::new()),
            mig: Mutex::new(mig),
            last_ready_fix: Mutex::new(HashMap::new()),
            mig_seconds,
            kubelet_port: std::sync::atomic::AtomicU16::new(10250),
            mig_delay_ms: std::sync::atomic::AtomicU64::new(0),
            sem: Arc::new(Semaphore::new(32)),
            lease_sem: Arc::new(Semaphore::new(16)),
            imex_not_ready: Mutex::new(Vec::new()),
        })
    }

    /// What the ComputeDomain driver says of pod `pod` on `node` when it cannot prepare its
    /// channel claim (its domain's IMEX daemon is not ready there), if it cannot: the claim
    /// named as the resourceclaim controller named it (else the pod's claim name).
    pub fn prepare_failure(&self, pod: &k8s_openapi::api::core::v1::Pod, node: &str) -> Option<String> {
        let ns = pod.metadata.namespace.as_deref()?;
        let waits = self.imex_not_ready.lock().ok()?;
        let spec = pod.spec.as_ref()?;
        let mut domain = "";
        let claim = spec.resource_claims.iter().flatten().find(|c| {
            let wait = c
                .resource_claim_template_name
                .as_deref()
                .and_then(|t| waits.iter().find(|w| w.namespace == ns && w.template == t && w.node == node));
            if let Some(w) = wait {
                domain = &w.domain;
            }
            wait.is_some()
        })?;
        let generated = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .and_then(|st| st.iter().find(|s| s.name == claim.name))
            .and_then(|s| s.resource_claim_name.clone());
        let claim = generated.unwrap_or_else(|| claim.name.clone());
        Some(crate::sim::imex_not_ready(ns, &claim, domain))
    }

    pub fn node(&self, name: &str) -> Option<SimNode> {
        self.nodes.lock().ok().and_then(|m| m.get(name).cloned())
    }

    pub fn is_sim_node(&self, name: &str) -> bool {
        self.nodes.lock().is_ok_and(|m| m.contains_key(name))
    }

    /// Whether the node's kubelet is stopped: the fault annotation, or its host powered off.
    pub fn is_faulted(&self, name: &str) -> bool {
        self.faulted.lock().is_ok_and(|f| f.contains(name)) || self.powered_off.lock().is_ok_and(|f| f.contains(name))
    }

    /// The node's host powered off (`true`) or on: the kubelet stops (Ready=False, no lease
    /// renewals) or comes back (Ready, its pods resumed), as with the fault annotation.
    pub async fn set_powered_off(&self, name: &str, off: bool, resume: &mpsc::UnboundedSender<String>) {
        let changed =
            self.powered_off.lock().is_ok_and(|mut f| if off { f.insert(name.to_string()) } else { f.remove(name) });
        if !changed || !self.is_sim_node(name) {
            return;
        }
        eprintln!("fabrik sim: node {name}: its host powered {}", if off { "off: kubelet stopped" } else { "on" });
        let annotated = self.faulted.lock().is_ok_and(|f| f.contains(name));
        if annotated {
            return;
        }
        kubelet_up(self, name, !off, resume).await;
    }

    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.lock().ok().and_then(|m| m.get(name).map(|n| n.index))
    }
}

fn ssa() -> PatchParams {
    PatchParams::apply(MANAGER).force()
}

/// Creates the DRA DeviceClasses when they are missing.
pub async fn ensure_device_classes(client: &kube::Client) -> Result<(), String> {
    let api: Api<DeviceClass> = Api::all(client.clone());
    for (name, kind) in [(labels::DRA_GPU_CLASS, "gpu"), (labels::DRA_MIG_CLASS, "mig")] {
        match api.get_opt(name).await {
            Ok(Some(_)) => continue,
            Ok(None) => {}
            Err(e) => return Err(format!("reading DeviceClass {name}: {}", describe(&e))),
        }
        let dc: DeviceClass =
            serde_json::from_value(model::device_class(name, kind)).map_err(|e| format!("DeviceClass {name}: {e}"))?;
        match api.create(&PostParams::default(), &dc).await {
            Ok(_) => {}
            Err(e) if is_status(&e, 409) => {}
            Err(e) => return Err(format!("creating DeviceClass {name}: {}", describe(&e))),
        }
    }
    Ok(())
}

/// Registers one node as a kubelet does: the Node, its status (Ready), its Lease and, on DRA
/// nodes, the ResourceSlice. `exists` says the node is already there (from an earlier run).
pub async fn register(shared: &Shared, node: &SimNode, exists: bool) -> Result<(), String> {
    let api: Api<Node> = Api::all(shared.client.clone());
    let obj = model::node_object(node);
    let created = if exists {
        let mut labels_ = obj["metadata"]["labels"].clone();
        // Sharing and clique labels an earlier run wrote and this one does not: gone (null in a
        // merge patch).
        for k in [labels::DEVICE_PLUGIN_CONFIG, labels::MPS_CAPABLE, labels::GPU_CLIQUE] {
            if labels_.get(k).is_none() {
                labels_[k] = Value::Null;
            }
        }
        let patch = json!({ "metadata": { "labels": labels_, "annotations": obj["metadata"]["annotations"] } });
        api.patch(&node.name, &PatchParams::default(), &Patch::Merge(&patch)).await
    } else {
        let n: Node = serde_json::from_value(obj).map_err(|e| format!("node {}: {e}", node.name))?;
        match api.create(&PostParams::default(), &n).await {
            Err(e) if is_status(&e, 409) => {
                return Err(format!("node {} appeared while registering; run again", node.name));
            }
            other => other,
        }
    }
    .map_err(|e| format!("registering node {}: {}", node.name, describe(&e)))?;
    if let Some(uid) = created.metadata.uid.clone()
        && let Ok(mut u) = shared.uids.lock()
    {
        u.insert(node.name.clone(), uid);
    }
    // On a rerun drop resources the node advertised before and no longer has.
    let old: Vec<String> = created
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .map(|c| c.keys().filter(|k| k.starts_with("nvidia.com/")).cloned().collect())
        .unwrap_or_default();
    let mut status = model::node_status(node, true);
    // The API server reaches this node's kubelet (logs) at the sim's endpoint.
    let port = shared.kubelet_port.load(std::sync::atomic::Ordering::Relaxed);
    status["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] = json!(port);
    if let Some(a) = status["status"]["addresses"].as_array_mut() {
        a.insert(0, json!({"type": "InternalDNS", "address": super::logs::HOST}));
    }
    let (cap, alloc) = model::resources(node, false, &old);
    status["status"]["capacity"] = cap;
    status["status"]["allocatable"] = alloc;
    api.patch_status(&node.name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(|e| format!("writing status of node {}: {}", node.name, describe(&e)))?;
    renew_lease(shared, &node.name).await?;
    // The NodeTaint admission plugin puts `not-ready:NoSchedule` on every new node; the node
    // lifecycle controller lifts it once it sees Ready, but at its client QPS that takes minutes
    // for a thousand nodes. The node is Ready now, so lift it the way the controller would.
    let taints = created.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    if taints.iter().any(|t| NODE_CONDITION_TAINTS.contains(&t.key.as_str())) {
        let keep: Vec<_> = taints.into_iter().filter(|t| !NODE_CONDITION_TAINTS.contains(&t.key.as_str())).collect();
        let patch = json!({ "spec": { "taints": if keep.is_empty() { Value::Null } else { json!(keep) } } });
        api.patch(&node.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("lifting the not-ready taint of {}: {}", node.name, describe(&e)))?;
    }
    if node.dra {
        apply_slice(shared, node).await?;
    }
    Ok(())
}

pub async fn apply_slice(shared: &Shared, node: &SimNode) -> Result<(), String> {
    let api: Api<ResourceSlice> = Api::all(shared.client.clone());
    let mut slice = model::resource_slice(node);
    if let Some(uid) = shared.uids.lock().ok().and_then(|u| u.get(&node.name).cloned()) {
        slice["metadata"]["ownerReferences"] =
            json!([{ "apiVersion": "v1", "kind": "Node", "name": node.name, "uid": uid, "controller": true }]);
    }
    api.patch(&model::slice_name(&node.name), &ssa(), &Patch::Apply(&slice))
        .await
        .map(|_| ())
        .map_err(|e| format!("publishing ResourceSlice of {}: {}", node.name, describe(&e)))
}

pub async fn renew_lease(shared: &Shared, node: &str) -> Result<(), String> {
    let api: Api<Lease> = Api::namespaced(shared.client.clone(), LEASE_NS);
    let now = k8s_openapi::jiff::Timestamp::now();
    let renew = serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(now))
        .map_err(|e| e.to_string())?;
    // The cheap path: a merge patch of renewTime on a lease this process created.
    if shared.leased.lock().is_ok_and(|l| l.contains(node)) {
        let patch = json!({ "spec": { "renewTime": renew, "holderIdentity": node } });
        match api.patch(node, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => return Ok(()),
            Err(e) if is_status(&e, 404) => {}
            Err(e) => return Err(format!("renewing lease of {node}: {}", describe(&e))),
        }
    }
    let mut lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": { "name": node, "namespace": LEASE_NS, "labels": { labels::SIMULATED: "true" } },
        "spec": { "holderIdentity": node, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": renew },
    });
    if let Some(uid) = shared.uids.lock().ok().and_then(|u| u.get(node).cloned()) {
        lease["metadata"]["ownerReferences"] =
            json!([{ "apiVersion": "v1", "kind": "Node", "name": node, "uid": uid }]);
    }
    api.patch(node, &ssa(), &Patch::Apply(&lease))
        .await
        .map_err(|e| format!("creating lease of {node}: {}", describe(&e)))?;
    if let Ok(mut l) = shared.leased.lock() {
        l.insert(node.to_string());
    }
    Ok(())
}

/// Waits until kube-controller-manager has lifted the `not-ready` / `unreachable` taints of
/// every simulated node (it does so once it sees them Ready), at most `timeout`. Returns the
/// number of nodes still tainted or not Ready.
pub async fn wait_schedulable(shared: &Shared, timeout: Duration) -> usize {
    let api: Api<Node> = Api::all(shared.client.clone());
    let lp = kube::api::ListParams::default().labels(&format!("{}=true", labels::SIMULATED));
    let deadline = Instant::now() + timeout;
    let mut left = usize::MAX;
    loop {
        match api.list(&lp).await {
            Ok(list) => {
                left = list
                    .items
                    .iter()
                    .filter(|n| n.metadata.name.as_deref().is_some_and(|name| shared.is_sim_node(name)))
                    .filter(|n| {
                        let tainted = n
                            .spec
                            .as_ref()
                            .and_then(|s| s.taints.as_ref())
                            .is_some_and(|t| t.iter().any(|t| NODE_CONDITION_TAINTS.contains(&t.key.as_str())));
                        tainted || ready_status(n).as_deref() != Some("True")
                    })
                    .count();
                if left == 0 {
                    return 0;
                }
            }
            Err(e) => eprintln!("fabrik sim: listing nodes: {}", describe(&e)),
        }
        if Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Renews every node's lease each [`RENEW_EVERY`], spread evenly over the interval, at most
/// 16 renewals in flight. Faulted nodes are skipped.
pub async fn heartbeats(shared: Arc<Shared>) {
    let mut names: Vec<String> = shared.nodes.lock().map(|m| m.keys().cloned().collect()).unwrap_or_default();
    names.sort();
    if names.is_empty() {
        return;
    }
    let step = (RENEW_EVERY / names.len() as u32).max(Duration::from_millis(1));
    let mut tick = tokio::time::interval(step);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut i = 0usize;
    let mut failures = 0u32;
    let (err_tx, mut err_rx) = mpsc::unbounded_channel::<String>();
    loop {
        tick.tick().await;
        while let Ok(e) = err_rx.try_recv() {
            failures += 1;
            if failures <= 5 || failures.is_multiple_of(100) {
                eprintln!("fabrik sim: heartbeat: {e} ({failures} failures so far)");
            }
        }
        let name = names[i % names.len()].clone();
        i += 1;
        if shared.is_faulted(&name) {
            continue;
        }
        let Ok(permit) = shared.lease_sem.clone().acquire_owned().await else { return };
        let s = shared.clone();
        let tx = err_tx.clone();
        tokio::spawn(async move {
            if let Err(e) = renew_lease(&s, &name).await {
                let _ = tx.send(e);
            }
            drop(permit);
        });
    }
}

/// A node's kubelet stopped (Ready=False) or back (Ready, its lease renewed, its pods resumed).
async fn kubelet_up(shared: &Shared, node: &str, up: bool, resume: &mpsc::UnboundedSender<String>) {
    if let Err(e) = patch_ready(shared, node, up).await {
        eprintln!("fabrik sim: {e}");
    }
    if up {
        let _ = renew_lease(shared, node).await;
        let _ = resume.send(node.to_string());
    }
}

async fn patch_ready(shared: &Shared, node: &str, ready: bool) -> Result<(), String> {
    let api: Api<Node> = Api::all(shared.client.clone());
    let now = model::now_str();
    let patch = json!({ "status": { "conditions": model::conditions(ready, &now) } });
    api.patch_status(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|e| format!("setting Ready={ready} on {node}: {}", describe(&e)))
}

fn ready_status(n: &Node) -> Option<String> {
    n.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready").map(|c| c.status.clone())
}

/// Watches the simulated nodes: the fault hook, keeping Ready where the node lifecycle
/// controller marked it Unknown, and mig-manager. `resume` hears the names of nodes whose
/// fault was cleared, so the kubelet starts their pods.
pub async fn watch_nodes(shared: Arc<Shared>, resume: mpsc::UnboundedSender<String>) {
    let api: Api<Node> = Api::all(shared.client.clone());
    let cfg = watcher::Config::default().labels(&format!("{}=true", labels::SIMULATED));
    let mut stream = watcher(api, cfg).default_backoff().applied_objects().boxed();
    loop {
        match stream.try_next().await {
            Ok(Some(node)) => on_node(&shared, &node, &resume).await,
            Ok(None) => return,
            Err(e) => eprintln!("fabrik sim: node watch: {e}"),
        }
    }
}

async fn on_node(shared: &Arc<Shared>, node: &Node, resume: &mpsc::UnboundedSender<String>) {
    let Some(name) = node.metadata.name.clone() else { return };
    if !shared.is_sim_node(&name) {
        return;
    }
    let want_fault = node.metadata.annotations.as_ref().and_then(|a| a.get(FAULT_ANNOTATION)).map(String::as_str)
        == Some("notready");
    let was_fault = shared.faulted.lock().is_ok_and(|f| f.contains(&name));
    let powered_off = shared.powered_off.lock().is_ok_and(|f| f.contains(&name));
    if want_fault != was_fault {
        if let Ok(mut f) = shared.faulted.lock() {
            if want_fault {
                f.insert(name.clone());
            } else {
                f.remove(&name);
            }
        }
        eprintln!(
            "fabrik sim: node {name}: fault {}",
            if want_fault { "notready: kubelet stopped" } else { "cleared" }
        );
        // A node whose host is off stays down when the annotation goes.
        kubelet_up(shared, &name, !want_fault && !powered_off, resume).await;
    } else if !want_fault && !powered_off && ready_status(node).as_deref().is_some_and(|s| s != "True") {
        // The node lifecycle controller set Unknown (e.g. a late first lease): post Ready again,
        // at most every 5 s per node.
        let due = shared
            .last_ready_fix
            .lock()
            .map(|mut m| {
                let due = m.get(&name).is_none_or(|t| t.elapsed() > Duration::from_secs(5));
                if due {
                    m.insert(name.clone(), Instant::now());
                }
                due
            })
            .unwrap_or(false);
        if due {
            let _ = renew_lease(shared, &name).await;
            if let Err(e) = patch_ready(shared, &name, true).await {
                eprintln!("fabrik sim: {e}");
            }
        }
    }
    // mig-manager.
    let Some(config) = node.metadata.labels.as_ref().and_then(|l| l.get(labels::MIG_CONFIG)).cloned() else { return };
    let generation = {
        let Ok(mut m) = shared.mig.lock() else { return };
        let t = m.entry(name.clone()).or_default();
        if t.target.as_deref() == Some(config.as_str()) || (t.target.is_none() && t.applied == config) {
            return;
        }
        t.target = Some(config.clone());
        t.generation += 1;
        t.generation
    };
    let s = shared.clone();
    tokio::spawn(async move {
        // As mig-manager's reconcile loop does: an API call that failed (the API server or
        // etcd away) is tried again, from the start, until this config is done or replaced.
        let mut wait = Duration::from_secs(1);
        while let Err(e) = reconfigure(&s, &name, &config, generation).await {
            if !current(&s, &name, generation) {
                return;
            }
            eprintln!("fabrik sim: mig-manager on {name}: {e}; trying {config} again in {}s", wait.as_secs());
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(8));
            if !current(&s, &name, generation) {
                return;
            }
        }
    });
}

fn current(shared: &Shared, node: &str, generation: u64) -> bool {
    shared.mig.lock().is_ok_and(|m| m.get(node).is_some_and(|t| t.generation == generation))
}

async fn patch_labels(shared: &Shared, node: &str, labels: Value, message: Option<&str>) -> Result<(), String> {
    let api: Api<Node> = Api::all(shared.client.clone());
    let mut patch = json!({ "metadata": { "labels": labels } });
    if let Some(m) = message {
        patch["metadata"]["annotations"] = json!({ MIG_MESSAGE_ANNOTATION: m });
    }
    let pp = PatchParams { field_manager: Some(MIG_MANAGER.into()), ..Default::default() };
    api.patch(node, &pp, &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|e| format!("labelling {node}: {}", describe(&e)))
}

fn deploy_labels(value: &str) -> serde_json::Map<String, Value> {
    labels::PAUSED_CLIENTS.iter().map(|k| (k.to_string(), json!(value))).collect()
}

async fn read_configmap(shared: &Shared) -> Option<migparted::MigPartedFile> {
    let api: Api<ConfigMap> = Api::namespaced(shared.client.clone(), MIG_CONFIGMAP_NS);
    let cm = match api.get_opt(MIG_CONFIGMAP).await {
        Ok(cm) => cm?,
        Err(e) => {
            eprintln!("fabrik sim: mig-manager: reading {MIG_CONFIGMAP_NS}/{MIG_CONFIGMAP}: {}", describe(&e));
            return None;
        }
    };
    let text = cm.data.as_ref()?.get("config.yaml")?;
    match migparted::parse(text) {
        Ok(f) => Some(f),
        Err(e) => {
            eprintln!(
                "fabrik sim: mig-manager: {MIG_CONFIGMAP_NS}/{MIG_CONFIGMAP} config.yaml: {e}; using built-in names"
            );
            None
        }
    }
}

/// mig-manager's reconfigure: pending + paused clients, wait, then success with the new
/// devices or failed.
async fn reconfigure(shared: &Arc<Shared>, name: &str, config: &str, generation: u64) -> Result<(), String> {
    let Some(node) = shared.node(name) else { return Ok(()) };
    let delay = shared.mig_delay_ms.load(std::sync::atomic::Ordering::Relaxed);
    if delay > 0 {
        // Reading the node and validating the config, before the first label write: the state
        // still shows the previous config's outcome.
        tokio::time::sleep(Duration::from_millis(delay)).await;
        if !current(shared, name, generation) {
            return Ok(());
        }
    }
    eprintln!("fabrik sim: mig-manager on {name}: applying {config}");
    let mut l = deploy_labels(labels::PAUSED_VALUE);
    l.insert(labels::MIG_CONFIG_STATE.into(), json!("pending"));
    patch_labels(shared, name, Value::Object(l), Some(&format!("applying {config}"))).await?;
    let api: Api<Node> = Api::all(shared.client.clone());
    if !node.dra {
        let (cap, alloc) = model::resources(&node, true, &[]);
        let patch = json!({ "status": { "capacity": cap, "allocatable": alloc } });
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("pausing the device plugin on {name}: {}", describe(&e)))?;
    }
    tokio::time::sleep(Duration::from_secs(shared.mig_seconds)).await;
    if !current(shared, name, generation) {
        return Ok(());
    }
    let file = read_configmap(shared).await;
    let gpus = u8::try_from(node.gpus.len()).unwrap_or(u8::MAX);
    let decision = migparted::decide(node.model, gpus, config, file.as_ref());
    if !current(shared, name, generation) {
        return Ok(());
    }
    match decision {
        Decision::Wedge => {
            eprintln!("fabrik sim: mig-manager on {name}: {config} is a wedged config; staying pending");
            Ok(())
        }
        Decision::Invalid(reason) => mig_failed(shared, &node, config, generation, &reason).await,
        Decision::Apply(layouts) => {
            let mut updated = node.clone();
            if let Err(reason) = model::apply_layouts(&mut updated, &layouts, config) {
                return mig_failed(shared, &node, config, generation, &reason).await;
            }
            let before: Vec<String> = model::gpu_resources(&node).into_keys().collect();
            let (cap, alloc) = model::resources(&updated, false, &before);
            let patch = json!({ "status": { "capacity": cap, "allocatable": alloc } });
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| format!("writing new capacity of {name}: {}", describe(&e)))?;
            if updated.dra {
                apply_slice(shared, &updated).await?;
            }
            let mut l = deploy_labels("true");
            let old_counts = model::mig_count_labels(&node);
            let new_counts = model::mig_count_labels(&updated);
            for k in old_counts.keys().filter(|k| !new_counts.contains_key(*k)) {
                l.insert(k.clone(), Value::Null);
            }
            for (k, v) in new_counts {
                l.insert(k, json!(v));
            }
            l.insert(labels::MIG_CONFIG_STATE.into(), json!("success"));
            if let Ok(mut m) = shared.nodes.lock() {
                m.insert(name.to_string(), updated);
            }
            patch_labels(shared, name, Value::Object(l), Some(&format!("applied {config}"))).await?;
            finish(shared, name, config, generation);
            eprintln!("fabrik sim: mig-manager on {name}: {config} applied");
            Ok(())
        }
    }
}

async fn mig_failed(
    shared: &Shared,
    node: &SimNode,
    config: &str,
    generation: u64,
    reason: &str,
) -> Result<(), String> {
    let name = node.name.as_str();
    eprintln!("fabrik sim: mig-manager on {name}: {config} failed: {reason}");
    if !node.dra {
        let api: Api<Node> = Api::all(shared.client.clone());
        let (cap, alloc) = model::resources(node, false, &[]);
        let patch = json!({ "status": { "capacity": cap, "allocatable": alloc } });
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("restoring capacity of {name}: {}", describe(&e)))?;
    }
    let mut l = deploy_labels("true");
    l.insert(labels::MIG_CONFIG_STATE.into(), json!("failed"));
    patch_labels(shared, name, Value::Object(l), Some(reason)).await?;
    finish(shared, name, config, generation);
    Ok(())
}

fn finish(shared: &Shared, name: &str, config: &str, generation: u64) {
    if let Ok(mut m) = shared.mig.lock()
        && let Some(t) = m.get_mut(name)
        && t.generation == generation
    {
        t.applied = config.to_string();
        t.target = None;
    }
}

/// Nodes that exist on the server: simulated ones (by label) and others (never touched).
pub async fn existing_nodes(client: &kube::Client) -> Result<BTreeMap<String, bool>, kube::Error> {
    let api: Api<Node> = Api::all(client.clone());
    let list = api.list_metadata(&Default::default()).await?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|n| {
            let sim =
                n.metadata.labels.as_ref().and_then(|l| l.get(labels::SIMULATED)).map(String::as_str) == Some("true");
            n.metadata.name.map(|name| (name, sim))
        })
        .collect())
}

/// Registers all nodes, 32 at a time. Returns how many failed (with the first errors logged).
pub async fn register_all(shared: &Arc<Shared>, nodes: &[SimNode], existing: &BTreeMap<String, bool>) -> usize {
    let results: Vec<Result<(), String>> = futures::stream::iter(nodes.iter().cloned())
        .map(|n| {
            let s = shared.clone();
            let exists = existing.contains_key(&n.name);
            async move { register(&s, &n, exists).await }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let errors: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    for e in errors.iter().take(5) {
        eprintln!("fabrik sim: {e}");
    }
    errors.len()
}
