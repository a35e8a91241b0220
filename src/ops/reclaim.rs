//! Reclaiming a pod's GPUs: acting on the pod's owner so that the pod goes and does not come
//! back, as the owner's own controller would do it — never a bare delete that a ReplicaSet
//! answers with a replacement on the same GPUs.
//!
//! - a Deployment's (or a lone ReplicaSet's) pod: the pod is marked with the lowest
//!   `controller.kubernetes.io/pod-deletion-cost`, then the replicas go down by one, written
//!   only over the count just read (a JSON patch `test`), so the ReplicaSet removes this pod.
//!   It removes unscheduled, pending and not-ready pods before any running one whatever their
//!   cost: the preview names them, and the operation fails (and says how to scale back) when
//!   the ReplicaSet settles with this pod still there;
//! - a StatefulSet's pod: only its highest ordinal goes on a scale-down, so only that pod can
//!   be reclaimed this way;
//! - a Job's pod: the Job is suspended (`spec.suspend`), which stops all its pods; a Job that
//!   Kueue manages is refused (Kueue resumes a suspended Job it admitted: deactivate its
//!   Workload instead);
//! - a pod without an owner (a notebook someone started): evicted (policy/v1 Eviction, so a
//!   PodDisruptionBudget is respected, with the pod's uid as precondition).
//!
//! Done when the pod is gone from the API server — not when the write was accepted.

use super::{OpKind, OpRequest, Plan, PlanDetail, PlanError, count};
use crate::model::{Fleet, Owner, Pod, QuotaSource, Sym};

/// The annotation the ReplicaSet controller orders its scale-down victims by (lowest first).
pub const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";
/// The lowest cost there is (an int32).
pub const LOWEST_COST: i32 = i32::MIN;
/// The label that puts a Job under Kueue.
pub const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// A workload controller fabrik can act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    Deployment,
    ReplicaSet,
    StatefulSet,
    Job,
}

impl Workload {
    pub fn as_str(self) -> &'static str {
        match self {
            Workload::Deployment => "Deployment",
            Workload::ReplicaSet => "ReplicaSet",
            Workload::StatefulSet => "StatefulSet",
            Workload::Job => "Job",
        }
    }
    /// `(group, version, plural)` of its API.
    pub fn api(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Workload::Deployment => ("apps", "v1", "deployments"),
            Workload::ReplicaSet => ("apps", "v1", "replicasets"),
            Workload::StatefulSet => ("apps", "v1", "statefulsets"),
            Workload::Job => ("batch", "v1", "jobs"),
        }
    }
    /// kubectl's short form (`deploy/x`).
    pub fn kubectl(self) -> &'static str {
        match self {
            Workload::Deployment => "deployment",
            Workload::ReplicaSet => "replicaset",
            Workload::StatefulSet => "statefulset",
            Workload::Job => "job",
        }
    }
}

/// What is done to the owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReclaimAction {
    /// Replicas down by one. `rs`: the pod's ReplicaSet when `kind` is its Deployment (or
    /// the ReplicaSet itself), checked again before anything is sent.
    ScaleDown { kind: Workload, name: String, rs: Option<String> },
    /// `spec.suspend: true` on the pod's Job.
    Suspend { job: String },
    /// The pod has no owner: evicted.
    Evict,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ReclaimPlan {
    pub namespace: String,
    pub pod: String,
    pub action: ReclaimAction,
    /// The devices it frees, in words ("GPU 3 of h100-007 (idle 42m)").
    pub devices: Vec<String>,
    /// The other pods of the same owner the fleet shows (for the preview's counts).
    pub siblings: usize,
}

impl ReclaimPlan {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.pod)
    }
    /// "Deployment ml/notebook", "pod ml/nb-alice" (evicted): what is acted on.
    pub fn owner(&self) -> String {
        match &self.action {
            ReclaimAction::ScaleDown { kind, name, .. } => format!("{} {}/{name}", kind.as_str(), self.namespace),
            ReclaimAction::Suspend { job } => format!("Job {}/{job}", self.namespace),
            ReclaimAction::Evict => format!("pod {}", self.key()),
        }
    }
}

/// "42m", "3h12m", "2d": how long a device has been idle.
fn span(ms: u64) -> String {
    let m = ms / 60_000;
    match m {
        0 => format!("{}s", ms / 1000),
        1..=59 => format!("{m}m"),
        60..=2879 => format!("{}h{:02}m", m / 60, m % 60),
        _ => format!("{}d", m / 1440),
    }
}

