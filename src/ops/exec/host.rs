//! A host rebooted, powered off or on, or inspected again ([`crate::ops::host`]): the host
//! read, the request written (unless it stands already), then the baremetal-operator's
//! answer waited for — for a reboot the host seen off or the annotation gone, then on again
//! with the annotation gone; for power, `status.poweredOn` as asked; for an inspection the
//! annotation taken, the host available again and a new inspection ended in its
//! `status.operationHistory`.

use super::{Run, Step, Stop, secs};
use crate::model::BareMetalHost;
use crate::ops::target::Target;
use crate::ops::{HostAction, HostPlan};

/// What the host's `operationHistory` said of its last inspection before the request.
type Inspected = (String, String);

fn inspected(h: &BareMetalHost) -> Inspected {
    (h.inspect_start.clone(), h.inspect_end.clone())
}

/// An inspection started and ended since `before`.
fn inspected_since(h: &BareMetalHost, before: &Inspected) -> bool {
    !h.inspect_end.is_empty() && inspected(h) != *before
}

/// Whether the operator's status shows the request done, and if not, what it shows.
fn answered(h: &BareMetalHost, action: HostAction, went_off: bool, before: &Inspected) -> Result<(), String> {
    let power = if h.powered_on { "on" } else { "off" };
    match action {
        HostAction::Reboot if h.reboot_pending && h.powered_on && !went_off => {
            Err("the operator has not powered it off yet".into())
        }
        HostAction::Reboot if h.reboot_pending => Err("it is off; the operator has not taken the request yet".into()),
        HostAction::Reboot if !h.powered_on => Err("it is off; waiting for the operator to power it on".into()),
        HostAction::Reboot => Ok(()),
        HostAction::PowerOff if h.powered_on => Err(format!("the operator reports it powered {power}")),
        HostAction::PowerOn if !h.powered_on => Err(format!("the operator reports it powered {power}")),
        HostAction::PowerOff | HostAction::PowerOn => Ok(()),
        HostAction::Inspect if h.inspect_pending => Err("the operator has not taken the request yet".into()),
        HostAction::Inspect if h.state == "inspecting" => Err("the operator is inspecting it".into()),
        HostAction::Inspect if !inspected_since(h, before) => Err("no new inspection in its operationHistory".into()),
        HostAction::Inspect => Ok(()),
    }
}

/// A reboot whose request is gone while the host was never seen off: someone removed the
/// annotation (or the operator powered off and on within one poll). Either way fabrik cannot
/// say the host rebooted, so it stops and says so rather than report it done.
/// Likewise an inspection whose request is gone while the host is not inspecting and its
/// `operationHistory` shows no inspection since (the operator starts one before it takes the
/// annotation, and records its start and end).
fn unconfirmed(h: &BareMetalHost, action: HostAction, went_off: bool, before: &Inspected) -> Option<&'static str> {
    match action {
        HostAction::Reboot => (!h.reboot_pending && h.powered_on && !went_off).then_some(
            "the reboot.metal3.io annotation is gone but the host was never seen powered off: removed by hand, or \
             the operator's power cycle was shorter than a poll; the reboot is not confirmed (check the host's \
             power history in Ironic or its BMC)",
        ),
        HostAction::Inspect => (!h.inspect_pending && h.state != "inspecting" && !inspected_since(h, before))
            .then_some(
                "the inspect.metal3.io annotation is gone but the operator recorded no inspection since \
             (status.operationHistory.inspect is as before): removed by hand; the host was not inspected again",
            ),
        HostAction::PowerOff | HostAction::PowerOn => None,
    }
}

