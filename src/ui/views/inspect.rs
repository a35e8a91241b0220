//! The inspect pane (`y`) and `fabrik describe`: an object's YAML as the API server holds it,
//! `managedFields` folded, and the events about it below, as `kubectl describe` lists them.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use crate::model::{Fleet, Inspected, Ts};
use crate::ui::state::{Navigation, Pane};
use crate::ui::theme::Theme;

/// The pane's text: a heading line (what, when read, what was folded), the YAML, then the
/// events. Cluster text is escaped for the terminal.
pub fn lines(i: &Inspected) -> Vec<String> {
    let mut out = Vec::new();
    let doc = match &i.result {
        Ok(d) => d,
        Err(e) => {
            out.push(format!("# {}: {}", i.target.label(), crate::text::printable(e)));
            return out;
        }
    };
    if i.target.is_kubectl() {
        let note = doc.note.as_deref().unwrap_or("");
        out.push(format!("$ {}   ({note}, {})", crate::text::printable(&i.target.label()), stamp(i.at)));
        out.extend(doc.yaml.lines().map(|l| crate::text::printable(l).into_owned()));
        return out;
    }
    let folded = match doc.folded {
        0 => String::new(),
        n => format!("; managedFields: {n} entries folded"),
    };
    out.push(format!("# {}, read {}{folded}", i.target.label(), stamp(i.at)));
    out.extend(doc.yaml.lines().map(|l| crate::text::printable(l).into_owned()));
    out.push(String::new());
    match (&doc.events_error, doc.events.len()) {
        (Some(e), _) => out.push(format!("Events: {}", crate::text::printable(e))),
        (None, 0) => out.push("Events: <none>".to_string()),
        (None, n) => {
            out.push(format!("Events ({n}):"));
            out.push(format!(
                "  {:<24}  {:<7}  {:<20}  {:>5}  {:<18}  MESSAGE",
                "LAST", "TYPE", "REASON", "COUNT", "FROM"
            ));
            for e in &doc.events {
                out.push(format!(
                    "  {:<24}  {:<7}  {:<20}  {:>5}  {:<18}  {}",
                    stamp(e.last),
                    crate::text::printable(&e.type_),
                    crate::text::printable(&e.reason),
                    e.count,
                    crate::text::printable(&e.from),
                    crate::text::printable(&e.message)
                ));
            }
        }
    }
    out
}

fn stamp(ms: Ts) -> String {
    crate::ops::audit::rfc3339(ms)
}

/// `line` in spans, each case-insensitive (ASCII) occurrence of `find` in `hit` style.
fn found<'a>(line: &'a str, find: &str, style: ratatui::style::Style, hit: ratatui::style::Style) -> Vec<Span<'a>> {
    if find.is_empty() {
        return vec![Span::styled(line, style)];
    }
    let (lower, find) = (line.to_ascii_lowercase(), find.to_ascii_lowercase());
    let mut spans = Vec::new();
    let mut at = 0;
    while let Some(k) = lower[at..].find(&find) {
        let (start, end) = (at + k, at + k + find.len());
        if start > at {
            spans.push(Span::styled(&line[at..start], style));
        }
        spans.push(Span::styled(&line[start..end], hit));
        at = end;
    }
    spans.push(Span::styled(&line[at..], style));
    spans
}

/// Pane line `n` in `tok`'s style with every match of the `/` search marked, the current
/// match also bold and underlined (the inspect and logs panes).
pub(crate) fn marked_line(n: usize, text: &str, tok: &str, nav: &Navigation, theme: &Theme) -> Line<'static> {
    let mut hit = theme.style("ui.selection");
    if nav.inspect_match == Some(n) {
        hit = hit.add_modifier(ratatui::style::Modifier::BOLD | ratatui::style::Modifier::UNDERLINED);
    }
    let spans = found(text, &nav.inspect_find, theme.style(tok), hit);
    Line::from(spans.into_iter().map(|s| Span::styled(s.content.into_owned(), s.style)).collect::<Vec<_>>())
}

/// The answer to the last request, once it arrived.
pub fn answer<'a>(f: &'a Fleet, nav: &Navigation) -> Option<&'a Inspected> {
    f.inspected.as_deref().filter(|i| i.request == nav.inspect_request && nav.inspect.as_ref() == Some(&i.target))
}

/// The pane's lines for the last request, once its answer arrived.
pub fn pane(nav: &Navigation) -> Option<&Pane> {
    nav.pane.as_ref().filter(|p| p.request == nav.inspect_request)
}

/// The pane, scrolled to `nav.inspect_scroll`: only the lines on screen are styled.
pub fn render(frame: &mut Frame, area: Rect, nav: &Navigation, theme: &Theme) {
    let Some(target) = nav.inspect.as_ref() else { return };
    let height = area.height.saturating_sub(2) as usize;
    let (body, total, top): (Vec<Line>, usize, usize) = match pane(nav) {
        None => {
            let reading = format!("reading {} from the API server…", target.label());
            (vec![Line::from(Span::styled(reading, theme.style("ui.text.muted")))], 1, 0)
        }
        Some(p) => {
            let total = p.lines.len();
            let top = nav.inspect_scroll.min(total.saturating_sub(height));
            let shown = p.lines.iter().enumerate().skip(top).take(height).map(|(n, l)| {
                let tok = if n == 0 {
                    if p.failed { "ui.warning" } else { "ui.text.muted" }
                } else if l.starts_with("Events") {
                    "ui.title"
                } else if l.contains("  Warning  ") {
                    "severity.warning"
                } else {
                    "ui.text"
                };
                marked_line(n, l, tok, nav, theme)
            });
            (shown.collect(), total, top)
        }
    };
    let title = format!(
        " {} · {}-{} of {total} · j/k scroll, g/G top/bottom, Esc back ",
        target.label(),
        top + 1,
        (top + height).min(total)
    );
    let p = Paragraph::new(body).block(
        Block::default()
            .borders(Borders::ALL)
            .border_style(theme.style("ui.border.focus"))
            .title(Span::styled(title, theme.style("ui.title"))),
    );
    frame.render_widget(p, area);
}
