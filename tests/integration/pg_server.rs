//! A private PostgreSQL for tests ([`PgServer`]), and the tests of the `postgres` adapter
//! and of binky's managed PostgreSQL against real servers.
//!
//! Each [`PgServer`] is its own cluster in a temp dir on a free loopback port, with scram
//! authentication and a generated superuser password, fast and unsafe settings (`fsync=off`
//! …), run as the `postgres` user when the tests run as root. It is stopped and its files
//! removed on drop. Without PostgreSQL installed the tests fail (never skip), saying to run
//! `./scripts/test`, which installs it.

#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use binky::adapters::postgres::Postgres;
use binky::adapters::{Adapter, AdapterConfig, AdapterError, Registry, Slice};
use binky::servers::ServerError;
use binky_controllers::adapter::random_secret;

use crate::harness::{listening, wait_until, Managed};

pub use binky_testkit::net::free_port;
pub use binky_testkit::percent_encode;
pub use binky_testkit::servers::postgres::pg_bin_dir;

/// A private PostgreSQL server for one test (the kit's, with the adapter's view of it).
pub struct PgServer(binky_testkit::servers::postgres::PgServer);

impl std::ops::Deref for PgServer {
    type Target = binky_testkit::servers::postgres::PgServer;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// Run `sql` with `psql` against `url`: the rows (fields as text, NULL as ""), or psql's
/// error output.
pub fn psql(bin_dir: &Path, url: &str, sql: &str) -> Result<Vec<Vec<String>>, String> {
    binky_testkit::servers::postgres::psql(bin_dir, url, sql)
}

/// The installation's `bin` directory, or a panic saying to run ./scripts/test.
fn require_pg() -> PathBuf {
    pg_bin_dir().unwrap_or_else(|| panic!("{}", binky_testkit::servers::postgres::MISSING))
}

impl PgServer {
    /// A private server made with `opts` (durability, where its files go, …).
    pub fn start_with(opts: binky_testkit::servers::postgres::Options) -> PgServer {
        PgServer(
            binky_testkit::servers::postgres::PgServer::start_with(opts)
                .unwrap_or_else(|e| panic!("{e}")),
        )
    }

    /// Start a private server and wait until it takes authenticated connections; panics
    /// (failing the test, never skipping) when PostgreSQL is missing.
    pub fn start() -> PgServer {
        PgServer(
            binky_testkit::servers::postgres::PgServer::start().unwrap_or_else(|e| panic!("{e}")),
        )
    }

    /// `postgres://<user>:<password>@127.0.0.1:<port>/<database>`, encoded.
    pub fn url(&self, user: &str, password: &str, database: &str) -> String {
        format!(
            "postgres://{}:{}@127.0.0.1:{}/{}",
            percent_encode(user),
            percent_encode(password),
            self.port,
            percent_encode(database)
        )
    }

    /// An adapter configuration with this server's admin URL.
    pub fn cfg(&self) -> AdapterConfig {
        AdapterConfig {
            admin_url: Some(self.admin_url.clone()),
            ..AdapterConfig::default()
        }
    }

