//! The everyday path: up, status, env, logs, down, up, reload, remove.

use std::time::Duration;

use crate::harness::*;

fn two_services() -> String {
    format!(
        r#"
[project]
name = "acme"
{{range}}

[services.api]
cmd = "{SERVE}"
url = "api"

[services.web]
cmd = "{SERVE}"
url = "web"
depends_on = ["api"]
env = {{ API_URL = "${{api.url}}", API_PROXY_URL = "${{api.proxy_url}}", WHO = "web of ${{worktree}}" }}
"#
    )
}

#[test]
fn two_worlds_run_side_by_side_on_their_own_ports() {
    let env = Env::new(&two_services());
    let up = env.ok(&["up", "login-fix"]);
    assert!(up.contains("login-fix is up"), "{up}");
    env.ok(&["up", "checkout-v2"]);

    let a = env.env_of("login-fix");
    let b = env.env_of("checkout-v2");
    let ports: Vec<u16> = [&a, &b]
        .iter()
        .flat_map(|e| {
            ["API_PORT", "WEB_PORT"].map(|k| e[k].as_str().unwrap().parse::<u16>().unwrap())
        })
        .collect();
    let mut unique = ports.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 4, "ports collide: {ports:?}");
    assert!(ports
        .iter()
        .all(|p| (env.ports.low..=env.ports.low + 39).contains(p)));

    // Each world's web runs in its own worktree, with its own env, reaching its own api.
    for (world, e) in [("login-fix", &a), ("checkout-v2", &b)] {
        let web = served_env(e["WEB_PORT"].as_str().unwrap().parse().unwrap());
        assert_eq!(web["BINKY_WORKTREE"], world);
        assert_eq!(web["WHO"], format!("web of {world}"));
        // `${api.url}` is the direct address of the world's own api (binky 0.1.2's
        // meaning: no `*.localhost` name to resolve), `${api.proxy_url}` its proxy URL.
        let api_port = e["API_PORT"].as_str().unwrap();
        assert_eq!(web["API_URL"], format!("http://localhost:{api_port}"));
        assert_eq!(
            web["API_PROXY_URL"],
            format!("http://api.{world}.acme.localhost:{}", env.proxy_port())
        );
        // The direct address reaches that world's api, with no name lookup of *.localhost.
        let api = served_env(api_port.parse().unwrap());
        assert_eq!(api["BINKY_WORKTREE"], world);
        assert_eq!(web["PORT"], e["WEB_PORT"].as_str().unwrap());
        assert_eq!(
            web["PWD"].as_str().map(std::path::PathBuf::from),
            Some(env.worktree(world))
        );
        assert_eq!(
            e["WEB_URL"],
            format!("http://web.{world}.acme.localhost:{}", env.proxy_port())
        );
        assert_eq!(
            e["BINKY_URL"],
            format!("http://{world}.acme.localhost:{}", env.proxy_port())
        );
    }

    // Status: both worlds under the project, ready, with pids.
    let status = env.ok(&["status"]);
    assert!(status.contains("acme"), "{status}");
    for w in ["login-fix", "checkout-v2"] {
        let line = status
            .lines()
            .find(|l| l.trim_start().starts_with(w))
            .unwrap_or_else(|| panic!("{status}"));
        assert!(line.contains("ready"), "{line}");
    }
    let s = env.status();
    assert_eq!(s["worlds"].as_array().unwrap().len(), 2);
    for w in s["worlds"].as_array().unwrap() {
        for svc in w["services"].as_array().unwrap() {
            assert!(svc["pid"].as_u64().is_some(), "{svc}");
            assert_eq!(svc["state"], "running");
        }
    }

    // env formats.
    let dotenv = env.ok(&["env", "login-fix", "--dotenv"]);
    assert!(
        dotenv
            .lines()
            .any(|l| l == format!("WEB_PORT={}", a["WEB_PORT"].as_str().unwrap())),
        "{dotenv}"
    );
    let shell = env.ok(&["env", "login-fix", "--shell"]);
    assert!(
        shell.contains(&format!(
            "export WEB_URL='{}'",
            a["WEB_URL"].as_str().unwrap()
        )),
        "{shell}"
    );
    assert_eq!(
        env.ok(&["env", "login-fix"]),
        dotenv,
        "dotenv is the default"
    );

    // Logs: the service's output, and all services with a prefix.
    let logs = env.ok(&["logs", "login-fix", "web", "-n", "5"]);
    assert!(
        logs.contains(&format!("listening on {}", a["WEB_PORT"].as_str().unwrap())),
        "{logs}"
    );
    let all = env.ok(&["logs", "login-fix"]);
    assert!(
        all.lines()
            .any(|l| l.contains("api |") && l.contains("listening")),
        "{all}"
    );
    let json = env.ok(&["logs", "login-fix", "api", "--json"]);
    let first: serde_json::Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    assert_eq!(first["service"], "api");

    env.ok(&["remove", "login-fix"]);
    env.ok(&["remove", "checkout-v2"]);
    env.assert_nothing_left(&["login-fix", "checkout-v2"]);
    for p in ports {
        assert!(bindable(p), "port {p} still held");
    }
}

