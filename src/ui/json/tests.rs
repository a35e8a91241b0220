//! The typed snapshot of every view on the demo (seed 42), and the quota rows' scope (issue
//! 12 item 2) in both the table and the JSON.

use serde_json::Value;

use super::*;
use crate::quantity::Format as QFormat;
use crate::testing::demo_fleet;
use crate::ui::export::{Format, rows as render_rows};

fn demo() -> Fleet {
    demo_fleet(42, 48, 20, Thresholds::default()).1
}

fn doc(f: &Fleet, v: ViewKind) -> Value {
    let text = render_rows(f, v, "", Format::Json);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} JSON does not parse: {e}\n{text}", v.name()))
}

fn rows(d: &Value) -> &Vec<Value> {
    d["rows"].as_array().expect("rows is an array")
}

/// Every key with a unit in its name holds a number or null, and no string anywhere looks
/// like a number with its unit glued on (`"41%"`, `"700W"`, `"3/8"`, `"12s"`).
fn assert_typed(v: &Value, path: &str) {
    const UNITS: [&str; 6] = ["_pct", "_w", "_bytes", "_c", "_s", "_ms"];
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{path}.{k}");
                if UNITS.iter().any(|u| k.ends_with(u)) {
                    assert!(x.is_number() || x.is_null(), "{p} should be a number or null: {x}");
                }
                if k.ends_with("_measured")
                    || k.ends_with("_measured_gpus")
                    || ["used", "total", "hard", "requested", "count"].contains(&k.as_str())
                {
                    assert!(x.is_number() || x.is_null(), "{p} should be a number or null: {x}");
                }
                if k != "version" {
                    assert_typed(x, &p);
                }
            }
        }
        Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| assert_typed(x, &format!("{path}[{i}]"))),
        Value::String(s) => {
            let body = s.trim_end_matches(['%', 'W', 'C', 'G', 's', 'm', 'h', 'd']);
            let numberish = !body.is_empty()
                && body.split('/').all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_digit()));
            assert!(!numberish, "{path} is a number in a string: {s:?}");
        }
        _ => {}
    }
}

#[test]
fn every_view_is_versioned_and_typed() {
    let mut f = demo();
    f.ops.push(OpStatus {
        id: 7,
        title: "drain h100-0008".into(),
        target: "h100-0008".into(),
        state: OpState::Blocked("PDB vllm-pdb allows 0 disruptions".into()),
        step: "evict".into(),
        done: 2,
        total: 5,
        started: f.now.saturating_sub(90_000),
        updated: f.now,
        log: vec![],
    });
    // The simulator makes no ComputeDomains: one, so the domains view has a row to type.
    f.apply(Delta::DomainUpsert(ComputeDomainSpec {
        namespace: "imex".into(),
        name: "train".into(),
        num_nodes: 2,
        status: "NotReady".into(),
        nodes: vec![DomainNode { name: "h100-0000".into(), status: "NotReady".into(), clique: "c.0".into() }],
        claim_template: "train-channel".into(),
        created: f.now.saturating_sub(5_000),
    }));
    for v in ViewKind::ALL {
        let d = doc(&f, v);
        assert_eq!(d["schema"], SCHEMA);
        assert_eq!(d["view"], v.name());
        assert!(d["generated_at_ms"].is_u64());
        assert!(!rows(&d).is_empty(), "{} has rows on the demo", v.name());
        assert_typed(&d, v.name());
    }
    let ops = doc(&f, ViewKind::Ops);
    let op = &rows(&ops)[0];
    assert_eq!(op["progress"], serde_json::json!({ "done": 2, "total": 5 }));
    assert_eq!(op["state"], "blocked");
    assert_eq!(op["reason"], "PDB vllm-pdb allows 0 disruptions");
    assert_eq!(op["age_s"], 90);
}

/// The table's text of a cell, for comparing with the typed value.
fn cell(f: &Fleet, v: ViewKind, id: RowId, col: usize) -> String {
    tables::columns(v)[col].cell_of(f, id).0.trim().to_string()
}

