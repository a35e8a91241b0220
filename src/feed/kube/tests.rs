//! The translator on objects as the API server sends them (JSON), without a server: the
//! e2e tests in tests/kube_e2e.rs run the same code against a real kube-apiserver.

use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ResourceQuota};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::runtime::watcher::Event;
use serde_json::json;

use super::*;
use crate::model::{FeedState, Fleet, Phase, Thresholds};

fn obj<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    match serde_json::from_value(v) {
        Ok(o) => o,
        Err(e) => panic!("fixture does not parse: {e}"),
    }
}

fn node(name: &str, extra_labels: serde_json::Value, gpus: i64, ready: &str) -> Node {
    let mut labels = json!({
        "kubernetes.io/hostname": name,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": "81559",
        "beta.kubernetes.io/arch": "amd64"
    });
    if let (Some(l), Some(e)) = (labels.as_object_mut(), extra_labels.as_object()) {
        l.extend(e.clone());
    }
    obj(json!({
        "metadata": {"name": name, "labels": labels, "creationTimestamp": "2026-12-01T10:00:00Z"},
        "spec": {},
        "status": {
            "capacity": {"cpu": "128", "memory": "1Ti", "nvidia.com/gpu": gpus.to_string()},
            "allocatable": {"cpu": "126", "memory": "1000Gi", "nvidia.com/gpu": gpus.to_string(), "nvidia.com/mig-1g.10gb": "14"},
            "conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady", "lastTransitionTime": "2026-12-01T11:00:00Z"}]
        }
    }))
}

fn pod(ns: &str, name: &str, node: Option<&str>, phase: &str, gpus: i64) -> Pod {
    obj(json!({
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "trainer"},
                     "creationTimestamp": "2026-12-01T10:05:00Z",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "trainer-abc",
                                          "uid": "u1", "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "x",
                 "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}, "requests": {"nvidia.com/gpu": gpus.to_string()}}}],
                 "volumes": [{"name": "scratch", "emptyDir": {}}]},
        "status": {"phase": phase}
    }))
}

fn feed(t: &mut Translator, f: &mut Fleet, msgs: Vec<Msg>) {
    for m in msgs {
        for d in t.apply(m, 1_000) {
            f.apply(d);
        }
    }
}

fn listed<K>(wrap: fn(Event<K>) -> Msg, objs: Vec<K>) -> Vec<Msg> {
    let mut v = vec![wrap(Event::Init)];
    v.extend(objs.into_iter().map(|o| wrap(Event::InitApply(o))));
    v.push(wrap(Event::InitDone));
    v
}

fn all_listed(t: &mut Translator, f: &mut Fleet) {
    // Kinds this test does not care about: listed empty, so the fleet counts as synced.
    feed(t, f, listed::<Pod>(Msg::VCluster, vec![]));
    feed(t, f, listed::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(Msg::Pdb, vec![]));
    feed(t, f, listed::<k8s_openapi::api::core::v1::Event>(Msg::Event, vec![]));
    feed(t, f, vec![Msg::Error { kind: Kind::LocalQueues, code: Some(404), reason: "no kueue".into() }]);
    feed(t, f, vec![Msg::Error { kind: Kind::ClusterQueues, code: Some(404), reason: "no kueue".into() }]);
    feed(t, f, vec![Msg::Error { kind: Kind::TaintRules, code: Some(404), reason: "alpha off".into() }]);
    feed(t, f, vec![Msg::Error { kind: Kind::Domains, code: Some(404), reason: "no CRD".into() }]);
    feed(t, f, vec![Msg::Error { kind: Kind::Workloads, code: Some(404), reason: "no kueue".into() }]);
    feed(t, f, listed::<k8s_openapi::api::networking::v1::NetworkPolicy>(Msg::NetPol, vec![]));
    feed(t, f, vec![Msg::Error { kind: Kind::Machines, code: Some(404), reason: "no Cluster API".into() }]);
    feed(t, f, vec![Msg::Error { kind: Kind::Hosts, code: Some(404), reason: "no Metal3".into() }]);
    feed(t, f, vec![Msg::Error { kind: Kind::CiliumPols, code: Some(404), reason: "no Cilium".into() }]);
    feed(t, f, vec![Msg::Error { kind: Kind::CiliumWide, code: Some(404), reason: "no Cilium".into() }]);
    for k in crate::model::CapiKind::ALL {
        feed(t, f, vec![Msg::Error { kind: Kind::Capi(k), code: Some(404), reason: "no Cluster API".into() }]);
    }
}

#[test]
fn nodes_pods_and_label_gpus_become_a_fleet() {
    let mut t = Translator::new(KubeFeedConfig::default());
    let mut f = Fleet::new(Thresholds::default());
    feed(
        &mut t,
        &mut f,
        listed(
            Msg::Namespace,
            vec![obj::<Namespace>(json!({"metadata": {"name": "team-a", "labels": {"fabrik.io/tenant": "alpha"}}}))],
        ),
    );
    feed(
        &mut t,
        &mut f,
        listed(Msg::Node, vec![node("gpu-1", json!({}), 8, "True"), node("gpu-2", json!({}), 8, "False")]),
    );
    feed(
        &mut t,
        &mut f,
        listed(
            Msg::Pod,
            vec![pod("team-a", "p1", Some("gpu-1"), "Running", 2), pod("team-a", "p2", None, "Pending", 1)],
        ),
    );
    feed(&mut t, &mut f, listed::<ResourceQuota>(Msg::Quota, vec![]));
    feed(&mut t, &mut f, listed::<ResourceSlice>(Msg::Slice, vec![]));
    feed(&mut t, &mut f, listed::<ResourceClaim>(Msg::Claim, vec![]));
    assert!(!f.synced, "not every kind is listed yet");
    all_listed(&mut t, &mut f);
    assert!(f.synced);
    assert_eq!(f.totals.nodes, 2);
    assert_eq!(f.totals.nodes_ready, 1);
    let since = f.node_by_name("gpu-2").and_then(|n| f.node(n)).and_then(|n| n.not_ready_since);
    assert_eq!(since, Some(1_796_122_800_000), "NotReady since the condition's lastTransitionTime");
    assert_eq!(f.totals.gpus, 16, "8 GPUs per node from nvidia.com/gpu.count");
    assert_eq!(f.totals.gpus_allocated, 2);
    assert_eq!(f.totals.pods, 2);
    assert_eq!(f.totals.pods_pending, 1);
    let n = f.node_by_name("gpu-1").and_then(|n| f.node(n)).map(|n| n.allocatable.clone());
    assert!(n.is_some_and(|a| a.iter().any(|(r, c)| f.str_of(*r) == "nvidia.com/mig-1g.10gb" && *c == 14)));
    let p1 = f
        .pod_by_name("team-a", "p1")
        .and_then(|p| f.pod(p))
        .map(|p| (f.tenant(p.tenant).map(|t| f.str_of(t.name).to_string()), p.empty_dir, p.phase, p.owner));
    assert_eq!(p1, Some((Some("alpha".to_string()), true, Phase::Running, crate::model::Owner::ReplicaSet)));
}

