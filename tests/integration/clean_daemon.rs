//! A daemon is the same clean process whoever started it, read from Linux's `/proc` (its
//! environment, signals, umask, session, directory, descriptors): Linux only, as what it
//! reads is; `binky_platform` is where the daemon's cleaning itself differs per system.
#![cfg(target_os = "linux")]

use crate::daemon::config;
use crate::harness::*;

/// A field of `/proc/PID/status` (`SigIgn`, `Umask`, …).
fn proc_status(pid: u32, field: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// The variables of a process's environment, by name.
fn environ_names(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter_map(|e| {
            let e = String::from_utf8_lossy(e);
            e.split_once('=').map(|(k, _)| k.to_owned())
        })
        .collect()
}

/// A daemon started from inside a world (`binky daemon start` in a shell under `binky
/// exec`, which had set traps, an umask and an open file of its own) is the same clean
/// daemon a person's is: no world's variable or mark, its own session, `/` as its
/// directory, default signals, the usual umask, no descriptor of the caller's; and it
/// outlives the command that started it. A person's daemon keeps the person's variables.
#[test]
fn a_daemon_started_from_inside_a_world_is_the_same_clean_daemon() {
    let env = Env::new(&config());
    env.ok(&["up", "w"]);
    env.ok(&["daemon", "stop"]);
    let held = env.dir.path().join("held-by-the-caller");
    let line = format!(
        "trap '' HUP USR1 TERM; umask 000; exec 7>'{}'; AGENT_VAR=1 '{}' daemon start",
        held.display(),
        binky_bin()
    );
    let out = env.binky(&["exec", "w", "--", "sh", "-c", &line]);
    assert!(out.status.success(), "{}", stderr(&out));
    let daemon = env.daemon_pid().expect("a daemon started from the world");
    let names = environ_names(daemon);
    assert!(names.iter().any(|n| n == "BINKY_HOME"), "{names:?}");
    for gone in [
        "BINKY_SPAWNED_IN",
        "BINKY_SPAWN_TOKEN",
        "BINKY_WORKTREE",
        "BINKY_WORKTREE_PATH",
        "BINKY_PROJECT",
        "API_PORT",
        "WEB_URL",
        "AGENT_VAR",
    ] {
        assert!(
            !names.iter().any(|n| n == gone),
            "the daemon has {gone}: {names:?}"
        );
    }
    assert_eq!(
        std::fs::read_link(format!("/proc/{daemon}/cwd")).unwrap(),
        std::path::Path::new("/")
    );
    let stat = std::fs::read_to_string(format!("/proc/{daemon}/stat")).unwrap();
    let session: u32 = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .nth(3)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        session, daemon,
        "the daemon does not lead a session of its own"
    );
    // Only SIGPIPE ignored (bit 13; the C library's own 32 and 33 aside), nothing blocked,
    // group and other may not write.
    let ignored = u64::from_str_radix(&proc_status(daemon, "SigIgn"), 16).unwrap();
    assert_eq!(ignored & !(0b11 << 31), 1 << 12, "{ignored:x}");
    assert_eq!(proc_status(daemon, "SigBlk"), "0000000000000000");
    assert_eq!(proc_status(daemon, "Umask"), "0022");
    let fds: Vec<std::path::PathBuf> = std::fs::read_dir(format!("/proc/{daemon}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .collect();
    assert!(
        !fds.contains(&held),
        "the caller's file is open in the daemon"
    );
    // The world is carried on by it, and ends nothing when its caller has ended.
    env.ok(&["wait", "w"]);
    assert!(alive(daemon));

    // A person's daemon keeps the person's variables (a secret_command's credentials).
    let out = env.binky_env(&["daemon", "restart"], &[("PERSON_VAR", "1")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let person = env.daemon_pid().expect("the person's daemon");
    assert_ne!(person, daemon);
    assert!(environ_names(person).iter().any(|n| n == "PERSON_VAR"));
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
