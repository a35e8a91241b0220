//! View, flow and no-panic tests of the cockpit (ARCHITECTURE "Tests, in layers" 2 and 3).
//!
//! Views: `insta` snapshots of the rendered screen as text, on the simulator at seed 42
//! and a fixed size. Flows: key sequences through `App::handle_key` (helix's
//! `test_key_sequence` style), asserting on `app.ui`, on what reached the executor and on
//! the screen. Fuzz: random keys and resizes must never panic.

use std::sync::{Arc, Mutex};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::buffer::Buffer;
use ratatui::style::Color;

use crate::model::{Delta, FeedState, Fleet, OpState, Thresholds};
use crate::ops::{Plan, PlanDetail};
use crate::sim::Sim;
use crate::testing::{demo_app, demo_fleet, render_app};
use crate::ui::app::plan_node;
use crate::ui::command::{Command, Mode, ViewKind};
use crate::ui::export::to_text;
use crate::ui::keymap::Keymap;
use crate::ui::state::{Dialog, InputKind, Screen};
use crate::ui::theme::Theme;
use crate::ui::views::{RowId, tables};
use crate::ui::{App, ExecRequest, Recorder, Ui};

const SEED: u64 = 42;
const W: u16 = 140;
const H: u16 = 40;

fn dark() -> Theme {
    Theme::builtin("dark").expect("the dark theme is builtin")
}

/// Parses a key sequence: plain characters, and `<Esc>` `<Enter>` `<Tab>` `<BackTab>`
/// `<Down>` `<Up>` `<Left>` `<Right>` `<BS>` `<Space>` `<C-c>` `<lt>` for the named keys.
fn parse_keys(s: &str) -> Vec<KeyEvent> {
    let mut out = Vec::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '<' {
            let mods = if c.is_ascii_uppercase() { KeyModifiers::SHIFT } else { KeyModifiers::NONE };
            out.push(KeyEvent::new(KeyCode::Char(c), mods));
            continue;
        }
        let name: String = chars.by_ref().take_while(|c| *c != '>').collect();
        let ev = match name.as_str() {
            "Esc" => KeyEvent::from(KeyCode::Esc),
            "Enter" => KeyEvent::from(KeyCode::Enter),
            "Tab" => KeyEvent::from(KeyCode::Tab),
            "BackTab" => KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT),
            "Down" => KeyEvent::from(KeyCode::Down),
            "Up" => KeyEvent::from(KeyCode::Up),
            "Left" => KeyEvent::from(KeyCode::Left),
            "Right" => KeyEvent::from(KeyCode::Right),
            "BS" => KeyEvent::from(KeyCode::Backspace),
            "Space" => KeyEvent::from(KeyCode::Char(' ')),
            "C-c" => KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
            "lt" => KeyEvent::from(KeyCode::Char('<')),
            other => panic!("unknown key <{other}> in test key sequence {s:?}"),
        };
        out.push(ev);
    }
    out
}

/// Sends a key sequence (see `parse_keys`) to the app.
fn send(app: &mut App, s: &str) {
    for k in parse_keys(s) {
        app.handle_key(k);
    }
}

fn render(app: &mut App) -> Buffer {
    render_app(app, W, H)
}

fn screen(app: &mut App) -> String {
    to_text(&render(app))
}

/// A fresh demo app at 140×40.
fn app_at(ticks: u32) -> App {
    let (_, mut app) = demo_app(SEED, ticks, dark());
    app.resize(W, H);
    app
}

/// The screen after a key sequence, for snapshots.
fn shot(keys: &str) -> String {
    let mut app = app_at(20);
    send(&mut app, keys);
    screen(&mut app)
}

/// Column `col` of the current rows of view `v`, in display order.
fn column(app: &App, v: ViewKind, col: usize) -> Vec<String> {
    app.ui.rows(v).iter().map(|id| tables::columns(v)[col].cell_of(&app.fleet, *id).0).collect()
}

/// The first text line of a screen that contains `needle`, if any.
fn line_with<'a>(screen: &'a str, needle: &str) -> Option<&'a str> {
    screen.lines().find(|l| l.contains(needle))
}

/// A plain telemetry sample of one GPU, to add what a node agent would report to.
fn agent_sample(gpu_uuid: String, at: crate::model::Ts) -> crate::model::TelemetrySample {
    crate::model::TelemetrySample {
        gpu_uuid,
        at,
        sample: crate::model::Sample::new(50, 40, 300, 60),
        instances: vec![],
        node_gpu: None,
        processes: None,
        allocated: None,
        peers: None,
    }
}

/// The status line (second line from the bottom).
fn status_line(screen: &str) -> String {
    let lines: Vec<&str> = screen.lines().collect();
    lines[lines.len() - 2].to_string()
}

fn message(app: &App) -> String {
    app.ui.message.as_ref().map(|(_, m)| m.clone()).unwrap_or_default()
}

/// An app whose executor is a `Recorder` we can read, with the simulator behind it.
struct Rig {
    app: App,
    sim: Sim,
    reqs: Arc<Mutex<Vec<ExecRequest>>>,
}

impl Rig {
    fn new(ticks: u32) -> Rig {
        let (sim, fleet) = demo_fleet(SEED, 48, ticks, Thresholds::default());
        Rig::with(sim, fleet)
    }

    fn with(sim: Sim, fleet: Fleet) -> Rig {
        let reqs = Arc::new(Mutex::new(Vec::new()));
        let keymap = Keymap::builtin("default").expect("the default keymap is builtin");
        let ui = Ui::new(format!("demo seed {SEED} (48 nodes)"));
        let mut app = App::new(fleet, ui, dark(), keymap, Box::new(Recorder(reqs.clone())));
        app.resize(W, H);
        Rig { app, sim, reqs }
    }

    fn requests(&self) -> Vec<ExecRequest> {
        self.reqs.lock().expect("recorder lock").clone()
    }

    fn executes(&self) -> Vec<(u64, Plan)> {
        self.requests()
            .into_iter()
            .filter_map(|r| match r {
                ExecRequest::Execute { id, plan } => Some((id, *plan)),
                ExecRequest::Cancel { .. } | ExecRequest::Preview { .. } => None,
            })
            .collect()
    }

    /// Hands every recorded request to the simulator, as the demo's feed does.
    fn forward(&mut self) {
        let reqs: Vec<ExecRequest> = std::mem::take(&mut *self.reqs.lock().expect("recorder lock"));
        for r in reqs {
            let deltas = match r {
                ExecRequest::Execute { id, plan } => self.sim.execute(id, *plan),
                ExecRequest::Cancel { id } => self.sim.cancel(id),
                ExecRequest::Preview { .. } => Vec::new(),
            };
            self.app.apply(deltas);
        }
    }

    fn step(&mut self) {
        let d = self.sim.step();
        self.app.apply(d);
    }

    /// Steps the simulator until operation `id` has finished (bounded).
    fn run_until_finished(&mut self, id: u64) -> OpState {
        for _ in 0..400 {
            self.step();
            if let Some(o) = self.app.fleet.ops.iter().find(|o| o.id == id)
                && o.state.finished()
            {
                return o.state.clone();
            }
        }
        panic!("operation #{id} did not finish in 400 simulated seconds");
    }
}

// ---------------------------------------------------------------- view snapshots

#[test]
fn snapshot_fleet() {
    insta::assert_snapshot!("fleet", shot(""));
}

#[test]
fn snapshot_gpus() {
    insta::assert_snapshot!("gpus", shot(":gpus<Enter>"));
}

#[test]
fn snapshot_tenants() {
    insta::assert_snapshot!("tenants", shot(":tenants<Enter>"));
}

#[test]
fn snapshot_quotas() {
    insta::assert_snapshot!("quotas", shot(":quotas<Enter>"));
}

#[test]
fn snapshot_pods() {
    insta::assert_snapshot!("pods", shot(":pods<Enter>"));
}

#[test]
fn snapshot_events() {
    insta::assert_snapshot!("events", shot(":events<Enter>"));
}

#[test]
fn snapshot_ops_after_a_cordon() {
    let mut rig = Rig::new(20);
    send(&mut rig.app, "/h100-0004<Enter>cy");
    let ex = rig.executes();
    assert_eq!(ex.len(), 1, "one cordon sent");
    let id = ex[0].0;
    rig.forward();
    assert_eq!(rig.run_until_finished(id), OpState::Succeeded);
    send(&mut rig.app, "<Esc>:ops<Enter>");
    let s = screen(&mut rig.app);
    assert!(line_with(&s, "Cordon node h100-0004").is_some_and(|l| l.contains("succeeded")), "{s}");
    insta::assert_snapshot!("ops", s);
}

#[test]
fn snapshot_node_topology() {
    // Open a MIG node from the fleet view, then move onto its first GPU.
    let s = shot("/h200-0005<Enter><Enter>j");
    assert!(s.contains("Topology: node → GPU → MIG instance → pod"), "{s}");
    insta::assert_snapshot!("node_topology", s);
}

#[test]
fn snapshot_gpu_mig_map() {
    let s = shot(":gpu h200-0005/0<Enter>");
    assert!(s.contains("MIG slice map · h200-0005 gpu0 · H200-141GB"), "{s}");
    insta::assert_snapshot!("gpu_mig_map", s);
}

#[test]
fn snapshot_help_overlay() {
    let s = shot("?");
    assert!(s.contains("Help — keymap default"), "{s}");
    insta::assert_snapshot!("help", s);
}

#[test]
fn snapshot_drain_preview_blocked() {
    let s = shot("/h100-0038<Enter>D");
    assert!(s.contains("Preview: Drain node h100-0038"), "{s}");
    insta::assert_snapshot!("drain_preview_blocked", s);
}

#[test]
fn snapshot_drain_preview_forced() {
    let s = shot("/h100-0038<Enter>Df");
    assert!(s.contains("y confirm on h100-0038"), "{s}");
    insta::assert_snapshot!("drain_preview_forced", s);
}

#[test]
fn snapshot_quota_edit_error() {
    let s = shot(":quotas<Enter>/llm-pretrain<Enter>e<BS><BS><BS>1.5<Enter>");
    assert!(s.contains("Edit quota: llm-pretrain requests.nvidia.com/gpu"), "{s}");
    assert!(s.contains("\"1.5\" is not a whole number"), "{s}");
    insta::assert_snapshot!("quota_edit_error", s);
}

#[test]
fn snapshot_reslice_does_not_fit() {
    let s = shot("/h100-0000<Enter>m3g.40gb,3g.40gb,1g.10gb<Enter>");
    assert!(s.contains("Reslice h100-0000 all GPUs (H100-80GB)"), "{s}");
    insta::assert_snapshot!("reslice_does_not_fit", s);
}

#[test]
fn snapshot_reslice_picker_on_a_mig_gpu() {
    let s = shot(":gpu h200-0005/0<Enter>m<Down><Down><Down>");
    assert!(s.contains("Reslice h200-0005 gpu0 (H200-141GB)"), "{s}");
    insta::assert_snapshot!("reslice_picker", s);
}

#[test]
fn snapshot_terminal_too_small() {
    let mut app = app_at(20);
    let s = to_text(&render_app(&mut app, 50, 10));
    assert!(s.contains("terminal too small: 50×10"), "{s}");
    assert!(s.contains("at least 60×15"), "{s}");
    insta::assert_snapshot!("too_small", s);
}

#[test]
fn no_color_renders_the_same_text_without_colour() {
    let screens = [
        "",
        ":gpus<Enter>",
        ":tenants<Enter>",
        "/h200-0005<Enter><Enter>j",
        ":gpu h200-0005/0<Enter>",
        "/h100-0038<Enter>D",
        "?",
    ];
    for keys in screens {
        let (_, mut coloured) = demo_app(SEED, 20, dark());
        let (_, mut plain) = demo_app(SEED, 20, Theme::no_color());
        send(&mut coloured, keys);
        send(&mut plain, keys);
        let a = render(&mut coloured);
        let b = render(&mut plain);
        assert_eq!(to_text(&a), to_text(&b), "NO_COLOR changes the text of {keys:?}");
        let coloured_cells = a.content.iter().filter(|c| c.fg != Color::Reset || c.bg != Color::Reset).count();
        assert!(coloured_cells > 0, "the dark theme draws colours for {keys:?}");
        let stray = b.content.iter().find(|c| c.fg != Color::Reset || c.bg != Color::Reset);
        assert!(stray.is_none(), "NO_COLOR drew a colour for {keys:?}: {stray:?}");
    }
}

#[test]
fn snapshots_are_stable_across_fresh_apps() {
    // The sim is deterministic and time is simulated: two apps, same keys, same screen.
    for keys in ["", ":pods<Enter>", ":events<Enter>", ":gpu h200-0005/0<Enter>"] {
        assert_eq!(shot(keys), shot(keys), "screen for {keys:?} differs between runs");
    }
}

// ---------------------------------------------------------------- flows: navigation

