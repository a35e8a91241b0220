//! Tenant isolation in the fleet: NetworkPolicies per namespace, and which tenants share a
//! node or a GPU, kept per pod link so no view rescans the fleet. A tenant alerts when a
//! namespace of it has no default-deny ingress policy (once NetworkPolicies are known), or
//! when another tenant holds part of a GPU it holds part of (MIG instances, replicas or
//! capacity shares of one GPU: weaker isolation than whole GPUs).

use std::collections::{BTreeMap, BTreeSet};

use super::super::delta::FeedState;
use super::super::intern::FastMap;
use super::super::isolation::{NetPolicySpec, NsIsolation, TenantIsolation};
use super::super::types::{Alert, AlertKind, AlertTarget, GpuId, NodeId, TenantId};
use super::Fleet;

/// The feed source whose trouble makes NetworkPolicies unknown (`kubectl auth can-i list
/// networkpolicies` says no): then no tenant is called open.
pub const NETPOL_FEED: &str = "networkpolicies";
/// Cilium's policy feeds: forbidden (or failing), they make isolation unknown too; not
/// served (no Cilium) is fine.
pub const CILIUM_FEEDS: [&str; 2] = ["ciliumnetworkpolicies", "ciliumclusterwidenetworkpolicies"];

/// The nodes and the GPUs a tenant shares, each with the other tenants there.
pub type Neighbours = (Vec<(NodeId, Vec<TenantId>)>, Vec<(GpuId, Vec<TenantId>)>);

/// Who holds devices next to whom.
#[derive(Clone, Debug, Default)]
pub(super) struct Cotenancy {
    /// Per node, the tenants whose pods hold devices there, with how many pods.
    pub node_tenants: FastMap<NodeId, Vec<(TenantId, u32)>>,
    /// Per tenant, the nodes where its pods hold devices (so a tenant's neighbours are found
    /// without walking every node).
    pub tenant_nodes: FastMap<TenantId, BTreeSet<NodeId>>,
    /// Per node, its GPUs that serve more than one tenant, and those tenants.
    pub node_gpus: FastMap<NodeId, Vec<(GpuId, Vec<TenantId>)>>,
    /// Per tenant, how many GPUs it shares with another tenant (its `GPU shared` alert).
    pub shared_gpus: FastMap<TenantId, u32>,
}

fn bump(m: &mut FastMap<TenantId, u32>, t: TenantId, up: bool) {
    let n = m.entry(t).or_default();
    if up {
        *n += 1;
    } else {
        *n = n.saturating_sub(1);
        if *n == 0 {
            m.remove(&t);
        }
    }
}

impl Fleet {
    /// A pod of `tenant` that holds devices on `node` came (`add`) or went.
    pub(super) fn cotenant(&mut self, node: NodeId, tenant: TenantId, add: bool) {
        let c = &mut self.cotenancy;
        let list = c.node_tenants.entry(node).or_default();
        let pos = list.iter().position(|(t, _)| *t == tenant);
        match (pos, add) {
            (Some(i), true) => list[i].1 += 1,
            (None, true) => {
                list.push((tenant, 1));
                c.tenant_nodes.entry(tenant).or_default().insert(node);
            }
            (Some(i), false) => {
                list[i].1 -= 1;
                if list[i].1 == 0 {
                    list.remove(i);
                    if let Some(s) = c.tenant_nodes.get_mut(&tenant) {
                        s.remove(&node);
                        if s.is_empty() {
                            c.tenant_nodes.remove(&tenant);
                        }
                    }
                }
            }
            (None, false) => {}
        }
        if list.is_empty() {
            c.node_tenants.remove(&node);
        }
    }

    /// The tenants holding some of GPU `gid` (whole, an instance, a replica, a share).
    pub fn gpu_tenants(&self, gid: GpuId) -> Vec<TenantId> {
        let Some(g) = self.gpu(gid) else { return Vec::new() };
        let mut ts: Vec<TenantId> = g
            .pods
            .iter()
            .chain(g.instances.iter().filter_map(|i| i.pod.as_ref()))
            .filter_map(|p| self.pod(*p).map(|p| p.tenant))
            .collect();
        ts.sort();
        ts.dedup();
        ts
    }

