//! Kueue Workloads in the fleet: kept by `namespace/name`, each queued one's place in its
//! ClusterQueue, the tenant it belongs to, who preempted it, and per tenant what Kueue holds
//! back and why.

use super::*;
use crate::model::kueue::{KueueWorkload, WorkloadState};

/// A queued Workload's place in Kueue's queue order: higher priority first, then the
/// earlier created, then by `namespace/name`.
pub(super) type LineKey = (std::cmp::Reverse<i32>, Ts, String);

/// Whether Kueue holds a Workload back (see [`Fleet::tenant_queued`]): waiting for quota
/// or admission checks, inadmissible, or deactivated and holding nothing.
fn is_held_back(w: &KueueWorkload) -> bool {
    match w.state() {
        WorkloadState::Pending | WorkloadState::Evicted | WorkloadState::Inadmissible | WorkloadState::Reserved => true,
        WorkloadState::Inactive => !w.holds_quota(),
        WorkloadState::Admitted | WorkloadState::Finished => false,
    }
}

/// What a Workload adds to its namespace's held-back pods.
fn held_back(w: &KueueWorkload) -> u32 {
    if is_held_back(w) { w.pods } else { 0 }
}

impl Fleet {
    /// Adds or takes back what Workload `w` counts for: its place in its ClusterQueue's line
    /// and the pods its namespace has held back. Returns the ClusterQueue whose line changed.
    fn count_workload(&mut self, key: &str, w: &KueueWorkload, add: bool) -> Option<String> {
        let held = held_back(w);
        if held > 0 {
            let e = self.wl_held.entry(w.namespace.clone()).or_default();
            *e = if add { e.saturating_add(held) } else { e.saturating_sub(held) };
            if *e == 0 {
                self.wl_held.remove(&w.namespace);
            }
        }
        if !w.state().queued() {
            return None;
        }
        let entry = (std::cmp::Reverse(w.priority), w.created, key.to_string());
        let line = self.wl_lines.entry(w.cluster_queue.clone()).or_default();
        if add {
            line.insert(entry);
        } else {
            line.remove(&entry);
            self.wl_pos.remove(key);
            if line.is_empty() {
                self.wl_lines.remove(&w.cluster_queue);
            }
        }
        Some(w.cluster_queue.clone())
    }

    pub(super) fn upsert_workload(&mut self, w: KueueWorkload) {
        let key = w.key();
        let mut moved = Vec::new();
        if let Some(old) = self.workloads.remove(&key) {
            self.wl_by_uid.remove(&old.uid);
            moved.extend(self.count_workload(&key, &old, false));
        }
        moved.extend(self.count_workload(&key, &w, true));
        self.wl_by_uid.insert(w.uid.clone(), key.clone());
        self.workloads.insert(key.clone(), Box::new(w));
        if !self.wl_ids.contains_key(&key) {
            self.next_wl += 1;
            self.wl_ids.insert(key.clone(), self.next_wl);
            self.wl_keys.insert(self.next_wl, key);
        }
        moved.dedup();
        for cq in moved {
            self.place_queue(&cq);
        }
    }

