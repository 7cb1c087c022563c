//! S3: a private `moto_server` per test (the [`MotoServer`] fixture, shared with
//! `slices_s3`), and the `s3` adapter proven against it: a bucket (or a prefix in a shared
//! bucket) per world, teardown that leaves no bucket and no object.
//!
//! Honest note: on S3 the worlds are kept apart **by bucket name, not by credentials**.
//! Every world gets the admin keys (S3 has no per-bucket users without IAM), so these tests
//! prove that a world using its own `${files.bucket}` / `${files.prefix}` never meets
//! another world's objects, and that teardown removes exactly its own, not that the server
//! would refuse a world that goes looking.
//!
//! moto_server comes from `$BINKY_TEST_MOTO` (set by ./scripts/test to its venv), else
//! `moto_server` on PATH; without either the tests fail with the install hint.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::Client;
use binky::adapters::s3::S3;
use binky::adapters::{Adapter, AdapterConfig, AdapterError, Address, Registry, Slice};
use binky_testkit::net::free_port;

/// A private moto_server on 127.0.0.1 (the kit's: S3 and the rest of AWS, in memory), with
/// the adapter's view of it. Stopped on drop.
pub struct MotoServer(binky_testkit::servers::moto::MotoServer);

impl std::ops::Deref for MotoServer {
    type Target = binky_testkit::servers::moto::MotoServer;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// The moto_server binary: `$BINKY_TEST_MOTO`, else the test command's venv, else PATH;
/// panics with the install hint.
pub fn moto_binary() -> PathBuf {
    binky_testkit::servers::moto::moto_binary()
        .unwrap_or_else(|| panic!("{}", binky_testkit::servers::moto::MISSING))
}

impl MotoServer {
    /// Start one; panics (failing the test) when moto_server is missing.
    pub fn start() -> MotoServer {
        Self::start_with(&[])
    }

    /// Start one on `port` (a port a test reserved and then freed).
    pub fn start_on(port: u16) -> MotoServer {
        moto_binary();
        MotoServer(
            binky_testkit::servers::moto::MotoServer::start_on(port, &[])
                .unwrap_or_else(|log| panic!("moto_server did not start: {log}")),
        )
    }

    /// Start one with extra environment (`INITIAL_NO_AUTH_ACTION_COUNT=0`: check keys).
    pub fn start_with(env: &[(&str, &str)]) -> MotoServer {
        moto_binary();
        MotoServer(
            binky_testkit::servers::moto::MotoServer::start_with(env)
                .unwrap_or_else(|e| panic!("{e}")),
        )
    }

    /// The adapter configuration for this server (bucket mode).
    pub fn cfg(&self) -> AdapterConfig {
        AdapterConfig {
            admin_url: Some(self.admin_url.clone()),
            ..AdapterConfig::default()
        }
    }

    /// The adapter configuration for prefix mode in `bucket`.
    pub fn shared_cfg(&self, bucket: &str) -> AdapterConfig {
        let mut cfg = self.cfg();
        cfg.options.insert("bucket".into(), bucket.into());
        cfg
    }

    /// An admin client.
    pub fn admin(&self) -> Client {
        client(
            &self.endpoint,
            binky_testkit::servers::moto::KEY,
            &self.secret,
            "us-east-1",
        )
    }

    /// Every bucket on the server.
    pub fn buckets(&self) -> BTreeSet<String> {
        let admin = self.admin();
        block(async move {
            let out = admin.list_buckets().send().await.expect("ListBuckets");
            out.buckets()
                .iter()
                .filter_map(|b| b.name().map(str::to_owned))
                .collect()
        })
    }

