//! fabrik: a terminal cockpit for GPU clusters on Kubernetes.

// Data from outside (the cluster, agents, files, the terminal) never meets an unwrap:
// non-test code may not unwrap or expect at all (issue 14); tests may.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::process::ExitCode;

use fabrik::cli::{Cli, Cmd, MigCmd};
use fabrik::{demo, mig, screenshots};

fn main() -> ExitCode {
    if let Err(e) = color_eyre::install() {
        eprintln!("fabrik: {e}");
    }
    let cli = Cli::parse_args();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            // Not eprintln!: after an SSH hang-up stderr is a dead terminal, and a panic here
            // would only hide the exit code.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "fabrik: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> color_eyre::Result<ExitCode> {
    match cli.command {
        None => {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
            for a in &cli.agents {
                if let Err(e) = fabrik::feed::agent_stream::parse_agent_url(a) {
                    eprintln!("fabrik: {e}");
                    return Ok(ExitCode::from(2));
                }
            }
            if let Some(Err(e)) = cli.prometheus.as_deref().map(fabrik::feed::prometheus::parse_url) {
                eprintln!("fabrik: {e}");
                return Ok(ExitCode::from(2));
            }
            rt.block_on(fabrik::live::run_cockpit(
                &cli.ui,
                cli.cluster.kubeconfig.clone(),
                fabrik::live::Contexts {
                    names: cli.cluster.contexts.clone(),
                    all: cli.cluster.all_contexts,
                    workloads: cli.cluster.workload_clusters,
                },
                &fabrik::live::Telemetry {
                    agents: cli.agents.clone(),
                    agent_selector: cli.agent_selector.clone(),
                    agent_namespace: cli.agent_namespace.clone(),
                    prometheus: cli.prometheus.clone().map(|u| (u, cli.prometheus_every)),
                },
            ))
        }
        Some(Cmd::Demo(demo)) => {
            let setup = demo::Setup::load(&demo.ui);
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
            rt.block_on(demo::run_demo(setup, demo.sim, demo.ui.readonly, demo.clusters))?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Cmd::Snapshot(args)) if args.demo => demo::snapshot(args),
        Some(Cmd::Snapshot(args)) => {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
            let timeout = std::time::Duration::from_secs(args.timeout_secs);
            rt.block_on(fabrik::live::snapshot(&args, timeout))
        }
        Some(Cmd::Sim(args)) => {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
            let (kubeconfig, context) = (args.cluster.kubeconfig.clone(), args.cluster.context());
            rt.block_on(fabrik::kubesim::run(args.options(), kubeconfig, context))
        }
        Some(Cmd::Agent(args)) => run_agent(args),
        Some(Cmd::Describe(args)) => {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
            rt.block_on(fabrik::live::describe(&args))
        }
        Some(Cmd::Logs(args)) => {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
            rt.block_on(fabrik::live::logs(&args))
        }
        Some(Cmd::Completions { shell }) => {
            let mut out = Vec::new();
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "fabrik", &mut out);
            print_all(&out)
        }
        Some(Cmd::Man { out: None }) => {
            let mut out = Vec::new();
            clap_mangen::Man::new(<Cli as clap::CommandFactory>::command()).render(&mut out)?;
            print_all(&out)
        }
        Some(Cmd::Man { out: Some(dir) }) => {
            std::fs::create_dir_all(&dir)
                .map_err(|e| color_eyre::eyre::eyre!("cannot make the man directory {}: {e}", dir.display()))?;
            clap_mangen::generate_to(<Cli as clap::CommandFactory>::command(), &dir)
                .map_err(|e| color_eyre::eyre::eyre!("cannot write the man pages to {}: {e}", dir.display()))?;
            println!("man pages written to {}", dir.display());
            Ok(ExitCode::SUCCESS)
        }
        Some(Cmd::Audit(args)) => run_audit(&args),
        Some(Cmd::Bench { decode: Some(list), json, .. }) => {
            fabrik::bench::decode::run(&list, 100_000, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Cmd::Bench { nodes, frames, ticks, tenants, json, decode: None }) => {
            let tenants = tenants.unwrap_or(nodes / 13).max(8);
            fabrik::bench::run(fabrik::bench::Options { nodes: nodes as usize, frames, ticks, tenants, json });
            Ok(ExitCode::SUCCESS)
        }
        Some(Cmd::Screenshots { out, seed, theme }) => screenshots::screenshots(&out, seed, theme.as_deref()),
        Some(Cmd::Mig(MigCmd::Profiles { model })) => {
            let Some(m) = mig::GpuModel::parse(&model) else {
                eprintln!("unknown GPU model {model:?}: use one of {}", model_names());
                return Ok(ExitCode::from(1));
            };
            print!("{}", mig::profiles_table(m));
            Ok(ExitCode::SUCCESS)
        }
        Some(Cmd::Mig(MigCmd::Plan { model, layout })) => {
            let Some(m) = mig::GpuModel::parse(&model) else {
                eprintln!("unknown GPU model {model:?}: use one of {}", model_names());
                return Ok(ExitCode::from(1));
            };
            let planned = mig::parse_layout(m, &layout).and_then(|l| match l {
                mig::Layout::Disabled => Ok(None),
                mig::Layout::Enabled(p) => mig::plan(m, &p).map(Some),
            });
            match planned {
                Ok(Some(placed)) => {
                    print!("{}", mig::plan_report(m, &placed));
                    Ok(ExitCode::SUCCESS)
                }
                Ok(None) => {
                    println!("{layout}: MIG disabled on {m}; the GPU is handed out whole");
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("{layout} does not fit a {m}: {e}");
                    Ok(ExitCode::from(1))
                }
            }
        }
    }
}

