//! Who is asking: a person, or a process binky started for a world (a service, its setup, a
//! hook, `binky exec`, `binky verify`, what `binky mcp` runs). Person-only actions — approving
//! commands, changing the machine's settings — are refused from the second.
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
    let mut pid = std::process::id();
    for _ in 0..64 {
        let parent = procfs::stat(pid)?.ppid;
        if parent <= 1 {
            return None;
        }
        if let Some(world) = procfs::environ_var(parent, MARK) {
            return Some(format!("it runs in world {world}"));
        }
        if procfs::environ_var(parent, crate::supervisor::TOKEN_VAR).is_some() {
            return Some("it runs under a service binky started".into());
        }
        if let Some(cmd) = binky_runner(parent) {
            return Some(format!("it runs under `binky {cmd}`"));
        }
        pid = parent;
    }
    None
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
    match started_by_binky() {
        None => Ok(()),
        Some(why) => Err(format!(
            "{what} is a person's to do, and this was asked by a process binky started ({why}); ask a person to run it in their own terminal, or to use the dashboard (`binky dashboard`)"
        )),
    }
}
