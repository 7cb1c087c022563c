//! Processes, read from `/proc`: is one alive, its parent, a tree, and the processes that
//! belong to a test's or a benchmark's sandbox (what the harness calls leftovers).

use std::fs;
use std::path::Path;

/// Alive and not a zombie (nor dead and not yet reaped).
pub fn alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => match s.rfind(')').and_then(|i| s[i + 2..].chars().next()) {
            Some(state) => state != 'Z' && state != 'X',
            None => false,
        },
        Err(_) => false,
    }
}

/// The parent of `pid`, whatever its state.
pub fn ppid(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The parent of `pid` if `pid` is not a zombie.
pub fn live_ppid(pid: u32) -> Option<u32> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let mut f = rest.split_whitespace();
    if f.next()? == "Z" {
        return None;
    }
    f.next()?.parse().ok()
}

/// Every pid in `/proc`.
pub fn all_pids() -> Vec<u32> {
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .collect()
}

/// `pid` and its direct children (an nginx master and its workers).
pub fn with_children(pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    out.extend(all_pids().into_iter().filter(|p| ppid(*p) == Some(pid)));
    out
}

/// `root` and every live process below it.
pub fn tree(root: u32) -> Vec<u32> {
    if !alive(root) {
        return Vec::new();
    }
    let parents: Vec<(u32, u32)> = all_pids()
        .into_iter()
        .filter_map(|p| live_ppid(p).map(|pp| (p, pp)))
        .collect();
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    out
}

/// Processes that belong to one tool's sandbox: `BINKY_HOME=<home>` in their environment, or a
/// working directory inside `root`. Not this process.
pub fn sandbox_processes(home: &Path, root: &Path) -> Vec<u32> {
    let me = std::process::id();
    let needle = format!("BINKY_HOME={}", home.display());
    all_pids()
        .into_iter()
        .filter(|&pid| pid != me && alive(pid))
        .filter(|pid| {
            let env_match = fs::read(format!("/proc/{pid}/environ"))
                .map(|e| e.split(|b| *b == 0).any(|v| v == needle.as_bytes()))
                .unwrap_or(false);
            let cwd_match = fs::read_link(format!("/proc/{pid}/cwd"))
                .map(|c| c.starts_with(root))
                .unwrap_or(false);
            env_match || cwd_match
        })
        .collect()
}

/// Live processes with an environment entry starting with `prefix` (binky marks what it
/// spawns with `BINKY_SPAWN_TOKEN=<home tag>.…`).
pub fn with_env_prefix(prefix: &str) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/environ"))
                .map(|env| {
                    env.split(|b| *b == 0)
                        .any(|e| e.starts_with(prefix.as_bytes()))
                })
                .unwrap_or(false)
        })
        .filter(|pid| alive(*pid))
        .collect()
}

/// Live processes whose command line contains every one of `words`.
pub fn with_cmdline(words: &[&str]) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    let cmd = String::from_utf8_lossy(&c).replace('\0', " ");
                    words.iter().all(|w| cmd.contains(w))
                })
                .unwrap_or(false)
        })
        .filter(|pid| alive(*pid))
        .collect()
}

/// The command line of `pid`, its arguments joined by spaces (empty when gone).
pub fn cmdline(pid: u32) -> String {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .replace('\0', " ")
                .trim()
                .to_owned()
        })
        .unwrap_or_default()
}

/// Live processes (not this one) whose working directory is inside one of `dirs`.
pub fn with_cwd_in(dirs: &[&Path]) -> Vec<u32> {
    let me = std::process::id();
    all_pids()
        .into_iter()
        .filter(|&pid| pid != me)
        .filter(|pid| {
            fs::read_link(format!("/proc/{pid}/cwd"))
                .map(|c| dirs.iter().any(|d| c.starts_with(d)))
                .unwrap_or(false)
        })
        .filter(|pid| alive(*pid))
        .collect()
}

/// `/proc/loadavg`, trimmed (empty when unreadable).
pub fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// A benchmark sandbox's teardown check: wait up to `grace` for the processes of the sandbox
/// ([`sandbox_processes`]) to exit, then SIGKILL those still running and describe them
/// (`pid cmdline`); empty when nothing was left.
pub fn reap_sandbox(home: &Path, root: &Path, grace: std::time::Duration) -> Vec<String> {
    let until = std::time::Instant::now() + grace;
    let mut left = sandbox_processes(home, root);
    while !left.is_empty() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(100));
        left = sandbox_processes(home, root);
    }
    left.iter()
        .map(|&pid| {
            let described = format!("{pid} {}", cmdline(pid));
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            described
        })
        .collect()
}

/// CPU time of all live threads of a process in nanoseconds (`/proc/PID/task/*/schedstat`),
/// 0 when it is gone: finer than clock ticks.
pub fn schedstat_ns(pid: u32) -> u64 {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// [`machine_with`] plus the rustc, `python` and git versions and the load average (at the
/// start), and `extra`.
pub fn machine_tools(python: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut tools = serde_json::json!({
        "rustc": crate::run::capture("rustc", &["--version"]).unwrap_or_default(),
        "python": crate::run::capture(python, &["--version"]).unwrap_or_default(),
        "git": crate::run::capture("git", &["--version"]).unwrap_or_default(),
        "loadavg_at_start": loadavg(),
    });
    if let (Some(t), serde_json::Value::Object(extra)) = (tools.as_object_mut(), extra) {
        t.extend(extra);
    }
    machine_with(tools)
}

/// The machine a benchmark ran on, for its JSON results: `nproc`, `cpu` (the model name),
/// `ram_gib` and `kernel`, with the bench's own fields of `extra` (an object) added.
pub fn machine_with(extra: serde_json::Value) -> serde_json::Value {
    let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0);
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    let mut m = serde_json::json!({
        "nproc": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cpu": cpu,
        "ram_gib": mem_kib as f64 / 1048576.0,
        "kernel": fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
    });
    if let (Some(m), serde_json::Value::Object(extra)) = (m.as_object_mut(), extra) {
        m.extend(extra);
    }
    m
}
