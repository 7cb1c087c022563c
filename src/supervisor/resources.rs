//! How this machine enforces `limits` and measures what services use, decided once per
//! daemon. On Linux: binky's cgroups (v2, else v1's memory and cpu hierarchies), else
//! `systemd-run --scope` for services with limits, else nothing, said with the reasons. On
//! Windows: the Job object each service runs in, with its memory limit and CPU rate
//! ([`job_limits`]). Elsewhere (macOS, the BSDs): nothing, said plainly.
//!
//! Two variables change where binky looks on Linux (for tests, and for machines that need
//! it): `BINKY_CGROUP_ROOT=DIR` counts only cgroup hierarchies mounted under `DIR`, and
//! `BINKY_SYSTEMD_RUN=PATH` names the `systemd-run` program.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use binky_controllers::limits::ResourceLimits;
use binky_controllers::process::Mechanism;
use binky_controllers::supervisor::Usage;
use binky_platform::limits::cgroup::Mode;
use binky_platform::limits::Native;

use super::cgroup::{Cgroups, Tree};
use binky_platform::proc as procfs;

/// Only cgroup hierarchies mounted under this directory count.
pub const CGROUP_ROOT_VAR: &str = "BINKY_CGROUP_ROOT";
/// The `systemd-run` program.
pub const SYSTEMD_RUN_VAR: &str = "BINKY_SYSTEMD_RUN";

/// How long `systemd-run` may take to say whether it works.
const SYSTEMD_PROBE: Duration = Duration::from_secs(10);

/// Why nothing enforces limits on a system without cgroups or Job objects (macOS, the BSDs).
const NO_MEANS: &str = "this system has neither cgroups (Linux) nor Job objects (Windows), which binky enforces limits with";

/// Where binky's cgroups go on this machine, or why there are none.
pub fn find_tree(tag: &str, mode: Mode) -> Result<Tree, String> {
    let only = std::env::var_os(CGROUP_ROOT_VAR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    binky_platform::limits::cgroup::find(tag, only.as_deref(), mode).map_err(|why| match &only {
        Some(dir) => format!("{why} ({CGROUP_ROOT_VAR}={})", dir.display()),
        None => why,
    })
}

/// The limits of a service's Job object (Windows): memory in bytes, CPU in percent of one core
/// (as systemd's `CPUQuota=`: `50.0` is half a core, `200.0` two).
pub use binky_platform::job::Limits as JobLimits;

/// `limits` as a service's Job object takes them.
pub fn job_limits(limits: ResourceLimits) -> JobLimits {
    JobLimits {
        memory_max_bytes: limits.memory,
        cpu_max_percent: limits.cpu_millis.map(|m| f64::from(m) / 10.0),
    }
}

fn systemd_run_program() -> PathBuf {
    std::env::var_os(SYSTEMD_RUN_VAR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("systemd-run"))
}

/// `--user` for a user's daemon; root's scopes are the system manager's.
fn user_flag() -> Option<&'static str> {
    (!binky_platform::user::is_root()).then_some("--user")
}

/// `systemd-run [--user] --scope` with the properties for `limits`.
fn systemd_args(program: &std::path::Path, limits: ResourceLimits) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec![program.into()];
    a.extend(user_flag().map(OsString::from));
    for s in ["--scope", "--quiet", "--collect"] {
        a.push(s.into());
    }
    if let Some(m) = limits.memory {
        a.push("-p".into());
        a.push(format!("MemoryMax={m}").into());
    }
    if let Some(c) = limits.cpu_millis {
        a.push("-p".into());
        a.push(format!("CPUQuota={}%", (f64::from(c) / 10.0)).into());
    }
    a.push("--".into());
    a
}

