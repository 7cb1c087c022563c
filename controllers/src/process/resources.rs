//! Each service's cgroup as the process controller keeps it: the limits it starts under,
//! where the supervisor put it and what enforces them (recorded after each spawn), an
//! out-of-memory kill read when it ends, its cgroup removed once it is gone, and what it
//! uses, sampled every few seconds (`process_resources`).
//!
//! # Guarantees
//! - A service whose `limits` nothing on this machine enforces says so: its row holds
//!   `mechanism = none` and the reason, and the world gets a `limits` event naming them.
//! - A run that ends while its cgroup counted an out-of-memory kill ends as
//!   `killed: out of memory (limit …)`, with an `oom` event; the restart policy applies as
//!   to any crash.
//! - A service's cgroup is removed when its run ends or it is stopped (whatever is still in
//!   it is ended first), and every cgroup of a world when the world goes down or is removed.
//!   The location is in the store, so a restarted daemon finds the cgroups of the one before.
//! - CPU is the percent of one core used over the last sampling interval; memory the working
//!   set at the sample.
//! - Where binky enforces memory limits by polling ([`Mechanism::Polled`]: macOS, the BSDs,
//!   Linux without cgroups or `systemd-run`), a run found over its limit at a sample is
//!   stopped (its stop signal, then SIGKILL, as any stop) by its next step, counted as an
//!   out-of-memory kill, and restarted under its restart policy as after a failure; its
//!   `last_exit` and an `oom` event say it went over and what it had resident.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::ProcessController;
use crate::limits::{bytes, Mechanism, ResourceLimits};
use crate::spec::Process;
use crate::store::{self, now_ms, owner, write, ProcState, StoreError, World, WorldId};
use crate::supervisor::{ProcId, Supervisor, Usage};

/// How often the daemon samples what services use.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);

/// How an ended run used its memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Oom {
    /// Processes of the run the kernel killed under its memory limit.
    pub(super) kills: u64,
    /// The limit, in bytes.
    pub(super) limit: Option<u64>,
    /// binky stopped it, over its limit with this many bytes resident (the polled
    /// mechanism), rather than the kernel.
    pub(super) polled: Option<u64>,
}

impl Oom {
    /// `out of memory (limit 64 MiB)`; polled: `stopped over its memory limit of 64 MiB
    /// (it had 80 MiB resident), as binky does where the system cannot cap memory`.
    pub(super) fn describe(&self) -> String {
        match (self.polled, self.limit) {
            (Some(used), Some(l)) => format!(
                "stopped over its memory limit of {} (it had {} resident), as binky does where the system cannot cap memory",
                bytes(l),
                bytes(used)
            ),
            (_, Some(l)) => format!("out of memory (limit {})", bytes(l)),
            (_, None) => "out of memory".to_owned(),
        }
    }
}

/// A run the sampler found over its memory limit (the polled mechanism).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OverMemory {
    /// The run.
    pub(crate) id: ProcId,
    /// Bytes resident at the sample.
    pub(crate) used: u64,
    /// Its limit, in bytes.
    pub(crate) limit: u64,
    /// Its step has stopped it.
    pub(crate) stopped: bool,
}

/// The limit a run using `used` bytes is over, when binky itself enforces it (`mechanism`
/// is [`Mechanism::Polled`]; a cgroup, a scope or a Job object enforce theirs without
/// binky) and `limit` is set: over means more bytes resident than the limit.
pub(crate) fn over_memory_limit(
    mechanism: Mechanism,
    limit: Option<u64>,
    used: u64,
) -> Option<u64> {
    limit.filter(|l| mechanism == Mechanism::Polled && used > *l)
}

/// How often a service found idle is read in full (between, only its CPU time is read).
const QUIET_FULL_MS: i64 = 60_000;

/// Below this share of a core a service counts as idle (a server's poll loop wakes a few
/// times a second and uses a few microseconds each time).
const IDLE_PERCENT: f64 = 0.5;

/// The share of one core (percent) a service used since its last written sample `r`, when
/// it has used `used` µs of CPU by `now` (ms); none without a sample, or for a new run
/// (its counter started again).
fn percent_since(r: &store::ResourceRow, used: u64, now: i64) -> Option<f64> {
    let (before, at) = (r.cpu_usec?, r.sampled_at?);
    let wall_us = (now - at).max(1) as f64 * 1000.0;
    (used >= before).then(|| (used - before) as f64 / wall_us * 100.0)
}

