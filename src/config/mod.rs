//! The config file (`config.toml`) and where fabrik's files live. Reading TOML, warnings and
//! layering are in [`crate::settings`], which the theme and keymap loaders share.

use std::path::{Path, PathBuf};

pub use crate::settings::ConfigWarning;
use crate::settings::{Value, closest, display_path, is_valid_name, read_document};

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
    /// How the feed fetches each kind's initial state: `"pages"` (consistent lists) or
    /// `"stream"` (watch-lists, falling back to pages where the server refuses them).
    pub initial_list: crate::feed::kube::InitialList,
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
            initial_list: crate::feed::kube::InitialList::Pages,
        }
    }
}

/// The keys `config.toml` understands, in the order the warning lists them.
const CONFIG_KEYS: &[&str] = &[
    "theme",
    "keymap",
    "idle_util_pct",
    "idle_window_secs",
    "busy_util_pct",
    "mig_stuck_secs",
    "fps",
    "tenant_label",
    "initial_list",
];

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
                // Bounded: the model counts in milliseconds, and a window longer than the
                // history it keeps would never see a GPU idle anyway.
                "idle_window_secs" => {
                    int_in(value, 1, MAX_SECS, "seconds, at most 30 days").map(|v| config.idle_window_secs = v as u64)
                }
                "mig_stuck_secs" => {
                    int_in(value, 1, MAX_SECS, "seconds, at most 30 days").map(|v| config.mig_stuck_secs = v as u64)
                }
                "fps" => int_in(value, 1, 120, "frames per second").map(|v| config.fps = v as u16),
                "tenant_label" => label_key(value).map(|v| config.tenant_label = v),
                "initial_list" => initial_list(value).map(|v| config.initial_list = v),
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
            "initial_list" => format!("\"{}\"", self.initial_list.name()),
            _ => String::new(),
        }
    }
}

fn initial_list(value: &Value) -> Result<crate::feed::kube::InitialList, String> {
    use crate::feed::kube::InitialList;
    match value {
        Value::Str(s) if s == "stream" => Ok(InitialList::Stream),
        Value::Str(s) if s == "pages" => Ok(InitialList::Pages),
        Value::Str(s) => Err(format!("\"{s}\" is not a way to list: use \"stream\" or \"pages\"")),
        other => Err(format!("expected \"stream\" or \"pages\", found {}", other.type_name())),
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

/// The longest window a setting in seconds may name: 30 days.
const MAX_SECS: i128 = 30 * 24 * 3600;

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

#[cfg(test)]
mod tests;
