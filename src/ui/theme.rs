//! Themes: semantic style tokens (`gpu.util.high`, `status.notready`), the builtin theme
//! files, user themes merged over them, and the no-colour variant. Widgets ask for a token,
//! never for a colour.

use std::collections::HashMap;
use std::path::Path;

use ratatui::style::{Color, Modifier, Style};

use crate::config::{self, ConfigWarning, Family, Layer, Table, Value};

/// Every token a theme can style, with what it is used for. A token falls back to its
/// parent (`gpu.util.high` → `gpu.util` → `gpu`), and every chain ends at `ui.text`.
/// Group tokens (`gpu`, `status`, …) exist so a theme can colour a whole family at once.
pub const TOKENS: &[(&str, &str)] = &[
    ("ui.text", "Ordinary text and the background of the whole screen; every token falls back to it"),
    ("ui.text.muted", "Secondary text: units, hints, empty cells"),
    ("ui.border", "Borders of unfocused panes"),
    ("ui.border.focus", "Border of the focused pane"),
    ("ui.title", "Pane and view titles"),
    ("ui.header", "Table header row"),
    ("ui.selection", "The selected row"),
    ("ui.statusbar", "Status bar: cluster, context, clock, counts"),
    ("ui.footer.key", "Key names in the footer hints"),
    ("ui.footer.text", "Descriptions in the footer hints"),
    ("ui.tab", "View tabs that are not active"),
    ("ui.tab.active", "The active view tab"),
    ("ui.dialog", "Dialog body (previews, confirmations, pickers)"),
    ("ui.dialog.border", "Dialog border and title"),
    ("ui.dialog.danger", "The destructive part of a confirmation (what will be evicted or deleted)"),
    ("ui.input", "Text being typed: the : command line and the / filter"),
    ("ui.error", "Error messages"),
    ("ui.warning", "Warning messages, including config warnings"),
    ("ui.info", "Informational messages"),
    ("ui.stale", "Data that has not been refreshed recently (watch lost, reconnecting)"),
    ("status", "Node and pod states, as a group"),
    ("status.ready", "Node Ready"),
    ("status.notready", "Node NotReady or Unknown"),
    ("status.cordoned", "Node cordoned (unschedulable)"),
    ("status.pending", "Pod Pending"),
    ("status.running", "Pod Running"),
    ("status.succeeded", "Pod Succeeded"),
    ("status.failed", "Pod Failed, CrashLoopBackOff, evicted"),
    ("gpu", "GPU cells, as a group"),
    ("gpu.util", "GPU utilisation, any level"),
    ("gpu.util.low", "Utilisation under the busy threshold"),
    ("gpu.util.mid", "Utilisation from busy up to high"),
    ("gpu.util.high", "High utilisation"),
    ("gpu.idle", "Idle but allocated: a pod holds the GPU and does nothing with it"),
    ("gpu.free", "Not allocated to any pod"),
    ("gpu.mig", "MIG slice map, as a group"),
    ("gpu.mig.free", "MIG capacity not carved into an instance"),
    ("gpu.mig.used", "MIG instance in use by a pod"),
    ("gpu.mig.instance", "MIG instances in the slice map, as a group"),
    ("gpu.mig.instance.0", "First MIG instance on a GPU (colours tell neighbours apart)"),
    ("gpu.mig.instance.1", "Second MIG instance"),
    ("gpu.mig.instance.2", "Third MIG instance"),
    ("gpu.mig.instance.3", "Fourth MIG instance"),
    ("gpu.mig.instance.4", "Fifth MIG instance"),
    ("gpu.mig.instance.5", "Sixth MIG instance"),
    ("gpu.mig.instance.6", "Seventh MIG instance"),
    ("tenant", "Tenant rows, as a group"),
    ("tenant.ok", "Tenant well within its quota"),
    ("tenant.near_quota", "Tenant close to its quota"),
    ("tenant.over_quota", "Tenant at or over its quota"),
    ("chart", "Charts, as a group"),
    ("chart.util", "Utilisation series"),
    ("chart.mem", "Memory series"),
    ("chart.power", "Power series"),
    ("severity", "Event severities, as a group"),
    ("severity.info", "Informational events"),
    ("severity.warning", "Warning events"),
    ("severity.error", "Error events"),
    ("op", "Operations (cordon, drain, reslice, quota edits), as a group"),
    ("op.running", "Operation in progress"),
    ("op.blocked", "Operation waiting on something (a PDB, a stuck pod)"),
    ("op.ok", "Operation finished"),
    ("op.failed", "Operation failed"),
];

/// The tokens of the slice map, so renderers can index them without formatting strings.
pub const MIG_INSTANCE_TOKENS: [&str; 7] = [
    "gpu.mig.instance.0",
    "gpu.mig.instance.1",
    "gpu.mig.instance.2",
    "gpu.mig.instance.3",
    "gpu.mig.instance.4",
    "gpu.mig.instance.5",
    "gpu.mig.instance.6",
];

const ROOT: &str = "ui.text";

