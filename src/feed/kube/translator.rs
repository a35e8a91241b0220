//! The translator: turns watch events into compact deltas, keeping only the joins the model
//! needs (namespace → tenant, DRA claim → devices, node → announced GPUs) and the names of
//! what it has sent, so a re-list can remove what disappeared while the watch was down.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use k8s_openapi::api::core::v1::{Event as KEvent, Namespace, Node, Pod, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::api::DynamicObject;
use kube::runtime::watcher::Event;

use super::translate::{self, ClaimInfo, SliceDevice};

mod capi;
mod dra;
mod errors;
mod gitops;
mod isolation;
mod kueue;
mod metal3;
use super::{Kind, KubeFeedConfig, Msg};
use crate::model::{Delta, FeedState, GpuSpec, NodeSpec, PodSpec, QuotaSourceSpec, QuotaSpec, TenantSpec, Ts};

/// Names sent for one kind, and during a re-list the names seen so far.
#[derive(Default)]
struct Known {
    keys: HashSet<String>,
    relist: Option<HashSet<String>>,
}

impl Known {
    fn init(&mut self) {
        self.relist = Some(HashSet::new());
    }
    fn seen(&mut self, key: &str) {
        if let Some(r) = self.relist.as_mut() {
            r.insert(key.to_string());
        }
        if !self.keys.contains(key) {
            self.keys.insert(key.to_string());
        }
    }
    fn forget(&mut self, key: &str) {
        self.keys.remove(key);
    }
    /// Ends a re-list: the keys that were not seen again are gone.
    fn done(&mut self) -> Vec<String> {
        let Some(seen) = self.relist.take() else { return Vec::new() };
        let gone: Vec<String> = self.keys.iter().filter(|k| !seen.contains(*k)).cloned().collect();
        for g in &gone {
            self.keys.remove(g);
        }
        gone
    }
}

fn split(key: &str) -> (String, String) {
    match key.split_once('/') {
        Some((a, b)) => (a.to_string(), b.to_string()),
        None => (String::new(), key.to_string()),
    }
}

fn meta_key(ns: Option<&String>, name: Option<&String>) -> Option<String> {
    let name = name?;
    Some(match ns {
        Some(ns) => format!("{ns}/{name}"),
        None => name.clone(),
    })
}

#[derive(Default)]
struct NodeGpus {
    model: Option<crate::mig::GpuModel>,
    /// GPUs derived from labels (no ResourceSlice for the node).
    from_labels: Vec<GpuSpec>,
    /// Devices per ResourceSlice name.
    slices: BTreeMap<String, Vec<SliceDevice>>,
    /// What was last sent, by uuid.
    sent: Vec<GpuSpec>,
    last_spec: Option<NodeSpec>,
}

/// The joins between objects, and what has been sent; turns watch events into deltas.
pub struct Translator {
    cfg: KubeFeedConfig,
    known: HashMap<Kind, Known>,
    pub(super) synced: BTreeSet<Kind>,
    sent_synced: bool,
    // tenants
    ns_label: HashMap<String, String>,
    ns_vcluster: HashMap<String, String>,
    ns_tenant: HashMap<String, String>,
    tenant_ns: BTreeMap<String, BTreeSet<String>>,
    tenant_source: HashMap<String, String>,
    vcluster_pods: HashMap<String, String>,
    // GPUs
    nodes: HashMap<String, NodeGpus>,
    /// (pool, device name) → uuid, for claim allocations.
    devices: HashMap<(String, String), String>,
    /// ResourceSlice name → (node, pool).
    slice_of: HashMap<String, (String, String)>,
    // DRA
    claims: HashMap<String, ClaimInfo>,
    claim_pods: HashMap<String, BTreeSet<String>>,
    pods_with_claims: HashMap<String, PodSpec>,
    /// The resourceVersion of each Event passed on, so a re-list (a restart, a 410) adds no
    /// event twice; an updated Event (count up) is passed on again. Bounded by the cluster's.
    event_versions: HashMap<String, String>,
    // quotas: key → (tenant, resources)
    /// What was sent per ResourceQuota (compact specs, not the object), so a tenant change
    /// can move them and a delete can remove them.
    quotas: HashMap<String, Vec<QuotaSpec>>,
    feed_errors: HashMap<Kind, String>,
    trouble_since: HashMap<Kind, Ts>,
    // Kueue: LocalQueue (ns/name) → ClusterQueue; namespace → ClusterQueue; CQ → quota keys.
    local_queues: HashMap<String, String>,
    ns_kueue: HashMap<String, String>,
    cq_quotas: HashMap<String, Vec<(String, String)>>,
    /// Workloads as read (ClusterQueue not yet from the LocalQueue), so a LocalQueue that
    /// changes its ClusterQueue moves the Workloads waiting in it.
    workloads: HashMap<String, crate::model::KueueWorkload>,
    dra: dra::DraJoins,
    /// Who owns each object that a GitOps tool marks, as last sent (by gitops key).
    gitops: HashMap<String, crate::model::GitOpsOwner>,
}

