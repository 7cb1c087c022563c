//! The slice controller against a fake shared server: provision, migrate and seed once,
//! waiting for a server that is down, failing for good, healing drift, and teardown.

use crate::registry::Kind;
use std::sync::Arc;
use std::time::Duration;

use crate::adapter::SliceWork;
use crate::golden::GoldenController;
use crate::port::PortController;
use crate::process::{ProcessConfig, ProcessController};
use crate::runtime::{Cleanup, Controller};
use crate::slice::{SliceController, DRIFT_CHECK};
use crate::spec::Spec;
use crate::store::{self, CondStatus, SliceRow, Store};
use crate::testing::*;
use crate::worktree::WorktreeController;

/// Every controller a world with slices goes through, over one store, one fake server and
/// one fake supervisor.
pub(super) struct H {
    pub dir: tempfile::TempDir,
    pub store: Store,
    gate: crate::gate::AdmissionController<FakeMachine>,
    wt: WorktreeController<FakeGit>,
    port: PortController<FakePorts>,
    pub golden: GoldenController<FakeSlices, FakeSupervisor>,
    pub slice: SliceController<FakeSlices, FakeSupervisor>,
    proc_: ProcessController<FakeSupervisor>,
    pub fake: FakeSlices,
    pub sup: Arc<FakeSupervisor>,
}

pub(super) fn h() -> H {
    h_measuring(None)
}

/// The harness, its golden controller measuring the disk with `machine`.
pub(super) fn h_measuring(machine: Option<Arc<dyn crate::machine::Machine>>) -> H {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("repo")).unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let sup = Arc::new(FakeSupervisor::default());
    let fake = FakeSlices::default();
    let logs = dir.path().join("logs");
    let mut cfg = ProcessConfig::new(logs.clone());
    cfg.settle = Duration::ZERO;
    let work = Arc::new(SliceWork::new(
        store.clone(),
        fake.clone(),
        sup.clone(),
        logs,
    ));
    H {
        gate: crate::gate::AdmissionController::new(store.clone(), FakeMachine::default()),
        wt: WorktreeController::new(store.clone(), FakeGit::default()),
        port: PortController::new(store.clone(), FakePorts::default()),
        golden: match machine {
            Some(m) => {
                GoldenController::new(store.clone(), work.clone(), "1:1".into()).with_machine(m)
            }
            None => GoldenController::new(store.clone(), work.clone(), "1:1".into()),
        },
        slice: SliceController::new(store.clone(), work),
        proc_: ProcessController::new(store.clone(), sup.clone(), cfg),
        fake,
        sup,
        store,
        dir,
    }
}

impl H {
    /// The worktree controller's fake git (its plan, a held path).
    pub fn git(&self) -> &FakeGit {
        self.wt.git_for_tests()
    }

    pub fn up(&self, name: &str, s: Spec) -> i64 {
        self.store
            .put_world(&new_world(self.dir.path(), name, s))
            .unwrap()
            .world
            .id
    }

    /// Run every controller over the world until nothing moves.
    pub async fn converge(&self, id: i64) {
        for _ in 0..8 {
            reconcile(&self.gate, &self.store, id).await;
            reconcile(&self.wt, &self.store, id).await;
            reconcile(&self.port, &self.store, id).await;
            reconcile(&self.golden, &self.store, id).await;
            reconcile(&self.slice, &self.store, id).await;
            reconcile(&self.proc_, &self.store, id).await;
        }
    }

    /// Admitted and with a worktree, but no slice reconciled yet.
    pub async fn prepare(&self, id: i64) {
        reconcile(&self.gate, &self.store, id).await;
        reconcile(&self.wt, &self.store, id).await;
        reconcile(&self.port, &self.store, id).await;
    }

    /// `bk_<this home>_<rest>`: the name of a slice this home makes.
    pub fn bk(&self, rest: &str) -> String {
        format!("bk_{}_{rest}", self.store.read(store::home_id).unwrap())
    }

    pub fn slices_ready(&self, id: i64) -> store::ConditionRow {
        condition(&self.store, id, Kind::Slice.condition())
    }

