//! The truth for DRA's 1.34 alpha shapes and ComputeDomains, from the API's JSON alone:
//! partitions offered from shared counters and which of them claims hold, devices shared by
//! capacity, device taints (the slice's and DeviceTaintRules'), and ComputeDomains. Written
//! apart from fabrik's translator (a second reading of the same objects), so the
//! comparison means something.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::s;

/// A quantity as the API writes it (`80Gi`, `20G`, `66`, `1500m`), in whole units, rounded down.
pub fn amount(v: &Value) -> Option<i64> {
    let t = v.as_str().map(str::to_string).or_else(|| v.as_i64().map(|n| n.to_string()))?;
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+')).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mul: f64 = match suffix {
        "" => 1.0,
        "m" => 0.001,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024.0f64.powi(4),
        _ => return None,
    };
    Some((n * mul).floor() as i64)
}

/// Claim key → what it consumes of a device, per capacity name.
type Holders = Vec<(String, BTreeMap<String, i64>)>;

fn counters(m: &Value) -> BTreeMap<String, i64> {
    m.as_object().into_iter().flatten().filter_map(|(k, c)| Some((k.clone(), amount(&c["value"])?))).collect()
}

/// What the alpha features say, per GPU uuid and per device.
#[derive(Debug, Default, PartialEq)]
pub struct DraTruth {
    /// GPU uuid → the `dra` object fabrik's GPU row must carry (absent: `null`).
    pub gpus: BTreeMap<String, Value>,
    /// (pool, device) of the partitions no claim holds: offers, not MIG devices.
    pub offers: BTreeSet<(String, String)>,
    /// Claim key → (GPU uuid of a device shared by capacity, thousandths of it by memory).
    pub capacity_claims: BTreeMap<String, Vec<(String, i64)>>,
}

struct Dev {
    pool: String,
    name: String,
    gpu: String,
    mig: bool,
    profile: String,
    consumes: Vec<(String, BTreeMap<String, i64>)>,
    multi: bool,
    capacity: BTreeMap<String, i64>,
    taints: Vec<Value>,
}

