//! Planning tests on a simulated fleet: what a preview says, and what it refuses.

use super::*;
use crate::model::{Owner, Phase, QuotaSourceSpec};
use crate::testing::demo_fleet;

fn fleet() -> Fleet {
    demo_fleet(42, 48, 3, Default::default()).1
}

fn node_with<F: Fn(&crate::model::Pod) -> bool>(f: &Fleet, pred: F) -> String {
    f.node_ids()
        .find(|n| f.pods_on_node(*n).iter().any(|p| f.pod(*p).is_some_and(&pred)))
        .map(|n| f.str_of(f.node(n).unwrap().name).to_string())
        .expect("the demo has such a node")
}

#[test]
fn drain_evicts_managed_pods_skips_daemonsets_and_refuses_unmanaged() {
    let f = fleet();
    let name = node_with(&f, |p| p.owner == Owner::None && p.phase == Phase::Running);
    let plan = plan(&f, &OpRequest::Drain { node: name.clone(), force: false }).unwrap();
    let PlanDetail::Drain(d) = &plan.detail else { panic!("drain detail") };
    assert!(
        d.pods.iter().any(|p| p.namespace == "gpu-operator" && matches!(p.action, PodAction::Skip(_))),
        "DaemonSet pod skipped"
    );
    let refused: Vec<_> = d.pods.iter().filter(|p| matches!(p.action, PodAction::Refuse(_))).collect();
    assert!(!refused.is_empty());
    assert!(!plan.can_execute(), "unmanaged pods block the drain until forced");
    assert!(plan.blockers.iter().any(|b| b.contains("emptyDir") || b.contains("no controller")), "{:?}", plan.blockers);
    assert_eq!(plan.target, name);
    // Forcing turns refusals into deletions, named as such in the preview.
    let forced = super::plan(&f, &OpRequest::Drain { node: name, force: true }).unwrap();
    assert!(forced.can_execute());
    assert!(forced.effects.iter().any(|e| e.contains("DELETE")));
}

#[test]
fn drain_preview_names_blocking_pdbs() {
    let f = fleet();
    // A node with two or more pods of an app whose PDB allows one disruption.
    let name = f
        .node_ids()
        .find(|n| {
            f.pods_on_node(*n)
                .iter()
                .filter(|p| f.pod(**p).is_some_and(|p| f.str_of(p.app) == "vllm-llama3-8b"))
                .count()
                >= 2
        })
        .map(|n| f.str_of(f.node(n).unwrap().name).to_string())
        .expect("a node with two vllm replicas");
    let plan = plan(&f, &OpRequest::Drain { node: name, force: false }).unwrap();
    assert!(
        plan.warnings.iter().any(|w| w.contains("PodDisruptionBudget inference-prod/vllm-llama3-8b-pdb")),
        "{:?}",
        plan.warnings
    );
}

#[test]
fn unknown_nodes_are_clear_errors() {
    let f = fleet();
    let e = plan(&f, &OpRequest::Cordon { node: "ghost".into() }).unwrap_err();
    assert!(e.to_string().contains("\"ghost\" is not in the fleet"), "{e}");
    let e = plan(&f, &OpRequest::Drain { node: "ghost".into(), force: false }).unwrap_err();
    assert!(matches!(e, PlanError::NodeNotFound(_)));
}

fn gpu_quota(f: &Fleet, tenant: &str) -> QuotaKey {
    let t = f.tenant(f.tenant_by_name(tenant).unwrap()).unwrap();
    let q = t.quotas.iter().filter_map(|q| f.quota(*q)).find(|q| f.is_gpu_resource(q.resource)).unwrap();
    QuotaKey {
        source: source_spec(f, &q.source),
        resource: f.str_of(q.resource).to_string(),
        field: Default::default(),
    }
}

