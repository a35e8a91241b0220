//! The simulator's executor: runs planned operations against the simulated world with the
//! pacing a real cluster has (one eviction at a time, 429 from PDBs retried, mig-manager's
//! pending → success), reporting progress as `Delta::Op`.

use super::world::Sim;
use crate::mig::Layout;
use crate::model::{Delta, MigConfigState, OpProgress};
use crate::ops::runner::{self, Progress};
use crate::ops::{ExecRequest, Plan, PlanDetail, PodAction};

#[derive(Clone, Debug)]
pub(super) enum Stage {
    Cordon,
    Evict {
        queue: Vec<(String, bool)>,
        next: usize,
        evicted: u32,
        retry_in: u32,
    },
    /// `keys`: every pod that must be gone; `waits`: those that were terminating already,
    /// each reported once it is gone.
    WaitGone {
        keys: Vec<String>,
        waits: Vec<String>,
        evicted: usize,
        waited: u32,
    },
    SetMigConfig,
    WaitMig {
        waited: u32,
    },
    Uncordon,
    SetQuota,
    Done,
}

#[derive(Clone, Debug)]
pub(super) struct RunningOp {
    pub plan: Plan,
    pub stage: Stage,
    pub progress: Progress,
}

/// kubectl waits 5 s between eviction retries on a 429.
const EVICT_RETRY_TICKS: u32 = 5;
/// Give up waiting for pods to go after this many ticks.
const WAIT_GONE_TICKS: u32 = 120;

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

impl Sim {
    /// Starts executing a confirmed plan. Progress arrives in later `step()` output.
    pub fn execute(&mut self, id: u64, plan: Plan) -> Vec<Delta> {
        let stage = match &plan.detail {
            PlanDetail::Quota(_) => Stage::SetQuota,
            PlanDetail::Cordon { .. } | PlanDetail::Drain(_) | PlanDetail::Reslice(_) => Stage::Cordon,
        };
        let mut out = vec![Delta::Op(runner::started(id, &plan))];
        let progress = Progress::new(id, &plan);
        self.ops.push(RunningOp { plan, stage, progress });
        out.append(&mut self.out);
        out
    }

