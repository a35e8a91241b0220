//! The simulator's own truth: its state, the fleet a seed builds, the initial listing and
//! the order of a tick. The cockpit never reads this directly: it sees only the deltas the
//! simulator emits. Set-up is in `setup`, pods' lives in `pods`, per-tick movement in
//! `tick`, samples in `telemetry`.

use std::collections::BTreeMap;

use super::exec::RunningOp;
use super::sharing::{DeviceSharing, SharingStrategy, sharing_labels, whole_gpu_resource};
use crate::mig::{self, GpuModel, Layout, PlacedInstance};
use crate::model::*;
use crate::rng::Rng;

/// The simulated clock starts here (2026-05-28T...Z), so runs are identical.
pub const SIM_EPOCH_MS: u64 = 1_780_000_000_000;

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    pub nodes: usize,
    pub tick_ms: u64,
    /// Whether workloads arrive and finish on their own.
    pub churn: bool,
    /// Every Nth node whose GPUs are not MIG-partitioned has its GPUs shared by the device
    /// plugin (time-slicing ×4, MPS ×2, time-slicing ×4 renamed to `nvidia.com/gpu.shared`,
    /// in turn); 0: none.
    pub sharing_every: u32,
    /// Kubernetes 1.34's alpha DRA shapes and NVIDIA ComputeDomains on a few GPUs and nodes
    /// (a partitionable GPU, one shared by capacity, one tainted; two domains): see `dra`.
    pub dra_alpha: bool,
    /// Tenants beyond the eight (`team-0000`, …): each a namespace with one ReplicaSet of
    /// ten one-GPU pods and a quota, so the scale harness has a factory's thousands of
    /// tenants. 0: the eight alone.
    pub teams: u32,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self { seed: 42, nodes: 48, tick_ms: 1000, churn: true, sharing_every: 0, dra_alpha: false, teams: 0 }
    }
}

#[derive(Clone, Debug)]
pub(super) struct SGpu {
    pub spec: GpuSpec,
    pub owner: Option<String>,
    /// Pod key per MIG instance.
    pub inst_owner: Vec<Option<String>>,
    pub util: u8,
    pub mem: u8,
    /// On a shared node: the pod key of each replica handed out (a pod holding two
    /// replicas of this GPU is here twice); never more than the node's replicas.
    pub holders: Vec<String>,
}

