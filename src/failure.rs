//! What a command returns: its exit code, and on failure a message that names the fix and,
//! for the failures a program acts on, their [`Kind`].
//! Outside `cli` so that what the commands call (`requests`, the dashboard, `binky mcp`)
//! shares it without importing the command-line layer.
//!
//! The kind is set where the failure is made, so `binky mcp` answers an agent's tool call
//! with an error code read from it, never from the message's words (which are for people
//! and change with them). A failure `binky mcp` reads in its own process carries its kind
//! in [`Failure::kind`]; one of a binky command it ran as a child crosses over by
//! [`report`].

use binky_controllers::store::StoreError;
use serde::{Deserialize, Serialize};

/// Exit codes.
pub mod exit {
    /// Done.
    pub const OK: i32 = 0;
    /// Failed.
    pub const FAILED: i32 = 1;
    /// Bad usage or config.
    pub const USAGE: i32 = 2;
    /// Still pending when the wait ran out (EX_TEMPFAIL).
    pub const PENDING: i32 = 75;
}

/// What kind of failure it is, for a program (`binky mcp`) to act on: the cases an agent is
/// told to do something different about. A failure without one is told apart only by its
/// exit code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Kind {
    /// No world of the name asked for, where it was looked for.
    NoWorld,
    /// The name asked for is a world of each of several projects, and nothing said which.
    AmbiguousWorld {
        /// The name asked for.
        world: String,
        /// The projects that have a world of that name.
        projects: Vec<String>,
    },
    /// The world has no service of the name asked for.
    NoService,
    /// The command ran outside every git repository, and it needs one.
    NotInRepository,
    /// The world is down on purpose, so waiting for it would never end.
    Stopped,
    /// It waits until a person approves a command (approvals are on).
    Held,
    /// A person's to do, asked by a process binky started (an agent's).
    PersonOnly,
    /// The world's worktree has uncommitted changes, which `remove` does not discard
    /// unless told to.
    Dirty,
}

/// A command's failure: an exit code and a message that names the fix.
#[derive(Debug)]
pub struct Failure {
    /// Exit code.
    pub code: i32,
    /// What went wrong and what to do.
    pub message: String,
    /// What kind of failure, when it is one a program acts on.
    pub kind: Option<Kind>,
}

impl Failure {
    /// Bad usage or config (exit 2).
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            code: exit::USAGE,
            message: message.into(),
            kind: None,
        }
    }

    /// It failed (exit 1).
    pub fn failed(message: impl Into<String>) -> Failure {
        Failure {
            code: exit::FAILED,
            message: message.into(),
            kind: None,
        }
    }

    /// Not done yet, and not by this command: a person or the daemon finishes it (exit 75).
    pub fn pending(message: impl Into<String>) -> Failure {
        Failure {
            code: exit::PENDING,
            message: message.into(),
            kind: None,
        }
    }

    /// The same failure, of kind `kind`.
    pub fn kind(mut self, kind: Kind) -> Failure {
        self.kind = Some(kind);
        self
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        match e {
            StoreError::ProjectNameTaken { .. } | StoreError::NameDiffersByCase { .. } => {
                Failure::usage(e.to_string())
            }
            _ => Failure::failed(e.to_string()),
        }
    }
}

/// A failure's [`Kind`] handed from a binky command to the `binky mcp` that ran it as a
/// child, whose only other view of the failure is the text the command printed.
///
/// `binky mcp` sets [`VAR`] to a token made for that one run; the command's `main` takes
/// the variable out of its own environment before anything else ([`take_from_env`]), and on
/// a failure of a kind it writes one last line to stderr ([`write`]):
/// `{"binky_failure":{"kind":"ambiguous_world","world":"w","projects":["a","b"]},"token":"…"}`.
/// The runner takes that line off the output before anyone reads it ([`take`]).
///
/// Why a person never sees the line: only a process `binky mcp` started has the variable,
/// nothing that command starts inherits it (a `binky` inside `binky exec` prints none), and
/// none is written to a terminal. Why the token: the line is honoured only when it carries
/// the run's own, which no command `binky exec` ran could know, so output of its own (or of
/// a binky it ran) can never pass for binky's verdict.
pub mod report {
    use std::io::IsTerminal;
    use std::sync::OnceLock;

    use serde::{Deserialize, Serialize};

    use super::{Failure, Kind};

