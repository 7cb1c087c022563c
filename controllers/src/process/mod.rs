//! The process controller: each process service of a running world runs, in dependency
//! order, once its dependencies are ready.
//!
//! # Guarantees
//! - Nothing starts before the world's worktree exists and its ports are allocated for the
//!   current generation.
//! - A service starts only when every service it `depends_on` is ready (healthy, or exited
//!   successfully for a one-shot; every replica of a replicated one). `setup` runs once per
//!   world before the first start (again only when its resolved text changes), without
//!   waiting for dependencies: only for the addresses of the slices its text or env uses.
//! - Each replica of a service (`replicas = N`) is a process of its own, with its own ports,
//!   log, health checks and restarts (see [`crate::replica`]); `setup` runs once, in
//!   replica 0.
//! - A shared service (`shared = true`) runs in its project's shared world while a world
//!   that selects it runs; a world waits for the shared services it selects (see
//!   `shared.rs`).
//! - Each process runs `sh -c CMD` in its own process group, with its output appended to
//!   its log file. Its `(pid, start time)` is recorded, so a restarted daemon adopts it
//!   instead of starting a second copy; a process that a daemon started but died before
//!   recording (it carries a spawn token in its environment) is found and stopped.
//! - Exits follow the restart policy with capped exponential backoff (0.5 s doubling to
//!   30 s; the count resets after 10 s of running). Three failures in a row make the world
//!   `CrashLoop` (binky keeps retrying; `binky up` stops waiting and shows the log tail).
//! - Stopping sends the service's `stop_signal` (SIGTERM) to its group, then SIGKILL once
//!   its `stop_grace_period` (the daemon's grace, 5 s) has passed with anything of the group
//!   left. `down`, `remove` and `reload` signal every service at once, except that a service
//!   with `stop_after_dependents` waits until the services depending on it are gone.
//! - A service without `health` may take as long to listen on its port as the command that
//!   started it waits (`binky up --timeout`, recorded with the world).

mod machine;
pub(crate) mod resources;
mod shared;
mod spawn;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::env::{self, Layout};
use crate::env::{Snapshot, WorldCommand};
use crate::registry::Kind;
use crate::runtime::{Action, Applied, Cleanup, Condition, Controller, ReconcileError};
use crate::store::WorktreeState;
use crate::store::{
    self, owner, write, CondStatus, DesiredState, ProcState, ProcessRow, Store, StoreError, World,
    WorldId, WorldRunRow,
};
use machine::secs;

pub use crate::limits::{Mechanism, ResourceLimits};
use crate::supervisor::{log_tail, Liveness, ProcId, SpawnSpec, StopHow, Stopped, Supervisor};
pub use resources::SAMPLE_EVERY;

/// The condition this controller reports.
const CONDITION: &str = Kind::Process.condition();

/// Tuning of the process controller.
#[derive(Clone, Debug)]
pub struct ProcessConfig {
    /// Where logs go: `<logs>/<project>/<world>/<service>.log`.
    pub logs_dir: PathBuf,
    /// How long a stopped service gets before SIGKILL unless its `stop_grace_period` says.
    pub stop_grace: Duration,
    /// How long a service without `health` may take to listen on its port when its world
    /// records no command's `--timeout`.
    pub port_wait: Duration,
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
            port_wait: crate::spec::DEFAULT_PORT_WAIT,
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
    /// When each running service's health was last checked, and how many checks in a row
    /// failed (kept in memory: a new daemon starts counting again).
    checks: std::sync::Mutex<HashMap<(WorldId, String), machine::Check>>,
    /// When each service was last restarted for failing its health checks (the restart
    /// budget: `HEALTH_RESTARTS` in `HEALTH_RESTART_WINDOW`, in `machine/health.rs`).
    health_restarts: std::sync::Mutex<HashMap<(WorldId, String), Vec<std::time::Instant>>>,
    /// Nudges a project's shared world and the worlds that use it (see `shared.rs`).
    trigger: Option<crate::runtime::Trigger>,
    /// What each world last told its shared world: the services it wants running, at
    /// which generation of the shared world.
    told: std::sync::Mutex<HashMap<WorldId, (BTreeSet<String>, i64)>>,
    /// What each shared world last told its users of its services' readiness.
    digests: std::sync::Mutex<HashMap<WorldId, String>>,
    /// The runs the sampler found over their memory limit where binky enforces it by
    /// polling (`resources.rs`), until their step stops them and their end is counted.
    over_memory: std::sync::Mutex<HashMap<(WorldId, String), resources::OverMemory>>,
}

