//! `binky init`: a starting `binky.toml` from a project's docker-compose file and `.env`.
//!
//! [`generate`] is pure: the compose text, the `.env` text and the directory's name go in;
//! the `binky.toml` text and notes for people come out. `binky init` (`src/cli/init.rs`)
//! finds and reads the files and writes the result.
//!
//! # Layout
//! - `read/`: the reading steps, one per kind of file (compose, Dockerfile, Procfile,
//!   `package.json`, Django, Alembic, Python, frameworks' host checks), each a function
//!   from the files it reads to a typed finding.
//! - `plan/`: [`plan::Plan::merge`], the one place the findings meet, with the order and
//!   precedence rules written down.
//! - `write/`: the one writer of `binky.toml`, from the plan.
//! - `values.rs`, `images.rs`, `secrets.rs`, `toml_out.rs`: what the three share (compose
//!   values, what images are, what looks like a credential, TOML text).
//!
//! # Guarantees
//! - The text is a valid `binky.toml`: every service is a process with a `cmd` (a loudly
//!   failing placeholder when compose gives none) or an adapter service, and `depends_on`
//!   names only services in the file.
//! - No credential is copied. A value that looks like one (its key says PASSWORD, SECRET,
//!   TOKEN, KEY, …; a password inside a URL; a well-known token shape; a value `.env` or
//!   compose holds under such a key) becomes an `${env.NAME}` reference. `.env` is read to
//!   understand `${VAR}` interpolation (a port, an address), never to copy a secret. The
//!   one exception is a `.env` git tracks: the repository's own development settings,
//!   committed for everyone, which compose interpolates; its value is the default of the
//!   reference (`${env.SECRET_KEY:-changethis}`), unless it has a real token's shape.
//! - Nothing is dropped silently: what has no binky equivalent (volumes, networks,
//!   profiles, deploy, extends, a health check that cannot be translated, …) is a `# TODO:`
//!   line at the top of the file and a line of [`Generated::to_decide`].
//!
//! # Caveats
//! - A bootstrap, not a converter: compose describes containers, binky runs processes on
//!   the host. A service compose only *builds* has no command binky could know; it gets a
//!   placeholder that fails until someone writes the real one.
//! - Addresses are recognised where they are written literally (`postgres://…@db:5432/app`,
//!   `redis://cache:6379`, `http://api:8000`, `api:8000`); an address assembled by the
//!   application from parts is recognised only for PostgreSQL's `*_HOST`/`*_PORT`/… family.

use serde_yaml_ng::Value;

use values::{as_named_mapping, scalar, string_list_env_file};

/// The compose file names `binky init` looks for, in the order `docker compose` prefers them.
pub const COMPOSE_FILES: [&str; 4] = [
    "compose.yaml",
    "compose.yml",
    "docker-compose.yaml",
    "docker-compose.yml",
];

/// Why nothing could be generated.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The compose file is not YAML.
    #[error("{file} is not valid YAML: {detail}\n  fix: correct the file (`docker compose config` points at the problem), then run `binky init` again")]
    Yaml {
        /// The compose file.
        file: String,
        /// The parser's message (with line and column).
        detail: String,
    },
    /// YAML, but not a compose file with services.
    #[error("{file} is not a compose file binky can read: {why}\n  fix: binky init needs a `services:` mapping with at least one service; run it where the project's compose file is (`binky init DIR`), or write binky.toml by hand (docs/config.md)")]
    NotCompose {
        /// The compose file.
        file: String,
        /// What is missing.
        why: String,
    },
    /// No compose file, and nothing else that says what runs.
    #[error("no compose file in {dir}, and nothing else that says what runs: looked for COMPOSE_FILE, {compose}, docker-compose.<local|dev|development|develop>.yml, a Procfile, a package.json with a `dev` or `start` script, manage.py, alembic.ini, an ASGI app (main.py, app.py)\n  fix: name the compose file: `binky init -f docker-compose.prod.yml` (repeat -f to merge several), run `binky init DIR` on the directory that has the project's files, or write binky.toml by hand (docs/config.md)")]
    NothingToRead {
        /// The directory, as given.
        dir: String,
        /// The compose file names looked for.
        compose: String,
    },
}

/// What [`generate`] made, and what people should know about it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Generated {
    /// The `binky.toml` text.
    pub toml: String,
    /// What it was written from (`docker-compose.yml and .env`, `Procfile, manage.py`).
    pub source: String,
    /// One line per compose service: what it became.
    pub mapped: Vec<String>,
    /// What has no binky equivalent yet (also the `# TODO:` lines at the top of the file).
    pub to_decide: Vec<String>,
    /// Every `${env.NAME}` the file reads, with what it is: to be set in the environment
    /// of `binky up` (or an `env_file`).
    pub to_set: Vec<(String, String)>,
    /// The adapters the file names, each once.
    pub adapters: Vec<String>,
}

