use super::*;
use crate::settings::TestDir;

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
    let file = settings::display_path(&dir.path().join("themes/dark.toml"));
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
            format!("{file}: gpu.util.low: \"#12345\" is not a #rrggbb colour: use six hex digits, e.g. \"#1e1e2e\""),
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
