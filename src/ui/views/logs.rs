//! The logs pane (`L`): the last request's lines as the fleet holds them (bounded), scrolled
//! or stuck to the newest line while following, `/` matches marked, long lines cut or wrapped.
//! Only the lines on screen are escaped and styled.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use crate::model::{Fleet, LogBuffer, LogRequest, LogState};
use crate::ui::state::Navigation;
use crate::ui::theme::Theme;

/// The log of the request on screen, once its first chunk arrived.
pub fn buffer<'a>(f: &'a Fleet, nav: &Navigation) -> Option<&'a LogBuffer> {
    let want = nav.logs.as_ref()?.id;
    f.logs.as_ref().filter(|b| b.request == want)
}

/// What the stream is doing, in words for the title.
pub fn state_words(req: &LogRequest, b: Option<&LogBuffer>, open: bool) -> String {
    let run = if req.previous { "previous run" } else { "current run" };
    let doing = match b.map(|b| &b.state) {
        None | Some(LogState::Opening) => "opening".to_string(),
        Some(LogState::Streaming) if req.follow && open => "following".to_string(),
        Some(LogState::Streaming) if req.follow => "stopped following".to_string(),
        Some(LogState::Streaming) => "reading".to_string(),
        Some(LogState::Ended) if req.follow => "the container stopped; stream ended".to_string(),
        Some(LogState::Ended) => "all read".to_string(),
        Some(LogState::Failed(_)) => "failed".to_string(),
    };
    format!("{run}, {doing}")
}

/// How many screen rows `line` takes at `width` when wrapped.
fn rows(line: &str, width: usize) -> usize {
    line.chars().count().div_ceil(width.max(1)).max(1)
}

/// The first line shown: the scroll, or while stuck the one that puts the newest line at the
/// bottom (counting wrapped rows when wrapping).
fn top(b: &LogBuffer, nav: &Navigation, height: usize, width: usize) -> usize {
    let total = b.lines.len();
    if !nav.logs_stick {
        return nav.inspect_scroll.min(total.saturating_sub(height));
    }
    if !nav.logs_wrap {
        return total.saturating_sub(height);
    }
    let mut used = 0;
    let mut first = total;
    for l in b.lines.iter().rev() {
        used += rows(l, width);
        if used > height {
            break;
        }
        first -= 1;
    }
    first.min(total.saturating_sub(1))
}

pub fn render(frame: &mut Frame, area: Rect, f: &Fleet, nav: &Navigation, theme: &Theme) {
    let Some(req) = nav.logs.as_ref() else { return };
    let height = area.height.saturating_sub(2) as usize;
    let width = area.width.saturating_sub(2) as usize;
    let b = buffer(f, nav);
    let mut body: Vec<Line> = Vec::new();
    let (mut first, mut last, mut total) = (0, 0, 0);
    match b {
        None => body.push(Line::from(Span::styled(
            format!("opening the log of pod/{}/{} through the API server…", req.namespace, req.pod),
            theme.style("ui.text.muted"),
        ))),
        Some(b) => {
            total = b.lines.len();
            first = top(b, nav, height, width);
            let shown = b.lines.iter().enumerate().skip(first).take(height);
            for (n, l) in shown {
                let text = crate::text::printable(l);
                let tok = if ["ERROR", "Error", "Traceback", "panic", "FATAL", "Killed"].iter().any(|w| l.contains(w)) {
                    "severity.warning"
                } else {
                    "ui.text"
                };
                body.push(super::inspect::marked_line(n, &text, tok, nav, theme));
                last = n + 1;
            }
            if total == 0 && matches!(b.state, LogState::Streaming | LogState::Ended) {
                body.push(Line::from(Span::styled("(no lines)", theme.style("ui.text.muted"))));
            }
            if let LogState::Failed(e) = &b.state {
                body.push(Line::from(Span::styled(
                    format!("# {}: {}", req.label(), crate::text::printable(e)),
                    theme.style("ui.warning"),
                )));
            }
        }
    }
    let containers = match b {
        Some(b) if b.containers.len() > 1 => {
            let each: Vec<String> =
                b.containers.iter().map(|c| if *c == b.container { format!("[{c}]") } else { c.clone() }).collect();
            format!(" · containers {}", each.join(" "))
        }
        Some(b) => format!(" [{}]", b.container),
        None => String::new(),
    };
    let dropped = b.filter(|b| b.dropped > 0).map(|b| format!(", {} older dropped", b.dropped)).unwrap_or_default();
    let range = if total == 0 { "no lines".to_string() } else { format!("{}-{last} of {total}{dropped}", first + 1) };
    let title = format!(
        " logs pod/{}/{}{containers} · {} · {range} · f follow, p previous, C container, w wrap, t time, Esc back ",
        req.namespace,
        req.pod,
        state_words(req, b, nav.logs_open)
    );
    let mut p = Paragraph::new(body).block(
        Block::default()
            .borders(Borders::ALL)
            .border_style(theme.style("ui.border.focus"))
            .title(Span::styled(title, theme.style("ui.title"))),
    );
    if nav.logs_wrap {
        p = p.wrap(Wrap { trim: false });
    }
    frame.render_widget(p, area);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stuck_to_the_bottom_counts_wrapped_rows() {
        let mut b = LogBuffer::new(1, 0);
        b.apply(crate::model::LogEvent::Lines((0..10).map(|i| "x".repeat(i * 10)).collect()), 0);
        let mut nav = crate::ui::state::Ui::new(String::new()).nav;
        nav.logs_stick = true;
        assert_eq!(top(&b, &nav, 4, 40), 6);
        nav.logs_wrap = true;
        // The last lines are 90, 80, 70 characters: 3, 2 and 2 rows at width 40.
        assert_eq!(top(&b, &nav, 4, 40), 9);
        assert_eq!(top(&b, &nav, 7, 40), 7);
        nav.logs_stick = false;
        nav.inspect_scroll = 2;
        assert_eq!(top(&b, &nav, 4, 40), 2);
    }
}