impl Translator {
    pub fn new(cfg: KubeFeedConfig) -> Self {
        Self {
            cfg,
            known: HashMap::new(),
            synced: BTreeSet::new(),
            sent_synced: false,
            ns_label: HashMap::new(),
            ns_vcluster: HashMap::new(),
            ns_tenant: HashMap::new(),
            tenant_ns: BTreeMap::new(),
            tenant_source: HashMap::new(),
            vcluster_pods: HashMap::new(),
            nodes: HashMap::new(),
            devices: HashMap::new(),
            slice_of: HashMap::new(),
            claims: HashMap::new(),
            claim_pods: HashMap::new(),
            pods_with_claims: HashMap::new(),
            event_versions: HashMap::new(),
            quotas: HashMap::new(),
            feed_errors: HashMap::new(),
            trouble_since: HashMap::new(),
            local_queues: HashMap::new(),
            ns_kueue: HashMap::new(),
            cq_quotas: HashMap::new(),
            workloads: HashMap::new(),
            dra: dra::DraJoins::default(),
            gitops: HashMap::new(),
        }
    }

    /// True once namespaces and vCluster control planes are listed (the other watches start then).
    pub fn first_synced(&self) -> bool {
        Kind::FIRST.iter().all(|k| self.synced.contains(k))
    }

    pub fn all_synced(&self) -> bool {
        Kind::FIRST.iter().chain(Kind::REST.iter()).all(|k| self.synced.contains(k))
    }

    /// How many claims the translator links to pods (it must not grow with pods that left).
    #[cfg(test)]
    pub(super) fn claim_links(&self) -> usize {
        self.claim_pods.len()
    }

    fn known(&mut self, k: Kind) -> &mut Known {
        self.known.entry(k).or_default()
    }

    /// Marks a kind as listed; the fleet is complete when every kind is.
    fn mark_synced(&mut self, k: Kind, out: &mut Vec<Delta>) {
        self.synced.insert(k);
        if self.all_synced() && !self.sent_synced {
            self.sent_synced = true;
            out.push(Delta::Synced);
        }
    }

    /// Kinds whose watch is failing now (not the ones the server does not serve).
    pub fn troubled(&self) -> Vec<Kind> {
        self.feed_errors.iter().filter(|(_, e)| !e.is_empty()).map(|(k, _)| *k).collect()
    }

    fn live(&mut self, k: Kind, out: &mut Vec<Delta>) {
        self.trouble_since.remove(&k);
        if self.feed_errors.remove(&k).is_some() {
            out.push(Delta::Feed { source: k.name().into(), state: FeedState::Live });
        }
    }

