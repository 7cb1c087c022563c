//! A world whose database server is down is not ready: a managed server killed behind the
//! daemon's back, one stopped with `binky servers stop`, and a server binky.toml names that
//! stops answering. Each time `binky status` says so at once, the world's condition names
//! the server and the fix, and the world is ready again once the server is back (started
//! by the daemon, by the next `binky up`, or by whoever runs it).

use std::time::Duration;

use crate::harness::*;
use crate::pg_server::{pg_bin_dir, psql, PgServer};

/// A world whose `api` uses the slice `db` of a PostgreSQL server: binky's own (`admin`
/// none), or the one `$PG_ADMIN` names.
fn config(admin: Option<&str>) -> String {
    let admin = admin
        .map(|a| format!("admin_url = \"{a}\"\n"))
        .unwrap_or_default();
    format!(
        r#"
[project]
name = "downs"
{{range}}

[services.db]
adapter = "postgres"
{admin}
[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["db"]
env = {{ DATABASE_URL = "${{db.url}}" }}
"#
    )
}

/// World `w` as `binky status --json w` shows it.
fn world(env: &Env) -> serde_json::Value {
    serde_json::from_str(&env.ok(&["status", "--json", "w"])).unwrap()
}

/// The line of service `name` in `view`.
fn service<'a>(view: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    view["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no service {name}: {view}"))
}

/// The world's `SlicesReady` condition.
fn slices_ready(view: &serde_json::Value) -> serde_json::Value {
    view["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "SlicesReady")
        .cloned()
        .unwrap_or_default()
}

/// The managed PostgreSQL's pid and port, as `binky servers --json` shows them.
fn managed_pg(env: &Env) -> (Option<u32>, u16) {
    let v: serde_json::Value = serde_json::from_str(&env.ok(&["servers", "--json"])).unwrap();
    let pg = v
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "postgres")
        .cloned()
        .expect("a managed postgres");
    (
        pg["pid"].as_u64().map(|p| p as u32),
        pg["port"].as_u64().unwrap() as u16,
    )
}

/// Sends SIGCONT to a process it was given when it goes (a test that fails while it has
/// stopped the daemon or a server leaves neither stopped).
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        signal(self.0, 18);
    }
}

