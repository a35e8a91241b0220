//! How a watch waits before it tries again after the API server stopped answering: 250 ms,
//! doubling to at most 2 s, each wait stretched by a random share of itself (up to twice:
//! many watches do not retry in step), and back to 250 ms on the first answer. kube-rs's
//! default grows to 30 s and only resets 120 s after its last wait, so a cockpit that lived
//! through a 40 s outage took another 30 s or more to see the server again; with this one it
//! is live within a few seconds of the server answering. The cost while the server is away
//! is one request per watch every 2–4 s.

use std::time::Duration;

const FIRST: Duration = Duration::from_millis(250);
const MAX: Duration = Duration::from_secs(2);

#[derive(Clone, Debug)]
pub struct Reconnect {
    next: Duration,
    /// A share in `[0, 1]` per wait; a fresh random one unless a test fixes it.
    jitter: fn() -> f64,
}

impl Default for Reconnect {
    fn default() -> Self {
        Reconnect { next: FIRST, jitter: crate::ops::retry::jitter }
    }
}

impl Iterator for Reconnect {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let d = self.next;
        self.next = (d * 2).min(MAX);
        Some(d + d.mul_f64((self.jitter)().clamp(0.0, 1.0)))
    }
}

impl kube::runtime::utils::Backoff for Reconnect {
    fn reset(&mut self) {
        self.next = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::utils::Backoff;

    #[test]
    fn waits_grow_to_two_seconds_stretched_by_jitter_and_reset_on_an_answer() {
        let mut b = Reconnect { jitter: || 0.0, ..Default::default() };
        let waits: Vec<u128> = b.by_ref().take(6).map(|d| d.as_millis()).collect();
        assert_eq!(waits, [250, 500, 1000, 2000, 2000, 2000]);
        b.reset();
        assert_eq!(b.next(), Some(FIRST));
        let mut most = Reconnect { jitter: || 1.0, ..Default::default() };
        assert_eq!(most.nth(10), Some(MAX * 2), "never more than twice the cap");
        let mut wild = Reconnect { jitter: || 7.0, ..Default::default() };
        assert_eq!(wild.next(), Some(FIRST * 2), "a share out of range is clamped");
    }
}
