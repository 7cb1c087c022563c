//! The URLs binky hands out work with the clients applications use, as they are: each
//! client below connects with `${svc.url}` (or the parts) of a world's PostgreSQL, Redis and
//! MariaDB slices, run by binky itself, and of Redis slices of a shared server (a database
//! each, a key prefix each), through `binky exec`. docs/adapters.md's table of clients is
//! this test's list: every client it names for a row is one a test here tries
//! ([`TRIED`], checked against the table and against each test's own list).

use std::path::PathBuf;

use crate::harness::*;
use crate::redis_server::RedisServer;

/// The rows of docs/adapters.md's table of clients, and the clients the tests below try
/// for each (as the table names them, up to any ` (…)` after the name).
const TRIED: &[(&str, &[&str])] = &[
    (
        "postgres",
        &[
            "psql 15",
            "psycopg2 2.9",
            "SQLAlchemy 2.1 `create_engine`",
            "node-postgres 8",
        ],
    ),
    ("redis: a server per world", REDIS_CLIENTS),
    ("redis: `database`", REDIS_CLIENTS),
    ("redis: `prefix`", REDIS_CLIENTS),
    (
        "mysql (MariaDB 10.11)",
        &["mysql2 3", "the mariadb client 10.11 by parts"],
    ),
];

const REDIS_CLIENTS: &[&str] = &[
    "redis-cli 7.0",
    "redis-py 5",
    "kombu 5",
    "node-redis 5",
    "ioredis 5",
];

/// A client's name as the table writes it, without what follows in parentheses.
fn client_name(item: &str) -> &str {
    item.split(" (").next().unwrap_or(item).trim()
}

/// `(row, clients)` of docs/adapters.md's table of clients; a client's own parentheses
/// may hold commas.
fn doc_table() -> Vec<(String, Vec<String>)> {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/adapters.md"),
    )
    .unwrap();
    let start = doc
        .find("| adapter | clients |")
        .expect("the table of clients");
    let mut rows = Vec::new();
    for line in doc[start..].lines().skip(2) {
        if !line.starts_with('|') {
            break;
        }
        let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
        let (row, clients) = inner.split_once(" | ").expect("two cells");
        let mut items = Vec::new();
        let (mut depth, mut from) = (0i32, 0usize);
        let bytes = clients.as_bytes();
        for (i, c) in clients.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 0 && bytes.get(i + 1) == Some(&b' ') => {
                    items.push(client_name(&clients[from..i]).to_owned());
                    from = i + 2;
                }
                _ => {}
            }
        }
        items.push(client_name(&clients[from..]).to_owned());
        rows.push((row.trim().to_owned(), items));
    }
    rows
}

/// Every client docs/adapters.md lists, for every row, is one the tests here try, and
/// every row the tests try is in the table.
#[test]
fn every_client_the_table_lists_is_one_a_test_tries() {
    let table = doc_table();
    for (row, clients) in &table {
        let tried = TRIED
            .iter()
            .find(|(r, _)| r == row)
            .unwrap_or_else(|| panic!("docs/adapters.md lists `{row}`, which no test tries"))
            .1;
        for c in clients {
            assert!(
                tried.contains(&c.as_str()),
                "docs/adapters.md lists {c} for {row}, which no test tries (tried: {tried:?})"
            );
        }
    }
    for (row, tried) in TRIED {
        let listed = &table
            .iter()
            .find(|(r, _)| r == row)
            .unwrap_or_else(|| panic!("`{row}` is tried but not in docs/adapters.md"))
            .1;
        assert_eq!(
            listed.len(),
            tried.len(),
            "{row}: the table lists {listed:?}"
        );
    }
}

/// `clients` are exactly what [`TRIED`] says of `row`.
fn assert_tried(row: &str, clients: &[&str]) {
    let tried = TRIED.iter().find(|(r, _)| *r == row).unwrap().1;
    let names: Vec<&str> = clients.iter().map(|c| client_name(c)).collect();
    assert_eq!(names, tried, "{row}");
}

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
            "redis-cli 7.0 (-u)",
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
            "SQLAlchemy 2.1 `create_engine` (psycopg 3)",
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
            "the mariadb client 10.11 by parts",
            format!("MYSQL_PWD=\"$MY_PASSWORD\" '{}' --no-defaults --protocol=TCP -h \"$MY_HOST\" -P \"$MY_PORT\" -u \"$MY_USER\" -N -B \"$MY_NAME\" -e 'select 42'", mariadb.display()),
            "42",
        ),
    ];
    let names: Vec<&str> = clients.iter().map(|c| c.0).collect();
    assert_tried("redis: a server per world", &names[..5]);
    assert_tried("postgres", &names[5..9]);
    assert_tried("mysql (MariaDB 10.11)", &names[9..]);
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

