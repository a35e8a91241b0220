//! The MIG catalog: which GPU models fabrik knows, what they are called in NVML, GFD
//! labels and the CLI, and the GPU-instance profiles each one offers (slices, memory,
//! SMs, how many fit, where they may start).
//!
//! Every number here comes from `shared/reference/protocols.md` §2 or from the source that
//! section names for its table; each table says which. Where the reference marks a fact
//! UNCONFIRMED the comment says so too, so a reader knows which numbers to distrust.

use std::fmt;

/// Compute slices of every GPU in the catalog (all are 7-slice MIG GPUs; protocols.md §2).
pub const COMPUTE_SLICES: u8 = 7;
/// Memory slices of every GPU in the catalog; placements are given in these units.
pub const MEMORY_SLICES: u8 = 8;

/// A MIG-capable GPU model.
///
/// The variant names carry the memory size because the same chip ships with different
/// framebuffers and therefore different profile names (`1g.5gb` vs `1g.10gb`).
#[allow(non_camel_case_types)] // "A100_40GB" reads like the product; "A10040Gb" would not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GpuModel {
    A100_40GB,
    A100_80GB,
    H100_80GB,
    H200_141GB,
    B200,
}

impl GpuModel {
    /// Every model, in catalog order.
    pub const ALL: [GpuModel; 5] =
        [GpuModel::A100_40GB, GpuModel::A100_80GB, GpuModel::H100_80GB, GpuModel::H200_141GB, GpuModel::B200];

    /// fabrik's short name, as shown in the UI and accepted by `--model`.
    pub fn name(self) -> &'static str {
        match self {
            GpuModel::A100_40GB => "A100-40GB",
            GpuModel::A100_80GB => "A100-80GB",
            GpuModel::H100_80GB => "H100-80GB",
            GpuModel::H200_141GB => "H200-141GB",
            GpuModel::B200 => "B200",
        }
    }

    /// The NVML device name (what `nvidia-smi` and dcgm-exporter's `modelName` show).
    /// SXM4 names are used for the A100s: the PCIe boards report other names.
    pub fn product_name(self) -> &'static str {
        match self {
            GpuModel::A100_40GB => "NVIDIA A100-SXM4-40GB",
            GpuModel::A100_80GB => "NVIDIA A100-SXM4-80GB",
            GpuModel::H100_80GB => "NVIDIA H100 80GB HBM3",
            GpuModel::H200_141GB => "NVIDIA H200",
            GpuModel::B200 => "NVIDIA B200",
        }
    }

    /// The `nvidia.com/gpu.product` label GFD writes: the NVML name with characters
    /// outside `[A-Za-z0-9-_. ]` removed and spaces turned into `-` (protocols.md §4).
    /// Kept as literals so that it is `&'static`; a test checks them against the rule.
    pub fn product_label(self) -> &'static str {
        match self {
            GpuModel::A100_40GB => "NVIDIA-A100-SXM4-40GB",
            GpuModel::A100_80GB => "NVIDIA-A100-SXM4-80GB",
            GpuModel::H100_80GB => "NVIDIA-H100-80GB-HBM3",
            GpuModel::H200_141GB => "NVIDIA-H200",
            GpuModel::B200 => "NVIDIA-B200",
        }
    }

    /// Total framebuffer in MiB.
    ///
    /// Source: go-nvml mocks (`pkg/nvml/mock/shared/gpus/*.go`, `Config.MemoryMB`), the
    /// NVML source protocols.md §2 cites. These are the nominal sizes (GB x 1024); real
    /// boards report somewhat less through NVML — UNCONFIRMED exact values, display only.
    pub fn memory_mib(self) -> u32 {
        match self {
            GpuModel::A100_40GB => 40_960,
            GpuModel::A100_80GB => 81_920,
            GpuModel::H100_80GB => 81_920,
            GpuModel::H200_141GB => 144_384,
            GpuModel::B200 => 184_320,
        }
    }

    /// Board power for display (SXM parts); not used for any decision.
    pub fn tdp_watts(self) -> u16 {
        match self {
            GpuModel::A100_40GB | GpuModel::A100_80GB => 400,
            GpuModel::H100_80GB | GpuModel::H200_141GB => 700,
            GpuModel::B200 => 1000,
        }
    }

    /// Short aliases accepted besides the name, NVML name and GFD label (all compared
    /// case-insensitively with spaces read as `-`). A bare family name picks the variant
    /// fabrik assumes when nothing else is known: the 80GB A100, the 80GB H100.
    fn aliases(self) -> &'static [&'static str] {
        match self {
            GpuModel::A100_40GB => &["a100-40gb", "a100-sxm4-40gb"],
            GpuModel::A100_80GB => &["a100-80gb", "a100", "a100-sxm4-80gb"],
            GpuModel::H100_80GB => &["h100-80gb", "h100", "h100-80gb-hbm3"],
            GpuModel::H200_141GB => &["h200-141gb", "h200"],
            GpuModel::B200 => &["b200"],
        }
    }

    /// Parses a model from a fabrik name (`"h100-80gb"`, `"H100"`), an NVML name
    /// (`"NVIDIA H100 80GB HBM3"`) or a GFD product label (`"NVIDIA-H100-80GB-HBM3"`),
    /// case-insensitively. GFD's decorations are ignored so a node label can be fed in as
    /// it is: `-SHARED` (time-slicing) and `-MIG-<profile>` (single strategy).
    ///
    /// Other boards of the same family (PCIe, NVL, GH200) are *not* matched: their
    /// profiles differ, and guessing would plan layouts the hardware refuses.
    pub fn parse(s: &str) -> Option<GpuModel> {
        let mut n = normalize_model(s);
        if let Some(stripped) = n.strip_suffix("-shared") {
            n = stripped.to_string();
        }
        if let Some(i) = n.find("-mig-") {
            n.truncate(i);
        }
        if n.is_empty() {
            return None;
        }
        let bare = n.strip_prefix("nvidia-").unwrap_or(&n).to_string();
        GpuModel::ALL.into_iter().find(|m| {
            let known =
                [normalize_model(m.name()), normalize_model(m.product_name()), normalize_model(m.product_label())];
            [&n, &bare].iter().any(|cand| known.iter().any(|k| k == *cand) || m.aliases().iter().any(|a| a == *cand))
        })
    }
}

