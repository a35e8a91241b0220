//! Reslice: drain the GPUs' pods, add the mig-parted config when the layout has no builtin
//! name, set `nvidia.com/mig.config`, follow mig-manager to `success` with the planned
//! devices, and end the cordon this operation (or an interrupted reslice) began.

use super::super::cordon::{self, CordonEnd};
use super::super::mig_ack::{self, MigAck, MigVerdict, MigWrite};
use super::super::target::{NodeView, Target};
use super::super::{OpKind, ReslicePlan};
use super::drain::{evict_and_wait, reconcile, settle};
use super::{Run, Step, Stop, cordon_step, read_node, secs, set_unschedulable};
use crate::cluster::labels;

/// Where a reslice reads the node's GPU devices: its capacity (device plugin), or the DRA
/// driver's ResourceSlices for the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Devices {
    Capacity,
    Slices,
}

/// The node's GPU devices now, in device-plugin resource names.
async fn devices_now<T: Target>(t: &mut T, run: &mut Run<'_>, node: &NodeView, from: Devices) -> Step<mig_ack::Caps> {
    match from {
        Devices::Capacity => Ok(node.capacity.clone()),
        Devices::Slices => t.slice_caps(run, &node.name).await,
    }
}

fn caps_shown(c: &mig_ack::Caps) -> String {
    crate::mig::caps_text(c.iter().map(|(r, n)| (r, *n)))
}

fn none_or(v: Vec<String>) -> String {
    if v.is_empty() { "none".to_string() } else { v.join(", ") }
}

/// Follows mig-manager from our label write (`written`: the node as the write returned it)
/// until it has acknowledged this config and reports `success` with the planned devices
/// ([`mig_ack`]), or `failed`, or the time is up.
async fn follow_mig_manager<T: Target>(
    t: &mut T,
    run: &mut Run<'_>,
    r: &ReslicePlan,
    written: &NodeView,
    from: Devices,
) -> Step<String> {
    let node = r.node.as_str();
    let start = t.clock_ms();
    let elapsed = |t: &T| std::time::Duration::from_millis(t.clock_ms().saturating_sub(start));
    let want: mig_ack::Caps = r.capacity_after.iter().filter(|(_, n)| *n > 0).cloned().collect();
    let caps0 = devices_now(t, run, written, from).await?;
    let seen0 = written.seen(caps0.clone());
    let mut ack = MigAck::new(MigWrite { state: seen0.state.clone(), at: written.our_write, caps: caps0 });
    let mut pending_since: Option<u64> = None;
    let mut announced_ack = false;
    let deadline = (start + run.opts.mig_timeout.as_millis() as u64).min(run.deadline_ms);
    loop {
        let n = match t.read_node(run, node).await? {
            Ok(Some(n)) => Some(n),
            Ok(None) => {
                return Err(Stop::Failed(format!("node {node} disappeared while mig-manager was reconfiguring it")));
            }
            // A read that failed through its retries is one missed look, not the end: the
            // wait goes on to its deadline.
            Err(f) if f.transient => {
                run.log(format!("reading node {node} failed ({}); still waiting for mig-manager", f.why)).await?;
                None
            }
            Err(f) => return Err(Stop::Failed(f.message)),
        };
        if let Some(n) = n {
            let config = n.label(labels::MIG_CONFIG).unwrap_or_default().to_string();
            if config != r.config_name {
                return Err(Stop::Failed(format!(
                    "someone else set {}={config} while we waited; the node stays cordoned — look before retrying",
                    labels::MIG_CONFIG
                )));
            }
            let caps = devices_now(t, run, &n, from).await?;
            let seen = n.seen(caps.clone());
            let state = seen.state.clone().unwrap_or_default();
            let grace_over = elapsed(t) >= run.opts.mig_ack_grace;
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
                    let since = *pending_since.get_or_insert_with(|| t.clock_ms());
                    let waited = std::time::Duration::from_millis(t.clock_ms().saturating_sub(since));
                    if waited >= run.opts.mig_stuck {
                        run.blocked(format!(
                            "stuck? {}={st} for {} (flagged after {}); paused: {} — mig-manager's log on {node} says why",
                            labels::MIG_CONFIG_STATE,
                            secs(waited),
                            secs(run.opts.mig_stuck),
                            none_or(n.paused())
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
                        secs(run.opts.mig_ack_grace),
                        caps_shown(&caps)
                    ));
                }
                MigVerdict::Failed => {
                    let note =
                        n.annotations.get(labels::SIM_MIG_MESSAGE).map(|m| format!(" ({m})")).unwrap_or_default();
                    return Err(Stop::Failed(format!(
                        "mig-manager reports {}=failed for {}{note}; left behind: capacity {}, paused clients {}; {node} stays cordoned — see mig-manager's log, fix the config, then reslice again or uncordon",
                        labels::MIG_CONFIG_STATE,
                        r.config_name,
                        caps_shown(&caps),
                        none_or(n.paused())
                    )));
                }
            }
            if t.clock_ms() >= deadline {
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
                    secs(elapsed(t)),
                    labels::MIG_CONFIG,
                    r.config_name
                )));
            }
        } else if t.clock_ms() >= deadline {
            return Err(Stop::Failed(format!(
                "gave up after {}: the API server did not answer reads of {node}; {node} stays cordoned with {}={} set",
                secs(elapsed(t)),
                labels::MIG_CONFIG,
                r.config_name
            )));
        }
        run.sleep(t, run.opts.poll).await?;
    }
}

