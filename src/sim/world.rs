//! The simulator's own truth and how it moves per tick. The cockpit never reads this
//! directly: it sees only the deltas the simulator emits.

use std::collections::BTreeMap;

use super::exec::RunningOp;
use crate::mig::{self, GpuModel, Layout, PlacedInstance};
use crate::model::*;
use crate::quantity::{Format, Quantity};
use crate::rng::Rng;

/// The simulated clock starts here (2026-05-28T...Z), so runs are identical.
pub const SIM_EPOCH_MS: u64 = 1_780_000_000_000;
/// Above this many GPUs, telemetry is streamed for a rolling subset per tick, as agents
/// stream only the nodes in view on a real fleet.
const TELEMETRY_PER_TICK: usize = 20_000;

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    pub nodes: usize,
    pub tick_ms: u64,
    /// Whether workloads arrive and finish on their own.
    pub churn: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self { seed: 42, nodes: 48, tick_ms: 1000, churn: true }
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
}

#[derive(Clone, Debug)]
pub(super) struct SNode {
    pub spec: NodeSpec,
    pub gpus: Vec<SGpu>,
    /// Stopped heartbeats: NotReady.
    pub dead: bool,
    /// mig-manager on this node wedges in `pending`.
    pub mig_wedged: bool,
    /// A MIG change being applied: (new layouts per GPU index, ticks left).
    pub mig_apply: Option<(Vec<(u8, Layout)>, u32)>,
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
    /// Index into `Sim::apps`.
    pub app: usize,
}

#[derive(Clone, Debug)]
pub(super) struct App {
    pub namespace: String,
    pub name: String,
    pub owner: Owner,
    pub gpus: u16,
    /// A MIG profile per model family instead of whole GPUs.
    pub mig: Option<&'static str>,
    pub dra: bool,
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
    pub(super) apps: Vec<App>,
    pub(super) tenants: Vec<STenant>,
    pub(super) quotas: Vec<QuotaSpec>,
    pub(super) pdbs: Vec<PdbSpec>,
    pub(super) ops: Vec<RunningOp>,
    pub(super) out: Vec<Delta>,
    telemetry_cursor: usize,
    sched_cursor: usize,
    pod_seq: u64,
    sts_hint: std::collections::HashMap<usize, u32>,
    app_of: std::collections::HashMap<String, usize>,
}

/// One pass over the pods per tick gives everything the controllers need.
#[derive(Default)]
struct Census {
    /// Unfinished, not terminating pods per app.
    live: Vec<u32>,
    /// Running pods per app.
    running: Vec<u32>,
    /// Pods with a timer running (starting, terminating, a job's duration).
    timed: Vec<String>,
    pending: Vec<String>,
}

const TENANTS: &[(&str, &[&str], &str)] = &[
    ("llm-pretrain", &["llm-pretrain"], "label"),
    ("llm-finetune", &["llm-finetune", "llm-finetune-dev"], "label"),
    ("inference-prod", &["inference-prod"], "kueue"),
    ("vision", &["vision"], "label"),
    ("speech", &["speech"], "label"),
    ("recsys", &["recsys"], "label"),
    ("research", &["vc-research"], "vcluster"),
    ("eval", &["eval"], "label"),
];

fn short(model: GpuModel) -> &'static str {
    match model {
        GpuModel::A100_40GB => "a100s",
        GpuModel::A100_80GB => "a100",
        GpuModel::H100_80GB => "h100",
        GpuModel::H200_141GB => "h200",
        GpuModel::B200 => "b200",
    }
}

