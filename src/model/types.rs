//! The domain objects of an AI factory as the cockpit stores them: compact, interned,
//! referring to each other by index rather than by name.

use super::history::{Ring, Sample};
use super::intern::Sym;
use super::slab::Slab;
use crate::mig::{GpuModel, PlacedInstance};
use crate::quantity::Quantity;
pub use thin_vec::ThinVec;

/// Milliseconds on the feed's clock (wall clock for a cluster, simulated time for the demo).
pub type Ts = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GpuId(pub u32);
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodId(pub u32);
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantId(pub u32);
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QuotaId(pub u32);

/// `nvidia.com/mig.config.state` as mig-manager writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum MigConfigState {
    #[default]
    None,
    Pending,
    Rebooting,
    Success,
    Failed,
}

impl MigConfigState {
    pub fn parse(s: &str) -> Self {
        match s {
            "pending" => Self::Pending,
            "rebooting" => Self::Rebooting,
            "success" => Self::Success,
            "failed" => Self::Failed,
            _ => Self::None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "",
            Self::Pending => "pending",
            Self::Rebooting => "rebooting",
            Self::Success => "success",
            Self::Failed => "failed",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Node {
    pub name: Sym,
    pub labels: Vec<(Sym, Sym)>,
    pub ready: bool,
    pub cordoned: bool,
    /// The `fabrik.io/cordoned-by` annotation (empty: none).
    pub cordoned_by: Sym,
    pub gpu_model: Option<GpuModel>,
    /// Per resource (interned resource name), whole units.
    pub capacity: Vec<(Sym, i64)>,
    pub allocatable: Vec<(Sym, i64)>,
    pub mig_config: Sym,
    pub mig_state: MigConfigState,
    /// When `mig_state` last changed, for stuck-`pending` detection.
    pub mig_state_since: Ts,
    pub not_ready_since: Option<Ts>,
    pub created: Ts,
    /// GPUs on this node, in index order (maintained by the fleet).
    pub gpus: Vec<GpuId>,
    /// Derived: whole GPUs requested by pods bound to this node and not finished.
    pub gpus_allocated: u32,
    /// Derived: MIG instances requested by pods bound to this node.
    pub mig_allocated: u32,
    /// Derived: of those, per MIG resource (`nvidia.com/mig-1g.18gb`), how many the pods
    /// hold without the fleet knowing which instance: the device plugin does not say, and
    /// no node agent (or DRA, or the simulator) told it. They are held all the same.
    pub mig_unbound: Vec<(Sym, u32)>,
    /// Derived: GPU pods bound to this node and not finished.
    pub pods: u32,
    /// How the device plugin shares the node's GPUs (from GFD's labels).
    pub sharing: super::sharing::Sharing,
    /// Derived: replicas pods on this node hold (shared nodes only)...
    pub shares_held: u32,
    /// ...and of those, how many the fleet cannot place on a GPU (no agent, no PodResources).
    pub shares_unplaced: u32,
}

impl Node {
    pub fn label<'a>(&self, interner: &'a super::intern::Interner, key: &str) -> Option<&'a str> {
        let k = interner.get(key)?;
        self.labels.iter().find(|(lk, _)| *lk == k).map(|(_, v)| interner.resolve(*v))
    }
    pub fn gpu_count(&self) -> u32 {
        self.gpus.len() as u32
    }
    /// Replicas the node offers: physical GPUs without MIG × replicas; 0 when not shared.
    pub fn shares_total(&self, gpus: &Slab<GpuId, Gpu>) -> u32 {
        if !self.sharing.shared() {
            return 0;
        }
        let whole = self.gpus.iter().filter_map(|g| gpus.get(*g)).filter(|g| !g.mig_enabled).count() as u32;
        whole * u32::from(self.sharing.replicas)
    }
    /// MIG instances pods hold here without a known instance, all profiles together.
    pub fn mig_unbound_total(&self) -> u32 {
        self.mig_unbound.iter().map(|(_, n)| n).sum()
    }
    /// MIG instances of `resource` pods hold here without a known instance.
    pub fn mig_unbound_of(&self, resource: Sym) -> u32 {
        self.mig_unbound.iter().find(|(r, _)| *r == resource).map_or(0, |(_, n)| *n)
    }
}

#[derive(Clone, Debug)]
pub struct MigInstance {
    pub placement: PlacedInstance,
    pub uuid: Sym,
    /// Derived: the pod bound to this instance.
    pub pod: Option<PodId>,
    /// Engine activity, percent; `None` until a source measures it (or when it cannot).
    pub util: Option<u8>,
    pub mem_used_mib: u32,
    pub low_since: Option<Ts>,
    /// Derived: allocated and under the idle threshold for the whole window.
    pub idle_allocated: bool,
}

#[derive(Clone, Debug)]
pub struct Gpu {
    pub uuid: Sym,
    pub node: NodeId,
    pub index: u8,
    pub model: GpuModel,
    pub memory_mib: u32,
    pub mig_enabled: bool,
    /// A `Vec`, not a thin one: the GPUs view reads how many there are for each of its
    /// million rows, and a thin vector keeps that behind its pointer.
    pub instances: Vec<MigInstance>,
    pub last: Sample,
    pub history: Ring,
    pub last_sample_at: Option<Ts>,
    pub xid: Option<(u32, Ts)>,
    pub ecc_uncorrected: u32,
    pub low_since: Option<Ts>,
    /// Derived: pods bound to the whole GPU.
    pub pods: Vec<PodId>,
    /// Derived: allocated to a workload and under the idle threshold for the whole window.
    pub idle_allocated: bool,
    /// Derived: at or above the busy threshold now.
    pub busy: bool,
    /// Derived: its utilisation is measured (the last sample, stale or not, has one).
    pub measured: bool,
    /// DRA's alpha features on this GPU (partitions, capacity shares, taints); boxed and
    /// absent on most GPUs.
    pub dra: Option<Box<super::dra::GpuDra>>,
}

impl Gpu {
    /// MIG instances a pod is known to hold (bound); see [`crate::model::Fleet::gpu_mig_maybe_held`]
    /// for those that may be held without a known instance.
    pub fn mig_in_use(&self) -> u32 {
        self.instances.iter().filter(|i| i.pod.is_some()).count() as u32
    }
    pub fn allocated(&self) -> bool {
        !self.pods.is_empty() || self.instances.iter().any(|i| i.pod.is_some())
    }
    /// Whether the last telemetry sample is older than `stale_ms` (or there is none).
    pub fn telemetry_stale(&self, now: Ts, stale_ms: u64) -> bool {
        self.last_sample_at.is_none_or(|t| now.saturating_sub(t) > stale_ms)
    }
    pub fn mem_used_mib(&self) -> u32 {
        (self.memory_mib as u64 * self.last.mem_pct as u64 / 100) as u32
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Terminating,
    Unknown,
}

impl Phase {
    pub fn parse(s: &str) -> Self {
        match s {
            "Pending" => Self::Pending,
            "Running" => Self::Running,
            "Succeeded" => Self::Succeeded,
            "Failed" => Self::Failed,
            "Terminating" => Self::Terminating,
            _ => Self::Unknown,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Running => "Running",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
            Self::Terminating => "Terminating",
            Self::Unknown => "Unknown",
        }
    }
    /// Whether a pod bound to a node holds its devices there: until it has finished, as
    /// the cluster counts it. The kubelet's device manager allocates a pod's GPUs when it
    /// admits the pod, before any container starts, and DRA allocates claims when the pod
    /// is scheduled; `kubectl describe node` ("Allocated resources") and the scheduler count
    /// every non-terminated pod on the node. So a pod stuck Pending on its node (pulling an
    /// image, its devices not prepared) holds its GPUs, idle.
    pub fn holds_devices(self) -> bool {
        !self.finished()
    }
    pub fn finished(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

/// Who controls a pod: decides what a drain may do with it (kubectl drain semantics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Owner {
    None,
    ReplicaSet,
    StatefulSet,
    Job,
    DaemonSet,
    /// A static pod mirrored by the kubelet (`kubernetes.io/config.mirror`).
    Mirror,
    Other,
}

impl Owner {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "-",
            Self::ReplicaSet => "ReplicaSet",
            Self::StatefulSet => "StatefulSet",
            Self::Job => "Job",
            Self::DaemonSet => "DaemonSet",
            Self::Mirror => "Mirror",
            Self::Other => "Other",
        }
    }
}

/// A DRA claim of a pod and, once allocated, the device it got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DraClaim {
    /// The claim's name: generated per pod (a template's claims), so not interned.
    pub claim: Box<str>,
    pub device_class: Sym,
    pub count: u16,
    /// `driver/pool/device` of the allocation result, if allocated.
    pub allocated: Option<Sym>,
}

