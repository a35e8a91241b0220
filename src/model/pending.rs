//! Why a pod is pending, in words: the kube-scheduler's FailedScheduling message read into
//! its reasons (how many nodes each rules out), or what else holds the pod back.
//!
//! The scheduler writes `0/8 nodes are available: 3 Insufficient nvidia.com/gpu, 5 node(s)
//! had untolerated taint {k: v}. no new claims to deallocate, preemption: 0/8 nodes are
//! available: …` — one part per reason, each with the number of nodes it ruled out, ended by
//! a period; what post-filter plugins add after it (DRA deallocation, preemption) is not why
//! the pod does not fit. A message that does not read that way (a plugin's own error) is
//! kept as it is.

/// Why a pending pod waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// The scheduler found no node: its reasons (what the pod lacks first, then what rules
    /// nodes out; most nodes first within each), with the nodes it tried.
    NoNode { nodes: Option<u32>, reasons: Vec<(u32, String)> },
    /// The scheduler said something else (a plugin's error, an unbound volume): as written.
    Scheduler(String),
    /// No scheduling attempt failed yet that fabrik saw: in the queue.
    Queued,
    /// Bound to a node; its containers have not started.
    Starting,
    /// Bound to a node whose kubelet could not prepare its DRA devices (the latest
    /// FailedPrepareDynamicResources): the driver's innermost words, e.g. `current node not
    /// ready in ComputeDomain`. The kubelet retries; the pod starts once the driver can.
    Devices(String),
    /// Bound to a node whose kubelet cannot start a container: its waiting reason and
    /// message as the pod's status says them (`ImagePullBackOff`, `Back-off pulling image
    /// "…"`), as `kubectl get pods` shows the reason.
    Container { reason: String, message: String },
}

/// What `Waiting::Devices` keeps of a FailedPrepareDynamicResources message: the driver's
/// error at the end of the kubelet's chain (`Failed to prepare dynamic resources: prepare
/// dynamic resources: NodePrepareResources failed for ResourceClaim c: …: <cause>`).
pub fn prepare_failure_cause(message: &str) -> String {
    let m = message.trim();
    m.rsplit_once(": ").map_or(m, |(_, cause)| cause).trim().to_string()
}

impl Waiting {
    /// The reason a rollup groups by: the first (what it lacks, else what rules out most
    /// nodes), else the message.
    pub fn category(&self) -> String {
        match self {
            Waiting::NoNode { reasons, .. } => {
                reasons.first().map_or_else(|| "no node fits".to_string(), |(_, r)| r.clone())
            }
            Waiting::Scheduler(m) => m.chars().take(60).collect(),
            Waiting::Queued => "not scheduled yet".into(),
            Waiting::Starting => "starting".into(),
            Waiting::Devices(_) => "devices not prepared".into(),
            Waiting::Container { reason, .. } => reason.clone(),
        }
    }

    /// One line: `no node of 8: 5 not enough nvidia.com/gpu, 3 tainted node.kubernetes.io/…`.
    pub fn text(&self) -> String {
        match self {
            Waiting::NoNode { nodes, reasons } => {
                let of = nodes.map_or(String::new(), |n| format!(" of {n}"));
                let why: Vec<String> = reasons.iter().map(|(n, r)| format!("{n} {r}")).collect();
                format!("no node{of}: {}", why.join(", "))
            }
            Waiting::Scheduler(m) => m.clone(),
            Waiting::Queued => "not scheduled yet".into(),
            Waiting::Starting => "starting".into(),
            Waiting::Devices(cause) => format!("devices not prepared: {cause}"),
            Waiting::Container { reason, message } if message.is_empty() => reason.clone(),
            Waiting::Container { reason, message } => format!("{reason}: {message}"),
        }
    }
}

/// A controller's pod refused by a ResourceQuota (its FailedCreate): the pod never exists,
/// so no pod says why the workload is short.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaRefusal {
    pub quota: String,
    /// `refused by quota gpu-quota: requested requests.nvidia.com/gpu=1, used …, limited …`.
    pub text: String,
}

