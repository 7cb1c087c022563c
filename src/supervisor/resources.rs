//! How this machine enforces `limits` and measures what services use, decided once per
//! daemon. On Linux: binky's cgroups (v2, else v1's memory and cpu hierarchies), else
//! `systemd-run --scope` for services with limits, else binky's own polling (below), said
//! with the reasons. On Windows: the Job object each service runs in, with its memory limit
//! and CPU rate ([`job_limits`]). Elsewhere (macOS, the BSDs): binky's own polling.
//!
//! # binky's polling ([`Mechanism::Polled`]), where nothing the system offers caps a service
//! - Memory: the daemon measures each service's resident memory (its process group's, every
//!   [`SAMPLE_EVERY`]) and stops a service found over its limit and restarts it under its
//!   restart policy, as PM2's `max_memory_restart` does; the process controller counts it
//!   as an out-of-memory kill. Between two samples a service may go over.
//! - CPU: a service whose limit is below the machine's cores starts at a lower priority
//!   ([`polled_nice`]: under one core, nice 19; else nice 15; never above the world's own
//!   niceness, the `nice` setting). That deprioritises; it does not cap: a niced service
//!   still takes any CPU nothing else wants.
//! - `setrlimit` is not used for either (see `binky_platform::limits`: RLIMIT_AS breaks
//!   JITs and databases, RLIMIT_RSS and RLIMIT_DATA are not enforced on macOS, RLIMIT_CPU
//!   kills after a total, not a rate).
//!
//! Three variables change what binky uses (for tests, and for machines that need it):
//! `BINKY_CGROUP_ROOT=DIR` counts only cgroup hierarchies mounted under `DIR` (Linux),
//! `BINKY_SYSTEMD_RUN=PATH` names the `systemd-run` program (Linux), and
//! `BINKY_LIMITS=polled` makes the daemon use binky's polling whatever the system offers (a
//! testing and diagnostic knob: it is how the polling is tested end to end on Linux; not
//! used on Windows, where each service's Job object holds its limits anyway).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use binky_controllers::limits::{cores, ResourceLimits};
use binky_controllers::process::Mechanism;
use binky_controllers::process::SAMPLE_EVERY;
use binky_controllers::supervisor::Usage;
use binky_platform::limits::cgroup::Mode;
use binky_platform::limits::Native;

use super::cgroup::{Cgroups, Tree};
use binky_platform::proc as procfs;

/// Only cgroup hierarchies mounted under this directory count.
pub const CGROUP_ROOT_VAR: &str = "BINKY_CGROUP_ROOT";
/// The `systemd-run` program.
pub const SYSTEMD_RUN_VAR: &str = "BINKY_SYSTEMD_RUN";
/// `polled`: binky's polling, whatever the system offers.
pub const LIMITS_VAR: &str = "BINKY_LIMITS";

/// How long `systemd-run` may take to say whether it works.
const SYSTEMD_PROBE: Duration = Duration::from_secs(10);

/// Why binky polls on a system without cgroups or Job objects (macOS, the BSDs).
const NO_MEANS: &str =
    "this system has neither cgroups (Linux) nor Job objects (Windows), which would cap them";

/// Why binky polls when `BINKY_LIMITS=polled` says so.
const FORCED: &str = "BINKY_LIMITS=polled";

/// What enforces limits here: the system's means, or binky's polling where
/// `BINKY_LIMITS=polled` asks for it (another value is not used, said in the daemon's log).
pub fn native() -> Native {
    let system = binky_platform::limits::native();
    let asked = std::env::var(LIMITS_VAR).ok();
    chosen(asked.as_deref(), system).unwrap_or_else(|why| {
        tracing::warn!("{why}");
        system
    })
}

