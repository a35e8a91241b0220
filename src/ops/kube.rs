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

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::access::{self, Perm};
use super::audit::{Audit, Phase};
use super::cordon::{CordonEnd, CordonMark};
use super::mig_ack::{self, MigAck, MigVerdict, MigWrite};
use super::retry::{self, Backoff, Transient};
use super::{DrainPlan, OpKind, Plan, PlanDetail, PodAction, QuotaPlan, ReslicePlan};
use crate::cluster::{describe, is_status, labels};
use crate::model::{Delta, OpProgress, QuotaSourceSpec};

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

fn pp() -> PatchParams {
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

enum Stop {
    Cancelled,
    Failed(String),
}

type Step<T> = Result<T, Stop>;

/// One running operation: its audit trail and its progress.
struct Run<'a> {
    ex: &'a KubeExec,
    id: u64,
    plan: &'a Plan,
    done: u32,
    total: u32,
    cancel: watch::Receiver<bool>,
    blocked_on: Option<String>,
    /// Where the operation is (its last step, the call being sent, what it waits for), for
    /// the record written when the cockpit stops under it.
    at: Arc<Mutex<String>>,
    /// The operation's overall deadline: no retry is started past it.
    deadline: Instant,
    /// The node's cordon before this operation touched it (set by the cordon step).
    cordon_before: Option<(bool, Option<CordonMark>)>,
}

impl Run<'_> {
    async fn send(&self, d: OpProgress) {
        let _ = self.ex.out.send(vec![Delta::Op(d)]).await;
    }

    fn audit(&self, phase: Phase, msg: &str) -> Step<()> {
        self.ex
            .audit
            .record(self.id, self.plan, phase, msg)
            .map_err(|e| Stop::Failed(format!("{e}; stopped after {} of {} steps", self.done, self.total)))
    }

    fn set_at(&self, what: &str) {
        if let Ok(mut at) = self.at.lock() {
            what.clone_into(&mut at);
        }
    }

    /// Written before a mutating API call goes out, so a call in flight when the cockpit
    /// stops (or dies) is in the log; `at` says what it was.
    fn sending(&self, what: &str) -> Step<()> {
        self.audit(Phase::Sending, what)?;
        self.set_at(&format!("sending: {what}"));
        Ok(())
    }

    async fn step(&mut self, msg: String) -> Step<()> {
        self.audit(Phase::Step, &msg)?;
        self.set_at(&format!("after: {msg}"));
        self.done = (self.done + 1).min(self.total);
        self.blocked_on = None;
        self.send(OpProgress::Step { id: self.id, step: msg, done: self.done, total: self.total }).await;
        Ok(())
    }

    async fn log(&mut self, msg: String) -> Step<()> {
        self.audit(Phase::Log, &msg)?;
        self.send(OpProgress::Log { id: self.id, line: msg }).await;
        Ok(())
    }

    /// Reported (and audited) once per distinct reason.
    async fn blocked(&mut self, msg: String) -> Step<()> {
        if self.blocked_on.as_deref() == Some(msg.as_str()) {
            return Ok(());
        }
        self.audit(Phase::Blocked, &msg)?;
        self.set_at(&format!("waiting: {msg}"));
        self.blocked_on = Some(msg.clone());
        self.send(OpProgress::Blocked { id: self.id, reason: msg }).await;
        Ok(())
    }

    /// Sleeps unless cancelled first.
    async fn sleep(&mut self, d: Duration) -> Step<()> {
        if *self.cancel.borrow() {
            return Err(Stop::Cancelled);
        }
        tokio::select! {
            _ = tokio::time::sleep(d) => Ok(()),
            r = self.cancel.changed() => match r {
                // The cockpit stopped serving operations (a context switch): stop here,
                // recorded as cancelled.
                Err(_) => Err(Stop::Cancelled),
                Ok(()) if *self.cancel.borrow() => Err(Stop::Cancelled),
                Ok(()) => Ok(()),
            },
        }
    }

    fn check_cancel(&self) -> Step<()> {
        if *self.cancel.borrow() { Err(Stop::Cancelled) } else { Ok(()) }
    }

    /// One API call (`f` makes a fresh request each try), each try bounded by the call
    /// timeout; failures `transient` calls transient are retried with backoff, each retry
    /// logged (op log and audit), never past the operation's deadline. Only idempotent calls
    /// come here. The inner result is the call's last answer.
    async fn call<T, F, Fut>(
        &mut self,
        what: &str,
        transient: fn(&kube::Error) -> Option<Transient>,
        mut f: F,
    ) -> Step<Result<T, kube::Error>>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, kube::Error>>,
    {
        let (limit, backoff) = (self.ex.opts.call_timeout, self.ex.opts.backoff);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let e = match tokio::time::timeout(limit, f()).await {
                Ok(Ok(v)) => return Ok(Ok(v)),
                Ok(Err(e)) => e,
                Err(_) => kube::Error::Service(Box::new(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {}", secs(limit)),
                ))),
            };
            let Some(t) = transient(&e) else { return Ok(Err(e)) };
            let Some(wait) = backoff.delay(attempt, &t, retry::jitter()) else {
                self.log(format!("{what}: {} — gave up after {attempt} tries", t.why)).await?;
                return Ok(Err(e));
            };
            if Instant::now() + wait >= self.deadline {
                self.log(format!("{what}: {} — no time left before the operation's deadline", t.why)).await?;
                return Ok(Err(e));
            }
            self.log(format!(
                "{what}: {} — retrying in {}ms (try {} of {})",
                t.why,
                wait.as_millis(),
                attempt + 1,
                backoff.attempts
            ))
            .await?;
            self.sleep(wait).await?;
        }
    }

    /// A mutating call: recorded as `sending` before it goes out (so a call in flight when
    /// the cockpit dies is in the log), then [`Run::call`].
    async fn mutate<T, F, Fut>(
        &mut self,
        what: &str,
        transient: fn(&kube::Error) -> Option<Transient>,
        f: F,
    ) -> Step<Result<T, kube::Error>>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, kube::Error>>,
    {
        self.sending(what)?;
        self.call(what, transient, f).await
    }

    /// The mark this operation writes with its cordon.
    fn cordon_mark(&self) -> CordonMark {
        CordonMark::new(
            &self.ex.audit.op_key(self.id),
            self.plan.kind.name(),
            &self.ex.audit.user,
            &super::audit::rfc3339(crate::now_ms()),
        )
    }
}

/// The person's words for an API failure at `what`, with what to do about it.
fn api_failure(what: &str, e: &kube::Error) -> String {
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
    let total = match &plan.detail {
        PlanDetail::Cordon { .. } => 1,
        PlanDetail::Drain(d) => 2 + d.pods.iter().filter(|p| p.action.must_go()).count() as u32,
        PlanDetail::Reslice(r) => 4 + r.pods.iter().filter(|p| p.action.must_go()).count() as u32,
        PlanDetail::Quota(_) => 1,
    };
    let _ = ex
        .out
        .send(vec![Delta::Op(OpProgress::Started {
            id,
            title: plan.title.clone(),
            target: plan.target.clone(),
            total,
        })])
        .await;
    let at = Arc::new(Mutex::new("confirmed".to_string()));
    let deadline = Instant::now() + ex.opts.deadline(plan.kind);
    let mut run = Run {
        ex,
        id,
        plan: &plan,
        done: 0,
        total,
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
            let line = format!(
                "cancelled after {} of {} steps; what was done stays (a cordon stays until you uncordon, or a reslice of the node ends)",
                run.done, run.total
            );
            let _ = run.audit(Phase::Cancelled, &line);
            run.send(OpProgress::Log { id, line }).await;
            run.send(OpProgress::Cancelled { id }).await;
        }
    }
}

