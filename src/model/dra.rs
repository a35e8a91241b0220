//! What Kubernetes 1.34's alpha DRA features say about a GPU, beyond the devices
//! themselves (protocols.md §5): partitions carved from shared counters
//! (`DRAPartitionableDevices`, the NVIDIA driver's dynamic MIG), devices shared by capacity
//! (`DRAConsumableCapacity`), and taints (`DRADeviceTaints`, from the driver's health checks
//! or a `DeviceTaintRule`). And the NVIDIA driver's ComputeDomains (IMEX over multi-node
//! NVLink). The feed works these out from ResourceSlices, ResourceClaims and the CRDs; the
//! fleet keeps them beside the GPU.

use super::types::Ts;

/// A taint on one DRA device (a GPU, or a MIG device of it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceTaint {
    pub key: String,
    pub value: String,
    /// `NoSchedule` or `NoExecute` (anything else is kept as written).
    pub effect: String,
    /// The device it is on (`gpu-0`, `gpu-0-mig-1g24gb-19-0`).
    pub device: String,
    /// The `DeviceTaintRule` that put it there; `None`: the driver, in its ResourceSlice.
    pub rule: Option<String>,
    pub since: Option<Ts>,
}

impl DeviceTaint {
    /// `gpu.nvidia.com/xid=79:NoExecute`.
    pub fn text(&self) -> String {
        if self.value.is_empty() {
            format!("{}:{}", self.key, self.effect)
        } else {
            format!("{}={}:{}", self.key, self.value, self.effect)
        }
    }
    /// Pods using the device are evicted (not only kept from scheduling there).
    pub fn evicts(&self) -> bool {
        self.effect == "NoExecute"
    }
}

/// Of one MIG profile, the partitions a new claim could get now by the GPU's counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterFit {
    pub profile: String,
    /// Placements whose counters are all still free...
    pub fits: u16,
    /// ...of the placements the slice offers for the profile.
    pub offered: u16,
}

/// One claim's share of a device allocated by capacity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapacityShare {
    /// `namespace/name` of the ResourceClaim.
    pub claim: String,
    /// What it consumes, per capacity name (`memory` in bytes, ...).
    pub consumed: Vec<(String, i64)>,
}

/// The DRA extras of one GPU; the default is "none of them".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuDra {
    /// The pool of the slice that announces the GPU, and the names of its devices there (the
    /// whole GPU, its MIG devices or partitions): what a DeviceTaintRule selects.
    pub pool: String,
    pub devices: Vec<String>,
    /// Its devices consume shared counters: partitions are made per claim (dynamic MIG),
    /// and mig-manager has nothing to reslice.
    pub partitionable: bool,
    /// Partitionable: per profile, what a new claim could get by the counters left.
    pub fits: Vec<CounterFit>,
    /// Partitionable: the whole GPU could still be allocated (no partition taken).
    pub whole_fits: bool,
    pub taints: Vec<DeviceTaint>,
    /// `allowMultipleAllocations`: several claims share the device by capacity.
    pub multi: bool,
    /// The device's capacity, per name (for shares: what there is to consume).
    pub capacity: Vec<(String, i64)>,
    pub shares: Vec<CapacityShare>,
}

impl GpuDra {
    pub fn is_empty(&self) -> bool {
        *self == GpuDra::default()
    }
    /// Whether any of the alpha features is on this GPU (beyond the devices' names).
    pub fn has_alpha(&self) -> bool {
        self.partitionable || self.multi || !self.taints.is_empty()
    }
    /// Capacity `name` not consumed by any claim (for a device shared by capacity).
    pub fn left(&self, name: &str) -> Option<i64> {
        let total = self.capacity.iter().find(|(k, _)| k == name)?.1;
        let used: i64 = self.shares.iter().flat_map(|s| &s.consumed).filter(|(k, _)| k == name).map(|(_, v)| v).sum();
        Some(total - used)
    }
    /// The taint that matters most: `NoExecute` over `NoSchedule`.
    pub fn worst_taint(&self) -> Option<&DeviceTaint> {
        self.taints.iter().find(|t| t.evicts()).or_else(|| self.taints.first())
    }
}

/// One node of a ComputeDomain, as the domain's status says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DomainNode {
    pub name: String,
    /// `Ready` / `NotReady` (the IMEX daemon on the node).
    pub status: String,
    pub clique: String,
}

/// A ComputeDomain (`resource.nvidia.com`, the NVIDIA DRA driver).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComputeDomainSpec {
    pub namespace: String,
    pub name: String,
    pub num_nodes: u32,
    /// `status.status`: `Ready`, `NotReady`, or empty before the controller wrote it.
    pub status: String,
    pub nodes: Vec<DomainNode>,
    /// The ResourceClaimTemplate workloads use to join it (`spec.channel`).
    pub claim_template: String,
    pub created: Ts,
}

impl ComputeDomainSpec {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
    pub fn ready(&self) -> bool {
        self.status == "Ready"
    }
    pub fn nodes_ready(&self) -> u32 {
        self.nodes.iter().filter(|n| n.status == "Ready").count() as u32
    }
}
