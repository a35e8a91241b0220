//! Kubernetes objects → model deltas. Pure functions over one object at a time; the little
//! state that joins objects (which namespace belongs to which tenant, which device a DRA
//! claim got, which GPUs a node's labels or ResourceSlices announced) lives in
//! [`super::Translator`]. Nothing here keeps a whole object.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Event, Namespace, Node, Pod, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as KQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::cluster::labels as l;
use crate::mig::{self, GpuModel, Layout, PlacedInstance};
use crate::model::{
    DraClaimSpec, EventSpec, GpuSpec, MigConfigState, MigInstanceSpec, NodeSpec, PdbSpec, Phase, PodSpec, QuotaSpec,
    Severity, Ts,
};
use crate::quantity::Quantity;

pub fn ts(t: Option<&Time>) -> Ts {
    t.map(|t| t.0.as_millisecond().max(0) as u64).unwrap_or(0)
}

/// Labels worth keeping on a node: the GPU stack's and the well-known topology ones. A
/// cluster node carries dozens; the model keeps only what a view or a plan reads.
fn keep_label(k: &str) -> bool {
    k.starts_with("nvidia.com/")
        || k.starts_with("node-role.kubernetes.io/")
        || k.starts_with("topology.kubernetes.io/")
        || k.starts_with("fabrik.io/")
        || k == "node.kubernetes.io/instance-type"
}

/// An extended or device resource the cockpit counts (GPUs, their shared replicas, MIG slices).
fn gpu_resource(k: &str) -> bool {
    k == l::GPU_RESOURCE || k == l::GPU_SHARED_RESOURCE || k.starts_with(l::MIG_RESOURCE_PREFIX)
}

/// A whole-number quantity (a device count); `None` for a fractional or malformed one.
fn count(q: &KQuantity) -> Option<i64> {
    let parsed = Quantity::parse(&q.0).ok()?;
    parsed.is_integer().then(|| parsed.value())
}

fn resources(map: Option<&BTreeMap<String, KQuantity>>) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = map
        .into_iter()
        .flatten()
        .filter(|(k, _)| gpu_resource(k))
        .filter_map(|(k, v)| Some((k.clone(), count(v)?)))
        .collect();
    out.sort();
    out
}

