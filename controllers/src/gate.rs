//! The admission gate before a world starts: resident limits (`max_parallel`, a RAM reserve,
//! a disk reserve) that queue worlds in FIFO order or cool the least recently used one, and
//! approvals of the commands a world would run.
//!
//! # Guarantees
//! - Nothing of a held world starts: the slice, golden and process controllers call
//!   [`held`](crate::hold::held) first, so no slice is provisioned, no `migrate`/`seed` and no process runs.
//! - Queued worlds are admitted in the order they asked (`queued_at`), one at a time, as
//!   room appears; a world that goes down releases its place at once.
//! - A *cooled* world is one the gate stopped to make room: its processes stop, its files,
//!   ports and data are kept, it stays wanted (`binky status` says `cooled` and why) and it
//!   starts again by itself, first in the queue of the time it was cooled, once the limit
//!   allows; it never cools another world to come back. `binky up` of it asks again at
//!   once (as a new request); `binky down` ends the wait.
//! - With `cool_oldest`, a world over a limit cools the least recently used running world
//!   that is not in focus (used within `focus_minutes`). Only `max_parallel` and the RAM
//!   reserve cool (a cooled world frees no disk), and while a stopped or cooled world still
//!   has processes, no other is cooled for memory (what it frees is not free yet).
//! - With `cool_under_pressure` (on by default), while less memory than the RAM reserve
//!   stays available for [`PRESSURE_FOR`], the world admitted last (not one resumed within
//!   [`RESUME_GRACE`]) is cooled, one at a time; a world cooled for memory resumes once
//!   [`RESUME_MARGIN`] more than the reserve is available.
//! - With `approvals` on, every distinct command (`cmd`, `setup`, a `cmd` health check,
//!   `migrate`, `seed`, hooks) must have been approved for its project; the key is a hash of
//!   project and command text, so an edited command needs a new approval.
//! - A project's shared world ([`crate::shared`]) is admitted at once once its commands are
//!   approved: it takes no place of `max_parallel`, is never queued and never cooled (its
//!   services run only while an admitted world uses them).
//! - Limits and approvals are machine settings (the `settings` table), never read from a
//!   repository's `binky.toml`. The reserves are on by default (20 % of memory, 5 GiB of
//!   disk); no limit derives from the CPU count.

use std::time::Duration;

use crate::approval::{awaiting_approval, unapproved};
use crate::hold::Hold;
use crate::machine::Machine;
use crate::registry::Kind;
use crate::runtime::{Action, Applied, Cleanup, Condition, Controller, ReconcileError};
use crate::settings::Settings;
use crate::store::{
    self, now_ms, owner, write, AdmissionState, DesiredState, Store, StoreError, World, WorldId,
};

/// The condition it reports.
const CONDITION: &str = Kind::Admission.condition();

/// How long available memory must stay under the reserve before a running world is cooled
/// (three ticks of 2 s): a moment's spike cools nothing.
pub const PRESSURE_FOR: Duration = Duration::from_secs(6);
/// A world resumed this recently is not the one cooled for memory (no flapping).
pub const RESUME_GRACE: Duration = Duration::from_secs(30);
/// Percentage points of memory above the reserve a world cooled for memory waits for.
pub const RESUME_MARGIN: f64 = 5.0;
/// How often an admitted world looks at the memory while `cool_under_pressure` is on.
const PRESSURE_TICK: Duration = Duration::from_secs(2);

/// Why the gate could not decide.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ReconcileError for GateError {
    fn reason(&self) -> &'static str {
        "StoreFailed"
    }
}

/// The admission controller.
pub struct AdmissionController<M> {
    store: Store,
    machine: M,
    trigger: Option<crate::runtime::Trigger>,
    /// Since when available memory has been under the reserve, as the last look saw it
    /// (kept in memory: a new daemon starts watching again).
    pressure: std::sync::Mutex<Option<std::time::Instant>>,
    /// How long memory must stay short before a world is cooled ([`PRESSURE_FOR`]).
    pressure_for: Duration,
}

