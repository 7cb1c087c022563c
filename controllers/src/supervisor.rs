//! What the controllers ask of the machine to run commands: start, watch, probe and stop
//! process groups (the [`Supervisor`] trait the daemon implements), the values it trades
//! in, and where a command's log goes. The process controller runs services with it; the
//! slice and golden controllers run `migrate` and `seed`.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::limits::ResourceLimits;
use crate::store::{World, WorldId};

// What a spawn placed and what a service uses are recorded by the store, the layer below,
// so they are defined there; the supervisor trades in them.
pub use crate::store::{Placement, Usage};

/// What to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpawnSpec {
    /// The world (the supervisor nudges it when the process exits).
    pub world: WorldId,
    /// Service name (or `hook:post_up` for hooks).
    pub service: String,
    /// Run through `sh -c`.
    pub cmd: String,
    /// Working directory.
    pub workdir: PathBuf,
    /// The whole environment (nothing else is inherited).
    pub env: BTreeMap<String, String>,
    /// Output is appended here.
    pub log: PathBuf,
    /// Put in the process's environment as `BINKY_SPAWN_TOKEN`.
    pub token: String,
    /// A task that runs to its end (a service's `setup`), not a service: its exit is its
    /// result, not a crash.
    pub task: bool,
    /// The niceness it runs at (the `nice` setting).
    pub nice: i32,
    /// The limits it runs under (a service's `limits`; none for tasks).
    pub limits: ResourceLimits,
}

/// The identity of a process: a pid alone can be reused, a pid and its start time cannot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProcId {
    /// Process id (also its process group id).
    pub pid: u32,
    /// Start time in clock ticks since boot (`/proc/PID/stat` field 22).
    pub start_time: u64,
}

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit {
    /// Exit code, when it exited.
    pub code: Option<i32>,
    /// Signal, when it was killed.
    pub signal: Option<i32>,
}

impl Exit {
    /// Exit code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(c), _) => write!(f, "exit {c}"),
            (None, Some(s)) => write!(f, "signal {s}"),
            (None, None) => f.write_str("gone (status unknown: adopted process)"),
        }
    }
}

/// Whether a recorded process still runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// It runs.
    Running,
    /// It ended.
    Exited(Exit),
}

/// How to stop a process group: the signal that asks it to, then SIGKILL once `grace` has
/// passed with anything of the group left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopHow {
    /// The signal's name, with `SIG` (`SIGTERM`, `SIGQUIT`).
    pub signal: String,
    /// How long the group gets before SIGKILL.
    pub grace: Duration,
}

impl StopHow {
    /// SIGTERM, then SIGKILL after `grace`.
    pub fn term(grace: Duration) -> StopHow {
        StopHow {
            signal: crate::spec::DEFAULT_STOP_SIGNAL.to_owned(),
            grace,
        }
    }
}

/// How a stop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// Nothing of the group was left to stop.
    Gone,
    /// The group was gone this long after the signal, within its grace.
    Exited(Duration),
    /// Something of the group was still there when the grace ran out: killed (SIGKILL).
    Killed,
}

/// A resolved readiness probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeTarget {
    /// GET this URL; ready below 500.
    Http(String),
    /// Connect to host:port.
    Tcp(String, u16),
    /// Exit 0.
    Cmd {
        /// Shell command.
        cmd: String,
        /// Where.
        workdir: PathBuf,
        /// With what: its service's environment, `${secret:…}` as written (resolved by the
        /// supervisor with the values the service was started with).
        env: BTreeMap<String, String>,
        /// The world it checks a service of.
        world: WorldId,
        /// The service instance it checks (what its secrets are audited under).
        service: String,
    },
}

/// Why a readiness probe did not pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeFailure {
    /// Not ready (yet): no connection, an error status, a failing command.
    NotReady(String),
    /// The port answers, but a program outside the service holds it (the message names it).
    Foreign(String),
    /// Nothing answers on `port`, and the service's own processes listen on `listening`
    /// instead: it listens, but not where binky looks.
    OtherPort {
        /// The port probed (the service's).
        port: u16,
        /// The TCP ports its processes listen on.
        listening: Vec<u16>,
    },
}

impl ProbeFailure {
    /// What went wrong, to put in a sentence.
    pub fn text(&self) -> String {
        match self {
            ProbeFailure::NotReady(why) | ProbeFailure::Foreign(why) => why.clone(),
            ProbeFailure::OtherPort { port, listening } => {
                let ports: Vec<String> = listening.iter().map(u16::to_string).collect();
                format!(
                    "listening on port{} {}, not on its port {port}",
                    if ports.len() == 1 { "" } else { "s" },
                    ports.join(", ")
                )
            }
        }
    }
}

