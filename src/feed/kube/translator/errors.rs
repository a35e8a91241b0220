//! A watch's failure, in words: not served (404: said once, quietly for Cluster API's other
//! kinds), forbidden (403: stale until allowed), anything else (reconnecting with backoff);
//! one event per change of state, not per retry.

use super::super::Kind;
use super::Translator;
use crate::model::{Delta, EventSpec, FeedState, Severity, Ts};

impl Translator {
    pub(super) fn error(&mut self, kind: Kind, code: Option<u16>, reason: String, now: Ts, out: &mut Vec<Delta>) {
        // Cluster API's other kinds not served: the Machines' feed said it once.
        if code == Some(404) && matches!(kind, Kind::Capi(_)) {
            self.feed_errors.insert(kind, String::new());
            self.mark_synced(kind, out);
            return;
        }
        let (severity, text, state) = match code {
            Some(404) => (
                Severity::Info,
                format!("{} are not served by this API server; that part of the cockpit stays empty", kind.name()),
                None,
            ),
            Some(403) => (
                Severity::Warning,
                format!(
                    "not allowed to watch {}: {reason}. Ask for list/watch on {} (kubectl auth can-i watch {}); \
                     shown as stale until then",
                    kind.name(),
                    kind.name(),
                    kind.name()
                ),
                Some(FeedState::Stale { since: now, reason: format!("forbidden: {reason}") }),
            ),
            _ => (
                Severity::Warning,
                format!("watch of {} failed, retrying with backoff: {reason}", kind.name()),
                Some(FeedState::Reconnecting { since: now, reason: reason.clone() }),
            ),
        };
        // Trouble that goes on keeps the time it began, whatever the next error says.
        let since = *self.trouble_since.entry(kind).or_insert(now);
        let state = state.map(|s| match s {
            FeedState::Reconnecting { reason, .. } => FeedState::Reconnecting { since, reason },
            FeedState::Stale { reason, .. } => FeedState::Stale { since, reason },
            FeedState::Live => FeedState::Live,
        });
        // One message per change of state, not one per retry.
        if self.feed_errors.get(&kind) == Some(&text) {
            return;
        }
        self.feed_errors.insert(kind, text.clone());
        out.push(Delta::Event(EventSpec {
            ts: now,
            severity,
            reason: if code == Some(404) { "NotServed".into() } else { "FeedError".into() },
            object: format!("feed/{}", kind.name()),
            message: text,
        }));
        match state {
            Some(state) => {
                // Keep an earlier `since` while the same trouble goes on.
                out.push(Delta::Feed { source: kind.name().into(), state });
            }
            None => {
                self.feed_errors.insert(kind, String::new());
                // Not served (now): no longer reconnecting either; live again if it answers.
                out.push(Delta::FeedRemove(kind.name().into()));
            }
        }
        // A kind the server does not have or will not show still counts as listed: the
        // cockpit shows what it has instead of "loading" forever.
        if matches!(code, Some(403 | 404)) {
            self.mark_synced(kind, out);
        }
    }
}
