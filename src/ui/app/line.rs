//! The filter (`/`) and command (`:`) lines while they are typed: the filter applies as it is
//! typed and Esc restores the one before; Enter runs the command line (see `cmdline`).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::App;
use crate::ui::state::{InputKind, Screen};

impl App {
    pub(super) fn key_line(&mut self, key: KeyEvent) {
        let Some(input) = self.ui.input.as_mut() else { return };
        match key.code {
            KeyCode::Esc => {
                let input = self.ui.input.take();
                match (input, self.ui.screen()) {
                    (Some(i), Screen::Table(v)) if i.kind == InputKind::Filter => {
                        self.ui.table_mut(v).filter = i.previous
                    }
                    (Some(i), Screen::Inspect | Screen::Logs) if i.kind == InputKind::Filter => {
                        self.ui.nav.inspect_find = i.previous;
                    }
                    (Some(i), Screen::Clusters) if i.kind == InputKind::Filter => self.ui.clusters_filter = i.previous,
                    _ => {}
                }
            }
            KeyCode::Enter => {
                let Some(i) = self.ui.input.take() else { return };
                match i.kind {
                    InputKind::Command => self.run_command_line(&i.text),
                    InputKind::Filter => match self.ui.screen() {
                        Screen::Table(v) => {
                            let n = self.ui.rows(v).len();
                            self.ui.info(format!("filter /{} — {n} rows; Esc clears it", i.text));
                        }
                        Screen::Clusters => {
                            let n = crate::ui::views::clusters::shown(&self.ui.clusters, &i.text, None).len();
                            self.ui.info(format!("filter /{} — {n} clusters; Esc clears it", i.text));
                        }
                        Screen::Inspect | Screen::Logs => {
                            let n = self.pane_matches().len();
                            self.ui.info(format!("/{}: {n} matching lines; n / N next / previous", i.text));
                        }
                        _ => {}
                    },
                }
            }
            KeyCode::Backspace => {
                input.text.pop();
                self.live_filter();
            }
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                if input.text.chars().count() < 200 {
                    input.text.push(c);
                }
                self.live_filter();
            }
            _ => {}
        }
    }

    fn live_filter(&mut self) {
        let Some(i) = &self.ui.input else { return };
        if i.kind != InputKind::Filter {
            return;
        }
        let text = i.text.clone();
        if matches!(self.ui.screen(), Screen::Inspect | Screen::Logs) {
            // As it is typed: the first match from the line at the top of the pane on.
            self.ui.nav.inspect_find = text;
            self.ui.nav.inspect_match = self.ui.nav.inspect_scroll.checked_sub(1);
            return self.find_in_pane(true);
        }
        if self.ui.screen() == Screen::Clusters {
            self.ui.clusters_filter = text;
            return;
        }
        if let Screen::Table(v) = self.ui.screen() {
            let t = self.ui.table_mut(v);
            t.filter = text;
            t.selected = 0;
            t.offset = 0;
        }
    }
}
