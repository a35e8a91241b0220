//! The config file (`config.toml`), where fabrik's files live, and the machinery the theme and
//! keymap loaders share: warnings written for people, TOML reading with positions, layering.

use std::fmt;
use std::path::{Path, PathBuf};

use toml::de::{DeTable, DeValue};

/// Something wrong in a file the user wrote. Never fatal: the loader that reports it has
/// already fallen back to a default for the part that was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigWarning {
    /// The file, as a person would type it (`~/.config/fabrik/config.toml`).
    pub file: String,
    /// The dotted key inside the file, when the problem has one.
    pub key: Option<String>,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl ConfigWarning {
    pub(crate) fn new(file: &str, key: Option<&str>, message: impl Into<String>) -> Self {
        ConfigWarning { file: file.to_string(), key: key.map(str::to_string), message: message.into() }
    }
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(key) => write!(f, "{}: {}: {}", self.file, key, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

/// Where fabrik reads its files from and keeps its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    /// Holds `config.toml`, `themes/` and `keymaps/`.
    pub config_dir: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
}

impl Paths {
    /// The platform's directories for fabrik, unless `FABRIK_CONFIG_DIR` / `FABRIK_DATA_DIR`
    /// say otherwise (tests, and people who keep dotfiles elsewhere).
    pub fn discover() -> Paths {
        Paths::discover_with(|name| std::env::var_os(name))
    }

    // The environment is passed in so tests never have to mutate the process environment.
    fn discover_with(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Paths {
        let project = directories::ProjectDirs::from("io", "fabrik", "fabrik");
        let from_env = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        Paths {
            config_dir: from_env("FABRIK_CONFIG_DIR")
                .or_else(|| project.as_ref().map(|p| p.config_dir().to_path_buf())),
            data_dir: from_env("FABRIK_DATA_DIR").or_else(|| project.as_ref().map(|p| p.data_dir().to_path_buf())),
        }
    }
}

/// Settings from `config.toml`. Every field has a default, so the file is optional and may
/// name only what someone wants to change.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Theme name: a builtin (`dark`, `light`, `high-contrast`) or `themes/<name>.toml`.
    pub theme: String,
    /// Keymap name: a builtin (`default`, `k9s`) or `keymaps/<name>.toml`.
    pub keymap: String,
    /// Under this utilisation (percent) a GPU counts as idle.
    pub idle_util_pct: u8,
    /// An allocated GPU idle for this long counts as idle-but-allocated.
    pub idle_window_secs: u64,
    /// At or above this utilisation (percent) a GPU counts as busy.
    pub busy_util_pct: u8,
    /// A pending MIG reconfiguration older than this is flagged as stuck.
    pub mig_stuck_secs: u64,
    /// Upper bound on redraws per second.
    pub fps: u16,
    /// Namespace label that names a namespace's tenant on a cluster (after vCluster and
    /// Kueue, else the namespace is its own tenant).
    pub tenant_label: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            theme: "dark".to_string(),
            keymap: "default".to_string(),
            idle_util_pct: 5,
            idle_window_secs: 600,
            busy_util_pct: 20,
            mig_stuck_secs: 300,
            fps: 30,
            tenant_label: crate::cluster::labels::DEFAULT_TENANT_LABEL.to_string(),
        }
    }
}

/// The keys `config.toml` understands, in the order the warning lists them.
const CONFIG_KEYS: &[&str] =
    &["theme", "keymap", "idle_util_pct", "idle_window_secs", "busy_util_pct", "mig_stuck_secs", "fps", "tenant_label"];

