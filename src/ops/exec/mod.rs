//! The one operation runner: drives a confirmed [`Plan`] through a [`Target`] (the cluster,
//! or the simulator), one audited step at a time, reporting progress as `Delta::Op`.
//!
//! - cordon: one write of `spec.unschedulable` with fabrik's mark ([`super::cordon`]);
//! - drain ([`drain`]): cordon, re-read the node's pods and re-apply kubectl's filters, evict
//!   what the person confirmed, retry a PodDisruptionBudget's 429 every 5 s while naming it,
//!   wait until each pod is gone (or replaced: new uid) — pods already terminating too,
//!   never evicted again — then read the node once more: a drain is reported only when no
//!   pod that must go is left there;
//! - reslice ([`reslice`]): the drain of the GPUs' pods, the mig-parted config when the
//!   layout has no builtin name, `nvidia.com/mig.config`, mig-manager's acknowledgement
//!   ([`super::mig_ack`]) and `success` with the planned devices, then the end of the cordon;
//! - quota: written only over the version the preview showed.
//!
//! Every step is written to the audit log (when there is one: the demo keeps none) before it
//! is reported; if the log cannot be written the operation stops there, and it never starts
//! without its `confirmed` record. How to add an operation: a plan module in `ops/`, then
//! its sequence here in terms of [`Target`] verbs (a new verb goes in the trait and both
//! targets).

mod drain;
mod host;
mod kueue;
pub mod progress;
mod queue;
mod reclaim;
mod reslice;
mod taint;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::audit::{Audit, Phase};
use super::cordon::CordonMark;
use super::retry::Backoff;
use super::target::{NodeView, Target};
use super::{OpKind, Plan, PlanDetail};
use crate::model::{Delta, OpProgress};
use progress::Progress;

pub use drain::{leftovers, reconcile};

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
            OpKind::Cordon | OpKind::Uncordon | OpKind::SetQuota | OpKind::UntaintGpu => self.call_timeout * 4,
            // Writing the rules, then (NoExecute) waiting for the pods using the GPU to go.
            OpKind::TaintGpu => self.call_timeout * 4 + self.drain_timeout,
            // A few reads and one or two writes, then waiting for the pod to go.
            OpKind::Reclaim => self.call_timeout * 6 + self.drain_timeout,
            // One read and one write, then Kueue's answer (a drain: its evictions too).
            OpKind::HoldQueue | OpKind::ResumeQueue => self.call_timeout * 4 + self.drain_timeout,
            // One read and one write, then Kueue's answer (a suspension: its pods gone).
            OpKind::SuspendWorkload | OpKind::ResumeWorkload => self.call_timeout * 4 + self.drain_timeout,
            // One read and one write, then the baremetal-operator's answer (a server's power
            // cycle and POST take minutes).
            OpKind::RebootHost | OpKind::PowerHost | OpKind::InspectHost => self.call_timeout * 4 + self.drain_timeout,
        }
    }
}

/// Where progress goes: the cockpit's channel, or a buffer the simulator empties each tick.
#[derive(Clone, Debug)]
pub enum Sink {
    Channel(mpsc::Sender<Vec<Delta>>),
    Buffer(Arc<Mutex<Vec<Delta>>>),
}

impl Sink {
    pub async fn send(&self, d: Vec<Delta>) {
        match self {
            Sink::Channel(tx) => {
                let _ = tx.send(d).await;
            }
            Sink::Buffer(b) => {
                if let Ok(mut b) = b.lock() {
                    b.extend(d);
                }
            }
        }
    }
}

/// What a run needs besides its target: pacing, the audit log (none on the demo), where
/// progress goes, and who runs it (for the cordon mark).
#[derive(Clone, Debug)]
pub struct Env {
    pub opts: ExecOptions,
    pub audit: Option<Audit>,
    pub sink: Sink,
    /// Who runs the operation, named in its cordon marks (the audit log's user on a cluster).
    pub user: String,
}

pub enum Stop {
    Cancelled,
    Failed(String),
}

pub type Step<T> = Result<T, Stop>;

/// One running operation: its audit trail, its progress, its deadline and its cancel switch.
pub struct Run<'a> {
    pub id: u64,
    pub plan: &'a Plan,
    pub opts: &'a ExecOptions,
    audit: Option<&'a Audit>,
    sink: &'a Sink,
    user: &'a str,
    pub progress: Progress,
    cancel: watch::Receiver<bool>,
    blocked_on: Option<String>,
    /// Where the operation is (its last step, the call being sent, what it waits for), for
    /// the record written when the cockpit stops under it.
    at: Arc<Mutex<String>>,
    /// The operation's overall deadline on the target's clock: no retry starts past it.
    pub deadline_ms: u64,
    /// The node's cordon before this operation touched it (set by the cordon step).
    pub cordon_before: Option<(bool, Option<CordonMark>)>,
    /// The wall clock when the run started, for the cordon mark.
    started_wall: u64,
}

