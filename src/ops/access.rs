//! What the person may do on this cluster, asked up front with SelfSubjectAccessReview (and
//! who they are, with SelfSubjectReview). Cluster-scoped permissions (patching nodes) decide
//! an operation outright; namespaced ones (evictions, quotas) are checked cluster-wide up
//! front and, when that says no, again for the namespaces a plan touches before anything
//! is sent, since a person may hold them in some namespaces only.

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::api::{Api, PostParams};

use super::OpKind;
use crate::model::AccessSpec;

/// One permission an operation needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Perm {
    pub verb: &'static str,
    pub group: &'static str,
    pub resource: &'static str,
    pub subresource: &'static str,
    /// One object by name (`""`: any). A Role that lists `resourceNames` grants only
    /// requests that name one of them, so a check without the name would be refused.
    pub name: &'static str,
    /// `None`: cluster-scoped, or checked across all namespaces.
    pub namespace: Option<String>,
    pub namespaced: bool,
}

impl Perm {
    const fn cluster(verb: &'static str, group: &'static str, resource: &'static str) -> Perm {
        Perm { verb, group, resource, subresource: "", name: "", namespace: None, namespaced: false }
    }
    const fn ns(verb: &'static str, group: &'static str, resource: &'static str, sub: &'static str) -> Perm {
        Perm { verb, group, resource, subresource: sub, name: "", namespace: None, namespaced: true }
    }
    const fn named(mut self, name: &'static str) -> Perm {
        self.name = name;
        self
    }
    pub fn in_namespace(mut self, ns: &str) -> Perm {
        self.namespace = Some(ns.to_string());
        self
    }

    /// `patch nodes`, `create pods/eviction in ml-team`, `update configmaps
    /// default-mig-parted-config in gpu-operator`: how RBAC names it.
    pub fn describe(&self) -> String {
        let mut r = self.resource.to_string();
        if !self.subresource.is_empty() {
            r = format!("{r}/{}", self.subresource);
        }
        if !self.group.is_empty() {
            r = format!("{r}.{}", self.group);
        }
        if !self.name.is_empty() {
            r = format!("{r} {}", self.name);
        }
        match (&self.namespace, self.namespaced) {
            (Some(ns), _) => format!("{} {r} in {ns}", self.verb),
            (None, true) => format!("{} {r} (all namespaces)", self.verb),
            (None, false) => format!("{} {r}", self.verb),
        }
    }

    /// The `kubectl auth can-i` line that reproduces the check.
    pub fn can_i(&self) -> String {
        let mut r = self.resource.to_string();
        if !self.group.is_empty() {
            r = format!("{r}.{}", self.group);
        }
        if !self.name.is_empty() {
            r = format!("{r}/{}", self.name);
        }
        let sub =
            if self.subresource.is_empty() { String::new() } else { format!(" --subresource={}", self.subresource) };
        let ns = match (&self.namespace, self.namespaced) {
            (Some(ns), _) => format!(" -n {ns}"),
            (None, true) => " -A".to_string(),
            (None, false) => String::new(),
        };
        format!("kubectl auth can-i {} {r}{sub}{ns}", self.verb)
    }
}

pub const PATCH_NODES: Perm = Perm::cluster("patch", "", "nodes");
pub const LIST_PODS: Perm = Perm::ns("list", "", "pods", "");
pub const EVICT_PODS: Perm = Perm::ns("create", "", "pods", "eviction");
/// Reslice reads the mig-parted ConfigMap and replaces it (get + update) when a layout needs
/// a config of its own; deploy/ grants exactly that one ConfigMap.
pub const UPDATE_CONFIGMAPS: Perm =
    Perm::ns("update", "", "configmaps", "").named(crate::cluster::labels::MIG_CONFIGMAP);
