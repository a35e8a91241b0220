//! The simulated kubelets' container logs. The API server answers `pods/log` (kubectl logs,
//! fabrik's logs pane) by proxying to the pod's kubelet at `/containerLogs/{ns}/{pod}/{c}`;
//! `fabrik sim` serves that for every simulated node on one local TLS port, which each Node
//! names as its kubelet endpoint (InternalDNS `localhost`, `daemonEndpoints`). The text is made
//! from the container's run (its start and end in the pod's status) and its pod's name, one
//! line every two seconds of the run, so two clients asking for the same range read the same
//! bytes: follow, previous, timestamps, tailLines, sinceSeconds, sinceTime and limitBytes
//! behave as the kubelet's do.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::mpsc;
use tokio_rustls::rustls;

use super::kubelet::hash;

/// The host name every simulated node gives as its InternalDNS address: where the API server
/// finds its kubelet (the test control plane prefers InternalDNS; see tests/controlplane).
pub const HOST: &str = "localhost";

/// A container writes a line this often (ms).
const EVERY_MS: i64 = 2_000;

use crate::agent::server::Body;

/// What the kubelet answers logs as.
const TEXT: &str = "text/plain; charset=utf-8";

/// One run of a container: when it started and, once it ended, when and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub start_ms: i64,
    pub end: Option<(i64, i32)>,
}

/// What a container does, guessed from its pod's name, so its log reads like one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavour {
    Train,
    Serve,
    Notebook,
    Other,
}

fn flavour(pod: &str) -> Flavour {
    let has = |w: &[&str]| w.iter().any(|w| pod.contains(w));
    if has(&["train", "finetune", "pretrain", "sft", "lora"]) {
        Flavour::Train
    } else if has(&["serve", "infer", "vllm", "triton", "llm", "api"]) {
        Flavour::Serve
    } else if has(&["notebook", "jupyter", "nb-"]) {
        Flavour::Notebook
    } else {
        Flavour::Other
    }
}

/// The line a container writes at tick `n` of its run (tick 0 at its start).
fn line(f: Flavour, key: &str, n: i64) -> String {
    let h = hash(&[key, &n.to_string()]);
    let pct = |m: u64| h % m;
    if n == 0 {
        return match f {
            Flavour::Train => "INFO  loading checkpoint shards from /ckpt (8 of 8), world size 8".into(),
            Flavour::Serve => "INFO  model loaded; serving on 0.0.0.0:8000 (max_num_seqs=256)".into(),
            Flavour::Notebook => "[I ServerApp] Jupyter Server 2.14.2 is running at http://0.0.0.0:8888/lab".into(),
            Flavour::Other => "INFO  starting; CUDA_VISIBLE_DEVICES set by the device plugin".into(),
        };
    }
    match f {
        Flavour::Train => {
            let loss = 3.2 - (n as f64).ln() * 0.21 + (pct(100) as f64) / 1000.0;
            format!(
                "INFO  step {n:>6}  loss {loss:.4}  lr 3.0e-04  grad_norm {:.2}  tokens/s {}  gpu_mem {}.{} GiB",
                0.8 + pct(40) as f64 / 100.0,
                17_000 + pct(2_000),
                60 + pct(8),
                pct(10)
            )
        }
        Flavour::Serve => format!(
            "INFO  \"POST /v1/chat/completions HTTP/1.1\" {} {} ms  prompt_tokens={} completion_tokens={}",
            if pct(50) == 0 { 503 } else { 200 },
            80 + pct(900),
            50 + pct(2_000),
            1 + pct(400)
        ),
        Flavour::Notebook => {
            if pct(4) == 0 {
                format!("[I ServerApp] Saving file at /work/eval-{}.ipynb", pct(9))
            } else {
                "[I ServerApp] kernel 3f2c idle".to_string()
            }
        }
        Flavour::Other => format!("INFO  batch {n} done in {} ms", 200 + pct(800)),
    }
}

/// The lines a run that ended with `code` writes as it ends.
fn last_words(f: Flavour, code: i32) -> Vec<String> {
    match code {
        0 => vec!["INFO  done; exiting 0".into()],
        137 => vec!["WARN  received SIGTERM; saving state".into()],
        _ if f == Flavour::Notebook => vec!["[C ServerApp] received signal 15, stopping".into()],
        _ => vec![
            "Traceback (most recent call last):".into(),
            "  File \"/app/main.py\", line 212, in forward".into(),
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity \
             of 79.10 GiB of which 1.06 GiB is free."
                .into(),
            format!("ERROR exiting with code {code}"),
        ],
    }
}

