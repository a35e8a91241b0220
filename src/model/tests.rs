//! Model tests: deltas in, facts out; and the incremental counters always equal a
//! recount from scratch.

use super::*;
use crate::mig::{self, GpuModel};
use crate::quantity::{Format, Quantity};

fn node(name: &str) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        labels: vec![("nvidia.com/gpu.product".into(), "NVIDIA-H100-80GB-HBM3".into())],
        ready: true,
        cordoned: false,
        cordoned_by: String::new(),
        gpu_model: Some(GpuModel::H100_80GB),
        capacity: vec![("nvidia.com/gpu".into(), 2)],
        allocatable: vec![("nvidia.com/gpu".into(), 2)],
        mig_config: "all-disabled".into(),
        mig_state: MigConfigState::Success,
        mig_state_since: None,
        ready_since: None,
        created: 0,
    }
}

fn gpu(node: &str, index: u8, uuid: &str) -> GpuSpec {
    GpuSpec {
        uuid: uuid.into(),
        node: node.into(),
        index,
        model: GpuModel::H100_80GB,
        memory_mib: 81920,
        mig_enabled: false,
        instances: vec![],
    }
}

fn pod(ns: &str, name: &str, node: Option<&str>, phase: Phase, gpus: u16, bound: &[&str]) -> PodSpec {
    PodSpec {
        namespace: ns.into(),
        name: name.into(),
        node: node.map(Into::into),
        phase,
        created: 0,
        started: None,
        owner: Owner::ReplicaSet,
        owner_name: String::new(),
        app: "app".into(),
        empty_dir: false,
        gpus,
        gpus_renamed: false,
        mig: vec![],
        dra: vec![],
        claim_templates: Vec::new(),
        bound_gpus: bound.iter().map(|s| s.to_string()).collect(),
        bound_mig: vec![],
        deletion: None,
        container_waiting: None,
        restarts: Default::default(),
    }
}

/// One GPU's telemetry at `at` with `util` and nothing else known.
fn telemetry(uuid: &str, at: Ts, util: u8) -> TelemetrySample {
    TelemetrySample {
        gpu_uuid: uuid.into(),
        at,
        sample: Sample::new(util, 50, 300, 50),
        instances: vec![],
        node_gpu: None,
        allocated: None,
        peers: None,
        processes: None,
    }
}

fn sample(uuid: &str, at: Ts, util: u8) -> Delta {
    Delta::Telemetry(vec![telemetry(uuid, at, util)])
}

fn small_fleet() -> Fleet {
    let mut f = Fleet::new(Thresholds {
        idle_util_pct: 5,
        idle_window_ms: 60_000,
        busy_util_pct: 20,
        mig_stuck_ms: 300_000,
        stale_ms: 60_000,
    });
    f.apply(Delta::TenantUpsert(TenantSpec {
        name: "team-a".into(),
        namespaces: vec!["a".into(), "a-dev".into()],
        source: "label".into(),
    }));
    f.apply(Delta::NodeUpsert(node("n1")));
    f.apply(Delta::GpuUpsert(gpu("n1", 0, "GPU-0")));
    f.apply(Delta::GpuUpsert(gpu("n1", 1, "GPU-1")));
    f
}

/// Recounts every derived counter from the raw objects.
pub(crate) fn check_invariants(f: &Fleet) {
    f.check_cotenancy();
    let mut t = Totals::default();
    for id in f.node_ids() {
        let n = f.node(id).unwrap();
        t.nodes += 1;
        t.nodes_ready += n.ready as u32;
        t.nodes_cordoned += n.cordoned as u32;
        let mut alloc = 0;
        let mut mig = 0;
        let mut pods = 0;
        let (mut shares, mut unplaced) = (0, 0);
        let mut unbound: std::collections::BTreeMap<Sym, u32> = Default::default();
        for &pid in f.pods_on_node(id) {
            let p = f.pod(pid).unwrap();
            assert_eq!(p.node, Some(id));
            if p.phase.holds_devices() {
                // On a shared node `nvidia.com/gpu` counts replicas, never GPUs.
                if n.sharing.shared() {
                    alloc += p.dra_count() - f.dra_mig(p) - f.capacity_shares(p).0;
                    shares += p.gpus as u32;
                    unplaced += if p.bound_gpus.is_empty() { p.gpus as u32 } else { 0 };
                } else {
                    alloc += p.gpus as u32 + p.dra_count() - f.dra_mig(p) - f.capacity_shares(p).0;
                }
                mig += p.mig_count() + f.dra_mig(p);
                // Held without a known instance: asked for, less the instances of that
                // profile bound to it anywhere in the fleet.
                for &(r, want) in &p.mig {
                    let known = f
                        .gpu_ids()
                        .filter_map(|g| f.gpu(g))
                        .flat_map(|g| g.instances.iter().map(move |i| (g.model, i)))
                        .filter(|(m, i)| {
                            i.pod == Some(pid)
                                && mig::profile_from_resource(*m, f.str_of(r)) == Some(i.placement.profile)
                        })
                        .count() as u32;
                    let left = (want as u32).saturating_sub(known);
                    if left > 0 {
                        *unbound.entry(r).or_default() += left;
                    }
                }
            }
            pods += (!p.phase.finished() && p.requests_devices()) as u32;
        }
        assert_eq!(n.gpus_allocated, alloc, "node {} gpus_allocated", f.str_of(n.name));
        assert_eq!((n.shares_held, n.shares_unplaced), (shares, unplaced), "node {} shares", f.str_of(n.name));
        let offered = n.shares_total(&f.gpus);
        t.shares += offered;
        t.gpus_shared += offered / u32::from(n.sharing.replicas.max(1));
        t.shares_held += shares;
        t.shares_unplaced += if n.sharing.shared() { unplaced } else { 0 };
        // Physical GPUs are never double counted: allocated ≤ GPUs, shared or not.
        assert!(f.node_allocated_gpus(n) <= n.gpu_count().max(n.gpus_allocated), "node {}", f.str_of(n.name));
        assert_eq!(n.mig_allocated, mig, "node {} mig_allocated", f.str_of(n.name));
        assert_eq!(n.pods, pods, "node {} pods", f.str_of(n.name));
        let mut got: Vec<(Sym, u32)> = n.mig_unbound.clone();
        got.sort();
        assert_eq!(
            got,
            unbound.iter().map(|(r, k)| (*r, *k)).collect::<Vec<_>>(),
            "node {} mig_unbound",
            f.str_of(n.name)
        );
        t.mig_unbound += n.mig_unbound_total();
        t.gpus_allocated += f.node_allocated_gpus(n);
    }
    for gid in f.gpu_ids() {
        let g = f.gpu(gid).unwrap();
        t.gpus += 1;
        t.gpus_mig += g.mig_enabled as u32;
        t.gpus_busy += g.busy as u32;
        assert_eq!(
            g.measured,
            g.last_sample_at.is_some() && g.last.util.is_some(),
            "gpu {} measured",
            f.str_of(g.uuid)
        );
        t.gpus_measured += g.measured as u32;
        t.mig_instances += g.instances.len() as u32;
        t.mig_allocated += g.instances.iter().filter(|i| i.pod.is_some()).count() as u32;
        t.idle_allocated += g.idle_allocated as u32 + g.instances.iter().filter(|i| i.idle_allocated).count() as u32;
        for p in &g.pods {
            assert!(f.pod(*p).unwrap().bound_gpus.contains(&gid));
        }
    }
    // Idle shares: holders of a shared GPU, each counted with the replicas it holds there.
    let mut idle_by_tenant: std::collections::HashMap<TenantId, u32> = Default::default();
    for gid in f.gpu_ids() {
        let g = f.gpu(gid).unwrap();
        let idle = f.idle_shares(gid);
        let shared = f.node(g.node).is_some_and(|n| n.sharing.shared()) && !g.mig_enabled;
        assert!(shared || idle.is_empty(), "idle shares only on a shared GPU");
        for &(pid, tid, k) in idle {
            let p = f.pod(pid).unwrap();
            assert!(g.pods.contains(&pid), "an idle share's pod holds the GPU");
            assert_eq!((p.tenant, k), (tid, (p.gpus as u32 / (p.bound_gpus.len() as u32).max(1)).max(1)));
            t.shares_idle += k;
            *idle_by_tenant.entry(tid).or_default() += k;
        }
    }
    // Held MIG instances: bound ones, and those held without a known instance.
    t.mig_allocated += t.mig_unbound;
    let mut usage: std::collections::HashMap<TenantId, TenantUsage> = Default::default();
    for pid in f.pod_ids() {
        let p = f.pod(pid).unwrap();
        if !(p.phase.holds_devices() && p.node.is_some()) {
            assert!(p.mig_unbound.is_empty(), "pod {} holds nothing", p.name);
        }
        let u = usage.entry(p.tenant).or_default();
        if !p.phase.finished() {
            u.requested_gpus += p.gpus as u32 + p.dra_count() - f.dra_mig(p);
            u.requested_mig += p.mig_count() + f.dra_mig(p);
            u.pods += 1;
            t.pods += 1;
            t.gpu_pods += p.requests_devices() as u32;
        }
        if p.phase == Phase::Pending {
            u.pending_pods += 1;
            t.pods_pending += 1;
            t.gpu_pods_pending += p.requests_devices() as u32;
        }
        if p.phase.holds_devices() && p.node.is_some() {
            let sharing = p.node.and_then(|n| f.node(n)).map(|n| n.sharing).unwrap_or_default();
            let (n, milli) = f.capacity_shares(p);
            let dra_gpus = p.dra_count() - f.dra_mig(p) - n;
            if sharing.shared() {
                u.allocated_gpus += dra_gpus;
                u.allocated_shares += p.gpus as u32;
                u.share_milli += p.gpus as u32 * 1000 / u32::from(sharing.replicas);
                if let Some(s) = p.started {
                    u.started_shares += p.gpus as u32;
                    u.started_share_ms += u64::from(p.gpus) * s;
                }
            } else {
                u.allocated_gpus += p.gpus as u32 + dra_gpus;
            }
            u.allocated_shares += n;
            u.share_milli += milli;
            u.allocated_mig += p.mig_count() + f.dra_mig(p);
            let held = p.gpus as u32 + dra_gpus;
            let held = held + n + p.mig_count() + f.dra_mig(p);
            if p.phase == Phase::Running && p.crash_looping() && held > 0 {
                u.crash_looping += 1;
                u.crash_looping_devices += held;
            }
        }
    }
    for gid in f.gpu_ids() {
        let g = f.gpu(gid).unwrap();
        if !g.mig_enabled
            && let Some(p) = g.pods.first()
        {
            let u = usage.entry(f.pod(*p).unwrap().tenant).or_default();
            u.busy += g.busy as u32;
            u.idle_allocated += g.idle_allocated as u32;
            u.measured += g.measured as u32;
            t.devices_measured += g.measured as u32;
            assert!(!g.busy && !g.idle_allocated || g.measured, "busy or idle only when measured");
        }
        for i in &g.instances {
            if let Some(p) = i.pod {
                let u = usage.entry(f.pod(p).unwrap().tenant).or_default();
                u.busy += i.util.is_some_and(|u| u >= f.thresholds.busy_util_pct) as u32;
                u.idle_allocated += i.idle_allocated as u32;
                u.measured += i.util.is_some() as u32;
                t.devices_measured += i.util.is_some() as u32;
            }
        }
    }
    for tid in f.tenant_ids() {
        let got = &f.tenant(tid).unwrap().usage;
        let want = usage.remove(&tid).unwrap_or_default();
        let name = f.str_of(f.tenant(tid).unwrap().name);
        assert_eq!(
            (got.requested_gpus, got.allocated_gpus, got.requested_mig, got.allocated_mig, got.allocated_shares),
            (want.requested_gpus, want.allocated_gpus, want.requested_mig, want.allocated_mig, want.allocated_shares),
            "tenant {name} gpu usage"
        );
        assert_eq!(got.share_milli, want.share_milli, "tenant {name} share_milli");
        assert_eq!(
            (got.started_shares, got.started_share_ms),
            (want.started_shares, want.started_share_ms),
            "tenant {name} started shares"
        );
        assert_eq!(got.shares_idle, idle_by_tenant.remove(&tid).unwrap_or(0), "tenant {name} shares_idle");
        assert_eq!(
            (got.pods, got.pending_pods, got.busy, got.idle_allocated, got.measured),
            (want.pods, want.pending_pods, want.busy, want.idle_allocated, want.measured),
            "tenant {name} pods/busy/idle/measured"
        );
        assert_eq!(
            (got.crash_looping, got.crash_looping_devices),
            (want.crash_looping, want.crash_looping_devices),
            "tenant {name} crash-looping pods and their devices"
        );
    }
    assert_eq!(f.totals, t, "fleet totals");
    // Kueue: each queued Workload's place, recounted from scratch, and the held-back pods.
    let mut lines: std::collections::BTreeMap<&str, Vec<(i32, Ts, &String)>> = Default::default();
    for (k, w) in &f.workloads {
        if w.state().queued() {
            lines.entry(w.cluster_queue.as_str()).or_default().push((-w.priority, w.created, k));
        }
    }
    let mut placed = 0;
    for line in lines.values_mut() {
        line.sort();
        for (i, (_, _, k)) in line.iter().enumerate() {
            assert_eq!(f.workload_position(k), Some(i as u32 + 1), "place of Workload {k}");
            placed += 1;
        }
    }
    let positioned = f.workloads.keys().filter(|k| f.workload_position(k).is_some()).count();
    assert_eq!(positioned, placed, "only queued Workloads have a place");
    for tid in f.tenant_ids() {
        let by: u32 = f.tenant_queued(tid).iter().map(|(_, _, p)| p).sum();
        assert_eq!(f.tenant_queued_pods(tid), by, "held-back pods of tenant {tid:?}");
    }
}

