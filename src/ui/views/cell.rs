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

/// How long ago `then` was, as kubectl prints it (apimachinery's `duration.HumanDuration`:
/// `90s`, `5m30s`, `3h20m`, `2d5h`, `1y30d`), for cells a person compares with kubectl's,
/// such as RESTARTS' `(5m30s ago)`.
pub fn kubectl_age(now: Ts, then: Ts) -> String {
    let s = now.saturating_sub(then) / 1000;
    let (m, h) = (s / 60, s / 3600);
    let (d, y) = (h / 24, h / (24 * 365));
    let with = |big: u64, unit: &str, small: u64, small_unit: &str| {
        if small == 0 { format!("{big}{unit}") } else { format!("{big}{unit}{small}{small_unit}") }
    };
    match () {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => with(m, "m", s % 60, "s"),
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 => with(h, "h", m % 60, "m"),
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 => with(d, "d", h % 24, "h"),
        _ if h < 24 * 365 * 2 => format!("{d}d"),
        _ if h < 24 * 365 * 8 => with(y, "y", d % 365, "d"),
        _ => format!("{y}y"),
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

#[cfg(test)]
mod tests {
    use super::kubectl_age;

    /// apimachinery's own cases for `HumanDuration` (duration_test.go, v0.35.3), those with
    /// a time not in the future: the text kubectl prints in RESTARTS' `(… ago)` and AGE.
    #[test]
    fn ages_read_as_kubectl_prints_them() {
        const S: u64 = 1000;
        const M: u64 = 60 * S;
        const H: u64 = 60 * M;
        const D: u64 = 24 * H;
        let cases: &[(u64, &str)] = &[
            (S, "1s"),
            (70 * S, "70s"),
            (190 * S, "3m10s"),
            (70 * M, "70m"),
            (47 * H, "47h"),
            (49 * H, "2d1h"),
            ((8 * 24 + 2) * H, "8d"),
            (367 * D, "367d"),
            ((365 * 2 * 24 + 25) * H, "2y1d"),
            ((365 * 8 * 24 + 2) * H, "8y"),
            (0, "0s"),
            (S - 1, "0s"),
            (2 * M - 1, "119s"),
            (2 * M, "2m"),
            (2 * M + S, "2m1s"),
            (10 * M - 1, "9m59s"),
            (10 * M, "10m"),
            (10 * M + S, "10m"),
            (3 * H - 1, "179m"),
            (3 * H, "3h"),
            (3 * H + M, "3h1m"),
            (8 * H - 1, "7h59m"),
            (8 * H, "8h"),
            (8 * H + 59 * M, "8h"),
            (2 * D - 1, "47h"),
            (2 * D, "2d"),
            (2 * D + H, "2d1h"),
            (8 * D - 1, "7d23h"),
            (8 * D, "8d"),
            (8 * D + 23 * H, "8d"),
            (2 * 365 * D - 1, "729d"),
            (2 * 365 * D, "2y"),
            (2 * 365 * D + 23 * H + 59 * M, "2y"),
            (2 * 365 * D + D, "2y1d"),
            (7 * 365 * D, "7y"),
            (8 * 365 * D - 1, "7y364d"),
            (8 * 365 * D, "8y"),
            (8 * 365 * D + 364 * D, "8y"),
            (9 * 365 * D, "9y"),
        ];
        let now = 100 * 365 * D;
        for (ago, want) in cases {
            assert_eq!(kubectl_age(now, now - ago), *want, "{ago} ms ago");
        }
        // A time ahead of the cockpit's clock (a skewed node) reads as now.
        assert_eq!(kubectl_age(now, now + 5 * S), "0s");
    }
}
