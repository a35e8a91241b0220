//! The simulated kubelet's device manager, as its PodResources API shows it: which of a
//! node's (fake) GPUs each pod asking for `nvidia.com/gpu` was given. `fabrik sim --agents`
//! serves it on a unix socket per node, and each fake agent reads it as a real agent reads
//! `/var/lib/kubelet/pod-resources/kubelet.sock`.
//!
//! The GPUs are the fake agent's own (`fabrik agent --fake 8 --seed i`): the same uuids,
//! GPU 1 in MIG mode and so not handed out whole. A pod named like one the fake agent shows
//! running on a GPU gets that GPU (so processes and assignment agree); any other pod gets
//! free GPUs from the highest index down (GPU 7 is the fake's idle one). An assignment
//! holds until the pod is gone, as a kubelet's does.
//!
//! On a node whose device plugin shares its GPUs (time-slicing, MPS) the kubelet hands out
//! replicas of the node's resource (`nvidia.com/gpu`, or `nvidia.com/gpu.shared` when
//! renamed) with device ids `<uuid>::<k>`, spread as the device plugin's distributed
//! allocation spreads them: each replica from the GPU with the fewest handed out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use super::model::SimNode;
use crate::agent::backend::Gpus;
use crate::agent::fake::FakeGpus;
use crate::agent::podres::{Assignment, answer_of, v1};
use crate::cluster::labels;
use crate::sim::{distribute, replica_id};

/// GPUs per fake agent (`--fake 8`).
pub const FAKE_GPUS: u32 = 8;

/// What the node's device plugin hands out: whole GPUs as `nvidia.com/gpu` (`replicas` 1),
/// or `replicas` per GPU of a shared resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sharing {
    pub resource: String,
    pub replicas: u32,
}

impl Default for Sharing {
    fn default() -> Self {
        Sharing { resource: labels::GPU_RESOURCE.to_string(), replicas: 1 }
    }
}

impl Sharing {
    pub fn of_node(n: &SimNode) -> Sharing {
        match &n.sharing {
            Some(s) => Sharing { resource: s.resource().to_string(), replicas: u32::from(s.replicas.max(1)) },
            None => Sharing::default(),
        }
    }
}

/// One node's device manager.
pub struct Devices {
    node: String,
    /// The fake agent's GPUs: uuid and whether it can be handed out (whole or shared).
    gpus: Vec<(String, bool)>,
    share: Sharing,
    /// `namespace/name` of the pod the fake agent shows on a GPU → that GPU.
    shown: HashMap<String, u32>,
    /// Pod uid → (namespace, name, [(container, [(GPU index, replica)])]); the replica is 0
    /// where GPUs are not shared.
    given: Mutex<HashMap<String, Given>>,
}

type Given = (String, String, Vec<(String, Vec<(u32, u32)>)>);

impl Devices {
    /// The device manager of `node`, whose agent runs with `--fake 8 --seed seed`, handing
    /// out GPUs as `share` says.
    pub fn new(node: &str, seed: u64, share: Sharing) -> Arc<Devices> {
        let mut fake = FakeGpus::new(node, FAKE_GPUS, seed);
        let (mut gpus, mut shown) = (Vec::new(), HashMap::new());
        if let Ok(s) = fake.sample(0) {
            for g in &s.gpus {
                gpus.push((g.uuid.clone(), !g.mig_enabled));
                for p in g.processes.iter().filter_map(|p| p.pod.as_ref()) {
                    if let (Some(ns), Some(name)) = (&p.namespace, &p.name) {
                        shown.insert(format!("{ns}/{name}"), g.index);
                    }
                }
            }
        }
        Arc::new(Devices { node: node.to_string(), gpus, share, shown, given: Mutex::default() })
    }

