//! The MySQL-family adapter (`mysql`, `mariadb`, `percona`: one wire protocol, one
//! implementation): each slice is one database and one user of its own on a shared server,
//! reached through the service's `admin_url`.
//!
//! # What a slice is
//! - A database named after the slice (MySQL allows 64 characters; slice names have 63 at
//!   most), created with the server's default character set unless the `charset` /
//!   `collation` options say otherwise.
//! - A user `'<user>'@'%'`, `<user>` being the slice name made to fit 32 characters (MySQL
//!   5.7+ caps user names there; [`fit_name`] keeps long names distinct with a hash), whose
//!   password is the slice's secret, and whose only privilege is `ALL PRIVILEGES` on its own
//!   database. The server enforces the isolation: another world's user gets "access
//!   denied" on this database, and this user on every other.
//! - `GRANT … ON db.*` reads `_` and `%` in a database name as wildcards, so `bk_a_db`
//!   would also match `bkxaxdb`: binky writes the name with `\_` (or, on a MySQL whose
//!   `partial_revokes` is on, where wildcards are literal already, as it is).
//!
//! # Guarantees
//! - Every verb is idempotent. Provisioning an existing slice heals it: the password is
//!   set to the secret again, the account unlocked, the grant given again.
//! - Teardown drops the user first (no new logins), ends every session of that user or in
//!   that database (a connected application cannot keep the slice alive, nor hold the
//!   metadata lock `DROP DATABASE` waits for), then drops the database: nothing is left.
//! - Names are checked (`[a-z0-9_]`, at most 64 characters) before they reach any SQL;
//!   table and column names read from a template are quoted with backticks doubled.
//! - The secret never reaches a MariaDB server in clear text: binky computes the
//!   `mysql_native_password` hash itself and sends `IDENTIFIED BY PASSWORD '*…'`, so the
//!   secret cannot show up in the general log, the binary log or the process list (MariaDB
//!   writes statements there as they came). MySQL and Percona get `IDENTIFIED BY '…'`,
//!   which they rewrite in their logs, and hash with their default plugin
//!   (`caching_sha2_password` on MySQL 8).
//! - No error message carries a password: the server is shown as `mysql://host:port` and
//!   every detail is scrubbed of the admin password and the slice's secret.
//! - A server that is down, does not answer within 5 s, is going away, out of connections,
//!   or refuses `admin_url`'s credentials gives [`AdapterError::Unreachable`] (the world
//!   waits and retries; the credentials message says to check the user and password in
//!   `admin_url`); an SQL error gives [`AdapterError::Server`] with the server's words.
//!
//! # Clone (golden templates)
//! MySQL has no `CREATE DATABASE … TEMPLATE`; `clone_slice` copies inside the server, over
//! one admin session with `FOREIGN_KEY_CHECKS=0`, `UNIQUE_CHECKS=0` and
//! `sql_mode=NO_AUTO_VALUE_ON_ZERO` (so a row whose auto-increment column holds 0 keeps it):
//! 1. the copy's user, then its database with the template's character set and collation
//!    (a copy left by an attempt that died half-way is dropped first);
//! 2. every `BASE TABLE`: its `SHOW CREATE TABLE` run in the copy (columns, indexes, foreign
//!    keys, checks, partitions and the `AUTO_INCREMENT` counter as they are), then
//!    `INSERT INTO copy.t (…) SELECT … FROM template.t` over every column that is not
//!    generated (generated columns are computed again);
//! 3. stored procedures and functions, then views (in as many passes as their dependencies
//!    need), then triggers (after the rows, so they do not fire on the copy), each from its
//!    `SHOW CREATE …` with the template's schema name replaced by the copy's and its
//!    `DEFINER` made the copy's user (so nothing in the copy runs with another account's
//!    rights, and the world's user may alter or drop it).
//!
//! A template holding what this cannot copy faithfully — events, MariaDB sequences,
//! system-versioned tables, Oracle-mode packages — is refused *before* anything is made,
//! with an [`AdapterError::Config`] error: the world then falls back to provision, migrate
//! and seed (a `clone_fallback` event) rather than get a partial copy. A copy that fails
//! half-way is dropped before the error is returned, for the same reason.
//!
//! `seal_template` locks the template's user (`ACCOUNT LOCK`), revokes its privileges and
//! ends its sessions: after the seed, nothing but the admin reads or writes the template.
//!
//! # Options
//! - `charset`, `collation`: the database's `CHARACTER SET` / `COLLATE` when binky creates
//!   it (`utf8mb4`, `utf8mb4_unicode_ci`; letters, digits and `_` only). Default: the
//!   server's. A clone takes its template's.
//!
//! # Decisions
//! - **admin_url** is `mysql://USER:PASSWORD@HOST:3306[/db][?params]` (also `mariadb://`,
//!   `percona://`, or `mysql+<driver>://`); without one, `$BINKY_MYSQL_URL` (binky itself
//!   starts its managed MariaDB for a service without `admin_url`, see
//!   [`crate::servers::mariadb`]). `?socket=/path` connects over that Unix socket.
//! - **The slice URL** is `<scheme>://<user>:<secret>@<host:port as in admin_url>/<db>`,
//!   user and secret percent-encoded, with the admin URL's query parameters kept except
//!   those naming credentials (`user`, `username`, `password`, `pass`). Tokens: `user`,
//!   `password`, `database`, `host`, `port`.
//! - **No TLS yet**: an admin URL asking for it (`ssl-mode=REQUIRED`, `sslmode=require`,
//!   `require_ssl=true`, `ssl=true`, `tls=true`, …) is refused saying so.
//! - The admin needs: `CREATE USER`, all privileges `WITH GRANT OPTION` (to grant them on a
//!   slice), `PROCESS` and `CONNECTION ADMIN`/`SUPER` (to end a slice's sessions), and for
//!   clone `SET USER`/`SUPER` (to name the copy's user as `DEFINER`). `root` has them all.
//!
//! # Which home made a slice
//! MySQL keeps no comment on a database (MariaDB's schema comment is not MySQL 8's), so the
//! home that made each slice is a row of a table binky makes on the server,
//! `binky_catalog.slices` (slice name → home; see [`crate::adapters::Maker`]): a claim is an
//! `INSERT IGNORE` against its primary key, so of two homes claiming one slice, one wins.
//! Teardown removes the row last.
//!
//! # Caveats
//! - `list` (for `binky gc`) returns every database named `bk_…`, and a database of a
//!   slice's name that exists already is used as it is. Keep `bk_` names for binky on a
//!   shared server.
//! - An anonymous account (`''@'localhost'`, made by old installers) matches before
//!   `'user'@'%'` for clients connecting through `localhost`, and the slice's login fails;
//!   drop anonymous accounts (`mysql_secure_installation` does).
//! - A clone copies rows with `INSERT … SELECT`: as fast as the server writes, far slower
//!   than PostgreSQL's file copy for a large seed. The copy is not atomic (a sealed template
//!   does not change, so it needs not be).
//! - Run against MariaDB 10.11 only. The MySQL 8 / Percona paths (`partial_revokes`,
//!   `caching_sha2_password` over an RSA key exchange, MySQL's error codes) follow their
//!   documentation but have not been run against a real server here.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, DriverError, OptsBuilder, Row, Value};

