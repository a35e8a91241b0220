//! The incident bundle (`fabrik snapshot --bundle - --node N | --tenant T`) against the
//! truth read from the API: which rows each section holds is the scope, and the scope is
//! what the API says is on the node or the tenant's — GPU pods bound to the node
//! (`spec.nodeName`), the tenants of those pods, the GPUs of the nodes, the quotas of those
//! tenants, the ComputeDomains over the node or in the tenant's namespaces. The cells are
//! the views' own cells, which the rest of this test compares.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{Truth, s};

/// A table's rows, each as column name → cell.
type Table = Vec<BTreeMap<String, String>>;

/// A bundle's sections: title → (the count in its heading, its table).
pub fn sections(md: &str) -> BTreeMap<String, (Option<usize>, Table)> {
    let mut out = BTreeMap::new();
    for part in md.split("\n## ").skip(1) {
        let heading = part.lines().next().unwrap_or("");
        let (title, count) = match heading.rsplit_once(" (") {
            Some((t, n)) => (t.to_string(), n.split(|c: char| !c.is_ascii_digit()).next().and_then(|n| n.parse().ok())),
            None => (heading.to_string(), None),
        };
        let cells = |l: &str| -> Vec<String> {
            l.trim().trim_start_matches('|').trim_end_matches('|').split(" | ").map(|c| c.trim().to_string()).collect()
        };
        let mut table = part.lines().skip_while(|l| !l.starts_with("| ")).take_while(|l| l.starts_with('|'));
        let header = table.next().map(cells).unwrap_or_default();
        let rows =
            table.skip(1).map(|l| header.iter().cloned().zip(cells(l)).collect::<BTreeMap<String, String>>()).collect();
        out.insert(title, (count, rows));
    }
    out
}

fn column(rows: &[BTreeMap<String, String>], name: &str) -> BTreeSet<String> {
    rows.iter().filter_map(|r| r.get(name).cloned()).collect()
}

/// The sections of a node's or a tenant's bundle that differ from the truth, one line each.
/// `nodes` and `tenants`: the scope's nodes and tenants as the API says.
fn compare_scope(
    what: &str,
    md: &str,
    t: &Truth,
    pods: &BTreeSet<String>,
    nodes: &BTreeSet<String>,
    tenants: &BTreeSet<String>,
    domains: &BTreeSet<String>,
) -> Vec<String> {
    let mut diffs = Vec::new();
    let secs = sections(md);
    let mut check = |title: &str, got: BTreeSet<String>, want: &BTreeSet<String>| {
        let count = secs.get(title).and_then(|(c, _)| *c);
        if &got != want || count != Some(want.len()) {
            diffs.push(format!("{what} bundle, {title} ({count:?}): fabrik {got:?}, the API {want:?}"));
        }
    };
    let rows = |title: &str| secs.get(title).map(|(_, r)| r.clone()).unwrap_or_default();
    let pod_keys: BTreeSet<String> = rows("Pods")
        .iter()
        .map(|r| format!("{}/{}", r["NAMESPACE"], r.get("NAME").cloned().unwrap_or_default()))
        .collect();
    check("Pods", pod_keys, pods);
    check("Fleet", column(&rows("Fleet"), "NAME"), nodes);
    check("Tenants", column(&rows("Tenants"), "TENANT"), tenants);
    check("Domains", column(&rows("Domains"), "DOMAIN"), domains);
    // GPUs: every GPU of the scope's nodes (MIG instances are rows under them, not GPUs).
    let gpus: BTreeSet<String> =
        t.views["gpus"].keys().filter(|k| nodes.iter().any(|n| k.starts_with(&format!("{n}/")))).cloned().collect();
    let got: BTreeSet<String> = rows("GPUs")
        .iter()
        .filter(|r| r.get("GPU").is_some_and(|g| g.starts_with("gpu")))
        .map(|r| format!("{}/{}", r["NODE"], r["GPU"].trim_start_matches("gpu")))
        .collect();
    check("GPUs", got, &gpus);
    // Quotas: those of the scope's tenants.
    let quotas = t.views["quotas"].iter().filter(|(_, q)| tenants.contains(&s(&q["tenant"]))).count();
    let got = secs.get("Quotas").map(|(c, r)| (*c, r.len()));
    if got != Some((Some(quotas), quotas)) {
        diffs.push(format!("{what} bundle, Quotas (count, rows) {got:?}: the API has {quotas}"));
    }
    diffs
}

/// A node's bundle: its GPU pods, its tenants, its GPUs, the domains over it.
pub fn compare_node(kubeconfig: &std::path::Path, md: &str, t: &Truth, node: &str) -> Vec<String> {
    let on: Vec<(&String, &BTreeMap<&str, Value>)> =
        t.views["pods"].iter().filter(|(_, p)| p.get("node").and_then(Value::as_str) == Some(node)).collect();
    let pods: BTreeSet<String> = on.iter().map(|(k, _)| (*k).clone()).collect();
    let tenants: BTreeSet<String> =
        on.iter().map(|(_, p)| s(&p["tenant"])).filter(|tn| t.views["tenants"].contains_key(tn)).collect();
    let domains: BTreeSet<String> = t.views["domains"]
        .iter()
        .filter(|(_, d)| d["nodes"].as_array().is_some_and(|ns| ns.iter().any(|n| n["name"] == node)))
        .map(|(k, _)| k.clone())
        .collect();
    let mut diffs =
        compare_scope(&format!("node {node}"), md, t, &pods, &BTreeSet::from([node.to_string()]), &tenants, &domains);
    // On a cluster the node object closes the bundle: the one kubectl reads (its uid).
    let uid = super::common::kubectl(kubeconfig, &["get", "node", node, "-o", "jsonpath={.metadata.uid}"]);
    let object = md.split("\n## Node object\n").nth(1).unwrap_or("");
    if !object.contains("kind: Node") || !object.contains(&format!("uid: {uid}")) {
        diffs.push(format!("node {node} bundle: no Node object with uid {uid}:\n{object}"));
    }
    if !md.starts_with(&format!("# fabrik incident bundle: node {node}\n")) {
        diffs.push(format!("node {node} bundle: heading {:?}", md.lines().next()));
    }
    diffs
}

