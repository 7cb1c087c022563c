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
//!   `percona://`, or `mysql+<driver>://`); without one, `$BINKY_MYSQL_URL` as binky 0.1.2
//!   had it (binky itself starts its managed MariaDB for a service without `admin_url`,
//!   see [`crate::servers::mariadb`]). `?socket=/path` connects over that Unix socket.
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
//! # Caveats
//! - There is no comment or owner on a MySQL database to mark it as binky's: `list` (for
//!   `binky gc`) returns every database named `bk_…`, and a database of a slice's name that
//!   exists already is used as it is. Keep `bk_` names for binky on a shared server.
//! - An anonymous account (`''@'localhost'`, made by old installers) matches before
//!   `'user'@'%'` for clients connecting through `localhost`, and the slice's login fails;
//!   drop anonymous accounts (`mysql_secure_installation` does).
//! - A clone copies rows with `INSERT … SELECT`: as fast as the server writes, far slower
//!   than PostgreSQL's file copy for a large seed. The copy is not atomic (a sealed template
//!   does not change, so it needs not be).
//! - Run against MariaDB 10.11 only. The MySQL 8 / Percona paths (`partial_revokes`,
//!   `caching_sha2_password` over an RSA key exchange, MySQL's error codes) follow their
//!   documentation but have not been run against a real server here.

use std::future::Future;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, DriverError, OptsBuilder, Row, Value};

use super::{
    fit_name, Adapter, AdapterConfig, AdapterError, Address, BoxFuture, Capabilities, Scrub, Slice,
};
use binky_controllers::url::{percent_decode, percent_encode, Url};

/// The MySQL-family adapter (`adapter = "mysql"`, `"mariadb"` or `"percona"`).
pub struct Mysql;

/// Where the admin URL comes from when the service has none (binky 0.1.2's variable).
pub const ENV_URL: &str = "BINKY_MYSQL_URL";
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

impl Adapter for Mysql {
    fn names(&self) -> &'static [&'static str] {
        &["mysql", "mariadb", "percona"]
    }

    fn capabilities<'a>(
        &'a self,
        _cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Capabilities, AdapterError>> {
        // Table by table inside the server (see the module doc): no client binary needed.
        Box::pin(async { Ok(Capabilities { clone: true }) })
    }

    fn provision<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async move {
            check_slice(slice)?;
            let charset = DbCharset::from_options(cfg)?;
            let mut admin = Admin::connect(cfg, &[&slice.secret]).await?;
            let server = admin.server.clone();
            let result = bounded(
                &server,
                VERB_TIMEOUT,
                provision(&mut admin, slice, &charset),
            )
            .await;
            admin.finish(result).await
        })
    }

    fn resolve<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Address, AdapterError>> {
        Box::pin(async move {
            check_slice(slice)?;
            let target = Target::parse(&admin_url(cfg)?)?;
            Ok(target.slice_address(slice))
        })
    }

    fn teardown<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async move {
            check_name(&slice.name)?;
            let mut admin = Admin::connect(cfg, &[&slice.secret]).await?;
            let server = admin.server.clone();
            let result = bounded(&server, VERB_TIMEOUT, teardown(&mut admin, &slice.name)).await;
            admin.finish(result).await
        })
    }

    fn list<'a>(
        &'a self,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Vec<String>, AdapterError>> {
        Box::pin(async move {
            let mut admin = Admin::connect(cfg, &[]).await?;
            let server = admin.server.clone();
            let result = bounded(&server, VERB_TIMEOUT, async {
                let rows = admin
                    .rows(
                        "listing slices",
                        "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA \
                         WHERE SCHEMA_NAME LIKE 'bk\\_%' ORDER BY SCHEMA_NAME",
                    )
                    .await?;
                Ok(rows.iter().filter_map(|r| text(r, 0)).collect())
            })
            .await;
            admin.finish(result).await
        })
    }

    fn exists<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Option<bool>, AdapterError>> {
        Box::pin(async move {
            check_name(&slice.name)?;
            let mut admin = Admin::connect(cfg, &[&slice.secret]).await?;
            let server = admin.server.clone();
            let result = bounded(&server, VERB_TIMEOUT, admin.database_exists(&slice.name))
                .await
                .map(Some);
            admin.finish(result).await
        })
    }

    fn clone_slice<'a>(
        &'a self,
        from: &'a Slice,
        to: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async move {
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
        })
    }

    fn seal_template<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async move {
            check_name(&slice.name)?;
            let mut admin = Admin::connect(cfg, &[&slice.secret]).await?;
            let server = admin.server.clone();
            let result = bounded(&server, VERB_TIMEOUT, seal(&mut admin, &slice.name)).await;
            admin.finish(result).await
        })
    }
}

async fn provision(
    admin: &mut Admin,
    slice: &Slice,
    charset: &DbCharset,
) -> Result<(), AdapterError> {
    ensure_user(admin, slice).await?;
    admin
        .execute(
            "creating the database",
            &format!(
                "CREATE DATABASE IF NOT EXISTS {}{}",
                quote_ident(&slice.name),
                charset.clause()
            ),
        )
        .await
}

