//! The golden controller: one template per key, migrated and seeded once, that worlds are
//! cloned from (server-side) instead of each running `migrate` and `seed`.
//!
//! # Guarantees
//! - The key hashes the adapter, the server, `clone_from`, `migrate`, `seed` and the
//!   contents of the files they depend on: the migration and seed files of the common
//!   frameworks found in the workdir (Alembic's `script_location`, `migrations/`,
//!   `db/migrate/`, `prisma/migrations/`, `seeds/`, `*.sql`, … see [`key_coverage`]), the
//!   files the commands name and `clone_key_files`: a changed migration, committed or not,
//!   builds a new template by itself. Only the project's files count (what git tracks or
//!   would track), so the key is the same in every worktree of a commit whatever was
//!   brought into it, and while it is being brought.
//! - No reconcile waits for another's work: a build is claimed only once the slices its
//!   `migrate` and `seed` name are made, and templates whose builds need each other's
//!   slices fail the world with `DependencyCycle` (`crate::needs`).
//! - A `building` template is held by a build running in this daemon; one that none holds
//!   is built by the next world that wants it, or dropped once none does.
//! - A template is built in stages and grows (`build.rs` has the rule): its migrated,
//!   unseeded stage is kept, so a failed `seed` is retried alone and `seed` never runs on a
//!   seeded database; a new template starts from a copy of the migrated stage of the newest
//!   earlier template of its service whose migrations are all still there unchanged, and
//!   `migrate` applies only what is new, falling back to an empty database when that fails.
//!   `binky golden ls` says which way each was built.
//! - Two worlds that need the same template while it builds wait for one build, never two
//!   (the row is claimed in one transaction against its primary key).
//! - A template is `ready` only after its build finished and it was sealed (closed to
//!   connections); no world is ever cloned from a half-built or failed one.
//! - A build left by a daemon that died is started again by the next daemon, keeping a
//!   migrated stage it finished.
//! - A template outlives its last world for `golden_keep` (`keep.rs` has the rule), and goes
//!   sooner by `binky golden rm` or when the disk of its managed server is short; one a
//!   world uses or a build copies is never dropped under it.
//! - A failed build keeps the command's output tail; a changed command (a new key) or the
//!   next `binky up` builds again.

mod build;
mod keep;

use std::sync::Arc;
use std::time::Duration;

use crate::adapter::{random_secret, SliceEffects, SliceFault, SliceSpec, SliceWork};
use crate::env::Layout;
use crate::machine::Machine;
use crate::registry::Kind;
use crate::runtime::{Action, Applied, Cleanup, Condition, Controller, ReconcileError};
use crate::spec::Resource;
use crate::store::{self, now_ms, owner, write, GoldenRow, Store, StoreError, World};
use crate::store::{GoldenState, SliceState, WorktreeState};
use crate::supervisor::Supervisor;
use crate::template::template_inputs;
pub use crate::template::{
    golden_inputs, golden_key, golden_name, grows_from, key_coverage, key_files, GoldenInputs,
    KeyCoverage,
};

/// The condition this controller reports.
const CONDITION: &str = Kind::Golden.condition();

/// Why the golden controller could not converge.
#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No password could be made for a new template.
    #[error(transparent)]
    Random(#[from] crate::random::RandomError),
    /// The template's server is not reachable yet.
    #[error("{service}: waiting for the server of its golden template: {detail}; retrying")]
    Waiting {
        /// The service.
        service: String,
        /// What the adapter said.
        #[source]
        detail: crate::adapter::Cause,
    },
    /// A command of the build needs a slice of the world that is not made yet.
    #[error("{service}: its golden template waits: {why}")]
    WaitsForSlice {
        /// The service.
        service: String,
        /// Which slice, and what names it.
        why: String,
    },
}

impl ReconcileError for GoldenError {
    fn reason(&self) -> &'static str {
        match self {
            GoldenError::Store(_) => "StoreFailed",
            GoldenError::Random(_) => "NoRandomness",
            GoldenError::Waiting { .. } => "ServerUnavailable",
            GoldenError::WaitsForSlice { .. } => "WaitingForSlice",
        }
    }
}

