//! Capacity facts: what device-plugin resources (mixed strategy) a node advertises for a set
//! of GPU layouts, and how people read such a set.

use std::collections::BTreeMap;

use super::{GpuModel, PlacedInstance, profile};

/// Device-plugin capacity (mixed strategy) the node advertises for a set of GPU layouts.
pub fn capacity(model: GpuModel, gpus: impl Iterator<Item = (bool, Vec<PlacedInstance>)>) -> Vec<(String, i64)> {
    let mut whole = 0i64;
    let mut mig_caps: BTreeMap<String, i64> = BTreeMap::new();
    for (mig_enabled, instances) in gpus {
        if mig_enabled {
            for i in instances {
                *mig_caps.entry(profile(model, i.profile).resource_name()).or_default() += 1;
            }
        } else {
            whole += 1;
        }
    }
    let mut v = vec![("nvidia.com/gpu".to_string(), whole)];
    v.extend(mig_caps);
    v
}

/// "8×mig-3g.40gb, 16×mig-1g.10gb": GPU resources and their counts, as people read them.
pub fn caps_text<S: AsRef<str>>(c: impl IntoIterator<Item = (S, i64)>) -> String {
    let parts: Vec<String> = c
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| format!("{n}×{}", r.as_ref().trim_start_matches("nvidia.com/")))
        .collect();
    if parts.is_empty() { "no GPU devices".into() } else { parts.join(", ") }
}
