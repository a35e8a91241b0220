//! A ClusterQueue held, drained or resumed ([`crate::ops::queue`]): the queue read, its
//! `stopPolicy` written unless it is so already, then Kueue's answer waited for — `Active`
//! False with reason `Stopped` (and, for a drain, no reserving workload left), or `Active`
//! True again on a resume.

use super::{Run, Step, Stop, secs};
use crate::ops::target::{QueueView, Target};
use crate::ops::{QueuePlan, StopPolicy};

/// Whether Kueue's status shows `policy` in force, and if not, what it shows.
fn answered(v: &QueueView, policy: StopPolicy) -> Result<(), String> {
    let (active, reason, message) = v.active.clone().unwrap_or((true, "no Active condition yet".into(), String::new()));
    let said = if message.is_empty() { reason.clone() } else { format!("{reason}: {message}") };
    match policy {
        StopPolicy::None if active => Ok(()),
        StopPolicy::None => Err(format!("Kueue still reports it inactive ({said})")),
        _ if active || !reason.contains("Stopped") => Err(format!("Kueue has not stopped it yet ({said})")),
        StopPolicy::HoldAndDrain if v.reserving > 0 || v.admitted > 0 => {
            Err(format!("Kueue is evicting what it admitted: {} reserving, {} admitted", v.reserving, v.admitted))
        }
        _ => Ok(()),
    }
}

pub(crate) async fn queue_op<T: Target>(t: &mut T, run: &mut Run<'_>, q: &QueuePlan) -> Step<String> {
    let queue = q.queue.as_str();
    let want = q.policy.as_str();
    let read = |r: Result<Option<QueueView>, crate::ops::target::ReadFailure>| match r {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err(Stop::Failed(format!("ClusterQueue {queue} is gone; nothing was changed"))),
        Err(f) => Err(Stop::Failed(format!("{}; nothing was changed", f.message))),
    };
    let now = read(t.read_queue(run, queue).await?)?;
    let have = if now.stop_policy.is_empty() { "None" } else { now.stop_policy.as_str() };
    if have == want {
        run.step(format!("ClusterQueue {queue} has stopPolicy {want} already")).await?;
    } else {
        if let Err(why) = t.set_stop_policy(run, queue, q.policy).await? {
            return Err(Stop::Failed(format!("{why}; nothing was changed")));
        }
        run.step(format!("ClusterQueue {queue}: stopPolicy {have} → {want}")).await?;
    }
    let started = t.clock_ms();
    loop {
        match t.read_queue(run, queue).await? {
            Ok(Some(v)) => match answered(&v, q.policy) {
                Ok(()) => break,
                Err(why) if t.clock_ms() >= run.deadline_ms => {
                    let waited = secs(std::time::Duration::from_millis(t.clock_ms().saturating_sub(started)));
                    return Err(Stop::Failed(format!(
                        "after {waited}: {why}; stopPolicy {want} stays written (is Kueue's controller running?)"
                    )));
                }
                Err(why) => run.blocked(format!("waiting for Kueue: {why}")).await?,
            },
            Ok(None) => return Err(Stop::Failed(format!("ClusterQueue {queue} is gone"))),
            Err(f) if f.transient && t.clock_ms() < run.deadline_ms => {
                run.log(format!("could not read ClusterQueue {queue} ({}); looking again", f.why)).await?;
            }
            Err(f) => return Err(Stop::Failed(f.message)),
        }
        let poll = run.opts.poll;
        run.sleep(t, poll).await?;
    }
    let outcome = match q.policy {
        StopPolicy::None => format!("ClusterQueue {queue} resumed: Kueue reports it Active"),
        StopPolicy::Hold => format!("ClusterQueue {queue} held: Kueue reports it Stopped and admits nothing more"),
        StopPolicy::HoldAndDrain => {
            format!("ClusterQueue {queue} held and drained: Kueue reports it Stopped with no workload admitted")
        }
    };
    run.step(outcome.clone()).await?;
    Ok(outcome)
}