    /// Assigns GPUs to the pods now on the node (keeping earlier assignments, dropping
    /// those of pods that are gone or finished) and returns the kubelet's answer.
    pub fn assign(&self, pods: &[Pod]) -> Vec<Assignment> {
        let mut given = self.given.lock().unwrap_or_else(PoisonError::into_inner);
        let live: Vec<&Pod> = pods
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(self.node.as_str()))
            .filter(|p| !matches!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed")))
            .collect();
        let uid = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
        given.retain(|u, _| live.iter().any(|p| uid(p) == *u));
        for p in &live {
            let u = uid(p);
            if u.is_empty() || given.contains_key(&u) {
                continue;
            }
            let (ns, name) =
                (p.metadata.namespace.clone().unwrap_or_default(), p.metadata.name.clone().unwrap_or_default());
            let wants: Vec<(String, u32)> = p
                .spec
                .iter()
                .flat_map(|s| s.containers.iter())
                .filter_map(|c| {
                    let limits = c.resources.as_ref()?.limits.as_ref()?;
                    let n = limits.get(&self.share.resource)?.0.parse::<u32>().ok()?;
                    (n > 0).then(|| (c.name.clone(), n))
                })
                .collect();
            if wants.is_empty() {
                continue;
            }
            let mut taken: Vec<(u32, u32)> =
                given.values().flat_map(|(_, _, cs)| cs.iter().flat_map(|(_, g)| g.clone())).collect();
            // From the highest index down; the GPU the fake agent shows this pod on first.
            let mut order: Vec<u32> = (0..self.gpus.len() as u32).rev().filter(|i| self.gpus[*i as usize].1).collect();
            if let Some(i) = self.shown.get(&format!("{ns}/{name}")).copied()
                && let Some(k) = order.iter().position(|g| *g == i)
            {
                order.remove(k);
                order.insert(0, i);
            }
            let mut containers = Vec::new();
            for (c, n) in wants {
                let mut got = Vec::new();
                for _ in 0..n {
                    let Some(d) = self.next_free(&order, &taken) else { break };
                    taken.push(d);
                    got.push(d);
                }
                containers.push((c, got));
            }
            given.insert(u, (ns, name, containers));
        }
        drop(given);
        self.current()
    }

    /// The next device to hand out, given those `taken`: a free GPU in `order`, or on a
    /// shared node a replica of the GPU with the fewest handed out (distributed allocation),
    /// its lowest free replica number.
    fn next_free(&self, order: &[u32], taken: &[(u32, u32)]) -> Option<(u32, u32)> {
        let held: Vec<Option<u32>> =
            order.iter().map(|g| Some(taken.iter().filter(|(t, _)| t == g).count() as u32)).collect();
        let gpu = order[*distribute(&held, self.share.replicas, 1)?.first()?];
        let k = (0..self.share.replicas).find(|k| !taken.contains(&(gpu, *k)))?;
        Some((gpu, k))
    }

    /// The assignments as they stand.
    pub fn current(&self) -> Vec<Assignment> {
        let given = self.given.lock().unwrap_or_else(PoisonError::into_inner);
        let mut rows = Vec::new();
        for (ns, name, containers) in given.values() {
            for (c, gpus) in containers {
                for (g, k) in gpus {
                    let uuid = &self.gpus[*g as usize].0;
                    rows.push(Assignment {
                        namespace: ns.clone(),
                        pod: name.clone(),
                        container: c.clone(),
                        resource: self.share.resource.clone(),
                        device_id: if self.share.replicas > 1 { replica_id(uuid, *k) } else { uuid.clone() },
                    });
                }
            }
        }
        rows.sort_by(|a, b| (&a.namespace, &a.pod, &a.device_id).cmp(&(&b.namespace, &b.pod, &b.device_id)));
        rows
    }
}

/// Serves node `devices.node`'s PodResources (gRPC, the kubelet's `podresources/v1`) on
/// `listener`, from the pods the API server has bound there at the time of each call. An
/// API error answers with the assignments as they were (a kubelet keeps its own state).
pub async fn serve(client: kube::Client, devices: Arc<Devices>, listener: tokio::net::UnixListener) {
    let kubelet = Kubelet { api: Api::all(client), devices };
    let incoming = futures::stream::unfold(listener, |l| async move { Some((l.accept().await.map(|(s, _)| s), l)) });
    let svc = v1::pod_resources_lister_server::PodResourcesListerServer::new(kubelet);
    if let Err(e) = tonic::transport::Server::builder().serve_with_incoming(svc, incoming).await {
        eprintln!("fabrik sim: pod-resources server: {e}");
    }
}

/// The simulated kubelet's `PodResourcesLister`: `List` only, as fabrik's agent calls.
struct Kubelet {
    api: Api<Pod>,
    devices: Arc<Devices>,
}

#[tonic::async_trait]
impl v1::pod_resources_lister_server::PodResourcesLister for Kubelet {
    async fn list(
        &self,
        _: tonic::Request<v1::ListPodResourcesRequest>,
    ) -> Result<tonic::Response<v1::ListPodResourcesResponse>, tonic::Status> {
        let lp = ListParams::default().fields(&format!("spec.nodeName={}", self.devices.node));
        let rows = match self.api.list(&lp).await {
            Ok(list) => self.devices.assign(&list.items),
            Err(_) => self.devices.current(),
        };
        Ok(tonic::Response::new(answer_of(&rows)))
    }

