//! Waiting for the daemon to converge a world, with progress from the world's events.

use std::time::{Duration, Instant};

use binky_controllers::hold::Hold;
use binky_controllers::phase;
use binky_controllers::registry::Kind;
use binky_controllers::store::{self, CondStatus, ConditionRow, World, WorldId};

use super::context::{Ctx, Failure, Kind as FailureKind};
use super::{exit, WaitArgs};

/// What a command waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Goal<'a> {
    /// Every selected service ready.
    Ready,
    /// These services ready (their instances, and the shared ones the world uses), judged
    /// on their own: another service that fails does not fail the wait (`binky reload
    /// --group`).
    Services(&'a [String]),
    /// Every process stopped.
    Stopped,
    /// The world gone.
    Removed,
}

/// How a wait ended.
pub enum Outcome {
    /// Reached.
    Done(Option<Box<World>>),
    /// A condition needs a person.
    Failed(String),
    /// Out of time.
    Pending(String),
    /// Held until a person approves its new commands (said as `Pending` is, exit 75).
    Held(String),
}

/// A one-line-per-item summary of conditions that do not hold.
pub fn not_ready(conds: &[ConditionRow]) -> String {
    conds
        .iter()
        .filter(|c| c.status != CondStatus::True)
        .map(|c| format!("{}: {}", c.type_, c.message))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Wait until `goal` holds for world `id` at `generation` (or later).
pub async fn wait(
    ctx: &Ctx,
    world: &World,
    generation: i64,
    goal: Goal<'_>,
    args: &WaitArgs,
    since_event: i64,
) -> Result<Outcome, Failure> {
    let id: WorldId = world.id;
    let started = Instant::now();
    let mut last_event = since_event;
    // What the project's shared world does for this world (it starts, stops or removes the
    // shared services it uses) is shown with the world's own events.
    let shared = !world.is_shared() && !binky_controllers::shared::declared(&world.spec).is_empty();
    let events = Events {
        ctx,
        world,
        shared,
        quiet: args.quiet,
    };
    // Linked files of the world found changed in place before: said at every command that
    // waits on it (`up`, `down`, `remove`, …); what its new look finds comes as events.
    let standing = ctx.store.read(|c| store::shared_edits(c, id))?;
    for said in super::status::shared_edits(&standing, &world.config_rel) {
        eprintln!("  warning: {}", said.replace('\n', "\n    "));
    }
    loop {
        events.show(&mut last_event)?;
        let current = ctx.store.read(|c| store::world(c, id))?;
        let Some(current) = current else {
            // What the last finalizers said just before the world went.
            events.show(&mut last_event)?;
            return Ok(if goal == Goal::Removed {
                Outcome::Done(None)
            } else {
                Outcome::Failed(format!("world `{}` was removed meanwhile", world.name))
            });
        };
        let gens = ctx.store.read(|c| store::observed_generations(c, id))?;
        let conds = ctx.store.read(|c| store::conditions(c, id))?;
        if let Some(outcome) = decide(ctx, current, goal, &gens, &conds, generation)? {
            // What the controllers said on the way there (a reconcile that converged wrote
            // its events before its generation).
            events.show(&mut last_event)?;
            return Ok(outcome);
        }
        if started.elapsed() >= args.timeout {
            let mut why = not_ready(&conds);
            if why.is_empty() {
                why = "the daemon has not reconciled it yet (see `binky daemon status`)".into();
            }
            return Ok(Outcome::Pending(why));
        }
        // Fast at first (a world is often ready in tens of ms), gentler later.
        let pause = if started.elapsed() < Duration::from_secs(2) {
            5
        } else {
            100
        };
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// The events a wait prints: the world's own and, when it uses shared services, the
/// shared world's.
struct Events<'a> {
    ctx: &'a Ctx,
    world: &'a World,
    shared: bool,
    quiet: bool,
}

impl Events<'_> {
    /// Print the world's events since the last call (events outlive a removed world).
    fn show(&self, last_event: &mut i64) -> Result<(), Failure> {
        if self.quiet {
            return Ok(());
        }
        let (ctx, world) = (self.ctx, self.world);
        let mut evs: Vec<(store::EventRow, bool)> = ctx
            .store
            .read(|c| store::events(c, &world.project, &world.name, *last_event, 1000))?
            .into_iter()
            .map(|e| (e, false))
            .collect();
        if self.shared {
            let theirs = ctx.store.read(|c| {
                store::events(
                    c,
                    &world.project,
                    binky_controllers::shared::WORLD,
                    *last_event,
                    1000,
                )
            })?;
            evs.extend(theirs.into_iter().map(|e| (e, true)));
            evs.sort_by_key(|(e, _)| e.id);
        }
        for (e, theirs) in evs {
            *last_event = e.id;
            let requests = matches!(
                e.kind.as_str(),
                "up" | "down" | "reload" | "remove" | "created"
            );
            if requests || (theirs && e.kind == "config") {
                continue;
            }
            let who = if theirs { "shared: " } else { "" };
            eprintln!("  {who}{}", e.message.replace('\n', "\n    "));
        }
        Ok(())
    }
}

/// Whether the wait for `goal` is over, and how: stalled, held for approval, or reached;
/// `None` while it goes on.
fn decide(
    ctx: &Ctx,
    current: World,
    goal: Goal<'_>,
    gens: &std::collections::BTreeMap<String, i64>,
    conds: &[ConditionRow],
    generation: i64,
) -> Result<Option<Outcome>, Failure> {
    let stalled = match goal {
        Goal::Services(_) => phase::stalled_but_services(conds, generation),
        _ => phase::stalled(conds, generation),
    };
    if let Some(stalled) = stalled {
        return Ok(Some(Outcome::Failed(stalled.message.clone())));
    }
    // A world held for approval waits for a person: say so now (exit 75), do not sit
    // out the timeout.
    if matches!(goal, Goal::Ready | Goal::Services(_)) {
        if let Some((Hold::AwaitingApproval, held)) = Hold::of(conds) {
            // The condition may be older than an approval the daemon has not seen yet
            // (`binky approve`, then `binky wait` at once): ask the store, not only it.
            // The generation is checked first: the store is asked only when it matters.
            if held.generation >= generation
                && matches!(
                    binky_controllers::hold::held(&ctx.store, &current)?,
                    Some((Hold::AwaitingApproval, _))
                )
            {
                return Ok(Some(Outcome::Held(held.message.clone())));
            }
        }
    }
    let reached = match goal {
        Goal::Ready => phase::converged(gens, conds, generation),
        Goal::Services(names) => {
            match services_of(ctx, &current, names, gens, conds, generation)? {
                phase::Services::Ready => true,
                phase::Services::Failed(why) => return Ok(Some(Outcome::Failed(why))),
                phase::Services::Starting => false,
            }
        }
        Goal::Stopped => stopped(ctx, current.id, gens, conds, generation)?,
        Goal::Removed => only_slices_left(ctx, &current)?,
    };
    Ok(reached.then(|| Outcome::Done(Some(Box::new(current)))))
}

/// Whether world `world`, being removed, has nothing left but its slices to drop: its
/// processes, ports, routes, worktree and branch are gone, and no name of it can be given
/// to a new world before the drop is done (`binky up` of the name waits for it). A drop
/// takes a server round trip or several (PostgreSQL's `DROP DATABASE` about a second on a
/// server that syncs to disk): `binky remove` leaves it to the daemon, as it leaves the
/// worktree's files to the trash.
fn only_slices_left(ctx: &Ctx, world: &World) -> Result<bool, Failure> {
    if !world.deleted {
        return Ok(false);
    }
    let left = ctx.store.read(|c| store::finalizers(c, world.id))?;
    Ok(left.iter().all(|f| f == Kind::Slice.name()) && !left.is_empty())
}

/// Whether world `id` is stopped at `generation`: every process gone, and the slice
/// controller has seen the world down too (a slice's own server, a world's redis-server, is
/// stopped and its snapshot written).
fn stopped(
    ctx: &Ctx,
    id: WorldId,
    gens: &std::collections::BTreeMap<String, i64>,
    conds: &[ConditionRow],
    generation: i64,
) -> Result<bool, Failure> {
    // The worktree controller too: it looks at the world's linked files at each generation,
    // and what it finds is said before `down` returns. A worktree controller that cannot
    // converge (its condition says why) does not hold `down` up.
    let worktree_seen = gens.get(Kind::Worktree.name()).copied().unwrap_or(0) >= generation
        || conds
            .iter()
            .any(|c| c.type_ == Kind::Worktree.condition() && c.status != store::CondStatus::True);
    Ok(
        gens.get(Kind::Process.name()).copied().unwrap_or(0) >= generation
            && worktree_seen
            && ctx
                .store
                .read(|c| store::processes(c, id))?
                .iter()
                .all(|p| p.pid.is_none())
            && conds.iter().any(|c| {
                c.type_ == Kind::Slice.condition()
                    && c.status == store::CondStatus::True
                    && c.generation >= generation
            }),
    )
}

/// Where the services `names` of `world` stand at `generation`, on their own: each
/// instance's process row (a shared service's in the project's shared world).
fn services_of(
    ctx: &Ctx,
    world: &World,
    names: &[String],
    gens: &std::collections::BTreeMap<String, i64>,
    conds: &[ConditionRow],
    generation: i64,
) -> Result<phase::Services, Failure> {
    let own = ctx.store.read(|c| store::processes(c, world.id))?;
    let shared = if names.iter().any(|n| !world.runs(n)) {
        match ctx
            .store
            .read(|c| store::shared_world(c, world.project_id))?
        {
            Some(s) => ctx.store.read(|c| store::processes(c, s.id))?,
            None => Vec::new(),
        }
    } else {
        Vec::new()
    };
    let mut instances = Vec::new();
    for name in names {
        let (rows, theirs) = if world.runs(name) {
            (&own, false)
        } else {
            (&shared, true)
        };
        for instance in world.spec.instances(name) {
            instances.push((rows.iter().find(|r| r.service == instance), theirs));
        }
    }
    Ok(phase::services(gens, conds, generation, &instances))
}

/// An outcome that is not done, as the command's failure: failed (exit 1), or still
/// pending or held for a person (75, the held one of kind `Held`).
pub fn report(
    world: &str,
    verb: &str,
    outcome: &Outcome,
    timeout: Duration,
) -> Result<(), Failure> {
    match outcome {
        Outcome::Done(_) => Ok(()),
        Outcome::Failed(msg) => Err(Failure::failed(format!("{world} failed to {verb}: {msg}"))),
        Outcome::Pending(msg) | Outcome::Held(msg) => {
            let pending = Failure::pending(format!(
                "{world} is still not {}after {}s (the daemon carries on; `binky status {world}` shows progress):\n{msg}",
                match verb {
                    "come up" => "up ",
                    "stop" => "stopped ",
                    _ => "done ",
                },
                timeout.as_secs()
            ));
            match outcome {
                Outcome::Held(_) => Err(pending.kind(FailureKind::Held)),
                _ => Err(pending),
            }
        }
    }
}

/// `binky wait NAME`: until the world is ready (exit 0), held for a person or still not
/// ready when the timeout runs out (75), or failed (1). A world that is down is not waited
/// for: it would never be ready.
/// With `json`, a ready world's status (as `binky status NAME --json`) is printed.
pub async fn run(name: Option<String>, json: bool, args: &WaitArgs) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    let world = ctx.world(name.as_deref())?;
    if world.desired == store::DesiredState::Stopped {
        return Err(Failure::failed(format!(
            "world `{}` is down (stopped on purpose), so it will not become ready; `binky up {}` starts it",
            world.name, world.name
        ))
        .kind(FailureKind::Stopped));
    }
    let since = ctx.store.read(store::last_event_id)?;
    let outcome = wait(&ctx, &world, world.generation, Goal::Ready, args, since).await?;
    report(&world.name, "come up", &outcome, args.timeout)?;
    if json {
        let now = match outcome {
            Outcome::Done(Some(w)) => *w,
            _ => world,
        };
        let v = crate::view::world(&ctx.store, &now)?;
        super::print_json(&v);
    } else if !args.quiet {
        println!("{} is ready", world.name);
    }
    Ok(exit::OK)
}
