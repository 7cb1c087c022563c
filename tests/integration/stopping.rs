//! Stopping: a service's `stop_signal` reaches its process and its `stop_grace_period`
//! bounds the wait; `down` and `remove` signal a world's services at once unless one
//! stops after its dependents.

use std::time::Duration;

use crate::harness::*;

/// A Celery-like worker: on SIGQUIT it stops at once; on SIGTERM it finishes its work
/// first (3 s), as a warm shutdown does.
const WORKER_PY: &str = r#"
import os, signal, sys, time
def quit_(n, f):
    print("got SIGQUIT: stopping at once", flush=True)
    os._exit(0)
def term(n, f):
    print("got SIGTERM: warm shutdown, 3 s", flush=True)
    time.sleep(3)
    print("warm shutdown done", flush=True)
    os._exit(0)
signal.signal(signal.SIGQUIT, quit_)
signal.signal(signal.SIGTERM, term)
print("ready", flush=True)
while True:
    time.sleep(3600)
"#;

/// A world of one `worker` running [`WORKER_PY`], with `stop` (its stop keys).
fn worker_env(stop: &str) -> Env {
    let env = Env::new(&format!(
        r#"
[project]
name = "stopping"
{{range}}

[services.worker]
cmd = "exec python3 worker.py"
{stop}
"#
    ));
    std::fs::write(env.repo.join("worker.py"), WORKER_PY).unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "worker"]);
    env
}

/// `binky logs w SVC`.
fn log_of(env: &Env, svc: &str) -> String {
    env.ok(&["logs", "w", svc, "-n", "100"])
}

/// How many runs of `svc` have said `ready` (their signal handlers are in place).
fn readies(env: &Env, svc: &str) -> usize {
    log_of(env, svc)
        .lines()
        .filter(|l| l.trim_end().ends_with("ready"))
        .count()
}

/// Up, and wait until the worker's `run`th start has its signal handlers in place.
fn up_worker(env: &Env, run: usize) {
    env.ok(&["up", "w"]);
    wait_until("the worker to be ready", Duration::from_secs(20), || {
        readies(env, "worker") >= run
    });
}

#[test]
fn a_services_stop_signal_reaches_it_and_it_stops_at_once_on_down_and_remove() {
    let env = worker_env("stop_signal = \"QUIT\"");
    up_worker(&env, 1);
    let pid = env.pid_of("w", "worker").unwrap();
    env.ok(&["down", "w"]);
    assert!(!alive(pid));
    let log = log_of(&env, "worker");
    assert!(log.contains("got SIGQUIT: stopping at once"), "{log}");
    assert!(!log.contains("SIGTERM"), "{log}");
    let events = env.ok(&["events", "w"]);
    assert!(
        events.contains("stopped worker (binky down): it exited")
            && events.contains("after SIGQUIT"),
        "{events}"
    );
    // `remove` the same: the worker goes on QUIT, not at the end of a grace period.
    up_worker(&env, 2);
    env.ok(&["remove", "w"]);
    let events = env.ok(&["events", "w"]);
    let removed = events
        .lines()
        .find(|l| l.contains("stopped worker (binky remove)"))
        .unwrap_or_else(|| panic!("{events}"));
    assert!(
        removed.contains("exited") && removed.contains("after SIGQUIT"),
        "{removed}"
    );
    env.assert_nothing_left(&["w"]);
}

#[test]
fn without_a_stop_signal_sigterm_is_sent_and_the_stop_grace_period_bounds_the_wait() {
    let env = worker_env("stop_grace_period = \"1s\"");
    up_worker(&env, 1);
    let pid = env.pid_of("w", "worker").unwrap();
    env.ok(&["down", "w"]);
    assert!(!alive(pid));
    let log = log_of(&env, "worker");
    assert!(log.contains("got SIGTERM: warm shutdown"), "{log}");
    // Killed when its 1 s were up, before its 3 s of warm shutdown.
    assert!(!log.contains("warm shutdown done"), "{log}");
    let events = env.ok(&["events", "w"]);
    assert!(
        events.contains(
            "stopped worker (binky down): killed (SIGKILL), still running 1.0s after SIGTERM"
        ),
        "{events}"
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// On SIGTERM, each service says whether `other` still runs, then takes 1.5 s to go.
const SAYS_PY: &str = r#"
import os, signal, sys, time
me, other = sys.argv[1], sys.argv[2]
os.makedirs("pids", exist_ok=True)
with open(f"pids/{me}", "w") as f:
    f.write(str(os.getpid()))
def runs(name):
    try:
        pid = open(f"pids/{name}").read().strip()
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZXx"
def term(n, f):
    print(f"stopping; {other} " + ("still runs" if runs(other) else "is gone"), flush=True)
    time.sleep(1.5)
    os._exit(0)
signal.signal(signal.SIGTERM, term)
print("ready", flush=True)
while True:
    time.sleep(3600)
"#;

/// `web` depends on `api`; `api` has `api_stop` (its stop keys).
fn pair_env(api_stop: &str) -> Env {
    let env = Env::new(&format!(
        r#"
[project]
name = "pair"
{{range}}

[services.api]
cmd = "exec python3 says.py api web"
{api_stop}

[services.web]
cmd = "exec python3 says.py web api"
depends_on = ["api"]
"#
    ));
    std::fs::write(env.repo.join("says.py"), SAYS_PY).unwrap();
    std::fs::write(env.repo.join(".gitignore"), "pids/\n").unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "says"]);
    env.ok(&["up", "w"]);
    wait_until("both ready", Duration::from_secs(20), || {
        readies(&env, "api") >= 1 && readies(&env, "web") >= 1
    });
    env
}

#[test]
fn down_signals_a_service_and_the_services_depending_on_it_at_once() {
    let env = pair_env("");
    env.ok(&["down", "w"]);
    let api = log_of(&env, "api");
    assert!(api.contains("stopping; web still runs"), "{api}");
    let web = log_of(&env, "web");
    assert!(web.contains("stopping; api still runs"), "{web}");
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_service_with_stop_after_dependents_is_signalled_once_they_are_gone() {
    let env = pair_env("stop_after_dependents = true");
    env.ok(&["down", "w"]);
    let api = log_of(&env, "api");
    assert!(api.contains("stopping; web is gone"), "{api}");
    let web = log_of(&env, "web");
    assert!(web.contains("stopping; api still runs"), "{web}");
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
