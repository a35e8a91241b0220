//! The baremetal-operator's power handling, for the BareMetalHosts labelled
//! `fabrik.io/simulated=true` (never any other): on a real API server, what Metal3 would
//! answer to fabrik's host operations. Each round (a second apart, as the operator's
//! requeues): a host with a `reboot.metal3.io` annotation is powered off (`status.poweredOn`);
//! once it is off the unsuffixed annotation is removed (suffixed ones stay: the host stays off
//! until their owners remove them); with no reboot annotation left, `status.poweredOn`
//! follows `spec.online` — except on a host in error (its BMC does not answer). Power is
//! managed only where the operator manages it (provisioned, externally provisioned,
//! available, ready); a reboot request counts only on a provisioned host (on an available one
//! the operator wants `force`, which fabrik never writes). An available host with
//! `inspect.metal3.io` goes to `inspecting` (`status.operationHistory.inspect` reset to this
//! start), the annotation is taken the round after (as the operator takes it once the
//! inspection started), and the round after that it is `available` again, the inspection's
//! end recorded. A host labelled with its node
//! (`fabrik.io/sim-node`, as `--factory` writes them) takes that node down while it is
//! powered off: its kubelet stops (Ready=False, no lease renewals) until the host is on
//! again. Without the CRD it waits quietly and looks again.

use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::cluster::labels;
use crate::cluster::metal3::{INSPECT_ANNOTATION, REBOOT_ANNOTATION};

/// What one round at `now` (RFC 3339) does to one host: a metadata patch, a status patch,
/// or nothing.
pub(crate) fn reconcile(o: &Value, now: &str) -> (Option<Value>, Option<Value>) {
    let Some(h) = crate::cluster::metal3::host(o) else { return (None, None) };
    let annotations = o["metadata"]["annotations"].as_object();
    let has = |k: &str| annotations.is_some_and(|a| a.contains_key(k));
    if h.state == "inspecting" {
        if has(INSPECT_ANNOTATION) {
            return (Some(json!({"metadata": {"annotations": {INSPECT_ANNOTATION: null}}})), None);
        }
        let done = json!({"provisioning": {"state": "available"}, "operationHistory": {"inspect": {"end": now}}});
        return (None, Some(json!({ "status": done })));
    }
    if h.inspect_pending && h.takes_inspect() {
        let start = json!({"provisioning": {"state": "inspecting"},
            "operationHistory": {"inspect": {"start": now, "end": null}}});
        return (None, Some(json!({ "status": start })));
    }
    if !h.manages_power() {
        return (None, None);
    }
    // An available host counts a reboot request only when forced (fabrik never forces).
    let provisioned = h.takes_reboot();
    if h.reboot_pending && provisioned {
        if h.powered_on {
            return (None, Some(json!({"status": {"poweredOn": false}})));
        }
        if has(REBOOT_ANNOTATION) {
            return (Some(json!({"metadata": {"annotations": {REBOOT_ANNOTATION: null}}})), None);
        }
        return (None, None);
    }
    if (!h.reboot_pending || !provisioned) && h.powered_on != h.online && !h.in_error() {
        return (None, Some(json!({"status": {"poweredOn": h.online}})));
    }
    (None, None)
}

/// The label `--factory` puts on each BareMetalHost: the simulated node it runs.
pub(crate) const NODE_LABEL: &str = "fabrik.io/sim-node";

/// Whether a host's node is down after this round: the host powered off (not merely in
/// error: a BMC that does not answer says nothing of the machine behind it).
fn node_down(o: &Value, status: Option<&Value>) -> Option<bool> {
    let h = crate::cluster::metal3::host(o)?;
    let on = status.and_then(|s| s["status"]["poweredOn"].as_bool()).unwrap_or(h.powered_on);
    Some(!on && !h.in_error())
}