use super::{
    bounded, fit_name, Adapter, AdapterConfig, AdapterError, Address, Maker, Result, Scrub, Slice,
};
use binky_controllers::url::{percent_decode, percent_encode, Url};

mod admin;
mod clone;
mod slice;
use admin::*;
use clone::*;
use slice::*;

/// The MySQL-family adapter (`adapter = "mysql"`, `"mariadb"` or `"percona"`).
pub struct Mysql;

/// Where the admin URL comes from when the service has none (binky 0.1.2's variable).
pub const ENV_URL: &str = super::AdapterKind::Mysql.env_var();
/// Bound on opening a connection: TCP and the handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on one verb once connected; also the server-side lock wait bound.
const VERB_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on copying a template (rows are copied as fast as the server writes them).
const CLONE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// MySQL's database name limit.
const MAX_DATABASE: usize = 64;
/// MySQL 5.7+'s user name limit (MariaDB allows 80).
const MAX_USER: usize = 32;
/// Every admin session's `sql_mode`: no `ANSI_QUOTES` (backticks quote identifiers), no
/// `NO_BACKSLASH_ESCAPES` (literals escape with `\`), and zeros kept in auto-increment
/// columns when rows are copied.
const SESSION_SQL_MODE: &str = "NO_AUTO_VALUE_ON_ZERO";

