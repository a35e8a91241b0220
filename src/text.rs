//! Text for the terminal. Cluster text made safe: object names are tame, but event messages, labels,
//! annotations and status reasons are whatever someone wrote, and an escape sequence in one
//! would drive the terminal of whoever prints it (`fabrik audit`, `fabrik snapshot`). Control
//! characters are shown escaped (`\x1b`), never sent.

use std::borrow::Cow;

/// `s` with every control character (newlines and tabs too) written as `\xNN` / `\u{NNNN}`.
pub fn printable(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// [`printable`] for multi-line text: newlines stay.
pub fn printable_lines(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

fn escape(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    let bad = |c: char| c.is_control() && !(keep_newlines && c == '\n');
    if !s.chars().any(bad) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !bad(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:04x}}}", c as u32));
        }
    }
    Cow::Owned(out)
}

/// `text` in lines of at most `width` characters, broken at spaces (a longer word is cut).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = String::new();
    let mut len = 0;
    for word in text.split(' ') {
        let mut w: Vec<char> = word.chars().collect();
        if len > 0 && len + 1 + w.len() > width {
            out.push(std::mem::take(&mut line));
            len = 0;
        }
        if len > 0 {
            line.push(' ');
            len += 1;
        }
        while len + w.len() > width {
            let rest = w.split_off(width - len);
            line.extend(w);
            out.push(std::mem::take(&mut line));
            (w, len) = (rest, 0);
        }
        len += w.len();
        line.extend(w);
    }
    out.push(line);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_not_sent() {
        assert!(matches!(printable("h100-0001 ready"), Cow::Borrowed(_)), "plain text is not copied");
        assert_eq!(printable("evil\u{1b}]52;c;aGk=\u{7}x"), "evil\\x1b]52;c;aGk=\\x07x");
        assert_eq!(printable("a\tb\nc\u{9b}2J"), "a\\x09b\\x0ac\\u{009b}2J");
        assert_eq!(printable_lines("one\ntwo\u{1b}[2J\n"), "one\ntwo\\x1b[2J\n");
        assert_eq!(printable("GPU 🟢 Ready"), "GPU 🟢 Ready", "printable non-ASCII stays");
    }

    #[test]
    fn log_lines_wrap_at_spaces_and_long_words_are_cut() {
        assert_eq!(wrap("evicted ml/a", 40), ["evicted ml/a"]);
        assert_eq!(wrap("waiting for 2 pods to terminate", 12), ["waiting for", "2 pods to", "terminate"]);
        assert_eq!(wrap("abcdefghij xy", 4), ["abcd", "efgh", "ij", "xy"]);
        assert_eq!(wrap("", 5), [""]);
    }
}
