//! Running a `:` line: the first word is looked up in the command table
//! ([`Command::from_alias`]); the rest is its argument.

use super::App;
use crate::model::GpuId;
use crate::ui::command::Command;
use crate::ui::state::Screen;

impl App {
    pub(super) fn run_command_line(&mut self, text: &str) {
        let text = text.trim();
        let (cmd, arg) = match text.split_once(char::is_whitespace) {
            Some((c, a)) => (c, a.trim()),
            None => (text, ""),
        };
        if cmd.is_empty() {
            return;
        }
        let Some(c) = Command::from_alias(cmd, !arg.is_empty()) else {
            self.ui.error(format!(
                "unknown command {cmd:?}: try :fleet :gpus :tenants :quotas :pods :events :ops, :node NAME, :gpu NODE/INDEX, :help or :q"
            ));
            return;
        };
        match c {
            Command::Quit => self.request_exit(None, false),
            Command::QuitNow => self.request_exit(None, true),
            Command::Help => self.ui.help = true,
            Command::OpenNode => match self.fleet.node_by_name(arg) {
                Some(n) => self.push(Screen::Node(n)),
                None => self.ui.error(format!("no node named {arg:?}; :fleet lists them")),
            },
            Command::OpenGpu => match self.find_gpu(arg) {
                Some(g) => self.push(Screen::Gpu(g)),
                None => self.ui.error(format!("no GPU {arg:?}: use NODE/INDEX (e.g. h100-0000/3) or a GPU uuid")),
            },
            Command::Context => self.switch_context(arg),
            Command::Kubectl => self.run_kubectl(arg),
            Command::TaintGpu => self.start_taint(arg),
            Command::Reclaim => self.start_reclaim(arg),
            Command::HostPower => self.start_host(arg),
            Command::HoldQueue | Command::ResumeQueue => self.start_queue_stop(c, arg),
            Command::SuspendWorkload | Command::ResumeWorkload => self.start_workload_active(c, arg),
            other => {
                if let Some(v) = other.view() {
                    self.open_view(v);
                    if !arg.is_empty() {
                        self.ui.table_mut(v).filter = arg.to_string();
                    }
                } else {
                    // Only the commands above and the views have `:` names.
                    self.dispatch(other);
                }
            }
        }
    }

    fn find_gpu(&self, arg: &str) -> Option<GpuId> {
        if let Some(g) = self.fleet.gpu_by_uuid(arg) {
            return Some(g);
        }
        let (node, idx) = arg.rsplit_once('/')?;
        let idx: u8 = idx.trim_start_matches("gpu").parse().ok()?;
        let n = self.fleet.node(self.fleet.node_by_name(node)?)?;
        n.gpus.iter().copied().find(|g| self.fleet.gpu(*g).is_some_and(|g| g.index == idx))
    }

    /// `:ctx` lists the kubeconfig's contexts; `:ctx NAME` asks the runner to reconnect.
    pub(super) fn switch_context(&mut self, arg: &str) {
        // A cluster this cockpit already watches opens at once.
        if let Some(i) = self.cluster_named(arg).filter(|_| self.clusters.len() > 1) {
            return self.open_cluster(i);
        }
        if self.ui.session.contexts.is_empty() {
            self.ui.warn("this cockpit runs on the embedded demo; run `fabrik` (or --context NAME) for a cluster");
            return;
        }
        if arg.is_empty() {
            self.ui.info(format!("contexts: {} (:ctx NAME switches)", self.ui.session.contexts.join(", ")));
            return;
        }
        if !self.ui.session.contexts.iter().any(|c| c == arg) {
            self.ui.error(format!(
                "no context {arg:?} in the kubeconfig; it has: {}",
                self.ui.session.contexts.join(", ")
            ));
            return;
        }
        self.request_exit(Some(arg.to_string()), false);
    }
}