#[test]
fn pods_allocate_gpus_per_node_and_tenant() {
    let mut f = small_fleet();
    f.apply(Delta::PodUpsert(pod("a", "p1", Some("n1"), Phase::Running, 1, &["GPU-0"])));
    f.apply(Delta::PodUpsert(pod("a-dev", "p2", None, Phase::Pending, 2, &[])));
    let n = f.node(f.node_by_name("n1").unwrap()).unwrap();
    assert_eq!(n.gpus_allocated, 1);
    let t = f.tenant(f.tenant_by_name("team-a").unwrap()).unwrap();
    assert_eq!((t.usage.requested_gpus, t.usage.allocated_gpus, t.usage.pending_pods), (3, 1, 1));
    assert_eq!(f.totals.gpus_allocated, 1);
    check_invariants(&f);
    // The pending pod is scheduled, then the first finishes: counts follow.
    f.apply(Delta::PodUpsert(pod("a-dev", "p2", Some("n1"), Phase::Running, 1, &["GPU-1"])));
    f.apply(Delta::PodUpsert(pod("a", "p1", Some("n1"), Phase::Succeeded, 1, &["GPU-0"])));
    let t = f.tenant(f.tenant_by_name("team-a").unwrap()).unwrap();
    assert_eq!((t.usage.requested_gpus, t.usage.allocated_gpus, t.usage.pending_pods), (1, 1, 0));
    check_invariants(&f);
    f.apply(Delta::PodRemove { namespace: "a".into(), name: "p1".into() });
    f.apply(Delta::PodRemove { namespace: "a".into(), name: "nope".into() });
    check_invariants(&f);
    assert_eq!(f.pod_by_name("a", "p1"), None);
}

#[test]
fn unknown_namespaces_become_their_own_tenant() {
    let mut f = small_fleet();
    f.apply(Delta::PodUpsert(pod("stray", "p", Some("n1"), Phase::Running, 1, &["GPU-0"])));
    let t = f.tenant_by_name("stray").expect("tenant from namespace");
    assert_eq!(f.str_of(f.tenant(t).unwrap().source), "namespace");
    check_invariants(&f);
}

#[test]
fn a_pod_bound_to_its_node_holds_its_gpus_until_it_finishes_even_before_it_runs() {
    // As `kubectl describe node` counts it (every non-terminated pod on the node): the
    // kubelet allocated its devices when it admitted the pod, before any container started.
    let mut f = small_fleet();
    let mut stuck = pod("a", "stuck", Some("n1"), Phase::Pending, 1, &["GPU-0"]);
    stuck.container_waiting = Some(("ImagePullBackOff".into(), "Back-off pulling image \"x\"".into()));
    f.apply(Delta::PodUpsert(stuck.clone()));
    f.apply(Delta::PodUpsert(pod("a", "queued", None, Phase::Pending, 2, &[])));
    let n = f.node(f.node_by_name("n1").unwrap()).unwrap();
    assert_eq!(n.gpus_allocated, 1, "the stuck pod holds its GPU; the unscheduled one holds nothing");
    let t = f.tenant(f.tenant_by_name("team-a").unwrap()).unwrap();
    assert_eq!((t.usage.requested_gpus, t.usage.allocated_gpus, t.usage.pending_pods), (3, 1, 2));
    let p = f.pod(f.pod_by_name("a", "stuck").unwrap()).unwrap();
    let w = f.waiting(p).expect("pending");
    assert_eq!(w.text(), "ImagePullBackOff: Back-off pulling image \"x\"");
    assert_eq!(w.category(), "ImagePullBackOff");
    // Its GPU runs nothing: idle but allocated, once the window has passed.
    f.apply(sample("GPU-0", 1_000, 0));
    f.apply(sample("GPU-0", 61_000, 0));
    assert_eq!(f.totals.idle_allocated, 1);
    check_invariants(&f);
    // Failed (the kubelet gave up): it holds nothing any more.
    f.apply(Delta::PodUpsert(PodSpec { phase: Phase::Failed, container_waiting: None, ..stuck.clone() }));
    assert_eq!(f.node(f.node_by_name("n1").unwrap()).unwrap().gpus_allocated, 0);
    assert_eq!(f.totals.idle_allocated, 0);
    check_invariants(&f);
}

#[test]
fn a_running_pod_whose_container_crash_loops_is_held_back_but_not_pending() {
    // `kubectl get pods` says CrashLoopBackOff in STATUS while the phase stays Running: the
    // pod holds its GPU and runs nothing between restarts.
    let mut f = small_fleet();
    let mut looping = pod("a", "looping", Some("n1"), Phase::Running, 1, &["GPU-0"]);
    let message = "back-off 40s restarting failed container=train pod=looping_a(u1)";
    looping.container_waiting = Some(("CrashLoopBackOff".into(), message.into()));
    f.apply(Delta::PodUpsert(looping.clone()));
    let p = f.pod(f.pod_by_name("a", "looping").unwrap()).unwrap();
    assert_eq!(f.waiting(p), None, "not pending: PEND and the tenant's rollup leave it out");
    let w = f.held_back(p).expect("held back");
    assert_eq!(w.category(), "CrashLoopBackOff");
    assert_eq!(w.text(), format!("CrashLoopBackOff: {message}"));
    let t = f.tenant(f.tenant_by_name("team-a").unwrap()).unwrap();
    assert_eq!((t.usage.allocated_gpus, t.usage.pending_pods), (1, 0));
    assert!(f.tenant_waiting(f.tenant_by_name("team-a").unwrap()).is_empty());
    let by = f.tenant_running_held_back(f.tenant_by_name("team-a").unwrap());
    assert_eq!(by, vec![("CrashLoopBackOff".to_string(), 1)]);
    // Its tenant is alerted: a pod crash-looping on the GPU it holds.
    let crash_alert = |f: &Fleet| {
        f.alerts.values().find(|a| a.kind == AlertKind::CrashLoop).map(|a| (a.target.clone(), a.message.clone()))
    };
    let tid = f.tenant_by_name("team-a").unwrap();
    assert_eq!(
        crash_alert(&f),
        Some((
            AlertTarget::Tenant(tid),
            "tenant team-a: 1 pod crash-looping (CrashLoopBackOff), idle on the 1 GPU device it holds".into()
        ))
    );
    assert_eq!(
        (f.tenant(tid).unwrap().usage.crash_looping, f.tenant(tid).unwrap().usage.crash_looping_devices),
        (1, 1)
    );
    // Restarted once more: the count and the exit kept, the alert stays.
    let restarted = PodSpec { restarts: Restarts::new(4, Some(1_700_000_000_000)), ..looping.clone() };
    f.apply(Delta::PodUpsert(restarted));
    let p = f.pod(f.pod_by_name("a", "looping").unwrap()).unwrap();
    assert_eq!((p.restarts.count, p.restarts.last_exit()), (4, Some(1_700_000_000_000)));
    assert!(crash_alert(&f).is_some());
    // Restarted and running again: nothing holds it back, and the alert ends.
    f.apply(Delta::PodUpsert(PodSpec { container_waiting: None, ..looping.clone() }));
    let p = f.pod(f.pod_by_name("a", "looping").unwrap()).unwrap();
    assert_eq!(f.held_back(p), None);
    assert_eq!(crash_alert(&f), None);
    assert_eq!(f.tenant(tid).unwrap().usage.crash_looping, 0);
    check_invariants(&f);
    // Being deleted: it says Terminating, not why it waited.
    f.apply(Delta::PodUpsert(PodSpec { phase: Phase::Terminating, ..looping }));
    let p = f.pod(f.pod_by_name("a", "looping").unwrap()).unwrap();
    assert_eq!(f.held_back(p), None);
    // A pending pod is held back for the reason it waits.
    f.apply(Delta::PodUpsert(pod("a", "queued", None, Phase::Pending, 1, &[])));
    let p = f.pod(f.pod_by_name("a", "queued").unwrap()).unwrap();
    assert_eq!(f.held_back(p), f.waiting(p));
    assert!(f.held_back(p).is_some());
    check_invariants(&f);
}

#[test]
fn idle_but_allocated_needs_the_whole_window() {
    let mut f = small_fleet();
    f.apply(Delta::PodUpsert(pod("a", "p1", Some("n1"), Phase::Running, 1, &["GPU-0"])));
    f.apply(sample("GPU-0", 1_000, 2));
    f.apply(sample("GPU-1", 1_000, 0));
    assert_eq!(f.totals.idle_allocated, 0, "not idle before the window has passed");
    f.apply(sample("GPU-0", 30_000, 3));
    assert_eq!(f.totals.idle_allocated, 0);
    f.apply(sample("GPU-0", 61_000, 1));
    f.apply(sample("GPU-1", 61_000, 0));
    assert_eq!(f.totals.idle_allocated, 1, "allocated GPU under threshold for 60s is idle; the free one is not");
    let t = f.tenant(f.tenant_by_name("team-a").unwrap()).unwrap();
    assert_eq!(t.usage.idle_allocated, 1);
    check_invariants(&f);
    // One busy sample resets it.
    f.apply(sample("GPU-0", 62_000, 90));
    assert_eq!(f.totals.idle_allocated, 0);
    assert_eq!(f.totals.gpus_busy, 1);
    assert_eq!(f.tenant(f.tenant_by_name("team-a").unwrap()).unwrap().usage.busy, 1);
    check_invariants(&f);
    // Removing the pod removes its GPU's idle/busy contribution from the tenant.
    f.apply(Delta::PodRemove { namespace: "a".into(), name: "p1".into() });
    assert_eq!(f.tenant(f.tenant_by_name("team-a").unwrap()).unwrap().usage.busy, 0);
    check_invariants(&f);
}

