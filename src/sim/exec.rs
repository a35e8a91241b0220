//! The simulator as an operation target: the verbs of [`Target`] on the simulated world, so
//! the demo runs every plan through the same runner as a cluster ([`crate::ops::exec`]) —
//! the same steps, waits and words — with the pacing a cluster has: evictions that a PDB
//! refuses (429) until the disruption controller allows them, pods that take their time to
//! terminate, mig-manager that takes a config up on its next pass (`pending`) and reports
//! `success` with the new devices a few seconds later.
//!
//! A running operation is a future polled between the world's moves: each verb hands the
//! world a job and waits for its answer; each wait ends on the simulated clock. So the demo
//! stays deterministic, and the runner never knows it is not talking to an API server.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::watch;

use super::world::{SPod, Sim};
use crate::cluster::labels;
use crate::mig::Layout;
use crate::model::{Delta, Phase, Ts};
use crate::ops::cordon::CordonMark;
use crate::ops::exec::{self, Env, ExecOptions, Run, Sink, Step, Stop};
use crate::ops::mig_ack::Caps;
use crate::ops::target::{
    Evicted, NodeView, PodRef, PodView, QueueView, ReadFailure, Target, WorkloadView, pdb_refusal,
};
use crate::ops::{
    ExecRequest, Plan, PlanDetail, QuotaField, QuotaPlan, ReslicePlan, RuleSpec, StopPolicy, TaintPlan, Workload,
};

/// A request the simulator serves between its ticks: the feed that runs it knows no more.
pub trait SimRequest: Send + 'static {
    fn apply(self, sim: &mut Sim) -> Vec<Delta>;
}

impl SimRequest for ExecRequest {
    fn apply(self, sim: &mut Sim) -> Vec<Delta> {
        match self {
            ExecRequest::Execute { id, plan } => sim.execute(id, *plan),
            ExecRequest::Cancel { id } => sim.cancel(id),
            // The demo keeps no audit log: previews leave no trace there.
            ExecRequest::Preview { .. } => Vec::new(),
        }
    }
}

type Job = Box<dyn FnOnce(&mut Sim) + Send>;

/// One running operation: the runner's future, the job it waits on, what it reported.
pub(super) struct RunningOp {
    id: u64,
    fut: Pin<Box<dyn Future<Output = ()> + Send>>,
    job: Arc<Mutex<Option<Job>>>,
    out: Arc<Mutex<Vec<Delta>>>,
    clock: Arc<AtomicU64>,
    cancel: watch::Sender<bool>,
}

/// The world as the runner sees it.
pub struct SimTarget {
    job: Arc<Mutex<Option<Job>>>,
    clock: Arc<AtomicU64>,
}

impl SimTarget {
    /// Runs `f` on the world at the runner's next poll and returns its answer.
    async fn with<R: Send + 'static>(&self, f: impl FnOnce(&mut Sim) -> R + Send + 'static) -> R {
        let slot: Arc<Mutex<Option<R>>> = Arc::new(Mutex::new(None));
        let answer = slot.clone();
        if let Ok(mut j) = self.job.lock() {
            *j = Some(Box::new(move |sim: &mut Sim| {
                let r = f(sim);
                if let Ok(mut a) = answer.lock() {
                    *a = Some(r);
                }
            }));
        }
        std::future::poll_fn(move |_| match slot.lock().ok().and_then(|mut s| s.take()) {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        })
        .await
    }
}

/// The demo's identity in cordon marks.
const DEMO_USER: &str = "demo";

impl Sim {
    /// Starts executing a confirmed plan; it runs at once until its first wait, the rest in
    /// later `step()` output.
    pub fn execute(&mut self, id: u64, plan: Plan) -> Vec<Delta> {
        self.execute_audited(id, plan, None)
    }

    /// As [`Sim::execute`], writing the operation's audit trail to `audit` as a cluster's
    /// runner does (the demo itself keeps none): for tests of what the runner does when the
    /// log cannot be written.
    pub fn execute_audited(&mut self, id: u64, plan: Plan, audit: Option<crate::ops::audit::Audit>) -> Vec<Delta> {
        let job: Arc<Mutex<Option<Job>>> = Arc::default();
        let out: Arc<Mutex<Vec<Delta>>> = Arc::default();
        let clock = Arc::new(AtomicU64::new(self.now));
        let (cancel, cancelled) = watch::channel(false);
        // Nothing halts the demo's operations: the halt's sender is gone at once.
        let (_, halt) = watch::channel(None);
        let target = SimTarget { job: job.clone(), clock: clock.clone() };
        let env = Env { opts: ExecOptions::default(), audit, sink: Sink::Buffer(out.clone()), user: DEMO_USER.into() };
        let fut = Box::pin(exec::execute(target, env, id, plan, cancelled, halt));
        let mut op = RunningOp { id, fut, job, out, clock, cancel };
        let done = self.poll_op(&mut op);
        let mut deltas = take_out(&op);
        if !done {
            self.ops.push(op);
        }
        deltas.append(&mut self.out);
        deltas
    }

