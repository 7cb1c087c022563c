//! The one error shape of every tool, `{ok: false, error: {code, message, fix}}`, and the
//! checks every argument from a client passes before it reaches a command line.
//!
//! A failed binky command's code is read from the [`Kind`] the command set where it made the
//! failure (in this process, or reported by a child: [`crate::failure::report`]), then from
//! its exit code. Its message's words are read only for the two failures still made without
//! a kind (see [`BY_MESSAGE`]).

use rmcp::model::CallToolResult;
use serde_json::{json, Value};

use super::runner::{Ended, Run};
use crate::failure::{exit, Failure, Kind};

/// A tool's failure: what kind (`code`), what happened, and what to do about it.
#[derive(Debug, Clone)]
pub struct ToolError {
    /// `invalid_argument`, `not_found`, `ambiguous`, `held`, `pending`, `stopped`, `dirty`,
    /// `refused`, `command_failed`, `failed`, `cancelled`, `timeout`.
    pub code: &'static str,
    /// What happened.
    pub message: String,
    /// What to do about it.
    pub fix: String,
    /// More of the answer (a held world's status, a failed command's output…).
    pub extra: Option<Value>,
}

impl ToolError {
    /// An error with a code, a message and a fix.
    pub fn new(code: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            fix: fix.into(),
            extra: None,
        }
    }

    /// A bad argument.
    pub fn invalid(message: impl Into<String>, fix: impl Into<String>) -> Self {
        Self::new("invalid_argument", message, fix)
    }

    /// With more fields merged into the answer beside `ok` and `error`.
    pub fn with(mut self, extra: Value) -> Self {
        self.extra = Some(extra);
        self
    }

    /// With more fields beside those already given (the later win).
    pub fn with_more(mut self, more: Value) -> Self {
        match (&mut self.extra, more) {
            (Some(Value::Object(have)), Value::Object(more)) => have.extend(more),
            (extra, more) => *extra = Some(more),
        }
        self
    }

    /// The tool's answer: `{ok: false, error: {code, message, fix}, …}`, flagged an error.
    pub fn result(self) -> CallToolResult {
        CallToolResult::structured_error(self.value())
    }

    /// The answer as JSON.
    pub fn value(&self) -> Value {
        let mut v = json!({
            "ok": false,
            "error": { "code": self.code, "message": self.message, "fix": self.fix },
        });
        if let Some(Value::Object(extra)) = &self.extra {
            for (k, x) in extra {
                if k != "ok" && k != "error" {
                    v[k] = x.clone();
                }
            }
        }
        v
    }

    /// A binky command that did not succeed, its exit code read as a kind.
    pub fn of_run(run: &Run, world: Option<&str>) -> ToolError {
        let message = run.output();
        let w = world.unwrap_or("NAME");
        match run.ended {
            Ended::Cancelled => {
                return ToolError::new(
                    "cancelled",
                    "the call was cancelled; what it started was stopped",
                    "call it again if it is still wanted",
                )
            }
            Ended::TimedOut => {
                return ToolError::new(
                    "timeout",
                    format!(
                        "the command ran out of time after {}s and was stopped",
                        run.elapsed.as_secs()
                    ),
                    "give it a longer `timeout_seconds`, or make it faster",
                )
            }
            Ended::Exited(_) => {}
        }
        let message = if message.trim().is_empty() {
            format!("binky exited with code {}", run.code())
        } else {
            message
        };
        classify(run.code(), run.failure.as_ref(), message, w)
    }

    /// A failure of a call made in this process (`world`: the world asked about).
    pub fn of_failure(f: Failure, world: &str) -> ToolError {
        classify(f.code, f.kind.as_ref(), f.message, world)
    }
}

