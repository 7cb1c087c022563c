//! How long a template is kept, and dropping it.
//!
//! # The rule
//! - A template a world uses (a `golden_refs` row) is never dropped for its age or the
//!   disk; nor is one a build is copying from (the `base` of a building template), nor one
//!   whose build runs in this daemon now (the drop is claimed under the builds' lock).
//! - A template no world uses any more is kept for `golden_keep` (a machine setting, 7 days
//!   by default; `0`: it goes with its last world) after a world last used it, so the next
//!   world is cloned from it instead of building it again.
//! - Under disk pressure (less than `disk_reserve_gib` free on the disk holding a managed
//!   server's data) the unused templates on that server go sooner, the least recently used
//!   first, one at a time until the disk has its reserve again. A server given by
//!   `admin_url` has a disk binky cannot see: its templates go by age or `golden rm` only.
//! - `binky golden rm` drops a template in any state, even while worlds use it (they keep
//!   their copies): a ready one once no world is waiting to be cloned from it, one whose
//!   build runs now once that build ends, any other at once (a world that wanted it builds
//!   it again).
//! - A `building` template whose build runs nowhere (its daemon is gone, or the world it
//!   was claimed for was removed or needs another template now), or whose build failed and
//!   kept no migrated stage, goes once no world uses it.
//! - A drop the server refuses (it is not reachable) is said on the template's row
//!   (`binky golden ls`) and tried again at the next sweep.
//! - Dropping is claimed in one transaction (`dropping`), so a world never gets a reference
//!   to a template being dropped (it waits, then builds it again), and a drop a daemon did
//!   not finish is finished by the next sweep.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use super::GoldenController;
use crate::adapter::{SliceEffects, SliceSpec, Teardown};
use crate::settings::Settings;
use crate::store::{self, now_ms, owner, write, GoldenRow, GoldenState, StoreError};
use crate::supervisor::Supervisor;

/// Why a template goes, which decides what must still hold when its drop is claimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Claim {
    /// No world uses it (age, disk, a failed or dead build).
    Unused,
    /// `binky golden rm`: no world waits to be cloned from it.
    Asked,
    /// A drop claimed before and not finished.
    Resume,
}

/// `golden_keep`: in ms, and as the setting says it.
struct Keep {
    ms: i64,
    said: String,
}

/// What becomes of one template at a sweep.
enum Fate {
    /// Nothing: in use, being built here, copied from, or waited for.
    Untouched,
    /// Dropped, for this reason.
    Drop(Claim, String),
    /// Kept, for this long yet by age (and while the disk has room).
    Kept(Duration),
}

/// What a sweep decides on, read at once.
struct Facts {
    goldens: Vec<GoldenRow>,
    /// The templates some world refers to.
    used: BTreeSet<String>,
    /// The templates referred to by a world whose slice is not made yet: they may clone any
    /// moment.
    waited: BTreeSet<String>,
    /// The templates `binky golden rm` asked to drop.
    asked: BTreeSet<String>,
    /// The templates a build copies its migrated stage from.
    copied: BTreeSet<String>,
    servers: Vec<store::ServerRow>,
}

impl Facts {
    fn read(c: &rusqlite::Connection) -> Result<Facts, StoreError> {
        let used: BTreeSet<String> = store::golden_refs(c)?.into_iter().map(|r| r.2).collect();
        let waited = store::goldens_waited_for(c)?;
        let asked = store::golden_drops(c)?;
        let goldens = store::goldens(c)?;
        let copied = goldens
            .iter()
            .filter(|g| g.state == GoldenState::Building)
            .filter_map(|g| g.base.clone())
            .collect();
        Ok(Facts {
            goldens,
            used,
            waited,
            asked,
            copied,
            servers: store::servers(c)?,
        })
    }
}

/// `3 h`, `2 d`: an age in words.
pub(super) fn age_words(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        7200..=172_799 => format!("{} h", s / 3600),
        _ => format!("{} d", s / 86_400),
    }
}

impl<E: SliceEffects, S: Supervisor> GoldenController<E, S> {
    /// The data directory of the managed server `g` lives on, if it lives on one.
    fn data_dir(&self, servers: &[store::ServerRow], g: &GoldenRow) -> Option<PathBuf> {
        let url = g.admin_url.as_deref()?;
        servers
            .iter()
            .find(|s| s.admin_url == url)
            .map(|s| PathBuf::from(&s.data_dir))
    }

    /// Drop what should go now (see the module's rule); when the next kept template would
    /// go by age.
    pub(crate) async fn sweep(&self) -> Result<Option<Duration>, StoreError> {
        let _one = self.sweeping.lock().await;
        let settings = Settings::read(&self.store)?;
        let keep = Keep {
            ms: settings.duration("golden_keep").as_millis() as i64,
            said: settings.get("golden_keep").to_owned(),
        };
        let reserve: f64 = settings.number("disk_reserve_gib");
        let facts = self.store.read(Facts::read)?;
        let now = now_ms();
        let mut next: Option<Duration> = None;
        let mut doomed: Vec<(&GoldenRow, Claim, String)> = Vec::new();
        let mut kept: Vec<&GoldenRow> = Vec::new();
        for g in &facts.goldens {
            match self.fate(g, &facts, &keep, now) {
                Fate::Untouched => {}
                Fate::Drop(claim, why) => doomed.push((g, claim, why)),
                Fate::Kept(left) => {
                    next = Some(next.map_or(left, |n| n.min(left)));
                    kept.push(g);
                }
            }
        }
        let mut unfinished = false;
        for (g, claim, why) in doomed {
            unfinished |= !self.drop_template(g, claim, &why).await?;
        }
        if reserve > 0.0 {
            unfinished |= !self.free_disk(kept, &facts.servers, reserve).await?;
        }
        // Requests for templates that are gone.
        self.store
            .write(owner::Golden, write::golden::forget_stale_drops)?;
        // A drop its server refused is tried again soon, backing off (a server stopped
        // mid-drop is started again for it), not at the next resync minutes later.
        let retry = {
            let mut failed = self.drop_failures.lock().unwrap_or_else(|e| e.into_inner());
            *failed = if unfinished { *failed + 1 } else { 0 };
            (*failed > 0).then(|| {
                crate::runtime::doubling_delay(
                    Duration::from_millis(500),
                    *failed,
                    Duration::from_secs(30),
                )
            })
        };
        Ok(match (next, retry) {
            (Some(n), Some(r)) => Some(n.min(r)),
            (n, r) => n.or(r),
        })
    }

