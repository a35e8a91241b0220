//! Named commands: every key press becomes one of these through the keymap. The same table
//! drives keymap files, `?` help and the README, so a command has one name and one doc line.

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

macro_rules! commands {
    ($( $variant:ident => $name:literal, $doc:literal; )*) => {
        /// A named action. `name()` is the snake_case key used in keymap files.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Command { $( $variant, )* }

        impl Command {
            pub const ALL: &'static [Command] = &[ $( Command::$variant, )* ];
            pub fn name(self) -> &'static str {
                match self { $( Command::$variant => $name, )* }
            }
            pub fn doc(self) -> &'static str {
                match self { $( Command::$variant => $doc, )* }
            }
            pub fn from_name(name: &str) -> Option<Command> {
                match name { $( $name => Some(Command::$variant), )* _ => None }
            }
        }
    };
}

commands! {
    Quit => "quit", "Quit fabrik";
    Help => "help", "Show the keys for this view";
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
    ViewFleet => "view_fleet", "Open the fleet (nodes) view";
    ViewGpus => "view_gpus", "Open the GPUs view";
    ViewTenants => "view_tenants", "Open the tenants view";
    ViewQuotas => "view_quotas", "Open the quotas view";
    ViewPods => "view_pods", "Open the GPU pods view";
    ViewEvents => "view_events", "Open the events view";
    ViewOps => "view_ops", "Open the operations view";
    Cordon => "cordon", "Cordon the selected node";
    Uncordon => "uncordon", "Uncordon the selected node";
    Drain => "drain", "Drain the selected node (preview first)";
    Reslice => "reslice", "Reslice MIG on the selected GPU or node (preview first)";
    EditQuota => "edit_quota", "Edit the selected quota (preview first)";
    Confirm => "confirm", "Confirm the previewed operation";
    Cancel => "cancel", "Cancel the dialog or the running operation";
    ToggleForce => "toggle_force", "In a drain preview: also delete unmanaged and emptyDir pods";
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
}

impl ViewKind {
    pub const ALL: [ViewKind; 7] = [
        ViewKind::Fleet,
        ViewKind::Gpus,
        ViewKind::Tenants,
        ViewKind::Quotas,
        ViewKind::Pods,
        ViewKind::Events,
        ViewKind::Ops,
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
        }
    }
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            ViewKind::Fleet => &["fleet", "nodes", "node", "no", "n"],
            ViewKind::Gpus => &["gpus", "gpu", "g", "devices", "mig"],
            ViewKind::Tenants => &["tenants", "tenant", "t", "teams"],
            ViewKind::Quotas => &["quotas", "quota", "q", "rq", "resourcequotas", "cq"],
            ViewKind::Pods => &["pods", "pod", "po", "p", "workloads"],
            ViewKind::Events => &["events", "event", "ev", "alerts"],
            ViewKind::Ops => &["ops", "operations", "op", "audit"],
        }
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
}
