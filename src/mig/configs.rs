//! mig-parted config names and YAML: the names mig-manager understands in the
//! `nvidia.com/mig.config` label (`all-disabled`, `all-balanced`, `all-<profile>`), the
//! layouts they stand for, parsing what a person types (`--layout`), naming a custom
//! layout, and writing the `mig-configs` entry for it (protocols.md §1).

use super::catalog::{GpuModel, ProfileId, catalog, find_profile, get_profile, profile_ids};
use super::planner::{Layout, LayoutError, known_names, plan};

/// Kubernetes label values are at most 63 characters, and a config name ends up as the
/// value of `nvidia.com/mig.config`.
const LABEL_VALUE_MAX: usize = 63;

/// The names mig-parted always generates for `model` (MP `pkg/mig/builder`), in this
/// order: `all-disabled`, `all-enabled`, `all-balanced`, then `all-<profile>` for each
/// profile in catalog order, with `+` written as `.` as mig-parted does in names.
pub fn config_names(model: GpuModel) -> Vec<String> {
    let mut names: Vec<String> =
        ["all-disabled", "all-enabled", "all-balanced"].into_iter().map(String::from).collect();
    names.extend(catalog(model).iter().map(|p| format!("all-{}", p.dotted_name())));
    names
}

/// `all-balanced`, by mig-parted's formula (MP `pkg/mig/builder/balanced.go`, protocols.md
/// §1): on 7-slice GPUs two 1g, one 2g and one 3g, each the base profile (no `+attr`) of
/// that size with the highest max count — so `1g.10gb`, not `1g.20gb`, on an 80GB part.
/// (The 4-slice formula, {1g:2, 2g:1}, concerns the A30, which is not in the catalog.)
fn balanced(model: GpuModel) -> Vec<ProfileId> {
    let mut out = Vec::with_capacity(4);
    for (g, n) in [(1u8, 2usize), (2, 1), (3, 1)] {
        let mut best: Option<(ProfileId, u8)> = None;
        for id in profile_ids(model) {
            let Some(p) = get_profile(model, id) else {
                continue;
            };
            if p.compute_slices != g || p.name.contains('+') {
                continue;
            }
            // Strictly greater keeps the first in catalog order on a tie.
            if best.is_none_or(|(_, max)| p.max_count > max) {
                best = Some((id, p.max_count));
            }
        }
        if let Some((id, _)) = best {
            out.extend(std::iter::repeat_n(id, n));
        }
    }
    out
}

/// The layout a mig-parted config name stands for. Case-insensitive; `all-<profile>` takes
/// the profile with `+` or `.` (`all-1g.10gb+me`, `all-1g.10gb.me`) and means as many of
/// it as fit on one GPU.
pub fn named_config(model: GpuModel, name: &str) -> Result<Layout, LayoutError> {
    let n = name.trim().to_ascii_lowercase();
    match n.as_str() {
        "all-disabled" => return Ok(Layout::Disabled),
        "all-enabled" => return Ok(Layout::Enabled(Vec::new())),
        "all-balanced" => return Ok(Layout::Enabled(balanced(model))),
        _ => {}
    }
    if let Some(rest) = n.strip_prefix("all-") {
        let want = rest.replace('+', ".");
        for id in profile_ids(model) {
            if let Some(p) = get_profile(model, id)
                && p.dotted_name() == want
            {
                return Ok(Layout::Enabled(vec![id; usize::from(p.max_count)]));
            }
        }
    }
    Err(LayoutError::UnknownConfig { name: name.trim().to_string(), known: config_names(model) })
}

