//! Drawing: `render(&Fleet, &Ui, &Theme, &Keymap, &mut Frame)` is a pure read of state.
//! Only the visible rows are formatted, so a frame costs the same at 48 nodes or 65,000.

use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Row, Table, Tabs, Wrap};

use super::command::{Command, Mode, ViewKind};
use super::keymap::Keymap;
use super::permission::{self, Denied};
use super::state::{Dialog, EditKind, InputKind, Screen, Ui};
use super::theme::Theme;
use super::views::column::{Align, Column, layout_fitted};
use super::views::{detail, tables};
use crate::model::{Fleet, OpState, Severity};

pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 15;

/// Where each part of the screen is; shared by render and mouse handling.
#[derive(Clone, Copy, Debug)]
pub struct Areas {
    pub header: Rect,
    pub tabs: Rect,
    pub body: Rect,
    pub status: Rect,
    pub footer: Rect,
}

pub fn areas(size: Rect) -> Areas {
    let [header, tabs, body, status, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(size);
    Areas { header, tabs, body, status, footer }
}

/// Where a table view's table goes, and its side panel if it has one: the events view
/// lists the active alerts above its events; the operations view shows the selected
/// operation's log below its table.
pub fn table_area(v: ViewKind, body: Rect) -> (Rect, Option<Rect>) {
    if body.height < 16 {
        return (body, None);
    }
    let panel = (body.height / 3).clamp(5, 14);
    match v {
        ViewKind::Events => {
            let [top, table] = Layout::vertical([Constraint::Length(panel), Constraint::Min(6)]).areas(body);
            (table, Some(top))
        }
        ViewKind::Ops => {
            let [table, bottom] = Layout::vertical([Constraint::Min(6), Constraint::Length(panel)]).areas(body);
            (table, Some(bottom))
        }
        _ => (body, None),
    }
}

/// Rows of a table that fit in the body (borders and header row excluded).
pub fn table_height(body: Rect) -> usize {
    body.height.saturating_sub(3) as usize
}

pub fn render(f: &Fleet, ui: &Ui, theme: &Theme, keymap: &Keymap, frame: &mut Frame) {
    let size = frame.area();
    if size.width < MIN_WIDTH || size.height < MIN_HEIGHT {
        let msg = format!(
            "terminal too small: {}×{}\nfabrik needs at least {MIN_WIDTH}×{MIN_HEIGHT}\nenlarge the window, or press q to quit",
            size.width, size.height
        );
        frame.render_widget(
            Paragraph::new(msg).style(theme.style("ui.warning")).alignment(Alignment::Center).wrap(Wrap { trim: true }),
            size,
        );
        return;
    }
    frame.render_widget(Block::default().style(theme.style("ui.text")), size);
    let a = areas(size);
    render_header(f, ui, theme, frame, a.header);
    render_tabs(ui, theme, frame, a.tabs);
    match ui.screen() {
        Screen::Table(v) => {
            let (table, panel) = table_area(v, a.body);
            render_table(f, ui, v, theme, frame, table);
            if let Some(p) = panel {
                render_panel(f, ui, v, theme, frame, p);
            }
        }
        Screen::Node(n) => detail::render_node(frame, a.body, f, n, ui.nav.node_sel, &ui.nav.node_closed, theme),
        Screen::Gpu(g) => detail::render_gpu(frame, a.body, f, g, ui.nav.gpu_row, theme),
        Screen::Inspect => super::views::inspect::render(frame, a.body, &ui.nav, theme),
        Screen::Logs => super::views::logs::render(frame, a.body, f, &ui.nav, theme),
        Screen::Clusters => {
            let (rows, filter) = (&ui.clusters, &ui.clusters_filter);
            let view = super::views::clusters::View {
                rows,
                filter,
                sort: ui.clusters_sort,
                current: ui.cluster,
                selected: ui.clusters_sel,
            };
            super::views::clusters::render(frame, a.body, &view, theme)
        }
    }
    render_status(f, ui, theme, frame, a.status);
    render_footer(f, ui, theme, keymap, frame, a.footer);
    if let Some(d) = &ui.dialog {
        render_dialog(f, d, ui, theme, keymap, frame, size);
    }
    if ui.help {
        render_help(ui, theme, keymap, frame, size);
    }
}

fn render_header(f: &Fleet, ui: &Ui, theme: &Theme, frame: &mut Frame, area: Rect) {
    let t = &f.totals;
    let alloc = tables::pct(t.gpus_allocated, t.gpus);
    // At least: MIG instances pods hold on GPUs nobody named count on as few as can hold them.
    // So do replicas of shared GPUs no one placed on a GPU.
    let at_least = if t.mig_unbound > 0 || t.shares_unplaced > 0 { "≥" } else { "" };
    // Busy and idle among what a source measures; nothing measured is unknown, not 0 %.
    let (busy, busy_tok) = match tables::pct(t.gpus_busy, t.gpus_measured) {
        _ if t.gpus_measured == 0 => ("busy — ".to_string(), "ui.text.muted"),
        p if t.gpus_measured < t.gpus => {
            (format!("busy {p}% of {} measured ", t.gpus_measured), tables::util_token(p as u8))
        }
        p => (format!("busy {p}% "), tables::util_token(p as u8)),
    };
    let allocated_devices =
        f.tenants.values().map(|t| t.usage.allocated_gpus + t.usage.allocated_mig + t.usage.allocated_shares).sum();
    let idle = match t.devices_measured {
        0 if allocated_devices > 0 => "idle-alloc — ".to_string(),
        m if m < allocated_devices => format!("idle-alloc {} of {m} measured ", t.idle_allocated),
        _ => format!("idle-alloc {} ", t.idle_allocated),
    };
    let (feed, feed_tok) = tables::feed_state(f);
    let mut spans = vec![
        Span::styled(" fabrik ", theme.style("ui.title").add_modifier(Modifier::BOLD)),
        Span::styled(
            match f.access.as_ref().filter(|a| !a.user.is_empty()) {
                Some(a) => format!("{} as {} ", ui.session.source, a.user),
                None => format!("{} ", ui.session.source),
            },
            theme.style("ui.text.muted"),
        ),
        Span::styled(format!("[{feed}]"), theme.style(feed_tok)),
        Span::styled(
            match ui.clusters.len() {
                0 | 1 => String::new(),
                n => format!(" cluster {}/{n}", ui.cluster + 1),
            },
            theme.style("ui.text.muted"),
        ),
        Span::styled(if ui.session.readonly { " [read-only]" } else { "" }, theme.style("ui.warning")),
        Span::styled(
            if f.alerts.is_empty() { String::new() } else { format!(" ⚠ {} alerts", f.alerts.len()) },
            theme.style("severity.error").add_modifier(Modifier::BOLD),
        ),
        Span::styled(" │ ", theme.style("ui.border")),
        Span::styled(format!("GPUs {} ", t.gpus), theme.style("ui.text")),
        Span::styled(format!("alloc {at_least}{alloc}% "), theme.style(tables::util_token(alloc as u8))),
        Span::styled(busy, theme.style(busy_tok)),
        Span::styled(idle, theme.style(if t.idle_allocated > 0 { "gpu.idle" } else { "ui.text.muted" })),
    ];
    // Too narrow for all of it: the shares go first, then MIG, so that the nodes ready and
    // the pods pending at the end of the line stay whole where they can; the utilisation
    // figures (busy, idle-alloc) stay, cut at the end when even that is wide.
    let (mig_at, shares_at) = (spans.len(), spans.len() + 1);
    spans.extend([
        // Held instances: bound to a pod, or held by one without a known instance.
        Span::styled(format!("MIG {}/{} ", t.mig_allocated, t.mig_instances), theme.style("gpu.mig.used")),
        // Replicas of time-sliced / MPS GPUs: held of offered.
        Span::styled(
            match (t.shares, t.shares_idle) {
                (0, _) => String::new(),
                (n, 0) => format!("shares {}/{n} ", t.shares_held),
                (n, i) => format!("shares {}/{n} ({i} idle) ", t.shares_held),
            },
            theme.style("gpu.mig.used"),
        ),
    ]);
    spans.extend([
        Span::styled(" │ ", theme.style("ui.border")),
        Span::styled(
            format!("nodes {}/{} ready ", t.nodes_ready, t.nodes),
            theme.style(if t.nodes_ready < t.nodes { "status.notready" } else { "status.ready" }),
        ),
        Span::styled(
            // GPU pods, as the pods view lists them (a tenant's other pods are in its row).
            if t.gpu_pods_pending > 0 {
                format!("pods {} ({} pending)", t.gpu_pods, t.gpu_pods_pending)
            } else {
                format!("pods {}", t.gpu_pods)
            },
            theme.style("ui.text"),
        ),
    ]);
    for place in [shares_at, mig_at] {
        if spans.iter().map(Span::width).sum::<usize>() <= usize::from(area.width) {
            break;
        }
        spans[place] = Span::raw("");
    }
    frame.render_widget(Paragraph::new(Line::from(spans)).style(theme.style("ui.statusbar")), area);
}

fn render_tabs(ui: &Ui, theme: &Theme, frame: &mut Frame, area: Rect) {
    let current = match ui.screen() {
        Screen::Table(v) => Some(v),
        _ => ui.nav.stack.iter().rev().find_map(|s| if let Screen::Table(v) = s { Some(*v) } else { None }),
    };
    let titles: Vec<Line> = super::tabs::titles().into_iter().map(Line::from).collect();
    let idx = current.and_then(|c| ViewKind::ALL.iter().position(|v| *v == c)).unwrap_or(0);
    let mut tabs = Tabs::new(titles)
        .select(idx)
        .style(theme.style("ui.tab"))
        .highlight_style(theme.style("ui.tab.active"))
        .divider(super::tabs::DIVIDER);
    if !matches!(ui.screen(), Screen::Table(_)) {
        tabs = tabs.highlight_style(theme.style("ui.tab"));
    }
    frame.render_widget(tabs, area);
}

fn render_table(f: &Fleet, ui: &Ui, v: ViewKind, theme: &Theme, frame: &mut Frame, area: Rect) {
    // The columns that fit the width, the least important dropped first and the spare
    // width given to names (all of them when wide); see `column::layout`.
    let all = tables::columns(v);
    let t = ui.table(v);
    let ids = ui.rows(v);
    let h = table_height(area);
    let start = t.offset.min(ids.len());
    let end = (start + h).min(ids.len());
    // The cells of the rows drawn, every column once: their widths size the columns.
    let cells: Vec<Vec<(String, &'static str)>> =
        ids[start..end].iter().map(|id| all.iter().map(|c| c.cell_of(f, *id)).collect()).collect();
    let fit: Vec<u16> = (0..all.len())
        .map(|k| cells.iter().map(|r| r[k].0.chars().count()).max().unwrap_or(0).min(usize::from(u16::MAX)) as u16)
        .collect();
    let shown = layout_fitted(all, area.width.saturating_sub(2), ui.wide, &fit);
    let widths: Vec<Constraint> = shown.iter().map(|(_, w)| Constraint::Length(*w)).collect();
    let cols: Vec<(usize, &Column)> = shown.iter().map(|(i, _)| (*i, &all[*i])).collect();
    let sorted = all[tables::sort_index(v, t.sort_col)].name;
    let align = |c: &Column| if c.align == Align::Right { Alignment::Right } else { Alignment::Left };
    let header = Row::new(cols.iter().map(|(_, c)| {
        let mark = if c.name == sorted { if t.descending { "↓" } else { "↑" } } else { "" };
        Line::from(format!("{}{mark}", c.name)).alignment(align(c))
    }))
    .style(theme.style("ui.header"));
    let selection = theme.style("ui.selection");
    let rows = cells.into_iter().enumerate().map(|(i, mut row_cells)| {
        let selected = start + i == t.selected;
        let row = Row::new(cols.iter().map(|(k, c)| {
            let (s, tok) = std::mem::take(&mut row_cells[*k]);
            // On the selected row the selection colours win, so every cell stays readable.
            let style = if selected { theme.style(tok).patch(selection) } else { theme.style(tok) };
            Line::from(Span::styled(s, style)).alignment(align(c))
        }));
        if selected { row.style(selection) } else { row }
    });
    let total = ui.caches.get(&v).map(|c| c.total).unwrap_or(0);
    let filter = if t.filter.is_empty() { String::new() } else { format!(" /{} ", t.filter) };
    let title = Line::from(vec![
        Span::styled(format!(" {} ", v.title()), theme.style("ui.title")),
        Span::styled(
            if v == ViewKind::Gpus {
                let gpus = ids.iter().filter(|i| !i.is_child()).count();
                format!("[{gpus}/{total} GPUs, {} MIG instances]", f.totals.mig_instances)
            } else {
                format!("[{}/{total}]", ids.len())
            },
            theme.style("ui.text.muted"),
        ),
        Span::styled(filter, theme.style("ui.input")),
    ]);
    let mut block = Block::default().borders(Borders::ALL).border_style(theme.style("ui.border.focus")).title(title);
    if ids.is_empty() {
        let msg = if t.filter.is_empty() {
            "nothing here yet".to_string()
        } else {
            format!("no rows match /{} — Esc clears the filter", t.filter)
        };
        block = block.title_bottom(Span::styled(format!(" {msg} "), theme.style("ui.text.muted")));
    } else if ids.len() > h {
        block = block.title_bottom(
            Line::from(Span::styled(format!(" {}-{} of {} ", start + 1, end, ids.len()), theme.style("ui.text.muted")))
                .alignment(Alignment::Right),
        );
    }
    let table =
        Table::new(rows, widths).header(header).block(block).column_spacing(1).flex(ratatui::layout::Flex::Start);
    frame.render_widget(table, area);
}

fn render_status(f: &Fleet, ui: &Ui, theme: &Theme, frame: &mut Frame, area: Rect) {
    let line = if let Some(input) = &ui.input {
        let prefix = match input.kind {
            InputKind::Command => ":",
            InputKind::Filter => "/",
        };
        Line::from(vec![
            Span::styled(format!("{prefix}{}", input.text), theme.style("ui.input")),
            Span::styled("█", theme.style("ui.input").add_modifier(Modifier::SLOW_BLINK)),
        ])
    } else if let Some((sev, msg)) = &ui.message {
        let tok = match sev {
            Severity::Info => "ui.info",
            Severity::Warning => "ui.warning",
            Severity::Error => "ui.error",
        };
        Line::from(Span::styled(msg.clone(), theme.style(tok)))
    } else if let Some(op) = f.ops.iter().rev().find(|o| !o.state.finished()) {
        let (state, tok) = tables::op_state(op);
        let detail = match &op.state {
            OpState::Blocked(r) => r.clone(),
            _ => op.step.clone(),
        };
        Line::from(vec![
            Span::styled(format!("{} ", op.title), theme.style("ui.text")),
            Span::styled(format!("[{state} {}/{}] ", op.done, op.total), theme.style(tok)),
            Span::styled(detail, theme.style("ui.text.muted")),
        ])
    } else {
        Line::from(Span::styled(
            format!("theme {} · keymap {} · {}", ui.session.theme_name, ui.session.keymap_name, ui.session.source),
            theme.style("ui.text.muted"),
        ))
    };
    frame.render_widget(Paragraph::new(line), area);
}

/// Key hints for what can be done here, from the keymap.
fn hints(ui: &Ui) -> Vec<Command> {
    let mut v = vec![Command::Help, Command::CommandLine];
    match ui.screen() {
        Screen::Table(ViewKind::Fleet) => v.extend([
            Command::Filter,
            Command::SortNext,
            Command::Open,
            Command::Cordon,
            Command::Uncordon,
            Command::Drain,
            Command::Reslice,
        ]),
        Screen::Table(ViewKind::Gpus) => {
            v.extend([Command::Filter, Command::SortNext, Command::Open, Command::Reslice])
        }
        Screen::Table(ViewKind::Quotas) => v.extend([Command::Filter, Command::SortNext, Command::EditQuota]),
        Screen::Table(ViewKind::Tenants) => {
            v.extend([Command::Filter, Command::SortNext, Command::Open, Command::EditQuota])
        }
        Screen::Table(ViewKind::Pods) => {
            v.extend([Command::Filter, Command::SortNext, Command::Open, Command::Describe, Command::Logs])
        }
        Screen::Table(ViewKind::Ops) => v.extend([Command::Filter, Command::SortNext, Command::Open, Command::Cancel]),
        Screen::Table(_) => v.extend([Command::Filter, Command::SortNext, Command::Open]),
        Screen::Node(_) => v.extend([
            Command::Open,
            Command::Collapse,
            Command::Expand,
            Command::Cordon,
            Command::Drain,
            Command::Reslice,
            Command::Back,
        ]),
        Screen::Gpu(_) => v.extend([Command::Reslice, Command::Back]),
        Screen::Inspect => v.extend([Command::Down, Command::Up, Command::Bottom, Command::Back]),
        Screen::Logs => v.extend([Command::LogFollow, Command::LogPrevious, Command::LogContainer, Command::Back]),
        Screen::Clusters => v.extend([Command::Open, Command::Filter, Command::SortNext, Command::Back]),
    }
    v.extend([Command::NextView, Command::Quit]);
    v
}

fn render_footer(f: &Fleet, ui: &Ui, theme: &Theme, keymap: &Keymap, frame: &mut Frame, area: Rect) {
    let mode = if ui.dialog.is_some() { Mode::Dialog } else { Mode::Normal };
    let mut spans = Vec::new();
    let cmds = match &ui.dialog {
        Some(Dialog::Edit { .. }) => {
            // Typing goes into the field here, so the keymap's letters do not apply.
            for (k, what) in [("enter", "preview"), ("esc", "cancel"), ("↑/↓", "choose"), ("backspace", "delete")] {
                spans.push(Span::styled(format!(" {k} "), theme.style("ui.footer.key")));
                spans.push(Span::styled(format!("{what} "), theme.style("ui.footer.text")));
            }
            Vec::new()
        }
        Some(Dialog::Preview { plan, .. }) if plan.kind == crate::ops::OpKind::Drain => {
            vec![Command::Confirm, Command::Cancel, Command::ToggleForce, Command::Down]
        }
        Some(Dialog::Preview { .. }) => vec![Command::Confirm, Command::Cancel, Command::Down],
        None => hints(ui),
    };
    for c in cmds {
        if let Some(k) = keymap.hint(mode, c) {
            spans.push(Span::styled(format!(" {k} "), theme.style("ui.footer.key")));
            let label = c.name().replace('_', " ");
            let why = match c.op().map(|op| permission::check(ui.session.readonly, f, op)) {
                Some(Err(denied)) => denied.tag(),
                _ => "",
            };
            let disabled = !why.is_empty();
            spans.push(Span::styled(
                format!("{label}{why} "),
                theme.style(if disabled { "ui.text.muted" } else { "ui.footer.text" }),
            ));
        }
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width.saturating_sub(2));
    let h = h.min(area.height.saturating_sub(2));
    Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h }
}

fn render_dialog(f: &Fleet, d: &Dialog, ui: &Ui, theme: &Theme, keymap: &Keymap, frame: &mut Frame, size: Rect) {
    let key = |c: Command| keymap.hint(Mode::Dialog, c).unwrap_or_else(|| c.name().to_string());
    match d {
        Dialog::Preview { plan, scroll, error, .. } => {
            // Each item wrapped here, its continuation lines indented under its text, so a long
            // warning reads as one item and the dialog is as tall as what it says.
            let width = usize::from(100.min(size.width.saturating_sub(2)).saturating_sub(2)).max(16);
            let item = |lines: &mut Vec<Line<'static>>, prefix: &str, text: &str, style: ratatui::style::Style| {
                let pad = prefix.chars().count();
                for (i, l) in crate::text::wrap(text, width - pad).into_iter().enumerate() {
                    let head = if i == 0 { prefix.to_string() } else { " ".repeat(pad) };
                    lines.push(Line::from(Span::styled(format!("{head}{l}"), style)));
                }
            };
            let mut lines: Vec<Line> = Vec::new();
            lines.push(Line::from(Span::styled("What will happen:", theme.style("ui.header"))));
            for e in &plan.effects {
                item(&mut lines, "  ", e, theme.style("ui.text"));
            }
            if !plan.warnings.is_empty() {
                lines.push(Line::from(""));
                lines.push(Line::from(Span::styled(
                    "Watch out:",
                    theme.style("ui.warning").add_modifier(Modifier::BOLD),
                )));
                for w in &plan.warnings {
                    item(&mut lines, "  ! ", w, theme.style("ui.warning"));
                }
            }
            if !plan.blockers.is_empty() {
                lines.push(Line::from(""));
                lines.push(Line::from(Span::styled(
                    "Blocked — this cannot run as planned:",
                    theme.style("ui.error").add_modifier(Modifier::BOLD),
                )));
                for b in &plan.blockers {
                    item(&mut lines, "  ✗ ", b, theme.style("ui.error"));
                }
            }
            if let Some(e) = error {
                lines.push(Line::from(Span::styled(e.clone(), theme.style("ui.error"))));
            }
            let denied = permission::check(ui.session.readonly, f, plan.kind).err();
            let prompt = if denied == Some(Denied::ReadOnly) {
                Line::from(Span::styled(
                    format!("read-only mode: nothing will be sent · {} close", key(Command::Cancel)),
                    theme.style("ui.warning"),
                ))
            } else if let Some(Denied::Rbac { why, .. }) = &denied {
                Line::from(Span::styled(
                    format!("{why}: nothing will be sent · {} close", key(Command::Cancel)),
                    theme.style("ui.error"),
                ))
            } else if plan.can_execute() {
                Line::from(vec![
                    Span::styled(
                        format!("{}? ", verb(plan.kind)),
                        theme.style("ui.dialog.danger").add_modifier(Modifier::BOLD),
                    ),
                    Span::styled(
                        format!(
                            "{} confirm on {} · {} cancel",
                            key(Command::Confirm),
                            plan.target,
                            key(Command::Cancel)
                        ),
                        theme.style("ui.text"),
                    ),
                ])
            } else {
                let force = if matches!(plan.kind, crate::ops::OpKind::Drain) {
                    format!(" · {} force", key(Command::ToggleForce))
                } else {
                    String::new()
                };
                Line::from(Span::styled(
                    format!("cannot confirm while blocked{force} · {} cancel", key(Command::Cancel)),
                    theme.style("ui.error"),
                ))
            };
            // The body, a gap, the prompt (up to two rows), the borders.
            let area = centered(size, 100, (lines.len() + 5) as u16);
            frame.render_widget(Clear, area);
            let block = Block::default()
                .borders(Borders::ALL)
                .border_style(theme.style("ui.dialog.border"))
                .title(Span::styled(format!(" Preview: {} ", plan.title), theme.style("ui.title")))
                .style(theme.style("ui.dialog"));
            let inner = block.inner(area);
            frame.render_widget(block, area);
            // The prompt stays put below the scrolling body, so the confirmation is always seen.
            let prompt_rows = (prompt.width() as u16).div_ceil(inner.width.max(1)).clamp(1, 3);
            let [body, gap, bottom] =
                Layout::vertical([Constraint::Min(1), Constraint::Length(1), Constraint::Length(prompt_rows)])
                    .areas(inner);
            let overflow = lines.len() > body.height as usize;
            frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }).scroll((*scroll, 0)), body);
            if overflow {
                frame.render_widget(
                    Paragraph::new(Span::styled("↓/↑ scroll the preview", theme.style("ui.text.muted")))
                        .alignment(Alignment::Right),
                    gap,
                );
            }
            frame.render_widget(Paragraph::new(prompt).wrap(Wrap { trim: false }), bottom);
        }
        Dialog::Edit { kind, text, choices, selected, error } => {
            let (title, what) = match kind {
                EditKind::Quota { tenant, key, current } => (
                    format!(" Edit quota: {tenant} {} ", key.resource),
                    match key.source {
                        crate::model::QuotaSourceSpec::ClusterQueue { .. } => format!(
                            "nominal quota {current}; type a value for it, or pick a limit with ↑/↓ and type after = (borrowingLimit=4, lendingLimit=2), Enter to preview"
                        ),
                        crate::model::QuotaSourceSpec::ResourceQuota { .. } => format!(
                            "current hard limit {current}; type the new value (a whole number of devices), Enter to preview"
                        ),
                    },
                ),
                EditKind::Reslice { node, gpus, model, current } => {
                    let scope = if gpus.is_empty() {
                        "all GPUs".to_string()
                    } else {
                        format!("gpu{}", gpus.iter().map(|g| g.to_string()).collect::<Vec<_>>().join(","))
                    };
                    (
                        format!(" Reslice {node} {scope} ({}) ", model.name()),
                        format!(
                            "now {current}; pick a layout with ↑/↓ or type one (e.g. {}), Enter to preview",
                            example_layout(*model)
                        ),
                    )
                }
            };
            // Room for the hint and an error that wrap, and every choice.
            let inner_w = size.width.min(90).saturating_sub(4).max(1) as usize;
            let wrapped = |s: &str| s.chars().count().div_ceil(inner_w).max(1);
            let extra = wrapped(&what) + error.as_deref().map(|e| wrapped(e) + 1).unwrap_or(1);
            let h = (choices.len() + extra + 5) as u16;
            let area = centered(size, 90, h);
            frame.render_widget(Clear, area);
            let mut lines = vec![Line::from(Span::styled(what, theme.style("ui.text.muted"))), Line::from("")];
            lines.push(Line::from(vec![
                Span::styled("> ", theme.style("ui.input")),
                Span::styled(text.clone(), theme.style("ui.input")),
                Span::styled("█", theme.style("ui.input")),
            ]));
            if let Some(e) = error {
                lines.push(Line::from(Span::styled(format!("✗ {e}"), theme.style("ui.error"))));
            } else {
                lines.push(Line::from(""));
            }
            let skip = selected.unwrap_or(0).saturating_sub(13);
            for (i, c) in choices.iter().enumerate().skip(skip).take(14) {
                let st = if Some(i) == *selected { theme.style("ui.selection") } else { theme.style("ui.text") };
                lines.push(Line::from(Span::styled(format!("  {c}"), st)));
            }
            let block = Block::default()
                .borders(Borders::ALL)
                .border_style(theme.style("ui.dialog.border"))
                .title(Span::styled(title, theme.style("ui.title")))
                .style(theme.style("ui.dialog"));
            frame.render_widget(Paragraph::new(lines).block(block).wrap(Wrap { trim: false }), area);
        }
    }
}

