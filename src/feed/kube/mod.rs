//! The Kubernetes feed: one watch per resource kind (kube-rs watchers with backoff), turned
//! into compact deltas at once. No object caches: the translator keeps only the joins the
//! model needs (namespace → tenant, DRA claim → devices, node → announced GPUs) and the names
//! of what it has sent, so a re-list can remove what disappeared while the watch was down.
//!
//! Namespaces and vCluster control planes are listed first, so every pod lands in its
//! tenant on the first try; the other kinds start when those two are synced.

pub mod dra;
pub mod slim;
pub mod translate;
mod translator;
pub mod watchlist;

pub use translator::Translator;

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event as KEvent, Namespace, Node, Pod, ResourceQuota};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::Api;
use kube::api::DynamicObject;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use slim::FeedPod;
use tokio::sync::mpsc;

use crate::cluster::labels as l;
use crate::model::Batch;
use crate::model::{CapiKind, Delta};

/// What the feed was told to watch and how to name tenants.
#[derive(Clone, Debug)]
pub struct KubeFeedConfig {
    /// Namespace label that names a tenant (default `fabrik.io/tenant`).
    pub tenant_label: String,
    /// How each kind's initial state is fetched.
    pub initial_list: InitialList,
}

impl Default for KubeFeedConfig {
    fn default() -> Self {
        Self { tenant_label: l::DEFAULT_TENANT_LABEL.into(), initial_list: InitialList::Pages }
    }
}

/// How a watch gets the state it starts from (and gets again after a 410 or a restart).
///
/// `Pages` is the default: consistent lists in pages of 500. `Stream`, watch-lists from a
/// consistent read (`watchlist`), holds no list whole and decodes each object as it
/// arrives: on the test control plane (`benches/peers.sh 1000 10000 30 2`, 9,986 pods,
/// 2026-12-07) it used 80 against 133 MiB RSS but put every pod on screen in 6.6 s against
/// 3.8 s for pages (nodes 1.8 against 1.0 s). kube-rs's own watch-lists, at
/// `resourceVersion=0` (any state the watch cache holds), had been as fast as pages in an
/// earlier run; the consistent read is what costs, and a cockpit must not start from a
/// stale state, so pages stay the default until watch-lists are faster.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InitialList {
    /// A watch-list (`sendInitialEvents=true`, KEP-3157; beta and on by default in 1.34):
    /// the API server streams every object from its watch cache, and each object is
    /// decoded and translated as it arrives. A server that refuses it (the `WatchList`
    /// gate off, as in 1.33, or a server before 1.27 that refuses `resourceVersionMatch`
    /// on a watch) answers 4xx to the first watch, and that kind falls back to `Pages`
    /// for the rest of the session.
    Stream,
    /// Consistent lists in pages of 500 (kube-rs's default), then a watch from the list's
    /// version.
    #[default]
    Pages,
}

impl InitialList {
    pub fn name(self) -> &'static str {
        match self {
            InitialList::Stream => "stream",
            InitialList::Pages => "pages",
        }
    }
}

/// Whether a failed first watch means the server does not do watch-lists: it rejects the
/// request itself (400, 422 Invalid: "sendInitialEvents is forbidden for watch unless the
/// WatchList feature gate is enabled"), as opposed to being away, overloaded or forbidding it.
fn refuses_watch_list(e: &watcher::Error) -> bool {
    matches!(e, watcher::Error::WatchStartFailed(kube::Error::Api(s)) if s.code == 400 || s.code == 422)
}

