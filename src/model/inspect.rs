//! One object as the API server holds it, asked for by the person (`y` on a row, `fabrik
//! describe`): its YAML with `managedFields` folded, and the events about it. Not watched:
//! fetched once per request, shown with the time it was read.

use super::Ts;

/// Which object: its kind as the API names it (`Pod`, `Node`, `ResourceQuota`, …), its
/// namespace (none for cluster-scoped kinds) and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InspectTarget {
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl InspectTarget {
    pub fn new(kind: &str, namespace: Option<&str>, name: &str) -> Self {
        Self { kind: kind.to_string(), namespace: namespace.map(str::to_string), name: name.to_string() }
    }
    /// `pod/ns/name`, `node/name`.
    pub fn label(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{}/{ns}/{}", self.kind.to_lowercase(), self.name),
            None => format!("{}/{}", self.kind.to_lowercase(), self.name),
        }
    }
}

/// An event about the object, as `kubectl describe` lists them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InspectEvent {
    /// When it last happened (ms).
    pub last: Ts,
    /// `Normal` or `Warning`.
    pub type_: String,
    pub reason: String,
    pub count: u32,
    /// The component that reported it.
    pub from: String,
    pub message: String,
}

/// What the API server answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InspectDoc {
    /// The object as YAML, `managedFields` left out (`folded` says how many entries).
    pub yaml: String,
    pub folded: usize,
    /// Oldest first.
    pub events: Vec<InspectEvent>,
    /// Why the events are missing, when they could not be listed (the object still shows).
    pub events_error: Option<String>,
}

/// One answer: the object, or why there is none (not found, forbidden, not served).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inspected {
    /// The request this answers (the cockpit numbers them: asking again for the same object
    /// waits for the new answer, not the last one).
    pub request: u64,
    pub target: InspectTarget,
    /// When it was read (ms, this machine's clock).
    pub at: Ts,
    pub result: Result<InspectDoc, String>,
}
