//! The real process effects: spawning services in their own process groups, watching them,
//! adopting ones a previous daemon started, and stopping whole groups.
//!
//! # Guarantees
//! - A service's output goes straight to its log file (the child holds the file, not a pipe
//!   to the daemon), so a daemon that stops or dies never breaks a service's stdout.
//! - Every process carries `BINKY_SPAWN_TOKEN=<home tag>.<world>.<nonce>` in its
//!   environment; the tag keeps two binky homes (e.g. parallel tests) from ever touching
//!   each other's processes.
//! - Stopping signals the whole process group, so grandchildren (`sh -c 'a & b'`) stop too;
//!   a process that starts its own session escapes the group, but not its cgroup: once the
//!   service stops, what is left in its cgroup is ended when the cgroup is removed.
//! - Where the machine allows it (`resources`), every process joins a cgroup of binky's
//!   before it runs (`cgroup`): a service its own, with its `limits` written; a task (setup,
//!   migrate, seed, hook) its world's task cgroup. Else a service with limits runs under
//!   `systemd-run --scope`, else under binky's polling (`resources`: restarted over its
//!   memory limit, a lower priority for its CPU limit; nothing caps it), and its placement
//!   says why. macOS and the BSDs have only binky's polling.

pub mod cgroup;
pub mod descendants;
#[cfg(test)]
mod everywhere;
pub mod probe;
pub mod resources;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use binky_controllers::process::Mechanism;
use binky_controllers::runtime::Trigger;
use binky_controllers::store::WorldId;
use binky_controllers::supervisor::{
    Exit, Liveness, Marked, Placement, ProbeFailure, ProbeTarget, ProcId, SpawnError, SpawnSpec,
    StopHow, Stopped, Supervisor, Usage,
};
use binky_platform::{job, proc};

/// The environment variable that marks binky's processes.
pub const TOKEN_VAR: &str = "BINKY_SPAWN_TOKEN";

/// Logs are rotated at (re)start once they pass this size; three generations are kept.
const LOG_ROTATE_BYTES: u64 = 10 * 1024 * 1024;

#[derive(Clone, Copy)]
enum ChildState {
    Running,
    Exited(Exit),
}

/// The real supervisor.
pub struct RealSupervisor {
    tag: String,
    trigger: Trigger,
    children: Arc<Mutex<HashMap<ProcId, ChildState>>>,
    watched: Arc<Mutex<HashSet<ProcId>>>,
    counter: AtomicU64,
    secrets: Option<crate::secrets::Secrets>,
    /// The `binky` binary whose `__scrub` copies output to the log, scrubbed; `None`:
    /// output goes straight to the file (a daemon booted inside a test binary).
    scrub: Option<std::path::PathBuf>,
    /// How limits are enforced and usage measured here.
    resources: Arc<resources::Resources>,
    /// Where each service spawned lately was put, until the controller asks.
    placements: Mutex<HashMap<ProcId, Placement>>,
    /// The secrets (by reference) each running service was started with: its health
    /// command gets the same values (as its service sees them, and without asking a vault
    /// again every few seconds). Forgotten when the service ends.
    started_with: Mutex<HashMap<ProcId, BTreeMap<String, String>>>,
}

/// Where one process goes: its placement, and what the spawn needs for it.
struct Placed {
    placement: Placement,
    /// binky's cgroup it joins.
    leaf: Option<cgroup::Leaf>,
    /// The files it joins it by (open until the spawn is done).
    join: Option<cgroup::Join>,
    /// A command to run it under (`systemd-run --scope …`).
    wrap: Option<Vec<std::ffi::OsString>>,
}

impl Placed {
    /// Give back a leaf the process never ran in.
    fn unused(&self) {
        if let Some(leaf) = &self.leaf {
            cgroup::release_unused(leaf);
        }
    }
}

impl RealSupervisor {
    /// A supervisor marking its processes with `tag`, nudging `trigger` on exits.
    pub fn new(tag: String, trigger: Trigger) -> Self {
        RealSupervisor {
            tag,
            trigger,
            children: Arc::default(),
            watched: Arc::default(),
            counter: AtomicU64::new(0),
            secrets: None,
            scrub: None,
            resources: Arc::new(resources::Resources::off()),
            placements: Mutex::default(),
            started_with: Mutex::default(),
        }
    }

