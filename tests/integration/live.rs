//! Live reconcile: editing a world's `binky.toml` converges it by itself; `binky apply`;
//! `watch` restarts; drift repair. Real worktrees, real files, real processes.

use std::time::Duration;

use crate::harness::*;
use crate::pg_server::PgServer;

fn config(api_env: &str, extra: &str) -> String {
    format!(
        r#"
[project]
name = "live"
{{range}}

[services.api]
cmd = "{SERVE}"
url = true
env = {{ MODE = "{api_env}" }}

[services.web]
cmd = "{SERVE}"
url = true
env = {{ API = "${{api.url}}" }}

[services.worker]
cmd = "exec sleep 600"
watch = ["src/**/*.py"]
{extra}
"#
    )
}

fn edit(env: &Env, world: &str, toml: &str) {
    let path = env.worktree(world).join("binky.toml");
    std::fs::write(&path, toml.replace("{range}", &env.range())).unwrap();
}

fn pids(env: &Env, world: &str) -> std::collections::BTreeMap<String, Option<u32>> {
    env.services(world)
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["pid"].as_u64().map(|p| p as u32),
            )
        })
        .collect()
}

fn running(env: &Env, world: &str, svc: &str) -> bool {
    env.services(world)
        .iter()
        .any(|s| s["name"] == svc && s["state"] == "running")
}

