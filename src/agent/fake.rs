//! A deterministic fake GPU node for machines without a GPU (`fabrik agent --fake N`):
//! the same seed and sample time give the same sample, so tests and demos are repeatable.

use std::collections::HashMap;

use super::backend::{BackendError, Gpus};
use super::podres::{Assignment, physical_id};
use super::wire::*;
use crate::rng::Rng;

pub struct FakeGpus {
    node: String,
    gpus: u32,
    seed: u64,
    started_ms: Option<u64>,
    /// The pods the kubelet gave replicas of each shared GPU (by uuid or index), in the
    /// kubelet's order: their work is what the GPU runs.
    sharers: HashMap<String, Vec<PodRef>>,
}

/// What a pod holding a replica of a shared GPU does there, the same on every sample: runs
/// nothing (a notebook that holds its share), keeps the SMs busy, or runs a process that
/// barely touches them. Chosen from its name, so it is stable and varied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareWork {
    Nothing,
    Busy,
    Light,
}

impl ShareWork {
    pub fn of(seed: u64, namespace: &str, name: &str) -> ShareWork {
        // FNV-1a: stable across runs and builds (std's hasher is not).
        let h = format!("{namespace}/{name}")
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64 ^ seed, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        match h % 3 {
            0 => ShareWork::Nothing,
            1 => ShareWork::Busy,
            _ => ShareWork::Light,
        }
    }
}

const MODEL: &str = "NVIDIA H100 80GB HBM3";
const MEMORY_MIB: u64 = 81559;

impl FakeGpus {
    pub fn new(node: &str, gpus: u32, seed: u64) -> FakeGpus {
        FakeGpus { node: node.to_string(), gpus: gpus.max(1), seed, started_ms: None, sharers: HashMap::new() }
    }

    fn uuid(&self, prefix: &str, i: u64) -> String {
        Rng::new(self.seed ^ (i << 16) ^ prefix.len() as u64).uuid(prefix)
    }

    fn pod(&self, gpu: u32) -> PodRef {
        let (ns, app) =
            [("inference-prod", "vllm-llama3-8b"), ("llm-finetune", "ft-mistral-lora"), ("research", "jupyter")]
                [gpu as usize % 3];
        let mut r = Rng::new(self.seed ^ 0xabc ^ gpu as u64);
        PodRef {
            uid: format!("{}-{}-{}-{}-{}", r.hex(8), r.hex(4), r.hex(4), r.hex(4), r.hex(12)),
            namespace: Some(ns.to_string()),
            name: Some(format!("{app}-{}-{}", r.hex(5), r.hex(5))),
            container_id: Some(r.hex(64)),
            container: Some(app.split('-').next().unwrap_or(app).to_string()),
        }
    }
}

impl Gpus for FakeGpus {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn allocated(&mut self, rows: &[Assignment]) {
        self.sharers.clear();
        for r in rows {
            let gpu = physical_id(&r.device_id);
            if gpu == r.device_id {
                continue; // a whole GPU: the fake's own processes stand for its pod
            }
            let p = PodRef {
                uid: String::new(),
                namespace: Some(r.namespace.clone()),
                name: Some(r.pod.clone()),
                container_id: None,
                container: Some(r.container.clone()),
            };
            let on = self.sharers.entry(gpu.to_string()).or_default();
            if !on.iter().any(|q| q.namespace == p.namespace && q.name == p.name) {
                on.push(p);
            }
        }
    }

