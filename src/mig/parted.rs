//! Editing a mig-parted config file (the `config.yaml` of the GPU operator's mig-parted
//! ConfigMap): adding one entry under `mig-configs` without ever corrupting what is there.
//!
//! The file is parsed with a YAML parser (serde-saphyr) before anything is written, and the
//! result is parsed again and compared with what it must be: the same document with one
//! more config. Where the file's own text can take the entry (a block-style `mig-configs:`
//! line, the usual case), the entry is inserted there, re-indented to the file's style, so
//! the person's comments and layout stay; otherwise (flow style, a key with a comment, a
//! layout the insertion does not reproduce) the whole document is written out again from
//! its parsed form, which keeps every config but not the comments. Input that is not a
//! mig-parted document is refused, and nothing is written.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// The key mig-parted reads its configs from.
const CONFIGS_KEY: &str = "mig-configs";

/// A YAML value with its mappings in document order (anchors and merge keys resolved by
/// the parser), enough to compare two documents and to write one out.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Yaml {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Yaml>),
    Map(Vec<(Yaml, Yaml)>),
}

impl Yaml {
    fn as_str(&self) -> Option<&str> {
        match self {
            Yaml::Str(s) => Some(s),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Yaml {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Yaml, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Yaml;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a YAML value")
            }
            fn visit_unit<E>(self) -> Result<Yaml, E> {
                Ok(Yaml::Null)
            }
            fn visit_none<E>(self) -> Result<Yaml, E> {
                Ok(Yaml::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Yaml, D::Error> {
                Yaml::deserialize(d)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Yaml, E> {
                Ok(Yaml::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Yaml, E> {
                Ok(Yaml::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Yaml, E> {
                Ok(match i64::try_from(v) {
                    Ok(i) => Yaml::Int(i),
                    Err(_) => Yaml::UInt(v),
                })
            }
            fn visit_f64<E>(self, v: f64) -> Result<Yaml, E> {
                Ok(Yaml::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Yaml, E> {
                Ok(Yaml::Str(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<Yaml, E> {
                Ok(Yaml::Str(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Yaml, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = a.next_element()? {
                    out.push(v);
                }
                Ok(Yaml::Seq(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Yaml, A::Error> {
                let mut out = Vec::new();
                while let Some(kv) = a.next_entry()? {
                    out.push(kv);
                }
                Ok(Yaml::Map(out))
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for Yaml {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Yaml::Null => s.serialize_unit(),
            Yaml::Bool(b) => s.serialize_bool(*b),
            Yaml::Int(i) => s.serialize_i64(*i),
            Yaml::UInt(u) => s.serialize_u64(*u),
            Yaml::Float(f) => s.serialize_f64(*f),
            Yaml::Str(t) => s.serialize_str(t),
            Yaml::Seq(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for i in items {
                    seq.serialize_element(i)?;
                }
                seq.end()
            }
            Yaml::Map(pairs) => {
                let mut map = s.serialize_map(Some(pairs.len()))?;
                for (k, v) in pairs {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

/// Parses one YAML document; the error is the parser's first line (where and what).
pub(crate) fn parse(text: &str) -> Result<Yaml, String> {
    serde_saphyr::from_str::<Yaml>(text).map_err(|e| {
        let e = e.to_string();
        e.lines().find(|l| !l.trim().is_empty()).unwrap_or("unreadable").trim().to_string()
    })
}

/// Adds `entry` (one mig-parted config, `  name:` and its list, written two-space indented
/// under `mig-configs:` as [`super::mig_parted_yaml_for`] writes it) to the config file
/// `text`. `Ok(None)` when the file already has a config called `name` (nothing to do);
/// `Ok(Some(new text))` with every config of the file kept and the new one added; `Err`
/// with the reason when `text` is not a mig-parted file this can safely add to (then
/// nothing must be written).
pub fn add_config(text: &str, name: &str, entry: &str) -> Result<Option<String>, String> {
    let doc = parse(text).map_err(|e| format!("it is not valid YAML: {e}"))?;
    let Yaml::Map(top) = &doc else {
        return Err(match doc {
            Yaml::Null => format!("it has no top-level `{CONFIGS_KEY}:` key (the file is empty)"),
            _ => format!("it is not a YAML mapping with a top-level `{CONFIGS_KEY}:` key"),
        });
    };
    let Some(at) = top.iter().position(|(k, _)| k.as_str() == Some(CONFIGS_KEY)) else {
        return Err(format!("it has no top-level `{CONFIGS_KEY}:` key"));
    };
    let configs: &[(Yaml, Yaml)] = match &top[at].1 {
        Yaml::Map(m) => m,
        Yaml::Null => &[],
        _ => return Err(format!("its `{CONFIGS_KEY}` is not a mapping of config names")),
    };
    if configs.iter().any(|(k, _)| k.as_str() == Some(name)) {
        return Ok(None);
    }
    let new = match parse(entry) {
        Ok(Yaml::Map(m)) if m.len() == 1 && m[0].0.as_str() == Some(name) => m.into_iter().next(),
        _ => None,
    };
    let Some(new) = new else {
        return Err(format!("fabrik's entry for config {name} is not one YAML mapping named {name} (a fabrik bug)"));
    };
    // What the file must say afterwards: the same, with the new config first under
    // `mig-configs` (where the text insertion puts it).
    let mut want_top = top.clone();
    let mut want_configs = vec![new];
    want_configs.extend(configs.iter().cloned());
    want_top[at].1 = Yaml::Map(want_configs);
    let want = Yaml::Map(want_top);

    if let Some(out) = insert_text(text, entry)
        && parse(&out).is_ok_and(|got| got == want)
    {
        return Ok(Some(out));
    }
    let out = serde_saphyr::to_string(&want).map_err(|e| format!("cannot write it back as YAML: {e}"))?;
    match parse(&out) {
        Ok(got) if got == want => Ok(Some(out)),
        _ => Err(format!("cannot write it back without changing it (config {name} was not added)")),
    }
}

/// The text insertion: `entry` (two spaces per level) re-indented to the file's own step
/// and put right after a block-style `mig-configs:` line. `None` when there is no such
/// line. The caller checks the result by parsing it.
fn insert_text(text: &str, entry: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.iter().position(|l| l.trim_end() == "mig-configs:")?;
    let indent = lines[at + 1..]
        .iter()
        .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| l.len() - l.trim_start().len())
        .filter(|i| *i > 0)
        .unwrap_or(2);
    // A child is one step in from its parent, and the lines of a `- ` list item stay
    // aligned with the text after the dash.
    let mut block = String::new();
    // (column in the entry, column in the file, is a list item), innermost last; the
    // `mig-configs:` key itself is the root.
    let mut parents: Vec<(usize, usize, bool)> = vec![(0, 0, false)];
    for l in entry.lines().filter(|l| !l.trim().is_empty()) {
        let own = l.len() - l.trim_start().len();
        while parents.len() > 1 && parents.last().is_some_and(|p| p.0 > own) {
            parents.pop();
        }
        let &(col, new_col, dash) = parents.last()?;
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
    let mut out = String::with_capacity(text.len() + block.len() + 1);
    for (i, l) in lines.iter().enumerate() {
        out.push_str(l);
        out.push('\n');
        if i == at {
            out.push_str(&block);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mig::{GpuModel, Layout, mig_parted_yaml_for, parse_layout};

    const OPERATOR_CONFIGMAP: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/mig-parted/gpu-operator-default-config.yaml"
    ));
    const HELM_EXAMPLE: &str =
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mig-parted/helm-values-example.yaml"));

    /// The `config.yaml` of the GPU operator's default ConfigMap.
    fn operator_config() -> String {
        let Ok(Yaml::Map(cm)) = parse(OPERATOR_CONFIGMAP) else { panic!("the fixture is a mapping") };
        let data = cm.iter().find(|(k, _)| k.as_str() == Some("data")).map(|(_, v)| v.clone());
        let Some(Yaml::Map(data)) = data else { panic!("data") };
        match data.iter().find(|(k, _)| k.as_str() == Some("config.yaml")) {
            Some((_, Yaml::Str(s))) => s.clone(),
            other => panic!("config.yaml: {other:?}"),
        }
    }

    /// The config names of a file, in order.
    fn names(text: &str) -> Vec<String> {
        let Ok(Yaml::Map(top)) = parse(text) else { panic!("not a mapping: {text}") };
        match top.iter().find(|(k, _)| k.as_str() == Some(CONFIGS_KEY)).map(|(_, v)| v) {
            Some(Yaml::Map(m)) => m.iter().filter_map(|(k, _)| k.as_str().map(String::from)).collect(),
            Some(Yaml::Null) => Vec::new(),
            other => panic!("mig-configs: {other:?}"),
        }
    }

    fn config(text: &str, name: &str) -> Yaml {
        let Ok(Yaml::Map(top)) = parse(text) else { panic!("not a mapping: {text}") };
        let Some((_, Yaml::Map(m))) = top.iter().find(|(k, _)| k.as_str() == Some(CONFIGS_KEY)) else {
            panic!("mig-configs")
        };
        m.iter().find(|(k, _)| k.as_str() == Some(name)).map(|(_, v)| v.clone()).unwrap_or(Yaml::Null)
    }

    /// What follows the `mig-configs:` line.
    fn after_key(text: &str) -> &str {
        text.split_once("mig-configs:\n").map_or("", |(_, rest)| rest)
    }

    fn entry() -> String {
        let m = GpuModel::H100_80GB;
        let l = parse_layout(m, "3g.40gb,2g.20gb,1g.10gb+me").unwrap_or(Layout::Disabled);
        mig_parted_yaml_for(m, "custom-x", &l)
    }

    /// `out` keeps every config of `before`, in order and unchanged, and adds `custom-x`.
    fn check_added(before: &str, out: &str) {
        let mut want = vec!["custom-x".to_string()];
        want.extend(names(before));
        assert_eq!(names(out), want, "{out}");
        for n in names(before) {
            assert_eq!(config(out, &n), config(before, &n), "{n} changed:\n{out}");
        }
        let Yaml::Seq(items) = config(out, "custom-x") else { panic!("custom-x is a list: {out}") };
        assert_eq!(items.len(), 1, "{out}");
        assert!(format!("{:?}", items[0]).contains("1g.10gb+me"), "{out}");
        assert_eq!(add_config(out, "custom-x", &entry()), Ok(None), "added once");
    }

    #[test]
    fn the_operators_default_config_takes_a_new_entry_and_keeps_its_comments() {
        let text = operator_config();
        assert!(names(&text).len() > 40 && names(&text).contains(&"all-balanced".to_string()));
        let Ok(Some(out)) = add_config(&text, "custom-x", &entry()) else { panic!("added") };
        check_added(&text, &out);
        assert!(out.contains("\n\n  # A100-40GB, A800-40GB\n  all-1g.5gb:\n"), "comments stay: {out}");
        assert!(out.starts_with("version: v1\nmig-configs:\n  custom-x:\n    - devices: all\n"), "{out}");
        // An existing name is left alone.
        assert_eq!(add_config(&text, "all-balanced", "  all-balanced:\n    - devices: all\n"), Ok(None));
    }

    #[test]
    fn awkward_but_valid_files_keep_every_config() {
        let two = "version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n";
        for text in [
            // No trailing newline (as a `|-` block scalar in a ConfigMap gives it).
            two.trim_end().to_string(),
            // Comments everywhere, a key with a trailing comment.
            format!("# top\nversion: v1 # v\nmig-configs:   # the configs\n  # first\n{}", after_key(two)),
            // Flow style.
            "{version: v1, mig-configs: {all-disabled: [{devices: all, mig-enabled: false}]}}".to_string(),
            "version: v1\nmig-configs: {all-disabled: [{devices: all, mig-enabled: false}], \
             all-enabled: [{devices: all, mig-enabled: true, mig-devices: {}}]}\n"
                .to_string(),
            // Anchors, aliases and a merge key.
            "version: v1\nmig-configs:\n  base: &off\n    - devices: all\n      mig-enabled: false\n  \
             again: *off\n  merged:\n    - <<: &on {devices: all, mig-enabled: true}\n      mig-devices: \
             {\"1g.10gb\": 7}\n  other:\n    - *on\n"
                .to_string(),
            // mig-configs not last, four-space indentation, a `---` start and `...` end.
            "---\nmig-configs:\n    all-disabled:\n        -   devices: all\n            mig-enabled: false\nversion: v1\n...\n"
                .to_string(),
            // An empty mig-configs.
            "version: v1\nmig-configs:\n".to_string(),
            "version: v1\nmig-configs: {}\n".to_string(),
            // CRLF line ends.
            two.replace('\n', "\r\n"),
        ] {
            match add_config(&text, "custom-x", &entry()) {
                Ok(Some(out)) => check_added(&text, &out),
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn invalid_files_are_refused_with_the_reason() {
        for (text, why) in [
            ("", "no top-level `mig-configs:` key"),
            ("version: v1\n", "no top-level `mig-configs:` key"),
            ("- a\n- b\n", "not a YAML mapping"),
            ("version: v1\nmig-configs: [a, b]\n", "not a mapping of config names"),
            ("version: v1\nmig-configs:\n  a: [\n", "not valid YAML"),
            ("version: v1\nmig-configs:\n  a: 1\n  a: 2\n", "not valid YAML"),
            ("version: v1\nmig-configs:\n  a: *nowhere\n", "not valid YAML"),
            ("version: v1\nmig-configs:\n  a: 1\n---\nversion: v1\n", "not valid YAML"),
            // The GPU operator's Helm example, one line indented a column too far.
            (HELM_EXAMPLE, "not valid YAML"),
        ] {
            match add_config(text, "custom-x", &entry()) {
                Err(e) => assert!(e.contains(why), "{text:?}: {e}"),
                other => panic!("{text:?} was not refused: {other:?}"),
            }
        }
        // Fixed, the Helm example is fine.
        let fixed =
            HELM_EXAMPLE.replace("       mig-", "      mig-").replace("         \"1g.10gb\"", "        \"1g.10gb\"");
        match add_config(&fixed, "custom-x", &entry()) {
            Ok(Some(out)) => check_added(&fixed, &out),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_file_in_its_own_indentation_gets_the_entry_in_the_same() {
        let entry =
            "  custom-x:\n    - devices: all\n      mig-enabled: true\n      mig-devices:\n        \"1g.18gb\": 7\n";
        let file =
            "version: v1\nmig-configs:\n    all-disabled:\n        - devices: all\n          mig-enabled: false\n";
        let Ok(Some(out)) = add_config(file, "custom-x", entry) else { panic!("added") };
        assert!(out.contains("\n    custom-x:\n        - devices: all\n          mig-enabled: true\n"), "{out}");
        assert!(out.contains("          mig-devices:\n              \"1g.18gb\": 7\n"), "one step in: {out}");
        assert!(out.ends_with(after_key(file)), "the existing config stays as written: {out}");
    }

    #[test]
    fn a_bad_entry_is_refused() {
        let two = "version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n";
        assert!(add_config(two, "custom-x", "  custom-y:\n    - devices: all\n").is_err());
        assert!(add_config(two, "custom-x", "  custom-x: [\n").is_err());
    }

    #[test]
    fn mig_configs_are_added_once_in_the_files_indentation() {
        let entry =
            "  custom-x:\n    - devices: all\n      mig-enabled: true\n      mig-devices:\n        \"1g.18gb\": 7\n";
        let file =
            "version: v1\nmig-configs:\n    all-disabled:\n        - devices: all\n          mig-enabled: false\n";
        let out = add_config(file, "custom-x", entry).unwrap().unwrap();
        assert!(out.contains("\n    custom-x:\n        - devices: all\n          mig-enabled: true\n"), "{out}");
        assert!(out.contains("          mig-devices:\n              \"1g.18gb\": 7\n"), "one step in: {out}");
        assert!(out.contains("    all-disabled:"), "the existing config stays: {out}");
        assert_eq!(add_config(&out, "custom-x", entry).unwrap(), None, "added once");
        assert!(add_config("version: v1\n", "custom-x", entry).is_err());
        let two = "version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n";
        let out = add_config(two, "custom-x", entry).unwrap().unwrap();
        assert!(out.contains(entry), "a file in the entry's own style takes it as written: {out}");
    }
}
