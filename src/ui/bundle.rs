//! `fabrik snapshot --bundle FILE.md [--node N | --tenant T]`: one Markdown file for an
//! incident ticket. Every view with the rows of the scope (the same cells as the screen and
//! `--format markdown`), the alerts, why pods wait, each node's topology as the node screen
//! draws it, and the audit lines of the operations on the scope.
//!
//! A node's scope: the node, its GPUs, its GPU pods, the tenants that have GPU pods on it and
//! their quotas, the events about the node, its GPUs and its pods, the operations on it, the
//! ComputeDomains it is in. A tenant's scope: the tenant, its quotas, its GPU pods, the nodes
//! they run on (and those nodes' GPUs), the events in its namespaces, the operations on its
//! quotas or namespaces, the ComputeDomains of its namespaces. (GPU pods: the pods the Pods
//! view lists, those asking for GPUs, MIG instances or DRA devices.)

use std::collections::HashSet;

use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::command::ViewKind;
use super::theme::Theme;
use super::views::{detail, tables};
use crate::model::*;
use crate::ops::audit::{self, Record};

/// What a bundle covers, as the user named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    Fleet,
    Node(String),
    Tenant(String),
}

/// A scope resolved against the fleet.
enum In {
    Fleet,
    Node { id: NodeId, name: String, tenants: HashSet<TenantId> },
    Tenant { id: TenantId, name: String, nodes: HashSet<NodeId>, namespaces: HashSet<String> },
}

/// Node screens drawn in a bundle at most (a tenant on hundreds of nodes: the first ones, by
/// name, and the count of the rest).
const TOPOLOGY_MAX: usize = 8;