    pub fn apply(&mut self, msg: Msg, now: Ts) -> Vec<Delta> {
        let mut out = Vec::new();
        match msg {
            Msg::Namespace(e) => self.on_event(Kind::Namespaces, e, &mut out, Self::namespace),
            Msg::VCluster(e) => self.on_event(Kind::VClusters, e, &mut out, Self::vcluster),
            Msg::Node(e) => self.on_event(Kind::Nodes, e, &mut out, Self::node),
            Msg::Pod(e) => self.on_event(Kind::Pods, e, &mut out, Self::pod),
            Msg::Quota(e) => self.on_event(Kind::Quotas, e, &mut out, Self::quota),
            Msg::Pdb(e) => self.on_event(Kind::Pdbs, e, &mut out, Self::pdb),
            Msg::Event(e) => self.on_event(Kind::Events, e, &mut out, Self::event),
            Msg::Slice(e) => self.on_event(Kind::Slices, e, &mut out, Self::slice),
            Msg::Claim(e) => self.on_event(Kind::Claims, e, &mut out, Self::claim),
            Msg::LocalQueue(e) => self.on_event(Kind::LocalQueues, e, &mut out, Self::local_queue),
            Msg::ClusterQueue(e) => self.on_event(Kind::ClusterQueues, e, &mut out, Self::cluster_queue),
            Msg::TaintRule(e) => self.on_event(Kind::TaintRules, e, &mut out, Self::taint_rule),
            Msg::Domain(e) => self.on_event(Kind::Domains, e, &mut out, Self::domain),
            Msg::Workload(e) => self.on_event(Kind::Workloads, e, &mut out, Self::workload),
            Msg::NetPol(e) => self.on_event(Kind::NetPols, e, &mut out, Self::netpol),
            Msg::Machine(e) => self.on_event(Kind::Machines, e, &mut out, Self::machine),
            Msg::Host(e) => self.on_event(Kind::Hosts, e, &mut out, Self::host),
            Msg::CiliumPol(e) => self.on_event(Kind::CiliumPols, e, &mut out, Self::cilium_pol),
            Msg::CiliumWide(e) => self.on_event(Kind::CiliumWide, e, &mut out, Self::cilium_wide),
            Msg::Capi(k, e) => self.on_capi_event(k, e, &mut out),
            Msg::Error { kind, code, reason } => self.error(kind, code, reason, now, &mut out),
            Msg::Reachable(kind) => self.live(kind, &mut out),
        }
        out
    }

    fn on_event<K, F>(&mut self, kind: Kind, e: Event<K>, out: &mut Vec<Delta>, f: F)
    where
        K: kube::Resource,
        F: Fn(&mut Self, Option<&K>, &str, &mut Vec<Delta>),
    {
        let key_of = |o: &K| meta_key(o.meta().namespace.as_ref(), o.meta().name.as_ref());
        match e {
            Event::Init => self.known(kind).init(),
            Event::InitApply(o) | Event::Apply(o) => {
                self.live(kind, out);
                if let Some(key) = key_of(&o) {
                    self.known(kind).seen(&key);
                    f(self, Some(&o), &key, out);
                }
            }
            Event::Delete(o) => {
                if let Some(key) = key_of(&o) {
                    self.known(kind).forget(&key);
                    f(self, None, &key, out);
                }
            }
            Event::InitDone => {
                self.live(kind, out);
                for key in self.known(kind).done() {
                    f(self, None, &key, out);
                }
                self.mark_synced(kind, out);
            }
        }
    }

    // ---------- tenants ----------

    fn tenant_for(&self, ns: &str) -> (String, &'static str) {
        if let Some(t) = self.ns_label.get(ns) {
            return (t.clone(), "label");
        }
        if let Some(vc) = self.ns_vcluster.get(ns) {
            return (vc.clone(), "vcluster");
        }
        if let Some(cq) = self.ns_kueue.get(ns) {
            return (cq.clone(), "kueue");
        }
        (ns.to_string(), "namespace")
    }

