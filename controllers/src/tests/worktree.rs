use crate::registry::Kind;
use crate::runtime::Controller;
use crate::store::WorktreeState;
use crate::store::{self, CondStatus, Store};
use crate::testing::*;
use crate::worktree::{WorktreeController, WorktreeInfo};

fn setup() -> (tempfile::TempDir, Store, WorktreeController<FakeGit>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("repo")).unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let ctrl = WorktreeController::new(store.clone(), FakeGit::default());
    (dir, store, ctrl)
}

fn cond(store: &Store, id: i64) -> store::ConditionRow {
    store
        .read(|c| store::conditions(c, id))
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "WorktreeReady")
        .unwrap()
}

#[tokio::test]
async fn a_new_branch_is_created_from_the_worlds_base() {
    let (dir, store, ctrl) = setup();
    let w = store
        .put_world(&new_world(dir.path(), "w", spec(vec![])))
        .unwrap()
        .world;
    reconcile(&ctrl, &store, w.id).await;
    assert_eq!(ctrl_calls(&ctrl), vec!["add w from Some(\"sha-of-base\")"]);
    let row = store.read(|c| store::worktree(c, w.id)).unwrap().unwrap();
    assert!(row.created_branch && !row.adopted);
    assert_eq!(row.base_commit.as_deref(), Some("sha-of-base"));
    assert_eq!(cond(&store, w.id).status, CondStatus::True);
    // Idempotent: a second pass changes nothing.
    reconcile(&ctrl, &store, w.id).await;
    assert_eq!(ctrl_calls(&ctrl).len(), 1);
}

fn ctrl_calls(ctrl: &WorktreeController<FakeGit>) -> Vec<String> {
    ctrl_git(ctrl).inner.lock().unwrap().calls.clone()
}

fn ctrl_git(ctrl: &WorktreeController<FakeGit>) -> &FakeGit {
    ctrl.git_for_tests()
}

#[tokio::test]
async fn an_existing_worktree_of_the_branch_is_adopted() {
    let (dir, store, ctrl) = setup();
    let elsewhere = dir.path().join("mine");
    std::fs::create_dir_all(&elsewhere).unwrap();
    ctrl_git(&ctrl)
        .inner
        .lock()
        .unwrap()
        .worktrees
        .push(WorktreeInfo {
            path: elsewhere.clone(),
            branch: Some("w".into()),
        });
    let w = store
        .put_world(&new_world(dir.path(), "w", spec(vec![])))
        .unwrap()
        .world;
    reconcile(&ctrl, &store, w.id).await;
    let row = store.read(|c| store::worktree(c, w.id)).unwrap().unwrap();
    assert!(row.adopted);
    assert_eq!(row.path, elsewhere);
    assert!(ctrl_calls(&ctrl).is_empty());
    // Removal keeps it.
    store.mark_deleted(w.id, true).unwrap();
    reconcile(&ctrl, &store, w.id).await;
    assert!(elsewhere.exists());
    assert!(store.read(|c| store::worktree(c, w.id)).unwrap().is_none());
}

#[tokio::test]
async fn something_else_at_the_path_stalls_with_the_fix() {
    let (dir, store, ctrl) = setup();
    let path = dir.path().join("wt").join("w");
    std::fs::create_dir_all(&path).unwrap();
    std::fs::write(path.join("stranger.txt"), "x").unwrap();
    let w = store
        .put_world(&new_world(dir.path(), "w", spec(vec![])))
        .unwrap()
        .world;
    reconcile(&ctrl, &store, w.id).await;
    let c = cond(&store, w.id);
    assert_eq!(c.reason, "PathTaken");
    assert!(c.stalled);
    assert!(c.message.contains("move it away"), "{}", c.message);
    assert!(path.join("stranger.txt").exists());
}

