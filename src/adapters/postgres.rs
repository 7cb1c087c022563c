//! The `postgres` adapter: each slice is one database and one login role of the same name
//! on a shared PostgreSQL server, reached through the service's `admin_url`.
//!
//! # What a slice is
//! - A role named after the slice, `LOGIN` with the slice's secret as its password and no
//!   other rights (`NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS`).
//! - A database of the same name owned by that role, with `REVOKE ALL … FROM PUBLIC`, so no
//!   other role (another world's) can connect to it; the server enforces the isolation.
//! - Both carry the comment `binky slice`: `list` (for `binky gc`) returns only
//!   databases named `bk_…` that carry it, so gc never sees a user's own database.
//!
//! # Guarantees
//! - Every verb is idempotent. Provisioning an existing slice heals it: the role's password
//!   is set to the secret again, the database's owner and `PUBLIC` revoke are re-applied.
//! - The secret never reaches the server in clear text: binky sends a SCRAM-SHA-256
//!   verifier computed client-side (as psql's `\password` does), so it cannot show up in
//!   the server's log, `pg_stat_activity` or an error message. Identifiers and literals are
//!   quoted with libpq's rules (`postgres_protocol::escape`), whatever the names hold.
//! - No error message carries a password: the server is named by [`redact`]ed URL and every
//!   detail is scrubbed of the admin password and the slice's secret.
//! - A server that is down, slow (5 s to connect, 60 s per verb), restarting, out of
//!   connections, or that refuses the admin credentials gives [`AdapterError::Unreachable`]
//!   (the world waits and retries); an SQL error gives [`AdapterError::Server`].
//! - Teardown first ends the slice's sessions, then drops the database and the role, so an
//!   application still connected does not keep the slice alive.
//!
//! # Decisions
//! - **`PUBLIC`'s `CONNECT` on the `postgres` and `template1` databases is left alone** on a
//!   server given by `admin_url`: it is the user's server, and revoking it would change it
//!   for every other client. A slice role can therefore log in to those databases (as any
//!   role there can) but not to another slice's database. binky's *managed* server revokes
//!   it once at start (`crate::servers::postgres`), where binky owns the whole server.
//! - **The slice URL** is `<scheme>://<role>:<secret>@<host:port as in admin_url>/<db>`,
//!   with the admin URL's query parameters kept (`sslmode=disable`, `host=/run/postgresql`,
//!   …) except those that name credentials or a database (`user`, `password`, `passfile`,
//!   `dbname`), so a client reaches the slice the way binky reached the server. The user and
//!   secret are percent-encoded. Tokens: `user`, `password`, `database`, `host`, `port`.
//! - **No TLS yet**: admin URLs asking for `sslmode=require` (or `verify-ca`/`verify-full`)
//!   are refused with a message saying so; `prefer` connects without TLS.
//! - **A non-superuser admin** (e.g. a cloud `CREATEROLE CREATEDB` user) works: the admin
//!   grants itself membership in the slice role, which PostgreSQL requires for `CREATE
//!   DATABASE … OWNER`, ending its sessions and dropping its database.
//! - A database of the slice's name that binky did not make (neither owned by the slice
//!   role nor marked `binky slice`) is never taken over by `provision` (a `Config` error
//!   naming it) nor dropped by `teardown` (left in place, with a warning).
//!
//! # Caveats
//! - Two binky homes sharing one admin server and both naming a world alike get the same
//!   slice name; the later provision resets the password (binky names slices per project,
//!   world and service, not per machine).
//! - If a slice role created objects in *other* databases (possible on a user's server
//!   before PostgreSQL 15, where `PUBLIC` may create in `public`), `DROP ROLE` fails and the
//!   error lists them; drop them and removal finishes by itself.

use std::time::Duration;

use postgres_protocol::escape::{escape_identifier, escape_literal};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Config, NoTls};

use binky_controllers::url::{password_decoded, percent_encode, Url};

use super::{
    redact, Adapter, AdapterConfig, AdapterError, Address, BoxFuture, Capabilities, Scrub, Slice,
};

/// The postgres adapter (`adapter = "postgres"` or `"postgresql"`).
pub struct Postgres;

