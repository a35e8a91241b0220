//! Mouse: the wheel moves the selection, a click picks a tab or a row (a second click on
//! the selected row opens it).

use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Rect;

use super::App;
use crate::ui::command::Command;
use crate::ui::render::{self, areas};
use crate::ui::state::Screen;
use crate::ui::tabs;

impl App {
    pub fn handle_mouse(&mut self, m: MouseEvent) {
        let a = areas(Rect::new(0, 0, self.ui.size.0, self.ui.size.1));
        match m.kind {
            MouseEventKind::ScrollDown => self.dispatch(Command::Down),
            MouseEventKind::ScrollUp => self.dispatch(Command::Up),
            MouseEventKind::Down(MouseButton::Left) => {
                if self.ui.dialog.is_some() || self.ui.help {
                    return;
                }
                if m.row == a.tabs.y {
                    if let Some(v) = tabs::at(a.tabs, m.column) {
                        self.open_view(v);
                    }
                } else if let Screen::Table(v) = self.ui.screen() {
                    let (table, _) = render::table_area(v, a.body);
                    let first = table.y + 2;
                    if m.row >= first && m.row < table.y + table.height.saturating_sub(1) {
                        let t = self.ui.table(v);
                        let idx = t.offset + (m.row - first) as usize;
                        if idx < self.ui.rows(v).len() {
                            if idx == t.selected {
                                self.dispatch(Command::Open);
                            } else {
                                self.ui.table_mut(v).selected = idx;
                            }
                        }
                    }
                } else if let Screen::Node(_) = self.ui.screen() {
                    let first = a.body.y + 1;
                    if m.row >= first {
                        self.ui.nav.node_sel = (m.row - first) as usize;
                    }
                }
            }
            _ => {}
        }
        self.prepare();
    }
}
