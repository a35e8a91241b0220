//! What node agents and Prometheus say: samples (utilisation, memory, MIG instances,
//! processes, NVLink peers), matched to GPUs by uuid, alias or place, and which pods the
//! agents say hold each device (the binding the device plugin does not give).

use super::*;

impl Fleet {
    pub(super) fn apply_sample(&mut self, s: TelemetrySample) {
        let by_place = || {
            let (node, index) = s.node_gpu.as_ref()?;
            let n = self.node(self.node_by_name(node)?)?;
            n.gpus.iter().copied().find(|g| self.gpu(*g).is_some_and(|g| g.index == *index))
        };
        // An alias holds only while the source still places the GPU there (a GPU moved to
        // another node, or two sources that report the same uuid, must not cross over).
        let same_place = |g: GpuId| match (&s.node_gpu, self.gpu(g)) {
            (Some((node, index)), Some(gpu)) => {
                gpu.index == *index && self.node(gpu.node).is_some_and(|n| self.str_of(n.name) == node)
            }
            _ => true,
        };
        let alias = self.idx.gpu_alias.get(&s.gpu_uuid).copied().filter(|g| same_place(*g));
        let known = self.gpu_by_uuid(&s.gpu_uuid).or(alias);
        let Some(gid) = known.or_else(by_place) else { return };
        if known.is_none() {
            self.idx.gpu_alias.insert(s.gpu_uuid.clone(), gid);
        }
        let idle_thr = self.thresholds.idle_util_pct;
        let low = |util: Option<u8>| util.map(|u| u < idle_thr);
        // Who holds the GPU: the kubelet's word when the agent has it, else whose processes
        // run there.
        match (&s.allocated, &s.processes) {
            (Some(pods), _) => self.set_holders(Held::Gpu(gid), pods.iter().map(String::as_str)),
            (None, Some(procs)) => self.set_holders(Held::Gpu(gid), procs.iter().filter_map(|p| p.pod.as_deref())),
            (None, None) => {}
        }
        if let Some(p) = s.processes {
            self.gpu_procs.insert(gid, p);
        }
        if let Some(p) = s.peers {
            self.gpu_peers.insert(gid, p);
        }
        let slots: Vec<Option<usize>> = match self.gpu(gid) {
            Some(g) => (0..s.instances.len()).map(|k| self.instance_slot(gid, g, &s.instances, k)).collect(),
            None => return,
        };
        // The kubelet's word on who holds each instance, bound after the figures land.
        let mig_holders: Vec<(Sym, &Vec<String>)> = match self.gpu(gid) {
            Some(g) => s
                .instances
                .iter()
                .zip(&slots)
                .filter_map(|(is, slot)| Some((g.instances.get((*slot)?)?.uuid, is.allocated.as_ref()?)))
                .collect(),
            None => Vec::new(),
        };
        let Some(g) = self.gpus.get_mut(gid) else { return };
        for (is, slot) in s.instances.iter().zip(slots) {
            let Some(inst) = slot.and_then(|i| g.instances.get_mut(i)) else { continue };
            inst.util = is.util;
            inst.mem_used_mib = is.mem_used_mib;
            // An unmeasured instance is neither idle nor busy.
            match low(is.util) {
                Some(true) => {
                    inst.low_since.get_or_insert(s.at);
                }
                Some(false) | None => inst.low_since = None,
            }
        }
        for (inst, pods) in mig_holders {
            self.set_holders(Held::Mig(inst), pods.iter().map(String::as_str));
        }
        let Some(g) = self.gpus.get_mut(gid) else { return };
        let mut sample = s.sample;
        if sample.util.is_none() && g.mig_enabled {
            sample.util = mig_weighted_util(g);
        }
        g.last = sample;
        g.history.push(sample);
        g.last_sample_at = Some(s.at);
        match low(sample.util) {
            Some(true) => {
                g.low_since.get_or_insert(s.at);
            }
            Some(false) | None => g.low_since = None,
        }
        self.track_share_idle(gid, s.at);
        self.refresh_gpu(gid);
    }

