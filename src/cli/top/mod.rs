//! `binky top`: every world and its services in a terminal, refreshed live, with a log pane
//! for the selected service and keys for up, down and reload (in the spirit of binky 0.1.2's
//! `binky dashboard`). `binky dashboard --tui` is the same view.
//!
//! # Guarantees
//! - It only reads the store, as `binky status` does ([`crate::view::world`]); the keys that
//!   change a world run `binky up|down|reload NAME --no-wait` ([`action`]), so they write
//!   desired state through exactly the CLI's path, admission and refusals included.
//! - The table is read again at most once a second, and only when the store changed
//!   (SQLite's `data_version`) or five seconds passed; a log pane follows its file four
//!   times a second. The screen is redrawn by difference: over ssh, an idle screen sends
//!   next to nothing.
//! - The terminal is given back (raw mode off, main screen, cursor shown) when it quits, on
//!   SIGTERM, SIGINT or SIGHUP, and on a panic.
//! - Service output is drawn without its escape sequences ([`text::clean`]): a log cannot
//!   move the cursor or clear the screen.
//!
//! # Caveats
//! - `u` runs `binky up` from the world's directory with the environment `binky top` was
//!   started with, which becomes the world's, as for `binky up` typed in that shell.

mod action;
mod app;
mod model;
mod render;
mod tail;
mod text;

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::{cursor, event, execute, terminal};
use ratatui::Terminal;
use tokio::sync::mpsc;

use super::context::{Ctx, Failure};
use super::exit;
use app::{App, Command, Daemon};

/// How often the loop wakes: to look at the store, and to follow the log pane.
const TICK: Duration = Duration::from_millis(250);
/// The table is read again at most this often.
const MIN_REFRESH: Duration = Duration::from_secs(1);
/// … and at least this often (ages, the daemon's uptime), store changes or not.
const MAX_REFRESH: Duration = Duration::from_secs(5);

/// `binky top` (and `binky dashboard --tui`).
pub async fn run() -> Result<i32, Failure> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(Failure::usage(
            "binky top draws on a terminal, and its input or output is not one; run it in a \
             terminal (over ssh: `ssh -t`), or use `binky status` (`--json` for scripts)",
        ));
    }
    let ctx = Ctx::open()?;
    let exe = std::env::current_exe().map_err(|e| {
        Failure::failed(format!(
            "cannot find the binky binary to run commands with: {e}"
        ))
    })?;
    let screen =
        Screen::enter().map_err(|e| Failure::failed(format!("cannot set up the terminal: {e}")))?;
    let (keys, reader) = Keys::start();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel();
    let mut app = App::new();
    let outcome = run_loop(&ctx, &exe, &screen, &mut app, keys, &done_tx, &mut done_rx).await;
    reader.stop();
    drop(screen);
    // A command still running writes its desired state in a moment: let it, so that a key
    // pressed just before `q` is not lost (they run with --no-wait).
    let until = Instant::now() + Duration::from_secs(15);
    while app.running > 0 {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, done_rx.recv()).await {
            Ok(Some(done)) => {
                if !done.ok {
                    eprintln!("binky: {}: {}", done.command, done.said);
                }
                app.running -= 1;
            }
            _ => break,
        }
    }
    outcome.map(|()| exit::OK)
}

