//! The drill-down screens: a node's topology tree (node → GPU → MIG instance → pod) with
//! history charts, and a GPU's MIG slice map with what still fits.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Borders, Chart, Dataset, GraphType, Paragraph, Wrap};
use tui_tree_widget::{Tree, TreeItem, TreeState};

use super::cell::{age, gpu_util_cell, util_cell};
use super::fleet::node_status;
use super::gpus::fits_text;
use crate::mig;
use crate::model::*;
use crate::ui::theme::Theme;

/// One row of the flattened topology tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeRow {
    pub path: Vec<String>,
    pub depth: usize,
    pub gpu: Option<GpuId>,
}

/// `name [tenant] phase`, and the reason a container cannot start or keep running when there
/// is one (`Running · CrashLoopBackOff`), as kubectl's STATUS says it.
fn pod_label(f: &Fleet, pid: PodId) -> String {
    match f.pod(pid) {
        Some(p) => format!(
            "{} [{}] {}{}",
            f.pod_display(p),
            f.tenant(p.tenant).map(|t| f.str_of(t.name)).unwrap_or(""),
            p.phase.as_str(),
            match f.held_back(p) {
                Some(Waiting::Container { reason, .. }) => format!(" · {reason}"),
                _ => String::new(),
            }
        ),
        None => "?".into(),
    }
}

/// The tree's rows in display order, honouring collapsed paths. Pure, so both update
/// (selection) and render use it.
pub fn tree_rows(f: &Fleet, node: NodeId, closed: &std::collections::HashSet<String>) -> Vec<TreeRow> {
    let mut out = Vec::new();
    let Some(n) = f.node(node) else { return out };
    let root = "node".to_string();
    out.push(TreeRow { path: vec![root.clone()], depth: 0, gpu: None });
    if closed.contains(&root) {
        return out;
    }
    for &gid in &n.gpus {
        let Some(g) = f.gpu(gid) else { continue };
        let gk = format!("g{}", g.index);
        out.push(TreeRow { path: vec![root.clone(), gk.clone()], depth: 1, gpu: Some(gid) });
        if closed.contains(&gk) {
            continue;
        }
        if g.mig_enabled {
            for (ii, inst) in g.instances.iter().enumerate() {
                let ik = format!("{gk}.i{ii}");
                out.push(TreeRow { path: vec![root.clone(), gk.clone(), ik.clone()], depth: 2, gpu: Some(gid) });
                if let Some(p) = inst.pod
                    && !closed.contains(&ik)
                {
                    out.push(TreeRow {
                        path: vec![root.clone(), gk.clone(), ik.clone(), format!("p{}", p.0)],
                        depth: 3,
                        gpu: Some(gid),
                    });
                }
            }
        } else {
            for p in &g.pods {
                out.push(TreeRow {
                    path: vec![root.clone(), gk.clone(), format!("p{}", p.0)],
                    depth: 2,
                    gpu: Some(gid),
                });
            }
        }
    }
    out
}

fn gpu_line<'a>(f: &Fleet, g: &Gpu, theme: &Theme) -> Line<'a> {
    let mut spans = vec![
        Span::styled(format!("gpu{} ", g.index), theme.style("ui.text").add_modifier(Modifier::BOLD)),
        {
            // As the GPU table has it: `41%`, `41%?` when stale, `—` when never measured.
            let (text, token) = gpu_util_cell(f, g);
            Span::styled(format!("{text:>4} "), theme.style(token))
        },
        Span::styled(
            format!(
                "{:>3}/{}G {:>4}W {:>2}C ",
                g.mem_used_mib() / 1024,
                g.memory_mib / 1024,
                g.last.power_w,
                g.last.temp_c
            ),
            theme.style("ui.text.muted"),
        ),
    ];
    if g.mig_enabled {
        let used = g.mig_in_use();
        let gid = f.gpu_by_uuid(f.str_of(g.uuid)).unwrap_or(GpuId(0));
        let room = fits_text(f, gid);
        let unknown = match f.gpu_mig_maybe_held(gid) {
            0 => String::new(),
            n => format!(" ({n} unknown)"),
        };
        spans.push(Span::styled(
            if room == "no room" {
                format!("MIG {used}/{} in use{unknown}, no free slices", g.instances.len())
            } else {
                format!("MIG {used}/{} in use{unknown}, room for {room}", g.instances.len())
            },
            theme.style("gpu.mig.used"),
        ));
    } else if g.pods.is_empty() {
        match f.node(g.node).map_or(0, |n| f.whole_gpus_unbound(n)) {
            0 => spans.push(Span::styled("free", theme.style("gpu.free"))),
            k => spans.push(Span::styled(format!("unknown ({k} held on node)"), theme.style("ui.text.muted"))),
        }
    }
    if g.idle_allocated {
        spans.push(Span::styled(" IDLE", theme.style("gpu.idle")));
    }
    if let Some((code, _)) = g.xid {
        spans.push(Span::styled(format!(" XID {code}"), theme.style("severity.error")));
    }
    Line::from(spans)
}

