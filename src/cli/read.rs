//! The arguments of the commands that read one object from a cluster: `describe`, `logs`.

use clap::Args;

use super::ClusterArgs;

#[derive(Args, Debug, Clone)]
pub struct DescribeArgs {
    /// The kind: node, pod, quota, claim, slice, deviceclass, computedomain, cq, lq,
    /// workload, pdb, deployment, statefulset, job, … (`fabrik describe x y` lists them).
    pub kind: String,
    pub name: String,
    /// The namespace of a namespaced kind.
    #[arg(short, long)]
    pub namespace: Option<String>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Args, Debug, Clone)]
pub struct LogsArgs {
    /// The pod.
    pub pod: String,
    /// Its namespace.
    #[arg(short, long, default_value = "default")]
    pub namespace: String,
    /// The container (default: the pod's `kubectl.kubernetes.io/default-container`, else
    /// its first), as kubectl picks it.
    #[arg(short, long)]
    pub container: Option<String>,
    /// The container's previous (terminated) run.
    #[arg(short, long)]
    pub previous: bool,
    /// Keep reading as the container writes, until it stops (or ctrl-c).
    #[arg(short, long)]
    pub follow: bool,
    /// The kubelet's RFC 3339 time in front of each line.
    #[arg(long)]
    pub timestamps: bool,
    /// The last N lines only (at most 10000, the pane's bound).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub tail: Option<u32>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}
