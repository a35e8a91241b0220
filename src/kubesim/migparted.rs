//! mig-manager's decision: what a `nvidia.com/mig.config` name means for a node, from the
//! mig-parted ConfigMap (`gpu-operator/default-mig-parted-config`, key `config.yaml`) when it
//! has the name, else from the names mig-parted always generates (`all-disabled`,
//! `all-balanced`, `all-<profile>`) and fabrik's generated `custom-<profiles>` names.
//!
//! The file is read with a YAML parser (serde-saphyr) into mig-parted's v1 schema:
//! `version`, `mig-configs`, and per entry `device-filter` (a string or a list),
//! `devices` (`all` or a list of indexes), `mig-enabled`, and `mig-devices` (a map of
//! `"profile": count`). Any YAML style (block or flow, anchors, comments) is read; a key
//! mig-parted does not know in an entry is refused, as mig-parted refuses it.

use std::collections::BTreeMap;

use serde::Deserialize;

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

/// The file as written, before the checks `parse` makes.
#[derive(Deserialize)]
struct RawFile {
    version: Option<String>,
    #[serde(rename = "mig-configs", default)]
    mig_configs: Option<BTreeMap<String, Option<Vec<RawEntry>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawEntry {
    device_filter: Option<OneOrMany>,
    devices: Option<RawDevices>,
    #[serde(default)]
    mig_enabled: bool,
    #[serde(default, deserialize_with = "ordered_counts")]
    mig_devices: Vec<(String, usize)>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawDevices {
    List(Vec<u8>),
    Name(String),
}

/// `mig-devices` in file order (`null` or `{}` for none).
fn ordered_counts<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<(String, usize)>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Vec<(String, usize)>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map of \"profile\": count")
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(V)
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(kv) = a.next_entry::<String, usize>()? {
                out.push(kv);
            }
            Ok(out)
        }
    }
    d.deserialize_option(V)
}

/// Reads a mig-parted config file (mig-parted's v1 schema, see the module docs).
pub fn parse(text: &str) -> Result<MigPartedFile, String> {
    let raw: RawFile = serde_saphyr::from_str(text).map_err(|e| {
        let e = e.to_string();
        e.lines().find(|l| !l.trim().is_empty()).unwrap_or("unreadable YAML").trim().to_string()
    })?;
    if let Some(v) = raw.version.as_deref()
        && v != "v1"
    {
        return Err(format!("version must be v1, not {v:?}"));
    }
    let mut file = MigPartedFile::default();
    for (name, entries) in raw.mig_configs.unwrap_or_default() {
        let Some(entries) = entries else { continue };
        let mut out = Vec::with_capacity(entries.len());
        for e in entries {
            let devices = match e.devices {
                None => Devices::All,
                Some(RawDevices::Name(n)) if n == "all" => Devices::All,
                Some(RawDevices::Name(n)) => {
                    return Err(format!("config {name:?}: devices must be all or a list of indexes, not {n:?}"));
                }
                Some(RawDevices::List(l)) => Devices::List(l),
            };
            out.push(Entry {
                device_filter: e.device_filter.map(|f| match f {
                    OneOrMany::One(s) => vec![s],
                    OneOrMany::Many(v) => v,
                }),
                devices,
                mig_enabled: e.mig_enabled,
                mig_devices: e.mig_devices,
            });
        }
        file.configs.insert(name, out);
    }
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
    fn reads_the_gpu_operators_default_config_and_any_yaml_style() {
        let cm = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/mig-parted/gpu-operator-default-config.yaml"
        ));
        #[derive(Deserialize)]
        struct ConfigMap {
            data: BTreeMap<String, String>,
        }
        let cm: ConfigMap = serde_saphyr::from_str(cm).expect("the ConfigMap");
        let f = parse(&cm.data["config.yaml"]).expect("parses");
        assert!(f.configs.len() > 40, "{}", f.configs.len());
        for m in GpuModel::ALL {
            match decide(m, 8, "all-balanced", Some(&f)) {
                Decision::Apply(l) => assert_eq!(l.len(), 8, "{m}"),
                other => panic!("{m}: {other:?}"),
            }
        }
        assert!(matches!(decide(GpuModel::H100_80GB, 8, "all-1g.10gb", Some(&f)), Decision::Apply(_)));
        // Flow style, block lists, anchors and comments read the same.
        let flow = "version: v1\nmig-configs: {a: &e [{devices: [0, 1], mig-enabled: true, \
                    mig-devices: {\"3g.40gb\": 2}}], b: *e}\n";
        let block = "version: v1\nmig-configs:\n  a:\n  - devices:\n    - 0\n    - 1 # second\n    mig-enabled: true\n    \
                     mig-devices:\n      \"3g.40gb\": 2\n  b:\n  - devices: [0, 1]\n    mig-enabled: true\n    \
                     mig-devices: {\"3g.40gb\": 2}\n";
        assert_eq!(parse(flow), parse(block));
        assert_eq!(parse(flow).map(|f| f.configs["b"][0].devices.clone()), Ok(Devices::List(vec![0, 1])));
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
