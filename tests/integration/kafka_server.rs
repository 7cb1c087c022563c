//! Kafka: a private tansu broker per test (the [`KafkaServer`] fixture), in memory, on a
//! free loopback port, stopped on drop.
//!
//! tansu (a Kafka-protocol broker written in Rust) is built once by `./scripts/test` into
//! `~/.cache/binky-test/bin/tansu`, which exports its path as `BINKY_TEST_TANSU`. Without
//! it the tests fail (never skip).

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use binky::adapters::kafka::Kafka;
use binky::adapters::{Adapter, AdapterConfig, Address, Slice};
use rskafka::client::partition::{Compression, OffsetAt, UnknownTopicHandling};
use rskafka::client::Client;
use rskafka::record::Record;

pub use crate::redis_server::{block, free_port, slice};

/// A private tansu broker with in-memory storage on 127.0.0.1 (the kit's), with the
/// adapter's view of it. Stopped on drop.
pub struct KafkaServer(binky_testkit::servers::tansu::TansuServer);

impl std::ops::Deref for KafkaServer {
    type Target = binky_testkit::servers::tansu::TansuServer;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

pub use binky_testkit::servers::tansu::connect;

/// The tansu binary: `$BINKY_TEST_TANSU`, else the test command's cache, else `PATH`;
/// panics with the install hint.
pub fn tansu_binary() -> PathBuf {
    binky_testkit::servers::tansu::tansu_binary()
        .unwrap_or_else(|| panic!("{}", binky_testkit::servers::tansu::MISSING))
}

impl KafkaServer {
    /// Start one; panics (failing the test) when tansu is missing or does not come up.
    pub fn start() -> KafkaServer {
        tansu_binary();
        KafkaServer(
            binky_testkit::servers::tansu::TansuServer::start().unwrap_or_else(|e| panic!("{e}")),
        )
    }

    /// Start one on `port`; panics when it does not come up.
    pub fn start_on(port: u16) -> KafkaServer {
        tansu_binary();
        KafkaServer(
            binky_testkit::servers::tansu::TansuServer::start_on(port)
                .unwrap_or_else(|log| panic!("tansu did not start on port {port}: {log}")),
        )
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
