//! A deterministic simulated AI factory: GPU nodes (mixed H100 / H200 / A100, some MIG
//! partitioned), tenants with quotas, workload churn, moving telemetry and faults. It
//! speaks only `Delta`s, like every other feed, and executes the same operation plans the
//! cluster executor will, with realistic progress (evictions one by one, PDBs that block
//! for a while, MIG state pending → success).

mod exec;
mod pods;
mod setup;
mod telemetry;
mod tick;
mod world;

pub use exec::SimRequest;
pub use world::{SIM_EPOCH_MS, Sim, SimConfig};

#[cfg(test)]
mod tests;