    /// Recounts which GPUs of `node` serve more than one tenant.
    pub(super) fn refresh_gpu_cotenancy(&mut self, node: NodeId) {
        let shared = self.cotenancy.node_tenants.get(&node).is_some_and(|l| l.len() >= 2);
        let gpus = if shared { self.node(node).map(|n| n.gpus.clone()).unwrap_or_default() } else { Vec::new() };
        let new: Vec<(GpuId, Vec<TenantId>)> =
            gpus.into_iter().map(|g| (g, self.gpu_tenants(g))).filter(|(_, ts)| ts.len() >= 2).collect();
        let old = self.cotenancy.node_gpus.remove(&node).unwrap_or_default();
        if old != new {
            let mut touched = Vec::new();
            for (_, ts) in &old {
                for t in ts {
                    bump(&mut self.cotenancy.shared_gpus, *t, false);
                    touched.push(*t);
                }
            }
            for (_, ts) in &new {
                for t in ts {
                    bump(&mut self.cotenancy.shared_gpus, *t, true);
                    touched.push(*t);
                }
            }
            touched.sort();
            touched.dedup();
            for t in touched {
                self.refresh_shared_gpu_alert(t);
            }
        }
        if !new.is_empty() {
            self.cotenancy.node_gpus.insert(node, new);
        }
    }

    fn refresh_shared_gpu_alert(&mut self, tid: TenantId) {
        let key = (AlertKind::SharedGpu, AlertTarget::Tenant(tid));
        let n = self.cotenancy.shared_gpus.get(&tid).copied().unwrap_or(0);
        let Some(t) = self.tenant(tid).filter(|_| n > 0) else {
            self.alerts.remove(&key);
            return;
        };
        let message = format!(
            "tenant {} shares {} with other tenants (MIG instances, replicas or capacity of one GPU): weaker \
             isolation than whole GPUs",
            self.str_of(t.name),
            if n == 1 { "1 GPU".to_string() } else { format!("{n} GPUs") }
        );
        self.set_alert(key, message);
    }

    /// Raises alert `key` with `message` (kept since it was first raised), or updates its text.
    pub(super) fn set_alert(&mut self, key: (AlertKind, AlertTarget), message: String) {
        let now = self.now;
        let a = self.alerts.entry(key.clone()).or_insert_with(|| Alert {
            kind: key.0,
            target: key.1,
            since: now,
            message: String::new(),
        });
        a.message = message;
    }

    /// Whether the fleet knows the cluster's NetworkPolicies (listed, and allowed to).
    pub fn netpol_known(&self) -> bool {
        self.synced
            && std::iter::once(NETPOL_FEED)
                .chain(CILIUM_FEEDS)
                .all(|f| !matches!(self.feeds.get(f), Some(FeedState::Stale { .. })))
    }

    /// What the policies of namespace `ns` add up to.
    pub fn namespace_isolation(&self, ns: &str) -> NsIsolation {
        let wide = self.netpols.get(super::super::isolation::ALL_NAMESPACES).into_iter().flat_map(|m| m.values());
        NsIsolation::of(
            self.netpols.get(ns).into_iter().flat_map(|m| m.values()).chain(wide.filter(|p| p.applies_to(ns))),
        )
    }

    /// A tenant's isolation: its namespaces' policies and its neighbours on nodes and GPUs.
    pub fn tenant_isolation(&self, tid: TenantId) -> Option<TenantIsolation> {
        let t = self.tenant(tid)?;
        let mut out = TenantIsolation {
            namespaces: t.namespaces.len() as u32,
            shared_gpus: self.cotenancy.shared_gpus.get(&tid).copied().unwrap_or(0),
            ..Default::default()
        };
        for ns in &t.namespaces {
            let ns = self.str_of(*ns);
            let i = self.namespace_isolation(ns);
            if !i.ingress_deny {
                out.open.push(ns.to_string());
            }
            out.egress_deny += i.egress_deny as u32;
        }
        out.open.sort();
        Some(out)
    }

    /// What Pod Security admission enforces in `tid`'s namespaces (from their labels).
    pub fn tenant_pod_security(&self, tid: TenantId) -> Option<super::super::isolation::PodSecurity> {
        use super::super::isolation::{POD_SECURITY_LEVELS, PodSecurity};
        let t = self.tenant(tid)?;
        let mut out = PodSecurity { namespaces: t.namespaces.len() as u32, ..Default::default() };
        let mut weakest: Option<usize> = None;
        for ns in &t.namespaces {
            let ns = self.str_of(*ns);
            match self.pod_security.get(ns).and_then(|l| POD_SECURITY_LEVELS.iter().position(|k| k == l)) {
                Some(i) => weakest = Some(weakest.map_or(i, |w| w.min(i))),
                None => out.unset.push(ns.to_string()),
            }
        }
        out.weakest = weakest.map(|i| POD_SECURITY_LEVELS[i]);
        out.unset.sort();
        Some(out)
    }