/// A process carrying one of this binky home's spawn tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marked {
    /// Its pid.
    pub pid: u32,
    /// Its process group.
    pub pgid: u32,
    /// Its start time.
    pub start_time: u64,
    /// The token.
    pub token: String,
}

/// A process could not be started or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The OS refused.
    #[error("cannot start `{cmd}` in {dir}: {source}")]
    Io {
        /// The command.
        cmd: String,
        /// Its directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It ran past its time limit (and was killed).
    #[error("`{cmd}` did not finish within {secs} s and was stopped")]
    Timeout {
        /// The command.
        cmd: String,
        /// The limit.
        secs: u64,
    },
}

/// The process effects the controller needs.
pub trait Supervisor: Send + Sync + 'static {
    /// Start a long-running process in its own group.
    fn spawn(&self, spec: &SpawnSpec) -> impl Future<Output = Result<ProcId, SpawnError>> + Send;
    /// Does it still run? Adopts (watches) a process this supervisor did not start.
    fn liveness(&self, world: WorldId, id: ProcId) -> Liveness;
    /// `how.signal` to the group, SIGKILL after `how.grace`; returns once the group is gone,
    /// saying how it went.
    fn stop(&self, id: ProcId, how: StopHow) -> impl Future<Output = Stopped> + Send;
    /// One readiness probe of the service running as `owner` (the leader of its process
    /// group), answered within `timeout`. A TCP probe of a local port passes only when that
    /// port is held by the service's own processes: after a kill, another program may have
    /// taken the port.
    fn probe(
        &self,
        target: &ProbeTarget,
        owner: ProcId,
        timeout: Duration,
    ) -> impl Future<Output = Result<(), ProbeFailure>> + Send;
    /// Why the machine is too busy for a restart to help, if it is: tasks wait for a CPU
    /// `cpu_percent` of the time or more. A service failing its checks then is not
    /// restarted into a storm.
    fn saturated(&self, cpu_percent: f64) -> Option<String> {
        let _ = cpu_percent;
        None
    }
    /// Run a command to its end (setup, hooks), output appended to the log.
    fn run(
        &self,
        spec: &SpawnSpec,
        timeout: Duration,
    ) -> impl Future<Output = Result<Exit, SpawnError>> + Send;
    /// Processes carrying this home's spawn tokens.
    fn marked(&self) -> Vec<Marked>;
    /// Stop a whole process group.
    fn kill_group(&self, pgid: u32, grace: Duration) -> impl Future<Output = ()> + Send;
    /// A fresh spawn token for a world (unique, tagged with this home).
    fn token(&self, world: WorldId) -> String;
    /// Where the process `id` (just returned by [`Supervisor::spawn`]) was put: asked once.
    fn placement(&self, _id: ProcId) -> Placement {
        Placement::default()
    }
    /// What a service uses now: read from its `cgroup` (recorded from its placement), else
    /// from the process group `id`; `None` when neither can be read.
    fn usage(&self, _cgroup: Option<&str>, _id: Option<ProcId>) -> Option<Usage> {
        None
    }
    /// The CPU time a service used, alone (cheaper than [`Supervisor::usage`]: one small
    /// file where it can): how the sampler tells an idle service without reading the rest.
    fn cpu_usec(&self, cgroup: Option<&str>, id: Option<ProcId>) -> Option<u64> {
        self.usage(cgroup, id).map(|u| u.cpu_usec)
    }
    /// Remove a service's cgroup once its process is gone, ending whatever is still in it;
    /// `false` when it could not be removed yet (try again later).
    fn release(&self, _cgroup: &str) -> bool {
        true
    }
    /// Remove whatever is left of a world's cgroups: those of this supervisor, and the
    /// `recorded` ones a previous daemon made.
    fn release_world(&self, _world: WorldId, _recorded: &[String]) {}
}

/// Where a service's (or hook's, or `migrate`'s) log goes.
pub fn log_path(logs_dir: &Path, world: &World, service: &str) -> PathBuf {
    logs_dir
        .join(&world.project)
        .join(&world.name)
        .join(format!("{service}.log"))
}

/// The last `lines` lines of a log file (binky's run separators left out).
pub fn log_tail(path: &Path, lines: usize) -> String {
    let Ok(text) = std::fs::read(path) else {
        return String::new();
    };
    let start = text.len().saturating_sub(16 * 1024);
    let text = String::from_utf8_lossy(&text[start..]);
    // binky's own run separators are noise in a failure message.
    let all: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("--- binky "))
        .collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
