//! Quotas: ResourceQuotas and Kueue ClusterQueue quotas, filed under their tenant, and
//! what the pods of a ResourceQuota's namespace ask for in its resource.

use super::*;

impl Fleet {
    pub(super) fn upsert_quota(&mut self, spec: QuotaSpec) {
        let tid = match self.tenant_by_name(&spec.tenant) {
            Some(t) => t,
            None => {
                self.upsert_tenant(TenantSpec { name: spec.tenant.clone(), namespaces: vec![], source: "quota".into() })
            }
        };
        let source = self.intern_source(&spec.source);
        let resource = self.interner.intern(&spec.resource);
        // A resourceVersion changes with every write (a quota's status with every pod in its
        // namespace): interned, each would be kept for good.
        let version = spec.version.into_boxed_str();
        let quota = Quota {
            tenant: tid,
            source: source.clone(),
            resource,
            hard: spec.hard,
            used: spec.used,
            version,
            borrowing_limit: spec.borrowing_limit,
            lending_limit: spec.lending_limit,
        };
        let existing = self.tenant(tid).and_then(|t| {
            t.quotas
                .iter()
                .copied()
                .find(|&q| self.quotas.get(q).is_some_and(|x| x.source == source && x.resource == resource))
        });
        match existing {
            Some(q) => {
                if let Some(x) = self.quotas.get_mut(q) {
                    *x = quota;
                }
            }
            None => {
                let q = self.quotas.insert(quota);
                if let Some(t) = self.tenants.get_mut(tid) {
                    t.quotas.push(q);
                }
            }
        }
        self.refresh_tenant_alerts(tid);
    }

    fn intern_source(&mut self, s: &QuotaSourceSpec) -> QuotaSource {
        match s {
            QuotaSourceSpec::ResourceQuota { namespace, name } => QuotaSource::ResourceQuota {
                namespace: self.interner.intern(namespace),
                name: self.interner.intern(name),
            },
            QuotaSourceSpec::ClusterQueue { queue, flavor } => {
                QuotaSource::ClusterQueue { queue: self.interner.intern(queue), flavor: self.interner.intern(flavor) }
            }
        }
    }

    pub(super) fn remove_quota(&mut self, tenant: &str, source: &QuotaSourceSpec, resource: &str) -> bool {
        let Some(tid) = self.tenant_by_name(tenant) else { return false };
        let source = self.intern_source(source);
        let Some(resource) = self.interner.get(resource) else { return false };
        let Some(t) = self.tenants.get_mut(tid) else { return false };
        let quotas = &mut self.quotas;
        let Some(pos) =
            t.quotas.iter().position(|&q| quotas.get(q).is_some_and(|x| x.source == source && x.resource == resource))
        else {
            return false;
        };
        let q = t.quotas.remove(pos);
        quotas.remove(q);
        self.refresh_tenant_alerts(tid);
        true
    }

    // A quota's own numbers: what it counts is what the pods of its namespace ask for.

    /// What the unfinished pods of a ResourceQuota's namespace ask for in exactly that
    /// quota's resource, as the quota controller counts it: `requests.nvidia.com/gpu` counts
    /// `nvidia.com/gpu` requests, `requests.nvidia.com/mig-…` that MIG resource, and
    /// `<class>.deviceclass.resource.k8s.io/devices` the devices of the namespace's DRA claims
    /// of that class (each claim once, however many pods share it). Succeeded and Failed pods
    /// are not counted (the quota controller does not count them either). `None` where the
    /// cockpit cannot know: a Kueue ClusterQueue (its admission is Kueue's, see its used), or
    /// a resource the cockpit does not track.
    /// What the namespace's pods holding `resource` (`nvidia.com/gpu` or `.shared`, with or
    /// without `requests.`) come to in physical GPUs, in thousandths: whole GPUs count 1000,
    /// a replica of a GPU shared ×R 1000/R. `None` for another resource or a ClusterQueue.
    pub fn quota_physical_milli(&self, q: &Quota) -> Option<u64> {
        let QuotaSource::ResourceQuota { namespace, .. } = q.source else { return None };
        let key = self.str_of(q.resource);
        let renamed = match key.strip_prefix("requests.").unwrap_or(key) {
            "nvidia.com/gpu" => false,
            crate::model::sharing::GPU_SHARED_RESOURCE => true,
            _ => return None,
        };
        let pods = self.idx.pods_in(namespace).filter_map(|p| self.pod(p));
        let held = pods.filter(|p| p.node.is_some() && p.phase.holds_devices() && p.gpus_renamed == renamed);
        Some(
            held.map(|p| {
                let replicas = p.node.and_then(|n| self.node(n)).map_or(1, |n| n.sharing.replicas.max(1));
                u64::from(p.gpus) * 1000 / u64::from(replicas)
            })
            .sum(),
        )
    }