/// The bundle, or why there is none (an unknown node or tenant, with the names there are).
/// `context` is the kube context (or `demo`); `records` the audit log, of every context, or
/// why it could not be read.
pub fn bundle(
    f: &Fleet,
    scope: &Scope,
    context: &str,
    version: &str,
    records: Result<&[Record], &str>,
) -> Result<String, String> {
    let scope = resolve(f, scope)?;
    let mut out = String::new();
    let title = match &scope {
        In::Fleet => "the whole fleet".to_string(),
        In::Node { name, .. } => format!("node {name}"),
        In::Tenant { name, .. } => format!("tenant {name}"),
    };
    out.push_str(&format!("# fabrik incident bundle: {title}\n\n"));
    out.push_str(&format!(
        "- context: `{}`\n- taken at: {} (the cluster's time as fabrik last saw it)\n- fabrik {version}\n",
        md(context),
        audit::rfc3339(f.now)
    ));
    match &scope {
        In::Node { tenants, .. } => {
            let mut names: Vec<&str> = tenants.iter().filter_map(|t| f.tenant(*t)).map(|t| f.str_of(t.name)).collect();
            names.sort_unstable();
            out.push_str(&format!("- tenants with GPU pods on it: {}\n", list(&names)));
        }
        In::Tenant { id, nodes, namespaces, .. } => {
            let mut ns: Vec<&str> = namespaces.iter().map(String::as_str).collect();
            ns.sort_unstable();
            out.push_str(&format!("- namespaces: {}\n- nodes its GPU pods run on: {}\n", list(&ns), nodes.len()));
            let by = f.tenant_waiting(*id);
            if !by.is_empty() {
                let n: u32 = by.iter().map(|(_, k)| k).sum();
                let why: Vec<String> = by.iter().map(|(w, k)| format!("{k} {w}")).collect();
                out.push_str(&format!("- pending: {n} ({})\n", md(&why.join(", "))));
            }
            let by = f.tenant_running_held_back(*id);
            if !by.is_empty() {
                let n: u32 = by.iter().map(|(_, k)| k).sum();
                let why: Vec<String> = by.iter().map(|(w, k)| format!("{k} {w}")).collect();
                out.push_str(&format!("- running, a container restarting: {n} ({})\n", md(&why.join(", "))));
            }
            let queued = queued_text(&f.tenant_queued(*id));
            if !queued.is_empty() {
                out.push_str(&format!("- held back by Kueue: {}\n", md(&queued)));
            }
            for (object, q) in f.tenant_quota_refusals(*id) {
                out.push_str(&format!("- refused by quota `{}`: {} — {}\n", md(&q.quota), md(object), md(&q.text)));
            }
        }
        In::Fleet => {}
    }

    let alerts: Vec<&Alert> = f.alerts.values().filter(|a| alert_in(f, &scope, &a.target)).collect();
    out.push_str(&format!("\n## Alerts ({})\n\n", alerts.len()));
    if alerts.is_empty() {
        out.push_str("none\n");
    } else {
        out.push_str("| SINCE | ALERT | ON | MESSAGE |\n|---|---|---|---|\n");
        for a in alerts {
            out.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                audit::rfc3339(a.since),
                md(&a.kind.label()),
                md(&target_name(f, &a.target)),
                md(&a.message)
            ));
        }
    }

    for v in ViewKind::ALL {
        let ids: Vec<_> =
            tables::rows(f, v, "", None, false).into_iter().filter(|r| row_in(f, &scope, v, *r)).collect();
        let (headers, rows) = tables::text_rows_of(f, v, &ids);
        let count = ids.iter().filter(|r| !matches!(r, super::views::column::RowId::Mig(..))).count();
        out.push_str(&format!("\n## {} ({count})\n\n", v.title()));
        if rows.is_empty() {
            out.push_str("none\n");
        } else {
            out.push_str(&super::export::markdown(&headers, &rows));
        }
    }

    let nodes: Vec<NodeId> = match &scope {
        In::Fleet => Vec::new(),
        In::Node { id, .. } => vec![*id],
        In::Tenant { nodes, .. } => {
            let mut v: Vec<NodeId> = nodes.iter().copied().collect();
            v.sort_unstable_by_key(|n| f.node(*n).map(|n| f.str_of(n.name)).unwrap_or(""));
            v
        }
    };
    if !nodes.is_empty() {
        out.push_str("\n## Topology\n");
        for n in nodes.iter().take(TOPOLOGY_MAX) {
            let name = f.node(*n).map_or("", |n| f.str_of(n.name));
            out.push_str(&format!("\n### {}\n\n```text\n{}```\n", md(name), node_screen(f, *n)));
        }
        if nodes.len() > TOPOLOGY_MAX {
            out.push_str(&format!(
                "\n{} more nodes: `fabrik snapshot --bundle FILE --node NAME` for each.\n",
                nodes.len() - TOPOLOGY_MAX
            ));
        }
    } else if matches!(scope, In::Fleet) {
        out.push_str("\n## Topology\n\nper node: `fabrik snapshot --bundle FILE --node NAME`\n");
    }

    let records = match records {
        Ok(r) => r,
        Err(why) => {
            out.push_str(&format!("\n## Audit\n\nthe audit log could not be read: {}\n", md(why)));
            return Ok(out);
        }
    };
    let mine: Vec<Record> =
        records.iter().filter(|r| r.context == context && target_in(f, &scope, &r.target)).cloned().collect();
    let ops = audit::summarize(&mine).iter().filter(|s| s.phase != audit::Phase::Planned).count();
    out.push_str(&format!("\n## Audit ({ops} operations, {} records, context `{}`)\n\n", mine.len(), md(context)));
    if mine.is_empty() {
        out.push_str("none\n");
    } else {
        let rendered = audit::render(&mine, true, mine.len());
        let text = crate::text::printable_lines(&rendered);
        out.push_str(&format!("```text\n{}```\n", text.replace("```", "'''")));
    }
    Ok(out)
}

