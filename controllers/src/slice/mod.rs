//! The slice controller: each adapter service of a world has its own slice of a shared
//! server (a database with its own role, a key prefix with its own ACL user, …).
//!
//! # Guarantees
//! - A slice is provisioned, then `migrate` and `seed` run once with its address in the
//!   environment (`DATABASE_URL`, which migrate commands written for binky 0.1.2 read, and
//!   `${svc.url}`), before any process that depends on it starts (the process controller
//!   waits for `ready`).
//! - `migrate` runs again when its text changes; `seed` runs once per world.
//! - A server that is down or refuses the admin credentials is retried with backoff; the
//!   world waits with a condition naming the server and the error, and comes up by itself.
//! - A ready world whose slice's server goes away is not ready until it is back, and says
//!   which server and the fix ([`managed_trouble`], [`unanswered_message`]): a managed one
//!   that died (`ServerDown`, the daemon starts it again), one `binky servers stop` stopped
//!   (`ServerStopped`, stalled: the next `binky up` starts it; nothing here starts it, not
//!   even the drift check), or one binky.toml names that does not answer
//!   (`ServerUnavailable`). The slice's row carries the message while it lasts.
//! - A failing `migrate` or `seed` fails the world with the command's output tail, touching
//!   nothing of other worlds; the next `binky up` tries again.
//! - Slices are torn down on removal, after the world's processes have stopped; a crash in
//!   the middle is finished by the next daemon (the finalizer stays until it is done).
//! - A slice whose service left `binky.toml` is kept (it holds data) until the world goes.
//! - A slice is its home's: its name carries the home's identity (`store::home_id`), and
//!   its adapter marks it on its server as the home's when it provisions it. A slice
//!   recorded before homes had an identity keeps its recorded name and gets the mark at
//!   its next provision (each daemon heals a running world's slices once: adoption); one
//!   whose server names another home fails, saying so, and a removal leaves it to that
//!   home (a `slice` event says so) instead of dropping it.
//! - A world that is down provisions nothing; once its processes have stopped, a slice with
//!   a server of its own (a redis-server per world) stops it, keeping its data
//!   (`SliceState::Stopped`), and the next `binky up` starts it again before any process
//!   that depends on it.
//! - A shared adapter service (`shared = true`) has one slice, its project's shared
//!   world's; a world that uses it waits until that slice is ready and makes none.

mod clone;
mod named;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use self::clone::CloneOutcome;
pub use self::named::{named_servers, NamedServer};
use crate::adapter::{
    random_secret, slice_name, Cause, SliceAddress, SliceEffects, SliceFault, SliceSpec, Teardown,
};
use crate::adapter::{unset_settings, CommandError, SliceWork};
use crate::env::Layout;
use crate::registry::Kind;
use crate::runtime::{Action, Applied, Cleanup, Condition, Controller, ReconcileError};
use crate::spec::Resource;
use crate::store::{self, owner, write, SliceRow, Store, StoreError, World};
use crate::store::{DesiredState, ServerState, SliceState, WorktreeState};
use crate::supervisor::Supervisor;

/// Why the server a ready slice lives on cannot be used now: what `binky status` shows on
/// the slice's line and the slice controller says in the world's condition, written once
/// here for both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerTrouble {
    /// A person stopped it (`binky servers stop`): nothing starts it again but the next
    /// `binky up` of a world on it, so the world needs a person.
    pub stopped: bool,
    /// Which server, what is wrong and the fix, without the service's name.
    pub message: String,
}

impl ServerTrouble {
    /// The state a slice with this trouble is shown in.
    pub fn shown_state(&self) -> &'static str {
        if self.stopped {
            "stopped"
        } else {
            "down"
        }
    }
}

/// The trouble of the managed server the slice `slice` of world `world` lives on (the row
/// of `servers` with the slice's admin address), if it has one: its recorded state, and
/// `dead` for a server recorded running (the daemon's watch records a death within a
/// second; a reader that cannot wait for it looks at the process).
pub fn managed_trouble(
    servers: &[store::ServerRow],
    slice: &SliceRow,
    world: &str,
    dead: impl Fn(&store::ServerRow) -> bool,
) -> Option<ServerTrouble> {
    let url = slice.admin_url.as_deref()?;
    let server = servers.iter().find(|s| s.admin_url == url)?;
    // `redis/<slice>`: the world's own server.
    let which = match server.kind.split_once('/') {
        Some((kind, _)) => format!("its own {kind} server"),
        None => format!(
            "the managed {} server it lives on (127.0.0.1:{})",
            server.kind, server.port
        ),
    };
    let detail = |m: &str| {
        if m.is_empty() {
            String::new()
        } else {
            format!(" ({m})")
        }
    };
    let (stopped, message) = match server.state {
        ServerState::Running if !dead(server) => return None,
        // Its record says how, and what binky does about it.
        ServerState::Down if !server.message.is_empty() => {
            (false, format!("{which} {}", server.message))
        }
        ServerState::Running | ServerState::Down => (
            false,
            format!("{which} stopped running; binky is starting it again"),
        ),
        ServerState::Starting => (false, format!("{which} is starting")),
        ServerState::Failed => (
            false,
            format!(
                "{which} is not running: binky could not start it{}; it tries again, and `binky servers` shows it",
                detail(&server.message)
            ),
        ),
        ServerState::Stopped => (
            true,
            format!("`binky servers stop` stopped {which}; `binky up {world}` starts it again"),
        ),
    };
    Some(ServerTrouble { stopped, message })
}

