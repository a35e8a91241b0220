//! MIG reslice planning: validate the layout against the GPU model's catalog, find the
//! pods that must leave the GPUs first, and say what capacity the node will advertise
//! afterwards. Execution follows mig-manager's label protocol (protocols.md §1).

use std::collections::BTreeMap;

use super::cordon::{CordonEnd, CordonMark, preview_line, reslice_end};
use super::drain::{DrainPod, select_pods};
use super::{OpKind, OpRequest, Plan, PlanDetail, PlanError};
use crate::mig::{self, GpuModel, Layout, PlacedInstance, capacity, caps_text};
use crate::model::{Fleet, MigConfigState, PodId};

#[derive(Clone, Debug, PartialEq)]
pub struct GpuReslice {
    pub index: u8,
    pub uuid: String,
    pub before: Vec<PlacedInstance>,
    pub before_mig: bool,
    /// `None`: MIG disabled after the change.
    pub after: Option<Vec<PlacedInstance>>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ReslicePlan {
    pub node: String,
    pub model: GpuModel,
    pub gpus: Vec<GpuReslice>,
    /// The value `nvidia.com/mig.config` is set to.
    pub config_name: String,
    /// A mig-parted config entry to add first, for a layout that has no builtin name.
    pub custom_config: Option<String>,
    pub pods: Vec<DrainPod>,
    /// Every GPU of the node changes: no pod holding a GPU there may stay.
    pub whole_node: bool,
    pub was_cordoned: bool,
    /// Every target GPU already has the layout: mig-manager may have nothing to write.
    pub layout_unchanged: bool,
    /// Extended resources the node advertises before and after.
    pub capacity_before: Vec<(String, i64)>,
    pub capacity_after: Vec<(String, i64)>,
}

pub(super) fn plan(
    fleet: &Fleet,
    node: &str,
    gpus: &[u8],
    layout_input: &str,
    request: OpRequest,
) -> Result<Plan, PlanError> {
    let id = fleet.node_by_name(node).ok_or_else(|| PlanError::NodeNotFound(node.to_string()))?;
    let n = fleet.node(id).ok_or_else(|| PlanError::NodeNotFound(node.to_string()))?;
    let model = n.gpu_model.ok_or_else(|| PlanError::NotMigCapable { node: node.to_string() })?;
    if n.gpus.is_empty() {
        return Err(PlanError::NotMigCapable { node: node.to_string() });
    }
    let layout_input = layout_input.trim();
    if layout_input.is_empty() {
        return Err(PlanError::Invalid(format!(
            "no layout given: type a config name such as all-balanced or a list such as {}",
            example_layout(model)
        )));
    }
    let layout = mig::parse_layout(model, layout_input)?;
    let after = match &layout {
        Layout::Disabled => None,
        Layout::Enabled(profiles) => Some(mig::plan(model, profiles)?),
    };
    let max = n.gpus.iter().filter_map(|g| fleet.gpu(*g)).map(|g| g.index).max().unwrap_or(0);
    for &i in gpus {
        if !n.gpus.iter().filter_map(|g| fleet.gpu(*g)).any(|g| g.index == i) {
            return Err(PlanError::NoSuchGpu { node: node.to_string(), index: i, max });
        }
    }
    let whole_node = gpus.is_empty() || n.gpus.iter().filter_map(|g| fleet.gpu(*g)).all(|g| gpus.contains(&g.index));
    if let Some(why) = partitioned_by_dra(
        node,
        n.gpus.iter().filter_map(|g| fleet.gpu(*g)).filter(|g| whole_node || gpus.contains(&g.index)),
    ) {
        return Err(PlanError::Invalid(why));
    }
    let mut targets = Vec::new();
    let mut affected: Vec<PodId> = Vec::new();
    for g in n.gpus.iter().filter_map(|g| fleet.gpu(*g)) {
        if !whole_node && !gpus.contains(&g.index) {
            continue;
        }
        affected.extend(g.pods.iter().copied());
        affected.extend(g.instances.iter().filter_map(|i| i.pod));
        targets.push(GpuReslice {
            index: g.index,
            uuid: fleet.str_of(g.uuid).to_string(),
            before: g.instances.iter().map(|i| i.placement).collect(),
            before_mig: g.mig_enabled,
            after: after.clone(),
        });
    }
    affected.sort();
    affected.dedup();
    // Pods that hold devices the cluster does not place (device plugin, no node agent) may
    // be on the GPUs being resliced: a MIG instance of a profile those GPUs have and no
    // known pod holds, or a whole GPU when one of them is a free-looking full GPU. They
    // must go too, or mig-manager would tear down an instance in use.
    let mut unplaced: Vec<String> = Vec::new();
    if !whole_node {
        let target_gpus: Vec<&crate::model::Gpu> =
            n.gpus.iter().filter_map(|g| fleet.gpu(*g)).filter(|g| gpus.contains(&g.index)).collect();
        let free_full = target_gpus.iter().any(|g| !g.mig_enabled && g.pods.is_empty());
        for &pid in fleet.pods_on_node(id) {
            let Some(p) = fleet.pod(pid) else { continue };
            if !p.phase.holds_devices() || affected.contains(&pid) {
                continue;
            }
            let mig_maybe = p.mig_unbound.iter().any(|&(r, k)| {
                k > 0
                    && target_gpus.iter().any(|g| {
                        mig::profile_from_resource(g.model, fleet.str_of(r)).is_some_and(|prof| {
                            g.instances.iter().any(|i| i.pod.is_none() && i.placement.profile == prof)
                        })
                    })
            });
            let whole_maybe = free_full && (p.bound_gpus.len() as u32) < p.gpus as u32;
            if mig_maybe || whole_maybe {
                affected.push(pid);
                unplaced.push(format!("{}/{}", fleet.str_of(p.namespace), p.name));
            }
        }
    }
    // Pods the node runs that want MIG devices but whose binding we do not know also use
    // the GPUs being resliced, when the whole node changes.
    if whole_node {
        for &pid in fleet.pods_on_node(id) {
            if let Some(p) = fleet.pod(pid)
                && p.phase.holds_devices()
                && (p.gpus > 0 || !p.mig.is_empty())
                && !affected.contains(&pid)
            {
                affected.push(pid);
            }
        }
    }
    let pods = select_pods(fleet, &affected, false);

    let (config_name, custom_config) = if whole_node {
        let name = mig::layout_config_name(model, &layout);
        let custom = name.starts_with("custom-").then(|| mig::mig_parted_yaml_for(model, &name, &layout));
        (name, custom)
    } else {
        let name = format!(
            "custom-{}-gpu{}-{}",
            node,
            targets.iter().map(|t| t.index.to_string()).collect::<Vec<_>>().join("."),
            mig::layout_config_name(model, &layout).trim_start_matches("custom-").trim_start_matches("all-")
        );
        let body = per_device_yaml(
            fleet,
            "",
            n.gpus.iter().filter_map(|g| fleet.gpu(*g)).map(|g| {
                if targets.iter().any(|t| t.index == g.index) {
                    (g.index, layout.clone())
                } else if g.mig_enabled {
                    (g.index, Layout::Enabled(g.instances.iter().map(|i| i.placement.profile).collect()))
                } else {
                    (g.index, Layout::Disabled)
                }
            }),
            model,
        );
        // The other GPUs' layouts are part of the config: the name carries a digest of the
        // whole entry, so a name already in the ConfigMap always means this very content.
        let name = format!("{name}-{:06x}", digest(&body) & 0xff_ffff);
        let yaml = body.replacen("  :\n", &format!("  {name}:\n"), 1);
        (name, Some(yaml))
    };

    let before = capacity(
        model,
        n.gpus
            .iter()
            .filter_map(|g| fleet.gpu(*g))
            .map(|g| (g.mig_enabled, g.instances.iter().map(|i| i.placement).collect::<Vec<_>>())),
    );
    let after_caps = capacity(
        model,
        n.gpus.iter().filter_map(|g| fleet.gpu(*g)).map(|g| match targets.iter().find(|t| t.index == g.index) {
            Some(t) => (t.after.is_some(), t.after.clone().unwrap_or_default()),
            None => (g.mig_enabled, g.instances.iter().map(|i| i.placement).collect()),
        }),
    );

    let mut effects = Vec::new();
    let mut warnings = Vec::new();
    let mut blockers = Vec::new();
    let scope = if whole_node {
        format!("all {} GPUs", targets.len())
    } else {
        format!("GPU {}", targets.iter().map(|t| t.index.to_string()).collect::<Vec<_>>().join(", "))
    };
    let layout_text = describe_layout(model, &layout);
    let mark = CordonMark::parse(fleet.str_of(n.cordoned_by));
    let restores = matches!(reslice_end(node, n.cordoned, mark.as_ref()), CordonEnd::Uncordon(_));
    if let Some(line) = preview_line(node, n.cordoned, mark.as_ref()) {
        effects.push(line);
    } else {
        effects.push(format!("cordon {node}"));
    }
    let evict: Vec<&DrainPod> = pods.iter().filter(|p| matches!(p.action, super::PodAction::Evict)).collect();
    effects.push(format!("evict {} that use {scope}", super::count(evict.len(), "pod")));
    for p in &evict {
        effects.push(format!("  evict {}/{}", p.namespace, p.name));
    }
    let waiting: Vec<&DrainPod> = pods.iter().filter(|p| matches!(p.action, super::PodAction::Wait(_))).collect();
    for p in &waiting {
        if let super::PodAction::Wait(why) = &p.action {
            effects.push(format!("  wait for {}/{} to be gone: {why}", p.namespace, p.name));
        }
    }
    warnings.extend(super::drain::finalizer_warnings(fleet, &waiting));
    if !unplaced.is_empty() {
        warnings.push(format!(
            "{} {} devices the cluster does not place (device plugin, no node agent on {node}) and may be on {scope}: evicted too ({}); a node agent would say which GPU each one has",
            super::count(unplaced.len(), "pod"),
            if unplaced.len() == 1 { "holds" } else { "hold" },
            unplaced.join(", ")
        ));
    }
    if let Some(_yaml) = &custom_config {
        effects.push(format!("add mig-parted config {config_name} to the mig-parted ConfigMap"));
    }
    effects.push(format!("set nvidia.com/mig.config={config_name} ({scope} → {layout_text})"));
    effects.push("wait until mig-manager acknowledges this config (nvidia.com/mig.config.state moves after the label is written: pending → success; mig-manager pauses the device plugin, DCGM and GFD meanwhile) and the node offers the planned devices".to_string());
    if !n.cordoned {
        effects.push(format!("uncordon {node} once the new layout is in place"));
    } else if restores {
        effects.push(format!("uncordon {node} once the new layout is in place (the interrupted operation's cordon)"));
    }
    effects.push(format!(
        "capacity: {} → {}",
        caps_text(before.iter().map(|(r, n)| (r, *n))),
        caps_text(after_caps.iter().map(|(r, n)| (r, *n)))
    ));
    for p in &pods {
        if let super::PodAction::Refuse(why) = &p.action {
            blockers.push(format!(
                "{}/{} uses these GPUs and {why}; stop it first or drain the node with force",
                p.namespace, p.name
            ));
        }
    }
    match n.mig_state {
        MigConfigState::Pending | MigConfigState::Rebooting => warnings.push(format!(
            "{node} is already {} for {}: the new label supersedes it",
            n.mig_state.as_str(),
            fleet.str_of(n.mig_config)
        )),
        MigConfigState::Failed => {
            warnings.push(format!("the last MIG change on {node} ({}) failed", fleet.str_of(n.mig_config)))
        }
        _ => {}
    }
    let opts = super::exec::ExecOptions::default();
    effects.push(format!(
        "deadline: {} in all ({} for evictions, {} for mig-manager); when it passes, fabrik stops and says what is left",
        super::minutes(opts.deadline(OpKind::Reslice)),
        super::minutes(opts.drain_timeout),
        super::minutes(opts.mig_timeout)
    ));
    let unchanged = targets
        .iter()
        .all(|t| t.before_mig == t.after.is_some() && same_layout(&t.before, t.after.as_deref().unwrap_or(&[])));
    if unchanged {
        warnings.push(format!("{scope} already have this layout: nothing would change"));
    }
    if !n.ready {
        blockers.push(format!("{node} is NotReady: mig-manager cannot run there until it is back"));
    }
    if let Some(pdb_note) = pods.iter().find_map(|p| p.pdb.as_ref().filter(|(_, a)| *a == 0).map(|(n, _)| n.clone())) {
        warnings.push(format!("PodDisruptionBudget {pdb_note} allows 0 disruptions now: evictions will wait"));
    }
    Ok(Plan {
        request,
        kind: OpKind::Reslice,
        title: format!("Reslice {scope} on {node} to {layout_text}"),
        target: node.to_string(),
        effects,
        warnings,
        blockers,
        detail: PlanDetail::Reslice(ReslicePlan {
            node: node.to_string(),
            model,
            gpus: targets,
            config_name,
            custom_config,
            pods,
            whole_node,
            was_cordoned: n.cordoned,
            layout_unchanged: unchanged,
            capacity_before: before,
            capacity_after: after_caps,
        }),
    })
}

/// FNV-1a: a stable digest for config names (not a security boundary).
fn digest(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn same_layout(a: &[PlacedInstance], b: &[PlacedInstance]) -> bool {
    let mut a: Vec<_> = a.iter().map(|p| (p.profile, p.start)).collect();
    let mut b: Vec<_> = b.iter().map(|p| (p.profile, p.start)).collect();
    a.sort();
    b.sort();
    a == b
}

pub fn describe_layout(model: GpuModel, layout: &Layout) -> String {
    match layout {
        Layout::Disabled => "MIG disabled".to_string(),
        Layout::Enabled(p) if p.is_empty() => "MIG enabled, no instances".to_string(),
        Layout::Enabled(p) => {
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for id in p {
                *counts.entry(mig::profile(model, *id).name).or_default() += 1;
            }
            counts.iter().map(|(n, c)| format!("{c}×{n}")).collect::<Vec<_>>().join(" + ")
        }
    }
}

fn example_layout(model: GpuModel) -> String {
    mig::config_names(model)
        .into_iter()
        .find(|n| n.starts_with("all-") && n != "all-disabled" && n != "all-enabled" && n != "all-balanced")
        .unwrap_or_else(|| "all-balanced".into())
}

fn per_device_yaml(fleet: &Fleet, name: &str, layouts: impl Iterator<Item = (u8, Layout)>, model: GpuModel) -> String {
    let _ = fleet;
    let mut out = format!("  {name}:\n");
    for (index, layout) in layouts {
        out.push_str(&format!("    - devices: [{index}]\n"));
        match layout {
            Layout::Disabled => out.push_str("      mig-enabled: false\n"),
            Layout::Enabled(p) => {
                out.push_str("      mig-enabled: true\n      mig-devices:\n");
                let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
                for id in &p {
                    *counts.entry(mig::profile(model, *id).name).or_default() += 1;
                }
                for (prof, c) in counts {
                    out.push_str(&format!("        \"{prof}\": {c}\n"));
                }
            }
        }
    }
    out
}

/// Why a reslice means nothing on these GPUs, when the NVIDIA DRA driver partitions them per
/// claim (dynamic MIG, `DRAPartitionableDevices`): mig-manager does not own their layout, the
/// claims do. Says what a new claim could get instead.
pub fn partitioned_by_dra<'a>(node: &str, gpus: impl Iterator<Item = &'a crate::model::Gpu>) -> Option<String> {
    let parts: Vec<String> = gpus
        .filter_map(|g| {
            let d = g.dra.as_deref().filter(|d| d.partitionable)?;
            let mut fits: Vec<String> = Vec::new();
            if d.whole_fits {
                fits.push("the whole GPU".into());
            }
            fits.extend(d.fits.iter().filter(|c| c.fits > 0).map(|c| format!("{}×{}", c.profile, c.fits)));
            let fits = if fits.is_empty() { "nothing (every counter is taken)".to_string() } else { fits.join(", ") };
            Some(format!("GPU {}: {fits}", g.index))
        })
        .collect();
    if parts.is_empty() {
        return None;
    }
    Some(format!(
        "{node}'s GPUs are partitioned per claim by the NVIDIA DRA driver (dynamic MIG): mig-manager has nothing to \
         reslice there — a partition exists while a claim holds it. A new mig.nvidia.com claim could get now: {}",
        parts.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Delta, NodeSpec};
    use crate::ops::{OpRequest, plan as plan_op};

    /// The demo fleet with one H100 node's cordon set as the API would show it.
    fn cordoned(mark: &str) -> (Fleet, String) {
        let (_, mut f) = crate::testing::demo_fleet(42, 48, 3, Default::default());
        let id = f
            .node_ids()
            .find(|n| f.node(*n).is_some_and(|n| n.gpu_model == Some(GpuModel::H100_80GB) && n.ready))
            .expect("an H100 node");
        let n = f.node(id).expect("node").clone();
        let name = f.str_of(n.name).to_string();
        let spec = NodeSpec {
            name: name.clone(),
            labels: n.labels.iter().map(|(k, v)| (f.str_of(*k).to_string(), f.str_of(*v).to_string())).collect(),
            ready: n.ready,
            cordoned: true,
            cordoned_by: mark.to_string(),
            gpu_model: n.gpu_model,
            capacity: n.capacity.iter().map(|(k, v)| (f.str_of(*k).to_string(), *v)).collect(),
            allocatable: n.allocatable.iter().map(|(k, v)| (f.str_of(*k).to_string(), *v)).collect(),
            mig_config: f.str_of(n.mig_config).to_string(),
            mig_state: n.mig_state,
            mig_state_since: None,
            ready_since: None,
            created: n.created,
        };
        f.apply(Delta::NodeUpsert(spec));
        (f, name)
    }

    #[test]
    fn the_preview_says_an_interrupted_reslices_cordon_is_undone_and_states_the_deadline() {
        let mark = CordonMark::new("s-9", "reslice", "admin", "2026-12-03T16:00:00Z").value();
        let (f, node) = cordoned(&mark);
        let req = OpRequest::Reslice { node: node.clone(), gpus: vec![], layout: "all-balanced".into() };
        let p = plan_op(&f, &req).expect("plan");
        assert!(
            p.effects.iter().any(|e| e
                == &format!(
                    "{node} is cordoned by fabrik op s-9 (reslice, interrupted); will be uncordoned at the end"
                )),
            "{:#?}",
            p.effects
        );
        assert!(p.effects.iter().any(|e| e.starts_with(&format!("uncordon {node} once"))), "{:#?}", p.effects);
        assert!(
            p.effects.iter().any(|e| e.starts_with("deadline: 40m in all (10m for evictions, 30m for mig-manager)"))
        );
        // A person's cordon (no mark, or one fabrik did not write) stays, and the preview says so.
        for other in ["", "maintenance window", &CordonMark::new("s-1", "drain", "admin", "t").value()] {
            let (f, node) = cordoned(other);
            let p =
                plan_op(&f, &OpRequest::Reslice { node: node.clone(), gpus: vec![], layout: "all-balanced".into() })
                    .expect("plan");
            assert!(
                p.effects.iter().any(|e| e.starts_with(&format!("{node} stays cordoned"))),
                "{other}: {:#?}",
                p.effects
            );
            assert!(!p.effects.iter().any(|e| e.starts_with("uncordon")), "{other}: {:#?}", p.effects);
        }
        let d = plan_op(&f, &OpRequest::Drain { node, force: true }).expect("drain plan");
        assert!(d.effects.iter().any(|e| e.starts_with("deadline: 10m")), "{:#?}", d.effects);
    }
}