    /// The nodes and GPUs `tid` shares with other tenants, and with whom.
    pub fn tenant_neighbours(&self, tid: TenantId) -> Neighbours {
        let c = &self.cotenancy;
        let mine = c.tenant_nodes.get(&tid).into_iter().flatten();
        let mut nodes: Vec<(NodeId, Vec<TenantId>)> = mine
            .clone()
            .filter_map(|n| Some((*n, c.node_tenants.get(n)?)))
            .filter(|(_, l)| l.len() >= 2)
            .map(|(n, l)| (n, l.iter().map(|(t, _)| *t).filter(|t| *t != tid).collect()))
            .collect();
        nodes.sort_by_key(|(n, _)| self.node(*n).map(|n| self.str_of(n.name)));
        let mut gpus: Vec<(GpuId, Vec<TenantId>)> = mine
            .filter_map(|n| c.node_gpus.get(n))
            .flatten()
            .filter(|(_, ts)| ts.contains(&tid))
            .map(|(g, ts)| (*g, ts.iter().copied().filter(|t| *t != tid).collect()))
            .collect();
        gpus.sort_by_key(|(g, _)| self.gpu(*g).map(|g| (self.node(g.node).map(|n| self.str_of(n.name)), g.index)));
        (nodes, gpus)
    }

    /// A NetworkPolicy appeared, changed (`Some`) or went away.
    pub(super) fn set_netpol(&mut self, namespace: String, name: String, spec: Option<NetPolicySpec>) -> bool {
        let changed = match spec {
            Some(s) => self.netpols.entry(namespace.clone()).or_default().insert(name, s.clone()) != Some(s),
            None => {
                let gone = self.netpols.get_mut(&namespace).and_then(|m| m.remove(&name)).is_some();
                if self.netpols.get(&namespace).is_some_and(BTreeMap::is_empty) {
                    self.netpols.remove(&namespace);
                }
                gone
            }
        };
        if changed && namespace == super::super::isolation::ALL_NAMESPACES {
            // A clusterwide policy: any tenant's verdict may change.
            self.refresh_netpol_alerts();
            return true;
        }
        let ns = self.interner.intern(&namespace);
        if changed && let Some(t) = self.idx.tenant_by_ns.get(&ns).copied() {
            self.refresh_netpol_alert(t);
        }
        changed
    }

    /// Sets or clears tenant `tid`'s "no default-deny" alert.
    pub(super) fn refresh_netpol_alert(&mut self, tid: TenantId) {
        let key = (AlertKind::NoDefaultDeny, AlertTarget::Tenant(tid));
        // A namespace that is a tenant only because nothing else names one (kube-system, the
        // GPU operator) is shown, not alerted on.
        let recognised = self.tenant(tid).is_some_and(|t| self.str_of(t.source) != "namespace");
        let iso = self.tenant_isolation(tid).filter(|i| recognised && self.netpol_known() && !i.open.is_empty());
        let (Some(iso), Some(t)) = (iso, self.tenant(tid)) else {
            self.alerts.remove(&key);
            return;
        };
        let name = self.str_of(t.name);
        let message = match iso.namespaces {
            1 => format!(
                "tenant {name} has no default-deny ingress NetworkPolicy in its namespace {}",
                iso.open.join("")
            ),
            n => format!(
                "tenant {name} has no default-deny ingress NetworkPolicy in {} of {n} namespaces ({})",
                iso.open.len(),
                iso.open.join(", ")
            ),
        };
        self.set_alert(key, message);
    }

    /// Every tenant's "no default-deny" alert (the policies became known, or unknown).
    pub(super) fn refresh_netpol_alerts(&mut self) {
        let ids: Vec<TenantId> = self.tenants.ids().collect();
        for t in ids {
            self.refresh_netpol_alert(t);
        }
    }
}

#[cfg(test)]
impl Fleet {
    /// Recounts who lives next to whom from scratch and compares with what was kept per
    /// pod link (`check_invariants`).
    pub(crate) fn check_cotenancy(&self) {
        let mut node_tenants: FastMap<NodeId, Vec<TenantId>> = FastMap::default();
        for (pid, p) in self.pods.iter() {
            if let Some(n) = p.node
                && self.counters.pod.get(pid).is_some_and(|c| c.holds_devices())
            {
                let l = node_tenants.entry(n).or_default();
                if !l.contains(&p.tenant) {
                    l.push(p.tenant);
                }
            }
        }
        let mut tenant_nodes: FastMap<TenantId, BTreeSet<NodeId>> = FastMap::default();
        for (n, ts) in &node_tenants {
            for t in ts {
                tenant_nodes.entry(*t).or_default().insert(*n);
            }
        }
        assert_eq!(tenant_nodes, self.cotenancy.tenant_nodes, "tenants' nodes");
        let mut gpus: FastMap<TenantId, u32> = FastMap::default();
        for (n, ts) in &node_tenants {
            if ts.len() < 2 {
                continue;
            }
            for g in self.node(*n).map(|n| n.gpus.clone()).unwrap_or_default() {
                let ts = self.gpu_tenants(g);
                if ts.len() >= 2 {
                    for t in ts {
                        *gpus.entry(t).or_default() += 1;
                    }
                }
            }
        }
        assert_eq!(gpus, self.cotenancy.shared_gpus, "tenants' shared GPUs");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Delta, NetPolicySpec, PolicyDir};