#[test]
fn colon_opens_views_by_name_and_alias() {
    let mut app = app_at(5);
    send(&mut app, ":tenants<Enter>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Tenants));
    assert!(app.ui.input.is_none());
    let s = screen(&mut app);
    assert!(s.contains(" Tenants [8/8]"), "{s}");
    assert!(line_with(&s, "llm-pretrain").is_some(), "{s}");

    send(&mut app, ":po<Enter>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Pods));
    let s = screen(&mut app);
    assert!(s.contains(" Pods ["), "{s}");
    assert!(s.contains("NAMESPACE"), "{s}");

    send(&mut app, ":no<Enter>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Fleet));
    assert!(screen(&mut app).contains(" Fleet [48/48]"));

    // A view name with an argument opens it filtered.
    send(&mut app, ":gpus h200-0005<Enter>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Gpus));
    assert_eq!(app.ui.table(ViewKind::Gpus).filter, "h200-0005");
    let nodes = column(&app, ViewKind::Gpus, 0);
    assert!(!nodes.is_empty());
    assert!(nodes.iter().all(|n| n == "h200-0005" || n.is_empty()), "{nodes:?}");

    // The command line echoes while typing.
    send(&mut app, ":ev");
    assert_eq!(app.ui.input.as_ref().map(|i| i.kind.clone()), Some(InputKind::Command));
    assert!(status_line(&screen(&mut app)).starts_with(":ev"));
    send(&mut app, "<Enter>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Events));
}

#[test]
fn unknown_command_names_it_and_changes_nothing() {
    let mut app = app_at(5);
    send(&mut app, "jj");
    let before = (app.ui.nav.stack.clone(), app.ui.table(ViewKind::Fleet));
    send(&mut app, ":bogus<Enter>");
    assert!(app.ui.input.is_none());
    assert_eq!((app.ui.nav.stack.clone(), app.ui.table(ViewKind::Fleet)), before);
    let (sev, msg) = app.ui.message.clone().expect("an error message");
    assert_eq!(sev, crate::model::Severity::Error);
    assert!(msg.contains("unknown command \"bogus\""), "{msg}");
    assert!(status_line(&screen(&mut app)).contains("unknown command \"bogus\""));

    send(&mut app, ":node nope-0000<Enter>");
    assert_eq!(app.ui.nav.stack, before.0);
    assert!(message(&app).contains("no node named \"nope-0000\""), "{}", message(&app));

    send(&mut app, ":gpu h100-0000/9<Enter>");
    assert_eq!(app.ui.nav.stack, before.0);
    assert!(message(&app).contains("no GPU \"h100-0000/9\""), "{}", message(&app));
}

#[test]
fn esc_on_the_command_line_runs_nothing() {
    let mut app = app_at(5);
    send(&mut app, ":tenants<Esc>");
    assert!(app.ui.input.is_none());
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Fleet));
    send(&mut app, ":q<Enter>");
    assert!(app.ui.exit.quit);
}

#[test]
fn filter_narrows_live_esc_restores_and_bang_inverts() {
    let mut app = app_at(5);
    let all = app.ui.rows(ViewKind::Fleet).len();
    assert_eq!(all, 48);

    send(&mut app, "/h20");
    assert_eq!(app.ui.input.as_ref().map(|i| i.kind.clone()), Some(InputKind::Filter));
    let names = column(&app, ViewKind::Fleet, 0);
    assert!(!names.is_empty() && names.len() < all, "{names:?}");
    assert!(names.iter().all(|n| n.starts_with("h200-")), "{names:?}");
    let h200 = names.len();
    let s = screen(&mut app);
    assert!(s.contains(&format!(" Fleet [{h200}/48] /h20 ")), "{s}");
    assert!(status_line(&s).starts_with("/h20"), "{s}");

    // Narrower while typing, wider again with backspace.
    send(&mut app, "0-0005");
    assert_eq!(column(&app, ViewKind::Fleet, 0), vec!["h200-0005".to_string()]);
    send(&mut app, "<BS><BS><BS><BS><BS><BS>");
    assert_eq!(app.ui.rows(ViewKind::Fleet).len(), h200);

    // Esc while typing restores the filter from before (none).
    send(&mut app, "<Esc>");
    assert!(app.ui.input.is_none());
    assert_eq!(app.ui.table(ViewKind::Fleet).filter, "");
    assert_eq!(app.ui.rows(ViewKind::Fleet).len(), all);
    assert!(screen(&mut app).contains(" Fleet [48/48]"));

    // `!` inverts: no h200 node remains.
    send(&mut app, "/!h200<Enter>");
    let names = column(&app, ViewKind::Fleet, 0);
    assert_eq!(names.len(), all - h200);
    assert!(names.iter().all(|n| !n.starts_with("h200-")), "{names:?}");
    assert!(message(&app).contains(&format!("{} rows", all - h200)), "{}", message(&app));

    // A committed filter survives a second `/` cancelled with Esc, and Esc in the view
    // clears it.
    send(&mut app, "/xyz<Esc>");
    assert_eq!(app.ui.table(ViewKind::Fleet).filter, "!h200");
    send(&mut app, "<Esc>");
    assert_eq!(app.ui.table(ViewKind::Fleet).filter, "");
    assert_eq!(app.ui.rows(ViewKind::Fleet).len(), all);

    // Nothing matches: the view says so.
    send(&mut app, "/zzzz-nothing<Enter>");
    assert!(app.ui.rows(ViewKind::Fleet).is_empty());
    assert!(screen(&mut app).contains("no rows match /zzzz-nothing — Esc clears the filter"));
}

fn sorted_nums(v: &[String]) -> Vec<i64> {
    v.iter().map(|s| s.trim().trim_end_matches('%').parse::<i64>().expect("a number")).collect()
}

#[test]
fn sort_keys_change_row_order_by_the_column() {
    let mut app = app_at(5);
    // Default: by NAME, ascending.
    let names = column(&app, ViewKind::Fleet, 0);
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    let s = screen(&mut app);
    assert!(s.contains("NAME↑"), "{s}");
    assert!(line_with(&s, "│a100-0003").is_some(), "first row is the first name: {s}");

    // r reverses.
    send(&mut app, "r");
    let rev = column(&app, ViewKind::Fleet, 0);
    let mut expect = sorted.clone();
    expect.reverse();
    assert_eq!(rev, expect);
    let s = screen(&mut app);
    assert!(s.contains("NAME↓"), "{s}");
    assert_eq!(message(&app), "sorted by NAME descending");
    // The selection stays on a100-0003, now the last row; g goes to the new first row.
    assert_eq!(app.ui.table(ViewKind::Fleet).selected, 47);
    send(&mut app, "g");
    let s = screen(&mut app);
    let first_row = s.lines().nth(4).expect("a first data row");
    assert!(first_row.starts_with(&format!("│{}", expect[0])), "{first_row}");
    send(&mut app, "r");

    // s moves to the next column: STATUS, then on to PODS (column 11), numerically.
    send(&mut app, "s");
    assert_eq!(app.ui.table(ViewKind::Fleet).sort_col, Some("STATUS"));
    assert_eq!(message(&app), "sorted by STATUS ascending");
    let status = column(&app, ViewKind::Fleet, 1);
    let mut st = status.clone();
    st.sort_by_key(|s| s.to_lowercase());
    assert_eq!(status, st);
    send(&mut app, "ssssssssss");
    assert_eq!(app.ui.table(ViewKind::Fleet).sort_col, Some("PODS"));
    assert_eq!(message(&app), "sorted by PODS ascending");
    let pods = sorted_nums(&column(&app, ViewKind::Fleet, 11));
    assert!(pods.windows(2).all(|w| w[0] <= w[1]), "{pods:?}");
    assert!(pods.first() < pods.last(), "the demo has nodes with different pod counts");
    send(&mut app, "r");
    let pods = sorted_nums(&column(&app, ViewKind::Fleet, 11));
    assert!(pods.windows(2).all(|w| w[0] >= w[1]), "{pods:?}");
    let s = screen(&mut app);
    let header = s.lines().nth(3).expect("the header row");
    assert!(header.contains("↓") && !header.contains("NAME↓"), "{header}");
    // S goes back one column.
    send(&mut app, "S");
    assert_eq!(app.ui.table(ViewKind::Fleet).sort_col, Some("IDLE"));

    // The selection stays on the same node when the order changes.
    send(&mut app, "<Esc>gjjj");
    let picked = app.ui.selected_id(ViewKind::Fleet);
    send(&mut app, "r");
    assert_eq!(app.ui.selected_id(ViewKind::Fleet), picked);
}

#[test]

fn sort_mark_does_not_clip_the_column_name() {
    let mut app = app_at(5);
    let mut clipped = Vec::new();
    for v in ViewKind::ALL {
        app.open_view(v);
        for c in tables::columns(v) {
            app.ui.table_mut(v).sort_col = Some(c.name);
            app.prepare();
            let s = screen(&mut app);
            // The header row is wherever the table starts (the events view has its alerts above).
            if !s.lines().any(|l| l.contains(&format!("{}↑", c.name))) {
                clipped.push(format!("{}:{}", v.name(), c.name));
            }
        }
    }
    assert!(clipped.is_empty(), "sorted column names clipped at 140 columns: {clipped:?}");
}

#[test]
fn tab_cycles_the_views_and_backtab_goes_back() {
    let mut app = app_at(5);
    let mut seen = Vec::new();
    for _ in 0..ViewKind::ALL.len() {
        send(&mut app, "<Tab>");
        let Screen::Table(v) = app.ui.screen() else { panic!("tab left the table views") };
        seen.push(v);
    }
    let mut expect: Vec<ViewKind> = ViewKind::ALL[1..].to_vec();
    expect.push(ViewKind::Fleet);
    assert_eq!(seen, expect);
    send(&mut app, "<BackTab>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Hosts));
    assert!(screen(&mut app).contains(" Hosts ["));
    send(&mut app, "<BackTab>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Capi));
    assert!(screen(&mut app).contains(" Cluster API ["));
    send(&mut app, "<BackTab>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Workloads));
    send(&mut app, "<BackTab>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Domains));
    assert!(screen(&mut app).contains(" Domains [0/0]"));
    send(&mut app, "<BackTab>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Ops));
    assert!(screen(&mut app).contains(" Operations [0/0]"));
    // Number keys jump.
    send(&mut app, "3");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Tenants));
}

#[test]
fn node_screen_opens_from_the_fleet_and_esc_goes_back() {
    let mut app = app_at(5);
    send(&mut app, "jjjjj");
    let id = app.ui.selected_id(ViewKind::Fleet).expect("a selected node");
    let name = column(&app, ViewKind::Fleet, 0)[5].clone();
    send(&mut app, "<Enter>");
    assert_eq!(app.ui.screen(), Screen::Node(id.node().expect("a node row")));
    let s = screen(&mut app);
    assert!(s.contains("Topology: node → GPU → MIG instance → pod"), "{s}");
    assert!(s.contains(&format!("▶ ▼ {name} · ")), "{s}");
    // Down then Enter on a GPU row opens the GPU screen; Esc twice returns to the fleet.
    send(&mut app, "j<Enter>");
    assert!(matches!(app.ui.screen(), Screen::Gpu(_)));
    assert!(screen(&mut app).contains(&format!("MIG slice map · {name} gpu0")));
    send(&mut app, "<Esc>");
    assert_eq!(app.ui.screen(), Screen::Node(id.node().expect("a node row")));
    send(&mut app, "<Esc>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Fleet));
    assert_eq!(app.ui.selected_id(ViewKind::Fleet), Some(id), "the selection is kept");
    assert!(screen(&mut app).contains(" Fleet [48/48]"));

    // `/` on the node screen explains itself.
    send(&mut app, "<Enter>/");
    assert!(app.ui.input.is_none());
    assert!(message(&app).contains("filters work in the table views"), "{}", message(&app));

    // A node opened by name: Esc goes to the fleet too.
    send(&mut app, "<Esc>:node h100-0002<Enter>");
    assert_eq!(app.ui.nav.stack.len(), 2);
    assert!(screen(&mut app).contains("h100-0002"));
    send(&mut app, "<Esc>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Fleet));
}

#[test]
fn node_tree_collapses_and_expands() {
    let mut app = app_at(5);
    send(&mut app, ":node h200-0005<Enter>j");
    let Screen::Node(n) = app.ui.screen() else { panic!("not on the node screen") };
    let rows = crate::ui::views::detail::tree_rows(&app.fleet, n, &app.ui.nav.node_closed).len();
    send(&mut app, "h");
    let closed = crate::ui::views::detail::tree_rows(&app.fleet, n, &app.ui.nav.node_closed).len();
    assert!(closed < rows, "collapsing gpu0 hides its instances ({closed} vs {rows})");
    assert!(screen(&mut app).contains("▶ gpu0"));
    send(&mut app, "<Space>");
    assert_eq!(crate::ui::views::detail::tree_rows(&app.fleet, n, &app.ui.nav.node_closed).len(), rows);
}

#[test]
fn help_opens_and_closes() {
    let mut app = app_at(5);
    send(&mut app, "?");
    assert!(app.ui.help);
    let s = screen(&mut app);
    assert!(s.contains("Help — keymap default (Esc closes)"), "{s}");
    assert!(line_with(&s, "drain").is_some_and(|l| l.contains("D ")), "{s}");
    // Keys in help scroll it rather than acting on the view.
    send(&mut app, "jjj");
    assert_eq!(app.ui.help_scroll, 3);
    assert_eq!(app.ui.table(ViewKind::Fleet).selected, 0);
    send(&mut app, "?");
    assert!(!app.ui.help);
    assert!(!screen(&mut app).contains("Help — keymap"));
    send(&mut app, "?<Esc>");
    assert!(!app.ui.help);
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Fleet));
    send(&mut app, ":help<Enter>");
    assert!(app.ui.help);
}

#[test]
fn unbound_key_shows_a_hint() {
    let mut app = app_at(5);
    send(&mut app, "z");
    let (sev, msg) = app.ui.message.clone().expect("a hint");
    assert_eq!(sev, crate::model::Severity::Warning);
    assert_eq!(msg, "'z' is not bound in the default keymap; press ? for the keys");
    assert!(status_line(&screen(&mut app)).contains("'z' is not bound"));
    // The next bound key clears it.
    send(&mut app, "j");
    assert!(app.ui.message.is_none());
}

#[test]
fn mouse_click_selects_a_row_and_a_second_click_opens_it() {
    let mut app = app_at(5);
    let click = |column: u16, row: u16| MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column,
        row,
        modifiers: KeyModifiers::NONE,
    };
    // Rows start under the tabs, the table border and the header: screen row 4 is row 0.
    app.handle_mouse(click(5, 7));
    assert_eq!(app.ui.table(ViewKind::Fleet).selected, 3);
    let name = column(&app, ViewKind::Fleet, 0)[3].clone();
    assert!(screen(&mut app).lines().nth(7).is_some_and(|l| l.starts_with(&format!("│{name}"))));
    // A click outside the rows (the header row) changes nothing.
    app.handle_mouse(click(5, 3));
    assert_eq!(app.ui.table(ViewKind::Fleet).selected, 3);
    let id = app.ui.selected_id(ViewKind::Fleet).expect("a node");
    app.handle_mouse(click(5, 7));
    assert_eq!(app.ui.screen(), Screen::Node(id.node().expect("a node row")));

    // A click on a tab opens that view.
    let s = screen(&mut app);
    let tabs = s.lines().nth(1).expect("the tab line");
    let col = tabs.find("3 Tenants").map(|b| tabs[..b].chars().count()).expect("the Tenants tab") as u16;
    app.handle_mouse(click(col + 2, 1));
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Tenants));

    // Scrolling moves the selection.
    app.handle_mouse(MouseEvent {
        kind: MouseEventKind::ScrollDown,
        column: 5,
        row: 10,
        modifiers: KeyModifiers::NONE,
    });
    assert_eq!(app.ui.table(ViewKind::Tenants).selected, 1);
}

/// Which cells of screen row `y` (inside the table borders) are drawn with the selection.
fn selection_cells(app: &mut App, y: u16) -> (usize, usize) {
    let buf = render(app);
    let sel = app.theme.style("ui.selection");
    let cells: Vec<bool> = (1..W - 1)
        .map(|x| {
            let c = &buf[(x, y)];
            match sel.bg {
                Some(bg) => c.bg == bg,
                None => c.modifier.contains(ratatui::style::Modifier::REVERSED),
            }
        })
        .collect();
    (cells.iter().filter(|b| **b).count(), cells.len())
}

#[test]
fn selected_row_is_highlighted_with_no_color() {
    let (_, mut app) = demo_app(SEED, 5, Theme::no_color());
    send(&mut app, "jjj");
    let (hit, all) = selection_cells(&mut app, 7);
    assert_eq!(hit, all, "the whole selected row is reversed");
    let (above, _) = selection_cells(&mut app, 6);
    assert!(above < all / 2, "the row above is not selected ({above} of {all} reversed)");
}

#[test]
fn selected_row_text_is_drawn_with_the_selection_colour() {
    let mut app = app_at(5);
    send(&mut app, "jjj");
    let (hit, all) = selection_cells(&mut app, 7);
    assert_eq!(hit, all, "only {hit} of {all} cells of the selected row have the selection colour");
    assert_eq!(selection_cells(&mut app, 6).0, 0, "the row above is not selected");
}

// ---------------------------------------------------------------- flows: operations

#[test]
fn drain_with_unmanaged_pods_is_blocked_until_forced() {
    let mut rig = Rig::new(5);
    send(&mut rig.app, "/h100-0038<Enter>");
    assert_eq!(column(&rig.app, ViewKind::Fleet, 0), vec!["h100-0038".to_string()]);
    send(&mut rig.app, "D");
    let Some(Dialog::Preview { plan, .. }) = &rig.app.ui.dialog else { panic!("no drain preview") };
    assert_eq!(plan.title, "Drain node h100-0038");
    assert!(!plan.can_execute());
    assert!(plan.blockers.iter().any(|b| b.contains("vc-research/jupyter-")), "{:?}", plan.blockers);
    let s = screen(&mut rig.app);
    assert!(s.contains("Blocked — this cannot run as planned:"), "{s}");
    assert!(s.contains("emptyDir"), "{s}");
    assert!(s.contains("cannot confirm while blocked · f force · n cancel"), "{s}");

    // y does not execute a blocked plan: it says why, in the dialog.
    send(&mut rig.app, "y");
    assert!(rig.executes().is_empty(), "a blocked drain reached the executor");
    assert!(matches!(rig.app.ui.dialog, Some(Dialog::Preview { .. })), "the preview stays open");
    assert!(screen(&mut rig.app).contains("this plan is blocked; resolve the blockers above (or cancel)"));

    // f re-plans with force: confirmable, and the prompt names the node.
    send(&mut rig.app, "f");
    let Some(Dialog::Preview { plan, error, .. }) = &rig.app.ui.dialog else { panic!("the preview closed") };
    assert!(plan.can_execute(), "{:?}", plan.blockers);
    assert!(error.is_none());
    assert!(matches!(&plan.detail, PlanDetail::Drain(d) if d.force));
    let s = screen(&mut rig.app);
    assert!(s.contains("Drain? y confirm on h100-0038 · n cancel"), "{s}");
    assert!(s.contains("DELETE vc-research/jupyter-"), "{s}");
    assert!(rig.executes().is_empty());

    // f again turns force off: blocked again.
    send(&mut rig.app, "ff");
    send(&mut rig.app, "y");
    let ex = rig.executes();
    assert_eq!(ex.len(), 1, "exactly one Execute: {:?}", rig.requests());
    assert!(
        rig.requests()
            .iter()
            .all(|r| matches!(r, ExecRequest::Preview { id: 1, .. } | ExecRequest::Execute { id: 1, .. })),
        "each re-plan (f) is previewed again under the same operation: {:?}",
        rig.requests()
    );
    let (id, plan) = &ex[0];
    assert_eq!(*id, 1);
    assert_eq!(plan_node(plan), Some("h100-0038"));
    assert_eq!(plan.target, "h100-0038");
    assert!(matches!(&plan.detail, PlanDetail::Drain(d) if d.force && d.node == "h100-0038"));
    assert!(rig.app.ui.dialog.is_none());
    assert_eq!(rig.app.ui.ops.mine, vec![1]);
    assert!(message(&rig.app).starts_with("started: Drain node h100-0038"), "{}", message(&rig.app));
}

#[test]
fn drain_preview_n_and_esc_cancel_and_send_nothing() {
    let mut rig = Rig::new(5);
    send(&mut rig.app, "/h100-0000<Enter>D");
    let Some(Dialog::Preview { plan, .. }) = &rig.app.ui.dialog else { panic!("no drain preview") };
    assert!(plan.can_execute(), "h100-0000 runs only managed pods: {:?}", plan.blockers);
    assert!(screen(&mut rig.app).contains("Drain? y confirm on h100-0000"));
    send(&mut rig.app, "n");
    assert!(rig.app.ui.dialog.is_none());
    assert!(rig.executes().is_empty(), "n sends nothing: {:?}", rig.requests());
    assert_eq!(message(&rig.app), "cancelled: nothing was changed");
    assert!(status_line(&screen(&mut rig.app)).contains("cancelled: nothing was changed"));
    send(&mut rig.app, "D<Esc>");
    assert!(rig.app.ui.dialog.is_none());
    // The dialog swallows normal keys: `q` cancels the preview, it does not quit.
    send(&mut rig.app, "Dq");
    assert!(rig.app.ui.dialog.is_none());
    assert!(!rig.app.ui.exit.quit);
    assert!(rig.executes().is_empty(), "{:?}", rig.requests());
    assert!(!rig.app.fleet.node(rig.app.fleet.node_by_name("h100-0000").unwrap()).unwrap().cordoned);
}

#[test]
fn forced_drain_runs_to_the_end_through_the_simulator() {
    let mut rig = Rig::new(5);
    send(&mut rig.app, "/h100-0038<Enter>Dfy");
    let ex = rig.executes();
    assert_eq!(ex.len(), 1);
    let id = ex[0].0;
    rig.forward();
    // The evicted pods take two ticks to go: after one the drain waits for them.
    rig.step();
    // Any bound key clears the "started" message; the status line then shows progress.
    send(&mut rig.app, "7");
    let s = screen(&mut rig.app);
    let status = status_line(&s);
    // Every pod is evicted at once (as kubectl does); the drain then waits for them to go,
    // and says so, as it does on a cluster.
    assert!(status.starts_with("Drain node h100-0038 [blocked "), "{status}");
    assert!(status.contains("waiting for") && status.contains("to terminate"), "{status}");
    let row = line_with(&s, "Drain node h100-0038").expect("an ops row");
    assert!(row.contains("blocked"), "{row}");

    assert_eq!(rig.run_until_finished(id), OpState::Succeeded);
    let s = screen(&mut rig.app);
    let row = line_with(&s, "Drain node h100-0038").expect("an ops row");
    assert!(row.contains("succeeded"), "{row}");
    assert!(!status_line(&s).contains("[running"), "{s}");
    // The log pane ends with the newest line, the outcome, however long the lines above.
    assert!(line_with(&s, "Drain node h100-0038: h100-0038 drained").is_some(), "{s}");
    let n = rig.app.fleet.node_by_name("h100-0038").unwrap();
    assert!(rig.app.fleet.node(n).unwrap().cordoned);
    assert_eq!(
        rig.app
            .fleet
            .pods_on_node(n)
            .iter()
            .filter(|p| rig.app.fleet.pod(**p).is_some_and(|p| p.requests_devices()))
            .count(),
        0
    );

    send(&mut rig.app, ":events<Enter>");
    let s = screen(&mut rig.app);
    assert!(line_with(&s, "OperationSucceeded").is_some_and(|l| l.contains("h100-0038")), "{s}");
    assert!(line_with(&s, "OperationStarted").is_some_and(|l| l.contains("h100-0038")), "{s}");
    send(&mut rig.app, ":fleet h100-0038<Enter>");
    assert!(line_with(&screen(&mut rig.app), "│h100-0038").is_some_and(|l| l.contains("Ready,Cordoned")));
}

/// Starts a forced drain of h100-0038, runs it a step, and opens the ops view on it.
fn running_drain() -> Rig {
    let mut rig = Rig::new(5);
    send(&mut rig.app, "/h100-0038<Enter>Dfy");
    rig.forward();
    rig.step();
    send(&mut rig.app, ":ops<Enter>");
    assert_eq!(rig.app.ui.rows(ViewKind::Ops).len(), 1);
    rig
}

#[test]
fn quitting_while_an_operation_runs_asks_once_more() {
    let mut rig = running_drain();
    assert!(rig.app.fleet.op(1).is_some_and(|o| !o.state.finished()), "the drain is still running");
    send(&mut rig.app, "q");
    assert!(!rig.app.ui.exit.quit, "the first q only warns");
    assert!(message(&rig.app).starts_with("1 operation still running"), "{}", message(&rig.app));
    send(&mut rig.app, "q");
    assert!(rig.app.ui.exit.quit);
}

#[test]
fn every_way_out_goes_through_the_running_operation_guard() {
    // ctrl-c, :q and :ctx warn first like q does; a second request leaves.
    let mut rig = running_drain();
    rig.app.handle_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    assert!(!rig.app.ui.exit.quit, "the first ctrl-c only warns");
    assert!(message(&rig.app).starts_with("1 operation still running: quitting"), "{}", message(&rig.app));
    rig.app.handle_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    assert!(rig.app.ui.exit.quit);

    let mut rig = running_drain();
    send(&mut rig.app, ":q<Enter>");
    assert!(!rig.app.ui.exit.quit, "the first :q only warns");
    send(&mut rig.app, ":quit<Enter>");
    assert!(rig.app.ui.exit.quit);

    let mut rig = running_drain();
    send(&mut rig.app, ":q!<Enter>");
    assert!(rig.app.ui.exit.quit, ":q! quits at once");

    let mut rig = running_drain();
    rig.app.ui.session.contexts = vec!["admin".into(), "other".into()];
    send(&mut rig.app, ":ctx other<Enter>");
    assert!(!rig.app.ui.exit.quit, "a context switch stops operations too, so it asks first");
    assert!(message(&rig.app).contains("switching to other stops it"), "{}", message(&rig.app));
    assert_eq!(rig.app.ui.exit.switch_context, None);
    send(&mut rig.app, ":ctx other<Enter>");
    assert!(rig.app.ui.exit.quit);
    assert_eq!(rig.app.ui.exit.switch_context.as_deref(), Some("other"));
}

#[test]
fn without_running_operations_every_way_out_leaves_at_once() {
    for keys in [":q<Enter>", ":exit<Enter>", "q"] {
        let mut app = app_at(5);
        send(&mut app, keys);
        assert!(app.ui.exit.quit, "{keys}");
    }
    let mut app = app_at(5);
    app.handle_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    assert!(app.ui.exit.quit);
}

fn assert_cancelled(mut rig: Rig) {
    let reqs = rig.requests();
    assert!(matches!(reqs.as_slice(), [ExecRequest::Cancel { id: 1 }]), "{reqs:?}");
    assert_eq!(message(&rig.app), "cancelling operation #1; what was done stays done");
    rig.forward();
    rig.step();
    let o = rig.app.fleet.ops.iter().find(|o| o.id == 1).expect("op #1");
    assert_eq!(o.state, OpState::Cancelled);
    assert!(line_with(&screen(&mut rig.app), "Drain node h100-0038").is_some_and(|l| l.contains("cancelled")));
    // Cancelling a finished op says so and sends nothing.
    rig.app.dispatch(Command::Cancel);
    assert!(rig.requests().is_empty());
    assert_eq!(message(&rig.app), "operation #1 has already finished");
}

#[test]
fn cancel_command_in_the_ops_view_cancels_the_selected_op() {
    let mut rig = running_drain();
    rig.app.dispatch(Command::Cancel);
    assert_cancelled(rig);
}

#[test]

fn a_key_in_the_ops_view_cancels_the_selected_op() {
    let mut rig = running_drain();
    let keys = rig.app.keymap.keys_for(Mode::Normal, Command::Cancel).to_vec();
    assert!(!keys.is_empty(), "the default keymap binds no key to `cancel` in normal mode");
    rig.app.handle_key(KeyEvent::new(keys[0].code, keys[0].mods));
    assert_cancelled(rig);
}

fn quota_hard(f: &Fleet, tenant: &str, resource: &str) -> String {
    f.quota_ids()
        .filter_map(|i| f.quota(i))
        .find(|q| f.tenant(q.tenant).is_some_and(|t| f.str_of(t.name) == tenant) && f.str_of(q.resource) == resource)
        .map(|q| q.hard.to_string())
        .expect("the quota exists")
}

#[test]
fn a_cluster_queues_borrowing_limit_is_picked_by_name_previewed_and_set() {
    let mut rig = Rig::new(5);
    send(&mut rig.app, ":quotas<Enter>/inference-prod<Enter>e");
    let Some(Dialog::Edit { choices, .. }) = &rig.app.ui.dialog else { panic!("no edit dialog") };
    assert_eq!(choices.len(), 3, "nominal, borrowing and lending limits: {choices:?}");
    assert!(choices[1].starts_with("borrowingLimit="), "{choices:?}");
    assert!(screen(&mut rig.app).contains("borrowingLimit=4, lendingLimit=2"), "the hint says how");
    // ↓↓ picks borrowingLimit=; the person types the value after it.
    send(&mut rig.app, "<Down><Down>4<Enter>");
    let Some(Dialog::Preview { plan, .. }) = &rig.app.ui.dialog else { panic!("no preview: {:?}", rig.app.ui.dialog) };
    assert!(plan.title.contains("borrowingLimit of inference-prod to 4"), "{}", plan.title);
    send(&mut rig.app, "y");
    let id = rig.executes()[0].0;
    rig.forward();
    assert_eq!(rig.run_until_finished(id), OpState::Succeeded);
    let q = rig
        .app
        .fleet
        .quotas
        .values()
        .find(|q| matches!(q.source, crate::model::QuotaSource::ClusterQueue { .. }))
        .expect("the ClusterQueue quota");
    assert_eq!(q.borrowing_limit.map(|b| b.value()), Some(4));
}

#[test]
fn quota_edit_rejects_bad_input_in_place_then_previews_and_confirms() {
    let mut rig = Rig::new(5);
    const RES: &str = "requests.nvidia.com/gpu";
    let before = quota_hard(&rig.app.fleet, "llm-pretrain", RES);
    send(&mut rig.app, ":quotas<Enter>/llm-pretrain<Enter>e");
    let Some(Dialog::Edit { text, .. }) = &rig.app.ui.dialog else { panic!("no edit dialog") };
    assert_eq!(*text, before, "the dialog starts at the current value");
    let s = screen(&mut rig.app);
    assert!(s.contains("Edit quota: llm-pretrain requests.nvidia.com/gpu"), "{s}");
    assert!(s.contains(&format!("> {before}█")), "{s}");

    let clear = "<BS>".repeat(before.len() + 2);
    for (bad, why) in
        [("abc", "\"abc\" is not a quantity"), ("-1", "\"-1\" is negative"), ("1.5", "\"1.5\" is not a whole number")]
    {
        send(&mut rig.app, &format!("{clear}{bad}<Enter>"));
        let Some(Dialog::Edit { error, text, .. }) = &rig.app.ui.dialog else {
            panic!("the edit dialog closed on {bad:?}")
        };
        assert_eq!(text, bad);
        let e = error.clone().unwrap_or_else(|| panic!("no error for {bad:?}"));
        assert!(e.contains(why), "{bad:?}: {e}");
        assert!(screen(&mut rig.app).contains(&format!("✗ {why}")), "{bad:?} not shown");
        assert_eq!(quota_hard(&rig.app.fleet, "llm-pretrain", RES), before);
        assert!(rig.requests().is_empty());
    }
    // Typing clears the error.
    send(&mut rig.app, &format!("{clear}1"));
    assert!(matches!(&rig.app.ui.dialog, Some(Dialog::Edit { error: None, .. })));

    send(&mut rig.app, "30<Enter>");
    let Some(Dialog::Preview { plan, .. }) = &rig.app.ui.dialog else { panic!("no preview for 130") };
    assert!(plan.can_execute());
    let s = screen(&mut rig.app);
    assert!(
        s.contains(&format!("ResourceQuota llm-pretrain/gpu-quota: requests.nvidia.com/gpu {before} → 130")),
        "{s}"
    );
    assert!(rig.executes().is_empty(), "a preview executes nothing");
    send(&mut rig.app, "y");
    let ex = rig.executes();
    assert_eq!(ex.len(), 1);
    let PlanDetail::Quota(q) = &ex[0].1.detail else { panic!("not a quota plan: {:?}", ex[0].1.detail) };
    assert_eq!(q.tenant, "llm-pretrain");
    assert_eq!(q.key.resource, RES);
    assert_eq!(q.new.to_string(), "130");
    assert_eq!(crate::ops::shown(q.old), before);
    // Nothing changes until the executor reports back.
    assert_eq!(quota_hard(&rig.app.fleet, "llm-pretrain", RES), before);

    let id = ex[0].0;
    rig.forward();
    assert_eq!(rig.run_until_finished(id), OpState::Succeeded);
    assert_eq!(quota_hard(&rig.app.fleet, "llm-pretrain", RES), "130");
    send(&mut rig.app, "<Esc>");
    let s = screen(&mut rig.app);
    assert!(line_with(&s, "│llm-pretrain").is_some_and(|l| l.contains(" 130 ")), "{s}");
}

#[test]
fn quota_edit_esc_cancels() {
    let mut rig = Rig::new(5);
    send(&mut rig.app, ":quotas<Enter>e<BS>7<Esc>");
    assert!(rig.app.ui.dialog.is_none());
    assert_eq!(message(&rig.app), "cancelled: nothing was changed");
    assert!(rig.requests().is_empty());
    // e on the tenants view edits that tenant's GPU quota.
    send(&mut rig.app, ":tenants<Enter>/llm-pretrain<Enter>e");
    assert!(screen(&mut rig.app).contains("Edit quota: llm-pretrain requests.nvidia.com/gpu"));
    // e elsewhere explains where it works.
    send(&mut rig.app, "<Esc>:events<Enter>e");
    assert!(rig.app.ui.dialog.is_none());
    assert!(message(&rig.app).contains("select a quota"), "{}", message(&rig.app));
}

#[test]
fn reslice_that_does_not_fit_shows_the_planners_reason() {
    let mut rig = Rig::new(5);
    // H100-80GB and A100-80GB have 8 memory slices: 3g+3g+1g needs 9.
    for node in ["h100-0000", "a100-0003"] {
        send(&mut rig.app, &format!("<Esc><Esc>/{node}<Enter>m"));
        let Some(Dialog::Edit { .. }) = &rig.app.ui.dialog else { panic!("no reslice dialog on {node}") };
        send(&mut rig.app, "3g.40gb,3g.40gb,1g.10gb<Enter>");
        let Some(Dialog::Edit { error, .. }) = &rig.app.ui.dialog else { panic!("the dialog closed on {node}") };
        let e = error.clone().expect("a planner error");
        assert!(e.contains("no non-overlapping placement for 3g.40gb, 3g.40gb, 1g.10gb"), "{node}: {e}");
        assert!(e.contains("it fits without one 1g.10gb"), "{node}: {e}");
        let s = screen(&mut rig.app);
        assert!(s.contains("✗ no non-overlapping placement"), "{s}");
        assert!(rig.requests().is_empty());
        send(&mut rig.app, "<Esc>");
    }
    // A layout that fits gives a preview.
    send(&mut rig.app, "<Esc>/h100-0004<Enter>m3g.40gb,2g.20gb,1g.10gb,1g.10gb<Enter>");
    let Some(Dialog::Preview { plan, .. }) = &rig.app.ui.dialog else { panic!("no reslice preview") };
    assert_eq!(plan_node(plan), Some("h100-0004"));
    assert!(screen(&mut rig.app).contains("Preview: "));
    send(&mut rig.app, "n");
    assert!(rig.executes().is_empty());
}

#[test]
fn reslice_picker_cycles_the_named_layouts() {
    let mut rig = Rig::new(5);
    send(&mut rig.app, ":gpu h200-0005/0<Enter>m");
    let Some(Dialog::Edit { choices, .. }) = &rig.app.ui.dialog else { panic!("no reslice dialog") };
    let choices = choices.clone();
    assert!(choices.len() > 2);
    send(&mut rig.app, "<Down><Down>");
    let Some(Dialog::Edit { text, selected, .. }) = &rig.app.ui.dialog else { panic!() };
    assert_eq!((text.clone(), *selected), (choices[1].clone(), Some(1)));
    send(&mut rig.app, "<Up><Up>");
    let Some(Dialog::Edit { text, .. }) = &rig.app.ui.dialog else { panic!() };
    assert_eq!(*text, choices[choices.len() - 1]);
    send(&mut rig.app, "<Esc>");
    assert!(rig.app.ui.dialog.is_none());
    assert!(rig.requests().is_empty());
}

// ---------------------------------------------------------------- known bugs (ignored)

/// The footer line (last line of the screen).
fn footer(screen: &str) -> String {
    screen.lines().last().unwrap_or("").to_string()
}

#[test]

fn edit_dialog_footer_shows_the_edit_keys() {
    let mut app = app_at(5);
    send(&mut app, ":quotas<Enter>e");
    assert!(matches!(app.ui.dialog, Some(Dialog::Edit { .. })));
    let f = footer(&screen(&mut app));
    assert!(!f.contains("y confirm") && !f.contains("toggle force"), "edit dialog footer: {f}");
    assert!(f.contains("enter") && f.contains("esc"), "edit dialog footer: {f}");
    // Proof that y is text here, not confirm.
    send(&mut app, "y");
    assert!(matches!(&app.ui.dialog, Some(Dialog::Edit { text, .. }) if text.ends_with('y')));
}

#[test]

fn only_drain_previews_offer_force() {
    let mut app = app_at(5);
    send(&mut app, "/h100-0000<Enter>c");
    assert!(matches!(app.ui.dialog, Some(Dialog::Preview { .. })));
    let f = footer(&screen(&mut app));
    assert!(!f.contains("toggle force"), "cordon preview footer: {f}");
}

#[test]

fn quota_preview_prompt_is_shown_whole() {
    let s = shot(":quotas<Enter>/llm-pretrain<Enter>e<BS><BS><BS>130<Enter>");
    assert!(s.contains("y confirm on llm-pretrain requests.nvidia.com/gpu"), "{s}");
    assert!(s.contains("n cancel"), "{s}");
}

#[test]

fn reslice_hint_example_fits_the_gpu_model() {
    let mut app = app_at(5);
    send(&mut app, ":gpu h200-0005/0<Enter>m");
    let s = screen(&mut app);
    assert!(s.contains("Reslice h200-0005 gpu0 (H200-141GB)"), "{s}");
    assert!(!s.contains("3g.40gb"), "an H100 example on an H200:\n{s}");
}

#[test]

fn reslice_dialog_shows_every_layout_with_an_error() {
    let mut app = app_at(5);
    send(&mut app, "/h100-0000<Enter>m3g.40gb,3g.40gb,1g.10gb<Enter>");
    let Some(Dialog::Edit { choices, error, .. }) = app.ui.dialog.clone() else { panic!("no reslice dialog") };
    assert!(error.is_some());
    let s = screen(&mut app);
    let missing: Vec<&String> = choices
        .iter()
        .filter(|c| line_with(&s, &format!("  {c} ")).is_none() && !s.contains(&format!("  {c}│")))
        .collect();
    assert!(missing.is_empty(), "layouts not shown: {missing:?}\n{s}");
}

#[test]

fn drain_preview_counts_are_consistent() {
    let mut app = app_at(5);
    for keys in ["/h100-0038<Enter>D", "f"] {
        send(&mut app, keys);
        let Some(Dialog::Preview { plan, .. }) = &app.ui.dialog else { panic!("no drain preview") };
        let PlanDetail::Drain(d) = &plan.detail else { panic!("not a drain") };
        let evict: Vec<_> = d.pods.iter().filter(|p| p.action == crate::ops::PodAction::Evict).collect();
        let moved: Vec<_> = d.to_evict().collect();
        let line = plan.effects.iter().find(|e| e.starts_with("evict ")).expect("an evict line");
        let ok = [
            (evict.len(), evict.iter().map(|p| p.gpus).sum::<u32>()),
            (moved.len(), moved.iter().map(|p| p.gpus).sum()),
        ]
        .iter()
        .any(|(n, g)| line.starts_with(&format!("evict {n} pods ({g} GPUs)")));
        assert!(ok, "{line:?} with {} evicted and {} force-deleted pods", evict.len(), moved.len() - evict.len());
        if !plan.blockers.is_empty() {
            assert!(!plan.warnings.iter().any(|w| w.contains("this only cordons the node")), "{:?}", plan.warnings);
        }
    }
}

#[test]
fn readonly_refuses_operations_and_sends_nothing() {
    let mut rig = Rig::new(5);
    rig.app.ui.session.readonly = true;
    send(&mut rig.app, "/h100-0000<Enter>");
    let s = screen(&mut rig.app);
    assert!(s.lines().next().unwrap().contains("[read-only]"), "{s}");
    assert!(s.contains("D drain (read-only)"), "{s}");
    for (k, name) in [("D", "drain"), ("c", "cordon"), ("u", "uncordon"), ("m", "reslice")] {
        send(&mut rig.app, k);
        assert!(rig.app.ui.dialog.is_none(), "{k} opened a dialog in read-only mode");
        let (sev, msg) = rig.app.ui.message.clone().expect("a refusal");
        assert_eq!(sev, crate::model::Severity::Error);
        assert_eq!(msg, format!("read-only mode (--readonly): {name} is disabled"));
        assert!(status_line(&screen(&mut rig.app)).contains("read-only mode"));
    }
    send(&mut rig.app, ":quotas<Enter>e");
    assert!(rig.app.ui.dialog.is_none());
    assert!(message(&rig.app).contains("edit quota is disabled"), "{}", message(&rig.app));
    assert!(rig.requests().is_empty());

    // A preview opened before read-only was switched on still cannot be confirmed.
    rig.app.ui.session.readonly = false;
    send(&mut rig.app, ":fleet h100-0000<Enter>c");
    rig.app.ui.session.readonly = true;
    send(&mut rig.app, "y");
    assert!(rig.executes().is_empty(), "{:?}", rig.requests());
    assert!(screen(&mut rig.app).contains("read-only mode (--readonly): nothing is sent to the cluster"));
}

#[test]
fn operations_rbac_denies_are_disabled_with_the_missing_permission_named() {
    let mut rig = Rig::new(5);
    let denied = "your identity may not patch nodes (check: kubectl auth can-i patch nodes)";
    rig.app.apply([Delta::Access(crate::model::AccessSpec {
        user: "tenant-a".into(),
        denied: ["cordon", "uncordon", "drain", "reslice"].iter().map(|o| (o.to_string(), denied.to_string())).collect(),
        limited: vec![(
            "set-quota".into(),
            "your identity may not patch resourcequotas (all namespaces) (check: kubectl auth can-i patch resourcequotas -A)"
                .into(),
        )],
    })]);
    send(&mut rig.app, "/h100-0000<Enter>");
    let s = screen(&mut rig.app);
    assert!(s.lines().next().unwrap().contains("as tenant-a"), "the header names the identity: {s}");
    assert!(s.contains("D drain (no RBAC)"), "{s}");
    for (k, name) in [("D", "drain"), ("c", "cordon"), ("u", "uncordon"), ("m", "reslice")] {
        send(&mut rig.app, k);
        assert!(rig.app.ui.dialog.is_none(), "{k} opened a dialog though RBAC says no");
        assert_eq!(message(&rig.app), format!("{name} is disabled: {denied}"));
    }
    assert!(rig.requests().is_empty(), "nothing was previewed or sent");
    // Allowed in some namespaces only: the preview opens and says it is checked on confirm.
    send(&mut rig.app, ":quotas<Enter>e");
    let Some(Dialog::Edit { .. }) = &rig.app.ui.dialog else { panic!("the quota editor opens") };
    send(&mut rig.app, "<Esc>");
}

#[test]
fn a_preview_and_its_confirmation_share_the_operation_id() {
    let mut rig = Rig::new(5);
    send(&mut rig.app, "/h100-0000<Enter>c");
    send(&mut rig.app, "n");
    send(&mut rig.app, "c");
    send(&mut rig.app, "y");
    let ids: Vec<(&str, u64)> = rig
        .requests()
        .iter()
        .map(|r| match r {
            ExecRequest::Preview { id, .. } => ("preview", *id),
            ExecRequest::Execute { id, .. } => ("execute", *id),
            ExecRequest::Cancel { id } => ("cancel", *id),
        })
        .collect();
    assert_eq!(ids, vec![("preview", 1), ("preview", 2), ("execute", 2)], "a cancelled preview keeps its number");
}

#[test]
fn ops_need_a_target() {
    let mut rig = Rig::new(5);
    send(&mut rig.app, ":events<Enter>D");
    assert!(rig.app.ui.dialog.is_none());
    assert_eq!(message(&rig.app), "select a node (or a GPU) first to drain");
    send(&mut rig.app, ":fleet<Enter>/zzzz<Enter>D");
    assert!(rig.app.ui.dialog.is_none());
    assert!(rig.requests().is_empty());
}

#[test]
fn resize_keeps_the_selection_visible() {
    let mut app = app_at(5);
    send(&mut app, "G");
    assert_eq!(app.ui.table(ViewKind::Fleet).selected, 47);
    let last = column(&app, ViewKind::Fleet, 0)[47].clone();
    for (w, h) in [(80, 20), (60, 15), (200, 60), (140, 40)] {
        let s = to_text(&render_app(&mut app, w, h));
        let t = app.ui.table(ViewKind::Fleet);
        let visible =
            crate::ui::render::table_height(crate::ui::render::areas(ratatui::layout::Rect::new(0, 0, w, h)).body);
        assert!(t.offset <= 47 && 47 < t.offset + visible, "{w}×{h}: offset {} hides row 47", t.offset);
        if visible < 48 {
            assert!(s.contains("-48 of 48 "), "{w}×{h}: the last row is not shown\n{s}");
        }
        if w >= 80 {
            assert!(s.contains(&last), "{w}×{h}: the selected last node is off screen\n{s}");
        }
    }
}

// ---------------------------------------------------------------- fuzz: never panic

mod fuzz {
    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Action {
        Key(KeyEvent),
        Resize(u16, u16),
        Click(u16, u16),
        Scroll(bool),
        Tick,
    }

    fn key() -> impl Strategy<Value = KeyEvent> {
        prop_oneof![
            4 => prop::sample::select(":/?!jkhlgGsSrcuDmefynq1234567 -.,0123456789abcdefghx".chars().collect::<Vec<_>>())
                .prop_map(|c| KeyEvent::new(
                    KeyCode::Char(c),
                    if c.is_ascii_uppercase() { KeyModifiers::SHIFT } else { KeyModifiers::NONE }
                )),
            1 => any::<char>().prop_map(|c| KeyEvent::from(KeyCode::Char(c))),
            2 => prop::sample::select(vec![
                KeyCode::Enter,
                KeyCode::Esc,
                KeyCode::Tab,
                KeyCode::BackTab,
                KeyCode::Up,
                KeyCode::Down,
                KeyCode::Left,
                KeyCode::Right,
                KeyCode::Backspace,
                KeyCode::PageUp,
                KeyCode::PageDown,
                KeyCode::Home,
                KeyCode::End,
            ])
            .prop_map(KeyEvent::from),
            1 => Just(KeyEvent::new(KeyCode::Char('d'), KeyModifiers::CONTROL)),
        ]
    }

    fn action() -> impl Strategy<Value = Action> {
        prop_oneof![
            12 => key().prop_map(Action::Key),
            1 => prop_oneof![
                Just((1u16, 1u16)),
                Just((2, 2)),
                Just((0, 0)),
                Just((59, 14)),
                Just((60, 15)),
                (0u16..=220, 0u16..=70),
            ]
            .prop_map(|(w, h)| Action::Resize(w, h)),
            1 => (0u16..=220, 0u16..=70).prop_map(|(x, y)| Action::Click(x, y)),
            1 => any::<bool>().prop_map(Action::Scroll),
            1 => Just(Action::Tick),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        #[test]
        fn random_keys_and_resizes_never_panic(
            start in prop::sample::select(vec!["", ":gpus<Enter>", ":node h200-0005<Enter>", ":gpu h200-0005/0<Enter>", ":quotas<Enter>", "/h100-0038<Enter>D"]),
            actions in prop::collection::vec(action(), 1..40),
        ) {
            let mut rig = Rig::new(2);
            send(&mut rig.app, start);
            let (mut w, mut h) = (W, H);
            for a in actions {
                match a {
                    Action::Key(k) => rig.app.handle_key(k),
                    Action::Resize(nw, nh) => (w, h) = (nw, nh),
                    Action::Click(x, y) => rig.app.handle_mouse(MouseEvent {
                        kind: MouseEventKind::Down(MouseButton::Left),
                        column: x,
                        row: y,
                        modifiers: KeyModifiers::NONE,
                    }),
                    Action::Scroll(down) => rig.app.handle_mouse(MouseEvent {
                        kind: if down { MouseEventKind::ScrollDown } else { MouseEventKind::ScrollUp },
                        column: 10,
                        row: 10,
                        modifiers: KeyModifiers::NONE,
                    }),
                    Action::Tick => {
                        rig.forward();
                        rig.step();
                    }
                }
                let _ = render_app(&mut rig.app, w, h);
            }
        }
    }
}

#[test]
fn the_header_counts_feeds_in_trouble_from_when_the_trouble_began() {
    let mut app = app_at(1);
    let now = app.fleet.now;
    for (src, since) in [("pods", now - 12_000), ("nodes", now - 4_000)] {
        app.apply([Delta::Feed {
            source: src.into(),
            state: FeedState::Reconnecting { since, reason: "connection refused".into() },
        }]);
    }
    let s = screen(&mut app);
    assert!(s.contains("[reconnecting since 12s (2 feeds; :events)]"), "{}", s.lines().next().unwrap_or(""));
    // A clock tick moves the age on, and the header is redrawn for it.
    assert!(app.apply([Delta::Clock(now + 3_000)]), "a new second is a change worth a frame");
    let s = screen(&mut app);
    assert!(s.contains("[reconnecting since 15s (2 feeds; :events)]"), "{}", s.lines().next().unwrap_or(""));
    app.apply([Delta::Feed { source: "pods".into(), state: FeedState::Live }]);
    app.apply([Delta::Feed {
        source: "nodes".into(),
        state: FeedState::Stale { since: now - 1_000, reason: "forbidden".into() },
    }]);
    let s = screen(&mut app);
    assert!(s.contains("[nodes stale since 4s]"), "{}", s.lines().next().unwrap_or(""));
}

#[test]
fn the_nodes_on_screen_are_told_to_the_agent_streams_when_they_change() {
    let mut rig = Rig::new(5);
    let told: Arc<Mutex<Vec<std::collections::BTreeSet<String>>>> = Arc::default();
    let t = told.clone();
    rig.app.on_view_nodes(move |n| t.lock().expect("lock").push(n.clone()));
    let first = told.lock().expect("lock").last().cloned().expect("told at once");
    // The fleet view at 48 nodes shows a window of them, not all.
    assert!(!first.is_empty() && first.len() < 48, "{} nodes", first.len());
    assert!(first.contains("h100-0000"), "{first:?}");
    send(&mut rig.app, ":node h100-0038<Enter>");
    assert_eq!(told.lock().expect("lock").last().cloned(), Some(["h100-0038".to_string()].into()));
    let n = told.lock().expect("lock").len();
    send(&mut rig.app, "j");
    assert_eq!(told.lock().expect("lock").len(), n, "moving inside the same node tells nothing new");
    send(&mut rig.app, ":tenants<Enter>");
    assert_eq!(told.lock().expect("lock").last().cloned(), Some(Default::default()), "no node rows, no streams");
}

#[test]
fn the_gpu_screen_shows_the_agents_processes_and_marks_pods_not_given_that_gpu() {
    let mut rig = Rig::new(5);
    // A whole GPU held by a pod, in the demo factory.
    let (gid, holder) = rig
        .app
        .fleet
        .gpus
        .iter()
        .find_map(|(gid, g)| {
            let p = rig.app.fleet.pod(*g.pods.first()?)?;
            Some((gid, rig.app.fleet.pod_display(p)))
        })
        .expect("a GPU held by a pod");
    let (uuid, node, index) = {
        let f = &rig.app.fleet;
        let g = f.gpu(gid).expect("gpu");
        (f.str_of(g.uuid).to_string(), f.str_of(f.node(g.node).expect("node").name).to_string(), g.index)
    };
    let proc = |pid: u32, pod: Option<&str>| crate::model::ProcSample {
        pid,
        mem_mib: Some(20_480),
        pod: pod.map(String::from),
        container: pod.map(|_| "main".to_string()),
        gpu_instance: None,
        sm_util: None,
    };
    let at = rig.app.fleet.now;
    rig.app.apply([Delta::Telemetry(vec![crate::model::TelemetrySample {
        processes: Some(vec![proc(4242, Some(&holder)), proc(5151, Some("research/sneaky-0")), proc(77, None)]),
        ..agent_sample(uuid, at)
    }])]);
    send(&mut rig.app, &format!(":gpu {node}/{index}<Enter>"));
    let s = screen(&mut rig.app);
    assert!(s.contains("PROCESSES (node agent"), "{s}");
    assert!(line_with(&s, "pid 4242").is_some_and(|l| l.contains(&holder) && !l.contains("not allocated")), "{s}");
    assert!(line_with(&s, "pid 5151").is_some_and(|l| l.contains("research/sneaky-0 ⚠ not allocated this GPU")), "{s}");
    assert!(line_with(&s, "pid 77").is_some_and(|l| l.contains("host process")), "{s}");
}

#[test]
fn a_utilisation_nobody_measured_shows_as_a_dash_not_zero() {
    let mut rig = Rig::new(5);
    // A whole GPU held by a pod and a MIG GPU with an allocated instance, in the demo factory.
    let pick = |mig: bool| {
        let f = &rig.app.fleet;
        f.gpu_ids()
            .find(|gid| {
                f.gpu(*gid).is_some_and(|g| {
                    g.mig_enabled == mig
                        && if mig { g.instances.iter().any(|i| i.pod.is_some()) } else { !g.pods.is_empty() }
                })
            })
            .expect("a GPU of that kind")
    };
    let (whole, mig) = (pick(false), pick(true));
    let at = rig.app.fleet.now;
    let unmeasured = |gid: crate::model::GpuId| {
        let f = &rig.app.fleet;
        let g = f.gpu(gid).expect("gpu");
        crate::model::TelemetrySample {
            gpu_uuid: f.str_of(g.uuid).to_string(),
            at,
            sample: crate::model::Sample::without_util(40, 321, 60),
            instances: g
                .instances
                .iter()
                .map(|i| crate::model::InstanceSample::new(f.str_of(i.uuid), None, 1024))
                .collect(),
            node_gpu: None,
            allocated: None,
            peers: None,
            processes: None,
        }
    };
    let batch = vec![unmeasured(whole), unmeasured(mig)];
    rig.app.apply([Delta::Telemetry(batch)]);
    let f = &rig.app.fleet;
    let util = |row: RowId| tables::cell(f, ViewKind::Gpus, row, "UTIL");
    assert_eq!(util(RowId::Gpu(whole)), ("—".to_string(), "ui.text.muted"), "a whole GPU without utilisation");
    assert_eq!(util(RowId::Gpu(mig)), ("—".to_string(), "ui.text.muted"), "a MIG GPU whose instances are unmeasured");
    let g = f.gpu(mig).expect("mig gpu");
    let held = g.instances.iter().position(|i| i.pod.is_some()).expect("an allocated instance");
    assert_eq!(util(RowId::Mig(mig, held as u8)).0, "—", "an allocated instance nobody measured");
    assert!(g.instances.iter().all(|i| i.util.is_none() && !i.idle_allocated));
    // The node's topology screen says the same, with the rest of the sample intact.
    let node = f.str_of(f.node(f.gpu(whole).expect("gpu").node).expect("node").name).to_string();
    send(&mut rig.app, &format!("/{node}<Enter><Enter>"));
    let s = screen(&mut rig.app);
    let line = line_with(&s, "321W").unwrap_or_else(|| panic!("the GPU line with its power: {s}"));
    assert!(line.contains("—") && !line.contains(" 0%"), "unknown utilisation is a dash: {line}");
}

#[test]
fn the_node_screen_says_how_old_its_telemetry_is_and_why() {
    let mut rig = Rig::new(5);
    let node = {
        let f = &rig.app.fleet;
        f.str_of(f.node(f.node_ids().next().expect("a node")).expect("node").name).to_string()
    };
    send(&mut rig.app, &format!("/{node}<Enter><Enter>"));
    let s = screen(&mut rig.app);
    let line = line_with(&s, "telemetry ").unwrap_or_else(|| panic!("a telemetry line: {s}"));
    assert!(line.contains(" ago") && !line.contains("stale"), "fresh: {line}");
    // Ten minutes without a sample, while the node's agent stream is down.
    let now = rig.app.fleet.now;
    rig.app.apply([
        Delta::Clock(now + 600_000),
        Delta::Feed {
            source: format!("agent {node}"),
            state: FeedState::Reconnecting { since: now + 540_000, reason: "connection refused".into() },
        },
    ]);
    let s = screen(&mut rig.app);
    let line = line_with(&s, "telemetry ").unwrap_or_else(|| panic!("a telemetry line: {s}"));
    assert!(line.contains("stale since 10m"), "{line}");
    assert!(line.contains("agent reconnecting since 60s"), "{line}");
    assert!(s.contains("(connection refused)"), "the reason, wrapped below: {s}");
    // The GPU lines of the tree mark their old numbers.
    assert!(s.lines().any(|l| l.contains("gpu0") && l.contains("%?")), "{s}");
}

#[test]
fn the_gpu_screen_shows_how_the_gpu_reaches_its_peers() {
    let mut rig = Rig::new(5);
    let (uuid, node, index) = {
        let f = &rig.app.fleet;
        let g = f.gpus.values().find(|g| !g.mig_enabled).expect("a whole GPU");
        (f.str_of(g.uuid).to_string(), f.str_of(f.node(g.node).expect("node").name).to_string(), g.index)
    };
    let peer = |peer: u8, nvlinks: u8, path: &str| crate::model::PeerSample { peer, nvlinks, path: path.into() };
    let at = rig.app.fleet.now;
    rig.app.apply([Delta::Telemetry(vec![crate::model::TelemetrySample {
        peers: Some(vec![peer(1, 18, "NODE"), peer(2, 18, "NODE"), peer(4, 0, "SYS"), peer(5, 0, "SYS")]),
        ..agent_sample(uuid, at)
    }])]);
    send(&mut rig.app, &format!(":gpu {node}/{index}<Enter>"));
    let s = screen(&mut rig.app);
    assert!(line_with(&s, "links  NV18 → gpu1,2 · SYS → gpu4,5").is_some(), "{s}");
}

// ------------------------------------------- numbers without node agents (issue 12, 1 and 3)

/// A cluster as the kube feed sees one without node agents or Prometheus: node `m1`, four
/// H100s announced by labels and sliced 3g.40gb + 2×1g.10gb each, whose device-plugin pods
/// hold 1g.10gb ×1, 1g.10gb ×2 and 3g.40gb ×1 (the API does not say which instances); node
/// `w1`, two whole GPUs the API binds by uuid (as DRA does), one pod on each; node `d1`, two
/// whole GPUs of the device plugin, one held by a pod the API does not say which.
fn agentless_app() -> App {
    use crate::mig::{self, GpuModel};
    use crate::model::*;
    let model = GpuModel::H100_80GB;
    let mut f = Fleet::new(Thresholds::default());
    f.apply(Delta::TenantUpsert(TenantSpec {
        name: "team-a".into(),
        namespaces: vec!["a".into()],
        source: "label".into(),
    }));
    let node = |name: &str, capacity: Vec<(String, i64)>, mig_config: &str| NodeSpec {
        name: name.into(),
        labels: vec![],
        ready: true,
        cordoned: false,
        cordoned_by: String::new(),
        gpu_model: Some(model),
        allocatable: capacity.clone(),
        capacity,
        mig_config: mig_config.into(),
        mig_state: MigConfigState::Success,
        mig_state_since: None,
        ready_since: None,
        created: 0,
    };
    let mig_res = vec![("nvidia.com/mig-3g.40gb".to_string(), 4), ("nvidia.com/mig-1g.10gb".to_string(), 8)];
    f.apply(Delta::NodeUpsert(node("m1", mig_res, "custom-3g.40gb-1g.10gbx2")));
    f.apply(Delta::NodeUpsert(node("w1", vec![("nvidia.com/gpu".into(), 2)], "all-disabled")));
    f.apply(Delta::NodeUpsert(node("d1", vec![("nvidia.com/gpu".into(), 2)], "all-disabled")));
    let p3 = mig::find_profile(model, "3g.40gb").expect("3g.40gb");
    let p1 = mig::find_profile(model, "1g.10gb").expect("1g.10gb");
    let placed = mig::plan(model, &[p3, p1, p1]).expect("3g + 2×1g fits");
    let gpu = |node: &str, index: u8, uuid: String, instances: Vec<MigInstanceSpec>| GpuSpec {
        uuid,
        node: node.into(),
        index,
        model,
        memory_mib: 81920,
        mig_enabled: !instances.is_empty(),
        instances,
    };
    for i in 0..4 {
        let uuid = format!("m1/gpu-{i}");
        let instances = placed
            .iter()
            .map(|p| MigInstanceSpec {
                placement: *p,
                uuid: format!("{uuid}/mig-{}-{}", mig::profile(model, p.profile).name, p.start),
            })
            .collect();
        f.apply(Delta::GpuUpsert(gpu("m1", i, uuid, instances)));
    }
    for i in 0..2 {
        f.apply(Delta::GpuUpsert(gpu("w1", i, format!("GPU-w1-{i}"), vec![])));
        f.apply(Delta::GpuUpsert(gpu("d1", i, format!("d1/gpu-{i}"), vec![])));
    }
    let pod = |name: &str, node: &str, gpus: u16, mig: &[(&str, u16)], bound: &[&str]| PodSpec {
        namespace: "a".into(),
        name: name.into(),
        node: Some(node.into()),
        phase: Phase::Running,
        created: 0,
        started: None,
        owner: Owner::ReplicaSet,
        owner_name: String::new(),
        app: "app".into(),
        empty_dir: false,
        gpus,
        gpus_renamed: false,
        mig: mig.iter().map(|(r, n)| (format!("nvidia.com/mig-{r}"), *n)).collect(),
        dra: vec![],
        claim_templates: Vec::new(),
        bound_gpus: bound.iter().map(|s| s.to_string()).collect(),
        bound_mig: vec![],
        deletion: None,
        container_waiting: None,
        restarts: Default::default(),
    };
    f.apply(Delta::PodUpsert(pod("asr-0", "m1", 0, &[("1g.10gb", 1)], &[])));
    f.apply(Delta::PodUpsert(pod("asr-1", "m1", 0, &[("1g.10gb", 2)], &[])));
    f.apply(Delta::PodUpsert(pod("big", "m1", 0, &[("3g.40gb", 1)], &[])));
    f.apply(Delta::PodUpsert(pod("train-0", "w1", 1, &[], &["GPU-w1-0"])));
    f.apply(Delta::PodUpsert(pod("train-1", "w1", 1, &[], &["GPU-w1-1"])));
    f.apply(Delta::PodUpsert(pod("notebook", "d1", 1, &[], &[])));
    f.apply(Delta::Synced);
    let keymap = Keymap::builtin("default").expect("the default keymap is builtin");
    let mut app = App::new(f, Ui::new("cluster test".into()), dark(), keymap, Box::new(Recorder(Arc::default())));
    app.resize(W, H);
    app
}

/// The text of one cell of the row of view `v` whose first cell is `name`.
/// The index of view `v`'s column `name`.
fn col(v: ViewKind, name: &str) -> usize {
    tables::columns(v).iter().position(|c| c.name == name).unwrap_or_else(|| panic!("{v:?} has no column {name}"))
}

fn cell_of(app: &App, v: ViewKind, name: &str, col: usize) -> String {
    let f = &app.fleet;
    let cols = tables::columns(v);
    let id = tables::ids(f, v).into_iter().find(|id| cols[0].cell_of(f, *id).0 == name);
    let id = id.unwrap_or_else(|| panic!("a {v:?} row named {name}"));
    cols[col].cell_of(f, id).0
}

fn pod_cell(app: &App, name: &str, col: usize) -> String {
    let f = &app.fleet;
    let id = f.pod_by_name("a", name).unwrap_or_else(|| panic!("pod a/{name}"));
    tables::columns(ViewKind::Pods)[col].cell_of(f, RowId::Pod(id)).0
}

/// Column `col` of GPU `index` of `node` (`instance` 0 for the GPU row, else its n-th
/// MIG instance row, from 1).
fn gpu_cell(app: &App, node: &str, index: u8, instance: u32, col: usize) -> String {
    let f = &app.fleet;
    let n = f.node(f.node_by_name(node).expect("node")).expect("node");
    let gid = n.gpus.iter().copied().find(|g| f.gpu(*g).is_some_and(|g| g.index == index)).expect("gpu");
    let row = match instance {
        0 => RowId::Gpu(gid),
        i => RowId::Mig(gid, (i - 1) as u8),
    };
    tables::columns(ViewKind::Gpus)[col].cell_of(f, row).0
}

#[test]
fn mig_instances_held_without_a_known_instance_are_held_on_every_screen() {
    let mut app = agentless_app();
    let header = screen(&mut app).lines().next().unwrap_or_default().to_string();
    // One answer: 4 instances held, on the header, the node, its GPUs, the pods, the tenant.
    assert!(header.contains("MIG 4/12"), "{header}");
    assert!(header.contains("alloc ≥62%"), "at least 2 of m1's 4 GPUs, both of w1's, 1 of d1's: {header}");
    assert_eq!(cell_of(&app, ViewKind::Fleet, "m1", 4), "≥2/4", "three 1g.10gb need two GPUs at least");
    assert_eq!(cell_of(&app, ViewKind::Fleet, "w1", 4), "2/2");
    assert_eq!(
        cell_of(&app, ViewKind::Tenants, "team-a", col(ViewKind::Tenants, "MIG")),
        "4",
        "the tenant's MIG instances"
    );
    assert_eq!(
        pod_cell(&app, "asr-1", col(ViewKind::Pods, "DEVICES")),
        "1g.10gb×2 held, instance unknown without an agent"
    );
    assert_eq!(
        pod_cell(&app, "big", col(ViewKind::Pods, "DEVICES")),
        "3g.40gb×1 held, instance unknown without an agent"
    );
    // No GPU is said to be free while an instance of its profile may be the one held.
    assert_eq!(gpu_cell(&app, "m1", 0, 0, 9), "0/3 in use, 3 unknown");
    let rows: Vec<String> = (1..=3).map(|i| gpu_cell(&app, "m1", 0, i, 9)).collect();
    assert!(rows.contains(&"unknown: node holds 3".to_string()), "the 1g.10gb rows: {rows:?}");
    assert!(rows.contains(&"unknown: node holds 1".to_string()), "the 3g.40gb row: {rows:?}");
    assert!(!rows.iter().any(|r| r == "free"), "{rows:?}");
    // Nor a whole GPU, while a device-plugin pod holds one of that node's, unnamed.
    assert_eq!(cell_of(&app, ViewKind::Fleet, "d1", 4), "1/2");
    for i in 0..2 {
        assert_eq!(gpu_cell(&app, "d1", i, 0, 9), "unknown: node holds 1", "d1 gpu{i}");
    }
}

#[test]
fn without_telemetry_every_aggregate_says_unknown_and_a_partial_one_says_of_how_many() {
    let mut app = agentless_app();
    let header = screen(&mut app).lines().next().unwrap_or_default().to_string();
    assert!(header.contains("busy — "), "no source measures any GPU: {header}");
    assert!(header.contains("idle-alloc — "), "{header}");
    assert_eq!(cell_of(&app, ViewKind::Tenants, "team-a", col(ViewKind::Tenants, "BUSY")), "—", "BUSY");
    assert_eq!(cell_of(&app, ViewKind::Tenants, "team-a", col(ViewKind::Tenants, "IDLE")), "—", "IDLE");
    assert_eq!(cell_of(&app, ViewKind::Tenants, "team-a", col(ViewKind::Tenants, "BUSY%")), "—", "BUSY%");
    for node in ["m1", "w1"] {
        assert_eq!(cell_of(&app, ViewKind::Fleet, node, 6), "—", "{node} UTIL");
        assert_eq!(cell_of(&app, ViewKind::Fleet, node, 10), "—", "{node} IDLE");
    }
    assert_eq!(pod_cell(&app, "asr-0", col(ViewKind::Pods, "UTIL")), "—", "a pod holding an instance nobody measures");
    assert_eq!(pod_cell(&app, "train-0", col(ViewKind::Pods, "UTIL")), "—");
    // A source measures one of w1's GPUs: figures over that one, and they say so.
    let at = app.fleet.now;
    app.apply([Delta::Telemetry(vec![crate::model::TelemetrySample {
        sample: crate::model::Sample::new(90, 40, 300, 60),
        ..agent_sample("GPU-w1-0".into(), at)
    }])]);
    let header = screen(&mut app).lines().next().unwrap_or_default().to_string();
    assert!(header.contains("busy 100% of 1 measured"), "{header}");
    assert!(header.contains("idle-alloc 0 of 1 measured"), "{header}");
    assert_eq!(cell_of(&app, ViewKind::Tenants, "team-a", col(ViewKind::Tenants, "BUSY")), "1", "BUSY");
    assert_eq!(cell_of(&app, ViewKind::Tenants, "team-a", col(ViewKind::Tenants, "BUSY%")), "100% of 1", "BUSY%");
    assert_eq!(cell_of(&app, ViewKind::Fleet, "w1", 6), "90% of 1", "UTIL");
    assert_eq!(cell_of(&app, ViewKind::Fleet, "w1", 7), "40% of 1", "MEM");
    assert_eq!(cell_of(&app, ViewKind::Fleet, "w1", 8), "300W of 1", "POWER");
    assert_eq!(pod_cell(&app, "train-0", col(ViewKind::Pods, "UTIL")), "90%");
}

#[test]
fn a_one_gpu_reslice_moves_the_pods_that_may_hold_its_instances_when_nobody_says_which() {
    // m1's pods hold 1g.10gb ×3 and 3g.40gb ×1 on four GPUs; nobody says which. Reslicing
    // GPU 2 alone must treat all of them as possibly there, or mig-manager would destroy an
    // instance in use.
    let app = agentless_app();
    let req = crate::ops::OpRequest::Reslice { node: "m1".into(), gpus: vec![2], layout: "all-1g.10gb".into() };
    let plan = crate::ops::plan(&app.fleet, &req).expect("a plan");
    let PlanDetail::Reslice(r) = &plan.detail else { panic!("a reslice plan") };
    let mut evicted: Vec<&str> = r.pods.iter().map(|p| p.name.as_str()).collect();
    evicted.sort();
    assert_eq!(evicted, ["asr-0", "asr-1", "big"], "{:?}", plan.effects);
    assert!(
        plan.warnings.iter().any(|w| w.contains("may be on GPU 2") && w.contains("a node agent would say which")),
        "{:?}",
        plan.warnings
    );
}

// ---------- App by responsibility: modes, the command table, tabs ----------

#[test]
fn each_state_has_its_key_mode() {
    use crate::ui::app::KeyMode;
    let mut app = app_at(5);
    assert_eq!(app.key_mode(), KeyMode::Table);
    send(&mut app, "/");
    assert_eq!(app.key_mode(), KeyMode::Filter);
    send(&mut app, "<Esc>:");
    assert_eq!(app.key_mode(), KeyMode::CommandLine);
    send(&mut app, "<Esc>?");
    assert_eq!(app.key_mode(), KeyMode::Help);
    send(&mut app, "<Esc>/h100-0000<Enter>c");
    assert_eq!(app.key_mode(), KeyMode::Preview);
    send(&mut app, "n:quotas<Enter>e");
    assert_eq!(app.key_mode(), KeyMode::Editor);
    // In the editor, letters type; they do not run the keymap's commands.
    send(&mut app, "q");
    assert_eq!(app.key_mode(), KeyMode::Editor);
    assert!(!app.ui.exit.quit);
    send(&mut app, "<Esc>");
    assert_eq!(app.key_mode(), KeyMode::Table);
}

#[test]
fn the_command_line_runs_what_the_command_table_names() {
    let mut app = app_at(5);
    send(&mut app, ":help<Enter>");
    assert!(app.ui.help);
    send(&mut app, "<Esc>:Q<Enter>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Quotas), ":Q is the quotas alias, not quit");
    send(&mut app, ":node h100-0000<Enter>");
    assert!(matches!(app.ui.screen(), Screen::Node(_)), "{:?}", app.ui.screen());
    send(&mut app, ":gpus h100<Enter>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Gpus));
    assert_eq!(app.ui.table(ViewKind::Gpus).filter, "h100");
    send(&mut app, ":ctx<Enter>");
    assert!(message(&app).starts_with("this cockpit runs on the embedded demo"), "{}", message(&app));
    // Key commands without a `:` name are not typable.
    send(&mut app, ":drain<Enter>");
    assert!(message(&app).starts_with("unknown command \"drain\""), "{}", message(&app));
    send(&mut app, ":q<Enter>");
    assert!(app.ui.exit.quit);
}

#[test]
fn every_tab_click_opens_the_tab_drawn_under_it() {
    let mut app = app_at(5);
    let s = screen(&mut app);
    let tabs: Vec<char> = s.lines().nth(1).expect("the tab line").chars().collect();
    for v in ViewKind::ALL {
        let title = format!("{} {}", v.tab_key(), v.title());
        let line: String = tabs.iter().collect();
        let start = line.find(&title).map(|b| line[..b].chars().count()).expect("the tab is drawn");
        // Anywhere on the title, and on the padding either side of it.
        for col in [start - 1, start, start + title.chars().count()] {
            app.open_view(ViewKind::Fleet);
            app.handle_mouse(MouseEvent {
                kind: MouseEventKind::Down(MouseButton::Left),
                column: col as u16,
                row: 1,
                modifiers: KeyModifiers::NONE,
            });
            assert_eq!(app.ui.screen(), Screen::Table(v), "column {col} of {title}");
        }
    }
}

// Columns by the terminal's width (issue 13 item 1).

/// The column header line of a table view's screen.
fn header_line(s: &str) -> String {
    s.lines().nth(3).unwrap_or_default().to_string()
}

#[test]
fn at_80_columns_the_fleet_and_tenants_keep_what_on_call_needs() {
    let (_, mut app) = demo_app(SEED, 20, dark());
    let s = to_text(&render_app(&mut app, 80, 24));
    let header = header_line(&s);
    for name in ["NAME", "STATUS", "ALLOC", "IDLE", "ALERTS"] {
        assert!(header.contains(name), "fleet at 80 columns lacks {name}: {header}");
    }
    // The alerts of the NotReady node are on screen, not past the right edge.
    assert!(s.contains("NotReady"), "{s}");
    send(&mut app, ":tenants<Enter>");
    let header = header_line(&to_text(&render_app(&mut app, 80, 24)));
    for name in ["TENANT", "BUSY", "IDLE", "STATUS"] {
        assert!(header.contains(name), "tenants at 80 columns lacks {name}: {header}");
    }
}

#[test]
fn at_200_columns_names_are_not_cut() {
    let (_, mut app) = demo_app(SEED, 20, dark());
    let checks = [
        (ViewKind::Fleet, "NAME"),
        (ViewKind::Gpus, "NODE"),
        (ViewKind::Tenants, "TENANT"),
        (ViewKind::Quotas, "SOURCE"),
        (ViewKind::Quotas, "RESOURCE"),
        (ViewKind::Pods, "NAME"),
        (ViewKind::Pods, "NODE"),
    ];
    let mut longest = 0;
    for (v, col) in checks {
        app.open_view(v);
        let s = to_text(&render_app(&mut app, 200, 40));
        let lines: Vec<&str> = s.lines().collect();
        for (i, id) in app.ui.rows(v).iter().take(20).enumerate() {
            let cell = tables::cell(&app.fleet, v, *id, col).0;
            longest = longest.max(cell.chars().count());
            assert!(lines[4 + i].contains(&cell), "{} {col} {cell:?} is cut: {}", v.name(), lines[4 + i]);
        }
    }
    assert!(longest > 28, "some name is longer than its column's width, or this checks nothing");
}

#[test]
fn wide_shows_every_column_and_toggles_back() {
    let (_, mut app) = demo_app(SEED, 20, dark());
    for v in [ViewKind::Fleet, ViewKind::Gpus, ViewKind::Tenants, ViewKind::Pods] {
        app.open_view(v);
        app.ui.wide = false;
        // Columns are sized to what is on screen, so 100 columns may fit a whole view now.
        let narrow = header_line(&to_text(&render_app(&mut app, 80, 30)));
        let missing = |h: &str| -> Vec<&str> {
            tables::columns(v)
                .iter()
                .map(|c| c.name)
                .filter(|n| !h.split_whitespace().any(|w| w.trim_matches(['│', '↑', '↓']) == *n))
                .collect()
        };
        assert!(!missing(&narrow).is_empty(), "{} at 80 columns drops some: {narrow}", v.name());
        send(&mut app, "W");
        assert!(app.ui.wide);
        let wide = header_line(&to_text(&render_app(&mut app, 140, 30)));
        assert_eq!(missing(&wide), Vec::<&str>::new(), "{} wide: {wide}", v.name());
        send(&mut app, "W");
        assert!(!app.ui.wide);
    }
    // Wide on a narrow screen: every column of the fleet still fits, each at its narrowest.
    app.open_view(ViewKind::Fleet);
    send(&mut app, "W");
    let wide = header_line(&to_text(&render_app(&mut app, 100, 30)));
    for c in tables::columns(ViewKind::Fleet) {
        assert!(wide.contains(c.name), "{} missing: {wide}", c.name);
    }
}

/// The order the table had before typed values: each row's cell text, its leading digits
/// for number columns, else the text in lower case; ties by row.
fn order_by_text(f: &Fleet, v: ViewKind, col: &str) -> Vec<RowId> {
    #[derive(PartialEq, Eq, PartialOrd, Ord)]
    enum Key {
        Num(i64),
        Str(String),
    }
    let c = tables::columns(v).iter().find(|c| c.name == col).expect("the column");
    let numeric = c.align == crate::ui::views::column::Align::Right || (v == ViewKind::Gpus && col == "MEM");
    let mut keyed: Vec<(Key, RowId)> = tables::ids(f, v)
        .into_iter()
        .map(|id| {
            let s = c.cell_of(f, id).0;
            let digits: String = s
                .trim_start()
                .trim_start_matches('≥')
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '-')
                .collect();
            match digits.parse::<i64>() {
                Ok(n) if numeric => (Key::Num(n), id),
                _ => (Key::Str(s.to_lowercase()), id),
            }
        })
        .collect();
    keyed.sort();
    keyed.into_iter().map(|(_, id)| id).collect()
}

#[test]
fn sorting_by_typed_values_keeps_the_order_the_text_gave() {
    let (_, app) = demo_app(SEED, 20, dark());
    let f = &app.fleet;
    let cases = [
        (ViewKind::Fleet, "NAME"),
        (ViewKind::Fleet, "STATUS"),
        (ViewKind::Fleet, "UTIL"),
        (ViewKind::Fleet, "POWER"),
        (ViewKind::Fleet, "IDLE"),
        (ViewKind::Gpus, "NODE"),
        (ViewKind::Gpus, "UTIL"),
        (ViewKind::Gpus, "MEM"),
        (ViewKind::Tenants, "TENANT"),
        (ViewKind::Tenants, "BUSY%"),
        (ViewKind::Pods, "NAME"),
        (ViewKind::Pods, "UTIL"),
        (ViewKind::Pods, "PHASE"),
    ];
    for (v, col) in cases {
        let typed: Vec<RowId> =
            tables::rows(f, v, "", Some(col), false).into_iter().filter(|r| !r.is_child()).collect();
        assert_eq!(typed, order_by_text(f, v, col), "{} by {col}", v.name());
        assert!(
            tables::columns(v)
                .iter()
                .any(|c| c.name == col && c.live == matches!(col, "UTIL" | "POWER" | "IDLE" | "MEM" | "BUSY%"))
        );
    }
}

// ------------------------------------------------------------- ComputeDomains (domains view)

/// A ComputeDomain of `nodes` (name, IMEX status, clique), created a minute before `now`.
fn compute_domain(
    ns: &str,
    name: &str,
    num_nodes: u32,
    status: &str,
    nodes: &[(&str, &str, &str)],
    now: crate::model::Ts,
) -> Delta {
    use crate::model::{ComputeDomainSpec, DomainNode};
    Delta::DomainUpsert(ComputeDomainSpec {
        namespace: ns.into(),
        name: name.into(),
        num_nodes,
        status: status.into(),
        nodes: nodes
            .iter()
            .map(|(n, s, c)| DomainNode { name: n.to_string(), status: s.to_string(), clique: c.to_string() })
            .collect(),
        claim_template: if status.is_empty() { String::new() } else { format!("{name}-channel") },
        created: now.saturating_sub(60_000),
    })
}

/// The demo fleet with a tenant `team-imex` (namespace `imex`) and three domains on the demo's
/// first nodes: `imex/train-a` Ready 2/2; `imex/train-b` NotReady 2/4 (its second node's IMEX
/// daemon is not Ready); `lab/warmup`, whose controller has not written a status yet.
/// Returns the app and the names of the nodes used.
fn domains_app() -> (App, Vec<String>) {
    use crate::model::{Owner, Phase, PodSpec};
    let (_, mut f) = demo_fleet(SEED, 48, 5, Thresholds::default());
    let names: Vec<String> =
        f.node_ids().filter_map(|n| f.node(n)).map(|n| f.str_of(n.name).to_string()).take(5).collect();
    let n = |i: usize| names[i].as_str();
    let now = f.now;
    f.apply(Delta::TenantUpsert(crate::model::TenantSpec {
        name: "team-imex".into(),
        namespaces: vec!["imex".into()],
        source: "label".into(),
    }));
    f.apply(compute_domain("imex", "train-a", 2, "Ready", &[(n(0), "Ready", "c1.0"), (n(1), "Ready", "c1.0")], now));
    f.apply(compute_domain(
        "imex",
        "train-b",
        4,
        "NotReady",
        &[(n(2), "Ready", "c1.1"), (n(3), "NotReady", "c1.2"), (n(4), "Ready", "c1.1")],
        now,
    ));
    f.apply(compute_domain("lab", "warmup", 3, "", &[], now));
    // train-a's workers, one per node, and train-b's: one waits on the node not Ready.
    for (name, app, node, phase) in [
        ("train-a-1", "train-a", n(1), Phase::Running),
        ("train-a-0", "train-a", n(0), Phase::Running),
        ("train-b-0", "train-b", n(2), Phase::Running),
        ("train-b-1", "train-b", n(3), Phase::Pending),
        ("done", "train-b", n(4), Phase::Succeeded),
    ] {
        f.apply(Delta::PodUpsert(PodSpec {
            namespace: "imex".into(),
            name: name.into(),
            node: Some(node.into()),
            phase,
            created: now.saturating_sub(30_000),
            started: None,
            owner: Owner::StatefulSet,
            owner_name: String::new(),
            app: app.into(),
            empty_dir: false,
            gpus: 0,
            gpus_renamed: false,
            mig: vec![],
            dra: vec![],
            claim_templates: vec![format!("{app}-channel")],
            bound_gpus: vec![],
            bound_mig: vec![],
            deletion: None,
            container_waiting: None,
            restarts: Default::default(),
        }));
    }
    let keymap = Keymap::builtin("default").expect("the default keymap is builtin");
    let mut app = App::new(f, Ui::new("domains test".into()), dark(), keymap, Box::new(Recorder(Arc::default())));
    app.resize(W, H);
    (app, names)
}

#[test]
fn the_domains_view_shows_ready_and_not_ready_domains_with_their_nodes() {
    let (mut app, names) = domains_app();
    send(&mut app, ":domains<Enter>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Domains));
    let s = screen(&mut app);
    assert!(s.contains(" Domains [3/3]"), "{s}");
    let header = line_with(&s, "DOMAIN↑").unwrap_or_else(|| panic!("a header sorted by DOMAIN: {s}"));
    for col in ["TENANT", "STATUS", "NODES", "PODS", "WORKLOADS", "CLIQUES", "CLAIM TEMPLATE", "NOT READY", "AGE"] {
        assert!(header.contains(col), "{col} at 140 columns: {header}");
    }
    let a = line_with(&s, "imex/train-a").unwrap_or_else(|| panic!("train-a: {s}"));
    for want in ["team-imex", " Ready ", "2/2", " 2/2 train-a ", "c1.0", "train-a-channel", " 60s"] {
        assert!(a.contains(want), "train-a lacks {want:?}: {a}");
    }
    assert!(!a.contains(&names[0]), "a Ready domain names no node: {a}");
    let b = line_with(&s, "imex/train-b").unwrap_or_else(|| panic!("train-b: {s}"));
    // One of its two workers runs: `running/pods`.
    for want in ["team-imex", "NotReady", "2/4", " 1/2 train-b ", "c1.1,c1.2", names[3].as_str()] {
        assert!(b.contains(want), "train-b lacks {want:?}: {b}");
    }
    for ready in [&names[2], &names[4]] {
        assert!(!b.contains(ready.as_str()), "{ready} is Ready, not holding train-b back: {b}");
    }
    let c = line_with(&s, "lab/warmup").unwrap_or_else(|| panic!("warmup: {s}"));
    assert!(c.contains("starting") && c.contains("0/3"), "{c}");
    // The cells and their colours.
    let d = ViewKind::Domains;
    assert_eq!(cell_of(&app, d, "imex/train-b", 1), "team-imex");
    assert_eq!(cell_of(&app, d, "lab/warmup", 1), "-", "no tenant owns namespace lab");
    assert_eq!(cell_of(&app, d, "imex/train-b", 8), names[3]);
    assert_eq!(cell_of(&app, d, "lab/warmup", 6), "-", "no cliques yet");
    // Its workload: the pods of its channel template that have not finished.
    assert_eq!(
        (cell_of(&app, d, "imex/train-b", 4), cell_of(&app, d, "imex/train-b", 5)),
        ("1/2".into(), "train-b".into())
    );
    assert_eq!((cell_of(&app, d, "lab/warmup", 4), cell_of(&app, d, "lab/warmup", 5)), ("0/0".into(), "-".into()));
    let id = |key: &str| crate::ui::views::domains::row_id(key);
    assert_eq!(tables::cell(&app.fleet, d, id("imex/train-a"), "STATUS").1, "status.ready");
    assert_eq!(tables::cell(&app.fleet, d, id("imex/train-b"), "STATUS").1, "status.notready");
    assert_eq!(tables::cell(&app.fleet, d, id("lab/warmup"), "STATUS"), ("starting".to_string(), "ui.text.muted"));
    // The filter reads the node that holds a domain back.
    send(&mut app, &format!("/{}<Enter>", names[3]));
    assert_eq!(app.ui.rows(d), [id("imex/train-b")]);
}

#[test]
fn a_domain_row_keeps_its_selection_and_opens_the_node_that_holds_it_back() {
    let (mut app, names) = domains_app();
    send(&mut app, "8j");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Domains), "8 opens the domains view");
    let b = crate::ui::views::domains::row_id("imex/train-b");
    assert_eq!(app.ui.selected_id(ViewKind::Domains), Some(b));
    // A domain sorted before it appears: the selection stays on train-b.
    let now = app.fleet.now;
    app.apply(vec![compute_domain("imex", "aaa", 1, "Ready", &[(names[0].as_str(), "Ready", "c1.0")], now)]);
    app.prepare();
    assert_eq!(app.ui.rows(ViewKind::Domains).len(), 4);
    assert_eq!(app.ui.selected_id(ViewKind::Domains), Some(b));
    send(&mut app, "<Enter>");
    let want = app.fleet.node_by_name(&names[3]).expect("the NotReady node");
    assert_eq!(app.ui.screen(), Screen::Node(want), "Enter opens the node that is not Ready");
    // A domain without nodes says so.
    send(&mut app, "<Esc>G<Enter>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Domains));
    assert!(message(&app).contains("lab/warmup lists no nodes yet"), "{}", message(&app));
}

#[test]
fn the_domains_view_is_reachable_by_its_commands_keys_and_tab() {
    let (mut app, _) = domains_app();
    for keys in [":domains<Enter>", ":cd<Enter>", ":ComputeDomains<Enter>", "8"] {
        app.open_view(ViewKind::Fleet);
        send(&mut app, keys);
        assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Domains), "{keys}");
    }
    assert_eq!(Command::from_alias("domains", false), Some(Command::ViewDomains));
    assert_eq!(Command::ViewDomains.view(), Some(ViewKind::Domains));
    // `:domains TEXT` opens it filtered.
    send(&mut app, ":domains train<Enter>");
    assert_eq!(app.ui.table(ViewKind::Domains).filter, "train");
    assert_eq!(app.ui.rows(ViewKind::Domains).len(), 2);
    // The last tab, after the operations; the tab row and help show it.
    app.open_view(ViewKind::Ops);
    send(&mut app, "<Tab>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Domains));
    let s = screen(&mut app);
    assert!(s.lines().nth(1).is_some_and(|l| l.contains("7 Operations │ 8 Domains")), "{s}");
    let km = Keymap::builtin("k9s").expect("k9s");
    assert_eq!(km.hint(Mode::Normal, Command::ViewDomains).as_deref(), Some("8"));
}

#[test]
fn a_domain_snapshot_row_is_typed() {
    let (app, names) = domains_app();
    let f = &app.fleet;
    let doc = crate::ui::json::snapshot(f, ViewKind::Domains, "");
    assert_eq!(doc["view"], "domains");
    let rows = doc["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 3);
    let created = f.now - 60_000;
    assert_eq!(
        rows[1],
        serde_json::json!({
            "domain": "imex/train-b",
            "namespace": "imex",
            "name": "train-b",
            "tenant": "team-imex",
            "status": "NotReady",
            "num_nodes": 4,
            "nodes_ready": 2,
            "nodes": [
                { "name": names[2], "status": "Ready", "clique": "c1.1" },
                { "name": names[3], "status": "NotReady", "clique": "c1.2" },
                { "name": names[4], "status": "Ready", "clique": "c1.1" },
            ],
            "claim_template": "train-b-channel",
            "pods": [
                { "name": "train-b-0", "node": names[2], "phase": "Running", "waiting": null },
                { "name": "train-b-1", "node": names[3], "phase": "Pending", "waiting": "starting" },
            ],
            "workloads": ["train-b"],
            "created_ms": created,
            "age_s": 60,
        })
    );
    // Before the controller writes a status: null status, no tenant, no template, no nodes.
    let w = &rows[2];
    assert_eq!(w["domain"], "lab/warmup");
    assert!(w["status"].is_null() && w["tenant"].is_null() && w["claim_template"].is_null(), "{w}");
    assert_eq!((w["num_nodes"].as_u64(), w["nodes_ready"].as_u64()), (Some(3), Some(0)));
    assert_eq!(w["nodes"], serde_json::json!([]));
    // Filtered as the table is.
    let doc = crate::ui::json::snapshot(f, ViewKind::Domains, &names[3]);
    assert_eq!(doc["rows"].as_array().map(Vec::len), Some(1));
}

#[test]
fn a_time_sliced_mig_instance_says_so() {
    use crate::model::*;
    let mut app = agentless_app();
    // GFD's labels for sharing on top of MIG: the 1g.10gb instances are time-sliced ×4.
    let id = app.fleet.node_by_name("m1").expect("m1");
    let n = app.fleet.node(id).expect("m1");
    let spec = NodeSpec {
        name: "m1".into(),
        labels: vec![
            ("nvidia.com/mig-1g.10gb.replicas".into(), "4".into()),
            ("nvidia.com/mig-1g.10gb.sharing-strategy".into(), "time-slicing".into()),
        ],
        ready: true,
        cordoned: false,
        cordoned_by: String::new(),
        gpu_model: n.gpu_model,
        capacity: n.capacity.iter().map(|(k, v)| (app.fleet.str_of(*k).to_string(), *v)).collect(),
        allocatable: n.allocatable.iter().map(|(k, v)| (app.fleet.str_of(*k).to_string(), *v)).collect(),
        mig_config: app.fleet.str_of(n.mig_config).to_string(),
        mig_state: MigConfigState::Success,
        mig_state_since: None,
        ready_since: None,
        created: 0,
    };
    app.apply([Delta::NodeUpsert(spec)]);
    let modes: Vec<String> = (1..=3).map(|i| gpu_cell(&app, "m1", 0, i, 3)).collect();
    assert!(modes.contains(&"TS×4".to_string()), "the 1g.10gb rows: {modes:?}");
    assert!(modes.contains(&"mig".to_string()), "the 3g.40gb row is not shared: {modes:?}");
}

#[test]
fn a_pod_on_a_shared_gpu_shows_how_busy_its_own_processes_keep_it() {
    use crate::model::*;
    let mut f = Fleet::new(Thresholds::default());
    f.apply(Delta::TenantUpsert(TenantSpec {
        name: "team-a".into(),
        namespaces: vec!["a".into()],
        source: "label".into(),
    }));
    let labels = [
        ("nvidia.com/gpu.count", "1"),
        ("nvidia.com/gpu.replicas", "4"),
        ("nvidia.com/gpu.sharing-strategy", "time-slicing"),
    ];
    f.apply(Delta::NodeUpsert(NodeSpec {
        name: "ts".into(),
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ready: true,
        cordoned: false,
        cordoned_by: String::new(),
        gpu_model: Some(crate::mig::GpuModel::H100_80GB),
        capacity: vec![("nvidia.com/gpu".into(), 4)],
        allocatable: vec![("nvidia.com/gpu".into(), 4)],
        mig_config: "all-disabled".into(),
        mig_state: MigConfigState::Success,
        mig_state_since: None,
        ready_since: None,
        created: 0,
    }));
    f.apply(Delta::GpuUpsert(GpuSpec {
        uuid: "GPU-ts".into(),
        node: "ts".into(),
        index: 0,
        model: crate::mig::GpuModel::H100_80GB,
        memory_mib: 81920,
        mig_enabled: false,
        instances: vec![],
    }));
    for name in ["busy", "light"] {
        f.apply(Delta::PodUpsert(PodSpec {
            namespace: "a".into(),
            name: name.into(),
            node: Some("ts".into()),
            phase: Phase::Running,
            created: 0,
            started: None,
            owner: Owner::ReplicaSet,
            owner_name: String::new(),
            app: name.into(),
            empty_dir: false,
            gpus: 1,
            gpus_renamed: false,
            mig: vec![],
            dra: vec![],
            claim_templates: Vec::new(),
            bound_gpus: vec!["GPU-ts".into()],
            bound_mig: vec![],
            deletion: None,
            container_waiting: None,
            restarts: Default::default(),
        }));
    }
    let proc = |pid: u32, pod: &str, sm: Option<u8>| ProcSample {
        pid,
        mem_mib: Some(1024),
        pod: Some(pod.into()),
        container: None,
        gpu_instance: None,
        sm_util: sm,
    };
    let at = f.now;
    f.apply(Delta::Telemetry(vec![TelemetrySample {
        processes: Some(vec![proc(1, "a/busy", Some(70)), proc(2, "a/busy", Some(10)), proc(3, "a/light", Some(12))]),
        ..agent_sample("GPU-ts".into(), at)
    }]));
    let app = App::new(
        f,
        Ui::new("t".into()),
        Theme::no_color(),
        Keymap::builtin("default").expect("keymap"),
        Box::new(crate::ui::Recorder::default()),
    );
    // Each pod: its own processes' SM share, not the GPU's 50 %.
    let util = |name: &str| {
        let f = &app.fleet;
        let p = f.pod(f.pod_by_name("a", name).expect("pod")).expect("pod");
        crate::ui::views::pods::pod_util(f, p).and_then(|(u, _)| u)
    };
    assert_eq!((util("busy"), util("light")), (Some(80), Some(12)));
    let cell = gpu_cell(&app, "ts", 0, 0, 9);
    assert!(cell.starts_with("4 shares: 2 held (80% 12%)"), "{cell}");
    // `light` stops computing (its process stays): after the idle window its share is idle,
    // while the GPU, kept busy by `busy`, is not.
    let mut app = app;
    let window = app.fleet.thresholds.idle_window_ms;
    for t in [at + 1_000, at + 1_000 + window] {
        app.fleet.apply(Delta::Telemetry(vec![TelemetrySample {
            processes: Some(vec![proc(1, "a/busy", Some(70)), proc(3, "a/light", Some(0))]),
            ..agent_sample("GPU-ts".into(), t)
        }]));
    }
    let cell = gpu_cell(&app, "ts", 0, 0, 9);
    assert!(cell.starts_with("4 shares: 2 held, 1 idle (70% 0%)"), "{cell}");
    let idle = |name: &str| {
        let f = &app.fleet;
        let p = f.pod(f.pod_by_name("a", name).expect("pod")).expect("pod");
        crate::ui::views::pods::pod_util(f, p).map(|(_, idle)| idle)
    };
    assert_eq!((idle("busy"), idle("light")), (Some(false), Some(true)));
    assert_eq!(app.fleet.totals.shares_idle, 1);
}

#[test]
fn share_hours_are_cut_to_tenths_not_rounded_up() {
    use crate::ui::views::tenants::share_hours;
    assert_eq!(share_hours(0), "0.0");
    assert_eq!(share_hours(359), "0.0");
    assert_eq!(share_hours(360), "0.1");
    assert_eq!(share_hours(12 * 3600 + 1_100), "12.3");
    assert_eq!(share_hours(3599), "0.9");
}

#[test]
fn a_pending_pod_says_why_it_waits_and_its_tenant_rolls_it_up() {
    use crate::model::{EventSpec, Severity};
    let (mut app, _) = domains_app();
    let now = app.fleet.now;
    let stuck = unscheduled_job_pod("imex", "train-c-0", "train-c", 8, now);
    app.apply(vec![
        Delta::PodUpsert(stuck),
        Delta::Event(EventSpec {
            ts: now,
            severity: Severity::Warning,
            reason: "FailedScheduling".into(),
            object: "pod/imex/train-c-0".into(),
            message: "0/48 nodes are available: 40 Insufficient nvidia.com/gpu, 8 node(s) didn't match Pod's node \
                      affinity/selector. no new claims to deallocate, preemption: 0/48 nodes are available: 48 \
                      Preemption is not helpful for scheduling."
                .into(),
        }),
    ]);
    // A Deployment's ReplicaSet a quota refuses: its pods never exist.
    app.apply(vec![Delta::Event(EventSpec {
        ts: now,
        severity: Severity::Warning,
        reason: "FailedCreate".into(),
        object: "replicaset/imex/web-7d9f".into(),
        message: "Error creating: pods \"web-7d9f-x\" is forbidden: exceeded quota: gpu-quota, requested: \
                  requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8"
            .into(),
    })]);
    app.prepare();
    let waiting = tables::columns(ViewKind::Pods).iter().position(|c| c.name == "WAITING").expect("WAITING");
    let id = app.fleet.pod_by_name("imex", "train-c-0").expect("the pod");
    let cell = tables::columns(ViewKind::Pods)[waiting].cell_of(&app.fleet, RowId::Pod(id));
    assert_eq!(
        cell,
        (
            "no node of 48: 40 not enough free nvidia.com/gpu, 8 not matching its node selector/affinity".into(),
            "status.pending"
        )
    );
    // Enter on the tenant: its pods, and why the pending ones wait.
    send(&mut app, ":tenants team-imex<Enter><Enter>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Pods));
    assert_eq!(
        message(&app),
        "pods of tenant team-imex — 2 pending: 1 not enough free nvidia.com/gpu, 1 starting; replicaset/imex/web-7d9f: \
         refused by quota gpu-quota: requested requests.nvidia.com/gpu=1, used requests.nvidia.com/gpu=8, limited \
         requests.nvidia.com/gpu=8; isolation: no default-deny NetworkPolicy in imex; no Pod Security label in imex; \
         Esc clears the filter"
    );
    // Pod Security enforced there (the namespace's label): no longer said.
    app.apply(vec![Delta::PodSecurity { namespace: "imex".into(), enforce: Some("baseline".into()) }]);
    send(&mut app, "<Esc>:tenants team-imex<Enter><Enter>");
    assert!(!message(&app).contains("Pod Security"), "{}", message(&app));
    // Enter on the pod that has no node says why instead.
    send(&mut app, "<Esc>/train-c<Enter><Enter>");
    let s = screen(&mut app);
    assert!(
        message(&app).starts_with("not scheduled on a node yet: no node of 48: 40 not enough"),
        "{}\n{s}",
        message(&app)
    );
}

#[test]
fn y_reads_the_selected_object_through_the_inspector_and_the_pane_scrolls_its_answer() {
    use crate::model::{InspectDoc, InspectEvent, InspectTarget, Inspected};
    use std::sync::{Arc, Mutex};
    // The demo has no API server: the pane says so.
    let mut app = app_at(5);
    send(&mut app, "5y");
    assert_eq!(app.ui.screen(), crate::ui::state::Screen::Inspect);
    let s = screen(&mut app);
    assert!(s.contains("has no API server"), "{s}");
    send(&mut app, "<Esc>");
    assert_eq!(app.ui.screen(), crate::ui::state::Screen::Table(ViewKind::Pods));

    // With an inspector: the selected pod is asked for, and its answer is shown.
    let asked: Arc<Mutex<Vec<InspectTarget>>> = Arc::default();
    let a = asked.clone();
    app.on_inspect(move |_, t| a.lock().expect("lock").push(t.clone()));
    let p = app.ui.selected_id(ViewKind::Pods).and_then(|r| r.pod()).and_then(|p| app.fleet.pod(p)).expect("a pod");
    let want = InspectTarget::new("Pod", Some(app.fleet.str_of(p.namespace)), &p.name);
    send(&mut app, "y");
    assert_eq!(asked.lock().expect("lock").as_slice(), std::slice::from_ref(&want));
    assert!(screen(&mut app).contains(&format!("reading {} from the API server", want.label())));
    let yaml: String = (0..80).map(|i| format!("line{i}: {i}\n")).collect();
    let ev = InspectEvent {
        last: 0,
        type_: "Warning".into(),
        reason: "FailedScheduling".into(),
        count: 3,
        from: "default-scheduler".into(),
        message: "0/48 nodes are available".into(),
    };
    let doc = InspectDoc { yaml, folded: 4, events: vec![ev], events_error: None, note: None };
    // The demo's answer to the first `y` (the same pod) is not the answer to this one.
    assert_eq!(app.fleet.inspected.as_ref().map(|i| (&i.target, i.request)), Some((&want, 1)));
    let request = app.ui.nav.inspect_request;
    assert_eq!(request, 2);
    let answer = |result| Box::new(Inspected { request, target: want.clone(), at: 0, result });
    app.apply(vec![Delta::Inspected(answer(Ok(doc)))]);
    let s = screen(&mut app);
    assert!(s.contains("managedFields: 4 entries folded") && s.contains("line0: 0"), "{s}");
    assert!(!s.contains("line79"), "{s}");
    // G: the end, with the events under the YAML.
    send(&mut app, "G");
    let s = screen(&mut app);
    assert!(s.contains("line79: 79") && s.contains("Events (1):") && s.contains("FailedScheduling"), "{s}");
    assert!(s.contains("0/48 nodes are available") && !s.contains("line0: 0"), "{s}");
    // k moves up at once from the bottom (the scroll stops where the last line is shown).
    send(&mut app, "k");
    let s2 = screen(&mut app);
    assert_ne!(s2, s, "k did not move the pane");
    // A late answer to an earlier request does not replace the one on screen.
    let other = InspectTarget::new("Node", None, "elsewhere");
    let late = Inspected { request: request - 1, target: other, at: 0, result: Err("not found".into()) };
    app.apply(vec![Delta::Inspected(Box::new(late))]);
    assert!(screen(&mut app).contains("line7"), "the pane keeps its answer");

    // Nodes from the fleet view; events are not objects y can show.
    send(&mut app, "<Esc>1y");
    let node = asked.lock().expect("lock").last().cloned().expect("asked");
    assert_eq!((node.kind.as_str(), node.namespace.as_deref()), ("Node", None));
    assert!(app.fleet.node_by_name(&node.name).is_some());
    // An event: the object it is about.
    send(&mut app, "<Esc>6y");
    let e = app
        .ui
        .selected_id(ViewKind::Events)
        .and_then(|r| r.event())
        .and_then(|i| crate::ui::views::tables::event_at(&app.fleet, i));
    let object = e.map(|e| e.object.clone()).expect("an event");
    let asked_for = asked.lock().expect("lock").last().cloned().expect("asked");
    assert!(object.contains(&asked_for.name), "event about {object:?}, asked for {asked_for:?}");
    assert_eq!(app.ui.screen(), crate::ui::state::Screen::Inspect);
}

#[test]
fn kubectl_line_runs_reading_verbs_through_the_inspector_and_refuses_the_rest() {
    use crate::model::{InspectDoc, InspectTarget, Inspected};
    use std::sync::{Arc, Mutex};
    let mut app = app_at(5);
    // The demo: no cluster to run it against, and it says so in the pane.
    send(&mut app, ":kubectl get nodes<Enter>");
    assert!(screen(&mut app).contains("no cluster for kubectl"), "{}", screen(&mut app));
    send(&mut app, "<Esc>");
    let asked: Arc<Mutex<Vec<(u64, InspectTarget)>>> = Arc::default();
    let a = asked.clone();
    app.on_inspect(move |r, t| a.lock().expect("lock").push((r, t.clone())));
    // A verb that may change the cluster: refused with the reason, nothing asked.
    send(&mut app, ":kubectl delete pod x<Enter>");
    assert!(message(&app).contains("`delete` may change the cluster"), "{}", message(&app));
    assert!(asked.lock().expect("lock").is_empty());
    send(&mut app, ":k get pods -A<Enter>");
    let (request, target) = asked.lock().expect("lock").last().cloned().expect("asked");
    assert_eq!(target, InspectTarget::kubectl("get pods -A"));
    let doc = InspectDoc {
        yaml: "NAMESPACE NAME\na p-0\n".into(),
        folded: 0,
        events: Vec::new(),
        events_error: None,
        note: Some("exit 0".into()),
    };
    app.apply(vec![Delta::Inspected(Box::new(Inspected { request, target, at: 0, result: Ok(doc) }))]);
    let s = screen(&mut app);
    assert!(s.contains("$ kubectl get pods -A   (exit 0,") && s.contains("a p-0"), "{s}");
    assert!(!s.contains("Events (") && !s.contains("Events:"), "a command's output has no events section:\n{s}");
}

#[test]
fn yank_puts_the_selected_name_or_uuid_up_for_the_clipboard() {
    let mut app = app_at(5);
    send(&mut app, "jY");
    let node =
        app.ui.selected_id(ViewKind::Fleet).and_then(|r| r.node()).and_then(|n| app.fleet.node(n)).expect("node");
    assert_eq!(app.ui.clipboard.take().as_deref(), Some(app.fleet.str_of(node.name)));
    send(&mut app, "2Y");
    let gpu = app.ui.selected_id(ViewKind::Gpus).and_then(|r| r.gpu()).and_then(|g| app.fleet.gpu(g)).expect("gpu");
    assert_eq!(app.ui.clipboard.take().as_deref(), Some(app.fleet.str_of(gpu.uuid)));
    assert!(message(&app).contains("to the terminal's clipboard (OSC 52)"), "{}", message(&app));
    // Nothing selected: nothing sent, and it says so.
    send(&mut app, "/no-such-row<Enter>Y");
    assert_eq!(app.ui.clipboard.take(), None);
    assert!(message(&app).contains("nothing to copy"), "{}", message(&app));
}

#[test]
fn x_hands_the_terminal_to_kubectl_exec_only_for_a_running_pod_on_a_cluster_and_never_readonly() {
    let mut app = app_at(5);
    // Not a pod: it says where to go.
    send(&mut app, "x");
    assert!(message(&app).contains("select one in the pods view"), "{}", message(&app));
    // The demo has no containers.
    send(&mut app, "5/Running<Enter>x");
    assert!(message(&app).contains("no containers"), "{}", message(&app));
    assert_eq!(app.ui.handoff, None);
    // On a cluster: kubectl exec with the cockpit's kubeconfig and context, in that pod.
    app.ui.session.kubectl = vec!["--kubeconfig".into(), "/k".into(), "--context".into(), "prod".into()];
    send(&mut app, "x");
    let p = app.ui.selected_id(ViewKind::Pods).and_then(|r| r.pod()).and_then(|p| app.fleet.pod(p)).expect("pod");
    assert_eq!(p.phase, crate::model::Phase::Running);
    let cmd = app.ui.handoff.take().expect("a hand-off");
    let want: Vec<String> =
        ["--kubeconfig", "/k", "--context", "prod", "exec", "-it", "-n", app.fleet.str_of(p.namespace), &p.name, "--"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    assert_eq!(cmd[..want.len()], want[..]);
    // --readonly: refused.
    app.ui.session.readonly = true;
    send(&mut app, "x");
    assert_eq!(app.ui.handoff, None);
    assert!(message(&app).contains("--readonly"), "{}", message(&app));
}

#[test]
fn slash_in_a_pane_finds_as_it_is_typed_and_n_and_shift_n_go_round_the_matches() {
    use crate::model::{InspectDoc, Inspected};
    let mut app = app_at(5);
    app.on_inspect(|_, _| {});
    send(&mut app, "1y");
    let (request, target) = (app.ui.nav.inspect_request, app.ui.nav.inspect.clone().expect("target"));
    // 200 lines; "needle" on lines 50, 120 and 180 of the YAML (pane lines +1: the heading).
    let yaml: String = (0..200)
        .map(|i| if [50, 120, 180].contains(&i) { format!("k{i}: Needle\n") } else { format!("k{i}: hay\n") })
        .collect();
    let doc = InspectDoc { yaml, folded: 0, events: Vec::new(), events_error: None, note: None };
    app.apply(vec![Delta::Inspected(Box::new(Inspected { request, target, at: 0, result: Ok(doc) }))]);
    send(&mut app, "/needle");
    assert_eq!(app.ui.nav.inspect_match, Some(51), "found as it is typed");
    assert!(screen(&mut app).contains("k50: Needle"));
    send(&mut app, "<Enter>");
    assert!(message(&app).contains("3 matching lines"), "{}", message(&app));
    send(&mut app, "n");
    assert_eq!(app.ui.nav.inspect_match, Some(121));
    assert!(screen(&mut app).contains("k120: Needle") && message(&app).contains("match 2 of 3"), "{}", message(&app));
    send(&mut app, "nn");
    assert_eq!(app.ui.nav.inspect_match, Some(51), "round the end");
    send(&mut app, "N");
    assert_eq!(app.ui.nav.inspect_match, Some(181), "back round the start");
    assert!(screen(&mut app).contains("k180: Needle"));
    // Esc on a new search puts the old one back; a text not there says so.
    send(&mut app, "/zzz");
    assert!(message(&app).contains("\"zzz\" is not in this pane"), "{}", message(&app));
    send(&mut app, "<Esc>");
    assert_eq!(app.ui.nav.inspect_find, "needle");
    // n outside a pane: it says where it works.
    send(&mut app, "<Esc>n");
    assert!(message(&app).contains("find in a pane"), "{}", message(&app));
}

#[test]
fn logs_pane_streams_the_selected_pod_follows_and_toggles_through_new_requests() {
    use crate::model::{LogEvent, LogRequest};
    use crate::ui::state::Screen;
    use std::sync::{Arc, Mutex};
    let mut app = app_at(5);
    // Not a pod: it says what to select.
    send(&mut app, "1L");
    assert!(message(&app).contains("select a pod"), "{}", message(&app));
    // The demo has no containers: the pane says so.
    send(&mut app, "5L");
    assert_eq!(app.ui.screen(), Screen::Logs);
    assert!(screen(&mut app).contains("no containers to read logs from"), "{}", screen(&mut app));
    send(&mut app, "<Esc>");

    // With a streamer: the selected pod, following, the last 10,000 lines.
    let asked: Arc<Mutex<Vec<Option<LogRequest>>>> = Arc::default();
    let a = asked.clone();
    app.on_logs(move |r| a.lock().expect("lock").push(r.cloned()));
    let p = app.ui.selected_id(ViewKind::Pods).and_then(|r| r.pod()).and_then(|p| app.fleet.pod(p)).expect("a pod");
    let (ns, name) = (app.fleet.str_of(p.namespace).to_string(), p.name.to_string());
    send(&mut app, "L");
    let first = asked.lock().expect("lock").last().cloned().flatten().expect("asked");
    assert_eq!((first.namespace.as_str(), first.pod.as_str()), (ns.as_str(), name.as_str()));
    assert!(first.follow && !first.previous && first.container.is_none());
    assert_eq!(first.tail, Some(crate::model::KEEP_LINES));
    assert!(screen(&mut app).contains("opening the log of"), "{}", screen(&mut app));
    let log = |app: &mut App, request: u64, event: LogEvent| app.apply(vec![Delta::Log { request, event }]);
    let containers = vec!["main".to_string(), "sidecar".to_string()];
    log(&mut app, first.id, LogEvent::Opened { containers, container: "main".into() });
    log(&mut app, first.id, LogEvent::Lines((0..100).map(|i| format!("line {i}")).collect()));
    let s = screen(&mut app);
    // Following: stuck to the newest line.
    assert!(s.contains("line 99") && !s.contains("line 0 ") && s.contains("following"), "{s}");
    assert!(s.contains("containers [main] sidecar") && s.contains("of 100"), "{s}");
    // More lines arrive: still at the bottom.
    log(&mut app, first.id, LogEvent::Lines(vec!["line 100 ERROR boom".into()]));
    assert!(screen(&mut app).contains("line 100 ERROR boom"));
    // g goes to the top and stays there as lines arrive; G sticks to the bottom again.
    send(&mut app, "g");
    log(&mut app, first.id, LogEvent::Lines(vec!["line 101".into()]));
    let s = screen(&mut app);
    assert!(s.contains("line 0") && !s.contains("line 101"), "{s}");
    send(&mut app, "G");
    assert!(screen(&mut app).contains("line 101"));
    // `/` finds in the log.
    send(&mut app, "/boom<Enter>");
    assert_eq!(app.ui.nav.inspect_match, Some(100));
    // C: the next container, as a new request; chunks of the old request are dropped.
    send(&mut app, "C");
    let next = asked.lock().expect("lock").last().cloned().flatten().expect("asked");
    assert_eq!(next.container.as_deref(), Some("sidecar"));
    assert!(next.id > first.id);
    log(&mut app, first.id, LogEvent::Lines(vec!["late line of main".into()]));
    log(
        &mut app,
        next.id,
        LogEvent::Opened { containers: vec!["main".into(), "sidecar".into()], container: "sidecar".into() },
    );
    log(&mut app, next.id, LogEvent::Lines(vec!["sidecar says hi".into()]));
    let s = screen(&mut app);
    assert!(s.contains("sidecar says hi") && !s.contains("late line") && s.contains("main [sidecar]"), "{s}");
    // p: the previous run of the same container (not following); the API server's refusal shows.
    send(&mut app, "p");
    let prev = asked.lock().expect("lock").last().cloned().flatten().expect("asked");
    assert!(prev.previous && !prev.follow && prev.container.as_deref() == Some("sidecar"));
    log(&mut app, prev.id, LogEvent::Ended(Some("previous terminated container \"sidecar\" not found".into())));
    assert!(screen(&mut app).contains("previous terminated container"), "{}", screen(&mut app));
    // t: timestamps, asked of the server; w: wrap, here only.
    send(&mut app, "t");
    let ts = asked.lock().expect("lock").last().cloned().flatten().expect("asked");
    assert!(ts.timestamps && ts.previous);
    let n = asked.lock().expect("lock").len();
    send(&mut app, "w");
    assert!(app.ui.nav.logs_wrap && asked.lock().expect("lock").len() == n);
    // f: following again (the current run); f again stops the stream but keeps the lines.
    send(&mut app, "f");
    let f = asked.lock().expect("lock").last().cloned().flatten().expect("asked");
    assert!(f.follow && !f.previous);
    log(
        &mut app,
        f.id,
        LogEvent::Opened { containers: vec!["main".into(), "sidecar".into()], container: "sidecar".into() },
    );
    log(&mut app, f.id, LogEvent::Lines(vec!["kept".into()]));
    send(&mut app, "f");
    assert_eq!(asked.lock().expect("lock").last(), Some(&None), "the stream is closed");
    let s = screen(&mut app);
    assert!(s.contains("kept") && s.contains("stopped following"), "{s}");
    // Leaving the pane closes the stream of a following log.
    send(&mut app, "f");
    assert!(asked.lock().expect("lock").last().is_some_and(Option::is_some));
    send(&mut app, "<Esc>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Pods));
    assert_eq!(asked.lock().expect("lock").last(), Some(&None));
    // The pane's keys elsewhere say where they work.
    send(&mut app, "f");
    assert!(message(&app).contains("works in the logs pane"), "{}", message(&app));
}

#[test]
fn logs_open_from_a_gpu_held_by_a_pod() {
    use crate::model::LogRequest;
    use std::sync::{Arc, Mutex};
    let mut app = app_at(5);
    let asked: Arc<Mutex<Vec<Option<LogRequest>>>> = Arc::default();
    let a = asked.clone();
    app.on_logs(move |r| a.lock().expect("lock").push(r.cloned()));
    // The first GPU row a pod holds.
    send(&mut app, "2");
    let rows = app.ui.rows(ViewKind::Gpus).to_vec();
    let at = rows
        .iter()
        .position(|r| r.gpu().and_then(|g| app.fleet.gpu(g)).is_some_and(|g| !g.pods.is_empty()))
        .expect("a GPU a pod holds");
    let gpu = rows[at].gpu().and_then(|g| app.fleet.gpu(g)).expect("gpu");
    let holder = app.fleet.pod(gpu.pods[0]).map(|p| p.name.to_string()).expect("pod");
    app.ui.table_mut(ViewKind::Gpus).selected = at;
    send(&mut app, "L");
    let r = asked.lock().expect("lock").last().cloned().flatten().expect("asked");
    assert_eq!(r.pod, holder);
}

#[test]
fn x_in_a_log_opens_the_shell_in_that_container() {
    use crate::model::LogEvent;
    let mut app = app_at(5);
    app.on_logs(|_| {});
    send(&mut app, "5/Running<Enter>L");
    let request = app.ui.nav.logs.as_ref().map(|r| r.id).expect("a log");
    let containers = vec!["main".to_string(), "sidecar".to_string()];
    app.apply(vec![Delta::Log { request, event: LogEvent::Opened { containers, container: "sidecar".into() } }]);
    app.ui.session.kubectl = vec!["--context".into(), "prod".into()];
    send(&mut app, "x");
    let cmd = app.ui.handoff.take().expect("a hand-off");
    let pod = app.ui.nav.logs.as_ref().map(|r| r.pod.clone()).expect("pod");
    let at = cmd.iter().position(|a| *a == pod).expect("the pod in the command");
    assert_eq!(cmd[at + 1..at + 4], ["-c", "sidecar", "--"].map(String::from), "{cmd:?}");
}

#[test]
fn logs_open_from_an_event_about_a_pod_or_a_gpu_a_pod_holds() {
    use crate::model::{EventSpec, LogRequest, Severity};
    use std::sync::{Arc, Mutex};
    let mut app = app_at(5);
    let asked: Arc<Mutex<Vec<Option<LogRequest>>>> = Arc::default();
    let a = asked.clone();
    app.on_logs(move |r| a.lock().expect("lock").push(r.cloned()));
    // A pod, and a GPU another pod holds, each with an event about it.
    let f = &app.fleet;
    let pod = f.pod_ids().filter_map(|p| f.pod(p)).next().expect("a pod");
    let (ns, name) = (f.str_of(pod.namespace).to_string(), pod.name.to_string());
    let gpu = f.gpu_ids().filter_map(|g| f.gpu(g)).find(|g| !g.pods.is_empty()).expect("a GPU a pod holds");
    let holder = f.pod(gpu.pods[0]).map(|p| p.name.to_string()).expect("holder");
    let gpu_object = format!("{}/gpu{}", f.node(gpu.node).map(|n| f.str_of(n.name)).unwrap_or(""), gpu.index);
    let event = |object: String, reason: &str| EventSpec {
        ts: 0,
        severity: Severity::Warning,
        reason: reason.into(),
        object,
        message: "m".into(),
    };
    app.fleet.push_event(event(format!("pod/{ns}/{name}"), "BackOff"));
    app.fleet.push_event(event(gpu_object.clone(), "XID 79"));
    app.fleet.push_event(event("ns/quota".into(), "Other"));
    send(&mut app, "6");
    let pick = |app: &mut App, object: &str| {
        let rows = app.ui.rows(ViewKind::Events).to_vec();
        let at = rows
            .iter()
            .position(|r| {
                r.event()
                    .and_then(|e| crate::ui::views::tables::event_at(&app.fleet, e))
                    .is_some_and(|e| e.object == object)
            })
            .expect("the event");
        app.ui.table_mut(ViewKind::Events).selected = at;
        send(app, "L");
    };
    pick(&mut app, &format!("pod/{ns}/{name}"));
    let r = asked.lock().expect("lock").last().cloned().flatten().expect("asked");
    assert_eq!((r.namespace.as_str(), r.pod.as_str()), (ns.as_str(), name.as_str()));
    send(&mut app, "<Esc>");
    pick(&mut app, &gpu_object);
    let r = asked.lock().expect("lock").last().cloned().flatten().expect("asked");
    assert_eq!(r.pod, holder);
    send(&mut app, "<Esc>");
    // An event about something else: it says what to select.
    let n = asked.lock().expect("lock").len();
    pick(&mut app, "ns/quota");
    assert_eq!(asked.lock().expect("lock").len(), n);
    assert!(message(&app).contains("an event about one"), "{}", message(&app));
}

#[test]
fn logs_of_a_pod_no_node_has_taken_say_why_there_are_none() {
    // The full demo, and a pod asking for more GPUs than any node has.
    let (_, mut app) = crate::testing::full_demo_app(SEED, 20, dark());
    app.resize(W, H);
    app.on_logs(|_| panic!("nothing to stream"));
    let now = app.fleet.now;
    app.apply(vec![Delta::PodUpsert(unscheduled_job_pod("research", "too-big-0", "too-big", 64, now))]);
    let f = &app.fleet;
    let pending = f.pod_ids().filter_map(|p| f.pod(p)).find(|p| p.node.is_none() && f.str_of(p.node_name).is_empty());
    let name = pending.map(|p| p.name.to_string()).expect("the demo has a pod waiting for a node");
    send(&mut app, "5/");
    for c in name.chars() {
        send(&mut app, &c.to_string());
    }
    send(&mut app, "<Enter>L");
    assert!(message(&app).contains("is not scheduled yet"), "{}", message(&app));
    assert_eq!(app.ui.screen(), crate::ui::state::Screen::Table(ViewKind::Pods));
}

#[test]
fn reclaim_from_the_pods_view_previews_then_runs_through_the_simulator() {
    let mut rig = Rig::new(5);
    let pod = rig
        .app
        .fleet
        .pod_ids()
        .filter_map(|p| rig.app.fleet.pod(p))
        .find(|p| {
            rig.app.fleet.str_of(p.app) == "ft-debug"
                && p.phase == crate::model::Phase::Running
                && !p.bound_gpus.is_empty()
        })
        .map(|p| p.name.to_string())
        .expect("a running ft-debug pod");
    send(&mut rig.app, &format!(":pods {pod}<Enter>R"));
    let s = screen(&mut rig.app);
    assert!(line_with(&s, &format!("Reclaim the GPUs of llm-finetune-dev/{pod}")).is_some(), "{s}");
    assert!(line_with(&s, "scale Deployment llm-finetune-dev/ft-debug down by one").is_some(), "{s}");
    assert!(rig.executes().is_empty(), "nothing is sent before the confirmation");
    send(&mut rig.app, "y");
    let ex = rig.executes();
    assert_eq!(ex.len(), 1);
    rig.forward();
    assert_eq!(rig.run_until_finished(ex[0].0), OpState::Succeeded);
    assert!(rig.app.fleet.pod_by_name("llm-finetune-dev", &pod).is_none(), "the pod is gone");
    // By name from the `:` line; a name without its namespace is refused with the form.
    send(&mut rig.app, ":reclaim nope<Enter>");
    assert!(message(&rig.app).contains("name the pod as NAMESPACE/NAME"), "{}", message(&rig.app));
    send(&mut rig.app, ":reclaim ml/nope<Enter>");
    assert!(message(&rig.app).starts_with("no pod ml/nope in the fleet"), "{}", message(&rig.app));
    // A node row names no pod.
    send(&mut rig.app, ":fleet<Enter>R");
    assert!(message(&rig.app).starts_with("R frees a pod's GPUs"), "{}", message(&rig.app));
}

#[test]
fn shift_e_hands_the_selected_object_to_kubectl_edit_on_a_cluster_and_never_readonly() {
    let mut app = app_at(5);
    // The demo has no API server.
    send(&mut app, "5/Running<Enter>E");
    assert!(message(&app).contains("no API server to edit objects on"), "{}", message(&app));
    assert_eq!(app.ui.handoff, None);
    app.ui.session.kubectl = vec!["--context".into(), "prod".into()];
    send(&mut app, "E");
    let p = app.ui.selected_id(ViewKind::Pods).and_then(|r| r.pod()).and_then(|p| app.fleet.pod(p)).expect("pod");
    let want = ["--context", "prod", "edit", &format!("pod/{}", p.name), "-n", app.fleet.str_of(p.namespace)];
    assert_eq!(app.ui.handoff.take().expect("a hand-off"), want.map(String::from));
    // A node (cluster-scoped: no namespace); a quota, by where it lives.
    send(&mut app, "1E");
    let cmd = app.ui.handoff.take().expect("a hand-off");
    assert!(cmd[3].starts_with("node/") && cmd.len() == 4, "{cmd:?}");
    // --readonly: refused, nothing handed off.
    app.ui.session.readonly = true;
    send(&mut app, "E");
    assert_eq!(app.ui.handoff, None);
    assert!(message(&app).contains("--readonly: kubectl edit writes"), "{}", message(&app));
}

#[test]
fn h_holds_the_selected_cluster_queue_and_hold_and_resume_name_one() {
    let mut app = app_at(5);
    send(&mut app, ":quotas cq-inference-prod<Enter>H");
    let s = screen(&mut app);
    assert!(line_with(&s, "Hold ClusterQueue cq-inference-prod").is_some(), "{s}");
    assert!(line_with(&s, "set spec.stopPolicy: Hold on ClusterQueue cq-inference-prod").is_some(), "{s}");
    send(&mut app, "n:hold cq-inference-prod drain<Enter>");
    let s = screen(&mut app);
    assert!(line_with(&s, "Hold and drain ClusterQueue cq-inference-prod").is_some(), "{s}");
    send(&mut app, "n:resume cq-inference-prod<Enter>");
    assert!(line_with(&screen(&mut app), "Resume ClusterQueue cq-inference-prod").is_some());
    // A ResourceQuota row names no queue; an unknown queue is refused with where to look.
    send(&mut app, "n:fleet<Enter>H");
    assert!(message(&app).starts_with("name the ClusterQueue"), "{}", message(&app));
    send(&mut app, ":hold cq-nope<Enter>");
    assert!(message(&app).contains("no Kueue ClusterQueue \"cq-nope\""), "{}", message(&app));
}

#[test]
fn a_scrolled_log_keeps_its_lines_in_view_when_the_oldest_fall_off() {
    use crate::model::{KEEP_LINES, LogEvent};
    let mut app = app_at(5);
    app.on_logs(|_| {});
    send(&mut app, "5L");
    let id = app.ui.nav.logs.as_ref().expect("a request").id;
    let log = |app: &mut App, event: LogEvent| app.apply(vec![Delta::Log { request: id, event }]);
    log(&mut app, LogEvent::Opened { containers: vec!["main".into()], container: "main".into() });
    log(&mut app, LogEvent::Lines((0..KEEP_LINES).map(|i| format!("line {i}")).collect()));
    // Scrolled up to line 5000, with a match on it.
    send(&mut app, "g");
    app.ui.nav.inspect_scroll = 5000;
    app.ui.nav.inspect_match = Some(5000);
    assert!(screen(&mut app).contains("│line 5000 "), "{}", screen(&mut app));
    // 300 new lines push 300 old ones out: the same text stays at the top of the pane.
    log(&mut app, LogEvent::Lines((KEEP_LINES..KEEP_LINES + 300).map(|i| format!("line {i}")).collect()));
    assert_eq!(app.ui.nav.inspect_scroll, 4700);
    assert_eq!(app.ui.nav.inspect_match, Some(4700));
    let s = screen(&mut app);
    assert!(s.contains("│line 5000 "), "the first line shown is still line 5000:\n{s}");
}

#[test]
fn the_workloads_view_lists_kueues_workloads_and_z_and_a_preview_suspend_and_resume() {
    let mut app = app_at(5);
    send(&mut app, "9");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Workloads));
    let s = screen(&mut app);
    assert!(s.contains(" Workloads ["), "{s}");
    for id in [":workloads<Enter>", ":wl<Enter>", ":kueue<Enter>"] {
        send(&mut app, "1");
        send(&mut app, id);
        assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Workloads), "{id}");
    }
    // The one waiting for quota: its place in line, why, and Enter tells its story.
    send(&mut app, "/nightly-eval<Enter>");
    let s = screen(&mut app);
    let row = line_with(&s, "job-nightly-eval").unwrap_or_else(|| panic!("{s}"));
    assert!(row.contains("Pending") && row.contains("couldn't assign flavors"), "{row}");
    send(&mut app, "<Enter>");
    assert!(message(&app).contains("(Pending): queued"), "{}", message(&app));
    send(&mut app, "Z");
    let s = screen(&mut app);
    assert!(line_with(&s, "Suspend Kueue Workload inference-prod/job-nightly-eval").is_some(), "{s}");
    assert!(s.contains("set spec.active: false"), "{s}");
    send(&mut app, "n");
    // Resuming an active one is refused; a name without a namespace says how to write it.
    send(&mut app, "A");
    assert!(message(&app).contains("active already"), "{}", message(&app));
    send(&mut app, ":unsuspend job-load-test<Enter>");
    assert!(message(&app).contains("NAMESPACE/NAME"), "{}", message(&app));
    // H from a Workload holds the ClusterQueue it waits in.
    send(&mut app, "9H");
    let s = screen(&mut app);
    assert!(line_with(&s, "Hold ClusterQueue cq-inference-prod").is_some(), "{} {s}", message(&app));
}

// ------------------------------------------------------------- Cluster API (capi view)

#[test]
fn the_capi_view_draws_the_tree_and_enter_on_a_machine_opens_its_node() {
    let mut app = app_at(5);
    send(&mut app, "M");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Capi));
    let s = screen(&mut app);
    // The Cluster first, its control plane under it, a MachineDeployment, its MachineSet,
    // then the set's Machines, each indented one step further.
    let first = s.lines().filter(|l| l.starts_with('│')).nth(1).unwrap_or_default();
    assert!(first.starts_with("│gpu-prod "), "{s}");
    assert!(
        s.contains("│  gpu-prod-cp ")
            && s.contains("│  gpu-prod-a100-80gb ")
            && s.contains("│    gpu-prod-a100-80gb-7c5d9"),
        "{s}"
    );
    assert!(s.contains("│      a100-0003-m "), "{s}");
    // The remediating Machine says so, and why.
    let line = s.lines().find(|l| l.contains("a100-0007-m")).unwrap_or_default();
    assert!(line.contains("remediating") && line.contains("WaitingFor"), "{line}");
    // Enter on it opens its node.
    send(&mut app, "/a100-0007-m<Enter>");
    send(&mut app, "<Enter>");
    let n = app.fleet.node_by_name("a100-0007").expect("the node");
    assert_eq!(app.ui.screen(), Screen::Node(n));
    // Enter on an object says what it is.
    send(&mut app, "<Esc>");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Capi));
    send(&mut app, "<Esc>/gpu-prod-workers<Enter>");
    let s = screen(&mut app);
    assert!(s.contains("Cluster API [1/57]"), "{s}");
    send(&mut app, "<Enter>");
    assert!(message(&app).starts_with("MachineHealthCheck gpu-prod-workers: 1 unhealthy"), "{}", message(&app));
}

