//! A fault-injecting HTTP proxy between a client under test and the real API server: every
//! request is forwarded through an authenticated kube client, except those an armed rule
//! catches, which get a 503, an API Priority-and-Fairness 429 (plain text and Retry-After, as
//! kube-apiserver's APF filter answers), a 409 Conflict or a reset connection instead.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// 503 with a Status body (an API server whose etcd is away).
    Unavailable,
    /// 429 from API Priority and Fairness: not a PDB refusal.
    Apf,
    /// The TCP connection is reset instead of answered.
    Reset,
    /// 409 Conflict with a Status body, as an eviction meets when its PodDisruptionBudget
    /// was written concurrently (the pod is still there, with the same uid).
    Conflict,
}

struct Rule {
    method: http::Method,
    path: String,
    faults: VecDeque<Fault>,
}

/// The armed rules and what was injected, shared with the test.
#[derive(Clone, Default)]
pub struct Faults {
    rules: Arc<Mutex<Vec<Rule>>>,
    injected: Arc<Mutex<Vec<(Fault, String)>>>,
}

impl Faults {
    /// The next requests `method path` (path without query) get `faults`, one each, in order.
    pub fn arm(&self, method: http::Method, path: &str, faults: &[Fault]) {
        if let Ok(mut r) = self.rules.lock() {
            r.push(Rule { method, path: path.to_string(), faults: faults.iter().copied().collect() });
        }
    }

    /// What was injected so far, with the request it hit.
    pub fn injected(&self) -> Vec<(Fault, String)> {
        self.injected.lock().map(|i| i.clone()).unwrap_or_default()
    }

    fn take(&self, method: &http::Method, path: &str) -> Option<Fault> {
        let mut rules = self.rules.lock().ok()?;
        let rule = rules.iter_mut().find(|r| r.method == *method && r.path == path && !r.faults.is_empty())?;
        let f = rule.faults.pop_front()?;
        if let Ok(mut i) = self.injected.lock() {
            i.push((f, format!("{method} {path}")));
        }
        Some(f)
    }
}

fn full(status: u16, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = http::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    r
}

async fn forward(upstream: &kube::Client, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, std::io::Error> {
    let (parts, body) = req.into_parts();
    let bytes = body.collect().await.map_err(std::io::Error::other)?.to_bytes();
    let uri = parts.uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_else(|| "/".into());
    let mut out = http::Request::builder().method(parts.method).uri(uri);
    for h in [http::header::CONTENT_TYPE, http::header::ACCEPT, http::header::USER_AGENT] {
        if let Some(v) = parts.headers.get(&h) {
            out = out.header(h, v);
        }
    }
    let out = out.body(kube::client::Body::from(bytes.to_vec())).map_err(std::io::Error::other)?;
    let res = upstream.send(out).await.map_err(std::io::Error::other)?;
    let (parts, body) = res.into_parts();
    let bytes = body.collect().await.map_err(std::io::Error::other)?.to_bytes();
    Ok(Response::from_parts(parts, Full::new(bytes)))
}

/// Starts the proxy on loopback; returns its URL (plain HTTP, no credentials needed) and the
/// rules handle. It runs until the test's runtime ends.
pub async fn start(upstream: kube::Client) -> (String, Faults) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the fault proxy");
    let addr = listener.local_addr().expect("the proxy's address");
    let faults = Faults::default();
    let f = faults.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            // A zero linger turns the close of a reset connection into a TCP RST, as a broken
            // load balancer or a restarting server gives; with zero it never blocks.
            #[allow(deprecated)]
            let _ = stream.set_linger(Some(Duration::ZERO));
            let (up, f) = (upstream.clone(), f.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (up, f) = (up.clone(), f.clone());
                    async move {
                        match f.take(req.method(), req.uri().path()) {
                            Some(Fault::Unavailable) => Ok(full(
                                503,
                                "application/json",
                                serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                    "message": "etcdserver: leader changed (injected by the test)",
                                    "reason": "ServiceUnavailable", "code": 503})
                                .to_string(),
                            )),
                            Some(Fault::Apf) => {
                                let mut r = full(
                                    429,
                                    "text/plain; charset=utf-8",
                                    "Too many requests, please try again later.\n".into(),
                                );
                                r.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("1"));
                                Ok(r)
                            }
                            Some(Fault::Conflict) => Ok(full(
                                409,
                                "application/json",
                                serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                    "message": "Operation cannot be fulfilled on poddisruptionbudgets.policy \"trainer-pdb\": the object has been modified; please apply your changes to the latest version and try again (injected by the test)",
                                    "reason": "Conflict", "code": 409})
                                .to_string(),
                            )),
                            Some(Fault::Reset) => {
                                Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "injected reset"))
                            }
                            None => forward(&up, req).await,
                        }
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
            });
        }
    });
    (format!("http://{addr}"), faults)
}

/// A client for `url` (the proxy) as the cockpit builds its own: no silent retry layer.
pub fn client(url: &str) -> kube::Client {
    let mut config = kube::Config::new(url.parse().expect("proxy url"));
    config.default_retry = false;
    kube::Client::try_from(config).expect("a client for the proxy")
}
