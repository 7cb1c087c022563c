//! The daemon is the same clean process whoever starts it: a person's command, a tool of
//! `binky mcp`, or a process in a world (`binky up` in a service or under `binky exec`,
//! which starts the daemon on demand like any command).
//!
//! # Guarantees
//! - Its environment holds no variable of one command or one world: never the world's mark
//!   (`BINKY_SPAWNED_IN`), a service's spawn token, a run's failure-report token, the log
//!   scrubber's values, nor the caller's shell and terminal (`crate::caller_env`).
//! - Started from a process of a world, it keeps only the session's basics
//!   ([`SESSION`], `LC_*`, and on Windows the system's own, `SystemRoot` and the like:
//!   `binky_platform::user::SYSTEM_VARIABLES`) and binky's own settings ([`SETTINGS`]):
//!   none of the world's
//!   variables (its ports and URLs, its services' `env`, its secrets), nor what an agent set
//!   in its shell (a `PATH` of its own is the exception: the session's basics are the
//!   caller's). Started by a person or a tool of `binky mcp`, it keeps the rest of the
//!   caller's environment (`BINKY_SECRET_*`, a `secret_command`'s credentials, AWS's).
//! - Its working directory is `/`, it leads a session of its own (no terminal, no caller's
//!   process group), and its standard streams are not the caller's ([`super::client`]).
//! - At its start ([`this_process`]) it closes every descriptor it inherited but the three
//!   standard ones, takes every signal's default action back (but `SIGPIPE`, ignored: a
//!   client hanging up never kills it), blocks none, and masks group and other write bits
//!   in its umask: what a caller set (`trap '' TERM`, a file left open, `umask 000`) reaches
//!   neither it nor the services it starts. This holds for `binky daemon run` started by
//!   hand too.
//!
//! # Caveats
//! The daemon's resource limits, niceness and cgroup are its starter's: an unprivileged
//! process cannot raise a hard limit or its priority again. And its place in the process
//! tree is its starter's until that ends (under `binky exec`, which is the subreaper of what
//! it runs, the daemon stays that one's child, and is spared when it ends).

use std::ffi::OsString;

use crate::person::Origin;

/// The session's basics a daemon keeps from any caller.
pub const SESSION: &[&str] = &[
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "PATH",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "DBUS_SESSION_BUS_ADDRESS",
];

/// binky's own settings the daemon reads from its environment (besides the adapters'
/// server URLs, [`crate::adapters::admin_url_vars`]).
pub const SETTINGS: &[&str] = &[
    "BINKY_HOME",
    "BINKY_LOG",
    "BINKY_WORKTREE_ROOT",
    "BINKY_WATCH_LIMIT",
    "BINKY_SECRET_TIMEOUT_MS",
    crate::adapters::external::TIMEOUT_VAR,
    crate::supervisor::resources::CGROUP_ROOT_VAR,
    crate::supervisor::resources::SYSTEMD_RUN_VAR,
];

/// Variables of one command, never a daemon's.
const ONE_COMMANDS: &[&str] = &[crate::failure::report::VAR, crate::scrub::VALUES_VAR];

/// Whether the daemon keeps the caller's variable `name`, when the caller is `origin`.
pub fn keeps(name: &str, origin: &Origin) -> bool {
    if ONE_COMMANDS.contains(&name) || crate::caller_env::of_the_shell_or_one_command(name) {
        return false;
    }
    match origin {
        Origin::Person | Origin::Mcp => true,
        Origin::World { .. } => {
            let named = |list: &[&str]| {
                list.iter()
                    .any(|v| binky_platform::user::same_variable(v, name))
            };
            named(SESSION)
                || named(binky_platform::user::SYSTEM_VARIABLES)
                || name.starts_with("LC_")
                || named(SETTINGS)
                || crate::adapters::admin_url_vars().any(|var| var == name)
        }
    }
}

