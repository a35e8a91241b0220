//! Runs the simulator as a feed, on a thread of its own: a tick at a 65,000-node factory
//! costs hundreds of milliseconds of CPU, which must never hold up the cockpit's async
//! workers. Operations requested by the cockpit run between ticks; each tick's deltas go
//! out as one batch.

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::model::Batch;
use crate::sim::{Sim, SimConfig, SimRequest};

pub fn spawn<R: SimRequest>(
    cfg: SimConfig,
    tx: mpsc::Sender<Batch>,
    exec: Receiver<R>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("fabrik-sim".into()).spawn(move || {
        let tick = Duration::from_millis(cfg.tick_ms.max(10));
        let mut sim = Sim::new(cfg);
        if tx.blocking_send(sim.initial_deltas()).is_err() {
            return;
        }
        let mut next = Instant::now() + tick;
        let mut exec_open = true;
        loop {
            let now = Instant::now();
            if now < next {
                // Wait for the next tick, or for an operation to run before it.
                let out = if exec_open {
                    match exec.recv_timeout(next - now) {
                        Ok(req) => req.apply(&mut sim),
                        Err(RecvTimeoutError::Timeout) => Vec::new(),
                        Err(RecvTimeoutError::Disconnected) => {
                            exec_open = false;
                            Vec::new()
                        }
                    }
                } else {
                    std::thread::sleep(next - now);
                    Vec::new()
                };
                if !out.is_empty() && tx.blocking_send(out).is_err() {
                    return;
                }
                continue;
            }
            // A slow tick does not pile up: the next one is a full interval away.
            next = (next + tick).max(now + tick / 2);
            if tx.blocking_send(sim.step()).is_err() {
                return;
            }
        }
    })
}
