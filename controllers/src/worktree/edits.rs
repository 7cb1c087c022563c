//! A world's linked files written in place (see [`crate::inplace`]): looked for when due,
//! recorded (`shared_edits`), said in events, and passed on to the worlds that share them.

use super::{Git, WorktreeController, WorktreeError};
use crate::store::{self, owner, write, WorktreeRow, World};

/// How often a world's linked files are looked at for writes in place when nothing else
/// asks (at the first resync, every 5 minutes, that finds this elapsed). A look is an
/// `lstat` per linked file: about a second for 60,000 files on a 2-core machine
/// (benchmarks/README.md), so twenty such worlds cost about 2 % of a core at this pace.
const LOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(14 * 60);

impl<G: Git> WorktreeController<G> {
    /// Looks for the world's linked files written in place (see [`crate::inplace`]) when
    /// due — `always`, at a new generation (`up`, `down`, `reload`), when another world
    /// asked, else every [`LOOK_EVERY`] — and records what it finds (`binky status` reads
    /// it). A new finding is said in an event, and the worlds sharing the file are looked
    /// at too.
    pub(super) async fn look_for_edits(
        &self,
        world: &World,
        row: &WorktreeRow,
        always: bool,
    ) -> Result<(), WorktreeError> {
        let key = (world.id, world.created_at);
        let asked = self
            .look_again
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&world.id);
        let due = {
            let mut looked = self.looked.lock().unwrap_or_else(|e| e.into_inner());
            let due = always
                || asked
                || looked
                    .get(&key)
                    .is_none_or(|(g, at)| *g != world.generation || at.elapsed() >= LOOK_EVERY);
            if due {
                looked.insert(key, (world.generation, std::time::Instant::now()));
            }
            due
        };
        if !due {
            return Ok(());
        }
        let (own, others, before) = self.store.read(|c| {
            let own = store::bootstrap_paths(c, world.id)?;
            let mut others = Vec::new();
            for (id, name, path) in store::worlds_of_repo(c, &world.repo_root)? {
                if id != world.id {
                    let brought = store::bootstrap_paths(c, id)?;
                    let edits = store::shared_edits(c, id)?;
                    others.push((id, name, path, brought, edits));
                }
            }
            Ok((own, others, store::shared_edits(c, world.id)?))
        })?;
        let me = crate::inplace::World {
            name: &world.name,
            worktree: &row.path,
            brought: &own,
        };
        let theirs: Vec<crate::inplace::World<'_>> = others
            .iter()
            .map(|(_, name, path, brought, _)| crate::inplace::World {
                name,
                worktree: path,
                brought,
            })
            .collect();
        let paths = crate::inplace::to_look_at(&me, &theirs);
        let changed = if paths.is_empty() {
            Vec::new()
        } else {
            let mut checkouts = vec![world.repo_root.clone()];
            checkouts.extend(others.iter().map(|(_, _, path, _, _)| path.clone()));
            let started = std::time::Instant::now();
            match self.git.changed_links(&row.path, &paths, &checkouts).await {
                Ok(changed) => {
                    // What the look costs (benchmarks/bring_in.sh reads it).
                    tracing::debug!(
                        world = %world.name,
                        paths = paths.len(),
                        found = changed.len(),
                        ms = started.elapsed().as_secs_f64() * 1000.0,
                        "looked at the linked files for writes in place"
                    );
                    changed
                }
                Err(err) => {
                    tracing::warn!(%err, world = %world.name, "cannot look at the linked files");
                    return Ok(());
                }
            }
        };
        let mut found =
            crate::inplace::findings(&me, &theirs, &world.repo_root, &changed, store::now_ms());
        let total = found.len();
        found.truncate(crate::inplace::MAX_RECORDED);
        let (rows, differs) = crate::inplace::merge(&before, found);
        if !differs {
            return Ok(());
        }
        self.store.write(owner::Worktree, |tx| {
            write::worktree::set_shared_edits(tx, world.id, &rows)
        })?;
        let new: Vec<store::SharedEditRow> = rows
            .iter()
            .filter(|r| {
                !before
                    .iter()
                    .any(|b| b.file == r.file && b.changed_at == r.changed_at)
            })
            .cloned()
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        let copy_path = |p: &str| crate::inplace::copy_path(&world.config_rel, p);
        for line in crate::inplace::describe(&new, copy_path, |_| String::new()) {
            self.store.event(world.id, "shared_edit", &line)?;
        }
        if total > rows.len() {
            self.store.event(
                world.id,
                "shared_edit",
                &format!(
                    "{total} linked files were changed in place; the first {} are recorded",
                    rows.len()
                ),
            )?;
        }
        // The worlds that share these files and have not found them learn of them at their
        // next reconcile, now.
        let sharing: Vec<store::WorldId> = others
            .iter()
            .filter(|(_, name, _, _, edits)| {
                new.iter().any(|r| {
                    r.sharers.contains(name)
                        && !edits
                            .iter()
                            .any(|e| e.file == r.file && e.changed_at == r.changed_at)
                })
            })
            .map(|(id, _, _, _, _)| *id)
            .collect();
        self.look_again_at(&sharing);
        Ok(())
    }

    /// `worlds` are looked at for linked files written in place at their next reconcile,
    /// which is asked for now.
    pub(super) fn look_again_at(&self, worlds: &[store::WorldId]) {
        self.look_again
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(worlds.iter().copied());
        if let Some(t) = &self.trigger {
            for id in worlds {
                t.world(*id);
            }
        }
    }
}
