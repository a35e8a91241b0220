//! The demo's alpha DRA shapes: the partition arithmetic, and the deltas a fleet gets.

use super::super::{Sim, SimConfig};
use super::*;
use crate::model::tests::check_invariants;

fn demo() -> SimConfig {
    // As `fabrik demo` runs it: shared nodes and the alpha shapes.
    SimConfig { seed: 42, nodes: 48, tick_ms: 1000, churn: true, sharing_every: 6, dra_alpha: true, teams: 0 }
}

fn fit(fits: &[CounterFit], profile: &str) -> (u16, u16) {
    fits.iter().find(|f| f.profile == profile).map_or((99, 99), |f| (f.fits, f.offered))
}

#[test]
fn partitions_are_every_placement_of_1g_2g_3g_7g() {
    let m = GpuModel::H100_80GB;
    let names: Vec<&str> = partition_profiles(m).into_iter().map(|id| mig::profile(m, id).name).collect();
    assert_eq!(names, ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"]);
    let all = partition_placements(m);
    assert_eq!(all.len(), 7 + 3 + 2 + 1);
    let three = all.iter().find(|p| p.start == 4 && mig::profile(m, p.profile).name == "3g.40gb").expect("3g at 4");
    assert_eq!(partition_device(m, 0, three), "gpu-0-mig-3g40gb-9-4");
    // Nothing held: every placement fits; the upper 3g held leaves the lower half.
    let free = partition_fits(m, &[]);
    assert_eq!((fit(&free, "1g.10gb"), fit(&free, "7g.80gb")), ((7, 7), (1, 1)));
    let held = partition_fits(m, &[*three]);
    assert_eq!(fit(&held, "1g.10gb"), (4, 7));
    assert_eq!(fit(&held, "2g.20gb"), (2, 3));
    assert_eq!(fit(&held, "3g.40gb"), (1, 2));
    assert_eq!(fit(&held, "7g.80gb"), (0, 1));
    // The counters' memory never refuses what the slices allow, and is at least the GPU's.
    for m in GpuModel::ALL {
        let mem = counter_memory_mib(m);
        assert!(mem >= u64::from(m.memory_mib()), "{m:?}");
        let three = partition_placements(m).into_iter().filter(|p| mig::profile(m, p.profile).memory_slices == 4);
        let two: u64 = three.map(|p| u64::from(mig::profile(m, p.profile).memory_mib)).sum();
        assert!(mem >= two, "{m:?}: two 3g partitions fit by memory too");
    }
}

#[test]
fn the_demo_sends_partitions_shares_taints_and_domains() {
    let mut sim = Sim::new(demo());
    let mut f = Fleet::default();
    let first = sim.initial_deltas();
    assert!(first.iter().any(|d| matches!(d, Delta::GpuDra { .. })));
    for d in first {
        f.apply(d);
    }
    let dra: Vec<(String, GpuDra)> = f
        .gpu_ids()
        .filter_map(|g| f.gpu(g))
        .filter_map(|g| Some((f.str_of(g.uuid).to_string(), (**g.dra.as_ref()?).clone())))
        .collect();
    assert_eq!(dra.len(), 3, "{dra:?}");
    // The partitionable GPU: its claim holds the upper 3g partition, a MIG device of it.
    let (uuid, part) = dra.iter().find(|(_, d)| d.partitionable).expect("a partitionable GPU");
    assert!(!part.whole_fits);
    assert_eq!(fit(&part.fits, "3g.40gb"), (1, 2));
    assert_eq!(fit(&part.fits, "1g.10gb").1, 7);
    let gid = f.gpu_ids().find(|g| f.gpu(*g).is_some_and(|g| f.str_of(g.uuid) == uuid)).expect("gpu");
    let g = f.gpu(gid).expect("gpu");
    assert!(g.mig_enabled && g.instances.len() == 1 && g.instances[0].pod.is_some(), "the partition is held");
    // Shared by capacity: three claims of 20 GiB.
    let (_, shared) = dra.iter().find(|(_, d)| d.multi).expect("a GPU shared by capacity");
    assert_eq!(shared.shares.len(), 3, "{shared:?}");
    assert!(shared.shares.iter().all(|s| s.consumed == vec![("memory".to_string(), SHARE_BYTES)]));
    let total = shared.capacity.iter().find(|(k, _)| k == "memory").map(|(_, v)| *v).unwrap_or_default();
    assert!(total >= 80 << 30);
    assert_eq!(shared.left("memory"), Some(total - 3 * SHARE_BYTES));
    // The driver's taint, and its alert.
    let (_, tainted) = dra.iter().find(|(_, d)| !d.taints.is_empty()).expect("a tainted GPU");
    assert_eq!(tainted.taints[0].text(), "gpu.nvidia.com/xid=79:NoExecute");
    assert!(f.alerts.keys().any(|(k, _)| *k == AlertKind::DeviceTaint));
    // The domains, one of them not Ready, and their nodes labelled with their clique.
    let train = f.domains.values().find(|d| d.name == "nvl-train").expect("nvl-train");
    assert_eq!((train.num_nodes, train.nodes_ready(), train.ready()), (4, 4, true));
    let eval = f.domains.values().find(|d| d.name == "nvl-eval").expect("nvl-eval");
    assert_eq!((eval.num_nodes, eval.nodes_ready(), eval.status.as_str()), (2, 1, "NotReady"));
    assert!(f.alerts.keys().any(|(k, _)| *k == AlertKind::DomainNotReady));
    for d in train.nodes.iter().chain(&eval.nodes) {
        let n = sim.nodes.iter().find(|n| n.spec.name == d.name).expect("node");
        let clique = n.spec.labels.iter().find(|(k, _)| k == crate::cluster::labels::GPU_CLIQUE);
        assert_eq!(clique.map(|(_, v)| v.as_str()), Some(d.clique.as_str()));
    }
    // The shapes are on nodes without MIG or sharing, and no ordinary pod is on their GPUs.
    for (ni, gi) in [sim.dra.part, sim.dra.shared, sim.dra.tainted].into_iter().flatten() {
        let n = &sim.nodes[ni];
        assert!(n.share.is_none());
        assert!(n.gpus[gi].owner.is_none());
    }
    check_invariants(&f);
    for _ in 0..60 {
        for d in sim.step() {
            f.apply(d);
        }
    }
    check_invariants(&f);
    let running = |app: &str| {
        f.pod_ids().filter_map(|p| f.pod(p)).filter(|p| f.str_of(p.app) == app && p.phase == Phase::Running).count()
    };
    assert_eq!((running("asr-dynmig"), running("embed-capacity")), (1, 3));
    // Each domain's workers: one per node, on GPUs kept for them; they run where the IMEX
    // daemon is Ready. nvl-eval's second worker is bound to the NotReady node and waits for
    // its channel, the kubelet's words on it.
    assert_eq!((running("nvl-train-worker"), running("nvl-eval-worker")), (4, 1));
    let mut waiting = 0;
    for d in f.domains.values() {
        let pods = f.domain_pods(d);
        assert_eq!(pods.len(), d.num_nodes as usize, "{}", d.name);
        for p in &pods {
            assert!(p.created >= d.created, "{} is older than its domain", p.name);
            let n = f.str_of(p.node_name);
            let ready = d.nodes.iter().find(|m| m.name == n).map(|m| m.status == "Ready");
            assert_eq!((p.gpus, p.bound_gpus.len()), (2, 2), "{} on {n}", p.name);
            match ready {
                Some(true) => assert_eq!(p.phase, Phase::Running, "{}", p.name),
                Some(false) => {
                    assert_eq!((d.name.as_str(), p.phase), ("nvl-eval", Phase::Pending));
                    let why = f.waiting(p).map(|w| w.text()).unwrap_or_default();
                    assert_eq!(why, "devices not prepared: current node not ready in ComputeDomain");
                    waiting += 1;
                }
                None => panic!("{} is not on a node of {}: {n:?}", p.name, d.name),
            }
        }
    }
    assert_eq!(waiting, 1);
}

#[test]
fn a_freed_partition_goes_and_comes_back_with_the_next_claim() {
    let mut sim = Sim::new(demo());
    let mut f = Fleet::default();
    for d in sim.initial_deltas() {
        f.apply(d);
    }
    let key = sim.pods.iter().find(|(_, p)| p.spec.app == "asr-dynmig").map(|(k, _)| k.clone()).expect("pod");
    sim.delete_pod(&key);
    for _ in 0..2 {
        for d in sim.step() {
            f.apply(d);
        }
        check_invariants(&f);
    }
    // Its replacement got the partition again; in between the GPU was whole.
    let (ni, gi) = sim.dra.part.expect("part");
    let g = &sim.nodes[ni].gpus[gi];
    let holder = g.inst_owner.first().cloned().flatten();
    assert!(holder.is_some_and(|h| h != key), "{:?}", g.inst_owner);
    assert!(sim.dra.sent.get(&g.spec.uuid).is_some_and(|d| !d.whole_fits));
}

#[test]
fn without_the_flag_nothing_is_sent() {
    let mut sim = Sim::new(SimConfig::default());
    assert!(!sim.config().dra_alpha);
    let first = sim.initial_deltas();
    assert!(!first.iter().any(|d| matches!(d, Delta::GpuDra { .. } | Delta::DomainUpsert(_))));
    assert!(sim.workloads.iter().all(|w| w.alpha.is_none()));
}

#[test]
fn small_fleets_get_what_fits() {
    for nodes in 1..=14 {
        let mut sim = Sim::new(SimConfig { nodes, ..demo() });
        let mut f = Fleet::default();
        for d in sim.initial_deltas() {
            f.apply(d);
        }
        for _ in 0..5 {
            for d in sim.step() {
                f.apply(d);
            }
        }
        check_invariants(&f);
        let shaped = f.gpu_ids().filter(|g| f.gpu(*g).is_some_and(|g| g.dra.is_some())).count();
        let want = [sim.dra.part, sim.dra.shared, sim.dra.tainted].iter().flatten().count();
        assert_eq!(shaped, want, "{nodes} nodes");
    }
}
