//! Worlds with a Redis slice, end to end through the real binary: each world uses Redis the
//! ordinary way (keys without a prefix, `INFO`, `SCAN`, `FLUSHDB`, pub/sub) and cannot
//! reach another world's data — on a redis-server of its own (no `admin_url`), on a
//! database of its own (an `admin_url` server), or, with `isolation = "prefix"`, under a
//! key prefix; teardown that leaves nothing.

use std::time::Duration;

use redis::Value;

use crate::harness::*;
use crate::redis_server::{assert_noperm, connect, run, RedisServer};

/// A project with a `cache` redis service (`settings` are its extra lines) and an `api`
/// that serves its environment.
fn config(settings: &str) -> String {
    format!(
        r#"
[project]
name = "cachey"
{{range}}

[services.cache]
adapter = "redis"
{settings}

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["cache"]
env = {{ REDIS_URL = "${{cache.url}}", PREFIX = "${{cache.prefix}}", DB = "${{cache.database}}" }}
"#
    )
}

/// The `cache` slice's name in world `w` of `env`'s home.
fn slice_of(env: &Env, w: &str) -> String {
    env.slice_name("cachey", w, "cache")
}

/// The address the world's api got.
fn url_of(env: &Env, w: &str) -> String {
    served_env(env.port_of(w, "api"))["REDIS_URL"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// `binky servers --json`'s row of world `w`'s own redis server.
fn own_server(env: &Env, w: &str) -> Option<serde_json::Value> {
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&env.ok(&["servers", "--json"])).unwrap();
    let key = format!("redis/{}", slice_of(env, w));
    rows.into_iter().find(|r| r["kind"] == key.as_str())
}

/// The pid of world `w`'s own redis server while it runs.
fn own_pid(env: &Env, w: &str) -> Option<u32> {
    let row = own_server(env, w)?;
    (row["state"] == "running")
        .then(|| row["pid"].as_u64().map(|p| p as u32))
        .flatten()
        .filter(|p| alive(*p))
}

/// Where world `w`'s own server keeps its files.
fn own_dir(env: &Env, w: &str) -> std::path::PathBuf {
    env.home.join("servers/redis/worlds").join(slice_of(env, w))
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

/// What an app does with Redis without knowing about worlds: keys without a prefix,
/// `INFO`, `SCAN`, `KEYS`, `DBSIZE`, a transaction, a script, pub/sub on a plain channel.
/// Leaves `tag` in `owner` (and nothing else).
fn use_it_the_ordinary_way(url: &str, tag: &str) {
    let mut c = connect(url);
    run(&mut c, &["SET", "owner", tag]).expect("SET without a prefix");
    run(&mut c, &["RPUSH", "celery", "job"]).expect("RPUSH");
    assert_eq!(run(&mut c, &["GET", "owner"]).unwrap(), bulk(tag));
    let info: String = redis::cmd("INFO").query(&mut c).expect("INFO");
    assert!(info.contains("redis_version"), "{info}");
    let (_, keys): (u64, Vec<String>) = redis::cmd("SCAN")
        .arg(0)
        .arg("COUNT")
        .arg(100)
        .query(&mut c)
        .expect("SCAN");
    assert!(keys.contains(&"owner".to_owned()), "{keys:?}");
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).expect("KEYS");
    assert_eq!(keys.len(), 2, "{keys:?}");
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).expect("DBSIZE");
    assert_eq!(n, 2);
    let (x,): (i64,) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("hits")
        .query(&mut c)
        .expect("MULTI/EXEC");
    assert_eq!(x, 1);
    let from_script: String = redis::cmd("EVAL")
        .arg("return redis.call('GET', 'owner')")
        .arg(0)
        .query(&mut c)
        .expect("EVAL");
    assert_eq!(from_script, tag);
    run(&mut c, &["DEL", "hits", "celery"]).expect("DEL");
    // Pub/sub on a channel and a pattern, as kombu's pidbox and events do.
    let mut listener = connect(url);
    listener
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut sub = listener.as_pubsub();
    sub.subscribe("events").expect("SUBSCRIBE");
    sub.psubscribe("/0.celeryev/*").expect("PSUBSCRIBE");
    let receivers: i64 = redis::cmd("PUBLISH")
        .arg("/0.celeryev/worker.heartbeat")
        .arg(tag)
        .query(&mut c)
        .expect("PUBLISH");
    assert_eq!(receivers, 1);
    let msg = sub.get_message().expect("a message");
    assert_eq!(msg.get_payload::<String>().unwrap(), tag);
}