pub fn node_spec(n: &Node) -> Option<NodeSpec> {
    let name = n.metadata.name.clone()?;
    let labels = n.metadata.labels.as_ref();
    let label = |k: &str| labels.and_then(|m| m.get(k)).map(String::as_str);
    let status = n.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    // The label's change time is only in managedFields, which the watch strips; the fleet
    // counts from when it first saw the state.
    let mig_state_since = None;
    let ready_since = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| ts(Some(t)));
    Some(NodeSpec {
        labels: labels
            .into_iter()
            .flatten()
            .filter(|(k, _)| keep_label(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        ready,
        cordoned: n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
        cordoned_by: n.metadata.annotations.as_ref().and_then(|a| a.get(l::CORDONED_BY)).cloned().unwrap_or_default(),
        gpu_model: label(l::GPU_PRODUCT).and_then(GpuModel::parse),
        capacity: resources(status.and_then(|s| s.capacity.as_ref())),
        allocatable: resources(status.and_then(|s| s.allocatable.as_ref())),
        mig_config: label(l::MIG_CONFIG).unwrap_or_default().to_string(),
        mig_state: label(l::MIG_CONFIG_STATE).map(MigConfigState::parse).unwrap_or_default(),
        mig_state_since,
        ready_since,
        created: ts(n.metadata.creation_timestamp.as_ref()),
        name,
    })
}

/// GPUs announced by a node's labels (device plugin + GFD), for nodes without a DRA
/// ResourceSlice. Their uuids are not on the API (only the node agent knows them), so they
/// are named `<node>/gpu-<i>`; MIG instances come from the node's `mig.config` when it is a
/// named config the catalog knows, else from the advertised `nvidia.com/mig-*` counts.
pub fn label_gpus(spec: &NodeSpec) -> Vec<GpuSpec> {
    let label = |k: &str| spec.labels.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    let Some(model) = spec.gpu_model else { return Vec::new() };
    // The physical count: GFD's label, else what the device plugin advertises over the
    // replicas per GPU (a shared node advertises replicas, never GPUs); not on a MIG node,
    // whose `nvidia.com/gpu` counts only the GPUs with MIG off.
    let sharing = crate::model::Sharing::of_node(&spec.labels, &spec.capacity);
    let advertised = |r: &str| spec.capacity.iter().find(|(k, _)| k == r).map(|(_, v)| *v);
    let from_capacity = || {
        if spec.capacity.iter().any(|(k, _)| k.starts_with(l::MIG_RESOURCE_PREFIX)) {
            return None;
        }
        let n = advertised(l::GPU_SHARED_RESOURCE).or_else(|| advertised(l::GPU_RESOURCE))?;
        u8::try_from(n / i64::from(sharing.replicas)).ok().filter(|n| *n > 0)
    };
    let Some(n) = label(l::GPU_COUNT).and_then(|c| c.parse::<u8>().ok()).or_else(from_capacity) else {
        return Vec::new();
    };
    let memory_mib = label(l::GPU_MEMORY).and_then(|m| m.parse::<u32>().ok()).unwrap_or(model.memory_mib());
    let mig_on = !spec.mig_config.is_empty() && spec.mig_config != "all-disabled";
    let layouts: Vec<Layout> = if !mig_on {
        vec![Layout::Disabled; n as usize]
    } else if let Ok(layout) = mig::named_config(model, &spec.mig_config) {
        vec![layout; n as usize]
    } else {
        layouts_from_counts(model, n, &spec.allocatable)
    };
    (0..n)
        .map(|i| {
            let uuid = format!("{}/gpu-{i}", spec.name);
            let layout = layouts.get(i as usize).cloned().unwrap_or(Layout::Disabled);
            let (mig_enabled, placed) = match &layout {
                Layout::Disabled => (false, Vec::new()),
                Layout::Enabled(p) => (true, mig::plan(model, p).unwrap_or_default()),
            };
            GpuSpec {
                instances: placed
                    .into_iter()
                    .map(|placement| MigInstanceSpec {
                        uuid: format!("{uuid}/mig-{}-{}", mig::profile(model, placement.profile).name, placement.start),
                        placement,
                    })
                    .collect(),
                uuid,
                node: spec.name.clone(),
                index: i,
                model,
                memory_mib,
                mig_enabled,
            }
        })
        .collect()
}

/// Spreads advertised MIG instance counts over `n` GPUs, filling each GPU before the next.
fn layouts_from_counts(model: GpuModel, n: u8, allocatable: &[(String, i64)]) -> Vec<Layout> {
    let mut want: Vec<mig::ProfileId> = Vec::new();
    for (r, c) in allocatable {
        if let Some(p) = mig::profile_from_resource(model, r) {
            want.extend(std::iter::repeat_n(p, (*c).clamp(0, 64) as usize));
        }
    }
    // Big profiles first: they are the ones placement constrains.
    want.sort_by_key(|p| std::cmp::Reverse(mig::profile(model, *p).memory_slices));
    let mut gpus: Vec<Vec<mig::ProfileId>> = vec![Vec::new(); n as usize];
    for p in want {
        for g in gpus.iter_mut() {
            let mut trial = g.clone();
            trial.push(p);
            if mig::plan(model, &trial).is_ok() {
                *g = trial;
                break;
            }
        }
    }
    gpus.into_iter().map(|g| if g.is_empty() { Layout::Disabled } else { Layout::Enabled(g) }).collect()
}

/// One device of a ResourceSlice, as the model sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum SliceDevice {
    Gpu {
        name: String,
        uuid: String,
        index: u8,
        model: Option<GpuModel>,
        memory_mib: u32,
    },
    /// A MIG device; `index` and `model` are its parent's (from the device name and the
    /// parent attributes the driver copies), for a parent GPU the slice does not list.
    Mig {
        name: String,
        uuid: String,
        parent: String,
        profile: String,
        start: Option<u8>,
        index: u8,
        model: Option<GpuModel>,
    },
}

impl SliceDevice {
    pub fn name(&self) -> &str {
        match self {
            Self::Gpu { name, .. } | Self::Mig { name, .. } => name,
        }
    }
    pub fn uuid(&self) -> &str {
        match self {
            Self::Gpu { uuid, .. } | Self::Mig { uuid, .. } => uuid,
        }
    }
}