    /// Rows of `sql` run at `url`; panics with the server's error.
    pub fn query(&self, url: &str, sql: &str) -> Vec<Vec<String>> {
        self.try_query(url, sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Rows of `sql` run at `url`, or psql's error output.
    pub fn try_query(&self, url: &str, sql: &str) -> Result<Vec<Vec<String>>, String> {
        psql(&self.bin_dir, url, sql)
    }

    /// Rows of `sql` run as the superuser.
    pub fn admin(&self, sql: &str) -> Vec<Vec<String>> {
        self.query(&self.admin_url, sql)
    }

    /// Every database but the templates, sorted.
    pub fn databases(&self) -> Vec<String> {
        self.column("SELECT datname FROM pg_database WHERE NOT datistemplate ORDER BY 1")
    }

    /// Every role but PostgreSQL's built-in `pg_*` ones, sorted.
    pub fn roles(&self) -> Vec<String> {
        self.column("SELECT rolname FROM pg_roles WHERE left(rolname, 3) <> 'pg_' ORDER BY 1")
    }

    /// Databases named like binky slices (`bk_…`).
    pub fn slice_databases(&self) -> Vec<String> {
        self.column("SELECT datname FROM pg_database WHERE left(datname, 3) = 'bk_' ORDER BY 1")
    }

    /// Roles named like binky slices (`bk_…`).
    pub fn slice_roles(&self) -> Vec<String> {
        self.column("SELECT rolname FROM pg_roles WHERE left(rolname, 3) = 'bk_' ORDER BY 1")
    }

    /// Assert no slice database or role is left.
    pub fn assert_no_slices(&self) {
        assert_eq!(
            self.slice_databases(),
            Vec::<String>::new(),
            "databases left"
        );
        assert_eq!(self.slice_roles(), Vec::<String>::new(), "roles left");
    }

    fn column(&self, sql: &str) -> Vec<String> {
        self.admin(sql)
            .into_iter()
            .map(|mut r| r.swap_remove(0))
            .collect()
    }
}

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

// ---------------------------------------------------------------------------------------
// The adapter.

#[test]
fn a_provisioned_slice_url_can_create_write_and_read_a_table() {
    let pg = PgServer::start();
    let rt = runtime();
    let adapter = Registry::default().get("postgresql").unwrap();
    assert!(rt.block_on(adapter.capabilities(&pg.cfg())).unwrap().clone);
    // Query parameters of the admin URL that are not credentials are handed on.
    let cfg = cfg_for(&format!("{}?sslmode=disable", pg.admin_url));
    let s = slice("bk_demo_main_db");
    let addr = rt.block_on(async {
        adapter.provision(&s, &cfg).await.unwrap();
        adapter.resolve(&s, &cfg).await.unwrap()
    });
    assert_eq!(
        addr.url,
        format!(
            "postgres://bk_demo_main_db:{}@127.0.0.1:{}/bk_demo_main_db?sslmode=disable",
            s.secret, pg.port
        )
    );
    assert_eq!(addr.tokens["database"], "bk_demo_main_db");
    assert_eq!(addr.tokens["user"], "bk_demo_main_db");
    assert_eq!(addr.tokens["port"], pg.port.to_string());
    assert!(!addr.url.contains(&pg.password));

    pg.query(
        &addr.url,
        "CREATE TABLE notes (id int PRIMARY KEY, body text); \
         INSERT INTO notes VALUES (1, 'hello'), (2, 'world')",
    );
    assert_eq!(
        pg.query(&addr.url, "SELECT body FROM notes ORDER BY id"),
        [["hello"], ["world"]]
    );
    // The role has no rights beyond its database.
    assert_eq!(
        pg.admin(
            "SELECT rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls, \
             rolcanlogin FROM pg_roles WHERE rolname = 'bk_demo_main_db'"
        ),
        [["f", "f", "f", "f", "f", "t"]]
    );
    assert_eq!(
        pg.admin(
            "SELECT pg_get_userbyid(datdba), shobj_description(oid, 'pg_database') \
             FROM pg_database WHERE datname = 'bk_demo_main_db'"
        ),
        [["bk_demo_main_db", "binky slice"]]
    );
    // A Rust client takes the URL as is too.
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(&addr.url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        let n: i64 = client
            .query_one("SELECT count(*) FROM notes", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 2);
    });

    rt.block_on(adapter.teardown(&s, &cfg)).unwrap();
    pg.assert_no_slices();
}

/// WAL written while `f` runs, in bytes.
fn wal_during(pg: &PgServer, f: impl FnOnce()) -> f64 {
    let lsn = pg.admin("SELECT pg_current_wal_lsn()")[0][0].clone();
    f();
    pg.admin(&format!(
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{lsn}')"
    ))[0][0]
        .parse()
        .unwrap()
}

/// A template `name` of `rows` rows of 1 kB on `pg`, sealed.
fn sealed_template(pg: &PgServer, rt: &tokio::runtime::Runtime, name: &str, rows: i64) -> Slice {
    let adapter = Registry::default().get("postgres").unwrap();
    let s = slice(name);
    rt.block_on(adapter.provision(&s, &pg.cfg())).unwrap();
    let url = rt.block_on(adapter.resolve(&s, &pg.cfg())).unwrap().url;
    pg.query(
        &url,
        &format!(
            "CREATE TABLE notes (id int PRIMARY KEY, body text); \
             INSERT INTO notes SELECT g, repeat('x', 1000) FROM generate_series(1, {rows}) g"
        ),
    );
    rt.block_on(adapter.seal_template(&s, &pg.cfg())).unwrap();
    s
}

/// Copy `from` into a new slice `to` with `cfg`: the WAL it wrote (bytes) and the copy's
/// rows.
fn copied(
    pg: &PgServer,
    rt: &tokio::runtime::Runtime,
    from: &Slice,
    to: &str,
    cfg: &AdapterConfig,
) -> (f64, i64) {
    let adapter = Registry::default().get("postgres").unwrap();
    let to = slice(to);
    let wal = wal_during(pg, || {
        rt.block_on(adapter.clone_slice(from, &to, cfg)).unwrap()
    });
    let url = rt.block_on(adapter.resolve(&to, cfg)).unwrap().url;
    let n = pg.query(&url, "SELECT count(*) FROM notes")[0][0]
        .parse()
        .unwrap();
    (wal, n)
}

#[test]
fn a_golden_template_is_copied_by_wal_log_when_small_by_file_copy_when_large_or_unsynced_or_as_asked(
) {
    use binky::adapters::postgres::FILE_COPY_FROM;
    let rt = runtime();
    let size = |pg: &PgServer, name: &str| -> f64 {
        pg.admin(&format!("SELECT pg_database_size('{name}')"))[0][0]
            .parse()
            .unwrap()
    };
    // WAL_LOG writes every block of the copy to the WAL; FILE_COPY almost nothing.
    // A server that does not sync its writes (the tests' own, fsync = off): FILE_COPY.
    let unsynced = PgServer::start();
    let small = sealed_template(&unsynced, &rt, "bk_golden_small", 100);
    let (wal, n) = copied(&unsynced, &rt, &small, "bk_w_small", &unsynced.cfg());
    assert_eq!(n, 100);
    assert!(
        wal < 0.5 * size(&unsynced, "bk_golden_small"),
        "a template on a server without fsync was copied by WAL_LOG ({wal} bytes of WAL)"
    );
    drop(unsynced);
    // A server that syncs (as binky's own does): WAL_LOG below the crossover, FILE_COPY
    // from it.
    let pg = PgServer::start_with(binky_testkit::servers::postgres::Options {
        fsync: true,
        parent: Some("/dev/shm".into()),
        ..Default::default()
    });
    let small = sealed_template(&pg, &rt, "bk_golden_small", 100);
    let rows = FILE_COPY_FROM / 1000 + 8000;
    let large = sealed_template(&pg, &rt, "bk_golden_large", rows);
    assert!(size(&pg, "bk_golden_small") < FILE_COPY_FROM as f64);
    assert!(size(&pg, "bk_golden_large") >= FILE_COPY_FROM as f64);
    let (wal, n) = copied(&pg, &rt, &small, "bk_w_small", &pg.cfg());
    assert_eq!(n, 100);
    assert!(
        wal > 0.5 * size(&pg, "bk_golden_small"),
        "a small template was copied by FILE_COPY ({wal} bytes of WAL)"
    );
    let (wal, n) = copied(&pg, &rt, &large, "bk_w_large", &pg.cfg());
    assert_eq!(n, rows);
    assert!(
        wal < 0.05 * size(&pg, "bk_golden_large"),
        "a large template was copied by WAL_LOG ({wal} bytes of WAL)"
    );
    // The service may pin a strategy, and a word that is none is refused, naming them.
    let mut cfg = pg.cfg();
    cfg.options
        .insert("clone_strategy".into(), "WAL_LOG".into());
    let (wal, _) = copied(&pg, &rt, &large, "bk_w_large_wal", &cfg);
    assert!(
        wal > 0.5 * size(&pg, "bk_golden_large"),
        "clone_strategy = wal_log was not used"
    );
    cfg.options
        .insert("clone_strategy".into(), "file_copy".into());
    let (wal, _) = copied(&pg, &rt, &small, "bk_w_small_file", &cfg);
    assert!(
        wal < 0.5 * size(&pg, "bk_golden_small"),
        "clone_strategy = file_copy was not used"
    );
    cfg.options.insert("clone_strategy".into(), "fast".into());
    let adapter = Registry::default().get("postgres").unwrap();
    let err = rt
        .block_on(adapter.clone_slice(&small, &slice("bk_w_bad"), &cfg))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("clone_strategy = \"fast\"") && err.contains("\"wal_log\""),
        "{err}"
    );
}

#[test]
fn two_slices_cannot_reach_each_other() {
    let pg = PgServer::start();
    let rt = runtime();
    let (a, b) = (slice("bk_acme_one_db"), slice("bk_acme_two_db"));
    let (url_a, url_b) = rt.block_on(async {
        for s in [&a, &b] {
            Postgres.provision(s, &pg.cfg()).await.unwrap();
        }
        (
            Postgres.resolve(&a, &pg.cfg()).await.unwrap().url,
            Postgres.resolve(&b, &pg.cfg()).await.unwrap().url,
        )
    });
    pg.query(
        &url_a,
        "CREATE TABLE secrets (v text); INSERT INTO secrets VALUES ('a')",
    );

    // A's role and password against B's database, and the other way round: refused by
    // the server itself.
    for (who, into) in [(&a, &b), (&b, &a)] {
        let cross = pg.url(&who.name, &who.secret, &into.name);
        let err = pg.try_query(&cross, "SELECT 1").unwrap_err();
        assert!(
            err.contains("permission denied for database"),
            "{} reached {}: {err}",
            who.name,
            into.name
        );
    }
    // B's own database has nothing of A's.
    assert_eq!(
        pg.query(
            &url_b,
            "SELECT count(*) FROM pg_tables WHERE tablename = 'secrets'"
        ),
        [["0"]]
    );
    // No PUBLIC entry in either database's ACL.
    for s in [&a, &b] {
        let acl = pg.admin(&format!(
            "SELECT datacl::text FROM pg_database WHERE datname = '{}'",
            s.name
        ));
        assert!(
            !acl[0][0].contains("{=") && !acl[0][0].contains(",="),
            "{acl:?}"
        );
    }

    rt.block_on(async {
        for s in [&a, &b] {
            Postgres.teardown(s, &pg.cfg()).await.unwrap();
        }
    });
    pg.assert_no_slices();
}

#[test]
fn provisioning_again_is_idempotent_and_heals_a_changed_password() {
    let pg = PgServer::start();
    let rt = runtime();
    let mut s = slice("bk_acme_heal_db");
    let url = rt.block_on(async {
        Postgres.provision(&s, &pg.cfg()).await.unwrap();
        Postgres.resolve(&s, &pg.cfg()).await.unwrap().url
    });
    pg.query(
        &url,
        "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)",
    );

    rt.block_on(Postgres.provision(&s, &pg.cfg())).unwrap();
    assert_eq!(pg.query(&url, "SELECT v FROM kept"), [["42"]]);

    // Someone changes the password and opens the database to everyone: provision heals.
    pg.admin(&format!(
        "ALTER ROLE {0} PASSWORD 'changed'; GRANT CONNECT ON DATABASE {0} TO PUBLIC",
        s.name
    ));
    let err = pg.try_query(&url, "SELECT 1").unwrap_err();
    assert!(err.contains("password authentication failed"), "{err}");
    rt.block_on(Postgres.provision(&s, &pg.cfg())).unwrap();
    assert_eq!(pg.query(&url, "SELECT v FROM kept"), [["42"]]);
    let acl = pg.admin(&format!(
        "SELECT datacl::text FROM pg_database WHERE datname = '{}'",
        s.name
    ));
    assert!(
        !acl[0][0].contains("{=") && !acl[0][0].contains(",="),
        "{acl:?}"
    );

    // A new secret replaces the old one; the data stays.
    s.secret = random_secret().unwrap();
    let new_url = rt.block_on(async {
        Postgres.provision(&s, &pg.cfg()).await.unwrap();
        Postgres.resolve(&s, &pg.cfg()).await.unwrap().url
    });
    assert!(pg.try_query(&url, "SELECT 1").is_err());
    assert_eq!(pg.query(&new_url, "SELECT v FROM kept"), [["42"]]);
    assert_eq!(pg.slice_databases(), [s.name.as_str()]);
    assert_eq!(pg.slice_roles(), [s.name.as_str()]);

    rt.block_on(Postgres.teardown(&s, &pg.cfg())).unwrap();
    pg.assert_no_slices();
}

#[test]
fn teardown_leaves_nothing_even_with_an_open_connection() {
    let pg = PgServer::start();
    let rt = runtime();
    let s = slice("bk_acme_busy_db");
    rt.block_on(async {
        Postgres.provision(&s, &pg.cfg()).await.unwrap();
        let url = Postgres.resolve(&s, &pg.cfg()).await.unwrap().url;
        // An application still connected to its slice, and one of its sessions parked in
        // the `postgres` database (PUBLIC may connect there on a user's server).
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        client
            .batch_execute("CREATE TABLE t (v int); INSERT INTO t VALUES (1)")
            .await
            .unwrap();
        let elsewhere = pg.url(&s.name, &s.secret, "postgres");
        let (other, conn) = tokio_postgres::connect(&elsewhere, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        other.batch_execute("SELECT 1").await.unwrap();

        Postgres.teardown(&s, &pg.cfg()).await.unwrap();

        assert!(client.batch_execute("SELECT 1").await.is_err());
        assert!(other.batch_execute("SELECT 1").await.is_err());
    });
    pg.assert_no_slices();
    assert_eq!(
        pg.admin("SELECT count(*) FROM pg_stat_activity WHERE usename = 'bk_acme_busy_db'"),
        [["0"]]
    );
}

#[test]
fn teardown_of_a_missing_slice_succeeds() {
    let pg = PgServer::start();
    let rt = runtime();
    let s = slice("bk_acme_never_db");
    rt.block_on(async {
        Postgres.teardown(&s, &pg.cfg()).await.unwrap();
        Postgres.provision(&s, &pg.cfg()).await.unwrap();
        Postgres.teardown(&s, &pg.cfg()).await.unwrap();
        Postgres.teardown(&s, &pg.cfg()).await.unwrap();
    });
    pg.assert_no_slices();
}

#[test]
fn an_unreachable_server_is_a_transient_error_naming_it_without_the_password() {
    let port = free_port();
    let cfg = cfg_for(&format!(
        "postgres://postgres:sekrit-admin-pw@127.0.0.1:{port}/postgres"
    ));
    let s = slice("bk_acme_down_db");
    let rt = runtime();
    let started = Instant::now();
    let errors = rt.block_on(async {
        vec![
            Postgres.provision(&s, &cfg).await.unwrap_err(),
            Postgres.teardown(&s, &cfg).await.unwrap_err(),
            Postgres.list(&cfg).await.unwrap_err(),
        ]
    });
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    for err in errors {
        let text = err.to_string();
        match &err {
            AdapterError::Unreachable { server, .. } => {
                assert_eq!(server, &format!("postgres://127.0.0.1:{port}"))
            }
            other => panic!("not Unreachable: {other:?}"),
        }
        assert!(err.transient());
        assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
        assert!(!text.contains("sekrit-admin-pw"), "{text}");
        assert!(!text.contains(&s.secret), "{text}");
    }
}

#[test]
fn a_server_that_never_answers_is_unreachable_within_the_handshake_bound() {
    // Accepts connections (the kernel's backlog) but never says a word.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let cfg = cfg_for(&format!(
        "postgres://postgres:pw-silent-1@127.0.0.1:{port}/postgres"
    ));
    let started = Instant::now();
    let err = runtime()
        .block_on(Postgres.provision(&slice("bk_acme_mute_db"), &cfg))
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert!(err.transient(), "{err:?}");
    assert!(err.to_string().contains("no answer"), "{err}");
    drop(silent);
}

