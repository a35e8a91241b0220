//! Pods: read as [`PodView`]s; evicted with policy/v1 Eviction and the confirmed uid as
//! precondition; the PodDisruptionBudget that refuses an eviction named.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

use super::super::exec::{Run, Step, Stop};
use super::super::retry;
use super::super::target::{Evicted, PodView, ReadFailure, pdb_refusal};
use super::call::Kube;
use super::drain::holds_gpus;
use super::{api_failure, read_failure};
use crate::cluster::{describe, is_status};

/// A pod as a drain needs it, from the API's object.
pub fn pod_view(p: &Pod) -> PodView {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("");
    PodView {
        namespace: p.metadata.namespace.clone().unwrap_or_default(),
        name: p.metadata.name.clone().unwrap_or_default(),
        uid: p.metadata.uid.clone().unwrap_or_default(),
        owner: crate::cluster::pod_owner(p),
        finished: matches!(phase, "Succeeded" | "Failed"),
        empty_dir: p
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .is_some_and(|v| v.iter().any(|v| v.empty_dir.is_some())),
        holds_gpus: holds_gpus(p),
        deletion: crate::cluster::pod_deletion(p),
    }
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
    Some(pdb_refusal(
        ns,
        pdb.metadata.name.as_deref().unwrap_or_default(),
        st.map_or(0, |s| s.disruptions_allowed),
        st.map_or(0, |s| s.current_healthy),
        st.map_or(0, |s| s.desired_healthy),
    ))
}

/// What an eviction answered 409 Conflict means, from the pod as it is now: only a pod that
/// is missing, or replaced (another uid), is gone; ours, already being deleted, is as good as
/// evicted (wait for it); otherwise the conflict (a failed uid precondition can only mean a
/// new uid, so this is a concurrent write, e.g. to the PDB) is retried.
pub(crate) fn after_conflict(uid: &str, now: Option<&Pod>, message: &str) -> Evicted {
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
pub(super) async fn evict_one(
    k: &Kube,
    run: &mut Run<'_>,
    ns: &str,
    name: &str,
    uid: &str,
) -> Step<Result<Evicted, String>> {
    let api: Api<Pod> = Api::namespaced(k.client.clone(), ns);
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
    let sent = k
        .mutate(run, &what, retry::transient_eviction, || {
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
            match k.call(run, &reread, retry::transient, || api.get_opt(name)).await? {
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
        // Nothing answered through the call's retries: try again later, as a refusal.
        Err(e) if retry::transient_eviction(&e).is_some() => Ok(Evicted::Unanswered(describe(&e))),
        Err(e) => Err(api_failure(&what, &e)),
    })
}

pub(super) async fn node_pods(k: &Kube, run: &mut Run<'_>, node: &str) -> Step<Vec<PodView>> {
    let api: Api<Pod> = Api::all(k.client.clone());
    let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let what = format!("listing the pods on {node}");
    k.call(run, &what, retry::transient, || api.list(&lp))
        .await?
        .map(|l| l.items.iter().map(pod_view).collect())
        .map_err(|e| Stop::Failed(api_failure(&what, &e)))
}

/// One pod now, for the wait until it is gone.
pub(super) async fn pod_now(
    k: &Kube,
    run: &mut Run<'_>,
    ns: &str,
    name: &str,
) -> Step<Result<Option<PodView>, ReadFailure>> {
    let api: Api<Pod> = Api::namespaced(k.client.clone(), ns);
    let what = format!("waiting for {ns}/{name}");
    Ok(k.call(run, &what, retry::transient, || api.get_opt(name))
        .await?
        .map(|p| p.as_ref().map(pod_view))
        .map_err(|e| read_failure(&what, &e)))
}
