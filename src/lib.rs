//! fabrik: a terminal cockpit for GPU clusters on Kubernetes. The library holds every
//! layer (see ARCHITECTURE in the README); `main.rs` only parses the command line.

pub mod agent;
pub mod bench;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod feed;
pub mod kubesim;
pub mod live;
pub mod mig;
pub mod model;
pub mod ops;
pub mod quantity;
pub mod sim;
pub mod snapshot;
pub mod ui;