/// Build a `binky.toml` for the project `repo` describes: from its compose file when it
/// has one, else from what its files say runs (a `Procfile`, `package.json` scripts,
/// `manage.py`, `alembic.ini`: see [`InitError::NothingToRead`] for when there is nothing).
///
/// Three steps, each in its own module: the reading steps ([`read`]) turn files into
/// typed findings; [`plan::Plan::merge`] merges them into the services of the file;
/// [`write::write`] renders those as `binky.toml`.
pub fn generate(repo: &Repo) -> Result<Generated, InitError> {
    let project = project_name(&repo.dir_name);
    let found = read::Findings::of(repo)?;
    let plan = plan::Plan::merge(found, &project)?;
    Ok(write::write(plan))
}

/// Compose files read together (`-f a -f b`, `COMPOSE_FILE=a:b`, a file and its
/// override), merged as `docker compose` merges them: mappings key by key, the later file
/// winning; `ports`, `expose`, `volumes`, `env_file`, `depends_on` (list form), `dns` and
/// `extra_hosts` lists concatenated; `environment` and `labels` merged by name (list or
/// mapping form); any other list (`command`, `entrypoint`, a health check's `test`)
/// replaced. `files` are `(name, text)`; the result is one compose text.
pub fn merge_compose(files: &[(String, String)]) -> Result<String, InitError> {
    let mut merged: Option<Value> = None;
    for (name, text) in files {
        let yaml_error = |e: serde_yaml_ng::Error| InitError::Yaml {
            file: name.clone(),
            detail: e.to_string(),
        };
        let mut doc: Value = serde_yaml_ng::from_str(text).map_err(yaml_error)?;
        doc.apply_merge().map_err(yaml_error)?;
        merged = Some(match merged {
            None => doc,
            Some(base) => merge_value(base, doc, ""),
        });
    }
    serde_yaml_ng::to_string(&merged.unwrap_or(Value::Null)).map_err(|e| InitError::Yaml {
        file: files
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(" + "),
        detail: e.to_string(),
    })
}

/// The `env_file` paths the services of a compose text name (as written; merge keys
/// applied, so a service that inherits its `env_file` through `<<: *base` counts), each
/// once: the files `binky init` reads into [`Repo::env_files`].
pub fn env_file_paths(compose: &str) -> Vec<String> {
    let Ok(mut doc) = serde_yaml_ng::from_str::<Value>(compose) else {
        return Vec::new();
    };
    if doc.apply_merge().is_err() {
        return Vec::new();
    }
    let mut out: Vec<String> = Vec::new();
    if let Some(Value::Mapping(services)) = doc.get("services") {
        for def in services.values().filter_map(Value::as_mapping) {
            for f in string_list_env_file(def) {
                if !out.contains(&f) {
                    out.push(f);
                }
            }
        }
    }
    out
}

fn merge_value(base: Value, over: Value, key: &str) -> Value {
    const CONCAT: &[&str] = &[
        "ports",
        "expose",
        "volumes",
        "env_file",
        "depends_on",
        "dns",
        "extra_hosts",
        "secrets",
        "configs",
    ];
    let (base, over) = if matches!(key, "environment" | "labels") {
        (as_named_mapping(base), as_named_mapping(over))
    } else {
        (base, over)
    };
    match (base, over) {
        (Value::Mapping(mut b), Value::Mapping(o)) => {
            for (k, v) in o {
                let name = scalar(&k).unwrap_or_default();
                let merged = match b.remove(&k) {
                    Some(old) => merge_value(old, v, &name),
                    None => v,
                };
                b.insert(k, merged);
            }
            Value::Mapping(b)
        }
        (Value::Sequence(mut b), Value::Sequence(o)) if CONCAT.contains(&key) => {
            for v in o {
                if !b.contains(&v) {
                    b.push(v);
                }
            }
            Value::Sequence(b)
        }
        (_, over) => over,
    }
}

/// `[project] name` for a directory: lower-case letters, digits and `-` (it becomes part of
/// hostnames), at most 63 characters; `app` when nothing is left.
pub fn project_name(dir_name: &str) -> String {
    let mut s = String::new();
    for c in dir_name.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            s.push(c);
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    label_or_app(&s)
}

/// `s` (ASCII, dashes for what a hostname cannot hold) made a hostname label: no `-` at
/// either end, at most 63 characters; `app` when nothing is left.
pub(in crate::init) fn label_or_app(s: &str) -> String {
    let mut s = s.trim_matches('-').to_owned();
    s.truncate(63);
    let s = s.trim_end_matches('-');
    if s.is_empty() {
        "app".to_owned()
    } else {
        s.to_owned()
    }
}

mod images;
mod plan;
mod read;
mod repo;
mod secrets;
mod toml_out;
mod values;
mod write;

pub use images::{adapter_for_image, TODO_CMD};
pub use repo::{
    referenced_files, repository_name, wanted_file, ComposeSource, Repo, MAX_DEPTH, SKIP_DIRS,
    TOOLS,
};

#[cfg(test)]
mod tests;