const BUILTINS: &[(&str, &str)] = &[
    ("dark", include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/themes/dark.toml"))),
    ("light", include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/themes/light.toml"))),
    ("high-contrast", include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/themes/high-contrast.toml"))),
];

const BUILTIN_NAMES: &[&str] = &["dark", "light", "high-contrast"];

const FAMILY: Family =
    Family { noun: "theme", subdir: "themes", fallback: "dark", implicit_base: None, builtins: BUILTINS };

/// Without colour, these modifiers carry what the colours did: where a state was shown by
/// a background or a hue alone, it gets an attribute every terminal can show.
const NO_COLOR_ACCENTS: &[(&str, Modifier)] = &[
    ("ui.text.muted", Modifier::DIM),
    ("ui.border.focus", Modifier::BOLD),
    ("ui.title", Modifier::BOLD),
    ("ui.header", Modifier::BOLD),
    ("ui.selection", Modifier::REVERSED),
    ("ui.statusbar", Modifier::REVERSED),
    ("ui.footer.key", Modifier::BOLD),
    ("ui.tab.active", Modifier::REVERSED.union(Modifier::BOLD)),
    ("ui.dialog.danger", Modifier::BOLD.union(Modifier::UNDERLINED)),
    ("ui.input", Modifier::UNDERLINED),
    ("ui.error", Modifier::BOLD),
    ("ui.warning", Modifier::BOLD),
    ("ui.stale", Modifier::DIM.union(Modifier::ITALIC)),
    ("status.notready", Modifier::BOLD),
    ("status.cordoned", Modifier::ITALIC),
    ("status.pending", Modifier::ITALIC),
    ("status.failed", Modifier::BOLD),
    ("gpu.util.high", Modifier::BOLD),
    ("gpu.idle", Modifier::BOLD.union(Modifier::ITALIC)),
    ("gpu.free", Modifier::DIM),
    ("gpu.mig.free", Modifier::DIM),
    ("tenant.near_quota", Modifier::BOLD),
    ("tenant.over_quota", Modifier::BOLD.union(Modifier::REVERSED)),
    ("severity.warning", Modifier::BOLD),
    ("severity.error", Modifier::BOLD.union(Modifier::REVERSED)),
    ("op.blocked", Modifier::BOLD),
    ("op.failed", Modifier::BOLD.union(Modifier::REVERSED)),
];

const COLOUR_NAMES: &[(&str, Color)] = &[
    ("reset", Color::Reset),
    ("black", Color::Black),
    ("red", Color::Red),
    ("green", Color::Green),
    ("yellow", Color::Yellow),
    ("blue", Color::Blue),
    ("magenta", Color::Magenta),
    ("cyan", Color::Cyan),
    ("gray", Color::Gray),
    ("grey", Color::Gray),
    ("dark-gray", Color::DarkGray),
    ("dark-grey", Color::DarkGray),
    ("light-red", Color::LightRed),
    ("light-green", Color::LightGreen),
    ("light-yellow", Color::LightYellow),
    ("light-blue", Color::LightBlue),
    ("light-magenta", Color::LightMagenta),
    ("light-cyan", Color::LightCyan),
    ("white", Color::White),
];

const MODIFIER_NAMES: &[(&str, Modifier)] = &[
    ("bold", Modifier::BOLD),
    ("dim", Modifier::DIM),
    ("italic", Modifier::ITALIC),
    ("underlined", Modifier::UNDERLINED),
    ("reversed", Modifier::REVERSED),
    ("crossed-out", Modifier::CROSSED_OUT),
];

const UNKNOWN_COLOUR_HELP: &str = "use a name (red, light-blue, ...), #rrggbb, a palette entry, or a 0-255 index";

/// A resolved theme: one precomputed style per token.
#[derive(Clone, Debug, PartialEq)]
pub struct Theme {
    pub name: String,
    // Keyed by the static token names so lookups never allocate.
    styles: HashMap<&'static str, Style>,
}

impl Theme {
    /// The style for `token`, falling back through its parents to `ui.text`. Tokens not in
    /// [`TOKENS`] (a typo in code, `gpu.mig.instance.9`) resolve through their parents too.
    pub fn style(&self, token: &str) -> Style {
        let mut t = token;
        loop {
            if let Some(style) = self.styles.get(t) {
                return *style;
            }
            match t.rfind('.') {
                Some(i) => t = &t[..i],
                None => return self.styles.get(ROOT).copied().unwrap_or_default(),
            }
        }
    }

    /// The slice-map style for the `index`-th MIG instance on a GPU; cycles past seven.
    pub fn mig_instance(&self, index: usize) -> Style {
        self.style(MIG_INSTANCE_TOKENS[index % MIG_INSTANCE_TOKENS.len()])
    }

    pub fn builtin_names() -> &'static [&'static str] {
        BUILTIN_NAMES
    }

    /// A builtin theme as shipped, ignoring any user files.
    pub fn builtin(name: &str) -> Option<Theme> {
        if !BUILTIN_NAMES.contains(&name) {
            return None;
        }
        let (name, layers) = FAMILY.resolve(name, None, &mut Vec::new());
        Some(build(&name, &layers, &mut Vec::new()))
    }

    /// For `NO_COLOR`: the dark theme's modifiers without any colour, plus accents so the
    /// selection, headers and bad states stay visible.
    pub fn no_color() -> Theme {
        let dark = Theme::builtin("dark").unwrap_or_else(|| Theme { name: "dark".to_string(), styles: HashMap::new() });
        dark.without_colour()
    }

    /// Loads theme `name`: `<config_dir>/themes/<name>.toml` merged over the builtin of that
    /// name (or over what it `inherits`), or the builtin alone. Unknown names fall back to
    /// `dark`; problems come back as warnings, never as a failure.
    pub fn load(name: &str, config_dir: Option<&Path>, no_color: bool) -> (Theme, Vec<ConfigWarning>) {
        let mut warnings = Vec::new();
        let (name, layers) = FAMILY.resolve(name, config_dir, &mut warnings);
        let theme = build(&name, &layers, &mut warnings);
        let theme = if no_color { theme.without_colour() } else { theme };
        (theme, warnings)
    }

    /// Builtin names, then the user's theme files.
    pub fn available(config_dir: Option<&Path>) -> Vec<String> {
        FAMILY.available(config_dir)
    }

    fn without_colour(self) -> Theme {
        let mut styles = HashMap::with_capacity(self.styles.len());
        for (token, style) in self.styles {
            // Built field by field: `Style`'s underline colour exists only with a ratatui
            // feature, and this must drop it too.
            let mut plain = Style::new();
            plain.add_modifier = style.add_modifier;
            plain.sub_modifier = style.sub_modifier;
            if let Some((_, accent)) = NO_COLOR_ACCENTS.iter().find(|(t, _)| *t == token) {
                plain = plain.add_modifier(*accent);
            }
            styles.insert(token, plain);
        }
        Theme { name: self.name, styles }
    }
}

/// Resolves layers (base first) into a theme. Palettes merge first, so a user palette entry
/// recolours every builtin style that names it; then each layer's styles replace the ones
/// below, and a style with a mistake is skipped so the one below stays.
fn build(name: &str, layers: &[Layer], warnings: &mut Vec<ConfigWarning>) -> Theme {
    let mut palette: HashMap<String, Color> = HashMap::new();
    for layer in layers {
        for (key, value) in &layer.table {
            match (key.as_str(), value) {
                ("palette", Value::Table(entries)) => {
                    for (entry, value) in entries {
                        match colour(value, &HashMap::new()) {
                            Ok(c) => {
                                palette.insert(entry.clone(), c);
                            }
                            Err(message) => warnings.push(ConfigWarning::new(
                                &layer.label,
                                Some(&format!("palette.{entry}")),
                                message,
                            )),
                        }
                    }
                }
                ("styles", Value::Table(_)) => {}
                ("palette" | "styles", other) => warnings.push(ConfigWarning::new(
                    &layer.label,
                    Some(key),
                    format!("expected a [{key}] table, found {}; the line is ignored", other.type_name()),
                )),
                (other, _) => warnings.push(top_level_warning(&layer.label, other)),
            }
        }
    }

    let mut own: HashMap<&'static str, Style> = HashMap::new();
    for layer in layers {
        for (key, value) in &layer.table {
            let ("styles", Value::Table(entries)) = (key.as_str(), value) else {
                continue;
            };
            for (token, value) in entries {
                let Some(known) = known_token(token) else {
                    warnings.push(ConfigWarning::new(&layer.label, Some(token), unknown_token_message(token)));
                    continue;
                };
                match style(value, &palette) {
                    Ok(style) => {
                        own.insert(known, style);
                    }
                    Err(message) => warnings.push(ConfigWarning::new(&layer.label, Some(token), message)),
                }
            }
        }
    }

    let mut styles = HashMap::with_capacity(TOKENS.len());
    for (token, _) in TOKENS {
        resolve(token, &own, &mut styles);
    }
    Theme { name: name.to_string(), styles }
}

/// A token's style is its parent's with its own attributes patched on, so a token that sets
/// only `fg` keeps the background and modifiers it inherits.
fn resolve(token: &'static str, own: &HashMap<&'static str, Style>, done: &mut HashMap<&'static str, Style>) -> Style {
    if let Some(style) = done.get(token) {
        return *style;
    }
    let base = match parent(token) {
        Some(parent) => resolve(parent, own, done),
        None => Style::default(),
    };
    let style = match own.get(token) {
        Some(mine) => base.patch(*mine),
        None => base,
    };
    done.insert(token, style);
    style
}

fn parent(token: &str) -> Option<&'static str> {
    if token == ROOT {
        return None;
    }
    let mut t = token;
    while let Some(i) = t.rfind('.') {
        t = &t[..i];
        if let Some(known) = known_token(t) {
            return Some(known);
        }
    }
    Some(ROOT)
}

fn known_token(token: &str) -> Option<&'static str> {
    TOKENS.iter().map(|(t, _)| *t).find(|t| *t == token)
}

