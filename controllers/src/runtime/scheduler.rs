//! The per-controller scheduler: a due time per key, at most one reconcile per key.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::{reconcile_one, report_panic, Controller, KeyBackoff, Msg, Outcome, Timings, Trigger};
use crate::store::{self, Store, WorldId};

/// Tuning of the runtime.
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Every world is reconciled at least this often.
    pub resync: Duration,
    /// How long running reconciles may take to finish at shutdown.
    pub shutdown_grace: Duration,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            // A safety net only: every change nudges the controllers that care.
            resync: Duration::from_secs(300),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A controller's scheduler, ready to run.
pub(crate) struct Pending {
    start: Box<dyn FnOnce(watch::Receiver<bool>) -> BoxFuture + Send>,
}

impl Pending {
    pub(crate) fn new<C: Controller>(
        controller: Arc<C>,
        store: Store,
        trigger: Trigger,
        config: RuntimeConfig,
        rx: mpsc::UnboundedReceiver<Msg>,
        timings: Timings,
    ) -> Pending {
        Pending {
            start: Box::new(move |stop| {
                Box::pin(run_controller(
                    controller, store, trigger, config, rx, stop, timings,
                ))
            }),
        }
    }

    pub(crate) fn run(self, stop: watch::Receiver<bool>) -> BoxFuture {
        (self.start)(stop)
    }
}

fn schedule(due: &mut HashMap<WorldId, Instant>, id: WorldId, at: Instant) {
    due.entry(id)
        .and_modify(|t| {
            if at < *t {
                *t = at
            }
        })
        .or_insert(at);
}

/// How many reconciles of one controller run at once: more only queue on the store.
const MAX_RUNNING: usize = 16;

fn schedule_all(due: &mut HashMap<WorldId, Instant>, store: &Store, at: Instant) {
    schedule_spread(due, store, at, Duration::ZERO);
}

/// Every world, spread evenly over `over` from `at` (a resync: each world once per period,
/// not all of them in one burst).
fn schedule_spread(
    due: &mut HashMap<WorldId, Instant>,
    store: &Store,
    at: Instant,
    over: Duration,
) {
    match store.read(store::world_ids) {
        Ok(ids) => {
            let n = ids.len().max(1) as u32;
            for (i, id) in ids.into_iter().enumerate() {
                schedule(due, id, at + over * i as u32 / n);
            }
        }
        Err(err) => tracing::warn!(%err, "cannot list worlds for a resync"),
    }
}

/// One controller's scheduler state: what is due when, what runs, each key's backoff, and
/// its housekeeping.
struct Scheduler<C: Controller> {
    controller: Arc<C>,
    store: Store,
    trigger: Trigger,
    timings: Timings,
    name: &'static str,
    due: HashMap<WorldId, Instant>,
    running: HashSet<WorldId>,
    backoffs: HashMap<WorldId, KeyBackoff>,
    done_tx: mpsc::UnboundedSender<(WorldId, KeyBackoff, Outcome)>,
    /// Housekeeping: when it is due next, whether it runs, and where it reports back.
    house_due: Option<Instant>,
    housekeeping: bool,
    house_tx: mpsc::UnboundedSender<Option<Duration>>,
}

impl<C: Controller> Scheduler<C> {
    /// Start the keys that are due, the longest waiting first, as many as there is room for.
    fn start_due(&mut self, now: Instant) {
        let mut ready: Vec<(Instant, WorldId)> = self
            .due
            .iter()
            .filter(|(id, at)| **at <= now && !self.running.contains(*id))
            .map(|(id, at)| (*at, *id))
            .collect();
        ready.sort();
        ready.truncate(MAX_RUNNING.saturating_sub(self.running.len()));
        for (_, id) in ready {
            self.due.remove(&id);
            self.running.insert(id);
            let backoff = self.backoffs.remove(&id).unwrap_or_default();
            self.spawn_reconcile(id, backoff);
        }
    }

    /// Reconcile `id` in a task of its own, which reports back (a panic too: otherwise the key
    /// stays "running" and is never reconciled again until the daemon restarts).
    fn spawn_reconcile(&self, id: WorldId, mut backoff: KeyBackoff) {
        let (controller, store, trigger, done_tx, timings, name) = (
            self.controller.clone(),
            self.store.clone(),
            self.trigger.clone(),
            self.done_tx.clone(),
            self.timings.clone(),
            self.name,
        );
        tokio::spawn(async move {
            let started = Instant::now();
            let run = reconcile_one(&*controller, &store, &trigger, &mut backoff, id);
            let outcome = match CatchUnwind(Box::pin(run)).await {
                Ok(outcome) => outcome,
                Err(panic) => {
                    let delay = backoff.next_delay();
                    let why = panic_message(&*panic);
                    report_panic(&*controller, &store, &trigger, id, &why, backoff.attempts());
                    Outcome {
                        next: Some(delay),
                        forget: false,
                        cleaned: false,
                    }
                }
            };
            timings.reconciled(name, started.elapsed());
            let _ = done_tx.send((id, backoff, outcome));
        });
    }