fn resolve(f: &Fleet, scope: &Scope) -> Result<In, String> {
    match scope {
        Scope::Fleet => Ok(In::Fleet),
        Scope::Node(name) => {
            let Some(id) = f.node_by_name(name) else {
                let near = nearby(f.node_ids().filter_map(|n| f.node(n)).map(|n| f.str_of(n.name)), name);
                return Err(format!(
                    "there is no node named {name:?}{near}; `fabrik snapshot --view fleet` lists them"
                ));
            };
            let tenants = f
                .pods_on_node(id)
                .iter()
                .filter_map(|p| f.pod(*p))
                .filter(|p| p.requests_devices())
                .map(|p| p.tenant)
                .collect();
            Ok(In::Node { id, name: name.clone(), tenants })
        }
        Scope::Tenant(name) => {
            let Some(id) = f.tenant_by_name(name) else {
                let near = nearby(f.tenant_ids().filter_map(|t| f.tenant(t)).map(|t| f.str_of(t.name)), name);
                return Err(format!(
                    "there is no tenant named {name:?}{near}; `fabrik snapshot --view tenants` lists them"
                ));
            };
            let t = f.tenant(id).ok_or_else(|| format!("tenant {name:?} is gone"))?;
            let namespaces: HashSet<String> = t.namespaces.iter().map(|n| f.str_of(*n).to_string()).collect();
            let nodes = f
                .pod_ids()
                .filter_map(|p| f.pod(p))
                .filter(|p| p.tenant == id && p.requests_devices())
                .filter_map(|p| p.node)
                .collect();
            Ok(In::Tenant { id, name: name.clone(), nodes, namespaces })
        }
    }
}

/// ` (did you mean a, b?)`: the names within typo distance (`settings::nearby`, as for
/// keymaps and themes), else those that contain what was typed (`llm` → `llm-pretrain`).
fn nearby<'a>(names: impl Iterator<Item = &'a str>, typed: &str) -> String {
    let names: Vec<&str> = names.collect();
    let t = typed.to_lowercase();
    // Closest first.
    let mut near = crate::settings::nearby(typed, names.iter().copied(), 3);
    if near.is_empty() && !t.is_empty() {
        near = names.into_iter().filter(|n| n.to_lowercase().contains(&t)).take(5).collect();
        near.sort_unstable();
    }
    if near.is_empty() { String::new() } else { format!(" (did you mean {}?)", near.join(", ")) }
}

fn row_in(f: &Fleet, s: &In, v: ViewKind, r: super::views::column::RowId) -> bool {
    use super::views::column::RowId;
    let (node, tenant) = match s {
        In::Fleet => return true,
        In::Node { id, tenants, .. } => (Some((*id, tenants)), None),
        In::Tenant { id, nodes, namespaces, .. } => (None, Some((*id, nodes, namespaces))),
    };
    let gpu_node = |g: GpuId| f.gpu(g).map(|g| g.node);
    match (v, r) {
        (_, RowId::Host(_)) => crate::ui::views::hosts::host_of(f, r).is_some_and(|h| match s {
            In::Node { name, .. } => f.nodes_of_host(h).contains(name),
            _ => false,
        }),
        (_, RowId::Capi(_)) => crate::ui::views::capi::capi_of(f, r).is_some_and(|row| match (row, s) {
            (crate::model::CapiRow::Machine(m), In::Node { name, .. }) => m.node.as_deref() == Some(name.as_str()),
            _ => false,
        }),
        (_, RowId::Node(n)) => node.map_or_else(|| tenant.is_some_and(|t| t.1.contains(&n)), |(id, _)| id == n),
        (_, RowId::Gpu(g) | RowId::Mig(g, _)) => gpu_node(g)
            .is_some_and(|n| node.map_or_else(|| tenant.is_some_and(|t| t.1.contains(&n)), |(id, _)| id == n)),
        (_, RowId::Tenant(t)) => node.map_or_else(|| tenant.is_some_and(|x| x.0 == t), |(_, ts)| ts.contains(&t)),
        (_, RowId::Quota(q)) => f.quota(QuotaId(q)).is_some_and(|q| {
            node.map_or_else(|| tenant.is_some_and(|x| x.0 == q.tenant), |(_, ts)| ts.contains(&q.tenant))
        }),
        (_, RowId::Pod(p)) => f.pod(p).is_some_and(|p| match (node, tenant) {
            (Some((id, _)), _) => p.node == Some(id),
            (_, Some((tid, ..))) => p.tenant == tid,
            _ => true,
        }),
        (_, RowId::Event(i)) => tables::event_at(f, i).is_some_and(|e| target_in(f, s, &e.object)),
        (_, RowId::Op(i)) => tables::op_at(f, i).is_some_and(|o| target_in(f, s, &o.target)),
        (_, RowId::Workload(_)) => tables::workload_of(f, r).is_some_and(|(_, w)| match s {
            In::Node { id, .. } => f.workload_pods(w).iter().any(|p| p.node == Some(*id)),
            In::Tenant { namespaces, .. } => namespaces.contains(&w.namespace),
            In::Fleet => true,
        }),
        (_, RowId::Domain(_)) => tables::domain_of(f, r).is_some_and(|(_, d)| match s {
            In::Node { name, .. } => d.nodes.iter().any(|n| n.name == *name),
            In::Tenant { namespaces, .. } => namespaces.contains(&d.namespace),
            In::Fleet => true,
        }),
    }
}

