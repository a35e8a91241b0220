//! Producers of `Delta`s. Each runs as its own task and talks to the app task only through
//! one channel of delta batches: the Kubernetes watches, node agents (direct or found as
//! pods and streamed through the pod proxy), Prometheus, and the simulator.

pub mod agent_discovery;
pub mod agent_stream;
pub mod kube;
pub mod prometheus;
pub mod reconnect;
pub mod sim;
