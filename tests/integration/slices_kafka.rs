//! The `kafka` adapter against a real Kafka-protocol broker (tansu): a topic prefix per
//! world, the listed topics created, teardown that deletes every topic under the prefix and
//! nothing else, and `binky up` end to end.
//!
//! Isolation here is by prefix convention only (see `src/adapters/kafka.rs`): these tests
//! prove that binky's own verbs keep to a world's prefix, not that the broker stops a world
//! from touching another's topics — nothing on the broker does.

use std::time::{Duration, Instant};

use binky::adapters::kafka::Kafka;
use binky::adapters::{Adapter, AdapterConfig, AdapterError, Registry};

use crate::harness::*;
use crate::kafka_server::{block, free_port, provisioned, slice, KafkaServer};

#[test]
fn two_worlds_get_their_own_topics_and_teardown_spares_the_other() {
    let server = KafkaServer::start();
    let a = slice("bk_shop_login_fix_events");
    let b = slice("bk_shop_checkout_events");
    let a_addr = provisioned(&server, &a, "orders,payments.v1");
    let b_addr = provisioned(&server, &b, "orders,payments.v1");
    assert_eq!(
        a_addr.url,
        format!("kafka://127.0.0.1:{}/bk_shop_login_fix_events", server.port)
    );
    assert_eq!(a_addr.tokens["prefix"], "bk_shop_login_fix_events");
    assert_eq!(a_addr.tokens["bootstrap"], server.bootstrap);
    assert_eq!(
        a_addr.tokens["topics"],
        "bk_shop_login_fix_events.orders,bk_shop_login_fix_events.payments.v1"
    );
    assert_eq!(
        server.topics_with("bk_shop_login_fix_events."),
        [
            "bk_shop_login_fix_events.orders",
            "bk_shop_login_fix_events.payments.v1"
        ]
        .map(String::from)
        .into()
    );

    // A publishes under its prefix; B's topics of the same name stay empty.
    let a_orders = format!("{}.orders", a_addr.tokens["prefix"]);
    let b_orders = format!("{}.orders", b_addr.tokens["prefix"]);
    server.produce(&a_orders, "order 1 of a");
    server.produce(&a_orders, "order 2 of a");
    server.produce(&b_orders, "order of b");
    assert_eq!(server.values(&a_orders), ["order 1 of a", "order 2 of a"]);
    assert_eq!(server.values(&b_orders), ["order of b"]);
    let b_topics = server.topics_with(&format!("{}.", b.name));
    assert!(!b_topics.contains(&a_orders), "{b_topics:?}");

    // Tearing B down takes B's topics and none of A's.
    block(Kafka.teardown(&b, &server.cfg(""))).expect("teardown b");
    assert!(server.topics_with(&format!("{}.", b.name)).is_empty());
    assert_eq!(server.topics_with(&format!("{}.", a.name)).len(), 2);
    assert_eq!(server.values(&a_orders), ["order 1 of a", "order 2 of a"]);

    block(Kafka.teardown(&a, &server.cfg(""))).expect("teardown a");
    assert!(
        server.topics_with("bk_").is_empty(),
        "{:?}",
        server.topics()
    );
}