/// Whether an event's object or an operation's target is in the scope. Objects are written
/// `kind/namespace/name`, `kind/name`, `node/gpuN` or a bare name (events, ops, audit).
fn target_in(f: &Fleet, s: &In, object: &str) -> bool {
    let parts: Vec<&str> = object.split('/').collect();
    match s {
        In::Fleet => true,
        In::Node { id, name, .. } => match parts.as_slice() {
            [one] => one == name,
            // `node/NAME`, or one of its GPUs: `NAME/gpuN`.
            [kind, n] => (kind.eq_ignore_ascii_case("node") && n == name) || kind == name,
            [kind, ns, pod] if kind.eq_ignore_ascii_case("pod") => f
                .pods_on_node(*id)
                .iter()
                .filter_map(|p| f.pod(*p))
                .any(|p| f.str_of(p.namespace) == *ns && &*p.name == *pod),
            _ => false,
        },
        In::Tenant { name, namespaces, .. } => match parts.as_slice() {
            [_, ns, _] => namespaces.contains(*ns),
            [ns, _] => namespaces.contains(*ns),
            [one] => one == name || namespaces.contains(*one),
            _ => false,
        },
    }
}

fn alert_in(f: &Fleet, s: &In, t: &AlertTarget) -> bool {
    match (s, t) {
        (In::Fleet, _) => true,
        (In::Node { id, .. }, AlertTarget::Node(n)) => id == n,
        (In::Node { id, .. }, AlertTarget::Gpu(g)) => f.gpu(*g).is_some_and(|g| g.node == *id),
        (In::Node { tenants, .. }, AlertTarget::Tenant(t)) => tenants.contains(t),
        (In::Node { name, .. }, AlertTarget::Domain(d)) => {
            f.domains.get(&**d).is_some_and(|d| d.nodes.iter().any(|n| n.name == *name))
        }
        (In::Tenant { nodes, .. }, AlertTarget::Node(n)) => nodes.contains(n),
        (In::Tenant { nodes, .. }, AlertTarget::Gpu(g)) => f.gpu(*g).is_some_and(|g| nodes.contains(&g.node)),
        (In::Tenant { id, .. }, AlertTarget::Tenant(t)) => id == t,
        (In::Tenant { namespaces, .. }, AlertTarget::Domain(d)) => {
            d.split_once('/').is_some_and(|(ns, _)| namespaces.contains(ns))
        }
        // The health check of the node's Machine's cluster: the one that would replace it.
        (In::Node { name, .. }, AlertTarget::HealthCheck(h)) => f.machine_of_node(name).is_some_and(|m| {
            f.capi
                .get(&(crate::model::CapiKind::MachineHealthCheck, h.to_string()))
                .is_some_and(|c| c.cluster == m.cluster && c.namespace == m.namespace)
        }),
        (In::Tenant { .. }, AlertTarget::HealthCheck(_)) => false,
    }
}

fn target_name(f: &Fleet, t: &AlertTarget) -> String {
    match t {
        AlertTarget::Node(n) => f.node(*n).map_or("node ?", |n| f.str_of(n.name)).to_string(),
        AlertTarget::Gpu(g) => f.gpu(*g).map_or_else(
            || "gpu ?".to_string(),
            |g| format!("{}/gpu{}", f.node(g.node).map_or("?", |n| f.str_of(n.name)), g.index),
        ),
        AlertTarget::Tenant(t) => f.tenant(*t).map_or("tenant ?", |t| f.str_of(t.name)).to_string(),
        AlertTarget::Domain(d) => format!("computedomain/{d}"),
        AlertTarget::HealthCheck(h) => format!("machinehealthcheck/{h}"),
    }
}

