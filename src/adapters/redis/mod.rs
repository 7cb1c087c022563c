//! The `redis` adapter (also answering to `valkey`): each world gets a Redis its apps use the
//! ordinary way — any key, no prefix, `INFO`, `SCAN`, `FLUSHDB`, `SELECT` of its own
//! database, pub/sub — and cannot reach another world's data.
//!
//! How, is the service's `options = { isolation = "…" }` ([`Isolation`]):
//!
//! | isolation | default when | a world's slice | `${cache.url}` |
//! | --- | --- | --- | --- |
//! | `server` | no `admin_url` and no `$BINKY_REDIS_URL` | a `redis-server` of its own, run by binky ([`crate::servers`]) | `redis://default:<secret>@127.0.0.1:<port>/0` |
//! | `database` | an `admin_url` (or `$BINKY_REDIS_URL`) | a logical database of that server and an ACL user pinned to it ([`database`]) | `redis://<slice>:<secret>@host:port/<N>` |
//! | `prefix` | never | a key prefix and an ACL user allowed only that prefix ([`prefix`]) | `redis://<slice>:<secret>@host:port/<db>` |
//!
//! Tokens besides `${cache.url}`: `${cache.host}`, `${cache.port}`, `${cache.database}`,
//! `${cache.user}`, `${cache.password}`, and `${cache.prefix}`: the key prefix with
//! `prefix`, empty with the others (so a config written for the prefix mode keeps working,
//! its keys simply unprefixed).
//!
//! # Which home made a slice
//! On a shared server (`database`, `prefix`), binky's catalog ([`catalog`]: the hashes
//! `binky:slices` and `binky:databases` in the admin URL's database) records the home that
//! made each slice and the slice holding each database, claimed with `HSETNX` (see
//! [`crate::adapters::Maker`]). A world's own server is its home's by being in its home.
//!
//! # Guarantees
//! - `server`: a world's server answers only to the slice's secret and holds nothing but
//!   that world's data; its clients may run any command on it (it is theirs). It listens
//!   on 127.0.0.1, keeps its data in `$BINKY_HOME/servers/redis/worlds/<slice>/` (an RDB
//!   snapshot on Redis' default save points and at shutdown), runs from `binky up` to
//!   `binky down` (its data comes back with the next `binky up`), is started again if it
//!   dies while its world runs, and is removed with its files when the world is removed.
//! - `database` and `prefix`: see their modules; in both, provisioning is idempotent and
//!   heals drift (`ACL SETUSER … reset …` rewrites the whole user, atomically, without
//!   disconnecting the world's clients), and errors never carry a password (the server is
//!   shown as `redis://host:port`).
//!
//! # Assumptions
//! - `database` and `prefix`: Redis 7.0 or newer, or Valkey (which reports itself as Redis
//!   7.2): the rules rely on Redis 7's command table (per-subcommand rules, channel
//!   patterns, `SORT BY/GET` checked against key patterns). Older servers are refused with
//!   a message saying so. The admin address may run `ACL SETUSER`, `ACL DELUSER`,
//!   `ACL LIST`, `INFO`, `SCAN`, `CONFIG GET` and `FLUSHDB` (the `default` user of a server
//!   with `requirepass`, or any `+@all` user).
//! - `server`: `redis-server` (or `valkey-server`) 6 or newer on `PATH` of the daemon.
//!
//! # Caveats
//! - Users survive a server restart only when the server has an `aclfile` (binky's managed
//!   servers have one): the adapter runs `ACL SAVE` after each change and accepts a server
//!   that has none.
//! - If an `admin_url` server's `default` user needs no password, any process can still
//!   connect as `default` and see everything: the slice users isolate worlds from each
//!   other's mistakes, not from a process that ignores its URL.
//! - `server` costs a process per world: about 4.4 MiB of memory each when idle (PSS; 12
//!   MiB RSS with the shared libraries; Redis 7.0 here), and a snapshot written when the
//!   world goes down.

mod admin;
mod catalog;
pub mod database;
pub mod prefix;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use sha2::{Digest, Sha256};

use binky_controllers::url::percent_encode;

