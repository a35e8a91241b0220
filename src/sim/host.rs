//! The baremetal-operator on the simulated world: it powers a host off for a reboot, takes
//! the `reboot.metal3.io` request once the host is off and powers it on again; it follows
//! `spec.online`; it inspects an available host again when asked. One step per tick, as the
//! operator's reconciles are; a host in error (the demo's NotReady node: its BMC does not
//! answer) is not powered on.

use super::world::Sim;
use crate::model::{BareMetalHost, Delta};
use crate::ops::HostAction;

impl Sim {
    pub(super) fn host_view(&self, key: &str) -> Option<BareMetalHost> {
        self.hosts.get(key).cloned()
    }

    pub(super) fn request_host(&mut self, key: &str, action: HostAction) -> Result<(), String> {
        let h = self.hosts.get_mut(key).ok_or_else(|| format!("BareMetalHost {key}: not found"))?;
        match action {
            HostAction::Reboot => h.reboot_pending = true,
            HostAction::PowerOff => h.online = false,
            HostAction::PowerOn => h.online = true,
            HostAction::Inspect => h.inspect_pending = true,
        }
        self.out.push(Delta::HostUpsert(h.clone()));
        Ok(())
    }

    /// One reconcile of every host.
    pub(super) fn advance_hosts(&mut self) {
        let mut changed = Vec::new();
        let now = self.now;
        for h in self.hosts.values_mut() {
            let before = h.clone();
            if h.reboot_pending && h.takes_reboot() {
                if h.powered_on {
                    h.powered_on = false;
                } else {
                    h.reboot_pending = false;
                }
            } else if !h.reboot_pending && h.manages_power() && h.powered_on != h.online && !h.in_error() {
                h.powered_on = h.online;
            }
            // As the operator records it: an inspection's start, then its end.
            if h.state == "inspecting" {
                h.state = "available".into();
                h.inspect_end = crate::ops::audit::rfc3339(now);
            } else if h.inspect_pending && h.takes_inspect() {
                h.inspect_pending = false;
                h.state = "inspecting".into();
                h.inspect_start = crate::ops::audit::rfc3339(now);
                h.inspect_end.clear();
            }
            if *h != before {
                changed.push(h.clone());
            }
        }
        self.out.extend(changed.into_iter().map(Delta::HostUpsert));
    }
}