fn render_help(ui: &Ui, theme: &Theme, keymap: &Keymap, frame: &mut Frame, size: Rect) {
    let area = centered(size, 120, size.height.saturating_sub(4));
    frame.render_widget(Clear, area);
    let mut lines = Vec::new();
    for mode in Mode::ALL {
        lines.push(Line::from(Span::styled(format!("{} keys", mode.name()), theme.style("ui.header"))));
        for (keys, cmd) in keymap.help(mode) {
            lines.push(Line::from(vec![
                Span::styled(format!("  {keys:<22}"), theme.style("ui.footer.key")),
                Span::styled(format!("{:<14} ", cmd.name()), theme.style("ui.text.muted")),
                Span::raw(cmd.doc()),
            ]));
        }
        lines.push(Line::from(""));
    }
    lines.push(Line::from(Span::styled("command line (:)", theme.style("ui.header"))));
    lines.extend(super::command::cmdline_help().into_iter().map(Line::from));
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(
        "filter (/): substring of any column, case-insensitive; /!text inverts",
        theme.style("ui.text.muted"),
    )));
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.style("ui.dialog.border"))
        .title(Span::styled(format!(" Help — keymap {} (Esc closes) ", keymap.name), theme.style("ui.title")))
        .style(theme.style("ui.dialog"));
    frame.render_widget(Paragraph::new(lines).block(block).scroll((ui.help_scroll, 0)), area);
}