pub const PATCH_QUOTAS: Perm = Perm::ns("patch", "", "resourcequotas", "");
/// A ClusterQueue edit is a JSON patch of one field (deploy/ grants patch, not update).
pub const PATCH_CLUSTERQUEUES: Perm = Perm::cluster("patch", "kueue.x-k8s.io", "clusterqueues");
/// Suspending or resuming a Kueue Workload is a JSON patch of `spec.active`.
pub const PATCH_WORKLOADS: Perm = Perm::ns("patch", "kueue.x-k8s.io", "workloads", "");
/// A GPU taint is DeviceTaintRules fabrik creates, reads back and (untaint) deletes.
pub const CREATE_TAINT_RULES: Perm = Perm::cluster("create", "resource.k8s.io", "devicetaintrules");
pub const DELETE_TAINT_RULES: Perm = Perm::cluster("delete", "resource.k8s.io", "devicetaintrules");

/// A reclaim marks a ReplicaSet's pod with its deletion cost (a patch of the pod)...
pub const PATCH_PODS: Perm = Perm::ns("patch", "", "pods", "");
/// ...after checking which Deployment the pod's ReplicaSet belongs to...
pub const GET_REPLICASETS: Perm = Perm::ns("get", "apps", "replicasets", "");
/// ...and patches the owner's replicas, or a Job's suspension.
pub const PATCH_DEPLOYMENTS: Perm = Perm::ns("patch", "apps", "deployments", "");
pub const PATCH_REPLICASETS: Perm = Perm::ns("patch", "apps", "replicasets", "");
pub const PATCH_STATEFULSETS: Perm = Perm::ns("patch", "apps", "statefulsets", "");
pub const PATCH_JOBS: Perm = Perm::ns("patch", "batch", "jobs", "");

/// A host's power or inspection request: a merge patch of its annotations or `spec.online`.
pub const PATCH_HOSTS: Perm = Perm::ns("patch", "metal3.io", "baremetalhosts", "");

/// The permission to write `kind`'s replicas or suspension.
pub fn patch_workload(kind: super::Workload) -> Perm {
    match kind {
        super::Workload::Deployment => PATCH_DEPLOYMENTS,
        super::Workload::ReplicaSet => PATCH_REPLICASETS,
        super::Workload::StatefulSet => PATCH_STATEFULSETS,
        super::Workload::Job => PATCH_JOBS,
    }
}

/// What each kind of operation needs, before the plan says where.
pub fn requirements(kind: OpKind) -> Vec<Perm> {
    match kind {
        OpKind::Cordon | OpKind::Uncordon => vec![PATCH_NODES],
        OpKind::Drain => vec![PATCH_NODES, LIST_PODS, EVICT_PODS],
        OpKind::Reslice => vec![
            PATCH_NODES,
            LIST_PODS,
            EVICT_PODS,
            UPDATE_CONFIGMAPS.in_namespace(crate::cluster::labels::MIG_CONFIGMAP_NS),
        ],
        OpKind::SetQuota => vec![PATCH_QUOTAS],
        OpKind::TaintGpu => vec![CREATE_TAINT_RULES],
        OpKind::UntaintGpu => vec![DELETE_TAINT_RULES],
        // The owner decides which: each is asked again for the plan's namespace.
        OpKind::Reclaim => vec![PATCH_DEPLOYMENTS, PATCH_STATEFULSETS, PATCH_JOBS, PATCH_PODS, EVICT_PODS],
        OpKind::HoldQueue | OpKind::ResumeQueue => vec![PATCH_CLUSTERQUEUES],
        OpKind::SuspendWorkload | OpKind::ResumeWorkload => vec![PATCH_WORKLOADS],
        OpKind::RebootHost | OpKind::PowerHost | OpKind::InspectHost => vec![PATCH_HOSTS],
    }
}

