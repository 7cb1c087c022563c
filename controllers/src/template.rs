//! The key of a golden template: what it hashes (the adapter, the server, `clone_from`, the
//! commands and the files they depend on), so that a changed migration rebuilds it; what
//! a new template may grow from (its lineage and migration inputs, [`golden_inputs`]); and
//! whether a world's template is ready ([`template_ready`]). The golden controller builds
//! templates by these keys; the worktree controller asks whether one is ready here, not of
//! the golden controller.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::adapter::SliceSpec;
use crate::env::Layout;
use crate::glob::glob_match;
use crate::spec::Resource;
use crate::store::{self, GoldenState, Store, StoreError, World};

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

/// The end of the temporary name a path brought into a worktree has until it is whole
/// (`.venv` is made as `..venv.binky-copy`, then renamed: `src/bootstrap.rs`). Its files
/// are a dependency directory's (Django's contrib apps have `migrations/`), never the
/// project's: a key that counted them would change while the path is being brought.
pub const BRINGING_SUFFIX: &str = ".binky-copy";

/// Is a directory entry called `name` never looked at for key files: a [`NOT_WALKED`]
/// directory, or a path being brought into the worktree under its temporary name.
fn skipped(name: &str) -> bool {
    NOT_WALKED.contains(&name) || (name.starts_with('.') && name.ends_with(BRINGING_SUFFIX))
}

