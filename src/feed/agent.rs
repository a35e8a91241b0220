//! Node agents as a feed: `/v1/stream` of each agent (newline-delimited `NodeSample`s, the
//! wire types the agent serves) turned into telemetry deltas. A lost stream reconnects with
//! backoff and the agent's feed shows "reconnecting since T"; the GPUs it fed go stale on
//! their own (no sample for a minute shows as `?`).
//!
//! Today this is direct access (`--agent URL`); reaching agents through the API server's pod
//! proxy is the next step (issue 5).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;

use super::Batch;
use crate::agent::wire::NodeSample;
use crate::model::{Delta, FeedState, Sample, TelemetrySample, Ts};

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
                sample: Sample::new(
                    g.util_gpu.unwrap_or(0).min(100) as u8,
                    pct(g.memory_used_mib, g.memory_total_mib),
                    (g.power_mw.unwrap_or(0) / 1000).min(u16::MAX as u32) as u16,
                    g.temp_c.unwrap_or(0).min(255) as u8,
                ),
                instances: g
                    .mig_instances
                    .iter()
                    .map(|m| (m.uuid.clone(), m.util.unwrap_or(0).min(100) as u8, m.memory_used_mib as u32))
                    .collect(),
                node_gpu: u8::try_from(g.index).ok().map(|i| (s.node.clone(), i)),
            }
        })
        .collect();
    vec![Delta::Telemetry(samples)]
}

/// Streams one agent until the cockpit goes away, reconnecting with backoff (0.5 s → 30 s).
pub async fn run(url: String, interval: Duration, tx: mpsc::Sender<Batch>) {
    let source = format!("agent {url}");
    let mut wait = Duration::from_millis(500);
    let mut since: Option<Ts> = None;
    loop {
        let result = stream_once(&url, interval, &source, &tx, &mut since).await;
        let reason = match result {
            Ok(()) => "the agent closed the stream".to_string(),
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

async fn stream_once(
    url: &str,
    interval: Duration,
    source: &str,
    tx: &mpsc::Sender<Batch>,
    since: &mut Option<Ts>,
) -> Result<(), String> {
    let authority = parse_agent_url(url)?;
    let tcp = tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(&authority))
        .await
        .map_err(|_| format!("connecting to {authority} timed out"))?
        .map_err(|e| format!("cannot connect to {authority}: {e}"))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.map_err(|e| format!("HTTP handshake: {e}"))?;
    let conn = tokio::spawn(conn);
    let path = format!("/v1/stream?interval={}ms", interval.as_millis().max(100));
    let req = hyper::Request::get(path)
        .header(hyper::header::HOST, &authority)
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("request: {e}"))?;
    let resp = sender.send_request(req).await.map_err(|e| format!("request to {authority}: {e}"))?;
    if !resp.status().is_success() {
        conn.abort();
        return Err(format!("{authority} answered {}", resp.status()));
    }
    let mut body = resp.into_body();
    let mut buf: Vec<u8> = Vec::new();
    // No sample for three intervals (and at least 10 s) is a stuck stream: reconnect.
    let stall = (interval * 3).max(Duration::from_secs(10));
    loop {
        let frame = match tokio::time::timeout(stall, body.frame()).await {
            Err(_) => return Err(format!("no sample from {authority} for {}s", stall.as_secs())),
            Ok(None) => return Ok(()),
            Ok(Some(Err(e))) => return Err(format!("stream from {authority}: {e}")),
            Ok(Some(Ok(f))) => f,
        };
        let Ok(data) = frame.into_data() else { continue };
        buf.extend_from_slice(&data);
        // Bounded: a line longer than 16 MiB is not a sample set.
        if buf.len() > 16 << 20 {
            return Err(format!("{authority} sent a line over 16 MiB"));
        }
        while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=nl).collect();
            let line = &line[..line.len() - 1];
            if line.is_empty() {
                continue;
            }
            let sample: NodeSample =
                serde_json::from_slice(line).map_err(|e| format!("{authority} sent a bad sample: {e}"))?;
            let mut batch = deltas(&sample);
            if since.take().is_some() {
                batch.push(Delta::Feed { source: source.to_string(), state: FeedState::Live });
            }
            if tx.send(batch).await.is_err() {
                return Ok(());
            }
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
    fn a_sample_set_becomes_telemetry_with_node_and_index() {
        let mut fake = crate::agent::fake::FakeGpus::new("h100-0000", 2, 1);
        let sample = crate::agent::backend::Gpus::sample(&mut fake, 1_000);
        let Ok(sample) = sample else { panic!("the fake backend samples") };
        let d = deltas(&sample);
        let Some(Delta::Telemetry(t)) = d.first() else { panic!("{d:?}") };
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].node_gpu, Some(("h100-0000".to_string(), 1)));
        assert_eq!(t[0].gpu_uuid, sample.gpus[0].uuid);
        assert!(t.iter().all(|s| s.sample.util <= 100 && s.sample.mem_pct <= 100));
    }
}
