//! The slice controller's writes: each world's slices (`slices`).

use rusqlite::params;

use crate::store::owner::{self, Tx};
use crate::store::{now_ms, SliceRow, StoreError, WorldId};

/// Record `world`'s slice `row` (`tokens`: its tokens, as JSON).
pub(crate) fn save(
    tx: &Tx<'_, owner::Slice>,
    world: WorldId,
    row: &SliceRow,
    tokens: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO slices (world_id, service, adapter, name, secret, state, address, tokens,
            admin_url, migrate_hash, seed_hash, failed_generation, message, updated_at)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14
         WHERE EXISTS (SELECT 1 FROM worlds WHERE id = ?1)
         ON CONFLICT (world_id, service) DO UPDATE SET adapter = excluded.adapter,
            name = excluded.name, secret = excluded.secret, state = excluded.state,
            address = excluded.address, tokens = excluded.tokens,
            admin_url = excluded.admin_url, migrate_hash = excluded.migrate_hash,
            seed_hash = excluded.seed_hash, failed_generation = excluded.failed_generation,
            message = excluded.message, updated_at = excluded.updated_at",
        params![
            world,
            row.service,
            row.adapter,
            row.name,
            row.secret,
            row.state,
            row.address,
            tokens,
            row.admin_url,
            row.migrate_hash,
            row.seed_hash,
            row.failed_generation,
            row.message,
            now_ms()
        ],
    )?;
    Ok(())
}

/// Forget `world`'s slice of `service`.
pub(crate) fn remove(
    tx: &Tx<'_, owner::Slice>,
    world: WorldId,
    service: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "DELETE FROM slices WHERE world_id = ?1 AND service = ?2",
        params![world, service],
    )?;
    Ok(())
}
