//! End to end on a real control plane (ARCHITECTURE "Tests, in layers" 4): kube-apiserver
//! with etcd, kube-controller-manager and kube-scheduler, built from the Kubernetes Go
//! modules (tests/controlplane), with `fabrik sim` playing the GPU nodes against it.
//!
//! The cockpit's model (the kube feed into a `Fleet`) must converge to what an independent
//! client reads straight from the API: node count, GPUs per node, allocations per node,
//! quota used, tenants, DRA allocations; after start-up and after churn (pods created and
//! deleted, a node going NotReady, a quota changed). Then the real binary in tmux shows the
//! fleet of that control plane.
//!
//! There is no skip: without Go or the control plane this test fails and says why (CI
//! builds it first in `.ci/run`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fabrik::feed::kube::{InitialList, KubeFeedConfig};
use fabrik::model::{Delta, FeedState, Fleet, Phase, Thresholds};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, ResourceQuota};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchParams};
use serde_json::json;
use tokio::sync::mpsc;

mod common;
use common::{BIN, Proc, Tmux, control_plane, control_plane_with, session};

const NODES: u32 = 12;

fn sim(kubeconfig: &Path, dir: &Path) -> Proc {
    let n = NODES.to_string();
    common::sim(kubeconfig, dir, &["--nodes", &n, "--seed", "7", "--workload", "--pods", "40", "--mig-seconds", "2"])
}

/// The cockpit's model, fed by the kube feed exactly as the cockpit is.
struct Model {
    fleet: Fleet,
    rx: mpsc::Receiver<Vec<Delta>>,
    tx: mpsc::Sender<Vec<Delta>>,
    _feed: tokio::task::JoinHandle<()>,
}

impl Model {
    fn start(client: kube::Client) -> Model {
        let (tx, rx) = mpsc::channel(256);
        // Watch-lists (`initial_list = "stream"`; the default is pages): the assertions below
        // are about them, and after the restart below their fallback, pages, converges.
        let cfg = KubeFeedConfig { initial_list: InitialList::Stream, ..Default::default() };
        let feed = tokio::spawn(fabrik::feed::kube::run(client, cfg, tx.clone()));
        Model { fleet: Fleet::new(Thresholds::default()), rx, tx, _feed: feed }
    }

    /// Applies deltas until `pred` holds on the fleet and on a fresh read of the API; the
    /// failure names what differed last.
    async fn converge<F, Fut>(&mut self, what: &str, timeout: Duration, mut check: F)
    where
        F: FnMut(&Fleet) -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        let deadline = Instant::now() + timeout;
        let mut last = String::from("not checked yet");
        loop {
            while let Ok(batch) = self.rx.try_recv() {
                for d in batch {
                    self.fleet.apply(d);
                }
            }
            if self.fleet.synced {
                match check(&self.fleet).await {
                    Ok(()) => return,
                    Err(e) => last = e,
                }
            }
            if Instant::now() > deadline {
                panic!("{what}: the model did not converge within {timeout:?}: {last}");
            }
            tokio::select! {
                b = self.rx.recv() => if let Some(batch) = b { for d in batch { self.fleet.apply(d); } },
                _ = tokio::time::sleep(Duration::from_millis(300)) => {}
            }
        }
    }
}

