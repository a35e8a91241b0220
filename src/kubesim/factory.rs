//! `fabrik sim --factory`: the simulated nodes as a Cluster API management cluster states
//! them, in namespace `capi-sim` — a Cluster `gpu-sim` with its KubeadmControlPlane, one
//! MachineDeployment and MachineSet per GPU model, a Machine per node (providerID naming its
//! host, nodeRef the node), a Metal3 BareMetalHost under each (labelled simulated, so the
//! baremetal-operator of `bmo` answers fabrik's reboots), a MachineHealthCheck over the
//! workers — and, as the controllers would write it, their status: every 7th host in a power
//! management error, the second node's Machine found unhealthy and being remediated, the
//! replica counts that follow from that. Nothing runs Cluster API here: the objects are what
//! its controllers would have left, for the cockpit to read. The CRDs must be installed
//! (Cluster API's module and Metal3's); without them it says how and changes nothing.

use std::collections::BTreeMap;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

use super::model::SimNode;
use crate::cluster::labels;

pub const NAMESPACE: &str = "capi-sim";
const CLUSTER: &str = "gpu-sim";
const VERSION: &str = "v1.34.1";
const MANAGER: &str = "fabrik-sim";

/// One object to apply: its group, version, kind, plural; the object; its status.
pub struct Obj {
    pub gvk: (&'static str, &'static str, &'static str),
    pub plural: &'static str,
    pub body: Value,
    pub status: Value,
}

const CAPI: &str = "cluster.x-k8s.io";
const KCP: &str = "controlplane.cluster.x-k8s.io";
const METAL3: &str = "metal3.io";

/// The kinds `--factory` writes: (group, version, kind, plural).
pub const KINDS: [(&str, &str, &str, &str); 7] = [
    (CAPI, "v1beta2", "Cluster", "clusters"),
    (KCP, "v1beta2", "KubeadmControlPlane", "kubeadmcontrolplanes"),
    (CAPI, "v1beta2", "MachineDeployment", "machinedeployments"),
    (CAPI, "v1beta2", "MachineSet", "machinesets"),
    (CAPI, "v1beta2", "MachineHealthCheck", "machinehealthchecks"),
    (CAPI, "v1beta2", "Machine", "machines"),
    (METAL3, "v1alpha1", "BareMetalHost", "baremetalhosts"),
];

fn obj(kind: usize, name: &str, labels: Value, spec: Value, status: Value) -> Obj {
    let (group, version, k, plural) = KINDS[kind];
    let mut labels = labels;
    labels[labels::SIMULATED] = "true".into();
    Obj {
        gvk: (group, version, k),
        plural,
        body: json!({"apiVersion": format!("{group}/{version}"), "kind": k,
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels}, "spec": spec}),
        status,
    }
}

fn cond(kind: &str, ok: bool, reason: &str, message: &str) -> Value {
    json!({"type": kind, "status": if ok { "True" } else { "False" }, "reason": reason, "message": message,
        "lastTransitionTime": "2026-12-01T00:00:00Z"})
}

fn counts(desired: u32, ready: u32) -> Value {
    json!({"replicas": desired, "readyReplicas": ready, "availableReplicas": ready, "upToDateReplicas": desired})
}

fn infra(kind: &str, name: &str) -> Value {
    json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": kind, "name": name})
}

/// Whose host is in error (every 7th node, the first among them) and whose Machine is
/// being remediated (the second node's).
pub fn host_in_error(i: usize) -> bool {
    i.is_multiple_of(7)
}
pub fn remediating(i: usize) -> bool {
    i == 1
}

