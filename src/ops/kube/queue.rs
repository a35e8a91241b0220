//! A Kueue ClusterQueue's `spec.stopPolicy` written (a merge patch of that one field) and
//! its status read back: the `Active` condition and the workloads it reserves and admits.

use kube::api::{Api, DynamicObject, Patch};
use serde_json::{Value, json};

use super::super::StopPolicy;
use super::super::exec::{Run, Step};
use super::super::retry;
use super::super::target::{QueueView, ReadFailure};
use super::call::Kube;
use super::{api_failure, pp, read_failure};

/// The view of a ClusterQueue as the API server returns it.
pub fn queue_view(o: &DynamicObject) -> QueueView {
    let d = &o.data;
    let active = d.pointer("/status/conditions").and_then(Value::as_array).and_then(|cs| {
        cs.iter().find(|c| c["type"] == "Active").map(|c| {
            let text = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            (c["status"] == "True", text("reason"), text("message"))
        })
    });
    QueueView {
        stop_policy: d.pointer("/spec/stopPolicy").and_then(Value::as_str).unwrap_or_default().to_string(),
        active,
        reserving: d.pointer("/status/reservingWorkloads").and_then(Value::as_i64).unwrap_or(0),
        admitted: d.pointer("/status/admittedWorkloads").and_then(Value::as_i64).unwrap_or(0),
    }
}

impl Kube {
    pub(super) async fn queue(&self, run: &mut Run<'_>, queue: &str) -> Step<Result<Option<QueueView>, ReadFailure>> {
        let ar = super::quota::kueue_cluster_queues(&self.client).await?;
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
        let what = format!("reading ClusterQueue {queue}");
        Ok(self
            .call(run, &what, retry::transient, || api.get_opt(queue))
            .await?
            .map(|o| o.as_ref().map(queue_view))
            .map_err(|e| read_failure(&what, &e)))
    }

    pub(super) async fn stop_policy(
        &self,
        run: &mut Run<'_>,
        queue: &str,
        policy: StopPolicy,
    ) -> Step<Result<(), String>> {
        let ar = super::quota::kueue_cluster_queues(&self.client).await?;
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
        // One field, idempotent: a retry after a write that landed writes the same value.
        let patch = json!({"spec": {"stopPolicy": policy.as_str()}});
        let (params, body) = (pp(), Patch::Merge(&patch));
        let what = format!("setting stopPolicy {} on ClusterQueue {queue}", policy.as_str());
        let sent = self.mutate(run, &what, retry::transient, || api.patch(queue, &params, &body)).await?;
        Ok(sent.map(|_| ()).map_err(|e| api_failure(&what, &e)))
    }
}
