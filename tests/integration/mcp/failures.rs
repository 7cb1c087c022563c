//! A failed command's kind handed to the `binky mcp` that ran it: one last stderr line, only
//! for the token `binky mcp` gave that run, and never passed on to what the command starts.

use serde_json::{json, Value};

use super::config;
use crate::harness::*;

/// The variable `binky mcp` sets for a command it runs.
const VAR: &str = "BINKY_FAILURE_REPORT";

#[test]
fn a_failures_kind_reaches_only_the_binky_mcp_that_asked_for_it() {
    let env = Env::new(&config());

    // Asked for: the message as a person sees it, then the kind with the run's token.
    let out = env.binky_env(&["status", "nope"], &[(VAR, "tok-1")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert!(lines[0].starts_with("binky: no world `nope`"), "{err}");
    let report: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!(
        report,
        json!({"binky_failure": {"kind": "no_world"}, "token": "tok-1"}),
        "{err}"
    );

    // Not asked for: the message alone, as before.
    let out = env.binky(&["status", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!stderr(&out).contains("binky_failure"), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).trim_end().lines().count(),
        1,
        "{}",
        stderr(&out)
    );

    // What `binky exec` runs never gets the token, so a binky it runs reports nothing and
    // nothing it prints can pass for binky's own report.
    env.ok(&["up", "w"]);
    let out = env.binky_env(
        &[
            "exec",
            "w",
            "--",
            "sh",
            "-c",
            &format!("echo \"[${VAR}]\"; \"$0\" status nope",),
            binky_bin(),
        ],
        &[(VAR, "tok-2")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "[]", "{}", stdout(&out));
    assert!(!stderr(&out).contains("binky_failure"), "{}", stderr(&out));
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
