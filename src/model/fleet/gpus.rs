//! GPUs and their MIG instances: upsert (a reslice replaces the instances), removal,
//! faults, and each GPU's derived flags and contribution to the counters.

use super::counters::DeviceContrib;
use super::nodes::shares_on_each;
use super::*;

impl Fleet {
    pub fn fragmentation(&self, gpu: GpuId) -> Option<&Fragmentation> {
        self.frag.get(&gpu)
    }

    /// Free instances (no pod bound) of GPU `g` whose profile is MIG resource `resource`.
    pub(super) fn free_instances_of(&self, g: &Gpu, resource: Sym) -> u32 {
        let Some(profile) = mig::profile_from_resource(g.model, self.str_of(resource)) else { return 0 };
        g.instances.iter().filter(|i| i.pod.is_none() && i.placement.profile == profile).count() as u32
    }

    /// For a MIG instance no pod is known to hold: how many instances of its profile pods
    /// on its node hold without a known instance (0 when none, or when it is bound). When
    /// that is more than 0 the instance may be one of them: it is not known to be free.
    pub fn instance_maybe_held(&self, gid: GpuId, index: usize) -> u32 {
        let Some(g) = self.gpu(gid) else { return 0 };
        let Some(inst) = g.instances.get(index).filter(|i| i.pod.is_none()) else { return 0 };
        let Some(n) = self.node(g.node) else { return 0 };
        n.mig_unbound
            .iter()
            .filter(|(r, _)| mig::profile_from_resource(g.model, self.str_of(*r)) == Some(inst.placement.profile))
            .map(|(r, held)| self.mig_instances_held(n, *r, *held))
            .sum()
    }

    /// How many of GPU `gid`'s free instances may be held by pods on its node without a
    /// known instance: per profile, the fewer of its free instances and of those held.
    pub fn gpu_mig_maybe_held(&self, gid: GpuId) -> u32 {
        let Some(g) = self.gpu(gid) else { return 0 };
        let Some(n) = self.node(g.node) else { return 0 };
        n.mig_unbound
            .iter()
            .map(|&(r, held)| self.mig_instances_held(n, r, held).min(self.free_instances_of(g, r)))
            .sum()
    }

    /// Replicas the device plugin hands out per MIG instance of `resource`
    /// (`nvidia.com/mig-<profile>`) on `node`: its `<resource>.replicas` label (time-slicing
    /// or MPS on top of MIG); 1 when the instances are not shared.
    pub fn mig_replicas(&self, node: &Node, resource: Sym) -> u16 {
        let key = format!("{}.replicas", self.str_of(resource));
        node.label(&self.interner, &key)
            .and_then(|r| r.trim().parse::<u16>().ok())
            .filter(|r| (1..=crate::model::sharing::MAX_REPLICAS).contains(r))
            .unwrap_or(1)
    }

    /// The fewest MIG instances `held` units of `resource` can be on: one each, or, where the
    /// instances are shared ×R, `held / R` rounded up (never more instances than units).
    pub fn mig_instances_held(&self, node: &Node, resource: Sym, held: u32) -> u32 {
        held.div_ceil(u32::from(self.mig_replicas(node, resource)))
    }

    pub(super) fn upsert_gpu(&mut self, spec: GpuSpec) -> bool {
        let Some(node) = self.node_by_name(&spec.node) else { return false };
        let uuid = self.interner.intern(&spec.uuid);
        // The pods this GPU's arrival or change can bind or unbind leave first and come
        // back once it is in place, so every counter moves by exactly what changed.
        let existing = self.idx.gpu_by_uuid.get(&uuid).copied();
        let affected = self.pods_touching_gpu(node, uuid, existing);
        for pid in &affected {
            self.unlink_pod(*pid);
        }
        let instances: Vec<MigInstance> = spec
            .instances
            .iter()
            .map(|i| MigInstance {
                placement: i.placement,
                uuid: self.interner.intern(&i.uuid),
                pod: None,
                util: None,
                mem_used_mib: 0,
                low_since: None,
                idle_allocated: false,
            })
            .collect();
        let gid = match self.idx.gpu_by_uuid.get(&uuid).copied() {
            Some(gid) => {
                // Instances change on reslice: drop the old ones and their bindings.
                self.clear_instances(gid);
                let Some(g) = self.gpus.get_mut(gid) else {
                    self.link_all(affected);
                    return false;
                };
                if g.mig_enabled {
                    self.totals.gpus_mig -= 1;
                }
                g.index = spec.index;
                g.model = spec.model;
                g.memory_mib = spec.memory_mib;
                g.mig_enabled = spec.mig_enabled;
                g.instances = instances;
                gid
            }
            None => {
                let gpu = Gpu {
                    uuid,
                    node,
                    index: spec.index,
                    model: spec.model,
                    memory_mib: spec.memory_mib,
                    mig_enabled: spec.mig_enabled,
                    instances,
                    last: Default::default(),
                    history: Ring::default(),
                    last_sample_at: None,
                    xid: None,
                    ecc_uncorrected: 0,
                    low_since: None,
                    pods: Vec::new(),
                    idle_allocated: false,
                    busy: false,
                    measured: false,
                    dra: None,
                };
                let gid = self.gpus.insert(gpu);
                self.idx.gpu_by_uuid.insert(uuid, gid);
                self.totals.gpus += 1;
                if let Some(n) = self.nodes.get_mut(node) {
                    n.gpus.push(gid);
                }
                let gpus = &self.gpus;
                if let Some(n) = self.nodes.get_mut(node) {
                    n.gpus.sort_by_key(|g| gpus.get(*g).map(|g| g.index).unwrap_or(0));
                }
                gid
            }
        };
        let Some(g) = self.gpu(gid) else {
            self.link_all(affected);
            return false;
        };
        let (mig_enabled, model) = (g.mig_enabled, g.model);
        let uuids: Vec<Sym> = g.instances.iter().map(|i| i.uuid).collect();
        for (i, u) in uuids.iter().enumerate() {
            self.idx.mig_by_uuid.insert(*u, (gid, i as u8));
        }
        self.totals.gpus_mig += mig_enabled as u32;
        self.totals.mig_instances += uuids.len() as u32;
        if mig_enabled {
            let placed: Vec<PlacedInstance> =
                self.gpu(gid).map(|g| g.instances.iter().map(|i| i.placement).collect()).unwrap_or_default();
            self.frag.insert(gid, mig::fragmentation(model, &placed));
        } else {
            self.frag.remove(&gid);
        }
        // Pods on this node that name this GPU or its instances (or hold instances of a
        // profile it has) bind now.
        self.link_all(affected);
        self.refresh_gpu(gid);
        self.refresh_node_alloc(node);
        true
    }

