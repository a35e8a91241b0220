//! Named commands, as one table: every key press becomes one of these through the keymap and
//! every `:` line through its aliases; `?` help, keymap files and the README read the same
//! rows, so a command has one name, one doc line and one answer to "does it change the cluster".

use crate::ops::OpKind;

/// The mode a key is pressed in; keymaps bind per mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// Browsing a view.
    Normal,
    /// A dialog (preview, confirmation, picker) is open.
    Dialog,
}

impl Mode {
    pub const ALL: [Mode; 2] = [Mode::Normal, Mode::Dialog];
    pub fn name(self) -> &'static str {
        match self {
            Mode::Normal => "normal",
            Mode::Dialog => "dialog",
        }
    }
}

/// What a command takes after its name on the `:` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    /// Nothing (anything typed after the name is ignored).
    None,
    /// An optional word: a filter for a view, a context name for `:ctx`.
    Optional,
    /// A required word (`:node NAME`); without it the name means another command.
    Required,
}

/// One row of the command table: everything the keymap, the `:` line and `?` help know
/// about a command.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub command: Command,
    /// The snake_case name keymap files use.
    pub name: &'static str,
    /// The doc line `?` help shows beside the keys.
    pub doc: &'static str,
    /// Names on the `:` line (empty: not typable).
    pub aliases: &'static [&'static str],
    pub arg: Arg,
    /// The operation it starts, if it changes the cluster: refused in read-only mode and
    /// where RBAC says no (see `ui::permission`).
    pub op: Option<OpKind>,
    /// Its line in the `:` section of help: usage and what it does.
    pub usage: Option<(&'static str, &'static str)>,
}

impl Spec {
    const DEFAULT: Spec =
        Spec { command: Command::Quit, name: "", doc: "", aliases: &[], arg: Arg::None, op: None, usage: None };
}

macro_rules! commands {
    (
        keys { $( $variant:ident => $name:literal, $doc:literal $(, $field:ident: $value:expr)*; )* }
        typed { $( $tvariant:ident => $tname:literal, $tdoc:literal $(, $tfield:ident: $tvalue:expr)*; )* }
    ) => {
        /// A named action. `name()` is the snake_case key used in keymap files.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Command { $( $variant, )* $( $tvariant, )* }

        /// The command table, in `Command` order: keys' commands first, then those only the
        /// `:` line runs.
        pub const TABLE: &[Spec] = &[
            $( Spec { command: Command::$variant, name: $name, doc: $doc, $($field: $value,)* ..Spec::DEFAULT }, )*
            $( Spec { command: Command::$tvariant, name: $tname, doc: $tdoc, $($tfield: $tvalue,)* ..Spec::DEFAULT }, )*
        ];

        impl Command {
            /// The commands a keymap can bind, in help order.
            pub const ALL: &'static [Command] = &[ $( Command::$variant, )* ];
        }
    };
}

impl Command {
    pub fn spec(self) -> &'static Spec {
        &TABLE[self as usize]
    }
    pub fn name(self) -> &'static str {
        self.spec().name
    }
    pub fn doc(self) -> &'static str {
        self.spec().doc
    }
    /// The operation this command starts, if it changes the cluster.
    pub fn op(self) -> Option<OpKind> {
        self.spec().op
    }
    /// A command a keymap may bind, by its name.
    pub fn from_name(name: &str) -> Option<Command> {
        Command::ALL.iter().copied().find(|c| c.name() == name)
    }
    /// The view a view command opens.
    pub fn view(self) -> Option<ViewKind> {
        ViewKind::ALL.into_iter().find(|v| v.command() == self)
    }

    /// What the first word of a `:` line names. A name that needs an argument wins when one
    /// is given (`:node NAME`), else the first command with that exact name (`:q` quits,
    /// though `q` is also an alias of quotas); view names ignore case.
    pub fn from_alias(word: &str, has_arg: bool) -> Option<Command> {
        let named = |s: &&Spec| s.aliases.contains(&word);
        if has_arg && let Some(s) = TABLE.iter().filter(|s| s.arg == Arg::Required).find(named) {
            return Some(s.command);
        }
        if let Some(s) = TABLE.iter().filter(|s| s.arg != Arg::Required).find(named) {
            return Some(s.command);
        }
        ViewKind::from_alias(word).map(ViewKind::command)
    }
}

