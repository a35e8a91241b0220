//! `fabrik logs` (the logs pane's stream, `L`) against `kubectl logs` on the same API server,
//! which proxies both to the simulated kubelets' log endpoint: the same lines for the tail,
//! with timestamps, for a container's previous run, and the same refusals (no previous run,
//! no such container); for a pod no node has taken kubectl prints nothing and fabrik says why. A log grows a line every two seconds, so each comparison is
//! bracketed: kubectl, fabrik, kubectl; only a read whose two kubectl reads agree is compared.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use super::BIN;

fn run(bin: &str, kubeconfig: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(bin);
    c.arg("--kubeconfig").arg(kubeconfig).args(args);
    if bin == BIN {
        c.env("HOME", std::env::temp_dir().join("fabrik-crosscheck-home"));
    }
    c.output().unwrap_or_else(|e| panic!("run {bin}: {e}"))
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `logs POD -n NS ARGS` by both clients, bracketed; the difference, if any.
fn same(kubeconfig: &Path, ns: &str, pod: &str, extra: &[&str]) -> Option<String> {
    let mut args = vec!["logs", pod, "-n", ns];
    args.extend(extra);
    for _ in 0..5 {
        let before = run("kubectl", kubeconfig, &args);
        let mine = run(BIN, kubeconfig, &args);
        let after = run("kubectl", kubeconfig, &args);
        assert!(before.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&before.stderr));
        if text(&before) != text(&after) {
            std::thread::sleep(Duration::from_millis(300));
            continue;
        }
        if !mine.status.success() {
            return Some(format!("fabrik {args:?} failed: {}", String::from_utf8_lossy(&mine.stderr)));
        }
        if text(&mine) != text(&before) {
            return Some(format!("fabrik {args:?}:\n{}\nkubectl:\n{}", text(&mine), text(&before)));
        }
        if text(&mine).is_empty() {
            return Some(format!("{args:?}: both read nothing; the log should have lines"));
        }
        return None;
    }
    Some(format!("{args:?}: the log changed between every pair of kubectl reads"))
}

/// Both refuse: kubectl's message is in fabrik's, and fabrik exits 1.
fn both_refuse(kubeconfig: &Path, ns: &str, pod: &str, extra: &[&str], says: &str) -> Option<String> {
    let mut args = vec!["logs", pod, "-n", ns];
    args.extend(extra);
    let k = run("kubectl", kubeconfig, &args);
    let f = run(BIN, kubeconfig, &args);
    let (ke, fe) = (String::from_utf8_lossy(&k.stderr), String::from_utf8_lossy(&f.stderr));
    if k.status.success() || f.status.code() != Some(1) {
        return Some(format!(
            "{args:?}: kubectl {:?} ({ke}), fabrik {:?} ({fe}); both should refuse",
            k.status, f.status
        ));
    }
    (!ke.contains(says) || !fe.contains(says))
        .then(|| format!("{args:?}: {says:?} in kubectl's {ke:?} and fabrik's {fe:?}"))
}

