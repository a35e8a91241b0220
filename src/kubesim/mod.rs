//! `fabrik sim --kubeconfig K`: simulated GPU nodes against a real API server.
//!
//! It plays, for every simulated node, the kubelet (registration, lease heartbeats, pods
//! started, Job pods completed, graceful deletions finished), GFD and the device plugin
//! (labels, `nvidia.com/gpu` and `nvidia.com/mig-*` capacity; on every `--sharing-every`-th
//! node without MIG, GPUs shared by time-slicing or MPS), the NVIDIA DRA driver (a
//! ResourceSlice on every `--dra-every`-th node) and mig-manager (the `nvidia.com/mig.config`
//! label protocol). The real kube-scheduler and kube-controller-manager do the rest.
//! `--dra-alpha` adds Kubernetes 1.34's alpha DRA shapes on the DRA nodes (partitionable
//! GPUs, a GPU shared by capacity, device taints), a DeviceTaintRule, and NVIDIA
//! ComputeDomains with their controller's status (see `alpha`).
//!
//! Only nodes labelled `fabrik.io/simulated=true` are ever touched. Test hooks: the node
//! annotation `fabrik.io/sim-fault=notready` stops a node's kubelet (no lease renewals,
//! Ready=False, no pods started) until it is removed; `nvidia.com/mig.config=fabrik-wedged`
//! leaves mig-manager pending for good; `--mig-delay-ms` makes mig-manager react that late to a
//! new config (the state label meanwhile still says what the previous config left); the pod
//! annotation `fabrik.io/sim-pod-ip` sets the IP a pod reports (for servers a test runs
//! itself, reached through the pod proxy); `fabrik.io/sim-stop-seconds` says how long a pod's
//! containers take to exit after SIGTERM (default about a second; past the pod's grace period
//! they are killed at its end). Containers fail as they would on a real node (`failing`): an
//! image of a registry under `.invalid` cannot be pulled (ImagePullBackOff, the pod Pending),
//! and a container whose command is `false` crash-loops (CrashLoopBackOff, the pod Running).

mod agents;
mod alpha;
mod alpha_api;
mod bmo;
pub mod factory;
mod failing;
mod kubelet;
pub(crate) mod logs;
mod migparted;
mod model;
mod nodes;
mod podres;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, DeleteParams, ListParams};
use tokio::sync::mpsc;

use crate::cluster::labels;

pub use kubelet::POD_IP_ANNOTATION;
pub use migparted::WEDGED_CONFIGS;

/// A short reason for a kube error (the API status message where there is one).
pub(crate) fn describe(e: &kube::Error) -> String {
    crate::cluster::describe(e)
}

pub(crate) use crate::cluster::is_status;

/// A message for a failure of the first request, naming what failed and what to do.
fn first_contact_error(context: &str, server: &str, e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.code == 401 => format!(
            "the API server of context {context:?} rejected the credentials (401 Unauthorized: {}). \
             Check the user in the kubeconfig.",
            s.message
        ),
        kube::Error::Api(s) if s.code == 403 => format!(
            "the API server of context {context:?} refused to list nodes (403 Forbidden: {}). \
             fabrik sim needs cluster-admin-like rights: create/patch nodes and nodes/status, leases in \
             kube-node-lease, pods/status, ResourceSlices and DeviceClasses (use an admin context).",
            s.message
        ),
        kube::Error::Api(s) => format!("listing nodes on context {context:?} failed: {} ({})", s.message, s.code),
        other => format!("cannot reach the API server of context {context:?}{server}: {other}"),
    }
}

/// The server URL of `context` in the kubeconfig, for error messages (empty when unknown).
fn server_of(conn: &crate::cluster::Connection) -> String {
    let Some(kc) = conn.kubeconfig.as_ref().and_then(|p| kube::config::Kubeconfig::read_from(p).ok()) else {
        return String::new();
    };
    let cluster =
        kc.contexts.iter().find(|c| c.name == conn.context).and_then(|c| c.context.as_ref()).map(|c| c.cluster.clone());
    kc.clusters
        .iter()
        .find(|c| Some(&c.name) == cluster.as_ref())
        .and_then(|c| c.cluster.as_ref()?.server.clone())
        .map(|s| format!(" at {s}"))
        .unwrap_or_default()
}

