//! `Fleet`: what the cluster is. Owns every domain object, applies deltas, and keeps the
//! indexes and derived facts (allocation, idle-but-allocated, fragmentation, tenant usage)
//! up to date per delta, so no view ever has to rescan the fleet.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::delta::*;
use super::history::Ring;
use super::intern::{FastMap, Interner, Sym};
use super::types::*;
use crate::mig::{self, Fragmentation, PlacedInstance};

/// How many events the fleet keeps; older ones fall off.
pub const EVENT_CAPACITY: usize = 5000;
/// How many operations (running and finished) the fleet remembers.
pub const OP_CAPACITY: usize = 200;

/// The GPU-related resource names quotas are matched against.
pub const GPU_QUOTA_RESOURCES: [&str; 3] =
    ["requests.nvidia.com/gpu", "nvidia.com/gpu", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"];

/// Fleet-wide counters for the header, maintained incrementally.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub nodes: u32,
    pub nodes_ready: u32,
    pub nodes_cordoned: u32,
    pub gpus: u32,
    /// Physical GPUs with any allocation (whole, or any MIG instance); on a node whose
    /// pods hold MIG instances the fleet cannot place, the fewest GPUs those must be on
    /// (see [`Fleet::node_allocated_gpus`]), so a lower bound there.
    pub gpus_allocated: u32,
    /// Physical GPUs at or above the busy threshold...
    pub gpus_busy: u32,
    /// ...among the GPUs whose utilisation is measured (the rest is unknown, not idle).
    pub gpus_measured: u32,
    pub gpus_mig: u32,
    pub mig_instances: u32,
    /// MIG instances held: bound to a pod, or held by a pod without a known instance...
    pub mig_allocated: u32,
    /// ...of which held without a known instance (device plugin, no node agent).
    pub mig_unbound: u32,
    /// Devices (whole GPUs and MIG instances) allocated but idle for the window...
    pub idle_allocated: u32,
    /// ...among the allocated devices whose utilisation is measured.
    pub devices_measured: u32,
    pub pods: u32,
    pub pods_pending: u32,
}

/// What one device (a whole GPU or a MIG instance) contributes to the counters; kept so
/// the next change can subtract exactly what was added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct DeviceContrib {
    tenant: Option<TenantId>,
    busy: bool,
    idle: bool,
    /// Allocated and its utilisation measured.
    measured: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PodContrib {
    req_gpus: u32,
    alloc_gpus: u32,
    req_mig: u32,
    alloc_mig: u32,
    counted: bool,
    pending: bool,
}

#[derive(Debug, Clone)]
pub struct Fleet {
    pub interner: Interner,
    pub now: Ts,
    pub thresholds: Thresholds,
    pub nodes: Vec<Option<Node>>,
    pub gpus: Vec<Option<Gpu>>,
    pub pods: Vec<Option<Pod>>,
    pub tenants: Vec<Option<Tenant>>,
    pub quotas: Vec<Option<Quota>>,
    pub pdbs: Vec<Pdb>,
    pub alerts: BTreeMap<(AlertKind, AlertTarget), Alert>,
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