#[test]
fn a_relist_removes_what_went_away_while_the_watch_was_down() {
    let mut t = Translator::new(KubeFeedConfig::default());
    let mut f = Fleet::new(Thresholds::default());
    feed(
        &mut t,
        &mut f,
        listed(Msg::Node, vec![node("gpu-1", json!({}), 8, "True"), node("gpu-2", json!({}), 8, "True")]),
    );
    feed(
        &mut t,
        &mut f,
        listed(
            Msg::Pod,
            vec![pod("a", "p1", Some("gpu-1"), "Running", 1), pod("a", "p2", Some("gpu-2"), "Running", 1)],
        ),
    );
    assert_eq!((f.totals.nodes, f.totals.gpus, f.totals.pods), (2, 16, 2));
    // The watch broke; the re-list no longer has gpu-2 nor p2.
    feed(&mut t, &mut f, listed(Msg::Node, vec![node("gpu-1", json!({}), 8, "True")]));
    feed(&mut t, &mut f, listed(Msg::Pod, vec![pod("a", "p1", Some("gpu-1"), "Running", 1)]));
    assert_eq!((f.totals.nodes, f.totals.gpus, f.totals.pods), (1, 8, 1));
    // A delete during the watch removes too.
    feed(&mut t, &mut f, vec![Msg::Pod(Event::Delete(pod("a", "p1", Some("gpu-1"), "Running", 1)))]);
    assert_eq!(f.totals.pods, 0);
}

#[test]
fn mig_nodes_get_instances_from_their_named_config() {
    let mut t = Translator::new(KubeFeedConfig::default());
    let mut f = Fleet::new(Thresholds::default());
    let labels = json!({"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "success"});
    feed(&mut t, &mut f, listed(Msg::Node, vec![node("mig-1", labels, 0, "True")]));
    assert_eq!(f.totals.gpus, 8);
    assert_eq!(f.totals.mig_instances, 8 * 7, "all-1g.10gb is seven 1g.10gb per H100");
}

#[test]
fn dra_slices_name_the_gpus_and_claims_bind_pods_to_them() {
    let mut t = Translator::new(KubeFeedConfig::default());
    let mut f = Fleet::new(Thresholds::default());
    feed(&mut t, &mut f, listed(Msg::Node, vec![node("dra-1", json!({"fabrik.io/dra": "true"}), 0, "True")]));
    assert_eq!(f.totals.gpus, 8, "label GPUs until a slice arrives");
    let slice: ResourceSlice = obj(json!({
        "metadata": {"name": "dra-1-gpu.nvidia.com"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "dra-1",
                 "pool": {"name": "dra-1", "generation": 1, "resourceSliceCount": 1},
                 "devices": [
                   {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-aaaa"},
                    "productName": {"string": "NVIDIA H100 80GB HBM3"}}, "capacity": {"memory": {"value": "80Gi"}}},
                   {"name": "gpu-1", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-bbbb"},
                    "productName": {"string": "NVIDIA H100 80GB HBM3"}}, "capacity": {"memory": {"value": "80Gi"}}},
                   {"name": "gpu-1-mig-1g10gb-19-6", "attributes": {"type": {"string": "mig"}, "uuid": {"string": "MIG-cccc"},
                    "parentUUID": {"string": "GPU-bbbb"}, "profile": {"string": "1g.10gb"}},
                    "capacity": {"memory": {"value": "10Gi"}, "memorySlice6": {"value": "1"}}},
                   {"name": "gpu-2-mig-3g40gb-9-4", "attributes": {"type": {"string": "mig"}, "uuid": {"string": "MIG-dddd"},
                    "parentUUID": {"string": "GPU-eeee"}, "profile": {"string": "3g.40gb"},
                    "productName": {"string": "NVIDIA H100 80GB HBM3"}},
                    "capacity": {"memorySlice4": {"value": "1"}, "memorySlice5": {"value": "1"}, "memorySlice6": {"value": "1"}, "memorySlice7": {"value": "1"}}}
                 ]}
    }));
    feed(&mut t, &mut f, listed(Msg::Slice, vec![slice]));
    assert_eq!(f.totals.gpus, 3, "the slice replaces the label-derived GPUs; a MIG-only parent counts too");
    assert!(f.gpu_by_uuid("GPU-aaaa").is_some());
    assert_eq!(f.totals.mig_instances, 2);
    let parent = f.gpu_by_uuid("GPU-eeee").and_then(|g| f.gpu(g));
    let Some(parent) = parent else { panic!("the parent GPU of a MIG device is there") };
    assert_eq!((parent.index, parent.mig_enabled), (2, true));
    let start = parent.instances.first().map(|m| m.placement.start);
    assert_eq!(start, Some(4), "placement from the lowest memorySlice");

    let mut p = pod("team-a", "dra-pod", Some("dra-1"), "Running", 0);
    if let Some(spec) = p.spec.as_mut() {
        spec.resource_claims = Some(vec![obj(json!({"name": "gpu", "resourceClaimName": "dra-pod-gpu"}))]);
    }
    feed(&mut t, &mut f, listed(Msg::Pod, vec![p]));
    let claim: ResourceClaim = obj(json!({
        "metadata": {"name": "dra-pod-gpu", "namespace": "team-a"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]}},
        "status": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "dra-1", "device": "gpu-0"}]}}}
    }));
    feed(&mut t, &mut f, listed(Msg::Claim, vec![claim]));
    let pod = f.pod_by_name("team-a", "dra-pod").and_then(|p| f.pod(p));
    let allocated = pod.and_then(|p| p.dra.first()).and_then(|c| c.allocated).map(|a| f.str_of(a).to_string());
    assert_eq!(allocated.as_deref(), Some("GPU-aaaa"));
    assert_eq!(pod.map(|p| p.bound_gpus.len()), Some(1));
    assert_eq!(f.totals.gpus_allocated, 1);
    assert_eq!(t.claim_links(), 1);
    // The pod goes: the link from its claim goes too (pods come and go by the million).
    let gone = self::pod("team-a", "dra-pod", Some("dra-1"), "Running", 0);
    feed(&mut t, &mut f, vec![Msg::Pod(Event::Delete(gone))]);
    assert_eq!(t.claim_links(), 0, "no claim is remembered for a pod that is gone");
}

