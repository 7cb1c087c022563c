//! Adapters benchmark: how long binky's own adapters (this crate's library, called in
//! process) take to provision (+ resolve) and to tear down one world's slice on real
//! servers, against binky 0.1.2's adapters doing the same verbs for the same adapter in one
//! long-lived Python process, on the same server in the same run. It reports the median and
//! p90 of each over `--worlds` worlds and the ratio binky / 0.1.2 of the medians.
//!
//! Adapters and servers, each server started privately on a free 127.0.0.1 port by the
//! bench, in a temp dir, one after the other (a server runs only while its adapter is
//! measured):
//! - `mysql`: MariaDB (`mariadb-install-db` + `mariadbd --no-defaults`, as the `mysql` user
//!   when run as root, a generated root password);
//! - `clickhouse`: `clickhouse-server` with the packaged config made private (paths in the
//!   temp dir, free ports, a `default` user with a password);
//! - `s3`: `moto_server` (`$BINKY_TEST_MOTO`, `~/.cache/binky-test/venv/bin/moto_server`,
//!   or PATH), one `buckets = ["uploads"]` prefix per slice;
//! - `rabbitmq`: a RabbitMQ node with the management plugin (`/usr/lib/rabbitmq/bin`), under
//!   a guardian shell that kills the node's session when the bench goes away;
//! - `kafka`: tansu, in memory (`$BINKY_TEST_TANSU`, `~/.cache/binky-test/bin/tansu`, or
//!   PATH), `options.topics = "orders,payments"`.
//!
//! For each adapter: one warm-up world per tool (not counted), then for each world `wNN`
//! each tool (the one going first alternates) runs `provision` + `resolve` (timed
//! together), the slice is checked on the server, `teardown` (timed), and the server is
//! checked to be exactly as before the provision. binky's verbs run on a fresh
//! current-thread tokio runtime per call (runtime set-up not timed); 0.1.2's run in a
//! Python process started once per adapter, drivers imported before the first clock, each
//! call made the way its daemon makes it (`adapters.get(kind, config)` then the verbs),
//! timed with `time.perf_counter` inside Python (no pipe latency). With `mysql`, one more
//! binky-only row: clone of a sealed 1000-row golden database (`clone_slice` + `resolve`),
//! then teardown.
//!
//! Checks: after provision the slice's objects are on the server (database / user / vhost /
//! permission / bucket + marker object / topics) and its address reaches it; after teardown
//! a snapshot of the server equals the one taken before the provision. At the end of each
//! adapter, the server is compared with its state before the first world. A failing binky
//! verb stops the bench; a failing 0.1.2 verb is reported and 0.1.2 is not measured further
//! on that adapter.
//!
//! After the results, a small table of costs the verbs pay without any server, measured
//! alone: binky's `Http::new()`, Python's `ssl.create_default_context()` and
//! `boto3.client("s3")`.
//!
//! Every server, guardian and Python process is stopped, and every temp dir removed, on
//! success, error, panic and Ctrl-C (SIGINT/SIGTERM/SIGHUP set a flag; the bench unwinds
//! through the guards).
//!
//! Run: `cargo bench --bench adapters [-- --worlds N --adapters mysql,clickhouse,s3,rabbitmq,kafka
//! --no-clone --json PATH]`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use binky::adapters::http::{Endpoint, Http};
use binky::adapters::{Adapter, AdapterConfig, AdapterError, Slice};
use binky_controllers::url::{percent_decode, percent_encode};
use hyper::Method;
use mysql_async::prelude::Queryable;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};

use binky_testkit::args::{exit_on_failure, or_exit, Flags};
use binky_testkit::run::{capture, find_binky012, find_program, tail};
use binky_testkit::servers::moto::moto_binary;
use binky_testkit::servers::rabbitmq::RABBITMQ_BIN;
use binky_testkit::servers::tansu::tansu_binary;
use binky_testkit::stats::{median, ms, p90, ratio_places, ratio_value, summary_p90};
use binky_testkit::stop::{check_stop, install_signal_handlers};
use binky_testkit::table::{fmt_ms, Table, MEDIAN_P90_COLUMNS};
use binky_testkit::tool::python_of;
use binky_testkit::{
    procs::{loadavg, machine_with},
    random_secret, Res,
};

const REF_HINT: &str = "binky 0.1.2 (the Python reference) with its adapters' drivers is not \
installed.\nInstall it into a venv and point the benchmark at it:\n\n\
    python3 -m venv .venv-ref && .venv-ref/bin/pip install \"binky[all-adapters]==0.1.2\"\n\
    BINKY012=$PWD/.venv-ref/bin/binky cargo bench --bench adapters\n\n\
(the benchmark also looks for /work/ref/venv/bin/binky and for `binky012` on PATH)";

/// Slice names binky gives: `bk_<project>_<world>_<service>`.
const PROJECT: &str = "bench";
/// binky 0.1.2's slice names: `<project>_<world>` (its `adapters.slice_name`).
const PY_PROJECT: &str = "bench012";
/// Topics created in each Kafka slice (`options.topics`, both tools).
const KAFKA_TOPICS: &str = "orders,payments";
/// Rows in the golden database of the mysql clone row.
const GOLDEN_ROWS: usize = 1000;

// ---------------------------------------------------------------------------------------------
// Arguments.

#[derive(Clone, Copy, PartialEq, Eq, Debug, PartialOrd, Ord)]
enum Kind {
    Mysql,
    ClickHouse,
    S3,
    RabbitMq,
    Kafka,
}

const KINDS: [Kind; 5] = [
    Kind::Mysql,
    Kind::ClickHouse,
    Kind::S3,
    Kind::RabbitMq,
    Kind::Kafka,
];

impl Kind {
    /// The adapter's name, in binky.toml and in 0.1.2's registry.
    fn name(self) -> &'static str {
        match self {
            Kind::Mysql => "mysql",
            Kind::ClickHouse => "clickhouse",
            Kind::S3 => "s3",
            Kind::RabbitMq => "rabbitmq",
            Kind::Kafka => "kafka",
        }
    }

    /// The service name in binky's slice names.
    fn service(self) -> &'static str {
        match self {
            Kind::Mysql => "db",
            Kind::ClickHouse => "ch",
            Kind::S3 => "files",
            Kind::RabbitMq => "mq",
            Kind::Kafka => "events",
        }
    }

    fn adapter(self) -> Box<dyn Adapter> {
        match self {
            Kind::Mysql => Box::new(binky::adapters::mysql::Mysql),
            Kind::ClickHouse => Box::new(binky::adapters::clickhouse::ClickHouse),
            Kind::S3 => Box::new(binky::adapters::s3::S3),
            Kind::RabbitMq => Box::new(binky::adapters::rabbitmq::RabbitMq),
            Kind::Kafka => Box::new(binky::adapters::kafka::Kafka),
        }
    }

    /// The Python modules 0.1.2's adapter uses, imported before the clock starts.
    fn py_imports(self) -> &'static [&'static str] {
        match self {
            Kind::Mysql => &["pymysql"],
            // Both are stdlib-only (urllib).
            Kind::ClickHouse | Kind::RabbitMq => &["urllib.request"],
            Kind::S3 => &["boto3", "botocore"],
            Kind::Kafka => &["kafka", "kafka.admin"],
        }
    }
}

struct Args {
    worlds: usize,
    kinds: Vec<Kind>,
    clone: bool,
    json: Option<PathBuf>,
}

