//! The terminal driver: raw mode and the alternate screen behind a guard that always
//! restores them, then the loop — apply the pending deltas (for at most [`APPLY_BUDGET`] at a
//! time) and input, draw at most once per frame, and not at all while nothing changed.

use std::io::stdout;
use std::time::{Duration, Instant};

use crossterm::event::{DisableMouseCapture, EnableMouseCapture, Event, EventStream};
use futures::StreamExt;
use tokio::sync::mpsc;

use super::App;
use crate::model::Batch;
use crate::model::{Delta, FeedState};

/// The longest the loop applies queued deltas in one go before it looks at keys and frames
/// again (a burst of feed batches used to be drained whole: 1.1 s once, in kube_e2e's burst).
const APPLY_BUDGET: Duration = Duration::from_millis(25);

/// Restores the terminal on drop, so an early return or an error never leaves it raw.
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        let _ = crossterm::execute!(stdout(), DisableMouseCapture);
        // Not `ratatui::restore()`: it reports a failure with `eprintln!`, which panics when
        // the terminal is gone (an SSH hang-up), and there is nobody to tell then anyway.
        let _ = ratatui::try_restore();
    }
}

/// Why the cockpit's loop ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    /// The person quit (through the running-operation guard).
    Quit,
    /// `:ctx NAME`: reconnect to that context.
    Switch(String),
    /// A signal ended it (`SIGHUP` when an SSH session hangs up, `SIGTERM`, `SIGINT`); nobody
    /// is there to ask, so running operations are recorded as interrupted where they are.
    Signal(&'static str),
    /// The terminal went away (its input ended or could not be read any more).
    TerminalLost(String),
}

impl Exit {
    /// What the audit log says ended an operation that was still running.
    pub fn reason(&self) -> String {
        match self {
            Exit::Quit => "the cockpit was quit".into(),
            Exit::Switch(c) => format!("the cockpit switched to context {c}"),
            Exit::Signal(s) => format!("the cockpit received {s}"),
            Exit::TerminalLost(why) => format!("the cockpit lost its terminal ({why})"),
        }
    }
}

/// A batch of one cluster's deltas, by the cluster's index in the app (see
/// [`App::add_cluster`]); `None`: that cluster's feed stopped.
pub type Tagged = (usize, Option<Batch>);

/// Forwards cluster `i`'s feed into the cockpit's one stream, and says when it stops.
pub fn forward(i: usize, mut from: mpsc::Receiver<Batch>, to: mpsc::Sender<Tagged>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(b) = from.recv().await {
            if to.send((i, Some(b))).await.is_err() {
                return;
            }
        }
        let _ = to.send((i, None)).await;
    })
}

/// Runs the cockpit until the person quits, a context switch is asked for, or a signal
/// arrives.
/// `found`: clusters found while it runs (`--workload-clusters`), each given the next row.
pub async fn run(
    mut app: App,
    mut deltas: mpsc::Receiver<Tagged>,
    found: Option<mpsc::Receiver<crate::ui::FoundCluster>>,
    fps: u16,
) -> color_eyre::Result<Exit> {
    // ratatui::init installs a panic hook that restores the terminal before the report.
    let mut terminal = ratatui::init();
    let _guard = TerminalGuard;
    let exit = drive(&mut app, &mut terminal, &mut deltas, found, fps).await;
    // ratatui's Terminal shows the cursor again when dropped and reports a failure with
    // `eprintln!`, which panics on a terminal that hung up; show it here and, if that fails,
    // never drop it (the process is about to record its operations and exit).
    if terminal.show_cursor().is_err() {
        std::mem::forget(terminal);
    }
    exit
}

/// Gives the terminal to `kubectl ARGS` (cooked mode, main screen, no mouse) and takes it
/// back when it exits; a failure waits for Enter so its message can be read.
fn hand_off(terminal: &mut ratatui::DefaultTerminal, args: &[String]) -> std::io::Result<String> {
    use crossterm::terminal::{EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode};
    use std::io::Write;
    crossterm::execute!(stdout(), DisableMouseCapture, LeaveAlternateScreen, crossterm::cursor::Show)?;
    disable_raw_mode()?;
    // Not println!: it panics on a terminal that hung up (SSH), and nobody would read it then.
    let _ = writeln!(stdout(), "fabrik: kubectl {}", args.join(" "));
    let status = tokio::task::block_in_place(|| std::process::Command::new("kubectl").args(args).status());
    let msg = match &status {
        Ok(s) if s.success() => "back from kubectl".to_string(),
        Ok(s) => format!("kubectl exited with {}", s.code().map_or("a signal".to_string(), |c| format!("status {c}"))),
        Err(e) => format!("cannot run kubectl: {e}"),
    };
    if !matches!(&status, Ok(s) if s.success()) {
        let _ = write!(stdout(), "\nfabrik: {msg}; press Enter to return to fabrik ");
        let _ = stdout().flush();
        let mut line = String::new();
        let _ = tokio::task::block_in_place(|| std::io::stdin().read_line(&mut line));
    }
    enable_raw_mode()?;
    crossterm::execute!(
        stdout(),
        EnterAlternateScreen,
        EnableMouseCapture,
        crossterm::cursor::Hide,
        crossterm::terminal::Clear(crossterm::terminal::ClearType::All)
    )?;
    // Both buffers blank, as the screen now is, so the next frame draws every cell. (Not
    // `Terminal::clear`: it asks the terminal where the cursor is, and the answer would go
    // to the event stream that was just replaced.)
    terminal.swap_buffers();
    Ok(msg)
}

