//! The independent cross-check (issue 12): every number `fabrik snapshot` prints equals
//! what a second client computes from the raw API at the same moment.
//!
//! One real control plane for the file (kube-apiserver, etcd, controller-manager,
//! scheduler; tests/controlplane) with `fabrik sim --workload` as the nodes: device-plugin
//! nodes, a label-announced MIG node, DRA nodes (one with MIG), several namespaces per
//! tenant, a vCluster tenant, Jobs that finish, ResourceQuotas on `requests.nvidia.com/gpu`,
//! on MIG resources and on a DRA device class, a Kueue ClusterQueue (CRD only, its usage
//! written as Kueue would). The truth is computed here from
//! `kubectl get -o json` alone (never from fabrik's feed or model code); fabrik is the real
//! binary, `fabrik snapshot --view V --format json` against the same API server.
//!
//! Bracketing: the truth is computed before and after each snapshot; only a snapshot whose
//! truth did not move in between is compared (churn is retried, never a false alarm).
//!
//! Every key of every view's JSON rows is in [`COVERAGE`] with how it is checked; a key
//! that is not, or a covered key that is gone, fails the test. Without node agents the
//! telemetry keys must be `null` (unknown), never 0.
//!
//! There is no skip: without Go or the control plane this test fails and says why.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

#[path = "crosscheck_e2e/allocated.rs"]
mod allocated;
#[path = "crosscheck_e2e/bundle.rs"]
mod bundle;
mod common;
#[path = "crosscheck_e2e/describe.rs"]
mod describe;
#[path = "crosscheck_e2e/dra.rs"]
mod dra;
#[path = "crosscheck_e2e/isolation.rs"]
mod isolation;
#[path = "crosscheck_e2e/logs.rs"]
mod logs;
#[path = "crosscheck_e2e/pending.rs"]
mod pending;
use common::{BIN, control_plane, gitops_owner, kubectl};

const NODES: &str = "16";

/// How each key of each view's rows is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    /// Equal to the value computed from the API.
    Exact,
    /// No node agent runs here: must be null (or 0 for a count of measured devices).
    Unknown,
    /// Text, not a number (names, states, labels); listed so that every key is accounted for.
    Text,
}
use How::*;

/// Every key of every view, and how it is checked. The views' rows must have exactly these.
/// (key, how it is checked, against what).
type Keys = &'static [(&'static str, How, &'static str)];

const COVERAGE: &[(&str, Keys)] = &[
    (
        "fleet",
        &[
            ("name", Exact, "node name"),
            ("status", Text, "Ready/NotReady, Cordoned: from ready and cordoned, both checked"),
            ("ready", Exact, "the Ready condition"),
            ("cordoned", Exact, "spec.unschedulable"),
            ("managed_by", Exact, GITOPS_HOW),
            (
                "machine",
                Exact,
                "no Cluster API CRDs on this control plane: null; tests/factory_e2e.rs compares it with kubectl",
            ),
            (
                "host",
                Exact,
                "no Metal3 CRDs on this control plane: null; tests/factory_e2e.rs compares it with kubectl",
            ),
            ("model", Text, "GPU model from the product label or the slice"),
            ("gpus", Exact, "gpu.count label, or the GPUs of the node's ResourceSlice"),
            (
                "alloc_gpus",
                Exact,
                "used: GPUs held by pods bound and not finished (nvidia.com/gpu, DRA devices); on a label-announced MIG node \
                 (instance unknown) at least one GPU when any instance is held, at most one per held instance; on a \
                 shared node the fewest GPUs that hold the replicas (held / replicas, rounded up); total: gpus",
            ),
            (
                "alloc_gpus_lower_bound",
                Exact,
                "true exactly on the nodes whose pods hold MIG instances or shared replicas the API does not place",
            ),
            (
                "mig_alloc",
                Exact,
                "MIG instances held by pods bound and not finished / the node's MIG capacity (or slice devices)",
            ),
            ("mig_held_instance_unknown", Exact, "held instances the API does not place (label-announced MIG nodes)"),
            ("util_pct", Unknown, "no node agent"),
            ("util_measured_gpus", Unknown, "no node agent: 0"),
            ("mem_used_pct", Unknown, "no node agent"),
            ("power_w", Unknown, "no node agent"),
            ("telemetry_gpus", Unknown, "no node agent: 0"),
            ("mig", Exact, "nvidia.com/mig.config and .state labels; null when MIG is off"),
            (
                "sharing",
                Exact,
                "time-slicing / MPS: gpu.replicas > 1 and gpu.sharing-strategy labels, the device-plugin.config \
                 label, renamed when nvidia.com/gpu.shared is advertised; gpus: gpu.count; shares: the advertised \
                 capacity; shares_held: replicas held by pods bound and not finished; all of them unplaced (no agent); null when \
                 not shared",
            ),
            ("idle_allocated", Unknown, "idle needs utilisation: unknown without an agent"),
            ("pods", Exact, "unfinished GPU pods bound to the node"),
            ("alerts", Text, "alert labels"),
            ("created_ms", Exact, "creationTimestamp"),
            ("age_s", Exact, "generated_at_ms - created_ms, with generated_at_ms inside the bracket"),
        ],
    ),
    (
        "gpus",
        &[
            ("node", Exact, "row key"),
            ("gpu", Exact, "row key: index (label gpu-<i>, slice device gpu-<i>)"),
            ("uuid", Exact, "DRA: the slice's uuid attribute; label-announced GPUs have none on the API (node/gpu-i)"),
            ("model", Text, "GPU model"),
            (
                "mode",
                Exact,
                "mig when the GPU is MIG-enabled (slice parentUUID, or mig.config on a label node); the node's \
                 gpu.sharing-strategy when it shares its GPUs; dynamic-mig when its devices consume shared counters; \
                 capacity-shared with allowMultipleAllocations",
            ),
            (
                "sharing",
                Exact,
                "shared nodes: strategy and replicas from the labels, none known held on this GPU (the API does not \
                 place replicas), all the node's held replicas unplaced, idle shares unknown (no agent samples \
                 processes); null otherwise",
            ),
            (
                "dra",
                Exact,
                "DRA alpha, from slices, claims and DeviceTaintRules: partitionable when a device of the GPU consumes \
                 shared counters, per MIG profile the unheld placements whose counters still fit / offered, \
                 whole_fits; the slice's taints and the rules' (driver/pool/device selectors); a device with \
                 allowMultipleAllocations: capacity, each claim's consumedCapacity, what is left; null otherwise",
            ),
            ("util_pct", Unknown, "no node agent"),
            ("telemetry_stale", Unknown, "never sampled: not stale, unknown (false)"),
            ("mem_used_bytes", Unknown, "no node agent"),
            (
                "mem_total_bytes",
                Exact,
                "gpu.memory label (MiB) or the slice's memory capacity; a DRA GPU with MIG on lists only its \
                 instances, so its whole memory is the catalog's (not on the API)",
            ),
            ("power_w", Unknown, "no node agent"),
            ("temp_c", Unknown, "no node agent"),
            ("tenant", Exact, "DRA: tenant of the pod holding the device; device plugin: unknown (null)"),
            ("pods", Exact, "DRA: pods whose claim got this GPU; device plugin: the API does not say which GPU ([])"),
            (
                "mig_alloc",
                Exact,
                "DRA: instances of this GPU held / listed; label node: per node, the GPU rows' used plus the \
                 fleet row's mig_held_instance_unknown equal the instances held, totals equal the MIG capacity",
            ),
            ("idle_for_s", Unknown, "no node agent"),
            ("fits", Text, "what still fits, from the layout"),
            ("health", Text, "no data without an agent"),
            ("xid", Unknown, "XIDs come from node agents: null"),
            ("ecc_uncorrected", Unknown, "ECC counts come from node agents: 0"),
            (
                "instances",
                Exact,
                "profiles per node equal the MIG capacity (label) or the slice's mig devices; DRA instances by uuid: \
                 memory capacity and holder; label instances' memory is the catalog's (not on the API)",
            ),
        ],
    ),
    (
        "tenants",
        &[
            ("tenant", Exact, "row key: the namespaces' fabrik.io/tenant label"),
            ("source", Text, "how the tenant was recognised"),
            ("namespaces", Exact, "namespaces with that label"),
            ("pods", Exact, "unfinished pods of its namespaces (GPU or not)"),
            ("pending_pods", Exact, "pods of its namespaces in phase Pending"),
            ("gpu_quota_hard", Exact, "sum of the tenant's requests.nvidia.com/gpu and GPU device-class quotas"),
            ("requested_gpus", Exact, "whole GPUs + DRA devices asked by unfinished pods"),
            (
                "allocated_gpus",
                Exact,
                "whole GPUs + DRA devices held by pods bound and not finished, not replicas of shared GPUs",
            ),
            (
                "allocated_shares",
                Exact,
                "replicas of shared GPUs (nodes with gpu.replicas > 1) held by pods bound and not finished",
            ),
            ("allocated_share_gpus", Exact, "those replicas in GPUs: per pod, replicas × 1000 / gpu.replicas, / 1000"),
            ("shares_idle", Unknown, "no node agent samples the processes on a shared GPU"),
            (
                "share_seconds",
                Exact,
                "per pod holding replicas on a shared node: replicas × (generated_at_ms - status.startTime) ms, summed, / 1000",
            ),
            ("allocated_mig", Exact, "MIG instances held by pods bound and not finished (bound or not)"),
            ("busy", Unknown, "no node agent"),
            ("busy_measured", Unknown, "no node agent: 0"),
            ("busy_pct", Unknown, "no node agent"),
            ("idle_allocated", Unknown, "no node agent"),
            ("status", Exact, "over quota exactly when requested_gpus > gpu_quota_hard"),
            (
                "waiting",
                Exact,
                "its Pending pods (every pod, as pending_pods) counted by their waiting.why, most first",
            ),
            (
                "refused_by_quota",
                Exact,
                "controllers in its namespaces whose latest FailedCreate/SuccessfulCreate Event is a FailedCreate \
                 with `exceeded quota:` (a refusal of the same second stands): object, quota, requested/used/limited",
            ),
            (
                "queued",
                Exact,
                "Kueue Workloads of its namespaces that wait or were deactivated: none here (no Workload CRD), so []; \
                 tests/kueue_e2e.rs compares them with a real Kueue's Workloads",
            ),
            (
                "isolation",
                Exact,
                "from the NetworkPolicies as Kubernetes documents them (policyTypes, else Ingress and Egress with \
                 egress rules; default deny = an all-pods policy of that type and no all-pods rule open to everyone): \
                 netpol text, namespaces without default-deny ingress, namespaces with default-deny egress; Pod \
                 Security from the namespaces' pod-security.kubernetes.io/enforce labels (the least strict level, \
                 or unset N/M, and the namespaces without one); nodes \
                 where another tenant's pods bound and not finished hold devices; GPUs (DRA allocations, MIG devices on their \
                 parent) another tenant holds part of, index and uuid from the gpus rows",
            ),
        ],
    ),
    (
        "quotas",
        &[
            ("tenant", Exact, "the namespace's tenant"),
            ("source", Exact, "row key: ResourceQuota namespace/name, or ClusterQueue queue/flavor"),
            ("resource", Exact, "row key"),
            ("hard", Exact, "status.hard (enforced; spec.hard until the controller copied it); Kueue nominalQuota"),
            ("used", Exact, "status.used; Kueue status.flavorsUsage"),
            (
                "requested",
                Exact,
                "what unfinished pods of that namespace ask for in exactly that resource (DRA claims of that \
                 class for <class>.deviceclass.resource.k8s.io/devices); null (not applicable) for a Kueue \
                 ClusterQueue, whose admission is Kueue's",
            ),
            ("use_pct", Exact, "used / hard, rounded"),
            (
                "physical_gpus_held",
                Exact,
                "nvidia.com/gpu(.shared) quotas: what the namespace's pods bound and not finished hold of that resource in physical \
                 GPUs (a replica of a GPU shared ×R is 1/R, R from gpu.replicas); null otherwise",
            ),
            ("version", Exact, "resourceVersion"),
            ("borrowing_limit", Exact, "Kueue borrowingLimit; null for a ResourceQuota"),
            ("lending_limit", Exact, "Kueue lendingLimit; null for a ResourceQuota or when unset"),
            ("managed_by", Exact, GITOPS_HOW),
        ],
    ),
    (
        "domains",
        &[
            ("domain", Exact, "row key: namespace/name of the ComputeDomain"),
            ("namespace", Exact, "metadata.namespace"),
            ("name", Exact, "metadata.name"),
            ("tenant", Exact, "the namespace's tenant"),
            ("status", Exact, "status.status (null before the controller writes it)"),
            ("num_nodes", Exact, "spec.numNodes"),
            ("nodes_ready", Exact, "status.nodes with status Ready"),
            ("nodes", Exact, "status.nodes: name, status, cliqueID"),
            ("claim_template", Exact, "spec.channel.resourceClaimTemplate.name"),
            (
                "pods",
                Exact,
                "pods of its namespace not Succeeded/Failed with a spec.resourceClaims[].resourceClaimTemplateName \
                 equal to its channel template: name, spec.nodeName, phase (Terminating once deletionTimestamp is set), \
                 waiting (the pods view's waiting text, from the Events)",
            ),
            (
                "workloads",
                Exact,
                "those pods' label app (else app.kubernetes.io/name, else job-name, else the pod's name), each once",
            ),
            ("created_ms", Exact, "creationTimestamp"),
            ("age_s", Exact, "generated_at_ms - created_ms"),
        ],
    ),
    (
        "pods",
        &[
            ("namespace", Exact, "row key"),
            ("name", Exact, "row key"),
            ("tenant", Exact, "the namespace's tenant"),
            ("node", Exact, "spec.nodeName"),
            ("phase", Exact, "status.phase, Terminating when deletionTimestamp is set"),
            ("request", Exact, "nvidia.com/gpu, nvidia.com/mig-* and the DRA claims' device counts and allocations"),
            (
                "devices",
                Exact,
                "DRA: the allocated devices' uuids; device plugin: the API does not say which device, so null or a \
                 text saying it is unknown; a MIG pod must say it holds an instance whose binding is unknown",
            ),
            ("util_pct", Unknown, "no node agent"),
            ("idle", Unknown, "no node agent"),
            ("owner", Exact, "the controller kind (ReplicaSet, Job, ...), - for bare pods"),
            ("owner_name", Exact, "the name of the ownerReference with controller: true, null for bare pods"),
            (
                "waiting",
                Exact,
                "Pending pods: bound → the reason (and `reason: message`) of the first container waiting for \
                 another reason than being created (ImagePullBackOff), else devices not prepared: <the driver's \
                 error> after a FailedPrepareDynamicResources Event for the pod, else starting; else the latest core/v1 Event FailedScheduling for the pod (after \
                 no Scheduled) read into its reasons before `preemption:`, what it lacks first; none → not \
                 scheduled yet. Running pods: the reason (and `reason: message`) of the first container \
                 waiting for another reason than being created (CrashLoopBackOff), as kubectl's STATUS. null \
                 otherwise",
            ),
            (
                "restarts",
                Exact,
                "kubectl's RESTARTS: while initialising (an init container neither exited 0 nor a started \
                 sidecar, no Initialized True) the init containers' restartCount up to it; else the sidecars' \
                 (restartPolicy Always) and every container's",
            ),
            ("last_restart_ms", Exact, "the latest lastState.terminated.finishedAt among the containers counted"),
            ("created_ms", Exact, "creationTimestamp"),
            ("age_s", Exact, "generated_at_ms - created_ms"),
        ],
    ),
    (
        "clusters",
        &[
            ("name", Text, "the context: `kubectl config current-context` (checked after the views)"),
            ("current", Exact, "the one context asked for is the one on screen"),
            ("state", Exact, "every watch listed and live"),
            ("synced", Exact, "every watch listed"),
            ("failed", Exact, "the context opened"),
            ("nodes", Exact, "Ready condition True / all nodes"),
            ("gpus", Exact, "the fleet rows' gpus, summed (each from the gpu.count label or the ResourceSlice)"),
            (
                "gpus_allocated",
                Exact,
                "the fleet rows' alloc_gpus.used, summed; with label-announced MIG nodes within the sum of their \
                 bounds (at least one GPU when any instance is held, at most one per held instance)",
            ),
            ("gpus_busy", Unknown, "no node agent"),
            ("gpus_measured", Unknown, "no node agent: 0"),
            ("idle_allocated", Unknown, "idle needs utilisation: unknown without an agent"),
            ("devices_measured", Unknown, "no node agent: 0"),
            ("mig", Exact, "the fleet rows' mig_alloc used and total, summed"),
            ("pods", Exact, "unfinished GPU pods"),
            ("pods_pending", Exact, "unfinished GPU pods in phase Pending"),
            (
                "alerts",
                Text,
                "fabrik's judgement (its alert rules), not an API figure; the events view lists each alert",
            ),
        ],
    ),
];

