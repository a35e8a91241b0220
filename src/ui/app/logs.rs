//! `L`: the selected pod's log in a pane, streamed through the runner's API client
//! (`on_logs`); chunks come back as `Delta::Log` and the fleet keeps the last request's lines
//! (bounded). In the pane `f` follows, `p` switches to the previous run, `C` to the next
//! container, `t` asks for timestamps (each a new request), `w` wraps; `/`, `n`, `N`, scrolling
//! and `Y` work as in the inspect pane. Leaving the pane closes the stream. Reading changes
//! nothing, so it works in `--readonly` too.

use super::App;
use crate::model::{LogRequest, LogState};
use crate::ui::command::Command;
use crate::ui::state::Screen;
use crate::ui::views::RowId;

/// Told each log to stream (`Some`) and when to stop streaming (`None`).
pub type LogsFn = Box<dyn FnMut(Option<&LogRequest>) + Send>;

impl App {
    /// Calls `ask` with each log the person opens and with `None` when the pane closes;
    /// without it (the demo) the pane says there is no API server to stream from.
    pub fn on_logs(&mut self, ask: impl FnMut(Option<&LogRequest>) + Send + 'static) {
        self.logger = Some(Box::new(ask));
    }

    /// `L`: the log of the pod under the selection: a pods-view row, the pod holding the
    /// selected MIG instance or GPU (GPUs view, GPU screen), or the pod an event or alert is
    /// about (directly, or through its GPU): the way from an alert to its cause.
    pub(super) fn logs_selected(&mut self) {
        if self.ui.screen() == Screen::Logs {
            return self.ui.warn("this is the log; Esc goes back");
        }
        let f = &self.fleet;
        let Some(p) = self.pod_under_selection().and_then(|p| f.pod(p)) else {
            return self.ui.warn(
                "L shows a pod's log: select a pod (5), a GPU or MIG instance a pod holds, or an event about one",
            );
        };
        if p.node.is_none() && f.str_of(p.node_name).is_empty() {
            return self.ui.warn(format!(
                "{} is not scheduled yet, so it has no log; its WAITING column (pods view) says why",
                p.name
            ));
        }
        let req = LogRequest::new(0, f.str_of(p.namespace), &p.name);
        self.ask_logs(req);
        self.push(Screen::Logs);
    }

    /// The pod under the selection: a pods-view row, the pod holding the selected MIG
    /// instance or GPU (GPUs view, GPU screen; a shared GPU's first), or the pod an event or
    /// alert is about (directly, or through its GPU).
    pub(super) fn pod_under_selection(&self) -> Option<crate::model::PodId> {
        let f = &self.fleet;
        match self.ui.screen() {
            Screen::Table(v) => match self.ui.selected_id(v) {
                Some(RowId::Pod(p)) => Some(p),
                // An event or alert: the pod it is about, or the pod on the GPU it is about.
                Some(RowId::Event(e)) => {
                    let object = crate::ui::views::tables::event_at(f, e).map(|e| e.object.clone()).unwrap_or_default();
                    match object.split('/').collect::<Vec<_>>().as_slice() {
                        [kind, ns, name] if kind.eq_ignore_ascii_case("pod") => f.pod_by_name(ns, name),
                        [node, gpu] if gpu.starts_with("gpu") => {
                            let index = gpu.trim_start_matches("gpu").parse::<u8>().ok();
                            let n = f.node_by_name(node).and_then(|n| f.node(n));
                            let g = n
                                .and_then(|n| n.gpus.iter().filter_map(|g| f.gpu(*g)).find(|g| Some(g.index) == index));
                            g.and_then(|g| g.pods.first().copied().or_else(|| g.instances.iter().find_map(|i| i.pod)))
                        }
                        _ => None,
                    }
                }
                Some(RowId::Mig(g, i)) => f.gpu(g).and_then(|g| g.instances.get(i as usize)).and_then(|m| m.pod),
                Some(RowId::Gpu(g)) => f.gpu(g).and_then(|g| g.pods.first().copied()),
                _ => None,
            },
            Screen::Gpu(g) => f.gpu(g).and_then(|g| {
                g.instances.get(self.ui.nav.gpu_row).and_then(|m| m.pod).or_else(|| g.pods.first().copied())
            }),
            Screen::Logs => self.ui.nav.logs.as_ref().and_then(|r| f.pod_by_name(&r.namespace, &r.pod)),
            _ => None,
        }
    }