/// What a MIG instance no pod is known to hold is: free, or (when pods on its node hold
/// instances of its profile the fleet cannot name) unknown.
fn unheld_instance(f: &Fleet, gid: GpuId, index: usize) -> (String, &'static str) {
    match f.instance_maybe_held(gid, index) {
        0 => ("free".into(), "gpu.free"),
        n => (format!("unknown ({n} held on node)"), "ui.text.muted"),
    }
}

fn build_items<'a>(f: &Fleet, node: NodeId, theme: &Theme) -> Vec<TreeItem<'a, String>> {
    let Some(n) = f.node(node) else { return Vec::new() };
    let mut gpus = Vec::new();
    for &gid in &n.gpus {
        let Some(g) = f.gpu(gid) else { continue };
        let gk = format!("g{}", g.index);
        let mut children = Vec::new();
        if g.mig_enabled {
            for (ii, inst) in g.instances.iter().enumerate() {
                let p = mig::profile(g.model, inst.placement.profile);
                let ik = format!("{gk}.i{ii}");
                let label = Line::from(vec![
                    Span::styled(format!("{} @{} ", p.name, inst.placement.start), theme.mig_instance(ii)),
                    {
                        let (text, token) =
                            if inst.pod.is_some() { util_cell(inst.util) } else { unheld_instance(f, gid, ii) };
                        Span::styled(format!("{text:>4}"), theme.style(token))
                    },
                    Span::styled(if inst.idle_allocated { " IDLE" } else { "" }, theme.style("gpu.idle")),
                ]);
                let kids: Vec<TreeItem<String>> = inst
                    .pod
                    .map(|pid| TreeItem::new_leaf(format!("p{}", pid.0), pod_label(f, pid)))
                    .into_iter()
                    .collect();
                children.push(
                    TreeItem::new(ik.clone(), label.clone(), kids).unwrap_or_else(|_| TreeItem::new_leaf(ik, label)),
                );
            }
        } else {
            for p in &g.pods {
                children.push(TreeItem::new_leaf(format!("p{}", p.0), pod_label(f, *p)));
            }
        }
        let line = gpu_line(f, g, theme);
        gpus.push(TreeItem::new(gk.clone(), line.clone(), children).unwrap_or_else(|_| TreeItem::new_leaf(gk, line)));
    }
    let (status, _) = node_status(n);
    let title = format!(
        "{} · {} · {} · {} GPUs",
        f.str_of(n.name),
        status,
        n.gpu_model.map(|m| m.name()).unwrap_or("-"),
        n.gpu_count()
    );
    match TreeItem::new("node".to_string(), title.clone(), gpus) {
        Ok(t) => vec![t],
        Err(_) => vec![TreeItem::new_leaf("node".to_string(), title)],
    }
}

/// History of one GPU (or the node's average when none is selected), as chart points.
/// Chart points: utilisation, memory, power, and the power axis maximum.
type Series = (Vec<(f64, f64)>, Vec<(f64, f64)>, Vec<(f64, f64)>, f64);

fn series(f: &Fleet, gpus: &[GpuId]) -> Series {
    let hist: Vec<Vec<Sample>> = gpus.iter().filter_map(|g| f.gpu(*g)).map(|g| g.history.iter().collect()).collect();
    let len = hist.iter().map(Vec::len).max().unwrap_or(0);
    let mut u = Vec::with_capacity(len);
    let mut m = Vec::with_capacity(len);
    let mut p = Vec::with_capacity(len);
    let mut max_p = 100.0f64;
    for i in 0..len {
        let col: Vec<&Sample> = hist.iter().filter_map(|h| h.get(i + h.len() - len.min(h.len()))).collect();
        if col.is_empty() {
            continue;
        }
        let k = col.len() as f64;
        let x = i as f64;
        // Utilisation over the samples that have one; a column with none leaves a gap.
        let (sum, n) = col.iter().filter_map(|s| s.util).fold((0.0, 0u32), |(s, n), u| (s + f64::from(u), n + 1));
        if n > 0 {
            u.push((x, sum / f64::from(n)));
        }
        m.push((x, col.iter().map(|s| s.mem_pct as f64).sum::<f64>() / k));
        let pw = col.iter().map(|s| s.power_w as f64).sum::<f64>() / k;
        max_p = max_p.max(pw);
        p.push((x, pw));
    }
    (u, m, p, max_p)
}