fn count_of(q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> i64 {
    q.and_then(|q| q.0.parse::<i64>().ok()).unwrap_or(0)
}

/// What an independent client sees, read straight from the API.
#[derive(Debug, Default, PartialEq)]
struct Truth {
    nodes: BTreeMap<String, (bool, u32)>,
    /// Node → devices held by its pods (device-plugin GPUs + DRA devices).
    allocated: BTreeMap<String, u32>,
    /// Node → MIG instances its pods hold (`nvidia.com/mig-*`; the API does not say which),
    /// and all of them (the header's count).
    mig_held: BTreeMap<String, u32>,
    mig_total: u32,
    pods: BTreeSet<String>,
    quota_used: BTreeMap<String, i64>,
    quota_hard: BTreeMap<String, i64>,
    tenants: BTreeSet<String>,
    /// ns/pod → GPU uuid its DRA claim got.
    dra: BTreeMap<String, String>,
    /// Pods bound to a node but not started yet (not compared: only the API knows).
    starting: usize,
}

async fn truth(c: &kube::Client) -> Result<Truth, String> {
    let lp = ListParams::default();
    let e = |what: &str, err: kube::Error| format!("list {what}: {err}");
    let nodes = Api::<Node>::all(c.clone()).list(&lp).await.map_err(|x| e("nodes", x))?;
    let slices = Api::<ResourceSlice>::all(c.clone()).list(&lp).await.map_err(|x| e("slices", x))?;
    let pods = Api::<Pod>::all(c.clone()).list(&lp).await.map_err(|x| e("pods", x))?;
    let claims = Api::<ResourceClaim>::all(c.clone()).list(&lp).await.map_err(|x| e("claims", x))?;
    let quotas = Api::<ResourceQuota>::all(c.clone()).list(&lp).await.map_err(|x| e("quotas", x))?;
    let nss = Api::<Namespace>::all(c.clone()).list(&lp).await.map_err(|x| e("namespaces", x))?;
    let mut t = Truth::default();
    // (pool, device) → uuid, and GPUs per node from the slices.
    let mut dev_uuid = BTreeMap::new();
    // A GPU is a `type=gpu` device, or the parent of `type=mig` devices (with MIG on the
    // driver lists the instances only).
    let mut gpu_uuids: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in &slices {
        let Some(node) = s.spec.node_name.clone() else { continue };
        for d in s.spec.devices.iter().flatten() {
            let attr = |k: &str| d.attributes.as_ref().and_then(|a| a.get(k)).and_then(|v| v.string.clone());
            if let Some(u) = attr("uuid") {
                dev_uuid.insert((s.spec.pool.name.clone(), d.name.clone()), u.clone());
                match attr("type").as_deref() {
                    Some("gpu") => {
                        gpu_uuids.entry(node.clone()).or_default().insert(u);
                    }
                    Some("mig") => {
                        if let Some(p) = attr("parentUUID") {
                            gpu_uuids.entry(node.clone()).or_default().insert(p);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    let slice_gpus: BTreeMap<String, u32> = gpu_uuids.into_iter().map(|(n, u)| (n, u.len() as u32)).collect();
    for n in &nodes {
        let name = n.metadata.name.clone().unwrap_or_default();
        let labels = n.metadata.labels.clone().unwrap_or_default();
        let ready = n
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True");
        let gpus = match slice_gpus.get(&name) {
            Some(g) => *g,
            None => labels.get("nvidia.com/gpu.count").and_then(|c| c.parse().ok()).unwrap_or(0),
        };
        t.nodes.insert(name, (ready, gpus));
    }
    let mut claim_alloc: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in &claims {
        let key = format!(
            "{}/{}",
            c.metadata.namespace.clone().unwrap_or_default(),
            c.metadata.name.clone().unwrap_or_default()
        );
        let results = c
            .status
            .as_ref()
            .and_then(|s| s.allocation.as_ref())
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.clone());
        let uuids = results.into_iter().flatten().filter_map(|r| dev_uuid.get(&(r.pool, r.device)).cloned()).collect();
        claim_alloc.insert(key, uuids);
    }
    for p in &pods {
        let ns = p.metadata.namespace.clone().unwrap_or_default();
        let name = p.metadata.name.clone().unwrap_or_default();
        t.pods.insert(format!("{ns}/{name}"));
        let phase = p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        let Some(spec) = &p.spec else { continue };
        let Some(node) = spec.node_name.clone() else { continue };
        let terminating = p.metadata.deletion_timestamp.is_some();
        if phase == "Pending" && !terminating {
            t.starting += 1;
        }
        if phase != "Running" && !terminating {
            continue;
        }
        let mut held = 0u32;
        let mut mig = 0u32;
        for c in &spec.containers {
            let lim = c.resources.as_ref().and_then(|r| r.limits.as_ref());
            held += count_of(lim.and_then(|l| l.get("nvidia.com/gpu"))) as u32;
            let mig_limits = lim.into_iter().flatten().filter(|(k, _)| k.starts_with("nvidia.com/mig-"));
            mig += mig_limits.map(|(_, v)| count_of(Some(v)) as u32).sum::<u32>();
        }
        if mig > 0 {
            *t.mig_held.entry(node.clone()).or_default() += mig;
            t.mig_total += mig;
        }
        for rc in spec.resource_claims.iter().flatten() {
            let Some(claim) = &rc.resource_claim_name else { continue };
            if let Some(u) = claim_alloc.get(&format!("{ns}/{claim}")) {
                held += u.len() as u32;
                if let Some(first) = u.first() {
                    t.dra.insert(format!("{ns}/{name}"), first.clone());
                }
            }
        }
        *t.allocated.entry(node).or_default() += held;
    }
    for q in &quotas {
        let key = format!(
            "{}/{}",
            q.metadata.namespace.clone().unwrap_or_default(),
            q.metadata.name.clone().unwrap_or_default()
        );
        let k = "requests.nvidia.com/gpu";
        if let Some(h) = q.spec.as_ref().and_then(|s| s.hard.as_ref()).and_then(|h| h.get(k)) {
            t.quota_hard.insert(key.clone(), count_of(Some(h)));
            t.quota_used.insert(key, count_of(q.status.as_ref().and_then(|s| s.used.as_ref()).and_then(|u| u.get(k))));
        }
    }
    for n in &nss {
        if let Some(tn) = n.metadata.labels.as_ref().and_then(|l| l.get("fabrik.io/tenant")) {
            t.tenants.insert(tn.clone());
        }
    }
    Ok(t)
}

/// The same facts, read from the cockpit's model.
fn seen(f: &Fleet) -> Truth {
    let mut t = Truth::default();
    for n in f.nodes.values() {
        let name = f.str_of(n.name).to_string();
        let gpus = n.gpus.len() as u32;
        t.nodes.insert(name.clone(), (n.ready, gpus));
    }
    for p in f.pods.values() {
        let key = format!("{}/{}", f.str_of(p.namespace), p.name);
        t.pods.insert(key.clone());
        let Some(node) = p.node.and_then(|n| f.node(n)) else { continue };
        if !(p.phase == Phase::Running || p.phase == Phase::Terminating) {
            continue;
        }
        let held = p.gpus as u32 + p.dra.iter().filter(|c| c.allocated.is_some()).map(|c| c.count as u32).sum::<u32>();
        *t.allocated.entry(f.str_of(node.name).to_string()).or_default() += held;
        if let Some(a) = p.dra.iter().find_map(|c| c.allocated) {
            t.dra.insert(key, f.str_of(a).to_string());
        }
    }
    // MIG instances held, as the views count them: bound to a pod, or held by one without a
    // known instance (no node agent here).
    for n in f.nodes.values() {
        let bound: u32 = n.gpus.iter().filter_map(|g| f.gpu(*g)).map(|g| g.mig_in_use()).sum();
        let held = bound + n.mig_unbound_total();
        if held > 0 {
            t.mig_held.insert(f.str_of(n.name).to_string(), held);
        }
    }
    t.mig_total = f.totals.mig_allocated;
    for q in f.quotas.values() {
        if f.str_of(q.resource) != "requests.nvidia.com/gpu" {
            continue;
        }
        if let fabrik::model::QuotaSource::ResourceQuota { namespace, name } = &q.source {
            let key = format!("{}/{}", f.str_of(*namespace), f.str_of(*name));
            t.quota_hard.insert(key.clone(), q.hard.value());
            t.quota_used.insert(key, q.used.value());
        }
    }
    for tn in f.tenants.values() {
        if f.str_of(tn.source) == "label" {
            t.tenants.insert(f.str_of(tn.name).to_string());
        }
    }
    t
}

fn diff(model: &Truth, api: &Truth) -> Result<(), String> {
    let mut out = Vec::new();
    macro_rules! cmp {
        ($f:ident) => {
            if model.$f != api.$f {
                out.push(format!("{}: model {:?} vs API {:?}", stringify!($f), model.$f, api.$f));
            }
        };
    }
    cmp!(nodes);
    cmp!(allocated);
    cmp!(mig_held);
    cmp!(mig_total);
    cmp!(pods);
    cmp!(quota_used);
    cmp!(quota_hard);
    cmp!(tenants);
    cmp!(dra);
    if out.is_empty() { Ok(()) } else { Err(out.join("\n")) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_converges_to_the_api_after_start_and_churn() {
    let dir = std::env::temp_dir().join(format!("fabrik-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (cp, kubeconfig) = control_plane(&dir);
    let _sim = sim(&kubeconfig, &dir);
    let conn = fabrik::cluster::connect(Some(&kubeconfig), None).await.unwrap_or_else(|e| panic!("{e}"));
    let client = conn.client.clone();

    // Start-up: everything the API holds, the model holds.
    let watch_lists_before = watch_lists(&client, "events").await;
    let mut m = Model::start(client.clone());
    m.converge("after start-up", Duration::from_secs(90), |f| {
        let c = client.clone();
        let snapshot = seen(f);
        async move {
            let api = truth(&c).await?;
            // The factory is up once every placed pod has started and the scheduler has
            // allocated DRA claims; until then the model may agree with a moving target.
            if api.starting > 0 || api.dra.is_empty() || api.mig_total == 0 {
                return Err(format!(
                    "{} pods still starting, {} DRA allocations, {} MIG instances held",
                    api.starting,
                    api.dra.len(),
                    api.mig_total
                ));
            }
            diff(&snapshot, &api)
        }
    })
    .await;
    let api = truth(&client).await.expect("read the API");
    assert_eq!(api.nodes.len(), NODES as usize, "fabrik sim registers {NODES} nodes: {:?}", api.nodes.keys());
    assert!(api.nodes.values().all(|(_, g)| *g == 8), "8 GPUs per node: {:?}", api.nodes);
    assert!(api.allocated.values().sum::<u32>() > 0, "the scheduler placed GPU pods: {api:?}");
    assert!(!api.dra.is_empty(), "at least one DRA claim was allocated by the scheduler: {api:?}");
    assert!(api.tenants.len() >= 3, "tenants from namespace labels: {:?}", api.tenants);
    assert!(!api.quota_used.is_empty(), "GPU quotas exist: {api:?}");
    // The feed took its initial state as watch-lists (issue 18): the server counts one more
    // for Events, which nothing else on this control plane watches.
    let watch_lists_after = watch_lists(&client, "events").await;
    assert!(
        watch_lists_after > watch_lists_before,
        "the feed's Events watch should be a watch-list (sendInitialEvents): the server counted \
         {watch_lists_before} before the feed started and {watch_lists_after} after"
    );
    fresh_writes_are_in_the_next_watch_list(&client).await;

    // A node agent (the fake backend, as `fabrik agent --fake 8` on that node) streams
    // into the same model: the node's GPUs, announced by labels only, get its telemetry.
    let label_node = api
        .nodes
        .keys()
        .find(|n| {
            m.fleet.node_by_name(n).and_then(|id| m.fleet.node(id)).is_some_and(|nd| {
                nd.gpus.iter().filter_map(|g| m.fleet.gpu(*g)).all(|g| m.fleet.str_of(g.uuid).starts_with(n.as_str()))
            })
        })
        .cloned()
        .expect("a node whose GPUs come from labels");
    let port =
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port");
    let agent_log = dir.join("agent.log");
    let agent = Command::new(BIN)
        .args([
            "agent",
            "--fake",
            "8",
            "--node",
            &label_node,
            "--interval",
            "500ms",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&agent_log).map(Stdio::from).unwrap_or(Stdio::null()))
        .spawn()
        .expect("start fabrik agent");
    let _agent = Proc { child: agent, what: "fabrik agent" };
    let _agent_feed = tokio::spawn(fabrik::feed::agent_stream::run(
        format!("http://127.0.0.1:{port}"),
        Duration::from_millis(500),
        m.tx.clone(),
    ));
    m.converge("after a node agent started streaming", Duration::from_secs(30), |f| {
        let node = label_node.clone();
        let fed = f
            .node_by_name(&node)
            .and_then(|id| f.node(id))
            .map(|n| n.gpus.iter().filter_map(|g| f.gpu(*g)).filter(|g| g.last_sample_at.is_some()).count())
            .unwrap_or(0);
        async move { if fed == 8 { Ok(()) } else { Err(format!("{fed} of 8 GPUs of {node} have telemetry")) } }
    })
    .await;
    let others = m
        .fleet
        .gpus
        .values()
        .filter(|g| g.last_sample_at.is_some())
        .filter(|g| m.fleet.node(g.node).is_some_and(|n| m.fleet.str_of(n.name) != label_node))
        .count();
    assert_eq!(others, 0, "only the agent's node has telemetry");

    // Churn 1: a pod created (in a new tenant's namespace) and one deleted.
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns_obj: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "e2e-churn", "labels": {"fabrik.io/tenant": "e2e"}}}))
            .expect("namespace json");
    nss.create(&PostParams::default(), &ns_obj).await.expect("create namespace e2e-churn");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "e2e-churn");
    let new_pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "e2e-added", "labels": {"app": "e2e"}},
        "spec": {"containers": [{"name": "c", "image": "busybox",
                 "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}}]}
    }))
    .expect("pod json");
    // The default ServiceAccount comes from the controller manager; retry until it exists.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match pods.create(&PostParams::default(), &new_pod).await {
            Ok(_) => break,
            Err(e) if Instant::now() < deadline => {
                eprintln!("create e2e-churn/e2e-added: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("create e2e-churn/e2e-added: {e}"),
        }
    }
    let ns = api.tenants.iter().next().cloned().unwrap_or_default();
    let ns = nss
        .list(&ListParams::default().labels(&format!("fabrik.io/tenant={ns}")))
        .await
        .ok()
        .and_then(|l| l.items.first().and_then(|n| n.metadata.name.clone()))
        .expect("a tenant namespace");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let victim = api.pods.iter().find(|p| p.starts_with(&format!("{ns}/")) && !p.ends_with("/e2e-added")).cloned();
    if let Some(v) = &victim {
        let name = v.split('/').nth(1).unwrap_or_default().to_string();
        pods.delete(&name, &DeleteParams::default()).await.expect("delete a pod");
    }
    m.converge("after a pod was created and one deleted", Duration::from_secs(60), |f| {
        let c = client.clone();
        let snapshot = seen(f);
        let victim = victim.clone();
        async move {
            let api = truth(&c).await?;
            if let Some(v) = &victim
                && api.pods.contains(v)
            {
                return Err(format!("{v} is still in the API"));
            }
            if !api.tenants.contains("e2e") {
                return Err("tenant e2e not in the API yet".into());
            }
            let added = c.clone();
            let running = Api::<Pod>::namespaced(added, "e2e-churn")
                .get("e2e-added")
                .await
                .ok()
                .and_then(|p| p.status.and_then(|s| s.phase))
                .is_some_and(|ph| ph == "Running");
            if !running {
                return Err("e2e-churn/e2e-added is not Running yet".into());
            }
            diff(&snapshot, &api)
        }
    })
    .await;

    // Churn 2: a node goes NotReady (the simulated kubelet stops reporting).
    let target = api.nodes.keys().next().cloned().expect("a node");
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            &target,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"fabrik.io/sim-fault": "notready"}}})),
        )
        .await
        .expect("annotate the node");
    m.converge("after a node went NotReady", Duration::from_secs(60), |f| {
        let c = client.clone();
        let snapshot = seen(f);
        let target = target.clone();
        async move {
            if snapshot.nodes.get(&target).is_some_and(|(ready, _)| *ready) {
                return Err(format!("{target} is still Ready in the model"));
            }
            diff(&snapshot, &truth(&c).await?)
        }
    })
    .await;

    // Churn 3: a quota changed behind the cockpit's back (as `kubectl edit` would).
    let quotas = Api::<ResourceQuota>::all(client.clone()).list(&ListParams::default()).await.expect("list quotas");
    let q = quotas
        .items
        .iter()
        .find(|q| {
            q.spec.as_ref().and_then(|s| s.hard.as_ref()).is_some_and(|h| h.contains_key("requests.nvidia.com/gpu"))
        })
        .expect("a GPU quota");
    let (qns, qname) = (q.metadata.namespace.clone().unwrap_or_default(), q.metadata.name.clone().unwrap_or_default());
    let old = count_of(q.spec.as_ref().and_then(|s| s.hard.as_ref()).and_then(|h| h.get("requests.nvidia.com/gpu")));
    let new = old + 5;
    Api::<ResourceQuota>::namespaced(client.clone(), &qns)
        .patch(
            &qname,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"hard": {"requests.nvidia.com/gpu": new.to_string()}}})),
        )
        .await
        .expect("patch the quota");
    let key = format!("{qns}/{qname}");
    m.converge("after a quota was changed", Duration::from_secs(60), |f| {
        let c = client.clone();
        let snapshot = seen(f);
        let key = key.clone();
        async move {
            if snapshot.quota_hard.get(&key) != Some(&new) {
                return Err(format!("{key} hard is {:?} in the model, want {new}", snapshot.quota_hard.get(&key)));
            }
            diff(&snapshot, &truth(&c).await?)
        }
    })
    .await;

    // Churn 4 (issue 14 item 1): a burst of Events and pods; the restart below then makes
    // every watch relist (the new server's watch cache cannot serve the old versions).
    let before_burst = burst(&client, &mut m, &kubeconfig).await;

    // Churn 4: the API server restarts (same address, same etcd data, same credentials).
    // The model says it is reconnecting while the server is away, then converges again.
    let kc = std::fs::read_to_string(&kubeconfig).expect("read the kubeconfig");
    let port = kc
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: https://127.0.0.1:"))
        .map(|p| p.trim().to_string())
        .expect("the kubeconfig names the server");
    drop(cp);
    let down = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(batch) = tokio::time::timeout(Duration::from_millis(500), m.rx.recv()).await {
            for d in batch.into_iter().flatten() {
                m.fleet.apply(d);
            }
        }
        let troubled = m.fleet.feeds.values().filter(|s| matches!(s, FeedState::Reconnecting { .. })).count();
        if troubled > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the model never said it was reconnecting: {:?}", m.fleet.feeds);
    }
    // A long outage, as in an incident (the API server away for 40 s): the watches' waits
    // between tries must not have grown so long that the cockpit misses the server's return.
    while down.elapsed() < Duration::from_secs(40) {
        if let Ok(batch) = tokio::time::timeout(Duration::from_millis(500), m.rx.recv()).await {
            for d in batch.into_iter().flatten() {
                m.fleet.apply(d);
            }
        }
    }
    // It comes back refusing watch-lists (`WatchList=false`, the 1.33 default): the feed's
    // relists start as watch-lists, are refused, and fall back to paged lists, kind by kind.
    let (_cp, kubeconfig2) =
        control_plane_with(&dir, &["--keep", "--port", &port, "--apiserver-feature-gates", "WatchList=false"]);
    assert_eq!(kubeconfig2, kubeconfig);
    match Api::<Namespace>::all(client.clone()).watch(&WatchParams::streaming_lists(), "0").await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 422, "the restarted server refuses watch-lists: {s:?}"),
        Err(e) => panic!("the restarted server should answer a watch-list with 422, got {e}"),
        Ok(_) => panic!("the restarted server should refuse watch-lists (WatchList=false), and it started one"),
    }
    // From the server's READY to the model live and equal to what the server holds: the
    // reconnect waits are capped at 2 s (4 s with jitter), so this is a few seconds; with
    // kube-rs's default backoff (30 s cap, reset only 120 s after its last wait) a 40 s
    // outage left watches waiting half a minute more after the server was back.
    let back = Instant::now();
    m.converge("after the API server restarted", Duration::from_secs(90), |f| {
        let c = client.clone();
        let snapshot = seen(f);
        let troubled: Vec<String> =
            f.feeds.iter().filter(|(_, s)| **s != FeedState::Live).map(|(k, s)| format!("{k}: {s:?}")).collect();
        async move {
            if !troubled.is_empty() {
                return Err(format!("feeds not live again: {troubled:?}"));
            }
            diff(&snapshot, &truth(&c).await?)
        }
    })
    .await;
    let took = back.elapsed();
    eprintln!(
        "API server away {:.0} s; the model live and converged {:.1} s after it answered again",
        (down.elapsed() - took).as_secs_f64(),
        took.as_secs_f64()
    );
    assert!(took < Duration::from_secs(20), "the cockpit took {took:?} to see the API server again after it returned");
    // The relist passed every Event again: none was added to the history twice.
    let after = burst_events(&m.fleet);
    let distinct: BTreeSet<&(String, String)> = after.iter().collect();
    assert_eq!(distinct.len(), after.len(), "after the relist, no event is in the history twice");
    // Events that happened meanwhile (the restart's own) may have pushed the oldest out of
    // the ring; the rest are the same, in the same order, and none was added again.
    let was: BTreeSet<&(String, String)> = before_burst.events.iter().collect();
    let new: Vec<&(String, String)> = after.iter().filter(|e| !was.contains(e)).collect();
    let tail = &before_burst.events[before_burst.events.len().saturating_sub(after.len())..];
    let first_diff = tail.iter().zip(&after).position(|(a, b)| a != b);
    assert!(
        before_burst.events.ends_with(&after) && after.len() + 200 >= before_burst.events.len(),
        "the relist added no burst event again: {} before, {} after; {} not seen before ({:?}); first difference at \
         {first_diff:?}: {:?}",
        before_burst.events.len(),
        after.len(),
        new.len(),
        new.iter().take(3).collect::<Vec<_>>(),
        first_diff.map(|i| (&tail[i], &after[i]))
    );
    let interned = m.fleet.interner.len();
    assert!(
        interned <= before_burst.interned_after + 20,
        "the relist grew the interner: {} → {interned}",
        before_burst.interned_after
    );
    eprintln!(
        "burst: RSS {} → {} MiB (after the burst) → {} MiB (after the relist); interner {} → {} → {interned} strings; \
         {} burst events in the history of {}",
        before_burst.rss_mib.0,
        before_burst.rss_mib.1,
        rss_mib(),
        before_burst.interned_before,
        before_burst.interned_after,
        after.len(),
        fabrik::model::fleet::EVENT_CAPACITY
    );

    // The real binary, in a real terminal, on this control plane.
    tmux_shows_the_fleet(&kubeconfig, NODES);

    // A user who may read nodes but nothing else: the cockpit lists what it may, marks the
    // rest stale with the reason, and is not stuck "loading".
    forbidden_kinds_are_stale_not_fatal(&client, &kubeconfig).await;
    // And the one-shot snapshot agrees on the node count.
    let out = Command::new(BIN)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["snapshot", "--view", "fleet", "--format", "json"])
        .output()
        .expect("fabrik snapshot");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("snapshot JSON");
    assert_eq!(doc["rows"].as_array().map(|r| r.len()), Some(NODES as usize), "{doc}");
}

