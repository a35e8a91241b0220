//! Kubernetes 1.34's alpha DRA shapes in the demo factory ([`SimConfig::dra_alpha`], on for
//! `fabrik demo` only), as the kube feed would report them from a cluster (protocols.md §5):
//!
//! * a GPU partitionable by shared counters (the NVIDIA driver's dynamic MIG), one
//!   partition of it held by a pod's claim of class `mig.nvidia.com`;
//! * a GPU shared by capacity (`allowMultipleAllocations`) by three claims of 20 GiB each;
//! * a GPU its driver tainted after Xid 79 (`gpu.nvidia.com/xid=79:NoExecute`);
//! * two ComputeDomains (IMEX over multi-node NVLink): `nvl-train` (4 nodes, Ready) and
//!   `nvl-eval` (1 of 2 nodes ready, NotReady), their nodes labelled with their clique; the
//!   worker on nvl-eval's NotReady node is bound and waits for its channel (the kubelet's
//!   FailedPrepareDynamicResources).
//!
//! The shapes sit on GPUs of nodes that are neither MIG-partitioned nor shared nor a
//! scripted fault; the ordinary scheduler and mig-manager leave those GPUs alone. The
//! partition placements and their counters are shared with `fabrik sim --dra-alpha`.
//!
//! [`SimConfig::dra_alpha`]: super::SimConfig::dra_alpha

use std::collections::BTreeMap;

use super::world::{SIM_EPOCH_MS, Sim, Workload};
use crate::cluster::labels;
use crate::mig::{self, GpuModel, PlacedInstance, ProfileId};
use crate::model::*;
use crate::rng::Rng;

/// The `<clusterUUID>` part of the NVLink cliques both simulators label nodes with
/// (`nvidia.com/gpu.clique=<clusterUUID>.<cliqueID>`).
pub const NVLINK_CLUSTER: &str = "5c0f7e2a-91d4-4b6e-8a3f-2d7c6b1e9f40";

/// What one claim of the GPU shared by capacity consumes of its memory.
pub const SHARE_BYTES: i64 = 20 << 30;

/// The driver's taint of a GPU that fell off the bus.
pub const XID_TAINT_KEY: &str = "gpu.nvidia.com/xid";

/// The profiles the NVIDIA driver offers as dynamic MIG partitions: 1g, 2g, 3g and 7g
/// (neither `+me` nor the 1g with double memory, nor 4g).
pub fn partition_profiles(model: GpuModel) -> Vec<ProfileId> {
    mig::profile_ids(model)
        .filter(|id| {
            let p = mig::profile(model, *id);
            !p.media_extensions && matches!((p.compute_slices, p.memory_slices), (1, 1) | (2, 2) | (3, 4) | (7, 8))
        })
        .collect()
}

/// Every placement of [`partition_profiles`]: one partition device each.
pub fn partition_placements(model: GpuModel) -> Vec<PlacedInstance> {
    partition_profiles(model)
        .into_iter()
        .flat_map(|id| mig::profile(model, id).starts.iter().map(move |&start| PlacedInstance { profile: id, start }))
        .collect()
}

/// The DRA device name of a partition: `gpu-<i>-mig-<profile without dots>-<giProfileId>-<start>`.
pub fn partition_device(model: GpuModel, gpu: u8, p: &PlacedInstance) -> String {
    let prof = mig::profile(model, p.profile);
    format!("gpu-{gpu}-mig-{}-{}-{}", prof.name.replace(['.', '+'], ""), prof.gi_profile_id, p.start)
}

/// The `memory` a GPU's counter set holds, in MiB: the GPU's memory, or more where profile
/// sizes are nominal and partitions that fit by memory slices hold more together (two
/// 3g.71gb on an H200 hold more than its 144384 MiB), so that memory slices alone decide
/// what fits, as on the GPU.
pub fn counter_memory_mib(model: GpuModel) -> u64 {
    let placements = partition_placements(model);
    // Most memory over sets of partitions without a shared slice, by slice mask.
    let mut best: [Option<u64>; 256] = [None; 256];
    best[0] = Some(0);
    let mut most = 0;
    for mask in 0..256usize {
        let Some(have) = best[mask] else { continue };
        most = most.max(have);
        for p in &placements {
            let m = usize::from(p.memory_mask(model));
            if mask & m == 0 {
                let v = have + u64::from(mig::profile(model, p.profile).memory_mib);
                best[mask | m] = Some(best[mask | m].map_or(v, |b: u64| b.max(v)));
            }
        }
    }
    most.max(u64::from(model.memory_mib()))
}

