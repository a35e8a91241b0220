//! Tainting one GPU: the DRA-era cordon for a single device (`DRADeviceTaints`). fabrik
//! writes a `DeviceTaintRule` (`resource.k8s.io/v1alpha3`) per device of the GPU (the whole
//! GPU and its MIG devices or partitions, as its ResourceSlice names them), named after the
//! GPU and labelled as fabrik's, so the untaint removes exactly those and never a rule or a
//! driver taint someone else put there. `NoSchedule`: no new claim gets the GPU, its pods keep
//! running. `NoExecute`: the device taint eviction controller deletes the pods using it; the
//! operation is done when they are gone.

use super::{OpKind, OpRequest, Plan, PlanDetail, PlanError, count};
use crate::model::{Fleet, GpuId};

/// The taint key fabrik writes; the value says why.
pub const TAINT_KEY: &str = "fabrik.io/gpu-taint";
/// The label on the rules fabrik writes: `<node>.gpu-<index>`.
pub const RULE_LABEL: &str = "fabrik.io/gpu-taint-of";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaintEffect {
    NoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
    /// `noschedule`, `NoExecute`, `noexec`...; `None` for anything else.
    pub fn parse(s: &str) -> Option<TaintEffect> {
        match s.trim().to_ascii_lowercase().as_str() {
            "noschedule" | "nosched" => Some(TaintEffect::NoSchedule),
            "noexecute" | "noexec" => Some(TaintEffect::NoExecute),
            _ => None,
        }
    }
}

/// One DeviceTaintRule: its name and the device it selects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleSpec {
    pub name: String,
    pub pool: String,
    pub device: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TaintPlan {
    pub node: String,
    pub gpu: u8,
    pub uuid: String,
    /// `None`: remove fabrik's taint.
    pub effect: Option<TaintEffect>,
    pub value: String,
    /// The rules to write (taint) or to delete (untaint).
    pub rules: Vec<RuleSpec>,
    /// `namespace/name` of the pods using the GPU now: a `NoExecute` taint deletes them.
    pub pods: Vec<String>,
}

impl TaintPlan {
    /// The label value that marks the rules of this GPU.
    pub fn label(&self) -> String {
        format!("{}.gpu-{}", self.node, self.gpu)
    }
}

/// `fabrik-gpu-taint-<node>-gpu-<i>-<device>`, cut to a valid object name.
pub fn rule_name(node: &str, gpu: u8, device: &str) -> String {
    let raw = format!("fabrik-{node}-gpu{gpu}-{device}").to_ascii_lowercase();
    let mut name: String =
        raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '-' }).collect();
    if name.len() > 253 {
        name.truncate(253);
    }
    name.trim_end_matches(['-', '.']).to_string()
}

fn find_gpu(fleet: &Fleet, node: &str, gpu: u8) -> Result<GpuId, PlanError> {
    let id = fleet.node_by_name(node).ok_or_else(|| PlanError::NodeNotFound(node.to_string()))?;
    let n = fleet.node(id).ok_or_else(|| PlanError::NodeNotFound(node.to_string()))?;
    let max = n.gpus.iter().filter_map(|g| fleet.gpu(*g)).map(|g| g.index).max().unwrap_or(0);
    n.gpus.iter().copied().find(|g| fleet.gpu(*g).is_some_and(|g| g.index == gpu)).ok_or_else(|| PlanError::NoSuchGpu {
        node: node.to_string(),
        index: gpu,
        max,
    })
}