#[derive(Clone, Debug)]
pub struct Pod {
    pub namespace: Sym,
    pub name: Box<str>,
    pub tenant: TenantId,
    pub node: Option<NodeId>,
    pub phase: Phase,
    pub created: Ts,
    /// When the kubelet started it (`status.startTime`).
    pub started: Option<Ts>,
    pub owner: Owner,
    /// The controlling owner's name; empty without one.
    pub owner_name: Sym,
    pub app: Sym,
    pub empty_dir: bool,
    /// Whole GPUs requested (`nvidia.com/gpu`), or replicas on a shared node...
    pub gpus: u16,
    /// ...of `nvidia.com/gpu.shared` (a device-plugin config that renames its replicas).
    pub gpus_renamed: bool,
    /// MIG resources requested (`nvidia.com/mig-<profile>`): resource name, count.
    pub mig: ThinVec<(Sym, u16)>,
    pub dra: ThinVec<DraClaim>,
    /// The ResourceClaimTemplates its claims are made from (a ComputeDomain's channel).
    pub claim_templates: ThinVec<Sym>,
    /// The node the pod names, even before that node is known to the fleet.
    pub node_name: Sym,
    /// GPU uuids the pod is bound to, when known (agent, DRA or simulator)...
    pub gpu_uuids: ThinVec<Sym>,
    /// ...and those of them the fleet knows (derived, re-resolved when GPUs arrive), with
    /// those a node agent says the pod holds (device plugin).
    pub bound_gpus: ThinVec<GpuId>,
    /// MIG instance uuids the pod names (DRA or simulator)...
    pub mig_uuids: ThinVec<Sym>,
    /// ...with those a node agent says it holds (derived, re-resolved on every link).
    pub bound_mig: ThinVec<Sym>,
    /// Derived: per MIG resource, how many of the instances the pod holds the fleet cannot
    /// name (held, instance unknown); empty unless the pod holds devices on a known node.
    pub mig_unbound: ThinVec<(Sym, u16)>,
    /// Set while its deletion is under way (boxed: few pods are being deleted at once).
    pub deletion: Option<Box<super::delta::Deletion>>,
    /// A container the kubelet cannot start: `(reason, message)` (see `PodSpec`).
    pub container_waiting: Option<Box<(Box<str>, Box<str>)>>,
    /// Its containers' restarts (kubectl's RESTARTS).
    pub restarts: super::delta::Restarts,
}

