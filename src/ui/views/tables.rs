//! The table views as plain row functions (k9s's render pattern): columns, which objects
//! are rows, one cell per column, a sort key per column. The TUI formats only the visible
//! rows; `fabrik snapshot` formats all of them with the same functions.

use crate::model::*;
use crate::ui::command::ViewKind;

#[derive(Clone, Copy, Debug)]
pub struct Col {
    pub name: &'static str,
    pub width: u16,
    /// Right-align numbers.
    pub right: bool,
}

const fn c(name: &'static str, width: u16) -> Col {
    Col { name, width, right: false }
}
const fn r(name: &'static str, width: u16) -> Col {
    Col { name, width, right: true }
}

pub fn columns(v: ViewKind) -> &'static [Col] {
    match v {
        ViewKind::Fleet => {
            const {
                &[
                    c("NAME", 12),
                    c("STATUS", 17),
                    c("MODEL", 10),
                    r("GPUS", 4),
                    r("ALLOC", 5),
                    r("UTIL", 8),
                    r("MEM", 8),
                    r("POWER", 10),
                    c("MIG", 20),
                    r("IDLE", 4),
                    r("PODS", 4),
                    c("ALERTS", 14),
                    r("AGE", 4),
                ]
            }
        }
        ViewKind::Gpus => {
            const {
                &[
                    c("NODE", 10),
                    c("GPU", 15),
                    c("MODEL", 10),
                    c("MODE", 4),
                    r("UTIL", 4),
                    r("MEM", 8),
                    r("POWER", 5),
                    r("TEMP", 4),
                    c("TENANT", 13),
                    c("POD", 22),
                    c("IDLE", 8),
                    c("FITS", 12),
                    c("HEALTH", 7),
                ]
            }
        }
        ViewKind::Tenants => {
            const {
                &[
                    c("TENANT", 15),
                    c("SOURCE", 8),
                    c("NAMESPACES", 24),
                    r("PODS", 5),
                    r("PEND", 4),
                    r("QUOTA", 5),
                    r("REQ", 5),
                    r("ALLOC", 5),
                    r("MIG", 4),
                    r("BUSY", 5),
                    r("IDLE", 4),
                    r("BUSY%", 10),
                    c("STATUS", 10),
                ]
            }
        }
        ViewKind::Quotas => {
            const {
                &[
                    c("TENANT", 15),
                    c("SOURCE", 28),
                    c("RESOURCE", 32),
                    r("HARD", 6),
                    r("USED", 6),
                    r("REQ", 6),
                    r("USE%", 5),
                    c("VERSION", 7),
                ]
            }
        }
        ViewKind::Pods => {
            const {
                &[
                    c("NAMESPACE", 13),
                    c("NAME", 26),
                    c("TENANT", 13),
                    c("NODE", 10),
                    c("PHASE", 11),
                    c("REQUEST", 13),
                    c("DEVICES", 14),
                    r("UTIL", 8),
                    c("IDLE", 5),
                    c("OWNER", 11),
                    r("AGE", 4),
                ]
            }
        }
        ViewKind::Events => const { &[r("AGE", 5), c("TYPE", 7), c("REASON", 20), c("OBJECT", 28), c("MESSAGE", 80)] },
        ViewKind::Ops => {
            const {
                &[
                    r("ID", 3),
                    c("OPERATION", 44),
                    c("TARGET", 16),
                    c("STATE", 10),
                    c("PROGRESS", 8),
                    r("AGE", 5),
                    c("STEP", 60),
                ]
            }
        }
    }
}

/// The default sort column of a view.
pub fn default_sort(v: ViewKind) -> (usize, bool) {
    match v {
        ViewKind::Events | ViewKind::Ops => (0, false),
        _ => (0, false),
    }
}

