//! Cluster API, as the management cluster states it: which Machine a node is, its phase, its
//! failure, and whether a MachineHealthCheck found it unhealthy and its owner is remediating
//! it — the answer to "is this NotReady node a machine being replaced?" — and the objects
//! above the Machines (Clusters, control planes, MachineDeployments, MachineSets,
//! MachineHealthChecks): how many replicas each wants and has ready, and what holds it back.

/// One Machine (`machines.cluster.x-k8s.io`), compact.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Machine {
    pub namespace: String,
    pub name: String,
    /// `spec.clusterName`.
    pub cluster: String,
    /// `status.phase`: Pending, Provisioning, Provisioned, Running, Deleting, Deleted,
    /// Failed, Unknown (empty until the controller sets it).
    pub phase: String,
    /// `status.nodeRef.name`: the node it became.
    pub node: Option<String>,
    /// `spec.providerID`.
    pub provider_id: String,
    /// The failure reason and message (v1beta1 `status.failureReason`/`failureMessage`,
    /// v1beta2 `status.deprecated.v1beta1.*`).
    pub failure: Option<String>,
    /// A MachineHealthCheck found it unhealthy (`HealthCheckSucceeded` False): why.
    pub unhealthy: Option<String>,
    /// Its owner is remediating it (`OwnerRemediated` False, the MachineHealthCheck's
    /// request): what the condition says.
    pub remediating: Option<String>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    pub created: super::Ts,
    /// Its owners, by the labels Cluster API puts on it: `cluster.x-k8s.io/deployment-name`,
    /// `cluster.x-k8s.io/set-name`, `cluster.x-k8s.io/control-plane-name`.
    pub deployment: Option<String>,
    pub set: Option<String>,
    pub control_plane: Option<String>,
    /// `spec.version`: the Kubernetes version it runs.
    pub version: String,
}

impl Machine {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Failed by phase or by a failure reason.
    pub fn failed(&self) -> bool {
        self.phase == "Failed" || self.failure.is_some()
    }

    /// `Running`, `Running, remediating`, `Failed: InsufficientResources …`, `Deleting`.
    pub fn state_text(&self) -> String {
        let mut s = self.state_word();
        if let Some(f) = &self.failure {
            s.push_str(&format!(": {f}"));
        }
        s
    }

    /// Its phase (`Pending` before the controller sets one), `, deleting` while it goes.
    pub fn phase_text(&self) -> String {
        let phase = if self.phase.is_empty() { "Pending" } else { self.phase.as_str() };
        if self.deleting && phase != "Deleting" { format!("{phase}, deleting") } else { phase.to_string() }
    }

    /// [`Machine::state_text`] without the failure's words: `Running, remediating`.
    pub fn state_word(&self) -> String {
        let mut s = self.phase_text();
        if self.remediating.is_some() {
            s.push_str(", remediating");
        } else if self.unhealthy.is_some() {
            s.push_str(", unhealthy");
        }
        s
    }
}

/// The Cluster API objects above the Machines that fabrik shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CapiKind {
    #[default]
    Cluster,
    /// A control plane provider's object (`KubeadmControlPlane`), as `spec.controlPlaneRef` names it.
    ControlPlane,
    MachineDeployment,
    MachineSet,
    MachineHealthCheck,
}

impl CapiKind {
    pub const ALL: [CapiKind; 5] = [
        CapiKind::Cluster,
        CapiKind::ControlPlane,
        CapiKind::MachineDeployment,
        CapiKind::MachineSet,
        CapiKind::MachineHealthCheck,
    ];
    /// Its kind as the API names it (the control plane as its provider, Kubeadm's).
    pub fn name(self) -> &'static str {
        match self {
            CapiKind::Cluster => "Cluster",
            CapiKind::ControlPlane => "KubeadmControlPlane",
            CapiKind::MachineDeployment => "MachineDeployment",
            CapiKind::MachineSet => "MachineSet",
            CapiKind::MachineHealthCheck => "MachineHealthCheck",
        }
    }
}

/// Replica counts as Cluster API states them (`spec.replicas` and `status.*Replicas`);
/// `None` where the object does not say (yet).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Replicas {
    pub desired: Option<u32>,
    pub current: Option<u32>,
    pub ready: Option<u32>,
    pub available: Option<u32>,
    pub up_to_date: Option<u32>,
}

/// A MachineHealthCheck's counts (`status.expectedMachines`, `currentHealthy`,
/// `remediationsAllowed`) and its targets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HealthCounts {
    pub expected: Option<u32>,
    pub healthy: Option<u32>,
    pub remediations_allowed: Option<u32>,
    /// `status.targets`: the Machines it watches.
    pub targets: Vec<String>,
    /// `RemediationAllowed` is False (too many unhealthy: remediation is short-circuited).
    pub blocked: bool,
}

