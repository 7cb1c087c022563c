//! What a new worktree gets besides its checkout: the paths `.worktreeinclude` and
//! `[project] copy` name, planned (what the world's selection needs now, what may wait) and
//! brought from the main checkout, each in a task of its own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{Git, Planned, WorktreeController, WorktreeError};
use crate::store::{self, owner, write, BootstrapState, Store, StoreError, WorktreeRow, World};

/// How a path's files reached a new worktree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyHow {
    /// Every file a copy-on-write clone (no data copied, none shared).
    Cloned,
    /// Every file hard-linked (no data copied; a file edited in place is edited for every
    /// worktree that links it).
    Linked,
    /// Copied byte by byte.
    Copied,
    /// Some of these ways.
    Mixed,
}

impl CopyHow {
    /// `cloned`, `linked`, `copied`, `mixed`: the word `binky status` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            CopyHow::Cloned => "cloned",
            CopyHow::Linked => "linked",
            CopyHow::Copied => "copied",
            CopyHow::Mixed => "mixed",
        }
    }

    /// The word read back (`None` for anything else).
    pub fn parse(s: &str) -> Option<CopyHow> {
        [
            CopyHow::Cloned,
            CopyHow::Linked,
            CopyHow::Copied,
            CopyHow::Mixed,
        ]
        .into_iter()
        .find(|h| h.as_str() == s)
    }

    /// How `cloned`, `linked` and copied files (of `files`) add up: linked when some were
    /// linked and none cloned (the others copied: a package manager's bookkeeping), cloned
    /// likewise, mixed when both.
    pub fn of(files: u64, cloned: u64, linked: u64) -> CopyHow {
        match (cloned, linked) {
            (0, 0) => CopyHow::Copied,
            (_, 0) if files > 0 => CopyHow::Cloned,
            (0, _) => CopyHow::Linked,
            _ => CopyHow::Mixed,
        }
    }
}

/// One path brought into a new worktree (for `binky up`'s progress and `binky status`).
#[derive(Clone, Debug)]
pub struct Copied {
    /// Relative to the worktree's top.
    pub path: String,
    /// The checkout it came from.
    pub from: PathBuf,
    /// Files in it.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// How.
    pub how: CopyHow,
    /// Files copied byte by byte (the rest were cloned or linked).
    pub copied: u64,
    /// Why it was not linked though its mode allowed it (another filesystem), if so.
    pub note: Option<String>,
    /// How long it took.
    pub took: std::time::Duration,
}

impl Copied {
    /// `linked node_modules (20000 files, 316 MB) from /repo by hard links in 0.4 s`.
    pub fn describe(&self) -> String {
        let (verb, how) = match self.how {
            CopyHow::Cloned => ("cloned", "copy-on-write clone"),
            CopyHow::Linked => ("linked", "hard links"),
            CopyHow::Copied => ("copied", "parallel copy"),
            CopyHow::Mixed => ("brought", "clones and links"),
        };
        let copied = if self.how != CopyHow::Copied && self.copied > 0 {
            format!("; {} copied", self.copied)
        } else {
            String::new()
        };
        let mb = self.bytes as f64 / 1e6;
        let size = if mb >= 1.0 {
            format!("{mb:.0} MB")
        } else {
            format!("{} KB", self.bytes.div_ceil(1000))
        };
        let took = self.took.as_secs_f64();
        format!(
            "{verb} {} ({} file{}, {size}{copied}) from {} by {how} in {}{}",
            self.path,
            self.files,
            if self.files == 1 { "" } else { "s" },
            self.from.display(),
            if took >= 1.0 {
                format!("{took:.1} s")
            } else {
                format!("{} ms", self.took.as_millis())
            },
            self.note
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        )
    }
}