/// The log of `run` up to `until` (ms), as (time, text): a line per tick, then the last
/// words if the run ended by then.
pub fn lines(pod: &str, container: &str, run: &Run, until: i64) -> Vec<(i64, String)> {
    let mut out = ticks_since(pod, container, run, 0, until);
    if let Some((end, code)) = run.end
        && end <= until
    {
        out.extend(last_words(flavour(pod), code).into_iter().map(|l| (end, l)));
    }
    out
}

/// How many tick lines `run` has written by `until`.
pub fn ticks(run: &Run, until: i64) -> i64 {
    let stop = run.end.map_or(until, |(end, _)| end.min(until));
    if stop < run.start_ms { 0 } else { (stop - run.start_ms) / EVERY_MS + 1 }
}

/// The tick lines `from..` that `run` has written by `until` (what a follower has not read).
pub fn ticks_since(pod: &str, container: &str, run: &Run, from: i64, until: i64) -> Vec<(i64, String)> {
    let (f, key) = (flavour(pod), format!("{pod}/{container}/{}", run.start_ms));
    (from..ticks(run, until)).map(|n| (run.start_ms + n * EVERY_MS, line(f, &key, n))).collect()
}

fn ms(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> i64 {
    t.0.as_millisecond()
}

/// The container's current run (or, waiting to be restarted, the run that ended), or why it
/// has none (the kubelet's words).
pub fn current_run(pod: &str, s: &ContainerStatus) -> Result<Run, String> {
    let state = s.state.as_ref();
    if let Some(r) = state.and_then(|s| s.running.as_ref()) {
        return r.started_at.as_ref().map(|t| Run { start_ms: ms(t), end: None }).ok_or_else(|| not_started(pod, s));
    }
    // Waiting to be restarted (CrashLoopBackOff): the kubelet reads the run that ended, as
    // it is the container's latest.
    if state.is_some_and(|s| s.waiting.is_some())
        && let Ok(last) = previous_run(pod, s)
    {
        return Ok(last);
    }
    if let Some(t) = state.and_then(|s| s.terminated.as_ref()) {
        let start = t.started_at.as_ref().map(ms);
        let end = t.finished_at.as_ref().map(ms);
        if let (Some(start_ms), Some(end)) = (start, end) {
            return Ok(Run { start_ms, end: Some((end, t.exit_code)) });
        }
    }
    Err(not_started(pod, s))
}

fn not_started(pod: &str, s: &ContainerStatus) -> String {
    let reason = s.state.as_ref().and_then(|s| s.waiting.as_ref()).and_then(|w| w.reason.clone());
    format!(
        "container {:?} in pod {pod:?} is waiting to start: {}",
        s.name,
        reason.as_deref().unwrap_or("ContainerCreating")
    )
}

/// The container's previous run (`lastState.terminated`), or the kubelet's refusal.
pub fn previous_run(pod: &str, s: &ContainerStatus) -> Result<Run, String> {
    let t = s.last_state.as_ref().and_then(|l| l.terminated.as_ref());
    match t.and_then(|t| Some((t.started_at.as_ref()?, t.finished_at.as_ref()?, t.exit_code))) {
        Some((a, b, code)) => Ok(Run { start_ms: ms(a), end: Some((ms(b), code)) }),
        None => Err(format!("previous terminated container {:?} in pod {pod:?} not found", s.name)),
    }
}

/// The demo's containers (no kubelet there): the current run started up to two hours before
/// `now_ms` (from the pod's name), and one pod in six crashed once on start before it.
pub fn demo_runs(pod: &str, now_ms: i64) -> (Run, Option<Run>) {
    let start_ms = now_ms - (hash(&[pod, "demo-start"]) % 7_200_000) as i64;
    let previous = hash(&[pod, "crashed-once"]).is_multiple_of(6).then_some(Run { start_ms, end: Some((start_ms, 1)) });
    (Run { start_ms, end: None }, previous)
}

/// The query a `containerLogs` request carries.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Query {
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub tail_lines: Option<usize>,
    pub limit_bytes: Option<usize>,
    /// Lines at or after this time (ms), from sinceSeconds or sinceTime.
    pub since_ms: Option<i64>,
}

impl Query {
    pub fn parse(q: &str, now_ms: i64) -> Result<Query, String> {
        let mut out = Query::default();
        for (k, v) in form_urlencoded::parse(q.as_bytes()) {
            let flag = || v == "true" || v == "1";
            let num = |what: &str| v.parse::<i64>().map_err(|_| format!("{what}: {v:?} is not a number"));
            match k.as_ref() {
                "follow" => out.follow = flag(),
                "previous" => out.previous = flag(),
                "timestamps" => out.timestamps = flag(),
                "tailLines" => out.tail_lines = Some(num("tailLines")?.max(0) as usize),
                "limitBytes" => out.limit_bytes = Some(num("limitBytes")?.max(1) as usize),
                "sinceSeconds" => out.since_ms = Some(now_ms - num("sinceSeconds")? * 1000),
                "sinceTime" => {
                    let t: jiff::Timestamp = v.parse().map_err(|e| format!("sinceTime {v:?}: {e}"))?;
                    out.since_ms = Some(t.as_millisecond());
                }
                _ => {}
            }
        }
        Ok(out)
    }
}