#[derive(Clone, Debug)]
pub(super) struct SNode {
    pub spec: NodeSpec,
    pub gpus: Vec<SGpu>,
    /// The device plugin shares the GPUs (time-slicing, MPS).
    pub share: Option<DeviceSharing>,
    /// Stopped heartbeats: NotReady.
    pub dead: bool,
    /// mig-manager on this node wedges in `pending`.
    pub mig_wedged: bool,
    /// A MIG change being applied: (new layouts per GPU index, ticks left).
    pub mig_apply: Option<(Vec<(u8, Layout)>, u32)>,
    /// When fabrik last wrote `nvidia.com/mig.config` (managedFields, in a cluster).
    pub config_written: Option<Ts>,
    /// When mig-manager last wrote `nvidia.com/mig.config.state`.
    pub state_written: Option<Ts>,
    /// `<clusterUUID>.<cliqueID>` of its NVLink domain (GFD's `nvidia.com/gpu.clique`).
    pub clique: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Behaviour {
    Busy,
    Idle,
    Bursty,
}

#[derive(Clone, Debug)]
pub(super) struct SPod {
    pub spec: PodSpec,
    pub behaviour: Behaviour,
    /// Jobs finish after this many ticks.
    pub ticks_left: Option<u32>,
    /// Ticks until a terminating pod is gone.
    pub terminating: Option<u32>,
    /// Ticks until a bound pod is Running (image pull, start-up).
    pub starting: Option<u32>,
    /// MIG profile name the pod wants, if any.
    pub mig_profile: Option<String>,
    /// Index into `Sim::workloads`.
    pub workload: usize,
}

/// A workload template (a Deployment, StatefulSet, Job or bare pods) whose replicas the
/// simulated controllers keep alive.
#[derive(Clone, Debug)]
pub(super) struct Workload {
    pub namespace: String,
    pub name: String,
    pub owner: Owner,
    pub gpus: u16,
    /// A MIG profile per model family instead of whole GPUs.
    pub mig: Option<&'static str>,
    /// Replicas of shared GPUs instead of whole GPUs (`gpus` of them): the strategy the pods
    /// select by `nvidia.com/gpu.sharing-strategy`, and whether they ask for the renamed
    /// resource `nvidia.com/gpu.shared`.
    pub share: Option<(SharingStrategy, bool)>,
    pub dra: bool,
    /// Its claims use an alpha DRA feature (a partition, a share of a GPU by capacity).
    pub alpha: Option<super::dra::AlphaAsk>,
    pub empty_dir: bool,
    pub replicas: u32,
    pub idle_share: f64,
    pub job_ticks: Option<(u32, u32)>,
    pub pdb_max_unavailable: Option<u32>,
}

#[derive(Clone, Debug)]
pub(super) struct STenant {
    pub name: String,
    pub namespaces: Vec<String>,
    pub source: String,
}

pub struct Sim {
    pub(super) cfg: SimConfig,
    pub(super) rng: Rng,
    pub(super) now: Ts,
    pub(super) tick: u64,
    pub(super) nodes: Vec<SNode>,
    pub(super) node_index: BTreeMap<String, usize>,
    pub(super) pods: BTreeMap<String, SPod>,
    pub(super) workloads: Vec<Workload>,
    pub(super) tenants: Vec<STenant>,
    /// Each tenant's namespaces, to its index in `tenants` (thousands of teams at scale).
    pub(super) ns_tenant: std::collections::HashMap<String, usize>,
    pub(super) quotas: Vec<QuotaSpec>,
    pub(super) pdbs: Vec<PdbSpec>,
    pub(super) ops: Vec<RunningOp>,
    /// The mig-parted config's named entries fabrik added (the GPU operator's ConfigMap).
    pub(super) mig_parted: BTreeMap<String, String>,
    pub(super) out: Vec<Delta>,
    pub(super) telemetry_cursor: usize,
    pub(super) sched_cursor: usize,
    pub(super) pod_seq: u64,
    pub(super) sts_hint: std::collections::HashMap<usize, u32>,
    /// The last FailedScheduling message sent per pending pod (an event only when it changes,
    /// as the scheduler's are aggregated).
    pub(super) sched_said: std::collections::HashMap<String, String>,
    pub(super) workload_of: std::collections::HashMap<String, usize>,
    pub(super) dra: super::dra::DraAlpha,
    /// `pod-deletion-cost` written on pods (by key), for a scale-down's choice.
    pub(super) deletion_cost: BTreeMap<String, i32>,
    /// Jobs a reclaim suspended (`namespace/name`).
    pub(super) suspended_jobs: std::collections::BTreeSet<String>,
    /// ClusterQueues a hold (or a resume) set `stopPolicy` on.
    pub(super) queue_policy: BTreeMap<String, crate::ops::StopPolicy>,
    /// Kueue Workloads as last sent (`namespace/name`), and those deactivated.
    pub(super) kueue_sent: BTreeMap<String, KueueWorkload>,
    /// Per Workload fabrik (or the demo's start) deactivated: since when (`None`: active
    /// again, reactivated at `kueue_on`).
    pub(super) kueue_off: BTreeMap<String, Option<Ts>>,
    pub(super) kueue_on: BTreeMap<String, Ts>,
    /// The Metal3 BareMetalHosts under the nodes (`namespace/name`), as the
    /// baremetal-operator keeps them.
    pub(super) hosts: BTreeMap<String, BareMetalHost>,
}

fn short(model: GpuModel) -> &'static str {
    match model {
        GpuModel::A100_40GB => "a100s",
        GpuModel::A100_80GB => "a100",
        GpuModel::H100_80GB => "h100",
        GpuModel::H200_141GB => "h200",
        GpuModel::B200 => "b200",
    }
}

