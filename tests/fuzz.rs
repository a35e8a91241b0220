//! Fuzzing (issue 14): property tests that throw near-valid and random input at every parser
//! of text fabrik does not write itself, and require no panic and, for input that is wrong, an
//! error or warning that says something (non-empty, and naming where or what where the
//! parser can: serde_json's line and column, the TOML line, the YAML reason).
//!
//! Targets, one test each:
//! - `agent_ndjson_lines`: what a node agent's `/v1/stream` sends (one `NodeSample` per
//!   line), parsed and turned into deltas as `feed::agent_stream` does, applied to a fleet
//!   (faults reported once, counters recounted) and drawn;
//! - `prometheus_answers`: instant-query answers through `feed::prometheus::samples`, and
//!   made-up dcgm-exporter series with odd values, times and labels;
//! - `podresources_protobuf`: the kubelet's PodResources answers (prost), arbitrary bytes and
//!   mutated valid encodings, and a round trip of random assignments;
//! - `kube_translator_on_mutated_objects`: Namespace, Node, Pod, ResourceQuota,
//!   ResourceSlice, ResourceClaim, Event, PodDisruptionBudget and Kueue queues as the API
//!   server sends them (JSON text), one of them mutated (odd types, huge, negative and
//!   malformed quantities, missing fields, odd strings, deep nesting) or made up (pods, nodes
//!   and quotas with counts where sums overflow), through the `Translator` into a fleet, its
//!   views (snapshot rows, a table and a detail drawn), then deleted and re-listed away:
//!   nothing may be left and no counter may drift;
//! - `config_theme_keymap_files`: `config.toml`, `themes/*.toml` and `keymaps/*.toml` as the
//!   cockpit loads them from its config folder;
//! - `mig_parted_yaml`: `mig::parted::add_config` on mutated mig-parted files;
//! - `command_line`: `:` lines typed into a headless cockpit, then drawn;
//! - `log_stream_chunks`: a container's log bytes (`pods/log`) cut into random chunks, split
//!   into lines (the same whatever the chunks, long lines cut) and kept in a bounded buffer;
//! - `deep_nesting_and_alias_bombs_are_refused_with_a_reason`: 100,000 levels of nesting for
//!   every parser, and a YAML billion-laughs.
//!
//! Inputs are mostly near-valid: the valid samples below, edited (bytes flipped, set,
//! removed, repeated, truncated; tokens of the format inserted; JSON fields replaced, retyped,
//! renamed, removed, duplicated or nested), so the cases get past the first syntax check and
//! reach the code behind it; the rest is random. Each `*_seeds_*` test checks that the
//! unmutated samples are accepted as they are, and the properties count how many cases got
//! through the parser (printed with `--nocapture`), so a generator that only ever produced
//! garbage fails the run.
//!
//! Bounded: each target runs a fixed number of cases (the `cases` argument of [`run`]; about
//! 5 s for the whole file in the dev profile on two cores), with a fixed RNG seed so a run
//! is repeatable. For longer runs:
//!
//! ```text
//! FABRIK_FUZZ_CASES=20000 FABRIK_FUZZ_SEED=random cargo test --test fuzz
//! ```
//!
//! `FABRIK_FUZZ_CASES` sets the number of cases of every target; `FABRIK_FUZZ_SEED` is a
//! number (another fixed seed) or `random`. No regression files are written: a failure
//! prints the shrunk input, which belongs in a unit test next to the code it broke.

use std::cell::{Cell, RefCell};
use std::fmt::Debug;
use std::path::{Path, PathBuf};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use k8s_openapi::api::core::v1::{Event as KEvent, Namespace, Node, Pod, ResourceQuota};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::api::DynamicObject;
use kube::runtime::watcher::Event;
use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::test_runner::{RngSeed, TestCaseError, TestRunner};
use prost::Message;
use serde_json::{Value, json};

use fabrik::agent::backend::Gpus;
use fabrik::agent::fake::FakeGpus;
use fabrik::agent::podres::{self, Assignment, v1};
use fabrik::agent::wire::NodeSample;
use fabrik::config::{Config, ConfigWarning};
use fabrik::feed::agent_stream::{FaultsSeen, deltas, fault_deltas};
use fabrik::feed::kube::{Kind, KubeFeedConfig, Msg, Translator};
use fabrik::feed::prometheus;
use fabrik::mig::{self, GpuModel, Layout};
use fabrik::model::{CapiKind, Delta, Fleet, GPU_QUOTA_RESOURCES, Severity, Thresholds};
use fabrik::ui::command::{Command, TABLE, ViewKind};
use fabrik::ui::keymap::Keymap;
use fabrik::ui::state::{Exit, InputKind, Screen};
use fabrik::ui::theme::Theme;

// ---------- running ----------

/// `FABRIK_FUZZ_CASES` when set, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("FABRIK_FUZZ_CASES").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

/// A fixed seed unless `FABRIK_FUZZ_SEED` names another or says `random`.
fn rng_seed() -> RngSeed {
    match std::env::var("FABRIK_FUZZ_SEED").ok().as_deref().map(str::trim) {
        Some("random") => RngSeed::Random,
        Some(n) => RngSeed::Fixed(n.parse().unwrap_or_else(|_| panic!("FABRIK_FUZZ_SEED={n}: a number or `random`"))),
        None => RngSeed::Fixed(0x00fa_b41c),
    }
}

/// Runs `test` on `cases` inputs of `strategy` (see the module doc for the knobs).
fn run<S>(name: &str, cases: u32, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S: Strategy,
    S::Value: Debug,
{
    let config = ProptestConfig {
        cases: self::cases(cases),
        failure_persistence: None,
        rng_seed: rng_seed(),
        ..ProptestConfig::default()
    };
    let mut runner = TestRunner::new(config);
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{name}: {e}");
    }
}

/// Fails the run when fewer than `percent` % of `total` cases were `accepted` by the parser:
/// the generator then makes mostly garbage and the deep code goes untested.
fn enough(name: &str, accepted: u32, total: u32, percent: u32) {
    assert!(
        accepted * 100 >= total * percent,
        "{name}: only {accepted} of {total} cases got past the parser (want {percent} %): the generator is broken"
    );
}

/// The fleet's counters against a recount through its public API: a delta the fleet took
/// twice, or took back once too often, shows here.
fn recount(f: &Fleet) -> Result<(), TestCaseError> {
    prop_assert_eq!(f.totals.nodes as usize, f.node_ids().count(), "nodes");
    prop_assert_eq!(f.totals.gpus as usize, f.gpu_ids().count(), "GPUs");
    let instances: usize = f.gpu_ids().filter_map(|g| f.gpu(g)).map(|g| g.instances.len()).sum();
    prop_assert_eq!(f.totals.mig_instances as usize, instances, "MIG instances");
    let pods = f.pod_ids().filter_map(|p| f.pod(p)).filter(|p| !p.phase.finished()).count();
    prop_assert_eq!(f.totals.pods as usize, pods, "pods");
    Ok(())
}

/// Shows `fleet` as the cockpit would: every view's rows as `fabrik snapshot` writes them,
/// and view `v` drawn, then the detail of its first row (a node's topology, a GPU's slice
/// map, a tenant's pods...), so odd names, numbers, quotas and placements reach the views.
fn draw(fleet: &Fleet, v: ViewKind) {
    for view in ViewKind::ALL {
        let rows = fabrik::ui::json::snapshot(fleet, view, "");
        assert!(rows["rows"].is_array(), "{rows}");
    }
    // Built once: reading the builtin theme and keymap costs more than a frame.
    static LOOK: std::sync::OnceLock<(Theme, Keymap)> = std::sync::OnceLock::new();
    let (theme, keymap) = LOOK.get_or_init(|| {
        (Theme::no_color(), Keymap::builtin("default").unwrap_or_else(|| Keymap::load("default", None).0))
    });
    let ui = fabrik::ui::Ui::new("fuzz".into());
    let exec = Box::new(fabrik::ui::Recorder::default());
    let mut app = fabrik::ui::App::new(fleet.clone(), ui, theme.clone(), keymap.clone(), exec);
    app.open_view(v);
    let _ = fabrik::testing::render_app(&mut app, 100, 30);
    app.handle_key(key(KeyCode::Enter));
    let _ = fabrik::testing::render_app(&mut app, 100, 30);
}

/// Counts (accepted, total) across the cases of one run.
#[derive(Default)]
struct Tally {
    accepted: Cell<u32>,
    total: Cell<u32>,
}

impl Tally {
    fn count(&self, accepted: bool) {
        self.total.set(self.total.get() + 1);
        if accepted {
            self.accepted.set(self.accepted.get() + 1);
        }
    }
    fn check(&self, name: &str, percent: u32) {
        eprintln!("{name}: {} of {} cases got past the parser", self.accepted.get(), self.total.get());
        enough(name, self.accepted.get(), self.total.get(), percent);
    }
}

/// An error text that says something.
fn clear(what: &str, e: &str) -> Result<(), TestCaseError> {
    prop_assert!(!e.trim().is_empty(), "{what}: an empty error");
    Ok(())
}

// ---------- byte edits ----------

/// One edit of a byte string; positions are proportional, so they fit any length.
#[derive(Clone, Debug)]
enum Edit {
    Flip(Index, u8),
    Set(Index, u8),
    Truncate(Index),
    Remove(Index, u8),
    Insert(Index, Vec<u8>),
    /// Repeats the span of `len` bytes at the position `times` more times.
    Repeat(Index, u8, u8),
}

/// Edits that insert the format's own `tokens` more often than random bytes.
fn edits(tokens: &'static [&'static str], max: usize) -> BoxedStrategy<Vec<Edit>> {
    let token = prop_oneof![
        4 => select(tokens).prop_map(|t| t.as_bytes().to_vec()),
        1 => prop::collection::vec(any::<u8>(), 1..6),
    ];
    let edit = prop_oneof![
        2 => (any::<Index>(), 0u8..8).prop_map(|(i, b)| Edit::Flip(i, b)),
        1 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Set(i, b)),
        1 => any::<Index>().prop_map(Edit::Truncate),
        2 => (any::<Index>(), 1u8..24).prop_map(|(i, n)| Edit::Remove(i, n)),
        4 => (any::<Index>(), token).prop_map(|(i, t)| Edit::Insert(i, t)),
        1 => (any::<Index>(), 1u8..48, 1u8..4).prop_map(|(i, n, k)| Edit::Repeat(i, n, k)),
    ];
    prop::collection::vec(edit, 1..=max).boxed()
}

fn apply_edits(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for e in edits {
        let at = |i: &Index, len: usize| if len == 0 { 0 } else { i.index(len) };
        match e {
            Edit::Flip(i, bit) if !b.is_empty() => {
                let p = at(i, b.len());
                b[p] ^= 1 << bit;
            }
            Edit::Set(i, v) if !b.is_empty() => {
                let p = at(i, b.len());
                b[p] = *v;
            }
            Edit::Truncate(i) => b.truncate(at(i, b.len() + 1)),
            Edit::Remove(i, n) if !b.is_empty() => {
                let p = at(i, b.len());
                let end = (p + *n as usize).min(b.len());
                b.drain(p..end);
            }
            Edit::Insert(i, t) => {
                let p = at(i, b.len() + 1);
                b.splice(p..p, t.iter().copied());
            }
            Edit::Repeat(i, n, times) if !b.is_empty() => {
                let p = at(i, b.len());
                let span = b[p..(p + *n as usize).min(b.len())].to_vec();
                for _ in 0..*times {
                    b.splice(p..p, span.iter().copied());
                }
            }
            _ => {}
        }
    }
    b
}

