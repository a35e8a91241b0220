//! Nodes: read as a [`NodeView`]; cordon and uncordon as a merge patch of
//! `spec.unschedulable` (kubectl writes the same field), with this operation's mark beside it.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch};
use serde_json::{Value, json};

use super::super::cordon::CordonMark;
use super::super::exec::{Run, Step, Stop};
use super::super::mig_ack;
use super::super::retry;
use super::super::target::{NodeView, ReadFailure};
use super::call::Kube;
use super::{FIELD_MANAGER, api_failure, pp, read_failure};
use crate::cluster::labels;

/// A node as an operation needs it, from the API's object.
pub fn node_view(n: &Node) -> NodeView {
    let annotations = n.metadata.annotations.clone().unwrap_or_default();
    NodeView {
        name: n.metadata.name.clone().unwrap_or_default(),
        unschedulable: n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
        mark: CordonMark::of(Some(&annotations)),
        labels: n.metadata.labels.clone().unwrap_or_default(),
        annotations,
        capacity: mig_ack::capacity_caps(n),
        state_written: mig_ack::state_written(n, FIELD_MANAGER),
        our_write: mig_ack::our_write(n, FIELD_MANAGER),
    }
}

impl Kube {
    /// Reads a node, with retries. `Ok(None)`: it is gone.
    pub(super) async fn node(&self, run: &mut Run<'_>, node: &str) -> Step<Result<Option<NodeView>, ReadFailure>> {
        let api: Api<Node> = Api::all(self.client.clone());
        let what = format!("reading node {node}");
        Ok(match self.call(run, &what, retry::transient, || api.get_opt(node)).await? {
            Ok(n) => Ok(n.as_ref().map(node_view)),
            Err(e) => Err(read_failure(&what, &e)),
        })
    }

    /// Cordons with `mark`, or uncordons removing any mark, in one patch: a cordon is never
    /// without its mark, nor a mark without its cordon.
    pub(super) async fn cordon(&self, run: &mut Run<'_>, node: &str, mark: Option<&CordonMark>) -> Step<()> {
        // kubectl's strategic merge patch leaves the field out when uncordoning; null does
        // the same.
        let patch = match mark {
            Some(m) => json!({ "spec": { "unschedulable": true },
                               "metadata": { "annotations": { labels::CORDONED_BY: m.value() } } }),
            None => json!({ "spec": { "unschedulable": Value::Null },
                            "metadata": { "annotations": { labels::CORDONED_BY: Value::Null } } }),
        };
        let api: Api<Node> = Api::all(self.client.clone());
        let what = format!("{} {node}", if mark.is_some() { "cordoning" } else { "uncordoning" });
        let (params, body) = (pp(), Patch::Merge(&patch));
        self.mutate(run, &what, retry::transient, || api.patch(node, &params, &body))
            .await?
            .map_err(|e| Stop::Failed(api_failure(&what, &e)))?;
        Ok(())
    }
}