    async fn get_allocatable_resources(
        &self,
        _: tonic::Request<v1::AllocatableResourcesRequest>,
    ) -> Result<tonic::Response<v1::AllocatableResourcesResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("the simulated kubelet serves List only"))
    }

    async fn get(
        &self,
        _: tonic::Request<v1::GetPodResourcesRequest>,
    ) -> Result<tonic::Response<v1::GetPodResourcesResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("the simulated kubelet serves List only"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(uid: &str, ns: &str, name: &str, node: &str, gpus: u32, phase: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"uid": uid, "namespace": ns, "name": name},
            "spec": {"nodeName": node, "containers": [{"name": "main",
                "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]},
            "status": {"phase": phase}
        }))
        .expect("pod json")
    }

    #[test]
    fn gpus_are_given_like_a_kubelet_gives_them() {
        let d = Devices::new("n1", 3, Sharing::default());
        let uuid = |i: usize| d.gpus[i].0.clone();
        // A pod the fake agent shows on GPU 2 gets GPU 2; another gets the top free GPUs.
        let shown = d.shown.iter().find(|(_, g)| **g == 2).map(|(p, _)| p.clone()).expect("a pod on GPU 2");
        let (sns, sname) = shown.split_once('/').expect("ns/name");
        let pods = vec![
            pod("u1", sns, sname, "n1", 1, "Running"),
            pod("u2", "nb", "sleeper", "n1", 2, "Running"),
            pod("u3", "x", "elsewhere", "n2", 1, "Running"),
            pod("u4", "x", "done", "n1", 1, "Succeeded"),
        ];
        let rows = d.assign(&pods);
        let of = |name: &str| rows.iter().filter(|r| r.pod == name).map(|r| r.device_id.clone()).collect::<Vec<_>>();
        assert_eq!(of(sname), vec![uuid(2)]);
        let mut want = vec![uuid(7), uuid(6)];
        want.sort();
        assert_eq!(of("sleeper"), want);
        assert!(of("elsewhere").is_empty() && of("done").is_empty());
        // Stable while the pod lives; freed when it goes; MIG GPU 1 is never given whole.
        assert_eq!(d.assign(&pods), rows);
        let rows = d.assign(&[pod("u5", "nb", "greedy", "n1", 8, "Running")]);
        assert_eq!(rows.len(), 7, "8 GPUs but one is in MIG mode: {rows:?}");
        assert!(!rows.iter().any(|r| r.device_id == uuid(1)));
    }

    fn pod_of(uid: &str, name: &str, resource: &str, n: u32) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"uid": uid, "namespace": "ns", "name": name},
            "spec": {"nodeName": "n1", "containers": [{"name": "main",
                "resources": {"limits": {resource: n.to_string()}}}]},
            "status": {"phase": "Running"}
        }))
        .expect("pod json")
    }

    #[test]
    fn replicas_of_shared_gpus_are_spread_and_named_uuid_k() {
        let share = Sharing { resource: labels::GPU_SHARED_RESOURCE.into(), replicas: 4 };
        let d = Devices::new("n1", 3, share);
        // Pods asking for the plain resource get nothing on a renamed node.
        assert!(d.assign(&[pod_of("u0", "plain", "nvidia.com/gpu", 1)]).is_empty());
        // 7 shareable GPUs (GPU 1 is in MIG mode): 7 one-replica pods land on 7 GPUs, the
        // next two-replica pod on two GPUs again.
        let mut pods: Vec<Pod> =
            (0..7).map(|i| pod_of(&format!("u{i}"), &format!("p{i}"), labels::GPU_SHARED_RESOURCE, 1)).collect();
        pods.push(pod_of("u9", "two", labels::GPU_SHARED_RESOURCE, 2));
        let rows = d.assign(&pods);
        assert_eq!(rows.len(), 9);
        let gpu_of = |id: &str| {
            let (uuid, k) = id.split_once("::").expect("a replica id");
            let i = d.gpus.iter().position(|(u, _)| u == uuid).expect("a GPU of the node");
            (i, k.parse::<u32>().expect("a replica number"))
        };
        let mut per_gpu = [0u32; 8];
        for r in &rows {
            assert_eq!(r.resource, labels::GPU_SHARED_RESOURCE);
            let (i, k) = gpu_of(&r.device_id);
            assert!(i != 1 && k < 4, "{r:?}");
            per_gpu[i] += 1;
        }
        assert_eq!(per_gpu.iter().filter(|n| **n == 1).count(), 5, "{per_gpu:?}");
        assert_eq!(per_gpu.iter().filter(|n| **n == 2).count(), 2, "{per_gpu:?}");
        let two: Vec<usize> = rows.iter().filter(|r| r.pod == "two").map(|r| gpu_of(&r.device_id).0).collect();
        assert_ne!(two[0], two[1], "two replicas on two GPUs");
        // Full: 28 replicas in all, never more than 4 of a GPU, each id once.
        pods.push(pod_of("u10", "greedy", labels::GPU_SHARED_RESOURCE, 40));
        let rows = d.assign(&pods);
        assert_eq!(rows.len(), 28);
        let mut ids: Vec<&str> = rows.iter().map(|r| r.device_id.as_str()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 28);
    }
}
