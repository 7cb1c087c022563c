//! Golden templates and what cloning from them comes to: a copy, a fallback to migrate and
//! seed, or a wait.

use std::sync::Arc;
use std::time::Duration;

use crate::registry::Kind;
use crate::runtime::Controller;
use crate::spec::Spec;
use crate::store::GoldenState;
use crate::store::{self, CondStatus, GoldenRow};
use crate::testing::*;

use super::slice::{h, h_measuring, H};

fn cloning() -> Spec {
    spec(vec![(
        "db",
        cloned_from(
            resource("postgres", Some("migrate up"), Some("seed all")),
            "golden",
        ),
    )])
}

fn goldens(h: &H) -> Vec<GoldenRow> {
    h.store.read(store::goldens).unwrap()
}

/// The slice the `n`th `migrate`/`seed` ran against (its `DATABASE_URL`'s database).
fn run_on(h: &H, n: usize) -> String {
    let runs = &h.sup.inner.lock().unwrap().runs;
    let url = &runs[n].env["DATABASE_URL"];
    url.rsplit('/').next().unwrap().to_owned()
}

fn has_event(h: &H, world: &str, kind: &str, text: &str) -> bool {
    events(&h.store, world)
        .iter()
        .any(|(k, m)| k == kind && m.contains(text))
}

#[tokio::test]
async fn the_template_is_migrated_and_seeded_once_and_every_world_is_cloned_from_it() {
    let h = h();
    h.fake.inner.lock().unwrap().can_clone = true;
    let a = h.up("a", cloning());
    h.converge(a).await;
    let g = goldens(&h);
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].state, GoldenState::Ready);
    let template = g[0].name.clone();
    let stage = format!("{template}_migrated");
    // Migrated in its stage, seeded on a copy of it.
    assert_eq!(h.fake.calls("provision"), vec![stage.clone()]);
    assert_eq!(h.fake.calls("seal"), vec![stage.clone(), template.clone()]);
    assert_eq!(h.runs(), vec!["migrate up", "seed all"]);
    assert_eq!(run_on(&h, 0), stage);
    assert_eq!(run_on(&h, 1), template);
    assert!(g[0].migrated && g[0].how == "built from an empty database");
    let b = h.up("b", cloning());
    h.converge(b).await;
    assert_eq!(
        h.fake.calls("clone"),
        vec![
            format!("{stage} -> {template}"),
            format!("{template} -> {}", h.bk("acme_a_db")),
            format!("{template} -> {}", h.bk("acme_b_db")),
        ]
    );
    assert_eq!(
        h.runs(),
        vec!["migrate up", "seed all"],
        "a world migrated or seeded its own copy"
    );
    assert_eq!(
        h.fake.calls("provision"),
        vec![stage],
        "a world's slice was provisioned instead of cloned"
    );
    for (id, name) in [(a, "a"), (b, "b")] {
        assert_eq!(h.slices_ready(id).status, CondStatus::True);
        let row = h.row(id, "db").unwrap();
        assert!(row.migrate_hash.is_some() && row.seed_hash.is_some());
        assert!(has_event(&h, name, "slice", "from golden template"));
        assert!(!has_event(&h, name, "clone_fallback", ""));
    }
    assert_eq!(
        condition(&h.store, b, Kind::Golden.condition()).status,
        CondStatus::True
    );
}

#[tokio::test]
async fn an_adapter_that_cannot_clone_provisions_migrates_and_seeds_each_world_and_says_so() {
    let h = h();
    let a = h.up("a", cloning());
    let b = h.up("b", cloning());
    h.converge(a).await;
    h.converge(b).await;
    assert_eq!(
        h.runs(),
        vec!["migrate up", "seed all", "migrate up", "seed all"]
    );
    assert_eq!(
        h.fake.calls("provision"),
        vec![h.bk("acme_a_db"), h.bk("acme_b_db")]
    );
    assert!(h.fake.calls("clone").is_empty() && h.fake.calls("seal").is_empty());
    assert!(goldens(&h).is_empty(), "a template nobody can clone from");
    for (id, name) in [(a, "a"), (b, "b")] {
        assert_eq!(h.slices_ready(id).status, CondStatus::True);
        assert!(has_event(
            &h,
            name,
            "clone_fallback",
            "adapter postgres cannot clone"
        ));
        let g = condition(&h.store, id, Kind::Golden.condition());
        assert_eq!(g.status, CondStatus::True);
        assert!(g.message.contains("cannot clone"), "{}", g.message);
    }
}

