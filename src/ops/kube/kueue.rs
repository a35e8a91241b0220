//! A Kueue Workload read, and its `spec.active` written: a JSON patch that tests the uid
//! read before it, so a Workload made again under the same name is never changed.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch};
use serde_json::json;

use super::super::exec::{Run, Step, Stop};
use super::super::retry;
use super::super::target::ReadFailure;
use super::call::Kube;
use super::{api_failure, pp, read_failure};
use crate::cluster::labels as l;
use crate::model::KueueWorkload;

/// Kueue's Workload resource in the first version the server serves (v1beta2, else v1beta1).
async fn workloads(client: &kube::Client) -> Step<ApiResource> {
    let mut last = String::new();
    for version in ["v1beta2", "v1beta1"] {
        let gvk = GroupVersionKind::gvk(l::KUEUE_GROUP, version, "Workload");
        match kube::discovery::pinned_kind(client, &gvk).await {
            Ok((ar, _)) => return Ok(ar),
            Err(e) => last = e.to_string(),
        }
    }
    Err(Stop::Failed(format!("Kueue's Workload API is not served here ({last}); nothing was changed")))
}

impl Kube {
    pub(super) async fn kueue_workload(
        &self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
    ) -> Step<Result<Option<KueueWorkload>, ReadFailure>> {
        let ar = workloads(&self.client).await?;
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), namespace, &ar);
        let what = format!("reading Workload {namespace}/{name}");
        Ok(self
            .call(run, &what, retry::transient, || api.get_opt(name))
            .await?
            .map(|o| o.as_ref().and_then(crate::cluster::kueue::workload))
            .map_err(|e| read_failure(&what, &e)))
    }

    pub(super) async fn workload_active(
        &self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
        uid: &str,
        active: bool,
    ) -> Step<Result<(), String>> {
        let ar = workloads(&self.client).await?;
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), namespace, &ar);
        // `add` sets the field whether or not it is there; the test makes it this Workload.
        let body = match serde_json::from_value(json!([
            {"op": "test", "path": "/metadata/uid", "value": uid},
            {"op": "add", "path": "/spec/active", "value": active},
        ])) {
            Ok(p) => Patch::<()>::Json(p),
            Err(e) => return Ok(Err(format!("building the patch: {e}"))),
        };
        let params = pp();
        let what = format!("setting spec.active: {active} on Workload {namespace}/{name}");
        let sent = self.mutate(run, &what, retry::transient, || api.patch(name, &params, &body)).await?;
        Ok(sent.map(|_| ()).map_err(|e| api_failure(&what, &e)))
    }
}
