//! MIG (Multi-Instance GPU) knowledge for fabrik: the profile catalog per GPU model, the
//! layout planner, mig-parted config names and YAML, capacity facts, and the text reports
//! the CLI prints.
//!
//! Pure and synchronous (std, and serde-saphyr to read and write mig-parted YAML): the model,
//! simulator, UI and CLI all call into it.

mod capacity;
mod catalog;
mod configs;
pub mod parted;
mod planner;
mod report;

pub use capacity::{capacity, caps_text};
pub use catalog::{
    COMPUTE_SLICES, GpuModel, MEMORY_SLICES, Profile, ProfileId, catalog, find_profile, get_profile, profile,
    profile_from_resource, profile_ids,
};
pub use configs::{
    config_names, layout_config_name, mig_parted_file, mig_parted_yaml, mig_parted_yaml_for, named_config, parse_layout,
};
pub use planner::{
    Fragmentation, Layout, LayoutError, PlacedInstance, fragmentation, plan, plan_names, plan_onto, validate_placement,
};
pub use report::{plan_report, profiles_table};
