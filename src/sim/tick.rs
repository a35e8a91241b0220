//! What moves per tick besides the executor: the census of pods, pod timers, workload
//! churn, PDB status, quota usage and mig-manager applying layouts.

use super::world::{Sim, instances_for};
use crate::cluster::labels;
use crate::mig::GpuModel;
use crate::model::*;
use crate::quantity::{Format, Quantity};

/// One pass over the pods per tick gives everything the controllers need.
#[derive(Default)]
pub(super) struct Census {
    /// Unfinished, not terminating pods per workload.
    pub(super) live: Vec<u32>,
    /// Running pods per workload.
    pub(super) running: Vec<u32>,
    /// Pods with a timer running (starting, terminating, a job's duration).
    pub(super) timed: Vec<String>,
    pub(super) pending: Vec<String>,
}

impl Sim {
    pub(super) fn census(&self) -> Census {
        let mut c = Census {
            live: vec![0; self.workloads.len()],
            running: vec![0; self.workloads.len()],
            ..Default::default()
        };
        for (k, p) in &self.pods {
            let a = p.workload;
            if a < c.live.len() {
                if !p.spec.phase.finished() && p.terminating.is_none() {
                    c.live[a] += 1;
                }
                if p.spec.phase == Phase::Running {
                    c.running[a] += 1;
                }
            }
            if p.terminating.is_some()
                || p.starting.is_some()
                || p.crash_due(self.now)
                || (p.ticks_left.is_some() && p.spec.phase == Phase::Running)
            {
                c.timed.push(k.clone());
            }
            if p.spec.node.is_none() && p.spec.phase == Phase::Pending {
                c.pending.push(k.clone());
            }
        }
        c
    }

    pub(super) fn advance_pods(&mut self, timed: Vec<String>) {
        for key in timed {
            let Some(p) = self.pods.get_mut(&key) else { continue };
            if let Some(t) = p.terminating.as_mut() {
                if *t <= 1 {
                    self.delete_pod(&key);
                } else {
                    *t -= 1;
                }
                continue;
            }
            if p.crash_due(self.now) {
                p.crash_again(self.now);
                self.out.push(Delta::PodUpsert(p.spec.clone()));
                continue;
            }
            if let Some(s) = p.starting.as_mut() {
                if *s <= 1 {
                    p.starting = None;
                    p.run(self.now);
                    self.out.push(Delta::PodUpsert(p.spec.clone()));
                } else {
                    *s -= 1;
                }
                continue;
            }
            if p.spec.phase == Phase::Running
                && let Some(left) = p.ticks_left.as_mut()
            {
                if *left <= 1 {
                    p.ticks_left = None;
                    p.spec.phase = Phase::Succeeded;
                    p.terminating = Some(5);
                    let spec = p.spec.clone();
                    self.release(&key);
                    self.out.push(Delta::PodUpsert(spec));
                } else {
                    *left -= 1;
                }
            }
        }
    }

    pub(super) fn churn(&mut self, live: &[u32]) {
        // Jobs arrive to replace finished ones; controllers keep their replica counts.
        for a in 0..self.workloads.len() {
            let workload = &self.workloads[a];
            // A held ClusterQueue admits nothing new.
            if !self.queue_policy.is_empty() && self.held(&workload.namespace) {
                continue;
            }
            let live = live.get(a).copied().unwrap_or(0);
            let want = workload.replicas;
            if live < want {
                let is_job = workload.job_ticks.is_some();
                if !is_job || self.rng.chance(0.3) {
                    let key = self.create_pod(a, false);
                    if let Some(p) = self.pods.get(&key) {
                        self.out.push(Delta::PodUpsert(p.spec.clone()));
                    }
                }
            }
        }
    }

    /// PDB status as the disruption controller computes it.
    pub(super) fn update_pdbs(&mut self, running: &[u32]) -> Vec<usize> {
        let mut changed = Vec::new();
        for (i, pdb) in self.pdbs.iter_mut().enumerate() {
            let healthy =
                self.workload_of.get(&pdb.selector_app).and_then(|a| running.get(*a)).copied().unwrap_or(0) as i32;
            let allowed = (healthy - pdb.desired_healthy).max(0);
            if healthy != pdb.current_healthy || allowed != pdb.disruptions_allowed {
                pdb.current_healthy = healthy;
                pdb.disruptions_allowed = allowed;
                changed.push(i);
            }
        }
        changed
    }

    pub(super) fn update_pdbs_emit(&mut self, running: &[u32]) {
        for i in self.update_pdbs(running) {
            self.out.push(Delta::PdbUpsert(self.pdbs[i].clone()));
        }
    }

    pub(super) fn refresh_quota_usage(&mut self) {
        if !self.tick.is_multiple_of(5) {
            return;
        }
        let usage = self.quota_usage();
        for qi in 0..self.quotas.len() {
            let used = usage.get(&quota_key(&self.quotas[qi])).copied().unwrap_or(0);
            if used != self.quotas[qi].used.value() {
                let q = &mut self.quotas[qi];
                q.used = Quantity::from_int(used, Format::DecimalSI);
                self.out.push(Delta::QuotaUpsert(q.clone()));
            }
        }
    }

