//! The terminal driver: raw mode and the alternate screen behind a guard that always
//! restores them, then the loop — drain every pending delta and input, draw at most once
//! per frame, and not at all while nothing changed.

use std::io::stdout;
use std::time::{Duration, Instant};

use crossterm::event::{DisableMouseCapture, EnableMouseCapture, Event, EventStream};
use futures::StreamExt;
use tokio::sync::mpsc;

use super::App;
use crate::feed::Batch;
use crate::model::{Delta, FeedState};

/// Restores the terminal on drop, so an early return or an error never leaves it raw.
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        let _ = crossterm::execute!(stdout(), DisableMouseCapture);
        ratatui::restore();
    }
}

pub async fn run(mut app: App, mut deltas: mpsc::Receiver<Batch>, fps: u16) -> color_eyre::Result<()> {
    // ratatui::init installs a panic hook that restores the terminal before the report.
    let mut terminal = ratatui::init();
    let _guard = TerminalGuard;
    crossterm::execute!(stdout(), EnableMouseCapture)?;
    let frame = Duration::from_millis(1000 / u64::from(fps.clamp(1, 120)));
    let mut events = EventStream::new();
    let size = terminal.size()?;
    app.resize(size.width, size.height);
    terminal.draw(|f| app.draw(f))?;
    let mut last_draw = Instant::now();
    let mut dirty = false;
    let mut feed_open = true;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        let deadline = tokio::time::Instant::from_std(last_draw + frame);
        tokio::select! {
            ev = events.next() => match ev {
                Some(Ok(Event::Key(k))) => { app.handle_key(k); dirty = true; }
                Some(Ok(Event::Mouse(m))) => { app.handle_mouse(m); dirty = true; }
                Some(Ok(Event::Resize(w, h))) => { app.resize(w, h); terminal.autoresize()?; dirty = true; }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.into()),
                None => break,
            },
            batch = deltas.recv(), if feed_open => match batch {
                Some(b) => {
                    let mut changed = app.apply(b);
                    while let Ok(b) = deltas.try_recv() {
                        changed |= app.apply(b);
                    }
                    dirty |= changed;
                }
                None => {
                    feed_open = false;
                    let now = app.fleet.now;
                    dirty |= app.apply([Delta::Feed { source: "feed".into(), state: FeedState::Stale { since: now, reason: "the feed stopped".into() } }]);
                }
            },
            _ = tokio::time::sleep_until(deadline), if dirty => {
                terminal.draw(|f| app.draw(f))?;
                last_draw = Instant::now();
                dirty = false;
            }
            _ = term.recv() => break,
        }
        if app.ui.quit {
            break;
        }
    }
    Ok(())
}
