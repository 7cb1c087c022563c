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
mod make;
mod named;
mod stop;
mod trouble;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use self::make::SliceStep;
pub use self::named::{named_servers, NamedServer};
pub use self::trouble::{managed_trouble, unanswered_message, ServerTrouble};
use crate::adapter::{random_secret, slice_name, Cause, SliceEffects, SliceSpec};
use crate::adapter::{unset_settings, SliceWork};
use crate::env::Layout;
use crate::registry::Kind;
use crate::runtime::{Action, Applied, Cleanup, Condition, Controller, ReconcileError};
use crate::spec::Resource;
use crate::store::{self, owner, write, SliceRow, Store, StoreError, World};
use crate::store::{DesiredState, SliceState, WorktreeState};
use crate::supervisor::Supervisor;

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