    /// Re-resolves a namespace's tenant; emits the tenants whose namespace lists changed.
    fn retenant(&mut self, ns: &str, exists: bool, out: &mut Vec<Delta>) {
        let new = exists.then(|| self.tenant_for(ns));
        let old = self.ns_tenant.get(ns).cloned();
        if old.as_deref() == new.as_ref().map(|(t, _)| t.as_str())
            && new.as_ref().is_none_or(|(t, s)| self.tenant_source.get(t).map(String::as_str) == Some(*s))
        {
            return;
        }
        // The new owner first, so the namespace's pods move straight to it; then the old
        // owner without the namespace (or gone). The same owner by another source (its
        // vCluster pod seen first, then its namespace's label) keeps the namespace: removing
        // it and then the emptied tenant would delete the tenant just upserted.
        let mut old_delta = None;
        if let Some(old) = old.as_ref().filter(|o| new.as_ref().is_none_or(|(t, _)| t != *o)) {
            if let Some(set) = self.tenant_ns.get_mut(old) {
                set.remove(ns);
                let empty = set.is_empty();
                old_delta = Some(if empty {
                    self.tenant_ns.remove(old);
                    self.tenant_source.remove(old);
                    Delta::TenantRemove(old.clone())
                } else {
                    self.tenant_delta(old)
                });
            }
            self.ns_tenant.remove(ns);
        }
        if let Some((t, source)) = new {
            self.ns_tenant.insert(ns.to_string(), t.clone());
            self.tenant_ns.entry(t.clone()).or_default().insert(ns.to_string());
            self.tenant_source.insert(t.clone(), source.to_string());
            out.push(self.tenant_delta(&t));
        }
        out.extend(old_delta);
        // Quotas of the namespace follow it to its tenant.
        let tenant = self.ns_tenant.get(ns).cloned().unwrap_or_else(|| ns.to_string());
        let keys: Vec<String> = self.quotas.keys().filter(|k| split(k).0 == ns).cloned().collect();
        for k in keys {
            let mut specs = self.quotas.get(&k).cloned().unwrap_or_default();
            for s in specs.iter_mut() {
                s.tenant = tenant.clone();
            }
            self.send_quotas(&k, specs, out);
        }
    }

    fn tenant_delta(&self, t: &str) -> Delta {
        Delta::TenantUpsert(TenantSpec {
            name: t.to_string(),
            namespaces: self.tenant_ns.get(t).map(|s| s.iter().cloned().collect()).unwrap_or_default(),
            source: self.tenant_source.get(t).cloned().unwrap_or_else(|| "namespace".into()),
        })
    }

    fn namespace(&mut self, ns: Option<&Namespace>, key: &str, out: &mut Vec<Delta>) {
        let enforce =
            ns.and_then(|n| n.metadata.labels.as_ref()?.get(crate::model::isolation::POD_SECURITY_ENFORCE).cloned());
        out.push(Delta::PodSecurity { namespace: key.to_string(), enforce });
        match ns.and_then(|n| translate::namespace_tenant(n, &self.cfg.tenant_label)) {
            Some(t) => self.ns_label.insert(key.to_string(), t),
            None => self.ns_label.remove(key),
        };
        self.retenant(key, ns.is_some(), out);
    }

    /// A vCluster control-plane pod (`app=vcluster`, `release=<name>`): its namespace is the
    /// vCluster's host namespace, where every virtual namespace is synced.
    fn vcluster(&mut self, p: Option<&Pod>, key: &str, out: &mut Vec<Delta>) {
        let (ns, _) = split(key);
        let release = p.and_then(|p| p.metadata.labels.as_ref()?.get("release").cloned());
        match release {
            Some(r) => self.vcluster_pods.insert(key.to_string(), r),
            None => self.vcluster_pods.remove(key),
        };
        let vc = self.vcluster_pods.iter().find(|(k, _)| split(k).0 == ns).map(|(_, r)| r.clone());
        match vc {
            Some(r) => self.ns_vcluster.insert(ns.clone(), r),
            None => self.ns_vcluster.remove(&ns),
        };
        let exists =
            self.ns_tenant.contains_key(&ns) || self.known.get(&Kind::Namespaces).is_none_or(|k| k.keys.contains(&ns));
        self.retenant(&ns, exists, out);
    }

    /// A Kueue LocalQueue: its namespace belongs to the ClusterQueue's tenant.
    fn local_queue(&mut self, q: Option<&DynamicObject>, key: &str, out: &mut Vec<Delta>) {
        let (ns, _) = split(key);
        let cq = q.and_then(|q| q.data.get("spec")?.get("clusterQueue")?.as_str().map(str::to_string));
        match cq {
            Some(cq) => self.local_queues.insert(key.to_string(), cq),
            None => self.local_queues.remove(key),
        };
        // The namespace's first queue (by name) decides: stable when it has several.
        let mut of_ns: Vec<(&String, &String)> = self.local_queues.iter().filter(|(k, _)| split(k).0 == ns).collect();
        of_ns.sort();
        match of_ns.first().map(|(_, cq)| (*cq).clone()) {
            Some(cq) => self.ns_kueue.insert(ns.clone(), cq),
            None => self.ns_kueue.remove(&ns),
        };
        let exists = self.known.get(&Kind::Namespaces).is_none_or(|k| k.keys.contains(&ns));
        self.retenant(&ns, exists, out);
        self.requeue_workloads(key, out);
    }