/// Bring one path, record how it went, and nudge the world's controllers (a command may
/// have been waiting for it).
async fn bring_one<G: Git>(
    store: &Store,
    git: &G,
    trigger: Option<&crate::runtime::Trigger>,
    world: store::WorldId,
    worktree: &Path,
    b: &store::BootstrapRow,
) -> Result<(), StoreError> {
    let planned = Planned {
        path: b.path.clone(),
        from: b.src.clone(),
        mode: b.mode,
    };
    // A linked file changed after this was edited in place through the link.
    let brought_at = crate::store::now_ms();
    let outcome = git.bring(&planned, worktree).await;
    // A path that is one file (a lockfile) as it came: git lists it (untracked), and left
    // so it is not the user's change.
    let fingerprint = match &outcome {
        Ok(_) if worktree.join(&b.path).is_file() => crate::dirty::fingerprint(worktree, &b.path),
        _ => String::new(),
    };
    let (state, how, files, bytes, took, message, event) = match &outcome {
        Ok(c) => (
            BootstrapState::Done,
            Some(c.how.as_str()),
            c.files,
            c.bytes,
            c.took.as_millis() as i64,
            c.note.clone().unwrap_or_default(),
            c.describe(),
        ),
        Err(err) => (
            BootstrapState::Failed,
            None,
            0,
            0,
            0,
            err.clone(),
            format!(
                "could not bring {} ({err}); its setup has to make it",
                b.path
            ),
        ),
    };
    store.write(owner::Worktree, |tx| {
        write::worktree::set_brought(
            tx,
            world,
            &b.path,
            &write::worktree::Brought {
                state,
                how,
                files: files as i64,
                bytes: bytes as i64,
                took_ms: took,
                message: &message,
                brought_at,
                fingerprint: &fingerprint,
            },
        )
    })?;
    store.event(world, "worktree", &event)?;
    if let Some(t) = trigger {
        t.world(world);
    }
    Ok(())
}

/// `[project] copy` relative to the repository's top (it is written relative to the
/// directory of `binky.toml`, as every path in it), with the modes it gives.
fn copy_of(world: &World) -> (Vec<String>, BTreeMap<String, crate::spec::CopyMode>) {
    let rebase = |c: &str| {
        if world.config_rel.is_empty() {
            c.to_owned()
        } else {
            format!("{}/{c}", world.config_rel.trim_end_matches('/'))
        }
    };
    let copy = world.spec.project.copy.iter().map(|c| rebase(c)).collect();
    let modes = world
        .spec
        .project
        .copy_modes
        .iter()
        .map(|(c, m)| (rebase(c), *m))
        .collect();
    (copy, modes)
}

/// Of `plan`, what the world's selection needs, each with the state it is recorded in:
/// everything, pending, unless it runs a `--group`. Then the paths the working directories
/// of the services it runs need (a process's, an adapter's that runs `migrate` or `seed`)
/// are pending; but a database whose golden template is ready (`cloned` says so) is a copy
/// of it and runs no `migrate` or `seed` here: what only its workdir needs is deferred,
/// brought only if the world comes to run them after all (it builds a template, or cloning
/// fails: see [`WorktreeController::wake_deferred`]). What nothing it runs needs is left
/// out; a wider `up` brings it.
fn needed(
    world: &World,
    plan: Vec<Planned>,
    cloned: impl Fn(&str, &crate::spec::Resource) -> bool,
) -> Vec<(Planned, BootstrapState)> {
    if world.group.is_none() {
        return plan
            .into_iter()
            .map(|p| (p, BootstrapState::Pending))
            .collect();
    }
    let mut now: Vec<String> = Vec::new();
    let mut later: Vec<String> = Vec::new();
    for n in world.spec.selected(world.group.as_deref()) {
        if !world.runs(&n) {
            continue;
        }
        let Some(s) = world.spec.services.get(&n) else {
            continue;
        };
        match (s.process(), s.resource()) {
            (Some(p), _) => now.push(crate::env::workdir_rel(world, &p.workdir)),
            (_, Some(r)) if r.migrate.is_some() || r.seed.is_some() => {
                let workdir = crate::env::workdir_rel(world, &r.workdir);
                if r.clone_from.is_some() && cloned(&n, r) {
                    later.push(workdir);
                } else {
                    now.push(workdir);
                }
            }
            _ => {}
        }
    }
    let by = |p: &Planned, dirs: &[String]| dirs.iter().any(|w| store::path_needed_by(&p.path, w));
    plan.into_iter()
        .filter_map(|p| {
            if by(&p, &now) {
                Some((p, BootstrapState::Pending))
            } else if by(&p, &later) {
                Some((p, BootstrapState::Deferred))
            } else {
                None
            }
        })
        .collect()
}

