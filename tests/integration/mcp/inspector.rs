//! The MCP inspector's CLI (the official TypeScript SDK's client) drives `binky mcp`: it
//! lists the tools and calls each, good and bad arguments, and refuses (exit 1) any answer
//! whose structured content does not fit the tool's outputSchema. `scripts/test` installs
//! it; without it this test fails, saying so.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::config;
use crate::harness::*;

/// `mcp-inspector --cli binky mcp --method ARGS…` in the test's repository: its JSON.
fn inspect(inspector: &Path, env: &Env, args: &[&str]) -> Value {
    let out = Command::new(inspector)
        .args(["--cli", "-e"])
        .arg(format!("BINKY_HOME={}", env.home.display()))
        .args(["--", binky_bin(), "mcp", "--method"])
        .args(args)
        .current_dir(&env.repo)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the inspector refused {args:?}:\n{}{}",
        stdout(&out),
        stderr(&out)
    );
    serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {}", stdout(&out)))
}

/// `tools/call` of `tool` with `key=value` arguments: (isError, structuredContent).
fn call(inspector: &Path, env: &Env, tool: &str, args: &[&str]) -> (bool, Value) {
    let mut words = vec!["tools/call", "--tool-name", tool];
    for a in args {
        words.extend(["--tool-arg", a]);
    }
    let v = inspect(inspector, env, &words);
    let content = v["structuredContent"].clone();
    assert!(content.is_object(), "{tool}: no structured content: {v}");
    (v["isError"] == true, content)
}

/// The inspector's CLI that `scripts/test` installed (the test fails without it).
fn inspector() -> std::path::PathBuf {
    test_cache(
        "BINKY_TEST_MCP_INSPECTOR",
        "mcp-inspector",
        &["node_modules/.bin/mcp-inspector"],
    )
    .join("node_modules/.bin/mcp-inspector")
}

#[test]
fn the_mcp_inspector_validates_every_tool_answer_against_its_output_schema() {
    let inspector = inspector();
    let env = Env::new(&config());
    let tools = inspect(&inspector, &env, &["tools/list"]);
    let tools = tools["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 16, "{tools:?}");
    assert!(tools.iter().all(|t| t["outputSchema"].is_object()));

    // Good arguments: every tool's success shape. (The inspector passes an argument whose
    // schema allows null as a string, so numbers are left out here.)
    let root = format!("root={}", env.repo.display());
    for (tool, args) in [
        ("list", vec![]),
        ("up", vec!["world=w", root.as_str()]),
        ("wait", vec!["world=w"]),
        ("status", vec![]),
        ("status", vec!["world=w"]),
        ("env", vec!["world=w"]),
        ("logs", vec!["world=w"]),
        ("events", vec!["world=w"]),
        (
            "exec",
            vec!["world=w", r#"command=["sh","-c","echo $API_PORT"]"#],
        ),
        ("verify", vec!["world=w"]),
        ("curl", vec!["world=w", "service=web", "path=/"]),
        ("check", vec![]),
        ("apply", vec!["world=w"]),
        ("approvals", vec![]),
        ("reload", vec!["world=w"]),
        ("down", vec!["world=w"]),
        ("remove", vec!["world=w"]),
    ] {
        let (err, v) = call(&inspector, &env, tool, &args);
        assert!(!err, "{tool} {args:?}: {v}");
        assert_eq!(v["ok"], true, "{tool}: {v}");
    }
    // Bad arguments: the error shape, validated the same way.
    for (tool, args) in [
        ("down", vec!["world=--help"]),
        ("logs", vec!["world=w", "service=-f"]),
        ("curl", vec!["world=w", "service=web", "path=--help"]),
        ("check", vec!["path=../x"]),
        ("status", vec!["world=nope"]),
        ("logs", vec!["world=w", "lines=3"]),
        ("up", vec![]),
        ("remove", vec!["world=nope"]),
    ] {
        let (err, v) = call(&inspector, &env, tool, &args);
        assert!(err, "{tool} {args:?}: {v}");
        assert_eq!(v["ok"], false, "{tool}: {v}");
        assert!(v["error"]["code"].is_string(), "{tool}: {v}");
    }
    env.assert_nothing_left(&["w"]);
}

/// The agent-safety guards as the official client meets them: another project's world of
/// the name is not reached from this repository, a person-only action run through `exec`
/// is refused, an unknown tool and a `root` that is no repository get the error shape.
#[test]
fn the_mcp_inspector_meets_the_guards_in_the_error_shape() {
    let inspector = inspector();
    let env = Env::new(&config());
    let alpha = env.other_project("alpha");
    let out = env.binky_in(&alpha, &["up", "theirs"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // From this repository, alpha's `theirs` is not found, whatever the tool.
    for tool in ["status", "env", "remove", "down"] {
        let (err, v) = call(&inspector, &env, tool, &["world=theirs"]);
        assert!(err, "{tool} reached alpha's world: {v}");
        assert_eq!(v["error"]["code"], "not_found", "{tool}: {v}");
    }
    // A person-only action through exec: refused by the CLI it runs.
    env.ok(&["up", "w"]);
    let approve = format!(r#"command=["{}","approve","--exec","*rm*"]"#, binky_bin());
    let (_, v) = call(&inspector, &env, "exec", &["world=w", approve.as_str()]);
    assert_ne!(v["exit_code"], 0, "{v}");
    assert!(v.to_string().contains("is a person's to do"), "{v}");
    // Bad requests: the error shape.
    let (err, v) = call(&inspector, &env, "status", &["root=/etc"]);
    assert!(err && v["error"]["code"] == "invalid_argument", "{v}");
    let out = Command::new(&inspector)
        .args(["--cli", "-e"])
        .arg(format!("BINKY_HOME={}", env.home.display()))
        .args([
            "--",
            binky_bin(),
            "mcp",
            "--method",
            "tools/call",
            "--tool-name",
            "nope",
        ])
        .current_dir(&env.repo)
        .output()
        .unwrap();
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        said.contains("not_found") && said.contains("list"),
        "{said}"
    );
    env.ok(&["remove", "w"]);
    let out = env.binky_in(&alpha, &["remove", "theirs"]);
    assert!(out.status.success(), "{}", stderr(&out));
    env.assert_nothing_left(&["w", "theirs"]);
}