    pub fn row(&self, id: i64, service: &str) -> Option<SliceRow> {
        self.store
            .read(|c| store::slices(c, id))
            .unwrap()
            .into_iter()
            .find(|r| r.service == service)
    }

    /// The commands `migrate` and `seed` ran, in order.
    pub fn runs(&self) -> Vec<String> {
        self.sup
            .inner
            .lock()
            .unwrap()
            .runs
            .iter()
            .map(|r| r.cmd.clone())
            .collect()
    }
}

fn db_spec() -> Spec {
    spec(vec![
        (
            "db",
            resource("postgres", Some("migrate up"), Some("seed all")),
        ),
        ("api", web("serve", &["db"])),
    ])
}

#[tokio::test]
async fn a_slice_is_provisioned_then_migrated_and_seeded_once_before_its_dependents_start() {
    let h = h();
    let id = h.up("w", db_spec());
    h.converge(id).await;
    assert_eq!(h.fake.calls("provision"), vec![h.bk("acme_w_db")]);
    assert_eq!(h.runs(), vec!["migrate up", "seed all"]);
    let url = h.row(id, "db").unwrap().address.unwrap();
    for run in &h.sup.inner.lock().unwrap().runs {
        assert_eq!(
            run.env["DATABASE_URL"], url,
            "{} saw another address",
            run.cmd
        );
    }
    let c = h.slices_ready(id);
    assert_eq!(
        (c.status, c.message.as_str()),
        (
            CondStatus::True,
            format!("db={}", h.bk("acme_w_db")).as_str()
        )
    );
    assert_eq!(
        h.row(id, "db").unwrap().state,
        crate::store::SliceState::Ready
    );
    assert_eq!(h.sup.spawn_order(), vec!["api"]);
    // Converged: nothing runs again, and a new `binky up` does not seed twice.
    h.converge(id).await;
    h.up("w", db_spec());
    h.converge(id).await;
    assert_eq!(h.runs(), vec!["migrate up", "seed all"]);
    // A changed migrate runs again; seed does not.
    let mut changed = db_spec();
    changed.services.insert(
        "db".into(),
        resource("postgres", Some("migrate up --to 2"), Some("seed all")),
    );
    h.up("w", changed);
    h.converge(id).await;
    assert_eq!(
        h.runs(),
        vec!["migrate up", "seed all", "migrate up --to 2"]
    );
    assert_eq!(h.slices_ready(id).status, CondStatus::True);
}

#[tokio::test]
async fn a_server_that_is_down_makes_the_world_wait_naming_it_then_it_comes_up_by_itself() {
    let h = h();
    h.fake.inner.lock().unwrap().provision_transient = 2;
    let id = h.up("w", db_spec());
    h.prepare(id).await;
    reconcile(&h.slice, &h.store, id).await;
    let c = h.slices_ready(id);
    assert_eq!(c.status, CondStatus::False);
    assert_eq!(c.reason, "ServerUnavailable");
    assert!(!c.stalled, "a server that is down is worth waiting for");
    assert!(
        c.message.contains("db: waiting for its postgres server")
            && c.message.contains("127.0.0.1:5999: connection refused"),
        "{}",
        c.message
    );
    assert!(
        h.row(id, "db").unwrap().message.contains("127.0.0.1:5999"),
        "the slice row does not say what it waits for"
    );
    reconcile(&h.proc_, &h.store, id).await;
    assert!(
        h.sup.spawn_order().is_empty(),
        "api started without its database"
    );
    assert!(h.runs().is_empty(), "migrate ran without a slice");
    h.converge(id).await;
    assert_eq!(h.fake.calls("provision").len(), 3);
    assert_eq!(h.runs(), vec!["migrate up", "seed all"]);
    assert_eq!(h.slices_ready(id).status, CondStatus::True);
    assert_eq!(h.sup.spawn_order(), vec!["api"]);
}