impl Sim {
    pub fn new(cfg: SimConfig) -> Self {
        let mut rng = Rng::new(cfg.seed);
        let now = SIM_EPOCH_MS;
        let mut sim = Sim {
            cfg: cfg.clone(),
            rng: rng.clone(),
            now,
            tick: 0,
            nodes: Vec::new(),
            node_index: BTreeMap::new(),
            pods: BTreeMap::new(),
            workloads: Vec::new(),
            tenants: Vec::new(),
            ns_tenant: Default::default(),
            quotas: Vec::new(),
            pdbs: Vec::new(),
            ops: Vec::new(),
            mig_parted: BTreeMap::new(),
            out: Vec::new(),
            telemetry_cursor: 0,
            sched_cursor: 0,
            pod_seq: 0,
            sts_hint: Default::default(),
            sched_said: Default::default(),
            workload_of: Default::default(),
            dra: Default::default(),
            deletion_cost: BTreeMap::new(),
            suspended_jobs: Default::default(),
            queue_policy: BTreeMap::new(),
            kueue_sent: BTreeMap::new(),
            kueue_off: BTreeMap::new(),
            kueue_on: BTreeMap::new(),
            hosts: BTreeMap::new(),
        };
        let n = cfg.nodes.max(1);
        // Shared nodes are counted among the nodes that are not MIG-partitioned, so that
        // sharing never takes the factory's MIG nodes away.
        let (mut whole_nodes, mut shared_nodes) = (0u32, 0usize);
        for i in 0..n {
            // Half H100, a quarter H200, a quarter A100-80GB; a B200 pool on big fleets.
            let model = match i % 8 {
                0 | 2 | 4 | 6 => GpuModel::H100_80GB,
                1 | 5 => GpuModel::H200_141GB,
                3 => GpuModel::A100_80GB,
                _ => {
                    if n >= 200 {
                        GpuModel::B200
                    } else {
                        GpuModel::A100_80GB
                    }
                }
            };
            // About one node in six is MIG-partitioned (mixed strategy).
            let mig = i % 12 == 5 || i % 12 == 11;
            let share = if mig {
                None
            } else {
                whole_nodes += 1;
                (cfg.sharing_every > 0 && whole_nodes.is_multiple_of(cfg.sharing_every)).then(|| {
                    shared_nodes += 1;
                    DeviceSharing::nth(shared_nodes - 1)
                })
            };
            let layout = if !mig {
                "all-disabled"
            } else if i % 24 == 5 {
                "all-balanced"
            } else {
                match model {
                    GpuModel::A100_40GB => "all-1g.5gb",
                    GpuModel::A100_80GB | GpuModel::H100_80GB => "all-1g.10gb",
                    GpuModel::H200_141GB => "all-1g.18gb",
                    GpuModel::B200 => "all-1g.23gb",
                }
            };
            let name = format!("{}-{:04}", short(model), i);
            let created = now - rng.range(3, 200) * 86_400_000;
            let mut gpus = Vec::new();
            let lay = mig::named_config(model, layout).unwrap_or(Layout::Disabled);
            for g in 0..8u8 {
                let (mig_enabled, instances) = instances_for(&mut rng, model, &lay);
                gpus.push(SGpu {
                    spec: GpuSpec {
                        uuid: rng.uuid("GPU"),
                        node: name.clone(),
                        index: g,
                        model,
                        memory_mib: model.memory_mib(),
                        mig_enabled,
                        instances: instances.clone(),
                    },
                    owner: None,
                    inst_owner: vec![None; instances.len()],
                    util: 0,
                    mem: 0,
                    holders: Vec::new(),
                });
            }
            let mut node = SNode {
                spec: NodeSpec {
                    name: name.clone(),
                    labels: Vec::new(),
                    ready: true,
                    cordoned: false,
                    cordoned_by: String::new(),
                    gpu_model: Some(model),
                    capacity: Vec::new(),
                    allocatable: Vec::new(),
                    mig_config: layout.to_string(),
                    mig_state: MigConfigState::Success,
                    mig_state_since: None,
                    ready_since: None,
                    created,
                },
                gpus,
                share,
                dead: false,
                mig_wedged: false,
                mig_apply: None,
                config_written: None,
                state_written: None,
                clique: None,
            };
            node.refresh_labels(i);
            sim.node_index.insert(name, sim.nodes.len());
            sim.nodes.push(node);
        }
        sim.rng = rng;
        sim.setup_tenants();
        sim.kueue_setup();
        sim.setup_mig_fault();
        if cfg.dra_alpha {
            sim.setup_dra_alpha();
        }
        sim.initial_fill();
        sim.setup_not_ready();
        sim
    }

    pub fn now(&self) -> Ts {
        self.now
    }

    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// The nodes and their GPUs as the seed built them (for `fabrik sim --kubeconfig`,
    /// which plays them against a real API server).
    pub fn node_inventory(&self) -> Vec<(NodeSpec, Vec<GpuSpec>)> {
        self.nodes.iter().map(|n| (n.spec.clone(), n.gpus.iter().map(|g| g.spec.clone()).collect())).collect()
    }