/// The comment binky puts on its databases and roles.
const MARK: &str = "binky slice";
/// Bound on opening the TCP connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on the whole connection handshake (TCP, startup, authentication).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on one verb once connected (also the server-side `statement_timeout`).
const VERB_TIMEOUT: Duration = Duration::from_secs(60);
/// PostgreSQL's identifier limit (`NAMEDATALEN - 1`): a longer name would be truncated by
/// the server, and the truncated slice could no longer be found by its name.
const MAX_NAME: usize = 63;

impl Adapter for Postgres {
    fn names(&self) -> &'static [&'static str] {
        &["postgres", "postgresql"]
    }

    fn capabilities<'a>(
        &'a self,
        _cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Capabilities, AdapterError>> {
        // CREATE DATABASE … TEMPLATE: a server-side copy of a golden template.
        Box::pin(async { Ok(Capabilities { clone: true }) })
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
            let admin = Admin::connect(cfg, &to.secret).await?;
            admin.bounded(clone(&admin, cfg, from, to)).await
        })
    }

    fn seal_template<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async move {
            check_name(&slice.name)?;
            // Vacuumed and analysed once here, so every copy starts with its visibility map
            // set (index-only scans) and statistics, instead of waiting for autovacuum,
            // which never visits a copy nobody writes to. Not bounded: it takes as long as
            // the seed's data needs.
            let inside = Admin::connect_to(cfg, &slice.secret, &slice.name).await?;
            inside
                .execute("vacuuming the template", "VACUUM (FREEZE, ANALYZE)")
                .await?;
            drop(inside);
            let admin = Admin::connect(cfg, &slice.secret).await?;
            admin.bounded(seal(&admin, &slice.name)).await
        })
    }

    fn exists<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Option<bool>, AdapterError>> {
        Box::pin(async move {
            check_name(&slice.name)?;
            let admin = Admin::connect(cfg, &slice.secret).await?;
            let db = admin.bounded(admin.database(&slice.name)).await?;
            Ok(Some(db.is_some()))
        })
    }

    fn provision<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async move {
            check_slice(slice)?;
            let admin = Admin::connect(cfg, &slice.secret).await?;
            admin.bounded(provision(&admin, slice)).await
        })
    }

    fn resolve<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Address, AdapterError>> {
        Box::pin(async move {
            check_slice(slice)?;
            let target = Target::parse(admin_url(cfg)?)?;
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
            let admin = Admin::connect(cfg, &slice.secret).await?;
            admin.bounded(teardown(&admin, &slice.name)).await
        })
    }

    fn list<'a>(
        &'a self,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Vec<String>, AdapterError>> {
        Box::pin(async move {
            let admin = Admin::connect(cfg, "").await?;
            admin
                .bounded(async {
                    let rows = admin
                        .client
                        .query(
                            "SELECT d.datname FROM pg_database d \
                             WHERE left(d.datname, 3) = 'bk_' \
                               AND shobj_description(d.oid, 'pg_database') = $1 \
                             ORDER BY 1",
                            &[&MARK],
                        )
                        .await
                        .map_err(|e| admin.sql_error("listing slices", &e))?;
                    rows.iter()
                        .map(|r| {
                            r.try_get::<_, String>(0)
                                .map_err(|e| admin.sql_error("listing slices", &e))
                        })
                        .collect()
                })
                .await
        })
    }
}

async fn provision(admin: &Admin, slice: &Slice) -> Result<(), AdapterError> {
    ensure_role(admin, slice).await?;
    let name = slice.name.as_str();
    let id = escape_identifier(name);
    ensure_database(admin, name, &id).await?;
    close_database(admin, &id).await
}

