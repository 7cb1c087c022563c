//! The process controller: each process service of a running world runs, in dependency
//! order, once its dependencies are ready.
//!
//! # Guarantees
//! - Nothing starts before the world's worktree exists and its ports are allocated for the
//!   current generation.
//! - A service starts only when every service it `depends_on` is ready (healthy, or exited
//!   successfully for a one-shot). `setup` runs once per world before the first start (again
//!   only when its resolved text changes), without waiting for dependencies: only for the
//!   addresses of the slices its text or env uses.
//! - Each process runs `sh -c CMD` in its own process group, with its output appended to
//!   its log file. Its `(pid, start time)` is recorded, so a restarted daemon adopts it
//!   instead of starting a second copy; a process that a daemon started but died before
//!   recording (it carries a spawn token in its environment) is found and stopped.
//! - Exits follow the restart policy with capped exponential backoff (0.5 s doubling to
//!   30 s; the count resets after 10 s of running). Three failures in a row make the world
//!   `CrashLoop` (binky keeps retrying; `binky up` stops waiting and shows the log tail).
//! - Stopping sends SIGTERM to the group, then SIGKILL after the grace period; dependents
//!   stop before their dependencies.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::params;
use sha2::{Digest, Sha256};

use crate::env::{self, Layout};
use crate::registry::Kind;
use crate::runtime::{Action, Applied, Cleanup, Condition, Controller, ReconcileError};
use crate::spec::{Probe, Restart, Service};
use crate::store::{
    self, now_ms, owner, CondStatus, DesiredState, ProcessRow, Store, StoreError, World, WorldId,
};
use crate::tokens::Tokens;

/// The condition this controller reports.
const CONDITION: &str = Kind::Process.condition();

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
        /// With what.
        env: BTreeMap<String, String>,
    },
}

/// Why a readiness probe did not pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeFailure {
    /// Not ready (yet): no connection, an error status, a failing command.
    NotReady(String),
    /// The port answers, but a program outside the service holds it (the message names it).
    Foreign(String),
}

impl From<String> for ProbeFailure {
    fn from(why: String) -> Self {
        ProbeFailure::NotReady(why)
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
    /// SIGTERM to the group, SIGKILL after `grace`; returns once the group is gone.
    fn stop(&self, id: ProcId, grace: Duration) -> impl Future<Output = ()> + Send;
    /// One readiness probe of the service running as `owner` (the leader of its process
    /// group). A TCP probe of a local port passes only when that port is held by the
    /// service's own processes: after a kill, another program may have taken the port.
    fn probe(
        &self,
        target: &ProbeTarget,
        owner: ProcId,
    ) -> impl Future<Output = Result<(), ProbeFailure>> + Send;
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
}

/// Tuning of the process controller.
#[derive(Clone, Debug)]
pub struct ProcessConfig {
    /// Where logs go: `<logs>/<project>/<world>/<service>.log`.
    pub logs_dir: PathBuf,
    /// SIGTERM → SIGKILL grace.
    pub stop_grace: Duration,
    /// Limit for one `setup` run.
    pub setup_timeout: Duration,
    /// Limit for one hook run.
    pub hook_timeout: Duration,
    /// Consecutive failures that make a world `CrashLoop`.
    pub crash_loop_after: u32,
    /// A run this long resets the failure count.
    pub stable_after: Duration,
    /// How long a process with nothing to probe must stay up to count as ready.
    pub settle: Duration,
    /// Shortest interval between readiness probes while a service starts (it grows with
    /// the time waited, up to 500 ms).
    pub probe_interval: Duration,
    /// binky's local CA certificate: given to every process as `NODE_EXTRA_CA_CERTS`
    /// (unless its env sets it), so Node clients trust the worlds' https URLs.
    pub ca_cert: Option<PathBuf>,
}

impl ProcessConfig {
    /// Defaults with logs under `logs_dir`.
    pub fn new(logs_dir: PathBuf) -> Self {
        ProcessConfig {
            logs_dir,
            stop_grace: Duration::from_secs(5),
            setup_timeout: Duration::from_secs(15 * 60),
            hook_timeout: Duration::from_secs(5 * 60),
            crash_loop_after: 3,
            stable_after: Duration::from_secs(10),
            probe_interval: Duration::from_millis(5),
            ca_cert: None,
            settle: Duration::from_millis(300),
        }
    }
}

/// Why the process controller could not converge.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The dependency graph has a cycle (admission refuses these; an old record may not).
    #[error("{0}; break the cycle in binky.toml")]
    Cycle(#[from] crate::spec::Cycle),
}

impl ReconcileError for ProcessError {
    fn reason(&self) -> &'static str {
        match self {
            ProcessError::Store(_) => "StoreFailed",
            ProcessError::Cycle(_) => "DependencyCycle",
        }
    }

    fn stalled(&self) -> bool {
        matches!(self, ProcessError::Cycle(_))
    }
}

/// The process controller.
pub struct ProcessController<S> {
    store: Store,
    sup: Arc<S>,
    config: ProcessConfig,
}

/// What one service's step concluded.
#[derive(Default)]
struct Step {
    ready: bool,
    wake: Option<Duration>,
    problem: Option<Condition>,
    waiting: Option<String>,
}

fn restart_delay(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    Duration::from_millis(500u64.saturating_mul(1u64 << exp)).min(Duration::from_secs(30))
}