/// Resolves with the reason once `halt` carries one; never while it stays `None` (also
/// when its sender is gone: an executor nobody can halt runs to its end).
async fn halted(halt: &mut watch::Receiver<Option<String>>) -> String {
    loop {
        if let Some(why) = halt.borrow_and_update().clone() {
            return why;
        }
        if halt.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The permissions a plan needs, scoped to the namespaces it touches.
pub fn perms_for(plan: &Plan) -> Vec<Perm> {
    let mut v = vec![];
    let pods_ns = |pods: &mut dyn Iterator<Item = &super::drain::DrainPod>| {
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

// ---------- cordon ----------

/// Reads a node, with retries. `None`: it is gone.
async fn read_node(run: &mut Run<'_>, node: &str) -> Step<Option<Node>> {
    let api: Api<Node> = Api::all(run.ex.client.clone());
    run.call(&format!("reading node {node}"), retry::transient, || api.get_opt(node))
        .await?
        .map_err(|e| Stop::Failed(api_failure(&format!("reading node {node}"), &e)))
}

/// Cordons (with this operation's mark) or uncordons (removing any mark). Returns whether
/// the node changed, and what its cordon was before.
async fn set_unschedulable(run: &mut Run<'_>, node: &str, cordon: bool) -> Step<(bool, Option<CordonMark>)> {
    let Some(n) = read_node(run, node).await? else {
        return Err(Stop::Failed(format!("node {node} is gone from the cluster; nothing was changed")));
    };
    let is = n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
    let mark = CordonMark::of(n.metadata.annotations.as_ref());
    // A cordoned node keeps its mark; an uncordoned one must not carry a stale one.
    if is == cordon && (cordon || mark.is_none()) {
        return Ok((false, mark));
    }
    run.check_cancel()?;
    // kubectl's strategic merge patch leaves the field out when uncordoning; null does the
    // same. The mark goes in the same patch: a cordon is never without it, nor it without one.
    let patch = if cordon {
        json!({ "spec": { "unschedulable": true },
                "metadata": { "annotations": { labels::CORDONED_BY: run.cordon_mark().value() } } })
    } else {
        json!({ "spec": { "unschedulable": Value::Null },
                "metadata": { "annotations": { labels::CORDONED_BY: Value::Null } } })
    };
    let api: Api<Node> = Api::all(run.ex.client.clone());
    let what = format!("{} {node}", if cordon { "cordoning" } else { "uncordoning" });
    let (params, body) = (pp(), Patch::Merge(&patch));
    run.mutate(&what, retry::transient, || api.patch(node, &params, &body))
        .await?
        .map_err(|e| Stop::Failed(api_failure(&what, &e)))?;
    Ok((is != cordon, mark))
}

async fn cordon_op(run: &mut Run<'_>, node: &str, cordon: bool) -> Step<String> {
    let (changed, _) = set_unschedulable(run, node, cordon).await?;
    let what = if cordon { "cordoned" } else { "uncordoned" };
    if changed {
        run.step(format!("{what} {node}")).await?;
        Ok(format!("{node} {what}"))
    } else {
        run.step(format!("{node} was already {}", if cordon { "cordoned" } else { "schedulable" })).await?;
        Ok(format!("{node} unchanged (already {})", if cordon { "cordoned" } else { "schedulable" }))
    }
}

// ---------- drain ----------

/// kubectl's filters ([`super::drain::kubectl_action`]) on a pod as the API has it now.
pub fn drain_action(p: &Pod, force: bool) -> PodAction {
    drain_action_at(p, force, now_ms())
}

/// [`drain_action`] at `now` (ms since the epoch), for the notes on terminating pods.
pub fn drain_action_at(p: &Pod, force: bool, now: u64) -> PodAction {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("");
    let empty_dir =
        p.spec.as_ref().and_then(|s| s.volumes.as_ref()).is_some_and(|v| v.iter().any(|v| v.empty_dir.is_some()));
    super::drain::kubectl_action(
        terminating_now(p, now),
        crate::cluster::pod_owner(p),
        matches!(phase, "Succeeded" | "Failed"),
        empty_dir,
        force,
    )
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// What keeps a pod whose deletion is under way, or `None` if none is.
fn terminating_now(p: &Pod, now: u64) -> Option<String> {
    crate::cluster::pod_deletion(p).map(|d| super::drain::terminating_note(&d, now))
}

/// Whether a pod asks for GPUs (whole, MIG or DRA claims) and still holds them: neither
/// finished nor stopped by its kubelet.
pub fn holds_gpus(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return false;
    }
    let Some(spec) = p.spec.as_ref() else { return false };
    let extended = spec.containers.iter().chain(spec.init_containers.iter().flatten()).any(|c| {
        let r = c.resources.as_ref();
        r.and_then(|r| r.limits.as_ref()).into_iter().chain(r.and_then(|r| r.requests.as_ref())).flatten().any(
            |(k, v)| (k == labels::GPU_RESOURCE || k.starts_with(labels::MIG_RESOURCE_PREFIX)) && v.0.trim() != "0",
        )
    });
    extended || spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty())
}

/// A pod the drain or reslice must see gone: the uid is the eviction's precondition, and a
/// pod with the same name and another uid is a replacement, not ours.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// Already being deleted, and what keeps it: waited for, never evicted again.
    pub terminating: Option<String>,
}

impl PodRef {
    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

fn pod_key(p: &Pod) -> (String, String) {
    (p.metadata.namespace.clone().unwrap_or_default(), p.metadata.name.clone().unwrap_or_default())
}

/// Compares the node's pods now with what the person confirmed (the pods to evict and those
/// already terminating). Returns the pods that must go — to evict, or to wait for when they
/// are terminating already — and what to tell the person about the difference; an error
/// when a pod that would need forcing appeared (kubectl stops before evicting anything in
/// that case too). A terminating pod is waited for even if the preview did not show it.
pub fn reconcile(
    confirmed: &[(String, String)],
    pods: &[Pod],
    force: bool,
) -> Result<(Vec<PodRef>, Vec<String>), String> {
    let now = now_ms();
    let mut evict = Vec::new();
    let mut notes = Vec::new();
    let mut refused = Vec::new();
    for p in pods {
        let (ns, name) = pod_key(p);
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let wanted = confirmed.iter().any(|(n, m)| *n == ns && *m == name);
        match drain_action_at(p, force, now) {
            PodAction::Evict | PodAction::ForceDelete(_) if wanted => {
                evict.push(PodRef { namespace: ns, name, uid, terminating: None })
            }
            PodAction::Evict | PodAction::ForceDelete(_) => notes
                .push(format!("{ns}/{name} arrived after the preview and is left in place; drain again to move it")),
            PodAction::Wait(why) => {
                if !wanted {
                    notes.push(format!("{ns}/{name} is terminating ({why}); waiting for it too"));
                }
                evict.push(PodRef { namespace: ns, name, uid, terminating: Some(why) });
            }
            PodAction::Refuse(why) => refused.push(format!("{ns}/{name} {why}")),
            PodAction::Skip(_) => {}
        }
    }
    for (ns, name) in confirmed {
        if !pods.iter().any(|p| pod_key(p) == (ns.clone(), name.clone())) {
            notes.push(format!("{ns}/{name} is already gone"));
        }
    }
    if !refused.is_empty() {
        return Err(format!(
            "the node now has pods eviction would refuse: {}; nothing was evicted (drain again to see them, f forces)",
            refused.join("; ")
        ));
    }
    Ok((evict, notes))
}

/// Whether a PDB's selector picks a pod (matchLabels and matchExpressions).
pub fn pdb_selects(pdb: &PodDisruptionBudget, pod_labels: &BTreeMap<String, String>) -> bool {
    let Some(sel) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else { return false };
    let labels_ok = sel.match_labels.iter().flatten().all(|(k, v)| pod_labels.get(k) == Some(v));
    let exprs_ok = sel.match_expressions.iter().flatten().all(|e| {
        let values = e.values.clone().unwrap_or_default();
        let have = pod_labels.get(&e.key);
        match e.operator.as_str() {
            "In" => have.is_some_and(|v| values.contains(v)),
            "NotIn" => have.is_none_or(|v| !values.contains(v)),
            "Exists" => have.is_some(),
            "DoesNotExist" => have.is_none(),
            _ => false,
        }
    });
    // An empty selector selects every pod in the namespace (policy/v1).
    labels_ok && exprs_ok
}

/// "PodDisruptionBudget ml/trainer-pdb allows 0 disruptions now (2 healthy, 2 needed)".
async fn blocking_pdb(client: &kube::Client, ns: &str, name: &str) -> Option<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = pods.get_opt(name).await.ok()??;
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    let list = pdbs.list(&ListParams::default()).await.ok()?;
    let pdb = list.items.into_iter().find(|p| pdb_selects(p, &labels))?;
    let st = pdb.status.as_ref();
    Some(format!(
        "PodDisruptionBudget {ns}/{} allows {} disruption{} now ({} healthy, {} needed)",
        pdb.metadata.name.clone().unwrap_or_default(),
        st.map(|s| s.disruptions_allowed).unwrap_or(0),
        if st.map(|s| s.disruptions_allowed) == Some(1) { "" } else { "s" },
        st.map(|s| s.current_healthy).unwrap_or(0),
        st.map(|s| s.desired_healthy).unwrap_or(0),
    ))
}

#[derive(Debug, PartialEq)]
enum Evicted {
    Done,
    Gone,
    /// Refused for now, with the HTTP status and what the server said.
    Retry(u16, String),
}

/// What an eviction answered 409 Conflict means, from the pod as it is now: only a pod that
/// is missing, or replaced (another uid), is gone; ours, already being deleted, is as good as
/// evicted (wait for it); otherwise the conflict (a failed uid precondition can only mean a
/// new uid, so this is a concurrent write, e.g. to the PDB) is retried.
fn after_conflict(uid: &str, now: Option<&Pod>, message: &str) -> Evicted {
    match now {
        None => Evicted::Gone,
        Some(p) if p.metadata.uid.as_deref() != Some(uid) => Evicted::Gone,
        Some(p) if p.metadata.deletion_timestamp.is_some() => Evicted::Done,
        Some(_) => Evicted::Retry(409, format!("conflict ({message})")),
    }
}

/// One eviction. Repeating it is safe (the uid precondition), so transient failures (5xx
/// but the multiple-PDB 500, a reset, an API Priority and Fairness 429) are retried; a PDB's
/// 429 is an answer, handled by the caller. Recorded as `sending` before it goes out.
async fn evict_one(run: &mut Run<'_>, ns: &str, name: &str, uid: &str) -> Step<Result<Evicted, String>> {
    let api: Api<Pod> = Api::namespaced(run.ex.client.clone(), ns);
    // The body kubectl sends (protocols.md §9), with the uid we confirmed as a precondition
    // so a replacement with the same name is never evicted by mistake.
    let body = json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": { "name": name, "namespace": ns },
        "deleteOptions": { "preconditions": { "uid": uid } },
    });
    let what = format!("evicting {ns}/{name}");
    let params = PostParams::default();
    let sent = run
        .mutate(&what, retry::transient_eviction, || {
            api.create_subresource::<Value, Value>("eviction", name, &params, &body)
        })
        .await?;
    Ok(match sent {
        Ok(_) => Ok(Evicted::Done),
        Err(e) if is_status(&e, 404) => Ok(Evicted::Gone),
        // A failed uid precondition says the pod was replaced — or the server met a
        // concurrent write. Only the pod as it is now tells which.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let reread = format!("re-reading {ns}/{name}");
            match run.call(&reread, retry::transient, || api.get_opt(name)).await? {
                Ok(now) => Ok(after_conflict(uid, now.as_ref(), &s.message)),
                Err(e) => Err(api_failure(&reread, &e)),
            }
        }
        Err(e) if is_status(&e, 429) => Ok(Evicted::Retry(
            429,
            match &e {
                kube::Error::Api(s) => s.message.clone(),
                _ => String::new(),
            },
        )),
        Err(kube::Error::Api(s))
            if s.code == 403
                && s.details.as_ref().is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating")) =>
        {
            Ok(Evicted::Retry(403, "its namespace is terminating".into()))
        }
        Err(e) => Err(api_failure(&what, &e)),
    })
}

