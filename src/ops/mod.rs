//! Operations on the cluster, as data: a request is planned from the current `Fleet`
//! (pure, previewable), shown, confirmed, then sent through the [`Executor`] seam as an
//! [`ExecRequest`] to whoever runs it (`sim::exec` on the demo; [`serve_ops`] on a cluster).
//! Both run it with the one runner, [`exec`], which drives the plan through a
//! [`target::Target`] — the cluster's ([`kube`]) or the simulator's — and reports progress
//! back as `Delta::Op`. [`access`] asks the API server up front what the person may do;
//! [`audit`] records every step.

pub mod access;
pub mod audit;
pub mod cordon;
mod drain;
pub mod exec;
mod executor;
pub mod gitops;
pub mod host;
pub mod kube;
pub mod kueue;
pub mod mig_ack;
pub mod queue;
mod quota;
pub mod reclaim;
mod reslice;
pub mod retry;
mod serve;
pub mod taint;
pub mod target;

pub use drain::{DrainPlan, DrainPod, PodAction, terminating_note};
pub use executor::{ExecRequest, Executor, Recorder};
pub use host::{HostAction, HostPlan};
pub use kueue::WorkloadPlan;
pub use queue::{QueuePlan, StopPolicy};
pub use quota::{QuotaPlan, is_extended, shown, source_spec};
pub use reclaim::{ReclaimAction, ReclaimPlan, Workload};
pub use reslice::{GpuReslice, ReslicePlan, describe_layout, partitioned_by_dra as reslice_blocked_by_dra};
pub use serve::{KubeExecutor, Refuse, serve_ops};
pub use taint::{RuleSpec, TaintEffect, TaintPlan};

use crate::mig::LayoutError;
use crate::model::Fleet;
use crate::quantity::QuantityError;

/// What a person asked for, by name: the plan resolves it against the fleet.
#[derive(Clone, Debug, PartialEq)]
pub enum OpRequest {
    Cordon {
        node: String,
    },
    Uncordon {
        node: String,
    },
    Drain {
        node: String,
        force: bool,
    },
    /// `gpus` empty means every GPU of the node.
    Reslice {
        node: String,
        gpus: Vec<u8>,
        layout: String,
    },
    SetQuota {
        tenant: String,
        quota: QuotaKey,
        value: String,
    },
    /// A DRA device taint on one GPU (DeviceTaintRules), `value` saying why.
    TaintGpu {
        node: String,
        gpu: u8,
        effect: TaintEffect,
        value: String,
    },
    /// Removes the taint fabrik put on one GPU.
    UntaintGpu {
        node: String,
        gpu: u8,
    },
    /// Frees the GPUs of one pod by acting on its owner ([`reclaim`]).
    Reclaim {
        namespace: String,
        pod: String,
    },
    /// Sets a Kueue ClusterQueue's `spec.stopPolicy` ([`queue`]): hold, hold and drain, resume.
    QueueStop {
        queue: String,
        policy: StopPolicy,
    },
    /// Sets a Kueue Workload's `spec.active` ([`kueue`]): suspend (deactivate) or resume it.
    WorkloadActive {
        /// `namespace/name`.
        workload: String,
        active: bool,
    },
    /// Reboots, powers off or on, or inspects again a Metal3 BareMetalHost ([`host`]): the
    /// one under `node`, or, with `host` (`namespace/name`), that one (a spare under no node
    /// has `node` empty).
    Host {
        node: String,
        host: Option<String>,
        action: HostAction,
    },
}

/// Names one quota: its tenant's index into `Tenant::quotas` is not stable, so a quota is
/// named by where it lives and what it limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaKey {
    pub source: crate::model::QuotaSourceSpec,
    pub resource: String,
    pub field: QuotaField,
}

/// Which limit of a quota: a ResourceQuota has only its hard limit; a Kueue ClusterQueue
/// flavor resource has a nominal quota and optional borrowing and lending limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QuotaField {
    /// `spec.hard` of a ResourceQuota, `nominalQuota` of a ClusterQueue.
    #[default]
    Hard,
    BorrowingLimit,
    LendingLimit,
}