/// The kubelet's timestamp: RFC 3339 with nine fraction digits.
fn stamp(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.9fZ").to_string())
        .unwrap_or_else(|_| ms.to_string())
}

/// Lines as the kubelet writes them: each ended, the query's timestamps in front.
pub fn render(q: &Query, lines: &[(i64, String)]) -> String {
    let mut out = String::new();
    for (t, l) in lines {
        if q.timestamps {
            out.push_str(&stamp(*t));
            out.push(' ');
        }
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// The first answer to a request: the lines the query selects from the run up to `now`.
pub fn initial(q: &Query, pod: &str, container: &str, run: &Run, now: i64) -> String {
    let mut all = lines(pod, container, run, now);
    if let Some(since) = q.since_ms {
        all.retain(|(t, _)| *t >= since);
    }
    if let Some(n) = q.tail_lines {
        let cut = all.len().saturating_sub(n);
        all.drain(..cut);
    }
    render(q, &all)
}

/// Serves the logs of the pods in `store` on 127.0.0.1 (an ephemeral port, returned), over
/// TLS with a self-signed certificate: the API server does not verify kubelets it has no CA
/// for, as in clusters without `--kubelet-certificate-authority`.
pub async fn serve(store: Store<Pod>) -> Result<u16, String> {
    let key = rcgen::generate_simple_self_signed(vec![HOST.to_string(), "127.0.0.1".to_string()])
        .map_err(|e| format!("kubelet serving certificate: {e}"))?;
    let der = key.cert.der().clone();
    let pkcs8 = rustls::pki_types::PrivatePkcs8KeyDer::from(key.signing_key.serialize_der());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(vec![der], pkcs8.into()))
        .map_err(|e| format!("kubelet TLS: {e}"))?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener =
        tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| format!("kubelet log endpoint: {e}"))?;
    let port = listener.local_addr().map_err(|e| format!("kubelet log endpoint: {e}"))?.port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                // Out of descriptors, say: wait rather than spin.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let (acceptor, store) = (acceptor.clone(), store.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let svc = service_fn(move |req| {
                    let store = store.clone();
                    async move { Ok::<_, Infallible>(handle(&req, &store)) }
                });
                let _ = http1::Builder::new().serve_connection(TokioIo::new(tls), svc).await;
            });
        }
    });
    Ok(port)
}

fn text(status: StatusCode, body: String) -> Response<Body> {
    crate::agent::server::full(status, TEXT, body)
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

fn status_of<'a>(pod: &'a Pod, container: &str) -> Option<&'a ContainerStatus> {
    let st = pod.status.as_ref()?;
    let all = st.container_statuses.iter().flatten().chain(st.init_container_statuses.iter().flatten());
    all.into_iter().find(|s| s.name == container)
}

