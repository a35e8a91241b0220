//! Node agents as a feed: `/v1/stream` of each agent (newline-delimited `NodeSample`s, the
//! wire types the agent serves) turned into telemetry deltas. A lost stream reconnects with
//! backoff and the agent's feed shows "reconnecting since T"; the GPUs it fed go stale on
//! their own (no sample for a minute shows as `?`).
//!
//! An agent is reached directly (`--agent URL`) or, found as a pod of its DaemonSet by
//! [`super::agents`], through the API server's pod proxy, so a jump host needs nothing but
//! a kubeconfig.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;

use crate::agent::wire::NodeSample;
use crate::model::Batch;
use crate::model::{Delta, FeedState, GpuFault, InstanceSample, PeerSample, ProcSample, Sample, TelemetrySample, Ts};

use crate::now_ms;

/// `http://host:port[/]` → `host:port`; anything else is refused with the reason.
pub fn parse_agent_url(url: &str) -> Result<String, String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        format!("agent URL {url:?} must start with http:// (the agent serves plain HTTP; e.g. http://10.0.0.5:9400)")
    })?;
    let authority = rest.trim_end_matches('/');
    if authority.is_empty() || authority.contains('/') {
        return Err(format!("agent URL {url:?}: give only the address, e.g. http://10.0.0.5:9400"));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => Ok(authority.to_string()),
        _ => Err(format!("agent URL {url:?} needs host:port, e.g. http://10.0.0.5:9400")),
    }
}

/// `namespace/name` of the pods the kubelet named.
fn pod_names(pods: &[crate::agent::wire::PodRef]) -> Vec<String> {
    pods.iter().filter_map(|r| Some(format!("{}/{}", r.namespace.as_deref()?, r.name.as_deref()?))).collect()
}

/// The deltas of one sample set.
pub fn deltas(s: &NodeSample) -> Vec<Delta> {
    let samples = s
        .gpus
        .iter()
        .map(|g| {
            let pct = |used: u64, total: u64| (used.saturating_mul(100)).checked_div(total).unwrap_or(0).min(100) as u8;
            TelemetrySample {
                gpu_uuid: g.uuid.clone(),
                at: s.sampled_at_ms,
                // No utilisation from NVML (a MIG GPU, an unsupported field) stays unknown:
                // the fleet then derives it from the instances, or shows `—`.
                sample: Sample {
                    util: g.util_gpu.map(|u| u.min(100) as u8),
                    ..Sample::without_util(
                        pct(g.memory_used_mib, g.memory_total_mib),
                        (g.power_mw.unwrap_or(0) / 1000).min(u16::MAX as u32) as u16,
                        g.temp_c.unwrap_or(0).min(255) as u8,
                    )
                },
                instances: g
                    .mig_instances
                    .iter()
                    .map(|m| InstanceSample {
                        uuid: m.uuid.clone(),
                        util: m.util.map(|u| u.min(100) as u8),
                        mem_used_mib: m.memory_used_mib.min(u32::MAX as u64) as u32,
                        // A placement NVML could not read (0/0) is no placement.
                        placement: (m.placement_size > 0 && !m.profile.is_empty())
                            .then(|| u8::try_from(m.placement_start).ok().map(|s| (m.profile.clone(), s)))
                            .flatten(),
                        allocated: m.allocated_to.as_deref().map(pod_names),
                    })
                    .collect(),
                node_gpu: u8::try_from(g.index).ok().map(|i| (s.node.clone(), i)),
                allocated: g.allocated_to.as_deref().map(pod_names),
                peers: Some(
                    g.peers
                        .iter()
                        .filter_map(|l| {
                            Some(PeerSample {
                                peer: u8::try_from(l.peer).ok()?,
                                nvlinks: l.nvlinks.min(u8::MAX as u32) as u8,
                                path: l.path.clone(),
                            })
                        })
                        .collect(),
                ),
                processes: Some(
                    g.processes
                        .iter()
                        .map(|p| ProcSample {
                            pid: p.pid,
                            mem_mib: p.used_memory_mib.map(|m| m.min(u32::MAX as u64) as u32),
                            pod: p.pod.as_ref().map(|r| match (&r.namespace, &r.name) {
                                (Some(ns), Some(name)) => format!("{ns}/{name}"),
                                _ => format!("uid:{}", r.uid),
                            }),
                            container: p.pod.as_ref().and_then(|r| r.container.clone()),
                            gpu_instance: p.gpu_instance_id,
                            sm_util: p.sm_util,
                        })
                        .collect(),
                ),
            }
        })
        .collect();
    vec![Delta::Telemetry(samples)]
}

