//! Evicting pods (policy/v1 Eviction with the confirmed uid as precondition), retrying what a
//! PodDisruptionBudget refuses while naming it, and waiting until each pod is gone.

use std::collections::BTreeMap;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

use super::super::retry;
use super::drain::terminating_now;
use super::run::{Run, Step, Stop};
use super::{api_failure, now_ms};
use crate::cluster::is_status;

/// A pod the drain or reslice must see gone: the uid is the eviction's precondition, and a
/// pod with the same name and another uid is a replacement, not ours.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// Already being deleted, and what keeps it: waited for, never evicted again.
    pub terminating: Option<String>,
}

impl PodRef {
    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

pub(super) fn pod_key(p: &Pod) -> (String, String) {
    (p.metadata.namespace.clone().unwrap_or_default(), p.metadata.name.clone().unwrap_or_default())
}

/// Whether a PDB's selector picks a pod (matchLabels and matchExpressions).
pub fn pdb_selects(pdb: &PodDisruptionBudget, pod_labels: &BTreeMap<String, String>) -> bool {
    let Some(sel) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else { return false };
    let labels_ok = sel.match_labels.iter().flatten().all(|(k, v)| pod_labels.get(k) == Some(v));
    let exprs_ok = sel.match_expressions.iter().flatten().all(|e| {
        let values = e.values.clone().unwrap_or_default();
        let have = pod_labels.get(&e.key);
        match e.operator.as_str() {
            "In" => have.is_some_and(|v| values.contains(v)),
            "NotIn" => have.is_none_or(|v| !values.contains(v)),
            "Exists" => have.is_some(),
            "DoesNotExist" => have.is_none(),
            _ => false,
        }
    });
    // An empty selector selects every pod in the namespace (policy/v1).
    labels_ok && exprs_ok
}

/// "PodDisruptionBudget ml/trainer-pdb allows 0 disruptions now (2 healthy, 2 needed)".
pub(super) async fn blocking_pdb(client: &kube::Client, ns: &str, name: &str) -> Option<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = pods.get_opt(name).await.ok()??;
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    let list = pdbs.list(&ListParams::default()).await.ok()?;
    let pdb = list.items.into_iter().find(|p| pdb_selects(p, &labels))?;
    let st = pdb.status.as_ref();
    Some(format!(
        "PodDisruptionBudget {ns}/{} allows {} disruption{} now ({} healthy, {} needed)",
        pdb.metadata.name.clone().unwrap_or_default(),
        st.map(|s| s.disruptions_allowed).unwrap_or(0),
        if st.map(|s| s.disruptions_allowed) == Some(1) { "" } else { "s" },
        st.map(|s| s.current_healthy).unwrap_or(0),
        st.map(|s| s.desired_healthy).unwrap_or(0),
    ))
}

#[derive(Debug, PartialEq)]
pub(super) enum Evicted {
    Done,
    Gone,
    /// Refused for now, with the HTTP status and what the server said.
    Retry(u16, String),
}

/// What an eviction answered 409 Conflict means, from the pod as it is now: only a pod that
/// is missing, or replaced (another uid), is gone; ours, already being deleted, is as good as
/// evicted (wait for it); otherwise the conflict (a failed uid precondition can only mean a
/// new uid, so this is a concurrent write, e.g. to the PDB) is retried.
pub(super) fn after_conflict(uid: &str, now: Option<&Pod>, message: &str) -> Evicted {
    match now {
        None => Evicted::Gone,
        Some(p) if p.metadata.uid.as_deref() != Some(uid) => Evicted::Gone,
        Some(p) if p.metadata.deletion_timestamp.is_some() => Evicted::Done,
        Some(_) => Evicted::Retry(409, format!("conflict ({message})")),
    }
}

/// One eviction. Repeating it is safe (the uid precondition), so transient failures (5xx
/// but the multiple-PDB 500, a reset, an API Priority and Fairness 429) are retried; a PDB's
/// 429 is an answer, handled by the caller. Recorded as `sending` before it goes out.
pub(super) async fn evict_one(run: &mut Run<'_>, ns: &str, name: &str, uid: &str) -> Step<Result<Evicted, String>> {
    let api: Api<Pod> = Api::namespaced(run.ex.client.clone(), ns);
    // The body kubectl sends (protocols.md §9), with the uid we confirmed as a precondition
    // so a replacement with the same name is never evicted by mistake.
    let body = json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": { "name": name, "namespace": ns },
        "deleteOptions": { "preconditions": { "uid": uid } },
    });
    let what = format!("evicting {ns}/{name}");
    let params = PostParams::default();
    let sent = run
        .mutate(&what, retry::transient_eviction, || {
            api.create_subresource::<Value, Value>("eviction", name, &params, &body)
        })
        .await?;
    Ok(match sent {
        Ok(_) => Ok(Evicted::Done),
        Err(e) if is_status(&e, 404) => Ok(Evicted::Gone),
        // A failed uid precondition says the pod was replaced — or the server met a
        // concurrent write. Only the pod as it is now tells which.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let reread = format!("re-reading {ns}/{name}");
            match run.call(&reread, retry::transient, || api.get_opt(name)).await? {
                Ok(now) => Ok(after_conflict(uid, now.as_ref(), &s.message)),
                Err(e) => Err(api_failure(&reread, &e)),
            }
        }
        Err(e) if is_status(&e, 429) => Ok(Evicted::Retry(
            429,
            match &e {
                kube::Error::Api(s) => s.message.clone(),
                _ => String::new(),
            },
        )),
        Err(kube::Error::Api(s))
            if s.code == 403
                && s.details.as_ref().is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating")) =>
        {
            Ok(Evicted::Retry(403, "its namespace is terminating".into()))
        }
        Err(e) => Err(api_failure(&what, &e)),
    })
}

