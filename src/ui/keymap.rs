//! Keymaps: key strings and key events as [`KeyCombo`]s, the builtin keymap files, user
//! files merged over them, and the lookup from a key press to a [`Command`] in a [`Mode`].

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::command::{Command, Mode};
use crate::settings::{self, ConfigWarning, Family, Layer, Table, Value};

/// One key with its modifiers, normalised so that the same press always compares equal:
/// characters carry their case instead of SHIFT (`G`, never `shift-g`), and shift-tab is
/// always `BackTab` without SHIFT. [`KeyCombo::parse`] and [`KeyCombo::from_event`] both
/// produce this form; a combo built by hand from the public fields may not be in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyCombo {
    pub code: KeyCode,
    pub mods: KeyModifiers,
}

/// Modifier prefixes in the order `Display` writes them.
const MODIFIERS: &[(&str, KeyModifiers)] = &[
    ("ctrl", KeyModifiers::CONTROL),
    ("alt", KeyModifiers::ALT),
    ("shift", KeyModifiers::SHIFT),
    ("super", KeyModifiers::SUPER),
    ("hyper", KeyModifiers::HYPER),
    ("meta", KeyModifiers::META),
];

/// Named keys, spelled as `Display` writes them.
const NAMED_KEYS: &[(&str, KeyCode)] = &[
    ("enter", KeyCode::Enter),
    ("esc", KeyCode::Esc),
    ("tab", KeyCode::Tab),
    ("backtab", KeyCode::BackTab),
    ("backspace", KeyCode::Backspace),
    ("delete", KeyCode::Delete),
    ("insert", KeyCode::Insert),
    ("home", KeyCode::Home),
    ("end", KeyCode::End),
    ("pageup", KeyCode::PageUp),
    ("pagedown", KeyCode::PageDown),
    ("up", KeyCode::Up),
    ("down", KeyCode::Down),
    ("left", KeyCode::Left),
    ("right", KeyCode::Right),
    ("space", KeyCode::Char(' ')),
];

/// Other spellings people write from habit; accepted, and displayed by the names above.
const KEY_ALIASES: &[(&str, &str)] = &[
    ("return", "enter"),
    ("escape", "esc"),
    ("del", "delete"),
    ("ins", "insert"),
    ("pgup", "pageup"),
    ("pgdn", "pagedown"),
    ("pgdown", "pagedown"),
];

const KEY_HELP: &str = "use a single character, a key name (enter, esc, tab, backtab, \
    backspace, delete, insert, home, end, pageup, pagedown, up, down, left, right, space, \
    f1-f12), with optional ctrl-, alt- or shift- in front";

impl KeyCombo {
    /// Parses the spelling keymap files use: `q`, `G`, `ctrl-d`, `shift-up`, `f5`, `space`.
    /// Single characters are case-sensitive; names and modifiers are not.
    pub fn parse(s: &str) -> Result<KeyCombo, String> {
        if s.is_empty() {
            return Err(format!("empty key: {KEY_HELP}"));
        }
        let mut mods = KeyModifiers::NONE;
        let mut rest = s;
        'prefixes: loop {
            for (name, flag) in MODIFIERS {
                let len = name.len() + 1;
                // `rest.len() > len` keeps "ctrl-" itself, and a lone "-", from being eaten
                // as a prefix; "ctrl--" is ctrl with the minus key.
                if rest.len() > len
                    && let Some(prefix) = rest.get(..len)
                    && prefix.strip_suffix('-').is_some_and(|p| p.eq_ignore_ascii_case(name))
                {
                    mods |= *flag;
                    rest = &rest[len..];
                    continue 'prefixes;
                }
            }
            break;
        }
        let code = key_code(rest)?;
        if mods.contains(KeyModifiers::SHIFT)
            && let KeyCode::Char(c) = code
            && !has_case(c)
        {
            return Err(format!(
                "shift-{c} is not a key of its own: write the character shift gives (\"?\" \
                 rather than \"shift-/\")"
            ));
        }
        Ok(KeyCombo::normalised(code, mods))
    }

    /// The combo a key event stands for, with crossterm's platform quirks smoothed out.
    pub fn from_event(event: &KeyEvent) -> KeyCombo {
        KeyCombo::normalised(event.code, event.modifiers)
    }

    fn normalised(code: KeyCode, mods: KeyModifiers) -> KeyCombo {
        let mut mods = mods;
        let code = match code {
            // Terminals disagree on whether an uppercase letter comes with SHIFT, and kitty's
            // protocol can send the lowercase letter with SHIFT; the character decides.
            KeyCode::Char(c) => {
                if mods.contains(KeyModifiers::SHIFT) {
                    mods.remove(KeyModifiers::SHIFT);
                    KeyCode::Char(upper(c))
                } else {
                    KeyCode::Char(c)
                }
            }
            // crossterm reports shift-tab as BackTab with SHIFT; some terminals as Tab+SHIFT.
            KeyCode::BackTab => {
                mods.remove(KeyModifiers::SHIFT);
                KeyCode::BackTab
            }
            KeyCode::Tab if mods.contains(KeyModifiers::SHIFT) => {
                mods.remove(KeyModifiers::SHIFT);
                KeyCode::BackTab
            }
            other => other,
        };
        KeyCombo { code, mods }
    }
}