#[test]
fn fleet_and_gpu_rows_carry_the_tables_numbers() {
    let f = demo();
    let d = doc(&f, ViewKind::Fleet);
    let ids = tables::rows(&f, ViewKind::Fleet, "", None, false);
    assert_eq!(rows(&d).len(), ids.len());
    for (r, id) in rows(&d).iter().zip(&ids) {
        assert_eq!(r["name"], cell(&f, ViewKind::Fleet, *id, 0));
        assert_eq!(r["gpus"].to_string(), cell(&f, ViewKind::Fleet, *id, 3));
        let a = &r["alloc_gpus"];
        assert_eq!(format!("{}/{}", a["used"], a["total"]), cell(&f, ViewKind::Fleet, *id, 4));
        assert_eq!(r["pods"].to_string(), cell(&f, ViewKind::Fleet, *id, 11));
        // The demo measures every GPU: figures, never null.
        assert!(r["util_pct"].is_u64() && r["power_w"].is_u64(), "{r}");
        assert_eq!(format!("{}W", r["power_w"]), cell(&f, ViewKind::Fleet, *id, 8));
        assert_eq!(format!("{}%", r["mem_used_pct"]), cell(&f, ViewKind::Fleet, *id, 7));
    }

    let d = doc(&f, ViewKind::Gpus);
    assert_eq!(rows(&d).len(), f.gpu_ids().count(), "one row per GPU, instances inside");
    let mig = rows(&d).iter().find(|r| r["mode"] == "mig").expect("the demo has MIG GPUs");
    let inst = mig["instances"].as_array().expect("instances");
    assert!(!inst.is_empty());
    let used = inst.iter().filter(|i| !i["pod"].is_null()).count();
    assert_eq!(mig["mig_alloc"]["used"], used);
    assert_eq!(mig["mig_alloc"]["total"], inst.len());
    for i in inst {
        assert!(i["profile"].is_string() && i["start"].is_u64() && i["mem_total_bytes"].is_u64(), "{i}");
    }
    let full = rows(&d).iter().find(|r| r["mode"] == "full").expect("whole GPUs");
    assert_eq!(full["instances"], serde_json::json!([]));
    assert!(full["mig_alloc"].is_null());
    assert_eq!(full["mem_total_bytes"], 81920u64 * 1024 * 1024, "{full}");
}

#[test]
fn unknown_telemetry_is_null_not_zero() {
    // No telemetry source at all: a fleet from the demo's structure only.
    let (mut sim, _) = demo_fleet(42, 8, 0, Thresholds::default());
    let mut f = Fleet::default();
    for d in sim.initial_deltas() {
        if !matches!(d, Delta::Telemetry(_)) {
            f.apply(d);
        }
    }
    assert!(f.gpus.values().all(|g| g.last_sample_at.is_none()), "no GPU was sampled");
    let d = doc(&f, ViewKind::Fleet);
    for r in rows(&d) {
        for k in ["util_pct", "mem_used_pct", "power_w", "idle_allocated"] {
            assert!(r[k].is_null(), "{k} of {}: {}", r["name"], r[k]);
        }
        assert_eq!(r["util_measured_gpus"], 0);
    }
    let d = doc(&f, ViewKind::Gpus);
    for r in rows(&d) {
        for k in ["util_pct", "mem_used_bytes", "power_w", "temp_c"] {
            assert!(r[k].is_null(), "{k} of {}/{}: {}", r["node"], r["gpu"], r[k]);
        }
        for i in r["instances"].as_array().into_iter().flatten() {
            assert!(i["util_pct"].is_null() && i["mem_used_bytes"].is_null(), "{i}");
        }
    }
    let d = doc(&f, ViewKind::Tenants);
    assert!(!rows(&d).is_empty());
    for r in rows(&d) {
        assert!(r["busy"].is_null() && r["busy_pct"].is_null() && r["idle_allocated"].is_null(), "{r}");
        assert_eq!(r["busy_measured"], 0);
    }
}

fn pod(ns: &str, name: &str, phase: Phase, gpus: u16, dra_class: Option<&str>) -> PodSpec {
    PodSpec {
        namespace: ns.into(),
        name: name.into(),
        node: None,
        phase,
        created: 0,
        started: None,
        owner: Owner::Job,
        owner_name: String::new(),
        app: "app".into(),
        empty_dir: false,
        gpus,
        gpus_renamed: false,
        mig: vec![],
        dra: dra_class
            .map(|c| DraClaimSpec { claim: format!("{name}-gpu"), device_class: c.into(), count: 1, allocated: None })
            .into_iter()
            .collect(),
        claim_templates: Vec::new(),
        bound_gpus: vec![],
        bound_mig: vec![],
        deletion: None,
        container_waiting: None,
        restarts: Default::default(),
    }
}

fn quota(tenant: &str, ns: &str, resource: &str, hard: i64, used: i64) -> Delta {
    Delta::QuotaUpsert(QuotaSpec {
        tenant: tenant.into(),
        source: QuotaSourceSpec::ResourceQuota { namespace: ns.into(), name: "gpu-quota".into() },
        resource: resource.into(),
        hard: Quantity::from_int(hard, QFormat::DecimalSI),
        used: Quantity::from_int(used, QFormat::DecimalSI),
        version: "1".into(),
        borrowing_limit: None,
        lending_limit: None,
    })
}

