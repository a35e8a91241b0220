//! DRA's alpha features on GPUs (partitions, capacity shares, taints) and ComputeDomains,
//! with the alerts they raise: a tainted GPU, a domain that is not Ready.

use super::*;

impl Fleet {
    /// Sets what DRA says about GPU `uuid`; `false` when the GPU is unknown or nothing changed.
    pub(super) fn set_gpu_dra(&mut self, uuid: &str, dra: GpuDra) -> bool {
        let Some(gid) = self.gpu_by_uuid(uuid) else { return false };
        let new = (!dra.is_empty()).then(|| Box::new(dra));
        let Some(g) = self.gpus.get(gid) else { return false };
        if g.dra == new {
            return false;
        }
        // Pods bound to it count differently when it is (or stops being) shared by capacity,
        // or when their share of it changes: take them back first, link them again after.
        let pods = g.pods.clone();
        for p in &pods {
            self.unlink_pod(*p);
        }
        if let Some(g) = self.gpus.get_mut(gid) {
            g.dra = new;
        }
        self.link_all(pods);
        self.refresh_taint_alert(gid);
        if let Some(node) = self.gpu(gid).map(|g| g.node) {
            self.refresh_node_alloc(node);
        }
        true
    }

    fn refresh_taint_alert(&mut self, gid: GpuId) {
        let key = (AlertKind::DeviceTaint, AlertTarget::Gpu(gid));
        let Some(g) = self.gpu(gid) else {
            self.alerts.remove(&key);
            return;
        };
        let Some(t) = g.dra.as_ref().and_then(|d| d.worst_taint()) else {
            self.alerts.remove(&key);
            return;
        };
        let node = self.node(g.node).map(|n| self.str_of(n.name)).unwrap_or("?");
        let by = match &t.rule {
            Some(r) => format!("DeviceTaintRule {r}"),
            None => "its DRA driver".to_string(),
        };
        let what = if t.evicts() { "pods using it are evicted" } else { "no new claim gets it" };
        let message = format!("GPU {node}/{} ({}) tainted {} by {by}: {what}", g.index, t.device, t.text());
        let since = t.since.unwrap_or(self.now);
        let alert = Alert { kind: AlertKind::DeviceTaint, target: AlertTarget::Gpu(gid), since, message };
        self.alerts.insert(key, alert);
    }

    pub(super) fn upsert_domain(&mut self, spec: ComputeDomainSpec) {
        let key = spec.key();
        let target = AlertTarget::Domain(key.as_str().into());
        let alert_key = (AlertKind::DomainNotReady, target.clone());
        // Not Ready once the controller said so; a domain without a status yet is starting.
        if !spec.ready() && !spec.status.is_empty() {
            let since = self.alerts.get(&alert_key).map_or(self.now, |a| a.since);
            let message = format!(
                "ComputeDomain {key} is {}: {}/{} nodes ready (IMEX)",
                spec.status,
                spec.nodes_ready(),
                spec.num_nodes
            );
            self.alerts.insert(alert_key, Alert { kind: AlertKind::DomainNotReady, target, since, message });
        } else {
            self.alerts.remove(&alert_key);
        }
        self.domains.insert(key, spec);
    }

    pub(super) fn remove_domain(&mut self, key: &str) -> bool {
        self.alerts.remove(&(AlertKind::DomainNotReady, AlertTarget::Domain(key.into())));
        self.domains.remove(key).is_some()
    }

    /// The tenant of a ComputeDomain: its namespace's.
    pub fn domain_tenant(&self, d: &ComputeDomainSpec) -> Option<&str> {
        self.namespace_tenant(&d.namespace)
    }

    /// The tenant of namespace `namespace`, by name.
    pub fn namespace_tenant(&self, namespace: &str) -> Option<&str> {
        let ns = self.interner.get(namespace)?;
        let tid = self.idx.tenant_by_ns.get(&ns)?;
        self.tenant(*tid).map(|t| self.str_of(t.name))
    }

    /// The workload of a ComputeDomain: the pods that joined it and have not finished, by
    /// name. A pod joins by a claim made from the domain's channel ResourceClaimTemplate
    /// (in the domain's namespace); the driver then runs the IMEX channel on its node.
    pub fn domain_pods(&self, d: &ComputeDomainSpec) -> Vec<&Pod> {
        let (Some(ns), Some(t)) = (self.interner.get(&d.namespace), self.interner.get(&d.claim_template)) else {
            return Vec::new();
        };
        let mut pods: Vec<&Pod> = self
            .idx
            .template_pods
            .get(&(ns, t))
            .into_iter()
            .flatten()
            .filter_map(|pid| self.pod(*pid))
            .filter(|p| !p.phase.finished())
            .collect();
        pods.sort_by(|a, b| a.name.cmp(&b.name));
        pods
    }
}
