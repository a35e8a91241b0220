//! A pod's life in the simulator: created from a workload, bound to free devices,
//! terminated gracefully, deleted and its devices released.

use super::world::{Behaviour, SPod, Sim};
use crate::cluster::kubelet;
use crate::mig::{self, GpuModel};
use crate::model::*;

/// The 1g / 2g / 3g profile names of a model family, for MIG workloads.
fn mig_profile_for(model: GpuModel, size: &str) -> Option<&'static str> {
    let table: &[(&str, &str)] = match model {
        GpuModel::A100_40GB => &[("1g", "1g.5gb"), ("2g", "2g.10gb"), ("3g", "3g.20gb")],
        GpuModel::A100_80GB | GpuModel::H100_80GB => &[("1g", "1g.10gb"), ("2g", "2g.20gb"), ("3g", "3g.40gb")],
        GpuModel::H200_141GB => &[("1g", "1g.18gb"), ("2g", "2g.35gb"), ("3g", "3g.71gb")],
        GpuModel::B200 => &[("1g", "1g.23gb"), ("2g", "2g.45gb"), ("3g", "3g.90gb")],
    };
    table.iter().find(|(s, _)| *s == size).map(|(_, p)| *p)
}

impl Sim {
    /// Creates a pending pod of a workload; `old` pods get a past creation time.
    pub(super) fn create_pod(&mut self, workload: usize, old: bool) -> String {
        let a = self.workloads[workload].clone();
        self.pod_seq += 1;
        let name = match a.owner {
            Owner::StatefulSet => {
                // Ordinals are reused like a StatefulSet does; the hint keeps this linear.
                let mut i = self.sts_hint.get(&workload).copied().unwrap_or(0);
                while self.pods.contains_key(&format!("{}/{}-{i}", a.namespace, a.name)) {
                    i += 1;
                }
                self.sts_hint.insert(workload, i + 1);
                format!("{}-{i}", a.name)
            }
            Owner::None => format!(
                "{}-{}",
                a.name,
                ["alice", "bob", "chen", "dana", "eli", "fatima", "gus", "hana", "ivan", "jo"]
                    [(self.pod_seq % 10) as usize]
                    .to_string()
                    + &self.rng.hex(3)
            ),
            _ => format!("{}-{}-{}", a.name, self.rng.hex(5), self.rng.hex(5)),
        };
        let mut created = if old { self.now - self.rng.range(600, 5 * 86_400) * 1000 } else { self.now };
        // A domain's worker is not older than its domain.
        if let Some(super::dra::AlphaAsk::Domain(k)) = a.alpha
            && let Some(d) = self.dra.domains.get(k)
        {
            created = created.max(d.created);
        }
        let behaviour = if self.rng.chance(a.idle_share) {
            Behaviour::Idle
        } else if self.rng.chance(0.2) {
            Behaviour::Bursty
        } else {
            Behaviour::Busy
        };
        let ticks_left = a.job_ticks.map(|(lo, hi)| self.rng.range(lo as u64, hi as u64) as u32);
        let key = format!("{}/{}", a.namespace, name);
        // Named as the controllers name their pods: a StatefulSet's `<set>-<i>`; a ReplicaSet's
        // (or Job's) `<owner>-<hash>`, the owner itself `<app>-<hash>`.
        let owner_name = match a.owner {
            Owner::None => String::new(),
            Owner::StatefulSet => a.name.clone(),
            _ => name.rsplit_once('-').map(|(o, _)| o.to_string()).unwrap_or_default(),
        };
        let spec = PodSpec {
            namespace: a.namespace.clone(),
            name,
            node: None,
            phase: Phase::Pending,
            created,
            started: None,
            owner: a.owner,
            owner_name,
            app: a.name.clone(),
            empty_dir: a.empty_dir,
            gpus: if a.dra { 0 } else { a.gpus },
            gpus_renamed: a.share.is_some_and(|(_, renamed)| renamed),
            mig: Vec::new(),
            dra: if a.dra {
                vec![DraClaimSpec {
                    claim: format!("{}-gpu-{}", a.name, self.rng.hex(5)),
                    device_class: if a.alpha == Some(super::dra::AlphaAsk::Partition) {
                        crate::cluster::labels::DRA_MIG_CLASS
                    } else {
                        crate::cluster::labels::DRA_GPU_CLASS
                    }
                    .into(),
                    count: a.gpus,
                    allocated: None,
                }]
            } else {
                Vec::new()
            },
            claim_templates: match a.alpha {
                Some(super::dra::AlphaAsk::Domain(k)) => {
                    self.dra.domains.get(k).map(|d| d.claim_template.clone()).into_iter().collect()
                }
                _ => Vec::new(),
            },
            bound_gpus: Vec::new(),
            bound_mig: Vec::new(),
            deletion: None,
            container_waiting: None,
            restarts: Default::default(),
        };
        self.pods.insert(
            key.clone(),
            SPod {
                spec,
                behaviour,
                ticks_left,
                terminating: None,
                starting: None,
                mig_profile: a.mig.map(str::to_string),
                workload,
            },
        );
        key
    }

