//! `binky top`'s state: the board, the selected line, the log pane, and what the keys do.
//! Kept apart from the terminal so that the keys can be tested without one.

use std::time::Instant;

use binky_controllers::store;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::super::context::{Ctx, Failure};
use super::action::{Done, Verb};
use super::model::{Board, Line, Target};
use super::tail::Tail;
use super::text;

/// Lines of history a pane keeps.
const KEEP: usize = 500;

/// What the log pane shows.
pub(super) enum Pane {
    /// A service's output.
    Log { target: Target, tail: Tail },
    /// A world's events (what binky did), newest last.
    Events {
        target: Target,
        lines: Vec<String>,
        last_id: i64,
    },
    /// A service without a process: nothing to follow.
    Nothing { target: Target, why: String },
}

impl Pane {
    fn target(&self) -> &Target {
        match self {
            Pane::Log { target, .. }
            | Pane::Events { target, .. }
            | Pane::Nothing { target, .. } => target,
        }
    }
}

/// What a key asks of the loop.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Command {
    /// Nothing beyond drawing again.
    Redraw,
    /// Leave.
    Quit,
    /// Run `binky VERB` for the selected world.
    Act(Verb),
}

/// The daemon as its ping answered.
#[derive(Clone, Copy)]
pub(super) struct Daemon {
    pub pid: u32,
    pub uptime_secs: u64,
}

/// The state of the screen.
pub(super) struct App {
    pub board: Board,
    /// Index in `board.lines` of the selected line (never a project heading, unless there is
    /// nothing else).
    pub selected: usize,
    /// What the selected line stands for: kept across refreshes as lines come and go.
    target: Option<Target>,
    /// The log pane, when open.
    pub pane: Option<Pane>,
    pane_wanted: bool,
    pub help: bool,
    /// The last command's outcome: (ok, text).
    pub message: Option<(bool, String)>,
    /// Commands started and not finished.
    pub running: usize,
    /// `None`: not running.
    pub daemon: Option<Daemon>,
    /// When the board was read.
    pub read_at: Option<Instant>,
    /// Rows the table showed last time (for page up/down).
    pub page: usize,
}

impl App {
    pub fn new() -> App {
        App {
            board: Board::default(),
            selected: 0,
            target: None,
            pane: None,
            pane_wanted: false,
            help: false,
            message: None,
            running: 0,
            daemon: None,
            read_at: None,
            page: 10,
        }
    }

    /// Take a newly read board, keeping the selection on the same world or service.
    pub fn set_board(&mut self, board: Board) {
        self.board = board;
        let found = self.target.as_ref().and_then(|t| self.board.index_of(t));
        match found {
            Some(i) => self.selected = i,
            None => {
                // It went (removed, or a service no longer selected): the nearest line.
                self.selected = self.selected.min(self.board.lines.len().saturating_sub(1));
                self.step(0);
            }
        }
        self.target = self
            .board
            .lines
            .get(self.selected)
            .and_then(|l| l.target().cloned());
    }

    /// The selected line's target.
    #[cfg(test)]
    pub fn target(&self) -> Option<&Target> {
        self.target.as_ref()
    }

    /// The world line of the selection (a service's: its world's).
    pub fn selected_world(&self) -> Option<&super::model::WorldLine> {
        let t = self.target.as_ref()?;
        self.board.lines.iter().find_map(|l| match l {
            Line::World(w) if w.target.project == t.project && w.target.world == t.world => Some(w),
            _ => None,
        })
    }

    /// Move the selection `delta` selectable lines (0: onto the nearest selectable line).
    fn step(&mut self, delta: isize) {
        let n = self.board.lines.len();
        if n == 0 {
            self.selected = 0;
            return;
        }
        let selectable = |i: usize| self.board.lines[i].target().is_some();
        let mut i = self.selected.min(n - 1);
        if delta == 0 {
            if selectable(i) {
                return;
            }
            // Forward first (a heading is followed by its worlds), else back.
            if let Some(j) = (i..n).find(|&j| selectable(j)) {
                self.selected = j;
            } else if let Some(j) = (0..i).rev().find(|&j| selectable(j)) {
                self.selected = j;
            }
            return;
        }
        let mut left = delta.unsigned_abs();
        while left > 0 {
            let next = if delta > 0 {
                (i + 1..n).find(|&j| selectable(j))
            } else {
                (0..i).rev().find(|&j| selectable(j))
            };
            match next {
                Some(j) => i = j,
                None => break,
            }
            left -= 1;
        }
        self.selected = i;
    }

