//! Worlds with a RabbitMQ slice, end to end through the real binary: a vhost and a user
//! each on the shared private node, isolation proven by the broker, `binky remove` leaving
//! no vhost and no user, and a broker that is down making the world wait.

use std::time::Duration;

use crate::harness::*;
use crate::rabbitmq_server::{amqp_open, amqp_parts, forward, RabbitNode};

fn config(project: &str) -> String {
    format!(
        r#"
[project]
name = "{project}"
{{range}}

[services.mq]
adapter = "rabbitmq"
admin_url = "${{env.MQ_ADMIN}}"
options = {{ amqp_port = "${{env.MQ_AMQP_PORT}}" }}

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["mq"]
env = {{ AMQP_URL = "${{mq.url}}", VHOST = "${{mq.vhost}}", MQ_USER = "${{mq.user}}", MQ_MANAGEMENT = "${{mq.management_url}}" }}
"#
    )
}

#[test]
fn two_worlds_get_their_own_vhost_and_user_and_remove_deletes_only_its_own() {
    let node = RabbitNode::shared();
    let env = Env::new(&config("mqe2e"));
    let port = node.amqp_port.to_string();
    let vars = [
        ("MQ_ADMIN", node.admin_url.as_str()),
        ("MQ_AMQP_PORT", port.as_str()),
    ];
    for w in ["a", "b"] {
        let out = env.binky_env(&["up", w], &vars);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let served_a = served_env(env.port_of("a", "api"));
    let served_b = served_env(env.port_of("b", "api"));
    let url_a = served_a["AMQP_URL"].as_str().unwrap().to_owned();
    let url_b = served_b["AMQP_URL"].as_str().unwrap().to_owned();
    let (user_a, pw_a, vhost_a) = amqp_parts(&url_a);
    let (user_b, pw_b, vhost_b) = amqp_parts(&url_b);
    assert_ne!(vhost_a, vhost_b);
    assert_eq!(served_a["VHOST"], vhost_a.as_str());
    assert_eq!(served_a["MQ_USER"], user_a.as_str());
    assert_eq!(
        served_a["MQ_MANAGEMENT"],
        format!("http://127.0.0.1:{}", node.mgmt_port).as_str()
    );
    assert!(
        !url_a.contains(&node.password),
        "the admin password reached a world"
    );
    assert!(
        url_a.contains(&format!("@127.0.0.1:{}/", node.amqp_port)),
        "{url_a}"
    );

    amqp_open(node.amqp_port, &user_a, &pw_a, &vhost_a).expect("a opens its vhost");
    amqp_open(node.amqp_port, &user_b, &pw_b, &vhost_b).expect("b opens its vhost");
    let err = amqp_open(node.amqp_port, &user_a, &pw_a, &vhost_b).expect_err("a opened b's");
    assert!(err.contains("NOT_ALLOWED"), "{err}");

    env.ok(&["remove", "a"]);
    assert!(!node.has_vhost(&vhost_a), "a's vhost outlived it");
    assert!(!node.has_user(&user_a), "a's user outlived it");
    assert!(
        node.has_vhost(&vhost_b) && node.has_user(&user_b),
        "b lost its slice"
    );
    amqp_open(node.amqp_port, &user_b, &pw_b, &vhost_b).expect("b still opens its vhost");
    env.ok(&["remove", "b"]);
    assert!(!node.has_vhost(&vhost_b) && !node.has_user(&user_b));
    assert!(
        !node
            .names("/api/vhosts")
            .iter()
            .any(|v| v.starts_with(&format!("bk_{}_mqe2e_", env.home_id()))),
        "vhosts left: {:?}",
        node.names("/api/vhosts")
    );
    env.assert_nothing_left(&["a", "b"]);
}

#[test]
fn a_world_waits_for_a_broker_that_is_down_and_comes_up_when_it_answers() {
    let node = RabbitNode::shared();
    let port = crate::redis_server::free_port();
    let admin = format!("http://admin:{}@127.0.0.1:{port}", node.password);
    let env = Env::new(&config("mqwait"));
    let amqp = node.amqp_port.to_string();
    let vars = [
        ("MQ_ADMIN", admin.as_str()),
        ("MQ_AMQP_PORT", amqp.as_str()),
    ];
    let out = env.binky_env(&["up", "w", "--no-wait"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_until(
        "the world waits for its broker",
        Duration::from_secs(60),
        || {
            let s = env.ok(&["status", "w"]);
            s.contains("ServerUnavailable") && s.contains(&format!("127.0.0.1:{port}"))
        },
    );
    assert!(!env.ok(&["status", "w"]).contains(&node.password));
    assert!(
        env.pid_of("w", "api").is_none(),
        "api started without its broker"
    );
    // The broker answers on the address the world was given; the world follows.
    forward(port, node.mgmt_port);
    let out = env.binky_env(&["up", "w", "--timeout", "90s"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    let url = served_env(env.port_of("w", "api"))["AMQP_URL"]
        .as_str()
        .unwrap()
        .to_owned();
    let (user, password, vhost) = amqp_parts(&url);
    amqp_open(node.amqp_port, &user, &password, &vhost).expect("w opens its vhost");
    env.ok(&["remove", "w"]);
    assert!(!node.has_vhost(&vhost) && !node.has_user(&user));
    env.assert_nothing_left(&["w"]);
}
