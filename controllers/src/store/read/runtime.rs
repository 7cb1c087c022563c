//! The runtime's bookkeeping (conditions, observed generations, finalizers) and the event log.

use std::collections::BTreeMap;

use rusqlite::{params, Connection};
use serde::Serialize;

use crate::store::{StoreError, WorldId};

/// Status of a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum CondStatus {
    /// It holds.
    True,
    /// It does not.
    False,
    /// Not known yet.
    Unknown,
}

impl CondStatus {
    /// Stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CondStatus::True => "True",
            CondStatus::False => "False",
            CondStatus::Unknown => "Unknown",
        }
    }

    fn parse(s: &str) -> CondStatus {
        match s {
            "True" => CondStatus::True,
            "False" => CondStatus::False,
            _ => CondStatus::Unknown,
        }
    }
}

/// A condition as stored: what a controller last concluded about a world.
#[derive(Clone, Debug, Serialize)]
pub struct ConditionRow {
    /// E.g. `WorktreeReady`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The controller that reports it.
    pub controller: String,
    /// True/False/Unknown.
    pub status: CondStatus,
    /// A CamelCase reason.
    pub reason: String,
    /// A human sentence, naming the fix where there is one.
    pub message: String,
    /// Waiting will not fix it: a person has to act.
    pub stalled: bool,
    /// The world generation the controller saw.
    pub generation: i64,
    /// When `status` last changed (ms).
    pub last_transition: i64,
}

/// A world's conditions.
pub fn conditions(conn: &Connection, world: WorldId) -> Result<Vec<ConditionRow>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT type, controller, status, reason, message, stalled, generation, last_transition
         FROM conditions WHERE world_id = ?1 ORDER BY type",
    )?;
    let rows = stmt
        .query_map([world], |r| {
            Ok(ConditionRow {
                type_: r.get(0)?,
                controller: r.get(1)?,
                status: CondStatus::parse(&r.get::<_, String>(2)?),
                reason: r.get(3)?,
                message: r.get(4)?,
                stalled: r.get::<_, i64>(5)? != 0,
                generation: r.get(6)?,
                last_transition: r.get(7)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// `controller → observed_generation` for a world.
pub fn observed_generations(
    conn: &Connection,
    world: WorldId,
) -> Result<BTreeMap<String, i64>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT controller, observed_generation FROM controller_status WHERE world_id = ?1",
    )?;
    let rows = stmt
        .query_map([world], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<BTreeMap<_, _>, _>>()?;
    Ok(rows)
}

/// Finalizers still held on a world.
pub fn finalizers(conn: &Connection, world: WorldId) -> Result<Vec<String>, StoreError> {
    let mut stmt =
        conn.prepare("SELECT controller FROM finalizers WHERE world_id = ?1 ORDER BY controller")?;
    let rows = stmt
        .query_map([world], |r| r.get(0))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// One event of a world's history.
#[derive(Clone, Debug, Serialize)]
pub struct EventRow {
    /// Monotonic id.
    pub id: i64,
    /// When (ms).
    pub at: i64,
    /// Project name.
    pub project: String,
    /// World name.
    pub world: String,
    /// A short kind (`worktree_created`, `started`, `exited`, …).
    pub kind: String,
    /// What happened.
    pub message: String,
}

/// Events of a world after `after_id`, oldest first, at most `limit` (the newest ones).
pub fn events(
    conn: &Connection,
    project: &str,
    world: &str,
    after_id: i64,
    limit: usize,
) -> Result<Vec<EventRow>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT id, at, project, world, kind, message FROM (
            SELECT * FROM events WHERE project = ?1 AND world = ?2 AND id > ?3
            ORDER BY id DESC LIMIT ?4
         ) ORDER BY id",
    )?;
    let rows = stmt
        .query_map(params![project, world, after_id, limit as i64], |r| {
            Ok(EventRow {
                id: r.get(0)?,
                at: r.get(1)?,
                project: r.get(2)?,
                world: r.get(3)?,
                kind: r.get(4)?,
                message: r.get(5)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// The id of the newest event (0 when there is none).
pub fn last_event_id(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.query_row("SELECT COALESCE(MAX(id), 0) FROM events", [], |r| r.get(0))?)
}
