//! What an operation does to a cluster, as verbs: the one runner ([`super::exec`]) drives a
//! plan through a [`Target`], implemented by the Kubernetes executor ([`super::kube`]) and by
//! the simulator (`sim::exec`), so the demo runs an operation exactly as a cluster does — the
//! same steps, waits, checks and words; only the verbs differ.
//!
//! A target answers with views ([`NodeView`], [`PodView`]) of what it holds, not its own
//! types, so the runner's decisions (kubectl's filters, the drain's second look, mig-manager's
//! acknowledgement) are written once.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::cordon::CordonMark;
use super::exec::{Run, Step};
use super::mig_ack::{Caps, MigSeen};
use super::{PodAction, QuotaPlan, ReslicePlan, RuleSpec, StopPolicy, TaintPlan, Workload};
use crate::cluster::labels;
use crate::model::{Deletion, Owner};

/// A node as an operation needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeView {
    pub name: String,
    pub unschedulable: bool,
    /// fabrik's mark beside a cordon it made ([`super::cordon`]).
    pub mark: Option<CordonMark>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// The device-plugin GPU resources it advertises (positive counts; empty on a DRA node).
    pub capacity: Caps,
    /// When the state label's owner (mig-manager, not fabrik) last wrote the node.
    pub state_written: Option<Timestamp>,
    /// When fabrik last wrote the config label.
    pub our_write: Option<Timestamp>,
}

impl NodeView {
    pub fn label(&self, k: &str) -> Option<&str> {
        self.labels.get(k).map(String::as_str)
    }

    /// What this read says about mig-manager, with the node's devices `caps`.
    pub fn seen(&self, caps: Caps) -> MigSeen {
        MigSeen {
            config: self.labels.get(labels::MIG_CONFIG).cloned(),
            state: self.labels.get(labels::MIG_CONFIG_STATE).cloned(),
            state_written: self.state_written,
            caps,
        }
    }

    /// The `nvidia.com/gpu.deploy.*` labels that say a component is paused.
    pub fn paused(&self) -> Vec<String> {
        self.labels
            .iter()
            .filter(|(k, v)| k.starts_with(labels::DEPLOY_PREFIX) && v.starts_with("paused"))
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    }
}

/// A pod as a drain needs it: what kubectl's filters read, and whether it holds GPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodView {
    pub namespace: String,
    pub name: String,
    /// The eviction's precondition: a pod with the same name and another uid is a
    /// replacement, not the one confirmed.
    pub uid: String,
    pub owner: Owner,
    /// Phase Succeeded or Failed.
    pub finished: bool,
    pub empty_dir: bool,
    /// Asks for GPUs (whole, MIG or DRA claims) and still holds them: not finished.
    pub holds_gpus: bool,
    pub deletion: Option<Deletion>,
}

impl PodView {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// What keeps a pod whose deletion is under way, at `now` (ms), or `None`.
    pub fn terminating(&self, now: u64) -> Option<String> {
        self.deletion.as_ref().map(|d| super::terminating_note(d, now))
    }

    /// kubectl's filters ([`super::drain::kubectl_action`]) on this pod at `now`.
    pub fn action(&self, force: bool, now: u64) -> PodAction {
        super::drain::kubectl_action(self.terminating(now), self.owner, self.finished, self.empty_dir, force)
    }
}

/// A pod the drain or reslice must see gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// Already being deleted, and what keeps it: waited for, never evicted again.
    pub terminating: Option<String>,
}

impl PodRef {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// A workload controller (Deployment, ReplicaSet, StatefulSet, Job) as a reclaim needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkloadView {
    pub uid: String,
    /// `spec.replicas` (not for a Job).
    pub replicas: Option<i32>,
    /// `status.replicas` once the controller has acted on the latest spec
    /// (`status.observedGeneration` ≥ `metadata.generation`); `None` before.
    pub settled: Option<i32>,
    /// A Job's `spec.suspend`.
    pub suspended: bool,
    /// Its controlling owner: kind and name.
    pub controller: Option<(String, String)>,
    /// The Kueue queue it is submitted to (`kueue.x-k8s.io/queue-name`).
    pub queue: Option<String>,
}