// ---------- JSON edits ----------

/// Strings that mean something to some parser behind the JSON: quantities, label keys and
/// values, resource and device names, times, numbers in strings, odd Unicode.
const WORDS: &[&str] = &[
    "",
    " ",
    "0",
    "1",
    "-1",
    "8",
    "255",
    "256",
    "40000",
    "65535",
    "65536",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "99999999999999999999999999999",
    "1e400",
    "1e-400",
    "-1e18",
    "0.5",
    "1.5",
    "500m",
    "80Gi",
    "1Ei",
    "8Ei",
    "1e3",
    "1E",
    "NaN",
    "+Inf",
    "-Inf",
    "0x10",
    "٣",
    "８",
    "True",
    "False",
    "Unknown",
    "Ready",
    "Running",
    "Pending",
    "Failed",
    "Warning",
    "All",
    "ExactCount",
    "nvidia.com/gpu",
    "nvidia.com/mig-1g.10gb",
    "nvidia.com/mig-3g.40gb",
    "nvidia.com/mig-7g.80gb",
    "nvidia.com/mig-9g.999gb",
    "requests.nvidia.com/gpu",
    "requests.nvidia.com/mig-1g.10gb",
    "gpu.deviceclass.resource.k8s.io/devices",
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.memory",
    "nvidia.com/mig.config",
    "nvidia.com/mig.config.state",
    "fabrik.io/tenant",
    "NVIDIA-H100-80GB-HBM3",
    "NVIDIA H100 80GB HBM3",
    "NVIDIA-A100-SXM4-40GB",
    "NVIDIA B200",
    "all-1g.10gb",
    "all-balanced",
    "all-disabled",
    "all-3g.40gb",
    "custom-x",
    "success",
    "pending",
    "failed",
    "gpu.nvidia.com",
    "gpu",
    "mig",
    "gpu-0",
    "gpu-255",
    "gpu-256",
    "gpu--1",
    "gpu-1-mig-1g10gb-19-6",
    "memorySlice0",
    "memorySlice7",
    "memorySlice255",
    "1g.10gb",
    "3g.40gb",
    "7g.80gb",
    "1g.10gb+me",
    "GPU-aaaa",
    "GPU-bbbb",
    "MIG-cccc",
    "gpu-1",
    "mig-1",
    "team-a",
    "dra-1",
    "dra-pod-gpu",
    "vcluster",
    "app",
    "ReplicaSet",
    "Job",
    "h100",
    "inference",
    "2026-12-01T10:00:00Z",
    "1970-01-01T00:00:00Z",
    "1969-12-31T23:59:59Z",
    "9999-12-31T23:59:59Z",
    "0000-01-01T00:00:00Z",
    "2026-13-45T99:99:99Z",
    "a/b/c",
    "/",
    "a\u{0}b",
    "\u{1b}[31mred",
    "\u{202e}evil",
    "👩‍👩‍👧‍👦",
    "ǅ",
];

/// A value a field should not hold, or holds only at its edges.
fn odd_value() -> BoxedStrategy<Value> {
    let num = |n: i64| Value::from(n);
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::from),
        1 => any::<i64>().prop_map(num),
        1 => any::<u64>().prop_map(Value::from),
        2 => select(&[-1i64, 0, 1, 7, 8, 100, 255, 256, 65535, 65536, u32::MAX as i64, i64::MAX, i64::MIN][..])
            .prop_map(num),
        1 => any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        5 => odd_string().prop_map(Value::String),
        1 => Just(json!([])),
        1 => Just(json!({})),
        1 => prop::collection::vec(odd_string(), 0..3).prop_map(|v| json!(v)),
        1 => prop::collection::btree_map(odd_string(), odd_string(), 0..3).prop_map(|m| json!(m)),
    ]
    .boxed()
}

fn odd_string() -> BoxedStrategy<String> {
    prop_oneof![
        6 => select(WORDS).prop_map(String::from),
        2 => "\\PC{0,16}",
        1 => "(?s).{0,16}",
        1 => (select(WORDS), 1usize..3000).prop_map(|(w, n)| w.repeat(n.min(20_000 / w.len().max(1)))),
    ]
    .boxed()
}

/// Numbers at the edges of the types fields are read into, and small ones.
fn number() -> BoxedStrategy<u64> {
    let edges = [0, 1, 2, 100, 101, 255, 256, 65_535, 65_536, u32::MAX as u64, u32::MAX as u64 + 1, u64::MAX];
    prop_oneof![2 => 0u64..300, 1 => select(edges.to_vec()), 1 => any::<u64>()].boxed()
}

#[derive(Clone, Debug, PartialEq)]
enum Seg {
    Key(String),
    Pos(usize),
}

/// An edit of a JSON document: node positions are proportional over its nodes, in document
/// order, so they fit any document.
#[derive(Clone, Debug)]
enum JsonEdit {
    Replace(Index, Value),
    RenameKey(Index, String),
    Remove(Index),
    /// Duplicates the innermost list element around the node (a second container, device,
    /// result, condition...).
    Duplicate(Index),
    /// Wraps the node in this many lists (past serde_json's limit of 128 sometimes).
    Nest(Index, u8),
    /// Keeps the node's type, changes its value: a number to this one (negated when odd), a
    /// string to this one, a bool flipped, a list one longer, a map with this key added.
    Similar(Index, u64, String),
}

fn json_edits(max: usize) -> BoxedStrategy<Vec<JsonEdit>> {
    let edit = prop_oneof![
        5 => (any::<Index>(), odd_value()).prop_map(|(i, v)| JsonEdit::Replace(i, v)),
        2 => (any::<Index>(), odd_string()).prop_map(|(i, k)| JsonEdit::RenameKey(i, k)),
        3 => any::<Index>().prop_map(JsonEdit::Remove),
        2 => any::<Index>().prop_map(JsonEdit::Duplicate),
        1 => (any::<Index>(), 1u8..140).prop_map(|(i, d)| JsonEdit::Nest(i, d)),
        6 => (any::<Index>(), number(), odd_string()).prop_map(|(i, n, s)| JsonEdit::Similar(i, n, s)),
    ];
    prop::collection::vec(edit, 1..=max).boxed()
}

fn paths(v: &Value, at: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                at.push(Seg::Key(k.clone()));
                paths(c, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                at.push(Seg::Pos(i));
                paths(c, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn node_mut<'a>(v: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, s| match s {
        Seg::Key(k) => v.get_mut(k.as_str()),
        Seg::Pos(i) => v.get_mut(*i),
    })
}

fn apply_json_edits(seed: &Value, edits: &[JsonEdit]) -> Value {
    let mut v = seed.clone();
    for e in edits {
        let mut all = Vec::new();
        paths(&v, &mut Vec::new(), &mut all);
        let pick = |i: &Index, among: &[Vec<Seg>]| among.get(i.index(among.len().max(1))).cloned();
        match e {
            JsonEdit::Replace(i, new) => {
                if let Some(p) = pick(i, &all)
                    && let Some(n) = node_mut(&mut v, &p)
                {
                    *n = new.clone();
                }
            }
            JsonEdit::RenameKey(i, k) => {
                let keyed: Vec<Vec<Seg>> =
                    all.iter().filter(|p| matches!(p.last(), Some(Seg::Key(_)))).cloned().collect();
                if let Some(p) = pick(i, &keyed)
                    && let Some((Seg::Key(old), parent)) = p.split_last()
                    && let Some(Value::Object(m)) = node_mut(&mut v, parent)
                    && let Some(child) = m.remove(old)
                {
                    m.insert(k.clone(), child);
                }
            }
            JsonEdit::Remove(i) => {
                if let Some(p) = pick(i, &all) {
                    match p.split_last() {
                        None => v = Value::Null,
                        Some((last, parent)) => match (node_mut(&mut v, parent), last) {
                            (Some(Value::Object(m)), Seg::Key(k)) => {
                                m.remove(k);
                            }
                            (Some(Value::Array(a)), Seg::Pos(n)) if *n < a.len() => {
                                a.remove(*n);
                            }
                            _ => {}
                        },
                    }
                }
            }
            JsonEdit::Duplicate(i) => {
                if let Some(p) = pick(i, &all)
                    && let Some(at) = p.iter().rposition(|s| matches!(s, Seg::Pos(_)))
                    && let Seg::Pos(n) = p[at]
                    && let Some(Value::Array(a)) = node_mut(&mut v, &p[..at])
                    && let Some(copy) = a.get(n).cloned()
                {
                    a.insert(n, copy);
                }
            }
            JsonEdit::Similar(i, n, text) => {
                if let Some(p) = pick(i, &all)
                    && let Some(node) = node_mut(&mut v, &p)
                {
                    match node {
                        Value::Number(_) if n % 2 == 1 => *node = Value::from(-((n >> 1) as i64)),
                        Value::Number(_) => *node = Value::from(*n),
                        Value::String(_) | Value::Null => *node = Value::String(text.clone()),
                        Value::Bool(b) => *b = !*b,
                        Value::Array(a) => {
                            if let Some(last) = a.last().cloned() {
                                a.push(last);
                            }
                        }
                        Value::Object(m) => {
                            m.insert(text.clone(), Value::String(text.clone()));
                        }
                    }
                }
            }
            JsonEdit::Nest(i, depth) => {
                if let Some(p) = pick(i, &all)
                    && let Some(n) = node_mut(&mut v, &p)
                {
                    let mut inner = n.take();
                    for _ in 0..*depth {
                        inner = Value::Array(vec![inner]);
                    }
                    *n = inner;
                }
            }
        }
    }
    v
}

/// JSON text edited as text: what a broken proxy, a truncated read or a bit flip gives.
const JSON_TOKENS: &[&str] = &[
    "\"",
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "null",
    "true",
    "-",
    "0",
    "1e999",
    "-1",
    "18446744073709551616",
    "\\u0000",
    "\\ud800",
    "\\",
    "\n",
    " ",
    "\"\":",
    "{}",
    "[]",
    "0.5",
    "NaN",
];

/// A document edited by structure, as text, or both.
#[derive(Clone, Debug)]
struct JsonCase {
    seed: usize,
    structure: Vec<JsonEdit>,
    bytes: Option<Vec<Edit>>,
}

impl JsonCase {
    fn text(&self, seeds: &[Value]) -> Vec<u8> {
        let v = apply_json_edits(&seeds[self.seed % seeds.len()], &self.structure);
        let text = serde_json::to_vec(&v).unwrap_or_default();
        match &self.bytes {
            Some(e) => apply_edits(&text, e),
            None => text,
        }
    }
}

fn json_case(seeds: usize) -> BoxedStrategy<JsonCase> {
    (0..seeds, json_edits(4), prop::option::weighted(0.2, edits(JSON_TOKENS, 3)))
        .prop_map(|(seed, structure, bytes)| JsonCase { seed, structure, bytes })
        .boxed()
}

