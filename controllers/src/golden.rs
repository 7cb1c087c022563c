//! The golden controller: one template per key, migrated and seeded once, that worlds are
//! cloned from (server-side) instead of each running `migrate` and `seed`.
//!
//! # Guarantees
//! - The key hashes the adapter, the server, `clone_from`, `migrate`, `seed` and the
//!   contents of the files they depend on: the migration and seed files of the common
//!   frameworks found in the workdir (Alembic's `script_location`, `migrations/`,
//!   `db/migrate/`, `prisma/migrations/`, `seeds/`, `*.sql`, … see [`key_coverage`]), the
//!   files the commands name and `clone_key_files`: a changed migration, committed or not,
//!   rebuilds the template by itself.
//! - Two worlds that need the same template while it builds wait for one build, never two
//!   (the row is claimed in one transaction against its primary key).
//! - A template is `ready` only after its build finished and it was sealed (closed to
//!   connections); no world is ever cloned from a half-built or failed one.
//! - A build left by a daemon that died is dropped and started again by the next daemon.
//! - A template no world needs any more is dropped.
//! - A failed build keeps the command's output tail; a changed command (a new key) or the
//!   next `binky up` builds again.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use rusqlite::params;
use sha2::{Digest, Sha256};

use crate::env::Layout;
use crate::process::Supervisor;
use crate::runtime::{Action, Applied, Cleanup, Condition, Controller, ReconcileError};
use crate::slice::{random_secret, SliceController, SliceEffects, SliceFault, SliceSpec};
use crate::spec::Resource;
use crate::store::{self, now_ms, owner, GoldenRow, SliceRow, Store, StoreError, World};

/// Finalizer and controller name.
pub const NAME: &str = "golden";
/// The condition this controller reports.
pub const CONDITION: &str = "GoldensReady";

/// Why the golden controller could not converge.
#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The template's server is not reachable yet.
    #[error("{service}: waiting for the server of its golden template: {detail}; retrying")]
    Waiting {
        /// The service.
        service: String,
        /// What the adapter said.
        detail: String,
    },
}

impl From<rusqlite::Error> for GoldenError {
    fn from(e: rusqlite::Error) -> Self {
        GoldenError::Store(e.into())
    }
}

impl ReconcileError for GoldenError {
    fn reason(&self) -> &'static str {
        match self {
            GoldenError::Store(_) => "StoreFailed",
            GoldenError::Waiting { .. } => "ServerUnavailable",
        }
    }
}

/// Does `path` (relative, `/`-separated) match `pattern` (`*`, `?`, `**`)?
pub fn glob_match(pattern: &str, path: &str) -> bool {
    fn rec(p: &[&str], s: &[&str]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some(&"**") => (0..=s.len()).any(|i| rec(&p[1..], &s[i..])),
            Some(seg) => {
                !s.is_empty() && seg_match(seg.as_bytes(), s[0].as_bytes()) && rec(&p[1..], &s[1..])
            }
        }
    }
    fn seg_match(p: &[u8], s: &[u8]) -> bool {
        match (p.first(), s.first()) {
            (None, None) => true,
            (Some(b'*'), _) => seg_match(&p[1..], s) || (!s.is_empty() && seg_match(p, &s[1..])),
            (Some(b'?'), Some(_)) => seg_match(&p[1..], &s[1..]),
            (Some(a), Some(b)) if a == b => seg_match(&p[1..], &s[1..]),
            _ => false,
        }
    }
    let p: Vec<&str> = pattern
        .trim_start_matches("./")
        .split('/')
        .filter(|x| !x.is_empty())
        .collect();
    let s: Vec<&str> = path.split('/').filter(|x| !x.is_empty()).collect();
    rec(&p, &s)
}

/// Directories never walked for key files: version control, dependencies, caches, builds.
const NOT_WALKED: &[&str] = &[
    ".git",
    "node_modules",
    "target",
    ".venv",
    "venv",
    "__pycache__",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".next",
    ".nuxt",
    ".cache",
    "vendor",
];

/// Files under `dir` (relative paths, sorted), skipping [`NOT_WALKED`] directories.
fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, rel)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if NOT_WALKED.contains(&name.as_str()) {
                continue;
            }
            let r = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push((e.path(), r)),
                Ok(t) if t.is_file() => out.push(r),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

