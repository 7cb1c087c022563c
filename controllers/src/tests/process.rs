use std::sync::Arc;
use std::time::Duration;

use crate::port::PortController;
use crate::process::{ProcessConfig, ProcessController};
use crate::runtime::Controller;
use crate::spec::{Health, OnUnhealthy, Probe, Restart, Service, ServiceKind, Spec};
use crate::store::{self, CondStatus, DesiredState, ProcState, Store};
use crate::supervisor::Marked;
use crate::testing::*;
use crate::worktree::WorktreeController;

/// The gate, worktree, port and process controllers over one store, fake effects.
pub(super) struct H {
    pub(super) dir: tempfile::TempDir,
    pub(super) store: Store,
    pub(super) gate: crate::gate::AdmissionController<FakeMachine>,
    pub(super) wt: WorktreeController<FakeGit>,
    pub(super) port: PortController<FakePorts>,
    pub(super) proc_: ProcessController<FakeSupervisor>,
    pub(super) sup: Arc<FakeSupervisor>,
}

pub(super) fn h() -> H {
    h_with(|_| {})
}

fn h_with(tune: impl FnOnce(&mut ProcessConfig)) -> H {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("repo")).unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let sup = Arc::new(FakeSupervisor::default());
    let mut cfg = ProcessConfig::new(dir.path().join("logs"));
    cfg.settle = Duration::ZERO;
    tune(&mut cfg);
    H {
        gate: crate::gate::AdmissionController::new(store.clone(), FakeMachine::default()),
        wt: WorktreeController::new(store.clone(), FakeGit::default()),
        port: PortController::new(store.clone(), FakePorts::default()),
        proc_: ProcessController::new(store.clone(), sup.clone(), cfg),
        sup,
        store,
        dir,
    }
}

impl H {
    pub(super) async fn converge(&self, id: i64) {
        for _ in 0..8 {
            reconcile(&self.gate, &self.store, id).await;
            reconcile(&self.wt, &self.store, id).await;
            reconcile(&self.port, &self.store, id).await;
            reconcile(&self.proc_, &self.store, id).await;
        }
    }

    pub(super) fn ready(&self, id: i64) -> store::ConditionRow {
        self.store
            .read(|c| store::conditions(c, id))
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "ServicesReady")
            .unwrap()
    }

    pub(super) fn row(&self, id: i64, svc: &str) -> store::ProcessRow {
        self.store
            .read(|c| store::processes(c, id))
            .unwrap()
            .into_iter()
            .find(|r| r.service == svc)
            .unwrap()
    }

    pub(super) fn up(&self, s: Spec) -> i64 {
        self.store
            .put_world(&new_world(self.dir.path(), "w", s))
            .unwrap()
            .world
            .id
    }
}

fn chain() -> Spec {
    spec(vec![
        ("db", web("db", &[])),
        ("api", web("api", &["db"])),
        ("web", web("web", &["api"])),
    ])
}

#[tokio::test]
async fn services_start_in_dependency_order_once_dependencies_are_ready() {
    let h = h();
    h.sup.inner.lock().unwrap().unready.insert("db".into());
    let id = h.up(chain());
    h.converge(id).await;
    assert_eq!(
        h.sup.spawn_order(),
        vec!["db"],
        "api started before db was ready"
    );
    assert_eq!(h.row(id, "api").message, "waiting for db");
    assert_eq!(h.ready(id).status, CondStatus::False);
    h.sup.inner.lock().unwrap().unready.clear();
    h.converge(id).await;
    assert_eq!(h.sup.spawn_order(), vec!["db", "api", "web"]);
    assert_eq!(h.ready(id).status, CondStatus::True);
    // Each process got its port and the ports of what it references.
    let spawned = h
        .sup
        .inner
        .lock()
        .unwrap()
        .procs
        .values()
        .map(|p| p.spec.clone())
        .collect::<Vec<_>>();
    let api = spawned.iter().find(|s| s.service == "api").unwrap();
    assert!(api.env.contains_key("PORT"));
    assert_eq!(api.env["BINKY_WORKTREE"], "w");
    assert!(api.token.starts_with("tag."));
}

#[tokio::test]
async fn a_failing_service_backs_off_and_becomes_a_crash_loop_without_touching_others() {
    let h = h();
    let id = h.up(spec(vec![("good", web("g", &[])), ("bad", web("b", &[]))]));
    h.converge(id).await;
    let good = h.sup.live("good");
    for n in 1..=3u32 {
        h.sup.exit("bad", 3);
        reconcile(&h.proc_, &h.store, id).await;
        let row = h.row(id, "bad");
        assert_eq!(row.state, ProcState::Backoff);
        assert_eq!(row.failures, n);
        let wait = row.next_start_at.unwrap() - store::now_ms();
        let expect = 500 * (1 << (n - 1)) as i64;
        assert!(
            (expect - 100..=expect).contains(&wait),
            "failure {n}: waits {wait} ms"
        );
        // Not before its time.
        reconcile(&h.proc_, &h.store, id).await;
        assert!(h.sup.live("bad").is_empty());
        // Pretend the time has come.
        h.store
            .write_fixture(|tx| {
                tx.execute(
                    "UPDATE processes SET next_start_at = 0 WHERE service = 'bad'",
                    [],
                )?;
                Ok(())
            })
            .unwrap();
        if n < 3 {
            reconcile(&h.proc_, &h.store, id).await;
            assert_eq!(h.sup.live("bad").len(), 1);
        }
    }
    let c = h.ready(id);
    assert_eq!(c.reason, "CrashLoop");
    assert!(c.stalled);
    assert!(
        c.message.contains("exit 3, 3 times in a row"),
        "{}",
        c.message
    );
    assert_eq!(h.sup.live("good"), good, "the healthy service was touched");
    assert_eq!(h.row(id, "bad").restarts, 2);
}