/// Of each partition profile, how many of its placements a new claim could get beside the
/// partitions `held` (all of their memory slices and their memory still in the counters).
pub fn partition_fits(model: GpuModel, held: &[PlacedInstance]) -> Vec<CounterFit> {
    let used = held.iter().fold(0u8, |m, p| m | p.memory_mask(model));
    let mem_left = counter_memory_mib(model)
        .saturating_sub(held.iter().map(|p| u64::from(mig::profile(model, p.profile).memory_mib)).sum());
    let mut out: Vec<CounterFit> = partition_profiles(model)
        .into_iter()
        .map(|id| {
            let p = mig::profile(model, id);
            let fits = p
                .starts
                .iter()
                .filter(|&&start| PlacedInstance { profile: id, start }.memory_mask(model) & used == 0)
                .filter(|_| u64::from(p.memory_mib) <= mem_left)
                .count();
            CounterFit { profile: p.name.to_string(), fits: fits as u16, offered: p.starts.len() as u16 }
        })
        .collect();
    out.sort_by(|a, b| a.profile.cmp(&b.profile));
    out
}

/// How a workload's pods get their devices through the alpha features.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AlphaAsk {
    /// A partition of the partitionable GPU (claim class `mig.nvidia.com`).
    Partition,
    /// [`SHARE_BYTES`] of the memory of the GPU shared by capacity.
    Capacity,
    /// A worker of ComputeDomain `k`: [`WORKER_GPUS`] whole GPUs on one of its nodes whose
    /// IMEX daemon is Ready, and a claim from the domain's channel template (no GPU).
    Domain(usize),
}

/// The GPUs a ComputeDomain's worker holds on its node (GPUs 0 and 1, kept for it).
pub(super) const WORKER_GPUS: usize = 2;

/// Where the shapes are and what was sent about them.
#[derive(Clone, Debug, Default)]
pub(super) struct DraAlpha {
    /// (node, GPU) of the partitionable GPU, the partition its claim gets and its uuid.
    pub part: Option<(usize, usize)>,
    pub part_at: Option<PlacedInstance>,
    pub part_uuid: String,
    /// (node, GPU) shared by capacity.
    pub shared: Option<(usize, usize)>,
    /// (node, GPU) with the driver's taint.
    pub tainted: Option<(usize, usize)>,
    pub domains: Vec<ComputeDomainSpec>,
    /// Per domain, its nodes (indexes).
    pub domain_nodes: Vec<Vec<usize>>,
    /// DeviceTaintRules fabrik wrote (a GPU taint operation): name → (GPU uuid, taint).
    pub rules: BTreeMap<String, (String, DeviceTaint)>,
    sent_part: Option<GpuSpec>,
    sent: BTreeMap<String, GpuDra>,
    domains_sent: bool,
}

impl DraAlpha {
    /// GPUs the ordinary scheduler and mig-manager must leave alone.
    pub(super) fn reserved(&self, node: usize, gpu: usize) -> bool {
        [self.part, self.shared, self.tainted].contains(&Some((node, gpu)))
            || (gpu < WORKER_GPUS && self.domain_nodes.iter().flatten().any(|&n| n == node))
    }

    /// The GPU indexes on `node` that carry a shape.
    pub(super) fn gpus_on(&self, node: usize) -> Vec<u8> {
        [self.part, self.shared, self.tainted]
            .into_iter()
            .flatten()
            .filter(|(n, _)| *n == node)
            .map(|(_, g)| g as u8)
            .collect()
    }
}