/// One Cluster, control plane, MachineDeployment, MachineSet or MachineHealthCheck, compact.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CapiObject {
    pub kind: CapiKind,
    pub namespace: String,
    pub name: String,
    /// The Cluster it belongs to (`spec.clusterName`, else the `cluster.x-k8s.io/cluster-name`
    /// label or its owner Cluster); a Cluster names itself.
    pub cluster: String,
    /// A MachineSet's MachineDeployment (label `cluster.x-k8s.io/deployment-name`); a
    /// Cluster's control plane (`spec.controlPlaneRef.name`).
    pub owner: Option<String>,
    /// `status.phase` where the kind has one (Cluster, MachineDeployment).
    pub phase: String,
    /// Replicas of a control plane, MachineDeployment or MachineSet; a Cluster's control
    /// plane (v1beta2 `status.controlPlane`).
    pub replicas: Option<Replicas>,
    /// A Cluster's workers (v1beta2 `status.workers`).
    pub workers: Option<Replicas>,
    pub health: Option<HealthCounts>,
    /// The Kubernetes version (`spec.version`, a MachineDeployment's template, a control
    /// plane's `status.version` once reported, else its spec).
    pub version: String,
    /// The conditions that say what goes on (v1beta2 `Deleting`, `Remediating`, `RollingOut`,
    /// `ScalingUp`, `ScalingDown` True), in that order.
    pub doing: Vec<String>,
    /// What holds it back: `Available` (v1beta1 `Ready`) or `RemediationAllowed` False, or a
    /// failure, as `reason: message`.
    pub why: Option<String>,
    pub paused: bool,
    pub deleting: bool,
    pub created: super::Ts,
}

impl CapiObject {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// What it is doing or how it stands, in Cluster API's words: its phase where it has
    /// one, what a True progress condition says, `Available`/`Unavailable`; a
    /// MachineHealthCheck: `remediation blocked`, `N unhealthy`, `healthy`.
    pub fn state_text(&self) -> String {
        let mut s = if let Some(h) = &self.health {
            let sick = match (h.expected, h.healthy) {
                (Some(e), Some(ok)) => e.saturating_sub(ok),
                _ => 0,
            };
            match (h.blocked, sick) {
                (true, _) => "remediation blocked".to_string(),
                (false, 0) if h.expected.is_some() => "healthy".to_string(),
                (false, 0) => String::new(),
                (false, n) => format!("{n} unhealthy"),
            }
        } else if !self.phase.is_empty() {
            self.phase.clone()
        } else if let Some(d) = self.doing.first() {
            d.clone()
        } else {
            match &self.why {
                Some(_) => "Unavailable".to_string(),
                None if self.replicas.is_some_and(|r| r.ready.is_some()) => "Available".to_string(),
                None => String::new(),
            }
        };
        if !self.phase.is_empty() || self.health.is_some() {
            let more: Vec<&String> = self.doing.iter().filter(|d| **d != s).collect();
            for d in more {
                s.push_str(&format!(", {d}"));
            }
        }
        if self.paused {
            s.push_str(", paused");
        }
        if self.deleting && !s.contains("Deleting") {
            s.push_str(", deleting");
        }
        s.trim_start_matches(", ").to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_read_as_cluster_api_says_them() {
        let md = CapiObject {
            kind: CapiKind::MachineDeployment,
            phase: "ScalingUp".into(),
            doing: vec!["ScalingUp".into(), "RollingOut".into()],
            ..Default::default()
        };
        assert_eq!(md.state_text(), "ScalingUp, RollingOut");
        let kcp = CapiObject {
            kind: CapiKind::ControlPlane,
            replicas: Some(Replicas { desired: Some(3), ready: Some(3), ..Default::default() }),
            ..Default::default()
        };
        assert_eq!(kcp.state_text(), "Available");
        let kcp = CapiObject { why: Some("NotAvailable".into()), paused: true, ..kcp };
        assert_eq!(kcp.state_text(), "Unavailable, paused");
        let kcp = CapiObject { doing: vec!["Remediating".into()], ..kcp };
        assert_eq!(kcp.state_text(), "Remediating, paused");
        let mhc = |expected, healthy, blocked| CapiObject {
            kind: CapiKind::MachineHealthCheck,
            health: Some(HealthCounts { expected, healthy, blocked, ..Default::default() }),
            ..Default::default()
        };
        assert_eq!(mhc(Some(4), Some(4), false).state_text(), "healthy");
        assert_eq!(mhc(Some(4), Some(2), false).state_text(), "2 unhealthy");
        assert_eq!(mhc(Some(4), Some(1), true).state_text(), "remediation blocked");
        assert_eq!(mhc(None, None, false).state_text(), "");
        let c = CapiObject { phase: "Deleting".into(), deleting: true, ..Default::default() };
        assert_eq!(c.state_text(), "Deleting");
    }

    #[test]
    fn states_read_as_people_say_them() {
        let m = Machine { phase: "Running".into(), ..Default::default() };
        assert_eq!(m.state_text(), "Running");
        assert!(!m.failed());
        let m = Machine { phase: "Running".into(), unhealthy: Some("NodeNotReady".into()), ..Default::default() };
        assert_eq!(m.state_text(), "Running, unhealthy");
        let m = Machine { remediating: Some("x".into()), unhealthy: Some("y".into()), deleting: true, ..m };
        assert_eq!(m.state_text(), "Running, deleting, remediating");
        let m = Machine {
            phase: "Failed".into(),
            failure: Some("InsufficientResources: no host".into()),
            ..Default::default()
        };
        assert!(m.failed());
        assert_eq!(m.state_text(), "Failed: InsufficientResources: no host");
        assert_eq!(Machine::default().state_text(), "Pending");
    }
}
