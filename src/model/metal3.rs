//! Metal3 BareMetalHosts, as the baremetal-operator states them: the physical machine under
//! a node — provisioning state, power, operational status and error, the inspected hardware
//! — so "is this NotReady GPU node a hardware problem?" has an answer on its screen.
//!
//! A node reaches its host through its Cluster API Machine's `spec.providerID`, which the
//! Metal3 provider writes as `metal3://<namespace>/<host>/<metal3machine>` (or, before
//! CAPM3 1.8, `metal3://<host uid>`).

/// The inspected hardware (`status.hardware`), compact.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hardware {
    /// `systemVendor.manufacturer` and `productName`, joined.
    pub system: String,
    pub cpu_model: String,
    /// `cpu.count`: logical CPUs.
    pub cpus: i64,
    pub ram_mib: i64,
    pub nics: usize,
    /// The fastest NIC's `speedGbps`.
    pub nic_gbps: i64,
    pub disks: usize,
}

impl Hardware {
    /// `Dell PowerEdge XE9680 · 224× Xeon 8480+ · 2048 GiB · 10 NICs (≤400 Gb/s) · 8 disks`.
    pub fn text(&self) -> String {
        let mut parts = Vec::new();
        if !self.system.is_empty() {
            parts.push(self.system.clone());
        }
        if self.cpus > 0 {
            let model = if self.cpu_model.is_empty() { "CPUs".to_string() } else { self.cpu_model.clone() };
            parts.push(format!("{}× {model}", self.cpus));
        }
        if self.ram_mib > 0 {
            parts.push(format!("{} GiB", self.ram_mib / 1024));
        }
        if self.nics > 0 {
            let speed = if self.nic_gbps > 0 { format!(" (≤{} Gb/s)", self.nic_gbps) } else { String::new() };
            parts.push(format!("{} NIC{}{speed}", self.nics, if self.nics == 1 { "" } else { "s" }));
        }
        if self.disks > 0 {
            parts.push(format!("{} disk{}", self.disks, if self.disks == 1 { "" } else { "s" }));
        }
        parts.join(" · ")
    }
}

/// One BareMetalHost (`baremetalhosts.metal3.io`), compact.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BareMetalHost {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `status.provisioning.state`: registering, inspecting, available, provisioning,
    /// provisioned, deprovisioning, externally provisioned, … (empty until the operator
    /// first reconciles it).
    pub state: String,
    /// `status.operationalStatus`: OK, discovered, error, delayed, detached, servicing.
    pub operational: String,
    /// `status.errorType` and `status.errorMessage` while in error.
    pub error_type: String,
    pub error_message: String,
    /// `status.poweredOn`: what the operator last saw.
    pub powered_on: bool,
    /// `spec.online`: what it is asked for.
    pub online: bool,
    /// `spec.consumerRef`: `Kind name`.
    pub consumer: String,
    /// A `reboot.metal3.io` annotation is set: a reboot is asked for and not yet done
    /// (the operator removes it once it has powered the host off).
    pub reboot_pending: bool,
    /// An `inspect.metal3.io` annotation other than `disabled`: re-inspection asked for.
    pub inspect_pending: bool,
    /// `status.operationHistory.inspect`: when the operator's last inspection started and
    /// ended, as it writes them (empty when unset; `end` is empty while it inspects). The
    /// operator resets both when an inspection starts and sets `end` when it is done: how an
    /// inspection is known to have happened (the annotation alone can be removed by hand).
    pub inspect_start: String,
    pub inspect_end: String,
    pub hardware: Option<Hardware>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
}

impl BareMetalHost {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn in_error(&self) -> bool {
        self.operational == "error"
    }

    /// The baremetal-operator manages its power in this state (`spec.online`, reboots).
    pub fn manages_power(&self) -> bool {
        matches!(self.state.as_str(), "provisioned" | "externally provisioned" | "available" | "ready")
    }

    /// It reboots on a plain request (an available host only on a forced one).
    pub fn takes_reboot(&self) -> bool {
        matches!(self.state.as_str(), "provisioned" | "externally provisioned")
    }

    /// It inspects again on request (only an available host).
    pub fn takes_inspect(&self) -> bool {
        matches!(self.state.as_str(), "available" | "ready")
    }