impl Pod {
    /// A container of it waits out its restart back-off (CrashLoopBackOff).
    pub fn crash_looping(&self) -> bool {
        self.container_waiting.as_ref().is_some_and(|w| &*w.0 == "CrashLoopBackOff")
    }

    pub fn mig_count(&self) -> u32 {
        self.mig.iter().map(|(_, n)| *n as u32).sum()
    }
    pub fn requests_devices(&self) -> bool {
        self.gpus > 0 || !self.mig.is_empty() || !self.dra.is_empty()
    }
    pub fn dra_count(&self) -> u32 {
        self.dra.iter().map(|c| c.count as u32).sum()
    }
}

/// Where a quota comes from: decides how it is changed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum QuotaSource {
    /// A ResourceQuota `name` in `namespace`.
    ResourceQuota { namespace: Sym, name: Sym },
    /// A Kueue ClusterQueue flavor resource's nominalQuota.
    ClusterQueue { queue: Sym, flavor: Sym },
}

#[derive(Clone, Debug)]
pub struct Quota {
    pub tenant: TenantId,
    pub source: QuotaSource,
    /// e.g. `requests.nvidia.com/gpu`, `requests.nvidia.com/mig-1g.10gb`, `nvidia.com/gpu`.
    pub resource: Sym,
    pub hard: Quantity,
    /// As reported by the cluster (ResourceQuota status.used).
    pub used: Quantity,
    /// Opaque version for optimistic concurrency (resourceVersion on a cluster). Not
    /// interned: it changes with every write.
    pub version: Box<str>,
    /// Kueue ClusterQueue only (unset: no limit).
    pub borrowing_limit: Option<Quantity>,
    pub lending_limit: Option<Quantity>,
}

