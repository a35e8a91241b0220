//! DRA's alpha features, read from the objects (protocols.md §5): a ResourceSlice's shared
//! counters and what each device consumes (`DRAPartitionableDevices`), devices allocated
//! to several claims by capacity (`DRAConsumableCapacity`), device taints
//! (`DRADeviceTaints`, in the slice or from a `DeviceTaintRule`), and the NVIDIA driver's
//! ComputeDomains. Pure functions over one object at a time; the translator joins them.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{Counter, ResourceSlice};
use kube::api::DynamicObject;
use serde_json::Value;

use super::translate::ts;
use crate::cluster::labels as l;
use crate::model::{ComputeDomainSpec, DeviceTaint, DomainNode};
use crate::quantity::Quantity;

/// Counter name → amount.
pub type Counters = Vec<(String, i64)>;

/// What one device of a slice says beyond its identity.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceExtras {
    /// The GPU it is (a `gpu` device) or is part of (a `mig` device's parentUUID).
    pub gpu_uuid: String,
    pub mig: bool,
    pub profile: String,
    /// Counter set → what the device takes from it.
    pub consumes: Vec<(String, Counters)>,
    pub taints: Vec<DeviceTaint>,
    pub multi: bool,
    pub capacity: Counters,
}

/// The extras of one slice: its counter sets and its devices' extras by device name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SliceExtras {
    pub counters: Vec<(String, Counters)>,
    pub devices: BTreeMap<String, DeviceExtras>,
}

/// A whole-number amount (`80Gi` → bytes); a fractional one is rounded down.
pub fn amount(q: &str) -> Option<i64> {
    let v = Quantity::parse(q).ok()?;
    Some(v.as_f64().floor() as i64)
}

fn counters(m: &BTreeMap<String, Counter>) -> Counters {
    m.iter().filter_map(|(k, c)| Some((k.clone(), amount(&c.value.0)?))).collect()
}

/// The extras of a `gpu.nvidia.com` slice; `None` for another driver's.
pub fn slice_extras(s: &ResourceSlice) -> Option<SliceExtras> {
    if s.spec.driver != l::DRA_DRIVER {
        return None;
    }
    let mut out = SliceExtras {
        counters: s.spec.shared_counters.iter().flatten().map(|c| (c.name.clone(), counters(&c.counters))).collect(),
        devices: BTreeMap::new(),
    };
    for d in s.spec.devices.iter().flatten() {
        let attr = |k: &str| {
            d.attributes
                .as_ref()
                .and_then(|a| a.get(k).or_else(|| a.get(&format!("{}/{k}", l::DRA_DRIVER))))
                .and_then(|v| v.string.clone())
        };
        let mig = attr("type").as_deref() == Some("mig");
        let gpu_uuid = if mig { attr("parentUUID") } else { attr("uuid") }.unwrap_or_default();
        let taints = d
            .taints
            .iter()
            .flatten()
            .map(|t| DeviceTaint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect: t.effect.clone(),
                device: d.name.clone(),
                rule: None,
                since: t.time_added.as_ref().map(|t| ts(Some(t))),
            })
            .collect();
        let extras = DeviceExtras {
            gpu_uuid,
            mig,
            profile: attr("profile").unwrap_or_default(),
            consumes: d
                .consumes_counters
                .iter()
                .flatten()
                .map(|c| (c.counter_set.clone(), counters(&c.counters)))
                .collect(),
            taints,
            multi: d.allow_multiple_allocations.unwrap_or(false),
            capacity: d.capacity.iter().flatten().filter_map(|(k, c)| Some((k.clone(), amount(&c.value.0)?))).collect(),
        };
        out.devices.insert(d.name.clone(), extras);
    }
    Some(out)
}

/// What a `DeviceTaintRule` selects and the taint it puts there.
#[derive(Clone, Debug, PartialEq)]
pub struct TaintRule {
    pub name: String,
    pub driver: Option<String>,
    pub pool: Option<String>,
    pub device: Option<String>,
    /// CEL selectors: not evaluated here, so such a rule is shown on no device.
    pub cel: bool,
    pub taint: DeviceTaint,
}

impl TaintRule {
    pub fn selects(&self, driver: &str, pool: &str, device: &str) -> bool {
        !self.cel
            && self.driver.as_deref().is_none_or(|d| d == driver)
            && self.pool.as_deref().is_none_or(|p| p == pool)
            && self.device.as_deref().is_none_or(|d| d == device)
    }
}