/// Whether `systemd-run --scope` with limits works here: it runs `true` in a scope once.
fn probe_systemd_run(program: &std::path::Path) -> Result<(), String> {
    let what = format!(
        "`{} {}--scope`",
        program.display(),
        user_flag().map(|f| format!("{f} ")).unwrap_or_default()
    );
    let probe = ResourceLimits {
        memory: Some(1 << 30),
        cpu_millis: Some(1000),
    };
    let args = systemd_args(program, probe);
    let child = std::process::Command::new(&args[0])
        .args(&args[1..])
        .arg("true")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return Err(format!("{what} cannot run: {e}")),
    };
    let until = Instant::now() + SYSTEMD_PROBE;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut err);
                }
                let first = err.lines().next().unwrap_or("").trim().to_owned();
                return Err(format!(
                    "{what} failed ({status}{})",
                    if first.is_empty() {
                        String::new()
                    } else {
                        format!(": {first}")
                    }
                ));
            }
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{what} did not finish within {} s",
                    SYSTEMD_PROBE.as_secs()
                ));
            }
            Err(e) => return Err(format!("{what}: {e}")),
        }
    }
}

/// How to get limits enforced on Linux.
const FIX_LINUX: &str = "run binky's daemon as root, or where cgroups are delegated to it or `systemd-run --user --scope` works (a systemd user session), or remove `limits`";

/// How to get limits enforced on a system binky enforces none on.
const FIX_ELSEWHERE: &str =
    "remove `limits`, or run the project on Linux or Windows, where binky enforces them";

/// What to do where a service's Job object was not given its limits (Windows).
const FIX_JOB: &str = "remove `limits`, or report this: on Windows binky sets them on the Job object each service runs in";

/// How to get limits enforced, on this system.
pub fn fix() -> &'static str {
    match binky_platform::limits::native() {
        Native::Cgroups => FIX_LINUX,
        Native::JobObjects => FIX_JOB,
        Native::None => FIX_ELSEWHERE,
    }
}

/// Why nothing enforces limits.
fn nothing_enforces(no_cgroups: &str, systemd: &str) -> String {
    format!("no cgroup binky can use ({no_cgroups}), and {systemd}")
}

/// What enforces limits on this machine, as `binky check` and `binky up` see it (creating
/// nothing), and why nothing does when nothing does (the fix is [`fix`]).
pub fn look(tag: &str) -> (Mechanism, String) {
    match binky_platform::limits::native() {
        Native::Cgroups => {}
        Native::JobObjects => return (Mechanism::JobObject, String::new()),
        Native::None => return (Mechanism::None, NO_MEANS.to_owned()),
    }
    match find_tree(tag, Mode::Look) {
        Ok(Tree::V2 { .. }) => (Mechanism::CgroupV2, String::new()),
        Ok(Tree::V1 { .. }) => (Mechanism::CgroupV1, String::new()),
        Err(no_cgroups) => match probe_systemd_run(&systemd_run_program()) {
            Ok(()) => (Mechanism::SystemdRun, String::new()),
            Err(e) => (Mechanism::None, nothing_enforces(&no_cgroups, &e)),
        },
    }
}

/// The daemon's means of limiting and measuring.
pub struct Resources {
    /// What the system offers.
    native: Native,
    cgroups: Option<Cgroups>,
    /// Why there are no cgroups of binky's, when there are none.
    no_cgroups: String,
    systemd_run: PathBuf,
    systemd: tokio::sync::OnceCell<Result<(), String>>,
    /// What each process group uses, from one walk of `/proc` (kept for a second, so one
    /// sampling pass over many services walks it once).
    groups: Mutex<Option<(Instant, GroupUse)>>,
}

/// CPU ticks and resident pages by process group.
type GroupUse = HashMap<u32, (u64, u64)>;

