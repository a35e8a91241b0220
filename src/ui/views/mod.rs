//! Views: pure functions from `&Fleet` (and `&Ui`) to rows and widgets. Each table view is
//! one module with its `COLUMNS` table (see `column`); `tables` is what they share.

pub mod cell;
pub mod column;
pub mod detail;
pub mod events;
pub mod fleet;
pub mod gpus;
pub mod ops;
pub mod pods;
pub mod quotas;
pub mod tables;
pub mod tenants;

pub use column::RowId;