/// The golden controller.
pub struct GoldenController<E, S> {
    store: Store,
    /// Provisioning, command running and slice specs, shared with the slice controller.
    slices: Arc<SliceWork<E, S>>,
    /// This daemon (`pid:start_time`): a `building` row of another builder is stale.
    builder: String,
    /// What measures the disk of managed servers (unused templates go when it is short);
    /// none: the disk is never looked at.
    machine: Option<Arc<dyn Machine>>,
    /// One sweep at a time (a world's reconcile and the housekeeping both sweep).
    sweeping: tokio::sync::Mutex<()>,
    /// The templates whose build runs in this daemon now (claimed to built, or failed):
    /// a `building` row not here belongs to no running build. A drop is claimed under the
    /// same lock, so a build and a drop of one template never overlap.
    building_now: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// Sweeps in a row that left a drop unfinished: the next comes sooner than a resync.
    drop_failures: std::sync::Mutex<u32>,
}

/// A build of one template running in this daemon: while it lives, the key is in
/// `building_now` (the sweep leaves the template alone); dropped, even by a cancelled
/// reconcile, it is not.
struct BuildingNow<'a> {
    set: &'a std::sync::Mutex<std::collections::BTreeSet<String>>,
    key: String,
}

impl Drop for BuildingNow<'_> {
    fn drop(&mut self) {
        self.set
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
    }
}

impl<E: SliceEffects, S: Supervisor> GoldenController<E, S> {
    /// A controller over `store`, using `slices` (shared with the slice controller) for the
    /// work, identifying its builds as `builder`.
    pub fn new(store: Store, slices: Arc<SliceWork<E, S>>, builder: String) -> Self {
        GoldenController {
            store,
            slices,
            builder,
            machine: None,
            sweeping: tokio::sync::Mutex::new(()),
            building_now: Default::default(),
            drop_failures: Default::default(),
        }
    }

    /// Measure the disk with `machine`: unused templates on a managed server whose disk has
    /// less than `disk_reserve_gib` free go before their `golden_keep`.
    pub fn with_machine(mut self, machine: Arc<dyn Machine>) -> Self {
        self.machine = Some(machine);
        self
    }

    fn event(&self, world: &World, kind: &str, msg: &str) {
        let _ = self.store.event(world.id, kind, msg);
    }

    fn golden(&self, key: &str) -> Result<Option<GoldenRow>, StoreError> {
        self.store.read(|c| store::golden(c, key))
    }

    fn template_spec(
        &self,
        world: &World,
        service: &str,
        res: &Resource,
        g: &GoldenRow,
    ) -> SliceSpec {
        self.slices.spec_of(world, service, res, &g.name, &g.secret)
    }

    fn set_state(
        &self,
        key: &str,
        state: GoldenState,
        output: &str,
        build_ms: Option<i64>,
    ) -> Result<(), StoreError> {
        self.store.write(owner::Golden, |tx| {
            write::golden::set_state(tx, key, state, output, build_ms)
        })
    }

    /// A build step's fault: one that may pass is retried (the runtime's backoff), one that
    /// will not fails the template until its inputs change.
    fn build_fault(
        &self,
        g: &GoldenRow,
        service: &str,
        fault: SliceFault,
    ) -> Result<Condition, GoldenError> {
        match fault {
            SliceFault::Transient(detail) => Err(GoldenError::Waiting {
                service: service.to_owned(),
                detail,
            }),
            SliceFault::Permanent(detail) => {
                self.set_state(&g.key, GoldenState::Failed, &detail.to_string(), None)?;
                Ok(Condition::failed(
                    CONDITION,
                    "GoldenFailed",
                    format!("{service}: golden template: {detail}"),
                ))
            }
        }
    }

