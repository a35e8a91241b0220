//! The runner's bookkeeping: the number of steps a plan announces, how a step is counted,
//! what a cancel says, and the halt signal that stops an operation when the cockpit stops.

use tokio::sync::watch;

use super::super::{Plan, PlanDetail};
use crate::model::OpProgress;

/// The steps a plan announces when it starts: a cordon or a quota edit is one step; a drain
/// is its cordon, one step per pod that must go (evicted, or waited for when it is already
/// terminating) and the final look at the node; a reslice is its cordon, its pods, the look
/// at the node, the mig-parted config (counted when there is none to add), the label write
/// and the end of its cordon. Pods that appear later raise the total as they are met.
pub fn step_total(plan: &Plan) -> u32 {
    let must_go = |pods: &[super::super::DrainPod]| pods.iter().filter(|p| p.action.must_go()).count() as u32;
    match &plan.detail {
        PlanDetail::Cordon { .. } => 1,
        PlanDetail::Drain(d) => 2 + must_go(&d.pods),
        PlanDetail::Reslice(r) => 5 + must_go(&r.pods),
        PlanDetail::Quota(_) => 1,
        // One per rule written or deleted, the read back, and (NoExecute) the pods gone.
        PlanDetail::Taint(t) => {
            t.rules.len() as u32
                + u32::from(t.effect.is_some())
                + u32::from(t.effect == Some(super::super::TaintEffect::NoExecute))
        }
        // The write to the owner (with the deletion cost first on a ReplicaSet's pod) and
        // the pod gone.
        // The write, and Kueue's answer.
        PlanDetail::Queue(_) => 2,
        // The write, and Kueue's answer.
        PlanDetail::Workload(_) => 2,
        // The write, and the baremetal-operator's answer (a reboot: off, then on again).
        PlanDetail::Host(h) => 2 + u32::from(h.action == super::super::HostAction::Reboot),
        PlanDetail::Reclaim(r) => match &r.action {
            super::super::ReclaimAction::ScaleDown { rs: Some(_), .. } => 3,
            _ => 2,
        },
    }
}

/// The first progress of an execution.
pub fn started(id: u64, plan: &Plan) -> OpProgress {
    OpProgress::Started { id, title: plan.title.clone(), target: plan.target.clone(), total: step_total(plan) }
}

/// The step counter of one running operation: a step never counts past the total.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub id: u64,
    pub done: u32,
    pub total: u32,
}

impl Progress {
    pub fn new(id: u64, plan: &Plan) -> Self {
        Progress { id, done: 0, total: step_total(plan) }
    }

    /// Counts a step without reporting it (a pod that vanished before its eviction).
    pub fn skip(&mut self) {
        self.done = (self.done + 1).min(self.total);
    }

    /// Counts a step and says it.
    pub fn step(&mut self, step: String) -> OpProgress {
        self.skip();
        OpProgress::Step { id: self.id, step, done: self.done, total: self.total }
    }

    /// The log line of a cancelled operation.
    pub fn cancelled(&self) -> String {
        format!(
            "cancelled after {} of {} steps; what was done stays (a cordon stays until you uncordon, or a reslice of the node ends)",
            self.done, self.total
        )
    }
}

/// Resolves with the reason once `halt` carries one; never while it stays `None` (also
/// when its sender is gone: an executor nobody can halt runs to its end).
pub async fn halted(halt: &mut watch::Receiver<Option<String>>) -> String {
    loop {
        if let Some(why) = halt.borrow_and_update().clone() {
            return why;
        }
        if halt.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
