//! The Kubernetes executor: runs a confirmed [`Plan`] against the API server, one audited
//! step at a time, reporting progress as `Delta::Op`.
//!
//! - cordon: merge patch of `spec.unschedulable` (kubectl writes the same field);
//! - drain: cordon, re-list the node's pods and re-apply kubectl's filters, evict (policy/v1
//!   Eviction) what the person confirmed, retry 429 every 5 s while naming the PDB that holds
//!   it and the disruptions it allows, wait until each pod is gone (or replaced: new uid) —
//!   pods already terminating too, never evicted again — then read the node once more: a
//!   drain is reported only when no pod that must go is left there;
//! - reslice: cordon, evict the GPU's pods, add a named config to the mig-parted ConfigMap
//!   when the layout has no builtin name, set `nvidia.com/mig.config`, wait for mig-manager to
//!   acknowledge it ([`super::mig_ack`]), follow `nvidia.com/mig.config.state` (a `pending`
//!   that does not move is flagged with the paused `nvidia.com/gpu.deploy.*` labels) to
//!   `success` with the planned devices, uncordon what it (or an interrupted reslice,
//!   [`super::cordon`]) cordoned;
//! - quota: patch conditional on the resourceVersion the preview showed, so a concurrent edit
//!   is a conflict reported with the new value, never overwritten.
//!
//! Idempotent calls are retried on transient failures ([`super::retry`]) with a timeout per
//! call and the operation's deadline over all. Every step is written to the audit log before
//! it is reported; if the log cannot be
//! written the operation stops there (and never starts without its `confirmed` record).

mod drain;
mod evict;
mod node;
mod quota;
mod reslice;
mod run;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::PatchParams;
use tokio::sync::{mpsc, watch};

use super::access::{self, Perm};
use super::audit::{Audit, Phase};
use super::retry::Backoff;
use super::runner::{self, Progress, halted};
use super::{OpKind, Plan, PlanDetail, PodAction};
use crate::cluster::{describe, labels};
use crate::model::{Delta, OpProgress, QuotaSourceSpec};
use drain::drain_op;
use node::cordon_op;
use quota::quota_op;
use reslice::reslice_op;
use run::{Run, Stop};

pub use drain::{drain_action, drain_action_at, holds_gpus, leftovers, reconcile};
pub use evict::{PodRef, pdb_selects};

/// Pacing, from kubectl where it has a number.
#[derive(Clone, Debug)]
pub struct ExecOptions {
    /// kubectl's `EvictErrorRetryDelay`.
    pub evict_retry: Duration,
    /// Eviction plus waiting for the pods to go (kubectl `--timeout`).
    pub drain_timeout: Duration,
    /// How often deletions and mig-manager's labels are polled.
    pub poll: Duration,
    /// A `pending` longer than this is flagged as stuck (config `mig_stuck_secs`).
    pub mig_stuck: Duration,
    /// Give up following mig-manager after this long.
    pub mig_timeout: Duration,
    /// How long a reslice that changes no layout waits for mig-manager to answer before it
    /// takes the node's unchanged devices as the answer (mig-manager writes nothing then).
    pub mig_ack_grace: Duration,
    /// Every API call gets this long to answer (kube's client has no read timeout).
    pub call_timeout: Duration,
    /// Retries of transient failures (5xx, a broken connection, API priority and fairness).
    pub backoff: Backoff,
}

/// The field manager fabrik's writes are recorded under (managedFields), so that
/// mig-manager's later writes can be told from ours.
pub const FIELD_MANAGER: &str = "fabrik";

pub(crate) fn pp() -> PatchParams {
    PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            evict_retry: Duration::from_secs(5),
            drain_timeout: Duration::from_secs(600),
            poll: Duration::from_secs(1),
            mig_stuck: Duration::from_secs(300),
            mig_timeout: Duration::from_secs(1800),
            mig_ack_grace: Duration::from_secs(60),
            call_timeout: Duration::from_secs(30),
            backoff: Backoff::default(),
        }
    }
}

impl ExecOptions {
    /// How long an operation may take in all: the preview says it, and past it the
    /// operation stops and reports what is left.
    pub fn deadline(&self, kind: OpKind) -> Duration {
        match kind {
            OpKind::Drain => self.drain_timeout,
            OpKind::Reslice => self.drain_timeout + self.mig_timeout,
            // One read and one write, each with its retries.
            OpKind::Cordon | OpKind::Uncordon | OpKind::SetQuota => self.call_timeout * 4,
        }
    }
}

pub struct KubeExec {
    pub client: kube::Client,
    pub audit: Audit,
    pub opts: ExecOptions,
    pub out: mpsc::Sender<Vec<Delta>>,
}

/// The person's words for an API failure at `what`, with what to do about it.
pub(crate) fn api_failure(what: &str, e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.code == 403 => {
            format!(
                "{what}: forbidden — {} (your kubeconfig's identity lacks the permission; ask for it or use another context)",
                s.message
            )
        }
        kube::Error::Api(s) if s.code == 404 => format!("{what}: not found — {}", s.message),
        _ => format!("{what}: {}", describe(e)),
    }
}

/// Runs a confirmed plan to its outcome. Never panics on cluster data; every way out is a
/// `Finished` or `Cancelled` progress and an audit record.
pub async fn execute(ex: &KubeExec, id: u64, plan: Plan, cancel: watch::Receiver<bool>) {
    // Nobody interrupts this one: the sender stays here, unused, until the plan is done.
    let (_halt, halted) = watch::channel(None);
    execute_until(ex, id, plan, cancel, halted).await
}

