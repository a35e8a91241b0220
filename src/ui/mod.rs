//! The interactive cockpit: state (`Ui`), the update loop (`App`), views, render, themes,
//! keymaps and the terminal driver.

pub mod app;
pub mod bundle;
pub mod command;
pub mod export;
pub mod json;
pub mod keymap;
pub mod permission;
pub mod render;
pub mod run;
pub mod state;
pub mod tabs;
pub mod theme;
pub mod views;

pub use app::{App, ClusterParts, ExecRequest, Executor, FoundCluster, Recorder, Starter};
pub use state::Ui;

#[cfg(test)]
mod tests;
