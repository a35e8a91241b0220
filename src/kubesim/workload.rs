//! `--workload`: a tenant mix that makes a fresh control plane look like an AI factory.
//! Planning is pure ([`plan`]); [`create`] sends the objects, 32 at a time. Nothing gets a
//! nodeName: the real kube-scheduler places the pods and allocates the DRA claims.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

mod dra;

use super::model::{self, SimNode};
use super::{describe, is_status};
use crate::cluster::labels;
use crate::rng::Rng;

/// Label on every namespace the workload creates (cleanup deletes by it).
pub const WORKLOAD_LABEL: &str = "fabrik.io/sim-workload";
pub const VCLUSTER: &str = "research";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Deployment,
    Job,
    /// Bare pods (no owner).
    Bare,
}

/// What a pod asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ask {
    Gpus(u16),
    /// One instance of this MIG resource (`nvidia.com/mig-…`).
    Mig(String),
    /// One DRA claim per pod, device class `gpu.nvidia.com`, one device.
    Dra,
    /// `--dra-alpha`: a partition of a partitionable GPU (dynamic MIG), a claim of class
    /// `mig.nvidia.com` for `profile` on one of `parents` (GPU uuids).
    Partition {
        profile: String,
        parents: Vec<String>,
    },
    /// `--dra-alpha`: `memory` of the GPU `uuid` shared by capacity, a claim of class
    /// `gpu.nvidia.com` with a capacity request.
    Capacity {
        uuid: String,
        memory: &'static str,
    },
    /// Replicas of shared GPUs (time-slicing, MPS): `count` of `resource` (`nvidia.com/gpu`,
    /// or `nvidia.com/gpu.shared` where the device plugin renames it).
    Replicas {
        resource: &'static str,
        count: u16,
    },
}

