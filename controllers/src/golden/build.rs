//! Building a template in stages: its migrated (unseeded) stage, grown from the newest
//! earlier template of its service when that can be done, else from an empty database; then,
//! when it has a `seed`, the seed on a copy of that stage.
//!
//! # The rule
//! - A template of a service with a `seed` is two databases: its migrated stage
//!   (`<name>_migrated`, sealed, never seeded) and the template itself, a copy of the stage
//!   that `seed` ran on. Without a `seed` the template is its own migrated stage.
//! - `seed` never runs on a database that was seeded, so it need not be re-runnable: a
//!   failed `seed` keeps the stage, and the retry copies the stage again and runs the seed
//!   alone; a later template grows from the stage, not from the seeded template.
//! - A new template grows from an earlier one of the same lineage (project, service,
//!   adapter, server, `clone_from`, `migrate`, workdir: [`super::GoldenInputs`]) whose
//!   migrated stage is complete and whose migration inputs are all still there unchanged
//!   ([`super::grows_from`]); of those, the one with the most inputs, then the newest. Its
//!   stage is copied and `migrate` runs on the copy (the migration tools apply only what is
//!   new); when no migration input changed at all, the copy is the stage as it is.
//! - Growing falls back to an empty database when the copy or `migrate` on it fails (a tool
//!   that applies every file again), said in an event and in `binky golden ls`.

use super::{GoldenController, GoldenError, GoldenInputs, CONDITION};
use crate::adapter::{CommandError, SliceAddress, SliceEffects, SliceFault, SliceSpec};
use crate::env::Layout;
use crate::runtime::Condition;
use crate::spec::Resource;
use crate::store::{self, now_ms, owner, write, GoldenRow, GoldenState, World};
use crate::supervisor::Supervisor;
use std::ops::ControlFlow;

/// The first 12 characters of a key, as `binky golden ls` shows them.
pub(super) fn short(key: &str) -> &str {
    &key[..key.len().min(12)]
}

/// The first line of a command's failure (its output tail follows on the next lines).
fn first_line(msg: &str) -> &str {
    msg.lines().next().unwrap_or(msg)
}

/// What making the migrated stage came to.
enum Stage {
    /// Made: how, in words.
    Made(String),
    /// `migrate` failed (or the server refused for good): the template fails.
    Failed(Condition),
}

impl<E: SliceEffects, S: Supervisor> GoldenController<E, S> {
    fn set_migrated(
        &self,
        key: &str,
        migrated: bool,
        how: &str,
        admin_url: Option<&str>,
    ) -> Result<(), GoldenError> {
        self.store.write(owner::Golden, |tx| {
            write::golden::set_migrated(tx, key, migrated, how, admin_url)
        })?;
        Ok(())
    }

    /// The template `g` grows from, recorded on its row (so it is not dropped while it is
    /// copied), or none.
    fn claim_base(
        &self,
        g: &GoldenRow,
        inputs: &GoldenInputs,
    ) -> Result<Option<GoldenRow>, GoldenError> {
        Ok(self.store.write(owner::Golden, |tx| {
            let pick = store::goldens(tx)?
                .into_iter()
                .filter(|b| {
                    b.key != g.key
                        && !b.lineage.is_empty()
                        && b.lineage == inputs.lineage
                        && b.migrated
                        && matches!(b.state, GoldenState::Ready | GoldenState::Failed)
                        && super::grows_from(&b.inputs, &inputs.migrations)
                })
                .max_by_key(|b| (b.inputs.len(), b.created_at));
            write::golden::set_base(tx, &g.key, pick.as_ref().map(|b| b.key.clone()))?;
            Ok(pick)
        })?)
    }

    /// Run `which` of `service` against `address`: `Ok(Err(message))` is the command's
    /// failure; a slice it needs that is not made yet is the error (retried).
    #[allow(clippy::too_many_arguments)]
    async fn run(
        &self,
        world: &World,
        layout: &Layout,
        service: &str,
        res: &Resource,
        which: &str,
        address: &SliceAddress,
    ) -> Result<Result<(), String>, GoldenError> {
        let cmd = if which == "migrate" {
            res.migrate.as_deref()
        } else {
            res.seed.as_deref()
        };
        let Some(cmd) = cmd else { return Ok(Ok(())) };
        match self
            .slices
            .run_command(world, layout, service, res, which, cmd, address)
            .await
        {
            Ok(()) => Ok(Ok(())),
            Err(CommandError::Failed(msg)) => Ok(Err(msg)),
            Err(CommandError::Waits(why)) => Err(GoldenError::WaitsForSlice {
                service: service.to_owned(),
                why,
            }),
        }
    }

    /// A failed command fails the template, with its output.
    fn command_failed(
        &self,
        world: &World,
        service: &str,
        g: &GoldenRow,
        msg: &str,
    ) -> Result<Condition, GoldenError> {
        self.set_state(&g.key, GoldenState::Failed, msg, None)?;
        let text = format!("{service}: golden template {}: {msg}", g.name);
        self.event(world, "golden_failed", &text);
        Ok(Condition::failed(CONDITION, "GoldenFailed", text))
    }

