//! What keeps an agent safe: a cancelled call kills what it started; a world held for a
//! person's approval is a `held` answer telling the agent to ask (never to approve), and
//! `verify` refuses it; `remove` takes only worlds an agent made, never uncommitted work.

use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
use rmcp::service::PeerRequestOptions;
use serde_json::json;

use super::{call, code, config, connect};
use crate::harness::*;

// Two threads: the test's waits block one while the client's transport runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_kills_what_it_started_within_a_second() {
    let env = Env::new(&config());
    env.ok(&["up", "w"]);
    let client = connect(&env).await;
    let pidfile = env.dir.path().join("child.pid");
    let script = format!("echo $$ > {}; exec sleep 300", pidfile.display());
    let args = json!({"world": "w", "command": ["sh", "-c", script], "timeout_seconds": 600});
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new("exec").with_arguments(args.as_object().unwrap().clone()),
    ));
    let handle = client
        .peer()
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    wait_until("the command started", Duration::from_secs(20), || {
        std::fs::read_to_string(&pidfile).is_ok_and(|s| s.trim().parse::<u32>().is_ok())
    });
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid));
    // This test's `binky exec` (its script names this test's pid file).
    let pidfile_text = pidfile.display().to_string();
    let exec_cmd = binky_testkit::procs::with_cmdline(&["exec", "w", "--", "sh", &pidfile_text]);
    assert!(!exec_cmd.is_empty(), "no binky exec found");
    handle.cancel(Some("test".into())).await.unwrap();
    let cancelled = Instant::now();
    wait_until("the command is gone", Duration::from_secs(1), || {
        !alive(pid)
    });
    assert!(cancelled.elapsed() <= Duration::from_secs(1));
    for p in exec_cmd {
        wait_until("binky exec is gone", Duration::from_secs(1), || !alive(p));
    }
    // The server still answers.
    let (err, st) = call(&client, "status", json!({"world": "w"})).await;
    assert!(!err, "{st}");
    client.cancel().await.unwrap();
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[tokio::test]
async fn mcp_up_held_for_approval_tells_the_agent_to_ask_a_person() {
    let env = Env::new(&config());
    env.ok(&["settings", "approvals=true"]);
    let client = connect(&env).await;
    let root = env.repo.display().to_string();
    let (err, up) = call(&client, "up", json!({"world": "w", "root": root})).await;
    assert!(err, "{up}");
    assert_eq!(code(&up), "held", "{up}");
    let text = up["error"].to_string();
    assert!(
        !text.contains("binky approve"),
        "the agent is told to approve: {text}"
    );
    assert!(
        text.contains("exec python3 server.py"),
        "the commands are named: {text}"
    );
    let fix = up["error"]["fix"].as_str().unwrap();
    assert!(
        fix.contains("ask the person") && fix.contains("do not approve"),
        "{fix}"
    );

    // approvals: what waits, in words a person can act on.
    let (err, ap) = call(&client, "approvals", json!({"world": "w"})).await;
    assert!(!err, "{ap}");
    assert_eq!(ap["approvals_on"], true, "{ap}");
    let waiting = ap["waiting"].as_array().unwrap();
    assert!(!waiting.is_empty(), "{ap}");
    for c in waiting {
        let line = c["for_the_person"].as_str().unwrap();
        assert!(
            line.contains("binky approve ") && line.contains("in a terminal"),
            "{line}"
        );
        assert_eq!(c["worlds"], json!(["w"]), "{c}");
    }
    assert!(
        ap["message"]
            .as_str()
            .unwrap()
            .contains("do not approve anything yourself"),
        "{ap}"
    );

    // The same through the repository's path; another repository has nothing waiting.
    let (err, by_root) = call(&client, "approvals", json!({"root": root})).await;
    assert!(!err, "{by_root}");
    assert_eq!(by_root["waiting"], ap["waiting"], "{by_root}");
    let elsewhere = env.dir.path().join("elsewhere");
    binky_testkit::git::init_repo(&elsewhere);
    let (err, none) = call(
        &client,
        "approvals",
        json!({"root": elsewhere.display().to_string()}),
    )
    .await;
    assert!(!err, "{none}");
    assert_eq!(none["waiting"], json!([]), "{none}");

    // verify and wait refuse the held world the same way.
    for tool in ["verify", "wait"] {
        let (err, v) = call(&client, tool, json!({"world": "w"})).await;
        assert!(err, "{tool}: {v}");
        assert_eq!(code(&v), "held", "{tool}: {v}");
    }
    // A person approves: the world comes up and wait says so.
    env.ok(&["approve", "--all", "w", "--yes"]);
    let (err, w) = call(
        &client,
        "wait",
        json!({"world": "w", "timeout_seconds": 60}),
    )
    .await;
    assert!(!err, "{w}");
    assert_eq!(w["state"], "ready", "{w}");
    let (err, ap) = call(&client, "approvals", json!({})).await;
    assert!(!err && ap["waiting"] == json!([]), "{ap}");

    // exec of a command no person approved: held, ran nothing, listed for the person.
    let command = json!(["sh", "-c", "echo ran > ran.txt"]);
    let (err, x) = call(
        &client,
        "exec",
        json!({"world": "w", "command": command.clone()}),
    )
    .await;
    assert!(err, "{x}");
    assert_eq!(code(&x), "held", "{x}");
    assert!(!x["error"].to_string().contains("binky approve"), "{x}");
    assert!(!env.worktree("w").join("ran.txt").exists(), "ran: {x}");
    let (_, ap) = call(&client, "approvals", json!({"world": "w"})).await;
    let waiting = ap["waiting"].as_array().unwrap();
    assert_eq!(waiting.len(), 1, "{ap}");
    let line = waiting[0]["for_the_person"].as_str().unwrap();
    assert!(line.contains("echo ran > ran.txt"), "{line}");
    let key = line
        .split("binky approve ")
        .nth(1)
        .and_then(|r| r.split('`').next())
        .unwrap()
        .to_owned();
    env.ok(&["approve", &key, "--yes"]);
    let (err, x) = call(&client, "exec", json!({"world": "w", "command": command})).await;
    assert!(!err, "{x}");
    assert_eq!(x["exit_code"], 0, "{x}");
    assert!(env.worktree("w").join("ran.txt").exists(), "{x}");
    std::fs::remove_file(env.worktree("w").join("ran.txt")).unwrap();
    client.cancel().await.unwrap();
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[tokio::test]
async fn mcp_remove_takes_only_worlds_an_agent_made_and_never_uncommitted_work() {
    let env = Env::new(&config());
    env.ok(&["up", "mine"]);
    let client = connect(&env).await;

    // A person's world: refused, naming who decides and the setting.
    let (err, v) = call(&client, "remove", json!({"world": "mine"})).await;
    assert!(err, "{v}");
    assert_eq!(code(&v), "refused", "{v}");
    assert!(
        v["error"]["fix"]
            .as_str()
            .unwrap()
            .contains("binky remove mine"),
        "{v}"
    );
    assert!(env.worktree("mine").is_dir());
    // Nor through `exec` of the CLI (`binky remove` from a process binky started takes what
    // this tool would), nor by approving or widening its own rights there.
    let (err, up) = call(&client, "up", json!({"world": "tool"})).await;
    assert!(!err, "{up}");
    let bin = binky_bin();
    for command in [
        vec![bin, "remove", "mine", "--force"],
        vec![bin, "settings", "mcp_remove_any=true"],
        vec![bin, "approve", "--exec", "*rm*"],
        vec![bin, "dashboard", "--no-open"],
    ] {
        let (_, x) = call(
            &client,
            "exec",
            json!({"world": "tool", "command": command}),
        )
        .await;
        assert_ne!(x["exit_code"], 0, "{command:?}: {x}");
        let said = x.to_string();
        assert!(
            said.contains("a person's decision") || said.contains("is a person's to do"),
            "{command:?}: {x}"
        );
    }
    assert!(env.worktree("mine").is_dir());

    // The agent's world with uncommitted work: dirty, kept.
    let (err, up) = call(&client, "up", json!({"world": "agent"})).await;
    assert!(!err, "{up}");
    assert_eq!(up["created"], true, "{up}");
    std::fs::write(env.worktree("agent").join("work.txt"), "unsaved\n").unwrap();
    let (err, v) = call(&client, "remove", json!({"world": "agent"})).await;
    assert!(err, "{v}");
    assert_eq!(code(&v), "dirty", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("work.txt"),
        "{v}"
    );
    assert!(env.worktree("agent").join("work.txt").is_file());
    // Committed: removed.
    git_in(&env.worktree("agent"), &["add", "work.txt"]);
    git_in(&env.worktree("agent"), &["commit", "-qm", "work"]);
    let (err, v) = call(&client, "remove", json!({"world": "agent"})).await;
    assert!(!err, "{v}");
    assert!(!env.worktree("agent").exists());

    // The same name made again by a person is theirs, not the agent's.
    env.ok(&["up", "agent"]);
    let (err, v) = call(&client, "remove", json!({"world": "agent"})).await;
    assert!(err && code(&v) == "refused", "{v}");
    // Also when the agent's world was removed by the person and made again (the agent's
    // record names the old world's id, never given again).
    env.ok(&["remove", "tool"]);
    env.ok(&["up", "tool"]);
    let (err, v) = call(&client, "remove", json!({"world": "tool"})).await;
    assert!(err && code(&v) == "refused", "{v}");

    // The person allows it: any clean world.
    env.ok(&["settings", "mcp_remove_any=true"]);
    for w in ["mine", "agent", "tool"] {
        let (err, v) = call(&client, "remove", json!({"world": w})).await;
        assert!(!err, "{w}: {v}");
    }
    client.cancel().await.unwrap();
    env.assert_nothing_left(&["mine", "agent", "tool"]);
}

/// The session a process is in (`/proc/PID/stat`'s sixth field).
fn session_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..]
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()
}

