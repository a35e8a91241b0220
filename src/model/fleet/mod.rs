//! `Fleet`: what the cluster is. Owns every domain object, applies deltas, and keeps the
//! indexes and derived facts (allocation, idle-but-allocated, fragmentation, tenant usage)
//! up to date per delta, so no view ever has to rescan the fleet.
//!
//! The state is here; what changes it is split by concern: [`nodes`], [`gpus`], [`pods`],
//! [`tenants`], [`quotas`], [`telemetry`] (what node agents say), [`events`] (events,
//! operations, feeds). [`Indexes`] find objects by name, [`Counters`] keep the totals.

mod capi;
mod counters;
mod dra;
mod events;
mod gpus;
mod indexes;
pub mod isolation;
mod kueue;
mod metal3;
mod nodes;
mod pods;
mod quotas;
mod telemetry;
mod tenants;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::delta::*;
use super::dra::{ComputeDomainSpec, GpuDra};
use super::history::Ring;
use super::intern::{FastMap, Interner, Sym};
use super::sharing::Sharing;
use super::slab::Slab;
use super::types::*;
use crate::mig::{self, Fragmentation, PlacedInstance};
pub use capi::CapiRow;
pub use counters::Totals;
use counters::{Counters, NodeAlloc};
pub use events::{FeedsState, cap_text};
use indexes::Indexes;
use telemetry::Held;

/// How many events the fleet keeps; older ones fall off.
pub const EVENT_CAPACITY: usize = 5000;
/// An event's reason, object and message are kept up to this many bytes each, so the
/// history stays within a few tens of MB whatever the events say (5,000 × ~4.5 KiB).
pub const EVENT_REASON_MAX: usize = 128;
pub const EVENT_OBJECT_MAX: usize = 512;
pub const EVENT_MESSAGE_MAX: usize = 4096;
/// At most this many pods' last FailedScheduling message are kept (pending pods are far fewer).
pub const SCHED_NOTES_MAX: usize = 100_000;
/// How many operations (running and finished) the fleet remembers.
pub const OP_CAPACITY: usize = 200;

