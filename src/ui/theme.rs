//! Themes: semantic style tokens (`gpu.util.high`, `status.notready`), the builtin theme
//! files, user themes merged over them, and the no-colour variant. Widgets ask for a token,
//! never for a colour.

use std::collections::HashMap;
use std::path::Path;

use ratatui::style::{Color, Modifier, Style};

use crate::settings::{self, ConfigWarning, Family, Layer, Table, Value};

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
    let mut near = settings::nearby(token, names.clone(), 3);
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
                let hint = match settings::closest(other, ["fg", "bg", "modifiers"]) {
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
                let hint = match settings::closest(&wanted, MODIFIER_NAMES.iter().map(|(n, _)| *n)) {
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
    let hint = match settings::closest(text, candidates) {
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
mod tests;
