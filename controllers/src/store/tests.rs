use std::collections::BTreeMap;
use std::path::PathBuf;

use super::*;
use crate::spec::{Agents, Hooks, Project, Spec};

pub(crate) fn spec(name: &str) -> Spec {
    Spec {
        project: Project {
            name: name.into(),
            domain: None,
            port_range: None,
            https: false,
            copy: Vec::new(),
            copy_modes: Default::default(),
        },
        services: BTreeMap::new(),
        groups: BTreeMap::new(),
        agents: Agents::default(),
        hooks: Hooks::default(),
        order: vec![],
    }
}

pub(crate) fn new_world(project: &str, repo: &str, name: &str) -> NewWorld {
    NewWorld {
        project: project.into(),
        repo_root: PathBuf::from(repo),
        name: name.into(),
        branch: name.into(),
        from_ref: None,
        worktree_path: PathBuf::from(format!("{repo}.worktrees/{name}")),
        config_rel: String::new(),
        config_path: PathBuf::from(format!("{repo}/binky.toml")),
        spec: spec(project),
        env: BTreeMap::from([("PATH".to_string(), "/usr/bin".to_string())]),
        group: None,
        wait: None,
        made_by: None,
    }
}

#[test]
fn a_reopened_store_keeps_its_records_and_schema_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let store = Store::open(&path).unwrap();
        store.put_world(&new_world("acme", "/r", "w1")).unwrap();
    }
    let store = Store::open(&path).unwrap();
    let worlds = store.read(worlds).unwrap();
    assert_eq!(worlds.len(), 1);
    assert_eq!(worlds[0].name, "w1");
    assert_eq!(worlds[0].env["PATH"], "/usr/bin");
    let (version, mode): (i64, String) = store
        .read(|c| {
            Ok((
                c.pragma_query_value(None, "user_version", |r| r.get(0))?,
                c.pragma_query_value(None, "journal_mode", |r| r.get(0))?,
            ))
        })
        .unwrap();
    assert_eq!(version, migrations::LATEST);
    assert_eq!(mode, "wal");
}

#[test]
fn a_home_gets_its_identity_once_and_keeps_it_and_no_owner_may_change_it() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.db"), dir.path().join("b.db"));
    let id = Store::open(&a).unwrap().read(home_id).unwrap();
    assert_eq!(id.len(), 8, "{id}");
    assert!(
        id.bytes()
            .all(|c| c.is_ascii_lowercase() || (b'2'..=b'7').contains(&c)),
        "{id}"
    );
    assert_eq!(Store::open(&a).unwrap().read(home_id).unwrap(), id);
    assert_ne!(Store::open(&b).unwrap().read(home_id).unwrap(), id);
    // No writer may change it, the commands' neither.
    let store = Store::open(&a).unwrap();
    let err = store
        .write(owner::Commands, |tx| {
            tx.execute("UPDATE home SET id = 'aaaaaaaa'", [])?;
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(err, StoreError::NotOwner(_)), "{err}");
    assert_eq!(store.read(home_id).unwrap(), id);
}

#[test]
fn a_home_made_before_homes_had_an_identity_gets_one_when_it_is_opened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        // A store as the binky before this identity left it (schema version 17).
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        migrations::migrate_to(&mut conn, 17).unwrap();
        let tables: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'home'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tables, 0);
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.read(home_id).unwrap().len(), 8);
}

