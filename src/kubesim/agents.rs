//! `fabrik sim --agents`: one fake node agent per simulated node (`fabrik agent --fake 8`),
//! reachable the way the cockpit reaches real ones — as pods of the agent DaemonSet, through
//! the API server's pod proxy.
//!
//! The pod proxy refuses loopback addresses, so the agents listen in a network namespace
//! made here (a veth pair on 10.215.N.0/24: the host end is `.1`, node `i`'s agent is
//! `.i+2`), and each agent pod reports its agent's address through the simulated kubelet
//! (annotation [`super::kubelet::POD_IP_ANNOTATION`]). Nothing outside this machine is ever
//! addressed. It needs root and iproute2; without them `--agents` says so and stops. The
//! agents exit with the simulator (`--parent`), and the namespace is removed when it stops.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use serde_json::json;

use super::describe;
use super::podres;
use super::workload::WORKLOAD_LABEL;

/// Namespace of the agent pods (the DaemonSet's in deploy/).
pub const NAMESPACE: &str = crate::cluster::labels::AGENT_NAMESPACE;
/// At most this many agents: one /24 of addresses, and one small process each.
pub const MAX_AGENTS: usize = 250;

pub struct AgentNet {
    netns: String,
    host_if: String,
    subnet: String,
    agents: Vec<Child>,
    /// The PodResources sockets' directory, and per node its device manager and listener
    /// (bound before the agents start, served once the runtime has the client).
    sock_dir: PathBuf,
    kubelets: Vec<(Arc<podres::Devices>, Option<std::os::unix::net::UnixListener>)>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out =
        Command::new("ip").args(args).output().map_err(|e| format!("`ip` (iproute2) is needed for --agents: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {} (--agents needs root and iproute2 to make a network namespace)",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl AgentNet {
    /// Makes the namespace and starts one agent per node, in node order.
    /// `sharing[i]` is how node `i`'s device plugin shares its GPUs (its kubelet's replicas).
    pub fn start(nodes: &[String], sharing: &[podres::Sharing], exe: &Path) -> Result<AgentNet, String> {
        if nodes.len() > MAX_AGENTS {
            return Err(format!(
                "--agents runs at most {MAX_AGENTS} fake agents (one process each); use --nodes {MAX_AGENTS} or fewer"
            ));
        }
        let id = std::process::id();
        let sock_dir = std::env::temp_dir().join(format!("fabrik-sim-{id}"));
        std::fs::create_dir_all(&sock_dir).map_err(|e| format!("creating {}: {e}", sock_dir.display()))?;
        let mut net = AgentNet {
            netns: format!("fabrik-sim-{id}"),
            host_if: format!("fsh{}", id % 100_000),
            subnet: format!("10.215.{}", id % 250),
            agents: Vec::new(),
            sock_dir,
            kubelets: Vec::new(),
        };
        let peer = format!("fsn{}", id % 100_000);
        ip(&["netns", "add", &net.netns])?;
        ip(&["link", "add", &net.host_if, "type", "veth", "peer", "name", &peer])?;
        ip(&["link", "set", &peer, "netns", &net.netns])?;
        ip(&["addr", "add", &format!("{}.1/24", net.subnet), "dev", &net.host_if])?;
        ip(&["link", "set", &net.host_if, "up"])?;
        ip(&["netns", "exec", &net.netns, "ip", "link", "set", "lo", "up"])?;
        ip(&["netns", "exec", &net.netns, "ip", "link", "set", &peer, "up"])?;
        let parent = id.to_string();
        for (i, node) in nodes.iter().enumerate() {
            let addr = net.address(i);
            ip(&["netns", "exec", &net.netns, "ip", "addr", "add", &format!("{addr}/24"), "dev", &peer])?;
            let sock = net.sock_dir.join(format!("podres-{i}.sock"));
            let _ = std::fs::remove_file(&sock);
            let listener = std::os::unix::net::UnixListener::bind(&sock)
                .map_err(|e| format!("binding the PodResources socket {}: {e}", sock.display()))?;
            let share = sharing.get(i).cloned().unwrap_or_default();
            net.kubelets.push((podres::Devices::new(node, i as u64, share), Some(listener)));
            let child = Command::new("ip")
                .args(["netns", "exec", &net.netns])
                .arg(exe)
                .args(["agent", "--fake", &podres::FAKE_GPUS.to_string(), "--node", node, "--interval", "1s"])
                .args(["--seed", &i.to_string(), "--pod-resources"])
                .arg(&sock)
                .args(["--listen", &format!("{addr}:9400"), "--parent", &parent])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| format!("starting the agent of {node}: {e}"))?;
            net.agents.push(child);
        }
        Ok(net)
    }

    /// Node `i`'s agent address.
    pub fn address(&self, i: usize) -> String {
        format!("{}.{}", self.subnet, i + 2)
    }
}

impl Drop for AgentNet {
    fn drop(&mut self) {
        for c in &mut self.agents {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.sock_dir);
        let _ = Command::new("ip").args(["netns", "del", &self.netns]).status();
        let _ = Command::new("ip").args(["link", "del", &self.host_if]).stderr(Stdio::null()).status();
    }
}

/// Serves each node's PodResources (the simulated kubelet's device assignments) on the
/// socket its agent reads. Call once, inside the runtime.
pub fn serve_pod_resources(client: &kube::Client, net: &mut AgentNet) {
    for (devices, listener) in &mut net.kubelets {
        let Some(l) = listener.take() else { continue };
        let l = match l.set_nonblocking(true).and_then(|()| tokio::net::UnixListener::from_std(l)) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("fabrik sim: a PodResources socket: {e}; that agent reports no GPU assignments");
                continue;
            }
        };
        tokio::spawn(podres::serve(client.clone(), devices.clone(), l));
    }
}

