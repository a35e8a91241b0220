//! kubectl's drain filters on pods as the API has them (the runner applies the same filters
//! to [`super::super::target::PodView`]s; these are for readers of API objects).

use k8s_openapi::api::core::v1::Pod;

use super::super::PodAction;
use super::evict::pod_view;
use crate::cluster::labels;

/// kubectl's filters ([`crate::ops::drain::kubectl_action`]) on a pod as the API has it now.
pub fn drain_action(p: &Pod, force: bool) -> PodAction {
    drain_action_at(p, force, crate::now_ms())
}

/// [`drain_action`] at `now` (ms since the epoch), for the notes on terminating pods.
pub fn drain_action_at(p: &Pod, force: bool, now: u64) -> PodAction {
    pod_view(p).action(force, now)
}

/// Whether a pod asks for GPUs (whole, MIG or DRA claims) and still holds them: neither
/// finished nor stopped by its kubelet.
pub fn holds_gpus(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return false;
    }
    let Some(spec) = p.spec.as_ref() else { return false };
    let extended = spec.containers.iter().chain(spec.init_containers.iter().flatten()).any(|c| {
        let r = c.resources.as_ref();
        r.and_then(|r| r.limits.as_ref()).into_iter().chain(r.and_then(|r| r.requests.as_ref())).flatten().any(
            |(k, v)| (k == labels::GPU_RESOURCE || k.starts_with(labels::MIG_RESOURCE_PREFIX)) && v.0.trim() != "0",
        )
    });
    extended || spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty())
}
