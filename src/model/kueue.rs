//! Kueue's Workloads (`kueue.x-k8s.io`): one per Job (or pod group) Kueue queues, with the
//! ClusterQueue it waits in or was admitted to, the flavors it got, and the conditions Kueue
//! writes as it goes (protocols.md §7): `QuotaReserved`, `Admitted`, `Evicted`, `Preempted`,
//! `Requeued`, `Finished`. The feed reads them; the fleet keeps them by `namespace/name` and
//! works out each pending one's place in its queue.

use super::types::Ts;

/// One condition Kueue wrote on a Workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadCondition {
    /// `QuotaReserved`, `Admitted`, `Evicted`, `Preempted`, `Requeued`, `Finished`, …
    pub kind: String,
    pub status: bool,
    pub reason: String,
    pub message: String,
    /// `lastTransitionTime`.
    pub since: Option<Ts>,
}

/// A Kueue Workload, as the API server holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KueueWorkload {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `spec.queueName`: the LocalQueue it was submitted to.
    pub queue: String,
    /// The ClusterQueue: `status.admission.clusterQueue` once quota is reserved, else the
    /// LocalQueue's (empty when the LocalQueue is unknown).
    pub cluster_queue: String,
    /// `spec.priority` (from its priority class); 0 without one.
    pub priority: i32,
    /// `spec.priorityClassName`, when it names one.
    pub priority_class: String,
    /// `spec.active`: false once someone deactivated it (Kueue evicts it and keeps it out).
    pub active: bool,
    /// Its owner, `Job/train-a` (the first ownerReference); empty without one.
    pub owner: String,
    /// Pods it asks for (the sum of its pod sets' counts)...
    pub pods: u32,
    /// ...and the GPU devices they ask for in all: `nvidia.com/gpu` and MIG resources, each
    /// pod set's per-pod requests times its count.
    pub gpus: i64,
    /// The flavors Kueue assigned (`status.admission.podSetAssignments[].flavors`), each once.
    pub flavors: Vec<String>,
    pub conditions: Vec<WorkloadCondition>,
    pub created: Ts,
}

/// Where a Workload stands, the way Kueue's conditions say it, most decisive first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WorkloadState {
    /// Waiting for quota in its ClusterQueue.
    Pending,
    /// Kueue cannot consider it (its LocalQueue or ClusterQueue is missing, stopped, …).
    Inadmissible,
    /// Evicted (preempted, a stopped queue, …) and back in the queue.
    Evicted,
    /// Quota reserved; admission checks still to pass.
    Reserved,
    /// Admitted: its Job runs.
    Admitted,
    /// Deactivated (`spec.active: false`): Kueue keeps it out of the queue.
    Inactive,
    Finished,
}

impl WorkloadState {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadState::Pending => "Pending",
            WorkloadState::Inadmissible => "Inadmissible",
            WorkloadState::Evicted => "Evicted",
            WorkloadState::Reserved => "QuotaReserved",
            WorkloadState::Admitted => "Admitted",
            WorkloadState::Inactive => "Inactive",
            WorkloadState::Finished => "Finished",
        }
    }
    /// Waiting in its queue for quota (what a queue position is counted among).
    pub fn queued(self) -> bool {
        matches!(self, WorkloadState::Pending | WorkloadState::Evicted)
    }
}

impl KueueWorkload {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
    pub fn condition(&self, kind: &str) -> Option<&WorkloadCondition> {
        self.conditions.iter().find(|c| c.kind == kind)
    }
    fn is(&self, kind: &str) -> bool {
        self.condition(kind).is_some_and(|c| c.status)
    }
    /// Kueue holds quota for it (its pods may run, or are still being stopped).
    pub fn holds_quota(&self) -> bool {
        self.is("QuotaReserved")
    }
    pub fn state(&self) -> WorkloadState {
        if self.is("Finished") {
            WorkloadState::Finished
        } else if !self.active {
            WorkloadState::Inactive
        } else if self.is("Admitted") {
            WorkloadState::Admitted
        } else if self.holds_quota() {
            WorkloadState::Reserved
        } else if self.is("Evicted") {
            WorkloadState::Evicted
        } else if self.condition("QuotaReserved").is_some_and(|c| c.reason == "Inadmissible") {
            WorkloadState::Inadmissible
        } else {
            WorkloadState::Pending
        }
    }

