//! The admission gate's resident limits: FIFO queueing and cooling the least recently used
//! world.

use crate::registry::Kind;
use std::time::Duration;

use rusqlite::params;

use crate::gate::{self, AdmissionController};
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
    gate::held(store, &world(store, id).unwrap())
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
    assert_eq!(desired(&store, older), DesiredState::Stopped);
    assert!(
        held(&store, older).is_some(),
        "the cooled world kept its place"
    );
    assert!(events(&store, "older").iter().any(|(k, m)| k == "cooled"
        && m.contains("to make room for n")
        && m.contains("`binky up older` brings it back")));
    for id in [old, recent] {
        assert_eq!(desired(&store, id), DesiredState::Running);
        assert_eq!(held(&store, id), None);
    }
    // Its memory is not free yet: n waits, saying why.
    let why = held(&store, n).unwrap();
    assert!(why.contains("ram_reserve_percent = 50"), "{why}");
    ask(&roomy, &store, n).await;
    assert_eq!(held(&store, n), None);
    assert_eq!(desired(&store, old), DesiredState::Running);
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
    assert_eq!(desired(&store, a), DesiredState::Running);
    assert_eq!(held(&store, a), None);
    assert!(held(&store, n).unwrap().contains("max_parallel = 1"));
    assert!(!events(&store, "a").iter().any(|(k, _)| k == "cooled"));
    // Out of focus now: cooled, and its place is n's at once.
    used_minutes_ago(&store, a, 11);
    ask(&gate, &store, n).await;
    assert_eq!(desired(&store, a), DesiredState::Stopped);
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
    assert_eq!(desired(&store, older), DesiredState::Stopped);
    assert_eq!(
        desired(&store, old),
        DesiredState::Running,
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
    assert_eq!(desired(&store, old), DesiredState::Stopped);
    ask(&short, &store, n).await;
    assert_eq!(
        desired(&store, recent),
        DesiredState::Running,
        "cooled in focus"
    );
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
    assert_eq!(desired(&store, a), DesiredState::Running);
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
    assert_eq!(desired(&store, old), DesiredState::Running);
    let why = held(&store, n).unwrap();
    assert!(
        why.contains("waiting for downed to stop before cooling another world"),
        "{why}"
    );
    running_process(&store, downed, None);
    ask(&short, &store, n).await;
    assert_eq!(desired(&store, old), DesiredState::Stopped);
}