/// The slice's user: made or healed (password, unlocked), granted its database only.
async fn ensure_user(admin: &mut Admin, slice: &Slice) -> Result<(), AdapterError> {
    let account = account(&slice.name);
    let identified = if admin.mariadb {
        format!(
            "IDENTIFIED BY PASSWORD '{}'",
            native_password_hash(&slice.secret)
        )
    } else {
        format!("IDENTIFIED BY {}", quote_literal(&slice.secret))
    };
    admin
        .execute(
            "creating the user",
            &format!("CREATE USER IF NOT EXISTS {account} {identified}"),
        )
        .await?;
    admin
        .execute(
            "setting the user's password",
            &format!("ALTER USER {account} {identified}"),
        )
        .await?;
    admin.lock_account(&account, false).await?;
    let on = admin.grant_target(&slice.name);
    admin
        .execute(
            "granting the user its database",
            &format!("GRANT ALL PRIVILEGES ON {on}.* TO {account}"),
        )
        .await
}

async fn teardown(admin: &mut Admin, name: &str) -> Result<(), AdapterError> {
    // The user first: no session can start while the database goes.
    admin
        .execute(
            "dropping the user",
            &format!("DROP USER IF EXISTS {}", account(name)),
        )
        .await?;
    admin.end_sessions(name).await?;
    admin
        .execute(
            "dropping the database",
            &format!("DROP DATABASE IF EXISTS {}", quote_ident(name)),
        )
        .await
}

/// Lock the template's user, take its privileges, end its sessions.
async fn seal(admin: &mut Admin, name: &str) -> Result<(), AdapterError> {
    let account = account(name);
    if admin.user_exists(name).await? {
        admin.lock_account(&account, true).await?;
        admin
            .execute(
                "revoking the template user's privileges",
                &format!("REVOKE ALL PRIVILEGES, GRANT OPTION FROM {account}"),
            )
            .await?;
    }
    admin.end_sessions(name).await
}

/// What a template holds that [`clone`] copies.
#[derive(Debug, Default)]
struct Inventory {
    tables: Vec<String>,
    views: Vec<String>,
    triggers: Vec<String>,
    /// `(PROCEDURE | FUNCTION, name)`.
    routines: Vec<(String, String)>,
}

/// Copy the database `from` into a fresh slice `to` inside the server (see the module doc).
async fn clone(admin: &mut Admin, from: &str, to: &Slice) -> Result<(), AdapterError> {
    let server = admin.server.clone();
    // Whatever can refuse does so before anything is made.
    let (inventory, charset) = bounded(&server, VERB_TIMEOUT, survey(admin, from)).await?;
    bounded(&server, VERB_TIMEOUT, async {
        ensure_user(admin, to).await?;
        // A copy left by an attempt that died half-way is made again from scratch.
        admin.end_sessions(&to.name).await?;
        admin
            .execute(
                "dropping a half-made copy",
                &format!("DROP DATABASE IF EXISTS {}", quote_ident(&to.name)),
            )
            .await?;
        admin
            .execute(
                "creating the copy",
                &format!(
                    "CREATE DATABASE {}{}",
                    quote_ident(&to.name),
                    charset.clause()
                ),
            )
            .await
    })
    .await?;
    let copied = bounded(
        &server,
        CLONE_TIMEOUT,
        copy(admin, &inventory, from, &to.name),
    )
    .await;
    if copied.is_err() {
        // Never leave a partial copy behind: the world falls back to provision, migrate and
        // seed, which must start from an empty database.
        let name = to.name.clone();
        let _ = bounded(&server, VERB_TIMEOUT, async {
            admin.end_sessions(&name).await?;
            admin
                .execute(
                    "dropping the failed copy",
                    &format!("DROP DATABASE IF EXISTS {}", quote_ident(&name)),
                )
                .await
        })
        .await;
    }
    copied
}

/// The template's objects, or a `Config` error naming what cannot be copied.
async fn survey(admin: &mut Admin, from: &str) -> Result<(Inventory, DbCharset), AdapterError> {
    let schema = admin
        .rows_with(
            "reading the template",
            "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME \
             FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
            vec![Value::from(from)],
        )
        .await?;
    let Some(schema) = schema.first() else {
        return Err(AdapterError::Server {
            server: admin.server.clone(),
            detail: format!("the golden template database `{from}` does not exist"),
        });
    };
    let charset = DbCharset {
        charset: text(schema, 0),
        collation: text(schema, 1),
    };
    let mut inv = Inventory::default();
    let mut refused: Vec<String> = Vec::new();
    for row in admin
        .rows_with(
            "listing the template's tables",
            "SELECT TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME",
            vec![Value::from(from)],
        )
        .await?
    {
        let (Some(name), Some(kind)) = (text(&row, 0), text(&row, 1)) else {
            continue;
        };
        match kind.as_str() {
            "BASE TABLE" => inv.tables.push(name),
            "VIEW" => inv.views.push(name),
            "SEQUENCE" => refused.push(format!("sequence `{name}`")),
            "SYSTEM VERSIONED" => refused.push(format!("system-versioned table `{name}`")),
            other => refused.push(format!("{} `{name}`", other.to_ascii_lowercase())),
        }
    }
    for row in admin
        .rows_with(
            "listing the template's routines",
            "SELECT ROUTINE_TYPE, ROUTINE_NAME FROM information_schema.ROUTINES \
             WHERE ROUTINE_SCHEMA = ? ORDER BY ROUTINE_TYPE, ROUTINE_NAME",
            vec![Value::from(from)],
        )
        .await?
    {
        let (Some(kind), Some(name)) = (text(&row, 0), text(&row, 1)) else {
            continue;
        };
        match kind.as_str() {
            "PROCEDURE" | "FUNCTION" => inv.routines.push((kind, name)),
            other => refused.push(format!("{} `{name}`", other.to_ascii_lowercase())),
        }
    }
    for row in admin
        .rows_with(
            "listing the template's events",
            "SELECT EVENT_NAME FROM information_schema.EVENTS WHERE EVENT_SCHEMA = ? \
             ORDER BY EVENT_NAME",
            vec![Value::from(from)],
        )
        .await?
    {
        if let Some(name) = text(&row, 0) {
            refused.push(format!("event `{name}`"));
        }
    }
    for row in admin
        .rows_with(
            "listing the template's triggers",
            "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? \
             ORDER BY EVENT_OBJECT_TABLE, ACTION_TIMING, EVENT_MANIPULATION, ACTION_ORDER",
            vec![Value::from(from)],
        )
        .await?
    {
        if let Some(name) = text(&row, 0) {
            inv.triggers.push(name);
        }
    }
    if !refused.is_empty() {
        return Err(AdapterError::Config(format!(
            "the golden template `{from}` holds what binky cannot copy inside the server \
             ({}); each world is provisioned, migrated and seeded instead",
            refused.join(", ")
        )));
    }
    Ok((inv, charset))
}