    /// Pods on `node` whose binding a change of GPU `uuid` (fleet id `gid` if it exists)
    /// can change: those naming it, bound to it, or holding MIG instances.
    fn pods_touching_gpu(&self, node: NodeId, uuid: Sym, gid: Option<GpuId>) -> Vec<PodId> {
        self.pods_on_node(node)
            .iter()
            .copied()
            .filter(|pid| {
                self.pod(*pid).is_some_and(|p| {
                    !p.mig.is_empty()
                        || !p.mig_uuids.is_empty()
                        || !p.bound_mig.is_empty()
                        || p.gpu_uuids.contains(&uuid)
                        || gid.is_some_and(|g| p.bound_gpus.contains(&g))
                })
            })
            .collect()
    }

    fn clear_instances(&mut self, gid: GpuId) {
        let Some(g) = self.gpus.get_mut(gid) else { return };
        let old = std::mem::take(&mut g.instances);
        self.totals.mig_instances -= old.len() as u32;
        for (i, inst) in old.iter().enumerate() {
            self.idx.mig_by_uuid.remove(&inst.uuid);
            self.holders.remove(&Held::Mig(inst.uuid));
            self.counters.drop_mig((gid, i as u8), &mut self.totals, &mut self.tenants);
            if inst.pod.is_some() {
                self.totals.mig_allocated -= 1;
            }
        }
    }

    pub(super) fn link_all(&mut self, pids: Vec<PodId>) {
        for pid in pids {
            self.link_pod(pid);
        }
    }

    pub(super) fn remove_gpu(&mut self, gid: GpuId) {
        let Some((node, uuid)) = self.gpu(gid).map(|g| (g.node, g.uuid)) else { return };
        let affected = self.pods_touching_gpu(node, uuid, Some(gid));
        for pid in &affected {
            self.unlink_pod(*pid);
        }
        self.clear_instances(gid);
        self.gpu_procs.remove(&gid);
        self.share_low.remove(&gid);
        self.gpu_peers.remove(&gid);
        self.holders.remove(&Held::Gpu(gid));
        self.idx.gpu_alias.retain(|_, g| *g != gid);
        self.counters.drop_gpu(gid, &mut self.totals, &mut self.tenants);
        let Some(g) = self.gpus.remove(gid) else {
            self.link_all(affected);
            return;
        };
        self.idx.gpu_by_uuid.remove(&g.uuid);
        self.totals.gpus -= 1;
        self.totals.gpus_mig -= g.mig_enabled as u32;
        self.totals.gpus_busy -= g.busy as u32;
        self.totals.gpus_measured -= g.measured as u32;
        if let Some(n) = self.nodes.get_mut(g.node) {
            n.gpus.retain(|x| *x != gid);
        }
        for pid in &g.pods {
            if let Some(p) = self.pods.get_mut(*pid) {
                p.bound_gpus.retain(|x| *x != gid);
            }
        }
        self.frag.remove(&gid);
        self.alerts.retain(|(_, t), _| *t != AlertTarget::Gpu(gid));
        // What they held there is held still, now without a known GPU or instance.
        self.link_all(affected);
        self.refresh_node_alloc(g.node);
        self.refresh_gpu_cotenancy(g.node);
    }

