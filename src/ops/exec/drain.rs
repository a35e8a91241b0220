//! Drain: cordon, re-read the node's pods and re-apply kubectl's filters, evict what the
//! person confirmed, wait until it is gone, then look at the node once more. The pod steps
//! are shared with the reslice.

use super::super::target::{Evicted, PodRef, PodView, Target};
use super::super::{DrainPlan, PodAction};
use super::{Run, Step, Stop, cordon_step};

/// Compares the node's pods now with what the person confirmed (the pods to evict and those
/// already terminating). Returns the pods that must go — to evict, or to wait for when they
/// are terminating already — and what to tell the person about the difference; an error
/// when a pod that would need forcing appeared (kubectl stops before evicting anything in
/// that case too). A terminating pod is waited for even if the preview did not show it.
pub fn reconcile(
    confirmed: &[(String, String)],
    pods: &[PodView],
    force: bool,
    now: u64,
) -> Result<(Vec<PodRef>, Vec<String>), String> {
    let mut evict = Vec::new();
    let mut notes = Vec::new();
    let mut refused = Vec::new();
    for p in pods {
        let (ns, name) = (p.namespace.clone(), p.name.clone());
        let uid = p.uid.clone();
        let wanted = confirmed.iter().any(|(n, m)| *n == ns && *m == name);
        match p.action(force, now) {
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
        if !pods.iter().any(|p| p.namespace == *ns && p.name == *name) {
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

/// Of a drained node's pods: those still terminating (to wait for) and those kubectl would
/// evict that still hold GPUs there (`ns/name`): the node is not drained while either exists.
pub fn leftovers(pods: &[PodView], force: bool, now: u64) -> (Vec<PodRef>, Vec<String>) {
    let mut terminating = Vec::new();
    let mut holding = Vec::new();
    for p in pods {
        match p.action(force, now) {
            PodAction::Wait(why) => terminating.push(PodRef {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                uid: p.uid.clone(),
                terminating: Some(why),
            }),
            PodAction::Evict | PodAction::ForceDelete(_) | PodAction::Refuse(_) if p.holds_gpus => {
                holding.push(p.key())
            }
            _ => {}
        }
    }
    (terminating, holding)
}

pub(super) async fn drain_op<T: Target>(t: &mut T, run: &mut Run<'_>, d: &DrainPlan) -> Step<String> {
    let node = d.node.as_str();
    cordon_step(t, run, node).await?;
    let confirmed: Vec<(String, String)> =
        d.pods.iter().filter(|p| p.action.must_go()).map(|p| (p.namespace.clone(), p.name.clone())).collect();
    let pods = t.node_pods(run, node).await?;
    let (evict, notes) = reconcile(&confirmed, &pods, d.force, t.wall_ms()).map_err(Stop::Failed)?;
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
    let n = evict_and_wait(t, run, evict).await?;
    // What the cluster says now, not what we did: pods that started terminating meanwhile
    // are waited for too, and a pod still holding a GPU here means the node is not drained.
    let (waited_more, holding) = settle(t, run, node, d.force).await?;
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
pub(super) async fn settle<T: Target>(
    t: &mut T,
    run: &mut Run<'_>,
    node: &str,
    force: bool,
) -> Step<(usize, Vec<String>)> {
    let pods = t.node_pods(run, node).await?;
    let (terminating, holding) = leftovers(&pods, force, t.wall_ms());
    let n = terminating.len();
    if n > 0 {
        run.progress.total += n as u32;
        evict_and_wait(t, run, terminating).await?;
    }
    Ok((n, holding))
}

/// Evicts `pods`, retrying refusals (a PDB's 429), then waits until each is gone — those
/// already terminating are only waited for. Gone means missing or a new uid (kubectl); a pod
/// held by a finalizer or a long grace period is waited for until the drain's timeout, which
/// names each pod left and what keeps it.
pub(super) async fn evict_and_wait<T: Target>(t: &mut T, run: &mut Run<'_>, pods: Vec<PodRef>) -> Step<u32> {
    // Never past the operation's own deadline: the wait after a drain's second look at the
    // node must not open a fresh window beyond what the preview said.
    let timeout = run.opts.drain_timeout;
    let deadline = (t.clock_ms() + timeout.as_millis() as u64).min(run.deadline_ms);
    let (terminating, mut pending): (Vec<PodRef>, Vec<PodRef>) =
        pods.into_iter().partition(|p| p.terminating.is_some());
    for p in &terminating {
        let why = p.terminating.as_deref().unwrap_or("terminating");
        run.log(format!("{} is already terminating ({why}): not evicting it, waiting until it is gone", p.key()))
            .await?;
    }
    let mut evicted: Vec<PodRef> = Vec::new();
    while !pending.is_empty() {
        run.check_cancel()?;
        let mut waiting = Vec::new();
        let mut reasons = Vec::new();
        // What the refusals were, for the blocked line: HTTP codes, or "no answer".
        let mut codes: Vec<String> = Vec::new();
        for p in std::mem::take(&mut pending) {
            let key = p.key();
            match t.evict(run, &p).await? {
                Ok(Evicted::Done) => {
                    run.step(format!("evicted {key}")).await?;
                    evicted.push(p);
                }
                Ok(Evicted::Gone) => run.step(format!("{key} was already gone")).await?,
                Ok(Evicted::Unanswered(why)) => {
                    reasons.push(format!("{key}: no answer ({why})"));
                    if !codes.iter().any(|c| c == "no answer") {
                        codes.push("no answer".into());
                    }
                    waiting.push(p);
                }
                Ok(Evicted::Retry(code, msg)) => {
                    let why =
                        if code == 429 { t.blocking_pdb(&p.namespace, &p.name).await.unwrap_or(msg) } else { msg };
                    reasons.push(format!("{key}: {why}"));
                    let code = code.to_string();
                    if !codes.contains(&code) {
                        codes.push(code);
                    }
                    waiting.push(p);
                }
                Err(e) => {
                    return Err(Stop::Failed(format!(
                        "{e}; {} evicted so far, the node stays cordoned",
                        crate::ops::count(evicted.len(), "pod")
                    )));
                }
            }
        }
        if waiting.is_empty() {
            break;
        }
        if t.clock_ms() >= deadline {
            let left: Vec<String> = waiting.iter().map(PodRef::key).collect();
            return Err(Stop::Failed(format!(
                "timed out after {}s with {} not evicted: {}; the node stays cordoned",
                timeout.as_secs(),
                crate::ops::count(left.len(), "pod"),
                reasons.join("; ")
            )));
        }
        run.blocked(format!(
            "eviction refused ({}), retrying every {}s — {}",
            codes.join(", "),
            run.opts.evict_retry.as_secs(),
            reasons.join("; ")
        ))
        .await?;
        run.sleep(t, run.opts.evict_retry).await?;
        pending = waiting;
    }
    // Wait until each evicted or terminating pod is gone or replaced (kubectl: missing or a
    // new uid); what keeps each one is read again on every poll.
    let n = evicted.len() as u32;
    let mut watched: Vec<PodRef> = evicted.into_iter().chain(terminating).collect();
    loop {
        let now = t.wall_ms();
        let mut left = Vec::new();
        let mut still = Vec::new();
        for p in std::mem::take(&mut watched) {
            match t.pod(run, &p.namespace, &p.name).await? {
                Ok(Some(q)) if q.uid == p.uid => {
                    let why = q.terminating(now).unwrap_or_else(|| "not terminating yet".to_string());
                    left.push(format!("{} ({why})", p.key()));
                    still.push(p);
                }
                Ok(_) if p.terminating.is_some() => run.step(format!("{} is gone", p.key())).await?,
                Ok(_) => {}
                // A look that failed through its retries is a missed look: keep waiting.
                Err(f) if f.transient => {
                    left.push(format!("{} (not read: {})", p.key(), f.why));
                    still.push(p);
                }
                Err(f) => return Err(Stop::Failed(f.message)),
            }
        }
        watched = still;
        if left.is_empty() {
            break;
        }
        if t.clock_ms() >= deadline {
            return Err(Stop::Failed(format!(
                "timed out after {}s waiting for {} to terminate: {}; the node stays cordoned",
                timeout.as_secs(),
                crate::ops::count(left.len(), "pod"),
                left.join("; ")
            )));
        }
        run.blocked(format!("waiting for {} to terminate: {}", crate::ops::count(left.len(), "pod"), left.join("; ")))
            .await?;
        run.sleep(t, run.opts.poll).await?;
    }
    Ok(n)
}