use self::admin::Server;
pub use self::prefix::{acl_rules, prefix, ALLOWED_BACK, DENIED};
use super::{Adapter, AdapterConfig, AdapterError, Address, Maker, Result, Slice};

/// Server administration that both isolation modes deny by name, after their own list
/// (`DENIED` of [`database`] and [`prefix`]); already in `@admin`.
const SERVER_ADMIN: &[(&str, &str)] = &[
    ("config", "reads and changes the server's configuration"),
    ("debug", "server internals"),
    ("shutdown", "stops the server for every world"),
    ("save", "server-wide"),
    ("bgsave", "server-wide"),
    ("bgrewriteaof", "server-wide"),
    ("replicaof", "server-wide"),
    ("slaveof", "server-wide"),
    ("failover", "server-wide"),
    ("module", "server-wide"),
];

/// The option that chooses how worlds are kept apart.
pub const ISOLATION_OPTION: &str = "isolation";

/// How a world's slice is kept apart from the others (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// A `redis-server` of the world's own.
    Server,
    /// A logical database of a shared server, with an ACL user pinned to it.
    Database,
    /// A key prefix on a shared server, with an ACL user allowed only that prefix.
    Prefix,
}

impl Isolation {
    /// Its name in `options`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Isolation::Server => "server",
            Isolation::Database => "database",
            Isolation::Prefix => "prefix",
        }
    }

    /// The isolation `options` ask for, `None` when they do not say.
    pub fn asked(options: &BTreeMap<String, String>) -> Result<Option<Isolation>> {
        let Some(value) = options.get(ISOLATION_OPTION) else {
            return Ok(None);
        };
        match value.trim() {
            "server" => Ok(Some(Isolation::Server)),
            "database" => Ok(Some(Isolation::Database)),
            "prefix" => Ok(Some(Isolation::Prefix)),
            other => Err(AdapterError::Config(unknown_isolation(other))),
        }
    }

    /// The isolation of a slice with `options`, on a server given by `admin_url` or
    /// `$BINKY_REDIS_URL` (`server_given`) or not: `server` without one, `database` with
    /// one, unless the options say otherwise; `server` with one is refused (binky cannot
    /// start servers on a server it does not run).
    pub fn choose(options: &BTreeMap<String, String>, server_given: bool) -> Result<Isolation> {
        match (Isolation::asked(options)?, server_given) {
            (Some(Isolation::Server), true) => Err(AdapterError::Config(SERVER_WITH_ADMIN.into())),
            (Some(i), _) => Ok(i),
            (None, false) => Ok(Isolation::Server),
            (None, true) => Ok(Isolation::Database),
        }
    }
}

/// Why `isolation = "server"` cannot go with a given server, and what to do.
const SERVER_WITH_ADMIN: &str = "`isolation = \"server\"` means a redis-server of each \
    world's own, which binky starts from the redis-server installed here; it cannot start \
    servers on the server admin_url (or $BINKY_REDIS_URL) names. Leave out admin_url (and \
    unset BINKY_REDIS_URL for the daemon) to get a server per world, or use isolation = \
    \"database\" (a database per world on that server) or \"prefix\"";

fn unknown_isolation(value: &str) -> String {
    format!(
        "unknown redis isolation `{value}`; use one of: server (a redis-server per world, the \
         default without admin_url), database (a database per world on admin_url's server, \
         the default with it), prefix (a key prefix per world)"
    )
}

/// A problem `binky check` finds in a redis service's settings: the key (under the
/// service), what is wrong, how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// `options.isolation`.
    pub key: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub fix: String,
}