/// Reads a layout as a person types it and checks that it fits (by calling [`plan`]):
///
/// - a config name: `all-balanced`, `all-3g.40gb`, `all-disabled`, …;
/// - a custom list: `3g.40gb,2g.20gb,1g.10gb,1g.10gb`, with `2x1g.10gb` (also `2 x`,
///   `2X`, `2*`) for repeats, whitespace allowed around entries, any profile spelling
///   that [`find_profile`] accepts;
/// - a generated name from [`layout_config_name`]: `custom-3g.40gb-2g.20gb-2x1g.10gb`.
pub fn parse_layout(model: GpuModel, input: &str) -> Result<Layout, LayoutError> {
    let t = input.trim();
    if t.is_empty() {
        return Err(LayoutError::Empty);
    }
    let lower = t.to_ascii_lowercase();
    if lower.starts_with("all-") {
        return named_config(model, t);
    }
    let (entries, sep): (Vec<&str>, &str) = match lower.strip_prefix("custom-") {
        // Profile names contain no '-', so a generated name splits cleanly.
        Some(_) => (t["custom-".len()..].split('-').collect(), "-"),
        None => (t.split(',').collect(), ","),
    };
    let bad = |detail: String| LayoutError::BadSyntax { input: t.to_string(), detail };
    // First read every entry, then check counts on the totals, in the same order as
    // `plan` does, before building the list: "1000000x1g.10gb" must cost nothing.
    let mut wanted: Vec<(ProfileId, usize)> = Vec::with_capacity(entries.len());
    for (i, raw) in entries.iter().enumerate() {
        let entry = raw.trim();
        if entry.is_empty() {
            return Err(bad(format!("entry {} is empty (a doubled or trailing '{sep}'?)", i + 1)));
        }
        let (count, name) = split_count(entry).map_err(&bad)?;
        let id = find_profile(model, name).ok_or_else(|| LayoutError::UnknownProfile {
            model,
            profile: name.to_string(),
            known: known_names(model),
        })?;
        wanted.push((id, count));
    }
    let mut seen: Vec<ProfileId> = Vec::new();
    for (id, _) in &wanted {
        if seen.contains(id) {
            continue;
        }
        seen.push(*id);
        let total = wanted.iter().filter(|(other, _)| other == id).fold(0usize, |sum, (_, n)| sum.saturating_add(*n));
        if let Some(p) = get_profile(model, *id)
            && total > usize::from(p.max_count)
        {
            return Err(LayoutError::TooMany { profile: p.name, requested: total, max: p.max_count });
        }
    }
    let ids: Vec<ProfileId> = wanted.iter().flat_map(|(id, n)| std::iter::repeat_n(*id, *n)).collect();
    plan(model, &ids)?;
    Ok(Layout::Enabled(ids))
}

/// Splits `"2x1g.10gb"` into `(2, "1g.10gb")`; an entry without a count is one instance.
/// Profile names also start with digits (`1g…`), so a count is only read when the digits
/// are followed by `x`, `X` or `*`.
fn split_count(entry: &str) -> Result<(usize, &str), String> {
    let digits = entry.len() - entry.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return Ok((1, entry));
    }
    let after = entry[digits..].trim_start();
    let Some(name) = after.strip_prefix(['x', 'X', '*']).map(str::trim_start) else {
        return Ok((1, entry));
    };
    let count: usize = entry[..digits].parse().map_err(|_| format!("count {} is too large", &entry[..digits]))?;
    if count == 0 {
        return Err(format!("\"{entry}\" asks for 0 instances"));
    }
    if name.is_empty() {
        return Err(format!("\"{entry}\" has a count but no profile"));
    }
    Ok((count, name))
}

