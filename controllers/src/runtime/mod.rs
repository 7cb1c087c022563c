//! The reconcile runtime: one scheduler per controller, keyed by world.
//!
//! Shaped like kube-runtime's controller loop, with its gap closed: the runtime, not the
//! controller, counts attempts per key and backs off exponentially on errors, resetting
//! on success.
//!
//! # Guarantees
//! - Never two reconciles of the same world by the same controller at once; requests for
//!   a key that is running or already queued are merged (the earliest due time wins).
//! - `apply`/`cleanup` are never told why they run: a nudge, a resync, a requeue and a
//!   retry look the same.
//! - After a successful `apply`, the runtime writes the controller's conditions and
//!   `observed_generation` (the generation the controller was handed) to the store.
//!   When a controller's conditions change, every controller is nudged for that world.
//! - Deletion works like finalizers: a world marked deleted gets `cleanup` from every
//!   controller that still holds its finalizer; the row is deleted when none is left. A
//!   project's shared world is torn down only once no world that uses it is left.
//! - A periodic resync visits every world, so correctness never depends on a nudge.
//! - A reconcile that panics is an error like any other: its controller's condition says
//!   `ReconcilePanicked` with the panic's message, the key is retried with backoff, and the
//!   other worlds go on.
//! - A controller's housekeeping (work of no world's) runs at startup, at each resync, on a
//!   nudge of every world, after each finished cleanup and when it asked to; one at a time,
//!   a panic in it logged and the next run scheduled as usual.

mod backoff;
mod scheduler;
mod timings;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

pub use crate::registry::{Kind, Reporter};
pub use crate::store::Condition;
use crate::store::{self, owner, write, CondStatus, Store, StoreError, World, WorldId};

pub use self::backoff::{doubling_delay, KeyBackoff};
pub use self::scheduler::RuntimeConfig;
pub use self::timings::{Timing, Timings};

/// What to do with a key after a successful reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Reconcile again after this long (unless nudged sooner).
    Requeue(Duration),
    /// Reconcile again when nudged or at the next resync.
    AwaitChange,
}

/// The result of a `cleanup`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cleanup {
    /// This controller's part is torn down: its finalizer can go.
    Done,
    /// Not yet (waiting for another controller's part, or for a slow teardown).
    Pending(Action),
}

/// The result of a successful `apply`.
#[derive(Clone, Debug)]
pub struct Applied {
    /// When to come back.
    pub action: Action,
    /// What the controller concluded.
    pub conditions: Vec<Condition>,
}

impl Applied {
    /// Done for now, with these conditions: look again when something changes.
    pub fn await_change(conditions: Vec<Condition>) -> Applied {
        Applied {
            action: Action::AwaitChange,
            conditions,
        }
    }
}

/// An error a controller returns: typed, with a reason for the condition it becomes.
pub trait ReconcileError: std::error::Error + Send + Sync + 'static {
    /// CamelCase reason for the condition.
    fn reason(&self) -> &'static str;
    /// Retrying will not help: a person has to act.
    fn stalled(&self) -> bool {
        false
    }
}

/// A controller: converges one kind of reality for each world.
pub trait Controller: Send + Sync + 'static {
    /// Its typed error.
    type Error: ReconcileError;

    /// Which of binky's controllers it is: its name (the finalizer it holds, the
    /// `controller` column it writes), the condition its errors are reported on, and its
    /// place in the teardown order.
    fn kind(&self) -> Kind;

    /// Make reality match the world's desired record. Idempotent.
    fn apply(&self, world: &World) -> impl Future<Output = Result<Applied, Self::Error>> + Send;

    /// Tear this controller's part of a deleted world down. Idempotent.
    fn cleanup(&self, world: &World) -> impl Future<Output = Result<Cleanup, Self::Error>> + Send;

    /// Runs once when the daemon starts, before the first reconcile.
    fn startup(&self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Work of this controller that belongs to no world (a golden template no world uses
    /// any more): run after [`Controller::startup`], at every resync, when every world is
    /// nudged and after each finished `cleanup`, never twice at once. The answer is when it
    /// wants to run again at the latest (`None`: the next of those is soon enough).
    fn housekeep(&self) -> impl Future<Output = Option<Duration>> + Send {
        async { None }
    }
}

#[derive(Debug)]
pub(crate) enum Msg {
    /// Reconcile this world; the origin controller (if any) ignores its own nudge, so
    /// its error backoff is not cut short by the condition it just wrote.
    World(WorldId, Option<&'static str>),
    All,
}

/// Wakes controllers up for a world (or all worlds). Cheap to clone.
#[derive(Clone, Default)]
pub struct Trigger {
    senders: Arc<Mutex<Vec<mpsc::UnboundedSender<Msg>>>>,
}

impl std::fmt::Debug for Trigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Trigger")
    }
}