/// What is said of a slice whose server at `admin_url` (its `adapter`'s, named by
/// binky.toml or the environment) did not answer, `why`.
pub fn unanswered_message(adapter: &str, admin_url: &str, why: &str) -> String {
    format!(
        "its {adapter} server {} does not answer ({why}); the world is ready again once it does: start that server, or point `admin_url` at one that runs",
        crate::url::redact_server(admin_url)
    )
}

/// The condition this controller reports.
const CONDITION: &str = Kind::Slice.condition();

/// How often a ready slice is checked for having been dropped from outside binky.
pub const DRIFT_CHECK: Duration = Duration::from_secs(10);

/// Why the slice controller could not converge.
#[derive(Debug, thiserror::Error)]
pub enum SliceError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No password could be made for a new slice.
    #[error(transparent)]
    Random(#[from] crate::random::RandomError),
    /// A server is not reachable yet.
    #[error("{service}: waiting for its {adapter} server: {detail}; retrying")]
    Waiting {
        /// The service.
        service: String,
        /// Its adapter.
        adapter: String,
        /// What the adapter said.
        #[source]
        detail: Cause,
    },
    /// A removed world's slice cannot be dropped: its server is not reachable.
    #[error("{service}: cannot drop slice {slice}, its {adapter} server is not reachable: {detail}; retrying (start the server, or `binky remove {world} --force` forgets the slice, leaving whatever of it is on that server)")]
    Unreachable {
        /// The world being removed.
        world: String,
        /// The service.
        service: String,
        /// The slice.
        slice: String,
        /// Its adapter.
        adapter: String,
        /// What the adapter said.
        #[source]
        detail: Cause,
    },
}

impl ReconcileError for SliceError {
    fn reason(&self) -> &'static str {
        match self {
            SliceError::Store(_) => "StoreFailed",
            SliceError::Random(_) => "NoRandomness",
            SliceError::Waiting { .. } | SliceError::Unreachable { .. } => "ServerUnavailable",
        }
    }
}

