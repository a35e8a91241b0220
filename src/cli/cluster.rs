//! Which clusters a command talks to: `--kubeconfig`, `--context` (the cockpit and `fabrik
//! snapshot --view clusters` take several) and `--all-contexts`.

use std::path::PathBuf;

use clap::Args;

/// Which cluster to talk to (`fabrik`, `fabrik snapshot`, `fabrik sim`, …).
#[derive(Args, Debug, Clone, Default)]
pub struct ClusterArgs {
    /// Kubeconfig to use (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubernetes context to use (default: the current context). The cockpit and `fabrik
    /// snapshot --view clusters` take it more than once: one cluster each.
    #[arg(long = "context", id = "context", value_name = "CONTEXT")]
    pub contexts: Vec<String>,
    /// Every context of the kubeconfig (the cockpit, and `fabrik snapshot --view clusters`).
    #[arg(long, conflicts_with = "context")]
    pub all_contexts: bool,
    /// Also open the workload clusters of each Cluster API management cluster given: every
    /// `Cluster` through its kubeconfig Secret (`<name>-kubeconfig`), read with your rights.
    #[arg(long)]
    pub workload_clusters: bool,
}

impl ClusterArgs {
    /// Takes what `root` gave and `self` did not.
    pub(super) fn inherit(&mut self, root: &ClusterArgs) {
        self.kubeconfig = self.kubeconfig.take().or_else(|| root.kubeconfig.clone());
        if self.contexts.is_empty() {
            self.contexts = root.contexts.clone();
        }
        self.all_contexts |= root.all_contexts;
        self.workload_clusters |= root.workload_clusters;
    }

    /// The one context asked for (`None`: the current one).
    pub fn context(&self) -> Option<String> {
        self.contexts.first().cloned()
    }

    /// Whether several clusters were asked for.
    pub fn several(&self) -> bool {
        self.all_contexts || self.workload_clusters || self.contexts.len() > 1
    }

    /// For the commands that work on one cluster: more than one is an error that says so.
    pub(super) fn one(&self, command: &str) -> Result<(), String> {
        if self.several() {
            return Err(format!(
                "`fabrik {command}` works on one cluster: give one --context (several, --all-contexts and --workload-clusters are for the cockpit and `fabrik snapshot --view clusters`)"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Cli, Cmd, ViewArg};

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_args(std::iter::once("fabrik").chain(args.iter().copied()))
    }

    #[test]
    fn the_cockpit_takes_several_contexts_or_all() {
        let Ok(cli) = parse(&["--context", "a", "--context", "b"]) else { panic!("two contexts") };
        assert_eq!(cli.cluster.contexts, ["a", "b"]);
        assert!(cli.cluster.several());
        let Ok(cli) = parse(&["--all-contexts"]) else { panic!("all") };
        assert!(cli.cluster.all_contexts && cli.cluster.contexts.is_empty());
        let Ok(cli) = parse(&["--context", "a"]) else { panic!("one") };
        assert!(!cli.cluster.several());
        assert_eq!(cli.cluster.context().as_deref(), Some("a"));
        // Both at once is a contradiction clap names.
        assert!(parse(&["--all-contexts", "--context", "a"]).is_err());
    }

    #[test]
    fn snapshot_takes_several_and_one_cluster_commands_refuse_them() {
        let Ok(cli) = parse(&["--context", "a", "--context", "b", "snapshot", "--view", "clusters"]) else {
            panic!("snapshot with two contexts")
        };
        let Some(Cmd::Snapshot(a)) = cli.command else { panic!("not snapshot") };
        assert_eq!(
            (a.cluster.contexts.as_slice(), a.view),
            (&["a".to_string(), "b".to_string()][..], ViewArg::Clusters)
        );
        let Ok(cli) = parse(&["snapshot", "--all-contexts", "--view", "clusters"]) else { panic!("all") };
        let Some(Cmd::Snapshot(a)) = cli.command else { panic!("not snapshot") };
        assert!(a.cluster.all_contexts);
        for args in [
            &["sim", "--context", "a", "--context", "b"][..],
            &["--all-contexts", "describe", "node", "n1"],
            &["logs", "--all-contexts", "p", "-n", "ns"],
        ] {
            let Err(e) = parse(args) else { panic!("{args:?} was accepted") };
            assert!(e.to_string().contains("works on one cluster"), "{args:?}: {e}");
        }
    }
}
