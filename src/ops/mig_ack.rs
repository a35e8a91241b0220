//! When a reslice is applied: mig-manager must have acknowledged *this* config, not merely
//! show the `nvidia.com/mig.config.state=success` the previous config left behind.
//!
//! Right after fabrik writes `nvidia.com/mig.config`, the state label still says what it
//! said before. mig-manager's answer is visible as one of (after our write):
//! - the state moves (`success` → `pending`, `failed` → `pending`, `pending` → `success`);
//! - the state label is written again by its owner (managedFields time later than ours);
//! - the node's capacity moves from what it was at our write to the planned one (only
//!   mig-manager changes it, after setting `pending`).
//!
//! Then `success` counts once the capacity matches the plan. mig-manager writes nothing
//! when the config is already applied (mig-parted `assert` passes: it sets `success` over
//! `success`), so a plan that changes no layout is accepted without an answer after a grace
//! period, if the capacity is the planned one; any other plan waits for the answer.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;

use crate::cluster::labels;

/// GPU resources a node offers: `nvidia.com/gpu` and `nvidia.com/mig-<profile>` counts,
/// from its capacity (device plugin) or its ResourceSlice devices (DRA).
pub type Caps = BTreeMap<String, i64>;

/// What one read of the node says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigSeen {
    pub config: Option<String>,
    pub state: Option<String>,
    /// When the state label's owner (not fabrik) last wrote the node's metadata.
    pub state_written: Option<Timestamp>,
    pub caps: Caps,
}

/// The node right after our label write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigWrite {
    pub state: Option<String>,
    /// Our managedFields time for the config label.
    pub at: Option<Timestamp>,
    pub caps: Caps,
}

/// Where a reslice stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MigVerdict {
    /// Nothing since our write shows mig-manager has seen the new config.
    AwaitAck,
    /// Acknowledged and working (`pending`, `rebooting`, or a state we do not know).
    Working(String),
    /// `success` after the acknowledgement, but the node does not offer the planned devices
    /// yet (the device plugin restarts after mig-manager, or an older run finished).
    AwaitCapacity,
    Applied,
    /// The planned layout was already in place and mig-manager had nothing to write.
    AlreadyInPlace,
    Failed,
}

/// Tracks the acknowledgement across reads (once seen, it stays).
#[derive(Clone, Debug)]
pub struct MigAck {
    pub write: MigWrite,
    /// Why we believe mig-manager took this config up, once we do.
    pub acked: Option<String>,
}

impl MigAck {
    pub fn new(write: MigWrite) -> MigAck {
        MigAck { write, acked: None }
    }

    /// Judges one read. `want`: the planned capacity; `unchanged`: the plan changes no GPU's
    /// layout; `grace_over`: the grace for a silent mig-manager has passed.
    pub fn judge(&mut self, seen: &MigSeen, want: &Caps, unchanged: bool, grace_over: bool) -> MigVerdict {
        if self.acked.is_none() {
            self.acked = acknowledgement(&self.write, seen, want);
        }
        let state = seen.state.as_deref().unwrap_or("");
        if self.acked.is_none() {
            return if unchanged && grace_over && state == "success" && seen.caps == *want {
                MigVerdict::AlreadyInPlace
            } else {
                MigVerdict::AwaitAck
            };
        }
        match state {
            "success" if seen.caps == *want => MigVerdict::Applied,
            "success" => MigVerdict::AwaitCapacity,
            "failed" => MigVerdict::Failed,
            other => MigVerdict::Working(if other.is_empty() { "no state".into() } else { other.to_string() }),
        }
    }
}

/// Why `seen` shows mig-manager acting after `write`, or `None` when nothing does.
pub fn acknowledgement(write: &MigWrite, seen: &MigSeen, want: &Caps) -> Option<String> {
    let shown = |s: &Option<String>| s.clone().unwrap_or_else(|| "(none)".into());
    if seen.state != write.state {
        return Some(format!(
            "{} went from {} to {} after the label was written",
            labels::MIG_CONFIG_STATE,
            shown(&write.state),
            shown(&seen.state)
        ));
    }
    if let (Some(t), Some(ours)) = (seen.state_written, write.at)
        && t > ours
    {
        return Some(format!("mig-manager wrote {} at {t}, after our label at {ours}", labels::MIG_CONFIG_STATE));
    }
    if write.caps != *want && seen.caps == *want {
        return Some("the node's GPU devices changed to the planned ones after the label was written".into());
    }
    None
}

fn owns_state_label(fields: &serde_json::Value) -> bool {
    fields
        .get("f:metadata")
        .and_then(|m| m.get("f:labels"))
        .is_some_and(|l| l.get(format!("f:{}", labels::MIG_CONFIG_STATE)).is_some())
}

fn owns_config_label(fields: &serde_json::Value) -> bool {
    fields
        .get("f:metadata")
        .and_then(|m| m.get("f:labels"))
        .is_some_and(|l| l.get(format!("f:{}", labels::MIG_CONFIG)).is_some())
}