fn text(v: &Value) -> Option<String> {
    v.as_str().filter(|s| !s.is_empty()).map(str::to_string)
}

fn time(v: &Value) -> Option<u64> {
    let s = v.as_str()?;
    let t: k8s_openapi::jiff::Timestamp = s.parse().ok()?;
    Some(t.as_millisecond().max(0) as u64)
}

/// A `resource.k8s.io/v1alpha3` DeviceTaintRule.
pub fn taint_rule(o: &DynamicObject) -> Option<TaintRule> {
    let name = o.metadata.name.clone()?;
    let spec = o.data.get("spec")?;
    let sel = &spec["deviceSelector"];
    let t = &spec["taint"];
    Some(TaintRule {
        driver: text(&sel["driver"]),
        pool: text(&sel["pool"]),
        device: text(&sel["device"]),
        cel: sel["selectors"].as_array().is_some_and(|a| !a.is_empty()) || text(&sel["deviceClassName"]).is_some(),
        taint: DeviceTaint {
            key: text(&t["key"])?,
            value: text(&t["value"]).unwrap_or_default(),
            effect: text(&t["effect"])?,
            device: String::new(),
            rule: Some(name.clone()),
            since: time(&t["timeAdded"]),
        },
        name,
    })
}

/// A ComputeDomain of the NVIDIA DRA driver (`resource.nvidia.com`).
pub fn compute_domain(o: &DynamicObject) -> Option<ComputeDomainSpec> {
    let name = o.metadata.name.clone()?;
    let namespace = o.metadata.namespace.clone().unwrap_or_default();
    let spec = o.data.get("spec").cloned().unwrap_or(Value::Null);
    let status = o.data.get("status").cloned().unwrap_or(Value::Null);
    let nodes = status["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| {
            Some(DomainNode {
                name: text(&n["name"])?,
                status: text(&n["status"]).unwrap_or_default(),
                clique: text(&n["cliqueID"]).unwrap_or_default(),
            })
        })
        .collect();
    Some(ComputeDomainSpec {
        num_nodes: spec["numNodes"].as_u64().map_or(0, |n| n.min(u64::from(u32::MAX)) as u32),
        status: text(&status["status"]).unwrap_or_default(),
        nodes,
        claim_template: text(&spec["channel"]["resourceClaimTemplate"]["name"]).unwrap_or_default(),
        created: ts(o.metadata.creation_timestamp.as_ref()),
        namespace,
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dynamic(v: Value) -> DynamicObject {
        serde_json::from_value(v).expect("object")
    }

    #[test]
    fn a_taint_rule_selects_by_driver_pool_and_device() {
        let r = taint_rule(&dynamic(serde_json::json!({
            "apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule",
            "metadata": {"name": "fabrik-n1-gpu-3"},
            "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-3"},
                     "taint": {"key": "fabrik.io/taint", "value": "maintenance", "effect": "NoSchedule"}}
        })))
        .expect("rule");
        assert!(r.selects("gpu.nvidia.com", "n1", "gpu-3"));
        assert!(!r.selects("gpu.nvidia.com", "n1", "gpu-2"));
        assert!(!r.selects("gpu.nvidia.com", "n2", "gpu-3"));
        assert_eq!(r.taint.text(), "fabrik.io/taint=maintenance:NoSchedule");
        // Without a key or an effect it is not a taint: ignored, not guessed.
        assert!(
            taint_rule(&dynamic(serde_json::json!({
                "apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule",
                "metadata": {"name": "x"}, "spec": {"deviceSelector": {}, "taint": {"key": "k"}}
            })))
            .is_none()
        );
    }

    #[test]
    fn a_compute_domain_reads_its_status_per_node() {
        let d = compute_domain(&dynamic(serde_json::json!({
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
            "metadata": {"name": "cd", "namespace": "ml"},
            "spec": {"numNodes": 2, "channel": {"resourceClaimTemplate": {"name": "cd-channel"}}},
            "status": {"status": "NotReady", "nodes": [
                {"name": "n1", "ipAddress": "10.0.0.1", "cliqueID": "c.1", "status": "Ready"},
                {"name": "n2", "ipAddress": "10.0.0.2", "cliqueID": "c.1", "status": "NotReady"}]}
        })))
        .expect("domain");
        assert_eq!((d.num_nodes, d.nodes_ready(), d.ready()), (2, 1, false));
        assert_eq!(d.claim_template, "cd-channel");
    }
}
