//! Drain: cordon, re-list the node's pods and re-apply kubectl's filters, evict what the
//! person confirmed, wait until it is gone, then look at the node once more.

use k8s_openapi::api::core::v1::Pod;

use super::super::{DrainPlan, PodAction};
use super::evict::{PodRef, evict_and_wait, node_pods, pod_key};
use super::node::cordon_step;
use super::now_ms;
use super::run::{Run, Step, Stop};
use crate::cluster::labels;

/// kubectl's filters ([`crate::ops::drain::kubectl_action`]) on a pod as the API has it now.
pub fn drain_action(p: &Pod, force: bool) -> PodAction {
    drain_action_at(p, force, now_ms())
}

/// [`drain_action`] at `now` (ms since the epoch), for the notes on terminating pods.
pub fn drain_action_at(p: &Pod, force: bool, now: u64) -> PodAction {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("");
    let empty_dir =
        p.spec.as_ref().and_then(|s| s.volumes.as_ref()).is_some_and(|v| v.iter().any(|v| v.empty_dir.is_some()));
    super::super::drain::kubectl_action(
        terminating_now(p, now),
        crate::cluster::pod_owner(p),
        matches!(phase, "Succeeded" | "Failed"),
        empty_dir,
        force,
    )
}

/// What keeps a pod whose deletion is under way, or `None` if none is.
pub(super) fn terminating_now(p: &Pod, now: u64) -> Option<String> {
    crate::cluster::pod_deletion(p).map(|d| super::super::terminating_note(&d, now))
}

/// Whether a pod asks for GPUs (whole, MIG or DRA claims) and still holds them: neither
/// finished nor stopped by its kubelet.
pub fn holds_gpus(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return false;
    }
    let Some(spec) = p.spec.as_ref() else { return false };
    let extended = spec.containers.iter().chain(spec.init_containers.iter().flatten()).any(|c| {
        let r = c.resources.as_ref();
        r.and_then(|r| r.limits.as_ref()).into_iter().chain(r.and_then(|r| r.requests.as_ref())).flatten().any(
            |(k, v)| (k == labels::GPU_RESOURCE || k.starts_with(labels::MIG_RESOURCE_PREFIX)) && v.0.trim() != "0",
        )
    });
    extended || spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty())
}

/// Compares the node's pods now with what the person confirmed (the pods to evict and those
/// already terminating). Returns the pods that must go — to evict, or to wait for when they
/// are terminating already — and what to tell the person about the difference; an error
/// when a pod that would need forcing appeared (kubectl stops before evicting anything in
/// that case too). A terminating pod is waited for even if the preview did not show it.
pub fn reconcile(
    confirmed: &[(String, String)],
    pods: &[Pod],
    force: bool,
) -> Result<(Vec<PodRef>, Vec<String>), String> {
    let now = now_ms();
    let mut evict = Vec::new();
    let mut notes = Vec::new();
    let mut refused = Vec::new();
    for p in pods {
        let (ns, name) = pod_key(p);
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let wanted = confirmed.iter().any(|(n, m)| *n == ns && *m == name);
        match drain_action_at(p, force, now) {
            PodAction::Evict | PodAction::ForceDelete(_) if wanted => {
                evict.push(PodRef { namespace: ns, name, uid, terminating: None })
            }
            PodAction::Evict | PodAction::ForceDelete(_) => notes
                .push(format!("{ns}/{name} arrived after the preview and is left in place; drain again to move it")),
            PodAction::Wait(why) => {
                if !wanted {
                    notes.push(format!("{ns}/{name} is terminating ({why}); waiting for it too"));
                }
                evict.push(PodRef { namespace: ns, name, uid, terminating: Some(why) });
            }
            PodAction::Refuse(why) => refused.push(format!("{ns}/{name} {why}")),
            PodAction::Skip(_) => {}
        }
    }
    for (ns, name) in confirmed {
        if !pods.iter().any(|p| pod_key(p) == (ns.clone(), name.clone())) {
            notes.push(format!("{ns}/{name} is already gone"));
        }
    }
    if !refused.is_empty() {
        return Err(format!(
            "the node now has pods eviction would refuse: {}; nothing was evicted (drain again to see them, f forces)",
            refused.join("; ")
        ));
    }
    Ok((evict, notes))
}