    /// Every object version and delete marker under `prefix` in `bucket` (keys).
    pub fn versions(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let admin = self.admin();
        block(async move { versions(&admin, bucket, prefix).await })
    }
}

/// An S3 client as a world would make one from its tokens: endpoint, keys, region,
/// path-style addressing.
pub fn client(endpoint: &str, key: &str, secret: &str, region: &str) -> Client {
    let conf = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .endpoint_url(endpoint)
        .region(Region::new(region.to_owned()))
        .force_path_style(true)
        .credentials_provider(Credentials::new(key, secret, None, None, "test"))
        .build();
    Client::from_conf(conf)
}

/// The client for a slice's address.
pub fn world_client(addr: &Address) -> Client {
    client(
        &addr.tokens["endpoint"],
        &addr.tokens["access_key_id"],
        &addr.tokens["secret_access_key"],
        &addr.tokens["region"],
    )
}

/// Keys of every version and delete marker under `prefix`.
pub async fn versions(c: &Client, bucket: &str, prefix: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let (mut km, mut vm): (Option<String>, Option<String>) = (None, None);
    loop {
        let out = c
            .list_object_versions()
            .bucket(bucket)
            .prefix(prefix)
            .set_key_marker(km.take())
            .set_version_id_marker(vm.take())
            .send()
            .await
            .expect("ListObjectVersions");
        keys.extend(
            out.versions()
                .iter()
                .filter_map(|v| v.key().map(str::to_owned)),
        );
        keys.extend(
            out.delete_markers()
                .iter()
                .filter_map(|m| m.key().map(str::to_owned)),
        );
        if out.is_truncated() != Some(true) {
            return keys;
        }
        km = out.next_key_marker().map(str::to_owned);
        vm = out.next_version_id_marker().map(str::to_owned);
    }
}

/// Keys under `prefix` in `bucket` (current objects, first 1000).
pub async fn keys(c: &Client, bucket: &str, prefix: &str) -> Vec<String> {
    c.list_objects_v2()
        .bucket(bucket)
        .prefix(prefix)
        .send()
        .await
        .expect("ListObjectsV2")
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect()
}

/// Put `body` at `bucket/key`.
pub async fn put(c: &Client, bucket: &str, key: &str, body: &str) {
    c.put_object()
        .bucket(bucket)
        .key(key)
        .body(ByteStream::from(body.as_bytes().to_vec()))
        .send()
        .await
        .unwrap_or_else(|e| panic!("PutObject {bucket}/{key}: {e:?}"));
}

/// Run `f` to completion on a fresh runtime.
pub fn block<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(f)
}

/// A slice (the s3 adapter has no use for its secret).
pub fn slice(name: &str) -> Slice {
    Slice {
        name: name.to_owned(),
        secret: binky_controllers::adapter::random_secret().unwrap(),
    }
}

/// Provision `slice` with `cfg` and return its address.
pub fn provisioned(slice: &Slice, cfg: &AdapterConfig) -> Address {
    block(async {
        S3.provision(slice, cfg).await.expect("provision");
        S3.resolve(slice, cfg).await.expect("resolve")
    })
}

#[test]
fn two_worlds_get_their_own_bucket_and_see_nothing_of_each_other() {
    let server = MotoServer::start();
    let mut cfg = server.cfg();
    cfg.buckets = vec!["uploads".into(), "/avatars/".into()];
    let (a, b) = (
        slice("bk_acme_login_fix_files"),
        slice("bk_acme_checkout_files"),
    );
    let started = Instant::now();
    let addr_a = provisioned(&a, &cfg);
    eprintln!("provision (2 markers) + resolve: {:?}", started.elapsed());
    let addr_b = provisioned(&b, &cfg);
    assert_eq!(addr_a.url, "s3://bk-acme-login-fix-files");
    assert_eq!(addr_a.tokens["bucket"], "bk-acme-login-fix-files");
    assert_eq!(addr_b.tokens["bucket"], "bk-acme-checkout-files");
    assert_eq!(addr_a.tokens["endpoint"], server.endpoint);
    assert_eq!(addr_a.tokens["prefix"], "");
    assert_eq!(addr_a.tokens["region"], "us-east-1");
    assert!(!addr_a.url.contains(&server.secret));

    let (ca, cb) = (world_client(&addr_a), world_client(&addr_b));
    let (ba, bb) = (&addr_a.tokens["bucket"], &addr_b.tokens["bucket"]);
    block(async {
        // 0.1.2's declared buckets became marker prefixes in each world's bucket.
        let mut markers = keys(&ca, ba, "").await;
        markers.sort();
        assert_eq!(markers, ["avatars/", "uploads/"]);
        put(&ca, ba, "uploads/report.pdf", "a's report").await;
        let got = ca
            .get_object()
            .bucket(ba)
            .key("uploads/report.pdf")
            .send()
            .await
            .expect("A reads its object")
            .body
            .collect()
            .await
            .expect("body")
            .into_bytes();
        assert_eq!(&got[..], b"a's report");
        // B's bucket has nothing of A's: the same key is not there.
        assert!(!keys(&cb, bb, "")
            .await
            .contains(&"uploads/report.pdf".to_owned()));
        let missing = cb
            .get_object()
            .bucket(bb)
            .key("uploads/report.pdf")
            .send()
            .await;
        assert!(missing.is_err(), "B found A's object in its own bucket");
    });
    // Provisioning again changes nothing and loses nothing.
    block(S3.provision(&a, &cfg)).expect("provision again");
    assert_eq!(server.versions(ba, "uploads/report.pdf").len(), 1);
    assert_eq!(
        block(S3.exists(&a, &cfg)).expect("exists"),
        Some(true),
        "HeadBucket"
    );
    let mut listed = block(S3.list(&cfg)).expect("list");
    listed.sort();
    assert_eq!(listed, [b.name.clone(), a.name.clone()]);
}

