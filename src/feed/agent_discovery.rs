//! Node agents on a cluster: found as pods of their DaemonSet (a label selector, in the
//! agent namespace only, owned by a DaemonSet), reached through the API server's pod proxy,
//! and streamed only for the nodes the person is looking at. A tenant can label its own pod
//! `app.kubernetes.io/name=fabrik-agent`, but not create pods in the agent namespace nor
//! make a DaemonSet own one there, so it cannot feed the cockpit telemetry for a node. The
//! cockpit says which nodes those are through a `watch` channel; a node
//! that leaves the view has its stream stopped (its GPUs' telemetry then ages into stale),
//! one that comes into view gets a stream, and each stream reconnects on its own.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::agent_stream::{AgentAddr, run_addr};
use crate::model::Batch;
use crate::model::{Delta, FeedState};

/// The agent DaemonSet's pods (deploy/agent.yaml), unless configured otherwise.
pub const DEFAULT_SELECTOR: &str = "app.kubernetes.io/name=fabrik-agent";
/// The namespace the agent DaemonSet runs in (deploy/agent-daemonset.yaml).
pub const DEFAULT_NAMESPACE: &str = crate::cluster::labels::AGENT_NAMESPACE;
/// The agent's default port (`fabrik agent --listen 0.0.0.0:9400`).
pub const DEFAULT_PORT: u16 = 9400;
const SOURCE: &str = "agents";

/// One agent pod: where to reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentPod {
    pub namespace: String,
    pub name: String,
    pub port: u16,
}

/// Whether a DaemonSet controls the pod (its controller owner reference), as it does every
/// pod it creates or adopts. Bare pods, and pods of Deployments, Jobs or StatefulSets, are
/// not agents whatever their labels say.
pub fn owned_by_daemonset(p: &Pod) -> bool {
    p.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "DaemonSet" && o.api_version.split('/').next() == Some("apps"))
}

/// The node an agent pod serves and how to reach it, if it is running and reachable and a
/// DaemonSet owns it: a pod that is not Running or has no IP yet cannot be proxied to. (The
/// namespace is checked by the watch, which looks in the agent namespace only.)
pub fn agent_pod(p: &Pod) -> Option<(String, AgentPod)> {
    if !owned_by_daemonset(p) {
        return None;
    }
    let spec = p.spec.as_ref()?;
    let node = spec.node_name.clone().filter(|n| !n.is_empty())?;
    let status = p.status.as_ref()?;
    if status.phase.as_deref() != Some("Running") || status.pod_ip.as_deref().unwrap_or("").is_empty() {
        return None;
    }
    if p.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let ports = spec.containers.iter().flat_map(|c| c.ports.iter().flatten());
    let mut port = None;
    for cp in ports {
        let named = matches!(cp.name.as_deref(), Some("http" | "metrics" | "api"));
        if named || port.is_none() {
            port = u16::try_from(cp.container_port).ok();
        }
        if named {
            break;
        }
    }
    Some((
        node,
        AgentPod {
            namespace: p.metadata.namespace.clone()?,
            name: p.metadata.name.clone()?,
            port: port.unwrap_or(DEFAULT_PORT),
        },
    ))
}

/// What should stream: the nodes in view that have an agent.
pub fn wanted<'a>(
    pods: &'a BTreeMap<String, AgentPod>,
    interest: &'a BTreeSet<String>,
) -> impl Iterator<Item = (&'a String, &'a AgentPod)> {
    interest.iter().filter_map(|n| pods.get_key_value(n))
}

struct Streams {
    client: kube::Client,
    interval: Duration,
    tx: mpsc::Sender<Batch>,
    running: HashMap<String, (AgentPod, JoinHandle<()>)>,
}

impl Streams {
    /// Starts and stops streams so that exactly the wanted ones run.
    async fn reconcile(&mut self, pods: &BTreeMap<String, AgentPod>, interest: &BTreeSet<String>) {
        let want: HashMap<&String, &AgentPod> = wanted(pods, interest).collect();
        let stop: Vec<String> =
            self.running.iter().filter(|(n, (p, _))| want.get(n) != Some(&p)).map(|(n, _)| n.clone()).collect();
        for node in stop {
            if let Some((_, h)) = self.running.remove(&node) {
                h.abort();
            }
            let _ = self.tx.send(vec![Delta::FeedRemove(crate::model::agent_feed(&node))]).await;
        }
        for (node, pod) in want {
            if self.running.contains_key(node) {
                continue;
            }
            let addr = AgentAddr::Pod {
                client: self.client.clone(),
                namespace: pod.namespace.clone(),
                pod: pod.name.clone(),
                port: pod.port,
            };
            let h = tokio::spawn(run_addr(addr, crate::model::agent_feed(node), self.interval, self.tx.clone()));
            self.running.insert(node.clone(), (pod.clone(), h));
        }
    }
}

impl Drop for Streams {
    fn drop(&mut self) {
        for (_, h) in self.running.values() {
            h.abort();
        }
    }
}

