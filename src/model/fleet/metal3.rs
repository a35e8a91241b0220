//! Metal3 BareMetalHosts in the fleet: by `namespace/name` (and uid), joined to a node
//! through the node's Cluster API Machine (`spec.providerID`), with an alert on that node
//! while its host is in error.

use super::super::metal3::{BareMetalHost, HostRef};
use super::super::types::{AlertKind, AlertTarget};
use super::Fleet;

impl Fleet {
    /// The host a providerID names, if the fleet has it.
    pub fn host_by_provider_id(&self, provider_id: &str) -> Option<&BareMetalHost> {
        match HostRef::parse(provider_id)? {
            HostRef::Key(k) => self.hosts.get(&k).map(|h| &**h),
            HostRef::Uid(u) => self.hosts.get(self.host_uid.get(&u)?).map(|h| &**h),
        }
    }

    /// The BareMetalHost under node `name`: node → Machine → providerID → host.
    pub fn host_of_node(&self, name: &str) -> Option<&BareMetalHost> {
        self.host_by_provider_id(&self.machine_of_node(name)?.provider_id)
    }

    /// The ids of the hosts' rows (see [`Fleet::host_by_id`]), in no order.
    pub fn host_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.host_refs.keys().copied()
    }

    /// The host of row id `id`.
    pub fn host_by_id(&self, id: u32) -> Option<&BareMetalHost> {
        self.hosts.get(self.host_refs.get(&id)?).map(|h| &**h)
    }

    /// The Machines whose providerID names host `h` (normally one), by its key or its uid.
    fn machines_of_host<'a>(&'a self, h: &BareMetalHost) -> impl Iterator<Item = &'a super::super::capi::Machine> {
        let by_uid = (!h.uid.is_empty()).then(|| HostRef::Uid(h.uid.clone()));
        [Some(HostRef::Key(h.key())), by_uid]
            .into_iter()
            .flatten()
            .filter_map(|r| self.host_machines.get(&r))
            .flatten()
            .filter_map(|k| self.machines.get(&**k).map(|m| &**m))
    }

    /// The nodes whose Machine names host `h` (normally one), sorted.
    pub fn nodes_of_host(&self, h: &BareMetalHost) -> Vec<String> {
        let nodes: std::collections::BTreeSet<String> =
            self.machines_of_host(h).filter_map(|m| m.node.clone()).collect();
        nodes.into_iter().collect()
    }

    /// The Machine whose providerID names host `h` (the first by key when several do).
    pub fn machine_of_host(&self, h: &BareMetalHost) -> Option<&super::super::capi::Machine> {
        self.machines_of_host(h).min_by_key(|m| m.key())
    }

    pub(super) fn upsert_host(&mut self, h: BareMetalHost) -> bool {
        let key = h.key();
        let old = self.hosts.get(&key).map(|o| &**o);
        if old == Some(&h) {
            return false;
        }
        if let Some(o) = old.filter(|o| o.uid != h.uid && !o.uid.is_empty()) {
            let uid = o.uid.clone();
            self.host_uid.remove(&uid);
        }
        if !h.uid.is_empty() {
            self.host_uid.insert(h.uid.clone(), key.clone());
        }
        let nodes = self.nodes_of_host(&h);
        if !self.host_ids.contains_key(&key) {
            self.next_host += 1;
            self.host_ids.insert(key.clone(), self.next_host);
            self.host_refs.insert(self.next_host, key.clone());
        }
        self.hosts.insert(key, Box::new(h));
        for n in nodes {
            self.refresh_host_alert(&n);
        }
        true
    }

    pub(super) fn remove_host(&mut self, key: &str) -> bool {
        let Some(h) = self.hosts.remove(key) else { return false };
        if let Some(id) = self.host_ids.remove(key) {
            self.host_refs.remove(&id);
        }
        if self.host_uid.get(&h.uid).map(String::as_str) == Some(key) {
            self.host_uid.remove(&h.uid);
        }
        for n in self.nodes_of_host(&h) {
            self.refresh_host_alert(&n);
        }
        true
    }

    /// Sets or clears node `name`'s host alert.
    pub(super) fn refresh_host_alert(&mut self, name: &str) {
        let Some(id) = self.node_by_name(name) else { return };
        let target = AlertTarget::Node(id);
        let message = self
            .host_of_node(name)
            .filter(|h| h.in_error())
            .map(|h| format!("{name} runs on BareMetalHost {}, which is in error: {}", h.key(), h.state_text()));
        match message {
            Some(m) => self.set_alert((AlertKind::HostError, target), m),
            None => {
                self.alerts.remove(&(AlertKind::HostError, target));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::capi::Machine;
    use super::*;
    use crate::model::Delta;

    fn host(name: &str, uid: &str, error: bool) -> BareMetalHost {
        BareMetalHost {
            namespace: "metal3".into(),
            name: name.into(),
            uid: uid.into(),
            state: "provisioned".into(),
            operational: if error { "error" } else { "OK" }.into(),
            error_type: if error { "power management error".into() } else { String::new() },
            powered_on: true,
            online: true,
            ..Default::default()
        }
    }

    #[test]
    fn a_node_reaches_its_host_through_its_machine_in_both_provider_id_forms() {
        let mut f = crate::testing::demo_fleet(42, 48, 3, Default::default()).1;
        let nodes: Vec<String> = f.nodes.iter().take(2).map(|(_, n)| f.str_of(n.name).to_string()).collect();
        let has_alert = |f: &Fleet, n: &str| {
            let id = f.node_by_name(n).expect("node");
            f.alerts.contains_key(&(AlertKind::HostError, AlertTarget::Node(id)))
        };
        let machine = |node: &str, pid: &str| Machine {
            namespace: "capi".into(),
            name: format!("{node}-m"),
            phase: "Running".into(),
            node: Some(node.into()),
            provider_id: pid.into(),
            ..Default::default()
        };
        // New form; the host arrives after the Machine, in error, then heals.
        f.apply(Delta::MachineUpsert(machine(&nodes[0], "metal3://metal3/h0/m3m-0")));
        assert!(f.host_of_node(&nodes[0]).is_none());
        f.apply(Delta::HostUpsert(host("h0", "u0", true)));
        assert_eq!(f.host_of_node(&nodes[0]).map(|h| h.key()), Some("metal3/h0".into()));
        assert!(has_alert(&f, &nodes[0]));
        f.apply(Delta::HostUpsert(host("h0", "u0", false)));
        assert!(!has_alert(&f, &nodes[0]));
        // Legacy form (a uid); the host comes first this time.
        f.apply(Delta::HostUpsert(host("h1", "u1", true)));
        f.apply(Delta::MachineUpsert(machine(&nodes[1], "metal3://u1")));
        assert_eq!(f.host_of_node(&nodes[1]).map(|h| h.key()), Some("metal3/h1".into()));
        assert!(has_alert(&f, &nodes[1]));
        f.apply(Delta::HostRemove { namespace: "metal3".into(), name: "h1".into() });
        assert!(f.host_of_node(&nodes[1]).is_none() && !has_alert(&f, &nodes[1]));
        assert!(!f.host_uid.contains_key("u1"), "the uid join goes with the host");
    }

    #[test]
    fn a_machine_that_names_another_host_moves_in_the_join() {
        let mut f = crate::testing::demo_fleet(42, 48, 3, Default::default()).1;
        let node = f.nodes.iter().next().map(|(_, n)| f.str_of(n.name).to_string()).expect("a node");
        let machine = |pid: &str| Machine {
            namespace: "capi".into(),
            name: "moved".into(),
            node: Some(node.clone()),
            provider_id: pid.into(),
            ..Default::default()
        };
        f.apply(Delta::MachineUpsert(machine("metal3://metal3/a/m")));
        f.apply(Delta::MachineUpsert(machine("metal3://metal3/b/m")));
        // A host upsert finds its nodes through the index: `a` no longer names this node.
        assert_eq!(f.nodes_of_host(&host("a", "", true)), Vec::<String>::new());
        assert_eq!(f.nodes_of_host(&host("b", "", true)), vec![node.clone()]);
        f.apply(Delta::MachineRemove { namespace: "capi".into(), name: "moved".into() });
        assert!(
            f.host_machines.values().all(|ms| !ms.iter().any(|m| &**m == "capi/moved")),
            "the Machine leaves the index with its removal"
        );
        assert!(!f.host_machines.contains_key(&HostRef::Key("metal3/b".into())), "an emptied entry goes");
    }
}
