//! What a kubelet (1.30 and later) says of a container it cannot start or keep running, in
//! its words: the demo simulator and `fabrik sim`'s kubelets both say it this way, so the
//! cockpit reads the same text from either.

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
}