pub fn render_charts(frame: &mut Frame, area: Rect, f: &Fleet, gpus: &[GpuId], what: &str, theme: &Theme) {
    let (u, m, p, max_p) = series(f, gpus);
    let n = u.len().max(2) as f64 - 1.0;
    let [top, bottom] = Layout::vertical([Constraint::Percentage(60), Constraint::Percentage(40)]).areas(area);
    let last_u = u.last().map(|x| x.1).unwrap_or(0.0);
    let last_m = m.last().map(|x| x.1).unwrap_or(0.0);
    let last_p = p.last().map(|x| x.1).unwrap_or(0.0);
    let datasets = vec![
        Dataset::default()
            .name(format!("util {last_u:.0}%"))
            .graph_type(GraphType::Line)
            .style(theme.style("chart.util"))
            .data(&u),
        Dataset::default()
            .name(format!("mem {last_m:.0}%"))
            .graph_type(GraphType::Line)
            .style(theme.style("chart.mem"))
            .data(&m),
    ];
    let chart = Chart::new(datasets)
        .block(Block::default().borders(Borders::ALL).border_style(theme.style("ui.border")).title(Span::styled(
            format!(" {what}: utilisation & memory, last {} samples ", u.len()),
            theme.style("ui.title"),
        )))
        .x_axis(Axis::default().bounds([0.0, n]).style(theme.style("ui.text.muted")))
        .y_axis(Axis::default().bounds([0.0, 100.0]).labels(["0", "50", "100%"]).style(theme.style("ui.text.muted")));
    frame.render_widget(chart, top);
    let pw = vec![
        Dataset::default()
            .name(format!("power {last_p:.0}W"))
            .graph_type(GraphType::Line)
            .style(theme.style("chart.power"))
            .data(&p),
    ];
    let top_label = format!("{max_p:.0}W");
    let chart = Chart::new(pw)
        .block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(theme.style("ui.border"))
                .title(Span::styled(format!(" {what}: power "), theme.style("ui.title"))),
        )
        .x_axis(Axis::default().bounds([0.0, n]).style(theme.style("ui.text.muted")))
        .y_axis(
            Axis::default()
                .bounds([0.0, max_p * 1.1])
                .labels(["0".to_string(), top_label])
                .style(theme.style("ui.text.muted")),
        );
    frame.render_widget(chart, bottom);
}

