//! Unit tests of the mongodb adapter.

use super::*;
use crate::adapters::testing::{cfg, slice};
use std::io::{Read, Write};
use std::time::Instant;

fn block<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(f)
}

#[test]
fn database_names_are_0_1_2s_within_mongodbs_limits() {
    assert_eq!(
        database_name("bk_acme_login_fix_db").expect("valid"),
        "bk_acme_login_fix_db"
    );
    assert_eq!(database_name("bk_a.b/c d$").expect("mapped"), "bk_a_b_c_d_");
    let long = format!("bk_{}_db", "p".repeat(80));
    let fitted = database_name(&long).expect("fitted");
    assert_eq!(fitted.len(), MAX_DB_NAME, "{fitted}");
    assert!(valid_database_name(&fitted));
    assert_ne!(
        fitted,
        database_name(&format!("bk_{}_dc", "p".repeat(80))).expect("x")
    );
    assert!(database_name("").is_err());
    assert!(database_name("bk_é").is_err());
    for bad in [
        "", "a.b", "a b", "a$", "a/b", "a\\b", "a\"b", "a*", "a<", "a>", "a:", "a|", "a?",
    ] {
        assert!(!valid_database_name(bad), "{bad}");
    }
    assert!(!valid_database_name(&"x".repeat(64)));
    assert!(valid_database_name(&"x".repeat(63)));
}

#[test]
fn the_slice_url_keeps_hosts_and_options_and_replaces_credentials() {
    let t = Target::parse(
        "mongodb://root:s3cret@h1:27017,h2:27018/admin?replicaSet=rs0&authSource=admin\
             &tls=true&authMechanism=SCRAM-SHA-1&retryWrites=false",
    )
    .expect("parses");
    let url = t.slice_url("bk_w_db", "bk_w_db", "pw");
    assert_eq!(
        url,
        "mongodb://bk_w_db:pw@h1:27017,h2:27018/bk_w_db?authSource=bk_w_db\
             &replicaSet=rs0&tls=true&retryWrites=false"
    );
    assert!(!url.contains("root") && !url.contains("s3cret"), "{url}");
    // Options are matched without regard to case, as MongoDB does.
    let t = Target::parse("mongodb://u:p@h/?AUTHSOURCE=admin&appName=x").expect("parses");
    assert_eq!(
        t.slice_url("bk_a", "bk_a", "s"),
        "mongodb://bk_a:s@h/bk_a?authSource=bk_a&appName=x"
    );
    // No credentials, no path, no options.
    let t = Target::parse("mongodb://127.0.0.1:27017").expect("parses");
    assert_eq!(
        t.slice_url("bk_a", "bk_a", "s"),
        "mongodb://bk_a:s@127.0.0.1:27017/bk_a?authSource=bk_a"
    );
    assert_eq!(t.shown, "mongodb://127.0.0.1:27017");
}

#[test]
fn secrets_with_special_characters_are_percent_encoded() {
    let t = Target::parse("mongodb://h:27017/").expect("parses");
    let url = t.slice_url("bk_a", "bk_a", "p@ss:w/rd?%#&=+ é");
    assert_eq!(
        url,
        "mongodb://bk_a:p%40ss%3Aw%2Frd%3F%25%23%26%3D%2B%20%C3%A9@h:27017/bk_a?authSource=bk_a"
    );
    // The driver reads it back as the same password.
    let parsed = ::mongodb::options::ConnectionString::parse(&url).expect("driver parses");
    let cred = parsed.credential.expect("credential");
    assert_eq!(cred.password.as_deref(), Some("p@ss:w/rd?%#&=+ é"));
    assert_eq!(cred.username.as_deref(), Some("bk_a"));
    assert_eq!(cred.source.as_deref(), Some("bk_a"));
}

#[test]
fn resolve_gives_the_url_and_tokens() {
    let a = block(Mongo.resolve(
        &slice("bk_acme_w_db", "0123abcd"),
        &cfg("mongodb://admin:pw@127.0.0.1:27017/?directConnection=true"),
    ))
    .expect("resolves");
    assert_eq!(
        a.url,
        "mongodb://bk_acme_w_db:0123abcd@127.0.0.1:27017/bk_acme_w_db\
             ?authSource=bk_acme_w_db&directConnection=true"
    );
    assert_eq!(a.tokens["database"], "bk_acme_w_db");
    assert_eq!(a.tokens["user"], "bk_acme_w_db");
    assert!(!a.tokens.values().any(|v| v.contains("pw")));
}

