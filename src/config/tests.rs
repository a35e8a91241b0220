use std::path::Path;

use super::*;
use crate::settings::TestDir;

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
         busy_util_pct = 40\nmig_stuck_secs = 120\nfps = 60\ntenant_label = \"example.com/team\"\n\
         initial_list = \"stream\"\n",
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
            initial_list: crate::feed::kube::InitialList::Stream,
        }
    );
}

#[test]
fn initial_list_names_the_two_ways() {
    let (config, warnings, _dir) = load("initial_list = \"watch\"\n");
    assert_eq!(config.initial_list, crate::feed::kube::InitialList::Pages);
    assert_eq!(warnings.len(), 1);
    let text = warnings[0].to_string();
    assert!(
        text.contains("initial_list") && text.contains("\"stream\" or \"pages\"") && text.contains("\"watch\""),
        "{text}"
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
fn windows_in_seconds_are_bounded_so_milliseconds_cannot_overflow() {
    let (config, warnings, _dir) = load(
        "idle_window_secs = 9223372036854775807
mig_stuck_secs = 2592001
",
    );
    let defaults = Config::default();
    assert_eq!((config.idle_window_secs, config.mig_stuck_secs), (defaults.idle_window_secs, defaults.mig_stuck_secs));
    let text: Vec<String> = warnings.iter().map(ToString::to_string).collect();
    assert_eq!(text.len(), 2, "{text:?}");
    assert!(
        text[0].contains("idle_window_secs: 9223372036854775807 is out of range: use a whole number from 1 to 2592000 (seconds, at most 30 days)"),
        "{text:?}"
    );
    let (config, warnings, _dir) = load(
        "idle_window_secs = 2592000
",
    );
    assert_eq!((config.idle_window_secs, warnings.len()), (2_592_000, 0));
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