/// How many watch-lists of `resource` the API server has finished sending the initial state
/// of (`apiserver_watch_list_duration_seconds_count`, summed over scopes).
/// The names a watch-list's initial events hold (up to its end mark).
async fn initial_names<S>(events: S) -> BTreeSet<String>
where
    S: futures::Stream<Item = Result<kube::runtime::watcher::Event<ConfigMap>, kube::runtime::watcher::Error>>,
{
    use futures::StreamExt;
    use kube::runtime::watcher::Event;
    let mut events = Box::pin(events);
    let mut names = BTreeSet::new();
    while let Some(e) = tokio::time::timeout(Duration::from_secs(30), events.next()).await.expect("a watch-list event")
    {
        match e {
            Ok(Event::InitApply(c)) => {
                names.insert(c.metadata.name.unwrap_or_default());
            }
            Ok(Event::InitDone) => break,
            Ok(_) => {}
            Err(e) => panic!("the watch-list failed: {e}"),
        }
    }
    names
}

/// A watch-list started right after a write holds that write: the feed's watch-lists are
/// consistent reads (no `resourceVersion`), as client-go's. kube-rs's `streaming_lists()`
/// asks for `resourceVersion=0`, any state the watch cache holds; how often that missed the
/// write is printed for comparison, not asserted (it depends on the cache's lag).
async fn fresh_writes_are_in_the_next_watch_list(client: &kube::Client) {
    use kube::runtime::watcher;
    let api = Api::<ConfigMap>::namespaced(client.clone(), "default");
    let rounds = 30;
    let mut stale = 0;
    for i in 0..rounds {
        let name = format!("fresh-{i}");
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"fabrik.test/fresh": "true"}}
        }))
        .expect("a ConfigMap");
        api.create(&PostParams::default(), &cm).await.expect("create a ConfigMap");
        let ours =
            initial_names(fabrik::feed::kube::watchlist::watch_list(api.clone(), &watcher::Config::default())).await;
        assert!(ours.contains(&name), "the watch-list started after creating {name} lacks it: {ours:?}");
        let name = format!("fresh-any-{i}");
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {"fabrik.test/fresh": "true"}}}))
                .expect("a ConfigMap");
        api.create(&PostParams::default(), &cm).await.expect("create a ConfigMap");
        let any = initial_names(watcher::watcher(api.clone(), watcher::Config::default().streaming_lists())).await;
        stale += usize::from(!any.contains(&name));
    }
    eprintln!(
        "fresh writes: the feed's watch-lists held {rounds} of {rounds}; kube-rs's resourceVersion=0 \
         watch-lists missed {stale} of {rounds}"
    );
    api.delete_collection(&DeleteParams::default(), &ListParams::default().labels("fabrik.test/fresh=true"))
        .await
        .expect("delete the ConfigMaps");
}