    pub fn quota_requested(&self, q: &Quota) -> Option<i64> {
        let QuotaSource::ResourceQuota { namespace, .. } = q.source else { return None };
        let key = self.str_of(q.resource);
        enum Counts<'a> {
            Gpus { renamed: bool },
            Mig(Sym),
            Dra(&'a str),
        }
        let what = if let Some(class) = key.strip_suffix(".deviceclass.resource.k8s.io/devices") {
            Counts::Dra(class)
        } else {
            match key.strip_prefix("requests.") {
                Some("nvidia.com/gpu") => Counts::Gpus { renamed: false },
                Some(crate::model::sharing::GPU_SHARED_RESOURCE) => Counts::Gpus { renamed: true },
                Some(r) if r.starts_with("nvidia.com/mig-") => {
                    // A MIG resource no pod names was never interned: nobody asks for it.
                    match self.interner.get(r) {
                        Some(sym) => Counts::Mig(sym),
                        None => return Some(0),
                    }
                }
                _ => return None,
            }
        };
        let pods = self.idx.pods_in(namespace).filter_map(|p| self.pod(p));
        let pods = pods.filter(|p| !p.phase.finished());
        let total = match what {
            Counts::Gpus { renamed } => pods.filter(|p| p.gpus_renamed == renamed).map(|p| i64::from(p.gpus)).sum(),
            Counts::Mig(sym) => pods.flat_map(|p| &p.mig).filter(|(r, _)| *r == sym).map(|(_, n)| i64::from(*n)).sum(),
            Counts::Dra(class) => {
                let mut seen = BTreeSet::new();
                pods.flat_map(|p| &p.dra)
                    .filter(|c| self.str_of(c.device_class) == class && seen.insert(&*c.claim))
                    .map(|c| i64::from(c.count))
                    .sum()
            }
        };
        Some(total)
    }
}

#[cfg(test)]
mod quota_scope_tests {
    use super::*;
    use crate::quantity::Quantity;

    fn pod(ns: &str, name: &str, phase: Phase, gpus: u16, mig: &[&str], dra: &[(&str, &str)]) -> PodSpec {
        PodSpec {
            namespace: ns.into(),
            name: name.into(),
            node: None,
            phase,
            created: 0,
            started: None,
            owner: Owner::Job,
            owner_name: String::new(),
            app: "app".into(),
            empty_dir: false,
            gpus,
            gpus_renamed: false,
            mig: mig.iter().map(|r| (r.to_string(), 1)).collect(),
            dra: dra
                .iter()
                .map(|(claim, class)| DraClaimSpec {
                    claim: claim.to_string(),
                    device_class: class.to_string(),
                    count: 1,
                    allocated: None,
                })
                .collect(),
            claim_templates: Vec::new(),
            bound_gpus: vec![],
            bound_mig: vec![],
            deletion: None,
            container_waiting: None,
            restarts: Default::default(),
        }
    }

    fn quota(f: &mut Fleet, tenant: &str, source: QuotaSourceSpec, resource: &str) -> QuotaId {
        f.apply(Delta::QuotaUpsert(QuotaSpec {
            tenant: tenant.into(),
            source,
            resource: resource.into(),
            hard: Quantity::from_int(10, crate::quantity::Format::DecimalSI),
            used: Quantity::zero(),
            version: "1".into(),
            borrowing_limit: None,
            lending_limit: None,
        }));
        f.quota_ids().last().expect("a quota")
    }

