//! `Indexes`: how the fleet finds its objects by the names deltas use (node name, GPU and
//! MIG uuid, namespace and pod name, tenant and namespace), and which pods are where.

use super::super::intern::{FastMap, Sym};
use super::super::types::{GpuId, NodeId, PodId, TenantId};

#[derive(Clone, Debug, Default)]
pub(super) struct Indexes {
    pub node_by_name: FastMap<Sym, NodeId>,
    pub gpu_by_uuid: FastMap<Sym, GpuId>,
    /// Other names of a GPU: the NVML uuid a node agent reports for a GPU the cluster
    /// announces only by node labels (learned when its samples are matched by node and index).
    pub gpu_alias: FastMap<String, GpuId>,
    /// MIG instance uuid → its GPU and its index among the GPU's instances.
    pub mig_by_uuid: FastMap<Sym, (GpuId, u8)>,
    /// Namespace → pod name → pod.
    pub pod_by_name: FastMap<Sym, FastMap<Box<str>, PodId>>,
    pub pods_by_node: FastMap<NodeId, Vec<PodId>>,
    pub tenant_by_name: FastMap<Sym, TenantId>,
    pub tenant_by_ns: FastMap<Sym, TenantId>,
    /// (namespace, ResourceClaimTemplate) → the pods with a claim made from it.
    pub template_pods: FastMap<(Sym, Sym), Vec<PodId>>,
    /// Pods that name a node the fleet has not seen yet, by node name.
    pub waiting: FastMap<Sym, Vec<PodId>>,
}

impl Indexes {
    /// The pod `name` in namespace `ns`.
    pub fn pod(&self, ns: Sym, name: &str) -> Option<PodId> {
        self.pod_by_name.get(&ns)?.get(name).copied()
    }

    /// The pods of namespace `ns`, in no particular order.
    pub fn pods_in(&self, ns: Sym) -> impl Iterator<Item = PodId> + '_ {
        self.pod_by_name.get(&ns).into_iter().flat_map(|m| m.values().copied())
    }

    /// Whether namespace `ns` has a pod `name`.
    pub fn has_pod(&self, ns: Sym, name: &str) -> bool {
        self.pod_by_name.get(&ns).is_some_and(|m| m.contains_key(name))
    }

    /// Stops waiting for node `name` on behalf of pod `pid`.
    pub fn stop_waiting(&mut self, name: Sym, pid: PodId) {
        if let Some(w) = self.waiting.get_mut(&name) {
            w.retain(|x| *x != pid);
            if w.is_empty() {
                self.waiting.remove(&name);
            }
        }
    }
}