#[tokio::test]
async fn a_permanent_failure_fails_the_world_and_only_the_next_up_tries_again() {
    let h = h();
    h.fake.inner.lock().unwrap().provision_permanent = Some("role bk_acme_w_db: bad name".into());
    let id = h.up("w", db_spec());
    h.converge(id).await;
    let c = h.slices_ready(id);
    assert_eq!(c.reason, "SliceFailed");
    assert!(c.stalled);
    assert_eq!(c.message, "db: role bk_acme_w_db: bad name");
    assert!(events(&h.store, "w")
        .iter()
        .any(|(k, m)| k == "slice_failed" && m.contains("bad name")));
    assert_eq!(
        h.fake.calls("provision").len(),
        1,
        "retried a permanent failure"
    );
    assert!(h.runs().is_empty() && h.sup.spawn_order().is_empty());
    // Fixed on the server: still failed until `binky up` asks again.
    h.fake.inner.lock().unwrap().provision_permanent = None;
    h.converge(id).await;
    assert_eq!(h.fake.calls("provision").len(), 1);
    h.up("w", db_spec());
    h.converge(id).await;
    assert_eq!(h.slices_ready(id).status, CondStatus::True);
    assert_eq!(h.runs(), vec!["migrate up", "seed all"]);
}

#[tokio::test]
async fn a_slice_dropped_outside_binky_is_made_again_but_checked_at_most_every_drift_check() {
    let h = h();
    let id = h.up("w", db_spec());
    h.converge(id).await;
    assert_eq!(h.runs().len(), 2);
    let checks = h.fake.calls("exists").len();
    h.fake.drop_outside(&h.bk("acme_w_db"));
    for _ in 0..5 {
        reconcile(&h.slice, &h.store, id).await;
    }
    assert_eq!(
        h.fake.calls("exists").len(),
        checks,
        "checked again within DRIFT_CHECK"
    );
    assert_eq!(h.fake.calls("provision").len(), 1);
    // DRIFT_CHECK later: found missing, made again, migrated and seeded again.
    h.slice.age_drift_checks(DRIFT_CHECK);
    reconcile(&h.slice, &h.store, id).await;
    assert_eq!(h.fake.calls("exists").len(), checks + 1);
    assert!(h.fake.on_server().contains(&h.bk("acme_w_db")));
    assert_eq!(
        h.runs(),
        vec!["migrate up", "seed all", "migrate up", "seed all"]
    );
    assert!(events(&h.store, "w").iter().any(|(k, m)| k == "slice_drift"
        && m.contains(&format!("{} was dropped outside binky", h.bk("acme_w_db")))));
    assert_eq!(h.slices_ready(id).status, CondStatus::True);
    // Healed: once checked again, quiet for DRIFT_CHECK.
    reconcile(&h.slice, &h.store, id).await;
    let checks = h.fake.calls("exists").len();
    for _ in 0..5 {
        reconcile(&h.slice, &h.store, id).await;
    }
    assert_eq!(h.fake.calls("exists").len(), checks);
    assert_eq!(h.fake.calls("provision").len(), 2);
}

#[tokio::test]
async fn an_adapter_that_cannot_tell_is_never_made_again_behind_its_back() {
    let h = h();
    h.fake.inner.lock().unwrap().blind = true;
    let id = h.up("w", db_spec());
    h.converge(id).await;
    h.fake.drop_outside(&h.bk("acme_w_db"));
    h.slice.age_drift_checks(DRIFT_CHECK);
    h.converge(id).await;
    assert_eq!(h.runs().len(), 2);
    assert!(!events(&h.store, "w")
        .iter()
        .any(|(k, _)| k == "slice_drift"));
}

fn two_slices() -> Spec {
    spec(vec![
        ("db", resource("postgres", Some("migrate up"), None)),
        ("cache", resource("redis", None, None)),
        ("api", web("serve", &["db", "cache"])),
    ])
}