    node_by_name: FastMap<Sym, NodeId>,
    gpu_by_uuid: FastMap<Sym, GpuId>,
    mig_by_uuid: FastMap<Sym, (GpuId, u8)>,
    pod_by_name: FastMap<Sym, FastMap<Box<str>, PodId>>,
    pods_by_node: FastMap<NodeId, Vec<PodId>>,
    tenant_by_name: FastMap<Sym, TenantId>,
    tenant_by_ns: FastMap<Sym, TenantId>,
    free_nodes: Vec<u32>,
    free_gpus: Vec<u32>,
    free_pods: Vec<u32>,
    gpu_contrib: FastMap<GpuId, DeviceContrib>,
    /// Compute processes per GPU, from node agents (only GPUs an agent streams have them).
    pub gpu_procs: FastMap<GpuId, Vec<ProcSample>>,
    /// How each GPU reaches the other GPUs of its node, from node agents.
    pub gpu_peers: FastMap<GpuId, Vec<PeerSample>>,
    /// Other names of a GPU: the NVML uuid a node agent reports for a GPU the cluster
    /// announces only by node labels (learned when its samples are matched by node and index).
    gpu_alias: FastMap<String, GpuId>,
    /// Pods a node agent says hold a whole GPU or a MIG instance (namespace, name): the
    /// kubelet's assignment when the agent reads its PodResources API, else (whole GPUs) the
    /// pods whose processes run there.
    /// With the device plugin the API server does not say which GPU or instance a pod got
    /// (DRA does); this is how the fleet learns it, so idle-but-allocated works there too.
    /// Used only for pods that ask for devices the cluster does not name for them.
    holders: FastMap<Held, Vec<(Sym, Box<str>)>>,
    mig_contrib: FastMap<(GpuId, u8), DeviceContrib>,
    pod_contrib: FastMap<PodId, PodContrib>,
    node_alloc_counted: FastMap<NodeId, u32>,
    mig_pending: BTreeSet<NodeId>,
    /// Pods that name a node the fleet has not seen yet, by node name.
    waiting: FastMap<Sym, Vec<PodId>>,
    frag: FastMap<GpuId, Fragmentation>,
    gpu_resources: Vec<Sym>,
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
            nodes: Vec::new(),
            gpus: Vec::new(),
            pods: Vec::new(),
            tenants: Vec::new(),
            quotas: Vec::new(),
            pdbs: Vec::new(),
            alerts: BTreeMap::new(),
            events: VecDeque::new(),
            ops: Vec::new(),
            access: None,
            feeds: BTreeMap::new(),
            synced: false,
            totals: Totals::default(),
            structure_gen: 0,
            telemetry_gen: 0,
            events_gen: 0,
            node_by_name: FastMap::default(),
            gpu_by_uuid: FastMap::default(),
            mig_by_uuid: FastMap::default(),
            pod_by_name: FastMap::default(),
            pods_by_node: FastMap::default(),
            tenant_by_name: FastMap::default(),
            tenant_by_ns: FastMap::default(),
            free_nodes: Vec::new(),
            free_gpus: Vec::new(),
            free_pods: Vec::new(),
            gpu_contrib: FastMap::default(),
            gpu_procs: FastMap::default(),
            gpu_peers: FastMap::default(),
            gpu_alias: FastMap::default(),
            holders: FastMap::default(),
            mig_contrib: FastMap::default(),
            pod_contrib: FastMap::default(),
            node_alloc_counted: FastMap::default(),
            mig_pending: BTreeSet::new(),
            waiting: FastMap::default(),
            frag: FastMap::default(),
            gpu_resources,
        }
    }

    // ---------- lookups ----------

    pub fn s(&self, sym: Sym) -> &str {
        self.interner.resolve(sym)
    }
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.0 as usize).and_then(Option::as_ref)
    }
    pub fn gpu(&self, id: GpuId) -> Option<&Gpu> {
        self.gpus.get(id.0 as usize).and_then(Option::as_ref)
    }
    pub fn pod(&self, id: PodId) -> Option<&Pod> {
        self.pods.get(id.0 as usize).and_then(Option::as_ref)
    }
    pub fn tenant(&self, id: TenantId) -> Option<&Tenant> {
        self.tenants.get(id.0 as usize).and_then(Option::as_ref)
    }
    pub fn node_by_name(&self, name: &str) -> Option<NodeId> {
        self.node_by_name.get(&self.interner.get(name)?).copied()
    }
    pub fn gpu_by_uuid(&self, uuid: &str) -> Option<GpuId> {
        self.gpu_by_uuid.get(&self.interner.get(uuid)?).copied()
    }
    pub fn pod_by_name(&self, namespace: &str, name: &str) -> Option<PodId> {
        let ns = self.interner.get(namespace)?;
        self.pod_by_name.get(&ns)?.get(name).copied()
    }
    pub fn tenant_by_name(&self, name: &str) -> Option<TenantId> {
        self.tenant_by_name.get(&self.interner.get(name)?).copied()
    }
    pub fn pods_on_node(&self, node: NodeId) -> &[PodId] {
        self.pods_by_node.get(&node).map(Vec::as_slice).unwrap_or(&[])
    }
    pub fn mig_instance(&self, uuid: Sym) -> Option<(GpuId, u8)> {
        self.mig_by_uuid.get(&uuid).copied()
    }
    pub fn fragmentation(&self, gpu: GpuId) -> Option<&Fragmentation> {
        self.frag.get(&gpu)
    }
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes.iter().enumerate().filter(|(_, n)| n.is_some()).map(|(i, _)| NodeId(i as u32))
    }
    pub fn gpu_ids(&self) -> impl Iterator<Item = GpuId> + '_ {
        self.gpus.iter().enumerate().filter(|(_, g)| g.is_some()).map(|(i, _)| GpuId(i as u32))
    }
    pub fn pod_ids(&self) -> impl Iterator<Item = PodId> + '_ {
        self.pods.iter().enumerate().filter(|(_, p)| p.is_some()).map(|(i, _)| PodId(i as u32))
    }
    pub fn tenant_ids(&self) -> impl Iterator<Item = TenantId> + '_ {
        self.tenants.iter().enumerate().filter(|(_, t)| t.is_some()).map(|(i, _)| TenantId(i as u32))
    }
    pub fn quota_ids(&self) -> impl Iterator<Item = usize> + '_ {
        self.quotas.iter().enumerate().filter(|(_, q)| q.is_some()).map(|(i, _)| i)
    }
    /// The tenant's hard limit on whole GPUs (sum of its GPU quotas), if it has one.
    pub fn tenant_gpu_quota(&self, t: &Tenant) -> Option<i64> {
        t.gpu_quota(&self.quotas, &self.gpu_resources)
    }
    pub fn is_gpu_resource(&self, resource: Sym) -> bool {
        self.gpu_resources.contains(&resource)
    }
    /// Pods of a PDB (same namespace, matching app label).
    pub fn pdb_for_pod(&self, pod: &Pod) -> Option<&Pdb> {
        self.pdbs
            .iter()
            .find(|p| p.namespace == pod.namespace && p.selector_app == pod.app && pod.app != Sym::default())
    }
    pub fn op(&self, id: u64) -> Option<&OpStatus> {
        self.ops.iter().find(|o| o.id == id)
    }
    pub fn pod_display(&self, pod: &Pod) -> String {
        format!("{}/{}", self.s(pod.namespace), pod.name)
    }
    /// Node allocation in physical GPUs: whole-GPU requests plus MIG GPUs with an instance
    /// in use. Instances held without a known instance (see [`Node::mig_unbound`]) count on
    /// the fewest GPUs that can hold them (beside the known ones, then as few more as the
    /// free instances of their profile allow): a lower bound, since which GPU they are on
    /// is not known. [`Fleet::node_allocation_is_estimate`] says when that is the case.
    pub fn node_allocated_gpus(&self, node: &Node) -> u32 {
        let cap = |n: u32| n.min(node.gpu_count().max(node.gpus_allocated));
        if node.mig_unbound.is_empty() {
            // Every instance in use is known: count the GPUs they are on.
            let gpus = node.gpus.iter().filter_map(|g| self.gpu(*g));
            let mig_in_use = gpus.filter(|g| g.mig_enabled && g.instances.iter().any(|i| i.pod.is_some())).count();
            return cap(node.gpus_allocated + mig_in_use as u32);
        }
        let mig: Vec<&Gpu> = node.gpus.iter().filter_map(|g| self.gpu(*g)).filter(|g| g.mig_enabled).collect();
        let (used, open): (Vec<&Gpu>, Vec<&Gpu>) =
            mig.iter().partition(|g| g.instances.iter().any(|i| i.pod.is_some()));
        let mut more = 0u32;
        for &(resource, held) in &node.mig_unbound {
            let free = |g: &Gpu| self.free_instances_of(g, resource);
            let rest = held.saturating_sub(used.iter().map(|g| free(g)).sum());
            let most = open.iter().map(|g| free(g)).max().unwrap_or(0);
            if rest > 0 && most > 0 {
                more = more.max(rest.div_ceil(most));
            }
        }
        let mut mig_in_use = used.len() as u32 + more.min(open.len() as u32);
        if mig_in_use == 0 && node.mig_unbound_total() > 0 {
            // Held somewhere the fleet's layout has no free instance of that profile for
            // (a layout it guessed from counts): still at least one GPU.
            mig_in_use = 1;
        }
        cap(node.gpus_allocated + mig_in_use)
    }

    /// Whether [`Fleet::node_allocated_gpus`] is a lower bound rather than a count: pods on
    /// the node hold MIG instances the fleet cannot place on a GPU.
    pub fn node_allocation_is_estimate(&self, node: &Node) -> bool {
        node.mig_unbound_total() > 0
    }

    /// Free instances (no pod bound) of GPU `g` whose profile is MIG resource `resource`.
    fn free_instances_of(&self, g: &Gpu, resource: Sym) -> u32 {
        let Some(profile) = mig::profile_from_resource(g.model, self.s(resource)) else { return 0 };
        g.instances.iter().filter(|i| i.pod.is_none() && i.placement.profile == profile).count() as u32
    }

    /// For a MIG instance no pod is known to hold: how many instances of its profile pods
    /// on its node hold without a known instance (0 when none, or when it is bound). When
    /// that is more than 0 the instance may be one of them: it is not known to be free.
    pub fn instance_maybe_held(&self, gid: GpuId, index: usize) -> u32 {
        let Some(g) = self.gpu(gid) else { return 0 };
        let Some(inst) = g.instances.get(index).filter(|i| i.pod.is_none()) else { return 0 };
        let Some(n) = self.node(g.node) else { return 0 };
        n.mig_unbound
            .iter()
            .filter(|(r, _)| mig::profile_from_resource(g.model, self.s(*r)) == Some(inst.placement.profile))
            .map(|(_, held)| *held)
            .sum()
    }

    /// Whole GPUs pods on `node` hold that the fleet cannot name (device plugin without a
    /// node agent): any GPU of the node no pod is known to hold may be one of them.
    pub fn whole_gpus_unbound(&self, node: &Node) -> u32 {
        let named = node.gpus.iter().filter_map(|g| self.gpu(*g)).filter(|g| !g.mig_enabled && !g.pods.is_empty());
        node.gpus_allocated.saturating_sub(named.count() as u32)
    }

    /// How many of GPU `gid`'s free instances may be held by pods on its node without a
    /// known instance: per profile, the fewer of its free instances and of those held.
    pub fn gpu_mig_maybe_held(&self, gid: GpuId) -> u32 {
        let Some(g) = self.gpu(gid) else { return 0 };
        let Some(n) = self.node(g.node) else { return 0 };
        n.mig_unbound.iter().map(|&(r, held)| held.min(self.free_instances_of(g, r))).sum()
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
                self.upsert_node(spec);
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
                if let Some(g) = self.gpus[gid.0 as usize].as_mut() {
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
                let ns = self.interner.intern(&spec.namespace);
                let name = self.interner.intern(&spec.name);
                let pdb = Pdb {
                    namespace: ns,
                    name,
                    selector_app: self.interner.intern(&spec.selector_app),
                    disruptions_allowed: spec.disruptions_allowed,
                    current_healthy: spec.current_healthy,
                    desired_healthy: spec.desired_healthy,
                };
                match self.pdbs.iter_mut().find(|p| p.namespace == ns && p.name == name) {
                    Some(p) => *p = pdb,
                    None => self.pdbs.push(pdb),
                }
                self.structure_gen += 1;
                true
            }
            Delta::PdbRemove { namespace, name } => {
                let (Some(ns), Some(n)) = (self.interner.get(&namespace), self.interner.get(&name)) else {
                    return false;
                };
                let before = self.pdbs.len();
                self.pdbs.retain(|p| !(p.namespace == ns && p.name == n));
                let changed = before != self.pdbs.len();
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
            Delta::Feed { source, state } => self.feeds.insert(source, state.clone()) != Some(state),
            Delta::FeedRemove(source) => self.feeds.remove(&source).is_some(),
            Delta::Synced => {
                let changed = !self.synced;
                self.synced = true;
                changed
            }
        }
    }

    pub fn push_event(&mut self, e: EventSpec) {
        let reason = self.interner.intern(&e.reason);
        if self.events.len() >= EVENT_CAPACITY {
            self.events.pop_front();
        }
        self.events.push_back(Event { ts: e.ts, severity: e.severity, reason, object: e.object, message: e.message });
        self.events_gen += 1;
    }

    fn apply_op(&mut self, p: OpProgress) {
        let now = self.now;
        let id = p.id();
        if let OpProgress::Started { title, target, total, .. } = &p {
            if self.ops.len() >= OP_CAPACITY
                && let Some(pos) = self.ops.iter().position(|o| o.state.finished())
            {
                self.ops.remove(pos);
            }
            self.ops.push(OpStatus {
                id,
                title: title.clone(),
                target: target.clone(),
                state: OpState::Running,
                step: "starting".into(),
                done: 0,
                total: *total,
                started: now,
                updated: now,
                log: Vec::new(),
            });
            let msg = format!("{title} started");
            self.push_event(EventSpec {
                ts: now,
                severity: Severity::Info,
                reason: "OperationStarted".into(),
                object: target.clone(),
                message: msg,
            });
            return;
        }
        let Some(op) = self.ops.iter_mut().find(|o| o.id == id) else { return };
        op.updated = now;
        let mut event = None;
        match p {
            OpProgress::Started { .. } => {}
            OpProgress::Step { step, done, total, .. } => {
                op.state = OpState::Running;
                op.log.push(step.clone());
                op.step = step;
                op.done = done;
                op.total = total;
            }
            OpProgress::Blocked { reason, .. } => {
                if op.state != OpState::Blocked(reason.clone()) {
                    op.log.push(format!("blocked: {reason}"));
                }
                op.state = OpState::Blocked(reason);
            }
            OpProgress::Log { line, .. } => op.log.push(line),
            OpProgress::Finished { outcome, .. } => {
                let (sev, reason, msg) = match &outcome {
                    Ok(m) => (Severity::Info, "OperationSucceeded", format!("{}: {m}", op.title)),
                    Err(m) => (Severity::Error, "OperationFailed", format!("{}: {m}", op.title)),
                };
                op.state = match outcome {
                    Ok(_) => OpState::Succeeded,
                    Err(e) => OpState::Failed(e),
                };
                op.log.push(msg.clone());
                event = Some((sev, reason, op.target.clone(), msg));
            }
            OpProgress::Cancelled { .. } => {
                op.state = OpState::Cancelled;
                event = Some((
                    Severity::Warning,
                    "OperationCancelled",
                    op.target.clone(),
                    format!("{} cancelled", op.title),
                ));
            }
        }
        if op.log.len() > 200 {
            op.log.drain(..op.log.len() - 200);
        }
        if let Some((severity, reason, object, message)) = event {
            self.push_event(EventSpec { ts: now, severity, reason: reason.into(), object, message });
        }
    }

    // ---------- nodes ----------

    fn upsert_node(&mut self, spec: NodeSpec) -> NodeId {
        let name = self.interner.intern(&spec.name);
        let labels = spec.labels.iter().map(|(k, v)| (self.interner.intern(k), self.interner.intern(v))).collect();
        let capacity = spec.capacity.iter().map(|(k, v)| (self.interner.intern(k), *v)).collect();
        let allocatable = spec.allocatable.iter().map(|(k, v)| (self.interner.intern(k), *v)).collect();
        let mig_config = self.interner.intern(&spec.mig_config);
        let cordoned_by = self.interner.intern(&spec.cordoned_by);
        let now = self.now;
        let id = match self.node_by_name.get(&name).copied() {
            Some(id) => {
                let old = self.nodes[id.0 as usize].as_ref().map(|n| (n.ready, n.cordoned));
                if let Some((r, c)) = old {
                    self.totals.nodes_ready -= r as u32;
                    self.totals.nodes_cordoned -= c as u32;
                }
                let Some(n) = self.nodes[id.0 as usize].as_mut() else { return id };
                if n.mig_state != spec.mig_state {
                    n.mig_state_since = spec.mig_state_since.unwrap_or(now);
                }
                if n.ready && !spec.ready {
                    n.not_ready_since = Some(spec.ready_since.unwrap_or(now));
                } else if spec.ready {
                    n.not_ready_since = None;
                }
                n.labels = labels;
                n.ready = spec.ready;
                n.cordoned = spec.cordoned;
                n.cordoned_by = cordoned_by;
                n.gpu_model = spec.gpu_model;
                n.capacity = capacity;
                n.allocatable = allocatable;
                n.mig_config = mig_config;
                n.mig_state = spec.mig_state;
                id
            }
            None => {
                let node = Node {
                    name,
                    labels,
                    ready: spec.ready,
                    cordoned: spec.cordoned,
                    cordoned_by,
                    gpu_model: spec.gpu_model,
                    capacity,
                    allocatable,
                    mig_config,
                    mig_state: spec.mig_state,
                    mig_state_since: spec.mig_state_since.unwrap_or(now),
                    not_ready_since: (!spec.ready).then_some(spec.ready_since.unwrap_or(now)),
                    created: spec.created,
                    gpus: Vec::new(),
                    gpus_allocated: 0,
                    mig_allocated: 0,
                    mig_unbound: Vec::new(),
                    pods: 0,
                };
                let id = match self.free_nodes.pop() {
                    Some(i) => {
                        self.nodes[i as usize] = Some(node);
                        NodeId(i)
                    }
                    None => {
                        self.nodes.push(Some(node));
                        NodeId(self.nodes.len() as u32 - 1)
                    }
                };
                self.node_by_name.insert(name, id);
                self.totals.nodes += 1;
                // Pods may have arrived before their node.
                // Pods may have arrived before their node (watches run side by side).
                for pid in self.waiting.remove(&name).unwrap_or_default() {
                    self.unlink_pod(pid);
                    self.link_pod(pid);
                }
                id
            }
        };
        self.totals.nodes_ready += spec.ready as u32;
        self.totals.nodes_cordoned += spec.cordoned as u32;
        self.refresh_node_alerts(id);
        id
    }

    fn refresh_node_alerts(&mut self, id: NodeId) {
        let Some(n) = self.node(id) else { return };
        let (ready, since, state, state_since, name, cfg) =
            (n.ready, n.not_ready_since, n.mig_state, n.mig_state_since, n.name, n.mig_config);
        let node_name = self.s(name).to_string();
        let key = (AlertKind::NotReady, AlertTarget::Node(id));
        if !ready {
            self.alerts.entry(key).or_insert_with(|| Alert {
                kind: AlertKind::NotReady,
                target: AlertTarget::Node(id),
                since: since.unwrap_or(0),
                message: format!("node {node_name} is NotReady"),
            });
        } else {
            self.alerts.remove(&key);
        }
        let cfg = self.s(cfg).to_string();
        let failed_key = (AlertKind::MigFailed, AlertTarget::Node(id));
        if state == MigConfigState::Failed {
            self.alerts.entry(failed_key).or_insert_with(|| Alert {
                kind: AlertKind::MigFailed,
                target: AlertTarget::Node(id),
                since: state_since,
                message: format!("mig-manager failed to apply {cfg} on {node_name}"),
            });
        } else {
            self.alerts.remove(&failed_key);
        }
        if state == MigConfigState::Pending {
            self.mig_pending.insert(id);
        } else {
            self.mig_pending.remove(&id);
            self.alerts.remove(&(AlertKind::MigStuck, AlertTarget::Node(id)));
        }
        self.check_stuck_mig();
    }

    /// Flags MIG configs that have sat in `pending` longer than the threshold. Only nodes
    /// in `pending` are looked at, so this is cheap on every clock tick.
    fn check_stuck_mig(&mut self) -> bool {
        let mut changed = false;
        let pending: Vec<NodeId> = self.mig_pending.iter().copied().collect();
        for id in pending {
            let Some(n) = self.node(id) else { continue };
            let age = self.now.saturating_sub(n.mig_state_since);
            if age < self.thresholds.mig_stuck_ms {
                continue;
            }
            let key = (AlertKind::MigStuck, AlertTarget::Node(id));
            if self.alerts.contains_key(&key) {
                continue;
            }
            let paused: Vec<String> = n
                .labels
                .iter()
                .filter(|(_, v)| self.s(*v) == "paused-for-mig-change")
                .map(|(k, _)| self.s(*k).trim_start_matches("nvidia.com/gpu.deploy.").to_string())
                .collect();
            let message = format!(
                "{} has been pending for {} min applying {}; paused: {}",
                self.s(n.name),
                age / 60_000,
                self.s(n.mig_config),
                if paused.is_empty() { "none".to_string() } else { paused.join(", ") }
            );
            let since = n.mig_state_since;
            self.alerts.insert(key, Alert { kind: AlertKind::MigStuck, target: AlertTarget::Node(id), since, message });
            changed = true;
        }
        changed
    }

    fn remove_node(&mut self, name: &str) -> bool {
        let Some(id) = self.node_by_name(name) else { return false };
        let gpus = self.node(id).map(|n| n.gpus.clone()).unwrap_or_default();
        for g in gpus {
            self.remove_gpu(g);
        }
        for pid in self.pods_by_node.get(&id).cloned().unwrap_or_default() {
            self.remove_pod(pid);
        }
        if let Some(n) = self.nodes[id.0 as usize].take() {
            self.node_by_name.remove(&n.name);
            self.totals.nodes -= 1;
            self.totals.nodes_ready -= n.ready as u32;
            self.totals.nodes_cordoned -= n.cordoned as u32;
        }
        if let Some(c) = self.node_alloc_counted.remove(&id) {
            self.totals.gpus_allocated -= c;
        }
        self.pods_by_node.remove(&id);
        self.mig_pending.remove(&id);
        self.alerts.retain(|(_, t), _| *t != AlertTarget::Node(id));
        self.free_nodes.push(id.0);
        true
    }

    // ---------- gpus ----------

    fn upsert_gpu(&mut self, spec: GpuSpec) -> bool {
        let Some(node) = self.node_by_name(&spec.node) else { return false };
        let uuid = self.interner.intern(&spec.uuid);
        // The pods this GPU's arrival or change can bind or unbind leave first and come
        // back once it is in place, so every counter moves by exactly what changed.
        let existing = self.gpu_by_uuid.get(&uuid).copied();
        let affected = self.pods_touching_gpu(node, uuid, existing);
        for pid in &affected {
            self.unlink_pod(*pid);
        }
        let instances: Vec<MigInstance> = spec
            .instances
            .iter()
            .map(|i| MigInstance {
                placement: i.placement,
                uuid: self.interner.intern(&i.uuid),
                pod: None,
                util: None,
                mem_used_mib: 0,
                low_since: None,
                idle_allocated: false,
            })
            .collect();
        let gid = match self.gpu_by_uuid.get(&uuid).copied() {
            Some(gid) => {
                // Instances change on reslice: drop the old ones and their bindings.
                self.clear_instances(gid);
                let Some(g) = self.gpus[gid.0 as usize].as_mut() else {
                    self.link_all(affected);
                    return false;
                };
                if g.mig_enabled {
                    self.totals.gpus_mig -= 1;
                }
                g.index = spec.index;
                g.model = spec.model;
                g.memory_mib = spec.memory_mib;
                g.mig_enabled = spec.mig_enabled;
                g.instances = instances;
                gid
            }
            None => {
                let gpu = Gpu {
                    uuid,
                    node,
                    index: spec.index,
                    model: spec.model,
                    memory_mib: spec.memory_mib,
                    mig_enabled: spec.mig_enabled,
                    instances,
                    last: Default::default(),
                    history: Ring::default(),
                    last_sample_at: None,
                    xid: None,
                    ecc_uncorrected: 0,
                    low_since: None,
                    pods: Vec::new(),
                    idle_allocated: false,
                    busy: false,
                    measured: false,
                };
                let gid = match self.free_gpus.pop() {
                    Some(i) => {
                        self.gpus[i as usize] = Some(gpu);
                        GpuId(i)
                    }
                    None => {
                        self.gpus.push(Some(gpu));
                        GpuId(self.gpus.len() as u32 - 1)
                    }
                };
                self.gpu_by_uuid.insert(uuid, gid);
                self.totals.gpus += 1;
                if let Some(n) = self.nodes[node.0 as usize].as_mut() {
                    n.gpus.push(gid);
                }
                let gpus = &self.gpus;
                if let Some(n) = self.nodes[node.0 as usize].as_mut() {
                    n.gpus.sort_by_key(|g| gpus[g.0 as usize].as_ref().map(|g| g.index).unwrap_or(0));
                }
                gid
            }
        };
        let Some(g) = self.gpu(gid) else {
            self.link_all(affected);
            return false;
        };
        let (mig_enabled, model) = (g.mig_enabled, g.model);
        let uuids: Vec<Sym> = g.instances.iter().map(|i| i.uuid).collect();
        for (i, u) in uuids.iter().enumerate() {
            self.mig_by_uuid.insert(*u, (gid, i as u8));
        }
        self.totals.gpus_mig += mig_enabled as u32;
        self.totals.mig_instances += uuids.len() as u32;
        if mig_enabled {
            let placed: Vec<PlacedInstance> =
                self.gpu(gid).map(|g| g.instances.iter().map(|i| i.placement).collect()).unwrap_or_default();
            self.frag.insert(gid, mig::fragmentation(model, &placed));
        } else {
            self.frag.remove(&gid);
        }
        // Pods on this node that name this GPU or its instances (or hold instances of a
        // profile it has) bind now.
        self.link_all(affected);
        self.refresh_gpu(gid);
        self.refresh_node_alloc(node);
        true
    }

    /// Pods on `node` whose binding a change of GPU `uuid` (fleet id `gid` if it exists)
    /// can change: those naming it, bound to it, or holding MIG instances.
    fn pods_touching_gpu(&self, node: NodeId, uuid: Sym, gid: Option<GpuId>) -> Vec<PodId> {
        self.pods_on_node(node)
            .iter()
            .copied()
            .filter(|pid| {
                self.pod(*pid).is_some_and(|p| {
                    !p.mig.is_empty()
                        || !p.mig_uuids.is_empty()
                        || !p.bound_mig.is_empty()
                        || p.gpu_uuids.contains(&uuid)
                        || gid.is_some_and(|g| p.bound_gpus.contains(&g))
                })
            })
            .collect()
    }

    fn clear_instances(&mut self, gid: GpuId) {
        let Some(g) = self.gpus[gid.0 as usize].as_mut() else { return };
        let old = std::mem::take(&mut g.instances);
        self.totals.mig_instances -= old.len() as u32;
        for (i, inst) in old.iter().enumerate() {
            self.mig_by_uuid.remove(&inst.uuid);
            self.holders.remove(&Held::Mig(inst.uuid));
            if let Some(c) = self.mig_contrib.remove(&(gid, i as u8)) {
                self.unapply_device(c);
            }
            if inst.pod.is_some() {
                self.totals.mig_allocated -= 1;
            }
        }
    }

    fn link_all(&mut self, pids: Vec<PodId>) {
        for pid in pids {
            self.link_pod(pid);
        }
    }

    fn remove_gpu(&mut self, gid: GpuId) {
        let Some((node, uuid)) = self.gpu(gid).map(|g| (g.node, g.uuid)) else { return };
        let affected = self.pods_touching_gpu(node, uuid, Some(gid));
        for pid in &affected {
            self.unlink_pod(*pid);
        }
        self.clear_instances(gid);
        self.gpu_procs.remove(&gid);
        self.gpu_peers.remove(&gid);
        self.holders.remove(&Held::Gpu(gid));
        self.gpu_alias.retain(|_, g| *g != gid);
        if let Some(c) = self.gpu_contrib.remove(&gid) {
            self.unapply_device(c);
        }
        let Some(g) = self.gpus[gid.0 as usize].take() else {
            self.link_all(affected);
            return;
        };
        self.gpu_by_uuid.remove(&g.uuid);
        self.totals.gpus -= 1;
        self.totals.gpus_mig -= g.mig_enabled as u32;
        self.totals.gpus_busy -= g.busy as u32;
        self.totals.gpus_measured -= g.measured as u32;
        if let Some(n) = self.nodes[g.node.0 as usize].as_mut() {
            n.gpus.retain(|x| *x != gid);
        }
        for pid in &g.pods {
            if let Some(p) = self.pods[pid.0 as usize].as_mut() {
                p.bound_gpus.retain(|x| *x != gid);
            }
        }
        self.frag.remove(&gid);
        self.alerts.retain(|(_, t), _| *t != AlertTarget::Gpu(gid));
        self.free_gpus.push(gid.0);
        // What they held there is held still, now without a known GPU or instance.
        self.link_all(affected);
        self.refresh_node_alloc(g.node);
    }

    fn apply_sample(&mut self, s: TelemetrySample) {
        let by_place = || {
            let (node, index) = s.node_gpu.as_ref()?;
            let n = self.node(self.node_by_name(node)?)?;
            n.gpus.iter().copied().find(|g| self.gpu(*g).is_some_and(|g| g.index == *index))
        };
        // An alias holds only while the source still places the GPU there (a GPU moved to
        // another node, or two sources that report the same uuid, must not cross over).
        let same_place = |g: GpuId| match (&s.node_gpu, self.gpu(g)) {
            (Some((node, index)), Some(gpu)) => {
                gpu.index == *index && self.node(gpu.node).is_some_and(|n| self.s(n.name) == node)
            }
            _ => true,
        };
        let alias = self.gpu_alias.get(&s.gpu_uuid).copied().filter(|g| same_place(*g));
        let known = self.gpu_by_uuid(&s.gpu_uuid).or(alias);
        let Some(gid) = known.or_else(by_place) else { return };
        if known.is_none() {
            self.gpu_alias.insert(s.gpu_uuid.clone(), gid);
        }
        let idle_thr = self.thresholds.idle_util_pct;
        let low = |util: Option<u8>| util.map(|u| u < idle_thr);
        // Who holds the GPU: the kubelet's word when the agent has it, else whose processes
        // run there.
        match (&s.allocated, &s.processes) {
            (Some(pods), _) => self.set_holders(Held::Gpu(gid), pods.iter().map(String::as_str)),
            (None, Some(procs)) => self.set_holders(Held::Gpu(gid), procs.iter().filter_map(|p| p.pod.as_deref())),
            (None, None) => {}
        }
        if let Some(p) = s.processes {
            self.gpu_procs.insert(gid, p);
        }
        if let Some(p) = s.peers {
            self.gpu_peers.insert(gid, p);
        }
        let slots: Vec<Option<usize>> = match self.gpu(gid) {
            Some(g) => (0..s.instances.len()).map(|k| self.instance_slot(gid, g, &s.instances, k)).collect(),
            None => return,
        };
        // The kubelet's word on who holds each instance, bound after the figures land.
        let mig_holders: Vec<(Sym, &Vec<String>)> = match self.gpu(gid) {
            Some(g) => s
                .instances
                .iter()
                .zip(&slots)
                .filter_map(|(is, slot)| Some((g.instances.get((*slot)?)?.uuid, is.allocated.as_ref()?)))
                .collect(),
            None => Vec::new(),
        };
        let Some(g) = self.gpus[gid.0 as usize].as_mut() else { return };
        for (is, slot) in s.instances.iter().zip(slots) {
            let Some(inst) = slot.and_then(|i| g.instances.get_mut(i)) else { continue };
            inst.util = is.util;
            inst.mem_used_mib = is.mem_used_mib;
            // An unmeasured instance is neither idle nor busy.
            match low(is.util) {
                Some(true) => {
                    inst.low_since.get_or_insert(s.at);
                }
                Some(false) | None => inst.low_since = None,
            }
        }
        for (inst, pods) in mig_holders {
            self.set_holders(Held::Mig(inst), pods.iter().map(String::as_str));
        }
        let Some(g) = self.gpus[gid.0 as usize].as_mut() else { return };
        let mut sample = s.sample;
        if sample.util.is_none() && g.mig_enabled {
            sample.util = mig_weighted_util(g);
        }
        g.last = sample;
        g.history.push(sample);
        g.last_sample_at = Some(s.at);
        match low(sample.util) {
            Some(true) => {
                g.low_since.get_or_insert(s.at);
            }
            Some(false) | None => g.low_since = None,
        }
        self.refresh_gpu(gid);
    }

    /// Records which pods (`namespace/name`) a node agent says hold a whole GPU or a MIG
    /// instance and re-binds the pods whose binding that changes (see `holders`).
    fn set_holders<'p>(&mut self, what: Held, pods: impl Iterator<Item = &'p str>) {
        let mut holders: Vec<(Sym, Box<str>)> = Vec::new();
        let whole_gpu = |f: &Fleet, g: GpuId| f.gpu(g).is_some_and(|g| !g.mig_enabled);
        if matches!(what, Held::Mig(_)) || matches!(what, Held::Gpu(g) if whole_gpu(self, g)) {
            for pod in pods {
                let Some((ns, name)) = pod.split_once('/') else { continue };
                // Only pods the fleet knows (a namespace it has never seen has none).
                let Some(ns) = self.interner.get(ns) else { continue };
                if self.pod_by_name.get(&ns).is_some_and(|m| m.contains_key(name))
                    && !holders.iter().any(|(n, p)| *n == ns && &**p == name)
                {
                    holders.push((ns, name.into()));
                }
            }
        }
        holders.sort_unstable();
        // Every sample of a streamed GPU comes through here: return early, without copying,
        // when nothing changed.
        if self.holders.get(&what).map_or(holders.is_empty(), |h| *h == holders) {
            return;
        }
        let old = self.holders.remove(&what).unwrap_or_default();
        let affected: Vec<PodId> = old
            .iter()
            .chain(holders.iter())
            .filter_map(|(ns, name)| self.pod_by_name.get(ns).and_then(|m| m.get(&**name)).copied())
            .collect();
        // Unlinked with the old holders gone: `unlink_pod` undoes what `link_pod` recorded
        // in the pod (`bound_gpus`, `bound_mig`), not what the map says now.
        for pid in &affected {
            self.unlink_pod(*pid);
        }
        if !holders.is_empty() {
            self.holders.insert(what, holders);
        }
        for pid in affected {
            self.link_pod(pid);
        }
        self.structure_gen += 1;
    }

    fn held_by(&self, what: Held, p: &Pod) -> bool {
        self.holders.get(&what).is_some_and(|h| h.iter().any(|(ns, n)| *ns == p.namespace && *n == p.name))
    }

    /// MIG instances a node agent says pod `pid` holds, for a pod that asks for MIG
    /// resources the cluster does not name (device plugin): per resource, at most as many
    /// instances of that profile as it asked for.
    fn agent_bound_mig(&self, pid: PodId, node: NodeId) -> Vec<Sym> {
        let (Some(p), Some(n)) = (self.pod(pid), self.node(node)) else { return Vec::new() };
        if p.mig.is_empty() || !p.dra.is_empty() || !p.mig_uuids.is_empty() || self.holders.is_empty() {
            return Vec::new();
        }
        let gpus: Vec<&Gpu> = n.gpus.iter().filter_map(|g| self.gpu(*g)).collect();
        let mut out = Vec::new();
        for &(resource, count) in &p.mig {
            out.extend(
                gpus.iter()
                    .flat_map(|g| {
                        let profile = mig::profile_from_resource(g.model, self.s(resource));
                        g.instances.iter().filter(move |i| Some(i.placement.profile) == profile).map(|i| i.uuid)
                    })
                    .filter(|u| self.held_by(Held::Mig(*u), p))
                    .take(count as usize),
            );
        }
        out
    }

    /// Whole GPUs a node agent sees pod `pid` computing on, for a pod that asks for whole
    /// GPUs the cluster does not name (device plugin): at most as many as it asked for,
    /// lowest index first (more than that means it sees GPUs it was not given).
    fn agent_bound_gpus(&self, pid: PodId, node: NodeId) -> Vec<GpuId> {
        let (Some(p), Some(n)) = (self.pod(pid), self.node(node)) else { return Vec::new() };
        if p.gpus == 0 || !p.dra.is_empty() || !p.gpu_uuids.is_empty() || self.holders.is_empty() {
            return Vec::new();
        }
        let mut held: Vec<(u8, GpuId)> = n
            .gpus
            .iter()
            .filter(|g| self.held_by(Held::Gpu(**g), p))
            .filter_map(|g| self.gpu(*g).map(|gpu| (gpu.index, *g)))
            .collect();
        held.sort_unstable();
        held.into_iter().take(p.gpus as usize).map(|(_, g)| g).collect()
    }

    /// Which of GPU `gid`'s instances sample `all[k]` is about: the one with its uuid; for a
    /// uuid the fleet does not know (a GPU announced only by labels, whose instances the
    /// fleet named itself), the instance of the same profile with the same rank by placement
    /// (the same instance when the placements agree, the fleet's best guess when the fleet's
    /// plan placed them differently).
    fn instance_slot(&self, gid: GpuId, g: &Gpu, all: &[InstanceSample], k: usize) -> Option<usize> {
        let is = all.get(k)?;
        if let Some(&(ig, i)) = self.interner.get(&is.uuid).and_then(|sym| self.mig_by_uuid.get(&sym)) {
            return (ig == gid).then_some(i as usize);
        }
        let (profile, start) = is.placement.as_ref()?;
        let same_profile = |o: &&InstanceSample| o.placement.as_ref().is_some_and(|(p, _)| p == profile);
        let rank =
            all.iter().filter(same_profile).filter(|o| o.placement.as_ref().is_some_and(|(_, s)| s < start)).count();
        let mut ours: Vec<(u8, usize)> = g
            .instances
            .iter()
            .enumerate()
            .filter(|(_, i)| mig::profile(g.model, i.placement.profile).name == profile.as_str())
            .map(|(n, i)| (i.placement.start, n))
            .collect();
        ours.sort_unstable();
        ours.get(rank).map(|(_, n)| *n)
    }

    fn apply_fault(&mut self, uuid: &str, at: Ts, fault: GpuFault) -> bool {
        let Some(gid) = self.gpu_by_uuid(uuid).or_else(|| self.gpu_alias.get(uuid).copied()) else { return false };
        let node_name =
            self.gpu(gid).and_then(|g| self.node(g.node)).map(|n| self.s(n.name).to_string()).unwrap_or_default();
        let Some(g) = self.gpus[gid.0 as usize].as_mut() else { return false };
        let idx = g.index;
        let (kind, message) = match fault {
            GpuFault::Xid { code } => {
                g.xid = Some((code, at));
                (AlertKind::Xid(code), format!("XID {code} on {node_name} GPU {idx}{}", xid_hint(code)))
            }
            GpuFault::EccUncorrected { count } => {
                g.ecc_uncorrected = count;
                (AlertKind::EccUncorrected, format!("{count} uncorrectable ECC errors on {node_name} GPU {idx}"))
            }
        };
        self.alerts.insert(
            (kind, AlertTarget::Gpu(gid)),
            Alert { kind, target: AlertTarget::Gpu(gid), since: at, message: message.clone() },
        );
        self.push_event(EventSpec {
            ts: at,
            severity: Severity::Error,
            reason: kind.label(),
            object: format!("{node_name}/gpu{idx}"),
            message,
        });
        self.structure_gen += 1;
        true
    }

    /// Recomputes a GPU's derived flags and moves its contribution between counters.
    fn refresh_gpu(&mut self, gid: GpuId) {
        let th = self.thresholds;
        let now = self.now;
        let Some(g) = self.gpu(gid) else { return };
        let pod_tenant = |pid: PodId| self.pod(pid).map(|p| p.tenant);
        let whole_tenant = g.pods.first().and_then(|p| pod_tenant(*p));
        let measured_now = g.last_sample_at.is_some() && g.last.util.is_some();
        let busy_now = measured_now && g.last.util.is_some_and(|u| u >= th.busy_util_pct);
        let idle_for = |low: Option<Ts>| {
            low.is_some_and(|l| now.max(g.last_sample_at.unwrap_or(0)).saturating_sub(l) >= th.idle_window_ms)
        };
        let whole = if g.mig_enabled {
            DeviceContrib::default()
        } else {
            DeviceContrib {
                tenant: whole_tenant,
                busy: whole_tenant.is_some() && busy_now,
                idle: whole_tenant.is_some() && idle_for(g.low_since),
                measured: whole_tenant.is_some() && measured_now,
            }
        };
        let inst: Vec<DeviceContrib> = g
            .instances
            .iter()
            .map(|i| {
                let t = i.pod.and_then(pod_tenant);
                DeviceContrib {
                    tenant: t,
                    busy: t.is_some() && i.util.is_some_and(|u| u >= th.busy_util_pct),
                    idle: t.is_some() && idle_for(i.low_since),
                    measured: t.is_some() && i.util.is_some(),
                }
            })
            .collect();
        let (was_busy, was_measured) = (g.busy, g.measured);
        let old = self.gpu_contrib.get(&gid).copied().unwrap_or_default();
        if old != whole {
            self.unapply_device(old);
            self.apply_device(whole);
            self.gpu_contrib.insert(gid, whole);
        }
        for (i, c) in inst.iter().enumerate() {
            let key = (gid, i as u8);
            let old = self.mig_contrib.get(&key).copied().unwrap_or_default();
            if old != *c {
                self.unapply_device(old);
                self.apply_device(*c);
                self.mig_contrib.insert(key, *c);
            }
        }
        self.totals.gpus_busy = self.totals.gpus_busy + busy_now as u32 - was_busy as u32;
        self.totals.gpus_measured = self.totals.gpus_measured + measured_now as u32 - was_measured as u32;
        if let Some(g) = self.gpus[gid.0 as usize].as_mut() {
            g.busy = busy_now;
            g.measured = measured_now;
            g.idle_allocated = whole.idle;
            for (i, c) in g.instances.iter_mut().zip(inst.iter()) {
                i.idle_allocated = c.idle;
            }
        }
    }

    fn apply_device(&mut self, c: DeviceContrib) {
        self.totals.idle_allocated += c.idle as u32;
        self.totals.devices_measured += c.measured as u32;
        if let Some(t) = c.tenant
            && let Some(t) = self.tenants.get_mut(t.0 as usize).and_then(Option::as_mut)
        {
            t.usage.busy += c.busy as u32;
            t.usage.idle_allocated += c.idle as u32;
            t.usage.measured += c.measured as u32;
        }
    }

    fn unapply_device(&mut self, c: DeviceContrib) {
        self.totals.idle_allocated -= c.idle as u32;
        self.totals.devices_measured -= c.measured as u32;
        if let Some(t) = c.tenant
            && let Some(t) = self.tenants.get_mut(t.0 as usize).and_then(Option::as_mut)
        {
            t.usage.busy -= c.busy as u32;
            t.usage.idle_allocated -= c.idle as u32;
            t.usage.measured -= c.measured as u32;
        }
    }

    fn refresh_node_alloc(&mut self, node: NodeId) {
        let Some(n) = self.node(node) else { return };
        let new = self.node_allocated_gpus(n);
        let old = self.node_alloc_counted.insert(node, new).unwrap_or(0);
        self.totals.gpus_allocated = self.totals.gpus_allocated + new - old;
    }

    // ---------- tenants and quotas ----------

    fn upsert_tenant(&mut self, spec: TenantSpec) -> TenantId {
        let name = self.interner.intern(&spec.name);
        let namespaces: Vec<Sym> = spec.namespaces.iter().map(|n| self.interner.intern(n)).collect();
        let source = self.interner.intern(&spec.source);
        let mut touched: Vec<Sym> = namespaces.clone();
        let tid = match self.tenant_by_name.get(&name).copied() {
            Some(tid) => {
                if let Some(t) = self.tenants[tid.0 as usize].as_mut() {
                    for ns in &t.namespaces {
                        // Only what is still this tenant's: another may have taken it already.
                        if self.tenant_by_ns.get(ns) == Some(&tid) {
                            self.tenant_by_ns.remove(ns);
                        }
                    }
                    touched.extend(t.namespaces.iter().copied());
                    t.namespaces = namespaces.clone();
                    t.source = source;
                }
                tid
            }
            None => {
                self.tenants.push(Some(Tenant {
                    name,
                    namespaces: namespaces.clone(),
                    source,
                    quotas: Vec::new(),
                    usage: TenantUsage::default(),
                }));
                let tid = TenantId(self.tenants.len() as u32 - 1);
                self.tenant_by_name.insert(name, tid);
                tid
            }
        };
        for ns in namespaces {
            self.tenant_by_ns.insert(ns, tid);
        }
        // Pods follow their namespace to its tenant now (a namespace labelled, a vCluster or
        // a LocalQueue appearing), with every counter moved along.
        touched.sort();
        touched.dedup();
        for ns in touched {
            self.retenant_pods(ns);
        }
        tid
    }

    fn retenant_pods(&mut self, ns: Sym) {
        let pids: Vec<PodId> = self.pod_by_name.get(&ns).map(|m| m.values().copied().collect()).unwrap_or_default();
        if pids.is_empty() {
            return;
        }
        let target = self.tenant_for_namespace(ns);
        for pid in pids {
            if self.pod(pid).is_some_and(|p| p.tenant != target) {
                self.unlink_pod(pid);
                if let Some(p) = self.pods[pid.0 as usize].as_mut() {
                    p.tenant = target;
                }
                self.link_pod(pid);
            }
        }
    }

    fn tenant_for_namespace(&mut self, ns: Sym) -> TenantId {
        if let Some(t) = self.tenant_by_ns.get(&ns) {
            return *t;
        }
        let name = self.s(ns).to_string();
        self.upsert_tenant(TenantSpec { name: name.clone(), namespaces: vec![name], source: "namespace".into() })
    }

    fn remove_tenant(&mut self, tid: TenantId) {
        let has_pods = self.pods.iter().flatten().any(|p| p.tenant == tid);
        let Some(t) = self.tenants[tid.0 as usize].as_mut() else { return };
        // A tenant with pods stays (its pods still need an owner); it only loses its namespaces' mapping.
        for ns in &t.namespaces {
            if self.tenant_by_ns.get(ns) == Some(&tid) {
                self.tenant_by_ns.remove(ns);
            }
        }
        if has_pods {
            return;
        }
        let name = t.name;
        for q in std::mem::take(&mut t.quotas) {
            self.quotas[q] = None;
        }
        self.tenant_by_name.remove(&name);
        self.tenants[tid.0 as usize] = None;
    }

    fn upsert_quota(&mut self, spec: QuotaSpec) {
        let tid = match self.tenant_by_name(&spec.tenant) {
            Some(t) => t,
            None => {
                self.upsert_tenant(TenantSpec { name: spec.tenant.clone(), namespaces: vec![], source: "quota".into() })
            }
        };
        let source = self.intern_source(&spec.source);
        let resource = self.interner.intern(&spec.resource);
        let version = self.interner.intern(&spec.version);
        let quota = Quota {
            tenant: tid,
            source: source.clone(),
            resource,
            hard: spec.hard,
            used: spec.used,
            version,
            borrowing_limit: spec.borrowing_limit,
            lending_limit: spec.lending_limit,
        };
        let existing = self.tenant(tid).and_then(|t| {
            t.quotas
                .iter()
                .copied()
                .find(|&q| self.quotas[q].as_ref().is_some_and(|x| x.source == source && x.resource == resource))
        });
        match existing {
            Some(q) => self.quotas[q] = Some(quota),
            None => {
                self.quotas.push(Some(quota));
                let q = self.quotas.len() - 1;
                if let Some(t) = self.tenants[tid.0 as usize].as_mut() {
                    t.quotas.push(q);
                }
            }
        }
        self.refresh_tenant_alerts(tid);
    }

    fn intern_source(&mut self, s: &QuotaSourceSpec) -> QuotaSource {
        match s {
            QuotaSourceSpec::ResourceQuota { namespace, name } => QuotaSource::ResourceQuota {
                namespace: self.interner.intern(namespace),
                name: self.interner.intern(name),
            },
            QuotaSourceSpec::ClusterQueue { queue, flavor } => {
                QuotaSource::ClusterQueue { queue: self.interner.intern(queue), flavor: self.interner.intern(flavor) }
            }
        }
    }

    fn remove_quota(&mut self, tenant: &str, source: &QuotaSourceSpec, resource: &str) -> bool {
        let Some(tid) = self.tenant_by_name(tenant) else { return false };
        let source = self.intern_source(source);
        let Some(resource) = self.interner.get(resource) else { return false };
        let Some(t) = self.tenants[tid.0 as usize].as_mut() else { return false };
        let quotas = &mut self.quotas;
        let Some(pos) = t
            .quotas
            .iter()
            .position(|&q| quotas[q].as_ref().is_some_and(|x| x.source == source && x.resource == resource))
        else {
            return false;
        };
        let q = t.quotas.remove(pos);
        quotas[q] = None;
        self.refresh_tenant_alerts(tid);
        true
    }

    fn refresh_tenant_alerts(&mut self, tid: TenantId) {
        let Some(t) = self.tenant(tid) else { return };
        let key = (AlertKind::OverQuota, AlertTarget::Tenant(tid));
        match self.tenant_gpu_quota(t) {
            Some(hard) if t.usage.requested_gpus as i64 > hard => {
                let message =
                    format!("tenant {} requests {} GPUs, quota {hard}", self.s(t.name), t.usage.requested_gpus);
                let now = self.now;
                let a = self.alerts.entry(key).or_insert_with(|| Alert {
                    kind: AlertKind::OverQuota,
                    target: AlertTarget::Tenant(tid),
                    since: now,
                    message: String::new(),
                });
                a.message = message;
            }
            _ => {
                self.alerts.remove(&key);
            }
        }
    }

    // ---------- pods ----------

    fn upsert_pod(&mut self, spec: PodSpec) {
        let ns = self.interner.intern(&spec.namespace);
        if let Some(pid) = self.pod_by_name.get(&ns).and_then(|m| m.get(spec.name.as_str())).copied() {
            self.unlink_pod(pid);
            let pod = self.build_pod(ns, spec);
            self.pods[pid.0 as usize] = Some(pod);
            self.link_pod(pid);
            return;
        }
        let pod = self.build_pod(ns, spec);
        let name = pod.name.clone();
        let pid = match self.free_pods.pop() {
            Some(i) => {
                self.pods[i as usize] = Some(pod);
                PodId(i)
            }
            None => {
                self.pods.push(Some(pod));
                PodId(self.pods.len() as u32 - 1)
            }
        };
        self.pod_by_name.entry(ns).or_default().insert(name, pid);
        self.link_pod(pid);
    }

    fn build_pod(&mut self, ns: Sym, spec: PodSpec) -> Pod {
        let tenant = self.tenant_for_namespace(ns);
        let node_name = spec.node.as_deref().map(|n| self.interner.intern(n)).unwrap_or_default();
        let gpu_uuids = spec.bound_gpus.iter().map(|u| self.interner.intern(u)).collect();
        let mig_uuids: Vec<Sym> = spec.bound_mig.iter().map(|u| self.interner.intern(u)).collect();
        Pod {
            namespace: ns,
            name: spec.name.into_boxed_str(),
            tenant,
            // Resolved by link_pod, which also files pods whose node is not known yet.
            node: None,
            node_name,
            gpu_uuids,
            phase: spec.phase,
            created: spec.created,
            owner: spec.owner,
            app: self.interner.intern(&spec.app),
            empty_dir: spec.empty_dir,
            gpus: spec.gpus,
            mig: spec.mig.iter().map(|(r, n)| (self.interner.intern(r), *n)).collect(),
            dra: spec
                .dra
                .iter()
                .map(|c| DraClaim {
                    claim: self.interner.intern(&c.claim),
                    device_class: self.interner.intern(&c.device_class),
                    count: c.count,
                    allocated: c.allocated.as_deref().map(|a| self.interner.intern(a)),
                })
                .collect(),
            bound_gpus: Vec::new(),
            bound_mig: mig_uuids.clone(),
            mig_uuids,
            mig_unbound: Vec::new(),
            deletion: spec.deletion.map(Box::new),
        }
    }

    /// Adds a pod's effects: node and tenant counters, device bindings.
    fn link_pod(&mut self, pid: PodId) {
        let Some(p) = self.pod(pid) else { return };
        let node_name = p.node_name;
        let node = self.node_by_name.get(&node_name).copied().filter(|_| node_name != Sym::default());
        let mut bound: Vec<GpuId> = p.gpu_uuids.iter().filter_map(|u| self.gpu_by_uuid.get(u).copied()).collect();
        let mut bound_mig = p.mig_uuids.clone();
        if let Some(n) = node {
            bound.extend(self.agent_bound_gpus(pid, n));
            bound_mig.extend(self.agent_bound_mig(pid, n));
        }
        if node.is_none() && node_name != Sym::default() {
            self.waiting.entry(node_name).or_default().push(pid);
        }
        let holds = node.is_some() && self.pod(pid).is_some_and(|p| p.phase.holds_devices());
        let unbound = match self.pod(pid) {
            Some(p) if holds => self.unbound_mig(p, &bound_mig),
            _ => Vec::new(),
        };
        if let Some(p) = self.pods[pid.0 as usize].as_mut() {
            p.node = node;
            p.bound_gpus = bound;
            p.bound_mig = bound_mig;
            p.mig_unbound = unbound;
        }
        let Some(p) = self.pod(pid) else { return };
        let unfinished = !p.phase.finished();
        let c = PodContrib {
            req_gpus: if unfinished { p.gpus as u32 + p.dra_count() } else { 0 },
            alloc_gpus: if holds { p.gpus as u32 + p.dra_count() } else { 0 },
            req_mig: if unfinished { p.mig_count() } else { 0 },
            alloc_mig: if holds { p.mig_count() } else { 0 },
            counted: unfinished,
            pending: p.phase == Phase::Pending,
        };
        let (tenant, node, bound_gpus, bound_mig) = (p.tenant, p.node, p.bound_gpus.clone(), p.bound_mig.clone());
        let unbound = p.mig_unbound.clone();
        if let Some(t) = self.tenants.get_mut(tenant.0 as usize).and_then(Option::as_mut) {
            t.usage.requested_gpus += c.req_gpus;
            t.usage.allocated_gpus += c.alloc_gpus;
            t.usage.requested_mig += c.req_mig;
            t.usage.allocated_mig += c.alloc_mig;
            t.usage.pods += c.counted as u32;
            t.usage.pending_pods += c.pending as u32;
        }
        self.totals.pods += c.counted as u32;
        self.totals.pods_pending += c.pending as u32;
        if let Some(n) = node {
            self.pods_by_node.entry(n).or_default().push(pid);
            if let Some(node) = self.nodes[n.0 as usize].as_mut() {
                node.gpus_allocated += c.alloc_gpus;
                node.mig_allocated += c.alloc_mig;
                node.pods +=
                    (c.counted && self.pods[pid.0 as usize].as_ref().is_some_and(|p| p.requests_devices())) as u32;
                for &(r, k) in &unbound {
                    match node.mig_unbound.iter_mut().find(|(x, _)| *x == r) {
                        Some((_, held)) => *held += k as u32,
                        None => node.mig_unbound.push((r, k as u32)),
                    }
                }
            }
        }
        let unbound_total: u32 = unbound.iter().map(|(_, k)| *k as u32).sum();
        self.totals.mig_unbound += unbound_total;
        self.totals.mig_allocated += unbound_total;
        self.pod_contrib.insert(pid, c);
        if holds {
            for g in &bound_gpus {
                if let Some(gpu) = self.gpus[g.0 as usize].as_mut() {
                    gpu.pods.push(pid);
                }
            }
            for u in &bound_mig {
                if let Some(&(g, i)) = self.mig_by_uuid.get(u)
                    && let Some(inst) = self.gpus[g.0 as usize].as_mut().and_then(|g| g.instances.get_mut(i as usize))
                {
                    if inst.pod.is_none() {
                        self.totals.mig_allocated += 1;
                    }
                    inst.pod = Some(pid);
                }
            }
        }
        for g in self.devices_of(&bound_gpus, &bound_mig) {
            self.refresh_gpu(g);
        }
        if let Some(n) = node {
            self.refresh_node_alloc(n);
        }
        self.refresh_tenant_alerts(tenant);
    }

    /// Per MIG resource pod `p` asks for, how many of its instances are not among the known
    /// instances `bound` names: held, but the fleet cannot say which.
    fn unbound_mig(&self, p: &Pod, bound: &[Sym]) -> Vec<(Sym, u16)> {
        let known_of = |resource: Sym| {
            bound
                .iter()
                .filter_map(|u| self.mig_by_uuid.get(u))
                .filter_map(|&(g, i)| {
                    let g = self.gpu(g)?;
                    let inst = g.instances.get(i as usize)?;
                    (mig::profile_from_resource(g.model, self.s(resource)) == Some(inst.placement.profile))
                        .then_some(())
                })
                .count()
        };
        p.mig
            .iter()
            .filter_map(|&(r, n)| {
                let left = (n as usize).saturating_sub(known_of(r));
                (left > 0).then_some((r, left as u16))
            })
            .collect()
    }

    fn devices_of(&self, gpus: &[GpuId], mig: &[Sym]) -> Vec<GpuId> {
        let mut v: Vec<GpuId> = gpus.to_vec();
        v.extend(mig.iter().filter_map(|u| self.mig_by_uuid.get(u).map(|(g, _)| *g)));
        v.sort();
        v.dedup();
        v
    }

    /// Removes a pod's effects, the exact inverse of `link_pod`.
    fn unlink_pod(&mut self, pid: PodId) {
        let Some(p) = self.pod(pid) else { return };
        if p.node.is_none() {
            let name = p.node_name;
            if let Some(w) = self.waiting.get_mut(&name) {
                w.retain(|x| *x != pid);
                if w.is_empty() {
                    self.waiting.remove(&name);
                }
            }
        }
        let Some(p) = self.pod(pid) else { return };
        let (tenant, node, bound_gpus, bound_mig, dev) =
            (p.tenant, p.node, p.bound_gpus.clone(), p.bound_mig.clone(), p.requests_devices());
        let unbound =
            self.pods[pid.0 as usize].as_mut().map(|p| std::mem::take(&mut p.mig_unbound)).unwrap_or_default();
        let unbound_total: u32 = unbound.iter().map(|(_, k)| *k as u32).sum();
        self.totals.mig_unbound -= unbound_total;
        self.totals.mig_allocated -= unbound_total;
        let c = self.pod_contrib.remove(&pid).unwrap_or_default();
        if let Some(t) = self.tenants.get_mut(tenant.0 as usize).and_then(Option::as_mut) {
            t.usage.requested_gpus -= c.req_gpus;
            t.usage.allocated_gpus -= c.alloc_gpus;
            t.usage.requested_mig -= c.req_mig;
            t.usage.allocated_mig -= c.alloc_mig;
            t.usage.pods -= c.counted as u32;
            t.usage.pending_pods -= c.pending as u32;
        }
        self.totals.pods -= c.counted as u32;
        self.totals.pods_pending -= c.pending as u32;
        if let Some(n) = node {
            if let Some(v) = self.pods_by_node.get_mut(&n) {
                v.retain(|x| *x != pid);
            }
            if let Some(node) = self.nodes[n.0 as usize].as_mut() {
                node.gpus_allocated -= c.alloc_gpus;
                node.mig_allocated -= c.alloc_mig;
                node.pods -= (c.counted && dev) as u32;
                for &(r, k) in &unbound {
                    if let Some(pos) = node.mig_unbound.iter().position(|(x, _)| *x == r) {
                        node.mig_unbound[pos].1 -= k as u32;
                        if node.mig_unbound[pos].1 == 0 {
                            node.mig_unbound.remove(pos);
                        }
                    }
                }
            }
        }
        for g in &bound_gpus {
            if let Some(gpu) = self.gpus[g.0 as usize].as_mut() {
                gpu.pods.retain(|x| *x != pid);
            }
        }
        for u in &bound_mig {
            if let Some(&(g, i)) = self.mig_by_uuid.get(u)
                && let Some(inst) = self.gpus[g.0 as usize].as_mut().and_then(|g| g.instances.get_mut(i as usize))
                && inst.pod == Some(pid)
            {
                inst.pod = None;
                self.totals.mig_allocated -= 1;
            }
        }
        for g in self.devices_of(&bound_gpus, &bound_mig) {
            self.refresh_gpu(g);
        }
        if let Some(n) = node {
            self.refresh_node_alloc(n);
        }
        self.refresh_tenant_alerts(tenant);
    }

    fn remove_pod(&mut self, pid: PodId) {
        self.unlink_pod(pid);
        if let Some(p) = self.pods[pid.0 as usize].take() {
            if let Some(m) = self.pod_by_name.get_mut(&p.namespace) {
                m.remove(&p.name);
            }
            self.free_pods.push(pid.0);
        }
    }
}

