//! Which pod the kubelet gave each GPU: the kubelet's PodResources API (`v1`, `List`), a
//! gRPC service on the node's `/var/lib/kubelet/pod-resources/kubelet.sock`, the same
//! source dcgm-exporter labels its series from. With the device plugin, the API server
//! says only that a pod got `nvidia.com/gpu: 1`; the kubelet knows which GPU (by uuid, or
//! by index under `DEVICE_ID_STRATEGY=index`), including for a pod that runs nothing on
//! it, the idle-but-allocated case process mapping cannot see.
//!
//! Hand-rolled on purpose: the three messages and five fields below are all that is read,
//! so a protobuf/gRPC stack would be most of the agent's size. gRPC is HTTP/2 with each
//! message framed as 1 byte "compressed" (0) + 4 bytes big-endian length, and the status
//! in the `grpc-status` trailer (or header, for a trailers-only answer).
//!
//! The messages (k8s.io/kubelet/pkg/apis/podresources/v1/api.proto; field numbers stable
//! since v1alpha1; later fields such as topology, cpu_ids, memory, dynamic_resources are
//! skipped):
//! `ListPodResourcesResponse { repeated PodResources pod_resources = 1; }`
//! `PodResources { string name = 1; string namespace = 2; repeated ContainerResources containers = 3; }`
//! `ContainerResources { string name = 1; repeated ContainerDevices devices = 2; }`
//! `ContainerDevices { string resource_name = 1; repeated string device_ids = 2; }`

use std::convert::Infallible;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::Frame;
use hyper::{HeaderMap, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};

use super::wire::{NodeSample, PodRef};

/// Where the kubelet serves it on every node.
pub const DEFAULT_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";
pub const LIST_PATH: &str = "/v1.PodResourcesLister/List";
/// An answer larger than this is refused (a node with thousands of pods is far below it).
const MAX_ANSWER: usize = 16 << 20;

/// One device the kubelet assigned to one container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    /// e.g. `nvidia.com/gpu`, `nvidia.com/mig-1g.10gb`.
    pub resource: String,
    /// A GPU or MIG uuid, or an index (`"3"`, or `"3:1"` for MIG) under the index strategy.
    pub device_id: String,
}

/// The latest answer, shared between the poller and the sampler: `None` while the kubelet
/// has not answered (the agent then reports no allocations rather than "free").
pub type Allocations = Arc<Mutex<Option<Vec<Assignment>>>>;

pub fn latest(a: &Allocations) -> Option<Vec<Assignment>> {
    a.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

/// Fills `allocated_to` of every GPU and MIG instance from the kubelet's assignments:
/// device ids are uuids (the device plugin's default), or GPU indexes under
/// `DEVICE_ID_STRATEGY=index` (MIG's `"gpu:instance"` indexes are not mapped).
pub fn apply(sample: &mut NodeSample, rows: &[Assignment]) {
    let pod = |r: &Assignment| PodRef {
        uid: String::new(),
        namespace: Some(r.namespace.clone()),
        name: Some(r.pod.clone()),
        container_id: None,
        container: Some(r.container.clone()),
    };
    let add = |to: &mut Vec<PodRef>, r: &Assignment| {
        let p = pod(r);
        if !to.contains(&p) {
            to.push(p);
        }
    };
    for g in &mut sample.gpus {
        let index = g.index.to_string();
        let mut whole = Vec::new();
        for r in rows.iter().filter(|r| (!g.uuid.is_empty() && r.device_id == g.uuid) || r.device_id == index) {
            add(&mut whole, r);
        }
        g.allocated_to = Some(whole);
        for m in &mut g.mig_instances {
            let mut got = Vec::new();
            for r in rows.iter().filter(|r| !m.uuid.is_empty() && r.device_id == m.uuid) {
                add(&mut got, r);
            }
            m.allocated_to = Some(got);
        }
    }
}

// ---------- protobuf, the little that is needed ----------

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or("truncated varint")?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint longer than 10 bytes".into())
}

/// The length-delimited fields of a message, as (field number, bytes); other wire types
/// are skipped, as protobuf readers do with what they do not know.
fn fields(buf: &[u8]) -> Result<Vec<(u64, &[u8])>, String> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let (field, wire) = (key >> 3, key & 7);
        match wire {
            0 => {
                varint(buf, &mut pos)?;
            }
            1 => pos += 8,
            2 => {
                let len = usize::try_from(varint(buf, &mut pos)?).map_err(|_| "length out of range")?;
                let end = pos.checked_add(len).filter(|e| *e <= buf.len()).ok_or("truncated field")?;
                out.push((field, &buf[pos..end]));
                pos = end;
            }
            5 => pos += 4,
            w => return Err(format!("unsupported wire type {w} (field {field})")),
        }
        if pos > buf.len() {
            return Err("truncated field".into());
        }
    }
    Ok(out)
}

