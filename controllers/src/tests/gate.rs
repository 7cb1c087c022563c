//! The admission gate's resident limits: FIFO queueing and cooling the least recently used
//! world.

use crate::registry::Kind;
use std::time::Duration;

use rusqlite::params;

use crate::gate::AdmissionController;
use crate::store::{now_ms, CondStatus, DesiredState, Store};
use crate::testing::*;

fn setup(settings: &[(&str, &str)]) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    for (k, v) in settings {
        store.set_setting(k, v).unwrap();
    }
    (dir, store)
}

fn up(dir: &tempfile::TempDir, store: &Store, name: &str) -> i64 {
    store
        .put_world(&new_world(
            dir.path(),
            name,
            spec(vec![("api", web("serve", &[]))]),
        ))
        .unwrap()
        .world
        .id
}

/// `None` when admitted, else the reason it is held.
fn held(store: &Store, id: i64) -> Option<String> {
    crate::hold::held(store, &world(store, id).unwrap())
        .unwrap()
        .map(|(_, why)| why)
}

fn used_minutes_ago(store: &Store, id: i64, minutes: i64) {
    store
        .write_fixture(|tx| {
            tx.execute(
                "UPDATE worlds SET last_used_at = ?1 WHERE id = ?2",
                params![now_ms() - minutes * 60_000, id],
            )?;
            Ok(())
        })
        .unwrap();
}

fn desired(store: &Store, id: i64) -> DesiredState {
    world(store, id).unwrap().desired
}