/// The `:` commands that help lists after the views, in that order.
const CMDLINE_HELP: &[Command] = &[Command::OpenNode, Command::Quit, Command::QuitNow];

/// The lines of help's command-line section.
pub fn cmdline_help() -> Vec<String> {
    let mut lines: Vec<String> =
        ViewKind::ALL.iter().map(|v| format!("  :{:<22} {}", v.aliases().join(" :"), v.title())).collect();
    for c in CMDLINE_HELP {
        if let Some((usage, what)) = c.spec().usage {
            lines.push(format!("  :{usage:<29} {what}"));
        }
    }
    lines
}

const VIEW: Arg = Arg::Optional;

commands! {
    keys {
        Quit => "quit", "Quit fabrik", aliases: &["q", "quit", "exit"],
            usage: Some(("q  :quit", "quit (asks first while operations run)"));
        Help => "help", "Show the keys for this view", aliases: &["help", "h", "?"];
        Back => "back", "Close the dialog, clear the filter, or go back one view";
        CommandLine => "command_line", "Open the : command line (views, aliases, :q)";
        Filter => "filter", "Filter the rows of this view (/)";
        Up => "up", "Move the selection up";
        Down => "down", "Move the selection down";
        PageUp => "page_up", "Move one page up";
        PageDown => "page_down", "Move one page down";
        Top => "top", "Go to the first row";
        Bottom => "bottom", "Go to the last row";
        Open => "open", "Open the selected row (node topology, GPU slice map, tenant pods)";
        Collapse => "collapse", "Collapse the tree node, or go to its parent";
        Expand => "expand", "Expand the tree node";
        SortNext => "sort_next", "Sort by the next column";
        SortPrev => "sort_prev", "Sort by the previous column";
        SortReverse => "sort_reverse", "Reverse the sort order";
        ToggleWide => "toggle_wide", "Show every column, or only those that fit the terminal";
        NextView => "next_view", "Switch to the next top-level view";
        PrevView => "prev_view", "Switch to the previous top-level view";
        ViewFleet => "view_fleet", "Open the fleet (nodes) view", aliases: &["fleet", "nodes", "node", "no", "n"], arg: VIEW;
        ViewGpus => "view_gpus", "Open the GPUs view", aliases: &["gpus", "gpu", "g", "devices", "mig"], arg: VIEW;
        ViewTenants => "view_tenants", "Open the tenants view", aliases: &["tenants", "tenant", "t", "teams"], arg: VIEW;
        ViewQuotas => "view_quotas", "Open the quotas view",
            aliases: &["quotas", "quota", "q", "rq", "resourcequotas", "cq"], arg: VIEW;
        ViewPods => "view_pods", "Open the GPU pods view", aliases: &["pods", "pod", "po", "p"], arg: VIEW;
        ViewEvents => "view_events", "Open the events view", aliases: &["events", "event", "ev", "alerts"], arg: VIEW;
        ViewOps => "view_ops", "Open the operations view", aliases: &["ops", "operations", "op", "audit"], arg: VIEW;
        ViewDomains => "view_domains", "Open the ComputeDomains view (multi-node NVLink, IMEX)",
            aliases: &["domains", "domain", "computedomains", "cd"], arg: VIEW;
        ViewWorkloads => "view_workloads", "Open the Kueue Workloads view (queued, admitted, evicted, preempted)",
            aliases: &["workloads", "workload", "wl", "kueue"], arg: VIEW;
        ViewCapi => "view_capi", "Open the Cluster API view: Clusters, MachineDeployments, Machines, health checks",
            aliases: &["capi", "machines", "md", "mhc"], arg: VIEW;
        ViewHosts => "view_hosts", "Open the hosts view: Metal3 BareMetalHosts, their state, power, errors and nodes",
            aliases: &["hosts", "bmhs", "baremetalhosts"], arg: VIEW;
        ViewClusters => "view_clusters", "Open the clusters view: one row per cluster watched; Enter opens one",
            aliases: &["clusters", "cluster", "cl"];
        Cordon => "cordon", "Cordon the selected node", op: Some(OpKind::Cordon);
        Uncordon => "uncordon", "Uncordon the selected node", op: Some(OpKind::Uncordon);
        Drain => "drain", "Drain the selected node (preview first)", op: Some(OpKind::Drain);
        Reslice => "reslice", "Reslice MIG on the selected GPU or node (preview first)", op: Some(OpKind::Reslice);
        EditQuota => "edit_quota", "Edit the selected quota (preview first)", op: Some(OpKind::SetQuota);
        TaintGpu => "taint_gpu", "Taint the selected GPU through DRA, NoSchedule (preview first)",
            aliases: &["taint"], arg: Arg::Optional, op: Some(OpKind::TaintGpu);
        UntaintGpu => "untaint_gpu", "Remove fabrik's DRA taint from the selected GPU (preview first)",
            aliases: &["untaint"], op: Some(OpKind::UntaintGpu);
        HoldQueue => "hold_queue", "Hold a Kueue ClusterQueue (:hold [QUEUE] [drain]; the selected queue's quota row by default; preview first)",
            aliases: &["hold"], arg: Arg::Optional, op: Some(OpKind::HoldQueue);
        ResumeQueue => "resume_queue", "Resume a held Kueue ClusterQueue (:resume [QUEUE]; preview first)",
            aliases: &["resume"], arg: Arg::Optional, op: Some(OpKind::ResumeQueue);
        SuspendWorkload => "suspend_workload", "Suspend a Kueue Workload: deactivate it, Kueue evicts it and releases its quota (:suspend [NS/NAME]; preview first)",
            aliases: &["suspend", "deactivate"], arg: Arg::Optional, op: Some(OpKind::SuspendWorkload);
        ResumeWorkload => "resume_workload", "Resume a suspended Kueue Workload: Kueue requeues it (:unsuspend [NS/NAME]; preview first)",
            aliases: &["unsuspend", "activate"], arg: Arg::Optional, op: Some(OpKind::ResumeWorkload);
        Reclaim => "reclaim", "Free the GPUs of the selected pod through its owner: scale down, suspend the Job, or evict (preview first)",
            aliases: &["reclaim"], arg: Arg::Optional, op: Some(OpKind::Reclaim);
        HostPower => "host_power", "Reboot the selected node's Metal3 host (:host [reboot|off|on|inspect]; preview first)",
            aliases: &["host", "bmh"], arg: Arg::Optional, op: Some(OpKind::RebootHost);
        Confirm => "confirm", "Confirm the previewed operation";
        Cancel => "cancel", "Cancel the dialog or the running operation";
        ToggleForce => "toggle_force", "In a drain preview: also delete unmanaged and emptyDir pods";
        Describe => "describe", "Show the selected object as the API server holds it: YAML and its events",
            aliases: &["yaml", "describe"];
        Edit => "edit", "Edit the selected object in $KUBE_EDITOR / $EDITOR (kubectl edit); the terminal comes back when it exits",
            aliases: &["edit"];
        Shell => "shell", "Open a shell in the selected pod (kubectl exec -it); the terminal comes back when it exits",
            aliases: &["shell", "exec", "sh"];
        FindNext => "find_next", "In a pane: the next line with the text found by /";
        FindPrev => "find_prev", "In a pane: the previous line with the text found by /";
        Logs => "logs", "Stream the selected pod's log (on a GPU: its pod's) through the API server",
            aliases: &["logs", "log"];
        LogFollow => "log_follow", "In the logs pane: follow new lines, or stop following";
        LogPrevious => "log_previous", "In the logs pane: the container's previous run, or its current one";
        LogContainer => "log_container", "In the logs pane: the pod's next container";
        LogWrap => "log_wrap", "In the logs pane: wrap long lines, or cut them at the edge";
        LogTimestamps => "log_timestamps", "In the logs pane: the kubelet's time in front of each line, or not";
        Copy => "copy", "Copy the selected row's name (in a pane: all its text) to the clipboard; OSC 52 works through SSH and tmux",
            aliases: &["copy", "yank"];
    }
    typed {
        // vim's "quit anyway": running operations are recorded as interrupted.
        QuitNow => "quit_now", "Quit at once; running operations are recorded as interrupted",
            aliases: &["q!", "quit!"], usage: Some(("q!", "quit at once (running operations: interrupted)"));
        OpenNode => "open_node", "Open a node by name", aliases: &["node", "no"], arg: Arg::Required,
            usage: Some(("node NAME / :gpu NODE/INDEX", "open a node or a GPU by name"));
        OpenGpu => "open_gpu", "Open a GPU by NODE/INDEX or uuid", aliases: &["gpu"], arg: Arg::Required;
        Kubectl => "kubectl", "Run kubectl with this cockpit's context (reading verbs) and show its output",
            aliases: &["kubectl", "k"], arg: Arg::Required,
            usage: Some(("kubectl ARGS", "run kubectl get/describe/logs/top/… here; output in a pane"));
        Context => "context", "List the kubeconfig's contexts, or switch to one",
            aliases: &["ctx", "context", "contexts"], arg: Arg::Optional;
    }
}