    /// Forget `world`'s references of `services` (all of them: `None`); the templates they
    /// named were last used now.
    /// Returns whether there was any (with none, nothing is written).
    fn forget_refs(&self, world: &World, services: Option<&[String]>) -> Result<bool, StoreError> {
        let any = self
            .store
            .read(|c| store::golden_refs_of(c, world.id))?
            .iter()
            .any(|(service, _)| services.is_none_or(|s| s.contains(service)));
        if !any {
            return Ok(false);
        }
        self.store.write(owner::Golden, |tx| {
            let now = now_ms();
            let refs = store::golden_refs_of(tx, world.id)?;
            for (service, key) in refs {
                if services.is_some_and(|s| !s.contains(&service)) {
                    continue;
                }
                write::golden::remove_ref(tx, world.id, &service)?;
                write::golden::set_used(tx, &key, now)?;
            }
            Ok(true)
        })
    }

    /// Sweep, saying (not failing) what went wrong: a world's reconcile does not fail for it.
    async fn sweep_now(&self) {
        if let Err(err) = self.sweep().await {
            tracing::warn!(%err, "cannot look at the golden templates to drop");
        }
    }

    /// Converges the template of one service that clones: its key from the files as they
    /// are now, the world's reference to it, and (unless the world's slice exists already)
    /// the template itself, built here or waited for.
    async fn converge_template(
        &self,
        world: &World,
        layout: &Layout,
        service: &str,
        res: &Resource,
        slice_ready: bool,
    ) -> Result<TemplateStep, GoldenError> {
        let base = self.slices.spec_of(world, service, res, "", "");
        let clone = match self.slices.effects().can_clone(&base).await {
            Ok(c) => c,
            Err(SliceFault::Transient(detail)) => {
                return Err(GoldenError::Waiting {
                    service: service.to_owned(),
                    detail,
                })
            }
            Err(SliceFault::Permanent(_)) => false,
        };
        if !clone {
            return Ok(TemplateStep::CannotClone(format!(
                "{service}: adapter {} cannot clone; each world runs migrate and seed",
                res.adapter
            )));
        }
        let inputs = template_inputs(world, layout, service, res, &base);
        self.refer(world, service, &inputs.key)?;
        // A world whose slice exists already needs no template (a changed migrate
        // runs on its own copy); the reference keeps the template for later worlds.
        if slice_ready {
            return Ok(TemplateStep::Kept);
        }
        let home = self.store.read(store::home_id)?;
        let name = golden_name(
            &home,
            res.clone_from.as_deref().unwrap_or("golden"),
            &inputs.key,
        );
        let existing = self.golden(&inputs.key)?;
        if let Some(g) = &existing {
            if !self.builds_again(world, g)? {
                return Ok(template_state(service, g));
            }
        }
        // This world is to build it: its migrate and seed run with the service's env, so
        // the slices of other services named there come first (made meanwhile by the slice
        // controller); never claimed while they are not, so no world waits on a claim
        // that waits.
        if let Some(step) = self.slices_first(world, service, &name)? {
            return Ok(step);
        }
        // Held from the claim to the build's end: no sweep drops it meanwhile.
        let Some(_building) = self.start_building(&inputs.key) else {
            return Ok(TemplateStep::WaitingForTemplate(format!(
                "{service}: golden template {name} is being built"
            )));
        };
        let claimed = match &existing {
            None => self.claim(world, res, &inputs, &name)?,
            Some(_) => false,
        };
        let Some(g) = self.golden(&inputs.key)? else {
            return Ok(TemplateStep::Kept);
        };
        if g.state == GoldenState::Dropping {
            return Ok(template_state(service, &g));
        }
        if claimed {
            self.event(world, "golden", &format!("{service}: building golden template {} (migrate and seed once; other worlds are cloned from it)", g.name));
        } else if self.takes_over(world, &g)? {
            self.reclaim(world, service, &g, &inputs)?;
        } else {
            return Ok(template_state(service, &g));
        }
        // Its migrate runs in this worktree once the paths its workdir needs are
        // brought (its `.venv`); the build stays claimed meanwhile.
        let brought = self.store.read(|c| {
            store::bootstrap_waits_to_migrate(
                c,
                world.id,
                &crate::env::workdir_rel(world, &res.workdir),
            )
        })?;
        if !brought.is_empty() {
            return Ok(TemplateStep::WaitingForPaths(format!(
                "{service}: waiting for {} to be brought into the worktree to build golden template {}",
                brought.join(", "),
                g.name
            )));
        }
        let g = self.golden(&inputs.key)?.unwrap_or(g);
        Ok(
            match self.build(world, layout, service, res, &g, &inputs).await? {
                Some(cond) => TemplateStep::Report(Applied::await_change(vec![cond])),
                None => TemplateStep::Kept,
            },
        )
    }