/// How a device a pod holds is used, as far as the fleet knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Use {
    Idle,
    Busy,
    Unmeasured,
}

/// A device's state in the preview's words.
fn state(now: u64, util: Option<u8>, idle: bool, low_since: Option<u64>) -> (String, Use) {
    match (idle, util, low_since) {
        (true, _, Some(l)) => (format!("idle {}", span(now.saturating_sub(l))), Use::Idle),
        (true, _, None) => ("idle".into(), Use::Idle),
        (false, Some(u), _) => (format!("busy {u} %"), Use::Busy),
        (false, None, _) => ("utilisation not measured".into(), Use::Unmeasured),
    }
}

/// The devices `p` holds, each in words with its state, and how each is used.
fn devices(f: &Fleet, p: &Pod) -> (Vec<String>, Vec<Use>) {
    let mut out = Vec::new();
    let mut uses = Vec::new();
    let node = |g: &crate::model::Gpu| f.node(g.node).map(|n| f.str_of(n.name).to_string()).unwrap_or_default();
    let on = p.node.and_then(|n| f.node(n));
    let shared = on.is_some_and(|n| n.sharing.shared());
    let me = f.pod_by_name(f.str_of(p.namespace), &p.name);
    for (gid, g) in p.bound_gpus.iter().filter_map(|g| Some((*g, f.gpu(*g)?))) {
        if shared {
            let idle = me.is_some_and(|me| f.idle_shares(gid).iter().any(|(q, _, _)| *q == me));
            let (w, u) = state(f.now, f.share_util(gid, p), idle, None);
            out.push(format!("a share of GPU {} of {} ({w}; its other holders keep theirs)", g.index, node(g)));
            uses.push(u);
        } else {
            let (w, u) = state(f.now, g.last.util, g.idle_allocated, g.low_since);
            out.push(format!("GPU {} of {} ({w})", g.index, node(g)));
            uses.push(u);
        }
    }
    // Whole GPUs the device plugin gave it, which no node agent named.
    if let Some(n) = on.filter(|_| p.bound_gpus.is_empty() && p.gpus > 0) {
        let what = if shared { "GPU share" } else { "GPU" };
        out.push(format!(
            "{} on {} (which: unknown without a node agent)",
            count(p.gpus as usize, what),
            f.str_of(n.name)
        ));
        uses.push(Use::Unmeasured);
    }
    for u in &p.bound_mig {
        let Some((gid, idx)) = f.mig_instance(*u) else { continue };
        let Some(g) = f.gpu(gid) else { continue };
        let Some(i) = g.instances.get(idx as usize) else { continue };
        let (w, u) = state(f.now, i.util, i.idle_allocated, i.low_since);
        let profile = crate::mig::profile(g.model, i.placement.profile).name;
        out.push(format!("MIG {profile} on GPU {} of {} ({w})", g.index, node(g)));
        uses.push(u);
    }
    for (r, n) in &p.mig_unbound {
        out.push(format!("{n}× {} (which instance: unknown without a node agent)", f.str_of(*r)));
        uses.push(Use::Unmeasured);
    }
    for c in &p.dra {
        if let Some(a) = c.allocated
            && p.bound_gpus.is_empty()
        {
            out.push(format!("DRA device {} (claim {})", f.str_of(a), c.claim));
            uses.push(Use::Unmeasured);
        }
    }
    (out, uses)
}

/// `notebook-7d9f8c6b5` → `notebook`: the Deployment a ReplicaSet's name says it belongs to
/// (`<deployment>-<pod-template-hash>`); checked against the ReplicaSet's owner at execute.
pub fn deployment_of(rs: &str) -> Option<&str> {
    rs.rsplit_once('-').map(|(d, _)| d).filter(|d| !d.is_empty())
}

/// `db-2` of StatefulSet `db` → 2.
fn ordinal(set: &str, pod: &str) -> Option<u32> {
    pod.strip_prefix(set)?.strip_prefix('-')?.parse().ok()
}