/// Top-level views; each has a `:` name and aliases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ViewKind {
    Fleet,
    Gpus,
    Tenants,
    Quotas,
    Pods,
    Events,
    Ops,
    Domains,
    Workloads,
    Capi,
    Hosts,
}

impl ViewKind {
    pub const ALL: [ViewKind; 11] = [
        ViewKind::Fleet,
        ViewKind::Gpus,
        ViewKind::Tenants,
        ViewKind::Quotas,
        ViewKind::Pods,
        ViewKind::Events,
        ViewKind::Ops,
        ViewKind::Domains,
        ViewKind::Workloads,
        ViewKind::Capi,
        ViewKind::Hosts,
    ];
    pub fn name(self) -> &'static str {
        match self {
            ViewKind::Fleet => "fleet",
            ViewKind::Gpus => "gpus",
            ViewKind::Tenants => "tenants",
            ViewKind::Quotas => "quotas",
            ViewKind::Pods => "pods",
            ViewKind::Events => "events",
            ViewKind::Ops => "ops",
            ViewKind::Domains => "domains",
            ViewKind::Workloads => "workloads",
            ViewKind::Capi => "capi",
            ViewKind::Hosts => "hosts",
        }
    }
    pub fn title(self) -> &'static str {
        match self {
            ViewKind::Fleet => "Fleet",
            ViewKind::Gpus => "GPUs",
            ViewKind::Tenants => "Tenants",
            ViewKind::Quotas => "Quotas",
            ViewKind::Pods => "Pods",
            ViewKind::Events => "Events",
            ViewKind::Ops => "Operations",
            ViewKind::Domains => "Domains",
            ViewKind::Workloads => "Workloads",
            ViewKind::Capi => "Cluster API",
            ViewKind::Hosts => "Hosts",
        }
    }
    /// The key its tab shows (the default keymap's).
    pub fn tab_key(self) -> &'static str {
        match self {
            ViewKind::Fleet => "1",
            ViewKind::Gpus => "2",
            ViewKind::Tenants => "3",
            ViewKind::Quotas => "4",
            ViewKind::Pods => "5",
            ViewKind::Events => "6",
            ViewKind::Ops => "7",
            ViewKind::Domains => "8",
            ViewKind::Workloads => "9",
            ViewKind::Capi => "M",
            ViewKind::Hosts => "O",
        }
    }
    /// Its `:` names, from the command table.
    pub fn aliases(self) -> &'static [&'static str] {
        self.command().spec().aliases
    }
    pub fn from_alias(s: &str) -> Option<ViewKind> {
        let s = s.trim().to_ascii_lowercase();
        ViewKind::ALL.into_iter().find(|v| v.aliases().contains(&s.as_str()))
    }
    pub fn command(self) -> Command {
        match self {
            ViewKind::Fleet => Command::ViewFleet,
            ViewKind::Gpus => Command::ViewGpus,
            ViewKind::Tenants => Command::ViewTenants,
            ViewKind::Quotas => Command::ViewQuotas,
            ViewKind::Pods => Command::ViewPods,
            ViewKind::Events => Command::ViewEvents,
            ViewKind::Ops => Command::ViewOps,
            ViewKind::Domains => Command::ViewDomains,
            ViewKind::Workloads => Command::ViewWorkloads,
            ViewKind::Capi => Command::ViewCapi,
            ViewKind::Hosts => Command::ViewHosts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for c in Command::ALL {
            assert!(seen.insert(c.name()), "duplicate name {}", c.name());
            assert_eq!(Command::from_name(c.name()), Some(*c));
            assert!(!c.doc().is_empty());
        }
        assert_eq!(Command::from_name("nope"), None);
    }

    #[test]
    fn aliases_resolve_to_views_and_do_not_collide() {
        let mut seen = std::collections::HashSet::new();
        for v in ViewKind::ALL {
            for a in v.aliases() {
                assert!(seen.insert(*a), "alias {a} used twice");
                assert_eq!(ViewKind::from_alias(a), Some(v));
            }
        }
        assert_eq!(ViewKind::from_alias(" Nodes "), Some(ViewKind::Fleet));
        assert_eq!(ViewKind::from_alias("bogus"), None);
    }

    #[test]
    fn the_table_is_in_command_order_and_typed_names_do_not_collide() {
        for (i, spec) in TABLE.iter().enumerate() {
            assert_eq!(spec.command as usize, i, "{}", spec.name);
            assert!(!spec.doc.is_empty(), "{}", spec.name);
        }
        // Among commands with the same kind of argument, a `:` name means one thing.
        for a in TABLE {
            for b in
                TABLE.iter().filter(|b| b.command > a.command && (b.arg == Arg::Required) == (a.arg == Arg::Required))
            {
                for name in a.aliases {
                    if b.aliases.contains(name) {
                        // Only `q` is shared, and quit (earlier) wins it.
                        assert_eq!((*name, a.command, b.command), ("q", Command::Quit, Command::ViewQuotas));
                    }
                }
            }
        }
        let ops: Vec<Command> = Command::ALL.iter().copied().filter(|c| c.op().is_some()).collect();
        assert_eq!(
            ops,
            [
                Command::Cordon,
                Command::Uncordon,
                Command::Drain,
                Command::Reslice,
                Command::EditQuota,
                Command::TaintGpu,
                Command::UntaintGpu,
                Command::HoldQueue,
                Command::ResumeQueue,
                Command::SuspendWorkload,
                Command::ResumeWorkload,
                Command::Reclaim,
                Command::HostPower
            ]
        );
    }

    #[test]
    fn command_line_names() {
        let cases = [
            ("q", false, Some(Command::Quit)),
            ("q", true, Some(Command::Quit)),
            ("exit", false, Some(Command::Quit)),
            ("Q", false, Some(Command::ViewQuotas)),
            ("q!", false, Some(Command::QuitNow)),
            ("quit!", false, Some(Command::QuitNow)),
            ("?", false, Some(Command::Help)),
            ("node", false, Some(Command::ViewFleet)),
            ("node", true, Some(Command::OpenNode)),
            ("NODE", true, Some(Command::ViewFleet)),
            ("no", true, Some(Command::OpenNode)),
            ("gpu", false, Some(Command::ViewGpus)),
            ("gpu", true, Some(Command::OpenGpu)),
            ("gpus", true, Some(Command::ViewGpus)),
            ("ctx", false, Some(Command::Context)),
            ("contexts", true, Some(Command::Context)),
            ("Tenants", false, Some(Command::ViewTenants)),
            ("drain", false, None),
            ("bogus", true, None),
        ];
        for (word, has_arg, want) in cases {
            assert_eq!(Command::from_alias(word, has_arg), want, "{word} {has_arg}");
        }
    }

    #[test]
    fn help_lists_the_command_line_as_before() {
        let lines = cmdline_help();
        assert_eq!(lines[0], "  :fleet :nodes :node :no :n Fleet");
        assert_eq!(lines[7], "  :domains :domain :computedomains :cd Domains");
        assert_eq!(lines[8], "  :workloads :workload :wl :kueue Workloads");
        assert_eq!(lines[9], "  :capi :machines :md :mhc Cluster API");
        assert_eq!(lines[10], "  :hosts :bmhs :baremetalhosts Hosts");
        assert_eq!(lines[11], "  :node NAME / :gpu NODE/INDEX   open a node or a GPU by name");
        assert_eq!(lines[12], "  :q  :quit                      quit (asks first while operations run)");
        assert_eq!(lines[13], "  :q!                            quit at once (running operations: interrupted)");
        assert_eq!(lines.len(), 14);
    }
}