/// The uppercase form when it is a single character (so 'ß' stays 'ß').
fn upper(c: char) -> char {
    let mut u = c.to_uppercase();
    match (u.next(), u.next()) {
        (Some(single), None) => single,
        _ => c,
    }
}

fn has_case(c: char) -> bool {
    upper(c) != c || c.to_lowercase().ne(std::iter::once(c))
}

fn key_code(name: &str) -> Result<KeyCode, String> {
    let mut chars = name.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return Ok(KeyCode::Char(c));
    }
    let lower = name.to_lowercase();
    let canonical = KEY_ALIASES.iter().find(|(alias, _)| *alias == lower).map_or(lower.as_str(), |(_, real)| real);
    if let Some((_, code)) = NAMED_KEYS.iter().find(|(n, _)| *n == canonical) {
        return Ok(*code);
    }
    // f1-f12 are documented; crossterm reports up to f24 on keyboards that have them.
    if let Some(n) = canonical.strip_prefix('f').and_then(|d| d.parse::<u8>().ok())
        && (1..=24).contains(&n)
        && !canonical.starts_with("f0")
    {
        return Ok(KeyCode::F(n));
    }
    let names = NAMED_KEYS.iter().map(|(n, _)| *n).chain(KEY_ALIASES.iter().map(|(a, _)| *a));
    let hint = match settings::closest(&lower, names) {
        Some(near) => format!(" (did you mean \"{near}\"?)"),
        None if name.chars().count() > 1 && !name.contains('-') => {
            " (one key per entry: sequences such as \"gg\" are not supported)".to_string()
        }
        None => String::new(),
    };
    Err(format!("unknown key \"{name}\"{hint}: {KEY_HELP}"))
}

/// Writes the spelling keymap files use, so what help shows can be pasted into a file.
impl fmt::Display for KeyCombo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, flag) in MODIFIERS {
            if self.mods.contains(*flag) {
                write!(f, "{name}-")?;
            }
        }
        match self.code {
            KeyCode::Char(' ') => f.write_str("space"),
            KeyCode::Char(c) => write!(f, "{c}"),
            KeyCode::F(n) => write!(f, "f{n}"),
            code => match NAMED_KEYS.iter().find(|(_, c)| *c == code) {
                Some((name, _)) => f.write_str(name),
                // Keys fabrik never binds (media keys, caps lock); readable, not parseable.
                None => f.write_str(&format!("{code:?}").to_lowercase()),
            },
        }
    }
}

const BUILTINS: &[(&str, &str)] = &[
    ("default", include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/keymaps/default.toml"))),
    ("k9s", include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/keymaps/k9s.toml"))),
];

const BUILTIN_NAMES: &[&str] = &["default", "k9s"];

const FAMILY: Family = Family {
    noun: "keymap",
    subdir: "keymaps",
    fallback: "default",
    implicit_base: Some("default"),
    builtins: BUILTINS,
};

/// Keys per command and command per key, for one mode.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Bindings {
    keys: HashMap<Command, Vec<KeyCombo>>,
    commands: HashMap<KeyCombo, Command>,
}

/// A resolved keymap: for each mode, which key runs which command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keymap {
    pub name: String,
    modes: HashMap<Mode, Bindings>,
}