/// The two rows the issue reports: recsys's whole-GPU quota charged with its DRA pods
/// (REQ 226, USE% 5650 %), and llm-finetune's USE% from the tenant's requests over all its
/// namespaces against one namespace's hard limit (74 % instead of 60 of 177 = 34 %).
#[test]
fn quota_rows_count_their_own_namespace_and_resource() {
    let mut f = Fleet::default();
    let ns = |n: &[&str]| n.iter().map(|s| s.to_string()).collect();
    f.apply(Delta::TenantUpsert(TenantSpec {
        name: "llm-finetune".into(),
        namespaces: ns(&["llm-finetune", "llm-finetune-dev"]),
        source: "label".into(),
    }));
    f.apply(Delta::TenantUpsert(TenantSpec {
        name: "recsys".into(),
        namespaces: ns(&["recsys"]),
        source: "label".into(),
    }));
    for i in 0..15 {
        f.apply(Delta::PodUpsert(pod("llm-finetune", &format!("ft-{i}"), Phase::Running, 4, None)));
    }
    f.apply(Delta::PodUpsert(pod("llm-finetune", "ft-done", Phase::Succeeded, 4, None)));
    for i in 0..71 {
        f.apply(Delta::PodUpsert(pod("llm-finetune-dev", &format!("dbg-{i}"), Phase::Running, 1, None)));
    }
    for i in 0..226 {
        f.apply(Delta::PodUpsert(pod("recsys", &format!("ranker-{i}"), Phase::Running, 0, Some("gpu.nvidia.com"))));
    }
    f.apply(quota("llm-finetune", "llm-finetune", "requests.nvidia.com/gpu", 177, 60));
    f.apply(quota("recsys", "recsys", "requests.nvidia.com/gpu", 4, 0));
    f.apply(quota("recsys", "recsys", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices", 300, 226));

    let find = |ns: &str, res: &str| -> RowId {
        f.quota_ids()
            .find(|i| {
                f.quota(*i).is_some_and(|q| {
                    f.str_of(q.resource) == res
                        && matches!(q.source, QuotaSource::ResourceQuota { namespace, .. } if f.str_of(namespace) == ns)
                })
            })
            .map(|i| RowId::Quota(i.0))
            .expect("the quota")
    };
    let q = ViewKind::Quotas;
    let ft = find("llm-finetune", "requests.nvidia.com/gpu");
    assert_eq!((cell(&f, q, ft, 4), cell(&f, q, ft, 5), cell(&f, q, ft, 7)), ("60".into(), "60".into(), "34%".into()));
    let rs = find("recsys", "requests.nvidia.com/gpu");
    assert_eq!((cell(&f, q, rs, 5), cell(&f, q, rs, 7)), ("0".into(), "0%".into()));
    assert_eq!(tables::cell(&f, q, rs, "USE%").1, "tenant.ok");
    let dra = find("recsys", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices");
    assert_eq!((cell(&f, q, dra, 5), cell(&f, q, dra, 7)), ("226".into(), "75%".into()));

    let d = doc(&f, q);
    let row = |ns: &str, res: &str| -> Value {
        rows(&d)
            .iter()
            .find(|r| r["source"]["namespace"] == ns && r["resource"] == res)
            .cloned()
            .unwrap_or_else(|| panic!("no row for {ns} {res}"))
    };
    let r = row("llm-finetune", "requests.nvidia.com/gpu");
    assert_eq!((r["hard"].as_i64(), r["used"].as_i64(), r["requested"].as_i64()), (Some(177), Some(60), Some(60)));
    assert_eq!(r["use_pct"], 34);
    assert_eq!(
        r["source"],
        serde_json::json!({ "kind": "ResourceQuota", "namespace": "llm-finetune", "name": "gpu-quota" })
    );
    assert_eq!(row("recsys", "requests.nvidia.com/gpu")["requested"], 0);
    assert_eq!(row("recsys", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices")["requested"], 226);
}

#[test]
fn a_quota_with_nothing_allowed_has_no_percentage() {
    let mut f = Fleet::default();
    f.apply(quota("t", "t", "requests.nvidia.com/gpu", 0, 0));
    f.apply(quota("u", "u", "requests.nvidia.com/gpu", 0, 2));
    let q = ViewKind::Quotas;
    let cells: Vec<(String, &str)> = f.quota_ids().map(|i| tables::cell(&f, q, RowId::Quota(i.0), "USE%")).collect();
    assert_eq!(cells, vec![("-".to_string(), "ui.text.muted"), ("over".to_string(), "tenant.over_quota")]);
    let d = doc(&f, q);
    assert!(rows(&d).iter().all(|r| r["use_pct"].is_null()));
}

#[test]
fn a_quota_at_the_cap_is_ok_not_an_overflow() {
    // Found by tests/fuzz.rs: the tenants view's "near quota" test multiplied the limit by 90,
    // which overflows for a quota near 9223372036854775807 (a panic in debug builds).
    let mut f = Fleet::default();
    f.apply(Delta::PodUpsert(pod("t", "p", Phase::Running, 2, None)));
    f.apply(quota("t", "t", "requests.nvidia.com/gpu", i64::MAX, 2));
    let v = ViewKind::Tenants;
    let cells: Vec<String> = f.tenant_ids().map(|i| tables::cell(&f, v, RowId::Tenant(i), "STATUS").0).collect();
    assert_eq!(cells, vec!["ok".to_string()]);
    assert_eq!(rows(&doc(&f, v)).len(), 1);
}
