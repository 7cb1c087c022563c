//! The `clickhouse` adapter: each slice is one database on a shared ClickHouse server,
//! reached over its HTTP interface (default port 8123), plus a user of its own where the
//! server has SQL user management.
//!
//! # What a slice is
//! - A database named after the slice (`bk_acme_login_fix_events`).
//! - On ClickHouse 20.5 or newer, a user of the same name whose password is the slice's
//!   secret, with `GRANT ALL ON <db>.*` and the database as its default: the server refuses
//!   it every other world's database.
//! - `${ch.url}` is `http://<user>:<secret>@host:8123/<db>`, the form binky 0.1.2 gave
//!   (its admin URL with the database as the path), which ClickHouse client libraries take
//!   as a DSN. Tokens: `database` always; `user` and `password` when the slice has a user
//!   of its own.
//!
//! # Options
//! None. `admin_url = "http://USER:PASSWORD@HOST:8123"` names the server (falling back to
//! `$BINKY_CLICKHOUSE_URL` in the daemon's environment); its user must be allowed to create
//! databases, and on 20.5+ users (`access_management`). A path in admin_url (a database, in
//! DSN terms) is ignored; query parameters are not used.
//!
//! # Which home made a slice
//! A table of binky's catalog database, `binky_catalog.<slice>` (`TinyLog`, one row: the
//! home; see [`crate::adapters::Maker`]): ClickHouse keeps no comment on a database before
//! 22.x. `CREATE TABLE` lets one of two homes claiming at once make it; teardown drops it
//! last.
//!
//! # Guarantees
//! - Every verb is idempotent. Provisioning again resets the user's password to the secret
//!   and re-grants its database.
//! - The secret never travels in clear: the user is created `IDENTIFIED WITH sha256_hash`,
//!   the hash computed here, so it cannot appear in the server's query log.
//! - Teardown drops the user first (the world's clients lose access), then the database:
//!   nothing of the slice is left.
//! - A server that is down, overloaded or that refuses admin_url's credentials gives
//!   [`AdapterError::Unreachable`] (retried); an SQL error gives [`AdapterError::Server`]
//!   with ClickHouse's text. No message carries a password.
//!
//! # What it cannot guarantee
//! - **ClickHouse before 20.5 has no SQL users** (Debian 12 ships 18.16): users live in the
//!   server's `users.xml`, which binky does not edit. On such a server — and on a newer one
//!   whose admin may not create users (`access_management` off, e.g. the Docker image's
//!   default) — every world's address carries **admin_url's own credentials**: worlds are
//!   kept apart by database name only, and a world that reaches for another's database is
//!   not stopped by the server. binky logs a warning saying so, once per server. `resolve`
//!   decides by trying the slice's own user: if the server accepts it, the address carries
//!   it; otherwise the admin's.
//! - A slice made while its server was older than 20.5 has no user; after an upgrade, the
//!   next provision creates it and the address that follows carries it.
//! - No clone: ClickHouse cannot copy a database server-side short of re-inserting every
//!   row, so `clone_from` falls back to migrate + seed.
//! - Tested against a real server only in version 18.16 (the one Debian 12 ships;
//!   tests/integration/clickhouse_server.rs). The SQL-user path of 20.5+ is checked by the
//!   unit tests below against a scripted local HTTP server, which proves the statements
//!   sent, not that a real 20.5+ server accepts them.

use std::collections::BTreeMap;

use hyper::Method;
use sha2::{Digest, Sha256};

use super::http::{Endpoint, Http};
use super::{Adapter, AdapterConfig, AdapterError, Address, Maker, Result, Slice};

/// The HTTP interface's usual port.
pub const DEFAULT_PORT: u16 = 8123;
/// Where the admin URL comes from when the service has no `admin_url` (binky 0.1.2's).
pub const ENV_URL: &str = super::AdapterKind::Clickhouse.env_var();
/// The first release with `CREATE USER`.
pub const USERS_SINCE: (u32, u32) = (20, 5);
/// Database names binky gives: slice names, at most this long.
const MAX_NAME: usize = 63;