/// Evicts `pods`, retrying 429s, then waits until each is gone — those already terminating
/// are only waited for. Gone means 404 or a new uid (kubectl); a pod held by a finalizer or
/// a long grace period is waited for until the drain's timeout, which names each pod left
/// and what keeps it.
async fn evict_and_wait(run: &mut Run<'_>, pods: Vec<PodRef>) -> Step<u32> {
    let client = run.ex.client.clone();
    // Never past the operation's own deadline: the wait after a drain's second look at the
    // node must not open a fresh window beyond what the preview said.
    let deadline = (Instant::now() + run.ex.opts.drain_timeout).min(run.deadline);
    let (terminating, mut pending): (Vec<PodRef>, Vec<PodRef>) =
        pods.into_iter().partition(|p| p.terminating.is_some());
    for p in &terminating {
        let why = p.terminating.as_deref().unwrap_or("terminating");
        run.log(format!("{} is already terminating ({why}): not evicting it, waiting until it is gone", p.key()))
            .await?;
    }
    let mut evicted: Vec<PodRef> = Vec::new();
    while !pending.is_empty() {
        run.check_cancel()?;
        let mut waiting = Vec::new();
        let mut reasons = Vec::new();
        let mut codes: Vec<u16> = Vec::new();
        for p in std::mem::take(&mut pending) {
            let key = p.key();
            match evict_one(run, &p.namespace, &p.name, &p.uid).await? {
                Ok(Evicted::Done) => {
                    run.step(format!("evicted {key}")).await?;
                    evicted.push(p);
                }
                Ok(Evicted::Gone) => run.step(format!("{key} was already gone")).await?,
                Ok(Evicted::Retry(code, msg)) => {
                    let why = if code == 429 {
                        blocking_pdb(&client, &p.namespace, &p.name).await.unwrap_or(msg)
                    } else {
                        msg
                    };
                    reasons.push(format!("{key}: {why}"));
                    if !codes.contains(&code) {
                        codes.push(code);
                    }
                    waiting.push(p);
                }
                Err(e) => {
                    return Err(Stop::Failed(format!(
                        "{e}; {} evicted so far, the node stays cordoned",
                        crate::ops::count(evicted.len(), "pod")
                    )));
                }
            }
        }
        if waiting.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            let left: Vec<String> = waiting.iter().map(PodRef::key).collect();
            return Err(Stop::Failed(format!(
                "timed out after {}s with {} not evicted: {}; the node stays cordoned",
                run.ex.opts.drain_timeout.as_secs(),
                crate::ops::count(left.len(), "pod"),
                reasons.join("; ")
            )));
        }
        let codes: Vec<String> = codes.iter().map(u16::to_string).collect();
        run.blocked(format!(
            "eviction refused ({}), retrying every {}s — {}",
            codes.join(", "),
            run.ex.opts.evict_retry.as_secs(),
            reasons.join("; ")
        ))
        .await?;
        run.sleep(run.ex.opts.evict_retry).await?;
        pending = waiting;
    }
    // Wait until each evicted or terminating pod is gone or replaced (kubectl: 404 or a new
    // uid); what keeps each one is read again on every poll.
    let n = evicted.len() as u32;
    let mut watched: Vec<PodRef> = evicted.into_iter().chain(terminating).collect();
    loop {
        let now = now_ms();
        let mut left = Vec::new();
        let mut still = Vec::new();
        for p in std::mem::take(&mut watched) {
            let api: Api<Pod> = Api::namespaced(client.clone(), &p.namespace);
            let what = format!("waiting for {}", p.key());
            match run.call(&what, retry::transient, || api.get_opt(&p.name)).await? {
                Ok(Some(q)) if q.metadata.uid.as_deref() == Some(p.uid.as_str()) => {
                    let why = terminating_now(&q, now).unwrap_or_else(|| "not terminating yet".to_string());
                    left.push(format!("{} ({why})", p.key()));
                    still.push(p);
                }
                Ok(_) if p.terminating.is_some() => run.step(format!("{} is gone", p.key())).await?,
                Ok(_) => {}
                Err(e) => return Err(Stop::Failed(api_failure(&what, &e))),
            }
        }
        watched = still;
        if left.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            return Err(Stop::Failed(format!(
                "timed out after {}s waiting for {} to terminate: {}; the node stays cordoned",
                run.ex.opts.drain_timeout.as_secs(),
                crate::ops::count(left.len(), "pod"),
                left.join("; ")
            )));
        }
        run.blocked(format!("waiting for {} to terminate: {}", crate::ops::count(left.len(), "pod"), left.join("; ")))
            .await?;
        run.sleep(run.ex.opts.poll).await?;
    }
    Ok(n)
}

