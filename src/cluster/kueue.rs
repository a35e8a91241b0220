//! Kueue's Workloads (`kueue.x-k8s.io` v1beta2, or v1beta1 on an older Kueue) read into the
//! model: a pure function over one object, for the feed (whose translator fills in the
//! ClusterQueue of a Workload not admitted yet from its LocalQueue) and for the operations
//! that read a Workload again before and after changing it.

use kube::api::DynamicObject;
use serde_json::Value;

use super::labels as l;
use crate::model::kueue::device_count;
use crate::model::{KueueWorkload, WorkloadCondition};

fn text(v: &Value) -> Option<String> {
    v.as_str().filter(|s| !s.is_empty()).map(str::to_string)
}

pub(crate) fn time(v: &Value) -> Option<u64> {
    let t: k8s_openapi::jiff::Timestamp = v.as_str()?.parse().ok()?;
    Some(t.as_millisecond().max(0) as u64)
}

/// A device resource the cockpit counts (GPUs, their shared replicas, MIG slices).
/// A device count in a JSON quantity: a string (`"4"`) or a number (`4`).
fn count(v: &Value) -> Option<i64> {
    match v {
        Value::String(s) => device_count(s),
        Value::Number(n) => device_count(&n.to_string()),
        _ => None,
    }
}

fn gpu_resource(k: &str) -> bool {
    k == l::GPU_RESOURCE || k == l::GPU_SHARED_RESOURCE || k.starts_with(l::MIG_RESOURCE_PREFIX)
}

/// GPU devices one pod of a pod set asks for: per container, its requests (or its limits,
/// which are the requests of an extended resource that names none).
fn per_pod_gpus(template: &Value) -> i64 {
    let containers = template["spec"]["containers"].as_array().into_iter().flatten();
    containers
        .map(|c| {
            let r = &c["resources"];
            let of = |m: &Value| -> Vec<(String, i64)> {
                m.as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(k, _)| gpu_resource(k))
                    .filter_map(|(k, v)| Some((k.clone(), count(v)?)))
                    .collect()
            };
            let req = of(&r["requests"]);
            let lim = of(&r["limits"]);
            let mut names: Vec<&String> = req.iter().chain(lim.iter()).map(|(k, _)| k).collect();
            names.sort();
            names.dedup();
            names
                .into_iter()
                .map(|k| {
                    let find = |v: &[(String, i64)]| v.iter().find(|(n, _)| n == k).map(|(_, c)| *c);
                    find(&req).or_else(|| find(&lim)).unwrap_or(0)
                })
                .sum::<i64>()
        })
        .sum()
}

