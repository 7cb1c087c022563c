//! `binky init` on the shapes of real projects, then `binky up` of the file exactly as init
//! wrote it, then a request through binky's proxy: the real binary, real git, PostgreSQL
//! and Redis run by binky itself (no `admin_url`), real Alembic, Django, Celery, RQ, FastAPI
//! and uvicorn from the venv `scripts/test` makes, and node with the npm packages it caches. The only change to the written file is the test's own port
//! range (every test keeps to its block of ports).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::harness::*;
use crate::init::copy_dir;

/// The venv `scripts/test` makes (alembic, Django, Celery, Flower, psycopg2).
fn tools() -> PathBuf {
    test_cache(
        "BINKY_TEST_FRAMEWORKS",
        "frameworks",
        &["bin/alembic", "bin/django-admin", "bin/celery"],
    )
    .join("bin")
}

/// A repository holding the fixture, `binky init` run in it (by the real binary), the
/// written file committed with the test's port range added. The file's text and what
/// init printed.
fn init_project(fixture: &str, extra: &[(&str, &str)]) -> (Env, String, String) {
    let env = fixture_repo(fixture, extra);
    let (text, said) = init_and_commit(&env);
    (env, text, said)
}

/// A repository holding the fixture and the `extra` files (`.bin/` ones executable),
/// nothing committed but the harness's first commit.
fn fixture_repo(fixture: &str, extra: &[(&str, &str)]) -> Env {
    let env = Env::new("[project]\nname = \"placeholder\"\n");
    std::fs::remove_file(env.repo.join("binky.toml")).unwrap();
    std::fs::remove_file(env.repo.join("server.py")).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/compose")
        .join(fixture);
    copy_dir(&src, &env.repo);
    for (path, text) in extra {
        let p = env.repo.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        if path.contains(".bin/") {
            binky_platform::fs::set_mode(&p, 0o755).unwrap();
        }
    }
    env
}

/// `binky init` run in the repository (by the real binary), the written file committed
/// with the test's port range added: the file's text and what init printed.
fn init_and_commit(env: &Env) -> (String, String) {
    let out = std::process::Command::new(binky_bin())
        .arg("init")
        .current_dir(&env.repo)
        .env("BINKY_HOME", &env.home)
        .env("PATH", path_with_tools())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let said = format!("{}{}", stdout(&out), stderr(&out));
    let text = std::fs::read_to_string(env.repo.join("binky.toml")).unwrap();
    // The test's own ports: the one line added to the file.
    let ranged = text.replacen(
        "\n[project]\nname = \"repo\"\n",
        &format!("\n[project]\nname = \"repo\"\n{}\n", env.range()),
        1,
    );
    assert_ne!(ranged, text, "{text}");
    std::fs::write(env.repo.join("binky.toml"), &ranged).unwrap();
    let check = env.binky(&["check"]);
    assert!(check.status.success(), "{}\n{text}", stdout(&check));
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "binky init"]);
    (text, said)
}