impl fmt::Display for GpuModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Lower-cases and turns spaces into `-`, so an NVML name and its GFD label compare equal.
fn normalize_model(s: &str) -> String {
    s.trim().chars().map(|c| if c == ' ' { '-' } else { c.to_ascii_lowercase() }).collect()
}

/// An index into [`catalog`] for one model. Ids of different models are not
/// interchangeable even though every model lists its profiles in the same shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProfileId(pub u8);

/// One GPU-instance profile (a GI whose single CI spans it, as mig-parted creates them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Profile {
    /// Profile name as NVML and mig-parted spell it: `"1g.10gb"`, `"1g.10gb+me"`.
    pub name: &'static str,
    /// `nvidia-smi mig -lgip` ID.
    pub gi_profile_id: u8,
    /// Compute slices out of [`COMPUTE_SLICES`].
    pub compute_slices: u8,
    /// Memory slices out of [`MEMORY_SLICES`]; also the placement size.
    pub memory_slices: u8,
    /// Instance memory in MiB.
    pub memory_mib: u32,
    /// Streaming multiprocessors, 0 where the reference gives no number.
    pub sms: u16,
    /// How many instances of this profile alone fit on one GPU.
    pub max_count: u8,
    /// Allowed placement starts, in memory slices, ascending.
    pub starts: &'static [u8],
    /// `+me`: the profile owns the GPU's media engines (NVDEC/NVJPG/OFA); one per GPU.
    pub media_extensions: bool,
}

impl Profile {
    /// The extended resource the device plugin advertises for this profile under the
    /// `mixed` strategy: `"mig-" + name` with `+` turned into `.` (protocols.md §3).
    pub fn resource_name(&self) -> String {
        format!("nvidia.com/mig-{}", self.name.replace('+', "."))
    }

    /// The profile name with `+` turned into `.`, as mig-parted spells it inside config
    /// names and the device plugin inside resource names.
    pub fn dotted_name(&self) -> String {
        self.name.replace('+', ".")
    }
}

