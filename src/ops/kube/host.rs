//! A Metal3 BareMetalHost read, and the baremetal-operator asked for a reboot, power or an
//! inspection: a merge patch of one annotation or of `spec.online`.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch};
use serde_json::{Value, json};

use super::super::HostAction;
use super::super::exec::{Run, Step};
use super::super::retry;
use super::super::target::ReadFailure;
use super::call::Kube;
use super::{api_failure, pp, read_failure};
use crate::cluster::metal3::{INSPECT_ANNOTATION, REBOOT_ANNOTATION};
use crate::model::BareMetalHost;

fn hosts(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("metal3.io", "v1alpha1", "BareMetalHost");
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk_with_plural(&gvk, "baremetalhosts"))
}

/// The patch that asks for `action`: idempotent, so a retry after a write that landed
/// writes the same.
pub fn request_patch(action: HostAction) -> Value {
    match action {
        HostAction::Reboot => json!({"metadata": {"annotations": {REBOOT_ANNOTATION: ""}}}),
        HostAction::Inspect => json!({"metadata": {"annotations": {INSPECT_ANNOTATION: ""}}}),
        HostAction::PowerOff => json!({"spec": {"online": false}}),
        HostAction::PowerOn => json!({"spec": {"online": true}}),
    }
}

impl Kube {
    pub(super) async fn host(
        &self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
    ) -> Step<Result<Option<BareMetalHost>, ReadFailure>> {
        let api = hosts(&self.client, namespace);
        let what = format!("reading BareMetalHost {namespace}/{name}");
        Ok(self
            .call(run, &what, retry::transient, || api.get_opt(name))
            .await?
            .map(|o| o.and_then(|o| serde_json::to_value(&o).ok()).and_then(|v| crate::cluster::metal3::host(&v)))
            .map_err(|e| read_failure(&what, &e)))
    }

    pub(super) async fn host_request(
        &self,
        run: &mut Run<'_>,
        namespace: &str,
        name: &str,
        action: HostAction,
    ) -> Step<Result<(), String>> {
        let api = hosts(&self.client, namespace);
        let patch = request_patch(action);
        let (params, body) = (pp(), Patch::Merge(&patch));
        let what = format!("asking for {} of BareMetalHost {namespace}/{name}", action.as_str());
        let sent = self.mutate(run, &what, retry::transient, || api.patch(name, &params, &body)).await?;
        Ok(sent.map(|_| ()).map_err(|e| api_failure(&what, &e)))
    }
}