// ---------- 1. agent NDJSON ----------

/// Sample sets as agents send them: the fake backend (a MIG GPU, processes, peers, faults)
/// with the kubelet's assignments, for the nodes of [`kube_fleet`].
fn agent_seeds() -> Vec<NodeSample> {
    let mut out = Vec::new();
    for (node, gpus, seed) in [("gpu-1", 4, 1), ("mig-1", 2, 2), ("elsewhere", 1, 3)] {
        let mut fake = FakeGpus::new(node, gpus, seed);
        let Ok(mut s) = fake.sample(1_700_000_000_000) else { panic!("the fake backend samples") };
        if let Some(g) = s.gpus.first_mut() {
            g.last_xid = Some(fabrik::agent::wire::XidEvent { code: 79, at_ms: 1_699_999_999_000 });
            g.ecc_uncorrected = Some(2);
        }
        let uuid = s.gpus.first().map(|g| g.uuid.clone()).unwrap_or_default();
        let row = |pod: &str, id: &str| Assignment {
            namespace: "team-a".into(),
            pod: pod.into(),
            container: "main".into(),
            resource: "nvidia.com/gpu".into(),
            device_id: id.into(),
        };
        podres::apply(&mut s, &[row("p1", &uuid), row("p2", "1")]);
        out.push(s);
    }
    out
}

/// What the cockpit does with one line of the stream (`take_lines` in `agent_stream`): an
/// empty line is skipped, anything else must be a sample set or the stream is dropped with
/// the parser's reason.
fn agent_line(line: &[u8], seen: &mut FaultsSeen, fleet: &mut Fleet) -> Result<bool, TestCaseError> {
    let sample: NodeSample = match serde_json::from_slice(line) {
        Ok(s) => s,
        Err(e) => {
            let e = e.to_string();
            clear("a bad sample", &e)?;
            prop_assert!(e.contains("column"), "the reason says where: {e}");
            return Ok(false);
        }
    };
    let d = deltas(&sample);
    let [Delta::Telemetry(t)] = d.as_slice() else {
        return Err(TestCaseError::fail(format!("one telemetry delta per sample set: {d:?}")));
    };
    prop_assert_eq!(t.len(), sample.gpus.len());
    for s in t {
        prop_assert!(s.sample.util.is_none_or(|u| u <= 100) && s.sample.mem_pct <= 100, "{:?}", s.sample);
        prop_assert!(s.instances.iter().all(|i| i.util.is_none_or(|u| u <= 100)));
    }
    let faults = fault_deltas(&sample, seen);
    prop_assert!(fault_deltas(&sample, seen).is_empty(), "a fault is reported once: {faults:?}");
    for delta in d.into_iter().chain(faults) {
        fleet.apply(delta);
    }
    recount(fleet)?;
    Ok(true)
}

#[test]
fn agent_seeds_parse_and_land_on_their_gpus() {
    let mut fleet = kube_fleet();
    let mut seen = FaultsSeen::new();
    for s in agent_seeds() {
        let line = serde_json::to_vec(&s).unwrap_or_default();
        assert_eq!(agent_line(&line, &mut seen, &mut fleet).map_err(|e| e.to_string()), Ok(true));
    }
    let measured = fleet.gpu_ids().filter_map(|g| fleet.gpu(g)).filter(|g| g.last_sample_at.is_some()).count();
    assert!(measured >= 4, "the agent's samples reach the GPUs of gpu-1 (by node and index): {measured}");
}

#[test]
fn agent_ndjson_lines() {
    let seeds: Vec<Value> = agent_seeds().iter().map(|s| serde_json::to_value(s).unwrap_or_default()).collect();
    let base = kube_fleet();
    let tally = Tally::default();
    let random = prop_oneof![prop::collection::vec(any::<u8>(), 0..300), "(?s).{0,200}".prop_map(String::into_bytes),];
    let input = prop_oneof![
        8 => json_case(seeds.len()).prop_map(|c| c.text(&seeds)),
        1 => random,
    ];
    // Two lines per case: what comes after a bad line must not matter, and faults carry over.
    run("agent NDJSON", 800, (input, any::<bool>(), select(ViewKind::ALL.to_vec())), |(bytes, twice, view)| {
        let mut fleet = base.clone();
        let mut seen = FaultsSeen::new();
        let mut stream = bytes.clone();
        if twice {
            stream.push(b'\n');
            stream.extend_from_slice(&bytes);
        }
        for line in stream.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let ok = agent_line(line, &mut seen, &mut fleet)?;
            tally.count(ok);
            if !ok {
                break; // the cockpit drops the stream and reconnects
            }
        }
        draw(&fleet, view);
        Ok(())
    });
    tally.check("agent NDJSON", 20);
}

// ---------- 2. Prometheus answers ----------

const PROM_ANSWER: &str = r#"{"status":"success","data":{"resultType":"vector","result":[
    {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","UUID":"GPU-a","Hostname":"n1","gpu":"3"},"value":[1700000000.5,"41"]},
    {"metric":{"__name__":"DCGM_FI_DEV_FB_USED","UUID":"GPU-a","Hostname":"n1","gpu":"3"},"value":[1700000000.5,"20000"]},
    {"metric":{"__name__":"DCGM_FI_DEV_FB_FREE","UUID":"GPU-a","Hostname":"n1","gpu":"3"},"value":[1700000000.5,"60000"]},
    {"metric":{"__name__":"DCGM_FI_DEV_POWER_USAGE","UUID":"GPU-a","Hostname":"n1","gpu":"3"},"value":[1700000000.5,"312.6"]},
    {"metric":{"__name__":"DCGM_FI_DEV_GPU_TEMP","UUID":"GPU-a","Hostname":"n1","gpu":"3"},"value":[1700000000.5,"55"]},
    {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","UUID":"GPU-b","Hostname":"n1","gpu":"4"},"value":[1700000001,"100"]},
    {"metric":{"__name__":"DCGM_FI_DEV_FB_USED","UUID":"GPU-mig","Hostname":"n1","gpu":"4"},"value":[1700000000.5,"100"]}
]}}"#;

fn prometheus_seeds() -> Vec<Value> {
    vec![
        serde_json::from_str(PROM_ANSWER).unwrap_or_default(),
        json!({"status": "error", "errorType": "bad_data", "error": "parse error"}),
        json!({"status": "success", "data": {"resultType": "vector", "result": []}}),
    ]
}

/// Series as dcgm-exporter names them, with odd values, times and labels.
fn prometheus_series() -> BoxedStrategy<Value> {
    let name = select(
        &[
            "DCGM_FI_DEV_GPU_UTIL",
            "DCGM_FI_DEV_FB_USED",
            "DCGM_FI_DEV_FB_FREE",
            "DCGM_FI_DEV_POWER_USAGE",
            "DCGM_FI_DEV_GPU_TEMP",
            "up",
        ][..],
    );
    let number = "[-+]?[0-9]{0,24}(\\.[0-9]{0,8})?([eE][-+]?[0-9]{1,4})?|NaN|[-+]?Inf|";
    let time = prop_oneof![any::<f64>().prop_map(Value::from), any::<i64>().prop_map(Value::from), odd_value()];
    (name, select(&["GPU-a", "GPU-b", "", "GPU-c"][..]), odd_string(), "[0-9]{0,4}|-1|٣", number, time)
        .prop_map(|(name, uuid, host, gpu, value, at)| {
            json!({"metric": {"__name__": name, "UUID": uuid, "Hostname": host, "gpu": gpu}, "value": [at, value]})
        })
        .boxed()
}

