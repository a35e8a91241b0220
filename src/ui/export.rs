//! Screen export for the README and incident tickets: a rendered buffer as plain text or
//! as an SVG picture with the theme's colours.

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};

use super::command::ViewKind;
use super::views::clusters::{self, ClusterRow};
use super::views::tables;
use crate::model::Fleet;

pub fn to_text(buf: &Buffer) -> String {
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut line = String::new();
        for x in 0..buf.area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn hex(c: Color, default: &str) -> String {
    match c {
        Color::Reset => default.to_string(),
        Color::Rgb(r, g, b) => format!("#{r:02x}{g:02x}{b:02x}"),
        Color::Black => "#000000".into(),
        Color::Red => "#cd3131".into(),
        Color::Green => "#0dbc79".into(),
        Color::Yellow => "#e5e510".into(),
        Color::Blue => "#2472c8".into(),
        Color::Magenta => "#bc3fbc".into(),
        Color::Cyan => "#11a8cd".into(),
        Color::Gray => "#c0c0c0".into(),
        Color::DarkGray => "#666666".into(),
        Color::LightRed => "#f14c4c".into(),
        Color::LightGreen => "#23d18b".into(),
        Color::LightYellow => "#f5f543".into(),
        Color::LightBlue => "#3b8eea".into(),
        Color::LightMagenta => "#d670d6".into(),
        Color::LightCyan => "#29b8db".into(),
        Color::White => "#ffffff".into(),
        Color::Indexed(i) => {
            // The xterm 256-colour cube and grey ramp.
            let i = i as u32;
            let (r, g, b) = if i < 16 {
                return hex(ansi16(i as u8), default);
            } else if i < 232 {
                let i = i - 16;
                let v = |x: u32| if x == 0 { 0 } else { 55 + x * 40 };
                (v(i / 36), v((i / 6) % 6), v(i % 6))
            } else {
                let g = 8 + (i - 232) * 10;
                (g, g, g)
            };
            format!("#{r:02x}{g:02x}{b:02x}")
        }
    }
}

fn ansi16(i: u8) -> Color {
    [
        Color::Black,
        Color::Red,
        Color::Green,
        Color::Yellow,
        Color::Blue,
        Color::Magenta,
        Color::Cyan,
        Color::Gray,
        Color::DarkGray,
        Color::LightRed,
        Color::LightGreen,
        Color::LightYellow,
        Color::LightBlue,
        Color::LightMagenta,
        Color::LightCyan,
        Color::White,
    ][i as usize % 16]
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// An SVG of the buffer: one rect per background run, one text span per foreground run.
pub fn to_svg(buf: &Buffer, fg_default: &str, bg_default: &str) -> String {
    let (cw, ch) = (8.4f32, 17.0f32);
    let w = buf.area.width as f32 * cw;
    let h = buf.area.height as f32 * ch;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" font-family=\"DejaVu Sans Mono, Menlo, Consolas, monospace\" font-size=\"14\">\n<rect width=\"100%\" height=\"100%\" fill=\"{bg_default}\"/>\n"
    );
    for y in 0..buf.area.height {
        let mut x = 0;
        while x < buf.area.width {
            let cell = &buf[(x, y)];
            let rev = cell.modifier.contains(Modifier::REVERSED);
            let (fg, bg) = if rev { (cell.bg, cell.fg) } else { (cell.fg, cell.bg) };
            let (fgc, bgc) = (
                hex(fg, if rev { bg_default } else { fg_default }),
                hex(bg, if rev { fg_default } else { bg_default }),
            );
            let bold = cell.modifier.contains(Modifier::BOLD);
            let start = x;
            let mut text = String::new();
            while x < buf.area.width {
                let c = &buf[(x, y)];
                let r = c.modifier.contains(Modifier::REVERSED);
                let (f2, b2) = if r { (c.bg, c.fg) } else { (c.fg, c.bg) };
                if hex(f2, if r { bg_default } else { fg_default }) != fgc
                    || hex(b2, if r { fg_default } else { bg_default }) != bgc
                    || c.modifier.contains(Modifier::BOLD) != bold
                {
                    break;
                }
                text.push_str(c.symbol());
                x += 1;
            }
            let (px, py) = (start as f32 * cw, y as f32 * ch);
            if bgc != bg_default {
                out.push_str(&format!(
                    "<rect x=\"{px:.1}\" y=\"{py:.1}\" width=\"{:.1}\" height=\"{ch:.1}\" fill=\"{bgc}\"/>\n",
                    (x - start) as f32 * cw
                ));
            }
            if !text.trim().is_empty() {
                out.push_str(&format!(
                    "<text x=\"{px:.1}\" y=\"{:.1}\" fill=\"{fgc}\"{} xml:space=\"preserve\" textLength=\"{:.1}\" lengthAdjust=\"spacingAndGlyphs\">{}</text>\n",
                    py + ch * 0.78,
                    if bold { " font-weight=\"bold\"" } else { "" },
                    (x - start) as f32 * cw,
                    esc(&text)
                ));
            }
        }
    }
    out.push_str("</svg>\n");
    out
}

/// The formats of a headless view: the screen's cells as a table or Markdown, or typed JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Markdown,
}

