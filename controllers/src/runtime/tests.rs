use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex as StdMutex;

use super::*;
use crate::store::tests::new_world;

#[derive(Debug, thiserror::Error)]
#[error("fake failure {0}")]
struct FakeError(u32);

impl ReconcileError for FakeError {
    fn reason(&self) -> &'static str {
        "FakeFailure"
    }
    fn stalled(&self) -> bool {
        self.0 == 99
    }
}

#[derive(Default)]
struct Fake {
    in_flight: StdMutex<HashMap<WorldId, usize>>,
    max_in_flight: AtomicUsize,
    applies: AtomicUsize,
    cleanups: AtomicUsize,
    fail_first: AtomicUsize,
    stall: bool,
    times: StdMutex<Vec<tokio::time::Instant>>,
    work: Duration,
    cleanup_pending: AtomicUsize,
    /// `apply` of the world with this name panics this many times.
    panic_for: StdMutex<Option<(String, usize)>>,
    /// Which controller it plays (default: the route controller, which waits for none).
    kind: Option<Kind>,
    /// When each `cleanup` ran.
    cleaned_at: StdMutex<Vec<std::time::Instant>>,
    /// Housekeeping runs (and how many ran at once at most).
    housekeeps: AtomicUsize,
    housekeeping: AtomicUsize,
    max_housekeeping: AtomicUsize,
    /// What housekeeping answers: run again after this long.
    house_again: StdMutex<Option<Duration>>,
}

impl Controller for Fake {
    type Error = FakeError;

    fn kind(&self) -> Kind {
        self.kind.unwrap_or(Kind::Route)
    }

    async fn apply(&self, world: &World) -> Result<Applied, FakeError> {
        {
            let mut p = self.panic_for.lock().unwrap();
            if let Some((name, left)) = p.as_mut() {
                if *name == world.name && *left > 0 {
                    *left -= 1;
                    drop(p);
                    panic!("boom in {}", world.name);
                }
            }
        }
        {
            let mut m = self.in_flight.lock().unwrap();
            let n = m.entry(world.id).or_default();
            *n += 1;
            self.max_in_flight.fetch_max(*n, Ordering::SeqCst);
        }
        self.times.lock().unwrap().push(tokio::time::Instant::now());
        tokio::time::sleep(self.work).await;
        *self.in_flight.lock().unwrap().get_mut(&world.id).unwrap() -= 1;
        let n = self.applies.fetch_add(1, Ordering::SeqCst);
        if n < self.fail_first.load(Ordering::SeqCst) {
            return Err(FakeError(if self.stall { 99 } else { n as u32 }));
        }
        Ok(Applied::await_change(vec![Condition::ok(
            Kind::Route.condition(),
            "Fine",
            "all good",
        )]))
    }

    async fn cleanup(&self, _world: &World) -> Result<Cleanup, FakeError> {
        self.cleanups.fetch_add(1, Ordering::SeqCst);
        self.cleaned_at
            .lock()
            .unwrap()
            .push(std::time::Instant::now());
        if self.cleanup_pending.load(Ordering::SeqCst) > 0 {
            self.cleanup_pending.fetch_sub(1, Ordering::SeqCst);
            return Ok(Cleanup::Pending(Action::Requeue(Duration::from_millis(10))));
        }
        Ok(Cleanup::Done)
    }

    async fn housekeep(&self) -> Option<Duration> {
        let n = self.housekeeping.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_housekeeping.fetch_max(n, Ordering::SeqCst);
        tokio::time::sleep(self.work).await;
        self.housekeeping.fetch_sub(1, Ordering::SeqCst);
        self.housekeeps.fetch_add(1, Ordering::SeqCst);
        *self.house_again.lock().unwrap()
    }
}

struct Harness {
    _dir: tempfile::TempDir,
    store: Store,
    trigger: Trigger,
    timings: super::Timings,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

fn start(fake: Arc<Fake>, resync: Duration) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    start_with(dir, store, fake, resync)
}

fn start_with(dir: tempfile::TempDir, store: Store, fake: Arc<Fake>, resync: Duration) -> Harness {
    let mut rt = Runtime::new(
        store.clone(),
        RuntimeConfig {
            resync,
            shutdown_grace: Duration::from_secs(2),
        },
    );
    rt.add(fake);
    let trigger = rt.trigger();
    let timings = rt.timings();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(rt.run(async {
        let _ = rx.await;
    }));
    Harness {
        _dir: dir,
        store,
        trigger,
        timings,
        stop,
        task,
    }
}

