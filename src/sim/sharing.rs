//! GPUs the device plugin shares by time-slicing or MPS, as the NVIDIA GPU Operator sets
//! it up: a device-plugin config (`sharing.timeSlicing|mps.resources[{name: nvidia.com/gpu,
//! replicas: R}]`, optionally `renameByDefault: true`) selected per node by the
//! `nvidia.com/device-plugin.config` label. The device plugin then advertises `G×R` of
//! `nvidia.com/gpu` (or of `nvidia.com/gpu.shared` when renamed) and GFD labels the node with
//! the replicas, the strategy and a `-SHARED` product (not when renamed). The kubelet hands
//! out replicas with ids `<GPU-uuid>::<k>`, spread over the GPUs (the device plugin's
//! distributed allocation: the GPU with the fewest replicas handed out first).
//!
//! Both simulators use this: the demo factory (`Sim`) and `fabrik sim` against an API server,
//! whose nodes are the demo's.

use super::world::{SNode, SPod, Sim, Workload};
use crate::cluster::labels;
use crate::model::Owner;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SharingStrategy {
    TimeSlicing,
    Mps,
}

impl SharingStrategy {
    /// The `nvidia.com/gpu.sharing-strategy` value.
    pub fn label(self) -> &'static str {
        match self {
            Self::TimeSlicing => "time-slicing",
            Self::Mps => "mps",
        }
    }
}

/// How the device plugin of one node shares its GPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSharing {
    pub strategy: SharingStrategy,
    /// Replicas per physical GPU (> 1).
    pub replicas: u16,
    /// `renameByDefault: true`: the replicas are `nvidia.com/gpu.shared`.
    pub renamed: bool,
    /// The device-plugin config the operator selected (`nvidia.com/device-plugin.config`).
    pub config: String,
}

impl DeviceSharing {
    /// The `k`-th (0-based) shared node of the demo factory: time-slicing ×4 and MPS ×2 in
    /// turn, and every third one time-slicing ×4 renamed to `nvidia.com/gpu.shared`.
    pub fn nth(k: usize) -> DeviceSharing {
        let (strategy, replicas, renamed, config) = if k % 3 == 2 {
            (SharingStrategy::TimeSlicing, 4, true, "time-slicing-4-renamed")
        } else if k.is_multiple_of(2) {
            (SharingStrategy::TimeSlicing, 4, false, "time-slicing-4")
        } else {
            (SharingStrategy::Mps, 2, false, "mps-2")
        };
        DeviceSharing { strategy, replicas, renamed, config: config.to_string() }
    }

    /// The extended resource the replicas are advertised as.
    pub fn resource(&self) -> &'static str {
        if self.renamed { labels::GPU_SHARED_RESOURCE } else { labels::GPU_RESOURCE }
    }

    /// The sharing a node's labels and capacity describe (what GFD, the operator and the
    /// device plugin wrote); `None` when the node does not share its GPUs (`replicas=1`,
    /// strategy `none`, or no such labels). Renamed: it advertises `nvidia.com/gpu.shared`.
    /// Read as the cockpit reads it ([`crate::model::Sharing::of_node`]), plus the config name.
    pub fn of_node(node_labels: &[(String, String)], capacity: &[(String, i64)]) -> Option<DeviceSharing> {
        let s = crate::model::Sharing::of_node(node_labels, capacity);
        let strategy = match s.mode {
            crate::model::ShareMode::TimeSlicing => SharingStrategy::TimeSlicing,
            crate::model::ShareMode::Mps => SharingStrategy::Mps,
            crate::model::ShareMode::Exclusive => return None,
        };
        let label = |k: &str| node_labels.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        let config = label(labels::DEVICE_PLUGIN_CONFIG).unwrap_or_default().to_string();
        Some(DeviceSharing { strategy, replicas: s.replicas, renamed: s.renamed, config })
    }
}