fn hash(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .take(12)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The slice controller.
pub struct SliceController<E, S> {
    store: Store,
    /// Adapters and `migrate`/`seed`, shared with the golden controller.
    work: Arc<SliceWork<E, S>>,
    /// `(world, service) → generation` of the last provision by this daemon: a ready slice
    /// is provisioned again (idempotently) once per daemon and per `binky up`, which heals
    /// a server that lost it (a restart without persistence, a dropped database).
    healed: std::sync::Mutex<std::collections::HashMap<(i64, String), i64>>,
    /// `(world, service) →` when a ready slice was last found on its server.
    checked: std::sync::Mutex<std::collections::HashMap<(i64, String), std::time::Instant>>,
    /// `(world, service) → generation` at which this daemon asked a slice of a world that
    /// is down to stop its own server: asked once per `binky down`, not at every resync.
    paused: std::sync::Mutex<std::collections::HashMap<(i64, String), i64>>,
}

impl<E: SliceEffects, S: Supervisor> SliceController<E, S> {
    /// A controller over `store`, doing its work with `work`.
    pub fn new(store: Store, work: Arc<SliceWork<E, S>>) -> Self {
        SliceController {
            store,
            work,
            healed: Default::default(),
            checked: Default::default(),
            paused: Default::default(),
        }
    }

    fn save(&self, world: &World, row: &SliceRow) -> Result<(), StoreError> {
        let tokens = serde_json::to_string(&row.tokens).unwrap_or_else(|_| "{}".into());
        self.store.write(owner::Slice, |tx| {
            write::slice::save(tx, world.id, row, &tokens)
        })
    }

    fn event(&self, world: &World, kind: &str, msg: &str) {
        if let Err(err) = self.store.event(world.id, kind, msg) {
            tracing::warn!(%err, "cannot record event");
        }
    }

    /// Pretend every drift check happened `ago` earlier (a test cannot wait DRIFT_CHECK).
    #[cfg(test)]
    pub(crate) fn age_drift_checks(&self, ago: Duration) {
        let mut checked = self.checked.lock().unwrap_or_else(|e| e.into_inner());
        for at in checked.values_mut() {
            *at = at.checked_sub(ago).expect("the clock started long ago");
        }
    }

    /// The adapter effects.
    fn effects(&self) -> &E {
        self.work.effects()
    }

    /// The spec of the slice `row` records, as it was made: on the server it was made on,
    /// even if binky.toml changed meanwhile (`res` is the service's config now, if it is
    /// still there).
    fn made_spec(&self, world: &World, row: &SliceRow, res: Option<&Resource>) -> SliceSpec {
        let mut spec = match res {
            Some(r) => self
                .work
                .spec_of(world, &row.service, r, &row.name, &row.secret),
            None => SliceSpec {
                adapter: row.adapter.clone(),
                slice: row.name.clone(),
                secret: row.secret.clone(),
                admin_url: None,
                options: BTreeMap::new(),
                buckets: Vec::new(),
                search_path: world.env.get("PATH").cloned(),
            },
        };
        spec.adapter = row.adapter.clone();
        if row.admin_url.is_some() {
            spec.admin_url = row.admin_url.clone();
        }
        spec
    }

    /// A world that is down: nothing is provisioned, and once none of its processes runs,
    /// each slice that runs something only while its world runs (a redis-server of the
    /// world's own) stops it, keeping its data; the next `binky up` starts it again.
    async fn stop_with_world(&self, world: &World) -> Result<Applied, SliceError> {
        let rows: Vec<SliceRow> = self
            .store
            .read(|c| store::slices(c, world.id))?
            .into_iter()
            .filter(|r| r.state != SliceState::Stopped)
            .collect();
        if rows.is_empty() {
            return Ok(Applied::await_change(vec![Condition::ok(
                CONDITION,
                "WorldStopped",
                "the world is down; its slices are kept",
            )]));
        }
        // Its processes may still use them (a worker flushing its queue as it stops).
        let running = self
            .store
            .read(|c| store::processes(c, world.id))?
            .iter()
            .any(|p| p.pid.is_some());
        if running {
            return Ok(Applied {
                action: Action::Requeue(Duration::from_millis(300)),
                conditions: vec![Condition::waiting(
                    CONDITION,
                    "WorldStopping",
                    "waiting for the world's processes to stop before stopping its slices' own servers",
                )],
            });
        }
        let mut stopped = Vec::new();
        for row in rows {
            let service = row.service.clone();
            if self.pause(world, row).await? {
                stopped.push(service);
            }
        }
        if !stopped.is_empty() {
            self.event(
                world,
                "slice",
                &format!(
                    "stopped the own server of {} with the world (data kept)",
                    stopped.join(", ")
                ),
            );
        }
        Ok(Applied::await_change(vec![Condition::ok(
            CONDITION,
            "WorldStopped",
            "the world is down; its slices are kept",
        )]))
    }

    /// Asks the slice `row` of a world that is down to stop its own server, once per
    /// `binky down`. Returns whether it stopped one (a slice on a shared server has none).
    async fn pause(&self, world: &World, mut row: SliceRow) -> Result<bool, SliceError> {
        let key = (world.id, row.service.clone());
        let asked = self
            .paused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .copied();
        if asked == Some(world.generation) {
            return Ok(false);
        }
        let res = world.spec.resource(&row.service).cloned();
        let spec = self.made_spec(world, &row, res.as_ref());
        match self.effects().pause(&spec).await {
            Ok(true) => {
                row.state = SliceState::Stopped;
                row.message = "its server stopped with the world (data kept)".into();
                self.save(world, &row)?;
                return Ok(true);
            }
            Ok(false) => {
                self.paused
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, world.generation);
            }
            Err(SliceFault::Transient(detail)) => {
                return Err(SliceError::Waiting {
                    service: row.service.clone(),
                    adapter: row.adapter.clone(),
                    detail,
                })
            }
            Err(SliceFault::Permanent(detail)) => self.event(
                world,
                "slice_failed",
                &format!("{}: could not stop its server: {detail}", row.service),
            ),
        }
        Ok(false)
    }

    /// Drops the slice `row` of a removed world from its server (`res`: its service's
    /// config now, if it is still there). Returns whether it was dropped: with `--force`, a
    /// server that does not answer does not hold the removal for ever, and a slice nothing
    /// can drop (an adapter that is gone) does not hang it; each says what may be left. A
    /// slice its server says another binky home made (one named alike before homes had an
    /// identity, which that home adopted) is that home's: left as it is, and said so.
    async fn drop_slice(
        &self,
        world: &World,
        row: &SliceRow,
        res: Option<&Resource>,
    ) -> Result<bool, SliceError> {
        let spec = self.made_spec(world, row, res);
        match self.effects().teardown(&spec).await {
            Ok(Teardown::Dropped) => Ok(true),
            Ok(Teardown::OtherHome(home)) => {
                self.event(
                    world,
                    "slice",
                    &format!(
                        "{}: left {} slice {}: it belongs to another binky home ({home}), which uses it; this home forgets it",
                        row.service, row.adapter, row.name
                    ),
                );
                Ok(false)
            }
            Err(SliceFault::Transient(detail)) if world.force_delete => {
                self.event(
                    world,
                    "slice_failed",
                    &format!(
                        "{}: could not reach its {} server to drop slice {} ({detail}); forgotten (--force): drop `{}` on that server when it is back",
                        row.service, row.adapter, row.name, row.name
                    ),
                );
                Ok(false)
            }
            Err(SliceFault::Transient(detail)) => Err(SliceError::Unreachable {
                world: world.name.clone(),
                service: row.service.clone(),
                slice: row.name.clone(),
                adapter: row.adapter.clone(),
                detail,
            }),
            Err(SliceFault::Permanent(detail)) => {
                self.event(
                    world,
                    "slice_failed",
                    &format!(
                        "{}: could not drop slice {}: {detail}",
                        row.service, row.name
                    ),
                );
                Ok(false)
            }
        }
    }

    /// A slice is ready at this generation: record it (and that this daemon healed it).
    fn mark_ready(
        &self,
        world: &World,
        row: &mut SliceRow,
        key: (i64, String),
    ) -> Result<String, SliceError> {
        row.state = SliceState::Ready;
        row.failed_generation = None;
        row.message = String::new();
        self.save(world, row)?;
        self.healed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, world.generation);
        Ok(format!("{}={}", row.service, row.name))
    }
}

