//! What the route controller wrote: the routing table (`routes`).

use rusqlite::Connection;

use crate::store::records::Route;
use crate::store::{StoreError, WorldId};

/// Every route of every world.
pub fn routes(conn: &Connection) -> Result<Vec<Route>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT host, project, world, service, port, https, state, note, backends FROM routes",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(Route {
            host: r.get(0)?,
            project: r.get(1)?,
            world: r.get(2)?,
            service: r.get(3)?,
            port: r.get(4)?,
            backends: parse_backends(&r.get::<_, String>(8)?),
            https: r.get::<_, i64>(5)? != 0,
            state: r.get(6)?,
            note: r.get(7)?,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// `4001,4002` → the ports (the `backends` column; unreadable entries are skipped).
fn parse_backends(text: &str) -> Vec<u16> {
    text.split(',')
        .filter_map(|p| p.trim().parse().ok())
        .collect()
}

/// The `backends` column of a route.
pub(crate) fn backends_text(ports: &[u16]) -> String {
    ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// A row of `routes` as the route controller compares it with a wanted route: host,
/// service, port, state, note, backends.
pub type RouteSeen = (String, String, u16, String, String, String);

/// The rows of `routes` of a world, in host order.
pub fn routes_of(conn: &Connection, world: WorldId) -> Result<Vec<RouteSeen>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT host, service, port, state, note, backends FROM routes WHERE world_id = ?1 ORDER BY host",
    )?;
    let rows = stmt
        .query_map([world], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Who holds `host` (`project/world`; empty when no one, or it cannot be read).
pub fn route_holder(conn: &Connection, host: &str) -> Result<String, StoreError> {
    Ok(conn
        .query_row(
            "SELECT project || '/' || world FROM routes WHERE host = ?1",
            [host],
            |r| r.get::<_, String>(0),
        )
        .unwrap_or_default())
}
