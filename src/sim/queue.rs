//! Kueue's ClusterQueues on the simulated world (`cq-<tenant>` for the tenants whose quota is
//! Kueue's): a held queue admits nothing more — the world starts no new pod in its
//! namespaces — and a drained one also stops what it admitted, as Kueue's eviction does.

use super::world::Sim;
use crate::ops::StopPolicy;
use crate::ops::target::QueueView;

impl Sim {
    /// The namespaces ClusterQueue `queue` serves, if the world has it.
    fn queue_namespaces(&self, queue: &str) -> Option<Vec<String>> {
        self.tenants
            .iter()
            .find(|t| t.source == "kueue" && format!("cq-{}", t.name) == queue)
            .map(|t| t.namespaces.clone())
    }

    /// Whether a held queue serves `namespace` (nothing new starts there).
    pub(super) fn held(&self, namespace: &str) -> bool {
        self.queue_policy.iter().any(|(q, p)| {
            *p != StopPolicy::None && self.queue_namespaces(q).is_some_and(|ns| ns.iter().any(|n| n == namespace))
        })
    }

    pub(super) fn queue_view(&self, queue: &str) -> Option<QueueView> {
        let ns = self.queue_namespaces(queue)?;
        let policy = self.queue_policy.get(queue).copied().unwrap_or(StopPolicy::None);
        let live =
            self.pods.values().filter(|p| ns.contains(&p.spec.namespace) && p.terminating.is_none()).count() as i64;
        let active = if policy == StopPolicy::None {
            (true, "Ready".to_string(), "Can admit new workloads".to_string())
        } else {
            (false, "Stopped".to_string(), "Can't admit new workloads; clusterQueue is stopped".to_string())
        };
        Some(QueueView {
            stop_policy: if policy == StopPolicy::None { String::new() } else { policy.as_str().to_string() },
            active: Some(active),
            reserving: live,
            admitted: live,
        })
    }

    pub(super) fn set_stop_policy(&mut self, queue: &str, policy: StopPolicy) -> Result<(), String> {
        let ns = self.queue_namespaces(queue).ok_or_else(|| format!("ClusterQueue {queue}: not found"))?;
        self.queue_policy.insert(queue.to_string(), policy);
        if policy == StopPolicy::HoldAndDrain {
            let keys: Vec<String> =
                self.pods.iter().filter(|(_, p)| ns.contains(&p.spec.namespace)).map(|(k, _)| k.clone()).collect();
            for k in keys {
                self.terminate_pod(&k);
            }
        }
        Ok(())
    }
}
