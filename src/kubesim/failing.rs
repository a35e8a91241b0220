//! Containers the simulated kubelet cannot start or keep running, as a real kubelet reports
//! them: an image it cannot pull (ImagePullBackOff, the pod Pending) and a container that
//! exits with an error each time it starts (CrashLoopBackOff, the pod Running).

use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::{Value, json};

use super::kubelet::waiting_status;
use crate::cluster::kubelet::{back_off_secs, crash_back_off, pull_back_off, pull_error};

/// A pod's first container whose image cannot be pulled, with the error.
pub fn unpullable(pod: &Pod) -> Option<(String, String)> {
    let spec = pod.spec.as_ref()?;
    let all = spec.init_containers.iter().flatten().chain(spec.containers.iter());
    all.filter_map(|c| c.image.clone()).find_map(|i| pull_error(&i).map(|e| (i, e)))
}

/// The status of a pod whose image the kubelet cannot pull: Pending, that container in
/// ImagePullBackOff (`Back-off pulling image "…": ErrImagePull: <error>`, as the kubelet
/// of 1.30 and later says it), the others being created.
pub fn pull_backoff_status(pod: &Pod, now: &str) -> Value {
    waiting_status(pod, now, |c| {
        let image = c.image.clone().unwrap_or_default();
        match pull_error(&image) {
            Some(e) => json!({ "reason": "ImagePullBackOff", "message": pull_back_off(&image, &e) }),
            None => json!({ "reason": "ContainerCreating" }),
        }
    })
}

/// Whether `c` exits with an error each time it starts: here, a container whose command is
/// `false` (`/bin/false`, `/usr/bin/false`), which exits 1.
fn exits_at_once(c: &Container) -> bool {
    let first = c.command.as_ref().and_then(|cmd| cmd.first());
    first.is_some_and(|cmd| cmd == "false" || cmd.ends_with("/false"))
}

/// The first container of a pod whose containers the kubelet restarts (`restartPolicy`
/// Always or OnFailure) that exits with an error each time it starts. Its init containers
/// run once and are not read; a pod that is not restarted is not either.
pub fn crash_looping(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if spec.restart_policy.as_deref() == Some("Never") {
        return None;
    }
    spec.containers.iter().find(|c| exits_at_once(c)).map(|c| c.name.clone())
}

/// The kubelet's words for `container` of `pod` restarting after a back-off of `secs`
/// (its waiting message and its BackOff Event), the pod named as the kubelet names it.
pub fn back_off_words(pod: &Pod, container: &str, secs: u32) -> (String, String) {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    crash_back_off(container, &format!("{name}_{ns}({uid})"), secs)
}