#[test]
fn the_hosts_view_lists_every_host_and_enter_opens_its_node_or_says_why_there_is_none() {
    let mut app = app_at(5);
    send(&mut app, "O");
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Hosts));
    let s = screen(&mut app);
    // One per node, and the two spares under none.
    let hosts = app.fleet.hosts.len();
    assert!(s.contains(&format!(" Hosts [{hosts}/{hosts}]")), "{s}");
    let header = line_with(&s, "HOST↑").unwrap_or_else(|| panic!("a header sorted by HOST: {s}"));
    for col in ["STATE", "POWER", "STATUS", "NODE", "ERROR"] {
        assert!(header.contains(col), "{col} at 140 columns: {header}");
    }
    // The NotReady node's host: provisioned, off (asked on), in error, and why.
    let line = line_with(&s, "a100-0007-host").unwrap_or_else(|| panic!("{s}"));
    for want in ["provisioned", "off (asked on)", "error", "a100-0007 ", "power management error"] {
        assert!(line.contains(want), "{want:?}: {line}");
    }
    send(&mut app, "/spare<Enter>");
    let s = screen(&mut app);
    assert!(s.contains(" Hosts [2/"), "{s}");
    let spare = line_with(&s, "spare-h100-01").unwrap_or_else(|| panic!("{s}"));
    assert!(spare.contains("available") && spare.contains(" off ") && spare.contains(" OK "), "{spare}");
    let bad = line_with(&s, "spare-h100-02").unwrap_or_else(|| panic!("{s}"));
    assert!(bad.contains("registering") && bad.contains("registration error: "), "{bad}");
    // Enter on a spare: no node runs on it; on a node's host: that node.
    send(&mut app, "<Enter>");
    assert!(message(&app).contains("spare-h100-01: available") && message(&app).contains("no node runs on it"));
    assert_eq!(app.ui.screen(), Screen::Table(ViewKind::Hosts));
    send(&mut app, "<Esc>/a100-0007-host<Enter><Enter>");
    let n = app.fleet.node_by_name("a100-0007").expect("the node");
    assert_eq!(app.ui.screen(), Screen::Node(n));
    // The JSON row: the fleet's host object and the row's own keys.
    let doc = crate::ui::json::snapshot(&app.fleet, ViewKind::Hosts, "spare-h100-02");
    let rows = doc["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(r["host"], "capi-gpu-prod/spare-h100-02");
    assert_eq!(
        (r["provisioning_state"].as_str(), r["operational_status"].as_str()),
        (Some("registering"), Some("error"))
    );
    assert_eq!(
        (r["powered_on"].as_bool(), r["online"].as_bool(), r["power"].as_str()),
        (Some(false), Some(false), Some("off"))
    );
    assert_eq!(
        (r["nodes"].clone(), r["machine"].clone(), r["consumer"].clone()),
        (serde_json::json!([]), serde_json::Value::Null, serde_json::Value::Null)
    );
    assert!(r["hardware"].is_null() && r["error_type"] == "registration error", "{r}");
}

