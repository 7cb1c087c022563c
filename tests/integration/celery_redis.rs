//! A real Django + Celery project in two worlds, nothing in it changed for binky: a
//! `proj/celery.py` app reading `CELERY_*` settings from Django's, tasks in an installed
//! app, a Celery worker and beat from PyPI as services, `CELERY_BROKER_URL` and the Django
//! cache (`RedisCache`, no `KEY_PREFIX`) on `${cache.url}`. In each world a task sent there
//! runs on that world's worker only, beat's scheduled task runs, `celery inspect ping`
//! (kombu's pidbox: `PSUBSCRIBE`) is answered by that world's worker alone, and the cache
//! stores, reads and `clear()`s without touching the other world — on a redis-server of
//! each world's own, and on a database each of an `admin_url` server.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::harness::*;
use crate::redis_server::RedisServer;

/// The venv `scripts/test` makes with Celery, redis-py and Django.
fn python_bin() -> PathBuf {
    test_cache(
        "BINKY_TEST_FRAMEWORKS",
        "frameworks",
        &["bin/celery", "bin/django-admin"],
    )
    .join("bin")
}

/// The project's files, as a Django + Celery project has them.
const FILES: &[(&str, &str)] = &[
    (".gitignore", "__pycache__/\n*.pyc\n"),
    (
        "proj/__init__.py",
        "# Celery's documented layout: the app is loaded with Django.\n\
         from .celery import app as celery_app\n\n__all__ = (\"celery_app\",)\n",
    ),
    (
        "proj/celery.py",
        r#"import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proj.settings")

app = Celery("proj")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
"#,
    ),
    (
        "proj/settings.py",
        r#"import os

SECRET_KEY = "not-a-secret-test-project"
DEBUG = True
INSTALLED_APPS = ["notes"]
DATABASES = {}
USE_TZ = True

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": os.environ["REDIS_URL"],
    }
}

CELERY_BROKER_URL = os.environ["CELERY_BROKER_URL"]
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_BEAT_SCHEDULE = {
    "tick": {"task": "notes.tasks.tick", "schedule": 1.0},
}
"#,
    ),
    ("notes/__init__.py", ""),
    (
        "notes/tasks.py",
        r#"import os

from celery import shared_task


def _note(name, line):
    out = os.environ["OUT"]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, name), "a") as f:
        f.write(line + "\n")


@shared_task
def record(tag):
    _note("ran.log", tag)
    return tag


@shared_task
def tick():
    _note("ticks.log", "tick")
"#,
    ),
    (
        "send.py",
        r#"import os
import sys

import django

# As manage.py does.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proj.settings")
django.setup()

from notes.tasks import record

print(record.delay(sys.argv[1]).id)
"#,
    ),
    (
        "cachetool.py",
        r#"import os
import sys

import django

# As manage.py does.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proj.settings")
django.setup()

from django.core.cache import cache

verb = sys.argv[1]
if verb == "set":
    cache.set(sys.argv[2], sys.argv[3], 300)
    print("stored")
elif verb == "get":
    print(repr(cache.get(sys.argv[2])))
elif verb == "clear":
    cache.clear()
    print("cleared")
"#,
    ),
];

/// binky.toml: the cache (`settings` its extra lines), a worker and beat.
fn config(bin: &Path, out: &Path, settings: &str) -> String {
    let bin = bin.display();
    let out = out.display();
    format!(
        r#"
[project]
name = "celeryapp"
{{range}}

[services.cache]
adapter = "redis"
{settings}

[services.worker]
cmd = "exec {bin}/celery -A proj worker --loglevel=INFO --pool=solo"
depends_on = ["cache"]
env = {{ CELERY_BROKER_URL = "${{cache.url}}", REDIS_URL = "${{cache.url}}", OUT = "{out}/${{worktree}}", PYTHONDONTWRITEBYTECODE = "1" }}

[services.beat]
cmd = "exec {bin}/celery -A proj beat --loglevel=INFO --schedule={out}/${{worktree}}-beat-schedule"
depends_on = ["cache"]
env = {{ CELERY_BROKER_URL = "${{cache.url}}", REDIS_URL = "${{cache.url}}", OUT = "{out}/${{worktree}}", PYTHONDONTWRITEBYTECODE = "1" }}
"#
    )
}