#[test]
fn a_wrong_admin_password_is_unreachable_saying_authentication_failed() {
    let pg = PgServer::start();
    let cfg = cfg_for(&pg.url("postgres", "wrong-admin-password", "postgres"));
    let s = slice("bk_acme_auth_db");
    let err = runtime()
        .block_on(Postgres.provision(&s, &cfg))
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, AdapterError::Unreachable { .. }), "{err:?}");
    assert!(
        text.contains("password authentication failed for user \"postgres\""),
        "{text}"
    );
    assert!(
        text.contains(&format!("postgres://127.0.0.1:{}", pg.port)),
        "{text}"
    );
    assert!(!text.contains("wrong-admin-password"), "{text}");
    assert!(!text.contains(&pg.password), "{text}");
    pg.assert_no_slices();
}

#[test]
fn quotes_and_backslashes_in_names_and_secrets_cannot_inject_sql() {
    let pg = PgServer::start();
    let rt = runtime();
    let s = Slice {
        name: r#"bk_x"; DROP DATABASE postgres; --'q"#.to_owned(),
        secret: r#"it's'; DROP ROLE postgres; -- \' \\ "x" $$"#.to_owned(),
    };
    let url = rt.block_on(async {
        Postgres.provision(&s, &pg.cfg()).await.unwrap();
        Postgres.resolve(&s, &pg.cfg()).await.unwrap().url
    });
    assert_eq!(
        pg.query(&url, "SELECT current_user, current_database()"),
        [[s.name.clone(), s.name.clone()]]
    );
    assert!(pg.databases().contains(&"postgres".to_owned()));
    assert!(pg.roles().contains(&"postgres".to_owned()));
    assert_eq!(pg.slice_databases(), [s.name.as_str()]);

    rt.block_on(Postgres.teardown(&s, &pg.cfg())).unwrap();
    pg.assert_no_slices();
    assert!(pg.databases().contains(&"postgres".to_owned()));
}

