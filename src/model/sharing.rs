//! GPU sharing by the NVIDIA device plugin (time-slicing, MPS), read from what GPU Feature
//! Discovery writes on the node (protocols.md §3, §4). A shared node advertises
//! `replicas × GPUs` of `nvidia.com/gpu` (or of `nvidia.com/gpu.shared` when the config
//! renames it): each pod holds replicas, and the physical GPU behind a replica is only
//! known to the kubelet (PodResources ids `<uuid>::<k>`) and to a node agent.

/// Replicas the device plugin hands out per physical GPU (`1`: not shared).
pub const GPU_REPLICAS: &str = "nvidia.com/gpu.replicas";
/// `none`, `time-slicing` or `mps`.
pub const GPU_SHARING_STRATEGY: &str = "nvidia.com/gpu.sharing-strategy";
/// The resource a config with `renameByDefault: true` advertises instead of `nvidia.com/gpu`.
pub const GPU_SHARED_RESOURCE: &str = "nvidia.com/gpu.shared";
/// The device-plugin config the operator selected for the node.
pub const DEVICE_PLUGIN_CONFIG: &str = "nvidia.com/device-plugin.config";
const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// The NVIDIA DRA driver's DeviceClass of MIG devices.
pub const DRA_MIG_CLASS: &str = "mig.nvidia.com";
const GPU_COUNT: &str = "nvidia.com/gpu.count";
/// More replicas than this is not a sharing config but a typo; the label is ignored.
pub const MAX_REPLICAS: u16 = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ShareMode {
    #[default]
    Exclusive,
    TimeSlicing,
    Mps,
}

impl ShareMode {
    /// The label value GFD writes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exclusive => "none",
            Self::TimeSlicing => "time-slicing",
            Self::Mps => "mps",
        }
    }
    /// Short form for narrow columns.
    pub fn short(self) -> &'static str {
        match self {
            Self::Exclusive => "",
            Self::TimeSlicing => "TS",
            Self::Mps => "MPS",
        }
    }
}

/// How a node's GPUs are shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Sharing {
    pub mode: ShareMode,
    /// Replicas per physical GPU; 1 when not shared.
    pub replicas: u16,
    /// The replicas are advertised as `nvidia.com/gpu.shared`.
    pub renamed: bool,
}

impl Sharing {
    pub const NONE: Sharing = Sharing { mode: ShareMode::Exclusive, replicas: 1, renamed: false };

    /// Whether pods on the node hold replicas rather than whole GPUs.
    pub fn shared(self) -> bool {
        self.replicas > 1
    }

    /// Reads the sharing from a node's labels and capacity: the replicas label, else
    /// (a renamed resource without it) the advertised count over the physical count. A
    /// strategy label without replicas > 1 is not sharing (GFD writes `replicas=1` and
    /// `sharing-strategy=none` on every unshared node).
    pub fn of_node(labels: &[(String, String)], capacity: &[(String, i64)]) -> Sharing {
        let label = |k: &str| labels.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        let cap = |k: &str| capacity.iter().find(|(key, _)| key == k).map(|(_, v)| *v);
        let renamed = cap(GPU_SHARED_RESOURCE).is_some_and(|n| n > 0);
        let physical = label(GPU_COUNT).and_then(|c| c.parse::<i64>().ok()).filter(|c| *c > 0);
        let replicas = match label(GPU_REPLICAS).and_then(|r| r.trim().parse::<u16>().ok()) {
            Some(r) if (1..=MAX_REPLICAS).contains(&r) => r,
            _ => {
                let advertised = cap(GPU_SHARED_RESOURCE).filter(|_| renamed).or_else(|| cap(GPU_RESOURCE));
                match (advertised, physical) {
                    // Only a renamed resource says for sure that the count is of replicas.
                    (Some(a), Some(p)) if renamed && a > p && a % p == 0 => {
                        u16::try_from(a / p).ok().filter(|r| *r <= MAX_REPLICAS).unwrap_or(1)
                    }
                    _ => 1,
                }
            }
        };
        if replicas <= 1 {
            return Sharing::NONE;
        }
        let mode = match label(GPU_SHARING_STRATEGY) {
            Some("mps") => ShareMode::Mps,
            // Older GFDs write replicas without a strategy; time-slicing is what they had.
            _ => ShareMode::TimeSlicing,
        };
        Sharing { mode, replicas, renamed }
    }

    /// `TS×4`, `MPS×2`; empty when not shared.
    pub fn label(self) -> String {
        if self.shared() { format!("{}×{}", self.mode.short(), self.replicas) } else { String::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn labels_name_the_sharing() {
        let ts = Sharing::of_node(
            &l(&[(GPU_REPLICAS, "4"), (GPU_SHARING_STRATEGY, "time-slicing"), (GPU_COUNT, "8")]),
            &[(GPU_RESOURCE.into(), 32)],
        );
        assert_eq!(ts, Sharing { mode: ShareMode::TimeSlicing, replicas: 4, renamed: false });
        assert_eq!(ts.label(), "TS×4");
        let mps = Sharing::of_node(&l(&[(GPU_REPLICAS, "2"), (GPU_SHARING_STRATEGY, "mps")]), &[]);
        assert_eq!((mps.mode, mps.replicas), (ShareMode::Mps, 2));
        let renamed = Sharing::of_node(
            &l(&[(GPU_REPLICAS, "4"), (GPU_SHARING_STRATEGY, "time-slicing")]),
            &[(GPU_SHARED_RESOURCE.into(), 32)],
        );
        assert!(renamed.renamed && renamed.shared());
    }

    #[test]
    fn unshared_and_malformed_nodes_are_exclusive() {
        let none = Sharing::of_node(&l(&[(GPU_REPLICAS, "1"), (GPU_SHARING_STRATEGY, "none")]), &[]);
        assert_eq!(none, Sharing::NONE);
        assert!(!none.shared());
        for bad in ["0", "-3", "x", "99999", ""] {
            assert_eq!(
                Sharing::of_node(&l(&[(GPU_REPLICAS, bad)]), &[(GPU_RESOURCE.into(), 8)]),
                Sharing::NONE,
                "{bad}"
            );
        }
        // An advertised count above the physical one without a renamed resource is not
        // proof of sharing (it could be a stale count label).
        assert_eq!(Sharing::of_node(&l(&[(GPU_COUNT, "8")]), &[(GPU_RESOURCE.into(), 32)]), Sharing::NONE);
    }

    #[test]
    fn a_renamed_resource_without_the_replicas_label_is_divided_by_the_physical_count() {
        let s = Sharing::of_node(&l(&[(GPU_COUNT, "8")]), &[(GPU_SHARED_RESOURCE.into(), 24)]);
        assert_eq!((s.replicas, s.renamed, s.mode), (3, true, ShareMode::TimeSlicing));
    }
}