/// Server errors that mean "not now": going away, killed, out of connections, a lock or
/// a statement timeout.
const TRANSIENT: &[u16] = &[
    1040, // too many connections
    1053, // server shutdown in progress
    1205, // lock wait timeout
    1213, // deadlock
    1317, // query interrupted
    1927, // connection killed (MariaDB)
    1969, // statement timeout (MariaDB)
    2006, // server has gone away
    2013, // lost connection
    3024, // statement timeout (MySQL)
    4031, // disconnected for inactivity (MySQL)
];
/// Connection errors that mean the server refused the admin's credentials.
const REFUSED: &[u16] = &[
    1044, // access denied to the database
    1045, // access denied for user
    1251, // authentication method not supported
    1698, // access denied (no password)
    1862, // password expired
    3118, // account locked (MySQL)
    4151, // account locked (MariaDB)
];
/// Errors that mean the admin lacks a privilege.
const PRIVILEGE: &[u16] = &[1044, 1142, 1143, 1227, 1410, 1370, 1095];

#[async_trait::async_trait]
impl Adapter for Mysql {
    // It clones (`AdapterKind::can_clone`): table by table inside the server (see the module
    // doc), with no client binary.
    fn kind(&self) -> Option<super::AdapterKind> {
        Some(super::AdapterKind::Mysql)
    }

    async fn provision(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        check_slice(slice)?;
        let charset = DbCharset::from_options(cfg)?;
        with_admin(cfg, &[&slice.secret], async |admin| {
            provision(admin, slice, &charset).await
        })
        .await
    }