async fn watch_lists(client: &kube::Client, resource: &str) -> u64 {
    let req = http::Request::get("/metrics").body(Vec::new()).expect("a request");
    let text = client.request_text(req).await.expect("the API server's /metrics");
    let label = format!("resource=\"{resource}\"");
    text.lines()
        .filter(|l| l.starts_with("apiserver_watch_list_duration_seconds_count{") && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

fn tmux_shows_the_fleet(kubeconfig: &Path, nodes: u32) {
    let socket = format!("fabrik-e2e-tmux-{}", std::process::id());
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux (CI installs it)")
    };
    let home = std::env::temp_dir().join(&socket);
    let _ = std::fs::create_dir_all(home.join("config"));
    // `E` hands the object to `kubectl edit`; this editor adds a label to the first
    // `labels:` under metadata, as a person would, and saves.
    let editor = home.join("editor.sh");
    std::fs::write(
        &editor,
        "#!/bin/sh\nsed -i -e '0,/^  labels:$/s//  labels:\\n    fabrik-e2e-edited: by-kubectl-edit/' \"$1\"\n",
    )
    .expect("write the editor script");
    let _ = Command::new("chmod").arg("+x").arg(&editor).status();
    let cmd = format!(
        "HOME={} XDG_CONFIG_HOME={} KUBE_EDITOR={} {BIN} --kubeconfig {}",
        home.display(),
        home.join("config").display(),
        editor.display(),
        kubeconfig.display()
    );
    let o = tmux(&["new-session", "-d", "-s", "fabrik", "-x", "160", "-y", "45", &cmd]);
    assert!(o.status.success(), "tmux new-session: {}", String::from_utf8_lossy(&o.stderr));
    let deadline = Instant::now() + Duration::from_secs(30);
    let want = format!("nodes {nodes}/{nodes} ready");
    let want_after = format!("nodes {}/{nodes} ready", nodes - 1);
    let mut screen = String::new();
    while Instant::now() < deadline {
        screen = String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", "fabrik"]).stdout).into_owned();
        // One node was made NotReady above.
        if screen.contains("ctx admin")
            && (screen.contains(&want) || screen.contains(&want_after))
            && screen.contains("[live]")
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let fleet_screen = screen.clone();
    // Issue 16: `y` on the selected node shows it as the API server holds it, and `:kubectl`
    // runs with the cockpit's context; both checked against kubectl here.
    let wait_for = |what: &dyn Fn(&str) -> bool| -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", "fabrik"]).stdout).into_owned();
            if what(&s) || Instant::now() > deadline {
                return s;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let first_row = fleet_screen.lines().skip_while(|l| !l.contains("NAME")).nth(1).unwrap_or("").to_string();
    let node = first_row.trim_start_matches(['│', ' ', '▶']).split_whitespace().next().unwrap_or("").to_string();
    let _ = tmux(&["send-keys", "-t", "fabrik", "y"]);
    let pane = wait_for(&|s: &str| s.contains("kind: Node"));
    let _ = tmux(&["send-keys", "-t", "fabrik", "Escape"]);
    let _ = tmux(&["send-keys", "-t", "fabrik", ":kubectl get nodes -o name", "Enter"]);
    let listed = wait_for(&|s: &str| s.contains("$ kubectl get nodes -o name") && s.contains("(exit 0,"));
    let _ = tmux(&["send-keys", "-t", "fabrik", "Escape"]);
    // `x`: the terminal goes to `kubectl exec -it` in a running pod and comes back. These
    // nodes' simulated kubelets serve logs, not exec, so kubectl fails, says why, and fabrik waits
    // for Enter before it takes the terminal back.
    let _ = tmux(&["send-keys", "-t", "fabrik", "5", "/"]);
    let _ = tmux(&["send-keys", "-t", "fabrik", "-l", "Running"]);
    let _ = tmux(&["send-keys", "-t", "fabrik", "Enter"]);
    let pods = wait_for(&|s: &str| s.contains("Pods [") && s.contains(" Running "));
    let _ = tmux(&["send-keys", "-t", "fabrik", "x"]);
    let handed = wait_for(&|s: &str| s.contains("press Enter to return to fabrik"));
    let on_main_screen =
        String::from_utf8_lossy(&tmux(&["display-message", "-p", "-t", "fabrik", "#{alternate_on}"]).stdout)
            .trim()
            .to_string();
    // ctrl-c at the prompt was meant for the hand-off, not the cockpit: Enter still returns.
    let _ = tmux(&["send-keys", "-t", "fabrik", "C-c"]);
    std::thread::sleep(Duration::from_millis(300));
    let _ = tmux(&["send-keys", "-t", "fabrik", "Enter"]);
    let back = wait_for(&|s: &str| s.contains("Pods [") && s.contains("kubectl exited with status"));
    let on_alt_screen =
        String::from_utf8_lossy(&tmux(&["display-message", "-p", "-t", "fabrik", "#{alternate_on}"]).stdout)
            .trim()
            .to_string();
    // `L`: the selected running pod's log, streamed through the API server from the sim's
    // kubelet endpoint, following; g shows its first line, which kubectl reads too.
    let _ = tmux(&["send-keys", "-t", "fabrik", "L"]);
    let following = wait_for(&|s: &str| s.contains("logs pod/") && s.contains("following") && s.contains(" of "));
    let _ = tmux(&["send-keys", "-t", "fabrik", "g"]);
    let log_top = wait_for(&|s: &str| s.contains("· 1-"));
    let _ = tmux(&["send-keys", "-t", "fabrik", "Escape"]);
    // Back on the pods view before the next key: an Escape and a key sent together read as alt-key.
    let _ = wait_for(&|s: &str| s.contains("Pods [") && !s.contains("logs pod/"));
    // `R` on the same pod: the reclaim preview names its owner and what it frees; `n` sends nothing.
    let _ = tmux(&["send-keys", "-t", "fabrik", "R"]);
    // The whole preview, not its title alone: a capture can land while the frame is being drawn.
    let reclaim = wait_for(&|s: &str| s.contains("Reclaim the GPUs of") && s.contains("done when"));
    let _ = tmux(&["send-keys", "-t", "fabrik", "n"]);
    let after_no = wait_for(&|s: &str| !s.contains("Reclaim the GPUs of"));
    // `E` on the same pod: kubectl edit in the editor above, and the cockpit back after.
    let _ = tmux(&["send-keys", "-t", "fabrik", "E"]);
    // (The main screen still shows the x hand-off's prompt: only the cockpit's word counts.)
    let edited = wait_for(&|s: &str| s.contains("back from kubectl"));
    let _ = tmux(&["send-keys", "-t", "fabrik", "q"]);
    std::thread::sleep(Duration::from_millis(300));
    let _ = tmux(&["kill-server"]);
    let _ = std::fs::remove_dir_all(&home);
    let title = following.lines().find(|l| l.contains("logs pod/")).unwrap_or("");
    let which = title.split("logs pod/").nth(1).and_then(|r| r.split_whitespace().next()).unwrap_or("");
    let (log_ns, log_pod) = which.split_once('/').expect("the logs title names pod/NS/NAME");
    let kubectl_log = common::kubectl(kubeconfig, &["logs", log_pod, "-n", log_ns]);
    let first_line = kubectl_log.lines().next().unwrap_or("(kubectl read no lines)");
    let pane_first = log_top.lines().skip_while(|l| !l.contains("logs pod/")).nth(1).unwrap_or("");
    assert!(
        pane_first.trim_start_matches(['│', ' ']).starts_with(first_line),
        "the pane's first line is kubectl's {first_line:?}:\n{log_top}"
    );
    assert!(reclaim.contains(&format!("Reclaim the GPUs of {log_ns}/{log_pod}")), "R on {log_pod}:\n{reclaim}");
    assert!(reclaim.contains("frees ") && reclaim.contains("done when"), "the preview says what it frees:\n{reclaim}");
    assert!(!after_no.contains("Reclaim the GPUs of"), "n closes the preview:\n{after_no}");
    let still = common::kubectl(kubeconfig, &["get", "pod", log_pod, "-n", log_ns, "-o", "name"]);
    assert_eq!(still.trim(), format!("pod/{log_pod}"), "a cancelled preview sends nothing");
    assert!(edited.contains("back from kubectl"), "kubectl edit ran and the cockpit took the terminal back:\n{edited}");
    let label = common::kubectl(
        kubeconfig,
        &["get", "pod", log_pod, "-n", log_ns, "-o", "jsonpath={.metadata.labels.fabrik-e2e-edited}"],
    );
    assert_eq!(label.trim(), "by-kubectl-edit", "kubectl reads the label the editor wrote through E");
    assert!(!node.is_empty(), "a node row on the fleet view:\n{fleet_screen}");
    assert!(pane.contains(&format!("node/{node}")) && pane.contains("kind: Node"), "y on {node}:\n{pane}");
    // (The YAML itself is compared with kubectl's in crosscheck_e2e's `fabrik describe`.)
    assert!(pods.contains(" Running "), "a running pod to open a shell in:\n{pods}");
    assert!(handed.contains("fabrik: kubectl") && handed.contains("exec -it -n "), "the hand-off:\n{handed}");
    assert_eq!(on_main_screen, "0", "kubectl runs on the main screen:\n{handed}");
    assert!(back.contains("Pods [") && back.contains("kubectl exited with status 1"), "taken back:\n{back}");
    assert_eq!(on_alt_screen, "1", "the cockpit is back on the alternate screen:\n{back}");
    let want = common::kubectl(kubeconfig, &["get", "nodes", "-o", "name"]);
    for n in want.lines().take(30) {
        assert!(listed.contains(n), ":kubectl get nodes lists {n}:\n{listed}");
    }
    assert!(screen.contains("ctx admin"), "the header names the context:\n{screen}");
    assert!(screen.contains("[live]"), "the connection is live:\n{screen}");
    assert!(screen.contains(&want) || screen.contains(&want_after), "the fleet of {nodes} nodes shows:\n{screen}");
    assert!(screen.contains("GPUs"), "{screen}");
}

/// A ServiceAccount allowed to list and watch nodes only, its token from the TokenRequest API,
/// and the feed run with it.
async fn forbidden_kinds_are_stale_not_fatal(admin: &kube::Client, kubeconfig: &Path) {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let pp = PostParams::default();
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "nodes-only", "namespace": "default"}})).expect("sa json");
    Api::<ServiceAccount>::namespaced(admin.clone(), "default")
        .create(&pp, &sa)
        .await
        .expect("create the ServiceAccount");
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "fabrik-e2e-nodes-only"},
        "rules": [{"apiGroups": [""], "resources": ["nodes", "namespaces"], "verbs": ["get", "list", "watch"]}]
    }))
    .expect("role json");
    Api::<ClusterRole>::all(admin.clone()).create(&pp, &role).await.expect("create the ClusterRole");
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "fabrik-e2e-nodes-only"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "fabrik-e2e-nodes-only"},
        "subjects": [{"kind": "ServiceAccount", "name": "nodes-only", "namespace": "default"}]
    }))
    .expect("binding json");
    Api::<ClusterRoleBinding>::all(admin.clone()).create(&pp, &binding).await.expect("create the binding");
    let req: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 3600}})).expect("token json");
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), "default")
        .create_subresource::<TokenRequest, TokenRequest>("token", "nodes-only", &pp, &req)
        .await
        .expect("request a token")
        .status
        .map(|s| s.token)
        .expect("a token");
    // The admin kubeconfig with the user's token swapped for the ServiceAccount's.
    let path = crate::common::kubeconfig_with_token(kubeconfig, &token, "nodes-only");
    let conn = fabrik::cluster::connect(Some(&path), None).await.unwrap_or_else(|e| panic!("{e}"));
    let fleet = fabrik::live::load_fleet(
        conn.client,
        KubeFeedConfig::default(),
        Thresholds::default(),
        Duration::from_secs(60),
    )
    .await
    .unwrap_or_else(|e| panic!("the listing must complete with what the user may see: {e}"));
    assert_eq!(fleet.totals.nodes, NODES, "nodes are allowed and listed");
    assert_eq!(fleet.totals.pods, 0, "pods are not allowed");
    let stale: BTreeSet<&str> = fleet
        .feeds
        .iter()
        .filter(|(_, s)| matches!(s, FeedState::Stale { reason, .. } if reason.contains("forbidden")))
        .map(|(k, _)| k.as_str())
        .collect();
    for kind in ["pods", "resourcequotas", "events", "resourceslices"] {
        assert!(stale.contains(kind), "{kind} should be stale (forbidden): {:?}", fleet.feeds);
    }
    assert!(!stale.contains("nodes"), "{:?}", fleet.feeds);
    let told = fleet.events.iter().any(|e| e.message.contains("kubectl auth can-i watch pods"));
    assert!(told, "the events say how to get the right");
}

