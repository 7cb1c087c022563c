//! The plan: what the reading steps found, merged into the services `binky.toml` will
//! have. [`Plan::merge`] is the one place the findings meet, in a fixed order with its
//! precedence rules written down; [`crate::init::write`] renders the result. The merge
//! steps live beside this file (`services.rs`, `commands.rs`, `ports.rs`,
//! `migrations.rs`, `vars.rs`, `bare.rs`), each a method that reads the plan so far and
//! adds one kind of fact.

use std::collections::{BTreeMap, HashMap};

use serde_yaml_ng::Mapping;

use crate::init::images::MailCatcher;
use crate::init::read::package_json::NodeApp;
use crate::init::read::Findings;
use crate::init::toml_out::one_line;
use crate::init::{InitError, COMPOSE_FILES};

mod bare;
mod commands;
mod migrations;
mod ports;
mod services;
mod vars;
mod venvs;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::init) enum Kind {
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
pub(in crate::init) enum Why {
    /// It runs tests (Playwright, Cypress, a test runner): not part of a running world.
    TestOnly(&'static str),
    /// It runs a tool that is not installed on this machine.
    NotInstalled(&'static MailCatcher),
    /// It runs once before the others (migrations, a prestart script): the database's
    /// `migrate` does that in binky.
    OneShot,
}

/// How the reason of a credential the repository's tracked `.env` sets begins (the header
/// says what such a default is when one is written).
pub(in crate::init) const TRACKED_DOTENV: &str = "the repository's tracked .env sets it";

// Which compose service: defined beside the compose values, which the reading steps share.
pub(in crate::init) use crate::init::values::SvcId;

/// One `T` per compose service, reached by [`SvcId`].
pub(in crate::init) struct PerService<T>(pub(in crate::init) Vec<T>);

impl<T> PerService<T> {
    /// An empty table.
    pub(in crate::init) fn new() -> Self {
        PerService(Vec::new())
    }

    /// The services' ids, in compose order.
    pub(in crate::init) fn ids(&self) -> impl Iterator<Item = SvcId> {
        (0..self.0.len()).map(SvcId)
    }

    /// The id the next [`PerService::push`] gives.
    pub(in crate::init) fn next_id(&self) -> SvcId {
        SvcId(self.0.len())
    }

    /// Add the next service's entry; its id.
    pub(in crate::init) fn push(&mut self, value: T) -> SvcId {
        let id = self.next_id();
        self.0.push(value);
        id
    }

    /// The entries, in compose order.
    pub(in crate::init) fn iter(&self) -> std::slice::Iter<'_, T> {
        self.0.iter()
    }

    /// The first service `pick` holds for.
    pub(in crate::init) fn find(&self, pick: impl Fn(&T) -> bool) -> Option<SvcId> {
        self.0.iter().position(pick).map(SvcId)
    }

    /// A table with `f` of every entry, by the same ids.
    pub(in crate::init) fn map<U>(self, f: impl FnMut(T) -> U) -> PerService<U> {
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

pub(in crate::init) struct Svc {
    /// The compose name.
    pub(in crate::init) raw: String,
    /// The binky name.
    pub(in crate::init) name: String,
    pub(in crate::init) def: Mapping,
    pub(in crate::init) kind: Kind,
    pub(in crate::init) image: Option<String>,
    /// Where its code is, relative to binky.toml (`None`: here).
    pub(in crate::init) workdir: Option<String>,
    /// Where its command came from when compose gives none it can use (a Dockerfile's
    /// `CMD`, a start script, a `package.json` script).
    pub(in crate::init) cmd_from: Option<String>,
}

/// A process service's ports: the first is the primary.
#[derive(Default)]
pub(in crate::init) struct Layout {
    /// `(container port, label)`.
    pub(in crate::init) slots: Vec<(u16, String)>,
    /// The primary port serves the service's URL.
    pub(in crate::init) url: bool,
}

impl Layout {
    /// The token of container port `port` of service `svc` (`${svc.port}` for the primary,
    /// `${svc.LABEL}` for another); `None` when it has no such port.
    pub(in crate::init) fn token(&self, svc: &str, port: u16) -> Option<String> {
        let i = self.slots.iter().position(|(p, _)| *p == port)?;
        Some(if i == 0 {
            format!("${{{svc}.port}}")
        } else {
            format!("${{{svc}.{}}}", self.slots[i].1)
        })
    }
}

/// A compose health check, as far as binky can read it.
pub(in crate::init) enum Probe {
    /// No health check (or a disabled one).
    None,
    /// `curl http://localhost:PORT/rest`.
    Http {
        /// The port probed.
        port: u16,
        /// Path, query and fragment.
        rest: String,
    },
    /// Anything else: the command.
    Other(String),
}

/// An adapter service's migrations, run by the migration tool of a process's code.
#[derive(Clone)]
pub(in crate::init) struct Migration {
    /// The command (`alembic upgrade head`).
    pub(in crate::init) cmd: String,
    /// Where it runs.
    pub(in crate::init) workdir: Option<String>,
    /// The process whose code and settings it uses.
    pub(in crate::init) owner: SvcId,
    /// What seeds the migrated database (Alembic's `app/initial_data.py`), and where
    /// that came from.
    pub(in crate::init) seed: Option<(String, String)>,
    /// Set: the settings read the database from parts (`DB_HOST`, …) that `migrate` does
    /// not get: the command is written commented out, with this reason.
    pub(in crate::init) blocked: Option<String>,
}

/// What people should know about the file, collected while the plan is merged and then
/// while it is written, in that order (the order of the TODO lines).
#[derive(Default)]
pub(in crate::init) struct Report {
    /// What has no binky equivalent yet: the `# TODO:` lines, each once.
    pub(in crate::init) to_decide: Vec<String>,
    /// Why each `${env.NAME}` is there (the first reason given wins).
    pub(in crate::init) reasons: BTreeMap<String, String>,
    /// Notes on frameworks found (a `# NOTE:` each in the file, and one line to decide).
    pub(in crate::init) notes: Vec<String>,
}

/// The findings merged: the services binky.toml will have, what each is, where its code
/// is, what runs it, its ports and its database's `migrate`.
pub(in crate::init) struct Plan {
    /// What the reading steps found.
    pub(in crate::init) found: Findings,
    /// What the file is written from (`docker-compose.yml`, `Procfile, manage.py`).
    pub(in crate::init) file: String,
    /// `[project] name`.
    pub(in crate::init) project: String,
    /// `.env`'s variables, for compose's interpolation.
    pub(in crate::init) vars: BTreeMap<String, String>,
    /// `(value, env name)`: credentials seen in compose or `.env`, longest first.
    pub(in crate::init) secrets: Vec<(String, String)>,
    /// The services, in compose order (then those added from the project's files).
    pub(in crate::init) svcs: PerService<Svc>,
    /// Host names compose services answer to (lower-case) → the service.
    pub(in crate::init) alias: HashMap<String, SvcId>,
    /// Each service's ports.
    pub(in crate::init) layouts: PerService<Layout>,
    /// Some service sets `networks` or `network_mode`.
    pub(in crate::init) uses_networks: bool,
    /// Host ports compose publishes → (service, container port).
    pub(in crate::init) published: HashMap<u16, (SvcId, u16)>,
    /// What each adapter service's `migrate` is, when a process's code says.
    pub(in crate::init) migrations: BTreeMap<SvcId, Migration>,
    /// The compose file's top level, for what it holds that binky does not carry.
    pub(in crate::init) compose_root: Option<Mapping>,
    /// The git-ignored paths `[project] copy` brings into each world (the venvs the
    /// commands run through).
    pub(in crate::init) copy: Vec<String>,
    /// What people should know so far.
    pub(in crate::init) report: Report,
}

impl Plan {
    /// Merge what the reading steps found into the services of `binky.toml`, for project
    /// `project`.
    ///
    /// With a compose file, its services are the plan, in its order, and the project's
    /// files only add to them, in this order (each step reads what the earlier ones
    /// decided):
    /// 1. each compose service becomes an adapter service (its image is a database),
    ///    infrastructure binky replaces, a test runner or a mail catcher left commented
    ///    out, a process, or nothing binky can run;
    /// 2. processes that run once before the others (another waits for them to complete,
    ///    or they run a migration tool or a prestart script) are commented out;
    /// 3. where each process's code is: a relative `working_dir`, else the project path
    ///    mounted at an absolute one, else the Dockerfile's `WORKDIR` traced through its
    ///    `COPY`, else the build context;
    /// 4. a command for each process compose gives none usable for: the start script an
    ///    image path names, else (no compose command at all) the Vite/Next.js dev server of
    ///    the `package.json` in its directory, else the Dockerfile's `CMD`: compose's own
    ///    command always wins, because it is what runs today;
    /// 5. a service for each Vite/Next.js dev server no process runs from its directory;
    /// 6. the credentials compose and `.env` hold (after every service is known, so a
    ///    value that is also a service's name is not one);
    /// 7. ports (after every command is known: others reach a service on what they name);
    /// 8. `migrate` for each SQL database a process uses, from that process's directory:
    ///    `alembic.ini` before `manage.py` (a project with both migrates with Alembic),
    ///    one golden template per process's code;
    /// 9. the programs of each command and `migrate` that a git-ignored venv of its
    ///    directory (or one above) has, run from that venv, which `[project] copy` brings.
    ///
    /// Without a compose file, the project's files say what runs, and the more explicit
    /// wins: a Procfile's process types (its `release` the database's `migrate`), else
    /// Django's `runserver` for the main `manage.py` and the workers its requirements name
    /// (django-rq's `rqworker`, Celery's worker and beat); a Node app's scripts only where no
    /// Procfile says what runs; an ASGI app only where neither a Procfile nor `manage.py`
    /// does. Databases come from the dependencies, then steps 5 to 9 as above. Nothing
    /// found at all is [`InitError::NothingToRead`].
    pub(in crate::init) fn merge(found: Findings, project: &str) -> Result<Plan, InitError> {
        let Some(compose) = found.compose.clone() else {
            return Plan::of_files(found, project);
        };
        let mut plan = Plan::new(found, &compose.name, project);
        plan.read_services(&compose.services);
        plan.find_one_shots();
        plan.plan_workdirs();
        plan.derive_commands();
        plan.add_dev_servers();
        plan.learn_secrets();
        plan.plan_ports();
        plan.plan_migrations();
        plan.use_venvs();
        plan.compose_root = Some(compose.root);
        Ok(plan)
    }

    /// The plan of a project without a compose file (see [`Plan::merge`]).
    fn of_files(found: Findings, project: &str) -> Result<Plan, InitError> {
        let procfile = found.procfile.clone();
        let manage = found.django.main_dir();
        let dev_dirs: Vec<Option<String>> = found
            .packages
            .0
            .iter()
            .filter(|p| p.dev_server.is_some())
            .map(|p| p.dir.clone())
            .collect();
        let alembic = found.alembic.first().map(str::to_owned);
        // A Node app run by its `package.json` scripts (at the top or one directory down),
        // where no Procfile says what runs and the package is no Vite/Next.js dev server.
        let node_apps: Vec<NodeApp> = if procfile.is_some() {
            Vec::new()
        } else {
            found
                .packages
                .0
                .iter()
                .filter(|p| p.dir.as_deref().is_none_or(|d| !d.contains('/')))
                .filter(|p| p.dev_server.is_none())
                .filter_map(|p| p.node_app.clone())
                .collect()
        };
        let asgi = if procfile.is_none() && manage.is_none() {
            found.python.asgi.clone()
        } else {
            None
        };
        if procfile.is_none()
            && manage.is_none()
            && dev_dirs.is_empty()
            && alembic.is_none()
            && node_apps.is_empty()
            && asgi.is_none()
        {
            return Err(InitError::NothingToRead {
                dir: found.dir_name.clone(),
                compose: COMPOSE_FILES.join(", "),
            });
        }
        let mut deps = found.python.deps.clone();
        for p in &found.packages.0 {
            deps.extend(p.deps.iter().cloned());
        }

        let mut read: Vec<String> = Vec::new();
        let mut plan = Plan::new(found, "", project);
        let base = bare::Base::databases(&mut plan, &deps);
        if let Some(p) = &procfile {
            read.push(p.file.to_owned());
            for (kind, cmd) in &p.processes {
                let (cmd, port) = if kind == "web" {
                    (bare::listen_on_port(cmd), Some(8000))
                } else {
                    (cmd.clone(), None)
                };
                plan.push_svc(
                    kind,
                    base.def(&cmd, port),
                    Kind::Process,
                    None,
                    Some(format!("{} ({kind})", p.file)),
                );
            }
        }
        if let Some(dir) = &manage {
            read.push(crate::init::values::path_in(dir.as_deref(), "manage.py"));
            if procfile.is_none() {
                plan.push_svc(
                    "web",
                    base.def("python manage.py runserver 127.0.0.1:8000", Some(8000)),
                    Kind::Process,
                    dir.clone(),
                    Some("manage.py (Django's development server)".into()),
                );
                bare::push_django_workers(&mut plan, &base, &deps, dir.as_deref());
            }
        }
        for app in &node_apps {
            read.push(bare::push_node_app(&mut plan, &base, app));
        }
        if let Some((file, var)) = &asgi {
            read.push(file.clone());
            bare::push_asgi_app(&mut plan, &base, file, var, alembic.as_deref());
        }
        if let Some(a) = &alembic {
            read.push(a.clone());
        }
        for d in &dev_dirs {
            read.push(crate::init::values::path_in(d.as_deref(), "package.json"));
        }
        plan.file = read.join(", ");
        plan.add_dev_servers();
        plan.learn_secrets();
        plan.plan_ports();
        plan.plan_migrations();
        if let Some(cmd) = procfile.and_then(|p| p.release) {
            bare::release_migration(&mut plan, cmd);
        }
        plan.use_venvs();
        Ok(plan)
    }

    /// An empty plan over `found`, written from `file`, for project `project`.
    fn new(found: Findings, file: &str, project: &str) -> Plan {
        Plan {
            vars: found.dotenv.iter().cloned().collect(),
            found,
            file: file.to_owned(),
            project: project.to_owned(),
            secrets: Vec::new(),
            svcs: PerService::new(),
            alias: HashMap::new(),
            layouts: PerService::new(),
            uses_networks: false,
            published: HashMap::new(),
            migrations: BTreeMap::new(),
            compose_root: None,
            copy: Vec::new(),
            report: Report::default(),
        }
    }

    /// A line to decide (a `# TODO:`), once.
    pub(in crate::init) fn todo(&mut self, s: impl AsRef<str>) {
        let line = one_line(s.as_ref());
        if !self.report.to_decide.contains(&line) {
            self.report.to_decide.push(line);
        }
    }

    /// Why `${env.NAME}` is there; the first reason given stays.
    pub(in crate::init) fn reason(&mut self, name: &str, why: impl Into<String>) {
        self.report
            .reasons
            .entry(name.to_owned())
            .or_insert_with(|| why.into());
    }

    /// A `# NOTE:` for people, once.
    pub(in crate::init) fn note(&mut self, note: &str) {
        if !self.report.notes.iter().any(|n| n == note) {
            self.report.notes.push(note.to_owned());
        }
    }

    /// Does service `i` run as a process (or would, once uncommented)?
    pub(in crate::init) fn runs(&self, i: SvcId) -> bool {
        matches!(self.svcs[i].kind, Kind::Process | Kind::Commented(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::init::repo::Repo;

    fn plan_of(files: &[(&str, &str)]) -> Result<Plan, InitError> {
        let repo = Repo {
            dir_name: "shop".into(),
            files: files
                .iter()
                .map(|(p, t)| (p.to_string(), t.to_string()))
                .collect(),
            ..Repo::default()
        };
        Plan::merge(Findings::of(&repo)?, "shop")
    }

    fn names(plan: &Plan) -> Vec<&str> {
        plan.svcs.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn a_procfile_says_what_runs_before_runserver_a_node_app_or_an_asgi_app() {
        let plan = plan_of(&[
            (
                "Procfile",
                "web: gunicorn app.wsgi\nworker: celery -A app worker\n",
            ),
            ("manage.py", ""),
            ("main.py", "app = FastAPI()\n"),
            ("requirements.txt", "fastapi\nuvicorn\ncelery\n"),
            ("package.json", r#"{"scripts":{"start":"node server.js"}}"#),
        ])
        .unwrap();
        assert_eq!(names(&plan), ["redis", "web", "worker"]);
        assert_eq!(plan.file, "Procfile, manage.py");
    }

    #[test]
    fn without_a_procfile_runserver_comes_before_an_asgi_app_and_node_apps_join_it() {
        let plan = plan_of(&[
            ("manage.py", ""),
            ("main.py", "app = FastAPI()\n"),
            ("requirements.txt", "fastapi\nuvicorn\npsycopg\n"),
            (
                "api/package.json",
                r#"{"scripts":{"start":"node server.js"}}"#,
            ),
        ])
        .unwrap();
        assert_eq!(names(&plan), ["db", "web", "api"]);
        let web = &plan.svcs[SvcId(1)];
        assert_eq!(
            web.cmd_from.as_deref(),
            Some("manage.py (Django's development server)")
        );
    }

    #[test]
    fn alembic_migrates_before_django_in_one_directory() {
        let plan = plan_of(&[
            ("manage.py", ""),
            ("alembic.ini", "[alembic]\n"),
            ("requirements.txt", "psycopg\n"),
        ])
        .unwrap();
        let m = plan
            .migrations
            .get(&SvcId(0))
            .expect("the database migrates");
        assert_eq!(m.cmd, "alembic upgrade head");
        assert_eq!(plan.svcs[m.owner].name, "web");
    }

    #[test]
    fn nothing_that_runs_is_the_error_naming_what_was_looked_for() {
        let e = plan_of(&[("README.md", "hello")])
            .err()
            .expect("nothing to read");
        assert!(matches!(e, InitError::NothingToRead { .. }), "{e:?}");
        assert!(e.to_string().contains("a Procfile"), "{e}");
    }
}
