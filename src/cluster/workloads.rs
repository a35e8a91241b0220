//! Workload clusters of a Cluster API management cluster (`--workload-clusters`): each
//! `Cluster` (cluster.x-k8s.io v1beta2, else v1beta1) and the kubeconfig Cluster API keeps
//! for it in the Secret `<name>-kubeconfig` of its namespace (key `value`), read with the
//! person's own rights. A Cluster whose Secret cannot be read (not written yet while the
//! control plane comes up, or forbidden) is still listed, with why.

use std::path::{Path, PathBuf};

use super::{ConnectError, Connection};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};

/// One Cluster of the management cluster, and its kubeconfig (YAML) or why there is none.
#[derive(Clone, Debug)]
pub struct Workload {
    pub namespace: String,
    pub name: String,
    /// `status.phase`: Pending, Provisioning, Provisioned, Deleting, Failed ("" when unset).
    pub phase: String,
    pub kubeconfig: Result<String, String>,
}

impl Workload {
    /// `NAMESPACE/NAME`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The Clusters the management cluster holds, in namespace/name order; empty where Cluster API
/// is not installed. An error when they cannot be listed (forbidden, unreachable).
pub async fn discover(client: &kube::Client) -> Result<Vec<Workload>, String> {
    let mut listed = None;
    for version in ["v1beta2", "v1beta1"] {
        let gvk = GroupVersionKind::gvk("cluster.x-k8s.io", version, "Cluster");
        let ar = ApiResource::from_gvk_with_plural(&gvk, "clusters");
        match Api::<DynamicObject>::all_with(client.clone(), &ar).list(&ListParams::default()).await {
            Ok(l) => {
                listed = Some(l.items);
                break;
            }
            Err(e) if super::is_status(&e, 404) => continue,
            Err(e) => return Err(format!("cannot list Cluster API Clusters: {}", super::describe(&e))),
        }
    }
    let Some(items) = listed else { return Ok(Vec::new()) };
    let secrets = |ns: &str| Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), ns);
    let mut out = Vec::new();
    for o in items {
        let (Some(namespace), Some(name)) = (o.metadata.namespace.clone(), o.metadata.name.clone()) else { continue };
        let phase = o.data["status"]["phase"].as_str().unwrap_or_default().to_string();
        let secret = format!("{name}-kubeconfig");
        let kubeconfig = match secrets(&namespace).get(&secret).await {
            Ok(s) => value(&s).ok_or_else(|| format!("Secret {namespace}/{secret} has no kubeconfig under `value`")),
            Err(e) if super::is_status(&e, 404) => Err(format!(
                "no Secret {namespace}/{secret} yet (Cluster {}; Cluster API writes it once the control plane is up)",
                if phase.is_empty() { "without a phase" } else { &phase }
            )),
            Err(e) => Err(format!("cannot read Secret {namespace}/{secret}: {}", super::describe(&e))),
        };
        out.push(Workload { namespace, name, phase, kubeconfig });
    }
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(out)
}

/// The clusters view's name for `mgmt`'s workload cluster `w`: `MGMT:NAMESPACE/NAME`.
fn row_name(mgmt: &str, w: &Workload) -> String {
    format!("{mgmt}:{}", w.key())
}

/// What [`follow`] found, by the workload cluster's row name (`MGMT:NAMESPACE/NAME`).
pub enum Found {
    /// A Cluster listed: its connection, or why it cannot be opened (yet).
    Open(String, Result<Connection, String>),
    /// A Cluster listed before is no longer on its management cluster: why its row ends.
    Gone(String, String),
}

/// How often a management cluster's Clusters are listed again while the cockpit runs.
pub const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Keeps listing `mgmt`'s Clusters while the cockpit runs (`--workload-clusters`), so a
/// Cluster created later, or whose kubeconfig Secret appears later (Cluster API writes it once
/// the control plane is up), opens without a restart. `opened`: the rows already open; each
/// one found since is sent once opened, and a row that cannot be opened is sent again only
/// when its reason changes. A Cluster no longer listed (deleted) is sent as gone, once: its row
/// stops claiming figures and its feed is stopped; listed again later, it opens again.
pub async fn follow(
    client: kube::Client,
    mgmt: String,
    dir: std::sync::Arc<KubeconfigDir>,
    mut opened: std::collections::BTreeSet<String>,
    mut told: std::collections::BTreeMap<String, String>,
    tx: tokio::sync::mpsc::Sender<Found>,
) {
    loop {
        tokio::time::sleep(FOLLOW_EVERY).await;
        if tx.is_closed() {
            return;
        }
        // Listing failed (the management cluster away): its own feed says so; try again.
        let Ok(found) = discover(&client).await else { continue };
        let listed: std::collections::BTreeSet<String> = found.iter().map(|w| row_name(&mgmt, w)).collect();
        let known: Vec<String> = opened.iter().chain(told.keys()).filter(|r| !listed.contains(*r)).cloned().collect();
        for row in known {
            opened.remove(&row);
            told.remove(&row);
            let key = row.strip_prefix(&format!("{mgmt}:")).unwrap_or(&row).to_string();
            let why = format!("Cluster {key} is no longer on {mgmt} (deleted)");
            if tx.send(Found::Gone(row, why)).await.is_err() {
                return;
            }
        }
        for w in found {
            if opened.contains(&row_name(&mgmt, &w)) {
                continue;
            }
            let (row, result) = dir.open(&mgmt, &w).await;
            match &result {
                Ok(_) => {
                    opened.insert(row.clone());
                }
                Err(why) if told.get(&row) == Some(why) => continue,
                Err(why) => {
                    told.insert(row.clone(), why.clone());
                }
            }
            if tx.send(Found::Open(row, result)).await.is_err() {
                return;
            }
        }
    }
}