#[tokio::test]
async fn a_worktree_deleted_from_outside_is_reported_not_recreated_until_the_next_up() {
    let (dir, store, ctrl) = setup();
    let nw = new_world(dir.path(), "w", spec(vec![]));
    let w = store.put_world(&nw).unwrap().world;
    reconcile(&ctrl, &store, w.id).await;
    std::fs::remove_dir_all(&w.worktree_path).unwrap();
    ctrl_git(&ctrl).inner.lock().unwrap().worktrees.clear();
    reconcile(&ctrl, &store, w.id).await;
    reconcile(&ctrl, &store, w.id).await;
    let c = cond(&store, w.id);
    assert_eq!(c.reason, "WorktreeMissing");
    assert!(c.stalled);
    assert!(!w.worktree_path.exists(), "recreated silently");
    // A new `binky up` (a new generation) asks for it again.
    store.put_world(&nw).unwrap();
    reconcile(&ctrl, &store, w.id).await;
    assert!(w.worktree_path.exists());
    assert_eq!(cond(&store, w.id).status, CondStatus::True);
}

#[tokio::test]
async fn removal_waits_for_processes_then_deletes_a_branch_without_commits() {
    let (dir, store, ctrl) = setup();
    let w = store
        .put_world(&new_world(dir.path(), "w", spec(vec![])))
        .unwrap()
        .world;
    reconcile(&ctrl, &store, w.id).await;
    store
        .write_fixture(|tx| {
            tx.execute(
                "INSERT INTO finalizers VALUES (?1, ?2)",
                rusqlite::params![w.id, Kind::Process.name()],
            )?;
            Ok(())
        })
        .unwrap();
    store.mark_deleted(w.id, false).unwrap();
    // Through the runtime, which keeps the declared teardown order.
    reconcile(&ctrl, &store, w.id).await;
    assert!(
        w.worktree_path.exists(),
        "removed while processes may still run"
    );
    assert!(!ctrl_calls(&ctrl).contains(&"delete-branch w".to_string()));
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
    assert!(!w.worktree_path.exists());
    assert!(ctrl_calls(&ctrl).contains(&"delete-branch w".to_string()));
}

#[tokio::test]
async fn a_branch_with_commits_of_its_own_is_kept_and_a_dirty_tree_refused() {
    let (dir, store, ctrl) = setup();
    let w = store
        .put_world(&new_world(dir.path(), "w", spec(vec![])))
        .unwrap()
        .world;
    reconcile(&ctrl, &store, w.id).await;
    ctrl_git(&ctrl)
        .inner
        .lock()
        .unwrap()
        .branches
        .insert("w".into(), 2);
    ctrl_git(&ctrl)
        .inner
        .lock()
        .unwrap()
        .dirty
        .insert(w.worktree_path.clone());
    store.mark_deleted(w.id, false).unwrap();
    let world = world(&store, w.id).unwrap();
    let err = ctrl.cleanup(&world).await.unwrap_err();
    assert!(err.to_string().contains("uncommitted changes"), "{err}");
    assert!(w.worktree_path.exists());
    store.mark_deleted(w.id, true).unwrap();
    let world = crate::testing::world(&store, w.id).unwrap();
    assert_eq!(
        ctrl.cleanup(&world).await.unwrap(),
        crate::runtime::Cleanup::Done
    );
    assert!(!ctrl_calls(&ctrl)
        .iter()
        .any(|c| c.starts_with("delete-branch")));
    let evs = store
        .read(|c| store::events(c, "acme", "w", 0, 50))
        .unwrap();
    assert!(evs
        .iter()
        .any(|e| e.message.contains("kept branch w: it has 2 commit(s)")));
}

