//! Pods as the feed decodes them: only the fields fabrik reads, everything else skipped
//! while it is parsed.
//!
//! k8s-openapi's `Pod` decodes every field of every object into owned strings, maps and
//! vectors: `managedFields` (a third of a typical pod's bytes), every container's env, probes,
//! mounts and ports, every status condition. The feed reads about a dozen of them
//! (`translate::pod_spec`, the vCluster's `release` label, the watch's resourceVersion). Pods
//! are most of what a cluster lists (10,000 pods against 1,000 nodes), so this is where the
//! initial listing spends its time: `fabrik bench --decode` replays a recorded pod list
//! through both and prints the ratio.
//!
//! [`FeedPod`] deserialises into small private structs that name only those fields (serde
//! skips the others with `IgnoredAny`, without allocating) and turns them into a
//! k8s-openapi `Pod` holding just those fields, so the translator and its tests keep reading
//! the one `Pod` type. A field the translator starts to read must be added here too: its
//! tests (`slim/tests.rs`) decode a full pod both ways and require the translator to see the
//! same pod.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus, EmptyDirVolumeSource,
    Pod, PodCondition, PodResourceClaim, PodResourceClaimStatus, PodSpec, PodStatus, ResourceRequirements, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::runtime::watcher::Event;
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The annotations the translator reads of a pod; the rest (a pod may carry kilobytes of
/// them) are skipped.
const KEPT_ANNOTATIONS: &[&str] = &["kubernetes.io/config.mirror"];

/// A pod decoded with only the fields fabrik reads (see the module's doc).
#[derive(Clone, Debug, Default)]
pub struct FeedPod(pub Pod);

impl k8s_openapi::Resource for FeedPod {
    const API_VERSION: &'static str = <Pod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Pod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Pod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Pod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <Pod as k8s_openapi::Resource>::Scope;
}

impl k8s_openapi::ListableResource for FeedPod {
    const LIST_KIND: &'static str = <Pod as k8s_openapi::ListableResource>::LIST_KIND;
}

impl k8s_openapi::Metadata for FeedPod {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.0.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

/// The watch event of the pod the feed decoded, as the translator takes it.
pub fn event(e: Event<FeedPod>) -> Event<Pod> {
    match e {
        Event::Apply(p) => Event::Apply(p.0),
        Event::Delete(p) => Event::Delete(p.0),
        Event::Init => Event::Init,
        Event::InitApply(p) => Event::InitApply(p.0),
        Event::InitDone => Event::InitDone,
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Slim {
    #[serde(default)]
    metadata: Meta,
    spec: Option<Spec>,
    status: Option<Status>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    #[serde(default, deserialize_with = "kept_annotations")]
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerReference>>,
    finalizers: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    node_name: Option<String>,
    #[serde(default)]
    containers: Vec<SlimContainer>,
    /// Only a sidecar's restarts count once the pod is initialised.
    init_containers: Option<Vec<SlimInit>>,
    resource_claims: Option<Vec<PodResourceClaim>>,
    volumes: Option<Vec<SlimVolume>>,
}

#[derive(Deserialize)]
struct SlimContainer {
    #[serde(default)]
    name: String,
    resources: Option<ResourceRequirements>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimInit {
    #[serde(default)]
    name: String,
    restart_policy: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimVolume {
    #[serde(default)]
    name: String,
    empty_dir: Option<EmptyDirVolumeSource>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    phase: Option<String>,
    start_time: Option<Time>,
    resource_claim_statuses: Option<Vec<PodResourceClaimStatus>>,
    init_container_statuses: Option<Vec<SlimStatus>>,
    container_statuses: Option<Vec<SlimStatus>>,
    /// Only whether `Initialized` is True is kept (whose restarts kubectl counts), read
    /// without allocating.
    #[serde(default, rename = "conditions", deserialize_with = "initialized")]
    initialized: bool,
}

/// A pod's condition, its strings borrowed where the JSON lets them be.
#[derive(Deserialize)]
struct SlimCondition<'a> {
    #[serde(rename = "type", borrow, default)]
    type_: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    status: std::borrow::Cow<'a, str>,
}

/// Whether a `conditions` list (or null) has `Initialized` True.
fn initialized<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    struct Conditions;
    impl<'de> Visitor<'de> for Conditions {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of pod conditions")
        }
        fn visit_unit<E>(self) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_none<E>(self) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
            d.deserialize_seq(self)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
            let mut yes = false;
            while let Some(c) = seq.next_element::<SlimCondition<'de>>()? {
                yes |= c.type_ == "Initialized" && c.status == "True";
            }
            Ok(yes)
        }
    }
    d.deserialize_option(Conditions)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimStatus {
    #[serde(default)]
    name: String,
    state: Option<SlimState>,
    #[serde(default)]
    restart_count: i32,
    started: Option<bool>,
    last_state: Option<SlimState>,
}

#[derive(Deserialize)]
struct SlimState {
    waiting: Option<ContainerStateWaiting>,
    terminated: Option<SlimTerminated>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimTerminated {
    #[serde(default)]
    exit_code: i32,
    finished_at: Option<Time>,
}

impl SlimState {
    fn state(self) -> ContainerState {
        let terminated = self.terminated.map(|t| ContainerStateTerminated {
            exit_code: t.exit_code,
            finished_at: t.finished_at,
            ..ContainerStateTerminated::default()
        });
        ContainerState { waiting: self.waiting, terminated, ..ContainerState::default() }
    }
}

/// Only the [`KEPT_ANNOTATIONS`] of an `annotations` map (or null).
fn kept_annotations<'de, D: Deserializer<'de>>(d: D) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    struct Kept;
    impl<'de> Visitor<'de> for Kept {
        type Value = Option<BTreeMap<String, String>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of annotations")
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
            let mut kept = BTreeMap::new();
            while let Some(k) = m.next_key::<std::borrow::Cow<'de, str>>()? {
                if KEPT_ANNOTATIONS.contains(&k.as_ref()) {
                    kept.insert(k.into_owned(), m.next_value::<String>()?);
                } else {
                    m.next_value::<IgnoredAny>()?;
                }
            }
            Ok(Some(kept))
        }
    }
    d.deserialize_option(Kept)
}