/// The world's place at the gate: `admitted`, `queued`, `cooled` (or `none`).
fn place(store: &Store, id: i64) -> String {
    store
        .read(|c| {
            Ok(c.query_row(
                "SELECT state FROM admissions WHERE world_id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap_or_else(|_| "none".to_owned()))
        })
        .unwrap()
}

/// Ask the gate after a moment, so every world asks at a distinct millisecond.
async fn ask(gate: &AdmissionController<FakeMachine>, store: &Store, id: i64) {
    tokio::time::sleep(Duration::from_millis(3)).await;
    reconcile(gate, store, id).await;
}

#[tokio::test]
async fn queued_worlds_are_admitted_in_the_order_they_asked_as_room_appears() {
    let (dir, store) = setup(&[("max_parallel", "1")]);
    let gate = AdmissionController::new(store.clone(), FakeMachine::default());
    let a = up(&dir, &store, "a");
    let b = up(&dir, &store, "b");
    let c = up(&dir, &store, "c");
    let d = up(&dir, &store, "d");
    ask(&gate, &store, a).await;
    assert_eq!(held(&store, a), None);
    // c asks before b, and d last.
    ask(&gate, &store, c).await;
    ask(&gate, &store, b).await;
    ask(&gate, &store, d).await;
    let why = held(&store, c).unwrap();
    assert!(
        why.contains("1 world(s) running, max_parallel = 1"),
        "{why}"
    );
    assert!(held(&store, b)
        .unwrap()
        .contains("queued behind 1 world(s)"));
    assert!(held(&store, d)
        .unwrap()
        .contains("queued behind 2 world(s)"));
    let cond = condition(&store, b, Kind::Admission.condition());
    assert_eq!(
        (cond.status, cond.reason.as_str()),
        (CondStatus::False, "Queued")
    );
    // a goes down: its place is free at once, and it is c's, not b's.
    store.set_desired_state(a, DesiredState::Stopped).unwrap();
    ask(&gate, &store, a).await;
    ask(&gate, &store, b).await;
    ask(&gate, &store, d).await;
    assert!(
        held(&store, b)
            .unwrap()
            .contains("queued behind 1 world(s) that asked first"),
        "b jumped the queue"
    );
    assert!(held(&store, d).is_some(), "d jumped the queue");
    ask(&gate, &store, c).await;
    assert_eq!(held(&store, c), None);
    // One at a time: b is next but the limit holds it.
    ask(&gate, &store, b).await;
    assert!(held(&store, b).unwrap().contains("max_parallel = 1"));
    // A queued world that goes down gives its place up too.
    store.set_desired_state(b, DesiredState::Stopped).unwrap();
    ask(&gate, &store, b).await;
    store.set_desired_state(c, DesiredState::Stopped).unwrap();
    ask(&gate, &store, c).await;
    ask(&gate, &store, d).await;
    assert_eq!(held(&store, d), None);
    assert!(held(&store, b).is_some());
}

#[tokio::test]
async fn short_of_memory_the_least_recently_used_world_out_of_focus_is_cooled() {
    let (dir, store) = setup(&[("ram_reserve_percent", "50"), ("cool_oldest", "true")]);
    let roomy = AdmissionController::new(store.clone(), FakeMachine::default());
    let [older, old, recent] = ["older", "old", "recent"].map(|n| up(&dir, &store, n));
    for id in [older, old, recent] {
        ask(&roomy, &store, id).await;
        assert_eq!(held(&store, id), None);
    }
    used_minutes_ago(&store, older, 60);
    used_minutes_ago(&store, old, 30);
    used_minutes_ago(&store, recent, 1);
    let n = up(&dir, &store, "n");
    let short = AdmissionController::new(
        store.clone(),
        FakeMachine {
            mem: 30.0,
            disk: 100.0,
        },
    );
    ask(&short, &store, n).await;
    // Cooled: still wanted (it comes back by itself), held at the gate.
    assert_eq!(desired(&store, older), DesiredState::Running);
    assert_eq!(place(&store, older), "cooled");
    assert!(
        held(&store, older).is_some(),
        "the cooled world kept its place"
    );
    assert!(events(&store, "older").iter().any(|(k, m)| k == "cooled"
        && m.contains("to make room for n")
        && m.contains("starts again by itself when there is room")));
    for id in [old, recent] {
        assert_eq!(place(&store, id), "admitted");
        assert_eq!(held(&store, id), None);
    }
    // Its memory is not free yet: n waits, saying why.
    let why = held(&store, n).unwrap();
    assert!(why.contains("ram_reserve_percent = 50"), "{why}");
    ask(&roomy, &store, n).await;
    assert_eq!(held(&store, n), None);
    assert_eq!(place(&store, old), "admitted");
}

#[tokio::test]
async fn a_world_in_focus_is_never_cooled_and_the_newcomer_queues_instead() {
    let (dir, store) = setup(&[
        ("max_parallel", "1"),
        ("cool_oldest", "true"),
        ("focus_minutes", "10"),
    ]);
    let gate = AdmissionController::new(store.clone(), FakeMachine::default());
    let a = up(&dir, &store, "a");
    ask(&gate, &store, a).await;
    used_minutes_ago(&store, a, 9);
    let n = up(&dir, &store, "n");
    ask(&gate, &store, n).await;
    assert_eq!(place(&store, a), "admitted");
    assert_eq!(held(&store, a), None);
    assert!(held(&store, n).unwrap().contains("max_parallel = 1"));
    assert!(!events(&store, "a").iter().any(|(k, _)| k == "cooled"));
    // Out of focus now: cooled, and its place is n's at once.
    used_minutes_ago(&store, a, 11);
    ask(&gate, &store, n).await;
    assert_eq!(place(&store, a), "cooled");
    assert_eq!(held(&store, n), None);
    let admitted: i64 = store
        .read(|c| {
            Ok(c.query_row(
                "SELECT COUNT(*) FROM admissions WHERE state = 'admitted'",
                [],
                |r| r.get(0),
            )?)
        })
        .unwrap();
    assert_eq!(admitted, 1, "over max_parallel");
}

fn running_process(store: &Store, id: i64, pid: Option<u32>) {
    store
        .write_fixture(|tx| {
            tx.execute(
                "INSERT OR REPLACE INTO processes (world_id, service, state, pid, updated_at)
                 VALUES (?1, 'api', 'running', ?2, 0)",
                params![id, pid],
            )?;
            Ok(())
        })
        .unwrap();
}

#[tokio::test]
async fn short_of_memory_a_newcomer_cools_one_world_at_a_time_each_once_it_has_stopped() {
    // Regression: every gate pass (500 ms) cooled another world while the first one's
    // processes were still stopping, so one newcomer stopped every world out of focus.
    let (dir, store) = setup(&[("ram_reserve_percent", "50"), ("cool_oldest", "true")]);
    let roomy = AdmissionController::new(store.clone(), FakeMachine::default());
    let [older, old, recent] = ["older", "old", "recent"].map(|n| up(&dir, &store, n));
    for (id, minutes) in [(older, 60), (old, 30), (recent, 1)] {
        ask(&roomy, &store, id).await;
        running_process(&store, id, Some(4000 + id as u32));
        used_minutes_ago(&store, id, minutes);
    }
    let n = up(&dir, &store, "n");
    let short = AdmissionController::new(
        store.clone(),
        FakeMachine {
            mem: 30.0,
            disk: 100.0,
        },
    );
    for _ in 0..3 {
        ask(&short, &store, n).await;
    }
    assert_eq!(place(&store, older), "cooled");
    assert_eq!(
        place(&store, old),
        "admitted",
        "cooled a second world before the first one stopped"
    );
    let why = held(&store, n).unwrap();
    assert!(
        why.contains("waiting for older to stop before cooling another world"),
        "{why}"
    );
    // older's processes are gone and memory is still short: the next one goes.
    running_process(&store, older, None);
    ask(&short, &store, n).await;
    assert_eq!(place(&store, old), "cooled");
    ask(&short, &store, n).await;
    assert_eq!(place(&store, recent), "admitted", "cooled in focus");
    assert!(held(&store, n).is_some());
}

#[tokio::test]
async fn short_of_disk_nothing_is_cooled_since_a_cooled_world_keeps_its_files() {
    // Regression: cooling for the disk reserve freed nothing and stopped every world out of
    // focus, one per gate pass.
    let (dir, store) = setup(&[("disk_reserve_gib", "10"), ("cool_oldest", "true")]);
    let roomy = AdmissionController::new(store.clone(), FakeMachine::default());
    let a = up(&dir, &store, "a");
    ask(&roomy, &store, a).await;
    used_minutes_ago(&store, a, 60);
    let n = up(&dir, &store, "n");
    let full = AdmissionController::new(
        store.clone(),
        FakeMachine {
            mem: 80.0,
            disk: 4.0,
        },
    );
    for _ in 0..3 {
        ask(&full, &store, n).await;
    }
    assert_eq!(place(&store, a), "admitted");
    assert!(!events(&store, "a").iter().any(|(k, _)| k == "cooled"));
    let why = held(&store, n).unwrap();
    assert!(why.contains("4.0 GiB free"), "{why}");
    ask(&roomy, &store, n).await;
    assert_eq!(held(&store, n), None);
}

#[tokio::test]
async fn a_world_the_user_stopped_that_still_has_processes_holds_cooling_until_they_are_gone() {
    // The memory a stopping world frees is not free yet, whoever stopped it: cooling
    // another world meanwhile would stop one too many.
    let (dir, store) = setup(&[("ram_reserve_percent", "50"), ("cool_oldest", "true")]);
    let roomy = AdmissionController::new(store.clone(), FakeMachine::default());
    let [downed, old] = ["downed", "old"].map(|n| up(&dir, &store, n));
    for id in [downed, old] {
        ask(&roomy, &store, id).await;
        running_process(&store, id, Some(5000 + id as u32));
        used_minutes_ago(&store, id, 60);
    }
    store
        .set_desired_state(downed, DesiredState::Stopped)
        .unwrap();
    let n = up(&dir, &store, "n");
    let short = AdmissionController::new(
        store.clone(),
        FakeMachine {
            mem: 30.0,
            disk: 100.0,
        },
    );
    ask(&short, &store, n).await;
    assert_eq!(place(&store, old), "admitted");
    let why = held(&store, n).unwrap();
    assert!(
        why.contains("waiting for downed to stop before cooling another world"),
        "{why}"
    );
    running_process(&store, downed, None);
    ask(&short, &store, n).await;
    assert_eq!(place(&store, old), "cooled");
}

#[tokio::test]
async fn a_cooled_world_starts_again_by_itself_when_a_place_frees_and_never_cools_another() {
    let (dir, store) = setup(&[
        ("max_parallel", "1"),
        ("cool_oldest", "true"),
        ("focus_minutes", "0"),
    ]);
    let gate = AdmissionController::new(store.clone(), FakeMachine::default());
    let a = up(&dir, &store, "a");
    ask(&gate, &store, a).await;
    used_minutes_ago(&store, a, 5);
    let n = up(&dir, &store, "n");
    ask(&gate, &store, n).await;
    assert_eq!(place(&store, a), "cooled");
    assert_eq!(place(&store, n), "admitted");
    // a asks again and again while n runs: it waits, and cools nobody (n is out of focus).
    used_minutes_ago(&store, n, 5);
    for _ in 0..3 {
        ask(&gate, &store, a).await;
    }
    assert_eq!(place(&store, n), "admitted", "a cooled n to come back");
    let why = held(&store, a).unwrap();
    assert!(
        why.starts_with("cooled: stopped to make room for n"),
        "{why}"
    );
    // n goes down: a starts again by itself, and says so.
    store.set_desired_state(n, DesiredState::Stopped).unwrap();
    ask(&gate, &store, n).await;
    ask(&gate, &store, a).await;
    assert_eq!(place(&store, a), "admitted");
    assert!(events(&store, "a")
        .iter()
        .any(|(k, m)| k == "resumed" && m.contains("there is room now")));
}

#[tokio::test]
async fn binky_up_of_a_cooled_world_asks_again_at_once() {
    let (dir, store) = setup(&[
        ("max_parallel", "1"),
        ("cool_oldest", "true"),
        ("focus_minutes", "1"),
    ]);
    let gate = AdmissionController::new(store.clone(), FakeMachine::default());
    let a = up(&dir, &store, "a");
    ask(&gate, &store, a).await;
    used_minutes_ago(&store, a, 5);
    let n = up(&dir, &store, "n");
    ask(&gate, &store, n).await;
    assert_eq!(place(&store, a), "cooled");
    used_minutes_ago(&store, n, 5);
    // `binky up a`: a request of its own, which may cool n (out of focus) like any other.
    tokio::time::sleep(Duration::from_millis(3)).await;
    assert_eq!(up(&dir, &store, "a"), a);
    ask(&gate, &store, a).await;
    assert_eq!(place(&store, a), "admitted");
    assert_eq!(place(&store, n), "cooled");
}

#[tokio::test]
async fn under_memory_pressure_the_world_admitted_last_is_cooled_and_resumes_when_memory_is_back() {
    let (dir, store) = setup(&[("ram_reserve_percent", "20")]);
    let roomy = AdmissionController::new(store.clone(), FakeMachine::default());
    let [first, second, last] = ["first", "second", "last"].map(|n| up(&dir, &store, n));
    for id in [first, second, last] {
        ask(&roomy, &store, id).await;
        assert_eq!(place(&store, id), "admitted");
        running_process(&store, id, Some(6000 + id as u32));
    }
    let short = AdmissionController::new(
        store.clone(),
        FakeMachine {
            mem: 12.0,
            disk: 100.0,
        },
    )
    .with_pressure_for(Duration::ZERO);
    // Every world looks; only the one admitted last is cooled, and while its processes
    // stop (what it frees is not free yet) no other.
    for id in [first, second, last, first, second] {
        ask(&short, &store, id).await;
    }
    assert_eq!(place(&store, last), "cooled");
    running_process(&store, last, None);
    for id in [first, second] {
        assert_eq!(place(&store, id), "admitted");
    }
    let why = held(&store, last).unwrap();
    assert!(
        why.contains("12% of memory available") && why.contains("ram_reserve_percent = 20"),
        "{why}"
    );
    // Memory back at the reserve but not past its margin: it waits, saying so.
    let edge = AdmissionController::new(
        store.clone(),
        FakeMachine {
            mem: 22.0,
            disk: 100.0,
        },
    );
    ask(&edge, &store, last).await;
    assert_eq!(place(&store, last), "cooled");
    let c = condition(&store, last, Kind::Admission.condition());
    assert!(c.message.contains("+5 to come back"), "{}", c.message);
    ask(&roomy, &store, last).await;
    assert_eq!(place(&store, last), "admitted");
    assert!(events(&store, "last").iter().any(|(k, _)| k == "resumed"));
    running_process(&store, last, Some(7000));
    // Just resumed: under pressure again, the next newest goes, not it.
    for id in [first, second, last] {
        ask(&short, &store, id).await;
    }
    assert_eq!(
        place(&store, last),
        "admitted",
        "cooled again within its grace"
    );
    assert_eq!(place(&store, second), "cooled");
}

#[tokio::test]
async fn a_moment_of_low_memory_cools_nothing() {
    let (dir, store) = setup(&[("ram_reserve_percent", "20")]);
    let a = up(&dir, &store, "a");
    ask(
        &AdmissionController::new(store.clone(), FakeMachine::default()),
        &store,
        a,
    )
    .await;
    // The default wait for pressure: one short look does not cool.
    let short = AdmissionController::new(
        store.clone(),
        FakeMachine {
            mem: 5.0,
            disk: 100.0,
        },
    );
    ask(&short, &store, a).await;
    assert_eq!(place(&store, a), "admitted");
    // And with cool_under_pressure off, never.
    store.set_setting("cool_under_pressure", "false").unwrap();
    let off = AdmissionController::new(
        store.clone(),
        FakeMachine {
            mem: 5.0,
            disk: 100.0,
        },
    )
    .with_pressure_for(Duration::ZERO);
    ask(&off, &store, a).await;
    assert_eq!(place(&store, a), "admitted");
}

#[tokio::test]
async fn a_projects_shared_world_takes_no_place_and_is_never_the_world_cooled() {
    let (dir, store) = setup(&[
        ("max_parallel", "1"),
        ("cool_oldest", "true"),
        ("focus_minutes", "0"),
    ]);
    let gate = AdmissionController::new(store.clone(), FakeMachine::default());
    let mut mail = web("mailpit", &[]);
    mail.shared = true;
    let with_mail = || spec(vec![("mail", mail.clone()), ("api", web("serve", &[]))]);
    let a = store
        .put_world(&new_world(dir.path(), "a", with_mail()))
        .unwrap()
        .world
        .id;
    let shared = store
        .read(|c| crate::store::world_by_name(c, "acme", crate::shared::WORLD))
        .unwrap()
        .expect("the project's shared world is written with a")
        .id;
    ask(&gate, &store, a).await;
    ask(&gate, &store, shared).await;
    // max_parallel = 1 holds a, and the shared world besides it.
    assert_eq!(place(&store, a), "admitted");
    assert_eq!(place(&store, shared), "admitted");
    assert_eq!(held(&store, shared), None);
    // A newcomer over the limit cools a, the world out of focus, never the shared world
    // (used longest ago, as it is never used itself).
    used_minutes_ago(&store, shared, 60);
    used_minutes_ago(&store, a, 5);
    let n = up(&dir, &store, "n");
    ask(&gate, &store, n).await;
    assert_eq!(place(&store, a), "cooled");
    assert_eq!(place(&store, n), "admitted");
    assert_eq!(place(&store, shared), "admitted");
    assert_eq!(held(&store, shared), None);
}