#[tokio::test]
async fn restart_policies_decide_what_an_exit_means() {
    let h = h();
    let mut s = spec(vec![
        ("once", web("o", &[])),
        ("never", web("n", &[])),
        ("always", web("a", &[])),
    ]);
    for (name, policy) in [("never", Restart::Never), ("always", Restart::Always)] {
        if let ServiceKind::Process(p) = &mut s.services.get_mut(name).unwrap().kind {
            p.restart = policy;
        }
    }
    let id = h.up(s);
    h.converge(id).await;
    h.sup.exit("once", 0);
    h.sup.exit("never", 1);
    h.sup.exit("always", 0);
    reconcile(&h.proc_, &h.store, id).await;
    assert_eq!(
        h.row(id, "once").state,
        ProcState::Exited,
        "on-failure: exit 0 is done"
    );
    assert_eq!(h.row(id, "never").state, ProcState::Failed);
    assert_eq!(h.row(id, "always").state, ProcState::Backoff);
    let c = h.ready(id);
    assert_eq!(c.reason, "ServiceFailed");
    assert!(c.message.contains("never"), "{}", c.message);
}

#[tokio::test]
async fn a_changed_command_restarts_only_that_service() {
    let h = h();
    let mut s = spec(vec![("api", web("api v1", &[])), ("web", web("web", &[]))]);
    let id = h.up(s.clone());
    h.converge(id).await;
    let web_pid = h.sup.live("web");
    if let ServiceKind::Process(p) = &mut s.services.get_mut("api").unwrap().kind {
        p.cmd = "api v2".into();
    }
    h.up(s);
    h.converge(id).await;
    assert_eq!(h.sup.live("web"), web_pid);
    let api = h.sup.live("api");
    assert_eq!(api.len(), 1);
    let cmd = h.sup.inner.lock().unwrap().procs[&api[0]].spec.cmd.clone();
    assert_eq!(cmd, "api v2");
    assert_eq!(h.sup.inner.lock().unwrap().stopped, vec!["api"]);
}

#[tokio::test]
async fn down_signals_every_service_at_once_and_up_restarts_them() {
    let h = h();
    let id = h.up(chain());
    h.converge(id).await;
    h.store
        .set_desired_state(id, DesiredState::Stopped)
        .unwrap();
    h.converge(id).await;
    // Every service is asked to stop before any is gone: none waits for another.
    let log = h.sup.inner.lock().unwrap().stop_log.clone();
    assert_eq!(log.len(), 6, "{log:?}");
    assert!(
        log[..3].iter().all(|l| l.starts_with("signal ")),
        "stopped one after another: {log:?}"
    );
    assert_eq!(h.ready(id).reason, "Stopped");
    for s in ["db", "api", "web"] {
        assert_eq!(h.row(id, s).state, ProcState::Stopped);
        assert!(h.sup.live(s).is_empty());
    }
    h.store
        .set_desired_state(id, DesiredState::Running)
        .unwrap();
    h.converge(id).await;
    assert_eq!(h.sup.spawn_order().len(), 6);
    assert_eq!(h.ready(id).status, CondStatus::True);
}

/// `chain()` with `stop_after_dependents` on `service`.
fn chain_stopping_after_dependents(service: &str) -> Spec {
    let mut s = chain();
    if let ServiceKind::Process(p) = &mut s.services.get_mut(service).unwrap().kind {
        p.stop.after_dependents = true;
    }
    s
}

#[tokio::test]
async fn a_service_stopping_after_its_dependents_is_signalled_once_they_are_all_gone() {
    for how in ["down", "remove", "reload"] {
        let h = h();
        // db waits for api and, through it, web; api and web stop at once.
        let id = h.up(chain_stopping_after_dependents("db"));
        h.converge(id).await;
        match how {
            "down" => {
                h.store
                    .set_desired_state(id, DesiredState::Stopped)
                    .unwrap();
            }
            "remove" => {
                h.store.mark_deleted(id, false).unwrap();
            }
            _ => {
                h.store.reload_world(id, None).unwrap();
            }
        }
        h.converge(id).await;
        let log = h.sup.inner.lock().unwrap().stop_log.clone();
        let at = |l: &str| {
            log.iter()
                .position(|x| x == l)
                .unwrap_or_else(|| panic!("{how}: no `{l}` in {log:?}"))
        };
        assert!(at("signal db") > at("gone api"), "{how}: {log:?}");
        assert!(at("signal db") > at("gone web"), "{how}: {log:?}");
        assert!(
            at("signal api") < at("gone web"),
            "{how}: api waited for web: {log:?}"
        );
    }
}

#[tokio::test]
async fn each_service_is_stopped_with_its_own_signal_and_grace_period() {
    let h = h_with(|c| c.stop_grace = Duration::from_secs(7));
    let mut worker = web("celery worker", &[]);
    if let ServiceKind::Process(p) = &mut worker.kind {
        p.stop.signal = Some("SIGQUIT".into());
        p.stop.grace_ms = Some(1_500);
    }
    let mut s = spec(vec![("worker", worker), ("api", web("api", &[]))]);
    let id = h.up(s.clone());
    h.converge(id).await;
    let hows = |h: &H| h.sup.inner.lock().unwrap().stop_hows.clone();
    let quit = crate::supervisor::StopHow {
        signal: "SIGQUIT".into(),
        grace: Duration::from_millis(1_500),
    };
    let term = crate::supervisor::StopHow::term(Duration::from_secs(7));
    // A restart for a changed command.
    if let ServiceKind::Process(p) = &mut s.services.get_mut("worker").unwrap().kind {
        p.cmd = "celery worker -l info".into();
    }
    h.up(s);
    h.converge(id).await;
    assert_eq!(hows(&h), vec![("worker".to_owned(), quit.clone())]);
    // `binky down`: each its own.
    h.store
        .set_desired_state(id, DesiredState::Stopped)
        .unwrap();
    h.converge(id).await;
    let mut down = hows(&h)[1..].to_vec();
    down.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        down,
        vec![
            ("api".to_owned(), term),
            ("worker".to_owned(), quit.clone())
        ]
    );
    // The event says how it went.
    let stopped = messages(&h, "stopped");
    assert!(
        stopped
            .iter()
            .any(|m| m == "stopped worker (binky down): it exited 0.0s after SIGQUIT"),
        "{stopped:?}"
    );
}