#[tokio::test]
async fn a_branch_made_by_a_daemon_killed_before_recording_it_is_still_deleted_with_the_world() {
    let (dir, store, ctrl) = setup();
    let w = store
        .put_world(&new_world(dir.path(), "w", spec(vec![])))
        .unwrap()
        .world;
    // A first daemon recorded its intent, ran `git worktree add -b w`, and was killed
    // before it wrote the row down.
    reconcile(&ctrl, &store, w.id).await;
    store
        .write_fixture(|tx| {
            tx.execute(
                "UPDATE worktrees SET state = 'creating', head = NULL WHERE world_id = ?1",
                [w.id],
            )?;
            Ok(())
        })
        .unwrap();
    // The next daemon finds the worktree git has, and knows the branch is binky's.
    reconcile(&ctrl, &store, w.id).await;
    let row = store.read(|c| store::worktree(c, w.id)).unwrap().unwrap();
    assert_eq!(row.state, WorktreeState::Ready);
    assert!(
        row.created_branch,
        "the branch binky made was taken for the user's"
    );
    assert_eq!(row.base_commit.as_deref(), Some("sha-of-base"));
    assert_eq!(
        ctrl_calls(&ctrl).len(),
        1,
        "git ran twice: {:?}",
        ctrl_calls(&ctrl)
    );
    store.mark_deleted(w.id, false).unwrap();
    let world = world(&store, w.id).unwrap();
    assert_eq!(
        ctrl.cleanup(&world).await.unwrap(),
        crate::runtime::Cleanup::Done
    );
    assert!(
        ctrl_calls(&ctrl).contains(&"delete-branch w".to_owned()),
        "{:?}",
        ctrl_calls(&ctrl)
    );
}

#[tokio::test]
async fn a_checkout_left_half_made_by_a_killed_daemon_is_made_again_not_kept_or_refused() {
    let (dir, store, ctrl) = setup();
    let w = store
        .put_world(&new_world(dir.path(), "w", spec(vec![])))
        .unwrap()
        .world;
    reconcile(&ctrl, &store, w.id).await;
    // Killed mid-checkout: the intent is recorded, git lists the worktree, files are missing.
    store
        .write_fixture(|tx| {
            tx.execute(
                "UPDATE worktrees SET state = 'creating' WHERE world_id = ?1",
                [w.id],
            )?;
            Ok(())
        })
        .unwrap();
    ctrl_git(&ctrl)
        .inner
        .lock()
        .unwrap()
        .dirty
        .insert(w.worktree_path.clone());
    reconcile(&ctrl, &store, w.id).await;
    let calls = ctrl_calls(&ctrl);
    assert_eq!(
        calls[1..],
        [
            format!("remove {}", w.worktree_path.display()),
            "add w from None".to_owned()
        ],
        "{calls:?}"
    );
    let row = store.read(|c| store::worktree(c, w.id)).unwrap().unwrap();
    assert_eq!(row.state, WorktreeState::Ready);
    assert!(row.created_branch);
    assert_eq!(cond(&store, w.id).status, CondStatus::True);
}

