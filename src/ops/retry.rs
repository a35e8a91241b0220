//! Which API failures are worth trying again, and how long to wait before the next try.
//!
//! A long operation (a drain, a 30-minute mig-manager wait) must not end on one 503, a reset
//! connection or an API Priority-and-Fairness 429. Those are transient: the same idempotent
//! call (GET, LIST, a merge patch to a fixed value, a conditional replace, an eviction with a
//! uid precondition) is sent again after a bounded, jittered exponential backoff. Everything
//! else (403, 404, 409, a PodDisruptionBudget's 429, bad input) is an answer, not a hiccup.

use std::time::Duration;

/// A failure that another try may not meet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transient {
    /// For the op log: "503 ServiceUnavailable: etcd leader changed", "connection reset".
    pub why: String,
    /// What the server asked for (Status `details.retryAfterSeconds`), when it said.
    pub retry_after: Option<Duration>,
}

/// Whether a 429 is a PodDisruptionBudget refusing an eviction (kubectl waits those out on
/// its own schedule, and so does the drain) rather than the server shedding load.
pub fn is_pdb_refusal(s: &kube::core::Status) -> bool {
    s.code == 429 && s.details.as_ref().is_some_and(|d| d.causes.iter().any(|c| c.reason == "DisruptionBudget"))
}

/// The transient failures of any call. API Priority and Fairness answers 429 with a
/// plain-text body ("Too many requests, please try again later.") and a Retry-After header;
/// kube keeps only the code and the text, so a 429 that is not a PDB refusal is load.
pub fn transient(e: &kube::Error) -> Option<Transient> {
    match e {
        kube::Error::Api(s) => {
            let retry_after = s
                .details
                .as_ref()
                .map(|d| d.retry_after_seconds)
                .filter(|s| *s > 0)
                .map(|s| Duration::from_secs(s.into()));
            let text = if s.message.is_empty() { s.reason.clone() } else { s.message.clone() };
            match s.code {
                429 if is_pdb_refusal(s) => None,
                429 => Some(Transient {
                    why: format!("429 too many requests (API priority and fairness): {text}"),
                    retry_after,
                }),
                500 | 502 | 503 | 504 => Some(Transient { why: format!("{} {}", s.code, text), retry_after }),
                _ => None,
            }
        }
        // The connection broke (reset, closed before the answer, refused while the server
        // restarts) or timed out below us: nothing was answered.
        kube::Error::HyperError(e) => Some(Transient { why: format!("connection: {e}"), retry_after: None }),
        kube::Error::Service(e) => Some(Transient { why: format!("connection: {e}"), retry_after: None }),
        _ => None,
    }
}

/// An eviction's transient failures: a 500 there means the pod has more than one
/// PodDisruptionBudget (a misconfiguration kubectl reports), so it is not retried.
pub fn transient_eviction(e: &kube::Error) -> Option<Transient> {
    match e {
        kube::Error::Api(s) if s.code == 500 => None,
        _ => transient(e),
    }
}

/// Bounded exponential backoff with jitter: try `n` (1-based) waits a random time in
/// `[d/2, d]` with `d = base · 2^(n-1)` capped at `cap`; a server's Retry-After is honoured up
/// to `cap`. At most `attempts` tries in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
    pub attempts: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        // 0.25 + 0.5 + 1 + 2 + 4 + 8 + 10 s: about 26 s of trouble at most per call.
        Backoff { base: Duration::from_millis(250), cap: Duration::from_secs(10), attempts: 8 }
    }
}

impl Backoff {
    /// The wait before try `attempt + 1`, after try `attempt` (1-based) failed with `t`;
    /// `None` when the tries are used up. `jitter` in `[0, 1]`.
    pub fn delay(&self, attempt: u32, t: &Transient, jitter: f64) -> Option<Duration> {
        if attempt >= self.attempts {
            return None;
        }
        if let Some(asked) = t.retry_after {
            return Some(asked.min(self.cap));
        }
        let exp = self.base.saturating_mul(1u32 << attempt.saturating_sub(1).min(20)).min(self.cap);
        let j = jitter.clamp(0.0, 1.0);
        Some(exp.mul_f64(0.5 + 0.5 * j))
    }
}

