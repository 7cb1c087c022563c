//! The MySQL-family adapter (`mysql`, `mariadb`, `percona`) against a real MariaDB: its own
//! database and user per world, isolation, teardown that leaves nothing, idempotence,
//! server-side clone; then end to end through the real binary (`binky up` with
//! `admin_url`, with binky's managed MariaDB, with a golden template) and its failures.

use std::time::{Duration, Instant};

use binky::adapters::mysql::Mysql;
use binky::adapters::{Adapter, AdapterConfig, AdapterError, Registry, Slice};
use binky_controllers::adapter::random_secret;
use mysql_async::prelude::Queryable;

use crate::harness::*;
use crate::mariadb_server::{mariadb_client, parse_url, require_mariadb, MariaDbServer};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn slice(name: &str) -> Slice {
    Slice {
        name: name.to_owned(),
        secret: random_secret().unwrap(),
    }
}

fn cfg_for(url: &str) -> AdapterConfig {
    AdapterConfig {
        admin_url: Some(url.to_owned()),
        ..AdapterConfig::default()
    }
}

/// Provision `s` on `db` and return its URL.
fn provision(rt: &tokio::runtime::Runtime, db: &MariaDbServer, s: &Slice) -> String {
    rt.block_on(async {
        Mysql.provision(s, &db.cfg()).await.unwrap();
        Mysql.resolve(s, &db.cfg()).await.unwrap().url
    })
}

fn assert_denied(result: Result<Vec<Vec<String>>, String>, what: &str) {
    match result {
        Ok(rows) => panic!("{what}: allowed, returned {rows:?}"),
        Err(e) => assert!(
            e.contains("denied"),
            "{what}: failed, but not for lack of rights: {e}"
        ),
    }
}

// ---------------------------------------------------------------------------------------
// The adapter.

#[test]
fn a_provisioned_mysql_slice_has_its_own_user_with_rights_on_its_database_only() {
    let db = MariaDbServer::start();
    let rt = runtime();
    let registry = Registry::default();
    for name in ["mysql", "mariadb", "percona@8"] {
        let adapter = registry.get(name).unwrap();
        assert_eq!(adapter.names(), Mysql.names(), "{name}");
        assert!(rt.block_on(adapter.capabilities(&db.cfg())).unwrap().clone);
    }
    // Query parameters of the admin URL that are not credentials are handed on.
    let cfg = cfg_for(&format!("{}/mysql?charset=utf8mb4&user=x", db.admin_url));
    let s = slice("bk_demo_main_db");
    let addr = rt.block_on(async {
        Mysql.provision(&s, &cfg).await.unwrap();
        Mysql.resolve(&s, &cfg).await.unwrap()
    });
    assert_eq!(
        addr.url,
        format!(
            "mysql://bk_demo_main_db:{}@127.0.0.1:{}/bk_demo_main_db?charset=utf8mb4",
            s.secret, db.port
        )
    );
    assert_eq!(addr.tokens["database"], "bk_demo_main_db");
    assert_eq!(addr.tokens["user"], "bk_demo_main_db");
    assert_eq!(addr.tokens["host"], "127.0.0.1");
    assert_eq!(addr.tokens["port"], db.port.to_string());
    assert!(!addr.url.contains(&db.password));

    db.query(
        &addr.url,
        "CREATE TABLE notes (id INT PRIMARY KEY, body TEXT); \
         INSERT INTO notes VALUES (1, 'hello'), (2, 'world')",
    );
    assert_eq!(
        db.query(&addr.url, "SELECT body FROM notes ORDER BY id"),
        [["hello"], ["world"]]
    );
    // Its grants: logging in, and everything on its own database (`_` escaped, so the
    // grant means this one database and no look-alike).
    let grants = db.query(&addr.url, "SHOW GRANTS");
    assert_eq!(grants.len(), 2, "{grants:?}");
    assert!(
        grants[0][0].starts_with("GRANT USAGE ON *.* TO `bk_demo_main_db`@`%`"),
        "{grants:?}"
    );
    assert_eq!(
        grants[1][0],
        "GRANT ALL PRIVILEGES ON `bk\\_demo\\_main\\_db`.* TO `bk_demo_main_db`@`%`"
    );
    // It sees no other database, and no system table.
    assert_eq!(
        db.query(&addr.url, "SHOW DATABASES"),
        [["bk_demo_main_db"], ["information_schema"]]
    );
    assert_denied(
        db.try_query(&addr.url, "SELECT User FROM mysql.user"),
        "reading mysql.user",
    );
    assert_eq!(
        rt.block_on(Mysql.list(&db.cfg())).unwrap(),
        ["bk_demo_main_db"]
    );
    assert_eq!(
        rt.block_on(Mysql.exists(&s, &db.cfg())).unwrap(),
        Some(true)
    );
    rt.block_on(Mysql.teardown(&s, &db.cfg())).unwrap();
    assert_eq!(
        rt.block_on(Mysql.exists(&s, &db.cfg())).unwrap(),
        Some(false)
    );
    db.assert_no_slices();
}