pub(super) fn plan(fleet: &Fleet, namespace: &str, pod: &str, request: OpRequest) -> Result<Plan, PlanError> {
    let key = format!("{namespace}/{pod}");
    let p = fleet.pod_by_name(namespace, pod).and_then(|id| fleet.pod(id)).ok_or_else(|| {
        PlanError::Invalid(format!(
            "pod {key} is not in the fleet (it may be gone already); pick a pod from the pods view (5)"
        ))
    })?;
    let (devices, uses) = devices(fleet, p);
    if devices.is_empty() {
        let why = if p.node.is_none() && fleet.str_of(p.node_name).is_empty() {
            "is not scheduled: it holds no GPU yet"
        } else if p.requests_devices() {
            "holds no GPU the fleet can name yet (its devices are not reported)"
        } else {
            "asks for no GPU"
        };
        return Err(PlanError::Invalid(format!("pod {key} {why}; reclaim frees the GPUs of a pod that holds them")));
    }
    let owner = fleet.str_of(p.owner_name).to_string();
    // A Job (or pod) Kueue queues is suspended through its Workload: Kueue would resume the
    // Job itself, and it releases the quota only when the Workload is deactivated.
    let by_kueue = match p.owner {
        Owner::Job if !owner.is_empty() => Some(format!("Job/{owner}")),
        Owner::None => Some(format!("Pod/{pod}")),
        _ => None,
    };
    if let Some(o) = by_kueue
        && let Some(w) = fleet.workloads.values().find(|w| w.namespace == namespace && w.owner == o && w.active)
    {
        let mut plan = super::kueue::plan(fleet, &w.key(), false, request)?;
        plan.effects.insert(
            0,
            format!(
                "Kueue queues {o}: reclaim suspends its Workload {} (Kueue resumes a Job suspended directly)",
                w.key()
            ),
        );
        return Ok(plan);
    }
    // A Deployment's pods are those of all its ReplicaSets (a rollout has two).
    let deployment = (p.owner == Owner::ReplicaSet).then(|| deployment_of(&owner)).flatten();
    let same_owner = |q: &&Pod| {
        q.namespace == p.namespace
            && q.name != p.name
            && match deployment {
                Some(d) => q.owner == Owner::ReplicaSet && deployment_of(fleet.str_of(q.owner_name)) == Some(d),
                None => q.owner_name == p.owner_name,
            }
    };
    let siblings: Vec<&Pod> = if p.owner_name == Sym::default() {
        Vec::new()
    } else {
        fleet.pods_in_namespace(p.namespace).filter_map(|id| fleet.pod(id)).filter(same_owner).collect()
    };
    let mut effects = Vec::new();
    let mut warnings = Vec::new();
    let mut blockers = Vec::new();
    let action = match p.owner {
        Owner::ReplicaSet if !owner.is_empty() => {
            let (kind, name) = match deployment_of(&owner) {
                Some(d) => (Workload::Deployment, d.to_string()),
                None => (Workload::ReplicaSet, owner.clone()),
            };
            let have = siblings.len() + 1;
            effects.push(format!(
                "mark {key} with {DELETION_COST}={LOWEST_COST}, so the ReplicaSet {owner} removes it before its other pods"
            ));
            effects.push(format!(
                "scale {} {namespace}/{name} down by one ({have} → {} as the fleet shows it; written only over the count read just before)",
                kind.as_str(),
                have - 1
            ));
            if kind == Workload::Deployment {
                effects.push(format!(
                    "checked first: ReplicaSet {owner} belongs to Deployment {name} (else nothing is sent)"
                ));
            }
            let early: Vec<String> = siblings
                .iter()
                .filter(|q| q.owner_name == p.owner_name)
                .filter(|q| q.node.is_none() || !matches!(q.phase, crate::model::Phase::Running))
                .map(|q| q.name.to_string())
                .collect();
            if !early.is_empty() {
                warnings.push(format!(
                    "{} of {owner} not running ({}): a ReplicaSet removes those before a running one whatever the \
                     deletion cost, so it may take one of them instead — fabrik then stops and says how to scale back",
                    count(early.len(), "pod"),
                    early.join(", ")
                ));
            }
            if let Some(pdb) = fleet.pdb_for_pod(p) {
                warnings.push(format!(
                    "a scale-down is not an eviction: PodDisruptionBudget {namespace}/{} (allows {} now) is not consulted",
                    fleet.str_of(pdb.name),
                    pdb.disruptions_allowed
                ));
            }
            ReclaimAction::ScaleDown { kind, name, rs: Some(owner.clone()) }
        }
        Owner::StatefulSet if !owner.is_empty() => {
            let mine = ordinal(&owner, pod);
            let highest = siblings.iter().filter_map(|q| ordinal(&owner, &q.name)).chain(mine).max();
            match (mine, highest) {
                (Some(m), Some(h)) if m == h => {
                    effects.push(format!(
                        "scale StatefulSet {namespace}/{owner} down by one ({} → {m}; written only over the count read just before)",
                        m + 1
                    ));
                    effects.push(format!("a StatefulSet removes its highest ordinal first: {pod}"));
                }
                (Some(_), Some(h)) => blockers.push(format!(
                    "StatefulSet {owner} removes its highest ordinal first ({owner}-{h}), not {pod}: scaling it down \
                     would not free these GPUs. Reclaim {owner}-{h} instead, or scale the set yourself"
                )),
                _ => blockers.push(format!(
                    "{pod} does not carry StatefulSet {owner}'s ordinal naming; fabrik cannot tell which pod a scale-down removes"
                )),
            }
            ReclaimAction::ScaleDown { kind: Workload::StatefulSet, name: owner.clone(), rs: None }
        }
        Owner::Job if !owner.is_empty() => {
            effects.push(format!(
                "suspend Job {namespace}/{owner} (spec.suspend: true): the Job controller stops all its {} (resume with \
                 kubectl patch job {owner} -n {namespace} -p '{{\"spec\":{{\"suspend\":false}}}}')",
                count(siblings.len() + 1, "pod")
            ));
            effects.push(format!(
                "refused before anything is sent if Kueue manages the Job ({KUEUE_QUEUE_LABEL}): Kueue would resume it"
            ));
            ReclaimAction::Suspend { job: owner.clone() }
        }
        Owner::None => {
            effects.push(format!(
                "evict {key} (policy/v1 Eviction with its uid): it has no owner, so nothing recreates it"
            ));
            if let Some(pdb) = fleet.pdb_for_pod(p)
                && pdb.disruptions_allowed <= 0
            {
                warnings.push(format!(
                    "PodDisruptionBudget {namespace}/{} allows 0 disruptions now: the eviction waits (HTTP 429) until it allows one",
                    fleet.str_of(pdb.name)
                ));
            }
            ReclaimAction::Evict
        }
        Owner::DaemonSet => {
            blockers.push(format!(
                "{key} belongs to a DaemonSet, which runs one pod per node and puts it back: cordon and drain the \
                 node, or change the DaemonSet's node selector"
            ));
            ReclaimAction::Evict
        }
        Owner::Mirror => {
            blockers.push(format!(
                "{key} is a static pod the kubelet runs from a file on the node; the API server cannot remove it"
            ));
            ReclaimAction::Evict
        }
        _ => {
            blockers.push(format!(
                "{key} is owned by {} fabrik cannot scale ({}); act on the owner with kubectl (:kubectl)",
                if owner.is_empty() { "a controller".to_string() } else { owner.clone() },
                p.owner.as_str()
            ));
            ReclaimAction::Evict
        }
    };
    effects.push(format!("frees {}", devices.join(", ")));
    let busy = uses.iter().filter(|u| **u == Use::Busy).count();
    let unmeasured = uses.iter().filter(|u| **u == Use::Unmeasured).count();
    if busy > 0 {
        warnings.push(format!(
            "{} busy: reclaiming stops work in progress",
            if uses.len() == 1 { "the device is".to_string() } else { format!("{busy} of the devices are") }
        ));
    }
    if unmeasured > 0 {
        warnings.push(format!(
            "{} no measured utilisation: fabrik cannot say {} idle",
            if uses.len() == 1 { "the device has".to_string() } else { format!("{unmeasured} of the devices have") },
            if uses.len() == 1 { "it is" } else { "they are" }
        ));
    }
    if p.deletion.is_some() {
        warnings.push(format!("{key} is already being deleted: the operation waits for it to go"));
    }
    let tenant = fleet.tenant(p.tenant);
    if let Some(t) = tenant {
        let queues: Vec<&str> = t
            .quotas
            .iter()
            .filter_map(|q| fleet.quota(*q))
            .filter_map(|q| match q.source {
                QuotaSource::ClusterQueue { queue, .. } => Some(fleet.str_of(queue)),
                QuotaSource::ResourceQuota { .. } => None,
            })
            .collect();
        if let Some(q) = queues.first() {
            effects.push(format!(
                "the quota it held returns to ClusterQueue {q}: Kueue may admit the next pending workload onto it"
            ));
        }
    }
    let plan = ReclaimPlan {
        namespace: namespace.to_string(),
        pod: pod.to_string(),
        action,
        devices,
        siblings: siblings.len(),
    };
    effects.push(format!("done when {key} is gone from the API server"));
    Ok(Plan {
        request,
        kind: OpKind::Reclaim,
        title: format!("Reclaim the GPUs of {key}"),
        target: plan.owner(),
        effects,
        warnings,
        blockers,
        detail: PlanDetail::Reclaim(plan),
    })
}