/// A world's row of the gate's queue.
type Place = store::AdmissionPlace;

impl<M: Machine> AdmissionController<M> {
    /// A controller over `store`, measuring with `machine`.
    pub fn new(store: Store, machine: M) -> Self {
        AdmissionController {
            store,
            machine,
            trigger: None,
            pressure: std::sync::Mutex::new(None),
            pressure_for: PRESSURE_FOR,
        }
    }

    /// Cool for memory once it has been short this long (tests: zero).
    pub fn with_pressure_for(mut self, d: Duration) -> Self {
        self.pressure_for = d;
        self
    }

    /// Nudge a cooled world's controllers through `trigger` (the daemon's runtime).
    pub fn with_trigger(mut self, trigger: crate::runtime::Trigger) -> Self {
        self.trigger = Some(trigger);
        self
    }

    fn release(&self, world: &World) -> Result<(), StoreError> {
        let released = self
            .store
            .write(owner::Gate, |tx| write::gate::release(tx, world.id))?;
        // It may have been the memory watcher: the one now admitted last takes over (a
        // nudge it does not need, when it watched already, costs one pass).
        if released {
            self.wake_watcher()?;
        }
        Ok(())
    }

    /// The world that watches the memory for every world while `cool_under_pressure` is on:
    /// the one admitted last (the first the gate would cool). The others wait for a change
    /// instead of each looking every [`PRESSURE_TICK`].
    fn watcher(places: &[Place]) -> Option<WorldId> {
        places
            .iter()
            .filter(|p| p.state == AdmissionState::Admitted)
            .max_by_key(|p| (p.admitted_at.unwrap_or(0), p.world))
            .map(|p| p.world)
    }

    /// The watcher left (stopped, removed, cooled): the next one starts looking.
    fn wake_watcher(&self) -> Result<(), StoreError> {
        let Some(t) = &self.trigger else {
            return Ok(());
        };
        if let Some(next) = Self::watcher(&self.places()?) {
            t.world(next);
        }
        Ok(())
    }

    /// Over which limit, if any, would one more resident world be? `resuming`: a world the
    /// gate cooled, which waits for [`RESUME_MARGIN`] more memory than the reserve.
    fn over(
        &self,
        settings: &Settings,
        world: &World,
        residents: usize,
        resuming: bool,
    ) -> Option<Over> {
        let max: usize = settings.number("max_parallel");
        if max > 0 && residents >= max {
            return Some(Over {
                limit: Limit::Places,
                why: format!("{residents} world(s) running, max_parallel = {max}"),
            });
        }
        let ram: f64 = settings.number("ram_reserve_percent");
        if ram > 0.0 {
            if let Some(avail) = self.machine.mem_available_percent() {
                let need = if resuming { ram + RESUME_MARGIN } else { ram };
                if avail < need {
                    return Some(Over {
                        limit: Limit::Memory,
                        why: if resuming {
                            format!("{avail:.0}% of memory available, ram_reserve_percent = {ram} (+{RESUME_MARGIN} to come back)")
                        } else {
                            format!("{avail:.0}% of memory available, ram_reserve_percent = {ram}")
                        },
                    });
                }
            }
        }
        let disk: f64 = settings.number("disk_reserve_gib");
        if disk > 0.0 {
            if let Some(free) = self.machine.disk_free_gib(&world.repo_root) {
                if free < disk {
                    return Some(Over {
                        limit: Limit::Disk,
                        why: format!(
                            "{free:.1} GiB free on the worktrees' disk, disk_reserve_gib = {disk}"
                        ),
                    });
                }
            }
        }
        None
    }

    /// A world told to stop (cooled, or down) whose processes still run, if any.
    fn stopping(&self) -> Result<Option<String>, StoreError> {
        self.store.read(store::stopping_world)
    }

    /// Every place of a world that wants to run, in the order they asked.
    fn places(&self) -> Result<Vec<Place>, StoreError> {
        self.store
            .read(|c| store::admission_places(c, crate::shared::WORLD))
    }

