//! A deterministic simulated AI factory: GPU nodes (mixed H100 / H200 / A100, some MIG
//! partitioned, some shared by time-slicing or MPS with `sharing_every`), tenants with
//! quotas, workload churn, moving telemetry and faults. It speaks only `Delta`s, like
//! every other feed, and is a target of the one operation runner
//! (`ops::exec`), so the demo runs a plan exactly as a cluster does, with a cluster's pacing
//! (PDBs that refuse evictions for a while, pods that take time to go, mig-manager's
//! pending → success).

mod dra;
mod exec;
mod host;
mod kueue;
mod pods;
mod queue;
mod reclaim;
mod setup;
mod sharing;
mod taint;
mod telemetry;
mod tick;
mod world;

pub use dra::{
    NVLINK_CLUSTER, SHARE_BYTES, XID_TAINT_KEY, counter_memory_mib, imex_not_ready, partition_device, partition_fits,
    partition_placements,
};
pub use exec::SimRequest;
pub use sharing::{DeviceSharing, SharingStrategy, distribute, replica_id, sharing_labels, whole_gpu_resource};
pub use world::{SIM_EPOCH_MS, Sim, SimConfig};

/// The Pod Security level a simulated namespace enforces, by its place in the list (the demo
/// and `fabrik sim` alike): privileged in every fifth, baseline in two of five, none in the
/// rest. (restricted would refuse the simulated pods, which set no securityContext.)
pub fn pod_security_level(i: usize) -> Option<&'static str> {
    match i % 5 {
        0 => Some("privileged"),
        1 | 3 => Some("baseline"),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