/// A short hint for the XID codes an on-call engineer meets most.
/// What a node agent says a pod holds: a whole GPU, or a MIG instance (by uuid).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Held {
    Gpu(GpuId),
    Mig(Sym),
}

/// A MIG GPU's utilisation from its instances: engine activity weighted by compute slices
/// over the GPU's slices (the simulator's formula); `None` unless every instance has been
/// measured, so a GPU is never shown as idle because its instances were not.
fn mig_weighted_util(g: &Gpu) -> Option<u8> {
    if g.instances.is_empty() {
        return None;
    }
    let total = mig::catalog(g.model).iter().map(|p| p.compute_slices as u32).max().filter(|t| *t > 0)?;
    let mut weighted = 0u32;
    for i in &g.instances {
        weighted += i.util? as u32 * mig::profile(g.model, i.placement.profile).compute_slices as u32;
    }
    Some((weighted / total).min(100) as u8)
}

fn xid_hint(code: u32) -> &'static str {
    match code {
        13 => " (graphics engine exception)",
        31 => " (GPU memory page fault)",
        43 => " (GPU stopped processing)",
        45 => " (preemptive cleanup)",
        48 => " (double-bit ECC error)",
        63 | 64 => " (row remapping event)",
        74 => " (NVLink error)",
        79 => " (GPU has fallen off the bus)",
        92 => " (high single-bit ECC rate)",
        94 | 95 => " (contained/uncontained ECC error)",
        119 | 120 => " (GSP error)",
        _ => "",
    }
}