    /// A Kueue ClusterQueue: nominal quota per flavor for GPU and MIG resources.
    fn cluster_queue(&mut self, q: Option<&DynamicObject>, key: &str, out: &mut Vec<Delta>) {
        self.managed(crate::model::gitops::key("clusterqueue", None, key), q.map(|q| &q.metadata), out);
        let specs = q.map(|q| translate::cluster_queue_quotas(q, key)).unwrap_or_default();
        let now: Vec<(String, String)> = specs
            .iter()
            .filter_map(|s| match &s.source {
                QuotaSourceSpec::ClusterQueue { flavor, .. } => Some((flavor.clone(), s.resource.clone())),
                QuotaSourceSpec::ResourceQuota { .. } => None,
            })
            .collect();
        for (flavor, resource) in self.cq_quotas.remove(key).unwrap_or_default() {
            if !now.contains(&(flavor.clone(), resource.clone())) {
                out.push(Delta::QuotaRemove {
                    tenant: key.to_string(),
                    source: QuotaSourceSpec::ClusterQueue { queue: key.to_string(), flavor },
                    resource,
                });
            }
        }
        if !now.is_empty() {
            self.cq_quotas.insert(key.to_string(), now);
            if !self.tenant_ns.contains_key(key) {
                self.tenant_source.insert(key.to_string(), "kueue".into());
                out.push(self.tenant_delta(key));
            }
        }
        out.extend(specs.into_iter().map(Delta::QuotaUpsert));
    }

    // ---------- nodes and GPUs ----------

    fn node(&mut self, n: Option<&Node>, key: &str, out: &mut Vec<Delta>) {
        self.managed(crate::model::gitops::key("node", None, key), n.map(|n| &n.metadata), out);
        let Some(spec) = n.and_then(translate::node_spec) else {
            // The node's slices may outlive it (or arrive again with it): keep them.
            if let Some(g) = self.nodes.get_mut(key) {
                for gpu in std::mem::take(&mut g.sent) {
                    out.push(Delta::GpuRemove(gpu.uuid));
                }
                g.last_spec = None;
                g.from_labels.clear();
                if g.slices.is_empty() {
                    self.nodes.remove(key);
                }
            }
            out.push(Delta::NodeRemove(key.to_string()));
            return;
        };
        let entry = self.nodes.entry(key.to_string()).or_default();
        entry.model = spec.gpu_model;
        entry.from_labels = translate::label_gpus(&spec);
        if entry.last_spec.as_ref() != Some(&spec) {
            entry.last_spec = Some(spec.clone());
            out.push(Delta::NodeUpsert(spec));
        }
        self.send_gpus(key, out);
    }

    fn send_gpus(&mut self, node: &str, out: &mut Vec<Delta>) {
        let Some(entry) = self.nodes.get_mut(node) else { return };
        // GPUs go out after their node: a slice listed before the node waits for it.
        let want: Vec<GpuSpec> = if entry.last_spec.is_none() {
            Vec::new()
        } else if entry.slices.values().any(|d| !d.is_empty()) {
            // Dynamic MIG: a partition exists only while a claim holds it.
            let (slice_of, joins) = (&self.slice_of, &self.dra);
            let mut devices: Vec<SliceDevice> = Vec::new();
            for (key, devs) in &entry.slices {
                let pool = slice_of.get(key).map(|(_, p)| p.as_str()).unwrap_or("");
                devices.extend(devs.iter().filter(|d| dra::keep_device(joins, key, pool, d)).cloned());
            }
            translate::slice_gpus(node, entry.model, &devices)
        } else {
            entry.from_labels.clone()
        };
        if want != entry.sent {
            let mut gone = Vec::new();
            for old in &entry.sent {
                if !want.iter().any(|g| g.uuid == old.uuid) {
                    out.push(Delta::GpuRemove(old.uuid.clone()));
                    gone.push(old.uuid.clone());
                }
            }
            for g in &want {
                if !entry.sent.contains(g) {
                    out.push(Delta::GpuUpsert(g.clone()));
                }
            }
            entry.sent = want.clone();
            for u in gone {
                self.forget_dra(&u);
            }
        }
        self.send_dra(node, &want, out);
    }