/// The working directories where `world` (as its rows say now) is to run an adapter's
/// `migrate` or `seed` itself, and why: it builds the service's golden template, or makes
/// its slice the slow way (its adapter cannot clone, cloning failed).
fn migrating_now(
    world: &World,
    refs: &BTreeMap<String, String>,
    goldens: &BTreeMap<String, store::GoldenRow>,
    slices: &[store::SliceRow],
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for n in world.spec.selected(world.group.as_deref()) {
        if !world.runs(&n) {
            continue;
        }
        let Some(r) = world.spec.services.get(&n).and_then(|s| s.resource()) else {
            continue;
        };
        if r.migrate.is_none() && r.seed.is_none() {
            continue;
        }
        let builds = refs.get(&n).and_then(|k| goldens.get(k)).is_some_and(|g| {
            g.state == store::GoldenState::Building && g.owner_world == Some(world.id)
        });
        let slow = slices.iter().any(|s| {
            s.service == n
                && matches!(
                    s.state,
                    store::SliceState::Provisioned
                        | store::SliceState::Migrating
                        | store::SliceState::Seeding
                )
        });
        if builds || slow {
            let why = if builds {
                format!("{n} builds its golden template in this world")
            } else {
                format!("{n} runs its migrate and seed in this world")
            };
            out.push((crate::env::workdir_rel(world, &r.workdir), why));
        }
    }
    out
}

impl<G: Git> WorktreeController<G> {
    /// The paths a world's worktree gets (`.worktreeinclude`'s and `[project] copy`'s), from
    /// the main checkout (or another world), each in a task of its own, all at once, while
    /// the world's other work goes on: a command waits only for the paths it needs (see
    /// [`store::BootstrapRow::needed_by`]). A world of a `--group` gets only what its
    /// services need (what only a cloned database's `migrate` would use is deferred until
    /// it runs after all); a later `up` of more brings the rest. `row` is saved (ready) in the
    /// same transaction as the plan when `save_row`, so nothing starts before it knows what
    /// to wait for. A path that cannot be brought is said and does not stop the world: its
    /// `setup` makes what is missing.
    pub(super) async fn bootstrap(
        &self,
        world: &World,
        row: &WorktreeRow,
        save_row: bool,
    ) -> Result<(), WorktreeError> {
        let fresh = self.plan(world, row).await?;
        // Nothing new to save (every pass of a ready world): no write transaction.
        if save_row || !fresh.is_empty() {
            self.record_plan(world, save_row.then_some(row), &fresh)?;
        }
        self.planned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((world.id, world.created_at), world.generation);
        self.wake_deferred(world)?;
        self.bring_pending(world, row)
    }

