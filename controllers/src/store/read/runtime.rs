//! The runtime's bookkeeping (conditions, observed generations, finalizers) and the event log.

use std::collections::BTreeMap;

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use super::table::Table;
use crate::store::records::Condition;
use crate::store::{StoreError, World, WorldId};

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

/// How `conditions` is read.
pub(crate) const CONDITIONS: Table<ConditionRow> = Table {
    name: "conditions",
    columns: "type, controller, status, reason, message, stalled, generation, last_transition",
    order: "type",
    row: |r| {
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
    },
};

/// A world's conditions.
pub fn conditions(conn: &Connection, world: WorldId) -> Result<Vec<ConditionRow>, StoreError> {
    CONDITIONS.of_world(conn, world)
}

/// How `controller_status` is read: `(controller, observed_generation)`.
pub(crate) const GENERATIONS: Table<(String, i64)> = Table {
    name: "controller_status",
    columns: "controller, observed_generation",
    order: "controller",
    row: |r| Ok((r.get(0)?, r.get(1)?)),
};

/// `controller → observed_generation` for a world.
pub fn observed_generations(
    conn: &Connection,
    world: WorldId,
) -> Result<BTreeMap<String, i64>, StoreError> {
    Ok(GENERATIONS.of_world(conn, world)?.into_iter().collect())
}

/// Finalizers still held on a world.
pub fn finalizers(conn: &Connection, world: WorldId) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT controller FROM finalizers WHERE world_id = ?1 ORDER BY controller",
    )?;
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

/// Where the newest world named `world` of `project` begins in the event log: the id of its
/// `created` event (written in the transaction that makes the world, and an event id is never
/// used twice, while a world's row id may be given again to a world made after it went).
/// Its events are those from there on; 0 when there is none.
const NEWEST_WORLD_BEGINS: &str = "COALESCE((SELECT MAX(id) FROM events
    WHERE project = ?1 AND world = ?2 AND kind = 'created'), 0)";

/// Events of the newest world named `world` of `project` (the live one, or the last one
/// removed) after `after_id`, oldest first, at most `limit` (the newest ones). The events of
/// earlier worlds of the name ([`world_lives`]) stay in the log and are not mixed in.
pub fn events(
    conn: &Connection,
    project: &str,
    world: &str,
    after_id: i64,
    limit: usize,
) -> Result<Vec<EventRow>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT id, at, project, world, kind, message FROM (
            SELECT * FROM events WHERE project = ?1 AND world = ?2 AND id > ?3
                AND id >= {NEWEST_WORLD_BEGINS}
            ORDER BY id DESC LIMIT ?4
         ) ORDER BY id"
    ))?;
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

/// How many worlds named `world` the event log of `project` holds: the live one and those
/// removed, each from its `created` event.
pub fn world_lives(conn: &Connection, project: &str, world: &str) -> Result<i64, StoreError> {
    Ok(conn.query_row(
        "SELECT COUNT(*) FROM events WHERE project = ?1 AND world = ?2 AND kind = 'created'",
        params![project, world],
        |r| r.get(0),
    )?)
}

/// The projects whose event log holds a world named `world` (live or removed), the one
/// whose world of the name was made last first.
pub fn projects_with_world_events(
    conn: &Connection,
    world: &str,
) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT project FROM events WHERE world = ?1 AND kind = 'created'
         GROUP BY project ORDER BY MAX(id) DESC",
    )?;
    let rows = stmt
        .query_map([world], |r| r.get(0))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// The id of the newest event (0 when there is none).
pub fn last_event_id(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.query_row("SELECT COALESCE(MAX(id), 0) FROM events", [], |r| r.get(0))?)
}

/// Whether `controller` holds its finalizer on `world`.
pub fn finalizer_held(
    conn: &Connection,
    world: WorldId,
    controller: &str,
) -> Result<bool, StoreError> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM finalizers WHERE world_id = ?1 AND controller = ?2",
            params![world, controller],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// Whether `controller` already recorded `conditions` at the world's generation, with no
/// failed attempts since: then the runtime has nothing to write.
pub fn recorded_already(
    c: &Connection,
    world: &World,
    controller: &str,
    conditions: &[Condition],
) -> Result<bool, StoreError> {
    let status: Option<(i64, i64)> = c
        .query_row(
            "SELECT observed_generation, attempts FROM controller_status
             WHERE world_id = ?1 AND controller = ?2",
            params![world.id, controller],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    if status != Some((world.generation, 0)) {
        return Ok(false);
    }
    for cond in conditions {
        let same = c
            .query_row(
                "SELECT 1 FROM conditions
                 WHERE world_id = ?1 AND type = ?2 AND controller = ?3 AND status = ?4
                   AND reason = ?5 AND message = ?6 AND stalled = ?7 AND generation = ?8",
                params![
                    world.id,
                    cond.type_,
                    controller,
                    cond.status.as_str(),
                    cond.reason,
                    cond.message,
                    cond.stalled as i64,
                    world.generation
                ],
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        if !same {
            return Ok(false);
        }
    }
    Ok(true)
}