    /// Start housekeeping when it is due and not running.
    fn start_housekeeping(&mut self, now: Instant) {
        if self.housekeeping || self.house_due.is_none_or(|at| at > now) {
            return;
        }
        self.house_due = None;
        self.housekeeping = true;
        let (controller, house_tx, timings, name) = (
            self.controller.clone(),
            self.house_tx.clone(),
            self.timings.clone(),
            self.name,
        );
        tokio::spawn(async move {
            let started = Instant::now();
            let run = async move { controller.housekeep().await };
            let next = match CatchUnwind(Box::pin(run)).await {
                Ok(next) => next,
                Err(panic) => {
                    tracing::error!(panic = %panic_message(&*panic), "housekeeping panicked");
                    None
                }
            };
            timings.housekept(name, started.elapsed());
            let _ = house_tx.send(next);
        });
    }

    /// When something is due next (at the limit, the next to finish makes room and wakes the
    /// loop instead).
    fn next_due(&self) -> Option<Instant> {
        let full = self.running.len() >= MAX_RUNNING;
        self.due
            .iter()
            .filter(|(id, _)| !full && !self.running.contains(*id))
            .map(|(_, at)| *at)
            .chain(self.house_due.filter(|_| !self.housekeeping))
            .min()
    }

    /// Housekeeping finished: run again after `next`, if it asked to.
    fn housekept(&mut self, next: Option<Duration>) {
        self.housekeeping = false;
        if let Some(after) = next {
            soonest(&mut self.house_due, Instant::now() + after);
        }
    }

    /// A reconcile of `id` finished.
    fn finished(&mut self, id: WorldId, backoff: KeyBackoff, outcome: Outcome) {
        self.running.remove(&id);
        if outcome.cleaned {
            soonest(&mut self.house_due, Instant::now());
        }
        if outcome.forget {
            self.due.remove(&id);
            return;
        }
        self.backoffs.insert(id, backoff);
        if let Some(after) = outcome.next {
            schedule(&mut self.due, id, Instant::now() + after);
        }
    }

    /// A nudge: one world (unless this controller sent it), or every world.
    fn nudged(&mut self, msg: Msg) {
        match msg {
            Msg::World(id, origin) if origin != Some(self.name) => {
                schedule(&mut self.due, id, Instant::now())
            }
            Msg::World(..) => {}
            Msg::All => {
                schedule_all(&mut self.due, &self.store, Instant::now());
                soonest(&mut self.house_due, Instant::now());
            }
        }
    }

    /// The resync: every world once over `period`, and housekeeping now.
    fn resync(&mut self, period: Duration) {
        schedule_spread(&mut self.due, &self.store, Instant::now(), period);
        soonest(&mut self.house_due, Instant::now());
    }
}

async fn run_controller<C: Controller>(
    controller: Arc<C>,
    store: Store,
    trigger: Trigger,
    config: RuntimeConfig,
    mut rx: mpsc::UnboundedReceiver<Msg>,
    mut stop: watch::Receiver<bool>,
    timings: Timings,
) {
    controller.startup().await;
    let (house_tx, mut house_rx) = mpsc::unbounded_channel::<Option<Duration>>();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(WorldId, KeyBackoff, Outcome)>();
    let mut s = Scheduler {
        name: controller.kind().name(),
        controller,
        store,
        trigger,
        timings,
        due: HashMap::new(),
        running: HashSet::new(),
        backoffs: HashMap::new(),
        done_tx,
        house_due: Some(Instant::now()),
        housekeeping: false,
        house_tx,
    };
    let mut resync = tokio::time::interval_at(Instant::now() + config.resync, config.resync);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let now = Instant::now();
        s.start_due(now);
        s.start_housekeeping(now);
        tokio::select! {
            biased;
            _ = stop.changed() => break,
            Some(next) = house_rx.recv() => s.housekept(next),
            Some((id, backoff, outcome)) = done_rx.recv() => s.finished(id, backoff, outcome),
            Some(msg) = rx.recv() => s.nudged(msg),
            _ = resync.tick() => s.resync(config.resync),
            _ = sleep_until(s.next_due()) => {}
        }
    }
    // Let running reconciles finish, so a stop never cuts a reconcile in half on purpose.
    let deadline = Instant::now() + config.shutdown_grace;
    while !s.running.is_empty() {
        tokio::select! {
            Some((id, _, _)) = done_rx.recv() => { s.running.remove(&id); }
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
}

/// Make `due` no later than `at`.
fn soonest(due: &mut Option<Instant>, at: Instant) {
    if due.is_none_or(|d| at < d) {
        *due = Some(at);
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Polls a future, turning a panic inside it into an `Err` with the panic's payload.
struct CatchUnwind<F>(Pin<Box<F>>);

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Box<dyn std::any::Any + Send>>;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let inner = self.0.as_mut();
        // The future is dropped right after a panic and never polled again, so no broken
        // invariant inside it can be observed.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(std::task::Poll::Ready(out)) => std::task::Poll::Ready(Ok(out)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(panic) => std::task::Poll::Ready(Err(panic)),
        }
    }
}

/// The text a panic was raised with.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}