/// A telemetry sample with no utilisation of its own and per-instance utilisations.
fn sample_without_util(uuid: &str, at: Ts, instances: &[(&str, Option<u8>)]) -> Delta {
    Delta::Telemetry(vec![TelemetrySample {
        sample: Sample::without_util(50, 300, 50),
        instances: instances.iter().map(|(u, util)| InstanceSample::new(*u, *util, 1024)).collect(),
        ..telemetry(uuid, at, 0)
    }])
}

/// The small fleet with GPU-1 sliced 3g.40gb (MIG-0) + 1g.10gb (MIG-1), and a pod that
/// names MIG-1; with the 3g profile's id.
fn mig_fleet() -> (Fleet, mig::ProfileId) {
    let mut f = small_fleet();
    let model = GpuModel::H100_80GB;
    let p3 = mig::find_profile(model, "3g.40gb").unwrap();
    let p1 = mig::find_profile(model, "1g.10gb").unwrap();
    let placed = mig::plan(model, &[p3, p1]).unwrap();
    let instances =
        placed.iter().enumerate().map(|(i, p)| MigInstanceSpec { placement: *p, uuid: format!("MIG-{i}") }).collect();
    f.apply(Delta::GpuUpsert(GpuSpec { mig_enabled: true, instances, ..gpu("n1", 1, "GPU-1") }));
    let mut p = pod("a", "whisper", Some("n1"), Phase::Running, 0, &[]);
    p.mig = vec![("nvidia.com/mig-1g.10gb".into(), 1)];
    p.bound_mig = vec!["MIG-1".into()];
    f.apply(Delta::PodUpsert(p));
    (f, p3)
}

#[test]
fn an_unmeasured_utilisation_is_neither_idle_nor_busy() {
    let mut f = small_fleet();
    f.apply(Delta::PodUpsert(pod("a", "p1", Some("n1"), Phase::Running, 1, &["GPU-0"])));
    for at in [1_000, 30_000, 61_000, 120_000] {
        f.apply(sample_without_util("GPU-0", at, &[]));
    }
    let g = f.gpu(f.gpu_by_uuid("GPU-0").unwrap()).unwrap();
    assert_eq!(g.last.util, None, "kept unknown, not 0 %");
    assert_eq!(g.last.power_w, 300, "the rest of the sample still lands");
    assert!(!g.idle_allocated && !g.busy);
    assert_eq!(f.totals.idle_allocated, 0, "a GPU nobody measured is not flagged idle");
    check_invariants(&f);
    // A measured low sample starts the window afresh; an unknown one in between resets it.
    f.apply(sample("GPU-0", 130_000, 1));
    f.apply(sample_without_util("GPU-0", 150_000, &[]));
    f.apply(sample("GPU-0", 191_000, 1));
    assert_eq!(f.totals.idle_allocated, 0, "the unknown sample broke the low run");
    f.apply(sample("GPU-0", 252_000, 1));
    assert_eq!(f.totals.idle_allocated, 1);
    check_invariants(&f);
}

#[test]
fn a_mig_gpu_without_its_own_utilisation_takes_its_instances_when_all_are_measured() {
    let (mut f, _) = mig_fleet();
    let gid = f.gpu_by_uuid("GPU-1").unwrap();
    // The first GPM sample has nothing to compare with: both instances unknown.
    for at in [1_000, 61_000, 122_000] {
        f.apply(sample_without_util("GPU-1", at, &[("MIG-0", None), ("MIG-1", None)]));
    }
    let g = f.gpu(gid).unwrap();
    assert_eq!(g.last.util, None);
    assert!(g.instances.iter().all(|i| i.util.is_none() && !i.idle_allocated));
    assert_eq!(f.totals.idle_allocated, 0, "unmeasured MIG instances are not idle");
    // One instance measured: the GPU stays unknown (not the half it could see).
    f.apply(sample_without_util("GPU-1", 123_000, &[("MIG-0", Some(70)), ("MIG-1", None)]));
    assert_eq!(f.gpu(gid).unwrap().last.util, None);
    // Both measured: 3 slices at 70 % and 1 at 0 % of 7 → 30 %.
    f.apply(sample_without_util("GPU-1", 124_000, &[("MIG-0", Some(70)), ("MIG-1", Some(0))]));
    let g = f.gpu(gid).unwrap();
    assert_eq!(g.last.util, Some(30));
    assert_eq!(g.instances[1].util, Some(0));
    f.apply(sample_without_util("GPU-1", 185_000, &[("MIG-0", Some(70)), ("MIG-1", Some(0))]));
    assert!(f.gpu(gid).unwrap().instances[1].idle_allocated, "the allocated 1g measured at 0 % for the window");
    assert_eq!(f.totals.idle_allocated, 1);
    check_invariants(&f);
}

#[test]
fn an_agents_mig_samples_land_on_label_gpus_by_profile_and_placement() {
    let mut f = small_fleet();
    let model = GpuModel::H100_80GB;
    let p3 = mig::find_profile(model, "3g.40gb").unwrap();
    let p1 = mig::find_profile(model, "1g.10gb").unwrap();
    let placed = mig::plan(model, &[p3, p1, p1]).unwrap();
    // Named by the fleet, as the kube feed names the instances of a label-announced GPU.
    let instances =
        placed.iter().map(|p| MigInstanceSpec { placement: *p, uuid: format!("n1/gpu-2/mig-{}", p.start) }).collect();
    f.apply(Delta::GpuUpsert(GpuSpec { mig_enabled: true, instances, ..gpu("n1", 2, "n1/gpu-2") }));
    let start_of = |name: &str, rank: usize| {
        let mut s: Vec<u8> =
            placed.iter().filter(|p| mig::profile(model, p.profile).name == name).map(|p| p.start).collect();
        s.sort_unstable();
        s[rank]
    };
    let (s3, s1a, s1b) = (start_of("3g.40gb", 0), start_of("1g.10gb", 0), start_of("1g.10gb", 1));
    let agent = |placements: [(&str, u8, u8); 3]| {
        Delta::Telemetry(vec![TelemetrySample {
            sample: Sample::without_util(50, 300, 50),
            instances: placements
                .iter()
                .enumerate()
                .map(|(k, (p, start, util))| InstanceSample {
                    placement: Some((p.to_string(), *start)),
                    ..InstanceSample::new(format!("MIG-real-{k}"), Some(*util), 100 * (k as u32 + 1))
                })
                .collect(),
            node_gpu: Some(("n1".into(), 2)),
            ..telemetry("GPU-real-uuid", 1_000, 0)
        }])
    };
    let gid = f.gpu_by_uuid("n1/gpu-2").unwrap();
    let by_start = |f: &Fleet, start: u8| {
        let g = f.gpu(gid).unwrap();
        g.instances.iter().find(|i| i.placement.start == start).map(|i| (i.util, i.mem_used_mib))
    };
    // The agent's placements agree with the fleet's: each lands on its own instance.
    f.apply(agent([("1g.10gb", s1b, 11), ("3g.40gb", s3, 33), ("1g.10gb", s1a, 10)]));
    assert_eq!(by_start(&f, s3), Some((Some(33), 200)));
    assert_eq!(by_start(&f, s1a), Some((Some(10), 300)));
    assert_eq!(by_start(&f, s1b), Some((Some(11), 100)));
    assert!(f.gpu(gid).unwrap().last.util.is_some(), "all measured: the GPU's utilisation is derived");
    // The driver placed the 1g instances elsewhere than the fleet's plan: matched by rank.
    f.apply(agent([("3g.40gb", s3, 70), ("1g.10gb", 6, 61), ("1g.10gb", 5, 50)]));
    assert_eq!(by_start(&f, s1a).map(|x| x.0), Some(Some(50)), "the lower 1g goes to the fleet's lower 1g");
    assert_eq!(by_start(&f, s1b).map(|x| x.0), Some(Some(61)));
    // A device-plugin pod asking for a 1g: the kubelet (through the agent) says which one.
    let mut p = pod("a", "whisper", Some("n1"), Phase::Running, 0, &[]);
    p.mig = vec![("nvidia.com/mig-1g.10gb".into(), 1)];
    f.apply(Delta::PodUpsert(p));
    let holder_at = |f: &Fleet, start: u8| {
        let g = f.gpu(gid).unwrap();
        let i = g.instances.iter().find(|i| i.placement.start == start)?;
        f.pod(i.pod?).map(|p| p.name.to_string())
    };
    assert_eq!(holder_at(&f, s1b), None);
    let allocated = |at: Ts, util: u8, who: Vec<String>| {
        let Delta::Telemetry(mut v) = agent([("3g.40gb", s3, 70), ("1g.10gb", s1a, 50), ("1g.10gb", s1b, util)]) else {
            unreachable!()
        };
        v[0].at = at;
        v[0].instances[2].allocated = Some(who);
        Delta::Telemetry(v)
    };
    let before = f.totals.mig_allocated;
    assert_eq!(f.totals.mig_unbound, 1, "held before anyone says which instance");
    f.apply(allocated(2_000, 0, vec!["a/whisper".into()]));
    assert_eq!(holder_at(&f, s1b).as_deref(), Some("whisper"), "bound to the instance the kubelet gave it");
    assert_eq!((f.totals.mig_allocated, f.totals.mig_unbound), (before, 0), "held still, counted once");
    f.apply(allocated(63_000, 0, vec!["a/whisper".into()]));
    let inst = |f: &Fleet| f.gpu(gid).unwrap().instances.iter().find(|i| i.placement.start == s1b).cloned().unwrap();
    assert!(inst(&f).idle_allocated, "an allocated 1g at 0 % for the window");
    check_invariants(&f);
    f.apply(allocated(64_000, 0, vec![]));
    assert_eq!(holder_at(&f, s1b), None, "the kubelet says nobody has it now");
    assert_eq!(f.totals.mig_allocated, before);
    check_invariants(&f);
    // A profile the fleet does not have there lands nowhere.
    f.apply(agent([("2g.20gb", 0, 99), ("3g.40gb", s3, 71), ("1g.10gb", s1a, 1)]));
    assert!(f.gpu(gid).unwrap().instances.iter().all(|i| i.util != Some(99)));
    assert_eq!(by_start(&f, s3).map(|x| x.0), Some(Some(71)));
    check_invariants(&f);
}

/// A node agent's sample of `uuid` with the pods it sees computing there.
fn agent_sample(uuid: &str, at: Ts, util: u8, pods: &[&str]) -> Delta {
    Delta::Telemetry(vec![TelemetrySample {
        processes: Some(
            pods.iter()
                .enumerate()
                .map(|(k, p)| ProcSample {
                    pid: 100 + k as u32,
                    mem_mib: Some(1024),
                    pod: Some(p.to_string()),
                    container: None,
                    gpu_instance: None,
                    sm_util: None,
                })
                .collect(),
        ),
        ..telemetry(uuid, at, util)
    }])
}

