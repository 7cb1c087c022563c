//! Kafka: a private tansu broker per test (the [`KafkaServer`] fixture), in memory, on a
//! free loopback port, stopped on drop.
//!
//! tansu (a Kafka-protocol broker written in Rust) is built once by `./scripts/test` into
//! `~/.cache/binky-test/bin/tansu`, which exports its path as `BINKY_TEST_TANSU`. Without
//! it the tests fail (never skip).

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use binky::adapters::kafka::Kafka;
use binky::adapters::{Adapter, AdapterConfig, Address, Slice};
use rskafka::client::partition::{Compression, OffsetAt, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::Record;

pub use crate::redis_server::{block, free_port, slice};

/// A private tansu broker with in-memory storage on 127.0.0.1. Stopped on drop.
pub struct KafkaServer {
    /// `kafka://127.0.0.1:<port>`.
    pub admin_url: String,
    /// `127.0.0.1:<port>`.
    pub bootstrap: String,
    /// Its port.
    pub port: u16,
    /// Its directory (output in `tansu.log`).
    pub dir: PathBuf,
    child: Child,
    _tmp: tempfile::TempDir,
}

/// The tansu binary: `$BINKY_TEST_TANSU`, else the test command's cache, else `PATH`.
pub fn tansu_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("BINKY_TEST_TANSU").map(PathBuf::from) {
        if p.is_file() {
            return p;
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        let cached = PathBuf::from(home).join(".cache/binky-test/bin/tansu");
        if cached.is_file() {
            return cached;
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        if let Some(p) = std::env::split_paths(&path)
            .map(|d| d.join("tansu"))
            .find(|p| p.is_file())
        {
            return p;
        }
    }
    panic!(
        "tansu (the Kafka-protocol broker the kafka tests run against) is not installed: run \
         ./scripts/test, which builds tansu into ~/.cache/binky-test/bin (once, ~20 min), or \
         set BINKY_TEST_TANSU to a tansu binary"
    );
}

impl KafkaServer {
    /// Start one; panics (failing the test) when tansu is missing or does not come up.
    pub fn start() -> KafkaServer {
        // A port taken between the probe and the bind makes tansu exit: try another.
        let mut log = String::new();
        for _ in 0..5 {
            match KafkaServer::try_start(free_port()) {
                Ok(server) => return server,
                Err(text) => log = text,
            }
        }
        panic!("tansu did not start: {log}");
    }

    /// Start one on `port`; panics when it does not come up.
    pub fn start_on(port: u16) -> KafkaServer {
        KafkaServer::try_start(port)
            .unwrap_or_else(|log| panic!("tansu did not start on port {port}: {log}"))
    }

    /// Start one on `port`; its output when it does not come up.
    fn try_start(port: u16) -> Result<KafkaServer, String> {
        let bin = tansu_binary();
        let tmp = tempfile::tempdir().expect("temp dir");
        let log = tmp.path().join("tansu.log");
        let listener = format!("tcp://127.0.0.1:{port}");
        let out = std::fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let mut child = Command::new(&bin)
            .arg("broker")
            .args(["--listener-url", &listener])
            .args(["--advertised-listener-url", &listener])
            .args(["--storage-engine", "memory://tansu/"])
            .args(["--cluster-id", "binky-test"])
            .current_dir(tmp.path())
            .env_remove("CLUSTER_ID")
            .env_remove("STORAGE_ENGINE")
            .env_remove("SCHEMA_REGISTRY")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let bootstrap = format!("127.0.0.1:{port}");
        if wait_ready(&mut child, &bootstrap) {
            return Ok(KafkaServer {
                admin_url: format!("kafka://{bootstrap}"),
                bootstrap,
                port,
                dir: tmp.path().to_owned(),
                child,
                _tmp: tmp,
            });
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(std::fs::read_to_string(&log).unwrap_or_default())
    }

    /// The adapter configuration for this broker, with `topics` (comma list) to create.
    pub fn cfg(&self, topics: &str) -> AdapterConfig {
        let mut cfg = AdapterConfig {
            admin_url: Some(self.admin_url.clone()),
            ..AdapterConfig::default()
        };
        if !topics.is_empty() {
            cfg.options.insert("topics".into(), topics.into());
        }
        cfg
    }

    /// A client of the broker.
    pub async fn client(&self) -> Client {
        connect(&self.bootstrap)
            .await
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.bootstrap))
    }

    /// Every topic's name.
    pub fn topics(&self) -> BTreeSet<String> {
        block(async {
            self.client()
                .await
                .list_topics()
                .await
                .expect("list topics")
                .into_iter()
                .map(|t| t.name)
                .collect()
        })
    }

    /// The topics starting with `prefix` (as given: add the `.` to mean a slice's).
    pub fn topics_with(&self, prefix: &str) -> BTreeSet<String> {
        self.topics()
            .into_iter()
            .filter(|t| t.starts_with(prefix))
            .collect()
    }

    /// The partition count of `topic`, `None` when it does not exist.
    pub fn partitions(&self, topic: &str) -> Option<usize> {
        block(async {
            self.client()
                .await
                .list_topics()
                .await
                .expect("list topics")
                .into_iter()
                .find(|t| t.name == topic)
                .map(|t| t.partitions.len())
        })
    }

    /// Produce one record with `value` to partition 0 of `topic`; its offset.
    pub fn produce(&self, topic: &str, value: &str) -> i64 {
        block(async {
            let client = self.client().await;
            let partition = client
                .partition_client(topic, 0, UnknownTopicHandling::Error)
                .await
                .unwrap_or_else(|e| panic!("partition client for {topic}: {e}"));
            let record = Record {
                key: None,
                value: Some(value.as_bytes().to_vec()),
                headers: Default::default(),
                timestamp: rskafka::chrono::Utc::now(),
            };
            partition
                .produce(vec![record], Compression::NoCompression)
                .await
                .unwrap_or_else(|e| panic!("produce to {topic}: {e}"))[0]
        })
    }

    /// Every record value in partition 0 of `topic`.
    pub fn values(&self, topic: &str) -> Vec<String> {
        block(async {
            let client = self.client().await;
            let partition = client
                .partition_client(topic, 0, UnknownTopicHandling::Error)
                .await
                .unwrap_or_else(|e| panic!("partition client for {topic}: {e}"));
            let end = partition
                .get_offset(OffsetAt::Latest)
                .await
                .unwrap_or_else(|e| panic!("latest offset of {topic}: {e}"));
            let mut offset = partition
                .get_offset(OffsetAt::Earliest)
                .await
                .unwrap_or_else(|e| panic!("earliest offset of {topic}: {e}"));
            let mut values = Vec::new();
            while offset < end {
                let (records, _) = partition
                    .fetch_records(offset, 1..1_000_000, 1_000)
                    .await
                    .unwrap_or_else(|e| panic!("fetch from {topic}: {e}"));
                if records.is_empty() {
                    break;
                }
                for r in records {
                    offset = r.offset + 1;
                    values
                        .push(String::from_utf8_lossy(&r.record.value.unwrap_or_default()).into());
                }
            }
            values
        })
    }
}

impl Drop for KafkaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client of `bootstrap` that gives up within seconds.
pub async fn connect(bootstrap: &str) -> Result<Client, rskafka::client::error::Error> {
    let backoff = rskafka::BackoffConfig {
        deadline: Some(Duration::from_secs(5)),
        ..Default::default()
    };
    ClientBuilder::new(vec![bootstrap.to_owned()])
        .backoff_config(backoff)
        .build()
        .await
}

/// Wait until the broker answers a metadata request, or the child exits.
fn wait_ready(child: &mut Child, bootstrap: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return false;
        }
        let port = bootstrap
            .rsplit(':')
            .next()
            .and_then(|p| p.parse::<u16>().ok());
        let listening = port.is_some_and(|p| {
            std::net::TcpStream::connect_timeout(
                &([127, 0, 0, 1], p).into(),
                Duration::from_millis(200),
            )
            .is_ok()
        });
        if listening {
            let ready = block(async {
                tokio::time::timeout(Duration::from_secs(5), async {
                    connect(bootstrap).await.ok()?.list_topics().await.ok()
                })
                .await
                .ok()
                .flatten()
                .is_some()
            });
            if ready {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Provision `slice` with `topics` on `server` and return its address.
pub fn provisioned(server: &KafkaServer, slice: &Slice, topics: &str) -> Address {
    block(async {
        Kafka
            .provision(slice, &server.cfg(topics))
            .await
            .expect("provision");
        Kafka
            .resolve(slice, &server.cfg(topics))
            .await
            .expect("resolve")
    })
}
