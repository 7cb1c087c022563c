//! Shared services (see [`crate::shared`]) in the process controller: which of a project's
//! shared processes run, whether a world's shared services are ready, and the nudges
//! between a shared world and the worlds that use it.
//!
//! # Guarantees
//! - The shared world runs the shared processes some running, admitted world of its
//!   project selects (and what they depend on), computed from those worlds' records at
//!   each reconcile: never from a nudge alone.
//! - A world whose `wants` changed (it came up, went down, was admitted, was removed)
//!   nudges its shared world; a shared world whose services' readiness changed nudges the
//!   worlds that use them, so a dependent waiting for a shared service starts without
//!   waiting for a resync.

use std::collections::{BTreeMap, BTreeSet};

use super::ProcessController;
use crate::runtime::Condition;
use crate::store::{self, ProcState, ProcessRow, SliceState, StoreError, World};
use crate::supervisor::Supervisor;

/// What a world concluded of the shared services it selects.
pub(super) struct SharedReady {
    /// How many are ready (every replica running and healthy).
    pub(super) ready: usize,
    /// What the others wait for.
    pub(super) waiting: Vec<String>,
    /// A shared service that failed: a person must look.
    pub(super) problem: Option<Condition>,
}

impl<S: Supervisor> ProcessController<S> {
    /// The process services `world` runs now: a user world, its selected ones but the
    /// shared ones; a shared world, the ones its project's worlds want.
    pub(super) fn running_services(&self, world: &World) -> Result<BTreeSet<String>, StoreError> {
        let chosen = if world.is_shared() {
            let users = self
                .store
                .read(|c| store::user_worlds(c, world.project_id))?;
            let mut wants = Vec::new();
            for u in &users {
                wants.push(wanted_by(u, self.admitted(u)?, self.has_live_processes(u)?));
            }
            wanted(world, wants)
        } else {
            world.spec.selected(world.group.as_deref())
        };
        Ok(chosen
            .into_iter()
            .filter(|n| world.spec.services[n].process().is_some() && world.runs(n))
            .collect())
    }

    /// Is `world` through the gate?
    fn admitted(&self, world: &World) -> Result<bool, StoreError> {
        Ok(crate::hold::held(&self.store, world)?.is_none())
    }

    /// Does a process of `world` of its own run (or is being stopped)?
    fn has_live_processes(&self, world: &World) -> Result<bool, StoreError> {
        Ok(self
            .store
            .read(|c| store::processes(c, world.id))?
            .iter()
            .any(|p| p.pid.is_some() && world.runs(&p.service)))
    }

    /// The shared world's process rows of the services `world` shares, added to `rows`
    /// (its own rows win: it has none of a service it shares once those are forgotten).
    pub(super) fn add_shared_rows(
        &self,
        world: &World,
        rows: &mut BTreeMap<String, ProcessRow>,
    ) -> Result<(), StoreError> {
        for r in self.store.read(|c| store::shared_processes(c, world))? {
            rows.entry(r.service.clone()).or_insert(r);
        }
        Ok(())
    }

    /// Are the shared process services `world` selects ready, from the shared world's rows
    /// (in `rows`)?
    pub(super) fn shared_ready(
        &self,
        world: &World,
        rows: &BTreeMap<String, ProcessRow>,
    ) -> SharedReady {
        let mut out = SharedReady {
            ready: 0,
            waiting: Vec::new(),
            problem: None,
        };
        if world.is_shared() || world.desired != store::DesiredState::Running {
            return out;
        }
        for name in world.spec.selected(world.group.as_deref()) {
            if world.runs(&name) || world.spec.services[&name].process().is_none() {
                continue;
            }
            let instances: Vec<&ProcessRow> = instances_of(rows, &name).collect();
            if !instances.is_empty() && instances.iter().all(|r| r.is_ready()) {
                out.ready += 1;
                continue;
            }
            let stuck = instances.iter().find(|r| !r.is_ready());
            let why = match stuck {
                Some(r) if !r.message.is_empty() => r.message.clone(),
                Some(r) => r.state.as_str().to_owned(),
                None => "not started yet".to_owned(),
            };
            if let Some(r) = stuck.filter(|r| {
                r.state == ProcState::Failed
                    || (r.state == ProcState::Backoff && r.failures >= self.config.crash_loop_after)
            }) {
                out.problem.get_or_insert_with(|| {
                    Condition::failed(
                        super::CONDITION,
                        if r.state == ProcState::Failed {
                            "ServiceFailed"
                        } else {
                            "CrashLoop"
                        },
                        format!(
                            "{} (shared by the project's worlds): {why}; see `binky logs {} {}`",
                            r.service,
                            crate::shared::WORLD,
                            r.service
                        ),
                    )
                });
            }
            out.waiting.push(format!("{name} (shared): {why}"));
        }
        out
    }

