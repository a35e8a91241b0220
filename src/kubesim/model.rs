//! The simulated nodes and the objects they publish, as pure functions: node labels,
//! capacity and status (GFD, device plugin, kubelet), the DRA ResourceSlice and the
//! DeviceClasses (NVIDIA DRA driver). Nothing here talks to the server.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::alpha::{self, Alpha};
use crate::cluster::labels;
use crate::mig::{self, GpuModel, Layout, PlacedInstance};
use crate::model::{GpuSpec, MigInstanceSpec};
use crate::rng::Rng;
use crate::sim::{DeviceSharing, Sim, SimConfig, sharing_labels, whole_gpu_resource};

pub const CPU_CORES: i64 = 128;
pub const MEMORY: &str = "1Ti";
pub const MAX_PODS: i64 = 250;
pub const KUBELET_VERSION: &str = "v1.34.0-fabrik-sim";

/// One simulated GPU node: what its GFD, device plugin, DRA driver and mig-manager know.
#[derive(Clone, Debug, PartialEq)]
pub struct SimNode {
    pub name: String,
    pub index: usize,
    pub model: GpuModel,
    /// GPUs are handed out through DRA (a ResourceSlice), not the device plugin.
    pub dra: bool,
    /// The device plugin shares the GPUs (time-slicing or MPS replicas); never on DRA nodes.
    pub sharing: Option<DeviceSharing>,
    pub gpus: Vec<GpuSpec>,
    /// The `nvidia.com/mig.config` last applied.
    pub mig_config: String,
    /// Extra labels from the demo factory (zone, rack).
    pub extra_labels: Vec<(String, String)>,
    /// ResourceSlice pool generation.
    pub slice_generation: i64,
    /// `--dra-alpha`: the 1.34 alpha DRA shapes and NVLink clique of the node.
    pub alpha: Alpha,
}

/// The nodes the demo factory builds from `seed`; every `dra_every`-th node (1-based) is a
/// DRA node. The MIG config is named after what the GPUs actually hold. The demo shares the
/// GPUs of every `sharing_every`-th node without MIG (see [`SimConfig::sharing_every`]);
/// its sharing is carried over from the node's labels, except on DRA nodes.
pub fn build_nodes(seed: u64, count: usize, dra_every: u32, sharing_every: u32) -> Vec<SimNode> {
    let sim = Sim::new(SimConfig {
        seed,
        nodes: count,
        tick_ms: 1000,
        churn: false,
        sharing_every,
        dra_alpha: false,
        teams: 0,
    });
    sim.node_inventory()
        .into_iter()
        .enumerate()
        .map(|(index, (spec, gpus))| {
            let model = spec.gpu_model.unwrap_or(GpuModel::H100_80GB);
            let layout = gpus.first().map(gpu_layout).unwrap_or(Layout::Disabled);
            let uniform = gpus.iter().all(|g| gpu_layout(g) == layout);
            let mig_config = if uniform { mig::layout_config_name(model, &layout) } else { "all-disabled".into() };
            let extra_labels = spec
                .labels
                .iter()
                .filter(|(k, _)| k.starts_with("topology.kubernetes.io/") || k.starts_with("fabrik.io/"))
                .cloned()
                .collect();
            let dra = dra_every > 0 && (index + 1) % dra_every as usize == 0;
            let sharing = if dra { None } else { DeviceSharing::of_node(&spec.labels, &spec.capacity) };
            let alpha = Alpha::default();
            SimNode {
                name: spec.name,
                index,
                model,
                dra,
                sharing,
                gpus,
                mig_config,
                extra_labels,
                slice_generation: 1,
                alpha,
            }
        })
        .collect()
}

/// What a GPU holds, as a planner layout.
pub fn gpu_layout(g: &GpuSpec) -> Layout {
    if g.mig_enabled {
        Layout::Enabled(g.instances.iter().map(|i| i.placement.profile).collect())
    } else {
        Layout::Disabled
    }
}