#[tokio::test]
async fn reload_restarts_everything_once() {
    let h = h();
    let id = h.up(chain());
    h.converge(id).await;
    h.store.reload_world(id, None).unwrap();
    h.converge(id).await;
    assert_eq!(
        h.sup.spawn_order(),
        vec!["db", "api", "web", "db", "api", "web"]
    );
    h.converge(id).await;
    assert_eq!(
        h.sup.spawn_order().len(),
        6,
        "reload restarted more than once"
    );
}

#[tokio::test]
async fn setup_runs_once_and_a_failed_setup_stalls_until_the_next_up() {
    let h = h();
    let mut s = spec(vec![("api", web("api", &[]))]);
    if let ServiceKind::Process(p) = &mut s.services.get_mut("api").unwrap().kind {
        p.setup = Some("make deps".into());
    }
    h.sup.inner.lock().unwrap().run_code = 2;
    let id = h.up(s.clone());
    h.converge(id).await;
    assert_eq!(
        h.sup.inner.lock().unwrap().runs.len(),
        1,
        "a failed setup is retried without a new up"
    );
    assert!(h.sup.live("api").is_empty());
    let c = h.ready(id);
    assert_eq!(c.reason, "SetupFailed");
    assert!(c.stalled);
    h.sup.inner.lock().unwrap().run_code = 0;
    h.up(s.clone());
    h.converge(id).await;
    assert_eq!(h.sup.live("api").len(), 1);
    h.store
        .set_desired_state(id, DesiredState::Stopped)
        .unwrap();
    h.converge(id).await;
    h.up(s);
    h.converge(id).await;
    assert_eq!(
        h.sup.inner.lock().unwrap().runs.len(),
        2,
        "setup ran again after a successful one"
    );
}

#[tokio::test]
async fn the_startup_sweep_stops_unrecorded_processes_and_spares_recorded_ones() {
    let h = h();
    let id = h.up(spec(vec![("api", web("api", &[]))]));
    h.converge(id).await;
    let api = h.sup.live("api")[0];
    h.sup.inner.lock().unwrap().marked = vec![
        // The recorded service and a grandchild in its group.
        Marked {
            pid: api.pid,
            pgid: api.pid,
            start_time: api.start_time,
            token: "tag.1.a".into(),
        },
        Marked {
            pid: 5555,
            pgid: api.pid,
            start_time: 9,
            token: "tag.1.a".into(),
        },
        // Started by a daemon that died before recording it.
        Marked {
            pid: 7777,
            pgid: 7777,
            start_time: 3,
            token: format!("tag.{id}.b"),
        },
        Marked {
            pid: 7778,
            pgid: 7777,
            start_time: 4,
            token: format!("tag.{id}.b"),
        },
    ];
    h.proc_.startup().await;
    assert_eq!(h.sup.inner.lock().unwrap().killed_groups, vec![7777]);
    let evs = h
        .store
        .read(|c| store::events(c, "acme", "w", 0, 50))
        .unwrap();
    assert!(evs.iter().any(|e| e.kind == "orphan"));
}

#[tokio::test]
async fn removal_stops_everything_and_forgets_the_rows() {
    let h = h();
    let id = h.up(chain());
    h.converge(id).await;
    h.store.mark_deleted(id, false).unwrap();
    h.converge(id).await;
    assert!(
        world(&h.store, id).is_none(),
        "the world row outlived its finalizers"
    );
    for s in ["db", "api", "web"] {
        assert!(h.sup.live(s).is_empty());
    }
    assert!(h.store.read(store::all_processes).unwrap().is_empty());
    assert!(h.store.read(store::all_ports).unwrap().is_empty());
}

#[tokio::test]
async fn restarting_one_service_restarts_exactly_that_one_once_per_request() {
    let h = h();
    let id = h.up(chain());
    h.converge(id).await;
    let db = h.sup.live("db");
    let api = h.sup.live("api");
    let web = h.sup.live("web");
    h.store
        .restart_service(id, "api", "src/main.rs changed")
        .unwrap();
    h.converge(id).await;
    assert_eq!(h.sup.inner.lock().unwrap().stopped, vec!["api"]);
    assert_eq!(h.sup.live("db"), db);
    assert_eq!(h.sup.live("web"), web, "a dependent restarted with it");
    let new_api = h.sup.live("api");
    assert_eq!(new_api.len(), 1);
    assert_ne!(new_api, api, "api kept running");
    assert_eq!(h.ready(id).status, CondStatus::True);
    // The request is done: converging again restarts nothing.
    h.converge(id).await;
    assert_eq!(h.sup.spawn_order().len(), 4);
    // A second request restarts it again.
    h.store
        .restart_service(id, "api", "src/main.rs changed")
        .unwrap();
    h.converge(id).await;
    assert_eq!(h.sup.inner.lock().unwrap().stopped, vec!["api", "api"]);
    assert_eq!(h.sup.spawn_order(), vec!["db", "api", "web", "api", "api"]);
}

/// A service checked on every reconcile (`interval = 0`), unhealthy after `retries` failures.
fn checked(retries: u32, on_unhealthy: OnUnhealthy) -> Service {
    let mut svc = web("api", &[]);
    if let ServiceKind::Process(p) = &mut svc.kind {
        p.health = Some(Health {
            interval_ms: Some(0),
            retries: Some(retries),
            on_unhealthy,
            ..Health::of(Probe::Tcp("${self.port}".into()))
        });
        p.restart = Restart::Always;
    }
    svc
}

fn kinds(h: &H) -> Vec<String> {
    h.store
        .read(|c| store::events(c, "acme", "w", 0, 1000))
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect()
}

