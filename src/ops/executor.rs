//! The executor seam: what the cockpit asks of whoever runs its operations (the simulator,
//! the cluster, a test's recorder), sent without blocking the cockpit.

use super::Plan;

/// What the cockpit asks of an executor (the simulator, or the cluster).
#[derive(Clone, Debug)]
pub enum ExecRequest {
    /// The person opened a preview: audited as `planned`; nothing is sent to the cluster.
    Preview {
        id: u64,
        plan: Box<Plan>,
    },
    Execute {
        id: u64,
        plan: Box<Plan>,
    },
    Cancel {
        id: u64,
    },
}

/// Where the cockpit sends its requests.
pub trait Executor: Send {
    fn send(&mut self, req: ExecRequest);
}

impl Executor for std::sync::mpsc::Sender<ExecRequest> {
    fn send(&mut self, req: ExecRequest) {
        // A stopped executor (the feed ended) shows as an operation that never starts.
        let _ = std::sync::mpsc::Sender::send(self, req);
    }
}

/// Collects requests; for tests and for the headless paths.
#[derive(Default)]
pub struct Recorder(pub std::sync::Arc<std::sync::Mutex<Vec<ExecRequest>>>);

impl Executor for Recorder {
    fn send(&mut self, req: ExecRequest) {
        if let Ok(mut v) = self.0.lock() {
            v.push(req);
        }
    }
}
