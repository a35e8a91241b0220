//! Quota edits: a ResourceQuota's hard limit, or a Kueue ClusterQueue's nominal, borrowing
//! or lending quota, written only over the resourceVersion the preview showed.

use kube::api::{Api, Patch};
use serde_json::{Value, json};

use super::super::exec::{Run, Step, Stop};
use super::super::retry;
use super::super::{QuotaField, QuotaPlan};
use super::call::Kube;
use super::{api_failure, pp};
use crate::cluster::{describe, is_status, labels};
use crate::model::QuotaSourceSpec;

// ---------- quota ----------

pub(super) fn quantity_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "unset".into(),
    }
}

pub(super) fn conflict(what: &str, resource: &str, expected: &str, now_version: &str, now_value: &str) -> Stop {
    Stop::Failed(format!(
        "conflict: {what} changed since the preview (version {expected} → {now_version}); {resource} is now {now_value}. Nothing was overwritten — review the new value and edit again"
    ))
}

/// Writes the quota over the version the preview showed. Returns the step's line and the
/// outcome.
pub(super) async fn quota_op(k: &Kube, run: &mut Run<'_>, q: &QuotaPlan) -> Step<(String, String)> {
    match &q.key.source {
        QuotaSourceSpec::ResourceQuota { namespace, name } => {
            let what = format!("ResourceQuota {namespace}/{name}");
            if q.key.field != QuotaField::Hard {
                return Err(Stop::Failed(format!("{what} has no {}; nothing was changed", q.key.field.kueue_name())));
            }
            let api: Api<k8s_openapi::api::core::v1::ResourceQuota> = Api::namespaced(k.client.clone(), namespace);
            let read = async |run: &mut Run<'_>| match k
                .call(run, &format!("reading {what}"), retry::transient, || api.get_opt(name))
                .await?
            {
                Ok(Some(rq)) => Ok(rq),
                Ok(None) => Err(Stop::Failed(format!("{what} is gone from the cluster; nothing was changed"))),
                Err(e) => Err(Stop::Failed(api_failure(&format!("reading {what}"), &e))),
            };
            let value_of = |rq: &k8s_openapi::api::core::v1::ResourceQuota| {
                rq.spec
                    .as_ref()
                    .and_then(|s| s.hard.as_ref())
                    .and_then(|h| h.get(&q.key.resource))
                    .map(|v| v.0.clone())
                    .unwrap_or_else(|| "unset".into())
            };
            let rq = read(run).await.map_err(nothing_changed)?;
            let version = rq.metadata.resource_version.clone().unwrap_or_default();
            if version != q.expected_version {
                return Err(conflict(&what, &q.key.resource, &q.expected_version, &version, &value_of(&rq)));
            }
            run.check_cancel()?;
            // The resourceVersion in the patch is a precondition: the server answers 409
            // if the object moved on, and nothing is written.
            let patch = json!({
                "metadata": { "resourceVersion": q.expected_version },
                "spec": { "hard": { q.key.resource.clone(): q.new.to_string() } },
            });
            // Retrying it is safe: a retry after a write that landed meets 409, and then the
            // value read back tells our write from someone else's.
            let (params, body) = (pp(), Patch::Merge(&patch));
            let sent = k
                .mutate(run, &format!("patching {what}"), retry::transient, || api.patch(name, &params, &body))
                .await?;
            match sent {
                Ok(_) => {}
                Err(e) if is_status(&e, 409) => {
                    let now = read(run).await?;
                    let v = now.metadata.resource_version.clone().unwrap_or_default();
                    if value_of(&now) != q.new.to_string() {
                        return Err(conflict(&what, &q.key.resource, &q.expected_version, &v, &value_of(&now)));
                    }
                    run.log(format!("{what} already has {} = {} (an earlier try landed)", q.key.resource, q.new))
                        .await?;
                }
                Err(e) => {
                    let check = format!("kubectl -n {namespace} get resourcequota {name} -o yaml");
                    return Err(Stop::Failed(write_failure(
                        &format!("patching {what}"),
                        &e,
                        &check,
                        &q.expected_version,
                    )));
                }
            }
            let old = super::super::shown(q.old);
            Ok((
                format!("{what}: {} {old} → {}", q.key.resource, q.new),
                format!("{} quota of {} is {} (was {old})", q.key.resource, q.tenant, q.new),
            ))
        }
        QuotaSourceSpec::ClusterQueue { queue, flavor } => {
            let what = format!("ClusterQueue {queue}");
            let field = q.key.field.kueue_name();
            let ar = kueue_cluster_queues(&k.client).await?;
            let api: Api<kube::api::DynamicObject> = Api::all_with(k.client.clone(), &ar);
            let value_of = |o: &kube::api::DynamicObject| {
                cq_entry(&o.data, flavor, &q.key.resource)
                    .map(|s| quantity_text(s.get(field)))
                    .unwrap_or_else(|| "gone".into())
            };
            let obj = match k.call(run, &format!("reading {what}"), retry::transient, || api.get_opt(queue)).await? {
                Ok(Some(o)) => o,
                Ok(None) => return Err(Stop::Failed(format!("{what} is gone from the cluster; nothing was changed"))),
                Err(e) => return Err(nothing_changed(Stop::Failed(api_failure(&format!("reading {what}"), &e)))),
            };
            let version_now = obj.metadata.resource_version.clone().unwrap_or_default();
            let current = value_of(&obj);
            if version_now != q.expected_version {
                return Err(conflict(&what, &q.key.resource, &q.expected_version, &version_now, &current));
            }
            let Some(path) = cq_path(&obj.data, flavor, &q.key.resource) else {
                return Err(Stop::Failed(format!(
                    "{what} has no {} in flavor {flavor} any more; nothing was changed",
                    q.key.resource
                )));
            };
            run.check_cancel()?;
            // A JSON patch of the one field. Its first operation sets the resourceVersion the
            // preview showed: that is a precondition, so if the queue moved on the server
            // answers 409 and writes nothing (the indexes in the path were read at that
            // version too). `add` sets the field whether it was there or not.
            let ops = json!([
                { "op": "replace", "path": "/metadata/resourceVersion", "value": q.expected_version },
                { "op": "add", "path": format!("{path}/{field}"), "value": q.new.to_string() },
            ]);
            let patch = serde_json::from_value(ops)
                .map_err(|e| Stop::Failed(format!("{what}: building the patch: {e}; nothing was changed")))?;
            // Retrying it is safe: a retry after a write that landed meets 409, and then the
            // value read back tells our write from someone else's.
            let (params, body) = (pp(), Patch::<()>::Json(patch));
            match k
                .mutate(run, &format!("patching {what}"), retry::transient, || api.patch(queue, &params, &body))
                .await?
            {
                Ok(_) => {}
                Err(e) if is_status(&e, 409) => {
                    let reread =
                        k.call(run, &format!("reading {what}"), retry::transient, || api.get_opt(queue)).await?;
                    let (v, val) = match reread {
                        Ok(Some(o)) => (o.metadata.resource_version.clone().unwrap_or_default(), value_of(&o)),
                        Ok(None) => ("(deleted)".into(), "gone".into()),
                        // The write met a conflict, and what the queue holds now could not be
                        // read: say so, rather than call it deleted.
                        Err(e) => {
                            return Err(Stop::Failed(format!(
                                "{what} changed since the preview (the write met a conflict; nothing of ours was \
                                 written), and reading it again failed: {}; check with `kubectl get clusterqueue \
                                 {queue} -o yaml`",
                                describe(&e)
                            )));
                        }
                    };
                    if val != q.new.to_string() {
                        return Err(conflict(&what, &q.key.resource, &q.expected_version, &v, &val));
                    }
                    run.log(format!("{what} already has {field} = {} (an earlier try landed)", q.new)).await?;
                }
                Err(e) => {
                    let check = format!("kubectl get clusterqueue {queue} -o yaml");
                    return Err(Stop::Failed(write_failure(
                        &format!("patching {what}"),
                        &e,
                        &check,
                        &q.expected_version,
                    )));
                }
            }
            let old = super::super::shown(q.old);
            Ok((
                format!("{what} flavor {flavor}: {} {field} {old} → {}", q.key.resource, q.new),
                format!("{} {field} of {queue} ({flavor}) is {} (was {old})", q.key.resource, q.new),
            ))
        }
    }
}