/// Copy the inventory of `from` into the empty database `to`, over this session.
async fn copy(
    admin: &mut Admin,
    inv: &Inventory,
    from: &str,
    to: &str,
) -> Result<(), AdapterError> {
    let (src, dst) = (quote_ident(from), quote_ident(to));
    let definer = fit_name(to, MAX_USER);
    admin
        .execute(
            "preparing the copy",
            "SET SESSION foreign_key_checks = 0, unique_checks = 0",
        )
        .await?;
    admin
        .execute("using the copy", &format!("USE {dst}"))
        .await?;
    for table in &inv.tables {
        let t = quote_ident(table);
        let doing = format!("copying the definition of table `{table}`");
        let create = admin
            .rows(&doing, &format!("SHOW CREATE TABLE {src}.{t}"))
            .await?
            .first()
            .and_then(|r| text(r, 1))
            .ok_or_else(|| admin.server_error(&format!("{doing}: no definition")))?;
        admin.execute(&doing, &create).await?;
        let columns: Vec<String> = admin
            .rows_with(
                &doing,
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? \
                   AND EXTRA NOT LIKE '%VIRTUAL GENERATED%' \
                   AND EXTRA NOT LIKE '%STORED GENERATED%' \
                   AND EXTRA NOT LIKE '%PERSISTENT GENERATED%' \
                 ORDER BY ORDINAL_POSITION",
                vec![Value::from(from), Value::from(table.as_str())],
            )
            .await?
            .iter()
            .filter_map(|r| text(r, 0))
            .map(|c| quote_ident(&c))
            .collect();
        if columns.is_empty() {
            continue;
        }
        let list = columns.join(", ");
        admin
            .execute(
                &format!("copying the rows of table `{table}`"),
                &format!("INSERT INTO {dst}.{t} ({list}) SELECT {list} FROM {src}.{t}"),
            )
            .await?;
    }
    // Routines before views (a view may call a function); triggers last, after the rows.
    for (kind, name) in &inv.routines {
        let doing = format!("copying {} `{name}`", kind.to_ascii_lowercase());
        let row = admin
            .rows(
                &doing,
                &format!("SHOW CREATE {kind} {src}.{}", quote_ident(name)),
            )
            .await?;
        let (mode, create) = row
            .first()
            .map(|r| (text(r, 1).unwrap_or_default(), text(r, 2)))
            .unwrap_or_default();
        let create = create.ok_or_else(|| {
            admin.server_error(&format!(
                "{doing}: the server shows no definition (admin_url's user needs SELECT on \
                 mysql.proc, or to be the routine's definer)"
            ))
        })?;
        admin
            .with_sql_mode(&doing, &mode, &rewrite(&create, from, to, &definer))
            .await?;
    }
    let mut pending: Vec<&String> = inv.views.iter().collect();
    while !pending.is_empty() {
        let mut waiting = Vec::new();
        let mut last = None;
        for view in pending.iter().copied() {
            let doing = format!("copying view `{view}`");
            let create = admin
                .rows(
                    &doing,
                    &format!("SHOW CREATE VIEW {src}.{}", quote_ident(view)),
                )
                .await?
                .first()
                .and_then(|r| text(r, 1))
                .ok_or_else(|| admin.server_error(&format!("{doing}: no definition")))?;
            match admin
                .conn
                .query_drop(rewrite(&create, from, to, &definer))
                .await
            {
                Ok(()) => {}
                // It reads a view not made yet: the next pass.
                Err(mysql_async::Error::Server(e)) if matches!(e.code, 1146 | 1356) => {
                    last = Some(admin.error(&doing, &mysql_async::Error::Server(e)));
                    waiting.push(view);
                }
                Err(e) => return Err(admin.error(&doing, &e)),
            }
        }
        if waiting.len() == pending.len() {
            return Err(last.unwrap_or_else(|| admin.server_error("copying views")));
        }
        pending = waiting;
    }
    for trigger in &inv.triggers {
        let doing = format!("copying trigger `{trigger}`");
        let row = admin
            .rows(
                &doing,
                &format!("SHOW CREATE TRIGGER {src}.{}", quote_ident(trigger)),
            )
            .await?;
        let (mode, create) = row
            .first()
            .map(|r| (text(r, 1).unwrap_or_default(), text(r, 2)))
            .unwrap_or_default();
        let create =
            create.ok_or_else(|| admin.server_error(&format!("{doing}: no definition")))?;
        admin
            .with_sql_mode(&doing, &mode, &rewrite(&create, from, to, &definer))
            .await?;
    }
    Ok(())
}

