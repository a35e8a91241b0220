//! `fabrik sim --factory` on the test control plane (issue 17): without Cluster API's and
//! Metal3's CRDs it refuses, says what to install, and registers no node; with them it
//! writes a Cluster, its control plane, MachineDeployments, MachineSets, a Machine and a
//! BareMetalHost per node and a MachineHealthCheck, with their status. Then fabrik's capi view
//! equals, row by row, what kubectl reads (`factory_e2e/capi_truth.rs`), and each node's
//! Machine and host in the fleet view equal the chain kubectl follows (node → Machine nodeRef
//! → providerID → host). With `--workload`'s tenants and their NetworkPolicies, the tenants'
//! NETPOL verdicts equal what the policies kubectl reads say.
//!
//! There is no skip: without Go or the control plane this test fails and says why.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

#[path = "factory_e2e/capi_truth.rs"]
mod capi_truth;
mod common;
#[path = "crosscheck_e2e/isolation.rs"]
mod isolation;
use common::{BIN, control_plane, fabrik_view, install_fixture, kubectl, settle};

const NS: &str = "capi-sim";

fn install_crds(kubeconfig: &Path) {
    let o =
        Command::new(common::repo().join("tests/capi/capi.sh")).arg("crds").output().expect("tests/capi/capi.sh crds");
    assert!(o.status.success(), "tests/capi/capi.sh crds failed: it needs Go and the module proxy");
    let crds = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let kcp = Path::new(&crds)
        .join("../../../controlplane/kubeadm/config/crd/bases/controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml");
    let mut files: Vec<String> = ["clusters", "machinedeployments", "machinesets", "machinehealthchecks", "machines"]
        .iter()
        .map(|f| format!("{crds}/cluster.x-k8s.io_{f}.yaml"))
        .collect();
    files.push(kcp.to_string_lossy().into_owned());
    for f in &files {
        kubectl(kubeconfig, &["apply", "--server-side", "-f", f]);
    }
    kubectl(kubeconfig, &["wait", "--for=condition=established", "--timeout=60s", "crd", "--all"]);
    install_fixture(kubeconfig, "crds/metal3.io_baremetalhosts.yaml");
}

/// Each node's Machine and host as kubectl follows them: `{machine, host, operational}`.
fn chain_truth(kubeconfig: &Path) -> BTreeMap<String, Value> {
    let get = |what: &str| -> Vec<Value> {
        let v: Value =
            serde_json::from_str(&kubectl(kubeconfig, &["get", what, "-n", NS, "-o", "json"])).expect("JSON");
        v["items"].as_array().cloned().unwrap_or_default()
    };
    let hosts = get("baremetalhosts.metal3.io");
    let mut out = BTreeMap::new();
    for m in get("machines.cluster.x-k8s.io") {
        let Some(node) = m["status"]["nodeRef"]["name"].as_str() else { continue };
        let pid = m["spec"]["providerID"].as_str().unwrap_or_default();
        // metal3://<namespace>/<host>/<machine>
        let parts: Vec<&str> = pid.trim_start_matches("metal3://").split('/').collect();
        let host = hosts
            .iter()
            .find(|h| parts.len() == 3 && h["metadata"]["namespace"] == parts[0] && h["metadata"]["name"] == parts[1]);
        out.insert(
            node.to_string(),
            serde_json::json!({"machine": m["metadata"]["name"], "host": host.map(|h| h["metadata"]["name"].clone()),
                "operational": host.map(|h| h["status"]["operationalStatus"].clone())}),
        );
    }
    out
}