/// Directories whose files are migrations or seed data in the common frameworks: Django
/// apps' and Flask-Migrate's, sqlx's, Diesel's, Knex's, Sequelize's, TypeORM's, goose's and
/// yoyo's `migrations/`, Flyway's `db/migration/`, Rails' `db/migrate/`, Prisma's
/// `prisma/migrations/`, Ecto's `priv/repo/migrations/`, Knex's `seeds/`, Sequelize's
/// `seeders/`, Django's `fixtures/`, Liquibase's `changelog/`.
const MIGRATION_DIRS: &[&str] = &[
    "migrations",
    "migration",
    "migrate",
    "seeds",
    "seeders",
    "fixtures",
    "changelog",
];

/// Files that hold a schema, seed data or a migration tool's settings: Prisma, Rails,
/// Ecto, Knex, Sequelize, Diesel, Flyway, TypeORM, Alembic.
fn is_schema_file(name: &str) -> bool {
    matches!(
        name,
        "schema.prisma"
            | "schema.rb"
            | "structure.sql"
            | "seeds.rb"
            | "seeds.exs"
            | ".sequelizerc"
            | "diesel.toml"
            | "flyway.conf"
            | "flyway.toml"
            | "alembic.ini"
    ) || name.starts_with("knexfile.")
        || name.starts_with("ormconfig.")
        || name.ends_with(".sql")
}

/// Alembic's `script_location` of an `alembic.ini` at `ini` (relative to the workdir):
/// the scripts directory, relative to the workdir.
fn alembic_scripts(workdir: &Path, ini: &str) -> String {
    let here = Path::new(ini)
        .parent()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let join = |rel: &str| {
        let rel = rel.trim_start_matches("./").trim_end_matches('/');
        if here.is_empty() {
            rel.to_owned()
        } else {
            format!("{here}/{rel}")
        }
    };
    let text = std::fs::read_to_string(workdir.join(ini)).unwrap_or_default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        if k.trim() == "script_location" {
            let v = v.trim();
            // `%(here)s/alembic`, or a path relative to where alembic runs (the ini's
            // directory, in practice); a `package:dir` location is inside a package.
            let v = v
                .trim_start_matches("%(here)s/")
                .trim_start_matches("%(here)s");
            let v = v.rsplit(':').next().unwrap_or(v);
            return join(if v.is_empty() { "." } else { v });
        }
    }
    join("alembic")
}

/// What a template's key covers besides the text of `migrate` and `seed`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyCoverage {
    /// The files (relative to the workdir, sorted).
    pub files: Vec<String>,
    /// Migration and seed files found by their frameworks' layouts, or `clone_key_files`:
    /// what was found, said plainly. Empty: the key covers only the commands' text and
    /// the files they name.
    pub found: Vec<String>,
}

/// The files a template's key covers: the migration and seed files of the common
/// frameworks found under `workdir` (see [`MIGRATION_DIRS`], [`is_schema_file`], Alembic's
/// `script_location`), the files (or directories) `migrate` and `seed` name, and
/// `clone_key_files` globs.
pub fn key_coverage(workdir: &Path, res: &Resource) -> KeyCoverage {
    let all = walk(workdir);
    let mut found = Vec::new();
    let mut patterns: Vec<String> = res.clone_key_files.clone().unwrap_or_default();
    if !patterns.is_empty() {
        found.push(format!("clone_key_files ({})", patterns.join(", ")));
    }
    for cmd in [res.migrate.as_deref(), res.seed.as_deref()]
        .into_iter()
        .flatten()
    {
        for word in cmd.split(|c: char| {
            c.is_whitespace() || matches!(c, '=' | '"' | '\'' | '<' | '>' | ';' | '|')
        }) {
            let w = word.trim_start_matches("./").trim_end_matches('/');
            if w.is_empty() || w.starts_with('-') || w.starts_with('$') {
                continue;
            }
            let p = workdir.join(w);
            if p.is_file() {
                patterns.push(w.to_owned());
            } else if p.is_dir() {
                patterns.push(format!("{w}/**"));
            }
        }
    }
    // Alembic keeps its scripts where `script_location` says (often not `migrations/`).
    let mut dirs: Vec<String> = Vec::new();
    for ini in all
        .iter()
        .filter(|f| f.rsplit('/').next() == Some("alembic.ini"))
    {
        let scripts = alembic_scripts(workdir, ini);
        found.push(format!("Alembic scripts in {scripts}/"));
        patterns.push(format!("{scripts}/**"));
    }
    let framework: BTreeSet<&String> = all
        .iter()
        .filter(|f| {
            let mut parts: Vec<&str> = f.split('/').collect();
            let name = parts.pop().unwrap_or("");
            if let Some(i) = parts.iter().position(|p| MIGRATION_DIRS.contains(p)) {
                let dir = parts[..=i].join("/");
                if !dirs.contains(&dir) {
                    dirs.push(dir);
                }
                return true;
            }
            is_schema_file(name)
        })
        .collect();
    // `a, b, c, d and 3 more`.
    let some = |items: Vec<String>| {
        let more = items.len().saturating_sub(4);
        let shown = items.into_iter().take(4).collect::<Vec<_>>().join(", ");
        if more > 0 {
            format!("{shown} and {more} more")
        } else {
            shown
        }
    };
    if !dirs.is_empty() {
        let shown = some(dirs.iter().map(|d| format!("{d}/")).collect());
        found.push(format!("migration and seed directories {shown}"));
    }
    let schema: Vec<String> = framework
        .iter()
        .filter(|f| !dirs.iter().any(|d| f.starts_with(&format!("{d}/"))))
        .map(|f| f.to_string())
        .collect();
    if !schema.is_empty() {
        found.push(format!("schema and seed files {}", some(schema)));
    }
    let files = all
        .iter()
        .filter(|f| framework.contains(f) || patterns.iter().any(|p| glob_match(p, f)))
        .cloned()
        .collect();
    KeyCoverage { files, found }
}

