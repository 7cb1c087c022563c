//! Redis: a private `redis-server` per test (the [`RedisServer`] fixture, shared with other
//! test modules), the `redis` adapter's isolation between worlds proven against it, and
//! binky's managed redis server.
//!
//! Every test starts its own server in a temp dir on a free loopback port and stops it on
//! drop; nothing is left behind. Without `redis-server` the tests fail (never skip):
//! `./scripts/test` installs it.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::future::Future;
use std::time::{Duration, Instant};

use binky::adapters::redis::Redis;
use binky::adapters::{Adapter, AdapterConfig, AdapterError, Address, Registry, Slice};
use binky::servers::StartCtx;
use redis::Value;

pub use binky_testkit::net::free_port;

/// A private redis-server (the kit's: `--save "" --appendonly no`, `requirepass` set, on
/// 127.0.0.1), with the adapter's view of it. Stopped (its directory removed) on drop.
pub struct RedisServer(binky_testkit::servers::redis::RedisServer);

impl std::ops::Deref for RedisServer {
    type Target = binky_testkit::servers::redis::RedisServer;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl RedisServer {
    /// Start one; panics (failing the test) when redis-server is missing.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// Start one with `extra` arguments (`["--databases", "3"]`).
    pub fn start_with(extra: &[&str]) -> RedisServer {
        RedisServer(
            binky_testkit::servers::redis::RedisServer::start_with(extra)
                .unwrap_or_else(|e| panic!("{e}")),
        )
    }

    /// An admin connection.
    pub fn admin(&self) -> redis::Connection {
        connect(&self.admin_url)
    }

    /// The adapter configuration for this server, worlds kept apart by a key prefix
    /// (`isolation = "prefix"`).
    pub fn cfg(&self) -> AdapterConfig {
        prefix_cfg(&self.admin_url)
    }

    /// The adapter configuration for this server, a database per world (the default with
    /// an `admin_url`).
    pub fn database_cfg(&self) -> AdapterConfig {
        AdapterConfig {
            admin_url: Some(self.admin_url.clone()),
            ..AdapterConfig::default()
        }
    }

    /// Every key matching `pattern` in database `db` (as admin, with SCAN).
    pub fn keys_in(&self, db: i64, pattern: &str) -> BTreeSet<String> {
        let mut con = self.admin();
        redis::cmd("SELECT")
            .arg(db)
            .query::<()>(&mut con)
            .expect("SELECT");
        let mut keys = BTreeSet::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query(&mut con)
                .expect("SCAN");
            keys.extend(batch);
            if next == 0 {
                return keys;
            }
            cursor = next;
        }
    }

    /// Every key matching `pattern` in database 0.
    pub fn keys(&self, pattern: &str) -> BTreeSet<String> {
        self.keys_in(0, pattern)
    }

    /// The server's ACL users.
    pub fn users(&self) -> Vec<String> {
        redis::cmd("ACL")
            .arg("USERS")
            .query(&mut self.admin())
            .expect("ACL USERS")
    }

    /// The number of keys in database 0.
    pub fn dbsize(&self) -> i64 {
        redis::cmd("DBSIZE")
            .query(&mut self.admin())
            .expect("DBSIZE")
    }
}

/// The adapter configuration for the server at `admin_url` with `isolation = "prefix"`.
pub fn prefix_cfg(admin_url: &str) -> AdapterConfig {
    AdapterConfig {
        admin_url: Some(admin_url.to_owned()),
        options: [("isolation".to_owned(), "prefix".to_owned())].into(),
        ..AdapterConfig::default()
    }
}

/// A connection to `url` (which carries its credentials).
pub fn connect(url: &str) -> redis::Connection {
    redis::Client::open(url)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
        .unwrap_or_else(|e| panic!("connect to {}: {e}", binky::adapters::redact(url)))
}

/// Run `f` to completion on a fresh runtime.
pub fn block<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(f)
}

/// A slice with a fresh secret.
pub fn slice(name: &str) -> Slice {
    Slice {
        name: name.to_owned(),
        secret: binky_controllers::adapter::random_secret().unwrap(),
    }
}

/// Provision `slice` on `server` and return its address.
pub fn provisioned(server: &RedisServer, slice: &Slice) -> Address {
    block(async {
        Redis
            .provision(slice, &server.cfg())
            .await
            .expect("provision");
        Redis.resolve(slice, &server.cfg()).await.expect("resolve")
    })
}

/// Run a command (`args[0]` and its arguments).
pub fn run(con: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(con)
}

/// Assert the server refused `args` for lack of permission.
#[track_caller]
pub fn assert_noperm(con: &mut redis::Connection, args: &[&str]) {
    match run(con, args) {
        Err(e) if e.code() == Some("NOPERM") => {}
        other => panic!("{args:?} was not refused with NOPERM: {other:?}"),
    }
}

/// Two worlds' slices on one server, with their open connections.
struct TwoWorlds {
    server: RedisServer,
    a: Slice,
    b: Slice,
    a_url: String,
    b_url: String,
}

fn two_worlds() -> TwoWorlds {
    let server = RedisServer::start();
    let a = slice("bk_acme_login_fix_cache");
    let b = slice("bk_acme_checkout_cache");
    let a_url = provisioned(&server, &a).url;
    let b_url = provisioned(&server, &b).url;
    TwoWorlds {
        server,
        a,
        b,
        a_url,
        b_url,
    }
}