/// The node screen (topology tree, node facts, charts) as text, as tall as its tree.
fn node_screen(f: &Fleet, n: NodeId) -> String {
    let rows = detail::tree_rows(f, n, &HashSet::new()).len() as u16;
    let (w, h) = (140, (rows + 2).clamp(24, 400));
    let Ok(mut term) = Terminal::new(TestBackend::new(w, h));
    let theme = Theme::no_color();
    let drawn = term.draw(|frame| {
        detail::render_node(frame, frame.area(), f, n, 0, &HashSet::new(), &theme);
    });
    if drawn.is_err() {
        return String::new();
    }
    // Cluster text on the screen is shown escaped, never raw.
    crate::text::printable_lines(&super::export::to_text(term.backend().buffer())).replace("```", "'''")
}

/// Text for a Markdown line or table cell: control characters (line breaks too) escaped,
/// cell separators too.
fn md(s: &str) -> String {
    crate::text::printable(s).replace('|', "\\|")
}

fn list(names: &[&str]) -> String {
    if names.is_empty() { "none".into() } else { names.iter().map(|n| md(n)).collect::<Vec<_>>().join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimConfig;

    fn fleet() -> Fleet {
        let cfg =
            SimConfig { seed: 42, nodes: 48, tick_ms: 1000, churn: true, sharing_every: 4, dra_alpha: true, teams: 0 };
        crate::testing::demo_fleet_with(cfg, 5, Thresholds::default()).1
    }

    fn record(context: &str, target: &str, phase: audit::Phase) -> Record {
        Record {
            time: "2026-01-01T00:00:00.000Z".into(),
            op: format!("s-{target}"),
            context: context.into(),
            user: String::new(),
            kind: "cordon".into(),
            target: target.into(),
            phase,
            message: format!("cordon {target}"),
            effects: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn section<'a>(md: &'a str, title: &str) -> &'a str {
        let start = md
            .find(&format!("\n## {title} ("))
            .or_else(|| md.find(&format!("\n## {title}\n")))
            .unwrap_or_else(|| panic!("no section {title}:\n{md}"));
        let rest = &md[start + 4..];
        &rest[..rest.find("\n## ").unwrap_or(rest.len())]
    }

    /// The cells of a column of a section's table.
    fn cells(md: &str, title: &str, col: &str) -> Vec<String> {
        let s = section(md, title);
        let mut lines = s.lines().filter(|l| l.starts_with("| "));
        let header: Vec<&str> = lines.next().unwrap_or("").trim_matches('|').split(" | ").map(str::trim).collect();
        let i = header.iter().position(|h| *h == col).unwrap_or_else(|| panic!("{col} in {header:?}"));
        lines.map(|l| l.trim_matches('|').split(" | ").nth(i).unwrap_or("").trim().to_string()).collect()
    }

    #[test]
    fn a_node_bundle_holds_that_node_its_gpus_and_its_gpu_pods_and_nothing_else() {
        let f = fleet();
        // The node with the most GPU pods.
        let (nid, name) = f
            .node_ids()
            .filter_map(|n| f.node(n).map(|x| (n, f.str_of(x.name).to_string())))
            .max_by_key(|(n, _)| {
                f.pods_on_node(*n).iter().filter(|p| f.pod(**p).is_some_and(|p| p.requests_devices())).count()
            })
            .expect("nodes");
        let records = [
            record("demo", &name, audit::Phase::Succeeded),
            record("prod", &name, audit::Phase::Succeeded),
            record("demo", "some-other-node", audit::Phase::Succeeded),
        ];
        let md = bundle(&f, &Scope::Node(name.clone()), "demo", "test", Ok(&records)).expect("bundle");
        assert!(md.starts_with(&format!("# fabrik incident bundle: node {name}\n")));
        assert_eq!(cells(&md, "Fleet", "NAME"), std::slice::from_ref(&name));
        let gpus = f.node(nid).map_or(0, |n| n.gpus.len());
        assert!(section(&md, "GPUs").starts_with(&format!("GPUs ({gpus})")), "{}", section(&md, "GPUs"));
        let mut want: Vec<String> = f
            .pods_on_node(nid)
            .iter()
            .filter_map(|p| f.pod(*p))
            .filter(|p| p.requests_devices())
            .map(|p| p.name.to_string())
            .collect();
        want.sort();
        let mut got = cells(&md, "Pods", "NAME");
        got.sort();
        assert!(want.len() > 1, "a busy node: {want:?}");
        assert_eq!(got, want);
        assert!(cells(&md, "Pods", "NODE").iter().all(|n| *n == name));
        // The tenants are the pods' tenants; the audit holds this context's records for it.
        let mut tenants: Vec<String> = cells(&md, "Pods", "TENANT");
        tenants.sort();
        tenants.dedup();
        assert_eq!(cells(&md, "Tenants", "TENANT").len(), tenants.len(), "{md}");
        let audit = section(&md, "Audit");
        assert!(audit.starts_with("Audit (1 operations, 1 records, context `demo`)"), "{audit}");
        assert!(!audit.contains("some-other-node"), "{audit}");
        // The node screen: its tree, one line per GPU at least.
        let topo = section(&md, "Topology");
        assert!(topo.contains(&format!("### {name}")) && topo.contains("Topology: node → GPU"), "{topo}");
    }

    #[test]
    fn a_tenant_bundle_holds_its_pods_and_the_nodes_they_run_on() {
        let f = fleet();
        let md = bundle(&f, &Scope::Tenant("llm-pretrain".into()), "demo", "test", Ok(&[])).expect("bundle");
        let tid = f.tenant_by_name("llm-pretrain").expect("tenant");
        let pods: Vec<&Pod> =
            f.pod_ids().filter_map(|p| f.pod(p)).filter(|p| p.tenant == tid && p.requests_devices()).collect();
        assert_eq!(cells(&md, "Pods", "NAME").len(), pods.len());
        assert!(cells(&md, "Pods", "TENANT").iter().all(|t| t == "llm-pretrain"));
        let mut nodes: Vec<String> = pods
            .iter()
            .filter_map(|p| p.node)
            .filter_map(|n| f.node(n))
            .map(|n| f.str_of(n.name).to_string())
            .collect();
        nodes.sort();
        nodes.dedup();
        let mut got = cells(&md, "Fleet", "NAME");
        got.sort();
        assert_eq!(got, nodes);
        assert_eq!(cells(&md, "Tenants", "TENANT"), ["llm-pretrain"]);
        // Every GPU row is on one of those nodes; its ComputeDomain is listed.
        assert!(cells(&md, "GPUs", "NODE").iter().all(|n| nodes.contains(n)));
        assert_eq!(cells(&md, "Domains", "DOMAIN"), ["llm-pretrain/nvl-train"]);
        // More nodes than screens: the rest are named by count.
        if nodes.len() > TOPOLOGY_MAX {
            assert!(md.contains(&format!("{} more nodes", nodes.len() - TOPOLOGY_MAX)));
        }
        // The whole fleet: every row.
        let all = bundle(&f, &Scope::Fleet, "demo", "test", Err("denied")).expect("bundle");
        assert_eq!(cells(&all, "Fleet", "NAME").len(), f.node_ids().count());
        assert!(all.contains("the audit log could not be read: denied"), "{all}");
    }

    #[test]
    fn an_unknown_scope_is_refused_with_the_names_that_are_near() {
        let f = fleet();
        let e = bundle(&f, &Scope::Tenant("llm".into()), "demo", "test", Ok(&[])).expect_err("no tenant llm");
        assert!(
            e.contains("no tenant named \"llm\"") && e.contains("llm-pretrain") && e.contains("--view tenants"),
            "{e}"
        );
        let e = bundle(&f, &Scope::Node("gpu-9".into()), "demo", "test", Ok(&[])).expect_err("no node");
        assert!(e.contains("no node named \"gpu-9\"") && e.contains("--view fleet"), "{e}");
        // Cluster text cannot break a table cell or a line.
        assert_eq!(md("a|b\nc"), "a\\|b\\x0ac");
    }
}