/// A failed command's exit code, kind and message, as an error code with a fix: by its kind
/// when it has one, else by [`BY_MESSAGE`], else by its exit code.
pub fn classify(code: i32, kind: Option<&Kind>, message: String, world: &str) -> ToolError {
    if let Some(kind) = kind {
        return of_kind(kind, message, world);
    }
    // Failures made without a kind, first match wins; `{world}` in a fix is the world asked
    // about.
    for &(says, code, fix) in BY_MESSAGE {
        if says.iter().any(|s| message.contains(s)) {
            return ToolError::new(code, message, fix.replace("{world}", world));
        }
    }
    match code {
        exit::USAGE => ToolError::new(
            "invalid_argument",
            message,
            "correct what the message names, then call again",
        ),
        exit::PENDING => ToolError::new(
            "pending",
            message,
            format!("the daemon carries on: call `wait` with world `{world}` (it waits until the world is ready), do not call this again in a loop"),
        ),
        _ => ToolError::new(
            "failed",
            message,
            format!("read the message; `logs` and `events` with world `{world}` show what the services printed and what binky did"),
        ),
    }
}

/// A failure of kind `kind` (its message `message`) as an error code with a fix; `world` is
/// the world asked about.
fn of_kind(kind: &Kind, message: String, world: &str) -> ToolError {
    match kind {
        Kind::NoWorld => ToolError::new(
            "not_found",
            message,
            "call `list` to see the worlds there are, or `up` to make this one",
        ),
        // Said from the data: the CLI's advice to run it inside a repository is not one a
        // tool call can take.
        Kind::AmbiguousWorld { world, projects } => {
            let list = projects.join(", ");
            ToolError::new(
                "ambiguous",
                format!("world `{world}` exists in several projects ({list})"),
                format!("pass `project` (one of: {list}) or `root` (the repository's path) to say which"),
            )
            .with(json!({ "projects": projects }))
        }
        Kind::NoService => ToolError::new(
            "not_found",
            message,
            "use one of the services the message lists",
        ),
        Kind::NotInRepository => ToolError::new("invalid_argument", message, NOT_IN_REPOSITORY_FIX),
        Kind::Stopped => ToolError::new(
            "stopped",
            message,
            format!("call `up` with world `{world}` to start it"),
        ),
        Kind::Held => ToolError::new("held", message, HELD_FIX),
        Kind::PersonOnly => ToolError::new("refused", message, REFUSED_FIX),
        Kind::Dirty => ToolError::new("dirty", message, DIRTY_FIX.replace("{world}", world)),
    }
}

/// What to do outside every repository.
const NOT_IN_REPOSITORY_FIX: &str = "pass `root` (the absolute path of the repository, or one of its worktrees) or `project` (a name from `list`): the server does not run inside a repository";
/// What to do about a command held for a person's approval.
const HELD_FIX: &str = "stop and ask a person to review it (the `approvals` tool says what waits, in words they can act on): they approve it in their own terminal or the dashboard; never approve it yourself";
/// What to do about uncommitted work in a world's worktree (`{world}`: the world asked
/// about).
const DIRTY_FIX: &str = "commit (or stash) the changes in the world's worktree, then call `remove` again; never discard someone's work (`exec` with world `{world}` runs git there)";
/// What to do about a person's action.
const REFUSED_FIX: &str = "ask a person to do it; an agent's process may not";

/// The failures still made without a kind, read from their message: (any of these words,
/// code, fix). Both are made outside the command-line layer: the worktree controller's
/// refusal of uncommitted work (in the daemon, printed by a command's wait), and the
/// daemon's refusal of a dashboard sign-in asked by a process binky started
/// (`person::refusal` in the daemon, which answers with text alone).
const BY_MESSAGE: &[(&[&str], &str, &str)] = &[
    (&["is a person's to do"], "refused", REFUSED_FIX),
    (&["has uncommitted changes"], "dirty", DIRTY_FIX),
];

/// Longest name accepted (a world, project, service or group).
const MAX_NAME: usize = 100;
/// Longest path or URL path accepted.
const MAX_PATH: usize = 4096;

/// A value as an error message shows it: at most 60 characters.
pub fn shown(v: &str) -> String {
    let n = v.chars().count();
    if n <= 60 {
        format!("`{v}`")
    } else {
        let head: String = v.chars().take(40).collect();
        format!("`{head}…` ({n} characters)")
    }
}