#[derive(Clone, Debug, Default)]
pub struct TenantUsage {
    /// Whole GPUs requested by the tenant's unfinished pods (pending included).
    pub requested_gpus: u32,
    /// Whole GPUs held by running pods (exclusively: replicas of a shared GPU are below).
    pub allocated_gpus: u32,
    /// Replicas of shared GPUs (time-slicing, MPS) held by running pods...
    pub allocated_shares: u32,
    /// ...and what they come to in GPUs, in thousandths (a replica of a GPU shared ×4 is 250)...
    pub share_milli: u32,
    /// ...of which held by a pod whose own processes have kept under the idle threshold for
    /// the window (idle-but-allocated, per share; only where a node agent places them).
    pub shares_idle: u32,
    /// Replicas held by pods the kubelet has started, and the sum of replicas × start time
    /// (ms) over them: share-seconds now = (started_shares × now − started_share_ms) / 1000.
    pub started_shares: u32,
    pub started_share_ms: u64,
    pub requested_mig: u32,
    pub allocated_mig: u32,
    /// Allocated devices (GPUs and MIG instances) at or above the busy threshold.
    pub busy: u32,
    /// Allocated devices idle for the whole window.
    pub idle_allocated: u32,
    /// Allocated devices whose utilisation is measured (their last sample has one, stale
    /// or not): `busy` and `idle_allocated` are counted among these only. The rest (no node agent or Prometheus, a device
    /// plugin pod whose GPU or instance is not known) is unknown, neither busy nor idle.
    pub measured: u32,
    pub pods: u32,
    pub pending_pods: u32,
    /// Running pods holding devices while a container crash-loops (CrashLoopBackOff), and
    /// the devices they hold (GPUs, instances, shares) and run nothing on between restarts.
    pub crash_looping: u32,
    pub crash_looping_devices: u32,
}

#[derive(Clone, Debug)]
pub struct Tenant {
    pub name: Sym,
    pub namespaces: Vec<Sym>,
    /// Where the tenant was recognised from (vcluster, kueue, label, namespace, sim).
    pub source: Sym,
    pub quotas: Vec<QuotaId>,
    pub usage: TenantUsage,
}

impl Tenant {
    /// Hard limit on whole GPUs, if any quota sets one.
    pub fn gpu_quota(&self, fleet_quotas: &Slab<QuotaId, Quota>, gpu_resources: &[Sym]) -> Option<i64> {
        let mut total: Option<i64> = None;
        for &q in &self.quotas {
            if let Some(q) = fleet_quotas.get(q)
                && gpu_resources.contains(&q.resource)
            {
                // Saturating: two quotas at the quantity cap (i64::MAX) are "no limit", not
                // an overflow.
                let sum = total.get_or_insert(0);
                *sum = sum.saturating_add(q.hard.value());
            }
        }
        total
    }
}

