//! What the admission gate wrote: each world's place in its queue.

use rusqlite::{params, Connection, OptionalExtension};

use crate::store::{AdmissionState, DesiredState, StoreError, WorldId};

/// A world's row of the gate's queue.
#[derive(Clone, Debug)]
pub struct AdmissionPlace {
    /// The world.
    pub world: WorldId,
    /// Queued, admitted or cooled.
    pub state: AdmissionState,
    /// When it joined the queue (ms).
    pub queued_at: i64,
    /// When the gate cooled it (ms).
    pub cooled_at: Option<i64>,
    /// When it was admitted (ms).
    pub admitted_at: Option<i64>,
    /// When it started again after being cooled (ms).
    pub resumed_at: Option<i64>,
    /// Why it waits (empty when it does not).
    pub reason: String,
}

/// A world's admission: its state and why it waits.
pub fn admission(
    conn: &Connection,
    world: WorldId,
) -> Result<Option<(AdmissionState, String)>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT state, reason FROM admissions WHERE world_id = ?1",
            [world],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?)
}

/// Every place of a world that wants to run (but `shared`, the shared worlds' name), in
/// the order they asked.
pub fn admission_places(
    conn: &Connection,
    shared: &str,
) -> Result<Vec<AdmissionPlace>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT a.world_id, a.state, a.queued_at, a.cooled_at, a.admitted_at, a.resumed_at, a.reason
         FROM admissions a JOIN worlds w ON w.id = a.world_id
         WHERE w.deleted_at IS NULL AND w.desired_state = ?2 AND w.name != ?1
         ORDER BY a.queued_at, a.world_id",
    )?;
    let rows = stmt
        .query_map(params![shared, DesiredState::Running.as_str()], |r| {
            Ok(AdmissionPlace {
                world: r.get(0)?,
                state: r.get(1)?,
                queued_at: r.get(2)?,
                cooled_at: r.get(3)?,
                admitted_at: r.get(4)?,
                resumed_at: r.get(5)?,
                reason: r.get(6)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Whether `world` has a place in the queue, not counting a place the gate cooled before
/// `last_used_at` (`binky up` asked again since).
pub fn admission_placed(
    conn: &Connection,
    world: WorldId,
    last_used_at: i64,
) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT 1 FROM admissions WHERE world_id = ?1
               AND NOT (state = ?3 AND cooled_at < ?2)",
        )?
        .query_row(params![world, last_used_at, AdmissionState::Cooled], |_| {
            Ok(())
        })
        .optional()?
        .is_some())
}

/// A world told to stop (cooled, or down) whose processes still run, if any.
pub fn stopping_world(conn: &Connection) -> Result<Option<String>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT w.name FROM worlds w WHERE (w.desired_state = ?1 OR EXISTS
                (SELECT 1 FROM admissions a WHERE a.world_id = w.id AND a.state = ?2))
             AND EXISTS
                (SELECT 1 FROM processes p WHERE p.world_id = w.id AND p.pid IS NOT NULL)
             ORDER BY w.id LIMIT 1",
            params![DesiredState::Stopped.as_str(), AdmissionState::Cooled],
            |r| r.get(0),
        )
        .optional()?)
}