/// ClickHouse error codes meaning "these credentials are not accepted".
const AUTH_CODES: &[u32] = &[
    192, // UNKNOWN_USER
    193, // WRONG_PASSWORD
    194, // REQUIRED_PASSWORD
    516, // AUTHENTICATION_FAILED
];
/// Error codes meaning "admin_url's user may not manage users here".
const NO_USER_MANAGEMENT: &[u32] = &[
    495, // ACCESS_STORAGE_READONLY
    497, // ACCESS_DENIED
    514, // ACCESS_STORAGE_FOR_INSERTION_NOT_FOUND
];
/// Error codes worth retrying (the server is busy, not wrong).
const BUSY_CODES: &[u32] = &[
    202, // TOO_MANY_SIMULTANEOUS_QUERIES
    209, // SOCKET_TIMEOUT
    210, // NETWORK_ERROR
];
/// Logged once per server and reason when worlds there share admin_url's credentials.
const SHARED: super::SharedWarning = super::SharedWarning {
    adapter: "clickhouse",
    consequence: "every world's address on this server carries admin_url's credentials and worlds are kept apart by database name only",
};

/// The clickhouse adapter.
pub struct ClickHouse;

/// A non-2xx answer from ClickHouse.
#[derive(Debug)]
struct Failure {
    status: u16,
    /// The `Code: N` at the start of ClickHouse's message.
    code: Option<u32>,
    text: String,
}

impl Failure {
    fn refused_credentials(&self) -> bool {
        self.code.map_or(matches!(self.status, 401 | 403), |c| {
            AUTH_CODES.contains(&c)
        })
    }
}

/// The shared server, from `admin_url`.
struct Server {
    ep: Endpoint,
    http: Http,
    /// Strings no message may carry.
    secrets: Vec<String>,
}

impl Server {
    fn from_config(cfg: &AdapterConfig) -> Result<Server> {
        let url = cfg.admin_url_or_env(ENV_URL).ok_or_else(|| {
            AdapterError::Config(format!(
                "the clickhouse adapter needs the server's HTTP interface: set \
                         `admin_url = \"http://USER:PASSWORD@HOST:{DEFAULT_PORT}\"` on the \
                         service in binky.toml (or ${ENV_URL}); binky does not run a \
                         ClickHouse server of its own"
            ))
        })?;
        let mut ep = Endpoint::parse(&url, DEFAULT_PORT)?;
        // A path is a database in DSN terms; ClickHouse's HTTP interface takes queries at `/`.
        ep.base_path.clear();
        let secrets = ep
            .password
            .iter()
            .filter(|p| !p.is_empty())
            .cloned()
            .collect();
        Ok(Server {
            ep,
            http: Http::new(),
            secrets,
        })
    }

    fn scrub(&self, text: &str, extra: &[&str]) -> String {
        super::scrub_with(text, &self.secrets, extra)
    }

    /// Run one statement as `ep`'s user: its output, or ClickHouse's refusal.
    async fn run(&self, ep: &Endpoint, sql: &str) -> Result<Result<String, Failure>> {
        let resp = self
            .http
            .call(
                ep,
                Method::POST,
                "/",
                Some(("text/plain; charset=utf-8", sql.as_bytes().to_vec())),
                &[],
            )
            .await?;
        let text = resp.text(600);
        if resp.ok() {
            return Ok(Ok(text));
        }
        Ok(Err(Failure {
            status: resp.status,
            code: error_code(&text),
            text,
        }))
    }

    /// Run one statement as admin; a refusal becomes an adapter error.
    async fn admin(&self, sql: &str, doing: &str) -> Result<String> {
        match self.run(&self.ep, sql).await? {
            Ok(out) => Ok(out),
            Err(f) => Err(self.error(doing, &f, &[])),
        }
    }