#[test]
fn two_mysql_worlds_cannot_read_or_change_each_others_database() {
    let db = MariaDbServer::start();
    let rt = runtime();
    let a = slice("bk_shop_a_db");
    // A name that `bk_shop_a_db` matches when `_` is read as a wildcard.
    let lookalike = slice("bk_shop0a1db");
    let b = slice("bk_shop_b_db");
    let (a_url, look_url, b_url) = (
        provision(&rt, &db, &a),
        provision(&rt, &db, &lookalike),
        provision(&rt, &db, &b),
    );
    db.query(
        &a_url,
        "CREATE TABLE secrets (v TEXT); INSERT INTO secrets VALUES ('only in a')",
    );
    db.query(
        &look_url,
        "CREATE TABLE secrets (v TEXT); INSERT INTO secrets VALUES ('only in the look-alike')",
    );
    // b's credentials, on a's database: denied for every kind of access.
    for (what, sql) in [
        ("read", "SELECT v FROM bk_shop_a_db.secrets"),
        (
            "insert",
            "INSERT INTO bk_shop_a_db.secrets VALUES ('from b')",
        ),
        ("update", "UPDATE bk_shop_a_db.secrets SET v = 'b was here'"),
        ("delete", "DELETE FROM bk_shop_a_db.secrets"),
        ("drop", "DROP TABLE bk_shop_a_db.secrets"),
        ("create", "CREATE TABLE bk_shop_a_db.planted (x INT)"),
        ("drop database", "DROP DATABASE bk_shop_a_db"),
    ] {
        assert_denied(db.try_query(&b_url, sql), &format!("b may {what} a's data"));
    }
    let u = parse_url(&b_url);
    assert_denied(
        mariadb_client(db.port, &u.user, &u.password, "bk_shop_a_db", "SELECT 1"),
        "b connecting to a's database",
    );
    // a's user does not reach the look-alike either (the grant's `_` is escaped).
    assert_denied(
        db.try_query(&a_url, "SELECT v FROM bk_shop0a1db.secrets"),
        "a reading the look-alike",
    );
    // b's own database does not have a's table; a's data is as a left it.
    let err = db.try_query(&b_url, "SELECT v FROM secrets").unwrap_err();
    assert!(err.contains("doesn't exist"), "{err}");
    assert_eq!(db.query(&a_url, "SELECT v FROM secrets"), [["only in a"]]);
    assert_eq!(
        db.query(&b_url, "SHOW DATABASES"),
        [["bk_shop_b_db"], ["information_schema"]]
    );
    for s in [&a, &lookalike, &b] {
        rt.block_on(Mysql.teardown(s, &db.cfg())).unwrap();
    }
    db.assert_no_slices();
}

#[test]
fn mysql_teardown_ends_open_sessions_and_leaves_no_database_user_or_grant() {
    let db = MariaDbServer::start();
    let rt = runtime();
    let s = slice("bk_shop_busy_db");
    let url = provision(&rt, &db, &s);
    db.query(&url, "CREATE TABLE t (v INT); INSERT INTO t VALUES (1)");
    let before = db.admin("SELECT COUNT(*) FROM mysql.user")[0][0].clone();
    rt.block_on(async {
        // An application mid-transaction: it holds a metadata lock DROP DATABASE waits for.
        let u = parse_url(&url);
        let opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(db.port)
            .user(Some(u.user))
            .pass(Some(u.password))
            .db_name(Some(u.database))
            .prefer_socket(false);
        let mut app = mysql_async::Conn::new(opts).await.unwrap();
        app.query_drop("START TRANSACTION").await.unwrap();
        app.query_drop("SELECT * FROM t").await.unwrap();
        let began = Instant::now();
        Mysql.teardown(&s, &db.cfg()).await.unwrap();
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "teardown waited for the open transaction: {:?}",
            began.elapsed()
        );
        assert!(
            app.query_drop("SELECT 1").await.is_err(),
            "the slice's session survived its teardown"
        );
    });
    db.assert_no_slices();
    let after = db.admin("SELECT COUNT(*) FROM mysql.user")[0][0].clone();
    assert_eq!(
        after.parse::<i32>().unwrap(),
        before.parse::<i32>().unwrap() - 1
    );
    assert_denied(db.try_query(&url, "SELECT 1"), "logging in after teardown");
}

