//! The workload's DRA claims: one GPU per plain claim, and with `--dra-alpha` claims on the
//! alpha shapes, which the real kube-scheduler allocates (tests/fixtures/dra-alpha/):
//! two pods with a claim for a partition of the partitionable GPUs (a 3g and a 1g, class
//! `mig.nvidia.com`, selected by profile and parent GPU), and three pods with a claim for
//! 20Gi of the memory of the GPU shared by capacity (selected by uuid): two of recsys, one
//! of eval. The plain claims keep
//! off the shaped GPUs, so that they neither take a partitionable GPU whole nor a share.

use serde_json::{Value, json};

use super::{App, Ask, Kind, ns_of};
use crate::cluster::labels;
use crate::kubesim::model::SimNode;
use crate::mig;

/// What each claim on the GPU shared by capacity asks for.
pub const SHARE_MEMORY: &str = "20Gi";
const TENANT: &str = "recsys";
const OTHER_TENANT: &str = "eval";

/// GPU `gpu` of `n` carries an alpha shape.
pub(super) fn shaped(n: &SimNode, gpu: u8) -> bool {
    let a = &n.alpha;
    a.partitionable.contains(&gpu) || a.capacity == Some(gpu) || a.driver_taint == Some(gpu)
}

/// The uuids of the shaped GPUs (the plain DRA claims keep off them).
pub(super) fn excluded(nodes: &[SimNode]) -> Vec<String> {
    nodes.iter().flat_map(|n| n.gpus.iter().filter(|g| shaped(n, g.index)).map(|g| g.uuid.clone())).collect()
}

/// The pods with claims on the alpha shapes; none without them.
pub(super) fn alpha_apps(nodes: &[SimNode]) -> Vec<App> {
    let app = |name: &str, ask, replicas| App {
        tenant: TENANT,
        namespace: ns_of(TENANT),
        name: name.to_string(),
        kind: Kind::Bare,
        ask,
        replicas,
        image: "nvcr.io/nvidia/tritonserver:25.01-py3",
        pdb: None,
        node_selector: Vec::new(),
    };
    let mut out = Vec::new();
    if let Some(n) = nodes.iter().find(|n| !n.alpha.partitionable.is_empty()) {
        let parents: Vec<String> =
            n.gpus.iter().filter(|g| n.alpha.partitionable.contains(&g.index)).map(|g| g.uuid.clone()).collect();
        for (size, slices) in [("3g", 4), ("1g", 1)] {
            let Some(id) = crate::sim::partition_placements(n.model)
                .into_iter()
                .map(|p| p.profile)
                .find(|id| mig::profile(n.model, *id).memory_slices == slices)
            else {
                continue;
            };
            let profile = mig::profile(n.model, id).name.to_string();
            out.push(app(&format!("mig-dyn-{size}"), Ask::Partition { profile, parents: parents.clone() }, 1));
        }
    }
    let shared = nodes.iter().find_map(|n| n.gpus.iter().find(|g| n.alpha.capacity == Some(g.index)));
    if let Some(g) = shared {
        let ask = || Ask::Capacity { uuid: g.uuid.clone(), memory: SHARE_MEMORY };
        out.push(app("embed-shared", ask(), 2));
        // A third claim from another tenant: one GPU serving two tenants (the isolation
        // audit's `GPU shared`).
        out.push(App { tenant: OTHER_TENANT, namespace: ns_of(OTHER_TENANT), ..app("eval-shared", ask(), 1) });
    }
    out
}

fn quoted(list: &[String]) -> String {
    list.iter().map(|u| format!("'{u}'")).collect::<Vec<_>>().join(", ")
}

fn attr(name: &str) -> String {
    format!("device.attributes['{}'].{name}", labels::DRA_DRIVER)
}

/// The claim of pod `i` of `a` (name, object), for the asks that use one.
pub(super) fn claim(a: &App, i: u32, exclude: &[String]) -> Option<(String, Value)> {
    let cel = |e: String| json!([{ "cel": { "expression": e } }]);
    let mut exactly = json!({ "deviceClassName": labels::DRA_GPU_CLASS, "allocationMode": "ExactCount", "count": 1 });
    match &a.ask {
        Ask::Dra if !exclude.is_empty() => {
            exactly["selectors"] = cel(format!("!({} in [{}])", attr("uuid"), quoted(exclude)));
        }
        Ask::Dra => {}
        Ask::Partition { profile, parents } => {
            exactly["deviceClassName"] = json!(labels::DRA_MIG_CLASS);
            exactly["selectors"] =
                cel(format!("{} == '{profile}' && {} in [{}]", attr("profile"), attr("parentUUID"), quoted(parents)));
        }
        Ask::Capacity { uuid, memory } => {
            exactly["selectors"] = cel(format!("{} == '{uuid}'", attr("uuid")));
            exactly["capacity"] = json!({ "requests": { "memory": memory } });
        }
        _ => return None,
    }
    let name = format!("{}-{i}-gpu", a.name);
    let body = json!({
        "metadata": { "name": name, "labels": { "app": a.name } },
        "spec": { "devices": { "requests": [{ "name": "gpu", "exactly": exactly }] } },
    });
    Some((name, body))
}

