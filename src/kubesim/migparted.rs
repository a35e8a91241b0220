//! mig-manager's decision: what a `nvidia.com/mig.config` name means for a node, from the
//! mig-parted ConfigMap (`gpu-operator/default-mig-parted-config`, key `config.yaml`) when it
//! has the name, else from the names mig-parted always generates (`all-disabled`,
//! `all-balanced`, `all-<profile>`) and fabrik's generated `custom-<profiles>` names.
//!
//! The YAML reader covers the mig-parted v1 subset that the GPU operator's ConfigMap and
//! fabrik's own writer use: `version`, `mig-configs`, and per entry `device-filter` (string
//! or flow list), `devices` (`all` or a flow list `[0, 1]`), `mig-enabled`, and
//! `mig-devices` (a block map of `"profile": count`, or `{}`). Block-style lists and
//! anchors are not read; such a file is reported as unreadable.

use std::collections::BTreeMap;

use crate::mig::{self, GpuModel, Layout};

/// Config names mig-manager accepts but never finishes: the node stays `pending` with its
/// operator clients paused (as a mig-manager whose client pods never go away).
pub const WEDGED_CONFIGS: &[&str] = &["fabrik-wedged"];

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Devices {
    All,
    List(Vec<u8>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub device_filter: Option<Vec<String>>,
    pub devices: Devices,
    pub mig_enabled: bool,
    pub mig_devices: Vec<(String, usize)>,
}

/// A parsed mig-parted file: config name → entries, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigPartedFile {
    pub configs: BTreeMap<String, Vec<Entry>>,
}