/// Every BareMetalHost as kubectl reads it, by `namespace/name`, with the nodes and Machine
/// whose providerID (`metal3://<namespace>/<host>/<machine>`) names it; the hardware as
/// `[cpus, ram_mib, nics, disks]`.
fn hosts_truth(kubeconfig: &Path) -> BTreeMap<String, Value> {
    let get = |what: &str| -> Vec<Value> {
        let v: Value = serde_json::from_str(&kubectl(kubeconfig, &["get", what, "-A", "-o", "json"])).expect("JSON");
        v["items"].as_array().cloned().unwrap_or_default()
    };
    let machines = get("machines.cluster.x-k8s.io");
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let mut out = BTreeMap::new();
    for h in get("baremetalhosts.metal3.io") {
        let (ns, name) = (text(&h["metadata"]["namespace"]), text(&h["metadata"]["name"]));
        let mut under: Vec<&Value> = machines
            .iter()
            .filter(|m| {
                let pid = m["spec"]["providerID"].as_str().unwrap_or_default();
                let parts: Vec<&str> = pid.trim_start_matches("metal3://").split('/').collect();
                parts.len() == 3 && parts[0] == ns && parts[1] == name
            })
            .collect();
        under.sort_by_key(|m| text(&m["metadata"]["name"]));
        let mut nodes: Vec<String> =
            under.iter().filter_map(|m| m["status"]["nodeRef"]["name"].as_str()).map(String::from).collect();
        nodes.sort();
        let annotations = h["metadata"]["annotations"].as_object();
        let has = |k: &str| annotations.is_some_and(|a| a.keys().any(|a| a == k || a.starts_with(&format!("{k}/"))));
        let c = &h["spec"]["consumerRef"];
        let hw = &h["status"]["hardware"];
        let count = |v: &Value| v.as_array().map_or(0, Vec::len);
        out.insert(
            format!("{ns}/{name}"),
            serde_json::json!({
                "state": text(&h["status"]["provisioning"]["state"]),
                "operational": text(&h["status"]["operationalStatus"]),
                "error": [text(&h["status"]["errorType"]), text(&h["status"]["errorMessage"])],
                "powered_on": h["status"]["poweredOn"].as_bool().unwrap_or(false),
                "online": h["spec"]["online"].as_bool().unwrap_or(false),
                "consumer": if c.is_object() { Value::from(format!("{} {}", text(&c["kind"]), text(&c["name"]))) } else { Value::Null },
                "nodes": nodes,
                "machine": under.first().map(|m| m["metadata"]["name"].clone()),
                "reboot": has("reboot.metal3.io"),
                "inspect": annotations.and_then(|a| a.get("inspect.metal3.io")).is_some_and(|v| v != "disabled"),
                "inspection": [&h["status"]["operationHistory"]["inspect"]["start"], &h["status"]["operationHistory"]["inspect"]["end"]],
                "hardware": if hw.is_object() {
                    serde_json::json!([hw["cpu"]["count"].as_i64().unwrap_or(0), hw["ramMebibytes"].as_i64().unwrap_or(0),
                        count(&hw["nics"]), count(&hw["storage"])])
                } else { Value::Null },
            }),
        );
    }
    out
}