/// kubectl's RESTARTS for `oncall/crash-loops`, once fabrik's pods view says the same
/// between two kubectl readings that agree.
fn crash_loop_restarts(kubeconfig: &Path) -> u64 {
    let kubectl_says = || {
        let row = kubectl(kubeconfig, &["get", "pod", "crash-loops", "-n", "oncall", "--no-headers"]);
        row.split_whitespace().nth(3).and_then(|n| n.parse::<u64>().ok())
    };
    let mut seen = Vec::new();
    for _ in 0..8 {
        let before = kubectl_says();
        let doc: Value = serde_json::from_str(&fabrik(kubeconfig, &["snapshot", "--view", "pods", "--format", "json"]))
            .unwrap_or_else(|e| panic!("pods JSON: {e}"));
        let row = doc["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["namespace"] == "oncall" && r["name"] == "crash-loops");
        let ours = row.and_then(|r| r["restarts"].as_u64());
        let after = kubectl_says();
        if before.is_some() && before == after {
            assert_eq!(ours, before, "fabrik's RESTARTS of oncall/crash-loops against kubectl's");
            return before.unwrap_or_default();
        }
        seen.push((before, ours, after));
        std::thread::sleep(Duration::from_secs(1));
    }
    panic!("kubectl's RESTARTS of oncall/crash-loops never held still: {seen:?}");
}

fn fabrik(kubeconfig: &Path, args: &[&str]) -> String {
    let o = Command::new(BIN)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env("HOME", std::env::temp_dir().join("fabrik-crosscheck-home"))
        .output()
        .unwrap_or_else(|e| panic!("run fabrik: {e}"));
    assert!(o.status.success(), "fabrik {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// The raw objects, one kubectl call.
struct Api {
    nodes: Vec<Value>,
    pods: Vec<Value>,
    quotas: Vec<Value>,
    namespaces: Vec<Value>,
    slices: Vec<Value>,
    claims: Vec<Value>,
    cluster_queues: Vec<Value>,
    taint_rules: Vec<Value>,
    domains: Vec<Value>,
    events: Vec<Value>,
    netpols: Vec<Value>,
}

fn read_api(kubeconfig: &Path) -> Api {
    let text = kubectl(
        kubeconfig,
        &[
            "get",
            "nodes,pods,resourcequotas,namespaces,resourceslices,resourceclaims,clusterqueues,devicetaintrules,\
             computedomains,events,networkpolicies",
            "-A",
            "-o",
            "json",
        ],
    );
    let list: Value = serde_json::from_str(&text).expect("kubectl JSON");
    let mut api = Api {
        nodes: vec![],
        pods: vec![],
        quotas: vec![],
        namespaces: vec![],
        slices: vec![],
        claims: vec![],
        cluster_queues: vec![],
        taint_rules: vec![],
        domains: vec![],
        events: vec![],
        netpols: vec![],
    };
    for item in list["items"].as_array().into_iter().flatten() {
        let bucket = match item["kind"].as_str() {
            Some("Node") => &mut api.nodes,
            Some("Pod") => &mut api.pods,
            Some("ResourceQuota") => &mut api.quotas,
            Some("Namespace") => &mut api.namespaces,
            Some("ResourceSlice") => &mut api.slices,
            Some("ResourceClaim") => &mut api.claims,
            Some("ClusterQueue") => &mut api.cluster_queues,
            Some("DeviceTaintRule") => &mut api.taint_rules,
            Some("ComputeDomain") => &mut api.domains,
            Some("Event") => &mut api.events,
            Some("NetworkPolicy") => &mut api.netpols,
            _ => continue,
        };
        bucket.push(item.clone());
    }
    api
}

const GITOPS_HOW: &str = "from the object's metadata as Argo CD and Flux document their markers: the \
     argocd.argoproj.io/tracking-id annotation (app before the first ':', <ns>_<app> as ns/app), Flux's \
     kustomize/helm toolkit name+namespace labels, argocd.argoproj.io/instance, else app.kubernetes.io/instance \
     (Argo CD or Helm); reverts false under kustomize.toolkit.fluxcd.io/reconcile: disabled; null when unmarked";

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// A whole-number quantity as the API writes it ("8", "0").
fn count(v: &Value) -> i64 {
    v.as_str().and_then(|s| s.parse().ok()).or_else(|| v.as_i64()).unwrap_or(0)
}

fn ts_ms(v: &Value) -> u64 {
    // RFC 3339 with seconds, UTC ("2026-12-03T16:41:14Z"), as the API server writes it.
    let t = s(v);
    let p = |a: usize, b: usize| t.get(a..b).and_then(|x| x.parse::<i64>().ok()).unwrap_or(0);
    let (y, mo, d, h, mi, se) = (p(0, 4), p(5, 7), p(8, 10), p(11, 13), p(14, 16), p(17, 19));
    // Days from the civil date (Howard Hinnant's algorithm).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 86_400 + h * 3600 + mi * 60 + se) * 1000) as u64
}

/// A device in a ResourceSlice.
#[derive(Clone, Debug)]
struct Device {
    node: String,
    name: String,
    uuid: String,
    mig: bool,
    parent: String,
    profile: String,
    memory: i64,
}

/// What a pod asks for and holds, as the API says.
#[derive(Clone, Debug, Default)]
struct PodFacts {
    ns: String,
    name: String,
    tenant: Option<String>,
    node: Option<String>,
    phase: String,
    gpus: i64,
    /// `gpus` are of `nvidia.com/gpu.shared` (a renamed sharing config).
    renamed: bool,
    mig: BTreeMap<String, i64>,
    /// (claim, class, count, allocated device uuids).
    dra: Vec<(String, String, i64, Vec<String>)>,
    owner: String,
    /// The controller ownerReference's name.
    owner_name: Option<String>,
    created_ms: u64,
    /// `status.startTime`.
    started_ms: Option<u64>,
    /// kubectl's RESTARTS, and the last counted container's exit.
    restarts: (u64, Option<u64>),
}

impl PodFacts {
    fn finished(&self) -> bool {
        self.phase == "Succeeded" || self.phase == "Failed"
    }
    /// Holds its devices: bound to a node and not finished, as `kubectl describe node`
    /// counts a node's allocated resources (a pod stuck Pending there holds them too).
    fn holds(&self) -> bool {
        self.node.is_some() && !self.finished()
    }
    fn gpu_pod(&self) -> bool {
        self.gpus > 0 || !self.mig.is_empty() || !self.dra.is_empty()
    }
    fn dra_count(&self) -> i64 {
        self.dra.iter().map(|d| d.2).sum()
    }
    fn mig_count(&self) -> i64 {
        self.mig.values().sum()
    }
}

/// The expected rows of every view: view → row key → field → value.
type Rows = BTreeMap<String, BTreeMap<&'static str, Value>>;

#[derive(Debug, Default, PartialEq)]
struct Truth {
    views: BTreeMap<&'static str, Rows>,
    /// Label-announced MIG nodes: (whole GPUs held, MIG instances held, MIG GPUs).
    label_mig: BTreeMap<String, (i64, i64, i64)>,
    /// DRA's alpha shapes (partitions, capacity shares, taints).
    dra: dra::DraTruth,
    /// Per DRA node: the pods holding devices there and what they hold, to explain a difference.
    held_on: BTreeMap<String, String>,
    /// Shared nodes: (replicas per GPU, replicas held, replicas advertised).
    shared: BTreeMap<String, (i64, i64, i64)>,
    /// Per node: MIG instance profiles (sorted).
    profiles: BTreeMap<String, Vec<String>>,
    /// Pods bound but not started, claims not allocated yet, finished pods, quotas whose
    /// status lags: what "settled" waits for (not compared).
    starting: usize,
    unallocated_claims: usize,
    finished_pods: usize,
    quota_lag: usize,
}

fn truth(api: &Api) -> Truth {
    let mut t = Truth::default();
    let tenant_of_ns: BTreeMap<String, String> = api
        .namespaces
        .iter()
        .filter_map(|n| {
            let l = n["metadata"]["labels"]["fabrik.io/tenant"].as_str()?;
            Some((s(&n["metadata"]["name"]), l.to_string()))
        })
        .collect();

    t.dra = dra::truth(&api.slices, &api.claims, &api.taint_rules);
    let mut devices: BTreeMap<(String, String), Device> = BTreeMap::new();
    // GPUs are the NVIDIA GPU driver's devices; a ComputeDomain's channels are another's.
    for sl in api.slices.iter().filter(|sl| sl["spec"]["driver"] == "gpu.nvidia.com") {
        let node = s(&sl["spec"]["nodeName"]);
        let pool = s(&sl["spec"]["pool"]["name"]);
        for d in sl["spec"]["devices"].as_array().into_iter().flatten() {
            let a = |k: &str| s(&d["attributes"][k]["string"]);
            let dev = Device {
                node: node.clone(),
                name: s(&d["name"]),
                uuid: a("uuid"),
                mig: a("type") == "mig",
                parent: a("parentUUID"),
                profile: a("profile"),
                memory: count(&d["capacity"]["memory"]["value"]),
            };
            // A partition no claim holds is an offer (DRA partitionable devices), not a device.
            if !t.dra.offers.contains(&(pool.clone(), dev.name.clone())) {
                devices.insert((pool.clone(), dev.name.clone()), dev);
            }
        }
    }
    let by_uuid: BTreeMap<String, Device> = devices.values().map(|d| (d.uuid.clone(), d.clone())).collect();
    // claim (ns/name) → (class, count, allocated uuids)
    let mut claims: BTreeMap<String, (String, i64, Vec<String>)> = BTreeMap::new();
    let mut no_gpu_claims: BTreeSet<String> = BTreeSet::new();
    for c in &api.claims {
        let key = format!("{}/{}", s(&c["metadata"]["namespace"]), s(&c["metadata"]["name"]));
        let reqs = c["spec"]["devices"]["requests"].as_array().cloned().unwrap_or_default();
        let class = reqs.first().map(|r| s(&r["exactly"]["deviceClassName"])).unwrap_or_default();
        let want: i64 = reqs.iter().map(|r| r["exactly"]["count"].as_i64().unwrap_or(1)).sum();
        let got: Vec<String> = c["status"]["allocation"]["devices"]["results"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| devices.get(&(s(&r["pool"]), s(&r["device"]))).map(|d| d.uuid.clone()))
            .collect();
        let results = c["status"]["allocation"]["devices"]["results"].as_array().map_or(0, Vec::len);
        if results == 0 {
            t.unallocated_claims += 1;
        }
        // A claim on no GPU: allocated only other drivers' devices, or (not yet allocated) of
        // a ComputeDomain class. It is left out of the pod's claims, as no GPU request.
        let cd_class = class.starts_with("compute-domain-") && class.ends_with(".nvidia.com");
        if (results > 0 && got.is_empty()) || (results == 0 && cd_class) {
            no_gpu_claims.insert(key);
            continue;
        }
        let n = if got.is_empty() { want } else { got.len() as i64 };
        claims.insert(key, (class, n, got));
    }

    let mut pods: Vec<PodFacts> = Vec::new();
    // Every pod, GPU or not: a tenant's pod count is of all its pods.
    let mut all_pods: Vec<PodFacts> = Vec::new();
    // Bound pods the kubelet cannot start: their devices not prepared, an image it cannot pull.
    let stuck: BTreeSet<String> = pending::waiting(&api.pods, &api.events)
        .into_iter()
        .filter(|(_, w)| w["why"] != "starting" && w["why"] != "not scheduled yet")
        .map(|(k, _)| k)
        .collect();
    for p in &api.pods {
        let ns = s(&p["metadata"]["namespace"]);
        let mut f = PodFacts {
            name: s(&p["metadata"]["name"]),
            tenant: tenant_of_ns.get(&ns).cloned(),
            node: p["spec"]["nodeName"].as_str().map(str::to_string),
            phase: if p["metadata"]["deletionTimestamp"].is_string() {
                "Terminating".into()
            } else {
                p["status"]["phase"].as_str().unwrap_or("Pending").to_string()
            },
            owner: p["metadata"]["ownerReferences"][0]["kind"].as_str().unwrap_or("-").to_string(),
            owner_name: p["metadata"]["ownerReferences"]
                .as_array()
                .and_then(|r| r.iter().find(|o| o["controller"] == true))
                .and_then(|o| o["name"].as_str())
                .map(str::to_string),
            created_ms: ts_ms(&p["metadata"]["creationTimestamp"]),
            started_ms: p["status"]["startTime"].is_string().then(|| ts_ms(&p["status"]["startTime"])),
            restarts: pending::restarts(p),
            ns: ns.clone(),
            ..Default::default()
        };
        for c in p["spec"]["containers"].as_array().into_iter().flatten() {
            let res = &c["resources"];
            let lim = if res["limits"].is_object() { &res["limits"] } else { &res["requests"] };
            for (k, v) in lim.as_object().into_iter().flatten() {
                if k == "nvidia.com/gpu" || k == "nvidia.com/gpu.shared" {
                    f.gpus += count(v);
                    f.renamed |= k == "nvidia.com/gpu.shared";
                } else if k.starts_with("nvidia.com/mig-") {
                    *f.mig.entry(k.clone()).or_default() += count(v);
                }
            }
        }
        for rc in p["spec"]["resourceClaims"].as_array().into_iter().flatten() {
            let name = rc["resourceClaimName"].as_str().map(str::to_string).or_else(|| {
                let st = p["status"]["resourceClaimStatuses"].as_array()?;
                st.iter()
                    .find(|x| x["name"] == rc["name"])
                    .and_then(|x| x["resourceClaimName"].as_str())
                    .map(String::from)
            });
            let Some(name) = name else { continue };
            if no_gpu_claims.contains(&format!("{ns}/{name}")) {
                continue;
            }
            let (class, n, got) = claims.get(&format!("{ns}/{name}")).cloned().unwrap_or_default();
            f.dra.push((name, class, n, got));
        }
        // Bound and not started, unless the kubelet said it cannot start it (it retries, but
        // the sim's IMEX daemon that is NotReady stays so, and a registry that does not
        // resolve never will).
        if f.phase == "Pending" && f.node.is_some() && !stuck.contains(&format!("{ns}/{}", f.name)) {
            t.starting += 1;
        }
        if f.finished() && f.gpu_pod() {
            t.finished_pods += 1;
        }
        all_pods.push(f.clone());
        if f.gpu_pod() {
            pods.push(f);
        }
    }

    // ---------- pods ----------
    let waiting = pending::waiting(&api.pods, &api.events);
    let refusals = pending::refused_by_quota(&api.events);
    let mut rows = Rows::new();
    for p in &pods {
        let mig: serde_json::Map<String, Value> = p.mig.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        let dra: Vec<Value> = p
            .dra
            .iter()
            .map(
                |(c, class, n, got)| json!({ "claim": c, "device_class": class, "count": n, "allocated": got.first() }),
            )
            .collect();
        let mut r = BTreeMap::new();
        r.insert("tenant", json!(p.tenant));
        r.insert("node", json!(p.node));
        r.insert("phase", json!(p.phase));
        r.insert("request", json!({ "gpus": p.gpus, "mig": mig, "dra": dra }));
        r.insert("owner", json!(p.owner));
        r.insert("owner_name", json!(p.owner_name));
        r.insert("waiting", waiting.get(&format!("{}/{}", p.ns, p.name)).cloned().unwrap_or(Value::Null));
        r.insert("restarts", json!(p.restarts.0));
        r.insert("last_restart_ms", json!(p.restarts.1));
        r.insert("created_ms", json!(p.created_ms));
        if !p.dra.is_empty() {
            let got: Vec<&String> = p.dra.iter().flat_map(|d| &d.3).collect();
            let text = if got.is_empty() {
                "unallocated".to_string()
            } else {
                got.iter().map(|u| u.as_str()).collect::<Vec<_>>().join(",")
            };
            r.insert("devices", json!(text));
        }
        rows.insert(format!("{}/{}", p.ns, p.name), r);
    }
    t.views.insert("pods", rows);

    // ---------- fleet and gpus ----------
    let mut fleet = Rows::new();
    let mut gpus = Rows::new();
    for n in &api.nodes {
        let name = s(&n["metadata"]["name"]);
        let labels = &n["metadata"]["labels"];
        let cap = &n["status"]["capacity"];
        let ready = n["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        let on_node: Vec<&PodFacts> = pods.iter().filter(|p| p.node.as_deref() == Some(name.as_str())).collect();
        let holding: Vec<&&PodFacts> = on_node.iter().filter(|p| p.holds()).collect();
        let node_devices: Vec<&Device> = devices.values().filter(|d| d.node == name).collect();
        let dra = !node_devices.is_empty();
        let held_uuids: BTreeSet<String> =
            holding.iter().flat_map(|p| p.dra.iter().flat_map(|d| d.3.clone())).collect();
        let whole_held: i64 = holding.iter().map(|p| p.gpus).sum();
        let mig_held_label: i64 = holding.iter().map(|p| p.mig_count()).sum();
        let mut r = BTreeMap::new();
        r.insert("ready", json!(ready));
        r.insert("cordoned", json!(n["spec"]["unschedulable"].as_bool().unwrap_or(false)));
        r.insert("managed_by", gitops_owner(&n["metadata"]));
        r.insert("machine", Value::Null);
        r.insert("host", Value::Null);
        r.insert("sharing", Value::Null);
        let cfg = s(&labels["nvidia.com/mig.config"]);
        let state = labels["nvidia.com/mig.config.state"].as_str();
        r.insert(
            "mig",
            if cfg.is_empty() || cfg == "all-disabled" {
                Value::Null
            } else {
                json!({ "config": cfg, "state": state })
            },
        );
        r.insert("pods", json!(on_node.iter().filter(|p| !p.finished()).count()));
        r.insert("created_ms", json!(ts_ms(&n["metadata"]["creationTimestamp"])));
        let mut profiles: Vec<String>;
        if dra {
            // GPUs: type=gpu devices and the parents of mig devices.
            let mut gpu_index: BTreeMap<String, (i64, Option<&Device>)> = BTreeMap::new();
            for d in &node_devices {
                let idx = d.name.strip_prefix("gpu-").and_then(|x| x.split('-').next()).and_then(|x| x.parse().ok());
                let Some(idx) = idx else { continue };
                if d.mig {
                    gpu_index.entry(d.parent.clone()).or_insert((idx, None));
                } else {
                    gpu_index.insert(d.uuid.clone(), (idx, Some(d)));
                }
            }
            let count_gpus = gpu_index.len() as i64;
            // Whole GPUs held, plus GPUs with an instance held.
            let mut held_gpus: BTreeSet<String> = BTreeSet::new();
            let mut mig_used = 0i64;
            for u in &held_uuids {
                if let Some(d) = by_uuid.get(u).filter(|d| d.node == name) {
                    if d.mig {
                        held_gpus.insert(d.parent.clone());
                        mig_used += 1;
                    } else {
                        held_gpus.insert(d.uuid.clone());
                    }
                }
            }
            let mig_total = node_devices.iter().filter(|d| d.mig).count() as i64;
            let held_text: Vec<String> = holding
                .iter()
                .map(|p| {
                    let devs: Vec<String> = p
                        .dra
                        .iter()
                        .map(|d| {
                            let kind =
                                |u: &String| by_uuid.get(u).map_or("?", |dev| if dev.mig { "mig" } else { "gpu" });
                            format!(
                                "{}[{}]:{:?}",
                                d.0,
                                d.1,
                                d.3.iter().map(|u| format!("{u}({})", kind(u))).collect::<Vec<_>>()
                            )
                        })
                        .collect();
                    format!("{}/{} gpus={} {}", p.ns, p.name, p.gpus, devs.join(" "))
                })
                .collect();
            t.held_on.insert(name.clone(), held_text.join("; "));
            r.insert("gpus", json!(count_gpus));
            r.insert("alloc_gpus", json!({ "used": held_gpus.len() as i64 + whole_held, "total": count_gpus }));
            r.insert("mig_alloc", json!({ "used": mig_used, "total": mig_total }));
            r.insert("mig_held_instance_unknown", json!(0));
            r.insert("alloc_gpus_lower_bound", json!(false));
            profiles = node_devices.iter().filter(|d| d.mig).map(|d| d.profile.clone()).collect();
            for (uuid, (idx, dev)) in &gpu_index {
                let mut g = BTreeMap::new();
                let inst: Vec<&&Device> = node_devices.iter().filter(|d| d.mig && d.parent == *uuid).collect();
                let mut holders: Vec<String> = holding
                    .iter()
                    .filter(|p| p.dra.iter().any(|d| d.3.contains(uuid)))
                    .map(|p| format!("{}/{}", p.ns, p.name))
                    .collect();
                holders.sort();
                g.insert("uuid", json!(uuid));
                g.insert("sharing", Value::Null);
                let extras = t.dra.gpus.get(uuid).cloned().unwrap_or(Value::Null);
                let mode = match () {
                    _ if extras["partitionable"] == json!(true) => "dynamic-mig",
                    _ if extras["shared_by_capacity"].is_object() => "capacity-shared",
                    _ if inst.is_empty() => "full",
                    _ => "mig",
                };
                g.insert("mode", json!(mode));
                g.insert("dra", extras);
                g.insert("pods", json!(holders));
                // A device several claims share by capacity: its tenant when they are all one's
                // (which of several tenants fabrik names first is not the API's to say).
                let tenants: BTreeSet<Option<String>> = holding
                    .iter()
                    .filter(|p| p.dra.iter().any(|d| d.3.contains(uuid)))
                    .map(|p| p.tenant.clone())
                    .collect();
                if tenants.len() <= 1 {
                    g.insert("tenant", json!(tenants.into_iter().next().flatten()));
                }
                if let Some(d) = dev {
                    g.insert("mem_total_bytes", json!(d.memory));
                }
                if inst.is_empty() {
                    g.insert("mig_alloc", Value::Null);
                } else {
                    let used = inst.iter().filter(|d| held_uuids.contains(&d.uuid)).count();
                    g.insert("mig_alloc", json!({ "used": used, "total": inst.len() }));
                    let mut by: Vec<Value> = inst
                        .iter()
                        .map(|d| {
                            let holder = holding
                                .iter()
                                .find(|p| p.dra.iter().any(|c| c.3.contains(&d.uuid)))
                                .map(|p| format!("{}/{}", p.ns, p.name));
                            json!({ "uuid": d.uuid, "profile": d.profile, "mem_total_bytes": d.memory, "pod": holder })
                        })
                        .collect();
                    by.sort_by_key(|v| s(&v["uuid"]));
                    g.insert("instances", json!(by));
                }
                gpus.insert(format!("{name}/{idx}"), g);
            }
        } else if let Some(replicas) =
            labels["nvidia.com/gpu.replicas"].as_str().and_then(|r| r.parse::<i64>().ok()).filter(|r| *r > 1)
        {
            // The device plugin shares the GPUs: pods hold replicas, and which GPU a replica
            // is on is not on the API.
            let count_gpus = count(&labels["nvidia.com/gpu.count"]);
            let strategy = s(&labels["nvidia.com/gpu.sharing-strategy"]);
            let renamed = !cap["nvidia.com/gpu.shared"].is_null();
            let shares = if renamed { count(&cap["nvidia.com/gpu.shared"]) } else { count(&cap["nvidia.com/gpu"]) };
            let held = whole_held;
            profiles = Vec::new();
            r.insert("gpus", json!(count_gpus));
            r.insert(
                "alloc_gpus",
                json!({ "used": ((held + replicas - 1) / replicas).min(count_gpus), "total": count_gpus }),
            );
            r.insert("alloc_gpus_lower_bound", json!(held > 0));
            r.insert("mig_alloc", json!({ "used": 0, "total": 0 }));
            r.insert("mig_held_instance_unknown", json!(0));
            r.insert(
                "sharing",
                json!({ "strategy": strategy, "replicas": replicas, "renamed": renamed,
                    "config": labels["nvidia.com/device-plugin.config"], "gpus": count_gpus, "shares": shares,
                    "shares_held": held, "shares_placement_unknown": held }),
            );
            t.shared.insert(name.clone(), (replicas, held, shares));
            let mem = count(&labels["nvidia.com/gpu.memory"]) * 1024 * 1024;
            for i in 0..count_gpus {
                let mut g = BTreeMap::new();
                g.insert("mode", json!(strategy));
                g.insert("dra", Value::Null);
                g.insert("mem_total_bytes", json!(mem));
                g.insert("pods", json!([]));
                g.insert("tenant", Value::Null);
                g.insert(
                    "sharing",
                    json!({ "strategy": strategy, "replicas": replicas, "shares_held": 0,
                        "shares_placement_unknown_on_node": held, "shares_idle": null }),
                );
                gpus.insert(format!("{name}/{i}"), g);
            }
        } else {
            let count_gpus = count(&labels["nvidia.com/gpu.count"]);
            let mut mig_total = 0i64;
            profiles = Vec::new();
            for (k, v) in cap.as_object().into_iter().flatten() {
                if let Some(p) = k.strip_prefix("nvidia.com/mig-") {
                    mig_total += count(v);
                    profiles.extend(std::iter::repeat_n(p.to_string(), count(v).max(0) as usize));
                }
            }
            let whole = count(&cap["nvidia.com/gpu"]);
            let mig_gpus = if mig_total > 0 { count_gpus - whole } else { 0 };
            r.insert("gpus", json!(count_gpus));
            r.insert("mig_alloc", json!({ "used": mig_held_label, "total": mig_total }));
            r.insert("mig_held_instance_unknown", json!(mig_held_label));
            r.insert("alloc_gpus_lower_bound", json!(mig_held_label > 0));
            if mig_total > 0 {
                // Which GPU an instance is on is not on the API: bounds, checked apart.
                t.label_mig.insert(name.clone(), (whole_held, mig_held_label, mig_gpus));
            } else {
                r.insert("alloc_gpus", json!({ "used": whole_held, "total": count_gpus }));
            }
            let mem = count(&labels["nvidia.com/gpu.memory"]) * 1024 * 1024;
            for i in 0..count_gpus {
                let mut g = BTreeMap::new();
                g.insert("mode", json!(if i >= whole && mig_total > 0 { "mig" } else { "full" }));
                g.insert("sharing", Value::Null);
                g.insert("dra", Value::Null);
                g.insert("mem_total_bytes", json!(mem));
                // Which GPU a device-plugin pod got is not on the API.
                g.insert("pods", json!([]));
                g.insert("tenant", Value::Null);
                gpus.insert(format!("{name}/{i}"), g);
            }
        }
        profiles.sort();
        t.profiles.insert(name.clone(), profiles);
        fleet.insert(name, r);
    }
    t.views.insert("fleet", fleet);
    t.views.insert("gpus", gpus);

    // ---------- quotas ----------
    let mut quotas = Rows::new();
    let mut tenant_quota: BTreeMap<String, i64> = BTreeMap::new();
    for q in &api.quotas {
        let ns = s(&q["metadata"]["namespace"]);
        let qname = s(&q["metadata"]["name"]);
        for (res, hard) in q["spec"]["hard"].as_object().into_iter().flatten() {
            let gpu_key = res == "requests.nvidia.com/gpu"
                || res == "requests.nvidia.com/gpu.shared"
                || res.starts_with("requests.nvidia.com/mig-")
                || res.ends_with(".deviceclass.resource.k8s.io/devices");
            if !gpu_key {
                continue;
            }
            // Enforced: the status's hard (the spec's until the controller copied it).
            let enforced = &q["status"]["hard"][res];
            let hard = if enforced.is_null() { count(hard) } else { count(enforced) };
            let used = count(&q["status"]["used"][res]);
            let unfinished = pods.iter().filter(|p| p.ns == ns && !p.finished());
            let requested: i64 = if res == "requests.nvidia.com/gpu" || res == "requests.nvidia.com/gpu.shared" {
                let renamed = res.ends_with(".shared");
                unfinished.filter(|p| p.renamed == renamed).map(|p| p.gpus).sum()
            } else if let Some(m) = res.strip_prefix("requests.") {
                unfinished.map(|p| p.mig.get(m).copied().unwrap_or(0)).sum()
            } else {
                let class = res.trim_end_matches(".deviceclass.resource.k8s.io/devices");
                let mut seen = BTreeSet::new();
                unfinished.flat_map(|p| &p.dra).filter(|d| d.1 == class && seen.insert(d.0.clone())).map(|d| d.2).sum()
            };
            if q["status"]["used"][res].is_null() || used != requested {
                t.quota_lag += 1;
            }
            let tenant = tenant_of_ns.get(&ns).cloned();
            if let Some(tn) = &tenant
                && (res == "requests.nvidia.com/gpu" || res == "gpu.nvidia.com.deviceclass.resource.k8s.io/devices")
            {
                *tenant_quota.entry(tn.clone()).or_default() += hard;
            }
            let mut r = BTreeMap::new();
            r.insert("tenant", json!(tenant));
            r.insert("source", json!({ "kind": "ResourceQuota", "namespace": ns, "name": qname }));
            r.insert("resource", json!(res));
            r.insert("hard", json!(hard));
            r.insert("used", json!(used));
            r.insert("requested", json!(requested));
            r.insert("use_pct", if hard > 0 { json!((used * 200 + hard) / (hard * 2)) } else { Value::Null });
            // Physical GPUs behind the held units: a replica of a GPU shared ×R is 1/R.
            let physical = match res.as_str() {
                "requests.nvidia.com/gpu" | "requests.nvidia.com/gpu.shared" => {
                    let renamed = res.ends_with(".shared");
                    let milli: i64 = pods
                        .iter()
                        .filter(|p| p.ns == ns && p.holds() && p.renamed == renamed)
                        .map(|p| {
                            let r = p.node.as_ref().and_then(|n| t.shared.get(n)).map_or(1, |s| s.0);
                            p.gpus * 1000 / r
                        })
                        .sum();
                    json!(milli as f64 / 1000.0)
                }
                _ => Value::Null,
            };
            r.insert("physical_gpus_held", physical);
            r.insert("version", q["metadata"]["resourceVersion"].clone());
            r.insert("borrowing_limit", Value::Null);
            r.insert("lending_limit", Value::Null);
            r.insert("managed_by", gitops_owner(&q["metadata"]));
            quotas.insert(format!("{ns}/{qname}/{res}"), r);
        }
    }
    // Kueue ClusterQueues: nominal quota per flavor and GPU resource; the queue is its tenant.
    // What its workloads ask for is Kueue's to admit: requested is not applicable (null).
    let mut queue_tenants: BTreeMap<String, i64> = BTreeMap::new();
    for cq in &api.cluster_queues {
        let queue = s(&cq["metadata"]["name"]);
        for g in cq["spec"]["resourceGroups"].as_array().into_iter().flatten() {
            for f in g["flavors"].as_array().into_iter().flatten() {
                let flavor = s(&f["name"]);
                for r in f["resources"].as_array().into_iter().flatten() {
                    let res = s(&r["name"]);
                    if res != "nvidia.com/gpu" && !res.starts_with("nvidia.com/mig-") {
                        continue;
                    }
                    let hard = count(&r["nominalQuota"]);
                    let usage =
                        cq["status"]["flavorsUsage"].as_array().and_then(|u| u.iter().find(|x| x["name"] == flavor));
                    let used = usage
                        .and_then(|u| u["resources"].as_array()?.iter().find(|x| x["name"] == res.as_str()).cloned())
                        .map(|x| count(&x["total"]))
                        .unwrap_or(0);
                    if res == "nvidia.com/gpu" {
                        *queue_tenants.entry(queue.clone()).or_default() += hard;
                    }
                    let limit = |k: &str| if r[k].is_null() { Value::Null } else { json!(count(&r[k])) };
                    let mut row = BTreeMap::new();
                    row.insert("tenant", json!(queue));
                    row.insert("source", json!({ "kind": "ClusterQueue", "queue": queue, "flavor": flavor }));
                    row.insert("resource", json!(res));
                    row.insert("hard", json!(hard));
                    row.insert("used", json!(used));
                    row.insert("requested", Value::Null);
                    row.insert("use_pct", if hard > 0 { json!((used * 200 + hard) / (hard * 2)) } else { Value::Null });
                    row.insert("physical_gpus_held", Value::Null);
                    row.insert("version", cq["metadata"]["resourceVersion"].clone());
                    row.insert("borrowing_limit", limit("borrowingLimit"));
                    row.insert("lending_limit", limit("lendingLimit"));
                    row.insert("managed_by", gitops_owner(&cq["metadata"]));
                    quotas.insert(format!("{queue}/{flavor}/{res}"), row);
                }
            }
        }
    }
    t.views.insert("quotas", quotas);

    // ---------- tenants ----------
    // Where the API places each device-holding pod's devices: DRA allocations (a MIG
    // device on its parent GPU); the device plugin does not say.
    // Row key `node/index`; DRA GPUs carry their uuid.
    let gpu_at: BTreeMap<String, (String, Value)> = t.views["gpus"]
        .iter()
        .filter_map(|(k, r)| {
            let (node, index) = k.rsplit_once('/')?;
            Some((r.get("uuid")?.as_str()?.to_string(), (node.to_string(), json!(index.parse::<i64>().ok()?))))
        })
        .collect();
    let holders: Vec<(String, String, Vec<String>)> = pods
        .iter()
        .filter(|p| p.holds() && p.gpu_pod())
        .filter_map(|p| {
            let gpus = p
                .dra
                .iter()
                .flat_map(|d| &d.3)
                .filter_map(|u| by_uuid.get(u))
                .map(|d| if d.mig { d.parent.clone() } else { d.uuid.clone() })
                .collect();
            Some((p.tenant.clone()?, p.node.clone()?, gpus))
        })
        .collect();
    let isolation = isolation::Isolation::new(&api.namespaces, &api.netpols, holders, &gpu_at);
    let shared_replicas: BTreeMap<String, i64> = t.shared.iter().map(|(n, (r, _, _))| (n.clone(), *r)).collect();
    let mut tenants = Rows::new();
    let names: BTreeSet<String> = tenant_of_ns.values().cloned().collect();
    for tn in names {
        let mine: Vec<&PodFacts> = pods.iter().filter(|p| p.tenant.as_deref() == Some(tn.as_str())).collect();
        let isolation = &isolation;
        let unfinished: Vec<&&PodFacts> = mine.iter().filter(|p| !p.finished()).collect();
        // A DRA claim of a MIG device (by the device it got, else by its class) is an instance.
        let dra_mig = |p: &PodFacts| -> i64 {
            p.dra
                .iter()
                .filter(|d| match d.3.first() {
                    Some(u) => by_uuid.get(u).is_some_and(|dev| dev.mig),
                    None => d.1 == "mig.nvidia.com",
                })
                .map(|d| d.2)
                .sum()
        };
        let requested: i64 = unfinished.iter().map(|p| p.gpus + p.dra_count() - dra_mig(p)).sum();
        // On a shared node `nvidia.com/gpu` is a replica, not a GPU.
        let replicas_of = |p: &PodFacts| p.node.as_ref().and_then(|n| shared_replicas.get(n)).copied();
        // A DRA device shared by capacity: a share per claim on it, the GPU counted on its node.
        let by_capacity = |p: &PodFacts| -> Vec<(String, i64)> {
            let mut v: Vec<(String, i64)> = p
                .dra
                .iter()
                .filter_map(|d| t.dra.capacity_claims.get(&format!("{}/{}", p.ns, d.0)))
                .flatten()
                .cloned()
                .collect();
            v.sort();
            v.dedup_by(|a, b| a.0 == b.0);
            v
        };
        let allocated: i64 = mine
            .iter()
            .filter(|p| p.holds())
            .map(|p| {
                let dra = p.dra_count() - dra_mig(p) - by_capacity(p).len() as i64;
                if replicas_of(p).is_some() { dra } else { p.gpus + dra }
            })
            .sum();
        let held_shares: Vec<(i64, i64)> =
            mine.iter().filter(|p| p.holds()).filter_map(|p| Some((p.gpus, replicas_of(p)?))).collect();
        let capacity_shares: Vec<(String, i64)> =
            mine.iter().filter(|p| p.holds()).flat_map(|p| by_capacity(p)).collect();
        let allocated_shares: i64 = held_shares.iter().map(|(n, _)| n).sum::<i64>() + capacity_shares.len() as i64;
        let share_milli: i64 = held_shares.iter().map(|(n, r)| n * 1000 / r).sum::<i64>()
            + capacity_shares.iter().map(|(_, m)| m).sum::<i64>();
        let allocated_mig: i64 = mine.iter().filter(|p| p.holds()).map(|p| p.mig_count() + dra_mig(p)).sum();
        let quota = tenant_quota.get(&tn).copied();
        let requested_mig: i64 = unfinished.iter().map(|p| p.mig_count() + dra_mig(p)).sum();
        if requested + allocated + requested_mig + allocated_mig == 0 && quota.is_none() {
            continue;
        }
        let mut nss: Vec<String> = tenant_of_ns.iter().filter(|(_, t)| **t == tn).map(|(n, _)| n.clone()).collect();
        nss.sort();
        let mut r = BTreeMap::new();
        let every: Vec<&PodFacts> = all_pods.iter().filter(|p| p.tenant.as_deref() == Some(tn.as_str())).collect();
        r.insert("namespaces", json!(nss));
        r.insert("pods", json!(every.iter().filter(|p| !p.finished()).count()));
        r.insert("pending_pods", json!(every.iter().filter(|p| p.phase == "Pending").count()));
        // Its pending pods by why they wait, the most first.
        let mut by: BTreeMap<String, u64> = BTreeMap::new();
        for p in every.iter().filter(|p| p.phase == "Pending") {
            let why = waiting.get(&format!("{}/{}", p.ns, p.name)).map_or_else(|| "?".to_string(), |w| s(&w["why"]));
            *by.entry(why).or_default() += 1;
        }
        let mut by: Vec<(String, u64)> = by.into_iter().collect();
        by.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        r.insert("waiting", json!(by.iter().map(|(w, n)| json!({ "why": w, "pods": n })).collect::<Vec<_>>()));
        let mut refused: Vec<Value> = nss.iter().flat_map(|ns| refusals.get(ns).cloned().unwrap_or_default()).collect();
        refused.sort_by_key(|r| s(&r["object"]));
        r.insert("refused_by_quota", json!(refused));
        r.insert("queued", json!([]));
        r.insert("isolation", isolation.tenant(&tn, &nss));
        r.insert("gpu_quota_hard", json!(quota));
        r.insert("requested_gpus", json!(requested));
        r.insert("allocated_gpus", json!(allocated));
        r.insert("allocated_mig", json!(allocated_mig));
        r.insert("allocated_shares", json!(allocated_shares));
        r.insert("allocated_share_gpus", json!(share_milli as f64 / 1000.0));
        // (replicas, startTime) per holder: summed against the snapshot's generated_at_ms.
        let holders: Vec<(i64, u64)> = mine
            .iter()
            .filter(|p| p.holds() && replicas_of(p).is_some())
            .map(|p| (p.gpus, p.started_ms.unwrap_or(u64::MAX)))
            .collect();
        r.insert("share_seconds", json!(holders));
        r.insert("over_quota", json!(quota.is_some_and(|q| requested > q)));
        tenants.insert(tn, r);
    }
    for (queue, hard) in queue_tenants {
        let mut r = BTreeMap::new();
        r.insert("namespaces", json!([]));
        r.insert("allocated_share_gpus", json!(0.0));
        r.insert("share_seconds", json!([]));
        r.insert("waiting", json!([]));
        r.insert("refused_by_quota", json!([]));
        r.insert("queued", json!([]));
        r.insert("isolation", isolation.tenant(&queue, &[]));
        for k in ["pods", "pending_pods", "requested_gpus", "allocated_gpus", "allocated_mig", "allocated_shares"] {
            r.insert(k, json!(0));
        }
        r.insert("gpu_quota_hard", json!(hard));
        r.insert("over_quota", json!(false));
        tenants.insert(queue, r);
    }
    t.views.insert("tenants", tenants);
    t.views.insert("domains", dra::domain_rows(&api.domains, &api.pods, &tenant_of_ns, &waiting));
    t.views.insert("clusters", cluster_row(&t.views, &pods, &t.label_mig));
    t
}

/// The clusters view's one row (the context on screen, keyed `current`): the fleet's totals,
/// each summed from the per-node and per-pod figures computed above from the API.
/// On label-announced MIG nodes the API does not say which GPU an instance is on: those
/// nodes' allocated GPUs are bounds (see the fleet check), so the total is a range then,
/// under `gpus_allocated_range`.
fn cluster_row(
    views: &BTreeMap<&'static str, Rows>,
    pods: &[PodFacts],
    label_mig: &BTreeMap<String, (i64, i64, i64)>,
) -> Rows {
    let fleet = &views["fleet"];
    let sum = |f: &dyn Fn(&BTreeMap<&'static str, Value>) -> i64| -> i64 { fleet.values().map(f).sum() };
    let mut r = BTreeMap::new();
    r.insert("current", json!(true));
    r.insert("synced", json!(true));
    r.insert("failed", json!(false));
    r.insert("state", json!("live"));
    // A key a node's truth leaves out (no GPUs, no MIG) counts 0.
    let at = |n: &BTreeMap<&'static str, Value>, key: &str, sub: Option<&str>| -> i64 {
        let v = n.get(key).cloned().unwrap_or(Value::Null);
        let v = sub.map_or(v.clone(), |k| v.get(k).cloned().unwrap_or(Value::Null));
        if v.is_null() { 0 } else { count(&v) }
    };
    let ready = fleet.values().filter(|n| n.get("ready") == Some(&json!(true))).count();
    r.insert("nodes", json!({ "ready": ready, "total": fleet.len() }));
    r.insert("gpus", json!(sum(&|n| at(n, "gpus", None))));
    let exact = sum(&|n| at(n, "alloc_gpus", Some("used")));
    if label_mig.is_empty() {
        r.insert("gpus_allocated", json!(exact));
    } else {
        let lo: i64 = label_mig.values().map(|(whole, held, _)| whole + i64::from(*held > 0)).sum();
        let hi: i64 = label_mig.values().map(|(whole, held, mig_gpus)| whole + held.min(mig_gpus)).sum();
        r.insert("gpus_allocated_range", json!([exact + lo, exact + hi]));
    }
    r.insert(
        "mig",
        json!({ "used": sum(&|n| at(n, "mig_alloc", Some("used"))), "total": sum(&|n| at(n, "mig_alloc", Some("total"))) }),
    );
    let unfinished: Vec<&PodFacts> = pods.iter().filter(|p| !p.finished()).collect();
    r.insert("pods", json!(unfinished.len()));
    r.insert("pods_pending", json!(unfinished.iter().filter(|p| p.phase == "Pending").count()));
    Rows::from([("current".to_string(), r)])
}

/// fabrik's rows of a view, keyed as the truth keys them.
fn keyed(view: &str, doc: &Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for r in doc["rows"].as_array().into_iter().flatten() {
        let key = match view {
            "fleet" => s(&r["name"]),
            "gpus" => format!("{}/{}", s(&r["node"]), r["gpu"]),
            "tenants" => s(&r["tenant"]),
            "quotas" if r["source"]["kind"] == "ClusterQueue" => {
                format!("{}/{}/{}", s(&r["source"]["queue"]), s(&r["source"]["flavor"]), s(&r["resource"]))
            }
            "quotas" => format!("{}/{}/{}", s(&r["source"]["namespace"]), s(&r["source"]["name"]), s(&r["resource"])),
            "pods" => format!("{}/{}", s(&r["namespace"]), s(&r["name"])),
            "domains" => s(&r["domain"]),
            "clusters" if r["current"] == json!(true) => "current".to_string(),
            "clusters" => s(&r["name"]),
            _ => continue,
        };
        out.insert(key, r.clone());
    }
    out
}

/// Compares one view; returns the differences, one line each.
fn compare(view: &str, doc: &Value, t: &Truth, before_ms: u64, after_ms: u64) -> Vec<String> {
    let mut diffs = Vec::new();
    let got = keyed(view, doc);
    let want = &t.views[view];
    let gen_ms = doc["generated_at_ms"].as_u64().unwrap_or(0);
    if gen_ms < before_ms.saturating_sub(2000) || gen_ms > after_ms + 2000 {
        diffs.push(format!(
            "{view}: generated_at_ms {gen_ms} is not the snapshot's wall clock ({before_ms}..{after_ms})"
        ));
    }
    let got_keys: BTreeSet<&String> = got.keys().collect();
    let want_keys: BTreeSet<&String> = want.keys().collect();
    for k in want_keys.difference(&got_keys) {
        diffs.push(format!("{view}: row {k} is on the API but not in fabrik"));
    }
    for k in got_keys.difference(&want_keys) {
        diffs.push(format!("{view}: row {k} is in fabrik but not on the API"));
    }
    let coverage = COVERAGE.iter().find(|(v, _)| *v == view).map(|(_, c)| *c).unwrap_or(&[]);
    // A key said to be compared exactly must have an independent value on some row, or its
    // check could not fail.
    for (field, how, _) in coverage {
        // Compared otherwise: the fields a row is keyed by (a row missing or extra is a
        // difference), age_s against created_ms, a tenant's status as over_quota, a cluster's
        // allocated GPUs against a range.
        let derived = matches!(
            (view, *field),
            (_, "age_s" | "name" | "namespace" | "uuid")
                | ("gpus", "node" | "gpu")
                | ("tenants", "tenant" | "status")
                | ("domains", "domain")
                | ("clusters", "gpus_allocated")
        );
        if *how == Exact && !derived && !want.is_empty() && !want.values().any(|w| w.contains_key(*field)) {
            diffs.push(format!("{view}: key {field:?} is covered as Exact but the test computes no value for it"));
        }
    }
    for (key, row) in &got {
        // Every key accounted for, and no covered key missing.
        let keys: BTreeSet<&str> = row.as_object().map(|m| m.keys().map(String::as_str).collect()).unwrap_or_default();
        let covered: BTreeSet<&str> = coverage.iter().map(|c| c.0).collect();
        for k in keys.difference(&covered) {
            diffs.push(format!("{view}: key {k:?} is not in COVERAGE (say how it is checked)"));
        }
        for k in covered.difference(&keys) {
            diffs.push(format!("{view}: covered key {k:?} is missing from row {key}"));
        }
        for (field, how, _) in coverage {
            let v = &row[*field];
            if *how == Unknown {
                let ok = match *field {
                    "util_measured_gpus" | "telemetry_gpus" | "busy_measured" | "ecc_uncorrected" | "gpus_measured"
                    | "devices_measured" => v == &json!(0),
                    "telemetry_stale" => v == &json!(false),
                    _ => v.is_null(),
                };
                if !ok {
                    diffs.push(format!(
                        "{view} {key} {field}: {v} without any telemetry source (unknown must stay unknown)"
                    ));
                }
            }
        }
        if view == "gpus" {
            for i in row["instances"].as_array().into_iter().flatten() {
                for f in ["util_pct", "mem_used_bytes", "idle_for_s"] {
                    if !i[f].is_null() {
                        diffs.push(format!("gpus {key} instance {} {f}: {} without telemetry", i["uuid"], i[f]));
                    }
                }
            }
        }
        if matches!(view, "fleet" | "pods" | "domains") {
            let created = row["created_ms"].as_u64().unwrap_or(0);
            if row["age_s"].as_u64() != Some(gen_ms.saturating_sub(created) / 1000) {
                diffs.push(format!("{view} {key} age_s {} vs generated_at_ms - created_ms", row["age_s"]));
            }
        }
        let Some(w) = want.get(key) else { continue };
        for (field, expected) in w {
            let actual = match (*field, view) {
                ("over_quota", _) => json!(row["status"] == "over quota"),
                // A range: the value when it lies inside, else what fabrik said.
                ("gpus_allocated_range", "clusters") => {
                    let v = row["gpus_allocated"].as_i64().unwrap_or(-1);
                    let (lo, hi) = (expected[0].as_i64().unwrap_or(0), expected[1].as_i64().unwrap_or(0));
                    if (lo..=hi).contains(&v) { expected.clone() } else { json!(v) }
                }
                ("instances", _) => {
                    let mut v: Vec<Value> = row["instances"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|i| json!({ "uuid": i["uuid"], "profile": i["profile"], "mem_total_bytes": i["mem_total_bytes"], "pod": i["pod"] }))
                        .collect();
                    v.sort_by_key(|x| s(&x["uuid"]));
                    json!(v)
                }
                ("pods", "gpus") => {
                    let mut v: Vec<Value> = row["pods"].as_array().cloned().unwrap_or_default();
                    v.sort_by_key(s);
                    json!(v)
                }
                ("request", _) => {
                    let mut r = row["request"].clone();
                    if let Some(d) = r["dra"].as_array_mut() {
                        d.sort_by_key(|x| s(&x["claim"]));
                    }
                    r
                }
                _ => row[*field].clone(),
            };
            let mut expected = expected.clone();
            if *field == "share_seconds" {
                expected = json!(share_seconds(&expected, gen_ms));
            }
            if *field == "request"
                && let Some(d) = expected["dra"].as_array_mut()
            {
                d.sort_by_key(|x| s(&x["claim"]));
            }
            if actual != expected {
                let why = match (view, *field) {
                    ("fleet", "alloc_gpus") => {
                        t.held_on.get(key).map(|h| format!(" (held there: {h})")).unwrap_or_default()
                    }
                    _ => String::new(),
                };
                diffs.push(format!("{view} {key} {field}: fabrik {actual}, API {expected}{why}"));
            }
        }
    }
    // What the API cannot place exactly, checked as bounds and sums.
    // share_seconds is checked on something: some tenant holds a replica that has run a second.
    if view == "tenants" && !got.values().any(|r| r["share_seconds"].as_u64().is_some_and(|s| s > 0)) {
        diffs.push("tenants: no tenant has share_seconds > 0 (the fixture's shared replicas are not held)".into());
    }
    match view {
        "fleet" => {
            for (node, (whole, held, mig_gpus)) in &t.label_mig {
                let Some(r) = got.get(node) else { continue };
                let used = r["alloc_gpus"]["used"].as_i64().unwrap_or(-1);
                let lo = whole + i64::from(*held > 0);
                let hi = whole + held.min(mig_gpus);
                if used < lo || used > hi {
                    diffs.push(format!(
                        "fleet {node} alloc_gpus.used: fabrik {used}, API: {whole} whole GPUs and {held} MIG instances \
                         held on {mig_gpus} MIG GPUs, so {lo}..={hi} (issue 12 item 1)"
                    ));
                }
                if r["alloc_gpus"]["total"] != t.views["fleet"][node]["gpus"] {
                    diffs.push(format!("fleet {node} alloc_gpus.total: {}", r["alloc_gpus"]["total"]));
                }
            }
        }
        "gpus" => {
            // Per node: the instances' profiles; on label nodes the GPU rows' used plus the
            // node's unknown-instance count is what is held.
            let mut profiles: BTreeMap<String, Vec<String>> = BTreeMap::new();
            let mut used: BTreeMap<String, i64> = BTreeMap::new();
            let mut total: BTreeMap<String, i64> = BTreeMap::new();
            for r in got.values() {
                let node = s(&r["node"]);
                for i in r["instances"].as_array().into_iter().flatten() {
                    profiles.entry(node.clone()).or_default().push(s(&i["profile"]));
                }
                *used.entry(node.clone()).or_default() += r["mig_alloc"]["used"].as_i64().unwrap_or(0);
                *total.entry(node).or_default() += r["mig_alloc"]["total"].as_i64().unwrap_or(0);
            }
            for (node, want) in &t.profiles {
                let mut have = profiles.get(node).cloned().unwrap_or_default();
                have.sort();
                if &have != want {
                    diffs.push(format!("gpus {node}: MIG instance profiles {have:?}, API {want:?}"));
                }
            }
            for (node, (_, held, _)) in &t.label_mig {
                // The fleet row's unknown count is compared with the API in the fleet view.
                let u = used.get(node).copied().unwrap_or(0);
                if u > *held {
                    diffs.push(format!("gpus {node}: {u} instances shown in use, only {held} held (API)"));
                }
                let mig_total = t.views["fleet"][node]["mig_alloc"]["total"].as_i64().unwrap_or(0);
                if total.get(node).copied().unwrap_or(0) != mig_total {
                    diffs
                        .push(format!("gpus {node}: {:?} instances in the GPU rows, API {mig_total}", total.get(node)));
                }
            }
        }
        "pods" => {
            for (key, r) in &got {
                let Some(w) = want.get(key) else { continue };
                if w.contains_key("devices") {
                    continue;
                }
                // Device plugin: the API does not say which device; it must not be shown as
                // none when the pod holds one, and a MIG pod's must say unknown (item 1).
                let holds = r["node"].is_string() && !matches!(r["phase"].as_str(), Some("Succeeded" | "Failed"));
                let mig = r["request"]["mig"].as_object().is_some_and(|m| !m.is_empty());
                let d = &r["devices"];
                let says_unknown = d.as_str().is_some_and(|x| x.contains("unknown"));
                if holds && mig && !says_unknown {
                    diffs.push(format!(
                        "pods {key} devices: {d}; it holds a MIG instance the API does not place: the binding is \
                         unknown (issue 12 item 1)"
                    ));
                }
                if !d.is_null() && !says_unknown {
                    diffs.push(format!("pods {key} devices: {d}, but the API does not say which device it got"));
                }
            }
        }
        _ => {}
    }
    diffs
}

/// A table as `--format table` prints it: one map per row, column name → cell. Columns are
/// left-aligned at the header's offsets (a cell may hold spaces: `all-balanced success`).
fn table_rows(table: &str) -> Vec<BTreeMap<String, String>> {
    let mut lines = table.lines();
    let header = lines.next().unwrap_or_default();
    let starts: Vec<(usize, &str)> = header
        .match_indices(|c: char| c != ' ')
        .filter(|(i, _)| *i == 0 || header.as_bytes()[i - 1] == b' ')
        .map(|(i, _)| (i, header[i..].split(' ').next().unwrap_or("")))
        .collect();
    lines
        .map(|line| {
            let chars: Vec<char> = line.chars().collect();
            starts
                .iter()
                .enumerate()
                .map(|(k, (from, name))| {
                    let to = starts.get(k + 1).map(|(i, _)| *i).unwrap_or(usize::MAX).min(chars.len());
                    let cell: String = chars.get((*from).min(to)..to).unwrap_or(&[]).iter().collect();
                    (name.to_string(), cell.trim().to_string())
                })
                .collect()
        })
        .collect()
}

/// A cell that reads as a measurement: a bare number or percentage.
fn reads_as_number(cell: &str) -> bool {
    let body = cell.trim_end_matches(['%', 'W']);
    !body.is_empty() && body.chars().all(|c| c.is_ascii_digit())
}

/// The fleet table: GPUS, ALLOC and PODS of each node; UTIL, MEM, POWER and IDLE are
/// unknown without an agent and must not read as measurements (issue 12 item 3).
fn compare_table(table: &str, t: &Truth) -> Vec<String> {
    let mut diffs = Vec::new();
    let fleet = &t.views["fleet"];
    let mut seen = 0;
    for row in table_rows(table) {
        let cell = |name: &str| row.get(name).cloned().unwrap_or_default();
        let node = cell("NAME");
        let Some(w) = fleet.get(&node) else { continue };
        seen += 1;
        let gpus = w["gpus"].to_string();
        if cell("GPUS") != gpus {
            diffs.push(format!("fleet table {node} GPUS {:?}, API {gpus}", cell("GPUS")));
        }
        if let Some(a) = w.get("alloc_gpus") {
            // A lower bound says so (replicas of shared GPUs the API does not place).
            let at_least = if w["alloc_gpus_lower_bound"] == json!(true) { "≥" } else { "" };
            let want = format!("{at_least}{}/{}", a["used"], a["total"]);
            if cell("ALLOC") != want {
                diffs.push(format!("fleet table {node} ALLOC {:?}, API {want}", cell("ALLOC")));
            }
        }
        if let Some((whole, held, mig_gpus)) = t.label_mig.get(&node) {
            // A lower bound must say so: `≥N/M` exactly when instances are held unplaced.
            let alloc = cell("ALLOC");
            let bound = alloc.strip_prefix('≥');
            if bound.is_some() != (*held > 0) {
                diffs.push(format!(
                    "fleet table {node} ALLOC {alloc:?} with {held} MIG instances held where the API does not                      say which GPU: a lower bound is marked ≥, an exact count is not (item 1)"
                ));
            }
            let used: i64 = bound.unwrap_or(&alloc).split('/').next().and_then(|u| u.parse().ok()).unwrap_or(-1);
            if used < whole + i64::from(*held > 0) || used > whole + held.min(mig_gpus) {
                diffs.push(format!("fleet table {node} ALLOC {alloc:?} with {held} MIG instances held (item 1)"));
            }
        }
        // SHARE: `TS×4 held/offered` on a shared node, `-` elsewhere.
        let share = match (t.shared.get(&node), w["sharing"]["strategy"].as_str()) {
            (Some((replicas, held, shares)), Some(strategy)) => {
                format!("{}×{replicas} {held}/{shares}", if strategy == "mps" { "MPS" } else { "TS" })
            }
            _ => "-".to_string(),
        };
        if cell("SHARE") != share {
            diffs.push(format!("fleet table {node} SHARE {:?}, API {share}", cell("SHARE")));
        }
        let pods = w["pods"].to_string();
        if cell("PODS") != pods {
            diffs.push(format!("fleet table {node} PODS {:?}, API {pods}", cell("PODS")));
        }
        // With nothing allocated on the node, "no idle-but-allocated device" is an exact 0.
        let used = |k: &str| w.get(k).and_then(|v| v["used"].as_i64()).unwrap_or(0);
        let allocated = used("alloc_gpus") + used("mig_alloc") + t.label_mig.get(&node).map_or(0, |m| m.0 + m.1);
        for c in ["UTIL", "MEM", "POWER", "IDLE"] {
            if c == "IDLE" && allocated == 0 {
                if cell(c) != "0" {
                    diffs.push(format!("fleet table {node} IDLE {:?}: nothing is allocated there, so 0", cell(c)));
                }
                continue;
            }
            if reads_as_number(&cell(c)) {
                diffs.push(format!(
                    "fleet table {node} {c} {:?} without any telemetry: unknown is not a number (item 3)",
                    cell(c)
                ));
            }
        }
    }
    if seen != fleet.len() {
        diffs.push(format!("fleet table: {seen} node rows, API {}", fleet.len()));
    }
    diffs
}

/// A tenant's share-seconds at `at_ms` from its holders `[[replicas, startTime ms], ...]`:
/// replicas × (at − start) summed over the pods, in whole seconds.
fn share_seconds(holders: &Value, at_ms: u64) -> u64 {
    let ms: u64 = holders
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| h[0].as_u64().unwrap_or(0) * at_ms.saturating_sub(h[1].as_u64().unwrap_or(u64::MAX)))
        .sum();
    ms / 1000
}

/// The tenants table: PODS, PEND, QUOTA, REQ, ALLOC, MIG, SHARES, SHARE-H per tenant
/// (SHARE-H between what the API gives at the read before and after the snapshot); BUSY,
/// IDLE and BUSY% are unknown without an agent and must not read as measurements.
fn compare_tenant_table(table: &str, t: &Truth, before_ms: u64, after_ms: u64) -> Vec<String> {
    let mut diffs = Vec::new();
    let tenants = &t.views["tenants"];
    let mut seen = 0;
    for row in table_rows(table) {
        let cell = |name: &str| row.get(name).cloned().unwrap_or_default();
        let name = cell("TENANT");
        let Some(w) = tenants.get(&name) else { continue };
        seen += 1;
        let quota = if w["gpu_quota_hard"].is_null() { "-".to_string() } else { w["gpu_quota_hard"].to_string() };
        let want = [
            ("PODS", w["pods"].to_string()),
            ("PEND", w["pending_pods"].to_string()),
            ("QUOTA", quota),
            ("REQ", w["requested_gpus"].to_string()),
            ("ALLOC", w["allocated_gpus"].to_string()),
            ("MIG", w["allocated_mig"].to_string()),
            ("SHARES", w["allocated_shares"].to_string()),
        ];
        for (c, v) in want {
            if cell(c) != v {
                diffs.push(format!("tenants table {name} {c} {:?}, API {v}", cell(c)));
            }
        }
        // Share-hours: hours cut to one decimal, `-` for a tenant holding no replica.
        let hours = |secs: u64| format!("{}.{}", secs / 3600, secs % 3600 * 10 / 3600);
        let (lo, hi) = (share_seconds(&w["share_seconds"], before_ms), share_seconds(&w["share_seconds"], after_ms));
        let got = cell("SHARE-H");
        let ok = if w["allocated_shares"] == json!(0) && hi == 0 {
            got == "-"
        } else {
            let tenths = |h: &str| {
                h.split_once('.').and_then(|(a, b)| Some(a.parse::<u64>().ok()? * 10 + b.parse::<u64>().ok()?))
            };
            tenths(&got).is_some_and(|g| g >= lo * 10 / 3600 && g <= hi * 10 / 3600)
        };
        if !ok {
            diffs.push(format!("tenants table {name} SHARE-H {got:?}, API {}..{}", hours(lo), hours(hi)));
        }
        // With nothing allocated, no busy and no idle device is an exact 0; a share of
        // nothing (BUSY%) is still no figure.
        let n = |k: &str| w.get(k).and_then(Value::as_i64).unwrap_or(0);
        let allocated = n("allocated_gpus") + n("allocated_mig") + n("allocated_shares");
        for c in ["BUSY", "IDLE", "BUSY%"] {
            if c != "BUSY%" && allocated == 0 {
                if cell(c) != "0" {
                    diffs.push(format!("tenants table {name} {c} {:?}: it holds no device, so 0", cell(c)));
                }
                continue;
            }
            if reads_as_number(&cell(c)) {
                diffs.push(format!(
                    "tenants table {name} {c} {:?} without any telemetry: unknown is not 0 (item 3)",
                    cell(c)
                ));
            }
        }
    }
    if seen != tenants.len() {
        diffs.push(format!("tenants table: {seen} rows, API {}", tenants.len()));
    }
    diffs
}

/// The quotas table: HARD, USED, REQ and USE% per quota.
fn compare_quota_table(table: &str, t: &Truth) -> Vec<String> {
    let mut diffs = Vec::new();
    let quotas = &t.views["quotas"];
    let mut seen = 0;
    let gitops_shown = table.lines().next().is_some_and(|h| h.contains("GITOPS"));
    if !gitops_shown {
        diffs.push("quotas table: no GITOPS column".to_string());
    }
    for line in table.lines().skip(1) {
        // TENANT SOURCE(kind, namespace/name or queue/flavor) RESOURCE HARD USED REQ PHYS USE% GITOPS VERSION
        let c: Vec<&str> = line.split_whitespace().collect();
        if c.len() < 9 || !matches!(c[1], "ResourceQuota" | "ClusterQueue") {
            continue;
        }
        let key = format!("{}/{}", c[2], c[3]);
        let Some(w) = quotas.get(&key) else {
            diffs.push(format!("quotas table: {key} not on the API"));
            continue;
        };
        seen += 1;
        let pct = if w["use_pct"].is_null() { "-".to_string() } else { format!("{}%", w["use_pct"]) };
        let req = if w["requested"].is_null() { "-".to_string() } else { w["requested"].to_string() };
        let phys = match w["physical_gpus_held"].as_f64() {
            None => "-".to_string(),
            Some(g) if g.fract() == 0.0 => format!("{g}"),
            Some(g) => format!("{g:.2}").trim_end_matches('0').to_string(),
        };
        let want = [w["hard"].to_string(), w["used"].to_string(), req, phys, pct];
        let have = [c[4], c[5], c[6], c[7], c[8]];
        if have.iter().zip(&want).any(|(h, w)| *h != w.as_str()) {
            diffs.push(format!("quotas table {key}: HARD USED REQ PHYS USE% {have:?}, API {want:?}"));
        }
        // GITOPS: `-`, or the tool and the application's name (`argo gpu-quotas`, `flux
        // oncall off` where Flux leaves the object alone), before VERSION.
        if gitops_shown {
            let m = &w["managed_by"];
            let want = if m.is_null() {
                "-".to_string()
            } else {
                let tool = match m["tool"].as_str().unwrap_or_default() {
                    "argocd" => "argo",
                    "argocd-or-helm" => "argo/helm",
                    _ => "flux",
                };
                let app = s(&m["app"]);
                let app = app.rsplit('/').next().unwrap_or_default();
                let off = if m["reverts"] == false { " off" } else { "" };
                format!("{tool} {app}{off}")
            };
            let have = c[9..c.len().saturating_sub(1).max(9)].join(" ");
            if have != want {
                diffs.push(format!("quotas table {key}: GITOPS {have:?}, API {want:?}"));
            }
        }
    }
    if seen != quotas.len() {
        diffs.push(format!("quotas table: {seen} rows, API {}", quotas.len()));
    }
    diffs
}

fn kubectl_stdin(kubeconfig: &Path, args: &[&str], input: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("kubectl is needed by this test (.ci/run installs it): {e}"));
    if let Some(mut i) = child.stdin.take() {
        i.write_all(input.as_bytes()).expect("kubectl stdin");
    }
    let o = child.wait_with_output().expect("kubectl");
    assert!(o.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A Kueue ClusterQueue (its CRD as Kueue serves it, open schema; no Kueue controller, so
/// its usage is written here as Kueue would write it).
fn kueue_cluster_queue(kubeconfig: &Path) {
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "clusterqueues.kueue.x-k8s.io"},
        "spec": {"group": "kueue.x-k8s.io", "scope": "Cluster",
            "names": {"plural": "clusterqueues", "singular": "clusterqueue", "kind": "ClusterQueue", "listKind": "ClusterQueueList"},
            "versions": [{"name": "v1beta1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    kubectl_stdin(kubeconfig, &["apply", "-f", "-"], &crd.to_string());
    kubectl(kubeconfig, &["wait", "--for=condition=established", "--timeout=60s", "crd/clusterqueues.kueue.x-k8s.io"]);
    let cq = json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq-batch"},
        "spec": {"cohort": "all", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "h100",
            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 4}]}]}]}});
    kubectl_stdin(kubeconfig, &["apply", "-f", "-"], &cq.to_string());
    let status = json!({"status": {"flavorsUsage": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "3"}]}],
        "pendingWorkloads": 2}});
    kubectl(
        kubeconfig,
        &["patch", "clusterqueue", "cq-batch", "--subresource=status", "--type=merge", "-p", &status.to_string()],
    );
}