    /// Enforce limits and measure usage with `resources`.
    pub fn with_resources(mut self, resources: resources::Resources) -> Self {
        self.resources = Arc::new(resources);
        self
    }

    /// Remove binky's empty cgroup directories of this home (the daemon stops).
    pub fn tidy(&self) {
        if let Some(c) = self.resources.cgroups() {
            c.tidy();
        }
    }

    /// Where the process of `spec` goes: its cgroup, else a systemd scope for its limits,
    /// else nowhere (and why).
    async fn place(&self, spec: &SpawnSpec) -> Placed {
        let mut cgroup_error = None;
        if let Some(cg) = self.resources.cgroups() {
            let name = cgroup::leaf_name(&spec.service, spec.task);
            match cg.prepare(spec.world, &name, spec.limits, !spec.task) {
                Ok((leaf, join)) => {
                    return Placed {
                        placement: Placement {
                            cgroup: Some(leaf.encode()),
                            mechanism: leaf.mechanism(),
                            note: String::new(),
                        },
                        leaf: Some(leaf),
                        join: Some(join),
                        wrap: None,
                    }
                }
                Err(e) => {
                    tracing::warn!(service = %spec.service, err = %e, "cannot use binky's cgroup");
                    cgroup_error = Some(format!("binky's cgroup for it: {e}"));
                }
            }
        }
        let none = |note: String| Placed {
            placement: Placement {
                cgroup: None,
                mechanism: Mechanism::None,
                note,
            },
            leaf: None,
            join: None,
            wrap: None,
        };
        if self.resources.job_objects() {
            // Windows: the service's own Job object holds its limits
            // (`resources::resources::job_limits(spec.limits)`, set when it starts).
            return Placed {
                placement: Placement {
                    cgroup: None,
                    mechanism: Mechanism::JobObject,
                    note: String::new(),
                },
                leaf: None,
                join: None,
                wrap: None,
            };
        }
        if spec.limits.is_none() {
            return none(cgroup_error.unwrap_or_default());
        }
        // Nothing the system offers caps them: binky's polling (the process controller
        // restarts the service over its memory limit; `command` lowers its priority).
        let polled = |note: String| Placed {
            placement: Placement {
                cgroup: None,
                mechanism: Mechanism::Polled,
                note,
            },
            leaf: None,
            join: None,
            wrap: None,
        };
        if self.resources.polled() {
            return polled(self.resources.polled_note(
                spec.limits,
                spec.nice,
                cgroup_error.as_deref(),
                "",
            ));
        }
        match self.resources.systemd().await {
            Ok(()) => Placed {
                placement: Placement {
                    cgroup: None,
                    mechanism: Mechanism::SystemdRun,
                    note: String::new(),
                },
                leaf: None,
                join: None,
                wrap: Some(self.resources.systemd_prefix(spec.limits)),
            },
            Err(e) => polled(self.resources.polled_note(
                spec.limits,
                spec.nice,
                cgroup_error.as_deref(),
                &e,
            )),
        }
    }

    /// Pass every service's output through `binky __scrub` (this binary).
    pub fn with_scrubber(mut self, binky: std::path::PathBuf) -> Self {
        self.scrub = Some(binky);
        self
    }

    /// Resolve `${secret:REF}` in environments at spawn time from `secrets`.
    pub fn with_secrets(mut self, secrets: crate::secrets::Secrets) -> Self {
        self.secrets = Some(secrets);
        self
    }