impl Keymap {
    /// The command a key press runs in `mode`. Key releases (sent by some terminals with
    /// the kitty protocol) run nothing, so a command never fires twice.
    pub fn lookup(&self, mode: Mode, key: &KeyEvent) -> Option<Command> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        self.modes.get(&mode)?.commands.get(&KeyCombo::from_event(key)).copied()
    }

    /// The keys bound to `cmd` in `mode`, in the order the file lists them.
    pub fn keys_for(&self, mode: Mode, cmd: Command) -> &[KeyCombo] {
        self.modes.get(&mode).and_then(|b| b.keys.get(&cmd)).map_or(&[], Vec::as_slice)
    }

    /// The first key for `cmd`, for the footer.
    pub fn hint(&self, mode: Mode, cmd: Command) -> Option<String> {
        self.keys_for(mode, cmd).first().map(ToString::to_string)
    }

    /// Rows for the `?` help: keys joined by ", ", in `Command::ALL` order, commands without
    /// keys left out.
    pub fn help(&self, mode: Mode) -> Vec<(String, Command)> {
        Command::ALL
            .iter()
            .filter_map(|cmd| {
                let keys = self.keys_for(mode, *cmd);
                (!keys.is_empty()).then(|| {
                    let text: Vec<String> = keys.iter().map(ToString::to_string).collect();
                    (text.join(", "), *cmd)
                })
            })
            .collect()
    }

    pub fn builtin_names() -> &'static [&'static str] {
        BUILTIN_NAMES
    }

    /// A builtin keymap as shipped, ignoring any user files.
    pub fn builtin(name: &str) -> Option<Keymap> {
        if !BUILTIN_NAMES.contains(&name) {
            return None;
        }
        let (name, layers) = FAMILY.resolve(name, None, &mut Vec::new());
        Some(build(&name, &layers, &mut Vec::new()))
    }

    /// Loads keymap `name`: `<config_dir>/keymaps/<name>.toml` merged over the builtin of
    /// that name, over what it `inherits`, or over `default`. Unknown names fall back to
    /// `default`; problems come back as warnings, never as a failure.
    pub fn load(name: &str, config_dir: Option<&Path>) -> (Keymap, Vec<ConfigWarning>) {
        let mut warnings = Vec::new();
        let (name, layers) = FAMILY.resolve(name, config_dir, &mut warnings);
        let keymap = build(&name, &layers, &mut warnings);
        (keymap, warnings)
    }

    /// Builtin names, then the user's keymap files.
    pub fn available(config_dir: Option<&Path>) -> Vec<String> {
        FAMILY.available(config_dir)
    }
}

fn build(name: &str, layers: &[Layer], warnings: &mut Vec<ConfigWarning>) -> Keymap {
    let mut modes: HashMap<Mode, Bindings> = Mode::ALL.iter().map(|m| (*m, Bindings::default())).collect();
    // Which file bound each key, so a conflict can say where the other binding came from.
    let mut origin: HashMap<(Mode, KeyCombo), String> = HashMap::new();
    for layer in layers {
        for (section, value) in &layer.table {
            let Some(mode) = Mode::ALL.iter().copied().find(|m| m.name() == section) else {
                warnings.push(unknown_section(&layer.label, section));
                continue;
            };
            let Value::Table(entries) = value else {
                warnings.push(ConfigWarning::new(
                    &layer.label,
                    Some(section),
                    format!(
                        "expected a [{section}] section of command = [keys], found {}; it is ignored",
                        value.type_name()
                    ),
                ));
                continue;
            };
            let bindings = modes.entry(mode).or_default();
            apply(bindings, mode, entries, layer, &mut origin, warnings);
        }
    }
    Keymap { name: name.to_string(), modes }
}