/// `running` (the status of the pod with its containers running) with `container` crashed:
/// it exited 1 after it started (`lastState`), was restarted `restarts` times and now
/// waits out its back-off in CrashLoopBackOff, not ready. The phase stays Running, as the
/// kubelet keeps it while it restarts the container.
pub fn crash_loop_status(mut running: Value, pod: &Pod, container: &str, restarts: u32, now: &str) -> Value {
    let (message, _) = back_off_words(pod, container, back_off_secs(restarts));
    let st = &mut running["status"];
    if let Some(all) = st["containerStatuses"].as_array_mut() {
        for c in all.iter_mut().filter(|c| c["name"] == container) {
            let id = c["containerID"].clone();
            c["ready"] = false.into();
            c["started"] = false.into();
            c["restartCount"] = restarts.into();
            c["state"] = json!({ "waiting": { "reason": "CrashLoopBackOff", "message": message } });
            c["lastState"] = json!({ "terminated": { "exitCode": 1, "reason": "Error", "startedAt": now,
                "finishedAt": now, "containerID": id } });
        }
    }
    if let Some(conds) = st["conditions"].as_array_mut() {
        for c in conds.iter_mut().filter(|c| c["type"] == "Ready" || c["type"] == "ContainersReady") {
            c["status"] = "False".into();
            c["reason"] = "ContainersNotReady".into();
            c["message"] = format!("containers with unready status: [{container}]").into();
        }
    }
    running
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": { "name": "p", "namespace": "ns", "uid": "u-1" },
            "spec": { "nodeName": "h100-0000", "containers": [{ "name": "main", "image": "nvcr.io/x/y:1" }] },
        }))
        .expect("pod")
    }

    fn s(v: &Value) -> String {
        v.as_str().unwrap_or_default().to_string()
    }

    #[test]
    fn an_image_of_a_registry_that_never_resolves_cannot_be_pulled() {
        let mut p = pod();
        assert!(unpullable(&p).is_none());
        if let Some(c) = p.spec.as_mut().and_then(|s| s.containers.first_mut()) {
            c.image = Some("registry.invalid/team/train:1".into());
        }
        let (image, _) = unpullable(&p).expect("its image");
        assert_eq!(image, "registry.invalid/team/train:1");
        let st = &pull_backoff_status(&p, "2026-01-01T00:00:00Z")["status"];
        assert_eq!(st["phase"], "Pending");
        let w = &st["containerStatuses"][0]["state"]["waiting"];
        assert_eq!(w["reason"], "ImagePullBackOff");
        assert!(
            s(&w["message"]).starts_with("Back-off pulling image \"registry.invalid/team/train:1\": ErrImagePull: ")
        );
        // An init container's image: it backs off, the others wait for it (as a kubelet says).
        let mut p = pod();
        if let Some(spec) = p.spec.as_mut() {
            let init = serde_json::from_value(json!({ "name": "fetch", "image": "registry.invalid/team/fetch:1" }));
            spec.init_containers = Some(vec![init.expect("container")]);
        }
        assert_eq!(unpullable(&p).map(|(i, _)| i).as_deref(), Some("registry.invalid/team/fetch:1"));
        let st = &pull_backoff_status(&p, "2026-01-01T00:00:00Z")["status"];
        assert_eq!(st["initContainerStatuses"][0]["state"]["waiting"]["reason"], "ImagePullBackOff");
        assert_eq!(st["containerStatuses"][0]["state"]["waiting"]["reason"], "PodInitializing");
    }

    #[test]
    fn a_container_that_exits_at_once_crash_loops_while_the_pod_runs() {
        let mut p = pod();
        assert_eq!(crash_looping(&p), None);
        if let Some(spec) = p.spec.as_mut() {
            let sidecar = serde_json::from_value(json!({ "name": "log", "image": "busybox:1.36" }));
            spec.containers.insert(0, sidecar.expect("container"));
            spec.containers[1].command = Some(vec!["/bin/false".into()]);
        }
        assert_eq!(crash_looping(&p).as_deref(), Some("main"));
        let running = super::super::kubelet::running_status(&p, "10.0.0.1", "10.1.0.1", "2026-01-01T00:00:00Z");
        let st = &crash_loop_status(running, &p, "main", 3, "2026-01-01T00:01:00Z")["status"];
        assert_eq!(st["phase"], "Running");
        assert!(st["containerStatuses"][0]["state"]["running"].is_object(), "the sidecar runs");
        let c = &st["containerStatuses"][1];
        assert_eq!((c["ready"].clone(), c["restartCount"].clone()), (json!(false), json!(3)));
        assert_eq!(c["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert_eq!(s(&c["state"]["waiting"]["message"]), "back-off 40s restarting failed container=main pod=p_ns(u-1)");
        assert_eq!(c["lastState"]["terminated"]["exitCode"], 1);
        let ready = st["conditions"].as_array().and_then(|a| a.iter().find(|c| c["type"] == "Ready")).cloned();
        assert_eq!(ready.map(|r| r["status"].clone()), Some(json!("False")));
        // A pod that is never restarted does not loop.
        if let Some(spec) = p.spec.as_mut() {
            spec.restart_policy = Some("Never".into());
        }
        assert_eq!(crash_looping(&p), None);
    }
}