/// A deterministic uuid for a MIG instance created by a reconfiguration.
pub fn mig_uuid(node: &str, gpu: u8, generation: i64, slot: usize) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in node.bytes().chain([gpu, (generation & 0xff) as u8, (slot & 0xff) as u8]) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    Rng::new(h ^ (generation as u64).rotate_left(17)).uuid("MIG")
}

/// Applies new layouts (per GPU index) to a node: fresh instance uuids, planner placements.
/// Fails when a layout does not fit the model, and for MIG on a GPU with an alpha DRA shape
/// (`--dra-alpha`): a partitionable GPU (dynamic MIG) gets its partitions per claim, not from
/// mig-manager, and claims share the other by capacity; a reslice of either is not supported.
pub fn apply_layouts(node: &mut SimNode, layouts: &[(u8, Layout)], config: &str) -> Result<(), String> {
    let generation = node.slice_generation + 1;
    let before = node.clone();
    let mut planned: Vec<(u8, Option<Vec<PlacedInstance>>)> = Vec::new();
    for (index, layout) in layouts {
        if usize::from(*index) >= node.gpus.len() {
            return Err(format!("device {index} does not exist on {} ({} GPUs)", node.name, node.gpus.len()));
        }
        if node.alpha.fixed(*index) && layout.mig_enabled() {
            let what = if node.alpha.capacity == Some(*index) { "shared by capacity" } else { "partitionable" };
            return Err(format!(
                "GPU {index} of {} is {what} (DRA alpha): MIG reslicing it is not supported; its partitions \
                 are made per claim",
                node.name
            ));
        }
        match layout {
            Layout::Disabled => planned.push((*index, None)),
            Layout::Enabled(ids) => {
                let placed = mig::plan(node.model, ids).map_err(|e| e.to_string())?;
                planned.push((*index, Some(placed)));
            }
        }
    }
    for (index, placed) in planned {
        let Some(g) = node.gpus.iter_mut().find(|g| g.index == index) else { continue };
        match placed {
            None => {
                g.mig_enabled = false;
                g.instances.clear();
            }
            Some(p) => {
                g.mig_enabled = true;
                g.instances = p
                    .into_iter()
                    .enumerate()
                    .map(|(slot, placement)| MigInstanceSpec {
                        placement,
                        uuid: mig_uuid(&node.name, index, generation, slot),
                    })
                    .collect();
            }
        }
    }
    if node.alpha.any() && alpha::device_count(node) > alpha::MAX_DEVICES_WITH_COUNTERS {
        let n = alpha::device_count(node);
        *node = before;
        return Err(format!(
            "the ResourceSlice of {} would list {n} devices, more than the {} the API takes beside partitions \
             or taints",
            node.name,
            alpha::MAX_DEVICES_WITH_COUNTERS
        ));
    }
    node.slice_generation = generation;
    node.mig_config = config.to_string();
    Ok(())
}

/// GFD's `nvidia.com/gpu.family`.
pub fn family(model: GpuModel) -> &'static str {
    match model {
        GpuModel::A100_40GB | GpuModel::A100_80GB => "ampere",
        GpuModel::H100_80GB | GpuModel::H200_141GB => "hopper",
        GpuModel::B200 => "blackwell",
    }
}

/// The DRA driver's `architecture` attribute.
pub fn architecture(model: GpuModel) -> &'static str {
    match model {
        GpuModel::A100_40GB | GpuModel::A100_80GB => "Ampere",
        GpuModel::H100_80GB | GpuModel::H200_141GB => "Hopper",
        GpuModel::B200 => "Blackwell",
    }
}

/// MIG instance counts per profile name (catalog spelling), over all GPUs.
pub fn mig_counts(node: &SimNode) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for g in node.gpus.iter().filter(|g| g.mig_enabled) {
        for i in &g.instances {
            *out.entry(mig::profile(node.model, i.placement.profile).name.to_string()).or_insert(0) += 1;
        }
    }
    out
}

