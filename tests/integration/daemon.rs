//! The daemon: on demand, one per home, replaceable at any moment without losing or
//! duplicating a service.

use std::time::Duration;

use crate::harness::*;

pub(crate) fn config() -> String {
    format!(
        r#"
[project]
name = "daemon"
{{range}}

[services.api]
cmd = "LISTEN_DELAY=0.3 exec python3 server.py ${{self.port}}"
url = true

[services.web]
cmd = "{SERVE}"
url = true
depends_on = ["api"]
"#
    )
}

/// (service, pid) of every live test server of this home, by the service it serves.
fn servers(env: &Env) -> Vec<String> {
    let mut out: Vec<String> = env
        .our_processes()
        .into_iter()
        .filter_map(|p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.contains("server.py").then_some(cmd)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn stopping_the_daemon_leaves_services_running_and_the_next_one_adopts_them() {
    let env = Env::new(&config());
    env.ok(&["up", "w"]);
    let pids: Vec<u32> = ["api", "web"]
        .iter()
        .map(|s| env.pid_of("w", s).unwrap())
        .collect();
    let daemon = env.daemon_pid().unwrap();
    let out = env.ok(&["daemon", "stop"]);
    assert!(out.contains("services keep running"), "{out}");
    assert!(!alive(daemon));
    for p in &pids {
        assert!(alive(*p), "a service died with the daemon");
    }
    let st = env.binky(&["daemon", "status"]);
    assert_eq!(st.status.code(), Some(1));

    // A new daemon adopts them: same pids, no duplicates.
    env.ok(&["up", "w"]);
    let again: Vec<u32> = ["api", "web"]
        .iter()
        .map(|s| env.pid_of("w", s).unwrap())
        .collect();
    assert_eq!(pids, again);
    assert_eq!(servers(&env).len(), 2, "{:?}", servers(&env));

    // Adopted services are still supervised: killed from outside, restarted.
    signal(pids[1], 9);
    wait_until("web restarted", Duration::from_secs(10), || {
        env.pid_of("w", "web").is_some_and(|p| p != pids[1]) && listening(env.port_of("w", "web"))
    });
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn killing_the_daemon_in_the_middle_of_up_leaves_no_duplicate_and_no_orphan() {
    let env = Env::new(&config());
    for (i, delay_ms) in [0u64, 20, 60, 150, 350, 600].into_iter().enumerate() {
        let world = format!("w{i}");
        let out = env.binky(&["up", &world, "--no-wait"]);
        assert!(out.status.success(), "{}", stderr(&out));
        std::thread::sleep(Duration::from_millis(delay_ms));
        let daemon = env.daemon_pid().expect("daemon running");
        signal(daemon, 9);
        wait_until("daemon dead", Duration::from_secs(5), || !alive(daemon));
        // The next command's daemon converges from the store alone.
        env.ok(&["up", &world, "-q"]);
        assert!(listening(env.port_of(&world, "web")));
        let servers = servers(&env);
        assert_eq!(
            servers.len(),
            2 * (i + 1),
            "after a kill at {delay_ms} ms: {servers:#?}"
        );
    }
    let s = env.status();
    for w in s["worlds"].as_array().unwrap() {
        assert_eq!(w["state"], "ready", "{w}");
    }
    for i in 0..6 {
        env.ok(&["remove", &format!("w{i}"), "-q"]);
    }
    env.assert_nothing_left(&["w0", "w1", "w2", "w3", "w4", "w5"]);
}

#[test]
fn only_one_daemon_runs_per_home() {
    let env = Env::new(&config());
    env.ok(&["daemon", "start"]);
    let first = env.daemon_pid().unwrap();
    let out = std::process::Command::new(binky_bin())
        .args(["daemon", "run"])
        .env("BINKY_HOME", &env.home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("already running"), "{}", stderr(&out));
    assert_eq!(env.daemon_pid(), Some(first));
    let status = env.ok(&["daemon", "status"]);
    assert!(status.contains(&format!("pid {first}")), "{status}");
    let mode = std::fs::metadata(binky::paths::Home::at(env.home.clone()).socket()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(mode.permissions().mode() & 0o777, 0o600);
}

#[test]
fn the_daemon_runs_in_process_as_a_library_function() {
    let env = Env::new(&config());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let config = binky::daemon::DaemonConfig::new(binky::paths::Home::at(env.home.clone()));
    let daemon = rt.spawn(binky::daemon::run(config, async {
        let _ = stopped.await;
    }));
    wait_until("socket", Duration::from_secs(5), || {
        env.binky(&["daemon", "status"]).status.success()
    });
    let status = env.ok(&["daemon", "status"]);
    assert!(
        status.contains(&format!("pid {}", std::process::id())),
        "the CLI talks to the in-process daemon: {status}"
    );
    env.ok(&["up", "w"]);
    assert!(listening(env.port_of("w", "web")));
    let pid = env.pid_of("w", "web").unwrap();
    stop.send(()).unwrap();
    rt.block_on(daemon).unwrap().unwrap();
    assert!(alive(pid), "services outlive the daemon");
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn daemon_restart_replaces_the_daemon_and_the_new_one_adopts_the_services() {
    let env = Env::new(&config());
    env.ok(&["up", "w"]);
    let old = env.daemon_pid().expect("a daemon runs");
    let before = servers(&env);
    let out = env.ok(&["daemon", "restart"]);
    assert!(out.contains("binky daemon restarted"), "{out}");
    let new = env.daemon_pid().expect("a daemon runs after restart");
    assert_ne!(new, old);
    assert!(!alive(old), "the old daemon is still alive");
    assert_eq!(servers(&env), before, "services were restarted or lost");
    let up = env.ok(&["up", "w"]);
    assert!(up.contains("w is up"), "{up}");
    assert_eq!(
        servers(&env),
        before,
        "the new daemon started a second copy"
    );
    // Without a daemon, restart starts one.
    env.ok(&["daemon", "stop"]);
    let out = env.ok(&["daemon", "restart"]);
    assert!(out.contains("binky daemon started"), "{out}");
    env.ok(&["remove", "w"]);
}

#[test]
fn reserve_sets_the_ram_and_disk_reserves_as_binky_012_did() {
    let env = Env::new(&config());
    let out = env.ok(&["reserve", "--ram", "12", "--disk", "3.5"]);
    assert!(out.contains("ram_reserve_percent = 12"), "{out}");
    let shown = env.ok(&["reserve"]);
    assert_eq!(shown, "ram_reserve_percent = 12\ndisk_reserve_gib = 3.5\n");
    let settings = env.ok(&["settings"]);
    assert!(settings.contains("disk_reserve_gib = 3.5"), "{settings}");
    let bad = env.binky(&["reserve", "--ram", "95"]);
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("ram_reserve_percent takes a percent from 0 to 90, not `95`"),
        "{}",
        stderr(&bad)
    );
    assert_eq!(
        env.ok(&["reserve"]),
        shown,
        "a refused value changed something"
    );
}

/// What each controller's work costs is counted in the daemon and shown: `daemon status` a
/// line each, `metrics` the numbers.
#[test]
fn the_daemon_counts_what_each_controllers_reconciles_cost_and_shows_it() {
    let env = Env::new(&config());
    env.ok(&["up", "w"]);
    let status = env.ok(&["daemon", "status"]);
    for c in ["worktree", "port", "process", "route"] {
        let line = status
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{c} ")))
            .unwrap_or_else(|| panic!("no line for the {c} controller:\n{status}"));
        assert!(
            line.contains(" reconciles, ") && !line.contains(" 0 reconciles"),
            "{line}"
        );
    }
    let metrics: serde_json::Value = serde_json::from_str(&env.ok(&["metrics"])).unwrap();
    let process = &metrics["daemon"]["controllers"]["process"];
    let n = process["reconciles"].as_u64().expect("process reconciles");
    assert!(n >= 1, "{process}");
    assert!(process["busy_us"].as_u64().unwrap() >= process["max_us"].as_u64().unwrap());
    // Another reconcile of the world is counted.
    env.ok(&["reload", "w"]);
    let again: serde_json::Value = serde_json::from_str(&env.ok(&["metrics"])).unwrap();
    assert!(
        again["daemon"]["controllers"]["process"]["reconciles"]
            .as_u64()
            .unwrap()
            > n,
        "{again}"
    );
    env.ok(&["remove", "w"]);
}

/// A daemon too busy to answer within a request's 3 s is asked again while it runs — not
/// taken for gone, and no second daemon is started beside it; the command succeeds once it
/// answers, and what the command recorded is carried out by the next daemon.
#[test]
fn a_command_asks_a_daemon_too_busy_to_answer_again_and_starts_no_second_one() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixListener;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    let env = Env::new(&config());
    let home = binky::paths::Home::at(env.home.clone());
    home.ensure().unwrap();
    // The busy daemon: it holds the socket and answers nothing for 7 s (more than two tries
    // of 3 s each), then answers every request.
    let listener = UnixListener::bind(home.socket()).unwrap();
    listener.set_nonblocking(true).unwrap();
    let busy_until = Instant::now() + Duration::from_secs(7);
    let (asked, stop) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let daemon = {
        let (asked, stop) = (asked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let Ok((stream, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                stream.set_nonblocking(false).unwrap();
                let asked = asked.clone();
                conns.push(std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut w = stream;
                    let mut line = String::new();
                    while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                        asked.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(busy_until.saturating_duration_since(Instant::now()));
                        let answer = format!(
                            "{{\"ok\":true,\"pid\":{},\"version\":\"{}\"}}\n",
                            std::process::id(),
                            env!("CARGO_PKG_VERSION")
                        );
                        if w.write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                        line.clear();
                    }
                }));
            }
            for c in conns {
                let _ = c.join();
            }
        })
    };
    let started = Instant::now();
    let out = env.binky(&["up", "w", "--no-wait"]);
    let took = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    daemon.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        took >= Duration::from_secs(6),
        "the daemon answered nothing before 7 s: {took:?}"
    );
    assert!(
        asked.load(Ordering::SeqCst) >= 3,
        "two tries ran out of time, the next was answered: {} requests",
        asked.load(Ordering::SeqCst)
    );
    assert_eq!(env.daemon_pid(), None, "a second daemon was started");
    // The busy daemon goes; the next command's daemon carries out what was recorded.
    std::fs::remove_file(home.socket()).unwrap();
    env.ok(&["up", "w"]);
    assert!(env.pid_of("w", "web").is_some());
    env.ok(&["remove", "w"]);
}