#[test]
fn an_edited_env_value_restarts_only_that_service_on_its_port() {
    let env = Env::new(&config("one", ""));
    std::fs::create_dir_all(env.repo.join("src")).unwrap();
    env.ok(&["up", "w"]);
    let before = pids(&env, "w");
    let port = env.port_of("w", "api");
    assert_eq!(served_env(port)["MODE"], "one");
    edit(&env, "w", &config("two", ""));
    wait_until(
        "api restarted with the new value",
        Duration::from_secs(15),
        || try_served_env(port).is_some_and(|e| e["MODE"] == "two") && running(&env, "w", "api"),
    );
    let after = pids(&env, "w");
    assert_ne!(after["api"], before["api"]);
    assert_eq!(after["web"], before["web"], "web was restarted");
    assert_eq!(after["worker"], before["worker"], "worker was restarted");
    assert_eq!(env.port_of("w", "api"), port, "api moved");
    let events = env.ok(&["events", "w", "-n", "200"]);
    assert!(
        events.contains("binky.toml changed: restart api (env changed)"),
        "{events}"
    );
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_removed_service_stops_and_releases_its_port_and_a_new_one_starts() {
    let env = Env::new(&config("one", ""));
    env.ok(&["up", "w"]);
    let web_port = env.port_of("w", "web");
    let web_pid = env.pid_of("w", "web").unwrap();
    // web goes, extra comes.
    let without_web = config("one", "\n[services.extra]\ncmd = \"exec sleep 600\"\n").replace(
        &format!(
            "[services.web]\ncmd = \"{SERVE}\"\nurl = true\nenv = {{ API = \"${{api.url}}\" }}\n"
        ),
        "",
    );
    assert!(!without_web.contains("services.web"));
    edit(&env, "w", &without_web);
    wait_until(
        "web stopped and extra started",
        Duration::from_secs(15),
        || !alive(web_pid) && running(&env, "w", "extra"),
    );
    assert!(!env.services("w").iter().any(|s| s["name"] == "web"));
    wait_until("web's port released", Duration::from_secs(5), || {
        bindable(web_port)
    });
    assert!(!env.env_of("w").contains_key("WEB_PORT"));
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn an_invalid_edit_keeps_the_world_running_and_says_where_and_a_fixed_edit_recovers() {
    let env = Env::new(&config("one", ""));
    env.ok(&["up", "w"]);
    let before = pids(&env, "w");
    let port = env.port_of("w", "api");
    // A syntax error on line 9 (the api's env line).
    let broken = config("one", "").replace("env = { MODE = \"one\" }", "env = { MODE = \"one\" ");
    edit(&env, "w", &broken);
    wait_until("ConfigInvalid shows", Duration::from_secs(15), || {
        env.ok(&["status", "w"]).contains("ConfigInvalid")
    });
    let status = env.ok(&["status", "w"]);
    assert!(status.contains("binky.toml:"), "{status}");
    assert!(!status.contains(" failed "), "{status}");
    assert_eq!(
        pids(&env, "w"),
        before,
        "an invalid edit restarted something"
    );
    assert_eq!(served_env(port)["MODE"], "one");
    // A semantic error (a cycle) is refused the same way.
    edit(
        &env,
        "w",
        &config("one", "depends_on = [\"api\"]").replace(
            "[services.api]\n",
            "[services.api]\ndepends_on = [\"worker\"]\n",
        ),
    );
    wait_until("the cycle is reported", Duration::from_secs(15), || {
        env.ok(&["status", "w"]).contains("cycle")
    });
    assert_eq!(pids(&env, "w"), before);
    let out = env.binky(&["apply", "w"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("last good config"),
        "{}",
        stderr(&out)
    );
    // Fixed: the condition clears and the change applies.
    edit(&env, "w", &config("fixed", ""));
    wait_until("the fix applies", Duration::from_secs(15), || {
        try_served_env(port).is_some_and(|e| e["MODE"] == "fixed")
    });
    wait_until("ConfigInvalid clears", Duration::from_secs(5), || {
        !env.ok(&["status", "w"]).contains("ConfigInvalid")
    });
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn apply_prints_the_plan_and_dry_run_changes_nothing() {
    let env = Env::new(&config("one", ""));
    env.ok(&["up", "w"]);
    let out = env.ok(&["apply", "w", "--dry-run"]);
    assert!(out.contains("unchanged; nothing to do"), "{out}");
    // The daemon is stopped while the file is edited, so no watcher applies it first.
    env.ok(&["daemon", "stop"]);
    edit(
        &env,
        "w",
        &config("two", "\n[services.extra]\ncmd = \"exec sleep 600\"\n"),
    );
    let before = pids(&env, "w");
    let plan = env.ok(&["apply", "w", "--dry-run"]);
    assert!(plan.contains("would apply"), "{plan}");
    assert!(
        plan.contains("restart") && plan.contains("api") && plan.contains("env changed"),
        "{plan}"
    );
    assert!(plan.contains("start") && plan.contains("extra"), "{plan}");
    assert!(!plan.contains("web"), "web does not change: {plan}");
    let json: serde_json::Value =
        serde_json::from_str(&env.ok(&["apply", "w", "--dry-run", "--json"])).unwrap();
    assert_eq!(json[0]["state"], "would change");
    assert_eq!(pids(&env, "w"), before, "a dry run changed something");
    let out = env.binky(&["apply", "w"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(running(&env, "w", "extra"));
    assert_eq!(served_env(env.port_of("w", "api"))["MODE"], "two");
    assert_eq!(pids(&env, "w")["web"], before["web"]);
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_watched_file_restarts_only_its_service_and_ignored_dirs_restart_nothing() {
    let env = Env::new(&config("one", ""));
    std::fs::create_dir_all(env.repo.join("src/pkg")).unwrap();
    std::fs::write(env.repo.join("src/pkg/app.py"), "x = 1\n").unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "src"]);
    env.ok(&["up", "w"]);
    let wt = env.worktree("w");
    let before = pids(&env, "w");
    // Give the watcher its first look at the new world.
    std::thread::sleep(Duration::from_millis(1500));
    // Not matching the glob, or under node_modules: nothing restarts.
    std::fs::write(wt.join("src/pkg/notes.txt"), "x").unwrap();
    std::fs::create_dir_all(wt.join("node_modules/src")).unwrap();
    std::fs::write(wt.join("node_modules/src/x.py"), "x").unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(pids(&env, "w"), before);
    // A matching file: the worker restarts, nothing else.
    std::fs::write(wt.join("src/pkg/app.py"), "x = 2\n").unwrap();
    wait_until("the worker restarts", Duration::from_secs(15), || {
        let now = pids(&env, "w");
        now["worker"].is_some() && now["worker"] != before["worker"]
    });
    let after = pids(&env, "w");
    assert_eq!(after["api"], before["api"]);
    assert_eq!(after["web"], before["web"]);
    // A directory made after the world came up is watched too.
    std::fs::create_dir_all(wt.join("src/new")).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(wt.join("src/new/mod.py"), "y = 1\n").unwrap();
    wait_until(
        "the worker restarts for a new directory's file",
        Duration::from_secs(15),
        || {
            let now = pids(&env, "w");
            now["worker"].is_some() && now["worker"] != after["worker"]
        },
    );
    let events = env.ok(&["events", "w", "-n", "200"]);
    assert!(
        events.contains("worker: src/pkg/app.py changed; restarting"),
        "{events}"
    );
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_database_dropped_outside_binky_is_made_again_migrated() {
    let pg = PgServer::start();
    let env = Env::new(&format!(
        r#"
[project]
name = "drift"
{{range}}

[services.db]
adapter = "postgres"
admin_url = "${{env.PG_ADMIN}}"
migrate = "psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -q -c 'create table notes (body text)'"

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["db"]
env = {{ DATABASE_URL = "${{db.url}}" }}
"#
    ));
    let vars = [("PG_ADMIN", pg.admin_url.as_str())];
    let out = env.binky_env(&["up", "w"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    let url = env.env_of("w")["DB_URL"].as_str().unwrap().to_owned();
    let db = url.rsplit('/').next().unwrap().to_owned();
    pg.admin(&format!("drop database {db} with (force)"));
    // The next `binky up` (and, without one, the next resync) makes it again, migrated.
    let out = env.binky_env(&["up", "w"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        pg.query(&url, "select count(*) from notes"),
        vec![vec!["0".to_owned()]]
    );
    let events = env.ok(&["events", "w", "-n", "200"]);
    assert!(events.contains("was dropped outside binky"), "{events}");
    env.ok(&["remove", "w"]);
    pg.assert_no_slices();
    env.assert_nothing_left(&["w"]);
}

#[test]
fn at_the_inotify_limit_the_world_says_so_and_its_files_are_polled() {
    let env = Env::new(&config("one", ""));
    std::fs::create_dir_all(env.repo.join("src/a/b")).unwrap();
    std::fs::write(env.repo.join("src/a/b/x.py"), "1").unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "src"]);
    // The daemon acts as if inotify allowed two watches: the world needs four.
    let out = env.binky_env(&["up", "w"], &[("BINKY_WATCH_LIMIT", "2")]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_until(
        "FilesWatched reports polling",
        Duration::from_secs(15),
        || env.ok(&["status", "w"]).contains("Polling"),
    );
    let status = env.ok(&["status", "w"]);
    assert!(
        status.contains("max_user_watches") && status.contains("polling"),
        "{status}"
    );
    // Edits still arrive, by polling.
    let port = env.port_of("w", "api");
    edit(&env, "w", &config("polled", ""));
    wait_until("the polled edit applies", Duration::from_secs(20), || {
        try_served_env(port).is_some_and(|e| e["MODE"] == "polled")
    });
    let worker = env.pid_of("w", "worker");
    std::fs::write(env.worktree("w").join("src/a/b/x.py"), "2").unwrap();
    wait_until(
        "the polled watch restarts the worker",
        Duration::from_secs(20),
        || {
            let now = env.pid_of("w", "worker");
            now.is_some() && now != worker
        },
    );
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_worktree_deleted_outside_binky_is_reported_not_recreated() {
    let env = Env::new(&config("one", ""));
    env.ok(&["up", "w"]);
    let wt = env.worktree("w");
    std::fs::remove_dir_all(&wt).unwrap();
    // The watcher sees the directory go: no need to wait for a resync.
    wait_until("WorktreeMissing shows", Duration::from_secs(10), || {
        env.ok(&["status", "w"]).contains("WorktreeMissing")
    });
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!wt.exists(), "binky recreated a deleted worktree silently");
    let events = env.ok(&["events", "w", "-n", "200"]);
    assert!(
        events.contains("worktree_missing") || events.contains("missing"),
        "{events}"
    );
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

/// Each field of a running service, edited alone: `binky apply --dry-run` says whether it
/// restarts the service, and applying it does exactly that (the plan and the process
/// controller ask one `RestartKey`). A `setup` edit restarts it (its new setup runs
/// first); a removed setup, the health check's timeout, the restart policy, `watch` and
/// the stop keys restart nothing.
#[test]
fn each_field_restarts_a_running_service_exactly_when_the_plan_says() {
    let base = r#"
[project]
name = "fields"
{range}

[services.job]
cmd = "exec sleep 600"
workdir = "."
env = { A = "1" }
setup = "true"
health = { cmd = "true", timeout = "10s" }
stop_grace_period = "2s"
"#;
    let env = Env::new(base);
    std::fs::create_dir_all(env.repo.join("sub")).unwrap();
    std::fs::write(env.repo.join("sub/.keep"), "").unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "sub"]);
    env.ok(&["up", "w"]);
    // (what is edited, the text before, after, whether it restarts the service)
    let edits: &[(&str, &str, &str, bool)] = &[
        ("cmd", "exec sleep 600", "exec sleep 601", true),
        ("env", "A = \"1\"", "A = \"2\"", true),
        (
            "env_file",
            "workdir = \".\"",
            "workdir = \".\"\nenv_file = [\"x.env\"]",
            true,
        ),
        ("workdir", "workdir = \".\"", "workdir = \"sub\"", true),
        (
            "ports",
            "stop_grace_period",
            "ports = [\"admin\"]\nstop_grace_period",
            true,
        ),
        ("health", "cmd = \"true\"", "cmd = \"test 1 = 1\"", true),
        (
            "health timeout",
            "timeout = \"10s\"",
            "timeout = \"20s\"",
            false,
        ),
        ("setup", "setup = \"true\"", "setup = \"echo again\"", true),
        ("setup removed", "setup = \"echo again\"\n", "", false),
        (
            "restart",
            "stop_grace_period",
            "restart = \"always\"\nstop_grace_period",
            false,
        ),
        (
            "watch",
            "stop_grace_period",
            "watch = [\"*.txt\"]\nstop_grace_period",
            false,
        ),
        (
            "stop_signal",
            "stop_grace_period",
            "stop_signal = \"SIGINT\"\nstop_grace_period",
            false,
        ),
        (
            "stop_grace_period",
            "stop_grace_period = \"2s\"",
            "stop_grace_period = \"3s\"",
            false,
        ),
    ];
    let mut text = base.to_owned();
    for (field, from, to, restarts) in edits {
        assert!(text.contains(from), "{field}: no `{from}` in\n{text}");
        text = text.replacen(from, to, 1);
        let before = pids(&env, "w")["job"].expect("job runs");
        // The daemon is stopped while the file is edited, so no watcher applies it first.
        env.ok(&["daemon", "stop"]);
        edit(&env, "w", &text);
        let plan: serde_json::Value =
            serde_json::from_str(&env.ok(&["apply", "w", "--dry-run", "--json"])).unwrap();
        let steps = plan[0]["plan"]["steps"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let planned = steps
            .iter()
            .any(|s| s["service"] == "job" && s["action"] == "restart");
        assert_eq!(planned, *restarts, "{field}: the plan says {plan}");
        env.ok(&["apply", "w"]);
        wait_until(
            &format!("{field}: job runs"),
            Duration::from_secs(30),
            || running(&env, "w", "job"),
        );
        let after = pids(&env, "w")["job"].expect("job runs");
        assert_eq!(
            after != before,
            planned,
            "{field}: the plan says restart={planned}, the service {} (events: {})",
            if after != before {
                "restarted"
            } else {
                "kept running"
            },
            env.ok(&["events", "w", "-n", "6"])
        );
    }
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}