#[test]
fn down_keeps_files_and_ports_and_up_brings_the_world_back_on_them() {
    let env = Env::new(&two_services());
    env.ok(&["up", "w"]);
    let before = env.env_of("w");
    let pids_before: Vec<u32> = ["api", "web"]
        .iter()
        .map(|s| env.pid_of("w", s).unwrap())
        .collect();
    std::fs::write(env.worktree("w").join("work.txt"), "in progress").unwrap();

    let down = env.ok(&["down", "w"]);
    assert!(down.contains("w is down"), "{down}");
    assert!(env.our_processes().is_empty(), "processes survive down");
    for p in &pids_before {
        assert!(!alive(*p));
    }
    assert_eq!(env.env_of("w"), before, "ports changed across down");
    assert!(
        env.worktree("w").join("work.txt").exists(),
        "files lost on down"
    );

    env.ok(&["up", "w"]);
    assert_eq!(env.env_of("w"), before, "ports changed across up");
    let api = env.port_of("w", "api");
    assert_eq!(served_env(api)["BINKY_WORKTREE"], "w");
    let pids_after: Vec<u32> = ["api", "web"]
        .iter()
        .map(|s| env.pid_of("w", s).unwrap())
        .collect();
    assert_ne!(pids_before, pids_after);
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn reload_restarts_every_service_in_place_on_the_same_ports() {
    let env = Env::new(&two_services());
    env.ok(&["up", "w"]);
    let ports = env.env_of("w");
    let before: Vec<u32> = ["api", "web"]
        .iter()
        .map(|s| env.pid_of("w", s).unwrap())
        .collect();
    let out = env.ok(&["reload", "w"]);
    assert!(out.contains("w reloaded"), "{out}");
    let after: Vec<u32> = ["api", "web"]
        .iter()
        .map(|s| env.pid_of("w", s).unwrap())
        .collect();
    for (b, a) in before.iter().zip(&after) {
        assert_ne!(b, a, "a service was not restarted");
        assert!(!alive(*b));
    }
    assert_eq!(env.env_of("w"), ports);
    assert!(listening(env.port_of("w", "web")));
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn remove_deletes_a_branch_without_commits_and_keeps_one_with_commits() {
    let env = Env::new(&two_services());
    env.ok(&["up", "plain"]);
    env.ok(&["up", "worked"]);
    let wt = env.worktree("worked");
    std::fs::write(wt.join("feature.txt"), "done").unwrap();
    git_in(&wt, &["add", "feature.txt"]);
    git_in(
        &wt,
        &[
            "-c",
            "user.email=t@e",
            "-c",
            "user.name=t",
            "commit",
            "-qm",
            "feature",
        ],
    );

    env.ok(&["remove", "plain"]);
    let out = env.binky(&["remove", "worked"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("kept branch worked: it has 1 commit(s) of its own"),
        "{}",
        stderr(&out)
    );
    let branches = env.git(&["branch", "--list"]);
    assert!(!branches.contains("plain"), "{branches}");
    assert!(branches.contains("worked"), "{branches}");
    env.assert_nothing_left(&["plain", "worked"]);
}

#[test]
fn remove_refuses_a_dirty_worktree_unless_forced() {
    let env = Env::new(&two_services());
    env.ok(&["up", "w"]);
    let pid = env.pid_of("w", "web").unwrap();
    std::fs::write(env.worktree("w").join("unsaved.txt"), "precious").unwrap();
    let out = env.binky(&["remove", "w"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("uncommitted changes")
            && err.contains("unsaved.txt")
            && err.contains("--force"),
        "{err}"
    );
    // Nothing was touched.
    assert!(alive(pid));
    assert!(env.worktree("w").join("unsaved.txt").exists());
    assert_eq!(env.status()["worlds"][0]["state"], "ready");

    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn an_existing_worktree_of_the_branch_is_adopted_and_never_deleted() {
    let env = Env::new(&two_services());
    let mine = env.dir.path().join("my-own-checkout");
    env.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "feature",
        mine.to_str().unwrap(),
    ]);
    env.ok(&["up", "feature"]);
    let web = served_env(env.port_of("feature", "web"));
    assert_eq!(
        web["PWD"].as_str().map(std::path::PathBuf::from),
        Some(mine.clone())
    );
    let out = env.binky(&["remove", "feature"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("kept worktree"), "{}", stderr(&out));
    assert!(
        mine.join("binky.toml").exists(),
        "an adopted worktree was deleted"
    );
    assert!(env.git(&["branch", "--list"]).contains("feature"));
    env.assert_nothing_left(&[]);
}

#[test]
fn dependencies_start_only_once_their_dependency_is_ready() {
    let env = Env::new(
        &r#"
[project]
name = "deps"
{range}

[services.db]
cmd = "LISTEN_DELAY=0.8 exec python3 server.py ${self.port}"
ports = ["main"]

[services.api]
cmd = "SERVE"
url = true
depends_on = ["db"]
env = { DB_PORT = "${db.port}" }

[services.web]
cmd = "SERVE"
url = true
depends_on = ["api"]
"#
        .replace("SERVE", SERVE),
    );
    env.ok(&["up", "w"]);
    let ev: serde_json::Value =
        serde_json::from_str(&env.ok(&["events", "w", "--json", "-n", "100"])).unwrap();
    let at = |needle: &str| -> i64 {
        ev.as_array()
            .unwrap()
            .iter()
            .find(|e| e["message"].as_str().unwrap().starts_with(needle))
            .unwrap_or_else(|| panic!("no event {needle}: {ev}"))["at"]
            .as_i64()
            .unwrap()
    };
    assert!(
        at("db ready") <= at("started api"),
        "api started before db was ready"
    );
    assert!(
        at("api ready") <= at("started web"),
        "web started before api was ready"
    );
    assert!(
        at("db ready") - at("started db") >= 700,
        "db's listen delay was not waited for"
    );
    let api = served_env(env.port_of("w", "api"));
    assert_eq!(api["DB_PORT"], env.port_of("w", "db").to_string());
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn setup_runs_once_per_world_and_hooks_run_in_the_worktree() {
    let env = Env::new(
        &r#"
[project]
name = "hooks"
{range}

[services.api]
cmd = "SERVE"
url = true
setup = "echo ran >> setup-count-${worktree}.txt"

[hooks]
post_up = "echo up $API_PORT >> post_up.txt"
pre_down = "echo down >> pre_down.txt"
"#
        .replace("SERVE", SERVE),
    );
    env.ok(&["up", "w"]);
    env.ok(&["down", "w"]);
    env.ok(&["up", "w"]);
    env.ok(&["reload", "w"]);
    let count = std::fs::read_to_string(env.worktree("w").join("setup-count-w.txt")).unwrap();
    assert_eq!(
        count.lines().count(),
        1,
        "setup ran {} times",
        count.lines().count()
    );
    let wt = env.worktree("w");
    let post = std::fs::read_to_string(wt.join("post_up.txt")).unwrap();
    let port = env.port_of("w", "api");
    assert_eq!(
        post.lines().collect::<Vec<_>>(),
        vec![format!("up {port}"); 3],
        "post_up runs once per up/reload with the world's env"
    );
    let pre = std::fs::read_to_string(wt.join("pre_down.txt")).unwrap();
    assert_eq!(
        pre.lines().count(),
        2,
        "pre_down runs before down and before reload: {pre}"
    );
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn tokens_env_files_and_injected_variables_reach_the_process() {
    let env = Env::new(
        &r#"
[project]
name = "tokens"
{range}

[services.api]
cmd = "SERVE"
ports = ["http", "admin-ui"]

[services.web]
cmd = "SERVE"
url = true
env_file = [".env.shared", "missing.env"]
env = { MIX = "${api.port}/${api.admin-ui}/${worktree}/${env.FROM_FILE}/${env.FROM_SHELL}", KEEP = "${HOME_DIR_OF_SHELL} ${env.UNSET_X:-fallback}" }
"#
        .replace("SERVE", SERVE),
    );
    std::fs::write(
        env.repo.join(".env.shared"),
        "FROM_FILE=file-value\nexport QUOTED=\"a b\"\n",
    )
    .unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "env file"]);
    let out = std::process::Command::new(binky_bin())
        .args(["up", "w"])
        .current_dir(&env.repo)
        .env("BINKY_HOME", &env.home)
        .env("FROM_SHELL", "shell-value")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("missing.env not found"),
        "a missing env_file is said out loud: {}",
        stderr(&out)
    );
    let e = env.env_of("w");
    let api_http: u16 = e["API_PORT"].as_str().unwrap().parse().unwrap();
    let api_admin = e["API_PORT_ADMIN_UI"].as_str().unwrap();
    assert_eq!(
        e["API_PORT_HTTP"].as_str().unwrap(),
        api_http.to_string(),
        "the first label is primary"
    );
    let web = served_env(env.port_of("w", "web"));
    assert_eq!(
        web["MIX"],
        format!("{api_http}/{api_admin}/w/file-value/shell-value")
    );
    assert_eq!(
        web["KEEP"], "${HOME_DIR_OF_SHELL} fallback",
        "a shell's ${{NAME}} (no dot) passes through; an unset variable takes its default"
    );
    assert_eq!(web["QUOTED"], "a b");
    assert_eq!(
        web["FROM_SHELL"], "shell-value",
        "services inherit the environment of `binky up`"
    );
    let api = served_env(api_http);
    assert_eq!(api["PORT"], api_http.to_string());
    assert_eq!(api["PORT_ADMIN_UI"], api_admin);
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_group_starts_its_services_and_their_dependencies_only() {
    let env = Env::new(
        &r#"
[project]
name = "groups"
{range}

[services.api]
cmd = "SERVE"
url = true

[services.web]
cmd = "SERVE"
url = true
depends_on = ["api"]

[services.worker]
cmd = "SERVE"
url = true

[groups]
front = ["web"]
"#
        .replace("SERVE", SERVE),
    );
    env.ok(&["up", "w", "--group", "front"]);
    // A service the group never starts gets no port and no route: `binky env` has none for
    // it, and the proxy does not know its host.
    let vars = env.env_of("w");
    assert!(
        vars.contains_key("WEB_PORT") && vars.contains_key("API_PORT"),
        "{vars:?}"
    );
    assert!(!vars.contains_key("WORKER_PORT"), "{vars:?}");
    assert!(!vars.contains_key("WORKER_URL"), "{vars:?}");
    let routes = env.ok(&["status", "w"]);
    assert!(!routes.contains("worker.w."), "{routes}");
    let worker = stdout(&env.binky(&["curl", "w", "worker", "/"]));
    assert!(
        worker.contains("no world answers to worker.w.groups.localhost"),
        "{worker}"
    );
    let services = env.services("w");
    let state = |n: &str| {
        services
            .iter()
            .find(|s| s["name"] == n)
            .map(|s| s["state"].as_str().unwrap().to_owned())
    };
    assert_eq!(state("web").as_deref(), Some("running"));
    assert_eq!(state("api").as_deref(), Some("running"));
    assert_eq!(state("worker"), None, "worker is not in the group");
    let bad = env.binky(&["up", "w", "--group", "nope"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("no group `nope`; groups: front"),
        "{}",
        stderr(&bad)
    );
    env.ok(&["up", "w"]);
    assert!(env.pid_of("w", "worker").is_some());
    // The whole world: the worker has its port and is reached through the proxy.
    assert!(env.env_of("w").contains_key("WORKER_PORT"));
    let worker = env.ok(&["curl", "w", "worker", "/"]);
    assert!(!worker.contains("no world answers"), "{worker}");
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn logs_follow_prints_new_output_as_it_comes() {
    let env = Env::new(
        r#"
[project]
name = "logs"
{range}

[services.ticker]
cmd = "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.2; done"
restart = "always"
"#,
    );
    env.ok(&["up", "w"]);
    let mut child = std::process::Command::new(binky_bin())
        .args(["logs", "w", "ticker", "-f", "-n", "1"])
        .current_dir(&env.repo)
        .env("BINKY_HOME", &env.home)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let text = stdout(&out);
    let ticks: Vec<u32> = text
        .lines()
        .filter_map(|l| l.strip_prefix("tick ")?.parse().ok())
        .collect();
    assert!(ticks.len() >= 4, "follow printed too little: {text}");
    assert!(
        ticks.windows(2).all(|w| w[1] == w[0] + 1),
        "lines lost or reordered: {ticks:?}"
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// The niceness of a process, from `/proc/PID/stat` (field 19).
fn niceness(pid: u32) -> i64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split_whitespace().nth(16).unwrap().parse().unwrap()
}

#[test]
fn services_run_at_nice_10_by_default_and_at_the_nice_setting() {
    let env = Env::new(&two_services());
    env.ok(&["up", "w"]);
    let api = env.pid_of("w", "api").unwrap();
    assert_eq!(niceness(api), 10, "binky 0.1.2's default");
    assert_eq!(niceness(std::process::id()), 0, "the test itself runs at 0");
    let out = env.binky(&["settings", "nice=20"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("nice takes a niceness from 0 to 19"),
        "{}",
        stderr(&out)
    );
    env.ok(&["settings", "nice=3"]);
    env.ok(&["reload", "w"]);
    let api = env.pid_of("w", "api").unwrap();
    assert_eq!(niceness(api), 3);
    env.ok(&["remove", "w"]);
}

#[test]
fn status_dot_shows_only_the_project_of_the_current_directory() {
    let env = Env::new(&two_services());
    env.ok(&["up", "w"]);
    // A second project in the same home.
    let other = env.other_project("other");
    let up = env.binky_in(&other, &["up", "x"]);
    assert!(up.status.success(), "{}", stderr(&up));

    let all = stdout(&env.binky_in(&other, &["status"]));
    assert!(all.contains("acme") && all.contains("other"), "{all}");
    let here = env.binky_in(&other, &["status", "."]);
    assert!(here.status.success(), "{}", stderr(&here));
    let here = stdout(&here);
    assert!(here.contains("other") && here.contains(" x "), "{here}");
    assert!(!here.contains("acme"), "another project shown: {here}");
    // From inside one of acme's worktrees: acme only, as JSON too.
    let json: serde_json::Value = serde_json::from_str(&stdout(
        &env.binky_in(&env.worktree("w"), &["status", ".", "--json"]),
    ))
    .unwrap();
    let projects: Vec<&str> = json["worlds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["project"].as_str().unwrap())
        .collect();
    assert_eq!(projects, vec!["acme"]);
    // Outside any project it says so.
    let nowhere = env.binky_in(env.dir.path(), &["status", "."]);
    assert!(!nowhere.status.success());
    assert!(
        stderr(&nowhere).contains("`binky status` for every project"),
        "{}",
        stderr(&nowhere)
    );

    assert_eq!(
        stdout(&env.binky_in(&other, &["version"])).trim(),
        format!("binky {}", env!("CARGO_PKG_VERSION"))
    );
    env.binky_in(&other, &["remove", "x"]);
    env.ok(&["remove", "w"]);
}

#[test]
fn reload_with_a_group_restarts_only_that_groups_services() {
    // `data` holds only an adapter service (a slice of binky's managed Redis).
    let env = Env::new(&format!(
        "{}\n[services.cache]\nadapter = \"redis\"\n\n[groups]\nback = [\"api\"]\ndata = [\"cache\"]\n",
        two_services()
    ));
    env.ok(&["up", "w"]);
    let (api, web) = (
        env.pid_of("w", "api").unwrap(),
        env.pid_of("w", "web").unwrap(),
    );
    let out = env.ok(&["reload", "w", "--group", "back"]);
    assert!(out.contains("w reloaded"), "{out}");
    let api2 = env.pid_of("w", "api").unwrap();
    assert_ne!(api2, api, "api was not restarted");
    assert!(!alive(api));
    assert_eq!(env.pid_of("w", "web"), Some(web), "web is not in the group");
    let bad = env.binky(&["reload", "w", "--group", "front"]);
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("world `w` has no group `front`; groups: back, data"),
        "{}",
        stderr(&bad)
    );
    let empty = env.binky(&["reload", "w", "--group", "data"]);
    assert!(!empty.status.success());
    assert!(
        stderr(&empty).contains("group `data` of world `w` has no process service to restart"),
        "{}",
        stderr(&empty)
    );
    assert_eq!(
        env.pid_of("w", "api"),
        Some(api2),
        "a refused reload restarted something"
    );
    env.ok(&["remove", "w"]);
    env.ok(&["servers", "stop"]);
}

/// `reload --group G` is judged on G's services and what they depend on: a service outside
/// G that keeps failing does not fail it; one that a service of G depends on does.
#[test]
fn reload_with_a_group_is_judged_on_that_groups_services_only() {
    let env = Env::new(&format!(
        r#"
[project]
name = "acme"
{{range}}

[services.api]
cmd = "{SERVE}"

[services.broken]
cmd = "echo broken-output; exit 3"

[services.needs]
cmd = "exec sleep 600"
depends_on = ["broken"]

[groups]
back = ["api"]
bad = ["needs"]
"#
    ));
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    wait_until("api runs", Duration::from_secs(15), || {
        env.services("w")
            .iter()
            .any(|s| s["name"] == "api" && s["state"] == "running")
    });
    let api = env.pid_of("w", "api").unwrap();
    let out = env.binky(&["reload", "w", "--group", "back"]);
    assert!(
        out.status.success(),
        "reload --group back exits {:?}: {}",
        out.status.code(),
        stderr(&out)
    );
    assert!(stdout(&out).contains("w reloaded"), "{}", stdout(&out));
    let api2 = env.pid_of("w", "api").unwrap();
    assert_ne!(api2, api, "api was not restarted");
    // `needs` depends on `broken`: its group fails, naming what keeps failing.
    let out = env.binky(&["reload", "w", "--group", "bad"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("broken keeps exiting"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        env.pid_of("w", "api"),
        Some(api2),
        "api is not in group bad"
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn metrics_is_a_json_snapshot_of_worlds_services_ports_and_the_daemon() {
    let env = Env::new(&two_services());
    env.ok(&["up", "a"]);
    env.ok(&["up", "b"]);
    env.ok(&["down", "b"]);
    env.ok(&["settings", "max_parallel=5"]);
    let m: serde_json::Value = serde_json::from_str(&env.ok(&["metrics"])).unwrap();
    assert_eq!(m["worlds"]["total"], 2, "{m}");
    assert_eq!(m["worlds"]["by_state"]["ready"], 1, "{m}");
    assert_eq!(m["worlds"]["by_state"]["stopped"], 1, "{m}");
    // binky 0.1.2's keys.
    assert_eq!(m["worktrees"]["total"], 2, "{m}");
    assert_eq!(m["worktrees"]["running"], 1, "{m}");
    assert_eq!(m["ports_allocated"], 4, "{m}");
    assert_eq!(m["slices"], 0, "{m}");
    assert_eq!(m["admission"]["capacity"], 5, "{m}");
    assert_eq!(m["admission"]["in_use"], 1, "{m}");
    assert_eq!(m["admission"]["queued"], 0, "{m}");
    assert_eq!(m["services"]["total"], 4, "{m}");
    assert_eq!(m["services"]["by_state"]["running"], 2, "{m}");
    assert_eq!(m["daemon"]["running"], true, "{m}");
    assert_eq!(
        m["daemon"]["pid"].as_u64(),
        env.daemon_pid().map(u64::from),
        "{m}"
    );
    assert!(m["daemon"]["rss_bytes"].as_u64().unwrap() > 0, "{m}");
    // Without a daemon it still answers, from the store.
    env.ok(&["daemon", "stop"]);
    let m: serde_json::Value = serde_json::from_str(&env.ok(&["metrics"])).unwrap();
    assert_eq!(m["daemon"]["running"], false, "{m}");
    assert_eq!(m["worlds"]["total"], 2, "{m}");
    env.ok(&["remove", "a"]);
    env.ok(&["remove", "b"]);
}

#[test]
fn binky_wait_on_a_world_that_never_gets_ready_gives_up_at_the_timeout_with_75() {
    // Its check never passes: the world runs but is never ready.
    let env = Env::new(
        "[project]\nname = \"acme\"\n{range}\n\n[services.api]\ncmd = \"sleep 600\"\nhealth = { cmd = \"false\", interval = \"10s\", retries = 100 }\n",
    );
    env.ok(&["up", "w", "--no-wait"]);
    let out = env.binky(&["wait", "w", "--timeout", "1s"]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("w is still not up after 1s")
            && stderr(&out).contains("binky status w"),
        "{}",
        stderr(&out)
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn binky_wait_returns_when_the_world_is_ready_and_refuses_a_stopped_one() {
    let env = Env::new(&two_services());
    env.ok(&["up", "w", "--no-wait"]);
    let out = env.binky(&["wait", "w", "--json", "--timeout", "60s"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["name"], "w", "{v}");
    assert_eq!(v["state"], "ready", "{v}");
    assert!(v["services"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["state"] == "running"));
    let plain = env.ok(&["wait", "w"]);
    assert_eq!(plain.trim(), "w is ready");
    env.ok(&["down", "w"]);
    let started = std::time::Instant::now();
    let out = env.binky(&["wait", "w", "--timeout", "60s"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("is down"), "{}", stderr(&out));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "it sat out the timeout"
    );
    let out = env.binky(&["wait", "nope"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