/// The kubeconfig in a Cluster API kubeconfig Secret (`data.value`, else `stringData.value`).
fn value(s: &k8s_openapi::api::core::v1::Secret) -> Option<String> {
    if let Some(v) = s.data.as_ref().and_then(|d| d.get("value")) {
        return String::from_utf8(v.0.clone()).ok().filter(|t| !t.trim().is_empty());
    }
    s.string_data.as_ref().and_then(|d| d.get("value")).cloned().filter(|t| !t.trim().is_empty())
}

/// Where the workload clusters' kubeconfigs are kept while the cockpit runs, so `kubectl`
/// hand-offs (`x`, `E`, `:kubectl`) reach the same cluster: a directory only the user can
/// read (the runtime directory when there is one), removed when this is dropped.
pub struct KubeconfigDir(PathBuf);

impl KubeconfigDir {
    pub fn create() -> std::io::Result<KubeconfigDir> {
        use std::os::unix::fs::DirBuilderExt;
        let base = directories::BaseDirs::new()
            .and_then(|b| b.runtime_dir().map(Path::to_path_buf))
            .unwrap_or_else(std::env::temp_dir);
        let dir = base.join(format!("fabrik-workloads-{}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).recursive(true).create(&dir)?;
        Ok(KubeconfigDir(dir))
    }

    /// Opens `mgmt`'s workload cluster `w` through its Secret's kubeconfig: its row name, and
    /// the connection or why there is none (no Secret yet, unreadable, not a kubeconfig).
    pub async fn open(&self, mgmt: &str, w: &Workload) -> (String, Result<Connection, String>) {
        let row = row_name(mgmt, w);
        match &w.kubeconfig {
            Ok(yaml) => (row, self.connect(w, yaml).await.map_err(|e| e.to_string())),
            Err(why) => (row, Err(why.clone())),
        }
    }

    /// Writes one cluster's kubeconfig (mode 0600) and connects to its current context; the
    /// connection's context is that one, its kubeconfig this file.
    pub async fn connect(&self, w: &Workload, yaml: &str) -> Result<Connection, ConnectError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let file = self.0.join(format!("{}_{}.kubeconfig", w.namespace, w.name));
        let bad =
            |reason: String| ConnectError::BadKubeconfig { path: format!("Secret {}-kubeconfig", w.key()), reason };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&file)
            .map_err(|e| bad(format!("cannot keep it in {}: {e}", file.display())))?;
        f.write_all(yaml.as_bytes()).map_err(|e| bad(e.to_string()))?;
        super::connect(Some(&file), None).await
    }
}

impl Drop for KubeconfigDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::os::unix::fs::PermissionsExt;

    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;

    use super::*;

    #[test]
    fn the_kubeconfig_is_under_value_in_data_or_string_data() {
        let data = Secret {
            data: Some(BTreeMap::from([("value".to_string(), ByteString(b"apiVersion: v1\n".to_vec()))])),
            ..Default::default()
        };
        assert_eq!(value(&data).as_deref(), Some("apiVersion: v1\n"));
        let string = Secret {
            string_data: Some(BTreeMap::from([("value".to_string(), "kind: Config".to_string())])),
            ..Default::default()
        };
        assert_eq!(value(&string).as_deref(), Some("kind: Config"));
        let other = Secret {
            data: Some(BTreeMap::from([("kubeconfig".to_string(), ByteString(b"x".to_vec()))])),
            ..Default::default()
        };
        assert_eq!(value(&other), None, "only CAPI's key counts");
        let blank = Secret {
            data: Some(BTreeMap::from([("value".to_string(), ByteString(b"  ".to_vec()))])),
            ..Default::default()
        };
        assert_eq!(value(&blank), None);
    }

    #[tokio::test]
    async fn kubeconfigs_are_private_and_gone_with_the_cockpit() {
        let dir = KubeconfigDir::create().expect("a private directory");
        let path = dir.0.clone();
        let mode = std::fs::metadata(&path).expect("the directory").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let w = Workload {
            namespace: "fleet".into(),
            name: "wl".into(),
            phase: String::new(),
            kubeconfig: Ok(String::new()),
        };
        // Not a kubeconfig: connecting says so, naming the Secret; the file is private anyway.
        let Err(e) = dir.connect(&w, "{not yaml").await else { panic!("a broken kubeconfig connected") };
        assert!(e.to_string().contains("fleet_wl.kubeconfig"), "the error names the file: {e}");
        let file = path.join("fleet_wl.kubeconfig");
        assert_eq!(std::fs::metadata(&file).expect("the file").permissions().mode() & 0o777, 0o600);
        drop(dir);
        assert!(!path.exists(), "removed when the cockpit ends");
    }
}