/// Reads the admission error a controller's FailedCreate carries: `pods "x" is forbidden:
/// exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=1, used: …=4, limited:
/// …=4`. `None` for any other failure.
pub fn read_quota_refusal(message: &str) -> Option<QuotaRefusal> {
    let (_, rest) = message.split_once("exceeded quota: ")?;
    let (quota, rest) = rest.split_once(", ").unwrap_or((rest, ""));
    let quota = quota.trim().to_string();
    let part = |key: &str| rest.split(", ").find_map(|p| p.strip_prefix(key)).map(str::trim).filter(|v| !v.is_empty());
    let said: Vec<String> = [("requested", "requested: "), ("used", "used: "), ("limited", "limited: ")]
        .into_iter()
        .filter_map(|(w, k)| part(k).map(|v| format!("{w} {v}")))
        .collect();
    let text = if said.is_empty() {
        format!("refused by quota {quota}")
    } else {
        format!("refused by quota {quota}: {}", said.join(", "))
    };
    Some(QuotaRefusal { quota, text })
}

/// Reads a FailedScheduling message (see the module).
pub fn read_failed_scheduling(message: &str) -> Waiting {
    let Some((lead, rest)) = message.split_once(" nodes are available: ") else {
        return Waiting::Scheduler(message.trim().to_string());
    };
    let nodes = lead.rsplit('/').next().and_then(|n| n.trim().parse().ok());
    let mut reasons: Vec<(u32, String)> = Vec::new();
    for part in split_reasons(list_of(rest)) {
        let part = part.trim().trim_end_matches('.');
        let Some((n, why)) = part.split_once(' ') else { continue };
        let Ok(n) = n.parse::<u32>() else {
            return Waiting::Scheduler(message.trim().to_string());
        };
        let why = words(why);
        match reasons.iter_mut().find(|(_, r)| *r == why) {
            Some(r) => r.0 += n,
            None => reasons.push((n, why)),
        }
    }
    if reasons.is_empty() {
        return Waiting::Scheduler(message.trim().to_string());
    }
    // What the pod lacks first (free GPUs, devices for its claims), then what keeps nodes
    // out of its pool (taints, selectors, cordons): the pool is usually meant, the shortage
    // is what to act on. Most nodes first within each; ties in the scheduler's order.
    reasons.sort_by_key(|(n, r)| (!short_of(r), std::cmp::Reverse(*n)));
    Waiting::NoNode { nodes, reasons }
}

/// The reasons' list: up to the first `. ` (or the final `.`) outside braces; after it come
/// the post-filter plugins' words (`no new claims to deallocate, preemption: …`).
fn list_of(s: &str) -> &str {
    let b = s.as_bytes();
    let mut depth = 0i32;
    for (i, c) in s.char_indices() {
        match c {
            '{' | '[' | '(' => depth += 1,
            '}' | ']' | ')' => depth -= 1,
            '.' if depth <= 0 && b.get(i + 1).is_none_or(|n| *n == b' ') => return &s[..i],
            _ => {}
        }
    }
    s
}