#[test]
fn prometheus_seeds_parse() {
    let s = prometheus::samples(PROM_ANSWER.as_bytes()).unwrap_or_default();
    let got: Vec<_> = s.iter().map(|s| (s.gpu_uuid.as_str(), s.sample.util, s.node_gpu.clone())).collect();
    assert_eq!(got, vec![("GPU-a", Some(41), Some(("n1".into(), 3))), ("GPU-b", Some(100), Some(("n1".into(), 4)))]);
    let e = prometheus::samples(br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#);
    assert!(e.is_err_and(|e| e.contains("bad_data") && e.contains("parse error")));
}

#[test]
fn prometheus_answers() {
    let seeds = prometheus_seeds();
    let tally = Tally::default();
    let generated = prop::collection::vec(prometheus_series(), 0..12).prop_map(|r| {
        serde_json::to_vec(&json!({"status": "success", "data": {"resultType": "vector", "result": r}}))
            .unwrap_or_default()
    });
    let input = prop_oneof![
        5 => json_case(seeds.len()).prop_map(|c| c.text(&seeds)),
        3 => generated,
        1 => prop::collection::vec(any::<u8>(), 0..200),
    ];
    run("Prometheus answers", 1500, input, |body| {
        match prometheus::samples(&body) {
            Ok(samples) => {
                tally.count(true);
                let mut uuids: Vec<&str> = samples.iter().map(|s| s.gpu_uuid.as_str()).collect();
                uuids.dedup();
                prop_assert_eq!(uuids.len(), samples.len(), "one sample per GPU");
                for s in &samples {
                    prop_assert!(!s.gpu_uuid.is_empty());
                    prop_assert!(s.sample.util.is_some_and(|u| u <= 100), "{:?}", s.sample);
                    prop_assert!(s.sample.mem_pct <= 100, "{:?}", s.sample);
                }
            }
            Err(e) => {
                tally.count(false);
                clear("a bad answer", &e)?;
                prop_assert!(
                    e.starts_with("not a Prometheus answer: ") || e.starts_with("Prometheus said "),
                    "the error says what was wrong: {e}"
                );
                if e.starts_with("not a Prometheus answer: ") {
                    prop_assert!(serde_json::from_slice::<Value>(&body).is_err(), "{e}");
                }
            }
        }
        Ok(())
    });
    tally.check("Prometheus answers", 30);
}

// ---------- 3. PodResources protobuf ----------

fn podres_rows() -> Vec<Assignment> {
    let row = |ns: &str, pod: &str, c: &str, res: &str, id: &str| Assignment {
        namespace: ns.into(),
        pod: pod.into(),
        container: c.into(),
        resource: res.into(),
        device_id: id.into(),
    };
    vec![
        row("llm", "trainer-0", "main", "nvidia.com/gpu", "GPU-aaaa"),
        row("llm", "trainer-0", "main", "nvidia.com/gpu", "GPU-bbbb"),
        row("llm", "trainer-0", "sidecar", "nvidia.com/mig-1g.10gb", "MIG-cccc"),
        row("notebooks", "jupyter-x", "nb", "nvidia.com/gpu", "3"),
    ]
}

/// Valid `List` answers: fabrik's own encoding, and one with the fields a newer kubelet
/// sends (topology, CPU ids, memory, DRA resources) that fabrik skips.
fn podres_seeds() -> Vec<Vec<u8>> {
    let plain = podres::answer_of(&podres_rows());
    let mut full = plain.clone();
    if let Some(c) = full.pod_resources.first_mut().and_then(|p| p.containers.first_mut()) {
        c.cpu_ids = vec![0, 1, i64::MAX, -1];
        c.memory = vec![v1::ContainerMemory { memory_type: "memory".into(), size: u64::MAX, topology: None }];
        if let Some(d) = c.devices.first_mut() {
            d.topology = Some(v1::TopologyInfo { nodes: vec![v1::NumaNode { id: 1 }, v1::NumaNode { id: -1 }] });
        }
        c.dynamic_resources = vec![v1::DynamicResource {
            claim_name: "dra-pod-gpu".into(),
            claim_namespace: "team-a".into(),
            claim_resources: vec![v1::ClaimResource {
                cdi_devices: vec![v1::CdiDevice { name: "nvidia.com/gpu=0".into() }],
                driver_name: "gpu.nvidia.com".into(),
                pool_name: "dra-1".into(),
                device_name: "gpu-0".into(),
            }],
        }];
    }
    let mut unknown = plain.encode_to_vec();
    unknown.extend_from_slice(&[0x10, 0x05, 0x3a, 0x02, 0x08, 0x01]); // fields 2 and 7, unknown
    vec![plain.encode_to_vec(), full.encode_to_vec(), unknown]
}

const PROTO_TOKENS: &[&str] = &["\u{0}", "\u{7f}", "\n", "\u{12}", "\u{1a}", "\u{22}", "\u{b}", "\u{c}", "\u{ff}"];

fn decode_rows(b: &[u8]) -> Result<Vec<Assignment>, String> {
    v1::ListPodResourcesResponse::decode(b).map(podres::rows_of).map_err(|e| e.to_string())
}

#[test]
fn podresources_seeds_decode() {
    let seeds = podres_seeds();
    for s in &seeds {
        assert_eq!(decode_rows(s), Ok(podres_rows()));
    }
}

#[test]
fn podresources_protobuf() {
    let seeds = podres_seeds();
    let tally = Tally::default();
    let mutated = (0..seeds.len(), edits(PROTO_TOKENS, 4)).prop_map(|(i, e)| apply_edits(&seeds[i], &e));
    let input = prop_oneof![3 => mutated, 1 => prop::collection::vec(any::<u8>(), 0..256)];
    let mut fake = FakeGpus::new("n1", 4, 1);
    let Ok(sample) = fake.sample(1_000) else { panic!("the fake backend samples") };
    run("PodResources bytes", 3000, input, |bytes| {
        match decode_rows(&bytes) {
            Ok(rows) => {
                tally.count(true);
                // The agent puts them on its GPUs: every GPU and instance then says who has it.
                let mut s = sample.clone();
                podres::apply(&mut s, &rows);
                prop_assert!(s.gpus.iter().all(|g| g.allocated_to.is_some()));
                prop_assert!(s.gpus.iter().flat_map(|g| &g.mig_instances).all(|m| m.allocated_to.is_some()));
            }
            Err(e) => {
                tally.count(false);
                clear("a bad answer", &e)?;
                prop_assert!(e.contains("failed to decode"), "prost's reason: {e}");
            }
        }
        // The other answers of the service: no panic whatever the bytes.
        if let Err(e) = v1::GetPodResourcesResponse::decode(bytes.as_slice()) {
            clear("Get", &e.to_string())?;
        }
        if let Err(e) = v1::AllocatableResourcesResponse::decode(bytes.as_slice()) {
            clear("GetAllocatableResources", &e.to_string())?;
        }
        Ok(())
    });
    tally.check("PodResources bytes", 2);

    // Any assignments survive the trip through the kubelet's encoding (grouped by pod,
    // container and resource, so compared as sets).
    let text = || prop_oneof![3 => select(WORDS).prop_map(String::from), 1 => "\\PC{0,12}"];
    let row = (text(), text(), text(), text(), text()).prop_map(|(namespace, pod, container, resource, device_id)| {
        Assignment { namespace, pod, container, resource, device_id }
    });
    run("PodResources round trip", 1000, prop::collection::vec(row, 0..10), |rows| {
        let key = |r: &Assignment| {
            (r.namespace.clone(), r.pod.clone(), r.container.clone(), r.resource.clone(), r.device_id.clone())
        };
        let mut want: Vec<_> = rows.iter().map(key).collect();
        let mut got: Vec<_> = decode_rows(&podres::answer_of(&rows).encode_to_vec())
            .map_err(TestCaseError::fail)?
            .iter()
            .map(key)
            .collect();
        want.sort();
        got.sort();
        prop_assert_eq!(got, want);
        Ok(())
    });
}

// ---------- 4. the kube translator ----------

/// Which watch an object comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Watch {
    Namespace,
    VCluster,
    Node,
    Pod,
    Quota,
    Pdb,
    Event,
    Slice,
    Claim,
    LocalQueue,
    ClusterQueue,
    TaintRule,
    Domain,
    Workload,
    NetPol,
    Machine,
    Host,
    CiliumPol,
    CiliumWide,
    Capi(CapiKind),
}

const WATCHES: [Watch; 24] = [
    Watch::Namespace,
    Watch::VCluster,
    Watch::LocalQueue,
    Watch::Node,
    Watch::Slice,
    Watch::Pod,
    Watch::Claim,
    Watch::Quota,
    Watch::Pdb,
    Watch::Event,
    Watch::ClusterQueue,
    Watch::TaintRule,
    Watch::Domain,
    Watch::Workload,
    Watch::NetPol,
    Watch::Machine,
    Watch::Host,
    Watch::CiliumPol,
    Watch::CiliumWide,
    Watch::Capi(CapiKind::Cluster),
    Watch::Capi(CapiKind::ControlPlane),
    Watch::Capi(CapiKind::MachineDeployment),
    Watch::Capi(CapiKind::MachineSet),
    Watch::Capi(CapiKind::MachineHealthCheck),
];

#[derive(Clone, Copy, Debug)]
enum Ev {
    Init,
    InitApply,
    InitDone,
    Apply,
    Delete,
}

fn event<K>(ev: Ev, o: Option<K>) -> Option<Event<K>> {
    Some(match (ev, o) {
        (Ev::Init, _) => Event::Init,
        (Ev::InitDone, _) => Event::InitDone,
        (Ev::InitApply, Some(o)) => Event::InitApply(o),
        (Ev::Apply, Some(o)) => Event::Apply(o),
        (Ev::Delete, Some(o)) => Event::Delete(o),
        _ => return None,
    })
}

/// The watch event for `text` as kube-rs would make it (serde_json from the response's
/// bytes); the parser's reason when the object does not deserialize.
fn msg(w: Watch, ev: Ev, text: Option<&[u8]>) -> Result<Option<Msg>, String> {
    fn obj<K: serde::de::DeserializeOwned>(text: Option<&[u8]>) -> Result<Option<K>, String> {
        text.map(|t| serde_json::from_slice::<K>(t).map_err(|e| e.to_string())).transpose()
    }
    Ok(match w {
        Watch::Namespace => event(ev, obj::<Namespace>(text)?).map(Msg::Namespace),
        Watch::VCluster => event(ev, obj::<Pod>(text)?).map(Msg::VCluster),
        Watch::Node => event(ev, obj::<Node>(text)?).map(Msg::Node),
        Watch::Pod => event(ev, obj::<Pod>(text)?).map(Msg::Pod),
        Watch::Quota => event(ev, obj::<ResourceQuota>(text)?).map(Msg::Quota),
        Watch::Pdb => event(ev, obj::<PodDisruptionBudget>(text)?).map(Msg::Pdb),
        Watch::Event => event(ev, obj::<KEvent>(text)?).map(Msg::Event),
        Watch::Slice => event(ev, obj::<ResourceSlice>(text)?).map(Msg::Slice),
        Watch::Claim => event(ev, obj::<ResourceClaim>(text)?).map(Msg::Claim),
        Watch::LocalQueue => event(ev, obj::<DynamicObject>(text)?).map(Msg::LocalQueue),
        Watch::ClusterQueue => event(ev, obj::<DynamicObject>(text)?).map(Msg::ClusterQueue),
        Watch::TaintRule => event(ev, obj::<DynamicObject>(text)?).map(Msg::TaintRule),
        Watch::Domain => event(ev, obj::<DynamicObject>(text)?).map(Msg::Domain),
        Watch::Workload => event(ev, obj::<DynamicObject>(text)?).map(Msg::Workload),
        Watch::NetPol => event(ev, obj::<NetworkPolicy>(text)?).map(Msg::NetPol),
        Watch::Machine => event(ev, obj::<DynamicObject>(text)?).map(Msg::Machine),
        Watch::Capi(k) => event(ev, obj::<DynamicObject>(text)?).map(|e| Msg::Capi(k, e)),
        Watch::Host => event(ev, obj::<DynamicObject>(text)?).map(Msg::Host),
        Watch::CiliumPol => event(ev, obj::<DynamicObject>(text)?).map(Msg::CiliumPol),
        Watch::CiliumWide => event(ev, obj::<DynamicObject>(text)?).map(Msg::CiliumWide),
    })
}

fn kube_node(name: &str, extra: Value, gpus: &str) -> Value {
    let mut labels = json!({
        "kubernetes.io/hostname": name,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": "81559",
    });
    if let (Some(l), Some(e)) = (labels.as_object_mut(), extra.as_object()) {
        l.extend(e.clone());
    }
    json!({
        "metadata": {"name": name, "labels": labels, "creationTimestamp": "2026-12-01T10:00:00Z",
                     "annotations": {"fabrik.io/cordoned-by": "someone"}},
        "spec": {"unschedulable": false},
        "status": {
            "capacity": {"cpu": "128", "nvidia.com/gpu": gpus},
            "allocatable": {"cpu": "126", "nvidia.com/gpu": gpus, "nvidia.com/mig-1g.10gb": "14", "nvidia.com/mig-3g.40gb": "2"},
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-01T11:00:00Z"}]
        }
    })
}

fn kube_pod(name: &str, node: &str, res: &str, n: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "team-a", "labels": {"app": "trainer"},
                     "creationTimestamp": "2026-12-01T10:05:00Z",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "trainer-abc",
                                          "uid": "u1", "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "x",
                 "resources": {"limits": {res: n}, "requests": {res: n}}}],
                 "volumes": [{"name": "scratch", "emptyDir": {}}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": "dra-pod-gpu"}, {"name": "other"}]},
        "status": {"phase": "Running", "resourceClaimStatuses": [{"name": "other", "resourceClaimName": "other-claim"}]}
    })
}