/// Which objects are rows, unsorted and unfiltered. Ids are view-specific: node, GPU
/// (with MIG instances packed as `gpu << 3 | instance + 1`), tenant, quota, pod, event
/// index (newest first) or op index (newest first).
pub fn ids(f: &Fleet, v: ViewKind) -> Vec<u32> {
    match v {
        ViewKind::Fleet => f.node_ids().map(|n| n.0).collect(),
        ViewKind::Gpus => f.gpu_ids().map(|g| g.0 << 3).collect(),
        ViewKind::Tenants => f
            .tenant_ids()
            .filter(|t| {
                f.tenant(*t).is_some_and(|t| {
                    t.usage.requested_gpus + t.usage.requested_mig + t.usage.allocated_gpus + t.usage.allocated_mig > 0
                        || !t.quotas.is_empty()
                })
            })
            .map(|t| t.0)
            .collect(),
        ViewKind::Quotas => f.quota_ids().map(|q| q.0).collect(),
        ViewKind::Pods => {
            f.pod_ids().filter(|p| f.pod(*p).is_some_and(|p| p.requests_devices())).map(|p| p.0).collect()
        }
        ViewKind::Events => (0..f.events.len() as u32).collect(),
        ViewKind::Ops => (0..f.ops.len() as u32).collect(),
    }
}

/// MIG instance rows that follow a GPU row.
pub fn gpu_children(f: &Fleet, id: u32) -> Vec<u32> {
    let g = GpuId(id >> 3);
    f.gpu(g)
        .map(|gpu| (0..gpu.instances.len().min(7) as u32).map(|i| (g.0 << 3) | (i + 1)).collect())
        .unwrap_or_default()
}

pub fn age(now: Ts, then: Ts) -> String {
    let s = now.saturating_sub(then) / 1000;
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

pub fn pct(n: u32, d: u32) -> u32 {
    (n * 100).checked_div(d).unwrap_or(0)
}

/// A cell: text and the theme token it is drawn with.
pub type Cell = (String, &'static str);

pub fn util_token(u: u8) -> &'static str {
    match u {
        0..=29 => "gpu.util.low",
        30..=74 => "gpu.util.mid",
        _ => "gpu.util.high",
    }
}

/// A utilisation as a cell: `41%` in its level's colour, or a muted `—` when the source
/// could not measure it (never a made-up 0 %).
pub fn util_cell(u: Option<u8>) -> Cell {
    match u {
        Some(u) => (format!("{u}%"), util_token(u)),
        None => muted("—"),
    }
}

/// A GPU's utilisation as a cell, marked `41%?` when its telemetry is stale.
pub fn gpu_util_cell(f: &Fleet, gpu: &Gpu) -> Cell {
    match gpu.last.util {
        Some(u) if gpu.last_sample_at.is_some() && gpu.telemetry_stale(f.now, f.thresholds.stale_ms) => {
            (format!("{u}%?"), "ui.stale")
        }
        u => util_cell(u),
    }
}

/// The mean of the utilisations that were measured; `None` when none was.
pub fn mean_util(utils: impl Iterator<Item = Option<u8>>) -> Option<u8> {
    let (sum, n) = utils.flatten().fold((0u32, 0u32), |(s, n), u| (s + u32::from(u), n + 1));
    (n > 0).then(|| (sum / n) as u8)
}

fn text(s: impl Into<String>) -> Cell {
    (s.into(), "ui.text")
}
fn muted(s: impl Into<String>) -> Cell {
    (s.into(), "ui.text.muted")
}

/// A node's telemetry over what a source measured, never with the unmeasured as zeros:
/// mean utilisation over the GPUs whose utilisation is known, mean memory use and total
/// power over the GPUs with any sample; each `None` when nothing was measured, and with
/// over how many GPUs it was (`*_of`), out of `gpus`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeAvg {
    pub util: Option<u8>,
    pub util_of: u32,
    pub mem_pct: Option<u8>,
    pub power_w: Option<u32>,
    /// GPUs with any sample (the base of `mem_pct` and `power_w`).
    pub sampled_of: u32,
    pub gpus: u32,
}

/// One pass, no allocation: it runs for every visible fleet row on every frame.
pub fn node_avg(f: &Fleet, n: &Node) -> NodeAvg {
    let (mut gpus, mut k, mut util_sum, mut util_of, mut mem_sum, mut power) = (0u32, 0u32, 0u32, 0u32, 0u32, 0u32);
    for g in n.gpus.iter().filter_map(|g| f.gpu(*g)) {
        gpus += 1;
        if g.last_sample_at.is_none() {
            continue;
        }
        k += 1;
        mem_sum += u32::from(g.last.mem_pct);
        power += u32::from(g.last.power_w);
        if let Some(u) = g.last.util {
            util_sum += u32::from(u);
            util_of += 1;
        }
    }
    NodeAvg {
        util: (util_of > 0).then(|| (util_sum / util_of) as u8),
        util_of,
        mem_pct: (k > 0).then(|| (mem_sum / k) as u8),
        power_w: (k > 0).then_some(power),
        sampled_of: k,
        gpus,
    }
}

