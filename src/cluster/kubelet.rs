//! What a kubelet (1.30 and later) says of a container it cannot start or keep running, in
//! its words: the demo simulator and `fabrik sim`'s kubelets both say it this way, so the
//! cockpit reads the same text from either. And how kubectl counts what the kubelet reports
//! of restarts.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use crate::model::{Restarts, Ts};

/// The registry an image is pulled from: its first path part when that names a host (has a
/// `.` or `:`, or is `localhost`), else Docker Hub.
fn registry_of(image: &str) -> &str {
    match image.split_once('/') {
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => first,
        _ => "docker.io",
    }
}

/// Why the kubelet cannot pull `image`, or `None` when it can: here, an image of a registry
/// under `.invalid` (RFC 2606: such a name never resolves), whose lookup fails as it would
/// on a real node. The error is containerd's, as the kubelet passes it on.
pub fn pull_error(image: &str) -> Option<String> {
    let host = registry_of(image).split(':').next().unwrap_or("");
    (host == "invalid" || host.ends_with(".invalid")).then(|| {
        format!("failed to pull and unpack image \"{image}\": failed to resolve reference \"{image}\": dial tcp: lookup {host}: no such host")
    })
}

/// The waiting message of a container in ImagePullBackOff after `error`.
pub fn pull_back_off(image: &str, error: &str) -> String {
    format!("Back-off pulling image \"{image}\": ErrImagePull: {error}")
}

/// The back-off before restart `restarts` + 1: 10 s, doubling, at most 5 min.
pub fn back_off_secs(restarts: u32) -> u32 {
    (10u32 << restarts.saturating_sub(1).min(5)).min(300)
}

/// A duration as Go prints it (`time.Duration.String`), which the kubelet's messages carry:
/// `40s`, `1m20s`, `5m0s`.
fn go_duration(secs: u32) -> String {
    match (secs / 60, secs % 60) {
        (0, s) => format!("{s}s"),
        (m, s) => format!("{m}m{s}s"),
    }
}

/// What the kubelet says of a container it restarts after a back-off of `secs`: its waiting
/// message (CrashLoopBackOff) and its Warning `BackOff` Event. `pod` is the kubelet's
/// `name_namespace(uid)`.
pub fn crash_back_off(container: &str, pod: &str, secs: u32) -> (String, String) {
    (
        format!("back-off {} restarting failed container={container} pod={pod}", go_duration(secs)),
        format!("Back-off restarting failed container {container} in pod {pod}"),
    )
}