/// The kinds the feed watches; the name is what the header and events call it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Namespaces,
    VClusters,
    Nodes,
    Pods,
    Quotas,
    Pdbs,
    Events,
    Slices,
    Claims,
    LocalQueues,
    ClusterQueues,
    /// `resource.k8s.io/v1alpha3` DeviceTaintRules (alpha: often not served).
    TaintRules,
    /// The NVIDIA DRA driver's ComputeDomains (a CRD: often not installed).
    Domains,
    /// Kueue's Workloads.
    Workloads,
    /// `networking.k8s.io/v1` NetworkPolicies (tenant isolation).
    NetPols,
    /// Cluster API Machines (a CRD: on a management cluster).
    Machines,
    /// Metal3 BareMetalHosts (a CRD: where Metal3 provisions the hosts).
    Hosts,
    /// Cilium's CiliumNetworkPolicies and CiliumClusterwideNetworkPolicies (CRDs: where
    /// Cilium is the CNI), read for tenant isolation beside NetworkPolicies.
    CiliumPols,
    CiliumWide,
    /// Cluster API's Clusters, control planes, MachineDeployments, MachineSets and
    /// MachineHealthChecks (CRDs: on a management cluster; absent, they stay quiet — the
    /// Machines' feed says Cluster API is not there).
    Capi(CapiKind),
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Namespaces => "namespaces",
            Kind::VClusters => "vclusters",
            Kind::Nodes => "nodes",
            Kind::Pods => "pods",
            Kind::Quotas => "resourcequotas",
            Kind::Pdbs => "poddisruptionbudgets",
            Kind::Events => "events",
            Kind::Slices => "resourceslices",
            Kind::Claims => "resourceclaims",
            Kind::LocalQueues => "kueue localqueues",
            Kind::ClusterQueues => "kueue clusterqueues",
            Kind::TaintRules => "devicetaintrules",
            Kind::Domains => "computedomains",
            Kind::Workloads => "kueue workloads",
            Kind::NetPols => crate::model::fleet::isolation::NETPOL_FEED,
            Kind::Machines => "cluster-api machines",
            Kind::Hosts => "baremetalhosts",
            Kind::CiliumPols => crate::model::fleet::isolation::CILIUM_FEEDS[0],
            Kind::CiliumWide => crate::model::fleet::isolation::CILIUM_FEEDS[1],
            Kind::Capi(k) => match k {
                CapiKind::Cluster => "cluster-api clusters",
                CapiKind::ControlPlane => "kubeadmcontrolplanes",
                CapiKind::MachineDeployment => "cluster-api machinedeployments",
                CapiKind::MachineSet => "cluster-api machinesets",
                CapiKind::MachineHealthCheck => "cluster-api machinehealthchecks",
            },
        }
    }
    const FIRST: [Kind; 3] = [Kind::Namespaces, Kind::VClusters, Kind::LocalQueues];
    const REST: [Kind; 21] = [
        Kind::Nodes,
        Kind::Pods,
        Kind::Quotas,
        Kind::Pdbs,
        Kind::Events,
        Kind::Slices,
        Kind::Claims,
        Kind::ClusterQueues,
        Kind::TaintRules,
        Kind::Domains,
        Kind::Workloads,
        Kind::NetPols,
        Kind::Machines,
        Kind::Hosts,
        Kind::CiliumPols,
        Kind::CiliumWide,
        Kind::Capi(CapiKind::Cluster),
        Kind::Capi(CapiKind::ControlPlane),
        Kind::Capi(CapiKind::MachineDeployment),
        Kind::Capi(CapiKind::MachineSet),
        Kind::Capi(CapiKind::MachineHealthCheck),
    ];
}

/// One watch event, tagged with its kind.
pub enum Msg {
    Namespace(Event<Namespace>),
    VCluster(Event<Pod>),
    Node(Event<Node>),
    Pod(Event<Pod>),
    Quota(Event<ResourceQuota>),
    Pdb(Event<PodDisruptionBudget>),
    Event(Event<KEvent>),
    Slice(Event<ResourceSlice>),
    Claim(Event<ResourceClaim>),
    LocalQueue(Event<DynamicObject>),
    ClusterQueue(Event<DynamicObject>),
    TaintRule(Event<DynamicObject>),
    Domain(Event<DynamicObject>),
    Workload(Event<DynamicObject>),
    NetPol(Event<NetworkPolicy>),
    Machine(Event<DynamicObject>),
    Host(Event<DynamicObject>),
    CiliumPol(Event<DynamicObject>),
    CiliumWide(Event<DynamicObject>),
    Capi(CapiKind, Event<DynamicObject>),
    /// A one-item list of a troubled kind succeeded: the server answers for it again, and
    /// its watch resumes within its backoff without losing events (resourceVersion, or a
    /// re-list that removes what went away).
    Reachable(Kind),
    /// A watch failed; `code` is the HTTP status when the server answered.
    Error {
        kind: Kind,
        code: Option<u16>,
        reason: String,
    },
}

