//! Who is asking: a person, or a process binky started for a world (a service, its setup, a
//! hook, `binky exec`, `binky verify`, what `binky mcp` runs). Person-only actions — approving
//! commands, changing the machine's settings, signing a browser in to the dashboard — are
//! refused from the second, and need a terminal on standard input (a person's channel; the
//! dashboard is the other): an agent's own shell, which has none, is refused too.
//!
//! # How binky tells
//! - Every command binky runs for a world carries `BINKY_SPAWNED_IN=<project>/<world>` in its
//!   environment (`binky env` never hands it out);
//! - and each of the caller's ancestors is looked at: one carrying that mark (or a service's
//!   spawn token) in the environment it started with, or one that is `binky exec`,
//!   `binky verify`, `binky mcp` or the daemon, makes the caller one of binky's. So
//!   `env -u BINKY_SPAWNED_IN binky approve …` run through `binky exec` is still refused.
//!
//! # Caveats
//! Within one Unix user this is a guard against an agent following its tools, not against
//! one set on escaping it: a process that drops the mark *and* leaves its ancestry (a double
//! fork reparents it to init) is not told apart from a person's shell, and it could edit
//! binky's files in `$BINKY_HOME` directly. docs/security.md says what binky promises.

use crate::supervisor::procfs;

/// The environment variable every command binky runs for a world carries.
pub const MARK: &str = binky_controllers::env::SPAWNED_IN;

/// `binky` subcommands whose descendants are binky's, not a person's.
const BINKY_RUNNERS: &[&str] = &["exec", "verify", "mcp", "daemon", "__scrub"];

/// Why this process counts as one binky started for a world, if it does: the world, or
/// the binky command it runs under.
pub fn started_by_binky() -> Option<String> {
    if let Ok(world) = std::env::var(MARK) {
        return Some(format!("it runs in world {world}"));
    }
    started_above(std::process::id())
}

/// Why process `pid` (a caller on the daemon's socket) counts as one binky started, if it
/// does: what [`started_by_binky`] asks of this process, asked of that one from outside.
pub fn pid_started_by_binky(pid: u32) -> Option<String> {
    marked(pid).or_else(|| started_above(pid))
}

/// Why one of `pid`'s ancestors makes it binky's, if one does.
fn started_above(mut pid: u32) -> Option<String> {
    for _ in 0..64 {
        let parent = procfs::stat(pid)?.ppid;
        if parent <= 1 {
            return None;
        }
        if let Some(why) = marked(parent) {
            return Some(why);
        }
        pid = parent;
    }
    None
}

/// Why `pid` itself is binky's: the world's mark or a service's spawn token in the
/// environment it started with, or it is one of [`BINKY_RUNNERS`].
fn marked(pid: u32) -> Option<String> {
    if let Some(world) = procfs::environ_var(pid, MARK) {
        return Some(format!("it runs in world {world}"));
    }
    if procfs::environ_var(pid, crate::supervisor::TOKEN_VAR).is_some() {
        return Some("it runs under a service binky started".into());
    }
    binky_runner(pid).map(|cmd| format!("it runs under `binky {cmd}`"))
}

/// The subcommand of `pid` when it is binky running one of [`BINKY_RUNNERS`].
fn binky_runner(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let mut args = raw.split(|b| *b == 0).map(String::from_utf8_lossy);
    let exe = args.next()?;
    let is_binky = std::path::Path::new(exe.as_ref())
        .file_name()
        .is_some_and(|n| n == "binky");
    if !is_binky {
        return None;
    }
    let sub = args.next()?.into_owned();
    BINKY_RUNNERS.contains(&sub.as_str()).then_some(sub)
}

/// Refuse `what` (a person-only action) when binky started this process: the message says
/// why and what to do instead.
pub fn refuse_unless_person(what: &str) -> Result<(), String> {
    refusal(what, started_by_binky())
}

/// The refusal of `what` for a caller binky started (`why`), if it is one.
pub fn refusal(what: &str, why: Option<String>) -> Result<(), String> {
    match why {
        None => Ok(()),
        Some(why) => Err(format!(
            "{what} is a person's to do, and this was asked by a process binky started ({why}); ask a person to run it in their own terminal, or to use the dashboard (`binky dashboard`)"
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