/// A quota's own numbers: what it counts is what the pods of its namespace ask for.
impl Fleet {
    /// What the unfinished pods of a ResourceQuota's namespace ask for in exactly that
    /// quota's resource, as the quota controller counts it: `requests.nvidia.com/gpu` counts
    /// `nvidia.com/gpu` requests, `requests.nvidia.com/mig-…` that MIG resource, and
    /// `<class>.deviceclass.resource.k8s.io/devices` the devices of the namespace's DRA claims
    /// of that class (each claim once, however many pods share it). Succeeded and Failed pods
    /// are not counted (the quota controller does not count them either). `None` where the
    /// cockpit cannot know: a Kueue ClusterQueue (its admission is Kueue's, see its used), or
    /// a resource the cockpit does not track.
    pub fn quota_requested(&self, q: &Quota) -> Option<i64> {
        let QuotaSource::ResourceQuota { namespace, .. } = q.source else { return None };
        let key = self.s(q.resource);
        enum Counts<'a> {
            Gpus,
            Mig(Sym),
            Dra(&'a str),
        }
        let what = if let Some(class) = key.strip_suffix(".deviceclass.resource.k8s.io/devices") {
            Counts::Dra(class)
        } else {
            match key.strip_prefix("requests.") {
                Some("nvidia.com/gpu") => Counts::Gpus,
                Some(r) if r.starts_with("nvidia.com/mig-") => {
                    // A MIG resource no pod names was never interned: nobody asks for it.
                    match self.interner.get(r) {
                        Some(sym) => Counts::Mig(sym),
                        None => return Some(0),
                    }
                }
                _ => return None,
            }
        };
        let pods = self.pod_by_name.get(&namespace).into_iter().flat_map(|m| m.values()).filter_map(|p| self.pod(*p));
        let pods = pods.filter(|p| !p.phase.finished());
        let total = match what {
            Counts::Gpus => pods.map(|p| i64::from(p.gpus)).sum(),
            Counts::Mig(sym) => pods.flat_map(|p| &p.mig).filter(|(r, _)| *r == sym).map(|(_, n)| i64::from(*n)).sum(),
            Counts::Dra(class) => {
                let mut seen = BTreeSet::new();
                pods.flat_map(|p| &p.dra)
                    .filter(|c| self.s(c.device_class) == class && seen.insert(c.claim))
                    .map(|c| i64::from(c.count))
                    .sum()
            }
        };
        Some(total)
    }
}

