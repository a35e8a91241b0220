//! Subcommands and their flags.

mod cluster;
mod read;
pub use cluster::ClusterArgs;
pub use read::{DescribeArgs, LogsArgs};

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// `fabrik --version`: the package version and the git revision the binary was built from
/// (`-dirty` when its sources differed from that commit; `unknown` outside a git checkout,
/// unless `FABRIK_GIT_REV` was set for the build). See build.rs.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (git ", env!("FABRIK_GIT_REV"), ")");

#[derive(Parser, Debug)]
#[command(
    name = "fabrik",
    version = VERSION,
    about = "A terminal cockpit for GPU clusters on Kubernetes",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Cmd>,
    #[command(flatten)]
    pub ui: UiArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Stream GPU telemetry from a node agent directly (repeatable): http://HOST:PORT.
    #[arg(long = "agent", value_name = "URL")]
    pub agents: Vec<String>,
    /// Label selector of the agent DaemonSet's pods; their telemetry streams through the API
    /// server's pod proxy for the nodes on screen. An empty value turns this off.
    #[arg(long, value_name = "SELECTOR", default_value = crate::feed::agent_discovery::DEFAULT_SELECTOR)]
    pub agent_selector: String,
    /// The namespace of the agent DaemonSet: agents are taken only from its pods there that a
    /// DaemonSet owns, so a tenant's pod carrying the selector's label feeds nothing.
    #[arg(long, value_name = "NAMESPACE", default_value = crate::feed::agent_discovery::DEFAULT_NAMESPACE)]
    pub agent_namespace: String,
    /// Fleet-wide GPU telemetry from Prometheus (dcgm-exporter or agent series), one query
    /// every --prometheus-every: http://HOST:PORT[/PREFIX].
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,
    /// How often to query --prometheus (e.g. 5s, 30s; 1s to 1h).
    #[arg(long, value_name = "INTERVAL", default_value = "5s", value_parser = parse_every)]
    pub prometheus_every: std::time::Duration,
}

/// The cockpit's own options (`fabrik` and `fabrik demo`).
#[derive(Args, Debug, Clone, Default)]
pub struct UiArgs {
    /// Theme name: dark, light, high-contrast, or a file in the config directory's themes/.
    #[arg(long)]
    pub theme: Option<String>,
    /// Keymap name: default, k9s, or a file in the config directory's keymaps/.
    #[arg(long)]
    pub keymap: Option<String>,
    /// Disable every operation (cordon, drain, reslice, quota edits).
    #[arg(long)]
    pub readonly: bool,
}

impl UiArgs {
    /// Takes what `root` gave and `self` did not.
    fn inherit(&mut self, root: &UiArgs) {
        self.theme = self.theme.take().or_else(|| root.theme.clone());
        self.keymap = self.keymap.take().or_else(|| root.keymap.clone());
        self.readonly |= root.readonly;
    }
}

impl Cli {
    /// Parses the process's arguments; on an error prints it (or the help) and exits, as
    /// clap does.
    pub fn parse_args() -> Cli {
        Cli::try_parse_args(std::env::args_os()).unwrap_or_else(|e| e.exit())
    }

    /// Parses `args` (the first is the program name). Each subcommand has only its own
    /// options; for compatibility the cockpit's `--theme`, `--keymap` and `--readonly` may
    /// also come before `demo` (and `--theme` before `screenshots`), and `--kubeconfig` and
    /// `--context` before `snapshot` and `sim`: they are handed down to the subcommand
    /// (its own flag wins). Any other option of the cockpit given with a subcommand is an
    /// error rather than silently ignored.
    pub fn try_parse_args<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::{CommandFactory, FromArgMatches};
        let mut cmd = Cli::command();
        let matches = cmd.try_get_matches_from_mut(args)?;
        let mut cli = Cli::from_arg_matches(&matches)?;
        let given: Vec<&str> = ROOT_ARGS
            .iter()
            .copied()
            .filter(|id| matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
            .collect();
        cli.hand_down(&given).map_err(|msg| cmd.error(clap::error::ErrorKind::ArgumentConflict, msg))?;
        Ok(cli)
    }