/// The name to put in `nvidia.com/mig.config` for `layout`: the mig-parted name when the
/// layout equals one (order does not matter), else `custom-<profiles joined by '-'>` in
/// the layout's order with `+` as `.` (`custom-3g.40gb-2g.20gb-1g.10gb-1g.10gb`). When
/// that would pass the 63-character label limit, repeats are folded (`custom-6x1g.23gb-
/// 1g.23gb.me`); [`parse_layout`] reads both forms back.
pub fn layout_config_name(model: GpuModel, layout: &Layout) -> String {
    let ids = match layout {
        Layout::Disabled => return "all-disabled".to_string(),
        Layout::Enabled(ids) if ids.is_empty() => return "all-enabled".to_string(),
        Layout::Enabled(ids) => ids,
    };
    let mut sorted = ids.clone();
    sorted.sort();
    let mut bal = balanced(model);
    bal.sort();
    if sorted == bal {
        return "all-balanced".to_string();
    }
    if let Some(first) = ids.first()
        && let Some(p) = get_profile(model, *first)
        && ids.iter().all(|id| id == first)
        && ids.len() == usize::from(p.max_count)
    {
        return format!("all-{}", p.dotted_name());
    }
    let name_of =
        |id: &ProfileId| get_profile(model, *id).map_or_else(|| format!("unknown{}", id.0), |p| p.dotted_name());
    let long = format!("custom-{}", ids.iter().map(name_of).collect::<Vec<_>>().join("-"));
    if long.len() <= LABEL_VALUE_MAX {
        return long;
    }
    let mut runs: Vec<(ProfileId, usize)> = Vec::new();
    for id in ids {
        match runs.iter_mut().find(|(r, _)| r == id) {
            Some((_, n)) => *n += 1,
            None => runs.push((*id, 1)),
        }
    }
    let parts: Vec<String> =
        runs.iter().map(|(id, n)| if *n == 1 { name_of(id) } else { format!("{n}x{}", name_of(id)) }).collect();
    format!("custom-{}", parts.join("-"))
}

/// The `mig-configs` entry for `layout` under `name`, in mig-parted v1 format
/// (protocols.md §1), indented to sit under `mig-configs:`. Profiles are counted and
/// listed in catalog order, keys quoted and keeping their `+`, as mig-parted expects.
/// Ids outside `model`'s catalog are left out.
///
/// Takes the model because a [`ProfileId`] only means something with it; prefer this to
/// [`mig_parted_yaml`].
pub fn mig_parted_yaml_for(model: GpuModel, name: &str, layout: &Layout) -> String {
    let mut out = format!("  {}:\n    - devices: all\n", yaml_key(name));
    match layout {
        Layout::Disabled => out.push_str("      mig-enabled: false\n"),
        Layout::Enabled(ids) => {
            out.push_str("      mig-enabled: true\n");
            let counts: Vec<(&str, usize)> = catalog(model)
                .iter()
                .enumerate()
                .map(|(i, p)| (p.name, ids.iter().filter(|id| usize::from(id.0) == i).count()))
                .filter(|(_, n)| *n > 0)
                .collect();
            if counts.is_empty() {
                out.push_str("      mig-devices: {}\n");
            } else {
                out.push_str("      mig-devices:\n");
                for (profile, n) in counts {
                    out.push_str(&format!("        \"{profile}\": {n}\n"));
                }
            }
        }
    }
    out
}

/// [`mig_parted_yaml_for`] without the model, for a `name` that [`layout_config_name`]
/// made for `layout`.
///
/// A [`ProfileId`] alone does not say the memory size (`1g.10gb` or `1g.18gb`), so the
/// model is recovered as the one(s) for which `layout_config_name` gives `name` — exact
/// for `custom-…` and `all-<profile>` names, where the profile names are spelled out.
/// Where that leaves models that would write different YAML (`all-balanced` is the same
/// name on every model) or none, the entry is written without `mig-devices` and with a
/// comment saying why, so that mig-parted rejects it instead of creating the wrong
/// instances.
pub fn mig_parted_yaml(name: &str, layout: &Layout) -> String {
    let ids = layout.profiles();
    if ids.is_empty() {
        // MIG off, or on with no instances: the same text on every model.
        return mig_parted_yaml_for(GpuModel::H100_80GB, name, layout);
    }
    let outs: Vec<String> = GpuModel::ALL
        .into_iter()
        .filter(|&m| ids.iter().all(|id| get_profile(m, *id).is_some()) && layout_config_name(m, layout) == name.trim())
        .map(|m| mig_parted_yaml_for(m, name, layout))
        .collect();
    match outs.split_first() {
        Some((first, rest)) if rest.iter().all(|o| o == first) => first.clone(),
        _ => format!(
            "  {}:\n    # fabrik: cannot tell the GPU model from this config name, so the\n    \
             # MIG devices are left out (mig_parted_yaml_for takes the model)\n    - devices: \
             all\n      mig-enabled: true\n",
            yaml_key(name)
        ),
    }
}