/// A world an agent makes is recorded as the agent's in the transaction that makes it, and
/// the record goes with the world: writing a person's world again from an agent's process
/// never makes it the agent's, and a world made later under the name is not.
#[test]
fn a_world_an_agent_makes_is_recorded_with_it_and_only_then() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state.db")).unwrap();
    let by_agent = NewWorld {
        made_by: Some("it runs under `binky mcp`".into()),
        ..new_world("acme", "/r", "agents")
    };
    let agents = store.put_world(&by_agent).unwrap().world;
    assert_eq!(
        store.read(|c| agent_made(c, agents.id)).unwrap().as_deref(),
        Some("it runs under `binky mcp`")
    );
    // A person's `up` of it later keeps it the agent's.
    store.put_world(&new_world("acme", "/r", "agents")).unwrap();
    assert!(store.read(|c| agent_made(c, agents.id)).unwrap().is_some());
    // A person's world stays theirs, whoever writes it again.
    let persons = store
        .put_world(&new_world("acme", "/r", "persons"))
        .unwrap()
        .world;
    store
        .put_world(&NewWorld {
            made_by: Some("it runs in world acme/agents".into()),
            ..new_world("acme", "/r", "persons")
        })
        .unwrap();
    assert_eq!(store.read(|c| agent_made(c, persons.id)).unwrap(), None);
    // Removed (the runtime deletes the row once its finalizers are gone): the record goes
    // with it, and the name made again by a person is theirs.
    store.mark_deleted(agents.id, false).unwrap();
    store
        .write(owner::Runtime, |tx| {
            tx.execute("DELETE FROM worlds WHERE id = ?1", [agents.id])?;
            Ok(())
        })
        .unwrap();
    assert_eq!(store.read(|c| agent_made(c, agents.id)).unwrap(), None);
    let again = store
        .put_world(&new_world("acme", "/r", "agents"))
        .unwrap()
        .world;
    assert_ne!(again.id, agents.id);
    assert_eq!(store.read(|c| agent_made(c, again.id)).unwrap(), None);
}

/// An upgraded home's `mcp-created` file is read once, when the store's schema takes the
/// record in: a line counts only for the world of that id, project and name; the file is
/// then set aside, and a line appended to a new one later makes no world the agent's.
#[test]
fn the_mcp_created_file_of_an_upgraded_home_is_imported_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let ids = {
        // A store as the binky before this record left it (schema version 19), with three
        // worlds.
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        migrations::migrate_to(&mut conn, 19).unwrap();
        conn.execute(
            "INSERT INTO projects (id, name, repo_root, created_at) VALUES (1, 'acme', '/r', 0)",
            [],
        )
        .unwrap();
        let spec = serde_json::to_string(&spec("acme")).unwrap();
        for (id, name) in [(5, "mine"), (6, "persons"), (7, "renamed")] {
            conn.execute(
                "INSERT INTO worlds (id, project_id, name, branch, worktree_path, config_rel,
                    config_path, spec, env, desired_state, generation, created_at, updated_at,
                    last_used_at)
                 VALUES (?1, 1, ?2, ?2, '/w', '', '/r/binky.toml', ?3, '{}', 'running', 1, 0, 0, 0)",
                rusqlite::params![id, name, spec],
            )
            .unwrap();
        }
        [5, 6, 7]
    };
    let file = dir.path().join(migrations::AGENT_MADE_FILE);
    std::fs::write(
        &file,
        "5\tacme\tmine\n7\tacme\tnot-its-name\n99\tacme\tgone\nnot a line\n",
    )
    .unwrap();
    let store = Store::open(&path).unwrap();
    let made = |id| store.read(|c| agent_made(c, id)).unwrap().is_some();
    assert_eq!(ids.map(made), [true, false, false]);
    assert!(!file.exists(), "the file is still where binky read it");
    assert!(dir.path().join("mcp-created.imported").is_file());
    // Appended to afterwards (a new file): read no more.
    std::fs::write(&file, "6\tacme\tpersons\n").unwrap();
    drop(store);
    let store = Store::open(&path).unwrap();
    assert_eq!(store.read(|c| agent_made(c, 6)).unwrap(), None);
}

#[test]
fn a_store_from_a_newer_binky_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 999).unwrap();
    }
    let err = Store::open(&path).unwrap_err();
    assert!(
        matches!(err, StoreError::TooNew { found: 999, .. }),
        "{err}"
    );
}

