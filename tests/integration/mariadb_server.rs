//! A private MariaDB for tests ([`MariaDbServer`]), and the tests of binky's managed MariaDB
//! (`binky::servers::mariadb`).
//!
//! Each [`MariaDbServer`] is its own server in a temp dir on a free loopback port, with a
//! generated `root` password and fast, unsafe settings (no doublewrite, no log flush per
//! commit), run as the `mysql` user when the tests run as root; it is killed and its files
//! removed on drop. `mariadb-install-db` takes seconds, so its result is made once per
//! MariaDB version into a cache directory in the temp dir (under a lock) and copied for
//! each server. Without MariaDB installed the tests fail (never skip), saying how to get it.

#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use binky::adapters::AdapterConfig;
use binky::servers::ServerError;
use binky_controllers::adapter::random_secret;

use crate::harness::{listening, wait_until, Managed};

pub use binky_testkit::net::free_port;
use binky_testkit::percent_decode;
pub use binky_testkit::percent_encode;
pub use binky_testkit::servers::mariadb::{mariadb_client, MariaDbBins};

/// The MariaDB programs, or a panic saying how to install them.
pub fn require_mariadb() -> MariaDbBins {
    binky_testkit::servers::mariadb::mariadb_bins().unwrap_or_else(|e| panic!("{e}"))
}

/// Where a `mysql://user:password@host:port/db` URL points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MyUrl {
    pub user: String,
    pub password: String,
    pub host: String,
    pub port: u16,
    pub database: String,
}

/// Parse a slice URL the way a client library would.
pub fn parse_url(url: &str) -> MyUrl {
    let rest = url.split_once("://").unwrap().1;
    let rest = rest.split('?').next().unwrap();
    let (authority, db) = rest.split_once('/').unwrap_or((rest, ""));
    let (userinfo, hostport) = authority.rsplit_once('@').unwrap();
    let (user, password) = userinfo.split_once(':').unwrap();
    let (host, port) = hostport.rsplit_once(':').unwrap();
    MyUrl {
        user: percent_decode(user),
        password: percent_decode(password),
        host: host.to_owned(),
        port: port.parse().unwrap(),
        database: percent_decode(db),
    }
}

/// A private MariaDB server for one test (the kit's, with the adapter's view of it).
pub struct MariaDbServer(binky_testkit::servers::mariadb::MariaDbServer);

