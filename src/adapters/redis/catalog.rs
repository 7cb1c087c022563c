//! binky's catalog on a shared Redis server: which binky home made each slice, and which
//! slice holds each database. Two hashes in the admin URL's own database (which no world
//! is given):
//!
//! - `binky:slices`: slice name → the identity of the home that made it (its mark; see
//!   [`crate::adapters::Maker`]);
//! - `binky:databases`: database number → the slice holding it (`isolation = "database"`).
//!
//! Each claim is one `HSETNX`: of two homes (two daemons) claiming one slice or database at
//! once, the server lets one win, and the other reads the winner back. A home's in-process
//! lock ([`super::server_lock`]) cannot reach another home's daemon; this can.
//!
//! # Caveats
//! - A world's user (database isolation) allows every key; a connection that never sends
//!   `SELECT` (one that ignores its URL's database) is in database 0 and could change the
//!   catalog when the admin URL's database is 0. A lost entry is claimed again by its home
//!   at the slice's next provision; what it guards against meanwhile is one home taking a
//!   database another home's world holds, which the pinned users on the server still show.

use std::collections::{BTreeMap, BTreeSet};

use redis::aio::MultiplexedConnection;

use super::admin::Server;
use crate::adapters::Result;

/// slice → home.
const SLICES: &str = "binky:slices";
/// database → slice.
const DATABASES: &str = "binky:databases";

/// The home the catalog records as `slice`'s maker.
pub(super) async fn home_of(
    server: &Server,
    con: &mut MultiplexedConnection,
    slice: &str,
) -> Result<Option<String>> {
    server
        .query(
            con,
            redis::cmd("HGET").arg(SLICES).arg(slice),
            "reading binky's catalog",
            &[],
        )
        .await
}

/// Records `home` as `slice`'s maker unless a home is recorded already; the home recorded
/// now.
pub(super) async fn claim_slice(
    server: &Server,
    con: &mut MultiplexedConnection,
    slice: &str,
    home: &str,
) -> Result<Option<String>> {
    server
        .query::<i64>(
            con,
            redis::cmd("HSETNX").arg(SLICES).arg(slice).arg(home),
            "claiming the slice in binky's catalog",
            &[],
        )
        .await?;
    home_of(server, con, slice).await
}

/// Forgets `slice`: its mark, and every database it held.
pub(super) async fn forget_slice(
    server: &Server,
    con: &mut MultiplexedConnection,
    slice: &str,
) -> Result<()> {
    for (db, holder) in databases(server, con).await? {
        if holder == slice {
            server
                .query::<i64>(
                    con,
                    redis::cmd("HDEL").arg(DATABASES).arg(db),
                    "updating binky's catalog",
                    &[],
                )
                .await?;
        }
    }
    server
        .query::<i64>(
            con,
            redis::cmd("HDEL").arg(SLICES).arg(slice),
            "updating binky's catalog",
            &[],
        )
        .await
        .map(|_| ())
}

/// Database → the slice holding it.
pub(super) async fn databases(
    server: &Server,
    con: &mut MultiplexedConnection,
) -> Result<BTreeMap<i64, String>> {
    let all: BTreeMap<String, String> = server
        .query(
            con,
            redis::cmd("HGETALL").arg(DATABASES),
            "reading binky's catalog",
            &[],
        )
        .await?;
    Ok(all
        .into_iter()
        .filter_map(|(db, slice)| Some((db.parse().ok()?, slice)))
        .collect())
}

/// Claims database `db` for `slice` unless another slice holds it; whether `slice` holds
/// it now.
pub(super) async fn claim_database(
    server: &Server,
    con: &mut MultiplexedConnection,
    db: i64,
    slice: &str,
) -> Result<bool> {
    server
        .query::<i64>(
            con,
            redis::cmd("HSETNX").arg(DATABASES).arg(db).arg(slice),
            "claiming a database in binky's catalog",
            &[],
        )
        .await?;
    let holder: Option<String> = server
        .query(
            con,
            redis::cmd("HGET").arg(DATABASES).arg(db),
            "reading binky's catalog",
            &[],
        )
        .await?;
    Ok(holder.as_deref() == Some(slice))
}

/// Every slice the catalog names (marked, or holding a database): a slice whose user is
/// gone (a teardown cut short) is still found by `binky gc`.
pub(super) async fn slices(
    server: &Server,
    con: &mut MultiplexedConnection,
) -> Result<BTreeSet<String>> {
    let marked: Vec<String> = server
        .query(
            con,
            redis::cmd("HKEYS").arg(SLICES),
            "reading binky's catalog",
            &[],
        )
        .await?;
    Ok(marked
        .into_iter()
        .chain(databases(server, con).await?.into_values())
        .collect())
}