#[test]
fn prefix_mode_keeps_worlds_apart_inside_one_shared_bucket() {
    let server = MotoServer::start();
    let mut cfg = server.shared_cfg("team-files");
    cfg.buckets = vec!["uploads".into()];
    let (a, b) = (
        slice("bk_acme_login_fix_files"),
        slice("bk_acme_checkout_files"),
    );
    let (addr_a, addr_b) = (provisioned(&a, &cfg), provisioned(&b, &cfg));
    assert_eq!(addr_a.url, "s3://team-files/bk_acme_login_fix_files/");
    assert_eq!(addr_a.tokens["bucket"], "team-files");
    assert_eq!(addr_b.tokens["bucket"], "team-files");
    let (pa, pb) = (&addr_a.tokens["prefix"], &addr_b.tokens["prefix"]);
    assert_eq!(pa, "bk_acme_login_fix_files/");
    assert_ne!(pa, pb);
    let (ca, cb) = (world_client(&addr_a), world_client(&addr_b));
    block(async {
        put(&ca, "team-files", &format!("{pa}uploads/a.txt"), "a").await;
        put(&cb, "team-files", &format!("{pb}uploads/b.txt"), "b").await;
        // Under its own prefix each world sees its marker and its object only.
        let mut seen_b = keys(&cb, "team-files", pb).await;
        seen_b.sort();
        assert_eq!(
            seen_b,
            [
                pb.clone(),
                format!("{pb}uploads/"),
                format!("{pb}uploads/b.txt")
            ]
        );
    });
    let mut listed = block(S3.list(&cfg)).expect("list");
    listed.sort();
    assert_eq!(listed, [b.name.clone(), a.name.clone()]);

    block(S3.teardown(&a, &cfg)).expect("teardown A");
    assert!(
        server.versions("team-files", pa).is_empty(),
        "A's objects outlived it"
    );
    assert_eq!(server.versions("team-files", pb).len(), 3, "B lost objects");
    assert!(
        server.buckets().contains("team-files"),
        "the shared bucket is not binky's"
    );
    assert_eq!(
        block(S3.list(&cfg)).expect("list"),
        std::slice::from_ref(&b.name)
    );
    // The prefix cannot tell it is gone (a world may delete its marker); the bucket can.
    assert_eq!(block(S3.exists(&a, &cfg)).expect("exists"), None);
    block(S3.teardown(&a, &cfg)).expect("second teardown");
    block(S3.teardown(&b, &cfg)).expect("teardown B");
    assert!(server.versions("team-files", "").is_empty());
}

#[test]
fn teardown_leaves_no_bucket_no_version_and_no_upload_and_can_run_twice() {
    let server = MotoServer::start();
    let cfg = server.cfg();
    let (a, b) = (
        slice("bk_acme_many_files"),
        slice("bk_acme_versioned_files"),
    );
    let (addr_a, addr_b) = (provisioned(&a, &cfg), provisioned(&b, &cfg));
    let (ba, bb) = (
        addr_a.tokens["bucket"].clone(),
        addr_b.tokens["bucket"].clone(),
    );
    let started = Instant::now();
    block(async {
        // More than one DeleteObjects batch (1000), written 16 at a time.
        let c = world_client(&addr_a);
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..1050 {
            let (c, bucket) = (c.clone(), ba.clone());
            tasks.spawn(async move { put(&c, &bucket, &format!("obj/{i:05}"), "x").await });
            if tasks.len() >= 16 {
                tasks.join_next().await.expect("a task").expect("put");
            }
        }
        while let Some(r) = tasks.join_next().await {
            r.expect("put");
        }
        // A versioned bucket: old versions, a delete marker, an unfinished upload.
        let c = world_client(&addr_b);
        c.put_bucket_versioning()
            .bucket(&bb)
            .versioning_configuration(
                aws_sdk_s3::types::VersioningConfiguration::builder()
                    .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                    .build(),
            )
            .send()
            .await
            .expect("PutBucketVersioning");
        for v in ["v1", "v2", "v3"] {
            put(&c, &bb, "doc.txt", v).await;
        }
        put(&c, &bb, "gone.txt", "x").await;
        c.delete_object()
            .bucket(&bb)
            .key("gone.txt")
            .send()
            .await
            .expect("DeleteObject");
        c.create_multipart_upload()
            .bucket(&bb)
            .key("big.bin")
            .send()
            .await
            .expect("CreateMultipartUpload");
    });
    eprintln!("wrote 1050 objects in {:?}", started.elapsed());
    assert_eq!(server.versions(&ba, "").len(), 1050);
    assert_eq!(
        server.versions(&bb, "").len(),
        5,
        "3 versions, 1 object, 1 marker"
    );

    let started = Instant::now();
    block(S3.teardown(&a, &cfg)).expect("teardown A");
    eprintln!("teardown of 1050 objects took {:?}", started.elapsed());
    block(S3.teardown(&b, &cfg)).expect("teardown B (versioned)");
    assert!(server.buckets().is_empty(), "{:?}", server.buckets());
    for s in [&a, &b] {
        assert_eq!(block(S3.exists(s, &cfg)).expect("exists"), Some(false));
        block(S3.teardown(s, &cfg)).expect("tearing down what is gone succeeds");
    }
    assert!(block(S3.list(&cfg)).expect("list").is_empty());
}