impl Ask {
    /// What the pod asks of `nvidia.com/gpu`, which a quota on it counts.
    fn gpu_resource(&self) -> i64 {
        match self {
            Ask::Gpus(g) => i64::from(*g),
            Ask::Replicas { resource, count } if *resource == labels::GPU_RESOURCE => i64::from(*count),
            _ => 0,
        }
    }
    /// The pod gets its devices through a DRA claim.
    fn claims(&self) -> bool {
        matches!(self, Ask::Dra | Ask::Partition { .. } | Ask::Capacity { .. })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct App {
    pub tenant: &'static str,
    pub namespace: String,
    pub name: String,
    pub kind: Kind,
    pub ask: Ask,
    pub replicas: u32,
    pub image: &'static str,
    /// (maxUnavailable, minAvailable).
    pub pdb: Option<(Option<i32>, Option<i32>)>,
    /// The pods' nodeSelector (the sharing strategy GFD labels a node with).
    pub node_selector: Vec<(&'static str, &'static str)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// (namespace, tenant).
    pub namespaces: Vec<(String, String)>,
    pub apps: Vec<App>,
    /// (namespace, resource, hard).
    pub quotas: Vec<(String, String, i64)>,
    /// GPU uuids the plain DRA claims keep off (`--dra-alpha`'s shapes).
    pub dra_exclude: Vec<String>,
}

impl Plan {
    pub fn gpu_pods(&self) -> u32 {
        self.apps.iter().map(|a| a.replicas).sum()
    }
    /// The namespace of the first app with DRA claims.
    pub fn dra_namespace(&self) -> Option<String> {
        self.apps.iter().find(|a| a.ask.claims()).map(|a| a.namespace.clone())
    }
}

fn ns_of(tenant: &str) -> String {
    if tenant == VCLUSTER { format!("vcluster-{VCLUSTER}") } else { tenant.to_string() }
}

/// The mix for `nodes` with about `target` GPU pods (default: 60% of the GPUs not shared).
/// Pods are spread over whole GPUs, MIG instances and DRA GPUs in proportion to what the
/// fleet has. Where the device plugin shares GPUs, pods select them by sharing strategy
/// and hold about 70% of the replicas besides; the other GPU pods then select unshared
/// nodes (`nvidia.com/gpu.sharing-strategy=none`).
pub fn plan(nodes: &[SimNode], target: Option<u32>) -> Plan {
    let mut whole = 0u64;
    let mut dra = 0u64;
    let mut mig: BTreeMap<String, u64> = BTreeMap::new();
    // Replicas per (strategy, resource) of the shared GPUs, and those GPUs.
    let mut shared: BTreeMap<(&'static str, &'static str), u64> = BTreeMap::new();
    let mut shared_gpus = 0u64;
    for n in nodes {
        if n.dra {
            dra += n.gpus.iter().filter(|g| !g.mig_enabled && !dra::shaped(n, g.index)).count() as u64;
            continue;
        }
        if n.sharing.is_some() {
            shared_gpus += n.gpus.len() as u64;
        }
        for (r, c) in model::gpu_resources(n) {
            if let Some(s) = n.sharing.as_ref().filter(|s| s.resource() == r) {
                *shared.entry((s.strategy.label(), s.resource())).or_default() += c as u64;
            } else if r == labels::GPU_RESOURCE {
                whole += c as u64;
            } else {
                *mig.entry(r).or_default() += c as u64;
            }
        }
    }
    let total_gpus: u64 = nodes.iter().map(|n| n.gpus.len() as u64).sum::<u64>() - shared_gpus;
    let target = u64::from(target.unwrap_or(((total_gpus * 6) / 10) as u32));
    let mig_total: u64 = mig.values().sum();
    // MIG instances count a seventh of a GPU each for the split.
    let units = whole + dra + mig_total / 7;
    let share = |cap: u64| (target * cap).checked_div(units).unwrap_or(0);
    let p_whole = share(whole);
    let p_dra = if dra == 0 { 0 } else { share(dra).max(1) };
    let p_mig = if mig_total == 0 { 0 } else { target.saturating_sub(p_whole + p_dra).max(1) };
    let r = |p: u64, w: f64| -> u32 { ((p as f64 * w).round() as u32).max(u32::from(p > 0)) };

    let mut apps = Vec::new();
    // Whole GPUs only on nodes that do not share them, once some do.
    let unshared: Vec<(&'static str, &'static str)> =
        if shared.is_empty() { Vec::new() } else { vec![(labels::GPU_SHARING_STRATEGY, "none")] };
    let app = |tenant: &'static str, name: &str, kind, ask, replicas, image| App {
        tenant,
        namespace: ns_of(tenant),
        name: name.to_string(),
        kind,
        node_selector: if matches!(ask, Ask::Gpus(_)) { unshared.clone() } else { Vec::new() },
        ask,
        replicas,
        image,
        pdb: None,
    };
    if p_whole > 0 {
        let torch = "nvcr.io/nvidia/pytorch:25.01-py3";
        apps.push(App {
            pdb: Some((Some(0), None)),
            ..app("llm-pretrain", "pretrain-llama-70b", Kind::Deployment, Ask::Gpus(8), r(p_whole, 0.03), torch)
        });
        apps.push(app("llm-finetune", "ft-mistral-lora", Kind::Job, Ask::Gpus(4), r(p_whole, 0.05), torch));
        apps.push(App {
            namespace: "llm-finetune-dev".into(),
            ..app("llm-finetune", "ft-debug", Kind::Deployment, Ask::Gpus(1), r(p_whole, 0.08), torch)
        });
        let vllm = "vllm/vllm-openai:v0.8.4";
        apps.push(App {
            pdb: Some((Some(1), None)),
            ..app("inference-prod", "vllm-llama3-8b", Kind::Deployment, Ask::Gpus(1), r(p_whole, 0.45), vllm)
        });
        let triton = r(p_whole, 0.10);
        apps.push(App {
            pdb: Some((None, Some(triton.saturating_sub(1) as i32))),
            ..app(
                "inference-prod",
                "triton-embed",
                Kind::Deployment,
                Ask::Gpus(2),
                triton,
                "nvcr.io/nvidia/tritonserver:25.01-py3",
            )
        });
        apps.push(app("vision", "yolo-train", Kind::Job, Ask::Gpus(2), r(p_whole, 0.07), torch));
        apps.push(app("eval", "eval-harness", Kind::Job, Ask::Gpus(1), r(p_whole, 0.07), torch));
        apps.push(app(
            VCLUSTER,
            "jupyter",
            Kind::Bare,
            Ask::Gpus(1),
            r(p_whole, 0.15),
            "jupyter/pytorch-notebook:2025",
        ));
    }
    if p_mig > 0 {
        // Whisper on every MIG resource in proportion to its count; a MIG eval job on the
        // most common one.
        let asr = p_mig - p_mig / 5;
        for (res, c) in &mig {
            let n = (asr * c / mig_total.max(1)) as u32;
            if n == 0 {
                continue;
            }
            let suffix = res.trim_start_matches(labels::MIG_RESOURCE_PREFIX).replace('.', "-");
            apps.push(App {
                pdb: Some((Some(1), None)),
                ..app(
                    "speech",
                    &format!("whisper-asr-{suffix}"),
                    Kind::Deployment,
                    Ask::Mig(res.clone()),
                    n,
                    "nvcr.io/nvidia/riva/riva-speech:2.19.0",
                )
            });
        }
        if let Some((res, _)) = mig.iter().max_by_key(|(_, c)| **c) {
            apps.push(app(
                "eval",
                "eval-mig",
                Kind::Job,
                Ask::Mig(res.clone()),
                (p_mig / 5).max(1) as u32,
                "nvcr.io/nvidia/pytorch:25.01-py3",
            ));
        }
    }
    if p_dra > 0 {
        apps.push(app(
            "recsys",
            "ranker",
            Kind::Bare,
            Ask::Dra,
            p_dra as u32,
            "nvcr.io/nvidia/merlin/merlin-tensorflow:25.01",
        ));
    }
    apps.extend(shared_apps(&shared));
    apps.extend(dra::alpha_apps(nodes));
    apps.retain(|a| a.replicas > 0);

    let mut namespaces: Vec<(String, String)> = Vec::new();
    for a in &apps {
        if !namespaces.iter().any(|(n, _)| *n == a.namespace) {
            namespaces.push((a.namespace.clone(), a.tenant.to_string()));
        }
    }
    // Quotas on whole GPUs, per tenant's first namespace: most with headroom, llm-finetune
    // near its quota, the vCluster tenant over it.
    let mut quotas = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for a in &apps {
        if seen.contains(&a.tenant) {
            continue;
        }
        seen.push(a.tenant);
        let used: i64 = apps
            .iter()
            .filter(|b| b.namespace == a.namespace)
            .map(|b| b.ask.gpu_resource() * i64::from(b.replicas))
            .sum();
        let hard = match a.tenant {
            VCLUSTER => (used * 3 / 4).max(1),
            "llm-finetune" => used + 1,
            _ => used * 3 / 2 + 4,
        };
        quotas.push((a.namespace.clone(), format!("requests.{}", labels::GPU_RESOURCE), hard));
        if a.tenant == "speech" {
            // MIG quotas: one per MIG resource the tenant asks for, with headroom.
            let mut asks: BTreeMap<&str, i64> = BTreeMap::new();
            for b in apps.iter().filter(|b| b.namespace == a.namespace) {
                if let Ask::Mig(r) = &b.ask {
                    *asks.entry(r).or_default() += i64::from(b.replicas);
                }
            }
            for (r, n) in asks {
                quotas.push((a.namespace.clone(), format!("requests.{r}"), n + 2));
            }
        }
        if a.tenant == "recsys" {
            // Claims of class gpu.nvidia.com, shares by capacity among them.
            let claims: i64 = apps
                .iter()
                .filter(|b| b.namespace == a.namespace && matches!(b.ask, Ask::Dra | Ask::Capacity { .. }))
                .map(|b| i64::from(b.replicas))
                .sum();
            quotas.push((
                a.namespace.clone(),
                format!("{}.deviceclass.resource.k8s.io/devices", labels::DRA_GPU_CLASS),
                claims * 3 / 2 + 4,
            ));
        }
    }
    // A tenant with several namespaces has a quota in each: the tenant's quota is their sum.
    for (ns, tenant) in &namespaces {
        if !quotas.iter().any(|(n, _, _)| n == ns) && apps.iter().any(|a| a.namespace == *ns && a.tenant == tenant) {
            let used: i64 =
                apps.iter().filter(|b| b.namespace == *ns).map(|b| b.ask.gpu_resource() * i64::from(b.replicas)).sum();
            if used > 0 {
                quotas.push((ns.clone(), format!("requests.{}", labels::GPU_RESOURCE), used + 2));
            }
        }
    }
    Plan { namespaces, apps, quotas, dra_exclude: dra::excluded(nodes) }
}

/// The apps on shared GPUs, from the replicas per (strategy, resource): time-slicing jobs
/// (one replica) and a debug deployment (two), an MPS inference service, and notebooks on
/// the renamed resource; each selects its nodes by sharing strategy, and the scheduler
/// places it by the replicas the nodes advertise.
fn shared_apps(shared: &BTreeMap<(&'static str, &'static str), u64>) -> Vec<App> {
    let of = |strategy: &str, resource: &str| shared.get(&(strategy, resource)).copied().unwrap_or(0);
    let pods = |replicas: u64, share: f64| (replicas as f64 * share).round() as u32;
    let torch = "nvcr.io/nvidia/pytorch:25.01-py3";
    let app = |tenant: &'static str, name: &str, kind, strategy: &'static str, resource, count, replicas| App {
        tenant,
        namespace: ns_of(tenant),
        name: name.to_string(),
        kind,
        ask: Ask::Replicas { resource, count },
        replicas,
        image: torch,
        pdb: None,
        node_selector: vec![(labels::GPU_SHARING_STRATEGY, strategy)],
    };
    let (ts, mps) = ("time-slicing", "mps");
    let (gpu, renamed) = (labels::GPU_RESOURCE, labels::GPU_SHARED_RESOURCE);
    let ts_gpu = of(ts, gpu);
    vec![
        app("eval", "eval-ts", Kind::Job, ts, gpu, 1, pods(ts_gpu, 0.3)),
        App {
            namespace: "llm-finetune-dev".into(),
            ..app("llm-finetune", "ft-debug-ts", Kind::Deployment, ts, gpu, 2, pods(ts_gpu, 0.22))
        },
        App {
            pdb: Some((Some(1), None)),
            image: "nvcr.io/nvidia/tritonserver:25.01-py3",
            ..app("inference-prod", "embed-mps", Kind::Deployment, mps, gpu, 1, pods(of(mps, gpu), 0.75))
        },
        App {
            image: "jupyter/pytorch-notebook:2025",
            ..app(VCLUSTER, "notebook-shared", Kind::Bare, ts, renamed, 1, pods(of(ts, renamed), 0.6))
        },
    ]
}

/// The resources block of a GPU container.
fn resources(ask: &Ask) -> Value {
    let mut limits = serde_json::Map::new();
    match ask {
        Ask::Gpus(g) => {
            limits.insert(labels::GPU_RESOURCE.into(), json!(g.to_string()));
        }
        Ask::Replicas { resource, count } => {
            limits.insert(resource.to_string(), json!(count.to_string()));
        }
        Ask::Mig(r) => {
            limits.insert(r.clone(), json!("1"));
        }
        Ask::Dra | Ask::Partition { .. } | Ask::Capacity { .. } => {}
    }
    let mut requests = limits.clone();
    requests.insert("cpu".into(), json!("2"));
    requests.insert("memory".into(), json!("8Gi"));
    let mut out = json!({ "limits": limits, "requests": requests });
    if ask.claims() {
        out["claims"] = json!([{ "name": "gpu" }]);
    }
    out
}

/// A pod template (metadata + spec) of an app.
pub fn pod_template(a: &App, extra_labels: &[(&str, String)], empty_dir: bool) -> Value {
    let mut labels_ = serde_json::Map::new();
    labels_.insert("app".into(), json!(a.name));
    labels_.insert(WORKLOAD_LABEL.into(), json!("true"));
    for (k, v) in extra_labels {
        labels_.insert(k.to_string(), json!(v));
    }
    let mut container = json!({
        "name": "main", "image": a.image, "command": ["sleep", "infinity"],
        "resources": resources(&a.ask),
    });
    let mut spec = json!({
        "containers": [],
        "terminationGracePeriodSeconds": 5,
        "restartPolicy": if a.kind == Kind::Job { "Never" } else { "Always" },
        "tolerations": [{ "key": labels::GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule" }],
    });
    if empty_dir {
        spec["volumes"] = json!([{ "name": "scratch", "emptyDir": { "sizeLimit": "50Gi" } }]);
        container["volumeMounts"] = json!([{ "name": "scratch", "mountPath": "/scratch" }]);
    }
    spec["containers"] = json!([container]);
    if !a.node_selector.is_empty() {
        let sel: serde_json::Map<String, Value> =
            a.node_selector.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
        spec["nodeSelector"] = Value::Object(sel);
    }
    json!({ "metadata": { "labels": labels_ }, "spec": spec })
}

/// One object to create: its API and its body.
#[derive(Clone, Debug)]
pub struct Obj {
    pub gvk: (&'static str, &'static str, &'static str, &'static str),
    pub namespace: Option<String>,
    pub body: Value,
}

const NS: (&str, &str, &str, &str) = ("", "v1", "Namespace", "namespaces");
/// The Argo CD application (tracking-id annotation) that owns the first quota...
const GITOPS_ARGO: (&str, &str) = (crate::model::gitops::ARGO_TRACKING_ID, "gpu-quotas");
/// ...and the Flux Kustomization (name and namespace labels) that owns the second.
const GITOPS_FLUX: (&str, &str, &str, &str) =
    (crate::model::gitops::FLUX_KS_NAME, "tenant-quotas", crate::model::gitops::FLUX_KS_NAMESPACE, "flux-system");
const POD: (&str, &str, &str, &str) = ("", "v1", "Pod", "pods");
const QUOTA: (&str, &str, &str, &str) = ("", "v1", "ResourceQuota", "resourcequotas");
const DEPLOY: (&str, &str, &str, &str) = ("apps", "v1", "Deployment", "deployments");
const STS: (&str, &str, &str, &str) = ("apps", "v1", "StatefulSet", "statefulsets");
const JOB: (&str, &str, &str, &str) = ("batch", "v1", "Job", "jobs");
const PDB: (&str, &str, &str, &str) = ("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets");
const NETPOL: (&str, &str, &str, &str) = ("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies");
const CLAIM: (&str, &str, &str, &str) = ("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims");

fn obj(gvk: (&'static str, &'static str, &'static str, &'static str), ns: Option<&str>, mut body: Value) -> Obj {
    let api_version = if gvk.0.is_empty() { gvk.1.to_string() } else { format!("{}/{}", gvk.0, gvk.1) };
    body["apiVersion"] = json!(api_version);
    body["kind"] = json!(gvk.2);
    if let Some(n) = ns {
        body["metadata"]["namespace"] = json!(n);
    }
    Obj { gvk, namespace: ns.map(String::from), body }
}

/// NetworkPolicies as tenants set them up, by namespace: every third a default deny in and
/// out, the next a default deny in with its own namespace let in, the third none (the
/// isolation audit's three answers).
fn netpols(plan: &Plan) -> Vec<Obj> {
    let mut out = Vec::new();
    for (i, (ns, _)) in plan.namespaces.iter().enumerate() {
        let spec = match i % 3 {
            0 => json!({ "podSelector": {}, "policyTypes": ["Ingress", "Egress"] }),
            1 => {
                json!({ "podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{ "from": [{ "podSelector": {} }] }] })
            }
            _ => continue,
        };
        out.push(obj(NETPOL, Some(ns), json!({ "metadata": { "name": "default-deny" }, "spec": spec })));
    }
    out
}

/// All objects of a plan, in creation waves: namespaces; then claims, controllers, PDBs and
/// pods; then the quotas (after the pods, so one tenant can be over its quota).
pub fn objects(plan: &Plan, seed: u64) -> [Vec<Obj>; 3] {
    let mut rng = Rng::new(seed ^ 0x5eed_10ad);
    // Pod Security admission, which the API server enforces (crate::sim::pod_security_level).
    let ns_objs = plan
        .namespaces
        .iter()
        .enumerate()
        .map(|(i, (ns, tenant))| {
            let mut meta =
                json!({ "name": ns, "labels": { labels::DEFAULT_TENANT_LABEL: tenant, WORKLOAD_LABEL: "true" } });
            if let Some(level) = crate::sim::pod_security_level(i) {
                meta["labels"][crate::model::isolation::POD_SECURITY_ENFORCE] = json!(level);
            }
            obj(NS, None, json!({ "metadata": meta }))
        })
        .collect();
    let mut work = netpols(plan);
    if plan.apps.iter().any(|a| a.tenant == VCLUSTER) {
        let ns = ns_of(VCLUSTER);
        work.push(obj(
            STS,
            Some(&ns),
            json!({
                "metadata": { "name": VCLUSTER, "labels": { "app": labels::VCLUSTER_APP, "release": VCLUSTER } },
                "spec": { "replicas": 1, "serviceName": format!("{VCLUSTER}-headless"),
                    "selector": { "matchLabels": { "app": labels::VCLUSTER_APP, "release": VCLUSTER } },
                    "template": { "metadata": { "labels": { "app": labels::VCLUSTER_APP, "release": VCLUSTER } },
                        "spec": { "containers": [{ "name": "syncer", "image": "ghcr.io/loft-sh/vcluster-pro:0.26.0",
                            "resources": { "requests": { "cpu": "200m", "memory": "256Mi" } } }] } } },
            }),
        ));
    }
    let users = ["alice", "bob", "chen", "dana", "eli", "fatima", "gus", "hana", "ivan", "jo"];
    for a in &plan.apps {
        let ns = a.namespace.as_str();
        let selector = json!({ "matchLabels": { "app": a.name } });
        match a.kind {
            Kind::Deployment => work.push(obj(
                DEPLOY,
                Some(ns),
                json!({
                    "metadata": { "name": a.name, "labels": { "app": a.name } },
                    "spec": { "replicas": a.replicas, "selector": selector, "template": pod_template(a, &[], false) },
                }),
            )),
            Kind::Job => work.push(obj(
                JOB,
                Some(ns),
                json!({
                    "metadata": { "name": a.name, "labels": { "app": a.name } },
                    "spec": { "parallelism": a.replicas, "completions": a.replicas, "backoffLimit": 3,
                        "template": pod_template(a, &[], false) },
                }),
            )),
            Kind::Bare => {
                for i in 0..a.replicas {
                    let mut t = if a.tenant == VCLUSTER {
                        let vname = format!("{}-{}{}", a.name, users[i as usize % users.len()], rng.hex(3));
                        let mut t = pod_template(
                            a,
                            &[
                                (labels::VCLUSTER_MANAGED_BY, VCLUSTER.to_string()),
                                ("vcluster.loft.sh/namespace", "default".to_string()),
                            ],
                            i == 0,
                        );
                        t["metadata"]["name"] = json!(format!("{vname}-x-default-x-{VCLUSTER}"));
                        t["metadata"]["annotations"] = json!({ "vcluster.loft.sh/object-name": vname,
                            "vcluster.loft.sh/object-namespace": "default" });
                        t
                    } else {
                        let mut t = pod_template(a, &[], false);
                        t["metadata"]["name"] = json!(format!("{}-{i}", a.name));
                        t
                    };
                    if let Some((claim, body)) = dra::claim(a, i, &plan.dra_exclude) {
                        work.push(obj(CLAIM, Some(ns), body));
                        t["spec"]["resourceClaims"] = json!([{ "name": "gpu", "resourceClaimName": claim }]);
                    }
                    work.push(obj(POD, Some(ns), t));
                }
            }
        }
        if let Some((max_u, min_a)) = a.pdb {
            let mut spec = json!({ "selector": selector });
            if let Some(m) = max_u {
                spec["maxUnavailable"] = json!(m);
            }
            if let Some(m) = min_a {
                spec["minAvailable"] = json!(m);
            }
            work.push(obj(PDB, Some(ns), json!({ "metadata": { "name": format!("{}-pdb", a.name) }, "spec": spec })));
        }
    }
    let mut by_ns: BTreeMap<&str, serde_json::Map<String, Value>> = BTreeMap::new();
    for (ns, res, hard) in &plan.quotas {
        by_ns.entry(ns).or_default().insert(res.clone(), json!(hard.to_string()));
    }
    // Factories keep quotas in Git: the first namespace's quota is an Argo CD application's
    // (annotation tracking), the second a Flux Kustomization's; the rest are nobody's.
    let quotas = by_ns
        .into_iter()
        .enumerate()
        .map(|(i, (ns, hard))| {
            let mut meta = json!({ "name": "gpu-quota" });
            match i {
                0 => {
                    meta["annotations"] =
                        json!({ GITOPS_ARGO.0: format!("{}:/ResourceQuota:{ns}/gpu-quota", GITOPS_ARGO.1) })
                }
                1 => meta["labels"] = json!({ GITOPS_FLUX.0: GITOPS_FLUX.1, GITOPS_FLUX.2: GITOPS_FLUX.3 }),
                _ => {}
            }
            obj(QUOTA, Some(ns), json!({ "metadata": meta, "spec": { "hard": hard } }))
        })
        .collect();
    [ns_objs, work, quotas]
}

fn api_for(client: &kube::Client, o: &Obj) -> kube::Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(o.gvk.0, o.gvk.1, o.gvk.2);
    let ar = ApiResource::from_gvk_with_plural(&gvk, o.gvk.3);
    match &o.namespace {
        Some(ns) => kube::Api::namespaced_with(client.clone(), ns, &ar),
        None => kube::Api::all_with(client.clone(), &ar),
    }
}

/// Creates one object; an existing one is left as it is. Retries while the namespace's
/// `default` ServiceAccount does not exist yet, and on throttling or server errors.
async fn create_one(client: &kube::Client, o: &Obj) -> Result<(), String> {
    let api = api_for(client, o);
    let name = o.body["metadata"]["name"].as_str().unwrap_or("?").to_string();
    let what = format!("{} {}/{}", o.gvk.2, o.namespace.as_deref().unwrap_or(""), name);
    let dynobj: DynamicObject = serde_json::from_value(o.body.clone()).map_err(|e| format!("{what}: {e}"))?;
    let mut delay = Duration::from_millis(200);
    for attempt in 0.. {
        match api.create(&PostParams::default(), &dynobj).await {
            Ok(_) => return Ok(()),
            Err(e) if is_status(&e, 409) => {
                // Exists: quotas are updated to the plan, other objects are left alone.
                if o.gvk == QUOTA {
                    let patch = json!({ "spec": o.body["spec"] });
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map_err(|e| format!("updating {what}: {}", describe(&e)))?;
                }
                return Ok(());
            }
            Err(e) => {
                let msg = describe(&e);
                let retry = msg.contains("serviceaccount")
                    || msg.contains("being terminated")
                    || msg.contains("service account")
                    || is_status(&e, 429)
                    || matches!(&e, kube::Error::Api(s) if s.code >= 500)
                    || !matches!(&e, kube::Error::Api(_));
                if !retry || attempt >= 40 {
                    return Err(format!("creating {what}: {msg}"));
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(3));
            }
        }
    }
    Ok(())
}

/// Creates the plan's objects wave by wave, 32 requests in flight.
pub async fn create(client: &kube::Client, plan: &Plan, seed: u64) -> Result<(), String> {
    for wave in objects(plan, seed) {
        // Pods with DRA claims go one at a time, after the rest: the kube-scheduler of
        // Kubernetes 1.34.3 (the test control plane's) can allocate one device to two claims
        // when it schedules many such pods at once (kubernetes#136269, fixed in later patch
        // releases), and a cluster does not normally start twenty claims in the same instant.
        let (claimed, rest): (Vec<&Obj>, Vec<&Obj>) =
            wave.iter().partition(|o| o.gvk == POD && o.body["spec"]["resourceClaims"].is_array());
        let mut results: Vec<Result<(), String>> =
            futures::stream::iter(rest).map(|o| create_one(client, o)).buffer_unordered(32).collect().await;
        for o in claimed {
            results.push(create_one(client, o).await);
            tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        }
        let errors: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
        if let Some(first) = errors.first() {
            for e in errors.iter().skip(1).take(4) {
                eprintln!("fabrik sim: workload: {e}");
            }
            return Err(format!("{} of {} workload objects failed; first: {first}", errors.len(), wave.len()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