/// The parts of `3 A, 5 B {k: v, k2: v2}, 2 C`: split at `, ` followed by a count, outside
/// braces.
fn split_reasons(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    let b = s.as_bytes();
    for (i, c) in s.char_indices() {
        match c {
            '{' | '[' | '(' => depth += 1,
            '}' | ']' | ')' => depth -= 1,
            ',' if depth <= 0 && b.get(i + 1) == Some(&b' ') && b.get(i + 2).is_some_and(u8::is_ascii_digit) => {
                out.push(&s[start..i]);
                start = i + 2;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// A reason that says what the pod lacks on nodes it could otherwise use.
fn short_of(reason: &str) -> bool {
    reason.starts_with("not enough free ")
        || ["no devices for its DRA claims", "at their pod limit", "its host port is taken"].contains(&reason)
}

/// A reason in the words an on-call engineer acts on.
fn words(why: &str) -> String {
    let why = why.trim();
    if let Some(r) = why.strip_prefix("Insufficient ") {
        return format!("not enough free {r}");
    }
    if let Some(t) = why.strip_prefix("node(s) had untolerated taint ") {
        let key = t.trim_matches(['{', '}']).split(':').next().unwrap_or(t).trim();
        return format!("tainted {key}");
    }
    let known = [
        ("node(s) didn't match Pod's node affinity/selector", "not matching its node selector/affinity"),
        ("node(s) were unschedulable", "cordoned"),
        ("cannot allocate all claims", "no devices for its DRA claims"),
        ("node(s) didn't match pod affinity rules", "not matching its pod affinity"),
        ("node(s) didn't match pod anti-affinity rules", "ruled out by its pod anti-affinity"),
        ("node(s) didn't satisfy existing pods anti-affinity rules", "ruled out by other pods' anti-affinity"),
        ("node(s) had volume node affinity conflict", "its volume is on other nodes"),
        ("node(s) didn't have free ports for the requested pod ports", "its host port is taken"),
        ("Too many pods", "at their pod limit"),
    ];
    for (k, w) in known {
        if why == k {
            return w.to_string();
        }
    }
    why.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedulers_reasons_become_words_most_nodes_first() {
        let m = "0/8 nodes are available: 3 Insufficient nvidia.com/gpu, 4 node(s) had untolerated taint \
                 {node.kubernetes.io/unschedulable: }, 1 node(s) didn't match Pod's node affinity/selector. \
                 preemption: 0/8 nodes are available: 3 No preemption victims found for incoming pod, 5 \
                 Preemption is not helpful for scheduling.";
        let w = read_failed_scheduling(m);
        assert_eq!(
            w,
            Waiting::NoNode {
                nodes: Some(8),
                reasons: vec![
                    (3, "not enough free nvidia.com/gpu".into()),
                    (4, "tainted node.kubernetes.io/unschedulable".into()),
                    (1, "not matching its node selector/affinity".into()),
                ]
            }
        );
        // What it lacks comes first, though fewer nodes say so.
        assert_eq!(w.category(), "not enough free nvidia.com/gpu");
        assert_eq!(
            w.text(),
            "no node of 8: 3 not enough free nvidia.com/gpu, 4 tainted node.kubernetes.io/unschedulable, \
             1 not matching its node selector/affinity"
        );
    }

    #[test]
    fn a_quota_refusal_names_its_quota_and_what_it_limits() {
        let m = "Error creating: pods \"web-7d9f-x2\" is forbidden: exceeded quota: gpu-quota, requested: \
                 requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=1";
        assert_eq!(
            read_quota_refusal(m),
            Some(QuotaRefusal {
                quota: "gpu-quota".into(),
                text: "refused by quota gpu-quota: requested requests.nvidia.com/gpu=1, used \
                       requests.nvidia.com/gpu=1, limited requests.nvidia.com/gpu=1"
                    .into()
            })
        );
        assert_eq!(read_quota_refusal("exceeded quota: q").map(|r| r.text), Some("refused by quota q".into()));
        assert_eq!(read_quota_refusal("Error creating: pods \"x\" is forbidden: no PriorityClass"), None);
    }

    #[test]
    fn what_post_filter_plugins_add_is_not_a_reason() {
        // kube-scheduler 1.34 with DRA on, as the test control plane words it.
        let m = "0/16 nodes are available: 16 Insufficient nvidia.com/gpu. no new claims to deallocate, \
                 preemption: 0/16 nodes are available: 16 No preemption victims found for incoming pod.";
        assert_eq!(
            read_failed_scheduling(m),
            Waiting::NoNode { nodes: Some(16), reasons: vec![(16, "not enough free nvidia.com/gpu".into())] }
        );
    }

    #[test]
    fn taints_with_commas_dra_claims_and_odd_messages() {
        let w = read_failed_scheduling(
            "0/3 nodes are available: 2 node(s) had untolerated taint {a: b, c: d}, 1 cannot allocate all claims.",
        );
        assert_eq!(
            w,
            Waiting::NoNode {
                nodes: Some(3),
                reasons: vec![(1, "no devices for its DRA claims".into()), (2, "tainted a".into())]
            }
        );
        // Two taints of one key add up.
        let w = read_failed_scheduling(
            "0/5 nodes are available: 2 node(s) had untolerated taint {gpu: x}, 3 node(s) had untolerated taint {gpu: y}.",
        );
        assert_eq!(w, Waiting::NoNode { nodes: Some(5), reasons: vec![(5, "tainted gpu".into())] });
        // Not the usual shape: kept as written.
        let odd = "running PreBind plugin \"VolumeBinding\": binding volumes: timed out";
        assert_eq!(read_failed_scheduling(odd), Waiting::Scheduler(odd.into()));
        assert_eq!(
            read_failed_scheduling("0/2 nodes are available: many things"),
            Waiting::Scheduler("0/2 nodes are available: many things".into())
        );
        assert_eq!(read_failed_scheduling(""), Waiting::Scheduler(String::new()));
    }
}