    /// Moves the root options in `given` (argument ids) to the subcommand that uses them.
    fn hand_down(&mut self, given: &[&str]) -> Result<(), String> {
        let Some(sub) = self.command.as_mut() else { return Ok(()) };
        let (name, takes): (&str, &[&str]) = match sub {
            Cmd::Demo(d) => {
                d.ui.inherit(&self.ui);
                ("demo", &["theme", "keymap", "readonly"])
            }
            Cmd::Screenshots { theme, .. } => {
                *theme = theme.take().or_else(|| self.ui.theme.clone());
                ("screenshots", &["theme"])
            }
            Cmd::Snapshot(a) => {
                a.cluster.inherit(&self.cluster);
                ("snapshot", &["kubeconfig", "context", "all_contexts", "workload_clusters"])
            }
            Cmd::Sim(a) => {
                a.cluster.inherit(&self.cluster);
                a.cluster.one("sim")?;
                ("sim", &["kubeconfig", "context", "all_contexts", "workload_clusters"])
            }
            Cmd::Describe(a) => {
                a.cluster.inherit(&self.cluster);
                a.cluster.one("describe")?;
                ("describe", &["kubeconfig", "context", "all_contexts", "workload_clusters"])
            }
            Cmd::Logs(a) => {
                a.cluster.inherit(&self.cluster);
                a.cluster.one("logs")?;
                ("logs", &["kubeconfig", "context", "all_contexts", "workload_clusters"])
            }
            Cmd::Audit(_) => ("audit", &[]),
            Cmd::Mig(_) => ("mig", &[]),
            Cmd::Agent(_) => ("agent", &[]),
            Cmd::Bench { .. } => ("bench", &[]),
            Cmd::Completions { .. } => ("completions", &[]),
            Cmd::Man { .. } => ("man", &[]),
        };
        match given.iter().find(|id| !takes.contains(id)) {
            Some(id) => Err(format!(
                "{} is an option of the cockpit, not of `fabrik {name}` (see `fabrik {name} --help`)",
                flag_of(id)
            )),
            None => Ok(()),
        }
    }
}

/// The argument ids of the root command's own options.
const ROOT_ARGS: [&str; 12] = [
    "theme",
    "keymap",
    "readonly",
    "kubeconfig",
    "context",
    "all_contexts",
    "workload_clusters",
    "agents",
    "agent_selector",
    "agent_namespace",
    "prometheus",
    "prometheus_every",
];

/// `--agent-selector` for the id `agent_selector`.
fn flag_of(id: &str) -> String {
    match id {
        "agents" => "--agent".to_string(),
        id => format!("--{}", id.replace('_', "-")),
    }
}

/// `fabrik demo`: the simulated factory and the cockpit's options.
#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    #[command(flatten)]
    pub sim: SimArgs,
    #[command(flatten)]
    pub ui: UiArgs,
    /// Simulate this many clusters (seeds SEED, SEED+1, …) to try the clusters view (`0`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub clusters: u32,
}