impl<S: Supervisor> ProcessController<S> {
    /// A controller over `store`, using `sup`.
    pub fn new(store: Store, sup: Arc<S>, config: ProcessConfig) -> Self {
        ProcessController {
            store,
            sup,
            config,
            checks: std::sync::Mutex::default(),
            health_restarts: std::sync::Mutex::default(),
            trigger: None,
            told: std::sync::Mutex::default(),
            digests: std::sync::Mutex::default(),
            over_memory: std::sync::Mutex::default(),
        }
    }

    /// Nudge, through `trigger` (the daemon's runtime), a project's shared world when a
    /// world's use of it changes, and the worlds that use it when its services do.
    pub fn with_trigger(mut self, trigger: crate::runtime::Trigger) -> Self {
        self.trigger = Some(trigger);
        self
    }

    fn save(&self, world: WorldId, row: &ProcessRow) -> Result<(), StoreError> {
        self.store
            .write(owner::Process, |tx| write::process::save(tx, world, row))
    }

    fn event(&self, world: WorldId, kind: &str, msg: &str) {
        if let Err(err) = self.store.event(world, kind, msg) {
            tracing::warn!(%err, "cannot record event");
        }
    }

    /// How the service `process` (none: a command that is no service's, a setup) is
    /// stopped: its `stop_signal`, and its `stop_grace_period` or the daemon's grace.
    pub(crate) fn stop_how(&self, process: Option<&crate::spec::Process>) -> StopHow {
        let stop = process.map(|p| &p.stop);
        StopHow {
            signal: stop
                .map_or(crate::spec::DEFAULT_STOP_SIGNAL, |s| s.signal())
                .to_owned(),
            grace: stop
                .and_then(|s| s.grace_ms)
                .map_or(self.config.stop_grace, Duration::from_millis),
        }
    }

    /// How long a service of `world` without `health` may take to listen on its port: as
    /// long as the command that last started the world waits (`--timeout`).
    pub(crate) fn port_wait(&self, world: &World) -> Duration {
        world
            .wait_ms
            .map_or(self.config.port_wait, Duration::from_millis)
    }