#[test]
fn databases_binky_did_not_make_are_never_listed_taken_over_or_dropped() {
    let pg = PgServer::start();
    let rt = runtime();
    let (a, b) = (slice("bk_acme_b_db"), slice("bk_acme_a_db"));
    pg.admin("CREATE DATABASE bk_foreign");
    pg.admin("CREATE DATABASE other");
    let foreign = slice("bk_foreign");
    rt.block_on(async {
        for s in [&a, &b] {
            Postgres.provision(s, &pg.cfg()).await.unwrap();
        }
        assert_eq!(
            Postgres.list(&pg.cfg()).await.unwrap(),
            ["bk_acme_a_db", "bk_acme_b_db"]
        );
        let err = Postgres.provision(&foreign, &pg.cfg()).await.unwrap_err();
        assert!(matches!(err, AdapterError::Config(_)), "{err:?}");
        assert!(err.to_string().contains("binky did not make"), "{err}");
        Postgres.teardown(&foreign, &pg.cfg()).await.unwrap();
        for s in [&a, &b] {
            Postgres.teardown(s, &pg.cfg()).await.unwrap();
        }
        assert_eq!(
            Postgres.list(&pg.cfg()).await.unwrap(),
            Vec::<String>::new()
        );
    });
    assert_eq!(pg.slice_databases(), ["bk_foreign"]);
    assert!(pg.databases().contains(&"other".to_owned()));
    assert_eq!(pg.slice_roles(), Vec::<String>::new());
}

