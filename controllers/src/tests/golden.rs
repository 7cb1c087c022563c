//! Golden templates and what cloning from them comes to: a copy, a fallback to migrate and
//! seed, or a wait.

use crate::registry::Kind;
use crate::spec::Spec;
use crate::store::GoldenState;
use crate::store::{self, CondStatus, GoldenRow};
use crate::testing::*;

use super::slice::{h, H};

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
    assert_eq!(h.fake.calls("provision"), vec![template.clone()]);
    assert_eq!(h.fake.calls("seal"), vec![template.clone()]);
    assert_eq!(h.runs(), vec!["migrate up", "seed all"]);
    let b = h.up("b", cloning());
    h.converge(b).await;
    assert_eq!(
        h.fake.calls("clone"),
        vec![
            format!("{template} -> bk_acme_a_db"),
            format!("{template} -> bk_acme_b_db"),
        ]
    );
    assert_eq!(
        h.runs(),
        vec!["migrate up", "seed all"],
        "a world migrated or seeded its own copy"
    );
    assert_eq!(
        h.fake.calls("provision"),
        vec![template.clone()],
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
        vec!["bk_acme_a_db", "bk_acme_b_db"]
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
    }
    let a = h.up("a", cloning());
    h.converge(a).await;
    let template = goldens(&h)[0].name.clone();
    assert_eq!(
        h.fake.calls("clone").len(),
        1,
        "a refused clone was retried"
    );
    // The template's build, then the world's own slice the slow way.
    assert_eq!(
        h.fake.calls("provision"),
        vec![template.clone(), "bk_acme_a_db".into()]
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
    assert_eq!(h.fake.calls("clone").len(), 2);
    assert_eq!(h.runs(), vec!["migrate up", "seed all"]);
    assert!(!has_event(&h, "a", "clone_fallback", ""));
    assert_eq!(h.slices_ready(a).status, CondStatus::True);
}

#[tokio::test]
async fn a_service_that_stops_cloning_loses_its_reference_and_the_unused_template_goes() {
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
    assert!(goldens(&h).is_empty(), "a template no world uses was kept");
    assert!(h.fake.calls("teardown").contains(&template));
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