    fn sample(&mut self, now_ms: u64) -> Result<NodeSample, BackendError> {
        let started = *self.started_ms.get_or_insert(now_ms);
        let tick = now_ms / 1000;
        let mut gpus = Vec::new();
        for i in 0..self.gpus {
            let mut rng = Rng::new(self.seed ^ (i as u64) << 32 ^ tick);
            // GPU 1 is in MIG mode; GPU 2 is allocated but idle; the last one is free.
            let mig = i == 1;
            let idle = i == 2;
            let free = i + 1 == self.gpus && self.gpus > 3;
            let uuid = self.uuid("GPU", i as u64);
            let sharers =
                (!mig).then(|| self.sharers.get(&uuid).or_else(|| self.sharers.get(&i.to_string()))).flatten();
            let mut util = if free || idle { rng.below(3) as u32 } else { 55 + rng.below(45) as u32 };
            let mut mem_used = if free {
                0
            } else if idle {
                20_000 + rng.below(500)
            } else {
                40_000 + rng.below(30_000)
            };
            let mut processes = Vec::new();
            if let Some(sharers) = sharers {
                // A shared GPU runs its holders' work, time-sliced: the GPU is as busy as
                // their processes together.
                let (mut sum, mut mem) = (0u32, 0u64);
                for (k, p) in sharers.iter().enumerate() {
                    let work =
                        ShareWork::of(self.seed, p.namespace.as_deref().unwrap_or(""), p.name.as_deref().unwrap_or(""));
                    let (sm, used) = match work {
                        ShareWork::Nothing => continue,
                        ShareWork::Busy => (25 + rng.below(45) as u32, 6_000 + rng.below(6_000)),
                        ShareWork::Light => (rng.below(3) as u32, 1_500 + rng.below(200)),
                    };
                    sum += sm;
                    mem += used;
                    processes.push(GpuProcess {
                        pid: 50_000 + i * 97 + k as u32,
                        used_memory_mib: Some(used),
                        gpu_instance_id: None,
                        compute_instance_id: None,
                        pod: Some(p.clone()),
                        sm_util: Some(sm.min(100) as u8),
                    });
                }
                util = if processes.is_empty() { rng.below(3) as u32 } else { sum.min(100) };
                mem_used = mem.min(MEMORY_MIB);
            } else if !free && !mig {
                processes.push(GpuProcess {
                    pid: 40_000 + i * 17,
                    used_memory_mib: Some(mem_used.saturating_sub(500)),
                    gpu_instance_id: None,
                    compute_instance_id: None,
                    pod: Some(self.pod(i)),
                    // One process per GPU: it is what keeps the SMs busy.
                    sm_util: Some(util.min(100) as u8),
                });
            }
            let mut mig_instances = Vec::new();
            if mig {
                // 3g.40gb + 2g.20gb + 1g.10gb + 1g.10gb, as the planner places them.
                for (k, (profile, start, size, gi, mem)) in [
                    ("3g.40gb", 4u32, 4u32, 2u32, 40448u64),
                    ("2g.20gb", 0, 2, 3, 20096),
                    ("1g.10gb", 2, 1, 9, 9984),
                    ("1g.10gb", 3, 1, 10, 9984),
                ]
                .into_iter()
                .enumerate()
                {
                    let used = if k == 3 { 0 } else { mem / 2 + rng.below(mem / 3) };
                    mig_instances.push(MigSample {
                        uuid: self.uuid("MIG", (i as u64) << 8 | k as u64),
                        profile: profile.to_string(),
                        gpu_instance_id: gi,
                        compute_instance_id: Some(0),
                        placement_start: start,
                        placement_size: size,
                        memory_total_mib: mem,
                        memory_used_mib: used,
                        // The free instance's engines are idle: GPM measures 0 %.
                        util: Some(if k == 3 { 0 } else { 40 + rng.below(60) as u32 }),
                        allocated_to: None,
                    });
                    if k != 3 {
                        processes.push(GpuProcess {
                            pid: 41_000 + k as u32,
                            used_memory_mib: Some(used),
                            gpu_instance_id: Some(gi),
                            compute_instance_id: Some(0),
                            pod: Some(self.pod(10 + k as u32)),
                            // MIG mode: no per-process samples (as NVML).
                            sm_util: None,
                        });
                    }
                }
            }
            let power = 70_000 + util * 6_300 + rng.below(5_000) as u32;
            gpus.push(GpuSample {
                index: i,
                uuid,
                name: MODEL.to_string(),
                pci_bus_id: Some(format!("00000000:{:02X}:00.0", 0x18 + i * 0x10)),
                memory_total_mib: MEMORY_MIB,
                memory_used_mib: if mig { mig_instances.iter().map(|m| m.memory_used_mib).sum() } else { mem_used },
                // NVML does not report GPU utilisation in MIG mode.
                util_gpu: (!mig).then_some(util),
                util_memory: (!mig).then_some(util * 2 / 3),
                power_mw: Some(power),
                power_limit_mw: Some(700_000),
                temp_c: Some(30 + util * 45 / 100),
                sm_clock_mhz: Some(if util > 5 { 1980 } else { 345 }),
                mem_clock_mhz: Some(2619),
                ecc_corrected: Some(i as u64),
                ecc_uncorrected: Some(0),
                throttle_reasons: if util > 90 { vec!["sw_power_cap".into()] } else { Vec::new() },
                // An XID shows up on GPU 0 a minute after start.
                last_xid: (i == 0 && now_ms.saturating_sub(started) >= 60_000)
                    .then_some(XidEvent { code: 79, at_ms: started + 60_000 }),
                mig_enabled: mig,
                mig_pending: Some(mig),
                mig_instances,
                processes,
                nvlinks: (0..4).map(|l| NvLinkState { link: l, active: true, remote_pci_bus_id: None }).collect(),
                allocated_to: None,
                // An HGX board: every pair through NVSwitch (18 links each); PCIe halves on
                // two NUMA nodes.
                peers: (0..self.gpus)
                    .filter(|p| *p != i)
                    .map(|p| PeerLink {
                        peer: p,
                        nvlinks: 18,
                        path: if (p < self.gpus / 2) == (i < self.gpus / 2) { "NODE" } else { "SYS" }.into(),
                    })
                    .collect(),
            });
        }
        Ok(NodeSample {
            version: WIRE_VERSION,
            node: self.node.clone(),
            sampled_at_ms: now_ms,
            backend: "fake".into(),
            driver_version: Some("580.95.05".into()),
            cuda_driver_version: Some("13.0".into()),
            gpus,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_is_deterministic_and_plausible() {
        let a = FakeGpus::new("n1", 8, 3).sample(1_000_000).unwrap();
        let b = FakeGpus::new("n1", 8, 3).sample(1_000_000).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.gpus.len(), 8);
        let mig = &a.gpus[1];
        assert!(mig.mig_enabled && mig.util_gpu.is_none() && mig.mig_instances.len() == 4);
        assert!(a.gpus[2].util_gpu.is_some_and(|u| u < 5) && !a.gpus[2].processes.is_empty(), "idle but allocated");
        assert!(a.gpus[7].processes.is_empty(), "the last GPU is free");
        for g in &a.gpus {
            assert!(g.memory_used_mib <= g.memory_total_mib);
            assert!(g.util_gpu.is_none_or(|u| u <= 100));
        }
        let uuids: std::collections::HashSet<_> = a.gpus.iter().map(|g| g.uuid.clone()).collect();
        assert_eq!(uuids.len(), 8);
        let c = FakeGpus::new("n1", 8, 3).sample(9_000_000).unwrap();
        assert_ne!(a.gpus[0].util_gpu, c.gpus[0].util_gpu.map(|u| u + 1000), "moves over time");
    }

    #[test]
    fn an_xid_appears_after_a_minute() {
        let mut f = FakeGpus::new("n1", 2, 1);
        assert!(f.sample(0).unwrap().gpus[0].last_xid.is_none());
        assert_eq!(f.sample(61_000).unwrap().gpus[0].last_xid, Some(XidEvent { code: 79, at_ms: 60_000 }));
    }

    #[test]
    fn a_shared_gpu_runs_the_work_of_the_pods_given_its_replicas() {
        let mut f = FakeGpus::new("n1", 8, 3);
        let uuid = f.sample(0).unwrap().gpus[5].uuid.clone();
        let row = |pod: &str, k: u32| Assignment {
            namespace: "team".into(),
            pod: pod.into(),
            container: "main".into(),
            resource: "nvidia.com/gpu".into(),
            device_id: format!("{uuid}::{k}"),
        };
        // Names until each kind of work is there.
        let names: Vec<String> = (0..30).map(|k| format!("p{k}")).collect();
        let of = |n: &str| ShareWork::of(3, "team", n);
        let pick = |w: ShareWork| names.iter().find(|n| of(n) == w).cloned().expect("a name of each kind");
        let (nothing, busy, light) = (pick(ShareWork::Nothing), pick(ShareWork::Busy), pick(ShareWork::Light));
        f.allocated(&[row(&nothing, 0), row(&busy, 1), row(&light, 2), row(&busy, 3)]);
        let s = f.sample(5_000).unwrap();
        let g = &s.gpus[5];
        let procs: Vec<(&str, u8)> = g
            .processes
            .iter()
            .map(|p| (p.pod.as_ref().and_then(|p| p.name.as_deref()).unwrap_or(""), p.sm_util.unwrap_or(99)))
            .collect();
        assert_eq!(procs.len(), 2, "one process per working holder, the idle one runs none: {procs:?}");
        assert!(procs.iter().any(|(n, u)| *n == busy && *u >= 25));
        assert!(procs.iter().any(|(n, u)| *n == light && *u < 3));
        assert_eq!(g.util_gpu, Some(procs.iter().map(|(_, u)| u32::from(*u)).sum::<u32>().min(100)));
        // Whole GPUs keep the fake's own pods; without replicas nothing changes.
        assert_eq!(s.gpus[0], FakeGpus::new("n1", 8, 3).sample(5_000).unwrap().gpus[0]);
        f.allocated(&[]);
        assert_eq!(f.sample(5_000).unwrap(), FakeGpus::new("n1", 8, 3).sample(5_000).unwrap());
    }
}
