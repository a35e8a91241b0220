//! `--dra-alpha`'s shapes as the slices, rules and domains publish them.

use std::collections::BTreeMap;

use super::*;
use crate::kubesim::model::{self, apply_layouts, build_nodes, node_labels, resource_slice};

fn nodes() -> Vec<SimNode> {
    // As the verification runs it: 16 nodes, DRA nodes 3, 7, 11 (MIG) and 15.
    let mut n = build_nodes(7, 16, 4, 0);
    assign(&mut n);
    n
}

fn devices(slice: &Value) -> Vec<Value> {
    slice["spec"]["devices"].as_array().cloned().unwrap_or_default()
}

/// A device's counters (of its one counter set) or capacity, by name: value.
fn map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .into_iter()
        .flatten()
        .map(|(k, c)| (k.clone(), c["value"].as_str().unwrap_or_default().to_string()))
        .collect()
}

#[test]
fn shapes_go_to_the_dra_nodes_in_order() {
    let n = nodes();
    assert!(n[11].gpus.iter().all(|g| g.mig_enabled), "the third DRA node is a MIG node");
    assert_eq!(n[3].alpha.partitionable, [0, 1]);
    assert_eq!((n[7].alpha.capacity, n[11].alpha.driver_taint), (Some(0), Some(7)));
    assert!(n.iter().filter(|x| !x.dra).all(|x| !x.alpha.any()));
    assert!(n[3].gpus[..2].iter().all(|g| !g.mig_enabled));
    assert_eq!(n, nodes(), "deterministic");
    // Without the flag nothing changes.
    assert!(build_nodes(7, 16, 4, 0).iter().all(|x| x.alpha == Alpha::default()));
    // Cliques: nvl-train on the four DRA nodes, nvl-eval on the first two others.
    let clique = |i: usize| node_labels(&n[i], "success").get(labels::GPU_CLIQUE).cloned();
    for i in [3, 7, 11, 15] {
        assert_eq!(clique(i), Some(format!("{NVLINK_CLUSTER}.1")));
    }
    assert_eq!((clique(0), clique(1)), (Some(format!("{NVLINK_CLUSTER}.2")), Some(format!("{NVLINK_CLUSTER}.2"))));
    assert_eq!(clique(2), None);
}

