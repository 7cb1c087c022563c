//! `binky remove NAME`: stop the world, release its ports, remove its worktree.

use binky_controllers::{dirty, store};

use super::context::{nudge, Ctx, Failure};
use super::wait::{self, Goal};
use super::{exit, WaitArgs};

/// `binky remove`.
pub async fn run(name: &str, force: bool, args: &WaitArgs) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let world = ctx.world(Some(name))?;
    super::context::refuse_shared(&world, "remove")?;
    // Refuse before writing anything: uncommitted work is never lost without --force.
    if let Some(wt) = ctx.store.read(|c| store::worktree(c, world.id))? {
        if !force {
            // The same check as the worktree controller's, asked before anything is written.
            let changes = async {
                dirty::changed_paths(&wt.path).await.map_err(|e| {
                    Failure::failed(format!(
                        "cannot check {} for uncommitted changes: {e}",
                        wt.path.display()
                    ))
                })
            };
            let users = dirty::users_uncommitted(&ctx.store, world.id, &wt, changes).await?;
            if !users.is_empty() {
                let mut shown = users
                    .iter()
                    .take(5)
                    .map(|l| format!("    {l}"))
                    .collect::<Vec<_>>()
                    .join("\n");
                if users.len() > 5 {
                    shown.push_str(&format!("\n    … and {} more", users.len() - 5));
                }
                return Err(Failure::failed(format!(
                    "worktree {} has uncommitted changes:\n{shown}\ncommit or stash them, or run `binky remove {name} --force` to discard them; nothing was changed",
                    wt.path.display()
                )));
            }
        }
    }
    let since = ctx.store.read(store::last_event_id)?;
    let generation = ctx.store.mark_deleted(world.id, force)?;
    nudge(&ctx, world.id).await?;
    if args.no_wait {
        println!("{name}: remove requested");
        return Ok(exit::OK);
    }
    let outcome = wait::wait(&ctx, &world, generation, Goal::Removed, args, since).await?;
    if let Some(code) = wait::report(name, "be removed", &outcome, args.timeout) {
        return Ok(code);
    }
    println!("{name} removed");
    // The last world that used the project's shared services takes them along.
    let shared = ctx
        .store
        .read(|c| store::shared_world(c, world.project_id))?
        .filter(|s| s.deleted);
    if let Some(shared) = shared {
        let since = ctx.store.read(store::last_event_id)?;
        nudge(&ctx, shared.id).await?;
        let outcome =
            wait::wait(&ctx, &shared, shared.generation, Goal::Removed, args, since).await?;
        let what = format!("the shared services of {}", world.project);
        if let Some(code) = wait::report(&what, "be removed", &outcome, args.timeout) {
            return Ok(code);
        }
        println!("{what} removed (no world uses them any more)");
    }
    Ok(exit::OK)
}