impl Config {
    /// Reads `<dir>/config.toml` if it exists. A key that is wrong keeps its default and
    /// produces a warning; the other keys still apply.
    pub fn load(dir: Option<&Path>) -> (Config, Vec<ConfigWarning>) {
        let mut config = Config::default();
        let mut warnings = Vec::new();
        let Some(dir) = dir else {
            return (config, warnings);
        };
        let path = dir.join("config.toml");
        let label = display_path(&path);
        let table = match read_document(&path) {
            Ok(Some(table)) => table,
            Ok(None) => return (config, warnings),
            Err(e) => {
                warnings.push(ConfigWarning::new(&label, None, e.to_string()));
                return (config, warnings);
            }
        };
        let defaults = Config::default();
        for (key, value) in &table {
            let result = match key.as_str() {
                "theme" => file_name(value, "theme", "dark").map(|v| config.theme = v),
                "keymap" => file_name(value, "keymap", "default").map(|v| config.keymap = v),
                "idle_util_pct" => int_in(value, 0, 100, "a percentage").map(|v| config.idle_util_pct = v as u8),
                "busy_util_pct" => int_in(value, 0, 100, "a percentage").map(|v| config.busy_util_pct = v as u8),
                "idle_window_secs" => {
                    int_in(value, 1, i64::MAX as i128, "seconds").map(|v| config.idle_window_secs = v as u64)
                }
                "mig_stuck_secs" => {
                    int_in(value, 1, i64::MAX as i128, "seconds").map(|v| config.mig_stuck_secs = v as u64)
                }
                "fps" => int_in(value, 1, 120, "frames per second").map(|v| config.fps = v as u16),
                "tenant_label" => label_key(value).map(|v| config.tenant_label = v),
                other => {
                    let hint = match closest(other, CONFIG_KEYS.iter().copied()) {
                        Some(near) => format!("did you mean \"{near}\"? "),
                        None => String::new(),
                    };
                    warnings.push(ConfigWarning::new(
                        &label,
                        Some(other),
                        format!(
                            "unknown key: {hint}the valid keys are {}; remove or rename it",
                            CONFIG_KEYS.join(", ")
                        ),
                    ));
                    continue;
                }
            };
            if let Err(problem) = result {
                let default = defaults.default_text(key);
                warnings.push(ConfigWarning::new(
                    &label,
                    Some(key),
                    format!("{problem}; using the default, {default}, until it is fixed"),
                ));
            }
        }
        (config, warnings)
    }

    fn default_text(&self, key: &str) -> String {
        match key {
            "theme" => format!("\"{}\"", self.theme),
            "keymap" => format!("\"{}\"", self.keymap),
            "idle_util_pct" => self.idle_util_pct.to_string(),
            "busy_util_pct" => self.busy_util_pct.to_string(),
            "idle_window_secs" => self.idle_window_secs.to_string(),
            "mig_stuck_secs" => self.mig_stuck_secs.to_string(),
            "fps" => self.fps.to_string(),
            "tenant_label" => format!("\"{}\"", self.tenant_label),
            _ => String::new(),
        }
    }
}

/// A Kubernetes label key: `[prefix/]name`, name 1–63 of `[A-Za-z0-9._-]` starting and
/// ending alphanumeric, prefix a DNS subdomain.
fn label_key(value: &Value) -> Result<String, String> {
    let Value::Str(s) = value else {
        return Err(format!("expected a label key such as \"fabrik.io/tenant\", found {}", value.type_name()));
    };
    let (prefix, name) = match s.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s.as_str()),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            })
    });
    if name_ok && prefix_ok {
        Ok(s.to_string())
    } else {
        Err(format!("{s:?} is not a label key: use [dns.prefix/]name, e.g. \"fabrik.io/tenant\""))
    }
}

fn int_in(value: &Value, min: i128, max: i128, what: &str) -> Result<i128, String> {
    let range = if max == i64::MAX as i128 {
        format!("a whole number of {what}, at least {min}")
    } else {
        format!("a whole number from {min} to {max} ({what})")
    };
    match value {
        Value::Int(n) if (min..=max).contains(n) => Ok(*n),
        Value::Int(n) => Err(format!("{n} is out of range: use {range}")),
        Value::Str(s) if s.trim().parse::<i128>().is_ok() => {
            Err(format!("expected {range}, found the string \"{s}\": write the number without quotes"))
        }
        other => Err(format!("expected {range}, found {}", other.type_name())),
    }
}

fn file_name(value: &Value, noun: &str, example: &str) -> Result<String, String> {
    match value {
        Value::Str(s) if is_valid_name(s) => Ok(s.clone()),
        Value::Str(s) => {
            Err(format!("\"{s}\" is not a {noun} name: use a name such as \"{example}\" (no slashes, not empty)"))
        }
        other => Err(format!("expected a {noun} name such as \"{example}\", found {}", other.type_name())),
    }
}

/// Theme and keymap names become file names; refusing separators keeps a name from
/// reaching outside the config directory.
pub(crate) fn is_valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 100 && !name.starts_with('.') && !name.contains(['/', '\\', '\0'])
}

/// A path as a person would type it: the home directory becomes `~`.
pub(crate) fn display_path(path: &Path) -> String {
    if let Some(base) = directories::BaseDirs::new()
        && let Ok(rest) = path.strip_prefix(base.home_dir())
    {
        return Path::new("~").join(rest).display().to_string();
    }
    path.display().to_string()
}

