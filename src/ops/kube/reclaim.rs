//! A reclaim's calls: the owner read (apps/v1 or batch/v1, as a dynamic object: one code
//! path for four kinds), the pod's deletion cost and the owner's replicas or suspension
//! written as JSON patches that `test` what was read (uid, replicas), so a concurrent change
//! or a replacement is refused by the API server, never overwritten.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch};
use serde_json::{Value, json};

use super::super::Workload;
use super::super::exec::{Run, Step};
use super::super::reclaim::KUEUE_QUEUE_LABEL;
use super::super::retry;
use super::super::target::{PodRef, ReadFailure, WorkloadView};
use super::call::Kube;
use super::{api_failure, pp, read_failure};

fn api(k: &Kube, ns: &str, kind: Workload) -> Api<DynamicObject> {
    let (group, version, plural) = kind.api();
    let gvk = GroupVersionKind::gvk(group, version, kind.as_str());
    Api::namespaced_with(k.client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, plural))
}

/// The view of a workload object as the API server returns it.
pub fn workload_view(o: &DynamicObject) -> WorkloadView {
    let d = &o.data;
    let int = |v: &Value| v.as_i64().and_then(|n| i32::try_from(n).ok());
    let generation = o.metadata.generation.unwrap_or(0);
    let observed = d.pointer("/status/observedGeneration").and_then(Value::as_i64).unwrap_or(-1);
    WorkloadView {
        uid: o.metadata.uid.clone().unwrap_or_default(),
        replicas: d.pointer("/spec/replicas").and_then(int),
        // status.replicas is omitted at 0.
        settled: (observed >= generation).then(|| d.pointer("/status/replicas").and_then(int).unwrap_or(0)),
        suspended: d.pointer("/spec/suspend").and_then(Value::as_bool).unwrap_or(false),
        controller: o
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true))
            .map(|r| (r.kind.clone(), r.name.clone())),
        queue: o.metadata.labels.as_ref().and_then(|l| l.get(KUEUE_QUEUE_LABEL)).cloned(),
    }
}

/// The person's words for a refused conditional write: a failed `test` is a change since
/// the read.
fn refused(what: &str, e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.code == 422 || s.code == 409 => {
            format!("{what}: refused — it changed since fabrik read it ({})", s.message)
        }
        _ => api_failure(what, e),
    }
}

impl Kube {
    pub(super) async fn workload(
        &self,
        run: &mut Run<'_>,
        ns: &str,
        kind: Workload,
        name: &str,
    ) -> Step<Result<Option<WorkloadView>, ReadFailure>> {
        let api = api(self, ns, kind);
        let what = format!("reading {} {ns}/{name}", kind.as_str());
        Ok(self
            .call(run, &what, retry::transient, || api.get_opt(name))
            .await?
            .map(|o| o.as_ref().map(workload_view))
            .map_err(|e| read_failure(&what, &e)))
    }

    pub(super) async fn annotate(
        &self,
        run: &mut Run<'_>,
        pod: &PodRef,
        key: &str,
        value: &str,
    ) -> Step<Result<(), String>> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        // A merge patch that names the uid: the API server refuses it for another pod of the
        // same name (the uid cannot change).
        let patch = json!({"metadata": {"uid": pod.uid, "annotations": {key: value}}});
        let what = format!("annotating {} {key}={value}", pod.key());
        let (params, body) = (pp(), Patch::Merge(&patch));
        let sent = self.mutate(run, &what, retry::transient, || api.patch(&pod.name, &params, &body)).await?;
        Ok(sent.map(|_| ()).map_err(|e| refused(&what, &e)))
    }

    pub(super) async fn scale_to(
        &self,
        run: &mut Run<'_>,
        ns: &str,
        kind: Workload,
        name: &str,
        seen: &WorkloadView,
        to: i32,
    ) -> Step<Result<(), String>> {
        let api = api(self, ns, kind);
        let from = seen.replicas.unwrap_or(1);
        let body = match serde_json::from_value(json!([
            {"op": "test", "path": "/metadata/uid", "value": seen.uid},
            {"op": "test", "path": "/spec/replicas", "value": from},
            {"op": "replace", "path": "/spec/replicas", "value": to},
        ])) {
            Ok(p) => Patch::<()>::Json(p),
            Err(e) => return Ok(Err(format!("building the patch: {e}"))),
        };
        let params = pp();
        let what = format!("scaling {} {ns}/{name} {from} → {to}", kind.as_str());
        let sent = self.mutate(run, &what, retry::transient, || api.patch(name, &params, &body)).await?;
        match sent {
            Ok(_) => Ok(Ok(())),
            Err(e) => {
                // An earlier try may have landed with its answer lost: then the count is `to`.
                if let Ok(Some(now)) = self.workload(run, ns, kind, name).await?
                    && now.uid == seen.uid
                    && now.replicas == Some(to)
                {
                    run.log(format!("{} {ns}/{name} is at {to} replicas already", kind.as_str())).await?;
                    return Ok(Ok(()));
                }
                Ok(Err(refused(&what, &e)))
            }
        }
    }

    pub(super) async fn suspend(&self, run: &mut Run<'_>, ns: &str, name: &str, uid: &str) -> Step<Result<(), String>> {
        let api = api(self, ns, Workload::Job);
        let body = match serde_json::from_value(json!([
            {"op": "test", "path": "/metadata/uid", "value": uid},
            {"op": "add", "path": "/spec/suspend", "value": true},
        ])) {
            Ok(p) => Patch::<()>::Json(p),
            Err(e) => return Ok(Err(format!("building the patch: {e}"))),
        };
        let params = pp();
        let what = format!("suspending Job {ns}/{name}");
        let sent = self.mutate(run, &what, retry::transient, || api.patch(name, &params, &body)).await?;
        Ok(sent.map(|_| ()).map_err(|e| refused(&what, &e)))
    }
}