#[test]
fn every_write_bumps_the_generation() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let first = store.put_world(&new_world("acme", "/r", "w1")).unwrap();
    assert!(first.created);
    assert_eq!(first.world.generation, 1);
    let again = store.put_world(&new_world("acme", "/r", "w1")).unwrap();
    assert!(!again.created);
    assert_eq!(again.world.generation, 2);
    assert_eq!(
        store
            .set_desired_state(first.world.id, DesiredState::Stopped)
            .unwrap(),
        3
    );
    assert_eq!(store.reload_world(first.world.id, None).unwrap(), 4);
    let w = store.read(|c| world(c, first.world.id)).unwrap().unwrap();
    assert_eq!(w.restart_nonce, 1);
    assert_eq!(w.desired, DesiredState::Running);
}

#[test]
fn a_project_name_belongs_to_one_repository() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    store.put_world(&new_world("acme", "/r1", "w1")).unwrap();
    let err = store
        .put_world(&new_world("acme", "/r2", "w1"))
        .unwrap_err();
    assert!(matches!(err, StoreError::ProjectNameTaken { .. }), "{err}");
    assert!(err.to_string().contains("rename [project].name"), "{err}");
}

#[test]
fn names_that_differ_only_by_case_are_one_name() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let demo = store.put_world(&new_world("acme", "/r", "Demo")).unwrap();
    // The same name again is the same world, brought up again.
    let again = store.put_world(&new_world("acme", "/r", "Demo")).unwrap();
    assert!(!again.created);
    assert_eq!(again.world.id, demo.world.id);
    // Another case of it would share the world's host names (and, on macOS and Windows, its
    // worktree folder): refused, naming the world that has it.
    for other in ["demo", "DEMO", "dEmO"] {
        let err = store
            .put_world(&new_world("acme", "/r", other))
            .unwrap_err();
        assert!(matches!(err, StoreError::NameDiffersByCase { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains(&format!("world `{other}`")), "{msg}");
        assert!(
            msg.contains("world `Demo`") && msg.contains("use `Demo`"),
            "{msg}"
        );
    }
    // One being removed still holds its name's every case.
    store.mark_deleted(demo.world.id, false).unwrap();
    let err = store
        .put_world(&new_world("acme", "/r", "demo"))
        .unwrap_err();
    assert!(matches!(err, StoreError::NameDiffersByCase { .. }), "{err}");
    // Another project's world of that name is its own.
    store.put_world(&new_world("other", "/r2", "demo")).unwrap();
    // A project's name, likewise, from another repository or the same one.
    for repo in ["/r3", "/r"] {
        let err = store.put_world(&new_world("ACME", repo, "w1")).unwrap_err();
        assert!(matches!(err, StoreError::NameDiffersByCase { .. }), "{err}");
        assert!(
            err.to_string().contains(
                "project `ACME` differs only by case from project `acme` (registered from /r)"
            ),
            "{err}"
        );
    }
}

#[test]
fn a_project_without_worlds_takes_its_name_in_another_case() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let w = store
        .put_world(&new_world("acme", "/r", "w1"))
        .unwrap()
        .world;
    store
        .write_fixture(|tx| {
            tx.execute("DELETE FROM worlds WHERE id = ?1", [w.id])?;
            Ok(())
        })
        .unwrap();
    let renamed = store.put_world(&new_world("Acme", "/r", "w1")).unwrap();
    assert!(renamed.created);
    assert_eq!(renamed.world.project, "Acme");
}

#[test]
fn a_world_being_removed_cannot_be_brought_up() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let w = store
        .put_world(&new_world("acme", "/r", "w1"))
        .unwrap()
        .world;
    store.mark_deleted(w.id, false).unwrap();
    let err = store.put_world(&new_world("acme", "/r", "w1")).unwrap_err();
    assert!(matches!(err, StoreError::BeingRemoved(_)), "{err}");
    let err = store
        .set_desired_state(w.id, DesiredState::Running)
        .unwrap_err();
    assert!(matches!(err, StoreError::BeingRemoved(_)), "{err}");
}