/// What `binky check` says about a redis service's `options`, given whether it writes an
/// `admin_url`. A value that is still a `${…}` token is judged when the world starts.
pub fn check_options(options: &BTreeMap<String, String>, admin_url: bool) -> Vec<Problem> {
    let key = format!("options.{ISOLATION_OPTION}");
    match options.get(ISOLATION_OPTION) {
        Some(v) if v.contains("${") => Vec::new(),
        Some(_) => match Isolation::choose(options, admin_url) {
            Ok(_) => Vec::new(),
            Err(AdapterError::Config(message)) if message == SERVER_WITH_ADMIN => vec![Problem {
                key,
                message: "isolation = \"server\" needs a redis-server binky runs for each world, and admin_url names a server binky does not run".into(),
                fix: "leave out admin_url (binky then runs a redis-server per world), or use isolation = \"database\" or \"prefix\" with it".into(),
            }],
            Err(e) => vec![Problem {
                key,
                message: e.to_string(),
                fix: "isolation = \"server\", \"database\" or \"prefix\"".into(),
            }],
        },
        None => Vec::new(),
    }
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Slice names are `[a-z0-9_]` (controllers' `slice_name`); anything else could widen a
/// glob (`*`, `?`, `[`) or split an ACL rule, so it is refused rather than escaped.
use super::check_plain_name as check_name;

/// One lock per shared server (by its shown address): choosing a world's database and
/// creating its user happen under it, so two worlds provisioned at once never get the same
/// database.
fn server_lock(server: &Server) -> Arc<tokio::sync::Mutex<()>> {
    static LOCKS: std::sync::Mutex<Option<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> =
        std::sync::Mutex::new(None);
    let mut locks = LOCKS.lock().unwrap_or_else(|e| e.into_inner());
    locks
        .get_or_insert_with(HashMap::new)
        .entry(server.shown.clone())
        .or_default()
        .clone()
}

/// The `bk_` users among `users` pinned to a database.
fn pinned(users: BTreeMap<String, Vec<String>>) -> BTreeMap<String, i64> {
    users
        .into_iter()
        .filter(|(name, _)| name.starts_with("bk_"))
        .filter_map(|(name, rules)| Some((name, database::pinned(&rules)?)))
        .collect()
}

/// Do a slice's recorded tokens say it was made with `isolation = "prefix"`?
fn is_prefixed(tokens: &BTreeMap<String, String>) -> bool {
    tokens.get("prefix").is_some_and(|p| !p.is_empty())
}

/// The redis (and valkey) adapter.
pub struct Redis;

impl Redis {
    /// The isolation of a slice configured as `cfg`.
    fn isolation(cfg: &AdapterConfig) -> Result<Isolation> {
        if cfg.own_server {
            return Ok(Isolation::Server);
        }
        match Isolation::choose(&cfg.options, cfg.admin().is_some())? {
            // The slice controller asked for a server of its own and did not get one.
            Isolation::Server => Err(AdapterError::Config(
                "the redis adapter needs a server: without admin_url binky runs a \
                 redis-server for each world (install redis-server), or set `admin_url = \
                 \"redis://USER:PASSWORD@HOST:PORT/DB\"` on the service in binky.toml"
                    .into(),
            )),
            other => Ok(other),
        }
    }

    /// What was recorded of the other slices on this server: their databases (those of
    /// `prefix` slices, which record a prefix, are the admin URL's and not theirs alone).
    fn recorded_claims(slice: &Slice, cfg: &AdapterConfig) -> database::Claims {
        let db_of = |tokens: &BTreeMap<String, String>| {
            (!is_prefixed(tokens))
                .then(|| tokens.get("database")?.parse::<i64>().ok())
                .flatten()
        };
        database::Claims {
            recorded: cfg.recorded.get(&slice.name).and_then(db_of),
            others_recorded: cfg
                .recorded
                .iter()
                .filter(|(name, _)| **name != slice.name)
                .filter_map(|(_, tokens)| db_of(tokens))
                .collect(),
            ..database::Claims::default()
        }
    }

    /// The `bk_` users on the server pinned to a database.
    async fn pinned_users(
        server: &Server,
        con: &mut MultiplexedConnection,
    ) -> Result<BTreeMap<String, i64>> {
        Ok(pinned(server.users(con).await?))
    }

    /// `database` mode: choose the slice's database and write its user.
    async fn provision_database(slice: &Slice, cfg: &AdapterConfig, server: &Server) -> Result<()> {
        let lock = server_lock(server);
        let _guard = lock.lock().await;
        let mut con = server.connect().await?;
        server.check_version(&mut con).await?;
        let users = server.users(&mut con).await?;
        // Made with the prefix mode before (an older binky, or `isolation = "prefix"`
        // dropped): its keys under the prefix are left behind by the move.
        let pattern = format!("~{}*", prefix(slice));
        let was_prefixed = users
            .get(&slice.name)
            .is_some_and(|rules| rules.contains(&pattern));
        let mut claims = Self::recorded_claims(slice, cfg);
        claims.users = pinned(users);
        claims.with_keys = server.databases_with_keys(&mut con).await?;
        claims.databases = server.databases(&mut con).await;
        claims.admin_db = server.db;
        // Claimed in the server's catalog before the user is made: another home's daemon,
        // which the lock above does not hold, may be choosing the same one right now. The
        // loser reads the catalog again and chooses anew.
        let mut chosen = None;
        for _ in 0..16 {
            claims.catalog = catalog::databases(server, &mut con).await?;
            let db = claims
                .choose(&slice.name)
                .map_err(|full| AdapterError::Config(database::full_error(&server.shown, &full)))?;
            if catalog::claim_database(server, &mut con, db, &slice.name).await? {
                chosen = Some(db);
                break;
            }
        }
        let Some(db) = chosen else {
            return Err(AdapterError::Unreachable {
                server: server.shown.clone(),
                detail: "other binky homes claimed every database chosen for this slice meanwhile; retrying".into(),
            });
        };
        let known = server
            .known_commands(&mut con, &database::mentioned())
            .await?;
        let rules = database::acl_rules(&slice.secret, db, |c| known.contains(c));
        server
            .set_user(&mut con, &slice.name, &rules, &slice.secret)
            .await?;
        if was_prefixed {
            tracing::info!(server = %server.shown, slice = %slice.name, db, "slice moved from a key prefix to a database of its own; removing its prefixed keys");
            prefix::sweep(server, &mut con, slice).await?;
        }
        Ok(())
    }

    /// `database` mode: the slice's database, as recorded, else as its user is pinned.
    async fn database_of(
        slice: &Slice,
        cfg: &AdapterConfig,
        server: &Server,
    ) -> Result<Option<i64>> {
        if let Some(db) = Self::recorded_claims(slice, cfg).recorded {
            return Ok(Some(db));
        }
        let mut con = server.connect().await?;
        Ok(Self::pinned_users(server, &mut con)
            .await?
            .get(&slice.name)
            .copied())
    }

    /// `prefix` mode: write the slice's user.
    async fn provision_prefix(slice: &Slice, server: &Server) -> Result<()> {
        let mut con = server.connect().await?;
        server.check_version(&mut con).await?;
        let known = server
            .known_commands(&mut con, &prefix::mentioned())
            .await?;
        let rules = prefix::acl_rules(slice, server.db, |c| known.contains(c));
        server
            .set_user(&mut con, &slice.name, &rules, &slice.secret)
            .await
    }

    /// The tokens every mode gives (`prefix` empty: the `prefix` mode sets it).
    fn tokens(
        host: &str,
        port: u16,
        db: i64,
        user: &str,
        secret: &str,
    ) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("prefix".to_owned(), String::new()),
            ("host".to_owned(), host.to_owned()),
            ("port".to_owned(), port.to_string()),
            ("database".to_owned(), db.to_string()),
            ("user".to_owned(), user.to_owned()),
            ("password".to_owned(), secret.to_owned()),
        ])
    }

    /// Teardown on a shared server, whichever mode made the slice: its user goes first
    /// (the server drops its connections, so nothing writes meanwhile), then its data —
    /// its database emptied when the slice had one (recorded, or its user was pinned to
    /// one), else the keys under its prefix swept. A teardown cut short is finished by the
    /// next one (the slice controller keeps its finalizer until this returns Ok).
    async fn teardown_shared(slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        let server = Server::from_config(cfg)?;
        let lock = server_lock(&server);
        let _guard = lock.lock().await;
        let mut con = server.connect().await?;
        let users = server.users(&mut con).await?;
        let recorded = cfg.recorded.get(&slice.name);
        let prefixed = match (users.get(&slice.name), recorded) {
            (Some(rules), _) => database::pinned(rules).is_none(),
            (None, Some(tokens)) => is_prefixed(tokens),
            // Nothing says: a prefix sweep harms no one.
            (None, None) => true,
        };
        let db = if prefixed {
            None
        } else {
            Self::recorded_claims(slice, cfg)
                .recorded
                .or_else(|| users.get(&slice.name).and_then(|r| database::pinned(r)))
        };
        if users.contains_key(&slice.name) {
            server.delete_user(&mut con, &slice.name).await?;
        }
        if prefixed {
            prefix::sweep(&server, &mut con, slice).await?;
        } else if let Some(db) = db {
            Self::empty_database(&server, &mut con, &users, slice, db).await?;
        }
        // Its marks last (the databases it held are free once emptied): a teardown cut
        // short before this is still this home's to finish.
        catalog::forget_slice(&server, &mut con, &slice.name).await
    }

    /// `FLUSHDB` of the slice's database `db`, unless it is not the slice's alone (the
    /// admin's, or another slice's by its pinned user or binky's catalog); the admin
    /// connection is back in the admin URL's database after.
    async fn empty_database(
        server: &Server,
        con: &mut MultiplexedConnection,
        users: &BTreeMap<String, Vec<String>>,
        slice: &Slice,
        db: i64,
    ) -> Result<()> {
        let held_by_other = users.iter().any(|(name, rules)| {
            name != &slice.name && name.starts_with("bk_") && database::pinned(rules) == Some(db)
        }) || catalog::databases(server, con)
            .await?
            .get(&db)
            .is_some_and(|holder| *holder != slice.name);
        if db == 0 || db == server.db || held_by_other {
            tracing::warn!(server = %server.shown, db, slice = %slice.name, "not emptying a database that is not the slice's alone");
            return Ok(());
        }
        server.select(con, db).await?;
        let doing = format!("FLUSHDB of database {db}");
        server
            .query::<()>(con, &redis::cmd("FLUSHDB"), &doing, &[])
            .await?;
        server.select(con, server.db).await
    }
}