#[test]
fn a_node_agent_says_which_gpu_a_device_plugin_pod_holds() {
    let mut f = small_fleet();
    // Asks for one GPU; the API does not say which (device plugin).
    f.apply(Delta::PodUpsert(pod("a", "p1", Some("n1"), Phase::Running, 1, &[])));
    let (g0, g1) = (f.gpu_by_uuid("GPU-0").unwrap(), f.gpu_by_uuid("GPU-1").unwrap());
    let pods_of = |f: &Fleet, g| f.gpu(g).unwrap().pods.len();
    assert_eq!((pods_of(&f, g0), pods_of(&f, g1)), (0, 0));
    f.apply(agent_sample("GPU-1", 1_000, 1, &["a/p1", "nobody/known"]));
    assert_eq!((pods_of(&f, g0), pods_of(&f, g1)), (0, 1), "bound where its processes run");
    check_invariants(&f);
    f.apply(agent_sample("GPU-1", 62_000, 2, &["a/p1"]));
    assert_eq!(f.totals.idle_allocated, 1, "idle-but-allocated on a device-plugin GPU");
    let team = f.tenant_by_name("team-a").unwrap();
    assert_eq!(f.tenant(team).unwrap().usage.idle_allocated, 1);
    check_invariants(&f);
    // The pod's update from the API keeps the binding.
    f.apply(Delta::PodUpsert(pod("a", "p1", Some("n1"), Phase::Running, 1, &[])));
    assert_eq!(pods_of(&f, g1), 1);
    check_invariants(&f);
    // Seen on both GPUs while it asked for one: bound to one (the other shows its process
    // as not allocated there).
    f.apply(agent_sample("GPU-0", 63_000, 50, &["a/p1"]));
    assert_eq!((pods_of(&f, g0), pods_of(&f, g1)), (1, 0), "lowest index first, one GPU");
    f.apply(agent_sample("GPU-0", 64_000, 50, &[]));
    assert_eq!((pods_of(&f, g0), pods_of(&f, g1)), (0, 1));
    // Its processes are gone from the GPU: no longer bound, no longer idle-allocated.
    f.apply(agent_sample("GPU-1", 65_000, 0, &[]));
    assert_eq!((pods_of(&f, g0), pods_of(&f, g1)), (0, 0));
    assert_eq!(f.totals.idle_allocated, 0);
    check_invariants(&f);
    // A pod the cluster binds itself (DRA) is never re-bound from processes.
    f.apply(Delta::PodUpsert(pod("a", "p2", Some("n1"), Phase::Running, 1, &["GPU-0"])));
    f.apply(agent_sample("GPU-1", 66_000, 0, &["a/p2"]));
    assert_eq!((pods_of(&f, g0), pods_of(&f, g1)), (1, 0));
    // The pod goes: the binding goes with it.
    f.apply(Delta::PodRemove { namespace: "a".into(), name: "p1".into() });
    f.apply(agent_sample("GPU-1", 67_000, 0, &["a/p1"]));
    assert_eq!(pods_of(&f, g1), 0, "a pod the fleet does not know binds nothing");
    check_invariants(&f);
}

#[test]
fn the_kubelets_assignment_wins_over_processes_and_sees_pods_that_run_nothing() {
    let mut f = small_fleet();
    f.apply(Delta::PodUpsert(pod("a", "sleeper", Some("n1"), Phase::Running, 1, &[])));
    f.apply(Delta::PodUpsert(pod("a", "busy", Some("n1"), Phase::Running, 1, &[])));
    let g1 = f.gpu_by_uuid("GPU-1").unwrap();
    let holder = |f: &Fleet| {
        let g = f.gpu(g1).unwrap();
        g.pods.iter().filter_map(|p| f.pod(*p)).map(|p| p.name.to_string()).collect::<Vec<_>>()
    };
    // The kubelet gave GPU-1 to a pod that runs nothing; another pod's process is there.
    let kubelet = |at, util| {
        let Delta::Telemetry(mut v) = agent_sample("GPU-1", at, util, &["a/busy"]) else { unreachable!() };
        v[0].allocated = Some(vec!["a/sleeper".into()]);
        Delta::Telemetry(v)
    };
    f.apply(kubelet(1_000, 0));
    assert_eq!(holder(&f), vec!["sleeper"], "the kubelet's word, not the process's");
    f.apply(kubelet(62_000, 0));
    assert!(f.gpu(g1).unwrap().idle_allocated, "a pod holding a GPU it never touches is idle-but-allocated");
    check_invariants(&f);
    // The kubelet says nobody has it: nobody is bound, whatever runs there.
    let Delta::Telemetry(mut v) = agent_sample("GPU-1", 63_000, 0, &["a/busy"]) else { unreachable!() };
    v[0].allocated = Some(vec![]);
    f.apply(Delta::Telemetry(v));
    assert!(holder(&f).is_empty());
    assert_eq!(f.totals.idle_allocated, 0);
    check_invariants(&f);
}

#[test]
fn history_is_bounded() {
    let mut f = small_fleet();
    for i in 0..500u64 {
        f.apply(sample("GPU-0", i * 1000, (i % 100) as u8));
    }
    let g = f.gpu(f.gpu_by_uuid("GPU-0").unwrap()).unwrap();
    assert_eq!(g.history.len(), HISTORY_LEN);
    assert_eq!(g.last.util, Some(99));
}

#[test]
fn mig_instances_bind_pods_and_report_fragmentation() {
    let (mut f, p3) = mig_fleet();
    assert_eq!(f.totals.mig_instances, 2);
    assert_eq!(f.totals.mig_allocated, 1);
    assert_eq!(f.totals.gpus_mig, 1);
    let gid = f.gpu_by_uuid("GPU-1").unwrap();
    let frag = f.fragmentation(gid).expect("fragmentation for a MIG GPU");
    assert_eq!(frag.free_compute_slices, 3);
    assert!(
        frag.fits.iter().any(|(id, n)| *id == p3 && *n == 0) || frag.fits.iter().all(|(id, _)| *id != p3),
        "a second 3g.40gb no longer fits beside a 1g at slice 4? {frag:?}"
    );
    check_invariants(&f);
    // A reslice replaces the instances: the binding goes with the old instance, while the
    // pod still holds its 1g (the API says so), instance unknown.
    f.apply(Delta::GpuUpsert(gpu("n1", 1, "GPU-1")));
    assert_eq!(f.totals.mig_instances, 0);
    assert_eq!((f.totals.mig_allocated, f.totals.mig_unbound), (1, 1));
    assert!(f.fragmentation(gid).is_none());
    check_invariants(&f);
}

#[test]
fn node_alerts_follow_status_and_stuck_mig_is_flagged_after_the_threshold() {
    let mut f = small_fleet();
    f.apply(Delta::NodeUpsert(NodeSpec { ready: false, ..node("n1") }));
    assert!(f.alerts.keys().any(|(k, _)| *k == AlertKind::NotReady));
    f.apply(Delta::NodeUpsert(node("n1")));
    assert!(!f.alerts.keys().any(|(k, _)| *k == AlertKind::NotReady));
    let mut spec = node("n1");
    spec.mig_state = MigConfigState::Pending;
    spec.labels.push(("nvidia.com/gpu.deploy.device-plugin".into(), "paused-for-mig-change".into()));
    f.apply(Delta::Clock(1_000));
    f.apply(Delta::NodeUpsert(spec));
    f.apply(Delta::Clock(200_000));
    assert!(!f.alerts.keys().any(|(k, _)| *k == AlertKind::MigStuck), "not stuck yet");
    f.apply(Delta::Clock(302_000));
    let stuck = f.alerts.values().find(|a| a.kind == AlertKind::MigStuck).expect("stuck pending flagged");
    assert!(stuck.message.contains("device-plugin"), "names the paused clients: {}", stuck.message);
    f.apply(Delta::NodeUpsert(node("n1")));
    assert!(!f.alerts.keys().any(|(k, _)| *k == AlertKind::MigStuck));
}

#[test]
fn quotas_and_over_quota_alerts() {
    let mut f = small_fleet();
    let q = |hard: i64| QuotaSpec {
        tenant: "team-a".into(),
        source: QuotaSourceSpec::ResourceQuota { namespace: "a".into(), name: "gpu".into() },
        resource: "requests.nvidia.com/gpu".into(),
        hard: Quantity::from_int(hard, Format::DecimalSI),
        used: Quantity::zero(),
        version: "1".into(),
        borrowing_limit: None,
        lending_limit: None,
    };
    f.apply(Delta::QuotaUpsert(q(1)));
    f.apply(Delta::PodUpsert(pod("a", "p1", Some("n1"), Phase::Running, 1, &["GPU-0"])));
    assert!(!f.alerts.keys().any(|(k, _)| *k == AlertKind::OverQuota));
    f.apply(Delta::PodUpsert(pod("a", "p2", None, Phase::Pending, 1, &[])));
    assert!(f.alerts.keys().any(|(k, _)| *k == AlertKind::OverQuota));
    f.apply(Delta::QuotaUpsert(q(4)));
    assert!(!f.alerts.keys().any(|(k, _)| *k == AlertKind::OverQuota));
    let t = f.tenant(f.tenant_by_name("team-a").unwrap()).unwrap();
    assert_eq!(t.quotas.len(), 1, "an upsert of the same quota replaces it");
    assert_eq!(f.tenant_gpu_quota(t), Some(4));
}

#[test]
fn removing_a_node_removes_its_gpus_pods_and_alerts() {
    let mut f = small_fleet();
    f.apply(Delta::PodUpsert(pod("a", "p1", Some("n1"), Phase::Running, 1, &["GPU-0"])));
    f.apply(Delta::GpuFault { gpu_uuid: "GPU-0".into(), at: 5, fault: GpuFault::Xid { code: 79 } });
    assert_eq!(f.alerts.len(), 1);
    assert!(f.apply(Delta::NodeRemove("n1".into())));
    assert_eq!(f.totals.gpus, 0);
    assert_eq!(f.totals.nodes, 0);
    assert!(f.alerts.is_empty());
    assert!(!f.apply(Delta::NodeRemove("n1".into())), "a second removal is a no-op");
    check_invariants(&f);
    // Ids are reused without mixing up names.
    f.apply(Delta::NodeUpsert(node("n2")));
    assert!(f.node_by_name("n2").is_some());
    assert!(f.node_by_name("n1").is_none());
}

#[test]
fn events_are_bounded() {
    let mut f = Fleet::default();
    for i in 0..(fleet::EVENT_CAPACITY as u64 + 10) {
        f.apply(Delta::Event(EventSpec {
            ts: i,
            severity: Severity::Info,
            reason: "R".into(),
            object: "o".into(),
            message: "m".into(),
        }));
    }
    assert_eq!(f.events.len(), fleet::EVENT_CAPACITY);
    assert_eq!(f.events.front().map(|e| e.ts), Some(10));
}

#[test]
fn tenant_controlled_strings_do_not_grow_the_interner() {
    // What a tenant or the API server makes up as it goes — Event reasons, quota
    // resourceVersions, generated claim names, pod names — must not pile up in the interner,
    // which keeps every string it is given for the life of the cockpit.
    let mut f = small_fleet();
    let quota = |v: u64| QuotaSpec {
        tenant: "team-a".into(),
        source: QuotaSourceSpec::ResourceQuota { namespace: "a".into(), name: "gpu".into() },
        resource: "requests.nvidia.com/gpu".into(),
        hard: Quantity::from_int(8, Format::DecimalSI),
        used: Quantity::zero(),
        version: v.to_string(),
        borrowing_limit: None,
        lending_limit: None,
    };
    let churn = |f: &mut Fleet, round: u64| {
        for i in 0..200 {
            let n = round * 1000 + i;
            let mut p = pod("a", &format!("job-{n}"), Some("n1"), Phase::Running, 0, &[]);
            p.dra = vec![DraClaimSpec {
                claim: format!("job-{n}-gpu-x{n}"),
                device_class: "gpu.nvidia.com".into(),
                count: 1,
                allocated: None,
            }];
            f.apply(Delta::PodUpsert(p));
            f.apply(Delta::QuotaUpsert(quota(n)));
            f.apply(Delta::Event(EventSpec {
                ts: n,
                severity: Severity::Warning,
                reason: format!("Reason{n}"),
                object: format!("pod/job-{n}"),
                message: "x".repeat(100_000),
            }));
            f.apply(Delta::PodRemove { namespace: "a".into(), name: format!("job-{n}") });
        }
    };
    churn(&mut f, 1);
    let after_one = f.interner.len();
    for round in 2..6 {
        churn(&mut f, round);
    }
    assert_eq!(f.interner.len(), after_one, "800 more pods, claims, quota versions and event reasons added nothing");
    let t = f.tenant(f.tenant_by_name("team-a").unwrap()).unwrap();
    assert_eq!(&*f.quota(t.quotas[0]).unwrap().version, "5199", "the latest version is kept as it came");
    let e = f.events.back().unwrap();
    assert_eq!(&*e.reason, "Reason5199");
    assert!(e.message.len() < fleet::EVENT_MESSAGE_MAX + 64, "a 100 kB message is cut: {}", e.message.len());
    assert!(e.message.ends_with("… (100000 bytes in all)"), "and says how long it was");
    check_invariants(&f);
}

