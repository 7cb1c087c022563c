//! `binky events NAME`: what happened to a world, also once it is removed.

use std::path::Path;

use binky_controllers::store::{self, Store};

use super::context::{world_named, Checkout, Ctx, Failure};
use super::exit;

/// Local time of a store timestamp, `2026-12-02 16:12:39`.
pub fn clock(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(t)
        .to_string()
        .replace('T', " ")
        .trim_end_matches('Z')
        .to_owned()
}

/// The project of a removed world `name` whose events the log keeps: inside a repository,
/// its project's (when it had one); outside any, the one project that had it. `None` when
/// no such removed world is there to show (a live one elsewhere is not this command's).
fn removed_world_project(
    store: &Store,
    live: &[store::World],
    cwd: &Path,
    name: &str,
) -> Result<Option<String>, Failure> {
    let had: Vec<String> = store
        .read(|c| store::projects_with_world_events(c, name))?
        .into_iter()
        .filter(|p| !live.iter().any(|w| &w.project == p && w.name == name))
        .collect();
    // Inside a repository, only its projects': never another repository's world of the name
    // (as every command that names a world). A repository has had several projects when its
    // `[project] name` changed: the world of the name made there last is its history.
    if let Ok(co) = Checkout::discover(cwd) {
        let here: Vec<String> = store
            .read(store::projects)?
            .into_iter()
            .filter(|p| p.repo_root == co.repo_root)
            .map(|p| p.name)
            .collect();
        return Ok(had.into_iter().find(|p| here.contains(p)));
    }
    match had.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one.clone())),
        many => Err(Failure::usage(format!(
            "a world `{name}` was removed in several projects ({}); run the command inside the project's repository",
            many.join(", ")
        ))),
    }
}

/// A world's history as `binky events` (and MCP `events`) show it.
pub struct History {
    /// The world's project.
    pub project: String,
    /// The world.
    pub world: String,
    /// Its newest events, oldest first.
    pub events: Vec<store::EventRow>,
    /// The world is removed: these are the last world's of the name.
    pub removed: bool,
    /// Earlier worlds of the name, removed before this one was made (not shown).
    pub earlier: u64,
}

/// The newest `lines` events of world `name` as seen from `cwd`: a live world's, else the
/// last removed one's of the name (its history outlives it).
pub fn history(store: &Store, cwd: &Path, name: &str, lines: usize) -> Result<History, Failure> {
    let (project, world, removed) = match world_named(store, cwd, name) {
        Ok(w) => (w.project, w.name, false),
        Err(e) => match removed_world_project(store, &store.read(store::worlds)?, cwd, name)? {
            Some(project) => (project, name.to_owned(), true),
            None => return Err(e),
        },
    };
    // One read: the events and the count of lives are of one state.
    let (events, lives) = store.read(|c| {
        Ok((
            store::events(c, &project, &world, 0, lines)?,
            store::world_lives(c, &project, &world)?,
        ))
    })?;
    Ok(History {
        project,
        world,
        events,
        removed,
        earlier: (lives as u64).saturating_sub(1),
    })
}

/// `binky events`.
pub fn run(name: Option<String>, lines: usize, json: bool) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let name = match name {
        Some(n) => n,
        // Without a name: the world whose worktree this is.
        None => ctx.world(None)?.name,
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let History {
        project,
        world,
        events: evs,
        removed,
        earlier,
    } = history(&ctx.store, &cwd, &name, lines)?;
    // A process of a world reads its own project's history (and those a person allowed).
    crate::reach::refuse_for_a_world(&ctx.store, &project)?;
    if removed {
        let when = evs
            .iter()
            .rev()
            .find(|e| e.kind == "removed")
            .map(|e| format!(" at {}", clock(e.at)))
            .unwrap_or_default();
        eprintln!(
            "binky: world `{world}` was removed{when}; these are its events (`binky up {world}` makes a new world of the name)"
        );
    }
    if earlier > 0 {
        eprintln!(
            "binky: note: {earlier} earlier world{} named `{world}` {} removed before this one was made; {} events are not shown",
            if earlier == 1 { "" } else { "s" },
            if earlier == 1 { "was" } else { "were" },
            if earlier == 1 { "its" } else { "their" },
        );
    }
    if json {
        super::print_json(&evs);
        return Ok(exit::OK);
    }
    for e in evs {
        println!(
            "{}  {:<16} {}",
            clock(e.at),
            e.kind,
            e.message
                .replace('\n', "\n                                       ")
        );
    }
    Ok(exit::OK)
}