#[tokio::test]
async fn a_clone_the_server_refuses_falls_back_to_migrate_and_seed_naming_the_template() {
    let h = h();
    {
        let mut f = h.fake.inner.lock().unwrap();
        f.can_clone = true;
        f.clone_permanent = Some("template has open sessions".into());
        f.clone_fails_into = Some(h.bk("acme_"));
    }
    let a = h.up("a", cloning());
    h.converge(a).await;
    let template = goldens(&h)[0].name.clone();
    assert_eq!(
        h.fake.calls("clone"),
        vec![
            format!("{template}_migrated -> {template}"),
            format!("{template} -> {}", h.bk("acme_a_db"))
        ],
        "a refused clone was retried"
    );
    // The template's build, then the world's own slice the slow way.
    assert_eq!(
        h.fake.calls("provision"),
        vec![format!("{template}_migrated"), h.bk("acme_a_db")]
    );
    assert_eq!(
        h.runs(),
        vec!["migrate up", "seed all", "migrate up", "seed all"]
    );
    assert!(has_event(
        &h,
        "a",
        "clone_fallback",
        &format!("cloning from golden template {template} failed (template has open sessions)")
    ));
    assert_eq!(h.slices_ready(a).status, CondStatus::True);
    // The template stays for other worlds.
    assert_eq!(goldens(&h)[0].state, GoldenState::Ready);
}

#[tokio::test]
async fn a_clone_that_fails_for_now_is_retried_and_needs_no_fallback() {
    let h = h();
    {
        let mut f = h.fake.inner.lock().unwrap();
        f.can_clone = true;
        f.clone_transient = 1;
        f.clone_fails_into = Some(h.bk("acme_"));
    }
    let a = h.up("a", cloning());
    h.prepare(a).await;
    reconcile(&h.golden, &h.store, a).await;
    reconcile(&h.slice, &h.store, a).await;
    let c = h.slices_ready(a);
    assert_eq!((c.reason.as_str(), c.stalled), ("ServerUnavailable", false));
    assert!(c.message.contains("template is busy"), "{}", c.message);
    assert!(h.row(a, "db").is_none());
    h.converge(a).await;
    // The stage into the template, then the world's copy twice.
    assert_eq!(h.fake.calls("clone").len(), 3);
    assert_eq!(h.runs(), vec!["migrate up", "seed all"]);
    assert!(!has_event(&h, "a", "clone_fallback", ""));
    assert_eq!(h.slices_ready(a).status, CondStatus::True);
}

#[tokio::test]
async fn a_service_that_stops_cloning_loses_its_reference_and_the_template_is_kept_for_golden_keep()
{
    let h = h();
    h.fake.inner.lock().unwrap().can_clone = true;
    let a = h.up("a", cloning());
    h.converge(a).await;
    let template = goldens(&h)[0].name.clone();
    let refs = h.store.read(|c| store::golden_refs_of(c, a)).unwrap();
    assert_eq!(refs.keys().collect::<Vec<_>>(), ["db"]);
    // The same world, its service no longer cloning.
    let plain = spec(vec![(
        "db",
        resource("postgres", Some("migrate up"), Some("seed all")),
    )]);
    assert_eq!(h.up("a", plain), a);
    h.converge(a).await;
    assert!(h
        .store
        .read(|c| store::golden_refs_of(c, a))
        .unwrap()
        .is_empty());
    // No world uses it, and it is kept for the next one (golden_keep, 7 days by default).
    assert_eq!(goldens(&h).len(), 1, "an unused template went at once");
    let week = Duration::from_secs(7 * 86_400);
    let next = h.golden.housekeep().await.expect("it says when it goes");
    assert!(
        next <= week && next > week - Duration::from_secs(60),
        "{next:?}"
    );
    assert_eq!(goldens(&h).len(), 1);
    // With golden_keep = 0, it goes with its last world, as binky did before.
    h.store.set_setting("golden_keep", "0").unwrap();
    assert_eq!(h.golden.housekeep().await, None);
    assert!(goldens(&h).is_empty(), "a template no world uses was kept");
    let mut dropped = h.fake.calls("teardown");
    dropped.retain(|n| n.starts_with("bk_golden_"));
    assert!(
        dropped.ends_with(&[template.clone(), format!("{template}_migrated")]),
        "{dropped:?}"
    );
    assert!(!h
        .fake
        .on_server()
        .iter()
        .any(|n| n.starts_with("bk_golden_")));
}

#[tokio::test]
async fn a_template_whose_server_is_out_of_reach_is_retried_without_an_event_each_time() {
    let h = h();
    h.fake.inner.lock().unwrap().can_clone = true;
    h.fake.inner.lock().unwrap().provision_transient = 3;
    let a = h.up("a", cloning());
    h.converge(a).await;
    // Three tries met a server that was down, the fourth built it: one event says the build
    // began, none says "again" (the condition said it was waiting for the server).
    assert_eq!(goldens(&h)[0].state, GoldenState::Ready);
    assert_eq!(h.fake.calls("provision").len(), 4);
    assert!(has_event(&h, "a", "golden", "building golden template"));
    assert!(
        !has_event(&h, "a", "golden", "again"),
        "{:?}",
        events(&h.store, "a")
    );
}

