//! The agent's read-only HTTP API: `/metrics`, `/v1/snapshot`, `/v1/stream`, `/healthz`.
//! One sampler thread feeds every reader (any number of readers never multiplies backend
//! calls); streams are bounded per reader and a reader that stops reading is cut off, so
//! the agent never grows without bound and keeps serving everyone else.

use std::convert::Infallible;
use std::future::Future;
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

/// A response body: whole, or streamed chunk by chunk.
pub(crate) type Body = BoxBody<Bytes, Infallible>;

pub const PATHS: [&str; 4] = ["/metrics", "/v1/snapshot", "/v1/stream", "/healthz"];

#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub listen: SocketAddr,
    /// Sampling interval, shared by every reader.
    pub interval: Duration,
    pub max_readers: usize,
    /// A stream reader whose buffer stays full this long is disconnected.
    pub stall_timeout: Duration,
    /// Most open connections; the next is answered 503 and closed.
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers, the first or the next
    /// on a kept-alive connection (hyper's header read timeout starts when it waits for a
    /// request): idle and trickling clients are closed after this.
    pub idle_timeout: Duration,
    /// A write the client does not take within this long closes the connection.
    pub write_timeout: Duration,
}

impl AgentConfig {
    /// The limits a node agent runs with; `listen`, `interval` and `max_readers` from its
    /// flags.
    pub fn new(listen: SocketAddr, interval: Duration, max_readers: usize, max_connections: usize) -> Self {
        let stall_timeout = (interval * 3).max(Duration::from_secs(10));
        AgentConfig {
            listen,
            interval,
            max_readers,
            stall_timeout,
            max_connections,
            idle_timeout: Duration::from_secs(5),
            write_timeout: stall_timeout,
        }
    }
}

