//! Cordon and uncordon: a merge patch of `spec.unschedulable` (kubectl writes the same
//! field), with this operation's mark beside it.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch};
use serde_json::{Value, json};

use super::super::OpKind;
use super::super::cordon::CordonMark;
use super::super::retry;
use super::run::{Run, Step, Stop};
use super::{api_failure, pp};
use crate::cluster::labels;

/// Reads a node, with retries. `None`: it is gone.
pub(super) async fn read_node(run: &mut Run<'_>, node: &str) -> Step<Option<Node>> {
    let api: Api<Node> = Api::all(run.ex.client.clone());
    run.call(&format!("reading node {node}"), retry::transient, || api.get_opt(node))
        .await?
        .map_err(|e| Stop::Failed(api_failure(&format!("reading node {node}"), &e)))
}

/// Cordons (with this operation's mark) or uncordons (removing any mark). Returns whether
/// the node changed, and what its cordon was before.
pub(super) async fn set_unschedulable(run: &mut Run<'_>, node: &str, cordon: bool) -> Step<(bool, Option<CordonMark>)> {
    let Some(n) = read_node(run, node).await? else {
        return Err(Stop::Failed(format!("node {node} is gone from the cluster; nothing was changed")));
    };
    let is = n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
    let mark = CordonMark::of(n.metadata.annotations.as_ref());
    // A cordoned node keeps its mark; an uncordoned one must not carry a stale one.
    if is == cordon && (cordon || mark.is_none()) {
        return Ok((false, mark));
    }
    run.check_cancel()?;
    // kubectl's strategic merge patch leaves the field out when uncordoning; null does the
    // same. The mark goes in the same patch: a cordon is never without it, nor it without one.
    let patch = if cordon {
        json!({ "spec": { "unschedulable": true },
                "metadata": { "annotations": { labels::CORDONED_BY: run.cordon_mark().value() } } })
    } else {
        json!({ "spec": { "unschedulable": Value::Null },
                "metadata": { "annotations": { labels::CORDONED_BY: Value::Null } } })
    };
    let api: Api<Node> = Api::all(run.ex.client.clone());
    let what = format!("{} {node}", if cordon { "cordoning" } else { "uncordoning" });
    let (params, body) = (pp(), Patch::Merge(&patch));
    run.mutate(&what, retry::transient, || api.patch(node, &params, &body))
        .await?
        .map_err(|e| Stop::Failed(api_failure(&what, &e)))?;
    Ok((is != cordon, mark))
}

pub(super) async fn cordon_op(run: &mut Run<'_>, node: &str, cordon: bool) -> Step<String> {
    let (changed, _) = set_unschedulable(run, node, cordon).await?;
    let what = if cordon { "cordoned" } else { "uncordoned" };
    if changed {
        run.step(format!("{what} {node}")).await?;
        Ok(format!("{node} {what}"))
    } else {
        run.step(format!("{node} was already {}", if cordon { "cordoned" } else { "schedulable" })).await?;
        Ok(format!("{node} unchanged (already {})", if cordon { "cordoned" } else { "schedulable" }))
    }
}

/// The first step of a drain or a reslice: no new pods land on the node meanwhile. What
/// the cordon was before is kept in the run, for the reslice's end.
pub(super) async fn cordon_step(run: &mut Run<'_>, node: &str) -> Step<()> {
    let (changed, mark) = set_unschedulable(run, node, true).await?;
    run.cordon_before = Some((!changed, if changed { None } else { mark.clone() }));
    if changed {
        return run.step(format!("cordoned {node}")).await;
    }
    match mark {
        // The node now serves this drain: a later reslice keeps it cordoned.
        Some(m) if run.plan.kind == OpKind::Drain && m.kind == "reslice" => {
            let value = run.cordon_mark().value();
            let api: Api<Node> = Api::all(run.ex.client.clone());
            let patch = json!({ "metadata": { "annotations": { labels::CORDONED_BY: value } } });
            let what = format!("marking the cordon of {node} as this drain's");
            let (params, body) = (pp(), Patch::Merge(&patch));
            run.mutate(&what, retry::transient, || api.patch(node, &params, &body))
                .await?
                .map_err(|e| Stop::Failed(api_failure(&what, &e)))?;
            run.step(format!("{node} was already cordoned by {}; the cordon is now this drain's", m.describe())).await
        }
        Some(m) => run.step(format!("{node} was already cordoned by {}", m.describe())).await,
        None => run.step(format!("{node} was already cordoned")).await,
    }
}
