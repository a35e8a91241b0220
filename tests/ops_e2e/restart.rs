//! The API server restarted mid-drain (issue 14 item 1): a drain held by a PodDisruptionBudget
//! keeps retrying while the server is down (same port, same etcd data: what a control-plane
//! upgrade or a crash looks like to clients), resumes when it is back, finishes once the budget
//! allows, and its audit trail ends in the outcome.

use std::path::Path;
use std::time::{Duration, Instant};

use fabrik::model::OpProgress;
use fabrik::ops::OpRequest;
use fabrik::ops::audit::Phase;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::{Exec, NS, fleet, phases, plan, running, trainers_back_and_held, unschedulable};
use crate::common::{Proc, control_plane_with};

pub async fn restarted_mid_drain(
    c: &kube::Client,
    kubeconfig: &Path,
    dir: &Path,
    audit_dir: &Path,
    cp: Proc,
    node: &str,
) -> Proc {
    trainers_back_and_held(c, kubeconfig, node).await;
    let f = fleet(c).await;
    let mut ex = Exec::new(c.clone(), audit_dir, "admin");
    let (id, _cancel) = ex.start(plan(&f, OpRequest::Drain { node: node.into(), force: false }));
    let mut seen = ex
        .until(
            id,
            "the PDB holding the drain",
            Duration::from_secs(60),
            |p| matches!(p, OpProgress::Blocked { reason, .. } if reason.contains("429")),
        )
        .await;
    let kc = std::fs::read_to_string(kubeconfig).expect("read the kubeconfig");
    let port = kc
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: https://127.0.0.1:"))
        .map(|p| p.trim().to_string())
        .expect("the kubeconfig names the server");
    let t0 = Instant::now();
    drop(cp);
    let stopped = t0.elapsed();
    // Down a while longer, as a restart of a real control plane is.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (cp, again) = control_plane_with(dir, &["--keep", "--port", &port]);
    assert_eq!(again, kubeconfig, "the same kubeconfig");
    let away = t0.elapsed();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(c.clone(), NS);
    pdbs.patch("trainer-pdb", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"minAvailable": 0}})))
        .await
        .expect("let the trainers go");
    let t1 = Instant::now();
    seen.extend(
        ex.until(id, "the drain's outcome", Duration::from_secs(180), |p| matches!(p, OpProgress::Finished { .. }))
            .await,
    );
    let Some(OpProgress::Finished { outcome, .. }) = seen.last() else { unreachable!() };
    assert!(outcome.as_ref().is_ok_and(|m| m.contains("2 pods evicted")), "{outcome:?}\n{seen:#?}");
    let noticed = seen.iter().any(|p| match p {
        OpProgress::Log { line, .. } => line.contains("retrying") || line.contains("gave up"),
        OpProgress::Blocked { reason, .. } => reason.contains("no answer"),
        _ => false,
    });
    assert!(noticed, "the outage is in the drain's log: {seen:#?}");
    assert!(unschedulable(c, node).await && running(c, "trainer", node).await.is_empty());
    assert_eq!(phases(audit_dir, "drain", node).last(), Some(&Phase::Succeeded), "the audit log ends in the outcome");
    eprintln!(
        "API server restarted mid-drain: stopped in {:.1} s, away {:.1} s in all; the drain finished {:.1} s after it \
         was back and the PDB allowed",
        stopped.as_secs_f64(),
        away.as_secs_f64(),
        t1.elapsed().as_secs_f64()
    );
    cp
}