    /// The service's log, rotated when it has grown too large, opened for appending.
    fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        if std::fs::metadata(path).map(|m| m.len()).unwrap_or(0) > LOG_ROTATE_BYTES {
            for i in (1..3).rev() {
                let _ = std::fs::rename(rotated(path, i), rotated(path, i + 1));
            }
            let _ = std::fs::rename(path, rotated(path, 1));
        }
        let mut opts = OpenOptions::new();
        opts.create(true).append(true);
        binky_platform::fs::with_mode(&mut opts, 0o600).open(path)
    }

    /// Start a run in `log` with `--- binky <time> · <cmd> ---`, the command scrubbed as the
    /// service's output is: the values binky hands it that are secret (from `env`, and the
    /// resolved `${secret:…}`s) and the shapes of known credentials. The command may carry
    /// them (`--token ${env.API_TOKEN}`, a slice's URL with its password).
    fn header(
        log: &mut std::fs::File,
        cmd: &str,
        env: &BTreeMap<String, String>,
        secrets: &[String],
    ) {
        let line = format!(
            "--- binky {} · {} ---\n",
            humantime::format_rfc3339_seconds(std::time::SystemTime::now()),
            cmd
        );
        let scrubber = crate::scrub::Scrubber::new(&crate::scrub::values_for(env, secrets));
        let _ = log.write_all(&scrubber.line(line.as_bytes()));
    }

    /// The environment the process gets and the secrets in it, by reference (`${secret:…}`
    /// resolved); the run's header goes into `log` whether they resolve or not.
    async fn prepare(
        &self,
        spec: &SpawnSpec,
        log: &mut std::fs::File,
    ) -> Result<(BTreeMap<String, String>, BTreeMap<String, String>), SpawnError> {
        match self
            .resolve_secrets(spec.world, &spec.service, spec.env.clone(), BTreeMap::new())
            .await
        {
            Ok((env, known)) => {
                Self::header(log, &spec.cmd, &env, &values(&known));
                Ok((env, known))
            }
            Err(e) => {
                Self::header(log, &spec.cmd, &spec.env, &[]);
                Err(Self::io_error(spec, e))
            }
        }
    }

    /// The environment `env` of a command of `world` (`service`, as its audit names it)
    /// with `${secret:…}` resolved — at the last moment, for every command the daemon
    /// runs: a service, its setup, a hook, migrate and seed, a health command. The value
    /// lives in the child's environment, the scrubber's list and, while a service runs, in
    /// `started_with` for its health command. A reference in `known` takes that value;
    /// the secrets by reference come back with the environment. A `secret_command` may take
    /// seconds: it runs on a blocking thread, not a worker.
    async fn resolve_secrets(
        &self,
        world: WorldId,
        service: &str,
        mut env: BTreeMap<String, String>,
        mut known: BTreeMap<String, String>,
    ) -> std::io::Result<(BTreeMap<String, String>, BTreeMap<String, String>)> {
        if !env.values().any(|v| v.contains("${secret:")) {
            return Ok((env, known));
        }
        let Some(source) = self.secrets.clone() else {
            return Err(std::io::Error::other(
                "${secret:…} is not available here (no secret source)",
            ));
        };
        let service = service.to_owned();
        tokio::task::spawn_blocking(move || {
            source
                .resolve_with(world, &service, &mut env, &mut known)
                .map_err(std::io::Error::other)?;
            Ok((env, known))
        })
        .await
        .map_err(std::io::Error::other)?
    }

    /// Forget what the service `id` was started with (it has ended).
    fn forget(&self, id: ProcId) {
        self.started_with
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }

    /// What `spawn` and `run` both start from: the environment prepared (the run's header
    /// in `log`), the cgroup placed, and the command with its scrubber. A command that
    /// cannot be built leaves no cgroup behind.
    async fn prepared(
        &self,
        spec: &SpawnSpec,
        mut log: std::fs::File,
    ) -> Result<
        (
            tokio::process::Command,
            Option<tokio::process::Child>,
            Placed,
            BTreeMap<String, String>,
        ),
        SpawnError,
    > {
        let (env, known) = self.prepare(spec, &mut log).await?;
        let placed = self.place(spec).await;
        match self.command(spec, log, env, values(&known), &placed) {
            Ok((cmd, shim)) => Ok((cmd, shim, placed, known)),
            Err(e) => {
                placed.unused();
                Err(Self::io_error(spec, e))
            }
        }
    }

    /// The service's command, and the scrubber its output goes through (when there is one).
    fn command(
        &self,
        spec: &SpawnSpec,
        log: std::fs::File,
        mut env: BTreeMap<String, String>,
        secrets: Vec<String>,
        placed: &Placed,
    ) -> std::io::Result<(tokio::process::Command, Option<tokio::process::Child>)> {
        let (out, err, shim) = match &self.scrub {
            Some(binky) => {
                drop(log);
                // Not inherited (close-on-exec; Windows: a handle not inheritable): no other
                // child (the scrubber itself included) may hold the write end, or the
                // scrubber would never see the end of its input.
                let (r, w) = std::io::pipe()?;
                let values = crate::scrub::values_for(&env, &secrets);
                let mut shim = tokio::process::Command::new(binky);
                shim.arg("__scrub")
                    .arg(&spec.log)
                    .env_clear()
                    .env(
                        crate::scrub::VALUES_VAR,
                        serde_json::to_string(&values).unwrap_or_default(),
                    )
                    .stdin(std::process::Stdio::from(r))
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .kill_on_drop(false);
                let shim = binky_platform::process::in_new_group_async(&mut shim).spawn()?;
                let w2 = w.try_clone()?;
                (
                    std::process::Stdio::from(w),
                    std::process::Stdio::from(w2),
                    Some(shim),
                )
            }
            None => (
                std::process::Stdio::from(log.try_clone()?),
                std::process::Stdio::from(log),
                None,
            ),
        };
        let mut cmd = match placed.wrap.as_deref() {
            Some([program, args @ ..]) => {
                // systemd-run finds the user's manager through these; the world's
                // environment may lack them.
                for k in ["XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS"] {
                    if let (false, Ok(v)) = (env.contains_key(k), std::env::var(k)) {
                        env.insert(k.to_owned(), v);
                    }
                }
                let shell = binky_platform::process::shell();
                let mut c = tokio::process::Command::new(program);
                c.args(args)
                    .arg(shell.program())
                    .arg(shell.flag())
                    .arg(&spec.cmd);
                c
            }
            _ => binky_platform::process::shell_command(&spec.cmd),
        };
        cmd.current_dir(&spec.workdir)
            .env_clear()
            .envs(&env)
            .env(TOKEN_VAR, &spec.token)
            .stdin(std::process::Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(false);
        // Under binky's polling a CPU limit is a lower priority (nothing caps it).
        let nice = if placed.placement.mechanism == Mechanism::Polled {
            resources::nice_under_polling(spec.limits, spec.nice, resources::machine_cores())
        } else {
            spec.nice
        };
        binky_platform::process::in_new_group_niced_async(&mut cmd, nice);
        if let Some(join) = &placed.join {
            join.apply(&mut cmd);
        }
        Ok((cmd, shim))
    }

    /// Reap a scrubber when it is done (it exits once every writer has closed its output).
    fn reap(shim: Option<tokio::process::Child>) {
        if let Some(mut shim) = shim {
            tokio::spawn(async move {
                let _ = shim.wait().await;
            });
        }
    }

    /// Holds the just-spawned process `id` of `spec` with all it will start, under its
    /// limits (`binky_platform::job`: Windows' Job object; nothing to do on Unix, where its
    /// process group and cgroup hold it). A process that cannot be held still runs: its
    /// stop then reaches it and its descendants by their parents.
    fn hold(&self, spec: &SpawnSpec, id: ProcId) {
        if let Err(e) = job::hold(
            &self.tag,
            id.pid,
            id.start_time,
            resources::job_limits(spec.limits),
        ) {
            tracing::warn!(service = %spec.service, pid = id.pid, err = %e, "cannot hold the process in a job; it runs without its limits");
        }
    }

    fn io_error(spec: &SpawnSpec, source: std::io::Error) -> SpawnError {
        SpawnError::Io {
            cmd: spec.cmd.clone(),
            dir: spec.workdir.clone(),
            source,
        }
    }

    /// Watch a process this supervisor did not start; nudge its world when it dies.
    fn watch_adopted(&self, world: WorldId, id: ProcId) {
        if !self
            .watched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id)
        {
            return;
        }
        let watched = self.watched.clone();
        let trigger = self.trigger.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                if !proc::alive(id.pid, id.start_time) {
                    end_orphaned_group(id.pid).await;
                    watched
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&id);
                    trigger.world(world);
                    break;
                }
            }
        });
    }
}

