//! Serving the cockpit's operation requests on a cluster: the access review up front, then
//! each confirmed plan on a task of its own, audited, with a cancel switch and a halt.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::access;
use super::audit::{Audit, Phase};
use super::exec::ExecOptions;
use super::kube::KubeExec;
use super::{ExecRequest, Executor};
use crate::cluster;
use crate::model::{AccessSpec, Delta, EventSpec, Severity};

/// Hands requests to [`serve_ops`] without blocking the cockpit.
pub struct KubeExecutor(pub mpsc::UnboundedSender<ExecRequest>);

impl Executor for KubeExecutor {
    fn send(&mut self, req: ExecRequest) {
        // A stopped executor shows as an operation that never starts.
        let _ = self.0.send(req);
    }
}

/// Read-only mode: the app refuses every operation before it gets here, and nothing it
/// might still send (a preview) reaches the cluster or the audit log.
pub struct Refuse;

impl Executor for Refuse {
    fn send(&mut self, _req: ExecRequest) {}
}

/// The cluster side of operations: asks the API server what this identity may do (the
/// answer goes to the cockpit as `Delta::Access`), then runs each confirmed plan on a task
/// of its own, audited, with a cancel switch. Previews are audited as `planned`.
pub async fn serve_ops(
    client: kube::Client,
    audit: Option<Audit>,
    opts: ExecOptions,
    out: mpsc::Sender<Vec<Delta>>,
    mut rx: mpsc::UnboundedReceiver<ExecRequest>,
    halt: watch::Receiver<Option<String>>,
) {
    let mut spec = match access::check(&client).await {
        Ok(spec) => spec,
        Err(e) => {
            // Unknown is not "allowed": operations stay possible, and each checks its own
            // permissions again before it sends anything.
            let _ = out
                .send(vec![Delta::Event(EventSpec {
                    ts: crate::now_ms(),
                    severity: Severity::Warning,
                    reason: "AccessReview".into(),
                    object: "selfsubjectaccessreviews".into(),
                    message: format!(
                        "could not ask the API server what you may do ({}); each operation checks before it starts",
                        cluster::describe(&e)
                    ),
                })])
                .await;
            AccessSpec::default()
        }
    };
    let Some(mut audit) = audit else {
        for k in access::KINDS {
            spec.denied.push((
                k.name().to_string(),
                "there is no data directory for the audit log (no home directory?): set FABRIK_DATA_DIR".into(),
            ));
        }
        let _ = out.send(vec![Delta::Access(spec)]).await;
        return;
    };
    audit.user = spec.user.clone();
    let _ = out.send(vec![Delta::Access(spec)]).await;
    let ex = Arc::new(KubeExec { client, audit, opts, out });
    let mut cancels: HashMap<u64, watch::Sender<bool>> = HashMap::new();
    let mut running: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    while let Some(req) = rx.recv().await {
        match req {
            ExecRequest::Preview { id, plan } => {
                // A preview that cannot be audited still shows; the confirmation will not run.
                let _ = ex.audit.record(id, &plan, Phase::Planned, &plan.title);
            }
            ExecRequest::Execute { id, plan } => {
                let (tx, cancel) = watch::channel(false);
                cancels.retain(|_, c| !c.is_closed());
                cancels.insert(id, tx);
                let ex = ex.clone();
                let halt = halt.clone();
                running.retain(|t| !t.is_finished());
                running
                    .push(tokio::spawn(async move { super::kube::execute_until(&ex, id, *plan, cancel, halt).await }));
            }
            ExecRequest::Cancel { id } => {
                if let Some(c) = cancels.get(&id) {
                    let _ = c.send(true);
                }
            }
        }
    }
    // The cockpit stopped serving operations (quit, `:ctx`, a signal): it has sent `halt`
    // with the reason, so each running operation records where it was interrupted and
    // stops; wait for those records (the caller bounds the wait).
    for t in running {
        let _ = t.await;
    }
    drop(cancels);
}