/// The latest time a manager other than `ours` that owns the state label wrote the node.
pub fn state_written(n: &Node, ours: &str) -> Option<Timestamp> {
    n.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.manager.as_deref() != Some(ours) && m.subresource.as_deref().unwrap_or("").is_empty())
        .filter(|m| m.fields_v1.as_ref().is_some_and(|f| owns_state_label(&f.0)))
        .filter_map(|m| m.time.as_ref().map(|t| t.0))
        .max()
}

/// Our managedFields time for the config label (the write we just made).
pub fn our_write(n: &Node, ours: &str) -> Option<Timestamp> {
    n.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.manager.as_deref() == Some(ours))
        .filter(|m| m.fields_v1.as_ref().is_some_and(|f| owns_config_label(&f.0)))
        .filter_map(|m| m.time.as_ref().map(|t| t.0))
        .max()
}

/// The device-plugin GPU resources a node advertises (positive counts).
pub fn capacity_caps(n: &Node) -> Caps {
    gpu_caps(
        n.status
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| v.0.parse::<i64>().ok().map(|n| (k.as_str(), n))),
    )
}

/// Of a node's resources (name, count): the GPU ones (`nvidia.com/gpu`, `nvidia.com/mig-*`)
/// with a positive count.
pub fn gpu_caps<'a>(resources: impl Iterator<Item = (&'a str, i64)>) -> Caps {
    resources
        .filter(|(k, n)| *n > 0 && (*k == labels::GPU_RESOURCE || k.starts_with(labels::MIG_RESOURCE_PREFIX)))
        .map(|(k, n)| (k.to_string(), n))
        .collect()
}

/// The same counts from DRA devices (`type` = `gpu` | `mig`, `profile`), in the names the
/// device plugin would use.
pub fn slice_caps<'a>(devices: impl Iterator<Item = &'a k8s_openapi::api::resource::v1::Device>) -> Caps {
    let mut out = Caps::new();
    for d in devices {
        let attr = |k: &str| {
            d.attributes.as_ref().and_then(|a| a.get(k).or_else(|| a.get(&format!("{}/{k}", labels::DRA_DRIVER))))
        };
        let s = |k: &str| attr(k).and_then(|v| v.string.clone());
        match s("type").as_deref() {
            Some("gpu") => *out.entry(labels::GPU_RESOURCE.to_string()).or_default() += 1,
            Some("mig") => {
                if let Some(p) = s("profile") {
                    *out.entry(labels::mig_resource(&p)).or_default() += 1;
                }
            }
            _ => {}
        }
    }
    out
}