#[test]
fn quotas_follow_their_namespace_tenant_and_vclusters_name_tenants() {
    let mut t = Translator::new(KubeFeedConfig::default());
    let mut f = Fleet::new(Thresholds::default());
    feed(
        &mut t,
        &mut f,
        listed(
            Msg::Namespace,
            vec![
                obj::<Namespace>(json!({"metadata": {"name": "team-a", "labels": {"fabrik.io/tenant": "alpha"}}})),
                obj::<Namespace>(json!({"metadata": {"name": "vcluster-lab"}})),
            ],
        ),
    );
    let vc: Pod = obj(
        json!({"metadata": {"name": "lab-0", "namespace": "vcluster-lab", "labels": {"app": "vcluster", "release": "lab"}},
                             "spec": {"containers": [{"name": "syncer"}]}}),
    );
    feed(&mut t, &mut f, listed(Msg::VCluster, vec![vc]));
    let rq: ResourceQuota = obj(json!({
        "metadata": {"name": "gpu-quota", "namespace": "team-a", "resourceVersion": "77"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "8", "pods": "100", "requests.nvidia.com/mig-1g.10gb": "4"}},
        "status": {"hard": {"requests.nvidia.com/gpu": "8"}, "used": {"requests.nvidia.com/gpu": "6"}}
    }));
    feed(&mut t, &mut f, listed(Msg::Quota, vec![rq]));
    let alpha = f.tenants.values().find(|t| f.str_of(t.name) == "alpha");
    let quotas = alpha.map(|t| t.quotas.len());
    assert_eq!(quotas, Some(2), "GPU and MIG keys; pods is not a GPU quota");
    let lab = f.tenants.values().find(|t| f.str_of(t.name) == "lab").map(|t| f.str_of(t.source).to_string());
    assert_eq!(lab.as_deref(), Some("vcluster"));
    // The namespace loses its label: the quota moves to the namespace's own tenant.
    feed(&mut t, &mut f, vec![Msg::Namespace(Event::Apply(obj(json!({"metadata": {"name": "team-a"}}))))]);
    let moved = f.tenants.values().find(|t| f.str_of(t.name) == "team-a").map(|t| t.quotas.len());
    assert_eq!(moved, Some(2));
}

/// Found by `crosscheck_e2e` with watch-lists: the vCluster pod listed before its namespace,
/// whose label names the same tenant. The tenant changed source (vcluster → label) and was
/// removed right after it was upserted, so the namespace's pods fell to a tenant named after
/// the namespace.
#[test]
fn a_vcluster_pod_listed_before_its_labelled_namespace_keeps_the_tenant() {
    let mut t = Translator::new(KubeFeedConfig::default());
    let mut f = Fleet::new(Thresholds::default());
    let vc: Pod = obj(json!({"metadata": {"name": "research-0", "namespace": "vcluster-research",
        "labels": {"app": "vcluster", "release": "research"}}, "spec": {"containers": [{"name": "syncer"}]}}));
    feed(&mut t, &mut f, listed(Msg::VCluster, vec![vc]));
    let ns = json!({"metadata": {"name": "vcluster-research", "labels": {"fabrik.io/tenant": "research"}}});
    feed(&mut t, &mut f, listed(Msg::Namespace, vec![obj::<Namespace>(ns)]));
    feed(&mut t, &mut f, listed(Msg::Pod, vec![pod("vcluster-research", "train", None, "Pending", 2)]));
    let tenants: Vec<(String, String, Vec<String>)> = f
        .tenants
        .values()
        .map(|x| {
            let nss = x.namespaces.iter().map(|n| f.str_of(*n).to_string()).collect();
            (f.str_of(x.name).to_string(), f.str_of(x.source).to_string(), nss)
        })
        .collect();
    assert_eq!(tenants, [("research".to_string(), "label".to_string(), vec!["vcluster-research".to_string()])]);
    let research = f.tenants.values().find(|x| f.str_of(x.name) == "research").map(|x| x.usage.pending_pods);
    assert_eq!(research, Some(1), "its pod counts for it");
}

#[test]
fn a_forbidden_kind_is_stale_with_a_reason_and_does_not_block_the_listing() {
    let mut t = Translator::new(KubeFeedConfig::default());
    let mut out = Vec::new();
    out.extend(t.apply(Msg::Error { kind: Kind::Events, code: Some(403), reason: "events is forbidden".into() }, 5));
    let stale =
        out.iter().any(|d| matches!(d, Delta::Feed { source, state: FeedState::Stale { .. } } if source == "events"));
    assert!(stale, "{out:?}");
    let told =
        out.iter().any(|d| matches!(d, Delta::Event(e) if e.message.contains("kubectl auth can-i watch events")));
    assert!(told, "{out:?}");
    // The same error again says nothing new.
    assert!(
        t.apply(Msg::Error { kind: Kind::Events, code: Some(403), reason: "events is forbidden".into() }, 6).is_empty()
    );
    assert!(t.synced.contains(&Kind::Events));
    // A kind the server does not serve is information, not staleness.
    let out = t.apply(Msg::Error { kind: Kind::Slices, code: Some(404), reason: "not found".into() }, 7);
    assert!(!out.iter().any(|d| matches!(d, Delta::Feed { .. })), "{out:?}");
}

