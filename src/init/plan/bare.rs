//! Merging without a compose file: services from what the project's files say runs (a
//! `Procfile`, `manage.py`, a Node app's or an ASGI app's files) and the databases its
//! dependencies name (psycopg, redis, Celery, RQ, mysqlclient, `pg`, `ioredis`, …).

use std::collections::BTreeSet;

use serde_yaml_ng::{Mapping, Value};

use super::{Kind, Migration, Plan};
use crate::init::read::package_json::NodeApp;
use crate::init::values::literal;

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

/// What every process of a project without compose gets: the databases its dependencies
/// name, as `depends_on` and as their addresses in its environment.
pub(super) struct Base {
    env: Mapping,
    db_names: Vec<Value>,
}

impl Base {
    /// A database service for each one the dependencies `deps` name (mysql not beside
    /// postgres), pushed on `plan`.
    pub(super) fn databases(plan: &mut Plan, deps: &BTreeSet<String>) -> Base {
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
            // Settings that read the address in parts (`DB_HOST`, `DB_PORT`, …, `REDIS_HOST`)
            // get each part as the slice's token (`$$` is compose's literal `$`).
            let prefixes: &[&str] = match *adapter {
                "redis" => &["REDIS", "CACHE_REDIS"],
                _ => &["DATABASE", "DB", "POSTGRES", "PG", "MYSQL", "SQL"],
            };
            for (v, field) in plan.found.django.parts(prefixes) {
                env.insert(Value::from(v), Value::from(format!("$${{{name}.{field}}}")));
            }
            if *adapter == "redis" && deps.contains("celery") {
                env.insert(Value::from("CELERY_BROKER_URL"), Value::from(url));
            }
            let why = format!("the dependencies name {}", found.join(", "));
            plan.push_svc(
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
    pub(super) fn def(&self, cmd: &str, port: Option<u16>) -> Mapping {
        let mut def = Mapping::new();
        def.insert(Value::from("command"), Value::from(literal(cmd)));
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

/// The workers of a Django project its requirements name, where no Procfile says what
/// runs: django-rq's `rqworker`, and Celery's worker (and beat, with django-celery-beat or
/// a beat schedule) for the Celery app module beside the settings (`config/celery_app.py`
/// → `-A config.celery_app`, `shop/celery.py` → `-A shop`). Each gets the stop signal
/// it stops on at once when written.
pub(super) fn push_django_workers(
    plan: &mut Plan,
    base: &Base,
    deps: &BTreeSet<String>,
    dir: Option<&str>,
) {
    let pkg = |p: &str| p.replace(['_', '.'], "-").to_ascii_lowercase();
    let has = |name: &str| deps.iter().any(|d| pkg(d) == name);
    if has("django-rq") {
        plan.push_svc(
            "rqworker",
            base.def("python manage.py rqworker default", None),
            Kind::Process,
            dir.map(str::to_owned),
            Some("django-rq in the requirements (its worker, queue `default`)".into()),
        );
    }
    if !has("celery") {
        return;
    }
    let prefix = dir.map(|d| format!("{d}/")).unwrap_or_default();
    let app = plan
        .found
        .files
        .iter()
        .filter_map(|(p, t)| Some((p.strip_prefix(&prefix)?, t)))
        .filter(|(p, t)| {
            matches!(p.rsplit('/').next(), Some("celery.py" | "celery_app.py"))
                && p.contains('/')
                && t.contains("Celery(")
        })
        .min_by_key(|(p, _)| p.matches('/').count())
        .map(|(p, t)| {
            let module = p.trim_end_matches(".py").replace('/', ".");
            let module = module
                .strip_suffix(".celery")
                .map(str::to_owned)
                .unwrap_or(module);
            let beat = has("django-celery-beat") || t.contains("beat_schedule");
            (module, beat)
        });
    let Some((module, beat)) = app else {
        plan.todo("celery is in the requirements but no Celery app module (`celery.py` or `celery_app.py` with `Celery(`) was found beside the settings: add [services.worker] with cmd = \"celery -A <module> worker -l info\"");
        return;
    };
    plan.push_svc(
        "worker",
        base.def(&format!("celery -A {module} worker -l info"), None),
        Kind::Process,
        dir.map(str::to_owned),
        Some(format!("celery in the requirements, its app in {module}")),
    );
    if beat {
        plan.push_svc(
            "beat",
            base.def(&format!("celery -A {module} beat -l info"), None),
            Kind::Process,
            dir.map(str::to_owned),
            Some(format!("a beat schedule of the Celery app in {module}")),
        );
    }
}

/// A Node app's service (and its worker's), on port 3000; the `package.json` read.
pub(super) fn push_node_app(plan: &mut Plan, base: &Base, app: &NodeApp) -> String {
    let pkg = crate::init::values::path_in(app.dir.as_deref(), "package.json");
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
    plan.push_svc(
        &name,
        def,
        Kind::Process,
        app.dir.clone(),
        Some(format!("the {} script of {pkg}", app.web)),
    );
    if let Some(worker) = &app.worker {
        plan.push_svc(
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
pub(super) fn push_asgi_app(
    plan: &mut Plan,
    base: &Base,
    file: &str,
    var: &str,
    alembic: Option<&str>,
) {
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
    plan.push_svc(
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
pub(super) fn release_migration(plan: &mut Plan, cmd: String) {
    if let Some(a) = plan
        .svcs
        .find(|s| matches!(s.kind, Kind::Adapter("postgres" | "mysql")))
    {
        let owner = plan.svcs.find(|s| s.kind == Kind::Process).unwrap_or(a);
        let workdir = plan.migrations.get(&a).and_then(|m| m.workdir.clone());
        plan.migrations.insert(
            a,
            Migration {
                cmd,
                workdir,
                owner,
                seed: None,
                blocked: None,
            },
        );
    }
}

/// A Procfile's `web` command, listening on `$PORT`, which binky sets: as written when it
/// says `$PORT` or runs a server that reads it (gunicorn), else with the port given to
/// Django's `runserver`, uvicorn, FastAPI's `fastapi run`/`fastapi dev` or a Rails server.
pub(super) fn listen_on_port(cmd: &str) -> String {
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
    if words.iter().any(|w| w.starts_with("--port")) {
        return cmd.to_owned();
    }
    let fastapi = words
        .windows(2)
        .any(|w| w[0].rsplit('/').next() == Some("fastapi") && matches!(w[1], "run" | "dev"));
    if fastapi
        || words
            .iter()
            .any(|w| w.ends_with("uvicorn") || *w == "rails")
    {
        return format!("{cmd} --port 8000");
    }
    cmd.to_owned()
}
