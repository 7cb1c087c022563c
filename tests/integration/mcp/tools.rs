//! Every tool on a real world, its good path: up, wait, list, status, env, curl, logs,
//! verify, events, exec, check, apply, approvals, reload, down, remove.

use serde_json::json;

use super::{call, code, config, connect};
use crate::harness::*;

#[tokio::test]
async fn mcp_tools_bring_a_world_up_inspect_it_and_stop_it() {
    let env = Env::new(&config());
    let client = connect(&env).await;

    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "apply",
            "approvals",
            "check",
            "curl",
            "down",
            "env",
            "events",
            "exec",
            "list",
            "logs",
            "reload",
            "remove",
            "status",
            "up",
            "verify",
            "wait"
        ]
    );
    for t in &tools {
        assert!(t.title.is_some(), "{} has no title", t.name);
        let a = t
            .annotations
            .as_ref()
            .unwrap_or_else(|| panic!("{}", t.name));
        assert!(
            a.read_only_hint.is_some() && a.destructive_hint.is_some(),
            "{}",
            t.name
        );
        assert!(t.output_schema.is_some(), "{}", t.name);
    }
    let read_only = |n: &str| {
        tools
            .iter()
            .find(|t| t.name == n)
            .unwrap()
            .annotations
            .as_ref()
            .unwrap()
            .read_only_hint
            == Some(true)
    };
    for n in [
        "list",
        "status",
        "env",
        "logs",
        "events",
        "wait",
        "check",
        "approvals",
    ] {
        assert!(read_only(n), "{n} is not read-only");
    }
    for n in ["up", "down", "remove", "exec"] {
        assert!(!read_only(n), "{n} is read-only");
    }
    let destructive = tools.iter().find(|t| t.name == "remove").unwrap();
    assert_eq!(
        destructive.annotations.as_ref().unwrap().destructive_hint,
        Some(true)
    );
    let instructions = client
        .peer_info()
        .and_then(|i| i.instructions.clone())
        .unwrap_or_default();
    assert!(instructions.contains("binky remove NAME"), "{instructions}");
    assert!(instructions.contains("never approve"), "{instructions}");

    // list before anything: none.
    let (err, l) = call(&client, "list", json!({})).await;
    assert!(!err, "{l}");
    assert_eq!(l["worlds"], json!([]), "{l}");

    // up: done, made here, with the summary and URLs.
    let root = env.repo.display().to_string();
    let (err, up) = call(&client, "up", json!({"world": "w", "root": root})).await;
    assert!(!err, "{up}");
    assert_eq!(up["state"], "ready", "{up}");
    assert_eq!(up["created"], true, "{up}");
    assert_eq!(up["project"], "mcp", "{up}");
    assert!(
        up["summary"]
            .as_str()
            .unwrap()
            .starts_with("w (mcp): ready, 2/2 services running"),
        "{up}"
    );
    assert!(
        up["urls"]["web"]
            .as_str()
            .is_some_and(|u| u.contains("web.w.mcp.localhost")),
        "{up}"
    );
    // Again: it exists, so it was not made now.
    let (err, again) = call(&client, "up", json!({"worktree": "w"})).await;
    assert!(!err, "{again}");
    assert_eq!(again["created"], false, "{again}");

    // wait: ready at once.
    let (err, w) = call(
        &client,
        "wait",
        json!({"world": "w", "timeout_seconds": 30}),
    )
    .await;
    assert!(!err, "{w}");
    assert_eq!(w["state"], "ready", "{w}");

    // list: compact.
    let (err, l) = call(&client, "list", json!({})).await;
    assert!(!err, "{l}");
    assert_eq!(l["summary"], "1 world: 1 ready", "{l}");
    assert_eq!(l["worlds"][0]["world"], "w", "{l}");
    assert_eq!(l["worlds"][0]["project"], "mcp", "{l}");
    assert_eq!(l["worlds"][0]["services"]["api"], "running", "{l}");
    assert!(l["worlds"][0]["urls"]["api"].is_string(), "{l}");
    assert!(l.to_string().len() < 1000, "list is not compact: {l}");
    let (_, by_project) = call(&client, "list", json!({"project": "mcp"})).await;
    assert_eq!(by_project["worlds"], l["worlds"]);

    // status: one world in detail with its summary; compact; every world.
    let (err, st) = call(&client, "status", json!({"world": "w"})).await;
    assert!(!err, "{st}");
    assert_eq!(st["state"], "ready", "{st}");
    assert_eq!(st["summary"], up["summary"], "{st}");
    let services = st["services"].as_array().unwrap();
    assert_eq!(services.len(), 2, "{st}");
    for s in services {
        assert_eq!(s["state"], "running", "{s}");
        assert!(s["pid"].as_u64().is_some(), "{s}");
    }
    let (err, c) = call(&client, "status", json!({"world": "w", "compact": true})).await;
    assert!(!err, "{c}");
    assert_eq!(c["summary"], st["summary"], "{c}");
    assert!(c.get("conditions").is_none(), "{c}");
    let (err, all) = call(&client, "status", json!({})).await;
    assert!(!err, "{all}");
    assert_eq!(all["summary"], "1 world: 1 ready", "{all}");
    assert_eq!(all["worlds"][0]["world"], "w", "{all}");
    assert_eq!(all["worlds"][0]["summary"], st["summary"], "{all}");
    assert!(
        all["worlds"][0].get("conditions").is_none(),
        "compact by default: {all}"
    );
    let (err, detail) = call(&client, "status", json!({"compact": false})).await;
    assert!(!err, "{detail}");
    assert_eq!(detail["worlds"][0]["name"], "w", "{detail}");
    assert!(detail["worlds"][0]["conditions"].is_array(), "{detail}");
    assert_eq!(detail["worlds"][0]["summary"], st["summary"], "{detail}");

    // env: the same as the CLI's.
    let (err, e) = call(&client, "env", json!({"world": "w"})).await;
    assert!(!err, "{e}");
    let api_port = env.port_of("w", "api");
    assert_eq!(e["env"]["API_PORT"], api_port.to_string(), "{e}");

    // curl: through the proxy to the service, which answers with its environment.
    let (err, c) = call(
        &client,
        "curl",
        json!({"world": "w", "service": "web", "path": "/"}),
    )
    .await;
    assert!(!err, "{c}");
    assert_eq!(c["status"], 200, "{c}");
    assert_eq!(
        c["json"]["API"],
        format!("http://localhost:{api_port}"),
        "{c}"
    );

    // logs: `lines` is the total, shared between the services.
    let (err, logs) = call(
        &client,
        "logs",
        json!({"world": "w", "service": "api", "lines": 20}),
    )
    .await;
    assert!(!err, "{logs}");
    assert!(
        logs["lines"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["line"] == format!("listening on {api_port}")),
        "{logs}"
    );
    // A service the world does not have: not_found, naming the ones it has.
    let (err, none) = call(&client, "logs", json!({"world": "w", "service": "nosuch"})).await;
    assert!(err, "{none}");
    assert_eq!(code(&none), "not_found", "{none}");
    let message = none["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("has no service `nosuch`; services: ") && message.contains("api"),
        "{none}"
    );
    let (err, one) = call(&client, "logs", json!({"world": "w", "lines": 1})).await;
    assert!(!err, "{one}");
    assert_eq!(one["lines"].as_array().unwrap().len(), 1, "{one}");
    assert_eq!(one["returned"], 1, "{one}");
    let (_, two) = call(&client, "logs", json!({"world": "w", "lines": 2})).await;
    let from: Vec<&str> = two["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["service"].as_str())
        .collect();
    assert_eq!(from.len(), 2, "{two}");
    assert_ne!(
        from[0], from[1],
        "two lines come one from each service: {two}"
    );

    // verify: the one command passes, with the world's environment.
    let (err, v) = call(&client, "verify", json!({"world": "w"})).await;
    assert!(!err, "{v}");
    assert_eq!(v["results"][0]["ok"], true, "{v}");

    // events: what binky did.
    let (err, ev) = call(&client, "events", json!({"world": "w", "lines": 5})).await;
    assert!(!err, "{ev}");
    let n = ev["events"].as_array().unwrap().len();
    assert!((1..=5).contains(&n), "{ev}");

    // exec: in the worktree, with the world's environment; a failure is command_failed;
    // output is bounded; time too.
    let (err, x) = call(
        &client,
        "exec",
        json!({"world": "w", "command": ["sh", "-c", "pwd; echo $API_PORT"]}),
    )
    .await;
    assert!(!err, "{x}");
    assert_eq!(x["exit_code"], 0, "{x}");
    let wt = env.worktree("w").canonicalize().unwrap();
    assert_eq!(
        x["stdout"],
        format!("{}\n{api_port}\n", wt.display()),
        "{x}"
    );
    let (err, x) = call(
        &client,
        "exec",
        json!({"world": "w", "command": ["sh", "-c", "echo no >&2; exit 3"]}),
    )
    .await;
    assert!(err, "{x}");
    assert_eq!(code(&x), "command_failed", "{x}");
    assert_eq!(x["exit_code"], 3, "{x}");
    assert_eq!(x["stderr"], "no\n", "{x}");
    let (err, x) = call(
        &client,
        "exec",
        json!({"world": "w", "command": ["sh", "-c", "head -c 100000 /dev/zero | tr '\\0' a; echo END"], "max_output_bytes": 1000}),
    )
    .await;
    assert!(!err, "{x}");
    assert_eq!(x["truncated"], true, "{x}");
    let out = x["stdout"].as_str().unwrap();
    assert_eq!(out.len(), 1000, "{x}");
    assert!(
        out.ends_with("aaa\nEND\n") || out.ends_with("END\n"),
        "the newest bytes are kept"
    );
    let started = std::time::Instant::now();
    let (err, x) = call(
        &client,
        "exec",
        json!({"world": "w", "command": ["sleep", "30"], "timeout_seconds": 1}),
    )
    .await;
    assert!(err, "{x}");
    assert_eq!(code(&x), "timeout", "{x}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{x}"
    );

    // check: the repository's binky.toml.
    let (err, ch) = call(&client, "check", json!({})).await;
    assert!(!err, "{ch}");
    assert_eq!(ch["errors"], 0, "{ch}");
    assert!(ch["file"].as_str().unwrap().ends_with("binky.toml"), "{ch}");
    std::fs::write(
        env.repo.join("bad.toml"),
        "[project]\nname = \"mcp\"\n[services.x]\ncmd = 3\n",
    )
    .unwrap();
    let (err, bad) = call(&client, "check", json!({"path": "bad.toml"})).await;
    assert!(err, "{bad}");
    assert_eq!(code(&bad), "invalid_config", "{bad}");
    assert!(
        bad["findings"].as_array().is_some_and(|f| !f.is_empty()),
        "{bad}"
    );
    std::fs::remove_file(env.repo.join("bad.toml")).unwrap();

    // apply: the world's file unchanged; a dry run of an edit says what would change and
    // changes nothing; an invalid edit is invalid_config. The daemon is stopped meanwhile,
    // so that its file watcher does not apply the edits first (services keep running).
    let (err, a) = call(&client, "apply", json!({"world": "w"})).await;
    assert!(!err, "{a}");
    assert_eq!(a["worlds"][0]["state"], "unchanged", "{a}");
    env.ok(&["daemon", "stop"]);
    let file = env.worktree("w").join("binky.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    let edited = text.replace("env = { API", "env = { EXTRA = \"1\", API");
    std::fs::write(&file, &edited).unwrap();
    let (err, a) = call(&client, "apply", json!({"world": "w", "dry_run": true})).await;
    assert!(!err, "{a}");
    assert_eq!(a["dry_run"], true, "{a}");
    assert_eq!(a["worlds"][0]["state"], "would change", "{a}");
    let (_, again) = call(&client, "apply", json!({"world": "w", "dry_run": true})).await;
    assert_eq!(
        again["worlds"][0]["state"], "would change",
        "the dry run changed it: {again}"
    );
    std::fs::write(
        &file,
        text.replace("[services.web]", "[services.web]\nbogus = 1"),
    )
    .unwrap();
    let (err, a) = call(&client, "apply", json!({"world": "w", "dry_run": true})).await;
    assert!(err, "{a}");
    assert_eq!(code(&a), "invalid_config", "{a}");
    std::fs::write(&file, text).unwrap();
    let (err, a) = call(&client, "apply", json!({"world": "w"})).await;
    assert!(!err, "{a}");
    assert_eq!(a["worlds"][0]["state"], "unchanged", "{a}");

    // approvals: off on this machine.
    let (err, ap) = call(&client, "approvals", json!({})).await;
    assert!(!err, "{ap}");
    assert_eq!(ap["approvals_on"], false, "{ap}");
    assert_eq!(ap["waiting"], json!([]), "{ap}");

    // An unknown world: not_found, naming the worlds there are.
    for tool in [
        "env", "logs", "down", "reload", "status", "verify", "events", "wait", "apply", "remove",
        "up",
    ] {
        if tool == "up" {
            continue;
        }
        let (err, nope) = call(&client, tool, json!({"world": "nope"})).await;
        assert!(err, "{tool}: {nope}");
        assert_eq!(code(&nope), "not_found", "{tool}: {nope}");
        let message = nope["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("no world `nope` in the repository ")
                && message.ends_with("; worlds: w"),
            "{tool}: {nope}"
        );
    }
    let (err, nope) = call(
        &client,
        "exec",
        json!({"world": "nope", "command": ["true"]}),
    )
    .await;
    assert!(err && code(&nope) == "not_found", "{nope}");
    let (err, nope) = call(
        &client,
        "curl",
        json!({"world": "nope", "service": "web", "path": "/"}),
    )
    .await;
    assert!(err && code(&nope) == "not_found", "{nope}");

    // reload: new processes on the same ports.
    let pid = env.pid_of("w", "api");
    let (err, reload) = call(&client, "reload", json!({"world": "w"})).await;
    assert!(!err, "{reload}");
    assert_ne!(env.pid_of("w", "api"), pid);
    assert_eq!(env.port_of("w", "api"), api_port);

    // down: stopped, files and ports kept; wait on a stopped world says so at once.
    let (err, down) = call(&client, "down", json!({"world": "w"})).await;
    assert!(!err, "{down}");
    assert_eq!(down["state"], "stopped", "{down}");
    let (err, w) = call(&client, "wait", json!({"world": "w"})).await;
    assert!(err, "{w}");
    assert_eq!(code(&w), "stopped", "{w}");

    // remove: the agent made it, its worktree is clean.
    let (err, rm) = call(&client, "remove", json!({"world": "w"})).await;
    assert!(!err, "{rm}");
    let (_, l) = call(&client, "list", json!({})).await;
    assert_eq!(l["worlds"], json!([]), "{l}");
    // Its events stay readable, said to be a removed world's.
    let (err, ev) = call(&client, "events", json!({"world": "w"})).await;
    assert!(!err, "{ev}");
    assert_eq!(ev["removed"], true, "{ev}");
    assert!(
        ev["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "removed"),
        "{ev}"
    );

    client.cancel().await.unwrap();
    env.assert_nothing_left(&["w"]);
}