    /// `on`, `off`, `off (asked on)`, `on (asked off)`, `rebooting`.
    pub fn power_text(&self) -> String {
        if self.reboot_pending {
            return "rebooting".into();
        }
        match (self.powered_on, self.online) {
            (true, true) => "on".into(),
            (false, false) => "off".into(),
            (false, true) => "off (asked on)".into(),
            (true, false) => "on (asked off)".into(),
        }
    }

    /// `provisioned · power on · OK`, `provisioned · power off · error: power management
    /// error: BMC unreachable`.
    pub fn state_text(&self) -> String {
        let state = if self.state.is_empty() { "unknown state" } else { self.state.as_str() };
        let mut s = format!("{state} · power {}", self.power_text());
        if !self.operational.is_empty() {
            s.push_str(&format!(" · {}", self.operational));
        }
        if self.in_error() {
            match (self.error_type.is_empty(), self.error_message.is_empty()) {
                (false, false) => s.push_str(&format!(": {}: {}", self.error_type, self.error_message)),
                (false, true) => s.push_str(&format!(": {}", self.error_type)),
                (true, false) => s.push_str(&format!(": {}", self.error_message)),
                (true, true) => {}
            }
        }
        if self.inspect_pending {
            s.push_str(" · re-inspection asked");
        }
        if self.deleting {
            s.push_str(" · deleting");
        }
        s
    }
}

/// Which host a providerID names, as Cluster API's Metal3 provider writes it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum HostRef {
    /// `metal3://<namespace>/<host>/<metal3machine>`: the host's `namespace/name`.
    Key(String),
    /// `metal3://<host uid>` (the legacy form).
    Uid(String),
}

impl HostRef {
    /// `None` for a providerID that is not Metal3's.
    pub fn parse(provider_id: &str) -> Option<HostRef> {
        let rest = provider_id.trim().strip_prefix("metal3://")?;
        let parts: Vec<&str> = rest.split('/').collect();
        match parts.as_slice() {
            [ns, host, _m3m] if !ns.is_empty() && !host.is_empty() => Some(HostRef::Key(format!("{ns}/{host}"))),
            [uid] if !uid.is_empty() => Some(HostRef::Uid((*uid).to_string())),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_name_hosts_in_both_forms() {
        assert_eq!(HostRef::parse("metal3://capi/host-1/gpu-md-0-x7k"), Some(HostRef::Key("capi/host-1".into())));
        assert_eq!(
            HostRef::parse("metal3://9d8c2b1e-1111-4c3a-9f00-0123456789ab"),
            Some(HostRef::Uid("9d8c2b1e-1111-4c3a-9f00-0123456789ab".into()))
        );
        assert_eq!(HostRef::parse("aws:///us-east-1a/i-0abc"), None);
        assert_eq!(HostRef::parse("metal3://"), None);
        assert_eq!(HostRef::parse("metal3://a/b"), None);
    }

    #[test]
    fn states_read_as_people_say_them() {
        let h = BareMetalHost {
            state: "provisioned".into(),
            operational: "OK".into(),
            powered_on: true,
            online: true,
            ..Default::default()
        };
        assert_eq!(h.state_text(), "provisioned · power on · OK");
        let h = BareMetalHost {
            operational: "error".into(),
            error_type: "power management error".into(),
            error_message: "BMC unreachable".into(),
            powered_on: false,
            ..h
        };
        assert!(h.in_error());
        assert_eq!(
            h.state_text(),
            "provisioned · power off (asked on) · error: power management error: BMC unreachable"
        );
        let h = BareMetalHost { reboot_pending: true, inspect_pending: true, deleting: true, ..Default::default() };
        assert_eq!(h.state_text(), "unknown state · power rebooting · re-inspection asked · deleting");
        let hw = Hardware {
            system: "Dell PowerEdge XE9680".into(),
            cpu_model: "Xeon 8480+".into(),
            cpus: 224,
            ram_mib: 2048 * 1024,
            nics: 1,
            nic_gbps: 400,
            disks: 8,
        };
        assert_eq!(hw.text(), "Dell PowerEdge XE9680 · 224× Xeon 8480+ · 2048 GiB · 1 NIC (≤400 Gb/s) · 8 disks");
        assert_eq!(Hardware::default().text(), "");
    }
}