#[test]
fn mysql_provision_and_teardown_are_idempotent_and_provision_heals_the_password() {
    let db = MariaDbServer::start();
    let rt = runtime();
    db.admin("CREATE DATABASE other_app");
    let mut s = slice("bk_shop_twice_db");
    let url = provision(&rt, &db, &s);
    db.query(&url, "CREATE TABLE t (v INT); INSERT INTO t VALUES (7)");
    let again = provision(&rt, &db, &s);
    assert_eq!(url, again);
    assert_eq!(db.query(&url, "SELECT v FROM t"), [["7"]]);
    assert_eq!(db.slice_users(), ["bk_shop_twice_db@%"]);
    assert_eq!(
        db.slice_grants(),
        ["bk_shop_twice_db bk\\_shop\\_twice\\_db"]
    );
    // A new secret: the old one stops working, the new one reaches the same data.
    s.secret = random_secret().unwrap();
    let healed = provision(&rt, &db, &s);
    assert_denied(db.try_query(&url, "SELECT 1"), "the old secret");
    assert_eq!(db.query(&healed, "SELECT v FROM t"), [["7"]]);
    // gc lists binky's databases only.
    assert_eq!(
        rt.block_on(Mysql.list(&db.cfg())).unwrap(),
        ["bk_shop_twice_db"]
    );
    rt.block_on(async {
        Mysql.teardown(&s, &db.cfg()).await.unwrap();
        Mysql.teardown(&s, &db.cfg()).await.unwrap();
    });
    db.assert_no_slices();
    assert!(db
        .admin("SHOW DATABASES")
        .iter()
        .any(|r| r[0] == "other_app"));
}

#[test]
fn a_mysql_slices_secret_never_reaches_the_servers_log_in_clear() {
    let db = MariaDbServer::start();
    let log = db.dir.path().join("data").join("general.log");
    db.admin(&format!(
        "SET GLOBAL general_log_file = '{}'; SET GLOBAL general_log = 1",
        log.display()
    ));
    let rt = runtime();
    let (template, copy) = (slice("bk_golden_log_db"), slice("bk_shop_log_db"));
    let url = provision(&rt, &db, &template);
    db.query(&url, "CREATE TABLE t (v INT); INSERT INTO t VALUES (1)");
    rt.block_on(async {
        Mysql.provision(&template, &db.cfg()).await.unwrap();
        Mysql.seal_template(&template, &db.cfg()).await.unwrap();
        Mysql
            .clone_slice(&template, &copy, &db.cfg())
            .await
            .unwrap();
        Mysql.provision(&copy, &db.cfg()).await.unwrap();
    });
    let copy_url = rt.block_on(Mysql.resolve(&copy, &db.cfg())).unwrap().url;
    assert_eq!(db.query(&copy_url, "SELECT v FROM t"), [["1"]]);
    db.admin("SET GLOBAL general_log = 0");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("CREATE USER IF NOT EXISTS 'bk_shop_log_db'"),
        "the general log was not on: {text}"
    );
    for s in [&template, &copy] {
        assert!(
            !text.contains(&s.secret),
            "a secret in the general log:\n{text}"
        );
    }
    rt.block_on(async {
        for s in [&copy, &template] {
            Mysql.teardown(s, &db.cfg()).await.unwrap();
        }
    });
    db.assert_no_slices();
}

#[test]
fn a_mysql_slice_with_the_longest_name_gets_a_user_name_mysql_accepts() {
    let db = MariaDbServer::start();
    let rt = runtime();
    let long = format!("bk_{}", "x".repeat(60));
    assert_eq!(long.len(), 63);
    let s = slice(&long);
    let url = provision(&rt, &db, &s);
    let u = parse_url(&url);
    assert_eq!(u.database, long);
    assert_eq!(u.user.len(), 32);
    db.query(&url, "CREATE TABLE t (v INT)");
    rt.block_on(Mysql.teardown(&s, &db.cfg())).unwrap();
    db.assert_no_slices();
}

/// Tables with a foreign key, indexes, an auto-increment counter, stored and virtual
/// generated columns, a view, a trigger, a function and a procedure.
const TEMPLATE_SCHEMA: &str = "
CREATE TABLE authors (
  id INT AUTO_INCREMENT PRIMARY KEY,
  name VARCHAR(50) NOT NULL,
  UNIQUE KEY authors_name (name)
);
CREATE TABLE notes (
  id INT AUTO_INCREMENT PRIMARY KEY,
  author_id INT NOT NULL,
  body VARCHAR(100) NOT NULL,
  body_len INT AS (CHAR_LENGTH(body)) STORED,
  shout VARCHAR(100) AS (UPPER(body)) VIRTUAL,
  KEY notes_body (body),
  CONSTRAINT notes_author FOREIGN KEY (author_id) REFERENCES authors (id)
);
INSERT INTO authors (name) VALUES ('ann'), ('bob');
INSERT INTO notes (author_id, body) VALUES (1, 'first'), (2, 'second'), (1, 'third'), (2, 'fourth');
DELETE FROM notes WHERE id = 4;
CREATE VIEW note_authors AS SELECT n.id, a.name, n.body FROM notes n JOIN authors a ON a.id = n.author_id;
CREATE VIEW ann_notes AS SELECT id, body FROM note_authors WHERE name = 'ann';
CREATE FUNCTION twice(x INT) RETURNS INT DETERMINISTIC RETURN x * 2;
CREATE PROCEDURE add_note(IN who INT, IN what VARCHAR(100)) INSERT INTO notes (author_id, body) VALUES (who, what);
CREATE TRIGGER notes_mark BEFORE INSERT ON notes FOR EACH ROW SET NEW.body = CONCAT(NEW.body, '!');
";