/// Files under `dir` (relative paths, sorted), skipping [`skipped`] directories: every
/// file there is, ignored by git or not (what [`project_files`] falls back to outside a
/// git repository, and how a directory a command names is read).
fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, rel)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if skipped(&name) {
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

/// The project's files under `workdir` (relative, sorted): what git tracks there or would
/// track (an uncommitted new migration counts), never what it ignores (dependency and
/// build directories, `[project] copy` and `.worktreeinclude` paths: a package's
/// `migrations/` in `.venv`, a copy under `build/lib/`), nor a path being brought into the
/// worktree, nor a [`NOT_WALKED`] directory. A submodule's files are read from its
/// directory. Outside a git repository (or without git): every file, as [`walk`] finds it.
fn project_files(workdir: &Path) -> Vec<String> {
    let exclude = format!("--exclude=.*{BRINGING_SUFFIX}");
    let listed = crate::git::run_blocking(
        workdir,
        &[
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
            &exclude,
        ],
        None,
    );
    let out = match listed {
        Ok(out) if out.status.success() => out,
        _ => return walk(workdir),
    };
    let mut files = Vec::new();
    for rel in out.text().split('\0').filter(|s| !s.is_empty()) {
        if rel.split('/').any(skipped) {
            continue;
        }
        match std::fs::symlink_metadata(workdir.join(rel)) {
            Ok(m) if m.is_file() => files.push(rel.to_owned()),
            // A submodule (git lists it as one entry): its files, as they are.
            Ok(m) if m.is_dir() => files.extend(
                walk(&workdir.join(rel))
                    .into_iter()
                    .map(|f| format!("{rel}/{f}")),
            ),
            _ => {}
        }
    }
    files.sort();
    files.dedup();
    files
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

/// Directories of seed data that only a seed command reads: Knex's `seeds/`, Sequelize's
/// `seeders/` (Django's `fixtures/` is not one: a data migration may load them).
const SEED_DIRS: &[&str] = &["seeds", "seeders"];

/// Files of seed data only a seed command reads: Rails' and Ecto's.
fn is_seed_file(name: &str) -> bool {
    matches!(name, "seeds.rb" | "seeds.exs")
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
    /// Of `files`, those only `seed` reads: named by `seed` and not by `migrate`, or seed
    /// data of the frameworks (`seeds/`, `seeders/`, `seeds.rb`, `seeds.exs`). The others
    /// are `migrate`'s inputs, which say whether a template may grow from an earlier one.
    pub seed_only: Vec<String>,
}

/// Files (or `dir/**`) that the words of `cmd` name under `workdir`.
fn named_by(workdir: &Path, cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in cmd
        .split(|c: char| c.is_whitespace() || matches!(c, '=' | '"' | '\'' | '<' | '>' | ';' | '|'))
    {
        let w = word.trim_start_matches("./").trim_end_matches('/');
        if w.is_empty() || w.starts_with('-') || w.starts_with('$') {
            continue;
        }
        // Only what is inside the workdir: `..`, `/etc/x` and the workdir itself name
        // nothing of the project's.
        if w.starts_with('/') || w == "." || w.split('/').any(|p| p == "..") {
            continue;
        }
        let p = workdir.join(w);
        if p.is_file() {
            out.push(w.to_owned());
        } else if p.is_dir() {
            out.push(format!("{w}/**"));
        }
    }
    out
}

/// The files a template's key covers: the migration and seed files of the common
/// frameworks found under `workdir` (see [`MIGRATION_DIRS`], [`is_schema_file`], Alembic's
/// `script_location`), the files (or directories) `migrate` and `seed` name, and
/// `clone_key_files` globs.
pub fn key_coverage(workdir: &Path, res: &Resource) -> KeyCoverage {
    let mut found = Vec::new();
    let mut patterns: Vec<String> = res.clone_key_files.clone().unwrap_or_default();
    if !patterns.is_empty() {
        found.push(format!("clone_key_files ({})", patterns.join(", ")));
    }
    let by_migrate = res
        .migrate
        .as_deref()
        .map(|m| named_by(workdir, m))
        .unwrap_or_default();
    let by_seed = res
        .seed
        .as_deref()
        .map(|m| named_by(workdir, m))
        .unwrap_or_default();
    patterns.extend(by_migrate.iter().cloned());
    patterns.extend(by_seed.iter().cloned());
    // Only the project's files, even where a command names one git ignores (`test -f
    // .venv/ok`): what is ignored differs between worktrees of one commit (brought in, or
    // not yet, or deferred), and the key must not.
    let all = project_files(workdir);
    // Alembic keeps its scripts where `script_location` says (often not `migrations/`).
    for ini in all
        .iter()
        .filter(|f| f.rsplit('/').next() == Some("alembic.ini"))
    {
        let scripts = alembic_scripts(workdir, ini);
        found.push(format!("Alembic scripts in {scripts}/"));
        patterns.push(format!("{scripts}/**"));
    }
    let (framework, dirs) = framework_files(&all);
    if !dirs.is_empty() {
        let shown = a_few(dirs.iter().map(|d| format!("{d}/")).collect());
        found.push(format!("migration and seed directories {shown}"));
    }
    let schema: Vec<String> = framework
        .iter()
        .filter(|f| !dirs.iter().any(|d| f.starts_with(&format!("{d}/"))))
        .map(|f| f.to_string())
        .collect();
    if !schema.is_empty() {
        found.push(format!("schema and seed files {}", a_few(schema)));
    }
    let files: Vec<String> = all
        .iter()
        .filter(|f| framework.contains(f) || patterns.iter().any(|p| glob_match(p, f)))
        .cloned()
        .collect();
    let seed_only = seed_only(&files, &by_migrate, &by_seed);
    KeyCoverage {
        files,
        found,
        seed_only,
    }
}

/// The files of `all` that a migration framework reads (under one of [`MIGRATION_DIRS`],
/// or a schema file), and those directories.
fn framework_files(all: &[String]) -> (BTreeSet<&String>, Vec<String>) {
    let mut dirs: Vec<String> = Vec::new();
    let framework = all
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
    (framework, dirs)
}

/// The key files only `seed` reads: named by it, or seed data, and not read by `migrate`
/// (`by_migrate` and `by_seed`: the patterns each names).
fn seed_only(files: &[String], by_migrate: &[String], by_seed: &[String]) -> Vec<String> {
    files
        .iter()
        .filter(|f| {
            let migrate_reads = by_migrate.iter().any(|p| glob_match(p, f));
            let seed_named = by_seed.iter().any(|p| glob_match(p, f));
            let mut parts: Vec<&str> = f.split('/').collect();
            let name = parts.pop().unwrap_or("");
            let seed_data = is_seed_file(name) || parts.iter().any(|p| SEED_DIRS.contains(p));
            !migrate_reads && (seed_named || seed_data)
        })
        .cloned()
        .collect()
}

/// `a, b, c, d and 3 more`.
fn a_few(items: Vec<String>) -> String {
    let more = items.len().saturating_sub(4);
    let shown = items.into_iter().take(4).collect::<Vec<_>>().join(", ");
    if more > 0 {
        format!("{shown} and {more} more")
    } else {
        shown
    }
}

/// The files a template's key covers (see [`key_coverage`]).
pub fn key_files(workdir: &Path, res: &Resource) -> Vec<String> {
    key_coverage(workdir, res).files
}

pub use crate::store::GoldenInputs;

fn short_hex(digest: &[u8], n: usize) -> String {
    digest.iter().take(n).map(|b| format!("{b:02x}")).collect()
}

/// The key, lineage and migration inputs of `project`'s `service`.
pub fn golden_inputs(
    project: &str,
    service: &str,
    res: &Resource,
    server: &str,
    workdir: &Path,
) -> GoldenInputs {
    let cov = key_coverage(workdir, res);
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
    let mut migrations = BTreeMap::new();
    for f in &cov.files {
        let bytes = std::fs::read(workdir.join(f)).unwrap_or_default();
        h.update(f.as_bytes());
        h.update([0]);
        h.update(&bytes);
        h.update([0]);
        if !cov.seed_only.contains(f) {
            migrations.insert(f.clone(), short_hex(&Sha256::digest(&bytes), 16));
        }
    }
    let key = short_hex(&h.finalize(), 10);
    let mut l = Sha256::new();
    for part in [
        project,
        service,
        res.adapter.as_str(),
        server,
        res.clone_from.as_deref().unwrap_or(""),
        res.migrate.as_deref().unwrap_or(""),
        res.workdir.as_str(),
    ] {
        l.update(part.as_bytes());
        l.update([0]);
    }
    GoldenInputs {
        key,
        lineage: short_hex(&l.finalize(), 10),
        migrations,
    }
}

/// The template key of a service.
pub fn golden_key(res: &Resource, server: &str, workdir: &Path) -> String {
    golden_inputs("", "", res, server, workdir).key
}

/// Whether a template built from `base`'s migration inputs may grow into one of `inputs`'s:
/// every input of the base is there unchanged (only new files were added, or only seed
/// data changed). A migration tool applies new migrations on top; it never runs an edited
/// one again, so an edited or removed input means building from an empty database.
pub fn grows_from(base: &BTreeMap<String, String>, inputs: &BTreeMap<String, String>) -> bool {
    base.iter().all(|(f, h)| inputs.get(f) == Some(h))
}

/// The template's slice name: `bk_golden_<home>_<clone_from>_<key>`, `home` being the
/// home's identity (`store::home_id`), so two homes sharing a server never build into, nor
/// drop, one template (the key alone is the same for the same migrations everywhere).
/// `clone_from` is cut so that the name and its stage's (`<name>_migrated`) fit every
/// server (`crate::adapter::MAX_NAME`, `MAX_NAME_COST`).
pub fn golden_name(home: &str, clone_from: &str, key: &str) -> String {
    use crate::adapter::{head_costing, name_cost, MAX_NAME_COST};
    let cf: String = clone_from
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    let key = &key[..key.len().min(12)];
    // What the rest costs: `bk_golden_<home>_`, `_<key>` and the stage's `_migrated`.
    let rest = name_cost(&format!("bk_golden_{home}__{key}_migrated"));
    let cf = head_costing(&cf, MAX_NAME_COST.saturating_sub(rest));
    format!("bk_golden_{home}_{cf}_{key}")
}

/// What the template of `service` is made of, read from its workdir in `layout` and the
/// server `base` names.
pub(crate) fn template_inputs(
    world: &World,
    layout: &Layout,
    service: &str,
    res: &Resource,
    base: &SliceSpec,
) -> GoldenInputs {
    let dir = layout.config_dir(world);
    let workdir: PathBuf = if res.workdir.is_empty() || res.workdir == "." {
        dir
    } else {
        dir.join(&res.workdir)
    };
    let server = base
        .admin_url
        .as_deref()
        .map(crate::url::redact_server)
        .unwrap_or_else(|| format!("managed:{}", res.adapter));
    golden_inputs(&world.project, service, res, &server, &workdir)
}

/// Whether the golden template `world`'s `service` would be cloned from is ready now, its
/// key read from the worktree at `worktree` as the golden controller reads it: then the
/// world's slice is a copy of it, and no `migrate` or `seed` of `service` runs in this
/// world (unless cloning fails after all).
pub(crate) fn template_ready(
    store: &Store,
    world: &World,
    worktree: &std::path::Path,
    service: &str,
    res: &Resource,
) -> Result<bool, StoreError> {
    let base = crate::adapter::slice_spec(world, service, res, "", "");
    let layout = Layout {
        worktree: worktree.to_owned(),
    };
    let inputs = template_inputs(world, &layout, service, res, &base);
    Ok(store
        .read(|c| store::golden(c, &inputs.key))?
        .is_some_and(|g| g.state == GoldenState::Ready))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for cf in [
            "g".repeat(40),
            "a_b-c.d/e_f-g_h_i-j_k_l".into(),
            "golden".into(),
        ] {
            let stage = format!("{}_migrated", golden_name("h2k4m6p7", &cf, &k1));
            assert!(
                stage.len() <= crate::adapter::MAX_NAME
                    && crate::adapter::name_cost(&stage) <= crate::adapter::MAX_NAME_COST,
                "{stage}"
            );
        }
        assert_eq!(
            golden_name("h2k4m6p7", "golden", &k1),
            format!("bk_golden_h2k4m6p7_golden_{}", &k1[..12])
        );
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
    fn the_key_counts_the_projects_files_never_what_git_ignores_nor_a_path_being_brought() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let out = crate::git::run_blocking(dir.path(), args, None).unwrap();
            assert!(out.status.success(), "git {args:?}: {}", out.stderr);
        };
        let write = |f: &str, text: &str| {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        git(&["init", "--quiet"]);
        write(".gitignore", ".venv/\nenv/\nbuild/\nlocal/\n");
        write("migrations/001.sql", "create table a (x int);");
        git(&["add", "-A"]);
        let res = resource("for f in migrations/*.sql; do psql -f $f; done");
        let key = || golden_key(&res, "s", dir.path());
        let first = key();
        assert_eq!(key_files(dir.path(), &res), ["migrations/001.sql"]);
        // A virtualenv brought into the worktree: under its temporary name, then its own
        // (Django's contrib apps have migrations). The key never moves.
        let pkg = "lib/python3.11/site-packages/django/contrib/auth/migrations";
        for i in 0..50 {
            write(&format!("..venv.binky-copy/{pkg}/{i:04}.sql"), "x");
        }
        assert_eq!(key(), first, "the key moved while .venv was being brought");
        std::fs::rename(
            dir.path().join("..venv.binky-copy"),
            dir.path().join(".venv"),
        )
        .unwrap();
        assert_eq!(key(), first);
        // Other ignored directories: a virtualenv by another name, a build's copy of the
        // migrations.
        write(&format!("env/{pkg}/0001_initial.sql"), "x");
        write("build/lib/app/migrations/001.sql", "a copy");
        assert_eq!(key(), first, "an ignored directory moved the key");
        // An uncommitted new migration counts.
        write("migrations/002.sql", "create table b (x int);");
        let second = key();
        assert_ne!(second, first, "a new migration did not change the key");
        // An ignored file a command names does not: a worktree that has not got it yet
        // must compute the same key as one that has.
        let mut named = res.clone();
        named.migrate = Some("test -f local/ok && psql -f migrations/001.sql".into());
        let without = golden_key(&named, "s", dir.path());
        write("local/ok", "installed");
        assert_eq!(without, golden_key(&named, "s", dir.path()));
    }

    #[test]
    fn outside_a_repository_a_path_being_brought_is_skipped_too() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("migrations")).unwrap();
        std::fs::write(dir.path().join("migrations/001.sql"), "one").unwrap();
        let res = resource("sh migrate.sh");
        let first = golden_key(&res, "s", dir.path());
        let brought = dir.path().join(".pkgs.binky-copy/x/migrations");
        std::fs::create_dir_all(&brought).unwrap();
        std::fs::write(brought.join("1.sql"), "x").unwrap();
        assert_eq!(golden_key(&res, "s", dir.path()), first);
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

    #[test]
    fn a_template_grows_only_when_the_migrations_before_are_unchanged_and_seed_data_does_not_count()
    {
        let dir = tempfile::tempdir().unwrap();
        let write = |f: &str, text: &str| {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write("migrations/001.sql", "one");
        write("seed.sh", "seed");
        write("db/seeds.rb", "rails seeds");
        let mut res = resource("sh migrate.sh");
        res.seed = Some("sh seed.sh".into());
        let cov = key_coverage(dir.path(), &res);
        assert_eq!(cov.seed_only, vec!["db/seeds.rb", "seed.sh"]);
        let first = golden_inputs("p", "db", &res, "s", dir.path());
        assert_eq!(
            first.migrations.keys().collect::<Vec<_>>(),
            ["migrations/001.sql"]
        );
        // The key is the one every binky computed before (no project or service in it).
        assert_eq!(first.key, golden_key(&res, "s", dir.path()));
        // A new migration: a new key, the same lineage, and it grows from the first.
        write("migrations/002.sql", "two");
        let second = golden_inputs("p", "db", &res, "s", dir.path());
        assert_ne!(first.key, second.key);
        assert_eq!(first.lineage, second.lineage);
        assert!(grows_from(&first.migrations, &second.migrations));
        assert!(!grows_from(&second.migrations, &first.migrations));
        // Changed seed data: a new key, the migration inputs unchanged.
        write("seed.sh", "seed, fixed");
        let third = golden_inputs("p", "db", &res, "s", dir.path());
        assert_ne!(second.key, third.key);
        assert_eq!(second.migrations, third.migrations);
        // An edited migration: no growing from a template that ran it before.
        write("migrations/001.sql", "one, edited");
        let fourth = golden_inputs("p", "db", &res, "s", dir.path());
        assert!(!grows_from(&third.migrations, &fourth.migrations));
        // Another service, project or migrate command is another lineage.
        for other in [
            golden_inputs("q", "db", &res, "s", dir.path()),
            golden_inputs("p", "db2", &res, "s", dir.path()),
            golden_inputs("p", "db", &res, "elsewhere", dir.path()),
            golden_inputs("p", "db", &resource("sh other.sh"), "s", dir.path()),
        ] {
            assert_ne!(other.lineage, first.lineage);
        }
        // A file both commands name is migrate's input.
        res.migrate = Some("sh migrate.sh seed.sh".into());
        assert!(key_coverage(dir.path(), &res).seed_only == vec!["db/seeds.rb"]);
    }
}
