//! The port controller's writes: each world's ports (`ports`).

use rusqlite::params;

use crate::store::owner::{self, Tx};
use crate::store::{now_ms, StoreError, WorldId};

/// Assign `port` to `world`'s `service` (its `label`).
pub(crate) fn assign(
    tx: &Tx<'_, owner::Port>,
    world: WorldId,
    service: &str,
    label: &str,
    port: u16,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO ports (port, world_id, service, label, assigned_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![port, world, service, label, now_ms()],
    )?;
    Ok(())
}

/// Release `port`.
pub(crate) fn release(tx: &Tx<'_, owner::Port>, port: u16) -> Result<(), StoreError> {
    tx.execute("DELETE FROM ports WHERE port = ?1", [port])?;
    Ok(())
}

/// Release every port of `world`.
pub(crate) fn release_world(tx: &Tx<'_, owner::Port>, world: WorldId) -> Result<(), StoreError> {
    tx.execute("DELETE FROM ports WHERE world_id = ?1", [world])?;
    Ok(())
}
