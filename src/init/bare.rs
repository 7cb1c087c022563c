//! A `binky.toml` for a project without a compose file, from what its files say runs: a
//! `Procfile` (each process type a service; `release` the database's `migrate`),
//! `manage.py` (Django's `runserver`), a Vite or Next.js `package.json`, and the databases
//! its dependencies name (psycopg, redis, Celery, RQ, mysqlclient, `pg`, `ioredis`, …).

use super::*;

/// Dependencies that mean a database, by adapter: Python packages, then npm packages.
const DATABASE_DEPS: &[(&str, &[&str])] = &[
    (
        "postgres",
        &[
            "psycopg",
            "psycopg2",
            "psycopg2-binary",
            "psycopg-binary",
            "asyncpg",
            "pg",
            "postgres",
            "pg-promise",
        ],
    ),
    (
        "redis",
        &[
            "redis",
            "rq",
            "celery",
            "django-redis",
            "hiredis",
            "ioredis",
            "bullmq",
            "arq",
        ],
    ),
    (
        "mysql",
        &["mysqlclient", "pymysql", "mysql-connector-python", "mysql2"],
    ),
];

/// The service name and the env variable a database gets.
fn database_service(adapter: &str) -> (&'static str, &'static str, &'static str) {
    match adapter {
        "postgres" => ("db", "DATABASE_URL", "postgres://db/app"),
        "redis" => ("redis", "REDIS_URL", "redis://redis/0"),
        _ => ("mysql", "DATABASE_URL", "mysql://mysql/app"),
    }
}

pub(super) fn generate(repo: &Repo, project: &str) -> Result<Generated, InitError> {
    let found = Found::look(repo);
    if found.is_nothing() {
        return Err(InitError::NothingToRead {
            dir: repo.dir_name.clone(),
            compose: COMPOSE_FILES.join(", "),
        });
    }

    let mut read: Vec<String> = Vec::new();
    let mut init = Init::new(repo, "", project);
    let base = Base::databases(&mut init, &dependencies(repo));

    let mut release: Option<String> = None;
    if let Some((file, lines)) = &found.procfile {
        read.push((*file).to_owned());
        for (kind, cmd) in lines {
            if kind == "release" {
                release = Some(cmd.clone());
                continue;
            }
            let (cmd, port) = if kind == "web" {
                (listen_on_port(cmd), Some(8000))
            } else {
                (cmd.clone(), None)
            };
            init.push_svc(
                kind,
                base.def(&cmd, port),
                Kind::Process,
                None,
                Some(format!("{file} ({kind})")),
            );
        }
    }
    if let Some(dir) = &found.manage {
        read.push(Repo::path_in(dir.as_deref(), "manage.py"));
        if found.procfile.is_none() {
            init.push_svc(
                "web",
                base.def("python manage.py runserver 127.0.0.1:8000", Some(8000)),
                Kind::Process,
                dir.clone(),
                Some("manage.py (Django's development server)".into()),
            );
        }
    }
    for app in &found.node_apps {
        read.push(push_node_app(&mut init, &base, app));
    }
    if let Some((file, var)) = &found.asgi {
        read.push(file.clone());
        push_asgi_app(&mut init, &base, file, var, found.alembic.as_deref());
    }
    if let Some(a) = &found.alembic {
        read.push(a.clone());
    }
    for d in &found.dev_dirs {
        read.push(Repo::path_in(d.as_deref(), "package.json"));
    }
    init.file = read.join(", ");
    init.add_dev_servers();
    init.learn_secrets();
    init.plan_ports();
    init.plan_migrations();
    if let Some(cmd) = release {
        release_migration(&mut init, cmd);
    }
    let body = init.render_services();
    Ok(init.finish(&body))
}

