//! `binky remove NAME`: stop the world, release its ports, remove its worktree.

use binky_controllers::store;

use super::context::{nudge, Ctx, Failure};
use super::wait::{self, Goal};
use super::{exit, WaitArgs};

/// `binky remove`.
pub async fn run(name: &str, force: bool, args: &WaitArgs) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let world = ctx.world(Some(name))?;
    // Refused before anything is written: uncommitted work is never lost without --force.
    let since = ctx.store.read(store::last_event_id)?;
    let generation = crate::requests::remove(&ctx.store, &world, force).await?;
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