/// A Redis client's script for the URL in `$U`: it writes `$K` (under the prefix in `$P`,
/// empty but in prefix mode) as `42` and reads it back, printing what it read. In prefix
/// mode, kombu and ioredis are given the prefix as their option (docs/adapters.md).
fn redis_scripts(py: &std::path::Path, prefix_mode: bool) -> Vec<(&'static str, String)> {
    let node = |script: &str| format!("node -e \"{}\"", script.replace('"', "\\\""));
    let kombu_opts = if prefix_mode {
        "{'global_keyprefix': os.environ['P']}"
    } else {
        "{}"
    };
    let ioredis_opts = if prefix_mode {
        "{keyPrefix: process.env.P}"
    } else {
        "{}"
    };
    vec![
        (
            "redis-cli 7.0 (-u)",
            "redis-cli -u \"$U\" SET \"$P$K\" 42 >/dev/null && redis-cli -u \"$U\" GET \"$P$K\"".into(),
        ),
        (
            "redis-py 5",
            format!("'{}' -c \"import os, redis; r = redis.from_url(os.environ['U']); k = os.environ['P'] + os.environ['K']; r.set(k, 42); print(r.get(k).decode())\"", py.display()),
        ),
        (
            "kombu 5 (Celery's broker URL)",
            format!("'{}' -c \"import os, kombu\nwith kombu.Connection(os.environ['U'], transport_options={kombu_opts}) as c:\n    q = c.SimpleQueue(os.environ['K'])\n    q.put('42')\n    m = q.get(timeout=10)\n    m.ack()\n    print(m.payload)\n    q.close()\"", py.display()),
        ),
        (
            "node-redis 5",
            node("const r = require('redis').createClient({url: process.env.U}); const k = process.env.P + process.env.K; r.connect().then(() => r.set(k, '42')).then(() => r.get(k)).then(v => { console.log(v); return r.quit(); })"),
        ),
        (
            "ioredis 5",
            node(&format!("const R = require('ioredis'); const r = new R(process.env.U, {ioredis_opts}); r.set(process.env.K, '42').then(() => r.get(process.env.K)).then(v => {{ console.log(v); r.disconnect(); }})")),
        ),
    ]
}

/// The same Redis clients on the slices of a shared server (an `admin_url`): a database
/// each (`redis://<slice>:<secret>@host:port/N`) and a key prefix each
/// (`${svc.prefix}`). Each client's key lands where the slice is: in database N, or under
/// the prefix, and nowhere else.
#[test]
fn every_listed_redis_client_connects_to_a_database_slice_and_a_prefix_slice() {
    let py = frameworks().join("bin/python");
    let node_path = node_clients().join("node_modules").display().to_string();
    let server = RedisServer::start();
    let env = Env::new(
        r#"
[project]
name = "redisclients"
{range}

[services.bydb]
adapter = "redis"
admin_url = "${env.REDIS_ADMIN}"

[services.byprefix]
adapter = "redis"
admin_url = "${env.REDIS_ADMIN}"
options = { isolation = "prefix" }

[services.api]
cmd = "exec python3 server.py ${self.port}"
url = true
depends_on = ["bydb", "byprefix"]
env = { DB_URL = "${bydb.url}", DB_N = "${bydb.db}", PX_URL = "${byprefix.url}", PX = "${byprefix.prefix}" }
"#,
    );
    let admin = [("REDIS_ADMIN", server.admin_url.as_str())];
    let out = env.binky_env(&["up", "w"], &admin);
    assert!(out.status.success(), "{}", stderr(&out));
    let vars = served_env(env.port_of("w", "api"));
    let db: i64 = vars["DB_N"].as_str().unwrap().parse().unwrap();
    assert!(db > 0, "{vars}");
    let prefix = vars["PX"].as_str().unwrap().to_owned();
    assert!(prefix.ends_with(':'), "{vars}");
    let mut failed = Vec::new();
    for (mode, url_var, prefix_mode) in [("database", "DB_URL", false), ("prefix", "PX_URL", true)]
    {
        let clients = redis_scripts(&py, prefix_mode);
        let names: Vec<&str> = clients.iter().map(|c| c.0).collect();
        assert_tried(&format!("redis: `{mode}`"), &names);
        for (i, (client, script)) in clients.iter().enumerate() {
            let key = format!("client{i}-{mode}");
            let script = format!(
                "U=\"${url_var}\" P=\"{}\" K={key} sh -c '{}'",
                if prefix_mode { "$PX" } else { "" },
                script.replace('\'', "'\\''")
            );
            let out = env.binky_env(
                &["exec", "w", "-s", "api", "--", "sh", "-c", &script],
                &[("NODE_PATH", node_path.as_str())],
            );
            let got = stdout(&out);
            if !out.status.success() || got.trim() != "42" {
                failed.push(format!(
                    "{client} ({mode}): exit {:?}, got {got:?}, stderr: {}",
                    out.status.code(),
                    stderr(&out)
                ));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    // Where the keys are: the database slice's in its own database (kombu's queue is
    // emptied by its get; its binding set stays), the prefix slice's under its prefix.
    let in_db = server.keys_in(db, "*client*");
    for i in [0, 1, 3, 4] {
        assert!(in_db.contains(&format!("client{i}-database")), "{in_db:?}");
    }
    assert!(
        in_db.iter().any(|k| k.contains("client2-database")),
        "kombu: {in_db:?}"
    );
    assert!(server.keys_in(0, "client*-database").is_empty());
    let in_zero = server.keys_in(0, "*client*-prefix*");
    assert!(!in_zero.is_empty(), "{in_zero:?}");
    for k in &in_zero {
        assert!(
            k.starts_with(&prefix),
            "{k} is outside {prefix}: {in_zero:?}"
        );
    }
    for i in [0, 1, 3, 4] {
        assert!(
            in_zero.contains(&format!("{prefix}client{i}-prefix")),
            "{in_zero:?}"
        );
    }
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
