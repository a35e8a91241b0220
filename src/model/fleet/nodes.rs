//! Nodes: upsert and removal (with their GPUs and pods), readiness and MIG-config alerts,
//! and a node's allocation in physical GPUs.

use super::*;

impl Fleet {
    /// Node allocation in physical GPUs: whole-GPU requests plus MIG GPUs with an instance
    /// in use. Instances held without a known instance (see [`Node::mig_unbound`]) count on
    /// the fewest GPUs that can hold them (beside the known ones, then as few more as the
    /// free instances of their profile allow): a lower bound, since which GPU they are on
    /// is not known. [`Fleet::node_allocation_is_estimate`] says when that is the case.
    pub fn node_allocated_gpus(&self, node: &Node) -> u32 {
        let cap = |n: u32| n.min(node.gpu_count().max(node.gpus_allocated));
        // GPUs DRA shares by capacity count once, whatever the number of claims on them.
        let by_capacity = node
            .gpus
            .iter()
            .filter_map(|g| self.gpu(*g))
            .filter(|g| !g.pods.is_empty() && g.dra.as_ref().is_some_and(|d| d.multi))
            .count() as u32;
        let shared = self.shared_gpus_allocated(node) + by_capacity;
        let cap = |n: u32| cap(n + shared);
        if node.mig_unbound.is_empty() {
            // Every instance in use is known: count the GPUs they are on.
            let gpus = node.gpus.iter().filter_map(|g| self.gpu(*g));
            let mig_in_use = gpus.filter(|g| g.mig_enabled && g.instances.iter().any(|i| i.pod.is_some())).count();
            return cap(node.gpus_allocated + mig_in_use as u32);
        }
        let mig: Vec<&Gpu> = node.gpus.iter().filter_map(|g| self.gpu(*g)).filter(|g| g.mig_enabled).collect();
        let (used, open): (Vec<&Gpu>, Vec<&Gpu>) =
            mig.iter().partition(|g| g.instances.iter().any(|i| i.pod.is_some()));
        let mut more = 0u32;
        for &(resource, held) in &node.mig_unbound {
            // Replicas of a shared instance: the instances they fill, not one each.
            let held = self.mig_instances_held(node, resource, held);
            let free = |g: &Gpu| self.free_instances_of(g, resource);
            let rest = held.saturating_sub(used.iter().map(|g| free(g)).sum());
            let most = open.iter().map(|g| free(g)).max().unwrap_or(0);
            if rest > 0 && most > 0 {
                more = more.max(rest.div_ceil(most));
            }
        }
        let mut mig_in_use = used.len() as u32 + more.min(open.len() as u32);
        if mig_in_use == 0 && node.mig_unbound_total() > 0 {
            // Held somewhere the fleet's layout has no free instance of that profile for
            // (a layout it guessed from counts): still at least one GPU.
            mig_in_use = 1;
        }
        cap(node.gpus_allocated + mig_in_use)
    }

    /// Whether [`Fleet::node_allocated_gpus`] is a lower bound rather than a count: pods on
    /// the node hold MIG instances the fleet cannot place on a GPU.
    pub fn node_allocation_is_estimate(&self, node: &Node) -> bool {
        node.mig_unbound_total() > 0 || (node.sharing.shared() && node.shares_unplaced > 0)
    }

    /// Replicas of shared GPU `g` that pods are known to hold: a pod's replicas are spread
    /// over the GPUs it is known to hold.
    pub fn gpu_shares_held(&self, g: &Gpu) -> u32 {
        g.pods.iter().filter_map(|p| self.pod(*p)).map(shares_on_each).sum()
    }

    /// Physical GPUs of a shared node with a replica held: those a pod is known to hold
    /// one on, plus, for replicas no one placed, the fewest more GPUs that can hold them
    /// (after the free replicas of the known ones): a lower bound then, as
    /// [`Fleet::node_allocation_is_estimate`] says.
    fn shared_gpus_allocated(&self, node: &Node) -> u32 {
        if !node.sharing.shared() {
            return 0;
        }
        let replicas = u32::from(node.sharing.replicas);
        let whole: Vec<&Gpu> = node.gpus.iter().filter_map(|g| self.gpu(*g)).filter(|g| !g.mig_enabled).collect();
        let known: Vec<&&Gpu> = whole.iter().filter(|g| !g.pods.is_empty()).collect();
        let free_on_known: u32 = known.iter().map(|g| replicas.saturating_sub(self.gpu_shares_held(g))).sum();
        let rest = node.shares_unplaced.saturating_sub(free_on_known);
        let more = rest.div_ceil(replicas).min((whole.len() - known.len()) as u32);
        known.len() as u32 + more
    }