    /// Records that `world`'s `service` clones the template `key`; one it referred to before
    /// was last used now.
    fn refer(&self, world: &World, service: &str, key: &str) -> Result<(), StoreError> {
        self.store.write(owner::Golden, |tx| {
            write::golden::refer(tx, world.id, service, key)
        })
    }

    /// What a build of `service`'s template (`name`) by `world` waits for: the slices of
    /// other services its migrate and seed name that are not made yet; or, when those wait
    /// (through templates of theirs) for this very template, the cycle, which fails the
    /// world saying how to break it. `None`: nothing, it may build.
    fn slices_first(
        &self,
        world: &World,
        service: &str,
        name: &str,
    ) -> Result<Option<TemplateStep>, GoldenError> {
        let unmade = self.slices.unmade_needs(world, service)?;
        if unmade.is_empty() {
            return Ok(None);
        }
        let selected = world.spec.selected(world.group.as_deref());
        let makes = |n: &str| selected.contains(n) && world.runs(n);
        if let Some(cycle) = crate::needs::template_cycle(&world.spec, service, &makes) {
            return Ok(Some(TemplateStep::Report(Applied::await_change(vec![
                Condition::failed(
                    CONDITION,
                    "DependencyCycle",
                    format!(
                        "{service}: golden template {name} can never be built: {cycle}; fix: {}",
                        cycle.fix()
                    ),
                ),
            ]))));
        }
        Ok(Some(TemplateStep::WaitingForSlices(
            crate::needs::said(&unmade, &format!("build golden template {name}"))
                .map(|why| format!("{service}: {why}"))
                .unwrap_or_default(),
        )))
    }

    /// Claims the build of the template of `inputs` (`name`) for this daemon and `world`,
    /// unless a row of it exists already. Returns whether it was claimed.
    fn claim(
        &self,
        world: &World,
        res: &Resource,
        inputs: &GoldenInputs,
        name: &str,
    ) -> Result<bool, GoldenError> {
        let input_files = serde_json::to_string(&inputs.migrations).unwrap_or_default();
        let secret = random_secret()?;
        Ok(self.store.write(owner::Golden, |tx| {
            write::golden::claim(
                tx,
                &self.building(world),
                res,
                inputs,
                name,
                &secret,
                &input_files,
            )
        })?)
    }