    /// Stops an operation where it is; what was done stays done, and is reported.
    pub fn cancel(&mut self, id: u64) -> Vec<Delta> {
        if let Some(pos) = self.ops.iter().position(|o| o.progress.id == id) {
            let op = self.ops.remove(pos);
            return vec![
                Delta::Op(OpProgress::Log { id, line: op.progress.cancelled() }),
                Delta::Op(OpProgress::Cancelled { id }),
            ];
        }
        Vec::new()
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

    pub(super) fn advance_ops(&mut self) {
        let mut ops = std::mem::take(&mut self.ops);
        for op in ops.iter_mut() {
            self.advance_op(op);
        }
        ops.retain(|o| !matches!(o.stage, Stage::Done));
        // Operations started during this tick (none today) would be in self.ops.
        ops.append(&mut self.ops);
        self.ops = ops;
    }

    fn progress(&mut self, op: &mut RunningOp, step: String) {
        let step = op.progress.step(step);
        self.out.push(Delta::Op(step));
    }

    fn finish(&mut self, op: &mut RunningOp, outcome: Result<String, String>) {
        self.out.push(Delta::Op(OpProgress::Finished { id: op.progress.id, outcome }));
        op.stage = Stage::Done;
    }

    fn node_mut(&mut self, name: &str) -> Option<usize> {
        self.node_index.get(name).copied()
    }

    fn set_cordon(&mut self, ni: usize, cordon: bool) {
        let n = &mut self.nodes[ni];
        if n.spec.cordoned != cordon {
            n.spec.cordoned = cordon;
            self.out.push(Delta::NodeUpsert(n.spec.clone()));
        }
    }

    fn advance_op(&mut self, op: &mut RunningOp) {
        let id = op.progress.id;
        let detail = op.plan.detail.clone();
        let node_name = match &detail {
            PlanDetail::Cordon { node, .. } => Some(node.clone()),
            PlanDetail::Drain(d) => Some(d.node.clone()),
            PlanDetail::Reslice(r) => Some(r.node.clone()),
            PlanDetail::Quota(_) => None,
        };
        let ni = match &node_name {
            Some(n) => match self.node_mut(n) {
                Some(i) => Some(i),
                None => {
                    self.finish(op, Err(format!("node {n} is gone: nothing more to do")));
                    return;
                }
            },
            None => None,
        };
        match (&mut op.stage, &detail) {
            (Stage::Cordon, PlanDetail::Cordon { node, cordon }) => {
                let Some(ni) = ni else { return };
                self.set_cordon(ni, *cordon);
                self.progress(op, format!("{} {node}", if *cordon { "cordoned" } else { "uncordoned" }));
                self.finish(op, Ok(format!("{node} is {}", if *cordon { "cordoned" } else { "schedulable" })));
            }
            (Stage::Cordon, PlanDetail::Drain(d)) => {
                let Some(ni) = ni else { return };
                self.set_cordon(ni, true);
                self.progress(op, format!("cordoned {}", d.node));
                let queue = d
                    .to_evict()
                    .map(|p| (format!("{}/{}", p.namespace, p.name), matches!(p.action, PodAction::ForceDelete(_))))
                    .collect();
                op.stage = Stage::Evict { queue, next: 0, evicted: 0, retry_in: 0 };
            }
            (Stage::Cordon, PlanDetail::Reslice(r)) => {
                let Some(ni) = ni else { return };
                self.set_cordon(ni, true);
                self.progress(op, format!("cordoned {}", r.node));
                let queue = r
                    .pods
                    .iter()
                    .filter(|p| p.action == PodAction::Evict)
                    .map(|p| (format!("{}/{}", p.namespace, p.name), false))
                    .collect();
                op.stage = Stage::Evict { queue, next: 0, evicted: 0, retry_in: 0 };
            }
            (Stage::Evict { queue, next, evicted, retry_in }, _) => {
                if *retry_in > 0 {
                    *retry_in -= 1;
                    return;
                }
                let Some((key, force)) = queue.get(*next).cloned() else {
                    // Pods already terminating are not evicted again, but waited for.
                    let pods = match &detail {
                        PlanDetail::Drain(d) => d.pods.as_slice(),
                        PlanDetail::Reslice(r) => r.pods.as_slice(),
                        _ => &[],
                    };
                    let waits: Vec<String> = pods
                        .iter()
                        .filter(|p| matches!(p.action, PodAction::Wait(_)))
                        .map(|p| format!("{}/{}", p.namespace, p.name))
                        .collect();
                    let mut keys: Vec<String> = queue.iter().map(|(k, _)| k.clone()).collect();
                    keys.extend(waits.iter().cloned());
                    op.stage = Stage::WaitGone { keys, waits, evicted: *evicted as usize, waited: 0 };
                    return;
                };
                let Some(pod) = self.pods.get(&key) else {
                    self.out.push(Delta::Op(OpProgress::Log { id, line: format!("{key} is already gone") }));
                    *next += 1;
                    self.progress(op, format!("{key} already gone"));
                    return;
                };
                if !force {
                    let (ns, app) = (pod.spec.namespace.clone(), pod.spec.app.clone());
                    if let Some(pdb) = self.pdbs.iter().find(|p| p.namespace == ns && p.selector_app == app)
                        && pdb.disruptions_allowed <= 0
                    {
                        let reason = format!(
                            "evicting {key}: HTTP 429, PodDisruptionBudget {}/{} allows 0 disruptions ({} healthy, {} needed); retrying in 5s",
                            pdb.namespace, pdb.name, pdb.current_healthy, pdb.desired_healthy
                        );
                        self.out.push(Delta::Op(OpProgress::Blocked { id, reason }));
                        *retry_in = EVICT_RETRY_TICKS;
                        return;
                    }
                }
                let (ns, app) = (pod.spec.namespace.clone(), pod.spec.app.clone());
                if force {
                    self.delete_pod(&key);
                } else {
                    self.terminate_pod(&key);
                }
                // The disruption controller counts the eviction at once.
                if let Some(pdb) = self.pdbs.iter_mut().find(|p| p.namespace == ns && p.selector_app == app) {
                    pdb.disruptions_allowed = (pdb.disruptions_allowed - 1).max(0);
                    pdb.current_healthy -= 1;
                    self.out.push(Delta::PdbUpsert(pdb.clone()));
                }
                *next += 1;
                *evicted += 1;
                let n = queue.len();
                let verb = if force { "deleted" } else { "evicted" };
                let k = *next;
                self.progress(op, format!("{verb} {key} ({k}/{n})"));
            }
            (Stage::WaitGone { keys, waits, evicted, .. }, _) => {
                let gone: Vec<String> = waits.iter().filter(|k| !self.pods.contains_key(*k)).cloned().collect();
                waits.retain(|k| self.pods.contains_key(k));
                let (n, evicted) = (keys.len(), *evicted);
                let left: Vec<String> = keys.iter().filter(|k| self.pods.contains_key(*k)).cloned().collect();
                for k in gone {
                    self.progress(op, format!("{k} is gone (it was already terminating)"));
                }
                if left.is_empty() {
                    match &detail {
                        PlanDetail::Drain(d) => {
                            self.progress(op, format!("all evicted pods are gone ({n})"));
                            let also = n.saturating_sub(evicted);
                            let also = if also > 0 {
                                format!(", {} already terminating waited for", crate::ops::count(also, "pod"))
                            } else {
                                String::new()
                            };
                            self.finish(
                                op,
                                Ok(format!(
                                    "{} drained: {} evicted{also}, node stays cordoned",
                                    d.node,
                                    crate::ops::count(evicted, "pod")
                                )),
                            );
                        }
                        _ => {
                            self.progress(op, format!("the pods that used the GPUs are gone ({n})"));
                            op.stage = Stage::SetMigConfig;
                        }
                    }
                    return;
                }
                if let Stage::WaitGone { waited, .. } = &mut op.stage {
                    *waited += 1;
                    if *waited <= WAIT_GONE_TICKS {
                        return;
                    }
                }
                // Name each pod left and what keeps it.
                let names: Vec<String> = left
                    .iter()
                    .map(|k| match self.pods.get(k).and_then(|p| p.spec.deletion.as_ref()) {
                        Some(d) => format!("{k} ({})", crate::ops::terminating_note(d, self.now)),
                        None => format!("{k} (not terminating)"),
                    })
                    .collect();
                self.finish(
                    op,
                    Err(format!(
                        "timed out waiting for {} to go: {}; the node stays cordoned",
                        crate::ops::count(names.len(), "pod"),
                        names.join("; ")
                    )),
                );
            }
            (Stage::SetMigConfig, PlanDetail::Reslice(r)) => {
                let Some(ni) = ni else { return };
                let node = &mut self.nodes[ni];
                node.spec.mig_config = r.config_name.clone();
                node.spec.mig_state = MigConfigState::Pending;
                node.spec.mig_state_since = Some(self.now);
                // A label change re-runs mig-manager; a wedged one recovers on it.
                node.mig_wedged = false;
                let layouts: Vec<(u8, Layout)> = r
                    .gpus
                    .iter()
                    .map(|g| {
                        (
                            g.index,
                            g.after
                                .as_ref()
                                .map(|a| Layout::Enabled(a.iter().map(|p| p.profile).collect()))
                                .unwrap_or(Layout::Disabled),
                        )
                    })
                    .collect();
                node.mig_apply = Some((layouts, 4));
                node.refresh_labels(ni);
                self.out.push(Delta::NodeUpsert(self.nodes[ni].spec.clone()));
                if r.custom_config.is_some() {
                    self.out.push(Delta::Op(OpProgress::Log {
                        id,
                        line: format!("added mig-parted config {} to the ConfigMap", r.config_name),
                    }));
                }
                self.progress(op, format!("set nvidia.com/mig.config={} (state pending)", r.config_name));
                op.stage = Stage::WaitMig { waited: 0 };
            }
            (Stage::WaitMig { waited }, PlanDetail::Reslice(r)) => {
                let Some(ni) = ni else { return };
                let node = &self.nodes[ni];
                match node.spec.mig_state {
                    MigConfigState::Success if node.mig_apply.is_none() => {
                        self.progress(op, "nvidia.com/mig.config.state=success".to_string());
                        op.stage = if r.was_cordoned { Stage::Done } else { Stage::Uncordon };
                        if r.was_cordoned {
                            self.finish(
                                op,
                                Ok(format!("{} resliced to {}; node left cordoned as it was", r.node, r.config_name)),
                            );
                        }
                    }
                    MigConfigState::Failed => {
                        self.finish(
                            op,
                            Err(format!("mig-manager reported failed for {}; the node stays cordoned", r.config_name)),
                        );
                    }
                    _ => {
                        *waited += 1;
                        if *waited == 60 {
                            self.out.push(Delta::Op(OpProgress::Blocked {
                                id,
                                reason: "mig.config.state has been pending for 60s; mig-manager may be stuck".into(),
                            }));
                        }
                    }
                }
            }
            (Stage::Uncordon, PlanDetail::Reslice(r)) => {
                let Some(ni) = ni else { return };
                self.set_cordon(ni, false);
                self.progress(op, format!("uncordoned {}", r.node));
                let caps = crate::mig::caps_text(r.capacity_after.iter().map(|(k, n)| (k, *n)));
                self.finish(op, Ok(format!("{} now offers {caps}", r.node)));
            }
            (Stage::SetQuota, PlanDetail::Quota(q)) => {
                let found = self
                    .quotas
                    .iter_mut()
                    .find(|x| x.tenant == q.tenant && x.resource == q.key.resource && x.source == q.key.source);
                let Some(cur) = found else {
                    self.finish(op, Err(format!("the quota {} of {} no longer exists", q.key.resource, q.tenant)));
                    return;
                };
                if cur.version != q.expected_version {
                    let msg = format!(
                        "conflict: {} of {} was changed meanwhile to {} (version {} → {}); nothing was written — review the new value and try again",
                        q.key.resource, q.tenant, cur.hard, q.expected_version, cur.version
                    );
                    self.finish(op, Err(msg));
                    return;
                }
                match q.key.field {
                    crate::ops::QuotaField::Hard => cur.hard = q.new,
                    crate::ops::QuotaField::BorrowingLimit => cur.borrowing_limit = Some(q.new),
                    crate::ops::QuotaField::LendingLimit => cur.lending_limit = Some(q.new),
                }
                let v: u64 = cur.version.parse().unwrap_or(0);
                cur.version = (v + 1).to_string();
                let spec = cur.clone();
                self.out.push(Delta::QuotaUpsert(spec));
                self.progress(op, format!("patched {} {} → {}", q.key.resource, crate::ops::shown(q.old), q.new));
                self.finish(op, Ok(format!("{} of {} is now {}", q.key.resource, q.tenant, q.new)));
            }
            _ => {
                self.finish(op, Err("internal: the plan does not match its stage".into()));
            }
        }
    }
}