impl Run<'_> {
    pub async fn send(&self, d: OpProgress) {
        self.sink.send(vec![Delta::Op(d)]).await;
    }

    pub fn audit(&self, phase: Phase, msg: &str) -> Step<()> {
        let Some(audit) = self.audit else { return Ok(()) };
        audit.record(self.id, self.plan, phase, msg).map_err(|e| {
            Stop::Failed(format!("{e}; stopped after {} of {} steps", self.progress.done, self.progress.total))
        })
    }

    fn set_at(&self, what: &str) {
        if let Ok(mut at) = self.at.lock() {
            what.clone_into(&mut at);
        }
    }

    /// Written before a mutating call goes out, so a call in flight when the cockpit stops
    /// (or dies) is in the log; `at` says what it was.
    pub fn sending(&self, what: &str) -> Step<()> {
        self.audit(Phase::Sending, what)?;
        self.set_at(&format!("sending: {what}"));
        Ok(())
    }

    pub async fn step(&mut self, msg: String) -> Step<()> {
        self.audit(Phase::Step, &msg)?;
        self.set_at(&format!("after: {msg}"));
        self.blocked_on = None;
        let step = self.progress.step(msg);
        self.send(step).await;
        Ok(())
    }

    pub async fn log(&mut self, msg: String) -> Step<()> {
        self.audit(Phase::Log, &msg)?;
        self.send(OpProgress::Log { id: self.id, line: msg }).await;
        Ok(())
    }

    /// Reported (and audited) once per distinct reason.
    pub async fn blocked(&mut self, msg: String) -> Step<()> {
        if self.blocked_on.as_deref() == Some(msg.as_str()) {
            return Ok(());
        }
        self.audit(Phase::Blocked, &msg)?;
        self.set_at(&format!("waiting: {msg}"));
        self.blocked_on = Some(msg.clone());
        self.send(OpProgress::Blocked { id: self.id, reason: msg }).await;
        Ok(())
    }

    /// Waits for `f` unless cancelled first.
    pub async fn wait(&mut self, f: impl Future<Output = ()>) -> Step<()> {
        self.check_cancel()?;
        let mut f = std::pin::pin!(f);
        let cancel = &mut self.cancel;
        let mut changed = std::pin::pin!(cancel.changed());
        std::future::poll_fn(|cx| {
            // A change is the cancel (it only ever goes to `true`); an error is its sender
            // gone (the cockpit stopped serving operations, a context switch): either way the
            // operation stops here, recorded as cancelled.
            if changed.as_mut().poll(cx).is_ready() {
                return std::task::Poll::Ready(Err(Stop::Cancelled));
            }
            f.as_mut().poll(cx).map(Ok)
        })
        .await
    }

    /// Sleeps `d` on the target's clock unless cancelled first.
    pub async fn sleep<T: Target>(&mut self, t: &T, d: Duration) -> Step<()> {
        self.wait(t.sleep(d)).await
    }

    pub fn check_cancel(&self) -> Step<()> {
        if *self.cancel.borrow() { Err(Stop::Cancelled) } else { Ok(()) }
    }

    /// The mark this operation writes with its cordon.
    pub fn cordon_mark(&self) -> CordonMark {
        let op = self.audit.map_or_else(|| format!("demo-{}", self.id), |a| a.op_key(self.id));
        CordonMark::new(&op, self.plan.kind.name(), self.user, &super::audit::rfc3339(self.started_wall))
    }
}

