//! The workload plan and its objects.

use super::*;

#[test]
fn plan_hits_the_target_and_covers_the_mix() {
    let nodes = model::build_nodes(42, 48, 4, 0);
    let p = plan(&nodes, None);
    let gpus = 48 * 8;
    let n = p.gpu_pods();
    let want = gpus * 6 / 10;
    assert!(n.abs_diff(want) <= 12, "{n} pods for a target of {want}");
    assert!(p.apps.iter().any(|a| a.kind == Kind::Job));
    assert!(p.apps.iter().any(|a| a.kind == Kind::Bare));
    assert!(p.apps.iter().any(|a| a.ask == Ask::Dra));
    assert!(p.apps.iter().any(|a| matches!(a.ask, Ask::Mig(_))));
    assert!(p.apps.iter().any(|a| a.pdb.is_some()));
    assert!(p.namespaces.iter().any(|(n, t)| n == "vcluster-research" && t == VCLUSTER));
    let q = |ns: &str| p.quotas.iter().find(|(n, r, _)| n == ns && r == "requests.nvidia.com/gpu").map(|q| q.2);
    let used = |ns: &str| -> i64 {
        p.apps
            .iter()
            .filter(|a| a.namespace == ns)
            .map(|a| if let Ask::Gpus(g) = a.ask { i64::from(g) * i64::from(a.replicas) } else { 0 })
            .sum()
    };
    assert!(q("vcluster-research").is_some_and(|h| h < used("vcluster-research")));
    assert_eq!(q("llm-finetune"), Some(used("llm-finetune") + 1));
    assert!(plan(&nodes, Some(1000)).gpu_pods().abs_diff(1000) <= 20);
    // Quotas on MIG resources and on a tenant's second namespace.
    assert!(
        p.quotas.iter().any(|(n, r, _)| n == "speech" && r.starts_with("requests.nvidia.com/mig-")),
        "{:?}",
        p.quotas
    );
    assert!(p.quotas.iter().any(|(n, r, _)| n == "llm-finetune-dev" && r == "requests.nvidia.com/gpu"));
}

#[test]
fn shared_gpus_get_pods_that_select_them_by_strategy() {
    let nodes = model::build_nodes(42, 48, 4, 6);
    let p = plan(&nodes, None);
    let shared: Vec<&App> = p.apps.iter().filter(|a| matches!(a.ask, Ask::Replicas { .. })).collect();
    assert_eq!(shared.len(), 4, "{shared:?}");
    for a in &shared {
        let Ask::Replicas { resource, count } = &a.ask else { continue };
        assert!(*count == 1 || *count == 2);
        let strategy = a.node_selector.iter().find(|(k, _)| *k == labels::GPU_SHARING_STRATEGY).map(|(_, v)| *v);
        assert!(matches!(strategy, Some("time-slicing" | "mps")), "{a:?}");
        // Some node offers what the pod asks for, under that strategy.
        assert!(
            nodes.iter().any(|n| n
                .sharing
                .as_ref()
                .is_some_and(|s| s.resource() == *resource && Some(s.strategy.label()) == strategy)),
            "{a:?}"
        );
        let tmpl = pod_template(a, &[], false);
        assert_eq!(tmpl["spec"]["containers"][0]["resources"]["limits"][*resource], count.to_string());
        assert_eq!(tmpl["spec"]["nodeSelector"][labels::GPU_SHARING_STRATEGY], strategy.unwrap_or_default());
    }
    assert!(
        shared
            .iter()
            .any(|a| matches!(a.ask, Ask::Replicas { resource, .. } if resource == labels::GPU_SHARED_RESOURCE))
    );
    // Whole-GPU pods keep off the shared nodes; quotas on nvidia.com/gpu count replicas of it.
    for a in p.apps.iter().filter(|a| matches!(a.ask, Ask::Gpus(_))) {
        assert_eq!(a.node_selector, vec![(labels::GPU_SHARING_STRATEGY, "none")], "{}", a.name);
    }
    let dev = p.quotas.iter().find(|(n, r, _)| n == "llm-finetune-dev" && r == "requests.nvidia.com/gpu");
    let used: i64 = p
        .apps
        .iter()
        .filter(|a| a.namespace == "llm-finetune-dev")
        .map(|a| a.ask.gpu_resource() * i64::from(a.replicas))
        .sum();
    assert_eq!(dev.map(|q| q.2), Some(used + 2));
    // Without shared nodes: no such app and no selector.
    let plain = plan(&model::build_nodes(42, 48, 4, 0), None);
    assert!(plain.apps.iter().all(|a| a.node_selector.is_empty() && !matches!(a.ask, Ask::Replicas { .. })));
}

#[test]
fn objects_are_well_formed() {
    let nodes = model::build_nodes(7, 16, 4, 0);
    let p = plan(&nodes, Some(60));
    let [ns, work, quotas] = objects(&p, 7);
    assert_eq!(ns.len(), p.namespaces.len());
    assert!(ns.iter().all(|o| o.body["metadata"]["labels"][labels::DEFAULT_TENANT_LABEL].is_string()));
    // Every pod-bearing object has an app label on its pods and GPU limits equal requests.
    for o in &work {
        let tmpl = match o.gvk.2 {
            "Pod" => o.body.clone(),
            "Deployment" | "Job" | "StatefulSet" => o.body["spec"]["template"].clone(),
            _ => continue,
        };
        assert!(tmpl["metadata"]["labels"]["app"].is_string(), "{:?}", o.body);
        assert!(o.body["spec"]["nodeName"].is_null());
        let res = &tmpl["spec"]["containers"][0]["resources"];
        if let Some(l) = res["limits"].as_object() {
            for (k, v) in l {
                assert_eq!(&res["requests"][k], v);
            }
        }
    }
    let dra_pod = work.iter().find(|o| o.gvk.2 == "Pod" && o.body["spec"]["resourceClaims"].is_array());
    let dra_pod = dra_pod.expect("a DRA pod");
    let claim = dra_pod.body["spec"]["resourceClaims"][0]["resourceClaimName"].as_str().unwrap_or_default();
    assert!(work.iter().any(|o| o.gvk.2 == "ResourceClaim" && o.body["metadata"]["name"] == claim));
    assert_eq!(dra_pod.body["spec"]["containers"][0]["resources"]["claims"][0]["name"], "gpu");
    assert!(work.iter().any(|o| o.gvk.2 == "Pod" && o.body["spec"]["volumes"][0]["emptyDir"].is_object()));
    assert!(work.iter().any(|o| o.body["metadata"]["labels"][labels::VCLUSTER_MANAGED_BY] == VCLUSTER));
    assert!(work.iter().any(|o| o.gvk.2 == "PodDisruptionBudget"));
    assert!(!quotas.is_empty());
    for o in work.iter().chain(&quotas) {
        let typed: Result<DynamicObject, _> = serde_json::from_value(o.body.clone());
        assert!(typed.is_ok());
    }
}