impl<'de> Deserialize<'de> for FeedPod {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Slim::deserialize(d)?;
        let m = s.metadata;
        let metadata = ObjectMeta {
            name: m.name,
            namespace: m.namespace,
            uid: m.uid,
            resource_version: m.resource_version,
            creation_timestamp: m.creation_timestamp,
            deletion_timestamp: m.deletion_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            labels: m.labels,
            annotations: m.annotations,
            owner_references: m.owner_references,
            finalizers: m.finalizers,
            ..ObjectMeta::default()
        };
        let spec = s.spec.map(|s| PodSpec {
            node_name: s.node_name,
            containers: s
                .containers
                .into_iter()
                .map(|c| Container { name: c.name, resources: c.resources, ..Container::default() })
                .collect(),
            init_containers: s.init_containers.map(|v| {
                v.into_iter()
                    .map(|c| Container { name: c.name, restart_policy: c.restart_policy, ..Container::default() })
                    .collect()
            }),
            resource_claims: s.resource_claims,
            volumes: s.volumes.map(|v| {
                v.into_iter().map(|v| Volume { name: v.name, empty_dir: v.empty_dir, ..Volume::default() }).collect()
            }),
            ..PodSpec::default()
        });
        let statuses = |v: Option<Vec<SlimStatus>>| {
            v.map(|v| {
                v.into_iter()
                    .map(|c| ContainerStatus {
                        name: c.name,
                        state: c.state.map(SlimState::state),
                        restart_count: c.restart_count,
                        started: c.started,
                        last_state: c.last_state.map(SlimState::state),
                        ..ContainerStatus::default()
                    })
                    .collect()
            })
        };
        let status = s.status.map(|s| PodStatus {
            phase: s.phase,
            start_time: s.start_time,
            resource_claim_statuses: s.resource_claim_statuses,
            init_container_statuses: statuses(s.init_container_statuses),
            container_statuses: statuses(s.container_statuses),
            conditions: s.initialized.then(|| {
                vec![PodCondition { type_: "Initialized".into(), status: "True".into(), ..PodCondition::default() }]
            }),
            ..PodStatus::default()
        });
        Ok(FeedPod(Pod { metadata, spec, status }))
    }
}

#[cfg(test)]
mod tests;