impl Trigger {
    /// Nudge every controller for one world.
    pub fn world(&self, id: WorldId) {
        self.send(|| Msg::World(id, None));
    }

    /// Nudge every controller but `origin` for one world.
    pub fn others(&self, id: WorldId, origin: &'static str) {
        self.send(|| Msg::World(id, Some(origin)));
    }

    /// Nudge every controller for every world.
    pub fn all(&self) {
        self.send(|| Msg::All);
    }

    fn send(&self, msg: impl Fn() -> Msg) {
        let senders = self.senders.lock().unwrap_or_else(|e| e.into_inner());
        for tx in senders.iter() {
            let _ = tx.send(msg());
        }
    }

    fn subscribe(&self) -> mpsc::UnboundedReceiver<Msg> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.senders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tx);
        rx
    }
}

/// What one reconcile concluded, as the scheduler needs it.
#[derive(Default)]
pub(crate) struct Outcome {
    pub(crate) next: Option<Duration>,
    pub(crate) forget: bool,
    /// A `cleanup` finished: the controller's housekeeping looks at what the world left.
    pub(crate) cleaned: bool,
}

impl Outcome {
    /// Look again after `next` (`None`: when the world changes).
    fn next(next: Option<Duration>) -> Outcome {
        Outcome {
            next,
            ..Outcome::default()
        }
    }
}

/// Runs one reconcile of `world` by `controller`, writing what it concluded.
pub(crate) async fn reconcile_one<C: Controller>(
    controller: &C,
    store: &Store,
    trigger: &Trigger,
    backoff: &mut KeyBackoff,
    id: WorldId,
) -> Outcome {
    let world = match store.read(|c| store::world(c, id)) {
        Ok(Some(w)) => w,
        Ok(None) => {
            return Outcome {
                next: None,
                forget: true,
                cleaned: false,
            }
        }
        Err(err) => {
            tracing::warn!(controller = controller.kind().name(), world = id, %err, "cannot read world");
            return Outcome {
                next: Some(backoff.next_delay()),
                forget: false,
                cleaned: false,
            };
        }
    };
    if world.deleted {
        return cleanup_one(controller, store, trigger, backoff, &world).await;
    }
    match add_finalizer(store, id, controller.kind().name()) {
        // Marked deleted since it was read: nothing may be made for it now (a worktree made
        // after the last finalizer went would be left behind). Cleanup comes next.
        Ok(false) => {
            return Outcome {
                next: Some(std::time::Duration::ZERO),
                forget: false,
                cleaned: false,
            }
        }
        Ok(true) => {}
        Err(err) => {
            tracing::warn!(controller = controller.kind().name(), world = id, %err, "cannot add finalizer")
        }
    }
    match controller.apply(&world).await {
        Ok(applied) => {
            *backoff = KeyBackoff::default();
            match record_success(store, &world, controller.kind().name(), &applied.conditions) {
                Ok(true) => trigger.others(id, controller.kind().name()),
                Ok(false) => {}
                Err(err) => {
                    tracing::warn!(controller = controller.kind().name(), world = id, %err, "cannot record status")
                }
            }
            Outcome {
                next: match applied.action {
                    Action::Requeue(d) => Some(d),
                    Action::AwaitChange => None,
                },
                forget: false,
                cleaned: false,
            }
        }
        Err(err) => {
            let delay = backoff.next_delay();
            report_error(store, trigger, controller, &world, &err, backoff.attempts());
            Outcome {
                next: Some(delay),
                forget: false,
                cleaned: false,
            }
        }
    }
}

async fn cleanup_one<C: Controller>(
    controller: &C,
    store: &Store,
    trigger: &Trigger,
    backoff: &mut KeyBackoff,
    world: &World,
) -> Outcome {
    let name = controller.kind().name();
    let finalizers = match store.read(|c| store::finalizers(c, world.id)) {
        Ok(f) => f,
        Err(err) => {
            tracing::warn!(controller = name, world = world.id, %err, "cannot read finalizers");
            return Outcome::next(Some(backoff.next_delay()));
        }
    };
    if !finalizers.iter().any(|f| f == name) {
        return remove_unfinalized(name, store, trigger, backoff, world);
    }
    if let Some(wait) = wait_for_shared_users(name, store, backoff, world) {
        return wait;
    }
    // The declared teardown order: wait until those before this one are gone (their
    // finalizer's removal nudges the world).
    let before = controller.kind().teardown_after();
    if before
        .iter()
        .any(|k| finalizers.iter().any(|f| f == k.name()))
    {
        return Outcome::default();
    }
    match controller.cleanup(world).await {
        Ok(Cleanup::Done) => {
            *backoff = KeyBackoff::default();
            finalized(name, store, trigger, backoff, world)
        }
        Ok(Cleanup::Pending(action)) => {
            *backoff = KeyBackoff::default();
            Outcome::next(match action {
                Action::Requeue(d) => Some(d),
                Action::AwaitChange => None,
            })
        }
        Err(err) => {
            let delay = backoff.next_delay();
            report_error(store, trigger, controller, world, &err, backoff.attempts());
            Outcome::next(Some(delay))
        }
    }
}