    /// The variable `binky mcp` sets for a command it runs: the run's token.
    pub const VAR: &str = "BINKY_FAILURE_REPORT";

    /// The token this process was given, if `binky mcp` runs it.
    static TOKEN: OnceLock<String> = OnceLock::new();

    /// The report line.
    #[derive(Serialize, Deserialize)]
    struct Line {
        binky_failure: Kind,
        token: String,
    }

    /// Read [`VAR`] and take it out of this process's environment, so nothing the command
    /// starts (a world's command, the daemon) inherits it. Called first in `main`, while
    /// the process has one thread.
    pub fn take_from_env() {
        let Some(token) = std::env::var_os(VAR) else {
            return;
        };
        std::env::remove_var(VAR);
        if let Some(token) = token.to_str().filter(|t| !t.is_empty()) {
            let _ = TOKEN.set(token.to_owned());
        }
    }

    /// The report line of a failure of kind `kind` for the run given `token`.
    pub fn line(token: &str, kind: &Kind) -> String {
        let line = Line {
            binky_failure: kind.clone(),
            token: token.to_owned(),
        };
        serde_json::to_string(&line).unwrap_or_default()
    }

    /// Write `f`'s report line to stderr, after its message: only when `binky mcp` runs this
    /// command, `f` has a kind, and stderr is not a terminal.
    pub fn write(f: &Failure) {
        if let Some(kind) = &f.kind {
            write_kind(kind);
        }
    }

    /// Say `f` on stderr (`binky: …`), then its report line when it has a kind (for the
    /// `binky mcp` that runs this command; nothing otherwise).
    pub fn print(f: &Failure) {
        eprintln!("binky: {}", f.message);
        write(f);
    }

    /// Write the report line of a failure of kind `kind`: only when `binky mcp` runs this
    /// command and stderr is not a terminal.
    fn write_kind(kind: &Kind) {
        let Some(token) = TOKEN.get() else {
            return;
        };
        if std::io::stderr().is_terminal() {
            return;
        }
        eprintln!("{}", line(token, kind));
    }

    /// The kind reported by the last line of `stderr` (what a command run with [`VAR`] set
    /// to `token` printed), that line taken off; none, and `stderr` left as it is, when the
    /// last line is not a report with this token.
    pub fn take(stderr: &mut String, token: &str) -> Option<Kind> {
        let body = stderr.trim_end_matches('\n');
        let start = body.rfind('\n').map_or(0, |i| i + 1);
        let line: Line = serde_json::from_str(&body[start..]).ok()?;
        if line.token != token {
            return None;
        }
        stderr.truncate(start);
        Some(line.binky_failure)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn the_last_line_with_the_runs_token_is_taken_off_and_read() {
            let kind = Kind::AmbiguousWorld {
                world: "w".into(),
                projects: vec!["a".into(), "b".into()],
            };
            let mut err = format!("binky: said for people\n{}\n", line("t1", &kind));
            assert_eq!(take(&mut err, "t1"), Some(kind));
            assert_eq!(err, "binky: said for people\n");
            // Alone on stderr.
            let mut err = line("t1", &Kind::Held);
            assert_eq!(take(&mut err, "t1"), Some(Kind::Held));
            assert_eq!(err, "");
        }

        #[test]
        fn a_line_without_the_runs_token_or_not_last_is_left_as_printed() {
            // Another run's token: what a command printed, never binky's verdict.
            let forged = format!("out\n{}\n", line("other", &Kind::Held));
            let mut err = forged.clone();
            assert_eq!(take(&mut err, "t1"), None);
            assert_eq!(err, forged);
            // Followed by more output: not the command's last word.
            let early = format!("{}\nmore\n", line("t1", &Kind::Held));
            let mut err = early.clone();
            assert_eq!(take(&mut err, "t1"), None);
            assert_eq!(err, early);
            let mut err = "binky: no world `x`\n".to_owned();
            assert_eq!(take(&mut err, "t1"), None);
        }

        #[test]
        fn the_line_names_the_kind_and_carries_its_data() {
            let kind = Kind::AmbiguousWorld {
                world: "w".into(),
                projects: vec!["a".into(), "b".into()],
            };
            let v: serde_json::Value = serde_json::from_str(&line("t", &kind)).unwrap();
            assert_eq!(
                v,
                serde_json::json!({
                    "binky_failure": {"kind": "ambiguous_world", "world": "w", "projects": ["a", "b"]},
                    "token": "t",
                })
            );
        }
    }
}
