//! fabrik: a terminal cockpit for GPU clusters on Kubernetes. The library holds every
//! layer (see ARCHITECTURE in the README); `main.rs` only parses the command line.

// Data from outside (the cluster, agents, files, the terminal) never meets an unwrap:
// non-test code may not unwrap or expect at all (issue 14); tests may.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod agent;
pub mod bench;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod demo;
pub mod feed;
pub mod kubesim;
pub mod live;
pub mod mig;
pub mod model;
pub mod ops;
pub mod quantity;
pub mod rng;
pub mod screenshots;
pub mod settings;
pub mod sim;
pub mod testing;
pub mod text;
pub mod ui;

/// Wall-clock time in milliseconds since the Unix epoch (0 if the clock is before it): the
/// time base of every feed and of the agent's samples.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}