/// The node and the GPU / MIG devices of a `gpu.nvidia.com` ResourceSlice (protocols.md §5).
pub fn slice_devices(s: &ResourceSlice) -> Option<(String, String, Vec<SliceDevice>)> {
    if s.spec.driver != l::DRA_DRIVER {
        return None;
    }
    let node = s.spec.node_name.clone()?;
    let pool = s.spec.pool.name.clone();
    let mut out = Vec::new();
    for d in s.spec.devices.iter().flatten() {
        let attr =
            |k: &str| d.attributes.as_ref().and_then(|a| a.get(k).or_else(|| a.get(&format!("{}/{k}", l::DRA_DRIVER))));
        let s_attr = |k: &str| attr(k).and_then(|v| v.string.clone());
        let Some(uuid) = s_attr("uuid") else { continue };
        let cap = |k: &str| d.capacity.as_ref().and_then(|c| c.get(k)).map(|c| &c.value);
        match s_attr("type").as_deref() {
            Some("gpu") => {
                let index = d.name.strip_prefix("gpu-").and_then(|i| i.parse::<u8>().ok()).unwrap_or(0);
                let bytes = cap("memory").and_then(|q| Quantity::parse(&q.0).ok()).map(Quantity::as_f64).unwrap_or(0.0);
                out.push(SliceDevice::Gpu {
                    name: d.name.clone(),
                    uuid,
                    index,
                    model: s_attr("productName").as_deref().and_then(GpuModel::parse),
                    memory_mib: (bytes / (1024.0 * 1024.0)) as u32,
                });
            }
            Some("mig") => {
                let start = d
                    .capacity
                    .as_ref()
                    .into_iter()
                    .flatten()
                    .filter_map(|(k, _)| k.strip_prefix("memorySlice")?.parse::<u8>().ok())
                    .min();
                let index = d
                    .name
                    .strip_prefix("gpu-")
                    .and_then(|r| r.split('-').next())
                    .and_then(|i| i.parse::<u8>().ok())
                    .unwrap_or(0);
                out.push(SliceDevice::Mig {
                    name: d.name.clone(),
                    uuid,
                    parent: s_attr("parentUUID").unwrap_or_default(),
                    profile: s_attr("profile").unwrap_or_default(),
                    start,
                    index,
                    model: s_attr("productName").as_deref().and_then(GpuModel::parse),
                });
            }
            _ => {}
        }
    }
    Some((node, pool, out))
}

/// GPUs (with their MIG instances) from the devices of a node's slices.
pub fn slice_gpus(node: &str, node_model: Option<GpuModel>, devices: &[SliceDevice]) -> Vec<GpuSpec> {
    let mut gpus: Vec<GpuSpec> = devices
        .iter()
        .filter_map(|d| match d {
            SliceDevice::Gpu { uuid, index, model, memory_mib, .. } => {
                let model = model.or(node_model)?;
                Some(GpuSpec {
                    uuid: uuid.clone(),
                    node: node.to_string(),
                    index: *index,
                    model,
                    memory_mib: if *memory_mib > 0 { *memory_mib } else { model.memory_mib() },
                    mig_enabled: false,
                    instances: Vec::new(),
                })
            }
            SliceDevice::Mig { .. } => None,
        })
        .collect();
    for d in devices {
        let SliceDevice::Mig { uuid, parent, profile, start, index, model, .. } = d else { continue };
        if parent.is_empty() {
            continue;
        }
        // With MIG on, the driver announces the instances, not the whole GPU: the parent
        // is known by its uuid and the attributes it passes down.
        if !gpus.iter().any(|g| &g.uuid == parent)
            && let Some(model) = model.or(node_model)
        {
            gpus.push(GpuSpec {
                uuid: parent.clone(),
                node: node.to_string(),
                index: *index,
                model,
                memory_mib: model.memory_mib(),
                mig_enabled: true,
                instances: Vec::new(),
            });
        }
        let Some(g) = gpus.iter_mut().find(|g| &g.uuid == parent) else { continue };
        g.mig_enabled = true;
        let Some(p) = mig::find_profile(g.model, profile) else { continue };
        let start = start.unwrap_or(0);
        g.instances.push(MigInstanceSpec { placement: PlacedInstance { profile: p, start }, uuid: uuid.clone() });
    }
    gpus.sort_by_key(|g| g.index);
    gpus
}