/// B's data, written as B.
fn seed_b(w: &TwoWorlds) {
    let mut b = connect(&w.b_url);
    for args in [
        &["SET", "bk_acme_checkout_cache:session", "b-secret"][..],
        &["HSET", "bk_acme_checkout_cache:user:1", "name", "bob"],
        &["RPUSH", "bk_acme_checkout_cache:queue", "job1", "job2"],
    ] {
        run(&mut b, args).expect("B writes its own keys");
    }
}

/// B's data is exactly as [`seed_b`] left it.
#[track_caller]
fn assert_b_intact(w: &TwoWorlds) {
    let mut b = connect(&w.b_url);
    let session: String = redis::cmd("GET")
        .arg("bk_acme_checkout_cache:session")
        .query(&mut b)
        .expect("B reads its key");
    assert_eq!(session, "b-secret");
    let name: String = redis::cmd("HGET")
        .arg("bk_acme_checkout_cache:user:1")
        .arg("name")
        .query(&mut b)
        .expect("B reads its hash");
    assert_eq!(name, "bob");
    let queue: Vec<String> = redis::cmd("LRANGE")
        .arg("bk_acme_checkout_cache:queue")
        .arg(0)
        .arg(-1)
        .query(&mut b)
        .expect("B reads its list");
    assert_eq!(queue, ["job1", "job2"]);
    assert_eq!(
        w.server.keys("bk_acme_checkout_cache:*").len(),
        3,
        "B's keys"
    );
}

