use super::*;
use crate::settings::TestDir;

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
    assert_eq!(km.lookup(Mode::Normal, &press(KeyCode::Char('z'), KeyModifiers::NONE)), None);
    let mut release = press(KeyCode::Char('q'), KeyModifiers::NONE);
    release.kind = KeyEventKind::Release;
    assert_eq!(km.lookup(Mode::Normal, &release), None);
    release.kind = KeyEventKind::Repeat;
    assert_eq!(km.lookup(Mode::Normal, &release), Some(Command::Quit));
}

#[test]
fn user_file_replaces_listed_commands_only() {
    let dir = user_keymap("default", "[normal]\nquit = [\"z\"]\nhelp = []\n[dialog]\nconfirm = [\"Y\", \"ctrl-y\"]\n");
    let (km, warnings) = Keymap::load("default", Some(dir.path()));
    assert_eq!(warnings, vec![]);
    let builtin = Keymap::builtin("default").expect("default");
    assert_eq!(km.keys_for(Mode::Normal, Command::Quit), [key("z")]);
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
    let dir = user_keymap("default", "[normal]\ndrain = [\"c\"]\ncordon = [\"V\"]\n");
    let (km, warnings) = Keymap::load("default", Some(dir.path()));
    assert_eq!(warnings, vec![]);
    assert_eq!(km.lookup(Mode::Normal, &press(KeyCode::Char('c'), KeyModifiers::NONE)), Some(Command::Drain));
    assert_eq!(km.lookup(Mode::Normal, &press(KeyCode::Char('V'), KeyModifiers::NONE)), Some(Command::Cordon));
    assert_eq!(km.lookup(Mode::Normal, &press(KeyCode::Char('D'), KeyModifiers::NONE)), None);
}

#[test]
fn a_key_bound_twice_goes_to_the_later_binding_with_a_warning() {
    // File order, not alphabetical: `uncordon` comes first, `drain` later.
    let dir = user_keymap("default", "[normal]\nuncordon = [\"z\"]\ndrain = [\"z\", \"c\"]\n");
    let (km, warnings) = Keymap::load("default", Some(dir.path()));
    let x = press(KeyCode::Char('z'), KeyModifiers::NONE);
    assert_eq!(km.lookup(Mode::Normal, &x), Some(Command::Drain));
    assert_eq!(km.keys_for(Mode::Normal, Command::Uncordon), []);
    assert_eq!(km.keys_for(Mode::Normal, Command::Cordon), []);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert_eq!(warnings[0].key.as_deref(), Some("normal.drain"));
    assert_eq!(
        warnings[0].message,
        "key \"z\" is also bound to uncordon earlier in this file; drain gets it because it \
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
    assert_eq!(text[3], "normal.filter: expected a key string such as \"q\", found the number 3; this key is skipped");
    assert!(text[4].starts_with("normal.top: expected a list of keys such as [\"q\", \"ctrl-c\"], found the number 5"));
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
        warnings[0].message.starts_with("no keymap named \"vim\" to inherit from: available are default, k9s, mine")
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