#[test]
fn mongodb_srv_is_refused_with_the_way_out() {
    let err =
        Target::parse("mongodb+srv://admin:topsecret@cluster0.example.net/").expect_err("srv");
    let text = err.to_string();
    assert!(matches!(err, AdapterError::Config(_)), "{text}");
    assert!(text.contains("mongodb+srv://"), "{text}");
    assert!(text.contains("DNS"), "{text}");
    assert!(
        text.contains("mongodb://USER:PASSWORD@HOST1:27017,HOST2:27017"),
        "{text}"
    );
    assert!(!text.contains("topsecret"), "{text}");
}

#[test]
fn bad_admin_urls_name_the_fix_without_the_password() {
    for url in [
        "postgres://u:topsecret@h:5432",
        "mongodb://u:topsecret@/db",
        "mongodb://u:topsecret@h1,,h2/",
        "mongodb://u:topsecret@h:notaport/",
        "mongodb://u:topsecret@h/?maxPoolSize=abc",
    ] {
        let err = Target::parse(url).expect_err(url);
        let text = err.to_string();
        assert!(matches!(err, AdapterError::Config(_)), "{url}: {text}");
        assert!(!text.contains("topsecret"), "{url}: {text}");
    }
    let err = Target::parse("u:topsecret@h").expect_err("no scheme");
    assert!(!err.to_string().contains("topsecret"), "{err}");
    let err = block(Mongo.provision(&slice("bk_a", "x1234"), &AdapterConfig::default()));
    if std::env::var(ENV_URL).is_err() {
        let text = err.expect_err("no admin_url").to_string();
        assert!(
            text.contains("admin_url") && text.contains(ENV_URL),
            "{text}"
        );
    }
}

#[test]
fn user_commands_give_the_slice_its_database_only() {
    let roles = Bson::Array(vec![
        Bson::Document(doc! { "role": "readWrite", "db": "bk_a" }),
        Bson::Document(doc! { "role": "dbAdmin", "db": "bk_a" }),
    ]);
    assert_eq!(
        create_user_command("bk_a", "bk_a", "s3"),
        doc! { "createUser": "bk_a", "pwd": "s3", "roles": roles.clone() }
    );
    // The command name comes first: MongoDB takes a document's first key as the command.
    assert_eq!(
        create_user_command("bk_a", "bk_a", "s3")
            .keys()
            .next()
            .map(String::as_str),
        Some("createUser")
    );
    assert_eq!(
        update_user_command("bk_a", "bk_a", "s4"),
        doc! { "updateUser": "bk_a", "pwd": "s4", "roles": roles }
    );
    assert_eq!(drop_user_command("bk_a"), doc! { "dropUser": "bk_a" });
    assert_eq!(
        drop_all_users_command(),
        doc! { "dropAllUsersFromDatabase": 1 }
    );
    assert_eq!(
        drop_all_roles_command(),
        doc! { "dropAllRolesFromDatabase": 1 }
    );
    assert_eq!(
        seal_command("bk_t", "bk_t"),
        doc! { "updateUser": "bk_t", "roles": [ { "role": "read", "db": "bk_t" } ] }
    );
}

