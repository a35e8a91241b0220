//! Subcommands and their flags.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "fabrik",
    version,
    about = "A terminal cockpit for GPU clusters on Kubernetes",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Cmd>,
    #[command(flatten)]
    pub ui: UiArgs,
    /// Kubeconfig to use (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubernetes context to use (default: the current context).
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// Stream GPU telemetry from a node agent directly (repeatable): http://HOST:PORT.
    #[arg(long = "agent", value_name = "URL")]
    pub agents: Vec<String>,
    /// Label selector of the agent DaemonSet's pods; their telemetry streams through the API
    /// server's pod proxy for the nodes on screen. An empty value turns this off.
    #[arg(long, value_name = "SELECTOR", default_value = crate::feed::agents::DEFAULT_SELECTOR)]
    pub agent_selector: String,
    /// Fleet-wide GPU telemetry from Prometheus (dcgm-exporter or agent series), one query
    /// every --prometheus-every: http://HOST:PORT[/PREFIX].
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,
    /// How often to query --prometheus (e.g. 5s, 30s; 1s to 1h).
    #[arg(long, value_name = "INTERVAL", default_value = "5s", value_parser = parse_every)]
    pub prometheus_every: std::time::Duration,
}

#[derive(Args, Debug, Clone, Default)]
pub struct UiArgs {
    /// Theme name: dark, light, high-contrast, or a file in the config directory's themes/.
    #[arg(long, global = true)]
    pub theme: Option<String>,
    /// Keymap name: default, k9s, or a file in the config directory's keymaps/.
    #[arg(long, global = true)]
    pub keymap: Option<String>,
    /// Disable every operation (cordon, drain, reslice, quota edits).
    #[arg(long, global = true)]
    pub readonly: bool,
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
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Run the cockpit on the embedded, simulated AI factory (no cluster needed).
    Demo(SimArgs),
    /// Print one view once, for scripts and incident tickets.
    Snapshot(SnapshotArgs),
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
    /// The scale harness: build a simulated factory and measure start-up, ticks, sorting,
    /// frames and memory (run it with --release).
    Bench {
        #[arg(long, default_value_t = 48)]
        nodes: u32,
        #[arg(long, default_value_t = 200)]
        frames: usize,
        #[arg(long, default_value_t = 20)]
        ticks: usize,
    },
    /// Regenerate the README screenshots from the demo at a fixed seed.
    Screenshots {
        #[arg(long, default_value = "screenshots")]
        out: PathBuf,
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
}

#[derive(Args, Debug, Clone)]
pub struct KubeSimArgs {
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
    #[command(flatten)]
    pub sim: SimArgs,
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
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Markdown,
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
    /// The kubelet's PodResources socket, for which pod each GPU was given (default with
    /// NVML: /var/lib/kubelet/pod-resources/kubelet.sock; with --fake: none). "" turns it off.
    #[arg(long, value_name = "PATH")]
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
