//! What a world sees of its project's shared world (see [`crate::shared`]): the world
//! itself, and the ports, slices and processes of the shared services it uses.

use rusqlite::Connection;

use super::{ports, processes, slices, world_by_project, worlds_of_project};
use super::{PortRow, ProcessRow, SliceRow, World};
use crate::store::StoreError;

/// The shared world of project `project_id`, if it has one.
pub fn shared_world(conn: &Connection, project_id: i64) -> Result<Option<World>, StoreError> {
    world_by_project(conn, project_id, crate::shared::WORLD)
}

/// The worlds of project `project_id` other than its shared world, by name.
pub fn user_worlds(conn: &Connection, project_id: i64) -> Result<Vec<World>, StoreError> {
    Ok(worlds_of_project(conn, project_id)?
        .into_iter()
        .filter(|w| !w.is_shared())
        .collect())
}

/// The shared world `world` uses services of, when it uses any (none for the shared world
/// itself).
fn provider(conn: &Connection, world: &World) -> Result<Option<World>, StoreError> {
    if world.is_shared() || crate::shared::declared(&world.spec).is_empty() {
        return Ok(None);
    }
    shared_world(conn, world.project_id)
}

/// The ports `world` resolves tokens against: its own, and the shared world's ports of the
/// services it shares (after its own, so they win over a stale one of the same name).
pub fn ports_seen_by(conn: &Connection, world: &World) -> Result<Vec<PortRow>, StoreError> {
    let mut out = ports(conn, world.id)?;
    if let Some(shared) = provider(conn, world)? {
        out.retain(|p| world.runs(&p.service));
        out.extend(
            ports(conn, shared.id)?
                .into_iter()
                .filter(|p| !world.runs(&p.service)),
        );
    }
    Ok(out)
}

/// The slices `world` resolves tokens against: its own, and the shared world's slices of
/// the adapter services it shares.
pub fn slices_seen_by(conn: &Connection, world: &World) -> Result<Vec<SliceRow>, StoreError> {
    let mut out = slices(conn, world.id)?;
    if let Some(shared) = provider(conn, world)? {
        out.retain(|s| world.runs(&s.service));
        out.extend(
            slices(conn, shared.id)?
                .into_iter()
                .filter(|s| !world.runs(&s.service)),
        );
    }
    Ok(out)
}

/// The shared world's process rows of the services `world` shares (empty when it shares
/// none).
pub fn shared_processes(conn: &Connection, world: &World) -> Result<Vec<ProcessRow>, StoreError> {
    Ok(match provider(conn, world)? {
        Some(shared) => processes(conn, shared.id)?
            .into_iter()
            .filter(|p| !world.runs(&p.service))
            .collect(),
        None => Vec::new(),
    })
}

/// The worlds of the shared world `shared`'s project that declare shared services (being
/// removed or not), by name: while there are any, the shared world is not torn down.
pub fn shared_users(conn: &Connection, shared: &World) -> Result<Vec<String>, StoreError> {
    Ok(user_worlds(conn, shared.project_id)?
        .into_iter()
        .filter(|w| !crate::shared::declared(&w.spec).is_empty())
        .map(|w| w.name)
        .collect())
}
