//! `--dra-alpha`: Kubernetes 1.34's alpha DRA shapes on the DRA nodes, as the NVIDIA DRA
//! driver publishes them (protocols.md §5), and the NVIDIA ComputeDomains with their
//! NVLink cliques. Pure functions; `alpha_api` sends what needs more than a slice.
//!
//! Deterministic per DRA node index (`--dra-every`), first DRA node first:
//!
//! | DRA node | shape |
//! |---|---|
//! | 1st | GPUs 0 and 1 partitionable (`DRAPartitionableDevices`, dynamic MIG): a counter set `gpu-<i>-counter-set` (`memory`, `memory-slice-<k>`), the whole GPU consuming all of it, and every placement of the 1g, 2g, 3g and 7g profiles as a `mig` device consuming its slices and memory |
//! | 2nd (else the 1st, GPU 2) | GPU 0 shared by capacity (`DRAConsumableCapacity`): `allowMultipleAllocations`, `memory` with a requestPolicy (default 10Gi, 1Gi to all); the slice's **first** device (kube-scheduler 1.34.3 bug, tests/fixtures/dra-alpha/README.md) |
//! | 3rd (else the last) | GPU 7 tainted by the driver, `gpu.nvidia.com/xid=79:NoSchedule` (`DRADeviceTaints`); GPU 6 is what the DeviceTaintRule `fabrik-sim-maintenance` selects |
//!
//! ComputeDomain `nvl-train` (numNodes 4) spans the first 4 DRA nodes, NVLink clique
//! `<NVLINK_CLUSTER>.1`; `nvl-eval` (numNodes 2) the 5th and 6th DRA nodes, else the first
//! nodes that are neither DRA nor in `nvl-train`, clique `.2`, its second node NotReady.
//! GFD's `nvidia.com/gpu.clique` label on those nodes says the same.

use serde_json::{Map, Value, json};

use super::kubelet::hash;
use super::model::{SimNode, architecture, node_ip};
use crate::cluster::labels;
use crate::mig::{self, PlacedInstance};
use crate::rng::Rng;
use crate::sim::{NVLINK_CLUSTER, XID_TAINT_KEY, counter_memory_mib, partition_device, partition_placements};

/// The DeviceTaintRule `--dra-alpha` creates (v1alpha3).
pub const TAINT_RULE: &str = "fabrik-sim-maintenance";
/// The API refuses a slice with more devices than this once one consumes counters or has a
/// taint (128 otherwise).
pub const MAX_DEVICES_WITH_COUNTERS: usize = 64;

/// The alpha shapes of one node (all empty without `--dra-alpha`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Alpha {
    /// GPU indexes handed out as partitions of shared counters (dynamic MIG).
    pub partitionable: Vec<u8>,
    /// The GPU index shared by capacity.
    pub capacity: Option<u8>,
    /// The GPU index its driver taints (Xid 79).
    pub driver_taint: Option<u8>,
    /// `<clusterUUID>.<cliqueID>` of the node's NVLink domain.
    pub clique: Option<String>,
}

impl Alpha {
    pub fn any(&self) -> bool {
        !self.partitionable.is_empty() || self.capacity.is_some() || self.driver_taint.is_some()
    }
    /// GPUs mig-manager must not reslice: partitions are made per claim, and claims share
    /// the other by capacity.
    pub fn fixed(&self, gpu: u8) -> bool {
        self.partitionable.contains(&gpu) || self.capacity == Some(gpu)
    }
}

/// One ComputeDomain and the nodes its controller reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Domain {
    pub name: &'static str,
    pub num_nodes: u32,
    pub clique: String,
    /// (node, InternalIP, IMEX daemon ready).
    pub members: Vec<(String, String, bool)>,
}

impl Domain {
    pub fn ready(&self) -> bool {
        self.members.len() == self.num_nodes as usize && self.members.iter().all(|m| m.2)
    }
    /// The channel ResourceClaimTemplate workloads join it by.
    pub fn template(&self) -> String {
        format!("{}-channel", self.name)
    }
}

fn dra_nodes(nodes: &[SimNode]) -> Vec<usize> {
    nodes.iter().enumerate().filter(|(_, n)| n.dra).map(|(i, _)| i).collect()
}

/// The devices a node's slice lists (a whole GPU one, a MIG GPU one per instance, a
/// partitionable GPU one plus its partitions).
pub fn device_count(n: &SimNode) -> usize {
    n.gpus
        .iter()
        .map(|g| {
            if n.alpha.partitionable.contains(&g.index) {
                1 + partition_placements(n.model).len()
            } else if g.mig_enabled {
                g.instances.len()
            } else {
                1
            }
        })
        .sum()
}