    /// Stop `services` (instance names with rows): every one at once, except that a service
    /// with `stop_after_dependents` is signalled only once the instances of the services
    /// that depend on it (directly or through others) among them have stopped. A setup
    /// still running is stopped as a command (SIGTERM), whatever its service says.
    async fn stop_services(
        &self,
        world: &World,
        rows: &mut BTreeMap<String, ProcessRow>,
        services: &BTreeSet<String>,
        why: &str,
    ) -> Result<(), StoreError> {
        let waits = stop_waits(world, services);
        let mut pending: BTreeSet<String> = services.clone();
        let mut stopping: tokio::task::JoinSet<(Stopped, StopHow)> = tokio::task::JoinSet::new();
        // The instances being stopped, by the task stopping them.
        let mut in_flight: HashMap<tokio::task::Id, String> = HashMap::new();
        loop {
            // Everything whose dependents are gone is signalled now.
            let free: Vec<String> = pending
                .iter()
                .filter(|n| {
                    waits.get(*n).is_none_or(|w| {
                        w.iter()
                            .all(|d| !pending.contains(d) && !in_flight.values().any(|f| f == d))
                    })
                })
                .cloned()
                .collect();
            // Never stuck: the graph has no cycle, but a stop must never wait forever.
            let free = if free.is_empty() && in_flight.is_empty() {
                pending.iter().cloned().collect()
            } else {
                free
            };
            for name in free {
                pending.remove(&name);
                let Some(row) = rows.get(&name) else { continue };
                let live = match (row.pid, row.start_time) {
                    (Some(pid), Some(start_time)) => {
                        let id = ProcId { pid, start_time };
                        (self.sup.liveness(world.id, id) == Liveness::Running).then_some(id)
                    }
                    _ => None,
                };
                match live {
                    Some(id) => {
                        let process = (row.state != ProcState::Setup)
                            .then(|| {
                                world
                                    .spec
                                    .services
                                    .get(crate::replica::service_of(&name))
                                    .and_then(|s| s.process())
                            })
                            .flatten();
                        let how = self.stop_how(process);
                        let sup = self.sup.clone();
                        let task =
                            stopping.spawn(async move { (sup.stop(id, how.clone()).await, how) });
                        in_flight.insert(task.id(), name);
                    }
                    None => self.stopped(world, rows, &name, why, None)?,
                }
            }
            match stopping.join_next_with_id().await {
                Some(Ok((task, (outcome, how)))) => {
                    if let Some(name) = in_flight.remove(&task) {
                        self.stopped(world, rows, &name, why, Some((outcome, &how)))?;
                    }
                }
                // A stop that panicked: recorded as stopped all the same (its cgroup is
                // released, which ends what is left in it where binky has cgroups).
                Some(Err(err)) => {
                    tracing::warn!(%err, world = %world.name, "a stop failed");
                    if let Some(name) = in_flight.remove(&err.id()) {
                        self.stopped(world, rows, &name, why, None)?;
                    }
                }
                None if pending.is_empty() => break,
                None => {}
            }
        }
        Ok(())
    }

    /// `name` has stopped (`outcome`: how, asked how; none: it was not running): its row
    /// says so, and an event says how when it had a process.
    fn stopped(
        &self,
        world: &World,
        rows: &mut BTreeMap<String, ProcessRow>,
        name: &str,
        why: &str,
        outcome: Option<(Stopped, &StopHow)>,
    ) -> Result<(), StoreError> {
        self.release_cgroup(world.id, name);
        let Some(row) = rows.get_mut(name) else {
            return Ok(());
        };
        let had_process = row.pid.is_some();
        row.state = ProcState::Stopped;
        row.pid = None;
        row.start_time = None;
        row.spawn_token = None;
        row.healthy = false;
        row.failures = 0;
        row.next_start_at = None;
        row.message = why.to_owned();
        self.save(world.id, row)?;
        if had_process {
            let how = match outcome {
                Some((Stopped::Exited(after), how)) => {
                    format!(": it exited {} after {}", secs(after), how.signal)
                }
                Some((Stopped::Killed, how)) => format!(
                    ": killed (SIGKILL), still running {} after {} (its stop_grace_period; a stop_signal it obeys at once, such as Celery's SIGQUIT, stops it sooner)",
                    secs(how.grace),
                    how.signal
                ),
                Some((Stopped::Gone, _)) | None => String::new(),
            };
            self.event(world.id, "stopped", &format!("stopped {name} ({why}){how}"));
        }
        Ok(())
    }