/// One cluster's batch, or the end of its feed (shown as stale, with that cluster's time).
fn apply(app: &mut App, i: usize, b: Option<Batch>) -> bool {
    match b {
        Some(b) => app.apply_to(i, b),
        None => {
            let now = app.cluster_now(i);
            let stale = FeedState::Stale { since: now, reason: "the feed stopped".into() };
            app.apply_to(i, vec![Delta::Feed { source: "feed".into(), state: stale }])
        }
    }
}

async fn drive(
    app: &mut App,
    terminal: &mut ratatui::DefaultTerminal,
    deltas: &mut mpsc::Receiver<Tagged>,
    mut found: Option<mpsc::Receiver<crate::ui::FoundCluster>>,
    fps: u16,
) -> color_eyre::Result<Exit> {
    crossterm::execute!(stdout(), EnableMouseCapture)?;
    let frame = Duration::from_millis(1000 / u64::from(fps.clamp(1, 120)));
    let mut events = EventStream::new();
    let size = terminal.size()?;
    app.resize(size.width, size.height);
    terminal.draw(|f| app.draw(f))?;
    let mut last_draw = Instant::now();
    let mut dirty = false;
    let mut feed_open = true;
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut int = signal(SignalKind::interrupt())?;
    // FABRIK_TRACE=FILE logs how long each input, batch and frame took, for latency work.
    let mut trace = std::env::var_os("FABRIK_TRACE").and_then(|p| std::fs::File::create(p).ok());
    let mut log = |what: &str, started: Instant| {
        if let Some(f) = trace.as_mut() {
            use std::io::Write;
            let _ = writeln!(f, "{what} {:.3} ms", started.elapsed().as_secs_f64() * 1000.0);
        }
    };
    loop {
        let deadline = tokio::time::Instant::from_std(last_draw + frame);
        tokio::select! {
            ev = events.next() => match ev {
                Some(Ok(Event::Key(k))) => {
                    let t = Instant::now();
                    app.handle_key(k);
                    // `Y`: to the clipboard of the terminal the person sits at (OSC 52).
                    if let Some(text) = app.ui.clipboard.take() {
                        let _ = crossterm::execute!(stdout(), crossterm::clipboard::CopyToClipboard::to_clipboard_from(text));
                    }
                    if let Some(cmd) = app.ui.handoff.take() {
                        // The old stream stops reading the terminal (its reader would take
                        // the keys meant for the child); a fresh one reads after.
                        drop(std::mem::replace(&mut events, EventStream::new()));
                        match hand_off(terminal, &cmd) {
                            Ok(msg) => app.ui.info(msg),
                            Err(e) => app.ui.error(format!("the hand-off to kubectl failed: {e}")),
                        }
                        // ctrl-c while kubectl had the terminal (aborting it, or at the Enter
                        // prompt) was meant for kubectl, not for the cockpit: a fresh listener
                        // does not see those SIGINTs.
                        int = signal(SignalKind::interrupt())?;
                    }
                    dirty = true;
                    log("key", t);
                }
                Some(Ok(Event::Mouse(m))) => { app.handle_mouse(m); dirty = true; }
                Some(Ok(Event::Resize(w, h))) => { app.resize(w, h); terminal.autoresize()?; dirty = true; }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Ok(Exit::TerminalLost(e.to_string())),
                None => return Ok(Exit::TerminalLost("its input ended".into())),
            },
            batch = deltas.recv(), if feed_open => match batch {
                Some((i, b)) => {
                    let t = Instant::now();
                    // The clock before the deltas too: an expensive view's rebuild is
                    // throttled by the time since it was built, not since the last frame.
                    app.set_clock(t);
                    let mut changed = apply(app, i, b);
                    // Whatever else is queued, for at most APPLY_BUDGET: a feed that keeps
                    // sending (a burst of events, a relist) must not hold off keys and frames;
                    // what is left is taken on the next turn of the loop.
                    while t.elapsed() < APPLY_BUDGET {
                        let Ok((i, b)) = deltas.try_recv() else { break };
                        changed |= apply(app, i, b);
                    }
                    dirty |= changed;
                    log("batch", t);
                }
                None => feed_open = false,
            },
            f = async { found.as_mut()?.recv().await }, if found.is_some() => match f {
                Some(f) => { app.found_cluster(f); dirty = true; }
                None => found = None,
            },
            _ = tokio::time::sleep_until(deadline), if dirty => {
                let t = Instant::now();
                app.set_clock(t);
                terminal.draw(|f| app.draw(f))?;
                log("draw", t);
                last_draw = Instant::now();
                dirty = false;
            }
            _ = term.recv() => return Ok(Exit::Signal("SIGTERM")),
            _ = hup.recv() => return Ok(Exit::Signal("SIGHUP")),
            _ = int.recv() => return Ok(Exit::Signal("SIGINT")),
        }
        if app.ui.exit.quit {
            break;
        }
    }
    Ok(match app.ui.exit.switch_context.take() {
        Some(c) => Exit::Switch(c),
        None => Exit::Quit,
    })
}