    /// Make `stage` the migrated stage of `b`'s template: grown from an earlier template's
    /// when one fits, else from an empty database.
    async fn migrated_stage(&self, b: &Build<'_>, stage: &SliceSpec) -> Result<Stage, GoldenError> {
        let base = if b.res.migrate.is_some() {
            self.claim_base(b.g, b.inputs)?
        } else {
            None
        };
        let mut note = String::new();
        if let Some(base) = base {
            match self.grow(b, &base, stage).await? {
                Ok(how) => return Ok(Stage::Made(how)),
                Err(why) => note = why,
            }
            self.store
                .write(owner::Golden, |tx| write::golden::clear_base(tx, &b.g.key))?;
            self.event(
                b.world,
                "golden_fallback",
                &format!(
                    "{}: golden template {}: {note}; building it from an empty database instead",
                    b.service, b.g.name
                ),
            );
        }
        let address = match self.slices.effects().provision(stage).await {
            Ok(a) => a,
            Err(fault) => return Ok(Stage::Failed(self.build_fault(b.g, b.service, fault)?)),
        };
        self.set_migrated(&b.g.key, false, "", address.admin_url.as_deref())?;
        if let Err(msg) = self
            .run(b.world, b.layout, b.service, b.res, "migrate", &address)
            .await?
        {
            return Ok(Stage::Failed(
                self.command_failed(b.world, b.service, b.g, &msg)?,
            ));
        }
        Ok(Stage::Made(if note.is_empty() {
            "built from an empty database".to_owned()
        } else {
            format!("built from an empty database: {note}")
        }))
    }

    /// Grow `stage` from a copy of the migrated stage of `base`, running `migrate` on it
    /// unless no migration changed. `Ok(how)` once made; `Err(why)` when the copy or
    /// `migrate` on it failed (the copy is dropped), to build from an empty database.
    async fn grow(
        &self,
        b: &Build<'_>,
        base: &GoldenRow,
        stage: &SliceSpec,
    ) -> Result<Result<String, String>, GoldenError> {
        let effects = self.slices.effects();
        let from = SliceSpec {
            slice: base.stage_name(),
            secret: base.secret.clone(),
            admin_url: base.admin_url.clone().or_else(|| stage.admin_url.clone()),
            ..stage.clone()
        };
        let unchanged = base.inputs == b.inputs.migrations;
        self.event(
            b.world,
            "golden",
            &format!(
                "{}: building golden template {} on a copy of the migrated stage of {} ({}){}",
                b.service,
                b.g.name,
                base.name,
                short(&base.key),
                if unchanged {
                    "; no migration changed, so migrate does not run"
                } else {
                    "; migrate applies only what is new"
                }
            ),
        );
        let address = match effects.clone_into(&from, stage).await {
            Ok(address) => address,
            Err(SliceFault::Transient(detail)) => {
                return Err(GoldenError::Waiting {
                    service: b.service.to_owned(),
                    detail,
                })
            }
            Err(SliceFault::Permanent(detail)) => {
                let _ = effects.teardown(stage).await;
                return Ok(Err(format!(
                    "copying the migrated stage of {} failed: {detail}",
                    short(&base.key)
                )));
            }
        };
        self.set_migrated(&b.g.key, false, "", address.admin_url.as_deref())?;
        if unchanged {
            return Ok(Ok(format!(
                "copied from the migrated stage of {} (no migration changed; migrate did not run)",
                short(&base.key)
            )));
        }
        match self
            .run(b.world, b.layout, b.service, b.res, "migrate", &address)
            .await?
        {
            Ok(()) => Ok(Ok(format!(
                "grown from {}: migrate ran on a copy of its migrated stage",
                short(&base.key)
            ))),
            Err(msg) => {
                let _ = effects.teardown(stage).await;
                Ok(Err(format!(
                    "migrate on a copy of {} failed: {}",
                    short(&base.key),
                    first_line(&msg)
                )))
            }
        }
    }

