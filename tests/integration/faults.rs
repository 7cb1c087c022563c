//! Bad input and faults: each refused or survived with a clear message, losing nothing.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use crate::harness::*;

fn one_service(cmd: &str) -> String {
    format!(
        r#"
[project]
name = "faults"
{{range}}

[services.api]
cmd = "{cmd}"
url = true
"#
    )
}

#[test]
fn a_malformed_config_is_refused_with_file_line_and_fix_and_nothing_is_written() {
    let env = Env::new(&one_service(SERVE));
    for (bad, expect) in [
        (
            "[project]\nname = \"x\"\n[services.api]\ncmdd = \"x\"\n",
            vec!["binky.toml:4:1", "services.api.cmdd", "did you mean `cmd`"],
        ),
        (
            "[project]\nname = \"x\"\n[services.api\n",
            vec!["binky.toml:3", "not valid TOML"],
        ),
        (
            "[project]\nname = \"x\"\n[services.api]\ncmd = \"x\"\nrestart = \"sometimes\"\n",
            vec![
                "binky.toml:5",
                "services.api.restart",
                "on-failure, always, never",
            ],
        ),
    ] {
        std::fs::write(env.repo.join("binky.toml"), bad).unwrap();
        env.git(&["commit", "-qam", "bad"]);
        let out = env.binky(&["up", "w"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let err = stderr(&out);
        for e in expect {
            assert!(err.contains(e), "`{e}` missing from: {err}");
        }
        assert!(
            !env.worktree("w").exists(),
            "a worktree was created for a bad config"
        );
        assert_eq!(
            env.status()["worlds"].as_array().unwrap().len(),
            0,
            "a world was written"
        );
    }
}

#[test]
fn unsafe_world_names_are_refused_before_anything_is_created() {
    let env = Env::new(&one_service(SERVE));
    for name in ["../x", "a;b", "-rf", "a b", "x/../../y", "$(touch pwned)"] {
        let out = env.binky(&["up", "--", name]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("invalid world name"),
            "{name}: {}",
            stderr(&out)
        );
    }
    assert!(!env.dir.path().join("repo.worktrees").exists());
    assert!(!env.repo.join("pwned").exists());
    assert_eq!(env.status()["worlds"].as_array().unwrap().len(), 0);
    assert_eq!(env.git(&["branch", "--list"]).lines().count(), 1);
}

#[test]
fn a_world_name_in_another_case_is_refused_as_the_same_name() {
    let env = Env::new(&one_service(SERVE));
    let out = env.binky(&["up", "Demo"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // From the main checkout and from inside the world (as an agent there would), every
    // other case of the name is refused before anything is made: it would share Demo's
    // host names, and on macOS's and Windows' filesystems its worktree folder.
    for (dir, name) in [(env.repo.clone(), "demo"), (env.worktree("Demo"), "DEMO")] {
        let out = env.binky_in(&dir, &["up", name]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!(
                "world `{name}` differs only by case from world `Demo`"
            )),
            "{err}"
        );
        assert!(err.contains("use `Demo`"), "{err}");
        assert!(!env.worktree(name).exists(), "{name}: a worktree was made");
    }
    assert_eq!(env.status()["worlds"].as_array().unwrap().len(), 1);
    // main and Demo: no branch was made for the refused names.
    assert_eq!(env.git(&["branch", "--list"]).lines().count(), 2);
    // The name as it was is the same world, brought up again.
    let out = env.binky(&["up", "Demo"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_dependency_cycle_is_refused_naming_the_cycle() {
    let env = Env::new(
        r#"
[project]
name = "cycle"
{range}

[services.a]
cmd = "true"
depends_on = ["b"]

[services.b]
cmd = "true"
depends_on = ["c"]

[services.c]
cmd = "true"
depends_on = ["a"]
"#,
    );
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("dependency cycle: a -> b -> c -> a"), "{err}");
    assert_eq!(env.status()["worlds"].as_array().unwrap().len(), 0);
}

#[test]
fn a_port_held_by_a_foreign_process_is_never_handed_out() {
    let env = Env::new(&one_service(SERVE));
    // Hold every port of the block but three; up three worlds.
    let free: Vec<u16> = vec![env.ports.low + 7, env.ports.low + 21, env.ports.low + 33];
    let _held: Vec<TcpListener> = (env.ports.low..=env.ports.low + 39)
        .filter(|p| !free.contains(p))
        .filter_map(|p| TcpListener::bind(("127.0.0.1", p)).ok())
        .collect();
    for w in ["a", "b", "c"] {
        env.ok(&["up", w]);
        let port = env.port_of(w, "api");
        assert!(free.contains(&port), "world {w} got held port {port}");
        assert_eq!(served_env(port)["BINKY_WORKTREE"], w);
    }
    // A fourth world has no port left: it fails saying so, and why.
    let out = env.binky(&["up", "d"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("no free port in") && err.contains("held by other processes"),
        "{err}"
    );
    env.ok(&["remove", "d"]);
    for w in ["a", "b", "c"] {
        env.ok(&["remove", w]);
    }
    env.assert_nothing_left(&["a", "b", "c", "d"]);
}

#[test]
fn a_kept_port_taken_while_the_world_was_down_is_moved_not_reused() {
    let env = Env::new(&one_service(SERVE));
    env.ok(&["up", "w"]);
    let old = env.port_of("w", "api");
    env.ok(&["down", "w"]);
    let squatter = TcpListener::bind(("127.0.0.1", old)).unwrap();
    let out = env.binky(&["up", "w"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The move may happen as soon as the port controller next looks (even before this
    // `up`), so look for it in the world's history.
    let events = env.ok(&["events", "w"]);
    // The event names who holds it: this test process.
    assert!(
        events.contains(&format!("port {old} of api is held by `"))
            && events.contains(&format!("(pid {}); moved api to", std::process::id())),
        "{events}"
    );
    let new = env.port_of("w", "api");
    assert_ne!(new, old);
    assert_eq!(served_env(new)["BINKY_WORKTREE"], "w");
    drop(squatter);
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_service_that_exits_at_once_is_restarted_with_backoff_and_others_are_unaffected() {
    let env = Env::new(&format!(
        r#"
[project]
name = "crash"
{{range}}

[services.good]
cmd = "{SERVE}"
url = true

[services.bad]
cmd = "echo about to fail; exit 3"
"#
    ));
    let started = Instant::now();
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("bad keeps exiting (exit 3"), "{err}");
    assert!(
        err.contains("about to fail"),
        "the log tail is shown: {err}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let good_pid = env.pid_of("w", "good").unwrap();
    assert!(listening(env.port_of("w", "good")));

    // It keeps being restarted, further and further apart.
    wait_until("5 restarts", Duration::from_secs(30), || {
        env.services("w")
            .iter()
            .any(|s| s["name"] == "bad" && s["restarts"].as_u64().unwrap_or(0) >= 5)
    });
    let ev: serde_json::Value =
        serde_json::from_str(&env.ok(&["events", "w", "--json", "-n", "200"])).unwrap();
    let starts: Vec<i64> = ev
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["kind"] == "started" && e["message"].as_str().unwrap().starts_with("started bad")
        })
        .map(|e| e["at"].as_i64().unwrap())
        .collect();
    let gaps: Vec<i64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.len() >= 4, "{gaps:?}");
    for w in gaps.windows(2).take(3) {
        assert!(w[1] > w[0], "restarts are not backing off: {gaps:?}");
    }
    assert!(gaps[0] >= 400, "{gaps:?}");
    // The healthy service was never touched.
    assert_eq!(env.pid_of("w", "good"), Some(good_pid));
    let detail = env.ok(&["status", "w"]);
    assert!(detail.contains("CrashLoop"), "{detail}");
    assert!(detail.contains("exit 3"), "{detail}");
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn grandchildren_die_with_their_service() {
    let env = Env::new(&one_service(
        "sleep 1000 & sleep 1001 & exec python3 server.py ${self.port}",
    ));
    env.ok(&["up", "w"]);
    wait_until("three processes", Duration::from_secs(5), || {
        env.our_processes().len() >= 3
    });
    let before = env.our_processes();
    env.ok(&["down", "w"]);
    for p in before {
        assert!(!alive(p), "pid {p} survived down");
    }
    env.ok(&["up", "w"]);
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_service_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let env = Env::new(&one_service("exec python3 stubborn.py ${self.port}"));
    std::fs::write(
        env.repo.join("stubborn.py"),
        "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nexec(open('server.py').read())\n",
    )
    .unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "stubborn"]);
    env.ok(&["up", "w"]);
    let pid = env.pid_of("w", "api").unwrap();
    let t = Instant::now();
    env.ok(&["down", "w"]);
    assert!(!alive(pid));
    assert!(
        t.elapsed() >= Duration::from_secs(4),
        "SIGKILL came before the grace period"
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_service_that_never_listens_fails_after_its_health_timeout_with_a_hint() {
    let env = Env::new(
        r#"
[project]
name = "deaf"
{range}

[services.api]
cmd = "sleep 1000"
url = true
health = { tcp = "${self.port}", timeout = "1s" }
"#,
    );
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("api is not ready within its health timeout of 1.0s"),
        "{}",
        stderr(&out)
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn up_exits_75_when_its_wait_runs_out_and_the_daemon_carries_on() {
    let env = Env::new(&one_service(
        "LISTEN_DELAY=3 exec python3 server.py ${self.port}",
    ));
    let out = env.binky(&["up", "w", "--timeout", "1s"]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(stderr(&out).contains("still not up"), "{}", stderr(&out));
    wait_until(
        "the world becomes ready by itself",
        Duration::from_secs(15),
        || env.status()["worlds"][0]["state"] == "ready",
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_failing_setup_fails_the_world_with_its_output_and_a_fixed_one_recovers() {
    let env = Env::new(&format!(
        r#"
[project]
name = "setup"
{{range}}

[services.api]
cmd = "{SERVE}"
url = true
setup = "echo installing; test -f ready.flag || {{ echo missing ready.flag >&2; exit 4; }}"
"#
    ));
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("setup") && err.contains("exit 4") && err.contains("missing ready.flag"),
        "{err}"
    );
    assert!(
        env.pid_of("w", "api").is_none(),
        "the service started despite a failed setup"
    );
    std::fs::write(env.worktree("w").join("ready.flag"), "").unwrap();
    env.ok(&["up", "w"]);
    assert!(listening(env.port_of("w", "api")));
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn an_unknown_world_lists_the_ones_that_exist() {
    let env = Env::new(&one_service(SERVE));
    env.ok(&["up", "real"]);
    for cmd in [
        vec!["down", "nope"],
        vec!["env", "nope"],
        vec!["logs", "nope"],
        vec!["remove", "nope"],
    ] {
        let out = env.binky(&cmd);
        assert_eq!(out.status.code(), Some(2), "{cmd:?}");
        assert!(
            stderr(&out).contains("no world `nope` in the repository ")
                && stderr(&out).contains("; worlds: real"),
            "{}",
            stderr(&out)
        );
    }
    let out = env.binky(&["logs", "real", "nosuch"]);
    assert!(
        stderr(&out).contains("has no service `nosuch`; services: api"),
        "{}",
        stderr(&out)
    );
    env.ok(&["remove", "real"]);
    env.assert_nothing_left(&["real"]);
}

#[test]
fn a_shared_service_waiting_for_one_worlds_own_and_unknown_adapters_are_refused_not_ignored() {
    let env = Env::new(
        r#"
[project]
name = "later"
{range}

[services.queue]
cmd = "sleep 600"

[services.api]
cmd = "true"
shared = true
depends_on = ["queue"]
"#,
    );
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "is shared (one instance for all the project's worlds) but depends on `queue`"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_adapter_not_on_path_runs_the_world_and_its_slice_says_what_to_install() {
    // binky 0.1.2 looked an external adapter up only when the world came up: its configs
    // with `adapter = "fake"` run, and so do they here, saying what is missing.
    let env = Env::new(
        "[project]\nname = \"later\"\n{range}\n\n[services.db]\nadapter = \"nosuchdb\"\n\n[services.api]\ncmd = \"exec sleep 600\"\n",
    );
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("warning: services.db.adapter") && err.contains("binky-adapter-nosuchdb"),
        "{err}"
    );
    // The world was written and runs what it can; the slice names what to install.
    let status = env.status();
    let world = &status["worlds"][0];
    assert_eq!(world["name"], "w", "{status}");
    let db = world["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "db")
        .unwrap()
        .clone();
    assert!(
        db["message"]
            .as_str()
            .unwrap_or("")
            .contains("binky-adapter-nosuchdb"),
        "{db}"
    );
    wait_until(
        "api to start beside the failed slice",
        Duration::from_secs(30),
        || env.pid_of("w", "api").is_some(),
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn concurrent_ups_from_many_shells_get_distinct_ports() {
    let env = Env::new(&one_service(SERVE));
    env.ok(&["daemon", "start"]);
    let names: Vec<String> = (0..6).map(|i| format!("w{i}")).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = names
            .iter()
            .map(|n| s.spawn(|| env.binky(&["up", n, "-q"])))
            .collect();
        for h in handles {
            let out = h.join().unwrap();
            assert!(out.status.success(), "{}", stderr(&out));
        }
    });
    let mut ports: Vec<u16> = names.iter().map(|n| env.port_of(n, "api")).collect();
    for (n, p) in names.iter().zip(&ports) {
        assert_eq!(served_env(*p)["BINKY_WORKTREE"], n.as_str());
    }
    ports.sort();
    ports.dedup();
    assert_eq!(ports.len(), names.len());
    for n in &names {
        env.ok(&["remove", n, "-q"]);
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    env.assert_nothing_left(&refs);
}