/// A number from a client: `given`, else `default`, refused unless it is 1 to `max`
/// (`unit` ends the fix: `seconds`, `lines`, or nothing).
pub fn within<T>(
    key: &str,
    given: Option<T>,
    default: T,
    max: T,
    unit: &str,
) -> Result<T, ToolError>
where
    T: Copy + PartialOrd + Default + std::fmt::Display,
{
    let v = given.unwrap_or(default);
    if v == T::default() || v > max {
        let unit = if unit.is_empty() {
            String::new()
        } else {
            format!(" {unit}")
        };
        return Err(ToolError::invalid(
            format!("{key} {v} is out of range"),
            format!("give 1 to {max}{unit}"),
        ));
    }
    Ok(v)
}

/// A name from a client (`what`: world, project, service, group): letters, digits and
/// `. _ - / @`, not starting with `-` (never read as an option), no `..` part.
pub fn name(what: &str, v: &str) -> Result<(), ToolError> {
    let fix = format!(
        "give `{what}` as binky names it: letters, digits and `. _ - /`, at most {MAX_NAME} characters, not starting with `-` (`list` shows the names there are)"
    );
    let why = if v.is_empty() {
        Some("is empty")
    } else if v.chars().count() > MAX_NAME {
        Some("is too long")
    } else if v.starts_with('-') {
        Some("starts with `-`, as an option would")
    } else if !v
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | '@'))
    {
        Some("has characters a name cannot have")
    } else if v.split('/').any(|p| p.is_empty() || p == "." || p == "..") {
        // A leading or trailing `/` makes an empty part too.
        Some("is not a relative name (an empty, `.` or `..` part)")
    } else {
        None
    };
    refused_if(why, what, v, fix)
}

/// An argument check's answer: refused when there is a `why`, said the one way every check
/// says it (`WHAT `VALUE` WHY`, and the fix); accepted when there is none.
fn refused_if(why: Option<&str>, what: &str, v: &str, fix: String) -> Result<(), ToolError> {
    match why {
        Some(why) => Err(ToolError::invalid(
            format!("{what} {} {why}", shown(v)),
            fix,
        )),
        None => Ok(()),
    }
}

/// A world's name from a client: first a name ([`name`]), then what `binky up` accepts as
/// a world's name (the one rule, `admission::check_world_name`), or a project's shared
/// world (`@shared`), so a name no world can have is refused before anything is asked
/// (`.hidden`, `a.lock`, `HEAD`).
pub fn world(v: &str) -> Result<(), ToolError> {
    name("world", v)?;
    if v == binky_controllers::shared::WORLD {
        return Ok(());
    }
    match binky_controllers::admission::check_world_name(v) {
        binky_controllers::admission::Verdict::Admit => Ok(()),
        binky_controllers::admission::Verdict::Deny { reason }
        | binky_controllers::admission::Verdict::Wait { reason, .. } => Err(ToolError::invalid(
            reason,
            "give the name of a world as `list` shows it (or, to make one, a name `up` accepts)",
        )),
    }
}

/// An optional world's name ([`world`]).
pub fn opt_world(v: Option<&str>) -> Result<(), ToolError> {
    v.map_or(Ok(()), world)
}

/// An optional name.
pub fn opt_name(what: &str, v: Option<&str>) -> Result<(), ToolError> {
    v.map_or(Ok(()), |v| name(what, v))
}

/// A request path for `curl`: starts with `/`, no spaces or control characters.
pub fn url_path(v: &str) -> Result<(), ToolError> {
    let why = if !v.starts_with('/') {
        Some("does not start with `/`")
    } else if v.len() > MAX_PATH {
        Some("is too long")
    } else if v.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("has spaces or control characters (percent-encode them)")
    } else {
        None
    };
    refused_if(
        why,
        "path",
        v,
        format!("give the path and query of the request, e.g. `/health?x=1`, at most {MAX_PATH} characters"),
    )
}

/// An HTTP method: a few capital letters.
pub fn method(v: &str) -> Result<(), ToolError> {
    if !v.is_empty() && v.len() <= 16 && v.chars().all(|c| c.is_ascii_uppercase()) {
        return Ok(());
    }
    Err(ToolError::invalid(
        format!("method {} is not an HTTP method", shown(v)),
        "give one such as GET, POST, PUT, PATCH or DELETE",
    ))
}