/// Evicts `pods`, retrying 429s, then waits until each is gone — those already terminating
/// are only waited for. Gone means 404 or a new uid (kubectl); a pod held by a finalizer or
/// a long grace period is waited for until the drain's timeout, which names each pod left
/// and what keeps it.
pub(super) async fn evict_and_wait(run: &mut Run<'_>, pods: Vec<PodRef>) -> Step<u32> {
    let client = run.ex.client.clone();
    // Never past the operation's own deadline: the wait after a drain's second look at the
    // node must not open a fresh window beyond what the preview said.
    let deadline = (Instant::now() + run.ex.opts.drain_timeout).min(run.deadline);
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
        let mut codes: Vec<u16> = Vec::new();
        for p in std::mem::take(&mut pending) {
            let key = p.key();
            match evict_one(run, &p.namespace, &p.name, &p.uid).await? {
                Ok(Evicted::Done) => {
                    run.step(format!("evicted {key}")).await?;
                    evicted.push(p);
                }
                Ok(Evicted::Gone) => run.step(format!("{key} was already gone")).await?,
                Ok(Evicted::Retry(code, msg)) => {
                    let why = if code == 429 {
                        blocking_pdb(&client, &p.namespace, &p.name).await.unwrap_or(msg)
                    } else {
                        msg
                    };
                    reasons.push(format!("{key}: {why}"));
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
        if Instant::now() >= deadline {
            let left: Vec<String> = waiting.iter().map(PodRef::key).collect();
            return Err(Stop::Failed(format!(
                "timed out after {}s with {} not evicted: {}; the node stays cordoned",
                run.ex.opts.drain_timeout.as_secs(),
                crate::ops::count(left.len(), "pod"),
                reasons.join("; ")
            )));
        }
        let codes: Vec<String> = codes.iter().map(u16::to_string).collect();
        run.blocked(format!(
            "eviction refused ({}), retrying every {}s — {}",
            codes.join(", "),
            run.ex.opts.evict_retry.as_secs(),
            reasons.join("; ")
        ))
        .await?;
        run.sleep(run.ex.opts.evict_retry).await?;
        pending = waiting;
    }
    // Wait until each evicted or terminating pod is gone or replaced (kubectl: 404 or a new
    // uid); what keeps each one is read again on every poll.
    let n = evicted.len() as u32;
    let mut watched: Vec<PodRef> = evicted.into_iter().chain(terminating).collect();
    loop {
        let now = now_ms();
        let mut left = Vec::new();
        let mut still = Vec::new();
        for p in std::mem::take(&mut watched) {
            let api: Api<Pod> = Api::namespaced(client.clone(), &p.namespace);
            let what = format!("waiting for {}", p.key());
            match run.call(&what, retry::transient, || api.get_opt(&p.name)).await? {
                Ok(Some(q)) if q.metadata.uid.as_deref() == Some(p.uid.as_str()) => {
                    let why = terminating_now(&q, now).unwrap_or_else(|| "not terminating yet".to_string());
                    left.push(format!("{} ({why})", p.key()));
                    still.push(p);
                }
                Ok(_) if p.terminating.is_some() => run.step(format!("{} is gone", p.key())).await?,
                Ok(_) => {}
                Err(e) => return Err(Stop::Failed(api_failure(&what, &e))),
            }
        }
        watched = still;
        if left.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            return Err(Stop::Failed(format!(
                "timed out after {}s waiting for {} to terminate: {}; the node stays cordoned",
                run.ex.opts.drain_timeout.as_secs(),
                crate::ops::count(left.len(), "pod"),
                left.join("; ")
            )));
        }
        run.blocked(format!("waiting for {} to terminate: {}", crate::ops::count(left.len(), "pod"), left.join("; ")))
            .await?;
        run.sleep(run.ex.opts.poll).await?;
    }
    Ok(n)
}

pub(super) async fn node_pods(run: &mut Run<'_>, node: &str) -> Step<Vec<Pod>> {
    let api: Api<Pod> = Api::all(run.ex.client.clone());
    let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let what = format!("listing the pods on {node}");
    run.call(&what, retry::transient, || api.list(&lp))
        .await?
        .map(|l| l.items)
        .map_err(|e| Stop::Failed(api_failure(&what, &e)))
}
