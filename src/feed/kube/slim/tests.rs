use super::*;
use crate::feed::kube::translate;

/// A pod as the API server returns it (recorded from `fabrik sim`'s workload on the test
/// control plane), with every field the translator reads set: managed fields, probes, env and
/// conditions to skip; labels, a mirror annotation among others, a controller reference,
/// deletion, finalizers, an emptyDir, whole-GPU and MIG requests, DRA claims by name and by
/// template, and an init container backing off while the app container waits.
const FULL: &str = r#"{
 "apiVersion": "v1", "kind": "Pod",
 "metadata": {
  "name": "ranker-0", "namespace": "recsys", "uid": "d2cb7fc7-798f-43b0-9a69-99a26f8eb0a1",
  "resourceVersion": "4646", "generation": 1, "creationTimestamp": "2026-12-07T11:46:15Z",
  "deletionTimestamp": "2026-12-07T11:50:00Z", "deletionGracePeriodSeconds": 30,
  "labels": {"app": "ranker", "fabrik.io/sim-workload": "true", "release": "vc-1"},
  "annotations": {"kubernetes.io/config.mirror": "abc", "kubectl.kubernetes.io/last-applied-configuration": "{\"big\": [1, 2, {\"x\": null}]}"},
  "ownerReferences": [
   {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "other", "uid": "u1"},
   {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "ranker", "uid": "u2", "controller": true, "blockOwnerDeletion": true}
  ],
  "finalizers": ["fabrik.io/hold"],
  "managedFields": [{"manager": "unknown", "operation": "Update", "apiVersion": "v1", "time": "2026-12-07T11:46:15Z",
   "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}]
 },
 "spec": {
  "volumes": [
   {"name": "kube-api-access-gpxkx", "projected": {"sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}], "defaultMode": 420}},
   {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}
  ],
  "initContainers": [{"name": "fetch", "image": "registry.invalid/fetch:1", "resources": {}}],
  "containers": [
   {"name": "main", "image": "nvcr.io/nvidia/merlin/merlin-tensorflow:25.01", "command": ["sleep", "infinity"],
    "env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
    "resources": {"requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}, "claims": [{"name": "gpu"}]},
    "livenessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 10},
    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
    "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent"},
   {"name": "side", "image": "x", "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1", "nvidia.com/gpu.shared": "1"}}}
  ],
  "restartPolicy": "Always", "terminationGracePeriodSeconds": 5, "nodeName": "a100-0123",
  "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
  "resourceClaims": [{"name": "gpu", "resourceClaimName": "ranker-0-gpu"}, {"name": "more", "resourceClaimTemplateName": "two-gpus"}]
 },
 "status": {
  "phase": "Pending",
  "conditions": [{"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-12-07T11:46:22Z"}],
  "hostIP": "172.16.0.133", "hostIPs": [{"ip": "172.16.0.133"}], "startTime": "2026-12-07T11:46:22Z",
  "resourceClaimStatuses": [{"name": "more", "resourceClaimName": "ranker-0-more-x7k2p"}],
  "initContainerStatuses": [{"name": "fetch", "image": "registry.invalid/fetch:1", "imageID": "", "ready": false, "restartCount": 2,
   "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}},
   "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": "2026-12-07T11:47:50Z", "finishedAt": "2026-12-07T11:48:00Z"}}}],
  "containerStatuses": [{"name": "main", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
   "state": {"waiting": {"reason": "PodInitializing"}}, "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}],
  "qosClass": "Burstable"
 }
}"#;

#[test]
fn the_translator_sees_the_same_pod_decoded_slim_or_whole() {
    let full: Pod = serde_json::from_str(FULL).expect("k8s-openapi decodes the fixture");
    let slim: FeedPod = serde_json::from_str(FULL).expect("the feed decodes the fixture");
    let (a, b) = (translate::pod_spec(&full), translate::pod_spec(&slim.0));
    assert!(a.is_some());
    assert_eq!(a, b);
    // Initialising, its init container's restarts count (kubectl's RESTARTS `2 (… ago)`).
    let at = translate::ts(Some(&Time("2026-12-07T11:48:00Z".parse().expect("a time"))));
    assert_eq!(b.map(|p| p.restarts), Some(crate::model::Restarts::new(2, Some(at))));
    // What the watch and the vCluster rule read besides.
    assert_eq!(slim.0.metadata.resource_version.as_deref(), Some("4646"));
    assert_eq!(slim.0.metadata.labels, full.metadata.labels);
    // What is skipped.
    assert!(slim.0.metadata.managed_fields.is_none());
    assert_eq!(
        slim.0.metadata.annotations.as_ref().map(|a| a.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["kubernetes.io/config.mirror".to_string()])
    );
}

#[test]
fn every_recorded_shape_of_a_pod_decodes_the_same() {
    // Pods without status, spec or annotations, with null annotations, a running container,
    // and the bare minimum the API server could send.
    let cases = [
        r#"{"metadata": {"name": "a", "namespace": "n"}}"#,
        r#"{"metadata": {"name": "a", "namespace": "n", "annotations": null}, "spec": {"containers": []}}"#,
        r#"{"metadata": {"name": "a", "namespace": "n", "annotations": {}}, "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": true,
            "restartCount": 3, "state": {"running": {"startedAt": "2026-12-07T11:46:22Z"}}}]}}"#,
        r#"{"metadata": {"name": "a", "namespace": "n", "labels": {"job-name": "j"}}, "spec": {"containers": [
            {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}], "nodeName": ""},
            "status": {"phase": "Succeeded", "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}"#,
        // An init container waiting again, but the pod says it is initialised (its
        // containers' restarts count, 7), and one that does not (the init container's, 2).
        r#"{"metadata": {"name": "a", "namespace": "n"}, "spec": {"containers": [{"name": "c"}], "initContainers": [{"name": "i"}]},
            "status": {"conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Initialized", "status": "True"}],
            "initContainerStatuses": [{"name": "i", "image": "i", "imageID": "", "ready": false, "restartCount": 2,
             "state": {"waiting": {"reason": "PodInitializing"}}}],
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 7}]}}"#,
        r#"{"metadata": {"name": "a", "namespace": "n"}, "spec": {"containers": [{"name": "c"}], "initContainers": [{"name": "i"}]},
            "status": {"conditions": [{"type": "Initialized", "status": "False"}],
            "initContainerStatuses": [{"name": "i", "image": "i", "imageID": "", "ready": false, "restartCount": 2,
             "state": {"waiting": {"reason": "PodInitializing"}}}],
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 7}]}}"#,
        // Initialised, a sidecar (an init container restarted Always) and a container that
        // restarted: their restarts count, the one-shot init container's no longer.
        r#"{"metadata": {"name": "a", "namespace": "n"}, "spec": {"containers": [{"name": "c"}],
            "initContainers": [{"name": "once"}, {"name": "log", "restartPolicy": "Always"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}],
            "initContainerStatuses": [
             {"name": "once", "image": "i", "imageID": "", "ready": false, "restartCount": 4,
              "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-12-07T11:40:00Z"}}},
             {"name": "log", "image": "i", "imageID": "", "ready": true, "restartCount": 1, "started": true,
              "state": {"running": {}}, "lastState": {"terminated": {"exitCode": 137, "finishedAt": "2026-12-07T11:41:00Z"}}}],
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 5,
             "state": {"waiting": {"reason": "CrashLoopBackOff"}},
             "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-12-07T11:45:00Z"}}}]}}"#,
    ];
    for c in cases {
        let full: Pod = serde_json::from_str(c).expect(c);
        let slim: FeedPod = serde_json::from_str(c).expect(c);
        assert_eq!(translate::pod_spec(&full), translate::pod_spec(&slim.0), "{c}");
    }
    let count =
        |c: &str| translate::pod_spec(&serde_json::from_str::<FeedPod>(c).expect(c).0).map(|p| p.restarts.count);
    assert_eq!((count(cases[4]), count(cases[5])), (Some(7), Some(2)), "Initialized True, then False");
    let last = serde_json::from_str::<FeedPod>(cases[cases.len() - 1]).expect("the sidecar case");
    let r = translate::pod_spec(&last.0).map(|p| p.restarts).unwrap_or_default();
    let at = translate::ts(Some(&Time("2026-12-07T11:45:00Z".parse().expect("a time"))));
    assert_eq!((r.count, r.last_exit()), (6, Some(at)), "the sidecar's 1 and the container's 5");
}

#[test]
fn a_malformed_pod_is_refused_as_k8s_openapi_refuses_it() {
    for bad in [r#"{"metadata": {"name": 3}}"#, r#"{"spec": {"containers": {}}}"#, r#"{"metadata": {"labels": []}}"#] {
        assert!(serde_json::from_str::<Pod>(bad).is_err(), "{bad}");
        assert!(serde_json::from_str::<FeedPod>(bad).is_err(), "{bad}");
    }
}