/// A world removed before any controller took it up (its daemon was killed first) has no
/// finalizer whose removal would delete it: whoever sees that deletes it.
fn remove_unfinalized(
    controller: &str,
    store: &Store,
    trigger: &Trigger,
    backoff: &mut KeyBackoff,
    world: &World,
) -> Outcome {
    match remove_finalizer(store, world.id, "") {
        Ok(true) => {
            tracing::info!(world = %world.name, project = %world.project, "world removed");
            trigger.world(world.id);
        }
        Ok(false) => {}
        Err(err) => {
            tracing::warn!(controller, world = world.id, %err, "cannot remove an unfinalized world");
            return Outcome::next(Some(backoff.next_delay()));
        }
    }
    Outcome::default()
}

/// A project's shared world goes after the worlds that use it, as a dependency after its
/// dependents: their processes stop before the shared services they talk to. Their rows
/// go without nudging it, so it looks again shortly. `None` when nothing holds it.
fn wait_for_shared_users(
    controller: &str,
    store: &Store,
    backoff: &mut KeyBackoff,
    world: &World,
) -> Option<Outcome> {
    if !world.is_shared() {
        return None;
    }
    match store.read(|c| store::shared_users(c, world)) {
        Ok(users) if !users.is_empty() => Some(Outcome::next(Some(Duration::from_millis(500)))),
        Ok(_) => None,
        Err(err) => {
            tracing::warn!(controller, world = world.id, %err, "cannot read the worlds of a shared world");
            Some(Outcome::next(Some(backoff.next_delay())))
        }
    }
}

/// `controller` cleaned up `world`: its finalizer goes (the world with the last one), and
/// the world is nudged for the controllers that tear down after it.
fn finalized(
    controller: &str,
    store: &Store,
    trigger: &Trigger,
    backoff: &mut KeyBackoff,
    world: &World,
) -> Outcome {
    match remove_finalizer(store, world.id, controller) {
        Ok(true) => {
            tracing::info!(world = %world.name, project = %world.project, "world removed");
        }
        Ok(false) => {}
        Err(err) => {
            tracing::warn!(controller, world = world.id, %err, "cannot remove finalizer");
            return Outcome::next(Some(backoff.next_delay()));
        }
    }
    trigger.world(world.id);
    Outcome {
        next: None,
        forget: false,
        cleaned: true,
    }
}

/// Hold `controller`'s finalizer on `world`; false when the world is marked deleted and the
/// finalizer is not held (it can no longer be added).
fn add_finalizer(store: &Store, world: WorldId, controller: &str) -> Result<bool, StoreError> {
    // Held already (every reconcile after the first): nothing to write.
    if store.read(|c| store::finalizer_held(c, world, controller))? {
        return Ok(true);
    }
    store.write(owner::Runtime, |tx| {
        write::runtime::add_finalizer(tx, world, controller)
    })
}

/// Drop a finalizer (none: `""`); deletes the world row (marked deleted, so no finalizer can
/// be added any more) when none is left. Returns whether the world is gone.
fn remove_finalizer(store: &Store, world: WorldId, controller: &str) -> Result<bool, StoreError> {
    store.write(owner::Runtime, |tx| {
        write::runtime::remove_finalizer(tx, world, controller)
    })
}

/// Write conditions and observed generation; true when anything a reader cares about
/// changed (so other controllers should look again).
fn record_success(
    store: &Store,
    world: &World,
    controller: &str,
    conditions: &[Condition],
) -> Result<bool, StoreError> {
    // A reconcile that found everything as it was writes nothing: an idle world costs the
    // store no write transaction (and its readers no wake-up).
    if store.read(|c| store::recorded_already(c, world, controller, conditions))? {
        return Ok(false);
    }
    store.write(owner::Runtime, |tx| {
        let mut changed = write::runtime::write_conditions(tx, world, controller, conditions)?;
        if write::runtime::set_observed(tx, world, controller)? {
            changed = true;
        }
        Ok(changed)
    })
}

