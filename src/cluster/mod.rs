//! The connection to a real cluster: a client from a kubeconfig and context, with errors that
//! say what was wrong and how to fix it. Shared by the kube feed, `fabrik sim` and (issue 4)
//! the cluster executor. Label and resource names of the GPU stack live in [`labels`].

pub mod capi;
pub mod cilium;
pub mod inspect;
pub mod kubelet;
pub mod kueue;
pub mod labels;
pub mod logs;
pub mod metal3;
pub mod workloads;

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};

/// Whether an API call failed with this HTTP status.
pub fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Who manages a pod, as kubectl drain judges it: a mirror pod (static, the kubelet's), else
/// its controller's kind, else nobody.
pub fn pod_owner(p: &k8s_openapi::api::core::v1::Pod) -> crate::model::Owner {
    use crate::model::Owner;
    if p.metadata.annotations.as_ref().is_some_and(|a| a.contains_key("kubernetes.io/config.mirror")) {
        return Owner::Mirror;
    }
    let Some(o) = p.metadata.owner_references.as_ref().and_then(|o| o.iter().find(|o| o.controller == Some(true)))
    else {
        return Owner::None;
    };
    match o.kind.as_str() {
        "ReplicaSet" => Owner::ReplicaSet,
        "StatefulSet" => Owner::StatefulSet,
        "Job" => Owner::Job,
        "DaemonSet" => Owner::DaemonSet,
        _ => Owner::Other,
    }
}

/// The name of the object that controls a pod (`ownerReferences[controller: true]`).
pub fn pod_owner_name(p: &k8s_openapi::api::core::v1::Pod) -> Option<String> {
    let refs = p.metadata.owner_references.as_ref()?;
    refs.iter().find(|o| o.controller == Some(true)).map(|o| o.name.clone())
}

/// A pod's deletion under way, as the API server has it (`None` until one is asked for); the
/// kube feed and the executor read the same facts.
pub fn pod_deletion(p: &k8s_openapi::api::core::v1::Pod) -> Option<crate::model::Deletion> {
    let at = p.metadata.deletion_timestamp.as_ref()?.0.as_millisecond().max(0) as u64;
    let grace = p.metadata.deletion_grace_period_seconds.and_then(|g| u32::try_from(g).ok());
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    Some(crate::model::Deletion {
        since: at.saturating_sub(grace.map_or(0, |g| u64::from(g) * 1000)),
        grace_secs: grace,
        finalizers: p.metadata.finalizers.clone().unwrap_or_default(),
        stopped: matches!(phase, Some("Succeeded" | "Failed")),
    })
}

/// A client and the name of the context it talks to (for the header and the audit log).
pub struct Connection {
    pub client: kube::Client,
    pub context: String,
    /// All context names in the kubeconfig, for `:ctx`.
    pub contexts: Vec<String>,
    pub kubeconfig: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(
        "no kubeconfig found (looked at $KUBECONFIG and ~/.kube/config).\n\
         Point fabrik at a cluster with --kubeconfig FILE, or run the cockpit on the embedded \
         simulated factory:\n\n    fabrik demo\n"
    )]
    NoKubeconfig,
    #[error("cannot read kubeconfig {path}: {reason}\nFix the file or pass another one with --kubeconfig FILE.")]
    BadKubeconfig { path: String, reason: String },
    #[error("context {context:?} is not in {path}; it has: {available}\nPick one with --context NAME.")]
    UnknownContext { context: String, path: String, available: String },
    #[error("kubeconfig {path} has no current-context and no --context was given; it has: {available}")]
    NoContext { path: String, available: String },
    #[error("cannot build a client for context {context:?}: {reason}")]
    Client { context: String, reason: String },
}

fn default_kubeconfig_path() -> Option<PathBuf> {
    if let Some(v) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        // Like kubectl: a list; the first existing file wins for our purposes.
        return std::env::split_paths(&v).find(|p| p.exists()).or_else(|| std::env::split_paths(&v).next());
    }
    let home = directories::BaseDirs::new()?.home_dir().join(".kube").join("config");
    Some(home)
}

