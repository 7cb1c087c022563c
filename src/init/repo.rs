//! The repository facts [`super::generate`] works from ([`Repo`]), and which files the CLI
//! reads to fill it ([`wanted_file`], [`referenced_files`]). What the files say is read by
//! the reading steps of [`super::read`].

use std::collections::{BTreeMap, BTreeSet};

use serde_yaml_ng::Value;

use super::read::dockerfile::Build;
use super::values::{command_of, Command};

/// A compose text, and the name of the file (or files, `a.yml + b.yml`) it came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ComposeSource {
    /// The file's name as people see it (`docker-compose.yml`, `compose.yaml + compose.override.yaml`).
    pub name: String,
    /// The text (several files already merged with [`merge_compose`]).
    pub text: String,
}

/// What `binky init` knows of a project's directory. The CLI fills it from the filesystem;
/// [`super::generate`] reads nothing else, so it is pure and testable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Repo {
    /// The repository's name (see [`repository_name`]), else the directory's: `[project]
    /// name` comes from it.
    pub dir_name: String,
    /// The project's compose file(s), if it has any.
    pub compose: Option<ComposeSource>,
    /// The text of `.env`.
    pub dotenv: Option<String>,
    /// Git tracks `.env`: its values are the repository's own development settings,
    /// committed for everyone (a value of it is no credential of this machine).
    pub dotenv_tracked: bool,
    /// The virtualenvs beside the project's code that git ignores (`backend/.venv`: a
    /// directory with `pyvenv.cfg` and `bin/python`), each with the programs of its `bin/`.
    pub venvs: BTreeMap<String, BTreeSet<String>>,
    /// The `env_file`s compose services name, other than `.env` (path as written → text).
    pub env_files: BTreeMap<String, String>,
    /// Files that say what runs and how, by path relative to the directory (`/`-separated,
    /// no `./`) → text: those [`wanted_file`] accepts and those [`referenced_files`] names.
    pub files: BTreeMap<String, String>,
    /// The programs of [`TOOLS`] found on `PATH`.
    pub installed: BTreeSet<String>,
}

/// The text of `name` in directory `dir` (`None`: the top) of `files`.
pub(super) fn file_in<'f>(
    files: &'f BTreeMap<String, String>,
    dir: Option<&str>,
    name: &str,
) -> Option<&'f str> {
    files
        .get(&crate::init::values::path_in(dir, name))
        .map(String::as_str)
}

/// Any `vite.config.*` / `next.config.*` (`stem`) in `dir` of `files`: its path.
pub(super) fn config_in(
    files: &BTreeMap<String, String>,
    dir: Option<&str>,
    stem: &str,
) -> Option<String> {
    CONFIG_EXTS
        .iter()
        .map(|ext| crate::init::values::path_in(dir, &format!("{stem}.{ext}")))
        .find(|p| files.contains_key(p))
}

const CONFIG_EXTS: &[&str] = &["js", "ts", "mjs", "mts", "cjs", "cts"];

/// The name of the repository a project is in: its `origin` remote's last path part
/// (`git@host:org/shop.git`, `https://host/org/shop` → `shop`), else the name of its top
/// folder (the work tree's, not a subfolder such as `app` that init runs in), else
/// `dir_name`.
pub fn repository_name(remote: Option<&str>, toplevel: Option<&str>, dir_name: &str) -> String {
    let last = |s: &str| -> Option<String> {
        let s = s.trim().trim_end_matches('/');
        let s = s.strip_suffix(".git").unwrap_or(s);
        let name = s.rsplit(['/', ':', '\\']).next()?;
        (!name.is_empty()).then(|| name.to_owned())
    };
    remote
        .and_then(last)
        .or_else(|| toplevel.and_then(last))
        .unwrap_or_else(|| dir_name.to_owned())
}

/// Directories the CLI does not look into.
pub const SKIP_DIRS: &[&str] = &[
    ".git",
    "node_modules",
    ".venv",
    "venv",
    "vendor",
    "target",
    "__pycache__",
    "dist",
    "build",
    ".next",
    ".cache",
    ".tox",
];

