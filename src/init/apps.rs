//! What the project's own files add to its compose file: where each service's code is
//! (build context, Dockerfile `WORKDIR`), the command compose does not give (a start script
//! the image runs, a Vite or Next.js dev server, the Dockerfile's `CMD`), dev servers
//! compose has no service for, and the migrations an adapter service runs (`alembic.ini`,
//! `manage.py`).

use super::addresses::read_by_browser;
use super::*;

impl Init {
    /// Does service `i` run as a process (or would, once uncommented)?
    pub(super) fn runs(&self, i: SvcId) -> bool {
        matches!(self.svcs[i].kind, Kind::Process | Kind::Commented(_))
    }

    /// Services that run once before the others: another waits for them with `condition:
    /// service_completed_successfully`, or they run a migration tool or a prestart script.
    pub(super) fn find_one_shots(&mut self) {
        let mut awaited: BTreeSet<String> = BTreeSet::new();
        for s in &self.svcs {
            if let Some(Value::Mapping(m)) = s.def.get("depends_on") {
                for (k, v) in m {
                    let done = v.get("condition").and_then(scalar).as_deref()
                        == Some("service_completed_successfully");
                    if let (true, Some(k)) = (done, scalar(k)) {
                        awaited.insert(k);
                    }
                }
            }
        }
        for s in &mut self.svcs {
            if s.kind != Kind::Process {
                continue;
            }
            let cmd = match command_of(&s.def) {
                Some(Command::Shell(c)) => c,
                Some(Command::Words(ws)) => ws.join(" "),
                None => String::new(),
            };
            let migrates = ["alembic upgrade", "manage.py migrate", "prestart"]
                .iter()
                .any(|w| cmd.contains(w));
            if awaited.contains(&s.raw) || migrates {
                s.kind = Kind::Commented(Why::OneShot);
            }
        }
    }

    /// Each process service's `workdir`.
    pub(super) fn plan_workdirs(&mut self) {
        for i in self.svcs.ids() {
            if self.runs(i) {
                self.svcs[i].workdir = self.workdir(i);
            }
        }
    }

    /// A command for each process service compose gives none it can use for: the start
    /// script an image path names (`/start` copied from `compose/local/django/start`), the
    /// `dev` script of a Vite or Next.js `package.json` in its directory, or the
    /// Dockerfile's `CMD`.
    pub(super) fn derive_commands(&mut self) {
        for i in self.svcs.ids() {
            if self.svcs[i].kind != Kind::Process {
                continue;
            }
            let def = self.svcs[i].def.clone();
            let compose_cmd = match command_of(&def) {
                Some(Command::Shell(s)) => Some(s),
                Some(Command::Words(ws)) => Some(ws.join(" ")),
                None => None,
            };
            if compose_cmd
                .as_deref()
                .is_some_and(|c| image_only_command(c).is_none())
            {
                continue;
            }
            let build = Build::of(&def);
            let df = build.as_ref().and_then(|b| b.dockerfile(&self.repo));
            let workdir = self.svcs[i].workdir.clone();
            let found: Option<(String, String)> = match &compose_cmd {
                Some(c) => self.script_of(build.as_ref(), df.as_ref(), c),
                None => {
                    let dev = dev_server(&self.repo, workdir.as_deref());
                    if let Some(ds) = dev {
                        if let Some(note) = &ds.note {
                            self.note(note);
                        }
                        if !def.contains_key("ports") && !def.contains_key("expose") {
                            let port = if ds.framework == "vite" { 5173 } else { 3000 };
                            self.svcs[i].def.insert(
                                Value::from("expose"),
                                Value::Sequence(vec![Value::from(port.to_string())]),
                            );
                        }
                        // Build arguments the bundle reads (`VITE_API_URL`) are the dev
                        // server's environment.
                        let args = def
                            .get("build")
                            .and_then(|b| b.get("args"))
                            .cloned()
                            .map(as_named_mapping);
                        if let Some(Value::Mapping(args)) = args {
                            let mut env =
                                match def.get("environment").cloned().map(as_named_mapping) {
                                    Some(Value::Mapping(m)) => m,
                                    _ => Mapping::new(),
                                };
                            for (k, v) in args {
                                let browser = scalar(&k).is_some_and(|k| read_by_browser(&k));
                                if browser && !env.contains_key(&k) {
                                    env.insert(k, v);
                                }
                            }
                            self.svcs[i]
                                .def
                                .insert(Value::from("environment"), Value::Mapping(env));
                        }
                        let pkg = Repo::path_in(workdir.as_deref(), "package.json");
                        Some((
                            ds.cmd,
                            format!("the dev script of {pkg} ({})", ds.framework),
                        ))
                    } else {
                        self.dockerfile_cmd(build.as_ref(), df.as_ref())
                    }
                }
            };
            if let Some((cmd, from)) = found {
                self.svcs[i]
                    .def
                    .insert(Value::from("command"), Value::from(literal(&cmd)));
                self.svcs[i].cmd_from = Some(from);
            }
        }
    }