    /// Whole GPUs pods on `node` hold that the fleet cannot name (device plugin without a
    /// node agent): any GPU of the node no pod is known to hold may be one of them.
    pub fn whole_gpus_unbound(&self, node: &Node) -> u32 {
        let named = node.gpus.iter().filter_map(|g| self.gpu(*g)).filter(|g| !g.mig_enabled && !g.pods.is_empty());
        node.gpus_allocated.saturating_sub(named.count() as u32)
    }

    pub(super) fn upsert_node(&mut self, spec: NodeSpec) -> NodeId {
        let name = self.interner.intern(&spec.name);
        let labels = spec.labels.iter().map(|(k, v)| (self.interner.intern(k), self.interner.intern(v))).collect();
        let capacity = spec.capacity.iter().map(|(k, v)| (self.interner.intern(k), *v)).collect();
        let allocatable = spec.allocatable.iter().map(|(k, v)| (self.interner.intern(k), *v)).collect();
        let mig_config = self.interner.intern(&spec.mig_config);
        let cordoned_by = self.interner.intern(&spec.cordoned_by);
        let sharing = Sharing::of_node(&spec.labels, &spec.capacity);
        let now = self.now;
        let id = match self.idx.node_by_name.get(&name).copied() {
            Some(id) => {
                let old = self.nodes.get(id).map(|n| (n.ready, n.cordoned));
                if let Some((r, c)) = old {
                    self.totals.nodes_ready -= r as u32;
                    self.totals.nodes_cordoned -= c as u32;
                }
                let Some(n) = self.nodes.get_mut(id) else { return id };
                if n.mig_state != spec.mig_state {
                    n.mig_state_since = spec.mig_state_since.unwrap_or(now);
                }
                if n.ready && !spec.ready {
                    n.not_ready_since = Some(spec.ready_since.unwrap_or(now));
                } else if spec.ready {
                    n.not_ready_since = None;
                }
                // A MIG resource's replicas label changes how many instances its units fill.
                let relabelled = n.labels != labels;
                n.labels = labels;
                n.ready = spec.ready;
                n.cordoned = spec.cordoned;
                n.cordoned_by = cordoned_by;
                n.gpu_model = spec.gpu_model;
                n.capacity = capacity;
                n.allocatable = allocatable;
                n.mig_config = mig_config;
                n.mig_state = spec.mig_state;
                if n.sharing != sharing {
                    // What the node's pods hold changes meaning (replicas or GPUs): count again.
                    n.sharing = sharing;
                    for pid in self.idx.pods_by_node.get(&id).cloned().unwrap_or_default() {
                        self.unlink_pod(pid);
                        self.link_pod(pid);
                    }
                    for gid in self.node(id).map(|n| n.gpus.clone()).unwrap_or_default() {
                        self.refresh_gpu(gid);
                    }
                    self.refresh_node_alloc(id);
                } else if relabelled {
                    self.refresh_node_alloc(id);
                }
                id
            }
            None => {
                let node = Node {
                    name,
                    labels,
                    ready: spec.ready,
                    cordoned: spec.cordoned,
                    cordoned_by,
                    gpu_model: spec.gpu_model,
                    capacity,
                    allocatable,
                    mig_config,
                    mig_state: spec.mig_state,
                    mig_state_since: spec.mig_state_since.unwrap_or(now),
                    not_ready_since: (!spec.ready).then_some(spec.ready_since.unwrap_or(now)),
                    created: spec.created,
                    gpus: Vec::new(),
                    gpus_allocated: 0,
                    mig_allocated: 0,
                    mig_unbound: Vec::new(),
                    pods: 0,
                    sharing,
                    shares_held: 0,
                    shares_unplaced: 0,
                };
                let id = self.nodes.insert(node);
                self.idx.node_by_name.insert(name, id);
                self.totals.nodes += 1;
                // Pods may have arrived before their node (watches run side by side).
                for pid in self.idx.waiting.remove(&name).unwrap_or_default() {
                    self.unlink_pod(pid);
                    self.link_pod(pid);
                }
                id
            }
        };
        self.totals.nodes_ready += spec.ready as u32;
        self.totals.nodes_cordoned += spec.cordoned as u32;
        self.refresh_node_alerts(id);
        id
    }

