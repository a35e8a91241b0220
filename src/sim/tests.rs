//! Simulator tests: deterministic, a living factory, and operations that execute with the
//! progress a real cluster shows.

use super::*;
use crate::model::tests::check_invariants;
use crate::model::*;
use crate::ops::{self, OpRequest, PlanDetail, QuotaKey};

fn run(sim: &mut Sim, fleet: &mut Fleet, ticks: usize) {
    for _ in 0..ticks {
        for d in sim.step() {
            fleet.apply(d);
        }
    }
}

fn start(seed: u64, nodes: usize) -> (Sim, Fleet) {
    let mut sim =
        Sim::new(SimConfig { seed, nodes, tick_ms: 1000, churn: true, sharing_every: 0, dra_alpha: false, teams: 0 });
    let mut f = Fleet::default();
    for d in sim.initial_deltas() {
        f.apply(d);
    }
    (sim, f)
}

#[test]
fn same_seed_same_factory() {
    let mut a = Sim::new(SimConfig::default());
    let mut b = Sim::new(SimConfig::default());
    assert_eq!(a.initial_deltas(), b.initial_deltas());
    for _ in 0..30 {
        assert_eq!(a.step(), b.step());
    }
    let mut c = Sim::new(SimConfig { seed: 7, ..SimConfig::default() });
    assert_ne!(a.step(), c.step());
}

#[test]
fn default_demo_is_a_living_factory_with_faults() {
    let (mut sim, mut f) = start(42, 48);
    assert!(f.totals.nodes >= 48 && f.totals.gpus >= 384, "{:?}", f.totals);
    let models: std::collections::BTreeSet<_> = f.node_ids().filter_map(|n| f.node(n).unwrap().gpu_model).collect();
    assert!(models.len() >= 3, "mixed H100/H200/A100: {models:?}");
    assert!(f.totals.gpus_mig > 0 && f.totals.mig_allocated > 0, "some MIG-partitioned nodes in use");
    assert!(f.tenant_ids().count() >= 6);
    let alloc = f.totals.gpus_allocated * 100 / f.totals.gpus;
    assert!((50..=98).contains(&alloc), "a busy factory: {alloc}% allocated");
    assert!(f.totals.idle_allocated > 0, "some allocated GPUs sit idle");
    assert!(f.alerts.keys().any(|(k, _)| *k == AlertKind::NotReady));
    assert!(f.alerts.keys().any(|(k, _)| matches!(k, AlertKind::Xid(79))));
    assert!(f.alerts.keys().any(|(k, _)| *k == AlertKind::MigStuck), "the wedged MIG config is flagged");
    let over = f
        .tenant_ids()
        .filter_map(|t| f.tenant(t))
        .filter(|t| f.tenant_gpu_quota(t).is_some_and(|q| t.usage.requested_gpus as i64 > q))
        .count();
    assert!(over >= 1, "a tenant over quota");
    let dra = f.pod_ids().filter_map(|p| f.pod(p)).filter(|p| p.dra.iter().any(|c| c.allocated.is_some())).count();
    assert!(dra > 0, "DRA claims with allocated devices");
    check_invariants(&f);
    let busy_before = f.totals.gpus_busy;
    run(&mut sim, &mut f, 120);
    check_invariants(&f);
    assert!(f.telemetry_gen > 100);
    assert!(f.events.iter().any(|e| &*e.reason == "XID 48"), "a fault appears live");
    assert!(f.totals.gpus_busy > 0 && busy_before > 0);
}

fn drive(sim: &mut Sim, f: &mut Fleet, id: u64, plan: ops::Plan, max_ticks: usize) -> Vec<OpState> {
    for d in sim.execute(id, plan) {
        f.apply(d);
    }
    let mut seen = Vec::new();
    for _ in 0..max_ticks {
        for d in sim.step() {
            f.apply(d);
        }
        let st = f.op(id).map(|o| o.state.clone()).unwrap_or(OpState::Running);
        if seen.last() != Some(&st) {
            seen.push(st.clone());
        }
        if st.finished() {
            break;
        }
    }
    seen
}

#[test]
fn drain_evicts_each_pod_and_waits_for_the_pdb() {
    let (mut sim, mut f) = start(42, 48);
    let vllm = |f: &Fleet, n: NodeId| {
        f.pods_on_node(n)
            .iter()
            .filter(|p| f.pod(**p).is_some_and(|p| f.str_of(p.app) == "vllm-llama3-8b" && p.phase == Phase::Running))
            .count()
    };
    let node = f.node_ids().filter(|n| f.node(*n).unwrap().ready).max_by_key(|n| vllm(&f, *n)).unwrap();
    assert!(vllm(&f, node) >= 2, "need two replicas behind one PDB on a node");
    let name = f.str_of(f.node(node).unwrap().name).to_string();
    let plan = ops::plan(&f, &OpRequest::Drain { node: name.clone(), force: true }).unwrap();
    let PlanDetail::Drain(d) = &plan.detail else { panic!() };
    let expected: Vec<String> = d.to_evict().map(|p| p.name.clone()).collect();
    let states = drive(&mut sim, &mut f, 1, plan, 400);
    assert!(
        states
            .iter()
            .any(|s| matches!(s, OpState::Blocked(r) if r.contains("429") && r.contains("vllm-llama3-8b-pdb"))),
        "PDB blocked for a while: {states:?}"
    );
    assert_eq!(states.last(), Some(&OpState::Succeeded), "{states:?}");
    let n = f.node(node).unwrap();
    assert!(n.cordoned);
    let left: Vec<&str> = f.pods_on_node(node).iter().filter_map(|p| f.pod(*p)).map(|p| &*p.name).collect();
    assert!(expected.iter().all(|e| !left.contains(&e.as_str())), "evicted pods are gone: {left:?}");
    assert!(left.iter().any(|p| p.starts_with("nvidia-device-plugin")), "the DaemonSet pod stays");
    let op = f.op(1).unwrap();
    assert!(
        op.log.iter().filter(|l| l.starts_with("evicted") || l.starts_with("deleted")).count() == expected.len(),
        "one step per eviction: {:?}",
        op.log
    );
    assert!(f.events.iter().any(|e| &*e.reason == "OperationSucceeded" && e.object == name));
    assert_eq!((op.done, op.total), (op.total, 2 + expected.len() as u32), "the announced steps are the steps taken");
    check_invariants(&f);
}