impl Sim {
    /// Picks the nodes and GPUs, adds the two workloads and the domains, labels the cliques.
    /// Runs before the first fill, so no ordinary pod lands on a reserved GPU.
    pub(super) fn setup_dra_alpha(&mut self) {
        let n = self.nodes.len();
        // Not MIG, not shared, not a scripted fault (NotReady node 7, Xid 79 on node 2 or 9,
        // the ECC error on node 20, the wedged mig-manager).
        let eligible = |i: usize| {
            let node = &self.nodes[i];
            node.share.is_none()
                && !node.mig_wedged
                && node.gpus.iter().all(|g| !g.spec.mig_enabled)
                && ![2, 7, 9, 20].contains(&i)
        };
        let order: Vec<usize> = (12.min(n)..n).chain(0..12.min(n)).filter(|&i| eligible(i)).collect();
        let mut rng = Rng::new(self.cfg.seed ^ 0xd7a_a1fa);
        if let Some(&a) = order.first() {
            let model = self.nodes[a].spec.gpu_model.unwrap_or(GpuModel::H100_80GB);
            // The pod's claim gets the 3g partition in the upper half (slices 4-7).
            let three =
                partition_placements(model).into_iter().find(|p| mig::profile(model, p.profile).memory_slices == 4);
            self.dra.part = Some((a, 0));
            self.dra.part_at = three.map(|p| PlacedInstance { start: 4, ..p });
            self.dra.part_uuid = rng.uuid("MIG");
        }
        if let Some(&b) = order.get(1) {
            self.dra.shared = Some((b, 0));
            let last = self.nodes[b].gpus.len().saturating_sub(1);
            self.dra.tainted = Some((b, last));
        }
        let workload = |ns: &str, name: &str, replicas, alpha| Workload {
            namespace: ns.to_string(),
            name: name.to_string(),
            owner: Owner::ReplicaSet,
            gpus: 1,
            mig: None,
            share: None,
            dra: true,
            alpha: Some(alpha),
            empty_dir: false,
            replicas,
            idle_share: 0.1,
            job_ticks: None,
            pdb_max_unavailable: None,
        };
        if self.dra.part_at.is_some() {
            self.workloads.push(workload("speech", "asr-dynmig", 1, AlphaAsk::Partition));
        }
        if self.dra.shared.is_some() {
            self.workloads.push(workload("inference-prod", "embed-capacity", 3, AlphaAsk::Capacity));
        }
        // The domains: nvl-train on the next 4 nodes, nvl-eval on the 2 after (fewer where the
        // fleet is small), each an NVLink clique.
        let created = SIM_EPOCH_MS - 2 * 3_600_000;
        let specs = [("llm-pretrain", "nvl-train", 4usize, 1u32, 2usize), ("eval", "nvl-eval", 2, 2, 6)];
        for (namespace, name, want, clique_no, from) in specs {
            let members: Vec<usize> = order.iter().skip(from).take(want).copied().collect();
            if members.is_empty() {
                continue;
            }
            let clique = format!("{NVLINK_CLUSTER}.{clique_no}");
            let nodes: Vec<DomainNode> = members
                .iter()
                .enumerate()
                .map(|(k, &i)| DomainNode {
                    name: self.nodes[i].spec.name.clone(),
                    // nvl-eval's second IMEX daemon is not up.
                    status: if name == "nvl-eval" && k == 1 { "NotReady" } else { "Ready" }.into(),
                    clique: clique.clone(),
                })
                .collect();
            let ready = nodes.len() == want && nodes.iter().all(|d| d.status == "Ready");
            for &i in &members {
                self.nodes[i].clique = Some(clique.clone());
                self.nodes[i].refresh_labels(i);
            }
            self.dra.domains.push(ComputeDomainSpec {
                namespace: namespace.into(),
                name: name.into(),
                num_nodes: want as u32,
                status: if ready { "Ready" } else { "NotReady" }.into(),
                nodes,
                claim_template: format!("{name}-channel"),
                created,
            });
            // Its workers, one per node (a StatefulSet, as a training job's would be).
            let k = self.dra.domains.len() - 1;
            self.dra.domain_nodes.push(members);
            self.workloads.push(Workload {
                owner: Owner::StatefulSet,
                gpus: WORKER_GPUS as u16,
                dra: false,
                replicas: want as u32,
                ..workload(namespace, &format!("{name}-worker"), 0, AlphaAsk::Domain(k))
            });
        }
        self.workload_of = self.workloads.iter().enumerate().map(|(i, a)| (a.name.clone(), i)).collect();
    }

