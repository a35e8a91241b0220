//! Cells: a text and the theme token it is drawn with, and the small formatting rules the
//! views share (ages, percentages, utilisation colours, unknown as a dash).

use crate::model::{Fleet, Gpu, Ts};

/// A cell: text and the theme token it is drawn with.
pub type Cell = (String, &'static str);

pub fn text(s: impl Into<String>) -> Cell {
    (s.into(), "ui.text")
}

pub fn muted(s: impl Into<String>) -> Cell {
    (s.into(), "ui.text.muted")
}

/// The cell of a row that is gone (a row list one step behind the fleet).
pub fn blank() -> Cell {
    text("")
}

pub fn age(now: Ts, then: Ts) -> String {
    let s = now.saturating_sub(then) / 1000;
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

pub fn pct(n: u32, d: u32) -> u32 {
    (n * 100).checked_div(d).unwrap_or(0)
}

pub fn util_token(u: u8) -> &'static str {
    match u {
        0..=29 => "gpu.util.low",
        30..=74 => "gpu.util.mid",
        _ => "gpu.util.high",
    }
}

/// A utilisation as a cell: `41%` in its level's colour, or a muted `—` when the source
/// could not measure it (never a made-up 0 %).
pub fn util_cell(u: Option<u8>) -> Cell {
    match u {
        Some(u) => (format!("{u}%"), util_token(u)),
        None => muted("—"),
    }
}

/// A GPU's utilisation as a cell, marked `41%?` when its telemetry is stale.
pub fn gpu_util_cell(f: &Fleet, gpu: &Gpu) -> Cell {
    match gpu.last.util {
        Some(u) if gpu.last_sample_at.is_some() && gpu.telemetry_stale(f.now, f.thresholds.stale_ms) => {
            (format!("{u}%?"), "ui.stale")
        }
        u => util_cell(u),
    }
}

/// The mean of the utilisations that were measured; `None` when none was.
pub fn mean_util(utils: impl Iterator<Item = Option<u8>>) -> Option<u8> {
    let (sum, n) = utils.flatten().fold((0u32, 0u32), |(s, n), u| (s + u32::from(u), n + 1));
    (n > 0).then(|| (sum / n) as u8)
}

/// ` of N` when a figure was measured over `of` of `all` devices, else nothing.
pub fn of_measured(of: u32, all: u32) -> String {
    if of < all { format!(" of {of}") } else { String::new() }
}

/// `idle 5m` for a device allocated and idle since `low`, else a muted dash.
pub fn idle_for(f: &Fleet, low: Option<Ts>, idle: bool) -> Cell {
    match (idle, low) {
        (true, Some(l)) => (format!("idle {}", age(f.now, l)), "gpu.idle"),
        _ => muted("-"),
    }
}
