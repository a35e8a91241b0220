//! A reclaim ([`crate::ops::reclaim`]): the owner read and checked again, one write to it
//! (two on a ReplicaSet's pod: the deletion cost, then the replicas), and the pod waited for
//! until the API server no longer has it. A ReplicaSet that settles at the new count with the
//! pod still there removed another one: the operation fails and says how to scale back.

use super::{Run, Step, Stop, secs};
use crate::ops::reclaim::{DELETION_COST, KUEUE_QUEUE_LABEL, LOWEST_COST};
use crate::ops::target::{Evicted, PodRef, PodView, Target, WorkloadView};
use crate::ops::{ReclaimAction, ReclaimPlan, Workload};

fn failed<T>(msg: String) -> Step<T> {
    Err(Stop::Failed(msg))
}

async fn read<T: Target>(t: &mut T, run: &mut Run<'_>, ns: &str, kind: Workload, name: &str) -> Step<WorkloadView> {
    match t.read_workload(run, ns, kind, name).await? {
        Ok(Some(w)) => Ok(w),
        Ok(None) => failed(format!("{} {ns}/{name} is gone; nothing was changed", kind.as_str())),
        Err(f) => failed(format!("{}; nothing was changed", f.message)),
    }
}

pub(crate) async fn reclaim_op<T: Target>(t: &mut T, run: &mut Run<'_>, r: &ReclaimPlan) -> Step<String> {
    let key = r.key();
    let ns = r.namespace.as_str();
    let pod = match t.pod(run, ns, &r.pod).await? {
        Ok(Some(p)) => p,
        Ok(None) => {
            run.step(format!("{key} was gone already")).await?;
            return Ok(format!("{key} was gone already: its GPUs are free; nothing was sent"));
        }
        Err(f) => return failed(format!("{}; nothing was changed", f.message)),
    };
    let freed = r.devices.join(", ");
    let pref =
        PodRef { namespace: pod.namespace.clone(), name: pod.name.clone(), uid: pod.uid.clone(), terminating: None };
    match &r.action {
        ReclaimAction::ScaleDown { kind, name, rs } => {
            // The pod's ReplicaSet, checked against what the preview assumed.
            let mut rs_seen = None;
            if let Some(rs) = rs {
                let v = read(t, run, ns, Workload::ReplicaSet, rs).await?;
                let owner = v.controller.clone();
                match (kind, &owner) {
                    (Workload::Deployment, Some((k, n))) if k == "Deployment" && n == name => {}
                    (Workload::Deployment, _) => {
                        return failed(format!(
                            "ReplicaSet {ns}/{rs} is not Deployment {name}'s ({}); nothing was sent — scale its owner yourself",
                            owner.map_or("it has no controller".to_string(), |(k, n)| format!(
                                "its controller is {k} {n}"
                            ))
                        ));
                    }
                    (_, Some((k, n))) => {
                        return failed(format!(
                            "ReplicaSet {ns}/{rs} belongs to {k} {n}, which would put a removed replica back; nothing was sent"
                        ));
                    }
                    _ => {}
                }
                rs_seen = Some(v);
            }
            let w = read(t, run, ns, *kind, name).await?;
            let from = w.replicas.unwrap_or(1);
            let what = format!("{} {ns}/{name}", kind.as_str());
            if from <= 0 {
                return failed(format!("{what} is at 0 replicas already and {key} is still there; nothing was sent"));
            }
            if *kind == Workload::StatefulSet && r.pod != format!("{name}-{}", from - 1) {
                return failed(format!(
                    "{what} has {from} replicas: a scale-down removes {name}-{}, not {}; nothing was sent",
                    from - 1,
                    r.pod
                ));
            }
            if rs.is_some() {
                if let Err(why) = t.annotate_pod(run, &pref, DELETION_COST, &LOWEST_COST.to_string()).await? {
                    return failed(format!("{why}; nothing was changed"));
                }
                run.step(format!("marked {key} {DELETION_COST}={LOWEST_COST}")).await?;
            }
            if let Err(why) = t.scale(run, ns, *kind, name, &w, from - 1).await? {
                return failed(format!("{why}; the replicas were not changed"));
            }
            run.step(format!("scaled {what} {from} → {}", from - 1)).await?;
            // What the ReplicaSet should come down to: one below what it had.
            let watch = rs.as_deref().zip(rs_seen.and_then(|v| v.replicas)).map(|(rs, n)| (rs, n - 1));
            let back = format!("kubectl scale {}/{name} -n {ns} --replicas={from}", kind.kubectl());
            wait_gone(t, run, &pod, watch, &back).await?;
            Ok(format!("{what} scaled {from} → {}: {key} is gone, freeing {freed}", from - 1))
        }
        ReclaimAction::Suspend { job } => {
            let w = read(t, run, ns, Workload::Job, job).await?;
            if let Some(q) = &w.queue {
                return failed(format!(
                    "Job {ns}/{job} is in Kueue's queue {q} ({KUEUE_QUEUE_LABEL}): Kueue resumes a suspended Job it \
                     admitted. Suspend its Workload instead (Z in the workloads view, 9, or :suspend {ns}/NAME); \
                     nothing was sent"
                ));
            }
            if w.suspended {
                run.step(format!("Job {ns}/{job} was suspended already")).await?;
            } else {
                if let Err(why) = t.suspend_job(run, ns, job, &w.uid).await? {
                    return failed(format!("{why}; nothing was changed"));
                }
                run.step(format!("suspended Job {ns}/{job}")).await?;
            }
            if let Some((k, n)) = w.controller.filter(|(k, _)| k == "CronJob") {
                run.log(format!(
                    "Job {job} belongs to {k} {n}: its next run still starts on schedule (kubectl patch cronjob {n} -n {ns} -p '{{\"spec\":{{\"suspend\":true}}}}' stops those)"
                ))
                .await?;
            }
            let back = format!("kubectl patch job {job} -n {ns} -p '{{\"spec\":{{\"suspend\":false}}}}'");
            wait_gone(t, run, &pod, None, &back).await?;
            Ok(format!("Job {ns}/{job} suspended: {key} is gone, freeing {freed} (resume: {back})"))
        }
        ReclaimAction::Evict => {
            loop {
                match t.evict(run, &pref).await? {
                    Ok(Evicted::Done | Evicted::Gone) => break,
                    Ok(Evicted::Retry(code, msg)) => {
                        let why = if code == 429 { t.blocking_pdb(ns, &r.pod).await.unwrap_or(msg) } else { msg };
                        if t.clock_ms() >= run.deadline_ms {
                            return failed(format!("{key} was not evicted before the deadline: {why}"));
                        }
                        run.blocked(format!(
                            "eviction refused ({code}), retrying every {}: {why}",
                            secs(run.opts.evict_retry)
                        ))
                        .await?;
                    }
                    Ok(Evicted::Unanswered(why)) => {
                        if t.clock_ms() >= run.deadline_ms {
                            return failed(format!("the eviction of {key} got no answer before the deadline ({why})"));
                        }
                        run.log(format!("the eviction of {key} got no answer ({why}); sending it again")).await?;
                    }
                    Err(e) => return failed(e),
                }
                let wait = run.opts.evict_retry;
                run.sleep(t, wait).await?;
            }
            run.step(format!("evicted {key}")).await?;
            wait_gone(t, run, &pod, None, "").await?;
            Ok(format!("{key} evicted and gone, freeing {freed}"))
        }
    }
}