#[test]
fn kueue_queues_name_tenants_and_carry_nominal_quota_per_flavor() {
    let mut t = Translator::new(KubeFeedConfig::default());
    let mut f = Fleet::new(Thresholds::default());
    feed(&mut t, &mut f, listed(Msg::Namespace, vec![obj::<Namespace>(json!({"metadata": {"name": "serving"}}))]));
    let lq: kube::api::DynamicObject = obj(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": "serving"}, "spec": {"clusterQueue": "inference"}
    }));
    feed(&mut t, &mut f, listed(Msg::LocalQueue, vec![lq]));
    let cq: kube::api::DynamicObject = obj(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "inference", "resourceVersion": "12"},
        "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu", "cpu"], "flavors": [
            {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 16, "borrowingLimit": 0},
                                            {"name": "cpu", "nominalQuota": "64"}]},
            {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]}]}]},
        "status": {"flavorsUsage": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "6", "borrowed": "0"}]}]}
    }));
    feed(&mut t, &mut f, listed(Msg::ClusterQueue, vec![cq]));
    let tenant = f.tenants.values().find(|t| f.str_of(t.name) == "inference");
    let Some(tenant) = tenant else { panic!("no tenant from the ClusterQueue") };
    assert_eq!(f.str_of(tenant.source), "kueue");
    assert_eq!(tenant.namespaces.iter().map(|n| f.str_of(*n)).collect::<Vec<_>>(), vec!["serving"]);
    let mut q: Vec<(String, i64, i64)> = tenant
        .quotas
        .iter()
        .filter_map(|i| f.quota(*i))
        .map(|q| match &q.source {
            crate::model::QuotaSource::ClusterQueue { flavor, .. } => {
                (f.str_of(*flavor).to_string(), q.hard.value(), q.used.value())
            }
            _ => (String::new(), 0, 0),
        })
        .collect();
    q.sort();
    assert_eq!(q, vec![("a100".into(), 8, 0), ("h100".into(), 16, 6)], "cpu is not a GPU quota");
}

#[test]
fn a_slice_listed_before_its_node_gives_its_gpus_when_the_node_arrives() {
    let mut t = Translator::new(KubeFeedConfig::default());
    let mut f = Fleet::new(Thresholds::default());
    let slice: ResourceSlice = obj(json!({
        "metadata": {"name": "n1-gpu.nvidia.com"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-1"},
                              "productName": {"string": "NVIDIA H100 80GB HBM3"}}}]}
    }));
    feed(&mut t, &mut f, listed(Msg::Slice, vec![slice]));
    assert_eq!(f.totals.gpus, 0);
    feed(&mut t, &mut f, listed(Msg::Node, vec![node("n1", json!({}), 0, "True")]));
    assert_eq!(f.totals.gpus, 1, "the slice's one GPU, not the 8 of the labels");
    assert!(f.gpu_by_uuid("GPU-1").is_some());
    // The node goes away and comes back: its GPUs come back with it.
    feed(&mut t, &mut f, vec![Msg::Node(Event::Delete(node("n1", json!({}), 0, "True")))]);
    assert_eq!(f.totals.gpus, 0);
    feed(&mut t, &mut f, vec![Msg::Node(Event::Apply(node("n1", json!({}), 0, "True")))]);
    assert_eq!(f.totals.gpus, 1);
}

#[test]
fn trouble_keeps_the_time_it_began_until_the_kind_answers_again() {
    let mut t = Translator::new(KubeFeedConfig::default());
    let since = |out: &[Delta]| {
        out.iter().find_map(|d| match d {
            Delta::Feed { state: FeedState::Reconnecting { since, .. }, .. } => Some(*since),
            _ => None,
        })
    };
    let a = t.apply(Msg::Error { kind: Kind::Pods, code: None, reason: "connection refused".into() }, 1_000);
    assert_eq!(since(&a), Some(1_000));
    let b = t.apply(Msg::Error { kind: Kind::Pods, code: None, reason: "tcp connect error".into() }, 9_000);
    assert_eq!(since(&b), Some(1_000), "a different error text is the same trouble: {b:?}");
    assert_eq!(t.troubled(), vec![Kind::Pods]);
    let c = t.apply(Msg::Reachable(Kind::Pods), 12_000);
    assert!(c.iter().any(|d| matches!(d, Delta::Feed { state: FeedState::Live, .. })), "{c:?}");
    assert!(t.troubled().is_empty());
}

#[test]
fn pods_follow_their_namespace_when_it_is_labelled_for_a_tenant() {
    let mut t = Translator::new(KubeFeedConfig::default());
    let mut f = Fleet::new(Thresholds::default());
    feed(&mut t, &mut f, listed(Msg::Namespace, vec![obj::<Namespace>(json!({"metadata": {"name": "team-a"}}))]));
    feed(&mut t, &mut f, listed(Msg::Node, vec![node("gpu-1", json!({}), 8, "True")]));
    feed(&mut t, &mut f, listed(Msg::Pod, vec![pod("team-a", "p1", Some("gpu-1"), "Running", 2)]));
    let usage =
        |f: &Fleet, name: &str| f.tenants.values().find(|t| f.str_of(t.name) == name).map(|t| t.usage.allocated_gpus);
    assert_eq!(usage(&f, "team-a"), Some(2));
    // Someone labels the namespace: its pods and their GPUs move to the tenant.
    feed(
        &mut t,
        &mut f,
        vec![Msg::Namespace(Event::Apply(obj(
            json!({"metadata": {"name": "team-a", "labels": {"fabrik.io/tenant": "alpha"}}}),
        )))],
    );
    assert_eq!(usage(&f, "alpha"), Some(2));
    assert_eq!(usage(&f, "team-a").unwrap_or(0), 0);
    let owner = f
        .pod_by_name("team-a", "p1")
        .and_then(|p| f.pod(p))
        .and_then(|p| f.tenant(p.tenant))
        .map(|t| f.str_of(t.name).to_string());
    assert_eq!(owner.as_deref(), Some("alpha"));
    crate::model::tests::check_invariants(&f);
}