async fn run_loop(
    ctx: &Ctx,
    exe: &std::path::Path,
    screen: &Screen,
    app: &mut App,
    mut keys: mpsc::UnboundedReceiver<std::io::Result<event::Event>>,
    done_tx: &mpsc::UnboundedSender<action::Done>,
    done_rx: &mut mpsc::UnboundedReceiver<action::Done>,
) -> Result<(), Failure> {
    use binky_platform::signal::{Heard, Watch};
    // Asked to stop, its terminal gone, or interrupted (Ctrl-C is a key in raw mode; this
    // is a SIGINT sent by `kill`): the terminal is given back on the way out.
    let mut stops = Watch::new(&[Heard::Terminate, Heard::Hangup, Heard::Interrupt])
        .map_err(|e| Failure::failed(format!("cannot watch signals: {e}")))?;
    let mut terminal = screen.terminal()?;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seen_version = None::<i64>;
    let mut force = true;
    // Drawn again only when something changed: an idle screen costs next to no CPU.
    let mut dirty = true;
    loop {
        // The table: on a change of the store, at most once a second.
        let due = app.read_at.is_none_or(|t| t.elapsed() >= MIN_REFRESH);
        let stale = app.read_at.is_none_or(|t| t.elapsed() >= MAX_REFRESH);
        if force || due {
            let version = ctx.store.read(binky_controllers::store::data_version)?;
            if force || stale || seen_version != Some(version) {
                seen_version = Some(version);
                refresh(ctx, app).await?;
                force = false;
                dirty = true;
            }
        }
        dirty |= app.follow(ctx)?;
        if dirty {
            terminal
                .draw(|f| render::draw(f, app))
                .map_err(|e| Failure::failed(format!("cannot draw on the terminal: {e}")))?;
            dirty = false;
        }
        tokio::select! {
            key = keys.recv() => {
                // A key, or a resize: drawn again either way.
                dirty = true;
                match key {
                    Some(Ok(event::Event::Key(k))) => match app.on_key(k) {
                        Command::Quit => return Ok(()),
                        Command::Act(verb) => {
                            if let Some(w) = app.selected_world() {
                                let args = action::args(verb, w);
                                action::start(exe.to_owned(), verb, w, done_tx.clone());
                                app.started(format!("binky {}", args[..2].join(" ")));
                            }
                        }
                        Command::Redraw => {}
                    },
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        return Err(Failure::failed(format!("cannot read the terminal: {e}")))
                    }
                    None => return Ok(()),
                }
            }
            done = done_rx.recv() => {
                if let Some(done) = done {
                    app.finished(done);
                    force = true;
                    dirty = true;
                }
            }
            _ = tick.tick() => {}
            _ = stops.next() => return Ok(()),
        }
    }
}

/// Read the board and ping the daemon.
async fn refresh(ctx: &Ctx, app: &mut App) -> Result<(), Failure> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let board = model::Board::read(ctx, now_ms)?;
    app.set_board(board);
    app.read_at = Some(Instant::now());
    let ping = crate::daemon::client::ping_within(&ctx.home, Duration::from_millis(300))
        .await
        .ok();
    app.daemon = ping.map(|r| Daemon {
        pid: r.pid.unwrap_or(0),
        uptime_secs: r.uptime_secs.unwrap_or(0),
    });
    Ok(())
}

/// The terminal while `top` owns it: raw mode, the alternate screen, no cursor. Given back on
/// drop, and by a panic hook while it is owned.
struct Screen;

/// Whether a [`Screen`] owns the terminal (what the panic hook gives back).
static OWNED: AtomicBool = AtomicBool::new(false);

impl Screen {
    fn enter() -> std::io::Result<Screen> {
        static HOOK: Once = Once::new();
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                if OWNED.swap(false, Ordering::SeqCst) {
                    restore();
                }
                previous(info);
            }));
        });
        terminal::enable_raw_mode()?;
        OWNED.store(true, Ordering::SeqCst);
        let screen = Screen;
        execute!(
            std::io::stdout(),
            terminal::EnterAlternateScreen,
            cursor::Hide
        )?;
        Ok(screen)
    }

    fn terminal(&self) -> Result<Terminal<CrosstermBackend<std::io::Stdout>>, Failure> {
        Terminal::new(CrosstermBackend::new(std::io::stdout()))
            .map_err(|e| Failure::failed(format!("cannot use the terminal: {e}")))
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        if OWNED.swap(false, Ordering::SeqCst) {
            restore();
        }
    }
}

/// Give the terminal back as it was.
fn restore() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(
        std::io::stdout(),
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
}

/// Keys (and resizes) read on a thread of their own, sent to the loop.
struct Keys {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Keys {
    fn start() -> (mpsc::UnboundedReceiver<std::io::Result<event::Event>>, Keys) {
        let (tx, rx) = mpsc::unbounded_channel();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        // Polled with a timeout so that it ends when asked: a thread left reading the
        // terminal would take the first keys typed into the shell afterwards.
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                match event::poll(Duration::from_millis(100)) {
                    Ok(false) => {}
                    Ok(true) => {
                        let ev = event::read();
                        let failed = ev.is_err();
                        if tx.send(ev).is_err() || failed {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                }
            }
        });
        (
            rx,
            Keys {
                stop,
                thread: Some(thread),
            },
        )
    }

    fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