/// The slice's login role, with its password (made, or healed).
async fn ensure_role(admin: &Admin, slice: &Slice) -> Result<(), AdapterError> {
    let name = slice.name.as_str();
    let id = escape_identifier(name);
    // A SCRAM verifier with a fresh salt: the server stores it as is, and the secret itself
    // never crosses the wire (nor lands in a log line if a statement fails).
    let verifier = escape_literal(&postgres_protocol::password::scram_sha_256(
        slice.secret.as_bytes(),
    ));

    let role_exists = admin
        .exists(
            "SELECT 1 FROM pg_roles WHERE rolname = $1",
            name,
            "looking up the role",
        )
        .await?;
    let created = !role_exists
        && admin
            .execute_unless(
                "creating the role",
                &format!(
                    "CREATE ROLE {id} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE \
                     NOREPLICATION NOBYPASSRLS PASSWORD {verifier}"
                ),
                // Made by a concurrent provision since we looked: heal it below.
                &SqlState::DUPLICATE_OBJECT,
            )
            .await?;
    if !created {
        // Only a superuser may name the superuser-only attributes, even to turn them off.
        let superuser_only = if admin.superuser {
            " NOSUPERUSER NOREPLICATION NOBYPASSRLS"
        } else {
            ""
        };
        admin
            .execute(
                "setting the role's password",
                &format!(
                    "ALTER ROLE {id} WITH LOGIN NOCREATEDB NOCREATEROLE{superuser_only} \
                     PASSWORD {verifier}"
                ),
            )
            .await?;
    }
    admin
        .execute(
            "marking the role",
            &format!("COMMENT ON ROLE {id} IS {}", escape_literal(MARK)),
        )
        .await?;
    if !admin.superuser {
        // CREATE DATABASE … OWNER, DROP DATABASE and pg_terminate_backend need membership.
        admin
            .execute(
                "granting the admin membership in the role",
                &format!("GRANT {id} TO CURRENT_USER"),
            )
            .await?;
    }
    Ok(())
}

/// The slice's database, owned by its role.
async fn ensure_database(admin: &Admin, name: &str, id: &str) -> Result<(), AdapterError> {
    match admin.database(name).await? {
        None => {
            // CREATE DATABASE cannot run in a transaction block: its own statement.
            admin
                .execute_unless(
                    "creating the database",
                    &format!("CREATE DATABASE {id} OWNER {id}"),
                    &SqlState::DUPLICATE_DATABASE,
                )
                .await?;
        }
        Some(db) if db.ours(name) => {
            admin
                .execute(
                    "setting the database's owner",
                    &format!("ALTER DATABASE {id} OWNER TO {id}"),
                )
                .await?;
        }
        Some(db) => {
            return Err(AdapterError::Config(format!(
                "{}: a database `{name}` exists that binky did not make (owner `{}`, no \
                 `{MARK}` comment); drop or rename it, or give the service another name",
                admin.server, db.owner
            )));
        }
    }
    Ok(())
}

/// Mark the slice's database as binky's and close it to every other role.
async fn close_database(admin: &Admin, id: &str) -> Result<(), AdapterError> {
    // Marked right after creation: a crash before this leaves a database owned by the slice
    // role, which the next provision recognises as its own.
    admin
        .execute(
            "marking the database",
            &format!("COMMENT ON DATABASE {id} IS {}", escape_literal(MARK)),
        )
        .await?;
    admin
        .execute(
            "closing the database to other roles",
            &format!("REVOKE ALL ON DATABASE {id} FROM PUBLIC"),
        )
        .await?;
    Ok(())
}

/// A golden template takes no connections (a copy needs none open), and belongs to the
/// admin, so that `REASSIGN OWNED` in a copy moves only the copy's objects.
async fn seal(admin: &Admin, name: &str) -> Result<(), AdapterError> {
    let id = escape_identifier(name);
    admin
        .execute(
            "handing the template to the admin",
            &format!("ALTER DATABASE {id} OWNER TO CURRENT_USER"),
        )
        .await?;
    admin
        .execute(
            "closing the template",
            &format!("ALTER DATABASE {id} ALLOW_CONNECTIONS false"),
        )
        .await?;
    admin.terminate(name).await
}

