//! The translator's DRA joins for the alpha features: which partitions and capacity shares
//! claims hold (by pool and device), the slices' counters, DeviceTaintRules, and from them
//! each GPU's [`GpuDra`]; and ComputeDomains, which need no join.

use std::collections::{BTreeMap, HashMap};

use kube::api::DynamicObject;

use super::super::dra::{self, Counters, SliceExtras, TaintRule};
use super::super::translate::{ClaimInfo, SliceDevice};
use super::{Translator, split};
use crate::cluster::labels as l;
use crate::model::{CapacityShare, CounterFit, Delta, GpuDra, GpuSpec};

#[derive(Default)]
pub(super) struct DraJoins {
    /// Slice key → its extras.
    extras: HashMap<String, SliceExtras>,
    /// Pool → node (the NVIDIA driver's pool is its node, but only the slice says so).
    pool_node: HashMap<String, String>,
    /// (pool, device) → claim key → what the claim consumes of it.
    alloc: HashMap<(String, String), BTreeMap<String, Counters>>,
    /// Claim key → the (pool, device)s it holds, to take them back when it changes.
    claim_alloc: HashMap<String, Vec<(String, String)>>,
    rules: BTreeMap<String, TaintRule>,
    /// What was sent per GPU uuid.
    sent: HashMap<String, GpuDra>,
    /// (pool, device) of every MIG device (static or a partition).
    mig: std::collections::HashSet<(String, String)>,
}

impl DraJoins {
    /// Records a slice's extras (or forgets them): `old_pool` is the pool it was in (the
    /// translator's `slice_of`), `at` its node and pool now.
    pub(super) fn slice(
        &mut self,
        key: &str,
        old_pool: Option<&str>,
        at: Option<(&str, &str)>,
        extras: Option<SliceExtras>,
    ) {
        if let (Some(old), Some(pool)) = (self.extras.remove(key), old_pool) {
            for (name, d) in &old.devices {
                if d.mig {
                    self.mig.remove(&(pool.to_string(), name.clone()));
                }
            }
        }
        if let (Some((node, pool)), Some(x)) = (at, extras) {
            self.pool_node.insert(pool.to_string(), node.to_string());
            for (name, d) in &x.devices {
                if d.mig {
                    self.mig.insert((pool.to_string(), name.clone()));
                }
            }
            self.extras.insert(key.to_string(), x);
        }
    }

    /// Whether device `name` of `pool` is a MIG device (its claim holds an instance).
    pub(super) fn is_mig(&self, pool: &str, name: &str) -> bool {
        self.mig.contains(&(pool.to_string(), name.to_string()))
    }

    /// Records what claim `key` holds now; returns the nodes whose devices it touched.
    pub(super) fn claim(&mut self, key: &str, info: Option<&ClaimInfo>) -> Vec<String> {
        let mut pools: Vec<String> = Vec::new();
        for pd in self.claim_alloc.remove(key).unwrap_or_default() {
            if let Some(m) = self.alloc.get_mut(&pd) {
                m.remove(key);
                if m.is_empty() {
                    self.alloc.remove(&pd);
                }
            }
            pools.push(pd.0);
        }
        if let Some(info) = info.filter(|i| !i.allocated.is_empty()) {
            for (k, pd) in info.allocated.iter().enumerate() {
                let consumed = info.consumed.get(k).cloned().unwrap_or_default();
                self.alloc.entry(pd.clone()).or_default().insert(key.to_string(), consumed);
                pools.push(pd.0.clone());
            }
            self.claim_alloc.insert(key.to_string(), info.allocated.clone());
        }
        pools.sort();
        pools.dedup();
        pools.iter().filter_map(|p| self.pool_node.get(p).cloned()).collect()
    }

    /// Whether a claim holds device `name` of `pool`.
    pub(super) fn allocated(&self, pool: &str, name: &str) -> bool {
        self.alloc.contains_key(&(pool.to_string(), name.to_string()))
    }

    /// Whether a slice's device is a partition (it consumes shared counters).
    pub(super) fn is_partition(&self, slice: &str, name: &str) -> bool {
        self.extras.get(slice).and_then(|x| x.devices.get(name)).is_some_and(|d| !d.consumes.is_empty())
    }