impl Resources {
    /// Find this machine's means for the home tagged `tag` (creating `binky-<tag>`).
    pub fn detect(tag: &str) -> Resources {
        let native = binky_platform::limits::native();
        match native {
            Native::Cgroups => {}
            Native::JobObjects => {
                tracing::info!("limits: each service's Job object");
                return Resources::without_cgroups(native, "this system has Job objects");
            }
            Native::None => {
                tracing::info!(why = NO_MEANS, "limits: none");
                return Resources::without_cgroups(native, NO_MEANS);
            }
        }
        let (cgroups, no_cgroups) = match find_tree(tag, Mode::Create) {
            // Made to prove it can be; made again by the first spawn.
            Ok(tree) => {
                let c = Cgroups::new(tree);
                c.tidy();
                (Some(c), String::new())
            }
            Err(why) => (None, why),
        };
        match &cgroups {
            Some(c) => tracing::info!(
                mechanism = c.mechanism().as_str(),
                "limits: binky's cgroups"
            ),
            None => tracing::info!(why = %no_cgroups, "limits: no cgroups of binky's"),
        }
        Resources {
            native,
            cgroups,
            no_cgroups,
            systemd_run: systemd_run_program(),
            systemd: tokio::sync::OnceCell::new(),
            groups: Mutex::new(None),
        }
    }

    /// No means at all (a supervisor that was not given any).
    pub fn off() -> Resources {
        Resources::without_cgroups(
            binky_platform::limits::native(),
            "this supervisor was started without them",
        )
    }

    /// No cgroups and no `systemd-run`, on a system with `native` (`why`: why no cgroups).
    fn without_cgroups(native: Native, why: &str) -> Resources {
        Resources {
            native,
            cgroups: None,
            no_cgroups: why.to_owned(),
            systemd_run: PathBuf::from("/nonexistent/systemd-run"),
            systemd: tokio::sync::OnceCell::new_with(Some(Err(
                "systemd-run is not used by this supervisor".to_owned(),
            ))),
            groups: Mutex::new(None),
        }
    }

    /// Whether each service's limits are enforced by the Job object it runs in (Windows):
    /// the supervisor sets [`job_limits`] on it, and places the service so.
    pub fn job_objects(&self) -> bool {
        self.native == Native::JobObjects
    }

    /// binky's cgroups, when it has any.
    pub fn cgroups(&self) -> Option<&Cgroups> {
        self.cgroups.as_ref()
    }

    /// Whether `systemd-run --scope` works (asked once, off the async workers).
    pub async fn systemd(&self) -> Result<(), String> {
        self.systemd
            .get_or_init(|| async {
                let program = self.systemd_run.clone();
                let r = tokio::task::spawn_blocking(move || probe_systemd_run(&program))
                    .await
                    .unwrap_or_else(|e| Err(e.to_string()));
                match &r {
                    Ok(()) => tracing::info!("limits: systemd-run --scope"),
                    Err(e) => tracing::info!(why = %e, "limits: systemd-run does not work"),
                }
                r
            })
            .await
            .clone()
    }

    /// The command prefix that runs a process in a scope with `limits`.
    pub fn systemd_prefix(&self, limits: ResourceLimits) -> Vec<OsString> {
        systemd_args(&self.systemd_run, limits)
    }

    /// Why nothing enforces limits, and the fix (`cgroup_error`: why binky's own cgroup
    /// failed this time).
    pub fn nothing_enforces(&self, cgroup_error: Option<&str>, systemd: &str) -> String {
        match self.native {
            Native::Cgroups => format!(
                "{}; {FIX_LINUX}",
                nothing_enforces(cgroup_error.unwrap_or(&self.no_cgroups), systemd)
            ),
            Native::JobObjects => format!(
                "its Job object was not given them ({}); {FIX_JOB}",
                cgroup_error.unwrap_or(systemd)
            ),
            // The system has no means at all: that alone is the reason.
            Native::None => format!(
                "limits are not enforced on this system: {}; {FIX_ELSEWHERE}",
                self.no_cgroups
            ),
        }
    }