    /// The condition that says why it is in its state: for a pending one Kueue's last word
    /// on its quota (`couldn't assign flavors to pod set main: insufficient unused quota for
    /// nvidia.com/gpu in flavor h100, 2 more needed`), for an evicted one the eviction.
    pub fn why(&self) -> Option<&WorkloadCondition> {
        let of = |k| self.condition(k);
        match self.state() {
            WorkloadState::Finished => of("Finished"),
            // Deactivated: Kueue evicts it with reason Deactivated (or says nothing yet).
            WorkloadState::Inactive => of("Evicted").filter(|c| c.status),
            WorkloadState::Admitted => of("Admitted"),
            WorkloadState::Reserved => of("QuotaReserved"),
            WorkloadState::Evicted => of("Preempted").filter(|c| c.status).or_else(|| of("Evicted")),
            WorkloadState::Pending | WorkloadState::Inadmissible => of("QuotaReserved"),
        }
    }

    /// The preemptor's Workload uid, when it was preempted (Kueue writes `Preempted to
    /// accommodate a workload (UID: …, JobUID: …) due to …`).
    pub fn preempted_by_uid(&self) -> Option<&str> {
        let c = self
            .condition("Preempted")
            .filter(|c| c.status)
            .or_else(|| self.condition("Evicted").filter(|c| c.status && c.reason.starts_with("Preempted")))?;
        let (_, rest) = c.message.split_once("(UID: ")?;
        let uid = rest.split([',', ')']).next()?.trim();
        (!uid.is_empty() && uid != "UNKNOWN").then_some(uid)
    }

    /// What happened to it, oldest first: created (queued), then each condition Kueue set,
    /// at the time it last changed. Kueue keeps one of each kind, so an earlier admission
    /// that a later one replaced is not there; the Workload's events say the rest.
    pub fn timeline(&self) -> Vec<(Ts, String)> {
        let mut t = vec![(self.created, "queued".to_string())];
        for c in &self.conditions {
            let Some(at) = c.since else { continue };
            let what = match (c.kind.as_str(), c.status) {
                ("QuotaReserved", true) => format!("quota reserved in {}", self.cluster_queue),
                ("QuotaReserved", false) if c.reason == "Pending" || c.reason == "Inadmissible" => {
                    format!("waiting ({})", c.reason)
                }
                ("QuotaReserved", false) => format!("quota released ({})", c.reason),
                ("Admitted", true) => "admitted".to_string(),
                ("Admitted", false) => format!("no longer admitted ({})", c.reason),
                ("Evicted", true) => format!("evicted ({})", c.reason),
                ("Preempted", true) => format!("preempted ({})", c.reason),
                ("Requeued", true) => format!("requeued ({})", c.reason),
                ("Finished", true) => format!("finished ({})", c.reason),
                ("PodsReady", true) => "pods ready".to_string(),
                // A reset (Evicted False once quota is reserved again) says nothing new.
                _ => continue,
            };
            t.push((at, what));
        }
        t.sort_by_key(|(at, _)| *at);
        t
    }
}

/// A whole number of devices as a Quantity writes it (`4`, `1k`); `None` for a fraction or
/// anything that is not a quantity.
pub fn device_count(s: &str) -> Option<i64> {
    let q = crate::quantity::Quantity::parse(s).ok()?;
    q.is_integer().then(|| q.value())
}

