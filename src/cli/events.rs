//! `binky events NAME`: what happened to a world, also once it is removed.

use binky_controllers::store;

use super::context::{Checkout, Ctx, Failure};
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

/// The project of a removed world `name` whose events the log keeps: the project of the
/// checkout this runs in when it had one, else the one project that had it. `None` when no
/// removed world has the name (a live one elsewhere is not this command's to show).
fn removed_world_project(ctx: &Ctx, name: &str) -> Result<Option<String>, Failure> {
    let live = ctx.store.read(store::worlds)?;
    let had: Vec<String> = ctx
        .store
        .read(|c| store::projects_with_world_events(c, name))?
        .into_iter()
        .filter(|p| !live.iter().any(|w| &w.project == p && w.name == name))
        .collect();
    let cwd = std::env::current_dir().unwrap_or_default();
    let here = Checkout::discover(&cwd).ok().and_then(|co| {
        let projects = ctx.store.read(store::projects).ok()?;
        projects
            .into_iter()
            .find(|p| p.repo_root == co.repo_root)
            .map(|p| p.name)
    });
    if let Some(here) = here.filter(|p| had.contains(p)) {
        return Ok(Some(here));
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

/// `binky events`.
pub fn run(name: Option<String>, lines: usize, json: bool) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    // A live world, else the last removed one of the name: its history outlives it.
    let (project, world, removed) = match (ctx.world(name.as_deref()), name) {
        (Ok(w), _) => (w.project, w.name, false),
        (Err(e), Some(name)) => match removed_world_project(&ctx, &name)? {
            Some(project) => (project, name, true),
            None => return Err(e),
        },
        (Err(e), None) => return Err(e),
    };
    let evs = ctx
        .store
        .read(|c| store::events(c, &project, &world, 0, lines))?;
    // Earlier worlds of the name (removed before this one was made) are not mixed in: say so.
    let earlier = ctx
        .store
        .read(|c| store::world_lives(c, &project, &world))?
        .saturating_sub(1);
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
        println!("{}", serde_json::to_string_pretty(&evs).unwrap_or_default());
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