    /// What the process group `pgid` uses, from `/proc` (without a cgroup to read).
    pub fn group_usage(&self, pgid: u32) -> Option<Usage> {
        let mut cache = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = cache
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < Duration::from_secs(1));
        if !fresh {
            let mut by_group = GroupUse::new();
            for u in procfs::all_use() {
                let e = by_group.entry(u.pgrp).or_default();
                e.0 += u.ticks;
                e.1 += u.rss_pages;
            }
            *cache = Some((Instant::now(), by_group));
        }
        let (ticks, pages) = *cache.as_ref()?.1.get(&pgid)?;
        Some(binky_platform::limits::group_usage(ticks, pages))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systemd_run_gets_memory_in_bytes_and_cpu_in_percent() {
        let args = systemd_args(
            std::path::Path::new("systemd-run"),
            ResourceLimits {
                memory: Some(512 << 20),
                cpu_millis: Some(500),
            },
        );
        let text: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let joined = text.join(" ");
        assert!(joined.contains("--scope --quiet --collect"), "{joined}");
        assert!(joined.contains("-p MemoryMax=536870912"), "{joined}");
        assert!(joined.contains("-p CPUQuota=50%"), "{joined}");
        assert_eq!(text.last().map(String::as_str), Some("--"));
    }

    #[cfg(unix)]
    #[test]
    fn a_systemd_run_that_is_not_there_is_named_in_the_reason() {
        let e = probe_systemd_run(std::path::Path::new("/nonexistent/systemd-run")).unwrap_err();
        assert!(e.contains("/nonexistent/systemd-run"), "{e}");
        assert!(e.contains("cannot run"), "{e}");
        let failing = probe_systemd_run(std::path::Path::new("false")).unwrap_err();
        assert!(failing.contains("failed"), "{failing}");
        let why = nothing_enforces("cgroup v1: nope", &e);
        assert!(
            why.starts_with("no cgroup binky can use (cgroup v1: nope)"),
            "{why}"
        );
        assert!(
            why.ends_with("cannot run: No such file or directory (os error 2)"),
            "{why}"
        );
    }

    #[test]
    fn a_services_limits_become_its_job_objects_memory_and_cpu_rate() {
        let job = job_limits(ResourceLimits {
            memory: Some(256 << 20),
            cpu_millis: Some(1500),
        });
        assert_eq!(
            job,
            JobLimits {
                memory_max_bytes: Some(268_435_456),
                cpu_max_percent: Some(150.0),
            }
        );
        assert_eq!(job_limits(ResourceLimits::default()), JobLimits::default());
        assert_eq!(
            job_limits(ResourceLimits {
                memory: None,
                cpu_millis: Some(10),
            })
            .cpu_max_percent,
            Some(1.0)
        );
    }

    #[test]
    fn each_system_is_told_its_own_reason_and_fix() {
        // Without cgroups or Job objects (macOS, the BSDs), that alone is said.
        let none = Resources::without_cgroups(Native::None, NO_MEANS);
        let why = none.nothing_enforces(None, "unused");
        assert!(
            why.starts_with("limits are not enforced on this system"),
            "{why}"
        );
        assert!(why.contains(NO_MEANS), "{why}");
        assert!(why.ends_with(FIX_ELSEWHERE), "{why}");
        assert!(!none.job_objects());
        // Windows: each service's Job object enforces them.
        let jobs = Resources::without_cgroups(Native::JobObjects, "none here");
        assert!(jobs.job_objects());
        // Linux: the cgroups' and systemd-run's reasons, and how to get either.
        let linux = Resources::without_cgroups(Native::Cgroups, "cgroup v1: nope");
        let why = linux.nothing_enforces(None, "systemd-run failed");
        assert!(
            why.starts_with("no cgroup binky can use (cgroup v1: nope), and systemd-run failed"),
            "{why}"
        );
        assert!(why.ends_with(FIX_LINUX), "{why}");
        assert!(!linux.job_objects());
        let (mechanism, _) = look("t");
        if cfg!(windows) {
            assert_eq!(mechanism, Mechanism::JobObject);
        } else if cfg!(target_os = "linux") {
            assert_ne!(mechanism, Mechanism::JobObject);
            assert_eq!(fix(), FIX_LINUX);
        } else {
            assert_eq!(mechanism, Mechanism::None);
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_group_uses_memory_and_cpu() {
        let r = Resources::off();
        let me = procfs::stat(std::process::id()).unwrap().pgrp;
        let u = r.group_usage(me).unwrap();
        assert!(u.memory_bytes > 0, "{u:?}");
    }
}
