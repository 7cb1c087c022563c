//! Which command lines are a person's to run, in one list asked before any command runs:
//! every action that reaches beyond the caller's own world — the servers and the daemon
//! every world shares, the machine's trust store and hosts file, the machine's settings
//! and approvals, other homes' data, an MCP client's configuration.
//!
//! # Guarantees
//! - A command line [`person_only`] names is refused from any process binky started (a
//!   world's service, a shell under `binky exec`, what `binky mcp` runs), told by
//!   [`crate::person`], before the command opens the store: nothing of it happens. The
//!   message says what it is and who may do it.
//! - Those that also need a person's channel (approving, the settings, the dashboard's
//!   sign-in link) are refused without a terminal on standard input as well.
//! - The daemon refuses the same requests on its socket to a caller binky started
//!   ([`crate::protocol::Request::persons`]), so speaking the socket directly does
//!   not get around this list.
//!
//! Two person-only actions depend on more than the command line, and are asked where that
//! is known: `binky remove` of a world no agent made (`remove.rs`), and `binky gc`'s
//! interactive confirmation (`gc.rs`).

use super::context::{person, person_at_terminal, Failure};
use super::{Command, DaemonAction};
use crate::person::IN_A_TERMINAL_OR_THE_DASHBOARD;

/// A command line that is a person's to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersonOnly {
    /// What it does, in words.
    pub what: &'static str,
    /// Who may do it instead: the refusal's last words.
    pub instead: String,
    /// Whether it needs a terminal on standard input too (a person's channel).
    pub terminal: bool,
}

impl PersonOnly {
    /// `what`, for a person to run as `line` in their own terminal.
    fn run(what: &'static str, line: &str) -> PersonOnly {
        PersonOnly {
            what,
            instead: format!("ask a person to run `{line}` in their own terminal"),
            terminal: false,
        }
    }

    /// `what`, for a person at a terminal or in the dashboard.
    fn at_terminal(what: &'static str) -> PersonOnly {
        PersonOnly {
            what,
            instead: IN_A_TERMINAL_OR_THE_DASHBOARD.to_owned(),
            terminal: true,
        }
    }
}

/// What `command` would do that is a person's to do, if anything.
pub fn person_only(command: &Command) -> Option<PersonOnly> {
    let settings = "changing the machine's settings";
    match command {
        Command::Settings { assignments, .. } if !assignments.is_empty() => {
            Some(PersonOnly::at_terminal(settings))
        }
        Command::Reserve { ram, disk } if ram.is_some() || disk.is_some() => {
            Some(PersonOnly::at_terminal(settings))
        }
        Command::Approve(a) if a.revoke.is_some() => {
            Some(PersonOnly::at_terminal("withdrawing an approval"))
        }
        Command::Approve(a)
            if a.exec.is_some() || (!a.list && (a.key.is_some() || a.all.is_some())) =>
        {
            Some(PersonOnly::at_terminal("approving commands"))
        }
        Command::Dashboard { tui: false, .. } => Some(PersonOnly::at_terminal(
            "signing a browser in to the dashboard",
        )),
        Command::Port { proxy, https } if proxy.is_some() || https.is_some() => {
            Some(PersonOnly::run(
                "moving the proxy's ports (every world's URLs)",
                "binky port …",
            ))
        }
        Command::Servers {
            action: Some(_),
            kind,
            ..
        } => Some(PersonOnly::run(
            "stopping binky's managed servers (every world's databases on them)",
            &match kind {
                Some(k) => format!("binky servers stop {k}"),
                None => "binky servers stop".to_owned(),
            },
        )),
        Command::Daemon {
            action: DaemonAction::Stop,
        } => Some(PersonOnly::run(
            "stopping the binky daemon (which runs every world)",
            "binky daemon stop",
        )),
        Command::Daemon {
            action: DaemonAction::Restart,
        } => Some(PersonOnly::run(
            "restarting the binky daemon (which runs every world)",
            "binky daemon restart",
        )),
        Command::Trust { uninstall: false } => Some(PersonOnly::run(
            "installing binky's local CA in the machine's trust store",
            "binky trust",
        )),
        Command::Trust { uninstall: true } => Some(PersonOnly::run(
            "removing binky's local CA from the machine's trust store",
            "binky trust --uninstall",
        )),
        Command::Hosts { write: true, .. } => Some(PersonOnly::run(
            "editing the machine's hosts file",
            "binky hosts --write",
        )),
        Command::Hosts { remove: true, .. } => Some(PersonOnly::run(
            "editing the machine's hosts file",
            "binky hosts --remove",
        )),
        Command::Gc { yes: true, .. } => Some(PersonOnly::run(
            "dropping orphaned slices and servers' data (which may be another home's)",
            "binky gc",
        )),
        Command::Golden { action, key, .. } if action == "rm" => Some(PersonOnly::run(
            "dropping a golden template (every world of its key is cloned from it)",
            &format!("binky golden rm {}", key.as_deref().unwrap_or("KEY")),
        )),
        Command::Mcp {
            action: Some(crate::cli::mcp::McpAction::Install { dry_run: false, .. }),
        } => Some(PersonOnly::run(
            "registering binky's MCP server in an MCP client's configuration",
            "binky mcp install …",
        )),
        _ => None,
    }
}

/// Refuse `command` when it is a person's to run ([`person_only`]) and this process is one
/// binky started (or, for those that need one, has no terminal).
pub fn refuse(command: &Command) -> Result<(), Failure> {
    let Some(p) = person_only(command) else {
        return Ok(());
    };
    if p.terminal {
        person_at_terminal(p.what, &p.instead)
    } else {
        person(p.what, &p.instead)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::Cli;

    fn of(line: &str) -> Option<PersonOnly> {
        let cli = Cli::try_parse_from(line.split_whitespace()).expect("parses");
        person_only(&cli.command)
    }

    #[test]
    fn every_action_beyond_the_callers_world_is_a_persons_and_reading_is_not() {
        for line in [
            "binky servers stop",
            "binky servers stop postgres",
            "binky daemon stop",
            "binky daemon restart",
            "binky trust",
            "binky trust --uninstall",
            "binky hosts --write",
            "binky hosts --remove",
            "binky gc --yes",
            "binky gc -y --all-servers",
            "binky golden rm abc",
            "binky mcp install --client claude",
            "binky port --proxy 8080",
            "binky settings approvals=false",
            "binky reserve --ram 10",
            "binky approve abc",
            "binky approve --all w",
            "binky approve --exec x*",
            "binky approve --revoke abc",
            "binky dashboard --no-open",
        ] {
            assert!(of(line).is_some(), "{line} is not a person's");
        }
        for line in [
            "binky servers",
            "binky servers --json",
            "binky daemon start",
            "binky daemon status",
            "binky hosts",
            "binky gc",
            "binky golden ls",
            "binky mcp install --client claude --dry-run",
            "binky mcp",
            "binky port",
            "binky settings",
            "binky reserve",
            "binky approve --list",
            "binky approve",
            "binky dashboard --tui",
            "binky up w",
            "binky status",
        ] {
            assert_eq!(of(line), None, "{line} is refused to agents");
        }
        let stop = of("binky servers stop redis").expect("a person's");
        assert!(
            stop.instead.contains("`binky servers stop redis`"),
            "{stop:?}"
        );
        assert!(!stop.terminal);
        assert!(of("binky approve abc").is_some_and(|p| p.terminal));
    }
}