#[derive(Args, Debug, Clone)]
pub struct SimArgs {
    /// Seed of the simulated factory: the same seed gives the same factory.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Number of simulated GPU nodes (8 GPUs each).
    #[arg(long, default_value_t = 48, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub nodes: u32,
    /// Simulated tick in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub tick_ms: u64,
    /// Every Nth node without MIG has its GPUs shared by the device plugin (time-slicing ×4,
    /// MPS ×2, time-slicing ×4 as `nvidia.com/gpu.shared`, in turn); 0: none.
    #[arg(long, default_value_t = crate::demo::DEMO_SHARING_EVERY)]
    pub sharing_every: u32,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Run the cockpit on the embedded, simulated AI factory (no cluster needed).
    Demo(DemoArgs),
    /// Print one view once, for scripts and incident tickets.
    Snapshot(SnapshotArgs),
    /// One object as the API server holds it (YAML, managedFields folded) and the events about
    /// it, as the cockpit's `y` shows it: `fabrik describe pod NAME -n NAMESPACE`.
    Describe(DescribeArgs),
    /// A container's log through the API server, as the cockpit's `L` streams it (no kubectl
    /// needed): `fabrik logs POD -n NAMESPACE [-c CONTAINER] [-p] [-f] [--tail N]`.
    Logs(LogsArgs),
    /// Play simulated GPU nodes (kubelet, device plugin, DRA driver, mig-manager) against a
    /// real API server, for tests and demos on a test control plane. Never touches real nodes.
    Sim(KubeSimArgs),
    /// Show the audit log of operations (planned, confirmed, each step, outcome); operations
    /// that never reached an outcome are marked INTERRUPTED.
    Audit(AuditArgs),
    /// The MIG planner, without a cluster.
    #[command(subcommand)]
    Mig(MigCmd),
    /// The node agent: GPU telemetry from NVML (or a fake) over a read-only HTTP API.
    Agent(AgentArgs),
    /// The scale harness: a simulated factory's start-up, ticks, sorts, frames, memory.
    Bench {
        #[arg(long, default_value_t = 48)]
        nodes: u32,
        #[arg(long, default_value_t = 200)]
        frames: usize,
        #[arg(long, default_value_t = 20)]
        ticks: usize,
        /// Tenants (at least 8; teams of ten 1-GPU pods). Default: one per 13 nodes.
        #[arg(long)]
        tenants: Option<u32>,
        /// Print one JSON object with every figure on stdout (the readable lines on stderr).
        #[arg(long)]
        json: bool,
        /// Instead: replay this recorded list (`kubectl get pods -A -o json`) as a watch-list
        /// to the feed's kube client and report decode throughput (objects/s per core).
        #[arg(long, value_name = "LIST.json")]
        decode: Option<std::path::PathBuf>,
    },
    /// Print a shell completion script: `source <(fabrik completions bash)`; zsh:
    /// `fabrik completions zsh > "${fpath[1]}/_fabrik"`; fish:
    /// `fabrik completions fish > ~/.config/fish/completions/fabrik.fish`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `fabrik man | man -l -`. With --out DIR, write fabrik.1 and
    /// a page per subcommand (fabrik-demo.1, …) there, for a man directory.
    Man {
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Regenerate the README screenshots from the demo at a fixed seed.
    Screenshots {
        #[arg(long, default_value = "screenshots")]
        out: PathBuf,
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Theme name: dark, light, high-contrast, or a file in the config directory's themes/.
        #[arg(long)]
        theme: Option<String>,
    },
}

#[derive(Args, Debug, Clone)]
pub struct KubeSimArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Number of simulated GPU nodes (8 GPUs each).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=20_000))]
    pub nodes: u32,
    /// Seed: the same seed gives the same nodes and workloads.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Also create a tenant workload mix (namespaces, quotas, GPU workloads, PDBs).
    #[arg(long)]
    pub workload: bool,
    /// Target number of GPU pods in the workload mix (default: about 60% of the GPUs).
    #[arg(long)]
    pub pods: Option<u32>,
    /// Every Nth node hands out its GPUs through DRA instead of the device plugin (0: none).
    #[arg(long, default_value_t = 4)]
    pub dra_every: u32,
    /// Every Nth node without MIG has its GPUs shared by the device plugin (time-slicing ×4,
    /// MPS ×2, time-slicing ×4 as `nvidia.com/gpu.shared`, in turn), unless it is a DRA
    /// node; the workload then puts pods on them (0: none).
    #[arg(long, default_value_t = 0)]
    pub sharing_every: u32,
    /// Kubernetes 1.34's alpha DRA features on the DRA nodes (needs the DRA alpha feature
    /// gates): two partitionable GPUs (dynamic MIG), a GPU shared by capacity, a GPU tainted
    /// by its driver; with --workload, pods with claims on them; a DeviceTaintRule (when
    /// resource.k8s.io/v1alpha3 is served) and two ComputeDomains with status (when their CRD
    /// is installed), their nodes labelled with their NVLink clique.
    #[arg(long)]
    pub dra_alpha: bool,
    /// The nodes as a Cluster API management cluster states them (namespace capi-sim): a
    /// Cluster with its KubeadmControlPlane, a MachineDeployment and MachineSet per GPU model,
    /// a Machine and a Metal3 BareMetalHost per node (every 7th host in a BMC error, the second
    /// node's Machine being remediated), a MachineHealthCheck, with the status their
    /// controllers would write (--workload adds tenants' NetworkPolicies). Needs Cluster API's
    /// and Metal3's CRDs installed.
    #[arg(long)]
    pub factory: bool,
    /// Seconds mig-manager spends in `pending` before a reconfiguration succeeds or fails. The config
    /// name `fabrik-wedged` stays `pending` for good (for stuck-reslice tests); the node annotation
    /// `fabrik.io/sim-fault=notready` stops a node's kubelet until it is removed.
    #[arg(long, default_value_t = 3)]
    pub mig_seconds: u64,
    /// Milliseconds mig-manager takes to react to a new `nvidia.com/mig.config` before it sets
    /// `pending` (a real one validates the config first); meanwhile the state still says what
    /// the previous config left.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub mig_delay_ms: u64,
    /// Also run a fake node agent for each node (at most 250), reachable as the cockpit
    /// reaches real ones: agent pods in fabrik-system, through the API server's pod proxy.
    /// Needs root and iproute2 (the agents listen in a network namespace this makes).
    #[arg(long)]
    pub agents: bool,
    /// Remove the simulated nodes (and the workload mix) from the cluster, then exit.
    #[arg(long)]
    pub cleanup: bool,
}

