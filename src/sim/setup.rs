//! How a seed sets the world up: tenants and their workloads, quotas sized on what the
//! first fill scheduled, PDBs, and the scripted faults (a wedged mig-manager, a NotReady
//! node, a double-bit ECC error half a minute in).

use super::tick::quota_key;
use super::world::{SIM_EPOCH_MS, STenant, Sim, Workload};
use crate::mig::GpuModel;
use crate::model::*;
use crate::quantity::{Format, Quantity};

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

impl Sim {
    pub(super) fn setup_tenants(&mut self) {
        for (name, nss, source) in TENANTS {
            self.tenants.push(STenant {
                name: name.to_string(),
                namespaces: nss.iter().map(|s| s.to_string()).collect(),
                source: source.to_string(),
            });
        }
        for t in 0..self.config().teams {
            let name = format!("team-{t:04}");
            self.tenants.push(STenant { name: name.clone(), namespaces: vec![name], source: "label".into() });
        }
        for (i, t) in self.tenants.iter().enumerate() {
            for ns in &t.namespaces {
                self.ns_tenant.insert(ns.clone(), i);
            }
        }
        let scale = (self.nodes.len() as f64 / 48.0).max(0.05);
        let r = |x: f64| ((x * scale).round() as u32).max(1);
        // The first argument is the tenant's index in TENANTS, for the reader.
        let workload = |_tenant: usize, ns: &str, name: &str, owner: Owner, gpus: u16| Workload {
            namespace: ns.to_string(),
            name: name.to_string(),
            owner,
            gpus,
            mig: None,
            share: None,
            dra: false,
            alpha: None,
            empty_dir: false,
            replicas: 1,
            idle_share: 0.05,
            job_ticks: None,
            pdb_max_unavailable: None,
        };
        self.workloads = vec![
            Workload {
                replicas: r(10.0),
                idle_share: 0.02,
                ..workload(0, "llm-pretrain", "pretrain-llama-70b", Owner::StatefulSet, 8)
            },
            Workload {
                replicas: r(14.0),
                idle_share: 0.3,
                job_ticks: Some((120, 900)),
                ..workload(1, "llm-finetune", "ft-mistral-lora", Owner::Job, 4)
            },
            Workload {
                replicas: r(6.0),
                idle_share: 0.5,
                ..workload(1, "llm-finetune-dev", "ft-debug", Owner::ReplicaSet, 1)
            },
            Workload {
                replicas: r(40.0),
                idle_share: 0.08,
                pdb_max_unavailable: Some(1),
                ..workload(2, "inference-prod", "vllm-llama3-8b", Owner::ReplicaSet, 1)
            },
            Workload {
                replicas: r(8.0),
                idle_share: 0.1,
                pdb_max_unavailable: Some(1),
                ..workload(2, "inference-prod", "triton-embed", Owner::ReplicaSet, 2)
            },
            Workload {
                replicas: r(10.0),
                idle_share: 0.15,
                job_ticks: Some((60, 600)),
                ..workload(3, "vision", "yolo-train", Owner::Job, 2)
            },
            Workload {
                replicas: r(70.0),
                idle_share: 0.1,
                mig: Some("1g"),
                ..workload(4, "speech", "whisper-asr", Owner::ReplicaSet, 0)
            },
            Workload {
                replicas: r(6.0),
                idle_share: 0.2,
                mig: Some("3g"),
                ..workload(4, "speech", "tts-train", Owner::Job, 0)
            },
            Workload {
                replicas: r(16.0),
                idle_share: 0.1,
                dra: true,
                ..workload(5, "recsys", "ranker", Owner::ReplicaSet, 1)
            },
            Workload {
                replicas: r(14.0),
                idle_share: 0.6,
                empty_dir: true,
                ..workload(6, "vc-research", "jupyter", Owner::None, 1)
            },
            Workload {
                replicas: r(8.0),
                idle_share: 0.05,
                job_ticks: Some((30, 300)),
                ..workload(7, "eval", "eval-harness", Owner::Job, 1)
            },
            Workload {
                replicas: r(10.0),
                idle_share: 0.1,
                mig: Some("1g"),
                job_ticks: Some((30, 200)),
                ..workload(7, "eval", "eval-mig", Owner::Job, 0)
            },
        ];
        // The teams, after the eight's workloads so a factory without them is unchanged.
        for t in 0..self.config().teams {
            let ns = format!("team-{t:04}");
            self.workloads.push(Workload {
                replicas: 10,
                idle_share: 0.1,
                ..workload(8 + t as usize, &ns, &format!("{ns}-train"), Owner::ReplicaSet, 1)
            });
        }
        // Replicas of shared GPUs, after the others so a factory without them is unchanged.
        let shared = self.shared_workloads();
        self.workloads.extend(shared);
        self.workload_of = self.workloads.iter().enumerate().map(|(i, a)| (a.name.clone(), i)).collect();
        for a in &self.workloads {
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
    pub(super) fn setup_not_ready(&mut self) {
        if self.nodes.len() > 7 {
            self.nodes[7].dead = true;
            self.nodes[7].spec.ready = false;
        }
    }

    /// A MIG config stuck in pending, with the operator's clients paused.
    pub(super) fn setup_mig_fault(&mut self) {
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
    pub(super) fn initial_fill(&mut self) {
        for a in 0..self.workloads.len() {
            for _ in 0..self.workloads[a].replicas {
                self.create_pod(a, true);
            }
        }
        let pending = self.census().pending;
        self.schedule(pending, usize::MAX, true);
        // Quotas from what was scheduled: most tenants have headroom, one is near, one over.
        let mut used: Vec<i64> = vec![0; self.tenants.len()];
        for p in self.pods.values() {
            // The renamed resource is not `nvidia.com/gpu`: no GPU quota counts it.
            if let Some(t) = self.tenant_of_ns(&p.spec.namespace).filter(|_| !self.asks_renamed(p)) {
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
        self.ns_tenant.get(ns).copied()
    }

    pub(super) fn late_faults(&mut self) {
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
}

/// The demo's quotas as a factory keeps them: the first tenant's ResourceQuota in an Argo CD
/// application, every Kueue ClusterQueue in a Flux Kustomization (the previews then warn).
pub(super) fn gitops_marks(quotas: &[QuotaSpec]) -> Vec<Delta> {
    use crate::model::gitops::{self, ARGO_TRACKING_ID, FLUX_KS_NAME};
    let mut out = Vec::new();
    let mut argo = false;
    for q in quotas {
        let (object, owner) = match &q.source {
            QuotaSourceSpec::ResourceQuota { namespace, name } if !argo => {
                argo = true;
                let id = format!("gpu-quotas:/ResourceQuota:{namespace}/{name}");
                (
                    gitops::key("resourcequota", Some(namespace), name),
                    GitOpsOwner::detect([], [(ARGO_TRACKING_ID, id.as_str())]),
                )
            }
            QuotaSourceSpec::ClusterQueue { queue, .. } => (
                gitops::key("clusterqueue", None, queue),
                GitOpsOwner::detect([(FLUX_KS_NAME, "kueue-queues"), (gitops::FLUX_KS_NAMESPACE, "flux-system")], []),
            ),
            QuotaSourceSpec::ResourceQuota { .. } => continue,
        };
        out.push(Delta::Managed { object, owner });
    }
    out
}

/// The demo's NetworkPolicies: a default deny (ingress and egress) in every namespace of
/// most tenants, ingress only for `recsys`, none for the vCluster tenant `research` and for
/// `eval` — the two the isolation audit then names.
pub(super) fn netpols(tenants: &[super::world::STenant]) -> Vec<Delta> {
    let mut out = Vec::new();
    for t in tenants {
        if matches!(t.name.as_str(), "research" | "eval") {
            continue;
        }
        let egress = t.name != "recsys";
        for ns in &t.namespaces {
            out.push(Delta::NetPolUpsert(NetPolicySpec {
                namespace: ns.clone(),
                name: "default-deny".into(),
                all_pods: true,
                ingress: PolicyDir { isolates: true, allows_all: false },
                egress: PolicyDir { isolates: egress, allows_all: false },
                ..Default::default()
            }));
        }
    }
    out
}

/// The MachineDeployment of a demo node: one per GPU model (`gpu-prod-h100`), as factories
/// keep a pool per kind of host.
fn deployment_of(n: &NodeSpec) -> String {
    let model = n.gpu_model.map_or("gpu", GpuModel::name).to_ascii_lowercase();
    format!("gpu-prod-{model}")
}

/// The demo's nodes as Cluster API Machines of cluster `gpu-prod`, each owned by its GPU
/// model's MachineDeployment and MachineSet: a NotReady node is one a MachineHealthCheck
/// found unhealthy and its MachineSet is remediating. Then the objects above them: the
/// Cluster, its KubeadmControlPlane (its machines are not GPU nodes, so only counted), the
/// MachineDeployments and MachineSets with their replicas as the Machines are, and one
/// MachineHealthCheck over the workers.
pub(super) fn machines<'a>(nodes: impl Iterator<Item = &'a NodeSpec>) -> Vec<Delta> {
    use std::collections::BTreeMap;
    let ns = "capi-gpu-prod";
    let mut out = Vec::new();
    // Per MachineDeployment: machines, ready, oldest.
    let mut pools: BTreeMap<String, (u32, u32, Ts)> = BTreeMap::new();
    let mut targets = Vec::new();
    for n in nodes {
        let down = !n.ready;
        let md = deployment_of(n);
        let p = pools.entry(md.clone()).or_insert((0, 0, n.created));
        p.0 += 1;
        p.1 += u32::from(n.ready);
        p.2 = p.2.min(n.created);
        let name = format!("{}-m", n.name);
        targets.push(name.clone());
        out.push(Delta::MachineUpsert(Machine {
            namespace: ns.into(),
            name,
            cluster: "gpu-prod".into(),
            phase: "Running".into(),
            node: Some(n.name.clone()),
            provider_id: format!("metal3://{ns}/{}-host/{}-m3m", n.name, n.name),
            failure: None,
            unhealthy: down
                .then(|| "UnhealthyNode: Condition Ready on node is reporting status False for more than 5m0s".into()),
            remediating: down.then(|| "WaitingForRemediation: MachineHealthCheck asked for remediation".into()),
            deleting: false,
            created: n.created,
            set: Some(format!("{md}-7c5d9")),
            deployment: Some(md),
            control_plane: None,
            version: "v1.34.1".into(),
        }));
    }
    let oldest = pools.values().map(|p| p.2).min().unwrap_or_default();
    let (all, ready) = pools.values().fold((0, 0), |(a, r), p| (a + p.0, r + p.1));
    let object = |kind, name: &str, created| CapiObject {
        kind,
        namespace: ns.into(),
        name: name.into(),
        cluster: "gpu-prod".into(),
        version: "v1.34.1".into(),
        created,
        ..Default::default()
    };
    let cp = Replicas { desired: Some(3), current: Some(3), ready: Some(3), available: Some(3), up_to_date: Some(3) };
    let workers = Replicas {
        desired: Some(all),
        current: Some(all),
        ready: Some(ready),
        available: Some(ready),
        up_to_date: Some(all),
    };
    out.push(Delta::CapiUpsert(CapiObject {
        phase: "Provisioned".into(),
        owner: Some("gpu-prod-cp".into()),
        replicas: Some(cp),
        workers: Some(workers),
        why: (ready < all).then(|| format!("NotAvailable: {} of {all} workers not ready", all - ready)),
        ..object(CapiKind::Cluster, "gpu-prod", oldest)
    }));
    out.push(Delta::CapiUpsert(CapiObject {
        replicas: Some(cp),
        ..object(CapiKind::ControlPlane, "gpu-prod-cp", oldest)
    }));
    for (md, (n, r, created)) in &pools {
        let reps = Replicas {
            desired: Some(*n),
            current: Some(*n),
            ready: Some(*r),
            available: Some(*r),
            up_to_date: Some(*n),
        };
        let why = (r < n).then(|| format!("NotAvailable: {} of {n} machines not available", n - r));
        let sick = (r < n).then(|| "Remediating".to_string()).into_iter().collect::<Vec<_>>();
        out.push(Delta::CapiUpsert(CapiObject {
            phase: "Running".into(),
            replicas: Some(reps),
            why: why.clone(),
            doing: sick.clone(),
            ..object(CapiKind::MachineDeployment, md, *created)
        }));
        out.push(Delta::CapiUpsert(CapiObject {
            owner: Some(md.clone()),
            replicas: Some(reps),
            why,
            doing: sick,
            ..object(CapiKind::MachineSet, &format!("{md}-7c5d9"), *created)
        }));
    }
    // maxUnhealthy 40%: remediation goes on while few are sick.
    let allowed = (all * 2 / 5).saturating_sub(all - ready);
    out.push(Delta::CapiUpsert(CapiObject {
        health: Some(HealthCounts {
            expected: Some(all),
            healthy: Some(ready),
            remediations_allowed: Some(allowed),
            targets,
            blocked: false,
        }),
        version: String::new(),
        ..object(CapiKind::MachineHealthCheck, "gpu-prod-workers", oldest)
    }));
    out
}

/// The demo's Metal3 BareMetalHosts, one under each node (its Machine's providerID names
/// it): provisioned and on; the NotReady node's host is in a power management error, so its
/// screen answers "hardware" down the chain node → Machine → host. And two under no node: an
/// available spare, and one the operator cannot register.
pub(super) fn hosts<'a>(nodes: impl Iterator<Item = &'a NodeSpec>) -> Vec<BareMetalHost> {
    let mut out: Vec<BareMetalHost> = nodes
        .enumerate()
        .map(|(i, n)| {
            let down = !n.ready;
            BareMetalHost {
                namespace: "capi-gpu-prod".into(),
                name: format!("{}-host", n.name),
                uid: format!("0b0e7a11-0000-4000-8000-{i:012}"),
                state: "provisioned".into(),
                operational: if down { "error" } else { "OK" }.into(),
                error_type: if down { "power management error".into() } else { String::new() },
                error_message: if down {
                    "Failed to get power state for node: Redfish connection to the BMC timed out".into()
                } else {
                    String::new()
                },
                powered_on: !down,
                online: true,
                consumer: format!("Metal3Machine {}-m3m", n.name),
                reboot_pending: false,
                inspect_pending: false,
                inspect_start: String::new(),
                inspect_end: String::new(),
                hardware: Some(Hardware {
                    system: "Supermicro 821GE".into(),
                    cpu_model: "Xeon 8480+".into(),
                    cpus: 224,
                    ram_mib: 2048 * 1024,
                    nics: 10,
                    nic_gbps: 400,
                    disks: 8,
                }),
                deleting: false,
            }
        })
        .collect();
    // Two hosts under no node: a spare the operator has inspected and keeps off, ready for a
    // Machine, and one it cannot register because its BMC refuses the credentials.
    let spare = |name: &str| BareMetalHost {
        namespace: "capi-gpu-prod".into(),
        name: name.into(),
        uid: format!("0b0e7a11-0000-4000-9000-{:012}", name.len()),
        online: false,
        ..BareMetalHost::default()
    };
    out.push(BareMetalHost {
        state: "available".into(),
        operational: "OK".into(),
        hardware: out.first().and_then(|h| h.hardware.clone()),
        ..spare("spare-h100-01")
    });
    out.push(BareMetalHost {
        state: "registering".into(),
        operational: "error".into(),
        error_type: "registration error".into(),
        error_message: "Failed to get power state for node: HTTP 401 Unauthorized from the BMC: check the \
                        credentials Secret spare-h100-02-bmc"
            .into(),
        ..spare("spare-h100-02")
    });
    out
}