/// Record a condition that no controller owns (`ConfigValid`, `FilesWatched`) for `reporter`;
/// true when it changed.
pub fn set_condition(
    store: &Store,
    world: &World,
    reporter: Reporter,
    condition: Condition,
) -> Result<bool, StoreError> {
    store.write(owner::Runtime, |tx| {
        write::runtime::write_conditions(tx, world, reporter.as_str(), &[condition])
    })
}

fn report_error<C: Controller>(
    store: &Store,
    trigger: &Trigger,
    controller: &C,
    world: &World,
    err: &C::Error,
    attempts: u32,
) {
    let mut message = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        let text = s.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = s.source();
    }
    tracing::warn!(controller = controller.kind().name(), world = %world.name, attempts, error = %message, "reconcile failed");
    let cond = Condition {
        type_: controller.kind().condition(),
        status: CondStatus::False,
        reason: err.reason().to_owned(),
        message,
        stalled: err.stalled(),
    };
    record_failure(
        store,
        trigger,
        controller.kind().name(),
        world,
        cond,
        attempts,
    );
}

/// A reconcile of world `id` by `controller` panicked: recorded like an error (a condition
/// with the panic's message, an event, the attempt count), so the runtime retries it with
/// backoff and `binky status` says what happened.
pub(crate) fn report_panic<C: Controller>(
    controller: &C,
    store: &Store,
    trigger: &Trigger,
    id: WorldId,
    panic: &str,
    attempts: u32,
) {
    tracing::error!(
        controller = controller.kind().name(),
        world = id,
        attempts,
        panic,
        "reconcile panicked"
    );
    let world = match store.read(|c| store::world(c, id)) {
        Ok(Some(w)) => w,
        _ => return,
    };
    let cond = Condition::waiting(
        controller.kind().condition(),
        "ReconcilePanicked",
        format!(
            "binky's {} controller panicked ({panic}); retrying with backoff. This is a bug in \
             binky: please report it with `binky events {}`",
            controller.kind().name(),
            world.name
        ),
    );
    record_failure(
        store,
        trigger,
        controller.kind().name(),
        &world,
        cond,
        attempts,
    );
}

fn record_failure(
    store: &Store,
    trigger: &Trigger,
    controller: &'static str,
    world: &World,
    cond: Condition,
    attempts: u32,
) {
    let message = cond.message.clone();
    let result = store.write(owner::Runtime, |tx| {
        let changed =
            write::runtime::write_conditions(tx, world, controller, std::slice::from_ref(&cond))?;
        if changed {
            store::add_event(tx, world.id, "error", &format!("{controller}: {message}"))?;
        }
        write::runtime::set_attempts(tx, world.id, controller, attempts)?;
        Ok(changed)
    });
    if let Ok(true) = result {
        trigger.others(world.id, controller);
    }
}

/// The runtime: owns the schedulers of every registered controller.
pub struct Runtime {
    store: Store,
    trigger: Trigger,
    config: RuntimeConfig,
    tasks: Vec<scheduler::Pending>,
    timings: Timings,
}

impl Runtime {
    /// A runtime over `store`.
    pub fn new(store: Store, config: RuntimeConfig) -> Runtime {
        Runtime {
            store,
            trigger: Trigger::default(),
            config,
            tasks: Vec::new(),
            timings: Timings::default(),
        }
    }

    /// What each controller's reconciles and housekeeping cost, counted as they run.
    pub fn timings(&self) -> Timings {
        self.timings.clone()
    }

    /// The handle that wakes controllers.
    pub fn trigger(&self) -> Trigger {
        self.trigger.clone()
    }

    /// Register a controller.
    pub fn add<C: Controller>(&mut self, controller: Arc<C>) {
        let rx = self.trigger.subscribe();
        self.tasks.push(scheduler::Pending::new(
            controller,
            self.store.clone(),
            self.trigger.clone(),
            self.config.clone(),
            rx,
            self.timings.clone(),
        ));
    }

    /// Run every controller until `shutdown` resolves; running reconciles are allowed to
    /// finish (up to the configured grace).
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut handles = Vec::new();
        for task in self.tasks {
            handles.push(tokio::spawn(task.run(stop_rx.clone())));
        }
        self.trigger.all();
        shutdown.await;
        let _ = stop_tx.send(true);
        for h in handles {
            let _ = h.await;
        }
    }
}

#[cfg(test)]
mod tests;