/// Objects of every kind the feed watches, as the API server sends them (the unit tests'
/// fixtures, src/feed/kube/tests.rs, with the fields they leave out filled in).
fn kube_seeds() -> Vec<(Watch, Value)> {
    vec![
        (Watch::Namespace, json!({"metadata": {"name": "team-a", "labels": {"fabrik.io/tenant": "alpha"}}})),
        (Watch::Namespace, json!({"metadata": {"name": "vcluster-lab"}})),
        (Watch::Namespace, json!({"metadata": {"name": "serving"}})),
        (
            Watch::VCluster,
            json!({"metadata": {"name": "lab-0", "namespace": "vcluster-lab", "labels": {"app": "vcluster", "release": "lab"}},
                   "spec": {"containers": [{"name": "syncer"}]}}),
        ),
        (
            Watch::LocalQueue,
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                   "metadata": {"name": "default", "namespace": "serving"}, "spec": {"clusterQueue": "inference"}}),
        ),
        (Watch::Node, kube_node("gpu-1", json!({}), "8")),
        (
            Watch::Node,
            kube_node(
                "mig-1",
                json!({"nvidia.com/mig.config": "all-balanced", "nvidia.com/mig.config.state": "success"}),
                "0",
            ),
        ),
        (Watch::Node, kube_node("dra-1", json!({"nvidia.com/mig.config": "custom-x"}), "0")),
        (
            Watch::Slice,
            json!({
                "metadata": {"name": "dra-1-gpu.nvidia.com"},
                "spec": {"driver": "gpu.nvidia.com", "nodeName": "dra-1",
                         "pool": {"name": "dra-1", "generation": 1, "resourceSliceCount": 1},
                         "devices": [
                           {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-aaaa"},
                            "productName": {"string": "NVIDIA H100 80GB HBM3"}}, "capacity": {"memory": {"value": "80Gi"}}},
                           {"name": "gpu-1", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-bbbb"},
                            "productName": {"string": "NVIDIA H100 80GB HBM3"}}, "capacity": {"memory": {"value": "80Gi"}}},
                           {"name": "gpu-1-mig-1g10gb-19-6", "attributes": {"type": {"string": "mig"}, "uuid": {"string": "MIG-cccc"},
                            "parentUUID": {"string": "GPU-bbbb"}, "profile": {"string": "1g.10gb"}},
                            "capacity": {"memory": {"value": "10Gi"}, "memorySlice6": {"value": "1"}}},
                           {"name": "gpu-2-mig-3g40gb-9-4", "attributes": {"type": {"string": "mig"}, "uuid": {"string": "MIG-dddd"},
                            "parentUUID": {"string": "GPU-eeee"}, "profile": {"string": "3g.40gb"},
                            "gpu.nvidia.com/productName": {"string": "NVIDIA H100 80GB HBM3"}},
                            "capacity": {"memorySlice4": {"value": "1"}, "memorySlice5": {"value": "1"}}}
                         ]}
            }),
        ),
        (Watch::Pod, kube_pod("p1", "gpu-1", "nvidia.com/gpu", "2")),
        (Watch::Pod, kube_pod("p2", "mig-1", "nvidia.com/mig-1g.10gb", "2")),
        (Watch::Pod, kube_pod("dra-pod", "dra-1", "cpu", "1")),
        (
            Watch::Claim,
            json!({
                "metadata": {"name": "dra-pod-gpu", "namespace": "team-a"},
                "spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}},
                    {"name": "more", "firstAvailable": [{"name": "a", "deviceClassName": "mig.nvidia.com", "count": 2}]}]}},
                "status": {"allocation": {"devices": {"results": [
                    {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "dra-1", "device": "gpu-0"},
                    {"request": "more", "driver": "gpu.nvidia.com", "pool": "dra-1", "device": "gpu-1-mig-1g10gb-19-6"}]}}}
            }),
        ),
        (
            Watch::Quota,
            json!({
                "metadata": {"name": "gpu-quota", "namespace": "team-a", "resourceVersion": "77"},
                "spec": {"hard": {"requests.nvidia.com/gpu": "8", "pods": "100", "requests.nvidia.com/mig-1g.10gb": "4",
                                  "gpu.deviceclass.resource.k8s.io/devices": "2"}},
                "status": {"hard": {"requests.nvidia.com/gpu": "8"}, "used": {"requests.nvidia.com/gpu": "6"}}
            }),
        ),
        (
            Watch::Pdb,
            json!({
                "metadata": {"name": "trainer", "namespace": "team-a"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "trainer"}}},
                "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
            }),
        ),
        (
            Watch::Event,
            json!({
                "metadata": {"name": "gpu-1.17f", "namespace": "team-a", "resourceVersion": "10"},
                "involvedObject": {"kind": "Node", "name": "gpu-1", "namespace": ""},
                "reason": "XidError", "message": "XID 79 on GPU 3", "type": "Warning", "count": 1,
                "lastTimestamp": "2026-12-01T10:06:00Z"
            }),
        ),
        (
            Watch::ClusterQueue,
            json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                "metadata": {"name": "inference", "resourceVersion": "12"},
                "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu", "cpu"], "flavors": [
                    {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 16, "borrowingLimit": 0,
                                                    "lendingLimit": "4"},
                                                   {"name": "cpu", "nominalQuota": "64"}]},
                    {"name": "a100", "resources": [{"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "8"}]}]}]},
                "status": {"flavorsUsage": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "6"}]}]}
            }),
        ),
        (
            Watch::TaintRule,
            json!({
                "apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule",
                "metadata": {"name": "fabrik-dra-1-gpu0-gpu-0"},
                "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "dra-1", "device": "gpu-0"},
                         "taint": {"key": "fabrik.io/gpu-taint", "value": "maintenance", "effect": "NoSchedule",
                                   "timeAdded": "2026-12-01T10:07:00Z"}}
            }),
        ),
        (
            Watch::Domain,
            json!({
                "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
                "metadata": {"name": "nvl", "namespace": "team-a", "creationTimestamp": "2026-12-01T10:00:00Z"},
                "spec": {"numNodes": 2, "channel": {"resourceClaimTemplate": {"name": "nvl-channel"}}},
                "status": {"status": "NotReady", "nodes": [
                    {"name": "gpu-1", "ipAddress": "10.0.0.1", "cliqueID": "c.1", "status": "Ready"},
                    {"name": "dra-1", "ipAddress": "10.0.0.2", "cliqueID": "c.1", "status": "NotReady"}]}
            }),
        ),
        (
            Watch::Workload,
            json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": "job-train-1a2b3", "namespace": "team-a", "uid": "wl-1",
                    "creationTimestamp": "2026-12-01T10:00:00Z",
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "j-1", "controller": true}]},
                "spec": {"queueName": "lq", "priority": 10, "active": true, "podSets": [{"name": "main", "count": 2,
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "4"}}}]}}}]},
                "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                    "message": "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 2 more needed",
                    "lastTransitionTime": "2026-12-01T10:00:01Z"}]}
            }),
        ),
        (
            Watch::NetPol,
            json!({
                "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": "default-deny", "namespace": "team-a"},
                "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"],
                    "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "a"}}}], "ports": [{"port": 8080}]}]}
            }),
        ),
        (
            Watch::Machine,
            json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                "metadata": {"name": "md-0-abc", "namespace": "capi", "creationTimestamp": "2026-12-01T10:00:00Z"},
                "spec": {"clusterName": "gpu-prod", "providerID": "metal3://capi/host-1/md-0-abc"},
                "status": {"phase": "Running", "nodeRef": {"name": "gpu-1"}, "conditions": [
                    {"type": "OwnerRemediated", "status": "False", "reason": "WaitingForRemediation", "message": "MachineHealthCheck"}]}
            }),
        ),
        (
            Watch::Capi(CapiKind::MachineDeployment),
            json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
                "metadata": {"name": "md-0", "namespace": "capi", "creationTimestamp": "2026-12-01T10:00:00Z"},
                "spec": {"clusterName": "gpu-prod", "replicas": 3, "template": {"spec": {"version": "v1.34.1"}}},
                "status": {"phase": "Running", "replicas": 3, "readyReplicas": 2, "upToDateReplicas": 3, "conditions": [
                    {"type": "Available", "status": "False", "reason": "NotAvailable", "message": "1 of 3"},
                    {"type": "Remediating", "status": "True", "reason": "Remediating", "message": ""}]}
            }),
        ),
        (
            Watch::Capi(CapiKind::MachineHealthCheck),
            json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck",
                "metadata": {"name": "mhc-0", "namespace": "capi"},
                "spec": {"clusterName": "gpu-prod"},
                "status": {"expectedMachines": 3, "currentHealthy": 0, "remediationsAllowed": 0, "targets": ["md-0-abc"],
                    "conditions": [{"type": "RemediationAllowed", "status": "False", "reason": "TooManyUnhealthy", "message": "too many"}]}
            }),
        ),
        (
            Watch::Host,
            json!({
                "apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
                "metadata": {"name": "host-1", "namespace": "capi", "uid": "u-1",
                    "annotations": {"reboot.metal3.io": ""}},
                "spec": {"online": true, "consumerRef": {"kind": "Metal3Machine", "name": "md-0-abc"}},
                "status": {"operationalStatus": "error", "errorType": "power management error", "errorMessage": "BMC timeout",
                    "poweredOn": true, "provisioning": {"state": "provisioned"},
                    "hardware": {"cpu": {"count": 64}, "ramMebibytes": 524288, "nics": [{"speedGbps": 100}]}}
            }),
        ),
        (
            Watch::CiliumPol,
            json!({
                "apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
                "metadata": {"name": "default-deny", "namespace": "team-a"},
                "specs": [{"endpointSelector": {}, "ingress": [{}], "egress": [{"toEntities": ["all"], "toPorts": [{"ports": [{"port": "53"}]}]}]}]
            }),
        ),
        (
            Watch::CiliumWide,
            json!({
                "apiVersion": "cilium.io/v2", "kind": "CiliumClusterwideNetworkPolicy",
                "metadata": {"name": "deny-all"},
                "spec": {"endpointSelector": {"matchExpressions": [{"key": "io.kubernetes.pod.namespace", "operator": "NotIn", "values": ["kube-system"]}]},
                    "ingress": [{}], "enableDefaultDeny": {"egress": false}}
            }),
        ),
    ]
}

/// Lists every kind, in the order the feed starts its watches, with `swap` standing in for
/// the seed of that index; applies what comes out to `fleet`. `Err` with the parser's reason
/// when the swapped object does not deserialize (it is then left out, as kube-rs would
/// report the error and go on).
fn list_all(
    t: &mut Translator,
    fleet: &mut Fleet,
    seeds: &[(Watch, Vec<u8>)],
    swap: Option<(usize, &[u8])>,
) -> Result<(), String> {
    let mut bad = Ok(());
    for w in WATCHES {
        let mut msgs = vec![msg(w, Ev::Init, None)];
        for (i, (sw, text)) in seeds.iter().enumerate() {
            if *sw != w {
                continue;
            }
            let text = match swap {
                Some((at, other)) if at == i => other,
                _ => text.as_slice(),
            };
            msgs.push(msg(w, Ev::InitApply, Some(text)));
        }
        msgs.push(msg(w, Ev::InitDone, None));
        for m in msgs {
            match m {
                Ok(Some(m)) => {
                    for d in t.apply(m, 1_000) {
                        fleet.apply(d);
                    }
                }
                Ok(None) => {}
                Err(e) => bad = Err(e),
            }
        }
    }
    bad
}

fn seed_texts() -> Vec<(Watch, Vec<u8>)> {
    kube_seeds().into_iter().map(|(w, v)| (w, serde_json::to_vec(&v).unwrap_or_default())).collect()
}

/// The fleet of the kube seeds: gpu-1 (8 GPUs from labels), mig-1 (MIG from its named
/// config), dra-1 (GPUs from its ResourceSlice), their pods, tenants and quotas.
fn kube_fleet() -> Fleet {
    let mut t = Translator::new(KubeFeedConfig::default());
    let mut fleet = Fleet::new(Thresholds::default());
    if let Err(e) = list_all(&mut t, &mut fleet, &seed_texts(), None) {
        panic!("a kube seed does not parse: {e}");
    }
    fleet
}

