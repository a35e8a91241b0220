//! Reading a Cluster API Machine (v1beta2, else v1beta1) into [`crate::model::Machine`].

use serde_json::Value;

use crate::model::Machine;

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
}