/// GPU `gpu` of `n` whole (MIG off), as a partitionable or capacity-shared GPU must be.
fn make_whole(n: &mut SimNode, gpu: u8) {
    if let Some(g) = n.gpus.iter_mut().find(|g| g.index == gpu) {
        g.mig_enabled = false;
        g.instances.clear();
    }
    let layout = n.gpus.first().map(super::model::gpu_layout).unwrap_or(mig::Layout::Disabled);
    let uniform = n.gpus.iter().all(|g| super::model::gpu_layout(g) == layout);
    n.mig_config = if uniform { mig::layout_config_name(n.model, &layout) } else { "all-disabled".into() };
}

/// Puts the shapes and cliques on `nodes` (see the module's table).
pub fn assign(nodes: &mut [SimNode]) {
    let dra = dra_nodes(nodes);
    let Some(&p) = dra.first() else { return };
    for gpu in [0u8, 1] {
        if usize::from(gpu) >= nodes[p].gpus.len() {
            break;
        }
        // A second partitionable GPU only while the slice stays within the API's limit.
        let mut trial = nodes[p].clone();
        make_whole(&mut trial, gpu);
        trial.alpha.partitionable.push(gpu);
        if gpu == 0 || device_count(&trial) <= MAX_DEVICES_WITH_COUNTERS {
            nodes[p] = trial;
        }
    }
    let (c, c_gpu) = match dra.get(1) {
        Some(&c) => (c, 0),
        None => (p, 2),
    };
    if usize::from(c_gpu) < nodes[c].gpus.len() {
        make_whole(&mut nodes[c], c_gpu);
        nodes[c].alpha.capacity = Some(c_gpu);
    }
    let t = dra.get(2).or(dra.last()).copied().unwrap_or(p);
    let last = nodes[t].gpus.len().saturating_sub(1) as u8;
    if !nodes[t].alpha.fixed(last) {
        nodes[t].alpha.driver_taint = Some(last);
    }
    for d in domains(nodes) {
        for (name, _, _) in &d.members {
            if let Some(n) = nodes.iter_mut().find(|n| &n.name == name) {
                n.alpha.clique = Some(d.clique.clone());
            }
        }
    }
}

/// The ComputeDomains `--dra-alpha` creates and reports (none without DRA nodes).
pub fn domains(nodes: &[SimNode]) -> Vec<Domain> {
    let dra = dra_nodes(nodes);
    if dra.is_empty() {
        return Vec::new();
    }
    let train: Vec<usize> = dra.iter().take(4).copied().collect();
    let eval: Vec<usize> = if dra.len() >= 6 {
        dra[4..6].to_vec()
    } else {
        (0..nodes.len()).filter(|i| !nodes[*i].dra && !train.contains(i)).take(2).collect()
    };
    let member = |i: usize, ready: bool| (nodes[i].name.clone(), node_ip(nodes[i].index), ready);
    vec![
        Domain {
            name: "nvl-train",
            num_nodes: 4,
            clique: format!("{NVLINK_CLUSTER}.1"),
            members: train.iter().map(|&i| member(i, true)).collect(),
        },
        Domain {
            name: "nvl-eval",
            num_nodes: 2,
            clique: format!("{NVLINK_CLUSTER}.2"),
            members: eval.iter().enumerate().map(|(k, &i)| member(i, k != 1)).collect(),
        },
    ]
    .into_iter()
    .filter(|d| !d.members.is_empty())
    .collect()
}

pub fn counter_set(gpu: u8) -> String {
    format!("gpu-{gpu}-counter-set")
}

fn counters(memory_bytes: u64, slices: impl Iterator<Item = u8>) -> Value {
    let mut c = Map::new();
    c.insert("memory".into(), json!({ "value": memory_bytes.to_string() }));
    for k in slices {
        c.insert(format!("memory-slice-{k}"), json!({ "value": "1" }));
    }
    Value::Object(c)
}

/// The slice's `sharedCounters`: one set per partitionable GPU (its memory and each of its
/// memory slices).
pub fn shared_counters(n: &SimNode) -> Vec<Value> {
    let mem = counter_memory_mib(n.model) << 20;
    n.alpha
        .partitionable
        .iter()
        .map(|g| json!({ "name": counter_set(*g), "counters": counters(mem, 0..mig::MEMORY_SLICES) }))
        .collect()
}

fn s(v: &str) -> Value {
    json!({ "string": v })
}

