//! GitOps in previews: every plan that changes an object in place names the objects it
//! changes, and each one Argo CD or Flux owns (the fleet learns it from the object's labels
//! and annotations, [`crate::model::gitops`]) adds a warning: the change lasts only until
//! the next sync where Git sets the field. A warning, not a blocker: on call, a change that
//! holds until the next sync is often what is needed, and the person decides.

use super::{HostAction, Plan, PlanDetail};
use crate::model::gitops::key;
use crate::model::{Fleet, QuotaSourceSpec};

/// What a plan changes in place: (fleet gitops key, the object as people read it, the field).
pub fn touched(plan: &Plan) -> Vec<(String, String, String)> {
    let node = |n: &str, field: &str| (key("node", None, n), format!("Node {n}"), field.to_string());
    match &plan.detail {
        PlanDetail::Cordon { node: n, .. } => vec![node(n, "spec.unschedulable")],
        PlanDetail::Drain(d) => vec![node(&d.node, "spec.unschedulable")],
        // The cordon a reslice may set is its own and undone when it ends; the label stays.
        PlanDetail::Reslice(r) => vec![node(&r.node, "the nvidia.com/mig.config label")],
        PlanDetail::Quota(q) => match &q.key.source {
            QuotaSourceSpec::ResourceQuota { namespace, name } => vec![(
                key("resourcequota", Some(namespace), name),
                format!("ResourceQuota {namespace}/{name}"),
                format!("spec.hard[{}]", q.key.resource),
            )],
            QuotaSourceSpec::ClusterQueue { queue, flavor } => vec![(
                key("clusterqueue", None, queue),
                format!("ClusterQueue {queue}"),
                format!("{} of {} in flavor {flavor}", q.key.field.kueue_name(), q.key.resource),
            )],
        },
        PlanDetail::Queue(q) => {
            vec![(key("clusterqueue", None, &q.queue), format!("ClusterQueue {}", q.queue), "spec.stopPolicy".into())]
        }
        // Power is spec.online, which a host kept in Git has; a reboot or inspection request
        // is an annotation the operator removes itself.
        PlanDetail::Host(h) if matches!(h.action, HostAction::PowerOff | HostAction::PowerOn) => vec![(
            key("baremetalhost", Some(&h.namespace), &h.host),
            format!("BareMetalHost {}", h.key()),
            "spec.online".into(),
        )],
        // A DeviceTaintRule fabrik creates, a Workload Kueue creates, a pod's owner (read
        // only when the reclaim runs): nothing GitOps is known to own.
        PlanDetail::Taint(_) | PlanDetail::Reclaim(_) | PlanDetail::Workload(_) | PlanDetail::Host(_) => Vec::new(),
    }
}

/// Adds a warning for each object the plan changes that a GitOps tool owns.
pub(super) fn warn(fleet: &Fleet, plan: &mut Plan) {
    if fleet.gitops.is_empty() {
        return;
    }
    for (k, object, field) in touched(plan) {
        if let Some(owner) = fleet.gitops.get(&k) {
            let w = owner.warning(&object, &field);
            if !plan.warnings.contains(&w) {
                plan.warnings.push(w);
            }
        }
    }
}
