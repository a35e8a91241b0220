//! Terminal tests (ARCHITECTURE "Tests, in layers" 5): the real binary in a real terminal.
//!
//! `fabrik demo` runs under `sh` in a detached tmux session of a fixed size on its own
//! socket; the test types into it with `send-keys`, reads the screen with `capture-pane`,
//! and after `q` checks that the terminal is as fabrik found it (primary screen, no mouse
//! reporting, cursor shown, cooked mode: the shell's `read` echoes and ends on Enter), and
//! that fabrik's exit status, passed on by the shell, is 0 on the dead pane. tmux is
//! required: without it the test fails and says to install it (CI installs it).
//!
//! Also the one-shot subcommands: exit codes and output of `snapshot`, `mig` and bare
//! `fabrik`.

use std::process::{Command, Output};
use std::time::Instant;

mod common;
use common::{BIN, POLL, Tmux, WAIT, session};

/// The status line: the second line from the bottom of a 40-line screen.
fn status_line(screen: &str) -> &str {
    screen.lines().nth(38).unwrap_or("")
}

#[test]
fn demo_starts_navigates_quits_and_restores_the_terminal() {
    let t = Tmux::start();
    let home = t.home.to_string_lossy().into_owned();
    let config = t.home.join("config").to_string_lossy().into_owned();
    let env_home = format!("HOME={home}");
    let env_config = format!("XDG_CONFIG_HOME={config}");
    // One tmux invocation, so remain-on-exit is set before anything can exit: the pane
    // stays (dead) after the shell ends, with fabrik's exit status.
    let script = "\"$0\" demo; s=$?; printf '\\nfabrik exited with status %s\\n' \"$s\"; \
                  read line; printf 'read %s\\n' \"$line\"; exit \"$s\"";
    let mut args = vec!["start-server", ";", "set-option", "-g", "remain-on-exit", "on", ";"];
    args.extend(session(&[&env_home, &env_config], &["sh", "-c", script, BIN]));
    t.ok(&args);
    assert_eq!(t.display("#{window_width}x#{window_height}"), "140x40");

    // Wait for a whole frame: a capture can land while one is still being written.
    let s = t.wait_screen("the fleet view", |s| s.contains("Fleet [48/48]") && s.contains("h100-0000"));
    assert!(s.contains("1 Fleet │ 2 GPUs │ 3 Tenants"), "{s}");
    assert_eq!(t.display("#{pane_dead}"), "0");
    assert_eq!(t.display("#{alternate_on}"), "1", "the cockpit runs on the alternate screen");
    assert_eq!(t.display("#{mouse_any_flag}"), "1", "the cockpit captures the mouse");

    // :tenants opens the tenants view.
    t.literal(":tenants");
    t.wait_screen("the typed command line", |s| status_line(s).starts_with(":tenants"));
    t.keys(&["Enter"]);
    let s = t.wait_screen("the tenants view", |s| s.contains("Tenants [") && s.contains("llm-pretrain"));
    assert!(s.contains("TENANT"), "{s}");

    // Tab moves on to the quotas view.
    t.keys(&["Tab"]);
    let s = t.wait_screen("the quotas view", |s| s.contains("Quotas ["));
    assert!(s.contains("requests.nvidia.com/gpu"), "{s}");

    // / filters live; the count in the title drops, Esc restores every row.
    let all = s.lines().find(|l| l.contains("Quotas [")).map(str::to_string).unwrap_or_default();
    t.keys(&["/"]);
    t.literal("speech");
    let s = t.wait_screen("the filtered quotas", |s| s.contains("Quotas [2/") && status_line(s).starts_with("/speech"));
    assert!(!s.contains("llm-pretrain"), "{s}");
    t.keys(&["Escape"]);
    let s = t.wait_screen("the unfiltered quotas", |s| s.contains("llm-pretrain") && !status_line(s).starts_with('/'));
    assert!(s.contains(all.trim_end_matches('─').trim()), "the row count is back: {all}\n{s}");

    // q quits: the shell is back, on a restored terminal.
    t.keys(&["q"]);
    let s = t.wait_screen("the shell after fabrik", |s| s.contains("fabrik exited with status"));
    assert!(s.contains("fabrik exited with status 0"), "{s}");
    assert!(!s.contains("Fleet [") && !s.contains("Quotas ["), "the cockpit is still on the screen:\n{s}");
    assert_eq!(t.display("#{alternate_on}"), "0", "the alternate screen was left on");
    assert_eq!(t.display("#{mouse_any_flag}"), "0", "mouse reporting was left on");
    assert_eq!(t.display("#{cursor_flag}"), "1", "the cursor was left hidden");
    // Cooked mode again: what is typed echoes, and Enter ends the shell's `read`.
    t.literal("typed-after-quit");
    t.wait_screen("the echo of typed text", |s| s.contains("typed-after-quit"));
    t.keys(&["Enter"]);
    t.wait_screen("the shell's read to finish", |s| s.contains("read typed-after-quit"));
    t.wait_format("#{pane_dead}", "1");
    // fabrik's own status was checked above (the shell printed it); tmux's record of the
    // shell's status is sometimes left empty by tmux itself, but must never be non-zero.
    let status = t.display("#{pane_dead_status}");
    assert!(status == "0" || status.is_empty(), "the shell exited with {status}:\n{}", t.capture());
    assert_eq!(t.display("#{alternate_on}"), "0");
}

