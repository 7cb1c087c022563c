//! Making one wanted slice: cloned from its golden template or provisioned by its adapter,
//! checked for having been dropped from outside, its due `migrate` and `seed` run in the
//! worktree, and recorded ready, waiting or failed.

use std::ops::ControlFlow;

use sha2::{Digest, Sha256};

use super::clone::CloneOutcome;
use super::{SliceController, SliceError, CONDITION, DRIFT_CHECK};
use crate::adapter::{
    unset_settings, CommandError, SliceAddress, SliceEffects, SliceFault, SliceSpec,
};
use crate::env::Layout;
use crate::runtime::{Applied, Condition};
use crate::spec::Resource;
use crate::store::{self, SliceRow, SliceState, World};
use crate::supervisor::Supervisor;

impl<E: SliceEffects, S: Supervisor> SliceController<E, S> {
    /// Converges one wanted slice (`row`, as recorded or new): made by cloning its golden
    /// template or by its adapter, then migrated and seeded as due, and recorded ready.
    pub(super) async fn converge(
        &self,
        world: &World,
        res: &Resource,
        mut row: SliceRow,
        layout: Option<&Layout>,
    ) -> Result<SliceStep, SliceError> {
        let service = row.service.clone();
        if row.state == SliceState::Failed && row.failed_generation == Some(world.generation) {
            return Ok(SliceStep::Report(failed(
                "SliceFailed",
                format!("{service}: {}", row.message),
            )));
        }
        let healed = self
            .healed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(world.id, service.clone()))
            .copied()
            == Some(world.generation);
        let spec = self
            .work
            .spec_of(world, &service, res, &row.name, &row.secret);
        // An admin_url (or option) from a variable `binky up` did not have: say exactly
        // that, not "admin_url is not a URL".
        if let Some(why) = unset_settings(world, res) {
            return Ok(SliceStep::Report(failed(
                "EnvUnset",
                format!("{service}: {why}; set it in the environment of `binky up` and run `binky up {}` again", world.name),
            )));
        }
        self.check_drift(world, res, &spec, &mut row, healed)
            .await?;
        let due = Due::of(res, &row);
        // A ready slice is provisioned again at a new generation (healing a changed
        // password, say), unless its adapter's provision runs once per slice (external
        // adapters, written to binky 0.1.2's contract, need not be idempotent: a second
        // provision may fail).
        if row.state == SliceState::Ready
            && row.adapter == res.adapter
            && !due.any()
            && (healed || self.effects().provisions_once(&spec))
        {
            return Ok(SliceStep::Ready(format!("{service}={}", row.name)));
        }
        let healed = healed && row.state != SliceState::Pending;
        self.make(world, res, row, &spec, layout, healed).await
    }

    /// Makes the slice `row` records (cloned from its golden template, or provisioned:
    /// again only where `healed` does not say it was at this generation), runs its due
    /// `migrate` and `seed`, and records it ready.
    async fn make(
        &self,
        world: &World,
        res: &Resource,
        mut row: SliceRow,
        spec: &SliceSpec,
        layout: Option<&Layout>,
        healed: bool,
    ) -> Result<SliceStep, SliceError> {
        let service = row.service.clone();
        let key = (world.id, service.clone());
        let due = Due::of(res, &row);
        let fresh = row.address.is_none();
        // A new slice with `clone_from`: a server-side copy of the golden template,
        // when the adapter can; correctness never depends on it, only speed.
        if fresh && res.clone_from.is_some() {
            if let Some(step) = self.clone_step(world, res, spec, &mut row).await? {
                return Ok(step);
            }
        }
        let address = match self.provision(world, res, spec, &mut row, healed).await? {
            ControlFlow::Continue(address) => address,
            ControlFlow::Break(applied) => return Ok(SliceStep::Report(applied)),
        };
        record_address(&mut row, &res.adapter, &address);
        if fresh {
            self.event(
                world,
                "slice",
                &format!("{service}: provisioned {} slice {}", res.adapter, row.name),
            );
        }
        if due.any() {
            if let Some(why) = self.command_wait(world, &service, res, layout)? {
                return self.made_waiting(world, row, key, why);
            }
        }
        if let Some(layout) = layout {
            match self
                .run_due(world, res, &mut row, layout, &address, due)
                .await?
            {
                Ran::Done => {}
                Ran::Waits(why) => return self.made_waiting(world, row, key, why),
                Ran::Failed(applied) => return Ok(SliceStep::Report(applied)),
            }
        }
        Ok(SliceStep::Ready(self.mark_ready(world, &mut row, key)?))
    }

    /// The slice `row` is made at this generation, and its commands wait (`why`): it is
    /// reused, not provisioned again, once they may run; the world's other slices are made
    /// meanwhile.
    fn made_waiting(
        &self,
        world: &World,
        mut row: SliceRow,
        key: (i64, String),
        why: String,
    ) -> Result<SliceStep, SliceError> {
        row.state = SliceState::Provisioned;
        row.message = why.clone();
        self.save(world, &row)?;
        self.healed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, world.generation);
        Ok(SliceStep::Waiting(format!("{}: {why}", row.service)))
    }

    /// A new slice cloned from its golden template: ready, waiting for the template, or
    /// failed with it; `None` when it is made the slow way.
    async fn clone_step(
        &self,
        world: &World,
        res: &Resource,
        spec: &SliceSpec,
        row: &mut SliceRow,
    ) -> Result<Option<SliceStep>, SliceError> {
        let service = row.service.clone();
        Ok(Some(
            match self.clone_from_golden(world, &service, res, spec).await? {
                CloneOutcome::Cloned(address) => {
                    record_address(row, &res.adapter, &address);
                    // The template ran them: the copy has their effect.
                    row.migrate_hash = res.migrate.as_deref().map(hash);
                    row.seed_hash = res.seed.as_deref().map(hash);
                    SliceStep::Ready(self.mark_ready(world, row, (world.id, service))?)
                }
                // The world's other slices are made meanwhile: a template's build may need
                // them (`REDIS_URL = "${cache.url}"` in its env).
                CloneOutcome::Wait(why) => SliceStep::Waiting(format!("{service}: {why}")),
                CloneOutcome::Failed(why) => {
                    SliceStep::Report(failed("GoldenFailed", format!("{service}: {why}")))
                }
                CloneOutcome::Fallback => return Ok(None),
            },
        ))
    }

    /// Drift: a ready slice dropped from outside binky is made again, migrated and seeded
    /// (or cloned), not left empty. Checked at every new generation (`healed` is false) and
    /// otherwise at most every DRIFT_CHECK.
    async fn check_drift(
        &self,
        world: &World,
        res: &Resource,
        spec: &SliceSpec,
        row: &mut SliceRow,
        healed: bool,
    ) -> Result<(), SliceError> {
        if row.state != SliceState::Ready || row.adapter != res.adapter {
            return Ok(());
        }
        // A server known not to answer is not asked again here (the daemon asks it): each
        // ask would wait out its connect timeout.
        if row
            .admin_url
            .as_deref()
            .is_some_and(|u| self.effects().unanswered(u).is_some())
        {
            return Ok(());
        }
        let key = (world.id, row.service.clone());
        let due = !healed
            || self
                .checked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&key)
                .is_none_or(|t| t.elapsed() >= DRIFT_CHECK);
        if !due {
            return Ok(());
        }
        if let Ok(Some(false)) = self.effects().exists(spec).await {
            self.event(
                world,
                "slice_drift",
                &format!(
                    "{}: {} slice {} was dropped outside binky; making it again (provision, migrate, seed)",
                    row.service, res.adapter, row.name
                ),
            );
            row.address = None;
            row.migrate_hash = None;
            row.seed_hash = None;
            row.state = SliceState::Pending;
            self.save(world, row)?;
            self.healed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key);
        } else {
            self.checked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key, std::time::Instant::now());
        }
        Ok(())
    }

    /// The slice's address: the one already made when it can be reused, else provisioned
    /// by its adapter. A server that cannot be reached is an error (retried); a refusal
    /// fails the slice for this generation (`Break` with the world's report).
    async fn provision(
        &self,
        world: &World,
        res: &Resource,
        spec: &SliceSpec,
        row: &mut SliceRow,
        healed: bool,
    ) -> Result<ControlFlow<Applied, SliceAddress>, SliceError> {
        // Provisioned at this generation already (waiting for the worktree since):
        // reuse it instead of asking the server again.
        // An adapter that provisions once: its made slice is reused (a changed migrate
        // runs on it) instead of provisioned again.
        let made_once = self.effects().provisions_once(spec)
            && row.adapter == res.adapter
            && matches!(row.state, SliceState::Ready | SliceState::Provisioned);
        let reuse = ((healed && row.state == SliceState::Provisioned) || made_once)
            .then(|| {
                row.address.clone().map(|url| SliceAddress {
                    url,
                    tokens: row.tokens.clone(),
                    admin_url: row.admin_url.clone(),
                })
            })
            .flatten();
        let provisioned = match reuse {
            Some(a) => Ok(a),
            None => self.effects().provision(spec).await,
        };
        match provisioned {
            Ok(a) => Ok(ControlFlow::Continue(a)),
            Err(SliceFault::Transient(detail)) => {
                row.message = format!("waiting for its {} server: {detail}", res.adapter);
                self.save(world, row)?;
                Err(SliceError::Waiting {
                    service: row.service.clone(),
                    adapter: res.adapter.clone(),
                    detail,
                })
            }
            Err(SliceFault::Permanent(detail)) => {
                let said = format!("{}: {detail}", row.service);
                self.fail(world, row, "slice_failed", detail.to_string())?;
                Ok(ControlFlow::Break(failed("SliceFailed", said)))
            }
        }
    }

    /// Why migrate and seed cannot run yet: they run in the worktree, once the paths their
    /// workdir needs are brought into it (its `.venv`, say), and once the slices of other
    /// services they name are made.
    fn command_wait(
        &self,
        world: &World,
        service: &str,
        res: &Resource,
        layout: Option<&Layout>,
    ) -> Result<Option<String>, SliceError> {
        if layout.is_none() {
            return Ok(Some(
                "waiting for the worktree to run migrate and seed".to_owned(),
            ));
        }
        let brought = self.store.read(|c| {
            store::bootstrap_waits_to_migrate(
                c,
                world.id,
                &crate::env::workdir_rel(world, &res.workdir),
            )
        })?;
        if !brought.is_empty() {
            return Ok(Some(format!(
                "waiting for {} to be brought into the worktree to run migrate and seed",
                brought.join(", ")
            )));
        }
        Ok(crate::needs::said(
            &self.work.unmade_needs(world, service)?,
            "run migrate and seed",
        ))
    }

    /// Runs the slice's due `migrate`, then its due `seed`, in the worktree with the
    /// slice's address; a failing one fails the slice for this generation (with the
    /// world's report).
    async fn run_due(
        &self,
        world: &World,
        res: &Resource,
        row: &mut SliceRow,
        layout: &Layout,
        address: &SliceAddress,
        due: Due,
    ) -> Result<Ran, SliceError> {
        let service = row.service.clone();
        for (which, cmd, due) in [
            ("migrate", res.migrate.as_deref(), due.migrate),
            ("seed", res.seed.as_deref(), due.seed),
        ] {
            let Some(cmd) = cmd.filter(|_| due) else {
                continue;
            };
            row.state = if which == "migrate" {
                SliceState::Migrating
            } else {
                SliceState::Seeding
            };
            row.message = format!("running {which}");
            self.save(world, row)?;
            match self
                .work
                .run_command(world, layout, &service, res, which, cmd, address)
                .await
            {
                Ok(()) => {}
                Err(CommandError::Waits(why)) => return Ok(Ran::Waits(why)),
                Err(CommandError::Failed(msg)) => {
                    self.fail(world, row, &format!("{which}_failed"), msg.clone())?;
                    return Ok(Ran::Failed(failed(
                        "SliceFailed",
                        format!("{service}: {msg}"),
                    )));
                }
            }
            if which == "migrate" {
                row.migrate_hash = Some(hash(cmd));
            } else {
                row.seed_hash = Some(hash(cmd));
            }
        }
        Ok(Ran::Done)
    }

    /// Records the slice failed at this generation, with an event of `kind`.
    fn fail(
        &self,
        world: &World,
        row: &mut SliceRow,
        kind: &str,
        msg: String,
    ) -> Result<(), SliceError> {
        row.state = SliceState::Failed;
        row.failed_generation = Some(world.generation);
        row.message = msg;
        self.save(world, row)?;
        self.event(world, kind, &format!("{}: {}", row.service, row.message));
        Ok(())
    }

    /// A slice is ready at this generation: record it (and that this daemon healed it).
    fn mark_ready(
        &self,
        world: &World,
        row: &mut SliceRow,
        key: (i64, String),
    ) -> Result<String, SliceError> {
        row.state = SliceState::Ready;
        row.failed_generation = None;
        row.message = String::new();
        self.save(world, row)?;
        self.healed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, world.generation);
        Ok(format!("{}={}", row.service, row.name))
    }
}

