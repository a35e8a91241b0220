//! Least privilege, proven (issue 14 item 5), on the same control plane as the operations:
//! `deploy/cockpit-clusterrole.yaml` and `deploy/admission-policy.yaml` applied as shipped,
//! two ServiceAccounts bound as the README says (a viewer: `fabrik-cockpit` and the agent
//! proxy Role; an operator: those and `fabrik-operator`, `fabrik-operator-mig-config`), each
//! with a token from the TokenRequest API. Then:
//! - the grants, read back with SelfSubjectRulesReview, are exactly the ones the table below
//!   says the code uses (nothing more: a grant nothing uses fails this test);
//! - `kubectl auth can-i`, as each identity, for every permission the operations check
//!   (the commands are the ones the cockpit prints when it refuses), and for writes neither
//!   may make;
//! - the cockpit's model as the viewer equals the admin's (every kind listed, none stale);
//!   every operation is refused up front, naming the missing permission, and sends nothing;
//! - as the operator: uncordon, drain (cordon + evictions), a one-GPU reslice (a config added
//!   to mig-parted's ConfigMap, the mig.config label), a ResourceQuota edit and a Kueue
//!   ClusterQueue edit all succeed; a node label fabrik does not write is refused by the
//!   admission policy, while an admin's is not.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use fabrik::model::{FeedState, OpProgress, QuotaSourceSpec};
use fabrik::ops::audit::Phase;
use fabrik::ops::{OpRequest, PlanDetail, QuotaField, QuotaKey};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::authorization::v1::{SelfSubjectRulesReview, SelfSubjectRulesReviewSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use super::{Exec, NS, eventually, fleet, obj, phases, plan, reslice_changing, running, unschedulable};
use crate::common::kubectl;

const SA_NS: &str = "fabrik-system";

/// (group, resource[/subresource], verb, resourceName or "") — one granted action.
type Grant = (String, String, String, String);

fn grants(rows: &[(&str, &str, &[&str], &str)]) -> BTreeSet<Grant> {
    rows.iter()
        .flat_map(|(g, r, verbs, name)| {
            verbs.iter().map(move |v| (g.to_string(), r.to_string(), v.to_string(), name.to_string()))
        })
        .collect()
}

/// What the cockpit reads: the kinds its feed watches (list + watch; `get` where an
/// operation re-reads the object it is about to change: nodes, pods, quotas, queues), and
/// the agents' streams through the pod proxy, in the agent namespace only.
fn viewer_grants() -> BTreeSet<Grant> {
    grants(&[
        ("", "nodes", &["get", "list", "watch"], ""),
        ("", "pods", &["get", "list", "watch"], ""),
        ("", "resourcequotas", &["get", "list", "watch"], ""),
        ("", "namespaces", &["list", "watch"], ""),
        ("", "events", &["list", "watch"], ""),
        ("policy", "poddisruptionbudgets", &["list", "watch"], ""),
        ("networking.k8s.io", "networkpolicies", &["list", "watch"], ""),
        ("cluster.x-k8s.io", "machines", &["list", "watch"], ""),
        ("cilium.io", "ciliumnetworkpolicies", &["list", "watch"], ""),
        ("cilium.io", "ciliumclusterwidenetworkpolicies", &["list", "watch"], ""),
        ("metal3.io", "baremetalhosts", &["get", "list", "watch"], ""),
        ("resource.k8s.io", "resourceslices", &["list", "watch"], ""),
        ("resource.k8s.io", "resourceclaims", &["list", "watch"], ""),
        ("resource.k8s.io", "devicetaintrules", &["list", "watch"], ""),
        ("resource.nvidia.com", "computedomains", &["list", "watch"], ""),
        ("kueue.x-k8s.io", "clusterqueues", &["get", "list", "watch"], ""),
        ("kueue.x-k8s.io", "localqueues", &["list", "watch"], ""),
        ("kueue.x-k8s.io", "workloads", &["get", "list", "watch"], ""),
        ("", "pods/proxy", &["get"], ""),
        ("", "pods/log", &["get"], ""),
    ])
}

/// What the operations write (src/ops/access.rs and ops::kube::perms_for): merge patches of
/// nodes, evictions, quota patches, a JSON patch of one ClusterQueue field, and mig-parted's
/// ConfigMap read and replaced over its resourceVersion.
fn operator_grants() -> BTreeSet<Grant> {
    let mut g = viewer_grants();
    g.extend(grants(&[
        ("", "nodes", &["patch"], ""),
        ("", "pods/eviction", &["create"], ""),
        ("", "resourcequotas", &["patch"], ""),
        ("kueue.x-k8s.io", "clusterqueues", &["patch"], ""),
        ("kueue.x-k8s.io", "workloads", &["patch"], ""),
        ("", "configmaps", &["get", "update"], "default-mig-parted-config"),
        // A GPU taint: its DeviceTaintRules written, read back, deleted (a NoExecute one
        // waits on the claims that hold the GPU, through the viewer's list).
        ("resource.k8s.io", "devicetaintrules", &["create", "get", "delete"], ""),
        // A reclaim: the owner read and patched (replicas, or a Job's suspension); the
        // deletion-cost annotation on a ReplicaSet's pod.
        ("apps", "deployments", &["get", "patch"], ""),
        ("apps", "replicasets", &["get", "patch"], ""),
        ("apps", "statefulsets", &["get", "patch"], ""),
        ("batch", "jobs", &["get", "patch"], ""),
        ("", "pods", &["patch"], ""),
        // A host reboot, power or inspection: one merge patch of the BareMetalHost.
        ("metal3.io", "baremetalhosts", &["patch"], ""),
    ]));
    g
}

/// The identity's rules as the API server states them (SelfSubjectRulesReview) in the
/// namespaces where fabrik has Roles, less what every authenticated user may (the access
/// reviews themselves).
async fn granted(client: &kube::Client) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for ns in ["default", SA_NS, "gpu-operator"] {
        let review = SelfSubjectRulesReview {
            spec: SelfSubjectRulesReviewSpec { namespace: Some(ns.into()) },
            ..Default::default()
        };
        let r = Api::<SelfSubjectRulesReview>::all(client.clone())
            .create(&PostParams::default(), &review)
            .await
            .expect("SelfSubjectRulesReview");
        let status = r.status.expect("the review's answer");
        assert!(!status.incomplete, "the rules review is complete: {:?}", status.evaluation_error);
        for rule in status.resource_rules {
            let names = rule.resource_names.clone().unwrap_or_default();
            let names = if names.is_empty() { vec![String::new()] } else { names };
            for g in rule.api_groups.iter().flatten() {
                if g == "authorization.k8s.io" || g == "authentication.k8s.io" {
                    continue;
                }
                for res in rule.resources.iter().flatten() {
                    for v in &rule.verbs {
                        for n in &names {
                            out.insert((g.clone(), res.clone(), v.clone(), n.clone()));
                        }
                    }
                }
            }
        }
    }
    out
}

