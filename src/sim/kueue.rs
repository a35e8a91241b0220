//! Kueue's Workloads on the simulated world, for the demo: the Kueue tenant's pods are
//! admitted (Kueue's pod integration makes one Workload per pod, owned by it), and a few
//! suspended Jobs wait in its ClusterQueue — one for quota, one preempted by a higher
//! priority Workload, one deactivated. What the real Kueue writes (the conditions, their
//! reasons and messages) is copied from Kueue v0.17; the e2e test runs the real one.

use std::collections::BTreeMap;

use super::world::Sim;
use crate::model::{Delta, KueueWorkload, WorkloadCondition};

/// A 5-hex-digit suffix from a name (Kueue's Workload names end in a hash).
fn suffix(name: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{:05x}", h & 0xf_ffff)
}

fn cond(kind: &str, status: bool, reason: &str, message: String, since: u64) -> WorkloadCondition {
    WorkloadCondition { kind: kind.into(), status, reason: reason.into(), message, since: Some(since) }
}

impl Sim {
    /// The Kueue tenant's ClusterQueue and LocalQueue names, with its first namespace.
    fn kueue_tenant(&self) -> Option<(String, String, String)> {
        let t = self.tenants.iter().find(|t| t.source == "kueue")?;
        let ns = t.namespaces.first()?.clone();
        Some((format!("cq-{}", t.name), format!("lq-{}", t.name), ns))
    }

    /// The Workloads Kueue would hold now, by `namespace/name`: those of the live pods are
    /// made only when new (`sent` has the rest; a pod's Workload does not change while it
    /// lives), so a sync at 400,000 pods allocates only for what changed.
    fn kueue_workloads(&self, sent: &BTreeMap<String, KueueWorkload>) -> BTreeMap<String, Option<KueueWorkload>> {
        let mut out = BTreeMap::new();
        let Some((cq, lq, home)) = self.kueue_tenant() else { return out };
        let Some(t) = self.tenants.iter().find(|t| t.source == "kueue") else { return out };
        let mut first_uid = None;
        for p in self.pods.values().filter(|p| t.namespaces.contains(&p.spec.namespace)) {
            let s = &p.spec;
            if s.phase.finished() || p.terminating.is_some() {
                continue;
            }
            let name = format!("pod-{}-{}", s.name, suffix(&s.name));
            let key = format!("{}/{name}", s.namespace);
            if let Some(w) = sent.get(&key) {
                first_uid.get_or_insert_with(|| w.uid.clone());
                out.insert(key, None);
                continue;
            }
            let uid = format!("wl-{}", suffix(&name));
            first_uid.get_or_insert_with(|| uid.clone());
            let at = s.created;
            let w = KueueWorkload {
                namespace: s.namespace.clone(),
                name,
                uid,
                queue: lq.clone(),
                cluster_queue: cq.clone(),
                priority: 100,
                priority_class: "prod".into(),
                active: true,
                owner: format!("Pod/{}", s.name),
                pods: 1,
                gpus: i64::from(s.gpus) + s.mig.iter().map(|(_, n)| i64::from(*n)).sum::<i64>(),
                flavors: vec!["h100".into()],
                conditions: vec![
                    cond("QuotaReserved", true, "QuotaReserved", format!("Quota reserved in ClusterQueue {cq}"), at),
                    cond("Admitted", true, "Admitted", "The workload is admitted".into(), at),
                ],
                created: at,
            };
            out.insert(key, Some(w));
        }
        // Suspended Jobs waiting in the queue (they have no pods until Kueue admits them).
        let start = super::world::SIM_EPOCH_MS;
        let job = |name: &str, gpus: i64, priority: i32, created: u64| {
            let full = format!("job-{name}-{}", suffix(name));
            KueueWorkload {
                namespace: home.clone(),
                uid: format!("wl-{}", suffix(&full)),
                name: full,
                queue: lq.clone(),
                cluster_queue: cq.clone(),
                priority,
                priority_class: if priority > 0 { "prod".into() } else { String::new() },
                active: true,
                owner: format!("Job/{name}"),
                pods: 1,
                gpus,
                flavors: vec![],
                conditions: vec![],
                created,
            }
        };
        let short = |n: i64| {
            format!(
                "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, {n} more needed"
            )
        };
        let mut eval = job("nightly-eval", 4, 0, start - 25 * 60_000);
        eval.conditions.push(cond("QuotaReserved", false, "Pending", short(4), start - 25 * 60_000));
        let mut bench = job("canary-bench", 2, 0, start - 40 * 60_000);
        let at = start - 12 * 60_000;
        let by = first_uid.unwrap_or_else(|| "UNKNOWN".into());
        let msg = format!(
            "Preempted to accommodate a workload (UID: {by}, JobUID: UNKNOWN) due to prioritization in the ClusterQueue; \
             preemptor path: /{cq}; preemptee path: /{cq}"
        );
        bench.conditions = vec![
            cond("QuotaReserved", false, "Pending", short(2), at),
            cond("Admitted", false, "NoReservation", "The workload has no reservation".into(), at),
            cond("Evicted", true, "Preempted", msg.clone(), at),
            cond("Preempted", true, "InClusterQueue", msg, at),
            cond("Requeued", true, "Preempted", "Workload requeued after preemption".into(), at),
        ];
        let mut load = job("load-test", 8, 0, start - 90 * 60_000);
        load.conditions.push(cond("QuotaReserved", false, "Pending", short(8), start - 90 * 60_000));
        for mut w in [eval, bench, load] {
            let key = w.key();
            // Deactivated: Kueue evicts it (reason Deactivated) and keeps it out of the queue;
            // reactivated: requeued (reason Reactivated).
            match self.kueue_off.get(&key) {
                Some(&Some(at)) => {
                    w.active = false;
                    let off = "The workload is deactivated".to_string();
                    w.conditions.retain(|c| c.kind == "QuotaReserved");
                    w.conditions.push(cond("Evicted", true, "Deactivated", off.clone(), at));
                    w.conditions.push(cond("Requeued", false, "Deactivated", off, at));
                }
                Some(&None) => {
                    w.conditions.retain(|c| c.kind == "QuotaReserved");
                    let at = self.kueue_on.get(&key).copied().unwrap_or(self.now);
                    w.conditions.push(cond("Requeued", true, "Reactivated", "The workload was reactivated".into(), at));
                }
                None => {}
            }
            out.insert(key, Some(w));
        }
        out
    }

