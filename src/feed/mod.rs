//! Producers of `Delta`s. Each runs as its own task and talks to the app task only through
//! one channel of delta batches: the Kubernetes watches, node agents (direct or found as
//! pods and streamed through the pod proxy), Prometheus, and the simulator.

pub mod agent;
pub mod agents;
pub mod kube;
pub mod prometheus;
pub mod sim;

pub use crate::model::Batch;