impl<E: SliceEffects, S: Supervisor> SliceController<E, S> {
    /// What a user world that selects shared adapter services waits for: their slices in
    /// the project's shared world, ready (`None` when they are, or it selects none).
    fn shared_slices(
        &self,
        world: &World,
        selected: &BTreeSet<String>,
    ) -> Result<Option<Applied>, SliceError> {
        let shared: Vec<&String> = selected
            .iter()
            .filter(|n| !world.runs(n) && world.spec.services[*n].resource().is_some())
            .collect();
        if shared.is_empty() || world.desired != store::DesiredState::Running {
            return Ok(None);
        }
        let slices = self.store.read(|c| store::slices_seen_by(c, world))?;
        for name in shared {
            match slices.iter().find(|s| &s.service == name) {
                Some(s) if s.state == SliceState::Ready => {}
                Some(s) if s.state == SliceState::Failed => {
                    return Ok(Some(Applied::await_change(vec![Condition::failed(
                        CONDITION,
                        "SliceFailed",
                        format!("{name} (shared by the project's worlds): {}", s.message),
                    )])))
                }
                other => {
                    let why = other
                        .map(|s| s.message.clone())
                        .filter(|m| !m.is_empty())
                        .unwrap_or_else(|| "being made".into());
                    // The shared world nudges its users when its slices change; a resync
                    // would do too.
                    return Ok(Some(Applied {
                        action: Action::Requeue(Duration::from_secs(5)),
                        conditions: vec![Condition::waiting(
                            CONDITION,
                            "Waiting",
                            format!("{name}: waiting for the project's shared slice ({why})"),
                        )],
                    }));
                }
            }
        }
        Ok(None)
    }