    /// Stops an operation where it is; what was done stays done, and is reported.
    pub fn cancel(&mut self, id: u64) -> Vec<Delta> {
        let Some(pos) = self.ops.iter().position(|o| o.id == id) else { return Vec::new() };
        let mut op = self.ops.remove(pos);
        let _ = op.cancel.send(true);
        if !self.poll_op(&mut op) {
            self.ops.insert(pos, op);
            return Vec::new();
        }
        let mut deltas = take_out(&op);
        deltas.append(&mut self.out);
        deltas
    }

    /// Changes a quota behind the cockpit's back, as another admin with kubectl would.
    pub fn edit_quota_externally(&mut self, tenant: &str, resource: &str, hard: i64) -> Vec<Delta> {
        if let Some(q) = self.quotas.iter_mut().find(|q| q.tenant == tenant && q.resource == resource) {
            q.hard = crate::quantity::Quantity::from_int(hard, crate::quantity::Format::DecimalSI);
            let v: u64 = q.version.parse().unwrap_or(0);
            q.version = (v + 1).to_string();
            return vec![Delta::QuotaUpsert(q.clone())];
        }
        Vec::new()
    }

    /// Moves every running operation on as far as it goes at this moment.
    pub(super) fn advance_ops(&mut self) {
        let mut ops = std::mem::take(&mut self.ops);
        ops.retain_mut(|op| {
            let done = self.poll_op(op);
            let mut d = take_out(op);
            self.out.append(&mut d);
            !done
        });
        // Operations started meanwhile (none today) would be in self.ops.
        ops.append(&mut self.ops);
        self.ops = ops;
    }

    /// Polls an operation, serving the jobs it hands the world, until it waits on the
    /// clock or ends. Whether it ended.
    fn poll_op(&mut self, op: &mut RunningOp) -> bool {
        op.clock.store(self.now, Ordering::Relaxed);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        loop {
            if op.fut.as_mut().poll(&mut cx).is_ready() {
                return true;
            }
            let job = op.job.lock().ok().and_then(|mut j| j.take());
            match job {
                Some(job) => job(self),
                None => return false,
            }
        }
    }

    fn node_view(&self, name: &str) -> Option<NodeView> {
        let n = &self.nodes[*self.node_index.get(name)?];
        let mut annotations = BTreeMap::new();
        if !n.spec.cordoned_by.is_empty() {
            annotations.insert(labels::CORDONED_BY.to_string(), n.spec.cordoned_by.clone());
        }
        let ts = |t: Option<Ts>| t.and_then(|t| k8s_openapi::jiff::Timestamp::from_millisecond(t as i64).ok());
        Some(NodeView {
            name: name.to_string(),
            unschedulable: n.spec.cordoned,
            mark: CordonMark::parse(&n.spec.cordoned_by),
            labels: n.spec.labels.iter().cloned().collect(),
            annotations,
            capacity: crate::ops::mig_ack::gpu_caps(n.spec.capacity.iter().map(|(r, v)| (r.as_str(), *v))),
            state_written: ts(n.state_written),
            our_write: ts(n.config_written),
        })
    }

    fn set_cordon_mark(&mut self, name: &str, mark: Option<String>) -> Result<(), String> {
        let ni = *self.node_index.get(name).ok_or_else(|| format!("cordoning {name}: not found — node {name}"))?;
        let n = &mut self.nodes[ni];
        n.spec.cordoned = mark.is_some();
        n.spec.cordoned_by = mark.unwrap_or_default();
        self.out.push(Delta::NodeUpsert(n.spec.clone()));
        Ok(())
    }

    fn pods_on(&self, node: &str) -> Vec<PodView> {
        self.pods.values().filter(|p| p.spec.node.as_deref() == Some(node)).map(pod_view).collect()
    }

