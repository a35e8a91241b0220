//! Host PID → pod: reads `/proc/<pid>/cgroup` and recognises the kubelet's cgroup layout
//! (v1 and v2, cgroupfs and systemd drivers, containerd / CRI-O / docker-shim).
//!
//! NVML reports host PIDs. The DaemonSet runs with `hostPID: true` and mounts the host's
//! /proc at /host/proc, so the proc root is a parameter rather than a hard-coded "/proc".
//! The cgroup gives the pod uid and container id; [`with_names`] adds namespace, pod and
//! container names from the container's OCI config as the runtime keeps it on the host
//! (containerd's task bundle, CRI-O's userdata), so no API access is needed for them.

use std::io::Read;
use std::path::Path;

use super::wire::PodRef;

/// /proc/PID/cgroup is a few hundred bytes; cap the read so a hostile or odd file
/// cannot make the agent allocate without bound.
const MAX_CGROUP_FILE: u64 = 64 * 1024;

/// The pod a host process belongs to, or `None` for host processes, vanished PIDs and
/// unreadable files (a PID can exit between NVML listing it and us reading /proc).
pub fn pod_of_pid(proc_root: &Path, pid: u32) -> Option<PodRef> {
    let path = proc_root.join(pid.to_string()).join("cgroup");
    let file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_CGROUP_FILE).read_to_end(&mut bytes).ok()?;
    parse_cgroup(&String::from_utf8_lossy(&bytes))
}

/// Where the runtimes keep each running container's OCI config, under the host root.
const OCI_CONFIGS: [&str; 3] = [
    "run/containerd/io.containerd.runtime.v2.task/k8s.io/{id}/config.json",
    "run/containers/storage/overlay-containers/{id}/userdata/config.json",
    "var/lib/containers/storage/overlay-containers/{id}/userdata/config.json",
];
/// An OCI config is tens of KiB; more than this is not one.
const MAX_OCI_CONFIG: u64 = 4 << 20;

/// Fills the pod's namespace and name and the container's name from the container's OCI
/// config under `host_root` (`/host` in the DaemonSet, where the runtimes' state is
/// mounted read-only). Leaves them `None` when the config cannot be found or read.
pub fn with_names(host_root: &Path, mut pod: PodRef) -> PodRef {
    let Some(id) = pod.container_id.clone().filter(|id| id.bytes().all(|b| b.is_ascii_hexdigit())) else {
        return pod;
    };
    for pattern in OCI_CONFIGS {
        let path = host_root.join(pattern.replace("{id}", &id));
        let Ok(file) = std::fs::File::open(&path) else { continue };
        let mut bytes = Vec::new();
        if file.take(MAX_OCI_CONFIG).read_to_end(&mut bytes).is_err() {
            continue;
        }
        if let Some((ns, name, container)) = names_from_oci_config(&bytes) {
            pod.namespace = Some(ns);
            pod.name = Some(name);
            pod.container = container.or(pod.container);
            return pod;
        }
    }
    pod
}

/// (namespace, pod, container) from an OCI config's annotations: containerd's
/// `io.kubernetes.cri.sandbox-*`, or CRI-O's `io.kubernetes.cri-o.Labels` (a JSON string
/// holding the kubelet's `io.kubernetes.pod.*` labels).
pub fn names_from_oci_config(bytes: &[u8]) -> Option<(String, String, Option<String>)> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let a = v.get("annotations")?;
    let s =
        |m: &serde_json::Value, k: &str| m.get(k).and_then(|x| x.as_str()).filter(|x| !x.is_empty()).map(String::from);
    if let (Some(ns), Some(name)) =
        (s(a, "io.kubernetes.cri.sandbox-namespace"), s(a, "io.kubernetes.cri.sandbox-name"))
    {
        return Some((ns, name, s(a, "io.kubernetes.cri.container-name")));
    }
    let labels: serde_json::Value = serde_json::from_str(a.get("io.kubernetes.cri-o.Labels")?.as_str()?).ok()?;
    Some((
        s(&labels, "io.kubernetes.pod.namespace")?,
        s(&labels, "io.kubernetes.pod.name")?,
        s(&labels, "io.kubernetes.container.name"),
    ))
}

