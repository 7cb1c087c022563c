//! How long a template is kept, and dropping it.
//!
//! # The rule
//! - A template a world uses (a `golden_refs` row) is never dropped for its age or the
//!   disk; nor is one a build is copying from (the `base` of a building template), nor one
//!   this daemon is building.
//! - A template no world uses any more is kept for `golden_keep` (a machine setting, 7 days
//!   by default; `0`: it goes with its last world) after a world last used it, so the next
//!   world is cloned from it instead of building it again.
//! - Under disk pressure (less than `disk_reserve_gib` free on the disk holding a managed
//!   server's data) the unused templates on that server go sooner, the least recently used
//!   first, one at a time until the disk has its reserve again. A server given by
//!   `admin_url` has a disk binky cannot see: its templates go by age or `golden rm` only.
//! - `binky golden rm` drops a template even while worlds use it (they keep their copies),
//!   once no world is waiting to be cloned from it.
//! - A template a dead daemon left half-built, or whose build failed and kept no migrated
//!   stage, goes once no world uses it.
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
        for (g, claim, why) in doomed {
            self.drop_template(g, claim, &why).await?;
        }
        if reserve > 0.0 {
            self.free_disk(kept, &facts.servers, reserve).await?;
        }
        // Requests for templates that are gone.
        self.store
            .write(owner::Golden, write::golden::forget_stale_drops)?;
        Ok(next)
    }

    /// What becomes of the template `g` now (see the module's rule).
    fn fate(&self, g: &GoldenRow, facts: &Facts, keep: &Keep, now: i64) -> Fate {
        if (g.state == GoldenState::Building && g.builder == self.builder)
            || facts.copied.contains(&g.key)
        {
            return Fate::Untouched;
        }
        if g.state == GoldenState::Dropping {
            return Fate::Drop(Claim::Resume, "its drop was not finished".into());
        }
        if facts.asked.contains(&g.key) {
            if facts.waited.contains(&g.key) {
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
                "a daemon that is gone left it half-built".into(),
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
    /// the least recently used first, measured again after each drop.
    async fn free_disk(
        &self,
        mut kept: Vec<&GoldenRow>,
        servers: &[store::ServerRow],
        reserve: f64,
    ) -> Result<(), StoreError> {
        let Some(machine) = self.machine.as_ref() else {
            return Ok(());
        };
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
                self.drop_template(g, Claim::Unused, &why).await?;
            }
        }
        Ok(())
    }

    /// Claim `g`'s drop (if what `claim` needs still holds), drop its databases and forget
    /// it. A drop that fails stays claimed and is finished by a later sweep.
    async fn drop_template(
        &self,
        g: &GoldenRow,
        claim: Claim,
        why: &str,
    ) -> Result<(), StoreError> {
        let claim = match claim {
            Claim::Unused => "unused",
            Claim::Asked => "asked",
            Claim::Resume => "resume",
        };
        let claimed = self.store.write(owner::Golden, |tx| {
            write::golden::claim_drop(tx, &g.key, g.state, claim)
        })?;
        if !claimed {
            return Ok(());
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
                    return Ok(());
                }
            }
        }
        self.store
            .write(owner::Golden, |tx| write::golden::dropped(tx, &g.key))?;
        tracing::info!(key = %g.key, name = %g.name, why, "dropped golden template");
        Ok(())
    }
}