    async fn run_hook(
        &self,
        world: &World,
        layout: &Layout,
        which: &str,
        cmd: &str,
        snap: &Snapshot,
    ) {
        let ca = self.config.ca_cert.as_deref();
        let command = WorldCommand::Hook(which);
        let Ok(ce) = env::world_command_env(world, layout, snap, command, ca) else {
            return;
        };
        let spec = SpawnSpec {
            world: world.id,
            service: command.name(),
            cmd: ce.tokens.resolve(cmd, ""),
            workdir: ce.dir,
            env: ce.vars,
            log: crate::supervisor::log_path(&self.config.logs_dir, world, "hooks"),
            token: self.sup.token(world.id),
            task: true,
            nice: crate::settings::nice(&self.store),
            limits: Default::default(),
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
                    log_tail(&spec.log, 5)
                ),
            ),
            Err(err) => self.event(world.id, "hook_failed", &format!("{which} hook: {err}")),
        }
    }

    fn layout(&self, world: &World) -> Result<Option<Layout>, StoreError> {
        Ok(self
            .store
            .read(|c| store::worktree(c, world.id))?
            .filter(|w| w.state == WorktreeState::Ready)
            .map(|w| Layout { worktree: w.path }))
    }

    /// Stop every live process of the world (down, remove).
    async fn stop_world(&self, world: &World, why: &str) -> Result<(), StoreError> {
        let mut rows = self.rows(world.id)?;
        let live: BTreeSet<String> = rows
            .values()
            .filter(|r| r.pid.is_some() || r.state != ProcState::Stopped)
            .map(|r| r.service.clone())
            .collect();
        if !live.is_empty() {
            self.pre_down(world, &rows).await?;
            self.stop_services(world, &mut rows, &live, why).await?;
        }
        // Its cgroups go with its processes (also those a previous daemon left).
        self.release_world_cgroups(world.id);
        Ok(())
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
            let snap = env::Snapshot::read(&self.store, world)?;
            self.run_hook(world, &layout, "pre_down", &cmd, &snap).await;
        }
        Ok(())
    }

    /// The world's process rows by service.
    fn rows(&self, world: WorldId) -> Result<BTreeMap<String, ProcessRow>, StoreError> {
        Ok(self
            .store
            .read(|c| store::processes(c, world))?
            .into_iter()
            .map(|r| (r.service.clone(), r))
            .collect())
    }
}

/// For each instance of `stopping` whose service has `stop_after_dependents`: the instances
/// among `stopping` of the services that depend on it, directly or through others.
fn stop_waits(world: &World, stopping: &BTreeSet<String>) -> BTreeMap<String, BTreeSet<String>> {
    let spec = &world.spec;
    let mut waits = BTreeMap::new();
    for name in stopping {
        let service = crate::replica::service_of(name);
        let after = spec
            .services
            .get(service)
            .and_then(|s| s.process())
            .is_some_and(|p| p.stop.after_dependents);
        if !after {
            continue;
        }
        // Every service that depends on it, through any chain.
        let mut dependents = BTreeSet::new();
        let mut stack = vec![service.to_owned()];
        while let Some(s) = stack.pop() {
            for (other, svc) in &spec.services {
                if svc.depends_on.contains(&s) && dependents.insert(other.clone()) {
                    stack.push(other.clone());
                }
            }
        }
        let of: BTreeSet<String> = stopping
            .iter()
            .filter(|n| dependents.contains(crate::replica::service_of(n)))
            .cloned()
            .collect();
        if !of.is_empty() {
            waits.insert(name.clone(), of);
        }
    }
    waits
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
        let applied = self.converge(world).await;
        // After: a world going down has stopped its processes by now, so the shared
        // services they use stop after them.
        self.tell_the_shared_world(world);
        self.tell_users(world);
        applied
    }

    async fn cleanup(&self, world: &World) -> Result<Cleanup, ProcessError> {
        self.stop_world(world, "binky remove").await?;
        self.forget_wants(world);
        self.digests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&world.id);
        // Its services' health checks are not counted any more.
        self.checks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(w, _), _| *w != world.id);
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
            write::process::forget_world(tx, world.id)
        })?;
        Ok(Cleanup::Done)
    }
}