#[test]
fn a_world_reads_and_writes_its_own_prefixed_keys() {
    let server = RedisServer::start();
    let a = slice("bk_acme_login_fix_cache");
    let addr = provisioned(&server, &a);
    assert_eq!(
        addr.url,
        format!(
            "redis://bk_acme_login_fix_cache:{}@127.0.0.1:{}/0",
            a.secret, server.port
        )
    );
    assert_eq!(addr.tokens["prefix"], "bk_acme_login_fix_cache:");

    let mut con = connect(&addr.url);
    let who: String = redis::cmd("ACL")
        .arg("WHOAMI")
        .query(&mut con)
        .expect("WHOAMI");
    assert_eq!(who, "bk_acme_login_fix_cache");
    let p = &addr.tokens["prefix"];
    let k = |s: &str| format!("{p}{s}");
    redis::cmd("SET")
        .arg(k("greeting"))
        .arg("hello")
        .arg("EX")
        .arg(60)
        .query::<()>(&mut con)
        .expect("SET");
    let got: String = redis::cmd("GET")
        .arg(k("greeting"))
        .query(&mut con)
        .expect("GET");
    assert_eq!(got, "hello");
    let n: i64 = redis::cmd("INCRBY")
        .arg(k("hits"))
        .arg(5)
        .query(&mut con)
        .expect("INCRBY");
    assert_eq!(n, 5);
    run(&mut con, &["HSET", &k("h"), "f", "v"]).expect("HSET");
    run(&mut con, &["RENAME", &k("h"), &k("h2")]).expect("RENAME within the prefix");
    run(&mut con, &["COPY", &k("h2"), &k("h3")]).expect("COPY within the prefix");
    // Transactions, scripts and the usual connection chatter work under the prefix.
    let (x, y): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg(k("tx"))
        .cmd("INCR")
        .arg(k("tx"))
        .query(&mut con)
        .expect("MULTI/EXEC");
    assert_eq!((x, y), (1, 2));
    let from_script: String = redis::cmd("EVAL")
        .arg("return redis.call('GET', KEYS[1])")
        .arg(1)
        .arg(k("greeting"))
        .query(&mut con)
        .expect("EVAL on its own key");
    assert_eq!(from_script, "hello");
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg("return 1")
        .query(&mut con)
        .expect("SCRIPT LOAD");
    run(&mut con, &["EVALSHA", &sha, "0"]).expect("EVALSHA");
    for args in [
        &["PING"][..],
        &["CLIENT", "SETNAME", "web"],
        &["CLIENT", "GETNAME"],
        &["CLIENT", "ID"],
        &["CLIENT", "INFO"],
        &["SELECT", "0"],
        &["COMMAND", "COUNT"],
        &["MEMORY", "USAGE", &k("greeting")],
        &["PUBLISH", &k("events"), "hi"],
    ] {
        run(&mut con, args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    }
    // A client of the world's database (`/3`) may select it, and only it.
    let cfg3 = prefix_cfg(&server.admin_url.replace("/0", "/3"));
    let c = slice("bk_acme_other_db_cache");
    let url3 = block(async {
        Redis.provision(&c, &cfg3).await.expect("provision on db 3");
        Redis.resolve(&c, &cfg3).await.expect("resolve")
    })
    .url;
    assert!(url3.ends_with("/3"), "{url3}");
    let mut con3 = connect(&url3);
    run(&mut con3, &["SET", "bk_acme_other_db_cache:k", "v"]).expect("SET in db 3");
    assert_eq!(server.keys_in(3, "*").len(), 1);
    assert_noperm(&mut con3, &["SELECT", "0"]);
}

#[test]
fn a_world_can_neither_read_overwrite_nor_delete_another_worlds_keys() {
    let w = two_worlds();
    seed_b(&w);
    let mut a = connect(&w.a_url);
    let bk = "bk_acme_checkout_cache:session";
    let mine = "bk_acme_login_fix_cache:x";
    run(&mut a, &["SET", mine, "1"]).expect("A writes its own key");
    for args in [
        &["GET", bk][..],
        &["SET", bk, "stolen"],
        &["SETNX", "bk_acme_checkout_cache:new", "1"],
        &["APPEND", bk, "x"],
        &["DEL", bk],
        &["UNLINK", bk],
        &["EXPIRE", bk, "1"],
        &["PERSIST", bk],
        &["EXISTS", bk],
        &["TYPE", bk],
        &["TTL", bk],
        &["DUMP", bk],
        &["OBJECT", "ENCODING", bk],
        &["MEMORY", "USAGE", bk],
        &["HGETALL", "bk_acme_checkout_cache:user:1"],
        &["LPOP", "bk_acme_checkout_cache:queue"],
        &["BLPOP", "bk_acme_checkout_cache:queue", "1"],
        &["RENAME", bk, mine],
        &["RENAME", mine, bk],
        &["COPY", bk, mine],
        &["COPY", mine, bk, "REPLACE"],
        &["MGET", mine, bk],
        &["SUNIONSTORE", mine, bk],
        &["GET", "unprefixed"],
        &["EVAL", "return redis.call('GET', KEYS[1])", "1", bk],
        // A script reaches no further than its caller, declared keys or not.
        &[
            "EVAL",
            "return redis.call('GET', 'bk_acme_checkout_cache:session')",
            "0",
        ],
        &[
            "EVAL",
            "return redis.call('DEL', 'bk_acme_checkout_cache:session')",
            "0",
        ],
        &["EVAL", "return redis.call('KEYS', '*')", "0"],
    ] {
        match run(&mut a, args) {
            // Scripts report a denied call as a script error naming the ACL.
            Err(e) if args[0] == "EVAL" => {
                let text = e.to_string();
                assert!(
                    e.code() == Some("NOPERM") || text.contains("can't"),
                    "{args:?}: {text}"
                );
            }
            Err(e) if e.code() == Some("NOPERM") => {}
            other => panic!("{args:?} was not refused: {other:?}"),
        }
    }
    // A transaction touching B's key is refused as a whole.
    let tx: redis::RedisResult<Value> = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg(mine)
        .arg("2")
        .cmd("DEL")
        .arg(bk)
        .query(&mut a);
    assert!(tx.is_err(), "a MULTI touching B's key ran: {tx:?}");
    assert_b_intact(&w);
}

#[test]
fn commands_that_cross_prefixes_are_refused() {
    let w = two_worlds();
    seed_b(&w);
    let mut a = connect(&w.a_url);
    run(&mut a, &["SET", "bk_acme_login_fix_cache:x", "1"]).expect("A writes its own key");
    for args in [
        &["KEYS", "*"][..],
        &["KEYS", "bk_acme_login_fix_cache:*"],
        &["SCAN", "0"],
        &["SCAN", "0", "MATCH", "bk_acme_login_fix_cache:*"],
        &["RANDOMKEY"],
        &["DBSIZE"],
        &["FLUSHALL"],
        &["FLUSHDB"],
        &["FLUSHDB", "ASYNC"],
        &["SWAPDB", "0", "1"],
        &["SELECT", "1"],
        &["MOVE", "bk_acme_login_fix_cache:x", "1"],
        &[
            "MIGRATE",
            "127.0.0.1",
            "1",
            "bk_acme_login_fix_cache:x",
            "0",
            "1000",
        ],
        &[
            "SORT",
            "bk_acme_login_fix_cache:x",
            "BY",
            "bk_acme_checkout_cache:*",
        ],
        &["RESTORE", "bk_acme_login_fix_cache:y", "0", "x"],
        &["INFO"],
        &["INFO", "keyspace"],
        &["CONFIG", "GET", "*"],
        &["CLIENT", "LIST"],
        &["CLIENT", "KILL", "USER", "bk_acme_checkout_cache"],
        &["CLIENT", "PAUSE", "1000"],
        &["CLIENT", "TRACKING", "ON", "BCAST"],
        &["PUBSUB", "CHANNELS"],
        &["PUBSUB", "NUMSUB", "bk_acme_checkout_cache:events"],
        &["PUBSUB", "NUMPAT"],
        &["FUNCTION", "LIST"],
        &["FUNCTION", "FLUSH"],
        &["SCRIPT", "FLUSH"],
        &["SCRIPT", "KILL"],
        &["MEMORY", "STATS"],
        &["SLOWLOG", "GET"],
        &["LATENCY", "LATEST"],
        &["ACL", "LIST"],
        &["ACL", "LOG"],
        &["ACL", "SETUSER", "bk_acme_login_fix_cache", "~*"],
        &["CLUSTER", "GETKEYSINSLOT", "0", "10"],
        &["SAVE"],
        &["SHUTDOWN", "NOSAVE"],
    ] {
        assert_noperm(&mut a, args);
    }
    assert_b_intact(&w);
    assert_eq!(w.server.dbsize(), 4, "every key is still there");
}

#[test]
fn a_world_cannot_subscribe_or_publish_to_another_worlds_channels() {
    let w = two_worlds();
    let b_channel = "bk_acme_checkout_cache:events";
    // B listens on its channel.
    let mut b = connect(&w.b_url);
    b.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    let mut b_sub = b.as_pubsub();
    b_sub
        .subscribe(b_channel)
        .expect("B subscribes to its channel");

    let mut a = connect(&w.a_url);
    assert_noperm(&mut a, &["PUBLISH", b_channel, "from A"]);
    assert_noperm(&mut a, &["PUBLISH", "unprefixed", "from A"]);
    assert_noperm(&mut a, &["SPUBLISH", b_channel, "from A"]);
    assert_noperm(&mut a, &["PUBSUB", "CHANNELS"]);
    assert_noperm(&mut a, &["PUBSUB", "NUMSUB", b_channel]);
    for args in [
        &["SUBSCRIBE", b_channel][..],
        &["SUBSCRIBE", "unprefixed"],
        &["PSUBSCRIBE", "*"],
        &["PSUBSCRIBE", "bk_acme_checkout_cache:*"],
        &["PSUBSCRIBE", "bk_acme_*"],
        &["SSUBSCRIBE", b_channel],
    ] {
        // A fresh connection each time: a refused SUBSCRIBE leaves none in pub/sub mode.
        assert_noperm(&mut connect(&w.a_url), args);
    }
    // B's first message is the admin's marker: nothing of A's reached it.
    redis::cmd("PUBLISH")
        .arg(b_channel)
        .arg("marker")
        .query::<i64>(&mut w.server.admin())
        .expect("admin publishes");
    let first: String = b_sub
        .get_message()
        .expect("B receives")
        .get_payload()
        .expect("payload");
    assert_eq!(first, "marker");
    drop(b_sub);

    // A's own channels work, including the one pattern its ACL names.
    let mut a_listen = connect(&w.a_url);
    a_listen
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    let mut a_sub = a_listen.as_pubsub();
    a_sub
        .psubscribe("bk_acme_login_fix_cache:*")
        .expect("A subscribes to its prefix");
    let receivers: i64 = redis::cmd("PUBLISH")
        .arg("bk_acme_login_fix_cache:events")
        .arg("own")
        .query(&mut a)
        .expect("A publishes on its channel");
    assert_eq!(receivers, 1);
    let msg = a_sub.get_message().expect("A receives");
    assert_eq!(msg.get_channel_name(), "bk_acme_login_fix_cache:events");
}

/// Commands without key arguments that a slice user may run, each reviewed: none reads,
/// changes or reveals anything outside the caller's prefix or connection.
const REVIEWED_KEYLESS: &[(&str, &str)] = &[
    ("acl|cat", "the server's category names"),
    ("acl|genpass", "random bytes"),
    ("acl|help", "help text"),
    ("acl|whoami", "the caller's own user name"),
    ("asking", "cluster flag of the caller's connection"),
    ("readonly", "cluster flag of the caller's connection"),
    ("readwrite", "cluster flag of the caller's connection"),
    ("auth", "authenticates the caller's connection"),
    ("hello", "the caller's protocol and identity"),
    ("reset", "resets the caller's connection"),
    ("quit", "closes the caller's connection"),
    ("ping", "echo"),
    ("echo", "echo"),
    ("time", "the clock"),
    ("lolwut", "art"),
    ("client|getname", "the caller's connection"),
    ("client|setname", "the caller's connection"),
    ("client|setinfo", "the caller's connection (7.2+)"),
    ("client|id", "the caller's connection"),
    ("client|info", "the caller's connection"),
    ("client|reply", "the caller's connection"),
    ("client|no-touch", "the caller's connection (7.2+)"),
    ("client|help", "help text"),
    ("command|count", "the server's command table"),
    ("command|docs", "the server's command table"),
    ("command|getkeys", "parses the arguments it is given"),
    (
        "command|getkeysandflags",
        "parses the arguments it is given",
    ),
    ("command|help", "help text"),
    ("command|info", "the server's command table"),
    ("command|list", "the server's command table"),
    (
        "multi",
        "the caller's transaction; each queued command is checked",
    ),
    (
        "exec",
        "the caller's transaction; each queued command is checked",
    ),
    ("discard", "the caller's transaction"),
    ("unwatch", "the caller's watched keys"),
    ("publish", "checked against &<prefix>*"),
    ("subscribe", "checked against &<prefix>*"),
    ("psubscribe", "checked against &<prefix>* (literally)"),
    ("unsubscribe", "the caller's subscriptions"),
    ("punsubscribe", "the caller's subscriptions"),
    (
        "script|load",
        "content-addressed script cache; changes nothing for others",
    ),
    ("script|exists", "content-addressed script cache"),
    ("script|help", "help text"),
    ("memory|help", "help text"),
    ("module|help", "help text"),
    ("object|help", "help text"),
    ("xgroup|help", "help text"),
    ("xinfo|help", "help text"),
    (
        "wait",
        "waits for replicas to acknowledge the caller's writes",
    ),
    (
        "waitaof",
        "waits for the AOF to hold the caller's writes (7.2+)",
    ),
];

/// The leaf commands of a `COMMAND` reply: (name, arity, has key specs).
fn leaf_commands(reply: &[Value], out: &mut Vec<(String, i64, bool)>) {
    for entry in reply {
        let Value::Array(fields) = entry else {
            continue;
        };
        let name = match &fields[0] {
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            Value::SimpleString(s) => s.clone(),
            other => panic!("command name: {other:?}"),
        };
        let arity = match &fields[1] {
            Value::Int(n) => *n,
            other => panic!("arity: {other:?}"),
        };
        let has_keys = matches!(&fields[8], Value::Array(specs) if !specs.is_empty());
        match fields.get(9) {
            Some(Value::Array(subs)) if !subs.is_empty() => leaf_commands(subs, out),
            _ => out.push((name, arity, has_keys)),
        }
    }
}

#[test]
fn every_command_a_slice_may_run_is_key_checked_or_reviewed() {
    let server = RedisServer::start();
    let a = slice("bk_acme_login_fix_cache");
    provisioned(&server, &a);
    let mut admin = server.admin();
    let reply: Vec<Value> = redis::cmd("COMMAND").query(&mut admin).expect("COMMAND");
    let mut commands = Vec::new();
    leaf_commands(&reply, &mut commands);
    assert!(commands.len() > 200, "only {} commands", commands.len());
    let reviewed: BTreeSet<&str> = REVIEWED_KEYLESS.iter().map(|(c, _)| *c).collect();
    let mut unreviewed = Vec::new();
    let mut allowed = 0;
    for (name, arity, has_keys) in &commands {
        // Every argument a key (and channel) under A's prefix: only the command itself can
        // be refused.
        let mut argv: Vec<String> = name.split('|').map(str::to_owned).collect();
        while (argv.len() as i64) < arity.abs() {
            argv.push("bk_acme_login_fix_cache:k".into());
        }
        let verdict: String = redis::cmd("ACL")
            .arg("DRYRUN")
            .arg(&a.name)
            .arg(&argv)
            .query(&mut admin)
            .unwrap_or_else(|e| panic!("ACL DRYRUN {argv:?}: {e}"));
        if verdict != "OK" {
            continue;
        }
        allowed += 1;
        if !has_keys && !reviewed.contains(name.as_str()) {
            unreviewed.push(name.clone());
        }
    }
    assert!(allowed > 100, "only {allowed} commands allowed");
    assert!(
        unreviewed.is_empty(),
        "a slice user may run these commands without key arguments, which nobody reviewed \
         for crossing prefixes: {unreviewed:?} (deny them in src/adapters/redis.rs, or add \
         them to REVIEWED_KEYLESS with the reason they are safe)"
    );
}

#[test]
fn teardown_removes_every_key_of_the_world_and_its_user_and_leaves_others_alone() {
    let w = two_worlds();
    seed_b(&w);
    // 2500 keys: SCAN … COUNT 1000 needs several rounds.
    let mut a = connect(&w.a_url);
    for chunk in (0..2500).collect::<Vec<_>>().chunks(500) {
        let mut cmd = redis::cmd("MSET");
        for i in chunk {
            cmd.arg(format!("bk_acme_login_fix_cache:k{i}")).arg(i);
        }
        cmd.query::<()>(&mut a).expect("MSET");
    }
    // COPY … DB puts a key of A's in another database: teardown finds it there too.
    run(
        &mut a,
        &[
            "COPY",
            "bk_acme_login_fix_cache:k1",
            "bk_acme_login_fix_cache:k1",
            "DB",
            "5",
        ],
    )
    .expect("COPY to db 5");
    // A key outside every prefix (the admin's) must survive too.
    run(
        &mut w.server.admin(),
        &["SET", "bk_acme_login_fix_cache_other", "admin"],
    )
    .expect("SET");
    assert_eq!(w.server.keys("bk_acme_login_fix_cache:*").len(), 2500);
    assert_eq!(w.server.keys_in(5, "*").len(), 1);

    block(Redis.teardown(&w.a, &w.server.cfg())).expect("teardown");

    assert!(w.server.keys("bk_acme_login_fix_cache:*").is_empty());
    assert!(w.server.keys_in(5, "*").is_empty());
    assert!(
        !w.server.users().contains(&w.a.name),
        "{:?}",
        w.server.users()
    );
    assert!(
        run(&mut a, &["PING"]).is_err(),
        "A's connection survived its user"
    );
    assert!(
        redis::Client::open(w.a_url.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .is_err(),
        "A's URL still authenticates"
    );
    assert_eq!(w.server.keys("bk_acme_login_fix_cache_other").len(), 1);
    assert_b_intact(&w);
    assert!(w.server.users().contains(&w.b.name));
    // Tearing down what is gone succeeds.
    block(Redis.teardown(&w.a, &w.server.cfg())).expect("second teardown");
}

#[test]
fn provisioning_again_heals_drift_and_keeps_the_worlds_connections() {
    let w = two_worlds();
    seed_b(&w);
    let mut a = connect(&w.a_url);
    run(&mut a, &["SET", "bk_acme_login_fix_cache:x", "1"]).expect("SET");
    // A subscriber of A's, which provisioning must not cut off either.
    let mut listener = connect(&w.a_url);
    listener
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    let mut sub = listener.as_pubsub();
    sub.subscribe("bk_acme_login_fix_cache:events")
        .expect("A subscribes");
    // Someone widens A's user by hand.
    run(
        &mut w.server.admin(),
        &["ACL", "SETUSER", &w.a.name, "~*", "+keys", "allchannels"],
    )
    .expect("drift");
    run(&mut a, &["GET", "bk_acme_checkout_cache:session"]).expect("drifted: A reads B");

    block(Redis.provision(&w.a, &w.server.cfg())).expect("provision again");
    // The same rule again: nothing changes, nobody is disconnected.
    block(Redis.provision(&w.a, &w.server.cfg())).expect("and again");

    assert_noperm(&mut a, &["GET", "bk_acme_checkout_cache:session"]);
    assert_noperm(&mut a, &["KEYS", "*"]);
    assert_noperm(&mut a, &["PUBLISH", "bk_acme_checkout_cache:events", "x"]);
    let x: String = redis::cmd("GET")
        .arg("bk_acme_login_fix_cache:x")
        .query(&mut a)
        .expect("A's open connection still works");
    assert_eq!(x, "1");
    let receivers: i64 = redis::cmd("PUBLISH")
        .arg("bk_acme_login_fix_cache:events")
        .arg("still here")
        .query(&mut a)
        .expect("PUBLISH");
    assert_eq!(receivers, 1, "A's subscriber was dropped");
    let msg: String = sub
        .get_message()
        .expect("A's subscriber receives")
        .get_payload()
        .expect("payload");
    assert_eq!(msg, "still here");
    assert_eq!(
        block(Redis.resolve(&w.a, &w.server.cfg()))
            .expect("resolve")
            .url,
        w.a_url
    );
    let mut listed = block(Redis.list(&w.server.cfg())).expect("list");
    listed.sort();
    assert_eq!(listed, [w.b.name.clone(), w.a.name.clone()]);
    assert_b_intact(&w);
}

#[test]
fn an_unreachable_server_or_refused_admin_is_transient_and_never_shows_a_password() {
    let server = RedisServer::start();
    let a = slice("bk_acme_login_fix_cache");
    let closed = free_port();
    let cases = [
        (
            format!("redis://default:{}@127.0.0.1:{closed}/0", server.password),
            server.password.clone(),
        ),
        (
            format!("redis://default:wrong-pw-123@127.0.0.1:{}/0", server.port),
            "wrong-pw-123".to_owned(),
        ),
        (
            format!("redis://127.0.0.1:{}/0", server.port),
            server.password.clone(),
        ),
    ];
    for (url, password) in cases {
        let cfg = AdapterConfig {
            admin_url: Some(url.clone()),
            ..AdapterConfig::default()
        };
        let errors = block(async {
            [
                Redis.provision(&a, &cfg).await.err(),
                Redis.teardown(&a, &cfg).await.err(),
                Redis.list(&cfg).await.err(),
            ]
        });
        for err in errors {
            let err = err.unwrap_or_else(|| panic!("{} succeeded", binky::adapters::redact(&url)));
            let text = err.to_string();
            assert!(
                matches!(err, AdapterError::Unreachable { .. }) && err.transient(),
                "{text}"
            );
            assert!(!text.contains(&password), "password in: {text}");
            assert!(!text.contains(&a.secret), "secret in: {text}");
            assert!(text.contains("127.0.0.1"), "{text}");
        }
    }
    // Without an admin address there is nothing to retry: the message names the fix.
    let err = block(Redis.provision(&a, &AdapterConfig::default())).expect_err("no admin_url");
    assert!(matches!(err, AdapterError::Config(_)), "{err}");
    assert!(err.to_string().contains("admin_url"), "{err}");
    assert!(!server.users().contains(&a.name));
}

#[test]
fn a_server_that_never_answers_is_given_up_on_within_seconds() {
    // Accepts connections and says nothing, like a hung server.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let cfg = AdapterConfig {
        admin_url: Some(format!("redis://default:pw-never-shown@127.0.0.1:{port}/0")),
        ..AdapterConfig::default()
    };
    let started = Instant::now();
    let err = block(Redis.provision(&slice("bk_acme_w_cache"), &cfg)).expect_err("no answer");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(err, AdapterError::Unreachable { .. }), "{err}");
    assert!(!err.to_string().contains("pw-never-shown"), "{err}");
}