/// A Kueue ClusterQueue as a hold or resume needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueView {
    /// `spec.stopPolicy` (`None` when unset).
    pub stop_policy: String,
    /// The `Active` condition: status, reason, message; `None` before Kueue wrote one.
    pub active: Option<(bool, String, String)>,
    /// `status.reservingWorkloads` and `status.admittedWorkloads`.
    pub reserving: i64,
    pub admitted: i64,
}

/// A read that failed through its retries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadFailure {
    /// The failure may pass (5xx, a reset, a timeout): a wait may go on.
    pub transient: bool,
    /// What went wrong, briefly ("503 Service Unavailable").
    pub why: String,
    /// The person's words for it, with what to do.
    pub message: String,
}

/// "PodDisruptionBudget ml/trainer-pdb allows 0 disruptions now (2 healthy, 2 needed)": why
/// an eviction is refused, in the same words on a cluster and in the demo.
pub fn pdb_refusal(ns: &str, name: &str, allowed: i32, healthy: i32, desired: i32) -> String {
    let s = if allowed == 1 { "" } else { "s" };
    format!("PodDisruptionBudget {ns}/{name} allows {allowed} disruption{s} now ({healthy} healthy, {desired} needed)")
}

/// What one eviction answered.
#[derive(Debug, PartialEq)]
pub enum Evicted {
    Done,
    Gone,
    /// Refused for now, with the HTTP status and what the server said.
    Retry(u16, String),
    /// No answer through the call's retries (the API server or etcd away, a broken
    /// connection): it may or may not have been evicted. Sent again later with the same uid
    /// precondition, which is safe: a pod already evicted is terminating or gone by then.
    Unanswered(String),
}

/// The verbs of an operation. Each takes the running operation for its log, its audit
/// (a mutating verb records `sending` first) and its cancel switch; a verb that fails for
/// good says so as `Stop::Failed` with the person's words, or, where the caller decides what
/// a failure means, as the inner `Err`.
#[allow(async_fn_in_trait)] // used with concrete targets only; their futures are Send
pub trait Target {
    /// A monotonic clock in ms, for deadlines and waits.
    fn clock_ms(&self) -> u64;
    /// The wall clock in ms since the epoch (for notes and marks).
    fn wall_ms(&self) -> u64;
    /// Resolves after `d` on this target's clock.
    fn sleep(&self, d: Duration) -> impl Future<Output = ()> + Send;