#[test]
fn kube_seeds_translate_into_a_fleet() {
    let f = kube_fleet();
    assert!(f.synced, "every kind listed");
    assert_eq!((f.totals.nodes, f.totals.pods), (3, 3));
    assert_eq!(f.totals.gpus, 8 + 8 + 3, "labels, a named MIG config, a slice (with a MIG-only parent)");
    assert!(f.totals.mig_instances > 8, "{}", f.totals.mig_instances);
    assert!(f.gpu_by_uuid("GPU-aaaa").is_some());
    // Cluster API above the Machines: the deployment and the health check, which stopped
    // remediating (an alert).
    assert_eq!(f.capi.len(), 2);
    assert!(f.alerts.keys().any(|(k, _)| *k == fabrik::model::AlertKind::RemediationBlocked));
    // The DeviceTaintRule's taint lands on dra-1's gpu-0; the NotReady domain is an alert.
    let taints = f.gpu_by_uuid("GPU-aaaa").and_then(|g| f.gpu(g)).and_then(|g| g.dra.as_ref()).map(|d| d.taints.len());
    assert_eq!(taints, Some(1), "the rule's taint on dra-1 gpu-0");
    assert_eq!(f.domains.len(), 1);
    // The Workload waits for quota: 2 pods × 4 GPUs, first in its (unknown) queue's line.
    let w = f.workloads.get("team-a/job-train-1a2b3").expect("the Workload");
    assert_eq!((w.state(), w.gpus, w.pods), (fabrik::model::WorkloadState::Pending, 8, 2));
    assert_eq!(f.workload_position("team-a/job-train-1a2b3"), Some(1));
    assert!(f.alerts.keys().any(|(k, _)| *k == fabrik::model::AlertKind::DomainNotReady));
    let tenants: Vec<&str> = f.tenant_ids().filter_map(|t| f.tenant(t)).map(|t| f.str_of(t.name)).collect();
    for want in ["alpha", "lab", "inference"] {
        assert!(tenants.contains(&want), "{want} in {tenants:?}");
    }
    assert!(f.quota_ids().count() >= 4, "ResourceQuota keys and ClusterQueue flavors");
}

/// An object of the seeds mutated, or one made up in place of the seed of that index.
#[derive(Clone, Debug)]
enum KubeCase {
    Mutated(JsonCase),
    Generated(usize, Value),
}

/// Quantities at the edges of what the translator counts in (u16 per pod, u8 per node,
/// i64 and the quantity cap), and malformed ones.
const QUANTITIES: &[&str] = &[
    "0",
    "1",
    "2",
    "7",
    "8",
    "64",
    "65",
    "255",
    "256",
    "65536",
    "4294967296",
    "9223372036854775808",
    "-1",
    "0.5",
    "500m",
    "1k",
    "1Ki",
    "1e3",
    "1e400",
    "",
    "x",
];

/// Counts where sums overflow: two of them pass u16 (a pod's count of one resource) or i64
/// (a tenant's GPU quotas). Drawn half the time, or reaching the overflow is a lottery.
const POD_COUNTS: &[&str] = &["32768", "40000", "65535"];
const QUOTA_LIMITS: &[&str] = &["4611686018427387904", "5e18", "8E", "7Ei", "9223372036854775807"];

fn quantity(big: &'static [&'static str]) -> BoxedStrategy<&'static str> {
    prop_oneof![select(QUANTITIES), select(big)].boxed()
}

const RESOURCES: &[&str] = &[
    "nvidia.com/gpu",
    "nvidia.com/mig-1g.10gb",
    "nvidia.com/mig-1g.20gb",
    "nvidia.com/mig-2g.20gb",
    "nvidia.com/mig-3g.40gb",
    "nvidia.com/mig-7g.80gb",
    "nvidia.com/mig-9g.99gb",
    "cpu",
];

/// Made-up resource maps in place of a seed's: a pod whose containers ask for one resource
/// (and others), a node with odd capacities, MIG counts and GPU count, a quota with odd keys
/// and limits: what the translator and the fleet add up.
fn generated_object(seeds: &[Value]) -> BoxedStrategy<KubeCase> {
    let find = |name: &str| seeds.iter().position(|v| v["metadata"]["name"] == name).unwrap_or(0);
    let (pod, node, quota) = (find("p2"), find("gpu-1"), find("gpu-quota"));
    let resources = |big| prop::collection::btree_map(select(RESOURCES), quantity(big), 0..3);
    let quota_key = prop_oneof![
        4 => select(GPU_QUOTA_RESOURCES.to_vec()).prop_map(String::from),
        1 => select(RESOURCES).prop_map(|r| format!("requests.{r}")),
        1 => select(RESOURCES).prop_map(String::from),
    ];
    let quota_map = move || prop::collection::btree_map(quota_key.clone(), quantity(QUOTA_LIMITS), 0..5);
    let (seed_pod, seed_node, seed_quota) = (seeds[pod].clone(), seeds[node].clone(), seeds[quota].clone());
    let containers = prop::collection::vec((quantity(POD_COUNTS), resources(POD_COUNTS), resources(POD_COUNTS)), 1..4);
    let nodes = select(&["mig-1", "gpu-1", "dra-1", ""][..]);
    prop_oneof![
        2 => (select(&RESOURCES[..3]), containers, nodes).prop_map(move |(resource, containers, on)| {
            let mut v = seed_pod.clone();
            v["spec"]["nodeName"] = json!(on);
            v["spec"]["containers"] = containers
                .into_iter()
                .enumerate()
                .map(|(i, (n, mut limits, requests))| {
                    limits.insert(resource, n);
                    json!({"name": format!("c{i}"), "resources": {"limits": limits, "requests": requests}})
                })
                .collect();
            KubeCase::Generated(pod, v)
        }),
        1 => (resources(POD_COUNTS), resources(POD_COUNTS), quantity(POD_COUNTS), select(&["all-1g.10gb", "all-balanced", "custom-x", ""][..]))
            .prop_map(move |(capacity, allocatable, count, config)| {
                let mut v = seed_node.clone();
                v["status"]["capacity"] = json!(capacity);
                v["status"]["allocatable"] = json!(allocatable);
                v["metadata"]["labels"]["nvidia.com/gpu.count"] = json!(count);
                v["metadata"]["labels"]["nvidia.com/mig.config"] = json!(config);
                KubeCase::Generated(node, v)
            }),
        2 => (quota_map(), quota_map(), quota_map()).prop_map(move |(hard, enforced, used)| {
            let mut v = seed_quota.clone();
            v["spec"]["hard"] = json!(hard);
            v["status"] = json!({"hard": enforced, "used": used});
            KubeCase::Generated(quota, v)
        }),
    ]
    .boxed()
}

#[test]
fn kube_translator_on_mutated_objects() {
    let seeds = seed_texts();
    let values: Vec<Value> = kube_seeds().into_iter().map(|(_, v)| v).collect();
    let tally = Tally::default();
    let errors = (prop::option::of(any::<u16>()), odd_string());
    let case = prop_oneof![
        2 => json_case(values.len()).prop_map(KubeCase::Mutated),
        1 => generated_object(&values),
    ];
    let input = (case, prop::option::weighted(0.3, errors), select(ViewKind::ALL.to_vec()));
    run("kube translator", 600, input, |(case, error, view)| {
        let (at, text) = match &case {
            KubeCase::Mutated(c) => (c.seed % values.len(), c.text(&values)),
            KubeCase::Generated(at, v) => (*at, serde_json::to_vec(v).unwrap_or_default()),
        };
        let w = seeds[at].0;
        let mut t = Translator::new(KubeFeedConfig::default());
        let mut fleet = Fleet::new(Thresholds::default());
        // Listed with the odd object among the others, so the joins (tenants, slices, claims)
        // see it.
        match list_all(&mut t, &mut fleet, &seeds, Some((at, &text))) {
            Ok(()) => tally.count(true),
            Err(e) => {
                tally.count(false);
                clear("an object that does not deserialize", &e)?;
                prop_assert!(e.contains("column"), "serde_json says where: {e}");
            }
        }
        recount(&fleet)?;
        draw(&fleet, view);
        // Updated to the seed and back, deleted; then a watch error.
        for (ev, text) in
            [(Ev::Apply, seeds[at].1.as_slice()), (Ev::Apply, text.as_slice()), (Ev::Delete, &text), (Ev::Apply, &text)]
        {
            if let Ok(Some(m)) = msg(w, ev, Some(text)) {
                for d in t.apply(m, 2_000) {
                    fleet.apply(d);
                }
            }
            recount(&fleet)?;
        }
        if let Some((code, reason)) = error {
            for d in t.apply(Msg::Error { kind: Kind::Pods, code, reason }, 3_000) {
                if let Delta::Event(e) = &d {
                    prop_assert!(!e.message.is_empty());
                }
                fleet.apply(d);
            }
            t.apply(Msg::Reachable(Kind::Pods), 4_000).into_iter().for_each(|d| {
                fleet.apply(d);
            });
        }
        // Everything re-listed empty (the cluster was emptied while the watch was down):
        // nothing may be left behind, and no counter may have gone wrong on the way.
        let none: Vec<(Watch, Vec<u8>)> = Vec::new();
        list_all(&mut t, &mut fleet, &none, None).map_err(TestCaseError::fail)?;
        // (The translator keys objects by "namespace/name", which the API server's naming
        // rules keep unambiguous; a made-up name with a slash in it is not looked for.)
        recount(&fleet)?;
        let named = serde_json::from_slice::<Value>(&text).ok().is_none_or(|v| {
            ["namespace", "name"].iter().all(|k| v["metadata"][k].as_str().is_none_or(|s| !s.contains('/')))
        });
        if named {
            let left = (fleet.totals.nodes, fleet.totals.gpus, fleet.totals.mig_instances, fleet.totals.pods);
            prop_assert_eq!(left, (0, 0, 0, 0), "nodes, GPUs, MIG instances and pods all gone");
            prop_assert_eq!(fleet.totals.gpus_allocated, 0);
        }
        Ok(())
    });
    tally.check("kube translator", 30);
}

// ---------- 5. config, theme and keymap files ----------

const CONFIG_TOML: &str = "theme = \"fuzz\"\nkeymap = \"fuzz\"\nidle_util_pct = 3\nidle_window_secs = 900\n\
    busy_util_pct = 40\nmig_stuck_secs = 120\nfps = 60\ntenant_label = \"example.com/team\"\n";
const THEME_TOML: &str = "inherits = \"dark\"\n\n[palette]\naccent = \"#ff8800\"\nred = 196\n\n[styles]\n\
    \"ui.text\" = { fg = \"accent\", bg = \"black\", modifiers = [\"bold\"] }\n\"gpu.util.high\" = \"red\"\n\
    \"status.failed\" = { fg = \"light-red\", modifiers = \"crossed_out\" }\n\"gpu.mig.instance.3\" = 42\n";
const KEYMAP_TOML: &str = "inherits = \"k9s\"\n\n[normal]\nquit = [\"q\", \"ctrl-c\"]\nhelp = \"?\"\n\
    page_down = [\"ctrl-d\", \"pagedown\", \"f5\"]\nview_fleet = []\n\n[dialog]\nconfirm = [\"y\", \"enter\"]\n";
