//! `binky init`: a starting `binky.toml` from a project's docker-compose file and `.env`.
//!
//! [`generate`] is pure: the compose text, the `.env` text and the directory's name go in;
//! the `binky.toml` text and notes for people come out. `binky init` (`src/cli/init.rs`)
//! finds and reads the files and writes the result.
//!
//! # Guarantees
//! - The text is a valid `binky.toml`: every service is a process with a `cmd` (a loudly
//!   failing placeholder when compose gives none) or an adapter service, and `depends_on`
//!   names only services in the file.
//! - No credential is copied. A value that looks like one (its key says PASSWORD, SECRET,
//!   TOKEN, KEY, …; a password inside a URL; a well-known token shape; a value `.env` or
//!   compose holds under such a key) becomes an `${env.NAME}` reference. `.env` is read to
//!   understand `${VAR}` interpolation (a port, an address), never to copy a secret.
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

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_yaml_ng::{Mapping, Value};

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
pub fn generate(repo: &Repo) -> Result<Generated, InitError> {
    let project = project_name(&repo.dir_name);
    let Some(compose) = &repo.compose else {
        return bare::generate(repo, &project);
    };
    let compose_file = compose.name.as_str();
    let yaml_error = |e: serde_yaml_ng::Error| InitError::Yaml {
        file: compose_file.to_owned(),
        detail: e.to_string(),
    };
    let not_compose = |why: &str| InitError::NotCompose {
        file: compose_file.to_owned(),
        why: why.to_owned(),
    };
    let mut doc: Value = serde_yaml_ng::from_str(&compose.text).map_err(yaml_error)?;
    // `<<: *defaults` merge keys are common in compose files (`x-common: &common`).
    doc.apply_merge().map_err(yaml_error)?;
    let root = match &doc {
        Value::Mapping(m) => m,
        Value::Null => return Err(not_compose("it is empty")),
        _ => return Err(not_compose("its top level is not a mapping")),
    };
    let services = match root.get("services") {
        Some(Value::Mapping(m)) if !m.is_empty() => m,
        Some(Value::Mapping(_)) | Some(Value::Null) => {
            return Err(not_compose("its `services:` has no service"))
        }
        Some(_) => return Err(not_compose("its `services:` is not a mapping")),
        None => return Err(not_compose("it has no `services:`")),
    };
    let mut init = Init::new(repo, compose_file, &project);
    init.read_services(services);
    init.find_one_shots();
    init.plan_workdirs();
    init.derive_commands();
    init.add_dev_servers();
    init.learn_secrets();
    init.plan_ports();
    init.plan_migrations();
    let body = init.render_services();
    init.top_level(root);
    Ok(init.finish(&body))
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

/// `KEY=value` list items (compose's list form of `environment` and `labels`) as a mapping.
fn as_named_mapping(v: Value) -> Value {
    match v {
        Value::Sequence(items) => {
            let mut m = Mapping::new();
            for item in items {
                if let Some(s) = scalar(&item) {
                    match s.split_once('=') {
                        Some((k, v)) => m.insert(Value::from(k), Value::from(v)),
                        None => m.insert(Value::from(s.as_str()), Value::Null),
                    };
                }
            }
            Value::Mapping(m)
        }
        v => v,
    }
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
pub(super) fn label_or_app(s: &str) -> String {
    let mut s = s.trim_matches('-').to_owned();
    s.truncate(63);
    let s = s.trim_end_matches('-');
    if s.is_empty() {
        "app".to_owned()
    } else {
        s.to_owned()
    }
}

mod addresses;
mod apps;
mod bare;
mod compose;
mod finish;
mod images;
mod ports;
mod reading;
mod render;
mod repo;
mod secrets;
mod service_env;
mod toml_out;

use compose::*;
use images::*;
pub use images::{adapter_for_image, TODO_CMD};
use repo::*;
pub use repo::{referenced_files, wanted_file, ComposeSource, Repo, MAX_DEPTH, SKIP_DIRS, TOOLS};
use secrets::*;
use toml_out::*;

// The generator
// ------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A database or broker: binky slices a shared server.
    Adapter(&'static str),
    /// Code compose builds or a command it runs: a binky process.
    Process,
    /// An image binky has no adapter for and no command to run.
    Unmapped,
    /// Infrastructure binky replaces (a reverse proxy: binky's proxy serves every world):
    /// left out, with what replaces it.
    Replaced(&'static str),
    /// Written commented out, so that `binky up` runs the rest with no edit.
    Commented(Why),
}

/// Why a service is written commented out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Why {
    /// It runs tests (Playwright, Cypress, a test runner): not part of a running world.
    TestOnly(&'static str),
    /// It runs a tool that is not installed on this machine.
    NotInstalled(&'static MailCatcher),
    /// It runs once before the others (migrations, a prestart script): the database's
    /// `migrate` does that in binky.
    OneShot,
}

/// Which compose service: a handle into [`PerService`] tables, in compose order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
struct SvcId(usize);

/// One `T` per compose service, reached by [`SvcId`].
struct PerService<T>(Vec<T>);

impl<T> PerService<T> {
    fn new() -> Self {
        PerService(Vec::new())
    }

    /// The services' ids, in compose order.
    fn ids(&self) -> impl Iterator<Item = SvcId> {
        (0..self.0.len()).map(SvcId)
    }

    /// The id the next [`PerService::push`] gives.
    fn next_id(&self) -> SvcId {
        SvcId(self.0.len())
    }

    fn push(&mut self, value: T) -> SvcId {
        let id = self.next_id();
        self.0.push(value);
        id
    }

    fn iter(&self) -> std::slice::Iter<'_, T> {
        self.0.iter()
    }

    /// The first service `pick` holds for.
    fn find(&self, pick: impl Fn(&T) -> bool) -> Option<SvcId> {
        self.0.iter().position(pick).map(SvcId)
    }

    /// A table with `f` of every entry, by the same ids.
    fn map<U>(self, f: impl FnMut(T) -> U) -> PerService<U> {
        PerService(self.0.into_iter().map(f).collect())
    }
}

impl<T> std::ops::Index<SvcId> for PerService<T> {
    type Output = T;
    fn index(&self, id: SvcId) -> &T {
        &self.0[id.0]
    }
}

impl<T> std::ops::IndexMut<SvcId> for PerService<T> {
    fn index_mut(&mut self, id: SvcId) -> &mut T {
        &mut self.0[id.0]
    }
}

impl<'a, T> IntoIterator for &'a PerService<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<'a, T> IntoIterator for &'a mut PerService<T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter_mut()
    }
}

struct Svc {
    /// The compose name.
    raw: String,
    /// The binky name.
    name: String,
    def: Mapping,
    kind: Kind,
    image: Option<String>,
    /// Where its code is, relative to binky.toml (`None`: here).
    workdir: Option<String>,
    /// Where its command came from when compose gives none it can use (a Dockerfile's
    /// `CMD`, a start script, a `package.json` script).
    cmd_from: Option<String>,
}

/// A process service's ports: the first is the primary.
#[derive(Default)]
struct Layout {
    /// `(container port, label)`.
    slots: Vec<(u16, String)>,
    /// The primary port serves the service's URL.
    url: bool,
}

impl Layout {
    fn token(&self, svc: &str, port: u16) -> Option<String> {
        let i = self.slots.iter().position(|(p, _)| *p == port)?;
        Some(if i == 0 {
            format!("${{{svc}.port}}")
        } else {
            format!("${{{svc}.{}}}", self.slots[i].1)
        })
    }
}

/// A compose health check, as far as binky can read it.
enum Probe {
    None,
    /// `curl http://localhost:PORT/rest`.
    Http {
        port: u16,
        rest: String,
    },
    /// Anything else: the command.
    Other(String),
}

/// One line of `[services.X.env]`.
struct EnvLine {
    key: String,
    value: Option<String>,
    comment: Option<String>,
}

struct Init {
    /// What the project's directory holds.
    repo: Repo,
    file: String,
    /// `[project] name`.
    project: String,
    dotenv: Vec<(String, String)>,
    vars: BTreeMap<String, String>,
    /// `(value, env name)`: credentials seen in compose or `.env`, longest first.
    secrets: Vec<(String, String)>,
    svcs: PerService<Svc>,
    /// Host names compose services answer to (lower-case) → the service.
    alias: HashMap<String, SvcId>,
    layouts: PerService<Layout>,
    /// Why each `${env.NAME}` is there.
    reasons: BTreeMap<String, String>,
    to_decide: Vec<String>,
    mapped: Vec<String>,
    /// Some service sets `networks` or `network_mode`.
    uses_networks: bool,
    /// Addresses of commented-out services met while writing one value: the tokens they
    /// become once the service is uncommented (see [`Init::map_addresses`]).
    commented_refs: Vec<String>,
    /// Host ports compose publishes → (service, container port).
    published: HashMap<u16, (SvcId, u16)>,
    /// Write addresses of commented-out services as their tokens (the value once they run).
    as_if_running: bool,
    /// What each adapter service's `migrate` is, when a process's code says.
    migrations: BTreeMap<SvcId, Migration>,
    /// Notes on frameworks found (a `# NOTE:` each in the file, and one line to decide).
    notes: Vec<String>,
    /// While set, a process's `[services.X.env]` is kept here (by service) and a
    /// placeholder written, so that what every process shares becomes `[defaults.env]`.
    defer_env: bool,
    env_blocks: BTreeMap<SvcId, Vec<EnvLine>>,
    /// An adapter service's env for its `migrate` (the settings of the code it runs), by
    /// service, written with the processes' (see `env_blocks`).
    migrate_env: BTreeMap<SvcId, Vec<EnvLine>>,
}

/// An adapter service's migrations, run by the migration tool of a process's code.
struct Migration {
    /// The command (`alembic upgrade head`).
    cmd: String,
    /// Where it runs.
    workdir: Option<String>,
    /// The process whose code and settings it uses.
    owner: SvcId,
    /// Set: the settings read the database from parts (`DB_HOST`, …) that `migrate` does
    /// not get: the command is written commented out, with this reason.
    blocked: Option<String>,
}

impl Init {
    fn new(repo: &Repo, file: &str, project: &str) -> Init {
        let dotenv = repo
            .dotenv
            .as_deref()
            .map(binky_controllers::env::parse_dotenv)
            .unwrap_or_default();
        Init {
            repo: repo.clone(),
            file: file.to_owned(),
            project: project.to_owned(),
            vars: dotenv.iter().cloned().collect(),
            dotenv,
            secrets: Vec::new(),
            svcs: PerService::new(),
            alias: HashMap::new(),
            layouts: PerService::new(),
            reasons: BTreeMap::new(),
            to_decide: Vec::new(),
            mapped: Vec::new(),
            uses_networks: false,
            commented_refs: Vec::new(),
            as_if_running: false,
            published: HashMap::new(),
            migrations: BTreeMap::new(),
            notes: Vec::new(),
            defer_env: false,
            env_blocks: BTreeMap::new(),
            migrate_env: BTreeMap::new(),
        }
    }

    fn todo(&mut self, s: impl AsRef<str>) {
        let line = one_line(s.as_ref());
        if !self.to_decide.contains(&line) {
            self.to_decide.push(line);
        }
    }

    fn reason(&mut self, name: &str, why: impl Into<String>) {
        self.reasons
            .entry(name.to_owned())
            .or_insert_with(|| why.into());
    }
}

#[cfg(test)]
mod tests;
