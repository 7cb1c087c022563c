//! What an agent must never reach: another project's world of the same name, and the
//! person-only actions (approving, the machine's settings) from any process binky started;
//! and, with approvals on, `binky exec` runs only what a person approved.

use crate::harness::*;

const CONFIG: &str = r#"
[project]
name = "mine"
{range}

[services.api]
cmd = "exec python3 server.py ${self.port}"
url = true
"#;

/// A fresh repository beside a project that has a world of the name: the name never
/// reaches into the other project, from the CLI run in the repository.
#[test]
fn a_world_name_never_reaches_another_projects_world_from_a_fresh_repository() {
    let env = Env::new(CONFIG);
    let alpha = env.other_project("alpha");
    let out = env.binky_in(&alpha, &["up", "clionly"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // In `mine`'s repository, which has no world yet.
    for args in [
        vec!["exec", "clionly", "--", "sh", "-c", "echo $BINKY_PROJECT"],
        vec!["status", "clionly"],
        vec!["logs", "clionly"],
        vec!["down", "clionly"],
        vec!["remove", "clionly"],
    ] {
        let out = env.binky(&args);
        assert!(
            !out.status.success(),
            "{args:?} reached alpha's world: {}",
            stdout(&out)
        );
        let err = stderr(&out);
        assert!(
            err.contains("no world `clionly` in the repository")
                && err.contains("project alpha has a world `clionly`"),
            "{args:?}: {err}"
        );
    }
    // alpha's world is untouched; `up` here makes this project's own.
    let out = env.binky_in(&alpha, &["status", "clionly", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    env.ok(&["up", "clionly"]);
    let out = env.binky(&["exec", "clionly", "--", "sh", "-c", "echo $BINKY_PROJECT"]);
    assert_eq!(stdout(&out).trim(), "mine", "{}", stderr(&out));
    let out = env.binky_in(
        &alpha,
        &["exec", "clionly", "--", "sh", "-c", "echo $BINKY_PROJECT"],
    );
    assert_eq!(stdout(&out).trim(), "alpha", "{}", stderr(&out));
    env.ok(&["remove", "clionly"]);
    let out = env.binky_in(&alpha, &["remove", "clionly"]);
    assert!(out.status.success(), "{}", stderr(&out));
    env.assert_nothing_left(&["clionly"]);
}

/// Approving and the machine's settings are a person's: refused from `binky exec`, also
/// with the mark dropped (`env -u`), and from a service's own command; a person's shell
/// may.
#[test]
fn person_only_actions_are_refused_from_any_process_binky_started() {
    let bin = binky_bin();
    let env = Env::new(&format!(
        r#"
[project]
name = "guarded"
{{range}}

[services.api]
cmd = "'{bin}' settings mcp_remove_any=true > settings-from-service.txt 2>&1; exec python3 server.py ${{self.port}}"
url = true
"#
    ));
    env.ok(&["up", "w"]);
    let wt = env.worktree("w");
    let said = std::fs::read_to_string(wt.join("settings-from-service.txt")).unwrap();
    assert!(
        said.contains("is a person's to do") && said.contains("it runs in world guarded/w"),
        "{said}"
    );
    for argv in [
        vec![bin, "settings", "mcp_remove_any=true"],
        vec![
            "env",
            "-u",
            "BINKY_SPAWNED_IN",
            bin,
            "settings",
            "mcp_remove_any=true",
        ],
        vec![bin, "approve", "--exec", "rm *"],
        vec![
            "setsid",
            "--wait",
            "env",
            "-u",
            "BINKY_SPAWNED_IN",
            bin,
            "settings",
            "approvals=false",
        ],
    ] {
        let mut args = vec!["exec", "w", "--"];
        args.extend(argv.iter().copied());
        let out = env.binky(&args);
        assert!(!out.status.success(), "{argv:?} ran: {}", stdout(&out));
        let err = stderr(&out);
        assert!(err.contains("is a person's to do"), "{argv:?}: {err}");
    }
    // The dashboard's sign-in link is a person's too (its buttons approve): refused from
    // `binky exec`, and the daemon itself refuses the token to a process binky started
    // that asks its socket directly.
    let out = env.binky(&["exec", "w", "--", bin, "dashboard", "--no-open"]);
    assert!(!out.status.success(), "a link: {}", stdout(&out));
    assert!(
        stderr(&out).contains("is a person's to do"),
        "{}",
        stderr(&out)
    );
    let socket = binky::paths::Home::at(env.home.clone()).socket();
    let ask = format!(
        "import socket; s = socket.socket(socket.AF_UNIX); s.connect({:?}); s.sendall(b'{{\"op\":\"dashboard_token\"}}\\n'); print(s.makefile().readline())",
        socket.display().to_string()
    );
    let out = env.binky(&["exec", "w", "--", "python3", "-c", &ask]);
    let answer = stdout(&out);
    assert!(
        answer.contains("is a person's to do") && !answer.contains("\"token\""),
        "{answer}{}",
        stderr(&out)
    );
    // A person's world is not removed from a process binky started (an agent's MCP `exec`
    // of `binky remove`): `binky mcp`'s own remove would refuse it too.
    env.ok(&["up", "persons"]);
    let out = env.binky(&["exec", "w", "--", bin, "remove", "persons", "--force"]);
    assert!(!out.status.success(), "removed: {}", stdout(&out));
    assert!(
        stderr(&out)
            .contains("removing world `persons` (its worktree and data) is a person's decision"),
        "{}",
        stderr(&out)
    );
    assert!(env.status()["worlds"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["name"] == "persons"));
    // Nothing changed.
    let settings = env.ok(&["settings", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&settings).unwrap();
    assert_eq!(v["mcp_remove_any"], "false", "{settings}");
    // A person's shell may.
    env.ok(&["settings", "mcp_remove_any=true"]);
    env.ok(&["settings", "mcp_remove_any=false"]);
    std::fs::remove_file(wt.join("settings-from-service.txt")).unwrap();
    env.ok(&["remove", "persons", "--force"]);
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w", "persons"]);
}

/// A person's channel is a terminal (or the dashboard): a shell binky did not start but
/// that has no terminal — an agent's own, a pipe, a script — may not approve, change the
/// machine's settings or get the dashboard's sign-in link, `--yes` or not. At a terminal
/// the same commands do.
#[test]
fn person_only_actions_need_a_terminal() {
    let env = Env::new(CONFIG);
    env.ok(&["up", "w"]);
    env.ok(&["settings", "approvals=true"]);
    let without_terminal = |args: &[&str]| {
        std::process::Command::new(binky_bin())
            .args(args)
            .current_dir(&env.repo)
            .env("BINKY_HOME", &env.home)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    for args in [
        vec!["approve", "--all", "w", "--yes"],
        vec!["approve", "--exec", "git status*"],
        vec!["settings", "approvals=false"],
        vec!["settings", "mcp_remove_any=true"],
        vec!["dashboard", "--no-open"],
    ] {
        let out = without_terminal(&args);
        assert!(!out.status.success(), "{args:?} ran: {}", stdout(&out));
        assert!(
            stderr(&out).contains("needs a person at a terminal"),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(
            !stdout(&out).contains("token="),
            "{args:?}: {}",
            stdout(&out)
        );
    }
    // Nothing changed: approvals on, nothing approved, agents may not remove any world.
    let v: serde_json::Value = serde_json::from_str(&env.ok(&["settings", "--json"])).unwrap();
    assert_eq!(v["approvals"], "true");
    assert_eq!(v["mcp_remove_any"], "false");
    let listed: serde_json::Value =
        serde_json::from_str(&env.ok(&["approve", "--list", "--json"])).unwrap();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["approved"] == false),
        "{listed}"
    );
    // Reading needs no terminal.
    assert!(without_terminal(&["settings", "--json"]).status.success());
    assert!(without_terminal(&["approve", "--list"]).status.success());
    // At a terminal (the harness gives these one), the person may.
    env.ok(&["approve", "--all", "w", "--yes"]);
    assert!(env
        .ok(&["dashboard", "--no-open"])
        .contains("/login?token="));
    env.ok(&["settings", "approvals=false"]);
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// The events of a removed world stay in its project: a fresh repository beside it (no
/// world of its own) does not see them under the name.
#[test]
fn events_of_another_projects_removed_world_are_not_shown_in_a_fresh_repository() {
    let env = Env::new(CONFIG);
    let alpha = env.other_project("alpha");
    let out = env.binky_in(&alpha, &["up", "gone"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env.binky_in(&alpha, &["remove", "gone"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env.binky_in(&alpha, &["events", "gone"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("gone"), "{}", stdout(&out));
    let out = env.binky(&["events", "gone"]);
    assert!(!out.status.success(), "alpha's history: {}", stdout(&out));
    assert!(
        stderr(&out).contains("no world `gone` in the repository"),
        "{}",
        stderr(&out)
    );
    env.assert_nothing_left(&["gone"]);
}

/// With approvals on, `binky exec` runs only what a person approved: the exact command
/// (listed for the person, approved by its key) or a pattern the person set; nothing else.
#[test]
fn with_approvals_on_exec_runs_only_what_a_person_approved() {
    let env = Env::new(CONFIG);
    env.ok(&["up", "w"]);
    env.ok(&["settings", "approvals=true"]);
    // The world's own commands were approved? No: approve them so the world runs.
    env.ok(&["approve", "--all", "w", "--yes"]);
    let out = env.binky(&["exec", "w", "--", "sh", "-c", "echo ran > ran.txt"]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("waits for a person's approval"), "{err}");
    assert!(
        !env.worktree("w").join("ran.txt").exists(),
        "ran without approval"
    );
    let key = err
        .split("binky approve ")
        .nth(1)
        .and_then(|r| r.split('`').next())
        .unwrap()
        .to_owned();
    let list = env.ok(&["approve", "--list"]);
    assert!(
        list.contains(&key)
            && list.contains("binky exec in w")
            && list.contains("sh -c 'echo ran > ran.txt'"),
        "{list}"
    );
    env.ok(&["approve", &key, "--yes"]);
    env.ok(&["exec", "w", "--", "sh", "-c", "echo ran > ran.txt"]);
    assert!(env.worktree("w").join("ran.txt").exists());
    // Another command is not approved by that; a pattern the person sets is.
    let out = env.binky(&["exec", "w", "--", "git", "status", "--short"]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    env.ok(&["approve", "--exec", "git status*", "--yes"]);
    env.ok(&["exec", "w", "--", "git", "status", "--short"]);
    let out = env.binky(&["exec", "w", "--", "git", "push"]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    env.ok(&["settings", "approvals=false"]);
    std::fs::remove_file(env.worktree("w").join("ran.txt")).unwrap();
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// Every action that reaches beyond the caller's own world — the servers and the daemon
/// every world shares, the machine's trust store and hosts file, other homes' data, the
/// golden templates, an MCP client's configuration — is a person's: refused through MCP's
/// `exec` and from a shell under `binky exec` (also without the mark, in a session of its
/// own, and speaking the daemon's socket itself), with nothing done; the person's own run
/// still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_beyond_the_callers_world_are_refused_from_mcp_exec_and_binky_exec() {
    let bin = binky_bin();
    let env = Env::new(&format!(
        r#"
[project]
name = "guarded"
{{range}}

[services.db]
adapter = "postgres"

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["db"]
"#
    ));
    env.ok(&["up", "w"]);
    let servers = env.our_servers();
    assert!(!servers.is_empty(), "no managed PostgreSQL runs");
    let daemon = env.daemon_pid().expect("a daemon");
    let tag = home_tag(&env.home);
    let ca =
        std::path::Path::new("/usr/local/share/ca-certificates").join(format!("binky-{tag}.crt"));
    // Should a guard fail, the machine's trust store is put back as it was.
    let _untrust = Untrust(&env);
    let hosts = env.dir.path().join("hosts");
    let client_home = env.dir.path().join("client-home");
    std::fs::create_dir_all(&client_home).unwrap();
    let lines: Vec<String> = [
        "servers stop",
        "servers stop postgres",
        "daemon stop",
        "daemon restart",
        "trust",
        "trust --uninstall",
        "gc --yes",
        "golden rm any",
        "hosts --write",
        "hosts --remove",
        "mcp install --client cursor",
    ]
    .iter()
    .map(|args| {
        format!(
            "BINKY_HOSTS_FILE='{}' HOME='{}' '{bin}' {args}",
            hosts.display(),
            client_home.display()
        )
    })
    .collect();
    let client = crate::mcp::connect(&env).await;
    for line in &lines {
        // A shell under `binky exec`, as is and without the mark in a session of its own.
        for shell in [
            vec!["sh", "-c", line.as_str()],
            vec![
                "setsid",
                "--wait",
                "env",
                "-u",
                "BINKY_SPAWNED_IN",
                "sh",
                "-c",
                line.as_str(),
            ],
        ] {
            let mut args = vec!["exec", "w", "--"];
            args.extend(shell.iter().copied());
            let out = env.binky(&args);
            assert!(!out.status.success(), "{shell:?} ran: {}", stdout(&out));
            let err = stderr(&out);
            assert!(
                err.contains("is a person's to do") && err.contains("in their own terminal"),
                "{shell:?}: {err}"
            );
        }
        // MCP's `exec`.
        let (err, x) = crate::mcp::call(
            &client,
            "exec",
            serde_json::json!({"world": "w", "command": ["sh", "-c", line]}),
        )
        .await;
        assert!(err, "{line} ran through MCP: {x}");
        assert_ne!(x["exit_code"], 0, "{line}: {x}");
        assert!(
            x["stderr"]
                .as_str()
                .unwrap_or("")
                .contains("is a person's to do"),
            "{line}: {x}"
        );
    }
    // The daemon's socket, spoken to directly: it refuses the same requests.
    let socket = binky::paths::Home::at(env.home.clone()).socket();
    for op in ["shutdown", "stop_servers"] {
        let ask = format!(
            "import socket; s = socket.socket(socket.AF_UNIX); s.connect({:?}); s.sendall(b'{{\"op\":\"{op}\"}}\\n'); print(s.makefile().readline())",
            socket.display().to_string()
        );
        let out = env.binky(&["exec", "w", "--", "python3", "-c", &ask]);
        let answer = stdout(&out);
        assert!(
            answer.contains("is a person's to do") && answer.contains("\"ok\":false"),
            "{op}: {answer}{}",
            stderr(&out)
        );
    }
    client.cancel().await.unwrap();
    // Nothing happened: the server and the daemon run as they did, no CA was installed, no
    // hosts file or client configuration written, and the world is ready.
    for pid in &servers {
        assert!(alive(*pid), "the managed server {pid} was stopped");
    }
    assert_eq!(env.daemon_pid(), Some(daemon), "the daemon was stopped");
    assert!(!ca.exists(), "a CA was installed: {}", ca.display());
    assert!(!hosts.exists(), "the hosts file was written");
    assert!(
        !client_home.join(".cursor").exists(),
        "an MCP client's configuration was written"
    );
    let st: serde_json::Value = serde_json::from_str(&env.ok(&["status", "w", "--json"])).unwrap();
    assert_eq!(st["state"], "ready", "{st}");

    // The person's own run of the same commands works.
    let host_vars = [("BINKY_HOSTS_FILE", hosts.to_str().unwrap())];
    let out = env.binky_env(&["hosts", "--write"], &host_vars);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(hosts.exists());
    let out = env.binky_env(
        &["mcp", "install", "--client", "cursor"],
        &[("HOME", client_home.to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(client_home.join(".cursor/mcp.json").is_file());
    env.ok(&["daemon", "restart"]);
    let restarted = env.daemon_pid().expect("a daemon");
    assert_ne!(restarted, daemon, "the daemon was not restarted");
    env.ok(&["servers", "stop"]);
    wait_until(
        "the managed server stopped",
        std::time::Duration::from_secs(15),
        || servers.iter().all(|p| !alive(*p)),
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// Which worlds an agent made is the store's record, written when the world is made: a line
/// appended to the file that once held it, or any write a process binky started can make
/// through the CLI (up, down, reload, apply of the person's world), never makes a person's
/// world an agent's to remove. A world such a process makes is the agent's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_write_an_agent_can_make_turns_a_persons_world_into_the_agents() {
    let bin = binky_bin();
    let env = Env::new(CONFIG);
    env.ok(&["up", "w"]);
    env.ok(&["up", "persons"]);
    let store = binky_controllers::store::Store::open(&env.home.join("state.db")).unwrap();
    let persons = store
        .read(|c| binky_controllers::store::world_by_name(c, "mine", "persons"))
        .unwrap()
        .expect("the person's world");
    // The file binky kept this record in, appended to as any process could.
    let file = env.home.join("mcp-created");
    let line = format!("{}\tmine\tpersons\n", persons.id);
    let out = env.binky(&[
        "exec",
        "w",
        "--",
        "sh",
        "-c",
        &format!("printf '{line}' >> '{}'", file.display()),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Every write of the person's world a process binky started may make.
    for args in [
        vec!["up", "persons"],
        vec!["down", "persons"],
        vec!["up", "persons"],
        vec!["reload", "persons"],
        vec!["apply", "persons"],
    ] {
        let mut line = vec!["exec", "w", "--", bin];
        line.extend(args.iter().copied());
        let out = env.binky(&line);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
    // Restarted, the daemon and every command read the store, not the file.
    env.ok(&["daemon", "restart"]);
    let client = crate::mcp::connect(&env).await;
    let (err, v) =
        crate::mcp::call(&client, "remove", serde_json::json!({"world": "persons"})).await;
    assert!(err, "MCP removed the person's world: {v}");
    assert_eq!(v["error"]["code"], "refused", "{v}");
    let out = env.binky(&["exec", "w", "--", bin, "remove", "persons", "--force"]);
    assert!(!out.status.success(), "removed: {}", stdout(&out));
    assert!(
        stderr(&out).contains("a person's decision"),
        "{}",
        stderr(&out)
    );
    assert!(env.worktree("persons").is_dir());
    // What a process binky started makes is the agent's: MCP's `up`, and `binky up` under
    // `binky exec`.
    let (err, up) = crate::mcp::call(&client, "up", serde_json::json!({"world": "tool"})).await;
    assert!(!err, "{up}");
    let out = env.binky(&["exec", "w", "--", bin, "up", "shelled"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (err, v) =
        crate::mcp::call(&client, "remove", serde_json::json!({"world": "shelled"})).await;
    assert!(!err, "{v}");
    let out = env.binky(&["exec", "w", "--", bin, "remove", "tool"]);
    assert!(out.status.success(), "{}", stderr(&out));
    client.cancel().await.unwrap();
    env.ok(&["remove", "persons"]);
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w", "persons", "tool", "shelled"]);
}

/// Takes this test's home's CA out of the machine's trust store when dropped, should a
/// guard have failed and let a process binky started put it in.
struct Untrust<'e>(&'e Env);

impl Drop for Untrust<'_> {
    fn drop(&mut self) {
        let tag = home_tag(&self.0.home);
        let ca = std::path::Path::new("/usr/local/share/ca-certificates")
            .join(format!("binky-{tag}.crt"));
        if ca.exists() {
            let _ = self.0.binky(&["trust", "--uninstall"]);
        }
    }
}