/// A file path relative to the repository, inside it (for `check`).
pub fn relative_path(what: &str, v: &str) -> Result<(), ToolError> {
    let p = std::path::Path::new(v);
    let why = if v.is_empty() {
        Some("is empty")
    } else if v.len() > MAX_PATH {
        Some("is too long")
    } else if v.starts_with('-') {
        Some("starts with `-`, as an option would")
    } else if p.is_absolute() {
        Some("is absolute")
    } else if p
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
        || v.chars().any(char::is_control)
    {
        Some("leaves the repository (`..`) or has control characters")
    } else {
        None
    };
    refused_if(
        why,
        what,
        v,
        format!("give `{what}` relative to the repository, inside it (e.g. `binky.toml` or `services/api`); `root` picks the repository"),
    )
}

/// An argument's text (the body of a request, a command's word): at most `max` bytes.
pub fn bounded(what: &str, v: &str, max: usize) -> Result<(), ToolError> {
    if v.len() <= max {
        return Ok(());
    }
    Err(ToolError::invalid(
        format!("{what} is {} bytes, more than {max}", v.len()),
        format!("give `{what}` in at most {max} bytes"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_decides_the_code_whatever_the_message_says() {
        let cases = [
            (Kind::NoWorld, "not_found"),
            (Kind::NoService, "not_found"),
            (Kind::NotInRepository, "invalid_argument"),
            (Kind::Stopped, "stopped"),
            (Kind::Held, "held"),
            (Kind::PersonOnly, "refused"),
            (Kind::Dirty, "dirty"),
        ];
        for (kind, code) in cases {
            // Words no kind is ever said with, and words of other kinds.
            for message in ["it went wrong", "world `w` has uncommitted changes"] {
                let e = classify(exit::FAILED, Some(&kind), message.to_owned(), "w");
                assert_eq!(e.code, code, "{kind:?}: {message}");
                assert_eq!(e.message, message, "{kind:?}");
            }
        }
    }

    #[test]
    fn an_ambiguous_world_is_said_from_its_projects_not_from_the_text() {
        let kind = Kind::AmbiguousWorld {
            world: "w".into(),
            projects: vec!["shop.v2".into(), "blog".into()],
        };
        let e = classify(exit::USAGE, Some(&kind), "nothing to parse".into(), "w");
        assert_eq!(e.code, "ambiguous");
        assert_eq!(
            e.message,
            "world `w` exists in several projects (shop.v2, blog)"
        );
        assert!(
            e.fix.contains("`project` (one of: shop.v2, blog)"),
            "{}",
            e.fix
        );
        assert_eq!(e.value()["projects"], json!(["shop.v2", "blog"]));
    }

    #[test]
    fn without_a_kind_the_words_of_typed_failures_are_not_read() {
        // The CLI's own messages, but no kind: the exit code decides.
        let cases = [
            (exit::USAGE, "no world `x`; worlds: w", "invalid_argument"),
            (
                exit::USAGE,
                "world `w` exists in several projects (a, b); run the command inside the project's repository",
                "invalid_argument",
            ),
            (exit::USAGE, "world `w` has no service `x`; services: api", "invalid_argument"),
            (exit::FAILED, "world `w` is down (stopped on purpose), so it will not become ready", "failed"),
            (exit::PENDING, "`true` waits for a person's approval (approvals are on) before `binky exec` runs it", "pending"),
        ];
        for (code, message, expected) in cases {
            let e = classify(code, None, message.to_owned(), "w");
            assert_eq!(e.code, expected, "{message}");
        }
    }

    #[test]
    fn failures_made_without_a_kind_are_still_read_from_their_words() {
        let dirty = classify(
            exit::FAILED,
            None,
            "worktree /x has uncommitted changes:\n    M a.txt\ncommit or stash them".into(),
            "w",
        );
        assert_eq!(dirty.code, "dirty");
        assert!(dirty.fix.contains("world `w`"), "{}", dirty.fix);
        let refused = classify(
            exit::FAILED,
            None,
            "signing a browser in to the dashboard is a person's to do, and …".into(),
            "w",
        );
        assert_eq!(refused.code, "refused");
    }
}
