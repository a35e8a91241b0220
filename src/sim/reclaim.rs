//! A reclaim on the simulated world: its Deployments, StatefulSets and Jobs are the
//! workloads whose replicas the simulated controllers keep, so a scale-down lowers a
//! workload's replicas and removes the pod its controller would (a ReplicaSet: unscheduled
//! first, then the lowest `pod-deletion-cost`, then the newest; a StatefulSet: the highest
//! ordinal); a suspended Job's pods are stopped.

use super::exec::uid;
use super::world::Sim;
use crate::model::{Owner, Phase};
use crate::ops::Workload;
use crate::ops::target::{PodRef, WorkloadView};

impl Sim {
    fn workload_index(&self, ns: &str, kind: Workload, name: &str) -> Option<usize> {
        let owner = match kind {
            Workload::Deployment => Owner::ReplicaSet,
            Workload::StatefulSet => Owner::StatefulSet,
            _ => return None,
        };
        self.workloads.iter().position(|w| w.namespace == ns && w.name == name && w.owner == owner)
    }

    /// The live (not terminating) pods of workload `a`.
    fn live_of(&self, a: usize) -> impl Iterator<Item = (&String, &super::world::SPod)> {
        self.pods.iter().filter(move |(_, p)| p.workload == a && p.terminating.is_none())
    }

    /// Pods whose controlling owner is `owner` (a ReplicaSet or a Job by name).
    fn owned(&self, ns: &str, owner: Owner, name: &str) -> Vec<String> {
        self.pods
            .iter()
            .filter(|(_, p)| p.spec.namespace == ns && p.spec.owner == owner && p.spec.owner_name == name)
            .map(|(k, _)| k.clone())
            .collect()
    }

    pub(super) fn workload_view(&self, ns: &str, kind: Workload, name: &str) -> Option<WorkloadView> {
        let uid = format!("sim-{}-{ns}-{name}", kind.kubectl());
        match kind {
            Workload::Deployment | Workload::StatefulSet => {
                let a = self.workload_index(ns, kind, name)?;
                let live = self.live_of(a).count() as i32;
                Some(WorkloadView {
                    uid,
                    replicas: Some(self.workloads[a].replicas as i32),
                    settled: Some(live),
                    ..Default::default()
                })
            }
            // The world keeps one replica count per Deployment: its ReplicaSet has it.
            Workload::ReplicaSet => {
                let pods = self.owned(ns, Owner::ReplicaSet, name);
                let a = self.pods.get(pods.first()?)?.workload;
                let w = self.workloads.get(a)?;
                Some(WorkloadView {
                    uid,
                    replicas: Some(w.replicas as i32),
                    settled: Some(self.live_of(a).count() as i32),
                    controller: Some(("Deployment".into(), w.name.clone())),
                    ..Default::default()
                })
            }
            Workload::Job => {
                self.owned(ns, Owner::Job, name).first()?;
                Some(WorkloadView {
                    uid,
                    suspended: self.suspended_jobs.contains(&format!("{ns}/{name}")),
                    ..Default::default()
                })
            }
        }
    }

    pub(super) fn annotate(&mut self, pod: &PodRef, key: &str, value: &str) -> Result<(), String> {
        let k = pod.key();
        match self.pods.get(&k) {
            Some(p) if uid(p) == pod.uid => {}
            _ => return Err(format!("annotating {k}: the pod was replaced or is gone")),
        }
        if key == crate::ops::reclaim::DELETION_COST {
            let cost = value.parse::<i32>().map_err(|e| format!("{key}={value}: {e}"))?;
            self.deletion_cost.insert(k, cost);
        }
        Ok(())
    }

    pub(super) fn scale_down(
        &mut self,
        ns: &str,
        kind: Workload,
        name: &str,
        from: i32,
        to: i32,
    ) -> Result<(), String> {
        let what = format!("scaling {} {ns}/{name}", kind.as_str());
        let a = self.workload_index(ns, kind, name).ok_or_else(|| format!("{what}: not found"))?;
        let have = self.workloads[a].replicas as i32;
        if have != from {
            return Err(format!("{what}: refused — it changed since fabrik read it (replicas {have}, not {from})"));
        }
        self.workloads[a].replicas = to.max(0) as u32;
        let mut live: Vec<(String, bool, i32, u64)> = self
            .live_of(a)
            .map(|(k, p)| {
                let cost = self.deletion_cost.get(k).copied().unwrap_or(0);
                (k.clone(), p.spec.node.is_some() && p.spec.phase == Phase::Running, cost, p.spec.created)
            })
            .collect();
        let excess = live.len().saturating_sub(to.max(0) as usize);
        if kind == Workload::StatefulSet {
            // The highest ordinals go.
            live.sort_by_key(|(k, ..)| std::cmp::Reverse(k.rsplit('-').next().and_then(|o| o.parse::<u32>().ok())));
        } else {
            // kube's ActivePodsWithRanks order, as far as the world models it.
            live.sort_by_key(|(_, running, cost, created)| (*running, *cost, std::cmp::Reverse(*created)));
        }
        for (k, ..) in live.into_iter().take(excess) {
            self.terminate_pod(&k);
        }
        Ok(())
    }

    pub(super) fn suspend_job(&mut self, ns: &str, name: &str) {
        self.suspended_jobs.insert(format!("{ns}/{name}"));
        for k in self.owned(ns, Owner::Job, name) {
            self.terminate_pod(&k);
        }
    }
}