    /// Converges one wanted slice (`row`, as recorded or new): made by cloning its golden
    /// template or by its adapter, then migrated and seeded as due, and recorded ready.
    async fn converge(
        &self,
        world: &World,
        res: &Resource,
        mut row: SliceRow,
        layout: Option<&Layout>,
    ) -> Result<SliceStep, SliceError> {
        let service = row.service.clone();
        if row.state == SliceState::Failed && row.failed_generation == Some(world.generation) {
            return Ok(SliceStep::Report(failed(
                "SliceFailed",
                format!("{service}: {}", row.message),
            )));
        }
        let healed = self
            .healed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(world.id, service.clone()))
            .copied()
            == Some(world.generation);
        let spec = self
            .work
            .spec_of(world, &service, res, &row.name, &row.secret);
        // An admin_url (or option) from a variable `binky up` did not have: say exactly
        // that, not "admin_url is not a URL".
        if let Some(why) = unset_settings(world, res) {
            return Ok(SliceStep::Report(failed(
                "EnvUnset",
                format!("{service}: {why}; set it in the environment of `binky up` and run `binky up {}` again", world.name),
            )));
        }
        self.check_drift(world, res, &spec, &mut row, healed)
            .await?;
        let due = Due::of(res, &row);
        // A ready slice is provisioned again at a new generation (healing a changed
        // password, say), unless its adapter's provision runs once per slice (external
        // adapters, written to binky 0.1.2's contract, need not be idempotent: a second
        // provision may fail).
        if row.state == SliceState::Ready
            && row.adapter == res.adapter
            && !due.any()
            && (healed || self.effects().provisions_once(&spec))
        {
            return Ok(SliceStep::Ready(format!("{service}={}", row.name)));
        }
        let healed = healed && row.state != SliceState::Pending;
        self.make(world, res, row, &spec, layout, healed).await
    }

    /// Makes the slice `row` records (cloned from its golden template, or provisioned:
    /// again only where `healed` does not say it was at this generation), runs its due
    /// `migrate` and `seed`, and records it ready.
    async fn make(
        &self,
        world: &World,
        res: &Resource,
        mut row: SliceRow,
        spec: &SliceSpec,
        layout: Option<&Layout>,
        healed: bool,
    ) -> Result<SliceStep, SliceError> {
        let service = row.service.clone();
        let key = (world.id, service.clone());
        let due = Due::of(res, &row);
        let fresh = row.address.is_none();
        // A new slice with `clone_from`: a server-side copy of the golden template,
        // when the adapter can; correctness never depends on it, only speed.
        if fresh && res.clone_from.is_some() {
            if let Some(step) = self.clone_step(world, res, spec, &mut row).await? {
                return Ok(step);
            }
        }
        let address = match self.provision(world, res, spec, &mut row, healed).await? {
            ControlFlow::Continue(address) => address,
            ControlFlow::Break(applied) => return Ok(SliceStep::Report(applied)),
        };
        record_address(&mut row, &res.adapter, &address);
        if fresh {
            self.event(
                world,
                "slice",
                &format!("{service}: provisioned {} slice {}", res.adapter, row.name),
            );
        }
        if due.any() {
            if let Some(why) = self.command_wait(world, &service, res, layout)? {
                return self.made_waiting(world, row, key, why);
            }
        }
        if let Some(layout) = layout {
            match self
                .run_due(world, res, &mut row, layout, &address, due)
                .await?
            {
                Ran::Done => {}
                Ran::Waits(why) => return self.made_waiting(world, row, key, why),
                Ran::Failed(applied) => return Ok(SliceStep::Report(applied)),
            }
        }
        Ok(SliceStep::Ready(self.mark_ready(world, &mut row, key)?))
    }

    /// The slice `row` is made at this generation, and its commands wait (`why`): it is
    /// reused, not provisioned again, once they may run; the world's other slices are made
    /// meanwhile.
    fn made_waiting(
        &self,
        world: &World,
        mut row: SliceRow,
        key: (i64, String),
        why: String,
    ) -> Result<SliceStep, SliceError> {
        row.state = SliceState::Provisioned;
        row.message = why.clone();
        self.save(world, &row)?;
        self.healed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, world.generation);
        Ok(SliceStep::Waiting(format!("{}: {why}", row.service)))
    }

    /// A new slice cloned from its golden template: ready, waiting for the template, or
    /// failed with it; `None` when it is made the slow way.
    async fn clone_step(
        &self,
        world: &World,
        res: &Resource,
        spec: &SliceSpec,
        row: &mut SliceRow,
    ) -> Result<Option<SliceStep>, SliceError> {
        let service = row.service.clone();
        Ok(Some(
            match self.clone_from_golden(world, &service, res, spec).await? {
                CloneOutcome::Cloned(address) => {
                    record_address(row, &res.adapter, &address);
                    // The template ran them: the copy has their effect.
                    row.migrate_hash = res.migrate.as_deref().map(hash);
                    row.seed_hash = res.seed.as_deref().map(hash);
                    SliceStep::Ready(self.mark_ready(world, row, (world.id, service))?)
                }
                // The world's other slices are made meanwhile: a template's build may need
                // them (`REDIS_URL = "${cache.url}"` in its env).
                CloneOutcome::Wait(why) => SliceStep::Waiting(format!("{service}: {why}")),
                CloneOutcome::Failed(why) => {
                    SliceStep::Report(failed("GoldenFailed", format!("{service}: {why}")))
                }
                CloneOutcome::Fallback => return Ok(None),
            },
        ))
    }

    /// Drift: a ready slice dropped from outside binky is made again, migrated and seeded
    /// (or cloned), not left empty. Checked at every new generation (`healed` is false) and
    /// otherwise at most every DRIFT_CHECK.
    async fn check_drift(
        &self,
        world: &World,
        res: &Resource,
        spec: &SliceSpec,
        row: &mut SliceRow,
        healed: bool,
    ) -> Result<(), SliceError> {
        if row.state != SliceState::Ready || row.adapter != res.adapter {
            return Ok(());
        }
        // A server known not to answer is not asked again here (the daemon asks it): each
        // ask would wait out its connect timeout.
        if row
            .admin_url
            .as_deref()
            .is_some_and(|u| self.effects().unanswered(u).is_some())
        {
            return Ok(());
        }
        let key = (world.id, row.service.clone());
        let due = !healed
            || self
                .checked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&key)
                .is_none_or(|t| t.elapsed() >= DRIFT_CHECK);
        if !due {
            return Ok(());
        }
        if let Ok(Some(false)) = self.effects().exists(spec).await {
            self.event(
                world,
                "slice_drift",
                &format!(
                    "{}: {} slice {} was dropped outside binky; making it again (provision, migrate, seed)",
                    row.service, res.adapter, row.name
                ),
            );
            row.address = None;
            row.migrate_hash = None;
            row.seed_hash = None;
            row.state = SliceState::Pending;
            self.save(world, row)?;
            self.healed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key);
        } else {
            self.checked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key, std::time::Instant::now());
        }
        Ok(())
    }

    /// The slice's address: the one already made when it can be reused, else provisioned
    /// by its adapter. A server that cannot be reached is an error (retried); a refusal
    /// fails the slice for this generation (`Break` with the world's report).
    async fn provision(
        &self,
        world: &World,
        res: &Resource,
        spec: &SliceSpec,
        row: &mut SliceRow,
        healed: bool,
    ) -> Result<ControlFlow<Applied, SliceAddress>, SliceError> {
        // Provisioned at this generation already (waiting for the worktree since):
        // reuse it instead of asking the server again.
        // An adapter that provisions once: its made slice is reused (a changed migrate
        // runs on it) instead of provisioned again.
        let made_once = self.effects().provisions_once(spec)
            && row.adapter == res.adapter
            && matches!(row.state, SliceState::Ready | SliceState::Provisioned);
        let reuse = ((healed && row.state == SliceState::Provisioned) || made_once)
            .then(|| {
                row.address.clone().map(|url| SliceAddress {
                    url,
                    tokens: row.tokens.clone(),
                    admin_url: row.admin_url.clone(),
                })
            })
            .flatten();
        let provisioned = match reuse {
            Some(a) => Ok(a),
            None => self.effects().provision(spec).await,
        };
        match provisioned {
            Ok(a) => Ok(ControlFlow::Continue(a)),
            Err(SliceFault::Transient(detail)) => {
                row.message = format!("waiting for its {} server: {detail}", res.adapter);
                self.save(world, row)?;
                Err(SliceError::Waiting {
                    service: row.service.clone(),
                    adapter: res.adapter.clone(),
                    detail,
                })
            }
            Err(SliceFault::Permanent(detail)) => {
                let said = format!("{}: {detail}", row.service);
                self.fail(world, row, "slice_failed", detail.to_string())?;
                Ok(ControlFlow::Break(failed("SliceFailed", said)))
            }
        }
    }

    /// Why migrate and seed cannot run yet: they run in the worktree, once the paths their
    /// workdir needs are brought into it (its `.venv`, say), and once the slices of other
    /// services they name are made.
    fn command_wait(
        &self,
        world: &World,
        service: &str,
        res: &Resource,
        layout: Option<&Layout>,
    ) -> Result<Option<String>, SliceError> {
        if layout.is_none() {
            return Ok(Some(
                "waiting for the worktree to run migrate and seed".to_owned(),
            ));
        }
        let brought = self.store.read(|c| {
            store::bootstrap_waits_to_migrate(
                c,
                world.id,
                &crate::env::workdir_rel(world, &res.workdir),
            )
        })?;
        if !brought.is_empty() {
            return Ok(Some(format!(
                "waiting for {} to be brought into the worktree to run migrate and seed",
                brought.join(", ")
            )));
        }
        Ok(crate::needs::said(
            &self.work.unmade_needs(world, service)?,
            "run migrate and seed",
        ))
    }

    /// Runs the slice's due `migrate`, then its due `seed`, in the worktree with the
    /// slice's address; a failing one fails the slice for this generation (with the
    /// world's report).
    async fn run_due(
        &self,
        world: &World,
        res: &Resource,
        row: &mut SliceRow,
        layout: &Layout,
        address: &SliceAddress,
        due: Due,
    ) -> Result<Ran, SliceError> {
        let service = row.service.clone();
        for (which, cmd, due) in [
            ("migrate", res.migrate.as_deref(), due.migrate),
            ("seed", res.seed.as_deref(), due.seed),
        ] {
            let Some(cmd) = cmd.filter(|_| due) else {
                continue;
            };
            row.state = if which == "migrate" {
                SliceState::Migrating
            } else {
                SliceState::Seeding
            };
            row.message = format!("running {which}");
            self.save(world, row)?;
            match self
                .work
                .run_command(world, layout, &service, res, which, cmd, address)
                .await
            {
                Ok(()) => {}
                Err(CommandError::Waits(why)) => return Ok(Ran::Waits(why)),
                Err(CommandError::Failed(msg)) => {
                    self.fail(world, row, &format!("{which}_failed"), msg.clone())?;
                    return Ok(Ran::Failed(failed(
                        "SliceFailed",
                        format!("{service}: {msg}"),
                    )));
                }
            }
            if which == "migrate" {
                row.migrate_hash = Some(hash(cmd));
            } else {
                row.seed_hash = Some(hash(cmd));
            }
        }
        Ok(Ran::Done)
    }

    /// Records the slice failed at this generation, with an event of `kind`.
    fn fail(
        &self,
        world: &World,
        row: &mut SliceRow,
        kind: &str,
        msg: String,
    ) -> Result<(), SliceError> {
        row.state = SliceState::Failed;
        row.failed_generation = Some(world.generation);
        row.message = msg;
        self.save(world, row)?;
        self.event(world, kind, &format!("{}: {}", row.service, row.message));
        Ok(())
    }

    /// The ready `wanted` slices of `world` whose server cannot be used now: (service, its
    /// trouble, whether the server is a managed one). Each such slice's row carries the
    /// trouble's message while it lasts (what `binky status` shows on the slice's line) and
    /// loses it once the server is back; a row already saying so is not written again.
    fn server_troubles(
        &self,
        world: &World,
        wanted: &[(String, Resource)],
    ) -> Result<Vec<(String, ServerTrouble, bool)>, SliceError> {
        let (servers, rows) = self
            .store
            .read(|c| Ok((store::servers(c)?, store::slices(c, world.id)?)))?;
        let mut out = Vec::new();
        for row in rows
            .iter()
            .filter(|r| r.state == SliceState::Ready && wanted.iter().any(|(s, _)| *s == r.service))
        {
            let Some(url) = row.admin_url.as_deref() else {
                continue;
            };
            let managed = servers.iter().any(|s| s.admin_url == url);
            let trouble = if managed {
                // The server watch records a death within a second: its record is trusted.
                managed_trouble(&servers, row, &world.name, |_| false)
            } else {
                self.effects().unanswered(url).map(|why| ServerTrouble {
                    stopped: false,
                    message: unanswered_message(&row.adapter, url, &why),
                })
            };
            let said = trouble.as_ref().map_or("", |t| t.message.as_str());
            if row.message != said {
                let mut changed = row.clone();
                changed.message = said.to_owned();
                self.save(world, &changed)?;
            }
            if let Some(t) = trouble {
                out.push((row.service.clone(), t, managed));
            }
        }
        Ok(out)
    }

    /// The world's report once each wanted slice is ready or waits for the worktree: what
    /// still waits (the worktree, a managed server that is down, the project's shared
    /// slices), else the ready slices.
    fn report(
        &self,
        world: &World,
        selected: &BTreeSet<String>,
        wanted: &[(String, Resource)],
        ready: Vec<String>,
        waiting: Option<String>,
    ) -> Result<Applied, SliceError> {
        if let Some(why) = waiting {
            return Ok(Applied {
                // The worktree controller nudges the world as it gets each path; looked at
                // again anyway.
                action: Action::Requeue(Duration::from_secs(1)),
                conditions: vec![Condition::waiting(CONDITION, "Waiting", why)],
            });
        }
        // The servers the ready slices live on: a managed one that is not running, or one
        // binky.toml names that does not answer.
        let troubles = self.server_troubles(world, wanted)?;
        if !troubles.is_empty() {
            let said = troubles
                .iter()
                .map(|(service, t, _)| format!("{service}: {}", t.message))
                .collect::<Vec<_>>()
                .join("; ");
            return Ok(if troubles.iter().any(|(_, t, _)| t.stopped) {
                // A person's choice, undone by a person: the server watch nudges the world
                // when the server runs again.
                Applied::await_change(vec![Condition::failed(CONDITION, "ServerStopped", said)])
            } else if troubles.iter().any(|(_, _, managed)| *managed) {
                Applied {
                    // The server watch nudges the world when the server is back.
                    action: Action::Requeue(Duration::from_secs(5)),
                    conditions: vec![Condition::waiting(CONDITION, "ServerDown", said)],
                }
            } else {
                Applied {
                    // The daemon asks the server again every few seconds and nudges the
                    // world when its answer changes.
                    action: Action::Requeue(Duration::from_secs(10)),
                    conditions: vec![Condition::waiting(CONDITION, "ServerUnavailable", said)],
                }
            });
        }
        if let Some(waiting) = self.shared_slices(world, selected)? {
            return Ok(waiting);
        }
        Ok(Applied::await_change(vec![Condition::ok(
            CONDITION,
            "Ready",
            ready.join(" "),
        )]))
    }
}