    /// The command of the start script an image path names, through the Dockerfile's
    /// `COPY`: `(command, where it came from)`.
    fn script_of(
        &self,
        build: Option<&Build>,
        df: Option<&Dockerfile>,
        cmd: &str,
    ) -> Option<(String, String)> {
        let first = cmd.split_whitespace().next()?;
        if !first.starts_with('/') {
            return None;
        }
        let host = df?.host_path(&build?.context, first)?;
        let text = self.repo.file(&host)?;
        let line = script_command(text)?;
        // A script that runs another image path is no command for the host.
        if image_only_command(&line).is_some() {
            return None;
        }
        Some((line, format!("{host}, the script compose runs as {first}")))
    }

    /// The Dockerfile's `CMD`, unless it serves built files (nginx, Caddy, httpd) or is a
    /// path inside the image with no script behind it.
    fn dockerfile_cmd(
        &self,
        build: Option<&Build>,
        df: Option<&Dockerfile>,
    ) -> Option<(String, String)> {
        let cmd = df?.cmd.clone()?;
        let program = cmd
            .split_whitespace()
            .next()?
            .rsplit('/')
            .next()?
            .to_owned();
        if matches!(
            program.as_str(),
            "nginx" | "caddy" | "httpd" | "httpd-foreground" | "apache2-foreground"
        ) {
            return None;
        }
        if image_only_command(&cmd).is_some() {
            return self.script_of(build, df, &cmd);
        }
        let path = build?.dockerfile_path()?;
        Some((cmd, format!("the CMD of {path}")))
    }

    /// A `# NOTE:` for people, once.
    pub(super) fn note(&mut self, note: &str) {
        if !self.notes.iter().any(|n| n == note) {
            self.notes.push(note.to_owned());
        }
    }

    /// A service for each Vite or Next.js dev server of the project that no compose
    /// service runs (compose files often leave the frontend's dev server out).
    pub(super) fn add_dev_servers(&mut self) {
        let dirs: Vec<Option<String>> = self
            .repo
            .files
            .keys()
            .filter(|p| p.rsplit('/').next() == Some("package.json"))
            .map(|p| p.rsplit_once('/').map(|(d, _)| d.to_owned()))
            .collect();
        for dir in dirs {
            let covered = self
                .svcs
                .ids()
                .any(|i| self.runs(i) && self.svcs[i].workdir == dir);
            if covered {
                continue;
            }
            let Some(ds) = dev_server(&self.repo, dir.as_deref()) else {
                continue;
            };
            if let Some(note) = &ds.note {
                self.note(note);
            }
            let base = dir
                .as_deref()
                .and_then(|d| d.rsplit('/').next())
                .unwrap_or("web")
                .to_owned();
            let port = if ds.framework == "vite" { 5173 } else { 3000 };
            let mut def = Mapping::new();
            def.insert(Value::from("command"), Value::from(literal(&ds.cmd)));
            def.insert(
                Value::from("expose"),
                Value::Sequence(vec![Value::from(port.to_string())]),
            );
            let pkg = Repo::path_in(dir.as_deref(), "package.json");
            let from = format!("the dev script of {pkg} ({})", ds.framework);
            self.push_svc(&base, def, Kind::Process, dir, Some(from));
        }
    }