/// One view in a format: the table and markdown are the screen's cells; JSON is typed
/// (`ui::json`, schema in docs/snapshot.md).
pub fn rows(f: &Fleet, v: ViewKind, filter: &str, format: Format) -> String {
    // Cells are cluster text: control characters are shown escaped, never sent to the
    // terminal (JSON escapes them itself).
    let text = || {
        let (headers, rows) = tables::text_rows(f, v, filter);
        let rows: Vec<Vec<String>> = rows
            .into_iter()
            .map(|r| r.into_iter().map(|c| crate::text::printable(&c).into_owned()).collect())
            .collect();
        (headers, rows)
    };
    match format {
        Format::Json => {
            let doc = super::json::snapshot(f, v, filter);
            serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
        }
        Format::Markdown => {
            let (headers, rows) = text();
            markdown(&headers, &rows)
        }
        Format::Table => {
            let (headers, rows) = text();
            plain(&headers, rows)
        }
    }
}

/// `fabrik snapshot --view clusters`: one row per cluster (`current`: the first asked for);
/// `filter` keeps the rows whose cells contain it (a leading `!` inverts).
pub fn clusters(rows: &[ClusterRow], current: usize, now: crate::model::Ts, filter: &str, format: Format) -> String {
    let kept: Vec<ClusterRow> = clusters::shown(rows, filter, None).into_iter().map(|i| rows[i].clone()).collect();
    let current = rows.get(current).and_then(|c| kept.iter().position(|r| r.name == c.name)).unwrap_or(usize::MAX);
    let cells = || -> Vec<Vec<String>> {
        kept.iter().map(|r| r.cells().iter().map(|c| crate::text::printable(c).into_owned()).collect()).collect()
    };
    match format {
        Format::Json => {
            serde_json::to_string_pretty(&clusters::json_doc(&kept, current, now)).unwrap_or_default() + "\n"
        }
        Format::Markdown => markdown(&clusters::HEADERS, &cells()),
        Format::Table => plain(&clusters::HEADERS, cells()),
    }
}

/// A plain text table, columns padded to their widest cell.
fn plain(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.trim().chars().count());
        }
    }
    let line = |cells: Vec<String>| -> String {
        let mut s: String =
            cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}", w = *w)).collect::<Vec<_>>().join("  ");
        s.truncate(s.trim_end().len());
        s + "\n"
    };
    let mut s = line(headers.iter().map(|h| h.to_string()).collect());
    for r in rows {
        s.push_str(&line(r.into_iter().map(|c| c.trim().to_string()).collect()));
    }
    s
}

/// A Markdown table of cells (escaped for the terminal: `text::printable`).
pub fn markdown(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = format!("| {} |\n|{}\n", headers.join(" | "), headers.iter().map(|_| "---|").collect::<String>());
    for r in rows {
        s.push_str(&format!(
            "| {} |\n",
            r.iter().map(|c| crate::text::printable(c.trim()).replace('|', "\\|")).collect::<Vec<_>>().join(" | ")
        ));
    }
    s
}