#[test]
fn valkey_is_the_same_adapter_under_another_name() {
    let registry = Registry::default();
    for name in ["redis", "valkey", "valkey@8"] {
        let adapter = registry.get(name).expect(name);
        assert_eq!(adapter.names(), ["redis", "valkey"]);
    }
    let server = RedisServer::start();
    let a = slice("bk_acme_w_cache");
    let adapter = registry.get("valkey").expect("valkey");
    let caps = block(adapter.capabilities(&server.cfg())).expect("capabilities");
    assert!(!caps.clone);
    block(adapter.provision(&a, &server.cfg())).expect("provision");
    let url = block(adapter.resolve(&a, &server.cfg()))
        .expect("resolve")
        .url;
    run(&mut connect(&url), &["SET", "bk_acme_w_cache:k", "v"]).expect("SET");
    block(adapter.teardown(&a, &server.cfg())).expect("teardown");
    assert!(server.keys("*").is_empty());
}

/// A managed server's process group, killed on drop if a test fails midway.
struct ManagedPid(u32);

impl Drop for ManagedPid {
    fn drop(&mut self) {
        let pg = nix::unistd::Pid::from_raw(self.0 as i32);
        let _ = nix::sys::signal::killpg(pg, nix::sys::signal::Signal::SIGKILL);
    }
}

