//! The cluster's calls: each try bounded by the call timeout, transient failures retried
//! with backoff within the operation's deadline, every retry logged (op log and audit), and
//! every mutating call recorded as `sending` before it goes out.

use std::time::Instant;

use super::super::exec::{Run, Step, secs};
use super::super::retry::{self, Transient};

/// The Kubernetes target: the client its calls go through.
pub struct Kube {
    pub client: kube::Client,
}

/// The monotonic clock of the cluster target: ms since the first look at it.
pub(super) fn clock_ms() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

impl Kube {
    /// One API call (`f` makes a fresh request each try), each try bounded by the call
    /// timeout; failures `transient` calls transient are retried with backoff, each retry
    /// logged (op log and audit), never past the operation's deadline. Only idempotent calls
    /// come here. The inner result is the call's last answer.
    pub(crate) async fn call<T, F, Fut>(
        &self,
        run: &mut Run<'_>,
        what: &str,
        transient: fn(&kube::Error) -> Option<Transient>,
        mut f: F,
    ) -> Step<Result<T, kube::Error>>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, kube::Error>>,
    {
        let (limit, backoff) = (run.opts.call_timeout, run.opts.backoff);
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
                run.log(format!("{what}: {} — gave up after {attempt} tries", t.why)).await?;
                return Ok(Err(e));
            };
            if clock_ms() + wait.as_millis() as u64 >= run.deadline_ms {
                run.log(format!("{what}: {} — no time left before the operation's deadline", t.why)).await?;
                return Ok(Err(e));
            }
            run.log(format!(
                "{what}: {} — retrying in {}ms (try {} of {})",
                t.why,
                wait.as_millis(),
                attempt + 1,
                backoff.attempts
            ))
            .await?;
            run.wait(tokio::time::sleep(wait)).await?;
        }
    }

    /// A mutating call: recorded as `sending` before it goes out (so a call in flight when
    /// the cockpit dies is in the log), then [`Kube::call`].
    pub(crate) async fn mutate<T, F, Fut>(
        &self,
        run: &mut Run<'_>,
        what: &str,
        transient: fn(&kube::Error) -> Option<Transient>,
        f: F,
    ) -> Step<Result<T, kube::Error>>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, kube::Error>>,
    {
        run.sending(what)?;
        self.call(run, what, transient, f).await
    }
}
