//! Layering: builtin files embedded in the binary, user files of the same name merged on
//! top, `inherits = "<name>"` to start from another file. Themes and keymaps share this.

use std::path::Path;

use super::{ConfigWarning, Table, Value, closest, display_path, is_valid_name, parse_document, read_document};

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