/// A partition's uuid: stable per node, GPU and placement.
pub fn partition_uuid(node: &str, device: &str) -> String {
    Rng::new(hash(&[node, device, "partition"])).uuid("MIG")
}

/// The devices of a partitionable GPU: the whole GPU consuming all of its counter set, then
/// every partition, each consuming its memory and its memory slices.
pub fn partition_devices(n: &SimNode, gpu: u8, whole: Value) -> Vec<Value> {
    let set = counter_set(gpu);
    let mut whole = whole;
    let mem = counter_memory_mib(n.model) << 20;
    whole["consumesCounters"] = json!([{ "counterSet": set, "counters": counters(mem, 0..mig::MEMORY_SLICES) }]);
    let parent = whole["attributes"]["uuid"]["string"].as_str().unwrap_or_default().to_string();
    let mut out = vec![whole];
    for p in partition_placements(n.model) {
        out.push(partition(n, gpu, &parent, &p, &set));
    }
    out
}

fn partition(n: &SimNode, gpu: u8, parent: &str, p: &PlacedInstance, set: &str) -> Value {
    let prof = mig::profile(n.model, p.profile);
    let name = partition_device(n.model, gpu, p);
    let bytes = u64::from(prof.memory_mib) << 20;
    let slices = p.start..p.start + prof.memory_slices;
    let mut cap = Map::new();
    cap.insert("memory".into(), json!({ "value": bytes.to_string() }));
    if prof.sms > 0 {
        cap.insert("multiprocessors".into(), json!({ "value": prof.sms.to_string() }));
    }
    for k in slices.clone() {
        cap.insert(format!("memorySlice{k}"), json!({ "value": "1" }));
    }
    json!({
        "name": name,
        "attributes": {
            "type": s("mig"), "uuid": s(&partition_uuid(&n.name, &name)), "parentUUID": s(parent),
            "profile": s(prof.name), "productName": s(n.model.product_name()), "brand": s("Nvidia"),
            "architecture": s(architecture(n.model)),
        },
        "capacity": cap,
        "consumesCounters": [{ "counterSet": set, "counters": counters(bytes, slices) }],
    })
}

/// The GPU shared by capacity: several claims at once, each taking part of its memory.
pub fn share_by_capacity(device: &mut Value) {
    let bytes = device["capacity"]["memory"]["value"].clone();
    device["allowMultipleAllocations"] = json!(true);
    device["capacity"]["memory"]["requestPolicy"] =
        json!({ "default": "10Gi", "validRange": { "min": "1Gi", "max": bytes } });
}

/// The driver's taint after Xid 79 (NoSchedule: claims already allocated keep the device).
pub fn driver_taint(device: &mut Value) {
    device["taints"] = json!([{ "key": XID_TAINT_KEY, "value": "79", "effect": "NoSchedule" }]);
}

/// The devices of `n` with its shapes applied; `plain` lists them as without the shapes,
/// each with its GPU index. The GPU shared by capacity comes first (see the module).
pub fn apply(n: &SimNode, plain: Vec<(u8, Value)>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for (gpu, mut d) in plain {
        if n.alpha.partitionable.contains(&gpu) {
            out.extend(partition_devices(n, gpu, d));
            continue;
        }
        if n.alpha.driver_taint == Some(gpu) {
            driver_taint(&mut d);
        }
        if n.alpha.capacity == Some(gpu) {
            share_by_capacity(&mut d);
            out.insert(0, d);
        } else {
            out.push(d);
        }
    }
    out
}

/// The third DRA node's GPU 6 device the DeviceTaintRule selects: the GPU, or its first MIG
/// device where MIG is on. `None` without such a GPU.
pub fn rule_target(nodes: &[SimNode]) -> Option<(String, String)> {
    let t = nodes.iter().find(|n| n.alpha.driver_taint.is_some())?;
    let gpu = t.alpha.driver_taint?.checked_sub(1)?;
    if t.alpha.fixed(gpu) {
        return None;
    }
    let g = t.gpus.iter().find(|g| g.index == gpu)?;
    let device = match g.instances.first().filter(|_| g.mig_enabled) {
        Some(i) => {
            let p = mig::profile(t.model, i.placement.profile);
            format!("gpu-{gpu}-mig-{}-{}-{}", p.name.replace(['.', '+'], ""), p.gi_profile_id, i.placement.start)
        }
        None => format!("gpu-{gpu}"),
    };
    Some((t.name.clone(), device))
}