/// ` of N` when a figure was measured over `of` of `all` devices, else nothing.
pub fn of_measured(of: u32, all: u32) -> String {
    if of < all { format!(" of {of}") } else { String::new() }
}

/// Idle-but-allocated devices on a node, and how many of its allocated devices (whole
/// GPUs and MIG instances a pod is bound to) are measured: what the idle count is among.
fn node_idle(f: &Fleet, n: &Node) -> (u32, u32) {
    let mut idle = 0;
    let mut measured = 0;
    for g in n.gpus.iter().filter_map(|g| f.gpu(*g)) {
        if !g.mig_enabled && !g.pods.is_empty() {
            idle += g.idle_allocated as u32;
            measured += g.measured as u32;
        }
        for i in g.instances.iter().filter(|i| i.pod.is_some()) {
            idle += i.idle_allocated as u32;
            measured += i.util.is_some() as u32;
        }
    }
    (idle, measured)
}

fn alerts_for<'a>(f: &'a Fleet, target: &AlertTarget) -> Vec<&'a Alert> {
    f.alerts.values().filter(|a| &a.target == target).collect()
}

fn node_alerts(f: &Fleet, id: NodeId, n: &Node) -> Vec<String> {
    let mut v: Vec<String> = alerts_for(f, &AlertTarget::Node(id)).iter().map(|a| a.kind.label()).collect();
    for g in &n.gpus {
        for a in alerts_for(f, &AlertTarget::Gpu(*g)) {
            let l = a.kind.label();
            if !v.contains(&l) {
                v.push(l);
            }
        }
    }
    v
}

pub fn node_status(n: &Node) -> (String, &'static str) {
    match (n.ready, n.cordoned) {
        (true, false) => ("Ready".into(), "status.ready"),
        (true, true) => ("Ready,Cordoned".into(), "status.cordoned"),
        (false, false) => ("NotReady".into(), "status.notready"),
        (false, true) => ("NotReady,Cordoned".into(), "status.notready"),
    }
}

fn model_name(m: Option<crate::mig::GpuModel>) -> String {
    m.map(|m| m.name().to_string()).unwrap_or_else(|| "-".into())
}

fn pod_request(f: &Fleet, p: &Pod) -> String {
    let mut parts = Vec::new();
    if p.gpus > 0 {
        parts.push(format!("gpu×{}", p.gpus));
    }
    for (r, n) in &p.mig {
        parts.push(format!("{}×{n}", f.s(*r).trim_start_matches("nvidia.com/")));
    }
    for c in &p.dra {
        parts.push(format!("dra:{}×{}", f.s(c.device_class), c.count));
    }
    parts.join(" ")
}

fn pod_devices(f: &Fleet, p: &Pod) -> String {
    let mut parts: Vec<String> =
        p.bound_gpus.iter().filter_map(|g| f.gpu(*g)).map(|g| format!("gpu{}", g.index)).collect();
    if !p.bound_mig.is_empty() {
        for u in &p.bound_mig {
            let found = f.mig_instance(*u).and_then(|(gid, idx)| {
                let g = f.gpu(gid)?;
                let i = g.instances.get(idx as usize)?;
                Some(format!(
                    "gpu{}/{}@{}",
                    g.index,
                    crate::mig::profile(g.model, i.placement.profile).name,
                    i.placement.start
                ))
            });
            if let Some(s) = found {
                parts.push(s);
            }
        }
    }
    for c in &p.dra {
        match c.allocated {
            Some(a) => {
                let s = f.s(a);
                parts = vec![s.rsplit('/').next().unwrap_or(s).to_string()];
            }
            None => parts.push("unallocated".into()),
        }
    }
    // Held all the same: the device plugin does not say which instance, and no node agent
    // told the fleet. The first words fit the column: `1g.18gb×1 held`.
    for (r, n) in &p.mig_unbound {
        parts.push(format!(
            "{}×{n} held, instance unknown without an agent",
            f.s(*r).trim_start_matches("nvidia.com/mig-")
        ));
    }
    if parts.is_empty() { "-".into() } else { parts.join(",") }
}

