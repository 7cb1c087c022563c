//! A world name two projects use: reached in either with `project` or `root`, from a server
//! started inside one repository or outside both, where the person allowed agents to act
//! on both; ambiguous without them, saying which. And without the person's leave, a server
//! acts on its own repository's project alone.

use serde_json::json;

use super::{call, code, config, connect, connect_in};
use crate::harness::*;

#[tokio::test]
async fn every_tool_reaches_a_world_name_two_projects_use() {
    let env = Env::new(&config());
    // The person lets agents act on every project (an MCP server otherwise acts on its own
    // repository's alone: `an_mcp_server_acts_on_its_own_project_and_those_a_person_allowed`).
    env.ok(&["settings", "agent_projects=*"]);
    env.ok(&["up", "w"]);
    // A second project in the same home with a world of the same name.
    let other = env.other_project("other");
    let up = env.binky_in(&other, &["up", "w"]);
    assert!(up.status.success(), "{}", stderr(&up));

    // A server started outside both repositories: without `project`, ambiguous.
    let outside = connect_in(&env, env.dir.path()).await;
    for tool in [
        "status", "env", "events", "logs", "down", "wait", "verify", "apply",
    ] {
        let (err, v) = call(&outside, tool, json!({"world": "w"})).await;
        assert!(err, "{tool}: {v}");
        assert_eq!(code(&v), "ambiguous", "{tool}: {v}");
        let fix = v["error"]["fix"].as_str().unwrap();
        assert!(
            fix.contains("`project` (one of: mcp, other)"),
            "{tool}: {fix}"
        );
        assert!(
            !v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("run the command inside"),
            "{tool}: {v}"
        );
        // The projects as data, whether the tool asked in its own process or ran a binky
        // command that reported them; the report line itself is never shown.
        assert_eq!(v["projects"], json!(["mcp", "other"]), "{tool}: {v}");
        assert!(!v.to_string().contains("binky_failure"), "{tool}: {v}");
    }
    // With `project`, every tool reaches the one asked for.
    for (project, service) in [("mcp", "api"), ("other", "job")] {
        let (err, st) = call(
            &outside,
            "status",
            json!({"world": "w", "project": project}),
        )
        .await;
        assert!(!err, "{st}");
        assert_eq!(st["project"], project, "{st}");
        let (err, e) = call(&outside, "env", json!({"world": "w", "project": project})).await;
        assert!(!err, "{e}");
        assert_eq!(e["env"]["BINKY_PROJECT"], project, "{e}");
        let (err, ev) = call(
            &outside,
            "events",
            json!({"world": "w", "project": project}),
        )
        .await;
        assert!(!err, "{ev}");
        assert!(
            ev["events"]
                .as_array()
                .unwrap()
                .iter()
                .all(|e| e["project"] == project),
            "{ev}"
        );
        let (err, l) = call(
            &outside,
            "logs",
            json!({"world": "w", "project": project, "service": service}),
        )
        .await;
        assert!(!err, "{l}");
        let (err, w) = call(&outside, "wait", json!({"world": "w", "project": project})).await;
        assert!(!err, "{w}");
        assert_eq!(w["project"], project, "{w}");
        let (err, x) = call(&outside, "exec", json!({"world": "w", "project": project, "command": ["sh", "-c", "echo $BINKY_PROJECT"]})).await;
        assert!(!err, "{x}");
        assert_eq!(x["stdout"], format!("{project}\n"), "{x}");
        let (err, l) = call(&outside, "list", json!({"project": project})).await;
        assert!(!err, "{l}");
        assert_eq!(l["worlds"].as_array().unwrap().len(), 1, "{l}");
    }
    // A new world with neither: the server is not in a repository, so say what to pass.
    let (err, v) = call(&outside, "up", json!({"world": "new"})).await;
    assert!(err, "{v}");
    assert_eq!(code(&v), "invalid_argument", "{v}");
    assert!(
        v["error"]["fix"].as_str().unwrap().contains("pass `root`"),
        "{v}"
    );
    let (err, nope) = call(&outside, "status", json!({"world": "w", "project": "nope"})).await;
    assert!(err, "{nope}");
    assert_eq!(code(&nope), "not_found", "{nope}");
    assert!(
        nope["error"]["message"]
            .as_str()
            .unwrap()
            .contains("projects: mcp, other"),
        "{nope}"
    );
    // down through `project` stops that one only.
    let (err, down) = call(&outside, "down", json!({"world": "w", "project": "other"})).await;
    assert!(!err, "{down}");
    assert_eq!(down["project"], "other", "{down}");
    let (_, mine) = call(&outside, "status", json!({"world": "w", "project": "mcp"})).await;
    assert_eq!(
        mine["state"], "ready",
        "the other project's down stopped this one: {mine}"
    );
    outside.cancel().await.unwrap();

    // Inside the repository: its project by default, the other through `root` (and
    // binky 0.1.2's `worktree`).
    let client = connect(&env).await;
    let root = other.display().to_string();
    let (err, st) = call(&client, "status", json!({"worktree": "w"})).await;
    assert!(!err, "{st}");
    assert_eq!(st["project"], "mcp", "without root: the server's directory");
    let (err, st) = call(&client, "status", json!({"worktree": "w", "root": root})).await;
    assert!(!err, "{st}");
    assert_eq!(st["project"], "other", "{st}");
    assert_eq!(st["state"], "stopped", "{st}");
    let (err, up) = call(&client, "up", json!({"world": "w", "root": root})).await;
    assert!(!err, "{up}");
    assert_eq!(up["project"], "other", "{up}");
    let (err, l) = call(&client, "list", json!({"root": root})).await;
    assert!(!err, "{l}");
    assert_eq!(l["worlds"][0]["project"], "other", "{l}");
    client.cancel().await.unwrap();
    env.binky_in(&other, &["remove", "w"]);
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// A fresh repository beside a project that has a world of the name: `root` (or the
/// server's own directory) never reaches into the other project, and `up` there makes the
/// repository's own world, the agent's to remove.
#[tokio::test]
async fn a_world_name_never_reaches_another_projects_world_from_a_fresh_repository() {
    let env = Env::new(&config());
    // The server started outside both repositories may act on this one's project.
    env.ok(&["settings", "agent_projects=mcp"]);
    let alpha = env.other_project("alpha");
    let up = env.binky_in(&alpha, &["up", "clionly"]);
    assert!(up.status.success(), "{}", stderr(&up));
    let root = env.repo.display().to_string();

    for client in [connect(&env).await, connect_in(&env, env.dir.path()).await] {
        for (tool, args) in [
            ("status", json!({"world": "clionly", "root": root})),
            ("env", json!({"world": "clionly", "root": root})),
            ("down", json!({"world": "clionly", "root": root})),
            ("remove", json!({"world": "clionly", "root": root})),
            (
                "exec",
                json!({"world": "clionly", "root": root, "command": ["sh", "-c", "echo $BINKY_PROJECT"]}),
            ),
        ] {
            let (err, v) = call(&client, tool, args).await;
            assert!(err, "{tool} reached alpha's world: {v}");
            assert_eq!(code(&v), "not_found", "{tool}: {v}");
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("project alpha has a world `clionly`"),
                "{tool}: {v}"
            );
        }
        client.cancel().await.unwrap();
    }
    let st = env.binky_in(&alpha, &["status", "clionly", "--json"]);
    assert!(
        st.status.success(),
        "alpha's world is gone: {}",
        stderr(&st)
    );

    // `up` with that root makes the repository's own world, which the agent may remove.
    let client = connect(&env).await;
    let (err, up) = call(&client, "up", json!({"world": "clionly", "root": root})).await;
    assert!(!err, "{up}");
    assert_eq!(up["project"], "mcp", "{up}");
    assert_eq!(up["created"], true, "{up}");
    let (err, x) = call(
        &client,
        "exec",
        json!({"world": "clionly", "root": root, "command": ["sh", "-c", "echo $BINKY_PROJECT"]}),
    )
    .await;
    assert!(!err, "{x}");
    assert_eq!(x["stdout"], "mcp\n", "{x}");
    let (err, rm) = call(&client, "remove", json!({"world": "clionly", "root": root})).await;
    assert!(!err, "{rm}");
    client.cancel().await.unwrap();
    let st = env.binky_in(&alpha, &["status", "clionly", "--json"]);
    assert!(
        st.status.success(),
        "alpha's world went too: {}",
        stderr(&st)
    );
    let rm = env.binky_in(&alpha, &["remove", "clionly"]);
    assert!(rm.status.success(), "{}", stderr(&rm));
    env.assert_nothing_left(&["clionly"]);
}