#[test]
fn teardown_deletes_every_topic_under_the_prefix_and_every_verb_is_idempotent() {
    let server = KafkaServer::start();
    let w = slice("bk_shop_w_events");
    // A neighbour whose name starts like w's, and a topic outside every world.
    let n = slice("bk_shop_w_events2");
    provisioned(&server, &n, "orders");
    block(async {
        let client = server.client().await;
        let controller = client.controller_client().expect("controller");
        controller
            .create_topic("bk_shop_w_events-orders", 1, 1, 5_000)
            .await
            .expect("create a topic outside the prefix");
    });

    let cfg = server.cfg("orders,payments");
    block(Kafka.provision(&w, &cfg)).expect("provision");
    block(Kafka.provision(&w, &cfg)).expect("provision again");
    server.produce("bk_shop_w_events.orders", "kept across provisions");
    block(Kafka.provision(&w, &server.cfg("orders,payments,refunds"))).expect("one more topic");
    assert_eq!(
        server.values("bk_shop_w_events.orders"),
        ["kept across provisions"]
    );
    // A topic the application made itself, with partitions of its own.
    block(async {
        let client = server.client().await;
        let controller = client.controller_client().expect("controller");
        controller
            .create_topic("bk_shop_w_events.lazy", 3, 1, 5_000)
            .await
            .expect("the application creates a topic");
    });
    assert_eq!(server.topics_with("bk_shop_w_events.").len(), 4);
    assert_eq!(server.partitions("bk_shop_w_events.refunds"), Some(1));
    assert_eq!(server.partitions("bk_shop_w_events.lazy"), Some(3));
    assert_eq!(block(Kafka.exists(&w, &cfg)).expect("exists"), Some(true));
    assert_eq!(
        block(Kafka.exists(&w, &server.cfg(""))).expect("exists"),
        None,
        "without listed topics, no topic is no sign of a drop"
    );
    let listed = block(Kafka.list(&cfg)).expect("list");
    assert_eq!(listed, ["bk_shop_w_events", "bk_shop_w_events2"]);

    // Teardown as `binky gc` calls it: no options, no secret.
    let bare = binky::adapters::Slice {
        name: w.name.clone(),
        secret: String::new(),
    };
    block(Kafka.teardown(&bare, &server.cfg(""))).expect("teardown");
    assert!(
        server.topics_with("bk_shop_w_events.").is_empty(),
        "{:?}",
        server.topics()
    );
    block(Kafka.teardown(&w, &cfg)).expect("teardown again");
    assert_eq!(block(Kafka.exists(&w, &cfg)).expect("exists"), Some(false));
    assert_eq!(
        server.topics_with("bk_shop_w_events2."),
        ["bk_shop_w_events2.orders".to_owned()].into()
    );
    assert!(server.topics().contains("bk_shop_w_events-orders"));
    assert_eq!(
        block(Kafka.list(&cfg)).expect("list"),
        ["bk_shop_w_events2"]
    );
}

#[test]
fn a_topic_too_long_for_kafka_is_refused_before_anything_is_created() {
    let server = KafkaServer::start();
    let w = slice("bk_shop_w_events");
    let room = 249 - w.name.len() - 1;
    let cfg = server.cfg(&format!("orders,{}", "t".repeat(room + 1)));
    let err = block(Kafka.provision(&w, &cfg)).expect_err("too long");
    let text = err.to_string();
    assert!(matches!(err, AdapterError::Config(_)), "{text}");
    assert!(
        text.contains("249") && text.contains(&format!("at most {room}")),
        "{text}"
    );
    assert!(
        server.topics_with("bk_").is_empty(),
        "{:?}",
        server.topics()
    );
    // Exactly at the limit is fine.
    let fits = "t".repeat(room);
    block(Kafka.provision(&w, &server.cfg(&fits))).expect("provision at the limit");
    let made = server.topics_with("bk_shop_w_events.");
    assert_eq!(made.iter().map(String::len).collect::<Vec<_>>(), [249]);
    block(Kafka.teardown(&w, &server.cfg(""))).expect("teardown");
    assert!(server.topics_with("bk_").is_empty());
}

#[test]
fn a_broker_that_is_down_or_silent_is_unreachable_within_seconds() {
    let w = slice("bk_shop_w_events");
    // Nobody listens.
    let closed = format!("kafka://127.0.0.1:{}", free_port());
    // Accepts connections and never answers, like a hung broker.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let silent = format!(
        "kafka://127.0.0.1:{}",
        listener.local_addr().expect("addr").port()
    );
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    for url in [closed, silent] {
        let cfg = AdapterConfig {
            admin_url: Some(url.clone()),
            options: [("topics".to_owned(), "orders".to_owned())].into(),
            ..AdapterConfig::default()
        };
        let started = Instant::now();
        let (p, t, l) = block(async {
            tokio::join!(
                Kafka.provision(&w, &cfg),
                Kafka.teardown(&w, &cfg),
                Kafka.list(&cfg)
            )
        });
        assert!(
            started.elapsed() < Duration::from_secs(12),
            "{url}: {:?}",
            started.elapsed()
        );
        for err in [p.err(), t.err(), l.err()] {
            let err = err.unwrap_or_else(|| panic!("{url}: a verb succeeded"));
            assert!(
                matches!(err, AdapterError::Unreachable { .. }) && err.transient(),
                "{url}: {err}"
            );
            assert!(err.to_string().contains("127.0.0.1"), "{err}");
        }
    }
    // SASL credentials are refused up front, without the password.
    let cfg = AdapterConfig {
        admin_url: Some("kafka://app:pw-never-shown@127.0.0.1:9092".into()),
        ..AdapterConfig::default()
    };
    let err = block(Kafka.provision(&w, &cfg)).expect_err("SASL");
    assert!(matches!(err, AdapterError::Config(_)), "{err}");
    assert!(err.to_string().contains("SASL"), "{err}");
    assert!(!err.to_string().contains("pw-never-shown"), "{err}");
}

