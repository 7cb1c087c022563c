//! Which worlds agents made through `binky mcp` (`up` of a world that did not exist), so
//! that `remove` — MCP's, and `binky remove` run by any process binky started — removes
//! only those unless the person set `mcp_remove_any`.
//!
//! A line per world in `$BINKY_HOME/mcp-created`: its store id, project and name. The id
//! makes a record of a world a person removed and made again under the same name stale.

use std::path::PathBuf;

use binky_controllers::store::{self, Store, World};

use crate::paths::Home;

fn file(home: &Home) -> PathBuf {
    home.root().join("mcp-created")
}

fn world(store: &Store, project: &str, name: &str) -> Result<Option<World>, String> {
    store
        .read(|c| store::world_by_name(c, project, name))
        .map_err(|e| e.to_string())
}

fn lines(home: &Home) -> Vec<(i64, String, String)> {
    std::fs::read_to_string(file(home))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, '\t');
            Some((
                f.next()?.parse().ok()?,
                f.next()?.to_owned(),
                f.next()?.to_owned(),
            ))
        })
        .collect()
}

fn write(home: &Home, rows: &[(i64, String, String)]) -> Result<(), String> {
    let text: String = rows
        .iter()
        .map(|(id, p, n)| format!("{id}\t{p}\t{n}\n"))
        .collect();
    let path = file(home);
    crate::paths::write_atomically(&path, &text)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Record that an agent made `project`/`name`.
pub fn record(home: &Home, store: &Store, project: &str, name: &str) -> Result<(), String> {
    let Some(w) = world(store, project, name)? else {
        return Ok(());
    };
    let mut rows = lines(home);
    rows.retain(|(id, p, n)| *id != w.id && !(p == project && n == name));
    rows.push((w.id, project.to_owned(), name.to_owned()));
    write(home, &rows)
}

/// Whether an agent made the world `project`/`name` that exists now.
pub fn by_agent(home: &Home, store: &Store, project: &str, name: &str) -> Result<bool, String> {
    let Some(w) = world(store, project, name)? else {
        return Ok(false);
    };
    Ok(lines(home)
        .iter()
        .any(|(id, p, n)| *id == w.id && p == project && n == name))
}

/// Forget `project`/`name` (removed).
pub fn forget(home: &Home, project: &str, name: &str) -> Result<(), String> {
    let mut rows = lines(home);
    let before = rows.len();
    rows.retain(|(_, p, n)| !(p == project && n == name));
    if rows.len() == before {
        return Ok(());
    }
    write(home, &rows)
}

/// Whether the person allowed agents to remove any world (`mcp_remove_any`).
pub fn remove_any_allowed(store: &Store) -> Result<bool, String> {
    let s = binky_controllers::settings::Settings::read(store).map_err(|e| e.to_string())?;
    Ok(s.flag("mcp_remove_any"))
}
