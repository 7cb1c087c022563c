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
            .filter(|p| p.rsplit('/').next() == Some("package.json") && p.matches('/').count() <= 1)
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
    if procfile.is_none()
        && manage.is_none()
        && dev_dirs.is_empty()
        && alembic.is_none()
        && node_apps.is_empty()
        && asgi.is_none()
    {
        return Err(InitError::NothingToRead {
            dir: repo.dir_name.clone(),
            compose: COMPOSE_FILES.join(", "),
        });
    }

    let mut read: Vec<String> = Vec::new();
    let mut init = Init::new(repo, "", project);
    // The databases the dependencies name.
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
    let base = |cmd: &str, port: Option<u16>| {
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
        if !db_names.is_empty() {
            def.insert(Value::from("depends_on"), Value::Sequence(db_names.clone()));
        }
        if !env.is_empty() {
            def.insert(Value::from("environment"), Value::Mapping(env.clone()));
        }
        def
    };

    let mut release: Option<String> = None;
    if let Some((file, lines)) = &procfile {
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
                base(&cmd, port),
                Kind::Process,
                None,
                Some(format!("{file} ({kind})")),
            );
        }
    }
    if let Some(dir) = &manage {
        read.push(Repo::path_in(dir.as_deref(), "manage.py"));
        if procfile.is_none() {
            init.push_svc(
                "web",
                base("python manage.py runserver 127.0.0.1:8000", Some(8000)),
                Kind::Process,
                dir.clone(),
                Some("manage.py (Django's development server)".into()),
            );
        }
    }
    for app in &node_apps {
        let pkg = Repo::path_in(app.dir.as_deref(), "package.json");
        read.push(pkg.clone());
        let mut def = base(&app.run(&app.web), Some(3000));
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
                base(&app.run(worker), None),
                Kind::Process,
                app.dir.clone(),
                Some(format!("the {worker} script of {pkg}")),
            );
        }
    }
    if let Some((file, var)) = &asgi {
        read.push(file.clone());
        // Run where alembic.ini is when the module is below it (`backend/app/main.py`
        // beside `backend/alembic.ini`: `app.main` in `backend`), else at the top.
        let alembic_dir = alembic
            .as_deref()
            .and_then(|a| a.rsplit_once('/'))
            .map(|(d, _)| format!("{d}/"));
        let (workdir, rel) = match alembic_dir {
            Some(d) if file.starts_with(&d) => {
                (Some(d.trim_end_matches('/').to_owned()), &file[d.len()..])
            }
            _ => (None, file.as_str()),
        };
        let module_target = format!("{}:{var}", rel.trim_end_matches(".py").replace('/', "."));
        init.push_svc(
            "web",
            base(
                &format!("uvicorn {module_target} --host 127.0.0.1 --port 8000"),
                Some(8000),
            ),
            Kind::Process,
            workdir,
            Some(format!("{file} (an ASGI app, run by uvicorn)")),
        );
    }
    if let Some(a) = &alembic {
        read.push(a.clone());
    }
    for d in &dev_dirs {
        read.push(Repo::path_in(d.as_deref(), "package.json"));
    }
    init.file = read.join(", ");
    init.add_dev_servers();
    init.learn_secrets();
    init.plan_ports();
    init.plan_migrations();
    // A Procfile's release phase is the migration, wherever the tool is.
    if let Some(cmd) = release {
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
    let body = init.render_services();
    Ok(init.finish(&body))
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