impl H {
    fn pretend_restart_is_due(&self) {
        self.store
            .write_fixture(|tx| {
                tx.execute("UPDATE processes SET next_start_at = 0", [])?;
                Ok(())
            })
            .unwrap();
    }
}

#[tokio::test]
async fn a_running_service_failing_its_health_check_retries_times_is_unhealthy_and_restarted() {
    let h = h();
    let id = h.up(spec(vec![("api", checked(2, OnUnhealthy::Restart))]));
    h.converge(id).await;
    assert_eq!(h.row(id, "api").state, ProcState::Running);
    assert_eq!(h.ready(id).status, CondStatus::True);
    let first = h.sup.live("api");
    h.sup.inner.lock().unwrap().unready.insert("api".into());
    // One failed check is not yet unhealthy: the service is still ready.
    reconcile(&h.proc_, &h.store, id).await;
    assert_eq!(h.row(id, "api").state, ProcState::Running);
    assert_eq!(h.ready(id).status, CondStatus::True);
    assert!(h.sup.inner.lock().unwrap().stopped.is_empty());
    // The second in a row is: it is stopped and waits for its restart.
    reconcile(&h.proc_, &h.store, id).await;
    let row = h.row(id, "api");
    assert_eq!(row.state, ProcState::Backoff, "{}", row.message);
    assert!(
        row.message.contains("health check failed 2 times in a row"),
        "{}",
        row.message
    );
    assert_eq!(row.last_exit.as_deref(), Some("unhealthy"));
    assert_eq!(h.sup.inner.lock().unwrap().stopped, vec!["api".to_owned()]);
    assert_eq!(h.ready(id).status, CondStatus::False);
    let k = kinds(&h);
    assert!(
        k.contains(&"unhealthy".to_owned()) && k.contains(&"restart".to_owned()),
        "{k:?}"
    );
    // Started again, and answering: a probed service is believed after one failure.
    h.sup.inner.lock().unwrap().unready.clear();
    h.pretend_restart_is_due();
    reconcile(&h.proc_, &h.store, id).await; // started
    reconcile(&h.proc_, &h.store, id).await; // probed
    let again = h.sup.live("api");
    assert_eq!(again.len(), 1);
    assert_ne!(again, first, "a new process");
    let row = h.row(id, "api");
    assert_eq!(row.state, ProcState::Running);
    assert!(row.is_ready(), "{}", row.message);
    assert_eq!(h.ready(id).status, CondStatus::True);
    // Unhealthy again: after a second failure in a row it is running, but not ready until
    // it has stayed up (a service restarting in a loop is never ready).
    h.sup.inner.lock().unwrap().unready.insert("api".into());
    reconcile(&h.proc_, &h.store, id).await;
    reconcile(&h.proc_, &h.store, id).await;
    assert_eq!(h.row(id, "api").state, ProcState::Backoff);
    h.sup.inner.lock().unwrap().unready.clear();
    h.pretend_restart_is_due();
    reconcile(&h.proc_, &h.store, id).await; // started
    reconcile(&h.proc_, &h.store, id).await; // probed
    let row = h.row(id, "api");
    assert_eq!(row.state, ProcState::Running);
    assert_eq!(row.failures, 2);
    assert!(
        !row.is_ready(),
        "ready at once after a second failure: {}",
        row.message
    );
    assert_eq!(h.ready(id).status, CondStatus::False);
}

/// A service failing its checks on a saturated machine is not restarted into a storm: it
/// is shown unhealthy saying why, and restarted once the machine has room; and restarts for
/// failed checks stop at the budget, leaving it running until a check passes.
#[tokio::test]
async fn failing_checks_on_a_saturated_machine_or_past_the_budget_leave_the_service_running() {
    let h = h();
    let id = h.up(spec(vec![("api", checked(1, OnUnhealthy::Restart))]));
    h.converge(id).await;
    assert_eq!(h.row(id, "api").state, ProcState::Running);
    let first = h.sup.live("api");
    {
        let mut s = h.sup.inner.lock().unwrap();
        s.saturated = Some("tasks waited for a CPU 91% of the last 10 s".into());
        s.unready.insert("api".into());
    }
    // Checked (it fails) and held, twice: one event, no stop.
    reconcile(&h.proc_, &h.store, id).await;
    reconcile(&h.proc_, &h.store, id).await;
    let row = h.row(id, "api");
    assert_eq!(row.state, ProcState::Unhealthy, "{}", row.message);
    assert!(
        row.message
            .contains("not restarted: the machine is saturated (tasks waited for a CPU 91%"),
        "{}",
        row.message
    );
    assert!(h.sup.inner.lock().unwrap().stopped.is_empty());
    assert_eq!(h.sup.live("api"), first);
    let held = kinds(&h).iter().filter(|k| *k == "restart_held").count();
    assert_eq!(held, 1, "{:?}", kinds(&h));
    // Room again: the next failed check restarts it; three times in the window, then no more.
    h.sup.inner.lock().unwrap().saturated = None;
    for n in 1..=3 {
        reconcile(&h.proc_, &h.store, id).await;
        let row = h.row(id, "api");
        assert_eq!(
            row.state,
            ProcState::Backoff,
            "restart {n}: {}",
            row.message
        );
        h.pretend_restart_is_due();
        h.sup.inner.lock().unwrap().unready.remove("api");
        reconcile(&h.proc_, &h.store, id).await; // started
        reconcile(&h.proc_, &h.store, id).await; // probed
        assert!(matches!(h.row(id, "api").state, ProcState::Running));
        // It has stayed up long enough to be believed again (its checks run again).
        h.store
            .write_fixture(|tx| {
                tx.execute("UPDATE processes SET started_at = 0", [])?;
                Ok(())
            })
            .unwrap();
        reconcile(&h.proc_, &h.store, id).await;
        assert!(h.row(id, "api").is_ready(), "{}", h.row(id, "api").message);
        h.sup.inner.lock().unwrap().unready.insert("api".into());
    }
    assert_eq!(h.sup.inner.lock().unwrap().stopped.len(), 3);
    reconcile(&h.proc_, &h.store, id).await;
    let row = h.row(id, "api");
    assert_eq!(row.state, ProcState::Unhealthy, "{}", row.message);
    assert!(row.message.contains("its budget"), "{}", row.message);
    assert_eq!(
        h.sup.inner.lock().unwrap().stopped.len(),
        3,
        "a fourth restart"
    );
    // A check that passes makes it healthy again.
    h.sup.inner.lock().unwrap().unready.clear();
    reconcile(&h.proc_, &h.store, id).await;
    assert_eq!(h.row(id, "api").state, ProcState::Running);
}

