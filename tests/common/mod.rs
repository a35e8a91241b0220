//! What the end-to-end tests share: the test control plane, `fabrik sim`, and child
//! processes that stop when the test ends (also when it fails).
#![allow(dead_code)] // each test binary uses its own part of this

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_fabrik");

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A child process stopped on drop (SIGTERM, then SIGKILL), also when the test fails.
pub struct Proc {
    pub child: Child,
    pub what: &'static str,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("{} did not stop on SIGTERM; killing it", self.what);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads the child's stdout until a line starting with `prefix`; returns that line.
pub fn wait_line(child: &mut Child, prefix: &str, timeout: Duration, what: &str, log: &Path) -> String {
    let Some(out) = child.stdout.take() else { panic!("{what}: no stdout") };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.starts_with(prefix) => return line,
            Ok(_) => {}
            Err(_) => {
                let tail = std::fs::read_to_string(log).unwrap_or_default();
                let tail: Vec<&str> = tail.lines().rev().take(40).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                panic!(
                    "{what} did not print {prefix:?} within {timeout:?}; last log lines ({}):\n{}",
                    log.display(),
                    tail.join("\n")
                );
            }
        }
    }
}

pub fn control_plane(dir: &Path) -> (Proc, PathBuf) {
    control_plane_with(dir, &[])
}

pub fn control_plane_with(dir: &Path, extra: &[&str]) -> (Proc, PathBuf) {
    let cp = repo().join("tests/controlplane/cp.sh");
    let build = Command::new(&cp).arg("build").status();
    match build {
        Ok(s) if s.success() => {}
        other => panic!(
            "building the test control plane failed ({other:?}): it needs Go (see tests/controlplane/README.md); \
             `.ci/run` installs and builds it"
        ),
    }
    let bin = Command::new(&cp).arg("path").output().expect("cp.sh path");
    let bin = String::from_utf8_lossy(&bin.stdout).trim().to_string();
    let log = dir.join("up.log");
    let mut child = Command::new(&bin)
        .args(["up", "--dir"])
        .arg(dir)
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).map(Stdio::from).unwrap_or(Stdio::null()))
        .spawn()
        .unwrap_or_else(|e| panic!("start {bin}: {e}"));
    let line =
        wait_line(&mut child, "READY", Duration::from_secs(150), "the control plane", &dir.join("apiserver.log"));
    let kubeconfig = PathBuf::from(line.trim_start_matches("READY").trim());
    (Proc { child, what: "the control plane" }, kubeconfig)
}

/// Starts `fabrik sim` with `args` against the control plane and waits for its READY.
pub fn sim(kubeconfig: &Path, dir: &Path, args: &[&str]) -> Proc {
    let log = dir.join("sim.log");
    let mut child = Command::new(BIN)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("sim")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).map(Stdio::from).unwrap_or(Stdio::null()))
        .spawn()
        .unwrap_or_else(|e| panic!("start fabrik sim: {e}"));
    wait_line(&mut child, "READY", Duration::from_secs(180), "fabrik sim", &log);
    Proc { child, what: "fabrik sim" }
}

/// The names of the nodes `fabrik sim` registered, sorted.
pub async fn sim_nodes(client: &kube::Client) -> Vec<String> {
    let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    let mut names: Vec<String> = api
        .list(&kube::api::ListParams::default().labels("fabrik.io/simulated=true"))
        .await
        .expect("list the simulated nodes")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    names.sort();
    names
}

pub const WAIT: Duration = Duration::from_secs(10);
pub const POLL: Duration = Duration::from_millis(50);

static SERVERS: AtomicUsize = AtomicUsize::new(0);

/// A tmux server on a private socket, killed on drop (also when the test fails).
pub struct Tmux {
    pub socket: String,
    pub home: PathBuf,
}