/// A whole mig-parted config file holding `entries` (e.g. for a ConfigMap).
pub fn mig_parted_file(model: GpuModel, entries: &[(&str, &Layout)]) -> String {
    let mut out = String::from("version: v1\nmig-configs:\n");
    for (name, layout) in entries {
        out.push_str(&mig_parted_yaml_for(model, name, layout));
    }
    out
}

/// A plain YAML key when the name is label-like, else a double-quoted one, so that an odd
/// name cannot break the document.
fn yaml_key(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if plain {
        return name.to_string();
    }
    let mut q = String::from("\"");
    for c in name.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            c if c.is_control() => q.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

#[cfg(test)]
mod tests {
    use super::super::catalog::profile;
    use super::*;
    use proptest::prelude::*;

    fn names(model: GpuModel, layout: &Layout) -> Vec<&'static str> {
        layout.profiles().iter().map(|id| profile(model, *id).name).collect()
    }

    /// The operator's static ConfigMap names (protocols.md §1) for our five models.
    const OPERATOR_NAMES: &[&str] = &[
        "all-disabled",
        "all-enabled",
        "all-balanced",
        "all-1g.5gb",
        "all-1g.5gb.me",
        "all-2g.10gb",
        "all-3g.20gb",
        "all-4g.20gb",
        "all-7g.40gb",
        "all-1g.10gb",
        "all-1g.10gb.me",
        "all-1g.20gb",
        "all-2g.20gb",
        "all-3g.40gb",
        "all-4g.40gb",
        "all-7g.80gb",
        "all-1g.18gb",
        "all-1g.18gb.me",
        "all-1g.35gb",
        "all-1g.35gb.me",
        "all-2g.35gb",
        "all-3g.71gb",
        "all-4g.71gb",
        "all-7g.141gb",
        "all-1g.23gb",
        "all-1g.23gb.me",
        "all-1g.45gb",
        "all-2g.45gb",
        "all-3g.90gb",
        "all-4g.90gb",
        "all-7g.180gb",
    ];

    #[test]
    fn config_names_per_model() {
        assert_eq!(
            config_names(GpuModel::H100_80GB),
            [
                "all-disabled",
                "all-enabled",
                "all-balanced",
                "all-1g.10gb",
                "all-1g.10gb.me",
                "all-1g.20gb",
                "all-2g.20gb",
                "all-3g.40gb",
                "all-4g.40gb",
                "all-7g.80gb",
            ]
        );
        for m in GpuModel::ALL {
            for n in config_names(m) {
                assert!(OPERATOR_NAMES.contains(&n.as_str()), "{m} {n}");
            }
        }
    }

    #[test]
    fn every_named_config_plans() {
        for m in GpuModel::ALL {
            for n in config_names(m) {
                let layout = named_config(m, &n).unwrap_or_else(|e| panic!("{m} {n}: {e}"));
                plan(m, layout.profiles()).unwrap_or_else(|e| panic!("{m} {n}: {e}"));
                assert_eq!(layout_config_name(m, &layout), n, "{m}");
                assert_eq!(parse_layout(m, &n), Ok(layout.clone()), "{m} {n}");
            }
            for id in profile_ids(m) {
                let p = profile(m, id);
                let layout = named_config(m, &format!("all-{}", p.name)).unwrap_or(Layout::Disabled);
                assert_eq!(layout.profiles().len(), usize::from(p.max_count));
            }
        }
    }

    #[test]
    fn balanced_matches_operator_configs() {
        // protocols.md §1, `all-balanced` device-filters (GO 0400_configmap.yaml).
        let want: [(GpuModel, [&str; 4]); 5] = [
            (GpuModel::A100_40GB, ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]),
            (GpuModel::A100_80GB, ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]),
            (GpuModel::H100_80GB, ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]),
            (GpuModel::H200_141GB, ["1g.18gb", "1g.18gb", "2g.35gb", "3g.71gb"]),
            (GpuModel::B200, ["1g.23gb", "1g.23gb", "2g.45gb", "3g.90gb"]),
        ];
        for (m, profiles) in want {
            let layout = named_config(m, "all-balanced").unwrap_or(Layout::Disabled);
            assert_eq!(names(m, &layout), profiles, "{m}");
            assert!(plan(m, layout.profiles()).is_ok());
        }
    }

    #[test]
    fn named_config_forms() {
        let m = GpuModel::A100_80GB;
        assert_eq!(named_config(m, "all-disabled"), Ok(Layout::Disabled));
        assert_eq!(named_config(m, "all-enabled"), Ok(Layout::Enabled(vec![])));
        assert_eq!(named_config(m, "  ALL-Balanced "), named_config(m, "all-balanced"));
        let me = Ok(Layout::Enabled(vec![ProfileId(1)]));
        assert_eq!(named_config(m, "all-1g.10gb+me"), me);
        assert_eq!(named_config(m, "all-1g.10gb.me"), me);
        assert_eq!(named_config(m, "all-1g.10gb"), Ok(Layout::Enabled(vec![ProfileId(0); 7])));
        match named_config(m, "all-1g.18gb") {
            Err(LayoutError::UnknownConfig { name, known }) => {
                assert_eq!(name, "all-1g.18gb");
                assert_eq!(known, config_names(m));
            }
            other => panic!("{other:?}"),
        }
        assert!(named_config(m, "all-mig-1g.10gb").is_err());
        assert!(named_config(m, "").is_err());
        let e = named_config(m, "nope").map(|_| ()).unwrap_err().to_string();
        assert!(e.starts_with("unknown MIG config \"nope\"; configs: all-disabled, "), "{e}");
    }

    #[test]
    fn parse_layout_syntax() {
        let m = GpuModel::H100_80GB;
        let ok = |s: &str| -> Vec<&'static str> {
            match parse_layout(m, s) {
                Ok(l) => names(m, &l),
                Err(e) => panic!("{s:?}: {e}"),
            }
        };
        assert_eq!(ok("3g.40gb,2g.20gb,1g.10gb,1g.10gb"), ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]);
        assert_eq!(ok("2x1g.10gb,3g.40gb"), ["1g.10gb", "1g.10gb", "3g.40gb"]);
        assert_eq!(ok(" 3g.40gb , 2g.20gb ,\t1g.10gb "), ["3g.40gb", "2g.20gb", "1g.10gb"]);
        assert_eq!(ok("2 x 1g.10gb, 2X2g.20gb"), ["1g.10gb", "1g.10gb", "2g.20gb", "2g.20gb"]);
        assert_eq!(ok("3*2g.20gb"), ["2g.20gb"; 3]);
        assert_eq!(ok("1g.10gb.me,nvidia.com/mig-1g.10gb"), ["1g.10gb+me", "1g.10gb"]);
        assert_eq!(ok("7g.80gb"), ["7g.80gb"]);
        assert_eq!(ok("custom-3g.40gb-2g.20gb-1g.10gb-1g.10gb").len(), 4);
        assert_eq!(ok("custom-3g.40gb-2x1g.10gb"), ["3g.40gb", "1g.10gb", "1g.10gb"]);
        assert_eq!(parse_layout(m, "all-disabled"), Ok(Layout::Disabled));
        assert_eq!(parse_layout(m, "All-Enabled"), Ok(Layout::Enabled(vec![])));

        assert_eq!(parse_layout(m, ""), Err(LayoutError::Empty));
        assert_eq!(parse_layout(m, " \t "), Err(LayoutError::Empty));
        for bad in [
            ",",
            "3g.40gb,,1g.10gb",
            "3g.40gb,",
            "0x1g.10gb",
            "2x",
            "2x  ,1g.10gb",
            "99999999999999999999999999x1g.10gb",
            "custom-",
            "custom-3g.40gb--1g.10gb",
        ] {
            assert!(
                matches!(parse_layout(m, bad), Err(LayoutError::BadSyntax { .. })),
                "{bad:?}: {:?}",
                parse_layout(m, bad)
            );
        }
        assert!(matches!(
            parse_layout(m, "1g.18gb"),
            Err(LayoutError::UnknownProfile { ref profile, .. }) if profile == "1g.18gb"
        ));
        assert!(matches!(parse_layout(m, "x1g.10gb"), Err(LayoutError::UnknownProfile { .. })));
        assert!(matches!(parse_layout(m, "all-5g.50gb"), Err(LayoutError::UnknownConfig { .. })));
        assert_eq!(
            parse_layout(m, "8x1g.10gb"),
            Err(LayoutError::TooMany { profile: "1g.10gb", requested: 8, max: 7 })
        );
        assert_eq!(
            parse_layout(m, "1000000000x1g.10gb"),
            Err(LayoutError::TooMany { profile: "1g.10gb", requested: 1_000_000_000, max: 7 })
        );
        assert_eq!(
            parse_layout(m, "1g.10gb+me, 1g.10gb.me"),
            Err(LayoutError::TooMany { profile: "1g.10gb+me", requested: 2, max: 1 })
        );
        assert!(matches!(parse_layout(m, "3g.40gb,3g.40gb,1g.10gb"), Err(LayoutError::NoPlacement { .. })));
        assert!(matches!(parse_layout(m, "4g.40gb,4g.40gb"), Err(LayoutError::TooMany { .. })));
        let e = parse_layout(m, "3g.40gb,,1g.10gb").map(|_| ()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot read MIG layout \"3g.40gb,,1g.10gb\": entry 2 is empty (a doubled or \
             trailing ','?)"
        );
    }

    #[test]
    fn generated_names() {
        let m = GpuModel::H100_80GB;
        let l = parse_layout(m, "3g.40gb,2g.20gb,1g.10gb,1g.10gb").unwrap_or(Layout::Disabled);
        assert_eq!(layout_config_name(m, &l), "all-balanced");
        let l = parse_layout(m, "3g.40gb,2g.20gb,1g.10gb,1g.10gb+me").unwrap_or(Layout::Disabled);
        assert_eq!(layout_config_name(m, &l), "custom-3g.40gb-2g.20gb-1g.10gb-1g.10gb.me");
        let l = parse_layout(m, "4g.40gb,3g.40gb").unwrap_or(Layout::Disabled);
        assert_eq!(layout_config_name(m, &l), "custom-4g.40gb-3g.40gb");
        assert_eq!(layout_config_name(m, &Layout::Disabled), "all-disabled");
        assert_eq!(layout_config_name(m, &Layout::Enabled(vec![])), "all-enabled");
        // Six 1g.10gb are not all-1g.10gb (which is seven).
        let six = Layout::Enabled(vec![ProfileId(0); 6]);
        assert_eq!(layout_config_name(m, &six), "custom-1g.10gb-1g.10gb-1g.10gb-1g.10gb-1g.10gb-1g.10gb");
        // 65 characters spelled out: folded to stay a valid label value.
        let b = GpuModel::B200;
        let l = parse_layout(b, "6x1g.23gb,1g.23gb+me").unwrap_or(Layout::Disabled);
        assert_eq!(layout_config_name(b, &l), "custom-6x1g.23gb-1g.23gb.me");
        assert_eq!(parse_layout(b, "custom-6x1g.23gb-1g.23gb.me"), Ok(l));
        assert_eq!(layout_config_name(m, &Layout::Enabled(vec![ProfileId(9)])), "custom-unknown9");
    }

    #[test]
    fn yaml_entries() {
        let m = GpuModel::H100_80GB;
        let bal = named_config(m, "all-balanced").unwrap_or(Layout::Disabled);
        assert_eq!(
            mig_parted_yaml_for(m, "all-balanced", &bal),
            "  all-balanced:\n    - devices: all\n      mig-enabled: true\n      mig-devices:\n        \
             \"1g.10gb\": 2\n        \"2g.20gb\": 1\n        \"3g.40gb\": 1\n"
        );
        assert_eq!(
            mig_parted_yaml_for(m, "all-disabled", &Layout::Disabled),
            "  all-disabled:\n    - devices: all\n      mig-enabled: false\n"
        );
        assert_eq!(
            mig_parted_yaml_for(m, "all-enabled", &Layout::Enabled(vec![])),
            "  all-enabled:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {}\n"
        );
        let me = named_config(m, "all-1g.10gb.me").unwrap_or(Layout::Disabled);
        assert!(mig_parted_yaml_for(m, "all-1g.10gb.me", &me).contains("        \"1g.10gb+me\": 1\n"));
        assert!(mig_parted_yaml_for(m, "odd: name", &me).starts_with("  \"odd: name\":\n"));
        assert!(mig_parted_yaml_for(m, "", &me).starts_with("  \"\":\n"));
        // Without the model: recovered from a spelled-out name, refused for all-balanced.
        let l = parse_layout(m, "4g.40gb,2g.20gb,1g.10gb+me").unwrap_or(Layout::Disabled);
        let name = layout_config_name(m, &l);
        assert_eq!(name, "custom-4g.40gb-2g.20gb-1g.10gb.me");
        assert_eq!(mig_parted_yaml(&name, &l), mig_parted_yaml_for(m, &name, &l));
        assert!(mig_parted_yaml(&name, &l).contains("        \"1g.10gb+me\": 1\n"));
        let h200 = named_config(GpuModel::H200_141GB, "all-3g.71gb").unwrap_or(Layout::Disabled);
        assert!(mig_parted_yaml("all-3g.71gb", &h200).contains("        \"3g.71gb\": 2\n"));
        assert_eq!(
            mig_parted_yaml("all-disabled", &Layout::Disabled),
            mig_parted_yaml_for(m, "all-disabled", &Layout::Disabled)
        );
        let y = mig_parted_yaml("all-balanced", &bal);
        assert!(!y.contains("mig-devices"), "{y}");
        assert!(y.contains("# fabrik: cannot tell the GPU model"), "{y}");
        assert!(!mig_parted_yaml("custom-wrong", &l).contains("mig-devices"));
        let file = mig_parted_file(m, &[("all-disabled", &Layout::Disabled), ("all-balanced", &bal)]);
        assert!(file.starts_with("version: v1\nmig-configs:\n  all-disabled:\n"));
        assert!(file.contains("\n  all-balanced:\n"));
    }

    proptest! {
        #[test]
        fn names_round_trip(model_i in 0usize..5, raw in prop::collection::vec(0u8..7, 1..8)) {
            let model = GpuModel::ALL[model_i];
            let ids: Vec<ProfileId> = raw.into_iter().map(ProfileId).collect();
            prop_assume!(plan(model, &ids).is_ok());
            let layout = Layout::Enabled(ids.clone());
            let name = layout_config_name(model, &layout);
            prop_assert!(name.len() <= LABEL_VALUE_MAX, "{}", name);
            prop_assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || "-.".contains(c)));
            let back = parse_layout(model, &name);
            prop_assert!(back.is_ok(), "{} -> {:?}", name, back);
            let mut a = back.unwrap_or(Layout::Disabled).profiles().to_vec();
            let mut b = ids;
            a.sort();
            b.sort();
            prop_assert_eq!(a, b);
        }

        #[test]
        fn parse_layout_never_panics(model_i in 0usize..5, s in "\\PC{0,40}") {
            let _ = parse_layout(GpuModel::ALL[model_i], &s);
            let _ = named_config(GpuModel::ALL[model_i], &s);
            let _ = GpuModel::parse(&s);
            let _ = find_profile(GpuModel::ALL[model_i], &s);
        }

        #[test]
        fn parse_layout_lists(model_i in 0usize..5, raw in prop::collection::vec(0u8..7, 1..8)) {
            let model = GpuModel::ALL[model_i];
            let ids: Vec<ProfileId> = raw.into_iter().map(ProfileId).collect();
            let text: Vec<String> = ids.iter().map(|id| profile(model, *id).name.to_string()).collect();
            let parsed = parse_layout(model, &text.join(" , "));
            match plan(model, &ids) {
                Ok(_) => prop_assert_eq!(parsed, Ok(Layout::Enabled(ids))),
                Err(e) => prop_assert_eq!(parsed, Err(e)),
            }
        }
    }
}
