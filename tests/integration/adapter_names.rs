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
