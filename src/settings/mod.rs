//! Reading the files people write (`config.toml`, `themes/*.toml`, `keymaps/*.toml`): TOML in
//! document order, warnings that name the file, key and fix, typo suggestions, and the
//! builtin-plus-user-file layering themes and keymaps share. Knows nothing of the cockpit.

use std::fmt;
use std::path::Path;

mod document;
mod family;
mod suggest;
#[cfg(test)]
mod test_dir;
#[cfg(test)]
mod tests;

pub(crate) use document::{Table, Value, parse_document, read_document};
pub(crate) use family::{Family, Layer};
pub(crate) use suggest::{closest, nearby};
#[cfg(test)]
pub(crate) use test_dir::TestDir;

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