/// A fresh random number in `[0, 1]` for the jitter, without a dependency: std's hasher
/// keys are random per process.
pub fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;
    use serde_json::json;

    fn api(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(Status::failure(message, reason).with_code(code).boxed())
    }

    #[test]
    fn load_and_server_trouble_are_transient() {
        for code in [500, 502, 503, 504] {
            assert!(transient(&api(code, "ServiceUnavailable", "etcd leader changed")).is_some(), "{code}");
        }
        // APF's plain-text 429, as kube reconstructs it.
        let apf = api(429, "Failed to parse error data", "Too many requests, please try again later.");
        let t = transient(&apf).expect("APF 429 is load");
        assert!(t.why.contains("priority and fairness"), "{t:?}");
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "connection reset by peer");
        assert!(transient(&kube::Error::Service(Box::new(io))).is_some());
    }

    #[test]
    fn answers_are_not_retried() {
        for code in [400, 401, 403, 404, 409, 410, 422] {
            assert_eq!(transient(&api(code, "x", "y")), None, "{code}");
        }
        // The body an eviction refused by a PDB gets (protocols.md §9).
        let pdb: Status = serde_json::from_value(json!({"kind": "Status", "status": "Failure", "code": 429,
            "reason": "TooManyRequests",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "details": {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget needs 2 healthy pods"}]}}))
        .expect("status");
        let pdb = kube::Error::Api(pdb.boxed());
        assert_eq!(transient(&pdb), None, "a PDB's 429 is the drain's to wait out, not load");
        assert_eq!(transient_eviction(&api(500, "InternalError", "more than one PodDisruptionBudget")), None);
        assert!(transient_eviction(&api(503, "ServiceUnavailable", "")).is_some());
        assert_eq!(transient(&kube::Error::LinesCodecMaxLineLengthExceeded), None);
    }

    #[test]
    fn retry_after_is_read_from_the_status() {
        let s: Status = serde_json::from_value(json!({"kind": "Status", "code": 429, "reason": "TooManyRequests",
            "message": "slow down", "details": {"retryAfterSeconds": 3}}))
        .expect("status");
        let t = transient(&kube::Error::Api(s.boxed())).expect("transient");
        assert_eq!(t.retry_after, Some(Duration::from_secs(3)));
        let b = Backoff::default();
        assert_eq!(b.delay(1, &t, 0.0), Some(Duration::from_secs(3)));
        let long = Transient { why: String::new(), retry_after: Some(Duration::from_secs(600)) };
        assert_eq!(b.delay(1, &long, 0.0), Some(b.cap), "a server's wish is capped");
    }

    #[test]
    fn backoff_grows_is_jittered_capped_and_bounded() {
        let b = Backoff { base: Duration::from_millis(100), cap: Duration::from_secs(1), attempts: 6 };
        let t = Transient { why: String::new(), retry_after: None };
        assert_eq!(b.delay(1, &t, 1.0), Some(Duration::from_millis(100)));
        assert_eq!(b.delay(1, &t, 0.0), Some(Duration::from_millis(50)));
        assert_eq!(b.delay(2, &t, 1.0), Some(Duration::from_millis(200)));
        assert_eq!(b.delay(3, &t, 1.0), Some(Duration::from_millis(400)));
        assert_eq!(b.delay(5, &t, 1.0), Some(Duration::from_secs(1)), "capped");
        assert_eq!(b.delay(6, &t, 1.0), None, "six tries in all");
        let total: Duration = (1..b.attempts).filter_map(|a| b.delay(a, &t, 1.0)).sum();
        assert!(total <= b.cap * b.attempts, "{total:?}");
        for _ in 0..100 {
            let j = jitter();
            assert!((0.0..=1.0).contains(&j), "{j}");
        }
    }
}
