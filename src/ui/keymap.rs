//! Keymaps: key strings and key events as [`KeyCombo`]s, the builtin keymap files, user
//! files merged over them, and the lookup from a key press to a [`Command`] in a [`Mode`].

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::command::{Command, Mode};
use crate::config::{self, ConfigWarning, Family, Layer, Table, Value};

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
    let hint = match config::closest(&lower, names) {
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
    match config::closest(name, names.clone()) {
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
        let hint = match config::closest(section, Mode::ALL.iter().map(|m| m.name())) {
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
mod tests {
    use super::*;
    use crate::config::TestDir;

    // Cancel is bound in normal mode too (it stops a running operation in the ops view).
    const DIALOG_ONLY: &[Command] = &[Command::Confirm, Command::ToggleForce];

    fn press(code: KeyCode, mods: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, mods)
    }

    fn key(s: &str) -> KeyCombo {
        KeyCombo::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn user_keymap(file: &str, text: &str) -> TestDir {
        let dir = TestDir::new();
        dir.write(&format!("keymaps/{file}.toml"), text);
        dir
    }

    #[test]
    fn builtins_load_without_warnings_and_cover_every_command() {
        assert_eq!(Keymap::builtin_names(), ["default", "k9s"]);
        for name in Keymap::builtin_names() {
            let (keymap, warnings) = Keymap::load(name, None);
            assert_eq!(warnings, vec![], "{name}");
            assert_eq!(&keymap.name, name);
            assert_eq!(Keymap::builtin(name).as_ref(), Some(&keymap));
            for cmd in Command::ALL {
                if !DIALOG_ONLY.contains(cmd) {
                    assert!(!keymap.keys_for(Mode::Normal, *cmd).is_empty(), "{name}: {}", cmd.name());
                }
            }
            for cmd in [Command::Confirm, Command::Cancel, Command::Quit, Command::Up, Command::Down] {
                assert!(!keymap.keys_for(Mode::Dialog, cmd).is_empty(), "{name}: dialog {}", cmd.name());
            }
            // ctrl-c always gets out.
            let ctrl_c = press(KeyCode::Char('c'), KeyModifiers::CONTROL);
            assert_eq!(keymap.lookup(Mode::Normal, &ctrl_c), Some(Command::Quit), "{name}");
            assert_eq!(keymap.lookup(Mode::Dialog, &ctrl_c), Some(Command::Quit), "{name}");
        }
        assert_eq!(Keymap::builtin("emacs"), None);
    }

    #[test]
    fn default_keymap_matches_its_documentation() {
        let km = Keymap::builtin("default").expect("default");
        let normal = |c| km.help(Mode::Normal).into_iter().find(|(_, x)| *x == c).map(|(k, _)| k);
        assert_eq!(normal(Command::Quit).as_deref(), Some("q, ctrl-c"));
        assert_eq!(normal(Command::Bottom).as_deref(), Some("G, end"));
        assert_eq!(normal(Command::Open).as_deref(), Some("enter, l, right"));
        assert_eq!(normal(Command::Expand).as_deref(), Some("space"));
        assert_eq!(normal(Command::Drain).as_deref(), Some("D"));
        assert_eq!(normal(Command::Confirm), None);
        assert_eq!(km.hint(Mode::Dialog, Command::Cancel).as_deref(), Some("n"));
        let esc = press(KeyCode::Esc, KeyModifiers::NONE);
        assert_eq!(km.lookup(Mode::Normal, &esc), Some(Command::Back));
        assert_eq!(km.lookup(Mode::Dialog, &esc), Some(Command::Cancel));
        // Help rows follow Command::ALL.
        let order: Vec<Command> = km.help(Mode::Normal).into_iter().map(|(_, c)| c).collect();
        let expected: Vec<Command> = Command::ALL.iter().copied().filter(|c| !DIALOG_ONLY.contains(c)).collect();
        assert_eq!(order, expected);
    }

    #[test]
    fn k9s_keymap_follows_k9s() {
        let km = Keymap::builtin("k9s").expect("k9s");
        let q = press(KeyCode::Char('q'), KeyModifiers::NONE);
        assert_eq!(km.lookup(Mode::Normal, &q), None);
        let cases = [
            ("r", Command::Drain),
            ("c", Command::Cordon),
            ("u", Command::Uncordon),
            ("ctrl-f", Command::PageDown),
            ("ctrl-b", Command::PageUp),
            ("G", Command::Bottom),
            ("g", Command::Top),
            ("I", Command::SortReverse),
            ("shift-right", Command::SortNext),
            ("<", Command::SortPrev),
            (":", Command::CommandLine),
        ];
        for (k, cmd) in cases {
            let combo = key(k);
            let event = press(combo.code, combo.mods);
            assert_eq!(km.lookup(Mode::Normal, &event), Some(cmd), "{k}");
        }
    }

    #[test]
    fn key_strings_round_trip() {
        for s in [
            "q",
            "G",
            "ctrl-c",
            "ctrl-d",
            "alt-x",
            "ctrl-alt-delete",
            "shift-up",
            "enter",
            "esc",
            "tab",
            "backtab",
            "backspace",
            "delete",
            "insert",
            "home",
            "end",
            "pageup",
            "pagedown",
            "up",
            "down",
            "left",
            "right",
            "space",
            "f1",
            "f12",
            "/",
            ":",
            "?",
            "-",
            "ctrl--",
            ",",
            "é",
            "É",
            "日",
            "ß",
            "🚀",
            "ctrl-G",
            "super-k",
            "meta-hyper-a",
        ] {
            let combo = key(s);
            let shown = combo.to_string();
            assert_eq!(KeyCombo::parse(&shown), Ok(combo), "{s} -> {shown}");
            if !s.starts_with("meta-") {
                assert_eq!(shown, s);
            }
        }
        // Other spellings land on the canonical one.
        for (s, canonical) in [
            ("shift-g", "G"),
            ("shift-G", "G"),
            ("SHIFT-g", "G"),
            ("Ctrl-c", "ctrl-c"),
            ("CTRL-C", "ctrl-C"),
            ("shift-tab", "backtab"),
            ("shift-backtab", "backtab"),
            ("Enter", "enter"),
            ("return", "enter"),
            ("ESCAPE", "esc"),
            ("pgdn", "pagedown"),
            (" ", "space"),
            ("shift-é", "É"),
            ("alt-shift-ctrl-x", "ctrl-alt-X"),
            ("F5", "f5"),
        ] {
            assert_eq!(key(s).to_string(), canonical, "{s}");
        }
        // Every event from_event can make displays as something parse accepts.
        for c in ['a', 'Z', '1', '-', ' ', 'é', '日'] {
            for mods in [KeyModifiers::NONE, KeyModifiers::CONTROL, KeyModifiers::ALT | KeyModifiers::SHIFT] {
                let combo = KeyCombo::from_event(&press(KeyCode::Char(c), mods));
                assert_eq!(KeyCombo::parse(&combo.to_string()), Ok(combo), "{c:?} {mods:?}");
            }
        }
    }

    #[test]
    fn bad_key_strings_are_errors_not_panics() {
        for s in [
            "",
            "ctrl-",
            "shift-",
            "ctrl-shift-",
            "gg",
            ":q",
            "ctrl-blah",
            "f0",
            "f25",
            "f01",
            "shift-1",
            "shift-/",
            "shift-space",
            "a-b",
            "ctrl-é-",
            "\u{301}e",
            "--",
            "ctrl-ctrl",
        ] {
            assert!(KeyCombo::parse(s).is_err(), "{s:?} should not parse");
        }
        let e = KeyCombo::parse("pgup2").unwrap_err();
        assert!(e.contains("did you mean \"pgup\"?"), "{e}");
        let e = KeyCombo::parse("gg").unwrap_err();
        assert!(e.contains("sequences such as \"gg\" are not supported"), "{e}");
        let e = KeyCombo::parse("shift-/").unwrap_err();
        assert!(e.starts_with("shift-/ is not a key of its own"), "{e}");
        // Fuzz-ish: nothing panics on arbitrary strings.
        let parts = ["ctrl-", "alt-", "shift-", "-", "é", "G", "f", "1", "enter", "日", "\0", " "];
        for a in parts {
            for b in parts {
                for c in parts {
                    let s = format!("{a}{b}{c}");
                    if let Ok(combo) = KeyCombo::parse(&s) {
                        assert_eq!(KeyCombo::parse(&combo.to_string()), Ok(combo), "{s:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn lookup_normalises_shift_and_backtab() {
        let km = Keymap::builtin("default").expect("default");
        for mods in [KeyModifiers::NONE, KeyModifiers::SHIFT] {
            assert_eq!(km.lookup(Mode::Normal, &press(KeyCode::Char('G'), mods)), Some(Command::Bottom));
            assert_eq!(km.lookup(Mode::Normal, &press(KeyCode::Char('D'), mods)), Some(Command::Drain));
        }
        // Lowercase with SHIFT (kitty protocol) is the uppercase key.
        assert_eq!(km.lookup(Mode::Normal, &press(KeyCode::Char('g'), KeyModifiers::SHIFT)), Some(Command::Bottom));
        assert_eq!(km.lookup(Mode::Normal, &press(KeyCode::Char('g'), KeyModifiers::NONE)), Some(Command::Top));
        assert_eq!(km.lookup(Mode::Normal, &press(KeyCode::BackTab, KeyModifiers::SHIFT)), Some(Command::PrevView));
        assert_eq!(km.lookup(Mode::Normal, &press(KeyCode::BackTab, KeyModifiers::NONE)), Some(Command::PrevView));
        assert_eq!(km.lookup(Mode::Normal, &press(KeyCode::Tab, KeyModifiers::SHIFT)), Some(Command::PrevView));
        assert_eq!(km.lookup(Mode::Normal, &press(KeyCode::Tab, KeyModifiers::NONE)), Some(Command::NextView));
        assert_eq!(km.lookup(Mode::Normal, &press(KeyCode::Char('d'), KeyModifiers::CONTROL)), Some(Command::PageDown));
        assert_eq!(km.lookup(Mode::Normal, &press(KeyCode::Char('x'), KeyModifiers::NONE)), None);
        let mut release = press(KeyCode::Char('q'), KeyModifiers::NONE);
        release.kind = KeyEventKind::Release;
        assert_eq!(km.lookup(Mode::Normal, &release), None);
        release.kind = KeyEventKind::Repeat;
        assert_eq!(km.lookup(Mode::Normal, &release), Some(Command::Quit));
    }

    #[test]
    fn user_file_replaces_listed_commands_only() {
        let dir =
            user_keymap("default", "[normal]\nquit = [\"x\"]\nhelp = []\n[dialog]\nconfirm = [\"Y\", \"ctrl-y\"]\n");
        let (km, warnings) = Keymap::load("default", Some(dir.path()));
        assert_eq!(warnings, vec![]);
        let builtin = Keymap::builtin("default").expect("default");
        assert_eq!(km.keys_for(Mode::Normal, Command::Quit), [key("x")]);
        assert_eq!(km.lookup(Mode::Normal, &press(KeyCode::Char('q'), KeyModifiers::NONE)), None);
        assert_eq!(km.keys_for(Mode::Normal, Command::Help), []);
        assert_eq!(km.hint(Mode::Normal, Command::Help), None);
        assert!(km.help(Mode::Normal).iter().all(|(_, c)| *c != Command::Help));
        assert_eq!(km.keys_for(Mode::Dialog, Command::Confirm), [key("Y"), key("ctrl-y")]);
        assert_eq!(km.keys_for(Mode::Dialog, Command::Quit), builtin.keys_for(Mode::Dialog, Command::Quit));
        assert_eq!(km.keys_for(Mode::Normal, Command::Down), builtin.keys_for(Mode::Normal, Command::Down));
    }

    #[test]
    fn new_keymaps_start_from_default_or_what_they_inherit() {
        let dir = user_keymap("mine", "[normal]\ndrain = [\"ctrl-x\"]\n");
        dir.write("keymaps/mine9s.toml", "inherits = \"k9s\"\n[normal]\nquit = [\"Q\"]\n");
        let (km, warnings) = Keymap::load("mine", Some(dir.path()));
        assert_eq!((km.name.as_str(), warnings), ("mine", vec![]));
        assert_eq!(km.keys_for(Mode::Normal, Command::Drain), [key("ctrl-x")]);
        assert_eq!(km.keys_for(Mode::Normal, Command::Top), [key("g"), key("home")]);
        let (km, warnings) = Keymap::load("mine9s", Some(dir.path()));
        assert_eq!(warnings, vec![]);
        assert_eq!(km.keys_for(Mode::Normal, Command::Quit), [key("Q")]);
        assert_eq!(km.keys_for(Mode::Normal, Command::Drain), [key("r")]);
        assert_eq!(Keymap::available(Some(dir.path())), ["default", "k9s", "mine", "mine9s"]);
    }

    #[test]
    fn moving_a_key_between_commands_in_one_file_is_not_a_conflict() {
        let dir = user_keymap("default", "[normal]\ndrain = [\"c\"]\ncordon = [\"C\"]\n");
        let (km, warnings) = Keymap::load("default", Some(dir.path()));
        assert_eq!(warnings, vec![]);
        assert_eq!(km.lookup(Mode::Normal, &press(KeyCode::Char('c'), KeyModifiers::NONE)), Some(Command::Drain));
        assert_eq!(km.lookup(Mode::Normal, &press(KeyCode::Char('C'), KeyModifiers::NONE)), Some(Command::Cordon));
        assert_eq!(km.lookup(Mode::Normal, &press(KeyCode::Char('D'), KeyModifiers::NONE)), None);
    }

    #[test]
    fn a_key_bound_twice_goes_to_the_later_binding_with_a_warning() {
        // File order, not alphabetical: `uncordon` comes first, `drain` later.
        let dir = user_keymap("default", "[normal]\nuncordon = [\"x\"]\ndrain = [\"x\", \"c\"]\n");
        let (km, warnings) = Keymap::load("default", Some(dir.path()));
        let x = press(KeyCode::Char('x'), KeyModifiers::NONE);
        assert_eq!(km.lookup(Mode::Normal, &x), Some(Command::Drain));
        assert_eq!(km.keys_for(Mode::Normal, Command::Uncordon), []);
        assert_eq!(km.keys_for(Mode::Normal, Command::Cordon), []);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert_eq!(warnings[0].key.as_deref(), Some("normal.drain"));
        assert_eq!(
            warnings[0].message,
            "key \"x\" is also bound to uncordon earlier in this file; drain gets it because it \
             comes later, so uncordon has no key left; give one of them another key"
        );
        assert!(warnings[1].message.starts_with("key \"c\" is also bound to cordon in builtin keymap default;"));
        // The same key in another mode is no conflict.
        let dir = user_keymap("default", "[dialog]\ntoggle_force = [\"c\"]\n");
        assert_eq!(Keymap::load("default", Some(dir.path())).1, vec![]);
    }

    #[test]
    fn broken_entries_warn_and_leave_the_builtin_intact() {
        let dir = user_keymap(
            "default",
            "[normal]\nquitt = [\"z\"]\nhelp = [\"ctrl-blah\"]\nfilter = [\"F\", \"gg\", 3]\n\
             top = 5\nzzzzzz = []\n[nromal]\nup = [\"w\"]\n[visual]\nx = 1\n",
        );
        let (km, warnings) = Keymap::load("default", Some(dir.path()));
        let builtin = Keymap::builtin("default").expect("default");
        let text: Vec<String> =
            warnings.iter().map(|w| format!("{}: {}", w.key.as_deref().unwrap_or("-"), w.message)).collect();
        assert_eq!(text.len(), 8, "{text:#?}");
        assert_eq!(text[0], "normal.quitt: unknown command \"quitt\" (did you mean \"quit\"?); the binding is ignored");
        assert!(text[1].starts_with("normal.help: \"ctrl-blah\": unknown key \"blah\""), "{}", text[1]);
        assert!(text[1].ends_with("; help keeps ?"), "{}", text[1]);
        assert!(text[2].starts_with("normal.filter: \"gg\": unknown key \"gg\" (one key per entry"));
        assert!(text[2].ends_with("; this key is skipped"));
        assert_eq!(
            text[3],
            "normal.filter: expected a key string such as \"q\", found the number 3; this key is skipped"
        );
        assert!(
            text[4].starts_with("normal.top: expected a list of keys such as [\"q\", \"ctrl-c\"], found the number 5")
        );
        assert!(text[5].starts_with("normal.zzzzzz: unknown command \"zzzzzz\": the commands are quit, help, back,"));
        assert!(text[6].starts_with("nromal: unknown section (did you mean [normal]?): a keymap has inherits and the mode sections [normal] and [dialog]"));
        assert!(text[7].starts_with("visual: unknown section: "));
        assert_eq!(km.keys_for(Mode::Normal, Command::Filter), [key("F")]);
        for cmd in [Command::Quit, Command::Help, Command::Top, Command::Up] {
            assert_eq!(km.keys_for(Mode::Normal, cmd), builtin.keys_for(Mode::Normal, cmd), "{}", cmd.name());
        }
    }

    #[test]
    fn misplaced_and_unparsable_files_warn() {
        let dir = user_keymap("default", "quit = [\"x\"]\nnormal = 3\n");
        let (km, warnings) = Keymap::load("default", Some(dir.path()));
        assert_eq!(km, Keymap::builtin("default").expect("default"));
        assert_eq!(warnings.len(), 2);
        assert_eq!(
            warnings[0].message,
            "\"quit\" is a command, but bindings go in a mode section: put it under [normal] or [dialog]"
        );
        assert!(warnings[1].message.starts_with("expected a [normal] section of command = [keys], found the number 3"));

        let dir = user_keymap("default", "[normal]\nquit = [\"x\"\n");
        let (km, warnings) = Keymap::load("default", Some(dir.path()));
        assert_eq!(km, Keymap::builtin("default").expect("default"));
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].file.ends_with("keymaps/default.toml"));
        assert!(warnings[0].message.starts_with("TOML syntax error at line 2, column"), "{}", warnings[0]);
    }

    #[test]
    fn unknown_names_and_inherits_fall_back_to_default() {
        let dir = user_keymap("mine", "inherits = \"vim\"\n[normal]\nquit = [\"Q\"]\n");
        let (km, warnings) = Keymap::load("mine", Some(dir.path()));
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0]
                .message
                .starts_with("no keymap named \"vim\" to inherit from: available are default, k9s, mine")
        );
        assert_eq!(km.keys_for(Mode::Normal, Command::Quit), [key("Q")]);
        assert_eq!(km.keys_for(Mode::Normal, Command::Down), [key("j"), key("down")]);

        let (km, warnings) = Keymap::load("k9", Some(dir.path()));
        assert_eq!(km, Keymap::builtin("default").expect("default"));
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].key.as_deref(), Some("keymap"));
        assert!(
            warnings[0]
                .message
                .starts_with("no keymap named \"k9\" (did you mean \"k9s\"?): available are default, k9s, mine")
        );
        let (km, warnings) = Keymap::load("k9s", None);
        assert_eq!((km.name.as_str(), warnings.len()), ("k9s", 0));
    }

    #[test]
    fn odd_files_never_panic() {
        let dir = TestDir::new();
        let inputs = [
            "",
            "[normal]\n\"\" = [\"q\"]\n",
            "[normal]\nquit = [[\"q\"]]\n",
            "[[normal]]\nquit = 1\n",
            "[normal]\nquit = \"é\"\n[dialog.sub]\nx = 1\n",
            "inherits = \"\"\n",
            "[normal]\nquit = { a = 1 }\n",
            "[normal]\nquit = [\"\u{200b}\", \"ctrl-\u{301}\"]\n",
        ];
        for (i, text) in inputs.iter().enumerate() {
            dir.write(&format!("keymaps/k{i}.toml"), text);
            let (km, _) = Keymap::load(&format!("k{i}"), Some(dir.path()));
            let _ = km.help(Mode::Normal);
        }
        let (km, _) = Keymap::load("k4", Some(dir.path()));
        assert_eq!(km.keys_for(Mode::Normal, Command::Quit), [key("é")]);
    }
}
