//! NetworkPolicies, reduced to what tenant isolation needs ([`crate::model::isolation`]).

use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::DynamicObject;

use super::{Translator, split};
use crate::model::{Delta, NetPolicySpec, PolicyDir};

/// `{}`: selects everything.
fn empty(s: &LabelSelector) -> bool {
    s.match_labels.as_ref().is_none_or(|m| m.is_empty()) && s.match_expressions.as_ref().is_none_or(|e| e.is_empty())
}

/// A peer that is everyone: every pod of every namespace, or every address.
fn everyone(p: &NetworkPolicyPeer) -> bool {
    let all_ns = p.namespace_selector.as_ref().is_some_and(empty) && p.pod_selector.as_ref().is_none_or(empty);
    let all_ips = p.ip_block.as_ref().is_some_and(|b| {
        matches!(b.cidr.as_str(), "0.0.0.0/0" | "::/0") && b.except.as_ref().is_none_or(|e| e.is_empty())
    });
    all_ns || all_ips
}

/// One direction: isolating when its type is in the policy's types; open when a rule has
/// no peers and no ports, or a peer that is everyone.
fn dir<'a>(isolates: bool, rules: impl Iterator<Item = (Option<&'a Vec<NetworkPolicyPeer>>, bool)>) -> PolicyDir {
    let mut allows_all = false;
    for (peers, has_ports) in rules {
        let peers = peers.map(Vec::as_slice).unwrap_or_default();
        allows_all |= (peers.is_empty() && !has_ports) || peers.iter().any(everyone);
    }
    PolicyDir { isolates, allows_all }
}

pub(super) fn netpol_spec(p: &NetworkPolicy) -> Option<NetPolicySpec> {
    let spec = p.spec.as_ref()?;
    let ingress = spec.ingress.as_deref().unwrap_or_default();
    let egress = spec.egress.as_deref().unwrap_or_default();
    // Kubernetes: policyTypes when given; else Ingress, and Egress when there are egress rules.
    let (iso_in, iso_out) = match &spec.policy_types {
        Some(t) => (t.iter().any(|x| x == "Ingress"), t.iter().any(|x| x == "Egress")),
        None => (true, !egress.is_empty()),
    };
    Some(NetPolicySpec {
        namespace: p.metadata.namespace.clone()?,
        name: p.metadata.name.clone()?,
        all_pods: spec.pod_selector.as_ref().is_none_or(empty),
        ingress: dir(
            iso_in,
            ingress.iter().map(|r| (r.from.as_ref(), r.ports.as_ref().is_some_and(|p| !p.is_empty()))),
        ),
        egress: dir(iso_out, egress.iter().map(|r| (r.to.as_ref(), r.ports.as_ref().is_some_and(|p| !p.is_empty())))),
        ..Default::default()
    })
}

impl Translator {
    /// A CiliumNetworkPolicy ([`crate::cluster::cilium`]).
    pub(super) fn cilium_pol(&mut self, o: Option<&DynamicObject>, key: &str, out: &mut Vec<Delta>) {
        match o.and_then(|o| serde_json::to_value(o).ok()).and_then(|v| crate::cluster::cilium::policy(&v, false)) {
            Some(spec) => out.push(Delta::NetPolUpsert(spec)),
            None => {
                let (namespace, name) = split(key);
                out.push(Delta::NetPolRemove { namespace, name: format!("CiliumNetworkPolicy/{name}") });
            }
        }
    }

    /// A CiliumClusterwideNetworkPolicy: kept under the namespace `*`.
    pub(super) fn cilium_wide(&mut self, o: Option<&DynamicObject>, key: &str, out: &mut Vec<Delta>) {
        match o.and_then(|o| serde_json::to_value(o).ok()).and_then(|v| crate::cluster::cilium::policy(&v, true)) {
            Some(spec) => out.push(Delta::NetPolUpsert(spec)),
            None => out.push(Delta::NetPolRemove {
                namespace: crate::model::isolation::ALL_NAMESPACES.into(),
                name: format!("CiliumClusterwideNetworkPolicy/{}", split(key).1),
            }),
        }
    }

    pub(super) fn netpol(&mut self, p: Option<&NetworkPolicy>, key: &str, out: &mut Vec<Delta>) {
        match p.and_then(netpol_spec) {
            Some(spec) => out.push(Delta::NetPolUpsert(spec)),
            None => {
                let (namespace, name) = split(key);
                out.push(Delta::NetPolRemove { namespace, name });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: serde_json::Value) -> NetPolicySpec {
        let mut o = serde_json::json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "p", "namespace": "ns"}});
        o["spec"] = v;
        netpol_spec(&serde_json::from_value(o).expect("a NetworkPolicy")).expect("read")
    }

    #[test]
    fn reads_what_kubernetes_means() {
        // The classic default deny: every pod, Ingress, no rules.
        let p = spec(serde_json::json!({"podSelector": {}, "policyTypes": ["Ingress"]}));
        assert!(p.all_pods && p.ingress == PolicyDir { isolates: true, allows_all: false } && !p.egress.isolates);
        // No policyTypes: Ingress, and Egress only with egress rules.
        let p = spec(
            serde_json::json!({"podSelector": {"matchLabels": {"app": "x"}}, "egress": [{"to": [{"podSelector": {}}]}]}),
        );
        assert!(!p.all_pods && p.ingress.isolates && p.egress.isolates && !p.egress.allows_all);
        // Open doors: an empty rule, every namespace, every address.
        let p = spec(serde_json::json!({"podSelector": {}, "ingress": [{}]}));
        assert!(p.ingress.allows_all);
        let p = spec(serde_json::json!({"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {}}]}]}));
        assert!(p.ingress.allows_all);
        let p = spec(
            serde_json::json!({"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]}),
        );
        assert!(p.egress.allows_all && !p.ingress.isolates);
        // Not everyone: the same namespace, one namespace, an address range with holes, ports only.
        for rule in [
            serde_json::json!({"from": [{"podSelector": {}}]}),
            serde_json::json!({"from": [{"namespaceSelector": {"matchLabels": {"team": "a"}}}]}),
            serde_json::json!({"from": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}]}),
            serde_json::json!({"ports": [{"port": 443}]}),
        ] {
            let p = spec(serde_json::json!({"podSelector": {}, "ingress": [rule]}));
            assert!(p.ingress.isolates && !p.ingress.allows_all, "{p:?}");
        }
    }
}
