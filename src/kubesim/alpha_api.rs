//! `--dra-alpha` beyond the slices: the DeviceTaintRule an operator would write
//! (`resource.k8s.io/v1alpha3`) and the ComputeDomains with the status the NVIDIA driver's
//! controller writes, with what makes them used: the channel DeviceClass, each domain node's
//! channel slice, the channel ResourceClaimTemplate, and a StatefulSet of workers joining it
//! (the real resourceclaim controller makes their claims, the real scheduler allocates them).
//! Each is skipped, with one line, where the server does not serve its API. `--cleanup`
//! deletes them by the label `fabrik.io/simulated=true`.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimTemplate, ResourceSlice};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use serde_json::Value;

use super::alpha::{self, Domain};
use super::model::SimNode;
use super::{describe, is_status};
use crate::cluster::labels;

const MANAGER: &str = "fabrik-sim-dra-driver";
const TAINT_RULES: (&str, &str, &str) = ("resource.k8s.io", "v1alpha3", "DeviceTaintRule");
const DOMAINS: (&str, &str, &str) = ("resource.nvidia.com", "v1beta1", "ComputeDomain");

/// The API of a kind, `None` when the server does not serve it (an alpha API off, a CRD not
/// installed).
async fn served(
    client: &kube::Client,
    (group, version, kind): (&str, &str, &str),
) -> Result<Option<ApiResource>, String> {
    match kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind)).await {
        Ok((ar, _)) => Ok(Some(ar)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(kube::Error::Discovery(_)) => Ok(None),
        Err(e) => Err(format!("discovering {kind} ({group}/{version}): {e}")),
    }
}

fn ssa() -> PatchParams {
    PatchParams::apply(MANAGER).force()
}

async fn apply<K>(api: &Api<K>, body: &Value, what: &str) -> Result<K, String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = body["metadata"]["name"].as_str().unwrap_or_default().to_string();
    api.patch(&name, &ssa(), &Patch::Apply(body)).await.map_err(|e| format!("{what} {name}: {}", describe(&e)))
}

/// Creates the DeviceTaintRule and the ComputeDomains (in `namespace`, with their status).
pub async fn create(client: &kube::Client, nodes: &[SimNode], namespace: &str) -> Result<(), String> {
    match (served(client, TAINT_RULES).await?, alpha::rule_target(nodes)) {
        (None, _) => eprintln!(
            "fabrik sim: --dra-alpha: resource.k8s.io/v1alpha3 DeviceTaintRule is not served \
             (--runtime-config=resource.k8s.io/v1alpha3=true); no taint rule"
        ),
        (Some(_), None) => {}
        (Some(ar), Some((pool, device))) => {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            apply(&api, &alpha::taint_rule(&pool, &device), "DeviceTaintRule").await?;
            eprintln!("fabrik sim: DeviceTaintRule {} on {pool}/{device}", alpha::TAINT_RULE);
        }
    }
    let domains = alpha::domains(nodes);
    if domains.is_empty() {
        return Ok(());
    }
    let Some(ar) = served(client, DOMAINS).await? else {
        eprintln!(
            "fabrik sim: --dra-alpha: the ComputeDomain CRD (computedomains.resource.nvidia.com) is not installed; \
             no ComputeDomains"
        );
        return Ok(());
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
    // The driver's side of the channels: its DeviceClass, and on every node of a domain the
    // slice with that node's IMEX channel.
    let classes: Api<DeviceClass> = Api::all(client.clone());
    apply(&classes, &alpha::channel_class(), "DeviceClass").await?;
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    for (node, _, _) in domains.iter().flat_map(|d| &d.members) {
        apply(&slices, &alpha::channel_slice(node), "ResourceSlice").await?;
    }
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), namespace);
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), namespace);
    for d in &domains {
        let uid = write_domain(&api, d, namespace).await?;
        // What the controller makes for it, then the workload that joins it.
        apply(&templates, &alpha::channel_template(d, namespace, &uid), "ResourceClaimTemplate").await?;
        apply(&sets, &alpha::workers(d, namespace), "StatefulSet").await?;
    }
    Ok(())
}

/// A domain as the driver's controller keeps it: the object, then its status. Its uid.
async fn write_domain(api: &Api<DynamicObject>, d: &Domain, namespace: &str) -> Result<String, String> {
    let made = apply(api, &alpha::domain_object(d, namespace), "ComputeDomain").await?;
    api.patch_status(d.name, &PatchParams::default(), &Patch::Merge(&alpha::domain_status(d)))
        .await
        .map_err(|e| format!("status of ComputeDomain {namespace}/{}: {}", d.name, describe(&e)))?;
    let ready = d.members.iter().filter(|m| m.2).count();
    eprintln!(
        "fabrik sim: ComputeDomain {namespace}/{}: {ready}/{} nodes ready, clique {}",
        d.name, d.num_nodes, d.clique
    );
    Ok(made.metadata.uid.unwrap_or_default())
}

/// Deletes the simulated DeviceTaintRules and ComputeDomains with their workers, channel
/// templates and class; (rules, domains) deleted.
pub async fn cleanup(client: &kube::Client) -> Result<(usize, usize), String> {
    let sim = ListParams::default().labels(&format!("{}=true", labels::SIMULATED));
    let mut counts = [0usize; 5];
    // The domains' workers and channels go with them (the namespace may be `default`).
    let channels = [
        ("apps", "v1", "StatefulSet"),
        ("resource.k8s.io", "v1", "ResourceClaimTemplate"),
        ("resource.k8s.io", "v1", "DeviceClass"),
    ];
    for (k, gvk) in [TAINT_RULES, DOMAINS].into_iter().chain(channels).enumerate() {
        let Some(ar) = served(client, gvk).await? else { continue };
        let all: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let list = all.list_metadata(&sim).await.map_err(|e| format!("listing {}s: {}", gvk.2, describe(&e)))?;
        for o in list.items {
            let Some(name) = o.metadata.name.as_deref() else { continue };
            let api: Api<DynamicObject> = match o.metadata.namespace.as_deref() {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
                None => Api::all_with(client.clone(), &ar),
            };
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => counts[k] += 1,
                Err(e) if is_status(&e, 404) => {}
                Err(e) => return Err(format!("deleting {} {name}: {}", gvk.2, describe(&e))),
            }
        }
    }
    Ok((counts[0], counts[1]))
}