#[test]
fn clone_commands_copy_server_side_with_options_and_indexes() {
    assert_eq!(
        copy_command("orders", "bk_to"),
        doc! {
            "aggregate": "orders",
            "pipeline": [ { "$out": { "db": "bk_to", "coll": "orders" } } ],
            "cursor": {},
            "bypassDocumentValidation": true,
        }
    );
    let plain = doc! { "name": "orders", "type": "collection", "options": {}, "info": {} };
    assert_eq!(create_command(&plain), Ok(None));
    let validated = doc! {
        "name": "users", "type": "collection",
        "options": { "validator": { "email": { "$exists": true } } },
    };
    assert_eq!(
        create_command(&validated),
        Ok(Some(
            doc! { "create": "users", "validator": { "email": { "$exists": true } } }
        ))
    );
    let view = doc! {
        "name": "recent", "type": "view",
        "options": { "viewOn": "orders", "pipeline": [ { "$limit": 10 } ] },
    };
    assert_eq!(
        create_command(&view),
        Ok(Some(
            doc! { "create": "recent", "viewOn": "orders", "pipeline": [ { "$limit": 10 } ] }
        ))
    );
    let capped =
        doc! { "name": "log", "type": "collection", "options": { "capped": true, "size": 4096 } };
    assert!(create_command(&capped)
        .expect_err("capped")
        .contains("capped"));
    let ts = doc! { "name": "m", "type": "timeseries", "options": {} };
    assert!(create_command(&ts)
        .expect_err("timeseries")
        .contains("timeseries"));

    assert_eq!(
        index_spec(&doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" }),
        None
    );
    let unique = doc! {
        "v": 2, "key": { "email": 1 }, "name": "email_1", "unique": true,
        "ns": "bk_t.users", "partialFilterExpression": { "email": { "$exists": true } },
    };
    let spec = index_spec(&unique).expect("carried");
    assert_eq!(
        spec,
        doc! {
            "key": { "email": 1 }, "name": "email_1", "unique": true,
            "partialFilterExpression": { "email": { "$exists": true } },
        }
    );
    assert_eq!(
        create_indexes_command("users", vec![spec.clone()]),
        doc! { "createIndexes": "users", "indexes": [spec] }
    );
}

#[test]
fn the_adapter_is_registered_and_can_clone() {
    let registry = super::super::Registry::default();
    let a = registry.get("mongodb").expect("registered");
    assert_eq!(a.names(), ["mongodb"]);
    let caps = block(a.capabilities(&AdapterConfig::default())).expect("capabilities");
    assert!(caps.clone);
    assert_eq!(super::super::can_clone_statically("mongodb"), Some(true));
}

/// A port on which nothing listens.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[track_caller]
fn assert_unreachable_quickly(url: &str, password: &str) {
    let s = slice("bk_acme_w_db", "slice-secret-xyz");
    let c = cfg(url);
    let started = Instant::now();
    // Side by side: each gives up after the 5 s server selection timeout.
    let (p, t, l, e) = block(async {
        tokio::join!(
            Mongo.provision(&s, &c),
            Mongo.teardown(&s, &c),
            Mongo.list(&c),
            Mongo.exists(&s, &c),
        )
    });
    let errors = [p.err(), t.err(), l.err(), e.err()];
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    for err in errors {
        let err = err.expect("no server: the verb must fail");
        let text = err.to_string();
        assert!(
            matches!(err, AdapterError::Unreachable { .. }) && err.transient(),
            "{text}"
        );
        assert!(!text.contains(password), "password in: {text}");
        assert!(!text.contains("slice-secret-xyz"), "secret in: {text}");
        assert!(text.contains("127.0.0.1"), "{text}");
    }
}

#[test]
fn a_closed_port_is_unreachable_within_seconds_and_shows_no_password() {
    let port = closed_port();
    let started = Instant::now();
    let url = format!("mongodb://admin:closed-port-pw@127.0.0.1:{port}/?directConnection=true");
    let err = block(Mongo.provision(&slice("bk_a", "s-123"), &cfg(&url))).expect_err("down");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(err, AdapterError::Unreachable { .. }), "{err}");
    assert_unreachable_quickly(&url, "closed-port-pw");
}

#[test]
fn a_listener_that_speaks_garbage_is_unreachable_not_a_hang() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buf = [0u8; 1024];
                let _ = stream.read(&mut buf);
                let _ = stream.write_all(b"HTTP/1.0 400 Bad Request\r\n\r\nnot mongo at all");
            });
        }
    });
    let url = format!("mongodb://admin:garbage-pw-77@127.0.0.1:{port}/?directConnection=true");
    assert_unreachable_quickly(&url, "garbage-pw-77");
}

#[test]
fn the_marker_names_the_home_that_claimed_the_slice_first() {
    assert_eq!(
        claim_filter(),
        doc! { "_id": "binky", "home": { "$exists": false } },
        "a marker naming a home is never claimed again"
    );
    assert_eq!(
        claim_update("h2k4m6p7"),
        doc! { "$set": { "managed": true, "home": "h2k4m6p7" } }
    );
    let marked = doc! { "_id": "binky", "managed": true, "home": "h2k4m6p7" };
    assert_eq!(
        maker_of(Some(&marked), true),
        Maker::Home("h2k4m6p7".into())
    );
    let from_before = doc! { "_id": "binky", "managed": true };
    assert_eq!(maker_of(Some(&from_before), true), Maker::Unmarked);
    assert_eq!(maker_of(None, true), Maker::Unmarked);
    assert_eq!(maker_of(None, false), Maker::Absent);
    assert!(
        block(Mongo.claim(&slice("bk_a", "x"), &cfg("mongodb://127.0.0.1:1"), "NOPE")).is_err()
    );
}
