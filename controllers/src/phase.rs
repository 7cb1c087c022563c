//! Where a world stands, read from its observed state: the one answer `binky status`, `binky
//! up`'s wait and every other reader give to "is this world ready?".

use std::collections::BTreeMap;

use crate::hold::Hold;
use crate::registry::{Kind, Reporter};
use crate::store::{CondStatus, ConditionRow, DesiredState, ProcessRow, World};

/// A world's phase, as `binky status` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Marked deleted; its controllers are tearing it down.
    Removing,
    /// `binky down`, and a process still runs.
    Stopping,
    /// `binky down`, and nothing runs.
    Stopped,
    /// A condition says a person has to act.
    Failed,
    /// Held at the gate behind other worlds or a resident limit.
    Queued,
    /// Held at the gate until a person approves its commands.
    AwaitingApproval,
    /// Stopped by the gate to make room; it starts again by itself when there is room.
    Cooled,
    /// Every controller has seen its generation and every condition holds.
    Ready,
    /// On its way.
    Starting,
}

impl Phase {
    /// The word status shows (and `--json` gives).
    pub const fn as_str(self) -> &'static str {
        match self {
            Phase::Removing => "removing",
            Phase::Stopping => "stopping",
            Phase::Stopped => "stopped",
            Phase::Failed => "failed",
            Phase::Queued => "queued",
            Phase::AwaitingApproval => "approval",
            Phase::Cooled => "cooled",
            Phase::Ready => "ready",
            Phase::Starting => "starting",
        }
    }
}

/// Has every controller seen `generation`, and does each one's condition hold as reported
/// for that generation or a later one? That is what "the world is up" means.
pub fn converged(gens: &BTreeMap<String, i64>, conds: &[ConditionRow], generation: i64) -> bool {
    converged_but(gens, conds, generation, None)
}

/// [`converged`] for every controller but `except`, whose part the caller judges itself.
fn converged_but(
    gens: &BTreeMap<String, i64>,
    conds: &[ConditionRow],
    generation: i64,
    except: Option<Kind>,
) -> bool {
    Kind::ALL.iter().filter(|k| Some(**k) != except).all(|k| {
        gens.get(k.name()).copied().unwrap_or(0) >= generation
            && conds.iter().any(|c| {
                c.type_ == k.condition()
                    && c.status == CondStatus::True
                    && c.generation >= generation
            })
    })
}

/// The first condition that says a person has to act, reported for `generation` or later:
/// what makes a wait for the world give up.
pub fn stalled(conds: &[ConditionRow], generation: i64) -> Option<&ConditionRow> {
    conds
        .iter()
        .find(|c| needs_a_person(c) && c.generation >= generation)
}

/// Where some of a world's services stand, judged on their own: the instances of the
/// services a command waits for (`binky reload --group G`: G's process services and those
/// they depend on), read from the process rows, each with whether it is the world's own
/// (stepped at the world's generations) or a shared service's (the shared world's).
#[derive(Debug, PartialEq, Eq)]
pub enum Services {
    /// Every controller but the process controller has converged at the generation, and
    /// each of the instances has been stepped at it (so restarted, when the command asked
    /// for it) and is ready.
    Ready,
    /// One of them needs a person: the message of its problem.
    Failed(String),
    /// On their way.
    Starting,
}

/// Judge `instances` (`None` where an instance has no row yet) at `generation`; the
/// process controller's condition, about every service of the world, is left out.
pub fn services(
    gens: &BTreeMap<String, i64>,
    conds: &[ConditionRow],
    generation: i64,
    instances: &[(Option<&ProcessRow>, bool)],
) -> Services {
    // Seen at the generation: a world's own row once the controller finished a step of it
    // at `generation` (before that, a problem or a readiness may be the old run's); a shared
    // service's row is its own world's, judged as it stands.
    let seen = |r: &ProcessRow, shared: bool| shared || r.stepped_generation >= generation;
    let problem = instances.iter().find_map(|(r, shared)| {
        r.filter(|r| seen(r, *shared))
            .and_then(|r| r.problem.clone())
    });
    if let Some(p) = problem {
        return Services::Failed(p);
    }
    let processes_seen = gens.get(Kind::Process.name()).copied().unwrap_or(0) >= generation;
    let all_ready = instances
        .iter()
        .all(|(r, shared)| r.is_some_and(|r| seen(r, *shared) && r.is_ready()));
    if processes_seen && all_ready && converged_but(gens, conds, generation, Some(Kind::Process)) {
        Services::Ready
    } else {
        Services::Starting
    }
}

/// [`stalled`], but for the process controller's condition (judged per service by
/// [`services`]).
pub fn stalled_but_services(conds: &[ConditionRow], generation: i64) -> Option<&ConditionRow> {
    conds.iter().find(|c| {
        needs_a_person(c) && c.generation >= generation && c.type_ != Kind::Process.condition()
    })
}