#[test]
fn event_text_is_cut_at_a_char_boundary() {
    let s = "é".repeat(3000); // 6000 bytes, two per char
    let cut = fleet::cap_text(&s, 4095);
    assert!(cut.starts_with(&"é".repeat(2047)) && cut.ends_with("… (6000 bytes in all)"), "{cut}");
    assert!(matches!(fleet::cap_text("short", 10), std::borrow::Cow::Borrowed("short")));
}

#[test]
fn op_progress_lands_in_ops_and_events() {
    let mut f = Fleet::default();
    f.apply(Delta::Op(OpProgress::Started { id: 1, title: "Drain node n1".into(), target: "n1".into(), total: 3 }));
    f.apply(Delta::Op(OpProgress::Step { id: 1, step: "cordoned n1".into(), done: 1, total: 3 }));
    f.apply(Delta::Op(OpProgress::Blocked { id: 1, reason: "PDB".into() }));
    assert!(matches!(f.op(1).unwrap().state, OpState::Blocked(_)));
    f.apply(Delta::Op(OpProgress::Finished { id: 1, outcome: Ok("done".into()) }));
    assert_eq!(f.op(1).unwrap().state, OpState::Succeeded);
    assert!(f.events.iter().any(|e| &*e.reason == "OperationSucceeded"));
    // Progress for an unknown op is ignored rather than invented.
    f.apply(Delta::Op(OpProgress::Step { id: 9, step: "x".into(), done: 1, total: 1 }));
    assert!(f.op(9).is_none());
}

#[test]
fn pods_seen_before_their_node_and_gpu_bind_when_those_arrive() {
    // Watches for pods and nodes run side by side: a pod can arrive first.
    let mut f = Fleet::new(Thresholds::default());
    f.apply(Delta::PodUpsert(pod("a", "early", Some("n1"), Phase::Running, 1, &["GPU-0"])));
    let pid = f.pod_by_name("a", "early").unwrap();
    assert_eq!(f.pod(pid).unwrap().node, None);
    check_invariants(&f);
    f.apply(Delta::NodeUpsert(node("n1")));
    let n1 = f.node_by_name("n1").unwrap();
    assert_eq!(f.pod(pid).unwrap().node, Some(n1), "bound once the node is known");
    assert_eq!(f.node(n1).unwrap().gpus_allocated, 1);
    assert!(f.pod(pid).unwrap().bound_gpus.is_empty(), "its GPU is not known yet");
    check_invariants(&f);
    f.apply(Delta::GpuUpsert(gpu("n1", 0, "GPU-0")));
    let g0 = f.gpu_by_uuid("GPU-0").unwrap();
    assert_eq!(f.pod(pid).unwrap().bound_gpus, vec![g0]);
    assert_eq!(f.gpu(g0).unwrap().pods, vec![pid]);
    check_invariants(&f);
    // A pod removed while still waiting leaves nothing behind.
    f.apply(Delta::PodUpsert(pod("a", "orphan", Some("n9"), Phase::Pending, 1, &[])));
    f.apply(Delta::PodRemove { namespace: "a".into(), name: "orphan".into() });
    f.apply(Delta::NodeUpsert(node("n9")));
    assert_eq!(f.node(f.node_by_name("n9").unwrap()).unwrap().pods, 0);
    check_invariants(&f);
}

#[test]
fn an_agents_uuid_for_a_label_announced_gpu_carries_its_faults_there() {
    let mut f = Fleet::new(Thresholds::default());
    f.apply(Delta::NodeUpsert(node("n1")));
    f.apply(Delta::GpuUpsert(gpu("n1", 1, "n1/gpu-1")));
    // The agent knows the NVML uuid; the first sample is matched by node and index ...
    f.apply(Delta::Telemetry(vec![TelemetrySample {
        node_gpu: Some(("n1".into(), 1)),
        ..telemetry("GPU-nvml-1", 1_000, 10)
    }]));
    let gid = f.gpu_by_uuid("n1/gpu-1").unwrap();
    assert_eq!(f.gpu(gid).unwrap().last_sample_at, Some(1_000));
    // ... and from then on the agent's uuid names that GPU, for its XIDs too.
    assert!(f.apply(Delta::GpuFault { gpu_uuid: "GPU-nvml-1".into(), at: 1_500, fault: GpuFault::Xid { code: 79 } }));
    assert_eq!(f.gpu(gid).unwrap().xid, Some((79, 1_500)));
    assert!(f.alerts.keys().any(|(k, t)| *k == AlertKind::Xid(79) && *t == AlertTarget::Gpu(gid)));
    assert!(!f.apply(Delta::GpuFault { gpu_uuid: "GPU-unknown".into(), at: 1, fault: GpuFault::Xid { code: 1 } }));
    // The same uuid placed on another node by its source is that node's GPU, not this one.
    f.apply(Delta::NodeUpsert(node("n2")));
    f.apply(Delta::GpuUpsert(gpu("n2", 1, "n2/gpu-1")));
    f.apply(Delta::Telemetry(vec![TelemetrySample {
        node_gpu: Some(("n2".into(), 1)),
        ..telemetry("GPU-nvml-1", 2_000, 90)
    }]));
    let other = f.gpu_by_uuid("n2/gpu-1").unwrap();
    assert_eq!(f.gpu(other).unwrap().last_sample_at, Some(2_000));
    assert_eq!(f.gpu(gid).unwrap().last_sample_at, Some(1_000), "n1's GPU keeps its own samples");
}

/// Node `name` with `gpus` H100s sliced 3g.40gb + 2×1g.10gb each, announced as the device
/// plugin does (labels and `nvidia.com/mig-*` counts; instances named by the fleet as the
/// kube feed names them), and no node agent.
fn label_mig_node(f: &mut Fleet, name: &str, gpus: u8) {
    let model = GpuModel::H100_80GB;
    let p3 = mig::find_profile(model, "3g.40gb").unwrap();
    let p1 = mig::find_profile(model, "1g.10gb").unwrap();
    let placed = mig::plan(model, &[p3, p1, p1]).unwrap();
    f.apply(Delta::NodeUpsert(NodeSpec {
        capacity: vec![
            ("nvidia.com/mig-3g.40gb".into(), gpus as i64),
            ("nvidia.com/mig-1g.10gb".into(), 2 * gpus as i64),
        ],
        mig_config: "custom-3g.40gb-1g.10gbx2".into(),
        ..node(name)
    }));
    for i in 0..gpus {
        let uuid = format!("{name}/gpu-{i}");
        let instances = placed
            .iter()
            .map(|p| MigInstanceSpec {
                placement: *p,
                uuid: format!("{uuid}/mig-{}-{}", mig::profile(model, p.profile).name, p.start),
            })
            .collect();
        f.apply(Delta::GpuUpsert(GpuSpec { mig_enabled: true, instances, ..gpu(name, i, &uuid) }));
    }
}

#[test]
fn replicas_of_a_time_sliced_mig_instance_fill_instances_not_one_each() {
    let mut f = small_fleet();
    f.apply(Delta::NodeUpsert(node("m1")));
    label_mig_node(&mut f, "m1", 4);
    // The device plugin time-slices each 1g.10gb instance ×4 (GFD's per-resource labels).
    let mut spec = NodeSpec {
        capacity: vec![("nvidia.com/mig-3g.40gb".into(), 4), ("nvidia.com/mig-1g.10gb".into(), 32)],
        mig_config: "custom-3g.40gb-1g.10gbx2".into(),
        ..node("m1")
    };
    spec.labels.push(("nvidia.com/mig-1g.10gb.replicas".into(), "4".into()));
    spec.labels.push(("nvidia.com/mig-1g.10gb.sharing-strategy".into(), "time-slicing".into()));
    f.apply(Delta::NodeUpsert(spec));
    for k in 0..8 {
        f.apply(Delta::PodUpsert(mig_pod("a", &format!("nb-{k}"), Some("m1"), Phase::Running, &[("1g.10gb", 1)])));
    }
    check_invariants(&f);
    let m1 = f.node_by_name("m1").unwrap();
    let n = f.node(m1).unwrap();
    let r1g = f.interner.get("nvidia.com/mig-1g.10gb").unwrap();
    assert_eq!(f.mig_replicas(n, r1g), 4);
    assert_eq!(f.mig_instances_held(n, r1g, 8), 2, "8 replicas of ×4 fill two instances");
    // Eight replicas fit on the two 1g instances of one GPU: one GPU at least, not four.
    assert_eq!(f.node_allocated_gpus(n), 1);
    let gpu0 = f.gpu_by_uuid("m1/gpu-0").unwrap();
    assert_eq!(f.gpu_mig_maybe_held(gpu0), 2, "both 1g instances may be among them");
    // The units stay units: eight of nvidia.com/mig-1g.10gb, as a quota and kubectl count them.
    assert_eq!(f.totals.mig_allocated, 8);
    // Without the replicas label the same pods hold eight instances: four GPUs' worth.
    f.apply(Delta::NodeUpsert(NodeSpec {
        capacity: vec![("nvidia.com/mig-3g.40gb".into(), 4), ("nvidia.com/mig-1g.10gb".into(), 8)],
        mig_config: "custom-3g.40gb-1g.10gbx2".into(),
        ..node("m1")
    }));
    assert_eq!(f.node_allocated_gpus(f.node(m1).unwrap()), 4);
    check_invariants(&f);
}

/// A device-plugin pod asking for MIG resources: the API says how many, not which.
fn mig_pod(ns: &str, name: &str, node: Option<&str>, phase: Phase, mig: &[(&str, u16)]) -> PodSpec {
    PodSpec {
        mig: mig.iter().map(|(r, n)| (format!("nvidia.com/mig-{r}"), *n)).collect(),
        ..pod(ns, name, node, phase, 0, &[])
    }
}