    /// Places a worker of domain `k` on the first of its nodes that has no worker yet (those
    /// whose IMEX daemon is Ready first); none fits: it waits, Pending. On a node whose IMEX
    /// daemon is not Ready it is bound, but the driver cannot prepare its channel: it stays
    /// Pending and the kubelet says so (FailedPrepareDynamicResources), as on a cluster.
    fn place_worker(&mut self, key: &str, k: usize, instant: bool) {
        let (Some(d), Some(members)) = (self.dra.domains.get(k), self.dra.domain_nodes.get(k)) else { return };
        let ready = |name: &str| d.nodes.iter().any(|m| m.name == name && m.status == "Ready");
        let free = |ni: usize| {
            let n = &self.nodes[ni];
            !n.dead
                && !n.spec.cordoned
                && n.gpus.len() >= WORKER_GPUS
                && n.gpus[..WORKER_GPUS].iter().all(|g| g.owner.is_none())
        };
        let pick = members.iter().copied().filter(|&ni| free(ni)).min_by_key(|&ni| !ready(&self.nodes[ni].spec.name));
        let Some(ni) = pick else {
            // The scheduler finds no node of the domain's clique with a free channel.
            let n = self.nodes.len();
            let others = n - members.len();
            let message = format!(
                "0/{n} nodes are available: {} cannot allocate all claims, {others} node(s) didn't match Pod's node \
                 affinity/selector. preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling.",
                members.len()
            );
            self.failed_scheduling(key, message);
            return;
        };
        let prepared = ready(&self.nodes[ni].spec.name);
        let domain = d.name.clone();
        self.scheduled(key, ni);
        let node_name = self.nodes[ni].spec.name.clone();
        let mut bound = Vec::new();
        for g in &mut self.nodes[ni].gpus[..WORKER_GPUS] {
            g.owner = Some(key.to_string());
            bound.push(g.spec.uuid.clone());
        }
        let Some(pod) = self.pods.get_mut(key) else { return };
        pod.spec.node = Some(node_name);
        pod.spec.bound_gpus = bound;
        if prepared {
            return self.start_bound(key, instant);
        }
        if !instant {
            self.out.push(Delta::PodUpsert(pod.spec.clone()));
        }
        let message = imex_not_ready(&pod.spec.namespace, &format!("{}-channel", pod.spec.name), &domain);
        self.out.push(Delta::Event(EventSpec {
            ts: self.now,
            severity: Severity::Warning,
            reason: "FailedPrepareDynamicResources".into(),
            object: format!("pod/{key}"),
            message,
        }));
    }

    /// Binds a pending pod of an [`AlphaAsk`] workload, as the scheduler allocates its claim;
    /// it stays pending while its GPU has nothing left for it.
    pub(super) fn place_alpha(&mut self, key: &str, ask: AlphaAsk, instant: bool) {
        let target = match ask {
            AlphaAsk::Partition => self.dra.part,
            AlphaAsk::Capacity => self.dra.shared,
            AlphaAsk::Domain(k) => return self.place_worker(key, k, instant),
        };
        let Some((ni, gi)) = target else { return };
        let node = &self.nodes[ni];
        if node.dead || node.spec.cordoned || node.mig_apply.is_some() {
            return;
        }
        let node_name = node.spec.name.clone();
        let model = node.spec.gpu_model.unwrap_or(GpuModel::H100_80GB);
        let g = &mut self.nodes[ni].gpus[gi];
        let (device, class, bound_gpus, bound_mig) = match ask {
            AlphaAsk::Partition => {
                let Some(at) = self.dra.part_at else { return };
                if !g.spec.instances.is_empty() {
                    return;
                }
                // The driver creates the MIG device for the claim (dynamic MIG).
                g.spec.mig_enabled = true;
                g.spec.instances = vec![MigInstanceSpec { placement: at, uuid: self.dra.part_uuid.clone() }];
                g.inst_owner = vec![Some(key.to_string())];
                let device = partition_device(model, g.spec.index, &at);
                (device, labels::DRA_MIG_CLASS, vec![], vec![self.dra.part_uuid.clone()])
            }
            AlphaAsk::Capacity => {
                let total = i64::from(g.spec.memory_mib) << 20;
                if (g.holders.len() as i64 + 1) * SHARE_BYTES > total {
                    return;
                }
                g.holders.push(key.to_string());
                (format!("gpu-{}", g.spec.index), labels::DRA_GPU_CLASS, vec![g.spec.uuid.clone()], vec![])
            }
            AlphaAsk::Domain(_) => return,
        };
        let Some(pod) = self.pods.get_mut(key) else { return };
        pod.spec.node = Some(node_name.clone());
        pod.spec.bound_gpus = bound_gpus;
        pod.spec.bound_mig = bound_mig;
        for c in pod.spec.dra.iter_mut() {
            c.device_class = class.to_string();
            c.allocated = Some(format!("{}/{node_name}/{device}", labels::DRA_DRIVER));
        }
        self.start_bound(key, instant);
    }