/// What a project's files say runs, before anything is made of it.
struct Found {
    /// The Procfile read and its process types, when it has any.
    procfile: Option<(&'static str, Vec<(String, String)>)>,
    /// The directory of manage.py (`None` at the top), when there is one.
    manage: Option<Option<String>>,
    /// The directories of Vite or Next.js packages.
    dev_dirs: Vec<Option<String>>,
    /// Where alembic.ini is.
    alembic: Option<String>,
    /// Node apps run by their `package.json` scripts.
    node_apps: Vec<NodeApp>,
    /// An ASGI app: its file and the variable that holds it.
    asgi: Option<(String, String)>,
}

impl Found {
    /// Reads `repo`'s files for what runs.
    fn look(repo: &Repo) -> Found {
        let procfile = ["Procfile.dev", "Procfile"]
            .iter()
            .find_map(|f| repo.file(f).map(|t| (*f, procfile(t))))
            .filter(|(_, p)| !p.is_empty());
        // manage.py at the top or one or two directories down (`backend/manage.py`).
        let manage = repo
            .files
            .keys()
            .filter(|p| p.rsplit('/').next() == Some("manage.py") && p.matches('/').count() <= 2)
            .min_by_key(|p| p.matches('/').count())
            .map(|p| p.rsplit_once('/').map(|(d, _)| d.to_owned()));
        let dev_dirs: Vec<Option<String>> = repo
            .files
            .keys()
            .filter(|p| p.rsplit('/').next() == Some("package.json"))
            .map(|p| p.rsplit_once('/').map(|(d, _)| d.to_owned()))
            .filter(|d| dev_server(repo, d.as_deref()).is_some())
            .collect();
        let alembic = repo
            .files
            .keys()
            .find(|p| p.rsplit('/').next() == Some("alembic.ini"))
            .cloned();
        // A Node app run by its `package.json` scripts (`dev`, else `start`; `worker` beside),
        // where no Procfile says what runs and the package is no Vite/Next.js dev server.
        let node_apps: Vec<NodeApp> = if procfile.is_some() {
            Vec::new()
        } else {
            repo.files
                .keys()
                .filter(|p| {
                    p.rsplit('/').next() == Some("package.json") && p.matches('/').count() <= 1
                })
                .map(|p| p.rsplit_once('/').map(|(d, _)| d.to_owned()))
                .filter(|d| dev_server(repo, d.as_deref()).is_none())
                .filter_map(|d| node_app(repo, d))
                .collect()
        };
        // An ASGI app (`app = FastAPI()` in main.py) where neither a Procfile nor manage.py
        // says what runs.
        let asgi = if procfile.is_none() && manage.is_none() {
            asgi_app(repo)
        } else {
            None
        };
        Found {
            procfile,
            manage,
            dev_dirs,
            alembic,
            node_apps,
            asgi,
        }
    }

    /// Nothing binky can make a service of.
    fn is_nothing(&self) -> bool {
        self.procfile.is_none()
            && self.manage.is_none()
            && self.dev_dirs.is_empty()
            && self.alembic.is_none()
            && self.node_apps.is_empty()
            && self.asgi.is_none()
    }
}

/// The packages a project depends on: Python's, then each `package.json`'s (lower-case).
fn dependencies(repo: &Repo) -> BTreeSet<String> {
    let mut deps = python_deps(repo);
    for (path, text) in &repo.files {
        if path.rsplit('/').next() == Some("package.json") {
            if let Ok(json) = serde_json::from_str::<serde_json::Value>(text) {
                for table in ["dependencies", "devDependencies"] {
                    if let Some(m) = json.get(table).and_then(|d| d.as_object()) {
                        deps.extend(m.keys().map(|k| k.to_ascii_lowercase()));
                    }
                }
            }
        }
    }
    deps
}

/// What every process of a project without compose gets: the databases its dependencies
/// name, as `depends_on` and as their addresses in its environment.
struct Base {
    env: Mapping,
    db_names: Vec<Value>,
}

impl Base {
    /// A database service for each one the dependencies `deps` name (mysql not beside
    /// postgres), pushed on `init`.
    fn databases(init: &mut Init, deps: &BTreeSet<String>) -> Base {
        let mut env = Mapping::new();
        let mut adapters: Vec<&'static str> = Vec::new();
        for (adapter, names) in DATABASE_DEPS {
            let found: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| deps.contains(*n))
                .collect();
            if found.is_empty() || (*adapter == "mysql" && adapters.contains(&"postgres")) {
                continue;
            }
            let (name, var, url) = database_service(adapter);
            adapters.push(adapter);
            env.insert(Value::from(var), Value::from(url));
            if *adapter == "redis" && deps.contains("celery") {
                env.insert(Value::from("CELERY_BROKER_URL"), Value::from(url));
            }
            let why = format!("the dependencies name {}", found.join(", "));
            init.push_svc(
                name,
                Mapping::new(),
                Kind::Adapter(adapter),
                None,
                Some(why),
            );
        }
        let db_names: Vec<Value> = adapters
            .iter()
            .map(|a| Value::from(database_service(a).0))
            .collect();
        Base { env, db_names }
    }