/// Parse the text of a /proc/PID/cgroup file. Every line is `hierarchy:controllers:path`.
/// A line that names a container beats one that names only the pod (v1 files list many
/// controllers, some of which may stop at the pod level).
pub fn parse_cgroup(text: &str) -> Option<PodRef> {
    let mut best: Option<PodRef> = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_hierarchy), Some(_controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if let Some(found) = parse_path(path.trim()) {
            if found.container_id.is_some() {
                return Some(found);
            }
            best.get_or_insert(found);
        }
    }
    best
}

/// One cgroup path, e.g. `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice/cri-containerd-<id>.scope`.
fn parse_path(path: &str) -> Option<PodRef> {
    let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    // Require evidence that this is the kubelet's tree, so a host unit that merely
    // looks like `pod<hex>` is not mistaken for a pod. `..` appears when the agent reads
    // the file from inside its own cgroup namespace (cgroup v2 default): paths are then
    // relative to the agent's cgroup, and the `kubepods` ancestors may be cut off.
    let mut kube_context = false;
    for (i, component) in components.iter().enumerate() {
        if let Some(uid) = pod_uid_of_component(component, kube_context) {
            let container_id = components.get(i + 1).and_then(|c| container_id_of_component(c));
            return Some(PodRef { uid, namespace: None, name: None, container_id, container: None });
        }
        if component.contains("kubepods") || *component == ".." {
            kube_context = true;
        }
    }
    None
}

/// `pod<uid>` (cgroupfs driver, only under a kubepods ancestor) or
/// `kubepods[-<qos>]-pod<uid_with_underscores>.slice` (systemd driver).
fn pod_uid_of_component(component: &str, kube_context: bool) -> Option<String> {
    if let Some(slice) = component.strip_suffix(".slice") {
        // systemd: the kubelet escapes the uid's dashes as '_' because '-' is systemd's
        // hierarchy separator in slice names.
        if !slice.contains("kubepods") {
            return None;
        }
        let (_, raw) = slice.rsplit_once("-pod")?;
        return normalise_uid(&raw.replace('_', "-"));
    }
    if kube_context {
        return normalise_uid(component.strip_prefix("pod")?);
    }
    None
}

/// A pod uid: an RFC 4122 UUID (8-4-4-4-12 hex) for API pods, or 32 hex digits for static
/// pods (their uid is a hash of the manifest). Lower-cased; anything else is rejected.
fn normalise_uid(raw: &str) -> Option<String> {
    let uid = raw.to_ascii_lowercase();
    let bytes = uid.as_bytes();
    let is_uuid = bytes.len() == 36
        && bytes.iter().enumerate().all(
            |(i, b)| {
                if matches!(i, 8 | 13 | 18 | 23) { *b == b'-' } else { b.is_ascii_hexdigit() }
            },
        );
    let is_hash = bytes.len() == 32 && bytes.iter().all(u8::is_ascii_hexdigit);
    (is_uuid || is_hash).then_some(uid)
}