// ---------------------------------------------------------------------------------------
// Reading TOML. Documents become ordered `Value`s so that "later wins" rules follow the
// file, not the alphabet (toml's own tables are sorted unless `preserve_order` is on).

/// A TOML value, with tables in document order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Str(String),
    // i128 so that every TOML integer, including large hex ones, fits without a panic.
    Int(i128),
    Bool(bool),
    Array(Vec<Value>),
    Table(Table),
    /// Floats, date-times: fabrik never wants them, so only their kind is kept for messages.
    Other(&'static str),
}

pub(crate) type Table = Vec<(String, Value)>;

impl Value {
    pub(crate) fn type_name(&self) -> String {
        match self {
            Value::Str(s) => format!("the string \"{s}\""),
            Value::Int(n) => format!("the number {n}"),
            Value::Bool(b) => format!("{b}"),
            Value::Array(_) => "a list".to_string(),
            Value::Table(_) => "a table".to_string(),
            Value::Other(kind) => (*kind).to_string(),
        }
    }
}

/// Why a file could not be used at all.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FileError {
    #[error("cannot read the file ({0}): check that it is a readable UTF-8 text file")]
    Read(std::io::Error),
    #[error("the file is {0} bytes, more than fabrik reads (1 MiB): is this the right file?")]
    TooLarge(u64),
    #[error(
        "TOML syntax error at line {line}, column {column}: {message}: fix the syntax there; \
         until then this file is ignored"
    )]
    Syntax { line: usize, column: usize, message: String },
}

const MAX_FILE_BYTES: u64 = 1 << 20;

/// Reads and parses a file; `Ok(None)` when it does not exist, which is never a problem.
pub(crate) fn read_document(path: &Path) -> Result<Option<Table>, FileError> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(FileError::Read(e)),
        Ok(meta) if meta.is_file() && meta.len() > MAX_FILE_BYTES => {
            return Err(FileError::TooLarge(meta.len()));
        }
        Ok(_) => {}
    }
    let text = std::fs::read_to_string(path).map_err(FileError::Read)?;
    parse_document(&text).map(Some)
}

pub(crate) fn parse_document(text: &str) -> Result<Table, FileError> {
    match DeTable::parse(text) {
        Ok(table) => Ok(convert_table(table.get_ref())),
        Err(e) => {
            let (line, column) = position(text, e.span().map_or(0, |s| s.start));
            Err(FileError::Syntax { line, column, message: e.message().trim().replace('\n', "; ") })
        }
    }
}

/// 1-based line and column (in characters) of a byte offset, tolerant of any offset.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

fn convert_table(table: &DeTable<'_>) -> Table {
    let mut entries: Vec<(usize, String, Value)> =
        table.iter().map(|(k, v)| (k.span().start, k.get_ref().to_string(), convert(v.get_ref()))).collect();
    entries.sort_by_key(|(at, _, _)| *at);
    entries.into_iter().map(|(_, k, v)| (k, v)).collect()
}

fn convert(value: &DeValue<'_>) -> Value {
    match value {
        DeValue::String(s) => Value::Str(s.to_string()),
        DeValue::Integer(i) => i128::from_str_radix(i.as_str(), i.radix())
            .map(Value::Int)
            .unwrap_or(Value::Other("a number too large to use")),
        DeValue::Float(_) => Value::Other("a decimal number"),
        DeValue::Boolean(b) => Value::Bool(*b),
        DeValue::Datetime(_) => Value::Other("a date-time"),
        DeValue::Array(items) => Value::Array(items.iter().map(|v| convert(v.get_ref())).collect()),
        DeValue::Table(t) => Value::Table(convert_table(t)),
    }
}

// ---------------------------------------------------------------------------------------
// Suggestions.

/// Edit distance counting a swap of neighbours as one edit ("fsp" is one away from "fps").
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// How far a typo may be from the word it meant, by length: short words get less slack so
/// suggestions stay plausible.
fn tolerance(word: &str) -> usize {
    match word.chars().count() {
        0..=4 => 1,
        5..=8 => 2,
        _ => 3,
    }
}

