//! The admission gate through the real binary: `max_parallel` queues, `cool_oldest` cools
//! the least recently used world, approvals hold new commands.

use std::time::Duration;

use crate::harness::*;

fn config(extra: &str) -> String {
    format!(
        r#"
[project]
name = "gate"
{{range}}

[services.api]
cmd = "{SERVE}"
url = true
{extra}
"#
    )
}

fn state(env: &Env, world: &str) -> String {
    env.status()["worlds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == world)
        .map(|w| w["state"].as_str().unwrap_or("").to_owned())
        .unwrap_or_default()
}

#[test]
fn with_max_parallel_2_a_third_world_queues_and_starts_when_one_goes_down() {
    let env = Env::new(&config(""));
    env.ok(&["settings", "max_parallel=2"]);
    env.ok(&["up", "a"]);
    env.ok(&["up", "b"]);
    let out = env.binky(&["up", "c", "--timeout", "3s"]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("max_parallel = 2"),
        "{}",
        stderr(&out)
    );
    assert_eq!(state(&env, "c"), "queued");
    let status = env.ok(&["status", "c"]);
    assert!(
        status.contains("Queued") && status.contains("binky down"),
        "{status}"
    );
    assert!(env.pid_of("c", "api").is_none(), "a queued world started");
    // A fourth queues behind the third (FIFO).
    let out = env.binky(&["up", "d", "--no-wait"]);
    assert!(out.status.success());
    env.ok(&["down", "a"]);
    wait_until("c starts by itself", Duration::from_secs(20), || {
        state(&env, "c") == "ready"
    });
    assert_eq!(state(&env, "d"), "queued", "d jumped the queue");
    assert!(env.ok(&["status", "d"]).contains("max_parallel = 2"));
    // Raising the limit admits d.
    env.ok(&["settings", "max_parallel=3"]);
    wait_until("d starts", Duration::from_secs(20), || {
        state(&env, "d") == "ready"
    });
    for w in ["a", "b", "c", "d"] {
        env.ok(&["remove", w]);
    }
    env.assert_nothing_left(&["a", "b", "c", "d"]);
}

#[test]
fn with_cool_oldest_the_least_recently_used_world_stops_and_comes_back_with_its_data() {
    let env = Env::new(&config(""));
    env.ok(&[
        "settings",
        "max_parallel=2",
        "cool_oldest=true",
        "focus_minutes=0",
    ]);
    env.ok(&["up", "a"]);
    let a_port = env.port_of("a", "api");
    std::fs::write(env.worktree("a").join("notes.txt"), "a's work").unwrap();
    env.ok(&["up", "b"]);
    env.ok(&["up", "c"]);
    // a was used least recently: it was stopped to make room.
    wait_until("a is cooled", Duration::from_secs(15), || {
        state(&env, "a") == "stopped"
    });
    assert_eq!(state(&env, "b"), "ready");
    assert_eq!(state(&env, "c"), "ready");
    let events = env.ok(&["events", "a", "-n", "100"]);
    assert!(
        events.contains("stopped to make room for c") && events.contains("binky up a"),
        "{events}"
    );
    // a comes back on its next up, with its files and port; b (now the oldest) goes.
    env.ok(&["up", "a"]);
    assert_eq!(
        std::fs::read_to_string(env.worktree("a").join("notes.txt")).unwrap(),
        "a's work"
    );
    assert_eq!(env.port_of("a", "api"), a_port);
    assert_eq!(served_env(a_port)["PORT"], a_port.to_string());
    wait_until("b is cooled", Duration::from_secs(15), || {
        state(&env, "b") == "stopped"
    });
    env.ok(&["remove", "a", "--force"]);
    for w in ["b", "c"] {
        env.ok(&["remove", w]);
    }
    env.assert_nothing_left(&["a", "b", "c"]);
}

#[test]
fn approvals_hold_a_new_command_until_approved_and_revoking_holds_again() {
    let env = Env::new(&config(""));
    env.ok(&["settings", "approvals=true"]);
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("cmd of api") && err.contains("binky approve "),
        "{err}"
    );
    assert_eq!(state(&env, "w"), "approval");
    assert!(env.pid_of("w", "api").is_none());
    // Without a terminal, approving needs --yes.
    let out = env.binky(&["approve", "--all", "w"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--yes"), "{}", stderr(&out));
    let list = env.ok(&["approve", "--list"]);
    assert!(
        list.contains("pending") && list.contains("python3 server.py"),
        "{list}"
    );
    env.ok(&["approve", "--all", "w", "--yes"]);
    env.ok(&["up", "w"]);
    let api = env.pid_of("w", "api").unwrap();
    // An edit adds a command: the world is held, api keeps running, the new one waits.
    let edited = config("\n[services.extra]\ncmd = \"exec sleep 600\"\n");
    std::fs::write(
        env.worktree("w").join("binky.toml"),
        edited.replace("{range}", &env.range()),
    )
    .unwrap();
    wait_until("the world is held", Duration::from_secs(15), || {
        state(&env, "w") == "approval"
    });
    assert!(env.ok(&["status", "w"]).contains("exec sleep 600"));
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        env.pid_of("w", "extra").is_none(),
        "an unapproved command ran"
    );
    assert_eq!(env.pid_of("w", "api"), Some(api));
    let list: serde_json::Value =
        serde_json::from_str(&env.ok(&["approve", "--list", "--json"])).unwrap();
    let key = list
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["command"] == "exec sleep 600")
        .unwrap()["key"]
        .as_str()
        .unwrap()
        .to_owned();
    env.ok(&["approve", &key, "--yes"]);
    wait_until(
        "extra starts once approved",
        Duration::from_secs(15),
        || env.pid_of("w", "extra").is_some(),
    );
    // Revoked: held again at the next up.
    env.ok(&["approve", "--revoke", &key]);
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(stderr(&out).contains(&key), "{}", stderr(&out));
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn settings_show_defaults_and_refuse_bad_values() {
    let env = Env::new(&config(""));
    let out = env.ok(&["settings"]);
    assert!(out.contains("max_parallel = 0  (default)"), "{out}");
    let out = env.binky(&["settings", "max_parallel=lots"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("whole number"), "{}", stderr(&out));
    let out = env.binky(&["settings", "max_parallel=3", "bogus=1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        env.ok(&["settings"]).contains("max_parallel = 0"),
        "a bad assignment wrote the good one before it"
    );
    let out = env.ok(&["config"]);
    assert!(
        out.contains("cool_oldest = false") && out.contains("least recently used"),
        "{out}"
    );
}

#[test]
fn doctor_reports_each_check_and_fails_on_a_reserve_the_disk_cannot_keep() {
    let env = Env::new(&config(""));
    let out = env.binky(&["doctor"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    for check in [
        "git",
        "state db",
        "daemon",
        "proxy",
        "server binaries",
        "inotify",
        "memory",
        "disk",
    ] {
        assert!(text.contains(check), "no {check} check: {text}");
    }
    env.ok(&["settings", "disk_reserve_gib=1000000"]);
    let out = env.binky(&["doctor", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let disk = v
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "disk")
        .unwrap()
        .clone();
    assert_eq!(disk["level"], "fail");
    assert!(disk["fix"].as_str().unwrap().contains("binky remove"));
    // The same reserve holds a new world at the gate.
    let out = env.binky(&["up", "w", "--timeout", "2s"]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("disk_reserve_gib"),
        "{}",
        stderr(&out)
    );
    env.ok(&["settings", "disk_reserve_gib=0"]);
    env.ok(&["up", "w"]);
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
