//! Node agents through the API server's pod proxy, end to end: the real control plane and
//! `fabrik sim --agents` as the nodes, which runs one `fabrik agent --fake 8` per node and
//! gives each an agent pod reporting the agent's address. The pod proxy refuses loopback
//! addresses, so the sim's agents listen in a network namespace it makes (a veth pair on
//! 10.215.N.0/24); nothing outside this machine is addressed.
//!
//! The cockpit's model, fed by the kube feed and the agent-pod feed exactly as the cockpit
//! is, gets telemetry for the nodes in view only; when the view moves, the streams follow;
//! a stopped agent shows as reconnecting and recovers; and the real binary in tmux shows
//! utilisation for the nodes on screen. `kubectl get --raw` through the same proxy is the
//! independent check that the agent answers there.
//!
//! No skip: without `ip netns` (root, iproute2) `fabrik sim --agents` fails and says why.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fabrik::feed::kube::KubeFeedConfig;
use fabrik::model::{Delta, FeedState, Fleet, Thresholds};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::json;
use tokio::sync::{mpsc, watch};

mod common;
use common::{BIN, Proc, Tmux, control_plane, session};

/// The fourth is the one `--sharing-every 4` shares (time-slicing ×4).
const NODES: usize = 4;
const NS: &str = "fabrik-system";

/// GPUs of `node` with telemetry in the model.
fn fed(f: &Fleet, node: &str) -> usize {
    f.node_by_name(node)
        .and_then(|id| f.node(id))
        .map(|n| n.gpus.iter().filter_map(|g| f.gpu(*g)).filter(|g| g.last_sample_at.is_some()).count())
        .unwrap_or(0)
}

fn last_sample(f: &Fleet, node: &str) -> Option<u64> {
    let n = f.node(f.node_by_name(node)?)?;
    n.gpus.iter().filter_map(|g| f.gpu(*g)).filter_map(|g| g.last_sample_at).max()
}

struct Model {
    fleet: Fleet,
    rx: mpsc::Receiver<Vec<Delta>>,
}

impl Model {
    /// Applies deltas until `check` holds, for at most `timeout`.
    async fn until(&mut self, what: &str, timeout: Duration, check: impl Fn(&Fleet) -> Result<(), String>) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(batch)) = tokio::time::timeout(Duration::from_millis(200), self.rx.recv()).await {
                for d in batch {
                    self.fleet.apply(d);
                }
            }
            match check(&self.fleet) {
                Ok(()) if self.fleet.synced => return,
                Ok(()) => {}
                Err(e) if Instant::now() > deadline => panic!("{what}: not within {timeout:?}: {e}"),
                Err(_) => {}
            }
            assert!(Instant::now() < deadline + Duration::from_secs(1), "{what}: the model never synced");
        }
    }
}

async fn nss_create(c: &kube::Client, ns: &Namespace) {
    match Api::<Namespace>::all(c.clone()).create(&PostParams::default(), ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create namespace: {e}"),
    }
}

