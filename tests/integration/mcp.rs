//! `binky mcp`: rmcp's own client over the real `binky mcp` process, driving a real world;
//! and `binky mcp install` for each client, into a temp HOME.

use std::path::Path;
use std::process::Command;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

use crate::harness::*;

fn config() -> String {
    format!(
        r#"
[project]
name = "mcp"
{{range}}

[services.api]
cmd = "{SERVE}"
url = true

[services.web]
cmd = "{SERVE}"
url = true
depends_on = ["api"]
env = {{ API = "${{api.url}}" }}

[agents]
verify = ["test -n \"$API_URL\" && echo api at $API_PORT"]
"#
    )
}

/// `binky mcp` in the test's repository, with the test's home.
pub(crate) async fn connect(env: &Env) -> RunningService<RoleClient, ()> {
    let cmd = tokio::process::Command::new(binky_bin()).configure(|c| {
        c.arg("mcp")
            .current_dir(&env.repo)
            .env("BINKY_HOME", &env.home)
            .env_remove("BINKY_WORKTREE_ROOT");
    });
    ().serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap()
}

/// Call a tool: (is it an error, its structured content).
pub(crate) async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    args: Value,
) -> (bool, Value) {
    let args = args.as_object().unwrap().clone();
    let r = client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap();
    let content = r.structured_content.clone().unwrap_or(Value::Null);
    (r.is_error == Some(true), content)
}

#[tokio::test]
async fn mcp_tools_bring_a_world_up_inspect_it_and_stop_it() {
    let env = Env::new(&config());
    let client = connect(&env).await;

    let mut tools: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.into_owned())
        .collect();
    tools.sort();
    assert_eq!(
        tools,
        ["curl", "down", "env", "events", "logs", "reload", "status", "up", "verify"]
    );
    let instructions = client
        .peer_info()
        .and_then(|i| i.instructions.clone())
        .unwrap_or_default();
    assert!(instructions.contains("binky remove NAME"), "{instructions}");

    // up: done, and the status afterwards.
    let root = env.repo.display().to_string();
    let (err, up) = call(&client, "up", json!({"world": "w", "root": root})).await;
    assert!(!err, "{up}");
    assert_eq!(up["ok"], true, "{up}");
    assert_eq!(up["exit_code"], 0, "{up}");
    assert_eq!(up["status"]["name"], "w", "{up}");

    // status: both services running, on ports.
    let (err, st) = call(&client, "status", json!({"world": "w"})).await;
    assert!(!err, "{st}");
    assert_eq!(st["state"], "ready", "{st}");
    let services = st["services"].as_array().unwrap();
    assert_eq!(services.len(), 2, "{st}");
    for s in services {
        assert_eq!(s["state"], "running", "{s}");
        assert!(s["pid"].as_u64().is_some(), "{s}");
        assert!(s["ports"].as_object().is_some_and(|p| !p.is_empty()), "{s}");
    }
    let (err, all) = call(&client, "status", json!({})).await;
    assert!(!err, "{all}");
    assert_eq!(all["worlds"][0]["name"], "w", "{all}");

    // env: the same as the CLI's.
    let (err, e) = call(&client, "env", json!({"world": "w"})).await;
    assert!(!err, "{e}");
    let api_port = env.port_of("w", "api");
    assert_eq!(e["env"]["API_PORT"], api_port.to_string(), "{e}");
    assert_eq!(e["env"]["API_URL"], env.env_of("w")["API_URL"], "{e}");
    assert!(e["env"]["WEB_URL"].is_string(), "{e}");

    // curl: through the proxy to the service, which answers with its environment.
    let (err, c) = call(
        &client,
        "curl",
        json!({"world": "w", "service": "web", "path": "/"}),
    )
    .await;
    assert!(!err, "{c}");
    assert_eq!(c["status"], 200, "{c}");
    // The service's `${api.url}` is api's direct address.
    assert_eq!(
        c["json"]["API"],
        format!("http://localhost:{api_port}"),
        "{c}"
    );

    // logs: what the services printed.
    let (err, logs) = call(
        &client,
        "logs",
        json!({"world": "w", "service": "api", "lines": 20}),
    )
    .await;
    assert!(!err, "{logs}");
    let lines = logs["lines"].as_array().unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l["line"] == format!("listening on {api_port}")),
        "{logs}"
    );

    // verify: the one command passes, with the world's environment.
    let (err, v) = call(&client, "verify", json!({"world": "w"})).await;
    assert!(!err, "{v}");
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["results"][0]["ok"], true, "{v}");
    assert!(
        v["results"][0]["output_tail"]
            .as_str()
            .is_some_and(|t| t.contains(&format!("api at {api_port}"))),
        "{v}"
    );

    // events: what binky did.
    let (err, ev) = call(&client, "events", json!({"world": "w"})).await;
    assert!(!err, "{ev}");
    assert!(
        ev["events"].as_array().is_some_and(|a| !a.is_empty()),
        "{ev}"
    );

    // An unknown world: the error names the worlds there are.
    for tool in [
        "env", "logs", "down", "reload", "status", "verify", "events",
    ] {
        let (err, nope) = call(&client, tool, json!({"world": "nope"})).await;
        assert!(err, "{tool}: {nope}");
        assert_eq!(
            nope["error"], "no world `nope`; worlds: w",
            "{tool}: {nope}"
        );
    }

    // reload: new processes on the same ports.
    let pid = env.pid_of("w", "api");
    let (err, reload) = call(&client, "reload", json!({"world": "w"})).await;
    assert!(!err, "{reload}");
    assert_eq!(reload["ok"], true, "{reload}");
    assert_ne!(env.pid_of("w", "api"), pid);
    assert_eq!(env.port_of("w", "api"), api_port);

    // down: stopped, files and ports kept.
    let (err, down) = call(&client, "down", json!({"world": "w"})).await;
    assert!(!err, "{down}");
    assert_eq!(down["ok"], true, "{down}");
    let (_, st) = call(&client, "status", json!({"world": "w"})).await;
    assert_eq!(st["state"], "stopped", "{st}");

    client.cancel().await.unwrap();
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// `binky mcp install ARGS` with HOME at `home`, in `dir`.
fn install(home: &Path, dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(binky_bin())
        .args(["mcp", "install"])
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("BINKY_HOME", home.join("binky"))
        .output()
        .unwrap();
    (
        out.status.success(),
        format!("{}{}", stdout(&out), stderr(&out)),
    )
}