#[test]
fn a_mysql_clone_copies_rows_indexes_keys_counters_and_generated_columns_owned_by_its_user() {
    let db = MariaDbServer::start();
    let rt = runtime();
    let template = slice("bk_golden_tpl_db");
    let tpl_url = provision(&rt, &db, &template);
    db.query(&tpl_url, TEMPLATE_SCHEMA);
    rt.block_on(Mysql.seal_template(&template, &db.cfg()))
        .unwrap();
    // The template's own user can no longer log in (nor write).
    assert!(
        db.try_query(&tpl_url, "SELECT 1").is_err(),
        "the template's user still logs in after the seal"
    );
    // A copy left half-made by an earlier attempt is made again from scratch.
    db.admin("CREATE DATABASE bk_shop_c1_db; CREATE TABLE bk_shop_c1_db.junk (x INT)");
    let (c1, c2) = (slice("bk_shop_c1_db"), slice("bk_shop_c2_db"));
    let began = Instant::now();
    let (c1_url, c2_url) = rt.block_on(async {
        for c in [&c1, &c2] {
            Mysql
                .clone_slice(&template, c, &db.cfg())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        (
            Mysql.resolve(&c1, &db.cfg()).await.unwrap().url,
            Mysql.resolve(&c2, &db.cfg()).await.unwrap().url,
        )
    });
    eprintln!("two clones in {:?}", began.elapsed());
    for url in [&c1_url, &c2_url] {
        let q = |sql: &str| db.query(url, sql);
        assert_eq!(
            q("SHOW TABLES"),
            [["ann_notes"], ["authors"], ["note_authors"], ["notes"]]
        );
        // Rows, generated columns computed again, nothing touched by the trigger.
        assert_eq!(
            q("SELECT id, author_id, body, body_len, shout FROM notes ORDER BY id"),
            [
                ["1", "1", "first", "5", "FIRST"],
                ["2", "2", "second", "6", "SECOND"],
                ["3", "1", "third", "5", "THIRD"],
            ]
        );
        // Indexes and the foreign key, enforced in the copy against the copy's table.
        assert_eq!(
            q(
                "SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS \
               WHERE TABLE_SCHEMA = DATABASE() ORDER BY 1"
            ),
            [
                ["authors_name"],
                ["notes_author"],
                ["notes_body"],
                ["PRIMARY"]
            ]
        );
        assert_eq!(
            q("SELECT CONSTRAINT_NAME, UNIQUE_CONSTRAINT_SCHEMA = DATABASE(), REFERENCED_TABLE_NAME \
               FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = DATABASE()"),
            [["notes_author", "1", "authors"]]
        );
        // The auto-increment counter came along: row 4 was deleted in the template, so the
        // next id is 5, not 4.
        assert_eq!(
            q("SELECT AUTO_INCREMENT FROM information_schema.TABLES \
               WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'notes'"),
            [["5"]]
        );
        // Views, routines and the trigger belong to the copy's user and work for it.
        let user = parse_url(url).user;
        assert_eq!(
            q("SELECT DISTINCT DEFINER FROM information_schema.VIEWS WHERE TABLE_SCHEMA = DATABASE()"),
            [[format!("{user}@%")]]
        );
        assert_eq!(
            q(
                "SELECT ROUTINE_NAME, DEFINER FROM information_schema.ROUTINES \
               WHERE ROUTINE_SCHEMA = DATABASE() ORDER BY 1"
            ),
            [
                ["add_note".to_owned(), format!("{user}@%")],
                ["twice".to_owned(), format!("{user}@%")]
            ]
        );
        assert_eq!(q("SELECT twice(21)"), [["42"]]);
        assert_eq!(
            q("SELECT id, body FROM ann_notes ORDER BY id"),
            [["1", "first"], ["3", "third"]]
        );
    }
    // New rows take the counter's next id; the trigger fires on them.
    db.query(&c1_url, "CALL add_note(2, 'new in c1')");
    assert_eq!(
        db.query(&c1_url, "SELECT id, body FROM notes WHERE id > 3"),
        [["5", "new in c1!"]]
    );
    for url in [&c1_url, &c2_url] {
        let err = db
            .try_query(
                url,
                "INSERT INTO notes (author_id, body) VALUES (99, 'orphan')",
            )
            .unwrap_err();
        assert!(err.contains("foreign key constraint fails"), "{err}");
    }
    // The copy is its user's to change, and independent of the template and of c2.
    db.query(
        &c1_url,
        "ALTER TABLE notes ADD COLUMN tag TEXT; UPDATE notes SET body = 'changed' WHERE id = 1; \
         DELETE FROM notes WHERE id = 2; DROP VIEW ann_notes; CREATE TABLE extra (x INT)",
    );
    assert_eq!(
        db.query(
            &c2_url,
            "SELECT COUNT(*), MIN(body) FROM notes WHERE id <= 2"
        ),
        [["2", "first"]]
    );
    assert_eq!(
        db.admin("SELECT COUNT(*), MAX(id) FROM bk_golden_tpl_db.notes"),
        [["3", "3"]]
    );
    assert!(db
        .try_query(&c2_url, "SELECT tag FROM notes")
        .unwrap_err()
        .contains("Unknown column"));
    assert_denied(
        db.try_query(&c2_url, "SELECT * FROM bk_shop_c1_db.notes"),
        "c2 reading c1",
    );
    assert_denied(
        db.try_query(&c1_url, "SELECT * FROM bk_golden_tpl_db.notes"),
        "c1 reading the template",
    );
    rt.block_on(async {
        for s in [&c1, &c2, &template] {
            Mysql.teardown(s, &db.cfg()).await.unwrap();
        }
    });
    db.assert_no_slices();
}

#[test]
fn a_mysql_template_with_an_event_is_refused_before_a_copy_is_made() {
    let db = MariaDbServer::start();
    let rt = runtime();
    let template = slice("bk_golden_evt_db");
    provision(&rt, &db, &template);
    db.admin(
        "CREATE TABLE bk_golden_evt_db.t (v INT); \
         CREATE EVENT bk_golden_evt_db.tick ON SCHEDULE EVERY 1 DAY DISABLE DO DELETE FROM bk_golden_evt_db.t",
    );
    let copy = slice("bk_shop_evt_db");
    let err = rt
        .block_on(Mysql.clone_slice(&template, &copy, &db.cfg()))
        .unwrap_err();
    assert!(matches!(err, AdapterError::Config(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("event `tick`"), "{text}");
    assert!(
        text.contains("provisioned, migrated and seeded instead"),
        "{text}"
    );
    assert_eq!(db.slice_databases(), ["bk_golden_evt_db"]);
    assert_eq!(db.slice_users(), ["bk_golden_evt_db@%"]);
    rt.block_on(Mysql.teardown(&template, &db.cfg())).unwrap();
    db.assert_no_slices();
}

#[test]
fn a_mysql_server_that_is_down_or_silent_is_unreachable_fast_without_a_password() {
    let rt = runtime();
    let s = slice("bk_shop_down_db");
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    for port in [closed, silent_port] {
        let cfg = cfg_for(&format!("mysql://root:sekrit-admin-pw@127.0.0.1:{port}"));
        let began = Instant::now();
        let errors = rt.block_on(async {
            vec![
                Mysql.provision(&s, &cfg).await.unwrap_err(),
                Mysql.teardown(&s, &cfg).await.unwrap_err(),
                Mysql.list(&cfg).await.unwrap_err(),
            ]
        });
        assert!(
            began.elapsed() < Duration::from_secs(20),
            "{:?}",
            began.elapsed()
        );
        for err in errors {
            let text = err.to_string();
            match &err {
                AdapterError::Unreachable { server, .. } => {
                    assert_eq!(server, &format!("mysql://127.0.0.1:{port}"))
                }
                other => panic!("not Unreachable: {other:?}"),
            }
            assert!(err.transient());
            if port == silent_port {
                assert!(text.contains("no answer within 5 s"), "{text}");
            }
            assert!(!text.contains("sekrit-admin-pw"), "{text}");
            assert!(!text.contains(&s.secret), "{text}");
        }
    }
    drop(silent);
}

#[test]
fn a_refused_or_weak_mysql_admin_gets_a_message_naming_the_fix() {
    let db = MariaDbServer::start();
    let rt = runtime();
    let s = slice("bk_shop_auth_db");
    let wrong = cfg_for(&db.url("root", "wrong-admin-password", ""));
    let err = rt.block_on(Mysql.provision(&s, &wrong)).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, AdapterError::Unreachable { .. }), "{err:?}");
    assert!(
        text.contains("the server refused admin_url's credentials")
            && text.contains("check the user and password in admin_url"),
        "{text}"
    );
    assert!(!text.contains("wrong-admin-password"), "{text}");
    assert!(!text.contains(&db.password), "{text}");
    // A user that may log in but not create users: a server error saying what it needs.
    db.admin("CREATE USER 'weak'@'%' IDENTIFIED BY 'weak-pw-1'");
    let weak = cfg_for(&db.url("weak", "weak-pw-1", ""));
    let err = rt.block_on(Mysql.provision(&s, &weak)).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, AdapterError::Server { .. }), "{err:?}");
    assert!(text.contains("creating the user"), "{text}");
    assert!(
        text.contains("admin_url's user needs CREATE USER"),
        "{text}"
    );
    assert!(
        !text.contains("weak-pw-1") && !text.contains(&s.secret),
        "{text}"
    );
    db.assert_no_slices();
}

