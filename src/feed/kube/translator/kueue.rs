//! Kueue Workloads: read one at a time; a Workload not admitted yet waits in the
//! ClusterQueue its LocalQueue names, which may change (or arrive) after it.

use kube::api::DynamicObject;

use super::{Translator, split};
use crate::cluster::kueue;
use crate::model::{Delta, KueueWorkload};

impl Translator {
    pub(super) fn workload(&mut self, o: Option<&DynamicObject>, key: &str, out: &mut Vec<Delta>) {
        match o.and_then(kueue::workload) {
            Some(w) => {
                out.push(Delta::WorkloadUpsert(self.placed(&w)));
                self.workloads.insert(key.to_string(), w);
            }
            None => {
                self.workloads.remove(key);
                let (namespace, name) = split(key);
                out.push(Delta::WorkloadRemove { namespace, name });
            }
        }
    }

    /// `w` with its ClusterQueue: the one Kueue admitted it to, else its LocalQueue's.
    fn placed(&self, w: &KueueWorkload) -> KueueWorkload {
        let mut w = w.clone();
        if w.cluster_queue.is_empty()
            && let Some(cq) = self.local_queues.get(&format!("{}/{}", w.namespace, w.queue))
        {
            w.cluster_queue = cq.clone();
        }
        w
    }

    /// LocalQueue `lq` (`namespace/name`) changed: the Workloads that wait in it (not yet
    /// admitted anywhere) are sent again with its ClusterQueue now.
    pub(super) fn requeue_workloads(&mut self, lq: &str, out: &mut Vec<Delta>) {
        let (ns, name) = split(lq);
        let mut keys: Vec<&String> = self
            .workloads
            .iter()
            .filter(|(_, w)| w.namespace == ns && w.queue == name && w.cluster_queue.is_empty())
            .map(|(k, _)| k)
            .collect();
        keys.sort();
        for k in keys {
            if let Some(w) = self.workloads.get(k) {
                out.push(Delta::WorkloadUpsert(self.placed(w)));
            }
        }
    }
}
