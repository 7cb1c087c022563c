//! `limits` enforced: every service runs in a cgroup of binky's (per world, per service)
//! with its limits written; a memory hog is killed as out of memory and says so while its
//! neighbours run; a world's CPU and memory show in status and metrics; the cgroups go with
//! `binky down` and `binky remove`; where nothing caps them (no cgroups, no systemd-run; and
//! on macOS and the BSDs, which `BINKY_LIMITS=polled` stands in for here), binky restarts a
//! service over its memory limit and lowers the priority of one with a CPU limit, and says
//! that neither caps.
//!
//! These run where binky can make cgroups (as root: this CI's cgroup v1 memory and cpu
//! hierarchies); elsewhere the tests that need them say they are skipped, except under
//! `CI=true`, where they fail.

use std::path::{Path, PathBuf};
use std::time::Duration;

use binky_controllers::process::Mechanism;
use binky_platform::limits::cgroup::detect::{own_dir, parse_memberships, parse_mounts};

use crate::harness::*;

/// A python that grows by 8 MiB every 20 ms up to 400 MiB, then sleeps.
/// (`\\n`: the TOML string it goes into holds `\n`.)
const HOG: &str = "exec python3 -c 'import time\\nb = []\\nfor _ in range(50):\\n    b.append(bytearray(8 << 20))\\n    time.sleep(0.02)\\ntime.sleep(600)'";

/// A busy loop.
const SPIN: &str = "exec python3 -c 'while True: pass'";

/// Whether this machine gives binky cgroups; the reason when it does not.
fn cgroups_here() -> Result<(), String> {
    match binky::supervisor::resources::look("test").0 {
        Mechanism::CgroupV1 | Mechanism::CgroupV2 => Ok(()),
        other => Err(format!("no cgroups for binky here ({})", other.as_str())),
    }
}

macro_rules! needs_cgroups {
    () => {
        if let Err(why) = cgroups_here() {
            // CI runs as root on machines with cgroup v1's memory and cpu hierarchies: these
            // tests must run there, never pass by skipping.
            assert!(
                std::env::var_os("CI").is_none(),
                "CI=true and {why}: the limits tests must run here"
            );
            eprintln!("skipped: {why}");
            return;
        }
    };
}

/// The directories of the cgroup of `pid`, by controller (`memory`, `cpu`, `cpuacct`, or
/// `` for v2).
fn cgroup_of(pid: u32) -> Vec<(String, PathBuf)> {
    let mounts = parse_mounts(&std::fs::read_to_string("/proc/self/mountinfo").unwrap());
    let of = parse_memberships(&std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap());
    let mut out = Vec::new();
    for c in &of {
        for m in &mounts {
            let same = if m.v2 {
                c.controllers.is_empty()
            } else {
                c.controllers.iter().any(|x| m.controllers.contains(x))
            };
            if let Some(d) = own_dir(m, &c.path).filter(|_| same) {
                let key = c.controllers.first().cloned().unwrap_or_default();
                out.push((key, d));
            }
        }
    }
    out
}

/// `pid`'s directory in the hierarchy holding `file` (`cpu.cfs_quota_us`, `memory.max`…).
fn dir_with(pid: u32, file: &str) -> PathBuf {
    cgroup_of(pid)
        .into_iter()
        .map(|(_, d)| d)
        .find(|d| d.join(file).exists())
        .unwrap_or_else(|| panic!("no cgroup of {pid} has {file}: {:?}", cgroup_of(pid)))
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .trim()
        .to_owned()
}

fn service(env: &Env, world: &str, name: &str) -> serde_json::Value {
    env.services(world)
        .into_iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("{name} in status"))
}