#[tokio::test]
async fn a_failed_template_the_next_up_retries_does_not_fail_that_up_before_the_retry() {
    let h = h();
    h.fake.inner.lock().unwrap().can_clone = true;
    h.sup.inner.lock().unwrap().run_code = 3;
    let a = h.up("a", cloning());
    h.converge(a).await;
    assert_eq!(goldens(&h)[0].state, GoldenState::Failed);
    assert!(h.slices_ready(a).stalled, "{:?}", h.slices_ready(a));
    assert_eq!(h.runs(), vec!["migrate up"]);
    let golden_sql = |sql: &str, params: &[&dyn rusqlite::ToSql]| {
        h.store
            .write(crate::store::owner::Golden, |tx| {
                tx.execute(sql, params)?;
                Ok(())
            })
            .unwrap()
    };
    // The failure is older than the next world's `up` (a CLI command later).
    golden_sql("UPDATE goldens SET updated_at = updated_at - 1000", &[]);
    let b = h.up("b", cloning());
    // The golden controller looks at b's generation before its worktree is there, then, on
    // its next pass, records b's reference a moment before it claims the retry: the slice
    // controller runs in between.
    reconcile(&h.golden, &h.store, b).await;
    h.prepare(b).await;
    let key = goldens(&h)[0].key.clone();
    golden_sql(
        "INSERT INTO golden_refs (world_id, service, key) VALUES (?1, 'db', ?2)",
        &[&b, &key],
    );
    reconcile(&h.slice, &h.store, b).await;
    let c = h.slices_ready(b);
    assert!(
        !c.stalled && c.message.contains("being built again"),
        "the old failure failed b's up before its retry: {c:?}"
    );
    // The retry runs the failing command again and then reports its failure.
    h.converge(b).await;
    assert_eq!(h.runs(), vec!["migrate up", "migrate up"]);
    let c = h.slices_ready(b);
    assert!(c.stalled && c.message.contains("failed"), "{c:?}");
}