/// A tenant's bundle: its GPU pods, the nodes they run on, its domains, and why its pending
/// pods wait, rolled up as its tenants row says (itself compared with the API's events).
pub fn compare_tenant(md: &str, t: &Truth, tenant: &str) -> Vec<String> {
    let mine: Vec<(&String, &BTreeMap<&str, Value>)> =
        t.views["pods"].iter().filter(|(_, p)| p.get("tenant").and_then(Value::as_str) == Some(tenant)).collect();
    let pods: BTreeSet<String> = mine.iter().map(|(k, _)| (*k).clone()).collect();
    let nodes: BTreeSet<String> =
        mine.iter().filter_map(|(_, p)| p.get("node").and_then(Value::as_str)).map(str::to_string).collect();
    let namespaces: BTreeSet<String> = pods.iter().filter_map(|k| k.split('/').next()).map(str::to_string).collect();
    let domains: BTreeSet<String> = t.views["domains"]
        .keys()
        .filter(|k| k.split('/').next().is_some_and(|ns| namespaces.contains(ns)))
        .cloned()
        .collect();
    let mut diffs = compare_scope(
        &format!("tenant {tenant}"),
        md,
        t,
        &pods,
        &nodes,
        &BTreeSet::from([tenant.to_string()]),
        &domains,
    );
    let said = format!("- nodes its GPU pods run on: {}\n", nodes.len());
    if !md.contains(&said) {
        diffs.push(format!("tenant {tenant} bundle: no line {said:?} (the API: {nodes:?})"));
    }
    // `- pending: N (k why, …)` from the pending pods' waiting reasons, and `- running, a
    // container restarting: N (k CrashLoopBackOff)` from the running pods'.
    for (phase, start) in [("Pending", "- pending: "), ("Running", "- running, a container restarting: ")] {
        let mut by: BTreeMap<String, u64> = BTreeMap::new();
        for (_, p) in mine.iter().filter(|(_, p)| p.get("phase").and_then(Value::as_str) == Some(phase)) {
            if let Some(why) = p.get("waiting").and_then(|w| w["why"].as_str()) {
                *by.entry(why.to_string()).or_default() += 1;
            }
        }
        let line = md.lines().find(|l| l.starts_with(start));
        match (by.values().sum::<u64>(), line) {
            (0, None) => {}
            (0, Some(l)) => {
                diffs.push(format!("tenant {tenant} bundle says {l:?}; the API has no such {phase} GPU pod"))
            }
            (n, None) => diffs.push(format!("tenant {tenant} bundle has no {start:?} line; the API has {n}: {by:?}")),
            (n, Some(l)) => {
                let ok =
                    l.starts_with(&format!("{start}{n} (")) && by.iter().all(|(w, k)| l.contains(&format!("{k} {w}")));
                if !ok {
                    diffs.push(format!("tenant {tenant} bundle says {l:?}; the API: {n} {phase}, {by:?}"));
                }
            }
        }
    }
    // The `crash loop` alert: the tenant's running GPU pods in CrashLoopBackOff, and the
    // devices they hold (GPUs, MIG instances, DRA devices they asked for and were given).
    let looping: Vec<&BTreeMap<&str, Value>> = mine
        .iter()
        .map(|(_, p)| *p)
        .filter(|p| {
            p.get("phase").and_then(Value::as_str) == Some("Running")
                && p.get("waiting").is_some_and(|w| w["why"] == "CrashLoopBackOff")
        })
        .collect();
    let held = |p: &BTreeMap<&str, Value>| {
        let r = p.get("request").cloned().unwrap_or_default();
        let mig: u64 = r["mig"].as_object().into_iter().flatten().filter_map(|(_, n)| n.as_u64()).sum();
        let dra: u64 = r["dra"].as_array().into_iter().flatten().filter_map(|c| c["count"].as_u64()).sum();
        r["gpus"].as_u64().unwrap_or(0) + mig + dra
    };
    let devices: u64 = looping.iter().map(|p| held(p)).sum();
    let row = md.lines().find(|l| l.starts_with("| ") && l.contains(" | crash loop | "));
    match (looping.len(), row) {
        (0, None) => {}
        (0, Some(l)) => {
            diffs.push(format!("tenant {tenant} bundle alerts {l:?}; the API has no crash-looping GPU pod"))
        }
        (n, None) => diffs.push(format!("tenant {tenant} bundle has no crash loop alert; the API has {n} such pods")),
        (n, Some(l)) => {
            let (s, ds) = (if n == 1 { "" } else { "s" }, if devices == 1 { "" } else { "s" });
            let want = format!("{n} pod{s} crash-looping (CrashLoopBackOff), idle on the {devices} GPU device{ds}");
            if !l.contains(&want) {
                diffs.push(format!("tenant {tenant} bundle alerts {l:?}; the API: {want:?}"));
            }
        }
    }
    diffs
}