/// The comparisons, on the sim's running pods: one that crashed once (it has a previous
/// run) and one that did not and is not a Job's (it keeps running while it is followed).
pub fn compare(kubeconfig: &Path) -> Vec<String> {
    let pods: Value = serde_json::from_str(&super::kubectl(
        kubeconfig,
        &["get", "pods", "-A", "--field-selector", "status.phase=Running", "-o", "json"],
    ))
    .expect("kubectl JSON");
    let running: Vec<&Value> = pods["items"].as_array().into_iter().flatten().collect();
    let restarts = |p: &Value| p["status"]["containerStatuses"][0]["restartCount"].as_u64().unwrap_or(0);
    let id = |p: &Value| {
        (
            p["metadata"]["namespace"].as_str().unwrap_or("").to_string(),
            p["metadata"]["name"].as_str().unwrap_or("").to_string(),
        )
    };
    let mut failures = Vec::new();
    // Not a Job's pod: a Job ends within minutes, and its log stream with it.
    let lasting = |p: &&&Value| p["metadata"]["ownerReferences"][0]["kind"] != "Job";
    let (Some(crashed), Some(clean)) =
        (running.iter().find(|p| restarts(p) > 0), running.iter().filter(lasting).find(|p| restarts(p) == 0))
    else {
        return vec![format!("logs: want a running pod with a restart and one without among {}", running.len())];
    };
    let ((cns, cpod), (ns, pod)) = (id(crashed), id(clean));
    failures.extend(same(kubeconfig, &ns, &pod, &[]));
    failures.extend(same(kubeconfig, &ns, &pod, &["--tail", "3"]));
    failures.extend(same(kubeconfig, &ns, &pod, &["--tail", "2", "--timestamps"]));
    failures.extend(same(kubeconfig, &cns, &cpod, &["--previous"]));
    failures.extend(same(kubeconfig, &cns, &cpod, &["-p", "--tail", "2"]));
    failures.extend(both_refuse(kubeconfig, &ns, &pod, &["--previous"], "previous terminated container"));
    // A container the pod does not have: kubectl's words differ from fabrik's, which name
    // the pod's containers; both refuse.
    let k = run("kubectl", kubeconfig, &["logs", &pod, "-n", &ns, "-c", "no-such"]);
    let f = run(BIN, kubeconfig, &["logs", &pod, "-n", &ns, "-c", "no-such"]);
    let fe = String::from_utf8_lossy(&f.stderr);
    if k.status.success() || f.status.code() != Some(1) || !fe.contains("has no container \"no-such\"") {
        failures.push(format!("logs -c no-such: kubectl {:?}, fabrik {:?}: {fe}", k.status, f.status));
    }
    // The crashed run's last words, as on-call reads them.
    let prev = text(&run(BIN, kubeconfig, &["logs", &cpod, "-n", &cns, "--previous"]));
    if !prev.contains("exiting with code") {
        failures.push(format!("logs --previous of {cns}/{cpod} should end with the crash:\n{prev}"));
    }
    // A pod no node has taken: kubectl prints nothing; fabrik says why there is no log.
    let pending: Value = serde_json::from_str(&super::kubectl(
        kubeconfig,
        &["get", "pods", "-A", "--field-selector", "spec.nodeName=,status.phase=Pending", "-o", "json"],
    ))
    .expect("kubectl JSON");
    match pending["items"].as_array().and_then(|a| a.first()) {
        Some(p) => {
            let (pns, ppod) = id(p);
            let k = run("kubectl", kubeconfig, &["logs", &ppod, "-n", &pns]);
            let f = run(BIN, kubeconfig, &["logs", &ppod, "-n", &pns]);
            let fe = String::from_utf8_lossy(&f.stderr);
            if !k.status.success()
                || !text(&k).is_empty()
                || f.status.code() != Some(1)
                || !fe.contains("not scheduled yet")
            {
                failures.push(format!(
                    "logs of pending {pns}/{ppod}: kubectl {:?} {:?}, fabrik {:?}: {fe}",
                    k.status,
                    text(&k),
                    f.status
                ));
            }
        }
        None => failures.push("logs: the cross-check has a pending pod (oncall/too-big) to read".to_string()),
    }
    failures.extend(follow(kubeconfig, &ns, &pod));
    failures
}

/// `-f`: both followers, started together with timestamps, see the same new lines. They run
/// until each has read 4 lines (the tail and 3 new ones: 6 s of the log), at most 30 s, so a
/// slow start on a loaded machine does not look like a short stream.
fn follow(kubeconfig: &Path, ns: &str, pod: &str) -> Option<String> {
    use std::io::BufRead;
    use std::sync::{Arc, Mutex};
    let args = ["logs", pod, "-n", ns, "-f", "--tail", "1", "--timestamps"];
    let spawn = |bin: &str| {
        let mut c = Command::new(bin);
        c.arg("--kubeconfig").arg(kubeconfig).args(args).stdout(std::process::Stdio::piped());
        if bin == BIN {
            c.env("HOME", std::env::temp_dir().join("fabrik-crosscheck-home"));
        }
        let mut child = c.spawn().unwrap_or_else(|e| panic!("spawn {bin}: {e}"));
        let read: Arc<Mutex<Vec<String>>> = Arc::default();
        let (out, into) = (child.stdout.take(), read.clone());
        std::thread::spawn(move || {
            for l in out.map(std::io::BufReader::new).into_iter().flat_map(|r| r.lines()).map_while(Result::ok) {
                into.lock().expect("lock").push(l);
            }
        });
        (child, read)
    };
    let ((mut k, kr), (mut f, fr)) = (spawn("kubectl"), spawn(BIN));
    let started = std::time::Instant::now();
    let enough = |r: &Arc<Mutex<Vec<String>>>| r.lock().expect("lock").len() >= 4;
    while !(enough(&kr) && enough(&fr)) && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = (k.kill(), f.kill());
    let _ = (k.wait(), f.wait());
    let (kl, fl) = (kr.lock().expect("lock").clone(), fr.lock().expect("lock").clone());
    // Lines both saw, and every line fabrik saw within the time kubectl read is one kubectl saw.
    let common = fl.iter().filter(|l| kl.contains(l)).count();
    let at = |l: &str| l.split(' ').next().unwrap_or("").to_string();
    let (first_k, last_k) =
        (kl.first().map(|l| at(l)).unwrap_or_default(), kl.last().map(|l| at(l)).unwrap_or_default());
    let stray: Vec<&String> = fl.iter().filter(|l| !kl.contains(l) && at(l) >= first_k && at(l) <= last_k).collect();
    (fl.len() < 4 || common < 2 || !stray.is_empty()).then(|| {
        format!(
            "logs -f {ns}/{pod} for {:.0?}: fabrik {} lines, kubectl {}, {common} in common, differing {stray:?}\nfabrik:\n{}\nkubectl:\n{}",
            started.elapsed(),
            fl.len(),
            kl.len(),
            fl.join("\n"),
            kl.join("\n")
        )
    })
}