#[test]
fn a_spare_host_under_no_node_is_inspected_again_from_the_hosts_view() {
    let mut rig = Rig::new(5);
    send(&mut rig.app, ":hosts spare-h100-01<Enter>:host inspect<Enter>");
    let s = screen(&mut rig.app);
    assert!(line_with(&s, "Inspect host capi-gpu-prod/spare-h100-01 again").is_some(), "{s}");
    assert!(
        line_with(&s, "annotate BareMetalHost capi-gpu-prod/spare-h100-01 with inspect.metal3.io").is_some(),
        "{s}"
    );
    assert!(rig.executes().is_empty(), "nothing is sent before the confirmation");
    send(&mut rig.app, "y");
    let ex = rig.executes();
    assert_eq!(ex.len(), 1);
    rig.forward();
    assert_eq!(rig.run_until_finished(ex[0].0), OpState::Succeeded);
    let h = rig.app.fleet.hosts.get("capi-gpu-prod/spare-h100-01").expect("the spare");
    assert!(!h.inspect_pending && h.state == "available", "{h:?}");
    // A spare that never registered is not inspected: the preview says why and blocks it.
    send(&mut rig.app, ":hosts spare-h100-02<Enter>B");
    let s = screen(&mut rig.app);
    assert!(line_with(&s, "Reboot host capi-gpu-prod/spare-h100-02").is_some(), "{s}");
    assert!(s.contains("once it is provisioned") && s.contains("registering"), "{s}");
    send(&mut rig.app, "y");
    assert!(rig.executes().is_empty(), "a blocked plan is never sent");
}