#[cfg(test)]
mod quota_scope_tests {
    use super::*;
    use crate::quantity::Quantity;

    fn pod(ns: &str, name: &str, phase: Phase, gpus: u16, mig: &[&str], dra: &[(&str, &str)]) -> PodSpec {
        PodSpec {
            namespace: ns.into(),
            name: name.into(),
            node: None,
            phase,
            created: 0,
            owner: Owner::Job,
            app: "app".into(),
            empty_dir: false,
            gpus,
            mig: mig.iter().map(|r| (r.to_string(), 1)).collect(),
            dra: dra
                .iter()
                .map(|(claim, class)| DraClaimSpec {
                    claim: claim.to_string(),
                    device_class: class.to_string(),
                    count: 1,
                    allocated: None,
                })
                .collect(),
            bound_gpus: vec![],
            bound_mig: vec![],
            deletion: None,
        }
    }

    fn quota(f: &mut Fleet, tenant: &str, source: QuotaSourceSpec, resource: &str) -> usize {
        f.apply(Delta::QuotaUpsert(QuotaSpec {
            tenant: tenant.into(),
            source,
            resource: resource.into(),
            hard: Quantity::from_int(10, crate::quantity::Format::DecimalSI),
            used: Quantity::zero(),
            version: "1".into(),
            borrowing_limit: None,
            lending_limit: None,
        }));
        f.quota_ids().last().expect("a quota")
    }