#[test]
fn a_partitionable_gpu_shares_counters_its_partitions_consume_exactly() {
    let n = &nodes()[3];
    let slice = resource_slice(n);
    let typed: Result<k8s_openapi::api::resource::v1::ResourceSlice, _> = serde_json::from_value(slice.clone());
    assert!(typed.is_ok(), "{typed:?}");
    let sets = slice["spec"]["sharedCounters"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        sets.iter().map(|s| s["name"].as_str().unwrap_or_default()).collect::<Vec<_>>(),
        ["gpu-0-counter-set", "gpu-1-counter-set"]
    );
    let devs = devices(&slice);
    assert_eq!(devs.len(), 6 + 2 * 14);
    assert!(devs.len() <= MAX_DEVICES_WITH_COUNTERS);
    let mut names: Vec<&str> = devs.iter().filter_map(|d| d["name"].as_str()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), devs.len(), "unique device names");
    for (gi, set) in sets.iter().enumerate() {
        let have = map(&set["counters"]);
        let mut want: Vec<String> = (0..8).map(|k| format!("memory-slice-{k}")).collect();
        want.push("memory".into());
        want.sort();
        assert_eq!(have.keys().cloned().collect::<Vec<_>>(), want);
        let total: u64 = have["memory"].parse().unwrap_or(0);
        assert!(total >= u64::from(n.model.memory_mib()) << 20);
        let g = &n.gpus[gi];
        let on_gpu = |d: &&Value| d["consumesCounters"][0]["counterSet"] == set["name"];
        let mine: Vec<&Value> = devs.iter().filter(on_gpu).collect();
        assert_eq!(mine.len(), 14, "the whole GPU and 13 partitions");
        // The whole GPU consumes all of it.
        let whole = mine.iter().find(|d| d["name"] == format!("gpu-{gi}")).expect("whole");
        assert_eq!(whole["attributes"]["uuid"]["string"], g.uuid);
        assert_eq!(map(&whole["consumesCounters"][0]["counters"]), have);
        // Each partition: its memory and exactly the slices it occupies, as its capacity says.
        let mut placements = Vec::new();
        for d in mine.iter().filter(|d| d["attributes"]["type"]["string"] == "mig") {
            let take = map(&d["consumesCounters"][0]["counters"]);
            let cap = map(&d["capacity"]);
            let slices: Vec<u8> = (0..8).filter(|k| take.contains_key(&format!("memory-slice-{k}"))).collect();
            let cap_slices: Vec<u8> = (0..8).filter(|k| cap.contains_key(&format!("memorySlice{k}"))).collect();
            assert_eq!(slices, cap_slices, "{}", d["name"]);
            assert_eq!(take["memory"], cap["memory"]);
            let profile = d["attributes"]["profile"]["string"].as_str().unwrap_or_default();
            let id = mig::find_profile(n.model, profile).expect("a catalog profile");
            let p = mig::profile(n.model, id);
            let start = slices[0];
            assert_eq!(slices, (start..start + p.memory_slices).collect::<Vec<_>>());
            assert_eq!(d["name"], partition_device(n.model, gi as u8, &PlacedInstance { profile: id, start }));
            assert_eq!(d["attributes"]["parentUUID"]["string"], g.uuid);
            assert_eq!(d["attributes"]["productName"]["string"], n.model.product_name());
            assert!(d["attributes"]["uuid"]["string"].as_str().is_some_and(|u| u.starts_with("MIG-")));
            placements.push((start, p.memory_slices, take["memory"].parse::<u64>().unwrap_or(u64::MAX)));
        }
        assert_eq!(placements.len(), 13);
        // Partitions that do not share a slice also fit together by memory.
        for a in &placements {
            for b in &placements {
                let apart = a.0 + a.1 <= b.0 || b.0 + b.1 <= a.0;
                if apart {
                    assert!(a.2 + b.2 <= total);
                }
            }
        }
    }
    // The other GPUs are as before.
    assert!(devs.iter().filter(|d| d["consumesCounters"].is_null()).count() == 6);
}

#[test]
fn the_capacity_shared_gpu_is_first_in_its_slice() {
    let n = &nodes()[7];
    let devs = devices(&resource_slice(n));
    let d = &devs[0];
    assert_eq!(d["name"], "gpu-0");
    assert_eq!(d["allowMultipleAllocations"], true);
    let mem = &d["capacity"]["memory"];
    assert_eq!(mem["requestPolicy"]["default"], "10Gi");
    assert_eq!(mem["requestPolicy"]["validRange"]["min"], "1Gi");
    assert_eq!(mem["requestPolicy"]["validRange"]["max"], mem["value"]);
    assert!(devs[1..].iter().all(|d| d["allowMultipleAllocations"].is_null()));
    let typed: Result<k8s_openapi::api::resource::v1::ResourceSlice, _> = serde_json::from_value(resource_slice(n));
    assert!(typed.is_ok());
}