#[cfg(test)]
mod tests {
    use super::super::{objects, plan};
    use super::*;
    use crate::kubesim::{alpha, model};

    fn alpha_nodes() -> Vec<SimNode> {
        let mut nodes = model::build_nodes(7, 16, 4, 0);
        alpha::assign(&mut nodes);
        nodes
    }

    #[test]
    fn claims_land_on_the_shapes_and_plain_claims_keep_off() {
        let nodes = alpha_nodes();
        let p = plan(&nodes, Some(80));
        let names: Vec<&str> = p.apps.iter().filter(|a| a.ask.claims()).map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["ranker", "mig-dyn-3g", "mig-dyn-1g", "embed-shared", "eval-shared"]);
        assert_eq!(p.dra_namespace().as_deref(), Some("recsys"));
        let [_, work, _] = objects(&p, 7);
        let claim = |name: &str| {
            work.iter().find(|o| o.gvk.2 == "ResourceClaim" && o.body["metadata"]["name"] == name).cloned().expect(name)
        };
        let req = |name: &str| claim(name).body["spec"]["devices"]["requests"][0]["exactly"].clone();
        let part = &nodes[3];
        let (g0, g1) = (&part.gpus[0].uuid, &part.gpus[1].uuid);
        let m = req("mig-dyn-3g-0-gpu");
        assert_eq!(m["deviceClassName"], "mig.nvidia.com");
        assert_eq!(
            m["selectors"][0]["cel"]["expression"],
            format!(
                "device.attributes['gpu.nvidia.com'].profile == '3g.40gb' && \
                 device.attributes['gpu.nvidia.com'].parentUUID in ['{g0}', '{g1}']"
            )
        );
        let shared = &nodes[7].gpus[0].uuid;
        for name in ["embed-shared-0-gpu", "embed-shared-1-gpu", "eval-shared-0-gpu"] {
            let c = req(name);
            assert_eq!(c["capacity"]["requests"]["memory"], "20Gi");
            assert_eq!(
                c["selectors"][0]["cel"]["expression"],
                format!("device.attributes['gpu.nvidia.com'].uuid == '{shared}'")
            );
        }
        let r = req("ranker-0-gpu");
        let expr = r["selectors"][0]["cel"]["expression"].as_str().unwrap_or_default().to_string();
        assert!(expr.starts_with("!(device.attributes['gpu.nvidia.com'].uuid in [") && expr.contains(shared.as_str()));
        assert!(expr.contains(g0.as_str()) && expr.contains(g1.as_str()));
        // Every claim parses as the typed object; the pods use theirs.
        for o in work.iter().filter(|o| o.gvk.2 == "ResourceClaim") {
            let typed: Result<k8s_openapi::api::resource::v1::ResourceClaim, _> =
                serde_json::from_value(o.body.clone());
            assert!(typed.is_ok(), "{:?}", o.body);
        }
        let pod =
            work.iter().find(|o| o.gvk.2 == "Pod" && o.body["metadata"]["name"] == "embed-shared-1").expect("pod");
        assert_eq!(pod.body["spec"]["resourceClaims"][0]["resourceClaimName"], "embed-shared-1-gpu");
        // recsys's device quota counts the shares too.
        let q = p.quotas.iter().find(|(n, r, _)| n == "recsys" && r.contains("deviceclass")).expect("quota");
        let claims: i64 = p
            .apps
            .iter()
            .filter(|a| a.namespace == "recsys" && matches!(a.ask, Ask::Dra | Ask::Capacity { .. }))
            .map(|a| i64::from(a.replicas))
            .sum();
        assert_eq!(q.2, claims * 3 / 2 + 4);
    }

    #[test]
    fn without_the_shapes_the_claims_are_as_before() {
        let nodes = model::build_nodes(7, 16, 4, 0);
        let p = plan(&nodes, Some(80));
        assert!(p.dra_exclude.is_empty());
        assert!(p.apps.iter().all(|a| !matches!(a.ask, Ask::Partition { .. } | Ask::Capacity { .. })));
        let [_, work, _] = objects(&p, 7);
        let c = work.iter().find(|o| o.gvk.2 == "ResourceClaim").expect("claim");
        assert_eq!(
            c.body["spec"]["devices"]["requests"][0]["exactly"],
            json!({ "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1 })
        );
    }
}