    /// The ids of the Workloads there are (see [`Fleet::workload_by_id`]), in no order.
    pub fn workload_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.wl_keys.keys().copied()
    }

    /// The Workload of id `id`, with its `namespace/name`.
    pub fn workload_by_id(&self, id: u32) -> Option<(&str, &KueueWorkload)> {
        let key = self.wl_keys.get(&id)?;
        Some((key.as_str(), self.workloads.get(key)?))
    }

    /// The id of Workload `namespace/name`.
    pub fn workload_id(&self, key: &str) -> Option<u32> {
        self.wl_ids.get(key).copied()
    }

    pub(super) fn remove_workload(&mut self, key: &str) -> bool {
        let Some(old) = self.workloads.remove(key) else { return false };
        self.wl_by_uid.remove(&old.uid);
        if let Some(id) = self.wl_ids.remove(key) {
            self.wl_keys.remove(&id);
        }
        if let Some(cq) = self.count_workload(key, &old, false) {
            self.place_queue(&cq);
        }
        true
    }

    /// Numbers the queued Workloads of ClusterQueue `cq` in the order Kueue's queue heads
    /// them: higher priority first, then the earlier created, then by name. Kueue's own
    /// numbering (the visibility API) may differ: BestEffortFIFO lets a later one that fits
    /// go first, and a Workload evicted for PodsReady timeout is ordered by its eviction.
    /// Only the queue's line is walked: admitted Workloads are not in it.
    fn place_queue(&mut self, cq: &str) {
        let Some(line) = self.wl_lines.get(cq) else { return };
        for (i, (_, _, k)) in line.iter().enumerate() {
            self.wl_pos.insert(k.clone(), i as u32 + 1);
        }
    }

    /// The place of a queued Workload in its ClusterQueue (1: next to be considered); `None`
    /// for one that is not waiting for quota.
    pub fn workload_position(&self, key: &str) -> Option<u32> {
        self.wl_pos.get(key).copied()
    }

    /// The tenant of a Workload: its namespace's.
    pub fn workload_tenant(&self, w: &KueueWorkload) -> Option<&str> {
        self.namespace_tenant(&w.namespace)
    }

    /// The pods of a Workload: its Job's (the Job's pods in its namespace), or the pod
    /// itself (Kueue's pod integration), by name.
    pub fn workload_pods(&self, w: &KueueWorkload) -> Vec<&Pod> {
        if let Some(pod) = w.owner.strip_prefix("Pod/") {
            return self.pod_by_name(&w.namespace, pod).and_then(|p| self.pod(p)).into_iter().collect();
        }
        let Some(job) = w.owner.strip_prefix("Job/") else { return Vec::new() };
        let (Some(ns), Some(job)) = (self.interner.get(&w.namespace), self.interner.get(job)) else {
            return Vec::new();
        };
        let mut pods: Vec<&Pod> = self
            .idx
            .pods_in(ns)
            .filter_map(|p| self.pod(p))
            .filter(|p| p.owner == Owner::Job && p.owner_name == job)
            .collect();
        pods.sort_by(|a, b| a.name.cmp(&b.name));
        pods
    }

    /// The Workload that preempted `w`, when Kueue named one this cockpit knows.
    pub fn workload_preemptor(&self, w: &KueueWorkload) -> Option<&KueueWorkload> {
        let key = self.wl_by_uid.get(w.preempted_by_uid()?)?;
        self.workloads.get(key).map(|w| &**w)
    }

    /// The pods of tenant `tid`'s Workloads that Kueue holds back (the sum of
    /// [`Fleet::tenant_queued`]'s pods), from a count kept per namespace.
    pub fn tenant_queued_pods(&self, tid: TenantId) -> u32 {
        let Some(t) = self.tenant(tid) else { return 0 };
        t.namespaces.iter().filter_map(|n| self.wl_held.get(self.str_of(*n))).sum()
    }

    /// What Kueue holds back of tenant `tid`, by why: `(why, workloads, pods)`, the most pods
    /// first. Their Jobs are suspended, so no pod of theirs exists to be pending: this is the
    /// part of a tenant's waiting work that its PEND column cannot count.
    pub fn tenant_queued(&self, tid: TenantId) -> Vec<(String, u32, u32)> {
        let mut by: Vec<(String, u32, u32)> = Vec::new();
        let Some(t) = self.tenant(tid) else { return by };
        let names: Vec<&str> = t.namespaces.iter().map(|n| self.str_of(*n)).collect();
        let mine = |w: &&KueueWorkload| names.contains(&w.namespace.as_str()) && is_held_back(w);
        for w in self.workloads.values().map(|w| &**w).filter(mine) {
            let cq = if w.cluster_queue.is_empty() { w.queue.as_str() } else { w.cluster_queue.as_str() };
            let why = match w.state() {
                WorkloadState::Inadmissible => {
                    let m = w.why().map_or("", |c| c.message.as_str());
                    format!("inadmissible: {}", m.chars().take(60).collect::<String>())
                }
                WorkloadState::Reserved => format!("waiting for admission checks in {cq}"),
                WorkloadState::Inactive => "deactivated".to_string(),
                _ => format!("waiting for quota in {cq}"),
            };
            match by.iter_mut().find(|(k, _, _)| *k == why) {
                Some(e) => {
                    e.1 += 1;
                    e.2 += w.pods;
                }
                None => by.push((why, 1, w.pods)),
            }
        }
        by.sort_by(|a, b| b.2.cmp(&a.2).then(b.1.cmp(&a.1)).then_with(|| a.0.cmp(&b.0)));
        by
    }
}