/// The daemon's environment from the caller's `vars`, when the caller is `origin`.
pub fn environment(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    origin: &Origin,
) -> Vec<(OsString, OsString)> {
    vars.into_iter()
        .filter(|(k, _)| k.to_str().is_some_and(|k| keeps(k, origin)))
        .collect()
}

/// Make this process (the daemon, at its start, while it has one thread) the clean daemon
/// the module promises: its environment, descriptors, signals, umask and directory.
pub fn this_process() {
    let origin = crate::person::origin();
    let drop: Vec<OsString> = std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| !k.to_str().is_some_and(|k| keeps(k, &origin)))
        .collect();
    for k in drop {
        // Edition 2021: safe, and the daemon has one thread yet.
        std::env::remove_var(k);
    }
    binky_platform::process::close_inherited();
    binky_platform::signal::reset_all();
    // The root (of the current drive, on Windows): no directory of the caller's held.
    let _ = std::env::set_current_dir("/");
    binky_platform::process::umask_at_least(0o022);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    fn names(v: Vec<(OsString, OsString)>) -> Vec<String> {
        v.into_iter()
            .map(|(k, _)| k.into_string().unwrap_or_default())
            .collect()
    }

    #[test]
    fn a_daemon_started_in_a_world_keeps_none_of_the_worlds_variables() {
        let caller = vars(&[
            ("HOME", "/home/p"),
            ("PATH", "/usr/bin"),
            ("LC_ALL", "C.UTF-8"),
            ("BINKY_HOME", "/home/p/.binky"),
            ("BINKY_DB_ADMIN_URL", "postgres://admin@h/db"),
            ("BINKY_CGROUP_ROOT", "/cgroups"),
            ("BINKY_SPAWNED_IN", "acme/w"),
            ("BINKY_SPAWN_TOKEN", "t"),
            ("BINKY_PROJECT", "acme"),
            ("BINKY_WORLD", "w"),
            ("BINKY_SECRET_STRIPE", "sk"),
            ("BINKY_FAILURE_REPORT", "r"),
            ("DATABASE_URL", "postgres://w@h/bk_w"),
            ("PORT", "3000"),
            ("AWS_ACCESS_KEY_ID", "k"),
            ("TERM", "xterm"),
            ("_", "/usr/bin/binky"),
        ]);
        let world = Origin::World {
            why: "it runs in world acme/w".into(),
            world: Some("acme/w".into()),
        };
        assert_eq!(
            names(environment(caller.clone(), &world)),
            [
                "HOME",
                "PATH",
                "LC_ALL",
                "BINKY_HOME",
                "BINKY_DB_ADMIN_URL",
                "BINKY_CGROUP_ROOT"
            ]
        );
        // A person's (or a tool of `binky mcp`'s) keeps their environment, never one
        // command's variables or the terminal.
        for origin in [Origin::Person, Origin::Mcp] {
            let kept = names(environment(caller.clone(), &origin));
            for gone in [
                "BINKY_SPAWNED_IN",
                "BINKY_SPAWN_TOKEN",
                "BINKY_FAILURE_REPORT",
                "TERM",
                "_",
            ] {
                assert!(!kept.iter().any(|k| k == gone), "{gone}: {kept:?}");
            }
            for kept_one in ["AWS_ACCESS_KEY_ID", "BINKY_SECRET_STRIPE", "PATH"] {
                assert!(kept.iter().any(|k| k == kept_one), "{kept_one}: {kept:?}");
            }
        }
    }

    #[test]
    fn a_daemon_started_in_a_world_keeps_what_the_system_needs_under_the_name_it_has() {
        let world = Origin::World {
            why: "it runs in world acme/w".into(),
            world: None,
        };
        // Windows writes `Path`, and a program cannot open a socket without `SystemRoot`.
        for name in binky_platform::user::SYSTEM_VARIABLES {
            assert!(keeps(name, &world), "{name}");
        }
        assert_eq!(keeps("Path", &world), cfg!(windows));
        assert!(keeps("PATH", &world));
    }
}