use crate::now_ms;

fn error_code(e: &watcher::Error) -> (Option<u16>, String) {
    let api = |e: &kube::Error| match e {
        kube::Error::Api(s) => (Some(s.code), s.message.clone()),
        other => (None, other.to_string()),
    };
    match e {
        watcher::Error::InitialListFailed(e) | watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e) => {
            api(e)
        }
        watcher::Error::WatchError(s) => (Some(s.code), s.message.clone()),
        other => (None, other.to_string()),
    }
}

fn watch<K, W>(
    api: Api<K>,
    cfg: (watcher::Config, InitialList),
    kind: Kind,
    wrap: W,
    tx: mpsc::Sender<Msg>,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    W: Fn(Event<K>) -> Msg + Send + 'static,
{
    tokio::spawn(pump(api, cfg.0, cfg.1, kind, wrap, tx))
}

/// Forwards one watch's events (and its errors, tagged) until the translator goes away. A
/// 404 before the kind was ever listed ends it: the server does not serve that kind. After
/// that, a 404 is retried like any failure: a restarting API server answers 404 for an API
/// group (an alpha version, a CRD's) until it has installed it again.
async fn pump<K, W>(
    api: Api<K>,
    base: watcher::Config,
    mut strategy: InitialList,
    kind: Kind,
    wrap: W,
    tx: mpsc::Sender<Msg>,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    W: Fn(Event<K>) -> Msg + Send + 'static,
{
    let mut served = false;
    'strategies: loop {
        let events = match strategy {
            InitialList::Stream => watchlist::watch_list(api.clone(), &base).boxed(),
            InitialList::Pages => watcher::watcher(api.clone(), base.clone()).boxed(),
        };
        let mut stream = events.backoff(crate::feed::reconnect::Reconnect::default()).boxed();
        while let Some(item) = stream.next().await {
            let msg = match item {
                Ok(e) => {
                    served = true;
                    wrap(e)
                }
                Err(e) if strategy == InitialList::Stream && refuses_watch_list(&e) => {
                    strategy = InitialList::Pages;
                    continue 'strategies;
                }
                Err(e) => {
                    let (code, reason) = error_code(&e);
                    let stop = code == Some(404) && !served;
                    if tx.send(Msg::Error { kind, code, reason }).await.is_err() || stop {
                        return;
                    }
                    continue;
                }
            };
            if tx.send(msg).await.is_err() {
                return;
            }
        }
        return;
    }
}

fn spawn_watch(
    kind: Kind,
    client: &kube::Client,
    strategy: InitialList,
    tx: &mpsc::Sender<Msg>,
) -> tokio::task::JoinHandle<()> {
    let c = client.clone();
    let tx = tx.clone();
    let cfg = (watcher::Config::default(), strategy);
    match kind {
        Kind::Namespaces => watch(Api::<Namespace>::all(c), cfg, kind, Msg::Namespace, tx),
        Kind::VClusters => {
            let cfg = (cfg.0.labels("app=vcluster"), strategy);
            watch(Api::<FeedPod>::all(c), cfg, kind, |e| Msg::VCluster(slim::event(e)), tx)
        }
        Kind::Nodes => watch(Api::<Node>::all(c), cfg, kind, Msg::Node, tx),
        Kind::Pods => watch(Api::<FeedPod>::all(c), cfg, kind, |e| Msg::Pod(slim::event(e)), tx),
        Kind::Quotas => watch(Api::<ResourceQuota>::all(c), cfg, kind, Msg::Quota, tx),
        Kind::Pdbs => watch(Api::<PodDisruptionBudget>::all(c), cfg, kind, Msg::Pdb, tx),
        Kind::Events => watch(Api::<KEvent>::all(c), cfg, kind, Msg::Event, tx),
        Kind::Slices => watch(Api::<ResourceSlice>::all(c), cfg, kind, Msg::Slice, tx),
        Kind::Claims => watch(Api::<ResourceClaim>::all(c), cfg, kind, Msg::Claim, tx),
        Kind::LocalQueues => optional(c, KUEUE, "LocalQueue", strategy, kind, Msg::LocalQueue, tx),
        Kind::ClusterQueues => optional(c, KUEUE, "ClusterQueue", strategy, kind, Msg::ClusterQueue, tx),
        Kind::TaintRules => optional(c, TAINT_RULES, "DeviceTaintRule", strategy, kind, Msg::TaintRule, tx),
        Kind::Domains => optional(c, DOMAINS, "ComputeDomain", strategy, kind, Msg::Domain, tx),
        Kind::Workloads => optional(c, KUEUE, "Workload", strategy, kind, Msg::Workload, tx),
        Kind::NetPols => watch(Api::<NetworkPolicy>::all(c), cfg, kind, Msg::NetPol, tx),
        Kind::Machines => optional(c, CAPI, "Machine", strategy, kind, Msg::Machine, tx),
        Kind::Hosts => optional(c, METAL3, "BareMetalHost", strategy, kind, Msg::Host, tx),
        Kind::CiliumPols => optional(c, CILIUM, "CiliumNetworkPolicy", strategy, kind, Msg::CiliumPol, tx),
        Kind::CiliumWide => optional(c, CILIUM, "CiliumClusterwideNetworkPolicy", strategy, kind, Msg::CiliumWide, tx),
        Kind::Capi(k) => {
            let (group, name, _) = capi_api(k);
            optional(c, group, name, strategy, kind, move |e| Msg::Capi(k, e), tx)
        }
    }
}

/// Where Cluster API serves a kind: its group and versions, kind and plural.
fn capi_api(k: CapiKind) -> ((&'static str, &'static [&'static str]), &'static str, &'static str) {
    match k {
        CapiKind::Cluster => (CAPI, "Cluster", "clusters"),
        CapiKind::ControlPlane => (CAPI_CONTROL_PLANE, "KubeadmControlPlane", "kubeadmcontrolplanes"),
        CapiKind::MachineDeployment => (CAPI, "MachineDeployment", "machinedeployments"),
        CapiKind::MachineSet => (CAPI, "MachineSet", "machinesets"),
        CapiKind::MachineHealthCheck => (CAPI, "MachineHealthCheck", "machinehealthchecks"),
    }
}

/// Lists one object of a troubled kind; success means the server answers for it again.
fn probe(kind: Kind, c: kube::Client, tx: mpsc::Sender<Msg>) {
    tokio::spawn(async move {
        let lp = kube::api::ListParams::default().limit(1);
        let ok = match kind {
            Kind::Namespaces => Api::<Namespace>::all(c).list(&lp).await.is_ok(),
            Kind::VClusters => Api::<FeedPod>::all(c).list(&lp.labels("app=vcluster")).await.is_ok(),
            Kind::Nodes => Api::<Node>::all(c).list(&lp).await.is_ok(),
            Kind::Pods => Api::<FeedPod>::all(c).list(&lp).await.is_ok(),
            Kind::Quotas => Api::<ResourceQuota>::all(c).list(&lp).await.is_ok(),
            Kind::Pdbs => Api::<PodDisruptionBudget>::all(c).list(&lp).await.is_ok(),
            Kind::Events => Api::<KEvent>::all(c).list(&lp).await.is_ok(),
            Kind::Slices => Api::<ResourceSlice>::all(c).list(&lp).await.is_ok(),
            Kind::Claims => Api::<ResourceClaim>::all(c).list(&lp).await.is_ok(),
            // Optional kinds: a quiet one (nothing changed while the server was away) sends
            // no event when its watch resumes, so it is probed like the others.
            Kind::LocalQueues => optional_reachable(&c, KUEUE, "LocalQueue", "localqueues").await,
            Kind::ClusterQueues => optional_reachable(&c, KUEUE, "ClusterQueue", "clusterqueues").await,
            Kind::TaintRules => optional_reachable(&c, TAINT_RULES, "DeviceTaintRule", "devicetaintrules").await,
            Kind::Domains => optional_reachable(&c, DOMAINS, "ComputeDomain", "computedomains").await,
            Kind::Workloads => optional_reachable(&c, KUEUE, "Workload", "workloads").await,
            Kind::NetPols => Api::<NetworkPolicy>::all(c).list(&lp).await.is_ok(),
            Kind::Machines => optional_reachable(&c, CAPI, "Machine", "machines").await,
            Kind::Hosts => optional_reachable(&c, METAL3, "BareMetalHost", "baremetalhosts").await,
            Kind::CiliumPols => optional_reachable(&c, CILIUM, "CiliumNetworkPolicy", "ciliumnetworkpolicies").await,
            Kind::CiliumWide => {
                optional_reachable(&c, CILIUM, "CiliumClusterwideNetworkPolicy", "ciliumclusterwidenetworkpolicies")
                    .await
            }
            Kind::Capi(k) => {
                let (group, name, plural) = capi_api(k);
                optional_reachable(&c, group, name, plural).await
            }
        };
        if ok {
            let _ = tx.send(Msg::Reachable(kind)).await;
        }
    });
}

/// Whether one object of an optional kind can be listed, in any of its versions.
async fn optional_reachable(
    c: &kube::Client,
    (group, versions): (&str, &[&str]),
    kind_name: &str,
    plural: &str,
) -> bool {
    let lp = kube::api::ListParams::default().limit(1);
    for version in versions {
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind_name);
        let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
        if Api::<DynamicObject>::all_with(c.clone(), &ar).list(&lp).await.is_ok() {
            return true;
        }
    }
    false
}

/// Kueue's CRDs: v1beta2 (storage since v0.16), else v1beta1.
const KUEUE: (&str, &[&str]) = (l::KUEUE_GROUP, &["v1beta2", "v1beta1"]);
/// DeviceTaintRule: alpha in 1.34 (`DRADeviceTaints`, `resource.k8s.io/v1alpha3`).
const TAINT_RULES: (&str, &[&str]) = ("resource.k8s.io", &["v1alpha3"]);
/// Cluster API's core CRDs: v1beta2 (storage since v1.11), else v1beta1.
const CAPI: (&str, &[&str]) = ("cluster.x-k8s.io", &["v1beta2", "v1beta1"]);
/// Cluster API's Kubeadm control plane provider.
const CAPI_CONTROL_PLANE: (&str, &[&str]) = ("controlplane.cluster.x-k8s.io", &["v1beta2", "v1beta1"]);
/// Cilium's policy CRDs.
const CILIUM: (&str, &[&str]) = ("cilium.io", &["v2"]);
/// Metal3's baremetal-operator CRDs.
const METAL3: (&str, &[&str]) = ("metal3.io", &["v1alpha1"]);
/// The NVIDIA DRA driver's ComputeDomain CRD.
const DOMAINS: (&str, &[&str]) = ("resource.nvidia.com", &["v1beta1"]);

/// A kind that may not be served (a CRD not installed, an alpha API off), found by
/// discovery in the first of `versions` served. Not served is a 404 for the translator: an
/// information event, the rest of the cockpit goes on. Discovery is asked again every minute
/// (quietly: the event was told once), so a CRD installed while the cockpit runs is watched
/// from then on.
fn optional(
    c: kube::Client,
    (group, versions): (&'static str, &'static [&'static str]),
    kind_name: &'static str,
    strategy: InitialList,
    kind: Kind,
    wrap: impl Fn(Event<DynamicObject>) -> Msg + Send + 'static,
    tx: mpsc::Sender<Msg>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        // Discovery answers 404 when Kueue is not installed; anything else (the server is
        // down, a timeout) is retried with backoff, never taken for "not installed".
        let mut wait = Duration::from_millis(500);
        let mut told_absent = false;
        let ar = loop {
            let mut found = None;
            let mut answer: Option<(Option<u16>, String)> = None;
            for version in versions {
                let gvk = kube::api::GroupVersionKind::gvk(group, version, kind_name);
                match kube::discovery::pinned_kind(&c, &gvk).await {
                    Ok((ar, _caps)) => {
                        found = Some(ar);
                        break;
                    }
                    Err(kube::Error::Api(s)) => {
                        answer.get_or_insert((Some(s.code), s.message.clone()));
                    }
                    Err(kube::Error::Discovery(e)) => {
                        answer.get_or_insert((Some(404), e.to_string()));
                    }
                    Err(e) => answer = Some((None, e.to_string())),
                }
            }
            if let Some(ar) = found {
                break ar;
            }
            let (code, reason) = answer.unwrap_or((None, "no answer".into()));
            // Not served (or not allowed): said once, then looked for again each minute,
            // quietly whatever the answer (the server away meanwhile is the other watches' news).
            if told_absent || matches!(code, Some(403 | 404)) {
                if !told_absent && tx.send(Msg::Error { kind, code, reason }).await.is_err() {
                    return;
                }
                told_absent = true;
                if tx.is_closed() {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(60)).await;
                continue;
            }
            if tx.send(Msg::Error { kind, code, reason }).await.is_err() {
                return;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(30));
        };
        pump(Api::<DynamicObject>::all_with(c, &ar), watcher::Config::default(), strategy, kind, wrap, tx).await;
    })
}

/// Runs the feed until the cockpit goes away: watches, translation, one batch per burst of
/// events (at most every 50 ms), and the clock once a second.
pub async fn run(client: kube::Client, cfg: KubeFeedConfig, out: mpsc::Sender<Batch>) {
    let (tx, mut rx) = mpsc::channel::<Msg>(4096);
    let strategy = cfg.initial_list;
    let mut t = Translator::new(cfg);
    let mut tasks: Vec<tokio::task::JoinHandle<()>> =
        Kind::FIRST.iter().map(|k| spawn_watch(*k, &client, strategy, &tx)).collect();
    let mut started_rest = false;
    let mut clock = tokio::time::interval(Duration::from_secs(1));
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let _ = out.send(vec![Delta::Clock(now_ms())]).await;
    let mut ticks = 0u64;
    loop {
        let mut batch: Batch = Vec::new();
        tokio::select! {
            _ = clock.tick() => {
                batch.push(Delta::Clock(now_ms()));
                ticks += 1;
                if ticks.is_multiple_of(3) {
                    for kind in t.troubled() {
                        probe(kind, client.clone(), tx.clone());
                    }
                }
            }
            msg = rx.recv() => {
                let Some(msg) = msg else { break };
                let now = now_ms();
                batch.extend(t.apply(msg, now));
                // Take what else is already waiting, so a listing of 10,000 pods is a few
                // batches rather than 10,000.
                let mut n = 0;
                while n < 20_000 {
                    match rx.try_recv() {
                        Ok(m) => batch.extend(t.apply(m, now)),
                        Err(_) => break,
                    }
                    n += 1;
                }
            }
        }
        if !started_rest && t.first_synced() {
            started_rest = true;
            tasks.extend(Kind::REST.iter().map(|k| spawn_watch(*k, &client, strategy, &tx)));
        }
        if !batch.is_empty() && out.send(batch).await.is_err() {
            break;
        }
    }
    for task in tasks {
        task.abort();
    }
}

#[cfg(test)]
mod tests;
