//! One object as the API server holds it, and the events about it (`y` on a row, `fabrik
//! describe`): the kinds fabrik shows, found by discovery in the versions this server serves;
//! `managedFields` folded; the events as `kubectl describe` selects them (the object's kind,
//! namespace, name and uid).

use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::{DynamicObject, GroupVersionKind, ListParams};
use kube::discovery::Scope;
use serde_json::Value;

use crate::model::{InspectDoc, InspectEvent, InspectTarget};

/// A kind fabrik can show: its API group, the versions to try (newest first), and the names
/// a person may type for it.
pub struct KindRef {
    pub kind: &'static str,
    pub group: &'static str,
    pub versions: &'static [&'static str],
    pub names: &'static [&'static str],
}

const DRA: &[&str] = &["v1", "v1beta2", "v1beta1"];
/// Kueue's and Cluster API's versions alike: v1beta2, else v1beta1.
const KUEUE: &[&str] = &["v1beta2", "v1beta1"];
const CAPI: &str = "cluster.x-k8s.io";

pub const KINDS: &[KindRef] = &[
    KindRef { kind: "Node", group: "", versions: &["v1"], names: &["node", "nodes", "no"] },
    KindRef { kind: "Pod", group: "", versions: &["v1"], names: &["pod", "pods", "po"] },
    KindRef { kind: "Namespace", group: "", versions: &["v1"], names: &["namespace", "namespaces", "ns"] },
    KindRef {
        kind: "ResourceQuota",
        group: "",
        versions: &["v1"],
        names: &["resourcequota", "resourcequotas", "quota"],
    },
    KindRef { kind: "ConfigMap", group: "", versions: &["v1"], names: &["configmap", "configmaps", "cm"] },
    KindRef { kind: "Deployment", group: "apps", versions: &["v1"], names: &["deployment", "deployments", "deploy"] },
    KindRef { kind: "StatefulSet", group: "apps", versions: &["v1"], names: &["statefulset", "statefulsets", "sts"] },
    KindRef { kind: "ReplicaSet", group: "apps", versions: &["v1"], names: &["replicaset", "replicasets", "rs"] },
    KindRef { kind: "DaemonSet", group: "apps", versions: &["v1"], names: &["daemonset", "daemonsets", "ds"] },
    KindRef { kind: "Job", group: "batch", versions: &["v1"], names: &["job", "jobs"] },
    KindRef {
        kind: "PodDisruptionBudget",
        group: "policy",
        versions: &["v1"],
        names: &["poddisruptionbudget", "poddisruptionbudgets", "pdb"],
    },
    KindRef {
        kind: "ResourceClaim",
        group: "resource.k8s.io",
        versions: DRA,
        names: &["resourceclaim", "resourceclaims", "claim"],
    },
    KindRef {
        kind: "ResourceClaimTemplate",
        group: "resource.k8s.io",
        versions: DRA,
        names: &["resourceclaimtemplate", "resourceclaimtemplates"],
    },
    KindRef {
        kind: "ResourceSlice",
        group: "resource.k8s.io",
        versions: DRA,
        names: &["resourceslice", "resourceslices", "slice"],
    },
    KindRef { kind: "DeviceClass", group: "resource.k8s.io", versions: DRA, names: &["deviceclass", "deviceclasses"] },
    KindRef {
        kind: "DeviceTaintRule",
        group: "resource.k8s.io",
        versions: &["v1alpha3"],
        names: &["devicetaintrule", "devicetaintrules"],
    },
    KindRef {
        kind: "ComputeDomain",
        group: "resource.nvidia.com",
        versions: &["v1beta1"],
        names: &["computedomain", "computedomains", "cd"],
    },
    KindRef {
        kind: "ClusterQueue",
        group: "kueue.x-k8s.io",
        versions: KUEUE,
        names: &["clusterqueue", "clusterqueues", "cq"],
    },
    KindRef {
        kind: "LocalQueue",
        group: "kueue.x-k8s.io",
        versions: KUEUE,
        names: &["localqueue", "localqueues", "lq"],
    },
    KindRef { kind: "Workload", group: "kueue.x-k8s.io", versions: KUEUE, names: &["workload", "workloads", "wl"] },
    KindRef { kind: "Cluster", group: CAPI, versions: KUEUE, names: &["capicluster", "clusters.cluster.x-k8s.io"] },
    KindRef {
        kind: "KubeadmControlPlane",
        group: "controlplane.cluster.x-k8s.io",
        versions: KUEUE,
        names: &["kubeadmcontrolplane", "kubeadmcontrolplanes", "kcp"],
    },
    KindRef {
        kind: "MachineDeployment",
        group: CAPI,
        versions: KUEUE,
        names: &["machinedeployment", "machinedeployments", "md"],
    },
    KindRef { kind: "MachineSet", group: CAPI, versions: KUEUE, names: &["machineset", "machinesets", "ms"] },
    KindRef { kind: "Machine", group: CAPI, versions: KUEUE, names: &["machine", "machines", "ma"] },
    KindRef {
        kind: "MachineHealthCheck",
        group: CAPI,
        versions: KUEUE,
        names: &["machinehealthcheck", "machinehealthchecks", "mhc"],
    },
];

