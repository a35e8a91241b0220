//! Adding a named config to the mig-parted ConfigMap's file, as the file's own style has it.

/// Adds `entry` (a mig-parted config block, two-space indented under `mig-configs:`) to a
/// config file, re-indented to the file's own indentation. `None` when the name is there.
pub fn add_mig_config(text: &str, name: &str, entry: &str) -> Result<Option<String>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let Some(at) = lines.iter().position(|l| l.trim_end() == "mig-configs:") else {
        return Err("it has no top-level `mig-configs:` key".into());
    };
    let indent = lines[at + 1..]
        .iter()
        .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| l.len() - l.trim_start().len())
        .filter(|i| *i > 0)
        .unwrap_or(2);
    let quoted = format!("\"{name}\":");
    if lines[at + 1..].iter().any(|l| {
        let t = l.trim_end();
        l.len() - l.trim_start().len() == indent && (t.trim_start() == format!("{name}:") || t.trim_start() == quoted)
    }) {
        return Ok(None);
    }
    // The entry is written with 2 spaces per level; re-indent it to the file's step by
    // structure: a child is one step in from its parent, and the lines of a `- ` list item
    // stay aligned with the text after the dash.
    let mut block = String::new();
    // (column in the entry, column in the file, is a list item), innermost last; the
    // `mig-configs:` key itself is the root.
    let mut parents: Vec<(usize, usize, bool)> = vec![(0, 0, false)];
    for l in entry.lines().filter(|l| !l.trim().is_empty()) {
        let own = l.len() - l.trim_start().len();
        while parents.len() > 1 && parents.last().is_some_and(|p| p.0 > own) {
            parents.pop();
        }
        let Some(&(col, new_col, dash)) = parents.last() else { break };
        let at = if col == own {
            parents.pop();
            new_col
        } else if dash && own == col + 2 {
            new_col + 2
        } else {
            new_col + indent
        };
        parents.push((own, at, l.trim_start().starts_with("- ")));
        block.push_str(&format!("{}{}\n", " ".repeat(at), l.trim_start()));
    }
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        out.push_str(l);
        out.push('\n');
        if i == at {
            out.push_str(&block);
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mig_configs_are_added_once_in_the_files_indentation() {
        let entry =
            "  custom-x:\n    - devices: all\n      mig-enabled: true\n      mig-devices:\n        \"1g.18gb\": 7\n";
        let file =
            "version: v1\nmig-configs:\n    all-disabled:\n        - devices: all\n          mig-enabled: false\n";
        let out = add_mig_config(file, "custom-x", entry).unwrap().unwrap();
        assert!(out.contains("\n    custom-x:\n        - devices: all\n          mig-enabled: true\n"), "{out}");
        assert!(out.contains("          mig-devices:\n              \"1g.18gb\": 7\n"), "one step in: {out}");
        assert!(out.contains("    all-disabled:"), "the existing config stays: {out}");
        assert_eq!(add_mig_config(&out, "custom-x", entry).unwrap(), None, "added once");
        assert!(add_mig_config("version: v1\n", "custom-x", entry).is_err());
        let two = "version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n";
        let out = add_mig_config(two, "custom-x", entry).unwrap().unwrap();
        assert!(out.contains(entry), "a file in the entry's own style takes it as written: {out}");
    }
}