/// `CREATE DATABASE to TEMPLATE from`, then hand every object of the copy to `to`'s role.
async fn clone(
    admin: &Admin,
    cfg: &AdapterConfig,
    from: &Slice,
    to: &Slice,
) -> Result<(), AdapterError> {
    ensure_role(admin, to).await?;
    let (src, dst) = (escape_identifier(&from.name), escape_identifier(&to.name));
    // A copy left by an attempt that died half-way is redone.
    if let Some(db) = admin.database(&to.name).await? {
        if db.ours(&to.name) {
            admin.terminate(&to.name).await?;
            admin
                .execute(
                    "dropping a half-made copy",
                    &format!("DROP DATABASE IF EXISTS {dst}"),
                )
                .await?;
        }
    }
    // FILE_COPY copies the files after a checkpoint; WAL_LOG (15's default) writes every
    // block to the WAL, slower for a seeded database (see benchmarks/README.md).
    let strategy = if admin.version >= 150_000 {
        match cfg
            .options
            .get("clone_strategy")
            .map(|s| s.to_ascii_lowercase())
        {
            Some(s) if s == "wal_log" => " STRATEGY = WAL_LOG",
            _ => " STRATEGY = FILE_COPY",
        }
    } else {
        ""
    };
    let create = format!("CREATE DATABASE {dst} TEMPLATE {src} OWNER {dst}{strategy}");
    // No session may be connected to the template while it is copied: end stray ones
    // (the template takes no new ones), and once more if one slipped in.
    let mut tries = 0;
    loop {
        admin.terminate(&from.name).await?;
        match admin.client.batch_execute(&create).await {
            Ok(()) => break,
            Err(e) if e.code() == Some(&SqlState::OBJECT_IN_USE) && tries < 5 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(admin.sql_error("copying the template", &e)),
        }
    }
    close_database(admin, &dst).await?;
    // Objects in the copy belong to whoever built the template: hand them to the world's
    // role, or its application gets "permission denied".
    let inside = Admin::connect_to(cfg, &to.secret, &to.name).await?;
    inside
        .execute(
            "handing the copy's objects to the slice role",
            &format!("REASSIGN OWNED BY {src} TO {dst}"),
        )
        .await?;
    Ok(())
}

async fn teardown(admin: &Admin, name: &str) -> Result<(), AdapterError> {
    let id = escape_identifier(name);
    match admin.database(name).await? {
        Some(db) if db.ours(name) => {
            if admin.version < 130_000 {
                // No DROP … WITH (FORCE) before 13: shut the door, then end the sessions.
                admin
                    .execute(
                        "closing the database",
                        &format!("ALTER DATABASE {id} ALLOW_CONNECTIONS false"),
                    )
                    .await?;
            }
            admin.terminate(name).await?;
            let force = if admin.version >= 130_000 {
                " WITH (FORCE)"
            } else {
                ""
            };
            admin
                .execute(
                    "dropping the database",
                    &format!("DROP DATABASE IF EXISTS {id}{force}"),
                )
                .await?;
        }
        Some(db) => tracing::warn!(
            database = name,
            owner = %db.owner,
            "not dropping a database binky did not make"
        ),
        None => {}
    }
    let role_exists = admin
        .exists(
            "SELECT 1 FROM pg_roles WHERE rolname = $1",
            name,
            "looking up the role",
        )
        .await?;
    if role_exists {
        // Sessions of the role in other databases (it may log in to `postgres`).
        admin.terminate(name).await?;
        admin
            .execute("dropping the role", &format!("DROP ROLE IF EXISTS {id}"))
            .await?;
    }
    Ok(())
}

/// The admin URL, or a message saying where it comes from.
fn admin_url(cfg: &AdapterConfig) -> Result<&str, AdapterError> {
    cfg.admin_url.as_deref().ok_or_else(|| {
        AdapterError::Config(
            "the postgres adapter needs the server's admin URL: set `admin_url = \
             \"postgres://USER:PASSWORD@HOST:5432/postgres\"` on the service in binky.toml \
             (a role that may create roles and databases), or leave it out to use binky's \
             managed PostgreSQL"
                .into(),
        )
    })
}

fn check_name(name: &str) -> Result<(), AdapterError> {
    if name.is_empty() || name.len() > MAX_NAME || name.contains('\0') {
        return Err(AdapterError::Config(format!(
            "`{name}` cannot name a PostgreSQL slice: 1 to {MAX_NAME} bytes, no NUL"
        )));
    }
    Ok(())
}

fn check_slice(slice: &Slice) -> Result<(), AdapterError> {
    check_name(&slice.name)?;
    if slice.secret.is_empty() || slice.secret.contains('\0') {
        return Err(AdapterError::Config(format!(
            "the secret of slice `{}` is empty or holds a NUL byte, which PostgreSQL cannot \
             take as a password",
            slice.name
        )));
    }
    Ok(())
}

/// The admin URL, understood.
struct Target {
    /// `postgres` or `postgresql`, as the user wrote it.
    scheme: String,
    /// `host:port` (or several, comma-separated), without credentials.
    authority: String,
    /// Query parameters to hand on to the slice's URL.
    query: Vec<String>,
    /// For the connection.
    config: Config,
    /// The server, for messages.
    server: String,
}