#[test]
fn every_number_fabrik_prints_equals_the_api() {
    let dir = std::env::temp_dir().join(format!("fabrik-crosscheck-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (_cp, kubeconfig) = control_plane(&dir);
    kueue_cluster_queue(&kubeconfig);
    // The NVIDIA DRA driver's ComputeDomain CRD (tests/fixtures/crds, see its README).
    common::install_fixture(&kubeconfig, "crds/resource.nvidia.com_computedomains.yaml");
    let _sim = common::sim(
        &kubeconfig,
        &dir,
        &[
            "--nodes",
            NODES,
            "--seed",
            "7",
            "--workload",
            "--pods",
            "80",
            "--mig-seconds",
            "2",
            "--sharing-every",
            "3",
            "--dra-every",
            "4",
            "--dra-alpha",
        ],
    );

    // Settled: every bound pod started, every claim allocated, every quota's status caught
    // up with its pods, and a Job pod has finished (finished pods must hold nothing).
    let start = Instant::now();
    loop {
        let t = truth(&read_api(&kubeconfig));
        // Not waited for: quota status that lags behind its pods. The quota controller
        // recounts a quota created while its pods were being created only at its next full
        // resync (5 min); USED is its status, REQ what the pods ask: they may differ.
        let state = format!(
            "{} pods starting, {} claims unallocated, {} quota entries behind their pods, {} finished GPU pods",
            t.starting, t.unallocated_claims, t.quota_lag, t.finished_pods
        );
        if t.starting == 0 && t.unallocated_claims == 0 && t.finished_pods > 0 {
            eprintln!("settled after {:?}: {state}", start.elapsed());
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(240), "the workload did not settle in 240 s: {state}");
        std::thread::sleep(Duration::from_secs(2));
    }

    // On call: two GPU pods no node takes — one asks for more GPUs than any node has, one
    // selects nodes that do not exist — and the scheduler says so (FailedScheduling).
    let oncall = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "oncall", "labels": {"fabrik.io/tenant": "oncall"}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "too-big", "namespace": "oncall"},
         "spec": {"containers": [{"name": "train", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
             "resources": {"limits": {"nvidia.com/gpu": "64"}}}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nowhere", "namespace": "oncall", "labels": {"app": "probe"}},
         "spec": {"nodeSelector": {"fabrik.io/pool": "nowhere"}, "containers": [{"name": "probe",
             "image": "nvcr.io/nvidia/pytorch:25.01-py3", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}},
        // And one a node takes whose image cannot be pulled (its registry never resolves):
        // it stays Pending in ImagePullBackOff, holding the GPU the kubelet gave it.
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pull-fails", "namespace": "oncall"},
         "spec": {"containers": [{"name": "train", "image": "registry.invalid/oncall/train:1",
             "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}},
        // And one whose container exits 1 each time it starts: Running, in CrashLoopBackOff,
        // holding its GPU while it runs nothing (kubectl's STATUS says CrashLoopBackOff).
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "crash-loops", "namespace": "oncall"},
         "spec": {"containers": [{"name": "train", "image": "nvcr.io/nvidia/pytorch:25.01-py3", "command": ["false"],
             "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}},
    ]});
    kubectl_stdin(&kubeconfig, &["apply", "-f", "-"], &oncall.to_string());
    // A Deployment asking three GPUs of a quota of one: the ReplicaSet's other two pods are
    // refused at admission (FailedCreate) and never exist.
    let quota_ns = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "oncall-q", "labels": {"fabrik.io/tenant": "oncall"}}},
        // A Flux HelmRelease's quota that Flux was told to leave alone (managed_by.reverts false).
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota", "namespace": "oncall-q",
            "labels": {"helm.toolkit.fluxcd.io/name": "oncall", "helm.toolkit.fluxcd.io/namespace": "flux-system"},
            "annotations": {"kustomize.toolkit.fluxcd.io/reconcile": "disabled"}},
         "spec": {"hard": {"requests.nvidia.com/gpu": "1"}}},
    ]});
    kubectl_stdin(&kubeconfig, &["apply", "-f", "-"], &quota_ns.to_string());
    // A node an Argo CD application labels (custom instance label), and the ClusterQueue in
    // an Argo CD application in another namespace (tracking annotation).
    let first_node = kubectl(&kubeconfig, &["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]);
    kubectl(&kubeconfig, &["label", "node", first_node.trim(), "argocd.argoproj.io/instance=gpu-nodes", "--overwrite"]);
    kubectl(
        &kubeconfig,
        &[
            "annotate",
            "clusterqueue",
            "cq-batch",
            "argocd.argoproj.io/tracking-id=team-b_queues:kueue.x-k8s.io/ClusterQueue:/cq-batch",
            "--overwrite",
        ],
    );
    // The quota's status first: the quota controller writes what is used before admission
    // counts against it.
    let start = Instant::now();
    while kubectl(
        &kubeconfig,
        &["get", "resourcequota", "gpu-quota", "-n", "oncall-q", "-o", "jsonpath={.status.hard}"],
    )
    .trim()
    .is_empty()
    {
        assert!(start.elapsed() < Duration::from_secs(60), "the quota controller did not write gpu-quota's status");
        std::thread::sleep(Duration::from_millis(500));
    }
    let web = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "oncall-q"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nvcr.io/nvidia/tritonserver:25.01-py3",
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}});
    kubectl_stdin(&kubeconfig, &["apply", "-f", "-"], &web.to_string());
    let start = Instant::now();
    loop {
        let t = truth(&read_api(&kubeconfig));
        let why = |pod: &str| s(&t.views["pods"].get(pod).map_or(Value::Null, |r| r["waiting"]["why"].clone()));
        let (big, nowhere, pull) = (why("oncall/too-big"), why("oncall/nowhere"), why("oncall/pull-fails"));
        let looping = why("oncall/crash-loops");
        let refused = t.views["tenants"].get("oncall").map_or(Value::Null, |r| r["refused_by_quota"].clone());
        let web_pods = t.views["pods"].keys().filter(|k| k.starts_with("oncall-q/web-")).count();
        if big == "not enough free nvidia.com/gpu"
            && nowhere == "not matching its node selector/affinity"
            && pull == "ImagePullBackOff"
            && looping == "CrashLoopBackOff"
            && refused.as_array().is_some_and(|r| r.len() == 1)
            && web_pods == 1
            && t.starting == 0
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "no FailedScheduling, pull failure, crash loop or quota refusal read: {big:?}, {nowhere:?}, {pull:?}, \
             {looping:?}, {refused}, {web_pods} web pods"
        );
        std::thread::sleep(Duration::from_secs(1));
    }

    // kubectl's own STATUS column says what fabrik's WAITING says of the crash-looping pod.
    let row = kubectl(&kubeconfig, &["get", "pod", "crash-loops", "-n", "oncall", "--no-headers"]);
    assert_eq!(row.split_whitespace().nth(2), Some("CrashLoopBackOff"), "kubectl get pod crash-loops: {row}");
    // And its RESTARTS column what fabrik's RESTARTS says (read between two kubectl readings
    // that agree: the kubelet restarts it as its back-off runs out).
    let first_restarts = crash_loop_restarts(&kubeconfig);
    assert!(first_restarts >= 1, "the crash-looping pod has restarted");

    let t0 = truth(&read_api(&kubeconfig));
    assert!(!t0.label_mig.is_empty(), "the workload has a label-announced MIG node: {:?}", t0.profiles);
    assert!(t0.label_mig.values().any(|(_, held, _)| *held > 0), "MIG pods run on it: {:?}", t0.label_mig);
    assert!(t0.views["gpus"].values().any(|g| g.contains_key("instances")), "a DRA node with MIG");
    assert!(t0.views["tenants"].values().any(|r| r["namespaces"].as_array().is_some_and(|a| a.len() > 1)));
    assert!(t0.views["tenants"].contains_key("research"), "the vCluster tenant");
    // GPU sharing (issue 15): time-slicing and MPS nodes, one renamed, replicas held.
    let sharing: Vec<&Value> = t0.views["fleet"].values().map(|r| &r["sharing"]).filter(|s| !s.is_null()).collect();
    for strategy in ["time-slicing", "mps"] {
        assert!(sharing.iter().any(|s| s["strategy"] == strategy), "a {strategy} node: {sharing:?}");
    }
    assert!(sharing.iter().any(|s| s["renamed"] == json!(true)), "a renamed (nvidia.com/gpu.shared) node");
    assert!(t0.shared.values().any(|(_, held, _)| *held > 1), "pods hold replicas: {:?}", t0.shared);
    // DRA's alpha shapes: a partition a claim holds, a device shared by capacity by several
    // claims, a driver taint and a DeviceTaintRule; ComputeDomains, one NotReady.
    let extras: Vec<&Value> = t0.dra.gpus.values().collect();
    assert!(
        extras.iter().any(|d| d["partitionable"] == json!(true) && d["whole_fits"] == json!(false)),
        "a partitionable GPU with a partition held: {extras:?}"
    );
    assert!(
        extras.iter().any(|d| d["shared_by_capacity"]["claims"].as_array().is_some_and(|c| c.len() >= 2)),
        "a device several claims share by capacity: {extras:?}"
    );
    assert!(extras.iter().any(|d| d["taints"].as_array().is_some_and(|t| t.iter().any(|t| t["rule"].is_null()))));
    assert!(extras.iter().any(|d| d["taints"].as_array().is_some_and(|t| t.iter().any(|t| t["rule"].is_string()))));
    let domains = &t0.views["domains"];
    assert!(domains.values().any(|d| d["status"] == "Ready") && domains.values().any(|d| d["status"] == "NotReady"));
    // Their workers: the real resourceclaim controller made their channel claims from the
    // template and the real scheduler put each on a node of its domain. A worker runs where
    // the node's IMEX daemon is Ready; where it is not, the driver cannot prepare the channel
    // and the pod waits in ContainerCreating, the kubelet saying why (FailedPrepareDynamicResources),
    // and fabrik's domains view says so (`pods[].waiting`, compared with the Events above).
    let mut unprepared = 0;
    for d in domains.values() {
        let pods = d["pods"].as_array().cloned().unwrap_or_default();
        assert_eq!(pods.len() as u64, d["num_nodes"].as_u64().unwrap_or(0), "a worker per node: {d:?}");
        let ready = |node: &Value| {
            d["nodes"].as_array().into_iter().flatten().find(|n| n["name"] == *node).map(|n| n["status"] == "Ready")
        };
        for p in &pods {
            let key = format!("{}/{}", s(&d["namespace"]), s(&p["name"]));
            let waiting = s(&p["waiting"]);
            match ready(&p["node"]) {
                Some(true) => assert_eq!(p["phase"], "Running", "{key} on a Ready node: {d:?}"),
                Some(false) => {
                    let said = waiting.starts_with("devices not prepared: ");
                    assert!(p["phase"] == "Pending" && said, "{key}: {waiting:?} {d:?}");
                    unprepared += 1;
                }
                None => panic!("{key} is not on a node of its domain: {d:?}"),
            }
        }
    }
    assert!(unprepared > 0, "a worker on the NotReady node of a domain: {domains:?}");
    let res: BTreeSet<String> =
        t0.views["quotas"].keys().map(|k| k.rsplit('/').next().unwrap_or("").to_string()).collect();
    assert!(res.iter().any(|r| r.starts_with("mig-")), "a MIG quota: {res:?}");
    assert!(res.contains("devices"), "a DRA device-class quota: {res:?}");
    assert!(t0.views["quotas"].contains_key("cq-batch/h100/nvidia.com/gpu"), "the Kueue ClusterQueue's quota");
    // GitOps owners: the simulator's Argo CD and Flux quotas, the oncall HelmRelease's, the
    // ClusterQueue's Application, the labelled node.
    let owned = |view: &str| t0.views[view].values().filter(|r| !r["managed_by"].is_null()).count();
    assert!(
        owned("quotas") >= 3 && owned("fleet") == 1,
        "GitOps owners: quotas {} fleet {}",
        owned("quotas"),
        owned("fleet")
    );
    // Isolation: each answer of the audit occurs (deny, deny in, open), and tenants share nodes.
    let iso: Vec<&Value> = t0.views["tenants"].values().filter_map(|r| r.get("isolation")).collect();
    let said = |text: &str| iso.iter().any(|i| i["netpol"].as_str().is_some_and(|n| n.starts_with(text)));
    assert!(said("deny") && said("deny in") && said("open"), "isolation answers: {iso:?}");
    let enforced = |text: &str| iso.iter().any(|i| i["pod_security"].as_str().is_some_and(|n| n.starts_with(text)));
    assert!(enforced("baseline") && enforced("unset"), "Pod Security answers: {iso:?}");
    assert!(iso.iter().any(|i| i["shared_nodes"].as_array().is_some_and(|a| !a.is_empty())), "{iso:?}");
    // recsys and eval hold capacity shares of one GPU (fabrik sim --dra-alpha).
    let sharing = iso.iter().filter(|i| i["shared_gpus"].as_array().is_some_and(|a| !a.is_empty())).count();
    assert!(sharing >= 2, "two tenants share a GPU: {iso:?}");

    let mut failures = Vec::new();
    for view in ["fleet", "gpus", "tenants", "quotas", "pods", "domains", "clusters"] {
        let mut compared = false;
        for attempt in 0..8 {
            let before_ms = now_ms();
            let before = truth(&read_api(&kubeconfig));
            let text = fabrik(&kubeconfig, &["snapshot", "--view", view, "--format", "json"]);
            let table = match view {
                "fleet" | "quotas" | "tenants" => {
                    fabrik(&kubeconfig, &["snapshot", "--view", view, "--format", "table"])
                }
                _ => String::new(),
            };
            let after = truth(&read_api(&kubeconfig));
            let after_ms = now_ms();
            if before != after {
                eprintln!("{view}: the cluster changed during the snapshot (attempt {attempt}); again");
                std::thread::sleep(Duration::from_secs(2));
                continue;
            }
            let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{view} JSON: {e}\n{text}"));
            assert_eq!(doc["schema"], "fabrik.snapshot/v1");
            assert_eq!(doc["view"], view);
            failures.extend(compare(view, &doc, &before, before_ms, after_ms));
            match view {
                "fleet" => failures.extend(compare_table(&table, &before)),
                "quotas" => failures.extend(compare_quota_table(&table, &before)),
                "tenants" => failures.extend(compare_tenant_table(&table, &before, before_ms, after_ms)),
                _ => {}
            }
            compared = true;
            break;
        }
        assert!(compared, "{view}: the cluster never held still for one snapshot in 8 attempts");
    }
    // The clusters row is the kubeconfig's context; --all-contexts gives a row for each of
    // its contexts (admin and the restricted tenant here), the current one first.
    let context = kubectl(&kubeconfig, &["config", "current-context"]);
    let mut contexts: Vec<String> =
        kubectl(&kubeconfig, &["config", "get-contexts", "-o", "name"]).lines().map(str::to_string).collect();
    contexts.sort_by_key(|c| c != context.trim());
    let all: Value = serde_json::from_str(&fabrik(
        &kubeconfig,
        &["snapshot", "--all-contexts", "--view", "clusters", "--format", "json"],
    ))
    .unwrap_or_else(|e| panic!("clusters JSON: {e}"));
    let names: Vec<&str> = all["rows"].as_array().into_iter().flatten().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, contexts, "--all-contexts: every context of the kubeconfig, the current one first");
    assert_eq!(all["rows"][0]["current"], json!(true));

    // The incident bundle (issue 16), scoped to the node with the most GPU pods and to the
    // on-call tenant (pending pods, a quota refusal): each section holds what the API says
    // is on that node or that tenant's.
    let mut on_node: BTreeMap<String, usize> = BTreeMap::new();
    for p in t0.views["pods"].values() {
        if let Some(n) = p.get("node").and_then(Value::as_str) {
            *on_node.entry(n.to_string()).or_default() += 1;
        }
    }
    let node = on_node.iter().max_by_key(|(n, k)| (**k, std::cmp::Reverse((*n).clone()))).map(|(n, _)| n.clone());
    let node = node.expect("a node with GPU pods");
    let mut compared = false;
    for attempt in 0..8 {
        let before = truth(&read_api(&kubeconfig));
        let by_node = fabrik(&kubeconfig, &["snapshot", "--bundle", "-", "--node", &node]);
        let by_tenant = fabrik(&kubeconfig, &["snapshot", "--bundle", "-", "--tenant", "oncall"]);
        if before != truth(&read_api(&kubeconfig)) {
            eprintln!("bundle: the cluster changed during the snapshot (attempt {attempt}); again");
            std::thread::sleep(Duration::from_secs(2));
            continue;
        }
        failures.extend(bundle::compare_node(&kubeconfig, &by_node, &before, &node));
        failures.extend(bundle::compare_tenant(&by_tenant, &before, "oncall"));
        compared = true;
        break;
    }
    assert!(compared, "bundle: the cluster never held still for one snapshot in 8 attempts");

    // `fabrik describe` (the `y` pane's text) for each kind the views lead to.
    let first = |kind: &str| {
        kubectl(
            &kubeconfig,
            &["get", kind, "-A", "-o", "jsonpath={.items[0].metadata.namespace}/{.items[0].metadata.name}"],
        )
    };
    let domain = t0.views["domains"].keys().next().cloned().expect("a ComputeDomain");
    let claim = first("resourceclaims");
    let slice = first("resourceslices");
    let split = |k: &str| -> (Option<String>, String) {
        match k.split_once('/') {
            Some(("", n)) => (None, n.to_string()),
            Some((ns, n)) => (Some(ns.to_string()), n.to_string()),
            None => (None, k.to_string()),
        }
    };
    let objects: Vec<(&str, (Option<String>, String))> = vec![
        ("pod", (Some("oncall".into()), "too-big".into())),
        ("node", (None, node.clone())),
        ("resourcequota", (Some("oncall-q".into()), "gpu-quota".into())),
        ("computedomain", split(&domain)),
        ("resourceclaim", split(&claim)),
        ("resourceslice", split(&slice)),
        ("clusterqueue", (None, "cq-batch".into())),
    ];
    for (kind, (ns, name)) in &objects {
        let found = (0..5).find_map(|_| describe::compare(&kubeconfig, kind, ns.as_deref(), name));
        match found {
            Some(d) => failures.extend(d),
            None => failures.push(format!("describe {kind} {name}: the object changed on every one of 5 reads")),
        }
    }
    // Each node's allocated devices against `kubectl describe nodes`, the pod stuck pulling
    // its image among them (it holds its GPU: kubectl counts every non-terminated pod).
    let stuck_node = t0.views["pods"]["oncall/pull-fails"]["node"].as_str().map(str::to_string);
    let stuck_node = stuck_node.expect("pull-fails is bound to a node");
    let dra_nodes: BTreeSet<String> = read_api(&kubeconfig)
        .slices
        .iter()
        .filter(|sl| sl["spec"]["driver"] == "gpu.nvidia.com")
        .map(|sl| s(&sl["spec"]["nodeName"]))
        .collect();
    match (0..5).find_map(|_| allocated::compare(&kubeconfig, &dra_nodes, (&stuck_node, "oncall/pull-fails"))) {
        Some(d) => failures.extend(d),
        None => failures.push("describe nodes: the allocations changed on every one of 5 reads".into()),
    }
    // `fabrik logs` (the `L` pane's stream) against `kubectl logs`, through the sim's kubelets.
    failures.extend(logs::compare(&kubeconfig));
    // The kubelet went on restarting the crash-looping pod (its back-off is at most 80 s
    // here): kubectl and fabrik count the restarts since.
    let start = Instant::now();
    while crash_loop_restarts(&kubeconfig) <= first_restarts {
        assert!(start.elapsed() < Duration::from_secs(100), "oncall/crash-loops was not restarted again");
        std::thread::sleep(Duration::from_secs(3));
    }
    assert!(failures.is_empty(), "{} differences between fabrik and the API:\n{}", failures.len(), failures.join("\n"));
}