    /// The compose-like definition of a process running `cmd` (listening on `port`).
    fn def(&self, cmd: &str, port: Option<u16>) -> Mapping {
        let mut def = Mapping::new();
        def.insert(
            Value::from("command"),
            Value::from(super::apps::literal(cmd)),
        );
        if let Some(p) = port {
            def.insert(
                Value::from("expose"),
                Value::Sequence(vec![Value::from(p.to_string())]),
            );
        }
        if !self.db_names.is_empty() {
            def.insert(
                Value::from("depends_on"),
                Value::Sequence(self.db_names.clone()),
            );
        }
        if !self.env.is_empty() {
            def.insert(Value::from("environment"), Value::Mapping(self.env.clone()));
        }
        def
    }
}

/// A Node app's service (and its worker's), on port 3000; the `package.json` read.
fn push_node_app(init: &mut Init, base: &Base, app: &NodeApp) -> String {
    let pkg = Repo::path_in(app.dir.as_deref(), "package.json");
    let mut def = base.def(&app.run(&app.web), Some(3000));
    // Node servers listen on $PORT; binky sets it, and says so in the file.
    let env = match def.get_mut("environment") {
        Some(Value::Mapping(m)) => m,
        _ => {
            def.insert(Value::from("environment"), Value::Mapping(Mapping::new()));
            match def.get_mut("environment") {
                Some(Value::Mapping(m)) => m,
                _ => unreachable!("just inserted"),
            }
        }
    };
    env.insert(Value::from("PORT"), Value::from("3000"));
    let name = app
        .dir
        .as_deref()
        .and_then(|d| d.rsplit('/').next())
        .unwrap_or("web")
        .to_owned();
    init.push_svc(
        &name,
        def,
        Kind::Process,
        app.dir.clone(),
        Some(format!("the {} script of {pkg}", app.web)),
    );
    if let Some(worker) = &app.worker {
        init.push_svc(
            worker,
            base.def(&app.run(worker), None),
            Kind::Process,
            app.dir.clone(),
            Some(format!("the {worker} script of {pkg}")),
        );
    }
    pkg
}

/// The ASGI app in `file` (variable `var`) run by uvicorn on port 8000.
fn push_asgi_app(init: &mut Init, base: &Base, file: &str, var: &str, alembic: Option<&str>) {
    // Run where alembic.ini is when the module is below it (`backend/app/main.py`
    // beside `backend/alembic.ini`: `app.main` in `backend`), else at the top.
    let alembic_dir = alembic
        .and_then(|a| a.rsplit_once('/'))
        .map(|(d, _)| format!("{d}/"));
    let (workdir, rel) = match alembic_dir {
        Some(d) if file.starts_with(&d) => {
            (Some(d.trim_end_matches('/').to_owned()), &file[d.len()..])
        }
        _ => (None, file),
    };
    let module_target = format!("{}:{var}", rel.trim_end_matches(".py").replace('/', "."));
    init.push_svc(
        "web",
        base.def(
            &format!("uvicorn {module_target} --host 127.0.0.1 --port 8000"),
            Some(8000),
        ),
        Kind::Process,
        workdir,
        Some(format!("{file} (an ASGI app, run by uvicorn)")),
    );
}

/// A Procfile's release phase is the migration, wherever the tool is: the database's, run
/// by the first process.
fn release_migration(init: &mut Init, cmd: String) {
    if let Some(a) = init
        .svcs
        .find(|s| matches!(s.kind, Kind::Adapter("postgres" | "mysql")))
    {
        let owner = init.svcs.find(|s| s.kind == Kind::Process).unwrap_or(a);
        let workdir = init.migrations.get(&a).and_then(|m| m.workdir.clone());
        init.migrations.insert(
            a,
            Migration {
                cmd,
                workdir,
                owner,
                blocked: None,
            },
        );
    }
}

/// A Node app's scripts: which one serves (`dev`, else `start`) and the worker's, if any.
struct NodeApp {
    dir: Option<String>,
    manager: &'static str,
    web: String,
    worker: Option<String>,
}