    /// How busy pod `p` keeps shared GPU `gid`: the SM utilisation of its processes there
    /// (the node agent's per-process samples), summed. When none of its processes was
    /// measured: the GPU's own utilisation if that is under the idle threshold (no holder
    /// keeps it busier than it is), else 0 if the agent samples other processes there and
    /// none is the pod's (it holds a share and runs nothing on it); else unknown.
    pub fn share_util(&self, gid: GpuId, p: &Pod) -> Option<u8> {
        let ns = self.str_of(p.namespace);
        let is_mine = |k: &str| k.split_once('/').is_some_and(|(n, m)| n == ns && m == &*p.name);
        // One pass, no allocation: this runs per holder on every sample and every frame.
        let (mut mine, mut measured, mut sum, mut sampled) = (false, false, 0u32, false);
        for q in self.gpu_procs.get(&gid).into_iter().flatten() {
            sampled |= q.sm_util.is_some();
            if q.pod.as_deref().is_some_and(is_mine) {
                mine = true;
                if let Some(u) = q.sm_util {
                    measured = true;
                    sum += u32::from(u);
                }
            }
        }
        if measured {
            return Some(sum.min(100) as u8);
        }
        let g = self.gpu(gid)?;
        if let Some(u) = g.last.util.filter(|u| *u < self.thresholds.idle_util_pct) {
            return Some(u);
        }
        (!mine && sampled).then_some(0)
    }

    /// Notes, for each holder of shared GPU `gid`, since when its own share has been under
    /// the idle threshold (forgotten as soon as it is not, or is not measured).
    fn track_share_idle(&mut self, gid: GpuId, at: Ts) {
        let old = self.share_low.remove(&gid).unwrap_or_default();
        let Some(g) = self.gpu(gid) else { return };
        if g.mig_enabled || !self.node(g.node).is_some_and(|n| n.sharing.shared()) {
            return;
        }
        let thr = self.thresholds.idle_util_pct;
        let low: Vec<(PodId, Ts)> = g
            .pods
            .iter()
            .filter(|pid| self.pod(**pid).and_then(|p| self.share_util(gid, p)).is_some_and(|u| u < thr))
            .map(|pid| (*pid, old.iter().find(|(q, _)| q == pid).map_or(at, |(_, since)| *since)))
            .collect();
        if !low.is_empty() {
            self.share_low.insert(gid, low);
        }
    }

    /// The holders of shared GPU `gid` whose share is idle-but-allocated: (pod, its tenant,
    /// the replicas it holds there).
    pub fn idle_shares(&self, gid: GpuId) -> &[(PodId, TenantId, u32)] {
        self.counters.share_idle.get(&gid).map_or(&[], Vec::as_slice)
    }