async fn node_pods(run: &mut Run<'_>, node: &str) -> Step<Vec<Pod>> {
    let api: Api<Pod> = Api::all(run.ex.client.clone());
    let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let what = format!("listing the pods on {node}");
    run.call(&what, retry::transient, || api.list(&lp))
        .await?
        .map(|l| l.items)
        .map_err(|e| Stop::Failed(api_failure(&what, &e)))
}

/// The first step of a drain or a reslice: no new pods land on the node meanwhile. What
/// the cordon was before is kept in the run, for the reslice's end.
async fn cordon_step(run: &mut Run<'_>, node: &str) -> Step<()> {
    let (changed, mark) = set_unschedulable(run, node, true).await?;
    run.cordon_before = Some((!changed, if changed { None } else { mark.clone() }));
    if changed {
        return run.step(format!("cordoned {node}")).await;
    }
    match mark {
        // The node now serves this drain: a later reslice keeps it cordoned.
        Some(m) if run.plan.kind == OpKind::Drain && m.kind == "reslice" => {
            let value = run.cordon_mark().value();
            let api: Api<Node> = Api::all(run.ex.client.clone());
            let patch = json!({ "metadata": { "annotations": { labels::CORDONED_BY: value } } });
            let what = format!("marking the cordon of {node} as this drain's");
            let (params, body) = (pp(), Patch::Merge(&patch));
            run.mutate(&what, retry::transient, || api.patch(node, &params, &body))
                .await?
                .map_err(|e| Stop::Failed(api_failure(&what, &e)))?;
            run.step(format!("{node} was already cordoned by {}; the cordon is now this drain's", m.describe())).await
        }
        Some(m) => run.step(format!("{node} was already cordoned by {}", m.describe())).await,
        None => run.step(format!("{node} was already cordoned")).await,
    }
}

async fn drain_op(run: &mut Run<'_>, d: &DrainPlan) -> Step<String> {
    let node = d.node.as_str();
    cordon_step(run, node).await?;
    let confirmed: Vec<(String, String)> =
        d.pods.iter().filter(|p| p.action.must_go()).map(|p| (p.namespace.clone(), p.name.clone())).collect();
    let pods = node_pods(run, node).await?;
    let (evict, notes) = reconcile(&confirmed, &pods, d.force).map_err(Stop::Failed)?;
    let mut late = 0;
    for n in notes {
        late += usize::from(n.contains("arrived after the preview"));
        run.log(n).await?;
    }
    // Pods that vanished before their eviction still count as steps of the plan.
    for _ in evict.len()..confirmed.len() {
        run.done = (run.done + 1).min(run.total);
    }
    let waited = evict.iter().filter(|p| p.terminating.is_some()).count();
    let n = evict_and_wait(run, evict).await?;
    // What the cluster says now, not what we did: pods that started terminating meanwhile
    // are waited for too, and a pod still holding a GPU here means the node is not drained.
    let (waited_more, holding) = settle(run, node, d.force).await?;
    let skipped = d.pods.iter().filter(|p| matches!(p.action, PodAction::Skip(_))).count();
    if !holding.is_empty() {
        return Err(Stop::Failed(format!(
            "{node} is not drained: {} still hold{} GPUs there ({}) — drain again to move them; the node stays cordoned",
            crate::ops::count(holding.len(), "pod"),
            if holding.len() == 1 { "s" } else { "" },
            holding.join(", ")
        )));
    }
    run.step(format!("every evicted pod is gone from {node}")).await?;
    let mut msg = format!("{node} drained: {} evicted", crate::ops::count(n as usize, "pod"));
    if waited + waited_more > 0 {
        msg.push_str(&format!(", {} already terminating waited for", crate::ops::count(waited + waited_more, "pod")));
    }
    if skipped > 0 {
        msg.push_str(&format!(", {skipped} left in place (DaemonSet or mirror)"));
    }
    if late > 0 {
        msg.push_str(&format!("; {} arrived after the preview and stayed", crate::ops::count(late, "pod")));
    }
    Ok(msg)
}

/// Reads the node's pods once more after the waits: waits for any that started terminating
/// meanwhile, and returns how many those were and the pods that kubectl would evict and that
/// still hold GPUs on the node (arrived after the preview).
async fn settle(run: &mut Run<'_>, node: &str, force: bool) -> Step<(usize, Vec<String>)> {
    let (terminating, holding) = leftovers(&node_pods(run, node).await?, force, now_ms());
    let n = terminating.len();
    if n > 0 {
        run.total += n as u32;
        evict_and_wait(run, terminating).await?;
    }
    Ok((n, holding))
}

/// Of a drained node's pods: those still terminating (to wait for) and those kubectl would
/// evict that still hold GPUs there (`ns/name`): the node is not drained while either exists.
pub fn leftovers(pods: &[Pod], force: bool, now: u64) -> (Vec<PodRef>, Vec<String>) {
    let mut terminating = Vec::new();
    let mut holding = Vec::new();
    for p in pods {
        let (ns, name) = pod_key(p);
        match drain_action_at(p, force, now) {
            PodAction::Wait(why) => terminating.push(PodRef {
                namespace: ns,
                name,
                uid: p.metadata.uid.clone().unwrap_or_default(),
                terminating: Some(why),
            }),
            PodAction::Evict | PodAction::ForceDelete(_) | PodAction::Refuse(_) if holds_gpus(p) => {
                holding.push(format!("{ns}/{name}"))
            }
            _ => {}
        }
    }
    (terminating, holding)
}

// ---------- reslice ----------

/// Adds `entry` (a mig-parted config block, two-space indented under `mig-configs:`) to a
/// config file, re-indented to the file's own indentation. `None` when the name is there.
pub fn add_mig_config(text: &str, name: &str, entry: &str) -> Result<Option<String>, String> {
    crate::mig::parted::add_config(text, name, entry)
}

async fn ensure_mig_config(run: &mut Run<'_>, name: &str, entry: &str) -> Step<()> {
    let api: Api<ConfigMap> = Api::namespaced(run.ex.client.clone(), labels::MIG_CONFIGMAP_NS);
    let what = format!("{}/{}", labels::MIG_CONFIGMAP_NS, labels::MIG_CONFIGMAP);
    // Only ever adds an entry; a concurrent writer (409) makes us read again and re-add. The
    // replace carries the resourceVersion read, so retrying it is safe: a retry after a write
    // that did land meets 409, and the next read finds the entry.
    for _ in 0..5 {
        let cm = run
            .call(&format!("reading {what}"), retry::transient, || api.get_opt(labels::MIG_CONFIGMAP))
            .await?
            .map_err(|e| Stop::Failed(api_failure(&format!("reading {what}"), &e)))?;
        let Some(mut cm) = cm else {
            return Err(Stop::Failed(format!(
                "the mig-parted ConfigMap {what} does not exist, so mig-manager cannot learn config {name}; nothing was changed on the node (is the GPU operator's mig-manager installed?)"
            )));
        };
        let text = cm.data.as_ref().and_then(|d| d.get(labels::MIG_CONFIGMAP_KEY)).cloned().unwrap_or_default();
        let updated = add_mig_config(&text, name, entry).map_err(|why| {
            Stop::Failed(format!("{what} key {}: {why}; nothing was changed", labels::MIG_CONFIGMAP_KEY))
        })?;
        let Some(updated) = updated else {
            run.step(format!("{what} already has config {name}")).await?;
            return Ok(());
        };
        cm.data.get_or_insert_with(Default::default).insert(labels::MIG_CONFIGMAP_KEY.into(), updated);
        let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        match run
            .mutate(&format!("updating {what}"), retry::transient, || api.replace(labels::MIG_CONFIGMAP, &params, &cm))
            .await?
        {
            Ok(_) => {
                run.step(format!("added config {name} to {what}")).await?;
                return Ok(());
            }
            Err(e) if is_status(&e, 409) => {
                run.log(format!("{what} changed while we wrote it; reading it again")).await?;
            }
            Err(e) => return Err(Stop::Failed(api_failure(&format!("updating {what}"), &e))),
        }
    }
    Err(Stop::Failed(format!("{what} kept changing under us; gave up adding {name}")))
}

