//! The clusters view (`:clusters`, `0`): one row per cluster this cockpit watches, from each
//! cluster's own fleet counters (the header's figures), and `fabrik snapshot --view clusters`.
//! A row is cheap to make (the counters are incremental), so it is remade on every batch.

use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Row, Table};
use serde_json::{Value, json};

use crate::model::Fleet;
use crate::ui::theme::Theme;

/// One cluster's figures as its fleet has them now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterRow {
    /// The kube context.
    pub name: String,
    /// `live`, `loading`, `apiserver reconnecting since 12s`, `failed: …`.
    pub state: String,
    /// The theme token the state is drawn in.
    pub token: &'static str,
    /// Every watch has listed once.
    pub synced: bool,
    /// The cluster could not be opened at all (its kubeconfig entry): nothing below is known.
    pub failed: bool,
    pub nodes: u32,
    pub nodes_ready: u32,
    pub gpus: u32,
    pub gpus_allocated: u32,
    pub gpus_busy: u32,
    pub gpus_measured: u32,
    pub idle_allocated: u32,
    /// Allocated devices whose utilisation is measured (idle needs it).
    pub devices_measured: u32,
    pub mig_allocated: u32,
    pub mig_instances: u32,
    pub pods: u32,
    pub pods_pending: u32,
    pub alerts: u32,
}

impl ClusterRow {
    pub fn of(name: &str, f: &Fleet) -> Self {
        let t = &f.totals;
        let (state, token) = super::tables::feed_state(f);
        Self {
            name: name.to_string(),
            state,
            token,
            synced: f.synced,
            failed: false,
            nodes: t.nodes,
            nodes_ready: t.nodes_ready,
            gpus: t.gpus,
            gpus_allocated: t.gpus_allocated,
            gpus_busy: t.gpus_busy,
            gpus_measured: t.gpus_measured,
            idle_allocated: t.idle_allocated,
            devices_measured: t.devices_measured,
            mig_allocated: t.mig_allocated,
            mig_instances: t.mig_instances,
            pods: t.gpu_pods,
            pods_pending: t.gpu_pods_pending,
            alerts: f.alerts.len() as u32,
        }
    }

    /// A cluster that could not be opened: `why` says what to fix.
    pub fn failed(name: &str, why: &str) -> Self {
        Self {
            name: name.to_string(),
            state: format!("failed: {why}"),
            token: "ui.error",
            synced: false,
            failed: true,
            ..Self::default()
        }
    }

    /// A workload cluster whose Cluster was deleted: `gone: <why>`, no figures.
    pub fn gone(name: &str, why: &str) -> Self {
        Self { state: format!("gone: {why}"), ..Self::failed(name, why) }
    }