pub const KINDS: [OpKind; 15] = [
    OpKind::Cordon,
    OpKind::Uncordon,
    OpKind::Drain,
    OpKind::Reslice,
    OpKind::SetQuota,
    OpKind::TaintGpu,
    OpKind::UntaintGpu,
    OpKind::Reclaim,
    OpKind::HoldQueue,
    OpKind::ResumeQueue,
    OpKind::SuspendWorkload,
    OpKind::ResumeWorkload,
    OpKind::RebootHost,
    OpKind::PowerHost,
    OpKind::InspectHost,
];

/// Asks the API server whether this identity may do `p`.
pub async fn can(client: &kube::Client, p: &Perm) -> Result<bool, kube::Error> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(p.verb.into()),
                group: Some(p.group.into()),
                resource: Some(p.resource.into()),
                subresource: (!p.subresource.is_empty()).then(|| p.subresource.into()),
                name: (!p.name.is_empty()).then(|| p.name.into()),
                namespace: p.namespace.clone(),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let r = api.create(&PostParams::default(), &review).await?;
    Ok(r.status.map(|s| s.allowed).unwrap_or(false))
}

/// The user name the API server authenticated us as, when it says.
pub async fn whoami(client: &kube::Client) -> Option<String> {
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let r = api.create(&PostParams::default(), &SelfSubjectReview::default()).await.ok()?;
    r.status?.user_info?.username
}

pub fn denial(p: &Perm) -> String {
    format!("your identity may not {} (check: {})", p.describe(), p.can_i())
}

/// Checks every kind of operation. Cluster-scoped denials disable the operation; namespaced
/// ones become a note, re-checked per namespace when the operation starts.
pub async fn check(client: &kube::Client) -> Result<AccessSpec, kube::Error> {
    let mut distinct: Vec<Perm> = Vec::new();
    for k in KINDS {
        for p in requirements(k) {
            if !distinct.contains(&p) {
                distinct.push(p);
            }
        }
    }
    let answers = futures::future::join_all(distinct.iter().map(|p| can(client, p))).await;
    let mut allowed = Vec::new();
    for (p, a) in distinct.iter().zip(answers) {
        allowed.push((p.clone(), a?));
    }
    let user = whoami(client).await.unwrap_or_default();
    let mut spec = AccessSpec { user, denied: Vec::new(), limited: Vec::new() };
    for k in KINDS {
        for p in requirements(k) {
            if allowed.iter().any(|(q, ok)| *q == p && !ok) {
                if p.namespaced {
                    spec.limited.push((k.name().to_string(), denial(&p)));
                } else {
                    spec.denied.push((k.name().to_string(), denial(&p)));
                    break;
                }
            }
        }
    }
    Ok(spec)
}

/// Before anything is sent: every permission the plan needs, in the namespaces it touches.
/// Returns the first one denied.
pub async fn preflight(client: &kube::Client, perms: &[Perm]) -> Result<Option<String>, kube::Error> {
    for p in perms {
        if !can(client, p).await? {
            return Ok(Some(denial(p)));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_read_like_rbac_and_kubectl() {
        assert_eq!(PATCH_NODES.describe(), "patch nodes");
        assert_eq!(PATCH_NODES.can_i(), "kubectl auth can-i patch nodes");
        let e = EVICT_PODS.in_namespace("ml");
        assert_eq!(e.describe(), "create pods/eviction in ml");
        assert_eq!(e.can_i(), "kubectl auth can-i create pods --subresource=eviction -n ml");
        assert_eq!(EVICT_PODS.can_i(), "kubectl auth can-i create pods --subresource=eviction -A");
        assert_eq!(PATCH_CLUSTERQUEUES.describe(), "patch clusterqueues.kueue.x-k8s.io");
        let cm = UPDATE_CONFIGMAPS.in_namespace("gpu-operator");
        assert_eq!(cm.describe(), "update configmaps default-mig-parted-config in gpu-operator");
        assert_eq!(cm.can_i(), "kubectl auth can-i update configmaps/default-mig-parted-config -n gpu-operator");
    }
}
