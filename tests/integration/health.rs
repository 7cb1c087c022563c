//! Continuous health: a running service's check runs again every `interval`; `retries`
//! failures in a row make it `unhealthy`, and then binky restarts it (or, with
//! `on_unhealthy = "keep"`, leaves it running and says so). A service restarting in a loop
//! is never ready.

use std::time::Duration;

use crate::harness::*;

/// `api` is healthy while the file `ok` exists in its worktree (its command makes it).
fn checked(on_unhealthy: &str) -> String {
    format!(
        r#"
[project]
name = "acme"
{{range}}

[services.api]
cmd = "touch ok && {SERVE}"
url = "api"
health = {{ cmd = "test -f ok", interval = "200ms", retries = 2, on_unhealthy = "{on_unhealthy}" }}
"#
    )
}

fn api(env: &Env) -> serde_json::Value {
    env.services("w")
        .into_iter()
        .find(|s| s["name"] == "api")
        .expect("api in status")
}

fn event_kinds(env: &Env) -> Vec<String> {
    let events: Vec<serde_json::Value> =
        serde_json::from_str(&env.ok(&["events", "w", "--json", "-n", "200"])).unwrap();
    events
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_service_that_turns_unhealthy_is_restarted_and_comes_back() {
    let env = Env::new(&checked("restart"));
    env.ok(&["up", "w"]);
    let first = env.pid_of("w", "api").unwrap();
    std::fs::remove_file(env.worktree("w").join("ok")).unwrap();
    wait_until("api restarted", Duration::from_secs(20), || {
        let a = api(&env);
        a["pid"].as_u64().is_some_and(|p| p as u32 != first) && a["ready"] == true
    });
    assert!(!alive(first), "the unhealthy process was left running");
    let a = api(&env);
    assert_eq!(a["state"], "running");
    assert!(a["restarts"].as_u64().unwrap() >= 1, "{a}");
    let kinds = event_kinds(&env);
    assert!(kinds.contains(&"unhealthy".to_owned()), "{kinds:?}");
    assert!(kinds.contains(&"restart".to_owned()), "{kinds:?}");
    // `ok` is the service's own file, not a change of the user's to keep.
    env.ok(&["remove", "w", "--force"]);
}

#[test]
fn a_kept_unhealthy_service_keeps_running_shown_unhealthy_until_it_recovers() {
    let env = Env::new(&checked("keep"));
    env.ok(&["up", "w"]);
    let pid = env.pid_of("w", "api").unwrap();
    std::fs::remove_file(env.worktree("w").join("ok")).unwrap();
    wait_until("api unhealthy", Duration::from_secs(20), || {
        api(&env)["state"] == "unhealthy"
    });
    let a = api(&env);
    assert_eq!(a["ready"], false);
    assert!(
        a["message"]
            .as_str()
            .unwrap()
            .contains("health check failed"),
        "{a}"
    );
    assert_eq!(
        a["pid"].as_u64(),
        Some(pid as u64),
        "kept: the same process"
    );
    let world = env.status()["worlds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == "w")
        .cloned()
        .unwrap();
    assert_eq!(world["state"], "failed", "{world}");
    let text = env.ok(&["status"]);
    assert!(text.contains("unhealthy"), "{text}");
    std::fs::write(env.worktree("w").join("ok"), "").unwrap();
    wait_until("api healthy again", Duration::from_secs(20), || {
        api(&env)["ready"] == true
    });
    assert_eq!(env.pid_of("w", "api"), Some(pid));
    let kinds = event_kinds(&env);
    assert!(
        kinds.contains(&"unhealthy".to_owned()) && kinds.contains(&"healthy".to_owned()),
        "{kinds:?}"
    );
    env.ok(&["remove", "w", "--force"]);
}

#[test]
fn a_worker_restarting_in_a_loop_is_never_shown_ready() {
    let env = Env::new(
        r#"
[project]
name = "acme"
{range}

[services.worker]
cmd = "sleep 1; exit 1"
restart = "always"
"#,
    );
    env.binky(&["up", "w"]);
    let mut samples = 0;
    let mut ready_while_restarting = Vec::new();
    wait_until("three restarts", Duration::from_secs(30), || {
        let w = env
            .services("w")
            .into_iter()
            .find(|s| s["name"] == "worker")
            .unwrap();
        samples += 1;
        if w["restarts"].as_u64().unwrap_or(0) >= 1 && w["ready"] == true {
            ready_while_restarting.push(w.clone());
        }
        w["restarts"].as_u64().unwrap_or(0) >= 3
    });
    assert!(samples > 3, "status was sampled {samples} times");
    assert!(
        ready_while_restarting.is_empty(),
        "shown ready while crash-looping: {ready_while_restarting:#?}"
    );
    env.ok(&["remove", "w"]);
}

/// A health endpoint slower than a fixed probe time, but within the service's health
/// `timeout`, is healthy: each check may take that long to answer (a dev server under load
/// answered in 3 s and was restarted three times over, each restart adding to the load).
#[test]
fn a_check_answered_within_the_health_timeout_is_healthy_however_slow() {
    let env = Env::new(
        r#"
[project]
name = "slowcheck"
{range}

[services.api]
cmd = "exec python3 slow.py ${self.port}"
url = true
health = { http = "/health", timeout = "20s", interval = "500ms", retries = 1 }
"#,
    );
    // Answers each request after 3 s, and counts the health checks it answered.
    std::fs::write(
        env.repo.join("slow.py"),
        r#"
import http.server, sys, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        time.sleep(3)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")
        with open("answered", "a") as f:
            f.write("x")
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#,
    )
    .unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "slow server"]);
    env.ok(&["up", "w"]);
    let pid = env.pid_of("w", "api").unwrap();
    let answered = env.worktree("w").join("answered");
    // Checked again and again while running (each answered in 3 s)...
    wait_until("three checks answered", Duration::from_secs(60), || {
        std::fs::read_to_string(&answered).is_ok_and(|t| t.len() >= 3)
    });
    // ...and never judged unhealthy nor restarted.
    assert_eq!(env.pid_of("w", "api"), Some(pid));
    let kinds = event_kinds(&env);
    assert!(!kinds.contains(&"unhealthy".to_owned()), "{kinds:?}");
    assert_eq!(api(&env)["state"], "running");
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}