/// Writes `bytes` to stdout; a reader that went away (`fabrik man | head`) is not an error.
fn print_all(bytes: &[u8]) -> color_eyre::Result<ExitCode> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

fn run_audit(args: &fabrik::cli::AuditArgs) -> color_eyre::Result<ExitCode> {
    use fabrik::ops::audit;
    let Some(dir) = fabrik::config::Paths::discover().data_dir else {
        eprintln!("fabrik audit: there is no data directory (no home directory?): set FABRIK_DATA_DIR");
        return Ok(ExitCode::from(2));
    };
    let path = dir.join(audit::FILE_NAME);
    if args.path {
        println!("{}", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    let (records, bad) = match audit::read(&path) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fabrik audit: cannot read {}: {e}", path.display());
            return Ok(ExitCode::from(1));
        }
    };
    let f = args.filter.to_lowercase();
    let records: Vec<audit::Record> =
        records.into_iter().filter(|r| f.is_empty() || r.target.to_lowercase().contains(&f) || r.kind == f).collect();
    if records.is_empty() {
        println!(
            "no operations recorded in {}{}",
            path.display(),
            if f.is_empty() { "" } else { " (with this filter)" }
        );
    } else {
        // The records hold cluster text (names, messages): escaped, never sent raw.
        print!("{}", fabrik::text::printable_lines(&audit::render(&records, args.records, args.limit as usize)));
    }
    if bad > 0 {
        eprintln!("fabrik audit: {bad} line(s) of {} are not records (a torn write?) and were skipped", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn model_names() -> String {
    mig::GpuModel::ALL.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ")
}

fn run_agent(args: fabrik::cli::AgentArgs) -> color_eyre::Result<ExitCode> {
    use fabrik::agent::{backend::Gpus, fake::FakeGpus, server};
    let node = args
        .node
        .clone()
        .or_else(|| std::env::var("NODE_NAME").ok().filter(|n| !n.is_empty()))
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|h| h.trim().to_string()))
        .unwrap_or_else(|| "localhost".into());
    let backend: Box<dyn Gpus> = match args.fake {
        Some(n) => Box::new(FakeGpus::new(&node, n, args.seed)),
        None => match fabrik::agent::nvml::open(&node) {
            Ok(b) => Box::new(b),
            Err(e) => {
                eprintln!("fabrik agent: {e}");
                return Ok(ExitCode::from(2));
            }
        },
    };
    let backend_name = backend.name();
    if let Some(parent) = args.parent {
        // Started by `fabrik sim --agents`: go when it goes, even if it was killed.
        let proc_dir = std::path::PathBuf::from(format!("/proc/{parent}"));
        std::thread::spawn(move || {
            while proc_dir.exists() {
                std::thread::sleep(std::time::Duration::from_secs(2));
            }
            std::process::exit(0);
        });
    }
    let cfg =
        server::AgentConfig::new(args.listen, args.interval, args.max_readers as usize, args.max_connections as usize);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    // Which pod the kubelet gave each GPU: its socket on a node; a fake node has none
    // unless one is named (`fabrik sim --agents` plays the kubelet).
    let socket = match (&args.pod_resources, args.fake) {
        (Some(p), _) if p.as_os_str().is_empty() => None,
        (Some(p), _) => Some(p.clone()),
        (None, None) => Some(std::path::PathBuf::from(fabrik::agent::podres::DEFAULT_SOCKET)),
        (None, Some(_)) => None,
    };
    rt.block_on(async move {
        let allocations = socket.map(|socket| {
            let a = fabrik::agent::podres::Allocations::default();
            tokio::spawn(fabrik::agent::podres::poll(socket, std::time::Duration::from_secs(2), a.clone()));
            a
        });
        let shared = server::spawn_sampler(backend, cfg.interval, allocations)?;
        let listener = tokio::net::TcpListener::bind(cfg.listen)
            .await
            .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {}: {e}", cfg.listen)))?;
        eprintln!("fabrik agent: serving {node} on http://{} ({backend_name} backend)", cfg.listen);
        server::serve(listener, shared, cfg).await
    })?;
    Ok(ExitCode::SUCCESS)
}