#[tokio::test]
async fn kept_unhealthy_a_service_runs_on_shown_unhealthy_until_its_check_passes_again() {
    let h = h();
    let id = h.up(spec(vec![("api", checked(1, OnUnhealthy::Keep))]));
    h.converge(id).await;
    let pid = h.sup.live("api");
    h.sup.inner.lock().unwrap().unready.insert("api".into());
    reconcile(&h.proc_, &h.store, id).await;
    let row = h.row(id, "api");
    assert_eq!(row.state, ProcState::Unhealthy);
    assert!(!row.is_ready());
    let c = h.ready(id);
    assert_eq!((c.reason.as_str(), c.stalled), ("Unhealthy", true));
    assert!(
        c.message.contains("on_unhealthy = \"keep\""),
        "{}",
        c.message
    );
    assert!(
        h.sup.inner.lock().unwrap().stopped.is_empty(),
        "kept: not stopped"
    );
    h.sup.inner.lock().unwrap().unready.clear();
    reconcile(&h.proc_, &h.store, id).await;
    assert_eq!(h.row(id, "api").state, ProcState::Running);
    assert_eq!(h.ready(id).status, CondStatus::True);
    assert_eq!(h.sup.live("api"), pid, "the same process throughout");
    assert!(kinds(&h).contains(&"healthy".to_owned()));
}

#[tokio::test]
async fn a_worker_restarting_in_a_loop_is_never_ready_and_is_once_it_stays_up() {
    let h = h_with(|c| c.stable_after = Duration::from_millis(300));
    let mut worker = web("work", &[]);
    if let ServiceKind::Process(p) = &mut worker.kind {
        p.url = None;
        p.restart = Restart::Always;
    }
    let id = h.up(spec(vec![("worker", worker)]));
    h.converge(id).await;
    assert!(h.row(id, "worker").is_ready());
    for _ in 0..3 {
        h.sup.exit("worker", 1);
        reconcile(&h.proc_, &h.store, id).await;
        h.pretend_restart_is_due();
        reconcile(&h.proc_, &h.store, id).await; // started
        reconcile(&h.proc_, &h.store, id).await; // settled
        let row = h.row(id, "worker");
        assert_eq!(row.state, ProcState::Running);
        assert!(!row.is_ready(), "a crash-looping worker counted ready");
        assert_eq!(h.ready(id).status, CondStatus::False);
    }
    // Once it has stayed up past stable_after, it is ready again.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !h.row(id, "worker").is_ready() {
        assert!(std::time::Instant::now() < deadline, "never ready again");
        tokio::time::sleep(Duration::from_millis(20)).await;
        reconcile(&h.proc_, &h.store, id).await;
    }
    assert_eq!(h.row(id, "worker").failures, 0);
    assert_eq!(h.ready(id).status, CondStatus::True);
}

fn limited(cmd: &str, memory: Option<&str>, cpu: Option<&str>) -> Service {
    let mut s = web(cmd, &[]);
    if let ServiceKind::Process(p) = &mut s.kind {
        p.limits = Some(crate::spec::Limits {
            memory: memory.map(Into::into),
            cpu: cpu.map(Into::into),
        });
    }
    s
}

fn resources_of(h: &H, id: i64, svc: &str) -> store::ResourceRow {
    h.store
        .read(|c| store::resources(c, id))
        .unwrap()
        .into_iter()
        .find(|r| r.service == svc)
        .unwrap()
}

fn messages(h: &H, kind: &str) -> Vec<String> {
    h.store
        .read(|c| store::events(c, "acme", "w", 0, 1000))
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == kind)
        .map(|e| e.message)
        .collect()
}

#[tokio::test]
async fn a_service_starts_under_its_limits_and_its_placement_is_recorded() {
    let h = h();
    h.sup.inner.lock().unwrap().mechanism = crate::process::Mechanism::CgroupV1;
    let id = h.up(spec(vec![
        ("api", limited("api", Some("512M"), Some("0.5"))),
        ("web", web("web", &[])),
    ]));
    h.converge(id).await;
    let spawned: Vec<_> = h
        .sup
        .inner
        .lock()
        .unwrap()
        .procs
        .values()
        .map(|p| (p.spec.service.clone(), p.spec.limits))
        .collect();
    let api = spawned.iter().find(|(s, _)| s == "api").unwrap().1;
    assert_eq!(api.memory, Some(512 << 20));
    assert_eq!(api.cpu_millis, Some(500));
    assert!(spawned
        .iter()
        .find(|(s, _)| s == "web")
        .unwrap()
        .1
        .is_none());
    let r = resources_of(&h, id, "api");
    assert_eq!(r.cgroup.as_deref(), Some(format!("fake:{id}/api").as_str()));
    assert_eq!(r.mechanism, crate::process::Mechanism::CgroupV1);
    assert_eq!((r.memory_limit, r.cpu_limit), (Some(512 << 20), Some(500)));
    assert!(messages(&h, "limits").is_empty());
}