    /// Records which pods (`namespace/name`) a node agent says hold a whole GPU or a MIG
    /// instance and re-binds the pods whose binding that changes (see `holders`).
    fn set_holders<'p>(&mut self, what: Held, pods: impl Iterator<Item = &'p str>) {
        let mut holders: Vec<(Sym, Box<str>)> = Vec::new();
        let whole_gpu = |f: &Fleet, g: GpuId| f.gpu(g).is_some_and(|g| !g.mig_enabled);
        if matches!(what, Held::Mig(_)) || matches!(what, Held::Gpu(g) if whole_gpu(self, g)) {
            for pod in pods {
                let Some((ns, name)) = pod.split_once('/') else { continue };
                // Only pods the fleet knows (a namespace it has never seen has none).
                let Some(ns) = self.interner.get(ns) else { continue };
                if self.idx.has_pod(ns, name) && !holders.iter().any(|(n, p)| *n == ns && &**p == name) {
                    holders.push((ns, name.into()));
                }
            }
        }
        holders.sort_unstable();
        // Every sample of a streamed GPU comes through here: return early, without copying,
        // when nothing changed.
        if self.holders.get(&what).map_or(holders.is_empty(), |h| *h == holders) {
            return;
        }
        let old = self.holders.remove(&what).unwrap_or_default();
        let mut affected: Vec<PodId> =
            old.iter().chain(holders.iter()).filter_map(|(ns, name)| self.idx.pod(*ns, name)).collect();
        // A pod in both the old and the new holders is relinked once (linked twice, it
        // would be counted twice).
        affected.sort_unstable();
        affected.dedup();
        // Unlinked with the old holders gone: `unlink_pod` undoes what `link_pod` recorded
        // in the pod (`bound_gpus`, `bound_mig`), not what the map says now.
        for pid in &affected {
            self.unlink_pod(*pid);
        }
        if !holders.is_empty() {
            self.holders.insert(what, holders);
        }
        for pid in affected {
            self.link_pod(pid);
        }
        self.structure_gen += 1;
    }

    fn held_by(&self, what: Held, p: &Pod) -> bool {
        self.holders.get(&what).is_some_and(|h| h.iter().any(|(ns, n)| *ns == p.namespace && *n == p.name))
    }

    /// MIG instances a node agent says pod `pid` holds, for a pod that asks for MIG
    /// resources the cluster does not name (device plugin): per resource, at most as many
    /// instances of that profile as it asked for.
    pub(super) fn agent_bound_mig(&self, pid: PodId, node: NodeId) -> Vec<Sym> {
        let (Some(p), Some(n)) = (self.pod(pid), self.node(node)) else { return Vec::new() };
        if p.mig.is_empty() || !p.dra.is_empty() || !p.mig_uuids.is_empty() || self.holders.is_empty() {
            return Vec::new();
        }
        let gpus: Vec<&Gpu> = n.gpus.iter().filter_map(|g| self.gpu(*g)).collect();
        let mut out = Vec::new();
        for &(resource, count) in &p.mig {
            out.extend(
                gpus.iter()
                    .flat_map(|g| {
                        let profile = mig::profile_from_resource(g.model, self.str_of(resource));
                        g.instances.iter().filter(move |i| Some(i.placement.profile) == profile).map(|i| i.uuid)
                    })
                    .filter(|u| self.held_by(Held::Mig(*u), p))
                    .take(count as usize),
            );
        }
        out
    }

    /// Whole GPUs a node agent sees pod `pid` computing on, for a pod that asks for whole
    /// GPUs the cluster does not name (device plugin): at most as many as it asked for,
    /// lowest index first (more than that means it sees GPUs it was not given).
    pub(super) fn agent_bound_gpus(&self, pid: PodId, node: NodeId) -> Vec<GpuId> {
        let (Some(p), Some(n)) = (self.pod(pid), self.node(node)) else { return Vec::new() };
        if p.gpus == 0 || !p.dra.is_empty() || !p.gpu_uuids.is_empty() || self.holders.is_empty() {
            return Vec::new();
        }
        let mut held: Vec<(u8, GpuId)> = n
            .gpus
            .iter()
            .filter(|g| self.held_by(Held::Gpu(**g), p))
            .filter_map(|g| self.gpu(*g).map(|gpu| (gpu.index, *g)))
            .collect();
        held.sort_unstable();
        held.into_iter().take(p.gpus as usize).map(|(_, g)| g).collect()
    }

    /// Which of GPU `gid`'s instances sample `all[k]` is about: the one with its uuid; for a
    /// uuid the fleet does not know (a GPU announced only by labels, whose instances the
    /// fleet named itself), the instance of the same profile with the same rank by placement
    /// (the same instance when the placements agree, the fleet's best guess when the fleet's
    /// plan placed them differently).
    fn instance_slot(&self, gid: GpuId, g: &Gpu, all: &[InstanceSample], k: usize) -> Option<usize> {
        let is = all.get(k)?;
        if let Some(&(ig, i)) = self.interner.get(&is.uuid).and_then(|sym| self.idx.mig_by_uuid.get(&sym)) {
            return (ig == gid).then_some(i as usize);
        }
        let (profile, start) = is.placement.as_ref()?;
        let same_profile = |o: &&InstanceSample| o.placement.as_ref().is_some_and(|(p, _)| p == profile);
        let rank =
            all.iter().filter(same_profile).filter(|o| o.placement.as_ref().is_some_and(|(_, s)| s < start)).count();
        let mut ours: Vec<(u8, usize)> = g
            .instances
            .iter()
            .enumerate()
            .filter(|(_, i)| mig::profile(g.model, i.placement.profile).name == profile.as_str())
            .map(|(n, i)| (i.placement.start, n))
            .collect();
        ours.sort_unstable();
        ours.get(rank).map(|(_, n)| *n)
    }
}

/// What a node agent says a pod holds: a whole GPU, or a MIG instance (by uuid).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Held {
    Gpu(GpuId),
    Mig(Sym),
}

/// A MIG GPU's utilisation from its instances: engine activity weighted by compute slices
/// over the GPU's slices (the simulator's formula); `None` unless every instance has been
/// measured, so a GPU is never shown as idle because its instances were not.
fn mig_weighted_util(g: &Gpu) -> Option<u8> {
    if g.instances.is_empty() {
        return None;
    }
    let total = mig::catalog(g.model).iter().map(|p| p.compute_slices as u32).max().filter(|t| *t > 0)?;
    let mut weighted = 0u32;
    for i in &g.instances {
        weighted += i.util? as u32 * mig::profile(g.model, i.placement.profile).compute_slices as u32;
    }
    Some((weighted / total).min(100) as u8)
}