/// Applies one file's section. Every command the section lists first loses its old keys,
/// so the order of lines does not matter for replacing; then keys are bound in file order
/// and a key claimed twice goes to the later claim.
fn apply(
    bindings: &mut Bindings,
    mode: Mode,
    entries: &Table,
    layer: &Layer,
    origin: &mut HashMap<(Mode, KeyCombo), String>,
    warnings: &mut Vec<ConfigWarning>,
) {
    let mut listed: Vec<(Command, String, Vec<KeyCombo>)> = Vec::new();
    for (name, value) in entries {
        let key = format!("{}.{name}", mode.name());
        let Some(cmd) = Command::from_name(name) else {
            warnings.push(ConfigWarning::new(&layer.label, Some(&key), unknown_command(name)));
            continue;
        };
        let items = match value {
            Value::Array(items) => items.as_slice(),
            Value::Str(_) => std::slice::from_ref(value),
            other => {
                warnings.push(ConfigWarning::new(
                    &layer.label,
                    Some(&key),
                    format!(
                        "expected a list of keys such as [\"q\", \"ctrl-c\"], found {}; the \
                         binding is ignored",
                        other.type_name()
                    ),
                ));
                continue;
            }
        };
        let mut keys = Vec::new();
        let mut problems = Vec::new();
        for item in items {
            match item {
                Value::Str(s) => match KeyCombo::parse(s) {
                    Ok(combo) if !keys.contains(&combo) => keys.push(combo),
                    Ok(_) => {}
                    Err(e) => problems.push(format!("\"{s}\": {e}")),
                },
                other => problems.push(format!("expected a key string such as \"q\", found {}", other.type_name())),
            }
        }
        // A list where nothing parsed is a typo, not a wish to unbind (that is `[]`), so the
        // command keeps the keys it had.
        let keep_old = keys.is_empty() && !items.is_empty();
        for problem in problems {
            let consequence = if keep_old {
                let old: Vec<String> =
                    bindings.keys.get(&cmd).map(|k| k.iter().map(ToString::to_string).collect()).unwrap_or_default();
                if old.is_empty() {
                    format!("{name} stays without a key")
                } else {
                    format!("{name} keeps {}", old.join(", "))
                }
            } else {
                "this key is skipped".to_string()
            };
            warnings.push(ConfigWarning::new(&layer.label, Some(&key), format!("{problem}; {consequence}")));
        }
        if !keep_old {
            listed.push((cmd, name.clone(), keys));
        }
    }

    for (cmd, _, _) in &listed {
        if let Some(old) = bindings.keys.remove(cmd) {
            for combo in old {
                if bindings.commands.get(&combo) == Some(cmd) {
                    bindings.commands.remove(&combo);
                    origin.remove(&(mode, combo));
                }
            }
        }
    }

    for (cmd, name, keys) in listed {
        for combo in &keys {
            let previous = origin.insert((mode, *combo), layer.label.clone());
            let Some(other) = bindings.commands.insert(*combo, cmd) else {
                continue;
            };
            if other == cmd {
                continue;
            }
            let remaining = match bindings.keys.get_mut(&other) {
                Some(list) => {
                    list.retain(|k| k != combo);
                    list.iter().map(ToString::to_string).collect::<Vec<_>>()
                }
                None => Vec::new(),
            };
            let place = match previous {
                Some(label) if label == layer.label => "earlier in this file".to_string(),
                Some(label) => format!("in {label}"),
                None => "before".to_string(),
            };
            let left = if remaining.is_empty() {
                format!("{} has no key left", other.name())
            } else {
                format!("{} keeps {}", other.name(), remaining.join(", "))
            };
            warnings.push(ConfigWarning::new(
                &layer.label,
                Some(&format!("{}.{name}", mode.name())),
                format!(
                    "key \"{combo}\" is also bound to {} {place}; {} gets it because it comes \
                     later, so {left}; give one of them another key",
                    other.name(),
                    cmd.name()
                ),
            ));
        }
        bindings.keys.insert(cmd, keys);
    }
}

fn unknown_command(name: &str) -> String {
    let names = Command::ALL.iter().map(|c| c.name());
    match settings::closest(name, names.clone()) {
        Some(near) => {
            format!("unknown command \"{name}\" (did you mean \"{near}\"?); the binding is ignored")
        }
        None => {
            let all: Vec<&str> = names.collect();
            format!("unknown command \"{name}\": the commands are {}; the binding is ignored", all.join(", "))
        }
    }
}

fn unknown_section(label: &str, section: &str) -> ConfigWarning {
    let modes: Vec<String> = Mode::ALL.iter().map(|m| format!("[{}]", m.name())).collect();
    let message = if Command::from_name(section).is_some() {
        format!("\"{section}\" is a command, but bindings go in a mode section: put it under {}", modes.join(" or "))
    } else {
        let hint = match settings::closest(section, Mode::ALL.iter().map(|m| m.name())) {
            Some(near) => format!(" (did you mean [{near}]?)"),
            None => String::new(),
        };
        format!(
            "unknown section{hint}: a keymap has inherits and the mode sections {}; it is ignored",
            modes.join(" and ")
        )
    };
    ConfigWarning::new(label, Some(section), message)
}

#[cfg(test)]
mod tests;