    fn open_alerts(f: &Fleet) -> Vec<String> {
        f.alerts.values().filter(|a| a.kind == AlertKind::NoDefaultDeny).map(|a| a.message.clone()).collect()
    }

    #[test]
    fn a_default_deny_closes_the_alert_and_unknown_policies_raise_none() {
        let mut f = crate::testing::demo_fleet(42, 48, 3, Default::default()).1;
        let eval = f.tenant_by_name("eval").expect("the demo's eval tenant");
        assert_eq!(f.tenant_isolation(eval).map(|i| i.open), Some(vec!["eval".to_string()]));
        assert!(open_alerts(&f).iter().any(|m| m.contains("tenant eval")), "{:?}", open_alerts(&f));
        let deny = NetPolicySpec {
            namespace: "eval".into(),
            name: "deny".into(),
            all_pods: true,
            ingress: PolicyDir { isolates: true, allows_all: false },
            egress: PolicyDir::default(),
            ..Default::default()
        };
        f.apply(Delta::NetPolUpsert(deny.clone()));
        assert!(!open_alerts(&f).iter().any(|m| m.contains("tenant eval")));
        assert_eq!(f.tenant_isolation(eval).map(|i| i.netpol_text()), Some("deny in".to_string()));
        // An allow-everyone policy over every pod opens it again; its removal closes it.
        let open =
            NetPolicySpec { name: "all".into(), ingress: PolicyDir { isolates: true, allows_all: true }, ..deny };
        f.apply(Delta::NetPolUpsert(open));
        assert!(open_alerts(&f).iter().any(|m| m.contains("tenant eval")));
        f.apply(Delta::NetPolRemove { namespace: "eval".into(), name: "all".into() });
        assert!(!open_alerts(&f).iter().any(|m| m.contains("tenant eval")));
        // Not allowed to list NetworkPolicies: nobody is called open.
        f.apply(Delta::Feed {
            source: NETPOL_FEED.into(),
            state: FeedState::Stale { since: 0, reason: "forbidden".into() },
        });
        assert!(!f.netpol_known() && open_alerts(&f).is_empty());
        f.apply(Delta::FeedRemove(NETPOL_FEED.into()));
        assert!(f.netpol_known() && !open_alerts(&f).is_empty());
    }

    #[test]
    fn tenants_on_one_gpu_are_named_and_counted_per_link() {
        let f = crate::testing::demo_fleet(42, 48, 3, Default::default()).1;
        let speech = f.tenant_by_name("speech").expect("speech");
        let (nodes, gpus) = f.tenant_neighbours(speech);
        assert!(
            !gpus.is_empty()
                && nodes.len()
                    >= gpus
                        .iter()
                        .map(|(g, _)| f.gpu(*g).map(|g| g.node))
                        .collect::<std::collections::BTreeSet<_>>()
                        .len()
        );
        for (g, others) in &gpus {
            let all = f.gpu_tenants(*g);
            assert!(all.contains(&speech) && others.iter().all(|t| all.contains(t) && *t != speech));
        }
        assert_eq!(f.tenant_isolation(speech).map(|i| i.shared_gpus), Some(gpus.len() as u32));
        f.check_cotenancy();
    }

    #[test]
    fn a_clusterwide_policy_covers_the_namespaces_it_selects_and_only_those() {
        let mut f = crate::testing::demo_fleet(42, 48, 3, Default::default()).1;
        let (eval, research) =
            (f.tenant_by_name("eval").expect("eval"), f.tenant_by_name("research").expect("research"));
        let wide = NetPolicySpec {
            namespace: crate::model::isolation::ALL_NAMESPACES.into(),
            name: "CiliumClusterwideNetworkPolicy/deny".into(),
            all_pods: true,
            ingress: PolicyDir { isolates: true, allows_all: false },
            except: vec!["eval".into()],
            ..Default::default()
        };
        f.apply(Delta::NetPolUpsert(wide.clone()));
        assert_eq!(f.tenant_isolation(eval).map(|i| i.open), Some(vec!["eval".to_string()]), "left out");
        assert_eq!(f.tenant_isolation(research).map(|i| i.open.len()), Some(0), "covered");
        assert!(!open_alerts(&f).iter().any(|m| m.contains("tenant research")), "{:?}", open_alerts(&f));
        f.apply(Delta::NetPolRemove { namespace: wide.namespace.clone(), name: wide.name.clone() });
        assert!(open_alerts(&f).iter().any(|m| m.contains("tenant research")), "{:?}", open_alerts(&f));
    }
}
