//! Each node's allocated devices against `kubectl describe nodes` ("Allocated resources"),
//! kubectl's own sum of the requests of every non-terminated pod on the node: whole GPUs
//! (`nvidia.com/gpu`), replicas of a shared GPU (`nvidia.com/gpu` or `.shared`) and MIG
//! instances (`nvidia.com/mig-*`) held, as fabrik's fleet JSON says them. Nodes whose GPUs
//! are DRA devices are left out (kubectl does not count claims there), and so are the whole
//! GPUs of a node with MIG resources (which GPU an instance is on is not on the API).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use super::{common::kubectl, fabrik, s};

/// Per node, the requests of each `nvidia.com/` resource under "Allocated resources".
pub fn read_describe(text: &str) -> BTreeMap<String, BTreeMap<String, i64>> {
    let mut out: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    let (mut node, mut inside) = (None::<String>, false);
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("Name:") {
            node = Some(name.trim().to_string());
            inside = false;
            continue;
        }
        if !line.starts_with(' ') {
            inside = line.starts_with("Allocated resources:");
            continue;
        }
        let mut cols = line.split_whitespace();
        let (Some(n), true, Some(res), Some(req)) = (&node, inside, cols.next(), cols.next()) else { continue };
        if res.starts_with("nvidia.com/")
            && let Ok(v) = req.parse::<i64>()
        {
            out.entry(n.clone()).or_default().insert(res.to_string(), v);
        }
    }
    out
}

/// The differences, one line each, with the node that held a pod stuck Pending (`stuck`,
/// `(node, pod)`) among those compared; `None` when the cluster changed while it was read.
pub fn compare(kubeconfig: &Path, dra_nodes: &BTreeSet<String>, stuck: (&str, &str)) -> Option<Vec<String>> {
    let before = kubectl(kubeconfig, &["describe", "nodes"]);
    let doc: Value = serde_json::from_str(&fabrik(kubeconfig, &["snapshot", "--view", "fleet", "--format", "json"]))
        .expect("fleet JSON");
    let after = kubectl(kubeconfig, &["describe", "nodes"]);
    let (b, a) = (read_describe(&before), read_describe(&after));
    if a != b {
        return None;
    }
    let mut diffs = Vec::new();
    let mut compared = 0;
    let rows = doc["rows"].as_array().cloned().unwrap_or_default();
    for r in &rows {
        let name = s(&r["name"]);
        if dra_nodes.contains(&name) {
            continue;
        }
        let Some(res) = a.get(&name) else {
            diffs.push(format!("describe nodes: {name} has no nvidia.com resource under Allocated resources"));
            continue;
        };
        let of = |k: &str| res.get(k).copied();
        let mig: Option<i64> =
            res.iter().filter(|(k, _)| k.starts_with("nvidia.com/mig-")).map(|(_, v)| *v).reduce(|x, y| x + y);
        let (what, fabrik, kubectl) = if !r["sharing"].is_null() {
            let shares = of("nvidia.com/gpu").unwrap_or(0) + of("nvidia.com/gpu.shared").unwrap_or(0);
            ("replicas held", r["sharing"]["shares_held"].as_i64(), Some(shares))
        } else if let Some(mig) = mig {
            ("MIG instances held", r["mig_alloc"]["used"].as_i64(), Some(mig))
        } else {
            ("GPUs allocated", r["alloc_gpus"]["used"].as_i64(), of("nvidia.com/gpu"))
        };
        compared += 1;
        if fabrik != kubectl {
            diffs.push(format!("{name}: {what}: fabrik {fabrik:?}, kubectl describe node {kubectl:?}"));
        }
    }
    if compared == 0 {
        diffs.push("describe nodes: no node compared".into());
    }
    let (node, pod) = stuck;
    if dra_nodes.contains(node) || !a.contains_key(node) {
        diffs.push(format!("describe nodes: {node}, where {pod} is stuck, was not compared"));
    }
    Some(diffs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_allocated_requests_of_each_node() {
        let text = "Name:               n1\nRoles:              <none>\nCapacity:\n  nvidia.com/gpu:  8\n\
                    Allocated resources:\n  (Total limits may be over 100 percent, i.e., overcommitted.)\n  \
                    Resource           Requests    Limits\n  --------           --------    ------\n  \
                    cpu                0 (0%)      0 (0%)\n  nvidia.com/gpu     3           3\n\
                    Events:              <none>\n\nName:  n2\nAllocated resources:\n  \
                    nvidia.com/mig-1g.10gb  2  2\n  nvidia.com/mig-3g.40gb  1  1\n";
        let got = read_describe(text);
        assert_eq!(got["n1"], BTreeMap::from([("nvidia.com/gpu".to_string(), 3)]));
        assert_eq!(got["n2"].values().sum::<i64>(), 3);
    }
}