fn events(env: &Env, world: &str) -> Vec<(String, String)> {
    let evs: Vec<serde_json::Value> =
        serde_json::from_str(&env.ok(&["events", world, "--json", "-n", "500"])).unwrap();
    evs.iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap_or_default().to_owned(),
                e["message"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_memory_hog_is_killed_as_out_of_memory_and_restarted_while_its_neighbour_runs() {
    needs_cgroups!();
    let env = Env::new(&format!(
        r#"
[project]
name = "acme"
{{range}}

[services.hog]
cmd = "{HOG}"
limits = {{ memory = "64M" }}

[services.calm]
cmd = "sleep 600"
"#
    ));
    env.ok(&["up", "w", "--no-wait"]);
    wait_until("calm runs", Duration::from_secs(20), || {
        env.pid_of("w", "calm").is_some()
    });
    let calm = env.pid_of("w", "calm").unwrap();
    wait_until("hog killed for memory", Duration::from_secs(30), || {
        service(&env, "w", "hog")["last_exit"] == "killed: out of memory (limit 64 MiB)"
    });
    let hog = service(&env, "w", "hog");
    assert!(hog["oom_kills"].as_u64().unwrap() >= 1, "{hog}");
    assert_eq!(hog["limits"]["memory_bytes"], 64u64 << 20, "{hog}");
    assert_eq!(hog["limits"]["enforced"], true, "{hog}");
    let evs = events(&env, "w");
    assert!(
        evs.iter().any(|(k, m)| k == "oom"
            && m.starts_with("hog ran out of memory (limit 64 MiB): the kernel killed")),
        "{evs:?}"
    );
    // The restart policy (on-failure) applies as to any crash.
    wait_until("hog restarted", Duration::from_secs(30), || {
        service(&env, "w", "hog")["restarts"].as_u64().unwrap_or(0) >= 1
    });
    // The neighbour never noticed.
    assert!(alive(calm));
    assert_eq!(env.pid_of("w", "calm"), Some(calm));
    let out = stdout(&env.binky(&["status", "w"]));
    assert!(
        out.contains("last killed: out of memory (limit 64 MiB)"),
        "{out}"
    );
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
    assert_eq!(env.home_cgroups(), Vec::<PathBuf>::new());
}

#[test]
fn a_cpu_limit_is_written_and_throttles_and_a_worlds_use_shows_in_status_and_metrics() {
    needs_cgroups!();
    let env = Env::new(&format!(
        r#"
[project]
name = "acme"
{{range}}

[services.spin]
cmd = "{SPIN}"
limits = {{ cpu = "0.2" }}

[services.web]
cmd = "{SERVE}"
url = "web"
"#
    ));
    env.ok(&["up", "w"]);
    let spin = env.pid_of("w", "spin").unwrap();
    let web = env.pid_of("w", "web").unwrap();
    // Each service in a cgroup of its own, in its world's, in this home's.
    let tag = home_tag(&env.home);
    for pid in [spin, web] {
        for (_, dir) in cgroup_of(pid) {
            let s = dir.display().to_string();
            if s.contains("binky-") {
                assert!(s.contains(&format!("binky-{tag}/w")), "{s}");
            }
        }
    }
    let cpu = dir_with(spin, "cpu.cfs_quota_us");
    assert!(cpu.ends_with("svc-spin"), "{}", cpu.display());
    let quota: u64 = read(&cpu.join("cpu.cfs_quota_us")).parse().unwrap();
    let period: u64 = read(&cpu.join("cpu.cfs_period_us")).parse().unwrap();
    assert_eq!(
        quota * 10,
        period * 2,
        "quota {quota} per {period}: 0.2 of a core"
    );
    wait_until(
        "the busy loop is throttled",
        Duration::from_secs(10),
        || {
            read(&cpu.join("cpu.stat"))
                .lines()
                .find_map(|l| l.strip_prefix("nr_throttled "))
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n > 0)
        },
    );
    // A service without limits is in its own cgroup too, unlimited.
    let web_cpu = dir_with(web, "cpu.cfs_quota_us");
    assert!(web_cpu.ends_with("svc-web"), "{}", web_cpu.display());
    assert_eq!(read(&web_cpu.join("cpu.cfs_quota_us")), "-1");
    // The daemon samples every few seconds: CPU over an interval needs two samples.
    wait_until("the world's use in status", Duration::from_secs(30), || {
        let v: serde_json::Value =
            serde_json::from_str(&env.ok(&["status", "w", "--json"])).unwrap();
        v["usage"]["memory_bytes"].as_u64().unwrap_or(0) > 0
            && v["usage"]["cpu_percent"].as_f64().unwrap_or(0.0) > 0.0
    });
    let s = service(&env, "w", "spin");
    assert!(s["usage"]["cpu_percent"].as_f64().unwrap() > 0.0, "{s}");
    assert!(s["usage"]["memory_bytes"].as_u64().unwrap() > 0, "{s}");
    assert_eq!(s["limits"]["cpu"], 0.2, "{s}");
    let all = env.status();
    let w = &all["worlds"][0];
    assert!(w["usage"]["memory_bytes"].as_u64().unwrap() > 0, "{w}");
    let m: serde_json::Value = serde_json::from_str(&env.ok(&["metrics"])).unwrap();
    let worlds = m["usage"]["worlds"].as_array().unwrap();
    assert_eq!(worlds.len(), 1, "{m}");
    assert_eq!(worlds[0]["world"], "w");
    assert!(worlds[0]["memory_bytes"].as_u64().unwrap() > 0, "{m}");
    assert!(m["usage"]["memory_bytes"].as_u64().unwrap() > 0, "{m}");
    let text = stdout(&env.binky(&["status"]));
    assert!(text.contains("cpu ") && text.contains("mem "), "{text}");
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn cgroups_go_with_down_and_remove_and_a_restarted_daemon_keeps_measuring_them() {
    needs_cgroups!();
    let env = Env::new(
        r#"
[project]
name = "acme"
{range}

[services.job]
cmd = "sleep 600"
limits = { memory = "128M", cpu = "0.5" }

[services.sidecar]
cmd = "sleep 600"
setup = "true"
"#,
    );
    env.ok(&["up", "w"]);
    let job = env.pid_of("w", "job").unwrap();
    let leaves: Vec<PathBuf> = cgroup_of(job)
        .into_iter()
        .map(|(_, d)| d)
        .filter(|d| d.display().to_string().contains("binky-"))
        .collect();
    assert!(!leaves.is_empty(), "{:?}", cgroup_of(job));
    let mem = dir_with(job, "memory.limit_in_bytes");
    assert_eq!(
        read(&mem.join("memory.limit_in_bytes")),
        (128u64 << 20).to_string()
    );
    // The setup ran in its world's task cgroup, removed once it was done.
    let world_dir = mem.parent().unwrap();
    let names: Vec<String> = std::fs::read_dir(world_dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.contains(&"svc-sidecar".to_owned()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("task-")), "{names:?}");
    // A new daemon adopts the services and goes on measuring their cgroups.
    env.ok(&["daemon", "stop"]);
    env.ok(&["daemon", "start"]);
    let restarted = binky_controllers::store::now_ms();
    wait_until("sampled by the new daemon", Duration::from_secs(30), || {
        let u = &service(&env, "w", "job")["usage"];
        u["sampled_at"].as_i64().is_some_and(|t| t > restarted)
            && u["memory_bytes"].as_u64().is_some()
    });
    assert_eq!(env.pid_of("w", "job"), Some(job), "adopted, not restarted");
    env.ok(&["down", "w"]);
    for leaf in &leaves {
        assert!(!leaf.exists(), "{} left after down", leaf.display());
    }
    assert_eq!(env.home_cgroups(), Vec::<PathBuf>::new(), "after down");
    env.ok(&["up", "w"]);
    assert!(!env.home_cgroups().is_empty());
    env.ok(&["remove", "w", "--force"]);
    assert_eq!(env.home_cgroups(), Vec::<PathBuf>::new(), "after remove");
    env.assert_nothing_left(&["w"]);
}

#[test]
fn without_cgroups_or_systemd_run_limits_are_polled_and_check_up_status_and_events_say_not_capped()
{
    let env = Env::new(
        r#"
[project]
name = "acme"
{range}

[services.api]
cmd = "sleep 600"
limits = { memory = "256M" }
"#,
    );
    // No cgroup hierarchy where binky looks, no systemd-run.
    let nowhere = env.dir.path().join("no-cgroups");
    std::fs::create_dir_all(&nowhere).unwrap();
    let nowhere = nowhere.display().to_string();
    let vars = [
        ("BINKY_CGROUP_ROOT", nowhere.as_str()),
        ("BINKY_SYSTEMD_RUN", "/nonexistent/systemd-run"),
    ];
    let check = env.binky_env(&["check"], &vars);
    assert!(check.status.success(), "warnings only: {}", stdout(&check));
    let text = stdout(&check);
    assert!(
        text.contains(
            "warning: services.api.limits: not capped on this machine: memory: restarted over the limit (polled every 5 s), not capped (no cgroup binky can use"
        ),
        "{text}"
    );
    assert!(text.contains("/nonexistent/systemd-run"), "{text}");
    assert!(text.contains("fix: run binky's daemon as root"), "{text}");
    env.binky_env(&["daemon", "stop"], &vars);
    let up = env.binky_env(&["up", "w"], &vars);
    assert!(up.status.success(), "it runs anyway: {}", stderr(&up));
    let err = stderr(&up);
    assert!(
        err.contains(
            "warning: the limits of api are not capped on this machine: no cgroup binky can use"
        ),
        "{err}"
    );
    assert!(
        err.contains("binky restarts a service found over its memory limit"),
        "{err}"
    );
    let api = service(&env, "w", "api");
    assert_eq!(api["state"], "running");
    assert_eq!(api["limits"]["enforced"], true, "{api}");
    assert_eq!(api["limits"]["mechanism"], "polled", "{api}");
    let note = api["limits"]["note"].as_str().unwrap();
    assert!(
        note.starts_with("memory: restarted over the limit (polled every 5 s), not capped (no cgroup binky can use"),
        "{api}"
    );
    assert!(note.contains("BINKY_CGROUP_ROOT"), "{api}");
    let evs = events(&env, "w");
    assert!(
        evs.iter().any(|(k, m)| k == "limits"
            && m.starts_with(
                "api: limits (memory 256 MiB) are not capped on this machine: memory: restarted over the limit"
            )),
        "{evs:?}"
    );
    let out = stdout(&env.binky(&["status"]));
    assert!(
        out.contains("limits memory 256 MiB (binky's polling, not capped)"),
        "{out}"
    );
    let detail = stdout(&env.binky(&["status", "w"]));
    assert!(
        detail.contains(
            "      limits: memory: restarted over the limit (polled every 5 s), not capped"
        ),
        "{detail}"
    );
    // Measured, from the process table.
    wait_until(
        "api measured without a cgroup",
        Duration::from_secs(30),
        || {
            service(&env, "w", "api")["usage"]["memory_bytes"]
                .as_u64()
                .is_some_and(|m| m > 0)
        },
    );
    assert_eq!(env.home_cgroups(), Vec::<PathBuf>::new(), "no cgroup made");
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

/// The niceness of `pid`, as `ps` shows it.
fn niceness(pid: u32) -> i32 {
    let out = std::process::Command::new("ps")
        .args(["-o", "ni=", "-p", &pid.to_string()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("ps -o ni= -p {pid}: {e}: {out:?}"))
}

#[test]
fn where_binky_polls_a_service_over_its_memory_limit_is_restarted_and_says_why_and_one_within_is_left_alone(
) {
    let env = Env::new(&format!(
        r#"
[project]
name = "acme"
{{range}}

[services.hog]
cmd = "{HOG}"
limits = {{ memory = "64M" }}

[services.calm]
cmd = "sleep 600"
limits = {{ memory = "64M", cpu = "0.5" }}

[services.free]
cmd = "sleep 600"
"#
    ));
    // binky's polling, as on macOS, whatever this machine offers.
    let vars = [("BINKY_LIMITS", "polled")];
    env.binky_env(&["daemon", "stop"], &vars);
    let up = env.binky_env(&["up", "w", "--no-wait"], &vars);
    assert!(up.status.success(), "{}", stderr(&up));
    wait_until("calm runs", Duration::from_secs(20), || {
        env.pid_of("w", "calm").is_some()
    });
    let calm = env.pid_of("w", "calm").unwrap();
    // The watcher measures the service within its limit before the hog is stopped.
    wait_until("calm measured", Duration::from_secs(30), || {
        service(&env, "w", "calm")["usage"]["memory_bytes"]
            .as_u64()
            .is_some_and(|m| m > 0)
    });
    let stopped = "stopped over its memory limit of 64 MiB (it had ";
    wait_until(
        "hog stopped over its limit",
        Duration::from_secs(30),
        || {
            service(&env, "w", "hog")["last_exit"]
                .as_str()
                .is_some_and(|e| e.starts_with(stopped))
        },
    );
    let hog = service(&env, "w", "hog");
    assert!(
        hog["last_exit"]
            .as_str()
            .unwrap()
            .ends_with("resident), as binky does where the system cannot cap memory"),
        "{hog}"
    );
    assert!(hog["oom_kills"].as_u64().unwrap() >= 1, "{hog}");
    assert_eq!(hog["limits"]["mechanism"], "polled", "{hog}");
    let evs = events(&env, "w");
    assert!(
        evs.iter().any(|(k, m)| k == "oom"
            && m.starts_with("hog went over its memory limit of 64 MiB (")
            && m.ends_with("stopped and restarted (restart = on-failure), as binky does where the system cannot cap memory")),
        "{evs:?}"
    );
    // Restarted under its policy (on-failure), though it took its SIGTERM.
    wait_until("hog restarted", Duration::from_secs(30), || {
        service(&env, "w", "hog")["restarts"].as_u64().unwrap_or(0) >= 1
    });
    // The service within its limit is measured on and left alone.
    let after = binky_controllers::store::now_ms();
    wait_until("calm measured again", Duration::from_secs(30), || {
        service(&env, "w", "calm")["usage"]["sampled_at"]
            .as_i64()
            .is_some_and(|t| t > after)
    });
    let c = service(&env, "w", "calm");
    assert_eq!(c["oom_kills"], 0, "{c}");
    assert_eq!(c["restarts"], 0, "{c}");
    assert_eq!(env.pid_of("w", "calm"), Some(calm));
    assert!(alive(calm));
    // Its CPU limit under one core: the lowest priority; a service without one keeps the
    // world's (the `nice` setting's default, 10).
    assert_eq!(niceness(calm), 19);
    assert_eq!(niceness(env.pid_of("w", "free").unwrap()), 10);
    let detail = stdout(&env.binky(&["status", "w"]));
    assert!(
        detail.contains("memory: restarted over the limit (polled every 5 s), not capped; cpu: lower priority (nice 19), not capped (BINKY_LIMITS=polled)"),
        "{detail}"
    );
    assert!(
        detail.contains("last stopped over its memory limit of 64 MiB"),
        "{detail}"
    );
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}
