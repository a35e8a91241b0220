//! Prometheus as a telemetry source (`--prometheus URL`): fleet-wide GPU utilisation,
//! memory, power and temperature from dcgm-exporter's series (or the agents', which carry
//! the same names and labels), with one instant query per refresh — for fleets too big to
//! stream every agent. Series of MIG instances (`GPU_I_ID` set) are left out: a whole GPU's
//! numbers come from its own series, and a GPU without a utilisation series gets none
//! rather than a made-up 0 %.

use std::collections::BTreeMap;
use std::time::Duration;

use http_body_util::BodyExt;
use tokio::sync::mpsc;

use crate::model::Batch;
use crate::model::{Delta, FeedState, Sample, TelemetrySample, Ts};

/// One query for every GPU: five dcgm-exporter metrics, whole GPUs only.
pub const QUERY: &str = r#"{__name__=~"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_FB_FREE|DCGM_FI_DEV_POWER_USAGE|DCGM_FI_DEV_GPU_TEMP",GPU_I_ID=""}"#;
const SOURCE: &str = "prometheus";

/// `http://host:port[/prefix]` → (authority, prefix without a trailing slash).
pub fn parse_url(url: &str) -> Result<(String, String), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        if url.starts_with("https://") {
            format!("Prometheus URL {url:?}: https is not supported yet; use http:// (or kubectl port-forward to it)")
        } else {
            format!("Prometheus URL {url:?} must start with http://, e.g. http://prometheus:9090")
        }
    })?;
    let (authority, prefix) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => {
            Ok((authority.to_string(), prefix.to_string()))
        }
        _ => Err(format!("Prometheus URL {url:?} needs host:port, e.g. http://prometheus:9090")),
    }
}

fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// GET over plain HTTP/1.1: (status, body). Bounded by `timeout` and 64 MiB.
async fn get(authority: &str, path: &str, timeout: Duration) -> Result<(u16, Vec<u8>), String> {
    let work = async {
        let (resp, _conn) = super::agent_stream::http_get(authority, path).await?;
        let status = resp.status().as_u16();
        let body = http_body_util::Limited::new(resp.into_body(), 64 << 20)
            .collect()
            .await
            .map_err(|e| format!("reading {authority}'s answer: {e}"))?
            .to_bytes()
            .to_vec();
        Ok::<_, String>((status, body))
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| format!("{authority} did not answer within {}s", timeout.as_secs()))?
}

/// Turns an instant-query answer into telemetry, one sample per GPU that has a utilisation
/// series. Errors name what Prometheus said.
pub fn samples(body: &[u8]) -> Result<Vec<TelemetrySample>, String> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| format!("not a Prometheus answer: {e}"))?;
    if v["status"] != "success" {
        return Err(format!(
            "Prometheus said {}: {}",
            v["errorType"].as_str().unwrap_or("error"),
            v["error"].as_str().unwrap_or("no reason given")
        ));
    }
    #[derive(Default)]
    struct Gpu {
        at: Ts,
        node_gpu: Option<(String, u8)>,
        util: Option<f64>,
        used: Option<f64>,
        free: Option<f64>,
        power: Option<f64>,
        temp: Option<f64>,
    }
    let mut gpus: BTreeMap<String, Gpu> = BTreeMap::new();
    for r in v["data"]["result"].as_array().into_iter().flatten() {
        let m = &r["metric"];
        let Some(uuid) = m["UUID"].as_str().filter(|u| !u.is_empty()) else { continue };
        let Some(value) = r["value"][1].as_str().and_then(|s| s.parse::<f64>().ok()).filter(|x| x.is_finite()) else {
            continue;
        };
        let at = r["value"][0].as_f64().map(|t| (t * 1000.0) as Ts).unwrap_or(0);
        let g = gpus.entry(uuid.to_string()).or_default();
        g.at = g.at.max(at);
        if g.node_gpu.is_none() {
            let node = m["Hostname"].as_str().filter(|h| !h.is_empty());
            let index = m["gpu"].as_str().and_then(|i| i.parse::<u8>().ok());
            g.node_gpu = node.zip(index).map(|(n, i)| (n.to_string(), i));
        }
        let slot = match m["__name__"].as_str() {
            Some("DCGM_FI_DEV_GPU_UTIL") => &mut g.util,
            Some("DCGM_FI_DEV_FB_USED") => &mut g.used,
            Some("DCGM_FI_DEV_FB_FREE") => &mut g.free,
            Some("DCGM_FI_DEV_POWER_USAGE") => &mut g.power,
            Some("DCGM_FI_DEV_GPU_TEMP") => &mut g.temp,
            _ => continue,
        };
        *slot = Some(value);
    }
    Ok(gpus
        .into_iter()
        .filter_map(|(uuid, g)| {
            let util = g.util?;
            let mem_pct = match (g.used, g.free) {
                (Some(u), Some(f)) if u + f > 0.0 => (u * 100.0 / (u + f)).round(),
                _ => 0.0,
            };
            Some(TelemetrySample {
                gpu_uuid: uuid,
                at: g.at,
                sample: Sample::new(
                    util.clamp(0.0, 100.0).round() as u8,
                    mem_pct.clamp(0.0, 100.0) as u8,
                    g.power.unwrap_or(0.0).clamp(0.0, u16::MAX as f64).round() as u16,
                    g.temp.unwrap_or(0.0).clamp(0.0, 255.0).round() as u8,
                ),
                instances: Vec::new(),
                node_gpu: g.node_gpu,
                allocated: None,
                peers: None,
                processes: None,
            })
        })
        .collect())
}

