//! Producers of `Delta`s. Each runs as its own task and talks to the app task only through
//! one channel of delta batches. Today: the simulator; the Kubernetes watches, node agents
//! and Prometheus arrive with their issues.

pub mod agent;
pub mod agents;
pub mod kube;
pub mod sim;

/// A batch of deltas: one tick of the simulator, or one burst of watch events.
pub type Batch = Vec<crate::model::Delta>;