    fn moved(&mut self, delta: isize) {
        self.step(delta);
        self.target = self
            .board
            .lines
            .get(self.selected)
            .and_then(|l| l.target().cloned());
    }

    /// Handle one key.
    pub fn on_key(&mut self, key: KeyEvent) -> Command {
        if key.kind != KeyEventKind::Press {
            return Command::Redraw;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Command::Quit;
        }
        if self.help {
            // Any key closes the help (q still quits).
            self.help = false;
            return if key.code == KeyCode::Char('q') {
                Command::Quit
            } else {
                Command::Redraw
            };
        }
        match key.code {
            KeyCode::Char('q') => return Command::Quit,
            KeyCode::Char('?') | KeyCode::Char('h') | KeyCode::F(1) => self.help = true,
            KeyCode::Up | KeyCode::Char('k') => self.moved(-1),
            KeyCode::Down | KeyCode::Char('j') => self.moved(1),
            KeyCode::PageUp => self.moved(-(self.page.max(1) as isize)),
            KeyCode::PageDown => self.moved(self.page.max(1) as isize),
            KeyCode::Home | KeyCode::Char('g') => self.moved(-(self.board.lines.len() as isize)),
            KeyCode::End | KeyCode::Char('G') => self.moved(self.board.lines.len() as isize),
            KeyCode::Enter | KeyCode::Tab => self.pane_wanted = !self.pane_wanted,
            KeyCode::Esc => {
                self.pane_wanted = false;
                self.message = None;
            }
            KeyCode::Char('u') => return self.act(Verb::Up),
            KeyCode::Char('d') => return self.act(Verb::Down),
            KeyCode::Char('r') => return self.act(Verb::Reload),
            _ => {}
        }
        Command::Redraw
    }

    fn act(&mut self, verb: Verb) -> Command {
        match self.selected_world() {
            Some(_) => Command::Act(verb),
            None => {
                self.message = Some((false, "no world selected".into()));
                Command::Redraw
            }
        }
    }

    /// A command was started for `world`.
    pub fn started(&mut self, command: String) {
        self.running += 1;
        self.message = Some((true, format!("{command} …")));
    }

    /// A command finished.
    pub fn finished(&mut self, done: Done) {
        self.running = self.running.saturating_sub(1);
        let said = if done.said.is_empty() {
            if done.ok { "done" } else { "failed" }.to_owned()
        } else {
            done.said
        };
        self.message = Some((done.ok, text::clean(&format!("{}: {said}", done.command))));
    }

    /// Open, close, switch or follow the log pane to match the selection; whether it changed.
    pub fn follow(&mut self, ctx: &Ctx) -> Result<bool, Failure> {
        if !self.pane_wanted {
            return Ok(self.pane.take().is_some());
        }
        let Some(target) = self.target.clone() else {
            return Ok(self.pane.take().is_some());
        };
        if self.pane.as_ref().is_some_and(|p| p.target() != &target) {
            self.pane = None;
        }
        if self.pane.is_none() {
            self.pane = Some(self.open_pane(ctx, target)?);
            return Ok(true);
        }
        Ok(match &mut self.pane {
            Some(Pane::Log { tail, .. }) => tail.poll(),
            Some(Pane::Events {
                target,
                lines,
                last_id,
            }) => {
                let new = ctx
                    .store
                    .read(|c| store::events(c, &target.project, &target.world, *last_id, KEEP))?;
                let came = !new.is_empty();
                for e in new {
                    *last_id = e.id;
                    lines.push(event_line(&e));
                }
                let over = lines.len().saturating_sub(KEEP);
                lines.drain(..over);
                came
            }
            _ => false,
        })
    }

    fn open_pane(&self, ctx: &Ctx, target: Target) -> Result<Pane, Failure> {
        if target.service.is_none() {
            let events = ctx
                .store
                .read(|c| store::events(c, &target.project, &target.world, 0, KEEP))?;
            return Ok(Pane::Events {
                last_id: events.last().map(|e| e.id).unwrap_or(0),
                lines: events.iter().map(event_line).collect(),
                target,
            });
        }
        let log = self.board.lines.iter().find_map(|l| match l {
            Line::Service(s) if s.target == target => Some(s.log.clone()),
            _ => None,
        });
        Ok(match log.flatten() {
            Some(path) => Pane::Log {
                tail: Tail::open(path, KEEP),
                target,
            },
            None => Pane::Nothing {
                why: format!(
                    "{} is an adapter service (a slice of a server): it has no process and no log of its own; `binky events {}` shows what binky did for it",
                    target.service.as_deref().unwrap_or_default(),
                    target.world
                ),
                target,
            },
        })
    }
}

