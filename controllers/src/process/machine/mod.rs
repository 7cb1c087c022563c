//! One service's state machine: from its stored row and what the supervisor sees, the next
//! state, the effects to run (spawn, probe, stop) and what the world's condition says.
//!
//! A service is `pending` until its `setup` has run and its dependencies are ready, then
//! `starting` until its readiness probe passes, then `running`. An exit is `backoff` (a
//! restart is due), `exited` (a one-shot that finished) or `failed`; `binky down` makes it
//! `stopped`. A new `binky up` (a new generation) retries what failed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

mod exit;
mod health;
mod setup;

use super::spawn::{hash_of, Resolved};
use super::{ProcessController, CONDITION};
use crate::env::Layout;
use crate::env::Snapshot;
use crate::runtime::Condition;
use crate::spec::{OnUnhealthy, Process, Restart, RestartKey, Service};
use crate::store::{self, now_ms, owner, ProcState, ProcessRow, SliceState, StoreError, World};
use crate::supervisor::log_tail;
use crate::supervisor::{Exit, Liveness, ProbeFailure, ProbeTarget, ProcId, SpawnSpec, Supervisor};
use crate::tokens::Tokens;
pub(in crate::process) use health::Check;

/// What one service's step concluded.
#[derive(Default)]
pub(super) struct Step {
    /// It is ready (running and healthy, or a one-shot that finished).
    pub(super) ready: bool,
    /// Look again after this long.
    pub(super) wake: Option<Duration>,
    /// A condition a person must act on.
    pub(super) problem: Option<Condition>,
    /// What it waits for, for the world's condition.
    pub(super) waiting: Option<String>,
}

impl Step {
    fn ready() -> Step {
        Step {
            ready: true,
            ..Step::default()
        }
    }

    fn problem(reason: &str, message: String) -> Step {
        Step {
            problem: Some(Condition::failed(CONDITION, reason, message)),
            ..Step::default()
        }
    }
}

/// Where a part of the step leaves the service.
enum Flow {
    /// This step is over.
    Done(Step),
    /// Go on to the next part.
    Next,
}

/// One service instance being stepped: what it is and what it runs with.
struct Svc<'a> {
    world: &'a World,
    /// The instance: the service's name for replica 0, `api.1`… for the others.
    name: &'a str,
    /// The service it is an instance of.
    service: &'a str,
    /// Its replica index.
    replica: u32,
    svc: &'a Service,
    process: &'a Process,
    tokens: &'a Tokens,
    resolved: Resolved,
    log: PathBuf,
    /// Its working directory relative to the worktree's top (for the paths it waits for).
    workdir_rel: String,
}

/// The restart delay after `failures` failures in a row: 0.5 s doubling to 30 s.
pub(super) fn restart_delay(failures: u32) -> Duration {
    crate::runtime::doubling_delay(
        Duration::from_millis(500),
        failures,
        Duration::from_secs(30),
    )
}

pub(super) fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

fn ms_since(t: Option<i64>) -> Duration {
    t.map(|t| Duration::from_millis((now_ms() - t).max(0) as u64))
        .unwrap_or_default()
}

fn new_row(service: &str) -> ProcessRow {
    ProcessRow {
        service: service.to_owned(),
        state: ProcState::Pending,
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
        problem: None,
        stepped_generation: 0,
        restart_key: None,
    }
}

/// The row no longer names a process.
fn forget_process(row: &mut ProcessRow) {
    row.pid = None;
    row.start_time = None;
    row.spawn_token = None;
}