const USAGE: &str = "usage: cargo bench --bench adapters -- [--worlds N] [--adapters LIST] \
[--no-clone] [--json PATH]\n\
  --worlds N       worlds per adapter and tool, one after the other (default 20)\n\
  --adapters LIST  comma-separated, from mysql,clickhouse,s3,rabbitmq,kafka (default: all)\n\
  --no-clone       skip the binky-only mysql clone row\n\
  --json PATH      also write the results as JSON";

fn parse_args() -> Res<Args> {
    let mut a = Args {
        worlds: 20,
        kinds: KINDS.to_vec(),
        clone: true,
        json: None,
    };
    a.json = Flags::from_env(USAGE).each(|f, flag| {
        match flag {
            "--worlds" => {
                a.worlds = f.number_in("--worlds", 1..=99)?;
            }
            "--adapters" => {
                let mut kinds = BTreeSet::new();
                for name in f.list("--adapters")? {
                    let k = KINDS
                        .iter()
                        .find(|k| k.name() == name)
                        .ok_or_else(|| format!("--adapters: unknown adapter `{name}`\n{USAGE}"))?;
                    kinds.insert(*k);
                }
                if kinds.is_empty() {
                    return Err(format!("--adapters: no adapter named\n{USAGE}"));
                }
                a.kinds = kinds.into_iter().collect();
            }
            "--no-clone" => a.clone = false,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok(a)
}

// ---------------------------------------------------------------------------------------------
// Statistics.

/// [`summary_p90`], but null for an empty series.
fn summary(v: &[f64]) -> Value {
    if v.is_empty() {
        return Value::Null;
    }
    summary_p90(v)
}

// ---------------------------------------------------------------------------------------------
// Small helpers.

/// A fresh current-thread runtime: each binky verb runs on its own, so no task left by a
/// previous call (a pooled connection closing) runs inside a timed one.
fn runtime() -> Res<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))
}

fn block<T>(f: impl Future<Output = Res<T>>) -> Res<T> {
    runtime()?.block_on(f)
}

fn tempdir(what: &str) -> Res<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&format!("binky-bench-adapters-{what}-"))
        .tempdir()
        .map_err(|e| format!("temp dir for {what}: {e}"))
}

fn io_err(what: &str) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

// ---------------------------------------------------------------------------------------------
// MariaDB.

const MARIADB_HINT: &str = "MariaDB is not installed (mariadbd and mariadb-install-db): \
`apt-get install mariadb-server`, or leave mysql out with --adapters";

/// The kit's private MariaDB (a 64 MiB buffer pool), with its version.
struct MariaDb {
    db: binky_testkit::servers::mariadb::MariaDbServer,
    version: String,
}

binky_testkit::deref_to!(MariaDb, db: binky_testkit::servers::mariadb::MariaDbServer);

async fn my_connect(url: &str) -> Res<mysql_async::Conn> {
    let shown = binky::adapters::redact(url);
    let opts = mysql_async::Opts::from_url(url).map_err(|e| format!("{shown}: {e}"))?;
    match tokio::time::timeout(Duration::from_secs(5), mysql_async::Conn::new(opts)).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(format!("{shown}: {e}")),
        Err(_) => Err(format!("{shown}: no connection within 5 s")),
    }
}

