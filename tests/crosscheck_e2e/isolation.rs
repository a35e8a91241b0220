//! The tenants' `isolation` computed from the raw API: NetworkPolicies as Kubernetes
//! documents them, Pod Security admission's `enforce` label on the namespaces, and who
//! holds devices next to whom from the pods and DRA allocations.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

/// `{}` (or absent where absent means everything): selects everything.
fn empty(sel: &Value) -> bool {
    sel.is_object()
        && sel["matchLabels"].as_object().is_none_or(|m| m.is_empty())
        && sel["matchExpressions"].as_array().is_none_or(|m| m.is_empty())
}

/// A peer that is everyone: every pod of every namespace, or every address.
fn everyone(peer: &Value) -> bool {
    let all_ns = empty(&peer["namespaceSelector"]) && (peer["podSelector"].is_null() || empty(&peer["podSelector"]));
    let cidr = peer["ipBlock"]["cidr"].as_str().unwrap_or_default();
    let all_ips =
        (cidr == "0.0.0.0/0" || cidr == "::/0") && peer["ipBlock"]["except"].as_array().is_none_or(|e| e.is_empty());
    all_ns || all_ips
}

/// (isolates, lets everyone in/out) for one direction of a policy.
fn direction(spec: &Value, rules_key: &str, peers_key: &str, kind: &str) -> (bool, bool) {
    let rules = spec[rules_key].as_array().cloned().unwrap_or_default();
    let isolates = match spec["policyTypes"].as_array() {
        Some(t) => t.iter().any(|x| x == kind),
        None => kind == "Ingress" || !rules.is_empty(),
    };
    let open = rules.iter().any(|r| {
        let peers = r[peers_key].as_array().cloned().unwrap_or_default();
        let ports = r["ports"].as_array().is_some_and(|p| !p.is_empty());
        (peers.is_empty() && !ports) || peers.iter().any(everyone)
    });
    (isolates, open)
}

#[derive(Default)]
pub struct Isolation {
    /// Namespace → (default-deny ingress, default-deny egress).
    ns: BTreeMap<String, (bool, bool)>,
    /// Namespace → its `pod-security.kubernetes.io/enforce` label.
    enforce: BTreeMap<String, String>,
    /// Node → tenants whose running pods hold devices there.
    node_tenants: BTreeMap<String, BTreeSet<String>>,
    /// GPU uuid → (node, index, tenants holding some of it).
    gpu_tenants: BTreeMap<String, (String, Value, BTreeSet<String>)>,
}

impl Isolation {
    /// `holders`: (tenant, node, GPU uuids the API places its devices on).
    pub fn new(
        namespaces: &[Value],
        netpols: &[Value],
        holders: Vec<(String, String, Vec<String>)>,
        gpu_at: &BTreeMap<String, (String, Value)>,
    ) -> Isolation {
        let mut per_ns: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
        for p in netpols {
            per_ns.entry(p["metadata"]["namespace"].as_str().unwrap_or_default().to_string()).or_default().push(p);
        }
        let mut out = Isolation::default();
        for n in namespaces {
            if let Some(level) = n["metadata"]["labels"]["pod-security.kubernetes.io/enforce"].as_str() {
                out.enforce.insert(n["metadata"]["name"].as_str().unwrap_or_default().to_string(), level.to_string());
            }
        }
        for (ns, ps) in per_ns {
            let (mut iso_in, mut iso_out, mut open_in, mut open_out) = (false, false, false, false);
            for p in ps {
                let spec = &p["spec"];
                if !(spec["podSelector"].is_null() || empty(&spec["podSelector"])) {
                    continue;
                }
                let (i, o) = direction(spec, "ingress", "from", "Ingress");
                iso_in |= i;
                open_in |= i && o;
                let (i, o) = direction(spec, "egress", "to", "Egress");
                iso_out |= i;
                open_out |= i && o;
            }
            out.ns.insert(ns, (iso_in && !open_in, iso_out && !open_out));
        }
        for (tenant, node, gpus) in holders {
            out.node_tenants.entry(node).or_default().insert(tenant.clone());
            for g in gpus {
                let Some((node, index)) = gpu_at.get(&g) else { continue };
                out.gpu_tenants
                    .entry(g)
                    .or_insert_with(|| (node.clone(), index.clone(), BTreeSet::new()))
                    .2
                    .insert(tenant.clone());
            }
        }
        out
    }

    /// The `isolation` object of tenant `tn` with namespaces `nss`.
    pub fn tenant(&self, tn: &str, nss: &[String]) -> Value {
        let open: Vec<&String> = nss.iter().filter(|n| !self.ns.get(*n).is_some_and(|d| d.0)).collect();
        let egress = nss.iter().filter(|n| self.ns.get(*n).is_some_and(|d| d.1)).count();
        let netpol = if nss.is_empty() {
            "-".to_string()
        } else if !open.is_empty() {
            format!("open {}/{}", open.len(), nss.len())
        } else if egress == nss.len() {
            "deny".to_string()
        } else {
            "deny in".to_string()
        };
        let others = |ts: &BTreeSet<String>| ts.iter().filter(|t| *t != tn).cloned().collect::<Vec<_>>();
        let nodes: Vec<Value> = self
            .node_tenants
            .iter()
            .filter(|(_, ts)| ts.len() >= 2 && ts.contains(tn))
            .map(|(n, ts)| json!({ "node": n, "tenants": others(ts) }))
            .collect();
        let mut gpus: Vec<(String, i64, Value)> = self
            .gpu_tenants
            .iter()
            .filter(|(_, (_, _, ts))| ts.len() >= 2 && ts.contains(tn))
            .map(|(uuid, (node, index, ts))| {
                (
                    node.clone(),
                    index.as_i64().unwrap_or(-1),
                    json!({ "node": node, "gpu": index, "uuid": uuid, "tenants": others(ts) }),
                )
            })
            .collect();
        gpus.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        // Pod Security: the least strict of the Standards' levels enforced, or how many
        // namespaces enforce none of them.
        const LEVELS: [&str; 3] = ["privileged", "baseline", "restricted"];
        let level = |n: &String| self.enforce.get(n).and_then(|l| LEVELS.iter().position(|k| k == l));
        let mut unset: Vec<&String> = nss.iter().filter(|n| level(n).is_none()).collect();
        unset.sort();
        let pod_security = match (nss.len(), unset.len(), nss.iter().filter_map(level).min()) {
            (0, ..) => "-".to_string(),
            (n, u, _) if u > 0 => format!("unset {u}/{n}"),
            (_, _, Some(i)) => LEVELS[i].to_string(),
            _ => "-".to_string(),
        };
        json!({
            "netpol": netpol,
            "pod_security": pod_security,
            "pod_security_unset_namespaces": unset,
            "open_namespaces": open,
            "egress_deny_namespaces": egress,
            "shared_nodes": nodes,
            "shared_gpus": gpus.into_iter().map(|g| g.2).collect::<Vec<_>>(),
        })
    }
}
