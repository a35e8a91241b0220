//! `Counters`: the fleet's incremental aggregates. Every device and pod remembers what it
//! added to the totals and to its tenant's usage, so the next change subtracts exactly that
//! and no view ever rescans the fleet to count.

use super::super::intern::FastMap;
use super::super::slab::Slab;
use super::super::types::{GpuId, NodeId, PodId, Tenant, TenantId};

/// Fleet-wide counters for the header, maintained incrementally.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub nodes: u32,
    pub nodes_ready: u32,
    pub nodes_cordoned: u32,
    pub gpus: u32,
    /// Physical GPUs with any allocation (whole, or any MIG instance); on a node whose
    /// pods hold MIG instances the fleet cannot place, the fewest GPUs those must be on
    /// (see [`crate::model::Fleet::node_allocated_gpus`]), so a lower bound there.
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
    /// Unfinished pods the fleet tracks (GPU pods, and the other pods of tenants'
    /// namespaces, which the tenants view counts)...
    pub pods: u32,
    pub pods_pending: u32,
    /// ...of which GPU pods (asking for a GPU, a MIG instance, a replica or a DRA device):
    /// the header's and the clusters view's `pods`.
    pub gpu_pods: u32,
    pub gpu_pods_pending: u32,
    /// Physical GPUs whose device plugin hands them out as replicas (time-slicing, MPS)...
    pub gpus_shared: u32,
    /// ...the replicas they offer...
    pub shares: u32,
    /// ...and how many of those pods hold...
    pub shares_held: u32,
    /// ...of which no one placed on a GPU (so `gpus_allocated` is a lower bound).
    pub shares_unplaced: u32,
    /// Replicas held by a pod whose own processes have kept under the idle threshold for
    /// the window (idle-but-allocated, per share).
    pub shares_idle: u32,
}

/// What one device (a whole GPU or a MIG instance) contributes to the counters; kept so
/// the next change can subtract exactly what was added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct DeviceContrib {
    pub tenant: Option<TenantId>,
    pub busy: bool,
    pub idle: bool,
    /// Allocated and its utilisation measured.
    pub measured: bool,
}

/// What one pod contributes to its tenant's usage and to the totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct PodContrib {
    pub req_gpus: u32,
    pub alloc_gpus: u32,
    pub req_mig: u32,
    pub alloc_mig: u32,
    /// Replicas of shared GPUs held (the pod's `nvidia.com/gpu` on a shared node)...
    pub alloc_shares: u32,
    /// ...what they come to in thousandths of a GPU...
    pub share_milli: u32,
    /// ...and how many of them no one placed on a GPU.
    pub unplaced_shares: u32,
    /// DRA devices shared by capacity (`allowMultipleAllocations`) the pod holds a share of:
    /// the GPU is counted once on its node, not once per claim.
    pub dra_shares: u32,
    /// Of `alloc_shares`, those of a pod the kubelet has started, and replicas × its start
    /// time (ms): a tenant's share-seconds at any moment follow from the two sums.
    pub started_shares: u32,
    pub started_share_ms: u64,
    pub counted: bool,
    pub pending: bool,
    /// Unfinished and asking for devices: a GPU pod.
    pub gpu: bool,
    /// Running with a container in CrashLoopBackOff while it holds devices (what it holds).
    pub crash_looping: u32,
}

/// What a node adds to the totals: GPUs allocated, shared GPUs, replicas offered and held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct NodeAlloc {
    pub gpus_allocated: u32,
    pub gpus_shared: u32,
    pub shares: u32,
    pub shares_held: u32,
    pub shares_unplaced: u32,
}

/// What each device, pod and node last added to the totals (and to tenants' usage).
#[derive(Clone, Debug, Default)]
pub(super) struct Counters {
    /// Per whole GPU.
    pub gpu: FastMap<GpuId, DeviceContrib>,
    /// Per MIG instance (GPU, instance index).
    pub mig: FastMap<(GpuId, u8), DeviceContrib>,
    pub pod: PerPod,
    /// Per node, what it counted (see `Fleet::node_allocated_gpus`).
    pub node_alloc: FastMap<NodeId, NodeAlloc>,
    /// Per shared GPU, its idle shares: (holder, its tenant, replicas it holds there).
    pub share_idle: FastMap<GpuId, Vec<(PodId, TenantId, u32)>>,
}

