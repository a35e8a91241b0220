//! The node agent (`fabrik agent`): GPU telemetry from a backend (NVML on a GPU node, a
//! deterministic fake elsewhere) served read-only over HTTP, in dcgm-exporter-compatible
//! metrics and in versioned JSON shared with the cockpit.

pub mod backend;
pub mod fake;
pub mod gpm;
pub mod metrics;
pub mod nvml;
pub mod podres;
pub mod procmap;
pub mod server;
pub mod wire;

pub use server::{AgentConfig, parse_interval};
