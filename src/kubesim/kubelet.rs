//! The pod side of the simulated kubelets: bound pods start, Job pods complete, graceful
//! deletions are finished as a kubelet finishes them — the containers get SIGTERM, exit (or
//! are killed when the grace period ends), the pod turns Failed, and the kubelet deletes it
//! with grace 0; the API server keeps it after that for as long as it has finalizers.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::failing::{self, pull_backoff_status, unpullable};
use super::model;
use super::nodes::Shared;
use super::{describe, is_status};

/// A stable 64-bit hash (FNV-1a) for delays and ids that must not depend on the process.
pub fn hash(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain([0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// How long a pod takes to start: 0.5–1 s.
pub fn start_delay(uid: &str) -> Duration {
    Duration::from_millis(500 + hash(&[uid, "start"]) % 500)
}

/// How long a Job pod runs: 30 s to 4 minutes, from the seed and the pod's name.
pub fn job_duration(seed: u64, namespace: &str, name: &str) -> Duration {
    Duration::from_secs(30 + hash(&[&seed.to_string(), namespace, name]) % 210)
}

pub fn is_job_pod(pod: &Pod) -> bool {
    pod.metadata.owner_references.as_ref().is_some_and(|o| o.iter().any(|r| r.kind == "Job"))
}

/// Pod IP number `n` as 10.a.b.c (10.0.0.0/8 less the first /16).
/// Pod annotation: the IP the simulated kubelet reports for the pod (for pods whose server
/// a test runs itself); any other pod gets one from 10.1.0.0/16.
pub const POD_IP_ANNOTATION: &str = "fabrik.io/sim-pod-ip";

/// Pod annotation: seconds the pod's simulated containers take to exit after SIGTERM
/// (default 0.8–1.2 s). More than the grace period means they ignore SIGTERM and are
/// killed when it ends, so a test can have a pod that takes its whole grace period.
pub const STOP_SECONDS_ANNOTATION: &str = "fabrik.io/sim-stop-seconds";

/// When a deleted pod's containers stop, counted from `now_ms`: when they exit after
/// SIGTERM, or when the grace period the API server recorded ends (then they are killed,
/// the `bool`), whichever comes first. `None` for a pod not being deleted.
pub fn stop_after(pod: &Pod, now_ms: u64) -> Option<(Duration, bool)> {
    let d = crate::cluster::pod_deletion(pod)?;
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let exits_ms = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(STOP_SECONDS_ANNOTATION))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map_or(800 + hash(&[uid, "kill"]) % 400, |s| (s * 1000.0) as u64);
    let exit_at = d.since.saturating_add(exits_ms);
    let stop_at = match d.grace_secs {
        Some(g) => exit_at.min(d.since.saturating_add(u64::from(g) * 1000)),
        None => exit_at,
    };
    Some((Duration::from_millis(stop_at.saturating_sub(now_ms)), stop_at < exit_at))
}

/// The status a kubelet posts once a deleted pod's containers have stopped: phase Failed,
/// each container terminated (143 after SIGTERM, 137 when killed at the end of the grace
/// period). A pod that already finished keeps its status.
pub fn stopped_status(pod: &Pod, killed: bool, now: &str) -> Value {
    terminated_status(pod, now, "Failed", if killed { 137 } else { 143 }, "Error", None)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

pub fn pod_ip(n: u32) -> String {
    let n = n + 65_536;
    format!("10.{}.{}.{}", (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff)
}

fn hex64(parts: &[&str]) -> String {
    let mut out = String::with_capacity(64);
    for i in 0..4 {
        out.push_str(&format!("{:016x}", hash(&[parts.join("/").as_str(), &i.to_string()])));
    }
    out
}

/// The status a kubelet posts once the pod's containers run.
pub fn running_status(pod: &Pod, host_ip: &str, pod_ip: &str, now: &str) -> Value {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let spec = pod.spec.as_ref();
    let containers: Vec<Value> = spec
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|c| container_status(c, &uid, true, json!({ "running": { "startedAt": now } })))
        .collect();
    let mut containers = containers;
    // One long-running pod in six crashed once on start (CUDA out of memory) and was
    // restarted, as GPU pods do: its previous log is what `logs --previous` reads.
    if !is_job_pod(pod)
        && crashed_once(&uid)
        && let Some(c) = containers.first_mut()
    {
        c["restartCount"] = json!(1);
        c["lastState"] = json!({ "terminated": {
            "exitCode": 1, "reason": "Error", "startedAt": now, "finishedAt": now,
            "containerID": format!("containerd://{}", hex64(&[&uid, "first-run"])),
        }});
    }
    let inits: Vec<Value> = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|c| {
            json!({
                "name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": "",
                "containerID": format!("containerd://{}", hex64(&[&uid, "init", &c.name])),
                "ready": true, "restartCount": 0,
                "state": { "terminated": { "exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now } },
            })
        })
        .collect();
    let cond = |t: &str| json!({ "type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": now });
    let mut status = json!({
        "phase": "Running",
        "hostIP": host_ip, "hostIPs": [{ "ip": host_ip }],
        "podIP": pod_ip, "podIPs": [{ "ip": pod_ip }],
        "startTime": now,
        "conditions": [cond("PodReadyToStartContainers"), cond("Initialized"), cond("Ready"),
            cond("ContainersReady"), cond("PodScheduled")],
        "containerStatuses": containers,
    });
    if !inits.is_empty() {
        status["initContainerStatuses"] = Value::Array(inits);
    }
    json!({ "status": status })
}

/// Whether the pod's first container crashed once before the run it is in (one pod in six).
pub fn crashed_once(uid: &str) -> bool {
    hash(&[uid, "crashed-once"]).is_multiple_of(6)
}

/// One entry of `containerStatuses`: ids derived from the pod uid and container name, so they
/// stay the same across the pod's life.
fn container_status(c: &k8s_openapi::api::core::v1::Container, uid: &str, running: bool, state: Value) -> Value {
    let image = c.image.clone().unwrap_or_default();
    json!({
        "name": c.name, "image": image,
        "imageID": format!("{}@sha256:{}", image.split(':').next().unwrap_or(""), hex64(&[&image])),
        "containerID": format!("containerd://{}", hex64(&[uid, &c.name])),
        "ready": running, "started": running, "restartCount": 0,
        "state": state,
    })
}

/// The status of a pod whose containers all exited 0.
pub fn succeeded_status(pod: &Pod, now: &str) -> Value {
    terminated_status(pod, now, "Succeeded", 0, "Completed", Some("PodCompleted"))
}

/// A pod whose containers all terminated with `code`: `phase`, and the conditions a
/// kubelet posts then (`not_ready_reason` on the conditions that are False).
fn terminated_status(
    pod: &Pod,
    now: &str,
    phase: &str,
    code: i32,
    reason: &str,
    not_ready_reason: Option<&str>,
) -> Value {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let started = pod.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| model::time_str(t.0));
    let started = started.unwrap_or_else(|| now.to_string());
    let containers: Vec<Value> = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let state = json!({ "terminated": { "exitCode": code, "reason": reason, "startedAt": started,
                "finishedAt": now, "containerID": format!("containerd://{}", hex64(&[&uid, &c.name])) } });
            container_status(c, &uid, false, state)
        })
        .collect();
    json!({ "status": {
        "phase": phase,
        "conditions": not_running_conditions(now, not_ready_reason),
        "containerStatuses": containers,
    }})
}

/// The conditions of a scheduled pod whose containers do not run (not started yet, or
/// terminated): `not_ready_reason` on those that are False.
fn not_running_conditions(now: &str, not_ready_reason: Option<&str>) -> Value {
    let cond = |t: &str, s: &str| {
        let mut c = json!({ "type": t, "status": s, "lastProbeTime": null, "lastTransitionTime": now });
        if let Some(why) = not_ready_reason.filter(|_| s == "False") {
            c["reason"] = why.into();
        }
        c
    };
    json!([
        cond("PodReadyToStartContainers", "False"),
        cond("Initialized", "True"),
        cond("Ready", "False"),
        cond("ContainersReady", "False"),
        cond("PodScheduled", "True")
    ])
}

/// The status of a pod whose containers are being created (its devices not prepared yet):
/// Pending, each container waiting in ContainerCreating, no container id yet.
pub fn creating_status(pod: &Pod, now: &str) -> Value {
    waiting_status(pod, now, |_| json!({ "reason": "ContainerCreating" }))
}

/// Pending, each container waiting as `state` says (the `state.waiting` of a container);
/// with init containers, those wait as `state` says and the others in PodInitializing.
pub(super) fn waiting_status(
    pod: &Pod,
    now: &str,
    state: impl Fn(&k8s_openapi::api::core::v1::Container) -> Value,
) -> Value {
    let entry = |c: &k8s_openapi::api::core::v1::Container, waiting: Value| {
        json!({ "name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": "",
            "ready": false, "restartCount": 0, "started": false, "state": { "waiting": waiting } })
    };
    let inits: Vec<Value> =
        pod.spec.iter().flat_map(|s| s.init_containers.iter().flatten()).map(|c| entry(c, state(c))).collect();
    let waiting: Vec<Value> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| entry(c, if inits.is_empty() { state(c) } else { json!({ "reason": "PodInitializing" }) }))
        .collect();
    let mut status = json!({ "phase": "Pending", "startTime": now,
        "conditions": not_running_conditions(now, None), "containerStatuses": waiting });
    if !inits.is_empty() {
        status["initContainerStatuses"] = Value::Array(inits);
    }
    json!({ "status": status })
}