/// A worktree is ready once checked out, with the plan of the paths it is to get: a held
/// copy holds up no other world's checkout, and a command waits only for the paths it needs
/// (`web/node_modules` for `web`, nothing for `backend`; a path at the top for everyone).
#[tokio::test]
async fn a_held_copy_holds_up_no_other_checkout_and_only_the_commands_that_need_it() {
    let (dir, store, ctrl) = setup();
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    {
        let mut g = ctrl_git(&ctrl).inner.lock().unwrap();
        g.bring_gate = Some(("a".into(), "web/node_modules".into(), gate.clone()));
        g.plan = vec![
            ("web/node_modules".into(), crate::spec::CopyMode::Link),
            ("backend/.venv".into(), crate::spec::CopyMode::Link),
            ("tools.lock".into(), crate::spec::CopyMode::Copy),
        ];
    }
    let a = store
        .put_world(&new_world(dir.path(), "a", spec(vec![])))
        .unwrap()
        .world;
    let b = store
        .put_world(&new_world(dir.path(), "b", spec(vec![])))
        .unwrap()
        .world;
    let state = |id| {
        store
            .read(|c| store::worktree(c, id))
            .unwrap()
            .map(|r| r.state)
    };
    let waits = |id, workdir: &str| {
        store
            .read(|c| store::bootstrap_waits(c, id, workdir))
            .unwrap()
    };
    // a's reconcile returns once a is checked out: its paths come in tasks of their own.
    reconcile(&ctrl, &store, a.id).await;
    assert_eq!(state(a.id), Some(WorktreeState::Ready));
    // b's checkout and paths are made meanwhile.
    reconcile(&ctrl, &store, b.id).await;
    assert_eq!(state(b.id), Some(WorktreeState::Ready));
    let settled = |id| {
        store
            .read(|c| store::bootstrap_paths(c, id))
            .unwrap()
            .into_iter()
            .filter(|r| r.state == store::BootstrapState::Pending)
            .count()
    };
    crate::testing::wait_for("b's paths brought", || settled(b.id) == 0).await;
    assert!(waits(b.id, "web").is_empty());
    // a: what does not need the held path goes on.
    crate::testing::wait_for("a's other paths brought", || settled(a.id) == 1).await;
    assert_eq!(waits(a.id, "web"), vec!["web/node_modules".to_owned()]);
    assert_eq!(waits(a.id, "web/src"), vec!["web/node_modules".to_owned()]);
    assert!(waits(a.id, "backend").is_empty());
    assert!(waits(a.id, "").is_empty());
    let rows = store.read(|c| store::bootstrap_paths(c, a.id)).unwrap();
    let done: Vec<(&str, store::BootstrapState, Option<&str>)> = rows
        .iter()
        .map(|r| (r.path.as_str(), r.state, r.how.as_deref()))
        .collect();
    assert_eq!(
        done,
        vec![
            ("backend/.venv", store::BootstrapState::Done, Some("linked")),
            ("tools.lock", store::BootstrapState::Done, Some("copied")),
            ("web/node_modules", store::BootstrapState::Pending, None),
        ]
    );
    // A reconcile meanwhile starts no second copy of the path in flight.
    reconcile(&ctrl, &store, a.id).await;
    gate.notify_one();
    crate::testing::wait_for("a's held path brought", || settled(a.id) == 0).await;
    assert!(waits(a.id, "web").is_empty());
    let brought = ctrl_git(&ctrl).inner.lock().unwrap().brought.len();
    assert_eq!(brought, 6);
}

/// A world of a `--group` gets only the paths its services need; an `up` of more brings the
/// rest; a daemon that died while bringing a path brings it again.
#[tokio::test]
async fn a_group_world_gets_only_what_its_services_need_and_a_wider_up_the_rest() {
    let (dir, store, ctrl) = setup();
    ctrl_git(&ctrl).inner.lock().unwrap().plan = vec![
        ("web/node_modules".into(), crate::spec::CopyMode::Link),
        ("backend/.venv".into(), crate::spec::CopyMode::Link),
    ];
    let mut api = crate::testing::web("run", &[]);
    let mut web = crate::testing::web("run", &[]);
    for (svc, dir) in [(&mut api, "backend"), (&mut web, "web")] {
        if let crate::spec::ServiceKind::Process(p) = &mut svc.kind {
            p.workdir = dir.into();
        }
    }
    let mut s = spec(vec![("api", api), ("web", web)]);
    s.groups.insert("back".into(), vec!["api".into()]);
    let mut nw = new_world(dir.path(), "g", s);
    nw.group = Some("back".into());
    let w = store.put_world(&nw).unwrap().world;
    reconcile(&ctrl, &store, w.id).await;
    let paths = |id| -> Vec<String> {
        store
            .read(|c| store::bootstrap_paths(c, id))
            .unwrap()
            .into_iter()
            .map(|r| r.path)
            .collect()
    };
    assert_eq!(paths(w.id), vec!["backend/.venv".to_owned()]);
    // The whole world now.
    nw.group = None;
    let w = store.put_world(&nw).unwrap().world;
    reconcile(&ctrl, &store, w.id).await;
    assert_eq!(
        paths(w.id),
        vec!["backend/.venv".to_owned(), "web/node_modules".to_owned()]
    );
}