#[tokio::test]
async fn removal_leaves_a_slice_its_server_says_another_home_made_and_says_so() {
    let h = h();
    let id = h.up("w", two_slices());
    h.converge(id).await;
    // The db's server names another home as its maker (a slice named alike before homes
    // had an identity, which that home adopted first).
    h.fake
        .inner
        .lock()
        .unwrap()
        .others
        .insert(h.bk("acme_w_db"), "q7r2s3t4".into());
    h.store.mark_deleted(id, false).unwrap();
    h.converge(id).await;
    assert!(world(&h.store, id).is_none(), "the removal did not finish");
    assert_eq!(
        h.fake.on_server().into_iter().collect::<Vec<_>>(),
        vec![h.bk("acme_w_db")],
        "the other home's slice was dropped, or the own one kept"
    );
    let said = events(&h.store, "w");
    assert!(
        said.iter().any(|(k, m)| k == "slice"
            && m.contains(&h.bk("acme_w_db"))
            && m.contains("belongs to another binky home (q7r2s3t4)")),
        "{said:?}"
    );
    assert!(
        !said
            .iter()
            .any(|(_, m)| m.contains(&format!("dropped postgres slice {}", h.bk("acme_w_db")))),
        "{said:?}"
    );
}

#[tokio::test]
async fn removal_drops_the_slices_after_the_processes_stopped_and_leaves_nothing() {
    let h = h();
    let id = h.up("w", two_slices());
    h.converge(id).await;
    assert_eq!(h.fake.on_server().len(), 2);
    h.store.mark_deleted(id, false).unwrap();
    // The processes still run: the slices stay.
    reconcile(&h.slice, &h.store, id).await;
    assert!(
        h.fake.calls("teardown").is_empty(),
        "dropped under running processes"
    );
    assert!(store_finalizers(&h.store, id).contains(&Kind::Slice.name().to_owned()));
    h.converge(id).await;
    let mut dropped = h.fake.calls("teardown");
    dropped.sort();
    assert_eq!(dropped, vec![h.bk("acme_w_cache"), h.bk("acme_w_db")]);
    assert!(h.fake.on_server().is_empty());
    assert!(
        world(&h.store, id).is_none(),
        "the world outlived its finalizers"
    );
    let left: i64 = h
        .store
        .read(|c| Ok(c.query_row("SELECT COUNT(*) FROM slices", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(left, 0);
}

fn store_finalizers(store: &Store, id: i64) -> Vec<String> {
    store.read(|c| store::finalizers(c, id)).unwrap()
}

#[tokio::test]
async fn a_teardown_cut_short_is_finished_by_the_next_daemon_without_dropping_twice() {
    let h = h();
    let id = h.up("w", two_slices());
    h.converge(id).await;
    // The daemon dies after dropping the first slice (`cache`), before the second.
    h.fake
        .inner
        .lock()
        .unwrap()
        .teardown_transient
        .insert(h.bk("acme_w_db"), 1);
    h.store.mark_deleted(id, false).unwrap();
    reconcile(&h.proc_, &h.store, id).await;
    reconcile(&h.slice, &h.store, id).await;
    assert_eq!(
        h.fake.on_server().into_iter().collect::<Vec<_>>(),
        vec![h.bk("acme_w_db")]
    );
    assert!(h.row(id, "cache").is_none() && h.row(id, "db").is_some());
    assert!(
        store_finalizers(&h.store, id).contains(&Kind::Slice.name().to_owned()),
        "the finalizer went before the slices"
    );
    // The next daemon: a new controller that knows nothing but the store.
    let next = SliceController::new(
        h.store.clone(),
        Arc::new(SliceWork::new(
            h.store.clone(),
            h.fake.clone(),
            h.sup.clone(),
            h.dir.path().join("logs"),
        )),
    );
    let w = world(&h.store, id).unwrap();
    assert_eq!(next.cleanup(&w).await.unwrap(), Cleanup::Done);
    assert!(h.fake.on_server().is_empty());
    assert!(h.row(id, "db").is_none());
    assert_eq!(
        h.fake.calls("teardown"),
        vec![h.bk("acme_w_cache"), h.bk("acme_w_db"), h.bk("acme_w_db")],
        "cache dropped twice, or db never retried"
    );
    h.converge(id).await;
    assert!(world(&h.store, id).is_none());
}

#[tokio::test]
async fn a_slice_that_cannot_be_dropped_is_reported_and_removal_still_finishes() {
    let h = h();
    let id = h.up("w", two_slices());
    h.converge(id).await;
    h.fake.inner.lock().unwrap().teardown_permanent =
        Some("adapter binky-adapter-x is gone".into());
    h.store.mark_deleted(id, false).unwrap();
    let before = events(&h.store, "w").len();
    h.converge(id).await;
    assert!(
        world(&h.store, id).is_none(),
        "removal hangs on a slice it cannot drop"
    );
    // The world's history outlives it: the failures are on record.
    let failed: Vec<_> = events(&h.store, "w")
        .into_iter()
        .skip(before)
        .filter(|(k, _)| k == "slice_failed")
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(failed[0].1.contains("could not drop slice") && failed[0].1.contains("is gone"));
}

#[tokio::test]
async fn a_world_whose_managed_server_is_down_says_so_until_it_is_back() {
    use crate::spec::ServiceKind;
    let h = h();
    let admin = "postgres://postgres:pw@127.0.0.1:5999/postgres";
    let mut s = db_spec();
    if let ServiceKind::Resource(r) = &mut s.services.get_mut("db").unwrap().kind {
        r.admin_url = Some(admin.into());
    }
    let server = |state: &str| {
        h.store
            .write_fixture(|tx| {
                tx.execute(
                    "INSERT INTO servers (kind, pid, start_time, port, admin_url, data_dir, state, updated_at)
                     VALUES ('postgres', NULL, NULL, 5999, ?1, '/d', ?2, 0)
                     ON CONFLICT (kind) DO UPDATE SET state = excluded.state",
                    rusqlite::params![admin, state],
                )?;
                Ok(())
            })
            .unwrap()
    };
    server("running");
    let id = h.up("w", s);
    h.converge(id).await;
    assert_eq!(h.slices_ready(id).status, CondStatus::True);
    server("down");
    reconcile(&h.slice, &h.store, id).await;
    let c = h.slices_ready(id);
    assert_eq!(
        (c.status, c.reason.as_str()),
        (CondStatus::False, "ServerDown"),
        "{}",
        c.message
    );
    assert!(
        c.message.contains("db: the managed postgres server")
            && c.message.contains("starting it again"),
        "{}",
        c.message
    );
    assert!(!c.stalled, "waiting fixes it: {}", c.message);
    // The slice's own line says it too (what `binky status` shows for `db`).
    let row = || {
        h.store
            .read(|c| store::slices(c, id))
            .unwrap()
            .into_iter()
            .find(|r| r.service == "db")
            .unwrap()
    };
    assert!(
        row().message.contains("stopped running"),
        "{}",
        row().message
    );
    // Stopped by a person: the world needs one, and the condition says which command.
    server("stopped");
    reconcile(&h.slice, &h.store, id).await;
    let c = h.slices_ready(id);
    assert_eq!(c.reason, "ServerStopped", "{}", c.message);
    assert!(c.stalled, "nothing but a person starts it: {}", c.message);
    assert!(
        c.message
            .contains("`binky servers stop` stopped the managed postgres server")
            && c.message.contains("`binky up w` starts it again"),
        "{}",
        c.message
    );
    server("running");
    reconcile(&h.slice, &h.store, id).await;
    assert_eq!(h.slices_ready(id).status, CondStatus::True);
    assert_eq!(row().message, "", "the line still says the server is down");
}

#[tokio::test]
async fn a_world_whose_named_server_does_not_answer_waits_saying_which_until_it_does() {
    use crate::spec::ServiceKind;
    let h = h();
    let admin = "postgres://postgres:pw@db.example:5432/postgres";
    let mut s = db_spec();
    if let ServiceKind::Resource(r) = &mut s.services.get_mut("db").unwrap().kind {
        r.admin_url = Some(admin.into());
    }
    let id = h.up("w", s);
    h.converge(id).await;
    assert_eq!(h.slices_ready(id).status, CondStatus::True);
    let asked_before = h.fake.calls("exists").len();
    h.fake
        .inner
        .lock()
        .unwrap()
        .unanswered
        .insert(admin.into(), "connection refused".into());
    reconcile(&h.slice, &h.store, id).await;
    let c = h.slices_ready(id);
    assert_eq!(
        (c.status, c.reason.as_str(), c.stalled),
        (CondStatus::False, "ServerUnavailable", false),
        "{}",
        c.message
    );
    assert!(
        c.message.contains("db: its postgres server postgres://db.example:5432 does not answer (connection refused)")
            && !c.message.contains("pw"),
        "{}",
        c.message
    );
    // Not asked again by each world while the daemon knows it does not answer.
    assert_eq!(h.fake.calls("exists").len(), asked_before);
    h.fake.inner.lock().unwrap().unanswered.clear();
    reconcile(&h.slice, &h.store, id).await;
    assert_eq!(h.slices_ready(id).status, CondStatus::True);
}

#[tokio::test]
async fn a_removed_world_whose_server_never_answers_waits_saying_so_and_force_forgets_it() {
    let h = h();
    let id = h.up("w", spec(vec![("db", resource("postgres", None, None))]));
    h.converge(id).await;
    assert_eq!(h.fake.on_server().len(), 1);
    // The server goes away for good.
    h.fake
        .inner
        .lock()
        .unwrap()
        .teardown_transient
        .insert(h.bk("acme_w_db"), u32::MAX);
    h.store.mark_deleted(id, false).unwrap();
    reconcile(&h.proc_, &h.store, id).await;
    let w = world(&h.store, id).unwrap();
    let err = h.slice.cleanup(&w).await.unwrap_err().to_string();
    assert!(
        err.contains(&format!("cannot drop slice {}", h.bk("acme_w_db")))
            && err.contains("`binky remove w --force` forgets the slice"),
        "{err}"
    );
    assert!(h.row(id, "db").is_some(), "forgotten without --force");
    // `binky remove --force`: forgotten, and the event names what is left where.
    h.store.mark_deleted(id, true).unwrap();
    let w = world(&h.store, id).unwrap();
    assert_eq!(h.slice.cleanup(&w).await.unwrap(), Cleanup::Done);
    assert!(h.row(id, "db").is_none());
    assert!(events(&h.store, "w")
        .iter()
        .any(|(k, m)| k == "slice_failed"
            && m.contains(&format!("drop `{}` on that server", h.bk("acme_w_db")))));
}

#[tokio::test]
async fn a_world_that_goes_down_stops_its_slices_own_servers_once_its_processes_stopped() {
    let h = h();
    h.fake.inner.lock().unwrap().own_servers = true;
    let id = h.up("w", db_spec());
    h.converge(id).await;
    assert_eq!(h.sup.spawn_order(), vec!["api"]);
    h.store
        .set_desired_state(id, store::DesiredState::Stopped)
        .unwrap();
    // The api still runs: its server is not stopped under it, and nothing is provisioned.
    reconcile(&h.slice, &h.store, id).await;
    assert!(h.fake.calls("pause").is_empty());
    assert_eq!(h.slices_ready(id).status, CondStatus::False);
    h.converge(id).await;
    assert_eq!(h.fake.calls("pause"), vec![h.bk("acme_w_db")]);
    assert_eq!(h.fake.calls("provision"), vec![h.bk("acme_w_db")]);
    assert_eq!(
        h.row(id, "db").unwrap().state,
        crate::store::SliceState::Stopped
    );
    assert_eq!(h.slices_ready(id).status, CondStatus::True);
    // Up again: provisioned (its server started) before the api, not migrated or seeded
    // again.
    h.up("w", db_spec());
    h.converge(id).await;
    assert_eq!(h.fake.calls("provision").len(), 2);
    assert_eq!(
        h.row(id, "db").unwrap().state,
        crate::store::SliceState::Ready
    );
    assert_eq!(h.runs(), vec!["migrate up", "seed all"]);
    assert_eq!(h.sup.spawn_order(), vec!["api", "api"]);
}

#[tokio::test]
async fn a_world_that_goes_down_keeps_slices_without_a_server_of_their_own_ready() {
    let h = h();
    let id = h.up("w", db_spec());
    h.converge(id).await;
    h.store
        .set_desired_state(id, store::DesiredState::Stopped)
        .unwrap();
    h.converge(id).await;
    assert_eq!(h.fake.calls("pause"), vec![h.bk("acme_w_db")]);
    assert_eq!(
        h.row(id, "db").unwrap().state,
        crate::store::SliceState::Ready
    );
}
