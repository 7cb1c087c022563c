//! Worlds with a Redis slice, end to end through the real binary: a prefix and ACL user
//! each, isolation proven by the server, teardown that leaves nothing.

use crate::harness::*;
use crate::redis_server::{connect, run, RedisServer};

fn config(admin: bool) -> String {
    format!(
        r#"
[project]
name = "cachey"
{{range}}

[services.cache]
adapter = "redis"
{}

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["cache"]
env = {{ REDIS_URL = "${{cache.url}}", PREFIX = "${{cache.prefix}}" }}
"#,
        if admin {
            "admin_url = \"${env.REDIS_ADMIN}\""
        } else {
            ""
        }
    )
}

#[test]
fn two_worlds_get_their_own_prefix_and_user_and_cannot_touch_each_other() {
    let server = RedisServer::start();
    let env = Env::new(&config(true));
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
        redis::Value::BulkString(b"from b".to_vec())
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
fn without_admin_url_binky_runs_a_redis_of_its_own() {
    let env = Env::new(&config(false));
    env.ok(&["up", "w"]);
    let served = served_env(env.port_of("w", "api"));
    let mut con = connect(served["REDIS_URL"].as_str().unwrap());
    let key = format!("{}hello", served["PREFIX"].as_str().unwrap());
    run(&mut con, &["SET", &key, "world"]).unwrap();
    let servers = env.ok(&["servers"]);
    assert!(
        servers.contains("redis") && servers.contains("running"),
        "{servers}"
    );
    env.ok(&["remove", "w"]);
    assert!(
        !env.ok(&["gc"]).contains("bk_"),
        "orphaned slices after remove"
    );
    env.assert_nothing_left(&["w"]);
}

#[test]
fn binky_redis_url_names_the_server_for_a_redis_without_admin_url_as_in_binky_012() {
    let server = RedisServer::start();
    let env = Env::new(&config(false));
    // The daemon is started by this `up`, so it carries the variable, as 0.1.2's did.
    let out = env.binky_env(
        &["up", "w"],
        &[("BINKY_REDIS_URL", server.admin_url.as_str())],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let served = served_env(env.port_of("w", "api"));
    let (url, prefix) = (
        served["REDIS_URL"].as_str().unwrap(),
        served["PREFIX"].as_str().unwrap(),
    );
    let mut c = connect(url);
    run(&mut c, &["SET", &format!("{prefix}k"), "v"]).unwrap();
    assert_eq!(
        server.keys(&format!("{prefix}*")).len(),
        1,
        "not on the named server"
    );
    let servers = env.ok(&["servers"]);
    assert!(
        !servers.contains("running"),
        "a managed server was started although BINKY_REDIS_URL named one:\n{servers}"
    );
    env.ok(&["remove", "w"]);
    assert!(server.keys(&format!("{prefix}*")).is_empty());
    env.assert_nothing_left(&["w"]);
}