    fn refresh_node_alerts(&mut self, id: NodeId) {
        let Some(n) = self.node(id) else { return };
        let (ready, since, state, state_since, name, cfg) =
            (n.ready, n.not_ready_since, n.mig_state, n.mig_state_since, n.name, n.mig_config);
        let node_name = self.str_of(name).to_string();
        let key = (AlertKind::NotReady, AlertTarget::Node(id));
        if !ready {
            self.alerts.entry(key).or_insert_with(|| Alert {
                kind: AlertKind::NotReady,
                target: AlertTarget::Node(id),
                since: since.unwrap_or(0),
                message: format!("node {node_name} is NotReady"),
            });
        } else {
            self.alerts.remove(&key);
        }
        let cfg = self.str_of(cfg).to_string();
        let failed_key = (AlertKind::MigFailed, AlertTarget::Node(id));
        if state == MigConfigState::Failed {
            self.alerts.entry(failed_key).or_insert_with(|| Alert {
                kind: AlertKind::MigFailed,
                target: AlertTarget::Node(id),
                since: state_since,
                message: format!("mig-manager failed to apply {cfg} on {node_name}"),
            });
        } else {
            self.alerts.remove(&failed_key);
        }
        if state == MigConfigState::Pending {
            self.mig_pending.insert(id);
        } else {
            self.mig_pending.remove(&id);
            self.alerts.remove(&(AlertKind::MigStuck, AlertTarget::Node(id)));
        }
        self.check_stuck_mig();
    }

    /// Flags MIG configs that have sat in `pending` longer than the threshold. Only nodes
    /// in `pending` are looked at, so this is cheap on every clock tick.
    pub(super) fn check_stuck_mig(&mut self) -> bool {
        let mut changed = false;
        let pending: Vec<NodeId> = self.mig_pending.iter().copied().collect();
        for id in pending {
            let Some(n) = self.node(id) else { continue };
            let age = self.now.saturating_sub(n.mig_state_since);
            if age < self.thresholds.mig_stuck_ms {
                continue;
            }
            let key = (AlertKind::MigStuck, AlertTarget::Node(id));
            if self.alerts.contains_key(&key) {
                continue;
            }
            let paused: Vec<String> = n
                .labels
                .iter()
                .filter(|(_, v)| self.str_of(*v) == "paused-for-mig-change")
                .map(|(k, _)| self.str_of(*k).trim_start_matches("nvidia.com/gpu.deploy.").to_string())
                .collect();
            let message = format!(
                "{} has been pending for {} min applying {}; paused: {}",
                self.str_of(n.name),
                age / 60_000,
                self.str_of(n.mig_config),
                if paused.is_empty() { "none".to_string() } else { paused.join(", ") }
            );
            let since = n.mig_state_since;
            self.alerts.insert(key, Alert { kind: AlertKind::MigStuck, target: AlertTarget::Node(id), since, message });
            changed = true;
        }
        changed
    }

    pub(super) fn remove_node(&mut self, name: &str) -> bool {
        let Some(id) = self.node_by_name(name) else { return false };
        let gpus = self.node(id).map(|n| n.gpus.clone()).unwrap_or_default();
        for g in gpus {
            self.remove_gpu(g);
        }
        for pid in self.idx.pods_by_node.get(&id).cloned().unwrap_or_default() {
            self.remove_pod(pid);
        }
        if let Some(n) = self.nodes.remove(id) {
            self.idx.node_by_name.remove(&n.name);
            self.totals.nodes -= 1;
            self.totals.nodes_ready -= n.ready as u32;
            self.totals.nodes_cordoned -= n.cordoned as u32;
        }
        self.counters.drop_node_alloc(id, &mut self.totals);
        self.idx.pods_by_node.remove(&id);
        self.mig_pending.remove(&id);
        self.alerts.retain(|(_, t), _| *t != AlertTarget::Node(id));
        true
    }

    pub(super) fn refresh_node_alloc(&mut self, node: NodeId) {
        let Some(n) = self.node(node) else { return };
        let shares = n.shares_total(&self.gpus);
        let new = NodeAlloc {
            gpus_allocated: self.node_allocated_gpus(n),
            gpus_shared: shares / u32::from(n.sharing.replicas.max(1)),
            shares,
            shares_held: n.shares_held,
            shares_unplaced: if n.sharing.shared() { n.shares_unplaced } else { 0 },
        };
        self.counters.set_node_alloc(node, new, &mut self.totals);
    }
}

/// Replicas pod `p` holds on each shared GPU it is known to hold: its replicas spread over
/// them, at least one each.
pub(super) fn shares_on_each(p: &Pod) -> u32 {
    (u32::from(p.gpus) / (p.bound_gpus.len() as u32).max(1)).max(1)
}