fn node_labels(n: &Node) -> BTreeMap<String, String> {
    n.metadata.labels.clone().unwrap_or_default()
}

fn paused_labels(l: &BTreeMap<String, String>) -> Vec<String> {
    l.iter()
        .filter(|(k, v)| k.starts_with(labels::DEPLOY_PREFIX) && v.starts_with("paused"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

fn secs(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 120 { format!("{}m{:02}s", s / 60, s % 60) } else { format!("{s}s") }
}

/// Where a reslice reads the node's GPU devices: its capacity (device plugin), or the DRA
/// driver's ResourceSlices for the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Devices {
    Capacity,
    Slices,
}

/// The node's GPU devices now, in device-plugin resource names.
async fn devices_now(run: &mut Run<'_>, node: &Node, from: Devices) -> Step<mig_ack::Caps> {
    match from {
        Devices::Capacity => Ok(mig_ack::capacity_caps(node)),
        Devices::Slices => {
            let name = node.metadata.name.clone().unwrap_or_default();
            let api: Api<k8s_openapi::api::resource::v1::ResourceSlice> = Api::all(run.ex.client.clone());
            let lp = ListParams::default().fields(&format!("spec.nodeName={name}"));
            let what = format!("listing the ResourceSlices of {name}");
            let list = run
                .call(&what, retry::transient, || api.list(&lp))
                .await?
                .map_err(|e| Stop::Failed(api_failure(&what, &e)))?;
            let devices = list
                .items
                .iter()
                .filter(|s| s.spec.driver == labels::DRA_DRIVER)
                .flat_map(|s| s.spec.devices.iter().flatten());
            Ok(mig_ack::slice_caps(devices))
        }
    }
}

fn caps_shown(c: &mig_ack::Caps) -> String {
    super::caps_text(c.iter().map(|(r, n)| (r, *n)))
}

/// Follows mig-manager from our label write (`written`: the node the patch returned) until
/// it has acknowledged this config and reports `success` with the planned devices
/// ([`mig_ack`]), or `failed`, or the time is up.
async fn follow_mig_manager(run: &mut Run<'_>, r: &ReslicePlan, written: &Node, from: Devices) -> Step<String> {
    let node = r.node.as_str();
    let api: Api<Node> = Api::all(run.ex.client.clone());
    let start = Instant::now();
    let want: mig_ack::Caps = r.capacity_after.iter().filter(|(_, n)| *n > 0).cloned().collect();
    let caps0 = devices_now(run, written, from).await?;
    let seen0 = mig_ack::observe(written, FIELD_MANAGER, caps0.clone());
    let mut ack = MigAck::new(MigWrite {
        state: seen0.state.clone(),
        at: mig_ack::our_write(written, FIELD_MANAGER),
        caps: caps0,
    });
    let mut pending_since: Option<Instant> = None;
    let mut announced_ack = false;
    let deadline = (start + run.ex.opts.mig_timeout).min(run.deadline);
    loop {
        let what = format!("reading node {node}");
        let n = match run.call(&what, retry::transient, || api.get_opt(node)).await? {
            Ok(Some(n)) => Some(n),
            Ok(None) => {
                return Err(Stop::Failed(format!("node {node} disappeared while mig-manager was reconfiguring it")));
            }
            // A read that failed through its retries is one missed look, not the end: the
            // wait goes on to its deadline.
            Err(e) if retry::transient(&e).is_some() => {
                run.log(format!("{what} failed ({}); still waiting for mig-manager", describe(&e))).await?;
                None
            }
            Err(e) => return Err(Stop::Failed(api_failure(&what, &e))),
        };
        if let Some(n) = n {
            let l = node_labels(&n);
            let config = l.get(labels::MIG_CONFIG).cloned().unwrap_or_default();
            if config != r.config_name {
                return Err(Stop::Failed(format!(
                    "someone else set {}={config} while we waited; the node stays cordoned — look before retrying",
                    labels::MIG_CONFIG
                )));
            }
            let caps = devices_now(run, &n, from).await?;
            let seen = mig_ack::observe(&n, FIELD_MANAGER, caps.clone());
            let state = seen.state.clone().unwrap_or_default();
            let grace_over = start.elapsed() >= run.ex.opts.mig_ack_grace;
            let verdict = ack.judge(&seen, &want, r.layout_unchanged, grace_over);
            if let (false, Some(why)) = (announced_ack, ack.acked.clone()) {
                announced_ack = true;
                run.log(format!("mig-manager acknowledged {}: {why}", r.config_name)).await?;
            }
            match verdict {
                MigVerdict::AwaitAck => {
                    run.blocked(format!(
                        "waiting for mig-manager to take up {} ({}={} is still the state from before the label was written)",
                        r.config_name,
                        labels::MIG_CONFIG_STATE,
                        if state.is_empty() { "(none)" } else { state.as_str() }
                    ))
                    .await?;
                }
                MigVerdict::Working(st) => {
                    let since = *pending_since.get_or_insert_with(Instant::now);
                    let waited = since.elapsed();
                    if waited >= run.ex.opts.mig_stuck {
                        let paused = paused_labels(&l);
                        run.blocked(format!(
                            "stuck? {}={st} for {} (flagged after {}); paused: {} — mig-manager's log on {node} says why",
                            labels::MIG_CONFIG_STATE,
                            secs(waited),
                            secs(run.ex.opts.mig_stuck),
                            if paused.is_empty() { "none".to_string() } else { paused.join(", ") }
                        ))
                        .await?;
                    } else {
                        run.blocked(format!("mig-manager is applying {} ({st})", r.config_name)).await?;
                    }
                }
                MigVerdict::AwaitCapacity => {
                    run.blocked(format!(
                        "{}=success, but {node} offers {}, not the planned {}; waiting for the devices",
                        labels::MIG_CONFIG_STATE,
                        caps_shown(&caps),
                        caps_shown(&want)
                    ))
                    .await?;
                }
                MigVerdict::Applied => {
                    return Ok(format!("applied; {node} offers {}", caps_shown(&caps)));
                }
                MigVerdict::AlreadyInPlace => {
                    return Ok(format!(
                        "mig-manager wrote nothing within {} (it writes nothing for a layout already in place); {node} offers the planned {}",
                        secs(run.ex.opts.mig_ack_grace),
                        caps_shown(&caps)
                    ));
                }
                MigVerdict::Failed => {
                    let paused = paused_labels(&l);
                    let note = n
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(labels::SIM_MIG_MESSAGE))
                        .map(|m| format!(" ({m})"))
                        .unwrap_or_default();
                    return Err(Stop::Failed(format!(
                        "mig-manager reports {}=failed for {}{note}; left behind: capacity {}, paused clients {}; {node} stays cordoned — see mig-manager's log, fix the config, then reslice again or uncordon",
                        labels::MIG_CONFIG_STATE,
                        r.config_name,
                        caps_shown(&caps),
                        if paused.is_empty() { "none".to_string() } else { paused.join(", ") }
                    )));
                }
            }
            if Instant::now() >= deadline {
                let left = match &ack.acked {
                    None => format!(
                        "mig-manager never acknowledged {} ({}={state} is from before the label was written)",
                        r.config_name,
                        labels::MIG_CONFIG_STATE
                    ),
                    Some(_) => format!(
                        "{}={state}, {node} offers {} (planned {})",
                        labels::MIG_CONFIG_STATE,
                        caps_shown(&caps),
                        caps_shown(&want)
                    ),
                };
                return Err(Stop::Failed(format!(
                    "gave up after {}: {left}; {node} stays cordoned with {}={} set",
                    secs(start.elapsed()),
                    labels::MIG_CONFIG,
                    r.config_name
                )));
            }
        } else if Instant::now() >= deadline {
            return Err(Stop::Failed(format!(
                "gave up after {}: the API server did not answer reads of {node}; {node} stays cordoned with {}={} set",
                secs(start.elapsed()),
                labels::MIG_CONFIG,
                r.config_name
            )));
        }
        run.sleep(run.ex.opts.poll).await?;
    }
}

async fn reslice_op(run: &mut Run<'_>, r: &ReslicePlan) -> Step<String> {
    let node = r.node.as_str();
    run.log(format!(
        "deadline: {} in all ({} for evictions, {} for mig-manager); past it fabrik stops and says what is left",
        secs(run.ex.opts.deadline(OpKind::Reslice)),
        secs(run.ex.opts.drain_timeout),
        secs(run.ex.opts.mig_timeout)
    ))
    .await?;
    cordon_step(run, node).await?;
    let confirmed: Vec<(String, String)> =
        r.pods.iter().filter(|p| p.action.must_go()).map(|p| (p.namespace.clone(), p.name.clone())).collect();
    let pods = node_pods(run, node).await?;
    let mine: Vec<Pod> =
        pods.into_iter().filter(|p| confirmed.iter().any(|(n, m)| pod_key(p) == (n.clone(), m.clone()))).collect();
    let (evict, notes) = reconcile(&confirmed, &mine, false).map_err(Stop::Failed)?;
    for n in notes {
        run.log(n).await?;
    }
    for _ in evict.len()..confirmed.len() {
        run.done = (run.done + 1).min(run.total);
    }
    evict_and_wait(run, evict).await?;
    // What the cluster says now: pods that started terminating meanwhile are waited for;
    // on a whole-node reslice no pod may still hold a GPU there.
    let (_, holding) = settle(run, node, false).await?;
    if r.whole_node && !holding.is_empty() {
        return Err(Stop::Failed(format!(
            "{} still hold{} GPUs on {node} ({}) — nothing was resliced, reslice again to move them; {node} stays cordoned",
            crate::ops::count(holding.len(), "pod"),
            if holding.len() == 1 { "s" } else { "" },
            holding.join(", ")
        )));
    }
    run.step(format!("the GPUs' pods are gone from {node}")).await?;
    if let Some(entry) = &r.custom_config {
        ensure_mig_config(run, &r.config_name, entry).await?;
    } else {
        run.done = (run.done + 1).min(run.total);
    }
    run.check_cancel()?;
    let before =
        read_node(run, node).await?.ok_or_else(|| Stop::Failed(format!("node {node} is gone from the cluster")))?;
    let from = if mig_ack::capacity_caps(&before).is_empty() { Devices::Slices } else { Devices::Capacity };
    let l = node_labels(&before);
    let already = l.get(labels::MIG_CONFIG) == Some(&r.config_name)
        && l.get(labels::MIG_CONFIG_STATE).map(String::as_str) == Some("success");
    let applied = if already {
        // The label would not change, so mig-manager will not act: what the node offers is
        // the whole answer.
        let want: mig_ack::Caps = r.capacity_after.iter().filter(|(_, n)| *n > 0).cloned().collect();
        let have = devices_now(run, &before, from).await?;
        if have != want {
            return Err(Stop::Failed(format!(
                "{node} already has {}={} (state success) but offers {}, not the planned {}; mig-manager does not act on an unchanged label — set another config and then this one, or look at mig-manager; {node} stays cordoned",
                labels::MIG_CONFIG,
                r.config_name,
                caps_shown(&have),
                caps_shown(&want)
            )));
        }
        run.step(format!("{node} already runs {} (state success)", r.config_name)).await?;
        format!("already applied; {node} offers the planned {}", caps_shown(&have))
    } else {
        let patch = json!({ "metadata": { "labels": { labels::MIG_CONFIG: r.config_name } } });
        let what = format!("setting {} on {node}", labels::MIG_CONFIG);
        let api: Api<Node> = Api::all(run.ex.client.clone());
        let (params, body) = (pp(), Patch::Merge(&patch));
        let written = run
            .mutate(&what, retry::transient, || api.patch(node, &params, &body))
            .await?
            .map_err(|e| Stop::Failed(api_failure(&what, &e)))?;
        run.step(format!("set {}={} on {node}", labels::MIG_CONFIG, r.config_name)).await?;
        follow_mig_manager(run, r, &written, from).await?
    };
    run.log(format!("{}=success: {applied}", labels::MIG_CONFIG_STATE)).await?;
    let (was_cordoned, mark) = run.cordon_before.clone().unwrap_or((r.was_cordoned, None));
    match super::cordon::reslice_end(node, was_cordoned, mark.as_ref()) {
        CordonEnd::Uncordon(line) => {
            set_unschedulable(run, node, false).await?;
            run.step(line).await?;
        }
        CordonEnd::Keep(line) => run.step(line).await?,
    }
    Ok(format!("{node} runs {}: {applied}", r.config_name))
}

// ---------- quota ----------

fn quantity_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "unset".into(),
    }
}

