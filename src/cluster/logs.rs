//! A container's log through the API server (`GET pods/{name}/log`, which the API server
//! proxies to the pod's kubelet): the logs pane (`L`) and `fabrik logs`. No kubectl needed.
//! The container is resolved as kubectl resolves it, so both read the same stream.

use futures::{AsyncReadExt, FutureExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use tokio::sync::mpsc;

use crate::model::logs::split_lines;
use crate::model::{KEEP_LINES, LogEvent, LogRequest};

/// The annotation kubectl reads for a pod's default container.
const DEFAULT_CONTAINER: &str = "kubectl.kubernetes.io/default-container";

/// The pod's containers (regular, then init) and the one a request without a container
/// reads: the annotated default if the pod has it, else the first.
pub fn containers(pod: &Pod) -> (Vec<String>, Option<String>) {
    let spec = pod.spec.as_ref();
    let regular: Vec<String> = spec.map(|s| s.containers.iter().map(|c| c.name.clone()).collect()).unwrap_or_default();
    let init = spec.and_then(|s| s.init_containers.as_ref()).into_iter().flatten().map(|c| c.name.clone());
    let annotated = pod.metadata.annotations.as_ref().and_then(|a| a.get(DEFAULT_CONTAINER)).cloned();
    let default = annotated.filter(|c| regular.contains(c)).or_else(|| regular.first().cloned());
    (regular.iter().cloned().chain(init).collect(), default)
}

/// Streams the log `req` asks for into `out`: `Opened`, then `Lines` as they arrive
/// (coalesced: what the connection holds at once goes as one chunk), then `Ended`. Stops
/// early when `out` is closed. Errors (no such pod or container, no previous run, the kubelet
/// unreachable) end the stream with the API server's words.
pub async fn stream(client: kube::Client, req: LogRequest, out: mpsc::Sender<LogEvent>) {
    let end = read(client, &req, &out).await.err();
    let _ = out.send(LogEvent::Ended(end)).await;
}

async fn read(client: kube::Client, req: &LogRequest, out: &mpsc::Sender<LogEvent>) -> Result<(), String> {
    let api: Api<Pod> = Api::namespaced(client, &req.namespace);
    let pod = api.get(&req.pod).await.map_err(|e| super::describe(&e))?;
    // kubectl prints nothing for a pod no node has taken; say why there is no log.
    if pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_none_or(str::is_empty) {
        return Err(format!(
            "pod {} is not scheduled yet, so no container has run and there is no log; the pods view's WAITING column says why it waits",
            req.pod
        ));
    }
    let (all, default) = containers(&pod);
    let container = match &req.container {
        Some(c) if all.contains(c) => c.clone(),
        Some(c) => {
            return Err(format!("pod {} has no container {c:?}; its containers: {}", req.pod, all.join(", ")));
        }
        None => default.ok_or_else(|| format!("pod {} has no containers", req.pod))?,
    };
    if out.send(LogEvent::Opened { containers: all, container: container.clone() }).await.is_err() {
        return Ok(());
    }
    let params = LogParams {
        container: Some(container),
        follow: req.follow,
        previous: req.previous,
        timestamps: req.timestamps,
        tail_lines: req.tail.map(|n| n.min(KEEP_LINES) as i64),
        ..LogParams::default()
    };
    let reader = api.log_stream(&req.pod, &params).await.map_err(|e| super::describe(&e))?;
    let mut reader = Box::pin(reader);
    let mut carry = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = reader.read(&mut buf).await.map_err(|e| format!("reading the log: {e}"))?;
        if n == 0 {
            break;
        }
        let mut lines = split_lines(&mut carry, &buf[..n]);
        // What is already here joins this chunk (up to 1 MiB), so a long tail arrives in a few
        // chunks rather than one per read.
        let mut taken = n;
        while taken < 1 << 20 {
            match reader.read(&mut buf).now_or_never() {
                Some(Ok(m)) if m > 0 => {
                    lines.extend(split_lines(&mut carry, &buf[..m]));
                    taken += m;
                }
                _ => break,
            }
        }
        if !lines.is_empty() && out.send(LogEvent::Lines(lines)).await.is_err() {
            return Ok(());
        }
    }
    if !carry.is_empty() {
        // The stream ended without a newline (limitBytes, a container killed mid-line).
        let last = String::from_utf8_lossy(&carry).into_owned();
        let _ = out.send(LogEvent::Lines(vec![last])).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(annotation: Option<&str>) -> Pod {
        let mut p = serde_json::json!({
            "metadata": { "name": "p" },
            "spec": { "containers": [{ "name": "main" }, { "name": "sidecar" }],
                      "initContainers": [{ "name": "fetch" }] },
        });
        if let Some(a) = annotation {
            p["metadata"]["annotations"] = serde_json::json!({ DEFAULT_CONTAINER: a });
        }
        serde_json::from_value(p).expect("pod")
    }

    #[test]
    fn the_default_container_is_kubectls() {
        assert_eq!(
            containers(&pod(None)),
            (vec!["main".into(), "sidecar".into(), "fetch".into()], Some("main".into()))
        );
        assert_eq!(containers(&pod(Some("sidecar"))).1, Some("sidecar".into()));
        // An annotation naming no container is ignored, as kubectl ignores it.
        assert_eq!(containers(&pod(Some("gone"))).1, Some("main".into()));
    }
}