impl<E: SliceEffects, S: Supervisor> Controller for SliceController<E, S> {
    type Error = SliceError;

    fn kind(&self) -> Kind {
        Kind::Slice
    }

    async fn apply(&self, world: &World) -> Result<Applied, SliceError> {
        // The admission gate: nothing of a held world starts.
        if let Some(held) = crate::hold::hold(&self.store, world, CONDITION)? {
            return Ok(held);
        }
        if world.desired == DesiredState::Stopped {
            return self.stop_with_world(world).await;
        }
        let selected = world.spec.selected(world.group.as_deref());
        let wanted = wanted_slices(world, &selected);
        if wanted.is_empty() {
            // A shared adapter service's slice is the project's shared world's: this world
            // waits for it, and makes nothing (also below, once its own are made).
            if let Some(waiting) = self.shared_slices(world, &selected)? {
                return Ok(waiting);
            }
            return Ok(Applied::await_change(vec![Condition::ok(
                CONDITION,
                "NoSlices",
                "no adapter services",
            )]));
        }
        // Provisioning needs no worktree; only migrate and seed (run in it) wait for one.
        let layout = self
            .store
            .read(|c| store::worktree(c, world.id))?
            .filter(|w| w.state == WorktreeState::Ready)
            .map(|w| Layout { worktree: w.path });
        let rows: BTreeMap<String, SliceRow> = self
            .store
            .read(|c| store::slices(c, world.id))?
            .into_iter()
            .map(|r| (r.service.clone(), r))
            .collect();
        let mut ready = Vec::new();
        // A slice that waits (for the worktree, a path brought into it, its golden
        // template, another slice its commands name): the others are made meanwhile.
        let mut waiting: Option<String> = None;
        for (service, res) in &wanted {
            let row = match rows.get(service) {
                Some(r) => r.clone(),
                None => new_row(&self.store.read(store::home_id)?, world, service, res)?,
            };
            match self.converge(world, res, row, layout.as_ref()).await? {
                SliceStep::Ready(said) => ready.push(said),
                // The world's other slices are made meanwhile.
                SliceStep::Waiting(why) => {
                    waiting.get_or_insert(why);
                }
                SliceStep::Report(applied) => return Ok(applied),
            }
        }
        self.report(world, &selected, &wanted, ready, waiting)
    }