#[test]
fn a_port_can_be_assigned_only_once_machine_wide() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let a = store
        .put_world(&new_world("acme", "/r", "a"))
        .unwrap()
        .world;
    let b = store
        .put_world(&new_world("acme", "/r", "b"))
        .unwrap()
        .world;
    let insert = |w: WorldId| {
        store.write_fixture(|tx| {
            tx.execute(
                "INSERT INTO ports (port, world_id, service, label, assigned_at) VALUES (4000, ?1, 'web', '', 0)",
                [w],
            )?;
            Ok(())
        })
    };
    insert(a.id).unwrap();
    assert!(insert(b.id).is_err());
    assert_eq!(store.read(all_ports).unwrap(), vec![4000]);
}

#[test]
fn events_keep_their_order_and_outlive_the_world() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let w = store
        .put_world(&new_world("acme", "/r", "w1"))
        .unwrap()
        .world;
    store.event(w.id, "x", "one").unwrap();
    store.event(w.id, "x", "two").unwrap();
    store
        .write_fixture(|tx| {
            tx.execute("DELETE FROM worlds WHERE id = ?1", [w.id])?;
            Ok(())
        })
        .unwrap();
    let evs = store.read(|c| events(c, "acme", "w1", 0, 100)).unwrap();
    let msgs: Vec<&str> = evs.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(msgs, vec!["world created", "one", "two"]);
    let last2 = store.read(|c| events(c, "acme", "w1", 0, 2)).unwrap();
    assert_eq!(last2.len(), 2);
    assert_eq!(last2[1].message, "two");
}

#[test]
fn a_world_made_again_under_a_removed_ones_name_gets_a_new_id_and_only_its_own_events() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let first = store
        .put_world(&new_world("acme", "/r", "w1"))
        .unwrap()
        .world;
    store.event(first.id, "x", "of the first").unwrap();
    store
        .write_fixture(|tx| {
            tx.execute("DELETE FROM worlds WHERE id = ?1", [first.id])?;
            Ok(())
        })
        .unwrap();
    let second = store
        .put_world(&new_world("acme", "/r", "w1"))
        .unwrap()
        .world;
    // Never the id of the removed one (SQLite's rowid would have given it again), so a record
    // kept by id (an agent's "worlds I made") never names the new world.
    assert_ne!(second.id, first.id);
    let third = store
        .put_world(&new_world("acme", "/r", "w2"))
        .unwrap()
        .world;
    assert!(third.id > second.id);
    store.event(second.id, "x", "of the second").unwrap();
    let msgs = |limit| {
        store
            .read(|c| events(c, "acme", "w1", 0, limit))
            .unwrap()
            .into_iter()
            .map(|e| e.message)
            .collect::<Vec<_>>()
    };
    assert_eq!(msgs(100), vec!["world created", "of the second"]);
    assert_eq!(msgs(1), vec!["of the second"]);
    assert_eq!(store.read(|c| world_lives(c, "acme", "w1")).unwrap(), 2);
    assert_eq!(
        store.read(|c| projects_with_world_events(c, "w1")).unwrap(),
        vec!["acme"]
    );
}

#[test]
fn golden_lookups_pick_the_one_row_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state.db")).unwrap();
    let a = store
        .put_world(&new_world("acme", "/r", "a"))
        .unwrap()
        .world
        .id;
    let b = store
        .put_world(&new_world("acme", "/r", "b"))
        .unwrap()
        .world
        .id;
    store
        .write_fixture(|tx| {
            for key in ["k1", "k2"] {
                tx.execute(
                    "INSERT INTO goldens (key, adapter, clone_from, name, secret, state, created_at, updated_at)
                     VALUES (?1, 'postgres', 'golden', 'bk_golden_' || ?1, 's', 'ready', 0, 0)",
                    [key],
                )?;
            }
            for (w, svc, key) in [(a, "db", "k1"), (a, "cache", "k2"), (b, "db", "k2")] {
                tx.execute(
                    "INSERT INTO golden_refs (world_id, service, key) VALUES (?1, ?2, ?3)",
                    rusqlite::params![w, svc, key],
                )?;
            }
            Ok(())
        })
        .unwrap();
    let g = store.read(|c| golden(c, "k2")).unwrap().unwrap();
    assert_eq!((g.key.as_str(), g.name.as_str()), ("k2", "bk_golden_k2"));
    assert!(store.read(|c| golden(c, "k3")).unwrap().is_none());
    assert_eq!(
        store.read(|c| golden_ref(c, b, "db")).unwrap().as_deref(),
        Some("k2")
    );
    assert_eq!(store.read(|c| golden_ref(c, b, "cache")).unwrap(), None);
    let of_a = store.read(|c| golden_refs_of(c, a)).unwrap();
    assert_eq!(
        of_a.into_iter().collect::<Vec<_>>(),
        vec![("cache".into(), "k2".into()), ("db".into(), "k1".into())]
    );
}

