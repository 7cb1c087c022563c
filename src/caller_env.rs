//! The environment a world keeps from the `binky up` that writes it.
//!
//! A world's services run with the environment of the command that last wrote the world
//! (so `PATH`, a virtualenv, `NODE_OPTIONS` or a variable named by `${env.NAME}` reach
//! them), minus what describes the caller's shell and terminal rather than the project.
//! Those differ between two terminals, or under `timeout`/`nohup`/`env` (`_`, `SHLVL`,
//! `OLDPWD`, the terminal's size and session ids): kept, a second `binky up` of a running
//! world from another shell would restart every service for a change no service can use.
//!
//! # What a world does not keep
//! - shell bookkeeping: `_`, `PWD`, `OLDPWD`, `SHLVL`, `PS1`–`PS4`, `PROMPT_COMMAND`, `HIST*`;
//! - the terminal: `TERM`, `COLORTERM`, `TERM_PROGRAM*`, `TERM_SESSION_ID`, `COLUMNS`,
//!   `LINES`, `WINDOWID`, `VTE_VERSION`, `GPG_TTY`, `TMUX`, `TMUX_PANE`, `STY`, `WINDOW`;
//! - the login session: `SSH_CLIENT`, `SSH_CONNECTION`, `SSH_TTY`, `SSH_AUTH_SOCK`,
//!   `XDG_SESSION_ID`, `XDG_VTNR`, `INVOCATION_ID`, `JOURNAL_STREAM`, `MANAGERPID`;
//! - binky's own per-command variables: `BINKY_SPAWN_TOKEN`, `BINKY_SPAWNED_IN` and
//!   `BINKY_SECRET_*` (secrets are resolved by the daemon at spawn, never stored with the
//!   world);
//! - a variable whose name or value is not UTF-8 (the store holds text): said on stderr.
//!
//! Everything else is kept; changing it and running `binky up` again restarts the services
//! (they all see the world's environment).

use std::collections::BTreeMap;
use std::ffi::OsString;

/// Variables a world never keeps (exact names).
const SHELL_AND_TERMINAL: &[&str] = &[
    "_",
    "PWD",
    "OLDPWD",
    "SHLVL",
    "PS1",
    "PS2",
    "PS3",
    "PS4",
    "PROMPT_COMMAND",
    "TERM",
    "COLORTERM",
    "TERM_SESSION_ID",
    "COLUMNS",
    "LINES",
    "WINDOWID",
    "VTE_VERSION",
    "GPG_TTY",
    "TMUX",
    "TMUX_PANE",
    "STY",
    "WINDOW",
    "SSH_CLIENT",
    "SSH_CONNECTION",
    "SSH_TTY",
    "SSH_AUTH_SOCK",
    "XDG_SESSION_ID",
    "XDG_VTNR",
    "INVOCATION_ID",
    "JOURNAL_STREAM",
    "MANAGERPID",
    crate::supervisor::TOKEN_VAR,
    crate::person::MARK,
];

/// Prefixes of variables a world never keeps.
const PREFIXES: &[&str] = &["HIST", "TERM_PROGRAM", "BINKY_SECRET_"];

/// Is `name` one of the caller's variables a world keeps?
pub fn keeps(name: &str) -> bool {
    !SHELL_AND_TERMINAL.contains(&name) && !PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Is `name` the caller's shell's, terminal's or one binky command's (what a world does not
/// keep but its secrets)? The daemon does not keep those either.
pub fn of_the_shell_or_one_command(name: &str) -> bool {
    SHELL_AND_TERMINAL.contains(&name)
        || PREFIXES
            .iter()
            .filter(|p| **p != "BINKY_SECRET_")
            .any(|p| name.starts_with(p))
}

/// The world's environment from `vars` (the caller's, as the OS gives them), and the
/// names of the variables dropped because they are not UTF-8.
pub fn world_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> (BTreeMap<String, String>, Vec<String>) {
    let mut env = BTreeMap::new();
    let mut not_utf8 = Vec::new();
    for (k, v) in vars {
        match (k.into_string(), v.into_string()) {
            (Ok(k), Ok(v)) => {
                if keeps(&k) {
                    env.insert(k, v);
                }
            }
            (Ok(k), Err(_)) => not_utf8.push(k),
            (Err(k), _) => not_utf8.push(k.to_string_lossy().into_owned()),
        }
    }
    (env, not_utf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    #[test]
    fn two_shells_of_one_project_give_the_same_world_env() {
        let a = os(&[
            ("PATH", "/usr/bin"),
            ("DATABASE_HINT", "x"),
            ("_", "/usr/bin/binky"),
            ("SHLVL", "1"),
            ("OLDPWD", "/tmp"),
            ("TERM_PROGRAM_VERSION", "3"),
            ("HISTSIZE", "10"),
            ("BINKY_SECRET_X", "s"),
        ]);
        let b = os(&[
            ("PATH", "/usr/bin"),
            ("DATABASE_HINT", "x"),
            ("_", "/usr/bin/timeout"),
            ("SHLVL", "3"),
            ("TMUX_PANE", "%1"),
            ("SSH_TTY", "/dev/pts/2"),
        ]);
        let (ea, _) = world_env(a);
        let (eb, _) = world_env(b);
        assert_eq!(ea, eb);
        assert_eq!(ea.len(), 2, "{ea:?}");
    }

    // A variable that is not Unicode: tests/integration/platform.rs (how such a value is
    // made differs per system).
}
