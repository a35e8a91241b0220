//! Views: pure functions from `&Fleet` (and `&Ui`) to rows and widgets.

pub mod detail;
pub mod tables;
