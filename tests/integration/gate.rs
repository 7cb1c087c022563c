//! The admission gate through the real binary: `max_parallel` queues, `cool_oldest` cools
//! the least recently used world and it comes back by itself, the default memory watch cools
//! the newest world under real memory pressure, approvals hold new commands.

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
fn with_cool_oldest_the_least_recently_used_world_is_cooled_and_comes_back_by_itself_with_its_data()
{
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
    // a was used least recently: it was cooled to make room, its processes stopped.
    wait_until("a is cooled", Duration::from_secs(15), || {
        state(&env, "a") == "cooled" && env.pid_of("a", "api").is_none()
    });
    assert_eq!(state(&env, "b"), "ready");
    assert_eq!(state(&env, "c"), "ready");
    let events = env.ok(&["events", "a", "-n", "100"]);
    assert!(
        events.contains("stopped to make room for c")
            && events.contains("starts again by itself when there is room"),
        "{events}"
    );
    assert!(
        env.ok(&["status", "a"]).contains("waiting for room"),
        "{}",
        env.ok(&["status", "a"])
    );
    // c goes down: a comes back by itself, with its files and port, and says so.
    env.ok(&["down", "c"]);
    wait_until("a is back", Duration::from_secs(20), || {
        state(&env, "a") == "ready"
    });
    assert_eq!(
        std::fs::read_to_string(env.worktree("a").join("notes.txt")).unwrap(),
        "a's work"
    );
    assert_eq!(env.port_of("a", "api"), a_port);
    assert_eq!(served_env(a_port)["PORT"], a_port.to_string());
    assert!(env
        .ok(&["events", "a", "-n", "100"])
        .contains("started again after"));
    // `binky up c`: a request of its own, which cools a again (coming back is not a use:
    // a is still the least recently used).
    env.ok(&["up", "c"]);
    wait_until("a is cooled again", Duration::from_secs(15), || {
        state(&env, "a") == "cooled"
    });
    assert_eq!(state(&env, "b"), "ready");
    env.ok(&["remove", "a", "--force"]);
    for w in ["b", "c"] {
        env.ok(&["remove", w]);
    }
    env.assert_nothing_left(&["a", "b", "c"]);
}

/// Percent of memory available now (`MemAvailable / MemTotal`).
fn mem_available_percent() -> f64 {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kib = |key: &str| -> f64 {
        info.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap()
    };
    kib("MemAvailable:") * 100.0 / kib("MemTotal:")
}

/// A process holding `percent` of this machine's memory until it is dropped.
struct Hog(std::process::Child);

impl Hog {
    fn take(percent: f64) -> Hog {
        let info = std::fs::read_to_string("/proc/meminfo").unwrap();
        let total_kib: f64 = info
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap();
        let bytes = (total_kib * 1024.0 * percent / 100.0) as u64;
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                &format!("import sys, time\nb = bytearray(b'\\x01') * {bytes}\nprint('held', flush=True)\ntime.sleep(600)"),
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        use std::io::BufRead;
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "held", "the memory hog did not start");
        Hog(child)
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn under_the_default_memory_watch_the_world_admitted_last_is_cooled_and_comes_back_when_memory_is_freed(
) {
    // Nothing but the RAM reserve is set: cool_under_pressure is on by default.
    let env = Env::new(&config(""));
    env.ok(&["up", "first"]);
    env.ok(&["up", "last"]);
    // A reserve a little under what is available now, then a process that takes twice that
    // much: the machine is under its reserve for real.
    let avail = mem_available_percent();
    let reserve = (avail - 8.0).floor().clamp(1.0, 90.0);
    env.ok(&["settings", &format!("ram_reserve_percent={reserve}")]);
    let hog = Hog::take(16.0);
    wait_until("last is cooled", Duration::from_secs(60), || {
        state(&env, "last") == "cooled" && env.pid_of("last", "api").is_none()
    });
    assert_eq!(state(&env, "first"), "ready", "the older world was cooled");
    let status = env.ok(&["status", "last"]);
    assert!(
        status.contains("of memory available") && status.contains("ram_reserve_percent"),
        "{status}"
    );
    // The memory is freed: last comes back on its own, on its port.
    let port = env.port_of("last", "api");
    drop(hog);
    wait_until("last is back", Duration::from_secs(60), || {
        state(&env, "last") == "ready"
    });
    assert_eq!(served_env(port)["BINKY_WORKTREE"], "last");
    let events = env.ok(&["events", "last", "-n", "100"]);
    assert!(
        events.contains("cooled") && events.contains("started again after"),
        "{events}"
    );
    for w in ["first", "last"] {
        env.ok(&["remove", w]);
    }
    env.assert_nothing_left(&["first", "last"]);
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
    // (Without a terminal approving is refused: person::person_only_actions_need_a_terminal.)
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
    // The home's identity, which its slices on shared servers carry.
    assert!(text.contains(&format!("home {}", env.home_id())), "{text}");
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