// Placement starts. Source: protocols.md §2, A100 table ("Placements from NVML
// dgxa100-derived mock — matches real A100 output for 3g"). The same pattern is used for
// every model because the reference says H100/H200 placements "assume A100 pattern —
// UNCONFIRMED" and gives none for B200. Note that no 1-slice profile may start at slice 7,
// and that a 3g instance occupies 4 memory slices (3 compute).
const STARTS_1G: &[u8] = &[0, 1, 2, 3, 4, 5, 6];
const STARTS_1G_2X: &[u8] = &[0, 2, 4, 6];
const STARTS_2G: &[u8] = &[0, 2, 4];
const STARTS_3G: &[u8] = &[0, 4];
const STARTS_0: &[u8] = &[0];

// GI profile IDs on 7-slice GPUs (protocols.md §2: 1g=19, 1g+me=20, 1g 2x mem=15, 2g=14,
// 3g=9, 4g=5, 7g=0). Confirmed for A100/H100 by real `nvidia-smi mig -lgip` output; the
// reference says H200 uses the same IDs (UNCONFIRMED) and gives none for B200, which is
// given the same IDs on that basis.
const GI_1G: u8 = 19;
const GI_1G_ME: u8 = 20;
const GI_1G_2X: u8 = 15;
const GI_2G: u8 = 14;
const GI_3G: u8 = 9;
const GI_4G: u8 = 5;
const GI_7G: u8 = 0;

/// Builds the seven profiles every catalog model has, in catalog order: 1g, 1g+me, 1g
/// with double memory, 2g, 3g, 4g, 7g. Slice counts and max counts are the same on all
/// five models (protocols.md §2; max counts from the GPU Operator's static configs).
const fn seven(names: [&'static str; 7], mib: [u32; 7], sms: [u16; 7]) -> [Profile; 7] {
    // One positional row per profile keeps the seven rows below aligned like the tables.
    #[allow(clippy::too_many_arguments)]
    const fn p(
        name: &'static str,
        gi: u8,
        c: u8,
        m: u8,
        mib: u32,
        sms: u16,
        max: u8,
        starts: &'static [u8],
        me: bool,
    ) -> Profile {
        Profile {
            name,
            gi_profile_id: gi,
            compute_slices: c,
            memory_slices: m,
            memory_mib: mib,
            sms,
            max_count: max,
            starts,
            media_extensions: me,
        }
    }
    [
        p(names[0], GI_1G, 1, 1, mib[0], sms[0], 7, STARTS_1G, false),
        p(names[1], GI_1G_ME, 1, 1, mib[1], sms[1], 1, STARTS_1G, true),
        p(names[2], GI_1G_2X, 1, 2, mib[2], sms[2], 4, STARTS_1G_2X, false),
        p(names[3], GI_2G, 2, 2, mib[3], sms[3], 3, STARTS_2G, false),
        p(names[4], GI_3G, 3, 4, mib[4], sms[4], 2, STARTS_3G, false),
        p(names[5], GI_4G, 4, 4, mib[5], sms[5], 1, STARTS_0, false),
        p(names[6], GI_7G, 7, 8, mib[6], sms[6], 1, STARTS_0, false),
    ]
}

/// A100-40GB. Names, slices, max counts: protocols.md §2 A100-40GB table (MUG; GO config).
/// MiB: go-nvml mock `a100.go` `a100_40gb_GpuInstanceProfiles`, the table's cited source
/// (protocols.md quotes only 1g.10gb = 9856 MiB; the other six are read from that file).
/// SMs: not in the reference, so 0.
static A100_40GB_PROFILES: [Profile; 7] = seven(
    ["1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"],
    [4864, 4864, 9856, 9856, 19968, 19968, 40192],
    [0; 7],
);

/// A100-80GB. protocols.md §2: "same geometry, names per MUG", max counts 7/1/4/3/2/1/1,
/// mock MiB 9856/9856/19968/19968/40192/40192/80384. SMs: not in the reference, so 0.
static A100_80GB_PROFILES: [Profile; 7] = seven(
    ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
    [9856, 9856, 19968, 19968, 40192, 40192, 80384],
    [0; 7],
);

/// H100-80GB. protocols.md §2 H100 table (real `nvidia-smi mig -lgip`, jbarrow.ai; counts
/// from GO): IDs, max counts, SMs 16/16/26/32/60/64/132 as listed. The reference gives
/// memory in GiB (9.75/19.62/39.50/79.25); MiB here are those x1024, reading the printed
/// 19.62 as 19.625 (the only value that is a whole number of MiB) — a conversion, not a
/// quoted number. Placements: A100 pattern, UNCONFIRMED.
static H100_80GB_PROFILES: [Profile; 7] = seven(
    ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
    [9984, 9984, 20096, 20096, 40448, 40448, 81152],
    [16, 16, 26, 32, 60, 64, 132],
);

/// H200-141GB. protocols.md §2 H200 table (NVML mock `h200.go`; counts GO): names, max
/// counts, MiB 18432/18432/35840/35840/72704/72704/144384, memory slices 1/1/2/2/4/4/8.
/// "Profile IDs/placements same as H100 — UNCONFIRMED". SMs: not in the reference, so 0.
static H200_141GB_PROFILES: [Profile; 7] = seven(
    ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"],
    [18432, 18432, 35840, 35840, 72704, 72704, 144384],
    [0; 7],
);

/// B200 (~180GB). protocols.md §2 B200 line (NVML mock `b200.go`; GO): names, max counts,
/// MiB 23552/-/46080/46080/92160/92160/184320; 1g.23gb+me MiB (23552) read from the mock.
/// The reference confirms 3g.90gb uses 4/8 memory slices and 3/7 compute (DRA driver).
/// IDs and placements: none given, the A100/H100 ones are assumed — UNCONFIRMED.
/// SMs: not in the reference, so 0.
static B200_PROFILES: [Profile; 7] = seven(
    ["1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"],
    [23552, 23552, 46080, 46080, 92160, 92160, 184320],
    [0; 7],
);

/// All GPU-instance profiles of `model`, in catalog order; a [`ProfileId`] indexes it.
pub fn catalog(model: GpuModel) -> &'static [Profile] {
    match model {
        GpuModel::A100_40GB => &A100_40GB_PROFILES,
        GpuModel::A100_80GB => &A100_80GB_PROFILES,
        GpuModel::H100_80GB => &H100_80GB_PROFILES,
        GpuModel::H200_141GB => &H200_141GB_PROFILES,
        GpuModel::B200 => &B200_PROFILES,
    }
}