fn my_cell(row: &mysql_async::Row, i: usize) -> String {
    match row.as_ref(i) {
        None | Some(mysql_async::Value::NULL) => "NULL".into(),
        Some(mysql_async::Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(mysql_async::Value::Int(n)) => n.to_string(),
        Some(mysql_async::Value::UInt(n)) => n.to_string(),
        Some(other) => other.as_sql(false),
    }
}

/// Rows of `sql` run at `url` on a fresh connection (each field as text).
fn my_rows(url: &str, sql: &str) -> Res<Vec<Vec<String>>> {
    block(async {
        let mut c = my_connect(url).await?;
        let rows: Result<Vec<mysql_async::Row>, _> = c.query(sql).await;
        let _ = c.disconnect().await;
        let rows = rows.map_err(|e| format!("`{sql}`: {e}"))?;
        Ok(rows
            .iter()
            .map(|r| (0..r.len()).map(|i| my_cell(r, i)).collect())
            .collect())
    })
}

impl MariaDb {
    fn start() -> Res<MariaDb> {
        let server = find_program(&["mariadbd", "mysqld"]).ok_or(MARIADB_HINT)?;
        find_program(&["mariadb-install-db", "mysql_install_db"]).ok_or(MARIADB_HINT)?;
        let version = capture(&server.to_string_lossy(), &["--version"]).unwrap_or_default();
        let db = binky_testkit::servers::mariadb::MariaDbServer::start_with("64M")?;
        Ok(MariaDb { db, version })
    }

    /// Every database, account and database-level grant.
    fn snapshot(&self) -> Res<BTreeSet<String>> {
        let rows = my_rows(
            &self.admin_url,
            "SELECT CONCAT('db:', SCHEMA_NAME) FROM information_schema.SCHEMATA \
             UNION ALL SELECT CONCAT('user:', User, '@', Host) FROM mysql.user \
             UNION ALL SELECT CONCAT('grant:', User, '@', Host, ' ', Db) FROM mysql.db",
        )
        .map_err(|e| format!("mariadb snapshot: {e}"))?;
        Ok(rows.into_iter().filter_map(|mut r| r.pop()).collect())
    }
}

// ---------------------------------------------------------------------------------------------
// ClickHouse.

const CLICKHOUSE_HINT: &str = "clickhouse-server is not installed (and its packaged \
/etc/clickhouse-server/config.xml): `apt-get install clickhouse-server`, or leave clickhouse \
out with --adapters";
const CLICKHOUSE_CONFIG: &str = "/etc/clickhouse-server/config.xml";

/// The kit's private clickhouse-server, with its version and whether it has SQL users (20.5+).
struct ClickHouseServer {
    ch: binky_testkit::servers::clickhouse::ClickHouseServer,
    version: String,
    has_users: bool,
}

binky_testkit::deref_to!(ClickHouseServer, ch: binky_testkit::servers::clickhouse::ClickHouseServer);

/// Run `sql` with the credentials and database of `url` (`http://u:p@host:port/db`, as a
/// ClickHouse client takes it): the output, or `HTTP <status>: <ClickHouse's message>`.
fn ch_query(url: &str, sql: &str) -> Res<String> {
    let mut ep = Endpoint::parse(url, 8123).map_err(|e| e.to_string())?;
    let db = ep.base_path.trim_start_matches('/').to_owned();
    ep.base_path.clear();
    let path = if db.is_empty() {
        "/".to_owned()
    } else {
        format!("/?database={}", percent_encode(&percent_decode(&db)))
    };
    let body = Some(("text/plain", sql.as_bytes().to_vec()));
    let resp = block(async {
        Http::new()
            .call(&ep, Method::POST, &path, body, &[])
            .await
            .map_err(|e| e.to_string())
    })?;
    if resp.ok() {
        Ok(resp.text(1 << 20))
    } else {
        Err(format!("HTTP {}: {}", resp.status, resp.text(1000)))
    }
}

impl ClickHouseServer {
    fn start() -> Res<ClickHouseServer> {
        find_program(&["clickhouse-server"]).ok_or(CLICKHOUSE_HINT)?;
        fs::metadata(CLICKHOUSE_CONFIG)
            .map_err(|e| format!("{CLICKHOUSE_CONFIG}: {e}; {CLICKHOUSE_HINT}"))?;
        let ch = binky_testkit::servers::clickhouse::ClickHouseServer::start()?;
        let version = ch_query(&ch.admin_url, "SELECT version()")?
            .trim()
            .to_owned();
        let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let v = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        Ok(ClickHouseServer {
            ch,
            has_users: v >= binky::adapters::clickhouse::USERS_SINCE,
            version,
        })
    }

    /// Every database (and SQL user, where there are some).
    fn snapshot(&self) -> Res<BTreeSet<String>> {
        let mut out: BTreeSet<String> =
            ch_query(&self.admin_url, "SELECT name FROM system.databases")
                .map_err(|e| format!("clickhouse snapshot: {e}"))?
                .lines()
                .map(|n| format!("db:{n}"))
                .collect();
        if self.has_users {
            out.extend(
                ch_query(&self.admin_url, "SELECT name FROM system.users")
                    .map_err(|e| format!("clickhouse snapshot: {e}"))?
                    .lines()
                    .map(|n| format!("user:{n}")),
            );
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// S3 (moto).

const MOTO_HINT: &str = "moto_server (an S3 server) is not installed: `python3 -m venv \
~/.cache/binky-test/venv && ~/.cache/binky-test/venv/bin/pip install 'moto[server]==5.2.5'` \
(or set BINKY_TEST_MOTO), or leave s3 out with --adapters";
const MOTO_KEY: &str = "AKIDBINKYBENCH";

/// The kit's private moto_server, with moto's version.
struct Moto {
    moto: binky_testkit::servers::moto::MotoServer,
    version: String,
}

binky_testkit::deref_to!(Moto, moto: binky_testkit::servers::moto::MotoServer);

fn s3_client(endpoint: &str, key: &str, secret: &str) -> aws_sdk_s3::Client {
    use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
    let conf = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .force_path_style(true)
        .credentials_provider(Credentials::new(key, secret, None, None, "bench"))
        .build();
    aws_sdk_s3::Client::from_conf(conf)
}

impl Moto {
    fn start() -> Res<Moto> {
        let bin = binky_testkit::servers::moto::moto_binary().ok_or(MOTO_HINT)?;
        // The version, from the interpreter of moto_server's `#!` line.
        let version = python_of(&bin)
            .and_then(|py| capture(&py, &["-c", "import moto; print(moto.__version__)"]))
            .unwrap_or_default();
        let moto = binky_testkit::servers::moto::MotoServer::start_with(&[])?;
        Ok(Moto { moto, version })
    }

    fn admin_url(&self) -> String {
        let port = self.endpoint.rsplit(':').next().unwrap_or_default();
        format!("http://{MOTO_KEY}:{}@127.0.0.1:{port}", self.secret)
    }

    /// Every bucket and every object in it (`bucket:b`, `object:b/key`).
    fn snapshot(&self) -> Res<BTreeSet<String>> {
        let c = s3_client(&self.endpoint, MOTO_KEY, &self.secret);
        block(async move {
            let e = |e: String| format!("s3 snapshot: {e}");
            let buckets: Vec<String> = c
                .list_buckets()
                .send()
                .await
                .map_err(|x| e(format!("ListBuckets: {x:?}")))?
                .buckets()
                .iter()
                .filter_map(|b| b.name().map(str::to_owned))
                .collect();
            let mut out = BTreeSet::new();
            for b in buckets {
                let objects = c
                    .list_objects_v2()
                    .bucket(&b)
                    .send()
                    .await
                    .map_err(|x| e(format!("ListObjectsV2 {b}: {x:?}")))?;
                for o in objects.contents() {
                    if let Some(k) = o.key() {
                        out.insert(format!("object:{b}/{k}"));
                    }
                }
                out.insert(format!("bucket:{b}"));
            }
            Ok(out)
        })
    }
}

// ---------------------------------------------------------------------------------------------
// RabbitMQ.

const RABBITMQ_HINT: &str = "rabbitmq-server is not installed (/usr/lib/rabbitmq/bin and \
epmd): `apt-get install rabbitmq-server`, or leave rabbitmq out with --adapters";

/// The kit's private RabbitMQ node (under its guardian), with its version.
struct Rabbit {
    node: binky_testkit::servers::rabbitmq::RabbitNode,
    version: String,
}

binky_testkit::deref_to!(Rabbit, node: binky_testkit::servers::rabbitmq::RabbitNode);

/// One management API call as `user`: (status, body).
fn mgmt(port: u16, user: &str, password: &str, path: &str) -> Res<(u16, String)> {
    let ep = Endpoint::parse(&format!("http://127.0.0.1:{port}"), 80)
        .map_err(|e| e.to_string())?
        .with_credentials(user, password);
    let resp = block(async {
        Http::new()
            .call(&ep, Method::GET, path, None, &[])
            .await
            .map_err(|e| format!("GET {path}: {e}"))
    })?;
    Ok((resp.status, resp.text(1 << 20)))
}

impl Rabbit {
    fn start() -> Res<Rabbit> {
        let server = Path::new(RABBITMQ_BIN).join("rabbitmq-server");
        if !server.is_file() || find_program(&["epmd"]).is_none() {
            return Err(RABBITMQ_HINT.into());
        }
        let node = binky_testkit::servers::rabbitmq::RabbitNode::start()?;
        let (_, body) = mgmt(node.mgmt_port, "admin", &node.password, "/api/overview")?;
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let version = format!(
            "RabbitMQ {} (Erlang {})",
            v["rabbitmq_version"].as_str().unwrap_or("?"),
            v["erlang_version"].as_str().unwrap_or("?")
        );
        Ok(Rabbit { node, version })
    }

    /// Names in an admin listing.
    fn listing(&self, path: &str, field: impl Fn(&Value) -> Option<String>) -> Res<Vec<String>> {
        let (status, body) = mgmt(self.mgmt_port, "admin", &self.password, path)?;
        if status != 200 {
            return Err(format!("GET {path}: HTTP {status}: {body}"));
        }
        let doc: Value = serde_json::from_str(&body).map_err(|e| format!("GET {path}: {e}"))?;
        Ok(doc
            .as_array()
            .map(|a| a.iter().filter_map(&field).collect())
            .unwrap_or_default())
    }

    /// Every vhost, user and permission (`perm:<vhost>/<user>`).
    fn snapshot(&self) -> Res<BTreeSet<String>> {
        let name = |v: &Value| v["name"].as_str().map(str::to_owned);
        let mut out = BTreeSet::new();
        out.extend(
            self.listing("/api/vhosts", name)?
                .into_iter()
                .map(|v| format!("vhost:{v}")),
        );
        out.extend(
            self.listing("/api/users", name)?
                .into_iter()
                .map(|u| format!("user:{u}")),
        );
        out.extend(self.listing("/api/permissions", |p| {
            Some(format!(
                "perm:{}/{}",
                p["vhost"].as_str()?,
                p["user"].as_str()?
            ))
        })?);
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// Kafka (tansu).

const TANSU_HINT: &str = "tansu (a Kafka-protocol broker) is not installed: `cargo install \
tansu --version 0.6.0 --locked --features dynostore,libsql --root ~/.cache/binky-test` \
(./scripts/test does it, once, ~20 min), or set BINKY_TEST_TANSU, or leave kafka out with \
--adapters";

/// The kit's private tansu broker, with its version.
struct Tansu {
    broker: binky_testkit::servers::tansu::TansuServer,
    version: String,
}

binky_testkit::deref_to!(Tansu, broker: binky_testkit::servers::tansu::TansuServer);

async fn kafka_topics(bootstrap: &str) -> Res<BTreeSet<String>> {
    let backoff = rskafka::BackoffConfig {
        deadline: Some(Duration::from_secs(5)),
        ..Default::default()
    };
    let work = async {
        let client = rskafka::client::ClientBuilder::new(vec![bootstrap.to_owned()])
            .backoff_config(backoff)
            .build()
            .await
            .map_err(|e| format!("connect to {bootstrap}: {e}"))?;
        let topics = client
            .list_topics()
            .await
            .map_err(|e| format!("list topics: {e}"))?;
        Ok(topics.into_iter().map(|t| t.name).collect())
    };
    tokio::time::timeout(Duration::from_secs(10), work)
        .await
        .map_err(|_| format!("{bootstrap}: no answer within 10 s"))?
}

impl Tansu {
    fn start() -> Res<Tansu> {
        let bin = binky_testkit::servers::tansu::tansu_binary().ok_or(TANSU_HINT)?;
        let version = capture(&bin.to_string_lossy(), &["--version"]).unwrap_or_default();
        let broker = binky_testkit::servers::tansu::TansuServer::start()?;
        Ok(Tansu { broker, version })
    }

    fn snapshot(&self) -> Res<BTreeSet<String>> {
        Ok(block(kafka_topics(&self.bootstrap))
            .map_err(|e| format!("kafka snapshot: {e}"))?
            .into_iter()
            .map(|t| format!("topic:{t}"))
            .collect())
    }
}

// ---------------------------------------------------------------------------------------------
// The server of one adapter, seen the same way by both tools.

enum Server {
    Mysql(MariaDb),
    ClickHouse(ClickHouseServer),
    S3(Moto),
    RabbitMq(Rabbit),
    Kafka(Tansu),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tool {
    /// This crate's adapters, in process.
    Binky,
    /// binky 0.1.2's, in its Python process.
    Py,
}

impl Tool {
    fn label(self) -> &'static str {
        match self {
            Tool::Binky => "binky",
            Tool::Py => "binky 0.1.2",
        }
    }
}

impl Server {
    fn start(kind: Kind) -> Res<Server> {
        Ok(match kind {
            Kind::Mysql => Server::Mysql(MariaDb::start()?),
            Kind::ClickHouse => Server::ClickHouse(ClickHouseServer::start()?),
            Kind::S3 => Server::S3(Moto::start()?),
            Kind::RabbitMq => Server::RabbitMq(Rabbit::start()?),
            Kind::Kafka => Server::Kafka(Tansu::start()?),
        })
    }

    fn version(&self) -> String {
        match self {
            Server::Mysql(s) => s.version.clone(),
            Server::ClickHouse(s) => format!("ClickHouse {}", s.version),
            Server::S3(s) => format!("moto_server {}", s.version),
            Server::RabbitMq(s) => s.version.clone(),
            Server::Kafka(s) => s.version.clone(),
        }
    }

    /// Its pid, to say which process was measured against.
    fn pid(&self) -> u32 {
        match self {
            Server::Mysql(s) => s.pid,
            Server::ClickHouse(s) => s.pid(),
            Server::S3(s) => s.pid(),
            Server::RabbitMq(s) => s.guardian_pid().unwrap_or(0),
            Server::Kafka(s) => s.pid(),
        }
    }

    /// binky's service configuration for this server.
    fn binky_cfg(&self) -> AdapterConfig {
        let mut cfg = AdapterConfig::default();
        match self {
            Server::Mysql(s) => cfg.admin_url = Some(s.admin_url.clone()),
            Server::ClickHouse(s) => cfg.admin_url = Some(s.admin_url.clone()),
            Server::S3(s) => {
                cfg.admin_url = Some(s.admin_url());
                cfg.buckets = vec!["uploads".into()];
            }
            Server::RabbitMq(s) => {
                cfg.admin_url = Some(s.admin_url.clone());
                cfg.options
                    .insert("amqp_port".into(), s.amqp_port.to_string());
            }
            Server::Kafka(s) => {
                cfg.admin_url = Some(format!("kafka://{}", s.bootstrap));
                cfg.options.insert("topics".into(), KAFKA_TOPICS.into());
            }
        }
        cfg
    }

    /// binky 0.1.2's flat adapter config (options flattened in, as its `_adapter_config`).
    fn py_cfg(&self) -> Value {
        match self {
            Server::Mysql(s) => json!({ "admin_url": s.admin_url, "buckets": [] }),
            Server::ClickHouse(s) => json!({ "admin_url": s.admin_url, "buckets": [] }),
            // Its s3 adapter passes admin_url to boto3 as the endpoint; keys are options.
            Server::S3(s) => json!({
                "admin_url": s.endpoint,
                "access_key": MOTO_KEY,
                "secret_key": s.secret,
                "buckets": ["uploads"],
            }),
            Server::RabbitMq(s) => json!({
                "admin_url": s.admin_url,
                "amqp_port": s.amqp_port.to_string(),
                "buckets": [],
            }),
            Server::Kafka(s) => json!({
                "admin_url": format!("kafka://{}", s.bootstrap),
                "topics": KAFKA_TOPICS,
                "buckets": [],
            }),
        }
    }

    /// What the server holds (databases, users, buckets, vhosts, topics, …).
    fn snapshot(&self) -> Res<BTreeSet<String>> {
        match self {
            Server::Mysql(s) => s.snapshot(),
            Server::ClickHouse(s) => s.snapshot(),
            Server::S3(s) => s.snapshot(),
            Server::RabbitMq(s) => s.snapshot(),
            Server::Kafka(s) => s.snapshot(),
        }
    }

    /// The snapshot entries the slice `name` made by `tool` must have, given its address.
    fn marks(&self, tool: Tool, name: &str, address: &str) -> Vec<String> {
        match (self, tool) {
            (Server::Mysql(_), Tool::Binky) => vec![
                format!("db:{name}"),
                format!("user:{}@%", binky::adapters::fit_name(name, 32)),
            ],
            (Server::Mysql(_), Tool::Py) => vec![format!("db:{name}")],
            (Server::ClickHouse(s), Tool::Binky) if s.has_users => {
                vec![format!("db:{name}"), format!("user:{name}")]
            }
            (Server::ClickHouse(_), _) => vec![format!("db:{name}")],
            (Server::S3(_), _) => {
                let bucket = address.strip_prefix("s3://").unwrap_or(address);
                vec![
                    format!("bucket:{bucket}"),
                    format!("object:{bucket}/uploads/"),
                ]
            }
            (Server::RabbitMq(_), Tool::Binky) => vec![
                format!("vhost:{name}"),
                format!("user:{name}"),
                format!("perm:{name}/{name}"),
            ],
            (Server::RabbitMq(_), Tool::Py) => {
                vec![format!("vhost:{name}"), format!("perm:{name}/admin")]
            }
            (Server::Kafka(_), _) => KAFKA_TOPICS
                .split(',')
                .map(|t| format!("topic:{name}.{t}"))
                .collect(),
        }
    }

    /// The address the tool resolved reaches the slice `name` (and, for binky, as the
    /// slice's own user where the server has users).
    fn check_address(&self, tool: Tool, name: &str, address: &str) -> Result<(), String> {
        match self {
            Server::Mysql(_) => {
                let rows = my_rows(address, "SELECT CURRENT_USER(), DATABASE()")
                    .map_err(|e| format!("the address does not log in: {e}"))?;
                let row = rows.first().cloned().unwrap_or_default();
                let db_ok = row.get(1).map(String::as_str) == Some(name);
                let user_ok = tool == Tool::Py
                    || row.first().is_some_and(|u| {
                        u.starts_with(&format!("{}@", binky::adapters::fit_name(name, 32)))
                    });
                if db_ok && user_ok {
                    Ok(())
                } else {
                    Err(format!("the address reached {row:?}"))
                }
            }
            Server::ClickHouse(_) => {
                let db = ch_query(address, "SELECT currentDatabase()")
                    .map_err(|e| format!("the address does not answer: {e}"))?;
                if db.trim() == name {
                    Ok(())
                } else {
                    Err(format!("the address reached database `{}`", db.trim()))
                }
            }
            Server::S3(_) => {
                // binky: `_` → `-`; 0.1.2 the same (its `_bucket`); both short enough.
                let want = format!("s3://{}", name.replace('_', "-"));
                if address == want {
                    Ok(())
                } else {
                    Err(format!("address `{address}`, expected `{want}`"))
                }
            }
            Server::RabbitMq(s) => {
                // amqp://user:password@host:port/vhost: that user may list the vhost's queues
                // in the management API, which needs its credentials and a permission on the
                // vhost (binky's user is tagged `management`; 0.1.2's address is the admin's).
                let rest = address.split_once("://").map_or(address, |(_, r)| r);
                let (auth, tail) = rest.rsplit_once('@').unwrap_or(("", rest));
                let (user, pass) = auth.split_once(':').unwrap_or((auth, ""));
                let vhost = tail.split_once('/').map_or("", |(_, v)| v);
                if percent_decode(vhost) != name {
                    return Err(format!("the address names vhost `{vhost}`"));
                }
                let path = format!("/api/queues/{vhost}");
                match mgmt(
                    s.mgmt_port,
                    &percent_decode(user),
                    &percent_decode(pass),
                    &path,
                )? {
                    (200, _) => Ok(()),
                    (status, body) => Err(format!(
                        "GET {path} with the address's credentials: HTTP {status} {body}"
                    )),
                }
            }
            Server::Kafka(s) => {
                let want = format!("kafka://{}/{name}", s.bootstrap);
                if address == want {
                    Ok(())
                } else {
                    Err(format!("address `{address}`, expected `{want}`"))
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// binky 0.1.2's adapters, in one long-lived Python process per adapter.

/// Reads one JSON line (kind, config, modules to import), imports, says `ready`, then
/// answers one JSON line per request: `provision` (its `adapters.get` + `provision` +
/// `resolve`, timed together) or `teardown` (`adapters.get` + `teardown`), as its daemon
/// calls them. Replies go to a duplicate of stdout; anything a library prints goes to
/// stderr (a log file).
const PY_DRIVER: &str = r#"
import importlib, json, os, sys, time
reply_to = os.fdopen(os.dup(1), "w")
sys.stdout = sys.stderr
def reply(obj):
    reply_to.write(json.dumps(obj) + "\n")
    reply_to.flush()
setup = json.loads(sys.stdin.readline())
kind, cfg = setup["kind"], setup["config"]
versions = {}
for m in setup["imports"]:
    mod = importlib.import_module(m)
    versions[m] = getattr(mod, "__version__", None)
from binky import adapters
import binky.builtin_adapters
import importlib.metadata as md
for dist in ("binky", "PyMySQL", "boto3", "botocore", "kafka-python"):
    try:
        versions[dist] = md.version(dist)
    except Exception:
        pass
reply({"ready": True, "python": sys.version.split()[0], "versions": versions})
for line in sys.stdin:
    req = json.loads(line)
    name = req["slice"]
    try:
        if req["op"] == "provision":
            t = time.perf_counter()
            a = adapters.get(kind, cfg)
            a.provision(name)
            address = a.resolve(name)
            took = time.perf_counter() - t
            reply({"ms": took * 1000, "address": address})
        else:
            t = time.perf_counter()
            adapters.get(kind, cfg).teardown(name)
            took = time.perf_counter() - t
            reply({"ms": took * 1000})
    except Exception as e:
        reply({"error": "%s: %s" % (type(e).__name__, e)})
"#;

/// How long one 0.1.2 call may take before the bench gives up on it.
const PY_CALL_TIMEOUT: Duration = Duration::from_secs(120);

struct PySession {
    child: Child,
    stdin: Option<ChildStdin>,
    replies: mpsc::Receiver<std::io::Result<String>>,
    log: PathBuf,
    /// What the driver said when ready: Python and library versions.
    info: Value,
    _dir: tempfile::TempDir,
}

impl PySession {
    fn start(python: &str, kind: Kind, config: &Value) -> Res<PySession> {
        let dir = tempdir("py")?;
        let log = dir.path().join("python.stderr");
        let err = fs::File::create(&log).map_err(io_err("python log"))?;
        let mut child = Command::new(python)
            .args(["-c", PY_DRIVER])
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PYTHONUNBUFFERED", "1")
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot run {python}: {e}"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let (tx, replies) = mpsc::channel();
        if let Some(out) = stdout {
            thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let mut s = PySession {
            child,
            stdin,
            replies,
            log,
            info: Value::Null,
            _dir: dir,
        };
        let setup = json!({ "kind": kind.name(), "config": config, "imports": kind.py_imports() });
        s.send(&setup)?;
        let ready = s.recv()?;
        if ready["ready"] != json!(true) {
            return Err(format!("binky 0.1.2's driver did not start: {ready}"));
        }
        s.info = ready;
        Ok(s)
    }

    fn send(&mut self, v: &Value) -> Res<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or("binky 0.1.2's driver has no stdin")?;
        writeln!(stdin, "{v}")
            .and_then(|_| stdin.flush())
            .map_err(|e| {
                format!(
                    "writing to binky 0.1.2's driver: {e}\n{}",
                    tail(&self.log, 3000)
                )
            })
    }

    fn recv(&mut self) -> Res<Value> {
        let until = Instant::now() + PY_CALL_TIMEOUT;
        loop {
            check_stop()?;
            match self.replies.recv_timeout(Duration::from_millis(200)) {
                Ok(Ok(line)) => {
                    return serde_json::from_str(&line)
                        .map_err(|e| format!("binky 0.1.2's driver said `{line}`: {e}"))
                }
                Ok(Err(e)) => return Err(format!("reading binky 0.1.2's driver: {e}")),
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < until => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "binky 0.1.2's driver did not answer within {} s\n{}",
                        PY_CALL_TIMEOUT.as_secs(),
                        tail(&self.log, 3000)
                    ))
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(format!(
                        "binky 0.1.2's driver exited\n{}",
                        tail(&self.log, 3000)
                    ))
                }
            }
        }
    }

    /// One verb: its time in ms and, for provision, the address.
    fn call(&mut self, op: &str, name: &str) -> Res<(f64, String)> {
        self.send(&json!({ "op": op, "slice": name }))?;
        let v = self.recv()?;
        if let Some(e) = v["error"].as_str() {
            return Err(format!("binky 0.1.2 {op} {name}: {e}"));
        }
        let took = v["ms"]
            .as_f64()
            .ok_or_else(|| format!("binky 0.1.2 {op} {name}: no time in {v}"))?;
        Ok((took, v["address"].as_str().unwrap_or_default().to_owned()))
    }
}

impl Drop for PySession {
    fn drop(&mut self) {
        // EOF ends its loop; it is killed if it does not exit.
        self.stdin.take();
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// Can 0.1.2's interpreter import the drivers of `kinds`?
fn binky012_has_drivers(python: &str, kinds: &[Kind]) -> Res<()> {
    let mut mods: Vec<&str> = vec!["binky.builtin_adapters"];
    mods.extend(kinds.iter().flat_map(|k| k.py_imports().iter().copied()));
    let out = Command::new(python)
        .arg("-c")
        .arg(format!("import {}", mods.join(", ")))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{python}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

// ---------------------------------------------------------------------------------------------
// binky's adapters, in process.

fn adapter_err(name: &str) -> impl Fn(AdapterError) -> String + '_ {
    move |e| format!("binky adapter, {name}: {e}")
}

/// `provision` + `resolve`, timed together: (ms, address).
fn binky_provision(a: &dyn Adapter, slice: &Slice, cfg: &AdapterConfig) -> Res<(f64, String)> {
    let rt = runtime()?;
    rt.block_on(async {
        let e = adapter_err(&slice.name);
        let start = Instant::now();
        a.provision(slice, cfg).await.map_err(&e)?;
        let addr = a.resolve(slice, cfg).await.map_err(&e)?;
        Ok((ms(start.elapsed()), addr.url))
    })
}

fn binky_teardown(a: &dyn Adapter, slice: &Slice, cfg: &AdapterConfig) -> Res<f64> {
    let rt = runtime()?;
    rt.block_on(async {
        let start = Instant::now();
        a.teardown(slice, cfg)
            .await
            .map_err(adapter_err(&slice.name))?;
        Ok(ms(start.elapsed()))
    })
}

/// `clone_slice` + `resolve`, timed together: (ms, address).
fn binky_clone(
    a: &dyn Adapter,
    from: &Slice,
    to: &Slice,
    cfg: &AdapterConfig,
) -> Res<(f64, String)> {
    let rt = runtime()?;
    rt.block_on(async {
        let e = adapter_err(&to.name);
        let start = Instant::now();
        a.clone_slice(from, to, cfg).await.map_err(&e)?;
        let addr = a.resolve(to, cfg).await.map_err(&e)?;
        Ok((ms(start.elapsed()), addr.url))
    })
}

// ---------------------------------------------------------------------------------------------
// The measurement.

#[derive(Default)]
struct Times {
    /// provision + resolve (or clone + resolve), ms.
    up: Vec<f64>,
    /// teardown, ms.
    down: Vec<f64>,
}

/// One adapter's results.
struct Outcome {
    kind: Kind,
    server: String,
    binky: Times,
    py: Times,
    /// Why 0.1.2 was not measured (further), if it was not.
    py_error: Option<String>,
    py_info: Value,
    /// binky-only: clone of the golden database (mysql).
    clone: Option<Times>,
    /// Slices missing after provision, or left after teardown (by tool).
    problems: Vec<String>,
    /// Slices checked (warm-ups included), by tool.
    checked: BTreeMap<&'static str, usize>,
    /// Differences between the server before the first world and after the last.
    leftovers: Vec<String>,
}

/// Something that provisions and tears down: binky's adapter or 0.1.2's process.
enum Runner<'a> {
    Binky(&'a dyn Adapter, &'a AdapterConfig),
    Py(&'a mut PySession),
}

impl Runner<'_> {
    fn tool(&self) -> Tool {
        match self {
            Runner::Binky(..) => Tool::Binky,
            Runner::Py(_) => Tool::Py,
        }
    }

    fn provision(&mut self, slice: &Slice) -> Res<(f64, String)> {
        match self {
            Runner::Binky(a, cfg) => binky_provision(*a, slice, cfg),
            Runner::Py(s) => s.call("provision", &slice.name),
        }
    }

    fn teardown(&mut self, slice: &Slice) -> Res<f64> {
        match self {
            Runner::Binky(a, cfg) => binky_teardown(*a, slice, cfg),
            Runner::Py(s) => s.call("teardown", &slice.name).map(|(t, _)| t),
        }
    }
}

fn missing_marks(set: &BTreeSet<String>, marks: &[String]) -> Vec<String> {
    marks
        .iter()
        .filter(|m| !set.contains(*m))
        .cloned()
        .collect()
}

fn differences(before: &BTreeSet<String>, after: &BTreeSet<String>) -> (Vec<String>, Vec<String>) {
    (
        after.difference(before).cloned().collect(),
        before.difference(after).cloned().collect(),
    )
}

/// Provision (timed), check the slice on the server, teardown (timed), check the server is
/// as before. Returns (provision, teardown) in ms; problems with the slice are recorded.
fn cycle(
    server: &Server,
    runner: &mut Runner,
    name: &str,
    problems: &mut Vec<String>,
) -> Res<(f64, f64)> {
    check_stop()?;
    let tool = runner.tool();
    let slice = Slice {
        name: name.to_owned(),
        secret: random_secret(),
    };
    let before = server.snapshot()?;
    let (up, address) = runner.provision(&slice)?;
    let during = server.snapshot()?;
    let missing = missing_marks(&during, &server.marks(tool, name, &address));
    if !missing.is_empty() {
        problems.push(format!(
            "{} {name}: after provision, not on the server: {missing:?}",
            tool.label()
        ));
    }
    if let Err(e) = server.check_address(tool, name, &address) {
        problems.push(format!("{} {name}: {e}", tool.label()));
    }
    let down = runner.teardown(&slice)?;
    let after = server.snapshot()?;
    let (left, gone) = differences(&before, &after);
    if !left.is_empty() || !gone.is_empty() {
        problems.push(format!(
            "{} {name}: after teardown the server differs from before provision: left \
             {left:?}, missing {gone:?}",
            tool.label()
        ));
    }
    Ok((up, down))
}

fn slice_name(tool: Tool, kind: Kind, world: &str) -> String {
    match tool {
        Tool::Binky => format!("bk_{PROJECT}_{world}_{}", kind.service()),
        Tool::Py => format!("{PY_PROJECT}_{world}"),
    }
}

fn measure(kind: Kind, python: &str, args: &Args) -> Res<Outcome> {
    eprintln!("== {}: starting its server", kind.name());
    let started = Instant::now();
    let server = Server::start(kind)?;
    eprintln!(
        "{}: {} up in {:.1} s (pid {})",
        kind.name(),
        server.version(),
        started.elapsed().as_secs_f64(),
        server.pid()
    );
    let initial = server.snapshot()?;
    let adapter = kind.adapter();
    let cfg = server.binky_cfg();
    let mut out = Outcome {
        kind,
        server: server.version(),
        binky: Times::default(),
        py: Times::default(),
        py_error: None,
        py_info: Value::Null,
        clone: None,
        problems: Vec::new(),
        checked: BTreeMap::new(),
        leftovers: Vec::new(),
    };
    let mut py = match PySession::start(python, kind, &server.py_cfg()) {
        Ok(s) => {
            out.py_info = s.info.clone();
            Some(s)
        }
        Err(e) => {
            check_stop()?;
            eprintln!("{}: binky 0.1.2 not measured: {e}", kind.name());
            out.py_error = Some(e);
            None
        }
    };

    // Warm-up ("warm") then the measured worlds; the tool going first alternates.
    for i in 0..=args.worlds {
        let world = if i == 0 {
            "warm".to_owned()
        } else {
            format!("w{:02}", i - 1)
        };
        let tools = if i % 2 == 0 {
            [Tool::Binky, Tool::Py]
        } else {
            [Tool::Py, Tool::Binky]
        };
        let mut line = format!("{} {world}:", kind.name());
        for tool in tools {
            let name = slice_name(tool, kind, &world);
            let result = match tool {
                Tool::Binky => cycle(
                    &server,
                    &mut Runner::Binky(adapter.as_ref(), &cfg),
                    &name,
                    &mut out.problems,
                ),
                Tool::Py => match py.as_mut() {
                    Some(s) => cycle(&server, &mut Runner::Py(s), &name, &mut out.problems),
                    None => continue,
                },
            };
            let (up, down) = match (result, tool) {
                (Ok(t), _) => t,
                (Err(e), Tool::Py) => {
                    check_stop()?;
                    eprintln!(
                        "{}: binky 0.1.2 failed, not measured further: {e}",
                        kind.name()
                    );
                    out.py_error = Some(e);
                    py = None;
                    continue;
                }
                (Err(e), Tool::Binky) => return Err(e),
            };
            *out.checked.entry(tool.label()).or_default() += 1;
            let _ = write!(line, "  {} {up:.1}/{down:.1} ms", tool.label());
            if i > 0 {
                let t = match tool {
                    Tool::Binky => &mut out.binky,
                    Tool::Py => &mut out.py,
                };
                t.up.push(up);
                t.down.push(down);
            }
        }
        eprintln!("{line}  (provision/teardown)");
    }
    drop(py);

    if kind == Kind::Mysql && args.clone {
        if let Server::Mysql(db) = &server {
            out.clone = Some(mysql_clone(db, &server, args, &mut out.problems)?);
        }
    }

    let end = server.snapshot()?;
    let (left, gone) = differences(&initial, &end);
    out.leftovers.extend(
        left.into_iter()
            .map(|x| format!("{x} left on the server after the run")),
    );
    out.leftovers.extend(
        gone.into_iter()
            .map(|x| format!("{x} was on the server before the run and is gone")),
    );
    drop(server);
    Ok(out)
}

/// binky-only: a golden database of [`GOLDEN_ROWS`] rows (provisioned, filled, sealed), then
/// per world `clone_slice` + `resolve` (timed), the copy checked as its own user, and
/// teardown (timed).
fn mysql_clone(
    db: &MariaDb,
    server: &Server,
    args: &Args,
    problems: &mut Vec<String>,
) -> Res<Times> {
    let adapter = binky::adapters::mysql::Mysql;
    let cfg = server.binky_cfg();
    let golden = Slice {
        name: format!("bk_{PROJECT}_golden_db"),
        secret: random_secret(),
    };
    binky_provision(&adapter, &golden, &cfg)?;
    let mut values = String::new();
    for i in 0..GOLDEN_ROWS {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(
            values,
            "{sep}('sku-{i:05}', {}, 'seeded row {i} of the golden database', '2024-01-01 00:00:00' + INTERVAL {i} MINUTE)",
            i % 97
        );
    }
    let g = &golden.name;
    block(async {
        let mut c = my_connect(&db.admin_url).await?;
        let r = async {
            c.query_drop(format!(
                "CREATE TABLE `{g}`.items (id INT AUTO_INCREMENT PRIMARY KEY, \
                 sku VARCHAR(32) NOT NULL UNIQUE, qty INT NOT NULL, note VARCHAR(255), \
                 created DATETIME NOT NULL, KEY by_qty (qty)) ENGINE=InnoDB"
            ))
            .await?;
            c.query_drop(format!(
                "INSERT INTO `{g}`.items (sku, qty, note, created) VALUES {values}"
            ))
            .await
        }
        .await;
        let _ = c.disconnect().await;
        r.map_err(|e| format!("filling the golden database: {e}"))
    })?;
    runtime()?
        .block_on(adapter.seal_template(&golden, &cfg))
        .map_err(adapter_err(g))?;

    let mut t = Times::default();
    for i in 0..=args.worlds {
        check_stop()?;
        let world = if i == 0 {
            "warm".to_owned()
        } else {
            format!("w{:02}", i - 1)
        };
        let slice = Slice {
            name: format!("bk_{PROJECT}_{world}_clone"),
            secret: random_secret(),
        };
        let before = server.snapshot()?;
        let (up, address) = binky_clone(&adapter, &golden, &slice, &cfg)?;
        let during = server.snapshot()?;
        let missing = missing_marks(&during, &server.marks(Tool::Binky, &slice.name, &address));
        if !missing.is_empty() {
            problems.push(format!(
                "binky clone {}: after clone, not on the server: {missing:?}",
                slice.name
            ));
        }
        if let Err(e) = server.check_address(Tool::Binky, &slice.name, &address) {
            problems.push(format!("binky clone {}: {e}", slice.name));
        }
        match my_rows(&address, "SELECT COUNT(*), SUM(qty) FROM items") {
            Ok(rows) if rows.first().and_then(|r| r.first()) == Some(&GOLDEN_ROWS.to_string()) => {}
            other => problems.push(format!(
                "binky clone {}: the copy does not hold the {GOLDEN_ROWS} rows: {other:?}",
                slice.name
            )),
        }
        let down = binky_teardown(&adapter, &slice, &cfg)?;
        let after = server.snapshot()?;
        let (left, gone) = differences(&before, &after);
        if !left.is_empty() || !gone.is_empty() {
            problems.push(format!(
                "binky clone {}: after teardown the server differs from before the clone: \
                 left {left:?}, missing {gone:?}",
                slice.name
            ));
        }
        eprintln!("mysql clone {world}:  binky {up:.1}/{down:.1} ms  (clone+resolve/teardown)");
        if i > 0 {
            t.up.push(up);
            t.down.push(down);
        }
    }
    binky_teardown(&adapter, &golden, &cfg)?;
    Ok(t)
}

// ---------------------------------------------------------------------------------------------
// Reporting.

fn machine(python: &str) -> Value {
    machine_with(json!({
        "rustc": capture("rustc", &["--version"]).unwrap_or_default(),
        "binky": env!("CARGO_PKG_VERSION"),
        "git_commit": capture("git", &["rev-parse", "--short", "HEAD"]).unwrap_or_default(),
        "binky012_python": capture(python, &["--version"]).unwrap_or_default(),
        "loadavg_at_start": loadavg(),
    }))
}

fn main() {
    install_signal_handlers();
    let args = or_exit(parse_args());
    let Some(python) = find_binky012().and_then(|b| python_of(&b)) else {
        eprintln!("{REF_HINT}");
        std::process::exit(1);
    };
    if let Err(e) = binky012_has_drivers(&python, &args.kinds) {
        eprintln!("{REF_HINT}\n\n{python}: {e}");
        std::process::exit(1);
    }
    exit_on_failure("adapters", bench(&args, &python));
}

/// Every server the selected adapters need, found before anything starts.
fn preflight(kinds: &[Kind]) -> Res<()> {
    let mut missing = Vec::new();
    for k in kinds {
        let ok = match k {
            Kind::Mysql => {
                find_program(&["mariadbd", "mysqld"]).is_some()
                    && find_program(&["mariadb-install-db", "mysql_install_db"]).is_some()
            }
            Kind::ClickHouse => {
                find_program(&["clickhouse-server"]).is_some()
                    && Path::new(CLICKHOUSE_CONFIG).is_file()
            }
            Kind::S3 => moto_binary().is_some(),
            Kind::RabbitMq => {
                Path::new(RABBITMQ_BIN).join("rabbitmq-server").is_file()
                    && find_program(&["epmd"]).is_some()
            }
            Kind::Kafka => tansu_binary().is_some(),
        };
        if !ok {
            missing.push(match k {
                Kind::Mysql => MARIADB_HINT,
                Kind::ClickHouse => CLICKHOUSE_HINT,
                Kind::S3 => MOTO_HINT,
                Kind::RabbitMq => RABBITMQ_HINT,
                Kind::Kafka => TANSU_HINT,
            });
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join("\n"))
    }
}

/// Measures `f` `n` times after one unmeasured call: ms.
fn sample(n: usize, mut f: impl FnMut()) -> Vec<f64> {
    f();
    (0..n)
        .map(|_| {
            let start = Instant::now();
            f();
            ms(start.elapsed())
        })
        .collect()
}

/// Times, in 0.1.2's interpreter, what its adapters redo in every verb without any server:
/// `ssl.create_default_context()` (PyMySQL 1.2 makes one in every `connect`) and
/// `boto3.client("s3", …)` (its s3 adapter makes one per verb).
const PY_REFERENCES: &str = r#"
import json, ssl, time
def t(f, n=20):
    f()
    s = []
    for _ in range(n):
        a = time.perf_counter(); f(); s.append((time.perf_counter() - a) * 1000)
    return s
out = {"ssl_create_default_context_ms": t(ssl.create_default_context)}
try:
    import boto3
    out["boto3_client_s3_ms"] = t(lambda: boto3.client("s3", region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9", aws_access_key_id="x", aws_secret_access_key="y"))
except ImportError:
    pass
print(json.dumps(out))
"#;

/// Costs inside the verbs that need no server, measured alone (20 samples each): binky's
/// `Http::new()` (the client of its REST adapters, clickhouse and rabbitmq here, made once
/// per verb; it loads the system's root certificates) and [`PY_REFERENCES`].
fn references(python: &str) -> Res<Vec<(&'static str, Vec<f64>)>> {
    let mut out = vec![(
        "binky: Http::new() (clickhouse, rabbitmq: once per verb)",
        sample(20, || drop(Http::new())),
    )];
    let run = Command::new(python)
        .args(["-c", PY_REFERENCES])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{python}: {e}"))?;
    let text = String::from_utf8_lossy(&run.stdout);
    let v: Value = serde_json::from_str(text.trim()).map_err(|e| {
        format!(
            "python references: {e}: {text}{}",
            String::from_utf8_lossy(&run.stderr)
        )
    })?;
    for (key, label) in [
        (
            "ssl_create_default_context_ms",
            "0.1.2: ssl.create_default_context() (PyMySQL, once per connect)",
        ),
        (
            "boto3_client_s3_ms",
            "0.1.2: boto3.client(\"s3\") (s3 adapter, once per verb)",
        ),
    ] {
        if let Some(a) = v[key].as_array() {
            out.push((label, a.iter().filter_map(Value::as_f64).collect()));
        }
    }
    Ok(out)
}

fn bench(args: &Args, python: &str) -> Res<()> {
    preflight(&args.kinds)?;
    let machine = machine(python);
    eprintln!("machine: {machine}");
    let refs = references(python)?;
    let mut outcomes = Vec::new();
    for kind in &args.kinds {
        outcomes.push(measure(*kind, python, args)?);
    }

    // ------------------------------------------------------------------ report
    let n = args.worlds;
    let mut t = Table::with_columns("adapter: verb", &MEDIAN_P90_COLUMNS, &[]);
    let mut json_adapters = serde_json::Map::new();
    let mut clean = true;
    for o in &outcomes {
        let a = o.kind.name();
        let py_measured = o.py.up.len() == n;
        for (verb, b, p) in [
            ("provision + resolve", &o.binky.up, &o.py.up),
            ("teardown", &o.binky.down, &o.py.down),
        ] {
            let (pm, pp) = if py_measured {
                (median(p), p90(p))
            } else {
                (f64::NAN, f64::NAN)
            };
            t.row(&[
                &format!("{a}: {verb}"),
                &fmt_ms(median(b)),
                &fmt_ms(p90(b)),
                &fmt_ms(pm),
                &fmt_ms(pp),
                &ratio_places(median(b), pm, 2),
            ]);
        }
        if let Some(c) = &o.clone {
            for (verb, v) in [
                ("clone + resolve", &c.up),
                ("teardown of the copy", &c.down),
            ] {
                t.row(&[
                    &format!("mysql clone of a {GOLDEN_ROWS}-row golden db: {verb}"),
                    &fmt_ms(median(v)),
                    &fmt_ms(p90(v)),
                    "binky only",
                    "",
                    "",
                ]);
            }
        }
        if o.py_error.is_some() || !o.problems.is_empty() || !o.leftovers.is_empty() {
            clean = false;
        }
        let py_json = if py_measured {
            json!({
                "provision_resolve_ms": summary(&o.py.up),
                "teardown_ms": summary(&o.py.down),
            })
        } else {
            Value::Null
        };
        json_adapters.insert(
            a.to_owned(),
            json!({
                "server": o.server,
                "binky": {
                    "provision_resolve_ms": summary(&o.binky.up),
                    "teardown_ms": summary(&o.binky.down),
                },
                "binky012": py_json,
                "binky012_error": o.py_error,
                "binky012_driver": o.py_info,
                "ratios_binky_over_012": {
                    "provision_resolve": if py_measured { ratio_value(median(&o.binky.up), median(&o.py.up)) } else { Value::Null },
                    "teardown": if py_measured { ratio_value(median(&o.binky.down), median(&o.py.down)) } else { Value::Null },
                },
                "mysql_clone_golden_rows": o.clone.as_ref().map(|_| GOLDEN_ROWS),
                "binky_clone": o.clone.as_ref().map(|c| json!({
                    "clone_resolve_ms": summary(&c.up),
                    "teardown_ms": summary(&c.down),
                })),
                "slices_checked_incl_warmup": o.checked,
                "slice_problems": o.problems,
                "server_leftovers_after_run": o.leftovers,
            }),
        );
    }

    println!();
    println!(
        "{n} worlds per adapter and tool, one at a time, after one warm-up each; p90 = nearest rank"
    );
    println!("{}", t.render());
    println!(
        "binky: this crate's adapter called in process (fresh tokio runtime per verb, not timed); \
         0.1.2: its adapter in one long-lived python process per adapter, timed inside python"
    );
    for o in &outcomes {
        let a = o.kind.name();
        println!("{a}: server {}", o.server);
        if let Some(e) = &o.py_error {
            println!("{a}: binky 0.1.2 not measured: {e}");
        }
        let checked: Vec<String> = o.checked.iter().map(|(k, v)| format!("{k} {v}")).collect();
        if o.problems.is_empty() {
            println!(
                "{a}: every slice was on the server after provision and gone after teardown \
                 (checked: {})",
                checked.join(", ")
            );
        } else {
            println!("{a}: {} problem(s) with slices:", o.problems.len());
            for p in &o.problems {
                println!("  {p}");
            }
        }
        if o.leftovers.is_empty() {
            println!("{a}: the server after the run held exactly what it held before it");
        } else {
            for l in &o.leftovers {
                println!("{a}: {l}");
            }
        }
    }
    let mut r = Table::new(&["reference, no server (20 samples)", "median", "p90"]);
    for (label, v) in &refs {
        r.row(&[label, &fmt_ms(median(v)), &fmt_ms(p90(v))]);
    }
    println!();
    println!("{}", r.render());
    println!("load average at the end: {}", loadavg());

    if let Some(path) = &args.json {
        let report = json!({
            "settings": {
                "worlds": n,
                "warmup_worlds": 1,
                "adapters": args.kinds.iter().map(|k| k.name()).collect::<Vec<_>>(),
                "binky_slice_names": format!("bk_{PROJECT}_<world>_<service>"),
                "binky012_slice_names": format!("{PY_PROJECT}_<world>"),
                "s3_buckets_option": ["uploads"],
                "kafka_topics_option": KAFKA_TOPICS,
                "mariadb_flags": "--no-defaults --skip-name-resolve --character-set-server=utf8mb4 --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --innodb-buffer-pool-size=64M",
                "tansu_storage": "memory://tansu/",
                "p90": "nearest rank, ceil(0.9 n)-th smallest",
                "binky_timing": "Instant around the awaited verbs, in process, fresh current-thread runtime per verb",
                "binky012_timing": "time.perf_counter around adapters.get + verbs, in one python process per adapter",
            },
            "adapters": Value::Object(json_adapters),
            "references_no_server": refs.iter().map(|(l, v)| json!({ "what": l, "ms": summary(v) })).collect::<Vec<_>>(),
            "clean": clean,
        });
        binky_testkit::stats::write_results(path, "adapters", &machine, report)?;
    }
    Ok(())
}