    /// The Eviction API on the simulated world: the uid precondition, the PDB's 429, a
    /// graceful deletion the disruption controller counts at once.
    fn evict_pod(&mut self, pod: &PodRef) -> Evicted {
        let key = pod.key();
        let Some(p) = self.pods.get(&key) else { return Evicted::Gone };
        if uid(p) != pod.uid {
            return Evicted::Gone;
        }
        if p.spec.deletion.is_some() {
            return Evicted::Done;
        }
        let (ns, app) = (p.spec.namespace.clone(), p.spec.app.clone());
        let pdb = self.pdbs.iter_mut().find(|d| d.namespace == ns && d.selector_app == app);
        if let Some(pdb) = pdb {
            if pdb.disruptions_allowed <= 0 {
                return Evicted::Retry(429, "Cannot evict pod as it would violate the pod's disruption budget.".into());
            }
            pdb.disruptions_allowed -= 1;
            pdb.current_healthy -= 1;
            let spec = pdb.clone();
            self.out.push(Delta::PdbUpsert(spec));
        }
        self.terminate_pod(&key);
        Evicted::Done
    }

    fn pdb_words(&self, ns: &str, name: &str) -> Option<String> {
        let p = self.pods.get(&format!("{ns}/{name}"))?;
        let d = self.pdbs.iter().find(|d| d.namespace == ns && d.selector_app == p.spec.app)?;
        Some(pdb_refusal(ns, &d.name, d.disruptions_allowed, d.current_healthy, d.desired_healthy))
    }

    /// fabrik's write of `nvidia.com/mig.config`: mig-manager takes it up on its next pass.
    fn write_mig_config(&mut self, r: &ReslicePlan) -> Option<NodeView> {
        let ni = *self.node_index.get(&r.node)?;
        let layouts: Vec<(u8, Layout)> = r
            .gpus
            .iter()
            .map(|g| {
                let after = g.after.as_ref().map(|a| Layout::Enabled(a.iter().map(|p| p.profile).collect()));
                (g.index, after.unwrap_or(Layout::Disabled))
            })
            .collect();
        let now = self.now;
        let node = &mut self.nodes[ni];
        node.spec.mig_config = r.config_name.clone();
        node.config_written = Some(now);
        // A label change re-runs mig-manager; a wedged one recovers on it.
        node.mig_wedged = false;
        node.mig_apply = Some((layouts, 4));
        node.refresh_labels(ni);
        self.out.push(Delta::NodeUpsert(self.nodes[ni].spec.clone()));
        self.node_view(&r.node)
    }

    fn write_quota(&mut self, q: &QuotaPlan) -> Result<(String, String), String> {
        let found = self
            .quotas
            .iter_mut()
            .find(|x| x.tenant == q.tenant && x.resource == q.key.resource && x.source == q.key.source);
        let Some(cur) = found else {
            return Err(format!("the quota {} of {} is gone; nothing was changed", q.key.resource, q.tenant));
        };
        if cur.version != q.expected_version {
            return Err(format!(
                "conflict: {} of {} changed since the preview (version {} → {}); it is now {}. Nothing was overwritten — review the new value and edit again",
                q.key.resource, q.tenant, q.expected_version, cur.version, cur.hard
            ));
        }
        match q.key.field {
            QuotaField::Hard => cur.hard = q.new,
            QuotaField::BorrowingLimit => cur.borrowing_limit = Some(q.new),
            QuotaField::LendingLimit => cur.lending_limit = Some(q.new),
        }
        let v: u64 = cur.version.parse().unwrap_or(0);
        cur.version = (v + 1).to_string();
        let spec = cur.clone();
        self.out.push(Delta::QuotaUpsert(spec));
        let old = crate::ops::shown(q.old);
        Ok((
            format!("{} of {}: {old} → {}", q.key.resource, q.tenant, q.new),
            format!("{} quota of {} is {} (was {old})", q.key.resource, q.tenant, q.new),
        ))
    }
}

fn take_out(op: &RunningOp) -> Vec<Delta> {
    op.out.lock().map(|mut o| std::mem::take(&mut *o)).unwrap_or_default()
}

/// A simulated pod's uid: a replacement with the same name (a StatefulSet's) is created
/// later, so it has another.
pub(super) fn uid(p: &SPod) -> String {
    format!("sim-{}-{}", p.spec.name, p.spec.created)
}

fn pod_view(p: &SPod) -> PodView {
    let finished = matches!(p.spec.phase, Phase::Succeeded | Phase::Failed);
    let asks = p.spec.gpus > 0 || !p.spec.mig.is_empty() || !p.spec.dra.is_empty();
    PodView {
        namespace: p.spec.namespace.clone(),
        name: p.spec.name.clone(),
        uid: uid(p),
        owner: p.spec.owner,
        finished,
        empty_dir: p.spec.empty_dir,
        holds_gpus: asks && !finished,
        deletion: p.spec.deletion.clone(),
    }
}

