//! The agent's read-only HTTP API: `/metrics`, `/v1/snapshot`, `/v1/stream`, `/healthz`.
//! One sampler thread feeds every reader (any number of readers never multiplies backend
//! calls); streams are bounded per reader and a reader that stops reading is cut off, so
//! the agent never grows without bound and keeps serving everyone else.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use super::backend::Gpus;
use super::metrics::{self, SelfStats};
use super::podres;
use super::wire::NodeSample;

type Body = BoxBody<Bytes, Infallible>;

pub const PATHS: [&str; 4] = ["/metrics", "/v1/snapshot", "/v1/stream", "/healthz"];

#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub listen: SocketAddr,
    /// Sampling interval, shared by every reader.
    pub interval: Duration,
    pub max_readers: usize,
    /// A stream reader whose buffer stays full this long is disconnected.
    pub stall_timeout: Duration,
}

/// The latest sample set, with its JSON line rendered once for every reader.
pub struct Latest {
    pub sample: Result<NodeSample, String>,
    pub json_line: Bytes,
    pub taken: Instant,
}

#[derive(Default)]
pub struct Stats {
    pub samples: AtomicU64,
    pub last_sample_nanos: AtomicU64,
    pub readers: AtomicUsize,
}

#[derive(Clone)]
pub struct Shared {
    latest: watch::Receiver<Option<Arc<Latest>>>,
    pub stats: Arc<Stats>,
}

use crate::now_ms;