/// The kind a person typed (`pod`, `pods`, `po`, `Pod`, `cq`), or a message naming the kinds
/// there are.
pub fn kind_of(word: &str) -> Result<&'static KindRef, String> {
    let w = word.trim().to_ascii_lowercase();
    KINDS.iter().find(|k| k.names.contains(&w.as_str()) || k.kind.eq_ignore_ascii_case(&w)).ok_or_else(|| {
        let names: Vec<&str> = KINDS.iter().map(|k| k.names[0]).collect();
        format!("fabrik does not show {word:?}; it shows: {}", names.join(", "))
    })
}

/// The object without `metadata.managedFields`, and how many entries they had.
pub fn fold(mut obj: Value) -> (Value, usize) {
    let folded = obj
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .and_then(|m| m.remove("managedFields"))
        .and_then(|m| m.as_array().map(Vec::len))
        .unwrap_or(0);
    (obj, folded)
}

/// Reads the object and its events. The error says what was wrong: an unknown or unserved
/// kind, a namespace missing or given where none belongs, not found, forbidden.
pub async fn inspect(client: &kube::Client, t: &InspectTarget) -> Result<InspectDoc, String> {
    let k = kind_of(&t.kind)?;
    let mut last = String::new();
    let mut found = None;
    for v in k.versions {
        match kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(k.group, v, k.kind)).await {
            Ok(x) => {
                found = Some(x);
                break;
            }
            Err(e) => last = super::describe(&e),
        }
    }
    let Some((ar, caps)) = found else {
        let group = if k.group.is_empty() { "core" } else { k.group };
        let why = if last.contains("404") { "not installed here?".to_string() } else { last };
        return Err(format!("this API server does not serve {} ({group} {}): {why}", k.kind, k.versions.join("/")));
    };
    let api: Api<DynamicObject> = match (&caps.scope, t.namespace.as_deref()) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &ar),
        (Scope::Namespaced, None) => return Err(format!("{} is namespaced: give its namespace", k.kind)),
        (Scope::Cluster, None) => Api::all_with(client.clone(), &ar),
        (Scope::Cluster, Some(ns)) => {
            return Err(format!("{} is not namespaced: leave out the namespace {ns:?}", k.kind));
        }
    };
    let obj = match api.get(&t.name).await {
        Ok(o) => o,
        Err(e) if super::is_status(&e, 404) => return Err("not found".to_string()),
        Err(e) => return Err(format!("cannot read it: {}", super::describe(&e))),
    };
    let uid = obj.metadata.uid.clone();
    let value = serde_json::to_value(&obj).map_err(|e| format!("cannot read it: {e}"))?;
    let (value, folded) = fold(value);
    let yaml = serde_saphyr::to_string(&value).map_err(|e| format!("cannot write it as YAML: {e}"))?;
    let (events, events_error) = match events(client, k.kind, t, uid.as_deref()).await {
        Ok(e) => (e, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    Ok(InspectDoc { yaml, folded, events, events_error, note: None })
}

/// The core/v1 Events about the object, oldest first.
async fn events(
    client: &kube::Client,
    kind: &str,
    t: &InspectTarget,
    uid: Option<&str>,
) -> Result<Vec<InspectEvent>, String> {
    let mut fields = format!("involvedObject.kind={kind},involvedObject.name={}", t.name);
    if let Some(ns) = &t.namespace {
        fields.push_str(&format!(",involvedObject.namespace={ns}"));
    }
    if let Some(uid) = uid {
        fields.push_str(&format!(",involvedObject.uid={uid}"));
    }
    // Events about a cluster-scoped object live in any namespace (a node's in `default`).
    let api: Api<Event> = match &t.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let list = api
        .list(&ListParams::default().fields(&fields))
        .await
        .map_err(|e| format!("cannot list its events: {}", super::describe(&e)))?;
    let mut out: Vec<InspectEvent> = list
        .items
        .iter()
        .map(|e| {
            // lastTimestamp, else eventTime (events.k8s.io writers), else its creation.
            let last = e
                .last_timestamp
                .as_ref()
                .map(|t| t.0)
                .or_else(|| e.event_time.as_ref().map(|t| t.0))
                .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
                .map_or(0, |t| t.as_millisecond().max(0) as u64);
            InspectEvent {
                last,
                type_: e.type_.clone().unwrap_or_default(),
                reason: e.reason.clone().unwrap_or_default(),
                count: e.count.and_then(|c| u32::try_from(c).ok()).unwrap_or(1),
                from: e
                    .source
                    .as_ref()
                    .and_then(|s| s.component.clone())
                    .or_else(|| e.reporting_component.clone())
                    .unwrap_or_default(),
                message: e.message.clone().unwrap_or_default(),
            }
        })
        .collect();
    out.sort_by_key(|e| e.last);
    Ok(out)
}

/// The most of a command's output the pane keeps.
const KUBECTL_OUTPUT_MAX: usize = 1 << 20;
/// How long a `:kubectl` command may run.
const KUBECTL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// `:kubectl ARGS` with the cockpit's kubeconfig and context (`flags`, from
/// [`super::Connection::kubectl_flags`]): reading verbs only (checked again here), its output
/// (stdout, then stderr) and how it ended.
pub async fn kubectl(flags: &[String], line: &str) -> Result<InspectDoc, String> {
    let args = crate::model::inspect::kubectl_args(line)?;
    let mut cmd = tokio::process::Command::new("kubectl");
    cmd.args(flags).args(&args).stdin(std::process::Stdio::null()).kill_on_drop(true);
    let out = match tokio::time::timeout(KUBECTL_TIMEOUT, cmd.output()).await {
        Err(_) => return Err(format!("kubectl did not finish within {}s; stopped", KUBECTL_TIMEOUT.as_secs())),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err("there is no kubectl on PATH: install it to use :kubectl".into());
        }
        Ok(Err(e)) => return Err(format!("cannot run kubectl: {e}")),
        Ok(Ok(o)) => o,
    };
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    let mut note = match out.status.code() {
        Some(c) => format!("exit {c}"),
        None => "killed by a signal".to_string(),
    };
    if text.len() > KUBECTL_OUTPUT_MAX {
        let cut = (0..=KUBECTL_OUTPUT_MAX).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
        text.truncate(cut);
        note.push_str(&format!("; output cut at {} MiB", KUBECTL_OUTPUT_MAX >> 20));
    }
    Ok(InspectDoc { yaml: text, folded: 0, events: Vec::new(), events_error: None, note: Some(note) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_any_of_their_names_and_unknown_ones_named() {
        assert_eq!(kind_of("po").map(|k| k.kind), Ok("Pod"));
        assert_eq!(kind_of("ResourceQuota").map(|k| k.kind), Ok("ResourceQuota"));
        assert_eq!(kind_of("cq").map(|k| (k.kind, k.group)), Ok(("ClusterQueue", "kueue.x-k8s.io")));
        let e = kind_of("gizmo").map(|k| k.kind).expect_err("unknown");
        assert!(e.contains("\"gizmo\"") && e.contains("pod") && e.contains("computedomain"), "{e}");
        // Every kind answers to its first name.
        for k in KINDS {
            assert_eq!(kind_of(k.names[0]).map(|x| x.kind), Ok(k.kind));
        }
    }

    #[test]
    fn managed_fields_are_folded_and_counted_and_nothing_else_changes() {
        let obj = serde_json::json!({
            "kind": "Pod",
            "metadata": {"name": "p", "managedFields": [{"manager": "a"}, {"manager": "b"}], "labels": {"x": "y"}},
            "spec": {"nodeName": "n"},
        });
        let (folded, n) = fold(obj.clone());
        assert_eq!(n, 2);
        let mut want = obj;
        want["metadata"].as_object_mut().map(|m| m.remove("managedFields"));
        assert_eq!(folded, want);
        assert_eq!(fold(serde_json::json!({"kind": "Node"})).1, 0);
    }
}