#[test]
fn a_quotas_hard_limit_is_the_enforced_one_in_its_status() {
    // Just edited: the spec says 10, the quota controller has not copied it yet, the API
    // server still enforces 8. A key the status does not have yet shows the spec's.
    let rq: ResourceQuota = obj(json!({
        "metadata": {"name": "gpu-quota", "namespace": "team-a", "resourceVersion": "78"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "10", "requests.nvidia.com/mig-1g.10gb": "4"}},
        "status": {"hard": {"requests.nvidia.com/gpu": "8"}, "used": {"requests.nvidia.com/gpu": "6"}}
    }));
    let mut specs: Vec<(String, i64, i64)> = translate::quota_specs(&rq, "alpha")
        .into_iter()
        .map(|s| (s.resource, s.hard.value(), s.used.value()))
        .collect();
    specs.sort();
    assert_eq!(specs, vec![("requests.nvidia.com/gpu".into(), 8, 6), ("requests.nvidia.com/mig-1g.10gb".into(), 4, 0)]);
}

#[test]
fn a_pod_being_deleted_keeps_what_holds_it() {
    let mut p = pod("ml", "held", Some("gpu-1"), "Running", 1);
    assert_eq!(translate::pod_spec(&p).and_then(|s| s.deletion), None);
    // The API server sets deletionTimestamp to the request time plus the grace period.
    p.metadata.deletion_timestamp = Some(obj(json!("2026-12-01T10:10:30Z")));
    p.metadata.deletion_grace_period_seconds = Some(30);
    p.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    let s = translate::pod_spec(&p).expect("a pod");
    assert_eq!(s.phase, Phase::Terminating);
    let d = s.deletion.expect("a deletion under way");
    assert_eq!(d.since, translate::ts(Some(&obj(json!("2026-12-01T10:10:00Z")))), "asked for 30 s before the deadline");
    assert_eq!((d.grace_secs, d.finalizers, d.stopped), (Some(30), vec!["example.com/hold".to_string()], false));
    // The kubelet stopped its containers: only the finalizer keeps the object.
    p.status = Some(obj(json!({"phase": "Failed"})));
    let d = translate::pod_spec(&p).and_then(|s| s.deletion).expect("still being deleted");
    assert!(d.stopped);
}

#[test]
fn a_container_the_kubelet_cannot_start_says_why_as_kubectl_does() {
    let mut p = pod("ml", "pull", Some("gpu-1"), "Pending", 1);
    let waiting = |reason: &str, message: Option<&str>| {
        json!({"name": "main", "ready": false, "restartCount": 0,
        "image": "x", "imageID": "", "state": {"waiting": {"reason": reason, "message": message}}})
    };
    // Being created is not a reason to report: the pod is starting.
    p.status = Some(obj(json!({"phase": "Pending", "containerStatuses": [waiting("ContainerCreating", None)]})));
    assert_eq!(translate::pod_spec(&p).and_then(|s| s.container_waiting), None);
    // An image it cannot pull; an init container's reason comes first, as it runs first.
    p.status = Some(obj(json!({"phase": "Pending",
        "containerStatuses": [waiting("ImagePullBackOff", Some("Back-off pulling image \"x\""))]})));
    let got = translate::pod_spec(&p).and_then(|s| s.container_waiting);
    assert_eq!(got, Some(("ImagePullBackOff".into(), "Back-off pulling image \"x\"".into())));
    p.status = Some(obj(json!({"phase": "Pending",
        "initContainerStatuses": [waiting("CreateContainerConfigError", Some("secret \"s\" not found"))],
        "containerStatuses": [waiting("PodInitializing", None)]})));
    let got = translate::pod_spec(&p).and_then(|s| s.container_waiting);
    assert_eq!(got, Some(("CreateContainerConfigError".into(), "secret \"s\" not found".into())));
    // Running, one container restarting after it failed: kubectl's STATUS says CrashLoopBackOff.
    let running = json!({"name": "sidecar", "ready": true, "restartCount": 0, "image": "x", "imageID": "",
        "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}});
    let message = "back-off 20s restarting failed container=main pod=pull_ml(u)";
    p.status = Some(obj(json!({"phase": "Running",
        "containerStatuses": [running, waiting("CrashLoopBackOff", Some(message))]})));
    let got = translate::pod_spec(&p).and_then(|s| s.container_waiting);
    assert_eq!(got, Some(("CrashLoopBackOff".into(), message.into())));
}

#[test]
fn a_relist_does_not_add_the_same_events_again() {
    let mut t = Translator::new(KubeFeedConfig::default());
    let ev = |rv: &str, count: i32| -> KEvent {
        obj(json!({
            "metadata": {"name": "gpu-1.17f", "namespace": "ml", "resourceVersion": rv},
            "involvedObject": {"kind": "Node", "name": "gpu-1"},
            "reason": "XidError", "message": "XID 79 on GPU 3", "type": "Warning", "count": count
        }))
    };
    let events = |t: &mut Translator, msgs: Vec<Msg>| -> usize {
        msgs.into_iter()
            .flat_map(|m| t.apply(m, 1_000))
            .filter(|d| matches!(d, Delta::Event(e) if e.reason == "XidError"))
            .count()
    };
    assert_eq!(events(&mut t, listed(Msg::Event, vec![ev("10", 1)])), 1);
    // The API server restarted, or the watch's resourceVersion expired (410): a re-list.
    assert_eq!(events(&mut t, listed(Msg::Event, vec![ev("10", 1)])), 0, "the same event is not history twice");
    // It happened again meanwhile: the Event object was updated, and that is news.
    assert_eq!(events(&mut t, listed(Msg::Event, vec![ev("12", 2)])), 1);
    assert_eq!(events(&mut t, vec![Msg::Event(Event::Apply(ev("13", 3)))]), 1);
    // Deleted (its TTL ran out), then a new one with the same name: shown.
    assert_eq!(events(&mut t, vec![Msg::Event(Event::Delete(ev("13", 3)))]), 0);
    assert_eq!(events(&mut t, vec![Msg::Event(Event::Apply(ev("20", 1)))]), 1);
}

#[test]
fn huge_mig_requests_across_containers_saturate_instead_of_overflowing() {
    // Two containers asking for 40000 instances each overflowed the u16 sum (a panic in
    // debug builds, a wrapped 14464 in release); tests/fuzz.rs's made-up pods reach it.
    let mut p = pod("ml", "greedy", Some("gpu-1"), "Pending", 0);
    let container = |name: &str| -> k8s_openapi::api::core::v1::Container {
        obj(json!({"name": name, "resources": {"limits": {"nvidia.com/mig-1g.10gb": "40000"}}}))
    };
    if let Some(spec) = p.spec.as_mut() {
        spec.containers = vec![container("a"), container("b")];
    }
    let s = translate::pod_spec(&p).expect("a pod");
    assert_eq!(s.mig, vec![("nvidia.com/mig-1g.10gb".to_string(), u16::MAX)]);
}

fn claim_pod(ns: &str, name: &str, node: &str, claim: &str) -> Pod {
    let mut p = pod(ns, name, Some(node), "Running", 0);
    if let Some(spec) = p.spec.as_mut() {
        spec.resource_claims = Some(vec![obj(json!({"name": "gpu", "resourceClaimName": claim}))]);
        for c in &mut spec.containers {
            c.resources = None;
        }
    }
    p
}

fn claim(ns: &str, name: &str, class: &str, device: &str, consumed: serde_json::Value) -> ResourceClaim {
    obj(json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class, "allocationMode": "ExactCount", "count": 1}}]}},
        "status": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "dn",
            "device": device, "consumedCapacity": consumed}]}}}
    }))
}