#[test]
fn sim_factory_writes_a_management_cluster_that_fabrik_reads_as_kubectl_does() {
    let dir = std::env::temp_dir().join(format!("fabrik-sim-factory-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (_cp, kubeconfig) = control_plane(&dir);

    // Without the CRDs: refused, said how to fix, nothing registered.
    let o = Command::new(BIN)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["sim", "--nodes", "8", "--seed", "5", "--dra-every", "0", "--factory"])
        .output()
        .expect("run fabrik sim");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("--factory needs Cluster API's and Metal3's CRDs") && err.contains("capi.sh crds"), "{err}");
    let nodes = kubectl(&kubeconfig, &["get", "nodes", "-l", "fabrik.io/simulated=true", "-o", "name"]);
    assert!(nodes.trim().is_empty(), "a refused sim registered nodes: {nodes}");

    install_crds(&kubeconfig);
    let _sim =
        common::sim(&kubeconfig, &dir, &["--nodes", "8", "--seed", "5", "--dra-every", "0", "--workload", "--factory"]);

    // The capi view, row by row, against kubectl.
    let words = settle("the capi view against kubectl", || {
        let want = capi_truth::truth(&kubeconfig, NS);
        let (have, words) = capi_truth::fabrik_rows(&kubeconfig, NS);
        let machines = want.keys().filter(|k| k.starts_with("Machine/")).count();
        if machines != 8 {
            return Err(format!("kubectl reads {machines} Machines"));
        }
        if have == want { Ok(words) } else { Err(format!("fabrik {have:#?}\nkubectl {want:#?}")) }
    });
    let state = |k: &str| words.get(k).map(|w| w.0.clone()).unwrap_or_else(|| panic!("no row {k}: {words:#?}"));
    assert_eq!(state("Cluster/gpu-sim"), "Provisioned");
    assert_eq!(state("MachineHealthCheck/gpu-sim-workers"), "1 unhealthy");
    let remediating: Vec<&String> =
        words.iter().filter(|(_, w)| w.0 == "Running, remediating").map(|(k, _)| k).collect();
    assert_eq!(remediating.len(), 1, "{words:#?}");

    // Each node's Machine and host in the fleet view, against the chain kubectl follows.
    settle("the fleet's machine and host against kubectl", || {
        let want = chain_truth(&kubeconfig);
        let fleet = fabrik_view(&kubeconfig, "fleet");
        let have: BTreeMap<String, Value> = fleet["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| !r["machine"].is_null())
            .map(|r| {
                let name = r["name"].as_str().unwrap_or_default().to_string();
                let v = serde_json::json!({"machine": r["machine"]["name"], "host": r["host"]["name"],
                    "operational": r["host"]["operational_status"]});
                (name, v)
            })
            .collect();
        let errors = want.values().filter(|v| v["operational"] == "error").count();
        if want.len() != 8 || errors != 2 {
            return Err(format!("kubectl: {} nodes with a Machine, {errors} hosts in error: {want:#?}", want.len()));
        }
        if have == want { Ok(()) } else { Err(format!("fabrik {have:#?}\nkubectl {want:#?}")) }
    });

    // The hosts view, row by row, against the BareMetalHosts and Machines kubectl reads: the
    // hosts under the nodes and the two spares under none (one in a registration error).
    let hosts = settle("the hosts view against kubectl", || {
        let want = hosts_truth(&kubeconfig);
        let have: BTreeMap<String, Value> = fabrik_view(&kubeconfig, "hosts")["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                let hw = &r["hardware"];
                let v = serde_json::json!({"state": r["provisioning_state"], "operational": r["operational_status"],
                    "error": [&r["error_type"], &r["error_message"]], "powered_on": r["powered_on"],
                    "online": r["online"], "consumer": r["consumer"], "nodes": r["nodes"], "machine": r["machine"],
                    "reboot": r["reboot_pending"], "inspect": r["inspect_pending"],
                    "inspection": [&r["inspection"]["started"], &r["inspection"]["ended"]],
                    "hardware": if hw.is_null() { Value::Null } else {
                        serde_json::json!([&hw["cpus"], &hw["ram_mib"], &hw["nics"], &hw["disks"]]) }});
                (r["host"].as_str().unwrap_or_default().to_string(), v)
            })
            .collect();
        if want.len() != 10 {
            return Err(format!("kubectl reads {} hosts: {want:#?}", want.len()));
        }
        if have == want { Ok(want) } else { Err(format!("fabrik {have:#?}\nkubectl {want:#?}")) }
    });
    let spare = |state: &str| hosts.values().any(|h| h["nodes"] == serde_json::json!([]) && h["state"] == state);
    assert!(spare("available") && spare("registering"), "{hosts:#?}");
    assert!(hosts.values().any(|h| h["inspection"][1].is_string()), "a host with an inspection recorded: {hosts:#?}");

    // A host powered off (spec.online: false, as fabrik's `power-off` writes it) takes its node
    // down: the simulated operator reports it off and the node's kubelet stops. kubectl and
    // fabrik agree on both, and back on, the node is Ready again.
    let chain = chain_truth(&kubeconfig);
    let (node, link) = chain.iter().find(|(_, v)| v["operational"] == "OK").expect("a host that is OK");
    let host = link["host"].as_str().expect("its host").to_string();
    let power = |online: bool| {
        let patch = serde_json::json!({"spec": {"online": online}}).to_string();
        kubectl(&kubeconfig, &["patch", "baremetalhost", &host, "-n", NS, "--type=merge", "-p", &patch]);
    };
    let agree = |want_ready: &str, want_on: bool| {
        let ready = kubectl(
            &kubeconfig,
            &["get", "node", node, "-o", r#"jsonpath={.status.conditions[?(@.type=="Ready")].status}"#],
        );
        let on = kubectl(&kubeconfig, &["get", "baremetalhost", &host, "-n", NS, "-o", "jsonpath={.status.poweredOn}"]);
        if (ready.trim(), on.trim()) != (want_ready, if want_on { "true" } else { "false" }) {
            return Err(format!("kubectl: node {node} Ready={ready}, host {host} poweredOn={on}"));
        }
        let fleet = fabrik_view(&kubeconfig, "fleet");
        let row = fleet["rows"].as_array().into_iter().flatten().find(|r| r["name"] == node.as_str()).cloned();
        let row = row.ok_or_else(|| format!("no fleet row {node}"))?;
        let have = (row["ready"].as_bool(), row["host"]["powered_on"].as_bool());
        if have == (Some(want_ready == "True"), Some(want_on)) { Ok(()) } else { Err(format!("fabrik: {row}")) }
    };
    power(false);
    settle("a host powered off takes its node down", || agree("False", false));
    power(true);
    settle("back on, its node is Ready", || agree("True", true));

    // The tenants' NetworkPolicy verdicts, against the policies and namespaces kubectl reads:
    // some tenants denied, the others open.
    let netpols = settle("the tenants' netpol against kubectl", || {
        let nps: Value = serde_json::from_str(&kubectl(&kubeconfig, &["get", "networkpolicies", "-A", "-o", "json"]))
            .map_err(|e| e.to_string())?;
        let nss: Value =
            serde_json::from_str(&kubectl(&kubeconfig, &["get", "namespaces", "-l", "fabrik.io/tenant", "-o", "json"]))
                .map_err(|e| e.to_string())?;
        let mut of_tenant: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for ns in nss["items"].as_array().into_iter().flatten() {
            let m = &ns["metadata"];
            let (Some(t), Some(n)) = (m["labels"]["fabrik.io/tenant"].as_str(), m["name"].as_str()) else { continue };
            of_tenant.entry(t.to_string()).or_default().push(n.to_string());
        }
        let items = nps["items"].as_array().map_or(&[][..], Vec::as_slice);
        let namespaces = nss["items"].as_array().map_or(&[][..], Vec::as_slice);
        let truth = isolation::Isolation::new(namespaces, items, Vec::new(), &BTreeMap::new());
        let (mut have, mut want) = (BTreeMap::new(), BTreeMap::new());
        for r in fabrik_view(&kubeconfig, "tenants")["rows"].as_array().into_iter().flatten() {
            let tn = r["tenant"].as_str().unwrap_or_default().to_string();
            let Some(nss) = of_tenant.get(&tn) else { continue };
            let t = truth.tenant(&tn, nss);
            want.insert(tn.clone(), serde_json::json!([t["netpol"], t["pod_security"]]));
            have.insert(tn, serde_json::json!([r["isolation"]["netpol"], r["isolation"]["pod_security"]]));
        }
        if want.len() < 2 {
            return Err(format!("only {} labelled tenants in fabrik's view: {have:?}", want.len()));
        }
        if have == want { Ok(want) } else { Err(format!("fabrik {have:#?}\nkubectl {want:#?}")) }
    });
    let open = netpols.values().any(|v| v[0].as_str().is_some_and(|s| s.starts_with("open")));
    assert!(netpols.values().any(|v| v[0] == "deny") && open, "{netpols:#?}");
}