#[test]
fn a_world_whose_managed_server_was_stopped_is_not_ready_says_why_and_its_next_up_starts_it() {
    let bin = pg_bin_dir().expect("postgresql installed (./scripts/test installs it)");
    let env = Env::new(&config(None));
    env.ok(&["up", "w"]);
    let url = env.env_of("w")["DB_URL"].as_str().unwrap().to_owned();
    psql(
        &bin,
        &url,
        "create table notes (body text); insert into notes values ('kept')",
    )
    .unwrap();
    assert_eq!(world(&env)["state"], "ready");

    let out = env.ok(&["servers", "stop"]);
    assert!(out.contains("stopped postgres"), "{out}");
    // At once, before the daemon has said anything: not ready, and the slice's line says
    // why and what starts it again.
    let v = world(&env);
    assert_eq!(v["state"], "failed", "{v}");
    let db = service(&v, "db");
    assert_eq!(
        (&db["state"], &db["ready"]),
        (&"stopped".into(), &false.into()),
        "{v}"
    );
    let said = db["message"].as_str().unwrap();
    assert!(
        said.contains("`binky servers stop` stopped the managed postgres server")
            && said.contains("`binky up w` starts it again"),
        "{said}"
    );
    // The daemon says it in the world's condition, and leaves the server stopped: the
    // person stopped it.
    wait_until(
        "the world's condition names the stopped server and the fix",
        Duration::from_secs(30),
        || slices_ready(&world(&env))["reason"] == "ServerStopped",
    );
    let c = slices_ready(&world(&env));
    assert_eq!(c["stalled"], true, "{c}");
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains("db: `binky servers stop` stopped the managed postgres server"),
        "{c}"
    );
    let text = env.ok(&["status"]);
    assert!(
        text.contains("w                    failed")
            && text.contains("`binky up w` starts it again"),
        "{text}"
    );
    let events = env.ok(&["events", "w"]);
    assert!(events.contains("server_stopped"), "{events}");
    // A wait does not sit out its timeout: it says what to do.
    let out = env.binky(&["wait", "w", "--timeout", "60s"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("`binky up w` starts it again"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        managed_pg(&env).0,
        None,
        "the server was started again: {}",
        env.ok(&["servers"])
    );
    assert!(
        psql(&bin, &url, "select 1").is_err(),
        "the stopped server answers"
    );

    // The next `binky up` starts it: ready again, with the data.
    env.ok(&["up", "w"]);
    let v = world(&env);
    assert_eq!(v["state"], "ready", "{v}");
    assert_eq!(service(&v, "db")["state"], "ready", "{v}");
    assert_eq!(
        psql(&bin, &url, "select body from notes").unwrap(),
        vec![vec!["kept".to_owned()]]
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_world_whose_managed_server_was_killed_is_not_ready_until_binky_has_started_it_again() {
    pg_bin_dir().expect("postgresql installed (./scripts/test installs it)");
    let env = Env::new(&config(None));
    env.ok(&["up", "w"]);
    let (Some(server), port) = managed_pg(&env) else {
        panic!(
            "the managed postgres does not run: {}",
            env.ok(&["servers"])
        );
    };
    // Behind the daemon's back: it is held still while the server is killed and its port
    // taken, so that what a reader sees before the daemon notices can be looked at, and
    // the daemon cannot start the server again at once.
    let daemon = env.daemon_pid().expect("the daemon runs");
    signal(daemon, 19);
    let resume = Resume(daemon);
    signal(server, 9);
    wait_until("the server is gone", Duration::from_secs(10), || {
        !binky_testkit::procs::alive(server)
    });
    let v = world(&env);
    assert_eq!(v["state"], "starting", "{v}");
    let db = service(&v, "db");
    assert_eq!(
        (&db["state"], &db["ready"]),
        (&"down".into(), &false.into()),
        "{v}"
    );
    assert!(
        db["message"].as_str().unwrap().contains(&format!(
            "the managed postgres server it lives on (127.0.0.1:{port}) stopped running; binky is starting it again"
        )),
        "{v}"
    );
    let mut taken = None;
    wait_until(
        "the server's port is free to take",
        Duration::from_secs(10),
        || {
            taken = std::net::TcpListener::bind(("127.0.0.1", port)).ok();
            taken.is_some()
        },
    );
    drop(resume);

    // The daemon notices, cannot start it on its port, and the world says so.
    let mut last = serde_json::Value::Null;
    let said =
        binky_testkit::wait::wait_for(Duration::from_secs(30), Duration::from_millis(100), || {
            last = world(&env);
            let c = slices_ready(&last);
            c["reason"] == "ServerDown"
                && c["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(&format!("its port {port} is taken")))
        });
    assert!(
        said,
        "the world's condition does not say the server is down and why it is not back: {last}\n{}",
        env.ok(&["events", "w"])
    );
    let v = world(&env);
    assert_eq!(v["state"], "starting", "{v}");
    assert_eq!(slices_ready(&v)["stalled"], false, "binky is on it: {v}");
    assert!(
        env.ok(&["status"])
            .contains("SlicesReady (ServerDown): db: the managed postgres server"),
        "{}",
        env.ok(&["status"])
    );
    // The port is free again: the daemon starts the server on it, and the world is ready.
    drop(taken);
    wait_until("the world is ready again", Duration::from_secs(60), || {
        world(&env)["state"] == "ready"
    });
    let events = env.ok(&["events", "w"]);
    assert!(
        events.contains("server_down") && events.contains("server_back"),
        "{events}"
    );
    let (again, same_port) = managed_pg(&env);
    assert!(
        again.is_some_and(|p| p != server),
        "{}",
        env.ok(&["servers"])
    );
    assert_eq!(same_port, port);
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_world_whose_named_server_stops_answering_is_not_ready_and_says_which_until_it_answers() {
    let pg = PgServer::start();
    let env = Env::new(&config(Some("${env.PG_ADMIN}")));
    let vars = [("PG_ADMIN", pg.admin_url.as_str())];
    let out = env.binky_env(&["up", "w"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    // SIGSTOP: connections hang, as with a server that went away.
    signal(pg.pid, 19);
    let resume = Resume(pg.pid);
    wait_until(
        "the world says its server does not answer",
        Duration::from_secs(60),
        || slices_ready(&world(&env))["reason"] == "ServerUnavailable",
    );
    let v = world(&env);
    assert_eq!(v["state"], "starting", "{v}");
    let db = service(&v, "db");
    assert_eq!(
        (&db["state"], &db["ready"]),
        (&"down".into(), &false.into()),
        "{v}"
    );
    let said = slices_ready(&v)["message"].as_str().unwrap().to_owned();
    assert!(
        said.contains("db: its postgres server ")
            && said.contains(&format!("://127.0.0.1:{} does not answer", pg.port))
            && said.contains("start that server"),
        "{said}"
    );
    assert!(!env.ok(&["status", "w"]).contains(&pg.password));
    drop(resume);
    wait_until("the world is ready again", Duration::from_secs(60), || {
        world(&env)["state"] == "ready"
    });
    assert_eq!(service(&world(&env), "db")["state"], "ready");
    let events = env.ok(&["events", "w"]);
    assert!(
        events.contains("server_unreachable") && events.contains("server_back"),
        "{events}"
    );
    let out = env.binky_env(&["remove", "w"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    pg.assert_no_slices();
    env.assert_nothing_left(&["w"]);
}
