//! The module table of the README (and ARCHITECTURE.md) as a test: every `crate::…` path in
//! `src/` names a module its layer may use, so the import arrows point only downward. Test code
//! (a `tests.rs`, a `tests/` folder, or what follows `#[cfg(test)]`) may also use the test
//! fixtures and the simulator, but never the wiring.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Each module of `src/` and the modules it may name with `crate::`. The wiring may use
/// everything and is not listed.
const LAYERS: &[(&str, &[&str])] = &[
    ("quantity", &[]),
    // Reading the files people write (TOML, warnings, layering): config, themes, keymaps.
    ("settings", &[]),
    ("rng", &[]),
    // Cluster text made safe for a terminal.
    ("text", &[]),
    ("mig", &["quantity"]),
    ("model", &["mig", "quantity"]),
    ("cluster", &["model"]),
    ("agent", &["model", "rng", "now_ms"]),
    ("ops", &["model", "mig", "cluster", "quantity", "text", "now_ms"]),
    ("sim", &["model", "mig", "cluster", "ops", "quantity", "rng"]),
    ("feed", &["model", "mig", "cluster", "agent", "ops", "quantity", "sim", "now_ms"]),
    ("kubesim", &["sim", "cluster", "agent", "model", "mig", "quantity", "rng", "now_ms"]),
    ("ui", &["model", "ops", "mig", "quantity", "settings", "text", "now_ms"]),
    // Test fixtures: the demo fleet and a headless cockpit, for tests and screenshots.
    ("testing", &["model", "sim", "ui", "ops", "mig", "quantity"]),
];

/// What test code may use beyond its layer.
const TEST_EXTRA: &[&str] = &["testing", "sim", "model", "mig", "quantity", "ops", "agent", "rng"];

/// The wiring: may use every module, and no module may use it.
const WIRING: &[&str] = &["cli", "config", "live", "main", "demo", "screenshots", "bench", "lib"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a line without its `//` comment (string contents are kept: a path in a string
/// is rare and would only make the check stricter).
fn code(line: &str) -> &str {
    line.find("//").map_or(line, |i| &line[..i])
}

/// Every `crate::NAME` in a piece of code, and `crate::{A, B}` groups.
fn crate_refs(code: &str, out: &mut BTreeSet<String>) {
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue; // `$crate::`, `fabrik_crate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        } else {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
}

#[test]
fn imports_point_only_downward() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(files.len() > 50, "found only {} files under {}", files.len(), src.display());
    let mut wrong = Vec::new();
    let mut seen_modules = BTreeSet::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap_or(f);
        let first = rel.components().next().map(|c| c.as_os_str().to_string_lossy().into_owned()).unwrap_or_default();
        let module = first.trim_end_matches(".rs").to_string();
        seen_modules.insert(module.clone());
        if WIRING.contains(&module.as_str()) {
            continue;
        }
        let Some((_, allowed)) = LAYERS.iter().find(|(m, _)| *m == module) else {
            wrong.push(format!("{}: module `{module}` is in no layer of LAYERS (add it to the table)", rel.display()));
            continue;
        };
        let test_file =
            rel.components().any(|c| c.as_os_str() == "tests") || rel.file_name().is_some_and(|n| n == "tests.rs");
        let Ok(text) = std::fs::read_to_string(f) else {
            wrong.push(format!("{}: unreadable", rel.display()));
            continue;
        };
        let mut in_test = test_file;
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("#[cfg(test)]") {
                in_test = true;
            }
            let mut refs = BTreeSet::new();
            crate_refs(code(line), &mut refs);
            for r in refs {
                let ok = r == module || allowed.contains(&r.as_str()) || (in_test && TEST_EXTRA.contains(&r.as_str()));
                if !ok {
                    let why =
                        if WIRING.contains(&r.as_str()) { "the wiring" } else { "a module above it or beside it" };
                    wrong.push(format!("{}:{}: `{module}` uses `crate::{r}`, {why}", rel.display(), n + 1));
                }
            }
        }
    }
    for (m, _) in LAYERS {
        if !seen_modules.contains(*m) {
            wrong.push(format!("LAYERS names `{m}`, which src/ does not have"));
        }
    }
    assert!(wrong.is_empty(), "imports against the layering ({}):\n{}", wrong.len(), wrong.join("\n"));
}

#[test]
fn the_checker_finds_paths_and_groups() {
    let mut r = BTreeSet::new();
    crate_refs("use crate::{model::Fleet, ops};  let x = crate::ui::App::new(); $crate::no", &mut r);
    assert_eq!(r.into_iter().collect::<Vec<_>>(), ["model", "ops", "ui"]);
}

/// Files outside tests stay small enough to read: about 700 lines at most.
#[test]
fn no_source_file_is_over_700_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut big = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap_or(f);
        let test_file =
            rel.components().any(|c| c.as_os_str() == "tests") || rel.file_name().is_some_and(|n| n == "tests.rs");
        if test_file {
            continue;
        }
        let lines = std::fs::read_to_string(f).map(|t| t.lines().count()).unwrap_or(0);
        if lines > 720 {
            big.push(format!("{}: {lines} lines", rel.display()));
        }
    }
    assert!(big.is_empty(), "split these by concern:\n{}", big.join("\n"));
}