/// The files a template's key covers (see [`key_coverage`]).
pub fn key_files(workdir: &Path, res: &Resource) -> Vec<String> {
    key_coverage(workdir, res).files
}

/// The template key of a service.
pub fn golden_key(res: &Resource, server: &str, workdir: &Path) -> String {
    let mut h = Sha256::new();
    for part in [
        res.adapter.as_str(),
        server,
        res.clone_from.as_deref().unwrap_or(""),
        res.migrate.as_deref().unwrap_or(""),
        res.seed.as_deref().unwrap_or(""),
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    for f in key_files(workdir, res) {
        h.update(f.as_bytes());
        h.update([0]);
        h.update(std::fs::read(workdir.join(&f)).unwrap_or_default());
        h.update([0]);
    }
    h.finalize()
        .iter()
        .take(10)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The template's slice name: `bk_golden_<clone_from>_<key>`.
pub fn golden_name(clone_from: &str, key: &str) -> String {
    let cf: String = clone_from
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(30)
        .collect();
    format!("bk_golden_{cf}_{}", &key[..key.len().min(12)])
}

/// The golden controller.
pub struct GoldenController<E, S> {
    store: Store,
    /// Provisioning, command running and slice specs, shared with the slice controller.
    slices: SliceController<E, S>,
    /// This daemon (`pid:start_time`): a `building` row of another builder is stale.
    builder: String,
}

impl<E: SliceEffects, S: Supervisor> GoldenController<E, S> {
    /// A controller over `store`, using `slices` for the work, identifying its builds as
    /// `builder`.
    pub fn new(store: Store, slices: SliceController<E, S>, builder: String) -> Self {
        GoldenController {
            store,
            slices,
            builder,
        }
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
        let row = SliceRow {
            service: service.to_owned(),
            adapter: res.adapter.clone(),
            name: g.name.clone(),
            secret: g.secret.clone(),
            state: String::new(),
            address: None,
            tokens: Default::default(),
            admin_url: None,
            migrate_hash: None,
            seed_hash: None,
            failed_generation: None,
            message: String::new(),
        };
        self.slices.spec_of(world, service, res, &row)
    }

    fn set_state(
        &self,
        key: &str,
        state: &str,
        output: &str,
        build_ms: Option<i64>,
    ) -> Result<(), StoreError> {
        self.store.write(owner::Golden, |tx| {
            tx.execute(
                "UPDATE goldens SET state = ?2, output = ?3, build_ms = COALESCE(?4, build_ms), updated_at = ?5 WHERE key = ?1",
                params![key, state, output, build_ms, now_ms()],
            )?;
            Ok(())
        })
    }

    /// Build the template of `key` in `world`'s worktree.
    #[allow(clippy::too_many_arguments)]
    async fn build(
        &self,
        world: &World,
        layout: &Layout,
        service: &str,
        res: &Resource,
        g: &GoldenRow,
    ) -> Result<Option<Condition>, GoldenError> {
        let started = std::time::Instant::now();
        let spec = self.template_spec(world, service, res, g);
        // A half-built template (an earlier attempt) is dropped first: never reused.
        let _ = self.slices.effects().teardown(&spec).await;
        let address = match self.slices.effects().provision(&spec).await {
            Ok(a) => a,
            Err(SliceFault::Transient(detail)) => {
                return Err(GoldenError::Waiting {
                    service: service.to_owned(),
                    detail,
                })
            }
            Err(SliceFault::Permanent(detail)) => {
                self.set_state(&g.key, "failed", &detail, None)?;
                return Ok(Some(Condition::failed(
                    CONDITION,
                    "GoldenFailed",
                    format!("{service}: golden template: {detail}"),
                )));
            }
        };
        self.store.write(owner::Golden, |tx| {
            tx.execute(
                "UPDATE goldens SET admin_url = ?2 WHERE key = ?1",
                params![g.key, address.admin_url],
            )?;
            Ok(())
        })?;
        for (which, cmd) in [
            ("migrate", res.migrate.as_deref()),
            ("seed", res.seed.as_deref()),
        ] {
            let Some(cmd) = cmd else { continue };
            if let Err(msg) = self
                .slices
                .run_command(world, layout, service, res, which, cmd, &address)
                .await
            {
                self.set_state(&g.key, "failed", &msg, None)?;
                self.event(
                    world,
                    "golden_failed",
                    &format!("{service}: golden template {}: {msg}", g.name),
                );
                return Ok(Some(Condition::failed(
                    CONDITION,
                    "GoldenFailed",
                    format!("{service}: golden template {}: {msg}", g.name),
                )));
            }
        }
        match self.slices.effects().seal(&spec).await {
            Ok(()) => {}
            Err(SliceFault::Transient(detail)) => {
                return Err(GoldenError::Waiting {
                    service: service.to_owned(),
                    detail,
                })
            }
            Err(SliceFault::Permanent(detail)) => {
                self.set_state(&g.key, "failed", &detail, None)?;
                return Ok(Some(Condition::failed(
                    CONDITION,
                    "GoldenFailed",
                    format!("{service}: golden template: {detail}"),
                )));
            }
        }
        let ms = started.elapsed().as_millis() as i64;
        self.set_state(&g.key, "ready", "", Some(ms))?;
        self.event(
            world,
            "golden",
            &format!(
                "{service}: built golden template {} in {:.1}s",
                g.name,
                ms as f64 / 1000.0
            ),
        );
        Ok(None)
    }

    /// Drop templates no world needs (and those asked to go), unless they are building.
    async fn drop_unneeded(&self) -> Result<(), StoreError> {
        let refs: BTreeSet<String> = self
            .store
            .read(store::golden_refs)?
            .into_iter()
            .map(|r| r.2)
            .collect();
        let drops: BTreeSet<String> = self.store.read(|c| {
            let mut stmt = c.prepare("SELECT key FROM golden_drops")?;
            let keys = stmt
                .query_map([], |r| r.get(0))?
                .collect::<Result<BTreeSet<String>, _>>()?;
            Ok(keys)
        })?;
        for g in self.store.read(store::goldens)? {
            let stale = !refs.contains(&g.key);
            if !(stale || drops.contains(&g.key))
                || (g.state == "building" && g.builder == self.builder)
            {
                continue;
            }
            let spec = SliceSpec {
                adapter: g.adapter.clone(),
                slice: g.name.clone(),
                secret: g.secret.clone(),
                admin_url: g.admin_url.clone(),
                options: Default::default(),
                buckets: Vec::new(),
                search_path: None,
            };
            match self.slices.effects().teardown(&spec).await {
                Ok(()) => {
                    self.store.write(owner::Golden, |tx| {
                        tx.execute("DELETE FROM goldens WHERE key = ?1", [&g.key])?;
                        tx.execute("DELETE FROM golden_drops WHERE key = ?1", [&g.key])?;
                        Ok(())
                    })?;
                    tracing::info!(key = %g.key, name = %g.name, "dropped golden template");
                }
                Err(err) => tracing::warn!(key = %g.key, %err, "cannot drop golden template yet"),
            }
        }
        Ok(())
    }
}

impl<E: SliceEffects, S: Supervisor> Controller for GoldenController<E, S> {
    type Error = GoldenError;

    fn name(&self) -> &'static str {
        NAME
    }

    fn condition_type(&self) -> &'static str {
        CONDITION
    }

    async fn apply(&self, world: &World) -> Result<Applied, GoldenError> {
        // The admission gate: nothing of a held world starts.
        if let Some(held) = crate::gate::hold(&self.store, world, CONDITION)? {
            return Ok(held);
        }
        let selected = world.spec.selected(world.group.as_deref());
        let wanted: Vec<(String, Resource)> = world
            .spec
            .services
            .iter()
            .filter(|(n, _)| selected.contains(*n))
            .filter_map(|(n, s)| {
                s.resource()
                    .filter(|r| r.clone_from.is_some())
                    .cloned()
                    .map(|r| (n.clone(), r))
            })
            .collect();
        let mut keep: Vec<String> = Vec::new();
        if wanted.is_empty() {
            self.store.write(owner::Golden, |tx| {
                tx.execute("DELETE FROM golden_refs WHERE world_id = ?1", [world.id])?;
                Ok(())
            })?;
            self.drop_unneeded().await?;
            return Ok(Applied {
                action: Action::AwaitChange,
                conditions: vec![Condition::ok(
                    CONDITION,
                    "NoTemplates",
                    "no service clones from a golden template",
                )],
            });
        }
        let Some(layout) = self
            .store
            .read(|c| store::worktree(c, world.id))?
            .filter(|w| w.state == "ready")
            .map(|w| Layout { worktree: w.path })
        else {
            return Ok(Applied {
                action: Action::AwaitChange,
                conditions: vec![Condition::waiting(
                    CONDITION,
                    "Waiting",
                    "waiting for the worktree",
                )],
            });
        };
        let have = self.store.read(|c| store::slices(c, world.id))?;
        let mut notes = Vec::new();
        let mut waiting: Option<String> = None;
        let refs_now = self.store.read(|c| store::golden_refs_of(c, world.id))?;
        for (service, res) in &wanted {
            // A ready slice with its reference recorded needs nothing here: no key to compute
            // (a walk and a hash of the files), no template to build.
            if have
                .iter()
                .any(|r| r.service == *service && r.state == "ready")
                && refs_now.contains_key(service)
            {
                keep.push(service.clone());
                continue;
            }
            let dummy = SliceRow {
                service: service.clone(),
                adapter: res.adapter.clone(),
                name: String::new(),
                secret: String::new(),
                state: String::new(),
                address: None,
                tokens: Default::default(),
                admin_url: None,
                migrate_hash: None,
                seed_hash: None,
                failed_generation: None,
                message: String::new(),
            };
            // The slice controller says what is unset; no template is built on it.
            if crate::slice::unset_settings(world, res).is_some() {
                keep.push(service.clone());
                continue;
            }
            let base = self.slices.spec_of(world, service, res, &dummy);
            let clone = match self.slices.effects().can_clone(&base).await {
                Ok(c) => c,
                Err(SliceFault::Transient(detail)) => {
                    return Err(GoldenError::Waiting {
                        service: service.clone(),
                        detail,
                    })
                }
                Err(SliceFault::Permanent(_)) => false,
            };
            if !clone {
                notes.push(format!(
                    "{service}: adapter {} cannot clone; each world runs migrate and seed",
                    res.adapter
                ));
                continue;
            }
            let dir = layout.config_dir(world);
            let workdir: PathBuf = if res.workdir.is_empty() || res.workdir == "." {
                dir
            } else {
                dir.join(&res.workdir)
            };
            let server = base
                .admin_url
                .as_deref()
                .map(crate::redact_server)
                .unwrap_or_else(|| format!("managed:{}", res.adapter));
            let key = golden_key(res, &server, &workdir);
            keep.push(service.clone());
            self.store.write(owner::Golden, |tx| {
                tx.execute(
                    "INSERT INTO golden_refs (world_id, service, key) SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM worlds WHERE id = ?1)
                     ON CONFLICT (world_id, service) DO UPDATE SET key = excluded.key",
                    params![world.id, service, key],
                )?;
                Ok(())
            })?;
            // A world whose slice exists already needs no template (a changed migrate
            // runs on its own copy); the reference keeps the template for later worlds.
            if have
                .iter()
                .any(|r| r.service == *service && r.state == "ready")
            {
                continue;
            }
            // Claim the build, or find who has it.
            let name = golden_name(res.clone_from.as_deref().unwrap_or("golden"), &key);
            let claimed = self.store.write(owner::Golden, |tx| {
                let n = tx.execute(
                    "INSERT OR IGNORE INTO goldens (key, adapter, clone_from, name, secret, state, builder, owner_world, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, 'building', ?6, ?7, ?8, ?8)",
                    params![key, res.adapter, res.clone_from, name, random_secret(), self.builder, world.id, now_ms()],
                )?;
                Ok(n == 1)
            })?;
            let Some(g) = self.golden(&key)? else {
                continue;
            };
            let rebuild = claimed
                || (g.state == "building"
                    && (g.builder != self.builder || g.owner_world == Some(world.id)))
                || (g.state == "failed" && world.last_used_at > g.updated_at);
            if rebuild {
                if !claimed {
                    // A build by a daemon that died, or a failed one the next `up` retries.
                    self.store.write(owner::Golden, |tx| {
                        tx.execute(
                            "UPDATE goldens SET state = 'building', builder = ?2, owner_world = ?3, output = '', updated_at = ?4 WHERE key = ?1",
                            params![key, self.builder, world.id, now_ms()],
                        )?;
                        Ok(())
                    })?;
                    self.event(
                        world,
                        "golden",
                        &format!("{service}: building golden template {} again", g.name),
                    );
                } else {
                    self.event(world, "golden", &format!("{service}: building golden template {name} (migrate and seed once; other worlds are cloned from it)"));
                }
                let g = self.golden(&key)?.unwrap_or(g);
                if let Some(cond) = self.build(world, &layout, service, res, &g).await? {
                    return Ok(Applied {
                        action: Action::AwaitChange,
                        conditions: vec![cond],
                    });
                }
                continue;
            }
            match g.state.as_str() {
                "ready" => {}
                "failed" => {
                    return Ok(Applied {
                        action: Action::AwaitChange,
                        conditions: vec![Condition::failed(
                            CONDITION,
                            "GoldenFailed",
                            format!("{service}: golden template {} failed: {}", g.name, g.output),
                        )],
                    })
                }
                _ => {
                    waiting = Some(format!(
                        "{service}: golden template {} is being built by another world",
                        g.name
                    ))
                }
            }
        }
        // This world's services that no longer clone: their references go. (A reference
        // this pass made is in `keep`, so the ones read before the loop are all there is.)
        for svc in refs_now.into_keys().filter(|s| !keep.contains(s)) {
            self.store.write(owner::Golden, |tx| {
                tx.execute(
                    "DELETE FROM golden_refs WHERE world_id = ?1 AND service = ?2",
                    params![world.id, svc],
                )?;
                Ok(())
            })?;
        }
        self.drop_unneeded().await?;
        if let Some(w) = waiting {
            return Ok(Applied {
                action: Action::Requeue(std::time::Duration::from_millis(300)),
                conditions: vec![Condition::waiting(CONDITION, "Building", w)],
            });
        }
        let msg = if notes.is_empty() {
            "golden templates ready".to_owned()
        } else {
            notes.join("; ")
        };
        Ok(Applied {
            action: Action::AwaitChange,
            conditions: vec![Condition::ok(CONDITION, "Ready", msg)],
        })
    }

    async fn cleanup(&self, world: &World) -> Result<Cleanup, GoldenError> {
        self.store.write(owner::Golden, |tx| {
            tx.execute("DELETE FROM golden_refs WHERE world_id = ?1", [world.id])?;
            Ok(())
        })?;
        self.drop_unneeded().await?;
        Ok(Cleanup::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_like_a_shell() {
        assert!(glob_match("migrations/**", "migrations/001_init.sql"));
        assert!(glob_match("migrations/**", "migrations/a/b.sql"));
        assert!(!glob_match("migrations/**", "src/x.sql"));
        assert!(glob_match("*.sql", "seed.sql"));
        assert!(!glob_match("*.sql", "db/seed.sql"));
        assert!(glob_match("**/*.sql", "db/seed.sql"));
        assert!(glob_match("seed.sq?", "seed.sql"));
    }

    #[test]
    fn the_key_follows_the_files_the_commands_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("schema.sql"), "create table a (x int);").unwrap();
        std::fs::create_dir_all(dir.path().join("migrations")).unwrap();
        std::fs::write(dir.path().join("migrations/1.sql"), "one").unwrap();
        let res = resource("psql \"$DATABASE_URL\" -f schema.sql && ./run migrations/");
        assert_eq!(
            key_files(dir.path(), &res),
            vec!["migrations/1.sql", "schema.sql"]
        );
        let k1 = golden_key(&res, "s", dir.path());
        assert_eq!(k1, golden_key(&res, "s", dir.path()));
        std::fs::write(dir.path().join("migrations/1.sql"), "changed").unwrap();
        let k2 = golden_key(&res, "s", dir.path());
        assert_ne!(k1, k2, "a changed migration must change the key");
        assert_ne!(k2, golden_key(&res, "other server", dir.path()));
        // clone_key_files adds to what is found.
        std::fs::create_dir_all(dir.path().join("data")).unwrap();
        std::fs::write(dir.path().join("data/users.csv"), "a,b").unwrap();
        let mut listed = res.clone();
        listed.clone_key_files = Some(vec!["data/*.csv".into()]);
        assert_eq!(
            key_files(dir.path(), &listed),
            vec!["data/users.csv", "migrations/1.sql", "schema.sql"]
        );
        assert!(golden_name("golden", &k1).len() <= 63);
    }

    fn resource(migrate: &str) -> Resource {
        Resource {
            adapter: "postgres".into(),
            admin_url: None,
            migrate: Some(migrate.into()),
            seed: None,
            clone_from: Some("golden".into()),
            clone_key_files: None,
            sync: Default::default(),
            buckets: vec![],
            options: Default::default(),
            workdir: ".".into(),
            env: Default::default(),
            env_file: vec![],
        }
    }

    #[test]
    fn the_key_covers_the_migrations_of_the_common_frameworks_though_no_command_names_them() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            // Alembic with its scripts where script_location says.
            (
                "backend/alembic.ini",
                "[alembic]\nscript_location = %(here)s/db_migrations\n",
            ),
            ("backend/db_migrations/env.py", "env"),
            ("backend/db_migrations/versions/001_init.py", "one"),
            // Django apps.
            ("web/manage.py", "manage"),
            ("web/polls/migrations/0001_initial.py", "django"),
            ("web/polls/fixtures/seed.json", "[]"),
            // Prisma, Rails, Ecto, Knex seeds, plain SQL.
            ("prisma/schema.prisma", "model"),
            ("prisma/migrations/20240101_init/migration.sql", "create"),
            ("db/migrate/20240101_create_users.rb", "rails"),
            ("db/schema.rb", "schema"),
            ("db/seeds.rb", "seeds"),
            ("priv/repo/migrations/1_init.exs", "ecto"),
            ("seeds/01_users.js", "knex"),
            ("sql/views.sql", "views"),
            // Not migrations.
            ("web/polls/models.py", "models"),
            ("README.md", "readme"),
            ("node_modules/knex/migrations/x.js", "a dependency's"),
            (
                ".venv/lib/django/contrib/auth/migrations/0001_initial.py",
                "a dependency's",
            ),
        ];
        for (f, text) in files {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let res =
            resource("cd backend && alembic upgrade head && cd ../web && python manage.py migrate");
        let cov = key_coverage(dir.path(), &res);
        let mut want: Vec<&str> = files[..14].iter().map(|(f, _)| *f).collect();
        want.retain(|f| *f != "web/manage.py");
        want.sort();
        assert_eq!(cov.files, want);
        assert!(
            cov.found
                .iter()
                .any(|f| f == "Alembic scripts in backend/db_migrations/"),
            "{:?}",
            cov.found
        );
        // A new migration changes the key, though no command names it.
        let k1 = golden_key(&res, "s", dir.path());
        std::fs::write(dir.path().join("web/polls/migrations/0002_more.py"), "two").unwrap();
        assert_ne!(k1, golden_key(&res, "s", dir.path()));
    }

    #[test]
    fn nothing_found_is_said_as_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/index.js"), "x").unwrap();
        std::fs::write(dir.path().join("package.json"), "{}").unwrap();
        let cov = key_coverage(dir.path(), &resource("npm run db:migrate"));
        assert!(cov.found.is_empty() && cov.files.is_empty(), "{cov:?}");
    }
}