impl std::ops::Deref for MariaDbServer {
    type Target = binky_testkit::servers::mariadb::MariaDbServer;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl MariaDbServer {
    /// Start a private server and wait until it takes authenticated connections; panics
    /// (failing the test, never skipping) when MariaDB is missing.
    pub fn start() -> MariaDbServer {
        MariaDbServer(
            binky_testkit::servers::mariadb::MariaDbServer::start()
                .unwrap_or_else(|e| panic!("{e}")),
        )
    }

    /// `mysql://<user>:<password>@127.0.0.1:<port>/<database>`, encoded.
    pub fn url(&self, user: &str, password: &str, database: &str) -> String {
        format!(
            "mysql://{}:{}@127.0.0.1:{}/{}",
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

    /// Rows of `sql` run at a slice URL, or the client's error.
    pub fn try_query(&self, url: &str, sql: &str) -> Result<Vec<Vec<String>>, String> {
        let u = parse_url(url);
        assert_eq!(u.port, self.port, "{url} is not on this server");
        mariadb_client(u.port, &u.user, &u.password, &u.database, sql)
    }

    /// Rows of `sql` run at a slice URL; panics with the server's error.
    pub fn query(&self, url: &str, sql: &str) -> Vec<Vec<String>> {
        self.try_query(url, sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Rows of `sql` run as root.
    pub fn admin(&self, sql: &str) -> Vec<Vec<String>> {
        mariadb_client(self.port, "root", &self.password, "", sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    fn column(&self, sql: &str) -> Vec<String> {
        self.admin(sql)
            .into_iter()
            .map(|mut r| r.swap_remove(0))
            .collect()
    }

    /// Databases named like binky slices (`bk_…`).
    pub fn slice_databases(&self) -> Vec<String> {
        self.column(
            "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA \
             WHERE SCHEMA_NAME LIKE 'bk\\_%' ORDER BY 1",
        )
    }

    /// Accounts named like binky slices, as `user@host`.
    pub fn slice_users(&self) -> Vec<String> {
        self.column(
            "SELECT CONCAT(User, '@', Host) FROM mysql.user WHERE User LIKE 'bk\\_%' ORDER BY 1",
        )
    }

    /// Grants given to slice accounts at the database level (`mysql.db`).
    pub fn slice_grants(&self) -> Vec<String> {
        self.column(
            "SELECT CONCAT(User, ' ', Db) FROM mysql.db WHERE User LIKE 'bk\\_%' ORDER BY 1",
        )
    }

    /// Assert no slice database, user or grant is left.
    pub fn assert_no_slices(&self) {
        assert_eq!(
            self.slice_databases(),
            Vec::<String>::new(),
            "databases left"
        );
        assert_eq!(self.slice_users(), Vec::<String>::new(), "users left");
        assert_eq!(self.slice_grants(), Vec::<String>::new(), "grants left");
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

// ---------------------------------------------------------------------------------------
// The managed server.

#[test]
fn the_managed_mariadb_installs_with_a_password_and_keeps_its_data_across_a_restart() {
    require_mariadb();
    let rt = runtime();
    let mut m = Managed::new("mysql");
    let began = Instant::now();
    let started = rt
        .block_on(binky::servers::mariadb::start(&m.ctx))
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "managed mariadb: installed and started in {:?}",
        began.elapsed()
    );
    m.pid = Some(started.pid);
    assert_eq!(
        started.admin_url,
        format!("mysql://root:{}@127.0.0.1:{}", m.ctx.password, m.ctx.port)
    );
    assert!(started.version.contains("MariaDB"), "{}", started.version);
    // The recorded pid is mariadbd itself, leader of its own process group.
    let pidfile = std::fs::read_to_string(m.data().join("mariadbd.pid")).unwrap();
    assert_eq!(pidfile.trim(), started.pid.to_string());
    let stat = binky_platform::proc::stat(started.pid).unwrap();
    assert_eq!(stat.pgrp, started.pid);
    if nix::unistd::geteuid().is_root() {
        // It runs as `mysql`, its data outside the 0700 home, which stays so.
        let meta = std::fs::symlink_metadata(&m.ctx.data_dir).unwrap();
        assert!(meta.file_type().is_symlink());
        assert!(m
            .data()
            .starts_with(binky::servers::mariadb::ROOT_DATA_BASE));
        let home_mode = std::fs::metadata(m.home.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(home_mode & 0o777, 0o700);
        let status = std::fs::read_to_string(format!("/proc/{}/status", started.pid)).unwrap();
        let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
        let mysql_uid = nix::unistd::User::from_name("mysql").unwrap().unwrap().uid;
        assert_eq!(
            uid_line.split_whitespace().nth(1),
            Some(mysql_uid.to_string().as_str()),
            "{uid_line}"
        );
    }
    let port = m.ctx.port;
    let pw = m.ctx.password.clone();
    let admin = |sql: &str| mariadb_client(port, "root", &pw, "", sql).unwrap();
    // Loopback only; no password-less, anonymous or remote root account; no `test`.
    assert_eq!(
        admin("SELECT @@bind_address, @@skip_name_resolve, @@character_set_server"),
        [["127.0.0.1", "1", "utf8mb4"]]
    );
    assert_eq!(
        admin("SELECT CONCAT(User, '@', Host), authentication_string <> '' FROM mysql.user WHERE User <> 'mariadb.sys' ORDER BY 1"),
        [["root@127.0.0.1", "1"], ["root@localhost", "1"]]
    );
    assert_eq!(
        admin("SELECT COUNT(*) FROM mysql.db"),
        [["0"]],
        "database-level grants left by the install"
    );
    assert!(!admin("SHOW DATABASES").iter().any(|r| r[0] == "test"));
    let err = mariadb_client(port, "root", "", "", "SELECT 1").unwrap_err();
    assert!(err.contains("Access denied"), "{err}");
    let err = mariadb_client(port, "", "", "", "SELECT 1").unwrap_err();
    assert!(err.contains("Access denied"), "{err}");
    // The password file the install read is gone.
    let leftovers: Vec<String> = std::fs::read_dir(m.data().parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".sql"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let log = std::fs::read_to_string(&m.ctx.log).unwrap();
    assert!(
        !log.contains(&m.ctx.password),
        "the password reached the log"
    );

    admin("CREATE DATABASE kept; CREATE TABLE kept.t (v TEXT); INSERT INTO kept.t VALUES ('x')");
    m.stop(&rt);
    wait_until("port released", Duration::from_secs(10), || {
        !listening(port)
    });

    let again = rt
        .block_on(binky::servers::mariadb::start(&m.ctx))
        .unwrap_or_else(|e| panic!("{e}"));
    m.pid = Some(again.pid);
    assert_ne!(again.pid, started.pid);
    assert_eq!(again.admin_url, started.admin_url);
    assert_eq!(admin("SELECT v FROM kept.t"), [["x"]]);
    m.stop(&rt);
}

#[test]
fn the_managed_mariadb_with_another_password_fails_fast_and_leaves_no_process() {
    require_mariadb();
    let rt = runtime();
    let mut m = Managed::new("mysql");
    let started = rt
        .block_on(binky::servers::mariadb::start(&m.ctx))
        .unwrap_or_else(|e| panic!("{e}"));
    m.pid = Some(started.pid);
    m.stop(&rt);

    let mut wrong = m.ctx.clone();
    wrong.password = random_secret().unwrap();
    let began = Instant::now();
    let err = rt
        .block_on(binky::servers::mariadb::start(&wrong))
        .unwrap_err();
    assert!(
        began.elapsed() < Duration::from_secs(20),
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
    wait_until("no server left", Duration::from_secs(10), || {
        !listening(m.ctx.port)
    });
    // The data is untouched: the right password still works.
    let again = rt
        .block_on(binky::servers::mariadb::start(&m.ctx))
        .unwrap_or_else(|e| panic!("{e}"));
    m.pid = Some(again.pid);
    m.stop(&rt);
}

#[test]
fn the_managed_mariadb_on_a_taken_port_fails_quoting_its_log_and_leaves_no_process() {
    require_mariadb();
    let rt = runtime();
    let mut m = Managed::new("mysql");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    m.ctx.port = taken.local_addr().unwrap().port();
    let err = rt
        .block_on(binky::servers::mariadb::start(&m.ctx))
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ServerError::Start { .. }), "{err:?}");
    assert!(text.contains("mariadbd exited"), "{text}");
    assert!(text.contains("Bind on TCP/IP port"), "{text}");
    assert!(text.contains(&m.ctx.log.display().to_string()), "{text}");
    assert!(!text.contains(&m.ctx.password), "{text}");
    // Installed all the same: the next start on a free port uses the data as it is.
    assert!(m.data().join("mysql").is_dir());
    drop(taken);
    m.ctx.port = free_port();
    let started = rt
        .block_on(binky::servers::mariadb::start(&m.ctx))
        .unwrap_or_else(|e| panic!("{e}"));
    m.pid = Some(started.pid);
    m.stop(&rt);
}