#[test]
fn two_worlds_each_get_a_redis_server_of_their_own_and_use_it_the_ordinary_way() {
    let env = Env::new(&config(""));
    for w in ["a", "b"] {
        env.ok(&["up", w]);
    }
    let (url_a, url_b) = (url_of(&env, "a"), url_of(&env, "b"));
    let (pid_a, pid_b) = (own_pid(&env, "a").unwrap(), own_pid(&env, "b").unwrap());
    assert_ne!(pid_a, pid_b);
    for (url, pid) in [(&url_a, pid_a), (&url_b, pid_b)] {
        // A plain URL any client takes: the default user, database 0, on loopback.
        assert!(
            url.starts_with("redis://default:")
                && url.contains("@127.0.0.1:")
                && url.ends_with("/0"),
            "{url}"
        );
        let secret = binky_controllers::url::password_decoded(url).unwrap();
        let cmdline =
            String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap())
                .into_owned();
        assert!(
            !cmdline.contains(&secret),
            "a secret on the command line: {cmdline}"
        );
    }
    assert_ne!(url_a, url_b);
    use_it_the_ordinary_way(&url_a, "a");
    use_it_the_ordinary_way(&url_b, "b");

    // Neither reaches the other: its password does not open the other's server, a message
    // published in one is heard in that one only, and FLUSHDB empties only its own.
    let secret_a = binky_controllers::url::password_decoded(&url_a).unwrap();
    let port_b = own_server(&env, "b").unwrap()["port"].as_u64().unwrap();
    let a_at_b = format!("redis://default:{secret_a}@127.0.0.1:{port_b}/0");
    let refused = redis::Client::open(a_at_b.as_str())
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
        .and_then(|mut c| run(&mut c, &["GET", "owner"]));
    assert!(refused.is_err(), "a's password opened b's server");
    let mut b_listener = connect(&url_b);
    b_listener
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut b_sub = b_listener.as_pubsub();
    b_sub.subscribe("events").unwrap();
    let heard: i64 = redis::cmd("PUBLISH")
        .arg("events")
        .arg("from a")
        .query(&mut connect(&url_a))
        .unwrap();
    assert_eq!(heard, 0, "a's message reached a subscriber");
    assert!(b_sub.get_message().is_err(), "b heard a's message");
    drop(b_sub);
    run(&mut connect(&url_a), &["FLUSHDB"]).expect("FLUSHDB in a");
    assert_eq!(
        run(&mut connect(&url_a), &["DBSIZE"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(
        run(&mut connect(&url_b), &["GET", "owner"]).unwrap(),
        bulk("b")
    );
    let servers = env.ok(&["servers"]);
    assert!(
        servers.contains(&format!("redis/{}", slice_of(&env, "a"))) && servers.contains("running"),
        "{servers}"
    );

    // Down: its server stops (its snapshot written); up: the data is back.
    run(&mut connect(&url_a), &["SET", "kept", "across down and up"]).unwrap();
    env.ok(&["down", "a"]);
    assert!(!alive(pid_a), "a's redis outlived binky down");
    assert!(own_dir(&env, "a").join("data/dump.rdb").is_file());
    assert_eq!(
        run(&mut connect(&url_b), &["GET", "owner"]).unwrap(),
        bulk("b")
    );
    env.ok(&["up", "a"]);
    let url_a = url_of(&env, "a");
    assert_eq!(
        run(&mut connect(&url_a), &["GET", "kept"]).unwrap(),
        bulk("across down and up")
    );

    // Remove: no process, no files, no row.
    let pid_a = own_pid(&env, "a").unwrap();
    env.ok(&["remove", "a"]);
    assert!(!alive(pid_a), "a's redis outlived its world");
    assert!(!own_dir(&env, "a").exists(), "a's redis files outlived it");
    assert!(own_server(&env, "a").is_none());
    assert_eq!(
        run(&mut connect(&url_b), &["GET", "owner"]).unwrap(),
        bulk("b")
    );
    env.ok(&["remove", "b"]);
    assert!(!alive(pid_b));
    assert!(!env.ok(&["gc"]).contains("bk_"), "orphans after remove");
    let left: Vec<_> = std::fs::read_dir(env.home.join("servers/redis/worlds"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
    env.assert_nothing_left(&["a", "b"]);
}

#[test]
fn a_worlds_redis_that_dies_is_started_again_on_its_port_and_a_new_daemon_adopts_it() {
    let env = Env::new(&config(""));
    env.ok(&["up", "w"]);
    let url = url_of(&env, "w");
    run(&mut connect(&url), &["SET", "k", "v"]).unwrap();
    let before = own_server(&env, "w").unwrap();
    let pid = own_pid(&env, "w").unwrap();
    signal(pid, 9);
    wait_until("the world's redis is back", Duration::from_secs(20), || {
        own_pid(&env, "w").is_some_and(|p| p != pid)
    });
    let after = own_server(&env, "w").unwrap();
    assert_eq!(after["port"], before["port"], "it moved: {after}");
    // The world's processes keep their address.
    assert_eq!(url_of(&env, "w"), url);
    run(&mut connect(&url), &["PING"]).expect("the same URL answers");
    let events = env.ok(&["events", "w", "-n", "100"]);
    assert!(
        events.contains("server_down") && events.contains("server_back"),
        "{events}"
    );

    // A new daemon adopts the running server: same pid.
    let pid = own_pid(&env, "w").unwrap();
    env.ok(&["daemon", "stop"]);
    env.ok(&["up", "w"]);
    assert_eq!(own_pid(&env, "w"), Some(pid), "not adopted");
    env.ok(&["remove", "w"]);
    assert!(!alive(pid));
    env.assert_nothing_left(&["w"]);
}

#[test]
fn two_worlds_on_an_admin_url_server_get_a_database_each_and_cannot_leave_it() {
    let server = RedisServer::start();
    let env = Env::new(&config("admin_url = \"${env.REDIS_ADMIN}\""));
    let vars = [("REDIS_ADMIN", server.admin_url.as_str())];
    for w in ["a", "b"] {
        let out = env.binky_env(&["up", w], &vars);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let (url_a, url_b) = (url_of(&env, "a"), url_of(&env, "b"));
    let db = |url: &str| url.rsplit('/').next().unwrap().parse::<i64>().unwrap();
    let (db_a, db_b) = (db(&url_a), db(&url_b));
    assert!(db_a >= 1 && db_b >= 1 && db_a != db_b, "{url_a} {url_b}");
    assert_eq!(
        served_env(env.port_of("a", "api"))["DB"],
        db_a.to_string().as_str()
    );
    assert!(
        !url_a.contains(&server.password),
        "the admin password reached a world"
    );
    use_it_the_ordinary_way(&url_a, "a");
    use_it_the_ordinary_way(&url_b, "b");
    assert_eq!(server.keys_in(db_a, "owner").len(), 1);
    // Database 0 holds binky's catalog on the server (`binky:*`), nothing of a world.
    assert!(
        server.keys("*").iter().all(|k| k.starts_with("binky:")),
        "a world wrote into database 0: {:?}",
        server.keys("*")
    );

    let mut a = connect(&url_a);
    let other = db_b.to_string();
    for args in [
        &["SELECT", other.as_str()][..],
        &["SELECT", "0"],
        &["MOVE", "owner", other.as_str()],
        &["COPY", "owner", "owner", "DB", other.as_str()],
        &["SWAPDB", "0", other.as_str()],
        &["FLUSHALL"],
        &["CLIENT", "LIST"],
        &["CONFIG", "GET", "*"],
        &["MONITOR"],
    ] {
        assert_noperm(&mut a, args);
    }
    match run(
        &mut a,
        &["EVAL", "return redis.call('SELECT', ARGV[1])", "0", &other],
    ) {
        Err(e) => assert!(
            e.to_string().contains("NOPERM") || e.to_string().contains("can't"),
            "{e}"
        ),
        Ok(v) => panic!("a script selected b's database: {v:?}"),
    }
    run(&mut a, &["FLUSHDB"]).expect("FLUSHDB of its own database");
    assert!(server.keys_in(db_a, "*").is_empty());
    assert_eq!(
        run(&mut connect(&url_b), &["GET", "owner"]).unwrap(),
        bulk("b")
    );

    // A new daemon, and a server that lost its users: the same database again (the store
    // recorded it).
    run(&mut a, &["SET", "mine", "1"]).unwrap();
    env.ok(&["daemon", "stop"]);
    run(
        &mut server.admin(),
        &["ACL", "DELUSER", &slice_of(&env, "a")],
    )
    .unwrap();
    let out = env.binky_env(&["up", "a"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(url_of(&env, "a"), url_a);
    assert_eq!(
        run(&mut connect(&url_a), &["GET", "mine"]).unwrap(),
        bulk("1")
    );

    env.ok(&["remove", "a"]);
    assert!(
        server.keys_in(db_a, "*").is_empty(),
        "a's database was not emptied"
    );
    assert!(
        !server.users().contains(&slice_of(&env, "a")),
        "a's user outlived it"
    );
    assert_eq!(server.keys_in(db_b, "owner").len(), 1, "b lost its key");
    env.ok(&["remove", "b"]);
    assert!(server.keys_in(db_b, "*").is_empty());
    assert!(!server.users().iter().any(|u| u.starts_with("bk_")));
    env.assert_nothing_left(&["a", "b"]);
}

#[test]
fn a_server_with_no_database_left_fails_the_world_naming_the_fixes() {
    // Databases 0 (never a world's), 1 and 2.
    let server = RedisServer::start_with(&["--databases", "3"]);
    let env = Env::new(&config("admin_url = \"${env.REDIS_ADMIN}\""));
    let vars = [("REDIS_ADMIN", server.admin_url.as_str())];
    for w in ["a", "b"] {
        let out = env.binky_env(&["up", w], &vars);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let out = env.binky_env(&["up", "c", "--timeout", "60"], &vars);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stderr(&out);
    for fix in [
        "no free database",
        "databases",
        "isolation = \"prefix\"",
        "leave out admin_url",
    ] {
        assert!(text.contains(fix), "`{fix}` missing from: {text}");
    }
    assert!(!text.contains(&server.password), "{text}");
    // Room again: the next `binky up` gets the freed database.
    env.ok(&["remove", "a"]);
    let out = env.binky_env(&["up", "c"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(url_of(&env, "c").ends_with("/1"), "{}", url_of(&env, "c"));
    for w in ["b", "c"] {
        env.ok(&["remove", w]);
    }
    env.assert_nothing_left(&["a", "b", "c"]);
}

#[test]
fn with_isolation_prefix_two_worlds_get_their_own_prefix_and_user_and_cannot_touch_each_other() {
    let server = RedisServer::start();
    let env = Env::new(&config(
        "admin_url = \"${env.REDIS_ADMIN}\"\noptions = { isolation = \"prefix\" }",
    ));
    let vars = [("REDIS_ADMIN", server.admin_url.as_str())];
    for w in ["a", "b"] {
        let out = env.binky_env(&["up", w], &vars);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let served_a = served_env(env.port_of("a", "api"));
    let served_b = served_env(env.port_of("b", "api"));
    let (url_a, prefix_a) = (
        served_a["REDIS_URL"].as_str().unwrap(),
        served_a["PREFIX"].as_str().unwrap(),
    );
    let (url_b, prefix_b) = (
        served_b["REDIS_URL"].as_str().unwrap(),
        served_b["PREFIX"].as_str().unwrap(),
    );
    assert_ne!(prefix_a, prefix_b);
    assert!(
        !url_a.contains(&server.password),
        "the admin password reached a world"
    );
    let mut a = connect(url_a);
    let mut b = connect(url_b);
    run(&mut a, &["SET", &format!("{prefix_a}k"), "from a"]).unwrap();
    run(&mut b, &["SET", &format!("{prefix_b}k"), "from b"]).unwrap();
    for args in [
        vec!["GET".to_owned(), format!("{prefix_b}k")],
        vec!["DEL".to_owned(), format!("{prefix_b}k")],
        vec!["KEYS".to_owned(), "*".to_owned()],
        vec!["FLUSHALL".to_owned()],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert!(
            run(&mut a, &args).is_err(),
            "{args:?} was allowed to world a"
        );
    }
    assert_eq!(
        run(&mut b, &["GET", &format!("{prefix_b}k")]).unwrap(),
        bulk("from b")
    );

    env.ok(&["remove", "a"]);
    assert!(
        server.keys(&format!("{prefix_a}*")).is_empty(),
        "a's keys outlived it"
    );
    assert!(
        !server
            .users()
            .iter()
            .any(|u| prefix_a.starts_with(u.as_str())),
        "a's ACL user outlived it"
    );
    assert_eq!(
        server.keys(&format!("{prefix_b}*")).len(),
        1,
        "b lost its key"
    );
    env.ok(&["remove", "b"]);
    assert!(server.keys("bk_*").is_empty());
    env.assert_nothing_left(&["a", "b"]);
}

#[test]
fn binky_redis_url_names_the_server_for_a_redis_without_admin_url_as_in_binky_012() {
    let server = RedisServer::start();
    let env = Env::new(&config(""));
    // The daemon is started by this `up`, so it carries the variable, as 0.1.2's did.
    let out = env.binky_env(
        &["up", "w"],
        &[("BINKY_REDIS_URL", server.admin_url.as_str())],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let url = url_of(&env, "w");
    let db: i64 = url.rsplit('/').next().unwrap().parse().unwrap();
    assert!(db >= 1, "{url}");
    run(&mut connect(&url), &["SET", "k", "v"]).unwrap();
    assert_eq!(server.keys_in(db, "k").len(), 1, "not on the named server");
    let servers = env.ok(&["servers"]);
    assert!(
        !servers.contains("running"),
        "a managed server was started although BINKY_REDIS_URL named one:\n{servers}"
    );
    env.ok(&["remove", "w"]);
    assert!(server.keys_in(db, "*").is_empty());
    env.assert_nothing_left(&["w"]);
}

#[test]
fn an_unknown_isolation_or_a_server_per_world_on_a_given_server_is_refused_naming_why() {
    let env = Env::new(&config("options = { isolation = \"cluster\" }"));
    let out = env.binky(&["check"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        text.contains("services.cache.options.isolation")
            && text.contains("unknown redis isolation `cluster`")
            && text.contains("\"database\" or \"prefix\""),
        "{text}"
    );
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));

    env.write_config(&config(
        "admin_url = \"${env.REDIS_ADMIN}\"\noptions = { isolation = \"server\" }",
    ));
    let out = env.binky(&["check"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        text.contains("isolation = \"server\"") && text.contains("leave out admin_url"),
        "{text}"
    );

    // The server given by binky 0.1.2's variable instead: refused when the world starts.
    let server = RedisServer::start();
    env.write_config(&config("options = { isolation = \"server\" }"));
    binky_testkit::git::commit_all(&env.repo, "server per world");
    // The daemon reads the variable from its own environment: one started by this `up`.
    let _ = env.binky(&["daemon", "stop"]);
    let out = env.binky_env(
        &["up", "w", "--timeout", "60"],
        &[("BINKY_REDIS_URL", server.admin_url.as_str())],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("BINKY_REDIS_URL"), "{}", stderr(&out));
    assert!(!server.users().iter().any(|u| u.starts_with("bk_")));
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_slice_whose_isolation_changes_leaves_no_server_or_database_behind() {
    let server = RedisServer::start();
    let env = Env::new(&config(""));
    env.ok(&["up", "w"]);
    let pid = own_pid(&env, "w").unwrap();
    // The world's binky.toml now names a server: its slice moves to a database of it.
    std::fs::write(
        env.worktree("w").join("binky.toml"),
        config("admin_url = \"${env.REDIS_ADMIN}\"").replace("{range}", &env.range()),
    )
    .unwrap();
    let vars = [("REDIS_ADMIN", server.admin_url.as_str())];
    let out = env.binky_env(&["up", "w"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_until(
        "the api has the database's address",
        Duration::from_secs(20),
        || {
            try_served_env(env.port_of("w", "api")).is_some_and(|e| {
                e["REDIS_URL"]
                    .as_str()
                    .is_some_and(|u| u.contains(&format!(":{}/", server.port)))
            })
        },
    );
    let url = url_of(&env, "w");
    run(&mut connect(&url), &["SET", "k", "v"]).unwrap();
    // The old server does not outlive the world's run, nor the world.
    env.ok(&["down", "w"]);
    assert!(
        !alive(pid),
        "the world's old redis-server outlived binky down"
    );
    // --force: the edited binky.toml is not committed.
    env.ok(&["remove", "w", "--force"]);
    assert!(!own_dir(&env, "w").exists());
    assert!(own_server(&env, "w").is_none());
    assert!(!server.users().iter().any(|u| u.starts_with("bk_")));
    assert!(server.keys_in(1, "*").is_empty());
    env.assert_nothing_left(&["w"]);
}