    /// What becomes of the template `g` now (see the module's rule).
    fn fate(&self, g: &GoldenRow, facts: &Facts, keep: &Keep, now: i64) -> Fate {
        if (g.state == GoldenState::Building && self.is_building(&g.key))
            || facts.copied.contains(&g.key)
        {
            return Fate::Untouched;
        }
        if g.state == GoldenState::Dropping {
            return Fate::Drop(Claim::Resume, "its drop was not finished".into());
        }
        if facts.asked.contains(&g.key) {
            // A ready one a world is about to be cloned from stays until it is; one not
            // ready is no world's to clone from: the world builds it again.
            if facts.waited.contains(&g.key) && g.state == GoldenState::Ready {
                return Fate::Untouched;
            }
            return Fate::Drop(Claim::Asked, "`binky golden rm` asked for it".into());
        }
        if facts.used.contains(&g.key) {
            return Fate::Untouched;
        }
        if g.state == GoldenState::Building {
            return Fate::Drop(
                Claim::Unused,
                "its build was left unfinished (by a daemon that is gone, or for a world that was removed or needs another template now) and no world uses it".into(),
            );
        }
        if g.state == GoldenState::Failed && !g.migrated {
            return Fate::Drop(Claim::Unused, "its build failed and kept nothing".into());
        }
        let age = now - g.used_at;
        if age < keep.ms {
            return Fate::Kept(Duration::from_millis((keep.ms - age) as u64));
        }
        Fate::Drop(
            Claim::Unused,
            if keep.ms == 0 {
                "no world uses it (golden_keep = 0)".into()
            } else {
                format!(
                    "no world has used it for {} (golden_keep = {})",
                    age_words(age),
                    keep.said
                )
            },
        )
    }

    /// The disk: unused templates on a managed server whose disk is short of `reserve` go,
    /// the least recently used first, measured again after each drop. Whether every drop
    /// it began was finished.
    async fn free_disk(
        &self,
        mut kept: Vec<&GoldenRow>,
        servers: &[store::ServerRow],
        reserve: f64,
    ) -> Result<bool, StoreError> {
        let Some(machine) = self.machine.as_ref() else {
            return Ok(true);
        };
        let mut finished = true;
        kept.sort_by_key(|g| g.used_at);
        for g in kept {
            let Some(dir) = self.data_dir(servers, g) else {
                continue;
            };
            let Some(free) = machine.disk_free_gib(&dir) else {
                continue;
            };
            if free < reserve {
                let why = format!(
                    "{free:.1} GiB free on the disk of its server's data ({}), disk_reserve_gib = {reserve}; no world uses it",
                    dir.display()
                );
                finished &= self.drop_template(g, Claim::Unused, &why).await?;
            }
        }
        Ok(finished)
    }

    /// Claim `g`'s drop (if what `claim` needs still holds), drop its databases and forget
    /// it. A drop that fails stays claimed and is finished by a later sweep: `false`.
    async fn drop_template(
        &self,
        g: &GoldenRow,
        claim: Claim,
        why: &str,
    ) -> Result<bool, StoreError> {
        let claim = match claim {
            Claim::Unused => "unused",
            Claim::Asked => "asked",
            Claim::Resume => "resume",
        };
        let claimed = {
            // Under the builds' lock: a build of it that starts now finds it dropping.
            let building = self.building_now.lock().unwrap_or_else(|e| e.into_inner());
            !building.contains(&g.key)
                && self.store.write(owner::Golden, |tx| {
                    write::golden::claim_drop(tx, &g.key, g.state, claim)
                })?
        };
        if !claimed {
            return Ok(true);
        }
        for slice in g.slices() {
            let spec = SliceSpec {
                adapter: g.adapter.clone(),
                slice,
                secret: g.secret.clone(),
                admin_url: g.admin_url.clone(),
                options: Default::default(),
                buckets: Vec::new(),
                search_path: None,
            };
            match self.slices.effects().teardown(&spec).await {
                Ok(Teardown::Dropped) => {}
                // Named alike by a home before homes had an identity, and that home's now:
                // it is left to it, and this home forgets it.
                Ok(Teardown::OtherHome(home)) => {
                    tracing::info!(key = %g.key, name = %spec.slice, %home, "golden template belongs to another binky home; left to it")
                }
                Err(err) => {
                    tracing::warn!(key = %g.key, name = %spec.slice, %err, "cannot drop golden template yet");
                    // Said where `binky golden ls` and `golden rm` read it; retried at the
                    // next sweep.
                    let said = format!("cannot drop {} yet: {err}; retrying", spec.slice);
                    self.set_state(&g.key, GoldenState::Dropping, &said, None)?;
                    return Ok(false);
                }
            }
        }
        self.store
            .write(owner::Golden, |tx| write::golden::dropped(tx, &g.key))?;
        tracing::info!(key = %g.key, name = %g.name, why, "dropped golden template");
        Ok(true)
    }
}