    fn rq(ns: &str) -> QuotaSourceSpec {
        QuotaSourceSpec::ResourceQuota { namespace: ns.into(), name: "q".into() }
    }

    #[test]
    fn a_quota_counts_only_its_namespace_and_its_exact_resource() {
        let mut f = Fleet::default();
        let ns = |n: &[&str]| n.iter().map(|s| s.to_string()).collect();
        f.apply(Delta::TenantUpsert(TenantSpec {
            name: "ft".into(),
            namespaces: ns(&["ft", "ft-dev"]),
            source: "label".into(),
        }));
        f.apply(Delta::TenantUpsert(TenantSpec { name: "rs".into(), namespaces: ns(&["rs"]), source: "label".into() }));
        for i in 0..3 {
            f.apply(Delta::PodUpsert(pod("ft", &format!("a{i}"), Phase::Running, 4, &[], &[])));
        }
        f.apply(Delta::PodUpsert(pod("ft", "pending", Phase::Pending, 2, &[], &[])));
        // Finished pods hold nothing and the quota controller does not count them.
        f.apply(Delta::PodUpsert(pod("ft", "done", Phase::Succeeded, 8, &[], &[])));
        f.apply(Delta::PodUpsert(pod("ft", "failed", Phase::Failed, 8, &[], &[])));
        f.apply(Delta::PodUpsert(pod("ft-dev", "d", Phase::Running, 1, &[], &[])));
        f.apply(Delta::PodUpsert(pod("ft", "m1", Phase::Running, 0, &["nvidia.com/mig-1g.10gb"], &[])));
        f.apply(Delta::PodUpsert(pod("ft", "m2", Phase::Running, 0, &["nvidia.com/mig-2g.20gb"], &[])));
        // DRA: two pods share one claim; a claim of another class; a finished pod's claim.
        let gpu = "gpu.nvidia.com";
        f.apply(Delta::PodUpsert(pod("rs", "r0", Phase::Running, 0, &[], &[("c0", gpu)])));
        f.apply(Delta::PodUpsert(pod("rs", "r1", Phase::Running, 0, &[], &[("c0", gpu)])));
        f.apply(Delta::PodUpsert(pod("rs", "r2", Phase::Pending, 0, &[], &[("c2", gpu)])));
        f.apply(Delta::PodUpsert(pod("rs", "r3", Phase::Running, 0, &[], &[("c3", "mig.nvidia.com")])));
        f.apply(Delta::PodUpsert(pod("rs", "r4", Phase::Succeeded, 0, &[], &[("c4", gpu)])));

        let cases = [
            ("ft", "ft", "requests.nvidia.com/gpu", Some(14)),
            ("ft", "ft-dev", "requests.nvidia.com/gpu", Some(1)),
            ("ft", "ft", "requests.nvidia.com/mig-1g.10gb", Some(1)),
            ("ft", "ft", "requests.nvidia.com/mig-3g.40gb", Some(0)),
            ("ft", "ft", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices", Some(0)),
            ("rs", "rs", "requests.nvidia.com/gpu", Some(0)),
            ("rs", "rs", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices", Some(2)),
            ("rs", "rs", "mig.nvidia.com.deviceclass.resource.k8s.io/devices", Some(1)),
            // Not a resource the cockpit tracks, and not a quota that ResourceQuota counts.
            ("rs", "rs", "requests.cpu", None),
            ("rs", "rs", "nvidia.com/gpu", None),
            ("rs", "nobody-here", "requests.nvidia.com/gpu", Some(0)),
        ];
        for (tenant, ns, resource, want) in cases {
            let q = quota(&mut f, tenant, rq(ns), resource);
            let got = f.quota(q).and_then(|q| f.quota_requested(q));
            assert_eq!(got, want, "{ns} {resource}");
        }
        let cq = QuotaSourceSpec::ClusterQueue { queue: "cq".into(), flavor: "h100".into() };
        let q = quota(&mut f, "ft", cq, "nvidia.com/gpu");
        assert_eq!(f.quota(q).and_then(|q| f.quota_requested(q)), None, "Kueue admits, not the cockpit");
    }
}