/// The GPU-related resource names quotas are matched against.
pub const GPU_QUOTA_RESOURCES: [&str; 3] =
    ["requests.nvidia.com/gpu", "nvidia.com/gpu", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"];

#[derive(Debug, Clone)]
pub struct Fleet {
    pub interner: Interner,
    pub now: Ts,
    pub thresholds: Thresholds,
    pub nodes: Slab<NodeId, Node>,
    pub gpus: Slab<GpuId, Gpu>,
    pub pods: Slab<PodId, Pod>,
    pub tenants: Slab<TenantId, Tenant>,
    pub quotas: Slab<QuotaId, Quota>,
    pub pdbs: Vec<Pdb>,
    /// ComputeDomains by `namespace/name`.
    pub domains: BTreeMap<String, ComputeDomainSpec>,
    /// Kueue Workloads by `namespace/name`.
    /// (Boxed values: a B-tree node holds eleven, and most nodes are part empty.)
    pub workloads: BTreeMap<String, Box<super::kueue::KueueWorkload>>,
    /// The objects fabrik may change that a GitOps tool owns, by [`super::gitops::key`].
    pub gitops: BTreeMap<String, super::gitops::GitOpsOwner>,
    /// Cluster API Machines by `namespace/name`...
    pub machines: BTreeMap<String, Box<super::capi::Machine>>,
    /// ...and by the node each became.
    pub node_machine: BTreeMap<String, String>,
    /// The Cluster API objects above the Machines, by kind and `namespace/name`.
    pub capi: BTreeMap<(super::capi::CapiKind, String), super::capi::CapiObject>,
    /// Metal3 BareMetalHosts by `namespace/name`...
    pub hosts: BTreeMap<String, Box<super::metal3::BareMetalHost>>,
    /// ...and their `namespace/name` by uid (the legacy Metal3 providerID names a uid).
    pub host_uid: BTreeMap<String, String>,
    /// A stable row id per host (`namespace/name`), for the hosts view, and back.
    pub(super) host_ids: BTreeMap<String, u32>,
    pub(super) host_refs: BTreeMap<u32, String>,
    pub(super) next_host: u32,
    /// Machines by the host their providerID names (the host → node join, without a scan
    /// of every Machine per host: at 65,000 nodes that scan made the listing quadratic).
    /// Normally one Machine a host, so a sorted vector (a B-tree set of one took 390 bytes).
    pub host_machines: BTreeMap<super::metal3::HostRef, Vec<Box<str>>>,
    /// NetworkPolicies by namespace, then name.
    pub netpols: BTreeMap<String, BTreeMap<String, super::isolation::NetPolicySpec>>,
    /// Pod Security admission's enforced level by namespace (those with the label).
    pub pod_security: BTreeMap<String, String>,
    pub alerts: BTreeMap<(AlertKind, AlertTarget), Alert>,
    /// The last object inspected (`y`): the answer the inspect pane shows.
    pub inspected: Option<Box<super::Inspected>>,
    /// The log of the last request (`L`): what the logs pane shows.
    pub logs: Option<super::LogBuffer>,
    pub events: VecDeque<Event>,
    pub ops: Vec<OpStatus>,
    /// The access review's answer; `None` until it arrives (and always on the demo).
    pub access: Option<AccessSpec>,
    pub feeds: BTreeMap<String, FeedState>,
    pub synced: bool,
    pub totals: Totals,
    /// Bumped on every change to what exists (not on telemetry).
    pub structure_gen: u64,
    /// Bumped on every telemetry batch.
    pub telemetry_gen: u64,
    /// Bumped when events are appended.
    pub events_gen: u64,
    /// Compute processes per GPU, from node agents (only GPUs an agent streams have them).
    pub gpu_procs: FastMap<GpuId, Vec<ProcSample>>,
    /// How each GPU reaches the other GPUs of its node, from node agents.
    pub gpu_peers: FastMap<GpuId, Vec<PeerSample>>,

    idx: Indexes,
    cotenancy: isolation::Cotenancy,
    counters: Counters,
    /// Pods a node agent says hold a whole GPU or a MIG instance (namespace, name): the
    /// kubelet's assignment when the agent reads its PodResources API, else (whole GPUs) the
    /// pods whose processes run there.
    /// With the device plugin the API server does not say which GPU or instance a pod got
    /// (DRA does); this is how the fleet learns it, so idle-but-allocated works there too.
    /// Used only for pods that ask for devices the cluster does not name for them.
    holders: FastMap<Held, Vec<(Sym, Box<str>)>>,
    /// Per shared GPU, the holders whose own share has been under the idle threshold, and
    /// since when (see [`Fleet::share_util`]).
    share_low: FastMap<GpuId, Vec<(PodId, Ts)>>,
    /// The scheduler's last FailedScheduling per pod (namespace → name), read once as it
    /// arrives, and when; dropped when the pod is scheduled or goes.
    sched_failed: FastMap<Sym, FastMap<Box<str>, (Ts, crate::model::Waiting)>>,
    /// Per controller (`replicaset/ns/name`, …), its last FailedCreate that a ResourceQuota
    /// refused, and when; dropped at its next SuccessfulCreate.
    quota_refused: FastMap<String, (Ts, crate::model::QuotaRefusal)>,
    /// Nodes whose MIG config is `pending`, watched for a stuck one.
    mig_pending: BTreeSet<NodeId>,
    frag: FastMap<GpuId, Fragmentation>,
    gpu_resources: Vec<Sym>,
    /// Each queued Workload's place in its ClusterQueue (see [`Fleet::workload_position`]),
    /// from the queued Workloads of each ClusterQueue in Kueue's order...
    wl_pos: FastMap<String, u32>,
    wl_lines: FastMap<String, BTreeSet<kueue::LineKey>>,
    /// ...and per namespace, the pods of its Workloads Kueue holds back.
    wl_held: FastMap<String, u32>,
    /// Workload uid → `namespace/name` (Kueue names a preemptor by uid).
    wl_by_uid: FastMap<String, String>,
    /// Each Workload's row id while it exists (`namespace/name` ↔ id), so a row keeps its
    /// Workload while others come and go; ids are not reused.
    wl_ids: FastMap<String, u32>,
    wl_keys: FastMap<u32, String>,
    next_wl: u32,
    /// Each Cluster API object's and Machine's row id while it exists (kind — `None` for a
    /// Machine — and `namespace/name` ↔ id); ids are not reused.
    capi_ids: FastMap<capi::CapiRef, u32>,
    capi_refs: FastMap<u32, capi::CapiRef>,
    next_capi: u32,
}

impl Default for Fleet {
    fn default() -> Self {
        Self::new(Thresholds::default())
    }
}

impl Fleet {
    pub fn new(thresholds: Thresholds) -> Self {
        let mut interner = Interner::new();
        let gpu_resources = GPU_QUOTA_RESOURCES.iter().map(|r| interner.intern(r)).collect();
        Self {
            interner,
            now: 0,
            thresholds,
            nodes: Slab::new(),
            gpus: Slab::new(),
            pods: Slab::new(),
            tenants: Slab::new(),
            quotas: Slab::new(),
            pdbs: Vec::new(),
            domains: BTreeMap::new(),
            workloads: BTreeMap::new(),
            gitops: BTreeMap::new(),
            netpols: BTreeMap::new(),
            pod_security: BTreeMap::new(),
            machines: BTreeMap::new(),
            capi: BTreeMap::new(),
            node_machine: BTreeMap::new(),
            hosts: BTreeMap::new(),
            host_uid: BTreeMap::new(),
            host_ids: BTreeMap::new(),
            host_refs: BTreeMap::new(),
            next_host: 0,
            host_machines: BTreeMap::new(),
            cotenancy: Default::default(),
            alerts: BTreeMap::new(),
            inspected: None,
            logs: None,
            events: VecDeque::new(),
            ops: Vec::new(),
            access: None,
            feeds: BTreeMap::new(),
            synced: false,
            totals: Totals::default(),
            structure_gen: 0,
            telemetry_gen: 0,
            events_gen: 0,
            gpu_procs: FastMap::default(),
            gpu_peers: FastMap::default(),
            idx: Indexes::default(),
            counters: Counters::default(),
            holders: FastMap::default(),
            share_low: FastMap::default(),
            sched_failed: FastMap::default(),
            quota_refused: FastMap::default(),
            mig_pending: BTreeSet::new(),
            frag: FastMap::default(),
            gpu_resources,
            wl_pos: FastMap::default(),
            wl_lines: FastMap::default(),
            wl_held: FastMap::default(),
            wl_by_uid: FastMap::default(),
            wl_ids: FastMap::default(),
            wl_keys: FastMap::default(),
            next_wl: 0,
            capi_ids: FastMap::default(),
            capi_refs: FastMap::default(),
            next_capi: 0,
        }
    }

    // ---------- lookups ----------

    pub fn str_of(&self, sym: Sym) -> &str {
        self.interner.resolve(sym)
    }
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id)
    }
    pub fn gpu(&self, id: GpuId) -> Option<&Gpu> {
        self.gpus.get(id)
    }
    pub fn pod(&self, id: PodId) -> Option<&Pod> {
        self.pods.get(id)
    }
    pub fn tenant(&self, id: TenantId) -> Option<&Tenant> {
        self.tenants.get(id)
    }
    pub fn quota(&self, id: QuotaId) -> Option<&Quota> {
        self.quotas.get(id)
    }
    pub fn node_by_name(&self, name: &str) -> Option<NodeId> {
        self.idx.node_by_name.get(&self.interner.get(name)?).copied()
    }
    pub fn gpu_by_uuid(&self, uuid: &str) -> Option<GpuId> {
        self.idx.gpu_by_uuid.get(&self.interner.get(uuid)?).copied()
    }
    /// The pods of namespace `namespace`, in no particular order.
    pub fn pods_in_namespace(&self, namespace: Sym) -> impl Iterator<Item = PodId> + '_ {
        self.idx.pods_in(namespace)
    }
    pub fn pod_by_name(&self, namespace: &str, name: &str) -> Option<PodId> {
        let ns = self.interner.get(namespace)?;
        self.idx.pod_by_name.get(&ns)?.get(name).copied()
    }
    pub fn tenant_by_name(&self, name: &str) -> Option<TenantId> {
        self.idx.tenant_by_name.get(&self.interner.get(name)?).copied()
    }
    pub fn pods_on_node(&self, node: NodeId) -> &[PodId] {
        self.idx.pods_by_node.get(&node).map(Vec::as_slice).unwrap_or(&[])
    }
    pub fn mig_instance(&self, uuid: Sym) -> Option<(GpuId, u8)> {
        self.idx.mig_by_uuid.get(&uuid).copied()
    }
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes.ids()
    }
    pub fn gpu_ids(&self) -> impl Iterator<Item = GpuId> + '_ {
        self.gpus.ids()
    }
    pub fn pod_ids(&self) -> impl Iterator<Item = PodId> + '_ {
        self.pods.ids()
    }
    pub fn tenant_ids(&self) -> impl Iterator<Item = TenantId> + '_ {
        self.tenants.ids()
    }
    pub fn quota_ids(&self) -> impl Iterator<Item = QuotaId> + '_ {
        self.quotas.ids()
    }

    // ---------- applying deltas ----------

    /// Applies one delta. Returns whether anything a person could see changed.
    pub fn apply(&mut self, delta: Delta) -> bool {
        match delta {
            Delta::Clock(ts) => {
                let before = self.now / 1000;
                self.now = self.now.max(ts);
                // A new second changes what ages and "since" read: worth a redraw (only the
                // changed cells reach the terminal).
                let ticked = self.now / 1000 != before;
                self.check_stuck_mig() | ticked
            }
            Delta::NodeUpsert(spec) => {
                // A node that arrives after its Machine gets the Machine's alert now.
                let machine = self.node_machine.contains_key(&spec.name).then(|| spec.name.clone());
                self.upsert_node(spec);
                if let Some(name) = machine {
                    self.refresh_machine_alert(&name);
                }
                self.structure_gen += 1;
                true
            }
            Delta::NodeRemove(name) => {
                let changed = self.remove_node(&name);
                self.structure_gen += changed as u64;
                changed
            }
            Delta::GpuUpsert(spec) => {
                let changed = self.upsert_gpu(spec);
                self.structure_gen += changed as u64;
                changed
            }
            Delta::GpuRemove(uuid) => {
                let changed = self.gpu_by_uuid(&uuid).map(|g| self.remove_gpu(g)).is_some();
                self.structure_gen += changed as u64;
                changed
            }
            Delta::GpuDra { uuid, dra } => {
                let changed = self.set_gpu_dra(&uuid, dra);
                self.structure_gen += changed as u64;
                changed
            }
            Delta::DomainUpsert(spec) => {
                self.upsert_domain(spec);
                self.structure_gen += 1;
                true
            }
            Delta::DomainRemove { namespace, name } => {
                let changed = self.remove_domain(&format!("{namespace}/{name}"));
                self.structure_gen += changed as u64;
                changed
            }
            Delta::WorkloadUpsert(w) => {
                self.upsert_workload(w);
                self.structure_gen += 1;
                true
            }
            Delta::WorkloadRemove { namespace, name } => {
                let changed = self.remove_workload(&format!("{namespace}/{name}"));
                self.structure_gen += changed as u64;
                changed
            }
            Delta::Managed { object, owner } => {
                let changed = match owner {
                    Some(o) => self.gitops.insert(object, o.clone()).is_none_or(|old| old != o),
                    None => self.gitops.remove(&object).is_some(),
                };
                self.structure_gen += changed as u64;
                changed
            }
            Delta::MachineUpsert(m) => {
                let changed = self.upsert_machine(m);
                self.structure_gen += changed as u64;
                changed
            }
            Delta::MachineRemove { namespace, name } => {
                let changed = self.remove_machine(&format!("{namespace}/{name}"));
                self.structure_gen += changed as u64;
                changed
            }
            Delta::CapiUpsert(o) => {
                let changed = self.upsert_capi(o);
                self.structure_gen += changed as u64;
                changed
            }
            Delta::CapiRemove { kind, namespace, name } => {
                let changed = self.remove_capi(kind, &format!("{namespace}/{name}"));
                self.structure_gen += changed as u64;
                changed
            }
            Delta::HostUpsert(h) => {
                let changed = self.upsert_host(h);
                self.structure_gen += changed as u64;
                changed
            }
            Delta::HostRemove { namespace, name } => {
                let changed = self.remove_host(&format!("{namespace}/{name}"));
                self.structure_gen += changed as u64;
                changed
            }
            Delta::NetPolUpsert(p) => {
                let (ns, name) = (p.namespace.clone(), p.name.clone());
                let changed = self.set_netpol(ns, name, Some(p));
                self.structure_gen += changed as u64;
                changed
            }
            Delta::NetPolRemove { namespace, name } => {
                let changed = self.set_netpol(namespace, name, None);
                self.structure_gen += changed as u64;
                changed
            }
            Delta::PodSecurity { namespace, enforce } => {
                let changed = match enforce {
                    Some(level) => self.pod_security.insert(namespace, level.clone()) != Some(level),
                    None => self.pod_security.remove(&namespace).is_some(),
                };
                self.structure_gen += changed as u64;
                changed
            }
            Delta::Telemetry(samples) => {
                for s in samples {
                    self.apply_sample(s);
                }
                self.telemetry_gen += 1;
                true
            }
            Delta::GpuFault { gpu_uuid, at, fault } => self.apply_fault(&gpu_uuid, at, fault),
            Delta::GpuFaultClear { gpu_uuid } => {
                let Some(gid) = self.gpu_by_uuid(&gpu_uuid) else { return false };
                if let Some(g) = self.gpus.get_mut(gid) {
                    g.xid = None;
                    g.ecc_uncorrected = 0;
                }
                self.alerts.retain(|(k, t), _| {
                    !(*t == AlertTarget::Gpu(gid) && matches!(k, AlertKind::Xid(_) | AlertKind::EccUncorrected))
                });
                self.structure_gen += 1;
                true
            }
            Delta::PodUpsert(spec) => {
                self.upsert_pod(spec);
                self.structure_gen += 1;
                true
            }
            Delta::PodRemove { namespace, name } => {
                let Some(pid) = self.pod_by_name(&namespace, &name) else { return false };
                self.remove_pod(pid);
                self.structure_gen += 1;
                true
            }
            Delta::TenantUpsert(spec) => {
                self.upsert_tenant(spec);
                self.structure_gen += 1;
                true
            }
            Delta::TenantRemove(name) => {
                let Some(tid) = self.tenant_by_name(&name) else { return false };
                self.remove_tenant(tid);
                self.structure_gen += 1;
                true
            }
            Delta::QuotaUpsert(spec) => {
                self.upsert_quota(spec);
                self.structure_gen += 1;
                true
            }
            Delta::QuotaRemove { tenant, source, resource } => {
                let changed = self.remove_quota(&tenant, &source, &resource);
                self.structure_gen += changed as u64;
                changed
            }
            Delta::PdbUpsert(spec) => {
                self.upsert_pdb(spec);
                self.structure_gen += 1;
                true
            }
            Delta::PdbRemove { namespace, name } => {
                let changed = self.remove_pdb(&namespace, &name);
                self.structure_gen += changed as u64;
                changed
            }
            Delta::Event(e) => {
                self.push_event(e);
                true
            }
            Delta::Op(p) => {
                self.apply_op(p);
                true
            }
            Delta::Access(a) => {
                self.access = Some(a);
                true
            }
            Delta::Feed { source, state } => {
                let netpol = source == isolation::NETPOL_FEED;
                let changed = self.feeds.insert(source, state.clone()) != Some(state);
                if changed && netpol {
                    self.refresh_netpol_alerts();
                }
                changed
            }
            Delta::FeedRemove(source) => {
                let netpol = source == isolation::NETPOL_FEED;
                let changed = self.feeds.remove(&source).is_some();
                if changed && netpol {
                    self.refresh_netpol_alerts();
                }
                changed
            }
            Delta::Synced => {
                let changed = !self.synced;
                self.synced = true;
                if changed {
                    self.refresh_netpol_alerts();
                    // The initial listing is in: what grew room while it came goes back (the
                    // fleet grows little after it).
                    self.pods.shrink_keeping_room();
                    self.counters.pod.shrink_keeping_room();
                    self.gpus.shrink_keeping_room();
                    self.nodes.shrink_keeping_room();
                    self.interner.shrink_to_fit();
                }
                changed
            }
            // A late answer to an earlier request does not replace a newer one.
            Delta::Inspected(i) => match &self.inspected {
                Some(old) if old.request > i.request => false,
                _ => {
                    self.inspected = Some(i);
                    true
                }
            },
            // Chunks of an earlier request are dropped; the first of a newer one starts afresh.
            Delta::Log { request, event } => match &mut self.logs {
                Some(b) if b.request == request => b.apply(event, self.now),
                Some(b) if b.request > request => false,
                _ => {
                    let mut b = super::LogBuffer::new(request, self.now);
                    b.apply(event, self.now);
                    self.logs = Some(b);
                    true
                }
            },
        }
    }
}