/// The 1g / 2g / 3g profile names of a model family, for MIG workloads.
fn mig_profile_for(model: GpuModel, size: &str) -> Option<&'static str> {
    let table: &[(&str, &str)] = match model {
        GpuModel::A100_40GB => &[("1g", "1g.5gb"), ("2g", "2g.10gb"), ("3g", "3g.20gb")],
        GpuModel::A100_80GB | GpuModel::H100_80GB => &[("1g", "1g.10gb"), ("2g", "2g.20gb"), ("3g", "3g.40gb")],
        GpuModel::H200_141GB => &[("1g", "1g.18gb"), ("2g", "2g.35gb"), ("3g", "3g.71gb")],
        GpuModel::B200 => &[("1g", "1g.23gb"), ("2g", "2g.45gb"), ("3g", "3g.90gb")],
    };
    table.iter().find(|(s, _)| *s == size).map(|(_, p)| *p)
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
            apps: Vec::new(),
            tenants: Vec::new(),
            quotas: Vec::new(),
            pdbs: Vec::new(),
            ops: Vec::new(),
            out: Vec::new(),
            telemetry_cursor: 0,
            sched_cursor: 0,
            pod_seq: 0,
            sts_hint: Default::default(),
            app_of: Default::default(),
        };
        let n = cfg.nodes.max(1);
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
                dead: false,
                mig_wedged: false,
                mig_apply: None,
            };
            node.refresh_labels(i);
            sim.node_index.insert(name, sim.nodes.len());
            sim.nodes.push(node);
        }
        sim.rng = rng;
        sim.setup_tenants();
        sim.setup_mig_fault();
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

    fn setup_tenants(&mut self) {
        for (name, nss, source) in TENANTS {
            self.tenants.push(STenant {
                name: name.to_string(),
                namespaces: nss.iter().map(|s| s.to_string()).collect(),
                source: source.to_string(),
            });
        }
        let scale = (self.nodes.len() as f64 / 48.0).max(0.05);
        let r = |x: f64| ((x * scale).round() as u32).max(1);
        // The first argument is the tenant's index in TENANTS, for the reader.
        let app = |_tenant: usize, ns: &str, name: &str, owner: Owner, gpus: u16| App {
            namespace: ns.to_string(),
            name: name.to_string(),
            owner,
            gpus,
            mig: None,
            dra: false,
            empty_dir: false,
            replicas: 1,
            idle_share: 0.05,
            job_ticks: None,
            pdb_max_unavailable: None,
        };
        self.apps = vec![
            App {
                replicas: r(10.0),
                idle_share: 0.02,
                ..app(0, "llm-pretrain", "pretrain-llama-70b", Owner::StatefulSet, 8)
            },
            App {
                replicas: r(14.0),
                idle_share: 0.3,
                job_ticks: Some((120, 900)),
                ..app(1, "llm-finetune", "ft-mistral-lora", Owner::Job, 4)
            },
            App { replicas: r(6.0), idle_share: 0.5, ..app(1, "llm-finetune-dev", "ft-debug", Owner::ReplicaSet, 1) },
            App {
                replicas: r(40.0),
                idle_share: 0.08,
                pdb_max_unavailable: Some(1),
                ..app(2, "inference-prod", "vllm-llama3-8b", Owner::ReplicaSet, 1)
            },
            App {
                replicas: r(8.0),
                idle_share: 0.1,
                pdb_max_unavailable: Some(1),
                ..app(2, "inference-prod", "triton-embed", Owner::ReplicaSet, 2)
            },
            App {
                replicas: r(10.0),
                idle_share: 0.15,
                job_ticks: Some((60, 600)),
                ..app(3, "vision", "yolo-train", Owner::Job, 2)
            },
            App {
                replicas: r(70.0),
                idle_share: 0.1,
                mig: Some("1g"),
                ..app(4, "speech", "whisper-asr", Owner::ReplicaSet, 0)
            },
            App { replicas: r(6.0), idle_share: 0.2, mig: Some("3g"), ..app(4, "speech", "tts-train", Owner::Job, 0) },
            App { replicas: r(16.0), idle_share: 0.1, dra: true, ..app(5, "recsys", "ranker", Owner::ReplicaSet, 1) },
            App {
                replicas: r(14.0),
                idle_share: 0.6,
                empty_dir: true,
                ..app(6, "vc-research", "jupyter", Owner::None, 1)
            },
            App {
                replicas: r(8.0),
                idle_share: 0.05,
                job_ticks: Some((30, 300)),
                ..app(7, "eval", "eval-harness", Owner::Job, 1)
            },
            App {
                replicas: r(10.0),
                idle_share: 0.1,
                mig: Some("1g"),
                job_ticks: Some((30, 200)),
                ..app(7, "eval", "eval-mig", Owner::Job, 0)
            },
        ];
        self.app_of = self.apps.iter().enumerate().map(|(i, a)| (a.name.clone(), i)).collect();
        for a in &self.apps {
            if let Some(mu) = a.pdb_max_unavailable {
                self.pdbs.push(PdbSpec {
                    namespace: a.namespace.clone(),
                    name: format!("{}-pdb", a.name),
                    selector_app: a.name.clone(),
                    disruptions_allowed: 0,
                    current_healthy: 0,
                    desired_healthy: a.replicas.saturating_sub(mu) as i32,
                });
            }
        }
    }

    /// A NotReady node: its kubelet stopped posting status after its pods started.
    fn setup_not_ready(&mut self) {
        if self.nodes.len() > 7 {
            self.nodes[7].dead = true;
            self.nodes[7].spec.ready = false;
        }
    }

    /// A MIG config stuck in pending, with the operator's clients paused.
    fn setup_mig_fault(&mut self) {
        let n = self.nodes.len();
        if let Some(i) = (0..n).find(|&i| i % 12 == 11).or_else(|| (0..n).find(|&i| i % 12 == 5)) {
            let node = &mut self.nodes[i];
            node.mig_wedged = true;
            node.spec.mig_state = MigConfigState::Pending;
            node.spec.mig_state_since = Some(SIM_EPOCH_MS - 12 * 60_000);
            let model = node.spec.gpu_model.unwrap_or(GpuModel::H100_80GB);
            node.spec.mig_config =
                if matches!(model, GpuModel::H200_141GB) { "all-3g.71gb".into() } else { "all-balanced".into() };
            node.refresh_labels(i);
        }
    }

    /// Schedules workloads until the fleet is about as full as a busy factory.
    fn initial_fill(&mut self) {
        for a in 0..self.apps.len() {
            for _ in 0..self.apps[a].replicas {
                self.create_pod(a, true);
            }
        }
        let pending = self.census().pending;
        self.schedule(pending, usize::MAX, true);
        // Quotas from what was scheduled: most tenants have headroom, one is near, one over.
        let mut used: Vec<i64> = vec![0; self.tenants.len()];
        for p in self.pods.values() {
            if let Some(t) = self.tenant_of_ns(&p.spec.namespace) {
                used[t] += p.spec.gpus as i64 + p.spec.dra.iter().map(|c| c.count as i64).sum::<i64>();
            }
        }
        for (t, tenant) in self.tenants.iter().enumerate() {
            let u = used[t];
            let hard = match tenant.name.as_str() {
                "research" => (u * 3 / 4).max(1),
                "llm-finetune" => u + 1,
                "eval" | "speech" => u + 2,
                _ => u * 3 / 2 + 4,
            };
            let (source, resource) = if tenant.source == "kueue" {
                (
                    QuotaSourceSpec::ClusterQueue { queue: format!("cq-{}", tenant.name), flavor: "h100".into() },
                    "nvidia.com/gpu".to_string(),
                )
            } else {
                (
                    QuotaSourceSpec::ResourceQuota {
                        namespace: tenant.namespaces[0].clone(),
                        name: "gpu-quota".into(),
                    },
                    "requests.nvidia.com/gpu".to_string(),
                )
            };
            self.quotas.push(QuotaSpec {
                tenant: tenant.name.clone(),
                source,
                resource,
                hard: Quantity::from_int(hard, Format::DecimalSI),
                used: Quantity::from_int(u, Format::DecimalSI),
                version: "1".into(),
                borrowing_limit: None,
                lending_limit: None,
            });
            if tenant.name == "speech" {
                let mig_used = self
                    .pods
                    .values()
                    .filter(|p| p.spec.namespace == "speech")
                    .map(|p| p.spec.mig.iter().map(|(_, c)| *c as i64).sum::<i64>())
                    .sum::<i64>();
                self.quotas.push(QuotaSpec {
                    tenant: tenant.name.clone(),
                    source: QuotaSourceSpec::ResourceQuota { namespace: "speech".into(), name: "mig-quota".into() },
                    resource: "requests.nvidia.com/mig-1g.10gb".into(),
                    hard: Quantity::from_int(mig_used + 8, Format::DecimalSI),
                    used: Quantity::from_int(mig_used, Format::DecimalSI),
                    version: "1".into(),
                    borrowing_limit: None,
                    lending_limit: None,
                });
            }
        }
        // The hard limits above are sized on the tenant; what each quota uses is its own.
        let usage = self.quota_usage();
        for q in &mut self.quotas {
            q.used = Quantity::from_int(usage.get(&quota_key(q)).copied().unwrap_or(0), Format::DecimalSI);
        }
    }

    pub(super) fn tenant_of_ns(&self, ns: &str) -> Option<usize> {
        self.tenants.iter().position(|t| t.namespaces.iter().any(|n| n == ns))
    }

    /// Creates a pending pod of an app; `old` pods get a past creation time.
    pub(super) fn create_pod(&mut self, app: usize, old: bool) -> String {
        let a = self.apps[app].clone();
        self.pod_seq += 1;
        let name = match a.owner {
            Owner::StatefulSet => {
                // Ordinals are reused like a StatefulSet does; the hint keeps this linear.
                let mut i = self.sts_hint.get(&app).copied().unwrap_or(0);
                while self.pods.contains_key(&format!("{}/{}-{i}", a.namespace, a.name)) {
                    i += 1;
                }
                self.sts_hint.insert(app, i + 1);
                format!("{}-{i}", a.name)
            }
            Owner::None => format!(
                "{}-{}",
                a.name,
                ["alice", "bob", "chen", "dana", "eli", "fatima", "gus", "hana", "ivan", "jo"]
                    [(self.pod_seq % 10) as usize]
                    .to_string()
                    + &self.rng.hex(3)
            ),
            _ => format!("{}-{}-{}", a.name, self.rng.hex(5), self.rng.hex(5)),
        };
        let created = if old { self.now - self.rng.range(600, 5 * 86_400) * 1000 } else { self.now };
        let behaviour = if self.rng.chance(a.idle_share) {
            Behaviour::Idle
        } else if self.rng.chance(0.2) {
            Behaviour::Bursty
        } else {
            Behaviour::Busy
        };
        let ticks_left = a.job_ticks.map(|(lo, hi)| self.rng.range(lo as u64, hi as u64) as u32);
        let key = format!("{}/{}", a.namespace, name);
        let spec = PodSpec {
            namespace: a.namespace.clone(),
            name,
            node: None,
            phase: Phase::Pending,
            created,
            owner: a.owner,
            app: a.name.clone(),
            empty_dir: a.empty_dir,
            gpus: if a.dra { 0 } else { a.gpus },
            mig: Vec::new(),
            dra: if a.dra {
                vec![DraClaimSpec {
                    claim: format!("{}-gpu-{}", a.name, self.rng.hex(5)),
                    device_class: "gpu.nvidia.com".into(),
                    count: a.gpus,
                    allocated: None,
                }]
            } else {
                Vec::new()
            },
            bound_gpus: Vec::new(),
            bound_mig: Vec::new(),
            deletion: None,
        };
        self.pods.insert(
            key.clone(),
            SPod {
                spec,
                behaviour,
                ticks_left,
                terminating: None,
                starting: None,
                mig_profile: a.mig.map(str::to_string),
                app,
            },
        );
        key
    }

    /// Binds pending pods to free devices on ready, schedulable nodes.
    pub(super) fn schedule(&mut self, pending: Vec<String>, budget: usize, instant: bool) {
        let n = self.nodes.len();
        for key in pending.into_iter().take(budget) {
            let Some(pod) = self.pods.get(&key) else { continue };
            let want_gpus = pod.spec.gpus as usize + pod.spec.dra.iter().map(|c| c.count as usize).sum::<usize>();
            let want_mig = pod.mig_profile.clone();
            let mut placed = None;
            for step in 0..n {
                let ni = (self.sched_cursor + step) % n;
                let node = &self.nodes[ni];
                if node.dead || node.spec.cordoned || node.mig_apply.is_some() {
                    continue;
                }
                let model = node.spec.gpu_model.unwrap_or(GpuModel::H100_80GB);
                if let Some(size) = &want_mig {
                    let Some(prof) = mig_profile_for(model, size) else { continue };
                    let Some(pid) = mig::find_profile(model, prof) else { continue };
                    let found = node.gpus.iter().enumerate().find_map(|(gi, g)| {
                        g.spec
                            .instances
                            .iter()
                            .enumerate()
                            .find(|(ii, inst)| inst.placement.profile == pid && g.inst_owner[*ii].is_none())
                            .map(|(ii, _)| (gi, ii))
                    });
                    if let Some((gi, ii)) = found {
                        placed = Some((ni, vec![], Some((gi, ii, prof))));
                        break;
                    }
                } else if want_gpus > 0 {
                    let free: Vec<usize> = node
                        .gpus
                        .iter()
                        .enumerate()
                        .filter(|(_, g)| !g.spec.mig_enabled && g.owner.is_none())
                        .map(|(i, _)| i)
                        .collect();
                    if free.len() >= want_gpus {
                        placed = Some((ni, free[..want_gpus].to_vec(), None));
                        break;
                    }
                }
            }
            let Some((ni, gis, mig_slot)) = placed else { continue };
            self.sched_cursor = ni;
            let node_name = self.nodes[ni].spec.name.clone();
            let mut bound = Vec::new();
            for &gi in &gis {
                self.nodes[ni].gpus[gi].owner = Some(key.clone());
                bound.push((gi, self.nodes[ni].gpus[gi].spec.uuid.clone()));
            }
            let mut mig_uuid = None;
            if let Some((gi, ii, _)) = mig_slot {
                self.nodes[ni].gpus[gi].inst_owner[ii] = Some(key.clone());
                mig_uuid = Some(self.nodes[ni].gpus[gi].spec.instances[ii].uuid.clone());
            }
            let start_ticks = if instant { 0 } else { self.rng.range(2, 6) as u32 };
            let Some(pod) = self.pods.get_mut(&key) else { continue };
            pod.spec.node = Some(node_name.clone());
            pod.spec.bound_gpus = bound.iter().map(|(_, u)| u.clone()).collect();
            if let Some((_, _, prof)) = mig_slot {
                pod.spec.mig = vec![(format!("nvidia.com/mig-{prof}"), 1)];
            }
            if let Some(u) = mig_uuid {
                pod.spec.bound_mig = vec![u];
            }
            for c in pod.spec.dra.iter_mut() {
                c.allocated = bound.first().map(|(gi, _)| format!("gpu.nvidia.com/{node_name}/gpu-{gi}"));
            }
            if start_ticks == 0 {
                pod.spec.phase = Phase::Running;
            } else {
                pod.starting = Some(start_ticks);
            }
            if !instant {
                let spec = pod.spec.clone();
                self.out.push(Delta::PodUpsert(spec));
            }
        }
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
                owner: Owner::DaemonSet,
                app: "nvidia-device-plugin-daemonset".into(),
                empty_dir: false,
                gpus: 0,
                mig: vec![],
                dra: vec![],
                bound_gpus: vec![],
                bound_mig: vec![],
                deletion: None,
            }));
        }
        for p in self.pods.values() {
            out.push(Delta::PodUpsert(p.spec.clone()));
        }
        for q in &self.quotas {
            out.push(Delta::QuotaUpsert(q.clone()));
        }
        let running = self.census().running;
        self.update_pdbs(&running);
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

    fn telemetry_all(&mut self, out: &mut Vec<Delta>) {
        let mut batch = Vec::new();
        for ni in 0..self.nodes.len() {
            for gi in 0..self.nodes[ni].gpus.len() {
                batch.push(self.sample(ni, gi));
            }
        }
        out.push(Delta::Telemetry(batch));
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
        self.refresh_quota_usage();
        self.late_faults();
        let mut out = std::mem::take(&mut self.out);
        // Telemetry last so it reflects this tick's bindings.
        let total: usize = self.nodes.iter().map(|n| n.gpus.len()).sum();
        let mut batch = Vec::with_capacity(total.min(TELEMETRY_PER_TICK));
        let count = total.min(TELEMETRY_PER_TICK);
        let per_node = self.nodes.first().map(|n| n.gpus.len()).unwrap_or(8).max(1);
        for k in 0..count {
            let flat = (self.telemetry_cursor + k) % total.max(1);
            let (ni, gi) = (flat / per_node, flat % per_node);
            if ni < self.nodes.len() && gi < self.nodes[ni].gpus.len() && !self.nodes[ni].dead {
                batch.push(self.sample(ni, gi));
            }
        }
        self.telemetry_cursor = (self.telemetry_cursor + count) % total.max(1);
        out.push(Delta::Telemetry(batch));
        out
    }

    fn late_faults(&mut self) {
        // A double-bit ECC error appears half a minute in: the demo shows a live fault.
        if self.tick == 30 && self.nodes.len() > 20 {
            let g = &self.nodes[20].gpus[5];
            let uuid = g.spec.uuid.clone();
            let node = self.nodes[20].spec.name.clone();
            self.out.push(Delta::GpuFault { gpu_uuid: uuid.clone(), at: self.now, fault: GpuFault::Xid { code: 48 } });
            self.out.push(Delta::GpuFault {
                gpu_uuid: uuid,
                at: self.now,
                fault: GpuFault::EccUncorrected { count: 2 },
            });
            self.out.push(Delta::Event(EventSpec {
                ts: self.now,
                severity: Severity::Warning,
                reason: "GpuHealth".into(),
                object: node,
                message: "dcgm health check: GPU 5 memory errors".into(),
            }));
        }
    }

    fn census(&self) -> Census {
        let mut c = Census { live: vec![0; self.apps.len()], running: vec![0; self.apps.len()], ..Default::default() };
        for (k, p) in &self.pods {
            let a = p.app;
            if a < c.live.len() {
                if !p.spec.phase.finished() && p.terminating.is_none() {
                    c.live[a] += 1;
                }
                if p.spec.phase == Phase::Running {
                    c.running[a] += 1;
                }
            }
            if p.terminating.is_some()
                || p.starting.is_some()
                || (p.ticks_left.is_some() && p.spec.phase == Phase::Running)
            {
                c.timed.push(k.clone());
            }
            if p.spec.node.is_none() && p.spec.phase == Phase::Pending {
                c.pending.push(k.clone());
            }
        }
        c
    }

    fn advance_pods(&mut self, timed: Vec<String>) {
        for key in timed {
            let Some(p) = self.pods.get_mut(&key) else { continue };
            if let Some(t) = p.terminating.as_mut() {
                if *t <= 1 {
                    self.delete_pod(&key);
                } else {
                    *t -= 1;
                }
                continue;
            }
            if let Some(s) = p.starting.as_mut() {
                if *s <= 1 {
                    p.starting = None;
                    p.spec.phase = Phase::Running;
                    self.out.push(Delta::PodUpsert(p.spec.clone()));
                } else {
                    *s -= 1;
                }
                continue;
            }
            if p.spec.phase == Phase::Running
                && let Some(left) = p.ticks_left.as_mut()
            {
                if *left <= 1 {
                    p.ticks_left = None;
                    p.spec.phase = Phase::Succeeded;
                    p.terminating = Some(5);
                    let spec = p.spec.clone();
                    self.release(&key);
                    self.out.push(Delta::PodUpsert(spec));
                } else {
                    *left -= 1;
                }
            }
        }
    }

    fn churn(&mut self, live: &[u32]) {
        // Jobs arrive to replace finished ones; controllers keep their replica counts.
        for a in 0..self.apps.len() {
            let app = &self.apps[a];
            let live = live.get(a).copied().unwrap_or(0);
            let want = app.replicas;
            if live < want {
                let is_job = app.job_ticks.is_some();
                if !is_job || self.rng.chance(0.3) {
                    let key = self.create_pod(a, false);
                    if let Some(p) = self.pods.get(&key) {
                        self.out.push(Delta::PodUpsert(p.spec.clone()));
                    }
                }
            }
        }
    }

    /// Frees the devices a pod holds.
    pub(super) fn release(&mut self, key: &str) {
        let Some(p) = self.pods.get(key) else { return };
        let Some(node) = p.spec.node.clone() else { return };
        let Some(&ni) = self.node_index.get(&node) else { return };
        for g in self.nodes[ni].gpus.iter_mut() {
            if g.owner.as_deref() == Some(key) {
                g.owner = None;
            }
            for o in g.inst_owner.iter_mut() {
                if o.as_deref() == Some(key) {
                    *o = None;
                }
            }
        }
    }

    pub(super) fn delete_pod(&mut self, key: &str) {
        self.release(key);
        if let Some(p) = self.pods.remove(key) {
            if p.spec.owner == Owner::StatefulSet
                && let Some(&a) = self.app_of.get(&p.spec.app)
            {
                self.sts_hint.insert(a, 0);
            }
            self.out.push(Delta::PodRemove { namespace: p.spec.namespace, name: p.spec.name });
        }
    }

    /// Starts a graceful deletion, as the Eviction API does.
    pub(super) fn terminate_pod(&mut self, key: &str) {
        let Some(p) = self.pods.get_mut(key) else { return };
        if p.terminating.is_some() {
            return;
        }
        p.spec.phase = Phase::Terminating;
        // As the API server records an eviction: the pod's default grace period, no
        // finalizers; the simulated containers stop well within it.
        p.spec.deletion = Some(crate::model::Deletion { since: self.now, grace_secs: Some(30), ..Default::default() });
        p.terminating = Some(2);
        let spec = p.spec.clone();
        self.out.push(Delta::PodUpsert(spec));
    }

    fn sample(&mut self, ni: usize, gi: usize) -> TelemetrySample {
        let now = self.now;
        let tick = self.tick;
        let node = &self.nodes[ni];
        let g = &node.gpus[gi];
        let model = g.spec.model;
        let behaviour = |owner: &Option<String>| {
            owner
                .as_ref()
                .and_then(|k| self.pods.get(k))
                .filter(|p| p.spec.phase == Phase::Running)
                .map(|p| p.behaviour)
        };
        let mut rng = Rng::new(self.cfg.seed ^ (ni as u64) << 20 ^ (gi as u64) << 8 ^ now);
        let level = |b: Option<Behaviour>, rng: &mut Rng| -> (u8, u8) {
            match b {
                None => (0, 0),
                Some(Behaviour::Idle) => (rng.below(3) as u8, 25 + rng.below(10) as u8),
                Some(Behaviour::Busy) => (70 + rng.below(29) as u8, 60 + rng.below(30) as u8),
                Some(Behaviour::Bursty) => {
                    let phase = (tick / 7 + gi as u64) % 3;
                    if phase == 0 {
                        (5 + rng.below(20) as u8, 40)
                    } else {
                        (55 + rng.below(40) as u8, 70 + rng.below(10) as u8)
                    }
                }
            }
        };
        let mut instances = Vec::new();
        let (util, mem) = if g.spec.mig_enabled {
            let mut weighted = 0u32;
            let mut mem_mib = 0u64;
            for (ii, inst) in g.spec.instances.iter().enumerate() {
                let (u, m) = level(behaviour(&g.inst_owner[ii]), &mut rng);
                let p = mig::profile(model, inst.placement.profile);
                let used = p.memory_mib as u64 * m as u64 / 100;
                mem_mib += used;
                weighted += u as u32 * p.compute_slices as u32;
                instances.push(InstanceSample::new(inst.uuid.clone(), Some(u), used as u32));
            }
            ((weighted / 7) as u8, (mem_mib * 100 / model.memory_mib().max(1) as u64) as u8)
        } else {
            level(behaviour(&g.owner), &mut rng)
        };
        let tdp = model.tdp_watts() as u32;
        let idle_w = tdp / 8;
        let power = idle_w + (tdp - idle_w) * util as u32 / 100 + rng.below(8) as u32;
        let temp = 30 + util as u32 * 45 / 100 + rng.below(3) as u32;
        let uuid = g.spec.uuid.clone();
        let g = &mut self.nodes[ni].gpus[gi];
        g.util = util;
        g.mem = mem;
        TelemetrySample {
            gpu_uuid: uuid,
            at: now,
            sample: Sample::new(util, mem, power as u16, temp as u8),
            instances,
            node_gpu: None,
            allocated: None,
            peers: None,
            processes: None,
        }
    }

    /// PDB status as the disruption controller computes it.
    fn update_pdbs(&mut self, running: &[u32]) -> Vec<usize> {
        let mut changed = Vec::new();
        for (i, pdb) in self.pdbs.iter_mut().enumerate() {
            let healthy = self.app_of.get(&pdb.selector_app).and_then(|a| running.get(*a)).copied().unwrap_or(0) as i32;
            let allowed = (healthy - pdb.desired_healthy).max(0);
            if healthy != pdb.current_healthy || allowed != pdb.disruptions_allowed {
                pdb.current_healthy = healthy;
                pdb.disruptions_allowed = allowed;
                changed.push(i);
            }
        }
        changed
    }

    pub(super) fn update_pdbs_emit(&mut self, running: &[u32]) {
        for i in self.update_pdbs(running) {
            self.out.push(Delta::PdbUpsert(self.pdbs[i].clone()));
        }
    }

    fn refresh_quota_usage(&mut self) {
        if !self.tick.is_multiple_of(5) {
            return;
        }
        let usage = self.quota_usage();
        for qi in 0..self.quotas.len() {
            let used = usage.get(&quota_key(&self.quotas[qi])).copied().unwrap_or(0);
            if used != self.quotas[qi].used.value() {
                let q = &mut self.quotas[qi];
                q.used = Quantity::from_int(used, Format::DecimalSI);
                self.out.push(Delta::QuotaUpsert(q.clone()));
            }
        }
    }

    /// What the quota controllers count, in one pass: a ResourceQuota its namespace's
    /// unfinished pods, per exact resource (`requests.nvidia.com/gpu` whole GPUs, a MIG
    /// resource its instances, `<class>.deviceclass.resource.k8s.io/devices` DRA devices); a
    /// Kueue ClusterQueue its tenant's, per resource name.
    fn quota_usage(&self) -> std::collections::HashMap<(String, String), i64> {
        let mut usage: std::collections::HashMap<(String, String), i64> = Default::default();
        for p in self.pods.values().filter(|p| !p.spec.phase.finished()) {
            let ns = &p.spec.namespace;
            let tenant = self.tenant_of_ns(ns).map(|t| format!("cq-{}", self.tenants[t].name));
            let mut add = |res: String, n: i64| {
                *usage.entry((ns.clone(), format!("requests.{res}"))).or_default() += n;
                if let Some(cq) = &tenant {
                    *usage.entry((cq.clone(), res)).or_default() += n;
                }
            };
            add("nvidia.com/gpu".into(), p.spec.gpus as i64);
            for (r, c) in &p.spec.mig {
                add(r.clone(), *c as i64);
            }
            for c in &p.spec.dra {
                *usage
                    .entry((ns.clone(), format!("{}.deviceclass.resource.k8s.io/devices", c.device_class)))
                    .or_default() += c.count as i64;
            }
        }
        usage
    }

    /// mig-manager: applies a pending layout after a few ticks, unless it is wedged.
    fn advance_mig(&mut self) {
        for ni in 0..self.nodes.len() {
            let Some((layouts, left)) = self.nodes[ni].mig_apply.take() else { continue };
            if self.nodes[ni].mig_wedged {
                self.nodes[ni].mig_apply = Some((layouts, left));
                continue;
            }
            if left > 1 {
                self.nodes[ni].mig_apply = Some((layouts, left - 1));
                continue;
            }
            let mut rng = self.rng.clone();
            let node = &mut self.nodes[ni];
            let model = node.spec.gpu_model.unwrap_or(GpuModel::H100_80GB);
            for (index, layout) in &layouts {
                if let Some(g) = node.gpus.iter_mut().find(|g| g.spec.index == *index) {
                    let (mig_enabled, instances) = instances_for(&mut rng, model, layout);
                    g.spec.mig_enabled = mig_enabled;
                    g.inst_owner = vec![None; instances.len()];
                    g.spec.instances = instances;
                    g.owner = None;
                }
            }
            self.rng = rng;
            node.spec.mig_state = MigConfigState::Success;
            node.spec.mig_state_since = None;
            node.refresh_labels(ni);
            let name = node.spec.name.clone();
            let cfg = node.spec.mig_config.clone();
            self.out.push(Delta::NodeUpsert(node.spec.clone()));
            for g in &node.gpus {
                self.out.push(Delta::GpuUpsert(g.spec.clone()));
            }
            self.out.push(Delta::Event(EventSpec {
                ts: self.now,
                severity: Severity::Info,
                reason: "MigConfigApplied".into(),
                object: name,
                message: format!("mig-manager applied {cfg}: nvidia.com/mig.config.state=success"),
            }));
        }
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
        let mut labels = vec![
            ("kubernetes.io/hostname".to_string(), self.spec.name.clone()),
            ("topology.kubernetes.io/zone".to_string(), format!("zone-{}", (b'a' + (i % 3) as u8) as char)),
            ("fabrik.io/rack".to_string(), format!("r{:02}", i / 8)),
            ("nvidia.com/gpu.present".to_string(), "true".into()),
            ("nvidia.com/gpu.product".to_string(), model.product_label().into()),
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
        self.spec.labels = labels;
        let caps = crate::mig::capacity(
            model,
            self.gpus.iter().map(|g| (g.spec.mig_enabled, g.spec.instances.iter().map(|i| i.placement).collect())),
        );
        let mut capacity = vec![("cpu".to_string(), 192)];
        capacity.extend(caps);
        self.spec.allocatable = if paused {
            capacity.iter().map(|(r, v)| (r.clone(), if r.starts_with("nvidia.com/") { 0 } else { *v })).collect()
        } else {
            capacity.clone()
        };
        self.spec.capacity = capacity;
    }
}

/// Where a quota's usage is kept in [`Sim::quota_usage`]: (namespace or queue, resource).
fn quota_key(q: &QuotaSpec) -> (String, String) {
    match &q.source {
        QuotaSourceSpec::ResourceQuota { namespace, .. } => (namespace.clone(), q.resource.clone()),
        QuotaSourceSpec::ClusterQueue { queue, .. } => (queue.clone(), q.resource.clone()),
    }
}
