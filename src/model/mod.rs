//! The domain model: what an AI factory is, as the cockpit knows it. Pure: no I/O, no
//! clocks, no async. State enters only through [`Delta`]s applied to a [`Fleet`].

pub mod capi;
pub mod delta;
pub mod dra;
pub mod fleet;
pub mod gitops;
pub mod history;
pub mod inspect;
pub mod intern;
pub mod isolation;
pub mod kueue;
pub mod logs;
pub mod metal3;
pub mod pending;
pub mod sharing;
pub mod slab;
pub mod types;

pub use capi::{CapiKind, CapiObject, HealthCounts, Machine, Replicas};
pub use delta::*;
pub use dra::{CapacityShare, ComputeDomainSpec, CounterFit, DeviceTaint, DomainNode, GpuDra};
pub use fleet::{CapiRow, FeedsState, Fleet, GPU_QUOTA_RESOURCES, Totals};
pub use gitops::{GitOpsOwner, GitOpsTool};
pub use history::{HISTORY_LEN, Ring, Sample};
pub use inspect::{InspectDoc, InspectEvent, InspectTarget, Inspected};
pub use intern::{Interner, Sym};
pub use isolation::{NetPolicySpec, NsIsolation, PolicyDir, TenantIsolation};
pub use kueue::{KueueWorkload, WorkloadCondition, WorkloadState, queued_text};
pub use logs::{KEEP_LINES, LogBuffer, LogEvent, LogRequest, LogState};
pub use metal3::{BareMetalHost, Hardware, HostRef};
pub use pending::{QuotaRefusal, Waiting};
pub use sharing::{ShareMode, Sharing};
pub use slab::{Slab, SlabId};
pub use types::*;

#[cfg(test)]
pub(crate) mod tests;