/// The DeviceTaintRule an operator would write while draining that GPU (NoSchedule only).
pub fn taint_rule(pool: &str, device: &str) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": { "name": TAINT_RULE, "labels": { labels::SIMULATED: "true" } },
        "spec": {
            "deviceSelector": { "driver": labels::DRA_DRIVER, "pool": pool, "device": device },
            "taint": { "key": "fabrik.io/maintenance", "value": "drain", "effect": "NoSchedule" },
        },
    })
}

pub fn domain_object(d: &Domain, namespace: &str) -> Value {
    json!({
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": { "name": d.name, "namespace": namespace, "labels": { labels::SIMULATED: "true" } },
        "spec": { "numNodes": d.num_nodes, "channel": { "resourceClaimTemplate": { "name": d.template() } } },
    })
}

/// The DeviceClass of a domain's default IMEX channel, as the driver's Helm chart installs it.
pub fn channel_class() -> Value {
    let d = labels::CD_DRIVER;
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": { "name": labels::CD_CHANNEL_CLASS, "labels": { labels::SIMULATED: "true" } },
        "spec": { "selectors": [{ "cel": { "expression": format!(
            "device.driver == '{d}' && device.attributes['{d}'].type == 'channel' && device.attributes['{d}'].id == 0") } }] },
    })
}

/// The slice the driver's ComputeDomain kubelet plugin publishes on a node of a domain: its
/// IMEX channel 0 and its daemon (pool: the node; device names as the plugin makes them).
pub fn channel_slice(node: &str) -> Value {
    let dev = |ty: &str| json!({ "name": format!("{ty}-0"), "attributes": { "type": s(ty), "id": { "int": 0 } } });
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": { "name": channel_slice_name(node), "labels": { labels::SIMULATED: "true" } },
        "spec": { "driver": labels::CD_DRIVER, "nodeName": node,
            "pool": { "name": node, "generation": 1, "resourceSliceCount": 1 },
            "devices": [dev("channel"), dev("daemon")] },
    })
}

pub fn channel_slice_name(node: &str) -> String {
    format!("{node}-{}", labels::CD_DRIVER)
}

/// The channel ResourceClaimTemplate the driver's controller makes for domain `d` (its
/// `spec.channel.resourceClaimTemplate.name`, labelled with the domain's uid and carrying it
/// as the channel's opaque config).
pub fn channel_template(d: &Domain, namespace: &str, uid: &str) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": { "name": d.template(), "namespace": namespace,
            "labels": { labels::SIMULATED: "true", "resource.nvidia.com/computeDomain": uid } },
        "spec": { "spec": { "devices": {
            "requests": [{ "name": "channel", "exactly": { "deviceClassName": labels::CD_CHANNEL_CLASS } }],
            "config": [{ "requests": ["channel"], "opaque": { "driver": labels::CD_DRIVER, "parameters": {
                "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainChannelConfig", "domainID": uid } } }],
        } } },
    })
}

/// The domain's workload: a StatefulSet of `numNodes` workers, each with a claim from the
/// channel template, kept to the domain's NVLink clique (`nvidia.com/gpu.clique`, as NVLink
/// jobs select it). One channel 0 per node: the scheduler puts one worker on each node.
/// (With the real driver a node joins a domain because such a pod landed there; here the
/// domain's nodes are given, so the selector keeps the workers on them.)
pub fn workers(d: &Domain, namespace: &str) -> Value {
    let app = format!("{}-worker", d.name);
    json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": { "name": app, "namespace": namespace, "labels": { labels::SIMULATED: "true" } },
        "spec": { "replicas": d.num_nodes, "podManagementPolicy": "Parallel",
            "selector": { "matchLabels": { "app": app } },
            "template": { "metadata": { "labels": { "app": app } }, "spec": {
                "nodeSelector": { labels::GPU_CLIQUE: d.clique },
                "resourceClaims": [{ "name": "channel", "resourceClaimTemplateName": d.template() }],
                "containers": [{ "name": "worker", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                    "resources": { "claims": [{ "name": "channel" }] } }] } } },
    })
}

/// The status the driver's controller writes (status subresource).
pub fn domain_status(d: &Domain) -> Value {
    let nodes: Vec<Value> = d
        .members
        .iter()
        .enumerate()
        .map(|(k, (name, ip, ready))| {
            json!({ "name": name, "ipAddress": ip, "cliqueID": d.clique, "index": k,
                "status": if *ready { "Ready" } else { "NotReady" } })
        })
        .collect();
    json!({ "status": { "status": if d.ready() { "Ready" } else { "NotReady" }, "nodes": nodes } })
}

#[cfg(test)]
#[path = "alpha_tests.rs"]
mod tests;