    /// Cool `world`: its processes stop, it keeps its place at the back of the queue of
    /// now, and it starts again by itself when there is room. `why` goes to its condition
    /// and its event.
    fn cool(&self, world: &World, why: &str) -> Result<String, StoreError> {
        let now = now_ms();
        let reason = format!(
            "cooled: {why}; its files, ports and data are kept and it starts again by itself when there is room (`binky up {0}` asks now, `binky down {0}` keeps it stopped)",
            world.name
        );
        self.store.write(owner::Gate, |tx| {
            write::gate::cool(tx, world.id, now, &reason)
        })?;
        self.store.event(world.id, "cooled", &reason)?;
        if let Some(t) = &self.trigger {
            t.world(world.id);
        }
        Ok(reason)
    }

    /// For an admitted world while `cool_under_pressure` is on: has memory been short long
    /// enough, and is this world the one to cool? Then cool it (the condition it gets).
    fn relieve_pressure(
        &self,
        settings: &Settings,
        world: &World,
        places: &[Place],
    ) -> Result<Option<Condition>, StoreError> {
        let ram: f64 = settings.number("ram_reserve_percent");
        let avail = self.machine.mem_available_percent();
        let short = ram > 0.0 && avail.is_some_and(|a| a < ram);
        let since = {
            let mut p = self.pressure.lock().unwrap_or_else(|e| e.into_inner());
            *p = if short {
                Some(p.unwrap_or_else(std::time::Instant::now))
            } else {
                None
            };
            *p
        };
        let Some(since) = since.filter(|s| s.elapsed() >= self.pressure_for) else {
            return Ok(None);
        };
        // What a world being stopped frees is not free yet: one at a time.
        if self.stopping()?.is_some() {
            return Ok(None);
        }
        let now = now_ms();
        let grace = RESUME_GRACE.as_millis() as i64;
        let newest = places
            .iter()
            .filter(|p| p.state == AdmissionState::Admitted)
            .filter(|p| p.resumed_at.is_none_or(|r| now - r >= grace))
            .max_by_key(|p| (p.admitted_at.unwrap_or(0), p.world));
        let Some(chosen) = newest.map(|p| p.world) else {
            return Ok(None);
        };
        let why = format!(
            "{:.0}% of memory available for {}s, under ram_reserve_percent = {ram} (the world admitted last goes first)",
            avail.unwrap_or(0.0),
            since.elapsed().as_secs()
        );
        // The watcher looks for every world: the one to cool may be another (the watcher
        // resumed within RESUME_GRACE).
        if chosen != world.id {
            if let Some(other) = self.store.read(|c| store::world(c, chosen))? {
                self.cool(&other, &why)?;
            }
            *self.pressure.lock().unwrap_or_else(|e| e.into_inner()) = None;
            return Ok(None);
        }
        let reason = self.cool(world, &why)?;
        // The streak starts again: the memory this world frees gets time to come back.
        *self.pressure.lock().unwrap_or_else(|e| e.into_inner()) = None;
        // Another world watches now.
        self.wake_watcher()?;
        Ok(Some(Condition::waiting(
            CONDITION,
            Hold::Cooled.reason(),
            reason,
        )))
    }

    /// Admits a project's shared world, which takes no place.
    fn admit_shared(&self, world: &World, now: i64) -> Result<(), StoreError> {
        self.store.write(owner::Gate, |tx| {
            write::gate::admit_shared(tx, world.id, now)
        })
    }

    /// Joins the queue (or finds this world's place in it): nothing to write for a world
    /// already in it (every pass of the memory watcher), unless `binky up` asks again for
    /// one the gate cooled.
    fn join_queue(&self, world: &World, now: i64) -> Result<(), StoreError> {
        let placed = self
            .store
            .read(|c| store::admission_placed(c, world.id, world.last_used_at))?;
        if placed {
            return Ok(());
        }
        self.store.write(owner::Gate, |tx| {
            write::gate::join_queue(tx, world.id, world.last_used_at, now)
        })
    }

