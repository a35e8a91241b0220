//! The Kubernetes target: the verbs of [`super::target::Target`] as API calls, so the one
//! runner ([`super::exec`]) runs a confirmed [`Plan`] against the API server. What each
//! operation sends:
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
//! - quota: a ResourceQuota's merge patch, or a JSON patch of the one ClusterQueue field,
//!   conditional on the resourceVersion the preview showed, so a concurrent edit is a
//!   conflict reported with the new value, never overwritten.
//!
//! Idempotent calls are retried on transient failures ([`super::retry`]) with a timeout per
//! call and the operation's deadline over all. Every step is written to the audit log before
//! it is reported; if the log cannot be
//! written the operation stops there (and never starts without its `confirmed` record).

mod call;
mod drain;
mod evict;
mod host;
mod kueue;
mod node;
mod queue;
mod quota;
mod reclaim;
mod reslice;
mod taint;

use std::time::Duration;

use kube::api::PatchParams;
use tokio::sync::{mpsc, watch};

use super::access::{self, Perm};
use super::audit::Audit;
use super::cordon::CordonMark;
use super::exec::{self, Env, Run, Sink, Step};
use super::mig_ack::Caps;
pub use super::target::PodRef;
use super::target::{Evicted, NodeView, PodView, QueueView, ReadFailure, Target, WorkloadView};
use super::{
    Plan, PlanDetail, PodAction, QuotaPlan, ReclaimAction, ReslicePlan, RuleSpec, StopPolicy, TaintPlan, Workload,
};
use crate::cluster::{describe, labels};
use crate::model::{Delta, QuotaSourceSpec};
pub use call::Kube;

pub use super::exec::{ExecOptions, leftovers, reconcile};
pub use drain::{drain_action, drain_action_at, holds_gpus};
pub use evict::{pdb_selects, pod_view};
pub use node::node_view;
pub use queue::queue_view;
pub use reclaim::workload_view;

/// The field manager fabrik's writes are recorded under (managedFields), so that
/// mig-manager's later writes can be told from ours.
pub const FIELD_MANAGER: &str = "fabrik";

pub(crate) fn pp() -> PatchParams {
    PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }
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

/// A read that failed through its retries, for the runner: whether another look may do
/// better, and the person's words for it.
pub(crate) fn read_failure(what: &str, e: &kube::Error) -> ReadFailure {
    ReadFailure { transient: super::retry::transient(e).is_some(), why: describe(e), message: api_failure(what, e) }
}

/// Runs a confirmed plan on the cluster to its outcome ([`exec::execute`] through [`Kube`]).
pub async fn execute(ex: &KubeExec, id: u64, plan: Plan, cancel: watch::Receiver<bool>) {
    // Nobody interrupts this one: the sender stays here, unused, until the plan is done.
    let (_halt, halted) = watch::channel(None);
    execute_until(ex, id, plan, cancel, halted).await
}

/// [`execute`], stopped at once when `halt` says why the cockpit is stopping.
pub async fn execute_until(
    ex: &KubeExec,
    id: u64,
    plan: Plan,
    cancel: watch::Receiver<bool>,
    halt: watch::Receiver<Option<String>>,
) {
    let env = Env {
        opts: ex.opts.clone(),
        audit: Some(ex.audit.clone()),
        sink: Sink::Channel(ex.out.clone()),
        user: ex.audit.user.clone(),
    };
    exec::execute(Kube { client: ex.client.clone() }, env, id, plan, cancel, halt).await
}

impl Target for Kube {
    fn clock_ms(&self) -> u64 {
        call::clock_ms()
    }

    fn wall_ms(&self) -> u64 {
        crate::now_ms()
    }

    fn sleep(&self, d: Duration) -> impl std::future::Future<Output = ()> + Send {
        tokio::time::sleep(d)
    }

    async fn preflight(&mut self, run: &mut Run<'_>) -> Result<(), String> {
        match access::preflight(&self.client, &perms_for(run.plan)).await {
            Ok(None) => Ok(()),
            Ok(Some(why)) => Err(why),
            Err(e) => Err(api_failure("checking your permissions", &e)),
        }
    }

    async fn read_node(&mut self, run: &mut Run<'_>, node: &str) -> Step<Result<Option<NodeView>, ReadFailure>> {
        self.node(run, node).await
    }

    async fn set_cordon(&mut self, run: &mut Run<'_>, node: &str, mark: Option<&CordonMark>) -> Step<()> {
        self.cordon(run, node, mark).await
    }

    async fn node_pods(&mut self, run: &mut Run<'_>, node: &str) -> Step<Vec<PodView>> {
        evict::node_pods(self, run, node).await
    }

    async fn pod(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
    ) -> Step<Result<Option<PodView>, ReadFailure>> {
        evict::pod_now(self, run, namespace, name).await
    }

    async fn evict(&mut self, run: &mut Run<'_>, pod: &PodRef) -> Step<Result<Evicted, String>> {
        evict::evict_one(self, run, &pod.namespace, &pod.name, &pod.uid).await
    }

