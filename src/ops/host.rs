//! Power and inspection of the Metal3 BareMetalHost under a node, through the
//! baremetal-operator's own API: a reboot is the `reboot.metal3.io` annotation (the operator
//! powers the host off, removes the annotation once it is off, and powers it on again), power
//! off / on is `spec.online`, re-inspection the `inspect.metal3.io` annotation (honoured only
//! on an available host). fabrik writes the request and says done when the operator's status
//! says so: `status.poweredOn` as asked, the annotation gone.

use super::{OpKind, OpRequest, Plan, PlanDetail, PlanError, count};
use crate::model::{BareMetalHost, Fleet};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostAction {
    Reboot,
    PowerOff,
    PowerOn,
    Inspect,
}

impl HostAction {
    pub fn as_str(self) -> &'static str {
        match self {
            HostAction::Reboot => "reboot",
            HostAction::PowerOff => "power-off",
            HostAction::PowerOn => "power-on",
            HostAction::Inspect => "inspect",
        }
    }

    /// `reboot`, `off`, `power-off`, `on`, `inspect`…; `None` for anything else.
    pub fn parse(s: &str) -> Option<HostAction> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "reboot" | "restart" => Some(HostAction::Reboot),
            "off" | "power-off" | "poweroff" => Some(HostAction::PowerOff),
            "on" | "power-on" | "poweron" => Some(HostAction::PowerOn),
            "inspect" | "reinspect" | "re-inspect" => Some(HostAction::Inspect),
            _ => None,
        }
    }

    pub fn kind(self) -> OpKind {
        match self {
            HostAction::Reboot => OpKind::RebootHost,
            HostAction::PowerOff | HostAction::PowerOn => OpKind::PowerHost,
            HostAction::Inspect => OpKind::InspectHost,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct HostPlan {
    pub node: String,
    pub namespace: String,
    pub host: String,
    pub action: HostAction,
}

impl HostPlan {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.host)
    }
}

/// The host `host` names (`namespace/name`), with the node its Machine became (empty for a
/// spare): for a host picked in the hosts view.
fn by_key<'f>(fleet: &'f Fleet, node: &str, host: &str) -> Result<(&'f BareMetalHost, String), PlanError> {
    let h = fleet.hosts.get(host).ok_or_else(|| {
        PlanError::Invalid(format!(
            "no BareMetalHost {host} in view: give it as namespace/name, as the hosts view (O) lists it"
        ))
    })?;
    let nodes = fleet.nodes_of_host(h);
    let node = if node.is_empty() { nodes.first().cloned().unwrap_or_default() } else { node.to_string() };
    Ok((h, node))
}

pub(super) fn plan(
    fleet: &Fleet,
    node: &str,
    host: Option<&str>,
    action: HostAction,
    request: OpRequest,
) -> Result<Plan, PlanError> {
    if let Some(key) = host {
        let (h, node) = by_key(fleet, node, key)?;
        return plan_for(fleet, &node, h, action, request);
    }
    fleet.node_by_name(node).ok_or_else(|| PlanError::NodeNotFound(node.to_string()))?;
    let h: &BareMetalHost = fleet.host_of_node(node).ok_or_else(|| {
        let via = match fleet.machine_of_node(node) {
            None => "it has no Cluster API Machine in view (none names it in status.nodeRef)".to_string(),
            Some(m) if m.provider_id.is_empty() => format!("its Machine {} has no spec.providerID yet", m.key()),
            Some(m) => format!(
                "its Machine {} names {:?}, which is no BareMetalHost in view (metal3://<namespace>/<host>/<machine> or metal3://<uid>)",
                m.key(),
                m.provider_id
            ),
        };
        PlanError::Invalid(format!(
            "{node} has no Metal3 BareMetalHost fabrik can reach: {via}. Power it through its BMC, or run fabrik \
             against the management cluster that holds its Machine and host"
        ))
    })?;
    plan_for(fleet, node, h, action, request)
}

/// The plan for host `h`, which serves `node` (empty: no node of this cockpit).
fn plan_for(
    fleet: &Fleet,
    node: &str,
    h: &BareMetalHost,
    action: HostAction,
    request: OpRequest,
) -> Result<Plan, PlanError> {
    let pods = fleet.node_by_name(node).and_then(|id| fleet.node(id)).map_or(0, |n| n.pods);
    let of_node = if node.is_empty() { String::new() } else { format!(" of node {node}") };
    let key = h.key();
    let mut effects = Vec::new();
    let mut warnings = Vec::new();
    let mut blockers = Vec::new();
    let state = if h.state.is_empty() { "no state yet" } else { h.state.as_str() };
    let stops_work = |warnings: &mut Vec<String>| {
        if pods > 0 {
            let verb = if pods == 1 { "stops" } else { "stop" };
            warnings.push(format!(
                "{} on {node} {verb} with the host; drain {node} first (D) to move them",
                count(pods as usize, "GPU pod")
            ));
        }
    };
    let title = match action {
        HostAction::Reboot => {
            effects.push(format!(
                "annotate BareMetalHost {key} with reboot.metal3.io: the baremetal-operator powers it off, removes \
                 the annotation once it is off, and powers it on again"
            ));
            effects.push("done when the annotation is gone and the operator reports the host powered on".into());
            if !h.takes_reboot() {
                blockers.push(format!(
                    "the operator reboots a host on request only once it is provisioned; {key} is {state} \
                     (an available host it reboots only when forced, which fabrik does not do)"
                ));
            }
            if !h.online {
                blockers.push(format!("{key} is asked off (spec.online: false): power it on instead"));
            }
            if h.reboot_pending {
                warnings.push(format!(
                    "a reboot of {key} is asked already (a reboot.metal3.io annotation); this waits for it"
                ));
            }
            stops_work(&mut warnings);
            format!("Reboot host {key}{of_node}")
        }
        HostAction::PowerOff | HostAction::PowerOn => {
            let on = action == HostAction::PowerOn;
            effects.push(format!(
                "set spec.online: {on} on BareMetalHost {key}: the baremetal-operator powers it {}",
                if on { "on" } else { "off" }
            ));
            effects.push(format!("done when the operator reports the host powered {}", if on { "on" } else { "off" }));
            if h.online == on && h.powered_on == on {
                warnings
                    .push(format!("{key} is powered {} already; this changes nothing", if on { "on" } else { "off" }));
            }
            if !h.manages_power() {
                warnings.push(format!(
                    "the operator manages power once the host is provisioned or available; {key} is {state}, so \
                     this may wait until then"
                ));
            }
            if !on {
                stops_work(&mut warnings);
            }
            format!("Power {} host {key}{of_node}", if on { "on" } else { "off" })
        }
        HostAction::Inspect => {
            effects.push(format!(
                "annotate BareMetalHost {key} with inspect.metal3.io: the baremetal-operator boots it into its \
                 inspection image and reads its hardware again"
            ));
            effects.push("done when the operator has taken the request and the host is available again".into());
            if !h.takes_inspect() {
                blockers.push(format!(
                    "the operator inspects again only an available host (a provisioned one would be rebooted into \
                     the inspection image); {key} is {state}: release it from its Machine first"
                ));
            }
            format!("Inspect host {key}{of_node} again")
        }
    };
    if h.in_error() {
        warnings.push(format!("{key} is in error now: {}", h.state_text()));
    }
    Ok(Plan {
        request,
        kind: action.kind(),
        title,
        target: key,
        effects,
        warnings,
        blockers,
        detail: PlanDetail::Host(HostPlan {
            node: node.to_string(),
            namespace: h.namespace.clone(),
            host: h.name.clone(),
            action,
        }),
    })
}