    /// An admitted world stays admitted; while `cool_under_pressure` is on, the memory
    /// watcher among them looks at the memory every [`PRESSURE_TICK`] and may cool a world.
    fn stay_admitted(
        &self,
        settings: &Settings,
        world: &World,
        places: &[Place],
    ) -> Result<Applied, GateError> {
        let watch_pressure = settings.flag("cool_under_pressure")
            && settings.number::<f64>("ram_reserve_percent") > 0.0;
        if !watch_pressure || Self::watcher(places) != Some(world.id) {
            return Ok(Applied::await_change(vec![Condition::ok(
                CONDITION, "Admitted", "admitted",
            )]));
        }
        if let Some(cooled) = self.relieve_pressure(settings, world, places)? {
            return Ok(Applied {
                action: Action::Requeue(Duration::from_millis(500)),
                conditions: vec![cooled],
            });
        }
        Ok(Applied {
            action: Action::Requeue(PRESSURE_TICK),
            conditions: vec![Condition::ok(CONDITION, "Admitted", "admitted")],
        })
    }

    /// A queued or cooled world (`mine`): admitted when it is first in the queue and under
    /// every limit (after making room, where the settings allow), else told why it waits.
    fn admit_or_queue(
        &self,
        settings: &Settings,
        world: &World,
        places: &[Place],
        mine: &Place,
        now: i64,
    ) -> Result<Applied, GateError> {
        let resuming = mine.state == AdmissionState::Cooled;
        let ahead = places
            .iter()
            .take_while(|p| p.world != world.id)
            .filter(|p| p.state != AdmissionState::Admitted)
            .count();
        let over = self.make_room(settings, world, places, ahead, resuming, now)?;
        if over.is_none() && ahead == 0 {
            self.admit(world, mine, now)?;
            return Ok(Applied::await_change(vec![Condition::ok(
                CONDITION, "Admitted", "admitted",
            )]));
        }
        let reason = queue_reason(mine, over, ahead);
        if !resuming {
            self.store.write(owner::Gate, |tx| {
                write::gate::set_reason(tx, world.id, &reason)
            })?;
        }
        let hold = if resuming { Hold::Cooled } else { Hold::Queued };
        Ok(Applied {
            action: Action::Requeue(Duration::from_millis(500)),
            conditions: vec![Condition::waiting(CONDITION, hold.reason(), reason)],
        })
    }

    /// The limit one more resident world would still cross, if any, after making room:
    /// with `cool_oldest`, the first world in the queue over `max_parallel` or the RAM
    /// reserve cools the least recently used admitted world out of focus.
    fn make_room(
        &self,
        settings: &Settings,
        world: &World,
        places: &[Place],
        ahead: usize,
        resuming: bool,
        now: i64,
    ) -> Result<Option<Over>, StoreError> {
        let residents = places
            .iter()
            .filter(|p| p.state == AdmissionState::Admitted)
            .count();
        let mut over = self.over(settings, world, residents, resuming);
        let cool = match &over {
            // A cooled world keeps its files: stopping it frees no disk. A world coming back
            // from being cooled waits for room; it never cools another.
            Some(o) if o.limit != Limit::Disk && ahead == 0 && !resuming => {
                settings.flag("cool_oldest")
            }
            _ => false,
        };
        // Memory a cooled world frees is available only once its processes are gone;
        // cooling again before that would stop every world out of focus for one newcomer.
        let stopping = match &over {
            Some(o) if cool && o.limit == Limit::Memory => self.stopping()?,
            _ => None,
        };
        if let (Some(o), Some(name)) = (&mut over, &stopping) {
            o.why.push_str(&format!(
                "; waiting for {name} to stop before cooling another world"
            ));
        }
        if !cool || stopping.is_some() {
            return Ok(over);
        }
        let focus: i64 = settings.number("focus_minutes");
        let worlds = self.store.read(store::worlds)?;
        let coolable = worlds
            .iter()
            .filter(|w| {
                w.id != world.id
                    && places
                        .iter()
                        .any(|p| p.world == w.id && p.state == AdmissionState::Admitted)
                    && now - w.last_used_at >= focus * 60_000
            })
            .min_by_key(|w| w.last_used_at);
        if let Some(old) = coolable {
            self.cool(
                old,
                &format!(
                    "stopped to make room for {} ({})",
                    world.name,
                    over.as_ref().map_or("", |o| o.why.as_str())
                ),
            )?;
            over = self.over(settings, world, residents - 1, false);
        }
        Ok(over)
    }