impl<S: Supervisor> ProcessController<S> {
    /// Advance one service instance (`name`: `api`, or a replica `api.1`) as far as it can
    /// go now (`restarts`: the world's per-service restart nonces); `rows` holds every
    /// instance's row, this one's updated on return.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn step(
        &self,
        world: &World,
        layout: &Layout,
        name: &str,
        svc: &Service,
        snap: &Snapshot,
        restarts: &BTreeMap<String, i64>,
        rows: &mut BTreeMap<String, ProcessRow>,
    ) -> Result<Step, StoreError> {
        let tokens = &snap.tokens;
        let Some(resolved) = self.resolve(world, layout, name, svc, snap, restarts) else {
            return Ok(Step::default());
        };
        let Some(process) = svc.process() else {
            return Ok(Step::default());
        };
        let (service, replica) = crate::replica::split(name);
        let s = Svc {
            world,
            name,
            service,
            replica,
            svc,
            process,
            tokens,
            workdir_rel: resolved
                .workdir
                .strip_prefix(&layout.worktree)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default(),
            resolved,
            log: crate::supervisor::log_path(&self.config.logs_dir, world, name),
        };
        let mut row = rows.get(name).cloned().unwrap_or_else(|| new_row(name));
        let step = self.advance(&s, &mut row, rows).await?;
        // The world's condition names the first service with a problem; each row keeps its
        // own, and the generation its step was at, for a reader that judges some services
        // alone (`binky reload --group`). Written once the step is over: the row says
        // `up_generation` before a restart the generation asked for is made.
        let problem = step.problem.as_ref().map(|c| c.message.clone());
        if row.problem != problem || row.stepped_generation != world.generation {
            row.problem = problem;
            row.stepped_generation = world.generation;
            self.save(world.id, &row)?;
        }
        rows.insert(name.to_owned(), row);
        Ok(step)
    }

    async fn advance(
        &self,
        s: &Svc<'_>,
        row: &mut ProcessRow,
        rows: &BTreeMap<String, ProcessRow>,
    ) -> Result<Step, StoreError> {
        self.on_new_up(s.world, row)?;
        let flow = match row.state {
            ProcState::Starting | ProcState::Running | ProcState::Unhealthy => {
                self.live(s, row, rows).await?
            }
            ProcState::Setup => self.setup_running(s, row).await?,
            _ => Flow::Next,
        };
        if let Flow::Done(step) = flow {
            return Ok(step);
        }
        if let Flow::Done(step) = self.settled(s, row) {
            return Ok(step);
        }
        if let Flow::Done(step) = self.env_unset(s, row, rows)? {
            return Ok(step);
        }
        let slices = self.store.read(|c| store::slices_seen_by(c, s.world))?;
        if let Flow::Done(step) = self.tokens_unresolved(s, row, rows, false)? {
            return Ok(step);
        }
        if let Flow::Done(step) = self.wait_for_bootstrap(s, row)? {
            return Ok(step);
        }
        if let Flow::Done(step) = self.start_setup(s, row, rows, &slices).await? {
            return Ok(step);
        }
        if let Flow::Done(step) = self.wait_for_dependencies(s, row, rows, &slices)? {
            return Ok(step);
        }
        if let Flow::Done(step) = self.tokens_unresolved(s, row, rows, true)? {
            return Ok(step);
        }
        self.start(s, row).await
    }

    /// A new `binky up` means "try again now".
    fn on_new_up(&self, world: &World, row: &mut ProcessRow) -> Result<(), StoreError> {
        if row.up_generation == world.generation {
            return Ok(());
        }
        if matches!(
            row.state,
            ProcState::Backoff | ProcState::Failed | ProcState::Exited
        ) && row.failed_generation != Some(world.generation)
        {
            row.failures = 0;
            row.state = ProcState::Pending;
            row.next_start_at = None;
            row.failed_generation = None;
        }
        row.up_generation = world.generation;
        self.save(world.id, row)
    }

    /// A live process: is it still alive, still the right one, ready yet?
    async fn live(
        &self,
        s: &Svc<'_>,
        row: &mut ProcessRow,
        rows: &BTreeMap<String, ProcessRow>,
    ) -> Result<Flow, StoreError> {
        let (Some(pid), Some(start_time)) = (row.pid, row.start_time) else {
            // Started by a daemon that died before recording the pid: the startup sweep
            // stopped it; start again.
            row.state = ProcState::Pending;
            return Ok(Flow::Next);
        };
        let id = ProcId { pid, start_time };
        let key = s.process.restart_key();
        let edited = match row.restart_key.as_deref().and_then(RestartKey::decode) {
            Some(started) => started.changed(&key),
            // Started by an earlier binky, which kept no key: what it runs with says whether
            // it runs today's spec, whose key it then gets.
            None => {
                if row.spec_hash.as_deref() == Some(&s.resolved.hash) {
                    row.restart_key = Some(key.encode());
                    self.save(s.world.id, row)?;
                }
                Vec::new()
            }
        };
        let liveness = self.sup.liveness(s.world.id, id);
        // Over its memory limit at the last sample, where binky enforces it by polling, and
        // still running: stopped as any stop. Its end, read by the next step (its exit
        // nudges the world), counts as out of memory (`on_exit`).
        if matches!(liveness, Liveness::Running) {
            if let Some(over) = self.to_stop_over_memory(s.world.id, s.name, id) {
                tracing::info!(world = %s.world.name, service = %s.name, used = over.used, limit = over.limit, "stopping a service over its memory limit");
                self.sup.stop(id, self.stop_how(Some(s.process))).await;
                return Ok(Flow::Done(Step {
                    wake: Some(Duration::from_millis(100)),
                    waiting: Some(format!("{}: stopping, over its memory limit", s.name)),
                    ..Step::default()
                }));
            }
        }
        match liveness {
            Liveness::Running
                if !edited.is_empty() || row.spec_hash.as_deref() != Some(&s.resolved.hash) =>
            {
                let why = if edited.is_empty() {
                    "what it runs with changed (an address it uses, a file its env_file names, or a file it watches)".to_owned()
                } else {
                    format!("{} changed", edited.join(", "))
                };
                self.event(
                    s.world.id,
                    "restart",
                    &format!("{}: {why}; restarting", s.name),
                );
                self.sup.stop(id, self.stop_how(Some(s.process))).await;
                self.release_cgroup(s.world.id, s.name);
                row.state = ProcState::Pending;
                row.pid = None;
                row.start_time = None;
                row.healthy = false;
                Ok(Flow::Next)
            }
            Liveness::Running if matches!(row.state, ProcState::Running | ProcState::Unhealthy) => {
                let ran = ms_since(row.started_at);
                if row.state == ProcState::Running && !row.healthy {
                    // Up again after failures: ready once it has stayed up.
                    if ran < self.config.stable_after {
                        return Ok(Flow::Done(Step {
                            wake: Some(self.config.stable_after - ran),
                            waiting: Some(format!("{}: {}", s.name, row.message)),
                            ..Step::default()
                        }));
                    }
                    row.failures = 0;
                    row.healthy = true;
                    row.message = String::new();
                    row.ready_at = Some(now_ms());
                    self.event(
                        s.world.id,
                        "ready",
                        &format!("{} ready: up {} since its restart", s.name, secs(ran)),
                    );
                    self.save(s.world.id, row)?;
                } else if row.failures > 0 && ran >= self.config.stable_after {
                    row.failures = 0;
                    self.save(s.world.id, row)?;
                }
                self.recheck(s, row, id).await
            }
            Liveness::Running => Ok(Flow::Done(self.probe(s, row, rows, id).await?)),
            Liveness::Exited(exit) => {
                self.on_exit(s.world, s.name, s.process.restart, row, exit)?;
                Ok(Flow::Next)
            }
        }
    }

    /// A started process: probe it until it is ready or its health timeout has passed.
    async fn probe(
        &self,
        s: &Svc<'_>,
        row: &mut ProcessRow,
        rows: &BTreeMap<String, ProcessRow>,
        id: ProcId,
    ) -> Result<Step, StoreError> {
        let name = s.name;
        let target = self.probe_target(s.world, name, s.svc, s.tokens, &s.resolved);
        // Nothing to probe: ready once it has survived a short settle time, so a command
        // that dies at once (a typo, a missing binary) fails `binky up` instead of passing.
        let settle = self.config.settle.saturating_sub(ms_since(row.started_at));
        if target.is_none() && !settle.is_zero() {
            return Ok(Step {
                wake: Some(settle),
                waiting: Some(format!("{name}: starting")),
                ..Step::default()
            });
        }
        let result = match &target {
            Some(t) => {
                let within = answer_within(s.process, row);
                self.sup.probe(t, id, within).await
            }
            None => Ok(()),
        };
        let step = match result {
            // Up again after failures: running, but ready only once it has stayed up, so a
            // service restarting in a loop is never ready. A service whose probe passed is
            // believed after one failure (an api that lost the race with its database); one
            // with nothing to probe, or failing again, is not.
            Ok(()) if row.failures >= if target.is_some() { 2 } else { 1 } => {
                return self.ready_once_stable(s, row);
            }
            Ok(()) => self.ready(s, row),
            Err(failure) => self.not_ready(s, row, target.as_ref(), failure),
        };
        if step.ready || rows.get(name).is_none_or(|r| r.message != row.message) {
            self.save(s.world.id, row)?;
        }
        Ok(step)
    }

    /// A process restarted after failures answers: running, ready once it has stayed up
    /// for `stable_after`.
    fn ready_once_stable(&self, s: &Svc<'_>, row: &mut ProcessRow) -> Result<Step, StoreError> {
        row.state = ProcState::Running;
        row.healthy = false;
        row.message = format!(
            "restarted after {}; ready once it has run {}",
            row.last_exit.as_deref().unwrap_or("a failure"),
            secs(self.config.stable_after)
        );
        let step = Step {
            wake: Some(
                self.config
                    .stable_after
                    .saturating_sub(ms_since(row.started_at)),
            ),
            waiting: Some(format!("{}: {}", s.name, row.message)),
            ..Step::default()
        };
        self.save(s.world.id, row)?;
        Ok(step)
    }

    /// A process answers: ready, its running health checks counted from now.
    fn ready(&self, s: &Svc<'_>, row: &mut ProcessRow) -> Step {
        self.checks
            .lock()
            .expect("checks lock")
            .remove(&(s.world.id, s.name.to_owned()));
        row.state = ProcState::Running;
        row.healthy = true;
        row.ready_at = Some(now_ms());
        row.message = String::new();
        self.event(
            s.world.id,
            "ready",
            &format!("{} ready in {}", s.name, secs(ms_since(row.started_at))),
        );
        Step {
            ready: true,
            // Its health is checked again while it runs.
            wake: s.process.health.as_ref().map(|h| h.interval()),
            ..Step::default()
        }
    }

    /// A process does not answer (yet): why, and when to probe again; past its timeout, a
    /// problem with its output's tail.
    fn not_ready(
        &self,
        s: &Svc<'_>,
        row: &mut ProcessRow,
        target: Option<&ProbeTarget>,
        failure: ProbeFailure,
    ) -> Step {
        let health = s.process.health.as_ref();
        // A service without `health` waits for its port as long as the command that
        // started it waits (`binky up --timeout`, recorded with the world).
        let timeout = match health {
            Some(h) => h.timeout(),
            None => self.port_wait(s.world),
        };
        let waited = ms_since(row.started_at);
        let what = why_not_ready(target, failure, health.is_some());
        // Whole seconds: the row is rewritten once a second, not on every probe.
        row.message = format!("not ready after {}s: {what}", waited.as_secs());
        let mut step = Step::default();
        if waited > timeout {
            let within = match health {
                Some(_) => format!(
                    "is not ready within its health timeout of {}",
                    secs(timeout)
                ),
                None => format!(
                    "did not listen on its port within {} (the --timeout of the `binky up` or `binky reload` that started it)",
                    secs(timeout)
                ),
            };
            step.problem = Some(Condition::failed(
                CONDITION,
                "HealthTimeout",
                format!(
                    "{} {within}: {what}. Last output:\n{}",
                    s.name,
                    log_tail(&s.log, 5)
                ),
            ));
            step.wake = Some(Duration::from_secs(1));
        } else {
            // Probe often at first (most services are up in tens of ms), then less
            // and less.
            step.wake =
                Some((waited / 10).clamp(self.config.probe_interval, Duration::from_millis(500)));
        }
        // Why it is not ready yet (`binky up` prints it when its wait runs out).
        step.waiting = Some(format!("{}: {what}", s.name));
        step
    }

    /// A service that is not running: waiting for a restart, failed for good, or done.
    fn settled(&self, s: &Svc<'_>, row: &ProcessRow) -> Flow {
        match row.state {
            ProcState::Backoff => {
                let due = row.next_start_at.unwrap_or(0);
                if due > now_ms() {
                    return Flow::Done(self.crash_loop_step(s, row, due));
                }
                Flow::Next
            }
            ProcState::Failed
                if row.failed_generation == Some(s.world.generation)
                    || s.process.restart == Restart::Never =>
            {
                Flow::Done(Step::problem(
                    if row.failed_generation.is_some() {
                        "SetupFailed"
                    } else {
                        "ServiceFailed"
                    },
                    format!("{}: {}", s.name, row.message),
                ))
            }
            ProcState::Exited => Flow::Done(Step::ready()),
            _ => Flow::Next,
        }
    }

    /// An `${env.NAME}` with nothing to give never reaches a process as its own text.
    fn env_unset(
        &self,
        s: &Svc<'_>,
        row: &mut ProcessRow,
        rows: &BTreeMap<String, ProcessRow>,
    ) -> Result<Flow, StoreError> {
        let unset = &s.resolved.unset_env;
        if unset.is_empty() {
            return Ok(Flow::Next);
        }
        let names: Vec<String> = unset
            .iter()
            .map(|u| match &u.message {
                Some(m) => format!("{} ({m})", u.name),
                None => u.name.clone(),
            })
            .collect();
        let first = &unset[0].name;
        // Not started, and looked at again at every pass (an env_file may gain it).
        row.state = ProcState::Pending;
        row.message = format!(
            "it uses ${{env.{first}}}, but {} not set: set it in the environment of `binky up` (or the service's env_file) and run `binky up {}` again, or give a default: ${{env.{first}:-value}}",
            if names.len() == 1 {
                format!("{} is", names[0])
            } else {
                format!("{} are", names.join(", "))
            },
            s.world.name
        );
        if rows.get(s.name).is_none_or(|r| r.message != row.message) {
            self.event(
                s.world.id,
                "env_unset",
                &format!("{}: {}", s.name, row.message),
            );
            self.save(s.world.id, row)?;
        }
        Ok(Flow::Done(Step::problem(
            "EnvUnset",
            format!("{}: {}", s.name, row.message),
        )))
    }

    /// A token of binky's that resolves to nothing never reaches a process as its own text
    /// (`DB_PORT=${db.port}`). One naming an adapter service whose slice is not made yet, or
    /// a shared service whose port the project's shared world has not assigned yet (that
    /// world made again after the last one went), waits for it (`starting`: only before the
    /// start itself, so `setup` still runs beside the database work); any other holds the
    /// service with a message naming it.
    fn tokens_unresolved(
        &self,
        s: &Svc<'_>,
        row: &mut ProcessRow,
        rows: &BTreeMap<String, ProcessRow>,
        starting: bool,
    ) -> Result<Flow, StoreError> {
        // What the token waits for, when it is coming.
        let coming = |token: &str| -> Option<&'static str> {
            let expr = token.trim_start_matches("${").trim_end_matches('}');
            let target = match expr.split_once('.') {
                Some(("self", _)) => s.name,
                Some((obj, _)) => obj,
                None => return None,
            };
            // A service the world's group does not run is never coming.
            if !s
                .world
                .spec
                .selected(s.world.group.as_deref())
                .contains(target)
            {
                return None;
            }
            // Judged on the tokens the service was resolved with (one snapshot): a slice
            // made or a port assigned since is seen at the next pass. `binky check` and `up`
            // refuse a token that can never resolve, so a shared service's port missing here
            // is one not assigned yet.
            let svc = s.world.spec.services.get(target)?;
            if svc.resource().is_some() {
                (!s.tokens.urls.contains_key(target)).then_some("slice")
            } else if svc.shared {
                s.tokens
                    .primary_port(target)
                    .is_none()
                    .then_some("shared service's port")
            } else {
                None
            }
        };
        let (waiting, broken): (Vec<_>, Vec<_>) = s
            .resolved
            .unresolved
            .iter()
            .partition(|(_, token)| coming(token).is_some());
        if let Some((field, token)) = broken.first() {
            row.state = ProcState::Pending;
            row.message = format!(
                "{field} uses {token}, which resolves to nothing in world `{}`: {}",
                s.world.name,
                s.tokens.explain(token, s.name)
            );
            if rows.get(s.name).is_none_or(|r| r.message != row.message) {
                self.event(
                    s.world.id,
                    "token_unresolved",
                    &format!("{}: {}", s.name, row.message),
                );
                self.save(s.world.id, row)?;
            }
            return Ok(Flow::Done(Step::problem(
                "TokenUnresolved",
                format!("{}: {}", s.name, row.message),
            )));
        }
        match waiting.first() {
            Some((field, token)) if starting => {
                let what = coming(token).unwrap_or("slice");
                let msg = format!("waiting for the {what} {token} names (in {field})");
                // Looked at again soon: the slice may have been made, or the port assigned,
                // after this pass read the tokens.
                let mut step = self.pending(s, row, msg)?;
                step.wake = Some(Duration::from_millis(250));
                Ok(Flow::Done(step))
            }
            _ => Ok(Flow::Next),
        }
    }

    /// Its `setup` and `cmd` wait for the paths the worktree is still getting that its
    /// working directory needs (`web/node_modules` for a service in `web`), and only those.
    fn wait_for_bootstrap(&self, s: &Svc<'_>, row: &mut ProcessRow) -> Result<Flow, StoreError> {
        // The shared world runs in the main checkout: it has its paths.
        if s.world.is_shared() {
            return Ok(Flow::Next);
        }
        let waits = self
            .store
            .read(|c| store::bootstrap_waits(c, s.world.id, &s.workdir_rel))?;
        if waits.is_empty() {
            return Ok(Flow::Next);
        }
        let msg = format!(
            "waiting for {} to be brought into the worktree",
            waits.join(", ")
        );
        // The worktree controller nudges the world as each path is done; looked at again
        // anyway, in case a nudge is lost.
        let mut step = self.pending(s, row, msg)?;
        step.wake = Some(Duration::from_secs(1));
        Ok(Flow::Done(step))
    }

    /// Not running: it starts once its dependencies are ready. A process dependency is
    /// ready when it runs and passed its check (each of its replicas); an adapter
    /// dependency when its slice is provisioned, migrated and seeded.
    fn wait_for_dependencies(
        &self,
        s: &Svc<'_>,
        row: &mut ProcessRow,
        rows: &BTreeMap<String, ProcessRow>,
        slices: &[store::SliceRow],
    ) -> Result<Flow, StoreError> {
        let slice_ready: BTreeSet<&str> = slices
            .iter()
            .filter(|s| s.state == SliceState::Ready)
            .map(|s| s.service.as_str())
            .collect();
        let waiting_for: Vec<&str> = s
            .svc
            .depends_on
            .iter()
            .filter(|d| match s.world.spec.services.get(*d) {
                // A shared one: the instances its shared world runs.
                Some(dep) if dep.process().is_some() && !s.world.runs(d) => {
                    let mut instances = super::shared::instances_of(rows, d).peekable();
                    instances.peek().is_none() || !instances.all(ProcessRow::is_ready)
                }
                Some(dep) if dep.process().is_some() => !s
                    .world
                    .spec
                    .instances(d)
                    .iter()
                    .all(|i| rows.get(i).is_some_and(ProcessRow::is_ready)),
                Some(_) => !slice_ready.contains(d.as_str()),
                None => false,
            })
            .map(String::as_str)
            .collect();
        if waiting_for.is_empty() {
            return Ok(Flow::Next);
        }
        let msg = format!("waiting for {}", waiting_for.join(", "));
        Ok(Flow::Done(self.pending(s, row, msg)?))
    }

    /// Start the service.
    async fn start(&self, s: &Svc<'_>, row: &mut ProcessRow) -> Result<Step, StoreError> {
        let name = s.name;
        for path in &s.resolved.missing_env_files {
            self.event(s.world.id, "env_file_missing", &format!("{name}: env_file {} not found (ignored files are not copied into new worktrees)", path.display()));
        }
        // Record the intent (with the token) before spawning: if the daemon dies in
        // between, the next one finds the process by its token.
        let token = self.sup.token(s.world.id);
        row.state = ProcState::Starting;
        row.spawn_token = Some(token.clone());
        row.pid = None;
        row.start_time = None;
        row.healthy = false;
        row.spec_hash = Some(s.resolved.hash.clone());
        row.restart_key = Some(s.process.restart_key().encode());
        row.message = "starting".into();
        row.started_at = Some(now_ms());
        self.save(s.world.id, row)?;
        let limits = self.limits_of(s.world, name, s.process);
        let spec = SpawnSpec {
            world: s.world.id,
            service: name.to_owned(),
            cmd: s.resolved.cmd.clone(),
            workdir: s.resolved.workdir.clone(),
            env: s.resolved.env.clone(),
            log: s.log.clone(),
            token,
            task: false,
            nice: crate::settings::nice(&self.store),
            limits,
        };
        let mut step = Step::default();
        match self.sup.spawn(&spec).await {
            Ok(id) => {
                self.record_placement(s.world.id, name, id, limits)?;
                row.pid = Some(id.pid);
                row.start_time = Some(id.start_time);
                row.started_at = Some(now_ms());
                if row.last_exit.is_some() {
                    row.restarts += 1;
                }
                self.event(
                    s.world.id,
                    "started",
                    &format!("started {name} (pid {}): {}", id.pid, s.resolved.cmd),
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
                self.on_exit(s.world, name, s.process.restart, row, exit)?;
                // It never ran: say why instead of a made-up exit code.
                row.last_exit = Some(format!("not started: {err}"));
                row.message = format!("{err}; {}", row.message);
                step = if row.state == ProcState::Backoff {
                    self.crash_loop_step(s, row, row.next_start_at.unwrap_or(0))
                } else {
                    Step::problem("SpawnFailed", format!("{name}: {err}"))
                };
            }
        }
        self.save(s.world.id, row)?;
        Ok(step)
    }

    /// A service that waits (`msg` says for what): `pending`, saved when that changed.
    fn pending(&self, s: &Svc<'_>, row: &mut ProcessRow, msg: String) -> Result<Step, StoreError> {
        if row.state != ProcState::Pending || row.message != msg {
            row.state = ProcState::Pending;
            row.message = msg.clone();
            self.save(s.world.id, row)?;
        }
        Ok(Step {
            waiting: Some(format!("{}: {msg}", s.name)),
            ..Step::default()
        })
    }

    /// Waiting for a restart due at `due` (ms); a crash loop once it failed often enough.
    fn crash_loop_step(&self, s: &Svc<'_>, row: &ProcessRow, due: i64) -> Step {
        let name = s.name;
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
                    s.world.name,
                    match log_tail(&s.log, 5) {
                        t if t.trim().is_empty() => "(none)".to_owned(),
                        t => t,
                    }
                ),
            ));
        }
        step
    }
}