/// Each pod's [`PodContrib`], at its slot in the pods slab: no hashing, 56 bytes a slot
/// (a hash map of them took about 98 bytes a pod). A slot no pod counts in holds the default,
/// which contributes nothing.
#[derive(Clone, Debug, Default)]
pub(super) struct PerPod(Vec<PodContrib>);

impl PerPod {
    pub fn insert(&mut self, pid: PodId, c: PodContrib) {
        let i = pid.0 as usize;
        if i >= self.0.len() {
            self.0.resize(i + 1, PodContrib::default());
        }
        self.0[i] = c;
    }

    /// Takes what the pod contributed (the default if nothing), leaving nothing counted.
    pub fn remove(&mut self, pid: PodId) -> PodContrib {
        self.0.get_mut(pid.0 as usize).map(std::mem::take).unwrap_or_default()
    }

    #[cfg(test)]
    pub fn get(&self, pid: PodId) -> Option<&PodContrib> {
        self.0.get(pid.0 as usize)
    }

    /// Gives back the room grown while the initial listing came, keeping an eighth (as the
    /// pods slab does).
    pub fn shrink_keeping_room(&mut self) {
        let n = self.0.len();
        self.0.shrink_to(n + n / 8);
    }
}

impl Counters {
    /// Sets whole GPU `gid`'s contribution to `new`, moving the counters by the difference.
    pub fn set_gpu(
        &mut self,
        gid: GpuId,
        new: DeviceContrib,
        totals: &mut Totals,
        tenants: &mut Slab<TenantId, Tenant>,
    ) {
        let old = self.gpu.get(&gid).copied().unwrap_or_default();
        if old != new {
            old.unapply(totals, tenants);
            new.apply(totals, tenants);
            self.gpu.insert(gid, new);
        }
    }

    /// Sets a MIG instance's contribution to `new`, moving the counters by the difference.
    pub fn set_mig(
        &mut self,
        key: (GpuId, u8),
        new: DeviceContrib,
        totals: &mut Totals,
        tenants: &mut Slab<TenantId, Tenant>,
    ) {
        let old = self.mig.get(&key).copied().unwrap_or_default();
        if old != new {
            old.unapply(totals, tenants);
            new.apply(totals, tenants);
            self.mig.insert(key, new);
        }
    }

    /// Forgets a whole GPU, taking back what it added.
    pub fn drop_gpu(&mut self, gid: GpuId, totals: &mut Totals, tenants: &mut Slab<TenantId, Tenant>) {
        if let Some(c) = self.gpu.remove(&gid) {
            c.unapply(totals, tenants);
        }
        self.set_share_idle(gid, Vec::new(), totals, tenants);
    }

    /// Sets shared GPU `gid`'s idle shares to `new`, moving the counters by the difference.
    pub fn set_share_idle(
        &mut self,
        gid: GpuId,
        new: Vec<(PodId, TenantId, u32)>,
        totals: &mut Totals,
        tenants: &mut Slab<TenantId, Tenant>,
    ) {
        if self.share_idle.get(&gid).map_or(new.is_empty(), |old| *old == new) {
            return;
        }
        for (_, t, k) in self.share_idle.remove(&gid).unwrap_or_default() {
            totals.shares_idle -= k;
            if let Some(t) = tenants.get_mut(t) {
                t.usage.shares_idle -= k;
            }
        }
        for &(_, t, k) in &new {
            totals.shares_idle += k;
            if let Some(t) = tenants.get_mut(t) {
                t.usage.shares_idle += k;
            }
        }
        if !new.is_empty() {
            self.share_idle.insert(gid, new);
        }
    }

    /// Forgets a MIG instance, taking back what it added.
    pub fn drop_mig(&mut self, key: (GpuId, u8), totals: &mut Totals, tenants: &mut Slab<TenantId, Tenant>) {
        if let Some(c) = self.mig.remove(&key) {
            c.unapply(totals, tenants);
        }
    }

    /// Sets how many GPUs `node` counts as allocated.
    pub fn set_node_alloc(&mut self, node: NodeId, new: NodeAlloc, totals: &mut Totals) {
        let old = self.node_alloc.insert(node, new).unwrap_or_default();
        totals.gpus_allocated = totals.gpus_allocated + new.gpus_allocated - old.gpus_allocated;
        totals.gpus_shared = totals.gpus_shared + new.gpus_shared - old.gpus_shared;
        totals.shares = totals.shares + new.shares - old.shares;
        totals.shares_held = totals.shares_held + new.shares_held - old.shares_held;
        totals.shares_unplaced = totals.shares_unplaced + new.shares_unplaced - old.shares_unplaced;
    }