/// Another process holding the write lock longer than SQLite's busy timeout (hundreds of
/// commands writing at once) makes a write wait its turn, not fail "database is locked".
#[test]
fn a_write_waits_past_the_busy_timeout_for_a_lock_another_process_holds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = Store::open(&path).unwrap();
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let holder = std::thread::spawn(move || {
        locked_tx.send(()).unwrap();
        // Longer than the store's 10 s busy timeout.
        std::thread::sleep(Duration::from_secs(11));
        other.execute_batch("COMMIT").unwrap();
    });
    locked_rx.recv().unwrap();
    // Before, this failed with "database is locked" once the busy timeout ran out.
    store.set_setting("max_parallel", "3").unwrap();
    holder.join().unwrap();
    assert_eq!(
        store
            .read(|c| setting(c, "max_parallel"))
            .unwrap()
            .as_deref(),
        Some("3")
    );
}

#[test]
fn a_slow_store_call_does_not_stall_the_other_tasks_of_its_runtime() {
    // One worker: without handing it over, a store call that waits holds every task.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let ticks = rt.block_on(async move {
        let ticks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = ticks.clone();
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        // Let the ticker start before the slow call takes the only worker.
        while ticks.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        let before = ticks.load(std::sync::atomic::Ordering::SeqCst);
        let slow = tokio::spawn(async move {
            store
                .read(|_| {
                    std::thread::sleep(Duration::from_millis(300));
                    Ok(())
                })
                .unwrap()
        });
        slow.await.unwrap();
        ticker.abort();
        ticks.load(std::sync::atomic::Ordering::SeqCst) - before
    });
    assert!(
        ticks >= 10,
        "the other task ticked only {ticks} times in 300 ms"
    );
}

