//! What a world sees of its project's shared world (see [`crate::shared`]): the world
//! itself, and the ports, slices and processes of the shared services it uses.

use rusqlite::{params, Connection, OptionalExtension};

use super::{ports, processes, slices, world_by_project, worlds_of_project};
use super::{PortRow, ProcessRow, SliceRow, World};
use crate::store::{StoreError, WorldId};

impl World {
    /// This is a project's shared world ([`crate::shared::WORLD`]).
    pub fn is_shared(&self) -> bool {
        self.name == crate::shared::WORLD
    }

    /// Does this world run `service` itself? The shared world runs its services; a user
    /// world every service but its shared ones (which the shared world runs for it).
    pub fn runs(&self, service: &str) -> bool {
        self.is_shared()
            || !self
                .spec
                .services
                .get(crate::replica::service_of(service))
                .is_some_and(|s| s.shared)
    }
}

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

/// The id of the shared world `world` uses services of, when it uses any (none for the
/// shared world itself). Only the id: every token resolution asks it, and decoding the
/// shared world's spec for an id would be work thrown away.
pub(crate) fn provider(conn: &Connection, world: &World) -> Result<Option<WorldId>, StoreError> {
    if !uses_shared(world) {
        return Ok(None);
    }
    Ok(conn
        .prepare_cached("SELECT id FROM worlds WHERE project_id = ?1 AND name = ?2")?
        .query_row(params![world.project_id, crate::shared::WORLD], |r| {
            r.get(0)
        })
        .optional()?)
}

/// The ports `world` resolves tokens against: its own, and the shared world's ports of the
/// services it shares (after its own, so they win over a stale one of the same name).
pub fn ports_seen_by(conn: &Connection, world: &World) -> Result<Vec<PortRow>, StoreError> {
    let shared = provider(conn, world)?
        .map(|id| ports(conn, id))
        .transpose()?;
    Ok(seen(world, ports(conn, world.id)?, shared, |p| &p.service))
}

/// The slices `world` resolves tokens against: its own, and the shared world's slices of
/// the adapter services it shares.
pub fn slices_seen_by(conn: &Connection, world: &World) -> Result<Vec<SliceRow>, StoreError> {
    let shared = provider(conn, world)?
        .map(|id| slices(conn, id))
        .transpose()?;
    Ok(seen(world, slices(conn, world.id)?, shared, |s| &s.service))
}

/// The shared world's process rows of the services `world` shares (empty when it shares
/// none).
pub fn shared_processes(conn: &Connection, world: &World) -> Result<Vec<ProcessRow>, StoreError> {
    let shared = provider(conn, world)?
        .map(|id| processes(conn, id))
        .transpose()?;
    Ok(seen(world, Vec::new(), shared, |p| &p.service))
}

/// What `world` sees of rows keyed by service: its own rows of the services it runs, then
/// the shared world's rows (`shared`, when it uses one) of the services it shares.
pub(crate) fn seen<T>(
    world: &World,
    mut own: Vec<T>,
    shared: Option<Vec<T>>,
    service: fn(&T) -> &str,
) -> Vec<T> {
    if let Some(shared) = shared {
        own.retain(|r| world.runs(service(r)));
        own.extend(shared.into_iter().filter(|r| !world.runs(service(r))));
    }
    own
}

/// Whether `world` uses services of its project's shared world.
pub(crate) fn uses_shared(world: &World) -> bool {
    !world.is_shared() && !crate::shared::declared(&world.spec).is_empty()
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
