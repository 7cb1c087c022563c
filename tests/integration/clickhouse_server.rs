//! ClickHouse: a private `clickhouse-server` per test (the [`ClickHouseServer`] fixture,
//! shared with `slices_clickhouse`), and the `clickhouse` adapter proven against it: a
//! database per world, teardown that leaves nothing, errors that say what to fix.
//!
//! Honest note: the machines binky is tested on have Debian's ClickHouse **18.16**, which
//! has no SQL users (20.5 added `CREATE USER`). There, every world's address carries the
//! admin's credentials and worlds are kept apart **by database only**: these tests prove
//! that a world using its own address meets only its own database, and — asserting the
//! limit rather than hiding it — that its address could reach another world's database.
//! On a server with users (the fixture gives its admin `access_management`), the same
//! tests instead prove that the server refuses a world's user on another world's database.
//!
//! Every test starts its own server in a temp dir on free loopback ports and stops it on
//! drop. Without `clickhouse-server` the tests fail (never skip): ./scripts/test installs
//! it.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use binky::adapters::clickhouse::ClickHouse;
use binky::adapters::http::{Endpoint, Http};
use binky::adapters::{Adapter, AdapterConfig, AdapterError, Address, Registry, Slice};
use hyper::Method;
use sha2::{Digest, Sha256};

use crate::redis_server::{block, free_port};

/// The packaged server configuration the fixture starts from.
const CONFIG_TEMPLATE: &str = "/etc/clickhouse-server/config.xml";
const INSTALL_HINT: &str = "clickhouse-server is not installed: run ./scripts/test, which \
                            installs it (or `apt-get install clickhouse-server`)";

/// A private clickhouse-server on 127.0.0.1: the packaged config with its paths in a temp
/// dir and its ports free ones, and a `default` user with a password. Stopped on drop.
pub struct ClickHouseServer {
    /// `http://default:<password>@127.0.0.1:<http port>`.
    pub admin_url: String,
    /// The HTTP interface's port.
    pub port: u16,
    /// The `default` user's password.
    pub password: String,
    /// Its directory (logs under `log/`, data under `data/`).
    pub dir: PathBuf,
    child: Child,
    _tmp: tempfile::TempDir,
}

/// The server binary: `clickhouse-server` on PATH or in /usr/sbin (Debian's).
pub fn clickhouse_binary() -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join("clickhouse-server"))
        .find(|p| p.is_file())
}

/// Set every `<tag>…</tag>` (commented-out ones too, harmlessly) to `value`.
fn set_tag(xml: &str, tag: &str, value: &str) -> String {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = String::with_capacity(xml.len());
    let mut rest = xml;
    while let Some(start) = rest.find(&open) {
        let after = start + open.len();
        let Some(len) = rest[after..].find(&close) else {
            break;
        };
        out.push_str(&rest[..after]);
        out.push_str(value);
        rest = &rest[after + len..];
    }
    out.push_str(rest);
    out
}

/// The packaged config made private: paths under `dir`, ports from `ports`, loopback only.
fn private_config(template: &str, dir: &Path, ports: &[(&str, u16)]) -> String {
    let mut xml = template
        .replace("/var/lib/clickhouse/", &format!("{}/data/", dir.display()))
        .replace(
            "/var/log/clickhouse-server/",
            &format!("{}/log/", dir.display()),
        );
    for (tag, port) in ports {
        xml = set_tag(&xml, tag, &port.to_string());
    }
    // Loopback only, whatever the package listens on.
    xml = xml
        .lines()
        .filter(|l| !l.contains("<listen_host>"))
        .collect::<Vec<_>>()
        .join("\n");
    xml.replacen(
        "</http_port>",
        "</http_port>\n    <listen_host>127.0.0.1</listen_host>",
        1,
    )
}