    /// `migrate` (and `clone_from = "golden"`) for each PostgreSQL or MySQL-family adapter
    /// service that a process whose code has `alembic.ini` or `manage.py` uses.
    pub(super) fn plan_migrations(&mut self) {
        for db in self.svcs.ids() {
            let Kind::Adapter(adapter) = self.svcs[db].kind else {
                continue;
            };
            if !matches!(adapter, "postgres" | "mysql" | "mariadb" | "percona") {
                continue;
            }
            let raw = self.svcs[db].raw.clone();
            for process in self.svcs.ids() {
                if self.svcs[process].kind != Kind::Process || !self.uses(process, db, &raw) {
                    continue;
                }
                let workdir = self.svcs[process].workdir.clone();
                let cmd = if self
                    .repo
                    .file_in(workdir.as_deref(), "alembic.ini")
                    .is_some()
                {
                    "alembic upgrade head"
                } else if self.repo.file_in(workdir.as_deref(), "manage.py").is_some() {
                    "python manage.py migrate --noinput"
                } else {
                    continue;
                };
                // One golden template per process's code: two databases whose builds each
                // run that code's settings (naming both) would wait for each other for
                // ever. The one its DATABASE_URL names migrates (else the first); the
                // other is left to the person.
                let other = self
                    .migrations
                    .iter()
                    .find(|(_, m)| m.owner == process)
                    .map(|(d, _)| *d);
                if let Some(other) = other {
                    let (keep, left) = if self.database_url_names(process, db) {
                        (db, other)
                    } else {
                        (other, db)
                    };
                    let (kept, left) = (self.svcs[keep].name.clone(), self.svcs[left].name.clone());
                    let owner = self.svcs[process].name.clone();
                    self.todo(format!(
                        "{left}: no migrate: {owner}'s code migrates {kept} ({cmd}, with a golden template); if it migrates {left} too, give {left} its own migrate (`python manage.py migrate --database=…`, `alembic -x …`) without clone_from: two golden templates built with settings naming both databases would wait for each other"
                    ));
                    if keep == other {
                        break;
                    }
                    self.migrations.remove(&other);
                }
                let blocked = self.reads_parts(process, db, workdir.as_deref());
                self.migrations.insert(
                    db,
                    Migration {
                        cmd: cmd.to_owned(),
                        workdir,
                        owner: process,
                        blocked,
                    },
                );
                break;
            }
        }
    }

    /// Does `process`'s `DATABASE_URL` name the database service `db`?
    fn database_url_names(&mut self, process: SvcId, db: SvcId) -> bool {
        self.texts(process).iter().any(|(k, v)| {
            k.as_deref() == Some("DATABASE_URL")
                && scan_urls(v)
                    .iter()
                    .any(|h| self.alias.get(&h.host) == Some(&db))
        })
    }

    /// Does `process` use the database service `db` (compose name `raw`): `depends_on` it,
    /// or name it in its settings?
    fn uses(&mut self, process: SvcId, db: SvcId, raw: &str) -> bool {
        let deps: Vec<String> = match self.svcs[process].def.get("depends_on") {
            Some(Value::Mapping(m)) => m.keys().filter_map(scalar).collect(),
            v => string_list(v),
        };
        if deps.iter().any(|d| d == raw) {
            return true;
        }
        self.texts(process).iter().any(|(_, t)| {
            scan_urls(t)
                .iter()
                .any(|h| self.alias.get(&h.host) == Some(&db))
        })
    }

    /// Why `migrate` cannot reach the database of `process`'s settings, if it cannot:
    /// they read it from parts (`DB_HOST`, `DB_PORT`, …) and none of its Python settings
    /// reads `DATABASE_URL`, which is what `migrate` gets.
    fn reads_parts(&mut self, process: SvcId, db: SvcId, workdir: Option<&str>) -> Option<String> {
        let texts = self.texts(process);
        let mut files: Vec<(String, String)> = Vec::new();
        for f in string_list_env_file(&self.svcs[process].def) {
            if let Some(t) = self.repo.env_files.get(&f) {
                files.extend(binky_controllers::env::parse_dotenv(t));
            }
        }
        let host_key = texts
            .iter()
            .filter_map(|(k, v)| Some((k.clone()?, v.clone())))
            .chain(files)
            .find(|(k, v)| {
                let k = k.to_ascii_uppercase();
                ["HOST", "SERVER", "HOSTNAME"]
                    .iter()
                    .any(|s| k.ends_with(s))
                    && self.alias.get(&v.trim().to_ascii_lowercase()) == Some(&db)
            })
            .map(|(k, _)| k)?;
        let prefix = workdir.map(|w| format!("{w}/")).unwrap_or_default();
        let reads_url = self.repo.files.iter().any(|(p, t)| {
            p.starts_with(&prefix) && p.ends_with(".py") && t.contains("DATABASE_URL")
        });
        (!reads_url).then(|| {
            format!("its settings read the database from parts ({host_key}, …); `migrate` gets only DATABASE_URL: have them read DATABASE_URL when it is set, then uncomment")
        })
    }
}