/// GFD's product label (first) and sharing labels, and the operator's config label, of a
/// node: `replicas=1`, `sharing-strategy=none` on a node that does not share its GPUs.
pub fn sharing_labels(sharing: Option<&DeviceSharing>, product: &str) -> Vec<(&'static str, String)> {
    let Some(s) = sharing else {
        return vec![
            (labels::GPU_PRODUCT, product.to_string()),
            (labels::GPU_REPLICAS, "1".into()),
            (labels::GPU_SHARING_STRATEGY, "none".into()),
        ];
    };
    let product = if s.replicas > 1 && !s.renamed {
        format!("{product}{}", labels::SHARED_PRODUCT_SUFFIX)
    } else {
        product.to_string()
    };
    let mut out = vec![
        (labels::GPU_PRODUCT, product),
        (labels::GPU_REPLICAS, s.replicas.to_string()),
        (labels::GPU_SHARING_STRATEGY, s.strategy.label().into()),
        (labels::DEVICE_PLUGIN_CONFIG, s.config.clone()),
    ];
    if s.strategy == SharingStrategy::Mps {
        out.push((labels::MPS_CAPABLE, "true".into()));
    }
    out
}

/// What the device plugin advertises for `whole` GPUs with MIG off: `nvidia.com/gpu: whole`,
/// or the sharing's resource with `whole × replicas`.
pub fn whole_gpu_resource(sharing: Option<&DeviceSharing>, whole: i64) -> (&'static str, i64) {
    match sharing {
        Some(s) => (s.resource(), whole * i64::from(s.replicas)),
        None => (labels::GPU_RESOURCE, whole),
    }
}

/// The device plugin's distributed allocation of `want` replicas: one at a time, each from
/// the GPU with the fewest replicas handed out (ties: the first in `held`'s order), never
/// past `replicas` per GPU. `held[i]` is what GPU `i` has handed out (`None`: not shareable,
/// a MIG GPU). Returns the GPU of each replica, or `None` when fewer than `want` are free.
pub fn distribute(held: &[Option<u32>], replicas: u32, want: u32) -> Option<Vec<usize>> {
    let mut held: Vec<Option<u32>> = held.to_vec();
    let mut out = Vec::with_capacity(want as usize);
    for _ in 0..want {
        let (i, _) = held
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.filter(|h| *h < replicas).map(|h| (i, h)))
            .min_by_key(|(i, h)| (*h, *i))?;
        if let Some(h) = held[i].as_mut() {
            *h += 1;
        }
        out.push(i);
    }
    Some(out)
}

/// The kubelet's device id of replica `k` of a GPU (`<uuid>::<k>`).
pub fn replica_id(gpu: &str, k: u32) -> String {
    format!("{gpu}::{k}")
}

// ---------- the demo factory's shared nodes and the pods on them ----------

impl SNode {
    /// The GPU of each of `want` replicas a pod asking for them by `strategy` (and the
    /// renamed resource or not) would get here, by distributed allocation; `None` when the
    /// node does not share its GPUs that way or has fewer replicas free.
    pub(super) fn share_fit(&self, strategy: SharingStrategy, renamed: bool, want: usize) -> Option<Vec<usize>> {
        let s = self.share.as_ref().filter(|s| s.strategy == strategy && s.renamed == renamed)?;
        let held: Vec<Option<u32>> =
            self.gpus.iter().map(|g| (!g.spec.mig_enabled).then_some(g.holders.len() as u32)).collect();
        distribute(&held, u32::from(s.replicas), u32::try_from(want).ok()?)
    }
}

/// Replicas per physical GPU of the factory's shared GPUs of one kind.
fn replicas_of(nodes: &[SNode], strategy: SharingStrategy, renamed: bool) -> u32 {
    nodes
        .iter()
        .filter_map(|n| {
            let s = n.share.as_ref().filter(|s| s.strategy == strategy && s.renamed == renamed)?;
            Some(n.gpus.iter().filter(|g| !g.spec.mig_enabled).count() as u32 * u32::from(s.replicas))
        })
        .sum()
}