#[tokio::test]
async fn limits_nothing_enforces_are_said_once_not_at_every_restart() {
    let h = h();
    h.sup.inner.lock().unwrap().note = "no cgroup binky can use (…)".into();
    let id = h.up(spec(vec![("api", limited("api", Some("64M"), None))]));
    h.converge(id).await;
    let said = messages(&h, "limits");
    assert_eq!(
        said,
        ["api: limits (memory 64 MiB) are not enforced: no cgroup binky can use (…)"]
    );
    let r = resources_of(&h, id, "api");
    assert!(!r.mechanism.enforces());
    assert_eq!(r.note, "no cgroup binky can use (…)");
    h.sup.exit("api", 1);
    reconcile(&h.proc_, &h.store, id).await;
    h.pretend_restart_is_due();
    h.converge(id).await;
    assert_eq!(h.sup.spawn_order(), ["api", "api"]);
    assert_eq!(messages(&h, "limits").len(), 1);
}

#[tokio::test]
async fn an_out_of_memory_kill_ends_the_run_as_such_and_it_restarts_while_neighbours_run() {
    let h = h();
    h.sup.inner.lock().unwrap().mechanism = crate::process::Mechanism::CgroupV1;
    let id = h.up(spec(vec![
        ("hog", limited("hog", Some("64M"), None)),
        ("calm", web("calm", &[])),
    ]));
    h.converge(id).await;
    let calm = h.sup.live("calm");
    let cgroup = format!("fake:{id}/hog");
    h.sup.inner.lock().unwrap().usage.insert(
        cgroup.clone(),
        crate::supervisor::Usage {
            memory_bytes: 64 << 20,
            oom_kills: 1,
            ..Default::default()
        },
    );
    h.sup.kill("hog", 9);
    reconcile(&h.proc_, &h.store, id).await;
    let row = h.row(id, "hog");
    assert_eq!(
        row.last_exit.as_deref(),
        Some("killed: out of memory (limit 64 MiB)")
    );
    assert_eq!(row.state, ProcState::Backoff, "{}", row.message);
    assert!(row
        .message
        .starts_with("killed: out of memory (limit 64 MiB) after"));
    assert_eq!(
        messages(&h, "oom"),
        ["hog ran out of memory (limit 64 MiB): the kernel killed 1 of its processes"]
    );
    let r = resources_of(&h, id, "hog");
    assert_eq!(r.oom_kills, 1);
    assert_eq!(r.cgroup, None, "its cgroup is released");
    assert!(h.sup.inner.lock().unwrap().released.contains(&cgroup));
    assert_eq!(h.sup.live("calm"), calm, "the neighbour keeps running");
    // A plain crash of a run without out-of-memory kills says what it was.
    h.pretend_restart_is_due();
    h.converge(id).await;
    h.sup.kill("hog", 9);
    reconcile(&h.proc_, &h.store, id).await;
    assert_eq!(h.row(id, "hog").last_exit.as_deref(), Some("signal 9"));
    assert_eq!(resources_of(&h, id, "hog").oom_kills, 1);
}

#[tokio::test]
async fn where_binky_polls_a_service_over_its_memory_limit_is_stopped_counted_and_restarted() {
    let h = h();
    let note = "memory: restarted over the limit (polled every 5 s), not capped (this system has neither cgroups nor Job objects)";
    {
        let mut s = h.sup.inner.lock().unwrap();
        s.mechanism = crate::process::Mechanism::Polled;
        s.note = note.into();
    }
    let id = h.up(spec(vec![
        ("hog", limited("hog", Some("64M"), None)),
        ("calm", limited("calm", Some("64M"), None)),
    ]));
    h.converge(id).await;
    let mut said = messages(&h, "limits");
    said.sort();
    assert_eq!(
        said,
        [
            format!("calm: limits (memory 64 MiB) are not capped on this machine: {note}"),
            format!("hog: limits (memory 64 MiB) are not capped on this machine: {note}"),
        ]
    );
    let calm = h.sup.live("calm");
    let hog = h.sup.live("hog");
    let use_ = |service: &str, mib: u64| {
        h.sup.inner.lock().unwrap().usage.insert(
            format!("fake:{id}/{service}"),
            crate::supervisor::Usage {
                memory_bytes: mib << 20,
                ..Default::default()
            },
        );
    };
    // At its limit is within it: nothing is stopped.
    use_("hog", 64);
    use_("calm", 10);
    h.proc_.sample_usage().await.unwrap();
    reconcile(&h.proc_, &h.store, id).await;
    assert!(h.sup.inner.lock().unwrap().stopped.is_empty());
    assert_eq!(resources_of(&h, id, "hog").memory_bytes, Some(64 << 20));
    // Over it: the sample marks it, the world's step stops it as any stop.
    use_("hog", 80);
    h.proc_.sample_usage().await.unwrap();
    assert!(
        h.sup.inner.lock().unwrap().stopped.is_empty(),
        "the sampler only marks it"
    );
    reconcile(&h.proc_, &h.store, id).await;
    {
        let s = h.sup.inner.lock().unwrap();
        assert_eq!(s.stopped, ["hog"]);
        assert_eq!(s.stop_hows[0].1.signal, "SIGTERM");
    }
    // Its end is read by the next step.
    reconcile(&h.proc_, &h.store, id).await;
    let row = h.row(id, "hog");
    let how = "stopped over its memory limit of 64 MiB (it had 80 MiB resident), as binky does where the system cannot cap memory";
    assert_eq!(row.last_exit.as_deref(), Some(how));
    // It took SIGTERM as any stop, yet it failed: on-failure restarts it.
    assert_eq!(row.state, ProcState::Backoff, "{}", row.message);
    assert!(
        row.message.starts_with(&format!("{how} after")),
        "{}",
        row.message
    );
    assert_eq!(
        messages(&h, "oom"),
        ["hog went over its memory limit of 64 MiB (80 MiB resident): stopped and restarted (restart = on-failure), as binky does where the system cannot cap memory"]
    );
    assert_eq!(resources_of(&h, id, "hog").oom_kills, 1);
    assert_eq!(resources_of(&h, id, "calm").oom_kills, 0);
    assert_eq!(h.sup.live("calm"), calm, "the neighbour keeps running");
    h.pretend_restart_is_due();
    h.converge(id).await;
    assert_ne!(h.sup.live("hog"), hog, "restarted");
    // The limits were said once, not again at the restart.
    assert_eq!(messages(&h, "limits").len(), 2);
    // A run found over its limit that ends by itself before its step is a crash of its
    // own, not binky's stop.
    use_("hog", 90);
    h.proc_.sample_usage().await.unwrap();
    h.sup.exit("hog", 1);
    reconcile(&h.proc_, &h.store, id).await;
    assert_eq!(h.row(id, "hog").last_exit.as_deref(), Some("exit 1"));
    assert_eq!(resources_of(&h, id, "hog").oom_kills, 1);
    assert_eq!(h.sup.inner.lock().unwrap().stopped, ["hog"]);
    h.pretend_restart_is_due();
    h.converge(id).await;
    // Where the kernel enforces them (a cgroup), a sample over the limit stops nothing.
    h.sup.inner.lock().unwrap().mechanism = crate::process::Mechanism::CgroupV1;
    h.sup.exit("hog", 1);
    reconcile(&h.proc_, &h.store, id).await;
    h.pretend_restart_is_due();
    h.converge(id).await;
    use_("hog", 200);
    h.proc_.sample_usage().await.unwrap();
    reconcile(&h.proc_, &h.store, id).await;
    assert_eq!(h.sup.inner.lock().unwrap().stopped, ["hog"]);
}

