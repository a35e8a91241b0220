//! Decode throughput of the feed's Kubernetes client (`fabrik bench --decode LIST.json`):
//! a recorded list (`kubectl get pods -A -o json`, or the API server's own answer to
//! `GET /api/v1/pods?resourceVersion=0`) replayed as a watch-list — one `ADDED` event per
//! object, then the bookmark that ends the initial events — by a local HTTP server, to the
//! feed's own watch-list (`feed::kube::watchlist`, over kube-rs's client), on one thread. The objects are
//! counted as the watcher yields them, then each is translated into deltas as the feed
//! does. The same events are decoded twice: as the feed decodes pods (only the fields it
//! reads, `feed::kube::slim`) and into k8s-openapi's whole `Pod`, which the feed used
//! before. Reported per second of that thread's CPU time, so a shared machine's other load
//! does not count against it.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::time::Instant;

use color_eyre::eyre::{WrapErr, eyre};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::{self, Event};

use crate::feed::kube::slim::FeedPod;
use crate::feed::kube::{KubeFeedConfig, Msg, Translator};

/// CPU seconds this thread has used (Linux: /proc/thread-self/stat; 10 ms ticks).
fn thread_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    // Fields after the command (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    // utime and stime are fields 14 and 15 of the line, 11 and 12 after the state.
    let ticks = f.get(10).copied().unwrap_or(0.0) + f.get(11).copied().unwrap_or(0.0);
    ticks / 100.0
}

/// The watch-list body: every item of `list` as an `ADDED` event, `repeat` times, then the
/// bookmark that marks the end of the initial events. Returns the body and the object count.
fn watch_body(list: &serde_json::Value, repeat: usize) -> color_eyre::Result<(Vec<u8>, usize)> {
    let items = list.get("items").and_then(|i| i.as_array()).ok_or_else(|| {
        eyre!("not a Kubernetes list: no \"items\" array (record one with `kubectl get pods -A -o json`)")
    })?;
    if items.is_empty() {
        return Err(eyre!("the list holds no objects"));
    }
    let mut body = Vec::new();
    for _ in 0..repeat {
        for item in items {
            // `type` first, as the API server writes it (a `json!` map would sort `object`
            // first, and serde would then buffer every object before it knows the event).
            body.extend_from_slice(br#"{"type":"ADDED","object":"#);
            serde_json::to_writer(&mut body, item)?;
            body.extend_from_slice(b"}\n");
        }
    }
    let rv = list.pointer("/metadata/resourceVersion").and_then(|v| v.as_str()).unwrap_or("1");
    let end = serde_json::json!({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1",
        "metadata": {"resourceVersion": rv, "annotations": {"k8s.io/initial-events-end": "true"}}}});
    serde_json::to_writer(&mut body, &end)?;
    body.push(b'\n');
    Ok((body, items.len() * repeat))
}

/// Serves `body` as a chunked HTTP/1.1 answer to one request, then holds the connection
/// open (a watch goes on after its initial events) until the client hangs up.
fn serve_once(listener: TcpListener, body: Vec<u8>) {
    let Ok((mut s, _)) = listener.accept() else { return };
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).is_ok_and(|n| n == 1) {
        head.push(byte[0]);
    }
    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
    for chunk in body.chunks(64 * 1024) {
        if write!(s, "{:x}\r\n", chunk.len()).is_err() || s.write_all(chunk).is_err() || s.write_all(b"\r\n").is_err() {
            return;
        }
    }
    let _ = s.read(&mut byte);
}

/// Serves `body` once on a local port and decodes it as the feed's watch-list of `K`, on
/// this thread: the pods, wall and CPU seconds.
fn replay<K>(body: Vec<u8>, objects: usize, into: fn(K) -> Pod) -> color_eyre::Result<(Vec<Pod>, f64, f64)>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url: http::Uri = format!("http://{}", listener.local_addr()?).parse()?;
    let server = std::thread::spawn(move || serve_once(listener, body));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let out = rt.block_on(async {
        let client = kube::Client::try_from(kube::Config::new(url))?;
        let api = kube::Api::<K>::all(client);
        let mut stream = crate::feed::kube::watchlist::watch_list(api, &watcher::Config::default()).boxed();
        let (t0, c0) = (Instant::now(), thread_cpu_s());
        let mut pods = Vec::with_capacity(objects);
        while let Some(e) = stream.next().await {
            match e {
                Ok(Event::InitApply(p)) => pods.push(into(p)),
                Ok(Event::InitDone) => break,
                Ok(_) => {}
                Err(e) => return Err(eyre!("the replayed watch-list failed: {e}")),
            }
        }
        Ok::<_, color_eyre::Report>((pods, t0.elapsed().as_secs_f64(), thread_cpu_s() - c0))
    })?;
    drop(rt);
    let _ = server.join();
    if out.0.len() != objects {
        return Err(eyre!("the watcher yielded {} of the {objects} objects replayed", out.0.len()));
    }
    Ok(out)
}