    /// Binds pending pods to free devices on ready, schedulable nodes.
    pub(super) fn schedule(&mut self, pending: Vec<String>, budget: usize, instant: bool) {
        let n = self.nodes.len();
        for key in pending.into_iter().take(budget) {
            let Some(pod) = self.pods.get(&key) else { continue };
            // A claim on an alpha DRA shape gets its own GPU or nothing.
            if let Some(ask) = self.workloads.get(pod.workload).and_then(|w| w.alpha) {
                self.place_alpha(&key, ask, instant);
                continue;
            }
            let want_gpus = pod.spec.gpus as usize + pod.spec.dra.iter().map(|c| c.count as usize).sum::<usize>();
            let want_mig = pod.mig_profile.clone();
            let want_share = self.workloads.get(pod.workload).and_then(|w| w.share);
            let mut placed = None;
            // What ruled each node out, as the scheduler counts it.
            let (mut down, mut cordoned) = (0u32, 0u32);
            for step in 0..n {
                let ni = (self.sched_cursor + step) % n;
                let node = &self.nodes[ni];
                if node.dead {
                    down += 1;
                    continue;
                }
                if node.spec.cordoned {
                    cordoned += 1;
                    continue;
                }
                if node.mig_apply.is_some() {
                    continue;
                }
                let model = node.spec.gpu_model.unwrap_or(GpuModel::H100_80GB);
                if let Some((strategy, renamed)) = want_share {
                    // Replicas of shared GPUs (selected by strategy): only on shared nodes.
                    if let Some(gis) = node.share_fit(strategy, renamed, want_gpus) {
                        placed = Some((ni, gis, None));
                        break;
                    }
                    continue;
                }
                if node.share.is_some() && want_mig.is_none() {
                    // Whole GPUs are not handed out where the device plugin shares them.
                    continue;
                }
                if let Some(size) = &want_mig {
                    let Some(prof) = mig_profile_for(model, size) else { continue };
                    let Some(pid) = mig::find_profile(model, prof) else { continue };
                    let found = node.gpus.iter().enumerate().filter(|(gi, _)| !self.dra.reserved(ni, *gi)).find_map(
                        |(gi, g)| {
                            g.spec
                                .instances
                                .iter()
                                .enumerate()
                                .find(|(ii, inst)| inst.placement.profile == pid && g.inst_owner[*ii].is_none())
                                .map(|(ii, _)| (gi, ii))
                        },
                    );
                    if let Some((gi, ii)) = found {
                        placed = Some((ni, vec![], Some((gi, ii, prof))));
                        break;
                    }
                } else if want_gpus > 0 {
                    let free: Vec<usize> = node
                        .gpus
                        .iter()
                        .enumerate()
                        .filter(|(gi, g)| !g.spec.mig_enabled && g.owner.is_none() && !self.dra.reserved(ni, *gi))
                        .map(|(i, _)| i)
                        .collect();
                    if free.len() >= want_gpus {
                        placed = Some((ni, free[..want_gpus].to_vec(), None));
                        break;
                    }
                }
            }
            let Some((ni, gis, mig_slot)) = placed else {
                // The scheduler's word on it, as kube-scheduler words it.
                let resource = match (&want_mig, want_share) {
                    (Some(size), _) => format!("nvidia.com/mig-{size}"),
                    (None, Some((_, true))) => "nvidia.com/gpu.shared".to_string(),
                    _ if pod.spec.dra.is_empty() => "nvidia.com/gpu".to_string(),
                    _ => String::new(),
                };
                let short = n as u32 - down - cordoned;
                let mut parts = Vec::new();
                if short > 0 {
                    parts.push(if resource.is_empty() {
                        format!("{short} cannot allocate all claims")
                    } else {
                        format!("{short} Insufficient {resource}")
                    });
                }
                if cordoned > 0 {
                    parts.push(format!("{cordoned} node(s) were unschedulable"));
                }
                if down > 0 {
                    parts.push(format!("{down} node(s) had untolerated taint {{node.kubernetes.io/unreachable: }}"));
                }
                let message = format!(
                    "0/{n} nodes are available: {}. preemption: 0/{n} nodes are available: {n} Preemption is not \
                     helpful for scheduling.",
                    parts.join(", ")
                );
                self.failed_scheduling(&key, message);
                continue;
            };
            self.scheduled(&key, ni);
            self.sched_cursor = ni;
            let node_name = self.nodes[ni].spec.name.clone();
            let mut bound: Vec<(usize, String)> = Vec::new();
            let shared = want_share.is_some();
            for &gi in &gis {
                let g = &mut self.nodes[ni].gpus[gi];
                // A replica (a GPU may give a pod more than one), or the whole GPU.
                if shared {
                    g.holders.push(key.clone());
                } else {
                    g.owner = Some(key.clone());
                }
                if !bound.iter().any(|(b, _)| *b == gi) {
                    bound.push((gi, g.spec.uuid.clone()));
                }
            }
            let mut mig_uuid = None;
            if let Some((gi, ii, _)) = mig_slot {
                self.nodes[ni].gpus[gi].inst_owner[ii] = Some(key.clone());
                mig_uuid = Some(self.nodes[ni].gpus[gi].spec.instances[ii].uuid.clone());
            }
            let Some(pod) = self.pods.get_mut(&key) else { continue };
            pod.spec.node = Some(node_name.clone());
            pod.spec.bound_gpus = bound.iter().map(|(_, u)| u.clone()).collect();
            if let Some((_, _, prof)) = mig_slot {
                pod.spec.mig = vec![(format!("nvidia.com/mig-{prof}"), 1)];
            }
            if let Some(u) = mig_uuid {
                pod.spec.bound_mig = vec![u];
            }
            for c in pod.spec.dra.iter_mut() {
                c.allocated = bound.first().map(|(gi, _)| format!("gpu.nvidia.com/{node_name}/gpu-{gi}"));
            }
            self.start_bound(&key, instant);
        }
    }