/// A definition read from the template, made the copy's: its schema name replaced and its
/// definer made the copy's user.
fn rewrite(sql: &str, from: &str, to: &str, user: &str) -> String {
    with_definer(&replace_schema(sql, from, to), user)
}

/// `` `from`. `` and a bare `from.` (not inside a longer name) → `` `to`. ``.
fn replace_schema(sql: &str, from: &str, to: &str) -> String {
    let quoted = sql.replace(&format!("`{from}`."), &format!("`{to}`."));
    let bare = format!("{from}.");
    let mut out = String::with_capacity(quoted.len());
    let mut rest = quoted.as_str();
    while let Some(at) = rest.find(&bare) {
        let before = rest[..at].chars().next_back();
        let inside_name =
            before.is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '`'));
        out.push_str(&rest[..at]);
        if inside_name {
            out.push_str(&bare);
        } else {
            out.push_str(&format!("`{to}`."));
        }
        rest = &rest[at + bare.len()..];
    }
    out.push_str(rest);
    out
}

/// The `DEFINER=<account>` clause made `` DEFINER=`user`@`%` ``, or put after `CREATE`
/// when the definition has none (it would default to the admin).
fn with_definer(sql: &str, user: &str) -> String {
    let clause = format!("DEFINER=`{user}`@`%`");
    // ASCII upper-casing keeps byte offsets.
    let upper = sql.to_ascii_uppercase();
    if let Some(at) = upper.find("DEFINER=") {
        let mut end = skip_account_part(sql, at + "DEFINER=".len());
        if sql.as_bytes().get(end) == Some(&b'@') {
            end = skip_account_part(sql, end + 1);
        }
        return format!("{}{clause}{}", &sql[..at], &sql[end..]);
    }
    let lead = sql.len() - sql.trim_start().len();
    if upper[lead..].starts_with("CREATE ") {
        return format!("{}CREATE {clause} {}", &sql[..lead], &sql[lead + 7..]);
    }
    sql.to_owned()
}

/// The end of one part of an account name starting at `i` (`` `u` ``, `'u'`, `"u"` or bare).
fn skip_account_part(s: &str, i: usize) -> usize {
    let b = s.as_bytes();
    match b.get(i) {
        Some(&q) if matches!(q, b'`' | b'\'' | b'"') => {
            let mut j = i + 1;
            while j < b.len() {
                if b[j] == q {
                    if b.get(j + 1) == Some(&q) {
                        j += 2;
                        continue;
                    }
                    return j + 1;
                }
                j += if b[j] == b'\\' && q != b'`' { 2 } else { 1 };
            }
            b.len()
        }
        _ => {
            let mut j = i;
            while j < b.len() && !b[j].is_ascii_whitespace() && b[j] != b'@' {
                j += 1;
            }
            j
        }
    }
}

/// The admin URL, or a message saying where it comes from.
fn admin_url(cfg: &AdapterConfig) -> Result<String, AdapterError> {
    admin_url_or(cfg, std::env::var(ENV_URL).ok())
}

/// `cfg`'s admin URL, else `from_env` (the value of [`ENV_URL`]).
fn admin_url_or(cfg: &AdapterConfig, from_env: Option<String>) -> Result<String, AdapterError> {
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

fn check_name(name: &str) -> Result<(), AdapterError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_DATABASE
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !ok {
        return Err(AdapterError::Config(format!(
            "`{name}` cannot name a MySQL slice: 1 to {MAX_DATABASE} characters of a-z, 0-9 \
             and _"
        )));
    }
    Ok(())
}

