//! A reslice's writes on the cluster: a named config added to the mig-parted ConfigMap when
//! the layout has no builtin name, `nvidia.com/mig.config` on the node, and the node's GPU
//! devices read from the DRA driver's ResourceSlices where it has no device-plugin capacity.

use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, ListParams, Patch, PostParams};
use serde_json::json;

use super::super::ReslicePlan;
use super::super::exec::{Run, Step, Stop};
use super::super::mig_ack;
use super::super::retry;
use super::super::target::NodeView;
use super::call::Kube;
use super::node::node_view;
use super::{FIELD_MANAGER, api_failure, pp};
use crate::cluster::{is_status, labels};
use crate::mig::parted::add_config as add_mig_config;

impl Kube {
    /// Adds config `name` to the mig-parted ConfigMap; `false` when it has it already.
    pub(super) async fn ensure_mig_config(&self, run: &mut Run<'_>, name: &str, entry: &str) -> Step<bool> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), labels::MIG_CONFIGMAP_NS);
        let what = format!("{}/{}", labels::MIG_CONFIGMAP_NS, labels::MIG_CONFIGMAP);
        // Only ever adds an entry; a concurrent writer (409) makes us read again and re-add.
        // The replace carries the resourceVersion read, so retrying it is safe: a retry after
        // a write that did land meets 409, and the next read finds the entry.
        for _ in 0..5 {
            let cm = self
                .call(run, &format!("reading {what}"), retry::transient, || api.get_opt(labels::MIG_CONFIGMAP))
                .await?
                .map_err(|e| Stop::Failed(api_failure(&format!("reading {what}"), &e)))?;
            let Some(mut cm) = cm else {
                return Err(Stop::Failed(format!(
                    "the mig-parted ConfigMap {what} does not exist, so mig-manager cannot learn config {name}; nothing was changed on the node (is the GPU operator's mig-manager installed?)"
                )));
            };
            let text = cm.data.as_ref().and_then(|d| d.get(labels::MIG_CONFIGMAP_KEY)).cloned().unwrap_or_default();
            let updated = add_mig_config(&text, name, entry).map_err(|why| {
                Stop::Failed(format!("{what} key {}: {why}; nothing was changed", labels::MIG_CONFIGMAP_KEY))
            })?;
            let Some(updated) = updated else { return Ok(false) };
            cm.data.get_or_insert_with(Default::default).insert(labels::MIG_CONFIGMAP_KEY.into(), updated);
            let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
            match self
                .mutate(run, &format!("updating {what}"), retry::transient, || {
                    api.replace(labels::MIG_CONFIGMAP, &params, &cm)
                })
                .await?
            {
                Ok(_) => return Ok(true),
                Err(e) if is_status(&e, 409) => {
                    run.log(format!("{what} changed while we wrote it; reading it again")).await?;
                }
                Err(e) => return Err(Stop::Failed(api_failure(&format!("updating {what}"), &e))),
            }
        }
        Err(Stop::Failed(format!("{what} kept changing under us; gave up adding {name}")))
    }

    /// Sets `nvidia.com/mig.config`; the node as the patch returned it.
    pub(super) async fn set_mig_config(&self, run: &mut Run<'_>, r: &ReslicePlan) -> Step<NodeView> {
        let node = r.node.as_str();
        let patch = json!({ "metadata": { "labels": { labels::MIG_CONFIG: r.config_name } } });
        let what = format!("setting {} on {node}", labels::MIG_CONFIG);
        let api: Api<Node> = Api::all(self.client.clone());
        let (params, body) = (pp(), Patch::Merge(&patch));
        let written = self
            .mutate(run, &what, retry::transient, || api.patch(node, &params, &body))
            .await?
            .map_err(|e| Stop::Failed(api_failure(&what, &e)))?;
        Ok(node_view(&written))
    }

    /// The node's GPU devices from the DRA driver's ResourceSlices.
    pub(super) async fn slice_caps(&self, run: &mut Run<'_>, node: &str) -> Step<mig_ack::Caps> {
        let api: Api<k8s_openapi::api::resource::v1::ResourceSlice> = Api::all(self.client.clone());
        let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
        let what = format!("listing the ResourceSlices of {node}");
        let list = self
            .call(run, &what, retry::transient, || api.list(&lp))
            .await?
            .map_err(|e| Stop::Failed(api_failure(&what, &e)))?;
        let devices = list
            .items
            .iter()
            .filter(|s| s.spec.driver == labels::DRA_DRIVER)
            .flat_map(|s| s.spec.devices.iter().flatten());
        Ok(mig_ack::slice_caps(devices))
    }
}