    /// Build the template of `g` in `world`'s worktree: its migrated stage (kept from an
    /// attempt before, grown from an earlier template, or from an empty database), then the
    /// seed on a copy of it.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn build(
        &self,
        world: &World,
        layout: &Layout,
        service: &str,
        res: &Resource,
        g: &GoldenRow,
        inputs: &GoldenInputs,
    ) -> Result<Option<Condition>, GoldenError> {
        let b = Build {
            world,
            layout,
            service,
            res,
            g,
            inputs,
        };
        let started = std::time::Instant::now();
        let template = self.template_spec(world, service, res, g);
        let staged = res.seed.is_some();
        let stage = if staged {
            SliceSpec {
                slice: store::stage_name(&g.name),
                ..template.clone()
            }
        } else {
            template.clone()
        };
        let how = match self.stage(&b, &template, &stage).await? {
            ControlFlow::Continue(how) => how,
            ControlFlow::Break(failed) => return Ok(Some(failed)),
        };
        if staged {
            if let ControlFlow::Break(failed) = self.seed(&b, &template, &stage).await? {
                return Ok(Some(failed));
            }
        }
        if let Err(fault) = self.slices.effects().seal(&template).await {
            return Ok(Some(self.build_fault(g, service, fault)?));
        }
        self.record_built(&b, &how, started.elapsed().as_millis() as i64)?;
        Ok(None)
    }

    /// The migrated stage of the build, sealed: kept from an attempt before that finished
    /// it (its seed failed, or its daemon died during the seed), so only the seed runs
    /// again; else made afresh, a half-built template of an earlier attempt dropped first
    /// (never reused). `Continue` with how it was made; `Break` with the failed condition.
    async fn stage(
        &self,
        b: &Build<'_>,
        template: &SliceSpec,
        stage: &SliceSpec,
    ) -> Result<ControlFlow<Condition, String>, GoldenError> {
        let (g, effects) = (b.g, self.slices.effects());
        let staged = b.res.seed.is_some();
        let kept = staged
            && g.staged
            && g.migrated
            && !matches!(effects.exists(stage).await, Ok(Some(false)));
        if kept {
            self.event(
                b.world,
                "golden",
                &format!(
                    "{}: golden template {}: its migrated stage is kept from the attempt before; running seed only",
                    b.service, g.name
                ),
            );
            return Ok(ControlFlow::Continue(if g.how.is_empty() {
                "seed run again on its kept migrated stage".to_owned()
            } else {
                format!("{}; seed run again on its kept migrated stage", g.how)
            }));
        }
        self.set_migrated(&g.key, false, "", None)?;
        let _ = effects.teardown(template).await;
        if staged {
            let _ = effects.teardown(stage).await;
        }
        self.store.write(owner::Golden, |tx| {
            write::golden::set_staged(tx, &g.key, staged)
        })?;
        let how = match self.migrated_stage(b, stage).await? {
            Stage::Made(how) => how,
            Stage::Failed(cond) => return Ok(ControlFlow::Break(cond)),
        };
        if staged {
            if let Err(fault) = effects.seal(stage).await {
                return Ok(ControlFlow::Break(self.build_fault(g, b.service, fault)?));
            }
            self.set_migrated(&g.key, true, &how, None)?;
        }
        Ok(ControlFlow::Continue(how))
    }

    /// Runs `seed` on a fresh copy of the migrated stage (a half-seeded copy of an attempt
    /// before goes). An adapter that cannot copy the stage gets the template migrated
    /// itself. A failed seed keeps the stage (the retry runs the seed alone).
    async fn seed(
        &self,
        b: &Build<'_>,
        template: &SliceSpec,
        stage: &SliceSpec,
    ) -> Result<ControlFlow<Condition>, GoldenError> {
        let (g, service, effects) = (b.g, b.service, self.slices.effects());
        let _ = effects.teardown(template).await;
        let address = match effects.clone_into(stage, template).await {
            Ok(a) => a,
            Err(SliceFault::Transient(detail)) => {
                return Err(GoldenError::Waiting {
                    service: service.to_owned(),
                    detail,
                })
            }
            Err(SliceFault::Permanent(detail)) => {
                self.event(
                    b.world,
                    "golden_fallback",
                    &format!(
                        "{service}: golden template {}: copying its migrated stage failed ({detail}); running migrate on it too",
                        g.name
                    ),
                );
                let _ = effects.teardown(template).await;
                let address = match effects.provision(template).await {
                    Ok(a) => a,
                    Err(fault) => {
                        return Ok(ControlFlow::Break(self.build_fault(g, service, fault)?))
                    }
                };
                if let Err(msg) = self
                    .run(b.world, b.layout, service, b.res, "migrate", &address)
                    .await?
                {
                    return Ok(ControlFlow::Break(
                        self.command_failed(b.world, service, g, &msg)?,
                    ));
                }
                address
            }
        };
        if let Err(msg) = self
            .run(b.world, b.layout, service, b.res, "seed", &address)
            .await?
        {
            // The half-seeded copy is of no use.
            let _ = effects.teardown(template).await;
            return Ok(ControlFlow::Break(
                self.command_failed(b.world, service, g, &msg)?,
            ));
        }
        Ok(ControlFlow::Continue(()))
    }

    /// Records the template built (`how`, in `ms`): ready, and used now.
    fn record_built(&self, b: &Build<'_>, how: &str, ms: i64) -> Result<(), GoldenError> {
        let g = b.g;
        self.set_migrated(&g.key, true, how, None)?;
        self.set_state(&g.key, GoldenState::Ready, "", Some(ms))?;
        self.store.write(owner::Golden, |tx| {
            write::golden::set_used(tx, &g.key, now_ms())
        })?;
        self.event(
            b.world,
            "golden",
            &format!(
                "{}: built golden template {} in {:.1}s ({how})",
                b.service,
                g.name,
                ms as f64 / 1000.0
            ),
        );
        Ok(())
    }
}

/// One template build: the world whose worktree runs it, the service, the template's row
/// and what it is made of.
struct Build<'a> {
    world: &'a World,
    layout: &'a Layout,
    service: &'a str,
    res: &'a Resource,
    g: &'a GoldenRow,
    inputs: &'a GoldenInputs,
}