/// Lines of `file` in `dir` (none while it does not exist).
fn lines(dir: &Path, file: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Wait until `f` holds; else fail with what the worlds' worker and beat logged.
fn wait_or_logs(env: &Env, what: &str, mut f: impl FnMut() -> bool) {
    if binky_testkit::wait::wait_for(Duration::from_secs(60), Duration::from_millis(100), &mut f) {
        return;
    }
    let mut logs = String::new();
    for w in ["a", "b"] {
        for svc in ["worker", "beat"] {
            let o = env.binky(&["logs", w, svc, "-n", "40"]);
            logs.push_str(&format!("--- {w} {svc}:\n{}{}\n", stdout(&o), stderr(&o)));
        }
    }
    panic!("timed out waiting for: {what}\n{logs}");
}

/// `binky exec W -s worker -- python …` with the worker's environment; its stdout.
fn python(env: &Env, bin: &Path, world: &str, args: &[&str]) -> String {
    let py = bin.join("python").display().to_string();
    let mut argv = vec!["exec", world, "-s", "worker", "--", py.as_str()];
    argv.extend(args);
    env.ok(&argv).trim().to_owned()
}

/// The whole proof in two worlds `a` and `b`, the cache service configured with
/// `settings`, `binky up` run with `vars`.
fn celery_in_two_worlds(settings: &str, vars: &[(&str, &str)]) {
    let bin = python_bin();
    let env = Env::new("[project]\nname = \"celeryapp\"\n{range}\n");
    // Where the tasks note what ran (outside the worktrees, which stay clean).
    let out = env.dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    for (path, text) in FILES {
        let p = env.repo.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    env.write_config(&config(&bin, &out, settings));
    binky_testkit::git::commit_all(&env.repo, "a Django + Celery project");
    for w in ["a", "b"] {
        let o = env.binky_env(&["up", w], vars);
        assert!(o.status.success(), "up {w}: {}", stderr(&o));
    }
    let (out_a, out_b) = (out.join("a"), out.join("b"));

    // Beat's schedule runs in each world.
    wait_or_logs(&env, "beat's task ran in both worlds", || {
        !lines(&out_a, "ticks.log").is_empty() && !lines(&out_b, "ticks.log").is_empty()
    });

    // A task sent in a world runs on that world's worker, not the other's.
    python(&env, &bin, "a", &["send.py", "sent-in-a"]);
    python(&env, &bin, "b", &["send.py", "sent-in-b"]);
    wait_or_logs(&env, "each world's task ran", || {
        lines(&out_a, "ran.log").contains(&"sent-in-a".to_owned())
            && lines(&out_b, "ran.log").contains(&"sent-in-b".to_owned())
    });
    assert_eq!(lines(&out_a, "ran.log"), ["sent-in-a"], "a's worker");
    assert_eq!(lines(&out_b, "ran.log"), ["sent-in-b"], "b's worker");

    // The pidbox (PSUBSCRIBE) answers, and only the world's own worker does.
    for w in ["a", "b"] {
        let celery = bin.join("celery").display().to_string();
        let mut pong = String::new();
        let answered = binky_testkit::wait::wait_for(
            Duration::from_secs(60),
            Duration::from_millis(200),
            || {
                let o = env.binky(&[
                    "exec",
                    w,
                    "-s",
                    "worker",
                    "--",
                    &celery,
                    "-A",
                    "proj",
                    "inspect",
                    "ping",
                    "--timeout",
                    "5",
                ]);
                pong = format!("{}{}", stdout(&o), stderr(&o));
                o.status.success()
            },
        );
        assert!(answered, "celery inspect ping in {w}: {pong}");
        assert!(
            pong.contains("pong") && pong.contains("1 node online"),
            "{w}: {pong}"
        );
    }

    // Django's cache without KEY_PREFIX: stores and reads in each world, and clear() in
    // one leaves the other's entries.
    for w in ["a", "b"] {
        let value = format!("from {w}");
        assert_eq!(
            python(&env, &bin, w, &["cachetool.py", "set", "greeting", &value]),
            "stored"
        );
    }
    assert_eq!(
        python(&env, &bin, "a", &["cachetool.py", "get", "greeting"]),
        "'from a'"
    );
    assert_eq!(
        python(&env, &bin, "a", &["cachetool.py", "clear"]),
        "cleared"
    );
    assert_eq!(
        python(&env, &bin, "a", &["cachetool.py", "get", "greeting"]),
        "None"
    );
    assert_eq!(
        python(&env, &bin, "b", &["cachetool.py", "get", "greeting"]),
        "'from b'"
    );
    // The worker of b never crashed on its redis (kombu's NOPERM made it crash-loop).
    let services = env.services("b");
    let worker = services.iter().find(|s| s["name"] == "worker").unwrap();
    assert_eq!(worker["restarts"], 0, "{worker}");

    for w in ["a", "b"] {
        env.ok(&["remove", w]);
    }
    env.assert_nothing_left(&["a", "b"]);
}

#[test]
fn a_celery_app_runs_unchanged_in_two_worlds_each_with_a_redis_server_of_its_own() {
    celery_in_two_worlds("", &[]);
}

#[test]
fn a_celery_app_runs_unchanged_in_two_worlds_on_a_database_each_of_an_admin_url_server() {
    let server = RedisServer::start();
    celery_in_two_worlds(
        "admin_url = \"${env.REDIS_ADMIN}\"",
        &[("REDIS_ADMIN", server.admin_url.as_str())],
    );
    assert!(
        !server.users().iter().any(|u| u.starts_with("bk_")),
        "{:?}",
        server.users()
    );
}