    /// What the quota controllers count, in one pass: a ResourceQuota its namespace's
    /// unfinished pods, per exact resource (`requests.nvidia.com/gpu` whole GPUs, a MIG
    /// resource its instances, `<class>.deviceclass.resource.k8s.io/devices` DRA devices); a
    /// Kueue ClusterQueue its tenant's, per resource name.
    pub(super) fn quota_usage(&self) -> std::collections::HashMap<(String, String), i64> {
        let mut usage: std::collections::HashMap<(String, String), i64> = Default::default();
        for p in self.pods.values().filter(|p| !p.spec.phase.finished()) {
            let ns = &p.spec.namespace;
            let tenant = self.tenant_of_ns(ns).map(|t| format!("cq-{}", self.tenants[t].name));
            let mut add = |res: String, n: i64| {
                *usage.entry((ns.clone(), format!("requests.{res}"))).or_default() += n;
                if let Some(cq) = &tenant {
                    *usage.entry((cq.clone(), res)).or_default() += n;
                }
            };
            let gpu = if self.asks_renamed(p) { labels::GPU_SHARED_RESOURCE } else { labels::GPU_RESOURCE };
            add(gpu.into(), p.spec.gpus as i64);
            for (r, c) in &p.spec.mig {
                add(r.clone(), *c as i64);
            }
            for c in &p.spec.dra {
                *usage
                    .entry((ns.clone(), format!("{}.deviceclass.resource.k8s.io/devices", c.device_class)))
                    .or_default() += c.count as i64;
            }
        }
        usage
    }

    /// mig-manager: applies a pending layout after a few ticks, unless it is wedged.
    /// mig-manager's pass on a node whose config fabrik wrote and it has not answered yet:
    /// it takes the config up (`pending`, written by it) on its next pass after the write,
    /// then applies it over the next ticks and reports `success` with the new devices.
    fn mig_take_up(&mut self, ni: usize) -> bool {
        let now = self.now;
        let n = &mut self.nodes[ni];
        let unanswered = n.config_written.is_some_and(|w| now > w && n.state_written.is_none_or(|s| s < w));
        if !unanswered {
            return false;
        }
        n.spec.mig_state = MigConfigState::Pending;
        n.spec.mig_state_since = Some(now);
        n.state_written = Some(now);
        n.refresh_labels(ni);
        self.out.push(Delta::NodeUpsert(self.nodes[ni].spec.clone()));
        true
    }

    pub(super) fn advance_mig(&mut self) {
        for ni in 0..self.nodes.len() {
            let Some((layouts, left)) = self.nodes[ni].mig_apply.take() else { continue };
            if self.nodes[ni].mig_wedged || self.mig_take_up(ni) {
                self.nodes[ni].mig_apply = Some((layouts, left));
                continue;
            }
            if left > 1 {
                self.nodes[ni].mig_apply = Some((layouts, left - 1));
                continue;
            }
            let mut rng = self.rng.clone();
            // A partitionable GPU (dynamic MIG) gets its partitions per claim: mig-manager
            // does not reslice it, nor the other GPUs with an alpha DRA shape.
            let keep = self.dra.gpus_on(ni);
            let node = &mut self.nodes[ni];
            let model = node.spec.gpu_model.unwrap_or(GpuModel::H100_80GB);
            for (index, layout) in layouts.iter().filter(|(i, _)| !keep.contains(i)) {
                if let Some(g) = node.gpus.iter_mut().find(|g| g.spec.index == *index) {
                    let (mig_enabled, instances) = instances_for(&mut rng, model, layout);
                    g.spec.mig_enabled = mig_enabled;
                    g.inst_owner = vec![None; instances.len()];
                    g.spec.instances = instances;
                    g.owner = None;
                    g.holders.clear();
                }
            }
            self.rng = rng;
            node.spec.mig_state = MigConfigState::Success;
            node.spec.mig_state_since = None;
            node.state_written = Some(self.now);
            node.refresh_labels(ni);
            let name = node.spec.name.clone();
            let cfg = node.spec.mig_config.clone();
            self.out.push(Delta::NodeUpsert(node.spec.clone()));
            for g in &node.gpus {
                self.out.push(Delta::GpuUpsert(g.spec.clone()));
            }
            self.out.push(Delta::Event(EventSpec {
                ts: self.now,
                severity: Severity::Info,
                reason: "MigConfigApplied".into(),
                object: name,
                message: format!("mig-manager applied {cfg}: nvidia.com/mig.config.state=success"),
            }));
        }
    }
}

/// Where a quota's usage is kept in [`Sim::quota_usage`]: (namespace or queue, resource).
pub(super) fn quota_key(q: &QuotaSpec) -> (String, String) {
    match &q.source {
        QuotaSourceSpec::ResourceQuota { namespace, .. } => (namespace.clone(), q.resource.clone()),
        QuotaSourceSpec::ClusterQueue { queue, .. } => (queue.clone(), q.resource.clone()),
    }
}