/// A data-only group world whose database is cloned from a ready golden template runs
/// no `migrate` of its own: what only the migrate's workdir needs (`backend/.venv`) is
/// deferred, not brought. Should the world run it after all — it builds the template (the
/// one it would clone went), or makes its slice the slow way (cloning failed) — the path
/// is brought then; a wider `up` brings it too; with no ready template it comes at once.
#[tokio::test]
async fn a_group_world_cloning_a_ready_template_defers_its_migrates_paths_until_it_migrates() {
    let (dir, store, ctrl) = setup();
    ctrl_git(&ctrl).inner.lock().unwrap().plan = vec![
        ("web/node_modules".into(), crate::spec::CopyMode::Link),
        ("backend/.venv".into(), crate::spec::CopyMode::Link),
    ];
    let mut db = crate::testing::cloned_from(
        crate::testing::resource("postgres", Some("migrate"), Some("seed")),
        "golden",
    );
    if let crate::spec::ServiceKind::Resource(r) = &mut db.kind {
        r.workdir = "backend".into();
    }
    let res = db.resource().unwrap().clone();
    let mut api = crate::testing::web("run", &[]);
    let mut web = crate::testing::web("run", &[]);
    for (svc, d) in [(&mut api, "backend"), (&mut web, "web")] {
        if let crate::spec::ServiceKind::Process(p) = &mut svc.kind {
            p.workdir = d.into();
        }
    }
    let mut s = spec(vec![("db", db), ("api", api), ("web", web)]);
    s.groups.insert("data".into(), vec!["db".into()]);
    // The template every world of this spec clones (its key: no migration files here).
    let key = |w: &str| {
        crate::golden::golden_key(
            &res,
            "managed:postgres",
            &dir.path().join("wt").join(w).join("backend"),
        )
    };
    let template = |state: &str, owner: Option<i64>| {
        store
            .write_fixture(|tx| {
                tx.execute(
                    "INSERT INTO goldens (key, adapter, clone_from, name, secret, state, owner_world, created_at, updated_at)
                     VALUES (?1, 'postgres', 'golden', 'bk_golden', 's', ?2, ?3, 0, 0)
                     ON CONFLICT (key) DO UPDATE SET state = excluded.state, owner_world = excluded.owner_world",
                    rusqlite::params![key("d"), state, owner],
                )?;
                Ok(())
            })
            .unwrap();
    };
    let rows = |id| -> Vec<(String, store::BootstrapState)> {
        store
            .read(|c| store::bootstrap_paths(c, id))
            .unwrap()
            .into_iter()
            .map(|r| (r.path, r.state))
            .collect()
    };
    let venv = |state| vec![("backend/.venv".to_owned(), state)];
    let brought = |w: &str| {
        ctrl_git(&ctrl)
            .inner
            .lock()
            .unwrap()
            .brought
            .iter()
            .filter(|(wt, _)| wt.ends_with(w))
            .map(|(_, p)| p.clone())
            .collect::<Vec<_>>()
    };
    template("ready", None);
    let mut nw = new_world(dir.path(), "d", s.clone());
    nw.group = Some("data".into());
    let d = store.put_world(&nw).unwrap().world;
    reconcile(&ctrl, &store, d.id).await;
    assert_eq!(rows(d.id), venv(store::BootstrapState::Deferred));
    // Deferred holds neither the world (it is ready) nor anything that does not migrate.
    assert_eq!(cond(&store, d.id).status, CondStatus::True);
    assert!(store
        .read(|c| store::bootstrap_waits(c, d.id, "backend"))
        .unwrap()
        .is_empty());
    // A migrate (or golden build) in backend waits for it.
    assert_eq!(
        store
            .read(|c| store::bootstrap_waits_to_migrate(c, d.id, "backend"))
            .unwrap(),
        vec!["backend/.venv".to_owned()]
    );
    // Another pass changes nothing.
    reconcile(&ctrl, &store, d.id).await;
    assert_eq!(rows(d.id), venv(store::BootstrapState::Deferred));
    assert!(brought("d").is_empty());

    // The template went; this world builds the new one: its migrate runs here.
    store
        .write_fixture(|tx| {
            tx.execute(
                "INSERT INTO golden_refs (world_id, service, key) VALUES (?1, 'db', ?2)",
                rusqlite::params![d.id, key("d")],
            )?;
            Ok(())
        })
        .unwrap();
    template("building", Some(d.id));
    reconcile(&ctrl, &store, d.id).await;
    crate::testing::wait_for("backend/.venv brought for the build", || {
        rows(d.id) == venv(store::BootstrapState::Done)
    })
    .await;
    assert_eq!(brought("d"), vec!["backend/.venv".to_owned()]);
    assert!(crate::testing::events(&store, "d").iter().any(
        |(_, m)| m == "bringing backend/.venv now: db builds its golden template in this world"
    ));

    // Cloning fails: the slice is made the slow way and migrates here.
    template("ready", None);
    let mut nw2 = new_world(dir.path(), "e", s.clone());
    nw2.group = Some("data".into());
    let e = store.put_world(&nw2).unwrap().world;
    reconcile(&ctrl, &store, e.id).await;
    assert_eq!(rows(e.id), venv(store::BootstrapState::Deferred));
    store
        .write_fixture(|tx| {
            tx.execute(
                "INSERT INTO slices (world_id, service, adapter, name, secret, state, updated_at)
                 VALUES (?1, 'db', 'postgres', 'bk_e_db', 's', 'provisioned', 0)",
                [e.id],
            )?;
            Ok(())
        })
        .unwrap();
    reconcile(&ctrl, &store, e.id).await;
    crate::testing::wait_for("backend/.venv brought for the slow way", || {
        rows(e.id) == venv(store::BootstrapState::Done)
    })
    .await;

    // A wider `up` of a world that deferred it: brought with the rest.
    let mut nw3 = new_world(dir.path(), "f", s.clone());
    nw3.group = Some("data".into());
    let f = store.put_world(&nw3).unwrap().world;
    reconcile(&ctrl, &store, f.id).await;
    assert_eq!(rows(f.id), venv(store::BootstrapState::Deferred));
    nw3.group = None;
    store.put_world(&nw3).unwrap();
    reconcile(&ctrl, &store, f.id).await;
    crate::testing::wait_for("f's paths brought", || {
        rows(f.id)
            == vec![
                ("backend/.venv".to_owned(), store::BootstrapState::Done),
                ("web/node_modules".to_owned(), store::BootstrapState::Done),
            ]
    })
    .await;

    // No ready template: the world's slice will migrate (or it builds the template): at once.
    store
        .write_fixture(|tx| {
            tx.execute("DELETE FROM goldens", [])?;
            Ok(())
        })
        .unwrap();
    let mut nw4 = new_world(dir.path(), "g", s);
    nw4.group = Some("data".into());
    let g = store.put_world(&nw4).unwrap().world;
    reconcile(&ctrl, &store, g.id).await;
    crate::testing::wait_for("g's path brought", || {
        rows(g.id) == venv(store::BootstrapState::Done)
    })
    .await;
}