#[tokio::test]
async fn down_and_remove_release_the_worlds_cgroups() {
    let h = h();
    let id = h.up(spec(vec![("api", web("api", &[]))]));
    h.converge(id).await;
    h.store
        .set_desired_state(id, DesiredState::Stopped)
        .unwrap();
    h.converge(id).await;
    {
        let s = h.sup.inner.lock().unwrap();
        assert!(s.released.contains(&format!("fake:{id}/api")));
        assert!(s.released_worlds.contains(&id));
    }
    h.store.mark_deleted(id, false).unwrap();
    h.converge(id).await;
    assert!(h.store.read(store::all_resources).unwrap().is_empty());
}

#[tokio::test]
async fn the_sampler_records_what_running_services_use_and_forgets_stopped_ones() {
    let h = h();
    let id = h.up(spec(vec![("api", web("api", &[]))]));
    h.converge(id).await;
    let set = |usec: u64| set_usage(&h, id, "api", usec);
    set(1_000);
    h.proc_.sample_usage().await.unwrap();
    let first = resources_of(&h, id, "api");
    assert_eq!(first.memory_bytes, Some(10 << 20));
    assert_eq!(first.cpu_percent, None, "one sample has no interval yet");
    tokio::time::sleep(Duration::from_millis(20)).await;
    // Far more CPU time than 20 ms of wall time: several cores' worth.
    set(1_000 + 200_000);
    h.proc_.sample_usage().await.unwrap();
    let second = resources_of(&h, id, "api");
    assert!(second.cpu_percent.unwrap() > 100.0, "{second:?}");
    h.store
        .set_desired_state(id, DesiredState::Stopped)
        .unwrap();
    h.converge(id).await;
    h.proc_.sample_usage().await.unwrap();
    let stopped = resources_of(&h, id, "api");
    assert_eq!((stopped.memory_bytes, stopped.cpu_percent), (None, None));
}

/// Make the fake supervisor say `service` of world `id` uses 10 MiB and `usec` of CPU.
fn set_usage(h: &H, id: i64, service: &str, usec: u64) {
    h.sup.inner.lock().unwrap().usage.insert(
        format!("fake:{id}/{service}"),
        crate::supervisor::Usage {
            memory_bytes: 10 << 20,
            cpu_usec: usec,
            ..Default::default()
        },
    );
}

/// An idle service (the same memory, no CPU since, 0 %) is not written again at each
/// sample; once it uses CPU again, the next sample writes it.
#[tokio::test]
async fn the_sampler_leaves_an_idle_services_row_alone_until_it_uses_cpu_again() {
    let h = h();
    let id = h.up(spec(vec![("api", web("api", &[]))]));
    h.converge(id).await;
    let set = |usec: u64| set_usage(&h, id, "api", usec);
    let mut seen = crate::process::resources::Sampled::default();
    set(1_000);
    h.proc_.sample_usage_since(&mut seen).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    h.proc_.sample_usage_since(&mut seen).await.unwrap();
    let idle = resources_of(&h, id, "api");
    assert_eq!(idle.cpu_percent, Some(0.0), "{idle:?}");
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        h.proc_.sample_usage_since(&mut seen).await.unwrap();
        let again = resources_of(&h, id, "api");
        assert_eq!(
            again.sampled_at, idle.sampled_at,
            "an idle row was written again"
        );
    }
    // A poll loop's few microseconds (well under half a percent of a core) keep it idle.
    tokio::time::sleep(Duration::from_millis(20)).await;
    set(1_000 + 20);
    h.proc_.sample_usage_since(&mut seen).await.unwrap();
    assert_eq!(resources_of(&h, id, "api").sampled_at, idle.sampled_at);
    tokio::time::sleep(Duration::from_millis(5)).await;
    set(1_000 + 50_000);
    h.proc_.sample_usage_since(&mut seen).await.unwrap();
    let busy = resources_of(&h, id, "api");
    assert!(busy.sampled_at > idle.sampled_at, "{busy:?}");
    assert!(busy.cpu_percent.unwrap() > 0.0, "{busy:?}");
}

/// `web()` whose process a test can find by name, on a world whose command waits `wait`.
fn up_waiting(h: &H, services: Vec<(&str, Service)>, wait: Option<Duration>) -> i64 {
    let mut new = new_world(h.dir.path(), "w", spec(services));
    new.wait = wait;
    h.store.put_world(&new).unwrap().world.id
}