/// The profile `id` of `model`.
///
/// # Panics
/// If `id` did not come from [`catalog`]`(model)` (or [`find_profile`] for the same
/// model), i.e. on a programming error. Use [`get_profile`] for ids from outside.
pub fn profile(model: GpuModel, id: ProfileId) -> &'static Profile {
    match get_profile(model, id) {
        Some(p) => p,
        None => panic!("{model} has no MIG profile id {}", id.0),
    }
}

/// The profile `id` of `model`, or `None` for an id outside its catalog.
pub fn get_profile(model: GpuModel, id: ProfileId) -> Option<&'static Profile> {
    catalog(model).get(usize::from(id.0))
}

/// The ids of `model`'s profiles, in catalog order.
pub fn profile_ids(model: GpuModel) -> impl Iterator<Item = ProfileId> {
    (0..catalog(model).len()).filter_map(|i| u8::try_from(i).ok().map(ProfileId))
}

/// Finds a profile by any of the spellings fabrik meets: the NVML name (`"1g.10gb+me"`),
/// the dotted form used in config and resource names (`"1g.10gb.me"`), or a resource name
/// with or without its domain (`"nvidia.com/mig-1g.10gb"`, `"mig-1g.10gb"`).
/// Case-insensitive; surrounding whitespace is ignored.
pub fn find_profile(model: GpuModel, name: &str) -> Option<ProfileId> {
    let n = name.trim().to_ascii_lowercase();
    let n = n.strip_prefix("nvidia.com/").unwrap_or(&n);
    let n = n.strip_prefix("mig-").unwrap_or(n);
    lookup_dotted(model, n)
}