pub(crate) async fn host_op<T: Target>(t: &mut T, run: &mut Run<'_>, p: &HostPlan) -> Step<String> {
    let key = p.key();
    let read = |r: Result<Option<BareMetalHost>, crate::ops::target::ReadFailure>| match r {
        Ok(Some(h)) => Ok(h),
        Ok(None) => Err(Stop::Failed(format!("BareMetalHost {key} is gone; nothing was changed"))),
        Err(f) => Err(Stop::Failed(format!("{}; nothing was changed", f.message))),
    };
    let now = read(t.read_host(run, &p.namespace, &p.host).await?)?;
    let stands = match p.action {
        HostAction::Reboot => now.reboot_pending,
        HostAction::PowerOff => !now.online,
        HostAction::PowerOn => now.online,
        HostAction::Inspect => now.inspect_pending,
    };
    let asked = match p.action {
        HostAction::Reboot => "the reboot.metal3.io annotation",
        HostAction::PowerOff => "spec.online: false",
        HostAction::PowerOn => "spec.online: true",
        HostAction::Inspect => "the inspect.metal3.io annotation",
    };
    if stands {
        run.step(format!("BareMetalHost {key} has {asked} already")).await?;
    } else {
        if let Err(why) = t.request_host(run, &p.namespace, &p.host, p.action).await? {
            return Err(Stop::Failed(format!("{why}; nothing was changed")));
        }
        run.step(format!("BareMetalHost {key}: wrote {asked}")).await?;
    }
    let started = t.clock_ms();
    let mut went_off = !now.powered_on;
    let before = inspected(&now);
    loop {
        match t.read_host(run, &p.namespace, &p.host).await? {
            Ok(Some(h)) => {
                if p.action == HostAction::Reboot && !h.powered_on && !went_off {
                    went_off = true;
                    run.step(format!("the baremetal-operator powered {key} off")).await?;
                }
                if let Some(why) = unconfirmed(&h, p.action, went_off, &before) {
                    return Err(Stop::Failed(format!("BareMetalHost {key}: {why}")));
                }
                match answered(&h, p.action, went_off, &before) {
                    Ok(()) => break,
                    Err(why) if h.in_error() => {
                        return Err(Stop::Failed(format!(
                            "the baremetal-operator reports {key} in error: {} ({why}); the request stays written",
                            h.state_text()
                        )));
                    }
                    Err(why) if t.clock_ms() >= run.deadline_ms => {
                        let waited = secs(std::time::Duration::from_millis(t.clock_ms().saturating_sub(started)));
                        return Err(Stop::Failed(format!(
                            "after {waited}: {why}; {asked} stays written (is the baremetal-operator running?)"
                        )));
                    }
                    Err(why) => run.blocked(format!("waiting for the baremetal-operator: {why}")).await?,
                }
            }
            Ok(None) => return Err(Stop::Failed(format!("BareMetalHost {key} is gone"))),
            Err(f) if f.transient && t.clock_ms() < run.deadline_ms => {
                run.log(format!("could not read BareMetalHost {key} ({}); looking again", f.why)).await?;
            }
            Err(f) => return Err(Stop::Failed(f.message)),
        }
        let poll = run.opts.poll;
        run.sleep(t, poll).await?;
    }
    let outcome = match p.action {
        HostAction::Reboot => format!("host {key} rebooted: the operator powered it off and on again"),
        HostAction::PowerOff => format!("host {key} powered off: the operator reports it off"),
        HostAction::PowerOn => format!("host {key} powered on: the operator reports it on"),
        HostAction::Inspect => {
            format!("host {key} inspected again: the operator inspected it and it is available")
        }
    };
    run.step(outcome.clone()).await?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reboot_is_done_only_after_the_host_went_off_and_came_back() {
        let none = Inspected::default();
        let on = BareMetalHost { powered_on: true, online: true, reboot_pending: true, ..Default::default() };
        assert!(answered(&on, HostAction::Reboot, false, &none).is_err(), "asked, not yet off");
        let off = BareMetalHost { powered_on: false, ..on.clone() };
        assert!(answered(&off, HostAction::Reboot, true, &none).is_err(), "off, annotation still there");
        let taken = BareMetalHost { reboot_pending: false, ..off };
        assert!(answered(&taken, HostAction::Reboot, true, &none).is_err(), "annotation gone, not on yet");
        let back = BareMetalHost { powered_on: true, ..taken };
        assert!(answered(&back, HostAction::Reboot, true, &none).is_ok());
        assert!(answered(&back, HostAction::PowerOn, false, &none).is_ok());
        assert!(answered(&back, HostAction::PowerOff, false, &none).is_err());
        assert_eq!(unconfirmed(&back, HostAction::Reboot, true, &none), None, "seen off, then on: done");
        // The annotation removed by hand while the host stayed on: never reported done.
        let by_hand = BareMetalHost { powered_on: true, reboot_pending: false, ..back.clone() };
        assert!(answered(&by_hand, HostAction::Reboot, false, &none).is_ok(), "answered alone would say done");
        assert!(
            unconfirmed(&by_hand, HostAction::Reboot, false, &none)
                .is_some_and(|w| w.contains("never seen powered off"))
        );
        assert_eq!(unconfirmed(&on, HostAction::Reboot, false, &none), None, "still asked: waiting, not unconfirmed");
        assert_eq!(unconfirmed(&by_hand, HostAction::PowerOn, false, &none), None);
        let inspecting = BareMetalHost { state: "inspecting".into(), ..back };
        assert!(answered(&inspecting, HostAction::Inspect, false, &none).is_err());
    }

    #[test]
    fn an_inspection_is_done_only_once_the_operator_recorded_one_since_the_request() {
        let t = |s: &str| s.to_string();
        let before = (t("2026-12-01T10:00:00Z"), t("2026-12-01T10:04:00Z"));
        let asked = BareMetalHost {
            state: t("available"),
            inspect_pending: true,
            inspect_start: before.0.clone(),
            inspect_end: before.1.clone(),
            ..Default::default()
        };
        assert!(answered(&asked, HostAction::Inspect, false, &before).is_err(), "not taken yet");
        // The operator starts one (state and history), then takes the annotation.
        let started = BareMetalHost {
            state: t("inspecting"),
            inspect_start: t("2026-12-07T09:00:00Z"),
            inspect_end: String::new(),
            ..asked.clone()
        };
        let taken = BareMetalHost { inspect_pending: false, ..started.clone() };
        for h in [&started, &taken] {
            assert!(answered(h, HostAction::Inspect, false, &before).is_err(), "inspecting");
            assert_eq!(unconfirmed(h, HostAction::Inspect, false, &before), None);
        }
        let done = BareMetalHost { state: t("available"), inspect_end: t("2026-12-07T09:03:00Z"), ..taken };
        assert!(answered(&done, HostAction::Inspect, false, &before).is_ok());
        assert_eq!(unconfirmed(&done, HostAction::Inspect, false, &before), None);
        // The annotation removed by hand: available, history as before — never done.
        let by_hand = BareMetalHost { inspect_pending: false, ..asked };
        assert!(answered(&by_hand, HostAction::Inspect, false, &before).is_err());
        let why = unconfirmed(&by_hand, HostAction::Inspect, false, &before).expect("unconfirmed");
        assert!(why.contains("removed by hand"), "{why}");
    }
}
