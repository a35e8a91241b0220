//! Runs the simulator as a feed: one tick per interval, executing requested operations
//! between ticks, sending each tick's deltas as one batch.

use std::time::Duration;

use tokio::sync::mpsc;

use super::Batch;
use crate::sim::{Sim, SimConfig};
use crate::ui::ExecRequest;

/// Spawns the simulator; returns once its initial listing has been queued.
pub fn spawn(
    cfg: SimConfig,
    tx: mpsc::Sender<Batch>,
    mut exec: mpsc::UnboundedReceiver<ExecRequest>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let tick = Duration::from_millis(cfg.tick_ms.max(10));
        // Building a 65,000-node factory takes a moment: keep it off the async workers.
        let built = tokio::task::spawn_blocking(move || {
            let mut sim = Sim::new(cfg);
            let initial = sim.initial_deltas();
            (sim, initial)
        })
        .await;
        let Ok((mut sim, initial)) = built else { return };
        if tx.send(initial).await.is_err() {
            return;
        }
        let mut interval = tokio::time::interval(tick);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval.tick().await;
        let mut exec_open = true;
        loop {
            tokio::select! {
                req = exec.recv(), if exec_open => {
                    let out = match req {
                        Some(ExecRequest::Execute { id, plan }) => sim.execute(id, *plan),
                        Some(ExecRequest::Cancel { id }) => sim.cancel(id),
                        None => {
                            exec_open = false;
                            Vec::new()
                        }
                    };
                    if !out.is_empty() && tx.send(out).await.is_err() {
                        return;
                    }
                }
                _ = interval.tick() => {
                    let out = sim.step();
                    if tx.send(out).await.is_err() {
                        return;
                    }
                }
            }
        }
    })
}
