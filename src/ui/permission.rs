//! Whether the person may run an operation here, and if not why: the one answer the key that
//! starts an operation, the confirmation that sends it, the footer and the preview all use.
//! `--readonly` comes first; then what the API server's access review said.

use crate::model::Fleet;
use crate::ops::OpKind;

/// Why an operation is disabled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denied {
    /// `--readonly`: nothing is sent to the cluster.
    ReadOnly,
    /// RBAC: the identity may not do what `op` needs.
    Rbac { op: OpKind, why: String },
}

/// May `op` run, with the cockpit read-only or not, on what `fleet` knows of the identity?
pub fn check(readonly: bool, fleet: &Fleet, op: OpKind) -> Result<(), Denied> {
    if readonly {
        return Err(Denied::ReadOnly);
    }
    match fleet.access.as_ref().and_then(|a| a.denied(op.name())) {
        Some(why) => Err(Denied::Rbac { op, why: why.to_string() }),
        None => Ok(()),
    }
}

impl Denied {
    /// Said when the key that starts `what` (a command, as the person knows it) is pressed.
    pub fn on_start(&self, what: &str) -> String {
        match self {
            Denied::ReadOnly => format!("read-only mode (--readonly): {what} is disabled"),
            Denied::Rbac { op, why } => format!("{} is disabled: {why}", op.name()),
        }
    }

    /// Said when a preview is confirmed anyway.
    pub fn on_confirm(&self) -> String {
        match self {
            Denied::ReadOnly => "read-only mode (--readonly): nothing is sent to the cluster".to_string(),
            Denied::Rbac { op, why } => format!("{} is disabled: {why}; nothing was sent", op.name()),
        }
    }

    /// The footer's note beside a disabled command's key.
    pub fn tag(&self) -> &'static str {
        match self {
            Denied::ReadOnly => " (read-only)",
            Denied::Rbac { .. } => " (no RBAC)",
        }
    }
}
