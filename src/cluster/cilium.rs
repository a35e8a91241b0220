//! Cilium's own policies (`cilium.io/v2` CiliumNetworkPolicy and
//! CiliumClusterwideNetworkPolicy), reduced to what tenant isolation needs, as Cilium's
//! default enforcement mode reads them:
//!
//! - a rule puts the endpoints it selects into default deny for a direction when it has an
//!   `ingress` / `ingressDeny` (or `egress` / `egressDeny`) section, unless its
//!   `enableDefaultDeny` turns that direction off;
//! - an empty rule (`ingress: [{}]`) allows nothing (unlike a NetworkPolicy's);
//! - a rule opens the direction to everyone with the `all` entity (`fromEntities` /
//!   `toEntities`), a `toCIDR` of `0.0.0.0/0` or `::/0` (egress), or — in a clusterwide
//!   policy — `fromEndpoints` / `toEndpoints` `[{}]` (every endpoint of the cluster), without
//!   `toPorts`;
//! - a CiliumNetworkPolicy's `endpointSelector: {}` selects every pod of its namespace; a
//!   clusterwide one's selects every pod of every namespace, or of those its namespace label
//!   (`k8s:io.kubernetes.pod.namespace`) names (`matchLabels`, `In`, `NotIn`).
//!
//! The result is a [`NetPolicySpec`] named `CiliumNetworkPolicy/<name>` in its namespace, or
//! `CiliumClusterwideNetworkPolicy/<name>` in the namespace [`ALL_NAMESPACES`].

use serde_json::Value;

use crate::model::{NetPolicySpec, PolicyDir};

pub use crate::model::isolation::ALL_NAMESPACES;
const NS_KEYS: [&str; 2] = ["k8s:io.kubernetes.pod.namespace", "io.kubernetes.pod.namespace"];

fn strings(v: &Value) -> Vec<String> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
}

/// What an endpoint selector selects: every pod (of the namespaces given), or not.
/// `(all_pods, only, except)`.
fn selects(sel: &Value) -> (bool, Vec<String>, Vec<String>) {
    if !sel.is_object() {
        return (false, Vec::new(), Vec::new());
    }
    let (mut only, mut except, mut other) = (Vec::new(), Vec::new(), false);
    for (k, v) in sel["matchLabels"].as_object().into_iter().flatten() {
        match v.as_str() {
            Some(ns) if NS_KEYS.contains(&k.as_str()) => only.push(ns.to_string()),
            _ => other = true,
        }
    }
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        let key = e["key"].as_str().unwrap_or_default();
        match (NS_KEYS.contains(&key), e["operator"].as_str()) {
            (true, Some("In")) => only.extend(strings(&e["values"])),
            (true, Some("NotIn")) => except.extend(strings(&e["values"])),
            (true, Some("Exists")) => {}
            _ => other = true,
        }
    }
    (!other, only, except)
}

/// An empty selector `{}` (or one that asks only that the namespace label exists).
fn everything(sel: &Value) -> bool {
    matches!(selects(sel), (true, only, except) if only.is_empty() && except.is_empty())
}

/// One direction of one rule: `(isolates, allows_all)`.
fn dir(rule: &Value, allow: &str, deny: &str, entities: &str, endpoints: &str, egress: bool, cw: bool) -> PolicyDir {
    let has = |k: &str| rule.get(k).is_some_and(|v| !v.is_null());
    let default = has(allow) || has(deny);
    let dir_name = if egress { "egress" } else { "ingress" };
    let isolates = rule["enableDefaultDeny"][dir_name].as_bool().unwrap_or(default) && default;
    let allows_all = rule[allow].as_array().into_iter().flatten().any(|r| {
        let ports = r.get("toPorts").and_then(Value::as_array).is_some_and(|p| !p.is_empty());
        let all_entity = strings(&r[entities]).iter().any(|e| e == "all");
        let all_cidr = egress
            && (strings(&r["toCIDR"]).iter().any(|c| c == "0.0.0.0/0" || c == "::/0")
                || r["toCIDRSet"].as_array().into_iter().flatten().any(|s| {
                    matches!(s["cidr"].as_str(), Some("0.0.0.0/0" | "::/0"))
                        && s["except"].as_array().is_none_or(|e| e.is_empty())
                }));
        let all_endpoints = cw && r[endpoints].as_array().into_iter().flatten().any(everything);
        !ports && (all_entity || all_cidr || all_endpoints)
    });
    PolicyDir { isolates, allows_all }
}