    fn slice(&mut self, s: Option<&ResourceSlice>, key: &str, out: &mut Vec<Delta>) {
        // Forget what this slice announced before.
        let mut touched: Vec<String> = Vec::new();
        let mut pools: Vec<String> = Vec::new();
        if let Some((node, pool)) = self.slice_of.remove(key) {
            if let Some(old) = self.nodes.get_mut(&node).and_then(|g| g.slices.remove(key)) {
                for d in &old {
                    self.devices.remove(&(pool.clone(), d.name().to_string()));
                }
            }
            touched.push(node);
            pools.push(pool);
        }
        let extras = s.and_then(super::dra::slice_extras);
        let at = s.and_then(|s| Some((s.spec.node_name.clone()?, s.spec.pool.name.clone())));
        let old_pool = pools.first().map(String::as_str);
        self.dra.slice(key, old_pool, at.as_ref().map(|(n, p)| (n.as_str(), p.as_str())), extras);
        if let Some((node, pool, devices)) = s.and_then(translate::slice_devices) {
            for d in &devices {
                self.devices.insert((pool.clone(), d.name().to_string()), d.uuid().to_string());
            }
            self.nodes.entry(node.clone()).or_default().slices.insert(key.to_string(), devices);
            self.slice_of.insert(key.to_string(), (node.clone(), pool.clone()));
            touched.push(node);
            pools.push(pool);
        }
        touched.sort();
        touched.dedup();
        for n in touched {
            self.send_gpus(&n, out);
        }
        // Pods whose claims were allocated from this pool can name their devices now.
        let pods: Vec<String> = self
            .pods_with_claims
            .iter()
            .filter(|(_, spec)| {
                spec.dra.iter().any(|c| {
                    self.claims
                        .get(&format!("{}/{}", spec.namespace, c.claim))
                        .is_some_and(|info| info.allocated.iter().any(|(p, _)| pools.contains(p)))
                })
            })
            .map(|(k, _)| k.clone())
            .collect();
        for p in pods {
            self.send_claim_pod(&p, out);
        }
    }

    // ---------- pods and DRA claims ----------

    /// Forgets which claims pod `key` named; a claim no pod names any more is dropped, so
    /// the map holds only live pods' claims however many come and go.
    fn unlink_claims(&mut self, key: &str) {
        let Some(old) = self.pods_with_claims.remove(key) else { return };
        for c in &old.dra {
            let ck = format!("{}/{}", old.namespace, c.claim);
            if let Some(set) = self.claim_pods.get_mut(&ck) {
                set.remove(key);
                if set.is_empty() {
                    self.claim_pods.remove(&ck);
                }
            }
        }
    }

    fn pod(&mut self, p: Option<&Pod>, key: &str, out: &mut Vec<Delta>) {
        self.unlink_claims(key);
        let Some(spec) = p.and_then(translate::pod_spec) else {
            let (namespace, name) = split(key);
            out.push(Delta::PodRemove { namespace, name });
            return;
        };
        if spec.dra.is_empty() {
            out.push(Delta::PodUpsert(spec));
            return;
        }
        for c in &spec.dra {
            self.claim_pods.entry(format!("{}/{}", spec.namespace, c.claim)).or_default().insert(key.to_string());
        }
        self.pods_with_claims.insert(key.to_string(), spec);
        self.send_claim_pod(key, out);
    }

