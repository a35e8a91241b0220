//! Watch-lists that start from a consistent read (KEP-3157), as client-go's reflector makes
//! them: `sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan` and **no**
//! `resourceVersion`. The API server then streams every object from its watch cache once the
//! cache has caught up with etcd as of the request, marks the end with a bookmark
//! (`k8s.io/initial-events-end`), and goes on as a watch.
//!
//! kube-rs 5.0's `streaming_lists()` sends the same request with `resourceVersion=0`: "any
//! version", i.e. whatever the watch cache holds, which may be behind a write made just
//! before (client-go asks for a consistent read; a one-shot `fabrik snapshot` taken right
//! after a change should hold it). That was first suspected for a CI run whose snapshot put
//! a vCluster's namespace in a tenant of its own; the cause turned out to be the translator
//! (the vCluster pod listed before its namespace; fixed there), but the consistent read
//! stays: it is what client-go does, and `kube_e2e` holds it to it. The event types and
//! errors are kube-rs's, so the translator and the retries are shared with the paged
//! strategy.
//!
//! After the initial events: objects as `Apply`/`Delete`; when the server ends the watch
//! (its timeout), a new watch from the last version seen, without initial events; a 410
//! (that version is gone) starts a new watch-list, which the translator takes as a re-list.

use std::fmt::Debug;
use std::time::Duration;

use futures::stream::{BoxStream, Stream, StreamExt};
use kube::api::{Api, WatchEvent, WatchParams};
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;

/// The annotation on the bookmark that closes the initial events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// How long past the server's own timeout a silent watch is taken for a dead connection.
const IDLE_MARGIN: Duration = Duration::from_secs(5);

type Watch<K> = BoxStream<'static, kube::Result<WatchEvent<K>>>;

enum State<K> {
    /// Start a watch-list (first, after a 410, or after one that ended before its end mark).
    Start,
    /// The initial events are arriving.
    Initial(Watch<K>),
    /// Listed; the server ended the watch: watch again from this version.
    Resume(String),
    /// Watching, at this version.
    Watching(String, Watch<K>),
}

/// The events of `api` (with `base`'s selectors and timeout): `Init`, one `InitApply` per
/// object, `InitDone`, then `Apply`/`Delete`; errors as kube-rs's watcher gives them, after
/// which the next poll tries again (the caller's backoff sets the pace).
pub fn watch_list<K>(
    api: Api<K>,
    base: &watcher::Config,
) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + use<K>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let params = WatchParams {
        label_selector: base.label_selector.clone(),
        field_selector: base.field_selector.clone(),
        timeout: base.timeout,
        bookmarks: true,
        send_initial_events: false,
    };
    futures::stream::unfold((api, params, State::Start), |(api, params, mut state)| async move {
        loop {
            let (out, next) = step(&api, &params, state).await;
            state = next;
            if let Some(out) = out {
                return Some((out, (api, params, state)));
            }
        }
    })
}

/// The next item of `s`, or `None` when it ends or stays silent past the server's timeout.
async fn next<K>(s: &mut Watch<K>, timeout: Option<u32>) -> Option<kube::Result<WatchEvent<K>>> {
    let idle = Duration::from_secs(u64::from(timeout.unwrap_or(290))) + IDLE_MARGIN;
    tokio::time::timeout(idle, s.next()).await.ok().flatten()
}

type Step<K> = (Option<Result<Event<K>, watcher::Error>>, State<K>);

async fn step<K>(api: &Api<K>, params: &WatchParams, state: State<K>) -> Step<K>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    match state {
        State::Start => {
            let wp = WatchParams { send_initial_events: true, ..params.clone() };
            // kube-core writes `resourceVersion=` (empty): the server reads it as unset, i.e.
            // a consistent read.
            match api.watch(&wp, "").await {
                Ok(s) => (Some(Ok(Event::Init)), State::Initial(s.boxed())),
                Err(e) => (Some(Err(watcher::Error::WatchStartFailed(e))), State::Start),
            }
        }
        State::Initial(mut s) => match next(&mut s, params.timeout).await {
            Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => {
                (Some(Ok(Event::InitApply(o))), State::Initial(s))
            }
            // The server sends none before the end mark (KEP-3157); nothing to remove yet.
            Some(Ok(WatchEvent::Deleted(_))) => (None, State::Initial(s)),
            Some(Ok(WatchEvent::Bookmark(b))) if b.metadata.annotations.contains_key(INITIAL_EVENTS_END) => {
                (Some(Ok(Event::InitDone)), State::Watching(b.metadata.resource_version, s))
            }
            Some(Ok(WatchEvent::Bookmark(_))) => (None, State::Initial(s)),
            Some(Ok(WatchEvent::Error(status))) => {
                let next = if status.code == 410 { State::Start } else { State::Initial(s) };
                (Some(Err(watcher::Error::WatchError(status))), next)
            }
            Some(Err(e)) => (Some(Err(watcher::Error::WatchFailed(e))), State::Initial(s)),
            None => (None, State::Start),
        },
        State::Resume(rv) => match api.watch(params, &rv).await {
            Ok(s) => (None, State::Watching(rv, s.boxed())),
            Err(kube::Error::Api(status)) if status.code == 410 => {
                (Some(Err(watcher::Error::WatchStartFailed(kube::Error::Api(status)))), State::Start)
            }
            Err(e) => (Some(Err(watcher::Error::WatchStartFailed(e))), State::Resume(rv)),
        },
        State::Watching(rv, mut s) => match next(&mut s, params.timeout).await {
            Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => {
                let rv = o.meta().resource_version.clone().unwrap_or(rv);
                (Some(Ok(Event::Apply(o))), State::Watching(rv, s))
            }
            Some(Ok(WatchEvent::Deleted(o))) => {
                let rv = o.meta().resource_version.clone().unwrap_or(rv);
                (Some(Ok(Event::Delete(o))), State::Watching(rv, s))
            }
            Some(Ok(WatchEvent::Bookmark(b))) => (None, State::Watching(b.metadata.resource_version, s)),
            Some(Ok(WatchEvent::Error(status))) => {
                let next = if status.code == 410 { State::Start } else { State::Watching(rv, s) };
                (Some(Err(watcher::Error::WatchError(status))), next)
            }
            Some(Err(e)) => (Some(Err(watcher::Error::WatchFailed(e))), State::Watching(rv, s)),
            None => (None, State::Resume(rv)),
        },
    }
}

#[cfg(test)]
mod tests;