/// A ServiceAccount in fabrik-system, bound to `cluster_roles` and to `roles` (name,
/// namespace), and a kubeconfig with its token (TokenRequest) in place of the admin's.
async fn identity(
    admin: &kube::Client,
    kubeconfig: &Path,
    name: &str,
    cluster_roles: &[&str],
    roles: &[(&str, &str)],
) -> (PathBuf, kube::Client) {
    let pp = PostParams::default();
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), SA_NS);
    sas.create(&pp, &obj(json!({"metadata": {"name": name}}))).await.expect("create the ServiceAccount");
    let subject = json!([{"kind": "ServiceAccount", "name": name, "namespace": SA_NS}]);
    for role in cluster_roles {
        let b: ClusterRoleBinding = obj(json!({
            "metadata": {"name": format!("{name}-{role}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": subject
        }));
        Api::<ClusterRoleBinding>::all(admin.clone()).create(&pp, &b).await.expect("bind the ClusterRole");
    }
    for (role, ns) in roles {
        let b: RoleBinding = obj(json!({
            "metadata": {"name": format!("{name}-{role}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": subject
        }));
        Api::<RoleBinding>::namespaced(admin.clone(), ns).create(&pp, &b).await.expect("bind the Role");
    }
    let req: TokenRequest = obj(json!({"spec": {"audiences": [], "expirationSeconds": 3600}}));
    let token = sas
        .create_subresource::<TokenRequest, TokenRequest>("token", name, &pp, &req)
        .await
        .expect("request a token")
        .status
        .map(|s| s.token)
        .expect("a token");
    let path = crate::common::kubeconfig_with_token(kubeconfig, &token, name);
    let conn = fabrik::cluster::connect(Some(&path), None).await.unwrap_or_else(|e| panic!("{e}"));
    (path, conn.client)
}

/// `kubectl auth can-i …` as the identity of `kubeconfig`: the line the cockpit prints.
fn can_i(kubeconfig: &Path, line: &str) -> bool {
    let args: Vec<&str> = line.split_whitespace().skip(1).collect();
    let o = Command::new("kubectl").arg("--kubeconfig").arg(kubeconfig).args(&args).output().expect("kubectl");
    let said = String::from_utf8_lossy(&o.stdout).trim().to_string();
    match (o.status.code(), said.as_str()) {
        (Some(0), "yes") => true,
        (Some(1), "no") => false,
        other => panic!("{line}: {other:?} {}", String::from_utf8_lossy(&o.stderr)),
    }
}

/// Every permission an operation checks, as the cockpit names it.
fn operation_perms() -> Vec<fabrik::ops::access::Perm> {
    let mut v: Vec<_> = fabrik::ops::access::KINDS.iter().flat_map(|k| fabrik::ops::access::requirements(*k)).collect();
    v.push(fabrik::ops::access::PATCH_CLUSTERQUEUES);
    v.push(fabrik::ops::access::EVICT_PODS.in_namespace(NS));
    v.push(fabrik::ops::access::PATCH_QUOTAS.in_namespace(NS));
    v
}

pub async fn least_privilege(c: &kube::Client, kubeconfig: &Path, audit_dir: &Path, drain_node: &str, node: &str) {
    let pp = PostParams::default();
    match Api::<Namespace>::all(c.clone()).create(&pp, &obj(json!({"metadata": {"name": SA_NS}}))).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create {SA_NS}: {e}"),
    }
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    for file in ["cockpit-clusterrole.yaml", "admission-policy.yaml"] {
        let path = deploy.join(file);
        kubectl(kubeconfig, &["apply", "-f", &path.to_string_lossy()]);
    }
    let (viewer_kc, viewer) =
        identity(c, kubeconfig, "e2e-viewer", &["fabrik-cockpit"], &[("fabrik-cockpit-agent-proxy", SA_NS)]).await;
    let (operator_kc, operator) = identity(
        c,
        kubeconfig,
        "e2e-operator",
        &["fabrik-cockpit", "fabrik-operator"],
        &[("fabrik-cockpit-agent-proxy", SA_NS), ("fabrik-operator-mig-config", "gpu-operator")],
    )
    .await;

    // ---------- the grants: exactly what the code uses ----------
    let got = eventually("the viewer's rules", Duration::from_secs(20), || {
        let v = viewer.clone();
        async move {
            let got = granted(&v).await;
            if got == viewer_grants() { Ok(got) } else { Err(format!("{got:#?}")) }
        }
    })
    .await;
    assert_eq!(got, viewer_grants());
    let got = granted(&operator).await;
    let want = operator_grants();
    assert_eq!(
        got,
        want,
        "granted but unused: {:?}; used but not granted: {:?}",
        got.difference(&want).collect::<Vec<_>>(),
        want.difference(&got).collect::<Vec<_>>()
    );

    // ---------- kubectl auth can-i, the cockpit's own lines ----------
    // kubectl names a resource only once the server serves it: Metal3's CRD (a host's
    // reboot or power checks `patch baremetalhosts.metal3.io`).
    crate::common::install_fixture(kubeconfig, "crds/metal3.io_baremetalhosts.yaml");
    for p in operation_perms() {
        let line = p.can_i();
        assert!(can_i(&operator_kc, &line), "the operator may: {line}");
        // A drain also lists the node's pods, which the viewer may too; it may change nothing.
        let read = matches!(p.verb, "get" | "list" | "watch");
        assert_eq!(can_i(&viewer_kc, &line), read, "the viewer may read but not write: {line}");
    }
    for line in [
        "kubectl auth can-i list pods -A",
        "kubectl auth can-i watch nodes",
        "kubectl auth can-i list resourceslices.resource.k8s.io",
        "kubectl auth can-i get pods --subresource=proxy -n fabrik-system",
    ] {
        assert!(can_i(&viewer_kc, line) && can_i(&operator_kc, line), "both may: {line}");
    }
    for line in [
        "kubectl auth can-i get pods --subresource=proxy -n e2e-ops",
        "kubectl auth can-i delete pods -n e2e-ops",
        "kubectl auth can-i create pods -n e2e-ops",
        "kubectl auth can-i update nodes",
        "kubectl auth can-i delete nodes",
        "kubectl auth can-i patch nodes --subresource=status",
        "kubectl auth can-i get secrets -A",
        "kubectl auth can-i update configmaps -n gpu-operator",
        "kubectl auth can-i update configmaps/other -n gpu-operator",
        "kubectl auth can-i update clusterqueues.kueue.x-k8s.io",
        "kubectl auth can-i create pods --subresource=exec -n e2e-ops",
        "kubectl auth can-i delete deployments.apps -n e2e-ops",
        "kubectl auth can-i update jobs.batch -n e2e-ops",
    ] {
        assert!(!can_i(&viewer_kc, line) && !can_i(&operator_kc, line), "neither may: {line}");
    }

    // ---------- the viewer sees every view, and every operation is refused up front ----------
    let admin_view = fleet(c).await;
    let view = fleet(&viewer).await;
    assert_eq!(
        (view.totals.nodes, view.totals.pods, view.tenants.len()),
        (admin_view.totals.nodes, admin_view.totals.pods, admin_view.tenants.len()),
        "the viewer's model is the admin's"
    );
    // The same kinds, and no other, are not live for the viewer as for the admin (Kueue's
    // LocalQueues are not installed here, for either).
    let troubled = |f: &fabrik::model::Fleet| -> BTreeSet<String> {
        f.feeds.iter().filter(|(_, s)| !matches!(s, FeedState::Live)).map(|(k, _)| k.clone()).collect()
    };
    assert_eq!(
        troubled(&view),
        troubled(&admin_view),
        "nothing is stale for the viewer that is not for the admin: {:?}",
        view.feeds
    );
    let access = fabrik::ops::access::check(&viewer).await.expect("access review");
    for op in ["cordon", "uncordon", "drain", "reslice"] {
        let why = access.denied(op).unwrap_or_else(|| panic!("the viewer may not {op}"));
        assert!(why.contains("patch nodes") && why.contains("kubectl auth can-i patch nodes"), "{op}: {why}");
    }
    assert!(access.limited("set-quota").any(|w| w.contains("patch resourcequotas")), "{access:?}");
    let mut as_viewer = Exec::new(viewer.clone(), audit_dir, "viewer");
    let (outcome, _) = as_viewer
        .run(plan(&admin_view, OpRequest::Drain { node: drain_node.into(), force: false }), Duration::from_secs(30))
        .await;
    let e = outcome.expect_err("the viewer's drain is refused");
    assert!(e.contains("may not patch nodes") && e.contains("nothing was sent"), "{e}");
    assert_eq!(phases(audit_dir, "drain", drain_node).last(), Some(&Phase::Refused));
    let rq = QuotaKey {
        source: QuotaSourceSpec::ResourceQuota { namespace: NS.into(), name: "gpu-quota".into() },
        resource: "requests.nvidia.com/gpu".into(),
        field: Default::default(),
    };
    let cq = QuotaKey {
        source: QuotaSourceSpec::ClusterQueue { queue: "cq-e2e".into(), flavor: "h100".into() },
        resource: "nvidia.com/gpu".into(),
        field: QuotaField::BorrowingLimit,
    };
    let set = |tenant: &str, quota: &QuotaKey, value: &str| OpRequest::SetQuota {
        tenant: tenant.into(),
        quota: quota.clone(),
        value: value.into(),
    };
    let (outcome, _) = as_viewer.run(plan(&admin_view, set("e2e", &rq, "11")), Duration::from_secs(30)).await;
    let e = outcome.expect_err("the viewer's quota edit is refused");
    assert!(e.contains(&format!("may not patch resourcequotas in {NS}")), "{e}");
    let (outcome, _) = as_viewer.run(plan(&admin_view, set("cq-e2e", &cq, "5")), Duration::from_secs(30)).await;
    let e = outcome.expect_err("the viewer's ClusterQueue edit is refused");
    assert!(e.contains("may not patch clusterqueues.kueue.x-k8s.io"), "{e}");

    // ---------- the admission policy narrows the operator's node patches ----------
    // Policies take effect a moment after they are created: probe with a server-side dry run
    // (admission runs, nothing is stored) until the operator's foreign label is refused.
    let label = |kc: &Path, args: &[&str]| {
        Command::new("kubectl").arg("--kubeconfig").arg(kc).arg("label").arg("node").arg(node).args(args).output()
    };
    let refusal = eventually("the admission policy in force", Duration::from_secs(30), || {
        let o = label(&operator_kc, &["fabrik-e2e/team=evil", "--dry-run=server"]).expect("kubectl");
        async move {
            let err = String::from_utf8_lossy(&o.stderr).into_owned();
            if !o.status.success() && err.contains("fabrik-operator-node-fields") {
                Ok(err)
            } else {
                Err(format!("{o:?}"))
            }
        }
    })
    .await;
    assert!(refusal.contains("only the nvidia.com/mig.config label"), "{refusal}");
    let o = label(&operator_kc, &["fabrik-e2e/team=evil"]).expect("kubectl");
    assert!(!o.status.success(), "the operator's foreign label is refused: {o:?}");
    let o = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&operator_kc)
        .args(["taint", "node", node, "fabrik-e2e=evil:NoSchedule"])
        .output()
        .expect("kubectl");
    assert!(!o.status.success(), "the operator may not taint: {o:?}");
    let nodes_json = kubectl(kubeconfig, &["get", "node", node, "-o", "json"]);
    assert!(!nodes_json.contains("fabrik-e2e"), "nothing of it was stored: {nodes_json}");
    // An admin is not narrowed.
    kubectl(kubeconfig, &["label", "node", node, "fabrik-e2e/admin=yes"]);
    kubectl(kubeconfig, &["label", "node", node, "fabrik-e2e/admin-"]);

    // ---------- the operator does every operation, and nothing else was needed ----------
    let access = fabrik::ops::access::check(&operator).await.expect("access review");
    assert!(access.denied.is_empty() && access.limited.is_empty(), "{access:?}");
    let mut as_operator = Exec::new(operator.clone(), audit_dir, "operator");
    let f = fleet(c).await;
    let (outcome, _) =
        as_operator.run(plan(&f, OpRequest::Uncordon { node: drain_node.into() }), Duration::from_secs(30)).await;
    assert!(outcome.is_ok(), "uncordon: {outcome:?}");
    eventually("the trainers back on the drain node", Duration::from_secs(90), || {
        let (c, n) = (c.clone(), drain_node.to_string());
        async move { if running(&c, "trainer", &n).await.len() == 2 { Ok(()) } else { Err("not yet".to_string()) } }
    })
    .await;
    let f = fleet(c).await;
    let (outcome, seen) = as_operator
        .run(plan(&f, OpRequest::Drain { node: drain_node.into(), force: false }), Duration::from_secs(90))
        .await;
    assert!(outcome.as_ref().is_ok_and(|m| m.contains("2 pods evicted")), "drain: {outcome:?}\n{seen:#?}");
    assert!(unschedulable(c, drain_node).await && running(c, "trainer", drain_node).await.is_empty());

    // A layout no earlier phase used, so its config is new to mig-parted's ConfigMap: the
    // operator reads and replaces it (get + update on that one ConfigMap).
    let f = fleet(c).await;
    let (p, _) = reslice_changing(&f, node, 1, &["all-3g.40gb", "all-2g.20gb", "all-7g.80gb"]);
    let PlanDetail::Reslice(r) = &p.detail else { panic!("a reslice plan") };
    assert!(r.custom_config.is_some(), "a config of its own: the ConfigMap is replaced (get + update)");
    let config = r.config_name.clone();
    let (outcome, seen) = as_operator.run(p, Duration::from_secs(90)).await;
    assert!(outcome.is_ok(), "reslice: {outcome:?}\n{seen:#?}");
    assert!(
        seen.iter()
            .any(|p| matches!(p, OpProgress::Step { step, .. } if step.starts_with(&format!("added config {config}")))),
        "the operator added its config to the ConfigMap: {seen:#?}"
    );
    assert!(seen.iter().all(|p| !matches!(p, OpProgress::Blocked { reason, .. } if reason.contains("forbidden"))));
    let n: serde_json::Value =
        serde_json::from_str(&kubectl(kubeconfig, &["get", "node", node, "-o", "json"])).expect("json");
    assert_eq!(n["metadata"]["labels"]["nvidia.com/mig.config"], json!(config));
    assert!(!unschedulable(c, node).await, "uncordoned on success");

    let f = fleet(c).await;
    let (outcome, _) = as_operator.run(plan(&f, set("e2e", &rq, "11")), Duration::from_secs(30)).await;
    assert!(outcome.is_ok(), "ResourceQuota edit: {outcome:?}");
    let hard = kubectl(kubeconfig, &["-n", NS, "get", "resourcequota", "gpu-quota", "-o", "jsonpath={.spec.hard}"]);
    assert!(hard.contains(r#""requests.nvidia.com/gpu":"11""#), "{hard}");
    let (outcome, _) = as_operator.run(plan(&f, set("cq-e2e", &cq, "5")), Duration::from_secs(30)).await;
    assert!(outcome.is_ok(), "ClusterQueue edit with patch alone: {outcome:?}");
    let r = kubectl(
        kubeconfig,
        &[
            "get",
            "clusterqueue",
            "cq-e2e",
            "-o",
            "jsonpath={.spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit}",
        ],
    );
    assert_eq!(r.trim(), "5");
    eprintln!(
        "least privilege: {} viewer grants, {} operator grants; every operation ran as the operator",
        viewer_grants().len(),
        want.len()
    );

    // ---------- a reclaim through each kind of owner (issue 16 item 5), as these two ----------
    super::reclaim::through_owners(c, kubeconfig, audit_dir, &mut as_operator, &mut as_viewer).await;
}