    pub(super) fn apply_fault(&mut self, uuid: &str, at: Ts, fault: GpuFault) -> bool {
        let Some(gid) = self.gpu_by_uuid(uuid).or_else(|| self.idx.gpu_alias.get(uuid).copied()) else { return false };
        let node_name =
            self.gpu(gid).and_then(|g| self.node(g.node)).map(|n| self.str_of(n.name).to_string()).unwrap_or_default();
        let Some(g) = self.gpus.get_mut(gid) else { return false };
        let idx = g.index;
        let (kind, message) = match fault {
            GpuFault::Xid { code } => {
                g.xid = Some((code, at));
                (AlertKind::Xid(code), format!("XID {code} on {node_name} GPU {idx}{}", xid_hint(code)))
            }
            GpuFault::EccUncorrected { count } => {
                g.ecc_uncorrected = count;
                (AlertKind::EccUncorrected, format!("{count} uncorrectable ECC errors on {node_name} GPU {idx}"))
            }
        };
        self.alerts.insert(
            (kind, AlertTarget::Gpu(gid)),
            Alert { kind, target: AlertTarget::Gpu(gid), since: at, message: message.clone() },
        );
        self.push_event(EventSpec {
            ts: at,
            severity: Severity::Error,
            reason: kind.label(),
            object: format!("{node_name}/gpu{idx}"),
            message,
        });
        self.structure_gen += 1;
        true
    }

    /// Recomputes a GPU's derived flags and moves its contribution between counters.
    pub(super) fn refresh_gpu(&mut self, gid: GpuId) {
        let th = self.thresholds;
        let now = self.now;
        let Some(g) = self.gpu(gid) else { return };
        let pod_tenant = |pid: PodId| self.pod(pid).map(|p| p.tenant);
        let whole_tenant = g.pods.first().and_then(|p| pod_tenant(*p));
        let measured_now = g.last_sample_at.is_some() && g.last.util.is_some();
        let busy_now = measured_now && g.last.util.is_some_and(|u| u >= th.busy_util_pct);
        let idle_for = |low: Option<Ts>| {
            low.is_some_and(|l| now.max(g.last_sample_at.unwrap_or(0)).saturating_sub(l) >= th.idle_window_ms)
        };
        let whole = if g.mig_enabled {
            DeviceContrib::default()
        } else {
            DeviceContrib {
                tenant: whole_tenant,
                busy: whole_tenant.is_some() && busy_now,
                idle: whole_tenant.is_some() && idle_for(g.low_since),
                measured: whole_tenant.is_some() && measured_now,
            }
        };
        let inst: Vec<DeviceContrib> = g
            .instances
            .iter()
            .map(|i| {
                let t = i.pod.and_then(pod_tenant);
                DeviceContrib {
                    tenant: t,
                    busy: t.is_some() && i.util.is_some_and(|u| u >= th.busy_util_pct),
                    idle: t.is_some() && idle_for(i.low_since),
                    measured: t.is_some() && i.util.is_some(),
                }
            })
            .collect();
        // Each holder of a shared GPU whose own share has been low for the window.
        let shared = !g.mig_enabled && self.node(g.node).is_some_and(|n| n.sharing.shared());
        let share_idle: Vec<(PodId, TenantId, u32)> = self
            .share_low
            .get(&gid)
            .filter(|_| shared)
            .into_iter()
            .flatten()
            .filter(|(pid, since)| g.pods.contains(pid) && idle_for(Some(*since)))
            .filter_map(|(pid, _)| {
                let p = self.pod(*pid)?;
                Some((*pid, p.tenant, shares_on_each(p)))
            })
            .collect();
        let (was_busy, was_measured) = (g.busy, g.measured);
        self.counters.set_gpu(gid, whole, &mut self.totals, &mut self.tenants);
        self.counters.set_share_idle(gid, share_idle, &mut self.totals, &mut self.tenants);
        for (i, c) in inst.iter().enumerate() {
            self.counters.set_mig((gid, i as u8), *c, &mut self.totals, &mut self.tenants);
        }
        self.totals.gpus_busy = self.totals.gpus_busy + busy_now as u32 - was_busy as u32;
        self.totals.gpus_measured = self.totals.gpus_measured + measured_now as u32 - was_measured as u32;
        if let Some(g) = self.gpus.get_mut(gid) {
            g.busy = busy_now;
            g.measured = measured_now;
            g.idle_allocated = whole.idle;
            for (i, c) in g.instances.iter_mut().zip(inst.iter()) {
                i.idle_allocated = c.idle;
            }
        }
    }
}

/// A short hint for the XID codes an on-call engineer meets most.
fn xid_hint(code: u32) -> &'static str {
    match code {
        13 => " (graphics engine exception)",
        31 => " (GPU memory page fault)",
        43 => " (GPU stopped processing)",
        45 => " (preemptive cleanup)",
        48 => " (double-bit ECC error)",
        63 | 64 => " (row remapping event)",
        74 => " (NVLink error)",
        79 => " (GPU has fallen off the bus)",
        92 => " (high single-bit ECC rate)",
        94 | 95 => " (contained/uncontained ECC error)",
        119 | 120 => " (GSP error)",
        _ => "",
    }
}