    /// Sends what changed about the shapes: the partitionable GPU (its partition is a MIG
    /// device only while a claim holds it), each GPU's [`GpuDra`], and the domains once.
    pub(super) fn dra_sync(&mut self) {
        if let Some((ni, gi)) = self.dra.part {
            let g = &mut self.nodes[ni].gpus[gi];
            if g.inst_owner.iter().all(Option::is_none) && !g.spec.instances.is_empty() {
                // Its claim is gone: the driver deletes the MIG device.
                g.spec.mig_enabled = false;
                g.spec.instances.clear();
                g.inst_owner.clear();
            }
            if self.dra.sent_part.as_ref() != Some(&g.spec) {
                self.dra.sent_part = Some(g.spec.clone());
                self.out.push(Delta::GpuUpsert(g.spec.clone()));
            }
        }
        let mut want: Vec<(String, GpuDra)> = Vec::new();
        if let Some((ni, gi)) = self.dra.part {
            let g = &self.nodes[ni].gpus[gi];
            let held: Vec<PlacedInstance> = g.spec.instances.iter().map(|i| i.placement).collect();
            let dra = GpuDra {
                partitionable: true,
                fits: partition_fits(g.spec.model, &held),
                whole_fits: held.is_empty(),
                ..GpuDra::default()
            };
            want.push((g.spec.uuid.clone(), dra));
        }
        if let Some((ni, gi)) = self.dra.shared {
            let g = &self.nodes[ni].gpus[gi];
            let mut shares: Vec<CapacityShare> = g
                .holders
                .iter()
                .filter_map(|h| self.pods.get(h))
                .flat_map(|p| p.spec.dra.iter().map(move |c| format!("{}/{}", p.spec.namespace, c.claim)))
                .map(|claim| CapacityShare { claim, consumed: vec![("memory".into(), SHARE_BYTES)] })
                .collect();
            shares.sort_by(|a, b| a.claim.cmp(&b.claim));
            let dra = GpuDra {
                multi: true,
                capacity: vec![("memory".into(), i64::from(g.spec.memory_mib) << 20)],
                shares,
                ..GpuDra::default()
            };
            want.push((g.spec.uuid.clone(), dra));
        }
        if let Some((ni, gi)) = self.dra.tainted {
            let g = &self.nodes[ni].gpus[gi];
            let taint = DeviceTaint {
                key: XID_TAINT_KEY.into(),
                value: "79".into(),
                effect: "NoExecute".into(),
                device: format!("gpu-{}", g.spec.index),
                rule: None,
                since: Some(SIM_EPOCH_MS - 3 * 60_000),
            };
            want.push((g.spec.uuid.clone(), GpuDra { taints: vec![taint], ..GpuDra::default() }));
        }
        // Every shaped GPU is a DRA device (pool = its node, as the NVIDIA driver names it),
        // so a GPU taint can select it; a DeviceTaintRule adds its taint.
        let mut want: BTreeMap<String, GpuDra> = want.into_iter().collect();
        for (ni, gi) in [self.dra.part, self.dra.shared, self.dra.tainted].into_iter().flatten() {
            let (node, g) = (&self.nodes[ni], &self.nodes[ni].gpus[gi]);
            let d = want.entry(g.spec.uuid.clone()).or_default();
            node.spec.name.clone_into(&mut d.pool);
            d.devices = vec![format!("gpu-{}", g.spec.index)];
            if Some((ni, gi)) == self.dra.part {
                d.devices.extend(
                    partition_placements(g.spec.model).iter().map(|p| partition_device(g.spec.model, g.spec.index, p)),
                );
                d.devices.sort();
            }
        }
        for (uuid, taint) in self.dra.rules.values() {
            if let Some(d) = want.get_mut(uuid) {
                d.taints.push(taint.clone());
                d.taints.sort_by(|a, b| (&a.device, &a.key, &a.rule).cmp(&(&b.device, &b.key, &b.rule)));
            }
        }
        for (uuid, dra) in want {
            if self.dra.sent.get(&uuid) != Some(&dra) {
                self.dra.sent.insert(uuid.clone(), dra.clone());
                self.out.push(Delta::GpuDra { uuid, dra });
            }
        }
        if !self.dra.domains_sent {
            self.dra.domains_sent = true;
            for d in &self.dra.domains {
                self.out.push(Delta::DomainUpsert(d.clone()));
            }
        }
    }
}

#[cfg(test)]
#[path = "dra_tests.rs"]
mod tests;

/// The message of the kubelet's FailedPrepareDynamicResources for channel claim
/// `namespace/claim` of ComputeDomain `domain` on a node whose IMEX daemon is not ready: the
/// NVIDIA driver's words (`AssertComputeDomainReady`) at the end of the kubelet's chain. The
/// demo and `fabrik sim`'s kubelet say the same.
pub fn imex_not_ready(namespace: &str, claim: &str, domain: &str) -> String {
    format!(
        "Failed to prepare dynamic resources: NodePrepareResources failed for claim {namespace}/{claim}: error \
         preparing devices for claim {claim} of ComputeDomain {domain}: current node not ready in ComputeDomain"
    )
}