/// Where Kueue serves ClusterQueues: v1beta2 (storage since v0.16), else v1beta1.
pub(super) async fn kueue_cluster_queues(client: &kube::Client) -> Step<kube::api::ApiResource> {
    let mut last = String::new();
    for version in ["v1beta2", "v1beta1"] {
        let gvk = kube::api::GroupVersionKind::gvk(labels::KUEUE_GROUP, version, "ClusterQueue");
        match kube::discovery::pinned_kind(client, &gvk).await {
            Ok((ar, _)) => return Ok(ar),
            Err(e) => last = describe(&e),
        }
    }
    Err(Stop::Failed(format!(
        "Kueue's ClusterQueue API (kueue.x-k8s.io v1beta2 or v1beta1) is not served here ({last}); nothing was changed"
    )))
}

/// A failure before the write: say that nothing was changed.
fn nothing_changed(s: Stop) -> Stop {
    match s {
        Stop::Failed(m) if !m.contains("nothing was changed") => Stop::Failed(format!("{m}; nothing was changed")),
        s => s,
    }
}

/// A conditional write that ended without an answer (the API server or etcd did not
/// answer in time, the connection broke) may still land after we stopped waiting: say so,
/// rather than "failed", and how to check. A rerun cannot write twice: it is conditional on
/// the version the preview showed.
fn write_failure(what: &str, e: &kube::Error, check: &str, version: &str) -> String {
    if retry::transient(e).is_none() {
        return api_failure(what, e);
    }
    format!(
        "{}; the API server gave no answer, so whether the change landed is unknown: check with `{check}`. \
         Running it again is safe: it is conditional on version {version}, so it cannot overwrite a change made since",
        api_failure(what, e)
    )
}