/// Maps a device-plugin resource name back to its profile: `nvidia.com/mig-1g.10gb`,
/// `nvidia.com/mig-1g.10gb.me`, also as a quota key (`requests.nvidia.com/mig-…`) or
/// renamed for time-slicing (`….shared`, protocols.md §3). Unlike [`find_profile`] it
/// insists on the `mig-` form, so `nvidia.com/gpu` is never mistaken for a profile.
pub fn profile_from_resource(model: GpuModel, resource: &str) -> Option<ProfileId> {
    let n = resource.trim().to_ascii_lowercase();
    let n = n.strip_prefix("requests.").unwrap_or(&n);
    let n = n.strip_prefix("nvidia.com/").unwrap_or(n);
    let n = n.strip_prefix("mig-")?;
    let n = n.strip_suffix(".shared").unwrap_or(n);
    lookup_dotted(model, n)
}

/// Compares with `+` read as `.`: mig-parted and the device plugin both rewrite it, and
/// no two profiles differ only in that character.
fn lookup_dotted(model: GpuModel, n: &str) -> Option<ProfileId> {
    if n.is_empty() {
        return None;
    }
    let want = n.replace('+', ".");
    profile_ids(model).find(|&id| get_profile(model, id).is_some_and(|p| p.dotted_name().eq_ignore_ascii_case(&want)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GFD's sanitising rule (protocols.md §4), to check the label literals against.
    fn gfd_sanitize(s: &str) -> String {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric() || "-_. ".contains(*c))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect()
    }

    #[test]
    fn names_labels_and_display() {
        let expect = [
            (GpuModel::A100_40GB, "A100-40GB", "NVIDIA A100-SXM4-40GB"),
            (GpuModel::A100_80GB, "A100-80GB", "NVIDIA A100-SXM4-80GB"),
            (GpuModel::H100_80GB, "H100-80GB", "NVIDIA H100 80GB HBM3"),
            (GpuModel::H200_141GB, "H200-141GB", "NVIDIA H200"),
            (GpuModel::B200, "B200", "NVIDIA B200"),
        ];
        for (m, name, product) in expect {
            assert_eq!(m.name(), name);
            assert_eq!(m.to_string(), name);
            assert_eq!(m.product_name(), product);
            assert_eq!(m.product_label(), gfd_sanitize(product));
        }
        assert_eq!(GpuModel::H100_80GB.product_label(), "NVIDIA-H100-80GB-HBM3");
    }

    #[test]
    fn parse_accepts_every_spelling() {
        for m in GpuModel::ALL {
            assert_eq!(GpuModel::parse(m.name()), Some(m));
            assert_eq!(GpuModel::parse(&m.name().to_lowercase()), Some(m));
            assert_eq!(GpuModel::parse(m.product_name()), Some(m));
            assert_eq!(GpuModel::parse(m.product_label()), Some(m));
            assert_eq!(GpuModel::parse(&format!("  {}  ", m.product_label().to_uppercase())), Some(m));
        }
        let cases = [
            ("h100-80gb", Some(GpuModel::H100_80GB)),
            ("H100", Some(GpuModel::H100_80GB)),
            ("A100", Some(GpuModel::A100_80GB)),
            ("a100-40gb", Some(GpuModel::A100_40GB)),
            ("H200", Some(GpuModel::H200_141GB)),
            ("b200", Some(GpuModel::B200)),
            ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", Some(GpuModel::H100_80GB)),
            ("NVIDIA-A100-SXM4-40GB-SHARED", Some(GpuModel::A100_40GB)),
            ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED", Some(GpuModel::H100_80GB)),
            ("NVIDIA-H100-NVL", None),
            ("H100 PCIe", None),
            ("A30", None),
            ("", None),
            ("   ", None),
            ("-mig-", None),
            ("nvidia-", None),
        ];
        for (s, want) in cases {
            assert_eq!(GpuModel::parse(s), want, "{s:?}");
        }
    }

    #[test]
    fn model_numbers() {
        assert_eq!(GpuModel::A100_40GB.tdp_watts(), 400);
        assert_eq!(GpuModel::H200_141GB.tdp_watts(), 700);
        assert_eq!(GpuModel::B200.tdp_watts(), 1000);
        for m in GpuModel::ALL {
            // The whole-GPU profile never claims more memory than the board has.
            let full = catalog(m).last().map(|p| p.memory_mib).unwrap_or(0);
            assert!(full <= m.memory_mib(), "{m}");
        }
    }

    /// Table rows as the reference gives them: (name, GI id, compute, memory, max, MiB).
    #[test]
    fn catalog_matches_reference_tables() {
        type Row = (&'static str, u8, u8, u8, u8, u32);
        let tables: [(GpuModel, [Row; 7]); 5] = [
            (
                GpuModel::A100_40GB,
                [
                    ("1g.5gb", 19, 1, 1, 7, 4864),
                    ("1g.5gb+me", 20, 1, 1, 1, 4864),
                    ("1g.10gb", 15, 1, 2, 4, 9856),
                    ("2g.10gb", 14, 2, 2, 3, 9856),
                    ("3g.20gb", 9, 3, 4, 2, 19968),
                    ("4g.20gb", 5, 4, 4, 1, 19968),
                    ("7g.40gb", 0, 7, 8, 1, 40192),
                ],
            ),
            (
                GpuModel::A100_80GB,
                [
                    ("1g.10gb", 19, 1, 1, 7, 9856),
                    ("1g.10gb+me", 20, 1, 1, 1, 9856),
                    ("1g.20gb", 15, 1, 2, 4, 19968),
                    ("2g.20gb", 14, 2, 2, 3, 19968),
                    ("3g.40gb", 9, 3, 4, 2, 40192),
                    ("4g.40gb", 5, 4, 4, 1, 40192),
                    ("7g.80gb", 0, 7, 8, 1, 80384),
                ],
            ),
            (
                GpuModel::H100_80GB,
                [
                    ("1g.10gb", 19, 1, 1, 7, 9984),
                    ("1g.10gb+me", 20, 1, 1, 1, 9984),
                    ("1g.20gb", 15, 1, 2, 4, 20096),
                    ("2g.20gb", 14, 2, 2, 3, 20096),
                    ("3g.40gb", 9, 3, 4, 2, 40448),
                    ("4g.40gb", 5, 4, 4, 1, 40448),
                    ("7g.80gb", 0, 7, 8, 1, 81152),
                ],
            ),
            (
                GpuModel::H200_141GB,
                [
                    ("1g.18gb", 19, 1, 1, 7, 18432),
                    ("1g.18gb+me", 20, 1, 1, 1, 18432),
                    ("1g.35gb", 15, 1, 2, 4, 35840),
                    ("2g.35gb", 14, 2, 2, 3, 35840),
                    ("3g.71gb", 9, 3, 4, 2, 72704),
                    ("4g.71gb", 5, 4, 4, 1, 72704),
                    ("7g.141gb", 0, 7, 8, 1, 144384),
                ],
            ),
            (
                GpuModel::B200,
                [
                    ("1g.23gb", 19, 1, 1, 7, 23552),
                    ("1g.23gb+me", 20, 1, 1, 1, 23552),
                    ("1g.45gb", 15, 1, 2, 4, 46080),
                    ("2g.45gb", 14, 2, 2, 3, 46080),
                    ("3g.90gb", 9, 3, 4, 2, 92160),
                    ("4g.90gb", 5, 4, 4, 1, 92160),
                    ("7g.180gb", 0, 7, 8, 1, 184320),
                ],
            ),
        ];
        for (m, rows) in tables {
            let cat = catalog(m);
            assert_eq!(cat.len(), rows.len(), "{m}");
            for (p, (name, gi, c, mem, max, mib)) in cat.iter().zip(rows) {
                assert_eq!(
                    (p.name, p.gi_profile_id, p.compute_slices, p.memory_slices, p.max_count, p.memory_mib),
                    (name, gi, c, mem, max, mib),
                    "{m} {name}"
                );
                assert_eq!(p.media_extensions, name.ends_with("+me"));
            }
        }
        let sms: Vec<u16> = catalog(GpuModel::H100_80GB).iter().map(|p| p.sms).collect();
        assert_eq!(sms, [16, 16, 26, 32, 60, 64, 132]);
    }

    #[test]
    fn placements_follow_the_a100_table() {
        for m in GpuModel::ALL {
            for p in catalog(m) {
                let want: &[u8] = match (p.compute_slices, p.memory_slices) {
                    (1, 1) => &[0, 1, 2, 3, 4, 5, 6],
                    (1, 2) => &[0, 2, 4, 6],
                    (2, _) => &[0, 2, 4],
                    (3, _) => &[0, 4],
                    _ => &[0],
                };
                assert_eq!(p.starts, want, "{m} {}", p.name);
                for &s in p.starts {
                    assert!(s + p.memory_slices <= MEMORY_SLICES, "{m} {}", p.name);
                }
                // Max counts never exceed what the placements allow (except +me's cap).
                assert!(usize::from(p.max_count) <= p.starts.len());
            }
        }
    }

    #[test]
    fn resource_names() {
        let m = GpuModel::A100_80GB;
        let cat = catalog(m);
        assert_eq!(cat[0].resource_name(), "nvidia.com/mig-1g.10gb");
        assert_eq!(cat[1].resource_name(), "nvidia.com/mig-1g.10gb.me");
        assert_eq!(cat[6].resource_name(), "nvidia.com/mig-7g.80gb");
        for m in GpuModel::ALL {
            for id in profile_ids(m) {
                let p = profile(m, id);
                assert_eq!(profile_from_resource(m, &p.resource_name()), Some(id));
                assert_eq!(find_profile(m, &p.resource_name()), Some(id));
                assert_eq!(find_profile(m, p.name), Some(id));
            }
        }
    }

    #[test]
    fn find_profile_aliases() {
        let m = GpuModel::H100_80GB;
        let cases = [
            ("1g.10gb", Some(0)),
            ("1g.10gb+me", Some(1)),
            ("1g.10gb.me", Some(1)),
            ("1G.10GB+ME", Some(1)),
            (" 3g.40gb ", Some(4)),
            ("nvidia.com/mig-1g.10gb", Some(0)),
            ("nvidia.com/mig-1g.10gb.me", Some(1)),
            ("mig-2g.20gb", Some(3)),
            ("7g.80gb", Some(6)),
            ("1g.18gb", None),
            ("5g.50gb", None),
            ("1g", None),
            ("", None),
            ("mig-", None),
            ("nvidia.com/gpu", None),
        ];
        for (s, want) in cases {
            assert_eq!(find_profile(m, s), want.map(ProfileId), "{s:?}");
        }
        assert_eq!(find_profile(GpuModel::H200_141GB, "1g.18gb"), Some(ProfileId(0)));
        assert_eq!(find_profile(GpuModel::A100_40GB, "1g.10gb"), Some(ProfileId(2)));
    }

    #[test]
    fn profile_from_resource_forms() {
        let m = GpuModel::A100_80GB;
        let cases = [
            ("nvidia.com/mig-1g.10gb", Some(0)),
            ("nvidia.com/mig-1g.10gb.me", Some(1)),
            ("mig-3g.40gb", Some(4)),
            ("requests.nvidia.com/mig-2g.20gb", Some(3)),
            ("nvidia.com/mig-1g.20gb.shared", Some(2)),
            ("nvidia.com/gpu", None),
            ("1g.10gb", None),
            ("nvidia.com/mig-1g.5gb", None),
            ("nvidia.com/mig-", None),
        ];
        for (s, want) in cases {
            assert_eq!(profile_from_resource(m, s), want.map(ProfileId), "{s:?}");
        }
    }

    #[test]
    fn profile_lookup_by_id() {
        let m = GpuModel::B200;
        assert_eq!(profile(m, ProfileId(4)).name, "3g.90gb");
        assert!(get_profile(m, ProfileId(7)).is_none());
        assert!(get_profile(m, ProfileId(255)).is_none());
        assert_eq!(profile_ids(m).count(), 7);
    }

    #[test]
    #[should_panic(expected = "no MIG profile id 9")]
    fn profile_panics_on_foreign_id() {
        let _ = profile(GpuModel::H100_80GB, ProfileId(9));
    }
}