/// Utilisation of the devices a pod holds (the mean of those measured; `None` inside when
/// none is), and whether they are idle-but-allocated; `None` when it holds no device the
/// fleet knows of, nor one it holds without a known instance.
pub fn pod_util(f: &Fleet, p: &Pod) -> Option<(Option<u8>, bool)> {
    pod_util_of(f, p).map(|(u, idle, _, _)| (u, idle))
}

/// [`pod_util`] with over how many of how many devices the mean was measured.
fn pod_util_of(f: &Fleet, p: &Pod) -> Option<(Option<u8>, bool, u32, u32)> {
    let mut utils = Vec::new();
    let mut idle = false;
    for g in p.bound_gpus.iter().filter_map(|g| f.gpu(*g)) {
        utils.push(g.last.util);
        idle |= g.idle_allocated;
    }
    if let Some(node) = p.node.and_then(|n| f.node(n)) {
        for g in node.gpus.iter().filter_map(|g| f.gpu(*g)) {
            for i in &g.instances {
                if p.bound_mig.contains(&i.uuid) {
                    utils.push(i.util);
                    idle |= i.idle_allocated;
                }
            }
        }
    }
    // Instances it holds that nobody can name cannot be measured either.
    for (_, n) in &p.mig_unbound {
        utils.extend(std::iter::repeat_n(None, *n as usize));
    }
    if utils.is_empty() {
        return None;
    }
    let measured = utils.iter().flatten().count() as u32;
    let all = utils.len() as u32;
    Some((mean_util(utils.into_iter()), idle, measured, all))
}

fn idle_for(f: &Fleet, low: Option<Ts>, idle: bool) -> Cell {
    match (idle, low) {
        (true, Some(l)) => (format!("idle {}", age(f.now, l)), "gpu.idle"),
        _ => muted("-"),
    }
}

pub fn fits_text(f: &Fleet, g: GpuId) -> String {
    let Some(gpu) = f.gpu(g) else { return String::new() };
    let Some(frag) = f.fragmentation(g) else { return "-".into() };
    let mut v: Vec<String> = frag
        .fits
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(p, n)| format!("{}×{n}", crate::mig::profile(gpu.model, *p).name.split('.').next().unwrap_or("")))
        .collect();
    v.dedup();
    if v.is_empty() { "no room".into() } else { v.join(" ") }
}

fn tenant_status(f: &Fleet, t: &Tenant) -> Cell {
    match f.tenant_gpu_quota(t) {
        Some(q) if t.usage.requested_gpus as i64 > q => ("over quota".into(), "tenant.over_quota"),
        Some(q) if q > 0 && t.usage.requested_gpus as i64 * 100 >= q * 90 => ("near quota".into(), "tenant.near_quota"),
        Some(_) => ("ok".into(), "tenant.ok"),
        None => muted("no quota"),
    }
}

/// A quota's use: its used over its hard, in percent rounded to the nearest (60 of 177 is
/// 34 %); `None` when the hard limit is 0.
pub fn quota_use_pct(q: &Quota) -> Option<i64> {
    let (used, hard) = (i128::from(q.used.milli_value()), i128::from(q.hard.milli_value()));
    (hard > 0).then(|| ((used * 200 + hard) / (hard * 2)) as i64)
}

fn quota_source(f: &Fleet, s: &QuotaSource) -> String {
    match s {
        QuotaSource::ResourceQuota { namespace, name } => format!("ResourceQuota {}/{}", f.s(*namespace), f.s(*name)),
        QuotaSource::ClusterQueue { queue, flavor } => format!("ClusterQueue {}/{}", f.s(*queue), f.s(*flavor)),
    }
}

pub fn event_at(f: &Fleet, id: u32) -> Option<&Event> {
    let n = f.events.len();
    f.events.get(n.checked_sub(1 + id as usize)?)
}

pub fn op_at(f: &Fleet, id: u32) -> Option<&OpStatus> {
    let n = f.ops.len();
    f.ops.get(n.checked_sub(1 + id as usize)?)
}

