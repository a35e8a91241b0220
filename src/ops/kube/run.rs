//! One running operation on the cluster: its progress, its audit trail, retries of its API
//! calls within its deadline, and its cancel switch.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::super::Plan;
use super::super::audit::Phase;
use super::super::cordon::CordonMark;
use super::super::retry::{self, Transient};
use super::super::runner::Progress;
use super::{KubeExec, secs};
use crate::model::{Delta, OpProgress};

pub(crate) enum Stop {
    Cancelled,
    Failed(String),
}

pub(crate) type Step<T> = Result<T, Stop>;

/// One running operation: its audit trail and its progress.
pub(crate) struct Run<'a> {
    pub(crate) ex: &'a KubeExec,
    pub(crate) id: u64,
    pub(crate) plan: &'a Plan,
    pub(crate) progress: Progress,
    pub(crate) cancel: watch::Receiver<bool>,
    pub(crate) blocked_on: Option<String>,
    /// Where the operation is (its last step, the call being sent, what it waits for), for
    /// the record written when the cockpit stops under it.
    pub(crate) at: Arc<Mutex<String>>,
    /// The operation's overall deadline: no retry is started past it.
    pub(crate) deadline: Instant,
    /// The node's cordon before this operation touched it (set by the cordon step).
    pub(crate) cordon_before: Option<(bool, Option<CordonMark>)>,
}

impl Run<'_> {
    pub(crate) async fn send(&self, d: OpProgress) {
        let _ = self.ex.out.send(vec![Delta::Op(d)]).await;
    }

    pub(crate) fn audit(&self, phase: Phase, msg: &str) -> Step<()> {
        self.ex.audit.record(self.id, self.plan, phase, msg).map_err(|e| {
            Stop::Failed(format!("{e}; stopped after {} of {} steps", self.progress.done, self.progress.total))
        })
    }

    pub(crate) fn set_at(&self, what: &str) {
        if let Ok(mut at) = self.at.lock() {
            what.clone_into(&mut at);
        }
    }

    /// Written before a mutating API call goes out, so a call in flight when the cockpit
    /// stops (or dies) is in the log; `at` says what it was.
    pub(crate) fn sending(&self, what: &str) -> Step<()> {
        self.audit(Phase::Sending, what)?;
        self.set_at(&format!("sending: {what}"));
        Ok(())
    }

    pub(crate) async fn step(&mut self, msg: String) -> Step<()> {
        self.audit(Phase::Step, &msg)?;
        self.set_at(&format!("after: {msg}"));
        self.blocked_on = None;
        let step = self.progress.step(msg);
        self.send(step).await;
        Ok(())
    }

    pub(crate) async fn log(&mut self, msg: String) -> Step<()> {
        self.audit(Phase::Log, &msg)?;
        self.send(OpProgress::Log { id: self.id, line: msg }).await;
        Ok(())
    }

    /// Reported (and audited) once per distinct reason.
    pub(crate) async fn blocked(&mut self, msg: String) -> Step<()> {
        if self.blocked_on.as_deref() == Some(msg.as_str()) {
            return Ok(());
        }
        self.audit(Phase::Blocked, &msg)?;
        self.set_at(&format!("waiting: {msg}"));
        self.blocked_on = Some(msg.clone());
        self.send(OpProgress::Blocked { id: self.id, reason: msg }).await;
        Ok(())
    }

    /// Sleeps unless cancelled first.
    pub(crate) async fn sleep(&mut self, d: Duration) -> Step<()> {
        if *self.cancel.borrow() {
            return Err(Stop::Cancelled);
        }
        tokio::select! {
            _ = tokio::time::sleep(d) => Ok(()),
            r = self.cancel.changed() => match r {
                // The cockpit stopped serving operations (a context switch): stop here,
                // recorded as cancelled.
                Err(_) => Err(Stop::Cancelled),
                Ok(()) if *self.cancel.borrow() => Err(Stop::Cancelled),
                Ok(()) => Ok(()),
            },
        }
    }

    pub(crate) fn check_cancel(&self) -> Step<()> {
        if *self.cancel.borrow() { Err(Stop::Cancelled) } else { Ok(()) }
    }

    /// One API call (`f` makes a fresh request each try), each try bounded by the call
    /// timeout; failures `transient` calls transient are retried with backoff, each retry
    /// logged (op log and audit), never past the operation's deadline. Only idempotent calls
    /// come here. The inner result is the call's last answer.
    pub(crate) async fn call<T, F, Fut>(
        &mut self,
        what: &str,
        transient: fn(&kube::Error) -> Option<Transient>,
        mut f: F,
    ) -> Step<Result<T, kube::Error>>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, kube::Error>>,
    {
        let (limit, backoff) = (self.ex.opts.call_timeout, self.ex.opts.backoff);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let e = match tokio::time::timeout(limit, f()).await {
                Ok(Ok(v)) => return Ok(Ok(v)),
                Ok(Err(e)) => e,
                Err(_) => kube::Error::Service(Box::new(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {}", secs(limit)),
                ))),
            };
            let Some(t) = transient(&e) else { return Ok(Err(e)) };
            let Some(wait) = backoff.delay(attempt, &t, retry::jitter()) else {
                self.log(format!("{what}: {} — gave up after {attempt} tries", t.why)).await?;
                return Ok(Err(e));
            };
            if Instant::now() + wait >= self.deadline {
                self.log(format!("{what}: {} — no time left before the operation's deadline", t.why)).await?;
                return Ok(Err(e));
            }
            self.log(format!(
                "{what}: {} — retrying in {}ms (try {} of {})",
                t.why,
                wait.as_millis(),
                attempt + 1,
                backoff.attempts
            ))
            .await?;
            self.sleep(wait).await?;
        }
    }

    /// A mutating call: recorded as `sending` before it goes out (so a call in flight when
    /// the cockpit dies is in the log), then [`Run::call`].
    pub(crate) async fn mutate<T, F, Fut>(
        &mut self,
        what: &str,
        transient: fn(&kube::Error) -> Option<Transient>,
        f: F,
    ) -> Step<Result<T, kube::Error>>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, kube::Error>>,
    {
        self.sending(what)?;
        self.call(what, transient, f).await
    }

    /// The mark this operation writes with its cordon.
    pub(crate) fn cordon_mark(&self) -> CordonMark {
        CordonMark::new(
            &self.ex.audit.op_key(self.id),
            self.plan.kind.name(),
            &self.ex.audit.user,
            &super::super::audit::rfc3339(crate::now_ms()),
        )
    }
}