    /// The demo starts with one Workload deactivated an hour ago.
    pub(super) fn kueue_setup(&mut self) {
        if let Some((_, _, home)) = self.kueue_tenant() {
            let key = format!("{home}/job-load-test-{}", suffix("load-test"));
            self.kueue_off.insert(key, Some(super::world::SIM_EPOCH_MS - 60 * 60_000));
        }
    }

    /// Sends the Workloads that changed since the last call, and removes those gone.
    pub(super) fn kueue_sync(&mut self) {
        let mut sent = std::mem::take(&mut self.kueue_sent);
        let now = self.kueue_workloads(&sent);
        sent.retain(|k, w| {
            let keep = now.contains_key(k);
            if !keep {
                self.out.push(Delta::WorkloadRemove { namespace: w.namespace.clone(), name: w.name.clone() });
            }
            keep
        });
        for (k, w) in now {
            // `None`: as sent.
            if let Some(w) = w
                && sent.get(&k) != Some(&w)
            {
                self.out.push(Delta::WorkloadUpsert(w.clone()));
                sent.insert(k, w);
            }
        }
        self.kueue_sent = sent;
    }

    /// Workload `namespace/name` as last sent.
    pub(super) fn kueue_workload(&self, key: &str) -> Option<&KueueWorkload> {
        self.kueue_sent.get(key)
    }

    /// `spec.active` of a queued Workload (the admitted ones are the Kueue tenant's pods:
    /// their owners are what to act on). Kueue's answer comes with the next sync.
    pub(super) fn kueue_set_active(&mut self, key: &str, active: bool) -> Result<(), String> {
        let Some(w) = self.kueue_sent.get(key) else { return Err(format!("Workload {key}: not found")) };
        if w.owner.starts_with("Pod/") {
            return Err(format!("Workload {key}: the simulator deactivates only its queued Jobs"));
        }
        if active {
            self.kueue_off.insert(key.to_string(), None);
            self.kueue_on.insert(key.to_string(), self.now);
        } else {
            self.kueue_off.insert(key.to_string(), Some(self.now));
        }
        Ok(())
    }
}