    /// The paths the worktree `row` gets that are not planned yet: none when this daemon
    /// planned them at this generation already.
    async fn plan(
        &self,
        world: &World,
        row: &WorktreeRow,
    ) -> Result<Vec<(Planned, BootstrapState)>, WorktreeError> {
        let planned_at = self
            .planned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(world.id, world.created_at))
            .copied();
        if planned_at == Some(world.generation) {
            return Ok(Vec::new());
        }
        let fallbacks = self
            .store
            .read(|c| store::worktree_paths_of_repo(c, &world.repo_root))?;
        let (copy, modes) = copy_of(world);
        match self
            .git
            .plan_bootstrap(&world.repo_root, &row.path, &copy, &modes, &fallbacks)
            .await
        {
            Ok(plan) => Ok(needed(world, plan, |service, res| {
                // Not known: brought, as if the world ran its migrate.
                crate::template::template_ready(&self.store, world, &row.path, service, res)
                    .unwrap_or(false)
            })),
            Err(err) => {
                self.store.event(
                    world.id,
                    "worktree",
                    &format!("could not list the worktree's ignored files to bring ({err}); its setup has to make them"),
                )?;
                Ok(Vec::new())
            }
        }
    }

    /// Records the `fresh` paths to bring, pending or deferred, with the worktree `row`
    /// (ready) when given, in one transaction; a path recorded deferred that is now pending
    /// (a wider `up`) becomes so.
    fn record_plan(
        &self,
        world: &World,
        row: Option<&WorktreeRow>,
        fresh: &[(Planned, BootstrapState)],
    ) -> Result<(), StoreError> {
        self.store.write(owner::Worktree, |tx| {
            if let Some(row) = row {
                Self::save_in(tx, world, row)?;
            }
            for (p, state) in fresh {
                let message = if *state == BootstrapState::Deferred {
                    "not brought: only the migrate or seed of a database cloned from its ready golden template would use it; brought if they run here after all"
                } else {
                    ""
                };
                write::worktree::plan_path(tx, world.id, p, *state, message)?;
            }
            Ok(())
        })
    }

    /// A deferred path becomes pending (and is brought) once the world is to run a
    /// `migrate` or `seed` whose workdir needs it after all: it builds the golden template
    /// (the one it would clone was not ready, or went), or makes its slice the slow way
    /// (cloning failed). Those commands wait for it meanwhile.
    fn wake_deferred(&self, world: &World) -> Result<(), StoreError> {
        let deferred: Vec<String> = self
            .store
            .read(|c| store::bootstrap_paths(c, world.id))?
            .into_iter()
            .filter(|b| b.state == BootstrapState::Deferred)
            .map(|b| b.path)
            .collect();
        if deferred.is_empty() {
            return Ok(());
        }
        let (refs, goldens, slices) = self.store.read(|c| {
            let refs = store::golden_refs_of(c, world.id)?;
            let mut goldens = BTreeMap::new();
            for key in refs.values() {
                if let Some(g) = store::golden(c, key)? {
                    goldens.insert(key.clone(), g);
                }
            }
            Ok((refs, goldens, store::slices(c, world.id)?))
        })?;
        let now = migrating_now(world, &refs, &goldens, &slices);
        let wake: Vec<(String, &str)> = deferred
            .into_iter()
            .filter_map(|p| {
                now.iter()
                    .find(|(w, _)| store::path_needed_by(&p, w))
                    .map(|(_, why)| (p, why.as_str()))
            })
            .collect();
        if wake.is_empty() {
            return Ok(());
        }
        self.store.write(owner::Worktree, |tx| {
            for (p, _) in &wake {
                write::worktree::wake_deferred(tx, world.id, p)?;
            }
            Ok(())
        })?;
        for (p, why) in &wake {
            self.store
                .event(world.id, "worktree", &format!("bringing {p} now: {why}"))?;
        }
        Ok(())
    }

    /// Brings each pending path in a task of its own, outside this reconcile: `up` waits
    /// for no path that nothing it runs needs, and a command that needs one waits for it
    /// alone.
    fn bring_pending(&self, world: &World, row: &WorktreeRow) -> Result<(), WorktreeError> {
        let pending: Vec<store::BootstrapRow> = self
            .store
            .read(|c| store::bootstrap_paths(c, world.id))?
            .into_iter()
            .filter(|b| b.state == BootstrapState::Pending)
            .collect();
        for b in pending {
            let key = (world.id, b.path.clone());
            if !self
                .bringing
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key.clone())
            {
                continue;
            }
            let (store, git, trigger) =
                (self.store.clone(), self.git.clone(), self.trigger.clone());
            let (bringing, worktree) = (self.bringing.clone(), row.path.clone());
            tokio::spawn(async move {
                if let Err(err) =
                    bring_one(&store, &*git, trigger.as_ref(), key.0, &worktree, &b).await
                {
                    tracing::warn!(%err, path = %b.path, "cannot record a brought path");
                }
                bringing
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&key);
            });
        }
        Ok(())
    }

    /// Wait until none of `world`'s paths is being brought (before its worktree goes).
    pub(super) async fn none_bringing(&self, world: store::WorldId) {
        let busy = || {
            self.bringing
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .any(|(w, _)| *w == world)
        };
        while busy() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}