impl Sim {
    /// Workloads that ask for replicas of shared GPUs, sized on what the shared nodes offer:
    /// time-slicing jobs (one replica) and a debug deployment (two), an MPS inference
    /// service, and notebooks on the renamed resource. None without shared nodes.
    pub(super) fn shared_workloads(&self) -> Vec<Workload> {
        let ts = replicas_of(&self.nodes, SharingStrategy::TimeSlicing, false);
        let mps = replicas_of(&self.nodes, SharingStrategy::Mps, false);
        let renamed = replicas_of(&self.nodes, SharingStrategy::TimeSlicing, true);
        let pods = |replicas: u32, share: f64| (f64::from(replicas) * share).round() as u32;
        let w = |ns: &str, name: &str, owner, gpus, share, replicas, idle_share| Workload {
            namespace: ns.to_string(),
            name: name.to_string(),
            owner,
            gpus,
            mig: None,
            share: Some(share),
            dra: false,
            alpha: None,
            empty_dir: false,
            replicas,
            idle_share,
            job_ticks: None,
            pdb_max_unavailable: None,
        };
        let ts_ask = (SharingStrategy::TimeSlicing, false);
        let mut out = vec![
            Workload { job_ticks: Some((30, 300)), ..w("eval", "eval-ts", Owner::Job, 1, ts_ask, pods(ts, 0.3), 0.3) },
            w("llm-finetune-dev", "ft-debug-ts", Owner::ReplicaSet, 2, ts_ask, pods(ts, 0.22), 0.4),
            Workload {
                pdb_max_unavailable: Some(1),
                ..w(
                    "inference-prod",
                    "embed-mps",
                    Owner::ReplicaSet,
                    1,
                    (SharingStrategy::Mps, false),
                    pods(mps, 0.75),
                    0.1,
                )
            },
            w(
                "vc-research",
                "notebook-shared",
                Owner::None,
                1,
                (SharingStrategy::TimeSlicing, true),
                pods(renamed, 0.6),
                0.6,
            ),
        ];
        out.retain(|w| w.replicas > 0);
        out
    }

    /// Whether a pod asks for the renamed resource `nvidia.com/gpu.shared` (its `gpus`
    /// are replicas of it).
    pub(super) fn asks_renamed(&self, p: &SPod) -> bool {
        self.workloads.get(p.workload).and_then(|w| w.share).is_some_and(|(_, renamed)| renamed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_follow_gfd() {
        let plain = sharing_labels(None, "NVIDIA-H100-80GB-HBM3");
        assert!(plain.contains(&(labels::GPU_REPLICAS, "1".into())));
        assert!(plain.contains(&(labels::GPU_SHARING_STRATEGY, "none".into())));
        assert!(plain.contains(&(labels::GPU_PRODUCT, "NVIDIA-H100-80GB-HBM3".into())));
        for k in 0..6 {
            let s = DeviceSharing::nth(k);
            let l = sharing_labels(Some(&s), "P");
            let get = |key: &str| l.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone());
            assert_eq!(get(labels::GPU_PRODUCT).as_deref(), Some(if s.renamed { "P" } else { "P-SHARED" }));
            assert_eq!(get(labels::MPS_CAPABLE).is_some(), s.strategy == SharingStrategy::Mps);
            assert_eq!(get(labels::DEVICE_PLUGIN_CONFIG), Some(s.config.clone()));
            let (res, n) = whole_gpu_resource(Some(&s), 8);
            assert_eq!((res, n), (s.resource(), 8 * i64::from(s.replicas)));
            let owned: Vec<(String, String)> = l.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
            let back = DeviceSharing::of_node(&owned, &[(res.to_string(), n)]);
            assert_eq!(back.as_ref(), Some(&s), "round trip of {s:?}");
        }
        let kinds: Vec<(SharingStrategy, u16, bool)> =
            (0..3).map(DeviceSharing::nth).map(|s| (s.strategy, s.replicas, s.renamed)).collect();
        assert_eq!(
            kinds,
            vec![
                (SharingStrategy::TimeSlicing, 4, false),
                (SharingStrategy::Mps, 2, false),
                (SharingStrategy::TimeSlicing, 4, true)
            ]
        );
        let plain: Vec<(String, String)> = plain.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        assert_eq!(DeviceSharing::of_node(&plain, &[(labels::GPU_RESOURCE.to_string(), 8)]), None);
    }

    #[test]
    fn replicas_spread_over_the_least_used_gpus() {
        // GPU 1 is a MIG GPU; GPU 0 has one replica out.
        assert_eq!(distribute(&[Some(1), None, Some(0), Some(0)], 4, 3), Some(vec![2, 3, 0]));
        assert_eq!(distribute(&[Some(3), Some(4)], 4, 1), Some(vec![0]));
        assert_eq!(distribute(&[Some(3), Some(4)], 4, 2), None, "only one replica is free");
        assert_eq!(distribute(&[Some(0)], 2, 2), Some(vec![0, 0]));
        assert_eq!(replica_id("GPU-a", 3), "GPU-a::3");
    }
}