pub fn render_node(
    frame: &mut Frame,
    area: Rect,
    f: &Fleet,
    node: NodeId,
    sel: usize,
    closed: &std::collections::HashSet<String>,
    theme: &Theme,
) {
    let Some(n) = f.node(node) else {
        frame.render_widget(
            Paragraph::new("this node is gone from the fleet; press Esc to go back").style(theme.style("ui.warning")),
            area,
        );
        return;
    };
    let [left, right] = Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(area);
    let rows = tree_rows(f, node, closed);
    let items = build_items(f, node, theme);
    let mut state = TreeState::default();
    for r in &rows {
        if !closed.contains(r.path.last().map(String::as_str).unwrap_or("")) {
            state.open(r.path.clone());
        }
    }
    let sel_row = rows.get(sel.min(rows.len().saturating_sub(1)));
    if let Some(r) = sel_row {
        state.select(r.path.clone());
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.style("ui.border.focus"))
        .title(Span::styled(" Topology: node → GPU → MIG instance → pod ", theme.style("ui.title")));
    if let Ok(tree) = Tree::new(&items) {
        let tree = tree.block(block).highlight_style(theme.style("ui.selection")).highlight_symbol("▶ ");
        frame.render_stateful_widget(tree, left, &mut state);
    }
    let gpus: Vec<GpuId> = match sel_row.and_then(|r| r.gpu) {
        Some(g) => vec![g],
        None => n.gpus.clone(),
    };
    let what = match sel_row.and_then(|r| r.gpu).and_then(|g| f.gpu(g)) {
        Some(g) => format!("gpu{}", g.index),
        None => "node average".to_string(),
    };
    // The Cluster API Machine the node is, when a management cluster says so.
    let machine = f.machine_of_node(f.str_of(n.name));
    let mut lines = vec![
        Line::from(vec![
            Span::styled("status  ", theme.style("ui.text.muted")),
            Span::styled(node_status(n).0, theme.style(node_status(n).1)),
        ]),
        Line::from(format!("mig     {} {}", f.str_of(n.mig_config), n.mig_state.as_str())),
        Line::from(format!(
            "alloc   {}{}/{} GPUs, {} MIG instances{}, {} GPU pods",
            if f.node_allocation_is_estimate(n) { "≥" } else { "" },
            f.node_allocated_gpus(n),
            n.gpu_count(),
            n.mig_allocated,
            match n.mig_unbound_total() {
                0 => String::new(),
                k => format!(" ({k} held, instance unknown without an agent)"),
            },
            n.pods
        )),
        Line::from(format!(
            "capacity {}",
            n.allocatable
                .iter()
                .filter(|(r, v)| f.str_of(*r).starts_with("nvidia.com/") && *v > 0)
                .map(|(r, v)| format!("{}={v}", f.str_of(*r).trim_start_matches("nvidia.com/")))
                .collect::<Vec<_>>()
                .join(" ")
        )),
        Line::from(format!("age     {}", age(f.now, n.created))),
        telemetry_line(f, n, theme),
    ];
    if let Some(m) = machine {
        let cluster = if m.cluster.is_empty() { String::new() } else { format!(" · cluster {}", m.cluster) };
        lines.push(Line::from(format!("machine {}{cluster}", m.key())));
        lines.push(Line::from(format!("└ {}", m.state_text())));
    }
    // The Metal3 host under it: node → Machine → BareMetalHost.
    if let Some(h) = f.host_of_node(f.str_of(n.name)) {
        let style = if h.in_error() { theme.style("severity.error") } else { theme.style("ui.text") };
        lines.push(Line::from(format!("host    {}", h.key())));
        lines.push(Line::from(Span::styled(format!("└ {}", h.state_text()), style)));
        if let Some(hw) = h.hardware.as_ref().map(|hw| hw.text()).filter(|t| !t.is_empty()) {
            lines.push(Line::from(format!("└ {hw}")));
        }
    }
    for a in f
        .alerts
        .values()
        .filter(|a| a.target == AlertTarget::Node(node) || n.gpus.iter().any(|g| a.target == AlertTarget::Gpu(*g)))
    {
        lines.push(Line::from(Span::styled(format!("! {}", a.message), theme.style("severity.error"))));
    }
    // As tall as what it says (an alert wraps to about two rows), within half the column.
    let rows = lines.len() as u16 + f.alerts.values().filter(|a| a.target == AlertTarget::Node(node)).count() as u16;
    let [info, charts] =
        Layout::vertical([Constraint::Length((rows + 2).max(9).min((right.height / 2).max(9))), Constraint::Min(6)])
            .areas(right);
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: true }).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(theme.style("ui.border"))
                .title(Span::styled(" Node ", theme.style("ui.title"))),
        ),
        info,
    );
    render_charts(frame, charts, f, &gpus, &what, theme);
}

/// How fresh the node's GPU telemetry is: "2s ago", "stale since 3m" (with the agent
/// stream's trouble when it has one), or none at all; never silently old numbers.
fn telemetry_line<'a>(f: &Fleet, n: &Node, theme: &Theme) -> Line<'a> {
    let gpus: Vec<&Gpu> = n.gpus.iter().filter_map(|g| f.gpu(*g)).collect();
    let last = gpus.iter().filter_map(|g| g.last_sample_at).max();
    let stale = gpus.iter().any(|g| g.telemetry_stale(f.now, f.thresholds.stale_ms));
    let agent = match f.feeds.get(&agent_feed(f.str_of(n.name))) {
        Some(FeedState::Reconnecting { since, reason }) => {
            format!("; agent reconnecting since {} ({reason})", age(f.now, *since))
        }
        Some(FeedState::Stale { since, reason }) => format!("; agent stale since {} ({reason})", age(f.now, *since)),
        Some(FeedState::Live) | None => String::new(),
    };
    let label = Span::styled("telemetry ", theme.style("ui.text.muted"));
    let (text, token) = match last {
        None if gpus.is_empty() => ("no GPUs".to_string(), "ui.text.muted"),
        None => (format!("none (no node agent or Prometheus feeds this node){agent}"), "ui.text.muted"),
        Some(t) if stale => (format!("stale since {}{agent}", age(f.now, t)), "ui.stale"),
        Some(t) => (format!("{} ago", age(f.now, t)), "ui.text"),
    };
    Line::from(vec![label, Span::styled(text, theme.style(token))])
}

