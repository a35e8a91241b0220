//! A real Prometheus (Debian's `prometheus`, installed by .ci/run) scrapes a real
//! `fabrik agent --fake` over loopback: the exposition must parse, and the series must carry
//! the dcgm-exporter names and labels dashboards expect. Then the cockpit's Prometheus source
//! (`--prometheus URL`) queries it: one sample per GPU, equal to Prometheus's own answer at
//! the same instant, each finding its GPU in the model; a Prometheus that stops answering is
//! reported with the reason. Prometheus is required: without it the test fails and says how
//! to install it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_fabrik");

/// Kills the child on drop, so a failing test leaves no process behind.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local addr").port()
}

/// GET over a plain TCP connection: (status, body).
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((status, body))
}

fn wait_for<T>(what: &str, deadline: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + deadline;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "timed out after {deadline:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The scalar value of an instant query, from Prometheus's JSON API.
fn query(port: u16, promql: &str) -> Option<f64> {
    query_at(port, promql, None)
}

fn query_at(port: u16, promql: &str, time: Option<f64>) -> Option<f64> {
    let q: String = promql
        .bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect();
    let at = time.map(|t| format!("&time={t:.3}")).unwrap_or_default();
    let (status, body) = get(port, &format!("/api/v1/query?query={q}{at}"))?;
    if status != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(dechunk(&body).as_str()).ok()?;
    let first = v["data"]["result"].as_array()?.first()?.clone();
    first["value"][1].as_str()?.parse().ok()
}

/// Undo chunked transfer encoding, if the server used it.
fn dechunk(body: &str) -> String {
    if body.trim_start().starts_with('{') {
        return body.to_string();
    }
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}

#[test]
fn prometheus_scrapes_the_fake_agent_with_dcgm_names_and_labels() {
    match Command::new("prometheus").arg("--version").output() {
        Ok(o) if o.status.success() => {}
        other => panic!(
            "prometheus is not installed ({other:?}): this test runs a real Prometheus against the agent. \
             Install it with `apt-get install prometheus` (.ci/run does)."
        ),
    }
    let dir = std::env::temp_dir().join(format!("fabrik-prom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");

    let agent_port = free_port();
    let agent = Guard(
        Command::new(BIN)
            .args(["agent", "--fake", "4", "--node", "gpu-node-1", "--interval", "200ms"])
            .args(["--listen", &format!("127.0.0.1:{agent_port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start fabrik agent"),
    );
    wait_for("the agent's /healthz", Duration::from_secs(15), || {
        get(agent_port, "/healthz").filter(|(s, _)| *s == 200)
    });

    let prom_port = free_port();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: fabrik-agent\n    static_configs:\n      - targets: ['127.0.0.1:{agent_port}']\n"
        ),
    )
    .expect("write prometheus.yml");
    let prom = Guard(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus"),
    );

    // up == 1 means Prometheus fetched and parsed the exposition without error.
    let up = wait_for("Prometheus to scrape the agent", Duration::from_secs(60), || {
        query(prom_port, "up{job=\"fabrik-agent\"}").filter(|v| *v == 1.0)
    });
    assert_eq!(up, 1.0);
    let gpus = wait_for("GPU series", Duration::from_secs(20), || {
        query(prom_port, "count(count by (UUID) (DCGM_FI_DEV_FB_USED))")
    });
    assert_eq!(gpus, 4.0, "memory per GPU (per MIG instance on the MIG GPU)");
    let labelled = query(
        prom_port,
        "count(DCGM_FI_DEV_GPU_TEMP{Hostname=\"gpu-node-1\",modelName!=\"\",device=~\"nvidia[0-9]+\"})",
    );
    assert_eq!(labelled, Some(4.0), "temperature per GPU with Hostname, modelName and device labels");
    let with_pods = query(prom_port, "count(DCGM_FI_DEV_FB_USED{pod!=\"\",namespace!=\"\"})");
    assert!(with_pods.is_some_and(|n| n >= 1.0), "series tied to pods carry pod and namespace: {with_pods:?}");
    let mig = query(prom_port, "count(DCGM_FI_DEV_FB_USED{GPU_I_PROFILE!=\"\",GPU_I_ID!=\"\"})");
    assert!(mig.is_some_and(|n| n >= 1.0), "MIG instances carry GPU_I_PROFILE and GPU_I_ID: {mig:?}");

    // The cockpit's Prometheus source (`fabrik --prometheus URL`): one query for every GPU,
    // evaluated at a fixed time so it can be compared with Prometheus's own answer.
    let (_, snap) = get(agent_port, "/v1/snapshot").expect("the agent's snapshot");
    let snap: serde_json::Value = serde_json::from_str(&dechunk(&snap)).expect("snapshot JSON");
    let mut fleet = fabrik::model::Fleet::new(fabrik::model::Thresholds::default());
    fleet.apply(fabrik::model::Delta::NodeUpsert(fabrik::model::NodeSpec {
        name: "gpu-node-1".into(),
        labels: Vec::new(),
        ready: true,
        cordoned: false,
        cordoned_by: String::new(),
        gpu_model: Some(fabrik::mig::GpuModel::H100_80GB),
        capacity: vec![("nvidia.com/gpu".into(), 4)],
        allocatable: vec![("nvidia.com/gpu".into(), 4)],
        mig_config: "all-disabled".into(),
        mig_state: Default::default(),
        mig_state_since: None,
        ready_since: None,
        created: 0,
    }));
    for g in snap["gpus"].as_array().expect("gpus") {
        fleet.apply(fabrik::model::Delta::GpuUpsert(fabrik::model::GpuSpec {
            uuid: g["uuid"].as_str().expect("uuid").to_string(),
            node: "gpu-node-1".into(),
            index: g["index"].as_u64().expect("index") as u8,
            model: fabrik::mig::GpuModel::H100_80GB,
            memory_mib: g["memory_total_mib"].as_u64().unwrap_or(0) as u32,
            mig_enabled: false,
            instances: Vec::new(),
        }));
    }
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs_f64();
    let url = format!("http://127.0.0.1:{prom_port}");
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let samples = rt.block_on(fabrik::feed::prometheus::query_once(&url, Some(t))).expect("the query");
    let expected = query_at(prom_port, "count(DCGM_FI_DEV_GPU_UTIL{GPU_I_ID=\"\"})", Some(t)).unwrap_or(0.0);
    assert!(expected >= 3.0, "whole-GPU utilisation series: {expected}");
    assert_eq!(samples.len() as f64, expected, "one sample per GPU with a utilisation series: {samples:?}");
    for s in &samples {
        let want =
            query_at(prom_port, &format!("DCGM_FI_DEV_GPU_UTIL{{UUID=\"{}\",GPU_I_ID=\"\"}}", s.gpu_uuid), Some(t));
        assert_eq!(s.sample.util.map(f64::from), want.map(f64::round), "{} at {t}", s.gpu_uuid);
        assert_eq!(s.node_gpu.as_ref().map(|(n, _)| n.as_str()), Some("gpu-node-1"));
    }
    fleet.apply(fabrik::model::Delta::Telemetry(samples.clone()));
    let fed = fleet.gpus.values().filter(|g| g.last_sample_at.is_some()).count();
    assert_eq!(fed, samples.len(), "every sample found its GPU");
    // The refresh loop reports a Prometheus that stops answering, with the reason.
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let feed = rt.spawn(fabrik::feed::prometheus::run(url, Duration::from_secs(1), tx));
    let first = rt.block_on(async { tokio::time::timeout(Duration::from_secs(10), rx.recv()).await });
    assert!(
        matches!(first, Ok(Some(ref b)) if matches!(b.first(), Some(fabrik::model::Delta::Telemetry(t)) if !t.is_empty())),
        "{first:?}"
    );
    drop(prom);
    let trouble = rt.block_on(async {
        loop {
            match tokio::time::timeout(Duration::from_secs(30), rx.recv()).await {
                Ok(Some(b)) => {
                    if let Some(fabrik::model::Delta::Feed {
                        state: fabrik::model::FeedState::Reconnecting { reason, .. },
                        ..
                    }) = b.first()
                    {
                        break reason.clone();
                    }
                }
                other => panic!("no trouble reported after Prometheus stopped: {other:?}"),
            }
        }
    });
    assert!(trouble.contains(&format!("127.0.0.1:{prom_port}")), "{trouble}");
    feed.abort();
    drop(agent);
    let _ = std::fs::remove_dir_all(&dir);
}
