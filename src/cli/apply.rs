//! `binky apply [NAME|--all] [--dry-run]`: re-read the world's `binky.toml` now, print the
//! plan, and apply it (the daemon does the same by itself when the file is saved).

use binky_controllers::store::{self, DesiredState};

use super::context::{nudge, Ctx, Failure};
use super::wait::{self, Goal};
use super::{exit, WaitArgs};
use crate::apply::{self, Outcome};

/// `binky apply`.
pub async fn run(
    name: Option<String>,
    all: bool,
    dry_run: bool,
    json: bool,
    args: &WaitArgs,
) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    // A project's shared world has no binky.toml of its own: its users' files define it.
    let worlds = if all {
        ctx.store
            .read(store::worlds)?
            .into_iter()
            .filter(|w| !w.deleted && !w.is_shared())
            .collect()
    } else {
        let world = ctx.world(name.as_deref())?;
        super::context::refuse_shared(&world, "apply")?;
        vec![world]
    };
    let mut code = exit::OK;
    let mut report = Vec::new();
    for world in worlds {
        let since = ctx.store.read(store::last_event_id)?;
        let outcome = apply::apply(&ctx.store, &world, dry_run)?;
        let (state, plan, error) = match &outcome {
            Outcome::Unchanged => ("unchanged", None, None),
            Outcome::Changed { plan, .. } => (
                if dry_run { "would change" } else { "changed" },
                Some(plan.clone()),
                None,
            ),
            Outcome::Invalid(msg) => ("invalid", None, Some(msg.clone())),
        };
        if json {
            report.push(serde_json::json!({
                "world": world.name, "state": state, "plan": plan, "error": error,
            }));
        } else {
            match &outcome {
                Outcome::Unchanged => println!(
                    "{}: {} unchanged; nothing to do",
                    world.name,
                    world.config_path.display()
                ),
                Outcome::Changed { plan, .. } => {
                    println!(
                        "{}: {} {}:",
                        world.name,
                        if dry_run { "would apply" } else { "applying" },
                        world.config_path.display()
                    );
                    for line in plan.lines() {
                        println!("  {line}");
                    }
                }
                Outcome::Invalid(msg) => {
                    eprintln!("binky: {}: {msg}", world.name);
                    eprintln!("  nothing changed: the world keeps running its last good config; fix the file and save it (or run `binky apply {}`)", world.name);
                }
            }
        }
        match outcome {
            Outcome::Invalid(_) => code = exit::USAGE,
            Outcome::Changed { generation, .. } if !dry_run => {
                nudge(&ctx, world.id).await?;
                if args.no_wait || world.desired != DesiredState::Running {
                    continue;
                }
                let outcome =
                    wait::wait(&ctx, &world, generation, Goal::Ready, args, since).await?;
                if let Err(f) = wait::report(&world.name, "converge", &outcome, args.timeout) {
                    // The other worlds are applied still: said here, not ending the command.
                    crate::failure::report::print(&f);
                    code = code.max(f.code);
                } else if !json {
                    println!("{}: applied", world.name);
                }
            }
            _ => {}
        }
    }
    if json {
        super::print_json(&report);
    }
    Ok(code)
}
