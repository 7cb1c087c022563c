//! The route controller's writes: the routing table (`routes`).

use rusqlite::params;

use crate::store::owner::{self, Tx};
use crate::store::Route;
use crate::store::{backends_text, now_ms, StoreError, WorldId};

/// Delete `world`'s routes; how many there were.
pub(crate) fn clear(tx: &Tx<'_, owner::Route>, world: WorldId) -> Result<usize, StoreError> {
    Ok(tx.execute("DELETE FROM routes WHERE world_id = ?1", [world])?)
}

/// Route `r` to `world`, unless another world holds its host: whether it was written.
pub(crate) fn insert(
    tx: &Tx<'_, owner::Route>,
    world: WorldId,
    r: &Route,
) -> Result<bool, StoreError> {
    let n = tx.execute(
        "INSERT OR IGNORE INTO routes (host, world_id, project, world, service, port, https, state, note, backends, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![r.host, world, r.project, r.world, r.service, r.port, r.https as i64, r.state, r.note, backends_text(&r.backends), now_ms()],
    )?;
    Ok(n > 0)
}
