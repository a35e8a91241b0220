//! The one trait every GPU backend implements: NVML on a GPU node, a deterministic fake
//! elsewhere. Sampling is blocking (NVML calls are), so the agent calls it from a
//! blocking thread and shares the result with every reader.

use super::podres::Assignment;
use super::wire::NodeSample;

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// libnvidia-ml could not be loaded: no driver on this machine.
    #[error(
        "NVIDIA driver library not found ({0}): this machine has no NVIDIA driver; run `fabrik agent --fake 8` for a simulated node"
    )]
    NoDriver(String),
    #[error("NVML: {0}")]
    Nvml(String),
    #[error("{0}")]
    Other(String),
}

pub trait Gpus: Send {
    /// "nvml" or "fake".
    fn name(&self) -> &'static str;
    /// One sample set of every GPU on the node, taken now.
    fn sample(&mut self, now_ms: u64) -> Result<NodeSample, BackendError>;
    /// What the kubelet has handed out (its PodResources answer), told before each sample.
    /// A real GPU's processes are what they are, so NVML ignores it; the fake runs a shared
    /// GPU's work as the pods the kubelet gave its replicas.
    fn allocated(&mut self, _rows: &[Assignment]) {}
}
