//! A terminal for the commands a person runs: `binky approve`, `binky settings KEY=VALUE`,
//! `binky reserve` (which writes settings) and `binky dashboard` refuse a caller whose
//! standard input is not one (an agent's shell, a pipe), so the tests and benchmarks that
//! act as the person give them a pseudo-terminal.

use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};

/// The binky subcommands that need a person at a terminal.
pub const PERSON_ONLY: &[&str] = &["approve", "settings", "reserve", "dashboard"];

/// When `args` is a person-only binky command, give `cmd` a pseudo-terminal as its standard
/// input and answer the terminal's other end, which the caller keeps until the command has
/// ended (nothing is ever typed into it: the command reads end of file).
pub fn for_person(cmd: &mut Command, args: &[&str]) -> Option<OwnedFd> {
    if !args.first().is_some_and(|a| PERSON_ONLY.contains(a)) {
        return None;
    }
    let pty = nix::pty::openpty(None, None).expect("a pseudo-terminal (/dev/ptmx)");
    cmd.stdin(Stdio::from(pty.slave));
    Some(pty.master)
}
