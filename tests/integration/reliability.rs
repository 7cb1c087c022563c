//! Many agents at once, nothing leaked: each fault once found by running the release binary
//! as a user would, kept as a test named after what it proves.

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::harness::*;

fn one_service(project: &str, cmd: &str) -> String {
    format!(
        r#"
[project]
name = "{project}"
{{range}}

[services.api]
cmd = "{cmd}"
url = true
"#
    )
}

#[test]
fn fifteen_ups_started_together_on_a_fresh_home_all_succeed_on_distinct_ports() {
    let mut env = Env::new(&one_service("fresh", SERVE));
    // A home nothing has touched: no state.db, no daemon. (Env::new set proxy ports in its
    // own home; this one uses the defaults and their fallbacks.)
    env.home = env.dir.path().join("fresh-home");
    assert!(!env.home.exists());
    let children: Vec<_> = (0..15)
        .map(|i| {
            Command::new(binky_bin())
                .args(["up", &format!("w{i}"), "--timeout", "120s"])
                .current_dir(&env.repo)
                .env("BINKY_HOME", &env.home)
                .env_remove("BINKY_WORKTREE_ROOT")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "up w{i} exited {:?}: {}",
            out.status.code(),
            stderr(&out)
        );
    }
    let mut ports: Vec<u16> = (0..15)
        .map(|i| env.port_of(&format!("w{i}"), "api"))
        .collect();
    for (i, p) in ports.iter().enumerate() {
        assert_eq!(served_env(*p)["BINKY_WORKTREE"], format!("w{i}"));
    }
    ports.sort();
    ports.dedup();
    assert_eq!(ports.len(), 15, "a port was shared: {ports:?}");
    let names: Vec<String> = (0..15).map(|i| format!("w{i}")).collect();
    for n in &names {
        env.ok(&["remove", n]);
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    env.assert_nothing_left(&refs);
}

#[test]
fn twenty_commands_opening_a_fresh_store_at_once_never_find_it_locked() {
    // The first open of a store (the switch to WAL, the migrations) is where commands
    // started together collided: `binky port` opens and writes at once, so twenty of them
    // on a new home, ten times over, meet there.
    let dir = tempfile::tempdir().unwrap();
    for round in 0..10 {
        let home = dir.path().join(format!("home{round}"));
        let children: Vec<_> = (0..20)
            .map(|i| {
                Command::new(binky_bin())
                    .args(["port", "--proxy", &(30000 + i).to_string()])
                    .env("BINKY_HOME", &home)
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "round {round}: {}", stderr(&out));
        }
    }
}

#[test]
fn a_killed_leader_takes_its_whole_group_down_and_the_service_comes_back_on_its_port() {
    // `sh -c` stays the group's leader; the real server is its child.
    let env = Env::new(&one_service(
        "leader",
        "python3 server.py ${self.port} & wait",
    ));
    env.ok(&["up", "w"]);
    let port = env.port_of("w", "api");
    let leader = env.pid_of("w", "api").unwrap();
    let server = {
        let all = env.our_processes();
        let others: Vec<u32> = all.into_iter().filter(|p| *p != leader).collect();
        assert_eq!(
            others.len(),
            1,
            "expected the server under the leader: {others:?}"
        );
        others[0]
    };
    signal(leader, 9);
    wait_until("the service restarted", Duration::from_secs(30), || {
        env.pid_of("w", "api").is_some_and(|p| p != leader)
            && try_served_env(port).is_some_and(|e| e["BINKY_WORKTREE"] == "w")
    });
    assert!(
        !alive(server),
        "the old server {server} outlived its leader"
    );
    assert_eq!(env.port_of("w", "api"), port, "the port moved");
    let new_leader = env.pid_of("w", "api").unwrap();
    let events = env.ok(&["events", "w"]);
    assert!(!events.contains("port_moved"), "{events}");
    env.ok(&["remove", "w"]);
    assert!(!alive(new_leader));
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_second_up_from_another_shell_restarts_nothing_and_a_variable_the_service_sees_does() {
    let env = Env::new(&one_service("shells", SERVE));
    env.ok(&["up", "w"]);
    let pid = env.pid_of("w", "api").unwrap();
    // Another terminal, under `timeout`: a different `_`, SHLVL, OLDPWD, terminal.
    let out = env.binky_env(
        &["up", "w"],
        &[
            ("_", "/usr/bin/timeout"),
            ("SHLVL", "7"),
            ("OLDPWD", "/somewhere/else"),
            ("TERM", "screen-256color"),
            ("COLUMNS", "211"),
            ("TMUX_PANE", "%3"),
            ("SSH_TTY", "/dev/pts/9"),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(env.pid_of("w", "api"), Some(pid), "the service restarted");
    let events = env.ok(&["events", "w"]);
    assert!(!events.contains("restarting"), "{events}");
    // A variable the service does see is a change: it restarts with it (so the check
    // above was able to see a restart).
    let out = env.binky_env(&["up", "w"], &[("FEATURE_FLAG", "on")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let port = env.port_of("w", "api");
    wait_until(
        "restarted with the new variable",
        Duration::from_secs(20),
        || {
            env.pid_of("w", "api").is_some_and(|p| p != pid)
                && try_served_env(port).is_some_and(|e| e["FEATURE_FLAG"] == "on")
        },
    );
    let served = served_env(port);
    for gone in ["_", "OLDPWD", "TERM", "TMUX_PANE", "SSH_TTY"] {
        assert!(served.get(gone).is_none(), "{gone} reached the service");
    }
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_variable_that_is_not_utf8_is_left_out_with_a_warning_not_a_panic() {
    use std::os::unix::ffi::OsStringExt;
    let env = Env::new(&one_service("bytes", SERVE));
    let out = Command::new(binky_bin())
        .args(["up", "w"])
        .current_dir(&env.repo)
        .env("BINKY_HOME", &env.home)
        .env(
            std::ffi::OsString::from("BAD"),
            std::ffi::OsString::from_vec(vec![0xff, b'x']),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("BAD is not UTF-8"),
        "{}",
        stderr(&out)
    );
    assert!(served_env(env.port_of("w", "api")).get("BAD").is_none());
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_config_with_a_byte_that_is_not_utf8_is_refused_before_anything_is_written() {
    let env = Env::new(&one_service("bytes", SERVE));
    let mut text = std::fs::read(env.repo.join("binky.toml")).unwrap();
    text.extend_from_slice(b"# caf\xe9\n");
    let lines = text.iter().filter(|b| **b == b'\n').count();
    std::fs::write(env.repo.join("binky.toml"), &text).unwrap();
    env.git(&["commit", "-qam", "latin-1 comment"]);
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("not UTF-8") && err.contains(&format!("line {lines}")),
        "{err}"
    );
    assert!(!env.worktree("w").exists(), "a worktree was made");
    assert_eq!(env.git(&["branch", "--list", "w"]), "", "a branch was made");
    assert_eq!(env.status()["worlds"].as_array().unwrap().len(), 0);
    assert!(env.daemon_pid().is_none(), "a daemon was started");
    let out = env.binky(&["check"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not UTF-8"), "{}", stderr(&out));
}

#[test]
fn check_of_an_endless_file_stops_at_the_size_limit() {
    let env = Env::new(&one_service("endless", SERVE));
    let out = env.binky(&["check", "/dev/zero"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("larger than"), "{}", stderr(&out));
}

#[test]
fn a_name_git_refuses_is_refused_at_once_and_every_admitted_name_is_one_git_takes() {
    let env = Env::new(&one_service("names", SERVE));
    let out = env.binky(&["up", "HEAD", "--timeout", "60s"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("HEAD"), "{}", stderr(&out));
    assert_eq!(env.status()["worlds"].as_array().unwrap().len(), 0);
    for name in [
        "HEAD",
        "head",
        "a/HEAD",
        "FETCH_HEAD",
        "x.lock",
        "a.b",
        "a_b",
        "v1.2.3",
        "feat/x-1",
        "@",
        "a@b",
        "a..b",
        "a/.b",
        ".a",
        "a.",
        "-a",
        "a//b",
    ] {
        let admitted = matches!(
            binky_controllers::admission::check_world_name(name),
            binky_controllers::admission::Verdict::Admit
        );
        if admitted {
            let git = Command::new("git")
                .args(["check-ref-format", "--branch", name])
                .output()
                .unwrap();
            assert!(
                git.status.success(),
                "binky admits `{name}`, git refuses it"
            );
        }
    }
}

#[test]
fn a_project_domain_that_is_not_a_dns_name_is_refused_naming_the_fix() {
    let env = Env::new(&one_service("domains", SERVE));
    for bad in [
        "..",
        "a..b",
        "-x.test",
        "*.test",
        "x.y:80",
        "a b.test",
        &"l".repeat(70),
        "café.test",
    ] {
        env.write_config(&format!(
            "[project]\nname = \"domains\"\ndomain = \"{bad}\"\n{{range}}\n\n[services.api]\ncmd = \"{SERVE}\"\nurl = true\n"
        ));
        env.git(&["commit", "-qam", "domain"]);
        let out = env.binky(&["up", "w"]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("project.domain") && err.contains("not a DNS name"),
            "{bad}: {err}"
        );
    }
    assert_eq!(env.status()["worlds"].as_array().unwrap().len(), 0);
}

#[test]
fn up_whose_daemon_cannot_start_says_the_change_is_recorded_and_a_started_daemon_finishes_it() {
    let env = Env::new(&one_service("nodaemon", SERVE));
    // A directory where the daemon's socket goes: the daemon cannot listen and exits.
    std::fs::create_dir_all(env.home.join("daemon.sock")).unwrap();
    let out = env.binky(&["up", "w", "--no-wait"]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("is recorded") && err.contains("binky daemon start"),
        "{err}"
    );
    let status = env.status();
    assert_eq!(status["worlds"].as_array().unwrap().len(), 1, "{status}");
    std::fs::remove_dir(env.home.join("daemon.sock")).unwrap();
    env.ok(&["daemon", "start"]);
    wait_until("the world came up", Duration::from_secs(30), || {
        env.pid_of("w", "api").is_some() && try_served_env(env.port_of("w", "api")).is_some()
    });
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_secret_written_in_two_pieces_far_apart_never_reaches_the_log() {
    let env = Env::new(
        r#"
[project]
name = "split"
{range}

[services.api]
cmd = "sh split.sh ${self.port}"
url = true
env = { SPLIT_TOKEN = "${env.SPLIT_TOKEN}" }
"#,
    );
    std::fs::write(
        env.repo.join("split.sh"),
        "printf 'split=canary-val'\nsleep 0.6\nprintf 'ue-123 done\\n'\nexec python3 server.py \"$1\"\n",
    )
    .unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "split writer"]);
    let out = env.binky_env(&["up", "w"], &[("SPLIT_TOKEN", "canary-value-123")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = || env.ok(&["logs", "w", "api", "-n", "50"]);
    wait_until("the line reached the log", Duration::from_secs(10), || {
        log().contains("done")
    });
    let text = log();
    assert!(text.contains("split=[secret] done"), "{text}");
    assert!(!text.contains("canary"), "{text}");
    assert!(!text.contains("ue-123"), "{text}");
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_foreign_listener_on_a_services_port_does_not_make_it_ready() {
    let env = Env::new(
        r#"
[project]
name = "squat"
{range}

[services.api]
cmd = "exec python3 server.py ${self.port}"
url = true
env = { LISTEN_DELAY = "4" }
"#,
    );
    let out = env.binky(&["up", "w", "--no-wait"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Squat once the service runs (a port taken before it starts is moved, not probed).
    wait_until("the service started", Duration::from_secs(10), || {
        env.pid_of("w", "api").is_some()
    });
    let port = env.port_of("w", "api");
    let squatter = TcpListener::bind(("127.0.0.1", port)).unwrap();
    // binky probes the port, finds it answering, and still does not call the service ready.
    wait_until(
        "the probe saw the squatter",
        Duration::from_secs(15),
        || {
            env.services("w").iter().any(|s| {
                s["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("not by this service"))
            })
        },
    );
    assert!(
        env.services("w").iter().all(|s| s["state"] != "running"),
        "{:?}",
        env.services("w")
    );
    drop(squatter);
    env.ok(&["up", "w", "--timeout", "90s"]);
    let port = env.port_of("w", "api");
    assert_eq!(served_env(port)["BINKY_WORKTREE"], "w");
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_secret_reference_outside_env_is_refused_by_check_and_up() {
    let env = Env::new(&one_service(
        "secretcmd",
        "run --token ${secret:api/token} ${self.port}",
    ));
    let out = env.binky(&["check"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("services.api.cmd")
            && text.contains("${secret:api/token}")
            && text.contains("env"),
        "{text}"
    );
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("resolves only in env values"),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.status()["worlds"].as_array().unwrap().len(), 0);
}

#[test]
fn gc_finds_and_removes_managed_server_data_of_a_home_that_is_gone() {
    if !nix::unistd::geteuid().is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root: this test must run there"
        );
        eprintln!("skipped: only binky run as root keeps data outside its home");
        return;
    }
    let env = Env::new(&one_service("gc", SERVE));
    let base = std::path::Path::new("/var/lib/binky/postgres");
    std::fs::create_dir_all(base).unwrap();
    let gone_home = env.dir.path().join("deleted-home");
    let orphan = base.join(format!("test-orphan-{}", std::process::id()));
    std::fs::create_dir_all(orphan.join("data")).unwrap();
    std::fs::write(orphan.join("data/PG_VERSION"), "15\n").unwrap();
    std::fs::write(
        orphan.join("owner"),
        gone_home
            .join("servers/postgres/data")
            .as_os_str()
            .as_encoded_bytes(),
    )
    .unwrap();
    // Old enough not to be one being made right now.
    for p in [orphan.join("owner"), orphan.clone()] {
        let ok = Command::new("touch")
            .args(["-h", "-d", "2 hours ago"])
            .arg(&p)
            .status()
            .unwrap();
        assert!(ok.success());
    }
    // A live home's entry is not touched.
    let kept = base.join(format!("test-kept-{}", std::process::id()));
    std::fs::create_dir_all(kept.join("data")).unwrap();
    let link = env.home.join("servers/postgres/data");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(kept.join("data"), &link).unwrap();
    std::fs::write(kept.join("owner"), link.as_os_str().as_encoded_bytes()).unwrap();
    Command::new("touch")
        .args(["-d", "2 hours ago"])
        .arg(kept.join("owner"))
        .status()
        .unwrap();

    let listed = env.ok(&["gc"]);
    assert!(
        listed.contains(&orphan.display().to_string())
            && listed.contains(&gone_home.display().to_string()),
        "{listed}"
    );
    assert!(!listed.contains(&kept.display().to_string()), "{listed}");
    assert!(orphan.exists(), "gc without --yes removed data");
    let out = env.ok(&["gc", "--yes"]);
    assert!(out.contains("removed"), "{out}");
    assert!(!orphan.exists(), "{out}");
    assert!(kept.join("data").exists());
    std::fs::remove_file(&link).unwrap();
    std::fs::remove_dir_all(&kept).unwrap();
}

#[test]
fn down_during_a_long_setup_returns_at_once_and_leaves_nothing_running() {
    let env = Env::new(&format!(
        r#"
[project]
name = "slowsetup"
{{range}}

[services.api]
cmd = "{SERVE}"
url = true
setup = "echo installing; sleep 60"

[services.web]
cmd = "{SERVE}"
url = true
"#
    ));
    let out = env.binky(&["up", "w", "--no-wait"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_until("setup is running", Duration::from_secs(20), || {
        env.services("w")
            .iter()
            .any(|s| s["name"] == "api" && s["state"] == "setup" && s["pid"].is_u64())
    });
    // A service that does not depend on it starts meanwhile.
    wait_until("web runs beside the setup", Duration::from_secs(20), || {
        env.services("w")
            .iter()
            .any(|s| s["name"] == "web" && s["state"] == "running")
    });
    let setup_pids = env.our_processes();
    assert!(!setup_pids.is_empty());
    let started = std::time::Instant::now();
    env.ok(&["down", "w"]);
    // Waiting for the setup would take its 60 s; down does not wait for it.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "down waited {:?}",
        started.elapsed()
    );
    wait_until("nothing of the world runs", Duration::from_secs(10), || {
        env.our_processes().is_empty()
    });
    let events = env.ok(&["events", "w"]);
    assert!(!events.contains("setup finished"), "{events}");
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_managed_server_that_dies_is_said_on_its_worlds_and_started_again() {
    crate::pg_server::pg_bin_dir().expect("postgresql installed (./scripts/test installs it)");
    let env = Env::new(&format!(
        r#"
[project]
name = "serverdeath"
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
    let server_pid = || -> Option<u32> {
        let v: serde_json::Value = serde_json::from_str(&env.ok(&["servers", "--json"])).unwrap();
        v.as_array()?.iter().find(|r| r["kind"] == "postgres")?["pid"]
            .as_u64()
            .map(|p| p as u32)
    };
    let old = server_pid().expect("the managed postgres runs");
    signal(old, 9);
    wait_until(
        "the death and the return are told",
        Duration::from_secs(30),
        || {
            let events = env.ok(&["events", "w"]);
            events.contains("server_down") && events.contains("server_back")
        },
    );
    let events = env.ok(&["events", "w"]);
    assert!(
        events.contains(&format!(
            "the managed postgres server (pid {old}) stopped running"
        )),
        "{events}"
    );
    let new = server_pid().expect("running again");
    assert_ne!(new, old);
    // The world is whole again: its slice answers on the same address.
    env.ok(&["up", "w"]);
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn setups_run_at_once_waiting_only_for_the_worktree_and_the_addresses_they_use() {
    crate::pg_server::pg_bin_dir().expect("postgresql installed (./scripts/test installs it)");
    let env = Env::new(&format!(
        r#"
[project]
name = "parsetup"
{{range}}

[services.db]
adapter = "postgres"

[services.gate]
cmd = "while [ ! -f go ]; do sleep 0.05; done; {SERVE}"
ports = ["main"]

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["gate", "db"]
env = {{ DATABASE_URL = "${{db.url}}" }}
setup = "echo \"$DATABASE_URL\" > api-setup.txt"

[services.web]
cmd = "{SERVE}"
url = true
depends_on = ["api"]
setup = "touch web-setup.txt"
"#
    ));
    let out = env.binky(&["up", "w", "--no-wait"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let wt = env.worktree("w");
    // Both setups run while `gate` (and so `api`, and so `web`) cannot be ready.
    wait_until("both setups ran", Duration::from_secs(60), || {
        wt.join("web-setup.txt").exists()
            && std::fs::read_to_string(wt.join("api-setup.txt")).is_ok_and(|t| t.ends_with('\n'))
    });
    let services = env.services("w");
    let state = |n: &str| {
        services
            .iter()
            .find(|s| s["name"] == n)
            .map(|s| s["state"].as_str().unwrap_or_default().to_owned())
    };
    assert_ne!(state("gate").as_deref(), Some("running"), "{services:?}");
    // api's setup saw its database's address, never the token's text.
    let seen = std::fs::read_to_string(wt.join("api-setup.txt")).unwrap();
    assert!(seen.starts_with("postgres"), "api's setup saw {seen:?}");
    std::fs::write(wt.join("go"), "").unwrap();
    env.ok(&["up", "w"]);
    let events = env.ok(&["events", "w"]);
    let setup_done = events.find("web: setup finished").expect(&events);
    let gate_ready = events.find("gate ready").expect(&events);
    assert!(setup_done < gate_ready, "{events}");
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

/// Processes of `bin` (a server binary's file name) whose working directory is `dir`.
fn servers_in(bin: &str, dir: &std::path::Path) -> Vec<u32> {
    let dir = dir.canonicalize().unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == bin)
                && std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c == dir)
        })
        .collect()
}

#[test]
fn a_managed_server_no_daemon_recorded_is_stopped_not_left_running_beside_a_new_one() {
    let env = Env::new(&format!(
        r#"
[project]
name = "orphansrv"
{{range}}

[services.cache]
adapter = "redis"

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["cache"]
"#
    ));
    env.ok(&["up", "w"]);
    // The world's own redis-server (no admin_url).
    let data = env
        .home
        .join("servers/redis/worlds")
        .join(env.slice_name("orphansrv", "w", "cache"))
        .join("data");
    let first = servers_in("redis-server", &data);
    assert_eq!(first.len(), 1, "{first:?}");
    // As a daemon killed between starting the server and recording it leaves things: the
    // server runs, the store does not know it.
    env.ok(&["daemon", "stop"]);
    let store = binky_controllers::store::Store::open(&env.home.join("state.db")).unwrap();
    store
        .write(binky_controllers::store::owner::Servers, |tx| {
            tx.execute(
                "UPDATE servers SET pid = NULL, start_time = NULL, state = 'stopped'",
                [],
            )?;
            Ok(())
        })
        .unwrap();
    drop(store);
    env.ok(&["up", "w"]);
    wait_until(
        "one redis-server on the data",
        Duration::from_secs(20),
        || servers_in("redis-server", &data).len() == 1,
    );
    let now = servers_in("redis-server", &data);
    assert_ne!(
        now, first,
        "the unrecorded server was stopped and a new one started"
    );
    assert!(!alive(first[0]), "the old server still runs");
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