#[test]
fn mcp_install_dry_run_writes_nothing_and_install_keeps_other_servers() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let project = tmp.path().join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    // The paths as getcwd reports them.
    let (home, project) = (
        home.canonicalize().unwrap(),
        project.canonicalize().unwrap(),
    );
    let exe = Path::new(binky_bin()).canonicalize().unwrap();
    let exe = exe.to_str().unwrap();

    for (client, file) in [
        ("claude", project.join(".mcp.json")),
        ("cursor", home.join(".cursor/mcp.json")),
        ("codex", home.join(".codex/config.toml")),
    ] {
        let (ok, out) = install(&home, &project, &["--client", client, "--dry-run"]);
        assert!(ok, "{client}: {out}");
        assert!(out.contains(&file.display().to_string()), "{client}: {out}");
        assert!(out.contains(exe), "{client}: {out}");
        assert!(out.contains("mcp"), "{client}: {out}");
    }
    assert_eq!(
        std::fs::read_dir(&home).unwrap().count(),
        0,
        "dry run wrote"
    );
    assert_eq!(
        std::fs::read_dir(&project).unwrap().count(),
        0,
        "dry run wrote"
    );

    // Cursor: merged into an existing file, its other server and keys kept; twice is once.
    let cursor = home.join(".cursor/mcp.json");
    std::fs::create_dir_all(cursor.parent().unwrap()).unwrap();
    std::fs::write(
        &cursor,
        r#"{"mcpServers": {"other": {"command": "/usr/bin/other", "args": ["serve"]}}, "keep": 1}"#,
    )
    .unwrap();
    for _ in 0..2 {
        let (ok, out) = install(&home, &project, &["--client", "cursor"]);
        assert!(ok, "{out}");
    }
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&cursor).unwrap()).unwrap();
    assert_eq!(v["keep"], 1, "{v}");
    assert_eq!(v["mcpServers"]["other"]["command"], "/usr/bin/other", "{v}");
    assert_eq!(v["mcpServers"]["binky"]["command"], exe, "{v}");
    assert_eq!(v["mcpServers"]["binky"]["args"], json!(["mcp"]), "{v}");

    // Codex: a [mcp_servers.binky] table next to the others.
    let codex = home.join(".codex/config.toml");
    std::fs::create_dir_all(codex.parent().unwrap()).unwrap();
    std::fs::write(
        &codex,
        "model = \"o3\"\n\n[mcp_servers.other]\ncommand = \"/usr/bin/other\"\n",
    )
    .unwrap();
    let (ok, out) = install(&home, &project, &["--client", "codex"]);
    assert!(ok, "{out}");
    let text = std::fs::read_to_string(&codex).unwrap();
    assert!(text.contains("model = \"o3\""), "{text}");
    assert!(text.contains("[mcp_servers.other]"), "{text}");
    assert!(text.contains("[mcp_servers.binky]"), "{text}");
    assert!(text.contains(&format!("command = \"{exe}\"")), "{text}");

    // A file it cannot read as its format is left alone.
    std::fs::write(&cursor, "{ not json").unwrap();
    let (ok, out) = install(&home, &project, &["--client", "cursor"]);
    assert!(!ok && out.contains("nothing was written"), "{out}");
    assert_eq!(std::fs::read_to_string(&cursor).unwrap(), "{ not json");
}