/// The kubeconfig (the given path, else $KUBECONFIG, else ~/.kube/config), read.
fn read_kubeconfig(kubeconfig: Option<&Path>) -> Result<(PathBuf, Kubeconfig), ConnectError> {
    let path = match kubeconfig {
        Some(p) => p.to_path_buf(),
        None => default_kubeconfig_path().ok_or(ConnectError::NoKubeconfig)?,
    };
    if !path.exists() {
        return Err(if kubeconfig.is_some() {
            ConnectError::BadKubeconfig { path: path.display().to_string(), reason: "no such file".into() }
        } else {
            ConnectError::NoKubeconfig
        });
    }
    let kc = Kubeconfig::read_from(&path)
        .map_err(|e| ConnectError::BadKubeconfig { path: path.display().to_string(), reason: e.to_string() })?;
    Ok((path, kc))
}

/// `--all-contexts`: the kubeconfig's contexts, the current one first.
pub fn all_contexts(kubeconfig: Option<&Path>) -> Result<Vec<String>, ConnectError> {
    let (path, kc) = read_kubeconfig(kubeconfig)?;
    let mut names: Vec<String> = kc.contexts.iter().map(|c| c.name.clone()).collect();
    if names.is_empty() {
        return Err(ConnectError::BadKubeconfig {
            path: path.display().to_string(),
            reason: "it has no contexts".into(),
        });
    }
    if let Some(i) = kc.current_context.as_ref().and_then(|c| names.iter().position(|n| n == c)) {
        let current = names.remove(i);
        names.insert(0, current);
    }
    Ok(names)
}

/// Reads the kubeconfig (the given path, else $KUBECONFIG, else ~/.kube/config) and builds a
/// client for `context` (else the current context). Nothing is sent to the server here.
pub async fn connect(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<Connection, ConnectError> {
    let (path, kc) = read_kubeconfig(kubeconfig)?;
    let shown = path.display().to_string();
    let contexts: Vec<String> = kc.contexts.iter().map(|c| c.name.clone()).collect();
    let available = if contexts.is_empty() { "no contexts".to_string() } else { contexts.join(", ") };
    let ctx = match context {
        Some(c) => {
            if !contexts.iter().any(|n| n == c) {
                return Err(ConnectError::UnknownContext { context: c.into(), path: shown, available });
            }
            c.to_string()
        }
        None => match kc.current_context.clone().filter(|c| !c.is_empty()) {
            Some(c) => c,
            None => return Err(ConnectError::NoContext { path: shown, available }),
        },
    };
    let opts = KubeConfigOptions { context: Some(ctx.clone()), ..Default::default() };
    let mut config = kube::Config::from_custom_kubeconfig(kc, &opts)
        .await
        .map_err(|e| ConnectError::Client { context: ctx.clone(), reason: e.to_string() })?;
    // kube's default layer retries 429/503/504 silently (up to 15 times, minutes apart).
    // fabrik handles them where they happen: a PDB's 429 on an eviction is shown and retried
    // on kubectl's schedule, watches back off on their own, and an overloaded server shows
    // as trouble instead of a cockpit that seems to hang.
    config.default_retry = false;
    let client = kube::Client::try_from(config)
        .map_err(|e| ConnectError::Client { context: ctx.clone(), reason: e.to_string() })?;
    Ok(Connection { client, context: ctx, contexts, kubeconfig: Some(path) })
}

/// A short, human reason for a kube error: the API status message where there is one.
impl Connection {
    /// kubectl's options for this connection: `[--kubeconfig FILE] --context NAME` (the
    /// hand-offs and `:kubectl` run kubectl against the same cluster as the cockpit).
    pub fn kubectl_flags(&self) -> Vec<String> {
        let mut flags: Vec<String> =
            self.kubeconfig.iter().flat_map(|k| ["--kubeconfig".to_string(), k.display().to_string()]).collect();
        flags.extend(["--context".to_string(), self.context.clone()]);
        flags
    }
}

pub fn describe(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({} {})", s.message, s.code, s.reason),
        other => other.to_string(),
    }
}