/// The faults already reported per GPU uuid: (time of the last XID, uncorrectable ECC count).
/// Kept across reconnects, so an agent's standing XID is one alert, not one per sample.
pub type FaultsSeen = std::collections::HashMap<String, (Option<u64>, u64)>;

/// XIDs and uncorrectable ECC errors the agent reports that were not reported before.
/// A uuid the sample lists twice counts once (the first), so two entries that disagree do
/// not report their faults again with every sample.
pub fn fault_deltas(s: &NodeSample, seen: &mut FaultsSeen) -> Vec<Delta> {
    let mut out = Vec::new();
    let mut done = std::collections::HashSet::new();
    for g in &s.gpus {
        if !done.insert(g.uuid.as_str()) {
            continue;
        }
        let entry = seen.entry(g.uuid.clone()).or_insert((None, 0));
        if let Some(x) = &g.last_xid
            && entry.0 != Some(x.at_ms)
        {
            entry.0 = Some(x.at_ms);
            out.push(Delta::GpuFault {
                gpu_uuid: g.uuid.clone(),
                at: x.at_ms,
                fault: GpuFault::Xid { code: x.code.min(u32::MAX as u64) as u32 },
            });
        }
        let ecc = g.ecc_uncorrected.unwrap_or(0);
        if ecc > entry.1 {
            entry.1 = ecc;
            out.push(Delta::GpuFault {
                gpu_uuid: g.uuid.clone(),
                at: s.sampled_at_ms,
                fault: GpuFault::EccUncorrected { count: ecc.min(u32::MAX as u64) as u32 },
            });
        }
    }
    out
}

/// Where an agent is reached.
#[derive(Clone)]
pub enum AgentAddr {
    /// `--agent http://host:port`.
    Direct(String),
    /// A pod of the agent DaemonSet, through
    /// `/api/v1/namespaces/NS/pods/POD:PORT/proxy/v1/stream`.
    Pod { client: kube::Client, namespace: String, pod: String, port: u16 },
}

impl AgentAddr {
    fn name(&self) -> String {
        match self {
            AgentAddr::Direct(url) => url.clone(),
            AgentAddr::Pod { namespace, pod, .. } => format!("{namespace}/{pod}"),
        }
    }
}

/// Streams one agent until the cockpit goes away, reconnecting with backoff (0.5 s → 30 s).
/// `source` names it in the connection state ("agent http://…", "agent h100-0003").
pub async fn run(url: String, interval: Duration, tx: mpsc::Sender<Batch>) {
    let source = format!("agent {url}");
    run_addr(AgentAddr::Direct(url), source, interval, tx).await
}

pub async fn run_addr(addr: AgentAddr, source: String, interval: Duration, tx: mpsc::Sender<Batch>) {
    let mut wait = Duration::from_millis(500);
    let mut since: Option<Ts> = None;
    let mut seen = FaultsSeen::new();
    loop {
        let mut out = Out { source: &source, tx: &tx, since: &mut since, seen: &mut seen };
        let result = match &addr {
            AgentAddr::Direct(url) => stream_direct(url, interval, &mut out).await,
            AgentAddr::Pod { client, namespace, pod, port } => {
                stream_proxied(client, namespace, pod, *port, interval, &mut out).await
            }
        };
        let reason = match result {
            Ok(()) => format!("the agent {} closed the stream", addr.name()),
            Err(e) => e,
        };
        if tx.is_closed() {
            return;
        }
        let start = *since.get_or_insert_with(now_ms);
        let state = FeedState::Reconnecting { since: start, reason };
        if tx.send(vec![Delta::Feed { source: source.clone(), state }]).await.is_err() {
            return;
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(30));
    }
}

fn stream_path(interval: Duration) -> String {
    format!("/v1/stream?interval={}ms", interval.as_millis().max(100))
}

/// No sample for three intervals (and at least 10 s) is a stuck stream: reconnect.
fn stall_after(interval: Duration) -> Duration {
    (interval * 3).max(Duration::from_secs(10))
}

/// Where a stream's samples go, and what it has told so far.
struct Out<'a> {
    source: &'a str,
    tx: &'a mpsc::Sender<Batch>,
    /// Set while the stream is in trouble: the next sample says it is live again.
    since: &'a mut Option<Ts>,
    seen: &'a mut FaultsSeen,
}