pub(super) async fn drain_op(run: &mut Run<'_>, d: &DrainPlan) -> Step<String> {
    let node = d.node.as_str();
    cordon_step(run, node).await?;
    let confirmed: Vec<(String, String)> =
        d.pods.iter().filter(|p| p.action.must_go()).map(|p| (p.namespace.clone(), p.name.clone())).collect();
    let pods = node_pods(run, node).await?;
    let (evict, notes) = reconcile(&confirmed, &pods, d.force).map_err(Stop::Failed)?;
    let mut late = 0;
    for n in notes {
        late += usize::from(n.contains("arrived after the preview"));
        run.log(n).await?;
    }
    // Pods that vanished before their eviction still count as steps of the plan.
    for _ in evict.len()..confirmed.len() {
        run.progress.skip();
    }
    let waited = evict.iter().filter(|p| p.terminating.is_some()).count();
    let n = evict_and_wait(run, evict).await?;
    // What the cluster says now, not what we did: pods that started terminating meanwhile
    // are waited for too, and a pod still holding a GPU here means the node is not drained.
    let (waited_more, holding) = settle(run, node, d.force).await?;
    let skipped = d.pods.iter().filter(|p| matches!(p.action, PodAction::Skip(_))).count();
    if !holding.is_empty() {
        return Err(Stop::Failed(format!(
            "{node} is not drained: {} still hold{} GPUs there ({}) — drain again to move them; the node stays cordoned",
            crate::ops::count(holding.len(), "pod"),
            if holding.len() == 1 { "s" } else { "" },
            holding.join(", ")
        )));
    }
    run.step(format!("every evicted pod is gone from {node}")).await?;
    let mut msg = format!("{node} drained: {} evicted", crate::ops::count(n as usize, "pod"));
    if waited + waited_more > 0 {
        msg.push_str(&format!(", {} already terminating waited for", crate::ops::count(waited + waited_more, "pod")));
    }
    if skipped > 0 {
        msg.push_str(&format!(", {skipped} left in place (DaemonSet or mirror)"));
    }
    if late > 0 {
        msg.push_str(&format!("; {} arrived after the preview and stayed", crate::ops::count(late, "pod")));
    }
    Ok(msg)
}

/// Reads the node's pods once more after the waits: waits for any that started terminating
/// meanwhile, and returns how many those were and the pods that kubectl would evict and that
/// still hold GPUs on the node (arrived after the preview).
pub(super) async fn settle(run: &mut Run<'_>, node: &str, force: bool) -> Step<(usize, Vec<String>)> {
    let (terminating, holding) = leftovers(&node_pods(run, node).await?, force, now_ms());
    let n = terminating.len();
    if n > 0 {
        run.progress.total += n as u32;
        evict_and_wait(run, terminating).await?;
    }
    Ok((n, holding))
}

/// Of a drained node's pods: those still terminating (to wait for) and those kubectl would
/// evict that still hold GPUs there (`ns/name`): the node is not drained while either exists.
pub fn leftovers(pods: &[Pod], force: bool, now: u64) -> (Vec<PodRef>, Vec<String>) {
    let mut terminating = Vec::new();
    let mut holding = Vec::new();
    for p in pods {
        let (ns, name) = pod_key(p);
        match drain_action_at(p, force, now) {
            PodAction::Wait(why) => terminating.push(PodRef {
                namespace: ns,
                name,
                uid: p.metadata.uid.clone().unwrap_or_default(),
                terminating: Some(why),
            }),
            PodAction::Evict | PodAction::ForceDelete(_) | PodAction::Refuse(_) if holds_gpus(p) => {
                holding.push(format!("{ns}/{name}"))
            }
            _ => {}
        }
    }
    (terminating, holding)
}
