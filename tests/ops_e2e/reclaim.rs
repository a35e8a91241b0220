//! Reclaiming a pod's GPUs through its owner (issue 16 item 5), on the same control plane,
//! with kube-controller-manager's Deployment, ReplicaSet, StatefulSet and Job controllers
//! doing what they do, as the operator identity of the shipped roles (so the grants are
//! proven enough) and as the viewer (refused up front). Each outcome is read back with
//! kubectl, a second client: the replicas written, the pod that went — that one, not a
//! sibling — no replacement, a Job suspended (and the Job controller's `Suspended`
//! condition), an ownerless pod evicted, a Kueue-managed Job refused with nothing sent.
//! One workload at a time, so the few whole GPUs left by the earlier phases suffice.

use std::path::Path;
use std::time::Duration;

use fabrik::ops::audit::Phase;
use fabrik::ops::{OpRequest, PlanDetail, ReclaimAction, Workload};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::{Value, json};

use super::{Exec, NS, eventually, fleet, obj, phases, steps};
use crate::common::kubectl;

const WAIT: Duration = Duration::from_secs(90);

fn gpu_container() -> Value {
    json!([{"name": "c", "image": "busybox",
        "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}}])
}

/// Running pods with label `app=<app>`, not being deleted: (name, uid), sorted.
async fn pods_of(c: &kube::Client, app: &str) -> Vec<(String, String)> {
    let pods = Api::<Pod>::namespaced(c.clone(), NS)
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut v: Vec<(String, String)> = pods
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .map(|p| (p.metadata.name.unwrap_or_default(), p.metadata.uid.unwrap_or_default()))
        .collect();
    v.sort();
    v
}

async fn running_n(c: &kube::Client, app: &str, n: usize) -> Vec<(String, String)> {
    eventually(&format!("{n} {app} pods running"), WAIT, || {
        let c = c.clone();
        let app = app.to_string();
        async move {
            let p = pods_of(&c, &app).await;
            if p.len() == n { Ok(p) } else { Err(format!("{p:?}")) }
        }
    })
    .await
}

/// Whether the API server still has pod `name` (any uid).
fn pod_exists(kubeconfig: &Path, name: &str) -> bool {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["-n", NS, "get", "pod", name, "--ignore-not-found", "-o", "name"])
        .output()
        .expect("kubectl");
    !String::from_utf8_lossy(&out.stdout).trim().is_empty()
}

fn jsonpath(kubeconfig: &Path, what: &str, path: &str) -> String {
    kubectl(kubeconfig, &["-n", NS, "get", what, "-o", &format!("jsonpath={path}")]).trim().to_string()
}

fn reclaim(namespace: &str, pod: &str) -> OpRequest {
    OpRequest::Reclaim { namespace: namespace.into(), pod: pod.into() }
}

async fn create(c: &kube::Client, api: (&str, &str, &str, &str), body: Value) {
    let (group, version, kind, plural) = api;
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    let api = Api::<kube::api::DynamicObject>::namespaced_with(
        c.clone(),
        NS,
        &kube::api::ApiResource::from_gvk_with_plural(&gvk, plural),
    );
    api.create(&PostParams::default(), &obj(body)).await.unwrap_or_else(|e| panic!("create {kind}: {e}"));
}

pub async fn through_owners(c: &kube::Client, kubeconfig: &Path, audit_dir: &Path, op: &mut Exec, viewer: &mut Exec) {
    // ---------- a Deployment's pod: marked, replicas 2 → 1, that pod goes, its sibling stays ----------
    create(
        c,
        ("apps", "v1", "Deployment", "deployments"),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nb"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "nb"}},
                "template": {"metadata": {"labels": {"app": "nb"}}, "spec": {"containers": gpu_container()}}}}),
    )
    .await;
    let nb = running_n(c, "nb", 2).await;
    let (victim, sibling) = (nb[0].clone(), nb[1].clone());
    let f = fleet(c).await;
    let p = fabrik::ops::plan(&f, &reclaim(NS, &victim.0)).unwrap_or_else(|e| panic!("plan: {e}"));
    let PlanDetail::Reclaim(r) = &p.detail else { panic!("a reclaim plan: {p:?}") };
    let rs = jsonpath(kubeconfig, &format!("pod/{}", victim.0), "{.metadata.ownerReferences[0].name}");
    assert_eq!(r.action, ReclaimAction::ScaleDown { kind: Workload::Deployment, name: "nb".into(), rs: Some(rs) });
    assert!(p.can_execute(), "{:?}", p.blockers);
    assert!(p.effects.iter().any(|e| e.contains("(2 → 1 as the fleet shows it")), "{:?}", p.effects);

    // The viewer is refused before anything is sent, told which permission is missing.
    let (outcome, _) = viewer.run(p.clone(), WAIT).await;
    let e = outcome.expect_err("the viewer's reclaim is refused");
    assert!(e.contains(&format!("may not patch pods in {NS}")) && e.contains("nothing was sent"), "{e}");
    assert_eq!(jsonpath(kubeconfig, "deployment/nb", "{.spec.replicas}"), "2");

    let (outcome, seen) = op.run(p, WAIT).await;
    let done = outcome.unwrap_or_else(|e| panic!("reclaim: {e}\n{seen:#?}"));
    assert!(done.starts_with(&format!("Deployment {NS}/nb scaled 2 → 1: {NS}/{} is gone", victim.0)), "{done}");
    let s = steps(&seen);
    assert_eq!(
        s,
        [
            format!("marked {NS}/{} controller.kubernetes.io/pod-deletion-cost=-2147483648", victim.0),
            format!("scaled Deployment {NS}/nb 2 → 1"),
            format!("{NS}/{} is gone", victim.0),
        ],
        "{seen:#?}"
    );
    assert_eq!(jsonpath(kubeconfig, "deployment/nb", "{.spec.replicas}"), "1", "kubectl reads the replicas written");
    assert!(!pod_exists(kubeconfig, &victim.0), "the reclaimed pod is gone");
    // The ReplicaSet keeps the other pod, the same one, and makes no replacement.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(pods_of(c, "nb").await, vec![sibling.clone()], "the sibling stays, nothing replaces the victim");
    assert_eq!(phases(audit_dir, "reclaim", &format!("Deployment {NS}/nb")).last(), Some(&Phase::Succeeded));
    kubectl(kubeconfig, &["-n", NS, "delete", "deployment", "nb", "--wait=true"]);

    // ---------- a StatefulSet: only its highest ordinal can go ----------
    create(
        c,
        ("apps", "v1", "StatefulSet", "statefulsets"),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
            "spec": {"replicas": 2, "serviceName": "db", "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": gpu_container()}}}}),
    )
    .await;
    let db = running_n(c, "db", 2).await;
    let f = fleet(c).await;
    let low = fabrik::ops::plan(&f, &reclaim(NS, "db-0")).unwrap_or_else(|e| panic!("plan: {e}"));
    assert!(!low.can_execute() && low.blockers[0].contains("highest ordinal first (db-1)"), "{:?}", low.blockers);
    let top = fabrik::ops::plan(&f, &reclaim(NS, "db-1")).unwrap_or_else(|e| panic!("plan: {e}"));
    let (outcome, seen) = op.run(top, WAIT).await;
    assert!(outcome.is_ok(), "{outcome:?}\n{seen:#?}");
    assert_eq!(steps(&seen), [format!("scaled StatefulSet {NS}/db 2 → 1"), format!("{NS}/db-1 is gone")]);
    assert_eq!(jsonpath(kubeconfig, "statefulset/db", "{.spec.replicas}"), "1");
    assert!(!pod_exists(kubeconfig, "db-1"));
    assert_eq!(pods_of(c, "db").await, vec![db[0].clone()], "db-0 stays, the same pod");
    kubectl(kubeconfig, &["-n", NS, "delete", "statefulset", "db", "--wait=true"]);

    // ---------- a Job: suspended; the Job controller stops its pod and says Suspended ----------
    create(
        c,
        ("batch", "v1", "Job", "jobs"),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "ft"},
            "spec": {"template": {"metadata": {"labels": {"app": "ft"}},
                "spec": {"restartPolicy": "Never", "containers": gpu_container()}}}}),
    )
    .await;
    let ft = running_n(c, "ft", 1).await;
    let f = fleet(c).await;
    let p = fabrik::ops::plan(&f, &reclaim(NS, &ft[0].0)).unwrap_or_else(|e| panic!("plan: {e}"));
    assert!(matches!(&p.detail, PlanDetail::Reclaim(r) if r.action == ReclaimAction::Suspend { job: "ft".into() }));
    let (outcome, seen) = op.run(p, WAIT).await;
    assert!(outcome.as_ref().is_ok_and(|m| m.starts_with(&format!("Job {NS}/ft suspended"))), "{outcome:?}\n{seen:#?}");
    assert_eq!(jsonpath(kubeconfig, "job/ft", "{.spec.suspend}"), "true");
    assert!(!pod_exists(kubeconfig, &ft[0].0));
    eventually("the Job controller's Suspended condition", WAIT, || {
        let kc = kubeconfig.to_path_buf();
        async move {
            let s = jsonpath(&kc, "job/ft", r#"{.status.conditions[?(@.type=="Suspended")].status}"#);
            if s == "True" { Ok(()) } else { Err(s) }
        }
    })
    .await;

    // A Job Kueue manages is refused: Kueue would resume it. Nothing is sent.
    create(
        c,
        ("batch", "v1", "Job", "jobs"),
        json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "ft-queued", "labels": {"kueue.x-k8s.io/queue-name": "lq-e2e"}},
            "spec": {"template": {"metadata": {"labels": {"app": "ft-queued"}},
                "spec": {"restartPolicy": "Never", "containers": gpu_container()}}}}),
    )
    .await;
    let q = running_n(c, "ft-queued", 1).await;
    let f = fleet(c).await;
    let p = fabrik::ops::plan(&f, &reclaim(NS, &q[0].0)).unwrap_or_else(|e| panic!("plan: {e}"));
    let (outcome, _) = op.run(p, WAIT).await;
    let e = outcome.expect_err("a Kueue-managed Job is refused");
    assert!(e.contains("Kueue's queue lq-e2e") && e.contains("nothing was sent"), "{e}");
    assert_eq!(jsonpath(kubeconfig, "job/ft-queued", "{.spec.suspend}"), "false", "not suspended");
    assert_eq!(pods_of(c, "ft-queued").await, q, "its pod runs on");
    kubectl(kubeconfig, &["-n", NS, "delete", "job", "ft", "ft-queued", "--wait=true"]);

    // ---------- a pod without an owner: evicted ----------
    Api::<Pod>::namespaced(c.clone(), NS)
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "nb-solo", "labels": {"app": "nb-solo"}},
                "spec": {"containers": gpu_container()}})),
        )
        .await
        .expect("create the bare pod");
    running_n(c, "nb-solo", 1).await;
    let f = fleet(c).await;
    let p = fabrik::ops::plan(&f, &reclaim(NS, "nb-solo")).unwrap_or_else(|e| panic!("plan: {e}"));
    assert_eq!(p.target, format!("pod {NS}/nb-solo"));
    let (outcome, seen) = op.run(p, WAIT).await;
    assert!(outcome.is_ok(), "{outcome:?}\n{seen:#?}");
    assert_eq!(steps(&seen), [format!("evicted {NS}/nb-solo"), format!("{NS}/nb-solo is gone")]);
    assert!(!pod_exists(kubeconfig, "nb-solo"));
    eprintln!("reclaim: Deployment, StatefulSet, Job and an ownerless pod, checked with kubectl");
}