impl NodeApp {
    fn run(&self, script: &str) -> String {
        format!("{} run {script}", self.manager)
    }
}

/// The package in `dir` as a Node app: its `dev` (else `start`) script serves, a `worker`
/// script is a service beside it. `None` without either.
fn node_app(repo: &Repo, dir: Option<String>) -> Option<NodeApp> {
    let json: serde_json::Value =
        serde_json::from_str(repo.file_in(dir.as_deref(), "package.json")?).ok()?;
    let scripts = json.get("scripts")?.as_object()?;
    let web = ["dev", "start"]
        .into_iter()
        .find(|s| scripts.get(*s).and_then(|v| v.as_str()).is_some())?;
    let worker = ["worker", "work", "jobs", "queue"]
        .into_iter()
        .find(|s| scripts.get(*s).and_then(|v| v.as_str()).is_some());
    let manager = if repo.file_in(dir.as_deref(), "pnpm-lock.yaml").is_some() {
        "pnpm"
    } else {
        "npm"
    };
    Some(NodeApp {
        dir,
        manager,
        web: web.to_owned(),
        worker: worker.map(str::to_owned),
    })
}

/// An ASGI app in the project's Python dependencies' reach: the first of `main.py`,
/// `app.py`, `asgi.py` (at the top, then one directory down) that makes one
/// (`app = FastAPI(…)`, `Starlette(…)`, `Quart(…)`, `Litestar(…)`), when the requirements
/// name uvicorn or the framework. Its path and the app's variable.
fn asgi_app(repo: &Repo) -> Option<(String, String)> {
    let deps = python_deps(repo);
    if !["uvicorn", "fastapi", "starlette", "litestar"]
        .iter()
        .any(|d| deps.contains(*d))
    {
        return None;
    }
    let mut files: Vec<&String> = repo
        .files
        .keys()
        .filter(|p| matches!(p.rsplit('/').next(), Some("main.py" | "app.py" | "asgi.py")))
        .collect();
    files.sort_by_key(|p| (p.matches('/').count(), !p.ends_with("main.py")));
    for path in files {
        let text = &repo.files[path];
        for line in text.lines() {
            let Some((var, rest)) = line.split_once('=') else {
                continue;
            };
            let var = var.trim();
            let rest = rest.trim_start();
            let is_app = ["FastAPI(", "Starlette(", "Quart(", "Litestar("]
                .iter()
                .any(|f| rest.starts_with(f));
            if is_app
                && !var.is_empty()
                && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !line.starts_with(char::is_whitespace)
            {
                return Some((path.clone(), var.to_owned()));
            }
        }
    }
    None
}

/// A Procfile's `web` command, listening on `$PORT`, which binky sets: as written when it
/// says `$PORT` or runs a server that reads it (gunicorn), else with the port given to
/// Django's `runserver`, uvicorn or a Rails server.
fn listen_on_port(cmd: &str) -> String {
    if cmd.contains("PORT") || cmd.contains("gunicorn") {
        return cmd.to_owned();
    }
    let words: Vec<&str> = cmd.split_whitespace().collect();
    if words.contains(&"runserver") {
        let runserver = words.iter().position(|w| *w == "runserver").unwrap_or(0);
        let mut out: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        match out.get(runserver + 1) {
            Some(next) if !next.starts_with('-') => out[runserver + 1] = "127.0.0.1:8000".into(),
            _ => out.insert(runserver + 1, "127.0.0.1:8000".into()),
        }
        return out.join(" ");
    }
    if words
        .iter()
        .any(|w| w.ends_with("uvicorn") || *w == "rails")
    {
        return format!("{cmd} --port 8000");
    }
    cmd.to_owned()
}

impl Init {
    /// A service that is not in a compose file: `def` in compose's form.
    pub(super) fn push_svc(
        &mut self,
        name: &str,
        def: Mapping,
        kind: Kind,
        workdir: Option<String>,
        cmd_from: Option<String>,
    ) {
        let taken: BTreeSet<String> = self.svcs.iter().map(|s| s.name.clone()).collect();
        let name = service_name(name, &taken);
        self.alias
            .entry(name.to_ascii_lowercase())
            .or_insert(self.svcs.next_id());
        self.svcs.push(Svc {
            raw: name.clone(),
            name,
            def,
            kind,
            image: None,
            workdir,
            cmd_from,
        });
    }
}