/// Write `files` into `world`'s worktree (made by the worktree controller).
fn files(h: &H, world: &str, files: &[(&str, &str)]) {
    for (f, text) in files {
        let p = h.dir.path().join("wt").join(world).join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

/// Run SQL on the golden controller's tables, as if time had passed.
fn golden_sql(h: &H, sql: &str, params: &[&dyn rusqlite::ToSql]) {
    h.store
        .write(crate::store::owner::Golden, |tx| {
            tx.execute(sql, params)?;
            Ok(())
        })
        .unwrap()
}

/// The template world `id`'s `db` uses.
fn template_of(h: &H, id: i64) -> GoldenRow {
    let key = h
        .store
        .read(|c| store::golden_ref(c, id, "db"))
        .unwrap()
        .expect("a reference");
    h.store.read(|c| store::golden(c, &key)).unwrap().unwrap()
}

/// A world `name` of `s` whose worktree holds `these` files, brought up.
async fn world_with(h: &H, name: &str, s: Spec, these: &[(&str, &str)]) -> i64 {
    let id = h.up(name, s);
    h.prepare(id).await;
    files(h, name, these);
    h.converge(id).await;
    id
}

/// Remove world `id` and let every controller finish its part.
async fn remove(h: &H, id: i64) {
    h.store.mark_deleted(id, false).unwrap();
    h.converge(id).await;
    assert!(world(&h.store, id).is_none(), "the world was not removed");
}

const ONE: &[(&str, &str)] = &[("migrations/001.sql", "one")];
const TWO: &[(&str, &str)] = &[("migrations/001.sql", "one"), ("migrations/002.sql", "two")];

#[tokio::test]
async fn a_new_migration_builds_the_new_template_on_a_copy_of_the_migrated_stage_of_the_one_before()
{
    let h = h();
    h.fake.inner.lock().unwrap().can_clone = true;
    let a = world_with(&h, "a", cloning(), ONE).await;
    let t1 = template_of(&h, a);
    assert_eq!(
        (t1.how.as_str(), t1.base.as_deref()),
        ("built from an empty database", None)
    );
    // A world with one more migration: its template starts from a copy of t1's migrated
    // stage, migrate runs on that copy, seed on a copy of the result.
    let b = world_with(&h, "b", cloning(), TWO).await;
    let t2 = template_of(&h, b);
    assert_ne!(t1.key, t2.key);
    assert_eq!(t2.state, GoldenState::Ready);
    assert_eq!(t2.base.as_deref(), Some(t1.key.as_str()));
    assert!(
        t2.how.starts_with(&format!("grown from {}", &t1.key[..12])),
        "{}",
        t2.how
    );
    let (s1, s2) = (t1.stage_name(), t2.stage_name());
    assert!(h.fake.calls("clone").contains(&format!("{s1} -> {s2}")));
    assert!(
        !h.fake.calls("provision").contains(&s2),
        "the new stage started from an empty database"
    );
    assert_eq!(
        h.runs(),
        vec!["migrate up", "seed all", "migrate up", "seed all"]
    );
    assert_eq!(
        (run_on(&h, 2), run_on(&h, 3)),
        (s2.clone(), t2.name.clone())
    );
    assert!(has_event(
        &h,
        "b",
        "golden",
        "on a copy of the migrated stage of"
    ));
    // Only seed data changed: the stage is copied as it is, migrate does not run.
    let mut seeded = TWO.to_vec();
    seeded.push(("seeds/users.csv", "ann"));
    let c = world_with(&h, "c", cloning(), &seeded).await;
    let t3 = template_of(&h, c);
    assert_ne!(t3.key, t2.key);
    assert_eq!(t3.base.as_deref(), Some(t2.key.as_str()));
    assert!(t3.how.contains("no migration changed"), "{}", t3.how);
    assert_eq!(h.runs().len(), 5);
    assert_eq!(h.runs().last().unwrap(), "seed all");
    // An edited migration: from an empty database, never on a template that ran the old text.
    let d = world_with(
        &h,
        "d",
        cloning(),
        &[
            ("migrations/001.sql", "one, edited"),
            ("migrations/002.sql", "two"),
        ],
    )
    .await;
    let t4 = template_of(&h, d);
    assert_eq!(
        (t4.how.as_str(), t4.base.as_deref()),
        ("built from an empty database", None)
    );
    assert!(h.fake.calls("provision").contains(&t4.stage_name()));
    // Every world got its copy; the first template and world are as they were.
    for id in [a, b, c, d] {
        assert_eq!(h.slices_ready(id).status, CondStatus::True);
    }
    assert_eq!(template_of(&h, a).key, t1.key);
}

#[tokio::test]
async fn when_migrate_fails_on_a_copy_of_the_template_before_the_new_one_is_built_from_an_empty_database_and_says_why(
) {
    let h = h();
    h.fake.inner.lock().unwrap().can_clone = true;
    let a = world_with(&h, "a", cloning(), ONE).await;
    let t1 = template_of(&h, a);
    // A tool that applies every file again fails on a migrated copy.
    h.sup
        .inner
        .lock()
        .unwrap()
        .fail_next
        .insert("migrate up".into(), 1);
    let b = world_with(&h, "b", cloning(), TWO).await;
    let t2 = template_of(&h, b);
    assert_eq!(t2.state, GoldenState::Ready);
    assert_eq!(t2.base, None, "{}", t2.how);
    assert!(
        t2.how.starts_with(&format!(
            "built from an empty database: migrate on a copy of {} failed",
            &t1.key[..12]
        )),
        "{}",
        t2.how
    );
    assert_eq!(
        h.runs(),
        vec![
            "migrate up",
            "seed all",
            "migrate up",
            "migrate up",
            "seed all"
        ]
    );
    // The failed copy went, and the stage was made again from an empty database.
    assert_eq!(run_on(&h, 2), t2.stage_name());
    assert!(h.fake.calls("provision").contains(&t2.stage_name()));
    assert!(has_event(
        &h,
        "b",
        "golden_fallback",
        "from an empty database instead"
    ));
    assert_eq!(h.slices_ready(b).status, CondStatus::True);
}

#[tokio::test]
async fn a_failed_seed_keeps_the_migrated_stage_and_the_retry_runs_the_seed_alone() {
    let h = h();
    h.fake.inner.lock().unwrap().can_clone = true;
    h.sup
        .inner
        .lock()
        .unwrap()
        .fail_next
        .insert("seed all".into(), 1);
    let a = h.up("a", cloning());
    h.converge(a).await;
    let g = goldens(&h).remove(0);
    assert_eq!(g.state, GoldenState::Failed);
    assert!(g.migrated, "the migrated stage was not kept");
    assert_eq!(h.runs(), vec!["migrate up", "seed all"]);
    let on_server = h.fake.on_server();
    assert!(on_server.contains(&g.stage_name()));
    assert!(
        !on_server.contains(&g.name),
        "the half-seeded copy was kept"
    );
    let ls = goldens(&h);
    assert!(ls[0].output.contains("seed"), "{}", ls[0].output);
    // The next `up` (a seed may fail on something outside the repository) runs it alone.
    golden_sql(&h, "UPDATE goldens SET updated_at = updated_at - 1000", &[]);
    let b = h.up("b", cloning());
    h.converge(b).await;
    let g = goldens(&h).remove(0);
    assert_eq!(g.state, GoldenState::Ready);
    assert_eq!(
        h.runs(),
        vec!["migrate up", "seed all", "seed all"],
        "the retry migrated again"
    );
    assert_eq!(h.fake.calls("provision"), vec![g.stage_name()]);
    assert!(
        g.how.ends_with("seed run again on its kept migrated stage"),
        "{}",
        g.how
    );
    assert!(has_event(&h, "b", "golden", "running seed only"));
    assert_eq!(h.slices_ready(b).status, CondStatus::True);
}

#[tokio::test]
async fn a_template_outlives_its_last_world_and_the_next_world_is_cloned_from_it_without_a_build() {
    let h = h();
    h.fake.inner.lock().unwrap().can_clone = true;
    let a = h.up("a", cloning());
    h.converge(a).await;
    let t = goldens(&h).remove(0);
    remove(&h, a).await;
    let kept = goldens(&h);
    assert_eq!(kept.len(), 1, "the template went with its last world");
    assert!(kept[0].used_at >= t.used_at);
    assert!(h.fake.on_server().contains(&t.name));
    let b = h.up("b", cloning());
    h.converge(b).await;
    assert_eq!(
        h.runs(),
        vec!["migrate up", "seed all"],
        "it was built again"
    );
    assert!(h
        .fake
        .calls("clone")
        .contains(&format!("{} -> {}", t.name, h.bk("acme_b_db"))));
    assert_eq!(h.slices_ready(b).status, CondStatus::True);
}

#[tokio::test]
async fn an_unused_template_goes_after_golden_keep_and_one_a_world_uses_or_a_build_copies_never_does(
) {
    let h = h();
    h.fake.inner.lock().unwrap().can_clone = true;
    let a = world_with(&h, "a", cloning(), ONE).await;
    let b = world_with(&h, "b", cloning(), TWO).await;
    let (t1, t2) = (template_of(&h, a), template_of(&h, b));
    remove(&h, a).await;
    // Eight days pass.
    golden_sql(
        &h,
        "UPDATE goldens SET used_at = used_at - 8 * 86400000",
        &[],
    );
    h.golden.housekeep().await;
    let left: Vec<String> = goldens(&h).into_iter().map(|g| g.key).collect();
    assert_eq!(
        left,
        vec![t2.key.clone()],
        "b's template went, or a's stayed"
    );
    for gone in [&t1.name, &t1.stage_name()] {
        assert!(
            h.fake.calls("teardown").contains(gone),
            "{gone} was not dropped"
        );
    }
    // b goes: its template was last used now, and is kept for golden_keep.
    remove(&h, b).await;
    h.store.set_setting("golden_keep", "1h").unwrap();
    let next = h.golden.housekeep().await.expect("kept");
    assert!(next <= Duration::from_secs(3600) && next > Duration::from_secs(3500));
    // A build copying from it (its base) holds it, whatever its age.
    golden_sql(
        &h,
        "INSERT INTO goldens (key, adapter, clone_from, name, secret, state, builder, created_at, updated_at, base)
         VALUES ('k3', 'postgres', 'golden', 'bk_golden_golden_k3', 's', 'building', '1:1', 0, 0, ?1)",
        &[&t2.key],
    );
    h.store.set_setting("golden_keep", "0").unwrap();
    h.golden.housekeep().await;
    assert!(
        goldens(&h).iter().any(|g| g.key == t2.key),
        "dropped under a build copying it"
    );
    golden_sql(&h, "DELETE FROM goldens WHERE key = 'k3'", &[]);
    h.golden.housekeep().await;
    assert!(goldens(&h).is_empty());
    assert!(!h
        .fake
        .on_server()
        .iter()
        .any(|n| n.starts_with("bk_golden_")));
}

#[tokio::test]
async fn under_disk_pressure_unused_templates_on_a_managed_server_go_least_recently_used_first() {
    let disk = Arc::new(FakeDisk::default());
    disk.inner.lock().unwrap().free = 100.0;
    let h = h_measuring(Some(disk.clone()));
    h.fake.inner.lock().unwrap().can_clone = true;
    let url = "postgres://admin:pw@127.0.0.1:5999/postgres";
    let on_server = || {
        let mut s = cloning();
        if let crate::spec::ServiceKind::Resource(r) = &mut s.services.get_mut("db").unwrap().kind {
            r.admin_url = Some(url.into());
        }
        s
    };
    h.store
        .write(crate::store::owner::Servers, |tx| {
            tx.execute(
                "INSERT INTO servers (kind, port, admin_url, data_dir, state, updated_at)
                 VALUES ('postgres', 5999, ?1, '/srv/binky-pg', 'running', 0)",
                [url],
            )?;
            Ok(())
        })
        .unwrap();
    let a = world_with(&h, "a", on_server(), ONE).await;
    let b = world_with(&h, "b", on_server(), TWO).await;
    let mut three = TWO.to_vec();
    three.push(("migrations/003.sql", "three"));
    let c = world_with(&h, "c", on_server(), &three).await;
    let (t1, t2, t3) = (template_of(&h, a), template_of(&h, b), template_of(&h, c));
    remove(&h, a).await;
    remove(&h, b).await;
    // t1 was used longest ago.
    golden_sql(
        &h,
        "UPDATE goldens SET used_at = used_at - 7200000 WHERE key = ?1",
        &[&t1.key],
    );
    golden_sql(
        &h,
        "UPDATE goldens SET used_at = used_at - 3600000 WHERE key = ?1",
        &[&t2.key],
    );
    let keys = || goldens(&h).into_iter().map(|g| g.key).collect::<Vec<_>>();
    assert_eq!(keys().len(), 3, "a template went with plenty of disk");
    // Short of the reserve (5 GiB) for one reading: dropping t1 is enough.
    {
        let mut d = disk.inner.lock().unwrap();
        (d.free, d.readings_left, d.after) = (1.0, Some(1), 50.0);
        d.asked.clear();
    }
    h.golden.housekeep().await;
    assert_eq!(keys(), vec![t2.key.clone(), t3.key.clone()]);
    let asked = disk.inner.lock().unwrap().asked.clone();
    assert!(
        !asked.is_empty()
            && asked
                .iter()
                .all(|p| p == std::path::Path::new("/srv/binky-pg")),
        "{asked:?}"
    );
    // Short for good: every unused one goes, the one c uses never does.
    disk.inner.lock().unwrap().free = 1.0;
    h.golden.housekeep().await;
    assert_eq!(keys(), vec![t3.key.clone()]);
    assert_eq!(h.slices_ready(c).status, CondStatus::True);
    // A server binky does not run has a disk it cannot see: its templates stay.
    h.store
        .write(crate::store::owner::Servers, |tx| {
            tx.execute("DELETE FROM servers", [])?;
            Ok(())
        })
        .unwrap();
    remove(&h, c).await;
    h.golden.housekeep().await;
    assert_eq!(keys(), vec![t3.key.clone()]);
}

#[tokio::test]
async fn golden_rm_drops_a_template_in_use_once_no_world_waits_to_be_cloned_from_it() {
    let h = h();
    h.fake.inner.lock().unwrap().can_clone = true;
    let a = h.up("a", cloning());
    h.converge(a).await;
    let t = goldens(&h).remove(0);
    // b is about to be cloned from it when the drop is asked for.
    let b = h.up("b", cloning());
    h.prepare(b).await;
    reconcile(&h.golden, &h.store, b).await;
    h.store.request_golden_drop(&t.key).unwrap();
    h.golden.housekeep().await;
    assert_eq!(
        goldens(&h).len(),
        1,
        "dropped while b waited to be cloned from it"
    );
    reconcile(&h.slice, &h.store, b).await;
    assert_eq!(h.slices_ready(b).status, CondStatus::True);
    h.golden.housekeep().await;
    assert!(goldens(&h).is_empty());
    let on_server = h.fake.on_server();
    assert!(on_server.contains(&h.bk("acme_a_db")) && on_server.contains(&h.bk("acme_b_db")));
    assert!(!on_server.iter().any(|n| n.starts_with("bk_golden_")));
    let drops: i64 = h
        .store
        .read(|c| Ok(c.query_row("SELECT count(*) FROM golden_drops", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(drops, 0);
}

/// A held copy of a path no migrate needs (`web/node_modules`) holds neither a golden
/// template's build nor a slice being made whose `migrate` runs elsewhere (`backend`): the
/// template is built once `backend/.venv` is there, the world's database cloned from it, a
/// database that clones nothing migrated — all while `web/node_modules` is still coming.
#[tokio::test]
async fn a_held_copy_holds_no_golden_build_or_slice_whose_migrate_runs_elsewhere() {
    let h = h();
    h.fake.inner.lock().unwrap().can_clone = true;
    let gate = Arc::new(tokio::sync::Notify::new());
    {
        let mut g = h.git().inner.lock().unwrap();
        g.bring_gate = Some(("a".into(), "web/node_modules".into(), gate.clone()));
        g.plan = vec![
            ("web/node_modules".into(), crate::spec::CopyMode::Link),
            ("backend/.venv".into(), crate::spec::CopyMode::Link),
        ];
    }
    let in_backend = |mut svc: crate::spec::Service| {
        if let crate::spec::ServiceKind::Resource(r) = &mut svc.kind {
            r.workdir = "backend".into();
        }
        svc
    };
    let s = spec(vec![
        (
            "db",
            in_backend(cloned_from(
                resource("postgres", Some("migrate up"), Some("seed all")),
                "golden",
            )),
        ),
        (
            "events",
            in_backend(resource("postgres", Some("migrate events"), None)),
        ),
    ]);
    let a = h.up("a", s);
    let paths = || -> Vec<(String, store::BootstrapState)> {
        h.store
            .read(|c| store::bootstrap_paths(c, a))
            .unwrap()
            .into_iter()
            .map(|r| (r.path, r.state))
            .collect()
    };
    h.prepare(a).await;
    wait_for("backend/.venv brought", || {
        paths().contains(&("backend/.venv".to_owned(), store::BootstrapState::Done))
    })
    .await;
    h.converge(a).await;
    // Built, cloned and migrated, with web/node_modules still held.
    assert!(
        paths().contains(&(
            "web/node_modules".to_owned(),
            store::BootstrapState::Pending
        )),
        "{:?}",
        paths()
    );
    let g = goldens(&h);
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].state, GoldenState::Ready);
    assert_eq!(h.row(a, "db").unwrap().state, store::SliceState::Ready);
    assert_eq!(h.row(a, "events").unwrap().state, store::SliceState::Ready);
    let mut runs = h.runs();
    runs.sort();
    assert_eq!(runs, vec!["migrate events", "migrate up", "seed all"]);
    assert!(h
        .fake
        .calls("clone")
        .iter()
        .any(|c| c.ends_with(&format!("-> {}", h.bk("acme_a_db")))));
    // The held path comes; nothing ran again for it.
    gate.notify_one();
    wait_for("web/node_modules brought", || {
        paths()
            .iter()
            .all(|(_, s)| *s == store::BootstrapState::Done)
    })
    .await;
    h.converge(a).await;
    assert_eq!(h.runs().len(), 3);
}

/// A data-only group world clones its database from the ready template and gets nothing of
/// `backend/` (where only the db's `migrate` and `seed` would run): `backend/.venv` stays
/// deferred. One that comes to run them after all waits for the path and gets it: the
/// template went before it cloned (it builds the next one), or cloning fails (its slice is
/// made the slow way).
#[tokio::test]
async fn a_data_world_cloning_a_ready_template_gets_no_venv_and_one_that_migrates_after_all_does() {
    let h = h();
    h.fake.inner.lock().unwrap().can_clone = true;
    h.git().inner.lock().unwrap().plan =
        vec![("backend/.venv".into(), crate::spec::CopyMode::Link)];
    let mut db = cloned_from(
        resource("postgres", Some("migrate up"), Some("seed all")),
        "golden",
    );
    if let crate::spec::ServiceKind::Resource(r) = &mut db.kind {
        r.workdir = "backend".into();
    }
    let mut s = spec(vec![("db", db)]);
    s.groups.insert("data".into(), vec!["db".into()]);
    let data_world = |name: &str| {
        let mut nw = new_world(h.dir.path(), name, s.clone());
        nw.group = Some("data".into());
        h.store.put_world(&nw).unwrap().world.id
    };
    let venv = |id| -> Option<store::BootstrapState> {
        h.store
            .read(|c| store::bootstrap_paths(c, id))
            .unwrap()
            .into_iter()
            .find(|r| r.path == "backend/.venv")
            .map(|r| r.state)
    };
    let h = &h;
    let settle = |id| async move {
        for _ in 0..50 {
            h.converge(id).await;
            if h.row(id, "db")
                .is_some_and(|r| r.state == store::SliceState::Ready)
            {
                return;
            }
            // A path's task records it: let it run.
            tokio::task::yield_now().await;
        }
        panic!("{:?}", h.row(id, "db"));
    };
    // The first world builds the template (its migrate needs the venv: brought at once).
    let a = data_world("a");
    settle(a).await;
    assert_eq!(venv(a), Some(store::BootstrapState::Done));
    assert_eq!(goldens(h)[0].state, GoldenState::Ready);
    assert_eq!(h.runs(), vec!["migrate up", "seed all"]);
    // The next one clones it: no venv, nothing run.
    let b = data_world("b");
    settle(b).await;
    assert_eq!(venv(b), Some(store::BootstrapState::Deferred));
    assert_eq!(h.runs().len(), 2);
    // Planned while the template was ready; the template goes before it clones: it builds
    // the next one, once the venv is brought.
    let c = data_world("c");
    h.prepare(c).await;
    assert_eq!(venv(c), Some(store::BootstrapState::Deferred));
    h.store
        .write_fixture(|tx| {
            tx.execute("DELETE FROM goldens", [])?;
            Ok(())
        })
        .unwrap();
    settle(c).await;
    assert_eq!(venv(c), Some(store::BootstrapState::Done));
    assert_eq!(h.runs().len(), 4, "{:?}", h.runs());
    assert!(has_event(
        h,
        "c",
        "worktree",
        "bringing backend/.venv now: db builds its golden template in this world"
    ));
    // Cloning fails for the next: its slice is made the slow way, with the venv.
    {
        let mut f = h.fake.inner.lock().unwrap();
        f.clone_permanent = Some("no".into());
        f.clone_fails_into = Some(h.bk("acme_d"));
    }
    let d = data_world("d");
    h.prepare(d).await;
    assert_eq!(venv(d), Some(store::BootstrapState::Deferred));
    settle(d).await;
    assert_eq!(venv(d), Some(store::BootstrapState::Done));
    assert_eq!(h.runs().len(), 6, "{:?}", h.runs());
    assert!(has_event(
        h,
        "d",
        "worktree",
        "bringing backend/.venv now: db runs its migrate and seed in this world"
    ));
}

/// An adapter service cloned from a golden template, with `env`.
fn cloned_with_env(migrate: &str, env: &[(&str, &str)]) -> crate::spec::Service {
    let mut svc = cloned_from(resource("postgres", Some(migrate), None), "golden");
    if let crate::spec::ServiceKind::Resource(r) = &mut svc.kind {
        r.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }
    svc
}

/// Converge, bounded: a reconcile that waits for ever fails the test instead of hanging it.
async fn converge_bounded(h: &H, id: i64) {
    tokio::time::timeout(Duration::from_secs(60), h.converge(id))
        .await
        .expect("a reconcile waited for something that never came");
}

/// The world: `[defaults] env` puts `${db.…}` and `${cache.…}` in every service's
/// env, migrate's included. The template's build waits for the cache's slice (made
/// meanwhile, not after the database's) and sees its own address for `${db.…}`.
#[tokio::test]
async fn a_template_build_waits_for_the_slices_its_env_names_while_the_world_makes_them() {
    let h = h();
    h.fake.inner.lock().unwrap().can_clone = true;
    let defaults = [("DB", "${db.url}"), ("CACHE", "${cache.url}")];
    let mut cache = resource("redis", None, None);
    if let crate::spec::ServiceKind::Resource(r) = &mut cache.kind {
        r.env = defaults
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }
    let s = spec(vec![
        ("db", cloned_with_env("migrate up", &defaults)),
        ("cache", cache),
    ]);
    let a = h.up("a", s.clone());
    converge_bounded(&h, a).await;
    assert_eq!(h.slices_ready(a).status, CondStatus::True);
    let g = goldens(&h);
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].state, GoldenState::Ready);
    let runs = h.sup.inner.lock().unwrap().runs.clone();
    assert_eq!(runs.len(), 1);
    // `${db.url}` is the template being migrated; `${cache.url}` the world's cache.
    assert!(runs[0].env["DB"].ends_with(&g[0].name), "{:?}", runs[0].env);
    assert!(
        runs[0].env["CACHE"].ends_with(&h.bk("acme_a_cache")),
        "{:?}",
        runs[0].env
    );
    // A second world is a copy: nothing waits, nothing runs.
    let b = h.up("b", s);
    converge_bounded(&h, b).await;
    assert_eq!(h.slices_ready(b).status, CondStatus::True);
    assert_eq!(h.runs().len(), 1);
    remove(&h, a).await;
    remove(&h, b).await;
}

/// A world stored with golden templates whose builds need each other's slices (written
/// before `binky check` refused it) fails saying so, builds nothing, and is removed.
#[tokio::test]
async fn a_world_whose_templates_need_each_others_slices_fails_naming_the_cycle_and_is_removed() {
    let h = h();
    h.fake.inner.lock().unwrap().can_clone = true;
    let s = spec(vec![
        (
            "db",
            cloned_with_env("migrate db", &[("OTHER", "${db2.url}")]),
        ),
        (
            "db2",
            cloned_with_env("migrate db2", &[("OTHER", "${db.url}")]),
        ),
    ]);
    let a = h.up("a", s);
    converge_bounded(&h, a).await;
    let c = condition(&h.store, a, Kind::Golden.condition());
    assert_eq!(
        (c.status, c.reason.as_str()),
        (CondStatus::False, "DependencyCycle"),
        "{c:?}"
    );
    assert!(
        c.stalled
            && c.message
                .contains("`db` (env OTHER = ${db2.url}) → `db2` (env OTHER = ${db.url}) → `db`")
            && c.message.contains("remove clone_from from one of"),
        "{}",
        c.message
    );
    assert!(
        goldens(&h).is_empty(),
        "a build was claimed that can never run"
    );
    assert!(h.runs().is_empty());
    tokio::time::timeout(Duration::from_secs(60), remove(&h, a))
        .await
        .expect("the removal waited");
}

/// The world a build was claimed for goes while the build waits (for a path to be
/// brought): a world that wants the same template builds it, not waits for ever.
#[tokio::test]
async fn a_build_claimed_for_a_world_that_went_is_built_by_the_next_world_that_wants_it() {
    let h = h();
    h.fake.inner.lock().unwrap().can_clone = true;
    let gate = Arc::new(tokio::sync::Notify::new());
    {
        let mut g = h.git().inner.lock().unwrap();
        g.plan = vec![(".venv".into(), crate::spec::CopyMode::Link)];
        g.bring_gate = Some(("a".into(), ".venv".into(), gate.clone()));
    }
    let a = h.up("a", cloning());
    h.prepare(a).await;
    converge_bounded(&h, a).await;
    assert_eq!(goldens(&h)[0].state, GoldenState::Building);
    assert_eq!(goldens(&h)[0].owner_world, Some(a));
    let b = h.up("b", cloning());
    converge_bounded(&h, b).await;
    assert!(h.runs().is_empty());
    h.store.mark_deleted(a, false).unwrap();
    gate.notify_one();
    converge_bounded(&h, a).await;
    assert!(world(&h.store, a).is_none(), "a was not removed");
    converge_bounded(&h, b).await;
    let g = goldens(&h);
    assert_eq!(
        (g.len(), g[0].state, g[0].owner_world),
        (1, GoldenState::Ready, Some(b)),
        "{g:?}"
    );
    assert_eq!(h.runs(), vec!["migrate up", "seed all"]);
    assert_eq!(h.slices_ready(b).status, CondStatus::True);
    assert!(has_event(&h, "b", "golden", "building golden template"));
}

/// A build claimed under one key whose world moved to another (its files changed while it
/// waited) is dropped, not left `building` for ever.
#[tokio::test]
async fn a_build_whose_world_moved_to_another_key_is_dropped() {
    let h = h();
    h.fake.inner.lock().unwrap().can_clone = true;
    let gate = Arc::new(tokio::sync::Notify::new());
    {
        let mut g = h.git().inner.lock().unwrap();
        g.plan = vec![(".venv".into(), crate::spec::CopyMode::Link)];
        g.bring_gate = Some(("a".into(), ".venv".into(), gate.clone()));
    }
    let a = world_with(&h, "a", cloning(), ONE).await;
    let first = goldens(&h);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].state, GoldenState::Building);
    files(&h, "a", TWO);
    converge_bounded(&h, a).await;
    let now = goldens(&h);
    assert_eq!(now.len(), 1, "the build left behind stays: {now:?}");
    assert_ne!(now[0].key, first[0].key);
    gate.notify_one();
    for _ in 0..20 {
        converge_bounded(&h, a).await;
        if h.slices_ready(a).status == CondStatus::True {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(h.slices_ready(a).status, CondStatus::True);
    assert_eq!(goldens(&h)[0].state, GoldenState::Ready);
    remove(&h, a).await;
}
