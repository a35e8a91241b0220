//! Names the GPU stack writes on Kubernetes objects (protocols.md §1, §3, §4, §5, §8). The
//! feed reads them and `fabrik sim` writes them, so both sides use these constants.

pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// `nvidia.com/mig-<profile>` (mixed strategy; `+` in the profile becomes `.`).
pub const MIG_RESOURCE_PREFIX: &str = "nvidia.com/mig-";

pub const GPU_PRESENT: &str = "nvidia.com/gpu.present";
pub const GPU_PRODUCT: &str = "nvidia.com/gpu.product";
pub const GPU_COUNT: &str = "nvidia.com/gpu.count";
pub const GPU_MEMORY: &str = "nvidia.com/gpu.memory";
pub const GPU_FAMILY: &str = "nvidia.com/gpu.family";
pub const MIG_CAPABLE: &str = "nvidia.com/mig.capable";
pub const MIG_STRATEGY: &str = "nvidia.com/mig.strategy";
pub const MIG_CONFIG: &str = "nvidia.com/mig.config";
pub const MIG_CONFIG_STATE: &str = "nvidia.com/mig.config.state";
pub const DEPLOY_PREFIX: &str = "nvidia.com/gpu.deploy.";
/// GPU sharing by the device plugin (protocols.md §3): replicas per physical GPU, the
/// strategy (`none|time-slicing|mps`), the renamed resource (`renameByDefault: true`), the
/// per-node config the operator selected, and the `-SHARED` product suffix.
pub use crate::model::sharing::{DEVICE_PLUGIN_CONFIG, GPU_REPLICAS, GPU_SHARED_RESOURCE, GPU_SHARING_STRATEGY};
pub const MPS_CAPABLE: &str = "nvidia.com/mps.capable";
pub const SHARED_PRODUCT_SUFFIX: &str = "-SHARED";
/// `<clusterUUID>.<cliqueID>` of a GPU's multi-node NVLink domain (GFD).
pub const GPU_CLIQUE: &str = "nvidia.com/gpu.clique";
/// The operator clients mig-manager pauses while it reconfigures (protocols.md §1 step 5).
pub const PAUSED_CLIENTS: [&str; 4] = [
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.dcgm-exporter",
    "nvidia.com/gpu.deploy.dcgm",
];
pub const PAUSED_VALUE: &str = "paused-for-mig-change";
/// The mig-parted ConfigMap mig-manager reads named configs from (GPU operator default).
pub const MIG_CONFIGMAP_NS: &str = "gpu-operator";
pub const MIG_CONFIGMAP: &str = "default-mig-parted-config";
pub const MIG_CONFIGMAP_KEY: &str = "config.yaml";
/// The fabrik agent DaemonSet's namespace (deploy/agent-daemonset.yaml): where the cockpit
/// looks for agents, and where `fabrik sim --agents` puts its own.
pub const AGENT_NAMESPACE: &str = "fabrik-system";
/// `fabrik sim`'s mig-manager says why a config failed here; a real one only logs it.
pub const SIM_MIG_MESSAGE: &str = "fabrik.io/sim-mig-message";

/// DRA: the NVIDIA driver's name, which is also its attribute domain.
pub const DRA_DRIVER: &str = "gpu.nvidia.com";
pub const DRA_GPU_CLASS: &str = "gpu.nvidia.com";
pub const DRA_MIG_CLASS: &str = "mig.nvidia.com";
/// The NVIDIA driver's ComputeDomain side: its kubelet plugin publishes IMEX channels
/// (`channel-<id>`) and daemons per node as this driver, and a workload joins a domain by a
/// claim of the default channel class, made from the domain's channel template.
pub const CD_DRIVER: &str = "compute-domain.nvidia.com";
pub const CD_CHANNEL_CLASS: &str = "compute-domain-default-channel.nvidia.com";
pub const CD_DAEMON_CLASS: &str = "compute-domain-daemon.nvidia.com";

/// vCluster (protocols.md §8).
pub const VCLUSTER_MANAGED_BY: &str = "vcluster.loft.sh/managed-by";
pub const VCLUSTER_APP: &str = "vcluster";

/// Kueue.
pub const KUEUE_GROUP: &str = "kueue.x-k8s.io";
pub const KUEUE_QUEUE_NAME: &str = "kueue.x-k8s.io/queue-name";

/// The namespace label that names a tenant unless configured otherwise.
pub const DEFAULT_TENANT_LABEL: &str = "fabrik.io/tenant";

/// Node annotation: the fabrik operation that cordoned the node (`ops::cordon`).
pub const CORDONED_BY: &str = "fabrik.io/cordoned-by";

/// Set by `fabrik sim` on the nodes it plays, so it never touches a real node.
pub const SIMULATED: &str = "fabrik.io/simulated";
/// Set by `fabrik sim` on nodes whose GPUs are handed out through DRA (no device plugin).
pub const SIM_DRA_NODE: &str = "fabrik.io/dra";

/// `nvidia.com/mig-<profile>` for a profile name (`1g.10gb+me` → `nvidia.com/mig-1g.10gb.me`).
pub fn mig_resource(profile: &str) -> String {
    format!("{MIG_RESOURCE_PREFIX}{}", profile.replace('+', "."))
}

/// The profile of a MIG resource name, in the catalog's spelling (`…mig-1g.10gb.me` → `1g.10gb+me`).
pub fn mig_profile_of_resource(resource: &str) -> Option<String> {
    let p = resource.strip_prefix(MIG_RESOURCE_PREFIX)?;
    Some(match p.strip_suffix(".me") {
        Some(base) => format!("{base}+me"),
        None => p.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mig_resource_names_round_trip() {
        assert_eq!(mig_resource("1g.10gb+me"), "nvidia.com/mig-1g.10gb.me");
        assert_eq!(mig_profile_of_resource("nvidia.com/mig-1g.10gb.me").as_deref(), Some("1g.10gb+me"));
        assert_eq!(mig_profile_of_resource("nvidia.com/mig-3g.40gb").as_deref(), Some("3g.40gb"));
        assert_eq!(mig_profile_of_resource("nvidia.com/gpu"), None);
    }
}