/// Largest request head (request line and headers) read from a client.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Most header fields in a request.
pub const MAX_HEADERS: usize = 64;

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
    pub connections: AtomicUsize,
    /// Connections refused because `max_connections` were open.
    pub refused: AtomicU64,
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
            let rows = allocations.as_ref().and_then(podres::latest);
            if let Some(rows) = &rows {
                backend.allocated(rows);
            }
            let mut sample = backend.sample(now_ms()).map_err(|e| e.to_string());
            if let (Ok(s), Some(rows)) = (&mut sample, &rows) {
                podres::apply(s, rows);
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

/// A whole response of `ctype` (also the simulated kubelets' answers, `kubesim::logs`).
pub(crate) fn full(status: StatusCode, ctype: &str, body: impl Into<Bytes>) -> Response<Body> {
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

/// Serves until the listener fails; each connection runs on its own task. At most
/// `max_connections` are served at once; each is bounded in how long it may idle or hold a
/// write, and in the size of what it sends.
pub async fn serve(listener: TcpListener, shared: Shared, cfg: AgentConfig) -> std::io::Result<()> {
    let slots = Arc::new(tokio::sync::Semaphore::new(cfg.max_connections));
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
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            shared.stats.refused.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(refuse(stream, cfg.max_connections));
            continue;
        };
        let shared = shared.clone();
        let cfg = cfg.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let conns = shared.stats.clone();
            conns.connections.fetch_add(1, Ordering::SeqCst);
            // A stream that detects a stuck reader closes the whole connection.
            let (kill_tx, mut kill_rx) = watch::channel(false);
            let kill_tx = Arc::new(kill_tx);
            let write_timeout = cfg.write_timeout;
            let idle_timeout = cfg.idle_timeout;
            let svc = service_fn(move |req| {
                let (shared, cfg, kill) = (shared.clone(), cfg.clone(), kill_tx.clone());
                async move { Ok::<_, Infallible>(handle(req, &shared, &cfg, kill)) }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(idle_timeout)
                .max_buf_size(MAX_HEAD_BYTES)
                .max_headers(MAX_HEADERS)
                .serve_connection(TokioIo::new(WriteDeadline::new(stream, write_timeout)), svc);
            tokio::select! {
                _ = conn => {}
                _ = kill_rx.changed() => {}
            }
            conns.connections.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// Answers a connection over the limit with a 503 (if it takes it within a second) and
/// closes it.
async fn refuse(mut stream: tokio::net::TcpStream, max: usize) {
    use tokio::io::AsyncWriteExt;
    let body = format!("{{\"error\":\"{max} connections are open, the most this agent serves; try again later\"}}");
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(answer.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// A connection whose writes fail with `TimedOut` when the client takes none of the
/// bytes for `limit`: a client that stops reading cannot hold its task and buffers.
struct WriteDeadline {
    io: tokio::net::TcpStream,
    limit: Duration,
    stalled: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl WriteDeadline {
    fn new(io: tokio::net::TcpStream, limit: Duration) -> Self {
        WriteDeadline { io, limit, stalled: None }
    }

    /// A write, vectored write or flush that did not complete arms the deadline (or fails
    /// once it has passed); one that completed disarms it.
    fn guard<T>(
        &mut self,
        cx: &mut std::task::Context<'_>,
        r: std::task::Poll<std::io::Result<T>>,
    ) -> std::task::Poll<std::io::Result<T>> {
        if r.is_ready() {
            self.stalled = None;
            return r;
        }
        let limit = self.limit;
        let sleep = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match sleep.as_mut().poll(cx) {
            std::task::Poll::Ready(()) => std::task::Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the client took no bytes for {limit:?}"),
            ))),
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }
}

impl tokio::io::AsyncRead for WriteDeadline {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for WriteDeadline {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.io).poll_write(cx, buf);
        self.guard(cx, r)
    }
    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.guard(cx, r)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let r = std::pin::Pin::new(&mut self.io).poll_flush(cx);
        self.guard(cx, r)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
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
            // A reader that hung up is freed at once, not at its next tick (which may be
            // an hour away).
            tokio::select! {
                _ = tick.tick() => {}
                _ = tx.closed() => break,
            }
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
    streamed(rx, "application/x-ndjson")
}

/// A 200 response of `ctype` whose body is what `rx` yields, until its sender is dropped.
pub(crate) fn streamed(rx: mpsc::Receiver<Bytes>, ctype: &str) -> Response<Body> {
    let body = StreamBody::new(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    }));
    let mut r = Response::new(BodyExt::boxed(body));
    if let Ok(v) = ctype.parse() {
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
        start_with(max_readers, gpus, 256).await
    }

    async fn start_with(max_readers: usize, gpus: u32, max_connections: usize) -> (SocketAddr, Arc<AtomicU64>, Shared) {
        let calls = Arc::new(AtomicU64::new(0));
        let backend = Box::new(Counting(FakeGpus::new("n1", gpus, 1), calls.clone()));
        let cfg = AgentConfig {
            listen: "127.0.0.1:0".parse().unwrap_or_else(|_| unreachable!()),
            interval: Duration::from_millis(100),
            max_readers,
            stall_timeout: Duration::from_millis(500),
            max_connections,
            idle_timeout: Duration::from_millis(500),
            write_timeout: Duration::from_millis(500),
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

    async fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) -> Duration {
        let t0 = Instant::now();
        while !ok() {
            assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        t0.elapsed()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reader_that_hangs_up_is_freed_at_once_even_at_an_hour_interval() {
        let (addr, _, shared) = start(4, 4).await;
        let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
        s.write_all(b"GET /v1/stream?interval=1h HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("write");
        let mut buf = vec![0u8; 1 << 16];
        let mut text = String::new();
        while !text.contains("\"version\":1") {
            let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
                .await
                .expect("first line")
                .expect("read");
            assert!(n > 0, "closed before the first line");
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        assert_eq!(shared.stats.readers.load(Ordering::SeqCst), 1);
        drop(s);
        let took = wait_for("the reader's slot is freed", Duration::from_secs(1), || {
            shared.stats.readers.load(Ordering::SeqCst) == 0 && shared.stats.connections.load(Ordering::SeqCst) == 0
        })
        .await;
        eprintln!("reader at ?interval=1h freed {took:?} after its client hung up");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hundreds_of_idle_clients_neither_starve_health_checks_nor_readers() {
        let (addr, _, shared) = start_with(4, 4, 256).await;
        // 200 connections that send nothing, 40 that send half a request head and stop.
        let mut idle = Vec::new();
        for i in 0..240 {
            let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
            if i >= 200 {
                s.write_all(b"GET /v1/stream HTTP/1.1\r\nHost: x\r\nX-Slow: ").await.expect("write");
            }
            idle.push(s);
        }
        wait_for("the idle connections are counted", Duration::from_secs(5), || {
            shared.stats.connections.load(Ordering::SeqCst) >= 240
        })
        .await;
        // Under the limit: health checks and a new reader are served at once.
        let (s, body) = get(addr, "/healthz").await;
        assert_eq!(s, 200, "{body}");
        let mut r = tokio::net::TcpStream::connect(addr).await.expect("connect");
        r.write_all(b"GET /v1/stream?interval=100ms HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("write");
        let mut buf = vec![0u8; 1 << 16];
        let n = tokio::time::timeout(Duration::from_secs(5), r.read(&mut buf)).await.expect("a line").expect("read");
        assert!(String::from_utf8_lossy(&buf[..n]).contains(" 200 "), "a new reader is served");
        // Over the limit: the next connections are told so and closed, not left hanging.
        let mut more = Vec::new();
        for _ in 0..40 {
            more.push(tokio::net::TcpStream::connect(addr).await.expect("connect"));
        }
        let (s, body) = get(addr, "/healthz").await;
        assert_eq!(s, 503, "over the limit: {body}");
        assert!(body.contains("256 connections are open"), "{body}");
        assert!(shared.stats.refused.load(Ordering::SeqCst) > 0);
        // The idle and trickling ones are closed after the idle timeout (500 ms here):
        // health checks work again, and the reader that reads is still on.
        let took = wait_for("idle connections are closed", Duration::from_secs(5), || {
            shared.stats.connections.load(Ordering::SeqCst) <= 1
        })
        .await;
        eprintln!("240 idle connections closed within {took:?}");
        let (s, body) = get(addr, "/healthz").await;
        assert_eq!(s, 200, "{body}");
        assert_eq!(shared.stats.readers.load(Ordering::SeqCst), 1, "the reading stream stayed on");
        let n =
            tokio::time::timeout(Duration::from_secs(5), r.read(&mut buf)).await.expect("more lines").expect("read");
        assert!(n > 0);
        drop((idle, more));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn oversized_request_heads_are_refused_and_the_agent_keeps_serving() {
        let (addr, _, _) = start(4, 4).await;
        let big =
            format!("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\nConnection: close\r\n\r\n", "a".repeat(20_000));
        let (s, _) = request(addr, &big).await;
        assert_ne!(s, 200, "a 20 KB header is not served");
        let many: String = (0..100).map(|i| format!("X-H{i}: v\r\n")).collect();
        let (s, _) =
            request(addr, &format!("GET /healthz HTTP/1.1\r\nHost: x\r\n{many}Connection: close\r\n\r\n")).await;
        assert_ne!(s, 200, "100 header fields are not served");
        let long_path = format!("GET /{} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "p".repeat(20_000));
        let (s, _) = request(addr, &long_path).await;
        assert_ne!(s, 200);
        let (s, body) = get(addr, "/healthz").await;
        assert_eq!(s, 200, "still serving: {body}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_stops_reading_a_response_is_cut_off_by_the_write_deadline() {
        let (addr, _, shared) = start(4, 64).await;
        // Many /metrics requests pipelined on one connection that never reads: the answers
        // fill its socket, the write waits, and the deadline (500 ms here) closes it.
        let sock = tokio::net::TcpSocket::new_v4().expect("socket");
        let _ = sock.set_recv_buffer_size(4096);
        let mut s = sock.connect(addr).await.expect("connect");
        let reqs = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(200);
        let _ = tokio::time::timeout(Duration::from_secs(2), s.write_all(reqs.as_bytes())).await;
        wait_for("the connection that does not read is closed", Duration::from_secs(10), || {
            shared.stats.connections.load(Ordering::SeqCst) == 0
        })
        .await;
        drop(s);
    }
}