    /// Frees the devices a pod holds.
    pub(super) fn release(&mut self, key: &str) {
        let Some(p) = self.pods.get(key) else { return };
        let Some(node) = p.spec.node.clone() else { return };
        let Some(&ni) = self.node_index.get(&node) else { return };
        for g in self.nodes[ni].gpus.iter_mut() {
            if g.owner.as_deref() == Some(key) {
                g.owner = None;
            }
            g.holders.retain(|h| h != key);
            for o in g.inst_owner.iter_mut() {
                if o.as_deref() == Some(key) {
                    *o = None;
                }
            }
        }
    }

    /// The scheduler's word on a pod it cannot place: an Event when the words change (the
    /// scheduler's repeat as one aggregated Event).
    pub(super) fn failed_scheduling(&mut self, key: &str, message: String) {
        if self.sched_said.get(key) == Some(&message) {
            return;
        }
        self.out.push(Delta::Event(EventSpec {
            ts: self.now,
            severity: Severity::Warning,
            reason: "FailedScheduling".into(),
            object: format!("pod/{key}"),
            message: message.clone(),
        }));
        self.sched_said.insert(key.to_string(), message);
    }

    /// A pod the scheduler had complained about is placed on node `ni` at last.
    pub(super) fn scheduled(&mut self, key: &str, ni: usize) {
        if self.sched_said.remove(key).is_some() {
            self.out.push(Delta::Event(EventSpec {
                ts: self.now,
                severity: Severity::Info,
                reason: "Scheduled".into(),
                object: format!("pod/{key}"),
                message: format!("Successfully assigned {key} to {}", self.nodes[ni].spec.name),
            }));
        }
    }