    /// This daemon, building a template for `world`.
    fn building(&self, world: &World) -> write::golden::Builder<'_> {
        write::golden::Builder {
            builder: &self.builder,
            world: world.id,
        }
    }

    /// Whether `world` builds the template `g` claimed before: a build by a daemon that
    /// died, this world's own (retried after its server was out of reach, or after the
    /// paths it waited for came), a failed build the world's new `binky up` retries, or a
    /// build nothing carries on: none runs here, and the world it was claimed for was
    /// removed or no longer wants it (its key moved).
    /// A template `binky golden rm` asked to drop is not taken over: the sweep drops it,
    /// and the world then builds a fresh one that the request does not reach (taken over,
    /// the build would finish and be dropped under the old request after the world cloned).
    fn builds_again(&self, world: &World, g: &GoldenRow) -> Result<bool, StoreError> {
        if self.is_building(&g.key) || self.store.read(store::golden_drops)?.contains(&g.key) {
            return Ok(false);
        }
        self.takes_over(world, g)
    }

    /// [`Self::builds_again`], but for the world that holds the template's build here (it
    /// marked it being built before it read `g` again).
    fn takes_over(&self, world: &World, g: &GoldenRow) -> Result<bool, StoreError> {
        if g.retried_for(world.last_used_at) {
            return Ok(true);
        }
        if g.state != GoldenState::Building {
            return Ok(false);
        }
        if g.builder != self.builder || g.owner_world == Some(world.id) {
            return Ok(true);
        }
        Ok(!self.owner_wants(g)?)
    }

    /// Whether the world `g` was claimed for is still there and still clones from it.
    fn owner_wants(&self, g: &GoldenRow) -> Result<bool, StoreError> {
        let Some(owner) = g.owner_world else {
            return Ok(false);
        };
        self.store.read(|c| {
            let alive = store::world(c, owner)?.is_some_and(|w| !w.deleted);
            Ok(alive
                && store::golden_refs_of(c, owner)?
                    .values()
                    .any(|k| *k == g.key))
        })
    }

    /// Whether a build of the template `key` runs in this daemon now.
    pub(crate) fn is_building(&self, key: &str) -> bool {
        self.building_now
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(key)
    }

    /// Marks the template `key` as being built here until the guard goes; `None` when a
    /// build of it runs here already.
    fn start_building(&self, key: &str) -> Option<BuildingNow<'_>> {
        let mut now = self.building_now.lock().unwrap_or_else(|e| e.into_inner());
        now.insert(key.to_owned()).then(|| BuildingNow {
            set: &self.building_now,
            key: key.to_owned(),
        })
    }

    /// Claims the build of the existing template `g` for this daemon and `world`, saying so
    /// unless it is this daemon's own build of this world retried (which the condition
    /// already says, not an event each try).
    fn reclaim(
        &self,
        world: &World,
        service: &str,
        g: &GoldenRow,
        inputs: &GoldenInputs,
    ) -> Result<(), StoreError> {
        let retry = g.state == GoldenState::Building
            && g.builder == self.builder
            && g.owner_world == Some(world.id);
        let input_files = serde_json::to_string(&inputs.migrations).unwrap_or_default();
        self.store.write(owner::Golden, |tx| {
            write::golden::reclaim(tx, &self.building(world), inputs, &input_files)
        })?;
        if !retry {
            self.event(
                world,
                "golden",
                &format!("{service}: building golden template {} again", g.name),
            );
        }
        Ok(())
    }
}

impl<E: SliceEffects, S: Supervisor> Controller for GoldenController<E, S> {
    type Error = GoldenError;

    fn kind(&self) -> Kind {
        Kind::Golden
    }

    async fn apply(&self, world: &World) -> Result<Applied, GoldenError> {
        // The admission gate: nothing of a held world starts.
        if let Some(held) = crate::hold::hold(&self.store, world, CONDITION)? {
            return Ok(held);
        }
        let wanted = cloning_services(world);
        if wanted.is_empty() {
            // Only a world that stopped cloning has references to forget and templates that
            // may go: an idle world without templates costs nothing here.
            if self.forget_refs(world, None)? {
                self.sweep_now().await;
            }
            return Ok(Applied::await_change(vec![Condition::ok(
                CONDITION,
                "NoTemplates",
                "no service clones from a golden template",
            )]));
        }
        let Some(layout) = self
            .store
            .read(|c| store::worktree(c, world.id))?
            .filter(|w| w.state == WorktreeState::Ready)
            .map(|w| Layout { worktree: w.path })
        else {
            return Ok(Applied::await_change(vec![Condition::waiting(
                CONDITION,
                "Waiting",
                "waiting for the worktree",
            )]));
        };
        let have = self.store.read(|c| store::slices(c, world.id))?;
        let refs_now = self.store.read(|c| store::golden_refs_of(c, world.id))?;
        let mut keep: Vec<String> = Vec::new();
        let mut notes = Vec::new();
        let mut waiting: Option<String> = None;
        for (service, res) in &wanted {
            let slice_ready = have
                .iter()
                .any(|r| r.service == *service && r.state == SliceState::Ready);
            // A ready slice with its reference recorded needs nothing here: no key to compute
            // (a walk and a hash of the files), no template to build. The slice controller
            // says what is unset; no template is built on it.
            if (slice_ready && refs_now.contains_key(service))
                || crate::adapter::unset_settings(world, res).is_some()
            {
                keep.push(service.clone());
                continue;
            }
            let step = self
                .converge_template(world, &layout, service, res, slice_ready)
                .await?;
            if !matches!(step, TemplateStep::CannotClone(_)) {
                keep.push(service.clone());
            }
            match step {
                TemplateStep::CannotClone(note) => notes.push(note),
                TemplateStep::Kept => {}
                TemplateStep::WaitingForPaths(why) | TemplateStep::WaitingForSlices(why) => {
                    waiting.get_or_insert(why);
                }
                TemplateStep::WaitingForTemplate(why) => waiting = Some(why),
                TemplateStep::Report(applied) => return Ok(applied),
            }
        }
        // This world's services that no longer clone: their references go. (A reference
        // this pass made is in `keep`, so the ones read before the loop are all there is.)
        let gone: Vec<String> = refs_now.into_keys().filter(|s| !keep.contains(s)).collect();
        if !gone.is_empty() {
            self.forget_refs(world, Some(&gone))?;
        }
        self.sweep_now().await;
        Ok(report(waiting, &notes))
    }