/// What arrived of a stream and how far it has been searched for a newline: a long line
/// that comes in many pieces is scanned once, and the lines of one piece are cut in one
/// pass, so the work is linear in the bytes however they are split.
#[derive(Default)]
struct Lines {
    buf: Vec<u8>,
    scanned: usize,
}

/// Longer than this without a newline is not a sample set.
const MAX_LINE: usize = 16 << 20;

/// Splits what arrived into sample lines and sends each as telemetry (and new faults).
/// `Ok(false)` when the cockpit went away.
async fn take_lines(lines: &mut Lines, who: &str, out: &mut Out<'_>) -> Result<bool, String> {
    let mut start = 0;
    while let Some(off) = lines.buf[lines.scanned..].iter().position(|b| *b == b'\n') {
        let nl = lines.scanned + off;
        let line = &lines.buf[start..nl];
        (start, lines.scanned) = (nl + 1, nl + 1);
        if line.is_empty() {
            continue;
        }
        let sample: NodeSample = serde_json::from_slice(line).map_err(|e| format!("{who} sent a bad sample: {e}"))?;
        let mut batch = deltas(&sample);
        batch.extend(fault_deltas(&sample, out.seen));
        if out.since.take().is_some() {
            batch.push(Delta::Feed { source: out.source.to_string(), state: FeedState::Live });
        }
        if out.tx.send(batch).await.is_err() {
            return Ok(false);
        }
    }
    lines.buf.drain(..start);
    lines.scanned = lines.buf.len();
    if lines.buf.len() > MAX_LINE {
        return Err(format!("{who} sent a line over 16 MiB"));
    }
    Ok(true)
}