    async fn blocking_pdb(&mut self, namespace: &str, name: &str) -> Option<String> {
        evict::blocking_pdb(&self.client, namespace, name).await
    }

    async fn add_mig_config(&mut self, run: &mut Run<'_>, name: &str, entry: &str) -> Step<bool> {
        self.ensure_mig_config(run, name, entry).await
    }

    async fn set_mig_config(&mut self, run: &mut Run<'_>, plan: &ReslicePlan) -> Step<NodeView> {
        Kube::set_mig_config(self, run, plan).await
    }

    async fn slice_caps(&mut self, run: &mut Run<'_>, node: &str) -> Step<Caps> {
        Kube::slice_caps(self, run, node).await
    }

    async fn patch_quota(&mut self, run: &mut Run<'_>, q: &QuotaPlan) -> Step<(String, String)> {
        quota::quota_op(self, run, q).await
    }

    async fn create_taint_rule(&mut self, run: &mut Run<'_>, plan: &TaintPlan, rule: &RuleSpec) -> Step<bool> {
        self.create_rule(run, plan, rule).await
    }

    async fn taint_rule_exists(&mut self, run: &mut Run<'_>, name: &str) -> Step<Result<bool, ReadFailure>> {
        self.rule_exists(run, name).await
    }

    async fn delete_taint_rule(&mut self, run: &mut Run<'_>, name: &str) -> Step<bool> {
        self.delete_rule(run, name).await
    }

    async fn device_pods(
        &mut self,
        run: &mut Run<'_>,
        pool: &str,
        devices: &[String],
    ) -> Step<Result<Vec<String>, ReadFailure>> {
        self.pods_using(run, pool, devices).await
    }

    async fn read_workload(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        kind: Workload,
        name: &str,
    ) -> Step<Result<Option<WorkloadView>, ReadFailure>> {
        self.workload(run, namespace, kind, name).await
    }

    async fn annotate_pod(
        &mut self,
        run: &mut Run<'_>,
        pod: &PodRef,
        key: &str,
        value: &str,
    ) -> Step<Result<(), String>> {
        self.annotate(run, pod, key, value).await
    }

    async fn scale(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        kind: Workload,
        name: &str,
        seen: &WorkloadView,
        to: i32,
    ) -> Step<Result<(), String>> {
        self.scale_to(run, namespace, kind, name, seen, to).await
    }

    async fn suspend_job(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Step<Result<(), String>> {
        self.suspend(run, namespace, name, uid).await
    }

    async fn read_queue(&mut self, run: &mut Run<'_>, queue: &str) -> Step<Result<Option<QueueView>, ReadFailure>> {
        self.queue(run, queue).await
    }

    async fn set_stop_policy(
        &mut self,
        run: &mut Run<'_>,
        queue: &str,
        policy: StopPolicy,
    ) -> Step<Result<(), String>> {
        self.stop_policy(run, queue, policy).await
    }

    async fn read_kueue_workload(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
    ) -> Step<Result<Option<crate::model::KueueWorkload>, ReadFailure>> {
        self.kueue_workload(run, namespace, name).await
    }

    async fn set_workload_active(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
        uid: &str,
        active: bool,
    ) -> Step<Result<(), String>> {
        self.workload_active(run, namespace, name, uid, active).await
    }

    async fn read_host(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
    ) -> Step<Result<Option<crate::model::BareMetalHost>, ReadFailure>> {
        self.host(run, namespace, name).await
    }

    async fn request_host(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
        action: super::HostAction,
    ) -> Step<Result<(), String>> {
        self.host_request(run, namespace, name, action).await
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
            QuotaSourceSpec::ClusterQueue { .. } => v.push(access::PATCH_CLUSTERQUEUES),
        },
        PlanDetail::Taint(t) => {
            v.push(if t.effect.is_some() { access::CREATE_TAINT_RULES } else { access::DELETE_TAINT_RULES })
        }
        PlanDetail::Queue(_) => v.push(access::PATCH_CLUSTERQUEUES),
        PlanDetail::Workload(w) => v.push(access::PATCH_WORKLOADS.in_namespace(&w.namespace)),
        PlanDetail::Host(h) => v.push(access::PATCH_HOSTS.in_namespace(&h.namespace)),
        PlanDetail::Reclaim(r) => {
            let ns = r.namespace.as_str();
            match &r.action {
                ReclaimAction::ScaleDown { kind, rs, .. } => {
                    if rs.is_some() {
                        v.push(access::PATCH_PODS.in_namespace(ns));
                        v.push(access::GET_REPLICASETS.in_namespace(ns));
                    }
                    v.push(access::patch_workload(*kind).in_namespace(ns));
                }
                ReclaimAction::Suspend { .. } => v.push(access::patch_workload(Workload::Job).in_namespace(ns)),
                ReclaimAction::Evict => v.push(access::EVICT_PODS.in_namespace(ns)),
            }
        }
    }
    v
}

#[cfg(test)]
mod tests;