/// The pod as the model keeps it. DRA claims carry only their names here; the translator
/// fills in device class, count and allocation from the claims it has seen.
pub fn pod_spec(p: &Pod) -> Option<PodSpec> {
    let name = p.metadata.name.clone()?;
    let namespace = p.metadata.namespace.clone()?;
    let spec = p.spec.as_ref()?;
    let phase = if p.metadata.deletion_timestamp.is_some() {
        Phase::Terminating
    } else {
        Phase::parse(p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending"))
    };
    let mut gpus = 0u16;
    let mut gpus_renamed = false;
    let mut mig: BTreeMap<String, u16> = BTreeMap::new();
    for c in &spec.containers {
        let Some(r) = c.resources.as_ref() else { continue };
        // Extended resources: limits and requests must be equal; either names the count.
        let map = r.limits.as_ref().or(r.requests.as_ref());
        for (k, v) in map.into_iter().flatten() {
            let Some(n) = count(v).and_then(|n| u16::try_from(n).ok()) else { continue };
            // A renamed shared resource can only be met on a shared node, where the model
            // counts a pod's `gpus` as replicas.
            if k == l::GPU_RESOURCE || k == l::GPU_SHARED_RESOURCE {
                gpus = gpus.saturating_add(n);
                gpus_renamed |= k == l::GPU_SHARED_RESOURCE;
            } else if k.starts_with(l::MIG_RESOURCE_PREFIX) {
                let sum = mig.entry(k.clone()).or_default();
                *sum = sum.saturating_add(n);
            }
        }
    }
    let statuses = p.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref());
    let dra =
        spec.resource_claims
            .iter()
            .flatten()
            .filter_map(|rc| {
                let claim = rc.resource_claim_name.clone().or_else(|| {
                    statuses?.iter().find(|s| s.name == rc.name).and_then(|s| s.resource_claim_name.clone())
                })?;
                Some(DraClaimSpec { claim, device_class: String::new(), count: 0, allocated: None })
            })
            .collect();
    let labels = p.metadata.labels.as_ref();
    let app = labels
        .and_then(|m| m.get("app").or_else(|| m.get("app.kubernetes.io/name")).or_else(|| m.get("job-name")))
        .cloned()
        .unwrap_or_default();
    Some(PodSpec {
        node: spec.node_name.clone().filter(|n| !n.is_empty()),
        phase,
        created: ts(p.metadata.creation_timestamp.as_ref()),
        started: p.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| ts(Some(t))),
        owner: crate::cluster::pod_owner(p),
        owner_name: crate::cluster::pod_owner_name(p).unwrap_or_default(),
        app,
        empty_dir: spec.volumes.iter().flatten().any(|v| v.empty_dir.is_some()),
        gpus,
        gpus_renamed,
        mig: mig.into_iter().collect(),
        dra,
        claim_templates: spec
            .resource_claims
            .iter()
            .flatten()
            .filter_map(|rc| rc.resource_claim_template_name.clone())
            .collect(),
        bound_gpus: Vec::new(),
        bound_mig: Vec::new(),
        deletion: crate::cluster::pod_deletion(p),
        container_waiting: container_waiting(p),
        restarts: crate::cluster::kubelet::restarts(p),
        namespace,
        name,
    })
}

/// The first container (init containers first, as they run first) waiting for another
/// reason than being created: `(reason, message)`, as `kubectl get pods` shows its reason.
fn container_waiting(p: &Pod) -> Option<(String, String)> {
    let st = p.status.as_ref()?;
    let all = st.init_container_statuses.iter().flatten().chain(st.container_statuses.iter().flatten());
    all.filter_map(|c| c.state.as_ref()?.waiting.as_ref()).find_map(|w| {
        let reason = w.reason.as_deref().filter(|r| !r.is_empty())?;
        let being_created = matches!(reason, "ContainerCreating" | "PodInitializing");
        (!being_created).then(|| (reason.to_string(), w.message.clone().unwrap_or_default()))
    })
}

/// What a DRA claim asked for and got.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClaimInfo {
    pub device_class: String,
    pub count: u16,
    /// (pool, device) of each allocated device...
    pub allocated: Vec<(String, String)>,
    /// ...and, for a device shared by capacity, what the claim consumes of it.
    pub consumed: Vec<Vec<(String, i64)>>,
    /// The claim holds no GPU: it was allocated only devices of other drivers (an IMEX
    /// channel of a ComputeDomain, a NIC), or, not allocated yet, asks for a ComputeDomain
    /// class. Such a claim is no GPU request; an unallocated claim of a class fabrik does
    /// not know still counts as one (the class's selector is not read).
    pub not_gpu: bool,
}

