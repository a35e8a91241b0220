//! Pods: filed by namespace and name, linked to their node, tenant and devices. Linking
//! adds a pod's whole effect on the counters and unlinking takes exactly that back, so any
//! change is an unlink, the change, and a link. PodDisruptionBudgets live here too.

use super::counters::PodContrib;
use super::*;

impl Fleet {
    /// Pods of a PDB (same namespace, matching app label).
    pub fn pdb_for_pod(&self, pod: &Pod) -> Option<&Pdb> {
        self.pdbs
            .iter()
            .find(|p| p.namespace == pod.namespace && p.selector_app == pod.app && pod.app != Sym::default())
    }

    pub fn pod_display(&self, pod: &Pod) -> String {
        format!("{}/{}", self.str_of(pod.namespace), pod.name)
    }

    pub(super) fn upsert_pdb(&mut self, spec: PdbSpec) {
        let ns = self.interner.intern(&spec.namespace);
        let name = self.interner.intern(&spec.name);
        let pdb = Pdb {
            namespace: ns,
            name,
            selector_app: self.interner.intern(&spec.selector_app),
            disruptions_allowed: spec.disruptions_allowed,
            current_healthy: spec.current_healthy,
            desired_healthy: spec.desired_healthy,
        };
        match self.pdbs.iter_mut().find(|p| p.namespace == ns && p.name == name) {
            Some(p) => *p = pdb,
            None => self.pdbs.push(pdb),
        }
    }

    pub(super) fn remove_pdb(&mut self, namespace: &str, name: &str) -> bool {
        let (Some(ns), Some(n)) = (self.interner.get(namespace), self.interner.get(name)) else {
            return false;
        };
        let before = self.pdbs.len();
        self.pdbs.retain(|p| !(p.namespace == ns && p.name == n));
        before != self.pdbs.len()
    }

    pub(super) fn upsert_pod(&mut self, spec: PodSpec) {
        let ns = self.interner.intern(&spec.namespace);
        if let Some(pid) = self.idx.pod_by_name.get(&ns).and_then(|m| m.get(spec.name.as_str())).copied() {
            // The namespace's tenant first: making one (its tenant went away) re-links the
            // namespace's pods, this one included, which must happen while it is linked.
            self.tenant_for_namespace(ns);
            self.unlink_pod(pid);
            let pod = self.build_pod(ns, spec);
            if let Some(p) = self.pods.get_mut(pid) {
                *p = pod;
            }
            self.link_pod(pid);
            return;
        }
        let pod = self.build_pod(ns, spec);
        let name = pod.name.clone();
        let pid = self.pods.insert(pod);
        self.idx.pod_by_name.entry(ns).or_default().insert(name, pid);
        self.link_pod(pid);
    }

    fn build_pod(&mut self, ns: Sym, spec: PodSpec) -> Pod {
        let tenant = self.tenant_for_namespace(ns);
        let node_name = spec.node.as_deref().map(|n| self.interner.intern(n)).unwrap_or_default();
        let gpu_uuids = spec.bound_gpus.iter().map(|u| self.interner.intern(u)).collect();
        let mig_uuids: ThinVec<Sym> = spec.bound_mig.iter().map(|u| self.interner.intern(u)).collect();
        Pod {
            namespace: ns,
            name: spec.name.into_boxed_str(),
            tenant,
            // Resolved by link_pod, which also files pods whose node is not known yet.
            node: None,
            node_name,
            gpu_uuids,
            phase: spec.phase,
            created: spec.created,
            started: spec.started,
            owner: spec.owner,
            owner_name: self.interner.intern(&spec.owner_name),
            app: self.interner.intern(&spec.app),
            empty_dir: spec.empty_dir,
            gpus: spec.gpus,
            gpus_renamed: spec.gpus_renamed,
            mig: spec.mig.iter().map(|(r, n)| (self.interner.intern(r), *n)).collect(),
            dra: spec
                .dra
                .iter()
                .map(|c| DraClaim {
                    claim: c.claim.as_str().into(),
                    device_class: self.interner.intern(&c.device_class),
                    count: c.count,
                    allocated: c.allocated.as_deref().map(|a| self.interner.intern(a)),
                })
                .collect(),
            claim_templates: spec.claim_templates.iter().map(|t| self.interner.intern(t)).collect(),
            bound_gpus: ThinVec::new(),
            bound_mig: mig_uuids.clone(),
            mig_uuids,
            mig_unbound: ThinVec::new(),
            deletion: spec.deletion.map(Box::new),
            container_waiting: spec.container_waiting.map(|(r, m)| Box::new((r.into(), m.into()))),
            restarts: spec.restarts,
        }
    }