    async fn resolve(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Address> {
        check_slice(slice)?;
        let target = Target::parse(&admin_url(cfg)?)?;
        Ok(target.slice_address(slice))
    }

    async fn teardown(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        check_name(&slice.name)?;
        with_admin(cfg, &[&slice.secret], async |admin| {
            teardown(admin, &slice.name).await
        })
        .await
    }

    async fn list(&self, cfg: &AdapterConfig) -> Result<Vec<String>> {
        with_admin(cfg, &[], async |admin| {
            let rows = admin
                .rows(
                    "listing slices",
                    "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA \
                     WHERE SCHEMA_NAME LIKE 'bk\\_%' ORDER BY SCHEMA_NAME",
                )
                .await?;
            Ok(rows.iter().filter_map(|r| text(r, 0)).collect())
        })
        .await
    }

    async fn exists(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Option<bool>> {
        check_name(&slice.name)?;
        with_admin(cfg, &[&slice.secret], async |admin| {
            admin.database_exists(&slice.name).await
        })
        .await
        .map(Some)
    }

    async fn maker(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Maker> {
        check_name(&slice.name)?;
        with_admin(cfg, &[&slice.secret], async |admin| {
            maker(admin, &slice.name).await
        })
        .await
    }

    async fn claim(&self, slice: &Slice, cfg: &AdapterConfig, home: &str) -> Result<Maker> {
        check_name(&slice.name)?;
        with_admin(cfg, &[&slice.secret], async |admin| {
            claim(admin, &slice.name, home).await
        })
        .await
    }

    async fn clone_slice(&self, from: &Slice, to: &Slice, cfg: &AdapterConfig) -> Result<()> {
        check_name(&from.name)?;
        check_slice(to)?;
        if from.name == to.name {
            return Err(AdapterError::Config(format!(
                "cannot clone slice `{}` into itself",
                to.name
            )));
        }
        let mut admin = Admin::connect(cfg, &[&from.secret, &to.secret]).await?;
        let result = clone(&mut admin, &from.name, to).await;
        admin.finish(result).await
    }

    async fn seal_template(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        check_name(&slice.name)?;
        with_admin(cfg, &[&slice.secret], async |admin| {
            seal(admin, &slice.name).await
        })
        .await
    }
}

/// The admin URL, or a message saying where it comes from.
fn admin_url(cfg: &AdapterConfig) -> Result<String> {
    admin_url_or(cfg, std::env::var(ENV_URL).ok())
}

/// `cfg`'s admin URL, else `from_env` (the value of [`ENV_URL`]).
fn admin_url_or(cfg: &AdapterConfig, from_env: Option<String>) -> Result<String> {
    if let Some(url) = &cfg.admin_url {
        return Ok(url.clone());
    }
    match from_env {
        Some(url) if !url.trim().is_empty() => Ok(url.trim().to_owned()),
        _ => Err(AdapterError::Config(format!(
            "the mysql adapter needs the server's admin URL: set `admin_url = \
             \"mysql://USER:PASSWORD@HOST:3306\"` on the service in binky.toml (a user that \
             may create users and databases) or ${ENV_URL}, or leave it out to use binky's \
             managed MariaDB"
        ))),
    }
}

fn check_name(name: &str) -> Result<()> {
    if !(name.len() <= MAX_DATABASE && super::is_plain_name(name)) {
        return Err(AdapterError::Config(format!(
            "`{name}` cannot name a MySQL slice: 1 to {MAX_DATABASE} characters of a-z, 0-9 \
             and _"
        )));
    }
    Ok(())
}

fn check_slice(slice: &Slice) -> Result<()> {
    check_name(&slice.name)?;
    if slice.secret.is_empty() || slice.secret.contains('\0') {
        return Err(AdapterError::Config(format!(
            "the secret of slice `{}` is empty or holds a NUL byte, which MySQL cannot take \
             as a password",
            slice.name
        )));
    }
    Ok(())
}

/// `` `name` `` with backticks doubled.
fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// `'text'` with `\` and `'` escaped (the session's `sql_mode` has no
/// `NO_BACKSLASH_ESCAPES`).
fn quote_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\0' => out.push_str("\\0"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\x1a' => out.push_str("\\Z"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// The slice user's account, `'<user>'@'%'` (`name` is checked: no quote in it).
fn account(name: &str) -> String {
    format!("'{}'@'%'", fit_name(name, MAX_USER))
}

/// `*` and the upper-case hex of SHA-1(SHA-1(`password`)): what MariaDB's `PASSWORD()`
/// returns and `mysql_native_password` stores, computed here so that the password itself
/// never travels to the server.
pub fn native_password_hash(password: &str) -> String {
    let twice = sha1(&sha1(password.as_bytes()));
    let hex: String = twice.iter().map(|b| format!("{b:02X}")).collect();
    format!("*{hex}")
}

/// SHA-1, for the `mysql_native_password` hash format above.
fn sha1(data: &[u8]) -> [u8; 20] {
    use sha1::{Digest, Sha1};
    Sha1::digest(data).into()
}

/// A column of a row as text (`None` for NULL).
fn text(row: &Row, i: usize) -> Option<String> {
    match row.as_ref(i)? {
        Value::NULL => None,
        Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::Int(n) => Some(n.to_string()),
        Value::UInt(n) => Some(n.to_string()),
        other => Some(other.as_sql(false)),
    }
}

/// Connects as the admin (`secrets` scrubbed from its messages too), runs `verb` on the
/// connection within [`VERB_TIMEOUT`], and disconnects whatever the verb gave: the way
/// every verb but clone uses the server.
async fn with_admin<T>(
    cfg: &AdapterConfig,
    secrets: &[&str],
    verb: impl AsyncFnOnce(&mut Admin) -> Result<T>,
) -> Result<T> {
    let mut admin = Admin::connect(cfg, secrets).await?;
    let server = admin.server.clone();
    let result = bounded(&server, VERB_TIMEOUT, verb(&mut admin)).await;
    admin.finish(result).await
}

/// The `charset` and `collation` options (or a template's).
#[derive(Debug, Default)]
struct DbCharset {
    charset: Option<String>,
    collation: Option<String>,
}

impl DbCharset {
    fn from_options(cfg: &AdapterConfig) -> Result<DbCharset> {
        let get = |key: &str| -> Result<Option<String>> {
            match cfg.options.get(key).map(|v| v.trim()) {
                None | Some("") => Ok(None),
                Some(v) if v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') => {
                    Ok(Some(v.to_owned()))
                }
                Some(v) => Err(AdapterError::Config(format!(
                    "options.{key} = `{v}` is not a MySQL {key} name (letters, digits and _, \
                     e.g. utf8mb4 or utf8mb4_unicode_ci)"
                ))),
            }
        };
        Ok(DbCharset {
            charset: get("charset")?,
            collation: get("collation")?,
        })
    }

    fn clause(&self) -> String {
        let mut out = String::new();
        if let Some(c) = &self.charset {
            out.push_str(&format!(" CHARACTER SET {}", quote_ident(c)));
        }
        if let Some(c) = &self.collation {
            out.push_str(&format!(" COLLATE {}", quote_ident(c)));
        }
        out
    }
}

/// What went wrong, in the server's words when it said something.
fn describe(e: &mysql_async::Error) -> String {
    if let mysql_async::Error::Server(s) = e {
        return format!("ERROR {}: {}", s.code, s.message);
    }
    super::error_chain(e)
}

#[cfg(test)]
mod tests;