/// Waits until the pod is gone (or replaced: another uid). With `watch` (a ReplicaSet and
/// the count it should come down to), a ReplicaSet that settles there while the pod runs on
/// removed another pod: that stops the operation, with `back` to undo the scale.
pub(crate) async fn wait_gone<T: Target>(
    t: &mut T,
    run: &mut Run<'_>,
    pod: &PodView,
    watch: Option<(&str, i32)>,
    back: &str,
) -> Step<()> {
    let key = pod.key();
    let started = t.clock_ms();
    loop {
        match t.pod(run, &pod.namespace, &pod.name).await? {
            Ok(Some(p)) if p.uid == pod.uid => {
                let waited = secs(std::time::Duration::from_millis(t.clock_ms().saturating_sub(started)));
                if t.clock_ms() >= run.deadline_ms {
                    let why = p.terminating(t.wall_ms()).unwrap_or_else(|| "not terminating".into());
                    return failed(format!("{key} is still there after {waited} ({why}); its GPUs are not freed"));
                }
                if let Some(why) = p.terminating(t.wall_ms()) {
                    run.blocked(format!("waiting for {key} to terminate: {why}")).await?;
                } else if let Some((rs, want)) = watch {
                    let settled = match t.read_workload(run, &pod.namespace, Workload::ReplicaSet, rs).await? {
                        Ok(Some(v)) => v.replicas.is_some_and(|r| r <= want) && v.settled.is_some_and(|s| s <= want),
                        _ => false,
                    };
                    // Read the pod again: the ReplicaSet may have taken it between the two reads.
                    let still = matches!(t.pod(run, &pod.namespace, &pod.name).await?,
                        Ok(Some(q)) if q.uid == pod.uid && q.deletion.is_none());
                    if settled && still {
                        return failed(format!(
                            "ReplicaSet {rs} settled at {want} with {key} still running (it removed a pending or \
                             not-ready pod first, whatever the deletion cost, or had fewer pods than it wanted): its \
                             GPUs are not freed. Scale back with: {back}"
                        ));
                    }
                    run.blocked(format!("waiting for ReplicaSet {rs} to remove {key}")).await?;
                } else {
                    run.blocked(format!("waiting for {key} to go")).await?;
                }
            }
            Ok(_) => break,
            Err(f) if f.transient && t.clock_ms() < run.deadline_ms => {
                run.log(format!("could not read {key} ({}); looking again", f.why)).await?;
            }
            Err(f) => return failed(f.message),
        }
        let poll = run.opts.poll;
        run.sleep(t, poll).await?;
    }
    run.step(format!("{key} is gone")).await
}