fn unknown_token_message(token: &str) -> String {
    let names = TOKENS.iter().map(|(t, _)| *t);
    let mut near = config::nearby(token, names.clone(), 3);
    if near.is_empty() {
        // No close spelling: offer the family the token seems to belong to.
        let family = token.split('.').next().unwrap_or_default();
        near = names.filter(|t| t.split('.').next() == Some(family)).take(8).collect();
    }
    if near.is_empty() {
        format!(
            "unknown token \"{token}\": tokens start with ui., status., gpu., tenant., chart., \
             severity. or op.; the full list is in TOKENS (src/ui/theme.rs); the style is ignored"
        )
    } else {
        format!(
            "unknown token \"{token}\": nearby valid tokens are {}; rename it to one of them; \
             the style is ignored",
            near.join(", ")
        )
    }
}

fn top_level_warning(label: &str, key: &str) -> ConfigWarning {
    let message = if known_token(key).is_some() {
        format!("\"{key}\" is a style token: put it under [styles]")
    } else {
        "unknown key: a theme file has inherits, [palette] and [styles]; remove or rename it".to_string()
    };
    ConfigWarning::new(label, Some(key), message)
}

/// A style value: `"red"` (fg only), `42`, or `{ fg, bg, modifiers }`.
fn style(value: &Value, palette: &HashMap<String, Color>) -> Result<Style, String> {
    match value {
        Value::Str(_) | Value::Int(_) => Ok(Style::new().fg(colour(value, palette)?)),
        Value::Table(fields) => style_table(fields, palette),
        other => Err(format!(
            "expected a colour or a table like {{ fg = \"red\", bg = \"black\", modifiers = \
             [\"bold\"] }}, found {}; the style is ignored",
            other.type_name()
        )),
    }
}

