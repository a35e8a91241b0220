//! The Kubernetes executor's pure parts, on pods and objects as the API returns them.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{Value, json};

use super::PodAction;
use super::drain::{drain_action, drain_action_at, holds_gpus};
use super::evict::{after_conflict, pdb_selects, pod_view};
use crate::ops::exec::{leftovers, reconcile};
use crate::ops::target::{Evicted, PodRef, PodView};

fn views(pods: &[Pod]) -> Vec<PodView> {
    pods.iter().map(pod_view).collect()
}
use super::quota::{cq_entry, cq_path, quantity_text};

fn pod(v: Value) -> Pod {
    serde_json::from_value(v).expect("pod json")
}

fn base(name: &str) -> Value {
    json!({
        "metadata": { "name": name, "namespace": "ml", "uid": format!("uid-{name}"),
            "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": true }] },
        "spec": { "containers": [{ "name": "c" }] },
        "status": { "phase": "Running" }
    })
}

#[test]
fn kubectl_filters_on_api_pods() {
    assert_eq!(drain_action(&pod(base("a")), false), PodAction::Evict);
    let mut ds = base("ds");
    ds["metadata"]["ownerReferences"][0]["kind"] = json!("DaemonSet");
    assert!(matches!(drain_action(&pod(ds.clone()), false), PodAction::Skip(_)));
    ds["status"]["phase"] = json!("Succeeded");
    assert_eq!(drain_action(&pod(ds), false), PodAction::Evict, "finished DaemonSet pods are deletable");
    let mut mirror = base("m");
    mirror["metadata"]["annotations"] = json!({ "kubernetes.io/config.mirror": "x" });
    assert!(matches!(drain_action(&pod(mirror), false), PodAction::Skip(_)));
    let mut bare = base("bare");
    bare["metadata"]["ownerReferences"] = json!([]);
    assert!(matches!(drain_action(&pod(bare.clone()), false), PodAction::Refuse(w) if w.contains("--force")));
    assert!(matches!(drain_action(&pod(bare), true), PodAction::ForceDelete(_)));
    let mut local = base("local");
    local["spec"]["volumes"] = json!([{ "name": "scratch", "emptyDir": {} }]);
    assert!(matches!(drain_action(&pod(local), false), PodAction::Refuse(w) if w.contains("emptydir")));
    let mut gone = base("gone");
    gone["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert!(matches!(drain_action(&pod(gone), false), PodAction::Wait(_)), "terminating pods are waited for");
}

/// A pod someone deleted before the drain, held by a finalizer; `now` is 2 minutes and a
/// bit after the deletion was asked for (deletionTimestamp less its 30 s grace).
fn held(name: &str, stopped: bool) -> (Pod, u64) {
    let mut v = base(name);
    v["metadata"]["deletionTimestamp"] = json!("2026-01-01T10:00:30Z");
    v["metadata"]["deletionGracePeriodSeconds"] = json!(30);
    v["metadata"]["finalizers"] = json!(["example.com/hold"]);
    v["spec"]["containers"][0]["resources"] = json!({ "limits": { "nvidia.com/gpu": "1" } });
    if stopped {
        v["status"]["phase"] = json!("Failed");
    }
    let asked = crate::cluster::pod_deletion(&pod(v.clone())).map(|d| d.since).unwrap_or_default();
    (pod(v), asked + 125_000)
}

#[test]
fn terminating_pods_are_waited_for_with_what_keeps_them() {
    let (p, now) = held("held", false);
    let PodAction::Wait(why) = drain_action_at(&p, false, now) else { panic!("waited for") };
    assert!(why.starts_with("terminating since 2m, finalizers: example.com/hold"), "{why}");
    assert!(why.contains("still running after its 30s grace period"), "{why}");
    assert!(holds_gpus(&p), "still running: it holds its GPU");
    let (stopped, now) = held("stopped", true);
    let PodAction::Wait(why) = drain_action_at(&stopped, false, now) else { panic!("waited for") };
    assert!(why.contains("its containers have stopped, only the finalizers keep it"), "{why}");
    assert!(!holds_gpus(&stopped), "a stopped pod holds nothing, but is still waited for");
    // Within the grace period, the note says how long the containers may take.
    let PodAction::Wait(why) = drain_action_at(&p, false, now - 110_000) else { panic!() };
    assert_eq!(
        why,
        "terminating since <1m, finalizers: example.com/hold; its containers get up to 30s to stop (grace period)"
    );
    // Unmanaged or with local storage, it is going anyway: nothing to refuse or force.
    let mut bare = base("bare");
    bare["metadata"]["ownerReferences"] = json!([]);
    bare["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert!(matches!(drain_action(&pod(bare), false), PodAction::Wait(_)));
    // kubectl still leaves terminating DaemonSet and mirror pods alone.
    let mut ds = base("ds");
    ds["metadata"]["ownerReferences"][0]["kind"] = json!("DaemonSet");
    ds["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert!(matches!(drain_action(&pod(ds), false), PodAction::Skip(_)));
}

#[test]
fn reconcile_waits_for_terminating_pods_confirmed_or_not() {
    let (p, _) = held("held", false);
    let (late, _) = held("late", false);
    let confirmed = vec![("ml".to_string(), "held".to_string()), ("ml".to_string(), "a".to_string())];
    let (go, notes) = reconcile(&confirmed, &views(&[p, late, pod(base("a"))]), false, crate::now_ms()).unwrap();
    let by_name = |n: &str| go.iter().find(|r| r.name == n).unwrap_or_else(|| panic!("{n} must go: {go:?}"));
    assert!(by_name("held").terminating.as_deref().is_some_and(|w| w.contains("example.com/hold")));
    assert!(by_name("late").terminating.is_some(), "terminating, even if the preview did not show it");
    assert_eq!(by_name("a").terminating, None, "evicted");
    assert!(
        notes.iter().any(|n| n.contains("ml/late is terminating") && n.contains("waiting for it too")),
        "{notes:?}"
    );
}

#[test]
fn a_node_is_not_drained_while_a_pod_still_holds_a_gpu_or_terminates() {
    let (held, now) = held("held", false);
    let mut late = base("late");
    late["spec"]["containers"][0]["resources"] = json!({ "limits": { "nvidia.com/mig-1g.18gb": "2" } });
    let mut ds = base("exporter");
    ds["metadata"]["ownerReferences"][0]["kind"] = json!("DaemonSet");
    ds["spec"]["containers"][0]["resources"] = json!({ "limits": { "nvidia.com/gpu": "1" } });
    let mut done = base("done");
    done["status"]["phase"] = json!("Succeeded");
    done["spec"]["containers"][0]["resources"] = json!({ "limits": { "nvidia.com/gpu": "1" } });
    let pods = [held, pod(late), pod(ds), pod(done), pod(base("cpu-only"))];
    let (terminating, holding) = leftovers(&views(&pods), false, now);
    assert_eq!(terminating.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["held"]);
    assert_eq!(holding, ["ml/late"], "a DaemonSet pod stays by design; finished and GPU-less pods hold nothing");
    assert_eq!(leftovers(&views(&pods[2..]), false, now), (vec![], vec![]));
}

#[test]
fn an_eviction_conflict_is_gone_only_when_the_pod_is() {
    let p = pod(base("a"));
    assert_eq!(after_conflict("uid-a", None, "x"), Evicted::Gone, "404 on the re-read");
    let mut replaced = base("a");
    replaced["metadata"]["uid"] = json!("uid-new");
    assert_eq!(after_conflict("uid-a", Some(&pod(replaced)), "x"), Evicted::Gone, "a new uid: ours is gone");
    let mut deleting = base("a");
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert_eq!(after_conflict("uid-a", Some(&pod(deleting)), "x"), Evicted::Done, "ours, on its way: wait for it");
    match after_conflict("uid-a", Some(&p), "the object has been modified") {
        Evicted::Retry(409, why) => assert!(why.contains("the object has been modified"), "{why}"),
        other => panic!("the same pod, still there, is retried: {other:?}"),
    }
}

#[test]
fn reconcile_evicts_only_what_was_confirmed() {
    let pods = vec![pod(base("a")), pod(base("late"))];
    let confirmed = vec![("ml".to_string(), "a".to_string()), ("ml".to_string(), "vanished".to_string())];
    let (evict, notes) = reconcile(&confirmed, &views(&pods), false, crate::now_ms()).unwrap();
    assert_eq!(
        evict,
        vec![PodRef { namespace: "ml".into(), name: "a".into(), uid: "uid-a".into(), terminating: None }]
    );
    assert!(notes.iter().any(|n| n.contains("ml/late arrived after the preview")), "{notes:?}");
    assert!(notes.iter().any(|n| n.contains("ml/vanished is already gone")), "{notes:?}");
    let mut bare = base("bare");
    bare["metadata"]["ownerReferences"] = json!([]);
    let e = reconcile(&confirmed, &views(&[pod(base("a")), pod(bare)]), false, crate::now_ms()).unwrap_err();
    assert!(e.contains("ml/bare") && e.contains("nothing was evicted"), "{e}");
}

#[test]
fn pdb_selectors_match_labels_and_expressions() {
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": { "name": "p" },
        "spec": { "selector": { "matchLabels": { "app": "trainer" },
            "matchExpressions": [{ "key": "tier", "operator": "In", "values": ["gpu"] }] } }
    }))
    .unwrap();
    let l = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    assert!(pdb_selects(&pdb, &l(&[("app", "trainer"), ("tier", "gpu")])));
    assert!(!pdb_selects(&pdb, &l(&[("app", "trainer")])));
    assert!(!pdb_selects(&pdb, &l(&[("app", "web"), ("tier", "gpu")])));
}

#[test]
fn cluster_queue_slots_are_found_by_flavor_and_resource() {
    let cq = json!({ "spec": { "resourceGroups": [{ "coveredResources": ["nvidia.com/gpu"], "flavors": [
        { "name": "h100", "resources": [{ "name": "nvidia.com/gpu", "nominalQuota": 8 }] },
        { "name": "a100", "resources": [{ "name": "nvidia.com/gpu", "nominalQuota": "4" }] } ] }] } });
    let s = cq_entry(&cq, "a100", "nvidia.com/gpu").unwrap();
    assert_eq!(quantity_text(s.get("nominalQuota")), "4");
    // The path the JSON patch writes to names that same entry.
    assert_eq!(cq_path(&cq, "a100", "nvidia.com/gpu").as_deref(), Some("/spec/resourceGroups/0/flavors/1/resources/0"));
    assert!(cq_entry(&cq, "b200", "nvidia.com/gpu").is_none());
}