    /// Admits `world` (`mine`, its place), saying how long it waited when it did.
    fn admit(&self, world: &World, mine: &Place, now: i64) -> Result<(), StoreError> {
        let resuming = mine.state == AdmissionState::Cooled;
        self.store.write(owner::Gate, |tx| {
            write::gate::admit(tx, world.id, now, resuming)
        })?;
        if resuming {
            let waited = mine.cooled_at.map_or(0, |c| (now - c).max(0) / 1000);
            self.store.event(
                world.id,
                "resumed",
                &format!("started again after {waited}s cooled: there is room now"),
            )?;
        } else if !mine.reason.is_empty() {
            let waited = (now - mine.queued_at).max(0) / 1000;
            self.store.event(
                world.id,
                "admitted",
                &format!("admitted after {waited}s in the queue: there is room now"),
            )?;
        }
        Ok(())
    }
}

/// Why a world at `mine` waits: over a limit (`over`), or behind `ahead` worlds. A cooled
/// world keeps saying why it was cooled.
fn queue_reason(mine: &Place, over: Option<Over>, ahead: usize) -> String {
    if mine.state == AdmissionState::Cooled {
        // It says why it was cooled; what it waits for now is in the condition.
        let wait = match (over.as_ref().map(|o| o.why.as_str()), ahead) {
            (Some(o), _) => format!("waiting for room: {o}"),
            (None, n) => format!("behind {n} world(s) that asked first"),
        };
        return format!(
            "{}; {wait}",
            mine.reason.split("; its files").next().unwrap_or("")
        );
    }
    match (over.map(|o| o.why), ahead) {
        (Some(o), 0) => format!("queued: {o}; it starts when a world goes down (`binky down NAME`) or the limit is raised (`binky settings`)"),
        (Some(o), n) => format!("queued behind {n} world(s): {o}"),
        (None, n) => format!("queued behind {n} world(s) that asked first"),
    }
}

/// Which resident limit a world would cross.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Limit {
    /// `max_parallel`.
    Places,
    /// `ram_reserve_percent`.
    Memory,
    /// `disk_reserve_gib`.
    Disk,
}

/// A limit one more resident world would cross, and by how much.
#[derive(Debug)]
struct Over {
    limit: Limit,
    /// The limit with its numbers, for conditions and events.
    why: String,
}

impl<M: Machine> Controller for AdmissionController<M> {
    type Error = GateError;

    fn kind(&self) -> Kind {
        Kind::Admission
    }