/// The `resources[]` entry of `flavor` / `resource` in a ClusterQueue's JSON.
pub(super) fn cq_entry<'a>(data: &'a Value, flavor: &str, resource: &str) -> Option<&'a Value> {
    data.pointer(&cq_path(data, flavor, resource)?)
}

/// Where that entry is, as a JSON pointer (`/spec/resourceGroups/0/flavors/1/resources/0`).
pub(super) fn cq_path(data: &Value, flavor: &str, resource: &str) -> Option<String> {
    let groups = data.get("spec")?.get("resourceGroups")?.as_array()?;
    for (gi, g) in groups.iter().enumerate() {
        let Some(flavors) = g.get("flavors").and_then(|f| f.as_array()) else { continue };
        for (fi, f) in flavors.iter().enumerate() {
            if f.get("name").and_then(|n| n.as_str()) != Some(flavor) {
                continue;
            }
            let Some(resources) = f.get("resources").and_then(|r| r.as_array()) else { continue };
            for (ri, r) in resources.iter().enumerate() {
                if r.get("name").and_then(|n| n.as_str()) == Some(resource) {
                    return Some(format!("/spec/resourceGroups/{gi}/flavors/{fi}/resources/{ri}"));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status::failure(message, "").with_code(code)))
    }

    #[test]
    fn a_write_without_an_answer_is_unknown_not_failed() {
        let check = "kubectl -n ml get resourcequota gpu -o yaml";
        let timeout =
            kube::Error::Service(Box::new(std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer within 10s")));
        for e in [timeout, status(504, "Timeout: request did not complete within requested timeout")] {
            let m = write_failure("patching ResourceQuota ml/gpu", &e, check, "4711");
            assert!(m.contains("whether the change landed is unknown") && m.contains(check), "{m}");
            assert!(m.contains("conditional on version 4711"), "{m}");
        }
        // An answer is an answer: a refusal says what it was, and nothing about unknowns.
        let m = write_failure("patching ResourceQuota ml/gpu", &status(403, "forbidden"), check, "4711");
        assert!(m.contains("forbidden") && !m.contains("unknown"), "{m}");
    }
}