/// The agent DaemonSet's name (as in deploy/).
pub const DAEMONSET: &str = "fabrik-agent";

/// The agent pods, one per node, owned by the agent DaemonSet as a cluster has them (its
/// selector label, the port named `metrics`), each reporting its agent's address.
///
/// The pods are made here (so that each is named after its node and reports its agent's
/// address), then a real DaemonSet that runs on exactly these nodes takes them over: the
/// cockpit accepts agents only from pods a DaemonSet controls. Its update strategy is
/// OnDelete, so the DaemonSet controller keeps these pods rather than replacing them.
pub async fn create_pods(client: &kube::Client, nodes: &[String], net: &AgentNet) -> Result<(), String> {
    let pp = PostParams::default();
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {"name": NAMESPACE, "labels": {WORKLOAD_LABEL: "true"}}
    }))
    .map_err(|e| e.to_string())?;
    match Api::<Namespace>::all(client.clone()).create(&pp, &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(format!("creating namespace {NAMESPACE}: {}", describe(&e))),
    }
    // A DaemonSet left by an earlier run would replace the pods deleted below at once: let
    // it go first, leaving its pods (they are replaced next).
    let dss: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    let orphan = DeleteParams { propagation_policy: Some(PropagationPolicy::Orphan), ..Default::default() };
    let mut waited = 0;
    loop {
        match dss.delete(DAEMONSET, &orphan).await {
            Err(kube::Error::Api(s)) if s.code == 404 => break,
            Err(e) => return Err(format!("deleting the earlier agent DaemonSet: {}", describe(&e))),
            Ok(_) if waited >= 120 => return Err("the earlier agent DaemonSet is still there after 30 s".into()),
            Ok(_) => {
                waited += 1;
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
        }
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    for (i, node) in nodes.iter().enumerate() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("fabrik-agent-{node}"),
                "labels": {"app.kubernetes.io/name": "fabrik-agent", WORKLOAD_LABEL: "true"},
                "annotations": {super::kubelet::POD_IP_ANNOTATION: net.address(i)}},
            "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}], "automountServiceAccountToken": false,
                "containers": [{"name": "agent", "image": "fabrik",
                    "ports": [{"name": "metrics", "containerPort": 9400, "protocol": "TCP"}]}]}
        }))
        .map_err(|e| e.to_string())?;
        // A pod left by an earlier run names an address of that run: replace it.
        let mut tries = 0;
        loop {
            match pods.create(&pp, &pod).await {
                Ok(_) => break,
                Err(kube::Error::Api(s)) if s.code == 409 && tries < 40 => {
                    let name = format!("fabrik-agent-{node}");
                    let _ =
                        pods.delete(&name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await;
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                }
                Err(e) => return Err(format!("creating the agent pod of {node}: {}", describe(&e))),
            }
        }
    }
    // One term per node (terms are ORed; a field selector takes one value per term).
    let terms: Vec<serde_json::Value> = nodes
        .iter()
        .map(|n| json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]}))
        .collect();
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": DAEMONSET, "labels": {"app.kubernetes.io/name": "fabrik-agent", WORKLOAD_LABEL: "true"}},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": "fabrik-agent"}},
            "updateStrategy": {"type": "OnDelete"},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "fabrik-agent", WORKLOAD_LABEL: "true"}},
                "spec": {
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}},
                    "tolerations": [{"operator": "Exists"}], "automountServiceAccountToken": false,
                    "containers": [{"name": "agent", "image": "fabrik",
                        "ports": [{"name": "metrics", "containerPort": 9400, "protocol": "TCP"}]}]}}}
    }))
    .map_err(|e| e.to_string())?;
    let ds = dss.create(&pp, &ds).await.map_err(|e| format!("creating the agent DaemonSet: {}", describe(&e)))?;
    // The DaemonSet controller adopts matching pods on its nodes; set the same controller
    // reference here too, so the pods are the DaemonSet's at once however busy it is.
    let uid = ds.metadata.uid.clone().unwrap_or_default();
    let owner = json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
        "name": DAEMONSET, "uid": uid, "controller": true, "blockOwnerDeletion": true}]}});
    for node in nodes {
        let name = format!("fabrik-agent-{node}");
        pods.patch(&name, &PatchParams::default(), &Patch::Merge(&owner))
            .await
            .map_err(|e| format!("handing the agent pod of {node} to its DaemonSet: {}", describe(&e)))?;
    }
    Ok(())
}