/// A users.xml with `default`, whose password is given as its SHA-256 (so it is in no file
/// as text), reachable from loopback only, allowed to manage users where the server has SQL
/// users; and `reader`, the same password with a read-only profile (for error tests). The
/// package's users.xml is not copied: it has a password-less `readonly` user.
fn users_xml(password: &str) -> String {
    let hash: String = Sha256::digest(password.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        r#"<?xml version="1.0"?>
<yandex>
    <profiles>
        <default></default>
        <readonly><readonly>1</readonly></readonly>
    </profiles>
    <users>
        <default>
            <password_sha256_hex>{hash}</password_sha256_hex>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
            <access_management>1</access_management>
        </default>
        <reader>
            <password_sha256_hex>{hash}</password_sha256_hex>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>readonly</profile>
            <quota>default</quota>
        </reader>
    </users>
    <quotas>
        <default>
            <interval>
                <duration>3600</duration>
                <queries>0</queries><errors>0</errors><result_rows>0</result_rows>
                <read_rows>0</read_rows><execution_time>0</execution_time>
            </interval>
        </default>
    </quotas>
</yandex>
"#
    )
}

impl ClickHouseServer {
    /// Start one; panics (failing the test) when clickhouse-server is missing.
    pub fn start() -> ClickHouseServer {
        let bin = clickhouse_binary().unwrap_or_else(|| panic!("{INSTALL_HINT}"));
        let template = std::fs::read_to_string(CONFIG_TEMPLATE)
            .unwrap_or_else(|e| panic!("{CONFIG_TEMPLATE}: {e}; {INSTALL_HINT}"));
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().to_owned();
        let password = binky_controllers::slice::random_secret();
        std::fs::write(dir.join("users.xml"), users_xml(&password)).expect("users.xml");
        // A port taken between the probe and the bind makes the server exit: try others.
        for _ in 0..5 {
            let port = free_port();
            let ports = [
                ("http_port", port),
                ("tcp_port", free_port()),
                ("interserver_http_port", free_port()),
                ("mysql_port", free_port()),
                ("postgresql_port", free_port()),
                ("https_port", free_port()),
                ("tcp_port_secure", free_port()),
            ];
            std::fs::write(
                dir.join("config.xml"),
                private_config(&template, &dir, &ports),
            )
            .expect("config.xml");
            let out = std::fs::File::create(dir.join("server.out")).expect("server.out");
            let mut child = Command::new(&bin)
                .arg(format!(
                    "--config-file={}",
                    dir.join("config.xml").display()
                ))
                .current_dir(&dir)
                .stdin(Stdio::null())
                .stdout(out.try_clone().expect("dup"))
                .stderr(out)
                .spawn()
                .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
            if wait_ping(&mut child, port) {
                return ClickHouseServer {
                    admin_url: format!("http://default:{password}@127.0.0.1:{port}"),
                    port,
                    password,
                    dir,
                    child,
                    _tmp: tmp,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "clickhouse-server did not start: {}{}",
            std::fs::read_to_string(dir.join("server.out")).unwrap_or_default(),
            std::fs::read_to_string(dir.join("log/clickhouse-server.err.log")).unwrap_or_default()
        );
    }

    /// The adapter configuration for this server.
    pub fn cfg(&self) -> AdapterConfig {
        AdapterConfig {
            admin_url: Some(self.admin_url.clone()),
            ..AdapterConfig::default()
        }
    }

    /// A statement as admin; panics on an error.
    pub fn admin(&self, sql: &str) -> String {
        query(&self.admin_url, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// `(major, minor)`.
    pub fn version(&self) -> (u32, u32) {
        let v = self.admin("SELECT version()");
        let mut parts = v.trim().split('.').map(|p| p.parse().expect("a number"));
        (parts.next().expect("major"), parts.next().expect("minor"))
    }

    /// Does this server have SQL users (20.5+)?
    pub fn has_users(&self) -> bool {
        self.version() >= binky::adapters::clickhouse::USERS_SINCE
    }

    /// Every database.
    pub fn databases(&self) -> Vec<String> {
        self.admin("SELECT name FROM system.databases ORDER BY name")
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Every SQL user (none before 20.5).
    pub fn users(&self) -> Vec<String> {
        if !self.has_users() {
            return Vec::new();
        }
        self.admin("SELECT name FROM system.users ORDER BY name")
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Databases and users binky made (`bk_…`).
    pub fn slices_left(&self) -> (Vec<String>, Vec<String>) {
        let ours = |v: Vec<String>| v.into_iter().filter(|n| n.starts_with("bk_")).collect();
        (ours(self.databases()), ours(self.users()))
    }
}

impl Drop for ClickHouseServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait until `GET /ping` answers `Ok.`, or the child exits.
fn wait_ping(child: &mut Child, port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return false;
        }
        if ping(port) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn ping(port: u16) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /ping HTTP/1.0\r\nHost: x\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split("\r\n\r\n").nth(1).map(str::trim) == Some("Ok.")
}

/// Run `sql` with the credentials and database of `url` (`http://u:p@host:port/db`, as a
/// ClickHouse client takes it): the output, or `HTTP <status>: <ClickHouse's message>`.
pub fn query(url: &str, sql: &str) -> Result<String, String> {
    let mut ep = Endpoint::parse(url, 8123).map_err(|e| e.to_string())?;
    let db = ep.base_path.trim_start_matches('/').to_owned();
    ep.base_path.clear();
    let path = if db.is_empty() {
        "/".to_owned()
    } else {
        format!("/?database={db}")
    };
    let body = Some(("text/plain", sql.as_bytes().to_vec()));
    let resp =
        block(Http::new().call(&ep, Method::POST, &path, body, &[])).map_err(|e| e.to_string())?;
    if resp.ok() {
        Ok(resp.text(1 << 20))
    } else {
        Err(format!("HTTP {}: {}", resp.status, resp.text(1000)))
    }
}

/// A slice with a fresh secret.
pub fn slice(name: &str) -> Slice {
    Slice {
        name: name.to_owned(),
        secret: binky_controllers::slice::random_secret(),
    }
}

/// Provision `slice` on `server` and return its address.
pub fn provisioned(server: &ClickHouseServer, slice: &Slice) -> Address {
    block(async {
        ClickHouse
            .provision(slice, &server.cfg())
            .await
            .expect("provision");
        ClickHouse
            .resolve(slice, &server.cfg())
            .await
            .expect("resolve")
    })
}

#[test]
fn the_fixture_serves_only_loopback_with_a_password() {
    let server = ClickHouseServer::start();
    assert_eq!(query(&server.admin_url, "SELECT 1").as_deref(), Ok("1"));
    let anonymous = query(&format!("http://127.0.0.1:{}", server.port), "SELECT 1");
    assert!(anonymous.is_err(), "no password, yet: {anonymous:?}");
    let wrong = query(
        &format!("http://default:wrong@127.0.0.1:{}", server.port),
        "SELECT 1",
    );
    assert!(wrong.is_err(), "{wrong:?}");
    let config = std::fs::read_to_string(server.dir.join("config.xml")).expect("config");
    assert!(
        !config.contains("/var/lib/clickhouse"),
        "a system path is left"
    );
    let users = std::fs::read_to_string(server.dir.join("users.xml")).expect("users");
    assert!(
        !users.contains(&server.password),
        "the password is in a file as text"
    );
}

#[test]
fn two_worlds_each_write_only_their_own_database() {
    let server = ClickHouseServer::start();
    let a = slice("bk_shop_login_fix_ch");
    let b = slice("bk_shop_checkout_ch");
    let a_addr = provisioned(&server, &a);
    let b_addr = provisioned(&server, &b);
    assert_eq!(a_addr.tokens["database"], a.name);
    assert!(
        a_addr
            .url
            .ends_with(&format!("127.0.0.1:{}/{}", server.port, a.name)),
        "{}",
        a_addr.url
    );

    // A makes a table and writes rows through its address alone (the path is its database).
    query(
        &a_addr.url,
        "CREATE TABLE events (id UInt32, what String) ENGINE = Memory",
    )
    .expect("A creates a table");
    query(
        &a_addr.url,
        "INSERT INTO events VALUES (1, 'login'), (2, 'logout')",
    )
    .expect("A inserts");
    assert_eq!(
        query(&a_addr.url, "SELECT count() FROM events").as_deref(),
        Ok("2")
    );
    // B's database does not have it, and B's address does not see it.
    assert_eq!(
        server.admin(&format!(
            "SELECT count() FROM system.tables WHERE database = '{}'",
            b.name
        )),
        "0"
    );
    let from_b = query(&b_addr.url, "SELECT count() FROM events");
    assert!(
        from_b.as_ref().is_err_and(|e| e.contains("doesn't exist")),
        "{from_b:?}"
    );
    // B writes a table of the same name in its own database: two tables, no clash.
    query(
        &b_addr.url,
        "CREATE TABLE events (id UInt32) ENGINE = Memory",
    )
    .expect("B creates");
    assert_eq!(
        query(&b_addr.url, "SELECT count() FROM events").as_deref(),
        Ok("0")
    );
    assert_eq!(
        query(&a_addr.url, "SELECT count() FROM events").as_deref(),
        Ok("2")
    );

    let a_reads_b = query(
        &a_addr.url,
        &format!("SELECT count() FROM {}.events", b.name),
    );
    if server.has_users() {
        // A's own user, refused on B's database by the server.
        assert_eq!(a_addr.tokens["user"], a.name);
        assert!(!a_addr.url.contains(&server.password));
        assert!(
            a_reads_b
                .as_ref()
                .is_err_and(|e| e.contains("ACCESS_DENIED") || e.contains("Not enough privileges")),
            "{a_reads_b:?}"
        );
    } else {
        // ClickHouse before 20.5 (Debian 12's 18.16) has no SQL users: the address carries
        // the admin's credentials, and the server would not stop A reading B's database by
        // name. This is the documented limit (src/adapters/clickhouse.rs); assert it, so the
        // day the fixture's server has users this branch stops running.
        assert!(!a_addr.tokens.contains_key("user"));
        assert!(a_addr
            .url
            .contains(&format!("default:{}@", server.password)));
        assert_eq!(a_reads_b.as_deref(), Ok("0"));
    }
}

#[test]
fn teardown_leaves_no_database_and_no_user_and_every_verb_is_idempotent() {
    let server = ClickHouseServer::start();
    let a = slice("bk_shop_login_fix_ch");
    let b = slice("bk_shop_checkout_ch");
    let cfg = server.cfg();
    let a_addr = provisioned(&server, &a);
    // Provisioning again changes nothing a world can see, and keeps its data.
    query(&a_addr.url, "CREATE TABLE t (x UInt8) ENGINE = Memory").expect("create");
    query(&a_addr.url, "INSERT INTO t VALUES (7)").expect("insert");
    assert_eq!(provisioned(&server, &a), a_addr);
    assert_eq!(query(&a_addr.url, "SELECT x FROM t").as_deref(), Ok("7"));
    provisioned(&server, &b);

    assert_eq!(
        block(ClickHouse.exists(&a, &cfg)).expect("exists"),
        Some(true)
    );
    let mut listed = block(ClickHouse.list(&cfg)).expect("list");
    listed.sort();
    assert_eq!(listed, [b.name.clone(), a.name.clone()]);

    block(ClickHouse.teardown(&a, &cfg)).expect("teardown");
    let (dbs, users) = server.slices_left();
    assert_eq!(dbs, vec![b.name.clone()], "only B's database is left");
    assert!(!users.contains(&a.name), "A's user outlived it: {users:?}");
    assert_eq!(
        block(ClickHouse.exists(&a, &cfg)).expect("exists"),
        Some(false)
    );
    assert!(query(&a_addr.url, "SELECT x FROM t").is_err());
    block(ClickHouse.teardown(&a, &cfg)).expect("tearing down what is gone succeeds");

    block(ClickHouse.teardown(&b, &cfg)).expect("teardown b");
    assert_eq!(server.slices_left(), (Vec::new(), Vec::new()));
    assert!(block(ClickHouse.list(&cfg)).expect("list").is_empty());
}

#[test]
fn a_server_that_is_down_or_refuses_the_admin_is_transient_and_shows_no_password() {
    let server = ClickHouseServer::start();
    let a = slice("bk_shop_w_ch");
    let closed = free_port();
    let cases = [
        (
            format!("http://default:{}@127.0.0.1:{closed}", server.password),
            server.password.clone(),
            "",
        ),
        (
            format!("http://default:wrong-pw-123@127.0.0.1:{}", server.port),
            "wrong-pw-123".to_owned(),
            "admin_url",
        ),
    ];
    for (url, password, says) in cases {
        let cfg = AdapterConfig {
            admin_url: Some(url.clone()),
            ..AdapterConfig::default()
        };
        let errors = block(async {
            [
                ClickHouse.provision(&a, &cfg).await.err(),
                ClickHouse.resolve(&a, &cfg).await.err(),
                ClickHouse.teardown(&a, &cfg).await.err(),
                ClickHouse.list(&cfg).await.err(),
                ClickHouse.exists(&a, &cfg).await.err(),
            ]
        });
        for err in errors {
            let err = err.unwrap_or_else(|| panic!("{} succeeded", binky::adapters::redact(&url)));
            let text = err.to_string();
            assert!(
                matches!(err, AdapterError::Unreachable { .. }) && err.transient(),
                "{text}"
            );
            assert!(!text.contains(&password), "password in: {text}");
            assert!(!text.contains(&a.secret), "secret in: {text}");
            assert!(text.contains("127.0.0.1") && text.contains(says), "{text}");
        }
    }
    assert_eq!(server.slices_left(), (Vec::new(), Vec::new()));
}

#[test]
fn an_sql_error_is_permanent_and_carries_clickhouses_words() {
    let server = ClickHouseServer::start();
    let a = slice("bk_shop_w_ch");
    // The fixture's `reader` (same password, read-only profile) may not create databases.
    let cfg = AdapterConfig {
        admin_url: Some(server.admin_url.replace("default:", "reader:")),
        ..AdapterConfig::default()
    };
    let err = block(ClickHouse.provision(&a, &cfg)).expect_err("read-only admin");
    let text = err.to_string();
    assert!(matches!(err, AdapterError::Server { .. }), "{text}");
    assert!(text.contains("readonly"), "ClickHouse's own words: {text}");
    assert!(text.contains(&a.name), "says what it was doing: {text}");
    assert!(!text.contains(&server.password), "{text}");
    // A name that could escape its identifier never reaches the server.
    let err = block(ClickHouse.provision(
        &Slice {
            name: "bk_x`; DROP DATABASE system; --".into(),
            secret: "s".into(),
        },
        &server.cfg(),
    ))
    .expect_err("unsafe name");
    assert!(matches!(err, AdapterError::Config(_)), "{err}");
    assert!(server.databases().contains(&"system".to_owned()));
    assert_eq!(server.slices_left(), (Vec::new(), Vec::new()));
}

#[test]
fn clickhouse_is_registered_and_cannot_clone() {
    let registry = Registry::default();
    let adapter = registry.get("clickhouse").expect("clickhouse");
    assert_eq!(adapter.names(), ["clickhouse"]);
    let caps = block(adapter.capabilities(&AdapterConfig::default())).expect("capabilities");
    assert!(!caps.clone);
}