    async fn apply(&self, world: &World) -> Result<Applied, GateError> {
        if world.desired == DesiredState::Stopped {
            self.release(world)?;
            return Ok(Applied::await_change(vec![Condition::ok(
                CONDITION,
                "Released",
                "stopped: its place is free",
            )]));
        }
        let settings = Settings::read(&self.store)?;
        let missing = unapproved(&self.store, settings.flag("approvals"), world)?;
        if let Some(msg) = awaiting_approval(world, &missing) {
            return Ok(Applied::await_change(vec![Condition::waiting(
                CONDITION,
                Hold::AwaitingApproval.reason(),
                msg,
            )]));
        }
        let now = now_ms();
        // A project's shared services run for worlds that were admitted themselves: they
        // take no place and wait in no queue.
        if world.is_shared() {
            self.admit_shared(world, now)?;
            return Ok(Applied::await_change(vec![Condition::ok(
                CONDITION,
                "Admitted",
                "shared services: they run for the worlds that use them and take no place of their own",
            )]));
        }
        self.join_queue(world, now)?;
        let places = self.places()?;
        let Some(mine) = places.iter().find(|p| p.world == world.id).cloned() else {
            return Ok(Applied {
                action: Action::Requeue(Duration::from_millis(500)),
                conditions: vec![Condition::waiting(
                    CONDITION,
                    Hold::Queued.reason(),
                    "waiting for admission",
                )],
            });
        };
        if mine.state == AdmissionState::Admitted {
            return self.stay_admitted(&settings, world, &places);
        }
        self.admit_or_queue(&settings, world, &places, &mine, now)
    }

    async fn cleanup(&self, world: &World) -> Result<Cleanup, GateError> {
        self.release(world)?;
        Ok(Cleanup::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hold::held;
    use crate::testing::{new_world, reconcile, spec, web, FakeMachine};

    #[tokio::test]
    async fn a_ram_reserve_holds_a_new_world_until_memory_is_available() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        store.set_setting("ram_reserve_percent", "50").unwrap();
        let s = spec(vec![("api", web("serve", &[]))]);
        let id = store
            .put_world(&new_world(dir.path(), "w", s))
            .unwrap()
            .world
            .id;
        let world = |store: &Store| crate::testing::world(store, id).unwrap();
        let low = AdmissionController::new(
            store.clone(),
            FakeMachine {
                mem: 30.0,
                disk: 100.0,
            },
        );
        reconcile(&low, &store, id).await;
        let why = held(&store, &world(&store)).unwrap().unwrap();
        assert_eq!(why.0, Hold::Queued);
        assert!(why.1.contains("ram_reserve_percent = 50"), "{}", why.1);
        let enough = AdmissionController::new(store.clone(), FakeMachine::default());
        reconcile(&enough, &store, id).await;
        assert_eq!(held(&store, &world(&store)).unwrap(), None);
    }

    /// With `cool_under_pressure` on, only the world admitted last looks at the memory every
    /// tick (it is the one cooled first); the others wait for a change. When it stops, the
    /// next one takes over.
    #[tokio::test]
    async fn only_the_world_admitted_last_watches_the_memory() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let ids: Vec<WorldId> = ["a", "b", "c"]
            .iter()
            .map(|n| {
                let s = spec(vec![("api", web("serve", &[]))]);
                store
                    .put_world(&new_world(dir.path(), n, s))
                    .unwrap()
                    .world
                    .id
            })
            .collect();
        let gate = AdmissionController::new(store.clone(), FakeMachine::default());
        for id in &ids {
            reconcile(&gate, &store, *id).await;
            // Each admitted a moment after the one before.
            std::thread::sleep(Duration::from_millis(2));
        }
        let action = |id: WorldId| {
            let gate = &gate;
            let store = &store;
            async move {
                let w = crate::testing::world(store, id).unwrap();
                gate.apply(&w).await.unwrap().action
            }
        };
        assert!(matches!(action(ids[0]).await, Action::AwaitChange));
        assert!(matches!(action(ids[1]).await, Action::AwaitChange));
        assert!(matches!(action(ids[2]).await, Action::Requeue(t) if t == PRESSURE_TICK));
        // c stops: b watches now.
        store
            .set_desired_state(ids[2], DesiredState::Stopped)
            .unwrap();
        reconcile(&gate, &store, ids[2]).await;
        assert!(matches!(action(ids[1]).await, Action::Requeue(t) if t == PRESSURE_TICK));
        assert!(matches!(action(ids[0]).await, Action::AwaitChange));
        // With cool_under_pressure off, nobody looks.
        store.set_setting("cool_under_pressure", "false").unwrap();
        assert!(matches!(action(ids[1]).await, Action::AwaitChange));
    }
}
