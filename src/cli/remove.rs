//! `binky remove NAME`: stop the world, release its ports, remove its worktree.

use binky_controllers::store;

use super::context::{nudge, Ctx, Failure, Kind};
use super::wait::{self, Goal};
use super::{exit, WaitArgs};

/// `binky remove`.
pub async fn run(name: &str, force: bool, args: &WaitArgs) -> Result<i32, Failure> {
    let started = std::time::Instant::now();
    let ctx = Ctx::open()?;
    let world = ctx.world(Some(name))?;
    refuse_unless_theirs(&ctx, &world)?;
    // Refused before anything is written: uncommitted work is never lost without --force.
    let since = ctx.store.read(store::last_event_id)?;
    let generation = crate::requests::remove(&ctx.store, &world, force).await?;
    nudge(&ctx, world.id).await?;
    if args.no_wait {
        println!("{name}: remove requested");
        return Ok(exit::OK);
    }
    let outcome = wait::wait(&ctx, &world, generation, Goal::Removed, args, since).await?;
    wait::report(name, "be removed", &outcome, args.timeout)?;
    println!(
        "{name} removed in {}{}",
        binky_controllers::took::took(started.elapsed()),
        dropping(&ctx, &outcome)?
    );
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
        wait::report(&what, "be removed", &outcome, args.timeout)?;
        println!("{what} removed (no world uses them any more)");
    }
    Ok(exit::OK)
}

/// What of a removed world is still being dropped by the daemon (its slices), as the end
/// of `binky remove`'s last line: `; dropping bk_acme_w_db in the background`, and why
/// it has not gone yet when a try failed.
fn dropping(ctx: &Ctx, outcome: &wait::Outcome) -> Result<String, Failure> {
    let wait::Outcome::Done(Some(world)) = outcome else {
        return Ok(String::new());
    };
    let slices: Vec<String> = ctx
        .store
        .read(|c| store::slices(c, world.id))?
        .into_iter()
        .map(|s| s.name)
        .collect();
    if slices.is_empty() {
        return Ok(String::new());
    }
    let trouble = ctx
        .store
        .read(|c| store::conditions(c, world.id))?
        .into_iter()
        .find(|c| {
            c.status != store::CondStatus::True
                && c.controller == binky_controllers::registry::Kind::Slice.name()
        })
        .map(|c| {
            format!(
                " (not yet: {}; binky keeps trying, `binky status` says how it goes)",
                c.message
            )
        })
        .unwrap_or_default();
    Ok(format!(
        "; dropping {} in the background{trouble}",
        slices.join(", ")
    ))
}

/// From a process binky started (`binky exec` of an agent's MCP call, a service), `remove`
/// takes only what `binky mcp`'s own `remove` would: a world an agent made, or any once the
/// person set `mcp_remove_any`. A person's world is theirs to remove.
fn refuse_unless_theirs(ctx: &Ctx, world: &store::World) -> Result<(), Failure> {
    let Some(why) = crate::person::started_by_binky() else {
        return Ok(());
    };
    let made_by_agent = crate::agent_made::by_agent(&ctx.store, world).map_err(Failure::failed)?;
    if made_by_agent
        || crate::agent_made::remove_any_allowed(&ctx.store).map_err(Failure::failed)?
    {
        return Ok(());
    }
    let name = &world.name;
    Err(Failure::failed(format!(
        "removing world `{name}` (its worktree and data) is a person's decision: no agent made it (through `binky mcp` or a process binky started), and this was asked by a process binky started ({why}); ask a person to run `binky remove {name}` (they may let agents remove any world: `binky settings mcp_remove_any=true`); `binky down {name}` stops it and keeps everything"
    ))
    .kind(Kind::PersonOnly))
}