/// The extended resources the device plugin advertises: `nvidia.com/gpu` for GPUs with MIG
/// off (replicas × GPUs when it shares them, as `nvidia.com/gpu.shared` when renamed),
/// `nvidia.com/mig-<profile>` per instance (mixed strategy). None on DRA nodes.
pub fn gpu_resources(node: &SimNode) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    if node.dra {
        return out;
    }
    let whole = node.gpus.iter().filter(|g| !g.mig_enabled).count() as i64;
    let (resource, n) = whole_gpu_resource(node.sharing.as_ref(), whole);
    out.insert(resource.to_string(), n);
    for (profile, n) in mig_counts(node) {
        out.insert(labels::mig_resource(&profile), n);
    }
    out
}

/// The `nvidia.com/mig-<profile>.count` labels GFD writes under the mixed strategy.
pub fn mig_count_labels(node: &SimNode) -> BTreeMap<String, String> {
    mig_counts(node).into_iter().map(|(p, n)| (format!("{}.count", labels::mig_resource(&p)), n.to_string())).collect()
}

/// All labels of a node with mig-manager idle (`state` success or failed).
pub fn node_labels(node: &SimNode, state: &str) -> BTreeMap<String, String> {
    let mut l: BTreeMap<String, String> = node.extra_labels.iter().cloned().collect();
    let mut set = |k: &str, v: &str| {
        l.insert(k.to_string(), v.to_string());
    };
    set("kubernetes.io/hostname", &node.name);
    set("kubernetes.io/os", "linux");
    set("kubernetes.io/arch", "amd64");
    set("node.kubernetes.io/instance-type", &format!("sim-{}x{}", node.gpus.len(), node.model.name().to_lowercase()));
    set(labels::SIMULATED, "true");
    if node.dra {
        set(labels::SIM_DRA_NODE, "true");
    }
    set(labels::GPU_PRESENT, "true");
    // The product (`-SHARED` when shared and not renamed), replicas, strategy, config.
    for (k, v) in sharing_labels(node.sharing.as_ref(), node.model.product_label()) {
        set(k, &v);
    }
    set(labels::GPU_COUNT, &node.gpus.len().to_string());
    set(labels::GPU_MEMORY, &node.model.memory_mib().to_string());
    set(labels::GPU_FAMILY, family(node.model));
    set(labels::MIG_CAPABLE, "true");
    set(labels::MIG_STRATEGY, "mixed");
    set(labels::MIG_CONFIG, &node.mig_config);
    set(labels::MIG_CONFIG_STATE, state);
    for c in ["device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "mig-manager"] {
        set(&format!("{}{c}", labels::DEPLOY_PREFIX), "true");
    }
    l.extend(mig_count_labels(node));
    if let Some(c) = &node.alpha.clique {
        l.insert(labels::GPU_CLIQUE.into(), c.clone());
    }
    l
}

/// The InternalIP of a node (172.16.0.0/12, from its index).
pub fn node_ip(index: usize) -> String {
    let i = index + 10;
    format!("172.{}.{}.{}", 16 + (i >> 16) % 16, (i >> 8) & 0xff, i & 0xff)
}

pub fn now_str() -> String {
    time_str(k8s_openapi::jiff::Timestamp::now())
}

pub fn time_str(t: k8s_openapi::jiff::Timestamp) -> String {
    k8s_openapi::jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", t).unwrap_or_else(|_| "1970-01-01T00:00:00Z".into())
}

/// The Node object to create (metadata and spec; status goes through the subresource).
pub fn node_object(node: &SimNode) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": node.name, "labels": node_labels(node, "success"),
            "annotations": { "node.alpha.kubernetes.io/ttl": "0", "fabrik.io/sim-gpu-model": node.model.name() } },
        "spec": { "providerID": format!("fabrik-sim://{}", node.name) },
    })
}