impl Target for SimTarget {
    fn clock_ms(&self) -> u64 {
        self.clock.load(Ordering::Relaxed)
    }

    fn wall_ms(&self) -> u64 {
        self.clock_ms()
    }

    fn sleep(&self, d: Duration) -> impl Future<Output = ()> + Send {
        let clock = self.clock.clone();
        let until = self.clock_ms() + d.as_millis() as u64;
        std::future::poll_fn(
            move |_| {
                if clock.load(Ordering::Relaxed) >= until { Poll::Ready(()) } else { Poll::Pending }
            },
        )
    }

    async fn preflight(&mut self, _run: &mut Run<'_>) -> Result<(), String> {
        Ok(())
    }

    async fn read_node(&mut self, _run: &mut Run<'_>, node: &str) -> Step<Result<Option<NodeView>, ReadFailure>> {
        let name = node.to_string();
        Ok(Ok(self.with(move |s| s.node_view(&name)).await))
    }

    async fn set_cordon(&mut self, run: &mut Run<'_>, node: &str, mark: Option<&CordonMark>) -> Step<()> {
        run.sending(&format!("{} {node}", if mark.is_some() { "cordoning" } else { "uncordoning" }))?;
        let (name, mark) = (node.to_string(), mark.map(CordonMark::value));
        self.with(move |s| s.set_cordon_mark(&name, mark)).await.map_err(Stop::Failed)
    }

    async fn node_pods(&mut self, _run: &mut Run<'_>, node: &str) -> Step<Vec<PodView>> {
        let name = node.to_string();
        Ok(self.with(move |s| s.pods_on(&name)).await)
    }

    async fn pod(
        &mut self,
        _run: &mut Run<'_>,
        namespace: &str,
        name: &str,
    ) -> Step<Result<Option<PodView>, ReadFailure>> {
        let key = format!("{namespace}/{name}");
        Ok(Ok(self.with(move |s| s.pods.get(&key).map(pod_view)).await))
    }

    async fn evict(&mut self, run: &mut Run<'_>, pod: &PodRef) -> Step<Result<Evicted, String>> {
        run.sending(&format!("evicting {}", pod.key()))?;
        let pod = pod.clone();
        Ok(Ok(self.with(move |s| s.evict_pod(&pod)).await))
    }

    async fn blocking_pdb(&mut self, namespace: &str, name: &str) -> Option<String> {
        let (ns, name) = (namespace.to_string(), name.to_string());
        self.with(move |s| s.pdb_words(&ns, &name)).await
    }

    async fn add_mig_config(&mut self, run: &mut Run<'_>, name: &str, entry: &str) -> Step<bool> {
        run.sending(&format!("adding config {name} to the mig-parted config"))?;
        let (name, entry) = (name.to_string(), entry.to_string());
        Ok(self.with(move |s| s.mig_parted.insert(name, entry).is_none()).await)
    }

    async fn set_mig_config(&mut self, run: &mut Run<'_>, plan: &ReslicePlan) -> Step<NodeView> {
        run.sending(&format!("setting {} on {}", labels::MIG_CONFIG, plan.node))?;
        let r = plan.clone();
        let node = r.node.clone();
        self.with(move |s| s.write_mig_config(&r))
            .await
            .ok_or_else(|| Stop::Failed(format!("node {node} is gone from the cluster; nothing was changed")))
    }

    async fn slice_caps(&mut self, _run: &mut Run<'_>, _node: &str) -> Step<Caps> {
        // The simulated nodes advertise their devices through the device plugin only.
        Ok(Caps::new())
    }

    async fn patch_quota(&mut self, run: &mut Run<'_>, q: &QuotaPlan) -> Step<(String, String)> {
        run.sending(&format!("patching {} of {}", q.key.resource, q.tenant))?;
        let q = q.clone();
        self.with(move |s| s.write_quota(&q)).await.map_err(Stop::Failed)
    }

    async fn create_taint_rule(&mut self, run: &mut Run<'_>, plan: &TaintPlan, rule: &RuleSpec) -> Step<bool> {
        run.sending(&format!("creating DeviceTaintRule {}", rule.name))?;
        let (plan, rule) = (plan.clone(), rule.clone());
        self.with(move |s| s.create_taint_rule(&plan, &rule)).await.map_err(Stop::Failed)
    }