/// Whether a service that has used `now_used` µs by `now` has been idle since its last
/// written sample `r`: under [`IDLE_PERCENT`] of a core.
fn idle_since(r: &store::ResourceRow, now_used: Option<u64>, now: i64) -> bool {
    now_used
        .and_then(|used| percent_since(r, used, now))
        .is_some_and(|p| p < IDLE_PERCENT)
}

/// What the sampler remembers between samples, per service: when it last wrote its row, and
/// when it last found it idle.
#[derive(Default)]
pub(crate) struct Sampled {
    written: HashMap<(WorldId, String), i64>,
    quiet: HashMap<(WorldId, String), i64>,
}

impl<S: Supervisor> ProcessController<S> {
    /// The limits a service starts under. A value that does not read (a record older than
    /// the check that refuses it) starts it without that limit, said in an event.
    pub(super) fn limits_of(&self, world: &World, name: &str, process: &Process) -> ResourceLimits {
        match process.limits.as_ref().map(|l| l.resolve()) {
            None => ResourceLimits::default(),
            Some(Ok(l)) => l,
            Some(Err(e)) => {
                self.event(
                    world.id,
                    "limits",
                    &format!("{name}: limits.{} is not used: {e}; {}", e.key, e.fix),
                );
                ResourceLimits::default()
            }
        }
    }

    /// Record where the supervisor put the run `id` of `name` (started under `limits`).
    pub(super) fn record_placement(
        &self,
        world: WorldId,
        name: &str,
        id: ProcId,
        limits: ResourceLimits,
    ) -> Result<(), StoreError> {
        let placed = self.sup.placement(id);
        let before = self
            .store
            .read(|c| store::resources(c, world))?
            .into_iter()
            .find(|r| r.service == name);
        // Not capped (binky's polling) or not enforced at all: said once per change.
        let uncapped = !limits.is_none() && !placed.mechanism.caps();
        let said_before = before.as_ref().is_some_and(|b| {
            b.mechanism == placed.mechanism
                && b.note == placed.note
                && b.memory_limit == limits.memory
                && b.cpu_limit == limits.cpu_millis
        });
        if uncapped && !said_before {
            let how = if placed.mechanism.enforces() {
                "are not capped on this machine"
            } else {
                "are not enforced"
            };
            self.event(
                world,
                "limits",
                &format!("{name}: limits ({limits}) {how}: {}", placed.note),
            );
        }
        self.store.write(owner::Process, |tx| {
            write::process::set_placement(tx, world, name, &placed, &limits)
        })
    }