/// The means `BINKY_LIMITS=asked` chooses on a system with `system`, or why it chooses
/// none (the system's are used then).
fn chosen(asked: Option<&str>, system: Native) -> Result<Native, String> {
    match asked.map(str::trim) {
        // Every service runs in a Job object, which holds its limits whatever binky polls.
        Some("polled") if system == Native::JobObjects => Err(format!(
            "{LIMITS_VAR}=polled is not used on Windows: each service's Job object holds its limits"
        )),
        Some("polled") => Ok(Native::Polled),
        None | Some("") => Ok(system),
        Some(other) => Err(format!(
            "{LIMITS_VAR}={other} is not used: it takes only `polled` (binky's polling) or nothing (the system's own means); using the system's"
        )),
    }
}

/// The niceness binky's polling starts a service with a CPU limit of `cpu_millis` at, on a
/// machine of `machine_cores`: under one core, 19 (the lowest priority); one core or more
/// but fewer than the machine has, 15; as many as the machine has or more, none (such a
/// limit never holds anything back).
pub fn polled_nice(cpu_millis: u32, machine_cores: u32) -> Option<i32> {
    if u64::from(cpu_millis) >= u64::from(machine_cores) * 1000 {
        None
    } else if cpu_millis < 1000 {
        Some(19)
    } else {
        Some(15)
    }
}

/// The niceness a service under binky's polling runs at: the world's (`world_nice`, the
/// `nice` setting), or its CPU limit's ([`polled_nice`]) when that is lower priority.
pub fn nice_under_polling(limits: ResourceLimits, world_nice: i32, machine_cores: u32) -> i32 {
    limits
        .cpu_millis
        .and_then(|c| polled_nice(c, machine_cores))
        .map_or(world_nice, |n| n.max(world_nice))
}

/// This machine's cores (as the scheduler gives them to the daemon), at least 1.
pub fn machine_cores() -> u32 {
    std::thread::available_parallelism()
        .ok()
        .and_then(|n| u32::try_from(n.get()).ok())
        .unwrap_or(1)
}

/// What binky's polling does with `limits`, in the words `binky check` and `binky status`
/// say: `memory: restarted over the limit (polled every 5 s), not capped; cpu: lower
/// priority (nice 19), not capped`.
pub fn polled_text(
    limits: ResourceLimits,
    world_nice: i32,
    machine_cores: u32,
    every: Duration,
) -> String {
    let mut parts = Vec::new();
    if limits.memory.is_some() {
        parts.push(format!(
            "memory: restarted over the limit (polled every {} s), not capped",
            every.as_secs().max(1)
        ));
    }
    if let Some(c) = limits.cpu_millis {
        let nice = nice_under_polling(limits, world_nice, machine_cores);
        parts.push(match polled_nice(c, machine_cores) {
            Some(_) => format!("cpu: lower priority (nice {nice}), not capped"),
            None => format!(
                "cpu: not lowered (a limit of {} is at least this machine's {machine_cores} cores), not capped",
                cores(c)
            ),
        });
    }
    parts.join("; ")
}

/// What binky's polling does, for any limits, and `why` nothing caps them: `binky up`'s
/// warning.
pub fn polled_summary(why: &str) -> String {
    format!(
        "{why}; binky restarts a service found over its memory limit (polled every {} s) and runs one with a CPU limit below the machine's cores at a lower priority",
        SAMPLE_EVERY.as_secs().max(1)
    )
}

/// [`polled_text`] for this machine, at the sampling cadence (`world_nice`: the `nice`
/// setting).
pub fn polled_here(limits: ResourceLimits, world_nice: i32) -> String {
    polled_text(limits, world_nice, machine_cores(), SAMPLE_EVERY)
}

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

/// What to do where binky's polling enforces limits (macOS, the BSDs, `BINKY_LIMITS=polled`).
const FIX_POLLED: &str = "nothing, if a restart over the memory limit and a lower priority are enough; for limits the system caps, run the project on Linux (cgroups) or Windows (Job objects)";

/// What to do where a service's Job object was not given its limits (Windows).
const FIX_JOB: &str = "remove `limits`, or report this: on Windows binky sets them on the Job object each service runs in";

/// How to get limits enforced (capped), on this system.
pub fn fix() -> &'static str {
    match native() {
        Native::Cgroups => FIX_LINUX,
        Native::JobObjects => FIX_JOB,
        Native::Polled => FIX_POLLED,
    }
}

