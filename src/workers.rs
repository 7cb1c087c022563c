//! Job workers binky knows by their command, and the signal each stops on at once.
//!
//! binky stops a service with its `stop_signal` (SIGTERM unless said), then SIGKILL after
//! `stop_grace_period` (5 s). Two common Python workers treat SIGTERM as "finish the job in
//! hand first", so a busy one makes every `binky down`, `reload` and `remove` wait out the
//! whole grace period:
//! - a Celery worker's SIGTERM is its warm shutdown (it waits for running tasks); SIGQUIT
//!   is its documented cold shutdown, at once;
//! - an RQ worker handles only SIGINT and SIGTERM, both as a warm shutdown, and runs each
//!   job in a work horse in a process group of its own, which a signal to the worker's
//!   group does not reach; only a second signal stops it cold. SIGKILL is what stops it at
//!   once (its job is then left to RQ's registry of abandoned jobs, as after a crash).
//!
//! `binky init` writes the signal for a worker it recognises; `binky check` suggests it
//! where `stop_signal` is not set.

/// A worker recognised by its command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Worker {
    /// What it is, for messages (`a Celery worker`).
    pub what: &'static str,
    /// The signal it stops on at once (`SIGQUIT`).
    pub signal: &'static str,
    /// Why, in a few words, for messages.
    pub why: &'static str,
}

const CELERY: Worker = Worker {
    what: "a Celery worker",
    signal: "SIGQUIT",
    why: "on SIGTERM it first finishes the tasks it runs; SIGQUIT is its cold shutdown",
};

const RQ: Worker = Worker {
    what: "an RQ worker",
    signal: "SIGKILL",
    why: "on SIGTERM it first finishes the job it runs (in a work horse a signal to its group does not reach); nothing but a second signal or SIGKILL stops it at once",
};

/// The worker `cmd` starts, if binky knows it: `celery … worker`, `rq worker`, django-rq's
/// `manage.py rqworker`, however the program is reached (a path, `python -m`, `exec`,
/// `uv run`, `poetry run`).
pub fn recognise(cmd: &str) -> Option<Worker> {
    // Each command of a line (`cd app && exec celery …`) on its own.
    for part in cmd.split(['\n', ';', '&', '|']) {
        let words: Vec<&str> = part
            .split_whitespace()
            .map(|w| w.trim_matches(['"', '\'']))
            .map(|w| w.rsplit('/').next().unwrap_or(w))
            // watchfiles restarting Celery on a change (`watchfiles celery.__main__.main
            // --args '-A app worker'`, as project templates' start scripts do).
            .map(|w| {
                if w == "celery.__main__.main" {
                    "celery"
                } else {
                    w
                }
            })
            .collect();
        // `then` as a word after `name`, not as the value of an option (`-A worker`).
        let valued = [
            "-A",
            "--app",
            "-b",
            "--broker",
            "--result-backend",
            "--loader",
            "--config",
            "--workdir",
        ];
        let after = |name: &str, then: &str| {
            words.iter().position(|w| *w == name).is_some_and(|i| {
                (i + 1..words.len()).any(|j| words[j] == then && !valued.contains(&words[j - 1]))
            })
        };
        if after("celery", "worker") {
            return Some(CELERY);
        }
        if after("rq", "worker") || words.contains(&"rqworker") {
            return Some(RQ);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_are_known_however_they_are_started() {
        for cmd in [
            "celery -A proj worker -l info",
            "exec .venv/bin/celery -A proj worker",
            "celery -A proj -E worker",
            "python -m celery --app=proj worker --concurrency=2",
            "cd backend && uv run celery -A app.worker worker",
            "exec watchfiles --filter python celery.__main__.main --args '-A config.celery_app worker -l INFO'",
        ] {
            assert_eq!(recognise(cmd).map(|w| w.signal), Some("SIGQUIT"), "{cmd}");
        }
        for cmd in [
            "rq worker --url $REDIS_URL high default",
            "exec .venv/bin/python manage.py rqworker default",
            "poetry run rq worker --with-scheduler",
        ] {
            assert_eq!(recognise(cmd).map(|w| w.signal), Some("SIGKILL"), "{cmd}");
        }
    }

    #[test]
    fn what_is_not_a_worker_is_left_alone() {
        for cmd in [
            "celery -A proj beat",
            "celery -A worker beat",
            "celery -A proj flower --port=${self.port}",
            "python manage.py runserver 0.0.0.0:$PORT",
            "rq info",
            "echo worker",
            "npm run worker",
        ] {
            assert_eq!(recognise(cmd), None, "{cmd}");
        }
    }
}