struct Kubelet {
    shared: Arc<Shared>,
    seed: u64,
    ips: AtomicU32,
    started: std::sync::Mutex<HashSet<String>>,
    /// Pods being deleted (uid) → when their containers stop (ms): a deletion whose grace
    /// period is shortened later gets a new, earlier stop.
    deleting: std::sync::Mutex<HashMap<String, u64>>,
}

fn key(pod: &Pod) -> Option<(String, String, String, String)> {
    Some((
        pod.metadata.namespace.clone()?,
        pod.metadata.name.clone()?,
        pod.metadata.uid.clone()?,
        pod.spec.as_ref()?.node_name.clone()?,
    ))
}

impl Kubelet {
    fn on_pod(self: &Arc<Self>, pod: &Pod) {
        let Some((ns, name, uid, node)) = key(pod) else { return };
        if !self.shared.is_sim_node(&node) || self.shared.is_faulted(&node) {
            return;
        }
        let api: Api<Pod> = Api::namespaced(self.shared.client.clone(), &ns);
        let now = now_ms();
        if let Some((wait, killed)) = stop_after(pod, now) {
            let stop_at = now + wait.as_millis() as u64;
            let Ok(mut deleting) = self.deleting.lock() else { return };
            if deleting.get(&uid).is_some_and(|at| *at <= stop_at) {
                return;
            }
            deleting.insert(uid.clone(), stop_at);
            drop(deleting);
            let me = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(wait).await;
                // Superseded by a shorter grace period, or the kubelet died meanwhile (its
                // pods are looked at again once it is back).
                let current = me.deleting.lock().ok().and_then(|d| d.get(&uid).copied());
                if current != Some(stop_at) {
                    return;
                }
                if me.shared.is_faulted(&node) {
                    if let Ok(mut d) = me.deleting.lock() {
                        d.remove(&uid);
                    }
                    return;
                }
                me.stop(&api, &ns, &name, &uid, killed).await;
            });
            return;
        }
        let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_else(|| "Pending".into());
        let job = is_job_pod(pod);
        let start = phase == "Pending";
        if !(start || (phase == "Running" && job)) {
            return;
        }
        if !self.started.lock().is_ok_and(|mut s| s.insert(uid.clone())) {
            return;
        }
        let me = self.clone();
        let pod = pod.clone();
        tokio::spawn(async move {
            let pp = PatchParams::default();
            if start {
                tokio::time::sleep(start_delay(&uid)).await;
                if me.deleting.lock().is_ok_and(|d| d.contains_key(&uid)) {
                    // Deleted before it started: its stop is under way.
                    return;
                }
                if me.shared.is_faulted(&node) {
                    // The kubelet died meanwhile; try again once it is back.
                    if let Ok(mut s) = me.started.lock() {
                        s.remove(&uid);
                    }
                    return;
                }
                if let Some(message) = me.shared.prepare_failure(&pod, &node) {
                    // The driver cannot prepare its devices: it stays ContainerCreating, as
                    // the kubelet keeps it while it retries.
                    let status = creating_status(&pod, &model::now_str());
                    me.stuck(&api, &pod, &node, status, ("FailedPrepareDynamicResources", &message)).await;
                    return;
                }
                if let Some((image, error)) = unpullable(&pod) {
                    // Its image cannot be pulled: it stays Pending, backing off, holding the
                    // devices the kubelet allocated it when it admitted it.
                    let status = pull_backoff_status(&pod, &model::now_str());
                    let message = format!("Failed to pull image \"{image}\": {error}");
                    me.stuck(&api, &pod, &node, status, ("Failed", &message)).await;
                    return;
                }
                let host = me.shared.node_index(&node).map(model::node_ip).unwrap_or_default();
                // A test that runs the pod's server itself (an agent in a network namespace)
                // says where it listens; the API server's pod proxy then reaches it there.
                let ip = pod
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(POD_IP_ANNOTATION))
                    .filter(|v| v.parse::<std::net::IpAddr>().is_ok())
                    .cloned()
                    .unwrap_or_else(|| pod_ip(me.ips.fetch_add(1, Ordering::Relaxed)));
                let now = model::now_str();
                let status = running_status(&pod, &host, &ip, &now);
                if let Some(container) = failing::crash_looping(&pod) {
                    // It exits 1 each time it starts: Running, that container restarting
                    // with a back-off, not ready; the devices stay allocated to the pod.
                    let restarts = 1 + (hash(&[&uid, "restarts"]) % 4) as u32;
                    let looping = failing::crash_loop_status(status.clone(), &pod, &container, restarts, &now);
                    let secs = crate::cluster::kubelet::back_off_secs(restarts);
                    let (_, said) = failing::back_off_words(&pod, &container, secs);
                    me.stuck(&api, &pod, &node, looping, ("BackOff", &said)).await;
                    me.crash_loop(&api, &pod, &node, status, &container, restarts).await;
                    return;
                }
                let res = {
                    let Ok(_permit) = me.shared.sem.acquire().await else { return };
                    api.patch_status(&name, &pp, &Patch::Merge(&status)).await
                };
                match res {
                    Ok(_) => {}
                    Err(e) if is_status(&e, 404) => return,
                    Err(e) => {
                        eprintln!("fabrik sim: kubelet: starting {ns}/{name}: {}", describe(&e));
                        if let Ok(mut s) = me.started.lock() {
                            s.remove(&uid);
                        }
                        return;
                    }
                }
            }
            if !job {
                return;
            }
            tokio::time::sleep(job_duration(me.seed, &ns, &name)).await;
            while me.shared.is_faulted(&node) {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            let current = match api.get_opt(&name).await {
                Ok(Some(p)) if p.metadata.uid.as_deref() == Some(uid.as_str()) => p,
                _ => return,
            };
            if current.metadata.deletion_timestamp.is_some()
                || current.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Running")
            {
                return;
            }
            let status = succeeded_status(&current, &model::now_str());
            let Ok(_permit) = me.shared.sem.acquire().await else { return };
            if let Err(e) = api.patch_status(&name, &pp, &Patch::Merge(&status)).await
                && !is_status(&e, 404)
            {
                eprintln!("fabrik sim: kubelet: completing {ns}/{name}: {}", describe(&e));
            }
        });
    }

    /// The containers stopped: post the terminal status (unless the pod finished on its
    /// own), then delete the pod with grace 0, as a kubelet does. A pod with finalizers stays
    /// in the API, Failed and terminating, until they are removed.
    async fn stop(&self, api: &Api<Pod>, ns: &str, name: &str, uid: &str, killed: bool) {
        let Ok(_permit) = self.shared.sem.acquire().await else { return };
        let current = match api.get_opt(name).await {
            Ok(Some(p)) if p.metadata.uid.as_deref() == Some(uid) => p,
            Ok(_) => return,
            Err(e) => {
                eprintln!("fabrik sim: kubelet: reading {ns}/{name}: {}", describe(&e));
                return;
            }
        };
        let phase = current.status.as_ref().and_then(|s| s.phase.as_deref());
        if !matches!(phase, Some("Succeeded" | "Failed")) {
            let status = stopped_status(&current, killed, &model::now_str());
            match api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await {
                Ok(_) => {}
                Err(e) if is_status(&e, 404) => return,
                Err(e) => eprintln!("fabrik sim: kubelet: stopping {ns}/{name}: {}", describe(&e)),
            }
        }
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions { uid: Some(uid.to_string()), resource_version: None }),
            ..Default::default()
        };
        match api.delete(name, &dp).await {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => {}
            Err(e) => eprintln!("fabrik sim: kubelet: deleting {ns}/{name}: {}", describe(&e)),
        }
    }

    /// Keeps a pod the kubelet cannot start (Pending) or keep running (Running, a container
    /// restarting) with `status`, and posts its Warning `(reason, message)` on it:
    /// FailedPrepareDynamicResources (its devices not prepared), Failed (its image not
    /// pulled), BackOff (a container that crashed).
    async fn stuck(&self, api: &Api<Pod>, pod: &Pod, node: &str, status: Value, (reason, message): (&str, &str)) {
        let Some((ns, name, uid, _)) = key(pod) else { return };
        let now = model::now_str();
        let event: k8s_openapi::api::core::v1::Event = match serde_json::from_value(json!({
            "metadata": { "name": format!("{name}.{:016x}", hash(&[&uid, reason])), "namespace": ns },
            "involvedObject": { "apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": name, "uid": uid },
            "reason": reason, "message": message, "type": "Warning",
            "source": { "component": "kubelet", "host": node }, "count": 1,
            "firstTimestamp": now, "lastTimestamp": now,
            "reportingComponent": "kubelet", "reportingInstance": node,
        })) {
            Ok(e) => e,
            Err(e) => return eprintln!("fabrik sim: kubelet: the event for {ns}/{name}: {e}"),
        };
        let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(self.shared.client.clone(), &ns);
        let Ok(_permit) = self.shared.sem.acquire().await else { return };
        if let Err(e) = api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await
            && !is_status(&e, 404)
        {
            eprintln!("fabrik sim: kubelet: {ns}/{name} stuck ({reason}): {}", describe(&e));
        }
        match events.create(&Default::default(), &event).await {
            Ok(_) => eprintln!("fabrik sim: kubelet: {ns}/{name} on {node}: {reason}"),
            Err(e) if is_status(&e, 409) => {}
            Err(e) => eprintln!("fabrik sim: kubelet: event for {ns}/{name}: {}", describe(&e)),
        }
    }

    /// Restarts a crash-looping container each time its back-off runs out (10 s, doubling
    /// to 5 min), as a kubelet does; it exits at once again: one restart more in its status,
    /// and its BackOff Event counted once more. Ends when the pod is deleted or gone.
    async fn crash_loop(&self, api: &Api<Pod>, pod: &Pod, node: &str, running: Value, container: &str, mut n: u32) {
        let Some((ns, name, uid, _)) = key(pod) else { return };
        let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(self.shared.client.clone(), &ns);
        let event = format!("{name}.{:016x}", hash(&[&uid, "BackOff"]));
        let mut said = 1u32;
        loop {
            let secs = crate::cluster::kubelet::back_off_secs(n);
            tokio::time::sleep(Duration::from_secs(secs.into())).await;
            if self.shared.is_faulted(node) {
                // The kubelet is down: it restarts nothing until it is back.
                continue;
            }
            if self.deleting.lock().map_or(true, |d| d.contains_key(&uid)) {
                return;
            }
            match api.get_opt(&name).await {
                Ok(Some(p))
                    if p.metadata.uid.as_deref() == Some(uid.as_str()) && p.metadata.deletion_timestamp.is_none() => {}
                Ok(_) => return,
                Err(_) => continue,
            }
            n = n.saturating_add(1);
            let now = model::now_str();
            let status = failing::crash_loop_status(running.clone(), pod, container, n, &now);
            let Ok(_permit) = self.shared.sem.acquire().await else { return };
            match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await {
                Ok(_) => {}
                Err(e) if is_status(&e, 404) => return,
                Err(e) => eprintln!("fabrik sim: kubelet: {ns}/{name} restarting {container}: {}", describe(&e)),
            }
            said = said.saturating_add(1);
            let seen = json!({ "count": said, "lastTimestamp": now });
            if let Err(e) = events.patch(&event, &PatchParams::default(), &Patch::Merge(&seen)).await
                && !is_status(&e, 404)
            {
                eprintln!("fabrik sim: kubelet: the BackOff event of {ns}/{name}: {}", describe(&e));
            }
        }
    }

    fn forget(&self, pod: &Pod) {
        if let Some(uid) = pod.metadata.uid.as_ref() {
            if let Ok(mut s) = self.started.lock() {
                s.remove(uid);
            }
            if let Ok(mut d) = self.deleting.lock() {
                d.remove(uid);
            }
        }
    }
}

