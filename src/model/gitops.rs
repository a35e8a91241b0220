//! GitOps ownership: whether Argo CD or Flux puts an object back from Git, read from the
//! object's own labels and annotations. A change fabrik makes in place to such an object
//! lasts only until the next sync, so every preview that touches one says so.
//!
//! What is read (the tools' documented markers):
//! - Argo CD, annotation tracking (the default since 3.0): `argocd.argoproj.io/tracking-id:
//!   <app>:<group>/<kind>:<namespace>/<name>`, `<app>` being `<app-namespace>_<name>` for an
//!   Application outside Argo CD's own namespace. Certain.
//! - Argo CD, label tracking: `app.kubernetes.io/instance: <app>` (or the custom
//!   `argocd.argoproj.io/instance`). Helm charts set the same well-known label for their
//!   release, so it is reported as "Argo CD application, or a Helm release".
//! - Flux: `kustomize.toolkit.fluxcd.io/name` + `/namespace` (a Kustomization) and
//!   `helm.toolkit.fluxcd.io/name` + `/namespace` (a HelmRelease). Flux leaves an object alone
//!   when it carries `kustomize.toolkit.fluxcd.io/reconcile: disabled`.

use std::fmt;

pub const ARGO_TRACKING_ID: &str = "argocd.argoproj.io/tracking-id";
pub const ARGO_INSTANCE: &str = "argocd.argoproj.io/instance";
pub const INSTANCE: &str = "app.kubernetes.io/instance";
pub const FLUX_KS_NAME: &str = "kustomize.toolkit.fluxcd.io/name";
pub const FLUX_KS_NAMESPACE: &str = "kustomize.toolkit.fluxcd.io/namespace";
pub const FLUX_HELM_NAME: &str = "helm.toolkit.fluxcd.io/name";
pub const FLUX_HELM_NAMESPACE: &str = "helm.toolkit.fluxcd.io/namespace";
pub const FLUX_RECONCILE: &str = "kustomize.toolkit.fluxcd.io/reconcile";

/// Which tool, and what of it, owns the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GitOpsTool {
    /// An Argo CD Application, by its tracking-id annotation or custom instance label.
    ArgoCd,
    /// `app.kubernetes.io/instance` alone: Argo CD's label tracking, or a Helm release.
    ArgoCdOrHelm,
    /// A Flux Kustomization.
    FluxKustomization,
    /// A Flux HelmRelease.
    FluxHelmRelease,
}

/// Who puts the object back from Git.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitOpsOwner {
    pub tool: GitOpsTool,
    /// The Application, Kustomization or HelmRelease: `name`, or `namespace/name` where the
    /// marker says the namespace.
    pub app: String,
    /// The label or annotation it was read from.
    pub via: &'static str,
    /// Flux was told to leave this object alone (`kustomize.toolkit.fluxcd.io/reconcile:
    /// disabled`): a change stays.
    pub reconcile_disabled: bool,
}

impl GitOpsOwner {
    /// Reads the owner from an object's labels and annotations; `None` when no GitOps tool
    /// marks it. Argo CD's tracking annotation wins over Flux's labels, which win over the
    /// ambiguous instance label.
    pub fn detect<'a>(
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
        annotations: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Option<GitOpsOwner> {
        let labels: Vec<(&str, &str)> = labels.into_iter().collect();
        let annotations: Vec<(&str, &str)> = annotations.into_iter().collect();
        let label = |k: &str| labels.iter().find(|(key, _)| *key == k).map(|(_, v)| v.trim()).filter(|v| !v.is_empty());
        let annotation =
            |k: &str| annotations.iter().find(|(key, _)| *key == k).map(|(_, v)| v.trim()).filter(|v| !v.is_empty());
        let reconcile_disabled = annotation(FLUX_RECONCILE).is_some_and(|v| v.eq_ignore_ascii_case("disabled"));
        let owner = |tool, app: String, via| GitOpsOwner { tool, app, via, reconcile_disabled };
        if let Some(id) = annotation(ARGO_TRACKING_ID) {
            // `<app>:<group>/<kind>:<namespace>/<name>`; an app in another namespace is
            // `<namespace>_<app>`.
            let app = id.split(':').next().unwrap_or(id);
            let app = match app.split_once('_') {
                Some((ns, name)) if !ns.is_empty() && !name.is_empty() => format!("{ns}/{name}"),
                _ => app.to_string(),
            };
            return Some(owner(GitOpsTool::ArgoCd, app, ARGO_TRACKING_ID));
        }
        let flux = |name_key: &str, ns_key: &str| {
            label(name_key).map(|name| match label(ns_key) {
                Some(ns) => format!("{ns}/{name}"),
                None => name.to_string(),
            })
        };
        if let Some(app) = flux(FLUX_KS_NAME, FLUX_KS_NAMESPACE) {
            return Some(owner(GitOpsTool::FluxKustomization, app, FLUX_KS_NAME));
        }
        if let Some(app) = flux(FLUX_HELM_NAME, FLUX_HELM_NAMESPACE) {
            return Some(owner(GitOpsTool::FluxHelmRelease, app, FLUX_HELM_NAME));
        }
        if let Some(app) = label(ARGO_INSTANCE) {
            return Some(owner(GitOpsTool::ArgoCd, app.to_string(), ARGO_INSTANCE));
        }
        label(INSTANCE).map(|app| owner(GitOpsTool::ArgoCdOrHelm, app.to_string(), INSTANCE))
    }