fn needs_a_person(c: &ConditionRow) -> bool {
    c.stalled && c.status != CondStatus::True
}

/// Where `world` stands.
pub fn phase(
    world: &World,
    gens: &BTreeMap<String, i64>,
    conds: &[ConditionRow],
    procs: &[ProcessRow],
) -> Phase {
    if world.deleted {
        return Phase::Removing;
    }
    if world.desired == DesiredState::Stopped {
        return if procs.iter().any(|p| p.pid.is_some()) {
            Phase::Stopping
        } else {
            Phase::Stopped
        };
    }
    // An invalid edit of binky.toml does not fail a world: it runs its last good config
    // (the condition is still shown).
    if conds
        .iter()
        .any(|c| needs_a_person(c) && c.type_ != Reporter::Config.condition())
    {
        return Phase::Failed;
    }
    match Hold::of(conds) {
        Some((Hold::Queued, _)) => Phase::Queued,
        Some((Hold::AwaitingApproval, _)) => Phase::AwaitingApproval,
        Some((Hold::Cooled, _)) => Phase::Cooled,
        None if converged(gens, conds, world.generation) => Phase::Ready,
        None => Phase::Starting,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ProcState;

    fn cond(kind: Kind, ok: bool, generation: i64) -> ConditionRow {
        ConditionRow {
            type_: kind.condition().into(),
            controller: kind.name().into(),
            status: if ok {
                CondStatus::True
            } else {
                CondStatus::False
            },
            reason: if ok { "Ok" } else { "CrashLoop" }.into(),
            message: if ok { "ok" } else { "other keeps exiting" }.into(),
            stalled: !ok,
            generation,
            last_transition: 0,
        }
    }

    fn row(service: &str, ready: bool, stepped: i64, problem: Option<&str>) -> ProcessRow {
        ProcessRow {
            service: service.into(),
            state: if ready {
                ProcState::Running
            } else {
                ProcState::Backoff
            },
            pid: None,
            start_time: None,
            spawn_token: None,
            healthy: ready,
            restarts: 0,
            failures: 0,
            last_exit: None,
            last_exit_at: None,
            started_at: None,
            ready_at: None,
            next_start_at: None,
            spec_hash: None,
            setup_hash: None,
            // Stamped before the step: not what says the step is over.
            up_generation: 2,
            failed_generation: None,
            message: String::new(),
            problem: problem.map(str::to_owned),
            stepped_generation: stepped,
            restart_key: None,
        }
    }

    /// Every controller has seen generation 2; the process controller's condition says a
    /// service the caller does not wait for keeps failing.
    fn world_at_2() -> (BTreeMap<String, i64>, Vec<ConditionRow>) {
        let gens = Kind::ALL.iter().map(|k| (k.name().to_owned(), 2)).collect();
        let conds = Kind::ALL
            .iter()
            .map(|k| cond(*k, *k != Kind::Process, 2))
            .collect();
        (gens, conds)
    }

    #[test]
    fn services_are_judged_on_their_own_rows_as_stepped_at_the_generation() {
        let (gens, conds) = world_at_2();
        // Another service's crash loop fails the world, not these services.
        assert!(!converged(&gens, &conds, 2));
        assert!(stalled_but_services(&conds, 2).is_none());
        let api = row("api", true, 2, None);
        assert_eq!(
            services(&gens, &conds, 2, &[(Some(&api), false)]),
            Services::Ready
        );
        // Ready, but from before the generation: the old run, not yet restarted.
        let old = row("api", true, 1, None);
        assert_eq!(
            services(&gens, &conds, 2, &[(Some(&old), false)]),
            Services::Starting
        );
        // A shared service's row is its own world's, judged as it stands.
        assert_eq!(
            services(&gens, &conds, 2, &[(Some(&old), true)]),
            Services::Ready
        );
        // No row yet; the process controller has not seen the generation.
        assert_eq!(
            services(&gens, &conds, 2, &[(None, false)]),
            Services::Starting
        );
        let mut behind = gens.clone();
        behind.insert(Kind::Process.name().into(), 1);
        assert_eq!(
            services(&behind, &conds, 2, &[(Some(&api), false)]),
            Services::Starting
        );
        // A problem of one of them fails the wait; an old problem does not.
        let failing = row("db", false, 2, Some("db keeps exiting"));
        assert_eq!(
            services(
                &gens,
                &conds,
                2,
                &[(Some(&api), false), (Some(&failing), false)]
            ),
            Services::Failed("db keeps exiting".into())
        );
        let before = row("db", false, 1, Some("db keeps exiting"));
        assert_eq!(
            services(&gens, &conds, 2, &[(Some(&before), false)]),
            Services::Starting
        );
        // Another controller's condition still counts.
        let mut routes = conds.clone();
        routes.retain(|c| c.type_ != Kind::Route.condition());
        assert_eq!(
            services(&gens, &routes, 2, &[(Some(&api), false)]),
            Services::Starting
        );
    }
}
