//! The reconcile runtime's writes: finalizers, observed generations, conditions, and the
//! deletion of a world whose finalizers are all gone.

use rusqlite::{params, OptionalExtension};

use crate::store::owner::{self, Tx};
use crate::store::Condition;
use crate::store::{add_event, now_ms, StoreError, World, WorldId};

/// Hold `controller`'s finalizer on `world` unless the world is marked deleted; whether it is
/// held now.
pub(crate) fn add_finalizer(
    tx: &Tx<'_, owner::Runtime>,
    world: WorldId,
    controller: &str,
) -> Result<bool, StoreError> {
    tx.execute(
        "INSERT OR IGNORE INTO finalizers (world_id, controller)
         SELECT id, ?2 FROM worlds WHERE id = ?1 AND deleted_at IS NULL",
        params![world, controller],
    )?;
    let held: i64 = tx.query_row(
        "SELECT COUNT(*) FROM finalizers WHERE world_id = ?1 AND controller = ?2",
        params![world, controller],
        |r| r.get(0),
    )?;
    Ok(held > 0)
}

/// Drop a finalizer (none: `""`); deletes the world row (marked deleted, so no finalizer can
/// be added any more) when none is left. Returns whether the world is gone.
pub(crate) fn remove_finalizer(
    tx: &Tx<'_, owner::Runtime>,
    world: WorldId,
    controller: &str,
) -> Result<bool, StoreError> {
    tx.execute(
        "DELETE FROM finalizers WHERE world_id = ?1 AND controller = ?2",
        params![world, controller],
    )?;
    let left: i64 = tx.query_row(
        "SELECT COUNT(*) FROM finalizers WHERE world_id = ?1",
        [world],
        |r| r.get(0),
    )?;
    if left == 0 {
        add_event(tx, world, "removed", "world removed")?;
        tx.execute(
            "DELETE FROM worlds WHERE id = ?1 AND deleted_at IS NOT NULL",
            [world],
        )?;
        return Ok(true);
    }
    Ok(false)
}

/// `controller` observed the world's generation, with no failed attempt: true when the
/// observed generation moved.
pub(crate) fn set_observed(
    tx: &Tx<'_, owner::Runtime>,
    world: &World,
    controller: &str,
) -> Result<bool, StoreError> {
    let before: Option<i64> = tx
        .query_row(
            "SELECT observed_generation FROM controller_status
             WHERE world_id = ?1 AND controller = ?2",
            params![world.id, controller],
            |r| r.get(0),
        )
        .optional()?;
    tx.execute(
        "INSERT INTO controller_status (world_id, controller, observed_generation, attempts, reconciled_at)
         SELECT ?1, ?2, ?3, 0, ?4 WHERE EXISTS (SELECT 1 FROM worlds WHERE id = ?1)
         ON CONFLICT (world_id, controller) DO UPDATE SET
            observed_generation = excluded.observed_generation, attempts = 0,
            reconciled_at = excluded.reconciled_at",
        params![world.id, controller, world.generation, now_ms()],
    )?;
    Ok(before != Some(world.generation))
}

/// `controller` failed `attempts` times in a row on `world`.
pub(crate) fn set_attempts(
    tx: &Tx<'_, owner::Runtime>,
    world: WorldId,
    controller: &str,
    attempts: u32,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO controller_status (world_id, controller, observed_generation, attempts, reconciled_at)
         SELECT ?1, ?2, 0, ?3, ?4 WHERE EXISTS (SELECT 1 FROM worlds WHERE id = ?1)
         ON CONFLICT (world_id, controller) DO UPDATE SET attempts = excluded.attempts,
            reconciled_at = excluded.reconciled_at",
        params![world, controller, attempts, now_ms()],
    )?;
    Ok(())
}

/// Upsert conditions; `last_transition` moves only when the status changes. Returns true
/// when any condition's status, reason, message or stalled flag changed.
pub(crate) fn write_conditions(
    tx: &Tx<'_, owner::Runtime>,
    world: &World,
    controller: &str,
    conditions: &[Condition],
) -> Result<bool, StoreError> {
    let mut changed = false;
    let now = now_ms();
    for c in conditions {
        let before: Option<(String, String, String, i64, String, i64)> = tx
            .query_row(
                "SELECT status, reason, message, stalled, controller, generation FROM conditions
                 WHERE world_id = ?1 AND type = ?2",
                params![world.id, c.type_],
                |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                    ))
                },
            )
            .optional()?;
        let status_changed = before.as_ref().map(|b| b.0.as_str()) != Some(c.status.as_str());
        let same = before.as_ref().is_some_and(|b| {
            b.0 == c.status.as_str()
                && b.1 == c.reason
                && b.2 == c.message
                && (b.3 != 0) == c.stalled
        });
        if !same {
            changed = true;
        } else if before
            .as_ref()
            .is_some_and(|b| b.4 == controller && b.5 == world.generation)
        {
            // As recorded: no write.
            continue;
        }
        tx.execute(
            "INSERT INTO conditions (world_id, type, controller, status, reason, message, stalled, generation, last_transition)
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9 WHERE EXISTS (SELECT 1 FROM worlds WHERE id = ?1)
             ON CONFLICT (world_id, type) DO UPDATE SET
                controller = excluded.controller, status = excluded.status, reason = excluded.reason,
                message = excluded.message, stalled = excluded.stalled, generation = excluded.generation,
                last_transition = CASE WHEN ?10 THEN excluded.last_transition ELSE conditions.last_transition END",
            params![
                world.id,
                c.type_,
                controller,
                c.status.as_str(),
                c.reason,
                c.message,
                c.stalled as i64,
                world.generation,
                now,
                status_changed
            ],
        )?;
    }
    Ok(changed)
}