#[test]
fn the_driver_taints_every_device_of_gpu_7_and_the_rule_selects_gpu_6() {
    let all = nodes();
    let n = &all[11];
    let devs = devices(&resource_slice(n));
    let (tainted, clean): (Vec<&Value>, Vec<&Value>) = devs.iter().partition(|d| d["taints"].is_array());
    assert_eq!(tainted.len(), n.gpus[7].instances.len());
    for d in &tainted {
        assert!(d["name"].as_str().is_some_and(|s| s.starts_with("gpu-7-mig-")));
        assert_eq!(d["taints"], json!([{ "key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule" }]));
    }
    assert!(clean.iter().all(|d| !d["name"].as_str().unwrap_or_default().starts_with("gpu-7-")));
    let (pool, device) = rule_target(&all).expect("a target");
    assert_eq!(pool, n.name);
    let first = &n.gpus[6].instances[0];
    let p = mig::profile(n.model, first.placement.profile);
    assert_eq!(device, partition_device(n.model, 6, &first.placement));
    assert!(device.starts_with("gpu-6-mig-") && device.contains(&p.name.replace('.', "")));
    assert!(devs.iter().any(|d| d["name"] == device.as_str()), "the rule names a device of the slice");
    let rule = taint_rule(&pool, &device);
    assert_eq!(rule["metadata"]["name"], TAINT_RULE);
    assert_eq!(rule["metadata"]["labels"][labels::SIMULATED], "true");
    assert_eq!(rule["spec"]["deviceSelector"], json!({ "driver": "gpu.nvidia.com", "pool": pool, "device": device }));
    assert_eq!(rule["spec"]["taint"]["effect"], "NoSchedule");
}

#[test]
fn domains_report_their_nodes_as_the_controller_does() {
    let all = nodes();
    let d = domains(&all);
    assert_eq!(d.iter().map(|d| d.name).collect::<Vec<_>>(), ["nvl-train", "nvl-eval"]);
    let train = domain_status(&d[0]);
    assert_eq!(train["status"]["status"], "Ready");
    let members = train["status"]["nodes"].as_array().cloned().unwrap_or_default();
    assert_eq!(members.len(), 4);
    for (k, (m, i)) in members.iter().zip([3usize, 7, 11, 15]).enumerate() {
        assert_eq!(m["name"], all[i].name);
        assert_eq!(m["ipAddress"], model::node_ip(i));
        assert_eq!(m["cliqueID"], format!("{NVLINK_CLUSTER}.1"));
        assert_eq!((m["index"].as_u64(), m["status"].as_str()), (Some(k as u64), Some("Ready")));
    }
    let eval = domain_status(&d[1]);
    assert_eq!(eval["status"]["status"], "NotReady");
    assert_eq!(eval["status"]["nodes"][1]["status"], "NotReady");
    let o = domain_object(&d[0], "recsys");
    assert_eq!(
        o["spec"],
        json!({ "numNodes": 4, "channel": { "resourceClaimTemplate": { "name": "nvl-train-channel" } } })
    );
    assert_eq!(
        (o["metadata"]["namespace"].as_str(), o["metadata"]["labels"][labels::SIMULATED].as_str()),
        (Some("recsys"), Some("true"))
    );
}

#[test]
fn a_domains_workers_join_it_by_its_channel_template_and_find_channels_on_its_nodes() {
    let d = &domains(&nodes())[0];
    let o = domain_object(d, "recsys");
    let t = channel_template(d, "recsys", "uid-1");
    // The template the domain names, with the domain's uid as the channel's config.
    assert_eq!(t["metadata"]["name"], o["spec"]["channel"]["resourceClaimTemplate"]["name"]);
    let req = &t["spec"]["spec"]["devices"]["requests"][0];
    assert_eq!(req["exactly"]["deviceClassName"], labels::CD_CHANNEL_CLASS);
    assert_eq!(t["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"]["domainID"], "uid-1");
    // The workers use it, one per node of the domain.
    let w = workers(d, "recsys");
    assert_eq!(w["spec"]["replicas"], 4);
    let pod = &w["spec"]["template"]["spec"];
    assert_eq!(pod["resourceClaims"][0]["resourceClaimTemplateName"], t["metadata"]["name"]);
    assert_eq!(pod["nodeSelector"][labels::GPU_CLIQUE], d.clique, "on the domain's clique");
    assert_eq!(pod["containers"][0]["resources"]["claims"][0]["name"], pod["resourceClaims"][0]["name"]);
    // The class selects what the slice offers: channel 0 of the driver.
    let class = channel_class();
    let expr = class["spec"]["selectors"][0]["cel"]["expression"].as_str().unwrap_or_default().to_string();
    let slice = channel_slice(&d.members[0].0);
    assert_eq!(slice["spec"]["driver"], labels::CD_DRIVER);
    let channel = &slice["spec"]["devices"][0];
    assert_eq!(
        (channel["name"].as_str(), channel["attributes"]["type"]["string"].as_str()),
        (Some("channel-0"), Some("channel"))
    );
    assert!(
        expr.contains("type == 'channel'") && expr.contains("id == 0") && expr.contains(labels::CD_DRIVER),
        "{expr}"
    );
    // Each is a valid object of its kind.
    use k8s_openapi::api::{apps::v1::StatefulSet, resource::v1 as r};
    assert!(serde_json::from_value::<r::ResourceClaimTemplate>(t).is_ok());
    assert!(serde_json::from_value::<r::ResourceSlice>(slice).is_ok());
    assert!(serde_json::from_value::<r::DeviceClass>(class).is_ok());
    assert!(serde_json::from_value::<StatefulSet>(w).is_ok());
}