    fn error(&self, doing: &str, f: &Failure, extra: &[&str]) -> AdapterError {
        let server = self.ep.server.clone();
        let text = self.scrub(&f.text, extra);
        if f.refused_credentials() {
            return AdapterError::Unreachable {
                server,
                detail: format!(
                    "{doing}: the server refused admin_url's credentials ({text}); check the \
                     user and password in admin_url"
                ),
            };
        }
        let busy = matches!(f.status, 502..=504) || f.code.is_some_and(|c| BUSY_CODES.contains(&c));
        if busy {
            return AdapterError::Unreachable {
                server,
                detail: format!("{doing}: HTTP {}: {text}", f.status),
            };
        }
        let hint = if f.code == Some(497) {
            "; admin_url's user needs the right to create and drop databases and users"
        } else {
            ""
        };
        AdapterError::Server {
            server,
            detail: format!("{doing}: {text}{hint}"),
        }
    }

    /// `(major, minor)` of `SELECT version()`.
    async fn version(&self) -> Result<(u32, u32)> {
        let out = self.admin("SELECT version()", "asking the version").await?;
        parse_version(&out).ok_or_else(|| AdapterError::Server {
            server: self.ep.server.clone(),
            detail: format!("`SELECT version()` answered `{out}`, which is not a version"),
        })
    }

    /// The slice's own user, or a [`Failure`] when the server will not make one.
    async fn ensure_user(&self, slice: &Slice) -> Result<Result<(), Failure>> {
        for sql in user_statements(slice) {
            match self.run(&self.ep, &sql).await? {
                Ok(_) => {}
                Err(f) if f.code.is_some_and(|c| NO_USER_MANAGEMENT.contains(&c)) => {
                    return Ok(Err(f))
                }
                Err(f) => {
                    return Err(self.error(&format!("creating user {}", slice.name), &f, &[]))
                }
            }
        }
        Ok(Ok(()))
    }
}

/// The database of binky's catalog on the server: which home made each slice. ClickHouse
/// keeps no comment on a database before 22.x, so each slice's mark is a table of its own
/// there, named after the slice, holding the maker's identity (`TinyLog`, which every
/// release has): `CREATE TABLE` without `IF NOT EXISTS` lets one of two homes claiming at
/// once make it, and the other read it back.
const CATALOG: &str = "binky_catalog";
/// `UNKNOWN_TABLE`, `UNKNOWN_DATABASE`: no mark (yet).
const NO_MARK: &[u32] = &[60, 81];
/// `TABLE_ALREADY_EXISTS`.
const TABLE_EXISTS: u32 = 57;

impl Server {
    /// The home the catalog records for `slice`, if any.
    async fn marked_home(&self, slice: &Slice) -> Result<Option<String>> {
        let sql = format!("SELECT home FROM {CATALOG}.`{}` LIMIT 1", slice.name);
        match self.run(&self.ep, &sql).await? {
            Ok(out) => Ok(out
                .lines()
                .next()
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(str::to_owned)),
            Err(f) if f.code.is_some_and(|c| NO_MARK.contains(&c)) => Ok(None),
            Err(f) => Err(self.error("reading binky's catalog", &f, &[])),
        }
    }

    /// Does the slice's database exist?
    async fn database_exists(&self, slice: &Slice) -> Result<bool> {
        let out = self
            .admin(
                &format!(
                    "SELECT count() FROM system.databases WHERE name = '{}'",
                    slice.name
                ),
                "looking for the database",
            )
            .await?;
        Ok(out.trim() != "0")
    }
}

/// `Code: 62, e.displayText() = …` (old) or `Code: 62. DB::Exception: …` (new) → 62.
fn error_code(text: &str) -> Option<u32> {
    let rest = text.trim_start().strip_prefix("Code: ")?;
    let end = rest.find(|c: char| !c.is_ascii_digit())?;
    rest[..end].parse().ok()
}