#[test]
fn mig_instances_a_device_plugin_pod_holds_count_as_held_though_nobody_says_which() {
    let mut f = small_fleet();
    f.apply(Delta::NodeUpsert(node("m1")));
    // Watches run side by side: the pods are seen before the node's GPUs.
    f.apply(Delta::PodUpsert(mig_pod("a", "asr-0", Some("m1"), Phase::Running, &[("1g.10gb", 1)])));
    f.apply(Delta::PodUpsert(mig_pod("a", "asr-1", Some("m1"), Phase::Running, &[("1g.10gb", 2)])));
    f.apply(Delta::PodUpsert(mig_pod("a-dev", "big", Some("m1"), Phase::Running, &[("3g.40gb", 1)])));
    f.apply(Delta::PodUpsert(mig_pod("a", "waiting", None, Phase::Pending, &[("1g.10gb", 1)])));
    f.apply(Delta::PodUpsert(mig_pod("a", "done", Some("m1"), Phase::Succeeded, &[("1g.10gb", 1)])));
    check_invariants(&f);
    label_mig_node(&mut f, "m1", 4);
    check_invariants(&f);
    let m1 = f.node_by_name("m1").unwrap();
    let team = f.tenant_by_name("team-a").unwrap();
    // Held: 1 + 2 one-slice instances and a 3g, on a node whose every GPU has room for them.
    assert_eq!(f.tenant(team).unwrap().usage.allocated_mig, 4);
    assert_eq!(f.totals.mig_allocated, 4, "the fleet's MIG count is the tenants' count");
    // Three 1g.10gb instances need two of these GPUs (two 1g each), the 3g one: two at least.
    assert_eq!(f.node_allocated_gpus(f.node(m1).unwrap()), 2, "not an empty node");
    assert_eq!(f.totals.gpus_allocated, 2);
    // A node agent names asr-0's instance: bound, and no longer counted a second time.
    let held = Delta::Telemetry(vec![TelemetrySample {
        sample: Sample::without_util(10, 100, 40),
        instances: vec![InstanceSample {
            placement: Some(("1g.10gb".into(), 5)),
            allocated: Some(vec!["a/asr-0".into()]),
            ..InstanceSample::new("MIG-real-5", Some(50), 1024)
        }],
        node_gpu: Some(("m1".into(), 2)),
        ..telemetry("GPU-real-m1-2", 1_000, 0)
    }]);
    f.apply(held);
    let asr0 = f.pod_by_name("a", "asr-0").unwrap();
    let gpu2 = f.gpu_by_uuid("m1/gpu-2").unwrap();
    let bound: Vec<&MigInstance> = f.gpu(gpu2).unwrap().instances.iter().filter(|i| i.pod == Some(asr0)).collect();
    assert_eq!(bound.len(), 1, "asr-0 bound to the instance the kubelet gave it");
    assert_eq!(f.totals.mig_allocated, 4, "bound now, counted once");
    assert_eq!(f.totals.mig_unbound, 3);
    assert!(f.pod(asr0).unwrap().mig_unbound.is_empty());
    let r1g = f.interner.get("nvidia.com/mig-1g.10gb").unwrap();
    assert_eq!(f.node(m1).unwrap().mig_unbound_of(r1g), 2, "asr-1's two, still unknown");
    // Of gpu2's free 1g (one: the other is asr-0's), one may be asr-1's; its 3g may be big's.
    assert_eq!(f.gpu_mig_maybe_held(gpu2), 2);
    assert_eq!(f.node_allocated_gpus(f.node(m1).unwrap()), 2);
    check_invariants(&f);
    // asr-1 goes: two fewer held.
    f.apply(Delta::PodRemove { namespace: "a".into(), name: "asr-1".into() });
    assert_eq!(f.totals.mig_allocated, 2);
    assert_eq!(f.node_allocated_gpus(f.node(m1).unwrap()), 1, "big's 3g may be beside asr-0 on gpu2");
    check_invariants(&f);
    // gpu2 is resliced under asr-0 (its instance gone): asr-0 still holds one, unknown where.
    f.apply(Delta::GpuUpsert(gpu("m1", 2, "m1/gpu-2")));
    assert_eq!(f.totals.mig_allocated, 2);
    check_invariants(&f);
    // The node's GPUs go away (a relabel): what its pods hold stays held.
    for i in 0..4 {
        f.apply(Delta::GpuRemove(format!("m1/gpu-{i}")));
        check_invariants(&f);
    }
    assert_eq!(f.totals.mig_allocated, 2);
    f.apply(Delta::NodeRemove("m1".into()));
    assert_eq!(f.totals.mig_allocated, 0);
    check_invariants(&f);
}

