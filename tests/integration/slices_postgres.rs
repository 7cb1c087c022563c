//! Worlds with a PostgreSQL slice, end to end through the real binary: their own database
//! and role, migrate and seed once, isolation, waiting for a server, managed servers.

use std::time::Duration;

use crate::harness::*;
use crate::pg_server::{pg_bin_dir, psql, PgServer};

fn config(migrate: &str) -> String {
    format!(
        r#"
[project]
name = "shop"
{{range}}

[services.db]
adapter = "postgres"
admin_url = "${{env.PG_ADMIN}}"
migrate = "{migrate}"
seed = "psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -q -c \"insert into notes values ('${{worktree}}')\""

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["db"]
env = {{ DATABASE_URL = "${{db.url}}" }}
"#
    )
}

const GOOD_MIGRATE: &str = "psql \\\"$DATABASE_URL\\\" -v ON_ERROR_STOP=1 -q -c 'create table if not exists notes (body text)'";

fn db_url(env: &Env, world: &str) -> String {
    env.env_of(world)["DB_URL"].as_str().unwrap().to_owned()
}

#[test]
fn two_worlds_get_their_own_migrated_and_seeded_database_and_remove_drops_only_its_own() {
    let pg = PgServer::start();
    let env = Env::new(&config(GOOD_MIGRATE));
    let vars = [("PG_ADMIN", pg.admin_url.as_str())];
    for w in ["a", "b"] {
        let out = env.binky_env(&["up", w], &vars);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let (a, b) = (db_url(&env, "a"), db_url(&env, "b"));
    assert_ne!(a, b);
    assert!(
        !a.contains(&pg.password),
        "the admin password reached a world"
    );
    // Each world's seed ran once, in its own database.
    assert_eq!(
        pg.query(&a, "select body from notes"),
        vec![vec!["a".to_owned()]]
    );
    assert_eq!(
        pg.query(&b, "select body from notes"),
        vec![vec!["b".to_owned()]]
    );
    // The service got its slice's address.
    assert_eq!(
        served_env(env.port_of("a", "api"))["DATABASE_URL"],
        a.as_str()
    );
    // What a writes, b never sees; a's credentials are refused on b's database.
    pg.query(&a, "insert into notes values ('only in a')");
    assert_eq!(
        pg.query(&b, "select count(*) from notes"),
        vec![vec!["1".to_owned()]]
    );
    let b_db = b.rsplit('/').next().unwrap();
    let a_on_b = format!("{}/{b_db}", a.rsplit_once('/').unwrap().0);
    let err = pg.try_query(&a_on_b, "select 1").unwrap_err();
    assert!(err.contains("permission denied"), "{err}");
    // Up again: seed does not run twice.
    let out = env.binky_env(&["up", "a"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        pg.query(&a, "select count(*) from notes"),
        vec![vec!["2".to_owned()]]
    );
    let status = env.ok(&["status", "a"]);
    assert!(
        status.contains("db") && status.contains("ready"),
        "{status}"
    );
    assert!(!status.contains(&pg.password), "{status}");

    env.ok(&["remove", "a"]);
    let dbs = pg.slice_databases();
    assert_eq!(
        dbs,
        vec![b_db.to_owned()],
        "remove dropped the wrong databases"
    );
    assert_eq!(pg.slice_roles().len(), 1);
    env.ok(&["remove", "b"]);
    pg.assert_no_slices();
    env.assert_nothing_left(&["a", "b"]);
}

#[test]
fn a_failing_migrate_fails_the_world_with_its_output_and_touches_no_other_world() {
    let pg = PgServer::start();
    let env = Env::new(&config(GOOD_MIGRATE));
    let vars = [("PG_ADMIN", pg.admin_url.as_str())];
    let out = env.binky_env(&["up", "good"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    // A branch whose migrate is broken.
    env.git(&["checkout", "-q", "-b", "bad"]);
    env.write_config(&config(
        "psql \\\"$DATABASE_URL\\\" -v ON_ERROR_STOP=1 -q -c 'create tabel oops (x int)'",
    ));
    env.git(&["commit", "-qam", "broken migrate"]);
    env.git(&["checkout", "-q", "main"]);
    let out = env.binky_env(&["up", "bad"], &vars);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("migrate") && err.contains("syntax error"),
        "{err}"
    );
    assert!(
        env.pid_of("bad", "api").is_none(),
        "api started on a failed migrate"
    );
    let good = db_url(&env, "good");
    assert_eq!(
        pg.query(&good, "select body from notes"),
        vec![vec!["good".to_owned()]]
    );
    env.ok(&["remove", "bad"]);
    env.ok(&["remove", "good"]);
    pg.assert_no_slices();
    env.assert_nothing_left(&["good", "bad"]);
}

/// `binky remove` returns once the world's processes, ports, worktree and branch are gone and
/// leaves the drop of its database to the daemon (a `DROP DATABASE` takes about a second on
/// a server that syncs to disk). With the server away it says the drop is still to come;
/// `binky up` of the name meanwhile waits until the drop is done, and the new world gets a
/// new database, never the removed one's data.
#[test]
fn remove_leaves_the_drop_to_the_daemon_and_the_name_made_again_waits_for_it() {
    let pg = PgServer::start();
    let env = Env::new(&config(GOOD_MIGRATE));
    let vars = [("PG_ADMIN", pg.admin_url.as_str())];
    let out = env.binky_env(&["up", "w"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    let url = db_url(&env, "w");
    pg.query(&url, "insert into notes values ('of the removed world')");
    signal(pg.pid, 19); // SIGSTOP: the server is away, its connections hang
    let out = env.raw_in(&env.repo, &["remove", "w"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stdout(&out);
    let slice = env.slice_name("shop", "w", "db");
    assert!(
        said.contains("w removed in")
            && said.contains(&format!("dropping {slice} in the background")),
        "{said}"
    );
    assert!(
        !env.worktree("w").exists(),
        "the worktree is removed at once"
    );
    let status = env.ok(&["status"]);
    assert!(status.contains("removing"), "{status}");
    // The name again, while the old database is still there: `up` waits for its drop.
    let log = env.dir.path().join("up-again.log");
    let mut again = std::process::Command::new(binky_bin())
        .args(["up", "w", "--timeout", "90s"])
        .current_dir(&env.repo)
        .env("BINKY_HOME", &env.home)
        .env("PG_ADMIN", &pg.admin_url)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    wait_until(
        "up says it waits for the removal",
        Duration::from_secs(30),
        || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains(&format!(
                    "waiting for the removed world w to be gone first (dropping {slice})"
                ))
        },
    );
    assert!(again.try_wait().unwrap().is_none(), "up did not wait");
    signal(pg.pid, 18); // SIGCONT: the server is back, the daemon drops the old database
    let done = again.wait().unwrap();
    assert!(
        done.success(),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_eq!(
        pg.query(&db_url(&env, "w"), "select body from notes"),
        vec![vec!["w".to_owned()]],
        "the new world sees the removed one's data"
    );
    env.ok(&["remove", "w"]);
    pg.assert_no_slices();
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_world_waits_for_a_server_that_does_not_answer_and_comes_up_by_itself() {
    let pg = PgServer::start();
    let env = Env::new(&config(GOOD_MIGRATE));
    let vars = [("PG_ADMIN", pg.admin_url.as_str())];
    signal(pg.pid, 19); // SIGSTOP: connections hang, as with a server that is away
    let out = env.binky_env(&["up", "w", "--no-wait"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_until(
        "the world waits for its server",
        Duration::from_secs(30),
        || {
            let s = env.ok(&["status", "w"]);
            s.contains("ServerUnavailable") && s.contains(&format!("127.0.0.1:{}", pg.port))
        },
    );
    assert!(!env.ok(&["status", "w"]).contains(&pg.password));
    signal(pg.pid, 18); // SIGCONT: the server is back
    let out = env.binky_env(&["up", "w", "--timeout", "90s"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        pg.query(&db_url(&env, "w"), "select body from notes"),
        vec![vec!["w".to_owned()]]
    );
    env.ok(&["remove", "w"]);
    pg.assert_no_slices();
    env.assert_nothing_left(&["w"]);
}

#[test]
fn without_admin_url_binky_runs_a_postgres_of_its_own_and_keeps_it() {
    let env = Env::new(&format!(
        r#"
[project]
name = "managed"
{{range}}

[services.db]
adapter = "postgres"
migrate = "{GOOD_MIGRATE}"

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["db"]
"#
    ));
    env.ok(&["up", "w"]);
    let bin = pg_bin_dir().expect("postgresql installed (./scripts/test installs it)");
    let url = db_url(&env, "w");
    psql(&bin, &url, "insert into notes values ('kept')").unwrap();
    let servers = env.ok(&["servers"]);
    assert!(
        servers.contains("postgres") && servers.contains("running"),
        "{servers}"
    );
    // Stopped, then started again by the next world that needs it: same address, data kept.
    let out = env.ok(&["servers", "stop"]);
    assert!(out.contains("stopped postgres"), "{out}");
    assert!(
        psql(&bin, &url, "select 1").is_err(),
        "still answering after stop"
    );
    env.ok(&["up", "w2"]);
    assert_eq!(
        psql(&bin, &url, "select body from notes").unwrap(),
        vec![vec!["kept".to_owned()]]
    );
    env.ok(&["remove", "w"]);
    env.ok(&["remove", "w2"]);
    // No slice is left on the managed server.
    assert!(
        !env.ok(&["gc"]).contains("bk_"),
        "orphaned slices after remove"
    );
    env.assert_nothing_left(&["w", "w2"]);
}

#[test]
fn gc_finds_slices_that_belong_to_no_world_and_drops_only_those() {
    use binky::adapters::{postgres::Postgres, Adapter, Slice};
    let pg = PgServer::start();
    let env = Env::new(&config(GOOD_MIGRATE));
    let vars = [("PG_ADMIN", pg.admin_url.as_str())];
    let out = env.binky_env(&["up", "w"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    // A slice this home left behind (a crash between making it and recording it): on the
    // server, marked as this home's, in no world.
    let orphan = Slice {
        name: "bk_gone_world_db".into(),
        secret: "x".into(),
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            Postgres.provision(&orphan, &pg.cfg()).await?;
            Postgres.claim(&orphan, &pg.cfg(), &env.home_id()).await
        })
        .unwrap();
    // A world the daemon has not provisioned yet (held for approval) whose slice already
    // stands on the server, as it does for a moment while the slice controller creates it:
    // it belongs to a world, gc never lists it.
    env.ok(&["settings", "approvals=true"]);
    let held = env.binky_env(&["up", "w2", "--no-wait"], &vars);
    assert!(held.status.success(), "{}", stderr(&held));
    let coming = Slice {
        name: env.slice_name("shop", "w2", "db"),
        secret: "x".into(),
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(Postgres.provision(&coming, &pg.cfg()))
        .unwrap();
    // Shared servers named by admin_url are searched only when asked.
    assert!(env.ok(&["gc"]).contains("no orphaned slices"));
    let listed = env.ok(&["gc", "--all-servers"]);
    assert!(
        listed.contains("bk_gone_world_db") && listed.contains("--yes"),
        "{listed}"
    );
    assert!(!listed.contains(&coming.name), "{listed}");
    assert!(!listed.contains(&pg.password), "{listed}");
    assert!(
        pg.slice_databases()
            .contains(&"bk_gone_world_db".to_owned()),
        "dropped without --yes"
    );
    let out = env.ok(&["gc", "--all-servers", "--yes"]);
    assert!(out.contains("dropped bk_gone_world_db"), "{out}");
    let left = pg.slice_databases();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(!left.contains(&"bk_gone_world_db".to_owned()));
    assert!(left.contains(&coming.name), "{left:?}");
    // The world's own slice is untouched.
    assert_eq!(
        pg.query(&db_url(&env, "w"), "select body from notes"),
        vec![vec!["w".to_owned()]]
    );
    env.ok(&["remove", "w"]);
    // w2 never got its slice recorded: drop the stand-in by hand, then nothing is left.
    env.ok(&["remove", "w2", "--force"]);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(Postgres.teardown(&coming, &pg.cfg()))
        .unwrap();
    pg.assert_no_slices();
    env.assert_nothing_left(&["w", "w2"]);
}

#[test]
fn binky_db_admin_url_names_the_server_for_a_postgres_without_admin_url_as_in_binky_012() {
    let pg = PgServer::start();
    let env = Env::new(&format!(
        r#"
[project]
name = "envpg"
{{range}}

[services.db]
adapter = "postgres"
migrate = "{GOOD_MIGRATE}"
"#
    ));
    // The daemon is started by this `up`, so it carries the variable, as 0.1.2's did.
    let out = env.binky_env(
        &["up", "w"],
        &[("BINKY_DB_ADMIN_URL", pg.admin_url.as_str())],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let url = db_url(&env, "w");
    assert!(
        pg.try_query(&url, "select count(*) from notes").is_ok(),
        "{url} is not on the named server"
    );
    assert_eq!(pg.slice_databases().len(), 1, "{:?}", pg.slice_databases());
    let servers = env.ok(&["servers"]);
    assert!(
        !servers.contains("running"),
        "a managed server was started although BINKY_DB_ADMIN_URL named one:\n{servers}"
    );
    env.ok(&["remove", "w"]);
    pg.assert_no_slices();
    env.assert_nothing_left(&["w"]);
}