#[derive(Clone, Debug)]
pub struct Pdb {
    pub namespace: Sym,
    pub name: Sym,
    /// `matchLabels: {app: ...}`; the common case for GPU workloads.
    pub selector_app: Sym,
    pub disruptions_allowed: i32,
    pub current_healthy: i32,
    pub desired_healthy: i32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AlertKind {
    Xid(u32),
    EccUncorrected,
    NotReady,
    MigStuck,
    MigFailed,
    OverQuota,
    /// A DRA device taint on a GPU (the driver's health check, or a DeviceTaintRule).
    DeviceTaint,
    /// A ComputeDomain whose status is not Ready.
    DomainNotReady,
    /// A tenant with a namespace that no default-deny NetworkPolicy covers.
    NoDefaultDeny,
    /// A tenant holding part of a GPU another tenant holds part of.
    SharedGpu,
    /// The node's Cluster API Machine failed.
    MachineFailed,
    /// The node's Machine is unhealthy by its MachineHealthCheck, or being remediated.
    Remediating,
    /// The node's Metal3 BareMetalHost is in error (BMC, power, provisioning...).
    HostError,
    /// A tenant's running pods hold devices while a container crash-loops (CrashLoopBackOff).
    CrashLoop,
    /// A MachineHealthCheck stopped remediating: more Machines are unhealthy than it may
    /// remediate (`RemediationAllowed` False).
    RemediationBlocked,
}

impl AlertKind {
    /// A finding about how the factory is set up (isolation), not an incident: listed after
    /// the incidents, in the warning colour.
    pub fn is_posture(self) -> bool {
        matches!(self, Self::NoDefaultDeny | Self::SharedGpu)
    }

    pub fn label(self) -> String {
        match self {
            Self::Xid(c) => format!("XID {c}"),
            Self::EccUncorrected => "ECC".into(),
            Self::NotReady => "NotReady".into(),
            Self::MigStuck => "MIG stuck".into(),
            Self::MigFailed => "MIG failed".into(),
            Self::OverQuota => "over quota".into(),
            Self::DeviceTaint => "tainted".into(),
            Self::DomainNotReady => "domain NotReady".into(),
            Self::NoDefaultDeny => "netpol open".into(),
            Self::SharedGpu => "GPU shared".into(),
            Self::MachineFailed => "machine failed".into(),
            Self::Remediating => "remediating".into(),
            Self::HostError => "host error".into(),
            Self::RemediationBlocked => "remediation blocked".into(),
            Self::CrashLoop => "crash loop".into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AlertTarget {
    Node(NodeId),
    Gpu(GpuId),
    Tenant(TenantId),
    /// A ComputeDomain, `namespace/name`.
    Domain(Box<str>),
    /// A Cluster API MachineHealthCheck, `namespace/name`.
    HealthCheck(Box<str>),
}

#[derive(Clone, Debug)]
pub struct Alert {
    pub kind: AlertKind,
    pub target: AlertTarget,
    pub since: Ts,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Info => "Normal",
            Self::Warning => "Warning",
            Self::Error => "Error",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Event {
    pub ts: Ts,
    pub severity: Severity,
    /// Whoever writes an Event chooses its reason: not interned (the interner keeps every
    /// string for good), and at most [`super::fleet::EVENT_REASON_MAX`] bytes.
    pub reason: Box<str>,
    pub object: String,
    pub message: String,
}

/// Where a running or finished operation stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpState {
    Running,
    Blocked(String),
    Succeeded,
    Failed(String),
    Cancelled,
}

impl OpState {
    pub fn finished(&self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed(_) | Self::Cancelled)
    }
}

#[derive(Clone, Debug)]
pub struct OpStatus {
    pub id: u64,
    pub title: String,
    pub target: String,
    pub state: OpState,
    pub step: String,
    pub done: u32,
    pub total: u32,
    pub started: Ts,
    pub updated: Ts,
    pub log: Vec<String>,
}

/// Thresholds for derived facts; configurable, the defaults suit a demo and a real fleet.
#[derive(Clone, Copy, Debug)]
pub struct Thresholds {
    /// Under this utilisation a device counts as idle.
    pub idle_util_pct: u8,
    /// For this long before an allocated device counts as idle-but-allocated.
    pub idle_window_ms: u64,
    /// At or above this utilisation a device counts as busy.
    pub busy_util_pct: u8,
    /// A `pending` MIG config older than this is flagged as stuck.
    pub mig_stuck_ms: u64,
    /// Telemetry older than this is shown as stale, never as current.
    pub stale_ms: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            idle_util_pct: 5,
            idle_window_ms: 10 * 60 * 1000,
            busy_util_pct: 20,
            mig_stuck_ms: 5 * 60 * 1000,
            stale_ms: 60 * 1000,
        }
    }
}