    /// A user world tells its shared world when what it wants of it changed, or when the
    /// shared world was written since (this world's `binky up` or edit changed a shared
    /// definition, and the command nudged only this world), and once per daemon: the
    /// shared world then starts, stops or restarts its processes.
    pub(super) fn tell_the_shared_world(&self, world: &World) {
        if world.is_shared() || crate::shared::declared(&world.spec).is_empty() {
            return;
        }
        let Some(trigger) = &self.trigger else { return };
        let read = self.admitted(world).and_then(|admitted| {
            let shared = self
                .store
                .read(|c| store::shared_world(c, world.project_id))?;
            let live = self.has_live_processes(world)?;
            Ok((wanted_by(world, admitted, live), shared))
        });
        let (wants, shared) = match read {
            Ok((wants, Some(shared))) => (wants, shared),
            Ok((_, None)) => return,
            Err(err) => {
                tracing::warn!(%err, world = %world.name, "cannot read the shared world");
                return;
            }
        };
        let news = (wants, shared.generation);
        let changed = {
            let mut told = self.told.lock().unwrap_or_else(|e| e.into_inner());
            told.insert(world.id, news.clone()) != Some(news)
        };
        if changed {
            trigger.world(shared.id);
        }
    }

    /// A world being removed wants nothing any more.
    pub(super) fn forget_wants(&self, world: &World) {
        self.told
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&world.id);
        if let (Some(trigger), false) = (&self.trigger, world.is_shared()) {
            if let Ok(Some(shared)) = self
                .store
                .read(|c| store::shared_world(c, world.project_id))
            {
                trigger.world(shared.id);
            }
        }
    }

    /// A shared world tells the worlds of its project when its services' readiness (or its
    /// slices') changed: their dependents may start, their routes change.
    pub(super) fn tell_users(&self, world: &World) {
        if !world.is_shared() {
            return;
        }
        let Some(trigger) = &self.trigger else { return };
        let read = self.store.read(|c| {
            let procs = store::processes(c, world.id)?;
            let slices = store::slices(c, world.id)?;
            let users = store::user_worlds(c, world.project_id)?;
            Ok((procs, slices, users))
        });
        let (procs, slices, users) = match read {
            Ok(r) => r,
            Err(err) => {
                tracing::warn!(%err, "cannot read the shared world");
                return;
            }
        };
        let digest: String = procs
            .iter()
            .map(|p| format!("{}={}/{};", p.service, p.state.as_str(), p.is_ready()))
            .chain(
                slices
                    .iter()
                    .map(|s| format!("{}={};", s.service, s.state == SliceState::Ready)),
            )
            .collect();
        let changed = {
            let mut seen = self.digests.lock().unwrap_or_else(|e| e.into_inner());
            seen.insert(world.id, digest.clone()) != Some(digest)
        };
        if changed {
            for u in users
                .iter()
                .filter(|u| !crate::shared::declared(&u.spec).is_empty())
            {
                trigger.world(u.id);
            }
        }
    }
}

/// The rows of `service`'s instances (`mail`, `mail.1`, …) in `rows`.
pub(super) fn instances_of<'r>(
    rows: &'r BTreeMap<String, ProcessRow>,
    service: &'r str,
) -> impl Iterator<Item = &'r ProcessRow> + 'r {
    rows.values()
        .filter(move |r| crate::replica::service_of(&r.service) == service)
}

/// The shared services `user` wants running now: those it selects (its group and what
/// that depends on) while it is meant to run, is not being removed and is `admitted` at
/// the gate — or while its own processes still run (`live`: a world going down stops its
/// processes before the shared services they use, as dependents before dependencies).
pub(super) fn wanted_by(user: &World, admitted: bool, live: bool) -> BTreeSet<String> {
    let up = !user.deleted && user.desired == store::DesiredState::Running && admitted;
    if user.is_shared() || !(up || live) {
        return BTreeSet::new();
    }
    let declared = crate::shared::declared(&user.spec);
    user.spec
        .selected(user.group.as_deref())
        .into_iter()
        .filter(|n| declared.contains(n))
        .collect()
}

/// The services of the shared world `shared` that run: those some world wants (the union
/// of [`wanted_by`]), and the shared services they depend on, as `shared`'s spec defines them.
pub(super) fn wanted(
    shared: &World,
    wants: impl IntoIterator<Item = BTreeSet<String>>,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack: Vec<String> = wants.into_iter().flatten().collect();
    while let Some(name) = stack.pop() {
        let Some(svc) = shared.spec.services.get(&name) else {
            continue;
        };
        if out.insert(name) {
            stack.extend(svc.depends_on.iter().cloned());
        }
    }
    out
}