pub fn claim_info(c: &ResourceClaim) -> ClaimInfo {
    let mut info = ClaimInfo::default();
    for r in &c.spec.devices.as_ref().map(|d| d.requests.clone()).unwrap_or_default().unwrap_or_default() {
        if let Some(e) = &r.exactly {
            if info.device_class.is_empty() {
                info.device_class = e.device_class_name.clone();
            }
            let n = match e.allocation_mode.as_deref() {
                Some("All") => 0,
                _ => e.count.unwrap_or(1),
            };
            info.count = info.count.saturating_add(u16::try_from(n).unwrap_or(u16::MAX));
        } else if let Some(first) = r.first_available.as_ref().and_then(|f| f.first()) {
            if info.device_class.is_empty() {
                info.device_class = first.device_class_name.clone();
            }
            info.count = info.count.saturating_add(u16::try_from(first.count.unwrap_or(1)).unwrap_or(u16::MAX));
        }
    }
    info.not_gpu = [l::CD_CHANNEL_CLASS, l::CD_DAEMON_CLASS].contains(&info.device_class.as_str());
    if let Some(alloc) = c.status.as_ref().and_then(|s| s.allocation.as_ref()).and_then(|a| a.devices.as_ref()) {
        let results = alloc.results.as_deref().unwrap_or_default();
        info.not_gpu = !results.is_empty() && results.iter().all(|r| r.driver != l::DRA_DRIVER);
        for r in results {
            if r.driver == l::DRA_DRIVER {
                info.allocated.push((r.pool.clone(), r.device.clone()));
                let consumed = r.consumed_capacity.iter().flatten();
                info.consumed
                    .push(consumed.filter_map(|(k, q)| Some((k.clone(), super::dra::amount(&q.0)?))).collect());
            }
        }
        if info.count == 0 {
            info.count = u16::try_from(info.allocated.len()).unwrap_or(u16::MAX);
        }
    }
    info
}

/// The tenant a namespace's labels name (`label`: the configured key).
pub fn namespace_tenant(ns: &Namespace, label: &str) -> Option<String> {
    ns.metadata.labels.as_ref()?.get(label).filter(|v| !v.is_empty()).cloned()
}

/// Quota keys the cockpit shows: GPUs, MIG slices and DRA device counts.
pub fn quota_key(k: &str) -> bool {
    let r = k.strip_prefix("requests.").unwrap_or(k);
    gpu_resource(r) || k.ends_with(".deviceclass.resource.k8s.io/devices")
}

pub fn quota_specs(q: &ResourceQuota, tenant: &str) -> Vec<QuotaSpec> {
    let (Some(ns), Some(name)) = (q.metadata.namespace.clone(), q.metadata.name.clone()) else { return Vec::new() };
    let hard = q.spec.as_ref().and_then(|s| s.hard.as_ref());
    // The limit the API server enforces is the status's (the quota controller copies the
    // spec there); the spec's stands in until it has.
    let enforced = q.status.as_ref().and_then(|s| s.hard.as_ref());
    let used = q.status.as_ref().and_then(|s| s.used.as_ref());
    let version = q.metadata.resource_version.clone().unwrap_or_default();
    hard.into_iter()
        .flatten()
        .filter(|(k, _)| quota_key(k))
        .filter_map(|(k, v)| {
            let v = enforced.and_then(|h| h.get(k)).unwrap_or(v);
            let hard = Quantity::parse(&v.0).ok()?;
            let used = used.and_then(|u| u.get(k)).and_then(|u| Quantity::parse(&u.0).ok()).unwrap_or_default();
            Some(QuotaSpec {
                tenant: tenant.to_string(),
                source: crate::model::QuotaSourceSpec::ResourceQuota { namespace: ns.clone(), name: name.clone() },
                resource: k.clone(),
                hard,
                used,
                version: version.clone(),
                borrowing_limit: None,
                lending_limit: None,
            })
        })
        .collect()
}

