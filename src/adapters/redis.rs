//! The `redis` adapter (also answering to `valkey`): a key prefix per world, enforced by an
//! ACL user of its own.
//!
//! A slice `bk_acme_login_fix_cache` is the prefix `bk_acme_login_fix_cache:` for keys and
//! pub/sub channels, and an ACL user of the same name whose password is the slice's secret.
//! `${cache.url}` is `redis://bk_acme_login_fix_cache:<secret>@host:port/<db>` and
//! `${cache.prefix}` the prefix; a service puts the prefix in front of every key it uses
//! (most client libraries have a `prefix`/`namespace`/`keyPrefix` option for that).
//!
//! # Why a key pattern alone is not isolation
//! `~prefix*` only checks the key *arguments* of a command. Commands without key arguments
//! reach the whole server: `KEYS`, `SCAN`, `RANDOMKEY` and `DBSIZE` show other worlds' keys
//! (or their number), `FLUSHALL`/`FLUSHDB` delete them, pub/sub channels are shared by
//! every user, and several introspection commands show other connections. So the user
//! starts from `+@all` minus what the server itself calls `@dangerous`/`@admin`, and
//! [`DENIED`] then removes every remaining command that crosses prefixes, each with the
//! reason next to it; [`ALLOWED_BACK`] re-allows the harmless subcommands of a denied
//! command (`CLIENT SETNAME`, `SCRIPT LOAD`, …) that client libraries send. Channels are
//! restricted to the prefix with `resetchannels &prefix*`.
//!
//! The `every_command_a_slice_may_run_is_key_checked_or_reviewed` integration test asks
//! the server for every command a slice user may run and fails on any command without key
//! arguments that nobody reviewed: a server upgrade that adds one cannot slip through.
//!
//! # Guarantees
//! - A world's user reads, writes, deletes and subscribes only under its own prefix; the
//!   commands in [`DENIED`] answer `NOPERM` (Lua scripts run with the caller's ACL too, so
//!   `EVAL` reaches no further than the caller).
//! - Provisioning is idempotent and heals drift: `ACL SETUSER … reset …` rewrites the whole
//!   user every time, atomically, without disconnecting the world's clients.
//! - Teardown deletes the user first (the server drops its connections, so nothing writes
//!   under the prefix during the sweep), then every key under the prefix, in every
//!   database that holds keys, with `SCAN MATCH` + `UNLINK` in batches.
//! - Errors never carry a password: the server is shown as `redis://host:port`.
//!
//! # Assumptions
//! - Redis 7.0 or newer, or Valkey (which reports itself as Redis 7.2): the rule relies on
//!   Redis 7's command table (per-subcommand rules, channel patterns, `SORT BY/GET` checked
//!   against key patterns). Older servers are refused with a message saying so.
//! - The admin address may run `ACL SETUSER`, `ACL DELUSER`, `INFO` and `SCAN`
//!   (the `default` user of a server with `requirepass`, or any `+@all` user).
//!
//! # Caveats
//! - Users survive a server restart only when the server has an `aclfile` (binky's managed
//!   server has one): the adapter runs `ACL SAVE` after each change and accepts a server
//!   that has none.
//! - `PSUBSCRIBE` is allowed for exactly the pattern `<prefix>*`: Redis matches a
//!   subscribed *pattern* literally against the user's channel patterns.
//! - Client-side caching (`CLIENT TRACKING`) and `INFO` are refused (see [`DENIED`]); a
//!   client library that insists on `INFO` for a version check needs that check turned off.
//! - If the server's `default` user needs no password, any process can still connect as
//!   `default` and see everything: the slice users isolate worlds from each other's
//!   mistakes, not from a process that ignores its URL.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ErrorKind, RedisError, ServerErrorKind, Value};
use sha2::{Digest, Sha256};

use binky_controllers::url::{password_decoded, percent_encode, Url};

use super::{redact, Adapter, AdapterConfig, AdapterError, Address, BoxFuture, Slice};