/// Asks the server whether the context may do what `fabrik sim` does; names what is missing.
async fn preflight(client: &kube::Client, context: &str, workload: bool) -> Result<(), String> {
    use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
    let mut checks = vec![
        ("create", "", "nodes", "", None),
        ("patch", "", "nodes", "status", None),
        ("patch", "coordination.k8s.io", "leases", "", Some(nodes::LEASE_NS)),
        ("patch", "", "pods", "status", None),
        ("delete", "", "pods", "", None),
        ("patch", "resource.k8s.io", "resourceslices", "", None),
    ];
    if workload {
        checks.push(("create", "", "namespaces", "", None));
        checks.push(("create", "apps", "deployments", "", None));
    }
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut missing = Vec::new();
    for (verb, group, resource, sub, ns) in checks {
        let review: SelfSubjectAccessReview = serde_json::from_value(serde_json::json!({
            "spec": { "resourceAttributes": { "verb": verb, "group": group, "resource": resource,
                "subresource": sub, "namespace": ns } }
        }))
        .map_err(|e| e.to_string())?;
        match api.create(&Default::default(), &review).await {
            Ok(r) if r.status.as_ref().is_some_and(|s| s.allowed) => {}
            Ok(_) => missing
                .push(format!("{verb} {resource}{}", if sub.is_empty() { String::new() } else { format!("/{sub}") })),
            // A server without the review API: let the real requests tell.
            Err(_) => return Ok(()),
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the user of context {context:?} may not {}; fabrik sim plays kubelets and drivers and needs \
             cluster-admin-like rights (use an admin context)",
            missing.join(", ")
        ))
    }
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("fabrik sim: error: {msg}");
    ExitCode::from(1)
}

/// What `fabrik sim` was asked to do (the command line's `sim` options, less the connection).
#[derive(Clone, Debug)]
pub struct Options {
    pub nodes: u32,
    pub seed: u64,
    pub workload: bool,
    pub pods: Option<u32>,
    pub dra_every: u32,
    /// Every Nth node without MIG shares its GPUs (time-slicing, MPS); DRA nodes never do.
    pub sharing_every: u32,
    /// The 1.34 alpha DRA shapes, the DeviceTaintRule and the ComputeDomains (see `alpha`).
    pub dra_alpha: bool,
    /// Cluster API and Metal3 objects for the nodes (see `factory`).
    pub factory: bool,
    pub mig_seconds: u64,
    pub mig_delay_ms: u64,
    pub agents: bool,
    pub cleanup: bool,
}