/// Candidates within typo distance of `word`, closest first.
pub(crate) fn nearby<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>, limit: usize) -> Vec<&'a str> {
    // The distance table is quadratic; nobody mistypes a 64-character name.
    if word.chars().count() > 64 {
        return Vec::new();
    }
    let lower = word.to_lowercase();
    let mut scored: Vec<(usize, &'a str)> = candidates
        .into_iter()
        .map(|c| (edit_distance(&lower, &c.to_lowercase()), c))
        .filter(|(d, _)| *d <= tolerance(word))
        .collect();
    scored.sort();
    scored.dedup();
    scored.into_iter().take(limit).map(|(_, c)| c).collect()
}

pub(crate) fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    nearby(word, candidates, 1).into_iter().next()
}

// ---------------------------------------------------------------------------------------
// Layering: builtin files embedded in the binary, user files of the same name merged on
// top, `inherits = "<name>"` to start from another file. Themes and keymaps share this.

/// One kind of layered file (themes or keymaps).
pub(crate) struct Family {
    /// "theme" or "keymap", for messages.
    pub noun: &'static str,
    /// Folder under the config dir: "themes" or "keymaps".
    pub subdir: &'static str,
    /// Used when a name is unknown or a chain is broken.
    pub fallback: &'static str,
    /// What a user file without `inherits` (and without a builtin of its name) starts from.
    /// Keymaps start from the default so no command is left without a key; themes start
    /// from nothing, like helix, so a new theme is entirely its own.
    pub implicit_base: Option<&'static str>,
    /// Name and text of each builtin.
    pub builtins: &'static [(&'static str, &'static str)],
}

/// One file's contents, `inherits` already taken out.
#[derive(Clone, Debug)]
pub(crate) struct Layer {
    /// Where the layer came from, for warnings.
    pub label: String,
    pub table: Table,
}

