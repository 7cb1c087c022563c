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

async fn run_controller<C: Controller>(
    controller: Arc<C>,
    store: Store,
    trigger: Trigger,
    config: RuntimeConfig,
    mut rx: mpsc::UnboundedReceiver<Msg>,
    mut stop: watch::Receiver<bool>,
    timings: Timings,
) {
    let name = controller.kind().name();
    controller.startup().await;
    // Housekeeping: when it is due next, whether it runs, and where it reports back.
    let mut house_due: Option<Instant> = Some(Instant::now());
    let mut housekeeping = false;
    let (house_tx, mut house_rx) = mpsc::unbounded_channel::<Option<Duration>>();
    let mut due: HashMap<WorldId, Instant> = HashMap::new();
    let mut running: HashSet<WorldId> = HashSet::new();
    let mut backoffs: HashMap<WorldId, KeyBackoff> = HashMap::new();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(WorldId, KeyBackoff, Outcome)>();
    let mut resync = tokio::time::interval_at(Instant::now() + config.resync, config.resync);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    loop {
        let now = Instant::now();
        let mut ready: Vec<(Instant, WorldId)> = due
            .iter()
            .filter(|(id, at)| **at <= now && !running.contains(*id))
            .map(|(id, at)| (*at, *id))
            .collect();
        // The longest waiting first, as many as there is room for.
        ready.sort();
        ready.truncate(MAX_RUNNING.saturating_sub(running.len()));
        for (_, id) in ready {
            due.remove(&id);
            running.insert(id);
            let mut backoff = backoffs.remove(&id).unwrap_or_default();
            let (controller, store, trigger, done_tx, timings) = (
                controller.clone(),
                store.clone(),
                trigger.clone(),
                done_tx.clone(),
                timings.clone(),
            );
            tokio::spawn(async move {
                let started = Instant::now();
                // A panicking reconcile must still report back: otherwise this key stays
                // "running" and is never reconciled again until the daemon restarts.
                let run = reconcile_one(&*controller, &store, &trigger, &mut backoff, id);
                let outcome = match CatchUnwind(Box::pin(run)).await {
                    Ok(outcome) => outcome,
                    Err(panic) => {
                        let delay = backoff.next_delay();
                        report_panic(
                            &*controller,
                            &store,
                            &trigger,
                            id,
                            &panic_message(&*panic),
                            backoff.attempts(),
                        );
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
        if !housekeeping && house_due.is_some_and(|at| at <= now) {
            house_due = None;
            housekeeping = true;
            let (controller, house_tx, timings) =
                (controller.clone(), house_tx.clone(), timings.clone());
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
        // At the limit, the next to finish makes room (and wakes this loop).
        let full = running.len() >= MAX_RUNNING;
        let next_due = due
            .iter()
            .filter(|(id, _)| !full && !running.contains(*id))
            .map(|(_, at)| *at)
            .chain(house_due.filter(|_| !housekeeping))
            .min();
        tokio::select! {
            biased;
            _ = stop.changed() => break,
            Some(next) = house_rx.recv() => {
                housekeeping = false;
                if let Some(after) = next {
                    soonest(&mut house_due, Instant::now() + after);
                }
            }
            Some((id, backoff, outcome)) = done_rx.recv() => {
                running.remove(&id);
                if outcome.cleaned {
                    soonest(&mut house_due, Instant::now());
                }
                if outcome.forget {
                    due.remove(&id);
                } else {
                    backoffs.insert(id, backoff);
                    if let Some(after) = outcome.next {
                        schedule(&mut due, id, Instant::now() + after);
                    }
                }
            }
            Some(msg) = rx.recv() => match msg {
                Msg::World(id, origin) if origin != Some(controller.kind().name()) => {
                    schedule(&mut due, id, Instant::now())
                }
                Msg::World(..) => {}
                Msg::All => {
                    schedule_all(&mut due, &store, Instant::now());
                    soonest(&mut house_due, Instant::now());
                }
            },
            _ = resync.tick() => {
                schedule_spread(&mut due, &store, Instant::now(), config.resync);
                soonest(&mut house_due, Instant::now());
            }
            _ = sleep_until(next_due) => {}
        }
    }

    // Let running reconciles finish, so a stop never cuts a reconcile in half on purpose.
    let deadline = Instant::now() + config.shutdown_grace;
    while !running.is_empty() {
        tokio::select! {
            Some((id, _, _)) = done_rx.recv() => { running.remove(&id); }
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