fn style_table(fields: &Table, palette: &HashMap<String, Color>) -> Result<Style, String> {
    let mut style = Style::new();
    for (field, value) in fields {
        match field.as_str() {
            "fg" => style = style.fg(colour(value, palette)?),
            "bg" => style = style.bg(colour(value, palette)?),
            "modifiers" => style = style.add_modifier(modifiers(value)?),
            other => {
                let hint = match config::closest(other, ["fg", "bg", "modifiers"]) {
                    Some(near) => format!(" (did you mean \"{near}\"?)"),
                    None => String::new(),
                };
                return Err(format!(
                    "unknown style key \"{other}\"{hint}: a style has fg, bg and modifiers; \
                     the style is ignored"
                ));
            }
        }
    }
    Ok(style)
}

fn modifiers(value: &Value) -> Result<Modifier, String> {
    let names = match value {
        Value::Array(items) => items.as_slice(),
        Value::Str(_) => std::slice::from_ref(value),
        other => {
            return Err(format!("expected a list of modifiers such as [\"bold\"], found {}", other.type_name()));
        }
    };
    let mut all = Modifier::empty();
    for item in names {
        let Value::Str(name) = item else {
            return Err(format!("expected a modifier name such as \"bold\", found {}", item.type_name()));
        };
        let wanted = name.trim().to_lowercase().replace(['_', ' '], "-");
        match MODIFIER_NAMES.iter().find(|(n, _)| *n == wanted) {
            Some((_, m)) => all |= *m,
            None => {
                let hint = match config::closest(&wanted, MODIFIER_NAMES.iter().map(|(n, _)| *n)) {
                    Some(near) => format!(" (did you mean \"{near}\"?)"),
                    None => String::new(),
                };
                return Err(format!(
                    "unknown modifier \"{name}\"{hint}: use bold, dim, italic, underlined, \
                     reversed or crossed-out"
                ));
            }
        }
    }
    Ok(all)
}

/// A colour: palette entry first (so a palette may redefine `red`), then a name, `#rrggbb`,
/// or a 0-255 index.
fn colour(value: &Value, palette: &HashMap<String, Color>) -> Result<Color, String> {
    let text = match value {
        Value::Int(n) => return index(*n),
        Value::Str(s) => s.trim(),
        other => {
            return Err(format!("expected a colour ({UNKNOWN_COLOUR_HELP}), found {}", other.type_name()));
        }
    };
    if let Some(c) = palette.get(text) {
        return Ok(*c);
    }
    let name = text.to_lowercase().replace(['_', ' '], "-");
    if let Some((_, c)) = COLOUR_NAMES.iter().find(|(n, _)| *n == name) {
        return Ok(*c);
    }
    // ratatui also spells them without a separator ("lightblue").
    if let Some((_, c)) = COLOUR_NAMES.iter().find(|(n, _)| n.replace('-', "") == name) {
        return Ok(*c);
    }
    if let Some(hex) = text.strip_prefix('#') {
        return rgb(hex)
            .ok_or_else(|| format!("\"{text}\" is not a #rrggbb colour: use six hex digits, e.g. \"#1e1e2e\""));
    }
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit()) {
        return text
            .parse::<i128>()
            .map_err(|_| format!("colour index {text} is out of range: use 0-255"))
            .and_then(index);
    }
    let candidates = palette.keys().map(String::as_str).chain(COLOUR_NAMES.iter().map(|(n, _)| *n));
    let hint = match config::closest(text, candidates) {
        Some(near) => format!(" (did you mean \"{near}\"?)"),
        None => String::new(),
    };
    Err(format!("unknown colour \"{text}\"{hint}: {UNKNOWN_COLOUR_HELP}"))
}

fn index(n: i128) -> Result<Color, String> {
    u8::try_from(n).map(Color::Indexed).map_err(|_| format!("colour index {n} is out of range: use 0-255"))
}

