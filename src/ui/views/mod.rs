//! Views: pure functions from `&Fleet` (and `&Ui`) to rows and widgets. Each table view is
//! one module with its `COLUMNS` table (see `column`); `tables` is what they share.
//!
//! Adding a column is one `Column::new(NAME, width)` entry in its view's `COLUMNS`: its
//! typed `value` (what it sorts by), a `cell` when it is drawn otherwise than its value,
//! `priority`/`min`/`grow` for narrow and wide screens, `live` when telemetry moves it,
//! `filter` when `/` should read it. The table, the sort, the filter, `fabrik snapshot
//! --format table|markdown` and the wide toggle follow; a JSON key, if the column deserves
//! one, is a line in the view's `json` (a new key stays within `fabrik.snapshot/v1`).

pub mod capi;
pub mod cell;
pub mod clusters;
pub mod column;
pub mod detail;
pub mod domains;
pub mod events;
pub mod fleet;
pub mod gpus;
pub mod hosts;
pub mod inspect;
pub mod logs;
pub mod ops;
pub mod pods;
pub mod quotas;
pub mod tables;
pub mod tenants;
pub mod workloads;

pub use column::RowId;