/// An MCP server acts on the project of the repository it was started in: naming another
/// project (`project` or `root`) for exec, down, up or any tool is refused, saying who may
/// allow it, and nothing happens; the listing shows its own project alone; a shell of its
/// own world running the CLI in the other repository is refused the same. Once the person
/// lists the other project (`agent_projects`), both may. A server started outside any
/// repository has no project of its own: only listed ones, named in each call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_server_acts_on_its_own_project_and_those_a_person_allowed() {
    let env = Env::new(&config());
    env.ok(&["up", "w"]);
    let other = env.other_project("other");
    let up = env.binky_in(&other, &["up", "x"]);
    assert!(up.status.success(), "{}", stderr(&up));
    let job = || {
        let out = env.binky_in(&other, &["status", "x", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (v["state"].clone(), v["services"][0]["pid"].clone())
    };
    let before = job();
    assert_eq!(before.0, "ready", "{before:?}");
    let client = connect(&env).await;
    let root = other.display().to_string();
    let exec = json!(["sh", "-c", "echo ran > ran-by-the-agent.txt"]);
    for by in [json!({"project": "other"}), json!({"root": root})] {
        for (tool, mut args) in [
            ("exec", json!({"world": "x", "command": exec})),
            ("down", json!({"world": "x"})),
            ("up", json!({"world": "x"})),
            ("up", json!({"world": "new"})),
            ("reload", json!({"world": "x"})),
            ("remove", json!({"world": "x"})),
            ("status", json!({"world": "x"})),
            ("env", json!({"world": "x"})),
            ("logs", json!({"world": "x"})),
            ("events", json!({"world": "x"})),
            ("list", json!({})),
        ] {
            for (k, v) in by.as_object().unwrap() {
                args[k] = v.clone();
            }
            let (err, v) = call(&client, tool, args.clone()).await;
            assert!(err, "{tool} {args}: {v}");
            assert_eq!(code(&v), "refused", "{tool} {args}: {v}");
            let message = v["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("project `other` is not this MCP server's to act on"),
                "{tool}: {v}"
            );
            assert!(
                v["error"]["fix"]
                    .as_str()
                    .unwrap()
                    .contains("binky settings agent_projects="),
                "{tool}: {v}"
            );
        }
    }
    // The listing shows this project's worlds alone.
    let (err, l) = call(&client, "list", json!({})).await;
    assert!(!err, "{l}");
    let listed: Vec<&str> = l["worlds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["project"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["mcp"], "{l}");
    // Through its own world's shell, the CLI refuses the other project's worlds too.
    let bin = binky_bin();
    for line in [
        format!("cd '{root}' && '{bin}' down x"),
        format!("cd '{root}' && '{bin}' exec x -- touch ran-by-the-agent.txt"),
        format!("cd '{root}' && '{bin}' up fresh"),
        format!("cd '{root}' && env -u BINKY_SPAWNED_IN '{bin}' env x"),
        format!("cd '{root}' && '{bin}' events x"),
    ] {
        let (err, x) = call(
            &client,
            "exec",
            json!({"world": "w", "command": ["sh", "-c", line]}),
        )
        .await;
        assert!(err, "{line}: {x}");
        assert!(
            x["stderr"]
                .as_str()
                .unwrap()
                .contains("project `other` is not this agent's to act on"),
            "{line}: {x}"
        );
    }
    // Nothing happened to the other project.
    assert_eq!(job(), before, "the other project's world was touched");
    assert!(!env
        .dir
        .path()
        .join("other.worktrees/x/ran-by-the-agent.txt")
        .exists());
    let st = env.binky_in(&other, &["status", "new", "--json"]);
    assert!(
        !st.status.success(),
        "a world was made in the other project"
    );

    // The person allows it: both ways work.
    env.ok(&["settings", "agent_projects=other"]);
    let (err, d) = call(&client, "down", json!({"world": "x", "project": "other"})).await;
    assert!(!err, "{d}");
    assert_eq!(d["project"], "other", "{d}");
    let (err, x) = call(
        &client,
        "exec",
        json!({"world": "w", "command": ["sh", "-c", format!("cd '{root}' && '{bin}' up x -q")]}),
    )
    .await;
    assert!(!err, "{x}");
    client.cancel().await.unwrap();

    // Outside any repository: no project of its own, only those listed, named in the call.
    let outside = connect_in(&env, env.dir.path()).await;
    let (err, v) = call(&outside, "status", json!({"world": "w"})).await;
    assert!(err, "{v}");
    assert_eq!(code(&v), "invalid_argument", "{v}");
    assert!(
        v["error"]["fix"]
            .as_str()
            .unwrap()
            .contains("allowed: other"),
        "{v}"
    );
    let (err, v) = call(&outside, "status", json!({"world": "w", "project": "mcp"})).await;
    assert!(err && code(&v) == "refused", "{v}");
    let (err, v) = call(
        &outside,
        "status",
        json!({"world": "x", "project": "other"}),
    )
    .await;
    assert!(!err, "{v}");
    outside.cancel().await.unwrap();
    let out = env.binky_in(&other, &["remove", "x"]);
    assert!(out.status.success(), "{}", stderr(&out));
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