    /// Whether `key` is a label or annotation [`GitOpsOwner::detect`] reads an owner from.
    pub fn is_marker(key: &str) -> bool {
        matches!(key, ARGO_TRACKING_ID | ARGO_INSTANCE | INSTANCE | FLUX_KS_NAME | FLUX_HELM_NAME)
    }

    /// Whether the tool will put a change back (false only where Flux was told not to).
    pub fn reverts(&self) -> bool {
        !self.reconcile_disabled
    }

    /// The warning a preview shows for a change to `field` of `object` ("ResourceQuota
    /// team-a/gpu"): who owns it, what happens on the next sync, and what to do instead.
    pub fn warning(&self, object: &str, field: &str) -> String {
        if !self.reverts() {
            return format!(
                "{object} is managed by {self}, but {FLUX_RECONCILE}: disabled is set on it: Flux leaves it alone, \
                 so this change stays (and Git no longer says what it holds)"
            );
        }
        let when = match self.tool {
            GitOpsTool::ArgoCdOrHelm => {
                "if that is Argo CD (label tracking) and Git sets it, the next sync puts it back".to_string()
            }
            _ => format!("where Git sets {field}, the next sync puts it back"),
        };
        format!("{object} is managed by {self}: {when} — change it in Git, or confirm to apply it until then")
    }
}

impl fmt::Display for GitOpsOwner {
    /// "Argo CD application `quotas-prod`", "Flux Kustomization `flux-system/quotas`".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.tool {
            GitOpsTool::ArgoCd => "Argo CD application",
            GitOpsTool::ArgoCdOrHelm => "Argo CD application or Helm release",
            GitOpsTool::FluxKustomization => "Flux Kustomization",
            GitOpsTool::FluxHelmRelease => "Flux HelmRelease",
        };
        write!(f, "{what} `{}`", self.app)
    }
}

/// The fleet's key for an object a GitOps tool may own: `node/<name>`,
/// `resourcequota/<namespace>/<name>`, `clusterqueue/<name>`, `configmap/<namespace>/<name>`.
pub fn key(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{kind}/{ns}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> Option<GitOpsOwner> {
        GitOpsOwner::detect(labels.iter().copied(), annotations.iter().copied())
    }

    #[test]
    fn argo_tracking_id_names_the_application() {
        let o = detect(&[], &[(ARGO_TRACKING_ID, "quotas-prod:/ResourceQuota:team-a/gpu")]).expect("owned");
        assert_eq!((o.tool, o.app.as_str()), (GitOpsTool::ArgoCd, "quotas-prod"));
        assert_eq!(o.to_string(), "Argo CD application `quotas-prod`");
        // An Application in another namespace.
        let o = detect(&[], &[(ARGO_TRACKING_ID, "team-a_quotas:/ResourceQuota:team-a/gpu")]).expect("owned");
        assert_eq!(o.app, "team-a/quotas");
        // The annotation wins over the instance label a Helm chart also set.
        let o = detect(&[(INSTANCE, "my-release")], &[(ARGO_TRACKING_ID, "apps:apps/Deployment:ns/x")]).expect("owned");
        assert_eq!(o.app, "apps");
        assert!(o.warning("ResourceQuota team-a/gpu", "spec.hard").contains("next sync puts it back"));
    }

    #[test]
    fn flux_labels_name_the_kustomization_or_helm_release() {
        let o = detect(&[(FLUX_KS_NAME, "quotas"), (FLUX_KS_NAMESPACE, "flux-system")], &[]).expect("owned");
        assert_eq!(o.to_string(), "Flux Kustomization `flux-system/quotas`");
        assert!(o.reverts());
        let o = detect(&[(FLUX_HELM_NAME, "gpu-operator"), (FLUX_HELM_NAMESPACE, "gpu-operator")], &[]).expect("owned");
        assert_eq!(o.tool, GitOpsTool::FluxHelmRelease);
        assert_eq!(o.app, "gpu-operator/gpu-operator");
        // Told to leave the object alone: the change stays, and the preview says so.
        let o = detect(&[(FLUX_KS_NAME, "quotas")], &[(FLUX_RECONCILE, "disabled")]).expect("owned");
        assert!(!o.reverts());
        assert!(o.warning("ClusterQueue cq", "nominalQuota").contains("this change stays"));
    }

    #[test]
    fn the_instance_label_alone_is_not_certain() {
        let o = detect(&[(INSTANCE, "kube-prometheus")], &[]).expect("marked");
        assert_eq!(o.tool, GitOpsTool::ArgoCdOrHelm);
        assert!(o.warning("Node n1", "labels").contains("if that is Argo CD"));
        let o = detect(&[(ARGO_INSTANCE, "nodes")], &[]).expect("owned");
        assert_eq!(o.tool, GitOpsTool::ArgoCd);
        // Nothing, or empty values: not owned.
        assert_eq!(detect(&[("app", "x"), (FLUX_KS_NAME, " ")], &[(ARGO_TRACKING_ID, "")]), None);
    }
}