pub async fn run(args: Options, kubeconfig: Option<PathBuf>, context: Option<String>) -> color_eyre::Result<ExitCode> {
    let conn = match crate::cluster::connect(kubeconfig.as_deref(), context.as_deref()).await {
        Ok(c) => c,
        Err(e) => return Ok(fail(e)),
    };
    let client = conn.client.clone();
    let existing = match nodes::existing_nodes(&client).await {
        Ok(n) => n,
        Err(e) => return Ok(fail(first_contact_error(&conn.context, &server_of(&conn), &e))),
    };
    if let Err(e) = preflight(&client, &conn.context, args.workload).await {
        return Ok(fail(e));
    }
    if args.factory
        && !args.cleanup
        && let Err(e) = factory::check(&client).await
    {
        return Ok(fail(e));
    }
    if args.cleanup {
        return Ok(match cleanup(&client).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        });
    }
    let started = Instant::now();
    let count = args.nodes as usize;
    let mut sim_nodes = model::build_nodes(args.seed, count, args.dra_every, args.sharing_every);
    if args.dra_alpha {
        alpha::assign(&mut sim_nodes);
        for n in sim_nodes.iter().filter(|n| n.alpha.any()) {
            let a = &n.alpha;
            eprintln!(
                "fabrik sim: --dra-alpha on {}: partitionable GPUs {:?}, shared by capacity {:?}, driver taint {:?}",
                n.name, a.partitionable, a.capacity, a.driver_taint
            );
        }
        if !sim_nodes.iter().any(|n| n.dra) {
            eprintln!("fabrik sim: --dra-alpha: no DRA nodes (--dra-every), so no alpha shapes");
        }
    }
    if let Some(real) = sim_nodes.iter().find(|n| existing.get(&n.name) == Some(&false)) {
        return Ok(fail(format!(
            "node {} already exists and is not labelled {}=true; fabrik sim never touches real nodes. \
             Use another --seed/--nodes or another cluster.",
            real.name,
            labels::SIMULATED
        )));
    }
    eprintln!(
        "fabrik sim: context {}: registering {} nodes ({} DRA, {} sharing GPUs, {} GPUs)",
        conn.context,
        count,
        sim_nodes.iter().filter(|n| n.dra).count(),
        sim_nodes.iter().filter(|n| n.sharing.is_some()).count(),
        sim_nodes.iter().map(|n| n.gpus.len()).sum::<usize>()
    );
    if sim_nodes.iter().any(|n| n.dra)
        && let Err(e) = nodes::ensure_device_classes(&client).await
    {
        return Ok(fail(e));
    }
    let shared = nodes::Shared::new(client.clone(), &sim_nodes, args.mig_seconds);
    shared.mig_delay_ms.store(args.mig_delay_ms, std::sync::atomic::Ordering::Relaxed);
    // The kubelets' log endpoint, before the nodes that name it register.
    let (pod_store, pod_writer) = kube::runtime::reflector::store();
    match logs::serve(pod_store).await {
        Ok(port) => shared.kubelet_port.store(port, std::sync::atomic::Ordering::Relaxed),
        Err(e) => return Ok(fail(e)),
    }
    let failed = nodes::register_all(&shared, &sim_nodes, &existing).await;
    if failed > 0 {
        return Ok(fail(format!("{failed} of {count} nodes could not be registered (first errors above)")));
    }
    eprintln!("fabrik sim: {count} nodes registered in {:.1}s", started.elapsed().as_secs_f64());
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(nodes::heartbeats(shared.clone()));
    let (resume_tx, resume_rx) = mpsc::unbounded_channel();
    tasks.spawn(nodes::watch_nodes(shared.clone(), resume_tx.clone()));
    tasks.spawn(kubelet::run(shared.clone(), args.seed, resume_rx, pod_writer));
    // Metal3's operator for simulated BareMetalHosts (when the CRD is installed).
    tasks.spawn(bmo::run(client.clone(), shared.clone(), resume_tx));

    let mut pods = 0;
    if args.workload {
        let plan = workload::plan(&sim_nodes, args.pods);
        pods = plan.gpu_pods();
        eprintln!(
            "fabrik sim: creating the workload: {} namespaces, {} apps, {pods} GPU pods",
            plan.namespaces.len(),
            plan.apps.len()
        );
        if let Err(e) = workload::create(&client, &plan, args.seed).await {
            return Ok(fail(e));
        }
        eprintln!("fabrik sim: workload objects created after {:.1}s", started.elapsed().as_secs_f64());
    }
    if args.dra_alpha && sim_nodes.iter().any(|n| n.dra) {
        // In the namespace of the workload's first DRA app (default without a workload).
        let ns = if args.workload { workload::plan(&sim_nodes, args.pods).dra_namespace() } else { None };
        let ns = ns.as_deref().unwrap_or("default");
        if let Ok(mut waits) = shared.imex_not_ready.lock() {
            for d in alpha::domains(&sim_nodes) {
                for (node, _, ready) in &d.members {
                    if !ready {
                        waits.push(nodes::ImexWait {
                            namespace: ns.to_string(),
                            domain: d.name.to_string(),
                            template: d.template(),
                            node: node.clone(),
                        });
                    }
                }
            }
        }
        if let Err(e) = alpha_api::create(&client, &sim_nodes, ns).await {
            return Ok(fail(e));
        }
    }
    if args.factory {
        match factory::create(&client, &sim_nodes).await {
            Ok(n) => eprintln!(
                "fabrik sim: --factory: {n} Cluster API and Metal3 objects in namespace {}",
                factory::NAMESPACE
            ),
            Err(e) => return Ok(fail(e)),
        }
    }
    // Held until the end: dropping it stops the agents and removes their network namespace.
    let _agents = if args.agents {
        let names: Vec<String> = sim_nodes.iter().map(|n| n.name.clone()).collect();
        let sharing: Vec<podres::Sharing> = sim_nodes.iter().map(podres::Sharing::of_node).collect();
        let exe = std::env::current_exe()?;
        let mut net = match agents::AgentNet::start(&names, &sharing, &exe) {
            Ok(n) => n,
            Err(e) => return Ok(fail(e)),
        };
        if let Err(e) = agents::create_pods(&client, &names, &net).await {
            return Ok(fail(e));
        }
        // The kubelet's PodResources, one socket per node, which each agent reads.
        agents::serve_pod_resources(&client, &mut net);
        eprintln!("fabrik sim: {} fake agents in namespace {}", names.len(), agents::NAMESPACE);
        Some(net)
    } else {
        None
    };
    let left = nodes::wait_schedulable(&shared, std::time::Duration::from_secs(120)).await;
    if left > 0 {
        eprintln!(
            "fabrik sim: warning: {left} nodes still carry the not-ready taint or are not Ready after 120s \
             (is kube-controller-manager's node lifecycle controller running?)"
        );
    }
    eprintln!("fabrik sim: ready after {:.1}s", started.elapsed().as_secs_f64());
    println!("READY nodes={count} pods={pods}");
    use std::io::Write;
    let _ = std::io::stdout().flush();

    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    #[cfg(unix)]
    let terminated = term.recv();
    #[cfg(not(unix))]
    let terminated = std::future::pending::<Option<()>>();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => eprintln!("fabrik sim: interrupted; the simulated nodes stay registered (--cleanup removes them)"),
        _ = terminated => eprintln!("fabrik sim: terminated; the simulated nodes stay registered (--cleanup removes them)"),
        Some(r) = tasks.join_next() => {
            if let Err(e) = r {
                return Ok(fail(format!("an internal task stopped: {e}")));
            }
            eprintln!("fabrik sim: a watch ended; stopping");
        }
    }
    tasks.abort_all();
    Ok(ExitCode::SUCCESS)
}