/// The one dirty check (`binky remove`'s and the cleanup's).
#[tokio::test]
async fn only_a_worktree_someones_work_can_be_in_is_looked_at_and_setups_paths_are_not_theirs() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let id = store
        .put_world(&crate::testing::new_world(
            dir.path(),
            "w",
            crate::testing::spec(vec![]),
        ))
        .unwrap()
        .world
        .id;
    let wt = dir.path().join("wt");
    std::fs::create_dir_all(&wt).unwrap();
    std::fs::write(wt.join("package-lock.json"), "{}").unwrap();
    let row = |path: &std::path::Path, adopted: bool, state: WorktreeState| store::WorktreeRow {
        path: path.to_owned(),
        branch: "w".into(),
        head: None,
        dirty: false,
        adopted,
        created_branch: true,
        base_commit: None,
        state,
        seen_generation: 0,
    };
    let listed = || async {
        Ok::<_, store::StoreError>(vec!["package-lock.json".to_owned(), "notes.txt".to_owned()])
    };
    let never = || async {
        panic!("git status of a worktree that holds no one's work");
        #[allow(unreachable_code)]
        Ok::<_, store::StoreError>(Vec::new())
    };
    for skipped in [
        row(&wt, true, WorktreeState::Ready),
        row(&wt, false, WorktreeState::Creating),
        row(&dir.path().join("gone"), false, WorktreeState::Ready),
    ] {
        let users: Vec<String> = crate::dirty::users_uncommitted(&store, id, &skipped, never())
            .await
            .unwrap();
        assert!(users.is_empty(), "{skipped:?}");
    }
    let ready = row(&wt, false, WorktreeState::Ready);
    assert_eq!(
        crate::dirty::users_uncommitted(&store, id, &ready, listed())
            .await
            .unwrap(),
        vec!["package-lock.json", "notes.txt"]
    );
    // What the world's setup left (its fingerprint recorded) is binky's.
    let print = crate::dirty::fingerprint(&wt, "package-lock.json");
    store
        .write(crate::store::owner::Process, |tx| {
            tx.execute(
                "INSERT INTO setup_changes (world_id, path, fingerprint) VALUES (?1, 'package-lock.json', ?2)",
                rusqlite::params![id, print],
            )?;
            Ok(())
        })
        .unwrap();
    assert_eq!(
        crate::dirty::users_uncommitted(&store, id, &ready, listed())
            .await
            .unwrap(),
        vec!["notes.txt"]
    );
}