/// One plain-HTTP/1.1 connection of a GET; dropping it closes the connection.
pub(super) struct Conn {
    _sender: hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// GET `path` from `authority` (host:port) over plain HTTP/1.1: the response, whose body
/// streams as long as the returned [`Conn`] is kept. Connecting gives up after 5 s.
pub(super) async fn http_get(
    authority: &str,
    path: &str,
) -> Result<(hyper::Response<hyper::body::Incoming>, Conn), String> {
    let tcp = tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(authority))
        .await
        .map_err(|_| format!("connecting to {authority} timed out"))?
        .map_err(|e| format!("cannot connect to {authority}: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| format!("HTTP handshake with {authority}: {e}"))?;
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = hyper::Request::get(path)
        .header(hyper::header::HOST, authority)
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("request: {e}"))?;
    let resp = sender.send_request(req).await.map_err(|e| format!("request to {authority}: {e}"))?;
    Ok((resp, Conn { _sender: sender, task }))
}

async fn stream_direct(url: &str, interval: Duration, out: &mut Out<'_>) -> Result<(), String> {
    let authority = parse_agent_url(url)?;
    let (resp, _conn) = http_get(&authority, &stream_path(interval)).await?;
    if !resp.status().is_success() {
        return Err(format!("{authority} answered {}", resp.status()));
    }
    let mut body = resp.into_body();
    let mut lines = Lines::default();
    let stall = stall_after(interval);
    loop {
        let frame = match tokio::time::timeout(stall, body.frame()).await {
            Err(_) => return Err(format!("no sample from {authority} for {}s", stall.as_secs())),
            Ok(None) => return Ok(()),
            Ok(Some(Err(e))) => return Err(format!("stream from {authority}: {e}")),
            Ok(Some(Ok(f))) => f,
        };
        let Ok(data) = frame.into_data() else { continue };
        lines.buf.extend_from_slice(&data);
        if !take_lines(&mut lines, &authority, out).await? {
            return Ok(());
        }
    }
}

async fn stream_proxied(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    port: u16,
    interval: Duration,
    out: &mut Out<'_>,
) -> Result<(), String> {
    use futures::AsyncReadExt;
    let who = format!("agent pod {namespace}/{pod}");
    let path = format!("/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy{}", stream_path(interval));
    let req = http::Request::get(&path).body(Vec::new()).map_err(|e| format!("request: {e}"))?;
    let stream = tokio::time::timeout(Duration::from_secs(10), client.request_stream(req))
        .await
        .map_err(|_| format!("{who}: the API server's pod proxy did not answer within 10s"))?
        .map_err(|e| match &e {
            kube::Error::Api(s) if s.code == 403 => format!(
                "{who}: forbidden — {} (streaming agents needs `get pods/proxy` in {namespace}; kubectl auth can-i get pods --subresource=proxy -n {namespace})",
                s.message
            ),
            _ => format!("{who} through the pod proxy: {}", crate::cluster::describe(&e)),
        })?;
    let mut stream = Box::pin(stream);
    let mut chunk = vec![0u8; 64 << 10];
    let mut lines = Lines::default();
    let stall = stall_after(interval);
    loop {
        let n = match tokio::time::timeout(stall, stream.read(&mut chunk)).await {
            Err(_) => return Err(format!("no sample from {who} for {}s", stall.as_secs())),
            Ok(Err(e)) => return Err(format!("stream from {who}: {e}")),
            Ok(Ok(0)) => return Ok(()),
            Ok(Ok(n)) => n,
        };
        lines.buf.extend_from_slice(&chunk[..n]);
        if !take_lines(&mut lines, &who, out).await? {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_urls_are_checked_with_a_reason() {
        assert_eq!(parse_agent_url("http://10.0.0.5:9400").as_deref(), Ok("10.0.0.5:9400"));
        assert_eq!(parse_agent_url("http://node-a:9400/").as_deref(), Ok("node-a:9400"));
        for (bad, why) in [
            ("https://n:9400", "must start with http://"),
            ("10.0.0.5:9400", "must start with http://"),
            ("http://n", "needs host:port"),
            ("http://n:0", "needs host:port"),
            ("http://n:9400/metrics", "only the address"),
        ] {
            let e = parse_agent_url(bad).err().unwrap_or_default();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn an_agents_xid_and_ecc_errors_are_reported_once_each() {
        let mut fake = crate::agent::fake::FakeGpus::new("h100-0000", 2, 1);
        let Ok(mut sample) = crate::agent::backend::Gpus::sample(&mut fake, 1_000) else { panic!("sample") };
        for g in sample.gpus.iter_mut() {
            g.last_xid = None;
            g.ecc_uncorrected = Some(0);
        }
        let mut seen = FaultsSeen::new();
        assert!(fault_deltas(&sample, &mut seen).is_empty(), "a healthy node reports nothing");
        sample.gpus[1].last_xid = Some(crate::agent::wire::XidEvent { code: 79, at_ms: 900 });
        sample.gpus[1].ecc_uncorrected = Some(2);
        let d = fault_deltas(&sample, &mut seen);
        let uuid = sample.gpus[1].uuid.clone();
        assert_eq!(
            d,
            vec![
                Delta::GpuFault { gpu_uuid: uuid.clone(), at: 900, fault: GpuFault::Xid { code: 79 } },
                Delta::GpuFault { gpu_uuid: uuid.clone(), at: 1_000, fault: GpuFault::EccUncorrected { count: 2 } },
            ]
        );
        assert!(fault_deltas(&sample, &mut seen).is_empty(), "the same XID and count are not reported again");
        sample.gpus[1].last_xid = Some(crate::agent::wire::XidEvent { code: 48, at_ms: 1_500 });
        let d = fault_deltas(&sample, &mut seen);
        assert!(matches!(d.as_slice(), [Delta::GpuFault { fault: GpuFault::Xid { code: 48 }, .. }]), "{d:?}");
    }

    #[test]
    fn a_gpu_listed_twice_does_not_report_its_faults_with_every_sample() {
        // Found by tests/fuzz.rs: two entries with one uuid and different XID times took
        // turns as "the last one seen", so every sample reported both XIDs again.
        let mut fake = crate::agent::fake::FakeGpus::new("h100-0000", 1, 1);
        let Ok(mut sample) = crate::agent::backend::Gpus::sample(&mut fake, 1_000) else { panic!("sample") };
        sample.gpus[0].last_xid = Some(crate::agent::wire::XidEvent { code: 79, at_ms: 900 });
        let mut twin = sample.gpus[0].clone();
        twin.last_xid = Some(crate::agent::wire::XidEvent { code: 48, at_ms: 0 });
        sample.gpus.push(twin);
        let mut seen = FaultsSeen::new();
        let first = fault_deltas(&sample, &mut seen);
        assert!(
            matches!(first.as_slice(), [Delta::GpuFault { fault: GpuFault::Xid { code: 79 }, .. }, ..]),
            "{first:?}"
        );
        assert!(fault_deltas(&sample, &mut seen).is_empty(), "nothing new in the same sample again");
    }

    #[tokio::test]
    async fn lines_split_anywhere_arrive_whole_and_once() {
        let mut fake = crate::agent::fake::FakeGpus::new("h100-0000", 2, 1);
        let Ok(sample) = crate::agent::backend::Gpus::sample(&mut fake, 1_000) else { panic!("sample") };
        let line = serde_json::to_string(&sample).expect("a sample serializes") + "\n";
        let (tx, mut rx) = mpsc::channel(64);
        let (mut since, mut seen) = (None, FaultsSeen::new());
        let mut out = Out { source: "agent h100-0000", tx: &tx, since: &mut since, seen: &mut seen };
        let mut lines = Lines::default();
        // One line in 7-byte pieces, then two lines and half a third in one piece.
        for piece in line.as_bytes().chunks(7) {
            lines.buf.extend_from_slice(piece);
            assert_eq!(take_lines(&mut lines, "agent", &mut out).await, Ok(true));
        }
        let (a, b) = line.split_at(line.len() / 2);
        lines.buf.extend_from_slice(format!("{line}\n{line}{a}").as_bytes());
        assert_eq!(take_lines(&mut lines, "agent", &mut out).await, Ok(true));
        assert_eq!((lines.buf.len(), lines.scanned), (a.len(), a.len()), "only the partial line is kept, scanned");
        lines.buf.extend_from_slice(b.as_bytes());
        assert_eq!(take_lines(&mut lines, "agent", &mut out).await, Ok(true));
        assert!(lines.buf.is_empty());
        let mut batches = 0;
        while let Ok(batch) = rx.try_recv() {
            assert!(matches!(batch.first(), Some(Delta::Telemetry(t)) if t.len() == 2), "{batch:?}");
            batches += 1;
        }
        assert_eq!(batches, 4, "each of the four lines once, the empty line none");
        // A line that never ends is refused once it passes the limit.
        lines.buf.extend(std::iter::repeat_n(b'x', MAX_LINE + 1));
        let (mut since, mut seen) = (None, FaultsSeen::new());
        let mut out = Out { source: "agent h100-0000", tx: &tx, since: &mut since, seen: &mut seen };
        assert!(take_lines(&mut lines, "agent", &mut out).await.is_err_and(|e| e.contains("over 16 MiB")));
    }

    #[test]
    fn a_sample_set_becomes_telemetry_with_node_and_index() {
        let mut fake = crate::agent::fake::FakeGpus::new("h100-0000", 2, 1);
        let sample = crate::agent::backend::Gpus::sample(&mut fake, 1_000);
        let Ok(sample) = sample else { panic!("the fake backend samples") };
        let d = deltas(&sample);
        let Some(Delta::Telemetry(t)) = d.first() else { panic!("{d:?}") };
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].node_gpu, Some(("h100-0000".to_string(), 1)));
        let peers = t[0].peers.as_ref().expect("an agent reports the GPU's peers");
        assert_eq!(peers, &vec![PeerSample { peer: 1, nvlinks: 18, path: "SYS".into() }], "{:?}", sample.gpus[0].peers);
        assert_eq!(t[0].gpu_uuid, sample.gpus[0].uuid);
        assert!(t.iter().all(|s| s.sample.util.is_none_or(|u| u <= 100) && s.sample.mem_pct <= 100));
        // GPU 1 is in MIG mode: NVML has no whole-GPU utilisation there, and it stays unknown
        // (the fleet derives it from the instances) rather than becoming 0 %.
        assert!(sample.gpus[1].mig_enabled && sample.gpus[1].util_gpu.is_none());
        assert_eq!(t[1].sample.util, None);
        assert_eq!(t[0].sample.util, sample.gpus[0].util_gpu.map(|u| u as u8));
        let want: Vec<_> =
            sample.gpus[1].mig_instances.iter().map(|m| (m.uuid.clone(), m.util.map(|u| u as u8))).collect();
        let got: Vec<_> = t[1].instances.iter().map(|i| (i.uuid.clone(), i.util)).collect();
        assert_eq!(got, want);
        let mut unmeasured = sample.clone();
        unmeasured.gpus[1].mig_instances[0].util = None;
        let Some(Delta::Telemetry(t)) = deltas(&unmeasured).into_iter().next() else { panic!("telemetry") };
        assert_eq!(t[1].instances[0].util, None, "an instance without engine activity stays unknown");
        assert_eq!(t[1].instances[0].placement, Some(("3g.40gb".to_string(), 4)), "profile and placement travel");
    }
}