/// Deletes the workload namespaces, the pods bound to simulated nodes, their ResourceSlices,
/// leases, the `--dra-alpha` DeviceTaintRules and ComputeDomains, and the nodes themselves
/// (all chosen by label; nothing else is touched).
async fn cleanup(client: &kube::Client) -> Result<(), String> {
    let sim = ListParams::default().labels(&format!("{}=true", labels::SIMULATED));
    let nodes_api: Api<Node> = Api::all(client.clone());
    let node_names: Vec<String> = nodes_api
        .list_metadata(&sim)
        .await
        .map_err(|e| format!("listing simulated nodes: {}", describe(&e)))?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();

    let ns_api: Api<Namespace> = Api::all(client.clone());
    let ns_list = ns_api
        .list_metadata(&ListParams::default().labels(&format!("{}=true", workload::WORKLOAD_LABEL)))
        .await
        .map_err(|e| format!("listing workload namespaces: {}", describe(&e)))?;
    let mut namespaces = 0;
    for ns in ns_list.items.iter().filter_map(|n| n.metadata.name.as_deref()) {
        match ns_api.delete(ns, &DeleteParams::default()).await {
            Ok(_) => namespaces += 1,
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => {}
            Err(e) => return Err(format!("deleting namespace {ns}: {}", describe(&e))),
        }
    }
    // Nobody will finish these pods' graceful deletion once the nodes are gone.
    let pods_api: Api<Pod> = Api::all(client.clone());
    let bound = pods_api
        .list(&ListParams::default().fields("spec.nodeName!="))
        .await
        .map_err(|e| format!("listing pods: {}", describe(&e)))?;
    let doomed: Vec<(String, String)> = bound
        .items
        .into_iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some_and(|n| node_names.contains(n)))
        .filter_map(|p| Some((p.metadata.namespace?, p.metadata.name?)))
        .collect();
    let pods = futures::stream::iter(doomed)
        .map(|(ns, name)| {
            let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
            async move { api.delete(&name, &DeleteParams::default().grace_period(0)).await.is_ok() }
        })
        .buffer_unordered(32)
        .filter(|ok| std::future::ready(*ok))
        .count()
        .await;
    let (rules, domains) = alpha_api::cleanup(client).await?;
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let slices_n = delete_all(&slices, &sim, "ResourceSlices").await?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), nodes::LEASE_NS);
    let leases_n = delete_all(&leases, &sim, "leases").await?;
    let nodes_n = delete_names(&nodes_api, node_names.iter().cloned(), "node").await?;
    // Namespaces finish terminating once their pods and claims are gone; wait for that, so that a
    // new run can create them again.
    let ns_lp = ListParams::default().labels(&format!("{}=true", workload::WORKLOAD_LABEL));
    let deadline = Instant::now() + std::time::Duration::from_secs(300);
    let mut announced = false;
    loop {
        let left = ns_api.list_metadata(&ns_lp).await.map(|l| l.items.len()).unwrap_or(0);
        if left == 0 {
            break;
        }
        if Instant::now() >= deadline {
            eprintln!("fabrik sim: cleanup: {left} namespaces are still terminating; giving up waiting");
            break;
        }
        if !announced {
            eprintln!("fabrik sim: cleanup: waiting for {left} namespaces to finish terminating");
            announced = true;
        }
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
    eprintln!(
        "fabrik sim: cleanup: deleted {nodes_n} nodes, {leases_n} leases, {slices_n} ResourceSlices, {pods} pods, \
         {namespaces} namespaces, {rules} DeviceTaintRules, {domains} ComputeDomains"
    );
    Ok(())
}

async fn delete_all<K>(api: &Api<K>, lp: &ListParams, what: &str) -> Result<usize, String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let list = api.list_metadata(lp).await.map_err(|e| format!("listing {what}: {}", describe(&e)))?;
    delete_names(api, list.items.into_iter().filter_map(|i| i.metadata.name), what).await
}

/// Deletes the named objects, 32 at a time; returns how many existed.
async fn delete_names<K>(api: &Api<K>, names: impl Iterator<Item = String>, what: &str) -> Result<usize, String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let results: Vec<Result<bool, String>> = futures::stream::iter(names)
        .map(|name| async move {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => Ok(true),
                Err(e) if is_status(&e, 404) => Ok(false),
                Err(e) => Err(format!("deleting {what} {name}: {}", describe(&e))),
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let mut n = 0;
    for r in results {
        if r? {
            n += 1;
        }
    }
    Ok(n)
}