/// Watches bound pods and plays the kubelets of the simulated nodes. `resume` hears nodes
/// whose fault was cleared: their pods are looked at again.
pub async fn run(
    shared: Arc<Shared>,
    seed: u64,
    mut resume: mpsc::UnboundedReceiver<String>,
    writer: reflector::store::Writer<Pod>,
) {
    let kubelet = Arc::new(Kubelet {
        shared: shared.clone(),
        seed,
        ips: AtomicU32::new(0),
        started: Default::default(),
        deleting: Default::default(),
    });
    let api: Api<Pod> = Api::all(shared.client.clone());
    let store: Store<Pod> = writer.as_reader();
    let cfg = watcher::Config::default().fields("spec.nodeName!=");
    let mut stream = watcher(api, cfg).default_backoff().reflect(writer).boxed();
    loop {
        tokio::select! {
            ev = stream.try_next() => match ev {
                Ok(Some(watcher::Event::Apply(p) | watcher::Event::InitApply(p))) => kubelet.on_pod(&p),
                Ok(Some(watcher::Event::Delete(p))) => kubelet.forget(&p),
                Ok(Some(_)) => {}
                Ok(None) => return,
                Err(e) => eprintln!("fabrik sim: pod watch: {e}"),
            },
            Some(node) = resume.recv() => {
                for p in store.state() {
                    if p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str()) {
                        kubelet.on_pod(&p);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": { "name": "p", "namespace": "ns", "uid": "u-1",
                "ownerReferences": [{ "apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j1" }] },
            "spec": { "nodeName": "h100-0000", "containers": [{ "name": "main", "image": "nvcr.io/x/y:1" }] },
        }))
        .expect("pod")
    }

    #[test]
    fn running_status_is_complete() {
        let p = pod();
        let s = running_status(&p, "172.16.0.10", &pod_ip(0), "2026-01-01T00:00:00Z");
        let st = &s["status"];
        assert_eq!(st["phase"], "Running");
        assert_eq!(st["podIP"], "10.1.0.0");
        assert_eq!(st["hostIP"], "172.16.0.10");
        let types: Vec<&str> =
            st["conditions"].as_array().into_iter().flatten().filter_map(|c| c["type"].as_str()).collect();
        for t in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
            assert!(types.contains(&t), "{t}");
        }
        let cs = &st["containerStatuses"][0];
        assert!(cs["containerID"].as_str().is_some_and(|c| c.starts_with("containerd://") && c.len() == 13 + 64));
        assert!(cs["state"]["running"]["startedAt"].is_string());
        // Typed round trip.
        let typed: Result<k8s_openapi::api::core::v1::PodStatus, _> = serde_json::from_value(st.clone());
        assert!(typed.is_ok());
    }

    #[test]
    fn job_pods_complete_with_exit_zero() {
        let p = pod();
        assert!(is_job_pod(&p));
        let s = succeeded_status(&p, "2026-01-01T00:01:00Z");
        assert_eq!(s["status"]["phase"], "Succeeded");
        assert_eq!(s["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 0);
        let d = job_duration(42, "ns", "p");
        assert!(d >= Duration::from_secs(30) && d < Duration::from_secs(240));
        assert_eq!(d, job_duration(42, "ns", "p"));
        let s = start_delay("u-1");
        assert!(s >= Duration::from_millis(500) && s < Duration::from_millis(1000));
    }

    #[test]
    fn deleted_pods_stop_within_their_grace_period() {
        let mut p = pod();
        assert_eq!(stop_after(&p, 0), None, "not being deleted");
        // Deleted at 10:00:00 with 30 s grace: the API server's deadline is 10:00:30.
        p.metadata.deletion_timestamp = Some(serde_json::from_value(json!("2026-01-01T10:00:30Z")).expect("time"));
        p.metadata.deletion_grace_period_seconds = Some(30);
        let asked = crate::cluster::pod_deletion(&p).expect("a deletion").since;
        let (wait, killed) = stop_after(&p, asked).expect("a stop");
        assert!(!killed && wait >= Duration::from_millis(800) && wait < Duration::from_millis(1200), "{wait:?}");
        // Containers that ignore SIGTERM run out the grace period, then are killed.
        p.metadata.annotations = Some([(STOP_SECONDS_ANNOTATION.to_string(), "600".to_string())].into());
        assert_eq!(stop_after(&p, asked), Some((Duration::from_secs(30), true)));
        assert_eq!(stop_after(&p, asked + 10_000), Some((Duration::from_secs(20), true)), "counted from the request");
        assert_eq!(stop_after(&p, asked + 99_000), Some((Duration::ZERO, true)), "overdue: at once");
        p.metadata.annotations = Some([(STOP_SECONDS_ANNOTATION.to_string(), "5".to_string())].into());
        assert_eq!(stop_after(&p, asked), Some((Duration::from_secs(5), false)));
        // Force deletion (grace 0): at once.
        p.metadata.deletion_grace_period_seconds = Some(0);
        p.metadata.deletion_timestamp = Some(serde_json::from_value(json!("2026-01-01T10:00:00Z")).expect("time"));
        assert_eq!(stop_after(&p, asked), Some((Duration::ZERO, true)));
        let s = stopped_status(&p, true, "2026-01-01T10:00:31Z");
        assert_eq!(s["status"]["phase"], "Failed");
        assert_eq!(s["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 137);
        let typed: Result<k8s_openapi::api::core::v1::PodStatus, _> = serde_json::from_value(s["status"].clone());
        assert!(typed.is_ok());
    }

    #[test]
    fn pod_ips_are_unique() {
        let ips: HashSet<String> = (0..200_000).map(pod_ip).collect();
        assert_eq!(ips.len(), 200_000);
    }
}