    /// Asks again, for the plan's namespaces, whether this identity may do what the plan
    /// needs. `Err`: why not (or why it could not be asked); nothing is sent then.
    async fn preflight(&mut self, run: &mut Run<'_>) -> Result<(), String>;

    /// The node now; `None` when it is gone.
    async fn read_node(&mut self, run: &mut Run<'_>, node: &str) -> Step<Result<Option<NodeView>, ReadFailure>>;
    /// Cordons with `mark` beside it, or (`None`) uncordons and removes any mark, in one write.
    async fn set_cordon(&mut self, run: &mut Run<'_>, node: &str, mark: Option<&CordonMark>) -> Step<()>;
    /// The pods bound to the node now.
    async fn node_pods(&mut self, run: &mut Run<'_>, node: &str) -> Step<Vec<PodView>>;
    /// One pod now (`None`: gone); `Err` is a failure to read it.
    async fn pod(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
    ) -> Step<Result<Option<PodView>, ReadFailure>>;
    /// Evicts one pod with its uid as precondition (policy/v1 Eviction semantics).
    async fn evict(&mut self, run: &mut Run<'_>, pod: &PodRef) -> Step<Result<Evicted, String>>;
    /// The PodDisruptionBudget that refuses a pod's eviction, in words, if one is found.
    async fn blocking_pdb(&mut self, namespace: &str, name: &str) -> Option<String>;

    /// Adds `entry` as config `name` to the mig-parted config; `false` when it is there already.
    async fn add_mig_config(&mut self, run: &mut Run<'_>, name: &str, entry: &str) -> Step<bool>;
    /// Sets `nvidia.com/mig.config` to the plan's config; returns the node as written.
    async fn set_mig_config(&mut self, run: &mut Run<'_>, plan: &ReslicePlan) -> Step<NodeView>;
    /// The node's GPU devices as its DRA ResourceSlices offer them.
    async fn slice_caps(&mut self, run: &mut Run<'_>, node: &str) -> Step<Caps>;

    /// Writes a quota over the version the preview showed; a concurrent edit is a conflict,
    /// never overwritten. Returns the step's line and the outcome.
    async fn patch_quota(&mut self, run: &mut Run<'_>, q: &QuotaPlan) -> Step<(String, String)>;

    /// Creates the DeviceTaintRule `rule` of `plan`. `Ok(false)`: one of that name is there
    /// already with the same selector and taint. One that differs is never overwritten: the
    /// operation stops and says so.
    async fn create_taint_rule(&mut self, run: &mut Run<'_>, plan: &TaintPlan, rule: &RuleSpec) -> Step<bool>;
    /// Whether the DeviceTaintRule `name` is there now.
    async fn taint_rule_exists(&mut self, run: &mut Run<'_>, name: &str) -> Step<Result<bool, ReadFailure>>;
    /// Deletes the DeviceTaintRule `name`; `false` when it was gone already.
    async fn delete_taint_rule(&mut self, run: &mut Run<'_>, name: &str) -> Step<bool>;
    /// `namespace/name` of the pods using any of `devices` of `pool` now, as the cluster says:
    /// a claim allocated the device and is reserved for the pod, which is not gone. Every such
    /// pod, not only those the preview named (one may have got the GPU since).
    async fn device_pods(
        &mut self,
        run: &mut Run<'_>,
        pool: &str,
        devices: &[String],
    ) -> Step<Result<Vec<String>, ReadFailure>>;

    /// A workload controller now (`None`: gone).
    async fn read_workload(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        kind: Workload,
        name: &str,
    ) -> Step<Result<Option<WorkloadView>, ReadFailure>>;
    /// Sets the annotation `key: value` on the pod, its uid as precondition. `Err`: refused,
    /// in words (nothing was changed).
    async fn annotate_pod(
        &mut self,
        run: &mut Run<'_>,
        pod: &PodRef,
        key: &str,
        value: &str,
    ) -> Step<Result<(), String>>;
    /// Sets the replicas of a workload from `from` to `to`, written only while its uid and
    /// replicas are still those read (a JSON patch `test`). `Err`: refused, in words.
    async fn scale(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        kind: Workload,
        name: &str,
        seen: &WorkloadView,
        to: i32,
    ) -> Step<Result<(), String>>;
    /// Sets `spec.suspend: true` on the Job, its uid as precondition. `Err`: refused, in words.
    async fn suspend_job(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Step<Result<(), String>>;

    /// A Kueue ClusterQueue now (`None`: gone).
    async fn read_queue(&mut self, run: &mut Run<'_>, queue: &str) -> Step<Result<Option<QueueView>, ReadFailure>>;
    /// Sets its `spec.stopPolicy`. `Err`: refused, in words (nothing was changed).
    async fn set_stop_policy(&mut self, run: &mut Run<'_>, queue: &str, policy: StopPolicy)
    -> Step<Result<(), String>>;

    /// A Kueue Workload now (`None`: gone).
    async fn read_kueue_workload(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
    ) -> Step<Result<Option<crate::model::KueueWorkload>, ReadFailure>>;
    /// Sets its `spec.active`, its uid as precondition. `Err`: refused, in words.
    async fn set_workload_active(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
        uid: &str,
        active: bool,
    ) -> Step<Result<(), String>>;

    /// A Metal3 BareMetalHost now (`None`: gone).
    async fn read_host(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
    ) -> Step<Result<Option<crate::model::BareMetalHost>, ReadFailure>>;
    /// Asks the baremetal-operator for `action`: the reboot or inspect annotation, or
    /// `spec.online`. `Err`: refused, in words (nothing was changed).
    async fn request_host(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
        action: super::HostAction,
    ) -> Step<Result<(), String>>;
}