impl Tmux {
    pub fn start() -> Tmux {
        match Command::new("tmux").arg("-V").output() {
            Ok(o) if o.status.success() => {}
            Ok(o) => panic!("`tmux -V` failed ({}): install a working tmux to run the terminal tests", o.status),
            Err(e) => panic!(
                "tmux is not installed ({e}): the terminal tests drive the real binary through tmux. \
                 Install it (apt-get install tmux / brew install tmux); CI installs it."
            ),
        }
        let n = SERVERS.fetch_add(1, Ordering::SeqCst);
        let socket = format!("fabrik-test-{}-{n}", std::process::id());
        // A home of its own: no user config, theme or keymap changes what the test sees.
        let home = std::env::temp_dir().join(&socket);
        std::fs::create_dir_all(home.join("config")).expect("create a temporary HOME");
        Tmux { socket, home }
    }

    pub fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("tmux {args:?}: {e}"))
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "tmux {args:?} failed: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    pub fn capture(&self) -> String {
        self.ok(&["capture-pane", "-p", "-t", "fabrik"])
    }

    pub fn display(&self, format: &str) -> String {
        self.ok(&["display-message", "-p", "-t", "fabrik", format]).trim().to_string()
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "fabrik"];
        args.extend_from_slice(keys);
        self.ok(&args);
    }

    pub fn literal(&self, text: &str) {
        self.ok(&["send-keys", "-t", "fabrik", "-l", text]);
    }

    /// Polls the screen until `pred` holds; fails with the last screen after `WAIT`.
    pub fn wait_screen(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        self.wait_screen_for(what, WAIT, pred)
    }

    /// Polls the screen until `pred` holds; fails with the last screen after `wait`.
    pub fn wait_screen_for(&self, what: &str, wait: Duration, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + wait;
        loop {
            let s = self.capture();
            if pred(&s) {
                return s;
            }
            if Instant::now() > deadline {
                panic!("timed out after {wait:?} waiting for {what}; the screen:\n{s}");
            }
            std::thread::sleep(POLL);
        }
    }

    /// Polls a `display-message` format until it reads `want`.
    pub fn wait_format(&self, format: &str, want: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let got = self.display(format);
            if got == want {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "timed out after {WAIT:?} waiting for {format} = {want} (it is {got}); the screen:\n{}",
                    self.capture()
                );
            }
            std::thread::sleep(POLL);
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // kill-server leaves the socket file behind.
        let socket = self.run(&["display-message", "-p", "#{socket_path}"]);
        let _ = self.run(&["kill-server"]);
        let path = String::from_utf8_lossy(&socket.stdout).trim().to_string();
        if path.ends_with(&self.socket) {
            let _ = std::fs::remove_file(path);
        }
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// `new-session` arguments for the 140×40 session named "fabrik", with environment entries.
pub fn session<'a>(env: &[&'a str], cmd: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["new-session", "-d", "-s", "fabrik", "-x", "140", "-y", "40"];
    for e in env {
        v.push("-e");
        v.push(e);
    }
    v.extend_from_slice(cmd);
    v
}

/// `kubectl --kubeconfig K ARGS…`: its stdout; fails the test with its output when it fails.
pub fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let o = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("kubectl is needed by this test (.ci/run installs it): {e}"));
    assert!(
        o.status.success(),
        "kubectl {args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Server-side applies `tests/fixtures/PATH` (e.g. `"crds/resource.nvidia.com_computedomains.yaml"`,
/// `"dra-alpha/slice.yaml"`) with kubectl as field manager `fabrik-tests`; fails the test with
/// kubectl's stderr when that fails. A CustomResourceDefinition in the file is waited for until
/// it is Established, so objects of its kind can be created right after.
pub fn install_fixture(kubeconfig: &Path, path: &str) {
    let file = repo().join("tests/fixtures").join(path.trim_start_matches("tests/fixtures/"));
    assert!(file.is_file(), "no fixture {}", file.display());
    let f = file.to_string_lossy();
    let applied = kubectl(
        kubeconfig,
        &["apply", "--server-side", "--force-conflicts", "--field-manager=fabrik-tests", "-o", "name", "-f", &f],
    );
    for crd in applied.lines().filter(|l| l.starts_with("customresourcedefinition.apiextensions.k8s.io/")) {
        kubectl(kubeconfig, &["wait", "--for=condition=Established", "--timeout=30s", crd]);
    }
}

/// A copy of `kubeconfig` whose users authenticate with `token` (a ServiceAccount's, from
/// the TokenRequest API), written beside it as `NAME.kubeconfig`.
pub fn kubeconfig_with_token(kubeconfig: &Path, token: &str, name: &str) -> PathBuf {
    let kc = std::fs::read_to_string(kubeconfig).expect("read the kubeconfig");
    let mut kc: serde_json::Value =
        serde_json::to_value(kube::config::Kubeconfig::from_yaml(&kc).expect("parse the kubeconfig"))
            .expect("kubeconfig as JSON");
    if let Some(users) = kc["users"].as_array_mut() {
        for u in users {
            u["user"] = serde_json::json!({"token": token});
        }
    }
    let path = kubeconfig.with_file_name(format!("{name}.kubeconfig"));
    std::fs::write(&path, serde_json::to_string(&kc).expect("serialize")).expect("write the kubeconfig");
    path
}

/// A Kubernetes object from its JSON.
pub fn obj<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("object json")
}