/// Every object `--factory` writes for these nodes, in the order to apply them.
pub fn objects(nodes: &[SimNode]) -> Vec<Obj> {
    let mut out = Vec::new();
    // MachineDeployment (by GPU model) → (machines, ready).
    let mut pools: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for n in nodes {
        let p = pools.entry(deployment(n)).or_default();
        p.0 += 1;
        p.1 += u32::from(!remediating(n.index));
    }
    let (all, ready) = pools.values().fold((0, 0), |(a, r), p| (a + p.0, r + p.1));
    let available = |ok: bool, what: &str| {
        if ok { cond("Available", true, "Available", "") } else { cond("Available", false, "NotAvailable", what) }
    };
    out.push(obj(
        0,
        CLUSTER,
        json!({}),
        json!({"controlPlaneRef": {"apiGroup": KCP, "kind": "KubeadmControlPlane", "name": format!("{CLUSTER}-cp")},
            "infrastructureRef": infra("Metal3Cluster", CLUSTER)}),
        json!({"phase": "Provisioned",
            "controlPlane": {"desiredReplicas": 3, "replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "upToDateReplicas": 3},
            "workers": {"desiredReplicas": all, "replicas": all, "readyReplicas": ready, "availableReplicas": ready, "upToDateReplicas": all},
            "conditions": [available(ready == all, &format!("{} of {all} workers not available", all - ready))]}),
    ));
    let mut cp = counts(3, 3);
    cp["version"] = VERSION.into();
    cp["conditions"] = json!([available(true, "")]);
    out.push(obj(
        1,
        &format!("{CLUSTER}-cp"),
        json!({"cluster.x-k8s.io/cluster-name": CLUSTER}),
        json!({"replicas": 3, "version": VERSION, "machineTemplate": {"spec": {"infrastructureRef": infra("Metal3MachineTemplate", "cp")}}}),
        cp,
    ));
    for (md, (n, r)) in &pools {
        let template = json!({"metadata": {"labels": {"pool": md}}, "spec": {"clusterName": CLUSTER, "version": VERSION,
            "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": md}},
            "infrastructureRef": infra("Metal3MachineTemplate", md)}});
        let spec = json!({"clusterName": CLUSTER, "replicas": n, "selector": {"matchLabels": {"pool": md}}, "template": template});
        let mut st = counts(*n, *r);
        let mut conds = vec![available(r == n, &format!("{} of {n} machines not available", n - r))];
        if r < n {
            conds.push(cond("Remediating", true, "Remediating", "a Machine is being remediated"));
        }
        st["conditions"] = json!(conds);
        let mut md_st = st.clone();
        md_st["phase"] = "Running".into();
        out.push(obj(2, md, json!({}), spec.clone(), md_st));
        out.push(obj(3, &format!("{md}-5b8c4"), json!({"cluster.x-k8s.io/deployment-name": md}), spec, st));
    }
    // maxUnhealthy 40%, as MachineHealthChecks are often set.
    let sick = all - ready;
    let allowed = (all * 2 / 5).saturating_sub(sick);
    let targets: Vec<String> = nodes.iter().map(|n| format!("{}-m", n.name)).collect();
    out.push(obj(
        4,
        &format!("{CLUSTER}-workers"),
        json!({}),
        json!({"clusterName": CLUSTER, "selector": {"matchLabels": {"cluster.x-k8s.io/cluster-name": CLUSTER}}}),
        json!({"expectedMachines": all, "currentHealthy": ready, "remediationsAllowed": allowed, "targets": targets,
            "conditions": [cond("RemediationAllowed", true, "RemediationAllowed", "")]}),
    ));
    for n in nodes {
        let (md, name, host) = (deployment(n), format!("{}-m", n.name), format!("{}-host", n.name));
        let mut conditions = vec![];
        if remediating(n.index) {
            conditions.push(cond(
                "HealthCheckSucceeded",
                false,
                "UnhealthyNode",
                "Condition Ready on node is reporting status False for more than 5m0s",
            ));
            conditions.push(cond("OwnerRemediated", false, "WaitingForRemediation", ""));
        }
        out.push(obj(
            5,
            &name,
            json!({"cluster.x-k8s.io/cluster-name": CLUSTER, "cluster.x-k8s.io/deployment-name": md,
                "cluster.x-k8s.io/set-name": format!("{md}-5b8c4"), "pool": md}),
            json!({"clusterName": CLUSTER, "version": VERSION, "providerID": format!("metal3://{NAMESPACE}/{host}/{name}"),
                "bootstrap": {"dataSecretName": format!("{name}-bootstrap")}, "infrastructureRef": infra("Metal3Machine", &name)}),
            json!({"phase": "Running", "nodeRef": {"name": n.name}, "conditions": conditions}),
        ));
        let bad = host_in_error(n.index);
        let mut st = json!({"provisioning": {"state": "provisioned"}, "operationalStatus": if bad { "error" } else { "OK" },
            "poweredOn": !bad,
            "hardware": {"systemVendor": {"manufacturer": "Supermicro", "productName": "SYS-821GE-TNHR"},
                "cpu": {"model": "Intel(R) Xeon(R) Platinum 8480+", "count": 224}, "ramMebibytes": 2_097_152,
                "nics": (0..10).map(|i| json!({"name": format!("eth{i}"), "speedGbps": 400})).collect::<Vec<_>>(),
                "storage": (0..8).map(|i| json!({"name": format!("/dev/nvme{i}n1"), "sizeBytes": 3_840_000_000_000u64})).collect::<Vec<_>>()}});
        if bad {
            st["errorType"] = "power management error".into();
            st["errorMessage"] = "Failed to get power state for node: Redfish connection to the BMC timed out".into();
        }
        out.push(obj(
            6,
            &host,
            json!({super::bmo::NODE_LABEL: n.name}),
            json!({"online": true, "bmc": {"address": format!("redfish://10.0.0.9/redfish/v1/Systems/{host}"), "credentialsName": format!("{host}-bmc")},
                "consumerRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "Metal3Machine", "name": name, "namespace": NAMESPACE}}),
            st,
        ));
    }
    // Two hosts under no node: an inspected spare the operator keeps off for the next
    // Machine, and one it cannot register (its BMC refuses the credentials).
    let hw = json!({"systemVendor": {"manufacturer": "Supermicro", "productName": "SYS-821GE-TNHR"},
        "cpu": {"model": "Intel(R) Xeon(R) Platinum 8480+", "count": 224}, "ramMebibytes": 2_097_152,
        "nics": (0..10).map(|i| json!({"name": format!("eth{i}"), "speedGbps": 400})).collect::<Vec<_>>()});
    for (name, status) in [
        (
            SPARES[0],
            json!({"provisioning": {"state": "available"}, "operationalStatus": "OK", "poweredOn": false, "hardware": hw,
                "operationHistory": {"inspect": {"start": "2026-11-30T08:12:40Z", "end": "2026-11-30T08:16:05Z"}}}),
        ),
        (
            SPARES[1],
            json!({"provisioning": {"state": "registering"}, "operationalStatus": "error", "poweredOn": false,
                "errorType": "registration error",
                "errorMessage": "Failed to get power state for node: HTTP 401 Unauthorized from the BMC"}),
        ),
    ] {
        out.push(obj(
            6,
            name,
            json!({}),
            json!({"online": false, "bmc": {"address": format!("redfish://10.0.0.9/redfish/v1/Systems/{name}"), "credentialsName": format!("{name}-bmc")}}),
            status,
        ));
    }
    out
}

/// The BareMetalHosts `--factory` writes under no node.
pub const SPARES: [&str; 2] = ["spare-0", "spare-1"];

/// A node's MachineDeployment: one per GPU model (`gpu-sim-h100-80gb`).
fn deployment(n: &SimNode) -> String {
    format!("{CLUSTER}-{}", n.model.name().to_ascii_lowercase())
}

fn resource(o: &Obj) -> ApiResource {
    let (g, v, k) = o.gvk;
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, k), o.plural)
}

