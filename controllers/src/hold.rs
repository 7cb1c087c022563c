//! Whether a world is held at the admission gate: what the controllers that start things
//! (slice, golden, process) ask first, and what `binky status` and `binky up`'s wait read.

use std::time::Duration;

use crate::approval::{awaiting_approval, unapproved};
use crate::registry::Kind;
use crate::runtime::{Action, Applied, Condition};
use crate::settings::Settings;
use crate::store::{self, AdmissionState, DesiredState, Store, StoreError, World};

/// The condition of the admission controller.
const CONDITION: &str = Kind::Admission.condition();

/// Why a world is held at the gate: the reason of its `Admitted` condition (and of the
/// waiting conditions of the controllers that start things).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// A person must approve new commands (`binky approve`).
    AwaitingApproval,
    /// Behind other worlds, or over a resident limit.
    Queued,
    /// Stopped by the gate to make room; it starts again by itself when there is room.
    Cooled,
}

impl Hold {
    /// The condition reason it is written as.
    pub const fn reason(self) -> &'static str {
        match self {
            Hold::AwaitingApproval => "AwaitingApproval",
            Hold::Queued => "Queued",
            Hold::Cooled => "Cooled",
        }
    }

    /// What holds a world, read from its conditions, with the gate's condition that says
    /// so.
    pub fn of(conditions: &[store::ConditionRow]) -> Option<(Hold, &store::ConditionRow)> {
        let c = conditions
            .iter()
            .find(|c| c.type_ == CONDITION && c.status != crate::store::CondStatus::True)?;
        [Hold::AwaitingApproval, Hold::Queued, Hold::Cooled]
            .into_iter()
            .find(|h| h.reason() == c.reason)
            .map(|h| (h, c))
    }
}

/// Is `world` held at the gate? `Some((why, message))` when it is: nothing of it may
/// start. Controllers that start things call this first.
pub fn held(store: &Store, world: &World) -> Result<Option<(Hold, String)>, StoreError> {
    let approvals = Settings::read(store)?.flag("approvals");
    if let Some(why) = awaiting_approval(world, &unapproved(store, approvals, world)?) {
        return Ok(Some((Hold::AwaitingApproval, why)));
    }
    let row = store.read(|c| store::admission(c, world.id))?;
    Ok(match row {
        Some((AdmissionState::Admitted, _)) => None,
        Some((AdmissionState::Cooled, reason)) => Some((Hold::Cooled, reason)),
        Some((AdmissionState::Queued, reason)) if !reason.is_empty() => {
            Some((Hold::Queued, reason))
        }
        _ => Some((Hold::Queued, "waiting for admission".into())),
    })
}

/// For a controller that starts things: `Some(Applied)` to return at once (waiting, with
/// its `condition` saying why) when `world` wants to run but is held at the gate.
pub fn hold(
    store: &Store,
    world: &World,
    condition: &'static str,
) -> Result<Option<Applied>, StoreError> {
    if world.desired != DesiredState::Running {
        return Ok(None);
    }
    Ok(held(store, world)?.map(|(hold, msg)| Applied {
        action: Action::Requeue(Duration::from_millis(500)),
        conditions: vec![Condition::waiting(condition, hold.reason(), msg)],
    }))
}