impl Family {
    pub(crate) fn builtin_names(&self) -> Vec<&'static str> {
        self.builtins.iter().map(|(name, _)| *name).collect()
    }

    /// Builtins first (in their documented order), then the user's files by name.
    pub(crate) fn available(&self, config_dir: Option<&Path>) -> Vec<String> {
        let mut names: Vec<String> = self.builtin_names().iter().map(|n| n.to_string()).collect();
        let mut user = Vec::new();
        if let Some(dir) = config_dir
            && let Ok(entries) = std::fs::read_dir(dir.join(self.subdir))
        {
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().and_then(|e| e.to_str()) != Some("toml") || !path.is_file() {
                    continue;
                }
                if let Some(stem) = path.file_stem().and_then(|s| s.to_str())
                    && is_valid_name(stem)
                    && !names.iter().any(|n| n == stem)
                {
                    user.push(stem.to_string());
                }
            }
        }
        user.sort();
        user.dedup();
        names.extend(user);
        names
    }

    /// The layers for `name`, base first, and the name actually loaded (the fallback when
    /// `name` does not exist).
    pub(crate) fn resolve(
        &self,
        name: &str,
        config_dir: Option<&Path>,
        warnings: &mut Vec<ConfigWarning>,
    ) -> (String, Vec<Layer>) {
        if let Some(layers) = self.chain(name, config_dir, &mut Vec::new(), warnings) {
            return (name.to_string(), layers);
        }
        let file = match config_dir {
            Some(dir) => display_path(&dir.join("config.toml")),
            None => "config.toml".to_string(),
        };
        let hint = match closest(name, self.available(config_dir).iter().map(String::as_str)) {
            Some(near) => format!(" (did you mean \"{near}\"?)"),
            None => String::new(),
        };
        let place = match config_dir {
            Some(dir) if is_valid_name(name) => display_path(&dir.join(self.subdir).join(format!("{name}.toml"))),
            _ => format!("{}/<name>.toml in the config folder", self.subdir),
        };
        warnings.push(ConfigWarning::new(
            &file,
            Some(self.noun),
            format!(
                "no {} named \"{name}\"{hint}: available are {}; create {place} to add one; \
                 using \"{}\" meanwhile",
                self.noun,
                self.available(config_dir).join(", "),
                self.fallback
            ),
        ));
        let layers = self
            .chain(self.fallback, config_dir, &mut Vec::new(), warnings)
            .unwrap_or_else(|| self.builtin_layers(self.fallback, 0));
        (self.fallback.to_string(), layers)
    }

    /// `None` only when there is neither a user file nor a builtin of that name.
    fn chain(
        &self,
        name: &str,
        config_dir: Option<&Path>,
        stack: &mut Vec<String>,
        warnings: &mut Vec<ConfigWarning>,
    ) -> Option<Vec<Layer>> {
        if !is_valid_name(name) {
            return None;
        }
        let is_builtin = self.builtins.iter().any(|(n, _)| *n == name);
        let path = config_dir.map(|d| d.join(self.subdir).join(format!("{name}.toml")));
        let user = match &path {
            Some(path) => match read_document(path) {
                Ok(Some(table)) => Some((display_path(path), table)),
                Ok(None) => None,
                Err(e) => {
                    // A broken user file must not take the cockpit's colours or keys with it:
                    // what it would have been merged over is used instead.
                    warnings.push(ConfigWarning::new(&display_path(path), None, e.to_string()));
                    let base = if is_builtin { name } else { self.fallback };
                    return Some(self.builtin_layers(base, 0));
                }
            },
            None => None,
        };
        let Some((label, mut table)) = user else {
            return is_builtin.then(|| self.builtin_layers(name, 0));
        };
        stack.push(name.to_string());
        let mut layers = match self.take_inherits(&mut table, &label, warnings) {
            // `inherits` naming the file itself means "the builtin I am overriding".
            Some(parent) if parent == name && is_builtin => self.builtin_layers(name, 0),
            Some(parent) if parent == name || stack.contains(&parent) => {
                let mut cycle = stack.clone();
                cycle.push(parent.clone());
                warnings.push(ConfigWarning::new(
                    &label,
                    Some("inherits"),
                    format!(
                        "inherits cycle {}: remove one of the inherits lines; starting from \
                         \"{}\" meanwhile",
                        cycle.join(" -> "),
                        self.fallback
                    ),
                ));
                self.builtin_layers(self.fallback, 0)
            }
            Some(parent) => match self.chain(&parent, config_dir, stack, warnings) {
                Some(layers) => layers,
                None => {
                    let available = self.available(config_dir);
                    let hint = match closest(&parent, available.iter().map(String::as_str)) {
                        Some(near) => format!(" (did you mean \"{near}\"?)"),
                        None => String::new(),
                    };
                    warnings.push(ConfigWarning::new(
                        &label,
                        Some("inherits"),
                        format!(
                            "no {} named \"{parent}\" to inherit from{hint}: available are {}; \
                             fix the name or remove the line; starting from \"{}\" meanwhile",
                            self.noun,
                            available.join(", "),
                            self.fallback
                        ),
                    ));
                    self.builtin_layers(self.fallback, 0)
                }
            },
            None if is_builtin => self.builtin_layers(name, 0),
            None => match self.implicit_base {
                Some(base) => self.builtin_layers(base, 0),
                None => Vec::new(),
            },
        };
        stack.pop();
        layers.push(Layer { label, table });
        Some(layers)
    }

    /// A builtin and what it inherits (builtins may inherit only builtins).
    fn builtin_layers(&self, name: &str, depth: usize) -> Vec<Layer> {
        let Some((_, text)) = self.builtins.iter().find(|(n, _)| *n == name) else {
            return Vec::new();
        };
        let label = format!("builtin {} {name}", self.noun);
        // A builtin that fails to parse is a bug caught by the tests; at run time it simply
        // contributes nothing rather than panicking.
        let Ok(mut table) = parse_document(text) else {
            return Vec::new();
        };
        let mut ignored = Vec::new();
        let mut layers = match self.take_inherits(&mut table, &label, &mut ignored) {
            Some(parent) if parent != name && depth < 8 => self.builtin_layers(&parent, depth + 1),
            _ => Vec::new(),
        };
        layers.push(Layer { label, table });
        layers
    }

    fn take_inherits(&self, table: &mut Table, label: &str, warnings: &mut Vec<ConfigWarning>) -> Option<String> {
        let at = table.iter().position(|(k, _)| k == "inherits")?;
        let (_, value) = table.remove(at);
        match value {
            Value::Str(s) => Some(s),
            other => {
                warnings.push(ConfigWarning::new(
                    label,
                    Some("inherits"),
                    format!(
                        "expected the name of a {} such as \"{}\", found {}; the line is ignored",
                        self.noun,
                        self.fallback,
                        other.type_name()
                    ),
                ));
                None
            }
        }
    }
}

// ---------------------------------------------------------------------------------------

/// A fresh directory under the system temp dir, removed on drop. Written here rather than
/// taken from a crate so the tests need nothing beyond the crate's own dependencies.
#[cfg(test)]
pub(crate) struct TestDir(PathBuf);