    async fn taint_rule_exists(&mut self, _run: &mut Run<'_>, name: &str) -> Step<Result<bool, ReadFailure>> {
        let name = name.to_string();
        Ok(Ok(self.with(move |s| s.taint_rule_exists(&name)).await))
    }

    async fn delete_taint_rule(&mut self, run: &mut Run<'_>, name: &str) -> Step<bool> {
        run.sending(&format!("deleting DeviceTaintRule {name}"))?;
        let name = name.to_string();
        Ok(self.with(move |s| s.delete_taint_rule(&name)).await)
    }

    async fn device_pods(
        &mut self,
        run: &mut Run<'_>,
        _pool: &str,
        _devices: &[String],
    ) -> Step<Result<Vec<String>, ReadFailure>> {
        let PlanDetail::Taint(p) = &run.plan.detail else { return Ok(Ok(Vec::new())) };
        let uuid = p.uuid.clone();
        Ok(Ok(self.with(move |s| s.pods_on_gpu(&uuid)).await))
    }

    async fn read_workload(
        &mut self,
        _run: &mut Run<'_>,
        namespace: &str,
        kind: Workload,
        name: &str,
    ) -> Step<Result<Option<WorkloadView>, ReadFailure>> {
        let (ns, name) = (namespace.to_string(), name.to_string());
        Ok(Ok(self.with(move |s| s.workload_view(&ns, kind, &name)).await))
    }

    async fn annotate_pod(
        &mut self,
        run: &mut Run<'_>,
        pod: &PodRef,
        key: &str,
        value: &str,
    ) -> Step<Result<(), String>> {
        run.sending(&format!("annotating {} {key}={value}", pod.key()))?;
        let (pod, key, value) = (pod.clone(), key.to_string(), value.to_string());
        Ok(self.with(move |s| s.annotate(&pod, &key, &value)).await)
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
        let from = seen.replicas.unwrap_or(1);
        run.sending(&format!("scaling {} {namespace}/{name} {from} → {to}", kind.as_str()))?;
        let (ns, name) = (namespace.to_string(), name.to_string());
        Ok(self.with(move |s| s.scale_down(&ns, kind, &name, from, to)).await)
    }

    async fn suspend_job(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
        _uid: &str,
    ) -> Step<Result<(), String>> {
        run.sending(&format!("suspending Job {namespace}/{name}"))?;
        let (ns, name) = (namespace.to_string(), name.to_string());
        self.with(move |s| s.suspend_job(&ns, &name)).await;
        Ok(Ok(()))
    }

    async fn read_queue(&mut self, _run: &mut Run<'_>, queue: &str) -> Step<Result<Option<QueueView>, ReadFailure>> {
        let queue = queue.to_string();
        Ok(Ok(self.with(move |s| s.queue_view(&queue)).await))
    }

    async fn set_stop_policy(
        &mut self,
        run: &mut Run<'_>,
        queue: &str,
        policy: StopPolicy,
    ) -> Step<Result<(), String>> {
        run.sending(&format!("setting stopPolicy {} on ClusterQueue {queue}", policy.as_str()))?;
        let queue = queue.to_string();
        Ok(self.with(move |s| s.set_stop_policy(&queue, policy)).await)
    }

    async fn read_kueue_workload(
        &mut self,
        _run: &mut Run<'_>,
        namespace: &str,
        name: &str,
    ) -> Step<Result<Option<crate::model::KueueWorkload>, ReadFailure>> {
        let key = format!("{namespace}/{name}");
        Ok(Ok(self.with(move |s| s.kueue_workload(&key).cloned()).await))
    }

    async fn set_workload_active(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
        _uid: &str,
        active: bool,
    ) -> Step<Result<(), String>> {
        run.sending(&format!("setting spec.active: {active} on Workload {namespace}/{name}"))?;
        let key = format!("{namespace}/{name}");
        Ok(self.with(move |s| s.kueue_set_active(&key, active)).await)
    }

    async fn read_host(
        &mut self,
        _run: &mut Run<'_>,
        namespace: &str,
        name: &str,
    ) -> Step<Result<Option<crate::model::BareMetalHost>, ReadFailure>> {
        let key = format!("{namespace}/{name}");
        Ok(Ok(self.with(move |s| s.host_view(&key)).await))
    }

    async fn request_host(
        &mut self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
        action: crate::ops::HostAction,
    ) -> Step<Result<(), String>> {
        run.sending(&format!("asking for {} of BareMetalHost {namespace}/{name}", action.as_str()))?;
        let key = format!("{namespace}/{name}");
        Ok(self.with(move |s| s.request_host(&key, action)).await)
    }
}