impl H {
    /// Pretend `service` started `ago`.
    fn started_ago(&self, service: &str, ago: Duration) {
        self.store
            .write_fixture(|tx| {
                tx.execute(
                    "UPDATE processes SET started_at = ?1 WHERE service = ?2",
                    rusqlite::params![store::now_ms() - ago.as_millis() as i64, service],
                )?;
                Ok(())
            })
            .unwrap();
    }
}

#[tokio::test]
async fn a_service_without_health_may_take_as_long_to_listen_as_the_command_waits() {
    // The daemon's fallback is short; the command's `--timeout` (60 s) decides.
    let h = h_with(|c| c.port_wait = Duration::from_secs(10));
    h.sup.inner.lock().unwrap().unready.insert("flower".into());
    let id = up_waiting(
        &h,
        vec![("flower", web("celery flower", &[]))],
        Some(Duration::from_secs(60)),
    );
    h.converge(id).await;
    h.started_ago("flower", Duration::from_secs(36));
    reconcile(&h.proc_, &h.store, id).await;
    let c = h.ready(id);
    assert_eq!(
        (c.status, c.stalled),
        (CondStatus::False, false),
        "failed within the command's wait: {c:?}"
    );
    assert!(
        c.message
            .starts_with("flower: not listening yet on its port"),
        "{}",
        c.message
    );
    assert!(
        h.row(id, "flower")
            .message
            .starts_with("not ready after 36s: not listening yet on its port"),
        "{}",
        h.row(id, "flower").message
    );
    // It listens at last: ready.
    h.sup.inner.lock().unwrap().unready.clear();
    reconcile(&h.proc_, &h.store, id).await;
    assert_eq!(h.ready(id).status, CondStatus::True);
}

#[tokio::test]
async fn past_the_commands_wait_a_silent_port_fails_the_world_saying_so() {
    let h = h_with(|c| c.port_wait = Duration::from_secs(10));
    h.sup.inner.lock().unwrap().unready.insert("flower".into());
    let id = up_waiting(
        &h,
        vec![("flower", web("celery flower", &[]))],
        Some(Duration::from_secs(60)),
    );
    h.converge(id).await;
    h.started_ago("flower", Duration::from_secs(61));
    reconcile(&h.proc_, &h.store, id).await;
    let c = h.ready(id);
    assert_eq!(c.reason, "HealthTimeout");
    assert!(
        c.message.starts_with("flower did not listen on its port within 60.0s (the --timeout of the `binky up` or `binky reload` that started it): not listening yet on its port"),
        "{}",
        c.message
    );
    // A world whose record names no wait: the daemon's.
    let h = h_with(|c| c.port_wait = Duration::from_secs(10));
    h.sup.inner.lock().unwrap().unready.insert("flower".into());
    let id = up_waiting(&h, vec![("flower", web("celery flower", &[]))], None);
    h.converge(id).await;
    h.started_ago("flower", Duration::from_secs(11));
    reconcile(&h.proc_, &h.store, id).await;
    assert!(
        h.ready(id).message.contains("within 10.0s"),
        "{}",
        h.ready(id).message
    );
}

#[tokio::test]
async fn a_service_listening_on_another_port_is_told_apart_from_one_not_listening_yet() {
    let h = h();
    h.sup
        .inner
        .lock()
        .unwrap()
        .elsewhere
        .insert("flower".into(), vec![5555]);
    let id = up_waiting(&h, vec![("flower", web("celery flower", &[]))], None);
    h.converge(id).await;
    let port = h.store.read(|c| store::ports(c, id)).unwrap()[0].port;
    let c = h.ready(id);
    assert_eq!(
        c.message,
        format!("flower: listening on port 5555, not on its port {port}: make its cmd listen on ${{self.port}} (binky also sets $PORT)")
    );
    assert!(
        h.row(id, "flower")
            .message
            .contains(&format!("listening on port 5555, not on its port {port}")),
        "{}",
        h.row(id, "flower").message
    );
}

/// A service waits only for the paths its working directory needs while the worktree is
/// still getting them: a held `web/node_modules` holds web, never the backend in another
/// directory.
#[tokio::test]
async fn a_service_waits_only_for_the_paths_its_workdir_needs() {
    let h = h();
    let mut api = web("api", &[]);
    let mut front = web("web", &[]);
    for (svc, dir) in [(&mut api, "backend"), (&mut front, "web")] {
        if let ServiceKind::Process(p) = &mut svc.kind {
            p.workdir = dir.into();
        }
    }
    let id = h.up(spec(vec![("api", api), ("web", front)]));
    reconcile(&h.gate, &h.store, id).await;
    reconcile(&h.wt, &h.store, id).await;
    reconcile(&h.port, &h.store, id).await;
    let set = |path: &str, state: &str| {
        h.store
            .write_fixture(|tx| {
                tx.execute(
                    "INSERT INTO bootstrap_paths (world_id, path, src, mode, state, updated_at)
                     VALUES (?1, ?2, '/repo', 'link', ?3, 0)
                     ON CONFLICT (world_id, path) DO UPDATE SET state = excluded.state",
                    rusqlite::params![id, path, state],
                )?;
                Ok(())
            })
            .unwrap()
    };
    set("web/node_modules", "pending");
    set("backend/.venv", "done");
    reconcile(&h.proc_, &h.store, id).await;
    assert_eq!(h.sup.spawn_order(), vec!["api"]);
    let row = h.row(id, "web");
    assert!(
        row.message
            .contains("waiting for web/node_modules to be brought"),
        "{}",
        row.message
    );
    // A path at the top is everyone's.
    set("package.json.lock", "pending");
    set("web/node_modules", "done");
    reconcile(&h.proc_, &h.store, id).await;
    assert_eq!(h.sup.spawn_order(), vec!["api"]);
    set("package.json.lock", "done");
    reconcile(&h.proc_, &h.store, id).await;
    assert_eq!(h.sup.spawn_order(), vec!["api", "web"]);
}