#[cfg(test)]
impl TestDir {
    pub(crate) fn new() -> TestDir {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "fabrik-test-{}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create test dir");
        TestDir(dir)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `text` to `relative`, creating folders on the way.
    pub(crate) fn write(&self, relative: &str, text: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create test subdir");
        }
        std::fs::write(&path, text).expect("write test file");
        path
    }
}

#[cfg(test)]
impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> (Config, Vec<ConfigWarning>, TestDir) {
        let dir = TestDir::new();
        dir.write("config.toml", text);
        let (config, warnings) = Config::load(Some(dir.path()));
        (config, warnings, dir)
    }

    #[test]
    fn missing_dir_or_file_gives_defaults_silently() {
        assert_eq!(Config::load(None), (Config::default(), vec![]));
        let dir = TestDir::new();
        assert_eq!(Config::load(Some(dir.path())), (Config::default(), vec![]));
    }

    #[test]
    fn tenant_label_must_be_a_label_key() {
        let (config, warnings, _dir) = load("tenant_label = \"not a/label/key!\"\n");
        assert_eq!(config.tenant_label, "fabrik.io/tenant");
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].to_string().contains("is not a label key"), "{}", warnings[0]);
        let (config, warnings, _dir) = load("tenant_label = \"team\"\n");
        assert_eq!((config.tenant_label.as_str(), warnings.len()), ("team", 0));
    }

    #[test]
    fn valid_file_applies_every_key() {
        let (config, warnings, _dir) = load(
            "theme = \"light\"\nkeymap = \"k9s\"\nidle_util_pct = 3\nidle_window_secs = 900\n\
             busy_util_pct = 40\nmig_stuck_secs = 120\nfps = 60\ntenant_label = \"example.com/team\"\n",
        );
        assert_eq!(warnings, vec![]);
        assert_eq!(
            config,
            Config {
                theme: "light".into(),
                keymap: "k9s".into(),
                idle_util_pct: 3,
                idle_window_secs: 900,
                busy_util_pct: 40,
                mig_stuck_secs: 120,
                fps: 60,
                tenant_label: "example.com/team".into(),
            }
        );
    }

    #[test]
    fn bad_values_keep_their_default_and_the_rest_applies() {
        let (config, warnings, _dir) = load(
            "idle_util_pct = 150\nfps = 0\nbusy_util_pct = \"30\"\nmig_stuck_secs = -5\n\
             idle_window_secs = 1.5\ntheme = 7\nkeymap = \"k9s\"\n",
        );
        let defaults = Config::default();
        assert_eq!(config.keymap, "k9s");
        assert_eq!(config.idle_util_pct, defaults.idle_util_pct);
        assert_eq!(config.fps, defaults.fps);
        assert_eq!(config.busy_util_pct, defaults.busy_util_pct);
        assert_eq!(config.mig_stuck_secs, defaults.mig_stuck_secs);
        assert_eq!(config.idle_window_secs, defaults.idle_window_secs);
        assert_eq!(config.theme, defaults.theme);
        let keys: Vec<_> = warnings.iter().filter_map(|w| w.key.clone()).collect();
        assert_eq!(keys, ["idle_util_pct", "fps", "busy_util_pct", "mig_stuck_secs", "idle_window_secs", "theme"]);
        let text: Vec<String> = warnings.iter().map(ToString::to_string).collect();
        assert!(text[0].ends_with(
            "config.toml: idle_util_pct: 150 is out of range: use a whole number from 0 to 100 \
             (a percentage); using the default, 5, until it is fixed"
        ));
        assert!(text[1].contains("fps: 0 is out of range: use a whole number from 1 to 120"));
        assert!(text[2].contains("write the number without quotes"));
        assert!(text[4].contains("found a decimal number"));
        assert!(text[5].contains("expected a theme name such as \"dark\", found the number 7"));
    }

    #[test]
    fn fps_upper_bound() {
        let (config, warnings, _dir) = load("fps = 121\n");
        assert_eq!(config.fps, 30);
        assert_eq!(warnings.len(), 1);
        let (config, warnings, _dir) = load("fps = 120\n");
        assert_eq!((config.fps, warnings.len()), (120, 0));
    }

    #[test]
    fn unknown_key_names_it_suggests_and_lists_valid_keys() {
        let (config, warnings, _dir) = load("fsp = 10\ntheme = \"light\"\n[colors]\nx = 1\n");
        assert_eq!(config.theme, "light");
        assert_eq!(warnings.len(), 2);
        assert_eq!(warnings[0].key.as_deref(), Some("fsp"));
        assert!(
            warnings[0]
                .message
                .starts_with("unknown key: did you mean \"fps\"? the valid keys are theme, keymap, idle_util_pct")
        );
        assert_eq!(warnings[1].key.as_deref(), Some("colors"));
        assert!(!warnings[1].message.contains("did you mean"));
    }

    #[test]
    fn syntax_error_names_file_line_and_column() {
        let (config, warnings, dir) = load("theme = \"light\"\nfps = = 3\n");
        assert_eq!(config, Config::default());
        assert_eq!(warnings.len(), 1);
        let w = &warnings[0];
        assert_eq!(w.file, display_path(&dir.path().join("config.toml")));
        assert_eq!(w.key, None);
        assert!(w.message.starts_with("TOML syntax error at line 2, column 7: "), "{w}");
        assert!(w.message.ends_with("until then this file is ignored"));
        assert!(!w.message.contains('\n'));
    }

    #[test]
    fn unreadable_or_odd_files_warn_instead_of_failing() {
        let dir = TestDir::new();
        std::fs::create_dir_all(dir.path().join("config.toml")).expect("dir");
        let (config, warnings) = Config::load(Some(dir.path()));
        assert_eq!(config, Config::default());
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].message.starts_with("cannot read the file"));

        let (_, warnings, _dir) = load("");
        assert_eq!(warnings, vec![]);
        let dir = TestDir::new();
        dir.write("config.toml", [0xff, 0xfe, b'=', 0x00]);
        let (_, warnings) = Config::load(Some(dir.path()));
        assert_eq!(warnings.len(), 1);
    }

    #[test]
    fn names_with_separators_are_refused() {
        let (config, warnings, _dir) = load("theme = \"../../etc/passwd\"\nkeymap = \"\"\n");
        assert_eq!(config, Config::default());
        assert_eq!(warnings.len(), 2);
    }

    #[test]
    fn warning_display_with_and_without_key() {
        let w = ConfigWarning::new("a.toml", Some("fps"), "too fast");
        assert_eq!(w.to_string(), "a.toml: fps: too fast");
        let w = ConfigWarning::new("a.toml", None, "broken");
        assert_eq!(w.to_string(), "a.toml: broken");
    }

    #[test]
    fn env_overrides_project_dirs() {
        let paths = Paths::discover_with(|name| match name {
            "FABRIK_CONFIG_DIR" => Some("/tmp/fabrik-conf".into()),
            "FABRIK_DATA_DIR" => Some("/tmp/fabrik-data".into()),
            _ => None,
        });
        assert_eq!(paths.config_dir.as_deref(), Some(Path::new("/tmp/fabrik-conf")));
        assert_eq!(paths.data_dir.as_deref(), Some(Path::new("/tmp/fabrik-data")));
        // Empty values mean "not set", as shells often export them that way.
        let paths = Paths::discover_with(|_| Some("".into()));
        assert_ne!(paths.config_dir.as_deref(), Some(Path::new("")));
    }

    #[test]
    fn documents_keep_file_order_and_positions_survive_odd_offsets() {
        let table = parse_document("b = 1\na = 2\n[z]\ny = 1\nx = 2\n").expect("parses");
        let keys: Vec<_> = table.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a", "z"]);
        let Value::Table(z) = &table[2].1 else { panic!("z is a table") };
        assert_eq!(z[0].0, "y");
        assert_eq!(position("é\nxy", 1), (1, 1));
        assert_eq!(position("é\nxy", 99), (2, 3));
        assert_eq!(
            parse_document("n = 0xffffffffffffffff").ok(),
            Some(vec![("n".into(), Value::Int(0xffff_ffff_ffff_ffff))])
        );
    }

    #[test]
    fn suggestions() {
        assert_eq!(edit_distance("fsp", "fps"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(closest("quitt", ["quit", "help"]), Some("quit"));
        assert_eq!(closest("zzzz", ["quit", "help"]), None);
        assert_eq!(closest(&"q".repeat(100_000), ["quit"]), None);
        assert_eq!(
            nearby("gpu.util.hihg", ["gpu.util.high", "gpu.util.mid", "ui.text"], 3),
            ["gpu.util.high", "gpu.util.mid"]
        );
    }
}