impl QuotaField {
    /// The field's name in the object (`nominalQuota` for both kinds' main limit on Kueue).
    pub fn kueue_name(self) -> &'static str {
        match self {
            QuotaField::Hard => "nominalQuota",
            QuotaField::BorrowingLimit => "borrowingLimit",
            QuotaField::LendingLimit => "lendingLimit",
        }
    }

    /// `nominalQuota=8`, `borrowing 4`, `lendingLimit: 2`, or a plain value (the main limit).
    /// Returns the field and the value text.
    pub fn split(input: &str) -> (QuotaField, &str) {
        let t = input.trim();
        let Some(pos) = t.find(|c: char| c == '=' || c == ':' || c.is_whitespace()) else {
            return (QuotaField::Hard, t);
        };
        let (name, rest) = t.split_at(pos);
        let field = match name.to_ascii_lowercase().as_str() {
            "nominal" | "nominalquota" | "hard" => QuotaField::Hard,
            "borrowing" | "borrowinglimit" => QuotaField::BorrowingLimit,
            "lending" | "lendinglimit" => QuotaField::LendingLimit,
            _ => return (QuotaField::Hard, t),
        };
        (field, rest.trim_start_matches(['=', ':']).trim())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Cordon,
    Uncordon,
    Drain,
    Reslice,
    SetQuota,
    TaintGpu,
    UntaintGpu,
    Reclaim,
    HoldQueue,
    ResumeQueue,
    SuspendWorkload,
    ResumeWorkload,
    RebootHost,
    PowerHost,
    InspectHost,
}

impl OpKind {
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Cordon => "cordon",
            OpKind::Uncordon => "uncordon",
            OpKind::Drain => "drain",
            OpKind::Reslice => "reslice",
            OpKind::SetQuota => "set-quota",
            OpKind::TaintGpu => "taint-gpu",
            OpKind::UntaintGpu => "untaint-gpu",
            OpKind::Reclaim => "reclaim",
            OpKind::HoldQueue => "hold-queue",
            OpKind::ResumeQueue => "resume-queue",
            OpKind::SuspendWorkload => "suspend-workload",
            OpKind::ResumeWorkload => "resume-workload",
            OpKind::RebootHost => "reboot-host",
            OpKind::PowerHost => "power-host",
            OpKind::InspectHost => "inspect-host",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum PlanDetail {
    Cordon { node: String, cordon: bool },
    Drain(DrainPlan),
    Reslice(ReslicePlan),
    Quota(QuotaPlan),
    Taint(TaintPlan),
    Reclaim(ReclaimPlan),
    Queue(QueuePlan),
    Workload(WorkloadPlan),
    Host(HostPlan),
}

/// A planned operation: everything the preview shows, and everything the executor needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub request: OpRequest,
    pub kind: OpKind,
    /// "Drain node h100-007".
    pub title: String,
    /// The object the confirmation names.
    pub target: String,
    /// What will happen, line by line.
    pub effects: Vec<String>,
    /// What will slow it down or needs attention, but does not stop it.
    pub warnings: Vec<String>,
    /// What stops it: while non-empty the plan cannot be confirmed.
    pub blockers: Vec<String>,
    pub detail: PlanDetail,
}

impl Plan {
    pub fn can_execute(&self) -> bool {
        self.blockers.is_empty()
    }
}

