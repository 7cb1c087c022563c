//! This home's identity, which its migration made (see `store::owner::FIXED`).

use rusqlite::Connection;

use crate::store::StoreError;

/// This home's identity: eight characters of `[a-z2-7]`, made at random once, when the
/// store was made or upgraded, and never changed. Slices and golden templates carry it in
/// their names and in the mark their server keeps of the home that made them.
pub fn home_id(conn: &Connection) -> Result<String, StoreError> {
    Ok(conn
        .prepare_cached("SELECT id FROM home WHERE one = 1")?
        .query_row([], |r| r.get(0))?)
}