    /// Everything the cockpit needs to know at start: the initial listing.
    pub fn initial_deltas(&mut self) -> Vec<Delta> {
        let mut out = vec![Delta::Clock(self.now)];
        for t in &self.tenants {
            out.push(Delta::TenantUpsert(TenantSpec {
                name: t.name.clone(),
                namespaces: t.namespaces.clone(),
                source: t.source.clone(),
            }));
        }
        let namespaces = self.tenants.iter().flat_map(|t| &t.namespaces);
        for (i, ns) in namespaces.enumerate() {
            let enforce = super::pod_security_level(i).map(str::to_string);
            out.push(Delta::PodSecurity { namespace: ns.clone(), enforce });
        }
        for n in &self.nodes {
            out.push(Delta::NodeUpsert(n.spec.clone()));
            for g in &n.gpus {
                out.push(Delta::GpuUpsert(g.spec.clone()));
            }
        }
        for n in &self.nodes {
            // The GPU operator's DaemonSet pod on every node: drains must leave it alone.
            out.push(Delta::PodUpsert(PodSpec {
                namespace: "gpu-operator".into(),
                name: format!("nvidia-device-plugin-{}", &n.spec.name),
                node: Some(n.spec.name.clone()),
                phase: Phase::Running,
                created: n.spec.created,
                started: Some(n.spec.created),
                owner: Owner::DaemonSet,
                owner_name: "nvidia-device-plugin-daemonset".into(),
                app: "nvidia-device-plugin-daemonset".into(),
                empty_dir: false,
                gpus: 0,
                gpus_renamed: false,
                mig: vec![],
                dra: vec![],
                claim_templates: Vec::new(),
                bound_gpus: vec![],
                bound_mig: vec![],
                deletion: None,
                container_waiting: None,
                restarts: Default::default(),
            }));
        }
        for p in self.pods.values() {
            out.push(Delta::PodUpsert(p.spec.clone()));
        }
        for q in &self.quotas {
            out.push(Delta::QuotaUpsert(q.clone()));
        }
        out.extend(super::setup::gitops_marks(&self.quotas));
        out.extend(super::setup::netpols(&self.tenants));
        out.extend(super::setup::machines(self.nodes.iter().map(|n| &n.spec)));
        if self.hosts.is_empty() {
            self.hosts =
                super::setup::hosts(self.nodes.iter().map(|n| &n.spec)).into_iter().map(|h| (h.key(), h)).collect();
        }
        out.extend(self.hosts.values().map(|h| Delta::HostUpsert(h.clone())));
        let running = self.census().running;
        self.update_pdbs(&running);
        self.dra_sync();
        self.kueue_sync();
        out.append(&mut self.out);
        for p in &self.pdbs {
            out.push(Delta::PdbUpsert(p.clone()));
        }
        // Warm history: an old first sample, so idle GPUs are already known to be idle,
        // then a minute of samples so charts have a shape from the first frame.
        let total_gpus: usize = self.nodes.iter().map(|n| n.gpus.len()).sum();
        let warm = if total_gpus <= 20_000 { 40 } else { 1 };
        let start = self.now;
        self.now = start - 30 * 60_000;
        self.telemetry_all(&mut out);
        for i in (0..warm).rev() {
            self.now = start - i * self.cfg.tick_ms;
            self.telemetry_all(&mut out);
        }
        self.now = start;
        for n in &self.nodes {
            if let Some(g) = n.gpus.iter().find(|_| n.spec.name.ends_with("0009") || n.spec.name.ends_with("0002")) {
                out.push(Delta::GpuFault {
                    gpu_uuid: g.spec.uuid.clone(),
                    at: start - 4 * 60_000,
                    fault: GpuFault::Xid { code: 79 },
                });
                break;
            }
        }
        out.push(Delta::Feed { source: "simulator".into(), state: FeedState::Live });
        out.push(Delta::Synced);
        out
    }