/// Compute slices an instance occupies: they start with its memory placement on the
/// 7-slice GPUs the catalog covers.
fn compute_range(model: mig::GpuModel, inst: &mig::PlacedInstance) -> std::ops::Range<u8> {
    let p = mig::profile(model, inst.profile);
    let start = inst.start.min(7);
    start..(start + p.compute_slices).min(7)
}

fn slice_row<'a>(cells: usize, owner: &[Option<usize>], labels: &[String], width: u16, theme: &Theme) -> Line<'a> {
    let cw = ((width as usize).saturating_sub(12) / cells).max(3);
    let mut spans = Vec::new();
    let mut i = 0;
    while i < cells {
        let o = owner[i];
        let mut j = i + 1;
        while j < cells && owner[j] == o && o.is_some() {
            j += 1;
        }
        let w = cw * (j - i);
        let (text, style) = match o {
            Some(k) => {
                let l = labels.get(k).cloned().unwrap_or_default();
                (
                    format!("{:^w$}", truncate(&l, w.saturating_sub(1)), w = w),
                    theme.mig_instance(k).add_modifier(Modifier::REVERSED),
                )
            }
            None => (format!("{:^w$}", "free", w = w), theme.style("gpu.mig.free")),
        };
        spans.push(Span::styled(text, style));
        spans.push(Span::raw(" "));
        i = j;
    }
    Line::from(spans)
}

fn truncate(s: &str, w: usize) -> String {
    if s.chars().count() <= w { s.to_string() } else { s.chars().take(w.saturating_sub(1)).collect::<String>() + "…" }
}

/// How the GPU reaches the other GPUs of its node, grouped as `nvidia-smi topo -m` would
/// label the pairs: "NV18 → gpu1,2,3 · SYS → gpu4,5".
fn peer_line<'a>(f: &Fleet, gid: GpuId, theme: &Theme) -> Option<Line<'a>> {
    let peers = f.gpu_peers.get(&gid).filter(|p| !p.is_empty())?;
    let mut groups: Vec<(String, Vec<u8>)> = Vec::new();
    for p in peers {
        let label = if p.nvlinks > 0 { format!("NV{}", p.nvlinks) } else { p.path.clone() };
        match groups.iter_mut().find(|(l, _)| *l == label) {
            Some((_, v)) => v.push(p.peer),
            None => groups.push((label, vec![p.peer])),
        }
    }
    let text = groups
        .iter()
        .map(|(l, v)| format!("{l} → gpu{}", v.iter().map(u8::to_string).collect::<Vec<_>>().join(",")))
        .collect::<Vec<_>>()
        .join(" · ");
    Some(Line::from(vec![
        Span::styled("links  ", theme.style("ui.text.muted")),
        Span::styled(text, theme.style("ui.text")),
    ]))
}

/// What runs on the GPU, as its node agent sees it, next to what the cluster allocated: a
/// process of a pod the GPU was not given is marked.
fn process_lines<'a>(f: &Fleet, gid: GpuId, theme: &Theme) -> Vec<Line<'a>> {
    let Some(g) = f.gpu(gid) else { return Vec::new() };
    let Some(procs) = f.gpu_procs.get(&gid) else {
        return vec![Line::from(Span::styled(
            "processes: no node agent streams this GPU",
            theme.style("ui.text.muted"),
        ))];
    };
    let seen = g.last_sample_at.map(|t| format!(", {} ago", age(f.now, t))).unwrap_or_default();
    let mut out = vec![Line::from(Span::styled(format!("PROCESSES (node agent{seen})"), theme.style("ui.header")))];
    if procs.is_empty() {
        out.push(Line::from(Span::styled("no compute processes", theme.style("ui.text.muted"))));
        return out;
    }
    let given: Vec<String> = g
        .pods
        .iter()
        .chain(g.instances.iter().filter_map(|i| i.pod.as_ref()))
        .filter_map(|p| f.pod(*p))
        .map(|p| f.pod_display(p))
        .collect();
    for p in procs {
        let mem = p.mem_mib.map(|m| format!("{:>5}G", m / 1024)).unwrap_or_else(|| "     -".into());
        let gi = p.gpu_instance.map(|i| format!(" · GI {i}")).unwrap_or_default();
        let (who, style) = match &p.pod {
            None => ("host process".to_string(), "ui.text.muted"),
            Some(pod) if pod.starts_with("uid:") => (format!("pod {pod} (name unknown)"), "ui.text"),
            Some(pod) if given.iter().any(|g| g == pod) => (pod.clone(), "ui.text"),
            Some(pod) => (format!("{pod} ⚠ not allocated this GPU"), "ui.warning"),
        };
        let container = p.container.as_deref().map(|c| format!(" · {c}")).unwrap_or_default();
        out.push(Line::from(Span::styled(format!("pid {:<8} {mem}  {who}{container}{gi}", p.pid), theme.style(style))));
    }
    out
}

