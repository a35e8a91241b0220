//! etcd paused under the API server (issue 14 item 1): the test control plane puts a gate
//! between kube-apiserver and etcd (tests/controlplane/main.go), closed by SIGUSR1 and opened
//! by SIGUSR2. While it is closed every read and write hangs in the API server, as with a
//! stalled etcd disk or a partition.
//! - A quota edit sent into a 90 s pause: it is retried within its bounds; what it reports is
//!   what the cluster ends with (success: the new value; no answer: it says the outcome is
//!   unknown and how to check), and the value is written at most once.
//! - An edit that meets a concurrent change across a 30 s pause is still a conflict.
//! - A reslice whose mig-manager wait spans a 90 s pause: the missed looks are logged, the
//!   wait goes on, and the reslice succeeds once etcd is back.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fabrik::model::{OpProgress, QuotaSourceSpec};
use fabrik::ops::{OpRequest, QuotaKey};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::Api;
use kube::runtime::watcher;
use serde_json::json;

use super::{Exec, NS, eventually, fleet, node_json, opts, plan, progress_for, reslice_changing};
use crate::common::kubectl;

fn gate(cp_pid: u32, pause: bool) {
    let sig = if pause { "-USR1" } else { "-USR2" };
    let ok = Command::new("kill").args([sig, &cp_pid.to_string()]).status().is_ok_and(|s| s.success());
    assert!(ok, "signal the control plane ({sig})");
}

/// Waits until the API server answers reads again (its etcd is back).
async fn answering(c: &kube::Client) {
    eventually("the API server answering again", Duration::from_secs(120), || {
        let c = c.clone();
        async move { Api::<ResourceQuota>::namespaced(c, NS).get("gpu-quota").await.map(|_| ()).map_err(|e| e.to_string()) }
    })
    .await;
}

fn hard(q: &ResourceQuota) -> String {
    q.spec
        .as_ref()
        .and_then(|s| s.hard.as_ref())
        .and_then(|h| h.get("requests.nvidia.com/gpu"))
        .map(|v| v.0.clone())
        .unwrap_or_default()
}