/// Where converging one slice came to.
pub(super) enum SliceStep {
    /// Ready: `service=slice`, for the world's condition.
    Ready(String),
    /// Not ready yet, and the world's other slices are made meanwhile: made, its migrate
    /// and seed waiting for the worktree, a path brought into it or another slice they
    /// name; or waiting for its golden template. Why.
    Waiting(String),
    /// The world's report, now (the slice failed, or its golden template did).
    Report(Applied),
}

/// What running a slice's due commands came to.
enum Ran {
    /// They ran.
    Done,
    /// One names a slice not made yet: why.
    Waits(String),
    /// One failed: the world's report.
    Failed(Applied),
}

/// Which of a slice's commands are due: `migrate` when its text changed since it last
/// ran, `seed` once per slice.
#[derive(Clone, Copy)]
struct Due {
    migrate: bool,
    seed: bool,
}

impl Due {
    fn of(res: &Resource, row: &SliceRow) -> Due {
        Due {
            migrate: res
                .migrate
                .as_deref()
                .is_some_and(|m| row.migrate_hash.as_deref() != Some(&hash(m))),
            seed: res.seed.is_some() && row.seed_hash.is_none(),
        }
    }

    fn any(self) -> bool {
        self.migrate || self.seed
    }
}

/// Records where the slice `row` was made (by `adapter`).
fn record_address(row: &mut SliceRow, adapter: &str, address: &SliceAddress) {
    row.adapter = adapter.to_owned();
    row.address = Some(address.url.clone());
    row.tokens = address.tokens.clone();
    row.admin_url = address.admin_url.clone();
}

/// The world's condition for a slice that failed.
fn failed(reason: &str, message: String) -> Applied {
    Applied::await_change(vec![Condition::failed(CONDITION, reason, message)])
}

fn hash(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .take(12)
        .map(|b| format!("{b:02x}"))
        .collect()
}