/// `slow` listens on its port only after `LISTEN_DELAY` seconds.
const SLOW: &str = r#"
[project]
name = "acme"
{range}

[services.slow]
cmd = "exec python3 server.py ${self.port}"
url = true
env = { LISTEN_DELAY = "3" }
"#;

/// A service without `health` may take as long to listen as `binky up --timeout` waits,
/// however much longer than the daemon's own wait for a world whose command named none
/// (here 1 s: a flower that took 36 s no longer fails an `up` that waits 60 s).
#[test]
fn a_port_that_opens_within_the_up_timeout_is_not_a_failure() {
    let env = Env::new(SLOW);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut config = binky::daemon::DaemonConfig::new(binky::paths::Home::at(env.home.clone()));
    config.port_wait = Duration::from_secs(1);
    let daemon = rt.spawn(binky::daemon::run(config, async {
        let _ = stopped.await;
    }));
    wait_until("the daemon", Duration::from_secs(10), || {
        env.binky(&["daemon", "status"]).status.success()
    });
    let out = env.binky(&["up", "w", "--timeout", "60s"]);
    assert!(
        out.status.success(),
        "exit {:?}: {}{}",
        out.status.code(),
        stdout(&out),
        stderr(&out)
    );
    assert!(stdout(&out).contains("w is up"), "{}", stdout(&out));
    assert!(listening(env.port_of("w", "slow")));
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
    stop.send(()).unwrap();
    rt.block_on(daemon).unwrap().unwrap();
}

/// `deaf` never listens; `astray` listens, on a port that is not the one binky gave it.
#[test]
fn up_and_status_tell_not_listening_yet_from_listening_on_another_port() {
    let env = Env::new("");
    let elsewhere = env.ports.low + 41;
    env.write_config(&format!(
        r#"
[project]
name = "acme"
{{range}}

[services.deaf]
cmd = "exec sleep 1000"
url = true

[services.astray]
cmd = "exec python3 server.py {elsewhere}"
url = true
"#
    ));
    env.git(&["commit", "-qam", "two services"]);
    let out = env.binky(&["up", "w", "--timeout", "4s"]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let astray = env.port_of("w", "astray");
    let deaf = env.port_of("w", "deaf");
    let said = stderr(&out);
    assert!(
        said.contains(&format!("deaf: not listening yet on its port {deaf}")),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "astray: listening on port {elsewhere}, not on its port {astray}: make its cmd listen on ${{self.port}}"
        )),
        "{said}"
    );
    let status = env.ok(&["status", "w"]);
    assert!(
        status.contains(&format!("not listening yet on its port {deaf}")),
        "{status}"
    );
    assert!(
        status.contains(&format!(
            "listening on port {elsewhere}, not on its port {astray}"
        )),
        "{status}"
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