impl<S: Supervisor> ProcessController<S> {
    /// Make the world's processes match its desired record (the controller's `apply`,
    /// between the nudges of shared services).
    async fn converge(&self, world: &World) -> Result<Applied, ProcessError> {
        if world.desired == DesiredState::Stopped {
            self.stop_world(world, "binky down").await?;
            return Ok(Applied::await_change(vec![Condition::waiting(
                CONDITION,
                "Stopped",
                "stopped by `binky down`; `binky up` starts it again",
            )]));
        }
        if let Some(held) = self.held(world).await? {
            return Ok(held);
        }
        if let Some(why) = self.unmet_gate(world)? {
            return Ok(Applied::await_change(vec![why]));
        }
        let Some(layout) = self.layout(world)? else {
            return Ok(Applied::await_change(vec![Condition::waiting(
                CONDITION,
                "Waiting",
                "waiting for the worktree",
            )]));
        };
        let run = self
            .store
            .read(|c| store::world_run(c, world.id))?
            .unwrap_or_default();
        if run.restart_nonce != world.restart_nonce {
            self.reload(world).await?;
        }
        let order = world.spec.start_order()?;
        // A shared service runs in the project's shared world, only while a world uses it.
        let selected = self.running_services(world)?;
        let mut rows = self.drop_unwanted(world, &selected).await?;
        let snap = env::Snapshot::read(&self.store, world)?;
        // The shared services this world depends on: their rows are the shared world's.
        self.add_shared_rows(world, &mut rows)?;
        let names: Vec<&String> = order.iter().filter(|n| selected.contains(*n)).collect();
        let mut progress = self
            .start_in_order(world, &layout, &names, &snap, &mut rows)
            .await?;
        // The shared services it selects are ready when the shared world's are.
        let shared = self.shared_ready(world, &rows);
        progress.ready += shared.ready;
        progress.waiting.extend(shared.waiting);
        let total = selected.len()
            + world
                .spec
                .selected(world.group.as_deref())
                .iter()
                .filter(|n| !world.runs(n) && world.spec.services[*n].process().is_some())
                .count();
        let condition = if let Some(p) = progress.problem.or(shared.problem) {
            p
        } else if world.is_shared() && selected.is_empty() {
            Condition::ok(
                CONDITION,
                "Idle",
                "no running world of the project uses its shared services; they start with the next one",
            )
        } else if progress.ready == total {
            self.post_up_once(world, &layout, &run, &snap).await?;
            Condition::ok(
                CONDITION,
                "Ready",
                format!("{} service(s) ready", progress.ready),
            )
        } else {
            Condition::waiting(CONDITION, "Starting", progress.waiting.join("; "))
        };
        Ok(Applied {
            action: progress.wake.map_or(Action::AwaitChange, Action::Requeue),
            conditions: vec![condition],
        })
    }

    /// The admission gate's hold, if it holds the world: nothing of it starts. A world
    /// cooled by the gate to make room stops (files, ports and data kept) and starts again
    /// when the gate lets it.
    async fn held(&self, world: &World) -> Result<Option<Applied>, ProcessError> {
        let Some(held) = crate::hold::hold(&self.store, world, CONDITION)? else {
            return Ok(None);
        };
        if held
            .conditions
            .iter()
            .any(|c| c.reason == crate::hold::Hold::Cooled.reason())
        {
            self.stop_world(world, "cooled to make room").await?;
        }
        Ok(Some(held))
    }

