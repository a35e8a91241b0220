//! Deltas: the only way state enters the fleet. Every feed (Kubernetes watches, node
//! agents, Prometheus, the simulator) speaks this language, keyed by natural names, so
//! the fleet can resolve them to compact ids.

use super::history::Sample;
use super::types::{MigConfigState, Owner, Phase, Severity, Ts};
use crate::mig::{GpuModel, PlacedInstance};
use crate::quantity::Quantity;

#[derive(Clone, Debug, PartialEq)]
pub struct NodeSpec {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub ready: bool,
    pub cordoned: bool,
    /// The `fabrik.io/cordoned-by` annotation, empty when absent.
    pub cordoned_by: String,
    pub gpu_model: Option<GpuModel>,
    pub capacity: Vec<(String, i64)>,
    pub allocatable: Vec<(String, i64)>,
    pub mig_config: String,
    pub mig_state: MigConfigState,
    /// When the state label last changed, if the source knows (managedFields time on a
    /// cluster); otherwise the fleet counts from when it first saw the state.
    pub mig_state_since: Option<Ts>,
    /// When the Ready condition last changed (lastTransitionTime on a cluster), if known;
    /// otherwise a NotReady node counts from when the fleet first saw it so.
    pub ready_since: Option<Ts>,
    pub created: Ts,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MigInstanceSpec {
    pub placement: PlacedInstance,
    pub uuid: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GpuSpec {
    pub uuid: String,
    pub node: String,
    pub index: u8,
    pub model: GpuModel,
    pub memory_mib: u32,
    pub mig_enabled: bool,
    pub instances: Vec<MigInstanceSpec>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DraClaimSpec {
    pub claim: String,
    pub device_class: String,
    pub count: u16,
    pub allocated: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PodSpec {
    pub namespace: String,
    pub name: String,
    pub node: Option<String>,
    pub phase: Phase,
    pub created: Ts,
    /// `status.startTime`: when the kubelet started the pod (None until then).
    pub started: Option<Ts>,
    pub owner: Owner,
    /// The controlling owner's name (`ownerReferences[controller]`); empty without one.
    pub owner_name: String,
    pub app: String,
    pub empty_dir: bool,
    pub gpus: u16,
    /// `gpus` are of the renamed shared resource `nvidia.com/gpu.shared`.
    pub gpus_renamed: bool,
    pub mig: Vec<(String, u16)>,
    pub dra: Vec<DraClaimSpec>,
    /// The ResourceClaimTemplates its pod claims are made from (`spec.resourceClaims[]
    /// .resourceClaimTemplateName`): how a pod joins a ComputeDomain (its channel template).
    pub claim_templates: Vec<String>,
    /// GPU uuids bound to the pod, when known.
    pub bound_gpus: Vec<String>,
    /// MIG instance uuids bound to the pod, when known.
    pub bound_mig: Vec<String>,
    /// Set once the pod's deletion was asked for (`metadata.deletionTimestamp`).
    pub deletion: Option<Deletion>,
    /// A container the kubelet cannot start, as `kubectl get pods` says it: the first
    /// (init containers first) waiting for another reason than being created, `(reason,
    /// message)`, e.g. `ImagePullBackOff`, `CreateContainerConfigError`, `CrashLoopBackOff`.
    pub container_waiting: Option<(String, String)>,
    /// Its containers' restarts, as `kubectl get pods`' RESTARTS counts them.
    pub restarts: Restarts,
}

/// How many times a pod's containers were restarted, counted as kubectl's RESTARTS column
/// counts them (the containers', and the init containers' while they initialise), and when
/// the last counted container exited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Restarts {
    pub count: u32,
    /// Seconds since the epoch (0: no container said when), to keep a pod small.
    last_exit_s: u32,
}

impl Restarts {
    pub fn new(count: u32, last_exit: Option<Ts>) -> Restarts {
        let last_exit_s = last_exit.map_or(0, |t| u32::try_from(t / 1000).unwrap_or(u32::MAX));
        Restarts { count, last_exit_s }
    }

    /// When the last counted container exited (`lastState.terminated.finishedAt`), to the
    /// second.
    pub fn last_exit(&self) -> Option<Ts> {
        (self.last_exit_s > 0).then(|| u64::from(self.last_exit_s) * 1000)
    }
}

/// A pod whose deletion is under way, and what still keeps it: the kubelet stops its
/// containers within the grace period, and the object stays until every finalizer is gone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deletion {
    /// When the deletion was asked for: `deletionTimestamp` less the grace period.
    pub since: Ts,
    /// `metadata.deletionGracePeriodSeconds`: how long its containers may take to stop.
    pub grace_secs: Option<u32>,
    /// `metadata.finalizers`: whoever owns one must remove it before the pod is gone.
    pub finalizers: Vec<String>,
    /// The kubelet has stopped its containers (phase Succeeded or Failed): it holds no
    /// devices any more; only its object remains.
    pub stopped: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TenantSpec {
    pub name: String,
    pub namespaces: Vec<String>,
    pub source: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum QuotaSourceSpec {
    ResourceQuota { namespace: String, name: String },
    ClusterQueue { queue: String, flavor: String },
}

#[derive(Clone, Debug, PartialEq)]
pub struct QuotaSpec {
    pub tenant: String,
    pub source: QuotaSourceSpec,
    pub resource: String,
    pub hard: Quantity,
    pub used: Quantity,
    pub version: String,
    /// Kueue ClusterQueue only: how much more the queue may borrow from its cohort, and how
    /// much of its nominal quota it may lend (unset: no limit).
    pub borrowing_limit: Option<Quantity>,
    pub lending_limit: Option<Quantity>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PdbSpec {
    pub namespace: String,
    pub name: String,
    pub selector_app: String,
    pub disruptions_allowed: i32,
    pub current_healthy: i32,
    pub desired_healthy: i32,
}

/// One MIG instance's figures in a telemetry sample.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceSample {
    pub uuid: String,
    /// Engine activity, percent, when the source measured it.
    pub util: Option<u8>,
    pub mem_used_mib: u32,
    /// Profile name and first memory slice, when the source knows them (a node agent). The
    /// fleet does not know the MIG uuids of GPUs announced only by node labels; such a
    /// sample lands on the instance with that profile and placement, else on the instance
    /// of that profile with the same rank (the fleet's placements are then its own plan).
    pub placement: Option<(String, u8)>,
    /// The pods (`namespace/name`) the kubelet gave this instance, when the source knows.
    pub allocated: Option<Vec<String>>,
}

impl InstanceSample {
    pub fn new(uuid: impl Into<String>, util: Option<u8>, mem_used_mib: u32) -> Self {
        Self { uuid: uuid.into(), util, mem_used_mib, placement: None, allocated: None }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct TelemetrySample {
    pub gpu_uuid: String,
    pub at: Ts,
    pub sample: Sample,
    /// Per MIG instance. A MIG GPU whose sample has no utilisation of its own gets its
    /// instances' (compute-slice weighted) when every instance has one.
    pub instances: Vec<InstanceSample>,
    /// The node and index of the GPU, when the source knows them: a node agent reports the
    /// NVML uuid, which the fleet does not know for GPUs announced only by node labels.
    pub node_gpu: Option<(String, u8)>,
    /// The compute processes on the GPU, when the source sees them (a node agent); `None`
    /// when it does not (Prometheus, the simulator), which keeps what is known.
    pub processes: Option<Vec<ProcSample>>,
    /// The pods (`namespace/name`) the kubelet gave this whole GPU, when the source knows
    /// (a node agent that reads the kubelet's PodResources API); `None` when it does not.
    pub allocated: Option<Vec<String>>,
    /// How the GPU reaches the other GPUs of its node, when the source knows (a node agent).
    pub peers: Option<Vec<PeerSample>>,
}

/// One GPU-to-GPU path: NVLinks between the two, and the PCIe path (`nvidia-smi topo -m`'s
/// X, PIX, PXB, PHB, NODE, SYS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerSample {
    pub peer: u8,
    pub nvlinks: u8,
    pub path: String,
}

/// A process on a GPU, as the node agent maps it to a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcSample {
    pub pid: u32,
    pub mem_mib: Option<u32>,
    /// `namespace/name` when the agent could name the pod, else `uid:<pod uid>`; `None`
    /// for a process outside any pod (on the host).
    pub pod: Option<String>,
    pub container: Option<String>,
    /// The MIG GPU instance it runs in.
    pub gpu_instance: Option<u32>,
    /// Percent of the time the SMs ran its kernels, when the agent measured it.
    pub sm_util: Option<u8>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum GpuFault {
    Xid { code: u32 },
    EccUncorrected { count: u32 },
}

#[derive(Clone, Debug, PartialEq)]
pub struct EventSpec {
    pub ts: Ts,
    pub severity: Severity,
    pub reason: String,
    pub object: String,
    pub message: String,
}

/// What the person may do on this cluster (SelfSubjectAccessReview), by operation name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AccessSpec {
    /// Who the API server says we are; empty when it did not say.
    pub user: String,
    /// (operation, why not): the operation is disabled.
    pub denied: Vec<(String, String)>,
    /// (operation, note): allowed somewhere, not cluster-wide; checked per namespace at the start.
    pub limited: Vec<(String, String)>,
}

impl AccessSpec {
    pub fn denied(&self, op: &str) -> Option<&str> {
        self.denied.iter().find(|(o, _)| o == op).map(|(_, w)| w.as_str())
    }
    pub fn limited(&self, op: &str) -> impl Iterator<Item = &str> {
        self.limited.iter().filter(move |(o, _)| o == op).map(|(_, w)| w.as_str())
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum OpProgress {
    Started { id: u64, title: String, target: String, total: u32 },
    Step { id: u64, step: String, done: u32, total: u32 },
    Blocked { id: u64, reason: String },
    Log { id: u64, line: String },
    Finished { id: u64, outcome: Result<String, String> },
    Cancelled { id: u64 },
}

impl OpProgress {
    pub fn id(&self) -> u64 {
        match self {
            Self::Started { id, .. }
            | Self::Step { id, .. }
            | Self::Blocked { id, .. }
            | Self::Log { id, .. }
            | Self::Finished { id, .. }
            | Self::Cancelled { id } => *id,
        }
    }
}

/// The feed source name of node `node`'s agent stream (in `Fleet::feeds` and the header).
pub fn agent_feed(node: &str) -> String {
    format!("agent {node}")
}

/// Where a feed's connection stands; shown in the header so stale data is never mistaken
/// for live data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FeedState {
    Live,
    Reconnecting { since: Ts, reason: String },
    Stale { since: Ts, reason: String },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Delta {
    /// The feed's clock moved on.
    Clock(Ts),
    NodeUpsert(NodeSpec),
    NodeRemove(String),
    GpuUpsert(GpuSpec),
    GpuRemove(String),
    /// What DRA's alpha features say about a GPU (partitions, capacity shares, taints);
    /// replaces what was said before, a default `GpuDra` clears it.
    GpuDra {
        uuid: String,
        dra: super::dra::GpuDra,
    },
    /// A ComputeDomain (NVIDIA DRA driver) appeared or changed...
    DomainUpsert(super::dra::ComputeDomainSpec),
    /// ...or went away.
    DomainRemove {
        namespace: String,
        name: String,
    },
    /// A Kueue Workload appeared or changed...
    WorkloadUpsert(super::kueue::KueueWorkload),
    /// ...or went away.
    WorkloadRemove {
        namespace: String,
        name: String,
    },
    /// Who puts an object fabrik may change back from Git (Argo CD, Flux), by
    /// [`super::gitops::key`]; `None`: nobody (any more).
    Managed {
        object: String,
        owner: Option<super::gitops::GitOpsOwner>,
    },
    /// A Cluster API Machine appeared or changed...
    MachineUpsert(super::capi::Machine),
    /// ...or went away.
    MachineRemove {
        namespace: String,
        name: String,
    },
    /// A Cluster, control plane, MachineDeployment, MachineSet or MachineHealthCheck
    /// appeared or changed...
    CapiUpsert(super::capi::CapiObject),
    /// ...or went away.
    CapiRemove {
        kind: super::capi::CapiKind,
        namespace: String,
        name: String,
    },
    /// A Metal3 BareMetalHost appeared or changed...
    HostUpsert(super::metal3::BareMetalHost),
    /// ...or went away.
    HostRemove {
        namespace: String,
        name: String,
    },
    /// A NetworkPolicy appeared or changed...
    NetPolUpsert(super::isolation::NetPolicySpec),
    /// ...or went away.
    NetPolRemove {
        namespace: String,
        name: String,
    },
    /// A namespace's Pod Security admission level (`pod-security.kubernetes.io/enforce`),
    /// `None` without one (or once the namespace is gone).
    PodSecurity {
        namespace: String,
        enforce: Option<String>,
    },
    Telemetry(Vec<TelemetrySample>),
    GpuFault {
        gpu_uuid: String,
        at: Ts,
        fault: GpuFault,
    },
    GpuFaultClear {
        gpu_uuid: String,
    },
    PodUpsert(PodSpec),
    PodRemove {
        namespace: String,
        name: String,
    },
    TenantUpsert(TenantSpec),
    TenantRemove(String),
    QuotaUpsert(QuotaSpec),
    QuotaRemove {
        tenant: String,
        source: QuotaSourceSpec,
        resource: String,
    },
    PdbUpsert(PdbSpec),
    PdbRemove {
        namespace: String,
        name: String,
    },
    Event(EventSpec),
    Op(OpProgress),
    /// The result of the up-front access review.
    Access(AccessSpec),
    Feed {
        source: String,
        state: FeedState,
    },
    /// A source that stopped on purpose (an agent stream for a node that left the view).
    FeedRemove(String),
    /// The feed finished its initial listing: the fleet is complete.
    Synced,
    /// The answer to a request to inspect one object (`y`).
    Inspected(Box<super::Inspected>),
    /// A chunk of the log stream asked for by request `request` (`L`).
    Log {
        request: u64,
        event: super::LogEvent,
    },
}

/// A batch of deltas: one tick of the simulator, or one burst of watch events.
pub type Batch = Vec<Delta>;
