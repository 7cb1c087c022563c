//! The key of a golden template: what it hashes (the adapter, the server, `clone_from`, the
//! commands and the files they depend on), so that a changed migration rebuilds it.

use std::collections::BTreeSet;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::glob::glob_match;
use crate::spec::Resource;

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
