//! A service's `setup`: a task run once per world (again when its resolved text changes)
//! before the first start, waiting only for the slices whose addresses it uses.

use super::*;
use crate::store::write;

impl<S: Supervisor> ProcessController<S> {
    /// `setup` runs as a supervised task (so `binky down` stops it at once and other
    /// services go on meanwhile); while it runs, `spec_hash` holds the hash of the setup
    /// command it runs.
    pub(super) async fn setup_running(
        &self,
        s: &Svc<'_>,
        row: &mut ProcessRow,
    ) -> Result<Flow, StoreError> {
        let (Some(pid), Some(start_time)) = (row.pid, row.start_time) else {
            // A daemon died before recording its pid (the startup sweep stopped it).
            row.state = ProcState::Pending;
            return Ok(Flow::Next);
        };
        let id = ProcId { pid, start_time };
        match self.sup.liveness(s.world.id, id) {
            Liveness::Running => {
                let ran = ms_since(row.started_at);
                if ran <= self.config.setup_timeout {
                    return Ok(Flow::Done(Step {
                        // Its exit nudges the world; this is the time limit.
                        wake: Some(self.config.setup_timeout - ran),
                        waiting: Some(format!("{}: running setup", s.name)),
                        ..Step::default()
                    }));
                }
                // A setup (`npm install`) is asked to stop as any command is.
                self.sup.stop(id, self.stop_how(None)).await;
                let why = format!("it took longer than {}", secs(self.config.setup_timeout));
                Ok(Flow::Done(self.setup_failed(s, row, &why)?))
            }
            Liveness::Exited(exit) => {
                forget_process(row);
                if exit.success() {
                    self.record_setup_changes(s.world).await;
                    row.setup_hash = row.spec_hash.take();
                    row.state = ProcState::Pending;
                    self.event(
                        s.world.id,
                        "setup",
                        &format!(
                            "{}: setup finished in {}",
                            s.name,
                            secs(ms_since(row.started_at))
                        ),
                    );
                    self.save(s.world.id, row)?;
                    Ok(Flow::Next)
                } else if exit.code.is_none() && exit.signal.is_none() {
                    // Adopted from a daemon that died meanwhile: how it ended is unknown,
                    // so it runs again.
                    row.state = ProcState::Pending;
                    Ok(Flow::Next)
                } else {
                    Ok(Flow::Done(self.setup_failed(s, row, &exit.to_string())?))
                }
            }
        }
    }

    /// `setup` waits for nothing but the worktree (and the addresses its own text refers
    /// to): a frontend's `npm install` runs while the database is still being made. A
    /// replicated service's setup runs once, in replica 0; the other replicas wait for it
    /// (three `npm install`s in one directory at once would trip over each other).
    pub(super) async fn start_setup(
        &self,
        s: &Svc<'_>,
        row: &mut ProcessRow,
        rows: &BTreeMap<String, ProcessRow>,
        slices: &[store::SliceRow],
    ) -> Result<Flow, StoreError> {
        let Some(setup) = &s.process.setup else {
            return Ok(Flow::Next);
        };
        let name = s.name;
        if s.replica > 0 {
            let first = s.resolved.tokens.resolve(setup, s.service);
            let hash = hash_of(&(&first, &s.resolved.workdir));
            if rows
                .get(s.service)
                .is_some_and(|r| r.setup_hash.as_deref() == Some(&hash))
            {
                return Ok(Flow::Next);
            }
            let msg = format!("waiting for the setup of {}", s.service);
            return Ok(Flow::Done(self.pending(s, row, msg)?));
        }
        let setup_cmd = s.resolved.tokens.resolve(setup, name);
        let setup_hash = hash_of(&(&setup_cmd, &s.resolved.workdir));
        if row.setup_hash.as_deref() == Some(&setup_hash) {
            return Ok(Flow::Next);
        }
        let unaddressed =
            Self::unaddressed_slices(s.world, setup, s.process, slices, &s.tokens.urls);
        if !unaddressed.is_empty() {
            let msg = format!("setup waits for the address of {}", unaddressed.join(", "));
            let mut step = self.pending(s, row, msg)?;
            // Looked at again soon: the address may have come after this pass's read.
            step.wake = Some(Duration::from_millis(300));
            return Ok(Flow::Done(step));
        }
        // Recorded before the spawn, as a service's start is (see `start`).
        let token = self.sup.token(s.world.id);
        row.state = ProcState::Setup;
        row.message = "running setup".into();
        row.spawn_token = Some(token.clone());
        row.pid = None;
        row.start_time = None;
        row.healthy = false;
        row.spec_hash = Some(setup_hash);
        row.started_at = Some(now_ms());
        self.save(s.world.id, row)?;
        self.event(
            s.world.id,
            "setup",
            &format!("{name}: running setup `{setup_cmd}`"),
        );
        let spec = SpawnSpec {
            world: s.world.id,
            service: name.to_owned(),
            cmd: setup_cmd,
            workdir: s.resolved.workdir.clone(),
            env: s.resolved.env.clone(),
            log: s.log.clone(),
            token,
            task: true,
            nice: crate::settings::nice(&self.store),
            limits: Default::default(),
        };
        Ok(Flow::Done(match self.sup.spawn(&spec).await {
            Ok(id) => {
                row.pid = Some(id.pid);
                row.start_time = Some(id.start_time);
                self.save(s.world.id, row)?;
                Step {
                    wake: Some(self.config.setup_timeout),
                    waiting: Some(format!("{name}: running setup")),
                    ..Step::default()
                }
            }
            Err(err) => self.setup_failed(s, row, &err.to_string())?,
        }))
    }

