//! Cluster API Machines, as the management cluster states them: which Machine a node is,
//! its phase, its failure, and whether a MachineHealthCheck found it unhealthy and its
//! owner is remediating it — the answer to "is this NotReady node a machine being replaced?".

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
        let phase = if self.phase.is_empty() { "Pending" } else { self.phase.as_str() };
        let mut s = if self.deleting && phase != "Deleting" { format!("{phase}, deleting") } else { phase.to_string() };
        if self.remediating.is_some() {
            s.push_str(", remediating");
        } else if self.unhealthy.is_some() {
            s.push_str(", unhealthy");
        }
        if let Some(f) = &self.failure {
            s.push_str(&format!(": {f}"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