fn conflict(what: &str, resource: &str, expected: &str, now_version: &str, now_value: &str) -> Stop {
    Stop::Failed(format!(
        "conflict: {what} changed since the preview (version {expected} → {now_version}); {resource} is now {now_value}. Nothing was overwritten — review the new value and edit again"
    ))
}

async fn quota_op(run: &mut Run<'_>, q: &QuotaPlan) -> Step<String> {
    match &q.key.source {
        QuotaSourceSpec::ResourceQuota { namespace, name } => {
            let what = format!("ResourceQuota {namespace}/{name}");
            if q.key.field != super::QuotaField::Hard {
                return Err(Stop::Failed(format!("{what} has no {}; nothing was changed", q.key.field.kueue_name())));
            }
            let api: Api<k8s_openapi::api::core::v1::ResourceQuota> = Api::namespaced(run.ex.client.clone(), namespace);
            let read = async |run: &mut Run<'_>| match run
                .call(&format!("reading {what}"), retry::transient, || api.get_opt(name))
                .await?
            {
                Ok(Some(rq)) => Ok(rq),
                Ok(None) => Err(Stop::Failed(format!("{what} is gone from the cluster; nothing was changed"))),
                Err(e) => Err(Stop::Failed(api_failure(&format!("reading {what}"), &e))),
            };
            let value_of = |rq: &k8s_openapi::api::core::v1::ResourceQuota| {
                rq.spec
                    .as_ref()
                    .and_then(|s| s.hard.as_ref())
                    .and_then(|h| h.get(&q.key.resource))
                    .map(|v| v.0.clone())
                    .unwrap_or_else(|| "unset".into())
            };
            let rq = read(run).await?;
            let version = rq.metadata.resource_version.clone().unwrap_or_default();
            if version != q.expected_version {
                return Err(conflict(&what, &q.key.resource, &q.expected_version, &version, &value_of(&rq)));
            }
            run.check_cancel()?;
            // The resourceVersion in the patch is a precondition: the server answers 409
            // if the object moved on, and nothing is written.
            let patch = json!({
                "metadata": { "resourceVersion": q.expected_version },
                "spec": { "hard": { q.key.resource.clone(): q.new.to_string() } },
            });
            // Retrying it is safe: a retry after a write that landed meets 409, and then the
            // value read back tells our write from someone else's.
            let (params, body) = (pp(), Patch::Merge(&patch));
            let sent =
                run.mutate(&format!("patching {what}"), retry::transient, || api.patch(name, &params, &body)).await?;
            match sent {
                Ok(_) => {}
                Err(e) if is_status(&e, 409) => {
                    let now = read(run).await?;
                    let v = now.metadata.resource_version.clone().unwrap_or_default();
                    if value_of(&now) != q.new.to_string() {
                        return Err(conflict(&what, &q.key.resource, &q.expected_version, &v, &value_of(&now)));
                    }
                    run.log(format!("{what} already has {} = {} (an earlier try landed)", q.key.resource, q.new))
                        .await?;
                }
                Err(e) => return Err(Stop::Failed(api_failure(&format!("patching {what}"), &e))),
            }
            let old = super::shown(q.old);
            run.step(format!("{what}: {} {old} → {}", q.key.resource, q.new)).await?;
            Ok(format!("{} quota of {} is {} (was {old})", q.key.resource, q.tenant, q.new))
        }
        QuotaSourceSpec::ClusterQueue { queue, flavor } => {
            let what = format!("ClusterQueue {queue}");
            let field = q.key.field.kueue_name();
            let ar = kueue_cluster_queues(&run.ex.client).await?;
            let api: Api<kube::api::DynamicObject> = Api::all_with(run.ex.client.clone(), &ar);
            let value_of = |o: &mut kube::api::DynamicObject| {
                cq_slot(&mut o.data, flavor, &q.key.resource)
                    .map(|s| quantity_text(s.get(field)))
                    .unwrap_or_else(|| "gone".into())
            };
            let mut obj = match run.call(&format!("reading {what}"), retry::transient, || api.get_opt(queue)).await? {
                Ok(Some(o)) => o,
                Ok(None) => return Err(Stop::Failed(format!("{what} is gone from the cluster; nothing was changed"))),
                Err(e) => return Err(Stop::Failed(api_failure(&format!("reading {what}"), &e))),
            };
            let version_now = obj.metadata.resource_version.clone().unwrap_or_default();
            let current = value_of(&mut obj);
            if version_now != q.expected_version {
                return Err(conflict(&what, &q.key.resource, &q.expected_version, &version_now, &current));
            }
            let Some(slot) = cq_slot(&mut obj.data, flavor, &q.key.resource) else {
                return Err(Stop::Failed(format!(
                    "{what} has no {} in flavor {flavor} any more; nothing was changed",
                    q.key.resource
                )));
            };
            slot[field] = json!(q.new.to_string());
            run.check_cancel()?;
            // Replace carries the resourceVersion we read: a concurrent writer gets us 409.
            let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
            match run
                .mutate(&format!("updating {what}"), retry::transient, || api.replace(queue, &params, &obj))
                .await?
            {
                Ok(_) => {}
                Err(e) if is_status(&e, 409) => {
                    let reread = run.call(&format!("reading {what}"), retry::transient, || api.get_opt(queue)).await?;
                    let (v, val) = match reread.ok().flatten() {
                        Some(mut o) => (o.metadata.resource_version.clone().unwrap_or_default(), value_of(&mut o)),
                        None => ("(deleted)".into(), "gone".into()),
                    };
                    if val != q.new.to_string() {
                        return Err(conflict(&what, &q.key.resource, &q.expected_version, &v, &val));
                    }
                    run.log(format!("{what} already has {field} = {} (an earlier try landed)", q.new)).await?;
                }
                Err(e) => return Err(Stop::Failed(api_failure(&format!("updating {what}"), &e))),
            }
            let old = super::shown(q.old);
            run.step(format!("{what} flavor {flavor}: {} {field} {old} → {}", q.key.resource, q.new)).await?;
            Ok(format!("{} {field} of {queue} ({flavor}) is {} (was {old})", q.key.resource, q.new))
        }
    }
}