/// A file binky brought (a lockfile `copy` names, untracked: git lists it) is not the
/// user's change while it is as it came; edited after, it is.
#[tokio::test]
async fn a_file_binky_brought_is_not_the_users_change_until_it_is_edited() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let id = store
        .put_world(&new_world(dir.path(), "w", spec(vec![])))
        .unwrap()
        .world
        .id;
    let wt = dir.path().join("wt");
    std::fs::create_dir_all(&wt).unwrap();
    std::fs::write(wt.join("package-lock.json"), "{\"lockfileVersion\": 2}\n").unwrap();
    let print = crate::dirty::fingerprint(&wt, "package-lock.json");
    store
        .write(crate::store::owner::Worktree, |tx| {
            let planned = crate::worktree::Planned {
                path: "package-lock.json".into(),
                from: dir.path().join("repo"),
                mode: crate::spec::CopyMode::Link,
            };
            store::write::worktree::plan_path(
                tx,
                id,
                &planned,
                store::BootstrapState::Pending,
                "",
            )?;
            store::write::worktree::set_brought(
                tx,
                id,
                "package-lock.json",
                &store::write::worktree::Brought {
                    state: store::BootstrapState::Done,
                    how: Some("copied"),
                    files: 1,
                    bytes: 23,
                    took_ms: 0,
                    message: "",
                    brought_at: store::now_ms(),
                    fingerprint: &print,
                },
            )
        })
        .unwrap();
    let row = store::WorktreeRow {
        path: wt.clone(),
        branch: "w".into(),
        head: None,
        dirty: false,
        adopted: false,
        created_branch: true,
        base_commit: None,
        state: WorktreeState::Ready,
        seen_generation: 0,
    };
    let listed = || async { Ok::<_, store::StoreError>(vec!["package-lock.json".to_owned()]) };
    assert!(crate::dirty::users_uncommitted(&store, id, &row, listed())
        .await
        .unwrap()
        .is_empty());
    std::fs::write(wt.join("package-lock.json"), "{\"edited\": true}\n").unwrap();
    assert_eq!(
        crate::dirty::users_uncommitted(&store, id, &row, listed())
            .await
            .unwrap(),
        vec!["package-lock.json"]
    );
}

