//! Metal3 from the management cluster: the BareMetalHost CRD (tests/fixtures/crds), a host
//! under each node's Machine — one reached by the current providerID form, one by the legacy
//! uid form, in a power management error — and `fabrik sim` playing the baremetal-operator
//! for hosts labelled as simulated. The fleet's `host` equals what the test follows with
//! kubectl (node → Machine nodeRef → providerID → host); in tmux the node in trouble says
//! `host error` and its screen shows the chain; `B` on the healthy node previews its reboot,
//! `y` runs it, and it is done only once the operator powered the host off and on again
//! (kubectl reads the annotation gone and the host on; the audit log has the reboot).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::common::{Tmux, gitops_owner, install_fixture, kubectl};
use super::{apply, fabrik_view, settle};

fn host(name: &str) -> Value {
    // One host kept in Git by Argo CD, as hosts often are.
    let annotations = if name == "host-ok" {
        json!({"argocd.argoproj.io/tracking-id": "bare-metal:metal3.io/BareMetalHost:capi-gpu/host-ok"})
    } else {
        json!({})
    };
    json!({"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
        "metadata": {"name": name, "namespace": "capi-gpu", "labels": {"fabrik.io/simulated": "true"}, "annotations": annotations},
        "spec": {"online": true, "bmc": {"address": format!("redfish://10.0.0.9/redfish/v1/Systems/{name}"), "credentialsName": format!("{name}-bmc")},
            "consumerRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "Metal3Machine", "name": name, "namespace": "capi-gpu"}}})
}

fn patch(kubeconfig: &Path, kind: &str, name: &str, status: bool, body: &Value) {
    let b = body.to_string();
    let mut args = vec!["-n", "capi-gpu", "patch", kind, name, "--type=merge", "-p", &b];
    if status {
        args.push("--subresource=status");
    }
    kubectl(kubeconfig, &args);
}

fn get(kubeconfig: &Path, what: &str) -> Value {
    serde_json::from_str(&kubectl(kubeconfig, &["get", what, "-A", "-o", "json"])).expect("kubectl's JSON")
}

/// The `host` of each node as the test follows it with kubectl.
fn hosts_truth(kubeconfig: &Path, nodes: &[String]) -> BTreeMap<String, Value> {
    let machines = get(kubeconfig, "machines.cluster.x-k8s.io");
    let hosts = get(kubeconfig, "baremetalhosts.metal3.io");
    let hosts = hosts["items"].as_array().cloned().unwrap_or_default();
    let mut out: BTreeMap<String, Value> = nodes.iter().map(|n| (n.clone(), Value::Null)).collect();
    for m in machines["items"].as_array().into_iter().flatten() {
        let Some(node) = m["status"]["nodeRef"]["name"].as_str() else { continue };
        let pid = m["spec"]["providerID"].as_str().unwrap_or_default();
        let Some(rest) = pid.strip_prefix("metal3://") else { continue };
        let parts: Vec<&str> = rest.split('/').collect();
        let h = hosts.iter().find(|h| match parts.as_slice() {
            [ns, name, _] => h["metadata"]["namespace"] == *ns && h["metadata"]["name"] == *name,
            [uid] => h["metadata"]["uid"] == *uid,
            _ => false,
        });
        let Some(h) = h else { continue };
        let st = &h["status"];
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let (on, online) = (st["poweredOn"].as_bool().unwrap_or(false), h["spec"]["online"].as_bool().unwrap_or(false));
        let annotations = h["metadata"]["annotations"].as_object().cloned().unwrap_or_default();
        let reboot = annotations.keys().any(|k| k == "reboot.metal3.io" || k.starts_with("reboot.metal3.io/"));
        let power = match (reboot, on, online) {
            (true, _, _) => "rebooting",
            (_, true, true) => "on",
            (_, false, false) => "off",
            (_, false, true) => "off (asked on)",
            (_, true, false) => "on (asked off)",
        };
        let (op, et, em) = (s(&st["operationalStatus"]), s(&st["errorType"]), s(&st["errorMessage"]));
        let mut state = format!("{} · power {power}", s(&st["provisioning"]["state"]));
        if !op.is_empty() {
            state.push_str(&format!(" · {op}"));
        }
        if op == "error" {
            let what: Vec<&str> = [et.as_str(), em.as_str()].into_iter().filter(|x| !x.is_empty()).collect();
            if !what.is_empty() {
                state.push_str(&format!(": {}", what.join(": ")));
            }
        }
        let hw = &st["hardware"];
        out.insert(
            node.to_string(),
            json!({"namespace": h["metadata"]["namespace"], "name": h["metadata"]["name"],
                "provisioning_state": s(&st["provisioning"]["state"]), "operational_status": op,
                "error_type": et, "error_message": em, "powered_on": on, "online": online,
                "reboot_pending": reboot, "state": state, "managed_by": gitops_owner(&h["metadata"]),
                "hardware": if hw.is_object() { json!({"cpus": hw["cpu"]["count"].as_i64().unwrap_or(0),
                    "system": system(&hw["systemVendor"]), "cpu_model": hw["cpu"]["model"],
                    "ram_mib": hw["ramMebibytes"].as_i64().unwrap_or(0),
                    "nics": hw["nics"].as_array().map_or(0, Vec::len),
                    "nic_gbps": hw["nics"].as_array().into_iter().flatten().filter_map(|n| n["speedGbps"].as_i64()).max(),
                    "disks": hw["storage"].as_array().map_or(0, Vec::len)}) } else { Value::Null }}),
        );
    }
    out
}

/// The inspected system as `manufacturer productName`; null when neither is there.
fn system(v: &Value) -> Value {
    let parts: Vec<&str> = [&v["manufacturer"], &v["productName"]]
        .into_iter()
        .filter_map(|p| p.as_str())
        .filter(|p| !p.is_empty())
        .collect();
    if parts.is_empty() { Value::Null } else { parts.join(" ").into() }
}

fn same(kubeconfig: &Path, nodes: &[String]) -> Result<BTreeMap<String, Value>, String> {
    let truth = hosts_truth(kubeconfig, nodes);
    let have: BTreeMap<String, Value> = fabrik_view(kubeconfig, "fleet")["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| Some((r["name"].as_str()?.to_string(), r["host"].clone())))
        .filter(|(n, _)| nodes.contains(n))
        .collect();
    if have == truth { Ok(truth) } else { Err(format!("fabrik {have:#?}\nkubectl {truth:#?}")) }
}

pub fn hosts_phase(kubeconfig: &Path, dir: &Path, t: &Tmux, nodes: &[String]) {
    install_fixture(kubeconfig, "crds/metal3.io_baremetalhosts.yaml");
    for name in ["host-ok", "host-sick"] {
        apply(kubeconfig, dir, name, &host(name));
    }
    // A spare: inspected, available, kept off, under no Machine.
    let mut spare = host("host-spare");
    spare["spec"] = json!({"online": false, "bmc": {"address": "redfish://10.0.0.9/redfish/v1/Systems/host-spare",
        "credentialsName": "host-spare-bmc"}});
    apply(kubeconfig, dir, "host-spare", &spare);
    patch(
        kubeconfig,
        "baremetalhost",
        "host-spare",
        true,
        &json!({"status": {"operationalStatus": "OK", "poweredOn": false, "errorMessage": "",
            "provisioning": {"state": "available", "ID": "ironic-3"}}}),
    );
    let hardware = json!({"systemVendor": {"manufacturer": "Supermicro", "productName": "SYS-821GE-TNHR"},
        "cpu": {"arch": "x86_64", "model": "Xeon 8480+", "count": 224}, "ramMebibytes": 2097152,
        "nics": [{"name": "eno1", "mac": "aa:bb:cc:dd:ee:01", "speedGbps": 25}, {"name": "ib0", "mac": "aa:bb:cc:dd:ee:02", "speedGbps": 400}],
        "storage": [{"name": "/dev/nvme0n1"}, {"name": "/dev/nvme1n1"}]});
    let ok = json!({"status": {"operationalStatus": "OK", "poweredOn": true, "errorMessage": "",
        "provisioning": {"state": "provisioned", "ID": "ironic-1"}, "hardware": hardware}});
    patch(kubeconfig, "baremetalhost", "host-ok", true, &ok);
    let sick = json!({"status": {"operationalStatus": "error", "errorType": "power management error",
        "errorMessage": "Failed to get power state for node: BMC timed out", "poweredOn": false,
        "provisioning": {"state": "provisioned", "ID": "ironic-2"}}});
    patch(kubeconfig, "baremetalhost", "host-sick", true, &sick);
    // The Machines name their hosts: the current form, and the legacy uid form.
    let uid =
        kubectl(kubeconfig, &["-n", "capi-gpu", "get", "baremetalhost", "host-sick", "-o", "jsonpath={.metadata.uid}"]);
    patch(kubeconfig, "machine", "m-ok", false, &json!({"spec": {"providerID": "metal3://capi-gpu/host-ok/m-ok"}}));
    patch(kubeconfig, "machine", "m-sick", false, &json!({"spec": {"providerID": format!("metal3://{}", uid.trim())}}));
    let truth = settle("hosts", || same(kubeconfig, nodes));
    assert_eq!(truth[&nodes[0]]["state"], "provisioned · power on · OK", "{truth:#?}");
    assert_eq!(truth[&nodes[1]]["error_type"], "power management error", "{truth:#?}");
    assert_eq!(truth[&nodes[0]]["hardware"]["cpus"], 224, "{truth:#?}");
    assert_eq!(truth[&nodes[0]]["hardware"]["nic_gbps"], 400, "{truth:#?}");
    assert_eq!(truth[&nodes[0]]["hardware"]["system"], "Supermicro SYS-821GE-TNHR", "{truth:#?}");
    assert_eq!(truth[&nodes[0]]["managed_by"]["app"], "bare-metal", "{truth:#?}");

    // The running cockpit, started before the CRD existed, watches hosts within its minute.
    t.keys(&["Escape"]);
    t.wait_screen("the filter cleared", |s| !s.contains(&format!("/{}", nodes[1])));
    t.keys(&["1", "/"]);
    t.literal(&nodes[1]);
    t.keys(&["Enter"]);
    t.wait_screen_for("the node's host in error", std::time::Duration::from_secs(100), |s| {
        s.lines().any(|l| l.contains(&nodes[1]) && l.contains("host error"))
    });
    t.keys(&["Enter"]);
    t.wait_screen("the chain node → Machine → host", |s| {
        s.contains("machine capi-gpu/m-sick")
            && s.contains("host    capi-gpu/host-sick")
            && s.contains("management error")
    });
    t.keys(&["Escape"]);
    t.wait_screen("back on the fleet", |s| s.contains("Fleet ["));
    t.keys(&["Escape"]);
    t.wait_screen("the filter cleared", |s| s.contains("Fleet [") && !s.contains(&format!("/{}", nodes[1])));
    t.keys(&["/"]);
    t.literal(&nodes[0]);
    t.keys(&["Enter"]);
    t.wait_screen("the healthy node alone", |s| s.contains(&nodes[0]) && !s.lines().any(|l| l.contains(&nodes[1])));
    t.keys(&["B"]);
    let s = t.wait_screen("the reboot's preview", |s| s.contains("Preview:") && s.contains("reboot.metal3.io"));
    assert!(s.contains(&format!("Reboot host capi-gpu/host-ok of node {}", nodes[0])), "{s}");
    t.keys(&["y"]);
    // fabrik sim's operator powers it off, takes the request, powers it on.
    let data = dir.join("data");
    let recs = settle("the audit log says the reboot finished", || {
        let recs = fabrik::ops::audit::read(&data.join(fabrik::ops::audit::FILE_NAME)).map_err(|e| e.to_string())?.0;
        let done = recs.iter().any(|r| {
            r.kind == "reboot-host"
                && matches!(r.phase, fabrik::ops::audit::Phase::Succeeded)
                && r.message.contains("rebooted")
        });
        if done {
            Ok(recs)
        } else {
            Err(format!("{:#?}", recs.iter().filter(|r| r.kind == "reboot-host").collect::<Vec<_>>()))
        }
    });
    let log: Vec<&str> = recs.iter().filter(|r| r.kind == "reboot-host").map(|r| r.message.as_str()).collect();
    assert!(log.iter().any(|m| m.contains("powered capi-gpu/host-ok off")), "the power-off was seen: {log:#?}");
    let h = &get(kubeconfig, "baremetalhosts.metal3.io")["items"];
    let ok =
        h.as_array().into_iter().flatten().find(|h| h["metadata"]["name"] == "host-ok").cloned().unwrap_or_default();
    assert_eq!(ok["status"]["poweredOn"], true, "{ok:#}");
    assert!(ok["metadata"]["annotations"].get("reboot.metal3.io").is_none(), "the operator took the request: {ok:#}");
    t.keys(&["7"]);
    t.wait_screen("the operation done, the power-off seen", |s| s.contains("rebooted"));
    settle("hosts after the reboot", || same(kubeconfig, nodes));

    // The hosts view lists the spare under no node; `:host inspect` there previews its
    // re-inspection, `y` runs it, and it is done once the operator took the request and the
    // host is available again (kubectl reads the annotation gone).
    t.keys(&["O", "/"]);
    t.literal("host-spare");
    t.keys(&["Enter"]);
    let s = t.wait_screen("the spare in the hosts view", |s| s.contains("Hosts [1/3]"));
    let row = s.lines().find(|l| l.starts_with("│host-spare ")).unwrap_or_default();
    assert!(row.contains("available") && row.contains(" off ") && row.contains(" OK "), "{s}");
    t.keys(&[":"]);
    t.literal("host inspect");
    t.keys(&["Enter"]);
    let s = t.wait_screen("the inspection's preview", |s| s.contains("Preview:") && s.contains("inspect.metal3.io"));
    assert!(s.contains("Inspect host capi-gpu/host-spare again"), "{s}");
    t.keys(&["y"]);
    settle("the audit log says the inspection finished", || {
        let recs = fabrik::ops::audit::read(&data.join(fabrik::ops::audit::FILE_NAME)).map_err(|e| e.to_string())?.0;
        let done = recs.iter().any(|r| {
            r.kind == "inspect-host"
                && matches!(r.phase, fabrik::ops::audit::Phase::Succeeded)
                && r.message.contains("inspected again")
        });
        if done {
            Ok(())
        } else {
            Err(format!("{:#?}", recs.iter().filter(|r| r.kind == "inspect-host").collect::<Vec<_>>()))
        }
    });
    let h = &get(kubeconfig, "baremetalhosts.metal3.io")["items"];
    let spare =
        h.as_array().into_iter().flatten().find(|h| h["metadata"]["name"] == "host-spare").cloned().unwrap_or_default();
    assert_eq!(spare["status"]["provisioning"]["state"], "available", "{spare:#}");
    assert!(spare["metadata"]["annotations"].get("inspect.metal3.io").is_none(), "the operator took it: {spare:#}");
    t.keys(&["Escape"]);
}