// ---------------------------------------------------------------------------------------
// End to end: `binky up`.

/// `sh sql.sh 'SQL'` or `sh sql.sh file.sql`: runs SQL against `$DATABASE_URL`
/// (`mysql://user:password@host:port/db`) with the mariadb client.
fn sql_sh() -> String {
    let client = require_mariadb().client;
    format!(
        r#"set -e
u=${{DATABASE_URL#*://}}
cred=${{u%%@*}}
rest=${{u#*@}}
hostport=${{rest%%/*}}
db=${{rest#*/}}
db=${{db%%\?*}}
export MYSQL_PWD="${{cred#*:}}"
set -- "$1" --no-defaults --protocol=TCP -h "${{hostport%:*}}" -P "${{hostport##*:}}" -u "${{cred%%:*}}" -N -B "$db"
if [ -f "$1" ]; then f=$1; shift; exec '{client}' "$@" < "$f"; fi
q=$1; shift
exec '{client}' "$@" -e "$q"
"#,
        client = client.display()
    )
}

fn config(admin_url: Option<&str>) -> String {
    let admin = admin_url
        .map(|u| format!("admin_url = \"{u}\"\n"))
        .unwrap_or_default();
    format!(
        r#"
[project]
name = "shop"
{{range}}

[services.db]
adapter = "mariadb"
{admin}migrate = "sh sql.sh 'CREATE TABLE IF NOT EXISTS notes (body VARCHAR(100))'"
seed = "sh sql.sh \"INSERT INTO notes VALUES ('${{worktree}}')\""

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["db"]
env = {{ DATABASE_URL = "${{db.url}}" }}
"#
    )
}

fn new_env(toml: &str) -> Env {
    let env = Env::new(toml);
    std::fs::write(env.repo.join("sql.sh"), sql_sh()).unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "sql.sh"]);
    env
}

fn db_url(env: &Env, world: &str) -> String {
    env.env_of(world)["DB_URL"].as_str().unwrap().to_owned()
}

#[test]
fn two_worlds_get_their_own_mariadb_database_and_user_through_binky_up() {
    let db = MariaDbServer::start();
    let env = new_env(&config(Some("${env.MY_ADMIN}")));
    let vars = [("MY_ADMIN", db.admin_url.as_str())];
    for w in ["a", "b"] {
        let out = env.binky_env(&["up", w], &vars);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let (a, b) = (db_url(&env, "a"), db_url(&env, "b"));
    assert_ne!(a, b);
    assert!(
        !a.contains(&db.password),
        "the admin password reached a world"
    );
    // Each world's seed ran once, in its own database; the service got its address.
    assert_eq!(db.query(&a, "SELECT body FROM notes"), [["a"]]);
    assert_eq!(db.query(&b, "SELECT body FROM notes"), [["b"]]);
    assert_eq!(
        served_env(env.port_of("a", "api"))["DATABASE_URL"],
        a.as_str()
    );
    // What a writes, b never sees, and b's credentials cannot reach a's database.
    db.query(&a, "INSERT INTO notes VALUES ('only in a')");
    assert_eq!(db.query(&b, "SELECT COUNT(*) FROM notes"), [["1"]]);
    let a_db = parse_url(&a).database;
    assert_denied(
        db.try_query(&b, &format!("SELECT * FROM {a_db}.notes")),
        "b reading a",
    );
    let status = env.ok(&["status", "a"]);
    assert!(!status.contains(&db.password), "{status}");

    env.ok(&["remove", "a"]);
    assert_eq!(db.slice_databases(), [parse_url(&b).database]);
    assert_eq!(db.slice_users().len(), 1);
    env.ok(&["remove", "b"]);
    db.assert_no_slices();
    env.assert_nothing_left(&["a", "b"]);
}

#[test]
fn without_admin_url_binky_runs_a_mariadb_of_its_own_and_keeps_it() {
    let env = new_env(&config(None));
    let began = Instant::now();
    env.ok(&["up", "w"]);
    eprintln!("first world on a managed MariaDB: {:?}", began.elapsed());
    let url = db_url(&env, "w");
    let u = parse_url(&url);
    let client = |sql: &str| mariadb_client(u.port, &u.user, &u.password, &u.database, sql);
    client("INSERT INTO notes VALUES ('kept')").unwrap();
    assert_eq!(client("SELECT COUNT(*) FROM notes").unwrap(), [["2"]]);
    let servers = env.ok(&["servers"]);
    assert!(
        servers.contains("mysql") && servers.contains("running") && servers.contains("MariaDB"),
        "{servers}"
    );
    // Stopped, then started again by the next world that needs it: same address, data kept.
    let out = env.ok(&["servers", "stop", "mariadb"]);
    assert!(out.contains("stopped mysql"), "{out}");
    assert!(client("SELECT 1").is_err(), "still answering after stop");
    env.ok(&["up", "w2"]);
    assert_eq!(
        client("SELECT body FROM notes ORDER BY body").unwrap(),
        [["kept"], ["w"]]
    );
    env.ok(&["remove", "w"]);
    env.ok(&["remove", "w2"]);
    assert!(
        !env.ok(&["gc"]).contains("bk_"),
        "orphaned slices after remove"
    );
    env.assert_nothing_left(&["w", "w2"]);
}

#[test]
fn binky_mysql_url_names_the_server_for_a_service_without_admin_url_as_in_binky_012() {
    let db = MariaDbServer::start();
    let env = new_env(&config(None));
    // The daemon is started by this `up`, so it carries the variable, as 0.1.2's did.
    let out = env.binky_env(&["up", "w"], &[("BINKY_MYSQL_URL", db.admin_url.as_str())]);
    assert!(out.status.success(), "{}", stderr(&out));
    let url = db_url(&env, "w");
    assert_eq!(db.query(&url, "SELECT body FROM notes"), [["w"]]);
    assert_eq!(db.slice_databases(), [parse_url(&url).database]);
    let servers = env.ok(&["servers"]);
    assert!(
        !servers.contains("running"),
        "a managed server was started although BINKY_MYSQL_URL named one:\n{servers}"
    );
    env.ok(&["remove", "w"]);
    db.assert_no_slices();
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_world_waits_for_a_mariadb_that_is_down_says_why_and_comes_up_once_it_is_there() {
    let env = new_env(&config(Some("${env.MY_ADMIN}")));
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let down = format!("mysql://root:pw-down-123@127.0.0.1:{port}");
    let out = env.binky_env(&["up", "w", "--timeout", "8s"], &[("MY_ADMIN", &down)]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("cannot reach mysql://127.0.0.1:{port}")),
        "{err}"
    );
    assert!(err.contains("Connection refused"), "{err}");
    assert!(!err.contains("pw-down-123"), "{err}");
    let status = env.ok(&["status", "w"]);
    assert!(status.contains("ServerUnavailable"), "{status}");
    // The server is there now.
    let db = MariaDbServer::start();
    let out = env.binky_env(
        &["up", "w", "--timeout", "60s"],
        &[("MY_ADMIN", &db.admin_url)],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        db.query(&db_url(&env, "w"), "SELECT body FROM notes"),
        [["w"]]
    );
    env.ok(&["remove", "w"]);
    db.assert_no_slices();
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_bad_or_refused_mariadb_admin_url_fails_the_world_saying_what_to_fix() {
    let db = MariaDbServer::start();
    let env = new_env(&config(Some("${env.MY_ADMIN}")));
    // Not a MySQL URL: a configuration error, at once.
    let bad = format!("postgres://root:pw-bad-123@127.0.0.1:{}", db.port);
    let out = env.binky_env(&["up", "w", "--timeout", "30s"], &[("MY_ADMIN", &bad)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("is not a MySQL URL"), "{err}");
    assert!(!err.contains("pw-bad-123"), "{err}");
    // The right server, the wrong password: the world waits, saying the credentials were
    // refused.
    let wrong = db.url("root", "pw-wrong-123", "");
    let out = env.binky_env(&["up", "w", "--timeout", "8s"], &[("MY_ADMIN", &wrong)]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("the server refused admin_url's credentials"),
        "{err}"
    );
    assert!(!err.contains("pw-wrong-123"), "{err}");
    // Fixed: it comes up.
    let out = env.binky_env(&["up", "w"], &[("MY_ADMIN", &db.admin_url)]);
    assert!(out.status.success(), "{}", stderr(&out));
    env.ok(&["remove", "w"]);
    db.assert_no_slices();
    env.assert_nothing_left(&["w"]);
}

// ---------------------------------------------------------------------------------------
// Golden templates with the mysql adapter.

const GOLDEN_CONFIG: &str = r#"
[project]
name = "shop"
{range}

[services.db]
adapter = "mysql"
admin_url = "${env.MY_ADMIN}"
migrate = "sh sql.sh schema.sql"
seed = "sh seed.sh"
clone_from = "golden"

[services.api]
cmd = "SERVE"
url = true
depends_on = ["db"]
env = { DATABASE_URL = "${db.url}" }
"#;

const GOLDEN_SCHEMA: &str = "
CREATE TABLE authors (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(50) NOT NULL UNIQUE);
CREATE TABLE notes (
  id INT AUTO_INCREMENT PRIMARY KEY,
  author_id INT NOT NULL,
  body VARCHAR(100) NOT NULL,
  body_len INT AS (CHAR_LENGTH(body)) STORED,
  KEY notes_body (body),
  CONSTRAINT notes_author FOREIGN KEY (author_id) REFERENCES authors (id)
);
";

#[test]
fn mysql_worlds_are_cloned_from_one_golden_template_seeded_once() {
    let db = MariaDbServer::start();
    let env = Env::new(&GOLDEN_CONFIG.replace("SERVE", SERVE));
    let log = env.dir.path().join("seeds.log");
    std::fs::write(env.repo.join("sql.sh"), sql_sh()).unwrap();
    std::fs::write(env.repo.join("schema.sql"), GOLDEN_SCHEMA).unwrap();
    std::fs::write(
        env.repo.join("seed.sh"),
        format!(
            "set -e\necho run >> '{}'\nsh sql.sh \"INSERT INTO authors (name) VALUES ('ann'), ('bob'); \
             INSERT INTO notes (author_id, body) WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 100) \
             SELECT 1 + n % 2, CONCAT('row ', n) FROM g\"\n",
            log.display()
        ),
    )
    .unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "schema and seed"]);
    let vars = [("MY_ADMIN", db.admin_url.as_str())];
    std::thread::scope(|s| {
        let a = s.spawn(|| env.binky_env(&["up", "a"], &vars));
        let b = s.spawn(|| env.binky_env(&["up", "b"], &vars));
        for out in [a.join().unwrap(), b.join().unwrap()] {
            assert!(out.status.success(), "{}", stderr(&out));
        }
    });
    let seeds = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .count();
    assert_eq!(seeds, 1, "the seed ran more than once");
    // The template, and its migrated stage it was seeded from.
    let templates: Vec<String> = db
        .slice_databases()
        .into_iter()
        .filter(|d| d.starts_with("bk_golden_") && !d.ends_with("_migrated"))
        .collect();
    assert_eq!(templates.len(), 1, "{:?}", db.slice_databases());
    assert!(db
        .slice_databases()
        .contains(&format!("{}_migrated", templates[0])));
    for w in ["a", "b"] {
        let events = env.ok(&["events", w, "-n", "200"]);
        assert!(
            events.contains("from golden template bk_golden_"),
            "{w} was not cloned: {events}"
        );
        assert!(!events.contains("clone_fallback"), "{events}");
    }
    let (a, b) = (db_url(&env, "a"), db_url(&env, "b"));
    assert_ne!(a, b);
    for url in [&a, &b] {
        assert_eq!(
            db.query(url, "SELECT COUNT(*), SUM(body_len), MAX(id) FROM notes"),
            [["100", "592", "100"]]
        );
    }
    // The copies continue the template's auto-increment counter (an INSERT … SELECT
    // reserves ids in batches, so it is past 101).
    let next = db.admin(&format!(
        "SELECT AUTO_INCREMENT FROM information_schema.TABLES \
         WHERE TABLE_SCHEMA = '{}' AND TABLE_NAME = 'notes'",
        templates[0]
    ))[0][0]
        .clone();
    // a reads, writes and migrates its copy; b sees none of it.
    db.query(
        &a,
        "INSERT INTO notes (author_id, body) VALUES (1, 'only in a'); \
         UPDATE notes SET body = 'changed' WHERE id = 1; DELETE FROM notes WHERE id = 2; \
         ALTER TABLE notes ADD COLUMN tag TEXT",
    );
    assert_eq!(
        db.query(&a, "SELECT MAX(id), COUNT(*) FROM notes"),
        [[next.as_str(), "100"]]
    );
    assert_eq!(
        db.query(&b, "SELECT COUNT(*), MIN(body) FROM notes WHERE id <= 2"),
        [["2", "row 1"]]
    );
    assert_denied(
        db.try_query(
            &b,
            &format!("SELECT * FROM {}.notes", parse_url(&a).database),
        ),
        "b reading a",
    );
    // The template's own user and its stage's are sealed: locked, with no rights left.
    let users = db.slice_users();
    assert_eq!(users.len(), 4, "{users:?}");
    let tpl_users: Vec<String> = users
        .iter()
        .filter(|u| u.starts_with("bk_golden_"))
        .map(|u| u.trim_end_matches("@%").to_owned())
        .collect();
    assert_eq!(tpl_users.len(), 2, "{users:?}");
    for tpl_user in tpl_users {
        let shown = db.admin(&format!("SHOW CREATE USER '{tpl_user}'@'%'"));
        assert!(shown[0][0].contains("ACCOUNT LOCK"), "{shown:?}");
        assert!(
            !db.slice_grants().iter().any(|g| g.starts_with(&tpl_user)),
            "{:?}",
            db.slice_grants()
        );
    }
    assert_eq!(
        served_env(env.port_of("a", "api"))["DATABASE_URL"],
        a.as_str()
    );
    // Kept after its last world unless golden_keep says otherwise.
    env.ok(&["settings", "golden_keep=0"]);
    for w in ["a", "b"] {
        env.ok(&["remove", w]);
    }
    wait_until(
        "the template no world needs is dropped",
        Duration::from_secs(30),
        || db.slice_databases().is_empty(),
    );
    db.assert_no_slices();
    env.assert_nothing_left(&["a", "b"]);
}
