//! Worlds with an S3 slice, end to end through the real binary: a bucket each on a private
//! moto_server, handed to processes as `${files.*}`; `binky remove` and `binky gc` leave
//! no bucket and no object; a server that is down makes the world wait, not fail.
//!
//! Isolation on S3 is by bucket name, not by credentials (see `s3_server`): the worlds get
//! the same keys, so these tests prove each world is handed its own bucket and that
//! removing one world removes that bucket only.

use std::time::Duration;

use binky::adapters::s3::S3;
use binky::adapters::Adapter;

use crate::harness::*;
use crate::s3_server::{block, client, keys, put, slice, MotoServer};

fn config() -> String {
    format!(
        r#"
[project]
name = "shop"
{{range}}

[services.files]
adapter = "s3"
admin_url = "${{env.S3_ADMIN}}"
buckets = ["uploads"]

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["files"]
env = {{ FILES_URL = "${{files.url}}", BUCKET = "${{files.bucket}}", PREFIX = "${{files.prefix}}", AWS_ENDPOINT_URL = "${{files.endpoint}}", AWS_REGION = "${{files.region}}", AWS_ACCESS_KEY_ID = "${{files.access_key_id}}", AWS_SECRET_ACCESS_KEY = "${{files.secret_access_key}}" }}
"#
    )
}

/// The S3 client a world's process would build from its environment.
fn client_of(served: &serde_json::Value) -> aws_sdk_s3::Client {
    let v = |k: &str| {
        served[k]
            .as_str()
            .unwrap_or_else(|| panic!("{k} unset"))
            .to_owned()
    };
    client(
        &v("AWS_ENDPOINT_URL"),
        &v("AWS_ACCESS_KEY_ID"),
        &v("AWS_SECRET_ACCESS_KEY"),
        &v("AWS_REGION"),
    )
}

#[test]
fn two_worlds_get_their_own_bucket_and_remove_deletes_only_its_own() {
    let server = MotoServer::start();
    let env = Env::new(&config());
    let vars = [("S3_ADMIN", server.admin_url.as_str())];
    for w in ["a", "b"] {
        let out = env.binky_env(&["up", w], &vars);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let served_a = served_env(env.port_of("a", "api"));
    let served_b = served_env(env.port_of("b", "api"));
    let bucket_a = served_a["BUCKET"].as_str().unwrap().to_owned();
    let bucket_b = served_b["BUCKET"].as_str().unwrap().to_owned();
    assert_ne!(bucket_a, bucket_b);
    assert!(
        bucket_a.starts_with(&format!("bk-{}-shop-a", env.home_id())),
        "{bucket_a}"
    );
    assert_eq!(served_a["FILES_URL"], format!("s3://{bucket_a}").as_str());
    assert_eq!(served_a["PREFIX"], "");
    assert_eq!(served_a["AWS_ENDPOINT_URL"], server.endpoint.as_str());
    // `binky env` shows the address; the admin URL reaches no world as a whole.
    assert!(!env.ok(&["env", "a"]).contains(&server.admin_url));

    let (ca, cb) = (client_of(&served_a), client_of(&served_b));
    block(async {
        assert_eq!(keys(&ca, &bucket_a, "").await, ["uploads/"]);
        put(&ca, &bucket_a, "uploads/a.txt", "from a").await;
        put(&cb, &bucket_b, "uploads/b.txt", "from b").await;
        assert_eq!(
            keys(&cb, &bucket_b, "").await,
            ["uploads/", "uploads/b.txt"],
            "b's bucket shows something of a's"
        );
    });

    env.ok(&["remove", "a"]);
    let buckets = server.buckets();
    assert!(
        !buckets.contains(&bucket_a),
        "a's bucket outlived it: {buckets:?}"
    );
    assert!(buckets.contains(&bucket_b), "b lost its bucket");
    assert_eq!(server.versions(&bucket_b, "").len(), 2, "b lost objects");
    env.ok(&["remove", "b"]);
    assert!(server.buckets().is_empty(), "{:?}", server.buckets());
    env.assert_nothing_left(&["a", "b"]);
}

#[test]
fn gc_finds_a_bucket_that_belongs_to_no_world_and_drops_only_that_one() {
    let server = MotoServer::start();
    let env = Env::new(&config());
    let vars = [("S3_ADMIN", server.admin_url.as_str())];
    let out = env.binky_env(&["up", "w"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    let bucket_w = served_env(env.port_of("w", "api"))["BUCKET"]
        .as_str()
        .unwrap()
        .to_owned();
    // A bucket this home left behind (a crash between making it and recording it), with
    // an object in it: marked as this home's, in no world.
    let orphan = slice("bk_gone_world_files");
    block(S3.provision(&orphan, &server.cfg())).expect("provision");
    block(S3.claim(&orphan, &server.cfg(), &env.home_id())).expect("claim");
    block(put(&server.admin(), "bk-gone-world-files", "left.txt", "x"));
    let listed = env.ok(&["gc", "--all-servers"]);
    assert!(listed.contains("bk_gone_world_files"), "{listed}");
    assert!(!listed.contains(&server.secret), "{listed}");
    let out = env.ok(&["gc", "--all-servers", "--yes"]);
    assert!(out.contains("dropped bk_gone_world_files"), "{out}");
    assert_eq!(
        server.buckets().into_iter().collect::<Vec<_>>(),
        std::slice::from_ref(&bucket_w)
    );
    env.ok(&["remove", "w"]);
    assert!(server.buckets().is_empty());
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_world_waits_for_an_s3_server_that_is_down_and_comes_up_when_it_answers() {
    let port = crate::redis_server::free_port();
    let admin = format!("http://AKIDBINKYTEST:down-secret-123@127.0.0.1:{port}");
    let env = Env::new(&config());
    let vars = [("S3_ADMIN", admin.as_str())];
    let out = env.binky_env(&["up", "w", "--no-wait"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_until(
        "the world waits for its S3 server",
        Duration::from_secs(60),
        || {
            let s = env.ok(&["status", "w"]);
            s.contains("ServerUnavailable") && s.contains(&format!("127.0.0.1:{port}"))
        },
    );
    assert!(!env.ok(&["status", "w"]).contains("down-secret-123"));
    // The server comes (on the address the world was given); the world follows.
    let server = MotoServer::start_on(port);
    let out = env.binky_env(&["up", "w", "--timeout", "90s"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    let served = served_env(env.port_of("w", "api"));
    let bucket = served["BUCKET"].as_str().unwrap();
    assert!(server.buckets().contains(bucket));
    env.ok(&["remove", "w"]);
    assert!(server.buckets().is_empty());
    env.assert_nothing_left(&["w"]);
}
