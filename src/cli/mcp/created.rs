//! The store `binky mcp` answers from, and which worlds agents made (the store's record,
//! read through [`crate::agent_made`]).

use std::path::PathBuf;

use binky_controllers::store::{self, Store, World};

use crate::paths::Home;

/// The store, opened once per server: every read tool answers from it in this process.
pub fn store() -> Result<&'static Store, String> {
    static STORE: std::sync::OnceLock<Store> = std::sync::OnceLock::new();
    if let Some(s) = STORE.get() {
        return Ok(s);
    }
    let home = Home::from_env()?;
    home.ensure()
        .map_err(|e| format!("cannot use {}: {e}", home.root().display()))?;
    let store = Store::open(&home.db()).map_err(|e| e.to_string())?;
    Ok(STORE.get_or_init(|| store))
}

/// Whether an agent made `world` (recorded in the store when it was made:
/// [`crate::agent_made`]).
pub fn by_agent(world: &World) -> Result<bool, String> {
    crate::agent_made::by_agent(store()?, world)
}

/// Whether the person allowed agents to remove any world (`mcp_remove_any`).
pub fn remove_any_allowed() -> Result<bool, String> {
    crate::agent_made::remove_any_allowed(store()?)
}

/// The repository of project `project` (its main checkout, or a worktree of one of its
/// worlds when that is gone), to run commands about it in.
pub fn project_dir(project: &str) -> Result<Option<PathBuf>, String> {
    let worlds = store()?.read(store::worlds).map_err(|e| e.to_string())?;
    let mine: Vec<&World> = worlds.iter().filter(|w| w.project == project).collect();
    let dir = mine
        .iter()
        .map(|w| w.repo_root.clone())
        .chain(mine.iter().map(|w| w.worktree_path.clone()))
        .find(|d| d.is_dir());
    Ok(dir)
}

/// Every project with worlds.
pub fn projects() -> Result<Vec<String>, String> {
    let mut p: Vec<String> = store()?
        .read(store::worlds)
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|w| w.project)
        .collect();
    p.sort();
    p.dedup();
    Ok(p)
}
