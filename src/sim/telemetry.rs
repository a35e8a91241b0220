//! GPU telemetry as dcgm-exporter would stream it: utilisation, memory, power and
//! temperature per GPU and per MIG instance, from what the bound pods are doing.

use super::world::{Behaviour, Sim};
use crate::mig;
use crate::model::*;
use crate::rng::Rng;

/// Above this many GPUs, telemetry is streamed for a rolling subset per tick, as agents
/// stream only the nodes in view on a real fleet.
const TELEMETRY_PER_TICK: usize = 20_000;

impl Sim {
    pub(super) fn telemetry_all(&mut self, out: &mut Vec<Delta>) {
        let mut batch = Vec::new();
        for ni in 0..self.nodes.len() {
            for gi in 0..self.nodes[ni].gpus.len() {
                batch.push(self.sample(ni, gi));
            }
        }
        out.push(Delta::Telemetry(batch));
    }

    /// This tick's samples: every GPU on small fleets, a rolling subset on big ones.
    pub(super) fn telemetry_rolling(&mut self) -> Vec<TelemetrySample> {
        let total: usize = self.nodes.iter().map(|n| n.gpus.len()).sum();
        let mut batch = Vec::with_capacity(total.min(TELEMETRY_PER_TICK));
        let count = total.min(TELEMETRY_PER_TICK);
        let per_node = self.nodes.first().map(|n| n.gpus.len()).unwrap_or(8).max(1);
        for k in 0..count {
            let flat = (self.telemetry_cursor + k) % total.max(1);
            let (ni, gi) = (flat / per_node, flat % per_node);
            if ni < self.nodes.len() && gi < self.nodes[ni].gpus.len() && !self.nodes[ni].dead {
                batch.push(self.sample(ni, gi));
            }
        }
        self.telemetry_cursor = (self.telemetry_cursor + count) % total.max(1);
        batch
    }

    fn sample(&mut self, ni: usize, gi: usize) -> TelemetrySample {
        let now = self.now;
        let tick = self.tick;
        let node = &self.nodes[ni];
        let g = &node.gpus[gi];
        let model = g.spec.model;
        let behaviour = |owner: Option<&String>| {
            owner.and_then(|k| self.pods.get(k)).filter(|p| p.spec.phase == Phase::Running).map(|p| p.behaviour)
        };
        let mut rng = Rng::new(self.cfg.seed ^ (ni as u64) << 20 ^ (gi as u64) << 8 ^ now);
        let level = |b: Option<Behaviour>, rng: &mut Rng| -> (u8, u8) {
            match b {
                None => (0, 0),
                Some(Behaviour::Idle) => (rng.below(3) as u8, 25 + rng.below(10) as u8),
                Some(Behaviour::Busy) => (70 + rng.below(29) as u8, 60 + rng.below(30) as u8),
                Some(Behaviour::Bursty) => {
                    let phase = (tick / 7 + gi as u64) % 3;
                    if phase == 0 {
                        (5 + rng.below(20) as u8, 40)
                    } else {
                        (55 + rng.below(40) as u8, 70 + rng.below(10) as u8)
                    }
                }
            }
        };
        let mut instances = Vec::new();
        let mut processes = Vec::new();
        let agent_procs = node.share.is_some() && !g.spec.mig_enabled;
        let (util, mem) = if g.spec.mig_enabled {
            let mut weighted = 0u32;
            let mut mem_mib = 0u64;
            for (ii, inst) in g.spec.instances.iter().enumerate() {
                let (u, m) = level(behaviour(g.inst_owner[ii].as_ref()), &mut rng);
                let p = mig::profile(model, inst.placement.profile);
                let used = p.memory_mib as u64 * m as u64 / 100;
                mem_mib += used;
                weighted += u as u32 * p.compute_slices as u32;
                instances.push(InstanceSample::new(inst.uuid.clone(), Some(u), used as u32));
            }
            ((weighted / 7) as u8, (mem_mib * 100 / model.memory_mib().max(1) as u64) as u8)
        } else if !g.holders.is_empty() {
            // A shared GPU: its pods' work adds up (time-slices or MPS clients, or claims
            // sharing it by capacity), each in its share of the memory.
            let split = node.share.as_ref().map_or_else(
                || (i64::from(g.spec.memory_mib) << 20) / super::SHARE_BYTES,
                |s| i64::from(s.replicas.max(1)),
            );
            let (mut util, mut mem) = (0u32, 0u32);
            let mut seen: Vec<&String> = Vec::new();
            for h in &g.holders {
                if seen.contains(&h) {
                    continue;
                }
                seen.push(h);
                let (u, m) = level(behaviour(Some(h)), &mut rng);
                util += u32::from(u);
                mem += u32::from(m) / split.max(1) as u32;
                // As a node agent sees a time-sliced / MPS GPU: each holder's process and
                // its own share of the SMs (how an idle share shows).
                if agent_procs && behaviour(Some(h)).is_some() {
                    let mem_mib = u32::from(m) * g.spec.memory_mib / 100 / split.max(1) as u32;
                    processes.push(ProcSample {
                        pid: 30_000 + (gi as u32) * 64 + seen.len() as u32,
                        mem_mib: Some(mem_mib),
                        pod: Some(h.clone()),
                        container: None,
                        gpu_instance: None,
                        sm_util: Some(u),
                    });
                }
            }
            (util.min(100) as u8, mem.min(98) as u8)
        } else {
            level(behaviour(g.owner.as_ref()), &mut rng)
        };
        let tdp = model.tdp_watts() as u32;
        let idle_w = tdp / 8;
        let power = idle_w + (tdp - idle_w) * util as u32 / 100 + rng.below(8) as u32;
        let temp = 30 + util as u32 * 45 / 100 + rng.below(3) as u32;
        let uuid = g.spec.uuid.clone();
        let g = &mut self.nodes[ni].gpus[gi];
        g.util = util;
        g.mem = mem;
        TelemetrySample {
            gpu_uuid: uuid,
            at: now,
            sample: Sample::new(util, mem, power as u16, temp as u8),
            instances,
            node_gpu: None,
            allocated: None,
            peers: None,
            // A shared node's agent reports its processes, none included.
            processes: agent_procs.then_some(processes),
        }
    }
}
