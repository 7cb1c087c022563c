//! A new slice as a server-side copy of its golden template, when the adapter can.

use super::{SliceController, SliceError};
use crate::adapter::{SliceAddress, SliceEffects, SliceFault, SliceSpec};
use crate::registry::Kind;
use crate::spec::Resource;
use crate::store::{self, World};
use crate::store::{GoldenRow, GoldenState};
use crate::supervisor::Supervisor;

/// What trying to clone a new slice from its golden template came to.
pub(super) enum CloneOutcome {
    /// Copied.
    Cloned(SliceAddress),
    /// The template is not ready yet.
    Wait(String),
    /// The template failed: no world is cloned from it.
    Failed(String),
    /// Make the slice the slow way (an event says why).
    Fallback,
}

impl<E: SliceEffects, S: Supervisor> SliceController<E, S> {
    /// A new slice of `service` (`spec`) as a copy of the golden template the golden
    /// controller recorded for it, once that is ready; the slow way when its adapter cannot
    /// clone, or cloning fails.
    pub(super) async fn clone_from_golden(
        &self,
        world: &World,
        service: &str,
        res: &Resource,
        spec: &SliceSpec,
    ) -> Result<CloneOutcome, SliceError> {
        // The reference is the golden controller's: until it has looked at this generation,
        // it may still name the template of the last one (a failed build the user has fixed
        // since), which must not fail this `up`.
        let golden_seen = self
            .store
            .read(|c| store::observed_generations(c, world.id))?
            .get(Kind::Golden.name())
            .is_some_and(|g| *g >= world.generation);
        if !golden_seen {
            return Ok(CloneOutcome::Wait("waiting for its golden template".into()));
        }
        let key = self
            .store
            .read(|c| store::golden_ref(c, world.id, service))?;
        let Some(key) = key else {
            return match self.effects().can_clone(spec).await {
                Ok(false) | Err(SliceFault::Permanent(_)) => {
                    self.event(
                        world,
                        "clone_fallback",
                        &format!("{service}: adapter {} cannot clone; provisioning and running migrate and seed", res.adapter),
                    );
                    Ok(CloneOutcome::Fallback)
                }
                _ => Ok(CloneOutcome::Wait("waiting for its golden template".into())),
            };
        };
        let Some(g) = self.store.read(|c| store::golden(c, &key))? else {
            return Ok(CloneOutcome::Wait("waiting for its golden template".into()));
        };
        if let Some(not_ready) = not_ready(world, &g) {
            return Ok(not_ready);
        }
        let template = SliceSpec {
            slice: g.name.clone(),
            secret: g.secret.clone(),
            admin_url: g.admin_url.clone().or_else(|| spec.admin_url.clone()),
            ..spec.clone()
        };
        let started = std::time::Instant::now();
        match self.effects().clone_into(&template, spec).await {
            Ok(address) => {
                self.event(
                    world,
                    "slice",
                    &format!(
                        "{service}: cloned {} slice {} from golden template {} in {} ms",
                        res.adapter,
                        spec.slice,
                        g.name,
                        started.elapsed().as_millis()
                    ),
                );
                Ok(CloneOutcome::Cloned(address))
            }
            Err(SliceFault::Transient(detail)) => Err(SliceError::Waiting {
                service: service.to_owned(),
                adapter: res.adapter.clone(),
                detail,
            }),
            Err(SliceFault::Permanent(detail)) => {
                self.event(
                    world,
                    "clone_fallback",
                    &format!("{service}: cloning from golden template {} failed ({detail}); provisioning and running migrate and seed instead", g.name),
                );
                Ok(CloneOutcome::Fallback)
            }
        }
    }
}

/// What a world waits for, or fails with, while its golden template `g` is not ready.
fn not_ready(world: &World, g: &GoldenRow) -> Option<CloneOutcome> {
    Some(match g.state {
        GoldenState::Ready => return None,
        // The golden controller builds it again for this `up`; between recording this
        // world's reference and claiming the build it still reads `failed`.
        GoldenState::Failed if g.retried_for(world.last_used_at) => CloneOutcome::Wait(format!(
            "golden template {} failed before; it is being built again",
            g.name
        )),
        GoldenState::Failed => {
            CloneOutcome::Failed(format!("golden template {} failed: {}", g.name, g.output))
        }
        GoldenState::Building => {
            CloneOutcome::Wait(format!("golden template {} is being built", g.name))
        }
        GoldenState::Dropping => CloneOutcome::Wait(format!(
            "golden template {} is being dropped; it is built again once it is gone",
            g.name
        )),
    })
}