    /// Sends a pod with DRA claims, joined with what its claims asked for and got.
    fn send_claim_pod(&self, key: &str, out: &mut Vec<Delta>) {
        let Some(spec) = self.pods_with_claims.get(key) else { return };
        let mut spec = spec.clone();
        let (mut bound, mut bound_mig) = (Vec::new(), Vec::new());
        for c in spec.dra.iter_mut() {
            let Some(info) = self.claims.get(&format!("{}/{}", spec.namespace, c.claim)) else { continue };
            c.device_class = info.device_class.clone();
            c.count = info.count;
            let uuids: Vec<String> = info
                .allocated
                .iter()
                .filter_map(|(pool, dev)| self.devices.get(&(pool.clone(), dev.clone())).cloned())
                .collect();
            // A MIG device is an instance the pod holds, not a GPU.
            for (pool, dev) in &info.allocated {
                if let Some(u) = self.devices.get(&(pool.clone(), dev.clone()))
                    && self.dra.is_mig(pool, dev)
                {
                    bound_mig.push(u.clone());
                }
            }
            c.allocated = match (info.allocated.first(), uuids.first()) {
                (_, Some(u)) => Some(u.clone()),
                (Some((pool, dev)), None) => Some(format!("{pool}/{dev}")),
                (None, None) => None,
            };
            bound.extend(uuids.into_iter().filter(|u| !bound_mig.contains(u)));
        }
        // A claim on no GPU (a ComputeDomain's IMEX channel) is no GPU request.
        spec.dra.retain(|c| !self.claims.get(&format!("{}/{}", spec.namespace, c.claim)).is_some_and(|i| i.not_gpu));
        spec.bound_gpus = bound;
        spec.bound_mig = bound_mig;
        out.push(Delta::PodUpsert(spec));
    }

    fn claim(&mut self, c: Option<&ResourceClaim>, key: &str, out: &mut Vec<Delta>) {
        match c {
            Some(c) => self.claims.insert(key.to_string(), translate::claim_info(c)),
            None => self.claims.remove(key),
        };
        self.claim_devices_changed(key, out);
        let pods: Vec<String> = self.claim_pods.get(key).map(|s| s.iter().cloned().collect()).unwrap_or_default();
        for p in pods {
            self.send_claim_pod(&p, out);
        }
    }

    // ---------- quotas, PDBs, events ----------

    fn quota(&mut self, q: Option<&ResourceQuota>, key: &str, out: &mut Vec<Delta>) {
        let (ns, name) = split(key);
        self.managed(crate::model::gitops::key("resourcequota", Some(&ns), &name), q.map(|q| &q.metadata), out);
        let specs = match q {
            Some(q) => {
                let tenant = self.ns_tenant.get(&ns).cloned().unwrap_or_else(|| self.tenant_for(&ns).0);
                translate::quota_specs(q, &tenant)
            }
            None => Vec::new(),
        };
        self.send_quotas(key, specs, out);
    }

    /// Sends a quota object's specs, removing what was sent before and is not in them now.
    fn send_quotas(&mut self, key: &str, specs: Vec<QuotaSpec>, out: &mut Vec<Delta>) {
        for old in self.quotas.remove(key).unwrap_or_default() {
            if !specs.iter().any(|s| s.resource == old.resource && s.tenant == old.tenant) {
                out.push(Delta::QuotaRemove { tenant: old.tenant, source: old.source, resource: old.resource });
            }
        }
        out.extend(specs.iter().cloned().map(Delta::QuotaUpsert));
        if !specs.is_empty() {
            self.quotas.insert(key.to_string(), specs);
        }
    }

    fn pdb(&mut self, p: Option<&PodDisruptionBudget>, key: &str, out: &mut Vec<Delta>) {
        match p.and_then(translate::pdb_spec) {
            Some(spec) => out.push(Delta::PdbUpsert(spec)),
            None => {
                let (namespace, name) = split(key);
                out.push(Delta::PdbRemove { namespace, name });
            }
        }
    }

    fn event(&mut self, e: Option<&KEvent>, key: &str, out: &mut Vec<Delta>) {
        let Some(e) = e else {
            self.event_versions.remove(key);
            return;
        };
        let version = e.metadata.resource_version.clone().unwrap_or_default();
        if !version.is_empty() && self.event_versions.get(key) == Some(&version) {
            return;
        }
        self.event_versions.insert(key.to_string(), version);
        out.push(Delta::Event(translate::event_spec(e)));
    }
}