#[test]
fn a_write_outside_its_owners_tables_is_refused_and_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let w = store
        .put_world(&new_world("acme", "/r", "w1"))
        .unwrap()
        .world;
    let ports = |store: &Store| -> i64 {
        store
            .read(|c| Ok(c.query_row("SELECT COUNT(*) FROM ports", [], |r| r.get(0))?))
            .unwrap()
    };
    // Its own table, an upsert (insert and update) and an event: admitted.
    store
        .write(owner::Port, |tx| {
            tx.execute(
                "INSERT INTO ports (port, world_id, service, label, assigned_at) VALUES (4100, ?1, 'web', '', 0)
                 ON CONFLICT (port) DO UPDATE SET assigned_at = 1",
                [w.id],
            )?;
            add_event(tx, w.id, "port", "assigned")
        })
        .unwrap();
    assert_eq!(ports(&store), 1);
    // Another owner's table, in the same transaction as one of its own: refused, all of it
    // rolled back, and the message names who may write it.
    let err = store
        .write(owner::Port, |tx| {
            tx.execute(
                "INSERT INTO ports (port, world_id, service, label, assigned_at) VALUES (4101, ?1, 'api', '', 0)",
                [w.id],
            )?;
            tx.execute("UPDATE worlds SET desired_state = 'stopped'", [])?;
            Ok(())
        })
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, StoreError::NotOwner(_)), "{err:?}");
    assert!(
        msg.contains("the port controller may not update worlds")
            && msg.contains("writer is commands"),
        "{msg}"
    );
    assert_eq!(ports(&store), 1, "the port written before was rolled back");
    let state: String = store
        .read(|c| Ok(c.query_row("SELECT desired_state FROM worlds", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(state, "running");
    // The runtime deletes worlds (and what cascades) but may not create one.
    let err = store
        .write(owner::Runtime, |tx| {
            tx.execute("INSERT INTO worlds (project_id) VALUES (1)", [])?;
            Ok(())
        })
        .unwrap_err();
    assert!(
        err.to_string().contains("may not insert into worlds"),
        "{err}"
    );
    // A read writes nothing: not even an event.
    let err = store.read(|c| add_event(c, w.id, "x", "y")).unwrap_err();
    assert!(
        err.to_string()
            .contains("a read may not insert into events"),
        "{err}"
    );
    // A statement prepared (and cached) under one owner is authorized again under the next.
    let sql = "DELETE FROM ports WHERE port = 4100";
    let err = store
        .write(owner::Slice, |tx| Ok(tx.prepare_cached(sql)?.execute([])?))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("the slice controller may not delete from ports"),
        "{err}"
    );
    store
        .write(owner::Port, |tx| Ok(tx.prepare_cached(sql)?.execute([])?))
        .unwrap();
    let err = store
        .write(owner::Slice, |tx| Ok(tx.prepare_cached(sql)?.execute([])?))
        .unwrap_err();
    assert!(matches!(err, StoreError::NotOwner(_)), "{err:?}");
    assert_eq!(ports(&store), 0);
}

/// A writer runs DML on its own tables and reads, nothing else: no schema change, no
/// `PRAGMA` that sets something, no `ATTACH` (a second database the grants know nothing of),
/// no resetting `AUTOINCREMENT`. A read runs `SELECT` and the `PRAGMA`s that read.
#[test]
fn a_writer_may_not_change_the_schema_set_a_pragma_or_attach_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let w = store
        .put_world(&new_world("acme", "/r", "w1"))
        .unwrap()
        .world;
    store
        .event(w.id, "x", "an event: sqlite_sequence is written")
        .unwrap();
    let elsewhere = dir.path().join("other.db");
    let attach = format!("ATTACH DATABASE '{}' AS other", elsewhere.display());
    // SQLite asks about some DDL as a write of its schema table first, about other DDL as
    // the statement first: the refusal names whichever it was asked about.
    let schema = |verb: &str, table: &str| format!("change the schema (it would {verb} {table})");
    let (create, dropped) = (
        schema("insert into", "sqlite_master"),
        schema("delete from", "sqlite_master"),
    );
    let temp = schema("insert into", "sqlite_temp_master");
    let mut wrong = Vec::new();
    for (sql, said) in [
        ("CREATE TABLE ports_copy (port INTEGER)", create.as_str()),
        ("DROP TABLE ports", dropped.as_str()),
        ("ALTER TABLE ports ADD COLUMN x TEXT", "ALTER TABLE ports"),
        ("CREATE INDEX ports_x ON ports (service)", create.as_str()),
        ("DROP INDEX routes_by_world", dropped.as_str()),
        (
            "CREATE TRIGGER t AFTER INSERT ON ports BEGIN DELETE FROM worlds; END",
            "CREATE TRIGGER t",
        ),
        ("CREATE VIEW v AS SELECT * FROM ports", create.as_str()),
        ("CREATE TEMP TABLE scratch (x)", temp.as_str()),
        ("PRAGMA foreign_keys = OFF", "PRAGMA foreign_keys = OFF"),
        (
            "PRAGMA journal_mode = DELETE",
            "PRAGMA journal_mode = DELETE",
        ),
        ("PRAGMA user_version = 1", "PRAGMA user_version = 1"),
        ("PRAGMA writable_schema = ON", "PRAGMA writable_schema = ON"),
        ("PRAGMA synchronous = OFF", "PRAGMA synchronous = OFF"),
        ("PRAGMA secure_delete", "PRAGMA secure_delete"),
        (attach.as_str(), "ATTACH"),
        ("ANALYZE", create.as_str()),
        ("REINDEX", "REINDEX"),
        ("DELETE FROM sqlite_sequence", "delete from sqlite_sequence"),
    ] {
        let err = store
            .write(owner::Port, |tx| {
                tx.execute(
                    "INSERT INTO ports (port, world_id, service, label, assigned_at) VALUES (4100, ?1, 'web', '', 0)",
                    [w.id],
                )?;
                tx.execute_batch(sql)?;
                Ok(())
            })
            .unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, StoreError::NotOwner(_)), "{sql}: {err:?}");
        if !(msg.contains("the port controller may not") && msg.contains(said)) {
            wrong.push(format!("{sql}: {msg}"));
        }
        // A read is refused them too.
        let err = store.read(|c| Ok(c.execute_batch(sql)?)).unwrap_err();
        assert!(
            matches!(err, StoreError::NotOwner(_)) && err.to_string().contains("a read may not"),
            "{sql}: {err:?}"
        );
    }
    assert_eq!(wrong, Vec::<String>::new(), "refused, but not saying what");
    // VACUUM is no read either: SQLite refuses it in a read's transaction, as in a write's.
    let err = store.read(|c| Ok(c.execute_batch("VACUUM")?)).unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot VACUUM from within a transaction"),
        "{err:?}"
    );
    // Nothing of it happened: the port written before each was rolled back, the schema and
    // the settings are as the migrations left them, nothing was attached or made.
    let (ports, fk, version, journal, tables): (i64, i64, i64, String, i64) = store
        .read(|c| {
            Ok((
                c.query_row("SELECT COUNT(*) FROM ports", [], |r| r.get(0))?,
                c.query_row("PRAGMA foreign_keys", [], |r| r.get(0))?,
                c.query_row("PRAGMA user_version", [], |r| r.get(0))?,
                c.query_row("PRAGMA journal_mode", [], |r| r.get(0))?,
                c.query_row(
                    "SELECT COUNT(*) FROM sqlite_master WHERE name IN ('ports_copy', 'ports_x', 't', 'v')",
                    [],
                    |r| r.get(0),
                )?,
            ))
        })
        .unwrap();
    assert_eq!(
        (ports, fk, version, journal.as_str(), tables),
        (0, 1, migrations::LATEST, "wal", 0)
    );
    assert!(!elsewhere.exists(), "a database was attached");
    // What readers use keeps working: SELECT (a read is one transaction), and the PRAGMAs
    // that read.
    store
        .read(|tx| {
            let _: i64 = tx.query_row("PRAGMA data_version", [], |r| r.get(0))?;
            let ok: String = tx.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
            assert_eq!(ok, "ok");
            let _: String = tx.query_row("PRAGMA quick_check(5)", [], |r| r.get(0))?;
            let cols: i64 = tx.query_row(
                "SELECT COUNT(*) FROM pragma_table_info('worlds')",
                [],
                |r| r.get(0),
            )?;
            assert!(cols > 5);
            let mut fks = tx.prepare("PRAGMA foreign_key_list(ports)")?;
            assert!(fks.query([])?.next()?.is_some());
            drop(fks);
            Ok(())
        })
        .unwrap();
    // And the owner's DML, with an event (which writes sqlite_sequence).
    store
        .write(owner::Port, |tx| {
            tx.execute(
                "INSERT INTO ports (port, world_id, service, label, assigned_at) VALUES (4100, ?1, 'web', '', 0)",
                [w.id],
            )?;
            tx.execute("UPDATE ports SET assigned_at = 1 WHERE port = 4100", [])?;
            add_event(tx, w.id, "port", "assigned")?;
            tx.execute("DELETE FROM ports WHERE port = 4100", [])?;
            Ok(())
        })
        .unwrap();
}