    /// What the world waits for before any process starts: its worktree and its ports,
    /// observed at this generation (`None` when both are there).
    fn unmet_gate(&self, world: &World) -> Result<Option<Condition>, StoreError> {
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
                return Ok(Some(Condition::waiting(
                    CONDITION,
                    "Waiting",
                    format!("waiting for the {what}{detail}"),
                )));
            }
        }
        Ok(None)
    }

    /// `binky reload`: everything running under the old nonce stops and starts afresh
    /// (restart counts reset) under the world's new one.
    async fn reload(&self, world: &World) -> Result<(), ProcessError> {
        let mut rows = self.rows(world.id)?;
        let live: BTreeSet<String> = rows.keys().cloned().collect();
        self.pre_down(world, &rows).await?;
        self.stop_services(world, &mut rows, &live, "reload")
            .await?;
        for row in rows.values_mut() {
            row.state = ProcState::Pending;
            row.restarts = 0;
            row.failures = 0;
            row.last_exit = None;
            self.save(world.id, row)?;
        }
        self.store.write(owner::Process, |tx| {
            write::process::set_restart_nonce(tx, world.id, world.restart_nonce)
        })?;
        Ok(())
    }

    /// The world's process rows once the instances no longer wanted are stopped (each
    /// selected service runs as its instances: `api`, and `api.1`… of a replicated one, see
    /// crate::replica) and the ones gone from its spec are forgotten (a service removed,
    /// replicas lowered, or a service that became shared: the shared world's now).
    async fn drop_unwanted(
        &self,
        world: &World,
        selected: &BTreeSet<String>,
    ) -> Result<BTreeMap<String, ProcessRow>, ProcessError> {
        let wanted: BTreeSet<String> = selected
            .iter()
            .flat_map(|n| world.spec.instances(n))
            .collect();
        let mut rows = self.rows(world.id)?;
        let unwanted: BTreeSet<String> = rows
            .values()
            .filter(|r| !wanted.contains(&r.service) && r.state != ProcState::Stopped)
            .map(|r| r.service.clone())
            .collect();
        if !unwanted.is_empty() {
            let why = if world.is_shared() {
                "no running world of the project uses it"
            } else {
                "not in this world's services"
            };
            self.stop_services(world, &mut rows, &unwanted, why).await?;
        }
        let gone: Vec<String> = rows
            .keys()
            .filter(|n| !world.spec.has_instance(n) || !world.runs(n))
            .cloned()
            .collect();
        for name in gone {
            rows.remove(&name);
            self.store.write(owner::Process, |tx| {
                write::process::remove(tx, world.id, &name)
            })?;
        }
        Ok(rows)
    }

    /// Steps each instance of the services `names` (in start order) once: what is ready,
    /// what waits, the first problem, and when to look again.
    async fn start_in_order(
        &self,
        world: &World,
        layout: &Layout,
        names: &[&String],
        snap: &Snapshot,
        rows: &mut BTreeMap<String, ProcessRow>,
    ) -> Result<Progress, ProcessError> {
        // Per-service restart nonces: one read per reconcile, not one per service (an
        // unreadable table counts as no restarts, as it always has).
        let restarts = self
            .store
            .read(|c| store::service_restarts(c, world.id))
            .unwrap_or_else(|err| {
                tracing::warn!(%err, world = %world.name, "cannot read service restarts");
                BTreeMap::new()
            });
        let mut progress = Progress::default();
        for name in names {
            let svc = &world.spec.services[name.as_str()];
            // A service is ready when every one of its replicas is.
            let mut all_ready = true;
            for instance in world.spec.instances(name) {
                let step = self
                    .step(world, layout, &instance, svc, snap, &restarts, rows)
                    .await?;
                all_ready &= step.ready;
                if let Some(w) = step.wake {
                    progress.wake = Some(progress.wake.map_or(w, |x| x.min(w)));
                }
                if progress.problem.is_none() {
                    progress.problem = step.problem;
                }
                progress.waiting.extend(step.waiting);
            }
            if all_ready {
                progress.ready += 1;
            }
        }
        Ok(progress)
    }

    /// Everything is up: runs `post_up` once per `binky up`/`reload` (`run` says for which
    /// it last ran).
    async fn post_up_once(
        &self,
        world: &World,
        layout: &Layout,
        run: &WorldRunRow,
        snap: &Snapshot,
    ) -> Result<(), StoreError> {
        let Some(cmd) = &world.spec.hooks.post_up else {
            return Ok(());
        };
        let key = format!("{}:{}", world.last_used_at, world.restart_nonce);
        if run.post_up_key.as_deref() == Some(&key) {
            return Ok(());
        }
        self.store.write(owner::Process, |tx| {
            write::process::set_post_up_key(tx, world.id, world.restart_nonce, &key)
        })?;
        self.run_hook(world, layout, "post_up", cmd, snap).await;
        Ok(())
    }
}

/// How far one pass over a world's services came.
#[derive(Default)]
struct Progress {
    /// How many services are ready (every replica).
    ready: usize,
    /// When to look again (the soonest any instance asked for).
    wake: Option<Duration>,
    /// The first problem a person must look at.
    problem: Option<Condition>,
    /// What the others wait for.
    waiting: Vec<String>,
}