#[test]
fn redpanda_is_the_same_adapter_and_cannot_clone() {
    let registry = Registry::default();
    for name in ["kafka", "redpanda", "redpanda@24"] {
        let adapter = registry.get(name).expect(name);
        assert_eq!(adapter.names(), ["kafka", "redpanda"]);
        let caps = block(adapter.capabilities(&AdapterConfig::default())).expect("caps");
        assert!(!caps.clone);
    }
    assert_eq!(
        binky::adapters::can_clone_statically("redpanda"),
        Some(false)
    );
}

fn config() -> String {
    format!(
        r#"
[project]
name = "shop"
{{range}}

[services.events]
adapter = "kafka"
admin_url = "${{env.KAFKA_ADMIN}}"
options = {{ topics = "orders,payments", partitions = "2" }}

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["events"]
env = {{ KAFKA_URL = "${{events.url}}", PREFIX = "${{events.prefix}}", BOOTSTRAP = "${{events.bootstrap}}" }}
"#
    )
}

#[test]
fn binky_up_gives_each_world_its_topics_and_remove_deletes_them() {
    let server = KafkaServer::start();
    let env = Env::new(&config());
    let vars = [("KAFKA_ADMIN", server.admin_url.as_str())];
    for w in ["a", "b"] {
        let out = env.binky_env(&["up", w], &vars);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let served_a = served_env(env.port_of("a", "api"));
    let served_b = served_env(env.port_of("b", "api"));
    let prefix_a = served_a["PREFIX"].as_str().expect("PREFIX").to_owned();
    let prefix_b = served_b["PREFIX"].as_str().expect("PREFIX").to_owned();
    assert_ne!(prefix_a, prefix_b);
    assert!(prefix_a.starts_with("bk_"), "{prefix_a}");
    assert_eq!(
        served_a["BOOTSTRAP"].as_str(),
        Some(server.bootstrap.as_str())
    );
    assert_eq!(
        served_a["KAFKA_URL"].as_str(),
        Some(format!("kafka://{}/{prefix_a}", server.bootstrap).as_str())
    );
    // Each world's topics, and the topic marking its slice as this home's.
    let home = env.home_id();
    for p in [&prefix_a, &prefix_b] {
        assert_eq!(
            server.topics_with(&format!("{p}.")),
            [
                format!("{p}.orders"),
                format!("{p}.payments"),
                binky::adapters::kafka::marker_topic(p, &home)
            ]
            .into()
        );
    }
    assert_eq!(server.partitions(&format!("{prefix_a}.orders")), Some(2));
    server.produce(&format!("{prefix_b}.orders"), "b's order");

    env.ok(&["remove", "a"]);
    assert!(
        server.topics_with(&format!("{prefix_a}.")).is_empty(),
        "a's topics outlived it: {:?}",
        server.topics()
    );
    assert_eq!(server.values(&format!("{prefix_b}.orders")), ["b's order"]);
    env.ok(&["remove", "b"]);
    assert!(
        server.topics_with("bk_").is_empty(),
        "{:?}",
        server.topics()
    );
    env.assert_nothing_left(&["a", "b"]);
}

#[test]
fn a_world_waits_for_a_broker_that_is_not_there_yet_and_comes_up_with_it() {
    let port = free_port();
    let env = Env::new(&config());
    let admin = format!("kafka://127.0.0.1:{port}");
    let vars = [("KAFKA_ADMIN", admin.as_str())];
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
    assert!(
        env.pid_of("w", "api").is_none(),
        "api started without its topics"
    );
    let server = KafkaServer::start_on(port);
    let out = env.binky_env(&["up", "w", "--timeout", "90s"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    let prefix = served_env(env.port_of("w", "api"))["PREFIX"]
        .as_str()
        .expect("PREFIX")
        .to_owned();
    // Its two topics and the one marking the slice as this home's.
    assert_eq!(server.topics_with(&format!("{prefix}.")).len(), 3);
    env.ok(&["remove", "w"]);
    assert!(
        server.topics_with("bk_").is_empty(),
        "{:?}",
        server.topics()
    );
    env.assert_nothing_left(&["w"]);
}
