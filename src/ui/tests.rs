use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::snapshot::{demo_app, render_app};
use crate::ui::export::to_text;
use crate::ui::theme::Theme;
use crate::ui::App;

fn keys(app: &mut App, s: &str) {
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        let ev = if c == '<' {
            let mut name = String::new();
            for c in chars.by_ref() {
                if c == '>' { break; }
                name.push(c);
            }
            match name.as_str() {
                "Esc" => KeyEvent::from(KeyCode::Esc),
                "Enter" => KeyEvent::from(KeyCode::Enter),
                "Tab" => KeyEvent::from(KeyCode::Tab),
                "Down" => KeyEvent::from(KeyCode::Down),
                "Up" => KeyEvent::from(KeyCode::Up),
                "BS" => KeyEvent::from(KeyCode::Backspace),
                _ => panic!("{name}"),
            }
        } else {
            let m = if c.is_ascii_uppercase() { KeyModifiers::SHIFT } else { KeyModifiers::NONE };
            KeyEvent::new(KeyCode::Char(c), m)
        };
        app.handle_key(ev);
    }
}

#[test]
fn explore() {
    let seq = std::env::var("SEQ").unwrap_or_default();
    let (_, mut app) = demo_app(42, 20, Theme::builtin("dark").unwrap());
    app.resize(140, 40);
    keys(&mut app, &seq);
    println!("{}", to_text(&render_app(&mut app, 140, 40)));
    println!("{:?} {:?}", app.ui.stack, app.ui.message);
}