/// How many directories deep the CLI looks (`apps/web/vite.config.ts` is 2).
pub const MAX_DEPTH: usize = 4;

/// The programs init may write a command for that a project does not install itself (mail
/// catchers): the CLI looks each up on `PATH`, and one that is missing is written commented
/// out, with how to install it.
pub const TOOLS: &[&str] = &["mailpit", "MailHog", "maildev", "mailcatcher"];

/// Should the CLI read the file at `rel` (relative to the project, `/`-separated) into
/// [`Repo::files`]?
pub fn wanted_file(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let parent = rel.rsplit('/').nth(1).unwrap_or("");
    // pnpm's lock file says how to run scripts.
    name == "Dockerfile"
        || name == "pnpm-lock.yaml"
        || name.starts_with("Dockerfile.")
        || name.ends_with(".Dockerfile")
        || matches!(
            name,
            "package.json"
                | "Procfile"
                | "Procfile.dev"
                | "manage.py"
                | "alembic.ini"
                | "pyproject.toml"
                | "Pipfile"
                // What a Python part runs once before it starts: the seed beside Alembic.
                | "prestart.sh"
                | "initial_data.py"
                // A Celery app module: its workers' `-A`.
                | "celery.py"
                | "celery_app.py"
        )
        || (name.starts_with("requirements") && name.ends_with(".txt"))
        || (parent == "requirements" && name.ends_with(".txt"))
        || ["vite.config.", "next.config."]
            .iter()
            .any(|s| name.starts_with(s) && CONFIG_EXTS.iter().any(|e| name.ends_with(e)))
        || rel == "config/application.rb"
        || rel.ends_with("/config/application.rb")
        // An ASGI app's module (`main.py` with `app = FastAPI()`), at the top or two
        // directories down: what runs when nothing else says.
        || (matches!(name, "main.py" | "app.py" | "asgi.py") && rel.matches('/').count() <= 2)
        // Python settings: do they read DATABASE_URL (what `migrate` gets)?
        || (name.ends_with(".py")
            && (matches!(
                name,
                "settings.py"
                    | "config.py"
                    | "configuration.py"
                    | "local_settings.py"
                    | "env.py"
                    | "database.py"
                    | "db.py"
            )
                || parent == "settings"))
}

/// Files of the project that compose services name: their Dockerfiles, and the scripts
/// they run through their image (`command: /start` with `COPY ./compose/local/django/start
/// /start` in the Dockerfile). The CLI reads them into [`Repo::files`] too (once more after
/// that, for the scripts of Dockerfiles it has just read). Paths relative to the project.
pub fn referenced_files(repo: &Repo) -> Vec<String> {
    let Some(compose) = &repo.compose else {
        return Vec::new();
    };
    let Ok(mut doc) = serde_yaml_ng::from_str::<Value>(&compose.text) else {
        return Vec::new();
    };
    if doc.apply_merge().is_err() {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let Some(Value::Mapping(services)) = doc.get("services") {
        for def in services.values().filter_map(Value::as_mapping) {
            let Some(build) = Build::of(def) else {
                continue;
            };
            let dockerfile = build.dockerfile_path();
            if let Some(path) = dockerfile.filter(|p| !out.contains(p)) {
                out.push(path);
            }
            let Some(df) = build.dockerfile(&repo.files) else {
                continue;
            };
            let mut paths = Vec::new();
            paths.extend(match command_of(def) {
                Some(Command::Words(ws)) => ws.first().cloned(),
                Some(Command::Shell(s)) => s.split_whitespace().next().map(str::to_owned),
                None => None,
            });
            paths.extend(df.cmd_first_word());
            for p in paths.into_iter().filter(|p| p.starts_with('/')) {
                if let Some(host) = df.host_path(&build.context, &p) {
                    if !out.contains(&host) {
                        out.push(host);
                    }
                }
            }
        }
    }
    out
}