async fn wait_for(mut f: impl FnMut() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("condition not reached in 5 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_is_never_reconciled_twice_at_once_and_nudges_are_merged() {
    let fake = Arc::new(Fake {
        work: Duration::from_millis(50),
        ..Fake::default()
    });
    let h = start(fake.clone(), Duration::from_secs(3600));
    let w = h.store.put_world(&new_world("p", "/r", "w")).unwrap().world;
    for _ in 0..200 {
        h.trigger.world(w.id);
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(fake.max_in_flight.load(Ordering::SeqCst), 1);
    let applies = fake.applies.load(Ordering::SeqCst);
    assert!(
        (1..=4).contains(&applies),
        "200 nudges gave {applies} reconciles"
    );
    let _ = h.stop.send(());
    h.task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_back_off_per_key_and_success_resets_and_records_status() {
    let fake = Arc::new(Fake::default());
    fake.fail_first.store(4, Ordering::SeqCst);
    // The world exists before the runtime starts: its first pass is the only nudge.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let w = store.put_world(&new_world("p", "/r", "w")).unwrap().world;
    let h = start_with(dir, store, fake.clone(), Duration::from_secs(3600));
    wait_for(|| fake.applies.load(Ordering::SeqCst) >= 2).await;
    // While failing: a False condition with the error's reason, and an attempt count.
    let conds = h.store.read(|c| store::conditions(c, w.id)).unwrap();
    assert_eq!(conds[0].reason, "FakeFailure");
    assert_eq!(conds[0].status, CondStatus::False);
    wait_for(|| fake.applies.load(Ordering::SeqCst) >= 5).await;
    wait_for(|| {
        h.store
            .read(|c| store::conditions(c, w.id))
            .unwrap()
            .first()
            .is_some_and(|c| c.status == CondStatus::True)
    })
    .await;
    let times = fake.times.lock().unwrap().clone();
    let gaps: Vec<Duration> = times.windows(2).map(|p| p[1] - p[0]).collect();
    // 200 ms, 400 ms, 800 ms, 1.6 s (±20% jitter): each gap longer than the one before.
    for pair in gaps.windows(2) {
        assert!(pair[1] > pair[0], "gaps do not grow: {gaps:?}");
    }
    assert!(gaps[0] >= Duration::from_millis(150), "{gaps:?}");
    let gens = h
        .store
        .read(|c| store::observed_generations(c, w.id))
        .unwrap();
    assert_eq!(gens[Kind::Route.name()], w.generation);
    let attempts: i64 = h
        .store
        .read(|c| {
            Ok(c.query_row(
                "SELECT attempts FROM controller_status WHERE world_id = ?1",
                [w.id],
                |r| r.get(0),
            )?)
        })
        .unwrap();
    assert_eq!(attempts, 0);
    let _ = h.stop.send(());
    h.task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_error_is_marked_for_people() {
    let fake = Arc::new(Fake {
        stall: true,
        ..Fake::default()
    });
    fake.fail_first.store(1000, Ordering::SeqCst);
    let h = start(fake.clone(), Duration::from_secs(3600));
    let w = h.store.put_world(&new_world("p", "/r", "w")).unwrap().world;
    h.trigger.world(w.id);
    wait_for(|| {
        h.store
            .read(|c| store::conditions(c, w.id))
            .unwrap()
            .first()
            .is_some_and(|c| c.stalled)
    })
    .await;
    let evs = h
        .store
        .read(|c| store::events(c, "p", "w", 0, 100))
        .unwrap();
    assert!(evs
        .iter()
        .any(|e| e.kind == "error" && e.message.contains("fake failure")));
    let _ = h.stop.send(());
    h.task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resync_visits_worlds_without_any_nudge() {
    let fake = Arc::new(Fake::default());
    let h = start(fake.clone(), Duration::from_millis(50));
    h.store.put_world(&new_world("p", "/r", "w")).unwrap();
    wait_for(|| fake.applies.load(Ordering::SeqCst) >= 3).await;
    let _ = h.stop.send(());
    h.task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_world_goes_only_when_its_finalizers_are_done() {
    let fake = Arc::new(Fake::default());
    fake.cleanup_pending.store(3, Ordering::SeqCst);
    let h = start(fake.clone(), Duration::from_secs(3600));
    let w = h.store.put_world(&new_world("p", "/r", "w")).unwrap().world;
    h.trigger.world(w.id);
    wait_for(|| {
        h.store
            .read(|c| store::finalizers(c, w.id))
            .unwrap()
            .contains(&Kind::Route.name().to_string())
    })
    .await;
    h.store.mark_deleted(w.id, false).unwrap();
    h.trigger.world(w.id);
    wait_for(|| h.store.read(|c| store::world(c, w.id)).unwrap().is_none()).await;
    assert_eq!(fake.cleanups.load(Ordering::SeqCst), 4);
    let evs = h
        .store
        .read(|c| store::events(c, "p", "w", 0, 100))
        .unwrap();
    assert_eq!(evs.last().unwrap().kind, "removed");
    let _ = h.stop.send(());
    h.task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_tears_down_only_after_those_declared_before_it_are_done() {
    // The port controller's part goes only once the process controller's is gone.
    let process = Arc::new(Fake {
        kind: Some(Kind::Process),
        ..Fake::default()
    });
    process.cleanup_pending.store(5, Ordering::SeqCst);
    let port = Arc::new(Fake {
        kind: Some(Kind::Port),
        ..Fake::default()
    });
    assert_eq!(Kind::Port.teardown_after(), &[Kind::Process]);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let mut rt = Runtime::new(
        store.clone(),
        RuntimeConfig {
            resync: Duration::from_secs(3600),
            shutdown_grace: Duration::from_secs(2),
        },
    );
    rt.add(port.clone());
    rt.add(process.clone());
    let trigger = rt.trigger();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(rt.run(async {
        let _ = rx.await;
    }));
    let w = store.put_world(&new_world("p", "/r", "w")).unwrap().world;
    trigger.world(w.id);
    wait_for(|| store.read(|c| store::finalizers(c, w.id)).unwrap().len() == 2).await;
    store.mark_deleted(w.id, false).unwrap();
    trigger.world(w.id);
    // The process part is being torn down (it was looked at) while the port part waits.
    wait_for(|| process.cleanups.load(Ordering::SeqCst) >= 2).await;
    assert_eq!(port.cleanups.load(Ordering::SeqCst), 0);
    for _ in 0..3 {
        trigger.world(w.id);
    }
    wait_for(|| store.read(|c| store::world(c, w.id)).unwrap().is_none()).await;
    assert_eq!(process.cleanups.load(Ordering::SeqCst), 6);
    assert_eq!(port.cleanups.load(Ordering::SeqCst), 1);
    let process_done = *process.cleaned_at.lock().unwrap().last().unwrap();
    assert!(port.cleaned_at.lock().unwrap()[0] > process_done);
    let _ = stop.send(());
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_reconcile_becomes_a_condition_is_retried_and_other_worlds_go_on() {
    let fake = Arc::new(Fake::default());
    *fake.panic_for.lock().unwrap() = Some(("bad".into(), 2));
    let h = start(fake.clone(), Duration::from_secs(3600));
    let bad = h
        .store
        .put_world(&new_world("p", "/r", "bad"))
        .unwrap()
        .world;
    h.trigger.world(bad.id);
    // The panic is reported as the controller's condition, with its message.
    wait_for(|| {
        h.store
            .read(|c| store::conditions(c, bad.id))
            .unwrap()
            .first()
            .is_some_and(|c| c.reason == "ReconcilePanicked" && c.message.contains("boom in bad"))
    })
    .await;
    // Meanwhile another world reconciles.
    let good = h
        .store
        .put_world(&new_world("p", "/r", "good"))
        .unwrap()
        .world;
    h.trigger.world(good.id);
    let ready = |id| {
        h.store
            .read(|c| store::conditions(c, id))
            .unwrap()
            .first()
            .is_some_and(|c| c.status == CondStatus::True)
    };
    wait_for(|| ready(good.id)).await;
    // And the panicking key is retried (no nudge needed) until it succeeds.
    wait_for(|| ready(bad.id)).await;
    assert_eq!(fake.panic_for.lock().unwrap().as_ref().unwrap().1, 0);
    let evs = h
        .store
        .read(|c| store::events(c, "p", "bad", 0, 100))
        .unwrap();
    assert!(
        evs.iter()
            .any(|e| e.kind == "error" && e.message.contains("panicked")),
        "{evs:?}"
    );
    let _ = h.stop.send(());
    h.task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_removed_before_any_controller_took_it_up_is_deleted() {
    // Its daemon was killed between `binky up` and the first reconcile, and `binky remove`
    // came next: no finalizer was ever added.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let w = store.put_world(&new_world("p", "/r", "w")).unwrap().world;
    store.mark_deleted(w.id, false).unwrap();
    let fake = Arc::new(Fake::default());
    let h = start_with(dir, store, fake.clone(), Duration::from_secs(3600));
    wait_for(|| h.store.read(|c| store::world(c, w.id)).unwrap().is_none()).await;
    assert_eq!(
        fake.cleanups.load(Ordering::SeqCst),
        0,
        "nothing to clean up"
    );
    let evs = h
        .store
        .read(|c| store::events(c, "p", "w", 0, 100))
        .unwrap();
    assert_eq!(evs.last().unwrap().kind, "removed");
    let _ = h.stop.send(());
    h.task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn housekeeping_runs_at_startup_on_a_nudge_of_every_world_after_a_cleanup_and_when_asked() {
    let fake = Arc::new(Fake {
        work: Duration::from_millis(20),
        ..Fake::default()
    });
    let h = start(fake.clone(), Duration::from_secs(3600));
    let runs = || fake.housekeeps.load(Ordering::SeqCst);
    wait_for(|| runs() == 1).await;
    // A nudge of every world (with no world at all: `binky golden rm` with none left).
    h.trigger.all();
    wait_for(|| runs() == 2).await;
    // Nudges while it runs are merged into one more run, never two at once.
    for _ in 0..50 {
        h.trigger.all();
    }
    wait_for(|| runs() >= 3).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(runs() <= 4, "50 nudges gave {} runs", runs() - 2);
    assert_eq!(fake.max_housekeeping.load(Ordering::SeqCst), 1);
    // A world's cleanup finishing.
    let before = runs();
    let w = h.store.put_world(&new_world("p", "/r", "w")).unwrap().world;
    h.trigger.world(w.id);
    wait_for(|| fake.applies.load(Ordering::SeqCst) == 1).await;
    assert_eq!(runs(), before, "an apply ran housekeeping");
    h.store.mark_deleted(w.id, false).unwrap();
    h.trigger.world(w.id);
    wait_for(|| h.store.read(|c| store::world(c, w.id)).unwrap().is_none()).await;
    wait_for(|| runs() == before + 1).await;
    // Asked to run again: it does, with no nudge and no resync.
    *fake.house_again.lock().unwrap() = Some(Duration::from_millis(30));
    h.trigger.all();
    wait_for(|| runs() >= before + 5).await;
    let _ = h.stop.send(());
    h.task.await.unwrap();
}

/// Each controller's reconciles and housekeeping are counted and timed as they run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reconcile_and_housekeeping_run_is_counted_with_its_time() {
    let fake = Arc::new(Fake {
        work: Duration::from_millis(20),
        ..Fake::default()
    });
    let h = start(fake.clone(), Duration::from_secs(3600));
    let w = h.store.put_world(&new_world("p", "/r", "w")).unwrap().world;
    for n in 1..=3 {
        h.trigger.world(w.id);
        wait_for(|| fake.applies.load(Ordering::SeqCst) >= n).await;
    }
    let route = || {
        h.timings
            .snapshot()
            .get("route")
            .copied()
            .unwrap_or_default()
    };
    wait_for(|| route().reconciles == fake.applies.load(Ordering::SeqCst) as u64).await;
    wait_for(|| route().housekeeps == fake.housekeeps.load(Ordering::SeqCst) as u64).await;
    let t = route();
    assert!(t.reconciles >= 3, "{t:?}");
    assert!(
        t.busy_us >= 20_000 * t.reconciles,
        "each took its 20 ms: {t:?}"
    );
    assert!(t.max_us >= 20_000 && t.max_us <= t.busy_us, "{t:?}");
    assert!(
        t.housekeeps >= 1 && t.housekeep_us >= 20_000,
        "the startup housekeeping: {t:?}"
    );
    assert_eq!(
        h.timings.snapshot().len(),
        1,
        "only the controller that ran"
    );
    let _ = h.stop.send(());
    h.task.await.unwrap();
}