#[test]
fn an_admin_with_createrole_and_createdb_but_not_superuser_can_provision_and_tear_down() {
    let pg = PgServer::start();
    pg.admin("CREATE ROLE provisioner LOGIN CREATEROLE CREATEDB PASSWORD 'prov-pw-123'");
    let cfg = cfg_for(&pg.url("provisioner", "prov-pw-123", "postgres"));
    let rt = runtime();
    let s = slice("bk_acme_cloud_db");
    let url = rt.block_on(async {
        Postgres.provision(&s, &cfg).await.unwrap();
        Postgres.provision(&s, &cfg).await.unwrap();
        Postgres.resolve(&s, &cfg).await.unwrap().url
    });
    pg.query(&url, "CREATE TABLE t (v int)");
    rt.block_on(Postgres.teardown(&s, &cfg)).unwrap();
    pg.assert_no_slices();
}

#[test]
fn admin_urls_asking_for_tls_or_missing_are_refused_saying_what_to_do() {
    let rt = runtime();
    let s = slice("bk_acme_tls_db");
    let err = rt
        .block_on(Postgres.provision(
            &s,
            &cfg_for("postgres://postgres:tls-pw-1@127.0.0.1:1/postgres?sslmode=require"),
        ))
        .unwrap_err();
    assert!(matches!(err, AdapterError::Config(_)), "{err:?}");
    assert!(
        err.to_string()
            .contains("TLS to the admin server is not supported yet"),
        "{err}"
    );
    assert!(!err.to_string().contains("tls-pw-1"), "{err}");

    let err = rt
        .block_on(Postgres.provision(&s, &AdapterConfig::default()))
        .unwrap_err();
    assert!(matches!(err, AdapterError::Config(_)), "{err:?}");
    assert!(err.to_string().contains("admin_url = "), "{err}");
}

