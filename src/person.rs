//! Who is asking: a person, or a process binky started for a world (a service, its setup, a
//! hook, `binky exec`, `binky verify`, what `binky mcp` runs). Person-only actions — every
//! one that reaches beyond the caller's own world (`crate::cli::guard` lists them):
//! approving commands, the machine's settings, the dashboard's sign-in, the shared servers,
//! the daemon, the trust store — are refused from the second; some also need a terminal on
//! standard input (a person's channel; the dashboard is the other), so an agent's own shell,
//! which has none, is refused those too.
//!
//! # How binky tells
//! - Every command binky runs for a world carries `BINKY_SPAWNED_IN=<project>/<world>` in its
//!   environment (`binky env` never hands it out);
//! - and each of the caller's ancestors is looked at, nearest first: one carrying that mark
//!   (or a service's spawn token) in the environment it started with, or one that is
//!   `binky exec`, `binky verify`, `binky mcp` or the daemon (`binky daemon run`), makes the
//!   caller one of binky's ([`Origin`]). So `env -u BINKY_SPAWNED_IN binky approve …` run
//!   through `binky exec` is still refused.
//!
//! # Caveats
//! Within one Unix user this is a guard against an agent following its tools, not against
//! one set on escaping it: a process that drops the mark *and* leaves its ancestry (a double
//! fork outside `binky exec` reparents it to init) is not told apart from a person's shell,
//! and it could edit binky's files in `$BINKY_HOME` directly. docs/security.md says what
//! binky promises.

use binky_platform::proc as procfs;

/// The environment variable every command binky runs for a world carries.
pub const MARK: &str = binky_controllers::env::SPAWNED_IN;

/// `binky` subcommands whose descendants are binky's, not a person's: `daemon` only as
/// `daemon run` (the daemon itself), so the daemon a person's `binky daemon start` spawns
/// is a person's, as one their `binky up` spawns is.
const BINKY_RUNNERS: &[&str] = &["exec", "verify", "mcp", "daemon", "__scrub"];

/// Who a process is, as binky tells: a person's, what `binky mcp` runs for its own tools,
/// or a process of a world (one binky started for a world, or below `binky exec`,
/// `binky verify` or the daemon).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Nothing of binky's in its environment or among its ancestors.
    Person,
    /// Below `binky mcp` with no world's process between: a tool's own command.
    Mcp,
    /// A process of a world.
    World {
        /// Why binky tells (`it runs in world p/w`).
        why: String,
        /// The world, `project/name`, when its mark tells (a process that dropped it, below
        /// `binky exec`, is a world's all the same, of a world binky cannot name).
        world: Option<String>,
    },
}

impl Origin {
    /// Why the process counts as one binky started, unless it is a person's.
    pub fn why(self) -> Option<String> {
        match self {
            Origin::Person => None,
            Origin::Mcp => Some("it runs under `binky mcp`".into()),
            Origin::World { why, .. } => Some(why),
        }
    }

    /// The project of the world this process is one of, when it is a world's and its mark
    /// names it.
    pub fn project(&self) -> Option<&str> {
        match self {
            Origin::World { world: Some(w), .. } => w.split('/').next(),
            _ => None,
        }
    }

    fn of_world(world: String) -> Origin {
        Origin::World {
            why: format!("it runs in world {world}"),
            world: Some(world),
        }
    }

    fn below(why: String) -> Origin {
        Origin::World { why, world: None }
    }
}

/// Who this process is: its own environment's mark first, then its ancestors, nearest
/// first (the nearest one binky's decides).
pub fn origin() -> Origin {
    if let Ok(world) = std::env::var(MARK) {
        return Origin::of_world(world);
    }
    origin_above(std::process::id())
}

/// Why this process counts as one binky started for a world, if it does: the world, or
/// the binky command it runs under.
pub fn started_by_binky() -> Option<String> {
    origin().why()
}

/// Why process `pid` (a caller on the daemon's socket) counts as one binky started, if it
/// does: what [`started_by_binky`] asks of this process, asked of that one from outside.
pub fn pid_started_by_binky(pid: u32) -> Option<String> {
    match marked(pid) {
        Some(origin) => origin.why(),
        None => origin_above(pid).why(),
    }
}

/// Who `pid` is by its nearest ancestor that is binky's, if one is.
fn origin_above(mut pid: u32) -> Origin {
    for _ in 0..64 {
        let Some(parent) = procfs::stat(pid).map(|s| s.ppid) else {
            return Origin::Person;
        };
        if parent <= 1 {
            return Origin::Person;
        }
        if let Some(origin) = marked(parent) {
            return origin;
        }
        pid = parent;
    }
    Origin::Person
}

/// Who `pid` itself is, when it is binky's: the world's mark or a service's spawn token in
/// the environment it started with, or it is one of [`BINKY_RUNNERS`].
fn marked(pid: u32) -> Option<Origin> {
    if let Some(world) = procfs::environ_var(pid, MARK) {
        return Some(Origin::of_world(world));
    }
    if procfs::environ_var(pid, crate::supervisor::TOKEN_VAR).is_some() {
        return Some(Origin::below(
            "it runs under a service binky started".into(),
        ));
    }
    match binky_runner(pid)?.as_str() {
        "mcp" => Some(Origin::Mcp),
        cmd => Some(Origin::below(format!("it runs under `binky {cmd}`"))),
    }
}

/// The subcommand of `pid` when it is binky running one of [`BINKY_RUNNERS`].
fn binky_runner(pid: u32) -> Option<String> {
    let cmdline = binky_platform::process::command_line(pid)?;
    let mut args = cmdline.iter().map(String::as_str);
    let exe = args.next()?;
    let is_binky = std::path::Path::new(exe)
        .file_name()
        .is_some_and(|n| n == "binky");
    if !is_binky {
        return None;
    }
    let sub = args.next()?.to_owned();
    if sub == "daemon" && args.next() != Some("run") {
        return None;
    }
    BINKY_RUNNERS.contains(&sub.as_str()).then_some(sub)
}

/// Who may do a person-only action instead, said at the end of its refusal: a person in
/// their own terminal, or the dashboard, whose buttons do the same.
pub const IN_A_TERMINAL_OR_THE_DASHBOARD: &str =
    "ask a person to run it in their own terminal, or to use the dashboard (`binky dashboard`)";

/// Refuse `what` (a person-only action) when binky started this process: the message says
/// why and who may do it instead (`instead`).
pub fn refuse_unless_person(what: &str, instead: &str) -> Result<(), String> {
    refusal(what, instead, started_by_binky())
}

/// The refusal of `what` for a caller binky started (`why`), if it is one, ending with who
/// may do it (`instead`).
pub fn refusal(what: &str, instead: &str, why: Option<String>) -> Result<(), String> {
    match why {
        None => Ok(()),
        Some(why) => Err(format!(
            "{what} is a person's to do, and this was asked by a process binky started ({why}); {instead}"
        )),
    }
}

/// Refuse `what` unless standard input is a terminal — a person's channel, beside the
/// dashboard (a shell an agent runs commands through has none). Asked after
/// [`refuse_unless_person`]: a person-only action needs both.
pub fn require_terminal(what: &str) -> Result<(), String> {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        return Ok(());
    }
    Err(format!(
        "{what} needs a person at a terminal, and standard input is not one (an agent's shell, a script, a pipe); run it yourself in a terminal, or use the dashboard (`binky dashboard`, run in a terminal, signs a browser in)"
    ))
}