#[async_trait::async_trait]
impl Adapter for Redis {
    fn kind(&self) -> Option<super::AdapterKind> {
        Some(super::AdapterKind::Redis)
    }

    fn server_per_slice(&self, cfg: &AdapterConfig) -> Result<bool> {
        Ok(Isolation::choose(&cfg.options, cfg.admin().is_some())? == Isolation::Server)
    }

    async fn provision(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        check_name(slice)?;
        match Self::isolation(cfg)? {
            // The server is the slice; binky started it before asking.
            Isolation::Server => Ok(()),
            Isolation::Database => {
                Self::provision_database(slice, cfg, &Server::from_config(cfg)?).await
            }
            Isolation::Prefix => Self::provision_prefix(slice, &Server::from_config(cfg)?).await,
        }
    }

    async fn resolve(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Address> {
        check_name(slice)?;
        let isolation = Self::isolation(cfg)?;
        let server = Server::from_config(cfg)?;
        // Slice names and secrets need no escape, but a stray character must not break
        // the URL.
        let (name, secret) = (percent_encode(&slice.name), percent_encode(&slice.secret));
        let (url, tokens) = match isolation {
            Isolation::Server => (
                // The `default` user: the classic form every client takes.
                format!("redis://default:{secret}@{}/0", server.authority),
                Self::tokens(&server.host, server.port, 0, "default", &slice.secret),
            ),
            Isolation::Database => {
                let db = Self::database_of(slice, cfg, &server)
                    .await?
                    .ok_or_else(|| AdapterError::Server {
                        server: server.shown.clone(),
                        detail: format!(
                            "slice {} has no database yet (its user is missing)",
                            slice.name
                        ),
                    })?;
                (
                    format!(
                        "{}://{name}:{secret}@{}/{db}",
                        server.scheme, server.authority
                    ),
                    Self::tokens(&server.host, server.port, db, &slice.name, &slice.secret),
                )
            }
            Isolation::Prefix => {
                let mut tokens = Self::tokens(
                    &server.host,
                    server.port,
                    server.db,
                    &slice.name,
                    &slice.secret,
                );
                tokens.insert("prefix".to_owned(), prefix(slice));
                (
                    format!(
                        "{}://{name}:{secret}@{}/{}",
                        server.scheme, server.authority, server.db
                    ),
                    tokens,
                )
            }
        };
        Ok(Address { url, tokens })
    }

    async fn teardown(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        check_name(slice)?;
        if cfg.own_server {
            // The server is the slice: binky removes it with its files.
            return Ok(());
        }
        Self::teardown_shared(slice, cfg).await
    }

    async fn list(&self, cfg: &AdapterConfig) -> Result<Vec<String>> {
        if cfg.own_server {
            return Ok(Vec::new());
        }
        let server = Server::from_config(cfg)?;
        let mut con = server.connect().await?;
        let users = server.users(&mut con).await?.into_keys();
        let listed: std::collections::BTreeSet<String> = users
            .chain(catalog::slices(&server, &mut con).await?)
            .filter(|u| u.starts_with("bk_"))
            .collect();
        Ok(listed.into_iter().collect())
    }

    async fn maker(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Maker> {
        check_name(slice)?;
        if cfg.own_server {
            // The server is the slice, and this home's (binky runs it in the home).
            return Ok(Maker::Untold);
        }
        let server = Server::from_config(cfg)?;
        let mut con = server.connect().await?;
        if let Some(home) = catalog::home_of(&server, &mut con, &slice.name).await? {
            return Ok(Maker::Home(home));
        }
        Ok(if server.users(&mut con).await?.contains_key(&slice.name) {
            Maker::Unmarked
        } else {
            Maker::Absent
        })
    }

    async fn claim(&self, slice: &Slice, cfg: &AdapterConfig, home: &str) -> Result<Maker> {
        check_name(slice)?;
        if cfg.own_server {
            return Ok(Maker::Untold);
        }
        let server = Server::from_config(cfg)?;
        let mut con = server.connect().await?;
        Ok(
            match catalog::claim_slice(&server, &mut con, &slice.name, home).await? {
                Some(h) => Maker::Home(h),
                None => Maker::Unmarked,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::testing::cfg;

    /// The slice the redis adapter's tests provision.
    pub(super) fn slice() -> Slice {
        Slice {
            name: "bk_acme_login_fix_cache".into(),
            secret: "0123abcd".into(),
        }
    }

    /// Asserts what both isolation modes' ACL rules begin with: `reset`, then `+@all`,
    /// with each of `denied` taken back after it (a later rule wins).
    pub(super) fn assert_denied_after_all(rules: &[String], denied: &[&str]) {
        let at = |r: &str| rules.iter().position(|x| x == r).expect(r);
        assert_eq!(rules[0], "reset");
        for denied in denied {
            assert!(at("+@all") < at(denied), "{denied}");
        }
    }

    fn options(isolation: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(ISOLATION_OPTION.to_owned(), isolation.to_owned())])
    }

    fn resolve(cfg: &AdapterConfig) -> Result<Address> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(Redis.resolve(&slice(), cfg))
    }

    fn prefixed(url: &str) -> AdapterConfig {
        AdapterConfig {
            options: options("prefix"),
            ..cfg(url)
        }
    }

    #[test]
    fn the_isolation_defaults_to_a_server_per_world_without_admin_url_and_a_database_with_one() {
        let none = BTreeMap::new();
        assert_eq!(Isolation::choose(&none, false).unwrap(), Isolation::Server);
        assert_eq!(Isolation::choose(&none, true).unwrap(), Isolation::Database);
        for (value, given, want) in [
            ("prefix", true, Isolation::Prefix),
            ("prefix", false, Isolation::Prefix),
            ("database", false, Isolation::Database),
            (" server ", false, Isolation::Server),
        ] {
            assert_eq!(Isolation::choose(&options(value), given).unwrap(), want);
        }
        let err = Isolation::choose(&options("server"), true).expect_err("server with admin");
        assert!(err.to_string().contains("admin_url"), "{err}");
        let err = Isolation::choose(&options("db"), false).expect_err("unknown");
        assert!(err.to_string().contains("use one of: server"), "{err}");
        let with_admin = cfg("redis://h");
        assert!(!Redis.server_per_slice(&with_admin).unwrap());
        assert!(Redis.server_per_slice(&AdapterConfig::default()).unwrap());
    }

    #[test]
    fn binky_check_names_a_bad_isolation_and_server_with_admin_url() {
        assert!(check_options(&BTreeMap::new(), true).is_empty());
        assert!(check_options(&options("${env.ISO}"), true).is_empty());
        let p = check_options(&options("cluster"), false);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].key, "options.isolation");
        assert!(
            p[0].message.contains("unknown redis isolation `cluster`"),
            "{p:?}"
        );
        let p = check_options(&options("server"), true);
        assert_eq!(p.len(), 1);
        assert!(p[0].message.contains("admin_url"), "{p:?}");
        assert!(p[0].fix.contains("leave out admin_url"), "{p:?}");
        assert!(check_options(&options("server"), false).is_empty());
    }

