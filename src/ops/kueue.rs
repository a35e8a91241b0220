//! Deactivating and reactivating a Kueue Workload (`spec.active`), the way Kueue means a
//! Workload to be suspended: deactivated, Kueue evicts it (reason `Deactivated`), suspends
//! its Job, waits for its pods to go and releases its quota, and keeps it out of the queue
//! until it is active again; reactivated, Kueue requeues it (`Requeued`, reason
//! `Reactivated`) and admits it when quota allows. Writing the Job's own `suspend` would be
//! undone: Kueue resumes a Job it admitted. Done when the Workload's status says so.

use super::{OpKind, OpRequest, Plan, PlanDetail, PlanError};
use crate::model::{Fleet, WorkloadState};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadPlan {
    pub namespace: String,
    pub name: String,
    /// The Workload's uid as the fleet knows it: the write tests it, so a Workload deleted
    /// and made again under the same name is not changed by a preview of the old one.
    pub uid: String,
    pub active: bool,
    /// Suspending: the pods of its Job the cockpit saw (names); the operation is done only
    /// once they are gone, not when Kueue releases the quota (a terminating pod still holds
    /// its GPUs, and Kueue does not count it).
    pub pods: Vec<String>,
}

pub(super) fn plan(fleet: &Fleet, key: &str, active: bool, request: OpRequest) -> Result<Plan, PlanError> {
    let Some(w) = fleet.workloads.get(key) else {
        return Err(PlanError::Invalid(format!(
            "no Kueue Workload {key:?} is known here; the workloads view (9) lists them as NAMESPACE/NAME"
        )));
    };
    let cq = if w.cluster_queue.is_empty() { format!("LocalQueue {}", w.queue) } else { w.cluster_queue.clone() };
    let state = w.state();
    if state == WorkloadState::Finished {
        return Err(PlanError::Invalid(format!("Workload {key} has finished; there is nothing to suspend or resume")));
    }
    if w.active == active {
        let now = if active { "active" } else { "deactivated" };
        return Err(PlanError::Invalid(format!("Workload {key} is {now} already; nothing to change")));
    }
    let owner = if w.owner.is_empty() { "its owner".to_string() } else { w.owner.clone() };
    let mut effects = vec![format!(
        "set spec.active: {active} on Workload {key} (a JSON patch that tests its uid: a Workload made again under \
         this name is not touched)"
    )];
    let mut warnings = Vec::new();
    let kind = if active {
        let place = match fleet.workload_position(key) {
            Some(p) => format!(" (it was {p} in line)"),
            None => String::new(),
        };
        effects.push(format!(
            "Kueue requeues it in {cq}{place} and admits it when quota allows ({} GPUs, {} pods); \
             done when Kueue reports it requeued or admitted",
            w.gpus, w.pods
        ));
        OpKind::ResumeWorkload
    } else {
        if w.holds_quota() {
            effects.push(format!(
                "Kueue evicts it (reason Deactivated): {owner} is suspended, its pods deleted and its quota in {cq} \
                 ({} GPUs) released; done when Kueue reports it evicted and holding no quota and its pods are gone",
                w.gpus
            ));
            let running = fleet.workload_pods(w).iter().filter(|p| !p.phase.finished()).count();
            if running > 0 {
                warnings
                    .push(format!("running work stops: {running} pods of {owner}; it runs again only once resumed"));
            }
        } else {
            effects.push(format!(
                "Kueue takes it out of {cq}'s queue (it holds no quota: nothing runs); done when Kueue reports it \
                 deactivated"
            ));
        }
        if let Some(p) = fleet.workload_position(key) {
            warnings.push(format!("it leaves its place in line ({p}); resumed, it queues again"));
        }
        OpKind::SuspendWorkload
    };
    let verb = if active { "Resume" } else { "Suspend" };
    Ok(Plan {
        request,
        kind,
        title: format!("{verb} Kueue Workload {key}"),
        target: key.to_string(),
        effects,
        warnings,
        blockers: Vec::new(),
        detail: PlanDetail::Workload(WorkloadPlan {
            namespace: w.namespace.clone(),
            name: w.name.clone(),
            uid: w.uid.clone(),
            active,
            pods: if active {
                Vec::new()
            } else {
                fleet.workload_pods(w).iter().filter(|p| !p.phase.finished()).map(|p| p.name.to_string()).collect()
            },
        }),
    })
}