    /// Forgets a node's allocation.
    pub fn drop_node_alloc(&mut self, node: NodeId, totals: &mut Totals) {
        if let Some(c) = self.node_alloc.remove(&node) {
            totals.gpus_allocated -= c.gpus_allocated;
            totals.gpus_shared -= c.gpus_shared;
            totals.shares -= c.shares;
            totals.shares_held -= c.shares_held;
            totals.shares_unplaced -= c.shares_unplaced;
        }
    }
}

impl DeviceContrib {
    fn apply(self, totals: &mut Totals, tenants: &mut Slab<TenantId, Tenant>) {
        totals.idle_allocated += self.idle as u32;
        totals.devices_measured += self.measured as u32;
        if let Some(t) = self.tenant.and_then(|t| tenants.get_mut(t)) {
            t.usage.busy += self.busy as u32;
            t.usage.idle_allocated += self.idle as u32;
            t.usage.measured += self.measured as u32;
        }
    }

    fn unapply(self, totals: &mut Totals, tenants: &mut Slab<TenantId, Tenant>) {
        totals.idle_allocated -= self.idle as u32;
        totals.devices_measured -= self.measured as u32;
        if let Some(t) = self.tenant.and_then(|t| tenants.get_mut(t)) {
            t.usage.busy -= self.busy as u32;
            t.usage.idle_allocated -= self.idle as u32;
            t.usage.measured -= self.measured as u32;
        }
    }
}

impl PodContrib {
    /// The pod holds a device (a GPU, an instance, a replica, a share): it lives next to the
    /// other tenants on its node.
    pub fn holds_devices(&self) -> bool {
        self.alloc_gpus + self.alloc_mig + self.alloc_shares + self.dra_shares > 0
    }

    /// Adds the pod's share to its tenant's usage (if the tenant exists) and the totals.
    pub fn apply(self, tenant: TenantId, totals: &mut Totals, tenants: &mut Slab<TenantId, Tenant>) {
        if let Some(t) = tenants.get_mut(tenant) {
            let u = &mut t.usage;
            u.requested_gpus += self.req_gpus;
            u.allocated_gpus += self.alloc_gpus;
            u.allocated_shares += self.alloc_shares + self.dra_shares;
            u.share_milli += self.share_milli;
            u.started_shares += self.started_shares;
            u.started_share_ms += self.started_share_ms;
            u.requested_mig += self.req_mig;
            u.allocated_mig += self.alloc_mig;
            u.pods += self.counted as u32;
            u.pending_pods += self.pending as u32;
            u.crash_looping += (self.crash_looping > 0) as u32;
            u.crash_looping_devices += self.crash_looping;
        }
        totals.pods += self.counted as u32;
        totals.pods_pending += self.pending as u32;
        totals.gpu_pods += self.gpu as u32;
        totals.gpu_pods_pending += (self.gpu && self.pending) as u32;
    }

    /// Takes back exactly what [`PodContrib::apply`] added.
    pub fn unapply(self, tenant: TenantId, totals: &mut Totals, tenants: &mut Slab<TenantId, Tenant>) {
        if let Some(t) = tenants.get_mut(tenant) {
            let u = &mut t.usage;
            u.requested_gpus -= self.req_gpus;
            u.allocated_gpus -= self.alloc_gpus;
            u.allocated_shares -= self.alloc_shares + self.dra_shares;
            u.share_milli -= self.share_milli;
            u.started_shares -= self.started_shares;
            u.started_share_ms -= self.started_share_ms;
            u.requested_mig -= self.req_mig;
            u.allocated_mig -= self.alloc_mig;
            u.pods -= self.counted as u32;
            u.pending_pods -= self.pending as u32;
            u.crash_looping -= (self.crash_looping > 0) as u32;
            u.crash_looping_devices -= self.crash_looping;
        }
        totals.pods -= self.counted as u32;
        totals.pods_pending -= self.pending as u32;
        totals.gpu_pods -= self.gpu as u32;
        totals.gpu_pods_pending -= (self.gpu && self.pending) as u32;
    }
}