pub async fn etcd_paused(c: &kube::Client, kubeconfig: &Path, cp_pid: u32, audit_dir: &Path, node: &str) {
    let rq = QuotaKey {
        source: QuotaSourceSpec::ResourceQuota { namespace: NS.into(), name: "gpu-quota".into() },
        resource: "requests.nvidia.com/gpu".into(),
        field: Default::default(),
    };
    let set = |v: &str| OpRequest::SetQuota { tenant: "e2e".into(), quota: rq.clone(), value: v.into() };
    let quotas: Api<ResourceQuota> = Api::namespaced(c.clone(), NS);

    // Every value the quota's hard limit takes, as a watch sees it.
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let watch = {
        let seen = seen.clone();
        let cfg = watcher::Config::default().fields("metadata.name=gpu-quota");
        tokio::spawn(async move {
            let mut events = watcher::watcher(quotas, cfg).boxed();
            while let Some(ev) = events.next().await {
                let Ok(watcher::Event::Apply(q) | watcher::Event::InitApply(q)) = ev else { continue };
                if let Ok(mut s) = seen.lock() {
                    let v = hard(&q);
                    if s.last() != Some(&v) {
                        s.push(v);
                    }
                }
            }
        })
    };
    let quotas: Api<ResourceQuota> = Api::namespaced(c.clone(), NS);
    let before = hard(&quotas.get("gpu-quota").await.expect("read the quota"));
    let target = (before.parse::<i64>().expect("a whole number") + 3).to_string();

    // ---------- a quota edit into a 90 s pause ----------
    let f = fleet(c).await;
    let p = plan(&f, set(&target));
    let mut ex = Exec::new(c.clone(), audit_dir, "admin");
    gate(cp_pid, true);
    let t0 = Instant::now();
    let (id, _cancel) = ex.start(p);
    let mut progress = Vec::new();
    let mut reported = None;
    while t0.elapsed() < Duration::from_secs(90) {
        let chunk = progress_for(&mut ex, id, Duration::from_millis(500)).await;
        if reported.is_none() && chunk.iter().any(|p| matches!(p, OpProgress::Finished { .. })) {
            reported = Some(t0.elapsed());
        }
        progress.extend(chunk);
    }
    let finished_in_pause = reported.is_some();
    gate(cp_pid, false);
    if !finished_in_pause {
        progress.extend(
            ex.until(id, "the edit's outcome", Duration::from_secs(120), |p| matches!(p, OpProgress::Finished { .. }))
                .await,
        );
    }
    let reported = reported.unwrap_or_else(|| t0.elapsed());
    let Some(OpProgress::Finished { outcome, .. }) =
        progress.iter().rfind(|p| matches!(p, OpProgress::Finished { .. }))
    else {
        unreachable!()
    };
    let outcome = outcome.clone();
    answering(c).await;
    // A write the API server still held when we stopped waiting may land now: give it time.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let now = hard(&quotas.get("gpu-quota").await.expect("read the quota"));
    let retries =
        progress.iter().filter(|p| matches!(p, OpProgress::Log { line, .. } if line.contains("retrying"))).count();
    eprintln!(
        "etcd paused 90 s: the quota edit reported after {:.0} s (in the pause: {finished_in_pause}) ({retries} retries): {outcome:?}; the quota is now {now}",
        reported.as_secs_f64()
    );
    assert!(retries > 0, "the edit was retried while etcd was away: {progress:#?}");
    match &outcome {
        Ok(_) => assert_eq!(now, target, "reported done, so the cluster has it"),
        Err(e) => assert!(
            (now == before && e.contains("nothing was changed")) || e.contains("whether the change landed is unknown"),
            "a failure says what the cluster has ({now}): {e}"
        ),
    }
    let values = seen.lock().map(|s| s.clone()).unwrap_or_default();
    let writes = values.iter().filter(|v| **v == target).count();
    assert!(writes <= 1, "written at most once: {values:?}");
    assert_eq!(writes, usize::from(now == target), "{values:?}");

    // ---------- a conflict across a 30 s pause is still a conflict ----------
    let f = fleet(c).await;
    let p = plan(&f, set("21"));
    kubectl(
        kubeconfig,
        &[
            "-n",
            NS,
            "patch",
            "resourcequota",
            "gpu-quota",
            "--type=merge",
            "-p",
            r#"{"spec":{"hard":{"requests.nvidia.com/gpu":"22"}}}"#,
        ],
    );
    gate(cp_pid, true);
    let (id, _cancel) = ex.start(p);
    tokio::time::sleep(Duration::from_secs(30)).await;
    gate(cp_pid, false);
    let seen_p = ex
        .until(id, "the edit's outcome", Duration::from_secs(120), |p| matches!(p, OpProgress::Finished { .. }))
        .await;
    let Some(OpProgress::Finished { outcome, .. }) = seen_p.last() else { unreachable!() };
    let e = outcome.as_ref().expect_err("the concurrent edit is a conflict");
    assert!(e.contains("conflict") && e.contains("is now 22"), "{e}");
    answering(c).await;
    assert_eq!(hard(&quotas.get("gpu-quota").await.expect("read")), "22", "the other edit stands");

    // ---------- a reslice's mig-manager wait spans a 90 s pause ----------
    let f = fleet(c).await;
    let (p, _) = reslice_changing(&f, node, 1, &["all-1g.10gb", "all-balanced", "all-disabled"]);
    let mut long = opts();
    long.mig_timeout = Duration::from_secs(300);
    let mut ex = Exec::with_opts(c.clone(), audit_dir, "admin", long);
    let (id, _cancel) = ex.start(p);
    ex.until(
        id,
        "the label write",
        Duration::from_secs(60),
        |p| matches!(p, OpProgress::Step { step, .. } if step.starts_with("set nvidia.com/mig.config")),
    )
    .await;
    gate(cp_pid, true);
    let during = progress_for(&mut ex, id, Duration::from_secs(90)).await;
    assert!(
        !during.iter().any(|p| matches!(p, OpProgress::Finished { .. })),
        "the wait outlasts the pause: {during:#?}"
    );
    gate(cp_pid, false);
    let t1 = Instant::now();
    let rest = ex
        .until(id, "the reslice's outcome", Duration::from_secs(240), |p| matches!(p, OpProgress::Finished { .. }))
        .await;
    let Some(OpProgress::Finished { outcome, .. }) = rest.last() else { unreachable!() };
    assert!(outcome.is_ok(), "{outcome:?}\n{during:#?}\n{rest:#?}");
    let missed = during.iter().chain(&rest).filter(|p| matches!(p, OpProgress::Log { line, .. } if line.contains("still waiting for mig-manager") || line.contains("retrying"))).count();
    assert!(missed > 0, "the missed looks are logged: {during:#?}");
    let n = node_json(kubeconfig, node);
    assert_eq!(n["metadata"]["labels"]["nvidia.com/mig.config.state"], json!("success"));
    eprintln!(
        "etcd paused 90 s during the mig-manager wait: {missed} missed looks or retries logged; the reslice succeeded {:.1} s after etcd was back",
        t1.elapsed().as_secs_f64()
    );
    watch.abort();
}