/// Runs a confirmed plan to its outcome through `t`, stopped at once (wherever it is, a call
/// in flight included) when `halt` says why the cockpit is stopping: the audit log then gets
/// `interrupted at <where it was> (<why>)`. Never panics on cluster data; every way out is a
/// `Finished` or `Cancelled` progress and an audit record.
pub async fn execute<T: Target>(
    mut t: T,
    env: Env,
    id: u64,
    plan: Plan,
    cancel: watch::Receiver<bool>,
    mut halt: watch::Receiver<Option<String>>,
) {
    env.sink.send(vec![Delta::Op(progress::started(id, &plan))]).await;
    let at = Arc::new(Mutex::new("confirmed".to_string()));
    let deadline_ms = t.clock_ms() + env.opts.deadline(plan.kind).as_millis() as u64;
    let mut run = Run {
        id,
        plan: &plan,
        opts: &env.opts,
        audit: env.audit.as_ref(),
        sink: &env.sink,
        user: &env.user,
        progress: Progress::new(id, &plan),
        cancel,
        blocked_on: None,
        at: at.clone(),
        deadline_ms,
        cordon_before: None,
        started_wall: t.wall_ms(),
    };
    if let Err(e) = run.audit(Phase::Confirmed, &plan.title) {
        let Stop::Failed(e) = e else { return };
        run.send(OpProgress::Finished { id, outcome: Err(format!("{e}; nothing was sent")) }).await;
        return;
    }
    // The plan said what it needs; ask again, for its namespaces, before sending anything.
    if let Err(why) = t.preflight(&mut run).await {
        let msg = format!("{why}; nothing was sent");
        let _ = run.audit(Phase::Refused, &msg);
        run.send(OpProgress::Finished { id, outcome: Err(msg) }).await;
        return;
    }
    let result = {
        let work = std::pin::pin!(steps(&mut t, &mut run, &plan));
        let stop = std::pin::pin!(progress::halted(&mut halt));
        match futures::future::select(work, stop).await {
            futures::future::Either::Left((r, _)) => Ok(r),
            futures::future::Either::Right((why, _)) => Err(why),
        }
    };
    let result = match result {
        Ok(r) => r,
        Err(why) => {
            let at = at.lock().map(|a| a.clone()).unwrap_or_default();
            let msg = format!(
                "interrupted at {at} ({why}); what was done stays — run it again to finish: it re-plans from the cluster"
            );
            let _ = run.audit(Phase::Interrupted, &msg);
            run.send(OpProgress::Finished { id, outcome: Err(msg) }).await;
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

async fn steps<T: Target>(t: &mut T, run: &mut Run<'_>, plan: &Plan) -> Step<String> {
    match &plan.detail {
        PlanDetail::Cordon { node, cordon } => cordon_op(t, run, node, *cordon).await,
        PlanDetail::Drain(d) => drain::drain_op(t, run, d).await,
        PlanDetail::Reslice(r) => reslice::reslice_op(t, run, r).await,
        PlanDetail::Quota(q) => {
            let (line, outcome) = t.patch_quota(run, q).await?;
            run.step(line).await?;
            Ok(outcome)
        }
        PlanDetail::Taint(p) => taint::taint_op(t, run, p).await,
        PlanDetail::Reclaim(r) => reclaim::reclaim_op(t, run, r).await,
        PlanDetail::Queue(q) => queue::queue_op(t, run, q).await,
        PlanDetail::Workload(w) => kueue::workload_op(t, run, w).await,
        PlanDetail::Host(h) => host::host_op(t, run, h).await,
    }
}

/// Reads a node; a failure through its retries stops the operation.
pub(crate) async fn read_node<T: Target>(t: &mut T, run: &mut Run<'_>, node: &str) -> Step<Option<NodeView>> {
    t.read_node(run, node).await?.map_err(|f| Stop::Failed(f.message))
}

/// Cordons (with this operation's mark) or uncordons (removing any mark). Returns whether
/// the node changed, and its mark before.
pub(crate) async fn set_unschedulable<T: Target>(
    t: &mut T,
    run: &mut Run<'_>,
    node: &str,
    cordon: bool,
) -> Step<(bool, Option<CordonMark>)> {
    let Some(n) = read_node(t, run, node).await? else {
        return Err(Stop::Failed(format!("node {node} is gone from the cluster; nothing was changed")));
    };
    // A cordoned node keeps its mark; an uncordoned one must not carry a stale one.
    if n.unschedulable == cordon && (cordon || n.mark.is_none()) {
        return Ok((false, n.mark));
    }
    run.check_cancel()?;
    let mark = cordon.then(|| run.cordon_mark());
    t.set_cordon(run, node, mark.as_ref()).await?;
    Ok((n.unschedulable != cordon, n.mark))
}

async fn cordon_op<T: Target>(t: &mut T, run: &mut Run<'_>, node: &str, cordon: bool) -> Step<String> {
    let (changed, _) = set_unschedulable(t, run, node, cordon).await?;
    let what = if cordon { "cordoned" } else { "uncordoned" };
    if changed {
        run.step(format!("{what} {node}")).await?;
        Ok(format!("{node} {what}"))
    } else {
        run.step(format!("{node} was already {}", if cordon { "cordoned" } else { "schedulable" })).await?;
        Ok(format!("{node} unchanged (already {})", if cordon { "cordoned" } else { "schedulable" }))
    }
}

/// The first step of a drain or a reslice: no new pods land on the node meanwhile. What
/// the cordon was before is kept in the run, for the reslice's end.
pub(crate) async fn cordon_step<T: Target>(t: &mut T, run: &mut Run<'_>, node: &str) -> Step<()> {
    let (changed, mark) = set_unschedulable(t, run, node, true).await?;
    run.cordon_before = Some((!changed, if changed { None } else { mark.clone() }));
    if changed {
        return run.step(format!("cordoned {node}")).await;
    }
    match mark {
        // The node now serves this drain: a later reslice keeps it cordoned.
        Some(m) if run.plan.kind == OpKind::Drain && m.kind == "reslice" => {
            let mine = run.cordon_mark();
            t.set_cordon(run, node, Some(&mine)).await?;
            run.step(format!("{node} was already cordoned by {}; the cordon is now this drain's", m.describe())).await
        }
        Some(m) => run.step(format!("{node} was already cordoned by {}", m.describe())).await,
        None => run.step(format!("{node} was already cordoned")).await,
    }
}

pub(crate) fn secs(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 120 { format!("{}m{:02}s", s / 60, s % 60) } else { format!("{s}s") }
}