impl Init {
    /// An adapter service's `migrate`, `clone_from`, `workdir` and the settings its
    /// migration tool reads (the owner's `env_file` and plain `env`), when
    /// [`Init::plan_migrations`] found them; whether it wrote any.
    pub(super) fn render_migration(&mut self, db: SvcId, out: &mut String) -> bool {
        let Some(m) = self.migrations.remove(&db) else {
            return false;
        };
        let name = self.svcs[db].name.clone();
        let owner = self.svcs[m.owner].name.clone();
        let tool = m
            .cmd
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        // Settings by parts reach `migrate` when the owner's env gives them as this
        // service's tokens: a golden build resolves `${db.host}` to its template's.
        let lines = self.env_lines(m.owner);
        let parts_given = lines
            .iter()
            .filter_map(|l| l.value.as_deref())
            .any(|v| v.contains(&format!("${{{name}.host}}")));
        if let Some(why) = m.blocked.as_ref().filter(|_| !parts_given) {
            out.push_str(&format!(
                "# {owner}'s code migrates with {tool}, but {why}:\n"
            ));
            if let Some(w) = &m.workdir {
                out.push_str(&format!("# workdir = {}\n", q(w)));
            }
            out.push_str(&format!(
                "# migrate = {}\n# clone_from = \"golden\"\n",
                q(&m.cmd)
            ));
            self.todo(format!(
                "{name}: migrate = {} is commented out: {owner}'s {why}",
                q(&m.cmd)
            ));
            return true;
        }
        out.push_str(&format!("# {owner}'s code migrates with {tool}: it runs once, in a golden template every\n# world's database is copied from (again when a migration changes).\n"));
        if let Some(w) = &m.workdir {
            out.push_str(&format!("workdir = {}\n", q(w)));
        }
        out.push_str(&format!("migrate = {}\n", q(&m.cmd)));
        out.push_str("clone_from = \"golden\"\n");
        self.mapped.push(format!(
            "{name}: migrate = {} in {}, clone_from golden",
            m.cmd,
            m.workdir.as_deref().unwrap_or(".")
        ));
        // The settings the tool loads, as the owner has them: env_file, and env values
        // that name no other service (their slices may not exist yet when it runs).
        let def = self.svcs[m.owner].def.clone();
        let files: Vec<String> = string_list_env_file(&def)
            .iter()
            .map(|f| self.interpolate(f))
            .map(|f| rebase(&f, m.workdir.as_deref()))
            .collect();
        if !files.is_empty() {
            out.push_str(&format!("env_file = {}\n", toml_list(&files)));
        }
        // All of them: in a golden build, this service's tokens are its template's, and
        // `migrate` waits for the other slices its env names.
        // (Not what names the owner itself: `${self.port}` would be this service's here.)
        let kept: Vec<(String, String)> = lines
            .into_iter()
            .filter_map(|l| Some((l.key, l.value?)))
            .filter(|(_, v)| !v.contains("${self."))
            .collect();
        // Written once what every process shares is known: what [defaults.env] gives
        // `migrate` too is not repeated (see `Init::render_services`).
        if !kept.is_empty() {
            out.push_str(&super::render::env_placeholder(db));
            let lines = kept
                .into_iter()
                .map(|(key, v)| EnvLine {
                    key,
                    value: Some(v),
                    comment: None,
                })
                .collect();
            self.migrate_env.insert(db, lines);
        }
        true
    }
}

impl Init {
    /// Frameworks of the project that refuse a request whose `Host` they do not know (the
    /// proxy sends `<service>.<world>.<project>.localhost`): what to change, for each.
    pub(super) fn host_hints(&mut self, body: &str) {
        let paths: Vec<String> = self.repo.files.keys().cloned().collect();
        for rel in paths {
            let name = rel.rsplit('/').next().unwrap_or(&rel);
            let hint = if name == "manage.py" && !body.contains("ALLOWED_HOSTS") {
                Some(format!("Django ({rel}) refuses unknown hosts: add \".localhost\" to ALLOWED_HOSTS in the settings it runs with (or read them from an env variable and set it in [services.*.env])"))
            } else if rel == "config/application.rb" || rel.ends_with("/config/application.rb") {
                Some(format!("Rails ({rel}) refuses unknown hosts in development: add `config.hosts << \".localhost\"` to config/environments/development.rb"))
            } else if name.starts_with("vite.config.") {
                Some(format!("Vite ({rel}) refuses unknown hosts: set `server: {{ allowedHosts: [\".localhost\"] }}` in {rel}"))
            } else {
                None
            };
            if let Some(h) = hint {
                self.note(&h);
            }
        }
    }
}

/// A command that is not compose's, as compose would write it: `$` doubled, so that
/// compose's interpolation leaves `${self.port}` and the shell's `$VAR` as they are.
pub(super) fn literal(cmd: &str) -> String {
    cmd.replace('$', "$$")
}