    /// Adds a pod's effects: node and tenant counters, device bindings.
    pub(super) fn link_pod(&mut self, pid: PodId) {
        let Some(p) = self.pod(pid) else { return };
        if !p.claim_templates.is_empty() {
            let (ns, templates) = (p.namespace, p.claim_templates.clone());
            for t in templates {
                self.idx.template_pods.entry((ns, t)).or_default().push(pid);
            }
        }
        let Some(p) = self.pod(pid) else { return };
        let node_name = p.node_name;
        let node = self.idx.node_by_name.get(&node_name).copied().filter(|_| node_name != Sym::default());
        let mut bound: ThinVec<GpuId> =
            p.gpu_uuids.iter().filter_map(|u| self.idx.gpu_by_uuid.get(u).copied()).collect();
        let mut bound_mig = p.mig_uuids.clone();
        if let Some(n) = node {
            bound.extend(self.agent_bound_gpus(pid, n));
            bound_mig.extend(self.agent_bound_mig(pid, n));
        }
        if node.is_none() && node_name != Sym::default() {
            self.idx.waiting.entry(node_name).or_default().push(pid);
        }
        let holds = node.is_some() && self.pod(pid).is_some_and(|p| p.phase.holds_devices());
        let unbound = match self.pod(pid) {
            Some(p) if holds => self.unbound_mig(p, &bound_mig),
            _ => ThinVec::new(),
        };
        if let Some(p) = self.pods.get_mut(pid) {
            p.node = node;
            p.bound_gpus = bound;
            p.bound_mig = bound_mig;
            p.mig_unbound = unbound;
        }
        let Some(p) = self.pod(pid) else { return };
        let unfinished = !p.phase.finished();
        // On a node whose device plugin shares GPUs, `nvidia.com/gpu` counts replicas.
        let sharing = node.and_then(|n| self.node(n)).map(|n| n.sharing).unwrap_or_default();
        let (whole, shares) = if sharing.shared() { (0, p.gpus as u32) } else { (p.gpus as u32, 0) };
        let alloc_shares = if holds { shares } else { 0 };
        // DRA devices several claims share by capacity: a share each, the GPU counted once.
        let (dra_shares, dra_milli) = if holds { self.capacity_shares(p) } else { (0, 0) };
        // DRA claims of MIG devices (static or partitions) are MIG instances, not GPUs.
        let dra_mig = self.dra_mig(p);
        let dra_gpus = p.dra_count() - dra_mig;
        let alloc_gpus = if holds { whole + dra_gpus.saturating_sub(dra_shares) } else { 0 };
        let alloc_mig = if holds { p.mig_count() + dra_mig } else { 0 };
        let looping = p.phase == Phase::Running && p.crash_looping();
        let c = PodContrib {
            crash_looping: if looping { alloc_gpus + alloc_mig + alloc_shares + dra_shares } else { 0 },
            req_gpus: if unfinished { p.gpus as u32 + dra_gpus } else { 0 },
            alloc_gpus,
            alloc_shares,
            dra_shares,
            started_shares: if p.started.is_some() { alloc_shares } else { 0 },
            started_share_ms: p.started.map_or(0, |s| u64::from(alloc_shares) * s),
            share_milli: alloc_shares * 1000 / u32::from(sharing.replicas.max(1)) + dra_milli,
            unplaced_shares: if p.bound_gpus.is_empty() { alloc_shares } else { 0 },
            req_mig: if unfinished { p.mig_count() + dra_mig } else { 0 },
            alloc_mig,
            counted: unfinished,
            pending: p.phase == Phase::Pending,
            gpu: unfinished && p.requests_devices(),
        };
        let (tenant, node, bound_gpus, bound_mig) = (p.tenant, p.node, p.bound_gpus.clone(), p.bound_mig.clone());
        let unbound = p.mig_unbound.clone();
        c.apply(tenant, &mut self.totals, &mut self.tenants);
        if let Some(n) = node {
            self.idx.pods_by_node.entry(n).or_default().push(pid);
            if let Some(node) = self.nodes.get_mut(n) {
                node.gpus_allocated += c.alloc_gpus;
                node.shares_held += c.alloc_shares;
                node.shares_unplaced += c.unplaced_shares;
                node.mig_allocated += c.alloc_mig;
                node.pods += (c.counted && self.pods.get(pid).is_some_and(|p| p.requests_devices())) as u32;
                for &(r, k) in &unbound {
                    match node.mig_unbound.iter_mut().find(|(x, _)| *x == r) {
                        Some((_, held)) => *held += k as u32,
                        None => node.mig_unbound.push((r, k as u32)),
                    }
                }
            }
        }
        let unbound_total: u32 = unbound.iter().map(|(_, k)| *k as u32).sum();
        self.totals.mig_unbound += unbound_total;
        self.totals.mig_allocated += unbound_total;
        self.counters.pod.insert(pid, c);
        if holds {
            for g in &bound_gpus {
                if let Some(gpu) = self.gpus.get_mut(*g) {
                    gpu.pods.push(pid);
                }
            }
            for u in &bound_mig {
                if let Some(&(g, i)) = self.idx.mig_by_uuid.get(u)
                    && let Some(inst) = self.gpus.get_mut(g).and_then(|g| g.instances.get_mut(i as usize))
                {
                    if inst.pod.is_none() {
                        self.totals.mig_allocated += 1;
                    }
                    inst.pod = Some(pid);
                }
            }
        }
        for g in self.devices_of(&bound_gpus, &bound_mig) {
            self.refresh_gpu(g);
        }
        if let Some(n) = node {
            self.refresh_node_alloc(n);
            if c.holds_devices() {
                self.cotenant(n, tenant, true);
            }
            self.refresh_gpu_cotenancy(n);
        }
        self.refresh_tenant_alerts(tenant);
    }