/// A custom layout that fits the model, for the reslice hint: one 3g, one 2g, two 1g.
fn example_layout(model: crate::mig::GpuModel) -> String {
    let cat = crate::mig::catalog(model);
    let pick = |c: u8| cat.iter().find(|p| p.compute_slices == c && !p.media_extensions).map(|p| p.name);
    match (pick(3), pick(2), pick(1)) {
        (Some(a), Some(b), Some(c)) => format!("{a},{b},{c},{c}"),
        _ => "all-balanced".to_string(),
    }
}

/// The question a confirmation asks; the title above already says what and where.
fn verb(kind: crate::ops::OpKind) -> &'static str {
    match kind {
        crate::ops::OpKind::Cordon => "Cordon",
        crate::ops::OpKind::Uncordon => "Uncordon",
        crate::ops::OpKind::Drain => "Drain",
        crate::ops::OpKind::Reslice => "Reslice",
        crate::ops::OpKind::SetQuota => "Set quota",
        crate::ops::OpKind::TaintGpu => "Taint",
        crate::ops::OpKind::UntaintGpu => "Untaint",
        crate::ops::OpKind::Reclaim => "Reclaim",
        crate::ops::OpKind::HoldQueue => "Hold",
        crate::ops::OpKind::ResumeQueue => "Resume",
        crate::ops::OpKind::SuspendWorkload => "Suspend",
        crate::ops::OpKind::ResumeWorkload => "Resume",
        crate::ops::OpKind::RebootHost => "Reboot",
        crate::ops::OpKind::PowerHost => "Power",
        crate::ops::OpKind::InspectHost => "Inspect",
    }
}