/// Why nothing enforces limits.
fn nothing_enforces(no_cgroups: &str, systemd: &str) -> String {
    format!("no cgroup binky can use ({no_cgroups}), and {systemd}")
}

/// What enforces limits on this machine, as `binky check` and `binky up` see it (creating
/// nothing), and why nothing caps them when binky polls (the fix is [`fix`]).
pub fn look(tag: &str) -> (Mechanism, String) {
    match native() {
        Native::Cgroups => {}
        Native::JobObjects => return (Mechanism::JobObject, String::new()),
        Native::Polled => return (Mechanism::Polled, polled_because().to_owned()),
    }
    match find_tree(tag, Mode::Look) {
        Ok(Tree::V2 { .. }) => (Mechanism::CgroupV2, String::new()),
        Ok(Tree::V1 { .. }) => (Mechanism::CgroupV1, String::new()),
        Err(no_cgroups) => match probe_systemd_run(&systemd_run_program()) {
            Ok(()) => (Mechanism::SystemdRun, String::new()),
            Err(e) => (Mechanism::Polled, nothing_enforces(&no_cgroups, &e)),
        },
    }
}

/// Why binky polls where the system's means are not used at all.
fn polled_because() -> &'static str {
    if binky_platform::limits::native() == Native::Polled {
        NO_MEANS
    } else {
        FORCED
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
        let native = native();
        match native {
            Native::Cgroups => {}
            Native::JobObjects => {
                tracing::info!("limits: each service's Job object");
                return Resources::without_cgroups(native, "this system has Job objects");
            }
            Native::Polled => {
                let why = polled_because();
                tracing::info!(why, "limits: binky's polling");
                return Resources::without_cgroups(native, why);
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
        Resources::without_cgroups(native(), "this supervisor was started without them")
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

    /// Whether binky's polling is this daemon's means (nothing the system offers is used).
    pub fn polled(&self) -> bool {
        self.native == Native::Polled
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

    /// Why nothing the system offers caps the limits, and the fix (`cgroup_error`: why
    /// binky's own cgroup failed this time; `systemd`: why `systemd-run` is not used).
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
            Native::Polled => format!("{}; {FIX_POLLED}", self.no_cgroups),
        }
    }

    /// What binky's polling does with `limits` (`world_nice`: the `nice` setting), and why
    /// nothing the system offers caps them: a polled placement's note (its fix is
    /// [`fix`], which `binky check` and `binky up` say).
    pub fn polled_note(
        &self,
        limits: ResourceLimits,
        world_nice: i32,
        cgroup_error: Option<&str>,
        systemd: &str,
    ) -> String {
        let why = match self.native {
            Native::Polled => self.no_cgroups.clone(),
            _ => nothing_enforces(cgroup_error.unwrap_or(&self.no_cgroups), systemd),
        };
        format!("{} ({why})", polled_here(limits, world_nice))
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
        // Without cgroups or Job objects (macOS, the BSDs), binky polls: that is the reason
        // nothing caps the limits, and the fix says where the system would.
        let polled = Resources::without_cgroups(Native::Polled, NO_MEANS);
        assert!(polled.polled());
        let why = polled.nothing_enforces(None, "unused");
        assert_eq!(why, format!("{NO_MEANS}; {FIX_POLLED}"));
        assert!(!polled.job_objects());
        let note = polled.polled_note(
            ResourceLimits {
                memory: Some(512 << 20),
                cpu_millis: None,
            },
            10,
            None,
            "unused",
        );
        assert_eq!(
            note,
            format!("memory: restarted over the limit (polled every 5 s), not capped ({NO_MEANS})")
        );
        // Windows: each service's Job object enforces them.
        let jobs = Resources::without_cgroups(Native::JobObjects, "none here");
        assert!(jobs.job_objects());
        assert!(!jobs.polled());
        // Linux: the cgroups' and systemd-run's reasons, and how to get either.
        let linux = Resources::without_cgroups(Native::Cgroups, "cgroup v1: nope");
        let why = linux.nothing_enforces(None, "systemd-run failed");
        assert!(
            why.starts_with("no cgroup binky can use (cgroup v1: nope), and systemd-run failed"),
            "{why}"
        );
        assert!(why.ends_with(FIX_LINUX), "{why}");
        assert!(!linux.job_objects());
        assert!(!linux.polled());
        let (mechanism, _) = look("t");
        if cfg!(windows) {
            assert_eq!(mechanism, Mechanism::JobObject);
        } else if cfg!(target_os = "linux") {
            assert_ne!(mechanism, Mechanism::JobObject);
            assert_eq!(fix(), FIX_LINUX);
        } else {
            assert_eq!(mechanism, Mechanism::Polled);
            assert_eq!(fix(), FIX_POLLED);
        }
    }

    #[test]
    fn a_cpu_limit_under_the_machines_cores_lowers_the_priority_and_never_raises_it() {
        // Under one core: the lowest priority; one core or more: 15; the whole machine: none.
        assert_eq!(polled_nice(10, 8), Some(19));
        assert_eq!(polled_nice(999, 8), Some(19));
        assert_eq!(polled_nice(1000, 8), Some(15));
        assert_eq!(polled_nice(7999, 8), Some(15));
        assert_eq!(polled_nice(8000, 8), None);
        assert_eq!(polled_nice(500, 1), Some(19));
        assert_eq!(polled_nice(1000, 1), None);
        let cpu = |c| ResourceLimits {
            memory: None,
            cpu_millis: Some(c),
        };
        // The world's niceness (the `nice` setting) is the floor: a limit only lowers.
        assert_eq!(nice_under_polling(cpu(500), 10, 8), 19);
        assert_eq!(nice_under_polling(cpu(2000), 10, 8), 15);
        assert_eq!(nice_under_polling(cpu(2000), 18, 8), 18);
        assert_eq!(nice_under_polling(cpu(8000), 10, 8), 10);
        assert_eq!(nice_under_polling(cpu(500), 0, 8), 19);
        assert_eq!(nice_under_polling(ResourceLimits::default(), 10, 8), 10);
    }

    #[test]
    fn binky_limits_polled_chooses_the_polling_and_any_other_word_is_refused_by_name() {
        assert_eq!(chosen(Some("polled"), Native::Cgroups), Ok(Native::Polled));
        assert_eq!(chosen(Some(" polled "), Native::Polled), Ok(Native::Polled));
        let windows = chosen(Some("polled"), Native::JobObjects).unwrap_err();
        assert!(windows.contains("not used on Windows"), "{windows}");
        assert_eq!(chosen(None, Native::Cgroups), Ok(Native::Cgroups));
        assert_eq!(chosen(Some(""), Native::Polled), Ok(Native::Polled));
        let e = chosen(Some("cgroups"), Native::Cgroups).unwrap_err();
        assert!(e.starts_with("BINKY_LIMITS=cgroups is not used"), "{e}");
        assert!(e.contains("only `polled`"), "{e}");
    }

    #[test]
    fn binkys_polling_says_what_it_does_and_that_it_does_not_cap() {
        let every = Duration::from_secs(5);
        let both = ResourceLimits {
            memory: Some(512 << 20),
            cpu_millis: Some(500),
        };
        assert_eq!(
            polled_text(both, 10, 8, every),
            "memory: restarted over the limit (polled every 5 s), not capped; cpu: lower priority (nice 19), not capped"
        );
        let two_cores = ResourceLimits {
            memory: None,
            cpu_millis: Some(2000),
        };
        assert_eq!(
            polled_text(two_cores, 10, 8, every),
            "cpu: lower priority (nice 15), not capped"
        );
        assert_eq!(
            polled_text(two_cores, 10, 2, every),
            "cpu: not lowered (a limit of 2 is at least this machine's 2 cores), not capped"
        );
        let memory = ResourceLimits {
            memory: Some(1 << 30),
            cpu_millis: None,
        };
        assert_eq!(
            polled_text(memory, 10, 8, Duration::from_millis(500)),
            "memory: restarted over the limit (polled every 1 s), not capped"
        );
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