/// What Kueue holds back of a tenant ([`crate::model::Fleet::tenant_queued`]) in words:
/// `3 workloads (12 pods): 2 waiting for quota in cq-train (8 pods), 1 deactivated (4 pods)`;
/// empty when it holds nothing back.
pub fn queued_text(by: &[(String, u32, u32)]) -> String {
    let (w, p): (u32, u32) = by.iter().fold((0, 0), |(w, p), (_, a, b)| (w + a, p + b));
    if w == 0 {
        return String::new();
    }
    let parts: Vec<String> = by.iter().map(|(why, w, p)| format!("{w} {why} ({p} pods)")).collect();
    let s = if w == 1 { "" } else { "s" };
    format!("{w} workload{s} ({p} pods): {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(kind: &str, status: bool, reason: &str, message: &str, since: Ts) -> WorkloadCondition {
        WorkloadCondition {
            kind: kind.into(),
            status,
            reason: reason.into(),
            message: message.into(),
            since: Some(since),
        }
    }

    fn wl(conditions: Vec<WorkloadCondition>) -> KueueWorkload {
        KueueWorkload {
            namespace: "ns".into(),
            name: "job-a".into(),
            uid: "u1".into(),
            queue: "lq".into(),
            cluster_queue: "cq".into(),
            priority: 0,
            priority_class: String::new(),
            active: true,
            owner: "Job/a".into(),
            pods: 1,
            gpus: 2,
            flavors: vec![],
            conditions,
            created: 1_000,
        }
    }

    #[test]
    fn what_kueue_holds_back_reads_as_one_line() {
        assert_eq!(queued_text(&[]), "");
        let by = [("waiting for quota in cq-train".to_string(), 2, 8), ("deactivated".to_string(), 1, 4)];
        assert_eq!(
            queued_text(&by),
            "3 workloads (12 pods): 2 waiting for quota in cq-train (8 pods), 1 deactivated (4 pods)"
        );
    }

    #[test]
    fn state_follows_kueues_conditions() {
        assert_eq!(wl(vec![]).state(), WorkloadState::Pending);
        let pending = cond("QuotaReserved", false, "Pending", "couldn't assign flavors", 2_000);
        assert_eq!(wl(vec![pending.clone()]).state(), WorkloadState::Pending);
        assert_eq!(wl(vec![pending]).why().map(|c| c.message.as_str()), Some("couldn't assign flavors"));
        let inadmissible = cond("QuotaReserved", false, "Inadmissible", "LocalQueue lq doesn't exist", 2_000);
        assert_eq!(wl(vec![inadmissible]).state(), WorkloadState::Inadmissible);
        let reserved = cond("QuotaReserved", true, "QuotaReserved", "Quota reserved in ClusterQueue cq", 2_000);
        assert_eq!(wl(vec![reserved.clone()]).state(), WorkloadState::Reserved);
        let admitted = cond("Admitted", true, "Admitted", "The workload is admitted", 2_000);
        assert_eq!(wl(vec![reserved.clone(), admitted.clone()]).state(), WorkloadState::Admitted);
        let finished = cond("Finished", true, "Succeeded", "Job finished successfully", 9_000);
        assert_eq!(wl(vec![reserved.clone(), finished]).state(), WorkloadState::Finished);
        let mut off = wl(vec![reserved, admitted]);
        off.active = false;
        assert_eq!(off.state(), WorkloadState::Inactive);
        assert!(off.holds_quota(), "deactivated but its pods not stopped yet: it still holds quota");
    }

    #[test]
    fn a_preempted_workload_names_its_preemptor_and_tells_its_story() {
        let msg = "Preempted to accommodate a workload (UID: 7f3e-11, JobUID: 9a) due to prioritization \
                   in the ClusterQueue; preemptor path: /cq; preemptee path: /cq";
        let w = wl(vec![
            cond("QuotaReserved", false, "Preempted", "Previously: Quota reserved in ClusterQueue cq", 5_000),
            cond("Admitted", false, "NoReservation", "The workload has no reservation", 5_000),
            cond("Evicted", true, "Preempted", msg, 5_000),
            cond("Preempted", true, "InClusterQueue", msg, 5_000),
            cond("Requeued", true, "Preempted", "", 5_500),
        ]);
        assert_eq!(w.state(), WorkloadState::Evicted);
        assert!(w.state().queued());
        assert_eq!(w.preempted_by_uid(), Some("7f3e-11"));
        assert_eq!(w.why().map(|c| c.reason.as_str()), Some("InClusterQueue"));
        let story: Vec<String> = w.timeline().into_iter().map(|(_, s)| s).collect();
        assert_eq!(
            story,
            [
                "queued",
                "quota released (Preempted)",
                "no longer admitted (NoReservation)",
                "evicted (Preempted)",
                "preempted (InClusterQueue)",
                "requeued (Preempted)"
            ]
        );
        let mut other = wl(vec![cond("Evicted", true, "ClusterQueueStopped", "stopped", 5_000)]);
        assert_eq!(other.preempted_by_uid(), None);
        other.conditions[0].message = "Preempted to accommodate a workload (UID: UNKNOWN, JobUID: x)".into();
        other.conditions[0].reason = "Preempted".into();
        assert_eq!(other.preempted_by_uid(), None, "an unknown preemptor is not a uid");
    }
}
