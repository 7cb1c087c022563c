//! Which worlds agents made through `binky mcp` (`up` of a world that did not exist), so
//! that `remove` removes only those unless the person set `mcp_remove_any`.
//!
//! A line per world in `$BINKY_HOME/mcp-created`: its store id, project and name. The id
//! makes a record of a world a person removed and made again under the same name stale.

use std::path::PathBuf;

use binky_controllers::store::{self, Store, World};

use crate::paths::Home;

fn file(home: &Home) -> PathBuf {
    home.root().join("mcp-created")
}

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

fn open() -> Result<(Home, &'static Store), String> {
    Ok((Home::from_env()?, store()?))
}

/// The world `project`/`name` as the store has it now.
pub fn world(project: &str, name: &str) -> Result<Option<World>, String> {
    let (_, store) = open()?;
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
    crate::mcp::install::write_atomically(&path, &text)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Record that an agent made `project`/`name`.
pub fn record(project: &str, name: &str) -> Result<(), String> {
    let Some(w) = world(project, name)? else {
        return Ok(());
    };
    let home = Home::from_env()?;
    let mut rows = lines(&home);
    rows.retain(|(id, p, n)| *id != w.id && !(p == project && n == name));
    rows.push((w.id, project.to_owned(), name.to_owned()));
    write(&home, &rows)
}

/// Whether an agent made the world `project`/`name` that exists now.
pub fn by_agent(project: &str, name: &str) -> Result<bool, String> {
    let Some(w) = world(project, name)? else {
        return Ok(false);
    };
    let home = Home::from_env()?;
    Ok(lines(&home)
        .iter()
        .any(|(id, p, n)| *id == w.id && p == project && n == name))
}

/// Forget `project`/`name` (removed).
pub fn forget(project: &str, name: &str) -> Result<(), String> {
    let home = Home::from_env()?;
    let mut rows = lines(&home);
    let before = rows.len();
    rows.retain(|(_, p, n)| !(p == project && n == name));
    if rows.len() == before {
        return Ok(());
    }
    write(&home, &rows)
}

/// Whether the person allowed agents to remove any world (`mcp_remove_any`).
pub fn remove_any_allowed() -> Result<bool, String> {
    let (_, store) = open()?;
    let s = binky_controllers::settings::Settings::read(store).map_err(|e| e.to_string())?;
    Ok(s.flag("mcp_remove_any"))
}

/// The repository of project `project` (its main checkout, or a worktree of one of its
/// worlds when that is gone), to run commands about it in.
pub fn project_dir(project: &str) -> Result<Option<PathBuf>, String> {
    let (_, store) = open()?;
    let worlds = store.read(store::worlds).map_err(|e| e.to_string())?;
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
    let (_, store) = open()?;
    let mut p: Vec<String> = store
        .read(store::worlds)
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|w| w.project)
        .collect();
    p.sort();
    p.dedup();
    Ok(p)
}
