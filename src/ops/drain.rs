//! Drain planning with kubectl's semantics (protocols.md §9): which pods are evicted,
//! which are skipped (DaemonSet, mirror, finished) and which are refused (no controller,
//! emptyDir) unless forced, and which PodDisruptionBudgets will hold evictions back.

use super::{OpKind, OpRequest, Plan, PlanDetail, PlanError};
use crate::model::{Fleet, Owner, Phase};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodAction {
    Evict,
    /// Deleted even though kubectl would refuse: the person forced it.
    ForceDelete(String),
    Skip(String),
    Refuse(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct DrainPod {
    pub namespace: String,
    pub name: String,
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
        effects.push(format!("  evict {}/{}{}", p.namespace, p.name, gpu_note(p.gpus)));
    }
    for p in &forced {
        let why = match &p.action {
            PodAction::ForceDelete(w) => w.as_str(),
            _ => "",
        };
        effects.push(format!("  DELETE {}/{}{} — {why}; its data is lost", p.namespace, p.name, gpu_note(p.gpus)));
    }
    let skipped = pods.iter().filter(|p| matches!(p.action, PodAction::Skip(_))).count();
    if skipped > 0 {
        effects.push(format!("leave {skipped} pods in place (DaemonSet, mirror or finished)"));
    }
    effects.push("wait until every evicted pod is gone".to_string());
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
    if !n.ready {
        warnings.push(format!("{node} is NotReady: evicted pods may hang in Terminating until it returns"));
    }
    if evict.is_empty() && forced.is_empty() && blockers.is_empty() {
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

fn gpu_note(gpus: u32) -> String {
    match gpus {
        0 => String::new(),
        1 => " (1 GPU)".to_string(),
        n => format!(" ({n} GPUs)"),
    }
}

/// kubectl's filters, in kubectl's order: deleted → DaemonSet → mirror → local storage →
/// unreplicated. Finished pods are always deletable.
/// What `kubectl drain --ignore-daemonsets` does with a pod, in kubectl's order
/// (protocols.md §9); `force` is `--force --delete-emptydir-data`. One rule for the preview
/// (from the fleet) and for the executor (from the API, just before it evicts).
pub fn kubectl_action(terminating: bool, owner: Owner, finished: bool, empty_dir: bool, force: bool) -> PodAction {
    if terminating {
        PodAction::Skip("already terminating".into())
    } else if owner == Owner::DaemonSet && !finished {
        PodAction::Skip("DaemonSet-managed (ignored like --ignore-daemonsets)".into())
    } else if owner == Owner::Mirror {
        PodAction::Skip("mirror pod (static, managed by the kubelet)".into())
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
        let pdb = fleet.pdb_for_pod(p).map(|d| (fleet.s(d.name).to_string(), d.disruptions_allowed));
        let action = kubectl_action(p.phase == Phase::Terminating, p.owner, p.phase.finished(), p.empty_dir, force);
        out.push(DrainPod {
            namespace: fleet.s(p.namespace).to_string(),
            name: p.name.to_string(),
            gpus: p.gpus as u32 + p.mig_count() + p.dra_count(),
            action,
            pdb,
        });
    }
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out
}