fn process_gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if !matches!(binky_platform::proc::stat(pid), Some(s) if s.state != 'Z') {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn the_managed_server_serves_its_admin_url_and_keeps_data_users_and_password_across_restarts() {
    assert!(
        binky::servers::redis::find_binary().is_some(),
        "redis-server is not installed: run ./scripts/test, which installs it"
    );
    let tmp = tempfile::tempdir().expect("temp dir");
    let ctx = StartCtx {
        data_dir: tmp.path().join("data"),
        port: free_port(),
        password: binky_controllers::adapter::random_secret().unwrap(),
        log: tmp.path().join("server.log"),
    };
    let started = block(binky::servers::redis::start(&ctx)).expect("start");
    let guard = ManagedPid(started.pid);
    assert_eq!(
        started.admin_url,
        format!("redis://default:{}@127.0.0.1:{}", ctx.password, ctx.port)
    );
    assert!(started.version.starts_with('7') || started.version.starts_with("valkey"));
    // The password is on no command line, and in no file as text.
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", started.pid)).expect("cmdline");
    assert!(!String::from_utf8_lossy(&cmdline).contains(&ctx.password));
    for f in ["redis.conf", "users.acl"] {
        let path = ctx.data_dir.join(f);
        let text = std::fs::read_to_string(&path).expect(f);
        assert!(!text.contains(&ctx.password), "{f} holds the password");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect(f).permissions().mode();
        assert_eq!(mode & 0o077, 0, "{f} is readable by others");
    }
    // Only the password opens it.
    assert!(run(
        &mut connect(&format!("redis://127.0.0.1:{}", ctx.port)),
        &["GET", "k"]
    )
    .is_err());

    let cfg = prefix_cfg(&started.admin_url);
    let a = slice("bk_acme_w_cache");
    block(Redis.provision(&a, &cfg)).expect("provision on the managed server");
    let a_url = block(Redis.resolve(&a, &cfg)).expect("resolve").url;
    run(
        &mut connect(&a_url),
        &["SET", "bk_acme_w_cache:kept", "yes"],
    )
    .expect("SET");
    run(&mut connect(&started.admin_url), &["SET", "admin-key", "1"]).expect("SET");

    block(binky::supervisor::stop_group(
        started.pid,
        Duration::from_secs(10),
    ));
    assert!(process_gone(started.pid), "the server outlived its stop");
    // Stopped: nothing left for the guard to kill (its pid may be reused).
    std::mem::forget(guard);

    let again = block(binky::servers::redis::start(&ctx)).expect("restart");
    let guard = ManagedPid(again.pid);
    assert_eq!(
        again.admin_url, started.admin_url,
        "same password, same port"
    );
    let kept: String = redis::cmd("GET")
        .arg("bk_acme_w_cache:kept")
        .query(&mut connect(&a_url))
        .expect("the slice's user and data survived the restart");
    assert_eq!(kept, "yes");
    let admin_key: String = redis::cmd("GET")
        .arg("admin-key")
        .query(&mut connect(&again.admin_url))
        .expect("GET");
    assert_eq!(admin_key, "1");
    assert_noperm(&mut connect(&a_url), &["KEYS", "*"]);

    block(binky::supervisor::stop_group(
        again.pid,
        Duration::from_secs(10),
    ));
    assert!(process_gone(again.pid), "the server outlived its stop");
    std::mem::forget(guard);
}

/// Commands without key arguments a world's user may run in `database` mode, on top of
/// [`REVIEWED_KEYLESS`], each reviewed: each acts on the caller's own database (which is
/// the world's alone), or on server-wide things the mode documents as shared.
const DATABASE_REVIEWED_KEYLESS: &[(&str, &str)] = &[
    ("keys", "the caller's database"),
    ("scan", "the caller's database"),
    ("randomkey", "the caller's database"),
    ("dbsize", "the caller's database"),
    ("flushdb", "the caller's database"),
    (
        "info",
        "counts of other databases' keys and clients: documented",
    ),
    ("select", "only `SELECT N` of its own database passes"),
    (
        "psubscribe",
        "channels are server-wide in this mode: documented",
    ),
    (
        "pubsub|channels",
        "channels are server-wide in this mode: documented",
    ),
    (
        "pubsub|numpat",
        "channels are server-wide in this mode: documented",
    ),
    (
        "pubsub|numsub",
        "channels are server-wide in this mode: documented",
    ),
    (
        "pubsub|shardchannels",
        "channels are server-wide in this mode: documented",
    ),
    (
        "pubsub|shardnumsub",
        "channels are server-wide in this mode: documented",
    ),
    ("pubsub|help", "help text"),
    (
        "memory|doctor",
        "server-wide memory figures, no keys or data",
    ),
    ("memory|malloc-stats", "server-wide allocator figures"),
    ("memory|purge", "returns free memory to the OS"),
    (
        "memory|stats",
        "server-wide memory figures; per database only key counts, as INFO",
    ),
    ("lastsave", "when the server last saved"),
    ("role", "replication role"),
    ("fcall", "calls a function; runs with the caller's ACL"),
    ("fcall_ro", "calls a function; runs with the caller's ACL"),
    ("eval", "runs with the caller's ACL"),
    ("eval_ro", "runs with the caller's ACL"),
    ("evalsha", "runs with the caller's ACL"),
    ("evalsha_ro", "runs with the caller's ACL"),
    (
        "spublish",
        "channels are server-wide in this mode: documented",
    ),
    (
        "ssubscribe",
        "channels are server-wide in this mode: documented",
    ),
    ("sunsubscribe", "the caller's subscriptions"),
];

#[test]
fn every_command_a_database_user_may_run_stays_in_its_database_or_was_reviewed() {
    let server = RedisServer::start();
    let a = slice("bk_acme_login_fix_cache");
    block(Redis.provision(&a, &server.database_cfg())).expect("provision");
    let url = block(Redis.resolve(&a, &server.database_cfg()))
        .expect("resolve")
        .url;
    let db: i64 = url.rsplit('/').next().unwrap().parse().unwrap();
    let mut admin = server.admin();
    let dryrun = |admin: &mut redis::Connection, argv: &[String]| -> bool {
        let verdict: String = redis::cmd("ACL")
            .arg("DRYRUN")
            .arg(&a.name)
            .arg(argv)
            .query(admin)
            .unwrap_or_else(|e| panic!("ACL DRYRUN {argv:?}: {e}"));
        verdict == "OK"
    };
    // What reaches into another database is refused, whatever its arguments.
    let other = (db + 1).to_string();
    for argv in [
        vec!["select", "0"],
        vec!["select", other.as_str()],
        vec!["swapdb", "0", other.as_str()],
        vec!["move", "k", other.as_str()],
        vec!["copy", "k", "k", "db", other.as_str()],
        vec!["migrate", "127.0.0.1", "6379", "k", other.as_str(), "1000"],
        vec!["flushall"],
        vec!["monitor"],
        vec!["client", "list"],
        vec!["client", "kill", "id", "1"],
        vec!["client", "tracking", "on", "bcast"],
        vec!["config", "set", "databases", "1"],
        vec!["function", "flush"],
        vec!["script", "flush"],
        vec!["acl", "list"],
        vec!["shutdown"],
    ] {
        let argv: Vec<String> = argv.into_iter().map(str::to_owned).collect();
        assert!(!dryrun(&mut admin, &argv), "{argv:?} is allowed");
    }
    assert!(dryrun(&mut admin, &["select".into(), db.to_string()]));
    let reply: Vec<Value> = redis::cmd("COMMAND").query(&mut admin).expect("COMMAND");
    let mut commands = Vec::new();
    leaf_commands(&reply, &mut commands);
    let reviewed: BTreeSet<&str> = REVIEWED_KEYLESS
        .iter()
        .chain(DATABASE_REVIEWED_KEYLESS)
        .map(|(c, _)| *c)
        .collect();
    let mut unreviewed = Vec::new();
    let mut allowed = 0;
    for (name, arity, has_keys) in &commands {
        let mut argv: Vec<String> = name.split('|').map(str::to_owned).collect();
        while (argv.len() as i64) < arity.abs() {
            argv.push("k".into());
        }
        if name == "select" {
            argv[1] = db.to_string();
        }
        if !dryrun(&mut admin, &argv) {
            continue;
        }
        allowed += 1;
        if !has_keys && !reviewed.contains(name.as_str()) {
            unreviewed.push(name.clone());
        }
    }
    assert!(allowed > 150, "only {allowed} commands allowed");
    assert!(
        unreviewed.is_empty(),
        "a database user may run these commands without key arguments, which nobody \
         reviewed for reaching outside its database: {unreviewed:?} (deny them in \
         src/adapters/redis/database.rs, or add them to DATABASE_REVIEWED_KEYLESS with the \
         reason they are safe)"
    );
}

#[test]
fn worlds_provisioned_at_once_on_one_server_get_distinct_databases() {
    let server = RedisServer::start();
    let cfg = server.database_cfg();
    let slices: Vec<Slice> = (0..8)
        .map(|i| slice(&format!("bk_acme_w{i}_cache")))
        .collect();
    let urls: Vec<String> = block(async {
        let mut set = tokio::task::JoinSet::new();
        for s in slices.clone() {
            let cfg = cfg.clone();
            set.spawn(async move {
                Redis.provision(&s, &cfg).await.expect("provision");
                Redis.resolve(&s, &cfg).await.expect("resolve").url
            });
        }
        set.join_all().await
    });
    let dbs: BTreeSet<&str> = urls.iter().map(|u| u.rsplit('/').next().unwrap()).collect();
    assert_eq!(dbs.len(), 8, "{urls:?}");
    assert!(!dbs.contains("0"), "{urls:?}");
    // Each world's URL opens its own database, without a prefix.
    for (s, url) in slices.iter().zip(&urls) {
        run(&mut connect(url), &["SET", "owner", &s.name]).expect("SET");
    }
    for (s, url) in slices.iter().zip(&urls) {
        assert_eq!(
            run(&mut connect(url), &["GET", "owner"]).unwrap(),
            Value::BulkString(s.name.clone().into_bytes())
        );
    }
}

#[test]
fn teardown_of_a_database_slice_found_only_on_the_server_empties_its_database_and_deletes_its_user()
{
    // As `binky gc` meets it: nothing recorded in a store, the user's pin says which.
    let server = RedisServer::start();
    let (a, b) = (slice("bk_acme_a_cache"), slice("bk_acme_b_cache"));
    let cfg = server.database_cfg();
    let url_a = provisioned_with(&a, &cfg);
    let url_b = provisioned_with(&b, &cfg);
    run(&mut connect(&url_a), &["SET", "k", "a"]).unwrap();
    run(&mut connect(&url_b), &["SET", "k", "b"]).unwrap();
    let db_a: i64 = url_a.rsplit('/').next().unwrap().parse().unwrap();
    let db_b: i64 = url_b.rsplit('/').next().unwrap().parse().unwrap();
    let mut listed = block(Redis.list(&cfg)).expect("list");
    listed.sort();
    assert_eq!(listed, [a.name.clone(), b.name.clone()]);
    block(Redis.teardown(&a, &cfg)).expect("teardown");
    assert!(server.keys_in(db_a, "*").is_empty());
    assert!(!server.users().contains(&a.name));
    assert_eq!(
        server.keys_in(db_b, "*").len(),
        1,
        "b's database was touched"
    );
    block(Redis.teardown(&a, &cfg)).expect("a second teardown");
}

/// Provision `slice` with `cfg`; its URL.
fn provisioned_with(slice: &Slice, cfg: &AdapterConfig) -> String {
    block(async {
        Redis.provision(slice, cfg).await.expect("provision");
        Redis.resolve(slice, cfg).await.expect("resolve").url
    })
}

#[test]
fn a_prefix_slice_that_moves_to_a_database_leaves_no_prefixed_keys_behind() {
    // A world made by a binky that knew only the prefix mode, provisioned again by this one.
    let server = RedisServer::start();
    let a = slice("bk_acme_w_cache");
    let old = provisioned(&server, &a).url;
    run(&mut connect(&old), &["SET", "bk_acme_w_cache:k", "v"]).unwrap();
    run(&mut server.admin(), &["SET", "unrelated", "admin's"]).unwrap();
    let url = provisioned_with(&a, &server.database_cfg());
    assert!(url.ends_with("/1"), "{url}");
    assert!(server.keys("bk_acme_w_cache:*").is_empty());
    assert_eq!(server.keys("unrelated").len(), 1);
    run(&mut connect(&url), &["SET", "k", "v"]).expect("the world writes without a prefix");
}