/// The truth from the slices, claims and DeviceTaintRules as listed.
pub fn truth(slices: &[Value], claims: &[Value], rules: &[Value]) -> DraTruth {
    // (pool, device) → [(claim key, consumed)]
    let mut held: BTreeMap<(String, String), Holders> = BTreeMap::new();
    for c in claims {
        let key = format!("{}/{}", s(&c["metadata"]["namespace"]), s(&c["metadata"]["name"]));
        for r in c["status"]["allocation"]["devices"]["results"].as_array().into_iter().flatten() {
            if r["driver"] != "gpu.nvidia.com" {
                continue;
            }
            let consumed = r["consumedCapacity"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), amount(v)?)))
                .collect();
            held.entry((s(&r["pool"]), s(&r["device"]))).or_default().push((key.clone(), consumed));
        }
    }
    let mut t = DraTruth::default();
    let mut devs: Vec<Dev> = Vec::new();
    let mut sets: BTreeMap<(String, String), BTreeMap<String, i64>> = BTreeMap::new();
    for sl in slices {
        if sl["spec"]["driver"] != "gpu.nvidia.com" {
            continue;
        }
        let pool = s(&sl["spec"]["pool"]["name"]);
        for cs in sl["spec"]["sharedCounters"].as_array().into_iter().flatten() {
            sets.insert((pool.clone(), s(&cs["name"])), counters(&cs["counters"]));
        }
        for d in sl["spec"]["devices"].as_array().into_iter().flatten() {
            let a = |k: &str| s(&d["attributes"][k]["string"]);
            let mig = a("type") == "mig";
            devs.push(Dev {
                pool: pool.clone(),
                name: s(&d["name"]),
                gpu: if mig { a("parentUUID") } else { a("uuid") },
                mig,
                profile: a("profile"),
                consumes: d["consumesCounters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| (s(&c["counterSet"]), counters(&c["counters"])))
                    .collect(),
                multi: d["allowMultipleAllocations"] == json!(true),
                capacity: counters(&d["capacity"]),
                taints: d["taints"].as_array().cloned().unwrap_or_default(),
            });
        }
    }
    // What is left of each counter set once the held devices took their part.
    let mut left = sets.clone();
    for d in &devs {
        if !held.contains_key(&(d.pool.clone(), d.name.clone())) {
            continue;
        }
        for (set, take) in &d.consumes {
            if let Some(have) = left.get_mut(&(d.pool.clone(), set.clone())) {
                for (c, n) in take {
                    if let Some(h) = have.get_mut(c) {
                        *h -= n;
                    }
                }
            }
        }
    }
    let fits = |d: &Dev| {
        d.consumes.iter().all(|(set, take)| {
            left.get(&(d.pool.clone(), set.clone()))
                .is_some_and(|have| take.iter().all(|(c, n)| have.get(c).is_some_and(|h| h >= n)))
        })
    };
    #[derive(Default)]
    struct G {
        partitionable: bool,
        whole_fits: bool,
        fits: BTreeMap<String, (i64, i64)>,
        taints: Vec<(String, String, Option<String>, Value)>,
        multi: Option<(BTreeMap<String, i64>, Holders)>,
    }
    let mut per: BTreeMap<String, G> = BTreeMap::new();
    for d in &devs {
        if d.gpu.is_empty() {
            continue;
        }
        let key = (d.pool.clone(), d.name.clone());
        let g = per.entry(d.gpu.clone()).or_default();
        for tn in &d.taints {
            let taint = json!({ "key": tn["key"], "value": s(&tn["value"]), "effect": tn["effect"],
                "device": d.name, "rule": null });
            g.taints.push((d.name.clone(), s(&tn["key"]), None, taint));
        }
        for r in rules {
            let sel = &r["spec"]["deviceSelector"];
            let cel = sel["selectors"].as_array().is_some_and(|a| !a.is_empty()) || sel["deviceClassName"].is_string();
            let matches = |k: &str, v: &str| sel[k].as_str().filter(|x| !x.is_empty()).is_none_or(|x| x == v);
            if cel || !matches("driver", "gpu.nvidia.com") || !matches("pool", &d.pool) || !matches("device", &d.name) {
                continue;
            }
            let name = s(&r["metadata"]["name"]);
            let tn = &r["spec"]["taint"];
            let taint = json!({ "key": tn["key"], "value": s(&tn["value"]), "effect": tn["effect"],
                "device": d.name, "rule": name });
            g.taints.push((d.name.clone(), s(&tn["key"]), Some(name), taint));
        }
        if !d.consumes.is_empty() {
            g.partitionable = true;
            let free = !held.contains_key(&key) && fits(d);
            if d.mig {
                let e = g.fits.entry(d.profile.clone()).or_default();
                e.0 += free as i64;
                e.1 += 1;
                if !held.contains_key(&key) {
                    t.offers.insert(key.clone());
                }
            } else {
                g.whole_fits = free;
            }
        }
        if d.multi && !d.mig {
            let claims: Holders = held.get(&key).cloned().unwrap_or_default();
            let total = d.capacity.get("memory").copied().filter(|m| *m > 0);
            for (claim, consumed) in &claims {
                let milli = match (consumed.get("memory"), total) {
                    (Some(u), Some(tot)) => (*u).clamp(0, tot) * 1000 / tot,
                    _ => 1000 / claims.len().max(1) as i64,
                };
                t.capacity_claims.entry(claim.clone()).or_default().push((d.gpu.clone(), milli));
            }
            g.multi = Some((d.capacity.clone(), claims));
        }
    }
    for (uuid, mut g) in per {
        if !g.partitionable && g.taints.is_empty() && g.multi.is_none() {
            continue;
        }
        g.taints.sort_by(|a, b| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)));
        let shared = g.multi.map(|(capacity, mut claims)| {
            claims.sort_by(|a, b| a.0.cmp(&b.0));
            let left: BTreeMap<String, i64> = capacity
                .iter()
                .map(|(k, v)| (k.clone(), v - claims.iter().filter_map(|c| c.1.get(k)).sum::<i64>()))
                .collect();
            json!({
                "capacity": capacity,
                "claims": claims.iter().map(|(c, m)| json!({ "claim": c, "consumed": m })).collect::<Vec<_>>(),
                "left": left,
            })
        });
        t.gpus.insert(
            uuid,
            json!({
                "partitionable": g.partitionable,
                "whole_fits": if g.partitionable { json!(g.whole_fits) } else { Value::Null },
                "fits": g.fits.iter().map(|(p, (f, o))| json!({ "profile": p, "fits": f, "offered": o })).collect::<Vec<_>>(),
                "taints": g.taints.into_iter().map(|x| x.3).collect::<Vec<_>>(),
                "shared_by_capacity": shared,
            }),
        );
    }
    t
}