/// The pid a script wrote to `file`, once it has.
fn pid_in(file: &std::path::Path) -> u32 {
    wait_until(
        &format!("{} is written", file.display()),
        Duration::from_secs(20),
        || std::fs::read_to_string(file).is_ok_and(|s| s.trim().parse::<u32>().is_ok()),
    );
    std::fs::read_to_string(file)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

// Two threads: the test's waits block one while the client's transport runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_or_finished_exec_leaves_no_descendant_not_even_a_setsid_one() {
    let env = Env::new(&config());
    env.ok(&["up", "w"]);
    let client = connect(&env).await;
    let (cmd_file, escapee_file) = (
        env.dir.path().join("cmd.pid"),
        env.dir.path().join("escapee.pid"),
    );
    // The command, and a grandchild that left its session (and so its process group).
    let script = format!(
        "setsid sh -c 'echo $$ > {e}; exec sleep 300' & echo $$ > {c}; exec sleep 300",
        e = escapee_file.display(),
        c = cmd_file.display()
    );
    let args = json!({"world": "w", "command": ["sh", "-c", script], "timeout_seconds": 600});
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new("exec").with_arguments(args.as_object().unwrap().clone()),
    ));
    let handle = client
        .peer()
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    let (cmd, escapee) = (pid_in(&cmd_file), pid_in(&escapee_file));
    wait_until(
        "the grandchild is in a session of its own",
        Duration::from_secs(10),
        || session_of(escapee) == Some(escapee),
    );
    assert_ne!(session_of(cmd), session_of(escapee));
    handle.cancel(Some("test".into())).await.unwrap();
    wait_until(
        "the command and its setsid grandchild are gone",
        Duration::from_secs(5),
        || !alive(cmd) && !alive(escapee),
    );

    // A command that exits by itself takes what it started with it, setsid or not.
    let script = format!("setsid sleep 300 & echo $! > {}", escapee_file.display());
    let _ = std::fs::remove_file(&escapee_file);
    let (err, v) = call(
        &client,
        "exec",
        json!({"world": "w", "command": ["sh", "-c", script]}),
    )
    .await;
    assert!(!err, "{v}");
    let escapee = pid_in(&escapee_file);
    wait_until(
        "the setsid child of a finished exec is gone",
        Duration::from_secs(5),
        || !alive(escapee),
    );
    // The world's own processes are untouched.
    let (err, st) = call(&client, "status", json!({"world": "w"})).await;
    assert!(!err && st["state"] == "ready", "{st}");
    client.cancel().await.unwrap();
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_apply_of_an_edit_that_needs_approval_answers_held() {
    let env = Env::new(&config());
    env.ok(&["settings", "approvals=true"]);
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    env.ok(&["approve", "--all", "w", "--yes"]);
    env.ok(&["up", "w"]);
    let client = connect(&env).await;
    // A new command for `web`: nothing runs it until a person approves it.
    let file = env.worktree("w").join("binky.toml");
    let edited =
        std::fs::read_to_string(&file)
            .unwrap()
            .replacen(SERVE, &format!("{SERVE} edited"), 1);
    assert!(edited.contains("edited"), "{edited}");
    std::fs::write(&file, edited).unwrap();
    let (err, v) = call(&client, "apply", json!({"world": "w"})).await;
    assert!(err, "{v}");
    assert_eq!(code(&v), "held", "{v}");
    let text = v["error"].to_string();
    assert!(text.contains("edited"), "the new command is named: {v}");
    assert!(
        !text.contains("binky approve"),
        "the agent is told to approve: {v}"
    );
    assert!(!v["waiting"].as_array().unwrap().is_empty(), "{v}");
    client.cancel().await.unwrap();
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

/// A project whose one service takes ten minutes to listen: `up` cannot finish.
fn slow_config() -> String {
    format!(
        r#"
[project]
name = "mcp"
{{range}}

[services.slow]
cmd = "{SERVE}"
url = true
env = {{ LISTEN_DELAY = "600" }}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_up_leaves_the_world_it_made_as_the_agents_to_remove() {
    let env = Env::new(&slow_config());
    let client = connect(&env).await;
    let args = json!({"world": "late"});
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new("up").with_arguments(args.as_object().unwrap().clone()),
    ));
    let handle = client
        .peer()
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    let made = || {
        env.status()["worlds"]
            .as_array()
            .is_some_and(|a| a.iter().any(|w| w["name"] == "late"))
    };
    wait_until("`up` has made the world", Duration::from_secs(30), made);
    // This test's `binky up` (its home is in its environment).
    let home = format!("BINKY_HOME={}", env.home.display());
    let ups = || {
        binky_testkit::procs::with_cmdline(&[" up ", " -- late"])
            .into_iter()
            .filter(|p| {
                std::fs::read(format!("/proc/{p}/environ"))
                    .is_ok_and(|e| e.split(|b| *b == 0).any(|v| v == home.as_bytes()))
            })
            .collect::<Vec<_>>()
    };
    assert!(!ups().is_empty(), "`binky up` ended before the cancel");
    handle.cancel(Some("test".into())).await.unwrap();
    wait_until("`binky up` is gone", Duration::from_secs(5), || {
        ups().is_empty()
    });
    // The world stays (the daemon goes on making it) and is the agent's: `remove` takes it.
    assert!(made(), "the cancelled up's world is gone");
    let (err, v) = call(&client, "remove", json!({"world": "late"})).await;
    assert!(!err, "{v}");
    assert!(!env.worktree("late").exists());
    client.cancel().await.unwrap();
    env.assert_nothing_left(&["late"]);
}