    async fn cleanup(&self, world: &World) -> Result<Cleanup, GoldenError> {
        self.forget_refs(world, None)?;
        self.sweep_now().await;
        Ok(Cleanup::Done)
    }

    async fn housekeep(&self) -> Option<Duration> {
        match self.sweep().await {
            Ok(next) => next,
            Err(err) => {
                tracing::warn!(%err, "cannot look at the golden templates to drop");
                None
            }
        }
    }
}

/// Where converging one service's template came to.
enum TemplateStep {
    /// Its adapter cannot clone: the note says so, and each world makes its own slice.
    CannotClone(String),
    /// Nothing to wait for: the template is ready, or the world's slice needs none.
    Kept,
    /// This world builds it once paths are brought into its worktree: why.
    WaitingForPaths(String),
    /// This world builds it once the slices its commands name are made: why.
    WaitingForSlices(String),
    /// Another world builds it, or it is being dropped: why.
    WaitingForTemplate(String),
    /// The world's report, now (the template failed).
    Report(Applied),
}

/// The selected services of `world` that clone from a golden template (a shared slice is
/// its shared world's to clone).
fn cloning_services(world: &World) -> Vec<(String, Resource)> {
    let selected = world.spec.selected(world.group.as_deref());
    world
        .spec
        .services
        .iter()
        .filter(|(n, _)| selected.contains(*n) && world.runs(n))
        .filter_map(|(n, s)| {
            s.resource()
                .filter(|r| r.clone_from.is_some())
                .cloned()
                .map(|r| (n.clone(), r))
        })
        .collect()
}

/// What a world waits for or reports of a template another world claimed.
fn template_state(service: &str, g: &GoldenRow) -> TemplateStep {
    match g.state {
        GoldenState::Ready => TemplateStep::Kept,
        GoldenState::Failed => {
            TemplateStep::Report(Applied::await_change(vec![Condition::failed(
                CONDITION,
                "GoldenFailed",
                format!("{service}: golden template {} failed: {}", g.name, g.output),
            )]))
        }
        GoldenState::Building => TemplateStep::WaitingForTemplate(format!(
            "{service}: golden template {} is being built by another world",
            g.name
        )),
        GoldenState::Dropping => TemplateStep::WaitingForTemplate(format!(
            "{service}: golden template {} is being dropped; it is built again once it is gone",
            g.name
        )),
    }
}

/// The world's report once each of its templates is ready or waited for: what it waits
/// for, else ready (with what `notes` say of the services that cannot clone).
fn report(waiting: Option<String>, notes: &[String]) -> Applied {
    if let Some(w) = waiting {
        return Applied {
            action: Action::Requeue(Duration::from_millis(300)),
            conditions: vec![Condition::waiting(CONDITION, "Building", w)],
        };
    }
    let msg = if notes.is_empty() {
        "golden templates ready".to_owned()
    } else {
        notes.join("; ")
    };
    Applied::await_change(vec![Condition::ok(CONDITION, "Ready", msg)])
}
