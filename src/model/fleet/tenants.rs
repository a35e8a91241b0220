//! Tenants: who the pods belong to (by namespace), their usage, and the over-quota alert.

use super::*;

impl Fleet {
    /// The tenant's hard limit on whole GPUs (sum of its GPU quotas), if it has one.
    pub fn tenant_gpu_quota(&self, t: &Tenant) -> Option<i64> {
        t.gpu_quota(&self.quotas, &self.gpu_resources)
    }
    /// Share-seconds of tenant `tid`: for each of its pods holding replicas of a shared GPU
    /// (time-slicing, MPS) now, the replicas × the time since the kubelet started it
    /// (`status.startTime`), summed, in whole seconds. Pods that are gone are not remembered,
    /// so this is what the tenant's current holders have held, not its history. O(1): from
    /// the two sums the counters keep.
    pub fn tenant_share_seconds(&self, tid: TenantId) -> u64 {
        let Some(u) = self.tenant(tid).map(|t| &t.usage) else { return 0 };
        (u64::from(u.started_shares) * self.now).saturating_sub(u.started_share_ms) / 1000
    }

    pub fn is_gpu_resource(&self, resource: Sym) -> bool {
        self.gpu_resources.contains(&resource)
    }

    pub(super) fn upsert_tenant(&mut self, spec: TenantSpec) -> TenantId {
        let name = self.interner.intern(&spec.name);
        let namespaces: Vec<Sym> = spec.namespaces.iter().map(|n| self.interner.intern(n)).collect();
        let source = self.interner.intern(&spec.source);
        let mut touched: Vec<Sym> = namespaces.clone();
        let tid = match self.idx.tenant_by_name.get(&name).copied() {
            Some(tid) => {
                if let Some(t) = self.tenants.get_mut(tid) {
                    for ns in &t.namespaces {
                        // Only what is still this tenant's: another may have taken it already.
                        if self.idx.tenant_by_ns.get(ns) == Some(&tid) {
                            self.idx.tenant_by_ns.remove(ns);
                        }
                    }
                    touched.extend(t.namespaces.iter().copied());
                    t.namespaces = namespaces.clone();
                    t.source = source;
                }
                tid
            }
            None => {
                let tid = self.tenants.insert(Tenant {
                    name,
                    namespaces: namespaces.clone(),
                    source,
                    quotas: Vec::new(),
                    usage: TenantUsage::default(),
                });
                self.idx.tenant_by_name.insert(name, tid);
                tid
            }
        };
        for ns in namespaces {
            self.idx.tenant_by_ns.insert(ns, tid);
        }
        // Pods follow their namespace to its tenant now (a namespace labelled, a vCluster or
        // a LocalQueue appearing), with every counter moved along.
        touched.sort();
        touched.dedup();
        for ns in touched {
            self.retenant_pods(ns);
        }
        self.refresh_netpol_alert(tid);
        tid
    }

    fn retenant_pods(&mut self, ns: Sym) {
        let pids: Vec<PodId> = self.idx.pods_in(ns).collect();
        if pids.is_empty() {
            return;
        }
        let target = self.tenant_for_namespace(ns);
        for pid in pids {
            if self.pod(pid).is_some_and(|p| p.tenant != target) {
                self.unlink_pod(pid);
                if let Some(p) = self.pods.get_mut(pid) {
                    p.tenant = target;
                }
                self.link_pod(pid);
            }
        }
    }

    pub(super) fn tenant_for_namespace(&mut self, ns: Sym) -> TenantId {
        if let Some(t) = self.idx.tenant_by_ns.get(&ns) {
            return *t;
        }
        let name = self.str_of(ns).to_string();
        self.upsert_tenant(TenantSpec { name: name.clone(), namespaces: vec![name], source: "namespace".into() })
    }

    pub(super) fn remove_tenant(&mut self, tid: TenantId) {
        let has_pods = self.pods.values().any(|p| p.tenant == tid);
        let Some(t) = self.tenants.get_mut(tid) else { return };
        // A tenant with pods stays (its pods still need an owner); it only loses its namespaces' mapping.
        for ns in &t.namespaces {
            if self.idx.tenant_by_ns.get(ns) == Some(&tid) {
                self.idx.tenant_by_ns.remove(ns);
            }
        }
        if has_pods {
            self.refresh_netpol_alert(tid);
            return;
        }
        self.alerts.retain(|(_, t), _| *t != AlertTarget::Tenant(tid));
        let name = t.name;
        for q in std::mem::take(&mut t.quotas) {
            self.quotas.remove(q);
        }
        self.idx.tenant_by_name.remove(&name);
        self.tenants.remove(tid);
    }

    pub(super) fn refresh_tenant_alerts(&mut self, tid: TenantId) {
        let Some(t) = self.tenant(tid) else { return };
        let key = (AlertKind::OverQuota, AlertTarget::Tenant(tid));
        match self.tenant_gpu_quota(t) {
            Some(hard) if t.usage.requested_gpus as i64 > hard => {
                let message =
                    format!("tenant {} requests {} GPUs, quota {hard}", self.str_of(t.name), t.usage.requested_gpus);
                self.set_alert(key, message);
            }
            _ => {
                self.alerts.remove(&key);
            }
        }
        let Some(t) = self.tenant(tid) else { return };
        let key = (AlertKind::CrashLoop, AlertTarget::Tenant(tid));
        match (t.usage.crash_looping, t.usage.crash_looping_devices) {
            (0, _) => {
                self.alerts.remove(&key);
            }
            (pods, devices) => {
                let (s, they) = if pods == 1 { ("", "it holds") } else { ("s", "they hold") };
                let message = format!(
                    "tenant {}: {pods} pod{s} crash-looping (CrashLoopBackOff), idle on the {devices} GPU device{} {they}",
                    self.str_of(t.name),
                    if devices == 1 { "" } else { "s" }
                );
                self.set_alert(key, message);
            }
        }
    }
}
