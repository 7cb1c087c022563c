//! The URLs binky hands out work with the clients applications use, as they are: each
//! client below connects with `${svc.url}` (or the parts) of a world's PostgreSQL, Redis and
//! MariaDB slices, run by binky itself, through `binky exec`. docs/adapters.md's table of
//! clients is this test's list.

use std::path::PathBuf;

use crate::harness::*;

fn frameworks() -> PathBuf {
    test_cache(
        "BINKY_TEST_FRAMEWORKS",
        "frameworks",
        &["bin/python", "bin/celery"],
    )
}

fn node_clients() -> PathBuf {
    test_cache(
        "BINKY_TEST_NODE_CLIENTS",
        "node-clients",
        &[
            "node_modules/redis",
            "node_modules/ioredis",
            "node_modules/pg",
            "node_modules/mysql2",
        ],
    )
}

#[test]
fn every_listed_client_connects_with_the_urls_binky_hands_out() {
    let py = frameworks().join("bin/python");
    let node_path = node_clients().join("node_modules");
    let pg =
        crate::pg_server::pg_bin_dir().expect("postgresql installed (./scripts/test installs it)");
    let mariadb = crate::mariadb_server::require_mariadb().client;
    let env = Env::new(
        r#"
[project]
name = "clients"
{range}

[services.db]
adapter = "postgres"

[services.cache]
adapter = "redis"

[services.my]
adapter = "mariadb"

[services.api]
cmd = "exec python3 server.py ${self.port}"
url = true
depends_on = ["db", "cache", "my"]
env = { DATABASE_URL = "${db.url}", REDIS_URL = "${cache.url}", MYSQL_URL = "${my.url}", MY_HOST = "${my.host}", MY_PORT = "${my.port}", MY_USER = "${my.user}", MY_PASSWORD = "${my.password}", MY_NAME = "${my.name}" }
"#,
    );
    env.ok(&["up", "w"]);
    let node = |script: &str| format!("node -e \"{}\"", script.replace('"', "\\\""));
    let clients: Vec<(&str, String, &str)> = vec![
        (
            "redis-cli 7 (-u)",
            "redis-cli -u \"$REDIS_URL\" PING".into(),
            "PONG",
        ),
        (
            "redis-py 5",
            format!("'{}' -c \"import os, redis; print(redis.from_url(os.environ['REDIS_URL']).ping())\"", py.display()),
            "True",
        ),
        (
            "kombu 5 (Celery's broker URL)",
            format!("'{}' -c \"import os, kombu; c = kombu.Connection(os.environ['REDIS_URL']); c.connect(); print(c.connected)\"", py.display()),
            "True",
        ),
        (
            "node-redis 5",
            node("const r = require('redis').createClient({url: process.env.REDIS_URL}); r.connect().then(() => r.ping()).then(p => { console.log(p); return r.quit(); })"),
            "PONG",
        ),
        (
            "ioredis 5",
            node("const R = require('ioredis'); const r = new R(process.env.REDIS_URL); r.ping().then(p => { console.log(p); r.disconnect(); })"),
            "PONG",
        ),
        (
            "psql 15",
            format!("'{}' \"$DATABASE_URL\" -qAt -c 'select 41 + 1'", pg.join("psql").display()),
            "42",
        ),
        (
            "psycopg2 2.9",
            format!("'{}' -c \"import os, psycopg2; c = psycopg2.connect(os.environ['DATABASE_URL']).cursor(); c.execute('select 42'); print(c.fetchone()[0])\"", py.display()),
            "42",
        ),
        (
            "SQLAlchemy 2 (create_engine, psycopg 3)",
            format!("'{}' -c \"import os, sqlalchemy as s; print(s.create_engine(os.environ['DATABASE_URL']).connect().execute(s.text('select 42')).scalar())\"", py.display()),
            "42",
        ),
        (
            "node-postgres 8",
            node("const {Client} = require('pg'); const c = new Client({connectionString: process.env.DATABASE_URL}); c.connect().then(() => c.query('select 42 as n')).then(r => { console.log(r.rows[0].n); return c.end(); })"),
            "42",
        ),
        (
            "mysql2 3 (Node)",
            node("require('mysql2/promise').createConnection(process.env.MYSQL_URL).then(c => c.query('select 42 as n').then(([rows]) => { console.log(rows[0].n); return c.end(); }))"),
            "42",
        ),
        (
            "mariadb client 10.11 (by parts)",
            format!("MYSQL_PWD=\"$MY_PASSWORD\" '{}' --no-defaults --protocol=TCP -h \"$MY_HOST\" -P \"$MY_PORT\" -u \"$MY_USER\" -N -B \"$MY_NAME\" -e 'select 42'", mariadb.display()),
            "42",
        ),
    ];
    let node_path = node_path.display().to_string();
    let mut failed = Vec::new();
    for (client, script, want) in &clients {
        let out = env.binky_env(
            &["exec", "w", "-s", "api", "--", "sh", "-c", script],
            &[("NODE_PATH", node_path.as_str())],
        );
        let got = stdout(&out);
        if !out.status.success() || got.trim() != *want {
            failed.push(format!(
                "{client}: exit {:?}, got {got:?}, stderr: {}",
                out.status.code(),
                stderr(&out)
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
