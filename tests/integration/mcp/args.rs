//! Bad arguments to every tool: names that look like options (`-f`, `--help`), paths that
//! leave (`../x`), 10 KB strings, missing, mistyped and unknown arguments. Each is the one
//! error shape with code `invalid_argument`, naming the argument, and nothing runs.

use serde_json::{json, Value};

use super::{call, code, config, connect};
use crate::harness::*;

#[tokio::test]
async fn mcp_refuses_bad_arguments_of_every_tool_before_running_anything() {
    let env = Env::new(&config());
    let client = connect(&env).await;
    let long = "a".repeat(10 * 1024);
    let bad_names = [
        "-f",
        "--help",
        "../x",
        "x/../y",
        "",
        "a b",
        "/abs",
        long.as_str(),
    ];

    let world_tools: [(&str, Value); 14] = [
        ("up", json!({})),
        ("down", json!({})),
        ("reload", json!({})),
        ("status", json!({})),
        ("env", json!({})),
        ("logs", json!({})),
        ("events", json!({})),
        ("verify", json!({})),
        ("wait", json!({})),
        ("apply", json!({})),
        ("remove", json!({})),
        ("approvals", json!({})),
        ("curl", json!({"service": "web", "path": "/"})),
        ("exec", json!({"command": ["true"]})),
    ];
    let mut checked = 0;
    for (tool, base) in &world_tools {
        for bad in bad_names {
            let mut args = base.clone();
            args["world"] = json!(bad);
            let (err, v) = call(&client, tool, args).await;
            assert!(err, "{tool} world={bad:.20}: {v}");
            assert_eq!(code(&v), "invalid_argument", "{tool} world={bad:.20}: {v}");
            let msg = v["error"]["message"].as_str().unwrap();
            assert!(msg.starts_with("world `"), "{tool}: {msg}");
            assert!(
                msg.len() < 300,
                "{tool}: the message repeats a 10 KB value: {msg:.300}"
            );
            checked += 1;
        }
        // `project` the same way, and a `root` that is not an absolute directory.
        for bad in ["-f", "--help", "../x", long.as_str()] {
            let mut args = base.clone();
            args["world"] = json!("w");
            args["project"] = json!(bad);
            let (err, v) = call(&client, tool, args).await;
            assert!(
                err && code(&v) == "invalid_argument",
                "{tool} project={bad:.20}: {v}"
            );
        }
        for bad in ["--help", "../x", "/nonexistent/x", long.as_str()] {
            let mut args = base.clone();
            args["world"] = json!("w");
            args["root"] = json!(bad);
            let (err, v) = call(&client, tool, args).await;
            assert!(
                err && code(&v) == "invalid_argument",
                "{tool} root={bad:.20}: {v}"
            );
        }
    }
    assert_eq!(checked, 14 * bad_names.len());

    // Other names and paths.
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "logs",
            json!({"world": "w", "service": "-f"}),
            "service `-f`",
        ),
        ("logs", json!({"world": "w", "service": long}), "service `"),
        (
            "curl",
            json!({"world": "w", "service": "--help", "path": "/"}),
            "service `--help`",
        ),
        (
            "curl",
            json!({"world": "w", "service": "web", "path": "--help"}),
            "path `--help`",
        ),
        (
            "curl",
            json!({"world": "w", "service": "web", "path": "../x"}),
            "path `../x`",
        ),
        (
            "curl",
            json!({"world": "w", "service": "web", "path": "/a b"}),
            "path `/a b`",
        ),
        (
            "curl",
            json!({"world": "w", "service": "web", "path": format!("/{long}{long}")}),
            "path `",
        ),
        (
            "curl",
            json!({"world": "w", "service": "web", "path": "/", "method": "--help"}),
            "method `--help`",
        ),
        (
            "curl",
            json!({"world": "w", "service": "web", "path": "/", "method": "GET /x"}),
            "method `",
        ),
        (
            "up",
            json!({"world": "w", "group": "--help"}),
            "group `--help`",
        ),
        (
            "exec",
            json!({"world": "w", "service": "-f", "command": ["true"]}),
            "service `-f`",
        ),
        (
            "exec",
            json!({"world": "w", "command": []}),
            "command is empty",
        ),
        (
            "exec",
            json!({"world": "w", "command": ["true"], "timeout_seconds": 100000}),
            "timeout_seconds",
        ),
        (
            "exec",
            json!({"world": "w", "command": ["true"], "max_output_bytes": 0}),
            "max_output_bytes",
        ),
        ("check", json!({"path": "../x"}), "path `../x`"),
        ("check", json!({"path": "--help"}), "path `--help`"),
        (
            "check",
            json!({"path": "/etc/passwd"}),
            "path `/etc/passwd`",
        ),
        ("logs", json!({"world": "w", "lines": 0}), "lines 0"),
        (
            "logs",
            json!({"world": "w", "lines": 1000000}),
            "lines 1000000",
        ),
        ("events", json!({"world": "w", "lines": 0}), "lines 0"),
        (
            "wait",
            json!({"world": "w", "timeout_seconds": 0}),
            "timeout_seconds 0",
        ),
        (
            "verify",
            json!({"world": "w", "timeout_seconds": 0}),
            "timeout_seconds 0",
        ),
        (
            "status",
            json!({"world": "w", "project": "mcp", "root": "/tmp"}),
            "both `project` and `root`",
        ),
        // Missing, mistyped and unknown arguments: the same shape, not plain text.
        ("up", json!({}), "missing field `world`"),
        ("curl", json!({"world": "w"}), "missing field"),
        ("exec", json!({"world": "w"}), "missing field `command`"),
        (
            "exec",
            json!({"world": "w", "command": "ls"}),
            "invalid type",
        ),
        (
            "logs",
            json!({"world": "w", "lines": "abc"}),
            "invalid type",
        ),
        ("logs", json!({"world": "w", "lines": -1}), "invalid value"),
        ("status", json!({"compact": "yes"}), "invalid type"),
        ("env", json!({"world": 3}), "invalid type"),
        (
            "down",
            json!({"world": "w", "force": true}),
            "unknown field `force`",
        ),
    ];
    for (tool, args, says) in cases {
        let (err, v) = call(&client, tool, args.clone()).await;
        assert!(err, "{tool} {args:.80}: {v}");
        assert_eq!(code(&v), "invalid_argument", "{tool} {args:.80}: {v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains(says), "{tool}: `{says}` not in {msg:.300}");
        assert!(!v["error"]["fix"].as_str().unwrap().is_empty(), "{v}");
    }

    // Nothing ran: no world, no daemon started by a tool.
    let (_, l) = call(&client, "list", json!({})).await;
    assert_eq!(l["worlds"], json!([]), "{l}");
    client.cancel().await.unwrap();
    env.assert_nothing_left(&[]);
}