/// Polls `check` (a read of the API) until it returns `Ok`; fails the test with the last
/// `Err` after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match check().await {
            Ok(v) => return v,
            Err(e) if Instant::now() > deadline => panic!("{what}: not within {timeout:?}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
}

/// Who puts an object back from Git, read from its metadata here (never from fabrik's code).
pub fn gitops_owner(meta: &serde_json::Value) -> serde_json::Value {
    let get = |m: &str, k: &str| meta[m][k].as_str().map(str::trim).filter(|v| !v.is_empty()).map(str::to_string);
    let reverts =
        get("annotations", "kustomize.toolkit.fluxcd.io/reconcile").is_none_or(|v| v.to_lowercase() != "disabled");
    let row = |tool: &str, app: String, via: &str| serde_json::json!({"tool": tool, "app": app, "via": via, "reverts": reverts});
    if let Some(id) = get("annotations", "argocd.argoproj.io/tracking-id") {
        let app = id.split(':').next().unwrap_or_default().to_string();
        let app = match app.split_once('_') {
            Some((ns, a)) if !ns.is_empty() && !a.is_empty() => format!("{ns}/{a}"),
            _ => app,
        };
        return row("argocd", app, "argocd.argoproj.io/tracking-id");
    }
    for (tool, group) in [("flux-kustomization", "kustomize"), ("flux-helmrelease", "helm")] {
        let name_key = format!("{group}.toolkit.fluxcd.io/name");
        if let Some(name) = get("labels", &name_key) {
            let app = match get("labels", &format!("{group}.toolkit.fluxcd.io/namespace")) {
                Some(ns) => format!("{ns}/{name}"),
                None => name,
            };
            return match tool {
                "flux-kustomization" => row(tool, app, "kustomize.toolkit.fluxcd.io/name"),
                _ => row(tool, app, "helm.toolkit.fluxcd.io/name"),
            };
        }
    }
    if let Some(app) = get("labels", "argocd.argoproj.io/instance") {
        return row("argocd", app, "argocd.argoproj.io/instance");
    }
    match get("labels", "app.kubernetes.io/instance") {
        Some(app) => row("argocd-or-helm", app, "app.kubernetes.io/instance"),
        None => serde_json::Value::Null,
    }
}

/// `fabrik snapshot --view VIEW --format json` against the test control plane.
pub fn fabrik_view(kubeconfig: &Path, view: &str) -> serde_json::Value {
    let o = std::process::Command::new(BIN)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["snapshot", "--view", view, "--format", "json"])
        .env("HOME", std::env::temp_dir().join("fabrik-factory-e2e-home"))
        .output()
        .expect("run fabrik");
    assert!(o.status.success(), "fabrik snapshot --view {view}: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("fabrik's JSON: {e}"))
}

/// Polls `check` every half second for up to 30 s; fails with its last complaint.
pub fn settle<T>(what: &str, mut check: impl FnMut() -> Result<T, String>) -> T {
    let mut last = String::new();
    for _ in 0..60 {
        match check() {
            Ok(v) => return v,
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("{what}: {last}")
}