/// The container id (bare 64-hex, no runtime prefix) from the component under the pod:
/// `<id>` (cgroupfs), `cri-containerd-<id>.scope`, `crio-<id>.scope` / `crio-<id>`,
/// `docker-<id>.scope`. `crio-conmon-<id>.scope` is CRI-O's monitor process, not a
/// container, so it yields no container id (the process still belongs to the pod).
fn container_id_of_component(component: &str) -> Option<String> {
    if component.starts_with("crio-conmon-") {
        return None;
    }
    let base = component.strip_suffix(".scope").unwrap_or(component);
    let id = ["cri-containerd-", "crio-", "docker-", "containerd-"]
        .iter()
        .find_map(|prefix| base.strip_prefix(prefix))
        .unwrap_or(base);
    let valid = id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit());
    valid.then(|| id.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "8dbc5577-d0e2-4706-8787-57d52c03ddf2";
    const UID_: &str = "8dbc5577_d0e2_4706_8787_57d52c03ddf2";
    const CID: &str = "c5a5f0e3b6d1a4f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5";

    /// (pod uid, container id) expected from one input.
    type Want = Option<(String, Option<String>)>;

    fn expect(uid: Option<&str>, cid: Option<&str>) -> Want {
        uid.map(|u| (u.to_string(), cid.map(str::to_string)))
    }

    #[test]
    fn table() {
        let static_uid = "6f1c4f1e1d7e4c6a9b2d3e4f5a6b7c8d";
        let cases: Vec<(String, Want)> = vec![
            // cgroup v1, cgroupfs driver, burstable.
            (format!("12:memory:/kubepods/burstable/pod{UID}/{CID}"), expect(Some(UID), Some(CID))),
            // cgroup v1, guaranteed QoS has no QoS level in the path.
            (format!("4:cpu,cpuacct:/kubepods/pod{UID}/{CID}"), expect(Some(UID), Some(CID))),
            // v1 besteffort, full multi-line file; the pids line stops at the pod.
            (
                format!(
                    "12:pids:/kubepods/besteffort/pod{UID}\n11:devices:/kubepods/besteffort/pod{UID}/{CID}\n1:name=systemd:/kubepods/besteffort/pod{UID}/{CID}\n0::/"
                ),
                expect(Some(UID), Some(CID)),
            ),
            // cgroup v2, systemd driver, containerd.
            (
                format!(
                    "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/cri-containerd-{CID}.scope"
                ),
                expect(Some(UID), Some(CID)),
            ),
            // v2 systemd guaranteed.
            (
                format!("0::/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{CID}.scope"),
                expect(Some(UID), Some(CID)),
            ),
            // v2 systemd besteffort, CRI-O.
            (
                format!(
                    "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/crio-{CID}.scope"
                ),
                expect(Some(UID), Some(CID)),
            ),
            // CRI-O's conmon: the pod, but not a container.
            (
                format!(
                    "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/crio-conmon-{CID}.scope"
                ),
                expect(Some(UID), None),
            ),
            // v1 systemd driver with docker-shim.
            (
                format!(
                    "9:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/docker-{CID}.scope"
                ),
                expect(Some(UID), Some(CID)),
            ),
            // v2 cgroupfs driver, containerd.
            (format!("0::/kubepods/burstable/pod{UID}/{CID}"), expect(Some(UID), Some(CID))),
            // v2 read inside the agent's own cgroup namespace: relative path.
            (
                format!("0::/../../kubepods-besteffort-pod{UID_}.slice/cri-containerd-{CID}.scope"),
                expect(Some(UID), Some(CID)),
            ),
            (format!("0::/../../pod{UID}/{CID}"), expect(Some(UID), Some(CID))),
            // Nested cgroup inside the container (e.g. systemd in the container).
            (
                format!("0::/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{CID}.scope/init.scope"),
                expect(Some(UID), Some(CID)),
            ),
            // kind / kubelet under its own root slice.
            (
                format!(
                    "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod{UID_}.slice/cri-containerd-{CID}.scope"
                ),
                expect(Some(UID), Some(CID)),
            ),
            // Pause / pod-level process.
            (format!("0::/kubepods.slice/kubepods-pod{UID_}.slice"), expect(Some(UID), None)),
            // Static pod: uid is a 32-hex hash.
            (format!("0::/kubepods/burstable/pod{static_uid}/{CID}"), expect(Some(static_uid), Some(CID))),
            // Upper-case input is normalised.
            (format!("0::/kubepods/pod{}/{}", UID.to_uppercase(), CID.to_uppercase()), expect(Some(UID), Some(CID))),
            // Non-hex container component: pod known, container not.
            (format!("0::/kubepods/pod{UID}/not-a-container"), expect(Some(UID), None)),
            // Host processes.
            ("0::/system.slice/containerd.service".to_string(), None),
            ("0::/user.slice/user-1000.slice/session-3.scope".to_string(), None),
            ("0::/".to_string(), None),
            ("12:memory:/\n11:pids:/system.slice/kubelet.service".to_string(), None),
            // `pod<uuid>` outside any kubepods tree is not trusted.
            (format!("0::/system.slice/pod{UID}/{CID}"), None),
            // Malformed.
            ("".to_string(), None),
            ("garbage without colons".to_string(), None),
            ("0::/kubepods/burstable/pod1234/abc".to_string(), None),
            ("0::/kubepods.slice/kubepods-burstable-pod.slice".to_string(), None),
            (format!("0::/kubepods.slice/kubepods-burstable-pod{UID_}x.slice"), None),
            ("::::::".to_string(), None),
        ];
        assert!(cases.len() >= 12);
        for (line, want) in cases {
            let got = parse_cgroup(&line).map(|p| (p.uid, p.container_id));
            assert_eq!(got, want, "input: {line:?}");
        }
    }

    #[test]
    fn pod_ref_has_only_ids() {
        let p = parse_cgroup(&format!("0::/kubepods/pod{UID}/{CID}")).expect("parses");
        assert_eq!((p.namespace, p.name, p.container), (None, None, None));
    }

    #[test]
    fn reads_from_a_proc_root() {
        let root = std::env::temp_dir().join(format!("fabrik-procmap-{}", std::process::id()));
        let dir = root.join("4242");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(
            dir.join("cgroup"),
            format!("0::/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{CID}.scope\n"),
        )
        .expect("write");
        let got = pod_of_pid(&root, 4242).map(|p| p.uid);
        let missing = pod_of_pid(&root, 4243);
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(got.as_deref(), Some(UID));
        assert_eq!(missing, None);
    }

    #[test]
    fn names_come_from_the_runtimes_oci_config() {
        let containerd = br#"{"ociVersion":"1.1.0","annotations":{"io.kubernetes.cri.container-type":"container",
            "io.kubernetes.cri.sandbox-namespace":"inference-prod","io.kubernetes.cri.sandbox-name":"vllm-0",
            "io.kubernetes.cri.container-name":"vllm"}}"#;
        assert_eq!(
            names_from_oci_config(containerd),
            Some(("inference-prod".into(), "vllm-0".into(), Some("vllm".into())))
        );
        let crio = br#"{"annotations":{"io.kubernetes.cri-o.Labels":"{\"io.kubernetes.pod.namespace\":\"research\",\"io.kubernetes.pod.name\":\"jupyter-1\",\"io.kubernetes.container.name\":\"notebook\"}"}}"#;
        assert_eq!(names_from_oci_config(crio), Some(("research".into(), "jupyter-1".into(), Some("notebook".into()))));
        assert_eq!(names_from_oci_config(br#"{"annotations":{}}"#), None);
        assert_eq!(names_from_oci_config(b"not json"), None);

        // On a host root laid out as containerd keeps it.
        let root = std::env::temp_dir().join(format!("fabrik-oci-{}", std::process::id()));
        let bundle = root.join(format!("run/containerd/io.containerd.runtime.v2.task/k8s.io/{CID}"));
        std::fs::create_dir_all(&bundle).expect("mkdir");
        std::fs::write(bundle.join("config.json"), containerd).expect("write");
        let pod =
            PodRef { uid: UID.into(), namespace: None, name: None, container_id: Some(CID.into()), container: None };
        let named = with_names(&root, pod.clone());
        let unknown = with_names(&root, PodRef { container_id: Some("abc123".into()), ..pod.clone() });
        let hostile = with_names(&root, PodRef { container_id: Some("../../etc".into()), ..pod });
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!((named.namespace.as_deref(), named.name.as_deref()), (Some("inference-prod"), Some("vllm-0")));
        assert_eq!(named.container.as_deref(), Some("vllm"));
        assert_eq!(unknown.name, None, "no config, no name");
        assert_eq!(hostile.name, None, "a container id is hex, never a path");
    }

    /// No panics on arbitrary input: a small xorshift fuzz loop, biased towards the
    /// characters the parser cares about so it reaches deep branches.
    #[test]
    fn fuzz_no_panic() {
        let alphabet: &[u8] = b"0123456789abcdef-_:/.\npodkubes.slicescopecri-containerd-crio-conmon-\xff\xfe";
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let len = (next() % 200) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    let r = next();
                    if r % 4 == 0 { (r >> 8) as u8 } else { alphabet[(r >> 8) as usize % alphabet.len()] }
                })
                .collect();
            let _ = parse_cgroup(&String::from_utf8_lossy(&bytes));
        }
        // Mutations of a valid line.
        let valid = format!("0::/kubepods.slice/kubepods-burstable-pod{UID_}.slice/cri-containerd-{CID}.scope");
        for _ in 0..5_000 {
            let mut b = valid.clone().into_bytes();
            let pos = (next() as usize) % b.len();
            b[pos] = next() as u8;
            b.truncate((next() as usize) % (b.len() + 1));
            let _ = parse_cgroup(&String::from_utf8_lossy(&b));
        }
    }
}