    /// The run `run` of `name` ended: stopped by binky over its memory limit (the polled
    /// mechanism), or the out-of-memory kills its cgroup counted (when it had any), then
    /// its cgroup is removed.
    pub(super) fn run_ended(&self, world: WorldId, name: &str, run: Option<ProcId>) -> Option<Oom> {
        let over = self
            .over_memory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(world, name.to_owned()));
        // Found over its limit but ended before its step stopped it: not binky's doing; an
        // earlier run's mark (stopped otherwise, by `down`) is not this run's.
        if let Some(over) = over.filter(|o| o.stopped && Some(o.id) == run) {
            self.write_resources(|tx| write::process::count_oom_kill(tx, world, name));
            return Some(Oom {
                kills: 1,
                limit: Some(over.limit),
                polled: Some(over.used),
            });
        }
        let row = self
            .store
            .read(|c| store::resources(c, world))
            .ok()?
            .into_iter()
            .find(|r| r.service == name)?;
        let cgroup = row.cgroup.as_deref()?;
        let oom = self
            .sup
            .usage(Some(cgroup), None)
            .filter(|u| u.oom_kills > 0)
            .map(|u| Oom {
                kills: u.oom_kills,
                limit: row.memory_limit,
                polled: None,
            });
        self.release_cgroup(world, name);
        if oom.is_some() {
            self.write_resources(|tx| write::process::count_oom_kill(tx, world, name));
        }
        oom
    }

    /// The run `id` of `name` is over its memory limit and not yet stopped: it is marked
    /// stopped (its step stops it now).
    pub(super) fn to_stop_over_memory(
        &self,
        world: WorldId,
        name: &str,
        id: ProcId,
    ) -> Option<OverMemory> {
        let mut over = self.over_memory.lock().unwrap_or_else(|e| e.into_inner());
        let o = over
            .get_mut(&(world, name.to_owned()))
            .filter(|o| o.id == id && !o.stopped)?;
        o.stopped = true;
        Some(*o)
    }

    /// The sampler found the run `id` of `name` using `u`: when binky enforces its memory
    /// limit itself and it is over, it is marked for its step to stop, and its world woken.
    fn check_memory(
        &self,
        key: &(WorldId, String),
        id: ProcId,
        row: Option<&store::ResourceRow>,
        u: &Usage,
    ) {
        let Some(row) = row else { return };
        let Some(limit) = over_memory_limit(row.mechanism, row.memory_limit, u.memory_bytes) else {
            return;
        };
        let mut over = self.over_memory.lock().unwrap_or_else(|e| e.into_inner());
        if over.get(key).is_some_and(|o| o.id == id) {
            return;
        }
        tracing::info!(world = %key.0, service = %key.1, used = u.memory_bytes, limit, "over its memory limit; stopping it");
        over.insert(
            key.clone(),
            OverMemory {
                id,
                used: u.memory_bytes,
                limit,
                stopped: false,
            },
        );
        drop(over);
        if let Some(t) = &self.trigger {
            t.world(key.0);
        }
    }

    /// Remove the cgroup of `name`'s last run (its process is gone or stopped).
    pub(super) fn release_cgroup(&self, world: WorldId, name: &str) {
        let Ok(rows) = self.store.read(|c| store::resources(c, world)) else {
            return;
        };
        let Some(cgroup) = rows
            .into_iter()
            .find(|r| r.service == name)
            .and_then(|r| r.cgroup)
        else {
            return;
        };
        if self.sup.release(&cgroup) {
            self.forget_cgroup(world, name, &cgroup);
        }
    }

    /// Remove every cgroup of the world (down, remove).
    pub(super) fn release_world_cgroups(&self, world: WorldId) {
        let recorded: Vec<(String, String)> = self
            .store
            .read(|c| store::resources(c, world))
            .unwrap_or_default()
            .into_iter()
            .filter_map(|r| Some((r.service, r.cgroup?)))
            .collect();
        let paths: Vec<String> = recorded.iter().map(|(_, c)| c.clone()).collect();
        self.sup.release_world(world, &paths);
        for (name, cgroup) in recorded {
            if self.sup.release(&cgroup) {
                self.forget_cgroup(world, &name, &cgroup);
            }
        }
        self.write_resources(|tx| write::process::forget_world_usage(tx, world));
    }

    fn forget_cgroup(&self, world: WorldId, name: &str, cgroup: &str) {
        self.write_resources(|tx| write::process::forget_cgroup(tx, world, name, cgroup));
    }

    fn write_resources(
        &self,
        f: impl FnOnce(&store::owner::Tx<'_, owner::Process>) -> Result<(), StoreError>,
    ) {
        if let Err(err) = self.store.write(owner::Process, f) {
            tracing::warn!(%err, "cannot record a service's resources");
        }
    }

    /// Sample what every running service uses (and what stopped ones no longer do).
    pub async fn sample_usage(&self) -> Result<(), StoreError> {
        self.sample_usage_since(&mut Sampled::default()).await
    }

    /// [`Self::sample_usage`], remembering what it did in `seen`: an idle service (the same
    /// memory, under IDLE_PERCENT of a core since, and said so) has only its CPU time read until [`QUIET_FULL_MS`] passes and written
    /// again only once a minute.
    pub(crate) async fn sample_usage_since(&self, seen: &mut Sampled) -> Result<(), StoreError> {
        let procs = self.store.read(store::all_processes)?;
        let res: HashMap<(WorldId, String), store::ResourceRow> = self
            .store
            .read(store::all_resources)?
            .into_iter()
            .map(|(w, r)| ((w, r.service.clone()), r))
            .collect();
        let now = now_ms();
        let mut samples = Vec::new();
        let mut idle = Vec::new();
        for (world, p) in &procs {
            let key = (*world, p.service.clone());
            let before = res.get(&key);
            if p.pid.is_none() || p.start_time.is_none() {
                if before.is_some_and(|r| r.sampled_at.is_some()) {
                    idle.push(key);
                }
                continue;
            }
            if let Some((u, percent)) = self.sample(p, before, &key, seen, now) {
                samples.push((key, u, percent));
            }
        }
        // A live service's entries are renewed at least once a minute; the rest are gone.
        seen.written.retain(|_, at| now - *at < 120_000);
        seen.quiet.retain(|_, at| now - *at < 120_000);
        if samples.is_empty() && idle.is_empty() {
            return Ok(());
        }
        for (key, _, _) in &samples {
            seen.written.insert(key.clone(), now);
        }
        self.record_usage(&samples, &idle, now)
    }

    /// What the running process `p` uses now and its share of a core since `before`, when
    /// there is something to write: nothing for a service still idle (the same memory,
    /// under IDLE_PERCENT of a core since the last sample, which said so too). The next
    /// busy sample's percent spans the whole gap.
    fn sample(
        &self,
        p: &store::ProcessRow,
        before: Option<&store::ResourceRow>,
        key: &(WorldId, String),
        seen: &mut Sampled,
        now: i64,
    ) -> Option<(Usage, Option<f64>)> {
        let id = ProcId {
            pid: p.pid?,
            start_time: p.start_time?,
        };
        // A service's own run is in its recorded cgroup; a setup runs outside it.
        let cgroup = before
            .filter(|_| {
                matches!(
                    p.state,
                    ProcState::Starting | ProcState::Running | ProcState::Unhealthy
                )
            })
            .and_then(|r| r.cgroup.as_deref());
        // Found idle lately: its CPU time alone says whether it still is (one small
        // file, where the whole reading is five, one of them long). Not a service whose
        // memory limit binky polls: a slow leak uses little CPU, and its memory is read
        // at every sample.
        let polled =
            before.is_some_and(|r| r.mechanism == Mechanism::Polled && r.memory_limit.is_some());
        if !polled
            && seen
                .quiet
                .get(key)
                .is_some_and(|at| now - at < QUIET_FULL_MS)
        {
            let now_used = self.sup.cpu_usec(cgroup, Some(id));
            if before.is_some_and(|r| idle_since(r, now_used, now)) {
                return None;
            }
        }
        let u = self.sup.usage(cgroup, Some(id))?;
        if matches!(
            p.state,
            ProcState::Starting | ProcState::Running | ProcState::Unhealthy
        ) {
            self.check_memory(key, id, before, &u);
        }
        let recently = seen.written.get(key).is_some_and(|at| now - at < 60_000);
        let unchanged = recently
            && before.is_some_and(|r| {
                r.memory_bytes == Some(u.memory_bytes)
                    && idle_since(r, Some(u.cpu_usec), now)
                    && r.cpu_percent.is_some_and(|p| p < IDLE_PERCENT)
                    && r.throttled == Some(u.throttled)
            });
        if unchanged {
            seen.quiet.insert(key.clone(), now);
            return None;
        }
        seen.quiet.remove(key);
        let percent = before.and_then(|r| percent_since(r, u.cpu_usec, now));
        Some((u, percent))
    }

    /// Writes the `samples` taken at `now`, and forgets what the `idle` (stopped) services
    /// used.
    fn record_usage(
        &self,
        samples: &[((WorldId, String), Usage, Option<f64>)],
        idle: &[(WorldId, String)],
        now: i64,
    ) -> Result<(), StoreError> {
        self.store.write(owner::Process, |tx| {
            for ((world, service), u, percent) in samples {
                write::process::set_usage(tx, *world, service, u, *percent, now)?;
            }
            for (world, service) in idle {
                write::process::forget_usage(tx, *world, service)?;
            }
            Ok(())
        })
    }

    /// Sample every `every` until `stop` is notified (the daemon runs this).
    pub async fn sample_until(self: Arc<Self>, every: Duration, stop: Arc<tokio::sync::Notify>) {
        let mut seen = Sampled::default();
        loop {
            if let Err(err) = self.sample_usage_since(&mut seen).await {
                tracing::warn!(%err, "cannot sample the services' resources");
            }
            tokio::select! {
                _ = stop.notified() => break,
                _ = tokio::time::sleep(every) => {}
            }
        }
    }
}
