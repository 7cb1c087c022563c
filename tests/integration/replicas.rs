//! `replicas = N`: N processes of a service, each on its own port, balanced behind its URL.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::harness::*;

fn config() -> String {
    format!(
        r#"
[project]
name = "rep"
{{range}}

[services.api]
cmd = "{SERVE}"
url = true
replicas = 2

[services.web]
cmd = "{SERVE}"
url = true
depends_on = ["api"]
env = {{ API_URL = "${{api.url}}", API_PORT = "${{api.port}}", API_PROXY_URL = "${{api.proxy_url}}" }}
"#
    )
}

/// `(pid, primary port)` of a service instance from `binky status NAME --json`.
fn instance(env: &Env, world: &str, name: &str) -> (u32, u16, serde_json::Value) {
    let s = env
        .services(world)
        .into_iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in status"));
    (
        s["pid"].as_u64().unwrap_or(0) as u32,
        s["ports"][""].as_u64().unwrap_or(0) as u16,
        s,
    )
}

/// Which replica answered a request through the proxy (`BINKY_REPLICA` of its
/// environment), or `None` when the proxy did not get an answer from one.
fn replica_through_proxy(env: &Env, host: &str) -> Option<String> {
    let answer = through_proxy(env.proxy_port(), host, "/")?;
    if status_code(&answer) != 200 {
        return None;
    }
    body_json(&answer)?["BINKY_REPLICA"]
        .as_str()
        .map(str::to_owned)
}

#[test]
fn two_replicas_both_answer_through_the_url_and_one_killed_is_restarted_while_the_other_answers() {
    let env = Env::new(&config());
    env.ok(&["up", "w"]);
    let (pid0, port0, api) = instance(&env, "w", "api");
    let (pid1, port1, api1) = instance(&env, "w", "api.1");
    assert_eq!(
        (api["replica"].as_u64(), api1["replica"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(
        (api["state"].as_str(), api1["state"].as_str()),
        (Some("running"), Some("running"))
    );
    assert_ne!(pid0, pid1);
    assert_ne!(port0, port1, "the replicas share a port");
    // Each runs on its own port and knows which replica it is.
    assert_eq!(served_env(port0)["BINKY_REPLICA"], "0");
    assert_eq!(served_env(port0)["PORT"], port0.to_string());
    assert_eq!(served_env(port1)["BINKY_REPLICA"], "1");
    assert_eq!(served_env(port1)["PORT"], port1.to_string());
    // Other services see the first replica directly and the balanced URL through the proxy.
    let (_, web_port, web) = instance(&env, "w", "web");
    assert!(
        web.get("replica").is_none(),
        "one replica is just the service: {web}"
    );
    let seen_by_web = served_env(web_port);
    assert_eq!(seen_by_web["API_URL"], format!("http://localhost:{port0}"));
    assert_eq!(seen_by_web["API_PORT"], port0.to_string());
    assert_eq!(
        seen_by_web["API_PROXY_URL"],
        format!("http://api.w.rep.localhost:{}", env.proxy_port())
    );
    assert!(
        seen_by_web.get("BINKY_REPLICA").is_none(),
        "a service with one replica gets the environment it always had"
    );

    // Through the URL, requests reach both replicas.
    let host = "api.w.rep.localhost";
    let mut answered = BTreeSet::new();
    for _ in 0..10 {
        answered.insert(replica_through_proxy(&env, host).expect("the URL answers"));
    }
    assert_eq!(
        answered,
        BTreeSet::from(["0".to_owned(), "1".to_owned()]),
        "not balanced"
    );

    // Kill replica 1: the URL keeps answering (from replica 0, then from both again) and
    // replica 1 is restarted on its own port.
    signal(pid1, 9);
    wait_until("api.1 restarted", Duration::from_secs(20), || {
        assert!(
            replica_through_proxy(&env, host).is_some(),
            "the URL failed while one replica was down"
        );
        let (pid, port, s) = instance(&env, "w", "api.1");
        pid != 0 && pid != pid1 && port == port1 && s["state"] == "running"
    });
    let (again0, _, _) = instance(&env, "w", "api");
    assert_eq!(again0, pid0, "replica 0 was restarted too");
    wait_until(
        "both replicas answer again",
        Duration::from_secs(20),
        || {
            let mut seen = BTreeSet::new();
            for _ in 0..6 {
                seen.extend(replica_through_proxy(&env, host));
            }
            seen.len() == 2
        },
    );
    let (_, _, s) = instance(&env, "w", "api.1");
    assert!(s["restarts"].as_u64().unwrap_or(0) >= 1, "{s}");

    // Each replica's output is its own log; `binky logs w api` shows both.
    let logs = env.ok(&["logs", "w", "api"]);
    assert!(
        logs.lines().any(|l| l.trim_start().starts_with("api |")),
        "{logs}"
    );
    assert!(
        logs.lines().any(|l| l.trim_start().starts_with("api.1 |")),
        "{logs}"
    );
    let one = env.ok(&["logs", "w", "api.1"]);
    assert!(one.contains(&format!("listening on {port1}")), "{one}");
    assert!(!one.contains(&format!("listening on {port0}")), "{one}");

    // Metrics count each replica.
    let m: serde_json::Value = serde_json::from_str(&env.ok(&["metrics"])).unwrap();
    assert_eq!(m["services"]["total"], 3, "{m}");
    assert_eq!(m["services"]["replicas"], 1, "{m}");

    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn lowering_replicas_stops_the_extra_ones_and_releases_their_ports() {
    let env = Env::new(&config().replace("replicas = 2", "replicas = 3"));
    env.ok(&["up", "w"]);
    let (pid2, port2, _) = instance(&env, "w", "api.2");
    assert!(alive(pid2));
    let edited = config().replace("{range}", &env.range());
    std::fs::write(env.worktree("w").join("binky.toml"), edited).unwrap();
    env.ok(&["apply", "w"]);
    wait_until("api.2 stopped", Duration::from_secs(20), || !alive(pid2));
    wait_until("api.2 forgotten", Duration::from_secs(20), || {
        env.services("w").iter().all(|s| s["name"] != "api.2")
    });
    let status = env.ok(&["status", "w"]);
    assert!(!status.contains(&format!(":{port2}")), "{status}");
    // The edit is uncommitted in the world's worktree.
    env.ok(&["remove", "w", "--force"]);
    env.assert_nothing_left(&["w"]);
}