// ---------------------------------------------------------------------------------------
// The managed server.

#[test]
fn the_managed_server_starts_and_keeps_its_data_across_a_stop_and_a_restart() {
    require_pg();
    let rt = runtime();
    let mut m = Managed::new("postgres");
    let started = rt
        .block_on(binky::servers::postgres::start(&m.ctx))
        .unwrap_or_else(|e| panic!("{e}"));
    m.pid = Some(started.pid);
    assert_eq!(
        started.admin_url,
        format!(
            "postgresql://postgres:{}@127.0.0.1:{}/postgres",
            m.ctx.password, m.ctx.port
        )
    );
    assert!(
        started.version.starts_with(|c: char| c.is_ascii_digit()),
        "{}",
        started.version
    );
    // The recorded pid is the postmaster itself, leader of its own process group.
    let pidfile = std::fs::read_to_string(m.data().join("postmaster.pid")).unwrap();
    assert_eq!(pidfile.lines().next().unwrap(), started.pid.to_string());
    let stat = binky_platform::proc::stat(started.pid).unwrap();
    assert_eq!(stat.pgrp, started.pid);
    if nix::unistd::geteuid().is_root() {
        // PostgreSQL runs as `postgres`, its data outside the 0700 home, which stays so.
        let meta = std::fs::symlink_metadata(&m.ctx.data_dir).unwrap();
        assert!(meta.file_type().is_symlink());
        assert!(m
            .data()
            .starts_with(binky::servers::postgres::ROOT_DATA_BASE));
        let home_mode = std::fs::metadata(m.home.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(home_mode & 0o777, 0o700);
        let status = std::fs::read_to_string(format!("/proc/{}/status", started.pid)).unwrap();
        let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
        let pg_uid = nix::unistd::User::from_name("postgres")
            .unwrap()
            .unwrap()
            .uid;
        assert!(
            uid_line.split_whitespace().nth(1) == Some(&pg_uid.to_string()),
            "{uid_line}"
        );
    }
    // It listens on loopback only (postmaster.pid's sixth line: its listen address).
    assert_eq!(pidfile.lines().nth(5), Some("127.0.0.1"), "{pidfile}");
    assert!(listening(m.ctx.port));

    let bin = require_pg();
    psql(
        &bin,
        &started.admin_url,
        "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('x')",
    )
    .unwrap();
    // A slice on it: its role can reach its database and no other, not even `postgres`.
    let s = slice("bk_acme_main_db");
    let cfg = cfg_for(&started.admin_url);
    let url = rt.block_on(async {
        Postgres.provision(&s, &cfg).await.unwrap();
        Postgres.resolve(&s, &cfg).await.unwrap().url
    });
    psql(
        &bin,
        &url,
        "CREATE TABLE mine (v int); INSERT INTO mine VALUES (7)",
    )
    .unwrap();
    let port = m.ctx.port;
    for db in ["postgres", "template1"] {
        let other = format!("postgres://{}:{}@127.0.0.1:{port}/{db}", s.name, s.secret);
        let err = psql(&bin, &other, "SELECT 1").unwrap_err();
        assert!(
            err.contains("permission denied for database"),
            "{db}: {err}"
        );
    }

    m.stop(&rt);
    wait_until("port released", Duration::from_secs(10), || {
        !listening(port)
    });

    let again = rt
        .block_on(binky::servers::postgres::start(&m.ctx))
        .unwrap_or_else(|e| panic!("{e}"));
    m.pid = Some(again.pid);
    assert_ne!(again.pid, started.pid);
    assert_eq!(again.admin_url, started.admin_url);
    assert_eq!(
        psql(&bin, &again.admin_url, "SELECT v FROM kept").unwrap(),
        [["x"]]
    );
    assert_eq!(psql(&bin, &url, "SELECT v FROM mine").unwrap(), [["7"]]);
    rt.block_on(Postgres.teardown(&s, &cfg)).unwrap();
    m.stop(&rt);
}

#[test]
fn the_managed_server_with_another_password_fails_fast_and_leaves_no_process() {
    require_pg();
    let rt = runtime();
    let mut m = Managed::new("postgres");
    let started = rt
        .block_on(binky::servers::postgres::start(&m.ctx))
        .unwrap_or_else(|e| panic!("{e}"));
    m.pid = Some(started.pid);
    m.stop(&rt);

    let mut wrong = m.ctx.clone();
    wrong.password = random_secret().unwrap();
    let began = Instant::now();
    let err = rt
        .block_on(binky::servers::postgres::start(&wrong))
        .unwrap_err();
    assert!(
        began.elapsed() < Duration::from_secs(15),
        "{:?}",
        began.elapsed()
    );
    let text = err.to_string();
    assert!(matches!(err, ServerError::Start { .. }), "{err:?}");
    assert!(text.contains("refuses binky's admin password"), "{text}");
    assert!(
        !text.contains(&wrong.password) && !text.contains(&m.ctx.password),
        "{text}"
    );
    assert!(!listening(m.ctx.port), "a server was left listening");
    assert!(
        !m.data().join("postmaster.pid").exists(),
        "a postmaster was left"
    );
    // The data directory is untouched: the right password still works.
    let again = rt
        .block_on(binky::servers::postgres::start(&m.ctx))
        .unwrap_or_else(|e| panic!("{e}"));
    m.pid = Some(again.pid);
    m.stop(&rt);
}

#[test]
fn the_managed_server_on_a_taken_port_fails_quoting_its_log_and_leaves_no_process() {
    require_pg();
    let rt = runtime();
    let mut m = Managed::new("postgres");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    m.ctx.port = taken.local_addr().unwrap().port();
    let err = rt
        .block_on(binky::servers::postgres::start(&m.ctx))
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ServerError::Start { .. }), "{err:?}");
    assert!(text.contains("postgres exited"), "{text}");
    assert!(
        text.contains("could not bind") || text.contains("already in use"),
        "{text}"
    );
    assert!(text.contains(&m.ctx.log.display().to_string()), "{text}");
    assert!(!text.contains(&m.ctx.password), "{text}");
    assert!(
        !m.data().join("postmaster.pid").exists(),
        "a postmaster was left"
    );
    // Initialised all the same: the next start on a free port uses the data as it is.
    assert!(m.data().join("PG_VERSION").is_file());
    drop(taken);
    m.ctx.port = free_port();
    let started = rt
        .block_on(binky::servers::postgres::start(&m.ctx))
        .unwrap_or_else(|e| panic!("{e}"));
    m.pid = Some(started.pid);
    m.stop(&rt);
}

