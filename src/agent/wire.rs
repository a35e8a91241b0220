//! The agent's wire types, shared by the agent (`fabrik agent`) and the cockpit that
//! streams from it. Versioned: `version` changes only with an incompatible change; new
//! optional fields may appear at any time, so readers ignore what they do not know.

use serde::{Deserialize, Serialize};

pub const WIRE_VERSION: u32 = 1;

/// One sample set of one node: every GPU, every MIG instance, every GPU process.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeSample {
    pub version: u32,
    /// Kubernetes node name (the agent's NODE_NAME, else the hostname).
    pub node: String,
    /// Unix milliseconds when the sample was taken.
    pub sampled_at_ms: u64,
    /// Which backend produced it: "nvml" or "fake".
    pub backend: String,
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
    pub gpus: Vec<GpuSample>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    pub index: u32,
    pub uuid: String,
    /// NVML name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    pub pci_bus_id: Option<String>,
    pub memory_total_mib: u64,
    pub memory_used_mib: u64,
    /// Percent 0..=100; `None` where NVML does not support it (e.g. in MIG mode).
    pub util_gpu: Option<u32>,
    pub util_memory: Option<u32>,
    pub power_mw: Option<u32>,
    pub power_limit_mw: Option<u32>,
    pub temp_c: Option<u32>,
    pub sm_clock_mhz: Option<u32>,
    pub mem_clock_mhz: Option<u32>,
    pub ecc_corrected: Option<u64>,
    pub ecc_uncorrected: Option<u64>,
    /// Names of the active clock throttle reasons (e.g. "sw_power_cap", "hw_slowdown").
    pub throttle_reasons: Vec<String>,
    /// The last XID seen on this GPU since the agent started.
    pub last_xid: Option<XidEvent>,
    pub mig_enabled: bool,
    pub mig_pending: Option<bool>,
    pub mig_instances: Vec<MigSample>,
    pub processes: Vec<GpuProcess>,
    pub nvlinks: Vec<NvLinkState>,
    /// The pods the kubelet gave this GPU (its PodResources API), whether or not they run
    /// anything on it; `None` when the agent cannot ask the kubelet, `Some([])` when the
    /// kubelet says nobody has it. Only whole-GPU resources; MIG instances carry their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated_to: Option<Vec<PodRef>>,
    /// How this GPU reaches each other GPU of the node, as `nvidia-smi topo -m` shows it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<PeerLink>,
}

/// The path from one GPU to a peer: NVLinks between them (through NVSwitch counts), and
/// the PCIe path: "X" (same board), "PIX" (one PCIe switch), "PXB" (several switches),
/// "PHB" (a host bridge), "NODE" (within a NUMA node), "SYS" (across NUMA nodes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerLink {
    pub peer: u32,
    pub nvlinks: u32,
    pub path: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct XidEvent {
    pub code: u64,
    pub at_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MigSample {
    pub uuid: String,
    /// "1g.10gb", "3g.40gb+me".
    pub profile: String,
    pub gpu_instance_id: u32,
    pub compute_instance_id: Option<u32>,
    /// Memory-slice placement.
    pub placement_start: u32,
    pub placement_size: u32,
    pub memory_total_mib: u64,
    pub memory_used_mib: u64,
    /// Engine activity 0..=100 where available (GPU utilisation is not supported on MIG).
    pub util: Option<u32>,
    /// The pods the kubelet gave this instance; as `GpuSample::allocated_to`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated_to: Option<Vec<PodRef>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuProcess {
    /// Host PID.
    pub pid: u32,
    pub used_memory_mib: Option<u64>,
    /// Set when the process runs in a MIG instance.
    pub gpu_instance_id: Option<u32>,
    pub compute_instance_id: Option<u32>,
    /// The pod it belongs to, from /proc/PID/cgroup; `None` for host processes.
    pub pod: Option<PodRef>,
    /// Share of the sampling period the SMs ran this process's kernels, percent (NVML
    /// process utilisation): how busy each process sharing a GPU keeps it. `None` when the
    /// driver has no sample for it (MIG mode, or not supported). Absent from older agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_util: Option<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodRef {
    pub uid: String,
    /// Filled when the agent can resolve the uid (kubelet or API), else `None`.
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub container_id: Option<String>,
    pub container: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvLinkState {
    pub link: u32,
    pub active: bool,
    pub remote_pci_bus_id: Option<String>,
}