/// What the burst left, to compare after the relist.
struct Burst {
    events: Vec<(String, String)>,
    interned_before: usize,
    interned_after: usize,
    rss_mib: (u64, u64),
}

/// This process's resident memory (the model and the feed are in it), MiB.
fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

/// The burst's events in the model's history, (object, start of message), in order.
fn burst_events(f: &Fleet) -> Vec<(String, String)> {
    f.events
        .iter()
        .filter(|e| e.object.starts_with("pod/burst/"))
        .map(|e| (e.object.clone(), e.message.chars().take(40).collect()))
        .collect()
}

const BURST_EVENTS: usize = 10_000;
const BURST_PODS: usize = 5_000;

/// 10,000 Events (one in 500 with a 1 MB message) and 5,000 pods created and deleted in a
/// namespace of their own, as fast as 16 clients at once get them in; the model converges to
/// the API, keeps a bounded history (each message cut to 4 KiB) and does not intern what the
/// burst made up.
async fn burst(client: &kube::Client, m: &mut Model, kubeconfig: &Path) -> Burst {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Event;
    m.converge("before the burst", Duration::from_secs(60), |_| async { Ok(()) }).await;
    let (rss0, interned_before) = (rss_mib(), m.fleet.interner.len());
    // The real binary watches too, on the events view, timing every batch and frame.
    let t = Tmux::start();
    let trace = t.home.join("burst-trace.log");
    let env = [format!("HOME={}", t.home.display()), format!("FABRIK_TRACE={}", trace.display())];
    let cmd = format!("{BIN} --kubeconfig {}", kubeconfig.display());
    t.ok(&session(&[&env[0], &env[1]], &[&cmd]));
    t.wait_screen_for("the cockpit, live", Duration::from_secs(60), |s| s.contains("[live]"));
    t.keys(&[":"]);
    t.literal("events");
    t.keys(&["Enter"]);
    t.wait_screen_for("the events view", Duration::from_secs(30), |s| s.contains("REASON"));
    let traced_from = std::fs::read_to_string(&trace).map(|t| t.lines().count()).unwrap_or(0);
    let gen0 = m.fleet.events_gen;
    let pp = PostParams::default();
    Api::<Namespace>::all(client.clone())
        .create(&pp, &serde_json::from_value(json!({"metadata": {"name": "burst"}})).expect("ns json"))
        .await
        .expect("create the burst namespace");
    let t0 = Instant::now();
    let events: Api<Event> = Api::namespaced(client.clone(), "burst");
    let now = jiff::Timestamp::now().to_string();
    let made = futures::stream::iter(0..BURST_EVENTS)
        .map(|i| {
            let events = events.clone();
            let now = now.clone();
            async move {
                let message = if i % 500 == 0 { "x".repeat(1_000_000) } else { format!("burst event {i}") };
                let e: Event = serde_json::from_value(json!({
                    "metadata": {"name": format!("burst-{i}")},
                    "involvedObject": {"kind": "Pod", "namespace": "burst", "name": format!("job-{i}")},
                    "reason": format!("Burst{}", i % 50), "message": message, "type": "Warning",
                    "firstTimestamp": now, "lastTimestamp": now, "count": 1,
                    "source": {"component": "fabrik-e2e"}
                }))
                .expect("event json");
                events.create(&PostParams::default(), &e).await.map_err(|e| format!("event {i}: {e}"))
            }
        })
        .buffer_unordered(16)
        .filter_map(|r| async move { r.err() })
        .collect::<Vec<String>>()
        .await;
    assert!(made.is_empty(), "{} events refused: {:?}", made.len(), made.first());
    let events_took = t0.elapsed();
    // The pods name a scheduler nobody runs: they stay unbound, and go at once when deleted.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "burst");
    let t1 = Instant::now();
    let failed = futures::stream::iter(0..BURST_PODS)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let p: Pod = serde_json::from_value(json!({
                    "metadata": {"name": format!("job-{i}")},
                    "spec": {"schedulerName": "fabrik-e2e-nobody", "containers": [{"name": "c", "image": "none"}]}
                }))
                .expect("pod json");
                let mut tries = 0;
                loop {
                    match pods.create(&PostParams::default(), &p).await {
                        Ok(_) => break,
                        // The namespace's ServiceAccount comes from the controller manager.
                        Err(e) if tries < 40 => {
                            let _ = e;
                            tries += 1;
                            tokio::time::sleep(Duration::from_millis(250)).await;
                        }
                        Err(e) => return Err(format!("pod {i}: {e}")),
                    }
                }
                pods.delete(&format!("job-{i}"), &DeleteParams::default())
                    .await
                    .map(|_| ())
                    .map_err(|e| format!("pod {i}: {e}"))
            }
        })
        .buffer_unordered(16)
        .filter_map(|r| async move { r.err() })
        .collect::<Vec<String>>()
        .await;
    assert!(failed.is_empty(), "{} pods failed: {:?}", failed.len(), failed.first());
    let pods_took = t1.elapsed();
    let t2 = Instant::now();
    m.converge("after the burst", Duration::from_secs(180), |f| {
        let c = client.clone();
        let snapshot = seen(f);
        // Every burst event delivered (the history keeps the newest 5,000 of them).
        let delivered = f.events_gen - gen0;
        async move {
            if delivered < BURST_EVENTS as u64 {
                return Err(format!("{delivered} events delivered since the burst began"));
            }
            diff(&snapshot, &truth(&c).await?)
        }
    })
    .await;
    let converged = t2.elapsed();
    let events = burst_events(&m.fleet);
    let distinct: BTreeSet<&(String, String)> = events.iter().collect();
    assert_eq!(distinct.len(), events.len(), "no event is in the history twice");
    let longest = m.fleet.events.iter().map(|e| e.message.len()).max().unwrap_or(0);
    assert!(longest <= fabrik::model::fleet::EVENT_MESSAGE_MAX + 64, "a 1 MB message is cut: {longest} bytes kept");
    let interned_after = m.fleet.interner.len();
    assert!(
        interned_after <= interned_before + 20,
        "the burst's names, reasons and versions are not interned: {interned_before} → {interned_after}"
    );
    let rss1 = rss_mib();
    t.wait_screen_for("the burst on the cockpit's screen", Duration::from_secs(60), |s| s.contains("Burst"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let times = |what: &str| -> Vec<f64> {
        let text = std::fs::read_to_string(&trace).unwrap_or_default();
        let mut v: Vec<f64> = text
            .lines()
            .skip(traced_from)
            .filter_map(|l| l.strip_prefix(what)?.trim().strip_suffix("ms")?.trim().parse().ok())
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let at = |v: &[f64], q: f64| v.get(((v.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(f64::NAN);
    let (batches, draws) = (times("batch "), times("draw "));
    assert!(!draws.is_empty() && !batches.is_empty(), "the cockpit traced its work during the burst");
    eprintln!(
        "burst, the real cockpit on the events view (FABRIK_TRACE): {} batches applied, median {:.2} ms, p99 {:.2} ms, \
         max {:.2} ms; {} frames drawn, median {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        batches.len(),
        at(&batches, 0.5),
        at(&batches, 0.99),
        at(&batches, 1.0),
        draws.len(),
        at(&draws, 0.5),
        at(&draws, 0.99),
        at(&draws, 1.0)
    );
    t.keys(&["q"]);
    eprintln!(
        "burst: {BURST_EVENTS} events in {:.1} s, {BURST_PODS} pods created and deleted in {:.1} s; the model equal \
         to the API {:.1} s later",
        events_took.as_secs_f64(),
        pods_took.as_secs_f64(),
        converged.as_secs_f64()
    );
    Burst { events, interned_before, interned_after, rss_mib: (rss0, rss1) }
}
