//! Admission: pure checks that gate what may be written and what may start.
//!
//! Each check looks only at the desired record and facts handed in, and returns
//! *admit*, *wait* or *deny*; a denial names the fix.

use std::time::Duration;

use crate::spec::Spec;

/// The outcome of an admission check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Go ahead.
    Admit,
    /// Not now; try again after `retry`.
    Wait {
        /// Why.
        reason: String,
        /// When to look again.
        retry: Duration,
    },
    /// Never, as it stands: the reason names the fix.
    Deny {
        /// Why, and what to do.
        reason: String,
    },
}

/// Longest world name accepted (it becomes a directory, a branch and a DNS label).
pub const MAX_NAME: usize = 100;

/// Is `name` safe as a world name, a branch name and a directory under the worktree root?
///
/// Allowed: `A–Z a–z 0–9 . _ - /`; no `..`, no leading `-`, `/` or `.`, no empty path
/// component, no component ending in `.lock` or `.` (git refuses those).
pub fn check_world_name(name: &str) -> Verdict {
    let deny = |why: &str| {
        Verdict::Deny {
        reason: format!(
            "invalid world name `{name}`: {why}; use letters, digits and `. _ - /`, e.g. `login-fix` or `feat/login`"
        ),
    }
    };
    if name.is_empty() {
        return deny("it is empty");
    }
    if name.len() > MAX_NAME {
        return deny(&format!("it is longer than {MAX_NAME} characters"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/')))
    {
        return deny(&format!("`{}` is not allowed", c.escape_default()));
    }
    if name.starts_with('-') {
        return deny("it starts with `-`");
    }
    // The world's branch has its name, and git refuses `HEAD` as a branch name (`git
    // check-ref-format --branch`); every other rule of git's that a name of these characters
    // can break is one of the checks below.
    if name == "HEAD" {
        return deny("git refuses `HEAD` as a branch name");
    }
    if name.contains("..") {
        return deny("it contains `..`");
    }
    if name.starts_with('/') || name.ends_with('/') || name.contains("//") {
        return deny("it has an empty path component");
    }
    for part in name.split('/') {
        if part.starts_with('.') {
            return deny("a path component starts with `.`");
        }
        if part.ends_with(".lock") || part.ends_with('.') {
            return deny("a path component ends with `.lock` or `.`");
        }
    }
    Verdict::Admit
}

/// Can a world running `spec` (with `group`) be written at all? The group exists, the
/// dependencies have no cycle, and no shared service waits for one world's own service.
pub fn check_spec(spec: &Spec, group: Option<&str>) -> Verdict {
    if let Some(g) = group {
        if !spec.groups.contains_key(g) {
            let known: Vec<&str> = spec.groups.keys().map(String::as_str).collect();
            return Verdict::Deny {
                reason: if known.is_empty() {
                    format!("no group `{g}`: binky.toml has no [groups]")
                } else {
                    format!("no group `{g}`; groups: {}", known.join(", "))
                },
            };
        }
    }
    if let Err(cycle) = spec.start_order() {
        return Verdict::Deny {
            reason: format!("{cycle}; remove one of these depends_on entries"),
        };
    }
    // A golden template whose build needs the slice cloned from itself: the world would
    // wait for ever. (A shared service's slice is its shared world's, made apart.)
    let selected = spec.selected(group);
    let makes = |n: &str| selected.contains(n) && spec.services.get(n).is_some_and(|s| !s.shared);
    if let Some(cycle) = crate::needs::first_cycle(spec, &makes) {
        return Verdict::Deny {
            reason: format!("{cycle}; {}", cycle.fix()),
        };
    }
    // One instance for every world cannot wait for one world's own service.
    for (name, svc) in spec.services.iter().filter(|(_, s)| s.shared) {
        if let Some(dep) = svc
            .depends_on
            .iter()
            .find(|d| spec.services.get(*d).is_some_and(|d| !d.shared))
        {
            return Verdict::Deny {
                reason: format!("service `{name}` is shared (one instance for all the project's worlds) but depends on `{dep}`, of which each world has its own; make `{dep}` shared too, or remove it from {name}'s depends_on"),
            };
        }
    }
    Verdict::Admit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_service_may_depend_only_on_shared_services() {
        use crate::testing::{resource, spec, web};
        let mut mail = web("mailpit", &["db"]);
        mail.shared = true;
        let mut db = resource("postgres", None, None);
        let s = spec(vec![("mail", mail.clone()), ("db", db.clone())]);
        let Verdict::Deny { reason } = check_spec(&s, None) else {
            panic!("a shared service waits for one world's db")
        };
        assert!(reason.contains("make `db` shared too"), "{reason}");
        db.shared = true;
        let s = spec(vec![
            ("mail", mail),
            ("db", db),
            ("api", web("x", &["mail"])),
        ]);
        assert_eq!(check_spec(&s, None), Verdict::Admit);
    }

    #[test]
    fn safe_names_pass_and_unsafe_ones_are_denied() {
        for ok in ["login-fix", "feat/login", "v1.2", "a_b", "A"] {
            assert_eq!(check_world_name(ok), Verdict::Admit, "{ok}");
        }
        for bad in [
            "",
            "../x",
            "a;b",
            "-rf",
            "/abs",
            "a//b",
            "a/",
            "x/.hidden",
            "a.lock",
            "a b",
            "a\nb",
            "$(id)",
            "a..b",
            "dot.",
        ] {
            assert!(
                matches!(check_world_name(bad), Verdict::Deny { .. }),
                "{bad:?} should be denied"
            );
        }
        let Verdict::Deny { reason } = check_world_name("a;b") else {
            panic!()
        };
        assert!(reason.contains("`;` is not allowed"), "{reason}");
    }
}