/// A Job's pod asking for `gpus` whole GPUs that no node has taken yet.
fn unscheduled_job_pod(ns: &str, name: &str, app: &str, gpus: u16, now: crate::model::Ts) -> crate::model::PodSpec {
    crate::model::PodSpec {
        namespace: ns.into(),
        name: name.into(),
        node: None,
        phase: crate::model::Phase::Pending,
        created: now,
        started: None,
        owner: crate::model::Owner::Job,
        owner_name: String::new(),
        app: app.into(),
        empty_dir: false,
        gpus,
        gpus_renamed: false,
        mig: vec![],
        dra: vec![],
        claim_templates: vec![],
        bound_gpus: vec![],
        bound_mig: vec![],
        deletion: None,
        container_waiting: None,
        restarts: Default::default(),
    }
}

#[test]
fn restarts_read_as_kubectl_prints_them_and_a_crash_loop_alerts_its_tenant() {
    let (_, app) = demo_app(SEED, 48, dark());
    let f = &app.fleet;
    let restarts = col(ViewKind::Pods, "RESTARTS");
    let looping = f.pod_ids().filter_map(|id| f.pod(id).map(|p| (id, p))).find(|(_, p)| p.crash_looping());
    let (id, p) = looping.expect("the demo has a crash-looping pod");
    let (text, token) = tables::columns(ViewKind::Pods)[restarts].cell_of(f, RowId::Pod(id));
    let at = p.restarts.last_exit().expect("its last exit");
    let want = format!("{} ({} ago)", p.restarts.count, crate::ui::views::cell::kubectl_age(f.now, at));
    assert_eq!((text.as_str(), token), (want.as_str(), "status.failed"), "red while it crash-loops");
    // A pod never restarted: a muted 0; the JSON has the count and the exit.
    let calm = f.pod_ids().find(|id| f.pod(*id).is_some_and(|p| p.restarts.count == 0)).expect("a calm pod");
    assert_eq!(tables::columns(ViewKind::Pods)[restarts].cell_of(f, RowId::Pod(calm)).0, "0");
    let doc = crate::ui::views::pods::json(f, RowId::Pod(id)).expect("its JSON");
    assert_eq!((doc["restarts"].clone(), doc["last_restart_ms"].clone()), (p.restarts.count.into(), at.into()));
    // On screen at 140 columns the count is whole (a right-aligned cell cut too narrow
    // loses its left end: the count).
    let (name, count) = (p.name.to_string(), p.restarts.count);
    let mut app = app;
    app.open_view(ViewKind::Pods);
    send(&mut app, "/CrashLoop<Enter>");
    let text = to_text(&render_app(&mut app, 140, 30));
    let row = text.lines().find(|l| l.contains(&name)).unwrap_or_default();
    assert!(row.contains(&format!(" {count} (")), "{row}");
    let f = &app.fleet;
    let p = f.pod(id).expect("the pod");
    // Its tenant is alerted.
    let tenant = f.tenant(p.tenant).map(|t| f.str_of(t.name).to_string()).unwrap_or_default();
    let alert = f.alerts.values().find(|a| {
        a.kind == crate::model::AlertKind::CrashLoop && a.target == crate::model::AlertTarget::Tenant(p.tenant)
    });
    assert!(alert.is_some_and(|a| a.message.starts_with(&format!("tenant {tenant}: "))), "{alert:?}");
}