/// Replays `path` (at least `min_objects` objects, repeating the list) and reports decode and
/// decode + translate throughput: decoded as the feed decodes pods (only the fields it reads,
/// `feed::kube::slim`) and, for comparison, into k8s-openapi's whole `Pod`.
pub fn run(path: &Path, min_objects: usize, json: bool) -> color_eyre::Result<serde_json::Value> {
    let text = std::fs::read(path).wrap_err_with(|| format!("read {}", path.display()))?;
    let list: serde_json::Value = serde_json::from_slice(&text).wrap_err_with(|| {
        format!("{} is not JSON: record a list with `kubectl get pods -A -o json`", path.display())
    })?;
    let per_list = list.get("items").and_then(|i| i.as_array()).map_or(0, Vec::len).max(1);
    let repeat = min_objects.div_ceil(per_list).max(1);
    let (body, objects) = watch_body(&list, repeat)?;
    let bytes = body.len();
    let (_, full_wall, full_cpu) = replay::<Pod>(body.clone(), objects, |p| p)?;
    let (pods, wall, cpu) = replay::<FeedPod>(body, objects, |p| p.0)?;
    let mut t = Translator::new(KubeFeedConfig::default());
    let (t1, c1) = (Instant::now(), thread_cpu_s());
    let mut deltas = 0usize;
    for p in pods {
        deltas += t.apply(Msg::Pod(Event::InitApply(p)), crate::now_ms()).len();
    }
    let (twall, tcpu) = (t1.elapsed(), thread_cpu_s() - c1);
    let per_s = |n: usize, s: f64| if s > 0.0 { (n as f64 / s).round() } else { f64::NAN };
    let out = serde_json::json!({
        "objects": objects, "bytes": bytes, "list": path.display().to_string(),
        "decode": {"wall_s": wall, "cpu_s": cpu, "objects_per_s": per_s(objects, wall),
            "objects_per_cpu_s": per_s(objects, cpu), "mb_per_cpu_s": (bytes as f64 / 1e6 / cpu * 10.0).round() / 10.0},
        "decode_whole_pod": {"wall_s": full_wall, "cpu_s": full_cpu, "objects_per_s": per_s(objects, full_wall),
            "objects_per_cpu_s": per_s(objects, full_cpu)},
        "translate": {"wall_s": twall.as_secs_f64(), "cpu_s": tcpu, "deltas": deltas,
            "objects_per_cpu_s": per_s(objects, tcpu)},
        "decode_and_translate_objects_per_cpu_s": per_s(objects, cpu + tcpu),
    });
    let line = format!(
        "{objects} objects ({:.1} MB of watch events, {} from {}): decoded by the feed's watch-list in {:.2} s \
         ({:.2} s CPU: {} objects/s/core, {:.0} MB/s/core; into k8s-openapi's whole Pod: {} objects/s/core); translated in {:.2} s CPU ({} objects/s/core); \
         both: {} objects/s/core",
        bytes as f64 / 1e6,
        if repeat > 1 { format!("{repeat}× the {per_list}") } else { format!("the {per_list}") },
        path.display(),
        wall,
        cpu,
        out["decode"]["objects_per_cpu_s"],
        bytes as f64 / 1e6 / cpu,
        out["decode_whole_pod"]["objects_per_cpu_s"],
        tcpu,
        out["translate"]["objects_per_cpu_s"],
        out["decode_and_translate_objects_per_cpu_s"],
    );
    if json {
        eprintln!("{line}");
        println!("{out}");
    } else {
        println!("{line}");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_list_is_replayed_decoded_and_translated() {
        let path = std::env::temp_dir().join(format!("fabrik-decode-{}.json", std::process::id()));
        let pod = |name: &str| {
            serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "team-a", "uid": name, "resourceVersion": "7"},
                "spec": {"nodeName": "n1", "containers": [{"name": "c",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
                "status": {"phase": "Running"}})
        };
        let list = serde_json::json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"},
            "items": [pod("a"), pod("b"), pod("c")]});
        std::fs::write(&path, list.to_string()).expect("write the list");
        let v = run(&path, 10, false).expect("replay");
        assert_eq!(v["objects"], 12, "the list repeated up to at least 10 objects: {v}");
        assert_eq!(v["translate"]["deltas"], 12, "one pod delta each: {v}");
        assert!(v["bytes"].as_u64().is_some_and(|b| b > 12 * 100), "{v}");
        assert!(v["decode_whole_pod"]["cpu_s"].as_f64().is_some(), "the whole-Pod decode is reported: {v}");
        // Not a list: a message that says what to give it.
        std::fs::write(&path, "{\"kind\": \"Pod\"}").expect("write");
        let e = run(&path, 10, false).expect_err("not a list");
        assert!(e.to_string().contains("kubectl get pods -A -o json"), "{e}");
        let _ = std::fs::remove_file(&path);
    }
}