fn handle(req: &Request<Incoming>, store: &Store<Pod>) -> Response<Body> {
    let path: Vec<&str> = req.uri().path().trim_matches('/').split('/').collect();
    let ["containerLogs", ns, name, container] = path.as_slice() else {
        return text(StatusCode::NOT_FOUND, format!("no such endpoint: {}", req.uri().path()));
    };
    let (ns, name, container) = (ns.to_string(), name.to_string(), container.to_string());
    let now = now_ms();
    let q = match Query::parse(req.uri().query().unwrap_or(""), now) {
        Ok(q) => q,
        Err(e) => return text(StatusCode::BAD_REQUEST, e),
    };
    let Some(pod) = store.get(&ObjectRef::new(&name).within(&ns)) else {
        return text(StatusCode::NOT_FOUND, format!("pod \"{ns}/{name}\" not found"));
    };
    let Some(status) = status_of(&pod, &container) else {
        return text(
            StatusCode::BAD_REQUEST,
            format!("container {container:?} in pod {name:?} is waiting to start: ContainerCreating"),
        );
    };
    let run = if q.previous { previous_run(&name, status) } else { current_run(&name, status) };
    let run = match run {
        Ok(r) => r,
        Err(e) => return text(StatusCode::BAD_REQUEST, e),
    };
    let first = initial(&q, &name, &container, &run, now);
    if !q.follow || run.end.is_some() {
        let mut body = first.into_bytes();
        if let Some(n) = q.limit_bytes {
            body.truncate(n);
        }
        return text(StatusCode::OK, String::from_utf8_lossy(&body).into_owned());
    }
    // Follow: the lines so far, then each as it is written, until the run ends (the pod is
    // gone or the container is no longer this run) or the reader leaves.
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    let store = store.clone();
    tokio::spawn(async move {
        let mut left = q.limit_bytes.unwrap_or(usize::MAX);
        let cut = |s: String, left: &mut usize| {
            let mut b = s.into_bytes();
            b.truncate(*left);
            *left -= b.len();
            Bytes::from(b)
        };
        if tx.send(cut(first, &mut left)).await.is_err() {
            return;
        }
        let mut done = ticks(&run, now);
        while left > 0 {
            let next = run.start_ms + done * EVERY_MS;
            let wait = (next - now_ms()).max(0) as u64;
            tokio::time::sleep(Duration::from_millis(wait)).await;
            let still = store
                .get(&ObjectRef::new(&name).within(&ns))
                .and_then(|p| status_of(&p, &container).and_then(|s| current_run(&name, s).ok()));
            if still.is_none_or(|r| r.start_ms != run.start_ms || r.end.is_some()) {
                return;
            }
            let fresh = ticks_since(&name, &container, &run, done, now_ms());
            done += fresh.len() as i64;
            if !fresh.is_empty() && tx.send(cut(render(&q, &fresh), &mut left)).await.is_err() {
                return;
            }
        }
    });
    crate::agent::server::streamed(rx, TEXT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_writes_a_line_every_two_seconds_and_its_last_words() {
        let run = Run { start_ms: 10_000, end: None };
        let l = lines("llm-train-0", "main", &run, 15_999);
        assert_eq!(l.iter().map(|(t, _)| *t).collect::<Vec<_>>(), vec![10_000, 12_000, 14_000]);
        assert!(l[1].1.contains("step      1  loss"), "{}", l[1].1);
        // The same range reads the same bytes.
        assert_eq!(l, lines("llm-train-0", "main", &run, 15_999));
        let crashed = Run { start_ms: 10_000, end: Some((13_000, 1)) };
        let l = lines("llm-train-0", "main", &crashed, 99_000);
        assert_eq!(l.len(), 2 + 4);
        assert!(l.last().is_some_and(|(t, s)| *t == 13_000 && s == "ERROR exiting with code 1"));
        assert!(l.iter().any(|(_, s)| s.contains("CUDA out of memory")));
    }

    #[test]
    fn the_query_selects_as_the_kubelet_does() {
        let q = Query::parse("tailLines=2&timestamps=true&follow=true", 0).expect("query");
        assert_eq!((q.tail_lines, q.timestamps, q.follow, q.previous), (Some(2), true, true, false));
        let run = Run { start_ms: 1_764_979_200_000, end: None };
        let out = initial(&q, "vllm-serve", "main", &run, run.start_ms + 9_000);
        let rows: Vec<&str> = out.lines().collect();
        assert_eq!(rows.len(), 2);
        assert!(rows[0].starts_with("2025-12-06T00:00:06.000000000Z INFO  \"POST"), "{}", rows[0]);
        let since = Query::parse("sinceTime=2025-12-06T00%3A00%3A04Z", 0).expect("since");
        assert_eq!(initial(&since, "vllm-serve", "main", &run, run.start_ms + 9_000).lines().count(), 3);
        assert!(Query::parse("tailLines=ten", 0).is_err_and(|e| e.contains("tailLines")));
    }

    #[test]
    fn previous_needs_a_terminated_last_state() {
        let s: ContainerStatus = serde_json::from_value(serde_json::json!({
            "name": "main", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
            "state": { "running": { "startedAt": "2026-12-05T10:00:00Z" } },
        }))
        .expect("status");
        assert_eq!(current_run("p", &s).map(|r| r.end), Ok(None));
        assert_eq!(previous_run("p", &s), Err("previous terminated container \"main\" in pod \"p\" not found".into()));
        // Crash-looping: its logs are those of the run that ended; never started: refused.
        let waiting = |last: serde_json::Value| -> ContainerStatus {
            serde_json::from_value(serde_json::json!({
                "name": "main", "image": "i", "imageID": "", "ready": false, "restartCount": 2,
                "state": { "waiting": { "reason": "CrashLoopBackOff" } }, "lastState": last,
            }))
            .expect("status")
        };
        let ended = waiting(serde_json::json!({ "terminated": { "exitCode": 1,
            "startedAt": "2026-12-05T10:00:00Z", "finishedAt": "2026-12-05T10:00:03Z" } }));
        assert_eq!(current_run("p", &ended).map(|r| r.end.map(|(_, code)| code)), Ok(Some(1)));
        let never = waiting(serde_json::json!({}));
        assert!(current_run("p", &never).is_err_and(|e| e.ends_with("waiting to start: CrashLoopBackOff")));
    }
}