#[test]
fn mig_manager_does_not_reslice_a_shaped_gpu() {
    let mut n = nodes()[3].clone();
    let before = n.clone();
    let layout = mig::parse_layout(n.model, "3g.40gb,3g.40gb").expect("layout");
    let e = apply_layouts(&mut n, &[(0, layout.clone())], "x").expect_err("partitionable");
    assert!(e.contains("partitionable") && e.contains("not supported"), "{e}");
    assert_eq!(n, before);
    // MIG off on it is what it is already; the other GPUs reslice, the shapes stay.
    apply_layouts(&mut n, &[(0, mig::Layout::Disabled), (4, layout)], "custom").expect("applies");
    let devs = devices(&resource_slice(&n));
    assert!(devs.iter().any(|d| d["name"] == "gpu-4-mig-3g40gb-9-0"));
    assert_eq!(devs.iter().filter(|d| d["consumesCounters"].is_array()).count(), 28);
    let mut shared = nodes()[7].clone();
    let e = apply_layouts(&mut shared, &[(0, mig::Layout::Enabled(vec![]))], "x").expect_err("shared");
    assert!(e.contains("shared by capacity"), "{e}");
    // A reslice that would take the slice past the API's limit is refused, the node left alone.
    let one_g = mig::parse_layout(n.model, "1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb").expect("7 x 1g");
    let before = n.clone();
    let all: Vec<(u8, mig::Layout)> = (2..8).map(|i| (i, one_g.clone())).collect();
    let e = apply_layouts(&mut n, &all, "all-1g").expect_err("too many devices");
    assert!(e.contains("devices"), "{e}");
    assert_eq!(n, before);
}

#[test]
fn few_dra_nodes_carry_every_shape_first_node_first() {
    let mut n = build_nodes(7, 4, 4, 0);
    assign(&mut n);
    let a = &n[3].alpha;
    assert_eq!((a.partitionable.as_slice(), a.capacity, a.driver_taint), (&[0u8, 1][..], Some(2), Some(7)));
    let devs = devices(&resource_slice(&n[3]));
    assert_eq!(devs[0]["name"], "gpu-2");
    assert_eq!(rule_target(&n), Some((n[3].name.clone(), "gpu-6".into())));
    let d = domains(&n);
    assert_eq!(d[0].members.len(), 1);
    assert!(!d[0].ready(), "1 of 4 nodes");
    // A first DRA node full of MIG devices gets one partitionable GPU, within the limit.
    let mut m = build_nodes(42, 24, 12, 0);
    assign(&mut m);
    let first = m.iter().find(|x| x.dra).expect("a DRA node");
    assert!(first.gpus.iter().skip(1).all(|g| g.mig_enabled && g.instances.len() == 7));
    assert_eq!(first.alpha.partitionable, [0]);
    assert!(device_count(first) <= MAX_DEVICES_WITH_COUNTERS);
}