    async fn cleanup(&self, world: &World) -> Result<Cleanup, SliceError> {
        self.paused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(w, _), _| *w != world.id);
        for row in self.store.read(|c| store::slices(c, world.id))? {
            let res = world.spec.resource(&row.service).cloned();
            // Never made (its server's address came from an unset variable): nothing to drop.
            let never_made = row.address.is_none()
                && row.admin_url.is_none()
                && res
                    .as_ref()
                    .is_some_and(|r| unset_settings(world, r).is_some());
            let started = std::time::Instant::now();
            let dropped = !never_made && self.drop_slice(world, &row, res.as_ref()).await?;
            self.store.write(owner::Slice, |tx| {
                write::slice::remove(tx, world.id, &row.service)
            })?;
            if dropped {
                self.event(
                    world,
                    "slice",
                    &format!(
                        "{}: dropped {} slice {} in {}",
                        row.service,
                        row.adapter,
                        row.name,
                        crate::took::took(started.elapsed())
                    ),
                );
            }
        }
        Ok(Cleanup::Done)
    }
}

/// Where converging one slice came to.
enum SliceStep {
    /// Ready: `service=slice`, for the world's condition.
    Ready(String),
    /// Not ready yet, and the world's other slices are made meanwhile: made, its migrate
    /// and seed waiting for the worktree, a path brought into it or another slice they
    /// name; or waiting for its golden template. Why.
    Waiting(String),
    /// The world's report, now (the slice failed, or its golden template did).
    Report(Applied),
}

