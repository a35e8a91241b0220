//! Reslice: drain the GPUs' pods, add the mig-parted config when the layout has no builtin
//! name, set `nvidia.com/mig.config`, follow mig-manager to `success` with the planned
//! devices, and end the cordon this operation (or an interrupted reslice) began.

use std::collections::BTreeMap;
use std::time::Instant;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, ListParams, Patch, PostParams};
use serde_json::json;

use super::super::cordon::CordonEnd;
use super::super::mig_ack::{self, MigAck, MigVerdict, MigWrite};
use super::super::retry;
use super::super::{OpKind, ReslicePlan};
use super::drain::{reconcile, settle};
use super::evict::{evict_and_wait, node_pods, pod_key};
use super::node::{cordon_step, read_node, set_unschedulable};
use super::run::{Run, Step, Stop};
use super::{FIELD_MANAGER, api_failure, pp, secs};
use crate::cluster::{describe, is_status, labels};
use crate::mig::parted::add_config as add_mig_config;

pub(super) async fn ensure_mig_config(run: &mut Run<'_>, name: &str, entry: &str) -> Step<()> {
    let api: Api<ConfigMap> = Api::namespaced(run.ex.client.clone(), labels::MIG_CONFIGMAP_NS);
    let what = format!("{}/{}", labels::MIG_CONFIGMAP_NS, labels::MIG_CONFIGMAP);
    // Only ever adds an entry; a concurrent writer (409) makes us read again and re-add. The
    // replace carries the resourceVersion read, so retrying it is safe: a retry after a write
    // that did land meets 409, and the next read finds the entry.
    for _ in 0..5 {
        let cm = run
            .call(&format!("reading {what}"), retry::transient, || api.get_opt(labels::MIG_CONFIGMAP))
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
        let Some(updated) = updated else {
            run.step(format!("{what} already has config {name}")).await?;
            return Ok(());
        };
        cm.data.get_or_insert_with(Default::default).insert(labels::MIG_CONFIGMAP_KEY.into(), updated);
        let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        match run
            .mutate(&format!("updating {what}"), retry::transient, || api.replace(labels::MIG_CONFIGMAP, &params, &cm))
            .await?
        {
            Ok(_) => {
                run.step(format!("added config {name} to {what}")).await?;
                return Ok(());
            }
            Err(e) if is_status(&e, 409) => {
                run.log(format!("{what} changed while we wrote it; reading it again")).await?;
            }
            Err(e) => return Err(Stop::Failed(api_failure(&format!("updating {what}"), &e))),
        }
    }
    Err(Stop::Failed(format!("{what} kept changing under us; gave up adding {name}")))
}

pub(super) fn node_labels(n: &Node) -> BTreeMap<String, String> {
    n.metadata.labels.clone().unwrap_or_default()
}