/// How long connecting (TCP and authentication) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one command may take.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(15);
/// `SCAN … COUNT` during teardown: keys looked at per round trip.
const SCAN_COUNT: usize = 1000;

/// Commands a slice user may not run, on top of `-@dangerous -@admin`, and why. Commands
/// the server already files under those categories are listed again when they cross
/// prefixes, so a server that categorises them differently still refuses them. Entries
/// the server does not know are left out of the rule (it cannot run them anyway).
pub const DENIED: &[(&str, &str)] = &[
    // Keyless commands over the whole keyspace.
    ("keys", "lists every key of the database"),
    ("scan", "walks every key of the database"),
    ("randomkey", "returns some other world's key"),
    ("dbsize", "counts every world's keys"),
    ("flushall", "deletes every world's keys"),
    ("flushdb", "deletes every world's keys"),
    ("swapdb", "swaps whole databases"),
    // A world stays in the database of its URL (`+select|<db>` re-allows that one).
    ("select", "moves the connection to another database"),
    ("move", "moves a key to another database"),
    ("migrate", "moves keys to another server"),
    ("restore", "writes raw payloads (@dangerous)"),
    (
        "sort",
        "BY/GET patterns read arbitrary keys (@dangerous; Redis 7 checks them, older did not)",
    ),
    (
        "sort_ro",
        "BY/GET patterns read arbitrary keys (@dangerous)",
    ),
    // Introspection that shows other worlds' keys, commands or connections.
    ("monitor", "streams every client's commands"),
    (
        "info",
        "INFO keyspace/clients/commandstats describe every world",
    ),
    (
        "slowlog",
        "shows other clients' commands with their arguments",
    ),
    ("latency", "server-wide diagnostics (@admin)"),
    (
        "memory",
        "MEMORY STATS counts every world's keys (MEMORY USAGE is re-allowed)",
    ),
    (
        "client",
        "CLIENT LIST/KILL/PAUSE see or stop other connections, and CLIENT TRACKING BCAST \
         streams every world's modified key names (own-connection subcommands re-allowed)",
    ),
    (
        "pubsub",
        "PUBSUB CHANNELS/NUMSUB/NUMPAT list every world's channels (not checked against &patterns)",
    ),
    (
        "cluster",
        "CLUSTER GETKEYSINSLOT/COUNTKEYSINSLOT list and count every world's keys",
    ),
    (
        "function",
        "one library namespace for all: FUNCTION LIST/DUMP show, DELETE/FLUSH/KILL/RESTORE \
         change other worlds' functions",
    ),
    (
        "script",
        "SCRIPT FLUSH empties every world's script cache, SCRIPT KILL stops another world's \
         script, SCRIPT DEBUG can block the server (LOAD/EXISTS re-allowed)",
    ),
    // Server administration (already @admin/@dangerous).
    (
        "acl",
        "ACL LOG/LIST/GETUSER show other users (WHOAMI/CAT/GENPASS re-allowed)",
    ),
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

/// Subcommands re-allowed after their command is denied in [`DENIED`]: each acts on the
/// caller's own connection, keys or nothing at all. Entries the server does not know (the
/// 7.2 additions on a 7.0 server) are left out.
pub const ALLOWED_BACK: &[&str] = &[
    // Client libraries send these while connecting.
    "client|id",
    "client|getname",
    "client|setname",
    "client|setinfo",
    "client|info",
    "client|reply",
    "client|no-touch",
    "client|help",
    "acl|whoami",
    "acl|cat",
    "acl|genpass",
    "acl|help",
    // Scripts are content-addressed; loading one changes nothing for other worlds.
    "script|load",
    "script|exists",
    "script|help",
    // The caller's own key (key-checked).
    "memory|usage",
    "memory|help",
];

/// The key and channel prefix of a slice: its name and a colon (slice names hold no `:`,
/// so no prefix is the start of another).
pub fn prefix(slice: &Slice) -> String {
    format!("{}:", slice.name)
}

/// The `ACL SETUSER <name>` rules for `slice`, confined to database `db`; `known` says
/// whether the server has a command (`"client|setinfo"`).
pub fn acl_rules(slice: &Slice, db: i64, known: impl Fn(&str) -> bool) -> Vec<String> {
    let prefix = prefix(slice);
    let mut rules = vec![
        // `reset` first: whatever the user had (drift, an older rule) is gone.
        "reset".to_owned(),
        "on".to_owned(),
        // The password as its SHA-256, so the plain text is never part of the command.
        format!("#{}", sha256_hex(&slice.secret)),
        format!("~{prefix}*"),
        "resetchannels".to_owned(),
        format!("&{prefix}*"),
        "+@all".to_owned(),
        "-@dangerous".to_owned(),
        "-@admin".to_owned(),
    ];
    rules.extend(
        DENIED
            .iter()
            .filter(|(c, _)| known(c))
            .map(|(c, _)| format!("-{c}")),
    );
    rules.extend(
        ALLOWED_BACK
            .iter()
            .filter(|c| known(c))
            .map(|c| format!("+{c}")),
    );
    // Clients send `SELECT <db>` for the database of their URL (some even for 0).
    rules.push(format!("+select|{db}"));
    rules
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The redis (and valkey) adapter.
pub struct Redis;

/// The shared server, from `admin_url`.
struct Server {
    /// The admin URL as given (credentials included).
    url: String,
    /// `redis://host:port`, for messages.
    shown: String,
    /// `redis` or `rediss`.
    scheme: &'static str,
    /// `host:port` as written in the URL (IPv6 in brackets).
    authority: String,
    /// The database of the admin URL (`/3`), 0 without one.
    db: i64,
    /// Strings that must never appear in a message.
    secrets: Vec<String>,
}

impl Server {
    fn from_config(cfg: &AdapterConfig) -> Result<Server, AdapterError> {
        let Some(url) = cfg.admin_url.as_deref() else {
            return Err(AdapterError::Config(
                "the redis adapter needs the server's admin address: set \
                 `admin_url = \"redis://USER:PASSWORD@HOST:PORT/DB\"` on the service in \
                 binky.toml, or install redis-server so binky can run its own"
                    .into(),
            ));
        };
        let shown = redact(url);
        let bad = |why: String| {
            AdapterError::Config(format!(
                "admin_url {shown}: {why}; write it as redis://USER:PASSWORD@HOST:PORT/DB"
            ))
        };
        let parts = Url::parse(url).ok_or_else(|| bad("not a URL".into()))?;
        let scheme = match parts.scheme {
            "redis" | "valkey" => "redis",
            "rediss" | "valkeys" => {
                return Err(bad(
                    "TLS (rediss://) is not supported by binky's redis adapter yet".into(),
                ))
            }
            other => return Err(bad(format!("`{other}://` is not a TCP redis address"))),
        };
        let authority = parts.host.to_owned();
        if authority.is_empty() {
            return Err(bad("no host".into()));
        }
        let info = redis::Client::open(url)
            .map_err(|e| bad(e.to_string()))?
            .get_connection_info()
            .clone();
        if !matches!(info.addr(), ConnectionAddr::Tcp(..)) {
            return Err(bad("not a TCP address".into()));
        }
        let settings = info.redis_settings();
        let mut secrets: Vec<String> = settings.password().map(str::to_owned).into_iter().collect();
        if let Some(raw) = password_decoded(url) {
            secrets.push(raw);
        }
        Ok(Server {
            url: url.to_owned(),
            shown,
            scheme,
            authority,
            db: settings.db(),
            secrets,
        })
    }

    /// Remove every secret from a message.
    fn scrub(&self, text: &str, extra: &[&str]) -> String {
        super::scrub_with(text, &self.secrets, extra)
    }

    /// A server error as an adapter error: unreachable (worth retrying) or not.
    fn error(&self, what: &str, err: &RedisError, extra: &[&str]) -> AdapterError {
        let code = err.code().unwrap_or("");
        let refused =
            err.kind() == ErrorKind::AuthenticationFailed || matches!(code, "NOAUTH" | "WRONGPASS");
        let detail = if refused {
            format!(
                "{what}: the server refused admin_url's credentials ({err}); check the user \
                 and password in admin_url"
            )
        } else {
            format!("{what}: {err}")
        };
        let detail = self.scrub(&detail, extra);
        let unreachable = err.is_io_error()
            || err.is_timeout()
            || err.is_connection_refusal()
            || err.is_connection_dropped()
            || refused
            || matches!(
                err.kind(),
                ErrorKind::Server(ServerErrorKind::BusyLoading)
                    | ErrorKind::Server(ServerErrorKind::MasterDown)
                    | ErrorKind::Server(ServerErrorKind::TryAgain)
            )
            || code == "LOADING";
        if unreachable {
            return AdapterError::Unreachable {
                server: self.shown.clone(),
                detail,
            };
        }
        if err.kind() == ErrorKind::InvalidClientConfig {
            return AdapterError::Config(format!("admin_url {}: {detail}", self.shown));
        }
        let hint = if code == "NOPERM" {
            "; the admin_url's user needs `+@all` (ACL SETUSER, ACL DELUSER, INFO, SCAN)"
        } else {
            ""
        };
        AdapterError::Server {
            server: self.shown.clone(),
            detail: format!("{detail}{hint}"),
        }
    }

    /// One admin connection, with bounded connect and command times.
    async fn connect(&self) -> Result<MultiplexedConnection, AdapterError> {
        let client = redis::Client::open(self.url.as_str())
            .map_err(|e| self.error("bad admin_url", &e, &[]))?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT));
        // The outer bound covers what the client's own timeouts might not (DNS).
        match tokio::time::timeout(
            CONNECT_TIMEOUT + Duration::from_secs(1),
            client.get_multiplexed_async_connection_with_config(&config),
        )
        .await
        {
            Ok(Ok(con)) => Ok(con),
            Ok(Err(e)) => Err(self.error("connect", &e, &[])),
            Err(_) => Err(AdapterError::Unreachable {
                server: self.shown.clone(),
                detail: format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()),
            }),
        }
    }

    /// Refuse servers whose ACLs cannot isolate a world (see the module doc).
    async fn check_version(&self, con: &mut MultiplexedConnection) -> Result<(), AdapterError> {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(con)
            .await
            .map_err(|e| self.error("INFO server", &e, &[]))?;
        let version = info_field(&info, "redis_version").unwrap_or_default();
        let major: u32 = version
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        if major >= 7 {
            return Ok(());
        }
        let why = if major < 6 {
            "it has no ACL users (Redis 6 added them)"
        } else {
            "binky's isolation rule relies on Redis 7's ACLs (per-subcommand rules, SORT BY/GET \
             checked against key patterns)"
        };
        Err(AdapterError::Config(format!(
            "{} runs Redis {version}, and {why}: point admin_url at Redis 7 or newer, or \
             Valkey",
            self.shown
        )))
    }

    /// Which of `names` the server has (`COMMAND INFO` answers nil for unknown ones).
    async fn known_commands(
        &self,
        con: &mut MultiplexedConnection,
        names: &[&str],
    ) -> Result<BTreeSet<String>, AdapterError> {
        let infos: Vec<Value> = redis::cmd("COMMAND")
            .arg("INFO")
            .arg(names)
            .query_async(con)
            .await
            .map_err(|e| self.error("COMMAND INFO", &e, &[]))?;
        Ok(names
            .iter()
            .zip(infos)
            .filter(|(_, v)| !matches!(v, Value::Nil))
            .map(|(n, _)| (*n).to_owned())
            .collect())
    }

    /// Persist users when the server keeps them in an ACL file; a server without one keeps
    /// them in memory only, which is its operator's choice.
    async fn save_acl(&self, con: &mut MultiplexedConnection) -> Result<(), AdapterError> {
        match redis::cmd("ACL").arg("SAVE").query_async::<()>(con).await {
            Ok(()) => Ok(()),
            Err(e) if e.to_string().contains("not configured to use an ACL file") => Ok(()),
            Err(e) => Err(self.error(
                "ACL SAVE (the slice's user would not survive a restart)",
                &e,
                &[],
            )),
        }
    }

    /// The databases holding keys (`INFO keyspace`: `db0:keys=3,…`).
    async fn databases_with_keys(
        &self,
        con: &mut MultiplexedConnection,
    ) -> Result<Vec<i64>, AdapterError> {
        let info: String = redis::cmd("INFO")
            .arg("keyspace")
            .query_async(con)
            .await
            .map_err(|e| self.error("INFO keyspace", &e, &[]))?;
        Ok(info
            .lines()
            .filter_map(|l| l.strip_prefix("db")?.split_once(':')?.0.parse().ok())
            .collect())
    }
}

