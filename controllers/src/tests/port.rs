use rusqlite::params;

use crate::port::PortController;
use crate::registry::Kind;
use crate::store::{self, Store};
use crate::testing::*;

fn setup() -> (
    tempfile::TempDir,
    Store,
    PortController<FakePorts>,
    FakePorts,
) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let probe = FakePorts::default();
    let ctrl = PortController::new(store.clone(), probe.clone());
    (dir, store, ctrl, probe)
}

fn ports(store: &Store, id: i64) -> Vec<(String, u16)> {
    store
        .read(|c| store::ports(c, id))
        .unwrap()
        .into_iter()
        .map(|p| (p.service, p.port))
        .collect()
}

fn set_process_state(store: &Store, id: i64, service: &str, state: &str) {
    store
        .write_fixture(|tx| {
            tx.execute(
                "INSERT OR REPLACE INTO processes (world_id, service, state, updated_at) VALUES (?1, ?2, ?3, 0)",
                params![id, service, state],
            )?;
            Ok(())
        })
        .unwrap();
}

#[tokio::test]
async fn every_port_is_unique_across_worlds_and_stable() {
    let (dir, store, ctrl, _) = setup();
    let s = spec(vec![
        ("api", web("x", &[])),
        ("web", web("x", &["api"])),
        ("worker", {
            let mut w = web("x", &[]);
            if let crate::spec::ServiceKind::Process(p) = &mut w.kind {
                p.url = None;
            }
            w
        }),
    ]);
    let a = store
        .put_world(&new_world(dir.path(), "a", s.clone()))
        .unwrap()
        .world;
    let b = store
        .put_world(&new_world(dir.path(), "b", s))
        .unwrap()
        .world;
    reconcile(&ctrl, &store, a.id).await;
    reconcile(&ctrl, &store, b.id).await;
    let pa = ports(&store, a.id);
    let pb = ports(&store, b.id);
    assert_eq!(pa.len(), 2, "the worker asks for no port: {pa:?}");
    let mut all: Vec<u16> = pa.iter().chain(&pb).map(|(_, p)| *p).collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 4);
    assert!(all.iter().all(|p| (5000..=5009).contains(p)));
    reconcile(&ctrl, &store, a.id).await;
    assert_eq!(ports(&store, a.id), pa, "a second pass moved ports");
}

#[tokio::test]
async fn a_port_held_by_a_foreign_process_is_skipped() {
    let (dir, store, ctrl, probe) = setup();
    probe.busy.lock().unwrap().extend(5000..=5008);
    let w = store
        .put_world(&new_world(
            dir.path(),
            "w",
            spec(vec![("api", web("x", &[]))]),
        ))
        .unwrap()
        .world;
    reconcile(&ctrl, &store, w.id).await;
    assert_eq!(ports(&store, w.id), vec![("api".to_string(), 5009)]);
}

#[tokio::test]
async fn an_exhausted_range_stalls_naming_the_fix() {
    let (dir, store, ctrl, probe) = setup();
    probe.busy.lock().unwrap().extend(5000..=5009);
    let w = store
        .put_world(&new_world(
            dir.path(),
            "w",
            spec(vec![("api", web("x", &[]))]),
        ))
        .unwrap()
        .world;
    reconcile(&ctrl, &store, w.id).await;
    let c = store.read(|c| store::conditions(c, w.id)).unwrap();
    assert_eq!(c[0].reason, "PortRangeExhausted");
    assert!(c[0].stalled);
    assert!(
        c[0].message.contains("widen [project] port_range"),
        "{}",
        c[0].message
    );
}

#[tokio::test]
async fn a_taken_port_moves_only_while_its_service_is_not_running() {
    let (dir, store, ctrl, probe) = setup();
    let w = store
        .put_world(&new_world(
            dir.path(),
            "w",
            spec(vec![("api", web("x", &[]))]),
        ))
        .unwrap()
        .world;
    reconcile(&ctrl, &store, w.id).await;
    let first = ports(&store, w.id)[0].1;
    // Running: its own process holds the port; never probed, never moved.
    set_process_state(&store, w.id, "api", "running");
    probe.busy.lock().unwrap().insert(first);
    probe.probed.lock().unwrap().clear();
    reconcile(&ctrl, &store, w.id).await;
    assert_eq!(ports(&store, w.id)[0].1, first);
    assert!(!probe.probed.lock().unwrap().contains(&first));
    // Stopped, and someone else took it: moved, with an event.
    set_process_state(&store, w.id, "api", "stopped");
    reconcile(&ctrl, &store, w.id).await;
    let now = ports(&store, w.id)[0].1;
    assert_ne!(now, first);
    let evs = store
        .read(|c| store::events(c, "acme", "w", 0, 50))
        .unwrap();
    assert!(evs
        .iter()
        .any(|e| e.kind == "port_moved" && e.message.contains(&first.to_string())));
}

#[tokio::test]
async fn ports_of_removed_services_are_released_and_removal_waits_for_processes() {
    let (dir, store, ctrl, _) = setup();
    let mut nw = new_world(
        dir.path(),
        "w",
        spec(vec![("api", web("x", &[])), ("web", web("x", &[]))]),
    );
    let w = store.put_world(&nw).unwrap().world;
    reconcile(&ctrl, &store, w.id).await;
    nw.spec.services.remove("web");
    store.put_world(&nw).unwrap();
    reconcile(&ctrl, &store, w.id).await;
    assert_eq!(ports(&store, w.id).len(), 1);

    store
        .write_fixture(|tx| {
            tx.execute(
                "INSERT INTO finalizers VALUES (?1, ?2)",
                params![w.id, Kind::Process.name()],
            )?;
            Ok(())
        })
        .unwrap();
    store.mark_deleted(w.id, false).unwrap();
    // Through the runtime, which keeps the declared teardown order.
    reconcile(&ctrl, &store, w.id).await;
    assert_eq!(
        ports(&store, w.id).len(),
        1,
        "released while processes may hold it"
    );
    store
        .write_fixture(|tx| {
            tx.execute(
                "DELETE FROM finalizers WHERE controller = ?1",
                [Kind::Process.name()],
            )?;
            Ok(())
        })
        .unwrap();
    reconcile(&ctrl, &store, w.id).await;
    assert!(ports(&store, w.id).is_empty());
}