#[tokio::test]
async fn mcp_up_held_for_approval_is_pending_not_a_failure() {
    let env = Env::new(&config());
    env.ok(&["settings", "approvals=true"]);
    let client = connect(&env).await;
    let root = env.repo.display().to_string();
    let (err, up) = call(&client, "up", json!({"world": "w", "root": root})).await;
    assert!(!err, "{up}");
    assert_eq!(up["ok"], false, "{up}");
    assert_eq!(up["exit_code"], 75, "{up}");
    assert_eq!(up["pending"], true, "{up}");
    assert!(
        up["output"]
            .as_str()
            .is_some_and(|o| o.contains("binky approve")),
        "{up}"
    );
    assert_eq!(up["status"]["state"], "approval", "{up}");
    client.cancel().await.unwrap();
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[tokio::test]
async fn every_tool_takes_root_and_binky_012s_worktree_argument() {
    let env = Env::new(&config());
    env.ok(&["up", "w"]);
    // A second project in the same home with a world of the same name.
    let other = env.other_project("other");
    let up = env.binky_in(&other, &["up", "w"]);
    assert!(up.status.success(), "{}", stderr(&up));

    let client = connect(&env).await;
    let root = other.display().to_string();
    // `worktree` names the world as in 0.1.2; `root` picks the project.
    let (err, st) = call(&client, "status", json!({"worktree": "w", "root": root})).await;
    assert!(!err, "{st}");
    assert_eq!(st["project"], "other", "{st}");
    let (err, st) = call(&client, "status", json!({"worktree": "w"})).await;
    assert!(!err, "{st}");
    assert_eq!(st["project"], "mcp", "without root: the server's directory");
    let (err, ev) = call(&client, "events", json!({"worktree": "w", "root": root})).await;
    assert!(!err, "{ev}");
    assert!(
        ev["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["project"] == "other"),
        "{ev}"
    );
    let (err, down) = call(&client, "down", json!({"worktree": "w", "root": root})).await;
    assert!(!err, "{down}");
    let (_, mine) = call(&client, "status", json!({"world": "w"})).await;
    assert_eq!(
        mine["state"], "ready",
        "the other project's down stopped this one: {mine}"
    );
    let (_, theirs) = call(&client, "status", json!({"world": "w", "root": root})).await;
    assert_eq!(theirs["state"], "stopped", "{theirs}");
    // A root that is not a directory is refused, naming it.
    let (err, bad) = call(
        &client,
        "env",
        json!({"world": "w", "root": "/nonexistent/x"}),
    )
    .await;
    assert!(err, "{bad}");
    assert!(
        bad["error"].as_str().unwrap().contains("/nonexistent/x"),
        "{bad}"
    );
    client.cancel().await.unwrap();
    env.binky_in(&other, &["remove", "w"]);
    env.ok(&["remove", "w"]);
}