/// One query: at `time` (Unix seconds) when given, else now.
pub async fn query_once(url: &str, time: Option<f64>) -> Result<Vec<TelemetrySample>, String> {
    let (authority, prefix) = parse_url(url)?;
    let mut path = format!("{prefix}/api/v1/query?query={}", encode(QUERY));
    if let Some(t) = time {
        path.push_str(&format!("&time={t:.3}"));
    }
    let (status, body) = get(&authority, &path, Duration::from_secs(20)).await?;
    if status != 200 && !body.starts_with(b"{") {
        return Err(format!("{url} answered HTTP {status} (is it a Prometheus?)"));
    }
    samples(&body)
}

/// Queries every `every` until the cockpit goes away. Trouble shows as the `prometheus`
/// source reconnecting, with the reason; GPUs keep their last numbers and go stale.
pub async fn run(url: String, every: Duration, tx: mpsc::Sender<Batch>) {
    let mut since: Option<Ts> = None;
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let batch = match query_once(&url, None).await {
            Ok(samples) => {
                let mut b = vec![Delta::Telemetry(samples)];
                if since.take().is_some() {
                    b.push(Delta::Feed { source: SOURCE.into(), state: FeedState::Live });
                }
                b
            }
            Err(reason) => {
                let start = *since.get_or_insert_with(crate::now_ms);
                vec![Delta::Feed { source: SOURCE.into(), state: FeedState::Reconnecting { since: start, reason } }]
            }
        };
        if tx.send(batch).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_with_a_reason() {
        assert_eq!(parse_url("http://prom:9090"), Ok(("prom:9090".into(), String::new())));
        assert_eq!(parse_url("http://prom:9090/prometheus/"), Ok(("prom:9090".into(), "/prometheus".into())));
        assert!(parse_url("https://prom:9090").unwrap_err().contains("https is not supported"));
        assert!(parse_url("prom:9090").unwrap_err().contains("must start with http://"));
        assert!(parse_url("http://prom").unwrap_err().contains("needs host:port"));
    }

    #[test]
    fn an_answer_becomes_one_sample_per_gpu_with_utilisation() {
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","UUID":"GPU-a","Hostname":"n1","gpu":"3"},"value":[1700000000.5,"41"]},
            {"metric":{"__name__":"DCGM_FI_DEV_FB_USED","UUID":"GPU-a","Hostname":"n1","gpu":"3"},"value":[1700000000.5,"20000"]},
            {"metric":{"__name__":"DCGM_FI_DEV_FB_FREE","UUID":"GPU-a","Hostname":"n1","gpu":"3"},"value":[1700000000.5,"60000"]},
            {"metric":{"__name__":"DCGM_FI_DEV_POWER_USAGE","UUID":"GPU-a","Hostname":"n1","gpu":"3"},"value":[1700000000.5,"312.6"]},
            {"metric":{"__name__":"DCGM_FI_DEV_GPU_TEMP","UUID":"GPU-a","Hostname":"n1","gpu":"3"},"value":[1700000000.5,"55"]},
            {"metric":{"__name__":"DCGM_FI_DEV_FB_USED","UUID":"GPU-mig","Hostname":"n1","gpu":"4"},"value":[1700000000.5,"100"]},
            {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","UUID":"GPU-nan","gpu":"5"},"value":[1700000000.5,"NaN"]}
        ]}}"#;
        let s = samples(body).unwrap();
        assert_eq!(s.len(), 1, "only GPUs with a utilisation series: {s:?}");
        let g = &s[0];
        assert_eq!(g.gpu_uuid, "GPU-a");
        assert_eq!(g.at, 1_700_000_000_500);
        assert_eq!(g.node_gpu, Some(("n1".into(), 3)));
        assert_eq!((g.sample.util, g.sample.mem_pct, g.sample.power_w, g.sample.temp_c), (Some(41), 25, 313, 55));
        let e = samples(br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#).unwrap_err();
        assert!(e.contains("bad_data") && e.contains("parse error"), "{e}");
        assert!(samples(b"<html>").unwrap_err().contains("not a Prometheus answer"));
    }
}