/// A linked file written in place after two worlds linked it is recorded for the world
/// that found it (with an event naming holders, writers and the fix), and the world that
/// shares it is looked at again and records it too; nothing is looked at again until it
/// is due.
#[tokio::test]
async fn a_linked_file_written_in_place_is_recorded_for_every_world_that_shares_it() {
    let (dir, store, ctrl) = setup();
    ctrl_git(&ctrl).inner.lock().unwrap().plan =
        vec![("node_modules".into(), crate::spec::CopyMode::Link)];
    let a = store
        .put_world(&new_world(dir.path(), "a", spec(vec![])))
        .unwrap()
        .world;
    let b = store
        .put_world(&new_world(dir.path(), "b", spec(vec![])))
        .unwrap()
        .world;
    let done = |id| {
        store
            .read(|c| store::bootstrap_paths(c, id))
            .unwrap()
            .iter()
            .all(crate::inplace::linked)
    };
    for w in [&a, &b] {
        reconcile(&ctrl, &store, w.id).await;
        crate::testing::wait_for("the path brought", || done(w.id)).await;
    }
    let (repo, wa, wb) = (
        dir.path().join("repo"),
        dir.path().join("wt/a"),
        dir.path().join("wt/b"),
    );
    let written = store::now_ms() + 1000;
    let changed = |holders: Vec<std::path::PathBuf>| {
        vec![crate::inplace::Changed {
            file: "node_modules/pkg/index.js".into(),
            path: "node_modules".into(),
            changed_at: written,
            holders,
        }]
    };
    {
        let mut g = ctrl_git(&ctrl).inner.lock().unwrap();
        g.changed_links
            .insert(wa.clone(), changed(vec![repo.clone(), wb.clone()]));
        g.changed_links
            .insert(wb.clone(), changed(vec![repo.clone(), wa.clone()]));
    }
    let edits = |id| store.read(|c| store::shared_edits(c, id)).unwrap();
    reconcile(&ctrl, &store, a.id).await;
    let found = edits(a.id);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].main_shares);
    assert_eq!(found[0].sharers, vec!["a", "b"]);
    assert_eq!(found[0].editors, vec!["a", "b"]);
    let said: Vec<String> = store
        .read(|c| store::events(c, "acme", "a", 0, 100))
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "shared_edit")
        .map(|e| e.message)
        .collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains("node_modules/pkg/index.js was changed in place")
            && said[0].contains("the main checkout and worlds a, b hold that one file")
            && said[0].contains("mode = \"copy\""),
        "{}",
        said[0]
    );
    // b was asked to look again: it records the same file at its next reconcile.
    reconcile(&ctrl, &store, b.id).await;
    assert_eq!(edits(b.id).len(), 1);
    // Not due again: not looked at, nothing written, no second event.
    let looked = || ctrl_git(&ctrl).inner.lock().unwrap().looked.len();
    let before = looked();
    reconcile(&ctrl, &store, a.id).await;
    reconcile(&ctrl, &store, b.id).await;
    assert_eq!(looked(), before);
    // The file replaced (no longer found): the finding goes at the next look (a new
    // generation: `binky up` or `down`).
    ctrl_git(&ctrl).inner.lock().unwrap().changed_links.clear();
    let a = store
        .put_world(&new_world(dir.path(), "a", spec(vec![])))
        .unwrap()
        .world;
    reconcile(&ctrl, &store, a.id).await;
    assert!(edits(a.id).is_empty());
}