/// Why no plan could be made. Each message names what was wrong and how to fix it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("node {0:?} is not in the fleet (it may have been removed); pick a node from the fleet view")]
    NodeNotFound(String),
    #[error("tenant {0:?} is not known; pick a tenant from the tenants view")]
    TenantNotFound(String),
    #[error("tenant {tenant:?} has no quota on {resource}; pick a quota from the quotas view")]
    QuotaNotFound { tenant: String, resource: String },
    #[error("{0}")]
    BadQuantity(#[from] QuantityError),
    #[error("{0}")]
    BadLayout(#[from] LayoutError),
    #[error("{node} has no MIG-capable GPU model recorded; MIG reslicing needs A100, H100, H200 or B200 GPUs")]
    NotMigCapable { node: String },
    #[error("{node} has no GPU with index {index}; it has GPUs 0-{max}")]
    NoSuchGpu { node: String, index: u8, max: u8 },
    #[error("{0}")]
    Invalid(String),
}

/// "1 pod", "3 pods": previews and progress are read by people.
pub fn count(n: usize, what: &str) -> String {
    if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") }
}

/// "40m", "90s": an operation's deadline as previews say it.
pub fn minutes(d: std::time::Duration) -> String {
    let s = d.as_secs();
    if s >= 60 && s.is_multiple_of(60) { format!("{}m", s / 60) } else { format!("{s}s") }
}

/// Plans a request against the fleet as it is now. Pure: reads the fleet, changes nothing.
pub fn plan(fleet: &Fleet, req: &OpRequest) -> Result<Plan, PlanError> {
    let mut plan = plan_only(fleet, req)?;
    gitops::warn(fleet, &mut plan);
    Ok(plan)
}

fn plan_only(fleet: &Fleet, req: &OpRequest) -> Result<Plan, PlanError> {
    match req {
        OpRequest::Cordon { node } | OpRequest::Uncordon { node } => {
            let cordon = matches!(req, OpRequest::Cordon { .. });
            plan_cordon(fleet, node, cordon, req.clone())
        }
        OpRequest::Drain { node, force } => drain::plan(fleet, node, *force, req.clone()).map(|mut p| {
            // The drain's own preview lines are drain.rs's; its deadline is the executor's.
            let t = exec::ExecOptions::default().drain_timeout;
            p.effects.push(format!(
                "deadline: {} for evicting and waiting; past it fabrik stops and names the pods left",
                minutes(t)
            ));
            p
        }),
        OpRequest::Reslice { node, gpus, layout } => reslice::plan(fleet, node, gpus, layout, req.clone()),
        OpRequest::SetQuota { tenant, quota, value } => quota::plan(fleet, tenant, quota, value, req.clone()),
        OpRequest::TaintGpu { node, gpu, effect, value } => {
            taint::plan(fleet, node, *gpu, Some(*effect), value, req.clone()).map(|mut p| {
                if *effect == TaintEffect::NoExecute && !p.effects.is_empty() {
                    let t = exec::ExecOptions::default().drain_timeout;
                    p.effects.push(format!(
                        "deadline: {} for the pods to go; past it fabrik stops and names them",
                        minutes(t)
                    ));
                }
                p
            })
        }
        OpRequest::UntaintGpu { node, gpu } => taint::plan(fleet, node, *gpu, None, "", req.clone()),
        OpRequest::Reclaim { namespace, pod } => reclaim::plan(fleet, namespace, pod, req.clone()).map(|mut p| {
            let t = exec::ExecOptions::default().drain_timeout;
            p.effects.push(format!(
                "deadline: {} for the pod to go; past it fabrik stops and says what is left",
                minutes(t)
            ));
            p
        }),
        OpRequest::QueueStop { queue, policy } => queue::plan(fleet, queue, *policy, req.clone()),
        OpRequest::WorkloadActive { workload, active } => kueue::plan(fleet, workload, *active, req.clone()),
        OpRequest::Host { node, host, action } => {
            host::plan(fleet, node, host.as_deref(), *action, req.clone()).map(|mut p| {
                let t = exec::ExecOptions::default().drain_timeout;
                p.effects.push(format!(
                    "deadline: {} for the operator's answer; past it fabrik stops and says what the host reports",
                    minutes(t)
                ));
                p
            })
        }
    }
}

fn plan_cordon(fleet: &Fleet, node: &str, cordon: bool, request: OpRequest) -> Result<Plan, PlanError> {
    let id = fleet.node_by_name(node).ok_or_else(|| PlanError::NodeNotFound(node.to_string()))?;
    let n = fleet.node(id).ok_or_else(|| PlanError::NodeNotFound(node.to_string()))?;
    let verb = if cordon { "Cordon" } else { "Uncordon" };
    let mut warnings = Vec::new();
    let effects = if cordon {
        vec![
            format!("set spec.unschedulable=true on {node}: no new pods are scheduled there"),
            format!("running pods stay ({} GPU pods now); drain to move them", n.pods),
        ]
    } else {
        vec![format!("set spec.unschedulable=false on {node}: pods can be scheduled there again")]
    };
    if cordon == n.cordoned {
        warnings.push(format!(
            "{node} is already {}; this changes nothing",
            if cordon { "cordoned" } else { "schedulable" }
        ));
    }
    if !cordon && !n.ready {
        warnings.push(format!("{node} is NotReady: pods scheduled there will not start until it recovers"));
    }
    Ok(Plan {
        request,
        kind: if cordon { OpKind::Cordon } else { OpKind::Uncordon },
        title: format!("{verb} node {node}"),
        target: node.to_string(),
        effects,
        warnings,
        blockers: Vec::new(),
        detail: PlanDetail::Cordon { node: node.to_string(), cordon },
    })
}

#[cfg(test)]
mod tests;