    /// Of pod `p`'s DRA claims, the devices that are MIG devices: by the device an allocated
    /// claim got (an instance uuid), else by its class (`mig.nvidia.com`).
    pub(crate) fn dra_mig(&self, p: &Pod) -> u32 {
        p.dra
            .iter()
            .filter(|c| match c.allocated {
                Some(u) => self.idx.mig_by_uuid.contains_key(&u),
                None => self.str_of(c.device_class) == crate::model::sharing::DRA_MIG_CLASS,
            })
            .map(|c| u32::from(c.count))
            .sum()
    }

    /// Of the DRA devices pod `p` is bound to, those shared by capacity, and the part of
    /// them its claims consume in thousandths of a GPU (by memory, else an equal share).
    pub(crate) fn capacity_shares(&self, p: &Pod) -> (u32, u32) {
        let (mut n, mut milli) = (0, 0);
        for g in p.bound_gpus.iter().filter_map(|g| self.gpu(*g)) {
            let Some(d) = g.dra.as_deref().filter(|d| d.multi) else { continue };
            n += 1;
            let ns = self.str_of(p.namespace);
            let mine = d.shares.iter().find(|s| p.dra.iter().any(|c| s.claim == format!("{ns}/{}", c.claim)));
            let total = d.capacity.iter().find(|(k, _)| k == "memory").map(|(_, v)| *v).filter(|v| *v > 0);
            let used = mine.and_then(|s| s.consumed.iter().find(|(k, _)| k == "memory")).map(|(_, v)| *v);
            milli += match (used, total) {
                (Some(u), Some(t)) => (u.clamp(0, t) as i128 * 1000 / t as i128) as u32,
                _ => 1000 / (d.shares.len().max(1) as u32),
            };
        }
        (n, milli)
    }

    /// Per MIG resource pod `p` asks for, how many of its instances are not among the known
    /// instances `bound` names: held, but the fleet cannot say which.
    fn unbound_mig(&self, p: &Pod, bound: &[Sym]) -> ThinVec<(Sym, u16)> {
        let known_of = |resource: Sym| {
            bound
                .iter()
                .filter_map(|u| self.idx.mig_by_uuid.get(u))
                .filter_map(|&(g, i)| {
                    let g = self.gpu(g)?;
                    let inst = g.instances.get(i as usize)?;
                    (mig::profile_from_resource(g.model, self.str_of(resource)) == Some(inst.placement.profile))
                        .then_some(())
                })
                .count()
        };
        p.mig
            .iter()
            .filter_map(|&(r, n)| {
                let left = (n as usize).saturating_sub(known_of(r));
                (left > 0).then_some((r, left as u16))
            })
            .collect()
    }