/// Watches the agent pods (`selector` in `namespace`, owned by a DaemonSet) and keeps one
/// pod-proxy stream per node in `interest`. Runs until the cockpit goes away.
pub async fn run(
    client: kube::Client,
    namespace: String,
    selector: String,
    interval: Duration,
    mut interest: watch::Receiver<BTreeSet<String>>,
    tx: mpsc::Sender<Batch>,
) {
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let cfg = watcher::Config::default().labels(&selector);
    let mut events = watcher::watcher(api, cfg).backoff(crate::feed::reconnect::Reconnect::default()).boxed();
    let mut streams = Streams { client, interval, tx: tx.clone(), running: HashMap::new() };
    // node → agent pod; `fresh` collects a relist until it is complete.
    let mut pods: BTreeMap<String, AgentPod> = BTreeMap::new();
    let mut fresh: Option<BTreeMap<String, AgentPod>> = None;
    // When finding agent pods went wrong first, while it still does.
    let mut trouble_since: Option<crate::model::Ts> = None;
    loop {
        tokio::select! {
            ev = events.next() => {
                let Some(ev) = ev else { return };
                match ev {
                    Ok(ev) => {
                        if trouble_since.take().is_some()
                            && tx.send(vec![Delta::Feed { source: SOURCE.into(), state: FeedState::Live }]).await.is_err()
                        {
                            return;
                        }
                        match ev {
                            Event::Init => fresh = Some(BTreeMap::new()),
                            Event::InitApply(p) => {
                                if let (Some(f), Some((node, a))) = (fresh.as_mut(), agent_pod(&p)) {
                                    f.insert(node, a);
                                }
                            }
                            Event::InitDone => pods = fresh.take().unwrap_or_default(),
                            Event::Apply(p) => {
                                let key = (p.metadata.namespace.clone(), p.metadata.name.clone());
                                pods.retain(|_, a| (Some(a.namespace.clone()), Some(a.name.clone())) != key);
                                if let Some((node, a)) = agent_pod(&p) {
                                    pods.insert(node, a);
                                }
                            }
                            Event::Delete(p) => {
                                let key = (p.metadata.namespace.clone(), p.metadata.name.clone());
                                pods.retain(|_, a| (Some(a.namespace.clone()), Some(a.name.clone())) != key);
                            }
                        }
                    }
                    Err(e) => {
                        let since = *trouble_since.get_or_insert_with(crate::now_ms);
                        let reason = format!("finding agent pods ({selector} in {namespace}): {e}");
                        let state = FeedState::Reconnecting { since, reason };
                        if tx.send(vec![Delta::Feed { source: SOURCE.into(), state }]).await.is_err() {
                            return;
                        }
                        continue;
                    }
                }
            }
            changed = interest.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
        if fresh.is_some() {
            continue;
        }
        let now: BTreeSet<String> = interest.borrow().clone();
        streams.reconcile(&pods, &now).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).expect("pod json")
    }

    #[test]
    fn agent_pods_need_a_node_an_ip_and_to_run() {
        let running = json!({
            "metadata": {"name": "fabrik-agent-x1", "namespace": "fabrik-system", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "fabrik-agent", "uid": "u1", "controller": true}]},
            "spec": {"nodeName": "h100-0001", "containers": [{"name": "agent",
                "ports": [{"name": "probe", "containerPort": 8080}, {"name": "http", "containerPort": 9400}]}]},
            "status": {"phase": "Running", "podIP": "10.213.0.2"}
        });
        let (node, a) = agent_pod(&pod(running.clone())).expect("a running agent");
        assert_eq!(node, "h100-0001");
        assert_eq!(a, AgentPod { namespace: "fabrik-system".into(), name: "fabrik-agent-x1".into(), port: 9400 });
        let mut pending = running.clone();
        pending["status"] = json!({"phase": "Pending"});
        assert!(agent_pod(&pod(pending)).is_none());
        let mut unbound = running.clone();
        unbound["spec"]["nodeName"] = json!(null);
        assert!(agent_pod(&pod(unbound)).is_none());
        let mut no_ports = running.clone();
        no_ports["spec"]["containers"][0]["ports"] = json!(null);
        assert_eq!(agent_pod(&pod(no_ports)).map(|(_, a)| a.port), Some(DEFAULT_PORT));
        // Labels are not enough: a bare pod, one a Deployment's ReplicaSet owns, and one that
        // names a DaemonSet without being its controller's are not agents.
        let mut bare = running.clone();
        bare["metadata"]["ownerReferences"] = json!(null);
        assert!(agent_pod(&pod(bare)).is_none());
        let mut replica = running.clone();
        replica["metadata"]["ownerReferences"][0]["kind"] = json!("ReplicaSet");
        assert!(agent_pod(&pod(replica)).is_none());
        let mut not_controller = running.clone();
        not_controller["metadata"]["ownerReferences"][0]["controller"] = json!(false);
        assert!(agent_pod(&pod(not_controller)).is_none());
        let mut other_group = running;
        other_group["metadata"]["ownerReferences"][0]["apiVersion"] = json!("example.com/v1");
        assert!(agent_pod(&pod(other_group)).is_none());
    }

    #[test]
    fn only_nodes_in_view_with_an_agent_stream() {
        let a = |n: &str| AgentPod { namespace: "fs".into(), name: format!("agent-{n}"), port: 9400 };
        let pods: BTreeMap<String, AgentPod> = ["n1", "n2", "n3"].iter().map(|n| (n.to_string(), a(n))).collect();
        let interest: BTreeSet<String> = ["n2", "n3", "n9"].iter().map(|n| n.to_string()).collect();
        let w: Vec<&str> = wanted(&pods, &interest).map(|(n, _)| n.as_str()).collect();
        assert_eq!(w, vec!["n2", "n3"]);
    }
}