pub fn pdb_spec(p: &PodDisruptionBudget) -> Option<PdbSpec> {
    let st = p.status.as_ref();
    Some(PdbSpec {
        namespace: p.metadata.namespace.clone()?,
        name: p.metadata.name.clone()?,
        selector_app: p
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .and_then(|s| s.match_labels.as_ref())
            .and_then(|m| m.get("app").or_else(|| m.get("app.kubernetes.io/name")))
            .cloned()
            .unwrap_or_default(),
        disruptions_allowed: st.map(|s| s.disruptions_allowed).unwrap_or(0),
        current_healthy: st.map(|s| s.current_healthy).unwrap_or(0),
        desired_healthy: st.map(|s| s.desired_healthy).unwrap_or(0),
    })
}

pub fn event_spec(e: &Event) -> EventSpec {
    let ts = e
        .last_timestamp
        .as_ref()
        .map(|t| t.0.as_millisecond().max(0) as u64)
        .or_else(|| e.event_time.as_ref().map(|t| t.0.as_millisecond().max(0) as u64))
        .unwrap_or_else(|| ts(e.metadata.creation_timestamp.as_ref()));
    let o = &e.involved_object;
    let object = match (&o.kind, &o.namespace, &o.name) {
        (Some(k), Some(ns), Some(n)) if !ns.is_empty() => format!("{}/{ns}/{n}", k.to_lowercase()),
        (Some(k), _, Some(n)) => format!("{}/{n}", k.to_lowercase()),
        (_, _, Some(n)) => n.clone(),
        _ => String::new(),
    };
    EventSpec {
        ts,
        severity: if e.type_.as_deref() == Some("Warning") { Severity::Warning } else { Severity::Info },
        reason: e.reason.clone().unwrap_or_default(),
        object,
        message: e.message.clone().unwrap_or_default(),
    }
}

/// Nominal quota per flavor for the GPU and MIG resources of a Kueue ClusterQueue, with
/// what is in use (`status.flavorsUsage`) and its borrowing and lending limits; the tenant
/// is the queue itself.
pub fn cluster_queue_quotas(q: &kube::api::DynamicObject, name: &str) -> Vec<QuotaSpec> {
    let version = q.metadata.resource_version.clone().unwrap_or_default();
    let used_of = |flavor: &str, resource: &str| -> Option<Quantity> {
        let usage = q.data.get("status")?.get("flavorsUsage")?.as_array()?;
        let f = usage.iter().find(|f| f.get("name").and_then(|n| n.as_str()) == Some(flavor))?;
        let r = f
            .get("resources")?
            .as_array()?
            .iter()
            .find(|r| r.get("name").and_then(|n| n.as_str()) == Some(resource))?;
        quantity_of(r.get("total")?)
    };
    let mut out = Vec::new();
    let groups = q.data.get("spec").and_then(|s| s.get("resourceGroups")).and_then(|g| g.as_array());
    for g in groups.into_iter().flatten() {
        for f in g.get("flavors").and_then(|f| f.as_array()).into_iter().flatten() {
            let Some(flavor) = f.get("name").and_then(|n| n.as_str()) else { continue };
            for r in f.get("resources").and_then(|r| r.as_array()).into_iter().flatten() {
                let Some(resource) = r.get("name").and_then(|n| n.as_str()) else { continue };
                if !gpu_resource(resource) {
                    continue;
                }
                let Some(hard) = r.get("nominalQuota").and_then(quantity_of) else { continue };
                out.push(QuotaSpec {
                    tenant: name.to_string(),
                    source: crate::model::QuotaSourceSpec::ClusterQueue {
                        queue: name.to_string(),
                        flavor: flavor.to_string(),
                    },
                    resource: resource.to_string(),
                    hard,
                    used: used_of(flavor, resource).unwrap_or_default(),
                    version: version.clone(),
                    borrowing_limit: r.get("borrowingLimit").and_then(quantity_of),
                    lending_limit: r.get("lendingLimit").and_then(quantity_of),
                });
            }
        }
    }
    out
}

/// A quantity as JSON gives it: a string (`"8"`, `"500m"`) or a number.
fn quantity_of(v: &serde_json::Value) -> Option<Quantity> {
    match v {
        serde_json::Value::String(s) => Quantity::parse(s).ok(),
        serde_json::Value::Number(n) => Quantity::parse(&n.to_string()).ok(),
        _ => None,
    }
}