fn rgb(hex: &str) -> Option<Color> {
    if hex.len() != 6 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let channel = |i: usize| hex.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok());
    Some(Color::Rgb(channel(0)?, channel(2)?, channel(4)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TestDir;

    fn user_theme(file: &str, text: &str) -> TestDir {
        let dir = TestDir::new();
        dir.write(&format!("themes/{file}.toml"), text);
        dir
    }

    fn luminance(c: Color) -> f64 {
        let Color::Rgb(r, g, b) = c else { panic!("builtin themes use #rrggbb colours, found {c:?}") };
        let lin = |v: u8| {
            let v = f64::from(v) / 255.0;
            if v <= 0.03928 { v / 12.92 } else { ((v + 0.055) / 1.055).powf(2.4) }
        };
        0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)
    }

    fn contrast(a: Color, b: Color) -> f64 {
        let (la, lb) = (luminance(a), luminance(b));
        (la.max(lb) + 0.05) / (la.min(lb) + 0.05)
    }

    #[test]
    fn every_builtin_loads_without_warnings_and_resolves_every_token() {
        assert_eq!(Theme::builtin_names(), ["dark", "light", "high-contrast"]);
        for name in Theme::builtin_names() {
            let (theme, warnings) = Theme::load(name, None, false);
            assert_eq!(warnings, vec![], "{name}");
            assert_eq!(&theme.name, name);
            assert_eq!(Theme::builtin(name).as_ref(), Some(&theme));
            for (token, meaning) in TOKENS {
                assert!(!meaning.is_empty());
                let style = theme.style(token);
                assert!(style.fg.is_some() && style.bg.is_some(), "{name}: {token} {style:?}");
            }
        }
        assert_eq!(Theme::builtin("nord"), None);
    }

    #[test]
    fn builtin_text_is_readable_on_its_background() {
        for name in Theme::builtin_names() {
            let theme = Theme::builtin(name).expect("builtin");
            for (token, _) in TOKENS {
                let s = theme.style(token);
                let (Some(fg), Some(bg)) = (s.fg, s.bg) else {
                    continue;
                };
                let (fg, bg) = if s.add_modifier.contains(Modifier::REVERSED) { (bg, fg) } else { (fg, bg) };
                // Borders are not text; WCAG asks 3:1 of interface parts and 4.5:1 of text.
                let need = if token.starts_with("ui.border") { 3.0 } else { 4.5 };
                let got = contrast(fg, bg);
                assert!(got >= need, "{name}: {token} contrast {got:.2} < {need}");
            }
        }
        let light = Theme::builtin("light").expect("light");
        assert!(luminance(light.style("ui.text").bg.expect("bg")) > 0.8);
        let dark = Theme::builtin("dark").expect("dark");
        assert!(luminance(dark.style("ui.text").bg.expect("bg")) < 0.05);
    }

    #[test]
    fn high_contrast_uses_pure_colours_and_bold() {
        let theme = Theme::builtin("high-contrast").expect("builtin");
        assert_eq!(theme.style("ui.text").bg, Some(Color::Rgb(0, 0, 0)));
        assert_eq!(theme.style("ui.text").fg, Some(Color::Rgb(255, 255, 255)));
        for (token, _) in TOKENS {
            let s = theme.style(token);
            for c in [s.fg, s.bg].into_iter().flatten() {
                let Color::Rgb(r, g, b) = c else { panic!("{token}: {c:?}") };
                assert!([r, g, b].iter().all(|v| *v == 0 || *v == 255), "{token}: {c:?} is not pure");
            }
        }
        for token in ["ui.selection", "ui.header", "ui.title", "ui.border.focus", "ui.error", "status.notready"] {
            assert!(theme.style(token).add_modifier.contains(Modifier::BOLD), "{token}");
        }
    }

    #[test]
    fn states_do_not_rely_on_colour_alone() {
        for name in Theme::builtin_names() {
            let theme = Theme::builtin(name).expect("builtin");
            for token in [
                "status.notready",
                "status.failed",
                "gpu.idle",
                "tenant.over_quota",
                "severity.error",
                "op.failed",
                "ui.error",
                "ui.header",
            ] {
                assert!(theme.style(token).add_modifier.contains(Modifier::BOLD), "{name}: {token}");
            }
            for token in ["status.cordoned", "status.pending", "ui.stale"] {
                assert!(!theme.style(token).add_modifier.is_empty(), "{name}: {token}");
            }
            assert_ne!(theme.style("ui.selection"), theme.style("ui.text"), "{name}");
            assert_ne!(theme.style("ui.tab.active"), theme.style("ui.tab"), "{name}");
        }
    }

    #[test]
    fn mig_instances_are_distinct() {
        for name in Theme::builtin_names() {
            let theme = Theme::builtin(name).expect("builtin");
            let styles: Vec<Style> = (0..7).map(|i| theme.mig_instance(i)).collect();
            for i in 0..7 {
                for j in i + 1..7 {
                    assert_ne!(styles[i], styles[j], "{name}: instance {i} and {j}");
                }
            }
            assert_eq!(theme.mig_instance(7), theme.mig_instance(0));
        }
    }

    #[test]
    fn tokens_are_unique_and_parents_are_sensible() {
        let mut seen = std::collections::HashSet::new();
        for (token, _) in TOKENS {
            assert!(seen.insert(*token), "duplicate {token}");
        }
        assert_eq!(parent("gpu.util.high"), Some("gpu.util"));
        assert_eq!(parent("gpu.util"), Some("gpu"));
        assert_eq!(parent("gpu"), Some("ui.text"));
        assert_eq!(parent("ui.footer.key"), Some("ui.text"));
        assert_eq!(parent("ui.dialog.border"), Some("ui.dialog"));
        assert_eq!(parent("ui.text"), None);
    }

    #[test]
    fn fallback_goes_through_parents_to_ui_text() {
        let dir = user_theme(
            "mine",
            "[palette]\nink = \"#102030\"\n[styles]\n\"ui.text\" = { fg = \"white\", bg = \"ink\" }\n\
             \"gpu.util\" = { fg = \"red\", modifiers = [\"bold\"] }\n\"gpu.util.low\" = \"green\"\n",
        );
        let (theme, warnings) = Theme::load("mine", Some(dir.path()), false);
        assert_eq!(warnings, vec![]);
        assert_eq!(theme.name, "mine");
        let ink = Color::Rgb(0x10, 0x20, 0x30);
        let high = theme.style("gpu.util.high");
        assert_eq!((high.fg, high.bg), (Some(Color::Red), Some(ink)));
        assert!(high.add_modifier.contains(Modifier::BOLD));
        // A child that sets only fg keeps what it inherits.
        let low = theme.style("gpu.util.low");
        assert_eq!((low.fg, low.bg), (Some(Color::Green), Some(ink)));
        assert!(low.add_modifier.contains(Modifier::BOLD));
        assert_eq!(theme.style("status.ready"), theme.style("ui.text"));
        // Tokens the code asks for but no table lists still resolve.
        assert_eq!(theme.style("gpu.util.high.extra"), high);
        assert_eq!(theme.style("nonsense"), theme.style("ui.text"));
        assert_eq!(theme.style(""), theme.style("ui.text"));
    }

    #[test]
    fn user_file_merges_over_the_builtin_of_its_name() {
        let dir = user_theme("dark", "[palette]\nblue = \"#0000ff\"\n[styles]\n\"gpu.util.high\" = \"#ff00ff\"\n");
        let (theme, warnings) = Theme::load("dark", Some(dir.path()), false);
        assert_eq!(warnings, vec![]);
        let builtin = Theme::builtin("dark").expect("dark");
        assert_eq!(theme.style("gpu.util.high").fg, Some(Color::Rgb(255, 0, 255)));
        // The palette entry recolours builtin styles that name it.
        assert_eq!(theme.style("ui.selection").bg, Some(Color::Rgb(0, 0, 255)));
        assert_eq!(theme.style("status.ready"), builtin.style("status.ready"));
        assert_eq!(Theme::available(Some(dir.path())), ["dark", "light", "high-contrast"]);
    }

    #[test]
    fn inherits_starts_from_another_theme() {
        let dir = user_theme("paper", "inherits = \"light\"\n[styles]\n\"ui.title\" = \"light-red\"\n");
        dir.write("themes/ink.toml", "inherits = \"paper\"\n[styles]\n\"ui.header\" = \"light-blue\"\n");
        let (theme, warnings) = Theme::load("ink", Some(dir.path()), false);
        assert_eq!(warnings, vec![]);
        let light = Theme::builtin("light").expect("light");
        assert_eq!(theme.style("ui.title").fg, Some(Color::LightRed));
        assert_eq!(theme.style("ui.header").fg, Some(Color::LightBlue));
        assert_eq!(theme.style("ui.text"), light.style("ui.text"));
        assert_eq!(Theme::available(Some(dir.path())), ["dark", "light", "high-contrast", "ink", "paper"]);
        // A user dark.toml saying `inherits = "dark"` means the builtin, not itself.
        dir.write("themes/dark.toml", "inherits = \"dark\"\n");
        let (theme, warnings) = Theme::load("dark", Some(dir.path()), false);
        assert_eq!((theme, warnings), (Theme::builtin("dark").expect("dark"), vec![]));
    }

    #[test]
    fn bad_colour_warns_and_keeps_the_builtin_style() {
        let dir = user_theme(
            "dark",
            "[styles]\n\"gpu.util.high\" = \"blurple\"\n\"gpu.util.low\" = { fg = \"#12345\" }\n\
             \"ui.title\" = 300\n\"ui.header\" = \"purpel\"\n\"status.ready\" = \"#00ff00\"\n\
             [palette]\npurple = \"#800080\"\nbad = true\n",
        );
        let (theme, warnings) = Theme::load("dark", Some(dir.path()), false);
        let builtin = Theme::builtin("dark").expect("dark");
        let file = config::display_path(&dir.path().join("themes/dark.toml"));
        let text: Vec<String> = warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                format!(
                    "{file}: palette.bad: expected a colour (use a name (red, light-blue, ...), #rrggbb, a palette entry, or a 0-255 index), found true"
                ),
                format!(
                    "{file}: gpu.util.high: unknown colour \"blurple\" (did you mean \"purple\"?): use a name (red, light-blue, ...), #rrggbb, a palette entry, or a 0-255 index"
                ),
                format!(
                    "{file}: gpu.util.low: \"#12345\" is not a #rrggbb colour: use six hex digits, e.g. \"#1e1e2e\""
                ),
                format!("{file}: ui.title: colour index 300 is out of range: use 0-255"),
                format!(
                    "{file}: ui.header: unknown colour \"purpel\" (did you mean \"purple\"?): use a name (red, light-blue, ...), #rrggbb, a palette entry, or a 0-255 index"
                ),
            ]
        );
        for token in ["gpu.util.high", "gpu.util.low", "ui.title", "ui.header"] {
            assert_eq!(theme.style(token), builtin.style(token), "{token}");
        }
        assert_eq!(theme.style("status.ready").fg, Some(Color::Rgb(0, 255, 0)));

        // Without a close palette entry the message is exactly what people are told to do.
        dir.write("themes/dark.toml", "[styles]\n\"gpu.util.high\" = \"blurple\"\n");
        let (_, warnings) = Theme::load("dark", Some(dir.path()), false);
        assert_eq!(
            warnings[0].to_string(),
            format!(
                "{file}: gpu.util.high: unknown colour \"blurple\": use a name (red, light-blue, ...), #rrggbb, a palette entry, or a 0-255 index"
            )
        );
    }

    #[test]
    fn bad_styles_and_modifiers_warn() {
        let dir = user_theme(
            "mine",
            "inherits = \"dark\"\n[styles]\n\"ui.text\" = [1]\n\"ui.title\" = { fg = \"red\", underline = true }\n\
             \"ui.header\" = { modifiers = [\"blod\"] }\n\"ui.tab\" = { modifiers = \"italic\" }\n\
             \"ui.info\" = { modifiers = [\"Crossed_Out\", \"UNDERLINED\"] }\n",
        );
        let (theme, warnings) = Theme::load("mine", Some(dir.path()), false);
        let messages: Vec<&str> = warnings.iter().map(|w| w.message.as_str()).collect();
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert!(messages[0].starts_with("expected a colour or a table like"));
        assert!(messages[1].starts_with("unknown style key \"underline\": a style has fg, bg and modifiers"));
        assert!(messages[2].starts_with("unknown modifier \"blod\" (did you mean \"bold\"?)"));
        assert!(theme.style("ui.tab").add_modifier.contains(Modifier::ITALIC));
        assert!(theme.style("ui.info").add_modifier.contains(Modifier::CROSSED_OUT | Modifier::UNDERLINED));
    }

    #[test]
    fn unknown_token_warns_with_nearby_ones() {
        let dir = user_theme(
            "dark",
            "[styles]\n\"gpu.util.hihg\" = \"red\"\n\"status.zombie\" = \"red\"\n\"frame.border\" = \"red\"\n\
             [misc]\nx = 1\n",
        );
        dir.write("themes/flat.toml", "\"ui.text\" = \"red\"\n");
        let (theme, warnings) = Theme::load("dark", Some(dir.path()), false);
        assert_eq!(theme, Theme::builtin("dark").expect("dark"));
        assert_eq!(warnings.len(), 4, "{warnings:?}");
        assert_eq!(warnings[0].key.as_deref(), Some("misc"));
        assert!(warnings[0].message.contains("inherits, [palette] and [styles]"));
        assert_eq!(warnings[1].key.as_deref(), Some("gpu.util.hihg"));
        assert!(warnings[1].message.contains("nearby valid tokens are gpu.util.high"));
        assert!(warnings[2].message.contains("nearby valid tokens are status, status.ready, status.notready"));
        assert!(warnings[3].message.contains("tokens start with ui., status., gpu."));
        let (_, warnings) = Theme::load("flat", Some(dir.path()), false);
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].message, "\"ui.text\" is a style token: put it under [styles]");
    }

    #[test]
    fn bad_toml_warns_with_position_and_keeps_the_builtin() {
        let dir = user_theme("dark", "[styles]\n\"ui.text\" = { fg = \"red\" \n");
        let (theme, warnings) = Theme::load("dark", Some(dir.path()), false);
        assert_eq!(theme, Theme::builtin("dark").expect("dark"));
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].file.ends_with("themes/dark.toml"));
        assert!(warnings[0].message.starts_with("TOML syntax error at line 2, column"), "{}", warnings[0]);
        // A broken new theme still gives a complete one.
        dir.write("themes/mine.toml", "[styles\n");
        let (theme, warnings) = Theme::load("mine", Some(dir.path()), false);
        assert_eq!(warnings.len(), 1);
        assert_eq!(theme.style("ui.text"), Theme::builtin("dark").expect("dark").style("ui.text"));
    }

    #[test]
    fn unknown_inherits_and_cycles_warn_and_start_from_dark() {
        let dir = user_theme("mine", "inherits = \"nrod\"\n[styles]\n\"ui.title\" = \"light-red\"\n");
        let (theme, warnings) = Theme::load("mine", Some(dir.path()), false);
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].key.as_deref(), Some("inherits"));
        assert!(
            warnings[0]
                .message
                .starts_with("no theme named \"nrod\" to inherit from: available are dark, light, high-contrast, mine")
        );
        let dark = Theme::builtin("dark").expect("dark");
        assert_eq!(theme.style("ui.text"), dark.style("ui.text"));
        assert_eq!(theme.style("ui.title").fg, Some(Color::LightRed));

        dir.write("themes/a.toml", "inherits = \"b\"\n");
        dir.write("themes/b.toml", "inherits = \"a\"\n");
        let (theme, warnings) = Theme::load("a", Some(dir.path()), false);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].file.ends_with("themes/b.toml"));
        assert!(warnings[0].message.starts_with("inherits cycle a -> b -> a: remove one"));
        assert_eq!(theme.style("ui.text"), dark.style("ui.text"));

        dir.write("themes/self.toml", "inherits = \"self\"\n");
        let (_, warnings) = Theme::load("self", Some(dir.path()), false);
        assert!(warnings[0].message.starts_with("inherits cycle self -> self"));

        dir.write("themes/num.toml", "inherits = 3\n");
        let (_, warnings) = Theme::load("num", Some(dir.path()), false);
        assert!(warnings[0].message.starts_with("expected the name of a theme such as \"dark\", found the number 3"));
    }

    #[test]
    fn unknown_name_lists_available_and_falls_back_to_dark() {
        let dir = user_theme("paper", "inherits = \"light\"\n");
        let (theme, warnings) = Theme::load("ligth", Some(dir.path()), false);
        assert_eq!(theme, Theme::builtin("dark").expect("dark"));
        assert_eq!(warnings.len(), 1);
        let w = &warnings[0];
        assert_eq!(w.key.as_deref(), Some("theme"));
        assert!(w.file.ends_with("config.toml"));
        assert!(w.message.starts_with(
            "no theme named \"ligth\" (did you mean \"light\"?): available are dark, light, high-contrast, paper; create "
        ), "{w}");
        let (theme, warnings) = Theme::load("../x", None, false);
        assert_eq!((theme.name.as_str(), warnings.len()), ("dark", 1));
    }

    #[test]
    fn no_color_keeps_modifiers_only() {
        let plain = Theme::no_color();
        for (token, _) in TOKENS {
            let s = plain.style(token);
            assert_eq!((s.fg, s.bg), (None, None), "{token}");
        }
        assert!(plain.style("ui.selection").add_modifier.contains(Modifier::REVERSED));
        assert!(plain.style("ui.header").add_modifier.contains(Modifier::BOLD));
        assert!(plain.style("status.notready").add_modifier.contains(Modifier::BOLD));
        let (light, warnings) = Theme::load("light", None, true);
        assert_eq!(warnings, vec![]);
        assert_eq!(light.name, "light");
        assert_eq!(light.style("ui.text").fg, None);
        assert!(light.style("ui.selection").add_modifier.contains(Modifier::REVERSED));
    }

    #[test]
    fn colour_spellings() {
        let p = HashMap::from([("red".to_string(), Color::Rgb(1, 2, 3))]);
        let c = |s: &str| colour(&Value::Str(s.to_string()), &HashMap::new());
        assert_eq!(c("light-blue"), Ok(Color::LightBlue));
        assert_eq!(c("Light_Blue"), Ok(Color::LightBlue));
        assert_eq!(c("lightblue"), Ok(Color::LightBlue));
        assert_eq!(c("dark-grey"), Ok(Color::DarkGray));
        assert_eq!(c("reset"), Ok(Color::Reset));
        assert_eq!(c("#A6e3a1"), Ok(Color::Rgb(0xa6, 0xe3, 0xa1)));
        assert_eq!(c("42"), Ok(Color::Indexed(42)));
        assert!(c("256").is_err());
        assert!(c("99999999999999999999999999999999999999999").is_err());
        assert!(c("#ééé").is_err());
        assert!(c("").is_err());
        assert_eq!(colour(&Value::Int(7), &HashMap::new()), Ok(Color::Indexed(7)));
        assert!(colour(&Value::Int(-1), &HashMap::new()).is_err());
        assert_eq!(colour(&Value::Str("red".into()), &p), Ok(Color::Rgb(1, 2, 3)));
    }

    #[test]
    fn odd_files_never_panic() {
        let dir = TestDir::new();
        let inputs = [
            "",
            "\u{0}",
            "[styles]\n\"\" = \"red\"\n",
            "[styles]\n\"ui.text\" = { fg = { fg = 1 } }\n",
            "palette = 3\nstyles = \"x\"\n",
            "[palette]\n\"日本\" = \"#ffffff\"\n[styles]\n\"ui.text\" = \"日本\"\n",
            "inherits = \"\"\n",
            "inherits = \"../../x\"\n",
            "[styles]\n\"ui.text\" = 1979-05-27T07:32:00Z\n",
            "[[styles]]\n",
            "[styles]\n\"ui.text\" = { modifiers = [[\"bold\"]] }\n",
        ];
        for (i, text) in inputs.iter().enumerate() {
            dir.write(&format!("themes/t{i}.toml"), text);
            let (theme, _) = Theme::load(&format!("t{i}"), Some(dir.path()), false);
            let _ = theme.style("ui.text");
        }
        let _ = Theme::load("t5", Some(dir.path()), false);
        dir.write("themes/bin.toml", [0xff, 0x00, 0xfe]);
        let (_, warnings) = Theme::load("bin", Some(dir.path()), false);
        assert_eq!(warnings.len(), 1);
    }
}
