//! `binky reload NAME`: stop and start a world's processes in place, on the same ports.

use binky_controllers::store;

use super::context::{nudge, Ctx, Failure};
use super::wait::{self, Goal};
use super::{exit, WaitArgs};

/// `binky reload`.
pub async fn run(
    name: Option<String>,
    group: Option<String>,
    args: &WaitArgs,
) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let world = ctx.world(name.as_deref())?;
    let since = ctx.store.read(store::last_event_id)?;
    // `--group G` is judged on G's process services and those they depend on alone.
    let mut judged: Vec<String> = Vec::new();
    let generation = match &group {
        None => crate::requests::reload(&ctx.store, &world, Some(args.timeout))?,
        // `--group G`: only the group's own process services (as binky 0.1.2).
        Some(g) => {
            let Some(members) = world.spec.groups.get(g) else {
                let known: Vec<&str> = world.spec.groups.keys().map(String::as_str).collect();
                return Err(Failure::usage(format!(
                    "world `{}` has no group `{g}`; groups: {}",
                    world.name,
                    if known.is_empty() {
                        "none ([groups] in binky.toml declares them)".to_owned()
                    } else {
                        known.join(", ")
                    }
                )));
            };
            // A shared service is every world's: `binky reload @shared` restarts it.
            let services: Vec<String> = members
                .iter()
                .filter(|s| {
                    world
                        .spec
                        .services
                        .get(*s)
                        .is_some_and(|svc| svc.process().is_some())
                        && world.runs(s)
                })
                .cloned()
                .collect();
            if services.is_empty() {
                return Err(Failure::usage(format!(
                    "group `{g}` of world `{}` has no process service to restart (its members: {}); `binky reload {}` restarts the whole world (`binky reload @shared` the project's shared services)",
                    world.name,
                    members.join(", "),
                    world.name
                )));
            }
            // (Those the world runs: a world brought up with another group has not the rest.)
            let runs = world.spec.selected(world.group.as_deref());
            judged = world
                .spec
                .selected(Some(g))
                .into_iter()
                .filter(|s| runs.contains(s) && world.spec.services[s].process().is_some())
                .collect();
            ctx.store.restart_services(
                world.id,
                &services,
                &format!("binky reload --group {g}"),
                Some(args.timeout),
            )?
        }
    };
    nudge(&ctx, world.id).await?;
    if args.no_wait {
        println!("{}: reload requested", world.name);
        return Ok(exit::OK);
    }
    let goal = match group {
        None => Goal::Ready,
        Some(_) => Goal::Services(&judged),
    };
    let outcome = wait::wait(&ctx, &world, generation, goal, args, since).await?;
    wait::report(&world.name, "come up", &outcome, args.timeout)?;
    println!("{} reloaded", world.name);
    Ok(exit::OK)
}
