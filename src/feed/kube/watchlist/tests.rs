//! The watch-list against a scripted HTTP server: what each request asks for, and the events
//! the feed gets from each answer.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::watcher::{self, Event};

use super::watch_list;

/// One answer: a status line and the body's lines; `hold` keeps the connection open after
/// them (a watch that goes on), else the answer ends.
struct Answer {
    status: &'static str,
    lines: Vec<String>,
    hold: bool,
}

fn ok(lines: Vec<String>, hold: bool) -> Answer {
    Answer { status: "200 OK", lines, hold }
}

fn cm(kind: &str, name: &str, rv: u32) -> String {
    format!(
        r#"{{"type":"{kind}","object":{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}}}}}}"#
    )
}

fn bookmark(rv: u32, end: bool) -> String {
    let ann = if end { r#","annotations":{"k8s.io/initial-events-end":"true"}"# } else { "" };
    format!(
        r#"{{"type":"BOOKMARK","object":{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"resourceVersion":"{rv}"{ann}}}}}}}"#
    )
}

fn read_head(s: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).is_ok_and(|n| n == 1) {
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_string()
}

fn chunk(s: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    write!(s, "{:x}\r\n", bytes.len())?;
    s.write_all(bytes)?;
    s.write_all(b"\r\n")
}

/// Serves `answers` to successive connections and records each request line.
fn serve(answers: Vec<Answer>) -> (http::Uri, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr")).parse().expect("url");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for a in answers {
            let Ok((mut s, _)) = listener.accept() else { return };
            let line = read_head(&mut s);
            log.lock().expect("log").push(line);
            let body: String = a.lines.iter().map(|l| format!("{l}\n")).collect();
            if !a.status.starts_with("200") {
                let _ = write!(
                    s,
                    "HTTP/1.1 {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    a.status,
                    body.len()
                );
                continue;
            }
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
            );
            if chunk(&mut s, body.as_bytes()).is_err() {
                return;
            }
            if a.hold {
                let mut byte = [0u8; 1];
                let _ = s.read(&mut byte);
                return;
            }
            let _ = s.write_all(b"0\r\n\r\n");
        }
    });
    (url, seen)
}

/// The query of a request line (`GET /path?query HTTP/1.1`) as pairs, undecoded.
fn query(line: &str) -> Vec<(String, String)> {
    let target = line.split(' ').nth(1).unwrap_or_default();
    let q = target.split_once('?').map(|(_, q)| q).unwrap_or_default();
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn param<'a>(q: &'a [(String, String)], key: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// What an event is, in a word and a name, for comparing sequences.
fn word(e: &Result<Event<ConfigMap>, watcher::Error>) -> String {
    let name = |c: &ConfigMap| c.metadata.name.clone().unwrap_or_default();
    match e {
        Ok(Event::Init) => "init".into(),
        Ok(Event::InitApply(c)) => format!("initapply {}", name(c)),
        Ok(Event::InitDone) => "initdone".into(),
        Ok(Event::Apply(c)) => format!("apply {}", name(c)),
        Ok(Event::Delete(c)) => format!("delete {}", name(c)),
        Err(watcher::Error::WatchError(s)) => format!("watcherror {}", s.code),
        Err(watcher::Error::WatchStartFailed(kube::Error::Api(s))) => format!("startfailed {}", s.code),
        Err(e) => format!("error {e}"),
    }
}

fn run(answers: Vec<Answer>, base: watcher::Config, n: usize) -> (Vec<String>, Vec<String>) {
    let (url, seen) = serve(answers);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let events = rt.block_on(async {
        let client = kube::Client::try_from(kube::Config::new(url)).expect("client");
        let api = kube::Api::<ConfigMap>::all(client);
        let stream = watch_list(api, &base).take(n);
        tokio::time::timeout(std::time::Duration::from_secs(20), stream.map(|e| word(&e)).collect::<Vec<_>>())
            .await
            .expect("the events arrive")
    });
    drop(rt);
    let seen = seen.lock().expect("log").clone();
    (events, seen)
}

#[test]
fn a_watch_list_starts_consistent_resumes_from_its_last_version_and_relists_after_410() {
    let gone = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 9 (20)","reason":"Expired","code":410}}"#;
    let answers = vec![
        ok(
            vec![
                cm("ADDED", "a", 5),
                cm("ADDED", "b", 6),
                bookmark(7, true),
                cm("MODIFIED", "a", 8),
                bookmark(9, false),
            ],
            false,
        ),
        ok(vec![cm("DELETED", "b", 10), gone.to_string()], false),
        ok(vec![cm("ADDED", "c", 21), bookmark(21, true)], true),
    ];
    let (events, seen) = run(answers, watcher::Config::default().labels("app=x"), 10);
    assert_eq!(
        events,
        [
            "init",
            "initapply a",
            "initapply b",
            "initdone",
            "apply a",
            "delete b",
            "watcherror 410",
            "init",
            "initapply c",
            "initdone",
        ]
        .map(String::from)
        .to_vec(),
        "requests: {seen:?}"
    );
    assert_eq!(seen.len(), 3, "{seen:?}");
    for (i, line) in seen.iter().enumerate() {
        let q = query(line);
        assert_eq!(param(&q, "watch"), Some("true"), "{line}");
        assert_eq!(param(&q, "allowWatchBookmarks"), Some("true"), "{line}");
        assert_eq!(param(&q, "labelSelector"), Some("app%3Dx"), "{line}");
        if i == 1 {
            // The server ended the first watch: resume where it left off, no initial events.
            assert_eq!(param(&q, "resourceVersion"), Some("9"), "{line}");
            assert_eq!(param(&q, "sendInitialEvents"), None, "{line}");
        } else {
            // A watch-list: a consistent read (no resourceVersion), never "0" (any version).
            assert_eq!(param(&q, "sendInitialEvents"), Some("true"), "{line}");
            assert_eq!(param(&q, "resourceVersionMatch"), Some("NotOlderThan"), "{line}");
            assert_eq!(param(&q, "resourceVersion").unwrap_or_default(), "", "{line}");
        }
    }
}

#[test]
fn a_server_without_watch_lists_refuses_the_first_watch_and_is_told_apart() {
    let refusal = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled","reason":"Invalid","code":422}"#;
    let answers = vec![Answer { status: "422 Unprocessable Entity", lines: vec![refusal.to_string()], hold: false }];
    let (url, _seen) = serve(answers);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let first = rt.block_on(async {
        let client = kube::Client::try_from(kube::Config::new(url)).expect("client");
        let mut stream = Box::pin(watch_list(kube::Api::<ConfigMap>::all(client), &watcher::Config::default()));
        stream.next().await
    });
    let first = first.expect("an item");
    assert_eq!(word(&first), "startfailed 422");
    let Err(e) = first else { unreachable!("checked above") };
    assert!(super::super::refuses_watch_list(&e));
}
