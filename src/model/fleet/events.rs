//! What happened and what is under way: the bounded event list, operations and their
//! progress, and how the feeds stand.

use super::*;
use crate::model::pending::{QuotaRefusal, Waiting, read_failed_scheduling, read_quota_refusal};

/// How the fleet's feeds stand, all together: what the header says about its sources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FeedsState<'a> {
    /// Not every watch has listed yet, and no feed is in trouble.
    Loading,
    /// Every feed is live.
    Live,
    /// Some feeds are reconnecting or stale: the worst of them (stale before reconnecting,
    /// then the oldest), and how many are in trouble.
    Trouble {
        source: &'a str,
        /// Will not recover by itself (e.g. forbidden); else reconnecting.
        stale: bool,
        since: Ts,
        feeds: usize,
        /// Still loading (not synced) as well.
        loading: bool,
    },
}

impl Fleet {
    /// How the feeds stand: the worst trouble first (stale before reconnecting, the oldest
    /// first), else loading until synced, else live.
    pub fn feed_state(&self) -> FeedsState<'_> {
        let mut worst: Option<(&str, bool, Ts)> = None;
        let mut n = 0;
        for (src, st) in &self.feeds {
            let (stale, since) = match st {
                FeedState::Live => continue,
                FeedState::Reconnecting { since, .. } => (false, *since),
                FeedState::Stale { since, .. } => (true, *since),
            };
            n += 1;
            let better = match worst {
                None => true,
                Some((_, s, t)) => (stale && !s) || (stale == s && since < t),
            };
            if better {
                worst = Some((src.as_str(), stale, since));
            }
        }
        match worst {
            None if !self.synced => FeedsState::Loading,
            None => FeedsState::Live,
            Some((source, stale, since)) => {
                FeedsState::Trouble { source, stale, since, feeds: n, loading: !self.synced }
            }
        }
    }

    pub fn op(&self, id: u64) -> Option<&OpStatus> {
        self.ops.iter().find(|o| o.id == id)
    }

    /// Adds an event to the bounded history ([`EVENT_CAPACITY`] events, the oldest dropped),
    /// its reason, object and message cut to a few KiB: an Event's text is whatever its
    /// writer (a tenant, too) put there, up to the API server's object size limit.
    pub fn push_event(&mut self, e: EventSpec) {
        let reason = capped(e.reason, EVENT_REASON_MAX).into_boxed_str();
        let object = capped(e.object, EVENT_OBJECT_MAX);
        let message = capped(e.message, EVENT_MESSAGE_MAX);
        self.note_scheduling(&reason, &object, &message, e.ts);
        if self.events.len() >= EVENT_CAPACITY {
            self.events.pop_front();
        }
        self.events.push_back(Event { ts: e.ts, severity: e.severity, reason, object, message });
        self.events_gen += 1;
    }

    /// Keeps a controller's quota refusal: FailedCreate (exceeded quota) until it creates
    /// a pod again (SuccessfulCreate) later. Events carry whole seconds: a controller that
    /// created some pods and was refused others in one sync is short, so a refusal of the
    /// same second stands.
    fn note_creating(&mut self, reason: &str, object: &str, message: &str, ts: Ts) {
        let at = self.quota_refused.get(object).map(|(at, _)| *at);
        if at.is_some_and(|at| at > ts || (at == ts && reason == "SuccessfulCreate")) {
            return;
        }
        match reason {
            "FailedCreate" => {
                let Some(r) = read_quota_refusal(message) else { return };
                if self.quota_refused.len() >= SCHED_NOTES_MAX && !self.quota_refused.contains_key(object) {
                    return;
                }
                self.quota_refused.insert(object.to_string(), (ts, r));
            }
            "SuccessfulCreate" => {
                self.quota_refused.remove(object);
            }
            _ => {}
        }
    }

    /// The controllers of tenant `tid`'s namespaces whose pods a ResourceQuota refuses
    /// (`replicaset/ns/name`, the refusal), in name order.
    pub fn tenant_quota_refusals(&self, tid: TenantId) -> Vec<(&str, &QuotaRefusal)> {
        let mut out: Vec<(&str, &QuotaRefusal)> = self
            .quota_refused
            .iter()
            .filter(|(o, _)| {
                let ns = o.split('/').nth(1).and_then(|ns| self.interner.get(ns));
                ns.and_then(|ns| self.idx.tenant_by_ns.get(&ns)) == Some(&tid)
            })
            .map(|(o, (_, r))| (o.as_str(), r))
            .collect();
        out.sort_by(|a, b| a.0.cmp(b.0));
        out
    }

    /// Keeps the scheduler's last word on a pod: FailedScheduling until it is Scheduled; then
    /// the kubelet's, FailedPrepareDynamicResources (until the pod runs or is gone).
    ///
    /// Events do not arrive in the order they happened: a list comes in name order (`<pod>.<random
    /// suffix>`), so a pod's Scheduled may come after the kubelet's later complaint. The later
    /// word wins by its time; within one second (Events carry seconds) the kubelet's, which
    /// only comes once the pod is scheduled; and Scheduled ends only the scheduler's words.
    fn note_scheduling(&mut self, reason: &str, object: &str, message: &str, ts: Ts) {
        if matches!(reason, "FailedCreate" | "SuccessfulCreate") {
            return self.note_creating(reason, object, message, ts);
        }
        let Some((ns, name)) = object.strip_prefix("pod/").and_then(|k| k.split_once('/')) else { return };
        let kubelets = |w: &Waiting| matches!(w, Waiting::Devices(_));
        match reason {
            "FailedScheduling" | "FailedPrepareDynamicResources" => {
                let known = self.interner.get(ns).and_then(|ns| self.sched_failed.get(&ns)?.get(name));
                let rank = reason == "FailedPrepareDynamicResources";
                if known.is_some_and(|(at, w)| (*at, kubelets(w)) > (ts, rank)) {
                    return;
                }
                // Bounded: notes on pods the fleet does not have go first.
                if known.is_none() && self.sched_notes() >= SCHED_NOTES_MAX {
                    let idx = &self.idx;
                    for (ns, m) in self.sched_failed.iter_mut() {
                        m.retain(|name, _| idx.has_pod(*ns, name));
                    }
                    if self.sched_notes() >= SCHED_NOTES_MAX {
                        return;
                    }
                }
                // Namespaces are few: interning one costs nothing that lasts.
                let ns = self.interner.intern(ns);
                let w = if reason == "FailedScheduling" {
                    read_failed_scheduling(message)
                } else {
                    Waiting::Devices(crate::model::pending::prepare_failure_cause(message))
                };
                self.sched_failed.entry(ns).or_default().insert(name.into(), (ts, w));
            }
            "Scheduled" => {
                if let Some(m) = self.interner.get(ns).and_then(|ns| self.sched_failed.get_mut(&ns))
                    && m.get(name).is_some_and(|(_, w)| !kubelets(w))
                {
                    m.remove(name);
                }
            }
            _ => {}
        }
    }

    fn sched_notes(&self) -> usize {
        self.sched_failed.values().map(|m| m.len()).sum()
    }

    /// Why pod `p` is pending (`None` unless it is): on its node, a container the kubelet
    /// cannot start (its waiting reason), its devices not prepared (the kubelet's last
    /// FailedPrepareDynamicResources) or starting; else the scheduler's last
    /// FailedScheduling read into reasons, or not scheduled yet.
    pub fn waiting(&self, p: &Pod) -> Option<Waiting> {
        if p.phase != Phase::Pending {
            return None;
        }
        let note = self.sched_failed.get(&p.namespace).and_then(|m| m.get(&p.name)).map(|(_, w)| w);
        if p.node_name != Sym::default() {
            // Bound: only the kubelet's word counts (a FailedScheduling note is from before).
            if let Some((reason, message)) = p.container_waiting.as_deref() {
                return Some(Waiting::Container { reason: reason.to_string(), message: message.to_string() });
            }
            return Some(match note {
                Some(w @ Waiting::Devices(_)) => w.clone(),
                _ => Waiting::Starting,
            });
        }
        Some(match note {
            Some(w @ (Waiting::NoNode { .. } | Waiting::Scheduler(_))) => w.clone(),
            _ => Waiting::Queued,
        })
    }

    /// What holds pod `p` back, as the pods view's WAITING says it: why it is pending
    /// (`waiting`), or, running, a container the kubelet cannot keep running — its waiting
    /// reason (`CrashLoopBackOff`, `CreateContainerConfigError`), which `kubectl get pods`
    /// shows as the pod's STATUS while the phase stays Running. `None` for a pod that runs
    /// as asked, finished, or is being deleted.
    pub fn held_back(&self, p: &Pod) -> Option<Waiting> {
        if p.phase != Phase::Running {
            return self.waiting(p);
        }
        let (reason, message) = p.container_waiting.as_deref()?;
        Some(Waiting::Container { reason: reason.to_string(), message: message.to_string() })
    }

    /// A tenant's pending pods (all of them, as its PEND counts) by why they wait, the most
    /// first, e.g.
    /// `[("not enough free nvidia.com/gpu", 12), ("not scheduled yet", 1)]`.
    pub fn tenant_waiting(&self, tid: TenantId) -> Vec<(String, u32)> {
        self.tenant_rollup(tid, |p| self.waiting(p))
    }

    /// A tenant's running pods that a container holds back (`CrashLoopBackOff`), by the
    /// reason, the most first: they hold their devices and run nothing between restarts.
    pub fn tenant_running_held_back(&self, tid: TenantId) -> Vec<(String, u32)> {
        self.tenant_rollup(tid, |p| if p.phase == Phase::Running { self.held_back(p) } else { None })
    }

    /// A tenant's pods that `why` says something of, counted by its category, the most first.
    fn tenant_rollup(&self, tid: TenantId, why: impl Fn(&Pod) -> Option<Waiting>) -> Vec<(String, u32)> {
        let mut by: Vec<(String, u32)> = Vec::new();
        let Some(t) = self.tenant(tid) else { return by };
        for &ns in &t.namespaces {
            for pid in self.idx.pods_in(ns) {
                let Some(p) = self.pod(pid).filter(|p| p.tenant == tid) else { continue };
                let Some(w) = why(p) else { continue };
                let c = w.category();
                match by.iter_mut().find(|(k, _)| *k == c) {
                    Some(e) => e.1 += 1,
                    None => by.push((c, 1)),
                }
            }
        }
        by.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        by
    }

    pub(super) fn apply_op(&mut self, p: OpProgress) {
        let now = self.now;
        let id = p.id();
        if let OpProgress::Started { title, target, total, .. } = &p {
            if self.ops.len() >= OP_CAPACITY
                && let Some(pos) = self.ops.iter().position(|o| o.state.finished())
            {
                self.ops.remove(pos);
            }
            self.ops.push(OpStatus {
                id,
                title: title.clone(),
                target: target.clone(),
                state: OpState::Running,
                step: "starting".into(),
                done: 0,
                total: *total,
                started: now,
                updated: now,
                log: Vec::new(),
            });
            let msg = format!("{title} started");
            self.push_event(EventSpec {
                ts: now,
                severity: Severity::Info,
                reason: "OperationStarted".into(),
                object: target.clone(),
                message: msg,
            });
            return;
        }
        let Some(op) = self.ops.iter_mut().find(|o| o.id == id) else { return };
        op.updated = now;
        let mut event = None;
        match p {
            OpProgress::Started { .. } => {}
            OpProgress::Step { step, done, total, .. } => {
                op.state = OpState::Running;
                op.log.push(step.clone());
                op.step = step;
                op.done = done;
                op.total = total;
            }
            OpProgress::Blocked { reason, .. } => {
                if op.state != OpState::Blocked(reason.clone()) {
                    op.log.push(format!("blocked: {reason}"));
                }
                op.state = OpState::Blocked(reason);
            }
            OpProgress::Log { line, .. } => op.log.push(line),
            OpProgress::Finished { outcome, .. } => {
                let (sev, reason, msg) = match &outcome {
                    Ok(m) => (Severity::Info, "OperationSucceeded", format!("{}: {m}", op.title)),
                    Err(m) => (Severity::Error, "OperationFailed", format!("{}: {m}", op.title)),
                };
                op.state = match outcome {
                    Ok(_) => OpState::Succeeded,
                    Err(e) => OpState::Failed(e),
                };
                op.log.push(msg.clone());
                event = Some((sev, reason, op.target.clone(), msg));
            }
            OpProgress::Cancelled { .. } => {
                op.state = OpState::Cancelled;
                event = Some((
                    Severity::Warning,
                    "OperationCancelled",
                    op.target.clone(),
                    format!("{} cancelled", op.title),
                ));
            }
        }
        if op.log.len() > 200 {
            op.log.drain(..op.log.len() - 200);
        }
        if let Some((severity, reason, object, message)) = event {
            self.push_event(EventSpec { ts: now, severity, reason: reason.into(), object, message });
        }
    }
}

/// [`cap_text`] for an owned string: kept as it is (no copy) when it fits.
fn capped(text: String, max: usize) -> String {
    if text.len() <= max { text } else { cap_text(&text, max).into_owned() }
}

/// `text` if it is at most `max` bytes; else its first bytes up to a char boundary and a note
/// of how long it was (`… (1048576 bytes in all)`).
pub fn cap_text(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}… ({} bytes in all)", &text[..end], text.len()))
}