impl Target {
    fn parse(url: &str) -> Result<Target, AdapterError> {
        let server = redact(url);
        let scrub = Scrub::new([password_decoded(url).as_deref().unwrap_or("")]);
        let Some(parts) = Url::parse(url) else {
            // Not echoed: without a scheme, redact() cannot find the credentials in it.
            return Err(AdapterError::Config(
                "admin_url is not a URL: write it as postgres://USER:PASSWORD@HOST:5432/postgres"
                    .into(),
            ));
        };
        let scheme = parts.scheme.to_ascii_lowercase();
        if scheme != "postgres" && scheme != "postgresql" {
            return Err(AdapterError::Config(format!(
                "admin_url `{server}` is not a PostgreSQL URL: it must start with postgres://"
            )));
        }
        let authority = parts.host.to_owned();
        let mut kept = Vec::new();
        for pair in parts.query().split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if key == "sslmode" && matches!(value, "require" | "verify-ca" | "verify-full") {
                return Err(AdapterError::Config(format!(
                    "admin_url `{server}` asks for sslmode={value}: TLS to the admin server \
                     is not supported yet; use sslmode=disable (or prefer) on a loopback or \
                     trusted network"
                )));
            }
            if !matches!(key, "user" | "password" | "passfile" | "dbname") {
                kept.push(pair.to_owned());
            }
        }
        let mut config: Config = url.parse().map_err(|e: tokio_postgres::Error| {
            AdapterError::Config(format!(
                "admin_url `{server}` is not a valid PostgreSQL URL: {}",
                scrub.apply(&describe(&e))
            ))
        })?;
        if config.get_user().is_none() {
            return Err(AdapterError::Config(format!(
                "admin_url `{server}` names no user: write it as \
                 postgres://USER:PASSWORD@HOST:5432/postgres"
            )));
        }
        if config.get_dbname().is_none() {
            // libpq would use the user's name, which rarely exists as a database.
            config.dbname("postgres");
        }
        config.connect_timeout(CONNECT_TIMEOUT);
        config.application_name("binky");
        Ok(Target {
            scheme,
            authority,
            query: kept,
            config,
            server,
        })
    }

    fn slice_address(&self, slice: &Slice) -> Address {
        let mut url = format!(
            "{}://{}:{}@{}/{}",
            self.scheme,
            percent_encode(&slice.name),
            percent_encode(&slice.secret),
            self.authority,
            percent_encode(&slice.name)
        );
        if !self.query.is_empty() {
            url.push('?');
            url.push_str(&self.query.join("&"));
        }
        let host = match self.config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            Some(tokio_postgres::config::Host::Unix(p)) => p.to_string_lossy().into_owned(),
            None => "localhost".to_owned(),
        };
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        let tokens = [
            ("user", slice.name.clone()),
            ("password", slice.secret.clone()),
            ("database", slice.name.clone()),
            ("host", host),
            ("port", port.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        Address { url, tokens }
    }
}

/// What went wrong, in the server's words when it said something.
fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = db.message().to_owned();
        if let Some(detail) = db.detail() {
            text.push_str(&format!(" ({detail})"));
        }
        if let Some(hint) = db.hint() {
            text.push_str(&format!("; {hint}"));
        }
        return text;
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

/// Errors worth retrying: the server is going away, starting, short of resources, or the
/// statement ran into a lock or a timeout.
fn transient(state: &SqlState) -> bool {
    let code = state.code();
    code.starts_with("08")
        || code.starts_with("40")
        || code.starts_with("53")
        || code.starts_with("57")
        || code == "55006" // object in use (template1 busy during CREATE DATABASE)
        || code == "55P03" // lock not available
}

/// One database's facts.
struct Database {
    owner: String,
    comment: Option<String>,
}

impl Database {
    /// binky made it: owned by the slice role (it is created so, in one statement) or
    /// marked.
    fn ours(&self, name: &str) -> bool {
        self.owner == name || self.comment.as_deref() == Some(MARK)
    }
}

/// An admin connection.
struct Admin {
    client: Client,
    server: String,
    scrub: Scrub,
    superuser: bool,
    /// `server_version_num` (150014 for 15.14).
    version: i32,
}

