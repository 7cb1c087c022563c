//! The admission gate's writes: each world's place in its queue (`admissions`).

use rusqlite::params;

use crate::store::owner::{self, Tx};
use crate::store::{AdmissionState, StoreError, WorldId};

/// `world` leaves the queue; whether it had a place.
pub(crate) fn release(tx: &Tx<'_, owner::Gate>, world: WorldId) -> Result<bool, StoreError> {
    Ok(tx.execute("DELETE FROM admissions WHERE world_id = ?1", [world])? > 0)
}

/// Cool `world` at `now`, for `reason`: to the back of the queue, behind every world that
/// asked before it was cooled (the newcomer it makes room for included, whatever the clock
/// says).
pub(crate) fn cool(
    tx: &Tx<'_, owner::Gate>,
    world: WorldId,
    now: i64,
    reason: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE admissions SET state = ?4, cooled_at = ?2,
            queued_at = MAX(?2, (SELECT MAX(queued_at) FROM admissions) + 1), reason = ?3
         WHERE world_id = ?1",
        params![world, now, reason, AdmissionState::Cooled],
    )?;
    Ok(())
}

/// Admit a project's shared world, which takes no place.
pub(crate) fn admit_shared(
    tx: &Tx<'_, owner::Gate>,
    world: WorldId,
    now: i64,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO admissions (world_id, state, queued_at, reason) VALUES (?1, ?3, ?2, '')
         ON CONFLICT (world_id) DO UPDATE SET state = ?3, reason = ''",
        params![world, now, AdmissionState::Admitted],
    )?;
    Ok(())
}

/// `world` joins the queue at `now`, unless it has a place; a place the gate cooled before
/// `last_used_at` (`binky up` asked again) is a request of its own again.
pub(crate) fn join_queue(
    tx: &Tx<'_, owner::Gate>,
    world: WorldId,
    last_used_at: i64,
    now: i64,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT OR IGNORE INTO admissions (world_id, state, queued_at, reason) VALUES (?1, ?3, ?2, '')",
        params![world, now, AdmissionState::Queued],
    )?;
    // `binky up` of a world the gate cooled: a request of its own again, now.
    tx.execute(
        "UPDATE admissions SET state = ?3, cooled_at = NULL
         WHERE world_id = ?1 AND state = ?4 AND cooled_at < ?2",
        params![
            world,
            last_used_at,
            AdmissionState::Queued,
            AdmissionState::Cooled
        ],
    )?;
    Ok(())
}

/// Why `world` waits.
pub(crate) fn set_reason(
    tx: &Tx<'_, owner::Gate>,
    world: WorldId,
    reason: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE admissions SET reason = ?2 WHERE world_id = ?1",
        params![world, reason],
    )?;
    Ok(())
}

/// Admit `world` at `now` (`resuming`: it had been cooled).
pub(crate) fn admit(
    tx: &Tx<'_, owner::Gate>,
    world: WorldId,
    now: i64,
    resuming: bool,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE admissions SET state = ?4, reason = '', admitted_at = ?2,
            resumed_at = CASE WHEN ?3 THEN ?2 ELSE resumed_at END, cooled_at = NULL
         WHERE world_id = ?1",
        params![world, now, resuming, AdmissionState::Admitted],
    )?;
    Ok(())
}