fn unquote(s: &str) -> &str {
    let t = s.trim();
    t.strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .or_else(|| t.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')))
        .unwrap_or(t)
}

fn flow_list(v: &str) -> Option<Vec<String>> {
    let inner = v.trim().strip_prefix('[')?.strip_suffix(']')?;
    Some(inner.split(',').map(|x| unquote(x).to_string()).filter(|x| !x.is_empty()).collect())
}

fn strip_comment(line: &str) -> &str {
    let mut in_q = None;
    for (i, c) in line.char_indices() {
        match (c, in_q) {
            ('"' | '\'', None) => in_q = Some(c),
            (q, Some(o)) if q == o => in_q = None,
            ('#', None) if i == 0 || line[..i].ends_with(' ') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// Reads a mig-parted config file (the subset described in the module docs).
pub fn parse(text: &str) -> Result<MigPartedFile, String> {
    let mut file = MigPartedFile::default();
    let mut in_configs = false;
    let mut name_indent: Option<usize> = None;
    let mut current: Option<String> = None;
    let mut entry: Option<Entry> = None;
    let mut mig_devices_indent: Option<usize> = None;
    let flush = |file: &mut MigPartedFile, current: &Option<String>, entry: &mut Option<Entry>| {
        if let (Some(name), Some(e)) = (current, entry.take()) {
            file.configs.entry(name.clone()).or_default().push(e);
        }
    };
    for (n, raw) in text.lines().enumerate() {
        let line = strip_comment(raw).trim_end();
        if line.trim().is_empty() || line.trim() == "---" {
            continue;
        }
        let err = |m: &str| format!("line {}: {m}: {}", n + 1, raw.trim());
        let indent = line.len() - line.trim_start().len();
        let body = line.trim_start();
        if indent == 0 {
            flush(&mut file, &current, &mut entry);
            current = None;
            mig_devices_indent = None;
            let (k, v) = body.split_once(':').ok_or_else(|| err("expected key: value"))?;
            match k.trim() {
                "version" if unquote(v) == "v1" => {}
                "version" => return Err(err("version must be v1")),
                "mig-configs" => in_configs = true,
                _ => in_configs = false,
            }
            continue;
        }
        if !in_configs {
            continue;
        }
        if let Some(mi) = mig_devices_indent {
            if indent > mi && !body.starts_with('-') {
                let (k, v) = body.rsplit_once(':').ok_or_else(|| err("expected \"profile\": count"))?;
                let count: usize = v.trim().parse().map_err(|_| err("count is not a number"))?;
                if let Some(e) = entry.as_mut() {
                    e.mig_devices.push((unquote(k).to_string(), count));
                }
                continue;
            }
            mig_devices_indent = None;
        }
        if name_indent.is_none_or(|ni| indent <= ni) && !body.starts_with('-') {
            flush(&mut file, &current, &mut entry);
            name_indent = Some(indent);
            let k = body.strip_suffix(':').ok_or_else(|| err("expected a config name followed by ':'"))?;
            current = Some(unquote(k).to_string());
            continue;
        }
        let mut kv = body;
        let mut key_indent = indent;
        if let Some(rest) = body.strip_prefix('-') {
            flush(&mut file, &current, &mut entry);
            entry = Some(Entry { device_filter: None, devices: Devices::All, mig_enabled: false, mig_devices: vec![] });
            kv = rest.trim_start();
            key_indent = indent + (body.len() - kv.len());
            if kv.is_empty() {
                continue;
            }
        }
        let Some(e) = entry.as_mut() else { return Err(err("a key outside a list entry")) };
        let (k, v) = kv.split_once(':').ok_or_else(|| err("expected key: value"))?;
        let v = v.trim();
        match k.trim() {
            "device-filter" => {
                e.device_filter = Some(flow_list(v).unwrap_or_else(|| vec![unquote(v).to_string()]));
            }
            "devices" => {
                e.devices = if unquote(v) == "all" {
                    Devices::All
                } else {
                    let l = flow_list(v).ok_or_else(|| err("devices must be all or [i, j]"))?;
                    Devices::List(
                        l.iter()
                            .map(|x| x.parse::<u8>().map_err(|_| err("device index is not a number")))
                            .collect::<Result<_, _>>()?,
                    )
                };
            }
            "mig-enabled" => {
                e.mig_enabled = match v {
                    "true" => true,
                    "false" => false,
                    _ => return Err(err("mig-enabled must be true or false")),
                }
            }
            "mig-devices" => match v {
                "" => mig_devices_indent = Some(key_indent),
                "{}" => {}
                _ => return Err(err("mig-devices must be a block map or {}")),
            },
            other => return Err(err(&format!("unknown key {other:?}"))),
        }
    }
    flush(&mut file, &current, &mut entry);
    Ok(file)
}

/// PCI device ids (`0x<device><vendor>`) per model, from the GPU operator's `all-balanced`
/// device filters (protocols.md §1).
pub fn pci_ids(model: GpuModel) -> &'static [&'static str] {
    match model {
        GpuModel::A100_40GB => &["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"],
        GpuModel::A100_80GB => &["0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE"],
        GpuModel::H100_80GB => &["0x233010DE", "0x233110DE", "0x232210DE", "0x232410DE"],
        GpuModel::H200_141GB => &["0x233510DE", "0x233B10DE"],
        GpuModel::B200 => &["0x290110DE"],
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Stay `pending` forever.
    Wedge,
    /// `failed`, with the reason mig-parted would give.
    Invalid(String),
    /// New layouts per GPU index (GPUs not listed keep theirs).
    Apply(Vec<(u8, Layout)>),
}

/// What mig-manager does for `name` on a node of `model` with `gpus` GPUs.
pub fn decide(model: GpuModel, gpus: u8, name: &str, file: Option<&MigPartedFile>) -> Decision {
    let name = name.trim();
    if WEDGED_CONFIGS.contains(&name) {
        return Decision::Wedge;
    }
    if let Some(entries) = file.and_then(|f| f.configs.get(name)) {
        return from_entries(model, gpus, name, entries);
    }
    if name.is_empty() {
        return Decision::Invalid("empty nvidia.com/mig.config".into());
    }
    match mig::parse_layout(model, name) {
        Ok(layout) => Decision::Apply((0..gpus).map(|i| (i, layout.clone())).collect()),
        Err(e) => Decision::Invalid(format!("config {name:?} is not valid for {}: {e}", model.name())),
    }
}

fn from_entries(model: GpuModel, gpus: u8, name: &str, entries: &[Entry]) -> Decision {
    let ids = pci_ids(model);
    let mut out: BTreeMap<u8, Layout> = BTreeMap::new();
    for e in entries {
        if let Some(filter) = &e.device_filter
            && !filter.iter().any(|f| ids.iter().any(|id| id.eq_ignore_ascii_case(f)))
        {
            continue;
        }
        let layout = if e.mig_enabled {
            let mut profiles = Vec::new();
            for (p, n) in &e.mig_devices {
                let Some(id) = mig::find_profile(model, p) else {
                    return Decision::Invalid(format!(
                        "config {name:?}: profile {p:?} does not exist on {}",
                        model.name()
                    ));
                };
                profiles.extend(std::iter::repeat_n(id, *n));
            }
            if let Err(e) = mig::plan(model, &profiles) {
                return Decision::Invalid(format!("config {name:?} does not fit a {}: {e}", model.name()));
            }
            Layout::Enabled(profiles)
        } else {
            if !e.mig_devices.is_empty() {
                return Decision::Invalid(format!("config {name:?}: mig-devices given with mig-enabled: false"));
            }
            Layout::Disabled
        };
        let targets: Vec<u8> = match &e.devices {
            Devices::All => (0..gpus).collect(),
            Devices::List(l) => l.clone(),
        };
        for t in targets {
            if t >= gpus {
                return Decision::Invalid(format!("config {name:?}: device {t} does not exist (the node has {gpus})"));
            }
            out.insert(t, layout.clone());
        }
    }
    if out.is_empty() {
        return Decision::Invalid(format!("config {name:?} has no entry for a {}", model.name()));
    }
    Decision::Apply(out.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false

  all-balanced:
    # A100-80GB, H100-80GB
    - device-filter: ["0x233010DE", "0x20B210DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 2
        "2g.20gb": 1
        "3g.40gb": 1
    - device-filter: "0x233510DE"
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.18gb": 7
  custom-h100-0000-gpu0.1-3g.40gb:
    - devices: [0, 1]
      mig-enabled: true
      mig-devices:
        "3g.40gb": 2
    - devices: [2]
      mig-enabled: true
      mig-devices: {}
  too-big:
    - devices: all
      mig-enabled: true
      mig-devices:
        "7g.80gb": 2
"#;

    #[test]
    fn parses_the_operator_and_fabrik_formats() {
        let f = parse(FILE).expect("parses");
        assert_eq!(f.configs.len(), 4);
        let b = &f.configs["all-balanced"];
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].device_filter.as_deref().map(|v| v.len()), Some(2));
        assert_eq!(b[0].mig_devices, vec![("1g.10gb".into(), 2), ("2g.20gb".into(), 1), ("3g.40gb".into(), 1)]);
        assert_eq!(b[1].device_filter, Some(vec!["0x233510DE".to_string()]));
        let c = &f.configs["custom-h100-0000-gpu0.1-3g.40gb"];
        assert_eq!(c[0].devices, Devices::List(vec![0, 1]));
        assert!(c[1].mig_enabled && c[1].mig_devices.is_empty());
        assert!(!f.configs["all-disabled"][0].mig_enabled);
    }

    #[test]
    fn reads_what_fabrik_writes() {
        let model = GpuModel::H100_80GB;
        let layout = mig::parse_layout(model, "3g.40gb,2g.20gb,1g.10gb,1g.10gb").expect("layout");
        let text = mig::mig_parted_file(model, &[("custom-x", &layout), ("all-disabled", &Layout::Disabled)]);
        let f = parse(&text).expect("parses");
        match decide(model, 8, "custom-x", Some(&f)) {
            Decision::Apply(l) => {
                assert_eq!(l.len(), 8);
                let mut got = l[0].1.profiles().to_vec();
                let mut want = layout.profiles().to_vec();
                got.sort_by_key(|p| p.0);
                want.sort_by_key(|p| p.0);
                assert_eq!(got, want);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rejects_what_mig_parted_rejects() {
        assert!(parse("version: v2\n").is_err());
        assert!(parse("version: v1\nmig-configs:\n  a:\n    - devices: all\n      bogus: 1\n").is_err());
        assert!(parse("version: v1\nmig-configs:\n  a:\n    - devices: some\n").is_err());
    }

    #[test]
    fn decisions() {
        let f = parse(FILE).expect("parses");
        let h100 = GpuModel::H100_80GB;
        assert_eq!(decide(h100, 8, "fabrik-wedged", Some(&f)), Decision::Wedge);
        // From the ConfigMap, with the device filter choosing the model's entry.
        match decide(GpuModel::H200_141GB, 8, "all-balanced", Some(&f)) {
            Decision::Apply(l) => assert_eq!(l[0].1.profiles().len(), 7),
            other => panic!("{other:?}"),
        }
        assert!(matches!(decide(GpuModel::B200, 8, "all-balanced", Some(&f)), Decision::Invalid(_)));
        // Without a ConfigMap, the generated names.
        match decide(GpuModel::B200, 8, "all-balanced", None) {
            Decision::Apply(l) => assert_eq!(l.len(), 8),
            other => panic!("{other:?}"),
        }
        match decide(h100, 8, "custom-h100-0000-gpu0.1-3g.40gb", Some(&f)) {
            Decision::Apply(l) => {
                assert_eq!(l.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![0, 1, 2]);
                assert_eq!(l[2].1, Layout::Enabled(vec![]));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(decide(h100, 8, "too-big", Some(&f)), Decision::Invalid(_)));
        assert!(matches!(decide(h100, 8, "all-1g.18gb", None), Decision::Invalid(_)));
        assert!(matches!(decide(h100, 8, "no-such-config", None), Decision::Invalid(_)));
        assert!(matches!(decide(h100, 2, "custom-h100-0000-gpu0.1-3g.40gb", Some(&f)), Decision::Invalid(_)));
        match decide(h100, 8, "custom-3g.40gb-3g.40gb", None) {
            Decision::Apply(l) => assert_eq!(l[7].1.profiles().len(), 2),
            other => panic!("{other:?}"),
        }
    }
}