const DARK_TOML: &str = include_str!("../themes/dark.toml");
const DEFAULT_KEYMAP_TOML: &str = include_str!("../keymaps/default.toml");

/// TOML a person might get wrong: brackets, quotes, keys of the wrong section, numbers at
/// and past i64, dates and floats, odd colours and keys, self-inheritance.
const TOML_TOKENS: &[&str] = &[
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    "=",
    " = ",
    "\"",
    "'",
    "'''",
    "\"\"\"",
    "\n",
    "\r\n",
    "\t",
    ",",
    ".",
    "#",
    "\\",
    "\\u0000",
    "\\uD800",
    "\u{0}",
    "\u{feff}",
    "inherits = \"fuzz\"\n",
    "inherits = \"dark\"\n",
    "inherits = 7\n",
    "inherits = \"../../etc/x\"\n",
    "\n[styles]\n",
    "\n[palette]\n",
    "\n[normal]\n",
    "\n[dialog]\n",
    "\n[nope]\n",
    "fg = ",
    "bg = ",
    "modifiers = [\"bold\", 7]",
    "\"ui.text\" = ",
    "\"gpu\" = \"#12345\"",
    "quit = [\"ctrl-\"]",
    "quit = [\"ctrl--\", \"shift-/\", \"ß\", \"f99\", \"\"]",
    "0x7fffffffffffffffffffffffffffffffff",
    "-9223372036854775809",
    "170141183460469231731687303715884105728",
    "1e999",
    "nan",
    "-inf",
    "1979-05-27T07:32:00Z",
    "true",
    "\"#zzzzzz\"",
    "\"#ffffff\"",
    "256",
    "-1",
    "\"light_blue\"",
    "\"reset\"",
    "theme = \"light\"\n",
    "theme = \"\"\n",
    "keymap = \"a/b\"\n",
    "fps = 0\n",
    "idle_util_pct = \"30\"\n",
    "tenant_label = \"x/\"\n",
    "🦀",
];

#[derive(Clone, Copy, Debug)]
enum File {
    Config,
    Theme,
    Keymap,
}

/// Writes the three files (one of them mutated) and loads them as the cockpit does: the
/// config, then the theme and keymap it names.
fn load_files(dir: &Path, files: [&[u8]; 3]) -> Vec<ConfigWarning> {
    let write = |p: PathBuf, b: &[u8]| {
        if let Err(e) = std::fs::write(&p, b) {
            panic!("writing {}: {e}", p.display());
        }
    };
    write(dir.join("config.toml"), files[0]);
    write(dir.join("themes/fuzz.toml"), files[1]);
    write(dir.join("keymaps/fuzz.toml"), files[2]);
    let (config, mut warnings) = Config::load(Some(dir));
    let (theme, w) = Theme::load(&config.theme, Some(dir), false);
    assert!(!theme.name.is_empty());
    warnings.extend(w);
    let (keymap, w) = Keymap::load(&config.keymap, Some(dir));
    assert!(!keymap.name.is_empty());
    warnings.extend(w);
    warnings
}

/// A fresh config folder under the system's temp folder, removed on drop.
struct TempConfig(PathBuf);