    /// A service's `setup` failed (`why`): it stays failed, with its output's tail, until
    /// the next `binky up`.
    pub(super) fn setup_failed(
        &self,
        s: &Svc<'_>,
        row: &mut ProcessRow,
        why: &str,
    ) -> Result<Step, StoreError> {
        let setup_cmd = s
            .process
            .setup
            .as_deref()
            .map(|c| s.resolved.tokens.resolve(c, s.name))
            .unwrap_or_default();
        row.state = ProcState::Failed;
        forget_process(row);
        row.spec_hash = None;
        row.failed_generation = Some(s.world.generation);
        row.message = format!(
            "setup `{setup_cmd}` failed ({why}); fix it and run `binky up {}` again. Last output:\n{}",
            s.world.name,
            log_tail(&s.log, 10)
        );
        self.event(
            s.world.id,
            "setup_failed",
            &format!("{}: {}", s.name, row.message),
        );
        self.save(s.world.id, row)?;
        Ok(Step::problem(
            "SetupFailed",
            format!("{}: {}", s.name, row.message),
        ))
    }

    /// The adapter services that `setup` (its text, or the service's env it runs with)
    /// refers to and whose slice has no address yet: setup would see `${db.url}` as text.
    pub(super) fn unaddressed_slices(
        world: &World,
        setup: &str,
        process: &Process,
        slices: &[store::SliceRow],
        resolved_with: &BTreeMap<String, String>,
    ) -> Vec<String> {
        let mut refs = Tokens::referenced_services(setup);
        for v in process.env.values() {
            for r in Tokens::referenced_services(v) {
                if !refs.contains(&r) {
                    refs.push(r);
                }
            }
        }
        refs.into_iter()
            .filter(|r| {
                world.spec.resource(r).is_some()
                    && !(slices
                        .iter()
                        .any(|s| &s.service == r && s.address.is_some())
                        // The setup's text and env were resolved from an earlier read: an
                        // address that came after it is taken at the next pass, never as
                        // the token's text.
                        && resolved_with.contains_key(r))
            })
            .collect()
    }

    /// Record what the worktree's `git status` lists right after a setup, as setup left it:
    /// not the user's changes at `remove` (see [`crate::dirty`]). Not a git checkout, or
    /// git failing: nothing recorded, so every change counts as the user's.
    pub(super) async fn record_setup_changes(&self, world: &World) {
        let wt = &world.worktree_path;
        let Ok(changed) = crate::dirty::changed_paths(wt).await else {
            return;
        };
        let prints = crate::dirty::fingerprints(wt, &changed);
        let saved = self.store.write(owner::Process, |tx| {
            for (path, print) in &prints {
                write::process::set_setup_change(tx, world.id, path, print)?;
            }
            Ok(())
        });
        if let Err(err) = saved {
            tracing::warn!(%err, world = %world.name, "cannot record what setup changed");
        }
    }
}