    #[test]
    fn a_worlds_own_server_is_addressed_as_its_default_user() {
        let own = AdapterConfig {
            own_server: true,
            ..cfg("redis://default:0123abcd@127.0.0.1:40001")
        };
        let a = resolve(&own).expect("resolves");
        assert_eq!(a.url, "redis://default:0123abcd@127.0.0.1:40001/0");
        assert_eq!(a.tokens["database"], "0");
        assert_eq!(a.tokens["port"], "40001");
        assert_eq!(a.tokens["password"], "0123abcd");
        assert_eq!(a.tokens["prefix"], "", "no prefix to put before keys");
    }

    #[test]
    fn a_recorded_database_is_the_worlds_address_without_asking_the_server() {
        let mut c = cfg("redis://default:s3cret@127.0.0.1:6379/0");
        c.recorded.insert(
            slice().name,
            BTreeMap::from([("database".to_owned(), "7".to_owned())]),
        );
        let a = resolve(&c).expect("resolves");
        assert_eq!(
            a.url,
            "redis://bk_acme_login_fix_cache:0123abcd@127.0.0.1:6379/7"
        );
        assert_eq!(a.tokens["database"], "7");
        assert_eq!(a.tokens["user"], "bk_acme_login_fix_cache");
    }

    #[test]
    fn the_prefix_address_carries_the_slice_user_and_the_admin_urls_database() {
        let a = resolve(&prefixed("redis://default:s3cret@127.0.0.1:6379/3")).expect("resolves");
        assert_eq!(
            a.url,
            "redis://bk_acme_login_fix_cache:0123abcd@127.0.0.1:6379/3"
        );
        assert_eq!(a.tokens["prefix"], "bk_acme_login_fix_cache:");
        assert_eq!(a.tokens["database"], "3");
        let a = resolve(&prefixed("valkey://:pw@[::1]:7000")).expect("resolves");
        assert_eq!(
            a.url,
            "redis://bk_acme_login_fix_cache:0123abcd@[::1]:7000/0"
        );
        let a = resolve(&prefixed("redis://localhost")).expect("resolves");
        assert_eq!(
            a.url,
            "redis://bk_acme_login_fix_cache:0123abcd@localhost/0"
        );
        assert_eq!(a.tokens["port"], "6379");
    }

    #[test]
    fn unusable_admin_urls_name_the_fix_without_the_password() {
        for url in [
            "rediss://u:topsecret@h:6379",
            "http://u:topsecret@h",
            "redis://u:topsecret@h/x",
        ] {
            let err = resolve(&prefixed(url)).expect_err(url).to_string();
            assert!(!err.contains("topsecret"), "{err}");
            assert!(err.contains("redis://USER:PASSWORD@HOST:PORT/DB"), "{err}");
        }
        let none = resolve(&AdapterConfig {
            options: options("prefix"),
            ..AdapterConfig::default()
        })
        .expect_err("no admin_url");
        assert!(none.to_string().contains("admin_url"), "{none}");
    }

    #[test]
    fn slice_names_that_could_widen_a_pattern_are_refused() {
        for name in ["bk_a*", "bk a", "bk_A", "bk_a:b", ""] {
            let s = Slice {
                name: name.into(),
                secret: "x".into(),
            };
            assert!(check_name(&s).is_err(), "{name}");
        }
        assert!(check_name(&slice()).is_ok());
    }
}
