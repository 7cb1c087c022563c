//! Which worlds agents made, so that `remove` — MCP's, and `binky remove` run by any
//! process binky started — removes only those unless the person set `mcp_remove_any`.
//!
//! The record is the store's (`agent_worlds`, written by `binky up` in the transaction that
//! makes the world, when a process binky started asks: `crate::person`), and goes with the
//! world; world ids are never given again, so a world a person makes later under the name
//! is theirs. No file holds it: nothing a process can append to makes a person's world an
//! agent's.

use binky_controllers::store::{self, Store, World};

/// Whether an agent made `world`.
pub fn by_agent(store: &Store, world: &World) -> Result<bool, String> {
    store
        .read(|c| store::agent_made(c, world.id))
        .map(|by| by.is_some())
        .map_err(|e| e.to_string())
}

/// Whether the person allowed agents to remove any world (`mcp_remove_any`).
pub fn remove_any_allowed(store: &Store) -> Result<bool, String> {
    let s = binky_controllers::settings::Settings::read(store).map_err(|e| e.to_string())?;
    Ok(s.flag("mcp_remove_any"))
}