pub(super) async fn reslice_op<T: Target>(t: &mut T, run: &mut Run<'_>, r: &ReslicePlan) -> Step<String> {
    let node = r.node.as_str();
    run.log(format!(
        "deadline: {} in all ({} for evictions, {} for mig-manager); past it fabrik stops and says what is left",
        secs(run.opts.deadline(OpKind::Reslice)),
        secs(run.opts.drain_timeout),
        secs(run.opts.mig_timeout)
    ))
    .await?;
    cordon_step(t, run, node).await?;
    let confirmed: Vec<(String, String)> =
        r.pods.iter().filter(|p| p.action.must_go()).map(|p| (p.namespace.clone(), p.name.clone())).collect();
    let mine: Vec<_> = t
        .node_pods(run, node)
        .await?
        .into_iter()
        .filter(|p| confirmed.iter().any(|(n, m)| p.namespace == *n && p.name == *m))
        .collect();
    let (evict, notes) = reconcile(&confirmed, &mine, false, t.wall_ms()).map_err(Stop::Failed)?;
    for n in notes {
        run.log(n).await?;
    }
    for _ in evict.len()..confirmed.len() {
        run.progress.skip();
    }
    evict_and_wait(t, run, evict).await?;
    // What the cluster says now: pods that started terminating meanwhile are waited for;
    // on a whole-node reslice no pod may still hold a GPU there.
    let (_, holding) = settle(t, run, node, false).await?;
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
        let what = format!("{}/{}", labels::MIG_CONFIGMAP_NS, labels::MIG_CONFIGMAP);
        if t.add_mig_config(run, &r.config_name, entry).await? {
            run.step(format!("added config {} to {what}", r.config_name)).await?;
        } else {
            run.step(format!("{what} already has config {}", r.config_name)).await?;
        }
    } else {
        run.progress.skip();
    }
    run.check_cancel()?;
    let before =
        read_node(t, run, node).await?.ok_or_else(|| Stop::Failed(format!("node {node} is gone from the cluster")))?;
    let from = if before.capacity.is_empty() { Devices::Slices } else { Devices::Capacity };
    let already = before.label(labels::MIG_CONFIG) == Some(r.config_name.as_str())
        && before.label(labels::MIG_CONFIG_STATE) == Some("success");
    let applied = if already {
        // The label would not change, so mig-manager will not act: what the node offers is
        // the whole answer.
        let want: mig_ack::Caps = r.capacity_after.iter().filter(|(_, n)| *n > 0).cloned().collect();
        let have = devices_now(t, run, &before, from).await?;
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
        let written = t.set_mig_config(run, r).await?;
        run.step(format!("set {}={} on {node}", labels::MIG_CONFIG, r.config_name)).await?;
        follow_mig_manager(t, run, r, &written, from).await?
    };
    run.log(format!("{}=success: {applied}", labels::MIG_CONFIG_STATE)).await?;
    let (was_cordoned, mark) = run.cordon_before.clone().unwrap_or((r.was_cordoned, None));
    match cordon::reslice_end(node, was_cordoned, mark.as_ref()) {
        CordonEnd::Uncordon(line) => {
            set_unschedulable(t, run, node, false).await?;
            run.step(line).await?;
        }
        CordonEnd::Keep(line) => run.step(line).await?,
    }
    Ok(format!("{node} runs {}: {applied}", r.config_name))
}