    /// A pod just bound: running at once (`instant`, the initial fill: it has run since it
    /// was made) or after a few ticks of starting; sent unless instant.
    pub(super) fn start_bound(&mut self, key: &str, instant: bool) {
        let start_ticks = if instant { 0 } else { self.rng.range(2, 6) as u32 };
        let now = self.now;
        let Some(pod) = self.pods.get_mut(key) else { return };
        if start_ticks == 0 {
            pod.run(if instant { pod.spec.created } else { now });
        } else {
            pod.starting = Some(start_ticks);
        }
        if !instant {
            self.out.push(Delta::PodUpsert(pod.spec.clone()));
        }
    }

    pub(super) fn delete_pod(&mut self, key: &str) {
        self.release(key);
        self.deletion_cost.remove(key);
        self.sched_said.remove(key);
        if let Some(p) = self.pods.remove(key) {
            if p.spec.owner == Owner::StatefulSet
                && let Some(&a) = self.workload_of.get(&p.spec.app)
            {
                self.sts_hint.insert(a, 0);
            }
            self.out.push(Delta::PodRemove { namespace: p.spec.namespace, name: p.spec.name });
        }
    }

    /// Starts a graceful deletion, as the Eviction API does.
    pub(super) fn terminate_pod(&mut self, key: &str) {
        let Some(p) = self.pods.get_mut(key) else { return };
        if p.terminating.is_some() {
            return;
        }
        p.spec.phase = Phase::Terminating;
        // As the API server records an eviction: the pod's default grace period, no
        // finalizers; the simulated containers stop well within it.
        p.spec.deletion = Some(crate::model::Deletion { since: self.now, grace_secs: Some(30), ..Default::default() });
        p.terminating = Some(2);
        let spec = p.spec.clone();
        self.out.push(Delta::PodUpsert(spec));
    }
}

impl SPod {
    /// Its containers start at `at`, as a kubelet would say it, failures included (among the
    /// idle pods of two workloads): one `jupyter` notebook in four (by its name) names
    /// an image whose registry never resolves, so it stays Pending on its node in
    /// ImagePullBackOff, holding its GPU; an idle `ft-debug` pod has a container that exits
    /// each time it starts, so it runs in CrashLoopBackOff (its GPU idle between restarts).
    pub(super) fn run(&mut self, at: Ts) {
        let by_name = self.spec.name.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
        let idle = self.behaviour == Behaviour::Idle;
        if self.spec.app == "jupyter" && idle && by_name.is_multiple_of(4) {
            let image = "registry.invalid/research/notebook:cuda12";
            let error = kubelet::pull_error(image).unwrap_or_default();
            self.spec.container_waiting = Some(("ImagePullBackOff".into(), kubelet::pull_back_off(image, &error)));
            return;
        }
        self.spec.phase = Phase::Running;
        self.spec.started = Some(at);
        if self.spec.app == "ft-debug" && idle {
            // It has crashed a while already: nine restarts, backing off 5 min each.
            self.crashed(9, at);
        }
    }

    /// Its container exited at `at` for the `restarts`-th time: CrashLoopBackOff, backing off.
    fn crashed(&mut self, restarts: u32, at: Ts) {
        let pod = format!("{}_{}", self.spec.name, self.spec.namespace);
        let (message, _) = kubelet::crash_back_off("train", &pod, kubelet::back_off_secs(restarts));
        self.spec.container_waiting = Some(("CrashLoopBackOff".into(), message));
        self.spec.restarts = Restarts::new(restarts, Some(at));
    }

    /// A crash-looping pod whose back-off ran out by `now`: the kubelet restarts its
    /// container, which exits at once again.
    pub(super) fn crash_due(&self, now: Ts) -> bool {
        let looping = self.spec.container_waiting.as_ref().is_some_and(|(r, _)| r == "CrashLoopBackOff");
        let back_off = u64::from(kubelet::back_off_secs(self.spec.restarts.count)) * 1000;
        looping
            && self.spec.phase == Phase::Running
            && self.spec.restarts.last_exit().is_some_and(|t| now >= t + back_off)
    }

    /// Restarted by the kubelet at `now`, it crashed again: one restart more.
    pub(super) fn crash_again(&mut self, now: Ts) {
        self.crashed(self.spec.restarts.count.saturating_add(1), now);
    }
}