fn hash_of<T: serde::Serialize>(value: &T) -> String {
    let json = serde_json::to_vec(value).unwrap_or_default();
    let digest = Sha256::digest(&json);
    digest.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

fn ms_since(t: Option<i64>) -> Duration {
    t.map(|t| Duration::from_millis((now_ms() - t).max(0) as u64))
        .unwrap_or_default()
}

fn is_ready(row: &ProcessRow) -> bool {
    (row.state == "running" && row.healthy) || row.state == "exited"
}

fn new_row(service: &str) -> ProcessRow {
    ProcessRow {
        service: service.to_owned(),
        state: "pending".into(),
        pid: None,
        start_time: None,
        spawn_token: None,
        healthy: false,
        restarts: 0,
        failures: 0,
        last_exit: None,
        last_exit_at: None,
        started_at: None,
        ready_at: None,
        next_start_at: None,
        spec_hash: None,
        setup_hash: None,
        up_generation: 0,
        failed_generation: None,
        message: String::new(),
    }
}

/// Everything a service needs to start, resolved.
struct Resolved {
    cmd: String,
    workdir: PathBuf,
    env: BTreeMap<String, String>,
    hash: String,
    missing_env_files: Vec<PathBuf>,
    /// `${env.…}` references in its cmd, setup, env or health that resolve to nothing.
    unset_env: Vec<crate::tokens::UnsetEnv>,
}

impl<S: Supervisor> ProcessController<S> {
    /// A controller over `store`, using `sup`.
    pub fn new(store: Store, sup: Arc<S>, config: ProcessConfig) -> Self {
        ProcessController { store, sup, config }
    }

    /// Where a service's (or hook's) log goes.
    pub fn log_path(logs_dir: &Path, world: &World, service: &str) -> PathBuf {
        logs_dir
            .join(&world.project)
            .join(&world.name)
            .join(format!("{service}.log"))
    }

    fn save(&self, world: WorldId, row: &ProcessRow) -> Result<(), StoreError> {
        self.store.write(owner::Process, |tx| {
            tx.execute(
                "INSERT INTO processes (world_id, service, state, pid, start_time, spawn_token,
                    healthy, restarts, failures, last_exit, last_exit_at, started_at, ready_at,
                    next_start_at, spec_hash, setup_hash, up_generation, failed_generation,
                    message, updated_at)
                 SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                    ?17, ?18, ?19, ?20
                 WHERE EXISTS (SELECT 1 FROM worlds WHERE id = ?1)
                 ON CONFLICT (world_id, service) DO UPDATE SET state = excluded.state,
                    pid = excluded.pid, start_time = excluded.start_time,
                    spawn_token = excluded.spawn_token, healthy = excluded.healthy,
                    restarts = excluded.restarts, failures = excluded.failures,
                    last_exit = excluded.last_exit, last_exit_at = excluded.last_exit_at,
                    started_at = excluded.started_at, ready_at = excluded.ready_at,
                    next_start_at = excluded.next_start_at, spec_hash = excluded.spec_hash,
                    setup_hash = excluded.setup_hash, up_generation = excluded.up_generation,
                    failed_generation = excluded.failed_generation, message = excluded.message,
                    updated_at = excluded.updated_at",
                params![
                    world,
                    row.service,
                    row.state,
                    row.pid,
                    row.start_time.map(|v| v as i64),
                    row.spawn_token,
                    row.healthy as i64,
                    row.restarts,
                    row.failures,
                    row.last_exit,
                    row.last_exit_at,
                    row.started_at,
                    row.ready_at,
                    row.next_start_at,
                    row.spec_hash,
                    row.setup_hash,
                    row.up_generation,
                    row.failed_generation,
                    row.message,
                    now_ms()
                ],
            )?;
            Ok(())
        })
    }

    fn event(&self, world: WorldId, kind: &str, msg: &str) {
        if let Err(err) = self.store.event(world, kind, msg) {
            tracing::warn!(%err, "cannot record event");
        }
    }

    fn resolve(
        &self,
        world: &World,
        layout: &Layout,
        name: &str,
        svc: &Service,
        tokens: &Tokens,
        restarts: &BTreeMap<String, i64>,
    ) -> Option<Resolved> {
        let process = svc.process()?;
        // `${worktree.path}` is where the worktree is (an adopted one may be elsewhere).
        let mut tokens = tokens.clone();
        tokens.worktree_path = Some(layout.worktree.to_string_lossy().into_owned());
        let tokens = &tokens;
        let workdir = layout.workdir(world, svc);
        let (vars, missing) = env::read_env_files(&workdir, &process.env_file);
        let mut t = tokens.clone();
        for (k, v) in &vars {
            t.env.insert(k.clone(), v.clone());
        }
        let mut env = env::service_env(world, name, svc, tokens, &vars);
        // binky's CA for Node clients, unless the service's own `env` names a file.
        if let Some(ca) = &self.config.ca_cert {
            let callers = world.env.get("NODE_EXTRA_CA_CERTS").map(String::as_str);
            env::give_node_ca(&mut env, ca, Some(process), callers);
        }
        let cmd = t.resolve(&process.cmd, name);
        // A changed health check, or a restart asked for this service alone (a watched file
        // changed), restarts it too; neither is part of the hash until it exists, so hashes
        // of existing processes stay what they were.
        let health = process
            .health
            .as_ref()
            .map(|h| format!("{:?}", h.probe))
            .map(|p| t.resolve(&p, name));
        let nonce = restarts.get(name).copied().unwrap_or(0);
        let mut unset_env: Vec<crate::tokens::UnsetEnv> = Vec::new();
        for (_, text) in process.token_fields() {
            for u in t.unset_env(text) {
                if !unset_env.iter().any(|x| x.name == u.name) {
                    unset_env.push(u);
                }
            }
        }
        let hash = match (health, nonce) {
            (None, 0) => hash_of(&(&cmd, &workdir, &env)),
            (health, nonce) => hash_of(&(&cmd, &workdir, &env, health, nonce)),
        };
        Some(Resolved {
            cmd,
            workdir,
            env,
            hash,
            missing_env_files: missing,
            unset_env,
        })
    }

    fn probe_target(
        &self,
        name: &str,
        svc: &Service,
        tokens: &Tokens,
        resolved: &Resolved,
    ) -> Option<ProbeTarget> {
        let process = svc.process()?;
        let mut t = tokens.clone();
        for (k, v) in &resolved.env {
            t.env.entry(k.clone()).or_insert_with(|| v.clone());
        }
        match &process.health {
            None => tokens
                .primary_port(name)
                .map(|p| ProbeTarget::Tcp("127.0.0.1".into(), p)),
            Some(h) => Some(match &h.probe {
                Probe::Http(url) => {
                    let url = t.resolve(url, name);
                    if url.starts_with('/') {
                        let port = tokens.primary_port(name).unwrap_or(80);
                        ProbeTarget::Http(format!("http://127.0.0.1:{port}{url}"))
                    } else {
                        ProbeTarget::Http(url)
                    }
                }
                Probe::Tcp(spec) => {
                    let spec = t.resolve(spec, name);
                    match spec.rsplit_once(':') {
                        Some((host, port)) => ProbeTarget::Tcp(
                            if host.is_empty() {
                                "127.0.0.1".into()
                            } else {
                                host.to_owned()
                            },
                            port.parse().unwrap_or(0),
                        ),
                        None => {
                            ProbeTarget::Tcp("127.0.0.1".into(), spec.trim().parse().unwrap_or(0))
                        }
                    }
                }
                Probe::Cmd(cmd) => ProbeTarget::Cmd {
                    cmd: t.resolve(cmd, name),
                    workdir: resolved.workdir.clone(),
                    env: resolved.env.clone(),
                },
            }),
        }
    }

    fn log_tail(path: &Path, lines: usize) -> String {
        log_tail(path, lines)
    }

    /// Stop `services` (names with live rows), dependents first, each level in parallel.
    async fn stop_services(
        &self,
        world: &World,
        rows: &mut BTreeMap<String, ProcessRow>,
        services: &BTreeSet<String>,
        why: &str,
    ) -> Result<(), StoreError> {
        let levels = dependency_levels(world);
        let top = levels.values().copied().max().unwrap_or(0) + 1;
        let mut by_level: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for name in services {
            by_level
                .entry(levels.get(name).copied().unwrap_or(top))
                .or_default()
                .push(name.clone());
        }
        for (_, names) in by_level.into_iter().rev() {
            let mut tasks = Vec::new();
            for name in &names {
                let Some(row) = rows.get(name) else { continue };
                if let (Some(pid), Some(start_time)) = (row.pid, row.start_time) {
                    let sup = self.sup.clone();
                    let grace = self.config.stop_grace;
                    let id = ProcId { pid, start_time };
                    if self.sup.liveness(world.id, id) == Liveness::Running {
                        tasks.push(tokio::spawn(async move { sup.stop(id, grace).await }));
                    }
                }
            }
            for t in tasks {
                let _ = t.await;
            }
            for name in &names {
                if let Some(row) = rows.get_mut(name) {
                    let had_process = row.pid.is_some();
                    row.state = "stopped".into();
                    row.pid = None;
                    row.start_time = None;
                    row.spawn_token = None;
                    row.healthy = false;
                    row.failures = 0;
                    row.next_start_at = None;
                    row.message = why.to_owned();
                    self.save(world.id, row)?;
                    if had_process {
                        self.event(world.id, "stopped", &format!("stopped {name} ({why})"));
                    }
                }
            }
        }
        Ok(())
    }

    async fn run_hook(
        &self,
        world: &World,
        layout: &Layout,
        which: &str,
        cmd: &str,
        tokens: &Tokens,
    ) {
        let mut env = world.env.clone();
        let proxy = self
            .store
            .read(store::proxy_view)
            .unwrap_or(store::ProxyView {
                http_port: None,
                https_port: None,
            });
        env.extend(env::exported(world, tokens, &proxy));
        let spec = SpawnSpec {
            world: world.id,
            service: format!("hook:{which}"),
            cmd: tokens.resolve(cmd, ""),
            workdir: layout.worktree.clone(),
            env,
            log: Self::log_path(&self.config.logs_dir, world, "hooks"),
            token: self.sup.token(world.id),
            task: true,
        };
        let started = std::time::Instant::now();
        match self.sup.run(&spec, self.config.hook_timeout).await {
            Ok(exit) if exit.success() => self.event(
                world.id,
                "hook",
                &format!("{which} hook finished in {}", secs(started.elapsed())),
            ),
            Ok(exit) => self.event(
                world.id,
                "hook_failed",
                &format!(
                    "{which} hook failed ({exit}); see `binky logs {} hooks`:\n{}",
                    world.name,
                    Self::log_tail(&spec.log, 5)
                ),
            ),
            Err(err) => self.event(world.id, "hook_failed", &format!("{which} hook: {err}")),
        }
    }

    fn layout(&self, world: &World) -> Result<Option<Layout>, StoreError> {
        Ok(self
            .store
            .read(|c| store::worktree(c, world.id))?
            .filter(|w| w.state == "ready")
            .map(|w| Layout { worktree: w.path }))
    }

    /// Stop every live process of the world (down, remove).
    async fn stop_world(&self, world: &World, why: &str) -> Result<(), StoreError> {
        let mut rows = self.rows(world.id)?;
        let live: BTreeSet<String> = rows
            .values()
            .filter(|r| r.pid.is_some() || !matches!(r.state.as_str(), "stopped"))
            .map(|r| r.service.clone())
            .collect();
        if live.is_empty() {
            return Ok(());
        }
        self.pre_down(world, &rows).await?;
        self.stop_services(world, &mut rows, &live, why).await
    }

    /// Run the `pre_down` hook when any process of the world runs.
    async fn pre_down(
        &self,
        world: &World,
        rows: &BTreeMap<String, ProcessRow>,
    ) -> Result<(), StoreError> {
        if !rows.values().any(|r| r.pid.is_some()) {
            return Ok(());
        }
        if let (Some(cmd), Some(layout)) = (world.spec.hooks.pre_down.clone(), self.layout(world)?)
        {
            let ports = self.store.read(|c| store::ports(c, world.id))?;
            let proxy = self.store.read(store::proxy_view)?;
            let slices = self.store.read(|c| store::slices(c, world.id))?;
            let tokens = env::tokens(world, &ports, &proxy, &slices);
            self.run_hook(world, &layout, "pre_down", &cmd, &tokens)
                .await;
        }
        Ok(())
    }

    /// A service's `setup` failed (`why`): it stays failed, with its output's tail, until
    /// the next `binky up`.
    #[allow(clippy::too_many_arguments)]
    fn setup_failed(
        &self,
        world: &World,
        name: &str,
        process: &crate::spec::Process,
        tokens: &Tokens,
        mut row: ProcessRow,
        why: &str,
        log: &Path,
        rows: &mut BTreeMap<String, ProcessRow>,
    ) -> Result<Step, StoreError> {
        let setup_cmd = process
            .setup
            .as_deref()
            .map(|s| tokens.resolve(s, name))
            .unwrap_or_default();
        row.state = "failed".into();
        row.pid = None;
        row.start_time = None;
        row.spawn_token = None;
        row.spec_hash = None;
        row.failed_generation = Some(world.generation);
        row.message = format!(
            "setup `{setup_cmd}` failed ({why}); fix it and run `binky up {}` again. Last output:\n{}",
            world.name,
            Self::log_tail(log, 10)
        );
        self.event(
            world.id,
            "setup_failed",
            &format!("{name}: {}", row.message),
        );
        self.save(world.id, &row)?;
        let step = Step {
            problem: Some(Condition::failed(
                CONDITION,
                "SetupFailed",
                format!("{name}: {}", row.message),
            )),
            ..Step::default()
        };
        rows.insert(name.to_owned(), row);
        Ok(step)
    }

    /// The adapter services that `setup` (its text, or the service's env it runs with)
    /// refers to and whose slice has no address yet: setup would see `${db.url}` as text.
    fn unaddressed_slices(
        world: &World,
        setup: &str,
        process: &crate::spec::Process,
        slices: &[store::SliceRow],
    ) -> Vec<String> {
        let mut refs = Tokens::referenced_services(setup);
        for v in process.env.values() {
            for r in Tokens::referenced_services(v) {
                if !refs.contains(&r) {
                    refs.push(r);
                }
            }
        }
        refs.into_iter()
            .filter(|r| {
                world
                    .spec
                    .services
                    .get(r)
                    .is_some_and(|s| s.resource().is_some())
                    && !slices
                        .iter()
                        .any(|s| &s.service == r && s.address.is_some())
            })
            .collect()
    }

    /// Record what the worktree's `git status` lists right after a setup, as setup left it:
    /// not the user's changes at `remove` (see [`crate::dirty`]). Not a git checkout, or
    /// git failing: nothing recorded, so every change counts as the user's.
    async fn record_setup_changes(&self, world: &World) {
        let wt = &world.worktree_path;
        let Ok(changed) = crate::dirty::changed_paths(wt).await else {
            return;
        };
        let prints = crate::dirty::fingerprints(wt, &changed);
        let saved = self.store.write(owner::Process, |tx| {
            for (path, print) in &prints {
                tx.execute(
                    "INSERT INTO setup_changes (world_id, path, fingerprint) VALUES (?1, ?2, ?3)
                     ON CONFLICT (world_id, path) DO UPDATE SET fingerprint = excluded.fingerprint",
                    params![world.id, path, print],
                )?;
            }
            Ok(())
        });
        if let Err(err) = saved {
            tracing::warn!(%err, world = %world.name, "cannot record what setup changed");
        }
    }

    /// A service that waits (`msg` says for what): `pending`, saved when that changed.
    fn pending(
        &self,
        world: WorldId,
        name: &str,
        mut row: ProcessRow,
        msg: String,
        rows: &mut BTreeMap<String, ProcessRow>,
    ) -> Result<Step, StoreError> {
        if row.state != "pending" || row.message != msg {
            row.state = "pending".into();
            row.message = msg.clone();
            self.save(world, &row)?;
        }
        rows.insert(name.to_owned(), row);
        Ok(Step {
            waiting: Some(format!("{name}: {msg}")),
            ..Step::default()
        })
    }

    fn rows(&self, world: WorldId) -> Result<BTreeMap<String, ProcessRow>, StoreError> {
        Ok(self
            .store
            .read(|c| store::processes(c, world))?
            .into_iter()
            .map(|r| (r.service.clone(), r))
            .collect())
    }

    /// Advance one service as far as it can go now (`restarts`: the world's per-service
    /// restart nonces).
    #[allow(clippy::too_many_arguments)]
    async fn step(
        &self,
        world: &World,
        layout: &Layout,
        name: &str,
        svc: &Service,
        tokens: &Tokens,
        restarts: &BTreeMap<String, i64>,
        rows: &mut BTreeMap<String, ProcessRow>,
    ) -> Result<Step, StoreError> {
        let Some(resolved) = self.resolve(world, layout, name, svc, tokens, restarts) else {
            return Ok(Step::default());
        };
        let Some(process) = svc.process() else {
            return Ok(Step::default());
        };
        let log = Self::log_path(&self.config.logs_dir, world, name);
        let mut row = rows.get(name).cloned().unwrap_or_else(|| new_row(name));

        // A new `binky up` means "try again now".
        if row.up_generation != world.generation {
            if matches!(row.state.as_str(), "backoff" | "failed" | "exited")
                && row.failed_generation != Some(world.generation)
            {
                row.failures = 0;
                row.state = "pending".into();
                row.next_start_at = None;
                row.failed_generation = None;
            }
            row.up_generation = world.generation;
            self.save(world.id, &row)?;
        }

        // A live process: is it still alive, still the right one, ready yet?
        if matches!(row.state.as_str(), "starting" | "running") {
            match (row.pid, row.start_time) {
                (Some(pid), Some(start_time)) => {
                    let id = ProcId { pid, start_time };
                    match self.sup.liveness(world.id, id) {
                        Liveness::Running if row.spec_hash.as_deref() != Some(&resolved.hash) => {
                            self.event(
                                world.id,
                                "restart",
                                &format!("{name}: its command, environment or health check changed, or a file it watches did; restarting"),
                            );
                            self.sup.stop(id, self.config.stop_grace).await;
                            row.state = "pending".into();
                            row.pid = None;
                            row.start_time = None;
                            row.healthy = false;
                        }
                        Liveness::Running if row.state == "running" => {
                            if row.failures > 0
                                && ms_since(row.started_at) >= self.config.stable_after
                            {
                                row.failures = 0;
                                self.save(world.id, &row)?;
                            }
                            rows.insert(name.to_owned(), row);
                            return Ok(Step {
                                ready: true,
                                ..Step::default()
                            });
                        }
                        Liveness::Running => {
                            let target = self.probe_target(name, svc, tokens, &resolved);
                            // Nothing to probe: ready once it has survived a short
                            // settle time, so a command that dies at once (a typo, a
                            // missing binary) fails `binky up` instead of passing it.
                            let settle =
                                self.config.settle.saturating_sub(ms_since(row.started_at));
                            if target.is_none() && !settle.is_zero() {
                                rows.insert(name.to_owned(), row);
                                return Ok(Step {
                                    wake: Some(settle),
                                    waiting: Some(format!("{name}: starting")),
                                    ..Step::default()
                                });
                            }
                            let result = match &target {
                                Some(t) => self.sup.probe(t, id).await,
                                None => Ok(()),
                            };
                            let mut step = Step::default();
                            match result {
                                Ok(()) => {
                                    row.state = "running".into();
                                    row.healthy = true;
                                    row.ready_at = Some(now_ms());
                                    row.message = String::new();
                                    self.event(
                                        world.id,
                                        "ready",
                                        &format!(
                                            "{name} ready in {}",
                                            secs(ms_since(row.started_at))
                                        ),
                                    );
                                    step.ready = true;
                                }
                                Err(failure) => {
                                    let timeout = process
                                        .health
                                        .as_ref()
                                        .map(|h| h.timeout())
                                        .unwrap_or(crate::spec::DEFAULT_HEALTH_TIMEOUT);
                                    let waited = ms_since(row.started_at);
                                    let what = match (&target, failure) {
                                        // Someone answers, but not this service: the
                                        // probe's own words say who.
                                        (_, ProbeFailure::Foreign(who)) => who,
                                        (
                                            Some(ProbeTarget::Tcp(h, p)),
                                            ProbeFailure::NotReady(why),
                                        ) if process.health.is_none() => {
                                            format!("no connection on {h}:{p} yet ({why}); does its cmd listen on ${{self.port}} / $PORT?")
                                        }
                                        (_, ProbeFailure::NotReady(why)) => {
                                            format!("health check failing: {why}")
                                        }
                                    };
                                    // Whole seconds: the row is rewritten once a second, not
                                    // on every probe.
                                    row.message =
                                        format!("not ready after {}s: {what}", waited.as_secs());
                                    if waited > timeout {
                                        step.problem = Some(Condition::failed(
                                            CONDITION,
                                            "HealthTimeout",
                                            format!(
                                                "{name} is not ready within its health timeout of {}: {what}. Last output:\n{}",
                                                secs(timeout),
                                                Self::log_tail(&log, 5)
                                            ),
                                        ));
                                        step.wake = Some(Duration::from_secs(1));
                                    } else {
                                        // Probe often at first (most services are up in
                                        // tens of ms), then less and less.
                                        step.wake = Some((waited / 10).clamp(
                                            self.config.probe_interval,
                                            Duration::from_millis(500),
                                        ));
                                    }
                                    step.waiting = Some(format!("{name}: starting"));
                                }
                            }
                            if step.ready || rows.get(name).is_none_or(|r| r.message != row.message)
                            {
                                self.save(world.id, &row)?;
                            }
                            rows.insert(name.to_owned(), row);
                            return Ok(step);
                        }
                        Liveness::Exited(exit) => {
                            self.on_exit(world, name, process.restart, &mut row, exit, &log)?;
                        }
                    }
                }
                // Started by a daemon that died before recording the pid: the startup sweep
                // stopped it; start again.
                _ => {
                    row.state = "pending".into();
                }
            }
        } else if row.state == "setup" {
            // `setup` runs as a supervised task (so `binky down` stops it at once and other
            // services go on meanwhile); while it runs, `spec_hash` holds the hash of the
            // setup command it runs.
            match (row.pid, row.start_time) {
                (Some(pid), Some(start_time)) => {
                    let id = ProcId { pid, start_time };
                    match self.sup.liveness(world.id, id) {
                        Liveness::Running => {
                            let ran = ms_since(row.started_at);
                            if ran <= self.config.setup_timeout {
                                rows.insert(name.to_owned(), row);
                                return Ok(Step {
                                    // Its exit nudges the world; this is the time limit.
                                    wake: Some(self.config.setup_timeout - ran),
                                    waiting: Some(format!("{name}: running setup")),
                                    ..Step::default()
                                });
                            }
                            self.sup.stop(id, self.config.stop_grace).await;
                            let why =
                                format!("it took longer than {}", secs(self.config.setup_timeout));
                            return self
                                .setup_failed(world, name, process, tokens, row, &why, &log, rows);
                        }
                        Liveness::Exited(exit) => {
                            row.pid = None;
                            row.start_time = None;
                            row.spawn_token = None;
                            if exit.success() {
                                self.record_setup_changes(world).await;
                                row.setup_hash = row.spec_hash.take();
                                row.state = "pending".into();
                                self.event(
                                    world.id,
                                    "setup",
                                    &format!(
                                        "{name}: setup finished in {}",
                                        secs(ms_since(row.started_at))
                                    ),
                                );
                                self.save(world.id, &row)?;
                            } else if exit.code.is_none() && exit.signal.is_none() {
                                // Adopted from a daemon that died meanwhile: how it ended
                                // is unknown, so it runs again.
                                row.state = "pending".into();
                            } else {
                                return self.setup_failed(
                                    world,
                                    name,
                                    process,
                                    tokens,
                                    row,
                                    &exit.to_string(),
                                    &log,
                                    rows,
                                );
                            }
                        }
                    }
                }
                // A daemon died before recording its pid (the startup sweep stopped it).
                _ => row.state = "pending".into(),
            }
        }

        match row.state.as_str() {
            "backoff" => {
                let due = row.next_start_at.unwrap_or(0);
                if due > now_ms() {
                    let step = self.crash_loop_step(world, name, &row, &log, due);
                    rows.insert(name.to_owned(), row);
                    return Ok(step);
                }
            }
            "failed"
                if row.failed_generation == Some(world.generation)
                    || process.restart == Restart::Never =>
            {
                let step = Step {
                    problem: Some(Condition::failed(
                        CONDITION,
                        if row.failed_generation.is_some() {
                            "SetupFailed"
                        } else {
                            "ServiceFailed"
                        },
                        format!("{name}: {}", row.message),
                    )),
                    ..Step::default()
                };
                rows.insert(name.to_owned(), row);
                return Ok(step);
            }
            "exited" => {
                rows.insert(name.to_owned(), row);
                return Ok(Step {
                    ready: true,
                    ..Step::default()
                });
            }
            _ => {}
        }

        // An `${env.NAME}` with nothing to give never reaches a process as its own text.
        if !resolved.unset_env.is_empty() {
            let names: Vec<String> = resolved
                .unset_env
                .iter()
                .map(|u| match &u.message {
                    Some(m) => format!("{} ({m})", u.name),
                    None => u.name.clone(),
                })
                .collect();
            let first = &resolved.unset_env[0].name;
            // Not started, and looked at again at every pass (an env_file may gain it).
            row.state = "pending".into();
            row.message = format!(
                "it uses ${{env.{first}}}, but {} not set: set it in the environment of `binky up` (or the service's env_file) and run `binky up {}` again, or give a default: ${{env.{first}:-value}}",
                if names.len() == 1 {
                    format!("{} is", names[0])
                } else {
                    format!("{} are", names.join(", "))
                },
                world.name
            );
            if rows.get(name).is_none_or(|r| r.message != row.message) {
                self.event(world.id, "env_unset", &format!("{name}: {}", row.message));
                self.save(world.id, &row)?;
            }
            let step = Step {
                problem: Some(Condition::failed(
                    CONDITION,
                    "EnvUnset",
                    format!("{name}: {}", row.message),
                )),
                ..Step::default()
            };
            rows.insert(name.to_owned(), row);
            return Ok(step);
        }

        let slices = self.store.read(|c| store::slices(c, world.id))?;

        // `setup` waits for nothing but the worktree (and the addresses its own text refers
        // to): a frontend's `npm install` runs while the database is still being made.
        if let Some(setup) = &process.setup {
            let setup_cmd = tokens.resolve(setup, name);
            let setup_hash = hash_of(&(&setup_cmd, &resolved.workdir));
            if row.setup_hash.as_deref() != Some(&setup_hash) {
                let unaddressed = Self::unaddressed_slices(world, setup, process, &slices);
                if !unaddressed.is_empty() {
                    let msg = format!("setup waits for the address of {}", unaddressed.join(", "));
                    return self.pending(world.id, name, row, msg, rows);
                }
                // Recorded before the spawn, as a service's start is (see below).
                let token = self.sup.token(world.id);
                row.state = "setup".into();
                row.message = "running setup".into();
                row.spawn_token = Some(token.clone());
                row.pid = None;
                row.start_time = None;
                row.healthy = false;
                row.spec_hash = Some(setup_hash);
                row.started_at = Some(now_ms());
                self.save(world.id, &row)?;
                self.event(
                    world.id,
                    "setup",
                    &format!("{name}: running setup `{setup_cmd}`"),
                );
                let spec = SpawnSpec {
                    world: world.id,
                    service: name.to_owned(),
                    cmd: setup_cmd.clone(),
                    workdir: resolved.workdir.clone(),
                    env: resolved.env.clone(),
                    log: log.clone(),
                    token,
                    task: true,
                };
                return match self.sup.spawn(&spec).await {
                    Ok(id) => {
                        row.pid = Some(id.pid);
                        row.start_time = Some(id.start_time);
                        self.save(world.id, &row)?;
                        rows.insert(name.to_owned(), row);
                        Ok(Step {
                            wake: Some(self.config.setup_timeout),
                            waiting: Some(format!("{name}: running setup")),
                            ..Step::default()
                        })
                    }
                    Err(err) => self.setup_failed(
                        world,
                        name,
                        process,
                        tokens,
                        row,
                        &err.to_string(),
                        &log,
                        rows,
                    ),
                };
            }
        }

        // Not running: start it once its dependencies are ready.
        // A process dependency is ready when it runs and passed its check; an adapter
        // dependency when its slice is provisioned, migrated and seeded.
        let slice_ready: BTreeSet<String> = slices
            .into_iter()
            .filter(|s| s.state == "ready")
            .map(|s| s.service)
            .collect();
        let waiting_for: Vec<&str> = svc
            .depends_on
            .iter()
            .filter(|d| match world.spec.services.get(*d) {
                Some(s) if s.process().is_some() => !rows.get(*d).is_some_and(is_ready),
                Some(_) => !slice_ready.contains(*d),
                None => false,
            })
            .map(String::as_str)
            .collect();
        if !waiting_for.is_empty() {
            let msg = format!("waiting for {}", waiting_for.join(", "));
            return self.pending(world.id, name, row, msg, rows);
        }

        for path in &resolved.missing_env_files {
            self.event(world.id, "env_file_missing", &format!("{name}: env_file {} not found (ignored files are not copied into new worktrees)", path.display()));
        }

        // Record the intent (with the token) before spawning: if the daemon dies in between,
        // the next one finds the process by its token.
        let token = self.sup.token(world.id);
        row.state = "starting".into();
        row.spawn_token = Some(token.clone());
        row.pid = None;
        row.start_time = None;
        row.healthy = false;
        row.spec_hash = Some(resolved.hash.clone());
        row.message = "starting".into();
        row.started_at = Some(now_ms());
        self.save(world.id, &row)?;
        let spec = SpawnSpec {
            world: world.id,
            service: name.to_owned(),
            cmd: resolved.cmd.clone(),
            workdir: resolved.workdir.clone(),
            env: resolved.env.clone(),
            log: log.clone(),
            token,
            task: false,
        };
        let mut step = Step::default();
        match self.sup.spawn(&spec).await {
            Ok(id) => {
                row.pid = Some(id.pid);
                row.start_time = Some(id.start_time);
                row.started_at = Some(now_ms());
                if row.last_exit.is_some() {
                    row.restarts += 1;
                }
                self.event(
                    world.id,
                    "started",
                    &format!("started {name} (pid {}): {}", id.pid, resolved.cmd),
                );
                step.wake = Some(Duration::ZERO);
                step.waiting = Some(format!("{name}: starting"));
            }
            Err(err) => {
                let exit = Exit {
                    code: Some(127),
                    signal: None,
                };
                // It never ran: the time spent trying to start it (a slow secret_command)
                // is not a run that proves it stable, so failures keep counting.
                row.started_at = Some(now_ms());
                self.on_exit(world, name, process.restart, &mut row, exit, &log)?;
                // It never ran: say why instead of a made-up exit code.
                row.last_exit = Some(format!("not started: {err}"));
                row.message = format!("{err}; {}", row.message);
                if row.state == "backoff" {
                    step = self.crash_loop_step(
                        world,
                        name,
                        &row,
                        &log,
                        row.next_start_at.unwrap_or(0),
                    );
                } else {
                    step.problem = Some(Condition::failed(
                        CONDITION,
                        "SpawnFailed",
                        format!("{name}: {err}"),
                    ));
                }
            }
        }
        self.save(world.id, &row)?;
        rows.insert(name.to_owned(), row);
        Ok(step)
    }

    fn crash_loop_step(
        &self,
        world: &World,
        name: &str,
        row: &ProcessRow,
        log: &Path,
        due: i64,
    ) -> Step {
        let wait = Duration::from_millis((due - now_ms()).max(0) as u64);
        let mut step = Step {
            wake: Some(wait),
            waiting: Some(format!("{name}: restarting in {}", secs(wait))),
            ..Step::default()
        };
        if row.failures >= self.config.crash_loop_after {
            step.problem = Some(Condition::failed(
                CONDITION,
                "CrashLoop",
                format!(
                    "{name} keeps exiting ({}, {} times in a row); binky retries in {} (see `binky logs {} {name}`). Last output:\n{}",
                    row.last_exit.as_deref().unwrap_or("?"),
                    row.failures,
                    secs(wait),
                    world.name,
                    match Self::log_tail(log, 5) {
                        t if t.trim().is_empty() => "(none)".to_owned(),
                        t => t,
                    }
                ),
            ));
        }
        step
    }

    fn on_exit(
        &self,
        world: &World,
        name: &str,
        policy: Restart,
        row: &mut ProcessRow,
        exit: Exit,
        _log: &Path,
    ) -> Result<(), StoreError> {
        let ran = ms_since(row.started_at);
        if ran >= self.config.stable_after {
            row.failures = 0;
        }
        row.last_exit = Some(exit.to_string());
        row.last_exit_at = Some(now_ms());
        row.pid = None;
        row.start_time = None;
        row.healthy = false;
        row.spawn_token = None;
        let restart = match policy {
            Restart::Always => true,
            Restart::OnFailure => !exit.success(),
            Restart::Never => false,
        };
        if restart {
            row.failures += 1;
            let delay = restart_delay(row.failures);
            row.state = "backoff".into();
            row.next_start_at = Some(now_ms() + delay.as_millis() as i64);
            row.message = format!("{exit} after {}; restarting in {}", secs(ran), secs(delay));
        } else if exit.success() {
            row.state = "exited".into();
            row.message = format!("completed ({exit}) after {}", secs(ran));
        } else {
            row.failures += 1;
            row.state = "failed".into();
            row.message = format!("{exit} after {} (restart = {})", secs(ran), policy.as_str());
        }
        self.event(world.id, "exited", &format!("{name}: {}", row.message));
        self.save(world.id, row)
    }
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

/// Level of each service: 0 without dependencies, else one more than its deepest one.
fn dependency_levels(world: &World) -> HashMap<String, usize> {
    let mut levels = HashMap::new();
    if let Ok(order) = world.spec.start_order() {
        for name in order {
            let level = world.spec.services[&name]
                .depends_on
                .iter()
                .filter_map(|d| levels.get(d))
                .map(|l| l + 1)
                .max()
                .unwrap_or(0);
            levels.insert(name, level);
        }
    }
    levels
}

impl<S: Supervisor> Controller for ProcessController<S> {
    type Error = ProcessError;

    fn kind(&self) -> Kind {
        Kind::Process
    }

    /// Stop processes that carry this home's spawn token but are not recorded: a daemon
    /// died between starting them and writing their pid down.
    async fn startup(&self) {
        let rows = match self.store.read(store::all_processes) {
            Ok(rows) => rows,
            Err(err) => {
                tracing::warn!(%err, "orphan sweep: cannot read processes");
                return;
            }
        };
        let marked = self.sup.marked();
        let start_of: HashMap<u32, u64> = marked.iter().map(|m| (m.pid, m.start_time)).collect();
        let mut orphan_groups = BTreeSet::new();
        for m in &marked {
            let leader_recorded = rows.iter().any(|(_, r)| {
                r.pid == Some(m.pgid)
                    && r.start_time.is_some()
                    && r.start_time == start_of.get(&m.pgid).copied()
            });
            if !leader_recorded {
                orphan_groups.insert((m.pgid, m.token.clone()));
            }
        }
        for (pgid, token) in orphan_groups {
            tracing::info!(pgid, %token, "stopping an orphaned process group");
            self.sup.kill_group(pgid, self.config.stop_grace).await;
            if let Some(world) = token
                .split('.')
                .nth(1)
                .and_then(|w| w.parse::<WorldId>().ok())
            {
                self.event(world, "orphan", &format!("stopped orphaned process group {pgid} (started by a daemon that died before recording it)"));
            }
        }
    }

    async fn apply(&self, world: &World) -> Result<Applied, ProcessError> {
        if world.desired == DesiredState::Stopped {
            self.stop_world(world, "binky down").await?;
            return Ok(Applied {
                action: Action::AwaitChange,
                conditions: vec![Condition::waiting(
                    CONDITION,
                    "Stopped",
                    "stopped by `binky down`; `binky up` starts it again",
                )],
            });
        }

        // The admission gate: nothing of a held world starts.

        if let Some(held) = crate::gate::hold(&self.store, world, CONDITION)? {
            return Ok(held);
        }
        // Gate: the worktree and the ports must be there for this generation.
        let gens = self
            .store
            .read(|c| store::observed_generations(c, world.id))?;
        let conds = self.store.read(|c| store::conditions(c, world.id))?;
        for (kind, what) in [(Kind::Worktree, "worktree"), (Kind::Port, "ports")] {
            let observed = gens.get(kind.name()).copied().unwrap_or(0) >= world.generation;
            let c = conds.iter().find(|c| c.type_ == kind.condition());
            let ok = observed && c.is_some_and(|c| c.status == CondStatus::True);
            if !ok {
                let detail = c
                    .filter(|c| c.status == CondStatus::False)
                    .map(|c| format!(": {}", c.message))
                    .unwrap_or_default();
                return Ok(Applied {
                    action: Action::AwaitChange,
                    conditions: vec![Condition::waiting(
                        CONDITION,
                        "Waiting",
                        format!("waiting for the {what}{detail}"),
                    )],
                });
            }
        }
        let Some(layout) = self.layout(world)? else {
            return Ok(Applied {
                action: Action::AwaitChange,
                conditions: vec![Condition::waiting(
                    CONDITION,
                    "Waiting",
                    "waiting for the worktree",
                )],
            });
        };

        // `binky reload`: stop everything under the old nonce first.
        let run = self
            .store
            .read(|c| store::world_run(c, world.id))?
            .unwrap_or_default();
        if run.restart_nonce != world.restart_nonce {
            let mut rows = self.rows(world.id)?;
            let live: BTreeSet<String> = rows.keys().cloned().collect();
            self.pre_down(world, &rows).await?;
            self.stop_services(world, &mut rows, &live, "reload")
                .await?;
            for row in rows.values_mut() {
                row.state = "pending".into();
                row.restarts = 0;
                row.last_exit = None;
                self.save(world.id, row)?;
            }
            self.store.write(owner::Process, |tx| {
                tx.execute(
                    "INSERT INTO world_runs (world_id, restart_nonce, updated_at) VALUES (?1, ?2, ?3)
                     ON CONFLICT (world_id) DO UPDATE SET restart_nonce = excluded.restart_nonce,
                        updated_at = excluded.updated_at",
                    params![world.id, world.restart_nonce, now_ms()],
                )?;
                Ok(())
            })?;
        }

        let order = world.spec.start_order()?;
        let selected: BTreeSet<String> = world
            .spec
            .selected(world.group.as_deref())
            .into_iter()
            .filter(|n| world.spec.services[n].process().is_some())
            .collect();

        // Services no longer wanted: stop them; forget the ones gone from the spec.
        let mut rows = self.rows(world.id)?;
        let unwanted: BTreeSet<String> = rows
            .values()
            .filter(|r| !selected.contains(&r.service) && r.state != "stopped")
            .map(|r| r.service.clone())
            .collect();
        if !unwanted.is_empty() {
            self.stop_services(world, &mut rows, &unwanted, "not in this world's services")
                .await?;
        }
        let gone: Vec<String> = rows
            .keys()
            .filter(|n| !world.spec.services.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            rows.remove(&name);
            self.store.write(owner::Process, |tx| {
                tx.execute(
                    "DELETE FROM processes WHERE world_id = ?1 AND service = ?2",
                    params![world.id, name],
                )?;
                Ok(())
            })?;
        }

        let ports = self.store.read(|c| store::ports(c, world.id))?;
        let proxy = self.store.read(store::proxy_view)?;
        let slices = self.store.read(|c| store::slices(c, world.id))?;
        let tokens = env::tokens(world, &ports, &proxy, &slices);
        // Per-service restart nonces: one read per reconcile, not one per service (an
        // unreadable table counts as no restarts, as it always has).
        let restarts = self
            .store
            .read(|c| store::service_restarts(c, world.id))
            .unwrap_or_else(|err| {
                tracing::warn!(%err, world = %world.name, "cannot read service restarts");
                BTreeMap::new()
            });
        let mut ready = 0usize;
        let mut wake: Option<Duration> = None;
        let mut problem: Option<Condition> = None;
        let mut waiting: Vec<String> = Vec::new();
        for name in order.iter().filter(|n| selected.contains(*n)) {
            let svc = &world.spec.services[name];
            let step = self
                .step(world, &layout, name, svc, &tokens, &restarts, &mut rows)
                .await?;
            if step.ready {
                ready += 1;
            }
            if let Some(w) = step.wake {
                wake = Some(wake.map_or(w, |x| x.min(w)));
            }
            if problem.is_none() {
                problem = step.problem;
            }
            waiting.extend(step.waiting);
        }

        let condition = if let Some(p) = problem {
            p
        } else if ready == selected.len() {
            // Everything is up: run post_up once per `binky up`/`reload`.
            if let Some(cmd) = &world.spec.hooks.post_up {
                let key = format!("{}:{}", world.last_used_at, world.restart_nonce);
                if run.post_up_key.as_deref() != Some(&key) {
                    self.store.write(owner::Process, |tx| {
                        tx.execute(
                            "INSERT INTO world_runs (world_id, restart_nonce, post_up_key, updated_at)
                             VALUES (?1, ?2, ?3, ?4)
                             ON CONFLICT (world_id) DO UPDATE SET post_up_key = excluded.post_up_key,
                                updated_at = excluded.updated_at",
                            params![world.id, world.restart_nonce, key, now_ms()],
                        )?;
                        Ok(())
                    })?;
                    self.run_hook(world, &layout, "post_up", cmd, &tokens).await;
                }
            }
            Condition::ok(CONDITION, "Ready", format!("{ready} service(s) ready"))
        } else {
            Condition::waiting(CONDITION, "Starting", waiting.join("; "))
        };
        Ok(Applied {
            action: wake.map_or(Action::AwaitChange, Action::Requeue),
            conditions: vec![condition],
        })
    }

    async fn cleanup(&self, world: &World) -> Result<Cleanup, ProcessError> {
        self.stop_world(world, "binky remove").await?;
        // The world's logs go with it (its events stay: `binky events NAME`).
        let dir = self.config.logs_dir.join(&world.project).join(&world.name);
        if let Err(err) = std::fs::remove_dir_all(&dir) {
            if err.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(dir = %dir.display(), %err, "cannot remove the world's logs");
            }
        }
        // `feat/login` logs under `feat/`: empty parents up to the project's go too.
        let mut parent = dir.parent();
        while let Some(p) =
            parent.filter(|p| p.starts_with(&self.config.logs_dir) && *p != self.config.logs_dir)
        {
            if std::fs::remove_dir(p).is_err() {
                break;
            }
            parent = p.parent();
        }
        self.store.write(owner::Process, |tx| {
            tx.execute("DELETE FROM processes WHERE world_id = ?1", [world.id])?;
            tx.execute("DELETE FROM world_runs WHERE world_id = ?1", [world.id])?;
            Ok(())
        })?;
        Ok(Cleanup::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_delays_double_from_half_a_second_to_thirty() {
        let d: Vec<u64> = (1..=9)
            .map(|n| restart_delay(n).as_millis() as u64)
            .collect();
        assert_eq!(
            d,
            vec![500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
    }
}