#[test]
fn drain_waits_for_a_pod_already_terminating() {
    let (mut sim, mut f) = start(42, 48);
    let (key, node) = sim
        .pods
        .iter()
        .find(|(_, p)| p.spec.phase == Phase::Running && p.spec.owner == Owner::ReplicaSet && p.spec.gpus > 0)
        .map(|(k, p)| (k.clone(), p.spec.node.clone().unwrap_or_default()))
        .expect("a running GPU pod");
    // Someone deleted it before the drain, and something (a finalizer) holds it for a while.
    sim.terminate_pod(&key);
    if let Some(p) = sim.pods.get_mut(&key) {
        p.terminating = Some(40);
    }
    run(&mut sim, &mut f, 1);
    let plan = ops::plan(&f, &OpRequest::Drain { node: node.clone(), force: true }).unwrap();
    let PlanDetail::Drain(d) = &plan.detail else { panic!() };
    assert!(d.to_wait().any(|p| format!("{}/{}", p.namespace, p.name) == key), "waited for: {:?}", d.pods);
    let (ns, name) = key.split_once('/').unwrap();
    let mut states = Vec::new();
    for d in sim.execute(1, plan) {
        f.apply(d);
    }
    for _ in 0..400 {
        run(&mut sim, &mut f, 1);
        let st = f.op(1).map(|o| o.state.clone()).unwrap_or(OpState::Running);
        if st.finished() {
            states.push(st);
            break;
        }
        assert!(f.pod_by_name(ns, name).is_some(), "the pod is still there, so is the drain: {:?}", f.op(1));
    }
    assert_eq!(states.last(), Some(&OpState::Succeeded), "{:?}", f.op(1));
    assert!(f.pod_by_name(ns, name).is_none(), "drained only once the pod is gone");
    let op = f.op(1).unwrap();
    assert!(op.log.iter().any(|l| l == &format!("{key} is gone")), "{:?}", op.log);
    check_invariants(&f);
}

#[test]
fn reslice_moves_mig_state_pending_to_success_and_updates_capacity() {
    let (mut sim, mut f) = start(42, 48);
    let node = f
        .node_ids()
        .find(|n| {
            let n = f.node(*n).unwrap();
            n.ready && n.mig_state == MigConfigState::Success && f.str_of(n.mig_config) == "all-1g.10gb"
        })
        .expect("an H100/A100 node with all-1g.10gb");
    let name = f.str_of(f.node(node).unwrap().name).to_string();
    let plan =
        ops::plan(&f, &OpRequest::Reslice { node: name.clone(), gpus: vec![], layout: "all-balanced".into() }).unwrap();
    assert!(plan.can_execute(), "{:?}", plan.blockers);
    let mut saw_pending = false;
    for d in sim.execute(2, plan) {
        f.apply(d);
    }
    for _ in 0..200 {
        for d in sim.step() {
            f.apply(d);
        }
        saw_pending |= f.node(node).unwrap().mig_state == MigConfigState::Pending;
        if f.op(2).is_some_and(|o| o.state.finished()) {
            break;
        }
    }
    assert!(saw_pending, "state went through pending");
    let op = f.op(2).unwrap();
    assert_eq!(op.state, OpState::Succeeded, "{:?}", op.log);
    // The runner's sequence, as on a cluster: mig-manager's answer is waited for, then the
    // planned devices, and every announced step is taken.
    assert!(op.log.iter().any(|l| l.starts_with("mig-manager acknowledged all-balanced")), "{:?}", op.log);
    assert!(op.log.iter().any(|l| l == &format!("uncordoned {name}")), "{:?}", op.log);
    assert_eq!(op.done, op.total, "{:?}", op.log);
    let n = f.node(node).unwrap();
    assert_eq!(n.mig_state, MigConfigState::Success);
    assert_eq!(f.str_of(n.mig_config), "all-balanced");
    assert!(!n.cordoned, "uncordoned after success");
    let cap = |res: &str| n.allocatable.iter().find(|(r, _)| f.str_of(*r) == res).map(|(_, v)| *v);
    assert_eq!(cap("nvidia.com/mig-3g.40gb"), Some(8));
    assert_eq!(cap("nvidia.com/mig-1g.10gb"), Some(16));
    for g in &n.gpus {
        assert_eq!(f.gpu(*g).unwrap().instances.len(), 4);
    }
    check_invariants(&f);
}