/// A CiliumNetworkPolicy (`clusterwide` false) or CiliumClusterwideNetworkPolicy, as a
/// policy isolation reads; `None` without a name (or a namespace, for a namespaced one).
pub fn policy(o: &Value, clusterwide: bool) -> Option<NetPolicySpec> {
    let name = o["metadata"]["name"].as_str()?;
    let namespace =
        if clusterwide { ALL_NAMESPACES.to_string() } else { o["metadata"]["namespace"].as_str()?.to_string() };
    let mut rules: Vec<&Value> = o["specs"].as_array().map(|v| v.iter().collect()).unwrap_or_default();
    if o["spec"].is_object() {
        rules.push(&o["spec"]);
    }
    // The rules that select every pod decide the namespace's default; the others are kept
    // as policies for some pods.
    let mut out = NetPolicySpec {
        namespace,
        name: format!("{}/{name}", if clusterwide { "CiliumClusterwideNetworkPolicy" } else { "CiliumNetworkPolicy" }),
        ..Default::default()
    };
    for r in rules {
        let (all, only, except) = selects(&r["endpointSelector"]);
        let i = dir(r, "ingress", "ingressDeny", "fromEntities", "fromEndpoints", false, clusterwide);
        let e = dir(r, "egress", "egressDeny", "toEntities", "toEndpoints", true, clusterwide);
        if all && !out.all_pods {
            out.all_pods = true;
            out.ingress = PolicyDir::default();
            out.egress = PolicyDir::default();
        }
        if all == out.all_pods {
            out.ingress.isolates |= i.isolates;
            out.ingress.allows_all |= i.allows_all;
            out.egress.isolates |= e.isolates;
            out.egress.allows_all |= e.allows_all;
            if clusterwide && all {
                out.only.extend(only);
                out.except.extend(except);
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cnp(spec: Value) -> NetPolicySpec {
        policy(&json!({"metadata": {"name": "p", "namespace": "team-a"}, "spec": spec}), false).expect("read")
    }

    #[test]
    fn reads_what_cilium_means() {
        // Cilium's default deny: every endpoint, an empty rule each way (allows nothing).
        let p = cnp(json!({"endpointSelector": {}, "ingress": [{}], "egress": [{}]}));
        assert!(p.all_pods && p.ingress.isolates && !p.ingress.allows_all && p.egress.isolates);
        assert_eq!((p.namespace.as_str(), p.name.as_str()), ("team-a", "CiliumNetworkPolicy/p"));
        // Ingress from the same namespace only: isolating for ingress, egress untouched.
        let p = cnp(json!({"endpointSelector": {}, "ingress": [{"fromEndpoints": [{}]}]}));
        assert!(p.ingress.isolates && !p.ingress.allows_all && !p.egress.isolates);
        // Open to all, or default deny turned off: no isolation.
        let p = cnp(json!({"endpointSelector": {}, "ingress": [{"fromEntities": ["all"]}]}));
        assert!(p.ingress.isolates && p.ingress.allows_all);
        let p = cnp(json!({"endpointSelector": {}, "enableDefaultDeny": {"ingress": false},
            "ingress": [{"fromEndpoints": [{"matchLabels": {"app": "x"}}]}]}));
        assert!(!p.ingress.isolates);
        // A deny section alone isolates too; ports narrow an open door.
        let p = cnp(json!({"endpointSelector": {}, "ingressDeny": [{"fromEntities": ["world"]}],
            "egress": [{"toEntities": ["all"], "toPorts": [{"ports": [{"port": "53"}]}]}]}));
        assert!(p.ingress.isolates && p.egress.isolates && !p.egress.allows_all);
        let p = cnp(json!({"endpointSelector": {}, "egress": [{"toCIDR": ["0.0.0.0/0"]}]}));
        assert!(p.egress.isolates && p.egress.allows_all && !p.ingress.isolates);
        // Some pods only.
        assert!(!cnp(json!({"endpointSelector": {"matchLabels": {"app": "web"}}, "ingress": [{}]})).all_pods);
        // `specs`: the all-pods rule decides.
        let p = policy(
            &json!({"metadata": {"name": "p", "namespace": "n"}, "specs": [
            {"endpointSelector": {"matchLabels": {"app": "web"}}, "ingress": [{"fromEntities": ["all"]}]},
            {"endpointSelector": {}, "ingress": [{}]}]}),
            false,
        )
        .expect("read");
        assert!(p.all_pods && p.ingress.isolates && !p.ingress.allows_all);
        assert!(
            policy(&json!({"metadata": {"name": "p"}, "spec": {}}), false).is_none(),
            "namespaced without a namespace"
        );
    }

    #[test]
    fn a_clusterwide_policy_covers_the_namespaces_it_selects() {
        let ccnp = |sel: Value, ingress: Value| {
            policy(&json!({"metadata": {"name": "deny"}, "spec": {"endpointSelector": sel, "ingress": ingress}}), true)
                .expect("read")
        };
        let p = ccnp(
            json!({"matchExpressions": [{"key": "io.kubernetes.pod.namespace", "operator": "NotIn", "values": ["kube-system"]}]}),
            json!([{}]),
        );
        assert_eq!(
            (p.namespace.as_str(), p.all_pods, p.except.clone()),
            (ALL_NAMESPACES, true, vec!["kube-system".to_string()])
        );
        assert!(p.applies_to("team-a") && !p.applies_to("kube-system"));
        let p = ccnp(json!({"matchLabels": {"k8s:io.kubernetes.pod.namespace": "team-b"}}), json!([{}]));
        assert!(p.applies_to("team-b") && !p.applies_to("team-a"));
        // Every endpoint of the cluster let in: open.
        let p = ccnp(json!({}), json!([{"fromEndpoints": [{}]}]));
        assert!(p.ingress.isolates && p.ingress.allows_all);
    }
}