/// `18.16.1` or `24.3.2.23` → `(18, 16)`.
fn parse_version(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.trim().split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

fn has_users(version: (u32, u32)) -> bool {
    version >= USERS_SINCE
}

/// Slice names become identifiers and directory names: `[a-z0-9_]`, 1 to 63 bytes, refused
/// rather than escaped otherwise; and they start with `bk_`, so no verb ever touches a
/// database binky did not name (`default`, `system`).
fn check_name(slice: &Slice) -> Result<()> {
    if slice.name.starts_with("bk_")
        && slice.name.len() <= MAX_NAME
        && super::is_plain_name(&slice.name)
    {
        Ok(())
    } else {
        Err(AdapterError::Config(format!(
            "`{}` cannot name a ClickHouse slice: `bk_` then [a-z0-9_], at most {MAX_NAME} \
             bytes",
            slice.name
        )))
    }
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The statements that make (or heal) the slice's user: created if missing, password and
/// default database set again, its database granted.
fn user_statements(slice: &Slice) -> Vec<String> {
    let id = format!("`{}`", slice.name);
    let auth = format!(
        "IDENTIFIED WITH sha256_hash BY '{}' DEFAULT DATABASE {id}",
        sha256_hex(&slice.secret)
    );
    vec![
        format!("CREATE USER IF NOT EXISTS {id} {auth}"),
        format!("ALTER USER {id} {auth}"),
        format!("GRANT ALL ON {id}.* TO {id}"),
    ]
}

#[async_trait::async_trait]
impl Adapter for ClickHouse {
    fn kind(&self) -> Option<super::AdapterKind> {
        Some(super::AdapterKind::Clickhouse)
    }

    async fn provision(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        check_name(slice)?;
        let server = Server::from_config(cfg)?;
        let version = server.version().await?;
        server
            .admin(
                &format!("CREATE DATABASE IF NOT EXISTS `{}`", slice.name),
                &format!("creating database {}", slice.name),
            )
            .await?;
        if !has_users(version) {
            SHARED.warn(
                &server.ep.server,
                &format!(
                    "ClickHouse {}.{} has no SQL users (20.5 added them)",
                    version.0, version.1
                ),
            );
            return Ok(());
        }
        if let Err(f) = server.ensure_user(slice).await? {
            SHARED.warn(
                &server.ep.server,
                &format!(
                    "admin_url's user may not create users ({}); turn on \
                     access_management for it (CLICKHOUSE_DEFAULT_ACCESS_MANAGEMENT=1 in \
                     the Docker image) to give each world a user of its own",
                    server.scrub(&f.text, &[])
                ),
            );
        }
        Ok(())
    }

    async fn resolve(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Address> {
        check_name(slice)?;
        let server = Server::from_config(cfg)?;
        let path = format!("/{}", slice.name);
        let mut tokens = BTreeMap::from([("database".to_owned(), slice.name.clone())]);
        let own = server.ep.with_credentials(&slice.name, &slice.secret);
        let has_own_user = has_users(server.version().await?)
            && match server.run(&own, "SELECT 1").await? {
                Ok(_) => true,
                Err(f) if f.refused_credentials() => false,
                Err(f) => {
                    return Err(server.error(
                        &format!("trying user {}", slice.name),
                        &f,
                        &[&slice.secret],
                    ))
                }
            };
        if !has_own_user {
            return Ok(Address {
                url: server.ep.url_with_credentials(&path),
                tokens,
            });
        }
        tokens.insert("user".to_owned(), slice.name.clone());
        tokens.insert("password".to_owned(), slice.secret.clone());
        Ok(Address {
            url: own.url_with_credentials(&path),
            tokens,
        })
    }

    async fn teardown(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        check_name(slice)?;
        let server = Server::from_config(cfg)?;
        if has_users(server.version().await?) {
            // The user first: the world's clients lose access before the data goes.
            let sql = format!("DROP USER IF EXISTS `{}`", slice.name);
            match server.run(&server.ep, &sql).await? {
                Ok(_) => {}
                // An admin that may not manage users could not have made one.
                Err(f) if f.code.is_some_and(|c| NO_USER_MANAGEMENT.contains(&c)) => {}
                Err(f) => {
                    return Err(server.error(&format!("dropping user {}", slice.name), &f, &[]))
                }
            }
        }
        server
            .admin(
                &format!("DROP DATABASE IF EXISTS `{}`", slice.name),
                &format!("dropping database {}", slice.name),
            )
            .await?;
        // Its mark last: a teardown cut short before this is still its home's to finish.
        let sql = format!("DROP TABLE IF EXISTS {CATALOG}.`{}`", slice.name);
        match server.run(&server.ep, &sql).await? {
            Ok(_) => Ok(()),
            Err(f) if f.code.is_some_and(|c| NO_MARK.contains(&c)) => Ok(()),
            Err(f) => Err(server.error("removing the slice from binky's catalog", &f, &[])),
        }
    }

    async fn maker(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Maker> {
        check_name(slice)?;
        let server = Server::from_config(cfg)?;
        if let Some(home) = server.marked_home(slice).await? {
            return Ok(Maker::Home(home));
        }
        Ok(if server.database_exists(slice).await? {
            Maker::Unmarked
        } else {
            Maker::Absent
        })
    }

    async fn claim(&self, slice: &Slice, cfg: &AdapterConfig, home: &str) -> Result<Maker> {
        check_name(slice)?;
        super::check_home(home)?;
        let server = Server::from_config(cfg)?;
        server
            .admin(
                &format!("CREATE DATABASE IF NOT EXISTS {CATALOG}"),
                "making binky's catalog",
            )
            .await?;
        let create = format!(
            "CREATE TABLE {CATALOG}.`{}` (home String) ENGINE = TinyLog",
            slice.name
        );
        match server.run(&server.ep, &create).await? {
            Ok(_) => {}
            // Claimed before (by this home or another): read below.
            Err(f) if f.code == Some(TABLE_EXISTS) => {}
            Err(f) => return Err(server.error("claiming the slice in binky's catalog", &f, &[])),
        }
        if let Some(marked) = server.marked_home(slice).await? {
            return Ok(Maker::Home(marked));
        }
        server
            .admin(
                &format!(
                    "INSERT INTO {CATALOG}.`{}` (home) VALUES ('{home}')",
                    slice.name
                ),
                "claiming the slice in binky's catalog",
            )
            .await?;
        Ok(match server.marked_home(slice).await? {
            Some(h) => Maker::Home(h),
            None => Maker::Unmarked,
        })
    }

    async fn list(&self, cfg: &AdapterConfig) -> Result<Vec<String>> {
        let server = Server::from_config(cfg)?;
        let out = server
            .admin("SELECT name FROM system.databases", "listing databases")
            .await?;
        Ok(out
            .lines()
            .filter(|n| n.starts_with("bk_"))
            .map(str::to_owned)
            .collect())
    }

    async fn exists(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Option<bool>> {
        check_name(slice)?;
        let server = Server::from_config(cfg)?;
        server.database_exists(slice).await.map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::super::http_fake::{FakeServer, Recorded};
    use super::*;
    use crate::adapters::testing::cfg;

    fn slice() -> Slice {
        Slice {
            name: "bk_acme_login_fix_events".into(),
            secret: "0123abcd".into(),
        }
    }

    #[test]
    fn versions_and_error_codes_are_read_from_old_and_new_servers() {
        assert_eq!(parse_version("18.16.1\n"), Some((18, 16)));
        assert_eq!(parse_version("24.3.2.23"), Some((24, 3)));
        assert_eq!(parse_version("oops"), None);
        assert!(!has_users((18, 16)));
        assert!(!has_users((20, 4)));
        assert!(has_users((20, 5)));
        assert!(has_users((21, 1)));
        assert_eq!(
            error_code("Code: 62, e.displayText() = DB::Exception: Syntax error"),
            Some(62)
        );
        assert_eq!(
            error_code("Code: 516. DB::Exception: default: Authentication failed"),
            Some(516)
        );
        assert_eq!(error_code("Not a ClickHouse error"), None);
    }

    #[test]
    fn the_user_is_made_from_a_hash_of_the_secret_never_the_secret() {
        let stmts = user_statements(&slice());
        let hash = sha256_hex("0123abcd");
        assert_eq!(
            stmts,
            [
                format!(
                    "CREATE USER IF NOT EXISTS `bk_acme_login_fix_events` IDENTIFIED WITH \
                     sha256_hash BY '{hash}' DEFAULT DATABASE `bk_acme_login_fix_events`"
                ),
                format!(
                    "ALTER USER `bk_acme_login_fix_events` IDENTIFIED WITH sha256_hash BY \
                     '{hash}' DEFAULT DATABASE `bk_acme_login_fix_events`"
                ),
                "GRANT ALL ON `bk_acme_login_fix_events`.* TO `bk_acme_login_fix_events`"
                    .to_owned(),
            ]
        );
        assert!(!stmts.iter().any(|s| s.contains("0123abcd")));
    }

    #[test]
    fn names_that_could_break_out_of_an_identifier_are_refused() {
        for name in [
            "bk_a`b",
            "bk a",
            "bk_A",
            "bk_a;drop",
            "",
            "system",
            &"bk_".repeat(22),
        ] {
            let s = Slice {
                name: name.into(),
                secret: "x".into(),
            };
            assert!(check_name(&s).is_err(), "{name}");
        }
        assert!(check_name(&slice()).is_ok());
    }

    #[tokio::test]
    async fn no_admin_url_names_the_setting_and_the_env_fallback() {
        if std::env::var_os(ENV_URL).is_some() {
            return;
        }
        let err = ClickHouse
            .provision(&slice(), &AdapterConfig::default())
            .await
            .expect_err("no admin_url");
        let text = err.to_string();
        assert!(matches!(err, AdapterError::Config(_)), "{text}");
        assert!(
            text.contains("admin_url") && text.contains(ENV_URL),
            "{text}"
        );
    }

    /// A scripted server (not ClickHouse) answering as a 24.3 server would: proves the
    /// statements sent on a server with SQL users, which this machine does not have.
    fn answer_as_24(req: &Recorded) -> (u16, String) {
        match req.body.as_str() {
            "SELECT version()" => (200, "24.3.2.23\n".into()),
            "SELECT 1" => (200, "1\n".into()),
            _ => (200, String::new()),
        }
    }

    #[tokio::test]
    async fn on_a_server_with_users_each_world_gets_its_own_user_scripted_server() {
        let fake = FakeServer::start(answer_as_24).await;
        let url = fake.url.replace("http://", "http://admin:pw@");
        let c = cfg(&format!("{url}/default"));
        ClickHouse.provision(&slice(), &c).await.expect("provision");
        let addr = ClickHouse.resolve(&slice(), &c).await.expect("resolve");
        ClickHouse.teardown(&slice(), &c).await.expect("teardown");
        let db = "`bk_acme_login_fix_events`";
        let mut expected = vec![
            "POST / SELECT version()".to_owned(),
            format!("POST / CREATE DATABASE IF NOT EXISTS {db}"),
        ];
        expected.extend(
            user_statements(&slice())
                .iter()
                .map(|s| format!("POST / {s}")),
        );
        expected.extend([
            "POST / SELECT version()".to_owned(),
            "POST / SELECT 1".to_owned(),
            "POST / SELECT version()".to_owned(),
            format!("POST / DROP USER IF EXISTS {db}"),
            format!("POST / DROP DATABASE IF EXISTS {db}"),
            format!("POST / DROP TABLE IF EXISTS binky_catalog.{db}"),
        ]);
        assert_eq!(fake.lines(), expected);
        // Admin statements as admin, the probe as the slice's user.
        let reqs = fake.requests();
        assert_eq!(reqs[0].header("authorization"), Some("Basic YWRtaW46cHc="));
        let probe = reqs.iter().find(|r| r.body == "SELECT 1").expect("probe");
        assert_ne!(probe.header("authorization"), Some("Basic YWRtaW46cHc="));
        let port = fake.url.rsplit(':').next().expect("port");
        assert_eq!(
            addr.url,
            format!("http://bk_acme_login_fix_events:0123abcd@127.0.0.1:{port}/bk_acme_login_fix_events")
        );
        assert_eq!(addr.tokens["database"], "bk_acme_login_fix_events");
        assert_eq!(addr.tokens["user"], "bk_acme_login_fix_events");
        assert_eq!(addr.tokens["password"], "0123abcd");
        let done = crate::adapters::tokens::complete("clickhouse", addr);
        let keys: Vec<&str> = done.tokens.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            crate::adapters::tokens::documented("clickhouse").unwrap()
        );
        assert_eq!(done.tokens["port"], port);
    }

    #[tokio::test]
    async fn an_admin_that_may_not_create_users_shares_its_credentials_scripted_server() {
        let fake = FakeServer::start(|req| match req.body.as_str() {
            "SELECT version()" => (200, "24.3.2.23\n".into()),
            b if b.starts_with("CREATE USER") || b.starts_with("DROP USER") => (
                500,
                "Code: 497. DB::Exception: admin: Not enough privileges. To execute this \
                 query, it's necessary to have the grant CREATE USER ON *.*. (ACCESS_DENIED)"
                    .into(),
            ),
            "SELECT 1" => (
                516,
                "Code: 516. DB::Exception: bk_acme_login_fix_events: Authentication failed".into(),
            ),
            _ => (200, String::new()),
        })
        .await;
        let c = cfg(&fake.url.replace("http://", "http://admin:pw@"));
        ClickHouse.provision(&slice(), &c).await.expect("provision");
        let addr = ClickHouse.resolve(&slice(), &c).await.expect("resolve");
        assert!(
            addr.url.starts_with("http://admin:pw@127.0.0.1:"),
            "{}",
            addr.url
        );
        assert!(
            addr.url.ends_with("/bk_acme_login_fix_events"),
            "{}",
            addr.url
        );
        assert!(!addr.tokens.contains_key("user"));
        // Completed, the slice gives every documented token: the admin's credentials here.
        let done = crate::adapters::tokens::complete("clickhouse", addr);
        let keys: Vec<&str> = done.tokens.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            crate::adapters::tokens::documented("clickhouse").unwrap()
        );
        assert_eq!(done.tokens["user"], "admin");
        ClickHouse.teardown(&slice(), &c).await.expect("teardown");
        assert!(fake
            .lines()
            .contains(&"POST / DROP DATABASE IF EXISTS `bk_acme_login_fix_events`".to_owned()));
    }

    #[tokio::test]
    async fn sql_errors_are_server_errors_with_the_text_and_refused_admins_are_transient() {
        let fake = FakeServer::start(|req| match req.body.as_str() {
            "SELECT version()" if req.header("authorization") == Some("Basic YWRtaW46d3Jvbmc=") => {
                (
                    401,
                    "Code: 193, e.displayText() = DB::Exception: Wrong password for user admin"
                        .into(),
                )
            }
            "SELECT version()" => (200, "18.16.1\n".into()),
            _ => (
                500,
                "Code: 81, e.displayText() = DB::Exception: Database x doesn't exist".into(),
            ),
        })
        .await;
        let good = cfg(&fake.url.replace("http://", "http://admin:pw@"));
        let err = ClickHouse
            .provision(&slice(), &good)
            .await
            .expect_err("500");
        assert!(matches!(err, AdapterError::Server { .. }), "{err}");
        assert!(err.to_string().contains("doesn't exist"), "{err}");
        let bad = cfg(&fake.url.replace("http://", "http://admin:wrong@"));
        let err = ClickHouse.provision(&slice(), &bad).await.expect_err("401");
        let text = err.to_string();
        assert!(err.transient(), "{text}");
        assert!(
            text.contains("admin_url") && !text.contains("wrong@"),
            "{text}"
        );
    }
}
