//! An adapter by any of its names is one adapter: `postgresql` and `valkey@8` take their
//! server from binky 0.1.2's variables exactly as `postgres` and `redis` do, end to end
//! through the real binary and real servers.

use crate::harness::*;
use crate::pg_server::PgServer;
use crate::redis_server::{connect, run, RedisServer};

#[test]
fn every_name_of_an_adapter_takes_its_server_from_binky_012s_variable_and_starts_none() {
    let pg = PgServer::start();
    let redis = RedisServer::start();
    let env = Env::new(&format!(
        r#"
[project]
name = "aliases"
{{range}}

[services.db]
adapter = "postgresql"

[services.cache]
adapter = "valkey@8"

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["db", "cache"]
env = {{ DATABASE_URL = "${{db.url}}", REDIS_URL = "${{cache.url}}" }}
"#
    ));
    // The daemon is started by this `up`, so it carries the variables, as 0.1.2's did.
    let out = env.binky_env(
        &["up", "w"],
        &[
            ("BINKY_DB_ADMIN_URL", pg.admin_url.as_str()),
            ("BINKY_REDIS_URL", redis.admin_url.as_str()),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let served = served_env(env.port_of("w", "api"));

    // The database is made on the named PostgreSQL.
    let db_url = served["DATABASE_URL"].as_str().expect("DATABASE_URL");
    assert!(
        pg.try_query(db_url, "select 1").is_ok(),
        "{db_url} is not on the server BINKY_DB_ADMIN_URL names"
    );
    assert_eq!(pg.slice_databases().len(), 1, "{:?}", pg.slice_databases());

    // The Redis slice is a database of the named server, not a server of the world's own.
    let redis_url = served["REDIS_URL"].as_str().expect("REDIS_URL");
    let db: i64 = redis_url
        .rsplit('/')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no database in {redis_url}"));
    assert!(db >= 1, "{redis_url}");
    run(&mut connect(redis_url), &["SET", "k", "v"]).expect("SET");
    assert_eq!(
        redis.keys_in(db, "k").len(),
        1,
        "{redis_url} is not on the server BINKY_REDIS_URL names"
    );

    let servers = env.ok(&["servers"]);
    assert!(
        !servers.contains("running"),
        "a managed server was started although the variables named servers:\n{servers}"
    );
    assert!(env.our_servers().is_empty(), "{:?}", env.our_servers());

    env.ok(&["remove", "w"]);
    pg.assert_no_slices();
    assert!(redis.keys_in(db, "*").is_empty());
    env.assert_nothing_left(&["w"]);
}

#[test]
fn gc_searches_a_server_once_whichever_of_its_adapters_names_the_worlds_gave() {
    use binky::adapters::{postgres::Postgres, Adapter, Slice};
    let pg = PgServer::start();
    let config = |adapter: &str| {
        format!(
            "[project]\nname = \"names\"\n{{range}}\n\n[services.db]\nadapter = \"{adapter}\"\nadmin_url = \"${{env.PG_ADMIN}}\"\n"
        )
    };
    let env = Env::new(&config("postgres"));
    let vars = [("PG_ADMIN", pg.admin_url.as_str())];
    let out = env.binky_env(&["up", "a"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    // Another world of the project names the same server's adapter by its other name.
    env.write_config(&config("postgresql@15"));
    binky_testkit::git::commit_all(&env.repo, "the adapter's other name");
    let out = env.binky_env(&["up", "b"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(pg.slice_databases().len(), 2, "{:?}", pg.slice_databases());

    // A slice this home left behind on that server, in no world.
    let orphan = Slice {
        name: "bk_gone_world_db".into(),
        secret: "x".into(),
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(async {
            Postgres.provision(&orphan, &pg.cfg()).await?;
            Postgres.claim(&orphan, &pg.cfg(), &env.home_id()).await
        })
        .expect("the orphan");
    let listed = env.ok(&["gc", "--all-servers"]);
    assert_eq!(
        listed.matches("bk_gone_world_db").count(),
        1,
        "the server was searched once per name of its adapter:\n{listed}"
    );
    let out = env.ok(&["gc", "--all-servers", "--yes"]);
    assert_eq!(out.matches("dropped bk_gone_world_db").count(), 1, "{out}");
    assert!(!pg
        .slice_databases()
        .contains(&"bk_gone_world_db".to_owned()));

    env.ok(&["remove", "a"]);
    env.ok(&["remove", "b"]);
    pg.assert_no_slices();
    env.assert_nothing_left(&["a", "b"]);
}

/// `postgresql` and `postgres` are one adapter to the controllers too: a world whose
/// binky.toml says `postgresql` and one made after it was changed to `postgres` clone one
/// golden template, and the first world's slice is kept as it is (its data stays).
#[test]
fn two_spellings_of_one_adapter_share_one_golden_template_and_keep_the_slice() {
    let pg = PgServer::start();
    let config = |adapter: &str| {
        format!(
            r#"
[project]
name = "spellings"
{{range}}

[services.db]
adapter = "{adapter}"
clone_from = "golden"
migrate = "true"
"#
        )
    };
    let env = Env::new(&config("postgresql"));
    let vars = [("BINKY_DB_ADMIN_URL", pg.admin_url.as_str())];
    let out = env.binky_env(&["up", "w1"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    let w1_url = env.env_of("w1")["DB_URL"].as_str().unwrap().to_owned();
    pg.try_query(&w1_url, "create table kept (x int)")
        .expect("a table in w1's database");

    let templates = || -> Vec<String> {
        pg.slice_databases()
            .into_iter()
            .filter(|d| d.starts_with("bk_golden_") && !d.ends_with("_migrated"))
            .collect()
    };
    let first = templates();
    assert_eq!(first.len(), 1, "{first:?}");

    // w2's branch is made from a commit whose binky.toml says `postgres`.
    env.write_config(&config("postgres"));
    binky_testkit::git::commit_all(&env.repo, "the adapter's other name");
    let out = env.binky_env(&["up", "w2"], &vars);
    assert!(out.status.success(), "w2: {}", stderr(&out));
    assert_eq!(
        templates(),
        first,
        "w2 was given another template than w1's, for the same adapter written another way"
    );
    assert!(
        pg.try_query(&w1_url, "select count(*) from kept").is_ok(),
        "w1's table is gone after its adapter was written another way"
    );
}