/// Where Kueue serves ClusterQueues: v1beta2 (storage since v0.16), else v1beta1.
async fn kueue_cluster_queues(client: &kube::Client) -> Step<kube::api::ApiResource> {
    let mut last = String::new();
    for version in ["v1beta2", "v1beta1"] {
        let gvk = kube::api::GroupVersionKind::gvk(labels::KUEUE_GROUP, version, "ClusterQueue");
        match kube::discovery::pinned_kind(client, &gvk).await {
            Ok((ar, _)) => return Ok(ar),
            Err(e) => last = describe(&e),
        }
    }
    Err(Stop::Failed(format!(
        "Kueue's ClusterQueue API (kueue.x-k8s.io v1beta2 or v1beta1) is not served here ({last}); nothing was changed"
    )))
}

/// The `resources[]` entry of `flavor` / `resource` in a ClusterQueue's JSON.
fn cq_slot<'a>(data: &'a mut Value, flavor: &str, resource: &str) -> Option<&'a mut Value> {
    let groups = data.get_mut("spec")?.get_mut("resourceGroups")?.as_array_mut()?;
    for g in groups {
        let Some(flavors) = g.get_mut("flavors").and_then(|f| f.as_array_mut()) else { continue };
        for f in flavors {
            if f.get("name").and_then(|n| n.as_str()) != Some(flavor) {
                continue;
            }
            let Some(resources) = f.get_mut("resources").and_then(|r| r.as_array_mut()) else { continue };
            for r in resources {
                if r.get("name").and_then(|n| n.as_str()) == Some(resource) {
                    return Some(r);
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: Value) -> Pod {
        serde_json::from_value(v).expect("pod json")
    }

    fn base(name: &str) -> Value {
        json!({
            "metadata": { "name": name, "namespace": "ml", "uid": format!("uid-{name}"),
                "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": true }] },
            "spec": { "containers": [{ "name": "c" }] },
            "status": { "phase": "Running" }
        })
    }

    #[test]
    fn kubectl_filters_on_api_pods() {
        assert_eq!(drain_action(&pod(base("a")), false), PodAction::Evict);
        let mut ds = base("ds");
        ds["metadata"]["ownerReferences"][0]["kind"] = json!("DaemonSet");
        assert!(matches!(drain_action(&pod(ds.clone()), false), PodAction::Skip(_)));
        ds["status"]["phase"] = json!("Succeeded");
        assert_eq!(drain_action(&pod(ds), false), PodAction::Evict, "finished DaemonSet pods are deletable");
        let mut mirror = base("m");
        mirror["metadata"]["annotations"] = json!({ "kubernetes.io/config.mirror": "x" });
        assert!(matches!(drain_action(&pod(mirror), false), PodAction::Skip(_)));
        let mut bare = base("bare");
        bare["metadata"]["ownerReferences"] = json!([]);
        assert!(matches!(drain_action(&pod(bare.clone()), false), PodAction::Refuse(w) if w.contains("--force")));
        assert!(matches!(drain_action(&pod(bare), true), PodAction::ForceDelete(_)));
        let mut local = base("local");
        local["spec"]["volumes"] = json!([{ "name": "scratch", "emptyDir": {} }]);
        assert!(matches!(drain_action(&pod(local), false), PodAction::Refuse(w) if w.contains("emptydir")));
        let mut gone = base("gone");
        gone["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert!(matches!(drain_action(&pod(gone), false), PodAction::Wait(_)), "terminating pods are waited for");
    }

    /// A pod someone deleted before the drain, held by a finalizer; `now` is 2 minutes and a
    /// bit after the deletion was asked for (deletionTimestamp less its 30 s grace).
    fn held(name: &str, stopped: bool) -> (Pod, u64) {
        let mut v = base(name);
        v["metadata"]["deletionTimestamp"] = json!("2026-01-01T10:00:30Z");
        v["metadata"]["deletionGracePeriodSeconds"] = json!(30);
        v["metadata"]["finalizers"] = json!(["example.com/hold"]);
        v["spec"]["containers"][0]["resources"] = json!({ "limits": { "nvidia.com/gpu": "1" } });
        if stopped {
            v["status"]["phase"] = json!("Failed");
        }
        let asked = crate::cluster::pod_deletion(&pod(v.clone())).map(|d| d.since).unwrap_or_default();
        (pod(v), asked + 125_000)
    }

    #[test]
    fn terminating_pods_are_waited_for_with_what_keeps_them() {
        let (p, now) = held("held", false);
        let PodAction::Wait(why) = drain_action_at(&p, false, now) else { panic!("waited for") };
        assert!(why.starts_with("terminating since 2m, finalizers: example.com/hold"), "{why}");
        assert!(why.contains("still running after its 30s grace period"), "{why}");
        assert!(holds_gpus(&p), "still running: it holds its GPU");
        let (stopped, now) = held("stopped", true);
        let PodAction::Wait(why) = drain_action_at(&stopped, false, now) else { panic!("waited for") };
        assert!(why.contains("its containers have stopped, only the finalizers keep it"), "{why}");
        assert!(!holds_gpus(&stopped), "a stopped pod holds nothing, but is still waited for");
        // Within the grace period, the note says how long the containers may take.
        let PodAction::Wait(why) = drain_action_at(&p, false, now - 110_000) else { panic!() };
        assert_eq!(
            why,
            "terminating since <1m, finalizers: example.com/hold; its containers get up to 30s to stop (grace period)"
        );
        // Unmanaged or with local storage, it is going anyway: nothing to refuse or force.
        let mut bare = base("bare");
        bare["metadata"]["ownerReferences"] = json!([]);
        bare["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert!(matches!(drain_action(&pod(bare), false), PodAction::Wait(_)));
        // kubectl still leaves terminating DaemonSet and mirror pods alone.
        let mut ds = base("ds");
        ds["metadata"]["ownerReferences"][0]["kind"] = json!("DaemonSet");
        ds["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert!(matches!(drain_action(&pod(ds), false), PodAction::Skip(_)));
    }

    #[test]
    fn reconcile_waits_for_terminating_pods_confirmed_or_not() {
        let (p, _) = held("held", false);
        let (late, _) = held("late", false);
        let confirmed = vec![("ml".to_string(), "held".to_string()), ("ml".to_string(), "a".to_string())];
        let (go, notes) = reconcile(&confirmed, &[p, late, pod(base("a"))], false).unwrap();
        let by_name = |n: &str| go.iter().find(|r| r.name == n).unwrap_or_else(|| panic!("{n} must go: {go:?}"));
        assert!(by_name("held").terminating.as_deref().is_some_and(|w| w.contains("example.com/hold")));
        assert!(by_name("late").terminating.is_some(), "terminating, even if the preview did not show it");
        assert_eq!(by_name("a").terminating, None, "evicted");
        assert!(
            notes.iter().any(|n| n.contains("ml/late is terminating") && n.contains("waiting for it too")),
            "{notes:?}"
        );
    }

    #[test]
    fn a_node_is_not_drained_while_a_pod_still_holds_a_gpu_or_terminates() {
        let (held, now) = held("held", false);
        let mut late = base("late");
        late["spec"]["containers"][0]["resources"] = json!({ "limits": { "nvidia.com/mig-1g.18gb": "2" } });
        let mut ds = base("exporter");
        ds["metadata"]["ownerReferences"][0]["kind"] = json!("DaemonSet");
        ds["spec"]["containers"][0]["resources"] = json!({ "limits": { "nvidia.com/gpu": "1" } });
        let mut done = base("done");
        done["status"]["phase"] = json!("Succeeded");
        done["spec"]["containers"][0]["resources"] = json!({ "limits": { "nvidia.com/gpu": "1" } });
        let pods = [held, pod(late), pod(ds), pod(done), pod(base("cpu-only"))];
        let (terminating, holding) = leftovers(&pods, false, now);
        assert_eq!(terminating.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["held"]);
        assert_eq!(holding, ["ml/late"], "a DaemonSet pod stays by design; finished and GPU-less pods hold nothing");
        assert_eq!(leftovers(&pods[2..], false, now), (vec![], vec![]));
    }

    #[test]
    fn an_eviction_conflict_is_gone_only_when_the_pod_is() {
        let p = pod(base("a"));
        assert_eq!(after_conflict("uid-a", None, "x"), Evicted::Gone, "404 on the re-read");
        let mut replaced = base("a");
        replaced["metadata"]["uid"] = json!("uid-new");
        assert_eq!(after_conflict("uid-a", Some(&pod(replaced)), "x"), Evicted::Gone, "a new uid: ours is gone");
        let mut deleting = base("a");
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(after_conflict("uid-a", Some(&pod(deleting)), "x"), Evicted::Done, "ours, on its way: wait for it");
        match after_conflict("uid-a", Some(&p), "the object has been modified") {
            Evicted::Retry(409, why) => assert!(why.contains("the object has been modified"), "{why}"),
            other => panic!("the same pod, still there, is retried: {other:?}"),
        }
    }

    #[test]
    fn reconcile_evicts_only_what_was_confirmed() {
        let pods = vec![pod(base("a")), pod(base("late"))];
        let confirmed = vec![("ml".to_string(), "a".to_string()), ("ml".to_string(), "vanished".to_string())];
        let (evict, notes) = reconcile(&confirmed, &pods, false).unwrap();
        assert_eq!(
            evict,
            vec![PodRef { namespace: "ml".into(), name: "a".into(), uid: "uid-a".into(), terminating: None }]
        );
        assert!(notes.iter().any(|n| n.contains("ml/late arrived after the preview")), "{notes:?}");
        assert!(notes.iter().any(|n| n.contains("ml/vanished is already gone")), "{notes:?}");
        let mut bare = base("bare");
        bare["metadata"]["ownerReferences"] = json!([]);
        let e = reconcile(&confirmed, &[pod(base("a")), pod(bare)], false).unwrap_err();
        assert!(e.contains("ml/bare") && e.contains("nothing was evicted"), "{e}");
    }

    #[test]
    fn pdb_selectors_match_labels_and_expressions() {
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": { "name": "p" },
            "spec": { "selector": { "matchLabels": { "app": "trainer" },
                "matchExpressions": [{ "key": "tier", "operator": "In", "values": ["gpu"] }] } }
        }))
        .unwrap();
        let l = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert!(pdb_selects(&pdb, &l(&[("app", "trainer"), ("tier", "gpu")])));
        assert!(!pdb_selects(&pdb, &l(&[("app", "trainer")])));
        assert!(!pdb_selects(&pdb, &l(&[("app", "web"), ("tier", "gpu")])));
    }

    #[test]
    fn mig_configs_are_added_once_in_the_files_indentation() {
        let entry =
            "  custom-x:\n    - devices: all\n      mig-enabled: true\n      mig-devices:\n        \"1g.18gb\": 7\n";
        let file =
            "version: v1\nmig-configs:\n    all-disabled:\n        - devices: all\n          mig-enabled: false\n";
        let out = add_mig_config(file, "custom-x", entry).unwrap().unwrap();
        assert!(out.contains("\n    custom-x:\n        - devices: all\n          mig-enabled: true\n"), "{out}");
        assert!(out.contains("          mig-devices:\n              \"1g.18gb\": 7\n"), "one step in: {out}");
        assert!(out.contains("    all-disabled:"), "the existing config stays: {out}");
        assert_eq!(add_mig_config(&out, "custom-x", entry).unwrap(), None, "added once");
        assert!(add_mig_config("version: v1\n", "custom-x", entry).is_err());
        let two = "version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n";
        let out = add_mig_config(two, "custom-x", entry).unwrap().unwrap();
        assert!(out.contains(entry), "a file in the entry's own style takes it as written: {out}");
    }

    #[test]
    fn cluster_queue_slots_are_found_by_flavor_and_resource() {
        let mut cq = json!({ "spec": { "resourceGroups": [{ "coveredResources": ["nvidia.com/gpu"], "flavors": [
            { "name": "h100", "resources": [{ "name": "nvidia.com/gpu", "nominalQuota": 8 }] },
            { "name": "a100", "resources": [{ "name": "nvidia.com/gpu", "nominalQuota": "4" }] } ] }] } });
        let s = cq_slot(&mut cq, "a100", "nvidia.com/gpu").unwrap();
        assert_eq!(quantity_text(s.get("nominalQuota")), "4");
        s["nominalQuota"] = json!("6");
        assert_eq!(cq["spec"]["resourceGroups"][0]["flavors"][1]["resources"][0]["nominalQuota"], json!("6"));
        assert!(cq_slot(&mut cq, "b200", "nvidia.com/gpu").is_none());
    }
}