    /// Each GPU's extras from the slices `slices` (key, pool) of one node.
    fn of_node(&self, slices: &[(String, String)]) -> BTreeMap<String, GpuDra> {
        let mut out: BTreeMap<String, GpuDra> = BTreeMap::new();
        for (key, pool) in slices {
            let Some(x) = self.extras.get(key) else { continue };
            // Per counter set: what allocated devices of this slice take from it.
            let mut left: HashMap<&str, Counters> =
                x.counters.iter().map(|(set, c)| (set.as_str(), c.clone())).collect();
            for (name, d) in &x.devices {
                if !self.allocated(pool, name) {
                    continue;
                }
                for (set, take) in &d.consumes {
                    if let Some(have) = left.get_mut(set.as_str()) {
                        for (c, n) in take {
                            if let Some(h) = have.iter_mut().find(|(k, _)| k == c) {
                                h.1 -= n;
                            }
                        }
                    }
                }
            }
            let fits = |d: &dra::DeviceExtras| {
                d.consumes.iter().all(|(set, take)| {
                    left.get(set.as_str()).is_some_and(|have| {
                        take.iter().all(|(c, n)| have.iter().find(|(k, _)| k == c).is_some_and(|(_, h)| h >= n))
                    })
                })
            };
            for (name, d) in &x.devices {
                if d.gpu_uuid.is_empty() {
                    continue;
                }
                let g = out.entry(d.gpu_uuid.clone()).or_default();
                pool.clone_into(&mut g.pool);
                g.devices.push(name.clone());
                g.taints.extend(d.taints.iter().cloned());
                for r in self.rules.values().filter(|r| r.selects(l::DRA_DRIVER, pool, name)) {
                    g.taints.push(crate::model::DeviceTaint { device: name.clone(), ..r.taint.clone() });
                }
                if !d.consumes.is_empty() {
                    g.partitionable = true;
                    let free = !self.allocated(pool, name) && fits(d);
                    if d.mig {
                        match g.fits.iter_mut().find(|f| f.profile == d.profile) {
                            Some(f) => {
                                f.offered += 1;
                                f.fits += free as u16;
                            }
                            None => {
                                g.fits.push(CounterFit { profile: d.profile.clone(), fits: free as u16, offered: 1 })
                            }
                        }
                    } else {
                        g.whole_fits = free;
                    }
                }
                if d.multi && !d.mig {
                    g.multi = true;
                    g.capacity = d.capacity.clone();
                    if let Some(claims) = self.alloc.get(&(pool.clone(), name.clone())) {
                        g.shares = claims
                            .iter()
                            .map(|(claim, consumed)| CapacityShare { claim: claim.clone(), consumed: consumed.clone() })
                            .collect();
                    }
                }
            }
        }
        for g in out.values_mut() {
            g.devices.sort();
            g.fits.sort_by(|a, b| a.profile.cmp(&b.profile));
            g.taints.sort_by(|a, b| (&a.device, &a.key, &a.rule).cmp(&(&b.device, &b.key, &b.rule)));
        }
        out
    }
}

/// Drops a dynamic-MIG partition no claim holds: it is an offer, not a MIG device.
pub(super) fn keep_device(joins: &DraJoins, slice: &str, pool: &str, d: &SliceDevice) -> bool {
    !matches!(d, SliceDevice::Mig { .. }) || !joins.is_partition(slice, d.name()) || joins.allocated(pool, d.name())
}

impl Translator {
    /// Sends each of `gpus`' extras that changed (and clears those of GPUs that lost them).
    pub(super) fn send_dra(&mut self, node: &str, gpus: &[GpuSpec], out: &mut Vec<Delta>) {
        let slices: Vec<(String, String)> = self
            .nodes
            .get(node)
            .map(|n| n.slices.keys().filter_map(|k| Some((k.clone(), self.slice_of.get(k)?.1.clone()))).collect())
            .unwrap_or_default();
        let mut per_gpu = self.dra.of_node(&slices);
        for g in gpus {
            let want = per_gpu.remove(&g.uuid).unwrap_or_default();
            let before = self.dra.sent.get(&g.uuid).cloned().unwrap_or_default();
            if want != before {
                if want.is_empty() {
                    self.dra.sent.remove(&g.uuid);
                } else {
                    self.dra.sent.insert(g.uuid.clone(), want.clone());
                }
                out.push(Delta::GpuDra { uuid: g.uuid.clone(), dra: want });
            }
        }
    }

    /// A GPU that went away takes its extras with it.
    pub(super) fn forget_dra(&mut self, uuid: &str) {
        self.dra.sent.remove(uuid);
    }

    pub(super) fn claim_devices_changed(&mut self, key: &str, out: &mut Vec<Delta>) {
        let info = self.claims.get(key).cloned();
        for node in self.dra.claim(key, info.as_ref()) {
            self.send_gpus(&node, out);
        }
    }

    pub(super) fn taint_rule(&mut self, o: Option<&DynamicObject>, key: &str, out: &mut Vec<Delta>) {
        let old = self.dra.rules.remove(key);
        let new = o.and_then(dra::taint_rule);
        // The nodes whose devices the rule selected before or selects now; a rule for any
        // pool may touch every node with slices.
        let rules = [old.as_ref(), new.as_ref()];
        let pools: Vec<Option<&String>> = rules.iter().flatten().map(|r| r.pool.as_ref()).collect();
        let mut nodes: Vec<String> = if pools.iter().any(Option::is_none) {
            self.dra.pool_node.values().cloned().collect()
        } else {
            pools.into_iter().flatten().filter_map(|p| self.dra.pool_node.get(p).cloned()).collect()
        };
        nodes.sort();
        nodes.dedup();
        if let Some(r) = new {
            self.dra.rules.insert(key.to_string(), r);
        }
        for n in nodes {
            self.send_gpus(&n, out);
        }
    }

    pub(super) fn domain(&mut self, o: Option<&DynamicObject>, key: &str, out: &mut Vec<Delta>) {
        match o.and_then(dra::compute_domain) {
            Some(d) => out.push(Delta::DomainUpsert(d)),
            None => {
                let (namespace, name) = split(key);
                out.push(Delta::DomainRemove { namespace, name });
            }
        }
    }
}
