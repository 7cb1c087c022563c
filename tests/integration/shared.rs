//! `shared = true`: one instance of a service for all the worlds of a project, started with
//! the first world that uses it and stopped after the last.

use std::time::Duration;

use crate::harness::*;
use crate::pg_server::PgServer;

fn mail_config() -> String {
    format!(
        r#"
[project]
name = "mailer"
{{range}}

[services.mail]
cmd = "{SERVE}"
url = true
shared = true

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["mail"]
env = {{ MAIL_URL = "${{mail.url}}", MAIL_PORT = "${{mail.port}}" }}
"#
    )
}

/// A service of a world in `binky status NAME --json`.
fn service(env: &Env, world: &str, name: &str) -> serde_json::Value {
    env.services(world)
        .into_iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {world}'s status"))
}

/// The project's shared world in `binky status --json`, if it is there.
fn shared_world(env: &Env) -> Option<serde_json::Value> {
    env.status()["worlds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == "@shared")
        .cloned()
}

fn mail_log(env: &Env) -> String {
    std::fs::read_to_string(env.home.join("logs/mailer/@shared/mail.log")).unwrap_or_default()
}

#[test]
fn a_shared_service_runs_once_for_three_worlds_and_stops_after_the_last_goes_down() {
    let env = Env::new(&mail_config());
    for w in ["w1", "w2", "w3"] {
        env.ok(&["up", w]);
    }
    // One process: every world's status shows the same pid and port, marked shared.
    let mail = service(&env, "w1", "mail");
    assert_eq!(mail["shared"], true, "{mail}");
    let pid = mail["pid"].as_u64().expect("mail runs") as u32;
    let port = mail["ports"][""].as_u64().unwrap() as u16;
    for w in ["w2", "w3"] {
        let m = service(&env, w, "mail");
        assert_eq!(
            (m["pid"].as_u64(), m["ports"][""].as_u64()),
            (Some(pid as u64), Some(port as u64)),
            "{w}: {m}"
        );
    }
    assert_eq!(
        env.our_processes().len(),
        4,
        "one mail and three apis: {:?}",
        env.our_processes()
    );
    // It runs in the shared world, listed under the project, in the main checkout.
    let shared = shared_world(&env).expect("@shared in status");
    assert_eq!(shared["project"], "mailer");
    assert_eq!(
        served_env(port)["BINKY_WORKTREE_PATH"],
        env.repo.display().to_string()
    );
    // Every world's env points at it, and each world's URL of it routes to it.
    for w in ["w1", "w2", "w3"] {
        let api = served_env(env.port_of(w, "api"));
        assert_eq!(api["MAIL_PORT"], port.to_string(), "{w}");
        assert_eq!(api["MAIL_URL"], format!("http://localhost:{port}"), "{w}");
        assert_eq!(env.port_of(w, "mail"), port);
        let answer = through_proxy(env.proxy_port(), &format!("mail.{w}.mailer.localhost"), "/")
            .expect("the proxy answers");
        assert_eq!(status_code(&answer), 200, "{answer}");
        assert_eq!(body_json(&answer).unwrap()["PORT"], port.to_string());
    }
    // Its log shows one start.
    let log = mail_log(&env);
    assert_eq!(log.matches("--- binky ").count(), 1, "{log}");
    assert_eq!(log.matches("listening on").count(), 1, "{log}");
    let via_world = env.ok(&["logs", "w2", "mail"]);
    assert!(
        via_world.contains(&format!("listening on {port}")),
        "{via_world}"
    );

    // `binky check` of a file that defines it otherwise says the next `up` replaces it.
    let edited = mail_config().replace(
        "url = true\nshared",
        "url = true\nrestart = \"always\"\nshared",
    );
    let path = env.dir.path().join("other.toml");
    std::fs::write(&path, edited.replace("{range}", &env.range())).unwrap();
    let check = env.ok(&["check", path.to_str().unwrap()]);
    assert!(
        check.contains(
            "services.mail: mail is shared, and the project's worlds run another definition"
        ),
        "{check}"
    );
    let same = env.ok(&["check"]);
    assert!(!same.contains("another definition"), "{same}");

    // Two of the three go down: it keeps running for the third.
    env.ok(&["down", "w1"]);
    env.ok(&["down", "w2"]);
    assert!(alive(pid), "mail stopped while w3 uses it");
    assert_eq!(
        service(&env, "w3", "mail")["pid"].as_u64(),
        Some(pid as u64)
    );
    // The third goes down: it stops; its port is kept.
    env.ok(&["down", "w3"]);
    wait_until("mail stopped", Duration::from_secs(15), || !alive(pid));
    wait_until("no process left", Duration::from_secs(15), || {
        env.our_processes().is_empty()
    });
    let idle = env.ok(&["status", "@shared"]);
    assert!(idle.contains(&format!(":{port}")), "{idle}");
    // The next world up starts it again, on the same port.
    env.ok(&["up", "w2"]);
    let again = service(&env, "w2", "mail");
    assert_eq!(again["ports"][""].as_u64(), Some(port as u64));
    assert_ne!(again["pid"].as_u64(), Some(pid as u64));

    // `binky reload @shared` restarts it, on its port.
    env.ok(&["reload", "@shared"]);
    let reloaded = service(&env, "w2", "mail");
    assert_eq!(reloaded["ports"][""].as_u64(), Some(port as u64));
    assert_ne!(reloaded["pid"], again["pid"]);
    assert_eq!(reloaded["state"], "running");
    let again = reloaded;

    // `binky down` and `remove` of the shared world itself are refused, naming why.
    let out = env.binky(&["down", "@shared"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("shared services of project `mailer`"),
        "{}",
        stderr(&out)
    );

    // Removing one world while others use it leaves it running; the last takes it along.
    let pid = again["pid"].as_u64().unwrap() as u32;
    env.ok(&["remove", "w1"]);
    env.ok(&["remove", "w3"]);
    assert!(alive(pid), "mail stopped while w2 uses it");
    assert!(shared_world(&env).is_some());
    let out = env.ok(&["remove", "w2"]);
    assert!(out.contains("shared services of mailer removed"), "{out}");
    assert!(shared_world(&env).is_none());
    assert!(!alive(pid));
    env.assert_nothing_left(&["w1", "w2", "w3"]);
    assert!(
        !env.home.join("logs/mailer/@shared").exists(),
        "the shared world's logs are left"
    );
}

#[test]
fn shared_services_removed_with_their_worlds_while_the_daemon_is_down_are_torn_down_by_the_next_one(
) {
    let env = Env::new(&mail_config());
    env.ok(&["up", "a"]);
    env.ok(&["up", "b"]);
    let pid = service(&env, "a", "mail")["pid"].as_u64().unwrap() as u32;
    env.ok(&["daemon", "stop"]);
    assert!(alive(pid), "services keep running without the daemon");
    // Both removals are recorded (as `binky remove` writes them) while no daemon runs.
    let store = binky_controllers::store::Store::open(&env.home.join("state.db")).unwrap();
    for w in ["a", "b"] {
        let id = store
            .read(|c| binky_controllers::store::world_by_name(c, "mailer", w))
            .unwrap()
            .unwrap()
            .id;
        store.mark_deleted(id, false).unwrap();
    }
    drop(store);
    assert!(alive(pid));
    env.ok(&["daemon", "start"]);
    wait_until("the shared world is gone", Duration::from_secs(30), || {
        shared_world(&env).is_none()
    });
    env.assert_nothing_left(&["a", "b"]);
    assert!(!alive(pid));
}

#[test]
fn an_edit_of_a_shared_definition_in_one_world_restarts_the_one_instance_for_every_world() {
    let env = Env::new(&mail_config());
    env.ok(&["up", "a"]);
    env.ok(&["up", "b"]);
    let port = env.port_of("b", "mail");
    let before = service(&env, "b", "mail")["pid"].as_u64().unwrap();
    // The last writer wins: a's edit (saved in its worktree) is what every world now runs.
    let edited = mail_config().replace(
        "url = true\nshared = true",
        "url = true\nshared = true\nenv = { GREETING = \"from a\" }",
    );
    std::fs::write(
        env.worktree("a").join("binky.toml"),
        edited.replace("{range}", &env.range()),
    )
    .unwrap();
    wait_until("mail runs a's definition", Duration::from_secs(20), || {
        try_served_env(port).is_some_and(|e| e["GREETING"] == "from a")
    });
    let after = service(&env, "b", "mail");
    assert_ne!(after["pid"].as_u64().unwrap(), before);
    assert_eq!(after["ports"][""].as_u64(), Some(port as u64));
    assert_eq!(env.our_processes().len(), 3, "one mail, two apis");
    // The edit is uncommitted in a's worktree.
    env.ok(&["remove", "a", "--force"]);
    env.ok(&["remove", "b"]);
    env.assert_nothing_left(&["a", "b"]);
}

#[test]
fn up_of_a_world_while_the_shared_services_are_being_removed_waits_and_makes_them_again() {
    let env = Env::new(&mail_config());
    env.ok(&["up", "a"]);
    let old = service(&env, "a", "mail")["pid"].as_u64().unwrap() as u32;
    // a's removal is recorded while no daemon runs: the shared world is marked with it.
    env.ok(&["daemon", "stop"]);
    let store = binky_controllers::store::Store::open(&env.home.join("state.db")).unwrap();
    let a = store
        .read(|c| binky_controllers::store::world_by_name(c, "mailer", "a"))
        .unwrap()
        .unwrap();
    store.mark_deleted(a.id, false).unwrap();
    drop(store);
    // b's up starts the daemon, waits for the old shared world to go, then makes its own.
    let out = env.binky(&["up", "b"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("waiting for the shared services of mailer to be removed first"),
        "{}",
        stderr(&out)
    );
    assert!(!alive(old));
    let mail = service(&env, "b", "mail");
    assert_eq!(mail["state"], "running", "{mail}");
    assert!(shared_world(&env).is_some());
    env.ok(&["remove", "b"]);
    env.assert_nothing_left(&["a", "b"]);
}

fn db_config() -> String {
    format!(
        r#"
[project]
name = "shop"
{{range}}

[services.db]
adapter = "postgres"
admin_url = "${{env.PG_ADMIN}}"
shared = true
migrate = "psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -q -c 'create table if not exists notes (body text)'"

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["db"]
env = {{ DATABASE_URL = "${{db.url}}" }}
"#
    )
}

#[test]
fn a_shared_database_is_one_slice_for_every_world_and_goes_with_the_last_world_removed() {
    let pg = PgServer::start();
    let env = Env::new(&db_config());
    let vars = [("PG_ADMIN", pg.admin_url.as_str())];
    for w in ["a", "b"] {
        let out = env.binky_env(&["up", w], &vars);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    // One slice: both worlds' api get the same address, and see each other's writes.
    assert_eq!(pg.slice_databases().len(), 1, "{:?}", pg.slice_databases());
    let a = served_env(env.port_of("a", "api"))["DATABASE_URL"].clone();
    let b = served_env(env.port_of("b", "api"))["DATABASE_URL"].clone();
    assert_eq!(a, b);
    let url = a.as_str().unwrap();
    pg.query(url, "insert into notes values ('from a')");
    assert_eq!(
        pg.query(url, "select body from notes"),
        vec![vec!["from a".to_owned()]]
    );
    assert_eq!(service(&env, "b", "db")["shared"], true);
    // Down of both keeps it (ports and slices stay while the project uses shared services).
    env.ok(&["down", "a"]);
    env.ok(&["down", "b"]);
    assert_eq!(pg.slice_databases().len(), 1);
    // Removing one keeps it; removing the last drops it.
    env.ok(&["remove", "a"]);
    assert_eq!(pg.slice_databases().len(), 1);
    env.ok(&["remove", "b"]);
    pg.assert_no_slices();
    env.assert_nothing_left(&["a", "b"]);
}
