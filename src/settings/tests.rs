use super::document::position;
use super::suggest::edit_distance;
use super::*;

#[test]
fn warning_display_with_and_without_key() {
    let w = ConfigWarning::new("a.toml", Some("fps"), "too fast");
    assert_eq!(w.to_string(), "a.toml: fps: too fast");
    let w = ConfigWarning::new("a.toml", None, "broken");
    assert_eq!(w.to_string(), "a.toml: broken");
}

#[test]
fn documents_keep_file_order_and_positions_survive_odd_offsets() {
    let table = parse_document("b = 1\na = 2\n[z]\ny = 1\nx = 2\n").expect("parses");
    let keys: Vec<_> = table.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["b", "a", "z"]);
    let Value::Table(z) = &table[2].1 else { panic!("z is a table") };
    assert_eq!(z[0].0, "y");
    assert_eq!(position("é\nxy", 1), (1, 1));
    assert_eq!(position("é\nxy", 99), (2, 3));
    assert_eq!(
        parse_document("n = 0xffffffffffffffff").ok(),
        Some(vec![("n".into(), Value::Int(0xffff_ffff_ffff_ffff))])
    );
}

#[test]
fn suggestions() {
    assert_eq!(edit_distance("fsp", "fps"), 1);
    assert_eq!(edit_distance("", "abc"), 3);
    assert_eq!(closest("quitt", ["quit", "help"]), Some("quit"));
    assert_eq!(closest("zzzz", ["quit", "help"]), None);
    assert_eq!(closest(&"q".repeat(100_000), ["quit"]), None);
    assert_eq!(
        nearby("gpu.util.hihg", ["gpu.util.high", "gpu.util.mid", "ui.text"], 3),
        ["gpu.util.high", "gpu.util.mid"]
    );
}