/// The pids of processes whose command line names `path`.
fn processes_naming(path: &Path) -> Vec<u32> {
    let needle = path.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(&needle))
                .unwrap_or(false)
        })
        .collect()
}

/// Kills what is left of a managed server under a test home, whatever the test did.
struct KillUnder(PathBuf);

impl Drop for KillUnder {
    fn drop(&mut self) {
        for pid in processes_naming(&self.0) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        if let Ok(target) = std::fs::read_link(&self.0) {
            if let Some(entry) = target.parent() {
                let _ = std::fs::remove_dir_all(entry);
            }
        }
    }
}

#[test]
fn a_daemon_stopped_right_after_the_data_directory_was_made_starts_the_server_again_with_its_password(
) {
    // The storm test once found this: the daemon killed after `initdb` made the data
    // directory but before the server was recorded running; the next daemon made up a new
    // password, which the data directory refused. Dropping the start there is that kill.
    require_pg();
    let rt = runtime();
    let home_dir = tempfile::tempdir().unwrap();
    let home = binky::paths::Home::at(home_dir.path().join("home"));
    home.ensure().unwrap();
    let data = home.root().join("servers/postgres/data");
    let _cleanup = KillUnder(data.clone());
    let store = binky_controllers::store::Store::open(&home.db()).unwrap();
    let servers = binky::servers::Servers::new(home.clone(), store.clone());
    let whole = data.join("PG_VERSION");
    let dropped = rt.block_on(async {
        tokio::select! {
            started = servers.ensure(binky::servers::Kind::Postgres) => {
                panic!("the start finished before the data directory was seen: {started:?}")
            }
            _ = async {
                while !whole.exists() {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            } => true,
        }
    });
    assert!(dropped);
    drop(servers);
    let name = binky::servers::ServerName::shared(binky::servers::Kind::Postgres);
    let recorded = binky::servers::Servers::new(home.clone(), store.clone())
        .row(&name)
        .unwrap();
    assert!(
        recorded
            .as_ref()
            .is_none_or(|r| r.state != binky_controllers::store::ServerState::Running),
        "the drop came too late to test anything"
    );
    // A server the dropped start spawned has written its pid file before the next start
    // looks for it (as it has long done when a killed daemon comes back).
    let real = std::fs::canonicalize(&data).unwrap();
    wait_until(
        "a spawned server to write its pid file",
        Duration::from_secs(10),
        || real.join("postmaster.pid").exists() || processes_naming(&real).is_empty(),
    );

    // The next daemon says it was not started, and starts it with its password.
    let servers = binky::servers::Servers::new(home.clone(), store);
    if recorded.is_some() {
        assert_eq!(servers.fail_interrupted_starts().unwrap(), 1);
        let row = servers.row(&name).unwrap().unwrap();
        assert_eq!(row.state, binky_controllers::store::ServerState::Failed);
        assert!(row.message.contains("daemon stopped"), "{}", row.message);
    }
    let url = rt
        .block_on(servers.ensure(binky::servers::Kind::Postgres))
        .unwrap_or_else(|e| panic!("{e}"));
    if let Some(recorded) = recorded {
        assert_eq!(url, recorded.admin_url, "the recorded password is kept");
    }
    assert_eq!(psql(&require_pg(), &url, "SELECT 1").unwrap(), [["1"]]);
    rt.block_on(servers.stop(None)).unwrap();
    wait_until("no server left", Duration::from_secs(10), || {
        processes_naming(&real).is_empty()
    });
}