pub(super) fn plan(
    fleet: &Fleet,
    node: &str,
    gpu: u8,
    effect: Option<TaintEffect>,
    value: &str,
    request: OpRequest,
) -> Result<Plan, PlanError> {
    let gid = find_gpu(fleet, node, gpu)?;
    let g = fleet.gpu(gid).ok_or_else(|| PlanError::NodeNotFound(node.to_string()))?;
    let what = format!("GPU {gpu} of {node}");
    let mut effects = Vec::new();
    let mut warnings = Vec::new();
    let mut blockers = Vec::new();
    let dra = g.dra.as_deref().filter(|d| !d.devices.is_empty());
    let Some(dra) = dra else {
        return Err(PlanError::Invalid(format!(
            "{what} is handed out by the device plugin, not by DRA: a device taint needs the GPU in a \
             ResourceSlice. Cordon or drain {node} instead (keys c / d on the fleet view)"
        )));
    };
    let value = value.trim();
    if value.len() > 63 || !value.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        return Err(PlanError::Invalid(format!(
            "{value:?} cannot be a taint value: at most 63 letters, digits, '-', '_' or '.' (e.g. maintenance, xid-79)"
        )));
    }
    let mut pods: Vec<String> = g.pods.iter().filter_map(|p| fleet.pod(*p)).map(|p| fleet.pod_display(p)).collect();
    pods.extend(g.instances.iter().filter_map(|i| i.pod).filter_map(|p| fleet.pod(p)).map(|p| fleet.pod_display(p)));
    pods.sort();
    pods.dedup();
    let mine: Vec<&crate::model::DeviceTaint> =
        dra.taints.iter().filter(|t| t.rule.as_deref().is_some_and(|r| r.starts_with("fabrik-"))).collect();
    let others: Vec<String> = dra.taints.iter().filter(|t| !mine.contains(t)).map(taint_source).collect();
    let rules: Vec<RuleSpec> = match effect {
        Some(_) => dra
            .devices
            .iter()
            .map(|d| RuleSpec { name: rule_name(node, gpu, d), pool: dra.pool.clone(), device: d.clone() })
            .collect(),
        None => {
            let mut names: Vec<&str> = mine.iter().filter_map(|t| t.rule.as_deref()).collect();
            names.sort_unstable();
            names.dedup();
            names
                .into_iter()
                .map(|n| {
                    let device = mine.iter().find(|t| t.rule.as_deref() == Some(n)).map_or("", |t| &t.device);
                    RuleSpec { name: n.to_string(), pool: dra.pool.clone(), device: device.to_string() }
                })
                .collect()
        }
    };
    let (kind, title) = match effect {
        Some(e) => {
            let taint = format!("{TAINT_KEY}={value}:{}", e.as_str());
            effects.push(format!(
                "create {} (resource.k8s.io/v1alpha3) selecting {} of pool {} (driver gpu.nvidia.com): taint {taint}",
                count(rules.len(), "DeviceTaintRule"),
                rules.iter().map(|r| r.device.as_str()).collect::<Vec<_>>().join(", "),
                dra.pool
            ));
            match e {
                TaintEffect::NoSchedule => {
                    effects.push(format!(
                        "no new claim is allocated {what}; {} using it keep running",
                        count(pods.len(), "pod")
                    ));
                }
                TaintEffect::NoExecute => {
                    if pods.is_empty() {
                        effects.push(format!("no pod uses {what} now; none will be scheduled on it"));
                    } else {
                        effects.push(format!(
                            "the device taint eviction controller deletes the {} using it: {}; done when they are gone",
                            count(pods.len(), "pod"),
                            pods.join(", ")
                        ));
                        warnings.push(
                            "pods are deleted, not evicted: PodDisruptionBudgets do not hold them (KEP-5055); \
                             drain the node instead to respect them"
                                .into(),
                        );
                    }
                }
            }
            if mine.iter().any(|t| t.effect == e.as_str() && t.value == value) {
                warnings.push(format!("{what} already has this taint from fabrik; this changes nothing"));
            }
            (OpKind::TaintGpu, format!("Taint {what} {}", e.as_str()))
        }
        None => {
            if rules.is_empty() {
                blockers.push(format!("{what} has no taint from fabrik to remove"));
            } else {
                effects.push(format!(
                    "delete {}: {}",
                    count(rules.len(), "DeviceTaintRule"),
                    rules.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", ")
                ));
                effects.push(format!("{what} can be allocated to new claims again"));
            }
            (OpKind::UntaintGpu, format!("Untaint {what}"))
        }
    };
    if !others.is_empty() {
        warnings.push(format!("{what} is also tainted by {} (not fabrik's to change)", others.join(", ")));
    }
    if fleet.node(g.node).is_some_and(|n| n.cordoned) && effect.is_some() {
        warnings.push(format!("{node} is cordoned already: no new pod lands on it anyway"));
    }
    Ok(Plan {
        request,
        kind,
        title,
        target: what.clone(),
        effects,
        warnings,
        blockers,
        detail: PlanDetail::Taint(TaintPlan {
            node: node.to_string(),
            gpu,
            uuid: fleet.str_of(g.uuid).to_string(),
            effect,
            value: value.to_string(),
            rules,
            pods,
        }),
    })
}

fn taint_source(t: &crate::model::DeviceTaint) -> String {
    match &t.rule {
        Some(r) => format!("DeviceTaintRule {r} ({})", t.text()),
        None => format!("its driver ({})", t.text()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_names_are_valid_object_names() {
        assert_eq!(rule_name("H100-007", 3, "gpu-3"), "fabrik-h100-007-gpu3-gpu-3");
        assert_eq!(rule_name("n", 0, "gpu-0-mig-1g10gb-19-0"), "fabrik-n-gpu0-gpu-0-mig-1g10gb-19-0");
        assert!(rule_name(&"x".repeat(300), 1, "gpu-1").len() <= 253);
    }

    #[test]
    fn effects_parse_as_people_type_them() {
        assert_eq!(TaintEffect::parse("noexec"), Some(TaintEffect::NoExecute));
        assert_eq!(TaintEffect::parse(" NoSchedule "), Some(TaintEffect::NoSchedule));
        assert_eq!(TaintEffect::parse("PreferNoSchedule"), None);
    }
}
