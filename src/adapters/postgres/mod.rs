//! The `postgres` adapter: each slice is one database and one login role of the same name
//! on a shared PostgreSQL server, reached through the service's `admin_url`.
//!
//! # What a slice is
//! - A role named after the slice, `LOGIN` with the slice's secret as its password and no
//!   other rights (`NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS`).
//! - A database of the same name owned by that role, with `REVOKE ALL … FROM PUBLIC`, so no
//!   other role (another world's) can connect to it; the server enforces the isolation.
//! - Both carry the comment `binky slice of home <id>` (the home that made the slice; see
//!   [`crate::adapters::Maker`]; `binky slice` until it is claimed, and on slices made
//!   before marks named a home): `list` (for `binky gc`) returns only databases named
//!   `bk_…` that carry a binky mark, so gc never sees a user's own database. A claim takes
//!   an advisory lock on the name, so two homes claiming one slice take turns; a provision
//!   never rewrites a home's mark.
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
//! - If a slice role created objects in *other* databases (possible on a user's server
//!   before PostgreSQL 15, where `PUBLIC` may create in `public`), `DROP ROLE` fails and the
//!   error lists them; drop them and removal finishes by itself.

use std::time::Duration;

use postgres_protocol::escape::{escape_identifier, escape_literal};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Config, NoTls};

use binky_controllers::url::{password_decoded, percent_encode, Url};

use super::{
    mark, redact, Adapter, AdapterConfig, AdapterError, Address, Maker, Result, Scrub, Slice,
};

mod admin;
mod slice;
use admin::*;
use slice::*;

/// The postgres adapter (`adapter = "postgres"` or `"postgresql"`).
pub struct Postgres;

/// The comment binky puts on its databases and roles until the home that made them
/// claims them ([`mark::text`]: `binky slice of home <id>`).
const MARK: &str = mark::PREFIX;
/// The first key of the advisory locks a claim takes (the second: a hash of the slice's
/// name), so that two homes claiming one slice at once take turns.
const CLAIM_LOCK: i32 = 0x626b_6879; // "bkhy"
/// Bound on opening the TCP connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on the whole connection handshake (TCP, startup, authentication).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on one verb once connected (also the server-side `statement_timeout`).
const VERB_TIMEOUT: Duration = Duration::from_secs(60);
/// The size of a golden template (`pg_database_size`) from which it is copied with
/// `STRATEGY FILE_COPY` rather than `WAL_LOG` (PostgreSQL 15+, `clone_strategy = "auto"`):
/// measured on this project's machine, benchmarks/README.md "Golden templates".
pub const FILE_COPY_FROM: i64 = 64 * 1024 * 1024;
/// PostgreSQL's identifier limit (`NAMEDATALEN - 1`): a longer name would be truncated by
/// the server, and the truncated slice could no longer be found by its name.
const MAX_NAME: usize = 63;

#[async_trait::async_trait]
impl Adapter for Postgres {
    // It clones (`AdapterKind::can_clone`): `CREATE DATABASE … TEMPLATE` is a server-side
    // copy of a golden template.
    fn kind(&self) -> Option<super::AdapterKind> {
        Some(super::AdapterKind::Postgres)
    }

    async fn clone_slice(&self, from: &Slice, to: &Slice, cfg: &AdapterConfig) -> Result<()> {
        check_name(&from.name)?;
        check_slice(to)?;
        let admin = Admin::connect(cfg, &to.secret).await?;
        admin.bounded(clone(&admin, cfg, from, to)).await
    }

    async fn seal_template(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
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
    }

    async fn exists(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Option<bool>> {
        check_name(&slice.name)?;
        let admin = Admin::connect(cfg, &slice.secret).await?;
        let db = admin.bounded(admin.database(&slice.name)).await?;
        Ok(Some(db.is_some()))
    }

    async fn provision(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        check_slice(slice)?;
        let admin = Admin::connect(cfg, &slice.secret).await?;
        admin.bounded(provision(&admin, slice)).await
    }

    async fn resolve(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Address> {
        check_slice(slice)?;
        let target = Target::parse(admin_url(cfg)?)?;
        Ok(target.slice_address(slice))
    }

    async fn teardown(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        check_name(&slice.name)?;
        let admin = Admin::connect(cfg, &slice.secret).await?;
        admin.bounded(teardown(&admin, &slice.name)).await
    }

    async fn maker(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Maker> {
        check_name(&slice.name)?;
        let admin = Admin::connect(cfg, &slice.secret).await?;
        admin.bounded(admin.maker(&slice.name)).await
    }

    async fn claim(&self, slice: &Slice, cfg: &AdapterConfig, home: &str) -> Result<Maker> {
        check_name(&slice.name)?;
        let admin = Admin::connect(cfg, &slice.secret).await?;
        admin.bounded(claim(&admin, &slice.name, home)).await
    }

    async fn list(&self, cfg: &AdapterConfig) -> Result<Vec<String>> {
        let admin = Admin::connect(cfg, "").await?;
        admin
            .bounded(async {
                let rows = admin
                    .client
                    .query(
                        "SELECT d.datname FROM pg_database d \
                         WHERE left(d.datname, 3) = 'bk_' \
                           AND left(shobj_description(d.oid, 'pg_database'), length($1)) = $1 \
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
    }
}

/// The admin URL, or a message saying where it comes from.
fn admin_url(cfg: &AdapterConfig) -> Result<&str> {
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

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_NAME || name.contains('\0') {
        return Err(AdapterError::Config(format!(
            "`{name}` cannot name a PostgreSQL slice: 1 to {MAX_NAME} bytes, no NUL"
        )));
    }
    Ok(())
}

fn check_slice(slice: &Slice) -> Result<()> {
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

#[cfg(test)]
mod tests;