/// A node with the DRA alpha shapes: GPU 0 partitionable (dynamic MIG, two 3g placements
/// and the whole GPU on one counter set), GPU 1 shared by capacity, GPU 2 tainted by the
/// driver, GPU 3 plain.
fn alpha_slice() -> ResourceSlice {
    let gpu = |i: u8, extra: serde_json::Value| {
        let mut d = json!({"name": format!("gpu-{i}"), "attributes": {"type": {"string": "gpu"},
            "uuid": {"string": format!("GPU-{i}")}, "productName": {"string": "NVIDIA H100 80GB HBM3"}},
            "capacity": {"memory": {"value": "80Gi"}}});
        if let (Some(d), Some(e)) = (d.as_object_mut(), extra.as_object()) {
            d.extend(e.clone());
        }
        d
    };
    let part = |start: u8| {
        json!({"name": format!("gpu-0-mig-3g40gb-9-{start}"), "attributes": {"type": {"string": "mig"},
            "uuid": {"string": format!("MIG-0-{start}")}, "parentUUID": {"string": "GPU-0"}, "profile": {"string": "3g.40gb"}},
            "capacity": {"memory": {"value": "40Gi"}, format!("memorySlice{start}"): {"value": "1"}},
            "consumesCounters": [{"counterSet": "gpu-0-counter-set", "counters": {
                "memory": {"value": "40Gi"}, format!("memory-slice-{start}"): {"value": "1"}}}]})
    };
    obj(json!({
        "metadata": {"name": "dn-gpu.nvidia.com"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "dn", "pool": {"name": "dn", "generation": 1, "resourceSliceCount": 1},
            "sharedCounters": [{"name": "gpu-0-counter-set", "counters": {
                "memory": {"value": "80Gi"}, "memory-slice-0": {"value": "1"}, "memory-slice-4": {"value": "1"}}}],
            "devices": [
                gpu(0, json!({"consumesCounters": [{"counterSet": "gpu-0-counter-set", "counters": {
                    "memory": {"value": "80Gi"}, "memory-slice-0": {"value": "1"}, "memory-slice-4": {"value": "1"}}}]})),
                part(0), part(4),
                gpu(1, json!({"allowMultipleAllocations": true})),
                gpu(2, json!({"taints": [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute"}]})),
                gpu(3, json!({})),
            ]}
    }))
}

#[test]
fn dra_alpha_partitions_capacity_shares_and_taints_are_counted_once() {
    let mut t = Translator::new(KubeFeedConfig::default());
    let mut f = Fleet::new(Thresholds::default());
    feed(&mut t, &mut f, listed(Msg::Node, vec![node("dn", json!({"fabrik.io/dra": "true"}), 0, "True")]));
    feed(&mut t, &mut f, listed(Msg::Slice, vec![alpha_slice()]));
    let gpu = |f: &Fleet, u: &str| f.gpu_by_uuid(u).and_then(|g| f.gpu(g)).cloned().expect(u);
    assert_eq!(f.totals.gpus, 4);
    // Partitions are offers until a claim takes one: not MIG instances.
    let g0 = gpu(&f, "GPU-0");
    assert!(!g0.mig_enabled && g0.instances.is_empty(), "{:?}", g0.instances);
    let d0 = g0.dra.clone().expect("partitionable");
    assert!(d0.partitionable && d0.whole_fits);
    assert_eq!((d0.fits[0].profile.as_str(), d0.fits[0].fits, d0.fits[0].offered), ("3g.40gb", 2, 2));

    feed(
        &mut t,
        &mut f,
        listed(
            Msg::Pod,
            vec![
                claim_pod("team-a", "mig-pod", "dn", "mig-claim"),
                claim_pod("team-a", "share-a", "dn", "share-a"),
                claim_pod("team-a", "share-b", "dn", "share-b"),
            ],
        ),
    );
    feed(
        &mut t,
        &mut f,
        listed(
            Msg::Claim,
            vec![
                claim("team-a", "mig-claim", "mig.nvidia.com", "gpu-0-mig-3g40gb-9-4", json!(null)),
                claim("team-a", "share-a", "gpu.nvidia.com", "gpu-1", json!({"memory": "20Gi"})),
                claim("team-a", "share-b", "gpu.nvidia.com", "gpu-1", json!({"memory": "40Gi"})),
            ],
        ),
    );
    // The claimed partition exists now; the whole GPU no longer fits, the other 3g does.
    let g0 = gpu(&f, "GPU-0");
    assert!(g0.mig_enabled);
    assert_eq!(g0.instances.iter().map(|i| i.placement.start).collect::<Vec<_>>(), vec![4]);
    let d0 = g0.dra.clone().expect("partitionable");
    assert!(!d0.whole_fits);
    assert_eq!((d0.fits[0].fits, d0.fits[0].offered), (1, 2), "{d0:?}");
    // Two claims on GPU 1 by capacity: what each holds, what is left.
    let d1 = gpu(&f, "GPU-1").dra.expect("shared by capacity");
    assert!(d1.multi);
    assert_eq!(d1.shares.len(), 2);
    assert_eq!(d1.left("memory"), Some(20 << 30));
    // Counted once each: GPU 0 (a partition held) and GPU 1 (two claims), never 3 or 4.
    let n = f.node(f.node_by_name("dn").expect("node")).expect("node");
    assert_eq!(f.node_allocated_gpus(n), 2);
    assert_eq!(f.totals.gpus_allocated, 2);
    let tenant = f.tenant(f.tenant_by_name("team-a").expect("tenant")).expect("tenant");
    assert_eq!((tenant.usage.allocated_shares, tenant.usage.share_milli), (2, 750));
    crate::model::tests::check_invariants(&f);
    // The driver's taint is an alert; a DeviceTaintRule on GPU 3 is another, gone with it.
    let g2 = f.gpu_by_uuid("GPU-2").expect("gpu 2");
    assert!(f.alerts.contains_key(&(crate::model::AlertKind::DeviceTaint, crate::model::AlertTarget::Gpu(g2))));
    let rule: kube::api::DynamicObject =
        obj(json!({"apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule",
        "metadata": {"name": "maint-gpu-3"},
        "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "dn", "device": "gpu-3"},
                 "taint": {"key": "fabrik.io/maintenance", "effect": "NoSchedule"}}}));
    feed(&mut t, &mut f, listed(Msg::TaintRule, vec![rule.clone()]));
    let g3 = f.gpu_by_uuid("GPU-3").expect("gpu 3");
    let taint = gpu(&f, "GPU-3").dra.map(|d| d.taints.clone()).unwrap_or_default();
    assert_eq!(
        taint.iter().map(|t| (t.rule.as_deref(), t.effect.as_str())).collect::<Vec<_>>(),
        vec![(Some("maint-gpu-3"), "NoSchedule")]
    );
    assert!(f.alerts.contains_key(&(crate::model::AlertKind::DeviceTaint, crate::model::AlertTarget::Gpu(g3))));
    feed(&mut t, &mut f, vec![Msg::TaintRule(Event::Delete(rule))]);
    assert!(gpu(&f, "GPU-3").dra.is_some_and(|d| d.taints.is_empty() && d.devices == ["gpu-3"] && d.pool == "dn"));
    assert!(!f.alerts.contains_key(&(crate::model::AlertKind::DeviceTaint, crate::model::AlertTarget::Gpu(g3))));
    // The partition's claim goes: the partition goes, the GPU is whole and free again.
    feed(
        &mut t,
        &mut f,
        vec![Msg::Claim(Event::Delete(claim(
            "team-a",
            "mig-claim",
            "mig.nvidia.com",
            "gpu-0-mig-3g40gb-9-4",
            json!(null),
        )))],
    );
    let g0 = gpu(&f, "GPU-0");
    assert!(!g0.mig_enabled && g0.dra.is_some_and(|d| d.whole_fits));
    crate::model::tests::check_invariants(&f);
}

/// The fleet the listing of `kinds` (in that order) makes: the DRA alpha node, its pods and
/// their claims, and a plain DRA pod holding a whole GPU.
fn alpha_fleet(order: &[usize]) -> Fleet {
    let mut t = Translator::new(KubeFeedConfig::default());
    let mut f = Fleet::new(Thresholds::default());
    let pods = || {
        vec![
            claim_pod("team-a", "mig-pod", "dn", "mig-claim"),
            claim_pod("team-a", "share-a", "dn", "share-a"),
            claim_pod("team-a", "share-b", "dn", "share-b"),
            claim_pod("team-a", "whole", "dn", "whole"),
        ]
    };
    let claims = || {
        vec![
            claim("team-a", "mig-claim", "mig.nvidia.com", "gpu-0-mig-3g40gb-9-4", json!(null)),
            claim("team-a", "share-a", "gpu.nvidia.com", "gpu-1", json!({"memory": "20Gi"})),
            claim("team-a", "share-b", "gpu.nvidia.com", "gpu-1", json!({"memory": "40Gi"})),
            claim("team-a", "whole", "gpu.nvidia.com", "gpu-3", json!(null)),
        ]
    };
    for k in order {
        match k {
            0 => feed(&mut t, &mut f, listed(Msg::Node, vec![node("dn", json!({"fabrik.io/dra": "true"}), 0, "True")])),
            1 => feed(&mut t, &mut f, listed(Msg::Slice, vec![alpha_slice()])),
            2 => feed(&mut t, &mut f, listed(Msg::Pod, pods())),
            _ => feed(&mut t, &mut f, listed(Msg::Claim, claims())),
        }
    }
    f
}

#[test]
fn dra_counts_do_not_depend_on_the_order_the_kinds_are_listed_in() {
    let mut orders: Vec<Vec<usize>> = Vec::new();
    for a in 0..4 {
        for b in 0..4 {
            for c in 0..4 {
                let Some(d) = 6usize.checked_sub(a + b + c) else { continue };
                let v = vec![a, b, c, d];
                let mut s = v.clone();
                s.sort_unstable();
                if s == [0, 1, 2, 3] {
                    orders.push(v);
                }
            }
        }
    }
    assert_eq!(orders.len(), 24);
    let summary = |f: &Fleet| {
        let n = f.node(f.node_by_name("dn").expect("node")).expect("node");
        let t = f.tenant(f.tenant_by_name("team-a").expect("tenant")).expect("tenant");
        (
            f.node_allocated_gpus(n),
            n.mig_allocated,
            t.usage.allocated_gpus,
            t.usage.allocated_mig,
            t.usage.allocated_shares,
            f.totals.gpus_allocated,
        )
    };
    for o in &orders {
        let f = alpha_fleet(o);
        crate::model::tests::check_invariants(&f);
        // GPU 0 (a partition), GPU 1 (two claims by capacity), GPU 3 (whole): 3 GPUs.
        assert_eq!(summary(&f), (3, 1, 1, 1, 2, 3), "listed in the order {o:?}");
    }
}

#[test]
fn a_kind_that_answers_404_after_trouble_is_no_longer_shown_reconnecting() {
    // A restarting API server: connection refused, then (before it installed an alpha API
    // group again) 404. The header must not say "reconnecting" for good.
    let mut t = Translator::new(KubeFeedConfig::default());
    let mut f = Fleet::new(Thresholds::default());
    feed(&mut t, &mut f, vec![Msg::Error { kind: Kind::TaintRules, code: None, reason: "connect".into() }]);
    assert!(matches!(f.feeds.get("devicetaintrules"), Some(FeedState::Reconnecting { .. })));
    feed(&mut t, &mut f, vec![Msg::Error { kind: Kind::TaintRules, code: Some(404), reason: "not found".into() }]);
    assert_eq!(f.feeds.get("devicetaintrules"), None, "not served: not reconnecting either");
    // It answers again: live.
    feed(&mut t, &mut f, listed::<kube::api::DynamicObject>(Msg::TaintRule, vec![]));
    assert_eq!(f.feeds.get("devicetaintrules"), Some(&FeedState::Live));
}

#[test]
fn a_pod_joins_a_compute_domain_by_its_channel_template_and_the_channel_is_no_gpu() {
    let mut t = Translator::new(KubeFeedConfig::default());
    let mut f = Fleet::new(Thresholds::default());
    feed(&mut t, &mut f, listed(Msg::Node, vec![node("dn", json!({"fabrik.io/dra": "true"}), 0, "True")]));
    feed(&mut t, &mut f, listed(Msg::Slice, vec![alpha_slice()]));
    let domain: DynamicObject = obj(json!({
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
        "metadata": {"name": "nvl", "namespace": "ml", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"numNodes": 1, "channel": {"resourceClaimTemplate": {"name": "nvl-channel"}}},
        "status": {"status": "Ready", "nodes": [{"name": "dn", "status": "Ready", "cliqueID": "c.1"}]}
    }));
    feed(&mut t, &mut f, listed(Msg::Domain, vec![domain]));
    // A worker with the domain's channel (made from its template) and a GPU of its own.
    let mut p = claim_pod("ml", "worker-0", "dn", "worker-0-gpu");
    if let Some(claims) = p.spec.as_mut().and_then(|s| s.resource_claims.as_mut()) {
        claims.insert(0, obj(json!({"name": "channel", "resourceClaimTemplateName": "nvl-channel"})));
    }
    if let Some(st) = p.status.as_mut() {
        st.resource_claim_statuses =
            Some(vec![obj(json!({"name": "channel", "resourceClaimName": "worker-0-channel-x7k2p"}))]);
    }
    // A pod of the same namespace with a claim from another template is no member.
    let mut other = pod("ml", "other", Some("dn"), "Running", 0);
    if let Some(spec) = other.spec.as_mut() {
        spec.resource_claims = Some(vec![obj(json!({"name": "gpu", "resourceClaimTemplateName": "one-gpu"}))]);
    }
    feed(&mut t, &mut f, listed(Msg::Pod, vec![p, other]));
    let channel: ResourceClaim = obj(json!({
        "metadata": {"name": "worker-0-channel-x7k2p", "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "channel", "exactly": {
            "deviceClassName": "compute-domain-default-channel.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]}},
        "status": {"allocation": {"devices": {"results": [{"request": "channel", "driver": "compute-domain.nvidia.com",
            "pool": "dn", "device": "channel-0"}]}}}
    }));
    let gpu = claim("ml", "worker-0-gpu", "gpu.nvidia.com", "gpu-3", json!(null));
    feed(&mut t, &mut f, listed(Msg::Claim, vec![channel, gpu]));
    let pod = f.pod_by_name("ml", "worker-0").and_then(|p| f.pod(p)).expect("the worker");
    // The channel is no GPU: one claim, one GPU, in the pod and in the totals.
    let claims: Vec<&str> = pod.dra.iter().map(|c| &*c.claim).collect();
    assert_eq!(claims, ["worker-0-gpu"]);
    assert_eq!(pod.dra_count(), 1);
    assert_eq!(f.totals.gpus_allocated, 1);
    let d = f.domains.get("ml/nvl").expect("the domain");
    let members: Vec<&str> = f.domain_pods(d).iter().map(|p| &*p.name).collect();
    assert_eq!(members, ["worker-0"]);
    // Not allocated yet, a channel claim is still no GPU (its class says so).
    let pending: ResourceClaim = obj(json!({
        "metadata": {"name": "worker-0-channel-x7k2p", "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "channel", "exactly": {
            "deviceClassName": "compute-domain-default-channel.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]}}
    }));
    feed(&mut t, &mut f, vec![Msg::Claim(Event::Apply(pending))]);
    let pod = f.pod_by_name("ml", "worker-0").and_then(|p| f.pod(p)).expect("the worker");
    assert_eq!(pod.dra_count(), 1);
    // The worker finishes: the domain's workload is empty.
    let mut done = self::pod("ml", "worker-0", Some("dn"), "Succeeded", 0);
    if let Some(spec) = done.spec.as_mut() {
        spec.resource_claims = Some(vec![obj(json!({"name": "channel", "resourceClaimTemplateName": "nvl-channel"}))]);
    }
    feed(&mut t, &mut f, vec![Msg::Pod(Event::Apply(done))]);
    let d = f.domains.get("ml/nvl").expect("the domain");
    assert!(f.domain_pods(d).is_empty());
}

#[test]
fn only_a_refused_watch_list_falls_back_to_pages() {
    use kube::core::Status;
    let start =
        |code| watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(Status::failure("x", "y").with_code(code))));
    // 422: "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled".
    assert!(refuses_watch_list(&start(422)));
    assert!(refuses_watch_list(&start(400)));
    // Away, overloaded, forbidden, not served: the watch retries (or stops) as before.
    for code in [403, 404, 429, 500, 503] {
        assert!(!refuses_watch_list(&start(code)), "{code}");
    }
    let listing =
        watcher::Error::InitialListFailed(kube::Error::Api(Box::new(Status::failure("x", "y").with_code(422))));
    assert!(!refuses_watch_list(&listing), "only the first watch of a watch-list is judged");
}