    /// What a sort by column `col` compares: the name or state as text, the figures as
    /// numbers; `None` where the row has no figure (failed, gone, not listed, not measured).
    pub fn sort_key(&self, col: usize) -> Option<super::column::SortKey<'static>> {
        use super::column::SortKey;
        let no_figures = self.failed || (!self.synced && self.nodes == 0);
        let num = |n: u32| (!no_figures).then_some(SortKey::Num(i64::from(n)));
        match col {
            0 => Some(SortKey::Text(self.name.to_lowercase().into())),
            1 => Some(SortKey::Text(self.state.to_lowercase().into())),
            2 => num(self.nodes),
            3 => num(self.gpus),
            4 => num(self.gpus_allocated),
            5 => num(self.gpus_busy).filter(|_| self.gpus_measured > 0),
            6 => num(self.idle_allocated).filter(|_| self.devices_measured > 0),
            7 => num(self.mig_allocated),
            8 => num(self.pods),
            _ => num(self.alerts),
        }
    }

    /// The row's cells, as the table and `--format table|markdown` show them.
    pub fn cells(&self) -> Vec<String> {
        // Failed, or nothing listed yet: no figure is known (0/0 nodes would be a claim).
        if self.failed || (!self.synced && self.nodes == 0) {
            let mut v = vec![self.name.clone(), self.state.clone()];
            v.extend(std::iter::repeat_n("—".to_string(), HEADERS.len() - 2));
            return v;
        }
        let busy = match self.gpus_measured {
            0 => "—".to_string(),
            m if m < self.gpus => format!("{} of {m}", self.gpus_busy),
            _ => self.gpus_busy.to_string(),
        };
        vec![
            self.name.clone(),
            self.state.clone(),
            format!("{}/{}", self.nodes_ready, self.nodes),
            self.gpus.to_string(),
            self.gpus_allocated.to_string(),
            busy,
            if self.devices_measured == 0 { "—".to_string() } else { self.idle_allocated.to_string() },
            format!("{}/{}", self.mig_allocated, self.mig_instances),
            if self.pods_pending > 0 {
                format!("{} ({} pending)", self.pods, self.pods_pending)
            } else {
                self.pods.to_string()
            },
            self.alerts.to_string(),
        ]
    }

    pub fn json(&self, current: bool) -> Value {
        json!({
            "name": self.name,
            "current": current,
            "state": self.state,
            "synced": self.synced,
            "failed": self.failed,
            "nodes": { "ready": self.nodes_ready, "total": self.nodes },
            "gpus": self.gpus,
            "gpus_allocated": self.gpus_allocated,
            // Unknown stays unknown: nothing measured is null, not 0.
            "gpus_busy": (self.gpus_measured > 0).then_some(self.gpus_busy),
            "gpus_measured": self.gpus_measured,
            "idle_allocated": (self.devices_measured > 0).then_some(self.idle_allocated),
            "devices_measured": self.devices_measured,
            "mig": { "used": self.mig_allocated, "total": self.mig_instances },
            "pods": self.pods,
            "pods_pending": self.pods_pending,
            "alerts": self.alerts,
        })
    }
}

/// The rows `filter` keeps, by index: those with a cell that contains it (case-insensitive;
/// a leading `!` keeps the others), as the table views filter.
pub fn shown(rows: &[ClusterRow], filter: &str, sort: Option<Sort>) -> Vec<usize> {
    let filter = super::tables::Filter::new(filter);
    let kept: Vec<usize> = (0..rows.len()).filter(|i| filter.keeps_cells(rows[*i].cells().into_iter())).collect();
    let Some(Sort { col, descending }) = sort else { return kept };
    // Stable: ties keep the order the clusters were opened in. A row without figures
    // (failed, gone, not listed yet) goes last either way. Each key made once.
    let mut keyed: Vec<_> = kept.into_iter().map(|i| (rows[i].sort_key(col), i)).collect();
    keyed.sort_by(|(x, _), (y, _)| match (x, y) {
        (Some(x), Some(y)) if descending => y.cmp(x),
        (Some(x), Some(y)) => x.cmp(y),
        (x, y) => y.is_some().cmp(&x.is_some()),
    });
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// The clusters view's order: by column `col` of [`HEADERS`] (`s`/`S` move it, `r` turns it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sort {
    pub col: usize,
    pub descending: bool,
}

impl Sort {
    /// The next (`step` 1) or previous (`step` -1) column from `now` (none: from the first).
    pub fn step(now: Option<Sort>, step: isize) -> Sort {
        let n = HEADERS.len() as isize;
        let col = now.map_or(if step > 0 { 0 } else { -1 }, |s| s.col as isize + step).rem_euclid(n) as usize;
        Sort { col, descending: now.is_some_and(|s| s.descending) }
    }
}

pub const HEADERS: [&str; 10] =
    ["CLUSTER", "STATE", "NODES", "GPUS", "ALLOC", "BUSY", "IDLE-ALLOC", "MIG", "PODS", "ALERTS"];

/// `fabrik snapshot --view clusters --format json`.
pub fn json_doc(rows: &[ClusterRow], current: usize, now: crate::model::Ts) -> Value {
    let rows: Vec<Value> = rows.iter().enumerate().map(|(i, r)| r.json(i == current)).collect();
    json!({ "schema": crate::ui::json::SCHEMA, "view": "clusters", "generated_at_ms": now, "rows": rows })
}