    fn rq(ns: &str) -> QuotaSourceSpec {
        QuotaSourceSpec::ResourceQuota { namespace: ns.into(), name: "q".into() }
    }

    #[test]
    fn a_quota_counts_only_its_namespace_and_its_exact_resource() {
        let mut f = Fleet::default();
        let ns = |n: &[&str]| n.iter().map(|s| s.to_string()).collect();
        f.apply(Delta::TenantUpsert(TenantSpec {
            name: "ft".into(),
            namespaces: ns(&["ft", "ft-dev"]),
            source: "label".into(),
        }));
        f.apply(Delta::TenantUpsert(TenantSpec { name: "rs".into(), namespaces: ns(&["rs"]), source: "label".into() }));
        for i in 0..3 {
            f.apply(Delta::PodUpsert(pod("ft", &format!("a{i}"), Phase::Running, 4, &[], &[])));
        }
        f.apply(Delta::PodUpsert(pod("ft", "pending", Phase::Pending, 2, &[], &[])));
        // Finished pods hold nothing and the quota controller does not count them.
        f.apply(Delta::PodUpsert(pod("ft", "done", Phase::Succeeded, 8, &[], &[])));
        f.apply(Delta::PodUpsert(pod("ft", "failed", Phase::Failed, 8, &[], &[])));
        f.apply(Delta::PodUpsert(pod("ft-dev", "d", Phase::Running, 1, &[], &[])));
        f.apply(Delta::PodUpsert(pod("ft", "m1", Phase::Running, 0, &["nvidia.com/mig-1g.10gb"], &[])));
        f.apply(Delta::PodUpsert(pod("ft", "m2", Phase::Running, 0, &["nvidia.com/mig-2g.20gb"], &[])));
        // DRA: two pods share one claim; a claim of another class; a finished pod's claim.
        let gpu = "gpu.nvidia.com";
        f.apply(Delta::PodUpsert(pod("rs", "r0", Phase::Running, 0, &[], &[("c0", gpu)])));
        f.apply(Delta::PodUpsert(pod("rs", "r1", Phase::Running, 0, &[], &[("c0", gpu)])));
        f.apply(Delta::PodUpsert(pod("rs", "r2", Phase::Pending, 0, &[], &[("c2", gpu)])));
        f.apply(Delta::PodUpsert(pod("rs", "r3", Phase::Running, 0, &[], &[("c3", "mig.nvidia.com")])));
        f.apply(Delta::PodUpsert(pod("rs", "r4", Phase::Succeeded, 0, &[], &[("c4", gpu)])));

        let cases = [
            ("ft", "ft", "requests.nvidia.com/gpu", Some(14)),
            ("ft", "ft-dev", "requests.nvidia.com/gpu", Some(1)),
            ("ft", "ft", "requests.nvidia.com/mig-1g.10gb", Some(1)),
            ("ft", "ft", "requests.nvidia.com/mig-3g.40gb", Some(0)),
            ("ft", "ft", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices", Some(0)),
            ("rs", "rs", "requests.nvidia.com/gpu", Some(0)),
            ("rs", "rs", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices", Some(2)),
            ("rs", "rs", "mig.nvidia.com.deviceclass.resource.k8s.io/devices", Some(1)),
            // Not a resource the cockpit tracks, and not a quota that ResourceQuota counts.
            ("rs", "rs", "requests.cpu", None),
            ("rs", "rs", "nvidia.com/gpu", None),
            ("rs", "nobody-here", "requests.nvidia.com/gpu", Some(0)),
        ];
        for (tenant, ns, resource, want) in cases {
            let q = quota(&mut f, tenant, rq(ns), resource);
            let got = f.quotas[q].as_ref().and_then(|q| f.quota_requested(q));
            assert_eq!(got, want, "{ns} {resource}");
        }
        let cq = QuotaSourceSpec::ClusterQueue { queue: "cq".into(), flavor: "h100".into() };
        let q = quota(&mut f, "ft", cq, "nvidia.com/gpu");
        assert_eq!(f.quotas[q].as_ref().and_then(|q| f.quota_requested(q)), None, "Kueue admits, not the cockpit");
    }
}
