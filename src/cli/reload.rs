//! `binky reload NAME`: stop and start a world's processes in place, on the same ports.

use binky_controllers::store;

use super::context::{nudge, Ctx, Failure};
use super::wait::{self, Goal};
use super::{exit, WaitArgs};

/// `binky reload`.
pub async fn run(name: Option<String>, args: &WaitArgs) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let world = ctx.world(name.as_deref())?;
    let since = ctx.store.read(store::last_event_id)?;
    let generation = ctx.store.reload_world(world.id)?;
    nudge(&ctx, world.id).await?;
    if args.no_wait {
        println!("{}: reload requested", world.name);
        return Ok(exit::OK);
    }
    let outcome = wait::wait(&ctx, &world, generation, Goal::Ready, args, since).await?;
    if let Some(code) = wait::report(&world.name, "come up", &outcome, args.timeout) {
        return Ok(code);
    }
    println!("{} reloaded", world.name);
    Ok(exit::OK)
}
