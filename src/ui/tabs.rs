//! The view tabs' geometry, one answer for render (which draws them) and the mouse (which
//! hits them): `N Title` per view, padded by one space each side, `│` between.

use ratatui::layout::Rect;

use super::command::ViewKind;

/// Drawn between two tabs.
pub const DIVIDER: &str = "│";

/// Each view's tab title, in `ViewKind::ALL` order.
pub fn titles() -> Vec<String> {
    ViewKind::ALL.iter().map(|v| format!("{} {}", v.tab_key(), v.title())).collect()
}

/// The view whose tab is at `column` of the tab row `area`; a tab owns the divider after it.
pub fn at(area: Rect, column: u16) -> Option<ViewKind> {
    let mut x = area.x;
    for (v, title) in ViewKind::ALL.into_iter().zip(titles()) {
        // Padding either side, then the divider.
        let w = title.chars().count() as u16 + 2 + DIVIDER.chars().count() as u16;
        if column >= x && column < x + w {
            return Some(v);
        }
        x += w;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_fall_in_the_tab_drawn_there() {
        // " 1 Fleet │ 2 GPUs │ 3 Tenants │ …" as render draws it.
        let area = Rect::new(0, 1, 120, 1);
        let row = " 1 Fleet │ 2 GPUs │ 3 Tenants │ 4 Quotas │ 5 Pods │ 6 Events │ 7 Operations";
        for (col, ch) in row.chars().enumerate() {
            let want = row.chars().take(col + 1).filter(|c| *c == '│').count() - usize::from(ch == '│');
            assert_eq!(at(area, col as u16), ViewKind::ALL.get(want).copied(), "column {col} {ch:?}");
        }
        assert_eq!(at(area, 200), None);
        assert_eq!(at(Rect::new(5, 1, 120, 1), 4), None);
    }
}