/// A task's placement, given back when the task is done (its cgroup goes if it is empty).
struct Done(Placed);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.join = None;
        self.0.unused();
    }
}

/// The secrets' values of `known` (by reference), for the scrubber.
fn values(known: &BTreeMap<String, String>) -> Vec<String> {
    known.values().cloned().collect()
}

fn rotated(path: &Path, n: u32) -> std::path::PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{n}"));
    s.into()
}

fn exit_of(status: std::process::ExitStatus) -> Exit {
    Exit {
        code: status.code(),
        signal: binky_platform::process::exit_signal(&status),
    }
}

async fn wait_group_gone(pgid: u32, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    // Quick at first (most groups end within a few ms of the signal), then every 200 ms:
    // hundreds of worlds stopping at once do not each look 40 times a second.
    let mut pause = Duration::from_millis(10);
    loop {
        if job::group_gone(pgid) {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(pause.min(until.saturating_duration_since(Instant::now()))).await;
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// How long what is left of a group whose leader died gets between SIGTERM and SIGKILL.
const ORPHAN_GRACE: Duration = Duration::from_secs(5);

/// Stop what is left of the process group `pgid` once its leader is gone.
async fn end_orphaned_group(pgid: u32) {
    let left = job::members(pgid);
    if !left.is_empty() {
        tracing::info!(
            pgid,
            left = left.len(),
            "leader gone; stopping the rest of its group"
        );
        stop_group(pgid, ORPHAN_GRACE).await;
    }
    job::release(pgid);
}

/// SIGTERM to a process group, SIGKILL after `grace`; returns once it is gone.
pub async fn stop_group(pgid: u32, grace: Duration) {
    stop_group_with(pgid, "SIGTERM", grace).await;
}

/// `first` (a signal's name) to a process group, its end after `grace`; returns once it is
/// gone, saying how. Windows: `CTRL_BREAK_EVENT` for any signal but SIGKILL, then
/// `TerminateJobObject` (`binky_platform::job`).
pub async fn stop_group_with(pgid: u32, first: impl AsRef<str>, grace: Duration) -> Stopped {
    let first = first.as_ref();
    let signalled = Instant::now();
    match job::stop_gracefully(pgid, first) {
        Ok(()) => {
            if wait_group_gone(pgid, grace).await {
                job::release(pgid);
                return Stopped::Exited(signalled.elapsed());
            }
            tracing::info!(pgid, signal = first, "group still alive; ending it");
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            job::release(pgid);
            return Stopped::Gone;
        }
        // Not allowed (another user's group), or Windows could not send the console event:
        // what is left is ended now rather than after a grace nothing asked to use.
        Err(e) => {
            tracing::warn!(pgid, signal = first, err = %e, "cannot ask the group to stop; ending it")
        }
    }
    let _ = job::kill_group(pgid);
    wait_group_gone(pgid, Duration::from_secs(3)).await;
    job::release(pgid);
    Stopped::Killed
}

/// The signal named `name` (`SIGQUIT`; the config reader only lets such names through), or
/// SIGTERM.
pub fn signal_named(name: &str) -> &'static str {
    binky_platform::signal::canonical(name).unwrap_or_else(|| {
        tracing::warn!(signal = name, "not a signal; stopping with SIGTERM");
        "SIGTERM"
    })
}

impl Supervisor for RealSupervisor {
    async fn spawn(&self, spec: &SpawnSpec) -> Result<ProcId, SpawnError> {
        let mut log = Self::open_log(&spec.log).map_err(|e| Self::io_error(spec, e))?;
        if !spec.workdir.is_dir() {
            Self::header(&mut log, &spec.cmd, &spec.env, &[]);
            return Err(Self::io_error(
                spec,
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "working directory does not exist",
                ),
            ));
        }
        let (mut cmd, shim, placed, known) = self.prepared(spec, log).await?;
        let spawned = cmd.spawn();
        // Our copies of the output pipe close here: the scrubber sees the end of input
        // once the service (and whatever it started) closes its own.
        drop(cmd);
        let Placed {
            placement, leaf, ..
        } = placed;
        // A task's cgroup is its world's to share; it goes once the task is done.
        let task_leaf = if spec.task { leaf.clone() } else { None };
        // A task's (setup's) result is read with its log's tail: its scrubber must have
        // written everything first, so the exit waits for it (below).
        let (shim, task_shim) = if spec.task {
            (None, shim)
        } else {
            (shim, None)
        };
        Self::reap(shim);
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                Self::reap(task_shim);
                if let Some(leaf) = &leaf {
                    cgroup::release_unused(leaf);
                }
                return Err(Self::io_error(spec, e));
            }
        };
        let pid = child
            .id()
            .ok_or_else(|| Self::io_error(spec, std::io::Error::other("no pid")))?;
        // The child exists until we reap it, so its stat is readable (a zombie's too).
        let start_time = proc::stat(pid).map(|s| s.start_time).unwrap_or(0);
        let id = ProcId { pid, start_time };
        self.hold(spec, id);
        if !spec.task {
            self.placements
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id, placement);
            if !known.is_empty() {
                self.started_with
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(id, known);
            }
        }
        self.children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, ChildState::Running);
        let children = self.children.clone();
        let trigger = self.trigger.clone();
        let world = spec.world;
        tokio::spawn(async move {
            let exit = match child.wait().await {
                Ok(status) => exit_of(status),
                Err(_) => Exit {
                    code: None,
                    signal: None,
                },
            };
            // The leader is gone (it exited, or someone killed the `sh -c` whose pid status
            // shows): the rest of its group — often the real server — goes too before the
            // exit is reported, so a restart finds its port free and nothing outlives it.
            end_orphaned_group(pid).await;
            if let Some(mut sh) = task_shim {
                let _ = tokio::time::timeout(Duration::from_secs(2), sh.wait()).await;
                Self::reap(Some(sh));
            }
            if let Some(leaf) = task_leaf {
                cgroup::release_unused(&leaf);
            }
            children
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id, ChildState::Exited(exit));
            trigger.world(world);
        });
        Ok(id)
    }

    fn liveness(&self, world: WorldId, id: ProcId) -> Liveness {
        let mut children = self.children.lock().unwrap_or_else(|e| e.into_inner());
        match children.get(&id).copied() {
            Some(ChildState::Running) => Liveness::Running,
            Some(ChildState::Exited(exit)) => {
                children.remove(&id);
                drop(children);
                self.forget(id);
                Liveness::Exited(exit)
            }
            None => {
                drop(children);
                if proc::alive(id.pid, id.start_time) {
                    // Its job, where the system has them and it still exists.
                    job::reopen(&self.tag, id.pid, id.start_time);
                    self.watch_adopted(world, id);
                    Liveness::Running
                } else if !job::group_gone(id.pid) {
                    // An adopted leader died while this daemon was not watching: its group
                    // is stopped first (the watcher nudges the world when it is gone).
                    self.watch_adopted(world, id);
                    Liveness::Running
                } else {
                    self.forget(id);
                    Liveness::Exited(Exit {
                        code: None,
                        signal: None,
                    })
                }
            }
        }
    }

    async fn stop(&self, id: ProcId, how: StopHow) -> Stopped {
        let ours = matches!(
            self.children
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&id),
            Some(ChildState::Running)
        );
        self.forget(id);
        if !ours && !proc::alive(id.pid, id.start_time) && job::group_gone(id.pid) {
            return Stopped::Gone;
        }
        stop_group_with(id.pid, signal_named(&how.signal), how.grace).await
    }

    async fn probe(
        &self,
        target: &ProbeTarget,
        owner: ProcId,
        timeout: Duration,
    ) -> Result<(), ProbeFailure> {
        let ProbeTarget::Cmd {
            cmd,
            workdir,
            env,
            world,
            service,
        } = target
        else {
            return probe::probe(target, owner, timeout).await;
        };
        // A health command sees what its service sees: `${secret:…}` resolved, with the
        // values the service was started with (a service this daemon adopted: fetched once,
        // then kept as if it had been started with them).
        let known = self
            .started_with
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&owner)
            .cloned()
            .unwrap_or_default();
        let (env, known) = self
            .resolve_secrets(*world, service, env.clone(), known)
            .await
            .map_err(|e| ProbeFailure::NotReady(e.to_string()))?;
        if !known.is_empty() {
            self.started_with
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(owner, known);
        }
        let resolved = ProbeTarget::Cmd {
            cmd: cmd.clone(),
            workdir: workdir.clone(),
            env,
            world: *world,
            service: service.clone(),
        };
        probe::probe(&resolved, owner, timeout).await
    }

    fn saturated(&self, cpu_percent: f64) -> Option<String> {
        proc::saturation(cpu_percent)
    }

    async fn run(&self, spec: &SpawnSpec, timeout: Duration) -> Result<Exit, SpawnError> {
        let log = Self::open_log(&spec.log).map_err(|e| Self::io_error(spec, e))?;
        let (mut cmd, mut shim, placed, _) = self.prepared(spec, log).await?;
        let spawned = cmd.spawn();
        drop(cmd);
        // Its cgroup goes when it is done, whatever the outcome.
        let _done = Done(placed);
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                Self::reap(shim);
                return Err(Self::io_error(spec, e));
            }
        };
        let pid = child.id().unwrap_or(0);
        if pid != 0 {
            let start_time = proc::stat(pid).map(|s| s.start_time).unwrap_or(0);
            self.hold(spec, ProcId { pid, start_time });
        }
        match tokio::time::timeout(timeout, child.wait()).await {
            Ok(Ok(status)) => {
                // Whatever it left running in its group goes with it.
                if pid != 0 && !job::group_gone(pid) {
                    stop_group(pid, Duration::from_secs(2)).await;
                }
                job::release(pid);
                // The caller reads the log next: let the scrubber write it all first.
                if let Some(sh) = shim.as_mut() {
                    let _ = tokio::time::timeout(Duration::from_secs(2), sh.wait()).await;
                }
                Self::reap(shim);
                Ok(exit_of(status))
            }
            Ok(Err(e)) => {
                job::release(pid);
                Self::reap(shim);
                Err(Self::io_error(spec, e))
            }
            Err(_) => {
                stop_group(pid, Duration::from_secs(2)).await;
                let _ = child.wait().await;
                Self::reap(shim);
                Err(SpawnError::Timeout {
                    cmd: spec.cmd.clone(),
                    secs: timeout.as_secs(),
                })
            }
        }
    }

    fn marked(&self) -> Vec<Marked> {
        let me = std::process::id();
        let prefix = format!("{}.", self.tag);
        proc::pids()
            .into_iter()
            .filter(|p| *p != me)
            .filter_map(|pid| {
                let token = proc::environ_var(pid, TOKEN_VAR)?;
                if !token.starts_with(&prefix) {
                    return None;
                }
                let st = proc::stat(pid)?;
                if st.ended() {
                    return None;
                }
                Some(Marked {
                    pid,
                    pgid: st.pgrp,
                    start_time: st.start_time,
                    token,
                })
            })
            .collect()
    }

    async fn kill_group(&self, pgid: u32, grace: Duration) {
        stop_group(pgid, grace).await;
    }

    fn placement(&self, id: ProcId) -> Placement {
        self.placements
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
            .unwrap_or_default()
    }

    fn usage(&self, cgroup: Option<&str>, id: Option<ProcId>) -> Option<Usage> {
        if let Some(u) = cgroup
            .and_then(cgroup::Leaf::decode)
            .and_then(|l| l.usage())
        {
            return Some(u);
        }
        let id = id?;
        if !proc::alive(id.pid, id.start_time) {
            return None;
        }
        // Windows measures the service's Job object as a whole.
        if let Some(u) = job::usage(id.pid) {
            return Some(u);
        }
        self.resources.group_usage(id.pid)
    }

    fn cpu_usec(&self, cgroup: Option<&str>, id: Option<ProcId>) -> Option<u64> {
        match cgroup.and_then(cgroup::Leaf::decode) {
            Some(leaf) => leaf.cpu_usec(),
            None => self.usage(None, id).map(|u| u.cpu_usec),
        }
    }

    fn release(&self, cgroup: &str) -> bool {
        // Waits (up to 200 ms a directory) for what is left to end: off the async workers,
        // so hundreds of services released at once do not stop the daemon answering.
        binky_controllers::store::off_worker(|| {
            cgroup::Leaf::decode(cgroup).is_none_or(|leaf| cgroup::release(&leaf))
        })
    }

    fn release_world(&self, world: WorldId, recorded: &[String]) {
        let leaves: Vec<cgroup::Leaf> = recorded
            .iter()
            .filter_map(|c| cgroup::Leaf::decode(c))
            .collect();
        binky_controllers::store::off_worker(|| match self.resources.cgroups() {
            Some(c) => c.release_world(world, &leaves),
            None => cgroup::release_world(world, &[], &leaves),
        })
    }

    fn token(&self, world: WorldId) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        format!(
            "{}.{world}.{:x}{n:x}{:x}",
            self.tag,
            nanos,
            std::process::id()
        )
    }
}