pub(super) fn paused_labels(l: &BTreeMap<String, String>) -> Vec<String> {
    l.iter()
        .filter(|(k, v)| k.starts_with(labels::DEPLOY_PREFIX) && v.starts_with("paused"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

/// Where a reslice reads the node's GPU devices: its capacity (device plugin), or the DRA
/// driver's ResourceSlices for the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Devices {
    Capacity,
    Slices,
}

/// The node's GPU devices now, in device-plugin resource names.
pub(super) async fn devices_now(run: &mut Run<'_>, node: &Node, from: Devices) -> Step<mig_ack::Caps> {
    match from {
        Devices::Capacity => Ok(mig_ack::capacity_caps(node)),
        Devices::Slices => {
            let name = node.metadata.name.clone().unwrap_or_default();
            let api: Api<k8s_openapi::api::resource::v1::ResourceSlice> = Api::all(run.ex.client.clone());
            let lp = ListParams::default().fields(&format!("spec.nodeName={name}"));
            let what = format!("listing the ResourceSlices of {name}");
            let list = run
                .call(&what, retry::transient, || api.list(&lp))
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
}

pub(super) fn caps_shown(c: &mig_ack::Caps) -> String {
    crate::mig::caps_text(c.iter().map(|(r, n)| (r, *n)))
}

/// Follows mig-manager from our label write (`written`: the node the patch returned) until
/// it has acknowledged this config and reports `success` with the planned devices
/// ([`mig_ack`]), or `failed`, or the time is up.
pub(super) async fn follow_mig_manager(
    run: &mut Run<'_>,
    r: &ReslicePlan,
    written: &Node,
    from: Devices,
) -> Step<String> {
    let node = r.node.as_str();
    let api: Api<Node> = Api::all(run.ex.client.clone());
    let start = Instant::now();
    let want: mig_ack::Caps = r.capacity_after.iter().filter(|(_, n)| *n > 0).cloned().collect();
    let caps0 = devices_now(run, written, from).await?;
    let seen0 = mig_ack::observe(written, FIELD_MANAGER, caps0.clone());
    let mut ack = MigAck::new(MigWrite {
        state: seen0.state.clone(),
        at: mig_ack::our_write(written, FIELD_MANAGER),
        caps: caps0,
    });
    let mut pending_since: Option<Instant> = None;
    let mut announced_ack = false;
    let deadline = (start + run.ex.opts.mig_timeout).min(run.deadline);
    loop {
        let what = format!("reading node {node}");
        let n = match run.call(&what, retry::transient, || api.get_opt(node)).await? {
            Ok(Some(n)) => Some(n),
            Ok(None) => {
                return Err(Stop::Failed(format!("node {node} disappeared while mig-manager was reconfiguring it")));
            }
            // A read that failed through its retries is one missed look, not the end: the
            // wait goes on to its deadline.
            Err(e) if retry::transient(&e).is_some() => {
                run.log(format!("{what} failed ({}); still waiting for mig-manager", describe(&e))).await?;
                None
            }
            Err(e) => return Err(Stop::Failed(api_failure(&what, &e))),
        };
        if let Some(n) = n {
            let l = node_labels(&n);
            let config = l.get(labels::MIG_CONFIG).cloned().unwrap_or_default();
            if config != r.config_name {
                return Err(Stop::Failed(format!(
                    "someone else set {}={config} while we waited; the node stays cordoned — look before retrying",
                    labels::MIG_CONFIG
                )));
            }
            let caps = devices_now(run, &n, from).await?;
            let seen = mig_ack::observe(&n, FIELD_MANAGER, caps.clone());
            let state = seen.state.clone().unwrap_or_default();
            let grace_over = start.elapsed() >= run.ex.opts.mig_ack_grace;
            let verdict = ack.judge(&seen, &want, r.layout_unchanged, grace_over);
            if let (false, Some(why)) = (announced_ack, ack.acked.clone()) {
                announced_ack = true;
                run.log(format!("mig-manager acknowledged {}: {why}", r.config_name)).await?;
            }
            match verdict {
                MigVerdict::AwaitAck => {
                    run.blocked(format!(
                        "waiting for mig-manager to take up {} ({}={} is still the state from before the label was written)",
                        r.config_name,
                        labels::MIG_CONFIG_STATE,
                        if state.is_empty() { "(none)" } else { state.as_str() }
                    ))
                    .await?;
                }
                MigVerdict::Working(st) => {
                    let since = *pending_since.get_or_insert_with(Instant::now);
                    let waited = since.elapsed();
                    if waited >= run.ex.opts.mig_stuck {
                        let paused = paused_labels(&l);
                        run.blocked(format!(
                            "stuck? {}={st} for {} (flagged after {}); paused: {} — mig-manager's log on {node} says why",
                            labels::MIG_CONFIG_STATE,
                            secs(waited),
                            secs(run.ex.opts.mig_stuck),
                            if paused.is_empty() { "none".to_string() } else { paused.join(", ") }
                        ))
                        .await?;
                    } else {
                        run.blocked(format!("mig-manager is applying {} ({st})", r.config_name)).await?;
                    }
                }
                MigVerdict::AwaitCapacity => {
                    run.blocked(format!(
                        "{}=success, but {node} offers {}, not the planned {}; waiting for the devices",
                        labels::MIG_CONFIG_STATE,
                        caps_shown(&caps),
                        caps_shown(&want)
                    ))
                    .await?;
                }
                MigVerdict::Applied => {
                    return Ok(format!("applied; {node} offers {}", caps_shown(&caps)));
                }
                MigVerdict::AlreadyInPlace => {
                    return Ok(format!(
                        "mig-manager wrote nothing within {} (it writes nothing for a layout already in place); {node} offers the planned {}",
                        secs(run.ex.opts.mig_ack_grace),
                        caps_shown(&caps)
                    ));
                }
                MigVerdict::Failed => {
                    let paused = paused_labels(&l);
                    let note = n
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(labels::SIM_MIG_MESSAGE))
                        .map(|m| format!(" ({m})"))
                        .unwrap_or_default();
                    return Err(Stop::Failed(format!(
                        "mig-manager reports {}=failed for {}{note}; left behind: capacity {}, paused clients {}; {node} stays cordoned — see mig-manager's log, fix the config, then reslice again or uncordon",
                        labels::MIG_CONFIG_STATE,
                        r.config_name,
                        caps_shown(&caps),
                        if paused.is_empty() { "none".to_string() } else { paused.join(", ") }
                    )));
                }
            }
            if Instant::now() >= deadline {
                let left = match &ack.acked {
                    None => format!(
                        "mig-manager never acknowledged {} ({}={state} is from before the label was written)",
                        r.config_name,
                        labels::MIG_CONFIG_STATE
                    ),
                    Some(_) => format!(
                        "{}={state}, {node} offers {} (planned {})",
                        labels::MIG_CONFIG_STATE,
                        caps_shown(&caps),
                        caps_shown(&want)
                    ),
                };
                return Err(Stop::Failed(format!(
                    "gave up after {}: {left}; {node} stays cordoned with {}={} set",
                    secs(start.elapsed()),
                    labels::MIG_CONFIG,
                    r.config_name
                )));
            }
        } else if Instant::now() >= deadline {
            return Err(Stop::Failed(format!(
                "gave up after {}: the API server did not answer reads of {node}; {node} stays cordoned with {}={} set",
                secs(start.elapsed()),
                labels::MIG_CONFIG,
                r.config_name
            )));
        }
        run.sleep(run.ex.opts.poll).await?;
    }
}

pub(super) async fn reslice_op(run: &mut Run<'_>, r: &ReslicePlan) -> Step<String> {
    let node = r.node.as_str();
    run.log(format!(
        "deadline: {} in all ({} for evictions, {} for mig-manager); past it fabrik stops and says what is left",
        secs(run.ex.opts.deadline(OpKind::Reslice)),
        secs(run.ex.opts.drain_timeout),
        secs(run.ex.opts.mig_timeout)
    ))
    .await?;
    cordon_step(run, node).await?;
    let confirmed: Vec<(String, String)> =
        r.pods.iter().filter(|p| p.action.must_go()).map(|p| (p.namespace.clone(), p.name.clone())).collect();
    let pods = node_pods(run, node).await?;
    let mine: Vec<Pod> =
        pods.into_iter().filter(|p| confirmed.iter().any(|(n, m)| pod_key(p) == (n.clone(), m.clone()))).collect();
    let (evict, notes) = reconcile(&confirmed, &mine, false).map_err(Stop::Failed)?;
    for n in notes {
        run.log(n).await?;
    }
    for _ in evict.len()..confirmed.len() {
        run.progress.skip();
    }
    evict_and_wait(run, evict).await?;
    // What the cluster says now: pods that started terminating meanwhile are waited for;
    // on a whole-node reslice no pod may still hold a GPU there.
    let (_, holding) = settle(run, node, false).await?;
    if r.whole_node && !holding.is_empty() {
        return Err(Stop::Failed(format!(
            "{} still hold{} GPUs on {node} ({}) — nothing was resliced, reslice again to move them; {node} stays cordoned",
            crate::ops::count(holding.len(), "pod"),
            if holding.len() == 1 { "s" } else { "" },
            holding.join(", ")
        )));
    }
    run.step(format!("the GPUs' pods are gone from {node}")).await?;
    if let Some(entry) = &r.custom_config {
        ensure_mig_config(run, &r.config_name, entry).await?;
    } else {
        run.progress.skip();
    }
    run.check_cancel()?;
    let before =
        read_node(run, node).await?.ok_or_else(|| Stop::Failed(format!("node {node} is gone from the cluster")))?;
    let from = if mig_ack::capacity_caps(&before).is_empty() { Devices::Slices } else { Devices::Capacity };
    let l = node_labels(&before);
    let already = l.get(labels::MIG_CONFIG) == Some(&r.config_name)
        && l.get(labels::MIG_CONFIG_STATE).map(String::as_str) == Some("success");
    let applied = if already {
        // The label would not change, so mig-manager will not act: what the node offers is
        // the whole answer.
        let want: mig_ack::Caps = r.capacity_after.iter().filter(|(_, n)| *n > 0).cloned().collect();
        let have = devices_now(run, &before, from).await?;
        if have != want {
            return Err(Stop::Failed(format!(
                "{node} already has {}={} (state success) but offers {}, not the planned {}; mig-manager does not act on an unchanged label — set another config and then this one, or look at mig-manager; {node} stays cordoned",
                labels::MIG_CONFIG,
                r.config_name,
                caps_shown(&have),
                caps_shown(&want)
            )));
        }
        run.step(format!("{node} already runs {} (state success)", r.config_name)).await?;
        format!("already applied; {node} offers the planned {}", caps_shown(&have))
    } else {
        let patch = json!({ "metadata": { "labels": { labels::MIG_CONFIG: r.config_name } } });
        let what = format!("setting {} on {node}", labels::MIG_CONFIG);
        let api: Api<Node> = Api::all(run.ex.client.clone());
        let (params, body) = (pp(), Patch::Merge(&patch));
        let written = run
            .mutate(&what, retry::transient, || api.patch(node, &params, &body))
            .await?
            .map_err(|e| Stop::Failed(api_failure(&what, &e)))?;
        run.step(format!("set {}={} on {node}", labels::MIG_CONFIG, r.config_name)).await?;
        follow_mig_manager(run, r, &written, from).await?
    };
    run.log(format!("{}=success: {applied}", labels::MIG_CONFIG_STATE)).await?;
    let (was_cordoned, mark) = run.cordon_before.clone().unwrap_or((r.was_cordoned, None));
    match super::super::cordon::reslice_end(node, was_cordoned, mark.as_ref()) {
        CordonEnd::Uncordon(line) => {
            set_unschedulable(run, node, false).await?;
            run.step(line).await?;
        }
        CordonEnd::Keep(line) => run.step(line).await?,
    }
    Ok(format!("{node} runs {}: {applied}", r.config_name))
}
