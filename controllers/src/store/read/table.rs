//! How a table of per-world rows is read: one world's rows, or every world's at once (one
//! query per table instead of one per table and world, for views of many worlds).

use std::collections::HashMap;

use rusqlite::{Connection, Row};

use crate::store::{StoreError, WorldId};

/// A table whose rows belong to a world (`world_id`): its columns, their order within a
/// world, and how a row is read.
pub(crate) struct Table<T> {
    /// The table.
    pub name: &'static str,
    /// The columns `row` reads, in its order.
    pub columns: &'static str,
    /// `ORDER BY` within one world.
    pub order: &'static str,
    /// One row of `columns`.
    pub row: fn(&Row<'_>) -> rusqlite::Result<T>,
}

impl<T> Table<T> {
    /// The rows of `world`.
    pub fn of_world(&self, conn: &Connection, world: WorldId) -> Result<Vec<T>, StoreError> {
        let sql = format!(
            "SELECT {} FROM {} WHERE world_id = ?1 ORDER BY {}",
            self.columns, self.name, self.order
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([world], self.row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every world's rows, by world id then in the table's order.
    pub fn all(&self, conn: &Connection) -> Result<Vec<(WorldId, T)>, StoreError> {
        let sql = format!(
            "SELECT {}, world_id FROM {} ORDER BY world_id, {}",
            self.columns, self.name, self.order
        );
        let at = self.columns.split(',').count();
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([], |r| Ok((r.get(at)?, (self.row)(r)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every world's rows, grouped by world (in the table's order within each).
    pub fn by_world(&self, conn: &Connection) -> Result<HashMap<WorldId, Vec<T>>, StoreError> {
        let mut out: HashMap<WorldId, Vec<T>> = HashMap::new();
        for (world, row) in self.all(conn)? {
            out.entry(world).or_default().push(row);
        }
        Ok(out)
    }
}