#[test]
fn quota_values_are_validated_with_messages() {
    let f = fleet();
    let key = gpu_quota(&f, "vision");
    let set = |v: &str| plan(&f, &OpRequest::SetQuota { tenant: "vision".into(), quota: key.clone(), value: v.into() });
    let cases = [
        ("abc", "is not a quantity"),
        ("-1", "is negative"),
        ("1.5", "is not a whole number"),
        ("", "quantity"),
        ("10Gix", "unknown suffix"),
    ];
    for (input, want) in cases {
        let e = set(input).expect_err(input).to_string();
        assert!(e.to_lowercase().contains(want), "{input:?}: {e}");
    }
    let ok = set("40").unwrap();
    let PlanDetail::Quota(q) = &ok.detail else { panic!() };
    assert_eq!(q.new.value(), 40);
    assert_eq!(q.expected_version, "1");
    let low = set("0").unwrap();
    assert!(low.warnings.iter().any(|w| w.contains("below what vision uses now")), "{:?}", low.warnings);
    let e =
        plan(&f, &OpRequest::SetQuota { tenant: "nobody".into(), quota: key.clone(), value: "1".into() }).unwrap_err();
    assert!(matches!(e, PlanError::TenantNotFound(_)));
    let e = plan(
        &f,
        &OpRequest::SetQuota {
            tenant: "vision".into(),
            quota: QuotaKey {
                source: QuotaSourceSpec::ResourceQuota { namespace: "x".into(), name: "y".into() },
                resource: key.resource.clone(),
                field: Default::default(),
            },
            value: "1".into(),
        },
    )
    .unwrap_err();
    assert!(matches!(e, PlanError::QuotaNotFound { .. }));
}

#[test]
fn reslice_validates_layouts_against_the_gpu_model() {
    let f = fleet();
    let h100 = f
        .node_ids()
        .map(|n| f.node(n).unwrap())
        .find(|n| n.gpu_model == Some(crate::mig::GpuModel::H100_80GB) && n.ready)
        .map(|n| f.str_of(n.name).to_string())
        .unwrap();
    let r =
        |layout: &str, gpus: Vec<u8>| plan(&f, &OpRequest::Reslice { node: h100.clone(), gpus, layout: layout.into() });
    let e = r("3g.40gb,3g.40gb,1g.10gb", vec![0]).unwrap_err();
    assert!(matches!(e, PlanError::BadLayout(_)), "{e}");
    let e = r("1g.18gb", vec![0]).unwrap_err();
    assert!(e.to_string().contains("1g.18gb"), "{e}");
    let e = r("", vec![0]).unwrap_err();
    assert!(e.to_string().contains("no layout given"), "{e}");
    let e = r("all-balanced", vec![9]).unwrap_err();
    assert!(matches!(e, PlanError::NoSuchGpu { index: 9, .. }), "{e}");
    let ok = r("all-balanced", vec![]).unwrap();
    let PlanDetail::Reslice(rp) = &ok.detail else { panic!() };
    assert_eq!(rp.config_name, "all-balanced");
    assert!(rp.custom_config.is_none());
    assert_eq!(rp.gpus.len(), 8);
    assert!(
        rp.capacity_after.iter().any(|(res, n)| res == "nvidia.com/mig-3g.40gb" && *n == 8),
        "{:?}",
        rp.capacity_after
    );
    // One GPU: a generated per-device config, the others keep their layout.
    let one = r("3g.40gb,2g.20gb,1g.10gb,1g.10gb", vec![2]).unwrap();
    let PlanDetail::Reslice(rp) = &one.detail else { panic!() };
    let yaml = rp.custom_config.as_deref().expect("per-GPU config");
    assert!(
        yaml.contains("devices: [2]") && yaml.contains("\"3g.40gb\": 1") && yaml.contains("devices: [0]"),
        "{yaml}"
    );
    assert!(one.effects.iter().any(|e| e.contains("add mig-parted config")));
}

#[test]
fn cordon_preview_says_what_changes() {
    let f = fleet();
    let name = f.str_of(f.node(f.node_ids().next().unwrap()).unwrap().name).to_string();
    let p = plan(&f, &OpRequest::Cordon { node: name.clone() }).unwrap();
    assert!(p.effects[0].contains("unschedulable=true"));
    assert_eq!(p.title, format!("Cordon node {name}"));
    let u = plan(&f, &OpRequest::Uncordon { node: name }).unwrap();
    assert!(u.warnings.iter().any(|w| w.contains("already schedulable")));
}

