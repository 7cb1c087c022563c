//! What SQLite says of the store's file itself: whether it changed, and whether it is
//! sound. Both are `PRAGMA`s that only read ([`READ_PRAGMAS`](crate::store::owner::READ_PRAGMAS)).

use rusqlite::Connection;

use crate::store::StoreError;

/// A number that changes when another connection commits a write (`PRAGMA data_version`):
/// the dashboard and `binky top` read the store again only then.
pub fn data_version(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0))?)
}

/// SQLite's quick integrity check of the file (`ok`, or the first problem found), for
/// `binky doctor`.
pub fn quick_check(conn: &Connection) -> Result<String, StoreError> {
    Ok(conn.query_row("PRAGMA quick_check", [], |r| r.get(0))?)
}
