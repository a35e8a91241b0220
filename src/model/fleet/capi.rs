//! Cluster API in the fleet: Machines by `namespace/name`, joined to the node they became
//! (`status.nodeRef`), with an alert on that node while the Machine failed or is being
//! remediated; the objects above them by kind; and a row id for each (the Cluster API view).

use super::super::capi::{CapiKind, CapiObject, Machine};
use super::super::metal3::HostRef;
use super::super::types::{AlertKind, AlertTarget};
use super::Fleet;

/// What a Cluster API row is: an object above the Machines by kind, or a Machine (`None`),
/// by `namespace/name`.
pub type CapiRef = (Option<CapiKind>, String);

/// A Cluster API row's object.
#[derive(Clone, Copy, Debug)]
pub enum CapiRow<'a> {
    Object(&'a CapiObject),
    Machine(&'a Machine),
}

impl Fleet {
    /// The ids of the Cluster API rows there are (see [`Fleet::capi_by_id`]), in no order.
    pub fn capi_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.capi_refs.keys().copied()
    }

    /// The object or Machine of row id `id`.
    pub fn capi_by_id(&self, id: u32) -> Option<CapiRow<'_>> {
        match self.capi_refs.get(&id)? {
            (Some(kind), key) => self.capi.get(&(*kind, key.clone())).map(CapiRow::Object),
            (None, key) => self.machines.get(key).map(|m| CapiRow::Machine(m)),
        }
    }

    /// The row id of an object (`Some(kind)`) or a Machine (`None`), `namespace/name`.
    pub fn capi_id(&self, kind: Option<CapiKind>, key: &str) -> Option<u32> {
        self.capi_ids.get(&(kind, key.to_string())).copied()
    }

    fn capi_row_added(&mut self, r: CapiRef) {
        if !self.capi_ids.contains_key(&r) {
            self.next_capi += 1;
            self.capi_ids.insert(r.clone(), self.next_capi);
            self.capi_refs.insert(self.next_capi, r);
        }
    }

    fn capi_row_gone(&mut self, r: &CapiRef) {
        if let Some(id) = self.capi_ids.remove(r) {
            self.capi_refs.remove(&id);
        }
    }

    pub(super) fn upsert_capi(&mut self, o: CapiObject) -> bool {
        let key = (o.kind, o.key());
        if self.capi.get(&key) == Some(&o) {
            return false;
        }
        self.capi_row_added((Some(o.kind), key.1.clone()));
        let blocked = o.health.as_ref().is_some_and(|h| h.blocked).then(|| {
            let why = o.why.as_deref().unwrap_or("RemediationAllowed is False");
            let c = if o.cluster.is_empty() { String::new() } else { format!(" of cluster {}", o.cluster) };
            format!("MachineHealthCheck {}{c} stopped remediating: {why}", key.1)
        });
        let alert = (AlertKind::RemediationBlocked, AlertTarget::HealthCheck(key.1.as_str().into()));
        match blocked {
            Some(m) => self.set_alert(alert, m),
            None => {
                self.alerts.remove(&alert);
            }
        }
        self.capi.insert(key, o);
        true
    }

    pub(super) fn remove_capi(&mut self, kind: CapiKind, key: &str) -> bool {
        if self.capi.remove(&(kind, key.to_string())).is_none() {
            return false;
        }
        self.capi_row_gone(&(Some(kind), key.to_string()));
        self.alerts.remove(&(AlertKind::RemediationBlocked, AlertTarget::HealthCheck(key.into())));
        true
    }

    /// The Machine that node `name` is, if the management cluster says so.
    pub fn machine_of_node(&self, name: &str) -> Option<&Machine> {
        self.machines.get(self.node_machine.get(name)?).map(|m| &**m)
    }

    pub(super) fn upsert_machine(&mut self, m: Machine) -> bool {
        let key = m.key();
        let old = self.machines.insert(key.clone(), Box::new(m.clone()));
        if old.as_deref() == Some(&m) {
            return false;
        }
        self.capi_row_added((None, key.clone()));
        self.index_host_ref(old.as_deref(), Some(&m), &key);
        if let Some(n) = old.as_ref().and_then(|o| o.node.as_ref()).filter(|n| Some(*n) != m.node.as_ref()) {
            if self.node_machine.get(n) == Some(&key) {
                self.node_machine.remove(n);
            }
            let n = n.clone();
            self.refresh_machine_alert(&n);
        }
        if let Some(n) = &m.node {
            self.node_machine.insert(n.clone(), key);
            let n = n.clone();
            self.refresh_machine_alert(&n);
        }
        true
    }

    pub(super) fn remove_machine(&mut self, key: &str) -> bool {
        let Some(m) = self.machines.remove(key) else { return false };
        self.capi_row_gone(&(None, key.to_string()));
        self.index_host_ref(Some(&m), None, key);
        if let Some(n) = &m.node
            && self.node_machine.get(n).map(String::as_str) == Some(key)
        {
            self.node_machine.remove(n);
            self.refresh_machine_alert(n);
        }
        true
    }

    /// Moves Machine `key` in [`Fleet::host_machines`] from the host `old` named to the one
    /// `new` names.
    fn index_host_ref(&mut self, old: Option<&Machine>, new: Option<&Machine>, key: &str) {
        let was = old.and_then(|m| HostRef::parse(&m.provider_id));
        let now = new.and_then(|m| HostRef::parse(&m.provider_id));
        if was == now {
            return;
        }
        if let Some(r) = was
            && let Some(set) = self.host_machines.get_mut(&r)
        {
            set.retain(|k| &**k != key);
            if set.is_empty() {
                self.host_machines.remove(&r);
            }
        }
        if let Some(r) = now {
            let set = self.host_machines.entry(r).or_default();
            if let Err(at) = set.binary_search_by(|k| (**k).cmp(key)) {
                set.insert(at, key.into());
            }
        }
    }

    /// Sets or clears node `name`'s Machine alert (a node that arrives later gets it when
    /// its Machine is next seen, or from [`Fleet::refresh_machine_alert`] on node upsert).
    pub(super) fn refresh_machine_alert(&mut self, name: &str) {
        let Some(id) = self.node_by_name(name) else { return };
        let target = AlertTarget::Node(id);
        let m = self.machine_of_node(name);
        let want = m.and_then(|m| {
            let what = format!("Machine {}", m.key());
            if m.failed() {
                Some((AlertKind::MachineFailed, format!("{name} is {what}, which failed: {}", m.state_text())))
            } else if let Some(r) = &m.remediating {
                Some((AlertKind::Remediating, format!("{name} is {what}, being remediated ({r})")))
            } else {
                m.unhealthy.as_ref().map(|u| {
                    (AlertKind::Remediating, format!("{name} is {what}, unhealthy by its MachineHealthCheck ({u})"))
                })
            }
        });
        for k in [AlertKind::MachineFailed, AlertKind::Remediating] {
            if want.as_ref().is_none_or(|(w, _)| *w != k) {
                self.alerts.remove(&(k, target.clone()));
            }
        }
        if let Some((kind, message)) = want {
            self.set_alert((kind, target), message);
        }
        // The Machine names the host under the node: its alert follows the join.
        self.refresh_host_alert(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Delta;

    fn remediating(node: &str) -> Machine {
        Machine {
            namespace: "capi".into(),
            name: format!("{node}-m"),
            phase: "Running".into(),
            node: Some(node.into()),
            remediating: Some("WaitingForRemediation".into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_machines_alert_follows_it_to_its_node_whichever_comes_first() {
        let mut f = crate::testing::demo_fleet(42, 48, 3, Default::default()).1;
        let spec = crate::model::NodeSpec {
            name: "late-node".into(),
            labels: Vec::new(),
            ready: true,
            cordoned: false,
            cordoned_by: String::new(),
            gpu_model: None,
            capacity: Vec::new(),
            allocatable: Vec::new(),
            mig_config: String::new(),
            mig_state: Default::default(),
            mig_state_since: None,
            ready_since: None,
            created: 0,
        };
        let kinds = |f: &Fleet, name: &str| -> Vec<AlertKind> {
            let id = f.node_by_name(name).expect("node");
            f.alerts.values().filter(|a| a.target == AlertTarget::Node(id)).map(|a| a.kind).collect()
        };
        // The Machine first, its node later (a re-list, a new node).
        f.apply(Delta::MachineUpsert(remediating("late-node")));
        assert!(f.machine_of_node("late-node").is_some());
        f.apply(Delta::NodeUpsert(spec));
        assert!(kinds(&f, "late-node").contains(&AlertKind::Remediating));
        // Failed wins over remediating; healthy clears both; gone forgets the join.
        let failed = Machine { phase: "Failed".into(), ..remediating("late-node") };
        f.apply(Delta::MachineUpsert(failed));
        assert_eq!(
            kinds(&f, "late-node")
                .into_iter()
                .filter(|k| matches!(k, AlertKind::MachineFailed | AlertKind::Remediating))
                .collect::<Vec<_>>(),
            vec![AlertKind::MachineFailed]
        );
        f.apply(Delta::MachineUpsert(Machine { remediating: None, ..remediating("late-node") }));
        assert!(!kinds(&f, "late-node").iter().any(|k| matches!(k, AlertKind::MachineFailed | AlertKind::Remediating)));
        f.apply(Delta::MachineUpsert(remediating("late-node")));
        f.apply(Delta::MachineRemove { namespace: "capi".into(), name: "late-node-m".into() });
        assert!(f.machine_of_node("late-node").is_none());
        assert!(!kinds(&f, "late-node").contains(&AlertKind::Remediating));
    }

    #[test]
    fn cluster_api_rows_keep_their_ids_while_they_exist() {
        let mut f = Fleet::default();
        let md = CapiObject {
            kind: CapiKind::MachineDeployment,
            namespace: "capi".into(),
            name: "md".into(),
            ..Default::default()
        };
        assert!(f.apply(Delta::CapiUpsert(md.clone())));
        assert!(!f.apply(Delta::CapiUpsert(md.clone())), "the same object again changes nothing");
        f.apply(Delta::MachineUpsert(remediating("n1")));
        let (a, b) = (f.capi_id(Some(CapiKind::MachineDeployment), "capi/md"), f.capi_id(None, "capi/n1-m"));
        assert!(a.is_some() && b.is_some() && a != b);
        assert!(matches!(f.capi_by_id(a.unwrap_or_default()), Some(CapiRow::Object(o)) if o.name == "md"));
        // A MachineSet of the same name is another row.
        f.apply(Delta::CapiUpsert(CapiObject { kind: CapiKind::MachineSet, ..md.clone() }));
        assert_eq!(f.capi_ids().count(), 3);
        let changed = CapiObject { phase: "ScalingUp".into(), ..md };
        f.apply(Delta::CapiUpsert(changed));
        assert_eq!(f.capi_id(Some(CapiKind::MachineDeployment), "capi/md"), a, "a change keeps the id");
        f.apply(Delta::CapiRemove { kind: CapiKind::MachineDeployment, namespace: "capi".into(), name: "md".into() });
        f.apply(Delta::MachineRemove { namespace: "capi".into(), name: "n1-m".into() });
        assert_eq!(f.capi_ids().count(), 1);
        assert!(f.capi_by_id(a.unwrap_or_default()).is_none());
    }

    #[test]
    fn a_health_check_that_stopped_remediating_is_an_alert_until_it_may_again() {
        let mut f = Fleet::default();
        let mhc = |blocked| CapiObject {
            kind: CapiKind::MachineHealthCheck,
            namespace: "capi".into(),
            name: "workers".into(),
            cluster: "prod".into(),
            health: Some(crate::model::HealthCounts { blocked, ..Default::default() }),
            why: blocked.then(|| "TooManyUnhealthy: Remediation is not allowed".into()),
            ..Default::default()
        };
        let blocked = |f: &Fleet| {
            f.alerts
                .values()
                .filter(|a| a.kind == AlertKind::RemediationBlocked)
                .map(|a| a.message.clone())
                .collect::<Vec<_>>()
        };
        f.apply(Delta::CapiUpsert(mhc(false)));
        assert!(blocked(&f).is_empty());
        f.apply(Delta::CapiUpsert(mhc(true)));
        assert_eq!(
            blocked(&f),
            [
                "MachineHealthCheck capi/workers of cluster prod stopped remediating: TooManyUnhealthy: Remediation is not allowed"
            ]
        );
        f.apply(Delta::CapiUpsert(mhc(false)));
        assert!(blocked(&f).is_empty());
        f.apply(Delta::CapiUpsert(mhc(true)));
        f.apply(Delta::CapiRemove {
            kind: CapiKind::MachineHealthCheck,
            namespace: "capi".into(),
            name: "workers".into(),
        });
        assert!(blocked(&f).is_empty(), "gone with its health check");
    }
}