impl Admin {
    /// Connect with the admin URL; `secret` is scrubbed from messages too.
    async fn connect(cfg: &AdapterConfig, secret: &str) -> Result<Admin, AdapterError> {
        Self::connect_db(cfg, secret, None).await
    }

    /// Connect with the admin's credentials to another database of the server.
    async fn connect_to(
        cfg: &AdapterConfig,
        secret: &str,
        db: &str,
    ) -> Result<Admin, AdapterError> {
        Self::connect_db(cfg, secret, Some(db)).await
    }

    async fn connect_db(
        cfg: &AdapterConfig,
        secret: &str,
        db: Option<&str>,
    ) -> Result<Admin, AdapterError> {
        let url = admin_url(cfg)?;
        let mut target = Target::parse(url)?;
        if let Some(db) = db {
            target.config.dbname(db);
        }
        let admin_password = target
            .config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default();
        let raw_password = password_decoded(url).unwrap_or_default();
        let scrub = Scrub::new([admin_password.as_str(), raw_password.as_str(), secret]);
        let server = target.server.clone();
        let unreachable = |detail: String| AdapterError::Unreachable {
            server: server.clone(),
            detail: scrub.apply(&detail),
        };
        let (client, connection) =
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, target.config.connect(NoTls)).await {
                Err(_) => {
                    return Err(unreachable(format!(
                        "no answer within {} s",
                        HANDSHAKE_TIMEOUT.as_secs()
                    )))
                }
                // Refused, timed out, wrong password, no such database, too many
                // connections, starting up: all "not usable yet" for the world.
                Ok(Err(e)) => return Err(unreachable(describe(&e))),
                Ok(Ok(pair)) => pair,
            };
        let log_server = server.clone();
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(server = %log_server, error = %e, "admin connection ended");
            }
        });
        let mut admin = Admin {
            client,
            server,
            scrub,
            superuser: false,
            version: 0,
        };
        admin
            .execute(
                "configuring the session",
                &format!("SET statement_timeout = '{}s'", VERB_TIMEOUT.as_secs()),
            )
            .await?;
        let row = admin
            .client
            .query_one(
                "SELECT rolsuper, current_setting('server_version_num')::int4 \
                 FROM pg_roles WHERE rolname = current_user",
                &[],
            )
            .await
            .map_err(|e| admin.sql_error("reading the admin's rights", &e))?;
        admin.superuser = row
            .try_get(0)
            .map_err(|e| admin.sql_error("reading the admin's rights", &e))?;
        admin.version = row
            .try_get(1)
            .map_err(|e| admin.sql_error("reading the server's version", &e))?;
        Ok(admin)
    }

    /// Run a verb with a bound on how long it may take.
    async fn bounded<T>(
        &self,
        verb: impl std::future::Future<Output = Result<T, AdapterError>>,
    ) -> Result<T, AdapterError> {
        tokio::time::timeout(VERB_TIMEOUT + Duration::from_secs(5), verb)
            .await
            .unwrap_or_else(|_| {
                Err(AdapterError::Unreachable {
                    server: self.server.clone(),
                    detail: format!("no answer within {} s", VERB_TIMEOUT.as_secs()),
                })
            })
    }

    fn sql_error(&self, doing: &str, e: &tokio_postgres::Error) -> AdapterError {
        let detail = self.scrub.apply(&format!("{doing}: {}", describe(e)));
        match e.code() {
            Some(state) if !transient(state) => AdapterError::Server {
                server: self.server.clone(),
                detail,
            },
            // A transient state, or no answer at all (the connection broke).
            _ => AdapterError::Unreachable {
                server: self.server.clone(),
                detail,
            },
        }
    }

    async fn execute(&self, doing: &str, sql: &str) -> Result<(), AdapterError> {
        self.client
            .batch_execute(sql)
            .await
            .map_err(|e| self.sql_error(doing, &e))
    }

    /// Run `sql`; `Ok(false)` when the server answers with `benign` instead.
    async fn execute_unless(
        &self,
        doing: &str,
        sql: &str,
        benign: &SqlState,
    ) -> Result<bool, AdapterError> {
        match self.client.batch_execute(sql).await {
            Ok(()) => Ok(true),
            Err(e) if e.code() == Some(benign) => Ok(false),
            Err(e) => Err(self.sql_error(doing, &e)),
        }
    }

    async fn exists(&self, sql: &str, name: &str, doing: &str) -> Result<bool, AdapterError> {
        self.client
            .query_opt(sql, &[&name])
            .await
            .map(|row| row.is_some())
            .map_err(|e| self.sql_error(doing, &e))
    }

    async fn database(&self, name: &str) -> Result<Option<Database>, AdapterError> {
        let doing = "looking up the database";
        let row = self
            .client
            .query_opt(
                "SELECT pg_get_userbyid(d.datdba)::text, shobj_description(d.oid, 'pg_database') \
                 FROM pg_database d WHERE d.datname = $1",
                &[&name],
            )
            .await
            .map_err(|e| self.sql_error(doing, &e))?;
        row.map(|r| {
            Ok(Database {
                owner: r.try_get(0).map_err(|e| self.sql_error(doing, &e))?,
                comment: r.try_get(1).map_err(|e| self.sql_error(doing, &e))?,
            })
        })
        .transpose()
    }

    /// End every session in the slice's database or logged in as its role.
    async fn terminate(&self, name: &str) -> Result<(), AdapterError> {
        self.client
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE (datname = $1 OR usename = $1) AND pid <> pg_backend_pid()",
                &[&name],
            )
            .await
            .map(|_| ())
            .map_err(|e| self.sql_error("ending the slice's sessions", &e))
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
    fn slice_url_keeps_host_and_safe_params_and_drops_admin_credentials() {
        let t = Target::parse(
            "postgresql://admin:hunter22@db.local:6543/postgres?sslmode=disable&user=x&password=y&connect_timeout=3",
        )
        .unwrap();
        let a = t.slice_address(&slice("bk_a_b_db", "s'e:c/r@t"));
        assert_eq!(
            a.url,
            "postgresql://bk_a_b_db:s%27e%3Ac%2Fr%40t@db.local:6543/bk_a_b_db?sslmode=disable&connect_timeout=3"
        );
        assert_eq!(a.tokens["host"], "db.local");
        assert_eq!(a.tokens["port"], "6543");
        assert_eq!(a.tokens["database"], "bk_a_b_db");
        assert_eq!(a.tokens["user"], "bk_a_b_db");
        assert_eq!(a.tokens["password"], "s'e:c/r@t");
        assert!(!a.url.contains("hunter22") && !a.url.contains("admin"));
    }

    #[test]
    fn tls_admin_urls_are_refused_with_a_message() {
        for mode in ["require", "verify-ca", "verify-full"] {
            let err = Target::parse(&format!("postgres://u:pw123@h/postgres?sslmode={mode}"))
                .err()
                .unwrap();
            let text = err.to_string();
            assert!(matches!(err, AdapterError::Config(_)));
            assert!(
                text.contains("TLS to the admin server is not supported yet"),
                "{text}"
            );
            assert!(!text.contains("pw123"), "{text}");
        }
        assert!(Target::parse("postgres://u:p@h/postgres?sslmode=prefer").is_ok());
    }

    #[test]
    fn bad_admin_urls_are_config_errors_without_the_password() {
        for url in [
            "mysql://u:pw123@h/x",
            "u:pw123@h",
            "postgres://u:pw123@h:notaport/x",
        ] {
            let err = admin_url(&cfg(url)).and_then(Target::parse).err().unwrap();
            assert!(matches!(err, AdapterError::Config(_)), "{url}: {err}");
            assert!(!err.to_string().contains("pw123"), "{err}");
        }
        let err = admin_url(&AdapterConfig::default()).err().unwrap();
        assert!(err.to_string().contains("admin_url"), "{err}");
    }

    #[test]
    fn scrubbing_hides_every_secret() {
        let s = Scrub::new(["topsecret", "", "ab"]);
        assert_eq!(s.apply("x topsecret y ab"), "x *** y ab");
    }

    #[test]
    fn names_longer_than_postgres_allows_are_refused() {
        assert!(check_name(&"a".repeat(63)).is_ok());
        assert!(check_name(&"a".repeat(64)).is_err());
        assert!(check_name("").is_err());
        assert!(check_slice(&slice("bk_x", "")).is_err());
    }
}
