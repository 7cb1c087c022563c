//! A world that is down or removed: the servers of its own its slices run are stopped
//! (their data kept), and a removed world's slices are dropped from their servers.

use std::time::Duration;

use super::{SliceController, SliceError, CONDITION};
use crate::adapter::{SliceEffects, SliceFault, Teardown};
use crate::runtime::{Action, Applied, Condition};
use crate::spec::Resource;
use crate::store::{self, SliceRow, SliceState, World};
use crate::supervisor::Supervisor;

impl<E: SliceEffects, S: Supervisor> SliceController<E, S> {
    /// A world that is down: nothing is provisioned, and once none of its processes runs,
    /// each slice that runs something only while its world runs (a redis-server of the
    /// world's own) stops it, keeping its data; the next `binky up` starts it again.
    pub(super) async fn stop_with_world(&self, world: &World) -> Result<Applied, SliceError> {
        let rows: Vec<SliceRow> = self
            .store
            .read(|c| store::slices(c, world.id))?
            .into_iter()
            .filter(|r| r.state != SliceState::Stopped)
            .collect();
        if rows.is_empty() {
            return Ok(Applied::await_change(vec![Condition::ok(
                CONDITION,
                "WorldStopped",
                "the world is down; its slices are kept",
            )]));
        }
        // Its processes may still use them (a worker flushing its queue as it stops).
        let running = self
            .store
            .read(|c| store::processes(c, world.id))?
            .iter()
            .any(|p| p.pid.is_some());
        if running {
            return Ok(Applied {
                action: Action::Requeue(Duration::from_millis(300)),
                conditions: vec![Condition::waiting(
                    CONDITION,
                    "WorldStopping",
                    "waiting for the world's processes to stop before stopping its slices' own servers",
                )],
            });
        }
        let mut stopped = Vec::new();
        for row in rows {
            let service = row.service.clone();
            if self.pause(world, row).await? {
                stopped.push(service);
            }
        }
        if !stopped.is_empty() {
            self.event(
                world,
                "slice",
                &format!(
                    "stopped the own server of {} with the world (data kept)",
                    stopped.join(", ")
                ),
            );
        }
        Ok(Applied::await_change(vec![Condition::ok(
            CONDITION,
            "WorldStopped",
            "the world is down; its slices are kept",
        )]))
    }

    /// Asks the slice `row` of a world that is down to stop its own server, once per
    /// `binky down`. Returns whether it stopped one (a slice on a shared server has none).
    async fn pause(&self, world: &World, mut row: SliceRow) -> Result<bool, SliceError> {
        let key = (world.id, row.service.clone());
        let asked = self
            .paused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .copied();
        if asked == Some(world.generation) {
            return Ok(false);
        }
        let res = world.spec.resource(&row.service).cloned();
        let spec = self.made_spec(world, &row, res.as_ref());
        match self.effects().pause(&spec).await {
            Ok(true) => {
                row.state = SliceState::Stopped;
                row.message = "its server stopped with the world (data kept)".into();
                self.save(world, &row)?;
                return Ok(true);
            }
            Ok(false) => {
                self.paused
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, world.generation);
            }
            Err(SliceFault::Transient(detail)) => {
                return Err(SliceError::Waiting {
                    service: row.service.clone(),
                    adapter: row.adapter.clone(),
                    detail,
                })
            }
            Err(SliceFault::Permanent(detail)) => self.event(
                world,
                "slice_failed",
                &format!("{}: could not stop its server: {detail}", row.service),
            ),
        }
        Ok(false)
    }

    /// Drops the slice `row` of a removed world from its server (`res`: its service's
    /// config now, if it is still there). Returns whether it was dropped: with `--force`, a
    /// server that does not answer does not hold the removal for ever, and a slice nothing
    /// can drop (an adapter that is gone) does not hang it; each says what may be left. A
    /// slice its server says another binky home made (one named alike before homes had an
    /// identity, which that home adopted) is that home's: left as it is, and said so.
    pub(super) async fn drop_slice(
        &self,
        world: &World,
        row: &SliceRow,
        res: Option<&Resource>,
    ) -> Result<bool, SliceError> {
        let spec = self.made_spec(world, row, res);
        match self.effects().teardown(&spec).await {
            Ok(Teardown::Dropped) => Ok(true),
            Ok(Teardown::OtherHome(home)) => {
                self.event(
                    world,
                    "slice",
                    &format!(
                        "{}: left {} slice {}: it belongs to another binky home ({home}), which uses it; this home forgets it",
                        row.service, row.adapter, row.name
                    ),
                );
                Ok(false)
            }
            Err(SliceFault::Transient(detail)) if world.force_delete => {
                self.event(
                    world,
                    "slice_failed",
                    &format!(
                        "{}: could not reach its {} server to drop slice {} ({detail}); forgotten (--force): drop `{}` on that server when it is back",
                        row.service, row.adapter, row.name, row.name
                    ),
                );
                Ok(false)
            }
            Err(SliceFault::Transient(detail)) => Err(SliceError::Unreachable {
                world: world.name.clone(),
                service: row.service.clone(),
                slice: row.name.clone(),
                adapter: row.adapter.clone(),
                detail,
            }),
            Err(SliceFault::Permanent(detail)) => {
                self.event(
                    world,
                    "slice_failed",
                    &format!(
                        "{}: could not drop slice {}: {detail}",
                        row.service, row.name
                    ),
                );
                Ok(false)
            }
        }
    }
}
