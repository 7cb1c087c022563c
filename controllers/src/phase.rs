//! Where a world stands, read from its observed state: the one answer `binky status`, `binky
//! up`'s wait and every other reader give to "is this world ready?".

use std::collections::BTreeMap;

use crate::gate::Hold;
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
    Kind::ALL.iter().all(|k| {
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