fn path_with_tools() -> String {
    format!(
        "{}:{}",
        tools().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn up(env: &Env, world: &str) {
    let out = env.binky_env(&["up", world], &[("PATH", &path_with_tools())]);
    assert_up(env, world, &out);
}

/// `up` succeeded; else the failure names its output and the world's last log lines.
fn assert_up(env: &Env, world: &str, out: &std::process::Output) {
    assert!(
        out.status.success(),
        "up {world}: {}{}\n{}",
        stdout(out),
        stderr(out),
        stdout(&env.binky(&["logs", world, "-n", "40"]))
    );
}

/// GET `path` of service `svc` of world `world` through the proxy, until it answers 200
/// (a dev server may still be starting); the answer.
fn get_200(env: &Env, svc: &str, world: &str, path: &str) -> String {
    let host = format!("{svc}.{world}.repo.localhost");
    let mut last = String::new();
    wait_until(
        &format!("200 from {host}{path}"),
        Duration::from_secs(30),
        || {
            last = through_proxy(env.proxy_port(), &host, path).unwrap_or_default();
            status_code(&last) == 200
        },
    );
    last
}

/// The JSON body of an answer, chunked or not (one chunk).
fn json_of(answer: &str) -> serde_json::Value {
    let (Some(a), Some(b)) = (answer.find('{'), answer.rfind('}')) else {
        panic!("no JSON in: {answer}");
    };
    serde_json::from_str(&answer[a..=b]).unwrap_or_else(|e| panic!("{e}: {answer}"))
}

/// Stands in for `npm install`'s `node_modules/.bin/vite`: a real node server taking Vite's
/// flags (`--port`, `--strictPort`, `--host`) and answering with what the page would be
/// built with (`VITE_API_URL`).
const VITE_STAND_IN: &str = r#"#!/usr/bin/env node
const http = require("http");
const a = process.argv;
const port = Number(a[a.indexOf("--port") + 1]);
const host = a[a.indexOf("--host") + 1];
if (!a.includes("--strictPort")) { console.error("expected --strictPort"); process.exit(2); }
http.createServer((req, res) => {
  res.writeHead(200, { "Content-Type": "application/json" });
  res.end(JSON.stringify({ vite: true, VITE_API_URL: process.env.VITE_API_URL || null }));
}).listen(port, host, () => console.log(`vite dev server on ${host}:${port}`));
"#;

#[test]
fn a_fullstack_monorepo_runs_as_init_wrote_it_and_answers_through_the_proxy() {
    crate::pg_server::pg_bin_dir().expect("postgresql installed (./scripts/test installs it)");
    let (env, text, said) = init_project(
        "fullstack",
        &[("frontend/node_modules/.bin/vite", VITE_STAND_IN)],
    );
    // What was written, as the issue asks: binky runs PostgreSQL, Alembic migrates a
    // golden template, the frontend's dev server with Vite's flags, browser-facing URLs
    // through the proxy, defaults kept, test runner and prestart commented out.
    assert!(!text.lines().any(|l| l.starts_with("admin_url")), "{text}");
    assert!(
        text.contains("migrate = \"alembic upgrade head\"\nclone_from = \"golden\""),
        "{text}"
    );
    assert!(text.contains("[services.db]"), "{text}");
    assert!(text.contains("cmd = \"npm run dev -- --port ${self.port} --strictPort --host 127.0.0.1\"\nworkdir = \"frontend\"\nurl = true"), "{text}");
    assert!(
        text.contains("VITE_API_URL = \"${backend.proxy_url}\""),
        "{text}"
    );
    assert!(
        text.contains("FRONTEND_HOST = \"${frontend.proxy_url}\""),
        "{text}"
    );
    assert!(
        text.contains("API_KEY = \"${env.API_KEY:-devkey}\""),
        "{text}"
    );
    assert!(text.contains("# [services.playwright]"), "{text}");
    assert!(text.contains("# [services.prestart]"), "{text}");
    assert!(
        text.contains("# once mailcatcher is uncommented: SMTP_PORT = \"${mailcatcher.smtp}\""),
        "{text}"
    );
    assert!(said.contains("gem install mailcatcher"), "{said}");
    assert!(
        said.contains("Vite (frontend/vite.config.ts) refuses unknown hosts"),
        "{said}"
    );
    assert!(!text.contains("TODO: the command"), "{text}");

    up(&env, "w");
    let answer = get_200(&env, "backend", "w", "/api/v1/items");
    let body = json_of(&answer);
    // The row the migration inserted: the world's database is the migrated template's copy.
    assert_eq!(body["items"], serde_json::json!(["first"]), "{answer}");
    assert_eq!(body["api_key"], "devkey");
    let front = "http://frontend.w.repo.localhost";
    assert!(body["cors"].as_str().unwrap().contains(front), "{body}");
    assert!(
        body["frontend"].as_str().unwrap().starts_with(front),
        "{body}"
    );
    let page = get_200(&env, "frontend", "w", "/");
    let page = json_of(&page);
    assert!(
        page["VITE_API_URL"]
            .as_str()
            .unwrap()
            .starts_with("http://backend.w.repo.localhost"),
        "{page}"
    );
    let keys: Vec<serde_json::Value> =
        serde_json::from_str(&env.ok(&["golden", "ls", "--json"])).unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_django_celery_flower_mail_project_runs_as_init_wrote_it_and_answers_through_the_proxy() {
    crate::pg_server::pg_bin_dir().expect("postgresql installed (./scripts/test installs it)");
    let (env, text, said) = init_project("django-stack", &[]);
    // The commands behind /start, /start-celeryworker, … (the scripts the Dockerfile
    // copies in), Flower's port with a url, the database's migrate in a golden template,
    // the mail catcher that is not installed commented out with how to install it.
    assert!(
        text.contains("cmd = \"python manage.py runserver 0.0.0.0:${self.port}\""),
        "{text}"
    );
    assert!(
        text.contains("cmd = \"celery -A config.celery_app worker -l INFO\""),
        "{text}"
    );
    assert!(
        text.contains("cmd = \"celery -A config.celery_app beat -l INFO\""),
        "{text}"
    );
    assert!(
        text.contains("cmd = \"celery -A config.celery_app flower --address=0.0.0.0 --port=${self.port}\"\nurl = true"),
        "{text}"
    );
    assert!(
        text.contains("migrate = \"python manage.py migrate --noinput\"\nclone_from = \"golden\""),
        "{text}"
    );
    assert!(text.contains("# [services.mailpit]"), "{text}");
    assert!(said.contains("brew install mailpit"), "{said}");
    assert!(!text.lines().any(|l| l.starts_with("admin_url")), "{text}");

    up(&env, "w");
    let answer = get_200(&env, "django", "w", "/");
    let body = json_of(&answer);
    assert_eq!(
        body["notes"],
        serde_json::json!(["hello from the golden template"]),
        "{answer}"
    );
    // Flower's UI through the proxy, connected to the world's own Redis.
    let flower = get_200(&env, "flower", "w", "/");
    assert!(flower.contains("Flower"), "{flower}");
    let services = env.services("w");
    for svc in ["celeryworker", "celerybeat"] {
        let s = services.iter().find(|s| s["name"] == svc).unwrap();
        assert!(s["pid"].as_u64().is_some(), "{svc} not running: {s}");
    }
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_procfile_and_manage_py_without_compose_run_as_init_wrote_them() {
    crate::pg_server::pg_bin_dir().expect("postgresql installed (./scripts/test installs it)");
    let (env, text, said) = init_project("procfile-django", &[]);
    assert!(said.contains("from Procfile, manage.py"), "{said}");
    assert!(
        text.contains("[services.db]\n# the dependencies name psycopg2-binary"),
        "{text}"
    );
    assert!(text.contains("[services.redis]"), "{text}");
    assert!(
        text.contains("cmd = \"python manage.py runserver 127.0.0.1:${self.port}\"\nurl = true"),
        "{text}"
    );
    assert!(
        text.contains("cmd = \"celery -A config.celery_app worker -l INFO\""),
        "{text}"
    );
    assert!(
        text.contains("migrate = \"python manage.py migrate --noinput\""),
        "{text}"
    );
    assert!(text.contains("DATABASE_URL = \"${db.url}\""), "{text}");

    up(&env, "w");
    let answer = get_200(&env, "web", "w", "/");
    let body = json_of(&answer);
    assert_eq!(
        body["notes"],
        serde_json::json!(["hello from the golden template"]),
        "{answer}"
    );
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

/// The third shape: a Django application whose settings read the database in parts
/// (DB_HOST, DB_PORT, DB_USER, DB_PASSWORD, DB_NAME), with Django's Redis cache and an RQ
/// worker (`rq worker`), from a compose file. The parts become the database's tokens (in
/// the services' env and the golden build's migrate), what web and worker share is written
/// once under [defaults.env], and a job queued through the proxy is worked by the world's
/// own worker into the world's own database.
#[test]
fn a_django_project_by_parts_with_a_redis_cache_and_an_rq_worker_runs_as_init_wrote_it() {
    crate::pg_server::pg_bin_dir().expect("postgresql installed (./scripts/test installs it)");
    test_cache("BINKY_TEST_FRAMEWORKS", "frameworks", &["bin/rq"]);
    let (env, text, said) = init_project("django-rq", &[]);
    assert!(
        text.contains("[defaults.env]\nDB_HOST = \"${postgres.host}\"\nDB_NAME = \"${postgres.database}\"\nDB_PASSWORD = \"${postgres.password}\"\nDB_PORT = \"${postgres.port}\"\nDB_USER = \"${postgres.user}\"\n"),
        "{text}"
    );
    assert!(text.contains("REDIS_URL = \"${redis.url}\""), "{text}");
    assert!(
        text.contains("cmd = \"python manage.py runserver 0.0.0.0:${self.port}\"\nurl = true"),
        "{text}"
    );
    assert!(
        text.contains("cmd = \"rq worker -c shelf.rq_settings default\""),
        "{text}"
    );
    assert!(
        text.contains("migrate = \"python manage.py migrate --noinput\"\nclone_from = \"golden\""),
        "{text}"
    );
    assert!(!text.lines().any(|l| l.starts_with("admin_url")), "{text}");
    assert!(!text.contains("shelf-dev-password"), "{text}");
    assert!(!said.contains("shelf-dev-password"), "{said}");

    up(&env, "w");
    let answer = get_200(&env, "web", "w", "/");
    let body = json_of(&answer);
    assert_eq!(
        body["books"],
        serde_json::json!(["shelved by the migration"]),
        "{answer}"
    );
    assert_eq!(body["db_host"], "127.0.0.1", "{answer}");
    // The cache is the world's Redis: the second request sees the first one's count.
    let again = json_of(&get_200(&env, "web", "w", "/"));
    assert!(
        again["cache_hits_before"].as_u64() > body["cache_hits_before"].as_u64(),
        "{again} after {body}"
    );
    // A job queued by the web is worked by the world's RQ worker, into its database.
    let queued = json_of(&get_200(&env, "web", "w", "/shelve?title=worked-by-rq"));
    assert!(queued["job"].as_str().is_some(), "{queued}");
    let mut last = serde_json::Value::Null;
    wait_until(
        "the worker's row through the proxy",
        Duration::from_secs(60),
        || {
            last = json_of(&get_200(&env, "web", "w", "/"));
            last["books"]
                .as_array()
                .is_some_and(|b| b.iter().any(|t| t == "worked-by-rq"))
        },
    );
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

/// No compose file, no Procfile: alembic.ini, requirements.txt and a FastAPI app in
/// app/main.py. init writes uvicorn on the world's port and Alembic as the database's
/// live migrate (a golden template); `up` as written answers with the migrated row.
#[test]
fn an_alembic_and_fastapi_project_without_compose_runs_as_init_wrote_it() {
    crate::pg_server::pg_bin_dir().expect("postgresql installed (./scripts/test installs it)");
    test_cache("BINKY_TEST_FRAMEWORKS", "frameworks", &["bin/uvicorn"]);
    let (env, text, said) = init_project("fastapi-alembic", &[]);
    assert!(said.contains("from app/main.py, alembic.ini"), "{said}");
    assert!(
        text.contains(
            "cmd = \"uvicorn app.main:app --host 127.0.0.1 --port ${self.port}\"\nurl = true"
        ),
        "{text}"
    );
    assert!(
        text.contains("migrate = \"alembic upgrade head\"\nclone_from = \"golden\""),
        "{text}"
    );
    assert!(text.contains("DATABASE_URL = \"${db.url}\""), "{text}");

    up(&env, "w");
    let answer = get_200(&env, "web", "w", "/items");
    let body = json_of(&answer);
    assert_eq!(
        body["items"],
        serde_json::json!(["made by alembic"]),
        "{answer}"
    );
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

/// No compose file: a Node API and worker with only package.json (scripts `dev` and
/// `worker`, dependencies `pg` and `redis`). init writes both as services of the world's
/// PostgreSQL and Redis, the addresses once under [defaults.env]; `up` as written answers
/// through the proxy with the world's database and the worker's heartbeat from the
/// world's Redis.
#[test]
fn a_node_api_and_worker_with_only_package_json_run_as_init_wrote_them() {
    crate::pg_server::pg_bin_dir().expect("postgresql installed (./scripts/test installs it)");
    let modules = test_cache(
        "BINKY_TEST_NODE_CLIENTS",
        "node-clients",
        &["node_modules/pg", "node_modules/redis"],
    )
    .join("node_modules");
    let (env, text, said) = init_project("node-worker", &[]);
    assert!(said.contains("from package.json"), "{said}");
    assert!(
        text.contains(
            "[defaults.env]\nDATABASE_URL = \"${db.url}\"\nREDIS_URL = \"${redis.url}\"\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("cmd = \"npm run dev\"\nurl = true\ndepends_on = [\"db\", \"redis\"]\n\n[services.web.env]\nPORT = \"${self.port}\""),
        "{text}"
    );
    assert!(
        text.contains("[services.worker]\n# cmd: from the worker script of package.json\ncmd = \"npm run worker\"\ndepends_on = [\"db\", \"redis\"]"),
        "{text}"
    );
    // `npm install`'s node_modules, from the test cache.
    let modules = modules.display().to_string();
    let out = env.binky_env(
        &["up", "w"],
        &[("PATH", &path_with_tools()), ("NODE_PATH", &modules)],
    );
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let mut last = serde_json::Value::Null;
    wait_until(
        "the worker's heartbeat through the proxy",
        Duration::from_secs(30),
        || {
            last = json_of(&get_200(&env, "web", "w", "/"));
            last["worker"] == "alive"
        },
    );
    assert!(
        last["database"]
            .as_str()
            .unwrap()
            .starts_with(&format!("bk_{}_repo_w_", env.home_id())),
        "{last}"
    );
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

/// A virtualenv at `dir` as `python -m venv` makes one, with the frameworks' packages
/// (FastAPI, its CLI, Alembic, SQLAlchemy, psycopg2) through a `.pth` file and the
/// scripts pip would write for `fastapi` and `alembic` (their `#!` naming this venv's
/// python, as pip writes them).
fn make_venv(dir: &Path) {
    let out = std::process::Command::new(tools().join("python"))
        .args(["-m", "venv", "--without-pip"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let version = std::fs::read_dir(dir.join("lib"))
        .unwrap()
        .next()
        .expect("lib/pythonX.Y")
        .unwrap()
        .file_name();
    let frameworks = tools()
        .parent()
        .unwrap()
        .join("lib")
        .join(&version)
        .join("site-packages");
    std::fs::write(
        dir.join("lib")
            .join(&version)
            .join("site-packages/frameworks.pth"),
        format!("{}\n", frameworks.display()),
    )
    .unwrap();
    for (name, module) in [("fastapi", "fastapi.cli"), ("alembic", "alembic.config")] {
        let script = dir.join("bin").join(name);
        std::fs::write(
            &script,
            format!(
                "#!{}\nimport sys\nfrom {module} import main\nif __name__ == \"__main__\":\n    sys.exit(main())\n",
                dir.join("bin/python").display()
            ),
        )
        .unwrap();
        binky_platform::fs::set_mode(&script, 0o755).unwrap();
    }
}

#[test]
fn a_fastapi_monorepo_with_a_tracked_env_and_its_own_venv_runs_as_init_wrote_it() {
    crate::pg_server::pg_bin_dir().expect("postgresql installed (./scripts/test installs it)");
    // As a developer has it: the project committed (its .env too), the venv beside the
    // API made and ignored, the frontend's packages installed.
    let env = fixture_repo(
        "fastapi-venv",
        &[("frontend/node_modules/.bin/vite", VITE_STAND_IN)],
    );
    make_venv(&env.repo.join("backend/.venv"));
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "the project"]);
    let (text, said) = init_and_commit(&env);
    assert!(!said.contains("Set before"), "{said}");
    assert!(text.contains("copy = [\"backend/.venv\"]"), "{text}");
    assert!(
        text.contains("cmd = \".venv/bin/fastapi run --workers 4 --port ${self.port}\"\nworkdir = \"backend\""),
        "{text}"
    );
    assert!(
        text.contains("migrate = \".venv/bin/alembic upgrade head\""),
        "{text}"
    );
    assert!(
        text.contains("seed = \".venv/bin/python -m app.initial_data\""),
        "{text}"
    );
    assert!(
        text.contains("SECRET_KEY = \"${env.SECRET_KEY:-changethis}\""),
        "{text}"
    );

    // `up` with nothing of the frameworks on PATH: the world's own venv runs it all.
    assert_up(&env, "w", &env.binky(&["up", "w"]));
    let answer = get_200(&env, "backend", "w", "/api/v1/users");
    let body = json_of(&answer);
    // The seeded row of the migrated template's copy.
    assert_eq!(
        body["users"],
        serde_json::json!(["admin@example.com"]),
        "{answer}"
    );
    assert_eq!(body["secret_key"], "changethis");
    let world_venv = env.worktree("w").join("backend/.venv");
    assert_eq!(
        Path::new(body["prefix"].as_str().unwrap()),
        world_venv,
        "the world's own venv runs the API: {body}"
    );
    assert!(
        body["frontend"]
            .as_str()
            .unwrap()
            .starts_with("http://frontend.w.repo.localhost"),
        "{body}"
    );
    let page = json_of(&get_200(&env, "frontend", "w", "/"));
    assert!(
        page["VITE_API_URL"]
            .as_str()
            .unwrap()
            .starts_with("http://backend.w.repo.localhost"),
        "{page}"
    );
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn init_in_a_subfolder_names_the_project_after_the_repository() {
    let env = Env::new("[project]\nname = \"placeholder\"\n");
    let app = env.repo.join("app");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::write(app.join("Procfile"), "web: python3 -m http.server $PORT\n").unwrap();
    let init_in = |dir: &Path| {
        let _ = std::fs::remove_file(dir.join("binky.toml"));
        let out = std::process::Command::new(binky_bin())
            .arg("init")
            .current_dir(dir)
            .env("BINKY_HOME", &env.home)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
        std::fs::read_to_string(dir.join("binky.toml")).unwrap()
    };
    // No remote: the work tree's folder (`repo`), not `app`.
    let text = init_in(&app);
    assert!(text.contains("\n[project]\nname = \"repo\"\n"), "{text}");
    // A remote: its name.
    env.git(&[
        "remote",
        "add",
        "origin",
        "git@git.example.invalid:acme/Shop_Front.git",
    ]);
    let text = init_in(&app);
    assert!(
        text.contains("\n[project]\nname = \"shop-front\"\n"),
        "{text}"
    );
}

#[test]
fn an_untracked_env_and_a_venv_git_does_not_ignore_are_not_taken_as_the_projects() {
    let env = fixture_repo("fastapi-venv", &[]);
    std::fs::remove_file(env.repo.join(".gitignore")).unwrap();
    make_venv(&env.repo.join("backend/.venv"));
    // The project committed without its .env (a machine's own), the venv not ignored.
    env.git(&["add", "compose.yml", "backend", "frontend"]);
    env.git(&["commit", "-qm", "the project"]);
    let out = std::process::Command::new(binky_bin())
        .arg("init")
        .current_dir(&env.repo)
        .env("BINKY_HOME", &env.home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let text = std::fs::read_to_string(env.repo.join("binky.toml")).unwrap();
    assert!(
        text.contains("SECRET_KEY = \"${env.SECRET_KEY}\""),
        "{text}"
    );
    assert!(!text.contains("changethis"), "{text}");
    assert!(!text.contains("copy = "), "{text}");
    assert!(
        text.contains("cmd = \"fastapi run --workers 4 --port ${self.port}\""),
        "{text}"
    );
}

#[test]
fn a_django_app_by_parts_without_compose_runs_from_its_own_venv_as_init_wrote_it() {
    crate::pg_server::pg_bin_dir().expect("postgresql installed (./scripts/test installs it)");
    let env = fixture_repo("django-parts-venv", &[]);
    make_venv(&env.repo.join(".venv"));
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "the project"]);
    let (text, _) = init_and_commit(&env);
    assert!(text.contains("copy = [\".venv\"]"), "{text}");
    assert!(
        text.contains("cmd = \".venv/bin/python manage.py runserver 127.0.0.1:${self.port}\""),
        "{text}"
    );
    assert!(text.contains("DB_HOST = \"${db.host}\""), "{text}");
    assert!(
        text.contains("migrate = \".venv/bin/python manage.py migrate --noinput\""),
        "{text}"
    );

    // Nothing of the frameworks on PATH: the world's venv, the slice's parts.
    assert_up(&env, "w", &env.binky(&["up", "w"]));
    let body = json_of(&get_200(&env, "web", "w", "/"));
    assert_eq!(body["items"], serde_json::json!(["first item"]), "{body}");
    assert_eq!(
        Path::new(body["prefix"].as_str().unwrap()),
        env.worktree("w").join(".venv"),
        "{body}"
    );
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}
