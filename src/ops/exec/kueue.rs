//! A Kueue Workload suspended or resumed ([`crate::ops::kueue`]): the Workload read (the
//! same uid as previewed), its `spec.active` written unless it is so already, then Kueue's
//! answer waited for — suspended: evicted with reason `Deactivated` and holding no quota,
//! then its Job's pods gone (Kueue releases the quota while they still terminate); resumed:
//! requeued (reason `Reactivated`) or admitted.

use super::{Run, Step, Stop, secs};
use crate::model::KueueWorkload;
use crate::ops::WorkloadPlan;
use crate::ops::target::Target;

/// Whether Kueue's status shows the change, and if not, what it shows.
fn answered(w: &KueueWorkload, active: bool) -> Result<(), String> {
    let said = |kind: &str| {
        w.condition(kind).map_or_else(
            || format!("no {kind} condition yet"),
            |c| format!("{kind} {} ({})", if c.status { "True" } else { "False" }, c.reason),
        )
    };
    if active {
        let requeued = w.condition("Requeued").is_some_and(|c| c.status);
        if requeued || w.holds_quota() {
            Ok(())
        } else {
            Err(format!("Kueue has not requeued it yet: {}", said("Requeued")))
        }
    } else {
        let evicted = w.condition("Evicted").is_some_and(|c| c.status && c.reason.starts_with("Deactivated"));
        if !evicted {
            Err(format!("Kueue has not evicted it yet: {}", said("Evicted")))
        } else if w.holds_quota() {
            Err("Kueue evicted it and waits for its pods to go: it still holds its quota".to_string())
        } else {
            Ok(())
        }
    }
}

pub(crate) async fn workload_op<T: Target>(t: &mut T, run: &mut Run<'_>, p: &WorkloadPlan) -> Step<String> {
    let (ns, name) = (p.namespace.as_str(), p.name.as_str());
    let key = format!("{ns}/{name}");
    let now = match t.read_kueue_workload(run, ns, name).await? {
        Ok(Some(w)) => w,
        Ok(None) => return Err(Stop::Failed(format!("Workload {key} is gone; nothing was changed"))),
        Err(f) => return Err(Stop::Failed(format!("{}; nothing was changed", f.message))),
    };
    if !p.uid.is_empty() && !now.uid.is_empty() && now.uid != p.uid {
        return Err(Stop::Failed(format!(
            "Workload {key} was made again since the preview (uid {} → {}); nothing was changed",
            p.uid, now.uid
        )));
    }
    // The pods to see gone after a suspension, as they are now (a later one with the same
    // name is another pod).
    let mut pods = Vec::new();
    for pod in &p.pods {
        match t.pod(run, ns, pod).await? {
            Ok(Some(v)) => pods.push(v),
            Ok(None) => {}
            Err(f) => return Err(Stop::Failed(format!("{}; nothing was changed", f.message))),
        }
    }
    if now.active == p.active {
        run.step(format!("Workload {key} has spec.active {} already", p.active)).await?;
    } else {
        if let Err(why) = t.set_workload_active(run, ns, name, &now.uid, p.active).await? {
            return Err(Stop::Failed(format!("{why}; nothing was changed")));
        }
        run.step(format!("Workload {key}: spec.active {} → {}", now.active, p.active)).await?;
    }
    let started = t.clock_ms();
    loop {
        match t.read_kueue_workload(run, ns, name).await? {
            Ok(Some(w)) => match answered(&w, p.active) {
                Ok(()) => break,
                Err(why) if t.clock_ms() >= run.deadline_ms => {
                    let waited = secs(std::time::Duration::from_millis(t.clock_ms().saturating_sub(started)));
                    return Err(Stop::Failed(format!(
                        "after {waited}: {why}; spec.active {} stays written (is Kueue's controller running?)",
                        p.active
                    )));
                }
                Err(why) => run.blocked(format!("waiting for Kueue: {why}")).await?,
            },
            Ok(None) => return Err(Stop::Failed(format!("Workload {key} is gone"))),
            Err(f) if f.transient && t.clock_ms() < run.deadline_ms => {
                run.log(format!("could not read Workload {key} ({}); looking again", f.why)).await?;
            }
            Err(f) => return Err(Stop::Failed(f.message)),
        }
        let poll = run.opts.poll;
        run.sleep(t, poll).await?;
    }
    for pod in &pods {
        super::reclaim::wait_gone(t, run, pod, None, "").await?;
    }
    let outcome = if p.active {
        format!("Workload {key} resumed: Kueue requeued it")
    } else {
        format!("Workload {key} suspended: Kueue evicted it (Deactivated), it holds no quota and its pods are gone")
    };
    run.step(outcome.clone()).await?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::WorkloadCondition;

    fn w(conds: &[(&str, bool, &str)]) -> KueueWorkload {
        KueueWorkload {
            namespace: "ns".into(),
            name: "w".into(),
            uid: "u".into(),
            queue: "lq".into(),
            cluster_queue: "cq".into(),
            priority: 0,
            priority_class: String::new(),
            active: false,
            owner: "Job/j".into(),
            pods: 1,
            gpus: 1,
            flavors: vec![],
            conditions: conds
                .iter()
                .map(|(k, s, r)| WorkloadCondition {
                    kind: k.to_string(),
                    status: *s,
                    reason: r.to_string(),
                    message: String::new(),
                    since: Some(1),
                })
                .collect(),
            created: 0,
        }
    }

    #[test]
    fn a_suspension_is_done_when_kueue_evicted_it_and_released_its_quota() {
        let admitted = w(&[("QuotaReserved", true, "QuotaReserved"), ("Admitted", true, "Admitted")]);
        assert!(answered(&admitted, false).is_err_and(|e| e.contains("not evicted")));
        let evicting = w(&[("QuotaReserved", true, "QuotaReserved"), ("Evicted", true, "Deactivated")]);
        assert!(answered(&evicting, false).is_err_and(|e| e.contains("still holds")));
        let done = w(&[("QuotaReserved", false, "Pending"), ("Evicted", true, "Deactivated")]);
        assert_eq!(answered(&done, false), Ok(()));
        let preempted = w(&[("Evicted", true, "Preempted")]);
        assert!(answered(&preempted, false).is_err(), "an eviction for another reason is not Kueue's answer");
    }

    #[test]
    fn a_resume_is_done_when_kueue_requeued_or_admitted_it() {
        assert!(answered(&w(&[("Requeued", false, "Deactivated")]), true).is_err());
        assert_eq!(answered(&w(&[("Requeued", true, "Reactivated")]), true), Ok(()));
        assert_eq!(answered(&w(&[("QuotaReserved", true, "QuotaReserved")]), true), Ok(()));
    }
}