/// A pod's restarts as `kubectl get pods` counts them (its printer's RESTARTS), with when
/// the last counted container exited:
/// - while the pod initialises (an init container not done, and no `Initialized` condition
///   True), the restarts of the init containers up to the first one not done;
/// - after, those of its sidecars (init containers with `restartPolicy: Always`) and of its
///   containers.
pub fn restarts(p: &Pod) -> Restarts {
    let Some(st) = p.status.as_ref() else { return Restarts::default() };
    let finished = |c: &ContainerStatus| {
        let t = c.last_state.as_ref()?.terminated.as_ref()?.finished_at.as_ref()?;
        u64::try_from(t.0.as_millisecond()).ok()
    };
    let count = |c: &ContainerStatus| u32::try_from(c.restart_count).unwrap_or(0);
    let sidecar = |name: &str| {
        let inits = p.spec.as_ref().and_then(|s| s.init_containers.as_ref());
        inits.into_iter().flatten().any(|c| c.name == name && c.restart_policy.as_deref() == Some("Always"))
    };
    let (mut all, mut all_last) = (0u32, None::<Ts>);
    let (mut sidecars, mut sidecars_last) = (0u32, None::<Ts>);
    let mut initializing = false;
    for c in st.init_container_statuses.iter().flatten() {
        all = all.saturating_add(count(c));
        all_last = all_last.max(finished(c));
        let is_sidecar = sidecar(&c.name);
        if is_sidecar {
            sidecars = sidecars.saturating_add(count(c));
            sidecars_last = sidecars_last.max(finished(c));
        }
        let state = c.state.as_ref();
        let done = state.and_then(|s| s.terminated.as_ref()).is_some_and(|t| t.exit_code == 0);
        if done || (is_sidecar && c.started == Some(true)) {
            continue;
        }
        initializing = true;
        break;
    }
    let initialized = st.conditions.iter().flatten().any(|c| c.type_ == "Initialized" && c.status == "True");
    if initializing && !initialized {
        return Restarts::new(all, all_last);
    }
    let (mut n, mut last) = (sidecars, sidecars_last);
    for c in st.container_statuses.iter().flatten() {
        n = n.saturating_add(count(c));
        last = last.max(finished(c));
    }
    Restarts::new(n, last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_of_a_registry_that_never_resolves_cannot_be_pulled() {
        assert_eq!(registry_of("nvcr.io/nvidia/pytorch:25.01-py3"), "nvcr.io");
        assert_eq!(registry_of("busybox:1.36"), "docker.io");
        assert_eq!(registry_of("library/busybox"), "docker.io");
        assert_eq!(registry_of("localhost:5000/x"), "localhost:5000");
        assert!(pull_error("nvcr.io/nvidia/pytorch:25.01-py3").is_none());
        assert!(pull_error("busybox.invalid").is_none(), "a Docker Hub name, not a registry");
        let e = pull_error("registry.invalid:5000/team/train:1").expect("never resolves");
        assert!(e.ends_with("lookup registry.invalid: no such host"), "{e}");
    }

    #[test]
    fn the_back_off_doubles_to_five_minutes_and_reads_as_go_prints_it() {
        assert_eq!((1..=7).map(back_off_secs).collect::<Vec<_>>(), [10, 20, 40, 80, 160, 300, 300]);
        let said = |n| crash_back_off("main", "p_ns(u-1)", back_off_secs(n)).0;
        assert_eq!(said(3), "back-off 40s restarting failed container=main pod=p_ns(u-1)");
        assert!(said(4).starts_with("back-off 1m20s "), "{}", said(4));
        assert!(said(9).starts_with("back-off 5m0s "), "{}", said(9));
        assert_eq!(
            crash_back_off("main", "p_ns(u-1)", 10).1,
            "Back-off restarting failed container main in pod p_ns(u-1)"
        );
    }

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).expect("a pod")
    }

    #[test]
    fn restarts_count_as_kubectl_counts_them() {
        let ms = |t: &str| t.parse::<jiff::Timestamp>().map(|t| t.as_millisecond() as u64).ok();
        let exited = |n: u32, at: &str| {
            serde_json::json!({"name": format!("c{n}"), "image": "i", "imageID": "", "ready": false, "restartCount": n,
                "state": {"running": {}}, "lastState": {"terminated": {"exitCode": 1, "finishedAt": at}}})
        };
        // The containers' restarts add up; the latest exit is the last.
        let p = pod(serde_json::json!({"metadata": {"name": "a"}, "status": {"containerStatuses": [
            exited(2, "2026-12-07T10:00:00Z"), exited(3, "2026-12-07T11:00:00Z"), exited(0, "2026-12-07T09:00:00Z")]}}));
        assert_eq!(restarts(&p), Restarts::new(5, ms("2026-12-07T11:00:00Z")));
        // No status, or no exit said: a count without a time.
        assert_eq!(restarts(&pod(serde_json::json!({"metadata": {"name": "a"}}))), Restarts::default());
        let p = pod(serde_json::json!({"metadata": {"name": "a"}, "status": {"containerStatuses": [
            {"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 1}]}}));
        assert_eq!((restarts(&p).count, restarts(&p).last_exit()), (1, None));
        // Initialising: the init containers up to the first not done count, the containers not.
        let init = |n: u32, state: serde_json::Value| {
            serde_json::json!({"name": format!("i{n}"), "image": "i", "imageID": "", "ready": false, "restartCount": n,
                "state": state})
        };
        let p = pod(serde_json::json!({"metadata": {"name": "a"}, "status": {
            "initContainerStatuses": [init(1, serde_json::json!({"terminated": {"exitCode": 0}})),
                init(2, serde_json::json!({"waiting": {"reason": "CrashLoopBackOff"}})), init(4, serde_json::json!({}))],
            "containerStatuses": [exited(7, "2026-12-07T11:00:00Z")]}}));
        assert_eq!(restarts(&p).count, 3, "1 + 2: the third init container has not run, the container neither");
        // Once the pod says it is initialised, the containers' count.
        let mut p = p;
        if let Some(st) = p.status.as_mut() {
            st.conditions = Some(vec![
                serde_json::from_value(serde_json::json!({"type": "Initialized", "status": "True"}))
                    .expect("a condition"),
            ]);
        }
        assert_eq!(restarts(&p), Restarts::new(7, ms("2026-12-07T11:00:00Z")));
    }
}