/// The counters stay equal to a recount whatever the order in which pods, GPUs, reslices,
/// removals and a node agent's word on MIG instances arrive.
mod recount {
    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Op {
        Pod {
            pod: u8,
            node: u8,
            phase: u8,
            ask: u8,
        },
        PodGone(u8),
        /// The agent says instance `slot` of m1's GPU `gpu` is held by `pod` (or nobody).
        Held {
            gpu: u8,
            slot: u8,
            pod: Option<u8>,
        },
        /// A sample of m1's GPU `gpu` with this utilisation on every instance.
        Util {
            gpu: u8,
            util: Option<u8>,
        },
        Reslice {
            gpu: u8,
            mig: bool,
        },
        GpuGone(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..6, 0u8..3, 0u8..4, 0u8..5).prop_map(|(pod, node, phase, ask)| Op::Pod { pod, node, phase, ask }),
            1 => (0u8..6).prop_map(Op::PodGone),
            3 => (0u8..3, 0u8..3, prop::option::of(0u8..6)).prop_map(|(gpu, slot, pod)| Op::Held { gpu, slot, pod }),
            2 => (0u8..3, prop::option::of(0u8..100)).prop_map(|(gpu, util)| Op::Util { gpu, util }),
            1 => (0u8..3, any::<bool>()).prop_map(|(gpu, mig)| Op::Reslice { gpu, mig }),
            1 => (0u8..3).prop_map(Op::GpuGone),
        ]
    }

    /// m1's layout: 3g.40gb + 2×1g.10gb, as `label_mig_node` slices it.
    fn layout() -> Vec<mig::PlacedInstance> {
        let model = GpuModel::H100_80GB;
        let p3 = mig::find_profile(model, "3g.40gb").unwrap();
        let p1 = mig::find_profile(model, "1g.10gb").unwrap();
        mig::plan(model, &[p3, p1, p1]).unwrap()
    }

    fn apply(f: &mut Fleet, op: &Op) {
        let model = GpuModel::H100_80GB;
        let name = |p: u8| format!("p{p}");
        match op {
            Op::Pod { pod, node, phase, ask } => {
                let node = [None, Some("m1"), Some("n1")][*node as usize];
                let phase = [Phase::Pending, Phase::Running, Phase::Succeeded, Phase::Terminating][*phase as usize];
                let mig: &[(&str, u16)] = match ask {
                    0 => &[("1g.10gb", 1)],
                    1 => &[("1g.10gb", 2)],
                    2 => &[("3g.40gb", 1)],
                    3 => &[("1g.10gb", 1), ("3g.40gb", 1)],
                    _ => &[],
                };
                let mut spec = mig_pod("a", &name(*pod), node, phase, mig);
                spec.gpus = u16::from(mig.is_empty());
                f.apply(Delta::PodUpsert(spec));
            }
            Op::PodGone(pod) => {
                f.apply(Delta::PodRemove { namespace: "a".into(), name: name(*pod) });
            }
            Op::Held { gpu, slot, pod } => {
                let placed = layout();
                let instances = placed
                    .iter()
                    .enumerate()
                    .map(|(k, p)| InstanceSample {
                        placement: Some((mig::profile(model, p.profile).name.to_string(), p.start)),
                        allocated: (k == *slot as usize)
                            .then(|| pod.map(|p| format!("a/{}", name(p))).into_iter().collect()),
                        ..InstanceSample::new(format!("MIG-{gpu}-{k}"), None, 0)
                    })
                    .collect();
                f.apply(Delta::Telemetry(vec![TelemetrySample {
                    sample: Sample::without_util(10, 100, 40),
                    instances,
                    node_gpu: Some(("m1".into(), *gpu)),
                    ..telemetry(&format!("GPU-real-{gpu}"), f.now, 0)
                }]));
            }
            Op::Util { gpu, util } => {
                let instances = (0..layout().len())
                    .map(|k| InstanceSample::new(format!("m1/gpu-{gpu}/mig-{k}"), *util, 0))
                    .collect::<Vec<_>>();
                let uuids: Vec<String> = f
                    .gpu_by_uuid(&format!("m1/gpu-{gpu}"))
                    .and_then(|g| f.gpu(g))
                    .map(|g| g.instances.iter().map(|i| f.str_of(i.uuid).to_string()).collect())
                    .unwrap_or_default();
                let instances =
                    instances.into_iter().zip(uuids).map(|(i, u)| InstanceSample { uuid: u, ..i }).collect();
                let mut s = telemetry(&format!("m1/gpu-{gpu}"), f.now, 0);
                s.sample.util = *util;
                s.instances = instances;
                f.apply(Delta::Telemetry(vec![s]));
            }
            Op::Reslice { gpu: index, mig: on } => {
                let uuid = format!("m1/gpu-{index}");
                let instances = if *on {
                    layout()
                        .iter()
                        .map(|p| MigInstanceSpec {
                            placement: *p,
                            uuid: format!("{uuid}/mig-{}-{}", mig::profile(model, p.profile).name, p.start),
                        })
                        .collect()
                } else {
                    vec![]
                };
                f.apply(Delta::GpuUpsert(GpuSpec { mig_enabled: *on, instances, ..gpu("m1", *index, &uuid) }));
            }
            Op::GpuGone(gpu) => {
                f.apply(Delta::GpuRemove(format!("m1/gpu-{gpu}")));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn counters_equal_a_recount_after_any_sequence(ops in prop::collection::vec(op(), 1..40)) {
            let mut f = small_fleet();
            label_mig_node(&mut f, "m1", 3);
            for (k, op) in ops.iter().enumerate() {
                f.apply(Delta::Clock(1_000 * (k as u64 + 1)));
                apply(&mut f, op);
                check_invariants(&f);
                let held: u32 = f.tenant_ids().filter_map(|t| f.tenant(t)).map(|t| t.usage.allocated_mig).sum();
                prop_assert_eq!(f.totals.mig_allocated, held, "the header's MIG count is the tenants' after {:?}", op);
            }
        }
    }
}

#[test]
fn a_pod_updated_after_its_tenant_went_away_is_counted_once() {
    // Found by tests/fuzz.rs: the namespace's tenant is removed while it still has pods (the
    // namespace was deleted or relabelled), then a pod there changes. Rebuilding the pod
    // made the namespace's own tenant, which re-linked the pod while it was unlinked for the
    // update, so it was linked twice and counted twice for good.
    let mut f = Fleet::new(Thresholds::default());
    f.apply(Delta::TenantUpsert(TenantSpec {
        name: "alpha".into(),
        namespaces: vec!["team-a".into()],
        source: "label".into(),
    }));
    f.apply(Delta::PodUpsert(pod("team-a", "p1", None, Phase::Running, 2, &[])));
    f.apply(Delta::TenantRemove("alpha".into()));
    f.apply(Delta::PodUpsert(pod("team-a", "p1", None, Phase::Pending, 2, &[])));
    check_invariants(&f);
    assert_eq!((f.totals.pods, f.totals.pods_pending), (1, 1));
    let team = f.tenant_by_name("team-a").and_then(|t| f.tenant(t)).map(|t| (t.usage.pods, t.usage.requested_gpus));
    assert_eq!(team, Some((1, 2)), "the pod moved to its namespace's own tenant, counted once");
    f.apply(Delta::PodRemove { namespace: "team-a".into(), name: "p1".into() });
    check_invariants(&f);
    assert_eq!(f.totals.pods, 0);
}

#[test]
fn gpu_quotas_at_the_cap_add_up_without_overflowing() {
    // Found by tests/fuzz.rs: a tenant with two GPU quotas of 9223372036854775807 (the
    // largest quantity) overflowed the sum: a panic in debug builds, and in release a
    // negative limit that put the tenant over quota.
    let mut f = small_fleet();
    for (name, resource) in [("rq", "requests.nvidia.com/gpu"), ("rq2", "nvidia.com/gpu")] {
        f.apply(Delta::QuotaUpsert(QuotaSpec {
            tenant: "team-a".into(),
            source: QuotaSourceSpec::ResourceQuota { namespace: "a".into(), name: name.into() },
            resource: resource.into(),
            hard: Quantity::from_int(i64::MAX, Format::DecimalSI),
            used: Quantity::zero(),
            version: "1".into(),
            borrowing_limit: None,
            lending_limit: None,
        }));
    }
    f.apply(Delta::PodUpsert(pod("a", "p1", Some("n1"), Phase::Running, 1, &["GPU-0"])));
    let t = f.tenant_by_name("team-a").and_then(|t| f.tenant(t)).expect("the quotas' tenant");
    assert_eq!(f.tenant_gpu_quota(t), Some(i64::MAX));
    assert!(!f.alerts.keys().any(|(k, _)| *k == AlertKind::OverQuota));
    check_invariants(&f);
}

/// A node whose device plugin time-slices its GPUs ×`replicas` (GFD's labels, capacity
/// = GPUs × replicas).
fn shared_node(name: &str, gpus: i64, replicas: u16) -> NodeSpec {
    let mut n = node(name);
    n.labels.extend([
        ("nvidia.com/gpu.count".into(), gpus.to_string()),
        ("nvidia.com/gpu.replicas".into(), replicas.to_string()),
        ("nvidia.com/gpu.sharing-strategy".into(), "time-slicing".into()),
    ]);
    n.capacity = vec![("nvidia.com/gpu".into(), gpus * i64::from(replicas))];
    n.allocatable = n.capacity.clone();
    n
}

#[test]
fn replicas_of_a_time_sliced_gpu_are_never_counted_as_gpus() {
    let mut f = small_fleet();
    f.apply(Delta::NodeUpsert(shared_node("ts", 2, 4)));
    f.apply(Delta::GpuUpsert(gpu("ts", 0, "TS-0")));
    f.apply(Delta::GpuUpsert(gpu("ts", 1, "TS-1")));
    let base = f.totals.gpus_allocated;
    // Five pods, one replica each, nobody says which GPU: held on at least 2 GPUs (5 > 4).
    for i in 0..5 {
        f.apply(Delta::PodUpsert(pod("a", &format!("s{i}"), Some("ts"), Phase::Running, 1, &[])));
    }
    check_invariants(&f);
    let id = f.node_by_name("ts").unwrap();
    let n = f.node(id).unwrap();
    assert_eq!((n.gpu_count(), n.shares_total(&f.gpus), n.shares_held, n.shares_unplaced), (2, 8, 5, 5));
    assert_eq!(f.node_allocated_gpus(n), 2, "5 replicas of ×4 need both GPUs");
    assert!(f.node_allocation_is_estimate(n));
    assert_eq!((f.totals.shares, f.totals.shares_held, f.totals.gpus_shared), (8, 5, 2));
    assert_eq!(f.totals.gpus_allocated - base, 2, "never 5");
    let t = f.tenant(f.tenant_by_name("team-a").unwrap()).unwrap();
    assert_eq!((t.usage.allocated_gpus, t.usage.allocated_shares, t.usage.share_milli), (0, 5, 1250));
    assert_eq!(t.usage.requested_gpus, 5, "requests stay in the quota's unit: one nvidia.com/gpu a replica");
    // Two replicas only: one GPU at least, an estimate.
    for i in 2..5 {
        f.apply(Delta::PodRemove { namespace: "a".into(), name: format!("s{i}") });
    }
    let n = f.node(id).unwrap();
    assert_eq!(f.node_allocated_gpus(n), 1);
    check_invariants(&f);
    // Placed (a node agent or the kubelet says which GPU): both on TS-1, counted exactly.
    f.apply(Delta::PodUpsert(pod("a", "s0", Some("ts"), Phase::Running, 1, &["TS-1"])));
    f.apply(Delta::PodUpsert(pod("a", "s1", Some("ts"), Phase::Running, 1, &["TS-1"])));
    let n = f.node(id).unwrap();
    assert_eq!((f.node_allocated_gpus(n), f.node_allocation_is_estimate(n)), (1, false));
    let g1 = f.gpu(f.gpu_by_uuid("TS-1").unwrap()).unwrap();
    assert_eq!((g1.pods.len(), f.gpu_shares_held(g1)), (2, 2));
    check_invariants(&f);
}

#[test]
fn a_node_that_starts_or_stops_sharing_recounts_its_pods() {
    let mut f = small_fleet();
    f.apply(Delta::NodeUpsert(node("flip")));
    f.apply(Delta::GpuUpsert(gpu("flip", 0, "F-0")));
    f.apply(Delta::GpuUpsert(gpu("flip", 1, "F-1")));
    f.apply(Delta::PodUpsert(pod("a", "x", Some("flip"), Phase::Running, 2, &[])));
    let id = f.node_by_name("flip").unwrap();
    assert_eq!(f.node(id).unwrap().gpus_allocated, 2);
    f.apply(Delta::NodeUpsert(shared_node("flip", 2, 4)));
    let n = f.node(id).unwrap();
    assert_eq!((n.gpus_allocated, n.shares_held, f.node_allocated_gpus(n)), (0, 2, 1));
    check_invariants(&f);
    f.apply(Delta::NodeUpsert(node("flip")));
    let n = f.node(id).unwrap();
    assert_eq!((n.gpus_allocated, n.shares_held), (2, 0));
    check_invariants(&f);
}

#[test]
fn a_gpu_quota_shows_the_physical_gpus_behind_its_replicas() {
    let mut f = small_fleet();
    f.apply(Delta::NodeUpsert(shared_node("ts", 2, 4)));
    f.apply(Delta::GpuUpsert(gpu("ts", 0, "TS-0")));
    f.apply(Delta::GpuUpsert(gpu("ts", 1, "TS-1")));
    for resource in ["requests.nvidia.com/gpu", "requests.nvidia.com/gpu.shared"] {
        f.apply(Delta::QuotaUpsert(QuotaSpec {
            tenant: "team-a".into(),
            source: QuotaSourceSpec::ResourceQuota { namespace: "a".into(), name: "q".into() },
            resource: resource.into(),
            hard: Quantity::from_int(8, Format::DecimalSI),
            used: Quantity::zero(),
            version: "1".into(),
            borrowing_limit: None,
            lending_limit: None,
        }));
    }
    // Three replicas of nvidia.com/gpu on the ×4 node, one whole GPU elsewhere, and one
    // replica asked as the renamed resource.
    for i in 0..3 {
        f.apply(Delta::PodUpsert(pod("a", &format!("r{i}"), Some("ts"), Phase::Running, 1, &[])));
    }
    f.apply(Delta::PodUpsert(pod("a", "whole", Some("n1"), Phase::Running, 1, &["GPU-0"])));
    let mut renamed = pod("a", "nb", Some("ts"), Phase::Running, 1, &[]);
    renamed.gpus_renamed = true;
    f.apply(Delta::PodUpsert(renamed));
    let q = |res: &str| {
        let id = f.quota_ids().find(|q| f.quota(*q).is_some_and(|q| f.str_of(q.resource) == res)).expect("quota");
        let q = f.quota(id).expect("quota");
        (f.quota_requested(q), f.quota_physical_milli(q))
    };
    assert_eq!(
        q("requests.nvidia.com/gpu"),
        (Some(4), Some(1000 + 3 * 250)),
        "4 units: one GPU and 0.75 of shared ones"
    );
    assert_eq!(q("requests.nvidia.com/gpu.shared"), (Some(1), Some(250)));
    check_invariants(&f);
}

/// A node agent's sample of shared GPU `uuid`: its utilisation, and each pod's process with
/// its own SM utilisation.
fn share_sample(uuid: &str, at: Ts, util: u8, procs: &[(&str, Option<u8>)]) -> Delta {
    Delta::Telemetry(vec![TelemetrySample {
        processes: Some(
            procs
                .iter()
                .enumerate()
                .map(|(k, (p, sm))| ProcSample {
                    pid: 100 + k as u32,
                    mem_mib: Some(1024),
                    pod: Some(p.to_string()),
                    container: None,
                    gpu_instance: None,
                    sm_util: *sm,
                })
                .collect(),
        ),
        ..telemetry(uuid, at, util)
    }])
}

#[test]
fn an_idle_share_is_counted_per_holder_not_per_gpu() {
    let mut f = small_fleet();
    f.apply(Delta::TenantUpsert(TenantSpec {
        name: "team-b".into(),
        namespaces: vec!["b".into()],
        source: "label".into(),
    }));
    f.apply(Delta::NodeUpsert(shared_node("ts", 2, 4)));
    f.apply(Delta::GpuUpsert(gpu("ts", 0, "TS-0")));
    f.apply(Delta::GpuUpsert(gpu("ts", 1, "TS-1")));
    for name in ["busy", "nap"] {
        f.apply(Delta::PodUpsert(pod("a", name, Some("ts"), Phase::Running, 1, &["TS-0"])));
    }
    f.apply(Delta::PodUpsert(pod("b", "two", Some("ts"), Phase::Running, 2, &["TS-0"])));
    let gid = f.gpu_by_uuid("TS-0").unwrap();
    let team = |f: &Fleet, t: &str| f.tenant(f.tenant_by_name(t).unwrap()).unwrap().usage.shares_idle;
    // The GPU is busy (one holder computes), so the GPU is not idle; `nap` and `two` run
    // processes at 0-1 % SM, and `two` holds two replicas.
    let procs = [("a/busy", Some(80)), ("a/nap", Some(0)), ("b/two", Some(1))];
    f.apply(share_sample("TS-0", 1_000, 81, &procs));
    assert_eq!(f.totals.shares_idle, 0, "low for less than the window");
    check_invariants(&f);
    f.apply(share_sample("TS-0", 62_000, 81, &procs));
    assert_eq!(f.totals.shares_idle, 3, "nap's one replica and two's two");
    assert_eq!((team(&f, "team-a"), team(&f, "team-b")), (1, 2));
    assert_eq!(f.totals.idle_allocated, 0, "the GPU itself is busy");
    let p = f.pod(f.pod_by_name("a", "busy").unwrap()).unwrap();
    assert_eq!(f.share_util(gid, p), Some(80));
    check_invariants(&f);
    // `two` starts computing: its share is no longer idle, and the window starts again.
    f.apply(share_sample("TS-0", 63_000, 90, &[("a/busy", Some(80)), ("a/nap", Some(0)), ("b/two", Some(10))]));
    assert_eq!((f.totals.shares_idle, team(&f, "team-b")), (1, 0));
    check_invariants(&f);
    // A holder with no process there while the agent samples others holds an idle share.
    f.apply(share_sample("TS-0", 64_000, 90, &[("a/busy", Some(80)), ("b/two", Some(10))]));
    let nap = f.pod(f.pod_by_name("a", "nap").unwrap()).unwrap();
    assert_eq!(f.share_util(gid, nap), Some(0));
    assert_eq!(f.totals.shares_idle, 1, "still low since 1 s");
    check_invariants(&f);
    // It goes: so does its idle share.
    f.apply(Delta::PodRemove { namespace: "a".into(), name: "nap".into() });
    assert_eq!((f.totals.shares_idle, team(&f, "team-a")), (0, 0));
    check_invariants(&f);
    // The node stops sharing: no shares, so no idle ones.
    f.apply(share_sample("TS-0", 65_000, 90, &[("a/busy", Some(0)), ("b/two", Some(0))]));
    f.apply(share_sample("TS-0", 130_000, 90, &[("a/busy", Some(0)), ("b/two", Some(0))]));
    assert_eq!(f.totals.shares_idle, 3);
    check_invariants(&f);
    f.apply(Delta::NodeUpsert(node("ts")));
    assert_eq!(f.totals.shares_idle, 0);
    check_invariants(&f);
}

#[test]
fn a_holder_the_agent_names_again_is_counted_once() {
    let mut f = small_fleet();
    for name in ["p1", "p2"] {
        f.apply(Delta::PodUpsert(pod("a", name, Some("n1"), Phase::Running, 1, &[])));
    }
    let team = f.tenant_by_name("team-a").unwrap();
    let allocated = |f: &Fleet| f.tenant(team).unwrap().usage.allocated_gpus;
    assert_eq!(allocated(&f), 2);
    // The agent sees both on GPU-1 (a stale sample), then only p1: p1 stays a holder.
    f.apply(agent_sample("GPU-1", 1_000, 50, &["a/p1", "a/p2"]));
    check_invariants(&f);
    f.apply(agent_sample("GPU-1", 2_000, 50, &["a/p1"]));
    assert_eq!(allocated(&f), 2, "p1 relinked once, not twice");
    assert_eq!(f.totals.pods, 2);
    check_invariants(&f);
}

#[test]
fn share_seconds_count_replicas_held_since_each_pod_started() {
    let mut f = small_fleet();
    f.apply(Delta::NodeUpsert(shared_node("ts", 2, 4)));
    let started = |at: Ts, gpus: u16, name: &str, node: &str| PodSpec {
        started: Some(at),
        ..pod("a", name, Some(node), Phase::Running, gpus, &[])
    };
    f.apply(Delta::PodUpsert(started(10_000, 2, "two", "ts")));
    f.apply(Delta::PodUpsert(started(70_500, 1, "one", "ts")));
    // A whole GPU is no share; a pending pod holds nothing.
    f.apply(Delta::PodUpsert(started(0, 1, "whole", "n1")));
    f.apply(Delta::PodUpsert(pod("a", "wait", None, Phase::Pending, 1, &[])));
    f.apply(Delta::Clock(130_000));
    let team = f.tenant_by_name("team-a").unwrap();
    // two: 2 × 120 s; one: 1 × 59 s (whole seconds).
    assert_eq!(f.tenant_share_seconds(team), 2 * 120 + 59);
    f.apply(Delta::PodUpsert(PodSpec { phase: Phase::Succeeded, ..started(10_000, 2, "two", "ts") }));
    assert_eq!(f.tenant_share_seconds(team), 59, "a finished pod holds nothing");
}

#[test]
fn a_domains_workload_is_the_unfinished_pods_of_its_channel_template_in_its_namespace() {
    let mut f = small_fleet();
    f.apply(Delta::DomainUpsert(ComputeDomainSpec {
        namespace: "a".into(),
        name: "nvl".into(),
        num_nodes: 2,
        status: "Ready".into(),
        nodes: vec![],
        claim_template: "nvl-channel".into(),
        created: 0,
    }));
    let member = |name: &str, templates: &[&str], phase: Phase| PodSpec {
        claim_templates: templates.iter().map(|t| t.to_string()).collect(),
        ..pod("a", name, Some("n1"), phase, 0, &[])
    };
    let names = |f: &Fleet| -> Vec<String> {
        let d = f.domains.get("a/nvl").expect("the domain");
        f.domain_pods(d).iter().map(|p| p.name.to_string()).collect()
    };
    f.apply(Delta::PodUpsert(member("w-1", &["nvl-channel"], Phase::Running)));
    f.apply(Delta::PodUpsert(member("w-0", &["one-gpu", "nvl-channel"], Phase::Pending)));
    f.apply(Delta::PodUpsert(member("x", &["one-gpu"], Phase::Running)));
    // The same template name in another namespace is another template.
    f.apply(Delta::PodUpsert(PodSpec { namespace: "a-dev".into(), ..member("y", &["nvl-channel"], Phase::Running) }));
    assert_eq!(names(&f), ["w-0", "w-1"]);
    check_invariants(&f);
    // An update keeps one entry (and relinks never double it); finishing leaves the workload.
    f.apply(Delta::PodUpsert(member("w-1", &["nvl-channel"], Phase::Running)));
    f.apply(Delta::PodUpsert(member("w-0", &["one-gpu", "nvl-channel"], Phase::Succeeded)));
    assert_eq!(names(&f), ["w-1"]);
    f.apply(Delta::PodRemove { namespace: "a".into(), name: "w-1".into() });
    assert!(names(&f).is_empty());
    f.apply(Delta::PodUpsert(member("w-0", &["nvl-channel"], Phase::Running)));
    assert_eq!(names(&f), ["w-0"]);
    check_invariants(&f);
}

#[test]
fn a_pending_pod_says_why_from_the_schedulers_last_word_and_its_tenant_rolls_it_up() {
    let mut f = small_fleet();
    let failed = |name: &str, ts: Ts, msg: &str| {
        Delta::Event(EventSpec {
            ts,
            severity: Severity::Warning,
            reason: "FailedScheduling".into(),
            object: format!("pod/a/{name}"),
            message: msg.into(),
        })
    };
    let gpus = "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) were unschedulable.";
    // The event may come before the pod.
    f.apply(failed("big", 10, gpus));
    f.apply(Delta::PodUpsert(pod("a", "big", None, Phase::Pending, 8, &[])));
    f.apply(Delta::PodUpsert(pod("a", "new", None, Phase::Pending, 1, &[])));
    f.apply(Delta::PodUpsert(pod("a", "bound", Some("n1"), Phase::Pending, 1, &[])));
    f.apply(Delta::PodUpsert(pod("a", "run", Some("n1"), Phase::Running, 1, &[])));
    let why = |f: &Fleet, name: &str| {
        let p = f.pod_by_name("a", name).and_then(|p| f.pod(p)).expect(name);
        f.waiting(p).map(|w| w.text())
    };
    assert_eq!(why(&f, "big").as_deref(), Some("no node of 3: 1 not enough free nvidia.com/gpu, 2 cordoned"));
    assert_eq!(why(&f, "new").as_deref(), Some("not scheduled yet"));
    assert_eq!(why(&f, "bound").as_deref(), Some("starting"));
    assert_eq!(why(&f, "run"), None);
    // An older message does not replace a newer one.
    f.apply(failed("big", 5, "0/3 nodes are available: 3 Too many pods."));
    assert!(why(&f, "big").is_some_and(|w| w.contains("nvidia.com/gpu")));
    let team = f.tenant_by_name("team-a").expect("team-a");
    let pend = f.tenant(team).map(|t| t.usage.pending_pods);
    let by = f.tenant_waiting(team);
    assert_eq!(
        by,
        [("not enough free nvidia.com/gpu".to_string(), 1), ("not scheduled yet".into(), 1), ("starting".into(), 1)]
    );
    assert_eq!(Some(by.iter().map(|(_, n)| n).sum::<u32>()), pend, "the rollup adds up to PEND");
    // Scheduled: the scheduler's complaint is over.
    f.apply(Delta::Event(EventSpec {
        ts: 20,
        severity: Severity::Info,
        reason: "Scheduled".into(),
        object: "pod/a/big".into(),
        message: "Successfully assigned a/big to n1".into(),
    }));
    assert_eq!(why(&f, "big").as_deref(), Some("not scheduled yet"));
    // Bound, and its kubelet could not prepare its DRA devices: the driver's words, until
    // it runs. An old FailedScheduling of a pod now bound is not why it waits.
    let prepare = "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for \
                   ResourceClaim w-0-channel-x: error preparing devices for claim a/w-0-channel-x:u1: prepare devices \
                   failed: current node not ready in ComputeDomain";
    f.apply(Delta::Event(EventSpec {
        ts: 30,
        severity: Severity::Warning,
        reason: "FailedPrepareDynamicResources".into(),
        object: "pod/a/bound".into(),
        message: prepare.into(),
    }));
    f.apply(failed("run", 30, gpus));
    f.apply(Delta::PodUpsert(pod("a", "run", Some("n1"), Phase::Pending, 1, &[])));
    assert_eq!(why(&f, "bound").as_deref(), Some("devices not prepared: current node not ready in ComputeDomain"));
    assert_eq!(why(&f, "run").as_deref(), Some("starting"));
    assert!(f.tenant_waiting(team).contains(&("devices not prepared".to_string(), 1)));
    // Listed, a pod's Events come in name order, not time order: its Scheduled (20), or a
    // FailedScheduling of the same second as the kubelet's complaint, after that complaint
    // does not take the kubelet's word away.
    for (reason, ts) in [("Scheduled", 20), ("Scheduled", 30), ("FailedScheduling", 30)] {
        f.apply(Delta::Event(EventSpec {
            ts,
            severity: Severity::Info,
            reason: reason.into(),
            object: "pod/a/bound".into(),
            message: if reason == "Scheduled" { "Successfully assigned a/bound to n1".into() } else { gpus.into() },
        }));
        assert_eq!(
            why(&f, "bound").as_deref(),
            Some("devices not prepared: current node not ready in ComputeDomain"),
            "after {reason} at {ts}"
        );
    }
    f.apply(Delta::PodUpsert(pod("a", "bound", Some("n1"), Phase::Running, 1, &[])));
    assert_eq!(why(&f, "bound"), None);
    check_invariants(&f);
}

#[test]
fn a_controller_refused_by_a_quota_is_its_tenants_until_it_creates_again() {
    let mut f = small_fleet();
    let ev = |reason: &str, object: &str, ts: Ts, msg: &str| {
        Delta::Event(EventSpec {
            ts,
            severity: Severity::Warning,
            reason: reason.into(),
            object: object.into(),
            message: msg.into(),
        })
    };
    let refused = "Error creating: pods \"web-x\" is forbidden: exceeded quota: gpu-quota, requested: \
                   requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2";
    let team = f.tenant_by_name("team-a").expect("team-a");
    let objects = |f: &Fleet| -> Vec<String> {
        f.tenant_quota_refusals(team).iter().map(|(o, q)| format!("{o} {}", q.quota)).collect()
    };
    // Created some and was refused others in the same second: short.
    f.apply(ev("SuccessfulCreate", "replicaset/a/web", 1_000, "Created pod: web-y"));
    f.apply(ev("FailedCreate", "replicaset/a/web", 1_000, refused));
    f.apply(ev("SuccessfulCreate", "replicaset/a/web", 1_000, "Created pod: web-z"));
    // Another failure (not a quota) and another namespace's tenant are not this.
    f.apply(ev("FailedCreate", "job/a-dev/train", 1_000, "Error creating: pods is forbidden: no PriorityClass"));
    f.apply(ev("FailedCreate", "replicaset/other/web", 1_000, refused));
    assert_eq!(objects(&f), ["replicaset/a/web gpu-quota"]);
    // An older word does not undo it; a later creation does.
    f.apply(ev("SuccessfulCreate", "replicaset/a/web", 500, "Created pod: web-old"));
    assert_eq!(objects(&f).len(), 1);
    f.apply(ev("SuccessfulCreate", "replicaset/a/web", 2_000, "Created pod: web-w"));
    assert!(objects(&f).is_empty());
}

/// Every pod and GPU of a 65,000-node factory sits in a slab: their sizes are the cockpit's
/// memory (400,000 pods, 520,000 GPUs). A pod's thin vectors keep an empty list at one pointer.
#[test]
fn pods_and_gpus_stay_compact() {
    assert!(std::mem::size_of::<Pod>() <= 168, "Pod grew to {} bytes", std::mem::size_of::<Pod>());
    assert!(std::mem::size_of::<Option<Pod>>() <= 168, "a pods slab slot grew");
    assert!(std::mem::size_of::<Gpu>() <= 176, "Gpu grew to {} bytes", std::mem::size_of::<Gpu>());
}