    fn devices_of(&self, gpus: &[GpuId], mig: &[Sym]) -> Vec<GpuId> {
        let mut v: Vec<GpuId> = gpus.to_vec();
        v.extend(mig.iter().filter_map(|u| self.idx.mig_by_uuid.get(u).map(|(g, _)| *g)));
        v.sort();
        v.dedup();
        v
    }

    /// Removes a pod's effects, the exact inverse of `link_pod`.
    pub(super) fn unlink_pod(&mut self, pid: PodId) {
        let Some(p) = self.pod(pid) else { return };
        if !p.claim_templates.is_empty() {
            let (ns, templates) = (p.namespace, p.claim_templates.clone());
            for t in templates {
                if let Some(v) = self.idx.template_pods.get_mut(&(ns, t)) {
                    v.retain(|x| *x != pid);
                    if v.is_empty() {
                        self.idx.template_pods.remove(&(ns, t));
                    }
                }
            }
        }
        let Some(p) = self.pod(pid) else { return };
        if p.node.is_none() {
            let name = p.node_name;
            self.idx.stop_waiting(name, pid);
        }
        let Some(p) = self.pod(pid) else { return };
        let (tenant, node, bound_gpus, bound_mig, dev) =
            (p.tenant, p.node, p.bound_gpus.clone(), p.bound_mig.clone(), p.requests_devices());
        let unbound = self.pods.get_mut(pid).map(|p| std::mem::take(&mut p.mig_unbound)).unwrap_or_default();
        let unbound_total: u32 = unbound.iter().map(|(_, k)| *k as u32).sum();
        self.totals.mig_unbound -= unbound_total;
        self.totals.mig_allocated -= unbound_total;
        let c = self.counters.pod.remove(pid);
        c.unapply(tenant, &mut self.totals, &mut self.tenants);
        if let Some(n) = node {
            if let Some(v) = self.idx.pods_by_node.get_mut(&n) {
                v.retain(|x| *x != pid);
            }
            if let Some(node) = self.nodes.get_mut(n) {
                node.gpus_allocated -= c.alloc_gpus;
                node.shares_held -= c.alloc_shares;
                node.shares_unplaced -= c.unplaced_shares;
                node.mig_allocated -= c.alloc_mig;
                node.pods -= (c.counted && dev) as u32;
                for &(r, k) in &unbound {
                    if let Some(pos) = node.mig_unbound.iter().position(|(x, _)| *x == r) {
                        node.mig_unbound[pos].1 -= k as u32;
                        if node.mig_unbound[pos].1 == 0 {
                            node.mig_unbound.remove(pos);
                        }
                    }
                }
            }
        }
        for g in &bound_gpus {
            if let Some(gpu) = self.gpus.get_mut(*g) {
                gpu.pods.retain(|x| *x != pid);
            }
        }
        for u in &bound_mig {
            if let Some(&(g, i)) = self.idx.mig_by_uuid.get(u)
                && let Some(inst) = self.gpus.get_mut(g).and_then(|g| g.instances.get_mut(i as usize))
                && inst.pod == Some(pid)
            {
                inst.pod = None;
                self.totals.mig_allocated -= 1;
            }
        }
        for g in self.devices_of(&bound_gpus, &bound_mig) {
            self.refresh_gpu(g);
        }
        if let Some(n) = node {
            self.refresh_node_alloc(n);
            if c.holds_devices() {
                self.cotenant(n, tenant, false);
            }
            self.refresh_gpu_cotenancy(n);
        }
        self.refresh_tenant_alerts(tenant);
    }

    pub(super) fn remove_pod(&mut self, pid: PodId) {
        self.unlink_pod(pid);
        if let Some(p) = self.pods.remove(pid) {
            if let Some(m) = self.sched_failed.get_mut(&p.namespace) {
                m.remove(&p.name);
            }
            if let Some(m) = self.idx.pod_by_name.get_mut(&p.namespace) {
                m.remove(&p.name);
            }
        }
    }
}