fn text(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "a string field is not UTF-8".to_string())
}

/// Decodes a `ListPodResourcesResponse` into one row per assigned device.
pub fn decode_list(msg: &[u8]) -> Result<Vec<Assignment>, String> {
    let mut out = Vec::new();
    for (f, pod) in fields(msg)? {
        if f != 1 {
            continue;
        }
        let (mut name, mut namespace, mut containers) = (String::new(), String::new(), Vec::new());
        for (f, v) in fields(pod)? {
            match f {
                1 => name = text(v)?,
                2 => namespace = text(v)?,
                3 => containers.push(v),
                _ => {}
            }
        }
        for c in containers {
            let (mut cname, mut devices) = (String::new(), Vec::new());
            for (f, v) in fields(c)? {
                match f {
                    1 => cname = text(v)?,
                    2 => devices.push(v),
                    _ => {}
                }
            }
            for d in devices {
                let (mut resource, mut ids) = (String::new(), Vec::new());
                for (f, v) in fields(d)? {
                    match f {
                        1 => resource = text(v)?,
                        2 => ids.push(text(v)?),
                        _ => {}
                    }
                }
                for device_id in ids {
                    out.push(Assignment {
                        namespace: namespace.clone(),
                        pod: name.clone(),
                        container: cname.clone(),
                        resource: resource.clone(),
                        device_id,
                    });
                }
            }
        }
    }
    Ok(out)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, field: u64, b: &[u8]) {
    put_varint(out, field << 3 | 2);
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Encodes assignments as a `ListPodResourcesResponse` (what a kubelet sends; used by
/// `fabrik sim`, which plays the kubelet, and by tests). Rows of one pod and container
/// are grouped as the kubelet groups them.
pub fn encode_list(rows: &[Assignment]) -> Vec<u8> {
    // pod (namespace, name) → container → resource → device ids, in first-seen order.
    type Devices<'a> = Vec<(&'a str, Vec<&'a str>)>;
    type Containers<'a> = Vec<(&'a str, Devices<'a>)>;
    let mut pods: Vec<(&str, &str, Containers)> = Vec::new();
    for r in rows {
        let pi = match pods.iter().position(|(ns, n, _)| *ns == r.namespace && *n == r.pod) {
            Some(i) => i,
            None => {
                pods.push((&r.namespace, &r.pod, Vec::new()));
                pods.len() - 1
            }
        };
        let cs = &mut pods[pi].2;
        let ci = match cs.iter().position(|(c, _)| *c == r.container) {
            Some(i) => i,
            None => {
                cs.push((&r.container, Vec::new()));
                cs.len() - 1
            }
        };
        let ds = &mut cs[ci].1;
        match ds.iter_mut().find(|(res, _)| *res == r.resource) {
            Some((_, ids)) => ids.push(&r.device_id),
            None => ds.push((&r.resource, vec![&r.device_id])),
        }
    }
    let mut out = Vec::new();
    for (ns, name, containers) in pods {
        let mut pod = Vec::new();
        put_bytes(&mut pod, 1, name.as_bytes());
        put_bytes(&mut pod, 2, ns.as_bytes());
        for (cname, devices) in containers {
            let mut c = Vec::new();
            put_bytes(&mut c, 1, cname.as_bytes());
            for (res, ids) in devices {
                let mut d = Vec::new();
                put_bytes(&mut d, 1, res.as_bytes());
                for id in ids {
                    put_bytes(&mut d, 2, id.as_bytes());
                }
                put_bytes(&mut c, 2, &d);
            }
            put_bytes(&mut pod, 3, &c);
        }
        put_bytes(&mut out, 1, &pod);
    }
    out
}

// ---------- gRPC framing ----------

pub fn frame(msg: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + msg.len());
    out.push(0);
    out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    out.extend_from_slice(msg);
    out
}

/// The one message of a unary answer.
pub fn unframe(body: &[u8]) -> Result<&[u8], String> {
    if body.len() < 5 {
        return Err(format!("a gRPC answer of {} bytes has no message", body.len()));
    }
    if body[0] != 0 {
        return Err("the kubelet sent a compressed message, which fabrik does not ask for".into());
    }
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    body.get(5..5 + len).ok_or_else(|| format!("the gRPC message says {len} bytes, {} came", body.len() - 5))
}

/// `grpc-status` (and `grpc-message`) from trailers or headers: `Ok` for 0.
fn grpc_status(h: &HeaderMap) -> Option<Result<(), String>> {
    let code = h.get("grpc-status")?.to_str().ok()?.trim().to_string();
    if code == "0" {
        return Some(Ok(()));
    }
    let msg = h.get("grpc-message").and_then(|m| m.to_str().ok()).unwrap_or("");
    Some(Err(format!("the kubelet answered gRPC status {code} {msg}")))
}

// ---------- the client ----------

/// One `List` call to the kubelet's socket, bounded by `timeout`.
pub async fn list(socket: &Path, timeout: Duration) -> Result<Vec<Assignment>, String> {
    tokio::time::timeout(timeout, list_inner(socket))
        .await
        .map_err(|_| format!("the kubelet's pod-resources socket {} did not answer in {timeout:?}", socket.display()))?
}

async fn list_inner(socket: &Path) -> Result<Vec<Assignment>, String> {
    let io = tokio::net::UnixStream::connect(socket).await.map_err(|e| {
        let fix = match e.kind() {
            std::io::ErrorKind::NotFound => "mount the host's /var/lib/kubelet/pod-resources there",
            std::io::ErrorKind::PermissionDenied => {
                "the kubelet's socket is root's: run the agent as uid 0 (see deploy/agent-daemonset.yaml)"
            }
            _ => "is the kubelet running?",
        };
        format!("cannot connect to the kubelet's pod-resources socket {}: {e} ({fix})", socket.display())
    })?;
    let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
        .await
        .map_err(|e| format!("HTTP/2 with {}: {e}", socket.display()))?;
    // The connection's driver ends with this call (aborted when the guard goes).
    let driver = tokio::spawn(conn);
    let _abort = AbortOnDrop(driver);
    let req = Request::post(format!("http://localhost{LIST_PATH}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(Bytes::from(frame(&[]))))
        .map_err(|e| e.to_string())?;
    let resp = send.send_request(req).await.map_err(|e| format!("pod-resources List: {e}"))?;
    if resp.status() != StatusCode::OK {
        return Err(format!("pod-resources List: HTTP {}", resp.status()));
    }
    if let Some(Err(e)) = grpc_status(resp.headers()) {
        return Err(e);
    }
    let collected = Limited::new(resp.into_body(), MAX_ANSWER)
        .collect()
        .await
        .map_err(|e| format!("pod-resources List: reading the answer: {e}"))?;
    if let Some(Err(e)) = collected.trailers().and_then(grpc_status) {
        return Err(e);
    }
    let body = collected.to_bytes();
    decode_list(unframe(&body)?)
}

struct AbortOnDrop(tokio::task::JoinHandle<Result<(), hyper::Error>>);
impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Polls the kubelet every `every` into `into`, for as long as the task lives. A failure
/// is logged when it starts (not every poll) and clears the allocations, so the agent never
/// reports old assignments as current.
pub async fn poll(socket: std::path::PathBuf, every: Duration, into: Allocations) {
    let mut failing: Option<String> = None;
    loop {
        let got = list(&socket, Duration::from_secs(5)).await;
        match &got {
            Ok(rows) if failing.is_some() => {
                eprintln!("fabrik agent: pod-resources: the kubelet answers again ({} devices assigned)", rows.len());
                failing = None;
            }
            Ok(_) => {}
            Err(e) if failing.as_deref() != Some(e) => {
                eprintln!(
                    "fabrik agent: pod-resources: {e}; until it answers, GPUs are reported without the kubelet's assignments (pods are found from their processes only)"
                );
                failing = Some(e.clone());
            }
            Err(_) => {}
        }
        *into.lock().unwrap_or_else(PoisonError::into_inner) = got.ok();
        tokio::time::sleep(every).await;
    }
}

// ---------- a server, for `fabrik sim` (which plays the kubelet) and tests ----------

type GrpcBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn grpc_answer(status: u32, message: &str, msg: Option<Vec<u8>>) -> Response<GrpcBody> {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", status.into());
    if let Ok(m) = message.parse() {
        trailers.insert("grpc-message", m);
    }
    let mut frames: Vec<Result<Frame<Bytes>, Infallible>> = Vec::new();
    if let Some(m) = msg {
        frames.push(Ok(Frame::data(Bytes::from(frame(&m)))));
    }
    frames.push(Ok(Frame::trailers(trailers)));
    let body = StreamBody::new(futures::stream::iter(frames)).boxed();
    let mut resp = Response::new(body);
    resp.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static("application/grpc"));
    resp
}

/// Serves `List` on `listener` with whatever `answer` returns at the time of each call.
pub async fn serve<F, Fut>(listener: tokio::net::UnixListener, answer: F)
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Vec<Assignment>> + Send + 'static,
{
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let answer = answer.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let answer = answer.clone();
                async move {
                    Ok::<_, Infallible>(if req.uri().path() == LIST_PATH {
                        grpc_answer(0, "", Some(encode_list(&answer().await)))
                    } else {
                        grpc_answer(12, "unknown method", None)
                    })
                }
            });
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(ns: &str, pod: &str, c: &str, res: &str, id: &str) -> Assignment {
        Assignment {
            namespace: ns.into(),
            pod: pod.into(),
            container: c.into(),
            resource: res.into(),
            device_id: id.into(),
        }
    }

    #[test]
    fn a_list_answer_round_trips_and_unknown_fields_are_skipped() {
        let rows = vec![
            row("llm", "trainer-0", "main", "nvidia.com/gpu", "GPU-aaaa"),
            row("llm", "trainer-0", "main", "nvidia.com/gpu", "GPU-bbbb"),
            row("llm", "trainer-0", "sidecar", "nvidia.com/mig-1g.10gb", "MIG-cccc"),
            row("notebooks", "jupyter-x", "nb", "nvidia.com/gpu", "3"),
        ];
        let mut msg = encode_list(&rows);
        assert_eq!(decode_list(&msg), Ok(rows.clone()));
        // A newer kubelet adds fields (cpu_ids as packed varints, topology as a message):
        // an old reader skips them.
        msg.extend_from_slice(&[0x10, 0x05]); // field 2, varint 5 at the top level
        put_bytes(&mut msg, 7, b"\x08\x01");
        assert_eq!(decode_list(&msg), Ok(rows));
    }

    #[test]
    fn assignments_land_on_gpus_by_uuid_or_index_and_on_mig_instances() {
        let mut fake = crate::agent::fake::FakeGpus::new("n1", 4, 1);
        let Ok(mut s) = crate::agent::backend::Gpus::sample(&mut fake, 1_000) else { panic!("sample") };
        let (g0, mig) = (s.gpus[0].uuid.clone(), s.gpus[1].mig_instances[0].uuid.clone());
        let rows = vec![
            row("llm", "trainer-0", "main", "nvidia.com/gpu", &g0),
            row("llm", "trainer-0", "main", "nvidia.com/gpu", "2"),
            row("nb", "jupyter", "nb", "nvidia.com/mig-3g.40gb", &mig),
            row("other", "elsewhere", "c", "nvidia.com/gpu", "GPU-not-on-this-node"),
        ];
        apply(&mut s, &rows);
        let names = |v: &Option<Vec<PodRef>>| {
            v.as_ref().map(|v| v.iter().map(|p| p.name.clone().unwrap_or_default()).collect::<Vec<_>>())
        };
        assert_eq!(names(&s.gpus[0].allocated_to), Some(vec!["trainer-0".to_string()]));
        assert_eq!(names(&s.gpus[2].allocated_to), Some(vec!["trainer-0".to_string()]), "by index");
        assert_eq!(names(&s.gpus[3].allocated_to), Some(vec![]), "the kubelet says nobody has it");
        assert_eq!(names(&s.gpus[1].mig_instances[0].allocated_to), Some(vec!["jupyter".to_string()]));
        assert_eq!(names(&s.gpus[1].mig_instances[1].allocated_to), Some(vec![]));
    }

    #[test]
    fn malformed_answers_are_errors_not_panics() {
        assert!(decode_list(&[0x0a, 0x05, 0x01]).is_err(), "a length past the end");
        assert!(decode_list(&[0x0a]).is_err(), "a truncated length");
        assert!(decode_list(&[0x0b]).is_err(), "wire type 3 (groups)");
        assert!(unframe(&[0, 0, 0]).is_err());
        assert!(unframe(&[1, 0, 0, 0, 0]).is_err(), "compressed");
        assert!(unframe(&[0, 0, 0, 0, 9, 1]).is_err(), "shorter than it says");
        assert_eq!(unframe(&frame(b"abc")), Ok(&b"abc"[..]));
    }

    #[tokio::test]
    async fn the_client_reads_a_grpc_server_over_a_unix_socket() {
        let dir = std::env::temp_dir().join(format!("fabrik-podres-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let sock = dir.join("kubelet.sock");
        let listener = tokio::net::UnixListener::bind(&sock).expect("bind");
        let rows = vec![row("llm", "trainer-0", "main", "nvidia.com/gpu", "GPU-aaaa")];
        let served = rows.clone();
        tokio::spawn(serve(listener, move || {
            let r = served.clone();
            async move { r }
        }));
        assert_eq!(list(&sock, Duration::from_secs(5)).await, Ok(rows));
        let missing = list(&dir.join("nope.sock"), Duration::from_secs(5)).await;
        assert!(missing.as_ref().is_err_and(|e| e.contains("nope.sock")), "{missing:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
