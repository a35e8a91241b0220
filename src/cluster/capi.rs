//! Reading Cluster API objects (v1beta2, else v1beta1 layouts) into [`crate::model::Machine`]
//! and [`crate::model::CapiObject`].

use serde_json::Value;

use crate::model::{CapiKind, CapiObject, HealthCounts, Machine, Replicas};

/// The labels Cluster API puts on what a MachineDeployment, MachineSet or control plane owns.
pub const DEPLOYMENT_LABEL: &str = "cluster.x-k8s.io/deployment-name";
pub const SET_LABEL: &str = "cluster.x-k8s.io/set-name";
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane-name";
pub const CLUSTER_LABEL: &str = "cluster.x-k8s.io/cluster-name";

fn text(v: &Value) -> Option<String> {
    v.as_str().map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

/// The condition `kind` that is `False`, as `reason: message` (or either).
fn false_condition(status: &Value, kind: &str) -> Option<String> {
    let c = status["conditions"].as_array()?.iter().find(|c| c["type"] == kind && c["status"] == "False")?;
    Some(match (text(&c["reason"]), text(&c["message"])) {
        (Some(r), Some(m)) => format!("{r}: {m}"),
        (Some(r), None) => r,
        (None, Some(m)) => m,
        (None, None) => "False".into(),
    })
}

/// One Machine as the API server sends it; `None` without a name.
pub fn machine(o: &Value) -> Option<Machine> {
    let meta = &o["metadata"];
    let status = &o["status"];
    // v1beta2 keeps the v1beta1 failure fields (and conditions) under status.deprecated.v1beta1.
    let old = &status["deprecated"]["v1beta1"];
    let failure = |s: &Value| match (text(&s["failureReason"]), text(&s["failureMessage"])) {
        (Some(r), Some(m)) => Some(format!("{r}: {m}")),
        (r, m) => r.or(m),
    };
    Some(Machine {
        namespace: text(&meta["namespace"]).unwrap_or_default(),
        name: text(&meta["name"])?,
        cluster: text(&o["spec"]["clusterName"]).unwrap_or_default(),
        phase: text(&status["phase"]).unwrap_or_default(),
        node: text(&status["nodeRef"]["name"]),
        provider_id: text(&o["spec"]["providerID"]).unwrap_or_default(),
        failure: failure(status).or_else(|| failure(old)),
        unhealthy: false_condition(status, "HealthCheckSucceeded")
            .or_else(|| false_condition(old, "HealthCheckSucceeded")),
        remediating: false_condition(status, "OwnerRemediated").or_else(|| false_condition(old, "OwnerRemediated")),
        deleting: meta["deletionTimestamp"].is_string(),
        created: super::kueue::time(&meta["creationTimestamp"]).unwrap_or_default(),
        deployment: text(&meta["labels"][DEPLOYMENT_LABEL]),
        set: text(&meta["labels"][SET_LABEL]),
        control_plane: text(&meta["labels"][CONTROL_PLANE_LABEL]),
        version: text(&o["spec"]["version"]).unwrap_or_default(),
    })
}

fn count(v: &Value) -> Option<u32> {
    v.as_u64().and_then(|n| u32::try_from(n).ok())
}

/// The condition `kind` that is `True`.
fn true_condition(status: &Value, kind: &str) -> bool {
    status["conditions"].as_array().is_some_and(|cs| cs.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

/// Replica counts: `spec.replicas` and the status's; v1beta1's `updatedReplicas` (or its
/// `status.v1beta2.upToDateReplicas`) where v1beta2's `upToDateReplicas` is missing.
fn replicas(spec: &Value, status: &Value) -> Replicas {
    Replicas {
        desired: count(&spec["replicas"]),
        current: count(&status["replicas"]),
        ready: count(&status["readyReplicas"]),
        available: count(&status["availableReplicas"]),
        up_to_date: count(&status["upToDateReplicas"])
            .or_else(|| count(&status["v1beta2"]["upToDateReplicas"]))
            .or_else(|| count(&status["updatedReplicas"])),
    }
}

/// A Cluster's `status.controlPlane` / `status.workers` (v1beta2).
fn group(v: &Value) -> Option<Replicas> {
    v.is_object().then(|| Replicas {
        desired: count(&v["desiredReplicas"]),
        current: count(&v["replicas"]),
        ready: count(&v["readyReplicas"]),
        available: count(&v["availableReplicas"]),
        up_to_date: count(&v["upToDateReplicas"]),
    })
}

/// One Cluster, control plane, MachineDeployment, MachineSet or MachineHealthCheck as the
/// API server sends it; `None` without a name.
pub fn object(kind: CapiKind, o: &Value) -> Option<CapiObject> {
    let meta = &o["metadata"];
    let (spec, status) = (&o["spec"], &o["status"]);
    let old = &status["deprecated"]["v1beta1"];
    let name = text(&meta["name"])?;
    let owner_cluster = meta["ownerReferences"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["kind"] == "Cluster"))
        .and_then(|r| text(&r["name"]));
    let cluster = match kind {
        CapiKind::Cluster => Some(name.clone()),
        _ => text(&spec["clusterName"]).or_else(|| text(&meta["labels"][CLUSTER_LABEL])).or(owner_cluster),
    };
    let failure = match (text(&status["failureMessage"]), text(&old["failureMessage"])) {
        (Some(m), _) | (None, Some(m)) => Some(m),
        _ => None,
    };
    let why = match kind {
        CapiKind::MachineHealthCheck => {
            false_condition(status, "RemediationAllowed").or_else(|| false_condition(old, "RemediationAllowed"))
        }
        _ => false_condition(status, "Available")
            .or_else(|| false_condition(status, "Ready"))
            .or_else(|| false_condition(old, "Ready")),
    }
    .or(failure);
    let doing = ["Deleting", "Remediating", "RollingOut", "ScalingUp", "ScalingDown"]
        .into_iter()
        .filter(|c| true_condition(status, c))
        .map(str::to_string)
        .collect();
    let (replicas, workers, health) = match kind {
        CapiKind::Cluster => (group(&status["controlPlane"]), group(&status["workers"]), None),
        CapiKind::ControlPlane | CapiKind::MachineDeployment | CapiKind::MachineSet => {
            (Some(replicas(spec, status)), None, None)
        }
        CapiKind::MachineHealthCheck => {
            let targets = status["targets"].as_array().into_iter().flatten().filter_map(text).collect();
            let blocked = status["conditions"]
                .as_array()
                .or_else(|| old["conditions"].as_array())
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == "RemediationAllowed" && c["status"] == "False"));
            let h = HealthCounts {
                expected: count(&status["expectedMachines"]),
                healthy: count(&status["currentHealthy"]),
                remediations_allowed: count(&status["remediationsAllowed"]),
                targets,
                blocked,
            };
            (None, None, Some(h))
        }
    };
    let version = match kind {
        CapiKind::ControlPlane => text(&status["version"]).or_else(|| text(&spec["version"])),
        CapiKind::MachineDeployment | CapiKind::MachineSet => text(&spec["template"]["spec"]["version"]),
        CapiKind::Cluster => text(&spec["topology"]["version"]),
        CapiKind::MachineHealthCheck => None,
    };
    let owner = match kind {
        CapiKind::MachineSet => text(&meta["labels"][DEPLOYMENT_LABEL]),
        CapiKind::Cluster => text(&spec["controlPlaneRef"]["name"]),
        _ => None,
    };
    Some(CapiObject {
        kind,
        namespace: text(&meta["namespace"]).unwrap_or_default(),
        name,
        cluster: cluster.unwrap_or_default(),
        owner,
        phase: text(&status["phase"]).unwrap_or_default(),
        replicas,
        workers,
        health,
        version: version.unwrap_or_default(),
        doing,
        why,
        paused: spec["paused"].as_bool().unwrap_or(false),
        deleting: meta["deletionTimestamp"].is_string(),
        created: super::kueue::time(&meta["creationTimestamp"]).unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn v1beta2_and_v1beta1_read_alike() {
        let v2 = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "md-0-abc", "namespace": "capi", "creationTimestamp": "2026-12-01T10:00:00Z"},
            "spec": {"clusterName": "gpu-prod", "providerID": "metal3://capi/host-1/md-0-abc"},
            "status": {"phase": "Running", "nodeRef": {"name": "gpu-1"},
                "conditions": [{"type": "HealthCheckSucceeded", "status": "False", "reason": "UnhealthyNode", "message": "Condition Ready on node is reporting status False for more than 5m0s"},
                               {"type": "OwnerRemediated", "status": "False", "reason": "WaitingForRemediation", "message": ""}],
                "deprecated": {"v1beta1": {"failureReason": "UpdateError", "failureMessage": "host is in error"}}}});
        let m = machine(&v2).expect("a machine");
        assert_eq!(
            (m.key().as_str(), m.cluster.as_str(), m.node.as_deref()),
            ("capi/md-0-abc", "gpu-prod", Some("gpu-1"))
        );
        assert_eq!(
            m.unhealthy.as_deref(),
            Some("UnhealthyNode: Condition Ready on node is reporting status False for more than 5m0s")
        );
        assert_eq!(m.remediating.as_deref(), Some("WaitingForRemediation"));
        assert_eq!(m.failure.as_deref(), Some("UpdateError: host is in error"));
        assert_eq!(m.created, 1_796_119_200_000);
        let v1 = json!({"metadata": {"name": "m", "namespace": "n", "deletionTimestamp": "2026-12-01T10:00:00Z"},
            "spec": {"clusterName": "c"},
            "status": {"phase": "Failed", "failureReason": "CreateError", "nodeRef": {"kind": "Node", "name": "gpu-2"}}});
        let m = machine(&v1).expect("a machine");
        assert!(m.failed() && m.deleting && m.unhealthy.is_none());
        assert_eq!((m.failure.as_deref(), m.node.as_deref()), (Some("CreateError"), Some("gpu-2")));
        assert!(machine(&json!({"metadata": {}})).is_none());
    }

    #[test]
    fn owners_read_from_v1beta2_and_v1beta1() {
        let md = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "metadata": {"name": "gpu-md", "namespace": "capi", "creationTimestamp": "2026-12-01T10:00:00Z"},
            "spec": {"clusterName": "gpu-prod", "replicas": 4, "template": {"spec": {"version": "v1.34.1"}}},
            "status": {"replicas": 4, "readyReplicas": 3, "availableReplicas": 3, "upToDateReplicas": 2, "phase": "Running",
                "conditions": [{"type": "Available", "status": "True"}, {"type": "RollingOut", "status": "True", "reason": "RollingOut"}]}});
        let o = object(CapiKind::MachineDeployment, &md).expect("an md");
        assert_eq!((o.cluster.as_str(), o.version.as_str(), o.why.as_deref()), ("gpu-prod", "v1.34.1", None));
        let r = o.replicas.expect("replicas");
        assert_eq!(
            (r.desired, r.current, r.ready, r.available, r.up_to_date),
            (Some(4), Some(4), Some(3), Some(3), Some(2))
        );
        assert_eq!(o.state_text(), "Running, RollingOut");
        // v1beta1: updatedReplicas, the Ready condition, a MachineSet's deployment label.
        let ms = json!({"metadata": {"name": "gpu-md-abc", "namespace": "capi", "labels": {"cluster.x-k8s.io/deployment-name": "gpu-md"}},
            "spec": {"clusterName": "gpu-prod", "replicas": 2},
            "status": {"replicas": 2, "readyReplicas": 1, "updatedReplicas": 2,
                "conditions": [{"type": "Ready", "status": "False", "reason": "WaitingForNodeRef", "message": "1 of 2 machines"}]}});
        let o = object(CapiKind::MachineSet, &ms).expect("an ms");
        assert_eq!(o.owner.as_deref(), Some("gpu-md"));
        assert_eq!(o.replicas.and_then(|r| r.up_to_date), Some(2));
        assert_eq!(o.why.as_deref(), Some("WaitingForNodeRef: 1 of 2 machines"));
        assert_eq!(o.state_text(), "Unavailable");
        // A control plane's cluster is its label (KubeadmControlPlane has no clusterName).
        let kcp = json!({"metadata": {"name": "gpu-prod-cp", "namespace": "capi", "labels": {"cluster.x-k8s.io/cluster-name": "gpu-prod"}},
            "spec": {"replicas": 3, "version": "v1.34.1"}, "status": {"version": "v1.34.0", "replicas": 3, "readyReplicas": 3}});
        let o = object(CapiKind::ControlPlane, &kcp).expect("a kcp");
        assert_eq!((o.cluster.as_str(), o.version.as_str()), ("gpu-prod", "v1.34.0"));
        let cl = json!({"metadata": {"name": "gpu-prod", "namespace": "capi"},
            "spec": {"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": "gpu-prod-cp"}, "paused": true},
            "status": {"phase": "Provisioned", "controlPlane": {"desiredReplicas": 3, "readyReplicas": 3}, "workers": {"desiredReplicas": 4, "readyReplicas": 3}}});
        let o = object(CapiKind::Cluster, &cl).expect("a cluster");
        assert_eq!((o.cluster.as_str(), o.owner.as_deref()), ("gpu-prod", Some("gpu-prod-cp")));
        assert_eq!(o.workers.and_then(|w| w.ready), Some(3));
        assert_eq!(o.state_text(), "Provisioned, paused");
        let mhc = json!({"metadata": {"name": "gpu-mhc", "namespace": "capi"}, "spec": {"clusterName": "gpu-prod"},
            "status": {"expectedMachines": 4, "currentHealthy": 1, "remediationsAllowed": 0, "targets": ["m-1", "m-2"],
                "conditions": [{"type": "RemediationAllowed", "status": "False", "reason": "TooManyUnhealthy", "message": "Remediation is not allowed, the number of not started or unhealthy machines exceeds maxUnhealthy (total: 4, unhealthy: 3, maxUnhealthy: 40%)"}]}});
        let o = object(CapiKind::MachineHealthCheck, &mhc).expect("an mhc");
        let h = o.health.clone().expect("counts");
        assert!(h.blocked && h.targets.len() == 2 && h.remediations_allowed == Some(0));
        assert!(o.why.as_deref().is_some_and(|w| w.starts_with("TooManyUnhealthy: Remediation is not allowed")));
        assert_eq!(o.state_text(), "remediation blocked");
        assert!(object(CapiKind::Cluster, &json!({"metadata": {}})).is_none());
    }
}
