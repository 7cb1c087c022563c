//! `binky down NAME`: stop a world's processes, keeping its files and ports.

use binky_controllers::store;

use super::context::{nudge, Ctx, Failure};
use super::wait::{self, Goal};
use super::{exit, WaitArgs};

/// `binky down`.
pub async fn run(name: Option<String>, args: &WaitArgs) -> Result<i32, Failure> {
    let started = std::time::Instant::now();
    let ctx = Ctx::open()?;
    let world = ctx.world(name.as_deref())?;
    let since = ctx.store.read(store::last_event_id)?;
    let generation = crate::requests::down(&ctx.store, &world)?;
    nudge(&ctx, world.id).await?;
    if args.no_wait {
        println!("{}: down requested", world.name);
        return Ok(exit::OK);
    }
    let outcome = wait::wait(&ctx, &world, generation, Goal::Stopped, args, since).await?;
    wait::report(&world.name, "stop", &outcome, args.timeout)?;
    let ports = ctx.store.read(|c| store::ports(c, world.id))?;
    let kept: Vec<String> = ports
        .iter()
        .map(|p| {
            if p.label.is_empty() {
                format!("{}={}", p.service, p.port)
            } else {
                format!("{}.{}={}", p.service, p.label, p.port)
            }
        })
        .collect();
    println!(
        "{} is down ({})",
        world.name,
        binky_controllers::took::took(started.elapsed())
    );
    if !kept.is_empty() {
        println!("  ports kept: {}", kept.join(" "));
    }
    Ok(exit::OK)
}