pub fn op_state(o: &OpStatus) -> Cell {
    match &o.state {
        OpState::Running => ("running".into(), "op.running"),
        OpState::Blocked(_) => ("blocked".into(), "op.blocked"),
        OpState::Succeeded => ("succeeded".into(), "op.ok"),
        OpState::Failed(_) => ("failed".into(), "op.failed"),
        OpState::Cancelled => ("cancelled".into(), "op.blocked"),
    }
}

/// One cell of one row.
pub fn cell(f: &Fleet, v: ViewKind, id: u32, col: usize) -> Cell {
    match v {
        ViewKind::Fleet => {
            let Some(n) = f.node(NodeId(id)) else { return text("") };
            match col {
                0 => text(f.s(n.name)),
                1 => node_status(n),
                2 => text(model_name(n.gpu_model)),
                3 => text(n.gpu_count().to_string()),
                4 => {
                    let a = f.node_allocated_gpus(n);
                    // At least: some MIG instances are held on GPUs nobody named.
                    let at_least = if f.node_allocation_is_estimate(n) { "≥" } else { "" };
                    (
                        format!("{at_least}{a}/{}", n.gpu_count()),
                        if a == n.gpu_count() { "ui.text" } else { "gpu.free" },
                    )
                }
                5 => {
                    let stale = n
                        .gpus
                        .iter()
                        .filter_map(|g| f.gpu(*g))
                        .any(|g| g.last_sample_at.is_some() && g.telemetry_stale(f.now, f.thresholds.stale_ms));
                    let a = node_avg(f, n);
                    let of = of_measured(a.util_of, a.gpus);
                    match a.util {
                        // No sample ever (a cluster without node agents): unknown, not zero.
                        None => muted("—"),
                        Some(u) if stale => (format!("{u}%?{of}"), "ui.stale"),
                        Some(u) => (format!("{u}%{of}"), util_token(u)),
                    }
                }
                6 => {
                    let a = node_avg(f, n);
                    a.mem_pct
                        .map(|m| text(format!("{m}%{}", of_measured(a.sampled_of, a.gpus))))
                        .unwrap_or_else(|| muted("—"))
                }
                7 => {
                    let a = node_avg(f, n);
                    a.power_w
                        .map(|w| text(format!("{w}W{}", of_measured(a.sampled_of, a.gpus))))
                        .unwrap_or_else(|| muted("—"))
                }
                8 => {
                    let cfg = f.s(n.mig_config);
                    let state = n.mig_state;
                    let tok = match state {
                        MigConfigState::Pending | MigConfigState::Rebooting => "status.pending",
                        MigConfigState::Failed => "status.failed",
                        _ => "ui.text",
                    };
                    if cfg == "all-disabled" || cfg.is_empty() {
                        muted("off")
                    } else {
                        (format!("{cfg} {}", state.as_str()), tok)
                    }
                }
                9 => {
                    let (i, measured) = node_idle(f, n);
                    let allocated = n.gpus_allocated + n.mig_allocated;
                    if i > 0 {
                        (i.to_string(), "gpu.idle")
                    } else if measured == 0 && allocated > 0 {
                        // Allocated, but nothing measures it: not idle, not busy, unknown.
                        muted("—")
                    } else {
                        muted("0")
                    }
                }
                10 => text(n.pods.to_string()),
                11 => {
                    let a = node_alerts(f, NodeId(id), n);
                    if a.is_empty() { muted("") } else { (a.join(","), "severity.error") }
                }
                12 => muted(age(f.now, n.created)),
                _ => text(""),
            }
        }
        ViewKind::Gpus => {
            let g = GpuId(id >> 3);
            let inst = (id & 7) as usize;
            let Some(gpu) = f.gpu(g) else { return text("") };
            let node = f.node(gpu.node);
            if inst > 0 {
                let Some(i) = gpu.instances.get(inst - 1) else { return text("") };
                let p = crate::mig::profile(gpu.model, i.placement.profile);
                let pod = i.pod.and_then(|p| f.pod(p));
                // Pods on the node hold this many of its profile without a known instance:
                // this one may be among them.
                let maybe = f.instance_maybe_held(g, inst - 1);
                return match col {
                    1 => (format!("  └ {} @{}", p.name, i.placement.start), "gpu.mig.used"),
                    3 => muted("mig"),
                    4 => {
                        if pod.is_some() || maybe > 0 {
                            util_cell(i.util)
                        } else {
                            muted("-")
                        }
                    }
                    5 => text(format!("{}/{}G", i.mem_used_mib / 1024, p.memory_mib / 1024)),
                    8 => pod.and_then(|p| f.tenant(p.tenant)).map(|t| text(f.s(t.name))).unwrap_or_else(|| muted("")),
                    9 => match pod {
                        Some(p) => text(&*p.name),
                        None if maybe > 0 => muted(format!("unknown: node holds {maybe}")),
                        None => ("free".into(), "gpu.free"),
                    },
                    10 => idle_for(f, i.low_since, i.idle_allocated),
                    _ => muted(""),
                };
            }
            match col {
                0 => text(node.map(|n| f.s(n.name)).unwrap_or("")),
                1 => text(format!("gpu{}", gpu.index)),
                2 => text(gpu.model.name()),
                3 => {
                    if gpu.mig_enabled {
                        ("MIG".into(), "gpu.mig.used")
                    } else {
                        muted("full")
                    }
                }
                4 | 6 | 7 if gpu.last_sample_at.is_none() => muted("—"),
                5 if gpu.last_sample_at.is_none() => muted(format!("?/{}G", gpu.memory_mib / 1024)),
                4 => gpu_util_cell(f, gpu),
                5 => text(format!("{}/{}G", gpu.mem_used_mib() / 1024, gpu.memory_mib / 1024)),
                6 => text(format!("{}W", gpu.last.power_w)),
                7 => text(format!("{}C", gpu.last.temp_c)),
                8 => {
                    let t = gpu.pods.first().and_then(|p| f.pod(*p)).and_then(|p| f.tenant(p.tenant));
                    t.map(|t| text(f.s(t.name))).unwrap_or_else(|| muted(""))
                }
                9 => {
                    if gpu.mig_enabled {
                        let used = gpu.mig_in_use();
                        match f.gpu_mig_maybe_held(g) {
                            0 => text(format!("{used}/{} MIG in use", gpu.instances.len())),
                            // Not known to be free: held on the node, which instance unknown.
                            maybe => text(format!("{used}/{} in use, {maybe} unknown", gpu.instances.len())),
                        }
                    } else {
                        match gpu.pods.first().and_then(|p| f.pod(*p)) {
                            Some(p) => text(&*p.name),
                            None => match node.map_or(0, |n| f.whole_gpus_unbound(n)) {
                                0 => ("free".into(), "gpu.free"),
                                // Pods hold GPUs here nobody named: this may be one.
                                k => muted(format!("unknown: node holds {k}")),
                            },
                        }
                    }
                }
                10 => idle_for(f, gpu.low_since, gpu.idle_allocated),
                11 => {
                    if gpu.mig_enabled {
                        text(fits_text(f, g))
                    } else {
                        muted("")
                    }
                }
                12 => match (gpu.xid, gpu.ecc_uncorrected) {
                    _ if gpu.telemetry_stale(f.now, f.thresholds.stale_ms) => (
                        match gpu.last_sample_at {
                            Some(t) => format!("stale {}", age(f.now, t)),
                            None => "no data".into(),
                        },
                        "ui.stale",
                    ),
                    (Some((code, _)), _) => (format!("XID {code}"), "severity.error"),
                    (None, n) if n > 0 => (format!("ECC {n}"), "severity.error"),
                    _ => ("ok".into(), "status.ready"),
                },
                _ => text(""),
            }
        }
        ViewKind::Tenants => {
            let Some(t) = f.tenant(TenantId(id)) else { return text("") };
            let u = &t.usage;
            match col {
                0 => text(f.s(t.name)),
                1 => muted(f.s(t.source)),
                2 => text(t.namespaces.iter().map(|n| f.s(*n)).collect::<Vec<_>>().join(",")),
                3 => text(u.pods.to_string()),
                4 => {
                    if u.pending_pods > 0 {
                        (u.pending_pods.to_string(), "status.pending")
                    } else {
                        muted("0")
                    }
                }
                5 => f.tenant_gpu_quota(t).map(|q| text(q.to_string())).unwrap_or_else(|| muted("-")),
                6 => text(u.requested_gpus.to_string()),
                7 => text(u.allocated_gpus.to_string()),
                8 => text(u.allocated_mig.to_string()),
                // Busy and idle are counted among the measured devices only; with none
                // measured they are unknown, not 0.
                9..=11 if u.measured == 0 && u.allocated_gpus + u.allocated_mig > 0 => muted("—"),
                9 => text(u.busy.to_string()),
                10 => {
                    if u.idle_allocated > 0 {
                        (u.idle_allocated.to_string(), "gpu.idle")
                    } else {
                        muted("0")
                    }
                }
                // Nothing measured (or nothing allocated): a share of nothing is no figure.
                11 if u.measured == 0 => muted("—"),
                11 => {
                    let p = pct(u.busy, u.measured);
                    let of = of_measured(u.measured, u.allocated_gpus + u.allocated_mig);
                    (format!("{p}%{of}"), util_token(p as u8))
                }
                12 => tenant_status(f, t),
                _ => text(""),
            }
        }
        ViewKind::Quotas => {
            let Some(q) = f.quota(QuotaId(id)) else { return text("") };
            let t = f.tenant(q.tenant);
            match col {
                0 => text(t.map(|t| f.s(t.name)).unwrap_or("")),
                1 => muted(quota_source(f, &q.source)),
                2 => text(f.s(q.resource)),
                3 => text(q.hard.to_string()),
                4 => text(q.used.to_string()),
                // This quota's namespace and resource only; a tenant-wide total is the tenants view's.
                5 => f.quota_requested(q).map(|r| text(r.to_string())).unwrap_or_else(|| muted("-")),
                6 => match quota_use_pct(q) {
                    Some(p) => {
                        let (used, hard) = (q.used.milli_value(), q.hard.milli_value());
                        let tok = if used > hard {
                            "tenant.over_quota"
                        } else if i128::from(used) * 10 >= i128::from(hard) * 9 {
                            "tenant.near_quota"
                        } else {
                            "tenant.ok"
                        };
                        (format!("{p}%"), tok)
                    }
                    // Nothing allowed and something used: over, by no percentage.
                    None if q.used.value() > 0 => ("over".into(), "tenant.over_quota"),
                    None => muted("-"),
                },
                7 => muted(f.s(q.version)),
                _ => text(""),
            }
        }
        ViewKind::Pods => {
            let Some(p) = f.pod(PodId(id)) else { return text("") };
            match col {
                0 => text(f.s(p.namespace)),
                1 => text(&*p.name),
                2 => text(f.tenant(p.tenant).map(|t| f.s(t.name)).unwrap_or("")),
                3 => p.node.and_then(|n| f.node(n)).map(|n| text(f.s(n.name))).unwrap_or_else(|| muted("<none>")),
                4 => {
                    let tok = match p.phase {
                        Phase::Running => "status.running",
                        Phase::Pending => "status.pending",
                        Phase::Succeeded => "status.succeeded",
                        Phase::Failed => "status.failed",
                        _ => "status.pending",
                    };
                    (p.phase.as_str().into(), tok)
                }
                5 => text(pod_request(f, p)),
                6 => text(pod_devices(f, p)),
                7 => match pod_util_of(f, p) {
                    Some((Some(u), _, measured, all)) => (format!("{u}%{}", of_measured(measured, all)), util_token(u)),
                    Some((None, ..)) => muted("—"),
                    None => muted("-"),
                },
                8 => match pod_util(f, p) {
                    Some((_, true)) => ("idle".into(), "gpu.idle"),
                    _ => muted("-"),
                },
                9 => muted(p.owner.as_str()),
                10 => muted(age(f.now, p.created)),
                _ => text(""),
            }
        }
        ViewKind::Events => {
            let Some(e) = event_at(f, id) else { return text("") };
            match col {
                0 => muted(age(f.now, e.ts)),
                1 => {
                    let tok = match e.severity {
                        Severity::Info => "severity.info",
                        Severity::Warning => "severity.warning",
                        Severity::Error => "severity.error",
                    };
                    (e.severity.as_str().into(), tok)
                }
                2 => text(f.s(e.reason)),
                3 => text(&e.object),
                4 => text(&e.message),
                _ => text(""),
            }
        }
        ViewKind::Ops => {
            let Some(o) = op_at(f, id) else { return text("") };
            match col {
                0 => muted(o.id.to_string()),
                1 => text(&o.title),
                2 => text(&o.target),
                3 => op_state(o),
                4 => text(format!("{}/{}", o.done, o.total)),
                6 => match &o.state {
                    OpState::Blocked(r) | OpState::Failed(r) => (r.clone(), op_state(o).1),
                    _ => text(&o.step),
                },
                5 => muted(age(f.now, o.started)),
                _ => text(""),
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SortKey {
    Num(i64),
    Str(String),
}

/// Numbers sort as numbers ("10/8" by its first number, "78%" as 78).
pub fn sort_key(f: &Fleet, v: ViewKind, id: u32, col: usize) -> SortKey {
    // Ages sort by timestamp, not by their text.
    let ts = match (v, col) {
        (ViewKind::Fleet, 12) => f.node(NodeId(id)).map(|n| n.created),
        (ViewKind::Pods, 10) => f.pod(PodId(id)).map(|p| p.created),
        (ViewKind::Events, 0) => event_at(f, id).map(|e| u64::MAX - e.ts),
        (ViewKind::Ops, 5) => op_at(f, id).map(|o| u64::MAX - o.started),
        _ => None,
    };
    if let Some(t) = ts {
        return SortKey::Num(-(t as i64));
    }
    let (s, _) = cell(f, v, id, col);
    let col_def = columns(v).get(col);
    if col_def.is_some_and(|c| c.right) || (v == ViewKind::Gpus && (col == 4 || col == 5)) {
        let digits: String =
            s.trim_start().trim_start_matches('≥').chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
        if let Ok(n) = digits.parse::<i64>() {
            return SortKey::Num(n);
        }
    }
    SortKey::Str(s.to_lowercase())
}

/// The columns a filter looks at: names, states and kinds, not the numbers that move
/// every second (so a filter stays put, and stays cheap on 400,000 pods).
pub fn filter_columns(v: ViewKind) -> &'static [usize] {
    match v {
        ViewKind::Fleet => &[0, 1, 2, 8, 11],
        ViewKind::Gpus => &[0, 1, 2, 3, 8, 9, 12],
        ViewKind::Tenants => &[0, 1, 2, 12],
        ViewKind::Quotas => &[0, 1, 2],
        ViewKind::Pods => &[0, 1, 2, 3, 4, 5, 6, 9],
        ViewKind::Events => &[1, 2, 3, 4],
        ViewKind::Ops => &[1, 2, 3, 6],
    }
}

/// Whether a row matches a filter: case-insensitive substring of any cell; a leading `!`
/// inverts it.
pub fn matches(f: &Fleet, v: ViewKind, id: u32, filter: &str) -> bool {
    let (neg, needle) = match filter.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, filter),
    };
    if needle.is_empty() {
        return true;
    }
    let needle = needle.to_lowercase();
    let hit = filter_columns(v).iter().any(|c| cell(f, v, id, *c).0.to_lowercase().contains(&needle));
    hit != neg
}

/// Filtered, sorted rows of a view.
pub fn rows(f: &Fleet, v: ViewKind, filter: &str, sort_col: usize, descending: bool) -> Vec<u32> {
    let mut ids: Vec<u32> = ids(f, v).into_iter().filter(|id| matches(f, v, *id, filter)).collect();
    let mut keyed: Vec<(SortKey, u32)> = ids.drain(..).map(|id| (sort_key(f, v, id, sort_col), id)).collect();
    keyed.sort();
    if descending {
        keyed.reverse();
    }
    let mut out: Vec<u32> = keyed.into_iter().map(|(_, id)| id).collect();
    if v == ViewKind::Gpus {
        out = out.into_iter().flat_map(|id| std::iter::once(id).chain(gpu_children(f, id))).collect();
    }
    out
}

/// All rows of a view as text, for `fabrik snapshot`.
pub fn text_rows(f: &Fleet, v: ViewKind, filter: &str) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let (col, desc) = default_sort(v);
    let ids = rows(f, v, filter, col, desc);
    let headers = columns(v).iter().map(|c| c.name).collect();
    let rows = ids.iter().map(|id| (0..columns(v).len()).map(|c| cell(f, v, *id, c).0).collect()).collect();
    (headers, rows)
}