fn check_slice(slice: &Slice) -> Result<(), AdapterError> {
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

/// Run a verb with a bound on how long it may take.
async fn bounded<T>(
    server: &str,
    limit: Duration,
    verb: impl Future<Output = Result<T, AdapterError>>,
) -> Result<T, AdapterError> {
    tokio::time::timeout(limit, verb).await.unwrap_or_else(|_| {
        Err(AdapterError::Unreachable {
            server: server.to_owned(),
            detail: format!("no answer within {} s", limit.as_secs()),
        })
    })
}

/// The `charset` and `collation` options (or a template's).
#[derive(Debug, Default)]
struct DbCharset {
    charset: Option<String>,
    collation: Option<String>,
}

impl DbCharset {
    fn from_options(cfg: &AdapterConfig) -> Result<DbCharset, AdapterError> {
        let get = |key: &str| -> Result<Option<String>, AdapterError> {
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
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(&format!(": {more}"));
        }
        source = s.source();
    }
    text
}

/// The admin URL, understood.
#[derive(Debug)]
struct Target {
    /// `mysql`, `mariadb`, `mysql+pymysql`…, as the user wrote it (lower-cased).
    scheme: String,
    /// The host as written (`[::1]` with its brackets).
    host: String,
    port: u16,
    /// Query parameters handed on to slice URLs.
    query: Vec<String>,
    /// `?socket=`: connect over this Unix socket.
    socket: Option<String>,
    user: String,
    password: String,
    /// The server, for messages: `mysql://host:port`.
    server: String,
}

impl Target {
    fn parse(url: &str) -> Result<Target, AdapterError> {
        const FORM: &str = "mysql://USER:PASSWORD@HOST:3306";
        let Some(parts) = Url::parse(url) else {
            // Not echoed: without a scheme the credentials cannot be told apart.
            return Err(AdapterError::Config(format!(
                "admin_url is not a URL: write it as {FORM}"
            )));
        };
        let scheme = parts.scheme.to_ascii_lowercase();
        let (query, hostport) = (parts.query(), parts.host);
        let shown = format!("{scheme}://{hostport}");
        let family = scheme.split('+').next().unwrap_or("");
        if !matches!(family, "mysql" | "mariadb" | "percona") {
            return Err(AdapterError::Config(format!(
                "admin_url `{shown}` is not a MySQL URL: write it as {FORM}"
            )));
        }
        let user = percent_decode(parts.user().unwrap_or(""));
        let password = parts.password().map(percent_decode).unwrap_or_default();
        if user.is_empty() {
            return Err(AdapterError::Config(format!(
                "admin_url `{shown}` names no user: write it as {FORM}"
            )));
        }
        let (host, port) = split_host_port(hostport).ok_or_else(|| {
            AdapterError::Config(format!(
                "admin_url `{shown}` has no valid host and port: write it as {FORM}"
            ))
        })?;
        let mut kept = Vec::new();
        let mut socket = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let key_norm = key.to_ascii_lowercase().replace('-', "_");
            let value_norm = percent_decode(value).to_ascii_lowercase().replace('-', "_");
            let wants_tls = match key_norm.as_str() {
                "ssl_mode" | "sslmode" => matches!(
                    value_norm.as_str(),
                    "required" | "require" | "verify_ca" | "verify_identity" | "verify_full"
                ),
                "require_ssl" | "ssl" | "tls" | "usessl" | "requiressl" | "ssl_required" => {
                    matches!(
                        value_norm.as_str(),
                        "true" | "1" | "required" | "yes" | "on"
                    )
                }
                _ => false,
            };
            if wants_tls {
                return Err(AdapterError::Config(format!(
                    "admin_url `{shown}` asks for {key}={value}: TLS to the admin server is \
                     not supported yet; leave it out on a loopback or trusted network"
                )));
            }
            match key_norm.as_str() {
                "user" | "username" | "password" | "pass" => continue,
                "socket" => socket = Some(percent_decode(value)),
                _ => {}
            }
            kept.push(pair.to_owned());
        }
        Ok(Target {
            server: format!("{scheme}://{host}:{port}"),
            scheme,
            host,
            port,
            query: kept,
            socket,
            user,
            password,
        })
    }

    fn opts(&self) -> OptsBuilder {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        OptsBuilder::default()
            .ip_or_hostname(host)
            .tcp_port(self.port)
            .user(Some(&self.user))
            .pass((!self.password.is_empty()).then_some(&self.password))
            // The host as written, not the server's socket found through it: a TCP login
            // and a socket login are different accounts on MySQL.
            .prefer_socket(false)
            .socket(self.socket.as_deref())
    }

    fn slice_address(&self, slice: &Slice) -> Address {
        let user = fit_name(&slice.name, MAX_USER);
        let mut url = format!(
            "{}://{}:{}@{}:{}/{}",
            self.scheme,
            percent_encode(&user),
            percent_encode(&slice.secret),
            self.host,
            self.port,
            percent_encode(&slice.name)
        );
        if !self.query.is_empty() {
            url.push('?');
            url.push_str(&self.query.join("&"));
        }
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        let tokens = [
            ("user", user.clone()),
            ("password", slice.secret.clone()),
            ("database", slice.name.clone()),
            ("host", host.to_owned()),
            ("port", self.port.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        Address { url, tokens }
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port` (3306 by default); `None` when malformed.
fn split_host_port(s: &str) -> Option<(String, u16)> {
    let (host, port) = binky_controllers::url::host_port(s)?;
    let port = match port {
        None => 3306,
        Some(p) => p.parse().ok().filter(|p| *p != 0)?,
    };
    let host = if host.is_empty() || host == "[]" {
        "localhost"
    } else {
        host
    };
    Some((host.to_owned(), port))
}

/// An admin connection.
struct Admin {
    conn: Conn,
    server: String,
    scrub: Scrub,
    /// `GRANT … ON db.*` takes `_` literally (MySQL with `partial_revokes`).
    literal_grants: bool,
    /// The server is MariaDB (not MySQL or Percona).
    mariadb: bool,
}

impl Admin {
    /// Connect with the admin URL; `secrets` are scrubbed from messages too.
    async fn connect(cfg: &AdapterConfig, secrets: &[&str]) -> Result<Admin, AdapterError> {
        let url = admin_url(cfg)?;
        let target = Target::parse(&url)?;
        let mut hide = vec![
            target.password.as_str(),
            binky_controllers::url::password(&url).unwrap_or(""),
        ];
        hide.extend_from_slice(secrets);
        let scrub = Scrub::new(hide);
        let server = target.server.clone();
        let conn = match tokio::time::timeout(CONNECT_TIMEOUT, Conn::new(target.opts())).await {
            Err(_) => {
                return Err(AdapterError::Unreachable {
                    server,
                    detail: format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()),
                })
            }
            Ok(Err(mysql_async::Error::Server(e))) if REFUSED.contains(&e.code) => {
                return Err(AdapterError::Unreachable {
                    server,
                    detail: scrub.apply(&format!(
                        "the server refused admin_url's credentials (ERROR {}: {}); check \
                         the user and password in admin_url",
                        e.code, e.message
                    )),
                })
            }
            // Refused, reset, starting up, too many connections: "not usable yet".
            Ok(Err(e)) => {
                return Err(AdapterError::Unreachable {
                    server,
                    detail: scrub.apply(&describe(&e)),
                })
            }
            Ok(Ok(conn)) => conn,
        };
        let mut admin = Admin {
            conn,
            server,
            scrub,
            literal_grants: false,
            mariadb: false,
        };
        let secs = VERB_TIMEOUT.as_secs();
        admin
            .execute(
                "configuring the session",
                &format!(
                    "SET SESSION sql_mode = '{SESSION_SQL_MODE}', lock_wait_timeout = {secs}, \
                     innodb_lock_wait_timeout = {secs}"
                ),
            )
            .await?;
        let partial = admin
            .rows(
                "reading the server's settings",
                "SHOW VARIABLES LIKE 'partial\\_revokes'",
            )
            .await?;
        admin.literal_grants = partial
            .first()
            .and_then(|r| text(r, 1))
            .is_some_and(|v| v.eq_ignore_ascii_case("ON"));
        let version = admin
            .rows("reading the server's version", "SELECT VERSION()")
            .await?;
        admin.mariadb = version
            .first()
            .and_then(|r| text(r, 0))
            .is_some_and(|v| v.to_ascii_lowercase().contains("mariadb"));
        Ok(admin)
    }

    /// Close the connection politely (the server logs an aborted one), then hand on `result`.
    async fn finish<T>(self, result: Result<T, AdapterError>) -> Result<T, AdapterError> {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.conn.disconnect()).await;
        result
    }

    fn error(&self, doing: &str, e: &mysql_async::Error) -> AdapterError {
        let detail = self.scrub.apply(&format!("{doing}: {}", describe(e)));
        let transient = match e {
            mysql_async::Error::Server(s) => TRANSIENT.contains(&s.code),
            mysql_async::Error::Io(_) => true,
            mysql_async::Error::Driver(DriverError::ConnectionClosed) => true,
            _ => false,
        };
        if transient {
            return AdapterError::Unreachable {
                server: self.server.clone(),
                detail,
            };
        }
        let hint = match e {
            mysql_async::Error::Server(s) if PRIVILEGE.contains(&s.code) => {
                "; admin_url's user needs CREATE USER, ALL PRIVILEGES WITH GRANT OPTION, \
                 PROCESS and CONNECTION ADMIN or SUPER (root has them)"
            }
            _ => "",
        };
        AdapterError::Server {
            server: self.server.clone(),
            detail: format!("{detail}{hint}"),
        }
    }

    fn server_error(&self, detail: &str) -> AdapterError {
        AdapterError::Server {
            server: self.server.clone(),
            detail: self.scrub.apply(detail),
        }
    }

    async fn execute(&mut self, doing: &str, sql: &str) -> Result<(), AdapterError> {
        match self.conn.query_drop(sql).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.error(doing, &e)),
        }
    }

    /// Run `sql` under `sql_mode` (a routine's or a trigger's own), then restore the
    /// session's.
    async fn with_sql_mode(
        &mut self,
        doing: &str,
        mode: &str,
        sql: &str,
    ) -> Result<(), AdapterError> {
        self.execute(
            doing,
            &format!("SET SESSION sql_mode = {}", quote_literal(mode)),
        )
        .await?;
        let result = self.execute(doing, sql).await;
        self.execute(
            doing,
            &format!("SET SESSION sql_mode = '{SESSION_SQL_MODE}'"),
        )
        .await?;
        result
    }

    async fn rows(&mut self, doing: &str, sql: &str) -> Result<Vec<Row>, AdapterError> {
        match self.conn.query::<Row, _>(sql).await {
            Ok(rows) => Ok(rows),
            Err(e) => Err(self.error(doing, &e)),
        }
    }

    async fn rows_with(
        &mut self,
        doing: &str,
        sql: &str,
        params: Vec<Value>,
    ) -> Result<Vec<Row>, AdapterError> {
        match self.conn.exec::<Row, _, _>(sql, params).await {
            Ok(rows) => Ok(rows),
            Err(e) => Err(self.error(doing, &e)),
        }
    }

    async fn database_exists(&mut self, name: &str) -> Result<bool, AdapterError> {
        let rows = self
            .rows_with(
                "looking up the database",
                "SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
                vec![Value::from(name)],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    async fn user_exists(&mut self, name: &str) -> Result<bool, AdapterError> {
        let rows = self
            .rows_with(
                "looking up the user",
                "SELECT 1 FROM mysql.user WHERE User = ? AND Host = '%'",
                vec![Value::from(fit_name(name, MAX_USER))],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// `ALTER USER … ACCOUNT LOCK|UNLOCK`; a server too old for it (before MariaDB 10.4
    /// or MySQL 5.7.6) says "syntax error", and the lock is skipped.
    async fn lock_account(&mut self, account: &str, lock: bool) -> Result<(), AdapterError> {
        let verb = if lock { "LOCK" } else { "UNLOCK" };
        match self
            .conn
            .query_drop(format!("ALTER USER {account} ACCOUNT {verb}"))
            .await
        {
            Ok(()) => Ok(()),
            Err(mysql_async::Error::Server(e)) if e.code == 1064 => Ok(()),
            Err(e) => Err(self.error(&format!("{}ing the user", verb.to_lowercase()), &e)),
        }
    }

    /// End every session of the slice's user or in its database but this one.
    async fn end_sessions(&mut self, name: &str) -> Result<(), AdapterError> {
        let doing = "ending the slice's sessions";
        let ids: Vec<String> = self
            .rows_with(
                doing,
                "SELECT ID FROM information_schema.PROCESSLIST \
                 WHERE (USER = ? OR DB = ?) AND ID <> CONNECTION_ID()",
                vec![Value::from(fit_name(name, MAX_USER)), Value::from(name)],
            )
            .await?
            .iter()
            .filter_map(|r| text(r, 0))
            .collect();
        for id in ids {
            let Ok(id) = id.parse::<u64>() else { continue };
            match self.conn.query_drop(format!("KILL CONNECTION {id}")).await {
                Ok(()) => {}
                // Gone meanwhile.
                Err(mysql_async::Error::Server(e)) if e.code == 1094 => {}
                Err(e) => return Err(self.error(doing, &e)),
            }
        }
        Ok(())
    }

    /// The database name as `GRANT … ON <it>.*` must read it to mean this one database.
    fn grant_target(&self, name: &str) -> String {
        if self.literal_grants {
            quote_ident(name)
        } else {
            quote_ident(&name.replace('_', "\\_"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(url: &str) -> AdapterConfig {
        AdapterConfig {
            admin_url: Some(url.to_owned()),
            ..AdapterConfig::default()
        }
    }

    fn slice(name: &str, secret: &str) -> Slice {
        Slice {
            name: name.to_owned(),
            secret: secret.to_owned(),
        }
    }

    #[test]
    fn slice_url_keeps_host_and_harmless_params_and_drops_admin_credentials() {
        let t = Target::parse(
            "mysql://root:hunter22@db.local:3307/mysql?charset=utf8mb4&user=x&password=y",
        )
        .unwrap();
        let a = t.slice_address(&slice("bk_a_b_db", "s'e:c/r@t"));
        assert_eq!(
            a.url,
            "mysql://bk_a_b_db:s%27e%3Ac%2Fr%40t@db.local:3307/bk_a_b_db?charset=utf8mb4"
        );
        assert_eq!(a.tokens["host"], "db.local");
        assert_eq!(a.tokens["port"], "3307");
        assert_eq!(a.tokens["database"], "bk_a_b_db");
        assert_eq!(a.tokens["user"], "bk_a_b_db");
        assert_eq!(a.tokens["password"], "s'e:c/r@t");
        assert!(!a.url.contains("hunter22") && !a.url.contains("root"));
        assert_eq!(t.server, "mysql://db.local:3307");
    }

    #[test]
    fn the_port_defaults_to_3306_and_ipv6_hosts_keep_their_brackets() {
        let t = Target::parse("mariadb://root:pw@[::1]/").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("[::1]", 3306));
        let a = t.slice_address(&slice("bk_x", "pw2"));
        assert_eq!(a.url, "mariadb://bk_x:pw2@[::1]:3306/bk_x");
        assert_eq!(a.tokens["host"], "::1");
        let t = Target::parse("mysql+pymysql://root@127.0.0.1:3310").unwrap();
        assert_eq!(t.port, 3310);
        assert_eq!(t.password, "");
        assert!(t
            .slice_address(&slice("bk_x", "pw2"))
            .url
            .starts_with("mysql+pymysql://"));
    }

    #[test]
    fn long_slice_names_get_user_names_that_fit_32_characters() {
        let name = format!("bk_{}_feature_db", "p".repeat(40));
        let t = Target::parse("mysql://root:pw@h").unwrap();
        let a = t.slice_address(&slice(&name, "secret"));
        assert_eq!(a.tokens["user"].len(), 32);
        assert_eq!(a.tokens["database"], name);
        assert_eq!(account(&name), format!("'{}'@'%'", a.tokens["user"]));
    }

    #[test]
    fn tls_admin_urls_are_refused_with_a_message() {
        for q in [
            "ssl-mode=REQUIRED",
            "sslmode=require",
            "ssl_mode=VERIFY_IDENTITY",
            "require_ssl=true",
            "ssl=true",
            "tls=1",
        ] {
            let err = Target::parse(&format!("mysql://u:pw123@h/x?{q}")).unwrap_err();
            assert!(matches!(err, AdapterError::Config(_)), "{q}: {err:?}");
            assert!(err.to_string().contains("TLS"), "{err}");
            assert!(!err.to_string().contains("pw123"), "{err}");
        }
        assert!(Target::parse("mysql://u:p@h/x?ssl-mode=DISABLED").is_ok());
        assert!(Target::parse("mysql://u:p@h/x?ssl=false").is_ok());
    }

    #[test]
    fn bad_admin_urls_are_config_errors_without_the_password() {
        for url in [
            "postgres://u:pw123@h/x",
            "u:pw123@h",
            "mysql://u:pw123@h:notaport/x",
            "mysql://:pw123@h/x",
            "mysql://u:pw123@h:0/x",
        ] {
            let err = admin_url(&cfg(url))
                .and_then(|u| Target::parse(&u))
                .unwrap_err();
            assert!(matches!(err, AdapterError::Config(_)), "{url}: {err}");
            assert!(!err.to_string().contains("pw123"), "{err}");
        }
    }

    #[test]
    fn names_outside_a_z_0_9_underscore_are_refused_before_any_sql() {
        assert!(check_name("bk_ok_1").is_ok());
        assert!(check_name(&"a".repeat(64)).is_ok());
        for bad in ["", "bk_X", "bk-x", "bk_x`; drop", "bk x", &"a".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert!(check_slice(&slice("bk_x", "")).is_err());
        assert!(check_slice(&slice("bk_x", "a\0b")).is_err());
    }

    #[test]
    fn literals_and_identifiers_are_quoted() {
        assert_eq!(quote_literal(r"it's \ x"), r"'it\'s \\ x'");
        assert_eq!(quote_ident("we`ird"), "`we``ird`");
    }

    #[test]
    fn grants_escape_wildcards_unless_the_server_takes_names_literally() {
        let grant = |literal| {
            if literal {
                quote_ident("bk_a_db")
            } else {
                quote_ident(&"bk_a_db".replace('_', "\\_"))
            }
        };
        assert_eq!(grant(false), r"`bk\_a\_db`");
        assert_eq!(grant(true), "`bk_a_db`");
    }

    #[test]
    fn definers_become_the_copys_user() {
        assert_eq!(
            with_definer(
                "CREATE ALGORITHM=UNDEFINED DEFINER=`bk_t`@`%` SQL SECURITY DEFINER VIEW `v` AS select 1",
                "bk_c"
            ),
            "CREATE ALGORITHM=UNDEFINED DEFINER=`bk_c`@`%` SQL SECURITY DEFINER VIEW `v` AS select 1"
        );
        assert_eq!(
            with_definer("CREATE DEFINER='root'@'localhost' TRIGGER t", "bk_c"),
            "CREATE DEFINER=`bk_c`@`%` TRIGGER t"
        );
        assert_eq!(
            with_definer("CREATE DEFINER=CURRENT_USER() PROCEDURE p()", "bk_c"),
            "CREATE DEFINER=`bk_c`@`%` PROCEDURE p()"
        );
        assert_eq!(
            with_definer("CREATE TRIGGER t BEFORE INSERT", "bk_c"),
            "CREATE DEFINER=`bk_c`@`%` TRIGGER t BEFORE INSERT"
        );
    }

    #[test]
    fn the_templates_schema_name_becomes_the_copys() {
        assert_eq!(
            replace_schema(
                "select `bk_t`.`a`.`x` from `bk_t`.`a` join bk_t.b join xbk_t.c",
                "bk_t",
                "bk_c"
            ),
            "select `bk_c`.`a`.`x` from `bk_c`.`a` join `bk_c`.b join xbk_t.c"
        );
    }

    #[test]
    fn the_environment_gives_the_admin_url_when_the_service_has_none() {
        let env = Some("mysql://root:envpw@127.0.0.1:3399".to_owned());
        assert_eq!(
            admin_url_or(&AdapterConfig::default(), env.clone()).unwrap(),
            "mysql://root:envpw@127.0.0.1:3399"
        );
        assert_eq!(
            admin_url_or(&cfg("mysql://root:x@h:1"), env).unwrap(),
            "mysql://root:x@h:1"
        );
        let err = admin_url_or(&AdapterConfig::default(), Some(" ".into())).unwrap_err();
        assert!(err.to_string().contains("admin_url = "), "{err}");
        assert!(err.to_string().contains(ENV_URL), "{err}");
    }

    #[test]
    fn bad_charset_options_are_refused() {
        let mut c = AdapterConfig::default();
        c.options.insert("charset".into(), "utf8mb4".into());
        c.options
            .insert("collation".into(), "utf8mb4_unicode_ci".into());
        assert_eq!(
            DbCharset::from_options(&c).unwrap().clause(),
            " CHARACTER SET `utf8mb4` COLLATE `utf8mb4_unicode_ci`"
        );
        c.options.insert("charset".into(), "utf8; drop".into());
        assert!(DbCharset::from_options(&c).is_err());
    }

    #[test]
    fn sha1_and_the_native_password_hash_match_known_values() {
        let hex = |b: [u8; 20]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        assert_eq!(hex(sha1(b"")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            hex(sha1(b"abc")),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            hex(sha1(
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
            )),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        );
        assert_eq!(
            hex(sha1(&[b'a'; 1000])),
            "291e9a6c66994949b57ba5e650361e98fc36b1ba"
        );
        // MariaDB 10.11's PASSWORD('pw-x').
        assert_eq!(
            native_password_hash("pw-x"),
            "*59E479B0285D34ED6888EA8E73D8B0F3D09D70E4"
        );
    }

    #[test]
    fn scrubbing_hides_every_secret() {
        let s = Scrub::new(["topsecret", "", "ab"]);
        assert_eq!(s.apply("x topsecret y ab"), "x *** y ab");
        assert_eq!(
            binky_controllers::url::password("mysql://u:a%40b@h/x"),
            Some("a%40b")
        );
    }
}