/// [`execute`], stopped at once (wherever it is, an API call in flight included) when
/// `halt` says why the cockpit is stopping: the audit log then gets `interrupted at <where
/// it was> (<why>)` and the operation reports that it did not finish.
pub async fn execute_until(
    ex: &KubeExec,
    id: u64,
    plan: Plan,
    cancel: watch::Receiver<bool>,
    mut halt: watch::Receiver<Option<String>>,
) {
    let _ = ex.out.send(vec![Delta::Op(runner::started(id, &plan))]).await;
    let at = Arc::new(Mutex::new("confirmed".to_string()));
    let deadline = Instant::now() + ex.opts.deadline(plan.kind);
    let mut run = Run {
        ex,
        id,
        plan: &plan,
        progress: Progress::new(id, &plan),
        cancel,
        blocked_on: None,
        at: at.clone(),
        deadline,
        cordon_before: None,
    };
    if let Err(e) = ex.audit.record(id, &plan, Phase::Confirmed, &plan.title) {
        run.send(OpProgress::Finished { id, outcome: Err(format!("{e}; nothing was sent")) }).await;
        return;
    }
    // The plan said what it needs; ask again, for its namespaces, before sending anything.
    match access::preflight(&ex.client, &perms_for(&plan)).await {
        Ok(None) => {}
        Ok(Some(why)) => {
            let msg = format!("{why}; nothing was sent");
            let _ = run.audit(Phase::Refused, &msg);
            run.send(OpProgress::Finished { id, outcome: Err(msg) }).await;
            return;
        }
        Err(e) => {
            let msg = format!("{}; nothing was sent", api_failure("checking your permissions", &e));
            let _ = run.audit(Phase::Refused, &msg);
            run.send(OpProgress::Finished { id, outcome: Err(msg) }).await;
            return;
        }
    }
    let work = async {
        match &plan.detail {
            PlanDetail::Cordon { node, cordon } => cordon_op(&mut run, node, *cordon).await,
            PlanDetail::Drain(d) => drain_op(&mut run, d).await,
            PlanDetail::Reslice(r) => reslice_op(&mut run, r).await,
            PlanDetail::Quota(q) => quota_op(&mut run, q).await,
        }
    };
    let result = tokio::select! {
        r = work => r,
        why = halted(&mut halt) => {
            let at = at.lock().map(|a| a.clone()).unwrap_or_default();
            let msg = format!(
                "interrupted at {at} ({why}); what was done stays — run it again to finish: it re-plans from the cluster"
            );
            let _ = ex.audit.record(id, &plan, Phase::Interrupted, &msg);
            let _ = ex.out.send(vec![Delta::Op(OpProgress::Finished { id, outcome: Err(msg) })]).await;
            return;
        }
    };
    match result {
        Ok(msg) => {
            let outcome = match run.audit(Phase::Succeeded, &msg) {
                Ok(()) => Ok(msg),
                Err(Stop::Failed(e)) => Err(format!("{msg}, but {e}")),
                Err(Stop::Cancelled) => Ok(msg),
            };
            run.send(OpProgress::Finished { id, outcome }).await;
        }
        Err(Stop::Failed(msg)) => {
            let _ = run.audit(Phase::Failed, &msg);
            run.send(OpProgress::Finished { id, outcome: Err(msg) }).await;
        }
        Err(Stop::Cancelled) => {
            let line = run.progress.cancelled();
            let _ = run.audit(Phase::Cancelled, &line);
            run.send(OpProgress::Log { id, line }).await;
            run.send(OpProgress::Cancelled { id }).await;
        }
    }
}

/// The permissions a plan needs, scoped to the namespaces it touches.
pub fn perms_for(plan: &Plan) -> Vec<Perm> {
    let mut v = vec![];
    let pods_ns = |pods: &mut dyn Iterator<Item = &super::DrainPod>| {
        let mut ns: Vec<String> = pods.map(|p| p.namespace.clone()).collect();
        ns.sort();
        ns.dedup();
        ns
    };
    match &plan.detail {
        PlanDetail::Cordon { .. } => v.push(access::PATCH_NODES),
        PlanDetail::Drain(d) => {
            v.push(access::PATCH_NODES);
            v.push(access::LIST_PODS);
            for ns in pods_ns(&mut d.to_evict()) {
                v.push(access::EVICT_PODS.in_namespace(&ns));
            }
        }
        PlanDetail::Reslice(r) => {
            v.push(access::PATCH_NODES);
            v.push(access::LIST_PODS);
            for ns in pods_ns(&mut r.pods.iter().filter(|p| p.action == PodAction::Evict)) {
                v.push(access::EVICT_PODS.in_namespace(&ns));
            }
            if r.custom_config.is_some() {
                v.push(access::UPDATE_CONFIGMAPS.in_namespace(labels::MIG_CONFIGMAP_NS));
            }
        }
        PlanDetail::Quota(q) => match &q.key.source {
            QuotaSourceSpec::ResourceQuota { namespace, .. } => v.push(access::PATCH_QUOTAS.in_namespace(namespace)),
            QuotaSourceSpec::ClusterQueue { .. } => v.push(access::UPDATE_CLUSTERQUEUES),
        },
    }
    v
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

pub(crate) fn secs(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 120 { format!("{}m{:02}s", s / 60, s % 60) } else { format!("{s}s") }
}

#[cfg(test)]
mod tests;