/// What running a slice's due commands came to.
enum Ran {
    /// They ran.
    Done,
    /// One names a slice not made yet: why.
    Waits(String),
    /// One failed: the world's report.
    Failed(Applied),
}

/// Which of a slice's commands are due: `migrate` when its text changed since it last
/// ran, `seed` once per slice.
#[derive(Clone, Copy)]
struct Due {
    migrate: bool,
    seed: bool,
}

impl Due {
    fn of(res: &Resource, row: &SliceRow) -> Due {
        Due {
            migrate: res
                .migrate
                .as_deref()
                .is_some_and(|m| row.migrate_hash.as_deref() != Some(&hash(m))),
            seed: res.seed.is_some() && row.seed_hash.is_none(),
        }
    }

    fn any(self) -> bool {
        self.migrate || self.seed
    }
}

/// Records where the slice `row` was made (by `adapter`).
fn record_address(row: &mut SliceRow, adapter: &str, address: &SliceAddress) {
    row.adapter = adapter.to_owned();
    row.address = Some(address.url.clone());
    row.tokens = address.tokens.clone();
    row.admin_url = address.admin_url.clone();
}

/// The world's condition for a slice that failed.
fn failed(reason: &str, message: String) -> Applied {
    Applied::await_change(vec![Condition::failed(CONDITION, reason, message)])
}

/// The adapter services of `world` that get a slice of its own, in the order their
/// slices are made: selected, run by this world (not shared), dependencies first.
fn wanted_slices(world: &World, selected: &BTreeSet<String>) -> Vec<(String, Resource)> {
    let wanted: Vec<(String, Resource)> = world
        .spec
        .start_order()
        .unwrap_or_else(|_| world.spec.services.keys().cloned().collect())
        .into_iter()
        .filter(|n| selected.contains(n) && world.runs(n))
        .filter_map(|n| world.spec.services[&n].resource().cloned().map(|r| (n, r)))
        .collect();
    referenced_first(wanted)
}

/// The record of a slice not made yet: its name (carrying `home`, this home's identity),
/// and a new secret. A slice recorded before keeps the name its record holds.
fn new_row(
    home: &str,
    world: &World,
    service: &str,
    res: &Resource,
) -> Result<SliceRow, SliceError> {
    Ok(SliceRow {
        service: service.to_owned(),
        adapter: res.adapter.clone(),
        name: slice_name(home, &world.project, &world.name, service),
        secret: random_secret()?,
        state: SliceState::Provisioning,
        address: None,
        tokens: BTreeMap::new(),
        admin_url: None,
        migrate_hash: None,
        seed_hash: None,
        failed_generation: None,
        message: String::new(),
    })
}

/// `wanted` with each adapter service after the ones its `migrate`, `seed` or `env` name
/// (`REDIS_URL = "${cache.url}"` for Django's settings): their slices exist by the time
/// its commands run. Otherwise in the order given; a cycle keeps it.
fn referenced_first(mut wanted: Vec<(String, Resource)>) -> Vec<(String, Resource)> {
    let refs: BTreeMap<String, Vec<String>> = wanted
        .iter()
        .map(|(name, res)| {
            let named = res
                .token_fields()
                .into_iter()
                .flat_map(|(_, text)| crate::tokens::Tokens::referenced_services(text))
                .filter(|r| r != name && wanted.iter().any(|(w, _)| w == r))
                .collect();
            (name.clone(), named)
        })
        .collect();
    let mut out: Vec<(String, Resource)> = Vec::with_capacity(wanted.len());
    while !wanted.is_empty() {
        let next = wanted
            .iter()
            .position(|(name, _)| {
                refs[name]
                    .iter()
                    .all(|r| out.iter().any(|(done, _)| done == r))
            })
            .unwrap_or(0);
        out.push(wanted.remove(next));
    }
    out
}