    /// Sends `req` under a new number and resets the pane to its start (sticking to the
    /// newest line while following).
    fn ask_logs(&mut self, mut req: LogRequest) {
        self.ui.nav.inspect_request += 1;
        req.id = self.ui.nav.inspect_request;
        self.ui.nav.inspect_scroll = 0;
        self.ui.nav.inspect_match = None;
        self.ui.nav.logs_stick = req.follow || !req.previous;
        match self.logger.as_mut() {
            Some(ask) => {
                ask(Some(&req));
                self.ui.nav.logs_open = true;
            }
            None => {
                let event = crate::model::LogEvent::Ended(Some(
                    "the simulated factory has no containers to read logs from; L streams them on a cluster".into(),
                ));
                self.apply(vec![crate::model::Delta::Log { request: req.id, event }]);
            }
        }
        self.ui.nav.logs = Some(req);
    }

    /// The pane's keys: each toggle but wrap is a new request for the same pod.
    pub(super) fn log_key(&mut self, c: Command) {
        let (Screen::Logs, Some(mut req)) = (self.ui.screen(), self.ui.nav.logs.clone()) else {
            let key =
                self.keymap.hint(crate::ui::command::Mode::Normal, Command::Logs).unwrap_or_else(|| ":logs".into());
            return self.ui.warn(format!("{} works in the logs pane: select a pod and press {key}", c.name()));
        };
        let buffer = self.fleet.logs.as_ref().filter(|b| b.request == req.id);
        match c {
            Command::LogWrap => {
                self.ui.nav.logs_wrap = !self.ui.nav.logs_wrap;
                let how = if self.ui.nav.logs_wrap { "long lines wrap" } else { "long lines are cut at the edge" };
                return self.ui.info(how);
            }
            Command::LogFollow => {
                // Stop following without losing the lines: close the stream, keep the pane.
                if req.follow && buffer.is_some_and(|b| b.state == LogState::Streaming) {
                    req.follow = false;
                    self.stop_logs();
                    self.ui.nav.logs = Some(req);
                    return self.ui.info("stopped following; f follows again");
                }
                req.follow = true;
                req.previous = false;
            }
            Command::LogPrevious => {
                req.previous = !req.previous;
                req.follow = !req.previous;
            }
            Command::LogTimestamps => req.timestamps = !req.timestamps,
            Command::LogContainer => {
                let Some(b) = buffer.filter(|b| !b.containers.is_empty()) else {
                    return self.ui.warn("the pod's containers are not known yet");
                };
                if b.containers.len() == 1 {
                    return self.ui.warn(format!("{} has one container: {}", req.pod, b.container));
                }
                let at = b.containers.iter().position(|c| *c == b.container).unwrap_or(0);
                req.container = Some(b.containers[(at + 1) % b.containers.len()].clone());
                req.previous = false;
            }
            _ => return,
        }
        // Keep the container the stream resolved, so a toggle reads the same one.
        if req.container.is_none() {
            req.container = buffer.map(|b| b.container.clone()).filter(|c| !c.is_empty());
        }
        self.ask_logs(req);
    }

    /// Closes the stream (leaving the pane, or `f` off); the lines stay.
    pub(super) fn stop_logs(&mut self) {
        if self.ui.nav.logs_open {
            self.ui.nav.logs_open = false;
            if let Some(ask) = self.logger.as_mut() {
                ask(None);
            }
        }
    }

    /// Closes the stream once the pane is no longer on screen.
    pub(super) fn logs_left(&mut self) {
        if self.ui.nav.logs_open && self.ui.screen() != Screen::Logs {
            self.stop_logs();
        }
    }

    /// The lines the logs pane holds now.
    pub(super) fn log_line_count(&self) -> usize {
        crate::ui::views::logs::buffer(&self.fleet, &self.ui.nav).map_or(1, |b| b.lines.len().max(1))
    }
}