/// Creates pod `ns/name` bound to `node`, asking for one `resource` (the namespace's default
/// ServiceAccount comes from the controller manager: retried until it is there).
async fn gpu_pod(c: &kube::Client, ns: &str, name: &str, node: &str, resource: &str) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "none",
                 "resources": {"limits": {resource: "1"}}}]}
    }))
    .expect("pod json");
    let api: Api<Pod> = Api::namespaced(c.clone(), ns);
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Err(e) = api.create(&PostParams::default(), &pod).await {
        assert!(Instant::now() < deadline, "create pod {ns}/{name}: {e}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_stream_through_the_pod_proxy_for_the_nodes_in_view() {
    let dir = std::env::temp_dir().join(format!("fabrik-agents-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (_cp, kubeconfig) = control_plane(&dir);
    let n = NODES.to_string();
    let sim = common::sim(
        &kubeconfig,
        &dir,
        &["--nodes", &n, "--seed", "5", "--dra-every", "0", "--sharing-every", "4", "--agents"],
    );
    let conn = fabrik::cluster::connect(Some(&kubeconfig), None).await.unwrap_or_else(|e| panic!("{e}"));
    let c = conn.client.clone();
    let nodes = common::sim_nodes(&c).await;
    assert_eq!(nodes.len(), NODES);
    let node_json: serde_json::Value =
        serde_json::from_str(&common::kubectl(&kubeconfig, &["get", "nodes", "-o", "json"])).expect("nodes json");
    let shared_node = node_json["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|n| n["metadata"]["labels"]["nvidia.com/gpu.replicas"].as_str().is_some_and(|r| r != "1"))
        .unwrap_or_else(|| panic!("--sharing-every 4 shares a node's GPUs: {node_json}"));
    let shared = shared_node["metadata"]["name"].as_str().expect("node name").to_string();
    // The others' GPUs are whole: the checks before the sharing ones use them.
    let whole: Vec<String> = nodes.iter().filter(|n| **n != shared).cloned().collect();

    // The agent pods, one per node, running with the address of their agent.
    let pods: Api<Pod> = Api::namespaced(c.clone(), NS);
    let deadline = Instant::now() + Duration::from_secs(60);
    let ips: BTreeMap<String, String> = loop {
        let list = pods.list(&ListParams::default().labels(fabrik::feed::agent_discovery::DEFAULT_SELECTOR)).await;
        let list = list.expect("list agent pods");
        let ips: BTreeMap<String, String> = list
            .items
            .iter()
            .filter_map(|p| {
                let node = p.spec.as_ref()?.node_name.clone()?;
                let ip = p.status.as_ref()?.pod_ip.clone().filter(|ip| ip.starts_with("10.215."))?;
                Some((node, ip))
            })
            .collect();
        if ips.len() == NODES {
            break ips;
        }
        assert!(Instant::now() < deadline, "agent pods not running with their agents' addresses: {list:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };

    // The manifests in deploy/ are what a real API server accepts (server-side dry run:
    // schema, defaults and admission, nothing stored).
    let nss: Api<Namespace> = Api::all(c.clone());
    for ns in ["fabrik-system", "gpu-operator"] {
        let ns_obj: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).expect("namespace json");
        match nss.create(&PostParams::default(), &ns_obj).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("create namespace {ns}: {e}"),
        }
    }
    let deploy = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy");
    let o = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["apply", "--dry-run=server", "-f", deploy])
        .output()
        .expect("kubectl apply --dry-run=server");
    assert!(
        o.status.success(),
        "deploy/ is refused by the API server: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("daemonset.apps/fabrik-agent"), "{o:?}");

    // The independent check: the agent answers through the API server's pod proxy.
    let path = format!("/api/v1/namespaces/{NS}/pods/fabrik-agent-{}:9400/proxy/v1/snapshot", whole[0]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let snapshot = loop {
        let o = Command::new("kubectl").arg("--kubeconfig").arg(&kubeconfig).args(["get", "--raw", &path]).output();
        match o {
            Ok(o) if o.status.success() => break String::from_utf8_lossy(&o.stdout).into_owned(),
            Ok(o) if Instant::now() < deadline => {
                eprintln!("kubectl get --raw {path}: {}", String::from_utf8_lossy(&o.stderr));
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            other => panic!("kubectl get --raw {path}: {other:?}"),
        }
    };
    let doc: serde_json::Value = serde_json::from_str(&snapshot).expect("the snapshot is JSON");
    assert_eq!(doc["node"], json!(whole[0]), "{doc}");

    // The cockpit's feeds: the cluster, and the agent pods for the nodes in view.
    let (tx, rx) = mpsc::channel(256);
    let (view, view_rx) = watch::channel(BTreeSet::from([whole[0].clone()]));
    let _kube = tokio::spawn(fabrik::feed::kube::run(c.clone(), KubeFeedConfig::default(), tx.clone()));
    let _agents = tokio::spawn(fabrik::feed::agent_discovery::run(
        c.clone(),
        fabrik::feed::agent_discovery::DEFAULT_NAMESPACE.into(),
        fabrik::feed::agent_discovery::DEFAULT_SELECTOR.into(),
        Duration::from_millis(500),
        view_rx,
        tx.clone(),
    ));
    // A short idle window, so idle-but-allocated can be seen within the test.
    let mut m = Model { fleet: Fleet::new(Thresholds { idle_window_ms: 3_000, ..Thresholds::default() }), rx };
    let (a, b, third) = (whole[0].clone(), whole[1].clone(), whole[2].clone());
    m.until("telemetry for the node in view", Duration::from_secs(60), |f| {
        if fed(f, &a) == 8 { Ok(()) } else { Err(format!("{} of 8 GPUs of {a} have telemetry", fed(f, &a))) }
    })
    .await;
    assert_eq!((fed(&m.fleet, &b), fed(&m.fleet, &third)), (0, 0), "nodes out of view are not streamed");

    // The view moves to the second node: its stream starts, the first one's stops.
    view.send(BTreeSet::from([b.clone()])).expect("the feed listens");
    m.until("telemetry for the node now in view", Duration::from_secs(60), |f| {
        if fed(f, &b) == 8 { Ok(()) } else { Err(format!("{} of 8 GPUs of {b} have telemetry", fed(f, &b))) }
    })
    .await;
    // Processes → pods came along through the proxy (the fake agent names its pods).
    let procs: Vec<&fabrik::model::ProcSample> = m
        .fleet
        .node_by_name(&b)
        .and_then(|id| m.fleet.node(id))
        .map(|n| n.gpus.iter().filter_map(|g| m.fleet.gpu_procs.get(g)).flatten().collect())
        .unwrap_or_default();
    assert!(
        procs.iter().any(|p| p.pod.as_deref().is_some_and(|pod| pod.contains('/'))),
        "GPU processes mapped to namespace/pod: {procs:?}"
    );

    // A tenant cannot feed telemetry: its own pod, labelled as an agent, running on a GPU
    // node and answering on a live agent's address (the third node's, out of view), is not
    // taken, though the API server proxies to it (checked with kubectl) and its node is in
    // view. Only pods a DaemonSet owns in the agent namespace are agents.
    let decoy = "decoy-gpu-node";
    let node_obj: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "metadata": {"name": decoy, "labels": {"nvidia.com/gpu.present": "true"}}
    }))
    .expect("node json");
    Api::<k8s_openapi::api::core::v1::Node>::all(c.clone())
        .create(&PostParams::default(), &node_obj)
        .await
        .expect("create the decoy node");
    let evil_ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team-evil"}})).expect("ns json");
    nss_create(&c, &evil_ns).await;
    let evil: Pod = serde_json::from_value(json!({
        "metadata": {"name": "not-an-agent", "labels": {"app.kubernetes.io/name": "fabrik-agent"}},
        "spec": {"nodeName": decoy, "containers": [{"name": "agent", "image": "fabrik",
            "ports": [{"name": "metrics", "containerPort": 9400}]}]}
    }))
    .expect("pod json");
    let evil_api: Api<Pod> = Api::namespaced(c.clone(), "team-evil");
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Err(e) = evil_api.create(&PostParams::default(), &evil).await {
        assert!(Instant::now() < deadline, "create the tenant's pod: {e}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let ip = &ips[&third];
    let status = json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": "True"}]}});
    evil_api
        .patch_status("not-an-agent", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&status))
        .await
        .expect("the tenant's pod runs");
    let evil_path = "/api/v1/namespaces/team-evil/pods/not-an-agent:9400/proxy/v1/snapshot";
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = Command::new("kubectl").arg("--kubeconfig").arg(&kubeconfig).args(["get", "--raw", evil_path]).output();
        match o {
            Ok(o) if o.status.success() => break,
            Ok(o) if Instant::now() < deadline => {
                eprintln!("kubectl get --raw {evil_path}: {}", String::from_utf8_lossy(&o.stderr));
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            other => panic!("the tenant's pod answers through the proxy (else this check proves nothing): {other:?}"),
        }
    }
    view.send(BTreeSet::from([b.clone(), decoy.to_string()])).expect("the feed listens");
    m.until("more samples of the real agent in view", Duration::from_secs(20), {
        let start = last_sample(&m.fleet, &b);
        let b = b.clone();
        move |f| if last_sample(f, &b) > start.map(|s| s + 2000) { Ok(()) } else { Err("waiting".into()) }
    })
    .await;
    let decoy_feed = format!("agent {decoy}");
    assert!(
        !m.fleet.feeds.contains_key(&decoy_feed),
        "a tenant's pod labelled as an agent fed the cockpit: {:?}",
        m.fleet.feeds.get(&decoy_feed)
    );
    view.send(BTreeSet::from([b.clone()])).expect("the feed listens");
    let gone = DeleteParams::default().grace_period(0);
    evil_api.delete("not-an-agent", &gone).await.expect("delete the tenant's pod");
    Api::<k8s_openapi::api::core::v1::Node>::all(c.clone()).delete(decoy, &gone).await.expect("delete the decoy");

    // Device-plugin pods: the API says a pod got one `nvidia.com/gpu`, not which. The agent
    // knows, from the kubelet's PodResources (the sim plays the kubelet on a socket the agent
    // reads) and from its processes: the pods it names on GPU 0 (busy) and GPU 2 (idle) are
    // created on node b as a workload would be, and a notebook pod that runs nothing at all;
    // the model binds each to its GPU and flags the idle ones.
    let path = format!("/api/v1/namespaces/{NS}/pods/fabrik-agent-{b}:9400/proxy/v1/snapshot");
    let o = Command::new("kubectl").arg("--kubeconfig").arg(&kubeconfig).args(["get", "--raw", &path]).output();
    let o = o.expect("kubectl get --raw");
    assert!(o.status.success(), "kubectl get --raw {path}: {}", String::from_utf8_lossy(&o.stderr));
    let snap: serde_json::Value = serde_json::from_slice(&o.stdout).expect("the snapshot is JSON");
    let pod_on = |gpu: usize| {
        let p = &snap["gpus"][gpu]["processes"][0]["pod"];
        match (p["namespace"].as_str(), p["name"].as_str()) {
            (Some(ns), Some(name)) => (ns.to_string(), name.to_string()),
            _ => panic!("the agent names the pod on GPU {gpu}: {snap}"),
        }
    };
    let nss: Api<Namespace> = Api::all(c.clone());
    let sleeper = ("notebooks".to_string(), "jupyter-sleeper".to_string());
    let wanted = [pod_on(0), pod_on(2), sleeper.clone()];
    for (ns, name) in &wanted {
        let ns_obj: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).expect("namespace json");
        match nss.create(&PostParams::default(), &ns_obj).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("create namespace {ns}: {e}"),
        }
        gpu_pod(&c, ns, name, &b, "nvidia.com/gpu").await;
    }
    let (busy_pod, idle_pod) = (pod_on(0), pod_on(2));
    m.until("device-plugin pods bound by the agent, the idle one flagged", Duration::from_secs(60), |f| {
        let gpu = |i: u8| {
            let n = f.node(f.node_by_name(&b)?)?;
            n.gpus.iter().filter_map(|g| f.gpu(*g)).find(|g| g.index == i)
        };
        let holder = |i: u8| {
            let g = gpu(i)?;
            let p = f.pod(*g.pods.first()?)?;
            Some((f.str_of(p.namespace).to_string(), p.name.to_string()))
        };
        let idle = |i: u8| gpu(i).is_some_and(|g| g.idle_allocated);
        // GPU 7, the fake's unused GPU, is the first the sim's kubelet hands out.
        match (holder(0), holder(2), holder(7), idle(0), idle(2), idle(7)) {
            (Some(h0), Some(h2), Some(h7), false, true, true) if h0 == busy_pod && h2 == idle_pod && h7 == sleeper => {
                Ok(())
            }
            got => Err(format!("GPUs 0, 2 and 7 of {b}: holders, idle = {got:?}")),
        }
    })
    .await;
    // The agent itself says so through the proxy: GPU 7 was given to the notebook by the kubelet.
    let o = Command::new("kubectl").arg("--kubeconfig").arg(&kubeconfig).args(["get", "--raw", &path]).output();
    let o = o.expect("kubectl get --raw");
    let snap: serde_json::Value = serde_json::from_slice(&o.stdout).expect("the snapshot is JSON");
    assert_eq!(snap["gpus"][7]["allocated_to"][0]["name"], json!(sleeper.1), "{}", snap["gpus"][7]);
    assert!(snap["gpus"][7]["processes"].as_array().is_some_and(|p| p.is_empty()), "it runs nothing there");

    // Shares of a time-sliced GPU (issue 15): pods holding replicas on the shared node, some
    // running nothing or barely touching the SMs. Which share is idle is worked out here from
    // the agent's own answer through the proxy (the kubelet's assignments, the processes and
    // their SM utilisation) and must equal the model's: per GPU, the holders and the idle
    // ones, the gpus view's `shares_held` / `shares_idle`, the pods view's `idle`, the tenants
    // view's `shares_idle`.
    let capacity = &shared_node["status"]["capacity"];
    let resource = ["nvidia.com/gpu.shared", "nvidia.com/gpu"]
        .into_iter()
        .find(|r| capacity[*r].is_string())
        .unwrap_or_else(|| panic!("{shared} advertises its replicas: {capacity}"));
    let offered: u32 = capacity[resource].as_str().and_then(|c| c.parse().ok()).expect("replicas offered");
    let sharers: Vec<(String, String)> =
        (0..14).map(|k| (format!("share-{}", ["a", "b"][k % 2]), format!("sharer-{k}"))).collect();
    for ns in ["share-a", "share-b"] {
        nss_create(&c, &serde_json::from_value(json!({"metadata": {"name": ns}})).expect("ns json")).await;
    }
    for (ns, name) in &sharers {
        gpu_pod(&c, ns, name, &shared, resource).await;
    }
    view.send(BTreeSet::from([b.clone(), shared.clone()])).expect("the feed listens");
    let shared_path = format!("/api/v1/namespaces/{NS}/pods/fabrik-agent-{shared}:9400/proxy/v1/snapshot");
    let raw = |p: &str| -> Option<serde_json::Value> {
        let o = Command::new("kubectl").arg("--kubeconfig").arg(&kubeconfig).args(["get", "--raw", p]).output().ok()?;
        o.status.success().then(|| serde_json::from_slice(&o.stdout).ok()).flatten()
    };
    // Every sharer placed by the kubelet, as the agent says.
    let deadline = Instant::now() + Duration::from_secs(60);
    let snap = loop {
        let snap = raw(&shared_path);
        let placed = snap.as_ref().map_or(0, |s| share_holders(s).values().map(|(h, _)| h.len()).sum::<usize>());
        if placed == sharers.len() {
            break snap.expect("a snapshot");
        }
        assert!(Instant::now() < deadline, "{placed} of {} sharers placed by the kubelet: {snap:?}", sharers.len());
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let want = share_holders(&snap);
    let idle_want: usize = want.values().map(|(_, i)| i.len()).sum();
    assert!(
        idle_want > 0 && idle_want < sharers.len(),
        "the check needs idle and busy shares both (the agent said {want:?})"
    );
    let latest = std::sync::Mutex::new((Instant::now(), want.clone()));
    m.until("each share's holder and idleness as the agent says", Duration::from_secs(60), |f| {
        let mut l = latest.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if l.0.elapsed() > Duration::from_secs(1)
            && let Some(s) = raw(&shared_path)
        {
            *l = (Instant::now(), share_holders(&s));
        }
        let want = &l.1;
        let n = f.node(f.node_by_name(&shared).ok_or("no shared node")?).ok_or("no node")?;
        let name = |p: fabrik::model::PodId| f.pod(p).map(|p| format!("{}/{}", f.str_of(p.namespace), p.name));
        let mut got = BTreeMap::new();
        for gid in &n.gpus {
            let g = f.gpu(*gid).ok_or("no gpu")?;
            let holders: BTreeSet<String> = g.pods.iter().filter_map(|p| name(*p)).collect();
            let idle: BTreeSet<String> = f.idle_shares(*gid).iter().filter_map(|(p, _, _)| name(*p)).collect();
            let row = fabrik::ui::views::gpus::json(f, fabrik::ui::views::column::RowId::Gpu(*gid)).ok_or("no row")?;
            let (held, shown_idle) = (&row["sharing"]["shares_held"], &row["sharing"]["shares_idle"]);
            if *held != json!(holders.len()) || *shown_idle != json!(idle.len()) {
                return Err(format!(
                    "GPU {}: row says held {held}, idle {shown_idle}; model {holders:?} {idle:?}",
                    g.index
                ));
            }
            if !holders.is_empty() {
                got.insert(u64::from(g.index), (holders, idle));
            }
        }
        if got != *want {
            return Err(format!("per GPU (holders, idle): cockpit {got:?}, agent {want:?}"));
        }
        // The pods view flags each sharer's own share.
        for (ns, pod) in &sharers {
            let pid = f.pod_by_name(ns, pod).ok_or(format!("no pod {ns}/{pod}"))?;
            let row = fabrik::ui::views::pods::json(f, fabrik::ui::views::column::RowId::Pod(pid)).ok_or("row")?;
            let idle = want.values().any(|(_, i)| i.contains(&format!("{ns}/{pod}")));
            if row["idle"] != json!(idle) {
                return Err(format!("pod {ns}/{pod}: idle {} where the agent says {idle}", row["idle"]));
            }
        }
        for ns in ["share-a", "share-b"] {
            let tid = f.tenant_by_name(ns).ok_or(format!("no tenant {ns}"))?;
            let row =
                fabrik::ui::views::tenants::json(f, fabrik::ui::views::column::RowId::Tenant(tid)).ok_or("row")?;
            let idle = want.values().flat_map(|(_, i)| i).filter(|p| p.starts_with(&format!("{ns}/"))).count();
            if row["shares_idle"] != json!(idle) {
                return Err(format!("tenant {ns}: shares_idle {} where the agent says {idle}", row["shares_idle"]));
            }
        }
        Ok(())
    })
    .await;
    eprintln!("shares on {shared}: {} held of {offered} offered, {idle_want} idle", sharers.len());
    view.send(BTreeSet::from([b.clone()])).expect("the feed listens");

    let before = last_sample(&m.fleet, &a);
    m.until("a few more samples of the node in view", Duration::from_secs(10), {
        let start = last_sample(&m.fleet, &b);
        let b = b.clone();
        move |f| if last_sample(f, &b) > start.map(|s| s + 1500) { Ok(()) } else { Err("waiting".into()) }
    })
    .await;
    assert_eq!(last_sample(&m.fleet, &a), before, "the node that left the view is no longer streamed");
    assert_eq!(fed(&m.fleet, &third), 0);

    // The agent of the node in view stops: its stream says so, then recovers when it is back.
    let pattern = format!("agent --fake 8 --node {b} ");
    let pid = Command::new("pgrep").args(["-f", &pattern]).output().expect("pgrep");
    let pid = String::from_utf8_lossy(&pid.stdout).split_whitespace().next().map(str::to_string);
    let pid = pid.unwrap_or_else(|| panic!("the sim runs an agent for {b}"));
    // Its own arguments (seed and address included), to start it again as it was.
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("the agent's command line");
    let mut args: Vec<String> =
        cmdline.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    if let Some(i) = args.iter().position(|a| a == "--parent") {
        args.drain(i..i + 2);
    }
    assert!(Command::new("kill").arg(&pid).status().expect("kill").success());
    let src = format!("agent {b}");
    m.until("the lost stream shown as reconnecting", Duration::from_secs(30), |f| match f.feeds.get(&src) {
        Some(FeedState::Reconnecting { .. }) => Ok(()),
        other => Err(format!("{src}: {other:?}")),
    })
    .await;
    // Back, as a restarted container would be: same address, in the sim's namespace.
    let netns = format!("fabrik-sim-{}", sim.child.id());
    assert!(args.iter().any(|a| a.starts_with(&ips[&b])), "it listened on its pod's address: {args:?}");
    let again = Command::new("ip")
        .args(["netns", "exec", &netns])
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("restart the agent");
    let _again = Proc { child: again, what: "fabrik agent" };
    m.until("the stream back to live", Duration::from_secs(60), |f| match f.feeds.get(&src) {
        Some(FeedState::Live) => Ok(()),
        other => Err(format!("{src}: {other:?}")),
    })
    .await;

    // Faults a node agent meets (issue 14 item 1): the agent stopped (SIGSTOP) and its
    // network dropped (the agents' veth down in their namespace). Each time the node shows
    // reconnecting within the stall limit (no sample for 10 s) and recovers once the agent is
    // back; the agent then serves exactly one reader again (its gauge, read through the proxy).
    let agent_pid = _again.child.id().to_string();
    let readers = || -> Option<u64> {
        let path = format!("/api/v1/namespaces/{NS}/pods/fabrik-agent-{b}:9400/proxy/metrics");
        let o =
            Command::new("kubectl").arg("--kubeconfig").arg(&kubeconfig).args(["get", "--raw", &path]).output().ok()?;
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        text.lines().find(|l| l.starts_with("fabrik_agent_stream_readers{"))?.rsplit(' ').next()?.parse().ok()
    };
    let peer = format!("fsn{}", sim.child.id() % 100_000);
    let faults: [(&str, Vec<String>, Vec<String>); 2] = [
        (
            "SIGSTOP",
            vec!["kill".into(), "-STOP".into(), agent_pid.clone()],
            vec!["kill".into(), "-CONT".into(), agent_pid.clone()],
        ),
        (
            "partition",
            ["ip", "netns", "exec", &netns, "ip", "link", "set", &peer, "down"].map(String::from).to_vec(),
            ["ip", "netns", "exec", &netns, "ip", "link", "set", &peer, "up"].map(String::from).to_vec(),
        ),
    ];
    for (what, start, end) in faults {
        let run = |argv: &[String]| {
            let ok = Command::new(&argv[0]).args(&argv[1..]).status().is_ok_and(|s| s.success());
            assert!(ok, "{argv:?}");
        };
        let t0 = Instant::now();
        run(&start);
        m.until(&format!("{what}: the node's stream reconnecting"), Duration::from_secs(25), |f| {
            match f.feeds.get(&src) {
                Some(FeedState::Reconnecting { .. }) => Ok(()),
                other => Err(format!("{src}: {other:?}")),
            }
        })
        .await;
        let noticed = t0.elapsed();
        let t1 = Instant::now();
        run(&end);
        m.until(&format!("{what}: the stream live again"), Duration::from_secs(40), |f| match f.feeds.get(&src) {
            Some(FeedState::Live) => Ok(()),
            other => Err(format!("{src}: {other:?}")),
        })
        .await;
        let recovered = t1.elapsed();
        let t2 = Instant::now();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match readers() {
                Some(1) => break,
                other => {
                    assert!(Instant::now() < deadline, "{what}: the agent's readers back to 1, still {other:?}");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        }
        eprintln!(
            "agent fault {what}: reconnecting shown after {:.1} s (stall limit 10 s), live {:.1} s after the agent was back, \
             stale readers freed {:.1} s later",
            noticed.as_secs_f64(),
            recovered.as_secs_f64(),
            t2.elapsed().as_secs_f64()
        );
    }

    // The real binary: every node is on screen, so every node shows utilisation.
    let t = Tmux::start();
    let home = format!("HOME={}", t.home.display());
    let cfg = format!("XDG_CONFIG_HOME={}", t.home.join("config").display());
    // A short idle window, as in the model above.
    std::fs::create_dir_all(t.home.join("config/fabrik")).expect("config dir");
    std::fs::write(t.home.join("config/fabrik/config.toml"), "idle_window_secs = 3\n").expect("config.toml");
    let cmd = format!("{BIN} --kubeconfig {}", kubeconfig.display());
    t.ok(&session(&[&home, &cfg], &[&cmd]));
    // A node with telemetry shows its power draw ("412W") where one without shows "—".
    let util_shown = |s: &str, node: &str| {
        s.lines().find(|l| l.contains(&format!("│{node} "))).is_some_and(|l| {
            l.split(|c: char| c.is_whitespace() || c == '│')
                .any(|w| w.strip_suffix('W').is_some_and(|n| !n.is_empty() && n.parse::<u32>().is_ok()))
        })
    };
    let s = t.wait_screen_for("utilisation from the agents on every node", Duration::from_secs(60), |s| {
        nodes.iter().all(|n| util_shown(s, n))
    });
    // The agents' samples can land before the last watch has listed: live follows.
    if !s.contains("[live]") {
        t.wait_screen_for("every stream live", Duration::from_secs(30), |s| s.contains("[live]"));
    }
    // The idle pods' GPUs, bound through their agent, count as idle-but-allocated.
    // With them, each shared GPU all of whose holders are idle (the agent's GPU utilisation
    // under the threshold), and the shares: held of offered, and how many are idle.
    let snap = raw(&shared_path).expect("the shared node's snapshot");
    let want = share_holders(&snap);
    let idle_gpus = snap["gpus"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| want.contains_key(&g["index"].as_u64().unwrap_or(99)))
        .filter(|g| g["util_gpu"].as_u64().is_some_and(|u| u < IDLE_PCT))
        .count();
    let idle_shares: usize = want.values().map(|(_, i)| i.len()).sum();
    let header = format!("idle-alloc {} ", 2 + idle_gpus);
    let shares = format!("shares {}/{offered} ({idle_shares} idle)", sharers.len());
    eprintln!("on screen next: {header:?} and {shares:?} (the header is wider than 140 columns)");
    t.ok(&["resize-window", "-t", "fabrik", "-x", "200", "-y", "40"]);
    t.wait_screen_for("the idle GPUs and shares counted", Duration::from_secs(30), |s| {
        s.contains(&header) && s.contains(&shares)
    });
    // The GPU screen of node b's GPU 7, in the real terminal: the notebook the kubelet gave
    // it, no processes there, and how the GPU reaches its peers.
    t.literal(&format!(":gpu {b}/7"));
    t.keys(&["Enter"]);
    let s = t.wait_screen_for("the GPU screen with the agent's view", Duration::from_secs(30), |s| {
        s.contains("PROCESSES (node agent") && s.contains("links  NV18 → gpu")
    });
    assert!(s.contains("no compute processes"), "{s}");
    assert!(s.contains(&sleeper.1), "the pod the kubelet gave GPU 7: {s}");
    t.keys(&["q"]);
}

/// The idle threshold (`idle_util_pct`'s default).
const IDLE_PCT: u64 = 5;

/// From an agent's snapshot: per GPU (index) not in MIG mode that the kubelet gave to pods,
/// its holders (`namespace/name`) and those whose share is idle. A holder's share is idle
/// when its processes there, measured, add up to under the threshold; with none measured,
/// when the GPU itself is under it, or when the agent measures other processes there and
/// none is the holder's (it holds a share and runs nothing).
fn share_holders(snap: &serde_json::Value) -> BTreeMap<u64, (BTreeSet<String>, BTreeSet<String>)> {
    let key = |p: &serde_json::Value| Some(format!("{}/{}", p["namespace"].as_str()?, p["name"].as_str()?));
    let mut out = BTreeMap::new();
    for g in snap["gpus"].as_array().into_iter().flatten() {
        if g["mig_enabled"] == json!(true) {
            continue;
        }
        let holders: BTreeSet<String> = g["allocated_to"].as_array().into_iter().flatten().filter_map(key).collect();
        if holders.is_empty() {
            continue;
        }
        let procs: Vec<(Option<String>, Option<u64>)> =
            g["processes"].as_array().into_iter().flatten().map(|p| (key(&p["pod"]), p["sm_util"].as_u64())).collect();
        let sampled = procs.iter().any(|(_, u)| u.is_some());
        let gpu_low = g["util_gpu"].as_u64().is_some_and(|u| u < IDLE_PCT);
        let idle = holders
            .iter()
            .filter(|h| {
                let mine: Vec<Option<u64>> =
                    procs.iter().filter(|(p, _)| p.as_ref() == Some(*h)).map(|(_, u)| *u).collect();
                if mine.iter().any(Option::is_some) {
                    mine.iter().flatten().sum::<u64>() < IDLE_PCT
                } else {
                    gpu_low || (mine.is_empty() && sampled)
                }
            })
            .cloned()
            .collect();
        out.insert(g["index"].as_u64().unwrap_or(u64::MAX), (holders, idle));
    }
    out
}