/// A Kueue Workload; `None` without a name.
pub fn workload(o: &DynamicObject) -> Option<KueueWorkload> {
    let name = o.metadata.name.clone()?;
    let namespace = o.metadata.namespace.clone().unwrap_or_default();
    let spec = o.data.get("spec").unwrap_or(&Value::Null);
    let status = o.data.get("status").unwrap_or(&Value::Null);
    let owner = o
        .metadata
        .owner_references
        .as_ref()
        .and_then(|r| r.iter().find(|r| r.controller == Some(true)).or_else(|| r.first()))
        .map(|r| format!("{}/{}", r.kind, r.name))
        .unwrap_or_default();
    let (mut pods, mut gpus) = (0u32, 0i64);
    for ps in spec["podSets"].as_array().into_iter().flatten() {
        let n = ps["count"].as_u64().unwrap_or(1).min(u64::from(u32::MAX)) as u32;
        pods = pods.saturating_add(n);
        gpus = gpus.saturating_add(per_pod_gpus(&ps["template"]).saturating_mul(i64::from(n)));
    }
    let admission = &status["admission"];
    let mut flavors: Vec<String> = admission["podSetAssignments"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|a| a["flavors"].as_object().into_iter().flatten().filter_map(|(_, f)| text(f)))
        .collect();
    flavors.sort();
    flavors.dedup();
    let conditions = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| {
            Some(WorkloadCondition {
                kind: text(&c["type"])?,
                status: c["status"].as_str() == Some("True"),
                reason: text(&c["reason"]).unwrap_or_default(),
                message: text(&c["message"]).unwrap_or_default(),
                since: time(&c["lastTransitionTime"]),
            })
        })
        .collect();
    let priority_class = text(&spec["priorityClassRef"]["name"]).or_else(|| text(&spec["priorityClassName"]));
    Some(KueueWorkload {
        uid: o.metadata.uid.clone().unwrap_or_default(),
        queue: text(&spec["queueName"]).unwrap_or_default(),
        cluster_queue: text(&admission["clusterQueue"]).unwrap_or_default(),
        priority: spec["priority"].as_i64().map_or(0, |p| p.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32),
        priority_class: priority_class.unwrap_or_default(),
        active: spec["active"].as_bool().unwrap_or(true),
        owner,
        pods,
        gpus,
        flavors,
        conditions,
        created: o.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_millisecond().max(0) as u64),
        namespace,
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::WorkloadState;

    #[test]
    fn a_workload_reads_its_queue_gpus_flavors_and_conditions() {
        let o: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "job-train-a-1f2e3", "namespace": "ml", "uid": "u-1",
                "creationTimestamp": "2026-12-06T06:00:00Z",
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train-a", "uid": "j-1", "controller": true}]},
            "spec": {"queueName": "lq-train", "priority": 100, "priorityClassRef": {"name": "high", "kind": "WorkloadPriorityClass"},
                "podSets": [
                    {"name": "main", "count": 3, "template": {"spec": {"containers": [
                        {"name": "c", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "2"}}},
                        {"name": "side", "resources": {"limits": {"nvidia.com/mig-1g.10gb": 1}}}]}}},
                    {"name": "launcher", "template": {"spec": {"containers": [{"name": "l"}]}}}]},
            "status": {
                "admission": {"clusterQueue": "cq-train", "podSetAssignments": [
                    {"name": "main", "flavors": {"nvidia.com/gpu": "h100", "nvidia.com/mig-1g.10gb": "h100-mig"}},
                    {"name": "launcher", "flavors": {"cpu": "h100"}}]},
                "conditions": [
                    {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "Quota reserved in ClusterQueue cq-train", "lastTransitionTime": "2026-12-06T06:01:00Z"},
                    {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted", "lastTransitionTime": "2026-12-06T06:01:00Z"}]}
        }))
        .expect("a Workload");
        let w = workload(&o).expect("read");
        assert_eq!((w.namespace.as_str(), w.name.as_str(), w.uid.as_str()), ("ml", "job-train-a-1f2e3", "u-1"));
        assert_eq!((w.queue.as_str(), w.cluster_queue.as_str()), ("lq-train", "cq-train"));
        assert_eq!((w.priority, w.priority_class.as_str(), w.active), (100, "high", true));
        assert_eq!(w.owner, "Job/train-a");
        assert_eq!(w.pods, 4, "3 workers and a launcher");
        assert_eq!(w.gpus, 9, "3 × (2 GPUs + 1 MIG slice); the launcher asks for none");
        assert_eq!(w.flavors, ["h100", "h100-mig"]);
        assert_eq!(w.state(), WorkloadState::Admitted);
        assert_eq!(w.conditions[0].since, Some(1_796_536_860_000));
    }

    #[test]
    fn a_bare_workload_is_pending_and_active() {
        let o: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ml"},
            "spec": {"queueName": "lq", "priorityClassName": "low", "active": false,
                "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                    {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1.5"}}}]}}}]}
        }))
        .expect("a Workload");
        let w = workload(&o).expect("read");
        assert_eq!((w.cluster_queue.as_str(), w.priority_class.as_str(), w.active), ("", "low", false));
        assert_eq!((w.pods, w.gpus), (1, 0), "a fractional GPU count is no device count");
        assert_eq!(w.state(), WorkloadState::Inactive);
    }
}
