//! Holding and resuming a Kueue ClusterQueue (`spec.stopPolicy`): `Hold` stops admitting
//! (admitted workloads run on), `HoldAndDrain` also evicts what it admitted (Kueue suspends
//! their Jobs and requeues them), `None` resumes. Kueue acknowledges a stop by setting the
//! queue's `Active` condition to False with reason `Stopped`, and a drain by counting no
//! reserving workloads; the operation is done when the queue's status says so, not when the
//! write is accepted.

use super::{OpKind, OpRequest, Plan, PlanDetail, PlanError};
use crate::model::{Fleet, QuotaSource};

/// `spec.stopPolicy` of a ClusterQueue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopPolicy {
    None,
    Hold,
    HoldAndDrain,
}

impl StopPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            StopPolicy::None => "None",
            StopPolicy::Hold => "Hold",
            StopPolicy::HoldAndDrain => "HoldAndDrain",
        }
    }
    pub fn parse(s: &str) -> Option<StopPolicy> {
        match s {
            "" | "None" => Some(StopPolicy::None),
            "Hold" => Some(StopPolicy::Hold),
            "HoldAndDrain" => Some(StopPolicy::HoldAndDrain),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct QueuePlan {
    pub queue: String,
    pub policy: StopPolicy,
    /// What the queue's flavors hold now, as the fleet last read Kueue's `flavorsUsage`:
    /// `(flavor, resource, used)`.
    pub used: Vec<(String, String, i64)>,
}

pub(super) fn plan(fleet: &Fleet, queue: &str, policy: StopPolicy, request: OpRequest) -> Result<Plan, PlanError> {
    let used: Vec<(String, String, i64)> = fleet
        .quota_ids()
        .filter_map(|q| fleet.quota(q))
        .filter_map(|q| match q.source {
            QuotaSource::ClusterQueue { queue: cq, flavor } if fleet.str_of(cq) == queue => {
                Some((fleet.str_of(flavor).to_string(), fleet.str_of(q.resource).to_string(), q.used.value()))
            }
            _ => None,
        })
        .collect();
    if used.is_empty() {
        return Err(PlanError::Invalid(format!(
            "no Kueue ClusterQueue {queue:?} with GPU quota is known here; the quotas view (4) lists the queues"
        )));
    }
    let holding: Vec<String> =
        used.iter().filter(|(_, _, n)| *n > 0).map(|(f, r, n)| format!("{n} {r} in flavor {f}")).collect();
    let held = if holding.is_empty() { "nothing".to_string() } else { holding.join(", ") };
    let mut effects = vec![format!(
        "set spec.stopPolicy: {} on ClusterQueue {queue} (read again first; nothing is written if it is already so)",
        policy.as_str()
    )];
    let mut warnings = Vec::new();
    let kind = match policy {
        StopPolicy::None => {
            effects.push(
                "Kueue admits its pending workloads again as quota allows; done when its Active condition is True"
                    .to_string(),
            );
            OpKind::ResumeQueue
        }
        StopPolicy::Hold => {
            effects.push(format!(
                "Kueue admits nothing more from it; what it admitted runs on ({held}); done when Kueue reports it Stopped"
            ));
            OpKind::HoldQueue
        }
        StopPolicy::HoldAndDrain => {
            effects.push(format!(
                "Kueue also evicts what it admitted ({held}): their Jobs are suspended and requeued, their pods deleted; \
                 done when Kueue reports it Stopped and reserving no workload"
            ));
            if !holding.is_empty() {
                warnings.push(format!(
                    "running work of ClusterQueue {queue} stops ({held} in use); it is admitted again after a resume"
                ));
            }
            OpKind::HoldQueue
        }
    };
    let verb = match policy {
        StopPolicy::None => "Resume",
        StopPolicy::Hold => "Hold",
        StopPolicy::HoldAndDrain => "Hold and drain",
    };
    Ok(Plan {
        request,
        kind,
        title: format!("{verb} ClusterQueue {queue}"),
        target: queue.to_string(),
        effects,
        warnings,
        blockers: Vec::new(),
        detail: PlanDetail::Queue(QueuePlan { queue: queue.to_string(), policy, used }),
    })
}