/// A `Ready` condition (with the three pressure conditions kubelets always report).
pub fn conditions(ready: bool, now: &str) -> Value {
    let pressure = |t: &str, reason: &str| {
        json!({"type": t, "status": "False", "reason": reason, "message": "fabrik sim",
            "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let (status, reason, message) = if ready {
        ("True", "KubeletReady", "kubelet is posting ready status (fabrik sim)")
    } else {
        ("False", "KubeletNotReady", "container runtime is down (fabrik sim fault: notready)")
    };
    json!([
        pressure("MemoryPressure", "KubeletHasSufficientMemory"),
        pressure("DiskPressure", "KubeletHasNoDiskPressure"),
        pressure("PIDPressure", "KubeletHasSufficientPID"),
        {"type": "Ready", "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": now, "lastTransitionTime": now},
    ])
}

/// Capacity and allocatable: cpu, memory, pods plus the GPU resources. `gpu_zero` advertises
/// the GPU resources as 0 allocatable (the device plugin is paused during a MIG change).
/// `drop` lists resources the node had before that must go (written as null in a merge patch).
pub fn resources(node: &SimNode, gpu_zero: bool, drop: &[String]) -> (Value, Value) {
    let mut cap = serde_json::Map::new();
    cap.insert("cpu".into(), json!(CPU_CORES.to_string()));
    cap.insert("memory".into(), json!(MEMORY));
    cap.insert("pods".into(), json!(MAX_PODS.to_string()));
    cap.insert("ephemeral-storage".into(), json!("3840Gi"));
    cap.insert("hugepages-1Gi".into(), json!("0"));
    cap.insert("hugepages-2Mi".into(), json!("0"));
    let mut alloc = cap.clone();
    alloc.insert("cpu".into(), json!(format!("{}m", CPU_CORES * 1000 - 500)));
    for (r, n) in gpu_resources(node) {
        cap.insert(r.clone(), json!(n.to_string()));
        alloc.insert(r, json!(if gpu_zero { "0".to_string() } else { n.to_string() }));
    }
    for r in drop {
        if !cap.contains_key(r) {
            cap.insert(r.clone(), Value::Null);
            alloc.insert(r.clone(), Value::Null);
        }
    }
    (Value::Object(cap), Value::Object(alloc))
}

/// The full status a kubelet posts when it registers.
pub fn node_status(node: &SimNode, ready: bool) -> Value {
    let now = now_str();
    let (cap, alloc) = resources(node, false, &[]);
    json!({ "status": {
        "capacity": cap,
        "allocatable": alloc,
        "conditions": conditions(ready, &now),
        "addresses": [{"type": "InternalIP", "address": node_ip(node.index)}, {"type": "Hostname", "address": node.name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "architecture": "amd64", "bootID": format!("boot-{}", node.name), "containerRuntimeVersion": "containerd://2.1.0",
            "kernelVersion": "6.8.0-fabrik", "kubeProxyVersion": "", "kubeletVersion": KUBELET_VERSION,
            "machineID": format!("{:032x}", node.index), "operatingSystem": "linux",
            "osImage": "Ubuntu 24.04 LTS (fabrik sim)", "systemUUID": format!("sim-{}", node.name),
        },
    }})
}

pub fn slice_name(node: &str) -> String {
    format!("{node}-{}", labels::DRA_DRIVER)
}

fn s(v: &str) -> Value {
    json!({ "string": v })
}

/// The DRA devices of a node, as the NVIDIA driver names and describes them: `gpu-<i>` for
/// each GPU with MIG off; for MIG GPUs one device per instance,
/// `gpu-<i>-mig-<profile without dots>-<giProfileId>-<start>`, with `memorySlice<i>` = 1 for
/// every memory slice it occupies. With `--dra-alpha`, the node's shapes (see `alpha`).
pub fn slice_devices(node: &SimNode) -> Vec<Value> {
    alpha::apply(node, plain_devices(node))
}

/// The devices, each with its GPU's index, as without the alpha shapes.
fn plain_devices(node: &SimNode) -> Vec<(u8, Value)> {
    let mut out = Vec::new();
    for g in &node.gpus {
        let common = |m: &mut serde_json::Map<String, Value>| {
            m.insert("productName".into(), s(node.model.product_name()));
            m.insert("brand".into(), s("Nvidia"));
            m.insert("architecture".into(), s(architecture(node.model)));
        };
        if !g.mig_enabled {
            let mut attrs = serde_json::Map::new();
            attrs.insert("type".into(), s("gpu"));
            attrs.insert("uuid".into(), s(&g.uuid));
            common(&mut attrs);
            let bytes = u64::from(g.memory_mib) << 20;
            out.push((
                g.index,
                json!({
                    "name": format!("gpu-{}", g.index),
                    "attributes": attrs,
                    "capacity": { "memory": { "value": bytes.to_string() } },
                }),
            ));
            continue;
        }
        for inst in &g.instances {
            let p = mig::profile(node.model, inst.placement.profile);
            let mut attrs = serde_json::Map::new();
            attrs.insert("type".into(), s("mig"));
            attrs.insert("uuid".into(), s(&inst.uuid));
            attrs.insert("parentUUID".into(), s(&g.uuid));
            attrs.insert("profile".into(), s(p.name));
            common(&mut attrs);
            let mut cap = serde_json::Map::new();
            cap.insert("memory".into(), json!({ "value": (u64::from(p.memory_mib) << 20).to_string() }));
            if p.sms > 0 {
                cap.insert("multiprocessors".into(), json!({ "value": p.sms.to_string() }));
            }
            for i in inst.placement.start..inst.placement.start + p.memory_slices {
                cap.insert(format!("memorySlice{i}"), json!({ "value": "1" }));
            }
            out.push((
                g.index,
                json!({
                    "name": format!("gpu-{}-mig-{}-{}-{}", g.index, p.name.replace(['.', '+'], ""), p.gi_profile_id,
                        inst.placement.start),
                    "attributes": attrs,
                    "capacity": cap,
                }),
            ));
        }
    }
    out
}

pub fn resource_slice(node: &SimNode) -> Value {
    let mut slice = json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": { "name": slice_name(&node.name), "labels": { labels::SIMULATED: "true" } },
        "spec": {
            "driver": labels::DRA_DRIVER,
            "nodeName": node.name,
            "pool": { "name": node.name, "generation": node.slice_generation, "resourceSliceCount": 1 },
            "devices": slice_devices(node),
        },
    });
    let counters = alpha::shared_counters(node);
    if !counters.is_empty() {
        slice["spec"]["sharedCounters"] = json!(counters);
    }
    slice
}

pub fn device_class(name: &str, kind: &str) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": { "name": name },
        "spec": { "selectors": [{ "cel": { "expression": format!(
            "device.driver == '{}' && device.attributes['{}'].type == '{kind}'", labels::DRA_DRIVER, labels::DRA_DRIVER) } }] },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes() -> Vec<SimNode> {
        build_nodes(42, 24, 4, 0)
    }

    #[test]
    fn nodes_are_deterministic_and_named_like_the_demo() {
        let a = nodes();
        let b = nodes();
        assert_eq!(a, b);
        assert_eq!(a[0].name, "h100-0000");
        assert!(a.iter().all(|n| n.gpus.len() == 8));
        let dra: Vec<usize> = a.iter().filter(|n| n.dra).map(|n| n.index).collect();
        assert_eq!(dra, vec![3, 7, 11, 15, 19, 23]);
        // Node 11 is MIG-partitioned and a DRA node: the slice test below relies on it.
        assert!(a[11].gpus.iter().all(|g| g.mig_enabled));
    }

    #[test]
    fn labels_and_capacity_of_a_plain_node() {
        let n = &nodes()[0];
        let l = node_labels(n, "success");
        assert_eq!(l[labels::SIMULATED], "true");
        assert_eq!(l[labels::GPU_PRODUCT], "NVIDIA-H100-80GB-HBM3");
        assert_eq!(l[labels::GPU_COUNT], "8");
        assert_eq!(l[labels::GPU_MEMORY], "81920");
        assert_eq!(l[labels::GPU_FAMILY], "hopper");
        assert_eq!(l[labels::MIG_CONFIG], "all-disabled");
        assert_eq!(l["nvidia.com/gpu.deploy.mig-manager"], "true");
        assert!(!l.contains_key(labels::SIM_DRA_NODE));
        let (cap, alloc) = resources(n, false, &[]);
        assert_eq!(cap["nvidia.com/gpu"], "8");
        assert_eq!(alloc["nvidia.com/gpu"], "8");
        assert_eq!(cap["cpu"], "128");
        assert_eq!(cap["pods"], "250");
    }

    #[test]
    fn mig_node_advertises_mig_resources_and_count_labels() {
        let n = &nodes()[5];
        assert!(n.gpus.iter().all(|g| g.mig_enabled));
        let l = node_labels(n, "success");
        assert_eq!(l[labels::MIG_CONFIG], n.mig_config);
        let res = gpu_resources(n);
        assert_eq!(res["nvidia.com/gpu"], 0);
        let total_instances: usize = n.gpus.iter().map(|g| g.instances.len()).sum();
        let mig_total: i64 = res.iter().filter(|(k, _)| k.starts_with("nvidia.com/mig-")).map(|(_, v)| *v).sum();
        assert_eq!(mig_total as usize, total_instances);
        for (r, v) in res.iter().filter(|(k, _)| k.starts_with("nvidia.com/mig-")) {
            assert_eq!(l[&format!("{r}.count")], v.to_string());
        }
    }

    #[test]
    fn dra_node_has_no_device_plugin_resources() {
        let n = &nodes()[3];
        assert!(n.dra);
        assert!(gpu_resources(n).is_empty());
        let (cap, _) = resources(n, false, &[]);
        assert!(cap.get("nvidia.com/gpu").is_none());
        let slice = resource_slice(n);
        assert_eq!(slice["spec"]["pool"]["name"], n.name);
        assert_eq!(slice["spec"]["pool"]["generation"], 1);
        assert_eq!(slice["spec"]["nodeName"], n.name);
        let devs = slice["spec"]["devices"].as_array().cloned().unwrap_or_default();
        assert_eq!(devs.len(), 8);
        assert_eq!(devs[0]["name"], "gpu-0");
        assert_eq!(devs[0]["attributes"]["type"]["string"], "gpu");
        assert_eq!(devs[0]["attributes"]["uuid"]["string"], n.gpus[0].uuid);
        assert_eq!(devs[0]["attributes"]["productName"]["string"], n.model.product_name());
        assert_eq!(devs[0]["capacity"]["memory"]["value"], (u64::from(n.model.memory_mib()) << 20).to_string());
        // It deserializes as the typed object the API takes.
        let typed: Result<k8s_openapi::api::resource::v1::ResourceSlice, _> = serde_json::from_value(slice);
        assert!(typed.is_ok());
    }

    #[test]
    fn mig_slice_devices_carry_placement_in_memory_slices() {
        let mut n = nodes()[11].clone();
        let model = n.model;
        let layout = mig::parse_layout(model, "3g.40gb,2g.20gb,1g.10gb,1g.10gb").expect("layout");
        apply_layouts(&mut n, &[(0, layout.clone()), (1, Layout::Disabled)], "custom").expect("applies");
        assert_eq!(n.slice_generation, 2);
        let devs = slice_devices(&n);
        let gpu0: Vec<&Value> =
            devs.iter().filter(|d| d["name"].as_str().is_some_and(|s| s.starts_with("gpu-0-"))).collect();
        assert_eq!(gpu0.len(), 4);
        let placed = mig::plan(model, layout.profiles()).expect("plan");
        for inst in &placed {
            let p = mig::profile(model, inst.profile);
            let name = format!("gpu-0-mig-{}-{}-{}", p.name.replace('.', ""), p.gi_profile_id, inst.start);
            let d = gpu0.iter().find(|d| d["name"] == name.as_str()).expect("device by name");
            assert_eq!(d["attributes"]["type"]["string"], "mig");
            assert_eq!(d["attributes"]["parentUUID"]["string"], n.gpus[0].uuid);
            assert_eq!(d["attributes"]["profile"]["string"], p.name);
            let slices: Vec<u8> = (0..8u8)
                .filter(|i| d["capacity"].get(format!("memorySlice{i}")).is_some_and(|v| v["value"] == "1"))
                .collect();
            let want: Vec<u8> = (inst.start..inst.start + p.memory_slices).collect();
            assert_eq!(slices, want);
        }
        assert!(devs.iter().any(|d| d["name"] == "gpu-1"));
        // Uuids of re-created instances are fresh but deterministic.
        let mut again = nodes()[11].clone();
        apply_layouts(&mut again, &[(0, layout)], "custom").expect("applies");
        assert_eq!(again.gpus[0].instances[0].uuid, n.gpus[0].instances[0].uuid);
        assert_ne!(nodes()[11].gpus[0].instances[0].uuid, n.gpus[0].instances[0].uuid);
    }

    #[test]
    fn resources_drop_old_mig_profiles_as_null() {
        let mut n = nodes()[5].clone();
        let before: Vec<String> = gpu_resources(&n).keys().cloned().collect();
        let all: Vec<(u8, Layout)> = (0..8).map(|i| (i, Layout::Disabled)).collect();
        apply_layouts(&mut n, &all, "all-disabled").expect("applies");
        let (cap, alloc) = resources(&n, false, &before);
        assert_eq!(cap["nvidia.com/gpu"], "8");
        for r in before.iter().filter(|r| r.starts_with("nvidia.com/mig-")) {
            assert!(cap[r].is_null());
            assert!(alloc[r].is_null());
        }
        let (_, paused) = resources(&n, true, &[]);
        assert_eq!(paused["nvidia.com/gpu"], "0");
    }

    #[test]
    fn invalid_layout_is_refused_and_leaves_the_node_alone() {
        let mut n = nodes()[0].clone();
        let before = n.clone();
        let too_many = Layout::Enabled(vec![mig::find_profile(n.model, "7g.80gb").expect("7g"); 2]);
        assert!(apply_layouts(&mut n, &[(0, too_many)], "x").is_err());
        assert!(apply_layouts(&mut n, &[(9, Layout::Disabled)], "x").is_err());
        assert_eq!(n, before);
    }

    #[test]
    fn shared_nodes_advertise_replicas_and_gfd_labels() {
        use crate::sim::SharingStrategy;
        let all = build_nodes(42, 48, 4, 6);
        let shared: Vec<&SimNode> = all.iter().filter(|n| n.sharing.is_some()).collect();
        assert!(shared.len() >= 3, "{}", shared.len());
        assert!(all.iter().filter(|n| n.dra).all(|n| n.sharing.is_none()), "DRA nodes never share");
        let mut seen = (false, false, false);
        for n in &shared {
            let s = n.sharing.as_ref().expect("shared");
            assert!(n.gpus.iter().all(|g| !g.mig_enabled));
            let l = node_labels(n, "success");
            let r = i64::from(s.replicas);
            assert_eq!(l[labels::GPU_REPLICAS], r.to_string());
            assert_eq!(l[labels::GPU_SHARING_STRATEGY], s.strategy.label());
            assert_eq!(l[labels::GPU_COUNT], "8");
            assert_eq!(l[labels::DEVICE_PLUGIN_CONFIG], s.config);
            let product = n.model.product_label();
            if s.renamed {
                assert_eq!(l[labels::GPU_PRODUCT], product);
            } else {
                assert_eq!(l[labels::GPU_PRODUCT], format!("{product}{}", labels::SHARED_PRODUCT_SUFFIX));
            }
            assert_eq!(
                l.get(labels::MPS_CAPABLE).map(String::as_str),
                (s.strategy == SharingStrategy::Mps).then_some("true")
            );
            let (cap, alloc) = resources(n, false, &[]);
            let (have, not) = if s.renamed {
                (labels::GPU_SHARED_RESOURCE, labels::GPU_RESOURCE)
            } else {
                (labels::GPU_RESOURCE, labels::GPU_SHARED_RESOURCE)
            };
            assert_eq!(cap[have], (8 * r).to_string(), "{}", n.name);
            assert_eq!(alloc[have], (8 * r).to_string());
            assert!(cap.get(not).is_none());
            // Paused for a MIG change: none allocatable.
            assert_eq!(resources(n, true, &[]).1[have], "0");
            match (s.strategy, s.renamed) {
                (SharingStrategy::TimeSlicing, false) => seen.0 = true,
                (SharingStrategy::Mps, _) => seen.1 = true,
                (SharingStrategy::TimeSlicing, true) => seen.2 = true,
            }
        }
        assert_eq!(seen, (true, true, true), "time-slicing, MPS and renamed");
        // Unshared nodes say so, as GFD does.
        let plain = all.iter().find(|n| n.sharing.is_none() && !n.dra).expect("a plain node");
        let l = node_labels(plain, "success");
        assert_eq!((l[labels::GPU_REPLICAS].as_str(), l[labels::GPU_SHARING_STRATEGY].as_str()), ("1", "none"));
        assert!(!l.contains_key(labels::MPS_CAPABLE) && !l.contains_key(labels::DEVICE_PLUGIN_CONFIG));
        // A MIG change on a shared node: the GPUs left whole still advertise their replicas.
        let mut n = shared[0].clone();
        let r = i64::from(n.sharing.as_ref().map(|s| s.replicas).unwrap_or(1));
        let layout = mig::parse_layout(n.model, "1g.10gb,1g.10gb").expect("layout");
        apply_layouts(&mut n, &[(0, layout)], "custom").expect("applies");
        let res = gpu_resources(&n);
        assert_eq!(res.get(n.sharing.as_ref().map(|s| s.resource()).unwrap_or_default()), Some(&(7 * r)));
    }

    #[test]
    fn without_sharing_the_nodes_are_the_same() {
        let a = build_nodes(42, 24, 4, 0);
        assert!(a.iter().all(|n| n.sharing.is_none()));
        assert_eq!(a, build_nodes(42, 24, 4, 100), "a period longer than the fleet shares nothing");
        for n in a.iter().filter(|n| !n.dra) {
            let res = gpu_resources(n);
            assert!(!res.contains_key(labels::GPU_SHARED_RESOURCE));
            assert_eq!(res[labels::GPU_RESOURCE], n.gpus.iter().filter(|g| !g.mig_enabled).count() as i64);
            assert_eq!(node_labels(n, "success")[labels::GPU_PRODUCT], n.model.product_label());
        }
    }

    #[test]
    fn device_classes_select_by_type() {
        let c = device_class(labels::DRA_MIG_CLASS, "mig");
        assert_eq!(
            c["spec"]["selectors"][0]["cel"]["expression"],
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
        );
        let typed: Result<k8s_openapi::api::resource::v1::DeviceClass, _> = serde_json::from_value(c);
        assert!(typed.is_ok());
    }
}