impl TempConfig {
    fn new(what: &str) -> TempConfig {
        let dir = std::env::temp_dir().join(format!("fabrik-fuzz-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["themes", "keymaps"] {
            if let Err(e) = std::fs::create_dir_all(dir.join(sub)) {
                panic!("{}: {e}", dir.display());
            }
        }
        TempConfig(dir)
    }
}

impl Drop for TempConfig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn config_seeds_load_without_warnings() {
    let dir = TempConfig::new("seeds");
    for files in [[CONFIG_TOML, THEME_TOML, KEYMAP_TOML], [CONFIG_TOML, DARK_TOML, DEFAULT_KEYMAP_TOML], ["", "", ""]] {
        let w = load_files(&dir.0, files.map(str::as_bytes));
        assert_eq!(w, vec![], "{files:?}");
    }
    let (config, _) = Config::load(Some(&dir.0));
    assert_eq!((config.theme.as_str(), config.fps), ("dark", 30), "an empty file is the defaults");
}

#[test]
fn config_theme_keymap_files() {
    let dir = TempConfig::new("files");
    let tally = Tally::default();
    let seed = |f: File, alt: bool| match (f, alt) {
        (File::Config, _) => CONFIG_TOML,
        (File::Theme, false) => THEME_TOML,
        (File::Theme, true) => DARK_TOML,
        (File::Keymap, false) => KEYMAP_TOML,
        (File::Keymap, true) => DEFAULT_KEYMAP_TOML,
    };
    let file = select(&[File::Config, File::Theme, File::Keymap][..]);
    let text = prop_oneof![
        6 => edits(TOML_TOKENS, 4).prop_map(Some),
        1 => Just(None),
    ];
    let random = prop::option::weighted(0.1, prop::collection::vec(any::<u8>(), 0..200));
    run("config files", 500, (file, any::<bool>(), text, random), |(which, alt, edits, random)| {
        let mut files = [CONFIG_TOML.as_bytes(), THEME_TOML.as_bytes(), KEYMAP_TOML.as_bytes()];
        let bytes = match (&random, &edits) {
            (Some(r), _) => r.clone(),
            (None, Some(e)) => apply_edits(seed(which, alt).as_bytes(), e),
            (None, None) => seed(which, alt).as_bytes().to_vec(),
        };
        files[which as usize] = &bytes;
        let warnings = load_files(&dir.0, files);
        tally.count(warnings.is_empty());
        for w in &warnings {
            prop_assert!(!w.file.is_empty() && !w.message.trim().is_empty(), "{w:?}");
            prop_assert!(w.to_string().starts_with(&w.file), "{w}");
        }
        // A file that is not TOML says so (the others are the seeds, so the config names the
        // theme and keymap files and all three are read).
        match std::str::from_utf8(&bytes).map(|t| toml::de::DeTable::parse(t).is_ok()) {
            Err(_) => prop_assert!(
                warnings.iter().any(|w| w.message.contains("cannot read the file")),
                "not UTF-8: {warnings:?}"
            ),
            Ok(false) => prop_assert!(
                warnings.iter().any(|w| w.message.contains("TOML syntax error at line")),
                "not TOML: {warnings:?}"
            ),
            Ok(true) => {}
        }
        if edits.is_none() && random.is_none() {
            prop_assert!(warnings.is_empty(), "a seed warns: {warnings:?}");
        }
        Ok(())
    });
    // Most edits break something, so few cases load clean; some must.
    tally.check("config files", 5);
}

// ---------- 6. mig-parted YAML ----------

const OPERATOR_CONFIGMAP: &str = include_str!("fixtures/mig-parted/gpu-operator-default-config.yaml");

fn mig_parted_seeds() -> Vec<String> {
    let cm: Value = serde_saphyr::from_str(OPERATOR_CONFIGMAP).unwrap_or_default();
    let operator = cm["data"]["config.yaml"].as_str().unwrap_or_default().to_string();
    let two = "version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n";
    vec![
        operator,
        two.to_string(),
        format!(
            "# top\nversion: v1 # v\nmig-configs:   # the configs\n  # first\n{}",
            two.split_once("mig-configs:\n").map_or("", |(_, rest)| rest)
        ),
        "{version: v1, mig-configs: {all-disabled: [{devices: all, mig-enabled: false}]}}".to_string(),
        "version: v1\nmig-configs:\n  base: &off\n    - devices: all\n      mig-enabled: false\n  again: *off\n  \
         merged:\n    - <<: &on {devices: all, mig-enabled: true}\n      mig-devices: {\"1g.10gb\": 7}\n  other:\n    - *on\n"
            .to_string(),
        "---\nmig-configs:\n    all-disabled:\n        -   devices: all\n            mig-enabled: false\nversion: v1\n...\n"
            .to_string(),
        "version: v1\nmig-configs:\n".to_string(),
        two.replace('\n', "\r\n"),
    ]
}

fn mig_entry(name: &str) -> String {
    let m = GpuModel::H100_80GB;
    let l = mig::parse_layout(m, "3g.40gb,2g.20gb,1g.10gb+me").unwrap_or(Layout::Disabled);
    mig::mig_parted_yaml_for(m, name, &l)
}

const YAML_TOKENS: &[&str] = &[
    ":",
    ": ",
    "- ",
    "  ",
    "    ",
    "\t",
    "\n",
    "\r\n",
    "\n  ",
    "&a ",
    "*a",
    "*nowhere",
    "<<: ",
    "<<: *a\n",
    "{",
    "}",
    "[",
    "]",
    ",",
    "---\n",
    "...\n",
    "#",
    "\"",
    "'",
    "|",
    "|-\n",
    ">",
    "!!str ",
    "!!binary ",
    "!!map ",
    "? ",
    "~",
    "null",
    "mig-configs:",
    "\nmig-configs:\n",
    "\nmig-configs: []\n",
    "custom-x:",
    "all-disabled:",
    "1e999",
    "0x7fffffffffffffffffff",
    "18446744073709551616",
    "-9223372036854775809",
    "%YAML 1.2\n",
    "\u{feff}",
    "\\",
    "\\u0000",
    "\u{0}",
    "\u{85}",
    "\u{2028}",
];

#[test]
fn mig_parted_seeds_take_an_entry() {
    for text in mig_parted_seeds() {
        match mig::parted::add_config(&text, "custom-x", &mig_entry("custom-x")) {
            Ok(Some(out)) => {
                assert_eq!(mig::parted::add_config(&out, "custom-x", &mig_entry("custom-x")), Ok(None), "{out}")
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
}

#[test]
fn mig_parted_yaml() {
    let seeds = mig_parted_seeds();
    let tally = Tally::default();
    let name = select(&["custom-x", "all-disabled", "all-1g.10gb", "x: y", "", "-"][..]);
    let text = prop_oneof![
        8 => (0..seeds.len(), edits(YAML_TOKENS, 4)).prop_map(|(i, e)| (i, Some(e), None)),
        1 => "(?s).{0,80}".prop_map(|t| (0, None, Some(t))),
    ];
    let entry_edits = prop::option::weighted(0.1, edits(YAML_TOKENS, 2));
    run("mig-parted", 500, (text, name, entry_edits), |((seed, edits, random), name, entry_edits)| {
        let text = match (random, edits) {
            (Some(t), _) => t,
            (None, Some(e)) => String::from_utf8_lossy(&apply_edits(seeds[seed].as_bytes(), &e)).into_owned(),
            (None, None) => seeds[seed].clone(),
        };
        let entry = mig_entry(name);
        let entry = match &entry_edits {
            Some(e) => String::from_utf8_lossy(&apply_edits(entry.as_bytes(), e)).into_owned(),
            None => entry,
        };
        match mig::parted::add_config(&text, name, &entry) {
            Ok(Some(out)) => {
                tally.count(true);
                // What was added is there: adding it again finds it.
                prop_assert_eq!(mig::parted::add_config(&out, name, &entry), Ok(None), "{}", out);
            }
            Ok(None) => tally.count(true),
            Err(e) => {
                tally.count(false);
                clear("a file that cannot take the entry", &e)?;
                let says = ["it is ", "it has ", "its ", "fabrik's entry", "cannot write it back"];
                prop_assert!(says.iter().any(|s| e.starts_with(s)), "the reason: {e}");
            }
        }
        Ok(())
    });
    tally.check("mig-parted", 8);
}

// ---------- 7. the `:` command line ----------

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

/// Types `:line⏎` into the cockpit; what the line editor held when Enter was pressed.
fn type_line(app: &mut fabrik::ui::App, line: &str) -> Result<String, TestCaseError> {
    // Whatever the last line opened (help, a dialog, quit) is closed first.
    app.ui.input = None;
    app.ui.dialog = None;
    app.ui.help = false;
    app.ui.message = None;
    app.ui.exit = Exit::default();
    app.handle_key(key(KeyCode::Char(':')));
    prop_assert!(app.ui.input.as_ref().is_some_and(|i| i.kind == InputKind::Command), "`:` opens the command line");
    for c in line.chars() {
        app.handle_key(key(KeyCode::Char(c)));
    }
    let typed = app.ui.input.as_ref().map(|i| i.text.clone()).unwrap_or_default();
    prop_assert_eq!(&typed, &line.chars().take(200).collect::<String>(), "the line holds what was typed");
    app.handle_key(key(KeyCode::Enter));
    prop_assert!(app.ui.input.is_none(), "Enter runs and closes the line");
    Ok(typed)
}

#[test]
fn command_line_seeds_run() {
    let (_, mut app) = fabrik::testing::demo_app(7, 2, Theme::no_color());
    let node =
        app.fleet.node_ids().next().and_then(|n| app.fleet.node(n)).map(|n| app.fleet.str_of(n.name).to_string());
    let Some(node) = node else { panic!("the demo has nodes") };
    /// A line, the message it leaves (if any), and where it leaves the cockpit.
    type Case<'a> = (String, Option<&'a str>, fn(Screen) -> bool);
    let cases: [Case; 7] = [
        ("gpus".into(), None, |s| s == Screen::Table(ViewKind::Gpus)),
        (format!("node {node}"), None, |s| matches!(s, Screen::Node(_))),
        (format!("gpu {node}/0"), None, |s| matches!(s, Screen::Gpu(_))),
        ("pods team".into(), None, |s| s == Screen::Table(ViewKind::Pods)),
        ("q".into(), None, |_| true),
        ("bogus".into(), Some("unknown command \"bogus\""), |_| true),
        ("node nope-0000".into(), Some("no node named \"nope-0000\""), |_| true),
    ];
    for (line, message, screen) in cases {
        let typed = type_line(&mut app, &line).map_err(|e| e.to_string());
        assert_eq!(typed.as_deref(), Ok(line.as_str()));
        let got = app.ui.message.as_ref().map(|(_, m)| m.as_str());
        match message {
            Some(m) => assert!(got.is_some_and(|g| g.contains(m)), "{line}: {got:?}"),
            None => assert!(got.is_none(), "{line}: {got:?}"),
        }
        assert!(screen(app.ui.screen()), "{line}: {:?}", app.ui.screen());
        if line == "q" {
            assert!(app.ui.exit.quit || app.ui.exit.armed, ":q asks to quit");
        }
    }
}

#[test]
fn command_line() {
    let (_, app) = fabrik::testing::demo_app(7, 2, Theme::no_color());
    let mut words: Vec<String> = TABLE.iter().flat_map(|s| s.aliases.iter().map(|a| a.to_string())).collect();
    words.extend(ViewKind::ALL.iter().map(|v| v.name().to_uppercase()));
    let f = &app.fleet;
    let mut args: Vec<String> = WORDS.iter().map(|w| w.to_string()).collect();
    for n in f.node_ids().filter_map(|n| f.node(n)).take(6) {
        let name = f.str_of(n.name);
        args.extend([name.to_string(), format!("{name}/0"), format!("{name}/gpu7"), format!("{name}/300")]);
    }
    args.extend(f.gpu_ids().filter_map(|g| f.gpu(g)).take(4).map(|g| f.str_of(g.uuid).to_string()));
    let app = RefCell::new(app);
    let space = select(&[" ", "  ", "\t", " \u{3000} ", ""][..]);
    let near = (select(words), space.clone(), prop::option::of(select(args)), space)
        .prop_map(|(w, s, a, t)| format!("{t}{w}{s}{}", a.unwrap_or_default()));
    let line = prop_oneof![
        4 => near.clone(),
        2 => (near, edits(&[" ", "/", "!", ":", "?", "\u{0}", "\u{1b}", "é", "\u{200b}"], 3))
            .prop_map(|(l, e)| String::from_utf8_lossy(&apply_edits(l.as_bytes(), &e)).into_owned()),
        1 => "\\PC{0,40}",
        1 => "(?s).{0,250}",
    ];
    let tally = Tally::default();
    run("command line", 500, line, |line| {
        let mut app = app.borrow_mut();
        let typed = type_line(&mut app, &line)?;
        let text = typed.trim();
        let (cmd, arg) = match text.split_once(char::is_whitespace) {
            Some((c, a)) => (c, a.trim()),
            None => (text, ""),
        };
        let message = app.ui.message.clone();
        match Command::from_alias(cmd, !arg.is_empty()) {
            None if !cmd.is_empty() => {
                tally.count(false);
                let Some((severity, m)) = message else {
                    return Err(TestCaseError::fail(format!("{cmd:?} is not a command and nothing says so")));
                };
                prop_assert_eq!(severity, Severity::Error);
                prop_assert!(m.contains(&format!("unknown command {cmd:?}")), "names what was typed: {m}");
            }
            Some(Command::OpenNode) if app.fleet.node_by_name(arg).is_none() => {
                tally.count(true);
                prop_assert!(
                    message.is_some_and(|(s, m)| s == Severity::Error && m.contains("no node named")),
                    "an unknown node is named"
                );
            }
            found => {
                tally.count(found.is_some());
                if let Some((Severity::Error, m)) = &message {
                    prop_assert!(!m.contains("unknown command"), "{cmd:?} is a command: {m}");
                }
            }
        }
        // What it left on screen draws.
        let buffer = fabrik::testing::render_app(&mut app, 100, 30);
        prop_assert_eq!(buffer.area.width, 100);
        Ok(())
    });
    tally.check("command line", 30);
}

// ---------- nesting and expansion past every limit ----------

/// Input nested far deeper than any generator above goes (100,000 levels, under the 1 MiB a
/// file may have), and a YAML alias bomb: each parser refuses it with its reason, without
/// overflowing the stack or expanding a billion nodes.
#[test]
fn deep_nesting_and_alias_bombs_are_refused_with_a_reason() {
    let depth = 100_000;
    let deep = |open: &str, inner: &str, close: &str| format!("{}{inner}{}", open.repeat(depth), close.repeat(depth));

    let json = deep("[", "1", "]");
    // In a field the reader does not know (newer agents add fields), skipped without
    // recursing; as a value, refused at serde_json's limit of 128.
    let mut sample = serde_json::to_value(&agent_seeds()[0]).unwrap_or_default();
    sample["newer_field"] = json!("DEEP");
    let line = serde_json::to_string(&sample).unwrap_or_default().replace("\"DEEP\"", &json);
    assert!(serde_json::from_str::<NodeSample>(&line).is_ok(), "a deep field the agent's reader does not know");
    let e = prometheus::samples(format!(r#"{{"status":"success","data":{json}}}"#).as_bytes());
    assert!(e.as_ref().is_err_and(|e| e.starts_with("not a Prometheus answer") && e.contains("recursion")), "{e:?}");
    let e =
        msg(Watch::ClusterQueue, Ev::Apply, Some(format!(r#"{{"metadata":{{"name":"q"}},"spec":{json}}}"#).as_bytes()));
    assert!(e.as_ref().is_err_and(|e| e.contains("recursion limit")), "kube object: {:?}", e.map(|_| ()));

    // Unknown fields as groups inside groups (wire type 3, field 2).
    let groups: Vec<u8> = std::iter::repeat_n(0x13u8, depth).collect();
    let e = decode_rows(&groups);
    assert!(e.as_ref().is_err_and(|e| e.contains("recursion limit")), "protobuf: {e:?}");

    let dir = TempConfig::new("deep");
    for config in [format!("theme = {}\n", deep("[", "1", "]")), format!("theme = {}\n", deep("{a = ", "1", "}"))] {
        let w = load_files(&dir.0, [config.as_bytes(), THEME_TOML.as_bytes(), KEYMAP_TOML.as_bytes()]);
        assert!(w.iter().any(|w| w.message.contains("TOML syntax error") && w.message.contains("recursion")), "{w:?}");
    }

    let yaml = format!("version: v1\nmig-configs:\n  a: {}\n", deep("[", "1", "]"));
    let e = mig::parted::add_config(&yaml, "custom-x", &mig_entry("custom-x"));
    assert!(e.as_ref().is_err_and(|e| e.starts_with("it is not valid YAML") && e.contains("recursion")), "{e:?}");
    // Ten lists of ten aliases, nine levels deep: a billion nodes if expanded.
    let mut bomb = String::from("version: v1\nmig-configs:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        bomb.push_str(&format!("  a{i}: &a{i} [{}]\n", vec![format!("*a{}", i - 1); 10].join(", ")));
    }
    let e = mig::parted::add_config(&bomb, "custom-x", &mig_entry("custom-x"));
    assert!(e.as_ref().is_err_and(|e| e.starts_with("it is not valid YAML") && e.contains("budget")), "{e:?}");
}

/// A container's log as the API server streams it (`pods/log`, any bytes), cut into chunks at
/// random places: the lines `split_lines` makes are the same whatever the chunks, none is
/// longer than `MAX_LINE` bytes of input, and nothing but the unfinished last line is held
/// back; then the lines go through a bounded buffer, which counts its bytes right.
#[test]
fn log_stream_chunks() {
    use fabrik::model::LogEvent;
    use fabrik::model::logs::{LogBuffer, MAX_LINE, split_lines};
    let bytes = prop::collection::vec(
        prop_oneof![Just(b'\n'), Just(b'\r'), Just(0x1b), any::<u8>(), 32u8..127],
        0..(MAX_LINE * 2 + 64),
    );
    let cuts = prop::collection::vec(any::<Index>(), 0..8);
    run("log_stream_chunks", 32, (bytes, cuts), |(bytes, cuts)| {
        let mut whole_carry = Vec::new();
        let want = split_lines(&mut whole_carry, &bytes);
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        at.sort_unstable();
        let (mut carry, mut got, mut from) = (Vec::new(), Vec::new(), 0);
        for a in at.into_iter().chain([bytes.len()]) {
            got.extend(split_lines(&mut carry, &bytes[from..a]));
            from = a;
        }
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(&carry, &whole_carry);
        prop_assert!(carry.len() < MAX_LINE && !carry.contains(&b'\n'));
        prop_assert!(got.iter().all(|l| l.len() <= MAX_LINE * 3 && !l.contains('\n')));
        let mut b = LogBuffer::new(1, 0);
        b.apply(LogEvent::Lines(got), 0);
        prop_assert_eq!(b.bytes, b.lines.iter().map(String::len).sum::<usize>());
        Ok(())
    });
}