/// The domains view's rows, keyed `namespace/name`.
pub fn domain_rows(
    domains: &[Value],
    pods: &[Value],
    tenant_of_ns: &BTreeMap<String, String>,
    waiting: &BTreeMap<String, Value>,
) -> BTreeMap<String, BTreeMap<&'static str, Value>> {
    let mut rows = BTreeMap::new();
    for d in domains {
        let ns = s(&d["metadata"]["namespace"]);
        let name = s(&d["metadata"]["name"]);
        let nodes: Vec<Value> = d["status"]["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| {
                let clique = s(&n["cliqueID"]);
                json!({ "name": n["name"], "status": s(&n["status"]),
                    "clique": if clique.is_empty() { Value::Null } else { json!(clique) } })
            })
            .collect();
        let status = s(&d["status"]["status"]);
        let template = s(&d["spec"]["channel"]["resourceClaimTemplate"]["name"]);
        let mut r = BTreeMap::new();
        r.insert("namespace", json!(ns));
        r.insert("name", json!(name));
        r.insert("tenant", json!(tenant_of_ns.get(&ns)));
        r.insert("status", if status.is_empty() { Value::Null } else { json!(status) });
        r.insert("num_nodes", d["spec"]["numNodes"].clone());
        r.insert("nodes_ready", json!(nodes.iter().filter(|n| n["status"] == "Ready").count()));
        r.insert("nodes", json!(nodes));
        r.insert("claim_template", if template.is_empty() { Value::Null } else { json!(template) });
        // Its workload: the unfinished pods of its namespace with a claim from its template.
        let mut members: Vec<(String, Value)> = Vec::new();
        let mut workloads: BTreeSet<String> = BTreeSet::new();
        for p in pods.iter().filter(|p| p["metadata"]["namespace"] == ns.as_str()) {
            let joins = p["spec"]["resourceClaims"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| !template.is_empty() && c["resourceClaimTemplateName"] == template.as_str());
            let phase = if p["metadata"]["deletionTimestamp"].is_string() {
                "Terminating".to_string()
            } else {
                p["status"]["phase"].as_str().unwrap_or("Pending").to_string()
            };
            if !joins || phase == "Succeeded" || phase == "Failed" {
                continue;
            }
            let name = s(&p["metadata"]["name"]);
            let l = &p["metadata"]["labels"];
            let app = [&l["app"], &l["app.kubernetes.io/name"], &l["job-name"]]
                .into_iter()
                .find_map(|v| v.as_str())
                .filter(|v| !v.is_empty())
                .map_or_else(|| name.clone(), str::to_string);
            workloads.insert(app);
            let node = p["spec"]["nodeName"].as_str().filter(|n| !n.is_empty());
            let waiting = waiting.get(&format!("{ns}/{name}")).map_or(Value::Null, |w| w["text"].clone());
            members.push((name.clone(), json!({ "name": name, "node": node, "phase": phase, "waiting": waiting })));
        }
        members.sort_by(|a, b| a.0.cmp(&b.0));
        r.insert("pods", json!(members.into_iter().map(|m| m.1).collect::<Vec<_>>()));
        r.insert("workloads", json!(workloads));
        r.insert("created_ms", json!(super::ts_ms(&d["metadata"]["creationTimestamp"])));
        rows.insert(format!("{ns}/{name}"), r);
    }
    rows
}
