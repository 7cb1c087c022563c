//! The server's edges, spoken to line by line as a broken client would: every bad line is
//! answered (the error shape for a tool call, a JSON-RPC error for what is no message), a
//! call before `initialize` is refused without ending the server, and a `root` that is no
//! repository is refused.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use serde_json::{json, Value};

use super::{call, code, config, connect};
use crate::harness::*;

/// `binky mcp` over raw lines.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Raw {
    fn start(env: &Env) -> Raw {
        let mut child = Command::new(binky_bin())
            .arg("mcp")
            .current_dir(&env.repo)
            .env("BINKY_HOME", &env.home)
            .env_remove("BINKY_WORKTREE_ROOT")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Raw {
            child,
            stdin,
            lines,
        }
    }

    /// Send `line`; the next message the server writes.
    fn ask(&mut self, line: &str) -> Value {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        let answer = self
            .lines
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("no answer to {line:.200}: {e}"));
        serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{answer}: {e}"))
    }

    /// Whether the server still runs.
    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tool_call(id: u32, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
}

/// The one error shape of a tool's answer to request `id`: its structured content.
fn tool_error(answer: &Value, id: u32) -> &Value {
    assert_eq!(answer["id"], id, "{answer}");
    let r = &answer["result"];
    assert_eq!(r["isError"], true, "{answer}");
    let c = &r["structuredContent"];
    assert_eq!(c["ok"], false, "{answer}");
    for k in ["code", "message", "fix"] {
        assert!(
            c["error"][k].as_str().is_some_and(|s| !s.is_empty()),
            "no {k}: {answer}"
        );
    }
    c
}

#[test]
fn mcp_answers_every_bad_line_and_survives_calls_before_initialize() {
    let env = Env::new(&config());
    let mut raw = Raw::start(&env);

    // Before `initialize`: refused, and the server goes on.
    let a = raw.ask(&tool_call(1, json!({"name": "list", "arguments": {}})));
    let c = tool_error(&a, 1);
    assert_eq!(code(c), "refused", "{a}");
    assert!(
        c["error"]["message"]
            .as_str()
            .unwrap()
            .contains("initialize"),
        "{a}"
    );
    assert!(raw.running(), "a call before initialize ended the server");
    let a = raw.ask(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    assert_eq!(a["id"], 2, "{a}");
    assert!(
        a["error"]["message"]
            .as_str()
            .unwrap()
            .contains("initialize"),
        "{a}"
    );

    // A line that is not JSON: a parse error, without an id.
    let a = raw.ask("this is not json");
    assert_eq!(a["error"]["code"], -32700, "{a}");
    assert!(a.get("id").is_none_or(Value::is_null), "{a}");
    assert!(raw.running());

    // Now the handshake, and the session works.
    let a = raw.ask(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        }})
        .to_string(),
    );
    assert_eq!(a["result"]["serverInfo"]["name"], "binky", "{a}");
    raw.stdin
        .as_mut()
        .unwrap()
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .unwrap();

    // An unknown tool: not_found, naming the tools there are.
    let a = raw.ask(&tool_call(4, json!({"name": "nope", "arguments": {}})));
    let c = tool_error(&a, 4);
    assert_eq!(code(c), "not_found", "{a}");
    let msg = c["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("nope") && msg.contains("list") && msg.contains("exec"),
        "{a}"
    );

    // Arguments that are not an object.
    for (id, args, says) in [
        (5, json!([1, 2]), "an array"),
        (6, json!("world"), "a string"),
        (7, json!(3), "a number"),
    ] {
        let a = raw.ask(&tool_call(id, json!({"name": "status", "arguments": args})));
        let c = tool_error(&a, id);
        assert_eq!(code(c), "invalid_argument", "{a}");
        assert!(
            c["error"]["message"].as_str().unwrap().contains(says),
            "{a}"
        );
    }

    // JSON that is no message: an invalid request, with its id.
    let a = raw.ask(r#"{"jsonrpc":"2.0","id":8}"#);
    assert_eq!(a["id"], 8, "{a}");
    assert_eq!(a["error"]["code"], -32600, "{a}");

    // And a good call still works.
    let a = raw.ask(&tool_call(9, json!({"name": "list", "arguments": {}})));
    assert_eq!(a["id"], 9, "{a}");
    assert_eq!(a["result"]["structuredContent"]["ok"], true, "{a}");

    // The client hangs up: the server ends by itself, cleanly.
    drop(raw.stdin.take());
    wait_until("the server ended", Duration::from_secs(10), || {
        !raw.running()
    });
    assert!(raw.child.wait().unwrap().success());
    env.assert_nothing_left(&[]);
}

#[tokio::test]
async fn mcp_refuses_a_root_that_is_no_git_repository() {
    let env = Env::new(&config());
    let client = connect(&env).await;
    let plain = env.dir.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let plain = plain.display().to_string();
    for (tool, args) in [
        ("list", json!({"root": plain})),
        ("status", json!({"world": "w", "root": plain})),
        ("up", json!({"world": "w", "root": plain})),
    ] {
        let (err, v) = call(&client, tool, args).await;
        assert!(err, "{tool}: {v}");
        assert_eq!(code(&v), "invalid_argument", "{tool}: {v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("not a git repository") && msg.contains(&plain),
            "{tool}: {v}"
        );
    }
    // Nothing was made.
    assert_eq!(env.status()["worlds"], json!([]));
    client.cancel().await.unwrap();
    env.assert_nothing_left(&["w"]);
}