/// `field:value` from an `INFO` answer.
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':').map(str::trim))
}

/// Slice names are `[a-z0-9_]` (controllers' `slice_name`); anything else could widen a
/// glob (`*`, `?`, `[`) or split an ACL rule, so it is refused rather than escaped.
use super::check_plain_name as check_name;

impl Adapter for Redis {
    fn names(&self) -> &'static [&'static str] {
        &["redis", "valkey"]
    }

    fn provision<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async move {
            check_name(slice)?;
            let server = Server::from_config(cfg)?;
            let mut con = server.connect().await?;
            server.check_version(&mut con).await?;
            let names: Vec<&str> = DENIED
                .iter()
                .map(|(c, _)| *c)
                .chain(ALLOWED_BACK.iter().copied())
                .collect();
            let known = server.known_commands(&mut con, &names).await?;
            let rules = acl_rules(slice, server.db, |c| known.contains(c));
            redis::cmd("ACL")
                .arg("SETUSER")
                .arg(&slice.name)
                .arg(&rules)
                .query_async::<()>(&mut con)
                .await
                .map_err(|e| {
                    server.error(&format!("ACL SETUSER {}", slice.name), &e, &[&slice.secret])
                })?;
            server.save_acl(&mut con).await
        })
    }

    fn resolve<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Address, AdapterError>> {
        Box::pin(async move {
            check_name(slice)?;
            let server = Server::from_config(cfg)?;
            let url = format!(
                "{}://{}:{}@{}/{}",
                server.scheme,
                // Slice names and secrets need no escape, but a stray character must not
                // break the URL.
                percent_encode(&slice.name),
                percent_encode(&slice.secret),
                server.authority,
                server.db
            );
            Ok(Address {
                url,
                tokens: BTreeMap::from([("prefix".to_owned(), prefix(slice))]),
            })
        })
    }

    fn teardown<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async move {
            check_name(slice)?;
            let server = Server::from_config(cfg)?;
            let mut con = server.connect().await?;
            // The user first: the server drops its connections, so no world process writes
            // under the prefix while it is swept. A teardown cut short is finished by the
            // next one (the slice controller keeps its finalizer until this returns Ok).
            redis::cmd("ACL")
                .arg("DELUSER")
                .arg(&slice.name)
                .query_async::<i64>(&mut con)
                .await
                .map_err(|e| server.error(&format!("ACL DELUSER {}", slice.name), &e, &[]))?;
            server.save_acl(&mut con).await?;
            // Every database with keys, not only the URL's: `COPY … DB n` may have put
            // some of the world's keys elsewhere.
            let pattern = format!("{}*", prefix(slice));
            for db in server.databases_with_keys(&mut con).await? {
                redis::cmd("SELECT")
                    .arg(db)
                    .query_async::<()>(&mut con)
                    .await
                    .map_err(|e| server.error(&format!("SELECT {db}"), &e, &[]))?;
                let mut cursor: u64 = 0;
                loop {
                    let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(&pattern)
                        .arg("COUNT")
                        .arg(SCAN_COUNT)
                        .query_async(&mut con)
                        .await
                        .map_err(|e| server.error(&format!("SCAN MATCH {pattern}"), &e, &[]))?;
                    if !keys.is_empty() {
                        redis::cmd("UNLINK")
                            .arg(&keys)
                            .query_async::<i64>(&mut con)
                            .await
                            .map_err(|e| server.error("UNLINK", &e, &[]))?;
                    }
                    if next == 0 {
                        break;
                    }
                    cursor = next;
                }
            }
            Ok(())
        })
    }

    fn list<'a>(
        &'a self,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Vec<String>, AdapterError>> {
        Box::pin(async move {
            let server = Server::from_config(cfg)?;
            let mut con = server.connect().await?;
            let users: Vec<String> = redis::cmd("ACL")
                .arg("USERS")
                .query_async(&mut con)
                .await
                .map_err(|e| server.error("ACL USERS", &e, &[]))?;
            Ok(users.into_iter().filter(|u| u.starts_with("bk_")).collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::testing::cfg;

    fn slice() -> Slice {
        Slice {
            name: "bk_acme_login_fix_cache".into(),
            secret: "0123abcd".into(),
        }
    }

    fn resolve(url: &str) -> Result<Address, AdapterError> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(Redis.resolve(&slice(), &cfg(url)))
    }

    #[test]
    fn the_address_carries_the_slice_user_and_the_admin_urls_database() {
        let a = resolve("redis://default:s3cret@127.0.0.1:6379/3").expect("resolves");
        assert_eq!(
            a.url,
            "redis://bk_acme_login_fix_cache:0123abcd@127.0.0.1:6379/3"
        );
        assert_eq!(a.tokens["prefix"], "bk_acme_login_fix_cache:");
        let a = resolve("valkey://:pw@[::1]:7000").expect("resolves");
        assert_eq!(
            a.url,
            "redis://bk_acme_login_fix_cache:0123abcd@[::1]:7000/0"
        );
        let a = resolve("redis://localhost").expect("resolves");
        assert_eq!(
            a.url,
            "redis://bk_acme_login_fix_cache:0123abcd@localhost/0"
        );
    }

    #[test]
    fn unusable_admin_urls_name_the_fix_without_the_password() {
        for url in [
            "rediss://u:topsecret@h:6379",
            "http://u:topsecret@h",
            "redis://u:topsecret@h/x",
        ] {
            let err = resolve(url).expect_err(url).to_string();
            assert!(!err.contains("topsecret"), "{err}");
            assert!(err.contains("redis://USER:PASSWORD@HOST:PORT/DB"), "{err}");
        }
        let none = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(Redis.resolve(&slice(), &AdapterConfig::default()))
            .expect_err("no admin_url");
        assert!(none.to_string().contains("admin_url"), "{none}");
    }

    #[test]
    fn the_rule_denies_keyless_commands_and_re_allows_only_known_subcommands() {
        let known = |c: &str| c != "client|setinfo" && c != "client|no-touch";
        let rules = acl_rules(&slice(), 2, known);
        let at = |r: &str| rules.iter().position(|x| x == r).expect(r);
        assert_eq!(rules[0], "reset");
        assert!(rules.contains(&"~bk_acme_login_fix_cache:*".to_owned()));
        assert!(rules.contains(&"&bk_acme_login_fix_cache:*".to_owned()));
        assert!(at("resetchannels") < at("&bk_acme_login_fix_cache:*"));
        for denied in [
            "-keys",
            "-scan",
            "-randomkey",
            "-dbsize",
            "-flushall",
            "-flushdb",
        ] {
            assert!(at("+@all") < at(denied), "{denied}");
        }
        assert!(at("-client") < at("+client|id"));
        assert!(at("-select") < at("+select|2"));
        assert!(!rules
            .iter()
            .any(|r| r.contains("setinfo") || r.contains("no-touch")));
        // The password goes as its hash, never as text.
        assert!(!rules.iter().any(|r| r.contains("0123abcd")));
        assert!(rules.contains(&format!("#{}", sha256_hex("0123abcd"))));
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

    #[test]
    fn info_fields_are_read() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:0\r\n";
        assert_eq!(info_field(info, "redis_version"), Some("7.0.15"));
        assert_eq!(info_field(info, "redis_git"), None);
    }
}