pub(crate) async fn run(
    client: kube::Client,
    nodes: std::sync::Arc<super::nodes::Shared>,
    resume: tokio::sync::mpsc::UnboundedSender<String>,
) {
    let gvk = GroupVersionKind::gvk("metal3.io", "v1alpha1", "BareMetalHost");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "baremetalhosts");
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let lp = ListParams::default().labels(&format!("{}=true", labels::SIMULATED));
    let pp = PatchParams::default();
    loop {
        let Ok(list) = all.list(&lp).await else {
            // No Metal3 CRD (yet), or the server is away: look again later.
            tokio::time::sleep(Duration::from_secs(5)).await;
            continue;
        };
        for o in list.items {
            let (Some(ns), Some(name)) = (o.metadata.namespace.clone(), o.metadata.name.clone()) else { continue };
            let Ok(v) = serde_json::to_value(&o) else { continue };
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
            let (meta, status) = reconcile(&v, &super::model::now_str());
            // The node on a host the operator powered off stops; back on, it comes back.
            if let (Some(node), Some(down)) =
                (o.metadata.labels.as_ref().and_then(|l| l.get(NODE_LABEL)), node_down(&v, status.as_ref()))
            {
                nodes.set_powered_off(node, down, &resume).await;
            }
            if let Some(m) = meta
                && let Err(e) = api.patch(&name, &pp, &Patch::Merge(&m)).await
            {
                eprintln!("fabrik sim: BareMetalHost {ns}/{name}: {}", super::describe(&e));
            }
            if let Some(s) = status
                && let Err(e) = api.patch_status(&name, &pp, &Patch::Merge(&s)).await
            {
                eprintln!("fabrik sim: BareMetalHost {ns}/{name} status: {}", super::describe(&e));
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-12-07T09:00:00Z";

    fn host(annotations: Value, online: bool, on: bool, state: &str, op: &str) -> Value {
        json!({"metadata": {"name": "h", "namespace": "m", "annotations": annotations},
            "spec": {"online": online},
            "status": {"poweredOn": on, "operationalStatus": op, "provisioning": {"state": state}}})
    }

    #[test]
    fn a_reboot_goes_off_then_the_request_is_taken_then_on_and_suffixed_ones_hold_it_off() {
        let asked = host(json!({"reboot.metal3.io": ""}), true, true, "provisioned", "OK");
        assert_eq!(reconcile(&asked, NOW), (None, Some(json!({"status": {"poweredOn": false}}))));
        let off = host(json!({"reboot.metal3.io": ""}), true, false, "provisioned", "OK");
        assert_eq!(
            reconcile(&off, NOW),
            (Some(json!({"metadata": {"annotations": {"reboot.metal3.io": null}}})), None)
        );
        let taken = host(json!({}), true, false, "provisioned", "OK");
        assert_eq!(reconcile(&taken, NOW), (None, Some(json!({"status": {"poweredOn": true}}))));
        let held = host(json!({"reboot.metal3.io/remediation": ""}), true, false, "provisioned", "OK");
        assert_eq!(reconcile(&held, NOW), (None, None), "stays off until its owner removes it");
        let broken = host(json!({}), true, false, "provisioned", "error");
        assert_eq!(reconcile(&broken, NOW), (None, None), "a host in error is not powered on");
        let provisioning = host(json!({"reboot.metal3.io": ""}), true, true, "provisioning", "OK");
        assert_eq!(reconcile(&provisioning, NOW), (None, None));
        // Its node: down while the host is off (this round's status first), not for an error.
        assert_eq!(node_down(&asked, reconcile(&asked, NOW).1.as_ref()), Some(true));
        assert_eq!(node_down(&taken, reconcile(&taken, NOW).1.as_ref()), Some(false));
        assert_eq!(node_down(&held, None), Some(true));
        assert_eq!(node_down(&broken, None), Some(false), "a BMC in error says nothing of the machine");
    }

    #[test]
    fn an_inspection_starts_then_takes_the_request_then_ends_recording_both() {
        let inspect = host(json!({"inspect.metal3.io": ""}), true, true, "available", "OK");
        let start = json!({"status": {"provisioning": {"state": "inspecting"},
            "operationHistory": {"inspect": {"start": NOW, "end": null}}}});
        assert_eq!(reconcile(&inspect, NOW), (None, Some(start)));
        let started = host(json!({"inspect.metal3.io": ""}), true, true, "inspecting", "OK");
        let take = json!({"metadata": {"annotations": {"inspect.metal3.io": null}}});
        assert_eq!(reconcile(&started, NOW), (Some(take), None));
        let taken = host(json!({}), true, true, "inspecting", "OK");
        let end =
            json!({"status": {"provisioning": {"state": "available"}, "operationHistory": {"inspect": {"end": NOW}}}});
        assert_eq!(reconcile(&taken, NOW), (None, Some(end)));
        let provisioned = host(json!({"inspect.metal3.io": ""}), true, true, "provisioned", "OK");
        assert_eq!(reconcile(&provisioned, NOW), (None, None), "only an available host is inspected");
    }
}