pub fn render_gpu(frame: &mut Frame, area: Rect, f: &Fleet, gid: GpuId, sel: usize, theme: &Theme) {
    let Some(g) = f.gpu(gid) else {
        frame.render_widget(
            Paragraph::new("this GPU is gone from the fleet; press Esc to go back").style(theme.style("ui.warning")),
            area,
        );
        return;
    };
    let node = f.node(g.node).map(|n| f.str_of(n.name)).unwrap_or("");
    let [map, bottom] = Layout::vertical([Constraint::Length(12), Constraint::Min(6)]).areas(area);
    let [list, charts] = Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(bottom);
    let title = format!(" MIG slice map · {node} gpu{} · {} · {} ", g.index, g.model.name(), f.str_of(g.uuid));
    let mut lines = Vec::new();
    if !g.mig_enabled {
        lines.push(Line::from(Span::styled(
            "MIG is disabled on this GPU: it is handed out whole (nvidia.com/gpu).",
            theme.style("ui.text"),
        )));
        lines.push(Line::from(Span::styled("Press m to reslice it into MIG instances.", theme.style("ui.text.muted"))));
    } else {
        let labels: Vec<String> = g
            .instances
            .iter()
            .enumerate()
            .map(|(k, i)| {
                let p = mig::profile(g.model, i.placement.profile);
                match i.pod.and_then(|p| f.pod(p)) {
                    Some(pod) => format!("{} {}", p.name, pod.name),
                    None if f.instance_maybe_held(gid, k) > 0 => format!("{} held?", p.name),
                    None => format!("{} free", p.name),
                }
            })
            .collect();
        let mut mem_owner = vec![None; 8];
        let mut cmp_owner = vec![None; 7];
        for (k, inst) in g.instances.iter().enumerate() {
            let mask = inst.placement.memory_mask(g.model);
            for (s, o) in mem_owner.iter_mut().enumerate() {
                if mask & (1 << s) != 0 {
                    *o = Some(k);
                }
            }
            for s in compute_range(g.model, &inst.placement) {
                cmp_owner[s as usize] = Some(k);
            }
        }
        let w = map.width.saturating_sub(2);
        let cw = ((w as usize).saturating_sub(12) / 8).max(3);
        let idx: String = (0..8).map(|i| format!("{:^cw$} ", i, cw = cw)).collect();
        lines.push(Line::from(vec![
            Span::styled("            ", theme.style("ui.text.muted")),
            Span::styled(idx, theme.style("ui.text.muted")),
        ]));
        let mut row = slice_row(8, &mem_owner, &labels, w, theme);
        row.spans.insert(0, Span::styled("memory    ", theme.style("ui.text.muted")));
        row.spans.insert(1, Span::raw("  "));
        lines.push(row);
        let cw7 = ((w as usize).saturating_sub(12) / 7).max(3);
        let idx7: String = (0..7).map(|i| format!("{:^cw$} ", i, cw = cw7)).collect();
        lines.push(Line::from(""));
        lines.push(Line::from(vec![
            Span::styled("            ", theme.style("ui.text.muted")),
            Span::styled(idx7, theme.style("ui.text.muted")),
        ]));
        let short: Vec<String> =
            g.instances.iter().map(|i| mig::profile(g.model, i.placement.profile).name.to_string()).collect();
        let mut row = slice_row(7, &cmp_owner, &short, w, theme);
        row.spans.insert(0, Span::styled("compute   ", theme.style("ui.text.muted")));
        row.spans.insert(1, Span::raw("  "));
        lines.push(row);
        lines.push(Line::from(""));
        if let Some(frag) = f.fragmentation(gid) {
            lines.push(Line::from(vec![
                Span::styled("free      ", theme.style("ui.text.muted")),
                Span::raw(format!(
                    "{} of 8 memory slices, {} of 7 compute slices",
                    frag.free_memory_slices, frag.free_compute_slices
                )),
            ]));
            let fits: Vec<String> = frag
                .fits
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(p, n)| format!("{}×{n}", mig::profile(g.model, *p).name))
                .collect();
            lines.push(Line::from(vec![
                Span::styled("still fits ", theme.style("ui.text.muted")),
                Span::styled(
                    if !fits.is_empty() {
                        fits.join("  ")
                    } else {
                        // No room for another instance; the free ones above can still be used
                        // (those that may be held without a known instance are not free).
                        let unbound = (0..g.instances.len()).filter(|k| g.instances[*k].pod.is_none());
                        let (unknown, free): (Vec<usize>, Vec<usize>) =
                            unbound.partition(|k| f.instance_maybe_held(gid, *k) > 0);
                        let unknown = match unknown.len() {
                            0 => String::new(),
                            n => format!(", {n} may be held (instance unknown without an agent)"),
                        };
                        match free.len() {
                            0 if unknown.is_empty() => "nothing: every slice is taken".to_string(),
                            1 => format!("no new instance; 1 instance above is free to use{unknown}"),
                            n => format!("no new instance; {n} instances above are free to use{unknown}"),
                        }
                    },
                    theme.style(if fits.is_empty() { "ui.warning" } else { "gpu.mig.free" }),
                ),
            ]));
        }
    }
    frame.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(theme.style("ui.border.focus"))
                .title(Span::styled(title, theme.style("ui.title"))),
        ),
        map,
    );

    let mut rows: Vec<Line> = Vec::new();
    if g.mig_enabled {
        rows.push(Line::from(Span::styled(
            format!("{:<12} {:<6} {:<5} {:>6} {:>9}  {}", "PROFILE", "SLICES", "UTIL", "MEM", "IDLE", "POD"),
            theme.style("ui.header"),
        )));
        for (k, i) in g.instances.iter().enumerate() {
            let p = mig::profile(g.model, i.placement.profile);
            let pod =
                i.pod.and_then(|p| f.pod(p)).map(|p| f.pod_display(p)).unwrap_or_else(|| unheld_instance(f, gid, k).0);
            let idle =
                if i.idle_allocated { i.low_since.map(|l| age(f.now, l)).unwrap_or_default() } else { "-".into() };
            let style = if k == sel { theme.style("ui.selection") } else { theme.mig_instance(k) };
            rows.push(Line::from(Span::styled(
                format!(
                    "{:<12} {:<6} {:>5} {:>5}G {:>9}  {}",
                    p.name,
                    format!("{}-{}", i.placement.start, i.placement.start + p.memory_slices - 1),
                    util_cell(i.util).0,
                    i.mem_used_mib / 1024,
                    idle,
                    pod
                ),
                style,
            )));
        }
    } else {
        for p in &g.pods {
            rows.push(Line::from(pod_label(f, *p)));
        }
        if g.pods.is_empty() {
            match f.node(g.node).map_or(0, |n| f.whole_gpus_unbound(n)) {
                0 => rows.push(Line::from(Span::styled("no pod holds this GPU", theme.style("gpu.free")))),
                k => rows.push(Line::from(Span::styled(
                    format!(
                        "no pod is known to hold this GPU; pods hold {k} GPUs of this node nobody named (no node agent)"
                    ),
                    theme.style("ui.text.muted"),
                ))),
            }
        }
    }
    if let Some((code, at)) = g.xid {
        rows.push(Line::from(Span::styled(
            format!("XID {code} {} ago", age(f.now, at)),
            theme.style("severity.error"),
        )));
    }
    rows.extend(process_lines(f, gid, theme));
    rows.extend(peer_line(f, gid, theme));
    frame.render_widget(
        Paragraph::new(rows).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(theme.style("ui.border"))
                .title(Span::styled(" Instances and pods ", theme.style("ui.title"))),
        ),
        list,
    );
    render_charts(frame, charts, f, &[gid], &format!("gpu{}", g.index), theme);
}