/// How long one probe of `process` waits for an answer: a service with a health check may
/// take its health timeout to answer (a dev server's first request imports the app; a
/// loaded machine is slow), so as long as the time left, never less than the short default.
fn answer_within(process: &Process, row: &ProcessRow) -> Duration {
    match &process.health {
        Some(h) => h
            .timeout()
            .saturating_sub(ms_since(row.started_at))
            .max(crate::spec::PROBE_ANSWER)
            .min(h.timeout().max(crate::spec::PROBE_ANSWER)),
        None => crate::spec::PROBE_ANSWER,
    }
}

/// Why a probe of `target` failed, in words that name the fix.
fn why_not_ready(target: Option<&ProbeTarget>, failure: ProbeFailure, has_health: bool) -> String {
    match (target, failure) {
        // Someone answers, but not this service: the probe's own words say who.
        (_, ProbeFailure::Foreign(who)) => who,
        // It listens, but elsewhere: the port binky gave it is not the one it took.
        (_, f @ ProbeFailure::OtherPort { .. }) => format!(
            "{}: make its cmd listen on ${{self.port}} (binky also sets $PORT)",
            f.text()
        ),
        (Some(ProbeTarget::Tcp(_, p)), ProbeFailure::NotReady(why)) if !has_health => {
            format!("not listening yet on its port {p} ({why}); its cmd should listen on ${{self.port}} / $PORT")
        }
        (_, ProbeFailure::NotReady(why)) => format!("health check failing: {why}"),
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