/// The side panel of a table view (see `table_area`).
fn render_panel(f: &Fleet, ui: &Ui, v: ViewKind, theme: &Theme, frame: &mut Frame, area: Rect) {
    let rows = area.height.saturating_sub(2) as usize;
    let (title, lines): (String, Vec<Line>) = match v {
        ViewKind::Events => {
            let mut alerts: Vec<&crate::model::Alert> = f.alerts.values().collect();
            // Incidents first (newest first), then the isolation findings.
            alerts.sort_by_key(|a| (a.kind.is_posture(), std::cmp::Reverse(a.since)));
            let lines = if alerts.is_empty() {
                vec![Line::from(Span::styled("no active alerts", theme.style("status.ready")))]
            } else {
                alerts
                    .iter()
                    .take(rows)
                    .map(|a| {
                        Line::from(vec![
                            Span::styled(
                                format!("{:<11}", a.kind.label()),
                                theme.style(if a.kind.is_posture() { "severity.warning" } else { "severity.error" }),
                            ),
                            Span::styled(format!("{:>5}  ", tables::age(f.now, a.since)), theme.style("ui.text.muted")),
                            Span::styled(a.message.clone(), theme.style("ui.text")),
                        ])
                    })
                    .collect()
            };
            (format!(" Active alerts ({}) ", f.alerts.len()), lines)
        }
        ViewKind::Ops => {
            let op = ui.selected_id(ViewKind::Ops).and_then(|id| id.op()).and_then(|id| tables::op_at(f, id));
            match op {
                Some(o) => {
                    // The newest lines are what matters: wrapped here, so the last screen
                    // rows hold them (a long line above wraps off the top, never them).
                    let width = area.width.saturating_sub(2).max(1) as usize;
                    let mut wrapped: Vec<String> = Vec::new();
                    for l in o.log.iter().rev() {
                        if wrapped.len() >= rows {
                            break;
                        }
                        wrapped.extend(crate::text::wrap(l, width).into_iter().rev());
                    }
                    let lines = wrapped
                        .into_iter()
                        .take(rows)
                        .rev()
                        .map(|l| Line::from(Span::styled(l, theme.style("ui.text"))))
                        .collect();
                    (format!(" #{} {} — log ", o.id, o.title), lines)
                }
                None => (
                    " Log ".to_string(),
                    vec![Line::from(Span::styled(
                        "no operation yet: cordon (c), drain (D), reslice (m) or edit a quota (e), and it shows here",
                        theme.style("ui.text.muted"),
                    ))],
                ),
            }
        }
        _ => return,
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.style("ui.border"))
        .title(Span::styled(title, theme.style("ui.title")));
    let para = Paragraph::new(lines).block(block);
    let para = if v == ViewKind::Ops { para } else { para.wrap(Wrap { trim: false }) };
    frame.render_widget(para, area);
}