    /// Advances the factory by one tick and returns what changed.
    pub fn step(&mut self) -> Vec<Delta> {
        self.tick += 1;
        self.now += self.cfg.tick_ms;
        self.out.push(Delta::Clock(self.now));
        // One pass over the pods feeds every controller this tick. PDB status comes first,
        // so evictions later in the tick count against it until the next census.
        let census = self.census();
        self.update_pdbs_emit(&census.running);
        self.advance_pods(census.timed);
        if self.cfg.churn {
            self.churn(&census.live);
        }
        self.schedule(census.pending, 64, false);
        self.advance_ops();
        self.advance_mig();
        self.advance_hosts();
        self.dra_sync();
        self.refresh_quota_usage();
        if self.tick.is_multiple_of(5) {
            self.kueue_sync();
        }
        self.late_faults();
        let mut out = std::mem::take(&mut self.out);
        // Telemetry last so it reflects this tick's bindings.
        out.push(Delta::Telemetry(self.telemetry_rolling()));
        out
    }
}

/// Instances with fresh uuids for a layout, placed by the planner.
pub(super) fn instances_for(rng: &mut Rng, model: GpuModel, layout: &Layout) -> (bool, Vec<MigInstanceSpec>) {
    match layout {
        Layout::Disabled => (false, Vec::new()),
        Layout::Enabled(profiles) => {
            let placed: Vec<PlacedInstance> = mig::plan(model, profiles).unwrap_or_default();
            (true, placed.into_iter().map(|p| MigInstanceSpec { placement: p, uuid: rng.uuid("MIG") }).collect())
        }
    }
}

impl SNode {
    /// Labels and capacity as GFD, the device plugin and mig-manager publish them.
    pub(super) fn refresh_labels(&mut self, i: usize) {
        let model = self.spec.gpu_model.unwrap_or(GpuModel::H100_80GB);
        let paused = matches!(self.spec.mig_state, MigConfigState::Pending);
        let deploy = if paused { "paused-for-mig-change" } else { "true" };
        // The product (`-SHARED` on a shared node), replicas and strategy, as GFD writes them.
        let share = self.share.as_ref();
        let mut gfd = sharing_labels(share, model.product_label());
        let product = gfd.remove(0).1;
        let mut labels = vec![
            ("kubernetes.io/hostname".to_string(), self.spec.name.clone()),
            ("topology.kubernetes.io/zone".to_string(), format!("zone-{}", (b'a' + (i % 3) as u8) as char)),
            ("fabrik.io/rack".to_string(), format!("r{:02}", i / 8)),
            ("nvidia.com/gpu.present".to_string(), "true".into()),
            ("nvidia.com/gpu.product".to_string(), product),
            ("nvidia.com/gpu.count".to_string(), self.gpus.len().to_string()),
            ("nvidia.com/gpu.memory".to_string(), model.memory_mib().to_string()),
            ("nvidia.com/mig.capable".to_string(), "true".into()),
            ("nvidia.com/mig.strategy".to_string(), "mixed".into()),
            ("nvidia.com/mig.config".to_string(), self.spec.mig_config.clone()),
            ("nvidia.com/mig.config.state".to_string(), self.spec.mig_state.as_str().into()),
        ];
        for c in ["device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm"] {
            labels.push((format!("nvidia.com/gpu.deploy.{c}"), deploy.into()));
        }
        labels.push(("nvidia.com/gpu.deploy.mig-manager".to_string(), "true".into()));
        labels.extend(gfd.into_iter().map(|(k, v)| (k.to_string(), v)));
        if let Some(c) = &self.clique {
            labels.push((crate::cluster::labels::GPU_CLIQUE.to_string(), c.clone()));
        }
        self.spec.labels = labels;
        let caps = crate::mig::capacity(
            model,
            self.gpus.iter().map(|g| (g.spec.mig_enabled, g.spec.instances.iter().map(|i| i.placement).collect())),
        );
        let mut capacity = vec![("cpu".to_string(), 192)];
        // Whole GPUs are advertised as replicas on a shared node (the resource renamed or not).
        capacity.extend(caps.into_iter().map(|(r, n)| {
            if r == crate::cluster::labels::GPU_RESOURCE {
                let (r, n) = whole_gpu_resource(share, n);
                (r.to_string(), n)
            } else {
                (r, n)
            }
        }));
        self.spec.allocatable = if paused {
            capacity.iter().map(|(r, v)| (r.clone(), if r.starts_with("nvidia.com/") { 0 } else { *v })).collect()
        } else {
            capacity.clone()
        };
        self.spec.capacity = capacity;
    }
}