/// Whether the server serves every kind `--factory` writes; if not, what to install.
pub async fn check(client: &kube::Client) -> Result<(), String> {
    let mut missing = Vec::new();
    for (g, v, k, plural) in KINDS {
        if kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(g, v, k)).await.is_err() {
            missing.push(format!("{plural}.{g}/{v}"));
        }
    }
    if !missing.is_empty() {
        return Err(format!(
            "--factory needs Cluster API's and Metal3's CRDs, and the server does not serve {}. Install them: \
             kubectl apply --server-side -f \"$(tests/capi/capi.sh crds)\" (and its \
             controlplane/kubeadm/config/crd/bases), kubectl apply -f tests/fixtures/crds/metal3.io_baremetalhosts.yaml",
            missing.join(", ")
        ));
    }
    Ok(())
}

/// Writes the objects and their status (after [`check`]).
pub async fn create(client: &kube::Client, nodes: &[SimNode]) -> Result<usize, String> {
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE,
        "labels": {super::workload::WORKLOAD_LABEL: "true", labels::SIMULATED: "true"}}});
    let pp = PatchParams::apply(MANAGER).force();
    ns.patch(NAMESPACE, &pp, &Patch::Apply(&body)).await.map_err(|e| format!("namespace {NAMESPACE}: {e}"))?;
    let objs = objects(nodes);
    for o in &objs {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &resource(o));
        let name = o.body["metadata"]["name"].as_str().unwrap_or_default();
        let what = format!("{} {NAMESPACE}/{name}", o.gvk.2);
        api.patch(name, &pp, &Patch::Apply(&o.body)).await.map_err(|e| format!("{what}: {e}"))?;
        let status = json!({"status": o.status});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(|e| format!("{what}'s status: {e}"))?;
    }
    Ok(objs.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_factory_is_one_cluster_whose_counts_follow_its_machines() {
        let nodes = super::super::model::build_nodes(7, 9, 0, 0);
        let objs = objects(&nodes);
        let of = |k: &str| objs.iter().filter(|o| o.gvk.2 == k).collect::<Vec<_>>();
        // A host per node, and the two spares under none.
        assert_eq!((of("Machine").len(), of("BareMetalHost").len(), of("Cluster").len()), (9, 11, 1));
        let spares: Vec<&Value> = of("BareMetalHost")
            .into_iter()
            .filter(|h| SPARES.contains(&h.body["metadata"]["name"].as_str().unwrap_or("")))
            .map(|h| &h.status)
            .collect();
        assert_eq!(spares.len(), 2);
        assert!(spares.iter().any(|s| s["provisioning"]["state"] == "available" && s["operationalStatus"] == "OK"));
        assert!(spares.iter().any(|s| s["operationalStatus"] == "error" && s["errorType"] == "registration error"));
        // Every Machine's set and deployment exist, and their replicas add up to the nodes.
        let mds = of("MachineDeployment");
        assert!(!mds.is_empty() && mds.len() == of("MachineSet").len());
        let sum = |k: &str, f: &str| of(k).iter().map(|o| o.status[f].as_u64().unwrap_or(0)).sum::<u64>();
        assert_eq!((sum("MachineDeployment", "replicas"), sum("MachineDeployment", "readyReplicas")), (9, 8));
        for m in of("Machine") {
            let set = &m.body["metadata"]["labels"]["cluster.x-k8s.io/set-name"];
            assert!(of("MachineSet").iter().any(|s| s.body["metadata"]["name"] == *set), "{set}");
            // The providerID names its host.
            let pid = m.body["spec"]["providerID"].as_str().unwrap_or_default();
            let host = pid.split('/').nth(3).unwrap_or_default();
            assert!(of("BareMetalHost").iter().any(|h| h.body["metadata"]["name"] == host), "{pid}");
        }
        let c = &of("Cluster")[0].status;
        assert_eq!(
            (c["workers"]["desiredReplicas"].as_u64(), c["workers"]["readyReplicas"].as_u64()),
            (Some(9), Some(8))
        );
        let mhc = &of("MachineHealthCheck")[0].status;
        assert_eq!((mhc["expectedMachines"].as_u64(), mhc["currentHealthy"].as_u64()), (Some(9), Some(8)));
        // Hosts 0 and 7 are in error (and one spare); the second Machine is being remediated.
        let bad: Vec<&Value> = of("BareMetalHost")
            .iter()
            .filter(|h| h.status["operationalStatus"] == "error" && !h.body["spec"]["consumerRef"].is_null())
            .map(|h| &h.body["metadata"]["name"])
            .collect();
        assert_eq!(bad.len(), 2);
        let sick: Vec<&Obj> = of("Machine")
            .into_iter()
            .filter(|m| m.status["conditions"].as_array().is_some_and(|c| !c.is_empty()))
            .collect();
        assert_eq!(sick.len(), 1);
        // Everything is labelled simulated and in the one namespace.
        assert!(objs.iter().all(|o| o.body["metadata"]["labels"][labels::SIMULATED] == "true"
            && o.body["metadata"]["namespace"] == NAMESPACE));
        // What the fabrik readers make of it agrees.
        let m = crate::cluster::capi::machine(
            &json!({"metadata": sick[0].body["metadata"], "spec": sick[0].body["spec"], "status": sick[0].status}),
        );
        assert!(m.is_some_and(|m| m.remediating.is_some() && m.set.is_some()));
    }
}