fn fabrik(args: &[&str]) -> Output {
    let home = std::env::temp_dir().join(format!("fabrik-cli-test-{}", std::process::id()));
    Command::new(BIN)
        .args(args)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env_remove("KUBECONFIG")
        .output()
        .unwrap_or_else(|e| panic!("run fabrik {args:?}: {e}"))
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn one_shot_subcommands_exit_codes_and_output() {
    // The agent without a driver says so and names --fake (this machine has no GPU; on a
    // GPU machine it would start serving, so only check when the library is absent).
    if !std::path::Path::new("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1").exists() {
        let o = fabrik(&["agent", "--listen", "127.0.0.1:0"]);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("no NVIDIA driver") && err.contains("--fake"), "{err}");
    }
    // snapshot as JSON: parses, names the view, and has the tenants as rows.
    let o = fabrik(&["snapshot", "--demo", "--view", "tenants", "--format", "json"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"));
    assert_eq!(doc["view"], "tenants");
    let rows = doc["rows"].as_array().expect("rows is an array");
    assert!(rows.len() >= 5, "{rows:?}");
    let names: Vec<&str> = rows.iter().filter_map(|r| r["tenant"].as_str()).collect();
    assert!(names.contains(&"llm-pretrain"), "{names:?}");
    assert_eq!(doc["schema"], "fabrik.snapshot/v1");
    // Typed (docs/snapshot.md): counts are numbers, a missing quota is null.
    assert!(
        rows.iter().all(|r| (r["gpu_quota_hard"].is_number() || r["gpu_quota_hard"].is_null())
            && r["requested_gpus"].is_number()
            && r["status"].is_string()),
        "{rows:?}"
    );

    // A layout that fits: exit 0 with one line per placement.
    let o = fabrik(&["mig", "plan", "--model", "H100-80GB", "3g.40gb,2g.20gb,1g.10gb,1g.10gb"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("H100-80GB: 4 MIG instances"), "{out}");
    let placements: Vec<&str> = out.lines().filter(|l| l.contains("placement")).collect();
    assert_eq!(placements.len(), 4, "{out}");
    for p in ["3g.40gb", "2g.20gb", "1g.10gb"] {
        assert!(placements.iter().any(|l| l.trim_start().starts_with(p)), "no placement for {p}:\n{out}");
    }

    // A layout that does not fit: exit 1 with the planner's reason.
    let o = fabrik(&["mig", "plan", "--model", "H100-80GB", "3g.40gb,3g.40gb,1g.10gb"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    let all = format!("{out}{err}");
    assert!(all.contains("does not fit a H100-80GB"), "{all}");
    assert!(all.contains("9 memory slices asked for, 8 exist"), "{all}");

    // An unknown model: exit 1 naming the valid ones.
    let o = fabrik(&["mig", "profiles", "--model", "bogus"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(err.contains("unknown GPU model \"bogus\""), "{err}");
    for m in ["A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "B200"] {
        assert!(err.contains(m), "{m} not named: {err}");
    }

    // Known model: the profiles table.
    let o = fabrik(&["mig", "profiles", "--model", "H100-80GB"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(out.contains("1g.10gb") && out.contains("7g.80gb"), "{out}");

    // No subcommand and no kubeconfig anywhere: exit 2, pointing at the demo.
    let o = fabrik(&[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    assert!(err.contains("no kubeconfig found") && err.contains("fabrik demo"), "{err}");
    assert!(out.is_empty(), "{out}");

    // A kubeconfig that is not there, one that is not YAML, a context it does not have.
    let o = fabrik(&["--kubeconfig", "/nonexistent/kubeconfig"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("/nonexistent/kubeconfig") && err.contains("no such file"), "{err}");
    let dir = std::env::temp_dir().join(format!("fabrik-kc-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let broken = dir.join("broken");
    std::fs::write(&broken, "clusters: [this is: not: yaml").expect("write");
    let o = fabrik(&["--kubeconfig", broken.to_str().unwrap_or_default(), "snapshot"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot read kubeconfig") && err.contains("--kubeconfig"), "{err}");
    let good = dir.join("config");
    std::fs::write(
        &good,
        "apiVersion: v1\nkind: Config\ncurrent-context: one\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n\
         users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: one\n  context: {cluster: c, user: u}\n",
    )
    .expect("write");
    let o = fabrik(&["--kubeconfig", good.to_str().unwrap_or_default(), "--context", "nope", "snapshot"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("context \"nope\" is not in") && err.contains("it has: one"), "{err}");
    // An API server that is not there: the snapshot gives up with the watch errors.
    let o = fabrik(&["--kubeconfig", good.to_str().unwrap_or_default(), "snapshot", "--timeout-secs", "3"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("not listed within 3s") && err.contains("retrying with backoff"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `git` in the source tree, for what the binary should say it was built from.
fn git(args: &[&str]) -> String {
    let o = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("git {args:?}: {e}"));
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn version_names_the_commit_and_completions_and_man_pages_cover_every_subcommand() {
    // --version: the package version and this checkout's commit (asked of git here, not of
    // the build script), `-dirty` only when the tree has uncommitted changes.
    let o = fabrik(&["--version"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let head = git(&["rev-parse", "--short=12", "HEAD"]);
    let clean = format!("fabrik {} (git {head})", env!("CARGO_PKG_VERSION"));
    let dirty = format!("fabrik {} (git {head}-dirty)", env!("CARGO_PKG_VERSION"));
    let changed = !git(&["status", "--porcelain", "--untracked-files=no"]).is_empty();
    let line = out.trim();
    assert!(line == clean || (changed && line == dirty), "--version said {line:?}; HEAD is {head}");

    // The subcommands, as `fabrik --help` lists them.
    let (help, _) = text(&fabrik(&["--help"]));
    let subcommands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .and_then(|s| s.split("Options:").next())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| *w != "help")
        .collect();
    assert!(subcommands.contains(&"snapshot") && subcommands.contains(&"man"), "{help}");

    // bash: the script parses (bash -n) and completes every subcommand.
    let o = fabrik(&["completions", "bash"]);
    let (bash, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let mut check = Command::new("bash")
        .arg("-n")
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("bash");
    std::io::Write::write_all(check.stdin.as_mut().expect("stdin"), bash.as_bytes()).expect("write");
    let checked = check.wait_with_output().expect("bash -n");
    assert!(checked.status.success(), "bash -n: {}", String::from_utf8_lossy(&checked.stderr));
    for sub in &subcommands {
        assert!(bash.contains(&format!("fabrik,{sub})")), "bash completion lacks {sub}");
    }
    // zsh and fish: the shells' own headers, every subcommand offered.
    let (zsh, _) = text(&fabrik(&["completions", "zsh"]));
    assert!(zsh.starts_with("#compdef fabrik"), "{}", &zsh[..zsh.len().min(200)]);
    let (fish, _) = text(&fabrik(&["completions", "fish"]));
    for sub in &subcommands {
        assert!(zsh.contains(&format!("'{sub}:")), "zsh completion lacks {sub}");
        assert!(fish.contains(&format!("-a \"{sub}\"")), "fish completion lacks {sub}");
    }
    // An unknown shell: clap names the ones there are, and nothing is printed.
    let o = fabrik(&["completions", "tcsh"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(out.is_empty() && err.contains("possible values") && err.contains("bash"), "{err}");

    // man: a page of section 1 naming the version, with every subcommand in it; --out
    // writes a page per subcommand.
    let (page, _) = text(&fabrik(&["man"]));
    assert!(page.contains(&format!(".TH fabrik 1  \"{line}\"")), "{}", &page[..page.len().min(300)]);
    let listed = page.split(".SH SUBCOMMANDS").nth(1).unwrap_or_default();
    for sub in &subcommands {
        assert!(listed.contains(&format!("fabrik\\-{sub}(1)")), "man page lacks {sub}:\n{listed}");
    }
    let dir = std::env::temp_dir().join(format!("fabrik-man-test-{}", std::process::id()));
    let o = fabrik(&["man", "--out", dir.to_str().expect("utf-8 temp dir")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).1);
    for sub in &subcommands {
        let p = dir.join(format!("fabrik-{sub}.1"));
        let body = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(body.contains(&format!(".TH fabrik-{sub} 1")), "{}: {body}", p.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn broken_theme_and_keymap_files_warn_and_the_cockpit_starts_with_the_defaults() {
    let t = Tmux::start();
    let dir = t.home.join("config").join("fabrik");
    std::fs::create_dir_all(dir.join("themes")).expect("themes dir");
    std::fs::create_dir_all(dir.join("keymaps")).expect("keymaps dir");
    std::fs::write(dir.join("themes/dark.toml"), "[styles]\n\"gpu.util.high\" = \"blurple\"\n").expect("theme");
    std::fs::write(dir.join("keymaps/default.toml"), "[normal]\nquit = [\"q\"]\ndrian = [\"D\"]\n").expect("keymap");
    std::fs::write(dir.join("config.toml"), "fps = 0\n").expect("config");
    let env_config = format!("FABRIK_CONFIG_DIR={}", dir.to_string_lossy());
    let env_home = format!("HOME={}", t.home.to_string_lossy());
    t.ok(&session(&[&env_home, &env_config], &[BIN, "demo"]));
    let s = t.wait_screen("the fleet view", |s| s.contains("Fleet [48/48]"));
    let status = status_line(&s);
    assert!(status.contains("config warning(s), defaults used"), "{s}");
    // Every warning is in the events view, naming the file, the key and the problem.
    t.keys(&["6"]);
    let s = t.wait_screen("the events view", |s| s.contains("ConfigWarning"));
    assert!(s.contains("blurple"), "the bad colour is named:\n{s}");
    assert!(s.contains("drian"), "the unknown command is named:\n{s}");
    assert!(s.contains("fps"), "the out-of-range setting is named:\n{s}");
    // The defaults still work: `q` from the user file quits, and the session ends with it.
    t.keys(&["q"]);
    let deadline = Instant::now() + WAIT;
    while t.run(&["has-session", "-t", "fabrik"]).status.success() {
        assert!(Instant::now() < deadline, "fabrik did not quit on q:\n{}", t.capture());
        std::thread::sleep(POLL);
    }
}

#[test]
fn yank_sends_the_selected_name_and_a_panes_text_to_the_terminal_clipboard_by_osc_52() {
    let t = Tmux::start();
    let home = format!("HOME={}", t.home.to_string_lossy());
    let config = format!("XDG_CONFIG_HOME={}", t.home.join("config").to_string_lossy());
    // tmux takes an application's OSC 52 into its paste buffer when set-clipboard is on, as
    // a terminal takes it into the desktop's clipboard (through SSH too: it is only bytes).
    let mut args = vec!["start-server", ";", "set-option", "-g", "set-clipboard", "on", ";"];
    args.extend(session(&[&home, &config], &[BIN, "demo"]));
    t.ok(&args);
    let s = t.wait_screen("the fleet view", |s| s.contains("Fleet [48/48]"));
    // The selected row is the first under the header.
    let row = s.lines().skip_while(|l| !l.contains("NAME")).nth(1).unwrap_or("");
    let node = row.trim_start_matches(['│', ' ', '▶']).split_whitespace().next().unwrap_or("").to_string();
    assert!(node.contains("-0"), "a node name in {row:?}");
    let buffer = |t: &Tmux| String::from_utf8_lossy(&t.run(&["show-buffer"]).stdout).into_owned();
    t.keys(&["Y"]);
    let deadline = Instant::now() + WAIT;
    while buffer(&t) != node && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    assert_eq!(buffer(&t), node, "the clipboard holds the selected node");
    let s = t.wait_screen("the copied message", |s| status_line(s).contains("copied"));
    assert!(status_line(&s).contains(&format!("copied {node} to the terminal's clipboard")), "{s}");
    // In a pane, Y copies all of its text (here the demo's answer to :kubectl).
    t.literal(":kubectl get nodes");
    t.keys(&["Enter"]);
    t.wait_screen("the kubectl pane", |s| s.contains("no cluster for kubectl"));
    t.keys(&["Y"]);
    let deadline = Instant::now() + WAIT;
    while !buffer(&t).contains("no cluster for kubectl") && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    assert!(buffer(&t).starts_with("# kubectl get nodes: the simulated factory has no cluster"), "{}", buffer(&t));
    t.keys(&["Escape", "q"]);
}