/// "500ms", "2s", "1m", "1h", or plain seconds ("2"); 100 ms to 1 hour.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, unit) = match t.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => (&t[..i], &t[i..]),
        None => (t, "s"),
    };
    let n: f64 = num.parse().map_err(|_| format!("{s:?} is not an interval: use e.g. 500ms, 1s, 5s or 1m"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?} has an unknown unit {unit:?}: use ms, s, m or h")),
    };
    if !(0.1..=3600.0).contains(&secs) {
        return Err(format!("{s:?} is out of range: the interval must be between 100ms and 1h"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Starts the one sampler. Backend calls block (NVML does), so it runs on its own thread.
/// `allocations`, when given, is the kubelet's latest PodResources answer, added to each
/// sample (`allocated_to`).
pub fn spawn_sampler(
    mut backend: Box<dyn Gpus>,
    interval: Duration,
    allocations: Option<podres::Allocations>,
) -> std::io::Result<Shared> {
    let (tx, rx) = watch::channel(None);
    let stats = Arc::new(Stats::default());
    let st = stats.clone();
    std::thread::Builder::new().name("fabrik-sampler".into()).spawn(move || {
        loop {
            let started = Instant::now();
            let mut sample = backend.sample(now_ms()).map_err(|e| e.to_string());
            if let (Ok(s), Some(rows)) = (&mut sample, allocations.as_ref().and_then(podres::latest)) {
                podres::apply(s, &rows);
            }
            let mut json_line = match &sample {
                Ok(s) => serde_json::to_vec(s).unwrap_or_default(),
                Err(e) => serde_json::to_vec(&serde_json::json!({ "error": e })).unwrap_or_default(),
            };
            json_line.push(b'\n');
            st.samples.fetch_add(1, Ordering::Relaxed);
            st.last_sample_nanos.store(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
            if tx.send(Some(Arc::new(Latest { sample, json_line: Bytes::from(json_line), taken: started }))).is_err() {
                return;
            }
            std::thread::sleep(interval.saturating_sub(started.elapsed()));
        }
    })?;
    Ok(Shared { latest: rx, stats })
}

fn full(status: StatusCode, ctype: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    if let Ok(v) = ctype.parse() {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

fn error(status: StatusCode, msg: &str) -> Response<Body> {
    let body = serde_json::json!({ "error": msg, "paths": PATHS });
    full(status, "application/json", body.to_string())
}

/// Serves until the listener fails; each connection runs on its own task.
pub async fn serve(listener: TcpListener, shared: Shared, cfg: AgentConfig) -> std::io::Result<()> {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of file descriptors and the like: keep serving the others.
                eprintln!("fabrik agent: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let shared = shared.clone();
        let cfg = cfg.clone();
        tokio::spawn(async move {
            // A stream that detects a stuck reader closes the whole connection.
            let (kill_tx, mut kill_rx) = watch::channel(false);
            let kill_tx = Arc::new(kill_tx);
            let svc = service_fn(move |req| {
                let (shared, cfg, kill) = (shared.clone(), cfg.clone(), kill_tx.clone());
                async move { Ok::<_, Infallible>(handle(req, &shared, &cfg, kill)) }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(5))
                .max_buf_size(16 * 1024)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::select! {
                _ = conn => {}
                _ = kill_rx.changed() => {}
            }
        });
    }
}

fn handle(
    req: Request<Incoming>,
    shared: &Shared,
    cfg: &AgentConfig,
    kill: Arc<watch::Sender<bool>>,
) -> Response<Body> {
    if req.method() != Method::GET {
        let mut r = error(StatusCode::METHOD_NOT_ALLOWED, "the agent is read-only: only GET is served");
        if let Ok(v) = "GET".parse() {
            r.headers_mut().insert(hyper::header::ALLOW, v);
        }
        return r;
    }
    let latest = shared.latest.borrow().clone();
    match req.uri().path() {
        "/healthz" => match &latest {
            Some(l) if l.sample.is_ok() && l.taken.elapsed() < cfg.interval * 3 + Duration::from_secs(1) => {
                full(StatusCode::OK, "text/plain", "ok\n")
            }
            Some(l) => match &l.sample {
                Err(e) => full(StatusCode::SERVICE_UNAVAILABLE, "text/plain", format!("sampling fails: {e}\n")),
                Ok(_) => full(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "text/plain",
                    format!("the last sample is {:.1}s old\n", l.taken.elapsed().as_secs_f64()),
                ),
            },
            None => full(StatusCode::SERVICE_UNAVAILABLE, "text/plain", "no sample yet\n"),
        },
        "/metrics" => match latest.as_ref().map(|l| &l.sample) {
            Some(Ok(s)) => {
                let stats = SelfStats {
                    samples_total: shared.stats.samples.load(Ordering::Relaxed),
                    sample_seconds: shared.stats.last_sample_nanos.load(Ordering::Relaxed) as f64 / 1e9,
                    stream_readers: shared.stats.readers.load(Ordering::Relaxed) as u64,
                };
                full(StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", metrics::render(s, stats))
            }
            Some(Err(e)) => error(StatusCode::SERVICE_UNAVAILABLE, &format!("sampling fails: {e}")),
            None => error(StatusCode::SERVICE_UNAVAILABLE, "no sample yet"),
        },
        "/v1/snapshot" => match &latest {
            Some(l) if l.sample.is_ok() => full(StatusCode::OK, "application/json", l.json_line.clone()),
            Some(l) => {
                error(StatusCode::SERVICE_UNAVAILABLE, l.sample.as_ref().err().map(String::as_str).unwrap_or(""))
            }
            None => error(StatusCode::SERVICE_UNAVAILABLE, "no sample yet"),
        },
        "/v1/stream" => stream(req.uri().query(), shared, cfg, kill),
        other => error(StatusCode::NOT_FOUND, &format!("no such path {other:?}")),
    }
}

fn stream(query: Option<&str>, shared: &Shared, cfg: &AgentConfig, kill: Arc<watch::Sender<bool>>) -> Response<Body> {
    let mut every = cfg.interval;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "interval" => match parse_interval(v) {
                Ok(d) => every = d,
                Err(e) => return error(StatusCode::BAD_REQUEST, &e),
            },
            _ => {
                return error(
                    StatusCode::BAD_REQUEST,
                    &format!("unknown parameter {k:?}: /v1/stream takes ?interval="),
                );
            }
        }
    }
    let readers = &shared.stats.readers;
    if readers.fetch_add(1, Ordering::SeqCst) >= cfg.max_readers {
        readers.fetch_sub(1, Ordering::SeqCst);
        return error(
            StatusCode::TOO_MANY_REQUESTS,
            &format!("{} stream readers are connected, the most this agent serves; try again later", cfg.max_readers),
        );
    }
    // A small buffer per reader: a slow reader costs at most this many sample sets.
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    let mut latest = shared.latest.clone();
    let stats = shared.stats.clone();
    let stall = cfg.stall_timeout;
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let line = latest.borrow_and_update().as_ref().map(|l| l.json_line.clone());
            let Some(line) = line else { continue };
            match tx.send_timeout(line, stall).await {
                Ok(()) => {}
                Err(mpsc::error::SendTimeoutError::Timeout(_)) => {
                    // The reader stopped reading: close its connection.
                    let _ = kill.send(true);
                    break;
                }
                Err(mpsc::error::SendTimeoutError::Closed(_)) => break,
            }
        }
        stats.readers.fetch_sub(1, Ordering::SeqCst);
    });
    let body = StreamBody::new(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    }));
    let mut r = Response::new(BodyExt::boxed(body));
    if let Ok(v) = "application/x-ndjson".parse() {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::backend::BackendError;
    use crate::agent::fake::FakeGpus;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    struct Counting(FakeGpus, Arc<AtomicU64>);
    impl Gpus for Counting {
        fn name(&self) -> &'static str {
            "fake"
        }
        fn sample(&mut self, now: u64) -> Result<NodeSample, BackendError> {
            self.1.fetch_add(1, Ordering::SeqCst);
            self.0.sample(now)
        }
    }

    async fn start(max_readers: usize, gpus: u32) -> (SocketAddr, Arc<AtomicU64>, Shared) {
        let calls = Arc::new(AtomicU64::new(0));
        let backend = Box::new(Counting(FakeGpus::new("n1", gpus, 1), calls.clone()));
        let cfg = AgentConfig {
            listen: "127.0.0.1:0".parse().unwrap_or_else(|_| unreachable!()),
            interval: Duration::from_millis(100),
            max_readers,
            stall_timeout: Duration::from_millis(500),
        };
        let shared = spawn_sampler(backend, cfg.interval, None).expect("sampler");
        let listener = TcpListener::bind(cfg.listen).await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let s = shared.clone();
        tokio::spawn(async move { serve(listener, s, cfg).await });
        // Wait for the first sample.
        for _ in 0..50 {
            if shared.latest.borrow().is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (addr, calls, shared)
    }

    async fn request(addr: SocketAddr, raw: &str) -> (u16, String) {
        let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
        s.write_all(raw.as_bytes()).await.expect("write");
        let mut buf = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        (status, text)
    }

    async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        request(addr, &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn endpoints_serve_the_shared_sample() {
        let (addr, _, _) = start(8, 4).await;
        let (s, body) = get(addr, "/healthz").await;
        assert_eq!(s, 200, "{body}");
        let (s, body) = get(addr, "/metrics").await;
        assert_eq!(s, 200);
        assert!(body.contains("text/plain; version=0.0.4") && body.contains("DCGM_FI_DEV_FB_USED{"), "{body}");
        let (s, body) = get(addr, "/v1/snapshot").await;
        assert_eq!(s, 200);
        let json = body.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
        let sample: NodeSample = serde_json::from_str(json.trim()).expect("snapshot is a NodeSample");
        assert_eq!(sample.gpus.len(), 4);
        assert_eq!(sample.version, crate::agent::wire::WIRE_VERSION);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bad_requests_get_clear_errors_and_the_agent_keeps_serving() {
        let (addr, _, _) = start(8, 4).await;
        for (path, want) in [
            ("/v1/stream?interval=0", "out of range"),
            ("/v1/stream?interval=1y", "unknown unit"),
            ("/v1/stream?interval=8760h", "out of range"),
            ("/v1/stream?interval=abc", "not an interval"),
            ("/v1/stream?foo=1", "unknown parameter"),
        ] {
            let (s, body) = get(addr, path).await;
            assert_eq!(s, 400, "{path}: {body}");
            assert!(body.contains(want), "{path}: {body}");
        }
        let (s, body) = get(addr, "/nope").await;
        assert_eq!(s, 404);
        assert!(body.contains("/v1/snapshot"), "404 lists the paths: {body}");
        let (s, body) =
            request(addr, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
        assert_eq!(s, 405);
        assert!(body.to_lowercase().contains("allow: get"), "{body}");
        let (s, _) = request(addr, "\u{1}\u{2}garbage\r\n\r\n").await;
        assert_eq!(s, 400, "garbage is a bad request");
        let (s, _) = get(addr, "/healthz").await;
        assert_eq!(s, 200, "still serving after garbage");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn streams_share_one_sampler_are_bounded_and_stuck_readers_are_cut_off() {
        // 64 GPUs make each line large, so a stuck reader fills the kernel's buffers fast.
        let (addr, calls, shared) = start(3, 64).await;
        // A reader that reads: lines arrive in order.
        let mut good = tokio::net::TcpStream::connect(addr).await.expect("connect");
        good.write_all(b"GET /v1/stream?interval=100ms HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("write");
        // Two readers that never read.
        let mut stuck = Vec::new();
        for _ in 0..2 {
            let sock = tokio::net::TcpSocket::new_v4().expect("socket");
            let _ = sock.set_recv_buffer_size(4096);
            let mut s = sock.connect(addr).await.expect("connect");
            s.write_all(b"GET /v1/stream?interval=100ms HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("write");
            stuck.push(s);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (s, body) = get(addr, "/v1/stream").await;
        assert_eq!(s, 429, "a fourth reader is refused: {body}");
        let before = calls.load(Ordering::SeqCst);
        let mut seen = 0;
        let mut buf = vec![0u8; 1 << 16];
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut text = String::new();
        while seen < 5 && Instant::now() < deadline {
            if let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(2), good.read(&mut buf)).await {
                text.push_str(&String::from_utf8_lossy(&buf[..n]));
                seen = text.matches("\"version\":1").count();
            }
        }
        assert!(seen >= 5, "the reading stream got {seen} sample sets:\n{}", &text[..text.len().min(400)]);
        let elapsed_calls = calls.load(Ordering::SeqCst) - before;
        // Three readers at 100 ms: one backend call per interval, not one per reader.
        let lines = seen as u64;
        assert!(elapsed_calls <= lines + 4, "readers multiplied the backend calls: {elapsed_calls} for {lines} lines");
        // The stuck readers fill their buffers (socket, then 4 lines) and are cut off
        // after the stall timeout: the reader count drops back, with the good one still on.
        let deadline = Instant::now() + Duration::from_secs(60);
        while shared.stats.readers.load(Ordering::SeqCst) > 1 && Instant::now() < deadline {
            let _ = tokio::time::timeout(Duration::from_millis(200), good.read(&mut buf)).await;
        }
        assert_eq!(shared.stats.readers.load(Ordering::SeqCst), 1, "stuck readers were not cut off");
        drop(stuck);
    }
}