impl KubeSimArgs {
    /// The simulator's options, less the connection.
    pub fn options(&self) -> crate::kubesim::Options {
        crate::kubesim::Options {
            nodes: self.nodes,
            seed: self.seed,
            workload: self.workload,
            pods: self.pods,
            dra_every: self.dra_every,
            sharing_every: self.sharing_every,
            dra_alpha: self.dra_alpha,
            factory: self.factory,
            mig_seconds: self.mig_seconds,
            mig_delay_ms: self.mig_delay_ms,
            agents: self.agents,
            cleanup: self.cleanup,
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct AuditArgs {
    /// Every record (each step, block and log line) instead of one line per operation.
    #[arg(long)]
    pub records: bool,
    /// Only operations on this target (node, quota) or of this kind (drain, reslice, ...).
    #[arg(long, default_value = "")]
    pub filter: String,
    /// Show the last N operations (or records).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: u32,
    /// Print the log's path and exit.
    #[arg(long)]
    pub path: bool,
}

#[derive(Args, Debug)]
pub struct SnapshotArgs {
    /// Take the snapshot from the simulated factory (default: the current kube context).
    #[arg(long)]
    pub demo: bool,
    #[arg(long, value_enum, default_value_t = ViewArg::Fleet)]
    pub view: ViewArg,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Only rows containing this text (case-insensitive; a leading ! inverts).
    #[arg(long, default_value = "")]
    pub filter: String,
    /// Simulated seconds to run before the snapshot.
    #[arg(long, default_value_t = 5)]
    pub ticks: u32,
    /// On a cluster: give up when the initial listing takes longer than this.
    #[arg(long, default_value_t = 60)]
    pub timeout_secs: u64,
    /// Write an incident bundle instead of one view: every view, the alerts, the topology
    /// and the audit lines, as one Markdown file (`-`: standard output). An existing file is
    /// never overwritten.
    #[arg(long, value_name = "FILE.md")]
    pub bundle: Option<PathBuf>,
    /// The bundle covers this node: its GPUs, pods, tenants, events, operations.
    #[arg(long, value_name = "NODE", requires = "bundle", conflicts_with = "tenant")]
    pub node: Option<String>,
    /// The bundle covers this tenant: its quotas, pods, the nodes they run on, its events.
    #[arg(long, value_name = "TENANT", requires = "bundle")]
    pub tenant: Option<String>,
    #[command(flatten)]
    pub sim: DemoFactoryArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// The simulated factory of `fabrik snapshot --demo` (it runs `--ticks` simulated seconds,
/// so it has no `--tick-ms`).
#[derive(Args, Debug, Clone)]
pub struct DemoFactoryArgs {
    /// Seed of the simulated factory: the same seed gives the same factory.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Number of simulated GPU nodes (8 GPUs each).
    #[arg(long, default_value_t = 48, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub nodes: u32,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewArg {
    Fleet,
    Gpus,
    Tenants,
    Quotas,
    Pods,
    Events,
    Ops,
    Domains,
    Workloads,
    /// Cluster API: Clusters, control planes, MachineDeployments, MachineSets, Machines,
    /// MachineHealthChecks, as a tree.
    Capi,
    /// Metal3 BareMetalHosts: state, power, errors, hardware, the node each serves.
    Hosts,
    /// One row per cluster: --context (repeatable) or --all-contexts.
    Clusters,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Markdown,
}

impl From<Format> for crate::ui::export::Format {
    fn from(f: Format) -> Self {
        match f {
            Format::Table => Self::Table,
            Format::Json => Self::Json,
            Format::Markdown => Self::Markdown,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum MigCmd {
    /// List the MIG profiles of a GPU model, with placements.
    Profiles {
        /// GPU model: A100-40GB, A100-80GB, H100-80GB, H200-141GB, B200.
        #[arg(long)]
        model: String,
    },
    /// Place a layout on one GPU: exit 0 with the placements, exit 1 with the reason.
    Plan {
        #[arg(long)]
        model: String,
        /// A config name (all-balanced, all-1g.10gb, ...) or profiles: 3g.40gb,2g.20gb,1g.10gb
        layout: String,
    },
}

#[derive(Args, Debug, Clone)]
pub struct AgentArgs {
    /// Address to serve /metrics, /v1/snapshot, /v1/stream and /healthz on.
    #[arg(long, default_value = "0.0.0.0:9400")]
    pub listen: std::net::SocketAddr,
    /// Simulate N GPUs instead of reading NVML (for machines without a GPU).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub fake: Option<u32>,
    /// Seed of the fake GPUs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Sampling interval, shared by every reader (100ms to 1h; e.g. 500ms, 1s, 5s).
    #[arg(long, default_value = "1s", value_parser = parse_interval)]
    pub interval: std::time::Duration,
    /// Kubernetes node name (default: $NODE_NAME, else the hostname).
    #[arg(long)]
    pub node: Option<String>,
    /// Exit when the process with this PID is gone (`fabrik sim --agents` runs its agents so).
    #[arg(long, hide = true)]
    pub parent: Option<u32>,
    /// Most concurrent /v1/stream readers.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_readers: u32,
    /// Most open connections (readers, scrapes, health checks); the next is answered 503.
    /// Idle connections are closed after 5 s, writes the client does not take after the
    /// stall limit (3 intervals, at least 10 s).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub max_connections: u32,
    /// The kubelet's PodResources socket, for which pod each GPU was given (default with
    /// NVML: /var/lib/kubelet/pod-resources/kubelet.sock; with --fake: none). "" turns it off.
    // clap's PathBuf parser refuses an empty value; "" is how the socket is turned off.
    #[arg(long, value_name = "PATH",
          value_parser = clap::builder::TypedValueParser::map(clap::builder::OsStringValueParser::new(), std::path::PathBuf::from))]
    pub pod_resources: Option<std::path::PathBuf>,
}

fn parse_every(s: &str) -> Result<std::time::Duration, String> {
    let d = crate::agent::parse_interval(s)?;
    if d < std::time::Duration::from_secs(1) {
        return Err(format!("{s}: querying Prometheus more than once a second only loads it; use 1s or more"));
    }
    Ok(d)
}

/// "500ms", "2s", "1m", or plain seconds ("2"); 100 ms to 1 hour.
pub fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    crate::agent::parse_interval(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// The long flags of the command at `path` (e.g. `["mig", "plan"]`), sorted.
    fn flags(path: &[&str]) -> Vec<String> {
        let mut cmd = Cli::command();
        cmd.build();
        let mut at = &cmd;
        for name in path {
            at = at.find_subcommand(name).unwrap_or_else(|| panic!("no subcommand {name}"));
        }
        let mut out: Vec<String> = at
            .get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long().map(String::from))
            .filter(|l| l != "help" && l != "version")
            .collect();
        out.sort();
        out
    }

    fn sorted(list: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        v.sort();
        v
    }

    #[test]
    fn each_subcommand_shows_only_its_own_options() {
        let cockpit = ["theme", "keymap", "readonly"];
        let cluster = ["kubeconfig", "context", "all-contexts", "workload-clusters"];
        let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
            (
                vec![],
                [
                    &cockpit[..],
                    &cluster[..],
                    &["agent", "agent-selector", "agent-namespace", "prometheus", "prometheus-every"],
                ]
                .concat(),
            ),
            (vec!["demo"], [&cockpit[..], &["seed", "nodes", "tick-ms", "sharing-every", "clusters"]].concat()),
            (
                vec!["snapshot"],
                [
                    &cluster[..],
                    &[
                        "demo",
                        "view",
                        "format",
                        "filter",
                        "ticks",
                        "timeout-secs",
                        "seed",
                        "nodes",
                        "bundle",
                        "node",
                        "tenant",
                    ],
                ]
                .concat(),
            ),
            (vec!["describe"], [&cluster[..], &["namespace"]].concat()),
            (
                vec!["logs"],
                [&cluster[..], &["namespace", "container", "previous", "follow", "timestamps", "tail"]].concat(),
            ),
            (vec!["completions"], vec![]),
            (vec!["man"], vec!["out"]),
            (
                vec!["sim"],
                [
                    &cluster[..],
                    &[
                        "nodes",
                        "seed",
                        "workload",
                        "pods",
                        "dra-every",
                        "sharing-every",
                        "dra-alpha",
                        "factory",
                        "mig-seconds",
                        "mig-delay-ms",
                        "agents",
                        "cleanup",
                    ],
                ]
                .concat(),
            ),
            (vec!["audit"], vec!["records", "filter", "limit", "path"]),
            (vec!["mig"], vec![]),
            (vec!["mig", "profiles"], vec!["model"]),
            (vec!["mig", "plan"], vec!["model"]),
            (
                vec!["agent"],
                vec!["listen", "fake", "seed", "interval", "node", "max-readers", "max-connections", "pod-resources"],
            ),
            (vec!["bench"], vec!["nodes", "frames", "ticks", "tenants", "json", "decode"]),
            (vec!["screenshots"], vec!["out", "seed", "theme"]),
        ];
        let mut seen: Vec<String> = Vec::new();
        for (path, want) in &cases {
            assert_eq!(flags(path), sorted(want), "fabrik {}", path.join(" "));
            seen.push(path.join(" "));
        }
        // Every subcommand is listed above.
        for sub in Cli::command().get_subcommands() {
            assert!(seen.contains(&sub.get_name().to_string()), "{} has no case", sub.get_name());
        }
        // And `--help` prints the same: the cockpit's options are not on `fabrik sim --help`.
        let help = Cli::command().find_subcommand_mut("sim").map(|c| c.render_long_help().to_string());
        let help = help.unwrap_or_default();
        assert!(help.contains("--kubeconfig") && help.contains("--workload"), "{help}");
        for flag in ["--theme", "--keymap", "--readonly", "--prometheus", "--agent "] {
            assert!(!help.contains(flag), "{flag} in fabrik sim --help:\n{help}");
        }
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_args(std::iter::once("fabrik").chain(args.iter().copied()))
    }

    #[test]
    fn an_empty_pod_resources_path_turns_the_socket_off() {
        // Found on a real GPU machine: clap's PathBuf parser refused `--pod-resources ""`,
        // the documented way to run the agent without a kubelet.
        let Ok(cli) = parse(&["agent", "--pod-resources", ""]) else { panic!("--pod-resources \"\" is accepted") };
        let Some(Cmd::Agent(a)) = cli.command else { panic!("agent") };
        assert_eq!(a.pod_resources.as_deref(), Some(std::path::Path::new("")));
        let Ok(cli) = parse(&["agent", "--pod-resources", "/run/k.sock"]) else { panic!("a path") };
        let Some(Cmd::Agent(a)) = cli.command else { panic!("agent") };
        assert_eq!(a.pod_resources.as_deref(), Some(std::path::Path::new("/run/k.sock")));
    }

    #[test]
    fn root_options_before_a_subcommand_go_where_they_apply() {
        // As the e2e tests and scripts call it: cluster options before `snapshot` / `sim`.
        let Ok(cli) = parse(&["--kubeconfig", "k", "--context", "c", "snapshot"]) else { panic!("snapshot") };
        match cli.command {
            Some(Cmd::Snapshot(a)) => {
                assert_eq!(a.cluster.kubeconfig, Some(PathBuf::from("k")));
                assert_eq!(a.cluster.context().as_deref(), Some("c"));
            }
            other => panic!("{other:?}"),
        }
        let Ok(cli) = parse(&["--kubeconfig", "k", "sim", "--context", "mine"]) else { panic!("sim") };
        match cli.command {
            Some(Cmd::Sim(a)) => {
                assert_eq!(a.cluster.kubeconfig, Some(PathBuf::from("k")));
                assert_eq!(a.cluster.context().as_deref(), Some("mine"));
            }
            other => panic!("{other:?}"),
        }
        // The cockpit's options, before or after `demo`; the subcommand's own flag wins.
        let Ok(cli) = parse(&["--readonly", "--theme", "light", "demo", "--theme", "dark", "--keymap", "k9s"]) else {
            panic!("demo")
        };
        match cli.command {
            Some(Cmd::Demo(d)) => {
                assert!(d.ui.readonly);
                assert_eq!(d.ui.theme.as_deref(), Some("dark"));
                assert_eq!(d.ui.keymap.as_deref(), Some("k9s"));
            }
            other => panic!("{other:?}"),
        }
        let Ok(cli) = parse(&["--theme", "light", "screenshots"]) else { panic!("screenshots") };
        assert!(matches!(cli.command, Some(Cmd::Screenshots { theme: Some(ref t), .. }) if t == "light"));
        // The cockpit alone keeps all of them.
        let Ok(cli) = parse(&["--readonly", "--context", "c", "--agent", "http://h:9400"]) else { panic!("cockpit") };
        assert!(cli.command.is_none() && cli.ui.readonly && cli.agents.len() == 1);
        assert_eq!(cli.cluster.context().as_deref(), Some("c"));
    }

    #[test]
    fn options_a_subcommand_does_not_use_are_refused() {
        for args in [
            &["sim", "--theme", "light"][..],
            &["snapshot", "--readonly"],
            &["agent", "--kubeconfig", "k"],
            &["demo", "--context", "c"],
        ] {
            let e = parse(args).map(|_| ()).unwrap_err();
            assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument, "{args:?}: {e}");
        }
        for (args, flag, sub) in [
            (&["--theme", "light", "sim"][..], "--theme", "sim"),
            (&["--readonly", "snapshot"], "--readonly", "snapshot"),
            (&["--kubeconfig", "k", "agent"], "--kubeconfig", "agent"),
            (&["--context", "c", "demo"], "--context", "demo"),
            (&["--prometheus", "http://p:9090", "mig", "profiles", "--model", "B200"], "--prometheus", "mig"),
            (&["--agent", "http://h:9400", "audit"], "--agent", "audit"),
            (&["--keymap", "k9s", "screenshots"], "--keymap", "screenshots"),
        ] {
            let e = parse(args).map(|_| ()).unwrap_err();
            assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict, "{args:?}");
            let text = e.to_string();
            assert!(text.contains(&format!("{flag} is an option of the cockpit, not of `fabrik {sub}`")), "{text}");
        }
    }
}