fn event_line(e: &store::EventRow) -> String {
    let clock = super::super::events::clock(e.at);
    let time = clock.split(' ').nth(1).unwrap_or(&clock);
    text::clean(&format!(
        "{time}  {}",
        e.message.lines().next().unwrap_or_default()
    ))
}

#[cfg(test)]
mod tests {
    use super::super::model::{ServiceLine, WorldLine};
    use super::*;
    use std::path::PathBuf;

    fn target(world: &str, service: Option<&str>) -> Target {
        Target {
            project: "acme".into(),
            world: world.into(),
            service: service.map(str::to_owned),
        }
    }

    fn world(name: &str) -> Line {
        Line::World(WorldLine {
            target: target(name, None),
            state: "ready".into(),
            usage: None,
            restarts: 0,
            info: String::new(),
            attention: false,
            dir: PathBuf::from("/tmp"),
            group: None,
        })
    }

    fn service(world: &str, name: &str) -> Line {
        Line::Service(ServiceLine {
            target: target(world, Some(name)),
            state: "running".into(),
            shared: false,
            usage: None,
            ports: String::new(),
            pid: None,
            restarts: 0,
            info: String::new(),
            log: None,
        })
    }

    fn board(worlds: &[&str]) -> Board {
        let mut lines = vec![Line::Project {
            name: "acme".into(),
            repo: PathBuf::from("/repo"),
        }];
        for w in worlds {
            lines.push(world(w));
            lines.push(service(w, "api"));
        }
        Board {
            lines,
            counts: vec![("ready".into(), worlds.len())],
            worlds: worlds.len(),
        }
    }

    fn press(app: &mut App, code: KeyCode) -> Command {
        app.on_key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    #[test]
    fn the_selection_skips_headings_and_stays_on_its_world_across_refreshes() {
        let mut app = App::new();
        app.set_board(board(&["a", "b"]));
        assert_eq!(app.target(), Some(&target("a", None)));
        press(&mut app, KeyCode::Down);
        press(&mut app, KeyCode::Char('j'));
        assert_eq!(app.target(), Some(&target("b", None)));
        press(&mut app, KeyCode::Char('k'));
        press(&mut app, KeyCode::Up);
        press(&mut app, KeyCode::Up);
        assert_eq!(
            app.target(),
            Some(&target("a", None)),
            "never onto the heading"
        );
        press(&mut app, KeyCode::End);
        assert_eq!(app.target(), Some(&target("b", Some("api"))));
        // A world appears before it: the selection stays on b's api.
        app.set_board(board(&["0", "a", "b"]));
        assert_eq!(app.target(), Some(&target("b", Some("api"))));
        assert_eq!(app.selected, 6);
        // b goes: the nearest line is selected.
        app.set_board(board(&["0", "a"]));
        assert_eq!(app.target(), Some(&target("a", Some("api"))));
        press(&mut app, KeyCode::Home);
        assert_eq!(app.target(), Some(&target("0", None)));
    }

    #[test]
    fn keys_act_on_the_selected_world_and_q_quits() {
        let mut app = App::new();
        assert_eq!(
            press(&mut app, KeyCode::Char('d')),
            Command::Redraw,
            "nothing to act on"
        );
        assert!(app.message.as_ref().is_some_and(|(ok, _)| !ok));
        app.set_board(board(&["a"]));
        press(&mut app, KeyCode::Down);
        assert_eq!(app.target(), Some(&target("a", Some("api"))));
        assert_eq!(
            press(&mut app, KeyCode::Char('d')),
            Command::Act(Verb::Down)
        );
        assert_eq!(
            app.selected_world().map(|w| w.target.world.as_str()),
            Some("a")
        );
        assert_eq!(press(&mut app, KeyCode::Char('u')), Command::Act(Verb::Up));
        assert_eq!(
            press(&mut app, KeyCode::Char('r')),
            Command::Act(Verb::Reload)
        );
        press(&mut app, KeyCode::Char('?'));
        assert!(app.help);
        assert_eq!(
            press(&mut app, KeyCode::Char('d')),
            Command::Redraw,
            "closes help only"
        );
        assert!(!app.help);
        assert_eq!(press(&mut app, KeyCode::Char('q')), Command::Quit);
        assert_eq!(
            app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Command::Quit
        );
    }
}