#[test]
fn quota_fields_are_named_before_the_value() {
    use super::QuotaField::*;
    assert_eq!(QuotaField::split("12"), (Hard, "12"));
    assert_eq!(QuotaField::split(" borrowingLimit=4 "), (BorrowingLimit, "4"));
    assert_eq!(QuotaField::split("lending 2"), (LendingLimit, "2"));
    assert_eq!(QuotaField::split("nominalQuota: 16"), (Hard, "16"));
    assert_eq!(QuotaField::split("lendinglimit="), (LendingLimit, ""));
    // Anything else is a value, and the Quantity parser names what is wrong with it.
    assert_eq!(QuotaField::split("12 Gi"), (Hard, "12 Gi"));
}

fn kueue_tenant(f: &Fleet) -> (String, QuotaKey) {
    let q = f
        .quotas
        .values()
        .find(|q| matches!(q.source, crate::model::QuotaSource::ClusterQueue { .. }))
        .expect("the demo has Kueue tenants");
    let tenant = f.str_of(f.tenant(q.tenant).unwrap().name).to_string();
    (
        tenant,
        QuotaKey {
            source: source_spec(f, &q.source),
            resource: f.str_of(q.resource).to_string(),
            field: QuotaField::Hard,
        },
    )
}

#[test]
fn cluster_queue_limits_plan_with_kueues_rules() {
    let f = fleet();
    let (tenant, key) = kueue_tenant(&f);
    let set = |field: QuotaField, v: &str| {
        plan(
            &f,
            &OpRequest::SetQuota { tenant: tenant.clone(), quota: QuotaKey { field, ..key.clone() }, value: v.into() },
        )
    };
    let b = set(QuotaField::BorrowingLimit, "4").unwrap();
    assert!(b.can_execute());
    assert!(b.title.contains("borrowingLimit"), "{}", b.title);
    assert!(b.effects[0].contains("borrowingLimit unset → 4"), "{:?}", b.effects);
    assert!(b.warnings.iter().any(|w| w.contains("cohort")), "{:?}", b.warnings);
    let PlanDetail::Quota(q) = &b.detail else { panic!() };
    assert_eq!((q.old, q.new.value()), (None, 4));
    // Lending more than the nominal quota: Kueue refuses it, so the plan is blocked.
    let l = set(QuotaField::LendingLimit, "100000").unwrap();
    assert!(!l.can_execute());
    assert!(l.blockers[0].contains("more than the nominalQuota"), "{:?}", l.blockers);
    let e = set(QuotaField::LendingLimit, "-1").unwrap_err();
    assert!(e.to_string().contains("negative"), "{e}");
    // A ResourceQuota has no such limits.
    let rq = gpu_quota(&f, "vision");
    let e = plan(
        &f,
        &OpRequest::SetQuota {
            tenant: "vision".into(),
            quota: QuotaKey { field: QuotaField::LendingLimit, ..rq },
            value: "2".into(),
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("belongs to Kueue ClusterQueues"), "{e}");
}

/// A pod on `node` as a feed would send it.
fn pod_on(node: &str, name: &str, phase: Phase, owner: Owner, gpus: u16) -> crate::model::PodSpec {
    crate::model::PodSpec {
        namespace: "batch".into(),
        name: name.into(),
        node: Some(node.into()),
        phase,
        created: 0,
        started: None,
        owner,
        owner_name: String::new(),
        app: name.into(),
        empty_dir: false,
        gpus,
        gpus_renamed: false,
        mig: vec![],
        dra: vec![],
        claim_templates: Vec::new(),
        bound_gpus: vec![],
        bound_mig: vec![],
        deletion: None,
        container_waiting: None,
        restarts: Default::default(),
    }
}

fn h100_node(f: &Fleet) -> String {
    f.node_ids()
        .map(|n| f.node(n).unwrap())
        .find(|n| n.gpu_model == Some(crate::mig::GpuModel::H100_80GB) && n.ready)
        .map(|n| f.str_of(n.name).to_string())
        .expect("the demo has a ready H100 node")
}

/// "evict 8 pods (12 GPUs)": (8, 12).
fn evict_line(p: &Plan) -> (usize, usize) {
    let line = p.effects.iter().find(|e| e.starts_with("evict ")).expect("an evict line");
    let nums: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .take(2)
        .map(|s| s.parse().unwrap())
        .collect();
    (nums[0], nums.get(1).copied().unwrap_or(0))
}

#[test]
fn finished_pods_hold_no_gpus_in_drain_and_reslice_previews() {
    let mut f = fleet();
    let node = h100_node(&f);
    let drain = OpRequest::Drain { node: node.clone(), force: false };
    let (pods, gpus) = evict_line(&plan(&f, &drain).unwrap());
    // Two Job pods that finished on the node, each having asked for 2 GPUs; one names the
    // GPU it had, as a DRA claim or the simulator would.
    let gpu0 = f.node(f.node_by_name(&node).unwrap()).unwrap().gpus[0];
    let uuid = f.str_of(f.gpu(gpu0).unwrap().uuid).to_string();
    f.apply(crate::model::Delta::PodUpsert(pod_on(&node, "done-0", Phase::Succeeded, Owner::Job, 2)));
    let mut bound = pod_on(&node, "done-1", Phase::Failed, Owner::Job, 2);
    bound.bound_gpus = vec![uuid];
    f.apply(crate::model::Delta::PodUpsert(bound));
    let p = plan(&f, &drain).unwrap();
    assert_eq!(evict_line(&p), (pods + 2, gpus), "finished pods are evicted but hold nothing: {:?}", p.effects);
    assert!(p.effects.contains(&"  evict batch/done-0 (Succeeded: holds nothing)".to_string()), "{:?}", p.effects);
    for gpus in [vec![0], vec![]] {
        let r = plan(&f, &OpRequest::Reslice { node: node.clone(), gpus, layout: "all-balanced".into() }).unwrap();
        let PlanDetail::Reslice(r) = &r.detail else { panic!("a reslice") };
        let held: Vec<_> = r.pods.iter().filter(|p| p.name.starts_with("done-") && p.gpus > 0).collect();
        assert!(held.is_empty(), "finished pods hold none of the GPUs being resliced: {held:?}");
    }
}

#[test]
fn drain_preview_waits_for_terminating_pods_and_says_what_keeps_them() {
    let mut f = fleet();
    let node = h100_node(&f);
    // Deleted by someone 2 minutes ago, held by a finalizer; no controller, but it is going
    // anyway: nothing to refuse.
    let mut held = pod_on(&node, "held", Phase::Terminating, Owner::None, 1);
    held.deletion = Some(crate::model::Deletion {
        since: f.now - 125_000,
        grace_secs: Some(30),
        finalizers: vec!["example.com/hold".into()],
        stopped: false,
    });
    f.apply(crate::model::Delta::PodUpsert(held));
    let p = plan(&f, &OpRequest::Drain { node: node.clone(), force: false }).unwrap();
    let PlanDetail::Drain(d) = &p.detail else { panic!("a drain") };
    let held = d.pods.iter().find(|p| p.name == "held").expect("listed");
    let PodAction::Wait(why) = &held.action else { panic!("waited for, not {:?}", held.action) };
    assert!(why.starts_with("terminating since 2m, finalizers: example.com/hold"), "{why}");
    assert!(d.to_wait().any(|p| p.name == "held") && !d.to_evict().any(|p| p.name == "held"));
    assert!(
        p.effects.iter().any(|e| e.starts_with("wait for 1 pod (1 GPU) already terminating")),
        "the preview says the drain waits for it: {:?}",
        p.effects
    );
    assert!(
        p.effects.iter().any(|e| e.starts_with("  wait for batch/held (1 GPU): terminating since 2m, finalizers: example.com/hold")),
        "{:?}",
        p.effects
    );
    assert!(
        p.warnings.iter().any(|w| w.contains("batch/held stays until its finalizer example.com/hold is removed")),
        "{:?}",
        p.warnings
    );
    assert!(!p.blockers.iter().any(|b| b.contains("batch/held")), "{:?}", p.blockers);
    assert!(!p.effects.iter().any(|e| e.starts_with("leave") && e.contains("finished")), "{:?}", p.effects);
}

#[test]
fn a_whole_node_reslice_waits_for_pods_still_terminating_there() {
    let mut f = fleet();
    let node = h100_node(&f);
    let mut held = pod_on(&node, "held", Phase::Terminating, Owner::ReplicaSet, 1);
    held.deletion =
        Some(crate::model::Deletion { since: f.now - 5_000, grace_secs: Some(30), finalizers: vec![], stopped: false });
    f.apply(crate::model::Delta::PodUpsert(held));
    let p = plan(&f, &OpRequest::Reslice { node, gpus: vec![], layout: "all-balanced".into() }).unwrap();
    let PlanDetail::Reslice(r) = &p.detail else { panic!("a reslice") };
    let held = r.pods.iter().find(|p| p.name == "held").expect("its pods include the terminating one");
    assert!(matches!(&held.action, PodAction::Wait(w) if w.contains("grace period")), "{:?}", held.action);
    assert!(
        p.effects.iter().any(|e| e.starts_with("  wait for batch/held to be gone: terminating since <1m")),
        "{:?}",
        p.effects
    );
}

/// A running pod of `app` on a ready node that holds a device the fleet can name.
fn holder(f: &Fleet, app: &str, pred: impl Fn(&crate::model::Pod) -> bool) -> (String, String) {
    f.pod_ids()
        .filter_map(|p| f.pod(p))
        .filter(|p| f.str_of(p.app) == app && p.phase == Phase::Running && p.deletion.is_none())
        .filter(|p| !p.bound_gpus.is_empty() || !p.bound_mig.is_empty())
        .find(|p| pred(p))
        .map(|p| (f.str_of(p.namespace).to_string(), p.name.to_string()))
        .unwrap_or_else(|| panic!("the demo runs a pod of {app} holding a device"))
}

fn reclaim(f: &Fleet, (namespace, pod): &(String, String)) -> Result<Plan, PlanError> {
    plan(f, &OpRequest::Reclaim { namespace: namespace.clone(), pod: pod.clone() })
}

#[test]
fn reclaim_scales_a_deployment_down_with_the_pod_marked_first() {
    let f = fleet();
    let pod = holder(&f, "ft-debug", |_| true);
    let p = reclaim(&f, &pod).unwrap();
    assert!(p.can_execute(), "{:?}", p.blockers);
    let PlanDetail::Reclaim(r) = &p.detail else { panic!("reclaim detail") };
    let rs = pod.1.rsplit_once('-').unwrap().0.to_string();
    assert_eq!(
        r.action,
        ReclaimAction::ScaleDown { kind: Workload::Deployment, name: "ft-debug".into(), rs: Some(rs.clone()) }
    );
    assert_eq!(p.target, "Deployment llm-finetune-dev/ft-debug");
    assert!(p.effects.iter().any(|e| e.contains(reclaim::DELETION_COST) && e.contains(&rs)), "{:?}", p.effects);
    assert!(p.effects.iter().any(|e| e.starts_with("scale Deployment llm-finetune-dev/ft-debug down by one")));
    assert!(p.effects.iter().any(|e| e.starts_with("frees GPU ")), "names the GPUs freed: {:?}", p.effects);
    assert!(p.effects.last().unwrap().starts_with("deadline: "));
    // The preview's figure for the replicas is the pods the fleet shows of the Deployment,
    // across its ReplicaSets (`ft-debug-<hash>`; not `ft-debug-ts-<hash>`'s).
    let have = f
        .pod_ids()
        .filter_map(|q| f.pod(q))
        .filter(|q| {
            q.owner == Owner::ReplicaSet && f.str_of(q.owner_name).rsplit_once('-').map(|x| x.0) == Some("ft-debug")
        })
        .count();
    assert!(have > 1, "the demo's ft-debug Deployment has several pods: {have}");
    assert_eq!(r.siblings + 1, have);
    assert!(p.effects.iter().any(|e| e.contains(&format!("({have} → {}", have - 1))), "{:?}", p.effects);
}

#[test]
fn reclaim_says_whether_the_devices_are_idle() {
    let f = fleet();
    let idle = f
        .pod_ids()
        .filter_map(|p| f.pod(p))
        .find(|p| p.phase == Phase::Running && p.bound_gpus.iter().any(|g| f.gpu(*g).is_some_and(|g| g.idle_allocated)))
        .map(|p| (f.str_of(p.namespace).to_string(), p.name.to_string()))
        .expect("an idle-but-allocated pod in the demo");
    let p = reclaim(&f, &idle).unwrap();
    assert!(p.effects.iter().any(|e| e.starts_with("frees") && e.contains("(idle ")), "{:?}", p.effects);
    let busy = f
        .pod_ids()
        .filter_map(|p| f.pod(p))
        .find(|p| {
            p.phase == Phase::Running
                && p.bound_gpus.len() == 1
                && p.bound_gpus.iter().all(|g| f.gpu(*g).is_some_and(|g| g.busy && !g.idle_allocated))
        })
        .map(|p| (f.str_of(p.namespace).to_string(), p.name.to_string()))
        .expect("a busy pod in the demo");
    let p = reclaim(&f, &busy).unwrap();
    assert!(
        p.warnings.iter().any(|w| w == "the device is busy: reclaiming stops work in progress"),
        "{:?}",
        p.warnings
    );
    assert!(p.effects.iter().any(|e| e.contains("(busy ")), "{:?}", p.effects);
}

#[test]
fn reclaim_of_a_statefulset_pod_only_for_its_highest_ordinal() {
    let f = fleet();
    let ordinal = |n: &str| n.rsplit('-').next().and_then(|o| o.parse::<u32>().ok()).unwrap();
    let set: Vec<(String, String)> = f
        .pod_ids()
        .filter_map(|p| f.pod(p))
        .filter(|p| f.str_of(p.app) == "pretrain-llama-70b")
        .map(|p| (f.str_of(p.namespace).to_string(), p.name.to_string()))
        .collect();
    let top = set.iter().max_by_key(|(_, n)| ordinal(n)).unwrap().clone();
    let low = holder(&f, "pretrain-llama-70b", |p| ordinal(&p.name) < ordinal(&top.1));
    let refused = reclaim(&f, &low).unwrap();
    assert!(!refused.can_execute());
    assert!(refused.blockers[0].contains(&format!("highest ordinal first ({})", top.1)), "{:?}", refused.blockers);
    if f.pod(f.pod_by_name(&top.0, &top.1).unwrap()).is_some_and(|p| !p.bound_gpus.is_empty()) {
        let ok = reclaim(&f, &top).unwrap();
        assert!(ok.can_execute(), "{:?}", ok.blockers);
        let PlanDetail::Reclaim(r) = &ok.detail else { panic!() };
        assert!(matches!(&r.action, ReclaimAction::ScaleDown { kind: Workload::StatefulSet, rs: None, .. }));
    }
}

#[test]
fn reclaim_suspends_a_job_and_evicts_a_pod_without_owner() {
    let f = fleet();
    let job = holder(&f, "ft-mistral-lora", |_| true);
    let p = reclaim(&f, &job).unwrap();
    let PlanDetail::Reclaim(r) = &p.detail else { panic!() };
    let owner = job.1.rsplit_once('-').unwrap().0.to_string();
    assert_eq!(r.action, ReclaimAction::Suspend { job: owner.clone() });
    assert!(
        p.effects[0].starts_with(&format!("suspend Job llm-finetune/{owner} (spec.suspend: true)")),
        "{:?}",
        p.effects
    );
    let nb = holder(&f, "jupyter", |_| true);
    let p = reclaim(&f, &nb).unwrap();
    let PlanDetail::Reclaim(r) = &p.detail else { panic!() };
    assert_eq!(r.action, ReclaimAction::Evict);
    assert_eq!(p.target, format!("pod {}/{}", nb.0, nb.1));
}

#[test]
fn reclaim_refuses_what_it_cannot_free() {
    let mut f = fleet();
    let e = reclaim(&f, &("ml".into(), "nope".into())).unwrap_err();
    assert!(e.to_string().contains("pod ml/nope is not in the fleet"), "{e}");
    // A pending pod holds nothing yet.
    let mut pending = pod_on("x", "waiting-1", Phase::Pending, Owner::None, 2);
    pending.node = None;
    f.apply(crate::model::Delta::PodUpsert(pending));
    let e = reclaim(&f, &("batch".into(), "waiting-1".into())).unwrap_err();
    assert!(e.to_string().contains("is not scheduled: it holds no GPU yet"), "{e}");
    // A DaemonSet's pod holding a GPU: its controller puts it back on the node.
    let node = h100_node(&f);
    let gpu = f
        .node(f.node_by_name(&node).unwrap())
        .unwrap()
        .gpus
        .iter()
        .filter_map(|g| f.gpu(*g))
        .map(|g| f.str_of(g.uuid).to_string())
        .next()
        .unwrap();
    let mut ds = pod_on(&node, "gpu-burn-x1", Phase::Running, Owner::DaemonSet, 1);
    ds.owner_name = "gpu-burn".into();
    ds.bound_gpus = vec![gpu];
    f.apply(crate::model::Delta::PodUpsert(ds));
    let p = reclaim(&f, &("batch".into(), "gpu-burn-x1".into())).unwrap();
    assert!(!p.can_execute());
    assert!(p.blockers[0].contains("belongs to a DaemonSet"), "{:?}", p.blockers);
}

#[test]
fn previews_warn_before_changing_what_gitops_owns() {
    let mut f = fleet();
    // The demo keeps its first ResourceQuota in Argo CD and its ClusterQueues in Flux.
    let rq = f
        .quota_ids()
        .filter_map(|q| f.quota(q))
        .find_map(|q| match &q.source {
            crate::model::QuotaSource::ResourceQuota { namespace, name } => Some((q.tenant, *namespace, *name)),
            _ => None,
        })
        .expect("a ResourceQuota");
    let tenant = f.str_of(f.tenant(rq.0).unwrap().name).to_string();
    let (ns, name) = (f.str_of(rq.1).to_string(), f.str_of(rq.2).to_string());
    let owned: Vec<&String> = f.gitops.keys().collect();
    assert!(owned.contains(&&format!("resourcequota/{ns}/{name}")), "{owned:?}");
    let key = gpu_quota(&f, &tenant);
    let p = plan(&f, &OpRequest::SetQuota { tenant: tenant.clone(), quota: key.clone(), value: "40".into() }).unwrap();
    let w = p.warnings.iter().find(|w| w.contains("Argo CD")).unwrap_or_else(|| panic!("{:?}", p.warnings));
    assert!(w.contains(&format!("ResourceQuota {ns}/{name} is managed by Argo CD application `gpu-quotas`")), "{w}");
    assert!(w.contains("next sync puts it back") && w.contains("change it in Git"), "{w}");
    assert!(p.can_execute(), "a warning, not a blocker");
    // A ClusterQueue the demo keeps in Flux: its hold preview says so.
    let (_, cq) = kueue_tenant(&f);
    let QuotaSourceSpec::ClusterQueue { queue, .. } = &cq.source else { panic!("a ClusterQueue") };
    let hold = plan(&f, &OpRequest::QueueStop { queue: queue.clone(), policy: StopPolicy::Hold }).unwrap();
    assert!(
        hold.warnings
            .iter()
            .any(|w| w.contains("Flux Kustomization `flux-system/kueue-queues`") && w.contains("spec.stopPolicy")),
        "{:?}",
        hold.warnings
    );
    // Ownership gone (the label was removed): no warning.
    f.apply(crate::model::Delta::Managed { object: format!("resourcequota/{ns}/{name}"), owner: None });
    let p = plan(&f, &OpRequest::SetQuota { tenant, quota: key, value: "40".into() }).unwrap();
    assert!(!p.warnings.iter().any(|w| w.contains("managed by")), "{:?}", p.warnings);
    // A node a tool marks: cordon and reslice previews name it.
    let node = f.str_of(f.node(f.node_ids().next().unwrap()).unwrap().name).to_string();
    f.apply(crate::model::Delta::Managed {
        object: format!("node/{node}"),
        owner: crate::model::GitOpsOwner::detect([("app.kubernetes.io/instance", "nodes")], []),
    });
    let c = plan(&f, &OpRequest::Cordon { node: node.clone() }).unwrap();
    assert!(
        c.warnings
            .iter()
            .any(|w| w.contains(&format!("Node {node} is managed by Argo CD application or Helm release `nodes`"))),
        "{:?}",
        c.warnings
    );
}
