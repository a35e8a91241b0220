//! The cockpit killed mid-operation (issue 14 item 1): no chance to write an outcome.
//! - The real binary, in tmux, drains a node a PodDisruptionBudget holds back and is killed
//!   with SIGKILL while it waits: `fabrik audit` shows the drain INTERRUPTED at its waiting
//!   step, the node stays cordoned, and the drain run again finishes.
//! - A reslice whose task dies after its cordon (the executor's task aborted: what a SIGKILL
//!   leaves, with nothing written after the last step): the audit log says INTERRUPTED, the
//!   node keeps the cordon and its `fabrik.io/cordoned-by` mark, and the reslice run again
//!   finishes and restores the cordon state found before the first run (uncordoned).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use fabrik::model::OpProgress;
use fabrik::ops::audit::Phase;
use fabrik::ops::{OpRequest, PlanDetail};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::{
    BIN, Exec, NS, SLOW, audit_records, drain_blocked_in_tmux, eventually, fleet, node_json, phases, plan,
    reslice_changing, running, trainers_back_and_held, unschedulable,
};

fn audit_line(data: &Path, node: &str, kind: &str) -> String {
    let out = Command::new(BIN).arg("audit").env("FABRIK_DATA_DIR", data).output().expect("fabrik audit");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    text.lines()
        .rfind(|l| l.contains(node) && l.contains(kind))
        .unwrap_or_else(|| panic!("fabrik audit lists the {kind} of {node}:\n{text}"))
        .to_string()
}

pub async fn killed_mid_drain(c: &kube::Client, kubeconfig: &Path, dir: &Path, node: &str) {
    trainers_back_and_held(c, kubeconfig, node).await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(c.clone(), NS);
    let data = dir.join("kill-data");
    let t = drain_blocked_in_tmux(kubeconfig, &data, node);
    // SIGKILL: nothing of the cockpit runs after it (no handler, no outcome record). The
    // cockpit is the pane's process or its child (the pane's shell), whichever runs BIN.
    let pane: u32 = t.display("#{pane_pid}").trim().parse().expect("the pane's pid");
    let children = Command::new("pgrep").args(["-P", &pane.to_string()]).output().expect("pgrep");
    let mut candidates = vec![pane];
    candidates
        .extend(String::from_utf8_lossy(&children.stdout).split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
    let bin = std::fs::canonicalize(BIN).expect("the binary");
    let cockpit_pid = candidates
        .into_iter()
        .find(|p| std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == bin))
        .unwrap_or_else(|| panic!("the cockpit among the pane's processes"));
    let killed = Command::new("kill").args(["-KILL", &cockpit_pid.to_string()]).status().expect("kill");
    assert!(killed.success());
    let gone = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{cockpit_pid}/exe")).exists() {
        assert!(Instant::now() < gone, "the cockpit did not die");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(t);
    let recs = audit_records(&data);
    let last = recs.iter().rfind(|r| r.kind == "drain").expect("drain records");
    assert!(!last.phase.is_outcome(), "a killed cockpit wrote no outcome: {last:?}");
    let line = audit_line(&data, node, "drain");
    assert!(line.contains("INTERRUPTED") && line.contains("429"), "interrupted while waiting on the PDB: {line}");
    assert!(unschedulable(c, node).await, "what was done stays: the node is still cordoned");
    assert_eq!(running(c, "trainer", node).await.len(), 2, "the PDB held both trainers");

    // Run again (the budget now allows it): it re-plans from the cluster and finishes.
    pdbs.patch("trainer-pdb", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"minAvailable": 0}})))
        .await
        .expect("let the trainers go");
    let f = fleet(c).await;
    let mut ex = Exec::new(c.clone(), &data, "admin");
    let (outcome, seen) = ex.run(plan(&f, OpRequest::Drain { node: node.into(), force: false }), SLOW).await;
    assert!(outcome.as_ref().is_ok_and(|m| m.contains("2 pods evicted")), "{outcome:?}\n{seen:#?}");
    assert!(unschedulable(c, node).await && running(c, "trainer", node).await.is_empty());
    assert!(audit_line(&data, node, "drain").contains("succeeded"));
}

pub async fn killed_mid_reslice(c: &kube::Client, kubeconfig: &Path, audit_dir: &Path, node: &str) {
    let f = fleet(c).await;
    let (p, layout) = reslice_changing(&f, node, 1, &["all-balanced", "all-disabled"]);
    let PlanDetail::Reslice(r) = &p.detail else { panic!("a reslice plan") };
    assert!(!r.was_cordoned && !unschedulable(c, node).await, "uncordoned before");
    let config = r.config_name.clone();
    let mut ex = Exec::new(c.clone(), audit_dir, "admin");
    let (id, task) = ex.start_task(p);
    ex.until(id, "the cordon", SLOW, |p| matches!(p, OpProgress::Step { step, .. } if step.starts_with("cordoned")))
        .await;
    task.abort();
    let _ = task.await;
    assert!(unschedulable(c, node).await, "the dead reslice left its cordon");
    let ph = phases(audit_dir, "reslice", node);
    assert!(ph.last().is_some_and(|p| !p.is_outcome()), "no outcome was written: {ph:?}");
    let line = audit_line(audit_dir, node, "reslice");
    assert!(line.contains("INTERRUPTED"), "{line}");
    let mark = node_json(kubeconfig, node)["metadata"]["annotations"]["fabrik.io/cordoned-by"].clone();
    assert!(mark.as_str().is_some_and(|m| m.split_whitespace().nth(1) == Some("reslice")), "marked: {mark}");
    // mig-manager may still act on what the dead run wrote; let it settle, then run again.
    eventually("mig-manager idle on the node", SLOW, || {
        let n = node_json(kubeconfig, node);
        async move {
            let state = n["metadata"]["labels"]["nvidia.com/mig.config.state"].clone();
            if state == json!("success") { Ok(()) } else { Err(format!("state {state}")) }
        }
    })
    .await;
    let f = fleet(c).await;
    let p = plan(&f, OpRequest::Reslice { node: node.into(), gpus: vec![1], layout: layout.into() });
    let (outcome, seen) = ex.run(p, Duration::from_secs(90)).await;
    assert!(outcome.is_ok(), "{outcome:?}\n{seen:#?}");
    let n = node_json(kubeconfig, node);
    assert_eq!(n["spec"]["unschedulable"], Value::Null, "uncordoned, as before the first run");
    assert_eq!(n["metadata"]["annotations"]["fabrik.io/cordoned-by"], Value::Null, "the mark is gone");
    assert_eq!(n["metadata"]["labels"]["nvidia.com/mig.config"], json!(config));
    assert_eq!(phases(audit_dir, "reslice", node).last(), Some(&Phase::Succeeded));
}