#[test]
fn an_audit_log_that_cannot_be_written_stops_the_operation_before_its_next_call() {
    // The log is written before every call; when it cannot be (a full disk), the operation
    // stops there and says why, and the call is not made: here the
    // reslice loses its log while it waits for its pods to go, so it never writes the
    // mig.config label, and the node keeps its layout.
    let (mut sim, mut f) = start(42, 48);
    // A MIG node whose reslice has pods to move off first.
    let (node, plan) = f
        .node_ids()
        .filter(|id| f.node(*id).is_some_and(|n| n.ready && n.mig_state == MigConfigState::Success))
        .find_map(|id| {
            let name = f.str_of(f.node(id)?.name).to_string();
            let layout =
                if f.str_of(f.node(id)?.mig_config) == "all-balanced" { "all-1g.10gb" } else { "all-balanced" };
            let plan = ops::plan(&f, &OpRequest::Reslice { node: name, gpus: vec![], layout: layout.into() }).ok()?;
            let PlanDetail::Reslice(r) = &plan.detail else { return None };
            (plan.can_execute() && !r.pods.is_empty()).then_some((id, plan))
        })
        .expect("a MIG node with pods to move");
    let before = f.str_of(f.node(node).unwrap().mig_config).to_string();
    let dir = std::env::temp_dir().join(format!("fabrik-audit-full-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let audit = crate::ops::audit::Audit::new(&dir, "test");
    let log = audit.path().to_path_buf();
    for d in sim.execute_audited(3, plan, Some(audit)) {
        f.apply(d);
    }
    let written = crate::ops::audit::read(&log).unwrap().0;
    assert!(written.iter().any(|r| r.phase == crate::ops::audit::Phase::Confirmed), "{written:?}");
    assert!(f.op(3).is_some_and(|o| !o.state.finished()), "still waiting for its pods");
    // The disk fills under the operation: the log becomes /dev/full, where every write
    // fails with ENOSPC, as on a full volume.
    std::fs::remove_file(&log).unwrap();
    std::os::unix::fs::symlink("/dev/full", &log).unwrap();
    for _ in 0..100 {
        for d in sim.step() {
            f.apply(d);
        }
        if f.op(3).is_some_and(|o| o.state.finished()) {
            break;
        }
    }
    let op = f.op(3).unwrap();
    let OpState::Failed(why) = &op.state else { panic!("the operation stops: {:?} {:?}", op.state, op.log) };
    assert!(
        why.contains(crate::ops::audit::FILE_NAME)
            && why.contains("No space left on device")
            && why.contains("stopped after"),
        "it says why: {why}"
    );
    let n = f.node(node).unwrap();
    assert_eq!(f.str_of(n.mig_config), before, "the label was never written: {:?}", op.log);
    assert!(!op.log.iter().any(|l| l.contains("mig.config")), "{:?}", op.log);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn quota_edit_lands_and_a_concurrent_edit_is_a_conflict() {
    let (mut sim, mut f) = start(42, 48);
    let t = f.tenant(f.tenant_by_name("vision").unwrap()).unwrap();
    let q = t.quotas.iter().filter_map(|q| f.quota(*q)).find(|q| f.is_gpu_resource(q.resource)).unwrap();
    let key = QuotaKey {
        source: ops::source_spec(&f, &q.source),
        resource: f.str_of(q.resource).to_string(),
        field: Default::default(),
    };
    let plan = ops::plan(&f, &OpRequest::SetQuota { tenant: "vision".into(), quota: key.clone(), value: "33".into() })
        .unwrap();
    let states = drive(&mut sim, &mut f, 3, plan, 5);
    assert_eq!(states.last(), Some(&OpState::Succeeded));
    let hard = |f: &Fleet| {
        let t = f.tenant(f.tenant_by_name("vision").unwrap()).unwrap();
        f.tenant_gpu_quota(t)
    };
    assert_eq!(hard(&f), Some(33));
    // Plan against version 2, then someone else edits with kubectl: the plan must not win.
    let plan = ops::plan(&f, &OpRequest::SetQuota { tenant: "vision".into(), quota: key, value: "50".into() }).unwrap();
    for d in sim.edit_quota_externally("vision", "requests.nvidia.com/gpu", 20) {
        f.apply(d);
    }
    let states = drive(&mut sim, &mut f, 4, plan, 5);
    match states.last() {
        Some(OpState::Failed(m)) => assert!(m.contains("conflict") && m.contains("20"), "{m}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(hard(&f), Some(20), "the concurrent value stays");
}

#[test]
fn cancel_stops_an_operation_and_says_so() {
    let (mut sim, mut f) = start(42, 48);
    let node = f.node_ids().find(|n| f.node(*n).unwrap().ready && f.node(*n).unwrap().pods > 2).unwrap();
    let name = f.str_of(f.node(node).unwrap().name).to_string();
    let plan = ops::plan(&f, &OpRequest::Drain { node: name, force: true }).unwrap();
    for d in sim.execute(5, plan) {
        f.apply(d);
    }
    // The evicted pods take two ticks to go: the drain is waiting for them.
    run(&mut sim, &mut f, 1);
    assert!(!f.op(5).unwrap().state.finished(), "{:?}", f.op(5));
    for d in sim.cancel(5) {
        f.apply(d);
    }
    assert_eq!(f.op(5).unwrap().state, OpState::Cancelled);
    assert!(f.node(node).unwrap().cordoned, "what was done stays done");
    run(&mut sim, &mut f, 5);
    assert_eq!(f.op(5).unwrap().state, OpState::Cancelled, "no progress after cancel");
}

#[test]
fn scales_to_a_big_fleet() {
    // Not a timing test: the shape must hold at 1,000 nodes.
    let (mut sim, mut f) = start(1, 1000);
    assert_eq!(f.totals.nodes, 1000);
    assert_eq!(f.totals.gpus, 8000);
    run(&mut sim, &mut f, 3);
    check_invariants(&f);
}

// ---------- GPUs shared by the device plugin (time-slicing, MPS) ----------

fn shared_sim(sharing_every: u32) -> Sim {
    Sim::new(SimConfig { seed: 42, nodes: 48, tick_ms: 1000, churn: true, sharing_every, dra_alpha: false, teams: 0 })
}

fn label<'a>(spec: &'a NodeSpec, key: &str) -> Option<&'a str> {
    spec.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

fn res(v: &[(String, i64)], key: &str) -> Option<i64> {
    v.iter().find(|(k, _)| k == key).map(|(_, n)| *n)
}

#[test]
fn shared_nodes_publish_what_the_device_plugin_and_gfd_publish() {
    use crate::cluster::labels as l;
    let sim = shared_sim(6);
    let mut kinds = std::collections::BTreeSet::new();
    for n in &sim.nodes {
        let spec = &n.spec;
        let product = n.spec.gpu_model.map(|m| m.product_label()).unwrap_or_default();
        assert_eq!(label(spec, l::GPU_COUNT), Some("8"), "the physical count");
        let Some(s) = &n.share else {
            assert_eq!(label(spec, l::GPU_REPLICAS), Some("1"));
            assert_eq!(label(spec, l::GPU_SHARING_STRATEGY), Some("none"));
            assert_eq!(label(spec, l::GPU_PRODUCT), Some(product));
            assert_eq!(label(spec, l::MPS_CAPABLE), None);
            assert_eq!(label(spec, l::DEVICE_PLUGIN_CONFIG), None);
            assert_eq!(res(&spec.capacity, l::GPU_SHARED_RESOURCE), None);
            continue;
        };
        kinds.insert((s.strategy.label(), s.replicas, s.renamed, s.config.clone()));
        assert!(n.gpus.iter().all(|g| !g.spec.mig_enabled), "{}: MIG is off where GPUs are shared", spec.name);
        assert_eq!(spec.mig_config, "all-disabled");
        let r = i64::from(s.replicas);
        assert_eq!(label(spec, l::GPU_REPLICAS), Some(r.to_string().as_str()));
        assert_eq!(label(spec, l::GPU_SHARING_STRATEGY), Some(s.strategy.label()));
        assert_eq!(label(spec, l::DEVICE_PLUGIN_CONFIG), Some(s.config.as_str()));
        let shared_product = format!("{product}{}", l::SHARED_PRODUCT_SUFFIX);
        assert_eq!(label(spec, l::GPU_PRODUCT), Some(if s.renamed { product } else { shared_product.as_str() }));
        assert_eq!(label(spec, l::MPS_CAPABLE).is_some(), s.strategy == SharingStrategy::Mps);
        let (have, not) = if s.renamed {
            (l::GPU_SHARED_RESOURCE, l::GPU_RESOURCE)
        } else {
            (l::GPU_RESOURCE, l::GPU_SHARED_RESOURCE)
        };
        for v in [&spec.capacity, &spec.allocatable] {
            assert_eq!(res(v, have), Some(8 * r), "{}: G×R of {have}", spec.name);
            assert_eq!(res(v, not), None);
        }
        assert_eq!(DeviceSharing::of_node(&spec.labels, &spec.capacity).as_ref(), Some(s));
    }
    let kinds: Vec<_> = kinds.into_iter().map(|(s, r, renamed, c)| format!("{s} {r} {renamed} {c}")).collect();
    assert_eq!(
        kinds,
        vec!["mps 2 false mps-2", "time-slicing 4 false time-slicing-4", "time-slicing 4 true time-slicing-4-renamed"]
    );
    // Every 6th node without MIG: 40 of the 48 have none, so 6 are shared; no MIG node is.
    assert_eq!(sim.nodes.iter().filter(|n| n.share.is_some()).count(), 6);
    assert!(sim.nodes.iter().any(|n| n.gpus.iter().any(|g| g.spec.mig_enabled)));
}

/// What the shared GPUs hold must agree with the pods: never more than R replicas of a
/// GPU, a pod's replicas are its `gpus`, its `bound_gpus` the GPUs they are on.
fn check_replicas(sim: &Sim) -> Vec<(usize, u32)> {
    let mut per_gpu = Vec::new();
    for n in &sim.nodes {
        for g in &n.gpus {
            match &n.share {
                None => assert!(g.holders.is_empty()),
                Some(s) => {
                    assert!(g.holders.len() <= usize::from(s.replicas), "{}: {:?}", g.spec.uuid, g.holders);
                    assert!(g.owner.is_none(), "no GPU of a shared node is held whole");
                    per_gpu.push((g.holders.len(), u32::from(g.util)));
                }
            }
        }
    }
    for (key, p) in &sim.pods {
        let Some(node) = p.spec.node.as_ref().and_then(|n| sim.node_index.get(n)).map(|i| &sim.nodes[*i]) else {
            continue;
        };
        let ask = sim.workloads[p.workload].share;
        match (&node.share, ask) {
            (Some(s), Some((strategy, renamed))) => {
                assert_eq!((s.strategy, s.renamed), (strategy, renamed), "{key} on {}", node.spec.name);
                let held: usize = node.gpus.iter().map(|g| g.holders.iter().filter(|h| *h == key).count()).sum();
                if !p.spec.phase.finished() {
                    assert_eq!(held, usize::from(p.spec.gpus), "{key}");
                    let on: Vec<&String> =
                        node.gpus.iter().filter(|g| g.holders.contains(key)).map(|g| &g.spec.uuid).collect();
                    let mut bound: Vec<&String> = p.spec.bound_gpus.iter().collect();
                    bound.sort();
                    let mut on = on;
                    on.sort();
                    assert_eq!(bound, on, "{key}");
                }
            }
            (None, None) => {}
            (s, a) => panic!("{key}: asks {a:?}, on a node sharing {s:?}"),
        }
    }
    per_gpu
}

#[test]
fn shared_gpus_never_hand_out_more_replicas_than_they_have() {
    let mut sim = shared_sim(6);
    let mut f = Fleet::default();
    for d in sim.initial_deltas() {
        f.apply(d);
    }
    let per_gpu = check_replicas(&sim);
    let full = sim
        .nodes
        .iter()
        .filter_map(|n| n.share.as_ref().map(|s| (n, usize::from(s.replicas))))
        .flat_map(|(n, r)| n.gpus.iter().map(move |g| (g.holders.len(), r)))
        .collect::<Vec<_>>();
    assert!(full.iter().any(|(h, r)| h == r), "some GPUs fully held: {full:?}");
    assert!(full.iter().any(|(h, r)| h < r && *h > 0), "some with free replicas: {full:?}");
    assert!(per_gpu.iter().any(|(h, u)| *h > 0 && *u >= 50), "some busy: {per_gpu:?}");
    assert!(per_gpu.iter().any(|(h, u)| *h > 0 && *u < 5), "some held but idle: {per_gpu:?}");
    let pods = |two: bool| {
        sim.pods.values().filter(|p| sim.workloads[p.workload].share.is_some()).any(|p| (p.spec.gpus == 2) == two)
    };
    assert!(pods(false) && pods(true), "pods with one replica and with two");
    let renamed = sim.pods.values().filter(|p| sim.asks_renamed(p) && p.spec.node.is_some()).count();
    assert!(renamed > 0, "pods on the renamed resource");
    check_invariants(&f);
    for _ in 0..150 {
        for d in sim.step() {
            f.apply(d);
        }
        check_replicas(&sim);
    }
    check_invariants(&f);
}

#[test]
fn without_sharing_nothing_changes() {
    let mut a = Sim::new(SimConfig::default());
    assert_eq!(a.config().sharing_every, 0);
    assert!(a.nodes.iter().all(|n| n.share.is_none()));
    assert!(a.workloads.iter().all(|w| w.share.is_none()));
    // A period longer than the fleet shares nothing either, and gives the same factory.
    let mut b = shared_sim(1000);
    assert!(b.nodes.iter().all(|n| n.share.is_none()));
    assert_eq!(a.initial_deltas(), b.initial_deltas());
    for _ in 0..20 {
        assert_eq!(a.step(), b.step());
    }
    for n in &a.nodes {
        let spec = &n.spec;
        assert_eq!(label(spec, crate::cluster::labels::GPU_SHARING_STRATEGY), Some("none"));
        assert!(spec.capacity.iter().all(|(k, _)| !k.ends_with(".shared")));
        assert!(!label(spec, crate::cluster::labels::GPU_PRODUCT).unwrap_or_default().ends_with("-SHARED"));
    }
}

/// A running pod of `app` holding a device the fleet names, by namespace and name.
fn holding(f: &Fleet, app: &str) -> (String, String) {
    f.pod_ids()
        .filter_map(|p| f.pod(p))
        .find(|p| f.str_of(p.app) == app && p.phase == Phase::Running && !p.bound_gpus.is_empty())
        .map(|p| (f.str_of(p.namespace).to_string(), p.name.to_string()))
        .unwrap_or_else(|| panic!("a running {app} pod holding a GPU"))
}

#[test]
fn reclaim_scales_down_suspends_or_evicts_and_is_done_when_the_pod_is_gone() {
    let (mut sim, mut f) = start(42, 48);
    // A Deployment's pod: marked, the replicas down by one, and that pod — not another — goes.
    let (ns, pod) = holding(&f, "ft-debug");
    let a = sim.workload_of["ft-debug"];
    let before = sim.workloads[a].replicas;
    let plan = ops::plan(&f, &OpRequest::Reclaim { namespace: ns.clone(), pod: pod.clone() }).unwrap();
    let states = drive(&mut sim, &mut f, 1, plan, 60);
    assert_eq!(states.last(), Some(&OpState::Succeeded), "{states:?} {:?}", f.op(1).map(|o| &o.log));
    assert!(f.pod_by_name(&ns, &pod).is_none(), "the reclaimed pod is gone");
    assert_eq!(sim.workloads[a].replicas, before - 1);
    let op = f.op(1).unwrap();
    assert!(op.log.iter().any(|l| l.starts_with(&format!("marked {ns}/{pod} {}", ops::reclaim::DELETION_COST))));
    assert!(op.log.iter().any(|l| l == &format!("scaled Deployment {ns}/ft-debug {before} → {}", before - 1)));
    assert!(op.log.iter().any(|l| l == &format!("{ns}/{pod} is gone")));
    assert_eq!((op.done, op.total), (3, 3), "the announced steps are the steps taken");
    run(&mut sim, &mut f, 30);
    let live = f.pod_ids().filter_map(|p| f.pod(p)).filter(|p| f.str_of(p.app) == "ft-debug").count() as u32;
    assert!(live < before, "no replacement comes back: {live} pods for {} replicas", before - 1);

    // A Job's pod: the Job is suspended; only that Job's pods go.
    let (ns, pod) = holding(&f, "ft-mistral-lora");
    let plan = ops::plan(&f, &OpRequest::Reclaim { namespace: ns.clone(), pod: pod.clone() }).unwrap();
    let states = drive(&mut sim, &mut f, 2, plan, 60);
    assert_eq!(states.last(), Some(&OpState::Succeeded), "{states:?}");
    assert!(f.pod_by_name(&ns, &pod).is_none());
    let job = pod.rsplit_once('-').unwrap().0;
    assert!(f.op(2).unwrap().log.iter().any(|l| l == &format!("suspended Job {ns}/{job}")));

    // A notebook without an owner: evicted.
    let (ns, pod) = holding(&f, "jupyter");
    let plan = ops::plan(&f, &OpRequest::Reclaim { namespace: ns.clone(), pod: pod.clone() }).unwrap();
    let states = drive(&mut sim, &mut f, 3, plan, 60);
    assert_eq!(states.last(), Some(&OpState::Succeeded), "{states:?}");
    assert!(f.pod_by_name(&ns, &pod).is_none());
    assert!(f.op(3).unwrap().log.iter().any(|l| l == &format!("evicted {ns}/{pod}")));
    check_invariants(&f);
}

#[test]
fn a_reclaim_whose_replicaset_removes_another_pod_fails_and_says_how_to_scale_back() {
    let (mut sim, mut f) = start(42, 48);
    let (ns, pod) = holding(&f, "ft-debug");
    let plan = ops::plan(&f, &OpRequest::Reclaim { namespace: ns.clone(), pod: pod.clone() }).unwrap();
    // A replica no node runs yet, within the Deployment's count: the ReplicaSet removes it
    // first, whatever the deletion cost of the pod fabrik marked.
    let a = sim.workload_of["ft-debug"];
    let live = sim.pods.values().filter(|p| p.workload == a && p.terminating.is_none()).count() as u32;
    sim.workloads[a].replicas = live + 1;
    let extra = sim.create_pod(a, false);
    f.apply(Delta::PodUpsert(sim.pods[&extra].spec.clone()));
    let states = drive(&mut sim, &mut f, 1, plan, 60);
    let Some(OpState::Failed(why)) = states.last() else { panic!("{states:?}") };
    assert!(why.contains(&format!("with {ns}/{pod} still running")), "{why}");
    assert!(
        why.ends_with(&format!("Scale back with: kubectl scale deployment/ft-debug -n {ns} --replicas={}", live + 1)),
        "{why}"
    );
    assert!(f.pod_by_name(&ns, &pod).is_some(), "the marked pod runs on");
    assert!(!sim.pods.contains_key(&extra) || sim.pods[&extra].terminating.is_some(), "the pending one went");
}

#[test]
fn a_held_queue_admits_nothing_new_a_drained_one_stops_its_pods_and_a_resume_lets_them_back() {
    let (mut sim, mut f) = start(42, 48);
    let queue = "cq-inference-prod";
    let live =
        |f: &Fleet| f.pod_ids().filter_map(|p| f.pod(p)).filter(|p| f.str_of(p.namespace) == "inference-prod").count();
    let before = live(&f);
    assert!(before > 0, "the Kueue tenant runs pods");
    let hold = |p| OpRequest::QueueStop { queue: queue.into(), policy: p };
    let plan = ops::plan(&f, &hold(ops::StopPolicy::HoldAndDrain)).unwrap();
    assert_eq!(plan.title, format!("Hold and drain ClusterQueue {queue}"));
    assert!(plan.warnings.iter().any(|w| w.contains("running work of ClusterQueue")), "{:?}", plan.warnings);
    let states = drive(&mut sim, &mut f, 1, plan, 60);
    assert_eq!(states.last(), Some(&OpState::Succeeded), "{states:?} {:?}", f.op(1).map(|o| &o.log));
    run(&mut sim, &mut f, 20);
    assert_eq!(live(&f), 0, "drained, and nothing new started while held");
    let plan = ops::plan(&f, &hold(ops::StopPolicy::None)).unwrap();
    let states = drive(&mut sim, &mut f, 2, plan, 60);
    assert_eq!(states.last(), Some(&OpState::Succeeded), "{states:?}");
    assert!(f.op(2).unwrap().log.iter().any(|l| l == &format!("ClusterQueue {queue}: stopPolicy HoldAndDrain → None")));
    run(&mut sim, &mut f, 30);
    assert!(live(&f) > 0, "resumed: pods start again");
    let e =
        ops::plan(&f, &OpRequest::QueueStop { queue: "cq-nope".into(), policy: ops::StopPolicy::Hold }).unwrap_err();
    assert!(e.to_string().contains("no Kueue ClusterQueue \"cq-nope\""), "{e}");
}

#[test]
fn kueue_workloads_queue_in_order_and_suspend_and_resume_when_kueue_says_so() {
    let (mut sim, mut f) = start(42, 48);
    let wl = |f: &Fleet, prefix: &str| {
        f.workloads
            .values()
            .find(|w| w.name.starts_with(prefix))
            .cloned()
            .unwrap_or_else(|| panic!("a {prefix} Workload"))
    };
    // The Kueue tenant's pods are admitted; three suspended Jobs wait, one deactivated.
    let admitted = f.workloads.values().filter(|w| w.state() == WorkloadState::Admitted).count();
    let pods = f.pod_ids().filter_map(|p| f.pod(p)).filter(|p| f.str_of(p.namespace) == "inference-prod").count();
    assert_eq!(admitted, pods, "one Workload per pod of the Kueue tenant");
    let (eval, bench, load) = (wl(&f, "job-nightly-eval"), wl(&f, "job-canary-bench"), wl(&f, "job-load-test"));
    assert_eq!(
        (eval.state(), bench.state(), load.state()),
        (WorkloadState::Pending, WorkloadState::Evicted, WorkloadState::Inactive)
    );
    // Older first at equal priority; the deactivated one is out of line.
    assert_eq!(f.workload_position(&bench.key()), Some(1));
    assert_eq!(f.workload_position(&eval.key()), Some(2));
    assert_eq!(f.workload_position(&load.key()), None);
    let by = f.workload_preemptor(&bench).expect("its preemptor is listed");
    assert_eq!(by.state(), WorkloadState::Admitted);
    check_invariants(&f);
    let t = f.tenant_by_name("inference-prod").unwrap();
    assert_eq!(f.tenant_queued_pods(t), 3);
    assert_eq!(
        f.tenant_queued(t),
        vec![("waiting for quota in cq-inference-prod".to_string(), 2, 2), ("deactivated".to_string(), 1, 1)]
    );

    // Suspend the pending one: Kueue's answer (evicted, Deactivated) ends it; it leaves the line.
    let suspend = |key: &str, active| OpRequest::WorkloadActive { workload: key.to_string(), active };
    let plan = ops::plan(&f, &suspend(&eval.key(), false)).unwrap();
    assert_eq!(plan.title, format!("Suspend Kueue Workload {}", eval.key()));
    assert!(plan.warnings.iter().any(|w| w.contains("leaves its place in line (2)")), "{:?}", plan.warnings);
    let states = drive(&mut sim, &mut f, 1, plan, 30);
    assert_eq!(states.last(), Some(&OpState::Succeeded), "{states:?} {:?}", f.op(1).map(|o| &o.log));
    assert_eq!(wl(&f, "job-nightly-eval").state(), WorkloadState::Inactive);
    assert_eq!(f.workload_position(&eval.key()), None);
    assert_eq!(f.workload_position(&bench.key()), Some(1));
    // Resume the one deactivated an hour ago: requeued, in line again.
    let plan = ops::plan(&f, &suspend(&load.key(), true)).unwrap();
    let states = drive(&mut sim, &mut f, 2, plan, 30);
    assert_eq!(states.last(), Some(&OpState::Succeeded), "{states:?}");
    let load = wl(&f, "job-load-test");
    assert!(load.active && load.condition("Requeued").is_some_and(|c| c.status && c.reason == "Reactivated"));
    assert_eq!(f.workload_position(&load.key()), Some(1), "the oldest in line");
    // Nothing to do is refused at plan time, with where to look.
    let e = ops::plan(&f, &suspend(&load.key(), true)).unwrap_err();
    assert!(e.to_string().contains("active already"), "{e}");
    let e = ops::plan(&f, &suspend("inference-prod/nope", false)).unwrap_err();
    assert!(e.to_string().contains("workloads view (9)"), "{e}");
    run(&mut sim, &mut f, 10);
    assert_eq!(wl(&f, "job-nightly-eval").state(), WorkloadState::Inactive, "it stays suspended");
    check_invariants(&f);
}

#[test]
fn a_host_reboot_is_done_when_the_operator_powered_it_off_and_on_and_a_host_in_error_fails_it() {
    let (mut sim, mut f) = start(42, 48);
    let node = f.nodes.iter().map(|(_, n)| n).find(|n| n.ready).map(|n| f.str_of(n.name).to_string()).expect("a node");
    let key = f.host_of_node(&node).map(|h| h.key()).expect("the demo's node has a host");
    let host = |node: &str| OpRequest::Host { node: node.into(), host: None, action: ops::HostAction::Reboot };
    let plan = ops::plan(&f, &host(&node)).unwrap();
    assert!(plan.can_execute(), "{:?}", plan.blockers);
    assert_eq!(plan.title, format!("Reboot host {key} of node {node}"));
    let states = drive(&mut sim, &mut f, 1, plan, 60);
    assert_eq!(states.last(), Some(&OpState::Succeeded), "{states:?} {:?}", f.op(1).map(|o| &o.log));
    let log = &f.op(1).expect("op").log;
    assert!(log.iter().any(|l| l == &format!("the baremetal-operator powered {key} off")), "{log:?}");
    let h = f.host_of_node(&node).expect("host");
    assert!(h.powered_on && !h.reboot_pending, "{h:?}");
    // Power off, then on: each done when the operator reports it.
    for (id, action, on) in [(2, ops::HostAction::PowerOff, false), (3, ops::HostAction::PowerOn, true)] {
        let plan = ops::plan(&f, &OpRequest::Host { node: node.clone(), host: None, action }).unwrap();
        let states = drive(&mut sim, &mut f, id, plan, 60);
        assert_eq!(states.last(), Some(&OpState::Succeeded), "{states:?}");
        assert_eq!(f.host_of_node(&node).map(|h| h.powered_on), Some(on));
    }
    // A host kept in Git (Argo CD): a power change warns (spec.online is put back), a reboot
    // (an annotation the operator removes) does not.
    let (ns, name) = key.split_once('/').expect("ns/name");
    let owner = crate::model::GitOpsOwner::detect(vec![("argocd.argoproj.io/instance", "bare-metal")], vec![]);
    assert!(owner.is_some());
    f.apply(Delta::Managed { object: crate::model::gitops::key("baremetalhost", Some(ns), name), owner });
    let off =
        ops::plan(&f, &OpRequest::Host { node: node.clone(), host: None, action: ops::HostAction::PowerOff }).unwrap();
    assert!(off.warnings.iter().any(|w| w.contains("bare-metal") && w.contains("spec.online")), "{:?}", off.warnings);
    assert!(!ops::plan(&f, &host(&node)).unwrap().warnings.iter().any(|w| w.contains("bare-metal")));
    // A provisioned host is not inspected again: blocked, with the reason.
    let plan =
        ops::plan(&f, &OpRequest::Host { node: node.clone(), host: None, action: ops::HostAction::Inspect }).unwrap();
    assert!(plan.blockers.iter().any(|b| b.contains("only an available host")), "{:?}", plan.blockers);
    // An available spare is: done once the operator recorded an inspection since the request.
    let spare = f.host_ids().filter_map(|i| f.host_by_id(i)).find(|h| h.takes_inspect()).map(|h| h.key());
    let spare = spare.expect("the demo has an available spare");
    let inspect = OpRequest::Host { node: String::new(), host: Some(spare.clone()), action: ops::HostAction::Inspect };
    let plan = ops::plan(&f, &inspect).unwrap();
    let states = drive(&mut sim, &mut f, 5, plan, 60);
    assert_eq!(states.last(), Some(&OpState::Succeeded), "{states:?}");
    let h = f.host_ids().filter_map(|i| f.host_by_id(i)).find(|h| h.key() == spare).expect("the spare");
    assert!(h.state == "available" && !h.inspect_end.is_empty() && !h.inspect_start.is_empty(), "{h:?}");
    // The NotReady node's host does not answer its BMC: the reboot fails and says so.
    let down = f.nodes.iter().map(|(_, n)| n).find(|n| !n.ready).map(|n| f.str_of(n.name).to_string()).expect("down");
    let plan = ops::plan(&f, &host(&down)).unwrap();
    assert!(plan.warnings.iter().any(|w| w.contains("is in error now")), "{:?}", plan.warnings);
    let states = drive(&mut sim, &mut f, 4, plan, 60);
    let Some(OpState::Failed(why)) = states.last() else { panic!("{states:?}") };
    assert!(why.contains("in error") && why.contains("power management error"), "{why}");
    let e = ops::plan(&f, &host("no-such-node")).unwrap_err();
    assert!(e.to_string().contains("not in the fleet"), "{e}");
    // A host named by its key that is not there: said, with the form.
    let by_key = OpRequest::Host { node: String::new(), host: Some("nope/x".into()), action: ops::HostAction::Inspect };
    let e = ops::plan(&f, &by_key).unwrap_err();
    assert!(e.to_string().contains("no BareMetalHost nope/x in view: give it as namespace/name"), "{e}");
}

#[test]
fn a_crash_looping_pod_is_restarted_each_time_its_back_off_runs_out() {
    let (mut sim, mut f) = start(42, 48);
    let looping = |f: &Fleet| -> Vec<(String, u32, Option<Ts>)> {
        f.pod_ids()
            .filter_map(|id| f.pod(id))
            .filter(|p| p.crash_looping())
            .map(|p| (p.name.to_string(), p.restarts.count, p.restarts.last_exit()))
            .collect()
    };
    run(&mut sim, &mut f, 2);
    let before = looping(&f);
    assert!(!before.is_empty(), "the demo has crash-looping ft-debug pods");
    assert!(before.iter().all(|(_, n, at)| *n >= 9 && at.is_some()), "{before:?}");
    // Its back-off is 5 min: within 301 s each was restarted once more, and exited again.
    run(&mut sim, &mut f, 301);
    let after = looping(&f);
    for (name, n, at) in &before {
        if let Some((_, m, later)) = after.iter().find(|(x, ..)| x == name) {
            assert_eq!(*m, n + 1, "{name}: one restart more");
            assert!(later > at, "{name}: a later exit");
        }
    }
    assert!(after.iter().any(|(x, ..)| before.iter().any(|(y, ..)| x == y)), "some still loop: {after:?}");
    check_invariants(&f);
}