#[test]
fn an_unreachable_server_or_refused_keys_are_transient_and_never_show_the_secret() {
    let a = slice("bk_acme_w_files");
    let closed = free_port();
    let down = AdapterConfig {
        admin_url: Some(format!("http://AKID:never-shown-secret@127.0.0.1:{closed}")),
        ..AdapterConfig::default()
    };
    // moto checking keys against its (empty) IAM: every key is unknown.
    let strict = MotoServer::start_with(&[("INITIAL_NO_AUTH_ACTION_COUNT", "0")]);
    let refused = AdapterConfig {
        admin_url: Some(format!(
            "http://AKIDUNKNOWN:never-shown-secret@127.0.0.1:{}",
            strict.port
        )),
        ..AdapterConfig::default()
    };
    for (cfg, what) in [
        (&down, "connection refused"),
        (&refused, "InvalidAccessKeyId"),
    ] {
        let started = Instant::now();
        let errors = block(async {
            [
                S3.provision(&a, cfg).await.err(),
                S3.teardown(&a, cfg).await.err(),
                S3.list(cfg).await.err(),
                S3.exists(&a, cfg).await.err(),
            ]
        });
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{:?}",
            started.elapsed()
        );
        for err in errors {
            let err = err.unwrap_or_else(|| panic!("{what}: succeeded"));
            let text = err.to_string();
            eprintln!("{what}: {text}");
            assert!(
                matches!(err, AdapterError::Unreachable { .. }) && err.transient(),
                "{what}: {text}"
            );
            assert!(!text.contains("never-shown-secret"), "{text}");
            assert!(text.contains("127.0.0.1"), "{text}");
            if what == "InvalidAccessKeyId" {
                assert!(
                    text.contains("InvalidAccessKeyId") && text.contains("admin_url"),
                    "{text}"
                );
            }
        }
    }
    // Without keys there is nothing to retry: the message names the fix.
    let no_keys = AdapterConfig {
        admin_url: Some(format!("http://127.0.0.1:{closed}")),
        ..AdapterConfig::default()
    };
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
        let err = block(S3.provision(&a, &no_keys)).expect_err("no keys");
        assert!(matches!(err, AdapterError::Config(_)), "{err}");
        assert!(err.to_string().contains("ACCESS_KEY:SECRET"), "{err}");
    }
}

#[test]
fn minio_is_the_same_adapter_and_cannot_clone() {
    let registry = Registry::default();
    for name in ["s3", "minio", "minio@2024"] {
        assert_eq!(registry.get(name).expect(name).names(), ["s3", "minio"]);
    }
    let server = MotoServer::start();
    let adapter = registry.get("minio").expect("minio");
    assert!(
        !block(adapter.capabilities(&server.cfg()))
            .expect("caps")
            .clone
    );
    let (from, to) = (slice("bk_acme_golden_files"), slice("bk_acme_w_files"));
    let err = block(adapter.clone_slice(&from, &to, &server.cfg())).expect_err("no clone");
    assert!(matches!(err, AdapterError::NoClone(_)), "{err}");
    assert_eq!(binky::adapters::can_clone_statically("minio"), Some(false));
}