/// What the view draws: every cluster's row, those the filter keeps (indices), the one on
/// screen (marked `●`) and the selected one (highlighted), both as indices into `rows`.
pub struct View<'a> {
    pub rows: &'a [ClusterRow],
    pub filter: &'a str,
    pub sort: Option<Sort>,
    pub current: usize,
    pub selected: usize,
}

/// The view: the cluster on screen is marked `●`, the selected row highlighted.
pub fn render(frame: &mut Frame, area: Rect, v: &View, theme: &Theme) {
    let right = |i: usize| i >= 2;
    let shown = shown(v.rows, v.filter, v.sort);
    let (current, selected) = (v.current, v.selected);
    let cells: Vec<Vec<String>> = shown.iter().map(|i| v.rows[*i].cells()).collect();
    let widths: Vec<Constraint> = HEADERS
        .iter()
        .enumerate()
        .map(|(k, h)| {
            let w = cells.iter().map(|r| r[k].chars().count()).max().unwrap_or(0).max(h.chars().count() + 1);
            Constraint::Length(w as u16 + if k == 0 { 2 } else { 0 })
        })
        .collect();
    let align = |k: usize| if right(k) { Alignment::Right } else { Alignment::Left };
    // The sorted column is marked as in the table views.
    let mark = |k: usize| match v.sort {
        Some(s) if s.col == k => {
            if s.descending {
                "▼"
            } else {
                "▲"
            }
        }
        _ => "",
    };
    let header =
        Row::new(HEADERS.iter().enumerate().map(|(k, h)| Line::from(format!("{h}{}", mark(k))).alignment(align(k))))
            .style(theme.style("ui.header"));
    let selection = theme.style("ui.selection");
    let body = shown.iter().map(|i| (*i, &v.rows[*i])).zip(cells).map(|((i, r), cells)| {
        let row = Row::new(cells.into_iter().enumerate().map(|(k, c)| {
            let tok = match k {
                1 => r.token,
                2 if r.nodes_ready < r.nodes => "status.notready",
                9 if r.alerts > 0 => "severity.error",
                6 if r.idle_allocated > 0 => "gpu.idle",
                _ => "ui.text",
            };
            let text = if k == 0 { format!("{}{c}", if i == current { "● " } else { "  " }) } else { c };
            let style = if i == selected { theme.style(tok).patch(selection) } else { theme.style(tok) };
            Line::from(Span::styled(text, style)).alignment(align(k))
        }));
        if i == selected { row.style(selection) } else { row }
    });
    let count =
        if v.filter.is_empty() { format!("[{}]", v.rows.len()) } else { format!("[{}/{}]", shown.len(), v.rows.len()) };
    let mut title =
        vec![Span::styled(" Clusters ", theme.style("ui.title")), Span::styled(count, theme.style("ui.text.muted"))];
    if !v.filter.is_empty() {
        title.push(Span::styled(format!(" /{} ", v.filter), theme.style("ui.input")));
    }
    let title = Line::from(title);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.style("ui.border.focus"))
        .title(title)
        .title_bottom(Span::styled(" Enter opens a cluster · ● the one on screen ", theme.style("ui.text.muted")));
    let table = Table::new(body, widths).header(header).block(block).column_spacing(2);
    // Stateful only for the scrolling: the selected row stays inside the window.
    let mut state = ratatui::widgets::TableState::default().with_selected(shown.iter().position(|i| *i == selected));
    frame.render_stateful_widget(table, area, &mut state);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Thresholds;
    use crate::testing::demo_fleet;
    use crate::ui::export::{self, Format};

    #[test]
    fn a_row_is_the_fleets_header_figures_and_unknown_stays_unknown() {
        let (_, f) = demo_fleet(3, 16, 2, Thresholds::default());
        let r = ClusterRow::of("east", &f);
        let t = &f.totals;
        assert_eq!(
            (r.nodes, r.nodes_ready, r.gpus, r.gpus_allocated),
            (t.nodes, t.nodes_ready, t.gpus, t.gpus_allocated)
        );
        assert_eq!((r.pods, r.mig_instances, r.alerts as usize), (t.gpu_pods, t.mig_instances, f.alerts.len()));
        // Nothing measured: null in JSON, a dash on screen.
        let mut blind = r.clone();
        blind.gpus_measured = 0;
        blind.devices_measured = 0;
        let j = blind.json(true);
        assert!(j["gpus_busy"].is_null() && j["idle_allocated"].is_null(), "{j}");
        assert_eq!((blind.cells()[5].as_str(), blind.cells()[6].as_str()), ("—", "—"));
    }

    #[test]
    fn nothing_listed_and_failed_rows_claim_no_figures() {
        let empty = ClusterRow::of("down", &Fleet::new(Thresholds::default()));
        assert_eq!(empty.state, "loading");
        assert!(empty.cells()[2..].iter().all(|c| c == "—"), "{:?}", empty.cells());
        let failed = ClusterRow::failed("gone", "no such context");
        assert_eq!((failed.state.as_str(), failed.token), ("failed: no such context", "ui.error"));
        assert!(failed.cells()[2..].iter().all(|c| c == "—"));
    }

    #[test]
    fn a_sort_orders_by_the_figures_and_rows_without_figures_go_last_either_way() {
        let row = |name: &str, gpus: u32, alerts: u32| ClusterRow {
            name: name.into(),
            state: "live".into(),
            synced: true,
            nodes: 1,
            gpus,
            alerts,
            ..ClusterRow::default()
        };
        let rows = vec![row("b", 8, 2), ClusterRow::failed("down", "refused"), row("a", 64, 0), row("c", 16, 2)];
        let names = |sort| shown(&rows, "", sort).into_iter().map(|i| rows[i].name.clone()).collect::<Vec<_>>();
        assert_eq!(names(None), ["b", "down", "a", "c"], "as opened");
        let by = |col, descending| Some(Sort { col, descending });
        assert_eq!(names(by(3, false)), ["b", "c", "a", "down"]);
        assert_eq!(names(by(3, true)), ["a", "c", "b", "down"]);
        assert_eq!(names(by(9, true)), ["b", "c", "a", "down"], "ties keep their order");
        assert_eq!(names(by(0, false)), ["a", "b", "c", "down"]);
        // s from no sort starts at the first column; S at the last; both wrap.
        assert_eq!(Sort::step(None, 1).col, 0);
        assert_eq!(Sort::step(None, -1).col, HEADERS.len() - 1);
        assert_eq!(Sort::step(by(9, true), 1), Sort { col: 0, descending: true });
    }

    #[test]
    fn the_export_filters_rows_and_keeps_current_on_the_right_one() {
        let (_, f) = demo_fleet(3, 8, 1, Thresholds::default());
        let rows = vec![ClusterRow::of("east", &f), ClusterRow::failed("west", "refused")];
        let doc: serde_json::Value =
            serde_json::from_str(&export::clusters(&rows, 0, 5, "", Format::Json)).expect("JSON");
        assert_eq!(doc["view"], "clusters");
        assert_eq!(doc["rows"].as_array().map(Vec::len), Some(2));
        assert_eq!((doc["rows"][0]["current"].clone(), doc["rows"][1]["current"].clone()), (true.into(), false.into()));
        let only_west: serde_json::Value =
            serde_json::from_str(&export::clusters(&rows, 0, 5, "failed", Format::Json)).expect("JSON");
        assert_eq!(only_west["rows"][0]["name"], "west");
        assert_eq!(only_west["rows"][0]["current"], false, "the current cluster was filtered out");
        let table = export::clusters(&rows, 0, 5, "!west", Format::Table);
        assert!(table.starts_with("CLUSTER") && table.contains("east") && !table.contains("west"), "{table}");
    }
}
