//! Reading a Metal3 BareMetalHost (`metal3.io/v1alpha1`) into [`crate::model::BareMetalHost`].

use serde_json::Value;

use crate::model::{BareMetalHost, Hardware};

/// The annotation that asks the baremetal-operator for a reboot (`reboot.metal3.io`, or
/// `reboot.metal3.io/<key>`: then the host stays off until every such key is removed).
pub const REBOOT_ANNOTATION: &str = "reboot.metal3.io";
/// The annotation that asks for re-inspection (`disabled` turns inspection off instead).
pub const INSPECT_ANNOTATION: &str = "inspect.metal3.io";

fn text(v: &Value) -> String {
    v.as_str().map(str::trim).unwrap_or_default().to_string()
}

fn hardware(hw: &Value) -> Option<Hardware> {
    if !hw.is_object() {
        return None;
    }
    let vendor = &hw["systemVendor"];
    let system = [text(&vendor["manufacturer"]), text(&vendor["productName"])]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let nics = hw["nics"].as_array();
    Some(Hardware {
        system,
        cpu_model: text(&hw["cpu"]["model"]),
        cpus: hw["cpu"]["count"].as_i64().unwrap_or(0),
        ram_mib: hw["ramMebibytes"].as_i64().unwrap_or(0),
        nics: nics.map_or(0, Vec::len),
        nic_gbps: nics.into_iter().flatten().filter_map(|n| n["speedGbps"].as_i64()).max().unwrap_or(0),
        disks: hw["storage"].as_array().map_or(0, Vec::len),
    })
}

/// One BareMetalHost as the API server sends it; `None` without a name.
pub fn host(o: &Value) -> Option<BareMetalHost> {
    let meta = &o["metadata"];
    let status = &o["status"];
    let name = text(&meta["name"]);
    if name.is_empty() {
        return None;
    }
    let annotations = meta["annotations"].as_object();
    let has = |f: &dyn Fn(&str, &Value) -> bool| annotations.is_some_and(|a| a.iter().any(|(k, v)| f(k, v)));
    let consumer = &o["spec"]["consumerRef"];
    Some(BareMetalHost {
        namespace: text(&meta["namespace"]),
        name,
        uid: text(&meta["uid"]),
        state: text(&status["provisioning"]["state"]),
        operational: text(&status["operationalStatus"]),
        error_type: text(&status["errorType"]),
        error_message: text(&status["errorMessage"]),
        powered_on: status["poweredOn"].as_bool().unwrap_or(false),
        online: o["spec"]["online"].as_bool().unwrap_or(false),
        consumer: [text(&consumer["kind"]), text(&consumer["name"])]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
        reboot_pending: has(&|k, _| k == REBOOT_ANNOTATION || k.starts_with(&format!("{REBOOT_ANNOTATION}/"))),
        inspect_pending: has(&|k, v| k == INSPECT_ANNOTATION && v.as_str() != Some("disabled")),
        inspect_start: text(&status["operationHistory"]["inspect"]["start"]),
        inspect_end: text(&status["operationHistory"]["inspect"]["end"]),
        hardware: hardware(&status["hardware"]),
        deleting: meta["deletionTimestamp"].is_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_host_reads_with_its_hardware_and_requests() {
        let o = json!({"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
            "metadata": {"name": "gpu-host-7", "namespace": "metal3", "uid": "u-7",
                "annotations": {"reboot.metal3.io/fabrik": "{\"mode\":\"hard\"}", "inspect.metal3.io": ""}},
            "spec": {"online": true, "consumerRef": {"kind": "Metal3Machine", "name": "gpu-md-0-abc", "namespace": "capi"}},
            "status": {"operationalStatus": "error", "errorType": "power management error",
                "errorMessage": "Failed to get power state for node: BMC timeout", "poweredOn": false,
                "provisioning": {"state": "provisioned", "ID": "x"},
                "hardware": {"systemVendor": {"manufacturer": "Supermicro", "productName": "SYS-821GE-TNHR"},
                    "cpu": {"model": "Xeon 8480+", "count": 224}, "ramMebibytes": 2097152,
                    "nics": [{"name": "eno1", "speedGbps": 25}, {"name": "ib0", "speedGbps": 400}],
                    "storage": [{"name": "/dev/nvme0n1"}]}}});
        let h = host(&o).expect("a host");
        assert_eq!((h.key().as_str(), h.uid.as_str()), ("metal3/gpu-host-7", "u-7"));
        assert!(h.in_error() && h.online && !h.powered_on && h.reboot_pending && h.inspect_pending);
        assert_eq!(h.consumer, "Metal3Machine gpu-md-0-abc");
        let hw = h.hardware.clone().expect("inspected");
        assert_eq!((hw.cpus, hw.ram_mib, hw.nics, hw.nic_gbps, hw.disks), (224, 2_097_152, 2, 400, 1));
        assert_eq!(hw.system, "Supermicro SYS-821GE-TNHR");
        // Nothing inspected, no status yet, inspection disabled, a prefix that only looks alike.
        let bare = json!({"metadata": {"name": "new", "namespace": "m",
            "annotations": {"inspect.metal3.io": "disabled", "reboot.metal3.io.example": "x"}}, "spec": {}});
        let h = host(&bare).expect("a host");
        assert!(h.hardware.is_none() && !h.inspect_pending && !h.reboot_pending && h.state.is_empty());
        assert!(host(&json!({"metadata": {}})).is_none());
    }
}