/// What a node's labels and metadata say (its capacity is read separately).
pub fn observe(n: &Node, ours: &str, caps: Caps) -> MigSeen {
    let l = n.metadata.labels.as_ref();
    MigSeen {
        config: l.and_then(|l| l.get(labels::MIG_CONFIG)).cloned(),
        state: l.and_then(|l| l.get(labels::MIG_CONFIG_STATE)).cloned(),
        state_written: state_written(n, ours),
        caps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn caps(pairs: &[(&str, i64)]) -> Caps {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn seen(state: &str, written: Option<&str>, c: &Caps) -> MigSeen {
        MigSeen {
            config: Some("new".into()),
            state: Some(state.into()),
            state_written: written.map(ts),
            caps: c.clone(),
        }
    }

    #[test]
    fn the_old_success_is_not_an_answer() {
        // The race of the issue: the capacity does not change, the state already says success.
        let same = caps(&[("nvidia.com/gpu", 8)]);
        let write =
            MigWrite { state: Some("success".into()), at: Some(ts("2026-12-03T10:00:00Z")), caps: same.clone() };
        let mut ack = MigAck::new(write);
        let before = seen("success", Some("2026-12-03T09:00:00Z"), &same);
        assert_eq!(ack.judge(&before, &same, false, false), MigVerdict::AwaitAck);
        assert_eq!(ack.judge(&before, &same, false, true), MigVerdict::AwaitAck, "a change waits for its answer");
        assert_eq!(
            ack.judge(&seen("pending", None, &same), &same, false, false),
            MigVerdict::Working("pending".into())
        );
        assert!(ack.acked.as_deref().is_some_and(|a| a.contains("success to pending")), "{:?}", ack.acked);
        assert_eq!(ack.judge(&before, &same, false, false), MigVerdict::Applied, "success after pending");
    }

    #[test]
    fn a_rewrite_after_ours_is_an_answer_even_when_the_state_looks_the_same() {
        let same = caps(&[("nvidia.com/gpu", 8)]);
        let write =
            MigWrite { state: Some("success".into()), at: Some(ts("2026-12-03T10:00:00Z")), caps: same.clone() };
        let mut ack = MigAck::new(write.clone());
        // Same second as ours: not provably after it.
        assert_eq!(
            ack.judge(&seen("success", Some("2026-12-03T10:00:00Z"), &same), &same, false, false),
            MigVerdict::AwaitAck
        );
        assert_eq!(
            ack.judge(&seen("success", Some("2026-12-03T10:00:01Z"), &same), &same, false, false),
            MigVerdict::Applied
        );
        // A state `failed` left by an earlier attempt is not this config's failure.
        let failed_before = MigWrite { state: Some("failed".into()), ..write };
        let mut ack = MigAck::new(failed_before);
        assert_eq!(ack.judge(&seen("failed", None, &same), &same, false, false), MigVerdict::AwaitAck);
        assert_eq!(
            ack.judge(&seen("pending", None, &same), &same, false, false),
            MigVerdict::Working("pending".into())
        );
        assert_eq!(ack.judge(&seen("failed", None, &same), &same, false, false), MigVerdict::Failed);
    }

    #[test]
    fn capacity_must_match_the_plan_and_its_change_is_an_answer() {
        let old = caps(&[("nvidia.com/gpu", 8)]);
        let new = caps(&[("nvidia.com/gpu", 7), ("nvidia.com/mig-1g.10gb", 7)]);
        let write = MigWrite { state: Some("success".into()), at: None, caps: old.clone() };
        let mut ack = MigAck::new(write.clone());
        assert_eq!(
            ack.judge(&seen("success", None, &new), &new, false, false),
            MigVerdict::Applied,
            "pending missed between reads"
        );
        // Success for a run that had begun before ours (state pending at our write): the
        // capacity tells whether it is ours.
        let mut ack = MigAck::new(MigWrite { state: Some("pending".into()), ..write });
        assert_eq!(ack.judge(&seen("success", None, &old), &new, false, false), MigVerdict::AwaitCapacity);
        assert_eq!(ack.judge(&seen("success", None, &new), &new, false, false), MigVerdict::Applied);
    }

    #[test]
    fn an_unchanged_layout_is_accepted_without_an_answer_only_after_the_grace_and_with_the_planned_capacity() {
        let same = caps(&[("nvidia.com/gpu", 8)]);
        let write = MigWrite { state: Some("success".into()), at: None, caps: same.clone() };
        let mut ack = MigAck::new(write);
        assert_eq!(ack.judge(&seen("success", None, &same), &same, true, false), MigVerdict::AwaitAck);
        assert_eq!(ack.judge(&seen("success", None, &same), &same, true, true), MigVerdict::AlreadyInPlace);
        let other = caps(&[("nvidia.com/gpu", 7)]);
        assert_eq!(ack.judge(&seen("success", None, &other), &same, true, true), MigVerdict::AwaitAck);
    }

    #[test]
    fn managed_fields_and_devices_are_read_from_the_api_objects() {
        let node: Node = serde_json::from_value(json!({
            "metadata": { "name": "n", "labels": { "nvidia.com/mig.config": "new", "nvidia.com/mig.config.state": "success" },
                "managedFields": [
                    { "manager": "fabrik", "operation": "Update", "time": "2026-12-03T10:00:00Z", "fieldsType": "FieldsV1",
                      "fieldsV1": { "f:metadata": { "f:labels": { "f:nvidia.com/mig.config": {} } } } },
                    { "manager": "nvidia-mig-manager", "operation": "Update", "time": "2026-12-03T10:00:05Z", "fieldsType": "FieldsV1",
                      "fieldsV1": { "f:metadata": { "f:labels": { "f:nvidia.com/mig.config.state": {} } } } },
                    { "manager": "kubelet", "operation": "Update", "subresource": "status", "time": "2026-12-03T11:00:00Z",
                      "fieldsType": "FieldsV1", "fieldsV1": { "f:status": {} } } ] },
            "status": { "capacity": { "nvidia.com/gpu": "7", "nvidia.com/mig-1g.10gb": "7", "cpu": "64", "nvidia.com/mig-2g.20gb": "0" } }
        }))
        .expect("node");
        assert_eq!(our_write(&node, "fabrik"), Some(ts("2026-12-03T10:00:00Z")));
        assert_eq!(state_written(&node, "fabrik"), Some(ts("2026-12-03T10:00:05Z")));
        let s = observe(&node, "fabrik", capacity_caps(&node));
        assert_eq!(s.caps, caps(&[("nvidia.com/gpu", 7), ("nvidia.com/mig-1g.10gb", 7)]));
        assert_eq!(s.state.as_deref(), Some("success"));
        let slice: k8s_openapi::api::resource::v1::ResourceSlice = serde_json::from_value(json!({
            "metadata": { "name": "n-gpu" },
            "spec": { "driver": "gpu.nvidia.com", "nodeName": "n", "pool": { "name": "n", "generation": 2, "resourceSliceCount": 1 },
                "devices": [
                    { "name": "gpu-0", "attributes": { "type": { "string": "gpu" } } },
                    { "name": "gpu-1-mig-1g10gb-19-0", "attributes": { "type": { "string": "mig" }, "profile": { "string": "1g.10gb" } } },
                    { "name": "gpu-1-mig-1g10gb-19-1", "attributes": { "gpu.nvidia.com/type": { "string": "mig" }, "gpu.nvidia.com/profile": { "string": "1g.10gb" } } } ] }
        }))
        .expect("slice");
        assert_eq!(
            slice_caps(slice.spec.devices.iter().flatten()),
            caps(&[("nvidia.com/gpu", 1), ("nvidia.com/mig-1g.10gb", 2)])
        );
    }
}
