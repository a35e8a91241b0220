//! Drain planning with kubectl's semantics (protocols.md §9): which pods are evicted,
//! which are already terminating and waited for, which are skipped (DaemonSet, mirror) and
//! which are refused (no controller, emptyDir) unless forced, and which
//! PodDisruptionBudgets will hold evictions back.

use super::{OpKind, OpRequest, Plan, PlanDetail, PlanError};
use crate::model::{Deletion, Fleet, Owner, Phase, Ts};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodAction {
    Evict,
    /// Deleted even though kubectl would refuse: the person forced it.
    ForceDelete(String),
    /// Already being deleted: not evicted again, but the node is not drained until it is
    /// gone (kubectl drain waits for it too). Says what keeps it
    /// (`terminating since 2m, finalizers: example.com/hold`).
    Wait(String),
    Skip(String),
    Refuse(String),
}

impl PodAction {
    /// Whether the pod must be gone before the node counts as drained.
    pub fn must_go(&self) -> bool {
        matches!(self, PodAction::Evict | PodAction::ForceDelete(_) | PodAction::Wait(_))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct DrainPod {
    pub namespace: String,
    pub name: String,
    pub phase: Phase,
    /// Devices it holds now: a finished pod, or one whose containers have stopped, holds
    /// none whatever it asked for.
    pub gpus: u32,
    pub action: PodAction,
    /// The PDB that covers it, with the disruptions it allows right now.
    pub pdb: Option<(String, i32)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DrainPlan {
    pub node: String,
    pub force: bool,
    pub pods: Vec<DrainPod>,
}

impl DrainPlan {
    pub fn to_evict(&self) -> impl Iterator<Item = &DrainPod> {
        self.pods.iter().filter(|p| matches!(p.action, PodAction::Evict | PodAction::ForceDelete(_)))
    }

    /// Pods already terminating: waited for, not evicted.
    pub fn to_wait(&self) -> impl Iterator<Item = &DrainPod> {
        self.pods.iter().filter(|p| matches!(p.action, PodAction::Wait(_)))
    }
}

/// What keeps a pod whose deletion is under way, in the words of the preview, the progress
/// and a timeout: `terminating since 2m, finalizers: example.com/hold; its containers have
/// stopped`. Changes at most once a minute while nothing else changes, so progress that
/// repeats it is not recorded again on every poll.
pub fn terminating_note(d: &Deletion, now: Ts) -> String {
    let mut s = if d.since > 0 && d.since <= now {
        format!("terminating since {}", ago(now - d.since))
    } else {
        "terminating".to_string()
    };
    if !d.finalizers.is_empty() {
        s.push_str(&format!(", finalizers: {}", d.finalizers.join(", ")));
    }
    let grace_over = d.grace_secs.map(|g| d.since.saturating_add(u64::from(g) * 1000) <= now);
    match (d.stopped, d.grace_secs, grace_over) {
        (true, ..) if d.finalizers.is_empty() => s.push_str("; its containers have stopped"),
        (true, ..) => s.push_str("; its containers have stopped, only the finalizers keep it"),
        (false, Some(g), Some(false)) => s.push_str(&format!("; its containers get up to {g}s to stop (grace period)")),
        (false, Some(g), Some(true)) if d.since > 0 => {
            s.push_str(&format!("; still running after its {g}s grace period (is the kubelet of its node up?)"))
        }
        _ => {}
    }
    s
}

/// `<1m`, `2m`, `1h05m`, `3d`: coarse on purpose (see [`terminating_note`]).
fn ago(ms: u64) -> String {
    let m = ms / 60_000;
    match m {
        0 => "<1m".to_string(),
        1..60 => format!("{m}m"),
        60..1440 => format!("{}h{:02}m", m / 60, m % 60),
        _ => format!("{}d", m / 1440),
    }
}

pub(super) fn plan(fleet: &Fleet, node: &str, force: bool, request: OpRequest) -> Result<Plan, PlanError> {
    let id = fleet.node_by_name(node).ok_or_else(|| PlanError::NodeNotFound(node.to_string()))?;
    let n = fleet.node(id).ok_or_else(|| PlanError::NodeNotFound(node.to_string()))?;
    let pods = select_pods(fleet, fleet.pods_on_node(id), force);
    let mut effects = Vec::new();
    let mut warnings = Vec::new();
    let mut blockers = Vec::new();
    if !n.cordoned {
        effects.push(format!("cordon {node}"));
    }
    let evict: Vec<&DrainPod> = pods.iter().filter(|p| p.action == PodAction::Evict).collect();
    let forced: Vec<&DrainPod> = pods.iter().filter(|p| matches!(p.action, PodAction::ForceDelete(_))).collect();
    let waiting: Vec<&DrainPod> = pods.iter().filter(|p| matches!(p.action, PodAction::Wait(_))).collect();
    let gpus: u32 = evict.iter().map(|p| p.gpus).sum();
    effects.push(format!(
        "evict {} ({}) one by one through the Eviction API",
        super::count(evict.len(), "pod"),
        super::count(gpus as usize, "GPU")
    ));
    if !forced.is_empty() {
        let fg: u32 = forced.iter().map(|p| p.gpus).sum();
        effects.push(format!(
            "delete {} ({}) that eviction would refuse, because you forced it",
            super::count(forced.len(), "pod"),
            super::count(fg as usize, "GPU")
        ));
    }
    if evict.len() > 3 {
        let mut by_app: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
        for p in &evict {
            let app = p.name.rsplitn(3, '-').last().unwrap_or(&p.name).to_string();
            *by_app.entry(format!("{}/{app}", p.namespace)).or_default() += 1;
        }
        let parts: Vec<String> = by_app.iter().map(|(a, n)| format!("{n}× {a}")).collect();
        effects.push(format!("  by workload: {}", parts.join(", ")));
    }
    for p in &evict {
        effects.push(format!("  evict {}/{}{}", p.namespace, p.name, held_note(p)));
    }
    for p in &forced {
        let why = match &p.action {
            PodAction::ForceDelete(w) => w.as_str(),
            _ => "",
        };
        effects.push(format!("  DELETE {}/{}{} — {why}; its data is lost", p.namespace, p.name, held_note(p)));
    }
    if !waiting.is_empty() {
        let wg: u32 = waiting.iter().map(|p| p.gpus).sum();
        effects.push(format!(
            "wait for {} ({}) already terminating: not evicted again, but the node is drained only once they are gone",
            super::count(waiting.len(), "pod"),
            super::count(wg as usize, "GPU")
        ));
    }
    for p in &waiting {
        if let PodAction::Wait(why) = &p.action {
            effects.push(format!("  wait for {}/{}{}: {why}", p.namespace, p.name, held_note(p)));
        }
    }
    let skipped = pods.iter().filter(|p| matches!(p.action, PodAction::Skip(_))).count();
    if skipped > 0 {
        effects.push(format!("leave {} in place (DaemonSet or mirror)", super::count(skipped, "pod")));
    }
    effects.push(if waiting.is_empty() {
        "wait until every evicted pod is gone".to_string()
    } else {
        "wait until every evicted and every terminating pod is gone".to_string()
    });
    let mut seen = Vec::new();
    for p in &evict {
        if let Some((pdb, allowed)) = &p.pdb
            && !seen.contains(pdb)
        {
            seen.push(pdb.clone());
            let covered = evict.iter().filter(|q| q.pdb.as_ref().map(|x| &x.0) == Some(pdb)).count();
            if (*allowed as usize) < covered {
                warnings.push(format!(
                    "PodDisruptionBudget {}/{pdb} allows {allowed} disruption{} now for {covered} pods here: evictions will wait (HTTP 429) until replacements are ready",
                    p.namespace,
                    if *allowed == 1 { "" } else { "s" }
                ));
            }
        }
    }
    for p in pods.iter() {
        if let PodAction::Refuse(why) = &p.action {
            blockers.push(format!("{}/{}: {why}", p.namespace, p.name));
        }
    }
    if !blockers.is_empty() {
        blockers
            .push("press f to force: those pods are deleted, not evicted, and their local data is lost".to_string());
    }
    warnings.extend(finalizer_warnings(fleet, &waiting));
    if !n.ready {
        warnings.push(format!("{node} is NotReady: evicted pods may hang in Terminating until it returns"));
    }
    if evict.is_empty() && forced.is_empty() && waiting.is_empty() && blockers.is_empty() {
        warnings.push("no pods to evict: this only cordons the node".to_string());
    }
    Ok(Plan {
        request,
        kind: OpKind::Drain,
        title: format!("Drain node {node}"),
        target: node.to_string(),
        effects,
        warnings,
        blockers,
        detail: PlanDetail::Drain(DrainPlan { node: node.to_string(), force, pods }),
    })
}

/// ` (2 GPUs)`, ` (Succeeded: holds nothing)`, or nothing for a pod without devices.
fn held_note(p: &DrainPod) -> String {
    match p.gpus {
        0 if p.phase.finished() => format!(" ({}: holds nothing)", p.phase.as_str()),
        0 => String::new(),
        1 => " (1 GPU)".to_string(),
        n => format!(" ({n} GPUs)"),
    }
}

/// A finalizer keeps a pod after its containers stop, for as long as its owner wants: say
/// who must act, since the drain cannot end before.
pub(super) fn finalizer_warnings(fleet: &Fleet, waiting: &[&DrainPod]) -> Vec<String> {
    let mut out = Vec::new();
    for p in waiting {
        let Some(d) =
            fleet.pod_by_name(&p.namespace, &p.name).and_then(|id| fleet.pod(id)).and_then(|q| q.deletion.as_deref())
        else {
            continue;
        };
        if !d.finalizers.is_empty() {
            out.push(format!(
                "{}/{} stays until its finalizer{} {} {} removed (by the controller that owns {}): the drain waits for that",
                p.namespace,
                p.name,
                if d.finalizers.len() == 1 { "" } else { "s" },
                d.finalizers.join(", "),
                if d.finalizers.len() == 1 { "is" } else { "are" },
                if d.finalizers.len() == 1 { "it" } else { "them" },
            ));
        }
    }
    out
}

/// What `kubectl drain --ignore-daemonsets` does with a pod, in kubectl's order
/// (protocols.md §9); `force` is `--force --delete-emptydir-data`. One rule for the preview
/// (from the fleet) and for the executor (from the API, just before it evicts).
///
/// `terminating` says what keeps a pod whose deletion is under way ([`terminating_note`]):
/// kubectl does not evict it again but waits for it, unless it is a DaemonSet or mirror pod.
pub fn kubectl_action(
    terminating: Option<String>,
    owner: Owner,
    finished: bool,
    empty_dir: bool,
    force: bool,
) -> PodAction {
    if owner == Owner::DaemonSet && !finished {
        PodAction::Skip("DaemonSet-managed (ignored like --ignore-daemonsets)".into())
    } else if owner == Owner::Mirror {
        PodAction::Skip("mirror pod (static, managed by the kubelet)".into())
    } else if let Some(why) = terminating {
        PodAction::Wait(why)
    } else if finished {
        PodAction::Evict
    } else if empty_dir {
        let why = "uses emptyDir local storage".to_string();
        if force { PodAction::ForceDelete(why) } else { PodAction::Refuse(why + " (kubectl: --delete-emptydir-data)") }
    } else if owner == Owner::None {
        let why = "declares no controller, so nothing will recreate it".to_string();
        if force { PodAction::ForceDelete(why) } else { PodAction::Refuse(why + " (kubectl: --force)") }
    } else {
        PodAction::Evict
    }
}

pub(super) fn select_pods(fleet: &Fleet, pods: &[crate::model::PodId], force: bool) -> Vec<DrainPod> {
    let mut out = Vec::new();
    for &pid in pods {
        let Some(p) = fleet.pod(pid) else { continue };
        let pdb = fleet.pdb_for_pod(p).map(|d| (fleet.str_of(d.name).to_string(), d.disruptions_allowed));
        let deletion = p.deletion.as_deref();
        let terminating = (p.phase == Phase::Terminating || deletion.is_some())
            .then(|| deletion.map_or_else(|| "terminating".to_string(), |d| terminating_note(d, fleet.now)));
        let action = kubectl_action(terminating, p.owner, p.phase.finished(), p.empty_dir, force);
        // What it holds, not what it asked for: finished pods and stopped containers hold nothing.
        let holds = !p.phase.finished() && !deletion.is_some_and(|d| d.stopped);
        out.push(DrainPod {
            namespace: fleet.str_of(p.namespace).to_string(),
            name: p.name.to_string(),
            phase: p.phase,
            gpus: if holds { p.gpus as u32 + p.mig_count() + p.dra_count() } else { 0 },
            action,
            pdb,
        });
    }
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out
}
